//! One device as the cost model sees it: its catalog specs and, when it was
//! calibrated, the fits of its [`Profile`] (the one profile type, read and
//! written by the same serde code).

use std::path::Path;

use tracecast_ingest::collective::Collective;

use crate::catalog::{Catalog, Dtype, Gpu};
use crate::error::{Error, Result};
use crate::profile::{KernelFit, LinkFit, Profile};
use crate::work::KernelClass;

/// Efficiencies a fit may have and still feed a projection: above the peak is
/// impossible, and below 1 % of it the fit measured something else (launch
/// overhead, a mis-counted op) — a user-added B300 fitted from MoE
/// micro-benchmarks gave GEMM η 0.003.
pub const PHYSICAL_EFFICIENCY: [f64; 2] = [0.01, 1.0];

/// A device: catalog specs plus the fits of its calibration profile.
#[derive(Debug, Clone)]
pub struct DeviceModel {
    /// The device's catalog entry, when known.
    pub gpu: Option<Gpu>,
    /// The calibration, when there is one.
    pub profile: Option<Profile>,
    /// Where the fits come from (`profile FILE`, `shipped profile`, `catalog specs only`).
    pub source: String,
    /// The profile's short-kernel time, µs.
    pub kernel_floor_us: Option<f64>,
    /// Whether this is the GPU's default model (its shipped profile, a similar
    /// GPU's, or its specs) rather than a calibration chosen for its software
    /// stack: a trace projected onto its own GPU keeps its measured kernels
    /// instead of taking a default fitted on other work.
    pub default_for_gpu: bool,
    /// The GPU whose traces fitted the profile, where it is another GPU's (a GPU without traces
    /// takes the most similar traced GPU's): its table corrections measured that GPU's stack.
    pub fits_of_another: Option<String>,
}

/// How a link fit was found for a collective.
#[derive(Debug, Clone)]
pub struct LinkMatch<'a> {
    /// The fit used.
    pub fit: &'a LinkFit,
    /// `None` when it is the fit for exactly this collective, group size and
    /// domain; otherwise what was substituted, in words.
    pub substitution: Option<String>,
}

