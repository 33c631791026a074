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

/// Every trace of the corpus, each file its own job (as `regenerate.sh` runs it).
fn corpus() -> Vec<Job> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces");
    let files = tracecast_ingest::job::trace_files_under(&root).unwrap();
    files.iter().map(|f| Job::read(f.clone(), std::slice::from_ref(f), &ReadOptions::default(), &|_| {})).collect()
}

#[test]
fn no_kernel_fit_on_the_corpus_has_a_negative_overhead_or_a_narrow_span() {
    // A line through work sizes less than 4× apart cannot separate t0 from η
    // (the H100 reductions, 2.2× apart, gave t0 = −774 µs before the constraint).
    let catalog = Catalog::builtin();
    let profiles = calibrate(&corpus(), &catalog, &CalibrateOptions::default());
    let mut fits = 0;
    for p in &profiles {
        for k in &p.kernels {
            let what = format!("{} {}/{:?}", p.device.name, k.class.as_str(), k.dtype);
            assert!(k.overhead_us >= 0.0, "{what}: t0 = {}", k.overhead_us);
            assert!(k.work_range[1] >= 4.0 * k.work_range[0], "{what}: work spans {:?}", k.work_range);
            assert!(k.efficiency > 0.0 && k.efficiency <= 1.0, "{what}: η = {}", k.efficiency);
            fits += 1;
        }
        for l in &p.links {
            assert!(l.alpha_us >= 0.0, "{} {:?}: α = {}", p.device.name, l.collective, l.alpha_us);
        }
    }
    assert!(fits >= 8, "{fits} fits");
}

#[test]
fn the_shipped_profiles_are_what_the_corpus_calibrates_to() {
    // calibrate/profiles/*.json come from regenerate.sh; if the code changes
    // what the corpus calibrates to, they must be regenerated.
    let catalog = Catalog::builtin();
    let fresh = calibrate(&corpus(), &catalog, &CalibrateOptions::default());
    for id in tracecast_calibrate::shipped::ids() {
        let shipped = tracecast_calibrate::shipped::profile(id).unwrap();
        let now = fresh.iter().find(|p| p.device.catalog_id.as_deref() == Some(id)).unwrap_or_else(|| panic!("{id} not in the corpus"));
        assert_eq!(shipped.kernels.len(), now.kernels.len(), "{id}: kernel fits differ; run calibrate/profiles/regenerate.sh");
        for (a, b) in shipped.kernels.iter().zip(&now.kernels) {
            assert_eq!((a.class, a.dtype), (b.class, b.dtype), "{id}");
            assert!(
                (a.efficiency - b.efficiency).abs() < 1e-9,
                "{id} {:?}: {} vs {}; run regenerate.sh",
                a.class,
                a.efficiency,
                b.efficiency
            );
        }
        assert_eq!(shipped.links.len(), now.links.len(), "{id}: link fits differ; run regenerate.sh");
        assert_eq!(shipped.kernel_floor_us, now.kernel_floor_us, "{id}");
    }
}

/// The Llama-3-8B-shaped training steps this project recorded on an H200 (`fixtures/h200`):
/// the work counted from the trace's ops equals the model's arithmetic, whatever kernels ran.
#[test]
fn recorded_h200_training_steps_count_the_models_flops() {
    use tracecast_calibrate::work::{KernelClass, samples};
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/h200/llama3-8b-4l-seq8192.json.gz");
    let trace = tracecast_ingest::kineto::read_path(&p, &ReadOptions::default()).unwrap();
    let samples = samples(&trace, &Default::default());
    let work = |class: KernelClass| -> f64 { samples.iter().filter(|s| s.class == class).filter_map(|s| s.work).sum() };
    // Three profiled steps of one sequence of 8192 tokens; hidden 4096, 32 heads of 128 (KV heads
    // repeated to 32 before SDPA), FFN 14336, vocabulary 128256, 4 layers.
    let (steps, tokens) = (3.0, 8192.0);
    let per_layer = 2.0 * 4096.0 * 4096.0 + 2.0 * 4096.0 * 1024.0 + 3.0 * 4096.0 * 14336.0;
    let linear_params = 4.0 * per_layer + 4096.0 * 128256.0;
    // Forward 2 FLOPs per parameter and token; backward twice that (input and weight gradients).
    let gemm = steps * 6.0 * tokens * linear_params;
    // Causal attention forward 4·b·h·s²·d / 2; its backward 2.5× the forward.
    let attention = steps * 4.0 * 3.5 * (4.0 * 32.0 * tokens * tokens * 128.0 / 2.0);
    let (got_gemm, got_attention) = (work(KernelClass::Gemm), work(KernelClass::Attention));
    assert!((got_gemm / gemm - 1.0).abs() < 1e-9, "GEMM {got_gemm:e} FLOPs, the model does {gemm:e}");
    assert!((got_attention / attention - 1.0).abs() < 1e-9, "attention {got_attention:e} FLOPs, the model does {attention:e}");
}

