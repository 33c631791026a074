//! Idle time per stream by HTA's rules (DESIGN §3, README "HTA"), on a
//! hand-made stream whose every gap has a known cause.

use std::path::{Path, PathBuf};

use tracecast_ingest::analysis::{AnalyzeOptions, WindowMode, analyze_job};
use tracecast_ingest::{Job, ReadOptions, kineto};

/// A launch call at `launch` µs and its kernel on `stream` at `ts` for `dur` µs.
fn launched(corr: i64, stream: i64, launch: f64, ts: f64, dur: f64) -> String {
    format!(
        r#"{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": {launch}, "dur": 1, "args": {{"correlation": {corr}}}}},
           {{"ph": "X", "cat": "kernel", "name": "k{corr}", "pid": 0, "tid": {stream}, "ts": {ts}, "dur": {dur}, "args": {{"stream": {stream}, "correlation": {corr}}}}}"#
    )
}

#[test]
fn stream_gaps_follow_htas_rules() {
    // Stream 7, the causes of its gaps (threshold 30 µs):
    //   110→115  5 µs, launched at 60 (before the GPU went idle): kernel wait
    //   125→225  100 µs, launched at 70: other
    //   235→300  65 µs, launched at 280 (after): host wait
    //   310→340  30 µs, not shorter than the threshold: other
    //   350→355  5 µs, launched exactly when the previous kernel ended: kernel wait
    // Stream 8 runs first (0–20 µs): stream 7's time before its first kernel is no gap of it.
    let events = [
        launched(1, 8, 0.0, 0.0, 20.0),
        launched(2, 7, 50.0, 100.0, 10.0),
        launched(3, 7, 60.0, 115.0, 10.0),
        launched(4, 7, 70.0, 225.0, 10.0),
        launched(5, 7, 280.0, 300.0, 10.0),
        launched(6, 7, 90.0, 340.0, 10.0),
        launched(7, 7, 350.0, 355.0, 10.0),
    ];
    let json = format!(r#"{{"traceEvents": [{}]}}"#, events.join(",\n"));
    let t = kineto::parse_bytes(json.as_bytes(), Path::new("rank-0.json"), &ReadOptions::default()).unwrap();
    let job = Job::from_traces(PathBuf::from("synthetic"), vec![Ok(t)]);
    let mut opts = AnalyzeOptions::default();
    opts.window = WindowMode::All;
    let a = analyze_job(&job, &opts);
    let rank = &a.ranks[0];
    let s7 = rank.idle_by_stream.iter().find(|s| s.stream == 7).unwrap();
    assert_eq!((s7.idle.host_wait_us, s7.idle.kernel_wait_us, s7.idle.other_us), (65.0, 10.0, 130.0));
    let s8 = rank.idle_by_stream.iter().find(|s| s.stream == 8).unwrap();
    assert_eq!((s8.idle.host_wait_us, s8.idle.kernel_wait_us, s8.idle.other_us), (0.0, 0.0, 0.0));
    // The GPU as a whole, by the same rules over the union of its streams, also has the
    // 20→100 µs gap after stream 8 (kernel 2 launched at 50: host wait).
    let g = rank.idle_split;
    assert_eq!((g.host_wait_us, g.kernel_wait_us, g.other_us), (80.0 + 65.0, 10.0, 130.0));
}
