//! Calibration recovers the ground truth of synthetic traces: GEMM and
//! memory-bound efficiency, all-reduce latency and bus bandwidth, within 2 %,
//! over several seeds and truths, with kernel noise, rank skew and clock offsets.

use std::path::PathBuf;

use tracecast_calibrate::Catalog;
use tracecast_calibrate::profile::{CalibrateOptions, calibrate};
use tracecast_calibrate::synth::{JobSpec, render_job};
use tracecast_calibrate::work::KernelClass;
use tracecast_ingest::{Job, ReadOptions, kineto};

fn job_of(spec: &JobSpec) -> Job {
    tracecast_calibrate::synth::job(spec)
}

fn within(what: &str, got: f64, want: f64, tol: f64) {
    assert!(((got - want) / want).abs() <= tol, "{what}: fitted {got}, truth {want}");
}

#[test]
fn recovers_efficiencies_latency_and_bandwidth() {
    let cases = [(1, 0.70, 0.80, 15.0, 150.0), (2, 0.55, 0.65, 25.0, 80.0), (3, 0.82, 0.90, 8.0, 300.0), (4, 0.40, 0.50, 40.0, 12.0)];
    for (seed, gemm, mem, alpha, busbw) in cases {
        let mut spec = JobSpec::default();
        spec.seed = seed;
        spec.ranks = 4;
        spec.steps = 2;
        spec.gemm_efficiency = gemm;
        spec.memory_efficiency = mem;
        spec.allreduce_alpha_us = alpha;
        spec.allreduce_busbw_gbps = busbw;
        let profiles = calibrate(&[job_of(&spec)], &Catalog::builtin(), &CalibrateOptions::default());
        assert_eq!(profiles.len(), 1);
        let p = &profiles[0];
        assert_eq!(p.device.catalog_id.as_deref(), Some("h100-sxm"));
        let k = |c: KernelClass| p.kernels.iter().find(|k| k.class == c).unwrap_or_else(|| panic!("no {c:?} fit: {:?}", p.unfitted));
        within(&format!("seed {seed} gemm η"), k(KernelClass::Gemm).efficiency, gemm, 0.02);
        within(&format!("seed {seed} elementwise η"), k(KernelClass::Elementwise).efficiency, mem, 0.02);
        let gemm_fit = k(KernelClass::Gemm);
        assert!(gemm_fit.efficiency_ci95[0] <= gemm * 1.02 && gemm_fit.efficiency_ci95[1] >= gemm * 0.98, "{:?}", gemm_fit.efficiency_ci95);
        let l = p.links.iter().find(|l| l.collective.as_str() == "all_reduce").unwrap_or_else(|| panic!("no link fit: {:?}", p.unfitted));
        assert_eq!(l.fitted_on, "transfer");
        assert_eq!(l.group_size, Some(4));
        assert_eq!(l.domain, "intra");
        within(&format!("seed {seed} α"), l.alpha_us, alpha, 0.02);
        within(&format!("seed {seed} bus bandwidth"), l.busbw_gbps, busbw, 0.02);
        within(&format!("seed {seed} link efficiency"), l.efficiency.unwrap(), busbw / 450.0, 0.02);
    }
}

#[test]
fn one_rank_uses_the_lower_envelope() {
    // Without the other ranks the waits cannot be separated from the transfers;
    // the fastest instance of each size still bounds the link from below.
    let mut spec = JobSpec::default();
    spec.ranks = 4;
    spec.steps = 3;
    let mut job = job_of(&spec);
    job.ranks.truncate(1);
    let p = &calibrate(&[job], &Catalog::builtin(), &CalibrateOptions::default())[0];
    let l = p.links.iter().find(|l| l.collective.as_str() == "all_reduce").expect("link fit");
    assert_eq!(l.fitted_on, "lower_envelope");
    // Waits only lengthen kernels: the bandwidth is not overestimated.
    assert!(l.busbw_gbps <= 150.0 * 1.02, "{}", l.busbw_gbps);
    assert!(l.busbw_gbps >= 150.0 * 0.5, "{}", l.busbw_gbps);
}

