//! Profiler steps partition the analysed window (DESIGN §3): a lagging
//! stream must not stretch every step over its neighbours.

use std::path::{Path, PathBuf};

use tracecast_ingest::analysis::{AnalyzeOptions, WindowMode, analyze_job};
use tracecast_ingest::{Job, ReadOptions, kineto};

#[test]
fn the_steps_of_every_shared_trace_partition_their_window() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces");
    let mut checked = 0;
    for f in tracecast_ingest::job::trace_files_under(&root).unwrap() {
        let job = Job::read(f.clone(), std::slice::from_ref(&f), &ReadOptions::default(), &|_| {});
        let a = analyze_job(&job, &AnalyzeOptions::default());
        for r in &a.ranks {
            if r.steps.is_empty() || r.window != WindowMode::Steps {
                continue;
            }
            let sum: f64 = r.steps.iter().map(|s| s.breakdown.gpu_span_us).sum();
            assert!(
                sum <= r.breakdown.gpu_span_us + 1e-3,
                "{}: steps sum to {sum} µs in a {} µs window",
                f.display(),
                r.breakdown.gpu_span_us
            );
            for s in &r.steps {
                assert!(s.breakdown.busy_us <= s.breakdown.gpu_span_us + 1e-3, "{} step {}", f.display(), s.step);
            }
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked} traces with steps");
}

#[test]
fn a_lagging_stream_does_not_stretch_every_step() {
    // Three 100 µs steps on the compute stream; a side stream launched in each
    // step runs 250 µs, into the next step. Without partitioning every step's
    // window would reach into the next one (steps summing past the window).
    let x = |cat: &str, name: &str, tid: i64, ts: f64, dur: f64, args: &str| {
        format!(r#"{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 1, "tid": {tid}, "ts": {ts}, "dur": {dur}, "args": {{{args}}}}}"#)
    };
    let mut ev = Vec::new();
    let mut corr = 1;
    for step in 0..3 {
        let t0 = 1000.0 * f64::from(step);
        ev.push(x("user_annotation", &format!("ProfilerStep#{step}"), 100, t0, 900.0, ""));
        for (stream, start, dur) in [(7, t0 + 10.0, 100.0), (9, t0 + 20.0, 1250.0)] {
            ev.push(x("cuda_runtime", "cudaLaunchKernel", 100, t0 + 1.0 + corr as f64, 1.0, &format!(r#""correlation": {corr}"#)));
            ev.push(format!(
                r#"{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": {stream}, "ts": {start}, "dur": {dur}, "args": {{"stream": {stream}, "correlation": {corr}}}}}"#
            ));
            corr += 1;
        }
    }
    let json = format!(r#"{{"traceEvents": [{}]}}"#, ev.join(",\n"));
    let t = kineto::parse_bytes(json.as_bytes(), Path::new("lag.json"), &ReadOptions::default()).unwrap();
    let job = Job::from_traces(PathBuf::from("lag"), vec![Ok(t)]);
    let r = &analyze_job(&job, &AnalyzeOptions::default()).ranks[0];
    assert_eq!(r.steps.len(), 3);
    let spans: Vec<f64> = r.steps.iter().map(|s| s.breakdown.gpu_span_us).collect();
    // Step k runs from its first kernel (10 µs after its start) to the next step's first kernel.
    assert!((spans[0] - 1000.0).abs() < 1e-6 && (spans[1] - 1000.0).abs() < 1e-6, "{spans:?}");
    // The last one ends with its lagging kernel.
    assert!((spans[2] - 1260.0).abs() < 1e-6, "{spans:?}");
    let sum: f64 = spans.iter().sum();
    assert!((sum - r.breakdown.gpu_span_us).abs() < 1e-6, "{sum} vs {}", r.breakdown.gpu_span_us);
}
