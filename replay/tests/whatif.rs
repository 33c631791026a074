//! What-ifs on known truth (DESIGN §5): two synthetic jobs that differ only in
//! one ground-truth parameter (same random draws: noise, skew, queue gaps of
//! 1–3 µs, event latencies); replaying one with the other's parameter must give
//! the other's measured step time within 2 %. The generator is realistic where
//! it matters to the graph: the host runs ahead of the GPU, queued kernels are
//! separated by gaps, the communication stream waits on events, the host
//! syncs once per step. Each case runs with and without `cuda_sync` rows, so
//! both the recorded and the inferred cross-stream waits are exercised.

use tracecast_calibrate::synth::JobSpec;
use tracecast_calibrate::{CalibrateOptions, Catalog, DeviceModel, calibrate};
use tracecast_ingest::Job;
use tracecast_replay::{LinkOverride, ReplayOptions, replay_job};

fn job_of(spec: &JobSpec) -> Job {
    tracecast_calibrate::synth::job(spec)
}

/// Mean measured step time over the ranks, µs.
fn measured_step_us(j: &Job) -> f64 {
    let r = replay_job(j, &ReplayOptions::default());
    for k in &r.ranks {
        assert!(k.error.abs() < 1e-3, "identity replay of rank {}: {}", k.rank, k.error);
    }
    r.ranks.iter().map(|k| k.measured_step_us).sum::<f64>() / r.ranks.len() as f64
}

fn spec(seed: u64, sync_rows: bool) -> JobSpec {
    let mut s = JobSpec::default();
    s.seed = seed;
    s.sync_rows = sync_rows;
    s.steps = 3;
    s.layers = 6;
    s
}

/// Replays `from` with `opts`, compares with `truth`'s measured step, prints
/// a row and returns the error of the projection.
fn check(label: (u64, bool), from: &Job, truth: &Job, opts: &ReplayOptions) -> f64 {
    let r = replay_job(from, opts);
    // Of --link only its summary: every collective re-costed, none left at its measured transfer.
    let link_summary = |n: &str| n.contains("collective(s) re-costed") && !n.contains("keep their measured transfer");
    assert!(r.notes.iter().all(|n| !n.contains("--link") || link_summary(n)), "{:?}", r.notes);
    let projected = r.ranks.iter().map(|k| k.replayed_step_us).sum::<f64>() / r.ranks.len() as f64;
    let (was, want) = (measured_step_us(from), measured_step_us(truth));
    let err = (projected - want) / want;
    println!("{:>5} {:>10} {:>14.3} {:>14.3} {:>14.3} {:>+8.2}", label.0, label.1, was / 1e3, want / 1e3, projected / 1e3, 100.0 * err);
    assert!((want - was).abs() > 0.1 * was, "the truth must move the step: {was} -> {want}");
    err
}

/// Each case's job at GEMM η 0.5 replayed through a profile calibrated on its
/// η 0.7 twin (both shaped by `with`) must give the twin's step within 2 %;
/// `identity` checks the η 0.5 job's identity replay first.
fn gemm_pairs(cases: &[(u64, bool)], with: impl Fn(&mut JobSpec), identity: impl Fn(&JobSpec, &tracecast_replay::JobReplay)) {
    let catalog = Catalog::builtin();
    println!("{:>5} {:>10} {:>14} {:>14} {:>14} {:>8}", "seed", "sync rows", "η 0.5 ms", "η 0.7 ms", "projected ms", "error %");
    for &(seed, sync_rows) in cases {
        let mut slow = spec(seed, sync_rows);
        with(&mut slow);
        slow.gemm_efficiency = 0.5;
        let mut fast = slow.clone();
        fast.gemm_efficiency = 0.7;
        let (slow_job, fast_job) = (job_of(&slow), job_of(&fast));
        identity(&slow, &replay_job(&slow_job, &ReplayOptions::default()));
        let profile = calibrate(std::slice::from_ref(&fast_job), &catalog, &CalibrateOptions::default()).remove(0);
        let mut opts = ReplayOptions::default();
        opts.target = Some(DeviceModel::from_profile(&profile, &catalog));
        let err = check((seed, sync_rows), &slow_job, &fast_job, &opts);
        assert!(err.abs() <= 0.02, "seed {seed}: error {err}");
    }
}