/// Attention written as `matmul`s over 5185 tokens (OWLv2's 72 × 72 patches and a class token):
/// `Q·Kᵀ` writes rows of 5185 BF16 elements, `P·V` reads them — not whole 16-byte units. H100's
/// cuBLAS runs them far off XLA's table (1083 and 828 µs where it prices 439 and 363: kernels
/// without the tensor-memory accelerator, which needs aligned strides), while the trace's aligned
/// linear layers (5185 × 1024 × 1024: only m is odd) run near it; MI300X's stack runs the same
/// GEMMs faster than its table. Each GPU's profile keeps its own ratio for them.
#[test]
fn misaligned_gemms_have_a_correction_of_their_own() {
    let catalog = Catalog::builtin();
    let ratios = |dir: &str| {
        let p = calibrate(
            &[job(&format!("tracelens/{dir}/google_owlv2-large-patch14-ensemble__1016001.json.gz"))],
            &catalog,
            &CalibrateOptions::default(),
        )
        .remove(0);
        let c = p.table_correction(KernelClass::Gemm, Some(tracecast_calibrate::catalog::Dtype::Bf16)).unwrap().clone();
        (c.ratio, c.misaligned.expect("the trace's 240 attention GEMMs").ratio)
    };
    let (h100, h100_misaligned) = ratios("h100");
    assert!((0.8..1.25).contains(&h100), "H100's aligned GEMMs × {h100}");
    assert!(h100_misaligned > 1.8 * h100, "H100's misaligned GEMMs × {h100_misaligned}, the others × {h100}");
    let (mi300x, mi300x_misaligned) = ratios("mi300");
    assert!(mi300x_misaligned < mi300x, "MI300X's misaligned GEMMs × {mi300x_misaligned}, the others × {mi300x}");
}

/// A GPU whose last-level cache no source states (B300) gets no memory-bound fit: its ops of at
/// most 0.5 MB had given reductions η 0.013 of HBM with no word, handed on to MAD-Max as the
/// GPU's memory efficiency. What was not fitted says why.
#[test]
fn no_memory_bound_fit_where_the_catalog_states_no_cache() {
    let catalog = Catalog::builtin();
    assert_eq!(catalog.gpu("b300").ok().map(|g| g.cache_mb), Some(None), "the test needs a GPU without a stated cache");
    let profiles = calibrate(&[job("tracelens/b300_moe_micro")], &catalog, &CalibrateOptions::default());
    let b300 = profiles.iter().find(|p| p.device.catalog_id.as_deref() == Some("b300")).expect("the trace is of a B300");
    let memory_bound = |c: KernelClass| !c.counts_flops();
    assert!(b300.kernels.iter().all(|k| !memory_bound(k.class)), "{:?}", b300.kernels.iter().map(|k| k.class).collect::<Vec<_>>());
    let said = b300.unfitted.iter().filter(|u| u.reason.contains("states no last-level cache of b300 (cache_mb)")).count();
    assert!(said >= 1, "{:?}", b300.unfitted);
}