impl Profile {
    /// The link fit for `collective` over `group_size` ranks in `domain`
    /// (`intra`, `inter`): the exact key first, then the same collective and
    /// domain at the nearest group size, saying so; never another collective
    /// or domain.
    pub fn link(&self, collective: Collective, group_size: Option<i64>, domain: &str) -> Option<LinkMatch<'_>> {
        let links = &self.links;
        let same: Vec<&LinkFit> = links.iter().filter(|l| l.collective == collective && l.domain == domain).collect();
        if let Some(fit) = same.iter().find(|l| group_size.is_some() && l.group_size == group_size) {
            return Some(LinkMatch { fit, substitution: None });
        }
        let distance = |l: &&&LinkFit| match (l.group_size, group_size) {
            (Some(a), Some(b)) => (a - b).abs(),
            _ => i64::MAX,
        };
        let fit = same.iter().min_by_key(distance)?;
        Some(LinkMatch {
            fit,
            substitution: Some(format!(
                "{} over {} ranks ({domain}) priced with the fit for {} ranks",
                collective.as_str(),
                group_size.map_or("?".into(), |n| n.to_string()),
                fit.group_size.map_or("?".into(), |n| n.to_string())
            )),
        })
    }

    /// Reads a profile written by `tracecast calibrate` (the same type, deserialized).
    pub fn read(path: &Path) -> Result<Profile> {
        let text = tracecast_ingest::input::read(path).map_err(|cause| Error::Io { path: path.to_path_buf(), cause })?;
        Profile::from_json(&text, path)
    }

    /// Adds the kernel fits of `other` for the classes and dtypes this profile
    /// has none of (a trace's own calibration, its gaps filled from its GPU's
    /// shipped profile); returns how many were added.
    pub fn fill_from(&mut self, other: &Profile) -> usize {
        let missing: Vec<KernelFit> =
            other.kernels.iter().filter(|k| !self.kernels.iter().any(|o| o.class == k.class && o.dtype == k.dtype)).cloned().collect();
        let n = missing.len();
        self.kernels.extend(missing);
        n
    }

    /// Parses a profile; `path` names it in errors.
    pub fn from_json(text: &[u8], path: &Path) -> Result<Profile> {
        let p: Profile = serde_json::from_slice(text)
            .map_err(|e| Error::Profile { path: path.to_path_buf(), message: format!("not a tracecast profile: {e}") })?;
        p.unpriceable().map_or(Ok(p), |message| Err(Error::Profile { path: path.to_path_buf(), message }))
    }

    /// Why this profile's peaks or HBM bandwidth are not those catalog GPU `gpu` has (more than
    /// 0.1 % apart): a profile of another GPU, or a catalog changed since it was calibrated.
    /// `None` when they agree.
    pub fn fitted_against_other(&self, gpu: &Gpu) -> Option<String> {
        let apart = |a: f64, b: f64| (a - b).abs() > 1e-3 * b.abs();
        let mut rates: Vec<(String, f64, f64)> = Dtype::ALL
            .into_iter()
            .filter_map(|d| Some((format!("{} peak", d.as_str()), *self.device.peak_tflops.get(d.as_str())?, gpu.peak_flops(d)? / 1e12)))
            .collect();
        rates.extend(self.device.hbm_gbps.map(|h| ("HBM bandwidth".to_string(), h, gpu.hbm_gbps)));
        let (what, theirs, catalog) = rates.into_iter().find(|(_, theirs, catalog)| apart(*theirs, *catalog))?;
        Some(format!(
            "it names catalog GPU {} but was fitted against {what} {theirs}, where the catalog has {catalog}: a profile of another GPU, or of an entry changed since (a --hw file given when it was written and not now, or the reverse); read it with the catalog it was written with, or calibrate again",
            gpu.id
        ))
    }

    /// Why a value of this profile cannot price anything (an efficiency, bandwidth,
    /// peak or correction of 0 or less, a negative latency: projections printed NaN
    /// and 9·10¹² ms from such a file), naming the entry; `None` when every one can.
    fn unpriceable(&self) -> Option<String> {
        let positive = |x: f64| x.is_finite() && x > 0.0;
        let at_least_0 = |x: f64| x.is_finite() && x >= 0.0;
        for (i, k) in self.kernels.iter().enumerate() {
            let what = format!("kernels[{i}] ({})", k.class.as_str());
            // Above the peak it is said and left out where it would price ([`DeviceModel::rejected_fits`]).
            if !positive(k.efficiency) {
                return Some(format!("{what}: efficiency {}: above 0", k.efficiency));
            }
            if !positive(k.peak) {
                return Some(format!("{what}: peak {}: above 0", k.peak));
            }
            if !at_least_0(k.overhead_us) {
                return Some(format!("{what}: overhead_us {}: 0 or more", k.overhead_us));
            }
        }
        for (i, l) in self.links.iter().enumerate() {
            let what = format!("links[{i}] ({})", l.collective.as_str());
            if !positive(l.busbw_gbps) {
                return Some(format!("{what}: busbw_gbps {}: above 0", l.busbw_gbps));
            }
            if !at_least_0(l.alpha_us) {
                return Some(format!("{what}: alpha_us {}: 0 or more", l.alpha_us));
            }
        }
        for (i, c) in self.table_corrections.iter().enumerate() {
            if !positive(c.ratio) {
                return Some(format!("table_corrections[{i}] ({}): ratio {}: above 0", c.class.as_str(), c.ratio));
            }
            if let Some(max) = c.max_flops.filter(|m| !positive(*m)) {
                return Some(format!("table_corrections[{i}] ({}): max_flops {max}: above 0", c.class.as_str()));
            }
            if let Some(m) = c.misaligned.as_ref().filter(|m| !positive(m.ratio)) {
                return Some(format!("table_corrections[{i}] ({}): misaligned ratio {}: above 0", c.class.as_str(), m.ratio));
            }
        }
        self.kernel_floor_us.filter(|f| !at_least_0(*f)).map(|f| format!("kernel_floor_us {f}: 0 or more"))
    }
}

