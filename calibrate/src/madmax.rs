//! A MAD-Max system configuration whose utilization factors are the fitted ones.
//!
//! MAD-Max (Hsia et al., ISCA 2024) describes a cluster with peak FLOP/s per
//! dtype, one `flops_util`, HBM bandwidth and `mem_bw_util`, NVLink and NIC
//! bandwidths with a utilization each. Here the peaks come from the catalog
//! and the utilizations from a [`Profile`]: `flops_util` = fitted 16-bit GEMM
//! efficiency (bf16, else fp16) relative to the `f16_flops` written, `mem_bw_util` = elementwise
//! efficiency, `nvlink_util` / `ibroce_util` = fitted bus bandwidth over
//! nominal, intra- and inter-node. Missing fits keep MAD-Max's defaults and
//! are named in `tracecast_notes`.

use serde_json::{Value, json};

use crate::catalog::{Catalog, Dtype};
use crate::profile::Profile;
use crate::work::KernelClass;

/// MAD-Max's own hand-set factors, used where the traces support no fit.
const DEFAULT_FLOPS_UTIL: f64 = 0.705;
const DEFAULT_MEM_BW_UTIL: f64 = 0.836;
const DEFAULT_NVLINK_UTIL: f64 = 0.6667;
const DEFAULT_IB_UTIL: f64 = 0.56;

