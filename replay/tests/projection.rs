//! Cross-device projection, leave one out: calibrate MI300X on three of the
//! four Hugging Face models traced on both GPUs, project the fourth model's
//! H100 trace onto MI300X, and compare total GPU busy time with its measured
//! MI300X trace.

use std::path::{Path, PathBuf};

use tracecast_calibrate::{CalibrateOptions, Catalog, DeviceModel, calibrate};
use tracecast_ingest::analysis::{AnalyzeOptions, WindowMode, analyze_job};
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

fn busy_us(j: &Job) -> f64 {
    let mut o = AnalyzeOptions::default();
    o.window = WindowMode::All;
    analyze_job(j, &o).totals.breakdown.busy_us
}

#[test]
fn leave_one_out_h100_to_mi300x() {
    let catalog = Catalog::builtin();
    let mut errors = Vec::new();
    let mut naive = Vec::new();
    for (k, held_out) in MODELS.iter().enumerate() {
        let training: Vec<Job> =
            MODELS.iter().enumerate().filter(|(i, _)| *i != k).map(|(_, m)| job(&format!("tracelens/mi300/{m}"))).collect();
        let profile = calibrate(&training, &catalog, &CalibrateOptions::default()).remove(0);
        assert_eq!(profile.device.catalog_id.as_deref(), Some("mi300x"));
        let h100 = job(&format!("tracelens/h100/{held_out}"));
        let mi300 = job(&format!("tracelens/mi300/{held_out}"));
        let mut opts = ReplayOptions::default();
        opts.target = Some(DeviceModel::from_profile(&profile, &catalog));
        let projected: f64 = replay_job(&h100, &opts).ranks.iter().map(|r| r.replayed.busy_us).sum();
        let measured = busy_us(&mi300);
        let as_is = busy_us(&h100);
        let err = (projected - measured) / measured;
        println!(
            "{held_out:<60} H100 busy {:>10.1} µs, projected MI300X {:>10.1} µs, measured MI300X {:>10.1} µs: error {:+.1} % (unprojected {:+.1} %)",
            as_is,
            projected,
            measured,
            100.0 * err,
            100.0 * (as_is - measured) / measured
        );
        errors.push(err.abs());
        naive.push(((as_is - measured) / measured).abs());
    }
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    let mean_naive = naive.iter().sum::<f64>() / naive.len() as f64;
    println!("mean |error| {:.1} % (taking the H100 time as is: {:.1} %)", 100.0 * mean, 100.0 * mean_naive);
    // The projection must beat taking the H100 time as the MI300X time, and
    // hold the accuracy it reached (12.7 % mean; the issue aims at 10 %).
    assert!(mean < mean_naive, "projection {mean} vs as-is {mean_naive}");
    assert!(mean < 0.15, "mean |error| {mean}");
}
