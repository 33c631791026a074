//! A MAD-Max system configuration whose utilization factors are the fitted ones.
//!
//! MAD-Max (Hsia et al., ISCA 2024) describes a cluster with peak FLOP/s per
//! dtype, one `flops_util`, HBM bandwidth and `mem_bw_util`, NVLink and NIC
//! bandwidths with a utilization each. Here the peaks come from the catalog
//! and the utilizations from a [`Profile`]: `flops_util` = fitted 16-bit GEMM
//! efficiency (bf16, else fp16) relative to the `f16_flops` written, `mem_bw_util` = elementwise
//! efficiency (else the reductions'), `nvlink_util` / `ibroce_util` = fitted bus bandwidth over
//! nominal, intra- and inter-node. Missing fits keep MAD-Max's defaults and
//! are named in `tracecast_notes`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::{Catalog, Dtype};
use crate::profile::Profile;
use crate::work::KernelClass;

/// A MAD-Max system description.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SystemConfig {
    /// Name.
    pub name: String,
    /// GPUs.
    pub num_devices: u32,
    /// Nodes.
    pub num_nodes: u32,
    /// Peak FLOP/s per dtype.
    pub f64_flops: f64,
    /// FP32 (TF32) peak.
    pub f32_flops: f64,
    /// FP16/BF16 peak.
    pub f16_flops: f64,
    /// INT8 peak.
    pub i8_ops: f64,
    /// Achieved fraction of peak.
    pub flops_util: f64,
    /// HBM bytes.
    pub mem_cap: f64,
    /// HBM bytes/s.
    pub mem_bw: f64,
    /// Achieved fraction of HBM bandwidth.
    pub mem_bw_util: f64,
    /// NVLinks per GPU.
    #[serde(serialize_with = "counted")]
    pub num_nvlinks: f64,
    /// Bidirectional bytes/s per NVLink.
    pub bw_per_nvlink: f64,
    /// Achieved fraction of NVLink bandwidth.
    pub nvlink_util: f64,
    /// NIC ports per node.
    #[serde(serialize_with = "counted")]
    pub num_ibroce_ports: f64,
    /// Bidirectional bytes/s per port.
    pub ibroce_bw: f64,
    /// Achieved fraction of NIC bandwidth.
    pub ibroce_util: f64,
    /// Share of all-reduce traffic inside a node.
    pub ar_perc_intra: f64,
}

impl SystemConfig {
    /// The dense FLOP/s peak for parameters of `bytes_per_param` bytes (8, 4, 2, 1),
    /// above 0: the one rule both assumptions price compute with.
    pub fn peak_for(&self, bytes_per_param: f64) -> std::result::Result<f64, String> {
        let peak = match bytes_per_param as u32 {
            8 => self.f64_flops,
            4 => self.f32_flops,
            2 => self.f16_flops,
            1 => self.i8_ops,
            _ => return Err(format!("{bytes_per_param} bytes per dense parameter: no matching peak")),
        };
        if !(peak.is_finite() && peak > 0.0) {
            return Err(format!("{}: the peak for {bytes_per_param} bytes per dense parameter is {peak}: above 0", self.name));
        }
        Ok(peak)
    }

    /// Bytes/s a GPU sends one way in a node and across nodes, as MAD-Max reads the file: half
    /// its link rates (they state both directions) × their utilization, the NICs shared by the
    /// node's GPUs. The one rule of both assumptions.
    pub fn link_rates_bps(&self) -> (f64, f64) {
        let per_node = f64::from((self.num_devices / self.num_nodes.max(1)).max(1));
        let intra = self.num_nvlinks * (self.bw_per_nvlink / 2.0) * self.nvlink_util;
        let inter = self.num_ibroce_ports * (self.ibroce_bw / 2.0) * self.ibroce_util / per_node;
        (intra, inter)
    }