impl DeviceModel {
    /// The model of a calibration profile.
    pub fn from_profile(p: &Profile, catalog: &Catalog) -> DeviceModel {
        DeviceModel::of_profile(p.clone(), catalog)
    }

    /// [`DeviceModel::from_profile`], the profile moved in.
    fn of_profile(p: Profile, catalog: &Catalog) -> DeviceModel {
        DeviceModel {
            gpu: p.device.catalog_id.as_deref().and_then(|id| catalog.gpu(id).ok()).cloned(),
            kernel_floor_us: p.kernel_floor_us,
            profile: Some(p),
            source: "calibration profile".into(),
            default_for_gpu: false,
            fits_of_another: None,
        }
    }

    /// The model of a profile file written by `tracecast calibrate`.
    pub fn from_profile_file(path: &Path, catalog: &Catalog) -> Result<DeviceModel> {
        let p = Profile::read(path)?;
        // Its efficiencies are shares of the peaks it was fitted against: another GPU's id
        // written over a profile's had priced an A100 with an H100's calibration, in silence.
        if let Some(gpu) = p.device.catalog_id.as_deref().and_then(|id| catalog.gpu(id).ok())
            && let Some(message) = p.fitted_against_other(gpu)
        {
            return Err(Error::Profile { path: path.to_path_buf(), message });
        }
        let mut m = DeviceModel::of_profile(p, catalog);
        m.source = format!("profile {}", path.display());
        Ok(m)
    }

    /// The model of a trace's own GPU from the trace's calibration (`profile`,
    /// `None` when nothing could be calibrated): classes the trace cannot fit
    /// take the GPU's shipped fits. A caller that calibrated the job already
    /// (`report`) gives the replay this as its source device instead of samples.
    pub fn from_own_calibration(profile: Option<Profile>, catalog: &Catalog) -> DeviceModel {
        let Some(mut p) = profile else {
            return DeviceModel {
                gpu: None,
                profile: None,
                source: "this trace's own calibration, which fitted nothing".into(),
                kernel_floor_us: None,
                default_for_gpu: false,
                fits_of_another: None,
            };
        };
        let shipped = p.device.catalog_id.as_deref().and_then(crate::shipped::profile);
        let filled = shipped.map_or(0, |sh| p.fill_from(&sh));
        // The fits' points are for charts only: a projection prices with the fits.
        for k in &mut p.kernels {
            k.points = Vec::new();
        }
        for l in &mut p.links {
            l.points = Vec::new();
        }
        let mut m = DeviceModel::of_profile(p, catalog);
        m.source = if filled > 0 {
            format!("this trace's own calibration, {filled} class(es) from the shipped profile")
        } else {
            "this trace's own calibration".into()
        };
        m
    }

    /// A GPU known only by its catalog specs (nobody has traced it yet).
    pub fn from_gpu(gpu: &Gpu) -> DeviceModel {
        DeviceModel {
            gpu: Some(gpu.clone()),
            profile: None,
            source: "catalog specs only".into(),
            kernel_floor_us: None,
            default_for_gpu: false,
            fits_of_another: None,
        }
    }

    /// The valid fit of `class` for exactly `dtype`: one inside the physical
    /// bounds ([`PHYSICAL_EFFICIENCY`], t0 ≥ 0). For TF32 (a model's 32-bit GEMMs), the FP32 ops
    /// that ran on TF32 tensor cores: traces record them as FP32, and a calibration fits them
    /// against the TF32 peak.
    pub fn kernel_fit(&self, class: KernelClass, dtype: Option<Dtype>) -> Option<&KernelFit> {
        self.profile.as_ref()?.kernel_fit(class, dtype)
    }

