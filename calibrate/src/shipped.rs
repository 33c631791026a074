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
    let p = profile(id)?;
    let mut m = DeviceModel::from_profile(&p, catalog);
    m.gpu = Some(gpu.clone());
    m.source = format!(
        "no traces of {}: the efficiencies of {id}, the most similar GPU with traces (spec distance {distance:.2}), on its own specs",
        gpu.id
    );
    Some(m)
}

#[cfg(test)]
mod tests {
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