    /// Why this system cannot price anything (a utilization of 0 or above 1, no
    /// memory bandwidth, nodes that do not hold the GPUs, a link of no bandwidth
    /// where the system needs it: projections printed NaN and negative times);
    /// `None` when it can.
    pub fn unpriceable(&self) -> Option<String> {
        let name = &self.name;
        if self.num_devices == 0 || self.num_nodes == 0 || !self.num_devices.is_multiple_of(self.num_nodes) {
            return Some(format!(
                "{name}: {} GPUs in {} nodes: at least one node, each of the same number of GPUs",
                self.num_devices, self.num_nodes
            ));
        }
        let fractions = [
            ("flops_util", self.flops_util),
            ("mem_bw_util", self.mem_bw_util),
            ("nvlink_util", self.nvlink_util),
            ("ibroce_util", self.ibroce_util),
        ];
        if let Some((key, v)) = fractions.iter().find(|(_, v)| !(v.is_finite() && *v > 0.0 && *v <= 1.0)) {
            return Some(format!("{name}: {key} {v}: a fraction in (0, 1]"));
        }
        if !(self.ar_perc_intra.is_finite() && (0.0..=1.0).contains(&self.ar_perc_intra)) {
            return Some(format!("{name}: ar_perc_intra {}: a fraction in [0, 1]", self.ar_perc_intra));
        }
        let positive = [("mem_bw", self.mem_bw), ("mem_cap", self.mem_cap)];
        if let Some((key, v)) = positive.iter().find(|(_, v)| !(v.is_finite() && *v > 0.0)) {
            return Some(format!("{name}: {key} {v}: above 0"));
        }
        let at_least_0 = [
            ("f64_flops", self.f64_flops),
            ("f32_flops", self.f32_flops),
            ("f16_flops", self.f16_flops),
            ("i8_ops", self.i8_ops),
            ("num_nvlinks", self.num_nvlinks),
            ("bw_per_nvlink", self.bw_per_nvlink),
            ("num_ibroce_ports", self.num_ibroce_ports),
            ("ibroce_bw", self.ibroce_bw),
        ];
        if let Some((key, v)) = at_least_0.iter().find(|(_, v)| !(v.is_finite() && *v >= 0.0)) {
            return Some(format!("{name}: {key} {v}: 0 or more"));
        }
        if self.num_devices > self.num_nodes && self.num_nvlinks * self.bw_per_nvlink <= 0.0 {
            return Some(format!("{name}: several GPUs per node and no NVLink bandwidth (num_nvlinks × bw_per_nvlink)"));
        }
        if self.num_nodes > 1 && self.num_ibroce_ports * self.ibroce_bw <= 0.0 {
            return Some(format!("{name}: several nodes and no network bandwidth (num_ibroce_ports × ibroce_bw)"));
        }
        None
    }
}

/// A count MAD-Max's files write as an integer (`"num_nvlinks": 1`), read as a number.
fn counted<S: serde::Serializer>(n: &f64, s: S) -> Result<S::Ok, S::Error> {
    if n.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(n) { s.serialize_u64(*n as u64) } else { s.serialize_f64(*n) }
}

/// MAD-Max's own hand-set factors, used where the traces support no fit.
const DEFAULT_FLOPS_UTIL: f64 = 0.705;
const DEFAULT_MEM_BW_UTIL: f64 = 0.836;
const DEFAULT_NVLINK_UTIL: f64 = 0.6667;
const DEFAULT_IB_UTIL: f64 = 0.56;