    /// The fitted η and t0 (µs) of a class for `dtype`, when valid.
    pub fn efficiency(&self, class: KernelClass, dtype: Option<Dtype>) -> Option<(f64, f64)> {
        self.kernel_fit(class, dtype).map(|f| (f.efficiency, f.overhead_us))
    }

    /// The fitted η, t0 (µs) and the peak it is relative to (per second) of a class for `dtype`.
    pub fn fit(&self, class: KernelClass, dtype: Option<Dtype>) -> Option<(f64, f64, f64)> {
        self.kernel_fit(class, dtype).map(|f| (f.efficiency, f.overhead_us, f.peak_per_s()))
    }

    /// The best single op of `class` in one of `dtypes` the profile measured, as a
    /// fraction of its peak.
    pub fn best_achieved(&self, class: KernelClass, dtypes: &[Dtype]) -> Option<f64> {
        self.profile
            .as_ref()?
            .kernels
            .iter()
            .filter(|k| k.class == class && k.dtype.is_some_and(|d| dtypes.contains(&d)))
            .map(|k| k.achieved_max)
            .reduce(f64::max)
    }

    /// Fits of the profile that fall outside the physical bounds, in words.
    pub fn rejected_fits(&self) -> Vec<String> {
        self.profile
            .iter()
            .flat_map(|p| &p.kernels)
            .filter(|f| !physical(f))
            .map(|f| {
                format!(
                    "{}/{}: η {:.3}, t0 {:.1} µs is outside the physical bounds (η {}–{}, t0 ≥ 0) and is not used",
                    f.class.as_str(),
                    f.dtype.map_or("unknown", Dtype::as_str),
                    f.efficiency,
                    f.overhead_us,
                    PHYSICAL_EFFICIENCY[0],
                    PHYSICAL_EFFICIENCY[1]
                )
            })
            .collect()
    }

    /// The link fit for `collective` over `group_size` ranks in `domain` ([`Profile::link`]).
    pub fn link(&self, collective: Collective, group_size: Option<i64>, domain: &str) -> Option<LinkMatch<'_>> {
        self.profile.as_ref()?.link(collective, group_size, domain)
    }
}