/// Repeats of one message size say nothing of how time grows with size: the link is not fitted,
/// and the reason counts sizes (24 all-reduces of one size had been fitted at α 0 and 95 GB/s
/// where the truth was 20 µs and 100, R² 0, with a tight interval).
#[test]
fn a_link_of_one_message_size_is_not_fitted() {
    let spec = JobSpec::default();
    let one_size = |json: &str| -> String {
        let mut out = String::with_capacity(json.len());
        let mut rest = json;
        while let Some(at) = ["\"In msg nelems\": ", "\"Out msg nelems\": "].iter().filter_map(|k| rest.find(k).map(|i| i + k.len())).min()
        {
            out.push_str(&rest[..at]);
            out.push_str("12582912");
            rest = rest[at..].trim_start_matches(|c: char| c.is_ascii_digit());
        }
        out.push_str(rest);
        out
    };
    let traces = render_job(&spec)
        .into_iter()
        .enumerate()
        .map(|(r, s)| kineto::parse_bytes(one_size(&s.json).as_bytes(), &PathBuf::from(format!("rank-{r}.json")), &ReadOptions::default()))
        .collect();
    let job = Job::from_traces(PathBuf::from("synthetic"), traces);
    let p = &calibrate(&[job], &Catalog::builtin(), &CalibrateOptions::default())[0];
    assert!(p.links.iter().all(|l| l.collective.as_str() != "all_reduce"), "{:?}", p.links);
    let u = p.unfitted.iter().find(|u| u.what.starts_with("all_reduce/")).expect("the all-reduce link unfitted");
    assert!(u.reason.starts_with("1 distinct message sizes") && u.samples > 3, "{u:?}");
    // A job of one rank: its all-reduces move nothing between GPUs, said so (it had been "group
    // size unknown" beside `Group size: 1`).
    let mut one = JobSpec::default();
    one.ranks = 1;
    let p = &calibrate(&[tracecast_calibrate::synth::job(&one)], &Catalog::builtin(), &CalibrateOptions::default())[0];
    let u = p.unfitted.iter().find(|u| u.what.starts_with("all_reduce/1/")).expect("the one-rank link unfitted");
    assert!(u.reason.starts_with("a group of 1 rank moves no bytes between GPUs"), "{u:?}");
}

#[test]
fn link_fits_without_group_size_args_take_the_group_from_the_job() {
    // Older PyTorch writes NCCL kernels without `Group size` (nor process-group
    // args): the default group is then the whole world of the job.
    let spec = JobSpec::default();
    let traces = render_job(&spec)
        .into_iter()
        .enumerate()
        .map(|(r, s)| {
            let stripped = s
                .json
                .replace(&format!(", \"Group size\": {}", spec.ranks), "")
                .replace(", \"Process Group Name\": \"0\", \"Process Group Description\": \"default_pg\"", "");
            assert!(!stripped.contains("Group size"));
            kineto::parse_bytes(stripped.as_bytes(), &PathBuf::from(format!("rank-{r}.json")), &ReadOptions::default())
        })
        .collect();
    let job = Job::from_traces(PathBuf::from("synthetic"), traces);
    let p = &calibrate(&[job], &Catalog::builtin(), &CalibrateOptions::default())[0];
    let l = p.links.iter().find(|l| l.collective.as_str() == "all_reduce").unwrap_or_else(|| panic!("no link fit: {:?}", p.unfitted));
    assert_eq!(l.group_size, Some(i64::from(spec.ranks)));
    within("busbw", l.busbw_gbps, spec.allreduce_busbw_gbps, 0.02);
    assert!(p.notes.iter().any(|n| n.contains("group size taken from the job")), "{:?}", p.notes);
}

