//! Calibration profiles shipped with tracecast: one per catalog GPU the
//! public trace corpus covers, calibrated from `../shared/traces` by
//! `calibrate/profiles/regenerate.sh` (anyone can regenerate them) and
//! embedded here as data.

use std::path::Path;

use crate::catalog::Catalog;
use crate::model::DeviceModel;
use crate::profile::Profile;

/// (catalog id, profile JSON) of every shipped profile.
const SHIPPED: &[(&str, &str)] = &[
    ("a100-40gb", include_str!("../profiles/a100-40gb.json")),
    ("b200", include_str!("../profiles/b200.json")),
    ("h100-sxm", include_str!("../profiles/h100-sxm.json")),
    ("mi210", include_str!("../profiles/mi210.json")),
    ("mi250", include_str!("../profiles/mi250.json")),
    ("mi300x", include_str!("../profiles/mi300x.json")),
    ("v100", include_str!("../profiles/v100.json")),
];

/// GPU ids that have a shipped profile.
pub fn ids() -> impl Iterator<Item = &'static str> {
    SHIPPED.iter().map(|(id, _)| *id)
}

/// The shipped profile of catalog GPU `id`, if the corpus covers it.
pub fn profile(id: &str) -> Option<Profile> {
    let (_, json) = SHIPPED.iter().find(|(k, _)| *k == id)?;
    Profile::from_json(json.as_bytes(), Path::new(&format!("<shipped profile of {id}>"))).ok()
}

/// The shipped profile of `id` as a device model.
pub fn model(id: &str, catalog: &Catalog) -> Option<DeviceModel> {
    let p = profile(id)?;
    let mut m = DeviceModel::from_profile(&p, catalog);
    m.source = format!("shipped profile of {id} ({} corpus traces)", p.traces.len());
    Some(m)
}

/// What prices GPU `gpu` when no profile is given: its shipped profile, else that
/// of the most similar traced GPU on its own specs ([`similar`]); `None` when
/// neither exists (the caller's defaults, or [`untraced`] for a trace's replay).
pub fn for_gpu(gpu: &crate::catalog::Gpu, catalog: &Catalog) -> Option<DeviceModel> {
    model(&gpu.id, catalog).or_else(|| similar(gpu, catalog))
}

/// Specs two GPUs must share, each within this factor, for one's fitted
/// efficiencies to stand in for the other's: GPUs of one design point
/// (peak, HBM bandwidth, SM/CU count) run the same libraries' kernels at
/// similar fractions of their peaks.
pub const SIMILAR_SPECS: f64 = 1.5;

