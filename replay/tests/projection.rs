//! Cross-device projection, leave one out, both directions: calibrate the
//! target GPU on three of the four Hugging Face models traced on both H100 and
//! MI300X, project the fourth model's trace from the other GPU onto it, and
//! compare GPU busy time (step window) and step time with its measured trace
//! there; the same-speed guess (the source's time as is) is the bar to beat.

use std::path::{Path, PathBuf};

use tracecast_calibrate::{CalibrateOptions, Catalog, DeviceModel, calibrate};
use tracecast_ingest::analysis::{AnalyzeOptions, analyze_job};
use tracecast_ingest::{Job, ReadOptions};
use tracecast_replay::{ReplayOptions, replay_job};

const MODELS: [&str; 4] = [
    "gaunernst_bert-small-uncased__1016001.json.gz",
    "Falconsai_nsfw_image_detection__1016002.json.gz",
    "facebook_timesformer-base-finetuned-k400__1016002.json.gz",
    "google_owlv2-large-patch14-ensemble__1016001.json.gz",
];

fn job(rel: &str) -> Job {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces").join(rel);
    Job::read(PathBuf::from(rel), &[p], &ReadOptions::default(), &|_| {})
}

/// (busy µs, step µs) in the step window, as `analyze` reports them.
fn measured(j: &Job) -> (f64, f64) {
    let a = analyze_job(j, &AnalyzeOptions::default());
    (a.totals.breakdown.busy_us, a.totals.breakdown.gpu_span_us)
}

/// Projects each held-out model from `from` onto `to` (calibrated on the
/// other three); returns (busy error, step error, same-speed busy error, GEMM-class error) per model.
fn leave_one_out(from: &str, to: &str, target: Option<DeviceModel>) -> Vec<(f64, f64, f64, f64, f64)> {
    let catalog = Catalog::builtin();
    let mut out = Vec::new();
    for (k, held_out) in MODELS.iter().enumerate() {
        let model = target.clone().unwrap_or_else(|| {
            let training: Vec<Job> =
                MODELS.iter().enumerate().filter(|(i, _)| *i != k).map(|(_, m)| job(&format!("tracelens/{to}/{m}"))).collect();
            DeviceModel::from_profile(&calibrate(&training, &catalog, &CalibrateOptions::default()).remove(0), &catalog)
        });
        let src = job(&format!("tracelens/{from}/{held_out}"));
        // The source GPU's efficiencies from the same three models, so both
        // sides are fitted on comparable ops.
        let source_training: Vec<Job> =
            MODELS.iter().enumerate().filter(|(i, _)| *i != k).map(|(_, m)| job(&format!("tracelens/{from}/{m}"))).collect();
        let source = DeviceModel::from_profile(&calibrate(&source_training, &catalog, &CalibrateOptions::default()).remove(0), &catalog);
        let (want_busy, want_step) = measured(&job(&format!("tracelens/{to}/{held_out}")));
        let (as_is, _) = measured(&src);
        let mut opts = ReplayOptions::default();
        opts.target = Some(model);
        opts.source = Some(source);
        let r = replay_job(&src, &opts);
        // Every compute kernel of the source priced once: per class, the kernels the projection
        // re-priced took what the source trace measured of that class (counted from the trace
        // as `diff` counts it, not from the replay graph). The per-rule and per-class views sum
        // the same kernels in one loop, so comparing their totals could not fail.
        let p = r.projection.as_ref().expect("a projection report");
        let source_classes = tracecast_calibrate::diff::ClassTimes::of_job(&src, &tracecast_ingest::analysis::Classifier::default());
        use tracecast_calibrate::work::KernelClass;
        for class in [
            KernelClass::Gemm,
            KernelClass::Attention,
            KernelClass::Conv,
            KernelClass::Elementwise,
            KernelClass::Reduction,
            KernelClass::Embedding,
        ] {
            let want = source_classes.class_us(class.as_str());
            let priced = p.classes.iter().find(|c| c.class == class).map_or(0.0, |c| c.measured_us);
            assert!((priced - want).abs() <= 1e-6 * want, "{held_out} {}: priced {priced} µs of {want} µs", class.as_str());
        }
        assert!(source_classes.class_us("gemm") > 0.0, "{held_out}: no GEMM time");
        let busy: f64 = r.ranks.iter().map(|x| x.replayed.busy_us).sum();
        let step: f64 = r.ranks.iter().map(|x| x.replayed.gpu_span_us).sum();
        let e = |got: f64, want: f64| (got - want) / want;
        // Per kernel class: projected against the target's measured class times (errors can cancel in the sum).
        let want_classes = tracecast_calibrate::diff::ClassTimes::of_job(
            &job(&format!("tracelens/{to}/{held_out}")),
            &tracecast_ingest::analysis::Classifier::default(),
        );
        let by_class: Vec<String> = p
            .classes
            .iter()
            .filter(|c| c.projected_us > 0.02 * busy)
            .map(|c| {
                let want = want_classes.class_us(c.class.as_str());
                format!("{} {:+.0} %", c.class.as_str(), 100.0 * e(c.projected_us, want))
            })
            .collect();
        println!("      by class: {}", by_class.join(", "));
        println!(
            "{from:>5} → {to:<5} {held_out:<58} busy {:>10.1} → {:>10.1} µs (measured {:>10.1}): {:+6.1} % (same speed {:+6.1} %); step {:+6.1} %",
            as_is,
            busy,
            want_busy,
            100.0 * e(busy, want_busy),
            100.0 * e(as_is, want_busy),
            100.0 * e(step, want_step)
        );
        let gemm = p.classes.iter().find(|c| c.class == tracecast_calibrate::work::KernelClass::Gemm).map_or(0.0, |c| c.projected_us);
        // Attention where both traces have some (NaN otherwise, left out of the mean).
        let attention = p.classes.iter().find(|c| c.class == KernelClass::Attention).map(|c| c.projected_us);
        let want_attention = want_classes.class_us("attention");
        let attention = attention.filter(|_| want_attention > 0.0).map_or(f64::NAN, |a| e(a, want_attention));
        out.push((e(busy, want_busy), e(step, want_step), e(as_is, want_busy), e(gemm, want_classes.class_us("gemm")), attention));
    }
    out
}