/// The system configuration file for `nodes` nodes of the profile's device
/// (MAD-Max's keys, `type` and `tracecast_notes`), or why it could not price.
pub fn system_config(profile: &Profile, catalog: &Catalog, nodes: u32) -> Result<Value, String> {
    let mut notes = Vec::new();
    // Without the catalog's GPU there are no peaks to write (a system of 0 bandwidth had followed).
    if profile.device.catalog_id.is_none() {
        return Err("the traces' device is not in the hardware catalog, so its peaks are unknown (name a catalog GPU with --device ID, or add one with --hw FILE)".into());
    }
    let gpu = profile.device.catalog_id.as_deref().and_then(|id| catalog.gpu(id).ok());
    let node = gpu.and_then(|g| catalog.node_of(&g.id));
    // The profile's, the one rule (`--gpus-per-node`, else the node preset's): the preset's had
    // replaced a given 4 by 8.
    let gpus_per_node = profile.device.gpus_per_node.max(1);
    let devices = nodes
        .checked_mul(gpus_per_node)
        .ok_or_else(|| format!("{nodes} nodes × {gpus_per_node} GPUs per node: more GPUs than a count holds (it had wrapped round)"))?;
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
    let memory_fit = |class: KernelClass| {
        profile
            .kernels
            .iter()
            .filter(|k| k.class == class && k.efficiency <= 1.0)
            .map(|k| k.efficiency)
            .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))))
    };
    // The elementwise fit, else the reduction one (both stream HBM): a V100 profile whose
    // reductions fitted η 0.574 had kept MAD-Max's default, saying "no fit in the traces".
    let mem = memory_fit(KernelClass::Elementwise).or_else(|| {
        let r = memory_fit(KernelClass::Reduction)?;
        notes.push(format!("mem_bw_util: the reduction kernels' fitted HBM efficiency {r:.3} (no elementwise fit)"));
        Some(r)
    });
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
    // The hardware figures and what MAD-Max's schema cannot hold, said (they had gone unsaid).
    notes.push(format!(
        "num_nvlinks, bw_per_nvlink, num_ibroce_ports, ibroce_bw: the catalog's {} and its node preset's NICs, each link rate written as both directions (twice the catalog's per-direction rate), which MAD-Max halves",
        profile.device.catalog_id.as_deref().unwrap_or("GPU")
    ));
    let alphas: Vec<String> = profile
        .links
        .iter()
        .filter(|l| l.efficiency.is_some_and(|e| e <= 1.0))
        .map(|l| format!("{} {} α {:.1} µs", l.collective.as_str(), l.domain, l.alpha_us))
        .collect();
    if !alphas.is_empty() {
        notes.push(format!(
            "latency: the fitted {} is not carried (MAD-Max's system files have no latency key; `project --madmax` adds its own per collective)",
            alphas.join(", ")
        ));
    }
    let system = SystemConfig {
        name: format!("tracecast-{}-{}", profile.device.catalog_id.as_deref().unwrap_or("unknown"), devices),
        num_devices: devices,
        num_nodes: nodes,
        f64_flops: peak(Dtype::Fp64),
        // MAD-Max's "f32" is the tensor-core rate (TF32) where one exists.
        f32_flops: gpu.and_then(|g| g.peak_flops(Dtype::Tf32).or(g.peak_flops(Dtype::Fp32))).unwrap_or(0.0),
        f16_flops: gpu.and_then(|g| g.peak_flops(Dtype::Bf16).or(g.peak_flops(Dtype::Fp16))).unwrap_or(0.0),
        i8_ops: peak(Dtype::Int8),
        flops_util,
        mem_cap: gpu.map_or(0.0, |g| g.memory_gb * 1e9),
        mem_bw: gpu.map_or(0.0, |g| g.hbm_gbps * 1e9),
        mem_bw_util,
        // One logical link per GPU; MAD-Max reads link rates as bidirectional
        // (it halves them), the catalog's are per direction.
        num_nvlinks: 1.0,
        bw_per_nvlink: gpu.map_or(0.0, |g| 2.0 * g.link_gbps * 1e9),
        nvlink_util,
        // The preset's NICs per GPU over the node's GPUs.
        num_ibroce_ports: node
            .map_or(f64::from(gpus_per_node), |n| f64::from(n.nics) * f64::from(gpus_per_node) / f64::from(n.gpus.max(1))),
        ibroce_bw: node.map_or(0.0, |n| 2.0 * n.nic_gbps * 1e9),
        ibroce_util,
        ar_perc_intra,
    };
    // What `project --madmax` would refuse to read is not made (a GPU the catalog lacks has no memory figures).
    if let Some(why) = system.unpriceable() {
        return Err(why);
    }
    let mut file = serde_json::to_value(&system).map_err(|e| e.to_string())?;
    if let Value::Object(keys) = &mut file {
        keys.insert("type".into(), "GPU".into());
        keys.insert("tracecast_notes".into(), notes.into());
    }
    Ok(file)
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
        let s = system_config(&h100, &catalog, 1).unwrap();
        let f16 = s["f16_flops"].as_f64().unwrap();
        assert!((s["flops_util"].as_f64().unwrap() - fit.efficiency * fit.peak * 1e12 / f16).abs() < 1e-12, "{s}");
        // A100-40GB's traces fitted FP32 GEMMs only: η 0.43 of 19.5 TFLOP/s would be 3 % of the
        // 16-bit peak MAD-Max applies it to; its default is kept and the file says why.
        let a100 = crate::shipped::profile("a100-40gb").unwrap();
        let s = system_config(&a100, &catalog, 1).unwrap();
        assert_eq!(s["flops_util"].as_f64(), Some(DEFAULT_FLOPS_UTIL), "{s}");
        let notes = s["tracecast_notes"].to_string();
        assert!(notes.contains("fitted GEMMs in fp32 only") && notes.contains("not used"), "{notes}");
    }

    /// Without an elementwise fit, `mem_bw_util` is the reductions' fitted HBM efficiency, said
    /// (it had kept MAD-Max's default, saying "no fit in the traces").
    #[test]
    fn mem_bw_util_falls_back_to_the_reduction_fit() {
        let catalog = Catalog::builtin();
        let mut p = crate::shipped::profile("h100-sxm").unwrap();
        let elementwise = p.kernels.iter().find(|k| k.class == KernelClass::Elementwise).unwrap().clone();
        p.kernels.retain(|k| k.class != KernelClass::Elementwise && k.class != KernelClass::Reduction);
        p.kernels.push(crate::profile::KernelFit { class: KernelClass::Reduction, efficiency: 0.574, ..elementwise });
        let s = system_config(&p, &catalog, 1).unwrap();
        assert_eq!(s["mem_bw_util"].as_f64(), Some(0.574), "{s}");
        assert!(s["tracecast_notes"].to_string().contains("reduction kernels' fitted HBM efficiency 0.574"), "{s}");
    }

    /// A system's size is the profile's GPUs per node (`--gpus-per-node 4` of a DGX H100 had
    /// written 8), and a count past u32 is refused (2^29 nodes × 8 had written 0 GPUs).
    #[test]
    fn the_system_is_the_profiles_gpus_per_node_and_refuses_a_count_past_u32() {
        let catalog = Catalog::builtin();
        let mut p = crate::shipped::profile("h100-sxm").unwrap();
        p.device.gpus_per_node = 4;
        let s = system_config(&p, &catalog, 2).unwrap();
        assert_eq!(s["num_devices"].as_u64(), Some(8), "{s}");
        // DGX H100: 8 NICs for 8 GPUs, so 4 for 4.
        assert_eq!(s["num_ibroce_ports"].as_f64(), Some(4.0), "{s}");
        assert!(s["tracecast_notes"].to_string().contains("a ring over 4 GPUs per node"), "{s}");
        let e = system_config(&p, &catalog, 1 << 30).unwrap_err();
        assert!(e.contains("1073741824 nodes × 4 GPUs per node: more GPUs than a count holds"), "{e}");
    }
}