#[test]
fn the_slowed_rank_is_named_with_the_wait_it_caused() {
    // One rank's host takes 2 ms longer before every step; the others wait for
    // it at the all-reduces its late gradients hold up.
    let mut spec = JobSpec::default();
    spec.ranks = 4;
    spec.rank_skew = 0.0;
    spec.slow_rank = Some((2, 2000.0));
    let truth = render_job(&spec);
    let job = job_of(&spec);
    let a = tracecast_ingest::analysis::analyze_job(&job, &tracecast_ingest::analysis::AnalyzeOptions::default());
    let top = a.stragglers.first().expect("a straggler");
    assert_eq!(top.rank, 2, "{:?}", a.stragglers);
    assert_eq!(top.times_last, truth[2].times_last);
    within("wait caused", top.wait_caused_us, truth[2].wait_caused_us, 0.02);
    assert!(truth[2].wait_caused_us > 3.0 * 2000.0, "{}", truth[2].wait_caused_us);
}

#[test]
fn the_job_step_time_is_the_slowest_rank_per_step() {
    // The slowed rank's host loads 2 ms longer before each step: its steps are
    // the job's, and every rank waits for it at the collectives anyway.
    let mut spec = JobSpec::default();
    spec.rank_skew = 0.0;
    spec.slow_rank = Some((3, 2000.0));
    let a = tracecast_ingest::analysis::analyze_job(&job_of(&spec), &tracecast_ingest::analysis::AnalyzeOptions::default());
    assert_eq!(a.totals.steps.len(), spec.steps as usize);
    for s in &a.totals.steps {
        assert_eq!(s.ranks, spec.ranks as usize);
        let max =
            a.ranks.iter().flat_map(|r| r.steps.iter().filter(|x| x.step == s.step)).map(|x| x.breakdown.gpu_span_us).fold(0.0, f64::max);
        assert_eq!(s.step_us, max);
    }
}

#[test]
fn collective_bandwidth_is_measured_on_the_transfer_not_the_wait() {
    // With rank skew the all-reduces wait for the slowest rank; the table's bus
    // bandwidth must come from the transfer (the truth B, less what α costs the
    // small buckets), not from durations that include the wait.
    let mut spec = JobSpec::default();
    spec.rank_skew = 3.0;
    let a = tracecast_ingest::analysis::analyze_job(&job_of(&spec), &tracecast_ingest::analysis::AnalyzeOptions::default());
    for r in &a.ranks {
        let c = r.collectives.iter().find(|c| c.collective.as_str() == "all_reduce").expect("all-reduce stats");
        assert_eq!(c.group_size, Some(i64::from(spec.ranks)));
        let busbw = c.busbw_gbps.expect("bus bandwidth");
        assert!(busbw <= spec.allreduce_busbw_gbps * 1.02, "rank {}: {busbw}", r.rank);
        assert!(busbw >= spec.allreduce_busbw_gbps * 0.9, "rank {}: {busbw} GB/s (waits counted?)", r.rank);
    }
}

#[test]
fn a_named_group_without_group_size_args_spans_the_ranks_it_was_matched_on() {
    // A named process group (not the default one) without `Group size` args: its
    // size is the number of ranks of the job the instance was matched on, in the
    // analysis table (bus bandwidth printed, not "-") as in the link fits.
    let spec = JobSpec::default();
    let traces = render_job(&spec)
        .into_iter()
        .enumerate()
        .map(|(r, s)| {
            let renamed = s.json.replace(&format!(", \"Group size\": {}", spec.ranks), "").replace(
                "\"Process Group Name\": \"0\", \"Process Group Description\": \"default_pg\"",
                "\"Process Group Name\": \"7\", \"Process Group Description\": \"dp_replicate\"",
            );
            assert!(!renamed.contains("Group size") && renamed.contains("dp_replicate"));
            kineto::parse_bytes(renamed.as_bytes(), &PathBuf::from(format!("rank-{r}.json")), &ReadOptions::default())
        })
        .collect();
    let job = Job::from_traces(PathBuf::from("synthetic"), traces);
    let a = tracecast_ingest::analysis::analyze_job(&job, &tracecast_ingest::analysis::AnalyzeOptions::default());
    for r in &a.ranks {
        let c = r.collectives.iter().find(|c| c.collective.as_str() == "all_reduce").expect("all-reduce stats");
        assert_eq!(c.group_size, Some(i64::from(spec.ranks)), "rank {}", r.rank);
        assert!(c.busbw_gbps.is_some(), "rank {}", r.rank);
    }
    let p = &calibrate(&[job], &Catalog::builtin(), &CalibrateOptions::default())[0];
    let l = p.links.iter().find(|l| l.collective.as_str() == "all_reduce").unwrap_or_else(|| panic!("no link fit: {:?}", p.unfitted));
    assert_eq!(l.group_size, Some(i64::from(spec.ranks)));
}

