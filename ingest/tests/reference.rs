//! Checks the breakdown against an independent computation of the DESIGN §3
//! definitions on real traces from `../shared/traces`.
//!
//! The reference shares no code with the crate: it parses each file with a
//! plain owned serde struct, converts `ts`/`dur` text to ns by string
//! splitting, classifies by category and name, and measures unions with a
//! sweep over +1/−1 boundary events instead of merging intervals.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::value::RawValue;
use tracecast_ingest::analysis::{AnalyzeOptions, WindowMode, analyze_job};
use tracecast_ingest::{Job, ReadOptions};

fn shared(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces").join(rel)
}

#[derive(Deserialize)]
struct Event {
    ph: Option<String>,
    cat: Option<String>,
    name: Option<String>,
    ts: Option<Box<RawValue>>,
    dur: Option<Box<RawValue>>,
    args: Option<HashMap<String, serde_json::Value>>,
}

#[derive(Deserialize)]
struct File {
    #[serde(rename = "traceEvents")]
    trace_events: Vec<Event>,
}

/// "1712195495519689.047" → ns, by splitting at the point.
fn ns(raw: &RawValue) -> i64 {
    let text = raw.get();
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let mut frac: String = frac.chars().take(3).collect();
    while frac.len() < 3 {
        frac.push('0');
    }
    int.parse::<i64>().unwrap() * 1000 + frac.parse::<i64>().unwrap()
}

#[derive(Clone, Copy, PartialEq)]
enum Class {
    Compute,
    Comm,
    Memory,
}

struct Reference {
    span: i64,
    busy: i64,
    compute: i64,
    comm: i64,
    memory: i64,
    overlap: i64,
}

struct Parsed {
    activities: Vec<(i64, i64, Class, i64)>, // start, end, class, correlation
    runtime: HashMap<i64, i64>,              // correlation -> launch ts
    steps: Vec<(i64, i64)>,                  // CPU ProfilerStep annotations
}

fn parse(path: &Path) -> Parsed {
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap()).read_to_end(&mut text).unwrap();
    let file: File = serde_json::from_slice(&text).unwrap();
    let mut p = Parsed { activities: Vec::new(), runtime: HashMap::new(), steps: Vec::new() };
    let mut step_names = Vec::new();
    for e in file.trace_events {
        if e.ph.as_deref() != Some("X") {
            continue;
        }
        let cat = e.cat.unwrap_or_default().to_lowercase();
        let name = e.name.unwrap_or_default();
        let (Some(ts), Some(dur)) = (e.ts, e.dur) else { continue };
        let (start, d) = (ns(&ts), ns(&dur));
        let corr = e.args.as_ref().and_then(|a| a.get("correlation")).and_then(|v| v.as_i64()).unwrap_or(-1);
        let class = match cat.as_str() {
            "kernel" | "mtia_ccp_events" => {
                let comm = name.starts_with("nccl") && name[4..].contains("Kernel");
                Some(if comm { Class::Comm } else { Class::Compute })
            }
            "gpu_memcpy" | "gpu_memset" | "memcpy" | "memset" => Some(Class::Memory),
            _ => None,
        };
        if let Some(c) = class {
            p.activities.push((start, start + d, c, corr));
        } else if matches!(cat.as_str(), "cuda_runtime" | "cuda_driver" | "runtime") && corr >= 0 {
            p.runtime.entry(corr).or_insert(start);
        } else if (cat == "user_annotation" || cat == "operator") && name.starts_with("ProfilerStep#") && !step_names.contains(&name) {
            step_names.push(name);
            p.steps.push((start, start + d));
        }
    }
    p.steps.sort();
    p
}

/// Sweep over boundaries inside [lo, hi).
fn sweep(acts: &[(i64, i64, Class, i64)], lo: i64, hi: i64) -> Reference {
    let mut points: Vec<(i64, Class, i32)> = Vec::new();
    for &(s, e, c, _) in acts {
        let (s, e) = (s.max(lo), e.min(hi));
        if e > s {
            points.push((s, c, 1));
            points.push((e, c, -1));
        }
    }
    points.sort_by_key(|p| (p.0, p.2));
    let mut r = Reference { span: hi - lo, busy: 0, compute: 0, comm: 0, memory: 0, overlap: 0 };
    let (mut n_compute, mut n_comm, mut n_mem) = (0, 0, 0);
    let mut prev = lo;
    for (t, c, delta) in points {
        let dt = t - prev;
        if n_compute + n_comm + n_mem > 0 {
            r.busy += dt;
        }
        if n_compute > 0 {
            r.compute += dt;
        }
        if n_comm > 0 {
            r.comm += dt;
        }
        if n_mem > 0 {
            r.memory += dt;
        }
        if n_comm > 0 && n_compute > 0 {
            r.overlap += dt;
        }
        match c {
            Class::Compute => n_compute += delta,
            Class::Comm => n_comm += delta,
            Class::Memory => n_mem += delta,
        }
        prev = t;
    }
    r
}

fn close(what: &str, file: &Path, got_us: f64, want_ns: i64) {
    let want = want_ns as f64 / 1000.0;
    assert!((got_us - want).abs() <= 1e-6 * want.abs().max(1.0), "{}: {what}: tracecast {got_us} µs, reference {want} µs", file.display());
}