fn mean_abs(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.map(f64::abs).collect();
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn leave_one_out_between_h100_and_mi300x() {
    let mut all = leave_one_out("h100", "mi300", None);
    all.extend(leave_one_out("mi300", "h100", None));
    let busy = mean_abs(all.iter().map(|x| x.0));
    let step = mean_abs(all.iter().map(|x| x.1));
    let naive = mean_abs(all.iter().map(|x| x.2));
    let gemm = mean_abs(all.iter().map(|x| x.3));
    let attention = mean_abs(all.iter().map(|x| x.4).filter(|x| x.is_finite()));
    let closer = all.iter().filter(|x| x.0.abs() < x.2.abs()).count();
    println!(
        "8 projections: mean |busy error| {:.1} %, |step error| {:.1} % (same-speed guess {:.1} %), {closer} of 8 closer; GEMM class {:.1} %, attention class {:.1} % ({} pairs)",
        100.0 * busy,
        100.0 * step,
        100.0 * naive,
        100.0 * gemm,
        100.0 * attention,
        all.iter().filter(|x| x.4.is_finite()).count()
    );
    // Measured (BENCHMARKS.md): busy 6.3 %, step 7.6 %, GEMM class 13.8 %, attention class
    // 17.5 %, all 8 closer than the same-speed guess; the issue aims at 5 % busy. Without the
    // target's own correction of its misaligned GEMMs (attention's Q·Kᵀ over 3137 and 5185
    // tokens: 1.9–2.5× XLA's table on H100) it was busy 11.2 %, GEMM class 16.5 %.
    assert_eq!(closer, 8, "{closer} of 8 closer than the same-speed guess");
    assert!(gemm < 0.15, "mean |GEMM-class error| {gemm}");
    assert!(attention < 0.25, "mean |attention-class error| {attention}");
    assert!(busy < 0.08, "mean |busy error| {busy}");
    assert!(step < 0.09, "mean |step error| {step}");
}

/// A GPU nobody has traced, added as a user's `--hw` file: MI300X's datasheet numbers under a new id.
const UNTRACED_GPU: &str = r#"
[[gpu]]
id = "untraced-gpu"
name = "A GPU with MI300X's datasheet numbers"
source = "AMD Instinct MI300X datasheet, under a new id"
cache_mb = 256.0
fp64 = 163.4
fp32 = 163.4
tf32 = 653.7
bf16 = 1307.4
fp16 = 1307.4
fp8 = 2614.9
int8 = 2614.9
memory_gb = 192.0
hbm_gbps = 5300.0
link_gbps = 448.0
sms = 304
clock_mhz = 2100.0
"#;

#[test]
fn projection_onto_a_gpu_nobody_has_traced() {
    // No profile of it exists: the efficiencies of the most similar GPU with
    // traces (here MI300X, calibrated on the other three models) are used on
    // its own specs, and the output says so.
    let dir = std::env::temp_dir().join(format!("tracecast-untraced-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gpu.toml");
    std::fs::write(&file, UNTRACED_GPU).unwrap();
    let mut catalog = Catalog::builtin();
    catalog.add_file(&file).unwrap();
    let gpu = catalog.gpu("untraced-gpu").unwrap().clone();
    println!("{:<58} {:>12} {:>12} {:>9} {:>11}", "H100 → untraced GPU", "projected", "MI300X", "error %", "same speed");
    let mut errors = Vec::new();
    for (k, m) in MODELS.iter().enumerate() {
        let training: Vec<Job> =
            MODELS.iter().enumerate().filter(|(i, _)| *i != k).map(|(_, m)| job(&format!("tracelens/mi300/{m}"))).collect();
        let mi300x = calibrate(&training, &catalog, &CalibrateOptions::default()).remove(0);
        // What `shipped::similar` does with the shipped MI300X profile, on the three training models.
        let mut target = DeviceModel::from_profile(&mi300x, &catalog);
        target.gpu = Some(gpu.clone());
        let src = job(&format!("tracelens/h100/{m}"));
        let mut opts = ReplayOptions::default();
        opts.target = Some(target);
        opts.catalog = Some(catalog.clone());
        let r = replay_job(&src, &opts);
        let busy: f64 = r.ranks.iter().map(|x| x.replayed.busy_us).sum();
        let (want, _) = measured(&job(&format!("tracelens/mi300/{m}")));
        let (as_is, _) = measured(&src);
        let e = (busy - want) / want;
        println!("{m:<58} {busy:>12.1} {want:>12.1} {:>+9.1} {:>+11.1}", 100.0 * e, 100.0 * (as_is - want) / want);
        assert!(e.abs() < ((as_is - want) / want).abs(), "{m}: {e}");
        errors.push(e.abs());
    }
    // Without even a similar GPU, the source's efficiencies are carried and the output says so.
    let mut opts = ReplayOptions::default();
    opts.target = Some(DeviceModel::from_gpu(&gpu));
    opts.catalog = Some(catalog.clone());
    let r = replay_job(&job(&format!("tracelens/h100/{}", MODELS[2])), &opts);
    assert!(r.notes.iter().any(|n| n.contains("carried")), "{:?}", r.notes);
    let p = r.projection.expect("a projection report");
    assert!(p.rules.iter().any(|s| s.rule == tracecast_calibrate::cost::Rule::RooflineCarried));
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    println!("mean |busy error| {:.1} %", 100.0 * mean);
    // The issue: within 10 % (BENCHMARKS: 9.3 % in session 49, 7.0 % when misaligned GEMMs got their own correction).
    assert!(mean < 0.10, "{mean}");
}

#[test]
fn fits_outside_the_physical_bounds_never_price_a_kernel() {
    // A user-added profile whose GEMM fit says η 0.003 (fitted from MoE
    // micro-benchmarks) must not make an H100 trace 20× slower silently.
    let catalog = Catalog::builtin();
    let jobs: Vec<Job> = MODELS.iter().map(|m| job(&format!("tracelens/mi300/{m}"))).collect();
    let mut profile = calibrate(&jobs, &catalog, &CalibrateOptions::default()).remove(0);
    for k in &mut profile.kernels {
        k.efficiency = 0.003;
    }
    let model = DeviceModel::from_profile(&profile, &catalog);
    assert!(model.kernel_fit(tracecast_calibrate::work::KernelClass::Gemm, Some(tracecast_calibrate::catalog::Dtype::Bf16)).is_none());
    let src = job(&format!("tracelens/h100/{}", MODELS[2]));
    let mut opts = ReplayOptions::default();
    opts.target = Some(model);
    let r = replay_job(&src, &opts);
    assert!(r.notes.iter().any(|n| n.contains("outside the physical bounds")), "{:?}", r.notes);
    let (as_is, _) = measured(&src);
    let busy: f64 = r.ranks.iter().map(|x| x.replayed.busy_us).sum();
    assert!(busy < 2.0 * as_is, "{busy} vs {as_is}");
}

#[test]
fn leave_one_gpu_out_without_a_profile() {
    // The no-profile path measured where the corpus allows it: the four models traced on
    // both H100 and MI300X, each projected onto the other GPU with every trace of that GPU
    // withheld (no shipped profile, no similar traced GPU: the source's own fits carried to
    // the target's datasheet numbers, the short-kernel time of the target's vendor's other
    // traced GPUs). V100, A100 and B200 have no model traced on another GPU, so their
    // no-profile projections cannot be compared with a measurement.
    let catalog = Catalog::builtin();
    let mut rows = Vec::new();
    for (from, to, gpu) in [("h100", "mi300", "mi300x"), ("mi300", "h100", "h100-sxm")] {
        // What `replay --target` does for a GPU without traces (never the GPU's own floor).
        let target = tracecast_calibrate::shipped::untraced(catalog.gpu(gpu).unwrap(), &catalog);
        assert!(target.source.contains("median of"), "{}", target.source);
        for m in MODELS {
            let src = job(&format!("tracelens/{from}/{m}"));
            let source = DeviceModel::from_profile(
                &calibrate(std::slice::from_ref(&src), &catalog, &CalibrateOptions::default()).remove(0),
                &catalog,
            );
            let mut opts = ReplayOptions::default();
            opts.target = Some(target.clone());
            opts.source = Some(source);
            let r = replay_job(&src, &opts);
            assert!(r.notes.iter().any(|n| n.contains("carried")), "{:?}", r.notes);
            let busy: f64 = r.ranks.iter().map(|x| x.replayed.busy_us).sum();
            let (want, _) = measured(&job(&format!("tracelens/{to}/{m}")));
            let (as_is, _) = measured(&src);
            let (e, naive) = ((busy - want) / want, (as_is - want) / want);
            println!(
                "{from:>5} → {gpu:<9} {m:<58} {busy:>11.1} µs (measured {want:>11.1}): {:+6.1} % (same speed {:+6.1} %)",
                100.0 * e,
                100.0 * naive
            );
            rows.push((e, naive));
        }
    }
    let busy = mean_abs(rows.iter().map(|r| r.0));
    let naive = mean_abs(rows.iter().map(|r| r.1));
    let closer = rows.iter().filter(|r| r.0.abs() < r.1.abs()).count();
    println!(
        "8 no-profile projections: mean |busy error| {:.1} % (same-speed guess {:.1} %), {closer} of 8 closer",
        100.0 * busy,
        100.0 * naive
    );
    assert!(busy < naive, "carried fits ({busy}) must beat the same-speed guess ({naive}) on average");
}
