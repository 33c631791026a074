//! A device's kernel cost model from its calibration profile: the time of an
//! op's kernels from its work, t = t0 + W / (η · P), for projecting a trace
//! recorded on one GPU onto another.

use std::path::Path;

use serde::Deserialize;

use crate::catalog::{Catalog, Dtype, Gpu};
use crate::error::{Error, Result};
use crate::profile::{Profile, peak_per_s};
use crate::work::KernelClass;

/// One fitted kernel class.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Fit {
    class: KernelClass,
    dtype: Option<Dtype>,
    efficiency: f64,
    overhead_us: f64,
    peak_per_s: f64,
}

/// Kernel times on one device, from the kernel classes its calibration profile fitted.
#[derive(Debug, Clone)]
pub struct DeviceModel {
    /// The device's catalog entry, when known.
    pub gpu: Option<Gpu>,
    fits: Vec<Fit>,
    links: Vec<LinkParams>,
    /// The profile's short-kernel time, µs.
    pub kernel_floor_us: Option<f64>,
}

/// A fitted link: α-β of one collective in one domain.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LinkParams {
    /// `all_reduce`, `all_gather`, …
    pub collective: String,
    /// `intra`, `inter` or `unknown`.
    pub domain: String,
    /// Latency, µs.
    pub alpha_us: f64,
    /// Bus bandwidth, GB/s.
    pub busbw_gbps: f64,
}

/// The part of a profile file the model needs (the file is `Profile` as serialized).
#[derive(Deserialize)]
struct ProfileFile {
    device: DeviceFile,
    #[serde(default)]
    kernels: Vec<KernelFile>,
    #[serde(default)]
    links: Vec<LinkParams>,
    #[serde(default)]
    kernel_floor_us: Option<f64>,
}

#[derive(Deserialize)]
struct DeviceFile {
    catalog_id: Option<String>,
}

#[derive(Deserialize)]
struct KernelFile {
    class: KernelClass,
    dtype: Option<Dtype>,
    efficiency: f64,
    overhead_us: f64,
    peak: f64,
    unit: String,
}

impl DeviceModel {
    fn new(catalog_id: Option<&str>, fits: Vec<Fit>, links: Vec<LinkParams>, catalog: &Catalog) -> DeviceModel {
        DeviceModel { gpu: catalog_id.and_then(|id| catalog.gpu(id).ok()).cloned(), fits, links, kernel_floor_us: None }
    }

    /// The model of a profile just fitted.
    pub fn from_profile(p: &Profile, catalog: &Catalog) -> DeviceModel {
        let fits = p
            .kernels
            .iter()
            .map(|k| Fit {
                class: k.class,
                dtype: k.dtype,
                efficiency: k.efficiency,
                overhead_us: k.overhead_us,
                peak_per_s: k.peak_per_s(),
            })
            .collect();
        let links = p
            .links
            .iter()
            .map(|l| LinkParams {
                collective: l.collective.as_str().to_string(),
                domain: l.domain.to_string(),
                alpha_us: l.alpha_us,
                busbw_gbps: l.busbw_gbps,
            })
            .collect();
        let mut m = DeviceModel::new(p.device.catalog_id.as_deref(), fits, links, catalog);
        m.kernel_floor_us = p.kernel_floor_us;
        m
    }

    /// The model of a profile written by `tracecast calibrate`.
    pub fn from_profile_file(path: &Path, catalog: &Catalog) -> Result<DeviceModel> {
        let text = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        let file: ProfileFile = serde_json::from_slice(&text)
            .map_err(|e| Error::Profile { path: path.to_path_buf(), message: format!("not a tracecast profile: {e}") })?;
        let fits = file
            .kernels
            .into_iter()
            .map(|k| Fit {
                class: k.class,
                dtype: k.dtype,
                efficiency: k.efficiency,
                overhead_us: k.overhead_us,
                peak_per_s: peak_per_s(&k.unit, k.peak),
            })
            .collect();
        let mut m = DeviceModel::new(file.device.catalog_id.as_deref(), fits, file.links, catalog);
        m.kernel_floor_us = file.kernel_floor_us;
        Ok(m)
    }

    /// The fitted efficiency η and fixed cost t0 (µs) of a kernel class (same dtype first).
    pub fn efficiency(&self, class: KernelClass, dtype: Option<Dtype>) -> Option<(f64, f64)> {
        let fit =
            self.fits.iter().find(|f| f.class == class && f.dtype == dtype).or_else(|| self.fits.iter().find(|f| f.class == class))?;
        Some((fit.efficiency, fit.overhead_us))
    }

    /// The fitted η, t0 (µs) and the peak it is relative to (per second) of a kernel class.
    pub fn fit(&self, class: KernelClass, dtype: Option<Dtype>) -> Option<(f64, f64, f64)> {
        let fit =
            self.fits.iter().find(|f| f.class == class && f.dtype == dtype).or_else(|| self.fits.iter().find(|f| f.class == class))?;
        Some((fit.efficiency, fit.overhead_us, fit.peak_per_s))
    }

    /// The fitted α-β of `collective` in `domain` (`intra`, `inter`), else of any collective there.
    pub fn link(&self, collective: &str, domain: &str) -> Option<&LinkParams> {
        self.links
            .iter()
            .find(|l| l.collective == collective && l.domain == domain)
            .or_else(|| self.links.iter().find(|l| l.domain == domain))
    }

    /// Time of an op's kernels, µs, from a fit of its class (same dtype first).
    pub fn kernel_us(&self, class: KernelClass, dtype: Option<Dtype>, work: f64) -> Option<f64> {
        let fit =
            self.fits.iter().find(|f| f.class == class && f.dtype == dtype).or_else(|| self.fits.iter().find(|f| f.class == class))?;
        (fit.efficiency > 0.0).then(|| fit.overhead_us.max(0.0) + work / (fit.efficiency * fit.peak_per_s) * 1e6)
    }
}