/// For a GPU without traces: the model of the most similar GPU that has a
/// shipped profile (every one of bf16/fp16 peak, HBM bandwidth and SM/CU
/// count within [`SIMILAR_SPECS`]), on `gpu`'s own specs; `None` when no
/// traced GPU is that close.
pub fn similar(gpu: &crate::catalog::Gpu, catalog: &Catalog) -> Option<DeviceModel> {
    use crate::catalog::Dtype;
    let half = |g: &crate::catalog::Gpu| g.peak_flops(Dtype::Bf16).or_else(|| g.peak_flops(Dtype::Fp16));
    let specs = |g: &crate::catalog::Gpu| Some([half(g)?, g.hbm_gbps, f64::from(g.sms?)]);
    let mine = specs(gpu)?;
    let (id, distance) = ids()
        .filter(|id| *id != gpu.id)
        .filter_map(|id| {
            let theirs = specs(catalog.gpu(id).ok()?)?;
            let ratios: Vec<f64> = mine.iter().zip(theirs).map(|(a, b)| (a / b).ln().abs()).collect();
            ratios.iter().all(|r| *r <= SIMILAR_SPECS.ln()).then(|| (id, ratios.iter().sum::<f64>()))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    // The similar GPU's fits, in a profile of this GPU (what every consumer checks a profile against).
    let mut p = profile(id)?;
    p.device = Profile::of_catalog_gpu(gpu, catalog).device;
    p.notes.push(format!("kernel and link fits of {id}, the most similar GPU with traces"));
    let mut m = DeviceModel::from_profile(&p, catalog);
    m.source = format!(
        "no traces of {}: the efficiencies of {id}, the most similar GPU with traces (spec distance {distance:.2}), on its own specs",
        gpu.id
    );
    m.fits_of_another = Some(id.to_string());
    Some(m)
}

/// For a GPU without traces and without a similar traced GPU: its catalog
/// specs, the source's efficiencies carried to them, and the short-kernel
/// time of its vendor's traced GPUs (the median of their shipped profiles'
/// floors, `gpu` itself never among them). The floor is what a short kernel
/// costs through the vendor's driver and runtime, and it does not follow the
/// datasheet: NVIDIA's shipped floors are 1.0–3.0 µs, AMD's 3.4–4.7 µs
/// (leave-one-GPU-out H100 ↔ MI300X, 8 projections: mean |busy error| 31.6 %
/// with the source's floor carried, 26.4 % with the vendor's).
pub fn untraced(gpu: &crate::catalog::Gpu, catalog: &Catalog) -> DeviceModel {
    let mut m = DeviceModel::from_gpu(gpu);
    let vendor = gpu.vendor();
    let mut floors: Vec<(f64, &str)> = vendor
        .as_ref()
        .map(|v| {
            ids()
                .filter(|id| *id != gpu.id && catalog.gpu(id).ok().and_then(crate::catalog::Gpu::vendor).as_ref() == Some(v))
                .filter_map(|id| Some((profile(id)?.kernel_floor_us.filter(|f| *f > 0.0)?, id)))
                .collect()
        })
        .unwrap_or_default();
    floors.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = floors.len();
    let median = (n > 0).then(|| if n % 2 == 1 { floors[n / 2].0 } else { (floors[n / 2 - 1].0 + floors[n / 2].0) / 2.0 });
    m.source = match (median, vendor) {
        (Some(floor), Some(v)) => {
            m.kernel_floor_us = Some(floor);
            format!(
                "no traces of {}: catalog specs, the trace's efficiencies carried to them, short-kernel time {floor:.2} µs (median of {v}'s traced GPUs: {})",
                gpu.id,
                floors.iter().map(|f| f.1).collect::<Vec<_>>().join(", ")
            )
        }
        _ => format!(
            "no traces of {} nor of its vendor: catalog specs, the trace's efficiencies and short-kernel time carried to them",
            gpu.id
        ),
    };
    m
}

/// What prices `gpu` as the target of a trace's replay without a profile:
/// [`for_gpu`], else [`untraced`].
pub fn target(gpu: &crate::catalog::Gpu, catalog: &Catalog) -> DeviceModel {
    let mut m = for_gpu(gpu, catalog).unwrap_or_else(|| untraced(gpu, catalog));
    m.default_for_gpu = true;
    m
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_untraced_gpu_takes_its_vendors_short_kernel_time_never_its_own() {
        let catalog = crate::Catalog::builtin();
        let floor = |id: &str| super::profile(id).unwrap().kernel_floor_us.unwrap();
        // H100 withheld: the median of the other NVIDIA GPUs' floors (V100, A100, B200).
        let mut nvidia = [floor("v100"), floor("a100-40gb"), floor("b200")];
        nvidia.sort_by(f64::total_cmp);
        let h100 = super::untraced(catalog.gpu("h100-sxm").unwrap(), &catalog);
        assert_eq!(h100.kernel_floor_us, Some(nvidia[1]));
        assert!(h100.source.contains("NVIDIA") && !h100.source.contains("h100-sxm,"), "{}", h100.source);
        // MI300X withheld: MI210 and MI250, the mean of the two middle ones.
        let mi300x = super::untraced(catalog.gpu("mi300x").unwrap(), &catalog);
        assert_eq!(mi300x.kernel_floor_us, Some((floor("mi210") + floor("mi250")) / 2.0));
        // A GPU whose vendor is unknown carries the trace's own.
        let mut odd = catalog.gpu("mi300x").unwrap().clone();
        odd.name = "A GPU with MI300X's datasheet numbers".into();
        odd.id = "untraced-gpu".into();
        let m = super::untraced(&odd, &catalog);
        assert_eq!(m.kernel_floor_us, None);
        assert!(m.source.contains("nor of its vendor"), "{}", m.source);
        // Said in the file: all three AMD GPUs with traces count.
        odd.vendor = Some("amd".into());
        let mut amd = [floor("mi210"), floor("mi250"), floor("mi300x")];
        amd.sort_by(f64::total_cmp);
        assert_eq!(super::untraced(&odd, &catalog).kernel_floor_us, Some(amd[1]));
    }

    #[test]
    fn every_shipped_profile_parses_and_names_its_gpu() {
        let catalog = crate::Catalog::builtin();
        for id in super::ids() {
            let p = super::profile(id).unwrap_or_else(|| panic!("{id} does not parse"));
            assert_eq!(p.device.catalog_id.as_deref(), Some(id));
            assert!(catalog.gpu(id).is_ok(), "{id} is not in the catalog");
        }
    }
}