pub(crate) fn physical(f: &KernelFit) -> bool {
    f.efficiency >= PHYSICAL_EFFICIENCY[0] && f.efficiency <= PHYSICAL_EFFICIENCY[1] && f.overhead_us >= 0.0 && f.efficiency.is_finite()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model's 32-bit GEMMs run on TF32 tensor cores; traces record those ops as FP32, and a
    /// calibration fits them against the TF32 peak: that fit is the TF32 one (it had been
    /// skipped, and a 32-bit `project` took the default η). An FP32 fit against the FP32 peak is not.
    #[test]
    fn a_tf32_lookup_takes_fp32_ops_fitted_against_the_tf32_peak() {
        let catalog = Catalog::builtin();
        let gpu = catalog.gpu("a100-40gb").unwrap();
        for (peak_of, taken) in [("tf32", true), ("fp32", false)] {
            let mut p = crate::Profile::of_catalog_gpu(gpu, &catalog);
            p.set_gemm_efficiency(Dtype::Fp32, 0.43, 5.0, 100, "test".into());
            p.kernels[0].peak_of = peak_of.into();
            let model = DeviceModel::from_profile(&p, &catalog);
            assert_eq!(model.efficiency(KernelClass::Gemm, Some(Dtype::Tf32)).is_some(), taken, "{peak_of}");
            assert!(model.efficiency(KernelClass::Gemm, Some(Dtype::Fp32)).is_some());
        }
    }

    /// A profile whose efficiency, bandwidth or correction cannot price (0, negative)
    /// made `project` print "Communication: NaN ms"; it is refused naming the entry.
    /// Every shipped profile prices.
    #[test]
    fn a_profile_that_cannot_price_is_refused_naming_the_entry() {
        for id in crate::shipped::ids() {
            assert!(crate::shipped::profile(id).is_some(), "shipped profile of {id}");
        }
        let good = serde_json::to_value(crate::shipped::profile("h100-sxm").unwrap()).unwrap();
        for (pointer, value, says) in [
            ("/kernels/0/efficiency", -1.0, "kernels[0] (gemm): efficiency -1: above 0"),
            ("/kernels/0/efficiency", 0.0, "efficiency 0: above 0"),
            ("/kernels/0/overhead_us", -2.0, "overhead_us -2: 0 or more"),
        ] {
            check(&good, pointer, value, says);
        }
        // V100's profile has a link fit.
        let v100 = serde_json::to_value(crate::shipped::profile("v100").unwrap()).unwrap();
        check(&v100, "/links/0/busbw_gbps", 0.0, "links[0] (all_to_all): busbw_gbps 0: above 0");
        check(&v100, "/links/0/alpha_us", -1.0, "alpha_us -1: 0 or more");

        fn check(good: &serde_json::Value, pointer: &str, value: f64, says: &str) {
            let path = Path::new("bad.json");
            let mut bad = good.clone();
            let Some(slot) = bad.pointer_mut(pointer) else { panic!("{pointer} not in the shipped H100 profile") };
            *slot = serde_json::json!(value);
            let e = Profile::from_json(&serde_json::to_vec(&bad).unwrap(), path).unwrap_err().to_string();
            assert!(e.contains("bad.json") && e.contains(says), "{e}");
        }
    }

    /// A misspelled key of a hand-edited profile is refused by name: `kernel_floor_uss`,
    /// `ratioo` and `efficiencyy` had been dropped in silence and the profile priced as before.
    #[test]
    fn a_profile_with_a_key_it_does_not_have_is_refused_naming_the_key() {
        let good = serde_json::to_value(crate::shipped::profile("h100-sxm").unwrap()).unwrap();
        for (pointer, key) in [("", "kernel_floor_uss"), ("/kernels/0", "efficiencyy"), ("/device", "catalog_idd")] {
            let mut bad = good.clone();
            bad.pointer_mut(pointer).and_then(|v| v.as_object_mut()).unwrap().insert(key.into(), serde_json::json!(1.0));
            let e = Profile::from_json(&serde_json::to_vec(&bad).unwrap(), Path::new("bad.json")).unwrap_err().to_string();
            assert!(e.contains("bad.json") && e.contains(&format!("unknown field `{key}`")), "{e}");
        }
    }

    /// A profile's efficiencies are shares of the peaks it was fitted against: one whose GPU id
    /// was changed to an A100's had priced the A100 with H100 fits. Every shipped profile agrees
    /// with the catalog it ships with.
    #[test]
    fn a_profile_fitted_against_other_peaks_than_its_gpus_is_refused() {
        let catalog = Catalog::builtin();
        for id in crate::shipped::ids() {
            let p = crate::shipped::profile(id).unwrap();
            assert_eq!(p.fitted_against_other(catalog.gpu(id).unwrap()), None, "{id}");
        }
        let path = std::env::temp_dir().join(format!("tracecast-edited-profile-{}.json", std::process::id()));
        let mut h100 = serde_json::to_value(crate::shipped::profile("h100-sxm").unwrap()).unwrap();
        *h100.pointer_mut("/device/catalog_id").unwrap() = serde_json::json!("a100-40gb");
        std::fs::write(&path, serde_json::to_vec(&h100).unwrap()).unwrap();
        let Err(e) = DeviceModel::from_profile_file(&path, &catalog) else { panic!("an A100 priced with an H100 profile") };
        let e = e.to_string();
        assert!(e.contains("edited-profile") && e.contains("names catalog GPU a100-40gb but was fitted against fp64 peak 67,"), "{e}");
        *h100.pointer_mut("/device/catalog_id").unwrap() = serde_json::json!("h100-sxm");
        std::fs::write(&path, serde_json::to_vec(&h100).unwrap()).unwrap();
        assert!(DeviceModel::from_profile_file(&path, &catalog).is_ok());
        std::fs::remove_file(&path).unwrap();
    }
}
