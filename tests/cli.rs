//! End-to-end tests of the `tracecast` binary over real traces in
//! `../shared/traces` (read in place), the bundled fixtures, and bad input.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

use common::*;

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

const KEYS: [&str; 8] = ["gpu_span_us", "busy_us", "idle_us", "compute_us", "comm_us", "memory_us", "overlap_us", "exposed_comm_us"];

#[test]
fn every_shared_trace_analyzes_with_exit_zero() {
    let files = all_shared_traces();
    assert_eq!(files.len(), 50, "the shared corpus has 50 traces");
    let dir = scratch("all");
    let out = dir.join("all.json");
    let mut args: Vec<&std::ffi::OsStr> =
        vec!["analyze".as_ref(), "--each".as_ref(), "--window".as_ref(), "all".as_ref(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()];
    args.extend(files.iter().map(|f| f.as_os_str()));
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&out);
    let jobs = doc["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 50);
    let mut no_gpu = 0;
    for job in jobs {
        let rank = &job["ranks"][0];
        for k in KEYS {
            assert!(rank[k].as_f64().unwrap() >= 0.0, "{k} in {}", rank["file"]);
        }
        let b = |k: &str| rank[k].as_f64().unwrap();
        assert!((b("busy_us") + b("idle_us") - b("gpu_span_us")).abs() < 1e-3);
        assert!(b("exposed_comm_us") <= b("comm_us") + 1e-9);
        if b("gpu_span_us") == 0.0 {
            no_gpu += 1;
            let notes: Vec<&str> = rank["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
            assert!(notes.iter().any(|n| n.contains("no GPU activity")), "{notes:?}");
        }
    }
    // cpu_only, cupti_profiler (counters only) and distributed_info_unavailable (CPU-only trim).
    assert_eq!(no_gpu, 3);
}

#[test]
fn same_input_gives_byte_identical_json() {
    let dir = scratch("determinism");
    let job = shared().join("hta/trace_filter");
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    for out in [&a, &b] {
        let o = run(&["analyze".as_ref(), job.as_os_str(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let doc = json(&a);
    let job = &doc["jobs"][0];
    assert_eq!(job["world_size"], 128);
    assert_eq!(job["ranks"].as_array().unwrap().len(), 2);
    assert_eq!(job["ranks"][1]["rank"], 1);
    // Two ranks of one job: their collectives are matched and split into transfer and wait.
    let c = &job["ranks"][0]["collectives"][0];
    assert!(c["matched"].as_u64().unwrap() > 0, "{c}");
    let (t, w, total) = (c["transfer_us"].as_f64().unwrap(), c["wait_us"].as_f64().unwrap(), c["total_us"].as_f64().unwrap());
    assert!(t > 0.0 && w >= 0.0 && t + w <= total + 1e-6, "{c}");
}

#[test]
fn tables_match_the_json() {
    let dir = scratch("tables");
    let out = dir.join("a.json");
    let csv = dir.join("csv");
    let pq = dir.join("pq");
    let trace = shared().join("hta/nccl_parser_config/nccl_data.json.gz");
    let o = run(&[
        "analyze".as_ref(),
        trace.as_os_str(),
        "--json".as_ref(),
        out.as_os_str(),
        "--csv".as_ref(),
        csv.as_os_str(),
        "--parquet".as_ref(),
        pq.as_os_str(),
        "-q".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&out);
    let rank = &doc["jobs"][0]["ranks"][0];
    let text = std::fs::read_to_string(csv.join("breakdown.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |k: &str| row[header.iter().position(|h| *h == k).unwrap()].parse::<f64>().unwrap();
    for k in KEYS {
        assert!((col(k) - rank[k].as_f64().unwrap()).abs() < 1e-6, "{k}");
    }
    // Per-stream idle (HTA's rules: gaps between a stream's own activities) is within the span.
    let streams = rank["idle_by_stream"].as_array().unwrap();
    assert!(streams.len() >= 2, "compute and NCCL streams");
    let span = rank["gpu_span_us"].as_f64().unwrap();
    for st in streams {
        let sum = st["host_wait_us"].as_f64().unwrap() + st["kernel_wait_us"].as_f64().unwrap() + st["other_us"].as_f64().unwrap();
        assert!(sum > 0.0 && sum <= span + 1e-6, "{st}");
    }
    let steps = std::fs::read_to_string(csv.join("steps.csv")).unwrap();
    assert_eq!(steps.lines().count(), 1 + rank["steps"].as_array().unwrap().len());
    let coll = std::fs::read_to_string(csv.join("collectives.csv")).unwrap();
    assert!(coll.contains("all_reduce") && coll.contains("broadcast"), "{coll}");
    // The counts the bytes and the transfer and wait are of stand beside them.
    assert!(coll.starts_with("job,rank,collective,process_group,group_size,count,total_us,mean_us,bytes,sized_count,algbw_gbps,busbw_gbps,matched,transfer_us,wait_us\n"), "{coll}");
    for t in ["breakdown", "steps", "collectives", "kernels"] {
        let bytes = std::fs::read(pq.join(format!("{t}.parquet"))).unwrap();
        assert_eq!(&bytes[..4], b"PAR1");
    }
}

#[test]
fn gpu_hours_extrapolation() {
    let dir = scratch("hours");
    let out = dir.join("a.json");
    let trace = shared().join("hta/trace_diff/control/control.json.gz");
    let o = run(&[
        "analyze".as_ref(),
        trace.as_os_str(),
        "--job-gpus".as_ref(),
        "8".as_ref(),
        "--job-hours".as_ref(),
        "10".as_ref(),
        "--json".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("GPU-hours of exposed communication"), "{stdout}");
    let t = &json(&out)["jobs"][0]["totals"];
    let f = t["exposed_comm_us"].as_f64().unwrap() / t["gpu_span_us"].as_f64().unwrap();
    assert!((t["gpu_hours"]["exposed_comm"].as_f64().unwrap() - f * 80.0).abs() < 1e-9);
    assert!(f > 0.0);
    // The headline says the JSON's figure to three significant figures (it had rounded a
    // fraction of an hour to "0" where the per-dimension table said 0.2).
    let h = t["gpu_hours"]["exposed_comm"].as_f64().unwrap();
    let digits = if h >= 100.0 {
        0
    } else if h >= 10.0 {
        1
    } else if h >= 1.0 {
        2
    } else {
        3
    };
    assert!(stdout.contains(&format!(": {h:.digits$} GPU-hours of exposed communication")), "{h}: {stdout}");
    // GPUs are counted whole: 1.5 GPUs had been taken.
    let o = run(&["analyze".as_ref(), trace.as_os_str(), "--job-gpus".as_ref(), "1.5".as_ref(), "--job-hours".as_ref(), "10".as_ref()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--job-gpus 1.5: a whole number of GPUs"), "{}", stderr(&o));
}

#[test]
fn demo_runs_on_the_bundled_fixture() {
    let dir = scratch("demo");
    let o = bin().arg("demo").current_dir(&dir).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("Exposed communication:"), "{stdout}");
    assert!(stdout.contains("all_reduce"), "{stdout}");
    // It ends by writing the report and saying where.
    let report = dir.join("tracecast-demo/report.html");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("Report") && last.ends_with("tracecast-demo/report.html"), "{last}");
    let html = std::fs::read_to_string(report).unwrap();
    assert!(html.contains("Measured and projected onto link ×2"));
    // The job comes from the binary, written out beside the page: `demo` needs no checkout.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    for rank in 0..4 {
        let name = format!("rank-{rank}.json.gz");
        assert_eq!(std::fs::read(dir.join("tracecast-demo/traces").join(&name)).unwrap(), std::fs::read(fixture.join(&name)).unwrap());
    }
    assert!(stdout.lines().next().unwrap().ends_with("tracecast-demo/traces"), "{stdout}");
    // Run again it replaces its own job; a trace of someone else's there is not replaced.
    assert!(bin().arg("demo").current_dir(&dir).output().unwrap().status.success());
    let theirs = dir.join("tracecast-demo/traces/rank-0.json.gz");
    copy_of_a_real_trace(&theirs);
    let o = bin().arg("demo").current_dir(&dir).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("rank-0.json.gz: cannot write: not a trace `tracecast synth` wrote"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&theirs).unwrap(), std::fs::read(shared().join("hta/trace_diff/control/control.json.gz")).unwrap());
}

#[test]
fn synthetic_job_clock_offsets_and_waits_are_recovered() {
    let dir = scratch("synth");
    // Stragglers of several ms, well above the kernels' noise.
    let mut spec = tracecast_calibrate::synth::JobSpec::default();
    spec.ranks = 4;
    spec.seed = 7;
    spec.data_loading_us = 5000.0;
    spec.rank_skew = 1.0;
    tracecast_calibrate::synth::write_job(&spec, &dir).unwrap();
    let out = dir.join("a.json");
    let o = run(&["analyze".as_ref(), dir.as_os_str(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&out);
    let job = &doc["jobs"][0];
    let truth = tracecast_calibrate::synth::render_job(&spec);
    for (r, t) in job["ranks"].as_array().unwrap().iter().zip(&truth) {
        // All ranks end each collective together in true time, so the fitted
        // offset undoes the clock skew the generator applied.
        let fitted = r["clock_offset_us"].as_f64().unwrap();
        assert!((fitted + t.clock_offset_us).abs() < 0.01, "rank {}: fitted {fitted}, truth {}", r["rank"], t.clock_offset_us);
        let c = &r["collectives"][0];
        assert_eq!(c["count"], spec.steps as u64 * spec.layers as u64);
        assert_eq!(c["group_size"], 4);
        assert_eq!(c["process_group"], "0 (default_pg)");
    }
    // The rank with the longest host delay arrives last at every collective, so it waits least.
    let slowest = truth.iter().enumerate().max_by(|a, b| a.1.data_loading_us.total_cmp(&b.1.data_loading_us)).unwrap().0;
    let waits: Vec<f64> = job["ranks"].as_array().unwrap().iter().map(|r| r["collectives"][0]["wait_us"].as_f64().unwrap()).collect();
    let least = waits.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
    assert_eq!(least, slowest, "waits {waits:?}");
}

/// Writes `bytes` as `name` in a fresh directory and runs `analyze` on it.
fn analyze_bad(name: &str, file: &str, bytes: &[u8]) -> (Output, PathBuf) {
    let dir = scratch(name);
    let path = dir.join(file);
    std::fs::write(&path, bytes).unwrap();
    let o = run(&["analyze".as_ref(), path.as_os_str(), "-q".as_ref()]);
    (o, path)
}

fn assert_clean_failure(o: &Output, path: &Path, offset: Option<&str>) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(&path.display().to_string()), "message must name the file: {err}");
    if let Some(offset) = offset {
        assert!(err.contains(offset), "message must give the offset {offset}: {err}");
    }
}

fn synthetic_trace() -> String {
    let mut spec = tracecast_calibrate::synth::JobSpec::default();
    spec.ranks = 1;
    spec.steps = 1;
    spec.layers = 1;
    tracecast_calibrate::synth::render_job(&spec).remove(0).json
}

/// The offset of a gzip stream's damage is where inflating stops, as `zcat` recovers it
/// (it was the start of the read block the damage fell in: byte 65536, or 0).
#[test]
fn truncated_gzip_is_a_clean_error_at_the_decompressed_offset_of_the_cut() {
    use std::io::Read;
    let full = std::fs::read(shared().join("hta/trace_filter/sampled_rank-0.json.gz")).unwrap();
    for cut in [full.len() / 2, 3000] {
        let half = &full[..cut];
        // What inflates before the stream breaks.
        let (mut inflated, mut buf) = (0u64, [0u8; 4096]);
        let mut decoder = flate2::read::MultiGzDecoder::new(half);
        while let Ok(n) = decoder.read(&mut buf) {
            if n == 0 {
                break;
            }
            inflated += n as u64;
        }
        assert!(inflated > 0, "{cut}");
        let (o, p) = analyze_bad("trunc-gz", "rank-0.json.gz", half);
        assert_clean_failure(&o, &p, Some(&format!("byte {inflated} (decompressed)")));
        assert!(stderr(&o).contains("gzip"));
    }
    // Corrupt in its middle: the reader drops what it inflated in the call that met the damage,
    // so the offset said is at most 64 KiB before it, and says so (it had said "byte 0" of
    // damage 5 MB in, as if exact).
    let mut corrupt = full.clone();
    let mid = corrupt.len() / 2;
    // (0xFF over 4 KiB: an invalid block type, where a few flipped bits decode to other text.)
    corrupt[mid..mid + 4096].fill(0xFF);
    let (mut good, mut one) = (0u64, [0u8; 1]);
    let mut decoder = flate2::read::MultiGzDecoder::new(&corrupt[..]);
    while let Ok(1) = decoder.read(&mut one) {
        good += 1;
    }
    let (o, p) = analyze_bad("corrupt-gz", "rank-0.json.gz", &corrupt);
    assert_clean_failure(&o, &p, Some("or within the 64 KiB after it (decompressed)"));
    let said: u64 = stderr(&o).split("byte ").nth(1).and_then(|t| t.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
    assert!(said <= good && good - said <= 64 << 10, "said {said}, inflated before the damage {good}");
}

#[test]
fn truncated_json_is_a_clean_error_with_offset() {
    let text = synthetic_trace();
    let cut = text.find("\"cat\": \"kernel\"").unwrap() + 5;
    let (o, p) = analyze_bad("trunc-json", "t.json", &text.as_bytes()[..cut]);
    assert_clean_failure(&o, &p, Some(&format!("byte {cut}")));
    assert!(stderr(&o).contains("truncated"));
    // Where the cut event starts, counted back from the end (it was an offset into the read block).
    let start = text[..cut].rfind('{').unwrap();
    let back = format!("it starts {} bytes before the end", cut - start);
    assert!(stderr(&o).contains(&back), "{} (want: {back})", stderr(&o));
    // The same bytes gzip-compressed: the offset is into the decompressed text.
    let (o, p) = analyze_bad("trunc-json-gz", "t.json.gz", &gzip(&text.as_bytes()[..cut]));
    assert_clean_failure(&o, &p, Some(&format!("byte {cut}")));
}

#[test]
fn missing_closing_brackets_are_tolerated_and_reported() {
    let text = synthetic_trace();
    let end = text.rfind("\n],").unwrap();
    let (o, _) = analyze_bad("no-close", "t.json", &text.as_bytes()[..end]);
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = scratch("no-close-json");
    let out = dir.join("o.json");
    let path = std::env::temp_dir().join(format!("tracecast-test-{}-no-close/t.json", std::process::id()));
    let o = run(&["analyze".as_ref(), path.as_os_str(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success());
    let notes = json(&out)["jobs"][0]["ranks"][0]["notes"].to_string();
    assert!(notes.contains("without closing"), "{notes}");
}

/// A trace cut off before its first whole event is unreadable, not a rank that ran nothing
/// (it had stood among the job's good ranks with every figure 0).
#[test]
fn a_trace_cut_before_its_first_event_is_a_clean_error() {
    let (o, p) = analyze_bad("cut-before-first", "t.json", br#"{"traceEvents": ["#);
    assert_clean_failure(&o, &p, Some("byte 17"));
    assert!(stderr(&o).contains("before its first whole event"), "{}", stderr(&o));
}

#[test]
fn invalid_json_is_a_clean_error_with_offset() {
    let bad = br#"{"traceEvents": [{"ph": "X" "ts": 1}]}"#;
    let (o, p) = analyze_bad("invalid", "t.json", bad);
    assert_clean_failure(&o, &p, Some("byte 28"));
    assert!(!stderr(&o).contains("(decompressed)"), "{}", stderr(&o));
    // In a gzip file the offset is into the inflated text, said as a damaged stream's is (it had not been).
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut z, bad).unwrap();
    let (o, p) = analyze_bad("invalid-gz", "t.json.gz", &z.finish().unwrap());
    assert_clean_failure(&o, &p, Some("byte 28 (decompressed)"));
}

#[test]
fn wrong_types_are_clean_errors() {
    let bad = br#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "soon", "dur": 1}]}"#;
    let (o, p) = analyze_bad("wrong-ts", "t.json", bad);
    assert_clean_failure(&o, &p, Some("byte 85"));
    let (o, p) = analyze_bad("wrong-name", "t.json", br#"{"traceEvents": [{"ph": "X", "name": 17, "ts": 1}]}"#);
    assert_clean_failure(&o, &p, Some("byte "));
    let (o, p) = analyze_bad("wrong-events", "t.json", br#"{"traceEvents": 5}"#);
    assert_clean_failure(&o, &p, Some("byte 16"));
    let (o, p) = analyze_bad("not-object", "t.json", b"[1, 2, 3]");
    assert_clean_failure(&o, &p, Some("byte 0"));
}

#[test]
fn empty_and_foreign_files_are_clean_errors() {
    let (o, p) = analyze_bad("empty", "t.json", b"");
    assert_clean_failure(&o, &p, None);
    assert!(stderr(&o).contains("empty"));
    let (o, p) = analyze_bad("empty-gz", "t.json.gz", &gzip(b""));
    assert_clean_failure(&o, &p, None);
    let (o, p) = analyze_bad("no-events", "t.json", br#"{"schemaVersion": 1, "deviceProperties": []}"#);
    assert_clean_failure(&o, &p, None);
    assert!(stderr(&o).contains("traceEvents"));
    let missing = scratch("missing").join("nope.json");
    let o = run(&["analyze".as_ref(), missing.as_os_str()]);
    assert_clean_failure(&o, &missing, None);
}

#[test]
fn window_options_that_cannot_apply_are_said_not_silently_dropped() {
    // One step: --drop-last-step keeps it; --window all: --steps narrows only the step list.
    let one_step = shared().join("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz");
    let o = run(&["analyze".as_ref(), one_step.as_os_str(), "--drop-last-step".as_ref()]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("--drop-last-step: the trace has one step, kept"));
    // No steps at all: said by the option's name too (it had been passed over in silence).
    let no_steps = shared().join("hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz");
    let o = run(&["analyze".as_ref(), no_steps.as_os_str(), "--drop-last-step".as_ref()]);
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("--drop-last-step: the trace has no profiler steps"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let control = shared().join("hta/trace_diff/control/control.json.gz");
    let o = run(&["analyze".as_ref(), control.as_os_str(), "--window".as_ref(), "all".as_ref(), "--steps".as_ref(), "1010".as_ref()]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("--window all: the breakdown and tables cover the whole GPU window"));
    // Neither note where the options apply.
    let o = run(&["analyze".as_ref(), control.as_os_str(), "--steps".as_ref(), "1010".as_ref()]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("--window all:"));
    // The step --drop-last-step leaves out is named (the analysis had read as the whole
    // trace's), and a last step outside --steps is said to leave nothing more out (the output
    // had been byte-identical to --steps alone, without a word).
    let text = |args: &[&str]| {
        let o = bin().arg("analyze").arg(&control).args(args).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(text(&["--drop-last-step"]).contains("--drop-last-step: step 1014, the last, left out"));
    let outside = text(&["--steps", "1010-1012", "--drop-last-step"]);
    assert!(outside.contains("--drop-last-step: the last step, 1014, is outside --steps 1010-1012: nothing more left out"), "{outside}");
    assert!(!text(&[]).contains("--drop-last-step"));
}

/// One process driving two GPUs wrote one trace (pid = the device ordinal): its GPUs' times
/// are one rank's, but communication on device 1 under compute on device 0 is exposed (it had
/// counted as overlapped), and the analysis says how it reads such a trace.
#[test]
fn a_trace_of_two_gpus_says_they_are_analysed_as_one_rank() {
    let dir = scratch("two-devices");
    let t = dir.join("two.json");
    let kernel = |name: &str, device: u32, stream: u32, ts: u32| {
        format!(
            r#"{{"ph":"X","cat":"kernel","name":"{name}","pid":{device},"tid":{stream},"ts":{ts},"dur":10,"args":{{"device":{device},"stream":{stream}}}}}"#
        )
    };
    // Device 0 computes over 0–10 µs; device 1 communicates over 0–10 µs and computes over 5–15 µs.
    let events = [kernel("gemm", 0, 7, 0), kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 1, 8, 0), kernel("gemm", 1, 9, 5)];
    std::fs::write(&t, format!(r#"{{"traceEvents":[{}]}}"#, events.join(","))).unwrap();
    let json = dir.join("a.json");
    let o = run(&["analyze".as_ref(), t.as_os_str(), "-q".as_ref(), "--json".as_ref(), json.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rank = &v["jobs"][0]["ranks"][0];
    // Device 1's communication is hidden only by device 1's compute (5–10 µs), not device 0's.
    let got = (rank["comm_us"].as_f64(), rank["overlap_us"].as_f64(), rank["exposed_comm_us"].as_f64(), rank["busy_us"].as_f64());
    assert_eq!(got, (Some(10.0), Some(5.0), Some(5.0), Some(15.0)));
    let notes = rank["notes"].to_string();
    assert!(
        notes.contains("GPU activity on 2 devices (0, 1) in this one trace: analysed as one rank, communication exposed while any GPU's runs without its own compute"),
        "{notes}"
    );
    // Both GPUs communicate over 0–10 µs, only device 1 under its own compute: device 0's is
    // exposed, whatever device 1 does (a union of each GPU's overlap had hidden it).
    let events = [
        kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 0, 7, 0),
        kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 1, 8, 0),
        kernel("gemm", 1, 9, 0),
    ];
    std::fs::write(&t, format!(r#"{{"traceEvents":[{}]}}"#, events.join(","))).unwrap();
    let o = run(&["analyze".as_ref(), t.as_os_str(), "-q".as_ref(), "--json".as_ref(), json.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rank = &v["jobs"][0]["ranks"][0];
    assert_eq!((rank["overlap_us"].as_f64(), rank["exposed_comm_us"].as_f64()), (Some(0.0), Some(10.0)));
}

/// `--world-size` at the job's own size resizes nothing and says so (it had reported "21 of 21
/// resized collective(s)" with the replay unchanged).
#[test]
fn a_world_size_equal_to_the_jobs_resizes_nothing() {
    let t = shared().join("hta/nccl_parser_config/nccl_data.json.gz");
    let o = run(&["replay".as_ref(), t.as_os_str(), "--world-size".as_ref(), "2".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("--world-size 2 is the job's own world size: nothing was resized"), "{text}");
    assert!(!text.contains("resized collective(s)"), "{text}");
}

/// `replay` takes `analyze`'s window (`--steps`, `--drop-last-step`, `--window`): its step times
/// are those of the analysed steps, each the analysis's GPU span of that step. It had no such
/// options, so a replay could not be held against the analysis of the same steps.
#[test]
fn replay_takes_the_analysed_window() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let dir = scratch("replay-window");
    let (replayed, analysed) = (dir.join("replay.json"), dir.join("analyze.json"));
    for (cmd, out) in [("replay", &replayed), ("analyze", &analysed)] {
        let o =
            run(&[cmd.as_ref(), demo.as_os_str(), "--steps".as_ref(), "2-3".as_ref(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()]);
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
    }
    let (replayed, analysed) = (json(&replayed), json(&analysed));
    for r in 0..4 {
        let steps = replayed["jobs"][0]["ranks"][r]["steps"].as_array().unwrap();
        let spans = analysed["jobs"][0]["ranks"][r]["steps"].as_array().unwrap();
        assert_eq!(steps.iter().map(|s| s["step"].as_i64().unwrap()).collect::<Vec<_>>(), [2, 3], "rank {r}");
        for (s, a) in steps.iter().zip(spans) {
            assert_eq!(s["step"], a["step"]);
            let (m, g) = (s["measured_step_us"].as_f64().unwrap(), a["gpu_span_us"].as_f64().unwrap());
            assert!((m - g).abs() < 1e-3, "rank {r} step {}: {m} vs {g}", s["step"]);
        }
    }
    // Steps the traces do not have: refused as `analyze` refuses them (they had replayed to zeros, exit 0).
    for what_if in [&[][..], &["--what-if", "a:compute=2"][..]] {
        let mut a: Vec<&std::ffi::OsStr> = vec!["replay".as_ref(), demo.as_os_str(), "--steps".as_ref(), "999".as_ref()];
        a.extend(what_if.iter().map(std::ffi::OsStr::new));
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2), "{what_if:?}");
        assert!(stderr(&o).contains("steps 999..999 select nothing in") && stderr(&o).contains("it has steps 1–3"), "{}", stderr(&o));
    }
    // Under --window all the breakdowns are of the whole window: the note does not claim them.
    let o = run(&["replay".as_ref(), demo.as_os_str(), "--window".as_ref(), "all".as_ref(), "--drop-last-step".as_ref()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("note: the step times and speed-up cover the analysed steps"), "{text}");
    let o = run(&["replay".as_ref(), demo.as_os_str(), "--drop-last-step".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("note: the step times, speed-up and breakdowns cover the analysed steps"), "{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("0          2 ")), "{text}");
    // The critical path ends with the last analysed step: one step's is about a third of the
    // three steps' (it had run to the trace's last GPU work, the same whatever --steps said).
    let path_ms = |args: &[&str]| {
        let mut a: Vec<&std::ffi::OsStr> = vec!["replay".as_ref(), demo.as_os_str()];
        a.extend(args.iter().map(std::ffi::OsStr::new));
        let text = String::from_utf8_lossy(&run(&a).stdout).into_owned();
        let line = text.lines().find(|l| l.starts_with("Critical path ")).unwrap_or_else(|| panic!("{text}")).to_string();
        line["Critical path ".len()..].split(' ').next().unwrap().parse::<f64>().unwrap()
    };
    let (all, one) = (path_ms(&[]), path_ms(&["--steps", "2"]));
    assert!((one / all - 1.0 / 3.0).abs() < 0.05, "--steps 2: {one} ms of the whole {all} ms");
}

/// What `analyze` says of a rank, `replay` says too: a trace with no GPU work replays to zeros
/// (it had printed them as a result, exit 0, without a word), and `--device` on a trace that
/// records its GPU is not applied (said by `analyze`, silent in `replay`). A launch latency no
/// launch measured is said to be assumed (it was labelled measured).
#[test]
fn replay_says_what_the_analysis_says_of_a_rank() {
    let cpu_only = shared().join("hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
    let o = run(&["replay".as_ref(), cpu_only.as_os_str()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("note: rank 34: no GPU activity (kernels, memcpy, memset) in this trace: all times are zero"), "{text}");
    assert!(text.contains("launch latency 5.0 µs (assumed: no launch onto an idle stream to measure)"), "{text}");
    let a100 = shared().join("hta/trace_diff/control/control.json.gz");
    let o = run(&["replay".as_ref(), a100.as_os_str(), "--device".as_ref(), "v100".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("note: rank 3: --device not applied: the trace records \"NVIDIA A100-PG509-200\""), "{text}");
    assert!(text.contains("launch latency") && text.contains("µs (measured)"), "{text}");
    // How the window was chosen, as `analyze` says it, once for the ranks it is true of.
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let o = run(&["replay".as_ref(), demo.as_os_str(), "--steps".as_ref(), "3-4".as_ref()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("note: ranks 0–3: --steps 3-4: this trace has 1 of the 2 steps named (it has steps 1–3)"), "{text}");
    // A step of the range that --drop-last-step left out is named so: the note had said the
    // trace lacked step 3 while listing it.
    let o = run(&["replay".as_ref(), demo.as_os_str(), "--steps".as_ref(), "2-3".as_ref(), "--drop-last-step".as_ref()]);
    let text = String::from_utf8_lossy(&o.stdout);
    let said = "--steps 2-3: 1 of the 2 steps named analysed (the trace has steps 1–3; --drop-last-step left out step 3)";
    assert!(text.contains(said), "{text}");
    // A step without GPU work: `analyze` lists it at 0, the replay says why it has no row.
    let mi250 = shared().join("hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz");
    let o = run(&["replay".as_ref(), mi250.as_os_str()]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("note: rank 0: step(s) 2 ran no GPU work: listed here, not in the job's step time")
    );
}

/// `--target` with `--scale compute=K`: each kernel at the target's price, then K× faster, and
/// the replay says so (its pricing block's total, before the speed-up, had read as what ran).
#[test]
fn a_target_and_a_compute_speed_up_compose_and_say_so() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let dir = scratch("target-and-scale");
    let out = dir.join("r.json");
    let args = ["--target", "b200", "--scale", "compute=2", "--json"];
    let mut a: Vec<&std::ffi::OsStr> = vec!["replay".as_ref(), demo.as_os_str()];
    a.extend(args.iter().map(std::ffi::OsStr::new));
    a.push(out.as_os_str());
    let o = run(&a);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("note: --target and --scale compute=2: each compute kernel at the target's price, then 2× faster")
    );
    let j = json(&out);
    let priced: f64 = j["jobs"][0]["projection"]["rules"].as_array().unwrap().iter().map(|r| r["projected_us"].as_f64().unwrap()).sum();
    let ran: f64 = j["jobs"][0]["ranks"].as_array().unwrap().iter().map(|r| r["replayed"]["compute_us"].as_f64().unwrap()).sum();
    assert!((priced / ran - 2.0).abs() < 1e-3, "{priced} priced, {ran} ran");
}

/// `replay --measurements` that price nothing say so: without `--target` or `--world-size`, and
/// onto a target where no kernel is priced at its shape (the A100 trace's GEMMs record none the
/// tables hold). The output had been byte-identical to the run without them.
#[test]
fn measurements_a_replay_does_not_use_are_said_unused() {
    let a100 = shared().join("hta/trace_diff/control/control.json.gz");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let rows = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/h200/gemm.csv");
    let notes = |trace: &Path, target: Option<&str>| {
        let mut a: Vec<&std::ffi::OsStr> = vec!["replay".as_ref(), trace.as_os_str(), "--measurements".as_ref(), rows.as_os_str()];
        if let Some(t) = target {
            a.extend(["--target", t].map(std::ffi::OsStr::new));
        }
        let o = run(&a);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.starts_with("note: --measurements")).map(str::to_string).collect::<Vec<_>>()
    };
    assert!(notes(&a100, None)[0].contains("used by nothing here"));
    assert!(notes(&a100, Some("h200"))[0].contains("no kernel was priced at its shape"));
    // The demo's GEMMs are priced at their shapes: the rows are used, and said (as `project`
    // says its files were added; the replay had not said it).
    assert!(notes(&demo, Some("h200")).is_empty());
    let o = run(&["replay".as_ref(), demo.as_os_str(), "--measurements".as_ref(), rows.as_os_str(), "--target".as_ref(), "h200".as_ref()]);
    let text = String::from_utf8_lossy(&o.stdout);
    let said = text.lines().find(|l| l.contains("priced at their shapes by your measurements")).unwrap_or_else(|| panic!("{text}"));
    // Every GEMM of the demo: 288 a rank (as `diff` counts them), 4 ranks.
    assert!(said.starts_with("note: 1152 kernel(s)") && said.ends_with("gemm.csv)"), "{said}");
    let o = run(&["replay".as_ref(), demo.as_os_str(), "--target".as_ref(), "h200".as_ref()]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("by your measurements"));
    // A scenario that resizes the world prices collectives with them; a report without a
    // target or world size uses them no more than the replay does.
    let o = run(&[
        "replay".as_ref(),
        demo.as_os_str(),
        "--measurements".as_ref(),
        rows.as_os_str(),
        "--what-if".as_ref(),
        "big:world-size=8".as_ref(),
    ]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("used by nothing"));
    let page = scratch("measurements-unused").join("r.html");
    let o = run(&["report".as_ref(), demo.as_os_str(), "--measurements".as_ref(), rows.as_os_str(), "--out".as_ref(), page.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("note: --measurements: read, and used by nothing here"));
}

/// `replay --world-size` with the user's measurements across nodes of the job's GPU places the
/// ranks as they were taken (Polaris' 4 a node), as `project` does, and says so; given another
/// node size, or with measurements of another GPU than the job's (on whose network the grown
/// collectives are priced: those of the `--target` GPU), it says they price none of them.
#[test]
fn a_world_size_replay_says_when_the_users_measurements_across_nodes_price_nothing() {
    let dir = scratch("world-size-users-nodes");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    // Polaris' nccl-tests (A100s, 4 a node) as if of the demo's GPU, the H100.
    let polaris = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/polaris/polaris-le32.csv")).unwrap();
    let h100 = dir.join("h100.csv");
    std::fs::write(&h100, polaris.replace(",a100-40gb,", ",h100-sxm,")).unwrap();
    let a100 = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/polaris/polaris-le32.csv");
    let replay = |rows: &Path, extra: &[&str]| {
        let mut a: Vec<&std::ffi::OsStr> = vec![
            "replay".as_ref(),
            demo.as_os_str(),
            "--world-size".as_ref(),
            "1024".as_ref(),
            "--measurements".as_ref(),
            rows.as_os_str(),
        ];
        a.extend(extra.iter().map(std::ffi::OsStr::new));
        let o = run(&a);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // Without --gpus-per-node, the ranks are placed as the measurements were taken, as `project` places them.
    let theirs = replay(&h100, &[]);
    assert!(
        theirs.contains("note: --world-size: ranks placed 4 to a node, as your measurements of h100-sxm (alcf-polaris-nccl)"),
        "{theirs}"
    );
    let four = replay(&h100, &["--gpus-per-node", "4"]);
    let step = |text: &str| text.lines().find(|l| l.starts_with("Speed-up of the job's step")).map(str::to_string).unwrap();
    assert_eq!(step(&theirs), step(&four));
    assert!(!four.contains("note: --measurements"), "{four}");
    let eight = replay(&h100, &["--gpus-per-node", "8"]);
    assert!(
        eight.contains("note: --measurements: yours of h100-sxm (alcf-polaris-nccl) were taken at 4 GPUs per node, not the 8 this replay places ranks in"),
        "{eight}"
    );
    assert_ne!(step(&eight), step(&four));
    let target = replay(&a100, &["--target", "a100-40gb"]);
    assert!(target.contains("note: --measurements: yours across nodes are not of h100-sxm, the job's GPU"), "{target}");
    assert!(!target.contains("its collective rows are of"), "{target}");
    // Rows in a node of another GPU than the job's price none of the resized collectives either
    // (the step had moved as with no rows at all, without a word).
    let mi300x = dir.join("mi300x.csv");
    std::fs::write(&mi300x, "gpu,collective,gpus,size_bytes,time_us\nmi300x,all_reduce,4,1048576,50\n").unwrap();
    let other = replay(&mi300x, &[]);
    assert!(
        other.contains(
            "note: --measurements: its collective rows are of mi300x, not of the job's GPU h100-sxm: they price none of the resized collectives"
        ),
        "{other}"
    );
    assert!(!four.contains("its collective rows are of"), "{four}");
    // At the job's own size nothing is resized, and only that is said.
    let o =
        run(&["replay".as_ref(), demo.as_os_str(), "--world-size".as_ref(), "4".as_ref(), "--measurements".as_ref(), mi300x.as_os_str()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("is the job's own world size: nothing was resized") && !text.contains("its collective rows are of"), "{text}");
}

/// A projection whose kernel time is mostly without a work model says how much the speed-up
/// leaves at the source's speed: a V100 trace whose ops record no input shapes projected onto
/// an H100 at 1.000× with only the rules table's last row to say why. The demo's GEMMs carry
/// their shapes: nothing said.
#[test]
fn a_projection_says_how_much_kernel_time_it_could_not_price() {
    let v100 = shared().join("hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz");
    let o = run(&["replay".as_ref(), v100.as_os_str(), "--target".as_ref(), "h100-sxm".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let note =
        text.lines().find(|l| l.contains("kept their measured time: their ops have no work model")).unwrap_or_else(|| panic!("{text}"));
    // The share it states is the rules table's row of kernels kept at their measured time.
    let row = text.lines().find(|l| l.contains("kept its measured time (no work model)")).unwrap_or_else(|| panic!("{text}"));
    let kept_ms: f64 = row.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(note.contains(&format!("{kept_ms:.3} of")), "{note}\n{row}");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let o = run(&["replay".as_ref(), demo.as_os_str(), "--target".as_ref(), "h200".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Compute kernels priced from") && !text.contains("kept their measured time"), "{text}");
}

/// `--link` says how many collectives it re-costed and at what α and bus bandwidth (it had said
/// nothing, while `--world-size` reports its count and rule).
#[test]
fn link_says_what_it_re_costed() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let o = run(&["replay".as_ref(), demo.as_os_str(), "--link".as_ref(), "alpha=5,busbw=10,inter-busbw=4".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    // The demo's 4 ranks share a node: nothing of the link across nodes priced them.
    assert!(
        text.contains(
            "note: --link: 96 collective(s) re-costed as α + bus factor × bytes / bus bandwidth, in a node at α 5 µs and 10 GB/s\n"
        ),
        "{text}"
    );
    let o = run(&[
        "replay".as_ref(),
        demo.as_os_str(),
        "--link".as_ref(),
        "alpha=5,busbw=10,inter-busbw=4".as_ref(),
        "--gpus-per-node".as_ref(),
        "2".as_ref(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("in a node at α 5 µs and 10 GB/s, across nodes (96) at α 5 µs and 4 GB/s"), "{text}");
}

/// A V100 trace's kernels of no work onto an A100 keep their time: a short kernel costs what
/// NVIDIA's driver and runtime make it cost. The ratio of the two shipped floors (the tenth
/// percentile of other workloads' kernels: V100 1.0 µs, A100 3.0) had tripled them, so a faster
/// GPU ran them slower. Onto another vendor's GPU they still scale by the floors.
#[test]
fn kernels_of_no_work_keep_their_time_onto_a_gpu_of_the_same_vendor() {
    let trace = shared().join("kineto/tb_plugin_test/gpu_metrics_input.json.gz");
    let dir = scratch("latency-bound-same-vendor");
    let rule = |target: &str| {
        let out = dir.join(format!("{target}.json"));
        let o = run(&["replay".as_ref(), trace.as_os_str(), "--target".as_ref(), target.as_ref(), "--json".as_ref(), out.as_os_str()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let j = json(&out);
        let rules = j["jobs"][0]["projection"]["rules"].as_array().unwrap().clone();
        let r = rules.iter().find(|r| r["rule"] == "latency_bound").unwrap_or_else(|| panic!("{rules:?}")).clone();
        (r["measured_us"].as_f64().unwrap(), r["projected_us"].as_f64().unwrap(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let (measured, projected, text) = rule("a100-80gb");
    assert!(measured > 0.0 && projected == measured, "{measured} → {projected}");
    assert!(text.contains("a short kernel costs what NVIDIA's driver and runtime make it cost"), "{text}");
    let (measured, projected, text) = rule("mi300x");
    assert!(projected > 2.0 * measured, "{measured} → {projected}");
    assert!(!text.contains("driver and runtime"), "{text}");
}

/// A job that fills its node (the demo: 4 H100 ranks, `--gpus-per-node 4`) grown to two nodes is
/// priced by the pricing layer at both sizes, the 4-GPU group from the GPU's measured 8-GPU node
/// by the bus factor. It had fallen back to the nominal links' ratio (1.75/1.5 × 450/50 = 10.5×
/// on every all-reduce, the step 0.13× as fast) and said no price existed.
#[test]
fn a_job_filling_its_node_grown_past_it_is_priced_at_both_sizes() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let dir = scratch("world-size-full-node");
    let out = dir.join("grown.json");
    let o = run(&[
        "replay".as_ref(),
        demo.as_os_str(),
        "--world-size".as_ref(),
        "8".as_ref(),
        "--gpus-per-node".as_ref(),
        "4".as_ref(),
        "--json".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("96 of 96 resized collective(s) scaled by the pricing layer's price at both sizes"), "{text}");
    assert!(!text.contains("without a price"), "{text}");
    // Leaving NVLink for 50 GB/s NICs slows the step, by the priced ratio (about 2.8× on the
    // 64 MiB all-reduces), not by the nominal one.
    let speedup = json(&out)["jobs"][0]["speedup"].as_f64().unwrap();
    assert!((0.3..0.9).contains(&speedup), "{speedup}");
}

/// The demo (4 H100 ranks, 8 a node) grown past one node: 9–15 GPUs are priced, as `hw cost`
/// prices them, by the smallest measured cross-node curve (16 GPUs) carried onto the node's
/// network, which moves with the count by under 1 %. They had fallen to the nominal links and
/// made a step of 12 GPUs 5× slower than one of 16.
#[test]
fn a_world_grown_to_part_of_a_second_node_is_priced_near_two_nodes() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let dir = scratch("world-size-part-node");
    let step_ms = |n: &str| -> f64 {
        let out = dir.join(format!("{n}.json"));
        let o = run(&[
            "replay".as_ref(),
            demo.as_os_str(),
            "--world-size".as_ref(),
            n.as_ref(),
            "-q".as_ref(),
            "--json".as_ref(),
            out.as_os_str(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let job = &json(&out)["jobs"][0];
        assert!(!job["notes"].to_string().contains("without a price"), "{n}: {}", job["notes"]);
        // Past one node (8 GPUs) the groups cross nodes, and that is said.
        assert_eq!(job["notes"].to_string().contains("the grown groups span nodes of 8 GPUs"), n.parse::<u32>().unwrap() > 8, "{n}");
        job["replayed_job_step_us"].as_f64().unwrap() / 1000.0
    };
    let steps: Vec<f64> = ["8", "9", "12", "15", "16", "32"].iter().map(|n| step_ms(n)).collect();
    for w in steps.windows(2) {
        assert!(w[1] >= w[0] * 0.99, "a larger world replayed faster: {steps:?}");
    }
    assert!(steps[2] <= steps[4] * 1.01, "12 GPUs cost more than 16: {steps:?}");
    // A job of 12 ranks grown to 16: the price at its own size is the curve of 16, said.
    let job = dir.join("twelve");
    synth(&job, &["--ranks", "12"]);
    let o = run(&["replay".as_ref(), job.as_os_str(), "--world-size".as_ref(), "16".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("by collective_below_counts at the job's size, collective_curve at the new"), "{text}");
}

/// A job whose traces name no GPU (HTA's sampled ranks) grown by --world-size: the links it is
/// scaled by are the defaults, and said to be, with how to name the GPU.
#[test]
fn a_world_grown_without_a_known_gpu_says_its_links_are_the_defaults() {
    let job = shared().join("hta/trace_filter");
    let o = run(&["replay".as_ref(), job.as_os_str(), "--world-size".as_ref(), "1024".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("the trace names no GPU the catalog knows (give it with --device ID)") && text.contains("default link bandwidths"),
        "{text}"
    );
    let o = run(&["replay".as_ref(), job.as_os_str(), "--world-size".as_ref(), "1024".as_ref(), "--device".as_ref(), "a100-80gb".as_ref()]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("names no GPU"), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn ranks_of_unrelated_runs_are_named_as_such() {
    // Rank 3 of an 8-rank A100 job and rank 1 of a 2-rank V100 job, given as one job.
    let (a, b) = (shared().join("hta/trace_diff/control/control.json.gz"), shared().join("hta/trace_diff/test/test.json.gz"));
    // Of as many files declaring each world size, the first file's is the job's; the other is named
    // and left out (it had been analysed as one job with a note, and calibrated as one, silently).
    let o = run(&["analyze".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("declares a world size of 2, where this job's files declare 8"), "{}", stderr(&o));
    // And says how to read them as two runs (a `report A B` had paged A alone, the diff unsaid).
    assert!(stderr(&o).contains("--each reads each file as a job of its own; `report --each A B` pages their diff"), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("1 rank(s) read"));
    // The ranks of one run are not.
    let o = run(&["analyze".as_ref(), shared().join("hta/trace_filter").as_os_str()]);
    assert!(o.status.success() && !String::from_utf8_lossy(&o.stdout).contains("unrelated runs"));
}

#[test]
fn synth_refuses_truths_that_cannot_make_a_job() {
    // A zero bandwidth or efficiency wrote kernels of ~9.2e18 ns and exited 0.
    for (flag, value, says) in [
        ("--busbw-gbps", "0", "all-reduce bus bandwidth (GB/s) 0"),
        ("--gemm-efficiency", "0", "GEMM efficiency 0"),
        ("--gemm-efficiency", "1.5", "GEMM efficiency 1.5"),
        ("--ranks", "0", "ranks 0"),
        // Sizes that aborted ("memory allocation of … bytes failed") or grew without bound.
        ("--ranks", "4294967295", "ranks 4294967295: at most 65536"),
        ("--steps", "4294967295", "steps × layers = 4294967295 × 8 per rank: at most 20000"),
        // Within each limit above, but not the job's: they aborted on a failed allocation.
        ("--ranks", "65536", "ranks × steps × layers = 65536 × 3 × 8 = 1572864: at most 524288"),
        ("--steps=2500", "--ranks=64", "ranks × steps × layers = 64 × 2500 × 8 = 1280000: at most 524288"),
        // Truths past the trace's clock: steps of 4e12 ms that "ran no GPU work", exit 0.
        ("--busbw-gbps", "1e-300", "all-reduce bus bandwidth (GB/s) 1e-300: from 0.001 to 1000000"),
        ("--alpha-us", "1e308", "all-reduce latency (µs) 1e308: from 0 to 1000000"),
        // As the user wrote it (it had printed -1e0).
        ("--alpha-us=-1", "", "all-reduce latency (µs) -1: from 0 to 1000000"),
        // Tokens shape a model's layers: without --model they had been ignored.
        ("--tokens", "100", "--model <NAME|F>"),
    ] {
        let dir = scratch("synth-refused");
        let mut args = vec!["synth".as_ref(), "--out".as_ref(), dir.as_os_str(), flag.as_ref()];
        if !value.is_empty() {
            args.push(value.as_ref());
        }
        let o = run(&args);
        assert!(!o.status.success(), "{flag} {value}");
        assert!(stderr(&o).contains(says), "{flag} {value}: {}", stderr(&o));
        assert!(std::fs::read_dir(&dir).map_or(true, |mut d| d.next().is_none()), "{flag} {value}: nothing written");
    }
    // A truth given beside --profile, which sets it, is refused (the profile's had won in silence).
    for flag in ["--busbw-gbps=400", "--alpha-us=30", "--gemm-efficiency=0.9"] {
        let dir = scratch("synth-profile-conflict");
        let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("calibrate/profiles/h100-sxm.json");
        let o = run(&["synth".as_ref(), "--out".as_ref(), dir.as_os_str(), "--profile".as_ref(), profile.as_os_str(), flag.as_ref()]);
        assert_eq!(o.status.code(), Some(2), "{flag}");
        assert!(stderr(&o).contains("cannot be used with"), "{flag}: {}", stderr(&o));
    }
}

/// `synth --profile` of a GPU other than an H100: its traces name the profile's GPU, so that
/// `calibrate` reads them against its peaks and recovers the profile's GEMM η. They had named
/// an H100 whatever the profile: MI300X's η 0.321 of 1307 TFLOP/s came back as 0.424 of an
/// H100's 989 TFLOP/s.
#[test]
fn synth_from_a_profile_writes_traces_of_its_gpu() {
    let dir = scratch("synth-profile-gpu");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("calibrate/profiles/mi300x.json");
    let (job, fitted) = (dir.join("job"), dir.join("fitted.json"));
    assert!(
        run(&["synth".as_ref(), "-q".as_ref(), "--out".as_ref(), job.as_os_str(), "--profile".as_ref(), shipped.as_os_str()])
            .status
            .success()
    );
    let o = run(&["calibrate".as_ref(), "-q".as_ref(), job.as_os_str(), "--out".as_ref(), fitted.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let gemm = |p: &Path| {
        let doc = json(p);
        let k = doc["kernels"].as_array().unwrap().iter().find(|k| k["class"] == "gemm" && k["dtype"] == "bf16").cloned().unwrap();
        (doc["device"]["catalog_id"].as_str().unwrap_or("").to_string(), k["efficiency"].as_f64().unwrap(), k["peak"].as_f64().unwrap())
    };
    let ((gpu, truth, peak), (got_gpu, got, got_peak)) = (gemm(&shipped), gemm(&fitted));
    assert_eq!((gpu.as_str(), got_gpu.as_str()), ("mi300x", "mi300x"));
    assert!((got / truth - 1.0).abs() < 0.01 && got_peak == peak, "η {got} of {got_peak} against the truth's {truth} of {peak}");
    // A profile without a BF16 GEMM fit says so, and what it has (B200's shipped profile has no
    // kernel fit; an A100's own calibration had been told "no GEMM fit" of its FP32 one).
    let b200 = Path::new(env!("CARGO_MANIFEST_DIR")).join("calibrate/profiles/b200.json");
    let o = run(&["synth".as_ref(), "-q".as_ref(), "--out".as_ref(), dir.join("b200").as_os_str(), "--profile".as_ref(), b200.as_os_str()]);
    assert!(stderr(&o).contains("no BF16 GEMM fit to take as truth (the synthetic GEMMs are BF16; it has no GEMM fit)"), "{}", stderr(&o));
}

/// `synth --out DIR` replaced whatever `rank-N.json.gz` DIR held — someone's real traces —
/// and left an earlier, larger job's extra ranks beside its own. It replaces only traces it
/// wrote itself, of the ranks it writes.
#[test]
fn synth_replaces_only_its_own_traces() {
    let dir = scratch("synth-foreign");
    let real = dir.join("rank-0.json.gz");
    copy_of_a_real_trace(&real);
    let before = std::fs::read(&real).unwrap();
    let synth =
        |ranks: &str| run(&["synth".as_ref(), "--out".as_ref(), dir.as_os_str(), "-q".as_ref(), "--ranks".as_ref(), ranks.as_ref()]);
    let o = synth("2");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("rank-0.json.gz: cannot write: not a trace `tracecast synth` wrote"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&real).unwrap(), before);
    assert!(!dir.join("rank-1.json.gz").exists(), "nothing written when refused");
    // Its own traces: replaced by the same job again, but not left beside a smaller one.
    std::fs::remove_file(&real).unwrap();
    assert_eq!(synth("4").status.code(), Some(0));
    assert_eq!(synth("4").status.code(), Some(0));
    let o = synth("2");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(
            "rank-2.json.gz: cannot write: the folder holds this file, which reads as a trace and which this job would not replace"
        ),
        "{}",
        stderr(&o)
    );
}

/// A symbolic link back up the tree made `--each` walk forever (two links) or read one file
/// once per level (a self-link): each directory is walked once.
#[cfg(unix)]
#[test]
fn each_walks_a_directory_once_through_symbolic_links() {
    let dir = scratch("each-loop");
    let tree = dir.join("tree");
    copy_of_a_real_trace(&tree.join("sub/a.json.gz"));
    std::os::unix::fs::symlink(&tree, tree.join("sub/up")).unwrap();
    std::os::unix::fs::symlink(".", tree.join("self")).unwrap();
    let out = dir.join("each.json");
    let o = run(&["analyze".as_ref(), "--each".as_ref(), "-q".as_ref(), tree.as_os_str(), "--json".as_ref(), out.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = json(&out);
    let jobs = doc["jobs"].as_array().unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(jobs.len(), 1, "{doc}");
}

#[test]
fn one_bad_rank_does_not_hide_the_others() {
    let dir = scratch("bad-rank");
    let o = run(&["synth".as_ref(), "--out".as_ref(), dir.as_os_str(), "--ranks".as_ref(), "3".as_ref(), "--steps".as_ref(), "1".as_ref()]);
    assert!(o.status.success());
    let bad = dir.join("rank-1.json.gz");
    let bytes = std::fs::read(&bad).unwrap();
    std::fs::write(&bad, &bytes[..bytes.len() / 3]).unwrap();
    let out = dir.join("out").join("a.json");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let o = run(&["analyze".as_ref(), dir.as_os_str(), "--json".as_ref(), out.as_os_str()]);
    assert_clean_failure(&o, &bad, Some("(decompressed)"));
    let doc = json(&out);
    let ranks: Vec<u64> = doc["jobs"][0]["ranks"].as_array().unwrap().iter().map(|r| r["rank"].as_u64().unwrap()).collect();
    assert_eq!(ranks, [0, 2]);
    assert!(doc["jobs"][0]["bad_files"][0]["error"].as_str().unwrap().contains("rank-1.json.gz"));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Exposed communication"));
    // --strict: nothing is written.
    let strict_out = dir.join("out").join("strict.json");
    let o = run(&["analyze".as_ref(), dir.as_os_str(), "--strict".as_ref(), "--json".as_ref(), strict_out.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!strict_out.exists());
}

#[test]
fn duplicate_ranks_name_both_files() {
    let dir = shared().join("kineto/tb_plugin_samples/resnet50_num_workers_0");
    let o = run(&["analyze".as_ref(), dir.as_os_str(), "-q".as_ref()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("worker0.1623143089861") && err.contains("worker0.1623143566756") && err.contains("rank 0"), "{err}");
}

/// A file whose `distributedInfo.rank` is not a rank number (-3) was numbered by its
/// position, took rank 0 first, and the file that declares rank 0 was the one left out.
/// The declared number wins; the bad file is named; a rank beyond its world size is said.
#[test]
fn a_declared_rank_outranks_one_taken_from_a_position() {
    let dir = scratch("bad-declared-rank");
    let ev = r#"{"ph": "X", "cat": "kernel", "name": "sm80_gemm", "pid": 0, "tid": 7, "ts": 5, "dur": 10}"#;
    let write = |name: &str, rank: &str, world: u32| {
        let path = dir.join(name);
        std::fs::write(&path, format!(r#"{{"distributedInfo": {{"rank": {rank}, "world_size": {world}}}, "traceEvents": [{ev}]}}"#))
            .unwrap();
        path
    };
    let (a, b) = (write("a.json", "-3", 2), write("b.json", "0", 2));
    let out = dir.join("a.out.json");
    let o = run(&["analyze".as_ref(), a.as_os_str(), b.as_os_str(), "-q".as_ref(), "--json".as_ref(), out.as_os_str()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("a.json: rank 0 is also claimed by") && err.contains("b.json"), "{err}");
    let ranks = json(&out)["jobs"][0]["ranks"].clone();
    assert_eq!(ranks.as_array().map(Vec::len), Some(1), "{ranks}");
    assert!(ranks[0]["file"].as_str().is_some_and(|f| f.ends_with("b.json")), "{ranks}");
    // Alone, the bad number is ignored with a note, and a rank beyond the world size is said.
    let alone = dir.join("alone.json");
    let o = run(&["analyze".as_ref(), a.as_os_str(), "-q".as_ref(), "--json".as_ref(), alone.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(json(&alone).to_string().contains("`distributedInfo.rank` -3 at byte"), "{}", json(&alone));
    let c = write("c.json", "5", 2);
    let o = run(&["analyze".as_ref(), c.as_os_str(), "-q".as_ref(), "--json".as_ref(), alone.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(json(&alone).to_string().contains("`distributedInfo.rank` 5 at byte"), "{}", json(&alone));
}

#[test]
fn calibrate_writes_profile_plots_and_madmax_system() {
    let dir = scratch("calibrate");
    let traces = dir.join("job");
    let mut spec = tracecast_calibrate::synth::JobSpec::default();
    spec.ranks = 2;
    spec.steps = 2;
    spec.seed = 11;
    tracecast_calibrate::synth::write_job(&spec, &traces).unwrap();
    let (profile, plots, system) = (dir.join("profile.json"), dir.join("plots"), dir.join("system.json"));
    let o = run(&[
        "calibrate".as_ref(),
        traces.as_os_str(),
        "--out".as_ref(),
        profile.as_os_str(),
        "--plots".as_ref(),
        plots.as_os_str(),
        "--madmax-system".as_ref(),
        system.as_os_str(),
        "--nodes".as_ref(),
        "16".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("Kernel efficiency") && stdout.contains("all_reduce"), "{stdout}");
    // The system file is said as the profile is (it had been written without a word).
    assert!(stdout.contains(&format!("MAD-Max system written to {}", system.display())), "{stdout}");
    let p = json(&profile);
    assert_eq!(p["device"]["catalog_id"], "h100-sxm");
    let gemm = p["kernels"].as_array().unwrap().iter().find(|k| k["class"] == "gemm").unwrap();
    for key in ["dtype", "efficiency", "overhead_us", "r2", "samples", "efficiency_ci95", "size_curve"] {
        assert!(!gemm[key].is_null(), "{key}");
    }
    assert!((gemm["efficiency"].as_f64().unwrap() - 0.70).abs() < 0.014);
    // The work each fit spans is on the terminal as in the JSON (it had been in the JSON alone).
    let [least, most] = [0, 1].map(|i| gemm["work_range"][i].as_f64().unwrap() / 1e9);
    let gemm_row = stdout.lines().find(|l| l.trim_start().starts_with("gemm ") && l.contains("TF/s")).unwrap();
    assert!(gemm_row.ends_with(&format!("{least:.0}–{most:.0} GFLOP")), "{gemm_row} ({least}–{most})");
    let link = &p["links"][0];
    for key in ["collective", "group_size", "domain", "alpha_us", "busbw_gbps", "efficiency", "r2", "samples"] {
        assert!(!link[key].is_null(), "{key}");
    }
    assert_eq!(link["collective"], "all_reduce");
    for stem in ["kernel-gemm-bf16", "kernel-elementwise-bf16", "link-all_reduce-2-intra"] {
        let svg = std::fs::read_to_string(plots.join(format!("{stem}.svg"))).unwrap();
        assert!(svg.contains("<svg") && svg.contains("measured"), "{stem}");
        let png = std::fs::read(plots.join(format!("{stem}.png"))).unwrap();
        assert_eq!(&png[..4], b"\x89PNG", "{stem}");
    }
    // All or none: a --plots folder that cannot be made fails the command and leaves no profile
    // (it had rewritten the profile, then failed).
    let (again, blocked) = (dir.join("again.json"), dir.join("a-file"));
    std::fs::write(&blocked, "not a folder").unwrap();
    let o = run(&[
        "calibrate".as_ref(),
        traces.as_os_str(),
        "--out".as_ref(),
        again.as_os_str(),
        "--plots".as_ref(),
        blocked.join("plots").as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!again.exists(), "a profile was left behind the error");
    let s = json(&system);
    assert_eq!(s["num_devices"], 128);
    assert!((s["flops_util"].as_f64().unwrap() - 0.70).abs() < 0.014, "{s}");
    assert!((s["mem_bw_util"].as_f64().unwrap() - 0.80).abs() < 0.016, "{s}");
    assert!((s["nvlink_util"].as_f64().unwrap() - 150.0 / 450.0).abs() < 0.01, "{s}");
    // No inter-node fit in a one-node job: MAD-Max's default, and the file says so.
    assert!(s["tracecast_notes"].to_string().contains("ibroce_util"), "{s}");
    // MAD-Max reads link rates as bidirectional: the file carries twice the per-direction rate.
    assert_eq!(s["bw_per_nvlink"].as_f64(), Some(2.0 * 450e9), "{s}");
    // Where the hardware figures come from, and the fitted latency the schema cannot hold, said.
    let notes = s["tracecast_notes"].to_string();
    assert!(notes.contains("written as both directions") && notes.contains("the fitted all_reduce intra α"), "{notes}");
    assert!(s["ar_perc_intra"].as_f64().is_some_and(|x| x > 0.0 && x < 1.0), "{s}");
    // Round trip: tracecast's own MAD-Max reader takes the file (2048 GPUs, as the LLM task wants).
    let system = dir.join("system-2048.json");
    let o = run(&[
        "calibrate".as_ref(),
        traces.as_os_str(),
        "--out".as_ref(),
        dir.join("p2.json").as_os_str(),
        "--madmax-system".as_ref(),
        system.as_os_str(),
        "--nodes".as_ref(),
        "256".as_ref(),
        "-q".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cfg = shared().join("../madmax-configs");
    let model = std::fs::read_dir(cfg.join("model_cfgs/llm")).unwrap().map(|e| e.unwrap().path()).min().unwrap();
    let task = cfg.join("task_cfgs/llm/llm_train.json");
    let out = dir.join("project.json");
    let o = run(&[
        "project".as_ref(),
        "--madmax".as_ref(),
        model.as_os_str(),
        system.as_os_str(),
        task.as_os_str(),
        "--assumptions".as_ref(),
        "madmax".as_ref(),
        "--json".as_ref(),
        out.as_os_str(),
        "-q".as_ref(),
    ]);
    assert!(o.status.success(), "project --madmax of calibrate's system file: {}", stderr(&o));
    assert!(json(&out)["iteration_ms"].as_f64().unwrap() > 0.0);
    // --nodes sizes the MAD-Max system file: without one it is refused, not ignored.
    let o = run(&[
        "calibrate".as_ref(),
        traces.as_os_str(),
        "--out".as_ref(),
        dir.join("p3.json").as_os_str(),
        "--nodes".as_ref(),
        "4".as_ref(),
    ]);
    assert!(!o.status.success() && stderr(&o).contains("--madmax-system"), "{}", stderr(&o));
}

/// `--madmax-system` wrote, for a device the catalog lacks, a system of 0 memory bandwidth
/// that `project --madmax` then refused; it is not written, and the reason is named. The
/// profile is written (the whole run had been refused).
#[test]
fn calibrate_writes_no_madmax_system_that_cannot_price() {
    let dir = scratch("madmax-system-unknown");
    let t = shared().join("hta/mtia_trace_single_rank/mtia_rank_0.json.gz");
    let (profile, system) = (dir.join("p.json"), dir.join("s.json"));
    let o = run(&[
        "calibrate".as_ref(),
        t.as_os_str(),
        "-q".as_ref(),
        "--out".as_ref(),
        profile.as_os_str(),
        "--madmax-system".as_ref(),
        system.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // An MTIA device the catalog does not know fits nothing: neither file is written, and why is said.
    assert!(stderr(&o).contains("nothing could be fitted from its traces"), "{}", stderr(&o));
    assert!(!system.exists());
    assert!(!profile.exists());
}

/// The traces' order does not change a profile: `--each A B C` and `--each C A B` had
/// differed in the last digits of the fits (sums in the order given).
#[test]
fn calibrate_gives_one_profile_whatever_the_traces_order() {
    let dir = scratch("calibrate-order");
    let h100 = shared().join("tracelens/h100");
    let traces = [
        "Falconsai_nsfw_image_detection__1016002.json.gz",
        "facebook_timesformer-base-finetuned-k400__1016002.json.gz",
        "gaunernst_bert-small-uncased__1016001.json.gz",
    ]
    .map(|t| h100.join(t));
    let profile = |order: [usize; 3], out: &str| {
        let out = dir.join(out);
        let o = bin().args(["calibrate", "-q", "--each"]).args(order.map(|i| &traces[i])).arg("--out").arg(&out).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::read(out).unwrap()
    };
    assert!(profile([0, 1, 2], "abc.json") == profile([2, 0, 1], "cab.json"));
}

/// A trace of no GPU kernel (CPU ops only) is named as such: alone it had been named only by
/// its GPU ("h100-sxm: nothing could be fitted"), beside good traces counted as fitted on.
#[test]
fn calibrate_names_a_trace_without_gpu_kernels() {
    let dir = scratch("calibrate-no-kernels");
    let t = dir.join("cpu-only.json");
    let device =
        r#"{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85000000000, "computeMajor": 9, "computeMinor": 0, "numSms": 132}"#;
    let op = r#"{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10}"#;
    std::fs::write(&t, format!(r#"{{"traceEvents": [{op}], "deviceProperties": [{device}]}}"#)).unwrap();
    let o = bin().arg("calibrate").arg(&t).arg("--out").arg(dir.join("p.json")).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("cpu-only.json: no GPU kernel in the trace: nothing of it is fitted"), "{text}");
}

#[test]
fn calibrate_gives_one_profile_per_device() {
    let dir = scratch("calibrate-devices");
    let out = dir.join("p.json");
    let (a, b) = (
        shared().join("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz"),
        shared().join("tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz"),
    );
    let o = run(&["calibrate".as_ref(), "--each".as_ref(), a.as_os_str(), b.as_os_str(), "--out".as_ref(), out.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&dir.join("p.h100-sxm.json"))["device"]["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(json(&dir.join("p.mi300x.json"))["device"]["catalog_id"], "mi300x");
}

#[test]
fn hw_list_and_show() {
    let o = run(&["hw".as_ref(), "list".as_ref()]);
    assert!(o.status.success());
    let list = String::from_utf8_lossy(&o.stdout);
    for id in ["v100", "a100-40gb", "a100-80gb", "h100-sxm", "h800", "h200", "b200", "mi250x", "mi300x", "dgx-h100"] {
        assert!(list.contains(id), "{id}");
    }
    let o = run(&["hw".as_ref(), "show".as_ref(), "h100-sxm".as_ref()]);
    let show = String::from_utf8_lossy(&o.stdout);
    assert!(show.contains("989.4") && show.contains("source: NVIDIA H100"), "{show}");
    // A node preset the list names is shown, with its GPU (it had been "unknown hardware").
    let o = run(&["hw".as_ref(), "show".as_ref(), "dgx-h100".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let show = String::from_utf8_lossy(&o.stdout);
    assert!(show.starts_with("dgx-h100 — node preset: 8 × h100-sxm, 8 NIC(s) of 50.0 GB/s") && show.contains("989.4"), "{show}");
    let o = run(&["hw".as_ref(), "show".as_ref(), "tpu-v9".as_ref()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown hardware"));
    // A slip of the id gets the id meant.
    let o = run(&["hw".as_ref(), "show".as_ref(), "h100sxm".as_ref()]);
    assert!(stderr(&o).contains("unknown hardware \"h100sxm\" (did you mean \"h100-sxm\"?)"), "{}", stderr(&o));
    let o = run(&["hw".as_ref(), "show".as_ref(), "tpu-v5".as_ref()]);
    assert!(stderr(&o).contains("unknown hardware \"tpu-v5\"; `tracecast hw list`"), "{}", stderr(&o));
    // The start of ids gets every id it starts (`h100` had been offered `h200`, one edit away).
    let o = run(&["hw".as_ref(), "show".as_ref(), "h100".as_ref()]);
    assert!(stderr(&o).contains("(did you mean \"h100-sxm\"?)"), "{}", stderr(&o));
    let o = run(&["hw".as_ref(), "show".as_ref(), "A100".as_ref()]);
    assert!(stderr(&o).contains("(did you mean \"a100-40gb\" or \"a100-80gb\" or \"a100-pcie\""), "{}", stderr(&o));
    // A user file adds a GPU.
    let dir = scratch("hw-file");
    let f = dir.join("mine.toml");
    std::fs::write(&f, "[[gpu]]\nid = \"rtx-2080ti\"\nname = \"GeForce RTX 2080 Ti\"\nsource = \"NVIDIA Turing whitepaper\"\nmatch = [\"2080 Ti\"]\nfp32 = 13.4\nfp16 = 53.8\nmemory_gb = 11.0\nhbm_gbps = 616.0\nlink_gbps = 50.0\n").unwrap();
    let o = run(&["hw".as_ref(), "--hw".as_ref(), f.as_os_str(), "show".as_ref(), "rtx-2080ti".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn analyze_draws_the_breakdown() {
    let dir = scratch("analyze-plots");
    let o = run(&["analyze".as_ref(), shared().join("hta/trace_filter").as_os_str(), "--plots".as_ref(), dir.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(dir.join("breakdown.svg")).unwrap();
    assert!(svg.contains("exposed comm") && svg.contains("26.1 %"), "{}", &svg[..svg.len().min(400)]);
    assert_eq!(&std::fs::read(dir.join("breakdown.png")).unwrap()[..4], b"\x89PNG");
}

#[test]
fn replay_reports_identity_and_what_if() {
    let dir = scratch("replay");
    let (a, b) = (dir.join("identity.json"), dir.join("link2.json"));
    let job = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let o = run(&["replay".as_ref(), job.as_os_str(), "--json".as_ref(), a.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("replayed ms"));
    let o =
        run(&["replay".as_ref(), job.as_os_str(), "--scale".as_ref(), "link=2".as_ref(), "--json".as_ref(), b.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (ident, fast) = (json(&a), json(&b));
    let r0 = &ident["jobs"][0]["ranks"][0];
    for k in ["measured_step_us", "replayed_step_us", "steps", "replayed", "gpu_span_us", "exposed_comm_us"] {
        assert!(!r0[k].is_null(), "{k}");
    }
    assert!((r0["measured_step_us"].as_f64().unwrap() - r0["replayed_step_us"].as_f64().unwrap()).abs() < 1.0);
    // DESIGN §6: analyze's shape — its job totals and per-rank collectives, the replayed totals beside them.
    let analyzed = dir.join("analyze.json");
    let o = run(&["analyze".as_ref(), job.as_os_str(), "--json".as_ref(), analyzed.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (analyzed, mut totals) = (json(&analyzed), ident["jobs"][0]["totals"].clone());
    let replayed_totals = totals.as_object_mut().unwrap().remove("replayed").unwrap();
    assert_eq!(totals, analyzed["jobs"][0]["totals"]);
    assert_eq!(replayed_totals["steps"].as_array().unwrap().len(), 3);
    for r in 0..4 {
        assert_eq!(ident["jobs"][0]["ranks"][r]["collectives"], analyzed["jobs"][0]["ranks"][r]["collectives"], "rank {r}");
    }
    let f0 = &fast["jobs"][0]["ranks"][0];
    assert!(f0["replayed"]["exposed_comm_us"].as_f64().unwrap() < r0["replayed"]["exposed_comm_us"].as_f64().unwrap());
    assert!(fast["jobs"][0]["speedup"].as_f64().unwrap() > 1.05);
    let scaled = dir.join("ws16.json");
    let o = run(&[
        "replay".as_ref(),
        job.as_os_str(),
        "--world-size".as_ref(),
        "16".as_ref(),
        "--json".as_ref(),
        scaled.as_os_str(),
        "-q".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Sixteen ranks span two nodes: the all-reduces leave NVLink for the NICs and the step slows down.
    assert!(json(&scaled)["jobs"][0]["speedup"].as_f64().unwrap() < 0.9);
    let o = run(&["replay".as_ref(), job.as_os_str(), "--scale".as_ref(), "gpu=2".as_ref()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown key"));
}

#[test]
fn replay_what_ifs_side_by_side_in_one_table() {
    // Issue 23: several what-ifs in one run, one table of their speed-ups.
    let dir = scratch("replay-what-if");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let (table, plain, ident) = (dir.join("what-if.json"), dir.join("compute2.json"), dir.join("identity.json"));
    let what_if = |specs: &[&str], json: Option<&Path>| {
        let mut a: Vec<&std::ffi::OsStr> = vec!["replay".as_ref(), demo.as_os_str()];
        for s in specs {
            a.extend(["--what-if", s].map(std::ffi::OsStr::new));
        }
        if let Some(j) = json {
            a.extend(["--json".as_ref(), j.as_os_str()]);
        }
        run(&a)
    };
    let o = what_if(&["fast:compute=2", "net:link=2"], Some(&table));
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = stdout.lines().skip_while(|l| !l.starts_with("What-ifs")).skip(2).take(3).collect();
    assert!(rows[0].starts_with("measured ") && rows[1].starts_with("fast ") && rows[2].starts_with("net "), "{stdout}");
    assert!(rows[1].contains("compute ×2") && rows[2].contains("link ×2"), "{stdout}");
    assert!(!stdout.contains("nothing was sped up"), "{stdout}");
    // A speed-up of a class the trace lacks (one GPU, no communication) is said to change
    // nothing (its row had read 1.000× without a word, beside the --link rows' notes).
    let one_gpu = shared().join("hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz");
    let o = run(&["replay", one_gpu.to_str().unwrap(), "--what-if", "net:link=2", "--what-if", "fast:compute=2"].map(std::ffi::OsStr::new));
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("note [net]: --scale link=2: no communication kernel in the replayed window, nothing was sped up"), "{stdout}");
    assert!(!stdout.contains("note [fast]: --scale compute"), "{stdout}");
    let o = run(&[
        "replay".as_ref(),
        demo.as_os_str(),
        "--scale".as_ref(),
        "compute=2".as_ref(),
        "--json".as_ref(),
        plain.as_os_str(),
        "-q".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["replay".as_ref(), demo.as_os_str(), "--json".as_ref(), ident.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (mut t, plain, ident) = (json(&table), json(&plain), json(&ident));
    let rows = t["jobs"][0]["what_if"].as_array().unwrap().clone();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["measured", "fast", "net"]);
    let speedup = |v: &serde_json::Value| v["speedup"].as_f64().unwrap();
    // A scenario is the replay its settings give alone.
    assert!((speedup(&rows[1]) - speedup(&plain["jobs"][0])).abs() < 1e-9, "{} vs {}", rows[1], plain["jobs"][0]["speedup"]);
    assert!((speedup(&rows[0]) - 1.0).abs() < 1e-3 && speedup(&rows[2]) > 1.05, "{rows:?}");
    for r in &rows {
        let c = &r["critical_path"];
        let sum: f64 = ["compute_pct", "comm_pct", "memory_pct", "cpu_pct", "launch_pct", "unexplained_pct"]
            .iter()
            .map(|k| c[k].as_f64().unwrap())
            .sum();
        assert!((sum - 100.0).abs() < 0.01 && r["replayed_step_us"].as_f64().unwrap() > 0.0, "{r}");
    }
    // The table's measured step is the job step time `analyze` reports, which its speed-up is of
    // (it printed each rank's mean, 95.965 ms, beside the job step's speed-up).
    let a = dir.join("analyze.json");
    let o = run(&["analyze".as_ref(), demo.as_os_str(), "-q".as_ref(), "--json".as_ref(), a.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let steps: Vec<f64> =
        json(&a)["jobs"][0]["totals"]["steps"].as_array().unwrap().iter().map(|s| s["step_us"].as_f64().unwrap()).collect();
    let job_step = steps.iter().sum::<f64>() / steps.len() as f64;
    assert!((job_step - rows[0]["measured_step_us"].as_f64().unwrap()).abs() < 1e-6 * job_step, "{job_step} vs {}", rows[0]);
    // Besides `what_if`, the job's JSON is the plain run's; without --what-if there is no `what_if`.
    t["jobs"][0].as_object_mut().unwrap().remove("what_if");
    assert_eq!(t, ident);
    assert!(plain["jobs"][0].get("what_if").is_none());
    // A bad scenario, or two of one name, is an error that names it.
    for (specs, says) in [
        (&["fast:compute=2", "slow:gpu=2"][..], &["--what-if slow", "unknown key \"gpu\""][..]),
        (&["fast:compute=0"][..], &["--what-if fast", "compute=\"0\""][..]),
        (&["compute=2"][..], &["missing NAME"][..]),
        (&["fast:compute=2", "fast:link=2"][..], &["--what-if fast", "two scenarios"][..]),
    ] {
        let o = what_if(specs, None);
        assert_eq!(o.status.code(), Some(2), "{specs:?}");
        assert!(says.iter().all(|s| stderr(&o).contains(s)), "{specs:?}: {}", stderr(&o));
    }
}

/// Slices on one track must nest strictly for Perfetto: no partial overlap.
fn assert_perfetto_schema(doc: &serde_json::Value) -> usize {
    let events = doc["traceEvents"].as_array().unwrap();
    let mut tracks: std::collections::BTreeMap<(i64, i64), Vec<(f64, f64)>> = Default::default();
    let mut flows: std::collections::BTreeMap<i64, (usize, usize)> = Default::default();
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        let (pid, tid) = (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap());
        match ph {
            "X" => {
                let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
                assert!(dur >= 0.0 && e["name"].is_string(), "{e}");
                tracks.entry((pid, tid)).or_default().push((ts, ts + dur));
            }
            "s" | "f" => {
                let f = flows.entry(e["id"].as_i64().unwrap()).or_default();
                if ph == "s" {
                    f.0 += 1
                } else {
                    f.1 += 1
                }
                assert!(e["ts"].as_f64().is_some());
            }
            "M" => assert!(e["args"]["name"].is_string()),
            other => panic!("unexpected phase {other}"),
        }
    }
    for ((pid, tid), mut slices) in tracks {
        slices.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut open: Vec<f64> = Vec::new();
        for (s, e) in slices {
            while open.last().is_some_and(|&end| end <= s + 1e-6) {
                open.pop();
            }
            if let Some(&end) = open.last() {
                assert!(e <= end + 1e-3, "track {pid}/{tid}: slice [{s}, {e}] overlaps its parent ending at {end}");
            }
            open.push(e);
        }
    }
    for (id, (s, f)) in &flows {
        assert_eq!((*s, *f), (1, 1), "flow {id}");
    }
    flows.len()
}

#[test]
fn replay_one_rank_at_a_time_equals_the_whole_job_in_memory() {
    // Without --perfetto each rank is reduced to its part of the graph as it
    // is read; with it the whole job is held. Both must give the same replay.
    let dir = scratch("replay-streamed");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    for what in [&["--scale", "compute=2"][..], &["--target", "a100-80gb"][..]] {
        let (streamed, whole, timeline) = (dir.join("streamed.json"), dir.join("whole.json"), dir.join("timeline.json"));
        let mut args: Vec<&std::ffi::OsStr> = vec!["replay".as_ref(), demo.as_os_str(), "-q".as_ref()];
        args.extend(what.iter().map(std::ffi::OsStr::new));
        let mut a = args.clone();
        a.extend(["--json".as_ref(), streamed.as_os_str()]);
        let o = run(&a);
        assert!(o.status.success(), "{}", stderr(&o));
        let mut b = args.clone();
        b.extend(["--json".as_ref(), whole.as_os_str(), "--perfetto".as_ref(), timeline.as_os_str()]);
        let o = run(&b);
        assert!(o.status.success(), "{}", stderr(&o));
        let (s, w) = (json(&streamed), json(&whole));
        assert_eq!(s["jobs"][0]["ranks"].as_array().map(Vec::len), Some(4));
        assert_eq!(s, w, "{what:?}");
    }
}

#[test]
fn replay_writes_a_perfetto_timeline() {
    let dir = scratch("perfetto");
    let (plain, gz) = (dir.join("demo.json"), dir.join("control.json.gz"));
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let o = run(&["replay".as_ref(), demo.as_os_str(), "--perfetto".as_ref(), plain.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&plain);
    assert!(assert_perfetto_schema(&doc) > 10, "the critical path is drawn");
    let names: Vec<String> = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        .collect();
    // The original's tracks: per rank a host process and a GPU, threads and streams by their ids.
    assert_eq!(names.len(), 8, "{names:?}");
    for r in 0..4 {
        assert!(names.contains(&format!("rank {r} · GPU 0")), "{names:?}");
        assert!(names.iter().any(|n| n.starts_with(&format!("rank {r} · host process"))), "{names:?}");
    }
    let events = doc["traceEvents"].as_array().unwrap();
    let slices: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    // CPU ops and steps are there, moved with the replay, and every slice keeps its measured time.
    let ops = slices.iter().filter(|e| e["cat"] == "cpu_op").count();
    let steps: Vec<_> = slices.iter().filter(|e| e["name"].as_str().unwrap().starts_with("ProfilerStep#")).collect();
    assert!(ops > 100, "{ops} CPU ops");
    assert_eq!(steps.len(), 4 * 3, "three steps per rank");
    for e in &slices {
        assert!(e["args"]["measured ts"].is_number() && e["args"]["measured dur"].is_number(), "{e}");
    }
    // Identity replay: a step keeps its measured length (to the µs).
    for st in &steps {
        let (d, m) = (st["dur"].as_f64().unwrap(), st["args"]["measured dur"].as_f64().unwrap());
        assert!((d - m).abs() < 1.0, "{st}");
    }
    // Original args the model keeps: op shapes and collective sizes.
    assert!(slices.iter().any(|e| e["args"]["Input Dims"].is_string()), "op shapes");
    assert!(slices.iter().any(|e| e["args"]["In msg nelems"].is_string()), "collective sizes");
    let control = shared().join("hta/trace_diff/control/control.json.gz");
    let o = run(&["replay".as_ref(), control.as_os_str(), "--perfetto".as_ref(), gz.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()), &mut text).unwrap();
    assert_perfetto_schema(&serde_json::from_slice(&text).unwrap());
    // Two jobs: the second's timeline beside the first's, its two extensions kept together
    // (it had been `both.json.job2.gz`), and each file named on the terminal (it had said nothing).
    let both = dir.join("both.json.gz");
    let o = run(&["replay".as_ref(), demo.as_os_str(), control.as_os_str(), "--perfetto".as_ref(), both.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let second = dir.join("both.job2.json.gz");
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(std::fs::File::open(&second).unwrap()), &mut text).unwrap();
    assert_perfetto_schema(&serde_json::from_slice(&text).unwrap());
    let said = String::from_utf8_lossy(&o.stdout);
    for (file, job) in [(&both, &demo), (&second, &control)] {
        assert!(said.contains(&format!("wrote {} (the Perfetto timeline of {})", file.display(), job.display())), "{said}");
    }
    // One job with what-ifs: the timeline named, and what it is of (it had been written unsaid).
    let one = dir.join("one.json.gz");
    let o =
        run(&["replay".as_ref(), demo.as_os_str(), "--what-if".as_ref(), "a:compute=2".as_ref(), "--perfetto".as_ref(), one.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = String::from_utf8_lossy(&o.stdout);
    let want =
        format!("wrote {} (the Perfetto timeline of {}'s replay; the --what-if scenarios are not drawn)", one.display(), demo.display());
    assert!(said.contains(&want), "{said}");
}

#[test]
fn target_without_a_profile_uses_the_shipped_one_and_a_profile_of_another_gpu_is_an_error() {
    let h100 = shared().join("tracelens/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz");
    // No --profile: MI300X's shipped calibration prices the kernels, and the output says which rules did.
    let o = run(&["replay".as_ref(), h100.as_os_str(), "--target".as_ref(), "mi300x".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("shipped profile of mi300x"), "{out}");
    assert!(out.contains("roofline of the op's FLOPs and bytes"), "{out}");
    assert!(out.contains("by kernel class (ms): gemm "), "{out}");
    // A profile of another GPU than the target: an error in replay and in project.
    let dir = scratch("wrong-profile");
    let profile = dir.join("h100.json");
    let o = run(&["calibrate".as_ref(), h100.as_os_str(), "--out".as_ref(), profile.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["replay".as_ref(), h100.as_os_str(), "--target".as_ref(), "mi300x".as_ref(), "--profile".as_ref(), profile.as_os_str()]);
    assert!(!o.status.success());
    // The flag named, as `project` and `search` name theirs.
    assert!(stderr(&o).contains("--profile ") && stderr(&o).contains("the profile is of h100-sxm, not mi300x"), "{}", stderr(&o));
    let o = run(&[
        "project".as_ref(),
        "--model".as_ref(),
        "llama2-7b".as_ref(),
        "--system".as_ref(),
        "mi300x".as_ref(),
        "--gpus".as_ref(),
        "8".as_ref(),
        "--profile".as_ref(),
        profile.as_os_str(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not of --system mi300x"), "{}", stderr(&o));
    // --profile alone names no target.
    let o = run(&["replay".as_ref(), h100.as_os_str(), "--profile".as_ref(), profile.as_os_str()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--target"), "{}", stderr(&o));
}

#[test]
fn target_nobody_has_traced_takes_its_vendors_short_kernel_time() {
    // A user's GPU (--hw) unlike any traced one: the trace's efficiencies carried to its
    // specs and the short-kernel time of its vendor's traced GPUs, both said.
    let dir = scratch("untraced-target");
    let hw = dir.join("gpu.toml");
    std::fs::write(
        &hw,
        "[[gpu]]\nid = \"future-gpu\"\nname = \"Future accelerator\"\nvendor = \"NVIDIA\"\nsource = \"a user's guess\"\n\
         bf16 = 6000.0\nfp16 = 6000.0\nfp32 = 60.0\nmemory_gb = 192.0\nhbm_gbps = 8000.0\nlink_gbps = 900.0\nsms = 160\n",
    )
    .unwrap();
    let h100 = shared().join("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz");
    let o = run(&["replay".as_ref(), h100.as_os_str(), "--target".as_ref(), "future-gpu".as_ref(), "--hw".as_ref(), hw.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("no traces of future-gpu: catalog specs, the trace's efficiencies carried to them"), "{out}");
    assert!(out.contains("median of NVIDIA's traced GPUs: v100, h100-sxm, b200, a100-40gb"), "{out}");
    assert!(out.contains("latency-bound short kernel"), "{out}");
}

#[test]
fn hw_show_prints_the_shipped_calibration() {
    let o = run(&["hw".as_ref(), "show".as_ref(), "h100-sxm".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("132 SMs/CUs"), "{out}");
    // Every catalog number the pricing layer reads, with its source: the SFU rate priced
    // attention carried to other GPUs and was not shown.
    assert!(out.contains("exponentials (SFU) 3.9 × 10^12 per second") && out.contains("  exponentials: "), "{out}");
    assert!(out.contains("last-level cache 50 MB") && out.contains("measured as hopper-sm90 in the evidence"), "{out}");
    // Its power limit, and the GEMM rate its silicon (our H200 at the same 700 W) held under sustained load.
    assert!(out.contains("board power limit 700 W") && out.contains("  power limit: NVIDIA H100"), "{out}");
    assert!(out.contains("at its power limit: 16-bit GEMMs at most 665.7 TFLOP/s, the rate h200 held"), "{out}");
    assert!(!out.contains("GEMMs: the measured table of"), "{out}");
    // A GPU priced by its twin's table says whose.
    let twin = run(&["hw".as_ref(), "show".as_ref(), "a100-40gb".as_ref()]);
    let twin = String::from_utf8_lossy(&twin.stdout);
    assert!(twin.contains("16-bit GEMMs: the measured table of a100-80gb, the same silicon, at the shapes it covers"), "{twin}");
    assert!(out.contains("Shipped calibration profile (4 corpus traces"), "{out}");
    assert!(out.contains("gemm"), "{out}");
    // The network its collectives across nodes ran over: GCP A3 Mega's eight 200 Gb/s NICs per 8-GPU VM.
    assert!(out.contains("collectives of a3mega-h100 across nodes of 8 GPUs: 25 GB/s of NICs per GPU"), "{out}");
    // The FA charts measured FA1, FA2, FA3, cuDNN, Triton and materialized attention on H100.
    assert!(
        out.contains("attention kernel families (a plan's `attention=FAMILY`): cudnn, fa1, fa2, fa3, pytorch-standard, triton"),
        "{out}"
    );
    // The best training runs measured on its compute: MPT-7B on 8 H100 in 16 bits (10 643 tokens/s
    // per GPU × 41.50 GFLOP a token ÷ 989.4 TFLOP/s = 44.6 %).
    assert!(out.contains("16-bit linear layers: best MFU 44.6 % of the 16-bit peak (mpt-7b-8xh100-sxm, 8 × h100-sxm"), "{out}");
    // hisohara's MI300X nodes: the source names the NICs, not their speed.
    let o = run(&["hw".as_ref(), "show".as_ref(), "mi300x".as_ref()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("collectives of hisohara-rccl across nodes of 8 GPUs: its source states no network"), "{out}");
    // No training run of MI300X ships: no such line.
    assert!(!out.contains("Measured in training"), "{out}");
}

#[test]
fn devices_the_catalog_lacks_get_no_profile_of_defaults_and_zero_ranks_are_rejected() {
    // Two GPUs the catalog does not know (a GeForce and a Quadro): one profile each, not one overwriting the other.
    let dir = scratch("unknown-devices");
    let out = dir.join("p.json");
    let a = shared().join("param/et_replay/linear_kineto.json.gz");
    let b = shared().join("hta/with_gpu_user_annotation/step_based_trace_2543932.json.gz");
    let o = run(&["calibrate".as_ref(), "--each".as_ref(), "-q".as_ref(), a.as_os_str(), b.as_os_str(), "--out".as_ref(), out.as_os_str()]);
    // Without peaks in the catalog nothing of theirs is fitted: each is named, no profile written
    // (two profiles of defaults had been).
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    for name in ["NVIDIA GeForce RTX 2080 Ti", "Quadro GP100"] {
        assert!(stderr(&o).contains(&format!("error: {name}: nothing could be fitted")), "{}", stderr(&o));
    }
    assert!(!std::fs::read_dir(&dir).unwrap().any(|e| e.unwrap().file_name().to_string_lossy().starts_with("p.")));
    // Beside a GPU whose traces fit: its file is named per device, as with several profiles.
    let h100 = shared().join("tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz");
    let o =
        run(&["calibrate".as_ref(), "--each".as_ref(), "-q".as_ref(), h100.as_os_str(), a.as_os_str(), "--out".as_ref(), out.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(dir.join("p.h100-sxm.json").exists() && !out.exists());
    // 0, and beyond 2^20 ranks (a typo, not a cluster: a billion had been priced).
    for n in ["0", "1000000000"] {
        let o = run(&["replay".as_ref(), a.as_os_str(), "--world-size".as_ref(), n.as_ref()]);
        assert!(!o.status.success());
        assert!(stderr(&o).contains("--world-size"), "{}", stderr(&o));
    }
}

#[test]
fn zero_counts_are_refused_naming_the_option() {
    // Each was taken before: 0 GPUs per node priced as 1, gbs 0 as the default batch, 0 nodes written.
    let dir = scratch("zero-counts");
    let trace = shared().join("kineto/tb_plugin_test/gpu_metrics_input.json.gz");
    let (out, system) = (dir.join("p.json"), dir.join("m.json"));
    for (args, option) in [
        (vec!["hw", "cost", "h100-sxm", "all_reduce", "--bytes", "1e9", "--gpus", "16", "--gpus-per-node", "0"], "--gpus-per-node"),
        (vec!["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--gbs", "0"], "--gbs"),
        (
            vec![
                "calibrate",
                "-q",
                trace.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "--madmax-system",
                system.to_str().unwrap(),
                "--nodes",
                "0",
            ],
            "--nodes",
        ),
    ] {
        let o = bin().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(&format!("invalid value '0' for '{option}")), "{args:?}: {}", stderr(&o));
    }
    assert!(!system.exists() && !out.exists());
}

#[test]
fn damaged_files_fail_fast_or_keep_their_complete_events() {
    let ev = r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"stream": 7}}"#;
    // A JSON header and then 64 MiB of NUL bytes: an error at the first one, at once.
    let mut bytes = br#"{"traceEvents": ["#.to_vec();
    bytes.resize(bytes.len() + (64 << 20), 0);
    let (o, p) = analyze_bad("nul", "nul.json", &bytes);
    assert_clean_failure(&o, &p, Some("byte 17"));
    // A value that is not an event mid-file fails there: it had kept the events before it and
    // dropped the rest, exit 0.
    let mid = format!(r#"{{"traceEvents": [{ev}, 5, {ev}]}}"#).into_bytes();
    let at = format!("byte {}", 19 + ev.len());
    let (o, p) = analyze_bad("mid", "mid.json", &mid);
    assert_clean_failure(&o, &p, Some(&at));
    assert!(stderr(&o).contains("expected an event object"), "{}", stderr(&o));
    // Complete events, then a NUL tail or a cut inside the trailing metadata:
    // the events are analysed, and the damage is named.
    let mut tail = format!(r#"{{"traceEvents": [{ev}, {ev}"#).into_bytes();
    tail.resize(tail.len() + 4096, 0);
    let meta = format!(r#"{{"traceEvents": [{ev}, {ev}], "deviceProperties": [{{"id": 0, "na"#).into_bytes();
    let neg =
        format!(r#"{{"traceEvents": [{ev}, {{"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 30, "dur": -5}}]}}"#);
    // A kernel without its type: left out of the GPU's time, and said (it had been in silence).
    let no_phase = format!(r#"{{"traceEvents": [{ev}, {{"cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 30, "dur": 5}}]}}"#);
    for (name, bytes, note) in [
        ("nul-tail", tail, "where an event should be; the 2 events before it are used"),
        ("cut-meta", meta, "the 2 events before it are used"),
        ("negative", neg.into_bytes(), "1 event(s) had a negative duration; they are kept with duration 0"),
        ("no-phase", no_phase.into_bytes(), "1 event(s) without `ph` (the event's type): read as other events"),
    ] {
        let dir = scratch(name);
        let path = dir.join("t.json");
        std::fs::write(&path, &bytes).unwrap();
        let out = dir.join("a.json");
        let o = run(&["analyze".as_ref(), path.as_os_str(), "-q".as_ref(), "--json".as_ref(), out.as_os_str()]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let rank = &json(&out)["jobs"][0]["ranks"][0];
        assert_eq!(rank["busy_us"].as_f64(), Some(5.0), "{name}");
        let notes = rank["notes"].to_string();
        assert!(notes.contains(note), "{name}: {notes}");
    }
    // An empty object has neither type nor time: dropped, and not said to be read.
    let dir = scratch("empty-event");
    let path = dir.join("t.json");
    std::fs::write(&path, format!(r#"{{"traceEvents": [{ev}, {{}}]}}"#)).unwrap();
    let out = dir.join("a.json");
    let o = run(&["analyze".as_ref(), path.as_os_str(), "-q".as_ref(), "--json".as_ref(), out.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let notes = json(&out)["jobs"][0]["ranks"][0]["notes"].to_string();
    assert!(!notes.contains("without `ph`"), "{notes}");
}

#[test]
fn step_selection_and_each_over_a_directory() {
    let dir = scratch("steps-select");
    let t = shared().join("kineto/tb_plugin_samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz");
    let steps_of = |extra: &[&str], name: &str| {
        let out = dir.join(name);
        let mut args: Vec<&std::ffi::OsStr> = vec!["analyze".as_ref(), t.as_os_str(), "-q".as_ref(), "--json".as_ref(), out.as_os_str()];
        args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
        let o = run(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let rank = json(&out)["jobs"][0]["ranks"][0].clone();
        let numbers: Vec<i64> = rank["steps"].as_array().unwrap().iter().map(|s| s["step"].as_i64().unwrap()).collect();
        (numbers, rank["gpu_span_us"].as_f64().unwrap())
    };
    let (all, _) = steps_of(&[], "all.json");
    assert_eq!(all, [5, 6, 7, 8, 9, 10]);
    let (dropped, _) = steps_of(&["--drop-last-step"], "drop.json");
    assert_eq!(dropped, [5, 6, 7, 8, 9]);
    let (some, span) = steps_of(&["--steps", "6-7"], "some.json");
    assert_eq!(some, [6, 7]);
    let (_, full) = steps_of(&[], "full.json");
    assert!(span < full / 2.0, "{span} of {full}");
    let o = run(&["analyze".as_ref(), t.as_os_str(), "--steps".as_ref(), "7-6".as_ref()]);
    assert!(!o.status.success() && stderr(&o).contains("comes after"), "{}", stderr(&o));
    // --each splits a directory of unrelated runs into one job per file.
    let out = dir.join("each.json");
    let h100 = shared().join("tracelens/h100");
    let o = run(&["analyze".as_ref(), "--each".as_ref(), "-q".as_ref(), h100.as_os_str(), "--json".as_ref(), out.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&out)["jobs"].as_array().unwrap().len(), 4);
}

#[test]
fn dimension_and_straggler_tables_match_the_json() {
    let dir = scratch("dim-tables");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let out = dir.join("a.json");
    let o =
        run(&["analyze".as_ref(), demo.as_os_str(), "-q".as_ref(), "--json".as_ref(), out.as_os_str(), "--csv".as_ref(), dir.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&out);
    let dims = std::fs::read_to_string(dir.join("dimensions.csv")).unwrap();
    let rank0 = &v["jobs"][0]["ranks"][0]["comm_by_dimension"][0];
    assert_eq!(rank0["dimension"], "dp");
    // A group of the world's size whose kernels name neither its description nor its ranks is
    // the world's, data parallel (it had been `other`).
    let bare = dir.join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    for r in 0..4 {
        let mut text = String::new();
        let gz = demo.join(format!("rank-{r}.json.gz"));
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()), &mut text).unwrap();
        let named = r#""Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1, 2, 3]""#;
        assert!(text.contains(named));
        std::fs::write(bare.join(format!("rank-{r}.json")), text.replace(named, r#""Process Group Name": "9""#)).unwrap();
    }
    let bare_out = dir.join("bare.json");
    let o = run(&["analyze".as_ref(), bare.as_os_str(), "-q".as_ref(), "--json".as_ref(), bare_out.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bare_dims = json(&bare_out)["jobs"][0]["ranks"][0]["comm_by_dimension"].clone();
    let names: Vec<&str> = bare_dims.as_array().unwrap().iter().map(|x| x["dimension"].as_str().unwrap()).collect();
    assert_eq!(names, ["dp"], "{bare_dims}");
    let line = dims.lines().nth(1).unwrap();
    assert!(line.contains(&format!("{}", rank0["comm_us"].as_f64().unwrap())), "{line} vs {rank0}");
    let stragglers = std::fs::read_to_string(dir.join("stragglers.csv")).unwrap();
    assert_eq!(stragglers.lines().count() - 1, v["jobs"][0]["stragglers"].as_array().unwrap().len());
    // The job's totals and step times, as the JSON's (the tables had been per rank alone).
    let cell = |table: &str, row: usize, column: &str| {
        let text = std::fs::read_to_string(dir.join(format!("{table}.csv"))).unwrap();
        let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
        let at = header.iter().position(|h| *h == column).unwrap_or_else(|| panic!("{table}: no {column} in {header:?}"));
        text.lines().nth(row + 1).unwrap().split(',').nth(at).unwrap().to_string()
    };
    let totals = &v["jobs"][0]["totals"];
    assert_eq!(cell("jobs", 0, "exposed_comm_us").parse::<f64>().unwrap(), totals["exposed_comm_us"].as_f64().unwrap());
    assert_eq!(cell("jobs", 0, "world_size"), "4");
    for (k, step) in totals["steps"].as_array().unwrap().iter().enumerate() {
        assert_eq!(cell("job_steps", k, "step_us").parse::<f64>().unwrap(), step["step_us"].as_f64().unwrap());
        assert_eq!(cell("job_steps", k, "slowest_rank"), step["slowest_rank"].to_string());
    }
}

#[test]
fn a_gemm_efficiency_what_if_through_the_command_line() {
    // The user's path: two synthetic jobs differing only in GEMM efficiency,
    // a profile calibrated on the faster one, `replay --target --profile` on
    // the slower one: its step must become the faster one's.
    let dir = scratch("cli-whatif");
    let (slow, fast, profile) = (dir.join("slow"), dir.join("fast"), dir.join("fast.json"));
    for (out, eta) in [(&slow, "0.5"), (&fast, "0.7")] {
        let o = run(&[
            "synth".as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
            "--gemm-efficiency".as_ref(),
            eta.as_ref(),
            "--seed".as_ref(),
            "3".as_ref(),
            "-q".as_ref(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let o = run(&["calibrate".as_ref(), fast.as_os_str(), "--out".as_ref(), profile.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let step = |args: &[&std::ffi::OsStr], name: &str| {
        let out = dir.join(name);
        let mut a: Vec<&std::ffi::OsStr> = vec!["replay".as_ref(), "-q".as_ref(), "--json".as_ref(), out.as_os_str()];
        a.extend_from_slice(args);
        let o = run(&a);
        assert!(o.status.success(), "{}", stderr(&o));
        let ranks = json(&out)["jobs"][0]["ranks"].as_array().unwrap().clone();
        let key = if name == "truth.json" { "measured_step_us" } else { "replayed_step_us" };
        ranks.iter().map(|r| r[key].as_f64().unwrap()).sum::<f64>() / ranks.len() as f64
    };
    let projected =
        step(&[slow.as_os_str(), "--target".as_ref(), "h100-sxm".as_ref(), "--profile".as_ref(), profile.as_os_str()], "projected.json");
    let truth = step(&[fast.as_os_str()], "truth.json");
    assert!(((projected - truth) / truth).abs() <= 0.02, "projected {projected} µs, truth {truth} µs");
    // The faster job with the profile of itself prices no other stack: said; the slower one's
    // replay (another run) is not told so.
    let note = "the target profile was calibrated on 4 of this run's own trace(s) on the same GPU (4 in all)";
    let text = |job: &Path| {
        let o =
            run(&["replay".as_ref(), job.as_os_str(), "--target".as_ref(), "h100-sxm".as_ref(), "--profile".as_ref(), profile.as_os_str()]);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(text(&fast).contains(note), "{}", text(&fast));
    assert!(!text(&slow).contains("calibrated on"), "{}", text(&slow));
}

#[test]
fn every_command_that_reads_traces_takes_the_same_options() {
    let dir = scratch("common-options");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    // A job directory with the demo's ranks and one damaged file.
    let damaged = dir.join("damaged");
    std::fs::create_dir_all(&damaged).unwrap();
    for f in std::fs::read_dir(&demo).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, damaged.join(f.file_name().unwrap())).unwrap();
    }
    std::fs::write(damaged.join("rank9.json"), b"{\"traceEvents\": [nope").unwrap();
    let out = |name: &str| dir.join(name).into_os_string();
    let commands: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
        ("analyze", vec![]),
        ("calibrate", vec!["--out".into(), out("p.json")]),
        ("replay", vec![]),
        ("report", vec!["--out".into(), out("r.html")]),
        ("diff", vec![demo.clone().into_os_string()]),
    ];
    let call = |cmd: &str, input: &Path, rest: &[std::ffi::OsString], extra: &[&str]| {
        let mut args: Vec<std::ffi::OsString> = vec![cmd.into(), input.into(), "-q".into()];
        args.extend(rest.iter().cloned());
        args.extend(extra.iter().map(|a| std::ffi::OsString::from(*a)));
        bin().args(&args).output().unwrap()
    };
    let hw = dir.join("extra.toml");
    std::fs::write(&hw, "[[gpu]]\nid = \"rtx-2080ti\"\nname = \"GeForce RTX 2080 Ti\"\nsource = \"NVIDIA Turing whitepaper\"\nmatch = [\"2080 Ti\"]\nfp32 = 13.4\nfp16 = 53.8\nmemory_gb = 11.0\nhbm_gbps = 616.0\nlink_gbps = 50.0\n").unwrap();
    let hw = hw.to_str().unwrap().to_string();
    for (cmd, rest) in &commands {
        // Reading options: the same names and meaning everywhere.
        let o = call(cmd, &demo, rest, &["--comm-kernels", "nccl", "--gpus-per-node", "4", "--hw", &hw]);
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
        let o = call(cmd, &demo, rest, &["--gpus-per-node", "0"]);
        assert!(!o.status.success() && stderr(&o).contains("--gpus-per-node"), "{cmd}: {}", stderr(&o));
        // The bad rank is named; without --strict the good ranks are still used, with it nothing is.
        let o = call(cmd, &damaged, rest, &[]);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        assert!(stderr(&o).contains("rank9.json"), "{cmd}: {}", stderr(&o));
        let o = call(cmd, &damaged, rest, &["--strict"]);
        assert!(!o.status.success() && stderr(&o).contains("--strict"), "{cmd}: {}", stderr(&o));
    }
    for (cmd, rest) in commands.iter().filter(|(c, _)| ["analyze", "report", "diff"].contains(c)) {
        // The analysed window: the same options wherever GPU time is broken down; the idle
        // split's threshold where idle time is split (not in diff).
        let splits_idle = *cmd != "diff";
        let idle: &[&str] = if splits_idle { &["--kernel-wait-us", "10"] } else { &[] };
        let o = call(cmd, &demo, rest, &[&["--window", "all", "--drop-last-step"], idle].concat());
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
        for (bad, named) in [
            (["--kernel-wait-us=-1", "--window=all"], "--kernel-wait-us"),
            (["--steps", "3-1"], "--steps"),
            (["--window", "some"], "--window"),
        ] {
            let o = call(cmd, &demo, rest, &bad);
            assert!(!o.status.success() && stderr(&o).contains(named), "{cmd} {bad:?}: {}", stderr(&o));
        }
    }
    // The window reaches the numbers in diff and report too, not only in analyze.
    let d = |extra: &[&str], name: &str| {
        let f = dir.join(name);
        let o = call("diff", &demo, &[demo.clone().into_os_string(), "--json".into(), f.clone().into_os_string()], extra);
        assert!(o.status.success(), "{}", stderr(&o));
        json(&f).to_string()
    };
    assert_ne!(d(&[], "d1.json"), d(&["--steps", "1-1"], "d2.json"));
}

#[test]
fn a_missing_input_file_is_named_with_its_cause_once() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let dir = scratch("cause-once");
    let missing = dir.join("missing.toml");
    let missing_profile = dir.join("missing.json");
    let profile_out = dir.join("p.json");
    for args in [
        vec![
            "calibrate".as_ref(),
            demo.as_os_str(),
            "-q".as_ref(),
            "--out".as_ref(),
            profile_out.as_os_str(),
            "--hw".as_ref(),
            missing.as_os_str(),
        ],
        vec![
            "replay".as_ref(),
            demo.as_os_str(),
            "-q".as_ref(),
            "--target".as_ref(),
            "h100-sxm".as_ref(),
            "--profile".as_ref(),
            missing_profile.as_os_str(),
        ],
        vec!["analyze".as_ref(), missing.as_os_str()],
    ] {
        let o = run(&args);
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?}");
        assert!(err.contains("missing."), "{err}");
        assert_eq!(err.matches("No such file").count(), 1, "{err}");
    }
}

#[test]
fn parquet_tables_carry_large_strings_that_older_readers_open() {
    // Arrow readers before 15 (pyarrow 14: "Unrecognized type: 24") cannot open a footer schema
    // with `string_view`; the tables' footers say large strings.
    let dir = scratch("parquet-compat");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let o = run(&["analyze".as_ref(), demo.as_os_str(), "-q".as_ref(), "--parquet".as_ref(), dir.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut strings = 0;
    for t in ["jobs", "job_steps", "breakdown", "steps", "collectives", "kernels", "dimensions", "stragglers"] {
        use base64::Engine as _;
        let mut f = std::fs::File::open(dir.join(format!("{t}.parquet"))).unwrap();
        let meta = polars_parquet::read::read_metadata(&mut f).unwrap();
        // The footer's Arrow schema as written (polars' own reader maps every string type to a view).
        let kv = meta.key_value_metadata().as_ref().unwrap();
        let encoded = kv.iter().find(|kv| kv.key == "ARROW:schema").and_then(|kv| kv.value.clone()).unwrap();
        let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap();
        let message = if bytes[..4] == [255; 4] { &bytes[8..] } else { &bytes[..] };
        let (schema, ..) = polars_arrow::io::ipc::read::deserialize_schema(message).unwrap();
        for (name, field) in schema.iter() {
            let dtype = format!("{:?}", field.dtype);
            assert!(!dtype.contains("View"), "{t}.{name}: {dtype}");
            strings += usize::from(dtype == "LargeUtf8");
        }
    }
    assert!(strings >= 6, "{strings} string columns");
}

/// `dir/bad`: a job of `good` and a file that is not gzip.
fn job_with_a_broken_rank(dir: &Path, good: &Path) -> PathBuf {
    let bad = dir.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::copy(good, bad.join("good.json.gz")).unwrap();
    std::fs::write(bad.join("broken.json.gz"), b"not gzip at all").unwrap();
    bad
}

/// Issue 25: `tracecast demo | head -1` panicked ("failed printing to stdout"), as did
/// every command that printed with `println!`. A closed pipe now silences the terminal
/// text only: the command still writes its files and ends with its own exit status (a
/// closed pipe used to end it at its first line, before its files, with status 0 even
/// when an input was bad). The pipe's read end is closed before the command starts, so
/// every write to stdout fails.
#[test]
fn commands_writing_to_a_closed_pipe_still_write_their_files_and_keep_their_exit_status() {
    let dir = scratch("closed-pipe");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let a = shared().join("hta/trace_diff/control/control.json.gz");
    let b = shared().join("hta/trace_diff/test/test.json.gz");
    let bad = job_with_a_broken_rank(&dir, &a);
    let os = |p: &Path| std::ffi::OsString::from(p);
    let commands: Vec<(Vec<std::ffi::OsString>, i32, Vec<PathBuf>)> = vec![
        (vec!["demo".into()], 0, vec![dir.join("tracecast-demo/report.html")]),
        (
            vec!["analyze".into(), os(&demo), "--json".into(), os(&dir.join("a.json")), "--csv".into(), os(&dir.join("csv"))],
            0,
            vec![dir.join("a.json"), dir.join("csv")],
        ),
        (vec!["analyze".into(), os(&bad), "--json".into(), os(&dir.join("bad.json"))], 2, vec![dir.join("bad.json")]),
        (vec!["ingest".into(), os(&demo), "--out".into(), os(&dir.join("ds"))], 0, vec![dir.join("ds")]),
        (vec!["synth".into(), "--out".into(), os(&dir.join("synth")), "--ranks".into(), "2".into()], 0, vec![dir.join("synth")]),
        (vec!["report".into(), os(&demo), "--out".into(), os(&dir.join("r.html"))], 0, vec![dir.join("r.html")]),
        (vec!["diff".into(), os(&a), os(&b), "--json".into(), os(&dir.join("d.json"))], 0, vec![dir.join("d.json")]),
        (
            vec![
                "project".into(),
                "--model".into(),
                "llama2-7b".into(),
                "--system".into(),
                "h100-sxm".into(),
                "--gpus".into(),
                "8".into(),
                "--json".into(),
                os(&dir.join("p.json")),
            ],
            0,
            vec![dir.join("p.json")],
        ),
        (vec!["hw".into(), "list".into()], 0, vec![]),
        // An output on standard output (`--json - | head`): the reader took what it wanted.
        (vec!["replay".into(), os(&demo), "--json".into(), "-".into()], 0, vec![]),
        (vec!["report".into(), os(&demo), "--out".into(), "-".into()], 0, vec![]),
    ];
    for (args, status, files) in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o = bin().args(&args).current_dir(&dir).stdout(writer).stderr(std::process::Stdio::piped()).output().unwrap();
        assert_eq!(o.status.code(), Some(status), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
        for f in files {
            assert!(f.exists(), "{args:?}: {} not written", f.display());
        }
    }
}

/// `2>&1 | head -1`: an error or a failed gate written to a closed stderr ended the command
/// with a panic (status 101) instead of its own status — a CI gate reading `diff --fail-if`
/// got 101 for 1. Both streams closed here; the exit status is the command's.
#[test]
fn a_closed_stderr_keeps_the_exit_status() {
    let dir = scratch("closed-stderr");
    let a = shared().join("hta/trace_diff/control/control.json.gz");
    let b = shared().join("hta/trace_diff/test/test.json.gz");
    let bad = job_with_a_broken_rank(&dir, &a);
    let os = |p: &Path| std::ffi::OsString::from(p);
    let commands: Vec<(Vec<std::ffi::OsString>, i32)> = vec![
        // A bad rank: the good one analysed, the error line written to the closed stream.
        (vec!["analyze".into(), os(&bad)], 2),
        // An output that cannot be written (a folder).
        (vec!["analyze".into(), os(&a), "--json".into(), os(&dir)], 2),
        (vec!["diff".into(), os(&a), os(&b), "--fail-if".into(), "step>+0%".into()], 1),
        (vec!["diff".into(), os(&a), os(&a), "--fail-if".into(), "step>+0%".into()], 0),
    ];
    for (args, status) in commands {
        let (out_r, out_w) = std::io::pipe().unwrap();
        let (err_r, err_w) = std::io::pipe().unwrap();
        drop((out_r, err_r));
        let o = bin().args(&args).current_dir(&dir).stdout(out_w).stderr(err_w).output().unwrap();
        assert_eq!(o.status.code(), Some(status), "{args:?}");
    }
}

/// Runs `analyze` on `src` written into a FIFO named `name` in `dir`, with `extra` arguments after it.
#[cfg(unix)]
fn analyze_through_a_pipe(dir: &Path, src: &Path, name: &str, extra: &[&std::ffi::OsStr]) -> std::process::Output {
    use std::os::unix::fs::OpenOptionsExt as _;
    let fifo = dir.join(name);
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // Read here, not in the writer: a writer that failed before opening the pipe would leave
    // the command waiting for one for ever.
    let bytes = std::fs::read(src).unwrap();
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(&fifo, bytes))
    };
    let mut args: Vec<&std::ffi::OsStr> = vec!["analyze".as_ref(), fifo.as_os_str()];
    args.extend(extra);
    let o = run(&args);
    // A command that stopped reading (or never opened the pipe) leaves the writer in `open` or
    // `write`. A reader that does not wait frees the first, its close the second. A reader that
    // waits for a writer hung CI when the writer was already on its way out.
    while !writer.is_finished() {
        drop(std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo));
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = writer.join();
    o
}

/// `analyze <(zcat t.json.gz)`: a trace from a pipe failed with "Illegal seek", and its
/// first bytes were eaten by the check for an Nsight Systems export. It reads as the file does.
#[cfg(unix)]
#[test]
fn a_trace_from_a_pipe_reads_as_its_file() {
    let dir = scratch("pipe");
    let src = shared().join("hta/trace_diff/control/control.json.gz");
    let (piped, direct) = (dir.join("piped.json"), dir.join("direct.json"));
    let o = analyze_through_a_pipe(&dir, &src, "t.json.gz", &["-q".as_ref(), "--json".as_ref(), piped.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["analyze".as_ref(), src.as_os_str(), "-q".as_ref(), "--json".as_ref(), direct.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let busy = |p: &Path| json(p)["jobs"][0]["ranks"][0]["busy_us"].as_f64();
    assert!(busy(&direct).is_some_and(|b| b > 0.0));
    assert_eq!(busy(&piped), busy(&direct));
}

/// A link in a job's folder that leads nowhere (dangling, or a loop) is a rank that cannot be
/// read: named, exit 2, the other ranks analysed. It had been skipped without a word, exit 0.
#[cfg(unix)]
#[test]
fn a_broken_link_among_a_jobs_traces_is_named() {
    let dir = scratch("broken-link");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    for r in 0..2 {
        std::fs::copy(demo.join(format!("rank-{r}.json.gz")), dir.join(format!("rank-{r}.json.gz"))).unwrap();
    }
    std::os::unix::fs::symlink(dir.join("gone/rank-2.json.gz"), dir.join("rank-2.json.gz")).unwrap();
    std::os::unix::fs::symlink(dir.join("rank-3.json.gz"), dir.join("rank-3.json.gz")).unwrap();
    let o = run(&["analyze".as_ref(), dir.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("rank-2.json.gz: No such file") && e.contains("rank-3.json.gz"), "{e}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("2 rank(s) read"), "{}", String::from_utf8_lossy(&o.stdout));
}

/// An Nsight Systems export from a pipe is said to need its path (SQLite seeks): it had been
/// called "not a JSON object".
#[cfg(unix)]
#[test]
fn an_export_from_a_pipe_is_said_to_need_its_path() {
    let dir = scratch("pipe-sqlite");
    let o = analyze_through_a_pipe(&dir, &shared().join("nsys/h100_2gpu_1s.sqlite"), "x.sqlite", &[]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("an SQLite database (an Nsight Systems export?) from a pipe") && !e.contains("JSON"), "{e}");
}

/// A profiler step without GPU work (the MI250 trace's last) is listed per rank and left out
/// of the job's step time (totals, diff, replay); that was said nowhere.
#[test]
fn a_step_without_gpu_work_is_said_to_be_left_out_of_the_job_step_time() {
    let dir = scratch("empty-step");
    let t = shared().join("hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz");
    let out = dir.join("a.json");
    let o = run(&["analyze".as_ref(), t.as_os_str(), "-q".as_ref(), "--json".as_ref(), out.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&out);
    let rank = &doc["jobs"][0]["ranks"][0];
    assert_eq!(rank["steps"].as_array().map(Vec::len), Some(2), "{rank}");
    assert_eq!(doc["jobs"][0]["totals"]["steps"].as_array().map(Vec::len), Some(1));
    assert!(rank["notes"].to_string().contains("step(s) 2 ran no GPU work: listed here, not in the job's step time"), "{}", rank["notes"]);
}

/// An output path that is one of the command's inputs is refused before anything is
/// replaced: `report t.json.gz --out t.json.gz` had turned the trace into HTML (exit 0),
/// as had `analyze --json`, `replay --json` / `--perfetto`, `diff --json` and `calibrate --out`.
#[test]
fn an_output_never_replaces_an_input() {
    let dir = scratch("output-onto-input");
    let t = dir.join("t.json.gz");
    copy_of_a_real_trace(&t);
    let before = std::fs::read(&t).unwrap();
    let os = std::ffi::OsStr::new;
    let (tt, dotted) = (t.as_os_str(), dir.join(".").join("t.json.gz"));
    for args in [
        vec![os("report"), tt, os("--out"), tt],
        vec![os("analyze"), tt, os("-q"), os("--json"), dotted.as_os_str()],
        vec![os("replay"), tt, os("-q"), os("--json"), tt],
        vec![os("replay"), tt, os("-q"), os("--perfetto"), tt],
        vec![os("diff"), tt, tt, os("-q"), os("--json"), tt],
        vec![os("calibrate"), tt, os("-q"), os("--out"), tt],
    ] {
        let o = run(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        // Said before the job is read (it had been said after the analysis was printed).
        assert!(e.contains("t.json.gz: it is an input of this command (") && o.stdout.is_empty(), "{args:?}: {e}");
        assert_eq!(std::fs::read(&t).unwrap(), before, "{args:?} replaced its input");
    }
    // Beside the input, in its folder: written.
    let o = run(&[os("report"), tt, os("--out"), dir.join("r.html").as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A command none of whose inputs could be read writes nothing: `analyze --json` and
/// `replay --json` had replaced the last good output with `{"jobs": []}`, `--csv` written
/// header-only tables, `ingest` left an empty dataset folder.
#[test]
fn a_command_that_could_read_nothing_leaves_its_outputs_as_they_were() {
    let dir = scratch("nothing-read");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "garbage").unwrap();
    let (keep, tables, dataset) = (dir.join("keep.json"), dir.join("tables"), dir.join("ds"));
    let os = std::ffi::OsStr::new;
    for args in [
        vec![os("analyze"), bad.as_os_str(), os("--json"), keep.as_os_str(), os("--csv"), tables.as_os_str()],
        vec![os("replay"), bad.as_os_str(), os("--json"), keep.as_os_str()],
        vec![os("ingest"), bad.as_os_str(), os("--out"), dataset.join("a").as_os_str()],
    ] {
        std::fs::write(&keep, "PRE").unwrap();
        let o = run(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains("bad.json: byte 0") && e.contains("nothing was written"), "{args:?}: {e}");
        assert_eq!(std::fs::read_to_string(&keep).unwrap(), "PRE", "{args:?}");
        assert!(!tables.exists() && !dataset.exists(), "{args:?}");
    }
}

/// Issue 25: `--steps 100` on a trace without step 100 analysed the whole trace, exited 0
/// and said "no ProfilerStep annotations".
#[test]
fn a_step_range_that_selects_nothing_is_an_error_naming_the_steps_the_trace_has() {
    let dir = scratch("steps-range");
    let t = shared().join("hta/trace_diff/test/test.json.gz");
    let refused = |args: &[&std::ffi::OsStr], has: &str| {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("select nothing in") && e.contains("test.json.gz") && e.contains(&format!("it has {has}")), "{args:?}: {e}");
    };
    let (t, out, ds, json_out) = (t.as_os_str(), dir.join("r.html"), dir.join("ds"), dir.join("a.json"));
    let os = std::ffi::OsStr::new;
    refused(&[os("analyze"), t, os("-q"), os("--steps"), os("100")], "steps 1009–1014");
    refused(&[os("analyze"), t, os("-q"), os("--steps"), os("1015-2000")], "steps 1009–1014");
    // The last step left out first, as the analysis does.
    refused(
        &[os("analyze"), t, os("-q"), os("--steps"), os("1014"), os("--drop-last-step")],
        "steps 1009–1013 (and step 1014, its last, which --drop-last-step leaves out)",
    );
    // Every command that takes the range.
    refused(&[os("report"), t, os("--out"), out.as_os_str(), os("--steps"), os("100")], "steps 1009–1014");
    refused(&[os("diff"), t, t, os("-q"), os("--steps"), os("100")], "steps 1009–1014");
    refused(&[os("ingest"), t, os("--out"), ds.as_os_str(), os("-q"), os("--steps"), os("100")], "steps 1009–1014");
    // The dataset holds the trace all the same, without a summary made for those steps.
    let parts = |table: &str| std::fs::read_dir(ds.join(table)).map_or(0, |d| d.count());
    assert_eq!((parts("events"), parts("summaries")), (1, 0));
    // The dataset's range error names its part, the file given (it had named the trace it was
    // ingested from, which may be gone).
    let o = run(&[os("analyze"), ds.as_os_str(), os("-q"), os("--steps"), os("100")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    let part = ds.join("events");
    assert!(e.contains(&format!("select nothing in {}", part.display())) && e.contains("it has steps 1009–1014"), "{e}");
    // And its last line says so beside the count written (it had read as a whole success), and
    // that a --device given to ingest is not stored.
    let again = dir.join("ds2");
    let o = run(&[os("ingest"), t, os("--out"), again.as_os_str(), os("--steps"), os("100"), os("--device"), os("a100-80gb")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("1 rank(s) written to the dataset") && text.contains("(1 of them without a summary cached"), "{text}");
    assert!(text.contains("note: --device a100-80gb is not stored in the dataset"), "{text}");
    // A range that selects some steps keeps just those.
    let o = run(&[os("analyze"), t, os("-q"), os("--steps"), os("1013-1100"), os("--json"), json_out.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&json_out);
    let numbers: Vec<i64> = doc["jobs"][0]["ranks"][0]["steps"].as_array().unwrap().iter().map(|s| s["step"].as_i64().unwrap()).collect();
    assert_eq!(numbers, [1013, 1014]);
    // And says that the trace has only part of the range (it had passed without a word).
    let notes = doc["jobs"][0]["ranks"][0]["notes"].to_string();
    assert!(notes.contains("--steps 1013-1100: this trace has 2 of the 88 steps named (it has steps 1009–1014)"), "{notes}");
    // The steps it has are named before --drop-last-step leaves its last out, and the step it
    // left out is named (the note had said the trace lacked it).
    let o = run(&[os("analyze"), t, os("-q"), os("--steps"), os("1013-1100"), os("--drop-last-step"), os("--json"), json_out.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let notes = json(&json_out)["jobs"][0]["ranks"][0]["notes"].to_string();
    let said = "1 of the 88 steps named analysed (the trace has steps 1009–1014; --drop-last-step left out step 1014)";
    assert!(notes.contains(said), "{notes}");
}

/// Issue 25: `diff`'s per-class table summed every kernel of the trace whatever `--window`
/// said, while its other tables covered the window.
#[test]
fn diff_per_class_times_cover_the_analysed_window() {
    let dir = scratch("diff-window");
    // A trace whose step window leaves some GPU work out, against itself.
    let b = shared().join("hta/trace_diff/test/test.json.gz");
    let diff = |name: &str, window: &[&str]| {
        let out = dir.join(format!("{name}.json"));
        let o = bin().args(["diff", "--quiet", "--top", "100000", "--json"]).arg(&out).args(window).arg(&b).arg(&b).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        json(&out)
    };
    let total = |d: &serde_json::Value, section: &str| -> f64 {
        d[section].as_array().unwrap().iter().map(|x| x["time_b_us"].as_f64().unwrap()).sum()
    };
    let (all, steps, two) = (diff("all", &["--window", "all"]), diff("steps", &[]), diff("two", &["--steps", "1010-1011"]));
    // The classes hold the kernels of the per-kernel table, clipped to the same window.
    for d in [&all, &steps, &two] {
        let (classes, kernels) = (total(d, "kernel_classes"), total(d, "kernels"));
        assert!((classes - kernels).abs() <= 1e-6 * kernels, "classes {classes} µs vs kernels {kernels} µs");
    }
    let (all, steps, two) = (total(&all, "kernel_classes"), total(&steps, "kernel_classes"), total(&two, "kernel_classes"));
    assert!(two < 0.5 * steps && steps < all, "steps 1010–1011: {two} µs, steps window: {steps} µs, all: {all} µs");
}

#[test]
fn every_command_computes_each_per_rank_fact_once() {
    // Issue 25: a command builds one context per rank (classes, launch links,
    // steps, interval sets, collective instances) and every product from it,
    // and matches a job's collectives across its ranks once. The binary counts
    // each fact as it is computed; the demo job has 4 ranks.
    let dir = scratch("facts");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let d = demo.to_str().unwrap();
    let out = |f: &str| dir.join(f).display().to_string();
    let all4 = "classes=4 links=4 steps=4 sets=4 instances=4";
    let cases: Vec<(Vec<String>, String)> = vec![
        (vec!["analyze".into(), d.into()], format!("{all4} analysis=4 kernel_work=0 graph=0 matching=1")),
        (vec!["replay".into(), d.into()], format!("{all4} analysis=0 kernel_work=0 graph=4 matching=1")),
        (
            vec!["replay".into(), d.into(), "--perfetto".into(), out("t.json")],
            format!("{all4} analysis=0 kernel_work=0 graph=4 matching=1"),
        ),
        (
            vec!["replay".into(), d.into(), "--target".into(), "a100-80gb".into()],
            format!("{all4} analysis=0 kernel_work=4 graph=4 matching=1"),
        ),
        (
            vec!["calibrate".into(), d.into(), "--out".into(), out("p.json")],
            "classes=4 links=4 steps=0 sets=0 instances=4 analysis=0 kernel_work=4 graph=0 matching=1".into(),
        ),
        // The analysis, calibration, replay and a projection onto another GPU, one page.
        (
            vec!["report".into(), d.into(), "--out".into(), out("r.html"), "--target".into(), "a100-80gb".into()],
            format!("{all4} analysis=4 kernel_work=4 graph=4 matching=1"),
        ),
        (
            vec!["diff".into(), d.into(), d.into()],
            "classes=8 links=8 steps=8 sets=8 instances=8 analysis=8 kernel_work=8 graph=0 matching=2".into(),
        ),
        (vec!["ingest".into(), d.into(), "--out".into(), out("ds")], format!("{all4} analysis=4 kernel_work=0 graph=0 matching=0")),
    ];
    // A step range is checked against the steps the rank's one context finds, not a scan of its own.
    let steps = ["--steps".to_string(), "2-3".to_string()];
    let ranged: Vec<(Vec<String>, String)> = vec![
        (vec!["analyze".into(), d.into()], format!("{all4} analysis=4 kernel_work=0 graph=0 matching=1")),
        (vec!["replay".into(), d.into()], format!("{all4} analysis=0 kernel_work=0 graph=4 matching=1")),
        (
            vec!["replay".into(), d.into(), "--perfetto".into(), out("t2.json")],
            format!("{all4} analysis=0 kernel_work=0 graph=4 matching=1"),
        ),
        (
            vec!["report".into(), d.into(), "--out".into(), out("r2.html"), "--target".into(), "a100-80gb".into()],
            format!("{all4} analysis=4 kernel_work=4 graph=4 matching=1"),
        ),
        (
            vec!["diff".into(), d.into(), d.into()],
            "classes=8 links=8 steps=8 sets=8 instances=8 analysis=8 kernel_work=8 graph=0 matching=2".into(),
        ),
        (vec!["ingest".into(), d.into(), "--out".into(), out("ds2")], format!("{all4} analysis=4 kernel_work=0 graph=0 matching=0")),
    ];
    let cases = cases.into_iter().chain(ranged.into_iter().map(|(mut args, want)| {
        args.extend(steps.iter().cloned());
        (args, want)
    }));
    for (args, want) in cases {
        let o = bin().args(&args).arg("-q").env("TRACECAST_COUNT_FACTS", "1").output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        let got = err.lines().find_map(|l| l.strip_prefix("facts computed: ")).unwrap_or_default();
        assert_eq!(got, want, "{args:?}");
    }
}

/// `replay --target` onto the trace's own GPU, without a profile, is the identity: the
/// trace measured its kernels there, the most specific price of each (before, the H100
/// timesformer trace replayed 1.165× faster "on H100", its GEMMs priced by the shipped
/// profile's tables: 53.5 → 32.1 ms). A profile given with --profile is a software stack
/// to price with on the same GPU.
#[test]
fn projecting_onto_the_traces_own_gpu_keeps_its_kernels_unless_a_profile_is_given() {
    let dir = scratch("same-gpu");
    let trace = shared().join("tracelens/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz");
    let other = shared().join("tracelens/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz");
    let (same, priced, profile) = (dir.join("same.json"), dir.join("priced.json"), dir.join("owlv2.json"));
    let o = run(&[
        "replay".as_ref(),
        trace.as_os_str(),
        "--target".as_ref(),
        "h100-sxm".as_ref(),
        "--json".as_ref(),
        same.as_os_str(),
        "-q".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&same);
    let job = &doc["jobs"][0];
    let rank = &job["ranks"][0];
    assert_eq!(rank["replayed_step_us"], rank["measured_step_us"], "{rank}");
    let rules = job["projection"]["rules"].as_array().unwrap();
    assert!(rules.iter().all(|r| r["rule"] == "measured_on_target" && r["measured_us"] == r["projected_us"]), "{rules:?}");
    // Another H100 run's calibration as the stack: the kernels are priced, the step moves.
    let o = run(&["calibrate".as_ref(), other.as_os_str(), "--out".as_ref(), profile.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let args: Vec<&std::ffi::OsStr> = vec![
        "replay".as_ref(),
        trace.as_os_str(),
        "--target".as_ref(),
        "h100-sxm".as_ref(),
        "--profile".as_ref(),
        profile.as_os_str(),
        "--json".as_ref(),
        priced.as_os_str(),
        "-q".as_ref(),
    ];
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&priced);
    let rules = doc["jobs"][0]["projection"]["rules"].as_array().unwrap();
    assert!(rules.iter().all(|r| r["rule"] != "measured_on_target"), "{rules:?}");
    let rank = &doc["jobs"][0]["ranks"][0];
    assert_ne!(rank["replayed_step_us"], rank["measured_step_us"], "{rank}");
}

/// The waiting stragglers caused is the collectives table's wait, one definition: a
/// member's kernel time beyond the instance's transfer, summed over the members that did
/// not arrive last. On two of a 128-rank job's ranks with clocks that do not align (61 ms
/// RMS), rank 1 had "caused 400 GPU-ms" of waiting where rank 0's collectives waited
/// 114 ms in all and its communication took 396 ms.
///
/// The same holds in every analysis window: a narrower one (`--drop-last-step`, `--steps`)
/// narrows both, where the stragglers once counted the whole trace's waits.
#[test]
fn stragglers_caused_the_waits_the_collectives_table_measures() {
    let dir = scratch("stragglers-waits");
    let job = shared().join("hta/trace_filter");
    let mut all_waited = None;
    for (n, window) in [&["--window", "all"][..], &["--drop-last-step"], &["--steps", "552"]].into_iter().enumerate() {
        let out = dir.join(format!("a{n}.json"));
        let mut args: Vec<&std::ffi::OsStr> = vec!["analyze".as_ref(), job.as_os_str()];
        args.extend(window.iter().map(std::ffi::OsStr::new));
        args.extend(["--json".as_ref(), out.as_os_str(), "-q".as_ref()]);
        let o = run(&args);
        assert!(o.status.success(), "{window:?}: {}", stderr(&o));
        let doc = json(&out);
        let job = &doc["jobs"][0];
        let caused: f64 = job["stragglers"].as_array().unwrap().iter().map(|s| s["wait_caused_us"].as_f64().unwrap()).sum();
        let waited: f64 = job["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["collectives"].as_array().unwrap())
            .filter_map(|c| c["wait_us"].as_f64())
            .sum();
        assert!(caused > 0.0 && (caused - waited).abs() < 1e-6 * waited, "{window:?}: caused {caused} µs, waited {waited} µs");
        // The narrower windows wait less than the whole trace.
        match all_waited {
            None => all_waited = Some(waited),
            Some(all) => assert!(waited < all, "{window:?}: waited {waited} µs, the whole trace {all} µs"),
        }
        for s in job["stragglers"].as_array().unwrap() {
            let others: f64 =
                job["ranks"].as_array().unwrap().iter().filter(|r| r["rank"] != s["rank"]).map(|r| r["comm_us"].as_f64().unwrap()).sum();
            assert!(s["wait_caused_us"].as_f64().unwrap() <= others, "{window:?}: {s} beyond the others' communication {others} µs");
        }
    }
}

/// `--kernel-wait-us` splits idle time where a command reports the split: the report page
/// shows it, as `analyze` prints it (the page had shown no split, so the flag did nothing
/// there); `diff` reports no split and does not take the flag.
#[test]
fn the_idle_split_threshold_reaches_the_report_page_and_only_commands_that_split_idle_time() {
    let dir = scratch("idle-split-page");
    let trace = shared().join("hta/trace_diff/test/test.json.gz");
    let analyze = bin().args(["analyze", "--kernel-wait-us", "1000"]).arg(&trace).output().unwrap();
    assert!(analyze.status.success(), "{}", stderr(&analyze));
    let line = String::from_utf8_lossy(&analyze.stdout).lines().find(|l| l.starts_with("Idle: ")).unwrap().to_string();
    // "Idle: host wait H ms, kernel wait K ms (gaps < 1000 µs), other O ms."
    let number = |key: &str| line.split(key).nth(1).unwrap().split(" ms").next().unwrap().to_string();
    let page = dir.join("r.html");
    let o = bin().args(["report", "-q", "--kernel-wait-us", "1000", "--out"]).arg(&page).arg(&trace).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    let expected = format!("host wait {} ms", number("host wait "));
    assert!(html.contains(&expected) && html.contains("shorter than 1000 µs"), "{expected} / {line}");
    assert!(html.contains(&format!("kernel wait {} ms", number("kernel wait "))), "{line}");
    let o = bin().args(["diff", "-q", "--kernel-wait-us", "5"]).arg(&trace).arg(&trace).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "diff has no idle split: {}", stderr(&o));
}

/// Two kernels whose names differ only past the terminal's cut (template arguments) were shown
/// as one name twice in `diff`'s kernel table; they are told apart, and the JSON keeps the names.
#[test]
fn kernels_cut_to_one_name_are_told_apart_in_the_diff_table() {
    let (a, b) = (shared().join("hta/trace_diff/control/control.json.gz"), shared().join("hta/trace_diff/test/test.json.gz"));
    let o = bin().args(["diff", "--top", "30"]).arg(&a).arg(&b).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let table: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("Kernels that moved most")).skip(2).collect();
    let names: Vec<String> = table.iter().map(|l| l.chars().skip(2).take(44).collect::<String>().trim_end().to_string()).collect();
    let mut distinct = names.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), names.len(), "{names:#?}");
    assert!(names.iter().any(|n| n.ends_with("[2]")), "the pair this trace has: {names:#?}");
}

/// Two runs of one workload before and after a change (HTA's trace_diff pair) share most of
/// their kernel time; two different models (BERT-small and OWLv2 on one H100) share little,
/// and the diff says so rather than listing their differences as if one change made them.
#[test]
fn diff_says_how_much_kernel_time_the_runs_share() {
    let shares = |a: &std::path::Path, b: &std::path::Path| {
        let o = bin().arg("diff").arg(a).arg(b).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let text = shares(&shared().join("hta/trace_diff/control/control.json.gz"), &shared().join("hta/trace_diff/test/test.json.gz"));
    let line = text.lines().find(|l| l.starts_with("Kernels both ran: ")).unwrap_or_else(|| panic!("{text}"));
    let pct: Vec<f64> = line.split(|c: char| !(c.is_ascii_digit() || c == '.')).filter_map(|w| w.parse().ok()).collect();
    assert!(pct.len() == 2 && pct.iter().all(|&p| p > 50.0), "{line}");
    assert!(!text.contains("little in common"), "{text}");
    // Sharing most kernels, they ran on other GPUs in jobs of other sizes: said (a `--fail-if`
    // gate had failed at +60 % step without a word of it).
    assert!(text.contains("note: A ran on NVIDIA A100-PG509-200, B on Tesla V100-SXM2-16GB"), "{text}");
    assert!(text.contains("note: A is a job of 8 ranks, B of 2"), "{text}");
    assert!(!text.contains("holds 1 of"), "one rank of each: the usual comparison, {text}");
    // A job against one of its own ranks: the side holding part of its job is said.
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let rank0 =
        std::fs::read_dir(&demo).unwrap().map(|e| e.unwrap().path()).filter(|p| p.to_string_lossy().contains("rank")).min().unwrap();
    let text = shares(&demo, &rank0);
    assert!(text.contains("note: B holds 1 of its job's 4 ranks"), "{text}");
    assert!(!text.contains("ran on") && !text.contains("is a job of"), "{text}");
    let h100 = shared().join("tracelens/h100");
    let text = shares(
        &h100.join("gaunernst_bert-small-uncased__1016001.json.gz"),
        &h100.join("google_owlv2-large-patch14-ensemble__1016001.json.gz"),
    );
    assert!(text.contains("note: the runs have little in common"), "{text}");
}

/// `--json -` is standard output, alone on it: the terminal text goes to standard error
/// (it had written a file named `-`).
#[test]
fn json_to_standard_output_is_json_alone() {
    let o = run(&[
        "hw".as_ref(),
        "cost".as_ref(),
        "h100-sxm".as_ref(),
        "gemm".as_ref(),
        "--m".as_ref(),
        "4096".as_ref(),
        "--n".as_ref(),
        "4096".as_ref(),
        "--k".as_ref(),
        "4096".as_ref(),
        "--json".as_ref(),
        "-".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["time_us"].as_f64().is_some_and(|t| t > 0.0), "{doc}");
    assert!(stderr(&o).contains("gemm 1×4096×4096×4096 bf16 on h100-sxm"), "{}", stderr(&o));
    assert!(!std::path::Path::new("-").exists());
}

/// A flag that writes a folder of files, given `-`, is refused by name: it had made a
/// folder `./-` in the working directory, exit 0, with standard output empty.
#[test]
fn a_folder_output_on_standard_output_is_refused() {
    let dir = scratch("folder-output-dash");
    let trace = shared().join("kineto/tb_plugin_samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz");
    let t = trace.to_str().unwrap();
    let cases: [&[&str]; 7] = [
        &["synth", "--ranks", "2", "--out", "-"],
        &["analyze", t, "--csv", "-"],
        &["analyze", t, "--parquet", "-"],
        &["analyze", t, "--plots", "-"],
        &["ingest", t, "--out", "-"],
        &["calibrate", t, "--out", "p.json", "--plots", "-"],
        &["report", t, "--out", "r.html", "--png", "-"],
    ];
    for args in cases {
        let o = bin().args(args).current_dir(&dir).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let flag = args[args.len() - 2];
        assert!(stderr(&o).contains(&format!("{flag} writes a folder of files")), "{args:?}: {}", stderr(&o));
        assert!(!dir.join("-").exists(), "{args:?}");
    }
}

/// `--json /dev/stdout` with standard output appended to a file writes through it at its
/// offset (a rename had replaced the shell's file, losing what it held), and on a pipe it is
/// the pipe (it had failed on `/proc/self/fd/pipe:[N]`); `--json=-` is standard output too.
#[test]
fn json_to_dev_stdout_appends_to_the_shells_file_and_pipe() {
    let dir = scratch("dev-stdout");
    let log = dir.join("log.txt");
    std::fs::write(&log, "earlier line\n").unwrap();
    let args = ["hw", "cost", "h100-sxm", "gemm", "--m", "64", "--n", "64", "--k", "64", "--json", "/dev/stdout"];
    let appended = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let o = common::bin().args(args).stdout(appended).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("earlier line\ngemm 1×64×64×64 bf16 on h100-sxm"), "{text}");
    assert!(text.trim_end().ends_with('}') && text.contains("\"time_us\""), "{text}");
    // A pipe (the harness reads standard output through one).
    let o = common::bin().args(args).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("\"time_us\""), "{}", stderr(&o));
    let o = common::bin().args(["hw", "cost", "h100-sxm", "gemm", "--m", "64", "--n", "64", "--k", "64", "--json=-"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["time_us"].as_f64().is_some(), "{doc}");
}

/// A ROCm trace whose devices are unnamed (MI300X, 304 CUs, gfx 9.4) is calibrated as the GPU
/// the catalog knows by its compute units, and says so; it had printed "Device not recorded in
/// the traces → not in the catalog" over a profile of `mi300x`.
#[test]
fn calibrate_names_an_unnamed_rocm_device_by_its_compute_units() {
    let dir = scratch("calibrate-unnamed-rocm");
    let trace = shared().join("tracelens/inference/vllm_decode_full/graph_execution.json.gz");
    let out = dir.join("p.json");
    let o = run(&["calibrate".as_ref(), trace.as_os_str(), "--out".as_ref(), out.as_os_str()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Device unnamed in the traces → mi300x, by its compute units"), "{text}");
    assert!(!text.contains("not recorded"), "{text}");
    // Its decode step's kernels carry no shapes: nothing is fitted, and no profile of defaults is
    // written to stand in for mi300x's shipped one.
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("error: mi300x: nothing could be fitted from its traces"), "{}", stderr(&o));
    assert!(!out.exists());
}

/// Traces of two runs given as one job (an A100 rank of 8, a V100 rank of 2) are not matched
/// as one: the one declaring the other world size is named and left out. Calibrated together
/// they had given the V100 profile the A100's all-to-all fit (45 GB/s where its own is 14).
#[test]
fn a_trace_of_another_run_is_left_out_of_the_job() {
    let dir = scratch("other-run");
    let (a100, v100) = (shared().join("hta/trace_diff/control/control.json.gz"), shared().join("hta/trace_diff/test/test.json.gz"));
    let out = dir.join("p.json");
    let o = run(&["calibrate".as_ref(), a100.as_os_str(), v100.as_os_str(), "--out".as_ref(), out.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let want = format!("{}: declares a world size of 2, where this job's files declare 8", v100.display());
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    // The A100 rank is calibrated alone: one profile, of its GPU.
    let profile: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(profile["device"]["catalog_id"], "a100-40gb");
    // Each with --each: both read, exit 0.
    let each = dir.join("each.json");
    let o = run(&[
        "calibrate".as_ref(),
        a100.as_os_str(),
        v100.as_os_str(),
        "--each".as_ref(),
        "--out".as_ref(),
        each.as_os_str(),
        "-q".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A step's per-kernel counts hold the kernels that ran in it: the next step's first copy,
/// starting where the step's window ends, had been counted in it with no time (count 2,
/// mean halved, for a copy each step runs once).
#[test]
fn a_steps_kernel_counts_leave_out_the_next_steps_first_kernel() {
    let dir = scratch("step-edge-counts");
    let job = dir.join("job");
    let o = run(&[
        "synth".as_ref(),
        "--out".as_ref(),
        job.as_os_str(),
        "--ranks".as_ref(),
        "2".as_ref(),
        "--steps".as_ref(),
        "4".as_ref(),
        "--layers".as_ref(),
        "2".as_ref(),
        "-q".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for steps in ["1", "2", "2-3", "4"] {
        let out = dir.join(format!("a{steps}.json"));
        let o = run(&[
            "analyze".as_ref(),
            job.as_os_str(),
            "--steps".as_ref(),
            steps.as_ref(),
            "--json".as_ref(),
            out.as_os_str(),
            "-q".as_ref(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        let want = if steps == "2-3" { 2 } else { 1 };
        for rank in doc["jobs"][0]["ranks"].as_array().unwrap() {
            let copy =
                rank["top_kernels"].as_array().unwrap().iter().find(|k| k["name"].as_str().unwrap().starts_with("Memcpy HtoD")).unwrap();
            assert_eq!(copy["count"], want, "--steps {steps}: {copy}");
        }
    }
}

/// A projection onto a GPU without a path for the trace's 16-bit type (V100: FP16, no BF16) says
/// it priced that work as the other type: only `hw cost`'s basis had said so.
#[test]
fn a_projection_says_when_a_16_bit_type_has_no_path_on_the_target() {
    let dir = scratch("no-bf16-path");
    let job = dir.join("job");
    let o =
        run(&["synth".as_ref(), "--out".as_ref(), job.as_os_str(), "--ranks".as_ref(), "2".as_ref(), "--layers".as_ref(), "2".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let replay = |target: &str| {
        let o = run(&["replay".as_ref(), job.as_os_str(), "--target".as_ref(), target.as_ref()]);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let v100 = replay("v100");
    assert!(v100.contains("note: v100 has no bf16 path:") && v100.contains("of bf16 work priced as fp16, at its fp16 peak"), "{v100}");
    assert!(!replay("a100-80gb").contains("has no bf16 path"));
    // The report page says what priced its projection, as replay does (it had given the speed-up alone).
    let page = dir.join("r.html");
    let o = run(&["report".as_ref(), job.as_os_str(), "--out".as_ref(), page.as_os_str(), "--target".as_ref(), "v100".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    for want in [
        "Priced from h100-sxm",
        "onto v100 (",
        "The rules that priced the kernels on the target",
        "v100 has no bf16 path:",
        "By kernel class",
    ] {
        assert!(html.contains(want), "{want}");
    }
    // Each rule in the words replay prints it (a long one had been shortened as a kernel name to its last word).
    let text = html.replace("&#39;", "'").replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    let rules: Vec<&str> =
        v100.lines().filter(|l| l.contains(" kernels ") && l.contains(" → ")).filter_map(|l| l.split(" ms  ").nth(1)).collect();
    assert!(!rules.is_empty(), "{v100}");
    for rule in rules {
        assert!(text.contains(&format!("<td>{}</td>", rule.trim())), "{rule}");
    }
    // And its projected kernel time and band, as replay prints them.
    let band = v100.lines().find_map(|l| l.trim().strip_prefix("projected kernel time ")).unwrap();
    assert!(text.contains(&format!("Projected kernel time {band}.")), "{band}");
}

/// `replay TRACE --target GPU --json OUT`'s projection.
fn projection_onto(trace: &Path, target: &str, out: &Path) -> serde_json::Value {
    let o = run(&[
        "replay".as_ref(),
        trace.as_os_str(),
        "--target".as_ref(),
        target.as_ref(),
        "-q".as_ref(),
        "--json".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    json(out)["jobs"][0]["projection"].clone()
}

/// A target without traces of its own (H200, priced by H100's fits) does not take the fitted GPU's
/// GEMM correction, which measured that GPU's corpus stack: an H100 trace's GEMMs projected onto
/// H200 (the same compute, held at the same rate, faster memory) had come out 14 % slower. They
/// are the measured time × the ratio of the two GPUs' prices, never slower than measured.
#[test]
fn a_target_priced_by_another_gpus_fits_keeps_the_sources_gemm_stack() {
    let dir = scratch("h100-to-h200");
    let h100 = shared().join("tracelens/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz");
    let out = dir.join("r.json");
    // The projection of the trace onto `target`, and the rules that priced it.
    let projection = |target: &str| {
        let p = projection_onto(&h100, target, &out);
        let rules: Vec<String> = p["rules"].as_array().unwrap().iter().map(|r| r["rule"].as_str().unwrap().to_string()).collect();
        (p, rules)
    };
    let (p, rules) = projection("h200");
    assert!(p["target_fits"].as_str().unwrap().starts_with("no traces of h200"), "{p}");
    let gemm = p["classes"].as_array().unwrap().iter().find(|c| c["class"] == "gemm").unwrap();
    let ratio = gemm["projected_us"].as_f64().unwrap() / gemm["measured_us"].as_f64().unwrap();
    assert!(ratio > 0.9 && ratio <= 1.0, "H200 ÷ H100 GEMM time {ratio}");
    assert!(!rules.iter().any(|r| r == "gemm_target_table"), "{rules:?}");
    // Across vendors the lender's correction is what is known of the target's libraries: MI325X,
    // priced by MI300X's fits, keeps it (without it the H100 trace's GEMMs had gone 38.5 → 86.0 ms
    // on MI325X, where MI300X measured 54.1 on this model).
    let (p, rules) = projection("mi325x");
    assert!(p["target_fits"].as_str().unwrap().starts_with("no traces of mi325x"), "{p}");
    assert!(rules.iter().any(|r| r == "gemm_target_table"), "{rules:?}");
}

/// `--device` names the GPU of a Kineto trace that records none (HTA's sampled H100 rank has no
/// `deviceProperties`): its GEMMs are fitted against that GPU's peak. It had been ignored for
/// Kineto traces ("Device not recorded", every sample "device peak unknown"). A trace that
/// records its GPU keeps it and says the option was not applied.
#[test]
fn device_names_the_gpu_of_a_kineto_trace_that_records_none() {
    let dir = scratch("device-kineto");
    let sampled = shared().join("hta/trace_filter/sampled_rank-0.json.gz");
    let out = dir.join("p.json");
    let o = run(&["calibrate".as_ref(), sampled.as_os_str(), "--out".as_ref(), out.as_os_str(), "--device".as_ref(), "h100-sxm".as_ref()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Device h100-sxm (1 trace file(s); --device names the GPU of those that record none)"), "{text}");
    assert!(!text.contains("device peak unknown"), "{text}");
    let profile: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(profile["device"]["catalog_id"], "h100-sxm");
    assert!(profile["kernels"].as_array().unwrap().iter().any(|k| k["class"] == "gemm"), "{profile}");
    // A V100 trace given another GPU: the V100 kept, and said.
    let v100 = shared().join("kineto/tb_plugin_samples/resnet50_num_workers_0/worker0.1623143566756.pt.trace.json.gz");
    let o = run(&["analyze".as_ref(), v100.as_os_str(), "--device".as_ref(), "mi300x".as_ref()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("--device not applied: the trace records \"Tesla V100-DGXS-32GB\""), "{text}");
    assert!(text.contains("Tesla V100-DGXS-32GB"), "{text}");
    // `calibrate` says it too, in the profile it writes (it had written the V100's without a word).
    let o = run(&["calibrate".as_ref(), v100.as_os_str(), "--out".as_ref(), out.as_os_str(), "--device".as_ref(), "mi300x".as_ref()]);
    let text = String::from_utf8_lossy(&o.stdout);
    let said = "rank 0: --device not applied: the trace records \"Tesla V100-DGXS-32GB\"";
    assert!(text.contains(said), "{text}");
    let profile: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(profile["notes"].as_array().unwrap().iter().any(|n| n == said), "{profile}");
    // A CPU-only rank (gloo) ran on no GPU: none is given to it.
    let cpu = shared().join("hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
    let o = run(&[
        "analyze".as_ref(),
        cpu.as_os_str(),
        "--device".as_ref(),
        "h100-sxm".as_ref(),
        "--json".as_ref(),
        "-".as_ref(),
        "-q".as_ref(),
    ]);
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(d["jobs"][0]["ranks"][0]["device"].is_null(), "{}", d["jobs"][0]["ranks"][0]["device"]);
}

#[test]
fn gemms_held_to_the_targets_sustained_rate_are_said_to_be() {
    // Known truth: B's GEMMs at 0.95 of H100's peak, past the 665.7 TFLOP/s a busy H100 holds.
    // Projected through B's profile, A's GEMMs stop at that rate: said, where it had been silent
    // (a faster truth then predicted 14 % slow with no word). At 0.6 nothing is held.
    let dir = scratch("held-to-sustained");
    let (a, fast, slow) = (dir.join("a"), dir.join("fast"), dir.join("slow"));
    synth(&a, &[]);
    let note = |truth: &Path, efficiency: &str| -> String {
        synth(truth, &["--gemm-efficiency", efficiency]);
        let profile = dir.join(format!("{efficiency}.json"));
        let o = run(&["calibrate".as_ref(), truth.as_os_str(), "-q".as_ref(), "--out".as_ref(), profile.as_os_str()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let o =
            run(&["replay".as_ref(), a.as_os_str(), "--target".as_ref(), "h100-sxm".as_ref(), "--profile".as_ref(), profile.as_os_str()]);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let text = note(&fast, "0.95");
    assert!(
        text.contains("GEMM kernel(s)") && text.contains("at a bound of h100-sxm: the rate it sustains under load (665.7 TFLOP/s"),
        "{text}"
    );
    assert!(!note(&slow, "0.6").contains("at a bound of"));
}

#[test]
fn kernels_the_target_has_no_peak_for_are_kept_and_said_so() {
    // An A100 job's FP32 GEMMs onto Gaudi 2, whose datasheet (and catalog entry) gives BF16
    // alone: kept at their measured time under a rule that says why, not "no work model".
    let trace = shared().join("hta/trace_diff/control/control.json.gz");
    let o = run(&["replay".as_ref(), trace.as_os_str(), "--target".as_ref(), "gaudi2".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let row = text.lines().find(|l| l.contains("has no peak for the op's number format")).unwrap_or_else(|| panic!("{text}"));
    let kernels: usize = row.split_whitespace().next().unwrap().parse().unwrap();
    assert!(kernels > 100, "{row}");
    // Onto a GPU with an FP32 peak the same kernels are priced.
    let o = run(&["replay".as_ref(), trace.as_os_str(), "--target".as_ref(), "h100-sxm".as_ref()]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("has no peak for"), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn the_critical_path_starts_with_the_first_analysed_step() {
    // Three alike steps: from step 3 the path covers a third of what it covers from step 1
    // (it had started at step 1 whatever --steps chose).
    let dir = scratch("critical-path-steps");
    let job = dir.join("job");
    synth(&job, &["--steps", "3"]);
    let path_us = |steps: &str| -> f64 {
        let out = dir.join(format!("{steps}.json"));
        let o = bin()
            .args([
                "replay".as_ref(),
                job.as_os_str(),
                "-q".as_ref(),
                "--json".as_ref(),
                out.as_os_str(),
                "--steps".as_ref(),
                steps.as_ref(),
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        json(&out)["jobs"][0]["critical_path"]["total_us"].as_f64().unwrap()
    };
    let (all, last) = (path_us("1-3"), path_us("3-3"));
    assert!((last / all - 1.0 / 3.0).abs() < 0.02, "{last} of {all}");
}

#[test]
fn analyze_and_replay_json_name_the_same_communication_kernels() {
    // DESIGN §3: a JSON document names the definition of communication it used; replay's had none.
    let dir = scratch("comm-kernels-named");
    let job = dir.join("job");
    synth(&job, &["--ranks", "2"]);
    let named = |command: &str, extra: &[&str]| -> String {
        let out = dir.join(format!("{command}{}.json", extra.len()));
        let o = bin()
            .args([command.as_ref(), job.as_os_str(), "-q".as_ref(), "--json".as_ref(), out.as_os_str()])
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{command}: {}", stderr(&o));
        json(&out)["comm_kernels"].as_str().unwrap_or_else(|| panic!("{command} --json names no comm_kernels")).to_string()
    };
    let nccl = ["--comm-kernels", "nccl"];
    assert_eq!(named("replay", &[]), named("analyze", &[]));
    assert_eq!(named("replay", &nccl), named("analyze", &nccl));
    assert_ne!(named("replay", &nccl), named("replay", &[]));
}

#[test]
fn steps_chosen_that_ran_no_gpu_work_are_analysed_as_nothing_by_every_command() {
    // AMD's MI250 sample: step 1 ran the GPU work, step 2 none. `--steps 2` had analysed the
    // whole window (step 1's work) under step 2's name in `analyze` and `diff` (8.912 ms),
    // where `replay` gave 0.
    let trace = shared().join("hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz");
    let dir = scratch("steps-without-work");
    let (analysed, replayed, diffed) = (dir.join("a.json"), dir.join("r.json"), dir.join("d.json"));
    let steps = ["--steps", "2"];
    let o = bin()
        .args(["analyze".as_ref(), trace.as_os_str(), "-q".as_ref(), "--json".as_ref(), analysed.as_os_str()])
        .args(steps)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let rank = &json(&analysed)["jobs"][0]["ranks"][0];
    assert_eq!(
        (rank["gpu_span_us"].as_f64(), rank["busy_us"].as_f64(), rank["window"].as_str()),
        (Some(0.0), Some(0.0), Some("steps")),
        "{}",
        rank["notes"]
    );
    assert!(rank["notes"].to_string().contains("the step 2 selected ran no GPU work on this rank"), "{}", rank["notes"]);
    let o = bin()
        .args(["replay".as_ref(), trace.as_os_str(), "-q".as_ref(), "--json".as_ref(), replayed.as_os_str()])
        .args(steps)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let job = &json(&replayed)["jobs"][0];
    assert_eq!(
        (job["ranks"][0]["gpu_span_us"].as_f64(), job["ranks"][0]["measured_step_us"].as_f64()),
        (Some(0.0), Some(0.0)),
        "{}",
        job["ranks"][0]
    );
    assert!(job["measured_job_step_us"].as_f64().unwrap().is_sign_positive(), "{}", job["measured_job_step_us"]);
    let o = bin()
        .args(["diff".as_ref(), trace.as_os_str(), trace.as_os_str(), "--json".as_ref(), diffed.as_os_str()])
        .args(steps)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let d = json(&diffed);
    let step = d["summary"].as_array().unwrap().iter().find(|r| r["name"] == "step").unwrap().clone();
    assert_eq!(step["time_a_us"].as_f64(), Some(0.0), "{step}");
    // Its per-class table counts the analysed (empty) window too, not the whole trace.
    assert_eq!(d["kernel_classes"].as_array().map(Vec::len), Some(0), "{}", d["kernel_classes"]);
    // And the report's timeline: no kernels of step 1 drawn under the analysis of step 2.
    let page = dir.join("r.html");
    let o =
        bin().args(["report".as_ref(), trace.as_os_str(), "-q".as_ref(), "--out".as_ref(), page.as_os_str()]).args(steps).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("GPU timeline of step 1") && html.contains("No timeline"), "the timeline of another step drawn");
}

/// A trace whose rank is not below its world size is kept and noted; the job's lines had said
/// "2 rank(s) read" and "not read: rank 1" beside a table of ranks 0 and 5, without a word of 5.
#[test]
fn a_rank_outside_its_world_is_named_beside_the_ranks_not_read() {
    let dir = scratch("rank-outside-world");
    let job = dir.join("job");
    synth(&job, &["--ranks", "2", "--steps", "2", "--layers", "2", "--plain"]);
    let second = job.join("rank-1.json");
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&second).unwrap()).unwrap();
    assert_eq!(doc["distributedInfo"]["world_size"], 2);
    doc["distributedInfo"]["rank"] = serde_json::json!(5);
    std::fs::write(&second, doc.to_string()).unwrap();
    let o = run(&["analyze".as_ref(), job.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("not read: rank 1 of the world's 2"), "{text}");
    assert!(text.contains("read but outside the world of 2: rank 5"), "{text}");
    assert!(text.contains("`distributedInfo.rank` 5 at byte"), "{text}");
}

#[test]
fn a_rank_cut_short_counts_as_its_share_of_the_steps_in_the_diff() {
    // Known truth: B's GEMMs run at 0.6 of A's efficiency (about 15 % more compute), and B's
    // rank 3 was cut short by a killed writer, keeping one of the three steps. Counted as a
    // whole rank, it had made B read as less busy than A and passed the gate.
    let dir = scratch("diff-cut-rank");
    let (a, b, same) = (dir.join("a"), dir.join("b"), dir.join("same"));
    for (out, efficiency) in [(&a, "0.7"), (&b, "0.6"), (&same, "0.7")] {
        synth(out, &["--seed", "3", "--gemm-efficiency", efficiency]);
    }
    for job in [&b, &same] {
        let gz = job.join("rank-3.json.gz");
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()), &mut text).unwrap();
        // After a whole event, a third of the way in: the writer killed mid-run.
        let cut = text[text.len() / 3..].find("\n{\"ph\"").unwrap() + text.len() / 3;
        std::fs::remove_file(&gz).unwrap();
        std::fs::write(job.join("rank-3.json"), &text[..cut]).unwrap();
    }
    let gate = ["--fail-if", "compute>+3%,busy>+3%"];
    let o = bin().args(["diff".as_ref(), a.as_os_str(), b.as_os_str()]).args(gate).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "the slower run fails the gate: {out}{}", stderr(&o));
    assert!(stderr(&o).contains("regression: compute changed by +1"), "{}", stderr(&o));
    assert!(
        out.contains(
            "note: B, rank 3 analysed 1 step(s) of GPU work where other ranks analysed 3: times per rank count it as 1/3 of a rank"
        ),
        "{out}"
    );
    assert!(out.contains("note: B, rank 3: the file ends after event"), "{out}");
    // The same run, cut alike: no change per rank.
    let json = dir.join("d.json");
    let o =
        bin().args(["diff".as_ref(), a.as_os_str(), same.as_os_str(), "--json".as_ref(), json.as_os_str()]).args(gate).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    let d: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for row in d["summary"].as_array().unwrap().iter().filter(|r| ["busy", "compute"].contains(&r["name"].as_str().unwrap())) {
        assert!(row["change"].as_f64().unwrap().abs() < 0.01, "{row}");
    }
}

/// Two runs profiled over different numbers of steps compare per analysed step: the same
/// synthetic job over 3 and over 5 steps (known truth: every step alike) had read as 67 % more
/// busy time and failed a `busy` gate. Over equal step counts the times stay per rank.
#[test]
fn diff_of_runs_over_different_step_counts_is_per_step() {
    let dir = scratch("diff-step-counts");
    let (three, five, again) = (dir.join("three"), dir.join("five"), dir.join("again"));
    for (out, steps) in [(&three, "3"), (&five, "5"), (&again, "3")] {
        let o = run(&[
            "synth".as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
            "-q".as_ref(),
            "--seed".as_ref(),
            "3".as_ref(),
            "--steps".as_ref(),
            steps.as_ref(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let json = dir.join("d.json");
    let o = run(&[
        "diff".as_ref(),
        three.as_os_str(),
        five.as_os_str(),
        "--json".as_ref(),
        json.as_os_str(),
        "--fail-if".as_ref(),
        "busy>+5%,compute>+5%".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("per rank and analysed step (A analysed 3 steps, B 5"));
    let d: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(d["per_step"], serde_json::json!([3, 5]));
    let gemm = d["kernel_classes"].as_array().unwrap().iter().find(|r| r["name"] == "gemm").unwrap().clone();
    assert_eq!(gemm["count_a"], gemm["count_b"], "{gemm}");
    // Steps matched in order: B's last two have no partner, said (they had gone unlisted in silence).
    assert_eq!(d["steps"].as_array().unwrap().len(), 3);
    let notes = d["notes"].to_string();
    assert!(notes.contains("B, steps 4–5 (2 of 5): no step of the other run to match, so not listed per step"), "{notes}");
    assert!(gemm["change"].as_f64().unwrap().abs() < 0.01, "{gemm}");
    // Whole windows, as --window all asks: the totals of 3 and 5 steps, and said (they had read
    // as a regression without a word).
    let o = run(&["diff".as_ref(), three.as_os_str(), five.as_os_str(), "--window".as_ref(), "all".as_ref()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("note: --window all compares whole windows, and A's holds 3 steps, B's 5: its times and counts grow"), "{text}");
    // The same step count: per rank, as before.
    let o = run(&["diff".as_ref(), three.as_os_str(), again.as_os_str(), "--json".as_ref(), json.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let d: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(d["per_step"].is_null(), "{}", d["per_step"]);
    assert_eq!(d["notes"], serde_json::json!([]));
    // A rank of B unreadable: the JSON says which and why, not only stderr (exit 2).
    std::fs::write(again.join("rank-2.json.gz"), b"not a trace").unwrap();
    let o = run(&["diff".as_ref(), three.as_os_str(), again.as_os_str(), "--json".as_ref(), json.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let d: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let notes = d["notes"].to_string();
    assert!(notes.contains("B, a file left out, the run compared without it: ") && notes.contains("rank-2.json.gz"), "{notes}");
    // The three-step job without its ProfilerStep annotations against the five-step one: totals
    // of unrelated windows, said, and no gate passes or fails on them (exit 2).
    let stepless = dir.join("stepless");
    std::fs::create_dir_all(&stepless).unwrap();
    for entry in std::fs::read_dir(&three).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read(&path).unwrap();
        let text = if path.extension().is_some_and(|e| e == "gz") {
            let mut s = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&text[..]), &mut s).unwrap();
            s
        } else {
            text
        };
        let mut trace: serde_json::Value = serde_json::from_slice(&text).unwrap();
        trace["traceEvents"].as_array_mut().unwrap().retain(|e| !e["name"].as_str().is_some_and(|n| n.starts_with("ProfilerStep")));
        let name = path.file_name().unwrap().to_string_lossy().trim_end_matches(".gz").to_string();
        std::fs::write(stepless.join(name), serde_json::to_vec(&trace).unwrap()).unwrap();
    }
    let o = run(&["diff".as_ref(), stepless.as_os_str(), five.as_os_str(), "--fail-if".as_ref(), "busy>+5%".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("note: A has no profiler steps (its whole GPU window is analysed) and B has 5"));
    // That says it: no second note of B's steps without a partner.
    assert!(!String::from_utf8_lossy(&o.stdout).contains("no step of the other run to match"));
    assert!(stderr(&o).contains("--fail-if: A has no profiler steps"), "{}", stderr(&o));
    // `--window all` on both: whole windows, as asked, compare (the same three steps' work, with
    // and without their annotations); only the `step` metric does not.
    let all = |gate: &str| {
        run(&[
            "diff".as_ref(),
            stepless.as_os_str(),
            three.as_os_str(),
            "--window".as_ref(),
            "all".as_ref(),
            "--fail-if".as_ref(),
            gate.as_ref(),
        ])
    };
    let o = all("busy>+1%");
    assert_eq!(o.status.code(), Some(0), "{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("note: A has no profiler steps: its `step` is its whole GPU window"));
    let o = all("step>+5%");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--fail-if: A has no profiler steps: its `step` is its whole GPU window"), "{}", stderr(&o));
    // Beside a gate that does not compare, one that does still says its regression (B, the
    // stepless copy, against A: the same work, so a negative bound fails).
    let o = run(&[
        "diff".as_ref(),
        three.as_os_str(),
        stepless.as_os_str(),
        "--window".as_ref(),
        "all".as_ref(),
        "--fail-if".as_ref(),
        "busy>-1%,step>+5%".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("regression: busy changed by"), "{}", stderr(&o));
    assert!(stderr(&o).contains("--fail-if: B has no profiler steps"), "{}", stderr(&o));
}

/// The idle split of each step's window is its share of the whole run's (the step windows
/// partition the run): ResNet-50's dataloader stall at the end of each step is host wait in
/// every window. Judged inside a step's window alone, the gap that the next step's first kernel
/// ends had been `other` (step 6: host wait 15.5 ms, other 60.9 ms; the whole run: other 0).
#[test]
fn each_steps_idle_split_is_its_share_of_the_runs() {
    let trace = shared().join("kineto/tb_plugin_samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz");
    let split = |window: &[&str]| {
        let mut args = vec!["analyze".as_ref(), trace.as_os_str(), "-q".as_ref(), "--json".as_ref(), "-".as_ref()];
        args.extend(window.iter().map(|s| std::ffi::OsStr::new(*s)));
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let rank = &d["jobs"][0]["ranks"][0];
        let s = &rank["idle_split"];
        let steps: Vec<i64> = rank["steps"].as_array().unwrap().iter().map(|s| s["step"].as_i64().unwrap()).collect();
        ([s["host_wait_us"].as_f64().unwrap(), s["kernel_wait_us"].as_f64().unwrap(), s["other_us"].as_f64().unwrap()], steps)
    };
    let (whole, steps) = split(&[]);
    assert!(steps.len() > 2, "{steps:?}");
    let mut sum = [0.0; 3];
    for step in &steps {
        let (part, _) = split(&["--steps", &step.to_string()]);
        for k in 0..3 {
            sum[k] += part[k];
        }
        // Each step's stall is the host's, not `other`.
        assert!(part[2] < 0.01 * part[0], "step {step}: {part:?}");
    }
    for k in 0..3 {
        assert!((sum[k] - whole[k]).abs() < 1e-6 * whole[0].max(1.0), "{k}: {sum:?} against the whole run's {whole:?}");
    }
}

/// A job's world size is one rule: declared, else its ranks — an unreadable file counted as
/// one — and never fewer than its highest rank + 1. Four ranks without `distributedInfo` ranks
/// or world, the second file cut short: ranks 0, 2 and 3 of a world of 4 (it had said 3); a lone
/// `rank-3.json`: a world of 4 (it had said 1).
#[test]
fn the_world_size_counts_unreadable_ranks_and_the_highest_rank() {
    let dir = scratch("world-rule");
    let job = dir.join("job");
    let o =
        run(&["synth".as_ref(), "--out".as_ref(), job.as_os_str(), "-q".as_ref(), "--plain".as_ref(), "--steps".as_ref(), "2".as_ref()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let positional = dir.join("positional");
    std::fs::create_dir_all(&positional).unwrap();
    for (i, name) in ["wa", "wb", "wc", "wd"].iter().enumerate() {
        let text = std::fs::read_to_string(job.join(format!("rank-{i}.json"))).unwrap();
        let undeclared = text.replacen(&format!("\"rank\": {i}, \"world_size\": 4, "), "", 1);
        assert_ne!(undeclared, text);
        let text = if *name == "wb" { undeclared[..200].to_string() } else { undeclared };
        std::fs::write(positional.join(format!("{name}.json")), text).unwrap();
        if i == 3 {
            std::fs::write(dir.join("rank-3.json"), std::fs::read(positional.join("wd.json")).unwrap()).unwrap();
        }
    }
    let header = |path: &std::path::Path, code: i32| {
        let o = run(&["analyze".as_ref(), path.as_os_str(), "--json".as_ref(), "-".as_ref(), "-q".as_ref()]);
        assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
        let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let job = &d["jobs"][0];
        let ranks: Vec<u64> = job["ranks"].as_array().unwrap().iter().map(|r| r["rank"].as_u64().unwrap()).collect();
        (ranks, job["world_size"].as_u64().unwrap())
    };
    assert_eq!(header(&positional, 2), (vec![0, 2, 3], 4));
    assert_eq!(header(&dir.join("rank-3.json"), 0), (vec![3], 4));
}

/// Ranks whose clocks disagree by hours but whose collectives match are one run: no "unrelated
/// runs" note (it had told a job of unsynchronised nodes to split itself with --each). Known
/// truth: a synthetic job of 2 ranks, rank 1's clock moved 2 h ahead.
#[test]
fn skewed_clocks_of_one_run_are_not_unrelated_runs() {
    let dir = scratch("skewed-clocks");
    let job = dir.join("job");
    let o = run(&[
        "synth".as_ref(),
        "--out".as_ref(),
        job.as_os_str(),
        "-q".as_ref(),
        "--plain".as_ref(),
        "--ranks".as_ref(),
        "2".as_ref(),
        "--steps".as_ref(),
        "2".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let path = job.join("rank-1.json");
    let mut trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for e in trace["traceEvents"].as_array_mut().unwrap() {
        if let Some(ts) = e["ts"].as_f64() {
            e["ts"] = serde_json::json!(ts + 2.0 * 3600e6);
        }
    }
    std::fs::write(&path, serde_json::to_vec(&trace).unwrap()).unwrap();
    for cmd in ["analyze", "replay"] {
        let o = run(&[cmd.as_ref(), job.as_os_str()]);
        assert_eq!(o.status.code(), Some(0), "{cmd}: {}", stderr(&o));
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
        assert!(!text.contains("unrelated runs"), "{cmd}: {text}");
    }
    // Its collectives moved ±1 ms each, alternately: a match the alignment does not bear out ties
    // nothing, and the 2 h apart are said again.
    let mut k = 0;
    for e in trace["traceEvents"].as_array_mut().unwrap() {
        if e["cat"] == "kernel" && e["name"].as_str().is_some_and(|n| n.starts_with("nccl")) {
            k += 1;
            e["ts"] = serde_json::json!(e["ts"].as_f64().unwrap() + if k % 2 == 0 { 1000.0 } else { -1000.0 });
        }
    }
    std::fs::write(&path, serde_json::to_vec(&trace).unwrap()).unwrap();
    for cmd in ["analyze", "replay"] {
        let o = run(&[cmd.as_ref(), job.as_os_str()]);
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
        assert!(text.contains("ranks of unrelated runs? their GPU windows start 2.0 h apart"), "{cmd}: {text}");
    }
}

/// `analyze` lists the five slowest ranks and says how many more the JSON holds (the list had
/// been cut without a word: 5 shown, 7 in the JSON), and says that the waits they caused are
/// lost only where no compute ran beside them (a job whose communication hides under compute
/// had shown more straggler GPU-hours than all its time outside compute).
#[test]
fn analyze_says_how_many_slowest_ranks_it_leaves_out_and_what_their_waits_cost() {
    let dir = scratch("stragglers-cut");
    let job = dir.join("job");
    synth(&job, &["--ranks", "16", "--steps", "3", "--seed", "7"]);
    let json_path = dir.join("a.json");
    let o = run(&["analyze".as_ref(), job.as_os_str(), "--json".as_ref(), json_path.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = json(&json_path)["jobs"][0]["stragglers"].as_array().unwrap().len();
    assert!(listed > 5, "{listed} stragglers");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("lost only where no compute ran beside it"), "{text}");
    let shown = text.lines().filter(|l| l.trim_start().starts_with("rank ") && l.contains("GPU-ms waited")).count();
    assert_eq!(shown, 5, "{text}");
    assert!(text.contains(&format!("  … and {} more rank(s) (--json and --csv list every one)", listed - 5)), "{text}");
    // Waits mostly hidden under compute are said to be more than the exposed time they can cost.
    let job_json = &json(&json_path)["jobs"][0];
    let waited: f64 = job_json["stragglers"].as_array().unwrap().iter().map(|s| s["wait_caused_us"].as_f64().unwrap()).sum();
    let exposed = job_json["totals"]["exposed_comm_us"].as_f64().unwrap();
    assert_eq!(text.contains("more than the job's"), waited > exposed, "{waited} {exposed}: {text}");
    assert!(waited > exposed, "this job's stragglers wait mostly under compute: {waited} {exposed}");
}

/// A GPU activity that starts far from the rest (a `ts` whose sign was lost) is said on its
/// rank, not analysed in silence as a rank idle for 2.9 billion seconds.
#[test]
fn a_gpu_activity_a_day_from_the_rest_is_said() {
    let dir = scratch("implausible-start");
    let mut doc: serde_json::Value = serde_json::from_str(&synthetic_trace()).unwrap();
    let (good, bad) = (dir.join("good.json"), dir.join("bad.json"));
    std::fs::write(&good, doc.to_string()).unwrap();
    let kernel = doc["traceEvents"].as_array_mut().unwrap().iter_mut().find(|e| e["cat"] == "kernel").unwrap();
    let ts = kernel["ts"].as_f64().unwrap();
    // Two days earlier than the rest: 48 h away from the median start of the trace's other kernels.
    kernel["ts"] = serde_json::json!(ts - 2.0 * 86_400e6);
    std::fs::write(&bad, doc.to_string()).unwrap();
    let said = |trace: &Path| {
        let o = run(&["analyze".as_ref(), trace.as_os_str(), "--window".as_ref(), "all".as_ref()]);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).lines().find(|l| l.contains("more than a day from the rest")).map(str::to_string)
    };
    assert_eq!(said(&good), None);
    let note = said(&bad).expect("the kernel two days early said");
    assert!(note.contains("1 GPU activity starts more than a day from the rest of the rank's") && note.contains("48.0 h away"), "{note}");
}

/// An output that another output of the same command also names, by a name the command derives
/// (`--fit fit.json` writes `fit.a100-80gb.json`; a `--csv` folder's `breakdown.csv`), had been
/// replaced by it in silence, exit 0; a file per GPU sent to `-` made files named `-.GPU`; two
/// input jobs of one rank had left one dataset of the later's ranks. Each is refused by name.
#[test]
fn one_command_writes_each_output_path_once() {
    let dir = scratch("outputs-once");
    let (a, b, ds) = (dir.join("a"), dir.join("b"), dir.join("ds"));
    synth(&a, &["--ranks", "2", "--steps", "1", "--layers", "1"]);
    synth(&b, &["--ranks", "2", "--steps", "1", "--layers", "1", "--seed", "5"]);
    // `--perfetto t.json.gz` of a second job writes `t.job2.json.gz`.
    let (timeline, json) = (dir.join("t.json.gz"), dir.join("t.job2.json.gz"));
    let o = run(&[
        "replay".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--each".as_ref(),
        "-q".as_ref(),
        "--perfetto".as_ref(),
        timeline.as_os_str(),
        "--json".as_ref(),
        json.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("t.job2.json.gz: cannot write: this command wrote it already"), "{}", stderr(&o));
    let o = run(&[
        "analyze".as_ref(),
        a.as_os_str(),
        "-q".as_ref(),
        "--csv".as_ref(),
        dir.join("csv").as_os_str(),
        "--json".as_ref(),
        dir.join("csv/breakdown.csv").as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("breakdown.csv: cannot write: this command wrote it already"), "{}", stderr(&o));
    let o = run(&["ingest".as_ref(), a.as_os_str(), b.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("rank-0.json.gz: rank 0 is also ") && stderr(&o).contains("another input of this ingest"),
        "{}",
        stderr(&o)
    );
    // The dataset holds the first job's ranks, whole, and says nothing of a stopped ingest.
    let o = run(&["diff".as_ref(), a.as_os_str(), ds.as_os_str(), "--fail-if".as_ref(), "step>+0%,busy>+0%".as_ref(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A chart folder where a file is found before any output is written: `--json` had replaced
/// its file before the charts found the folder could not be made.
#[test]
fn a_chart_folder_that_is_a_file_is_refused_before_anything_is_written() {
    let dir = scratch("plots-a-file");
    let job = dir.join("job");
    synth(&job, &["--ranks", "2", "--steps", "1", "--layers", "1"]);
    let (json, file) = (dir.join("a.json"), dir.join("afile"));
    std::fs::write(&json, "earlier").unwrap();
    std::fs::write(&file, "a file").unwrap();
    let o = run(&[
        "analyze".as_ref(),
        job.as_os_str(),
        "-q".as_ref(),
        "--json".as_ref(),
        json.as_os_str(),
        "--plots".as_ref(),
        file.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("afile is not a directory"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "earlier");
}

/// A trace of PyTorch's April 2024 profiler: the NCCL kernel carries no collective arguments,
/// the `record_param_comms` op around its launch does (TRACE-FORMAT §8). Their size and process
/// group had been left unknown; they read as they do from the kernel's own arguments.
#[test]
fn collective_arguments_of_the_launching_op_size_a_kernel_without_its_own() {
    let dir = scratch("record-param-comms");
    let comm_args = serde_json::json!({
        "Collective name": "allreduce", "In msg nelems": 1048576, "Out msg nelems": 1048576, "dtype": "Float",
        "Group size": 8, "Process Group Name": "0", "Process Group Description": "default_pg",
        "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"
    });
    let trace = |on_kernel: bool| {
        let mut events = Vec::new();
        for (step, t0) in [(5, 0i64), (6, 1000)] {
            let ts = |d: i64| 1_700_000_000_000_000i64 + t0 + d;
            let id = 20 + step;
            events.push(serde_json::json!({"ph": "X", "cat": "user_annotation", "name": format!("ProfilerStep#{step}"), "pid": 100, "tid": 100, "ts": ts(0), "dur": 900}));
            events.push(serde_json::json!({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 100, "tid": 100, "ts": ts(28), "dur": 10,
                "args": if on_kernel { serde_json::json!({"External id": id}) } else { let mut a = comm_args.clone(); a["External id"] = id.into(); a }}));
            events.push(serde_json::json!({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": ts(30), "dur": 5,
                "args": {"correlation": id, "External id": id}}));
            let mut args = if on_kernel { comm_args.clone() } else { serde_json::json!({}) };
            for (k, v) in [("device", 0), ("stream", 7), ("correlation", id), ("External id", id)] {
                args[k] = v.into();
            }
            events.push(serde_json::json!({"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
                "pid": 0, "tid": 7, "ts": ts(400), "dur": 200, "args": args}));
        }
        serde_json::json!({"traceEvents": events, "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8}})
    };
    let collectives = |on_kernel: bool| {
        let (t, out) = (dir.join(format!("{on_kernel}.json")), dir.join(format!("{on_kernel}.out.json")));
        std::fs::write(&t, trace(on_kernel).to_string()).unwrap();
        let o = run(&["analyze".as_ref(), t.as_os_str(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        doc["jobs"][0]["ranks"][0]["collectives"].clone()
    };
    let from_op = collectives(false);
    // Two all-reduces of 1 048 576 FP32 elements each.
    assert_eq!(from_op[0]["bytes"], 2 * 1048576 * 4, "{from_op}");
    assert_eq!(from_op[0]["process_group"], "0 (default_pg)", "{from_op}");
    assert_eq!(from_op, collectives(true));
}

/// A time beyond what the analyses hold (past 2116: a damaged timestamp or a wrong unit) was
/// held at that edge in silence; every such event then read as one instant.
#[test]
fn a_time_held_at_the_edge_of_the_range_is_said() {
    let dir = scratch("clamped-time");
    let mut doc: serde_json::Value = serde_json::from_str(&synthetic_trace()).unwrap();
    let (good, bad) = (dir.join("good.json"), dir.join("bad.json"));
    std::fs::write(&good, doc.to_string()).unwrap();
    // A base of 5e18 ns (2128): every event's time past the edge.
    doc["baseTimeNanoseconds"] = serde_json::json!(5_000_000_000_000_000_000i64);
    std::fs::write(&bad, doc.to_string()).unwrap();
    let said = |trace: &Path| {
        let o = run(&["analyze".as_ref(), trace.as_os_str(), "--window".as_ref(), "all".as_ref()]);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).lines().find(|l| l.contains("outside the years 1933–2116")).map(str::to_string)
    };
    assert_eq!(said(&good), None);
    assert!(said(&bad).expect("the held time said").contains("event(s) at a time outside the years 1933–2116"));
}

/// A `deviceProperties` number that is not one (`"numSms": "lots"`, a negative memory) had read as
/// missing without a word; it is said, naming the key.
#[test]
fn an_unreadable_device_property_is_said() {
    let dir = scratch("device-property");
    let mut doc: serde_json::Value = serde_json::from_str(&synthetic_trace()).unwrap();
    let (good, bad) = (dir.join("good.json"), dir.join("bad.json"));
    doc["deviceProperties"] = serde_json::json!([{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85017755648u64, "computeMajor": 9, "computeMinor": 0, "numSms": 132}]);
    std::fs::write(&good, doc.to_string()).unwrap();
    doc["deviceProperties"][0]["numSms"] = serde_json::json!("lots");
    doc["deviceProperties"][0]["totalGlobalMem"] = serde_json::json!(-1);
    std::fs::write(&bad, doc.to_string()).unwrap();
    let said = |trace: &Path| {
        let o = run(&["analyze".as_ref(), trace.as_os_str()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(text.contains("H100"), "the GPU still matched by its name: {text}");
        text.lines().find(|l| l.contains("not a whole number at or above zero")).map(str::to_string)
    };
    assert_eq!(said(&good), None);
    let note = said(&bad).expect("the unreadable numbers said");
    assert!(note.contains("`deviceProperties[0]`") && note.contains("`totalGlobalMem`, `numSms` are"), "{note}");
}

/// A kernel row given twice (same name, stream, start and duration: a writer's duplicate) is
/// said: it counts twice in per-kernel and per-class times.
#[test]
fn a_gpu_activity_recorded_twice_is_said() {
    let dir = scratch("duplicate-activity");
    let mut doc: serde_json::Value = serde_json::from_str(&synthetic_trace()).unwrap();
    let (good, bad) = (dir.join("good.json"), dir.join("bad.json"));
    std::fs::write(&good, doc.to_string()).unwrap();
    let events = doc["traceEvents"].as_array_mut().unwrap();
    let kernel = events.iter().find(|e| e["cat"] == "kernel").unwrap().clone();
    events.push(kernel);
    std::fs::write(&bad, doc.to_string()).unwrap();
    let said = |trace: &Path| {
        let o = run(&["analyze".as_ref(), trace.as_os_str(), "--window".as_ref(), "all".as_ref()]);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).lines().find(|l| l.contains("repeats another row")).map(str::to_string)
    };
    assert_eq!(said(&good), None);
    let note = said(&bad).expect("the duplicated kernel said");
    assert!(note.contains("1 GPU activity repeats another row (the same name, stream, start and duration"), "{note}");
}

/// A GPU activity longer than anything runs (a kernel of 11.6 days: a unit or clock error) is
/// said, not analysed in silence as a rank 100 % busy.
#[test]
fn a_gpu_activity_longer_than_an_hour_is_said() {
    let dir = scratch("implausible-duration");
    let mut doc: serde_json::Value = serde_json::from_str(&synthetic_trace()).unwrap();
    let (good, bad) = (dir.join("good.json"), dir.join("bad.json"));
    std::fs::write(&good, doc.to_string()).unwrap();
    let kernel = doc["traceEvents"].as_array_mut().unwrap().iter_mut().find(|e| e["cat"] == "kernel").unwrap();
    kernel["dur"] = serde_json::json!(1e12);
    std::fs::write(&bad, doc.to_string()).unwrap();
    let said = |trace: &Path| {
        let o = run(&["analyze".as_ref(), trace.as_os_str(), "--window".as_ref(), "all".as_ref()]);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).lines().find(|l| l.contains("longer than an hour")).map(str::to_string)
    };
    assert_eq!(said(&good), None);
    let note = said(&bad).expect("the 11.6-day kernel said");
    assert!(note.contains("1 GPU activity lasts longer than an hour") && note.contains("277.8 h"), "{note}");
    // Ingested with --device, the dataset keeps it (the trace as recorded had been taken before it was said).
    let ds = dir.join("bad.tcds");
    let o = run(&[
        "ingest".as_ref(),
        bad.as_os_str(),
        "--device".as_ref(),
        "h100-sxm".as_ref(),
        "--out".as_ref(),
        ds.as_os_str(),
        "-q".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(said(&ds), Some(note));
}

/// `--source-profile`: the GPU the traces ran on fitted like the target (on other runs of it),
/// as README's leave-one-out table is priced. Through the command line the source side had
/// been calibrated on the held-out trace itself: MI300X → H100 BERT-small +20 % against the
/// table's +2.9 % (8 projections: 8.9 % against 6.3 %). A profile of another GPU is said and
/// not used.
#[test]
fn a_source_profile_prices_the_traces_gpu_as_the_targets_is_priced() {
    let dir = scratch("source-profile");
    let models = [
        "Falconsai_nsfw_image_detection__1016002.json.gz",
        "facebook_timesformer-base-finetuned-k400__1016002.json.gz",
        "google_owlv2-large-patch14-ensemble__1016001.json.gz",
    ];
    let held_out = "gaunernst_bert-small-uncased__1016001.json.gz";
    let profile = |gpu: &str| {
        let out = dir.join(format!("{gpu}.json"));
        let mut args: Vec<std::ffi::OsString> = vec!["calibrate".into(), "-q".into(), "--out".into(), out.clone().into()];
        args.extend(models.iter().map(|m| shared().join("tracelens").join(gpu).join(m).into_os_string()));
        let o = bin().args(&args).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        out
    };
    let (h100, mi300) = (profile("h100"), profile("mi300"));
    let busy = |p: &Path| json(p)["jobs"][0]["totals"]["busy_us"].as_f64().unwrap();
    let measured = dir.join("measured.json");
    let held = |gpu: &str| shared().join("tracelens").join(gpu).join(held_out);
    assert!(run(&["analyze".as_ref(), held("h100").as_os_str(), "-q".as_ref(), "--json".as_ref(), measured.as_os_str()]).status.success());
    let projected = |source: Option<&Path>| {
        let out = dir.join("projected.json");
        let trace = held("mi300");
        let mut args: Vec<&std::ffi::OsStr> = vec!["replay".as_ref(), trace.as_os_str(), "--target".as_ref(), "h100-sxm".as_ref()];
        args.extend(["--profile".as_ref(), h100.as_os_str(), "--json".as_ref(), out.as_os_str()]);
        if let Some(s) = source {
            args.extend(["--source-profile".as_ref(), s.as_os_str()]);
        }
        let o = run(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let doc = json(&out);
        (doc["jobs"][0]["totals"]["replayed"]["busy_us"].as_f64().unwrap(), doc["jobs"][0]["notes"].to_string())
    };
    let want = busy(&measured);
    let error = |got: f64| (got / want - 1.0).abs();
    let ((own, own_notes), (fitted, fitted_notes)) = (projected(None), projected(Some(&mi300)));
    assert!(error(fitted) < 0.05 && error(own) > 0.1, "measured {want} µs; own calibration {own}, source profile {fitted}");
    // The GEMMs the target's table and correction price do not read the source side: said where
    // a source profile was given (the flag had read as if it moved them).
    assert!(
        fitted_notes.contains("--source-profile: ") && fitted_notes.contains("priced at the target's table × its traces' correction"),
        "{fitted_notes}"
    );
    assert!(!own_notes.contains("--source-profile"), "{own_notes}");
    // The H100 profile as the MI300X trace's source: said, and the trace's own calibration kept.
    let (other, notes) = projected(Some(&h100));
    assert!(notes.contains("the source profile is of h100-sxm, the traces ran on mi300x: not used"), "{notes}");
    assert!(!notes.contains("--source-profile: "), "{notes}");
    assert_eq!(other, own);
    // A job of both GPUs: the profile fits one rank only, whichever comes first.
    let out = dir.join("mixed.json");
    let (a, b) = (held("mi300"), held("h100"));
    let o = run(&[
        "replay".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--target".as_ref(),
        "b200".as_ref(),
        "--source-profile".as_ref(),
        mi300.as_os_str(),
        "--json".as_ref(),
        out.as_os_str(),
        "-q".as_ref(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let notes = json(&out)["jobs"][0]["notes"].to_string();
    assert!(notes.contains("the source profile is of mi300x, the traces ran on ") && notes.contains(": not used"), "{notes}");
    // The page's projection the same: the page's own calibration where the profile is not the
    // job's GPU's (the projection had been the measured run, 1.000×).
    let page = dir.join("r.html");
    let o = run(&[
        "report".as_ref(),
        held("mi300").as_os_str(),
        "--target".as_ref(),
        "h100-sxm".as_ref(),
        "--source-profile".as_ref(),
        h100.as_os_str(),
        "--out".as_ref(),
        page.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("the source profile is of h100-sxm, the traces ran on mi300x: not used"), "note");
    assert!(!html.contains("the trace records no GPU the catalog knows"), "the page's projection lost its source GPU");
}

/// A trace that lost its launches (HTA's sampled `trace_filter`: 578 of rank 0's GPU starts
/// explained by nothing, 860 ms) had been called host-bound without a word of it.
#[test]
fn a_host_bound_verdict_says_when_unexplained_gpu_starts_fill_the_path() {
    let o = run(&["replay".as_ref(), shared().join("hta/trace_filter").as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let note = text.lines().find(|l| l.contains("the host bounds the step")).unwrap_or_else(|| panic!("{text}"));
    // The whole trace's waits (860.259 ms, as the graph line counts them) within the path's span.
    assert!(text.contains("unexplained 578 (860.259 ms)"), "{text}");
    assert!(
        note.contains("GPU starts that nothing in the trace explains wait 860.259 ms on one rank within the time the path spans"),
        "{note}"
    );
    assert!(note.contains("can look host-bound without being so"), "{note}");
    // One step of two: only the waits within its path's span, never more than that span
    // (the whole trace's 860 ms had been put at 136 % of it).
    let o = run(&["replay".as_ref(), shared().join("hta/trace_filter").as_os_str(), "--steps".as_ref(), "551".as_ref()]);
    let text = String::from_utf8_lossy(&o.stdout);
    let note = text.lines().find(|l| l.contains("the host bounds the step")).unwrap_or_else(|| panic!("{text}"));
    let share: f64 = note
        .split("path spans (")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{note}"));
    assert!(share > 10.0 && share <= 100.0, "{note}");
    let waited: f64 = note.split("explains wait ").nth(1).and_then(|t| t.split(' ').next()).and_then(|t| t.parse().ok()).unwrap();
    assert!(waited < 860.0, "{note}");
}

/// `replay`'s table says its times are per step, and its GPU busy time that it is summed over the
/// ranks (`diff` gives that per rank: the two had read as 4× apart).
#[test]
fn replay_says_what_its_times_are_of() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let o = run(&["replay".as_ref(), demo.as_os_str(), "--scale".as_ref(), "compute=2".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(" measured ms/step  replayed ms/step"), "{text}");
    assert!(text.contains("GPU busy time, summed over the 4 ranks: measured"), "{text}");
    // A job without steps: each rank's whole window, not "per step".
    let export = shared().join("nsys/h100_2gpu_1s.sqlite");
    let o = run(&["replay".as_ref(), export.as_os_str()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("     window ") && text.contains(" measured ms       replayed ms") && !text.contains("ms/step"), "{text}");
}

/// A stream holds one job's timeline: `--perfetto -` and a device such as `/dev/null` (as
/// `/dev/stdout` is) refuse a second job, naming what to give instead (a device had been
/// written beside, `/dev/null.job2`).
#[test]
fn a_perfetto_stream_refuses_a_second_job() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let control = shared().join("hta/trace_diff/control/control.json.gz");
    for stream in ["-", "/dev/null"] {
        let o = run(&["replay".as_ref(), demo.as_os_str(), control.as_os_str(), "--perfetto".as_ref(), stream.as_ref(), "-q".as_ref()]);
        assert!(!o.status.success(), "{stream}");
        let want = format!("--perfetto {stream}: a stream holds one job's timeline, and 2 jobs were given: give a file");
        assert!(stderr(&o).contains(&want), "{stream}: {}", stderr(&o));
    }
}

/// `analyze --each` names a file that gave no job in its JSON too (it had been on stderr alone:
/// the JSON listed the one job read and nothing of the other).
#[test]
fn analyze_each_names_a_job_it_could_not_read_in_its_json() {
    let dir = scratch("each-unread");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    std::fs::copy(demo.join("rank-0.json.gz"), dir.join("a.json.gz")).unwrap();
    let bytes = std::fs::read(demo.join("rank-1.json.gz")).unwrap();
    std::fs::write(dir.join("b.json.gz"), &bytes[..300]).unwrap();
    let out = scratch("each-unread-out").join("a.json");
    let o = run(&["analyze".as_ref(), dir.as_os_str(), "--each".as_ref(), "-q".as_ref(), "--json".as_ref(), out.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let v = json(&out);
    assert_eq!(v["jobs"].as_array().unwrap().len(), 1);
    let unread = v["unread_jobs"].as_array().unwrap();
    assert_eq!(unread.len(), 1, "{unread:?}");
    assert!(
        unread[0]["path"].as_str().unwrap().ends_with("b.json.gz") && unread[0]["error"].as_str().unwrap().contains("gzip"),
        "{unread:?}"
    );
}

/// A profile says the rank files its fit could not read (they had been named on stderr alone).
#[test]
fn a_profile_names_the_rank_files_it_could_not_read() {
    let dir = scratch("calibrate-left-out");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    for r in 0..4 {
        let name = format!("rank-{r}.json.gz");
        let bytes = std::fs::read(demo.join(&name)).unwrap();
        std::fs::write(dir.join(&name), if r == 3 { &bytes[..300] } else { &bytes[..] }).unwrap();
    }
    let out = scratch("calibrate-left-out-profile").join("p.json");
    let o = run(&["calibrate".as_ref(), dir.as_os_str(), "--out".as_ref(), out.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let notes = json(&out)["notes"].to_string();
    assert!(notes.contains("not fitted on 1 rank file(s) that could not be read: ") && notes.contains("rank-3.json.gz"), "{notes}");
}

/// `synth` prints the truth it made the traces from (it printed their names alone: a user could
/// not check a straggler or a clock offset against anything), and `analyze` recovers it.
#[test]
fn synth_says_its_truth_and_analyze_recovers_it() {
    let dir = scratch("synth-truth");
    let job = dir.join("job");
    let o = run(&["synth".as_ref(), "--out".as_ref(), job.as_os_str(), "--seed".as_ref(), "3".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(text.contains("truth: GEMM η 0.700") && text.contains("all-reduce α 15 µs, bus bandwidth 150 GB/s"), "{text}");
    // "  rank R: ±offset µs, loading µs, N time(s), W GPU-ms"
    let truth: Vec<(f64, u64, f64)> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("rank "))
        .map(|l| {
            let fields: Vec<&str> = l.split([':', ',']).map(str::trim).collect();
            let num = |s: &str| s.split_whitespace().next().unwrap().parse::<f64>().unwrap();
            (num(fields[1]), num(fields[3]) as u64, num(fields[4]))
        })
        .collect();
    assert_eq!(truth.len(), 4, "{text}");
    let out = dir.join("a.json");
    let o = run(&["analyze".as_ref(), job.as_os_str(), "-q".as_ref(), "--json".as_ref(), out.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j = &json(&out)["jobs"][0];
    for (rank, (offset_us, times_last, wait_ms)) in truth.iter().enumerate() {
        let found = j["ranks"][rank]["clock_offset_us"].as_f64().unwrap();
        assert!((found - offset_us).abs() < 0.1, "rank {rank}: offset {found} vs {offset_us}");
        let s = j["stragglers"].as_array().unwrap().iter().find(|s| s["rank"] == rank as u64);
        let (last, wait) = s.map_or((0, 0.0), |s| (s["times_last"].as_u64().unwrap(), s["wait_caused_us"].as_f64().unwrap() / 1000.0));
        assert_eq!(last, *times_last, "rank {rank}");
        assert!((wait - wait_ms).abs() <= 0.01 * wait_ms + 0.002, "rank {rank}: wait {wait} vs {wait_ms} ms");
    }
}

/// A job missing some of its world's ranks names them under its header (one missing rank 0 had
/// read as whole but for the count of ranks read); a whole job says nothing of it.
#[test]
fn the_ranks_a_job_lacks_are_named() {
    let dir = scratch("ranks-not-read");
    let o = run(&["synth".as_ref(), "-q".as_ref(), "--out".as_ref(), dir.as_os_str(), "--ranks".as_ref(), "3".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let analyze = || String::from_utf8_lossy(&run(&["analyze".as_ref(), dir.as_os_str()]).stdout).into_owned();
    assert!(!analyze().contains("not read:"));
    std::fs::remove_file(dir.join("rank-0.json.gz")).unwrap();
    let text = analyze();
    assert!(text.contains("not read: rank 0 of the world's 3 (the totals are of the ranks read)"), "{text}");
    // By which ranks, not how many: a rank numbered past the world stands in for none of it.
    let plain = scratch("ranks-not-read-past");
    let o =
        run(&["synth".as_ref(), "-q".as_ref(), "--plain".as_ref(), "--out".as_ref(), plain.as_os_str(), "--ranks".as_ref(), "3".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let two = std::fs::read_to_string(plain.join("rank-2.json")).unwrap();
    assert!(two.contains("\"rank\": 2,"));
    std::fs::write(plain.join("rank-5.json"), two.replace("\"rank\": 2,", "\"rank\": 5,")).unwrap();
    std::fs::remove_file(plain.join("rank-2.json")).unwrap();
    let text = String::from_utf8_lossy(&run(&["analyze".as_ref(), plain.as_os_str()]).stdout).into_owned();
    assert!(text.contains("3 rank(s) read, world size 3") && text.contains("not read: rank 2 of the world's 3"), "{text}");
}

/// A clock alignment whose residual exceeds the matched collectives' transfers says so where it
/// is printed and in its JSON (HTA's sampled ranks: 111 ms RMS under an unqualified "Clocks
/// aligned", the doubt only among rank 0's notes); an alignment that holds says nothing more.
#[test]
fn a_doubtful_clock_alignment_is_said_where_it_is_printed() {
    let dir = scratch("doubtful-clocks");
    for (job, doubted) in [(shared().join("hta/trace_filter"), true), (Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo"), false)]
    {
        let out = dir.join("a.json");
        let o = run(&["analyze".as_ref(), job.as_os_str(), "--json".as_ref(), out.as_os_str()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout);
        let line = text.lines().find(|l| l.starts_with("Clocks aligned on")).unwrap_or_else(|| panic!("{text}"));
        assert_eq!(line.contains("may pair unrelated kernels"), doubted, "{line}");
        let alignment = &json(&out)["jobs"][0]["clock_alignment"];
        assert_eq!(alignment["doubtful"].as_str().is_some_and(|d| d.contains("do not end together")), doubted, "{alignment}");
    }
}

/// An output path that is one of the command's inputs (a profile, a runs file) or a folder is
/// refused before the work: `project`, `search`, `replay` and `validate` had printed their whole
/// result first, and `analyze` and `diff` had done so for a folder.
#[test]
fn outputs_that_cannot_be_written_are_refused_before_the_work() {
    let dir = scratch("outputs-before-work");
    let job = dir.join("job");
    synth(&job, &["--ranks", "2", "--steps", "2"]);
    let profile = dir.join("profile.json");
    let o = bin().args(["calibrate", "-q"]).arg(&job).arg("--out").arg(&profile).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let runs = dir.join("runs.json");
    std::fs::copy(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/h200/runs.json"), &runs).unwrap();
    let folder = dir.join("folder");
    std::fs::create_dir_all(&folder).unwrap();
    let from = std::ffi::OsString::from(format!("{}:llama3-8b-4l-seq8192", runs.display()));
    let (p, r, f, j) = (profile.as_os_str(), runs.as_os_str(), folder.as_os_str(), job.as_os_str());
    let model = ["--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8"].map(std::ffi::OsStr::new);
    let cases: Vec<(Vec<&std::ffi::OsStr>, &str)> = vec![
        ([&["project".as_ref()][..], &model, &["--profile".as_ref(), p, "--json".as_ref(), p]].concat(), "it is an input of this command"),
        ([&["search".as_ref()][..], &model, &["--profile".as_ref(), p, "--json".as_ref(), p]].concat(), "it is an input of this command"),
        (
            vec!["replay".as_ref(), j, "--target".as_ref(), "h100-sxm".as_ref(), "--profile".as_ref(), p, "--json".as_ref(), p],
            "it is an input",
        ),
        (vec!["validate".as_ref(), r, "--json".as_ref(), r], "it is an input of this command"),
        (
            vec!["project".as_ref(), "--from".as_ref(), &from, "--system".as_ref(), "h100-sxm".as_ref(), "--json".as_ref(), r],
            "it is an input of this command",
        ),
        (vec!["analyze".as_ref(), j, "--json".as_ref(), f], "a directory is in its place"),
        (vec!["diff".as_ref(), j, j, "--json".as_ref(), f], "a directory is in its place"),
    ];
    for (args, says) in cases {
        let o = bin().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&o.stdout));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}

/// A negative number given without `=` is read as the option's value and refused as one (it
/// had been "unexpected argument '-1'", telling the user to write `-- -1`).
#[test]
fn a_negative_number_is_refused_as_the_options_value() {
    let os = std::ffi::OsStr::new;
    let job = shared().join("hta/trace_diff/control/control.json.gz");
    for (args, says) in [
        (vec![os("analyze"), job.as_os_str(), os("--kernel-wait-us"), os("-1")], "invalid value '-1' for '--kernel-wait-us <US>'"),
        (
            vec![os("project"), os("--model"), os("llama2-7b"), os("--system"), os("h100-sxm"), os("--gpus"), os("-8")],
            "invalid value '-8' for '--gpus <N>'",
        ),
        (vec![os("replay"), job.as_os_str(), os("--world-size"), os("-2")], "invalid value '-2' for '--world-size <N>'"),
        (
            [
                &["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8"].map(os)[..],
                &[os("--nic-gbps-per-gpu"), os("-5")],
            ]
            .concat(),
            "nic_gbps_per_gpu -5",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}

/// Kernels that ran in less than the source GPU's short-kernel time were raised to the
/// target's by the roofline rule: MI300X → MI325X (one silicon, one short-kernel time) priced a
/// 1.96 µs integer add at 4.64 µs, B200 → GB200 a 2.08 µs one at B200's 2.78 µs, on GPUs no slower.
#[test]
fn a_kernel_faster_than_the_short_kernel_time_is_not_raised_to_it_on_another_gpu() {
    let dir = scratch("latency-carried");
    for (trace, target) in
        [("tracelens/inference/vllm_decode_full/graph_execution.json.gz", "mi325x"), ("tracelens/b200/eager_trace.json.gz", "gb200")]
    {
        let projection = projection_onto(&shared().join(trace), target, &dir.join(format!("{target}.json")));
        let rules = projection["rules"].as_array().unwrap().clone();
        let roofline = rules.iter().find(|r| r["rule"] == "roofline_peaks").unwrap_or_else(|| panic!("{target}: {rules:?}"));
        let (measured, projected) = (roofline["measured_us"].as_f64().unwrap(), roofline["projected_us"].as_f64().unwrap());
        assert!(projected <= measured * (1.0 + 1e-9), "{target}: {measured} µs measured, {projected} projected");
    }
}

/// GEMMs priced at the target's table cost the same on every rank: a same-GPU replay with the
/// job's own profile lost the stragglers' waits (exposed communication 1.0 ms where the job
/// measured 2.3) without a word. Said where a job of several ranks is priced so.
#[test]
fn a_projection_that_prices_gemms_alike_on_every_rank_says_the_stragglers_do_not_carry() {
    let dir = scratch("stragglers");
    let (job, profile) = (dir.join("job"), dir.join("p.json"));
    synth(&job, &["--seed", "7"]);
    let o = run(&["calibrate".as_ref(), job.as_os_str(), "--out".as_ref(), profile.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let says = "priced at the target's table × its traces' correction cost the same on every rank: the measured differences between ranks (stragglers)";
    let o = run(&["replay".as_ref(), job.as_os_str(), "--target".as_ref(), "h100-sxm".as_ref(), "--profile".as_ref(), profile.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains(says), "{}", String::from_utf8_lossy(&o.stdout));
    // One rank has no other to differ from.
    let one = dir.join("job/rank-0.json.gz");
    let o = run(&["replay".as_ref(), one.as_os_str(), "--target".as_ref(), "h100-sxm".as_ref(), "--profile".as_ref(), profile.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains(says), "{}", String::from_utf8_lossy(&o.stdout));
}