#[test]
fn calibrating_one_rank_at_a_time_gives_the_same_profile() {
    // The command line summarizes each rank as it is read and drops its trace;
    // the profile equals the one from the whole job in memory.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for dir in [root.join("fixtures/demo"), root.join("../shared/traces/hta/trace_filter")] {
        let files = tracecast_ingest::job::trace_files(&dir).unwrap();
        let job = Job::read(dir.clone(), &files, &ReadOptions::default(), &|_| {});
        let (catalog, opts) = (Catalog::builtin(), CalibrateOptions::default());
        let whole = calibrate(std::slice::from_ref(&job), &catalog, &opts);
        drop(job);
        let (ranks, failures) = Job::summarize(&files, &ReadOptions::default(), &|_| {}, &|r| {
            let ctx = tracecast_ingest::analysis::RankContext::new(r, &opts.classifier);
            let work = tracecast_calibrate::work::kernel_work_of(&ctx);
            (tracecast_calibrate::profile::rank_samples(&ctx, &work, &catalog), ctx.into_collectives())
        });
        assert!(failures.is_empty());
        let (samples, collectives): (Vec<_>, Vec<_>) = ranks.into_iter().unzip();
        let collectives = tracecast_ingest::analysis::JobCollectives::new(collectives, 0);
        let apart = tracecast_calibrate::profile::calibrate_summaries(vec![(samples, &collectives)], &catalog, &opts);
        assert_eq!(serde_json::to_string(&apart).unwrap(), serde_json::to_string(&whole).unwrap(), "{}", dir.display());
    }
}

/// A truth near the peak: at η 0.95 over 16 ranks, 2 % kernel noise once drew GEMMs
/// faster than the GPU's peak, so the fit was refused as "η = 0.95 (best single op
/// 100 % of peak), more than the peak". The generator no longer runs a kernel past
/// the peak, and the fit recovers the truth. The 16-rank all-reduce is one node's
/// (150 GB/s); with the default 8 GPUs per node it looks like a cross-node group
/// above the NICs' 50 GB/s, and the refusal says to set the node size.
#[test]
fn recovers_an_efficiency_near_the_peak_and_says_when_a_group_fits_one_node() {
    let mut spec = JobSpec::default();
    spec.ranks = 16;
    spec.steps = 2;
    spec.gemm_efficiency = 0.95;
    let job = job_of(&spec);
    let p = &calibrate(std::slice::from_ref(&job), &Catalog::builtin(), &CalibrateOptions::default())[0];
    let gemm = p.kernels.iter().find(|k| k.class == KernelClass::Gemm).unwrap_or_else(|| panic!("no GEMM fit: {:?}", p.unfitted));
    within("gemm η", gemm.efficiency, 0.95, 0.02);
    assert!(gemm.achieved_max <= 1.0, "{}", gemm.achieved_max);
    let refused = p.unfitted.iter().find(|u| u.what.starts_with("all_reduce")).expect("the 16-rank group refused across nodes");
    assert!(refused.reason.contains("--gpus-per-node"), "{}", refused.reason);
    let mut opts = CalibrateOptions::default();
    opts.gpus_per_node = Some(16);
    let p = &calibrate(&[job], &Catalog::builtin(), &opts)[0];
    let l = p.links.iter().find(|l| l.collective.as_str() == "all_reduce").unwrap_or_else(|| panic!("no link fit: {:?}", p.unfitted));
    assert_eq!(l.domain, "intra");
    within("bus bandwidth", l.busbw_gbps, 150.0, 0.02);
}
