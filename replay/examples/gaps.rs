//! Per trace: the timings the execution graph measures ([`Timings`](tracecast_replay::graph::Timings)) with
//! the distributions behind them — evidence for the graph's rules — and the
//! per-kernel overheads that do not shrink with the GPU (BENCHMARKS.md,
//! *Generation to generation*).
//!
//! For each rank of each trace (a directory stands for its trace files, each
//! read on its own):
//!
//! - kernels: how many, and the 10th percentile of their durations;
//! - launch call: durations of the runtime/driver launch calls
//!   (`cudaLaunchKernel`, `cuLaunchKernelEx`, …), the host's per-kernel cost;
//! - queued gap: the gap between back-to-back activities (kernels, copies,
//!   memsets) on one stream whose launch call started at least a launch
//!   latency before the previous one ended, the device's own per-activity
//!   cost — the graph's `queue_gap_us` is its median (0 when negative: with
//!   programmatic dependent launch the next kernel starts before the previous
//!   ends), `queue_tolerance_us` its 99th percentile (clamped); without launch
//!   calls in the trace, the lower half of all back-to-back gaps, as the graph
//!   takes them;
//! - all gaps: every back-to-back gap, queued or not;
//! - idle launch: launch-to-start latency of activities launched onto an
//!   idle stream (the graph's `launch_latency_us` is its median).
//!
//! The gap samples are the graph's own ([`GapSamples`], from which it
//! measures its [`Timings`](tracecast_replay::graph::Timings)). Times in µs; quantiles as the graph takes them
//! (the sample at the rounded rank).
//!
//! `cargo run --release -p tracecast-replay --example gaps -- TRACE_OR_DIR...`

use std::path::{Path, PathBuf};

use tracecast_ingest::link::Links;
use tracecast_ingest::{EventKind, Job, RankTrace, ReadOptions};
use tracecast_replay::graph::{GapSamples, quantile};

/// [`quantile`] in µs with two decimals in `width` columns, `nan` when `v` is empty.
fn q(v: &mut [i64], p: f64, width: usize) -> String {
    match quantile(v, p) {
        Some(ns) => format!("{:width$.2}", ns as f64 / 1000.0),
        None => format!("{:>width$}", "nan"),
    }
}

/// What one rank's trace says about its per-kernel overheads, ns.
struct Samples {
    kernels: Vec<i64>,
    launch_calls: Vec<i64>,
    gaps: GapSamples,
}

/// The samples of `t`: its kernels and launch calls, and the graph's own gap samples.
fn samples(t: &RankTrace, links: &Links) -> Samples {
    let ev = &t.events;
    let is_launch = |i: usize| ev.kind[i] == EventKind::Runtime && t.name(i).contains("aunch");
    Samples {
        kernels: (0..ev.len()).filter(|&i| ev.kind[i] == EventKind::Kernel).map(|i| ev.dur_ns[i]).collect(),
        launch_calls: (0..ev.len()).filter(|&i| is_launch(i)).map(|i| ev.dur_ns[i]).collect(),
        gaps: GapSamples::of(t, links),
    }
}

fn report(path: &Path, opts: &ReadOptions) -> bool {
    let job = Job::read(path.to_path_buf(), &[path.to_path_buf()], opts, &|_| {});
    for e in &job.failures {
        eprintln!("error: {e}");
    }
    for rank in &job.ranks {
        let t = &rank.trace;
        let links = Links::new(t);
        let name = if job.ranks.len() > 1 { format!("{} rank {}", path.display(), rank.rank) } else { path.display().to_string() };
        let mut s = samples(t, &links);
        let g = &mut s.gaps;
        let (k, c, qd, a, l) = (&mut s.kernels, &mut s.launch_calls, &mut g.queued, &mut g.all, &mut g.idle_launch);
        println!("{name}");
        println!(
            "  kernels {:6} p10 {}  launch call n={} p50 {} p99 {} max {}",
            k.len(),
            q(k, 0.1, 6),
            c.len(),
            q(c, 0.5, 5),
            q(c, 0.99, 6),
            q(c, 1.0, 8)
        );
        println!(
            "  queued gap n={} p10 {} p50 {} p90 {} p99 {} | all gaps p50 {} | idle launch n={} p10 {} p50 {} p90 {}",
            qd.len(),
            q(qd, 0.1, 5),
            q(qd, 0.5, 5),
            q(qd, 0.9, 5),
            q(qd, 0.99, 6),
            q(a, 0.5, 5),
            l.len(),
            q(l, 0.1, 6),
            q(l, 0.5, 6),
            q(l, 0.9, 6)
        );
    }
    job.failures.is_empty()
}

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if args.is_empty() {
        eprintln!("usage: gaps TRACE_OR_DIR...");
        std::process::exit(2);
    }
    let mut opts = ReadOptions::default();
    opts.shapes = false;
    let mut ok = true;
    for arg in &args {
        match tracecast_ingest::job::trace_files(arg) {
            Ok(files) => {
                for f in &files {
                    ok &= report(f, &opts);
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                ok = false;
            }
        }
    }
    if !ok {
        std::process::exit(1);
    }
}