/// The system configuration for `nodes` nodes of the profile's device.
pub fn system_config(profile: &Profile, catalog: &Catalog, nodes: u32) -> Value {
    let mut notes = Vec::new();
    let gpu = profile.device.catalog_id.as_deref().and_then(|id| catalog.gpu(id).ok());
    let node = gpu.and_then(|g| catalog.node_of(&g.id));
    let gpus_per_node = node.map_or(profile.device.gpus_per_node, |n| n.gpus);
    // MAD-Max applies its one flops_util to f16_flops for 16-bit models (what it
    // projects), so only a 16-bit GEMM fit maps onto it: its η is rescaled from
    // the peak it was fitted against to the f16_flops written. A 32-bit fit is
    // named but not used (TF32/FP32 efficiencies say nothing of 16-bit tensor cores).
    let f16_peak = gpu.and_then(|g| g.peak_flops(Dtype::Bf16).or(g.peak_flops(Dtype::Fp16)));
    let gemm_fit = |dtypes: &[Dtype]| {
        dtypes
            .iter()
            .find_map(|d| profile.kernels.iter().find(|k| k.class == KernelClass::Gemm && k.dtype == Some(*d) && k.efficiency <= 1.0))
    };
    let gemm = gemm_fit(&[Dtype::Bf16, Dtype::Fp16]).and_then(|k| {
        let peak = f16_peak?;
        let eta = k.efficiency * k.peak * 1e12 / peak;
        notes.push(format!(
            "flops_util: the GEMM efficiency fitted on {} ({:.3} of its {:.1} TFLOP/s peak) as a fraction of f16_flops {:.1} TFLOP/s",
            k.dtype.map_or("?", Dtype::as_str),
            k.efficiency,
            k.peak,
            peak / 1e12
        ));
        Some(eta)
    });
    if gemm.is_none()
        && let Some(k) = gemm_fit(&[Dtype::Tf32, Dtype::Fp32])
    {
        notes.push(format!(
            "flops_util: the traces fitted GEMMs in {} only ({:.3} of the {:.1} TFLOP/s {} peak); MAD-Max applies flops_util to f16_flops for 16-bit models, so that fit is not used",
            k.dtype.map_or("?", Dtype::as_str),
            k.efficiency,
            k.peak,
            k.peak_of
        ));
    }
    let mem = profile
        .kernels
        .iter()
        .filter(|k| k.class == KernelClass::Elementwise && k.efficiency <= 1.0)
        .map(|k| k.efficiency)
        .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))));
    let link = |domain: &str| {
        profile
            .links
            .iter()
            .filter(|l| l.domain == domain)
            .filter_map(|l| l.efficiency)
            .filter(|e| *e <= 1.0)
            .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))))
    };
    let mut pick = |name: &str, fitted: Option<f64>, default: f64| {
        fitted.unwrap_or_else(|| {
            notes.push(format!("{name}: no fit in the traces, MAD-Max default {default}"));
            default
        })
    };
    let flops_util = pick("flops_util", gemm, DEFAULT_FLOPS_UTIL);
    let mem_bw_util = pick("mem_bw_util", mem, DEFAULT_MEM_BW_UTIL);
    let nvlink_util = pick("nvlink_util", link("intra"), DEFAULT_NVLINK_UTIL);
    let ibroce_util = pick("ibroce_util", link("inter"), DEFAULT_IB_UTIL);
    let peak = |d: Dtype| gpu.and_then(|g| g.peak_flops(d)).unwrap_or(0.0);
    // MAD-Max's share of all-reduce traffic on intra-node links: all of it on
    // one node; across nodes, the intra-node hops of a ring over the GPUs.
    let ar_perc_intra = if nodes <= 1 { 1.0 } else { f64::from(gpus_per_node.saturating_sub(1)) / f64::from(gpus_per_node.max(1)) };
    if nodes > 1 {
        notes.push(format!("ar_perc_intra: {ar_perc_intra:.4}, the intra-node hops of a ring over {gpus_per_node} GPUs per node"));
    }
    json!({
        "name": format!("tracecast-{}-{}", profile.device.catalog_id.as_deref().unwrap_or("unknown"), nodes * gpus_per_node),
        "type": "GPU",
        "num_devices": nodes * gpus_per_node,
        "num_nodes": nodes,
        "f64_flops": peak(Dtype::Fp64),
        // MAD-Max's "f32" is the tensor-core rate (TF32) where one exists.
        "f32_flops": gpu.and_then(|g| g.peak_flops(Dtype::Tf32).or(g.peak_flops(Dtype::Fp32))).unwrap_or(0.0),
        "f16_flops": gpu.and_then(|g| g.peak_flops(Dtype::Bf16).or(g.peak_flops(Dtype::Fp16))).unwrap_or(0.0),
        "i8_ops": peak(Dtype::Int8),
        "flops_util": flops_util,
        "mem_cap": gpu.map_or(0.0, |g| g.memory_gb * 1e9),
        "mem_bw": gpu.map_or(0.0, |g| g.hbm_gbps * 1e9),
        "mem_bw_util": mem_bw_util,
        // One logical link per GPU; MAD-Max reads link rates as bidirectional
        // (it halves them), the catalog's are per direction.
        "num_nvlinks": 1,
        "bw_per_nvlink": gpu.map_or(0.0, |g| 2.0 * g.link_gbps * 1e9),
        "nvlink_util": nvlink_util,
        "num_ibroce_ports": node.map_or(gpus_per_node, |n| n.nics),
        "ibroce_bw": node.map_or(0.0, |n| 2.0 * n.nic_gbps * 1e9),
        "ibroce_util": ibroce_util,
        "ar_perc_intra": ar_perc_intra,
        "tracecast_notes": notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flops_util_is_a_16_bit_fit_relative_to_the_16_bit_peak() {
        let catalog = Catalog::builtin();
        // H100's shipped profile fits BF16 GEMMs against the BF16 peak, which is f16_flops.
        let h100 = crate::shipped::profile("h100-sxm").unwrap();
        let fit = h100.kernels.iter().find(|k| k.class == KernelClass::Gemm && k.dtype == Some(Dtype::Bf16)).unwrap();
        let s = system_config(&h100, &catalog, 1);
        let f16 = s["f16_flops"].as_f64().unwrap();
        assert!((s["flops_util"].as_f64().unwrap() - fit.efficiency * fit.peak * 1e12 / f16).abs() < 1e-12, "{s}");
        // A100-40GB's traces fitted FP32 GEMMs only: η 0.43 of 19.5 TFLOP/s would be 3 % of the
        // 16-bit peak MAD-Max applies it to; its default is kept and the file says why.
        let a100 = crate::shipped::profile("a100-40gb").unwrap();
        let s = system_config(&a100, &catalog, 1);
        assert_eq!(s["flops_util"].as_f64(), Some(DEFAULT_FLOPS_UTIL), "{s}");
        let notes = s["tracecast_notes"].to_string();
        assert!(notes.contains("fitted GEMMs in fp32 only") && notes.contains("not used"), "{notes}");
    }
}