fn check(files: &[&str], window: WindowMode) {
    let paths: Vec<PathBuf> = files.iter().map(|f| shared(f)).collect();
    if !paths.iter().all(|p| p.exists()) {
        panic!("../shared/traces is missing: {paths:?}");
    }
    let job = Job::read(paths[0].clone(), &paths, &ReadOptions::default(), &|_| {});
    assert!(job.failures.is_empty(), "{:?}", job.failures);
    let mut opts = AnalyzeOptions::default();
    opts.window = window;
    // HTA's definition of communication, which the independent reference follows.
    opts.classifier = tracecast_ingest::analysis::Classifier::new(tracecast_ingest::analysis::CommKernels::Nccl, &[]).unwrap();
    let analysis = analyze_job(&job, &opts);
    assert_eq!(analysis.ranks.len(), paths.len());
    for r in &analysis.ranks {
        let path = PathBuf::from(&r.file);
        let p = parse(&path);
        let lo = p.activities.iter().map(|a| a.0).min().unwrap();
        let hi = p.activities.iter().map(|a| a.1).max().unwrap();
        let mut windows = vec![];
        // Per-step GPU windows: GPU work whose launch falls inside the step's CPU annotation.
        let mut step_windows: Vec<Option<(i64, i64)>> = vec![None; p.steps.len()];
        for &(s, e, _, corr) in &p.activities {
            let Some(&launch) = p.runtime.get(&corr) else { continue };
            if let Some(k) = p.steps.iter().position(|&(a, b)| a <= launch && launch <= b) {
                let w = step_windows[k].get_or_insert((s, e));
                w.0 = w.0.min(s);
                w.1 = w.1.max(e);
            }
        }
        // DESIGN §3: the steps partition the window; a step ends where the next step's GPU work begins.
        let starts: Vec<Option<i64>> = step_windows.iter().map(|w| w.map(|w| w.0)).collect();
        for k in 0..step_windows.len() {
            let next = starts[k + 1..].iter().flatten().min().copied();
            if let (Some(w), Some(n)) = (step_windows[k].as_mut(), next) {
                w.1 = n.max(w.0);
            }
        }
        match window {
            WindowMode::All => windows.push((lo, hi)),
            WindowMode::Steps => {
                let ws: Vec<(i64, i64)> = step_windows.iter().flatten().copied().collect();
                assert!(!ws.is_empty(), "{}: expected steps", path.display());
                windows.push((ws.iter().map(|w| w.0).min().unwrap(), ws.iter().map(|w| w.1).max().unwrap()));
            }
        }
        let want = sweep(&p.activities, windows[0].0, windows[0].1);
        let b = &r.breakdown;
        close("gpu_span_us", &path, b.gpu_span_us, want.span);
        close("busy_us", &path, b.busy_us, want.busy);
        close("idle_us", &path, b.idle_us, want.span - want.busy);
        close("compute_us", &path, b.compute_us, want.compute);
        close("comm_us", &path, b.comm_us, want.comm);
        close("memory_us", &path, b.memory_us, want.memory);
        close("overlap_us", &path, b.overlap_us, want.overlap);
        close("exposed_comm_us", &path, b.exposed_comm_us, want.comm - want.overlap);
        let split = r.idle_split.host_wait_us + r.idle_split.kernel_wait_us + r.idle_split.other_us;
        close("idle split sum", &path, split, want.span - want.busy);
        if window == WindowMode::Steps {
            assert_eq!(r.steps.len(), p.steps.len());
            for (s, w) in r.steps.iter().zip(&step_windows) {
                let Some((lo, hi)) = *w else { continue };
                let want = sweep(&p.activities, lo, hi);
                close("step busy_us", &path, s.breakdown.busy_us, want.busy);
                close("step exposed_comm_us", &path, s.breakdown.exposed_comm_us, want.comm - want.overlap);
            }
        }
    }
}

#[test]
fn multi_rank_pair_trace_filter() {
    check(&["hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz"], WindowMode::All);
    check(&["hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz"], WindowMode::Steps);
}

#[test]
fn nccl_traces_window_all() {
    for f in [
        "hta/nccl_parser_config/nccl_data.json.gz",
        "hta/trace_diff/control/control.json.gz",
        "hta/trace_diff/test/test.json.gz",
        "hta/df_index_resolver/df_index_resolver.json.gz",
        "tracelens/b200/eager_trace.json.gz",
    ] {
        check(&[f], WindowMode::All);
    }
}

#[test]
fn nccl_traces_window_steps() {
    for f in ["hta/nccl_parser_config/nccl_data.json.gz", "hta/trace_diff/control/control.json.gz", "hta/trace_diff/test/test.json.gz"] {
        check(&[f], WindowMode::Steps);
    }
}

#[test]
fn other_vendors_and_eras() {
    for f in [
        "kineto/tb_plugin_samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
        "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz",
        "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
        "tracelens/inference/vllm_decode_full/graph_execution.json.gz",
    ] {
        check(&[f], WindowMode::All);
    }
}
