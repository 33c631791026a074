//! Per-kernel overheads in real traces: the host's launch call and the
//! device's gap between kernels.
//!
//! For each Kineto trace given: the median duration of the runtime/driver
//! launch calls, the median idle gap on one stream between consecutive kernels
//! when the next kernel was launched before the previous one ended (queued: the
//! gap is the device's own per-kernel cost, not the host's), and the 10th
//! percentile of kernel durations. Prints file names and numbers only.
//! Kernels and launch calls are read as ingest names them in every era's
//! spelling (2021's `Kernel` and `Runtime` categories too).
//!
//! `cargo run --release -p tracecast-ingest --example kernel_overheads -- TRACE.json.gz...`

use std::collections::BTreeMap;
use std::path::PathBuf;

use tracecast_ingest::link::{Links, NONE};
use tracecast_ingest::{EventKind, RankTrace, ReadOptions, kineto};

/// What one trace says about per-kernel overheads; `None` where it has no sample.
struct Overheads {
    kernels: usize,
    launch_call_us: Option<f64>,
    queued_gap_us: Option<f64>,
    queued_gaps: usize,
    p10_kernel_us: Option<f64>,
}

/// Median of nanosecond values, in µs.
fn median_us(mut ns: Vec<i64>) -> Option<f64> {
    ns.sort_unstable();
    let n = ns.len();
    let mid = |i: usize| ns.get(i).map(|&v| v as f64);
    let ns_value = if n % 2 == 1 { mid(n / 2)? } else { (mid(n.checked_sub(1)? / 2)? + mid(n / 2)?) / 2.0 };
    Some(ns_value / 1000.0)
}

/// A launch call: a runtime or driver call whose name says so (`cudaLaunchKernel`, `cuLaunchKernelEx`, …).
fn is_launch(trace: &RankTrace, row: usize) -> bool {
    trace.events.kind.get(row) == Some(&EventKind::Runtime) && trace.name(row).contains("aunch")
}

fn overheads(trace: &RankTrace) -> Overheads {
    let ev = &trace.events;
    let launch_durs: Vec<i64> = (0..ev.len()).filter(|&i| is_launch(trace, i)).map(|i| ev.dur_ns[i]).collect();
    let kernels: Vec<usize> = (0..ev.len()).filter(|&i| ev.kind[i] == EventKind::Kernel).collect();
    let links = Links::new(trace);
    // Kernels per stream (device, stream), in start order (file order among equal starts).
    let mut streams: BTreeMap<(i64, i64), Vec<usize>> = BTreeMap::new();
    for &k in &kernels {
        streams.entry((ev.pid[k], ev.tid[k])).or_default().push(k);
    }
    let mut gaps = Vec::new();
    for rows in streams.values_mut() {
        rows.sort_by_key(|&k| ev.ts_ns[k]);
        for pair in rows.windows(2) {
            let &[a, b] = pair else { continue };
            let call = links.launch.get(b).copied().unwrap_or(NONE);
            if call == NONE || !is_launch(trace, call as usize) {
                continue;
            }
            // Queued: `b`'s launch call ended before `a` did, so the device waited on itself.
            let end = ev.end_ns(a);
            if ev.end_ns(call as usize) < end && end <= ev.ts_ns[b] {
                gaps.push(ev.ts_ns[b] - end);
            }
        }
    }
    let mut durs: Vec<i64> = kernels.iter().map(|&k| ev.dur_ns[k]).collect();
    durs.sort_unstable();
    Overheads {
        kernels: kernels.len(),
        launch_call_us: median_us(launch_durs),
        queued_gaps: gaps.len(),
        queued_gap_us: median_us(gaps),
        p10_kernel_us: durs.get(durs.len() / 10).map(|&d| d as f64 / 1000.0),
    }
}

/// `v` with two decimals in `width` columns, `nan` when there is no value.
fn us(v: Option<f64>, width: usize) -> String {
    match v {
        Some(v) => format!("{v:width$.2}"),
        None => format!("{:>width$}", "nan"),
    }
}

fn main() {
    let files: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if files.is_empty() {
        eprintln!("usage: kernel_overheads TRACE.json.gz...");
        std::process::exit(2);
    }
    let mut opts = ReadOptions::default();
    opts.shapes = false;
    let mut failed = false;
    for path in &files {
        let trace = match kineto::read_path(path, &opts) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e}");
                failed = true;
                continue;
            }
        };
        let o = overheads(&trace);
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        println!(
            "{name:60} kernels {:6}  launch call {} us  queued gap {} us (n={})  p10 kernel {} us",
            o.kernels,
            us(o.launch_call_us, 5),
            us(o.queued_gap_us, 5),
            o.queued_gaps,
            us(o.p10_kernel_us, 6)
        );
    }
    if failed {
        std::process::exit(1);
    }
}