/// Each case's job at 10 GB/s of all-reduce bus bandwidth replayed with its
/// 20 GB/s twin's link (both shaped by `with`) must give the twin's step within 2 %.
fn link_pairs(cases: &[(u64, bool)], with: impl Fn(&mut JobSpec), identity: impl Fn(&JobSpec, &tracecast_replay::JobReplay)) {
    println!("{:>5} {:>10} {:>14} {:>14} {:>14} {:>8}", "seed", "sync rows", "10 GB/s ms", "20 GB/s ms", "projected ms", "error %");
    for &(seed, sync_rows) in cases {
        let mut slow = spec(seed, sync_rows);
        with(&mut slow);
        slow.allreduce_busbw_gbps = 10.0;
        let mut fast = slow.clone();
        fast.allreduce_busbw_gbps = 20.0;
        let slow_job = job_of(&slow);
        identity(&slow, &replay_job(&slow_job, &ReplayOptions::default()));
        let mut opts = ReplayOptions::default();
        opts.link = Some(LinkOverride { alpha_us: fast.allreduce_alpha_us, busbw_gbps: 20.0, ..LinkOverride::default() });
        let err = check((seed, sync_rows), &slow_job, &job_of(&fast), &opts);
        assert!(err.abs() <= 0.02, "seed {seed}: error {err}");
    }
}

#[test]
fn gemm_efficiency_projected_through_a_calibrated_profile() {
    gemm_pairs(&[(1, true), (2, false), (3, true)], |_| {}, |_, _| {});
}

#[test]
fn link_bandwidth_projected_through_link_overrides() {
    link_pairs(&[(1, true), (2, false), (4, true)], |_| {}, |_, _| {});
}

#[test]
fn the_reverse_what_ifs_slow_the_step_to_the_other_truth() {
    // Replaying the fast trace with the slow link gives the slow trace's step.
    let mut slow = spec(5, true);
    slow.allreduce_busbw_gbps = 10.0;
    let mut fast = spec(5, true);
    fast.allreduce_busbw_gbps = 20.0;
    let mut opts = ReplayOptions::default();
    opts.link = Some(LinkOverride { alpha_us: slow.allreduce_alpha_us, busbw_gbps: 10.0, ..LinkOverride::default() });
    let err = check((5, true), &job_of(&fast), &job_of(&slow), &opts);
    assert!(err.abs() <= 0.02, "error {err}");
}

#[test]
fn a_host_that_polls_for_the_gpu_follows_a_faster_gpu() {
    // The host waits for each step's GPU work by polling an event
    // (`cudaEventQuery` every 5 µs) instead of blocking: the polling loop must
    // end when the awaited work ends, or a faster GPU would leave the host
    // polling as long as measured and the next step starting as late.
    gemm_pairs(
        &[(6, true), (7, false)],
        |s| s.host_poll = true,
        |s, identity| assert!(identity.ranks.iter().all(|r| r.graph.host_polls == s.steps as usize), "one polling loop per step and rank"),
    );
}

#[test]
fn scale_out_from_8_to_64_ranks_matches_the_64_rank_job() {
    // The same synthetic job at 8 and at 64 ranks (all-reduce α–β the truth at
    // both sizes): replaying the 8-rank job with `--world-size 64` and the true
    // link must give the 64-rank job's step. Waits come from the simulated
    // joins of the 8 ranks, never from scaling measured durations.
    println!("{:>5} {:>10} {:>14} {:>14} {:>14} {:>8}", "seed", "sync rows", "8 ranks ms", "64 ranks ms", "projected ms", "error %");
    for (seed, sync_rows) in [(8, true), (9, false)] {
        let mut small = spec(seed, sync_rows);
        small.ranks = 8;
        small.allreduce_busbw_gbps = 5.0;
        let mut large = small.clone();
        large.ranks = 64;
        let mut opts = ReplayOptions::default();
        opts.world_size = Some(64);
        opts.link = Some(LinkOverride {
            alpha_us: small.allreduce_alpha_us,
            busbw_gbps: small.allreduce_busbw_gbps,
            inter_alpha_us: Some(small.allreduce_alpha_us),
            inter_busbw_gbps: Some(small.allreduce_busbw_gbps),
        });
        let err = check((seed, sync_rows), &job_of(&small), &job_of(&large), &opts);
        assert!(err.abs() <= 0.02, "seed {seed}: error {err}");
    }
}

#[test]
fn a_host_that_waits_on_gpu_written_memory_follows_the_collective() {
    // Before the optimizer the host spins on a flag the GPU writes when the last
    // gradient all-reduce ends (no runtime call marks the wait): replaying the
    // slow-link job with the fast link must let the host go on as soon as the
    // faster all-reduce ends.
    link_pairs(
        &[(10, true), (11, false)],
        |s| s.host_flag_wait = true,
        |s, identity| assert!(identity.ranks.iter().all(|r| r.graph.host_comm_waits == s.steps as usize), "one wait per step and rank"),
    );
}
