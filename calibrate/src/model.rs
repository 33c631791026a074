//! A device's kernel cost model from its calibration profile: the time of an
//! op's kernels from its work, t = t0 + W / (η · P), for projecting a trace
//! recorded on one GPU onto another.

use std::path::Path;

use serde::Deserialize;

use crate::catalog::{Catalog, Dtype, Gpu};
use crate::error::{Error, Result};
use crate::profile::Profile;
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

/// Kernel times on one device: fitted classes from a profile, the catalog's peaks for the rest.
#[derive(Debug, Clone)]
pub struct DeviceModel {
    /// The device's catalog entry, when known.
    pub gpu: Option<Gpu>,
    fits: Vec<Fit>,
}

#[derive(Deserialize)]
struct ProfileFile {
    device: DeviceFile,
    #[serde(default)]
    kernels: Vec<KernelFile>,
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
    /// The model of a profile just fitted.
    pub fn from_profile(p: &Profile, catalog: &Catalog) -> DeviceModel {
        let gpu = p.device.catalog_id.as_deref().and_then(|id| catalog.gpu(id).ok()).cloned();
        let fits = p
            .kernels
            .iter()
            .map(|k| Fit {
                class: k.class,
                dtype: k.dtype,
                efficiency: k.efficiency,
                overhead_us: k.overhead_us,
                peak_per_s: if k.unit == "flop" { k.peak * 1e12 } else { k.peak * 1e9 },
            })
            .collect();
        DeviceModel { gpu, fits }
    }

    /// The model of a profile written by `tracecast calibrate`.
    pub fn from_profile_file(path: &Path, catalog: &Catalog) -> Result<DeviceModel> {
        let text = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        let file: ProfileFile = serde_json::from_slice(&text)
            .map_err(|e| Error::Catalog { path: path.to_path_buf(), message: format!("not a tracecast profile: {e}") })?;
        let gpu = file.device.catalog_id.as_deref().and_then(|id| catalog.gpu(id).ok()).cloned();
        let fits = file
            .kernels
            .into_iter()
            .map(|k| Fit {
                class: k.class,
                dtype: k.dtype,
                efficiency: k.efficiency,
                overhead_us: k.overhead_us,
                peak_per_s: if k.unit == "flop" { k.peak * 1e12 } else { k.peak * 1e9 },
            })
            .collect();
        Ok(DeviceModel { gpu, fits })
    }

    /// A model with the catalog's peaks only (no fitted classes).
    pub fn from_gpu(gpu: &Gpu) -> DeviceModel {
        DeviceModel { gpu: Some(gpu.clone()), fits: Vec::new() }
    }

    /// Time of an op's kernels, µs, from a fit of its class (same dtype first).
    pub fn kernel_us(&self, class: KernelClass, dtype: Option<Dtype>, work: f64) -> Option<f64> {
        let fit =
            self.fits.iter().find(|f| f.class == class && f.dtype == dtype).or_else(|| self.fits.iter().find(|f| f.class == class))?;
        (fit.efficiency > 0.0).then(|| fit.overhead_us.max(0.0) + work / (fit.efficiency * fit.peak_per_s) * 1e6)
    }

    /// The catalog peak a class is bound by: FLOP/s at the dtype for
    /// GEMM-like classes, HBM bytes/s otherwise.
    pub fn peak(&self, class: KernelClass, dtype: Option<Dtype>) -> Option<f64> {
        let gpu = self.gpu.as_ref()?;
        if class.counts_flops() { gpu.peak_flops(dtype.unwrap_or(Dtype::Bf16)) } else { Some(gpu.hbm_bytes_per_s()) }
    }
}
