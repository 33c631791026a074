//! Calibration of the real traces in `../shared/traces` gives physically sane
//! numbers (η ≤ 1, bandwidth ≤ nominal) and says why where it cannot fit.

use std::path::{Path, PathBuf};

use tracecast_calibrate::Catalog;
use tracecast_calibrate::profile::{CalibrateOptions, calibrate};
use tracecast_calibrate::work::KernelClass;
use tracecast_ingest::{Job, ReadOptions};

fn job(rel: &str) -> Job {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces").join(rel);
    let files = tracecast_ingest::job::trace_files(&p).unwrap();
    let job = Job::read(PathBuf::from(rel), &files, &ReadOptions::default(), &|_| {});
    assert!(job.failures.is_empty(), "{:?}", job.failures);
    job
}

#[test]
fn fits_on_real_traces_are_physically_sane() {
    let jobs: Vec<Job> = [
        "hta/nccl_parser_config/nccl_data.json.gz",
        "hta/trace_diff/control/control.json.gz",
        "hta/trace_diff/test/test.json.gz",
        "tracelens/b200/eager_trace.json.gz",
        "tracelens/h100",
        "tracelens/mi300",
        "param/et_replay/linear_kineto.json.gz",
    ]
    .iter()
    .map(|r| job(r))
    .collect();
    let catalog = Catalog::builtin();
    let profiles = calibrate(&jobs, &catalog, &CalibrateOptions::default());
    let ids: Vec<Option<&str>> = profiles.iter().map(|p| p.device.catalog_id.as_deref()).collect();
    for want in ["a100-40gb", "v100", "b200", "h100-sxm", "mi300x"] {
        assert!(ids.contains(&Some(want)), "{want} missing from {ids:?}");
    }
    let mut gemm_fits = 0;
    for p in &profiles {
        for k in &p.kernels {
            assert!(k.efficiency > 0.0 && k.efficiency <= 1.0, "{}: {:?} η = {}", p.device.name, k.class, k.efficiency);
            assert!(k.achieved_max <= 1.0, "{}: {:?} achieved {}", p.device.name, k.class, k.achieved_max);
            assert!(k.samples >= 5);
            gemm_fits += usize::from(k.class == KernelClass::Gemm);
        }
        for l in &p.links {
            if let Some(n) = l.nominal_gbps {
                assert!(l.busbw_gbps <= n, "{}: {:?} {} GB/s > nominal {n}", p.device.name, l.collective, l.busbw_gbps);
            }
            assert!(l.busbw_gbps > 0.0);
        }
        // What could not be fitted says why.
        for u in &p.unfitted {
            assert!(!u.reason.is_empty() && u.samples > 0, "{u:?}");
        }
        if p.device.catalog_id.is_none() {
            assert!(p.kernels.is_empty(), "no peaks, no efficiencies");
            assert!(p.notes.iter().any(|n| n.contains("not in the hardware catalog")));
        }
    }
    // GEMMs with shapes are fitted on A100, V100, H100 and MI300X.
    assert!(gemm_fits >= 4, "{gemm_fits}");
}
