//! `tracecast project` and `tracecast search` end to end: the MAD-Max
//! reference reproduced through the CLI, DESIGN §6 JSON keys, default mode
//! beside MAD-Max's, inference, search with its Pareto chart, bad input.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};

use common::*;

fn madmax(rel: &str) -> PathBuf {
    shared().join("../madmax-configs").join(rel)
}

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn project_reproduces_madmax_and_models_more_by_default() {
    let dir = scratch("project");
    let files =
        [madmax("model_cfgs/llm/llama2_70b.json"), madmax("system_cfgs/dc_A/dc_A_2048.json"), madmax("task_cfgs/llm/llm_train.json")];
    let run = |assumptions: &str, out: &str| {
        let out = dir.join(out);
        let o = bin().args(["project", "--assumptions", assumptions, "--json"]).arg(&out).arg("--madmax").args(&files).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        (String::from_utf8_lossy(&o.stdout).into_owned(), json(&out))
    };
    let (text, m) = run("madmax", "madmax.json");
    // The file's utilizations that priced it, said (the notes had named them without their values).
    assert!(text.contains("one utilization factor for compute (flops_util 0.705) and one for HBM (mem_bw_util 0.836)"), "{text}");
    for key in ["iteration_ms", "compute_ms", "comm_ms", "exposed_comm_ms", "throughput", "memory_gb_per_gpu", "fits_memory"] {
        assert!(!m[key].is_null(), "{key} missing");
    }
    assert!((m["iteration_ms"].as_f64().unwrap() - 7275.72).abs() / 7275.72 < 0.01);
    assert!((m["exposed_comm_ms"].as_f64().unwrap() - 1676.89).abs() / 1676.89 < 0.01);
    assert!((m["throughput"].as_f64().unwrap() - 281.48).abs() / 281.48 < 0.01);
    assert!(text.contains("Iteration 7275.72 ms"), "{text}");
    // tracecast's own model of the same files: same GEMM work, plus what MAD-Max leaves out.
    let (text, t) = run("tracecast", "tracecast.json");
    assert_eq!(t["assumptions"], "tracecast");
    assert!(text.contains("its flops_util (0.705) and mem_bw_util (0.836) as η"), "{text}");
    let gemm = |v: &serde_json::Value| v["by_kind_ms"]["gemm"].as_f64().unwrap();
    assert!((gemm(&t) - gemm(&m)).abs() / gemm(&m) < 0.02, "GEMM {} vs {}", gemm(&t), gemm(&m));
    assert!(t["by_kind_ms"]["attention"].as_f64().unwrap() > 0.0);
    assert!(t["memory"]["activations_gb"].as_f64().unwrap() > 0.0);
    // Deterministic.
    let (_, again) = run("madmax", "madmax2.json");
    assert_eq!(m, again);
}

#[test]
fn project_presets_inference_perfetto_and_errors() {
    let dir = scratch("project-presets");
    let out = dir.join("decode.json");
    let perfetto = dir.join("decode.trace.json.gz");
    let o = bin()
        .args([
            "project",
            "--model",
            "llama2-70b",
            "--system",
            "h100-sxm",
            "--gpus",
            "8",
            "--task",
            "decode",
            "--batch",
            "16",
            "--context",
            "4096",
        ])
        .args(["--parallel", "tp=8", "--json"])
        .arg(&out)
        .arg("--perfetto")
        .arg(&perfetto)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&out);
    assert!(v["tpot_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(v["task"], "decode");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("Time per output token"), "{stdout}");
    // Without --profile the GPU's shipped calibration prices it, and the output says so.
    assert!(stdout.contains("from shipped profile of h100-sxm"), "the source of the efficiencies is stated: {stdout}");
    // The timeline opens as Chrome-trace JSON.
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(std::fs::File::open(&perfetto).unwrap()), &mut text).unwrap();
    let trace: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(trace["traceEvents"].as_array().unwrap().len() > 80);
    // A decode step of one stage and one microbatch: the timeline is the iteration, and no note says otherwise.
    assert!(!stdout.contains("--perfetto draws"), "{stdout}");
    // Bad input: a clear message and a non-zero exit, never a panic.
    for (args, want) in [
        (vec!["project", "--model", "nope-1b", "--system", "h100-sxm", "--gpus", "8"], "neither a preset"),
        (vec!["project", "--model", "missing.json", "--system", "h100-sxm", "--gpus", "8"], "--model missing.json: no such file"),
        (vec!["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--parallel", "tp=8,fp8=0"], "fp8=0: on or off"),
        (vec!["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "6", "--parallel", "tp=3,dp=2"], "do not divide"),
        (vec!["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--parallel", "tp=16"], "tp × cp × pp × dp"),
        (vec!["project", "--model", "llama2-7b", "--system", "h100-sxm"], "--gpus"),
        (vec!["project", "--assumptions", "madmax", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8"], "--madmax"),
    ] {
        let o = bin().args(&args).output().unwrap();
        assert!(!o.status.success(), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
    }
}

#[test]
fn a_training_timeline_says_how_much_of_the_iteration_it_draws_and_tracks_only_lanes_that_ran() {
    let dir = scratch("project-perfetto-train");
    let perfetto = dir.join("train.trace.json");
    let o = bin()
        .args([
            "project",
            "--model",
            "llama3-8b",
            "--system",
            "h100-sxm",
            "--gpus",
            "8",
            "--parallel",
            "tp=2,pp=2,dp=2,mb=1,gbs=16",
            "--perfetto",
        ])
        .arg(&perfetto)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let trace = json(&perfetto);
    let events = trace["traceEvents"].as_array().unwrap();
    let slices: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
    let end_ms = slices.iter().map(|e| e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap()).fold(0.0, f64::max) / 1e3;
    let iteration: f64 = stdout.split("Iteration ").nth(1).and_then(|t| t.split(" ms").next()).and_then(|t| t.trim().parse().ok()).unwrap();
    // Eight microbatches over two stages: one microbatch's lanes are far less than the iteration, and the note gives both.
    assert!(end_ms < 0.5 * iteration, "{end_ms} of {iteration}");
    assert!(stdout.contains(&format!("--perfetto draws the lanes of one microbatch on one pipeline stage: {end_ms:.2} ms of the {iteration:.2} ms iteration; the model prices the other {:.2} ms (of which the pipeline bubble", iteration - end_ms)), "{stdout}");
    // Memory-bound work inside the blocks is named by kind in the slices' args.
    let memory_ms: f64 = slices.iter().filter_map(|e| e["args"]["memory_bound_ms"].as_f64()).sum();
    assert!(memory_ms > 0.0, "memory-bound time in the args");
    for e in slices.iter().filter(|e| e["args"].is_object()) {
        let parts: f64 = e["args"].as_object().unwrap().values().map(|v| v.as_f64().unwrap()).sum();
        assert!((parts - e["dur"].as_f64().unwrap() / 1e3).abs() < 1e-3 * parts.max(1.0), "{e}");
    }
    // A block of several kinds is a `block` slice with a slice of each kind inside it: the slices'
    // categories add up to the breakdown (Llama-2 7B data-parallel over 8 H100s, whose timeline is
    // the whole iteration: its FA2 forward had counted as GEMM time, attention 102 ms against 57).
    let o = bin()
        .args(["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--parallel", "dp=8,mb=1,gbs=8", "--perfetto"])
        .arg(&perfetto)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let trace = json(&perfetto);
    let by_kind = |cat: &str| -> f64 {
        trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == cat)
            .map(|e| e["dur"].as_f64().unwrap())
            .sum::<f64>()
            / 1e3
    };
    let said = |kind: &str| -> f64 {
        stdout.split(&format!("{kind} ")).nth(1).and_then(|t| t.split(" ms").next()).and_then(|t| t.trim().parse().ok()).unwrap()
    };
    for kind in ["attention", "gemm"] {
        assert!(
            (by_kind(kind) / said(kind) - 1.0).abs() < 0.005,
            "{kind}: {} on the timeline, {} said: {stdout}",
            by_kind(kind),
            said(kind)
        );
    }
    // The optimizer step, memory-bound, is what the note says the timeline leaves out.
    let outside: f64 =
        stdout.split("the model prices the other ").nth(1).and_then(|t| t.split(" ms").next()).and_then(|t| t.parse().ok()).unwrap();
    assert!(((by_kind("memory_bound") + outside) / said("memory_bound") - 1.0).abs() < 0.005, "{stdout}");
    assert!(by_kind("block") > 0.0);
    // Tracks only for the lanes that ran: tensor parallelism alone has no data-parallel or pipeline lane.
    let o = bin()
        .args(["project", "--model", "llama3-8b", "--system", "h100-sxm", "--gpus", "8", "--parallel", "tp=8", "--perfetto"])
        .arg(&perfetto)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let tracks: Vec<String> = json(&perfetto)["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tracks, ["compute", "communication"]);
}

#[test]
fn search_ranks_plans_and_draws_the_front() {
    let dir = scratch("search");
    let out = dir.join("search.json");
    let o = bin()
        .args(["search", "--model", "llama2-13b", "--system", "a100-80gb", "--gpus", "64", "--top", "5", "--json"])
        .arg(&out)
        .arg("--plots")
        .arg(dir.join("plots"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("plans simulated"), "{stdout}");
    assert!(stdout.contains("Baseline plain FSDP"), "{stdout}");
    // Held against the best A100 training run shipped: MPT-7B on 8 A100, 4 641 tokens/s per GPU
    // × 41.50 GFLOP a token ÷ 312 TFLOP/s (the arithmetic in validate.rs's unit test).
    assert!(
        stdout.contains("The best MFU measured in training on a GPU of this compute with 16-bit linear layers: 61.7 % of the 16-bit peak (mpt-7b-8xa100-80gb, 8 × a100-80gb"),
        "{stdout}"
    );
    let v = json(&out);
    assert_eq!(v["best_measured_mfu"]["best"]["run"], "mpt-7b-8xa100-80gb");
    // An FP8 search is bounded by FP8 GEMMs and FP8 training runs, both against the 16-bit peak
    // the MFU is of: H100's FP8 peak is twice its 16-bit one, so a GEMM at over half of it is over 100 %.
    let o = bin()
        .args(["search", "--model", "llama3-8b", "--system", "h100-sxm", "--gpus", "64", "--top", "1", "--with", "fp8"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let fp8 = String::from_utf8_lossy(&o.stdout);
    let share: f64 = fp8
        .split("the best FP8 GEMM measured on this GPU: ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{fp8}"));
    assert!(share > 100.0, "{fp8}");
    // The front is printed without --json or --plots too, as README says: 8 to 64 GPUs.
    assert_eq!(fp8.lines().filter(|l| l.trim_start().starts_with("front:")).count(), 4, "{fp8}");
    assert!(
        fp8.contains("The best MFU measured in training on a GPU of this compute with FP8 linear layers: ") && fp8.contains("h100-sxm"),
        "{fp8}"
    );
    let ranked = v["ranked"].as_array().unwrap();
    assert!(!ranked.is_empty());
    assert!(ranked.iter().all(|p| p["fits_memory"] == true));
    assert_eq!(v["best"], ranked[0]);
    assert!(v["front"].as_array().unwrap().iter().any(|p| p["pareto"] == true));
    for f in ["pareto.svg", "pareto.png"] {
        assert!(dir.join("plots").join(f).metadata().unwrap().len() > 1000, "{f}");
    }
}

/// The front's chart names the unit the command prints (decode had been drawn on a samples/s
/// axis beside a front printed in tokens/s), and a search with no plan writes no chart (an empty
/// one on invented axes had been written before the error).
#[test]
fn the_front_chart_names_its_unit_and_no_plan_draws_none() {
    let dir = scratch("front-chart");
    let plots = |name: &str, args: &[&str]| {
        let d = dir.join(name);
        let o = bin().args(["search", "-q", "--plots"]).arg(&d).args(args).output().unwrap();
        (o, d)
    };
    let (o, d) = plots("decode", &["--model", "llama2-70b", "--system", "h100-sxm", "--gpus", "64", "--task", "decode", "--batch", "8"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(d.join("pareto.svg")).unwrap();
    assert!(svg.contains("throughput (tokens/s)") && !svg.contains("samples/s"), "{svg}");
    let (o, d) = plots("none", &["--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "1"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!d.join("pareto.svg").exists() && !d.join("pareto.png").exists());
}

#[test]
fn dlrm_in_tracecast_mode_with_embedding_sharding() {
    let dir = scratch("dlrm");
    let files = [
        madmax("model_cfgs/dlrm/dlrm_a.json"),
        madmax("system_cfgs/zionex/zionex_128.json"),
        madmax("task_cfgs/val/dlrm_train_val_128.json"),
    ];
    let run = |sharding: &str| {
        let out = dir.join(format!("{sharding}.json"));
        let o = bin().args(["project", "-q", "--sharding", sharding, "--json"]).arg(&out).arg("--madmax").args(&files).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        json(&out)
    };
    let (tw, rw, dp) = (run("tw"), run("rw"), run("dp"));
    assert_eq!(tw["plan"], "mlp=ddp=128,tables=tw");
    // Row-wise sends every table's partial sums; replicated tables cannot fit 1.6 TB.
    assert!(rw["comm_ms"].as_f64().unwrap() > tw["comm_ms"].as_f64().unwrap());
    assert_eq!(dp["fits_memory"], false);
    assert_eq!(tw["fits_memory"], true);
    // Same global batch as MAD-Max's task, same GEMM work give or take the per-kernel cost.
    assert_eq!(tw["global_batch"].as_f64().unwrap(), 65536.0);
    let gemm = tw["by_kind_ms"]["gemm"].as_f64().unwrap();
    assert!((gemm - 8.91).abs() / 8.91 < 0.05, "{gemm}");
    // --sharding where it shards nothing was silently ignored: an LLM, a preset, MAD-Max's own assumptions.
    let llm = [madmax("model_cfgs/llm/llama2_70b.json"), files[1].clone(), madmax("task_cfgs/llm/llm_train.json")];
    for args in [
        vec!["project".into(), "--sharding".into(), "tw".into(), "--madmax".into(), llm[0].clone(), llm[1].clone(), llm[2].clone()],
        vec![
            "project".into(),
            "--sharding".into(),
            "tw".into(),
            "--assumptions".into(),
            "madmax".into(),
            "--madmax".into(),
            files[0].clone(),
            files[1].clone(),
            files[2].clone(),
        ],
        vec![
            "project".into(),
            "--sharding".into(),
            "tw".into(),
            "--model".into(),
            "llama2-7b".into(),
            "--system".into(),
            "h100-sxm".into(),
            "--gpus".into(),
            "8".into(),
        ],
    ] {
        let args: Vec<std::ffi::OsString> = args.into_iter().map(|a: PathBuf| a.into_os_string()).collect();
        let o = bin().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains("--sharding shards a DLRM's embedding tables"), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn validate_compares_published_runs_with_their_projection() {
    let runs = common::shared().join("../validation/published-runs.json");
    let dir = common::scratch("validate");
    let out = dir.join("validate.json");
    let o = common::run(&["validate".as_ref(), runs.as_os_str(), "--json".as_ref(), out.as_os_str()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let list = v["runs"].as_array().unwrap();
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&runs).unwrap()).unwrap();
    assert_eq!(list.len(), file["runs"].as_array().unwrap().len());
    let mut abs = Vec::new();
    for r in list {
        let (m, p) = (r["measured_tokens_per_s_per_gpu"].as_f64().unwrap(), r["predicted_tokens_per_s_per_gpu"].as_f64().unwrap());
        let e = r["error"].as_f64().unwrap();
        assert!((e - (p / m - 1.0)).abs() < 1e-12, "{}", r["id"]);
        assert!(r["fits_memory"].is_boolean());
        abs.push(e.abs());
    }
    abs.sort_by(f64::total_cmp);
    assert!((v["max_abs_error"].as_f64().unwrap() - abs.last().unwrap()).abs() < 1e-12);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("median |error|"), "{stdout}");
    // Per GPU (the file has A100 and H100 runs): each GPU's runs, their median |error| and sides,
    // as the rows give them, and a line each under the summary.
    let by_gpu = v["by_gpu"].as_array().unwrap();
    assert_eq!(by_gpu.len(), 2, "{v}");
    for g in by_gpu {
        let id = g["gpu"].as_str().unwrap();
        let mine: Vec<f64> = list.iter().filter(|r| r["gpu"] == id).map(|r| r["error"].as_f64().unwrap()).collect();
        let mut a: Vec<f64> = mine.iter().map(|e| e.abs()).collect();
        a.sort_by(f64::total_cmp);
        let n = a.len();
        let median = if n % 2 == 1 { a[n / 2] } else { (a[n / 2 - 1] + a[n / 2]) / 2.0 };
        assert_eq!(g["runs"].as_u64(), Some(n as u64), "{id}");
        assert!((g["median_abs_error"].as_f64().unwrap() - median).abs() < 1e-12, "{id}");
        assert_eq!(g["optimistic"].as_u64(), Some(mine.iter().filter(|e| **e > 0.0).count() as u64), "{id}");
        assert!(stdout.contains(&format!("  {id:<12} {n:>4} runs: median |error| {:.1} %", 100.0 * median)), "{stdout}");
    }
    // Every published run fits as priced: no line says otherwise.
    assert!(list.iter().all(|r| r["fits_memory"] == true), "{v}");
    assert!(!stdout.contains("do not fit"), "{stdout}");
    // A run whose stated plan cannot fit (Llama-3 70B replicated on each of 8 H100s: 16 bytes of
    // weights, gradients and Adam per parameter, 1.1 TB) is counted under the summary.
    let big = dir.join("big.json");
    let run = r#"{"runs": [{"id": "replicated", "source": "s", "model": {"preset": "llama3-70b", "seq": 8192}, "system": {"gpu": "h100-sxm", "gpus": 8}, "plan": "ddp=8,mb=1,gbs=8", "measured": {"tokens_per_s_per_gpu": 100}}]}"#;
    std::fs::write(&big, run).unwrap();
    let o = common::run(&["validate".as_ref(), big.as_os_str()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("DOES NOT FIT") && text.contains("1 of them do not fit their GPU's memory"), "{text}");
    // A runs file that is not one: a clear error naming it.
    let bad = dir.join("bad.json");
    std::fs::write(&bad, b"{\"run\": []}").unwrap();
    let o = common::run(&["validate".as_ref(), bad.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(common::stderr(&o).contains("bad.json: not a runs file"), "{}", common::stderr(&o));
    // A run that does not read is refused in its row, by key; the others are compared (it had
    // stopped the whole file).
    std::fs::write(&bad, format!("{{\"runs\": [{{\"id\": 1}}, {}]}}", &run[10..run.len() - 2])).unwrap();
    let o = common::run(&["validate".as_ref(), bad.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(common::stderr(&o).contains("bad.json: 1 run(s) refused"), "{}", common::stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("not projected: the entry does not read as a run: invalid type: integer `1`, expected a string (at \"id\")")
            && text.contains("1 run: median |error|"),
        "{text}"
    );
    // Nothing to compare is no perfect score: an empty file is refused, and runs that
    // cannot be projected leave the summary empty (null), not 0 %.
    let empty = dir.join("empty.json");
    std::fs::write(&empty, b"{\"runs\": []}").unwrap();
    let o = common::run(&["validate".as_ref(), empty.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(common::stderr(&o).contains("empty.json: no runs to compare"), "{}", common::stderr(&o));
    let refused = dir.join("refused.json");
    let run = r#"{"runs": [{"id": "x", "source": "s", "model": {"preset": "llama3-8b", "seq": 8192}, "system": {"gpu": "no-such-gpu", "gpus": 8}, "plan": "fsdp=8", "measured": {"tokens_per_s_per_gpu": 1000}}]}"#;
    std::fs::write(&refused, run).unwrap();
    let json = dir.join("refused-out.json");
    let o = common::run(&["validate".as_ref(), refused.as_os_str(), "--json".as_ref(), json.as_os_str()]);
    // A run refused for its own description: the table and JSON are written, and the status says it.
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("refused.json: 1 run(s) refused; their rows say why"), "{}", common::stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no run projected: nothing to compare"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["runs"][0]["refused"], true, "{v}");
    assert!(v["median_abs_error"].is_null() && v["max_abs_error"].is_null(), "{v}");
    // Work the tool cannot price (FP4 linear layers) is not the input's fault: status 0.
    let fp4 = dir.join("fp4.json");
    let run = r#"{"runs": [{"id": "x", "source": "s", "model": {"preset": "llama3-8b", "seq": 8192}, "system": {"gpu": "b200", "gpus": 8}, "plan": "fsdp=8", "precision": "NVFP4", "measured": {"tokens_per_s_per_gpu": 1000}}]}"#;
    std::fs::write(&fp4, run).unwrap();
    let o = common::run(&["validate".as_ref(), fp4.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("FP4 is not priced"), "{}", String::from_utf8_lossy(&o.stdout));
    // Two runs of one id: refused (ids name runs in tables, fits and `project --from`).
    let twice = dir.join("twice.json");
    let one: serde_json::Value = serde_json::from_str(run).unwrap();
    let r = &one["runs"][0];
    std::fs::write(&twice, serde_json::to_vec(&serde_json::json!({"runs": [r, r]})).unwrap()).unwrap();
    let o = common::run(&["validate".as_ref(), twice.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(common::stderr(&o).contains("twice.json: run id \"x\" names more than one run"), "{}", common::stderr(&o));
    // Runs kept under another top-level list are not read, and that is said, not silent;
    // `project --from` names the list of a run it will not read.
    let apart = dir.join("apart.json");
    std::fs::write(
        &apart,
        serde_json::to_vec(&serde_json::json!({"runs": [r], "runs_lora": [{"id": "lora-1"}, {"id": "lora-2"}], "abuot": "x"})).unwrap(),
    )
    .unwrap();
    let o = common::run(&["validate".as_ref(), apart.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    // A key of no list is said as well (a misspelt `about` had passed in silence).
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("apart.json: `runs_lora` (2 entries) and `abuot` not read: only the `runs` list is"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // A key a run gives twice refuses that run in its row (the last had won in silence); the
    // other runs are compared.
    let given_twice = dir.join("given-twice.json");
    let text = serde_json::to_string(&serde_json::json!({"runs": [r, r]})).unwrap();
    let at = text.rfind("\"id\":\"x\"").unwrap();
    let text = format!("{}\"id\":\"y\",\"id\":\"z\"{}", &text[..at], &text[at + "\"id\":\"x\"".len()..]);
    std::fs::write(&given_twice, text).unwrap();
    let o = common::run(&["validate".as_ref(), given_twice.as_os_str()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("\nz ") && out.contains("key \"id\" is given twice") && out.contains("\nx "), "{out}{}", common::stderr(&o));
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    let from = format!("{}:lora-2", apart.display());
    let o = bin().args(["project", "--from", &from]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("run \"lora-2\" is listed under `runs_lora`"), "{}", common::stderr(&o));
}

#[test]
fn validate_fit_recovers_a_known_gemm_correction_and_writes_a_profile_every_command_reads() {
    // Known truth: runs "measured" on an H100 whose GEMMs take 1.7× the measured table's
    // time (the model as the generator, as synth is for traces): the fit recovers 1.7
    // and every run, left out, is projected to within a fraction of a percent.
    let dir = common::scratch("validate-fit");
    let truth = dir.join("truth.json");
    let catalog = tracecast_calibrate::Catalog::builtin();
    let mut p = tracecast_calibrate::shipped::profile("h100-sxm").expect("shipped H100 profile");
    let bf16 = tracecast_calibrate::catalog::Dtype::Bf16;
    let was = p.table_correction(tracecast_calibrate::work::KernelClass::Gemm, Some(bf16)).map_or(1.0, |c| c.ratio);
    p.set_gemm_correction(bf16, 1.7, 1, "truth");
    std::fs::write(&truth, serde_json::to_vec(&p).unwrap()).unwrap();
    let device = tracecast_calibrate::DeviceModel::from_profile(&p, &catalog);
    let plans = [
        ("llama2-7b", 8, "fsdp=8,mb=2,gbs=64"),
        ("llama2-13b", 16, "tp=2,fsdp=8,mb=1,gbs=64"),
        ("llama2-70b", 64, "tp=8,pp=2,dp=4,mb=1,gbs=128"),
    ];
    let mut runs = Vec::new();
    for (model, gpus, plan) in plans {
        let file = serde_json::json!({"runs": [{"id": model, "model": {"preset": model, "seq": 4096.0},
            "system": {"gpu": "h100-sxm", "gpus": gpus}, "plan": plan, "measured": {"tokens_per_s_per_gpu": 1.0}}]});
        let f: tracecast_replay::workload::validate::RunsFile = serde_json::from_value(file.clone()).unwrap();
        let v = tracecast_replay::workload::validate::validate(&f, &catalog, std::slice::from_ref(&device), None);
        let measured = v.runs[0].predicted_tokens_per_s_per_gpu.expect("projected");
        let mut run = file["runs"][0].clone();
        run["measured"]["tokens_per_s_per_gpu"] = serde_json::json!(measured);
        runs.push(run);
    }
    let runs_file = dir.join("runs.json");
    std::fs::write(&runs_file, serde_json::to_vec(&serde_json::json!({"runs": runs})).unwrap()).unwrap();
    let (fit, json) = (dir.join("fit.json"), dir.join("fit-result.json"));
    let o =
        common::run(&["validate".as_ref(), runs_file.as_os_str(), "--fit".as_ref(), fit.as_os_str(), "--json".as_ref(), json.as_os_str()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let c = r["gpus"][0]["gemm_correction"].as_f64().unwrap();
    assert!((c - 1.7).abs() < 0.01, "fitted correction {c}");
    assert!(r["leave_one_out"]["max_abs_error"].as_f64().unwrap() < 0.01, "{}", r["leave_one_out"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("Leave one run out") && stdout.contains(&format!("was {was:.3}")), "{stdout}");
    assert!(!stdout.contains("before trusting it"), "{stdout}");
    // Fewer runs than a test of the fit needs: written, as asked, and said (a fit to one run had
    // been written beside an in-sample error of 0.0 %, without a word).
    for (n, said) in [
        (1, "from 1 run: the correction reproduces it exactly"),
        (2, "from 2 runs: leave one run out predicts each from a fit to the 1 other(s)"),
    ] {
        let few = dir.join(format!("runs-{n}.json"));
        std::fs::write(&few, serde_json::to_vec(&serde_json::json!({"runs": runs[..n]})).unwrap()).unwrap();
        let o = common::run(&["validate".as_ref(), few.as_os_str(), "--fit".as_ref(), dir.join(format!("fit-{n}.json")).as_os_str()]);
        assert!(o.status.success(), "{}", common::stderr(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains(said), "{}", String::from_utf8_lossy(&o.stdout));
    }
    // The written profile: validate --profile reproduces the fitted runs, project and search read it.
    let out = dir.join("again.json");
    let o = common::run(&[
        "validate".as_ref(),
        runs_file.as_os_str(),
        "--profile".as_ref(),
        fit.as_os_str(),
        "--json".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let again: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(again["max_abs_error"].as_f64().unwrap() < 0.01, "{again}");
    for cmd in [
        &["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--parallel", "fsdp=8"][..],
        &["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--top", "1"],
    ] {
        let mut args: Vec<std::ffi::OsString> = cmd.iter().map(Into::into).collect();
        args.extend(["--profile".into(), fit.clone().into_os_string(), "-q".into()]);
        let o = common::bin().args(&args).output().unwrap();
        assert!(o.status.success(), "{cmd:?}: {}", common::stderr(&o));
    }
}

#[test]
fn validate_takes_inference_runs_by_their_latency() {
    // A prefill run measured at 1.25× the projected time to first token and a decode run at
    // 0.8× the projected time per output token: +25 % and −20 % in tokens/s per GPU.
    let dir = common::scratch("validate-inference");
    let latency = |task: &str, flag: &str, key: &str| -> f64 {
        let out = dir.join(format!("{task}.json"));
        let o = common::bin()
            .args(["project", "-q", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--parallel", "tp=4,dp=2"])
            .args(["--task", task, "--batch", "4", flag, "2048", "--json"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        v[key].as_f64().unwrap()
    };
    let (ttft, tpot) = (latency("prefill", "--prompt", "ttft_ms"), latency("decode", "--context", "tpot_ms"));
    let run = |id: &str, task: &str, extra: serde_json::Value, measured: serde_json::Value| {
        let mut r = serde_json::json!({"id": id, "model": {"preset": "llama2-7b", "seq": 4096.0},
            "system": {"gpu": "h100-sxm", "gpus": 8}, "plan": "tp=4,dp=2", "task": task, "batch": 4, "measured": measured});
        for (k, v) in extra.as_object().unwrap() {
            r[k] = v.clone();
        }
        r
    };
    let runs = serde_json::json!({"runs": [
        run("prefill", "prefill", serde_json::json!({"prompt": 2048}), serde_json::json!({"ttft_ms": 1.25 * ttft})),
        run("decode", "decode", serde_json::json!({"context": 2048}), serde_json::json!({"tpot_ms": 0.8 * tpot})),
    ]});
    let (file, out) = (dir.join("runs.json"), dir.join("v.json"));
    std::fs::write(&file, serde_json::to_vec(&runs).unwrap()).unwrap();
    let o = common::run(&["validate".as_ref(), file.as_os_str(), "--json".as_ref(), out.as_os_str()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let err = |i: usize| v["runs"][i]["error"].as_f64().unwrap();
    assert!((err(0) - 0.25).abs() < 1e-6, "{}", v["runs"][0]);
    assert!((err(1) + 0.2).abs() < 1e-6, "{}", v["runs"][1]);
    // Prefill of 4 × 2048 tokens per replica of 4 GPUs: tokens/s per GPU from the latency.
    let measured = v["runs"][0]["measured_tokens_per_s_per_gpu"].as_f64().unwrap();
    assert!((measured - 4.0 * 2048.0 / (1.25 * ttft / 1e3) / 4.0).abs() < 1e-6 * measured);
}

#[test]
fn project_and_search_read_a_runs_file_model_and_system_overrides() {
    let dir = common::scratch("project-model-file");
    let project = |model: &str, extra: &[&str], name: &str| -> serde_json::Value {
        let out = dir.join(format!("{name}.json"));
        let o = common::bin()
            .args(["project", "-q", "--model", model, "--system", "h100-sxm", "--gpus", "16", "--parallel", "tp=2,dp=8,mb=1,gbs=64"])
            .args(extra)
            .arg("--json")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        json(&out)
    };
    // LLaMA-2 7B's published figures as a runs file writes them: the same model as the preset.
    let figures = serde_json::json!({"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 32, "ffn": 11008,
        "vocab": 32000, "seq": 4096, "activation": "swiglu", "tied_embeddings": false});
    let file = dir.join("llama2-7b-figures.json");
    std::fs::write(&file, serde_json::to_vec(&figures).unwrap()).unwrap();
    let preset = project("llama2-7b", &[], "preset");
    let from_file = project(file.to_str().unwrap(), &[], "file");
    assert_eq!(preset["iteration_ms"], from_file["iteration_ms"]);
    assert_eq!(preset["memory"], from_file["memory"]);
    // Tied embeddings: one 32000 × 4096 matrix fewer per GPU (tp=2 halves it), in BF16.
    let mut tied = figures.clone();
    tied["tied_embeddings"] = serde_json::json!(true);
    let tied_file = dir.join("tied.json");
    std::fs::write(&tied_file, serde_json::to_vec(&tied).unwrap()).unwrap();
    let t = project(tied_file.to_str().unwrap(), &[], "tied-projection");
    let weights = |v: &serde_json::Value| v["memory"]["weights_gb"].as_f64().unwrap();
    assert!((weights(&preset) - weights(&t) - 32000.0 * 4096.0 / 2.0 * 2.0 / 1e9).abs() < 1e-9, "{} {}", weights(&preset), weights(&t));
    // System overrides: a 40 GB variant does not hold what fits in 80 GB; slower NICs lengthen
    // the inter-node gradient all-reduce (16 GPUs = 2 nodes); each change is named in the notes.
    let small = project(file.to_str().unwrap(), &["--hbm-gb", "20"], "small");
    assert_eq!(preset["fits_memory"], true);
    assert_eq!(small["fits_memory"], false);
    let slow = project(file.to_str().unwrap(), &["--nic-gbps-per-gpu", "5"], "slow");
    let comm = |v: &serde_json::Value| v["comm_ms"].as_f64().unwrap();
    assert!(comm(&slow) > 2.0 * comm(&preset), "{} vs {}", comm(&slow), comm(&preset));
    let notes = slow["notes"].to_string();
    assert!(notes.contains("network 5 GB/s per GPU as given"), "{notes}");
    // One node of 16: the all-reduce stays on NVLink, no matter how slow the NICs.
    let one_node = project(file.to_str().unwrap(), &["--nic-gbps-per-gpu", "5", "--gpus-per-node", "16"], "one-node");
    assert!(comm(&one_node) < comm(&preset), "{} vs {}", comm(&one_node), comm(&preset));
    // The same run through validate gives the same projection (one reading of model and system).
    let runs = serde_json::json!({"runs": [{"id": "r", "model": figures, "plan": "tp=2,dp=8,mb=1,gbs=64",
        "system": {"gpu": "h100-sxm", "gpus": 16, "nic_gbps_per_gpu": 5.0}, "measured": {"tokens_per_s_per_gpu": 1000.0}}]});
    let (runs_file, out) = (dir.join("runs.json"), dir.join("v.json"));
    std::fs::write(&runs_file, serde_json::to_vec(&runs).unwrap()).unwrap();
    let o = common::run(&["validate".as_ref(), runs_file.as_os_str(), "--json".as_ref(), out.as_os_str()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(json(&out)["runs"][0]["iteration_ms"], slow["iteration_ms"]);
    // search takes the same model file and overrides.
    let o = common::bin()
        .args(["search", "-q", "--model", file.to_str().unwrap(), "--system", "h100-sxm", "--gpus", "16", "--hbm-gb", "40", "--json"])
        .arg(dir.join("search.json"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let best = &json(&dir.join("search.json"))["ranked"][0];
    assert!(best["memory_gb_per_gpu"].as_f64().unwrap() <= 40.0, "{best}");
    // Bad model files and overrides: clear errors naming them.
    let bad = dir.join("bad-model.json");
    std::fs::write(&bad, br#"{"layers": 32, "hidden": 4096}"#).unwrap();
    let odd = dir.join("odd-heads.json");
    let mut o_heads = figures.clone();
    o_heads["kv_heads"] = serde_json::json!(5);
    std::fs::write(&odd, serde_json::to_vec(&o_heads).unwrap()).unwrap();
    for (args, want) in [
        (
            vec!["--model", bad.to_str().unwrap()],
            // The cause first (a terminal line is cut at 400 characters): an unknown key had been cut off.
            // Every missing key at once (it had named `heads` alone).
            "bad-model.json: model: missing fields `heads`, `kv_heads`, `ffn`, `vocab`, `seq`, `activation`; neither a preset with its seq nor full dimensions",
        ),
        (vec!["--model", odd.to_str().unwrap()], "odd-heads.json: heads 32 do not divide"),
        (vec!["--model", "llama2-7b", "--hbm-gbps", "0"], "hbm_gbps 0: must be a positive number"),
    ] {
        let o = common::bin().args(["project", "--system", "h100-sxm", "--gpus", "16"]).args(&args).output().unwrap();
        assert!(!o.status.success(), "{args:?}");
        assert!(common::stderr(&o).contains(want), "{args:?}: {}", common::stderr(&o));
        assert!(!common::stderr(&o).contains("panicked"));
    }
}

#[test]
fn project_onto_a_gpu_without_traces_uses_the_most_similar_traced_one_and_says_so() {
    // H200 has no trace in the corpus; H100 (same SMs and peak, HBM 1.4× apart) prices it, as in
    // `replay --target h200`, and `hw show` names the same rule.
    let o = common::bin().args(["project", "--model", "llama2-7b", "--system", "h200", "--gpus", "8"]).output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("the efficiencies of h100-sxm, the most similar GPU with traces"), "{out}");
    let h100 = tracecast_calibrate::shipped::profile("h100-sxm").unwrap();
    let gemm = h100.kernels.iter().find(|k| k.class == tracecast_calibrate::work::KernelClass::Gemm).unwrap();
    assert!(out.contains(&format!("GEMM η {:.3}", gemm.efficiency)), "{out}");
    let o = common::bin().args(["hw", "show", "h200"]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("(vendor NVIDIA)") && out.contains("prices it with no traces of h200: the efficiencies of h100-sxm"), "{out}");
}

#[test]
fn a_projection_says_whose_gemms_are_held_to_a_sustained_rate_and_whose_are_not() {
    // H200's GEMMs are held to the rate it sustained over 8 s; B200 was never timed so, and a
    // projection across the two says that its rates are the table's.
    let note = |gpu: &str, more: &[&std::ffi::OsStr]| {
        let o = common::bin()
            .args(["project", "--model", "llama3-8b", "--system", gpu, "--gpus", "8", "--parallel", "fsdp=8,mb=2"])
            .args(more)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        String::from_utf8_lossy(&o.stdout).lines().find(|l| l.contains("GEMMs at their shapes")).unwrap_or_default().to_string()
    };
    let (h200, b200) = (note("h200", &[]), note("b200", &[]));
    assert!(h200.contains("held at 665.7 TFLOP/s, the rate this GPU held under sustained load"), "{h200}");
    assert!(!h200.contains("no GEMM of"), "{h200}");
    // A user's measurement of the note's own 8192³ shape would hide that the rest are held: said.
    let dir = scratch("held-note");
    let mine = dir.join("gemm.csv");
    std::fs::write(&mine, "gpu,dtype,m,n,k,time_us\nh100-sxm,bf16,8192,8192,8192,1900\n").unwrap();
    let h100 = note("h100-sxm", &["--measurements".as_ref(), mine.as_os_str()]);
    assert!(h100.contains("the user's measurement of this shape") && h100.contains("a shape the user did not measure, 4096³"), "{h100}");
    assert!(b200.contains("no GEMM of b200 was timed under sustained load: its prices are not held to one"), "{b200}");
}

#[test]
fn validate_and_project_price_gemms_from_the_users_sweep_first() {
    // A user's GEMM sweep of their H100s at 300 TFLOP/s, below the measured table's
    // 780 at large shapes: the same run projects slower, and the note says whose table priced it.
    let dir = common::scratch("validate-measurements");
    let mut sweep = String::from("gpu,dtype,m,n,k,tflops\n");
    for m in [2048, 8192, 32768] {
        for n in [4096, 16384] {
            for k in [4096, 16384] {
                sweep.push_str(&format!("h100-sxm,bf16,{m},{n},{k},300\n"));
            }
        }
    }
    let mine = dir.join("sweep.csv");
    std::fs::write(&mine, sweep).unwrap();
    let runs = serde_json::json!({"runs": [{"id": "r", "model": {"preset": "llama2-7b", "seq": 4096.0},
        "system": {"gpu": "h100-sxm", "gpus": 8}, "plan": "fsdp=8,mb=1", "measured": {"tokens_per_s_per_gpu": 1000.0}}]});
    let file = dir.join("runs.json");
    std::fs::write(&file, serde_json::to_vec(&runs).unwrap()).unwrap();
    let projected = |extra: &[&std::ffi::OsStr]| {
        let out = dir.join("v.json");
        let mut args: Vec<&std::ffi::OsStr> = vec!["validate".as_ref(), file.as_os_str(), "--json".as_ref(), out.as_os_str()];
        args.extend(extra);
        let o = common::run(&args);
        assert!(o.status.success(), "{}", common::stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        v["runs"][0]["predicted_tokens_per_s_per_gpu"].as_f64().unwrap()
    };
    let (shipped, users) = (projected(&[]), projected(&["--measurements".as_ref(), mine.as_os_str()]));
    assert!(users < 0.8 * shipped, "{users} vs {shipped}");
    let o = common::bin()
        .args(["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--parallel", "fsdp=8", "--measurements"])
        .arg(&mine)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("sweep.csv"), "{text}");
    // One note says what priced the GEMMs: the user's table (the shipped table's note replaced).
    let gemm_notes: Vec<&str> = text.lines().filter(|l| l.contains("note: GEMMs at their shapes")).collect();
    assert_eq!(gemm_notes.len(), 1, "{text}");
    assert!(gemm_notes[0].contains("the user's"), "{text}");
    // A user's all-reduce point: the collectives note says it scaled the curve, and no
    // note claims a GEMM rule the point did not change.
    let point = dir.join("allreduce.csv");
    std::fs::write(&point, "gpu,collective,gpus,size_bytes,time_us\nh100-sxm,all_reduce,8,1073741824,8000\n").unwrap();
    let o = common::bin()
        .args(["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--parallel", "dp=8", "--measurements"])
        .arg(&point)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.lines().any(|l| l.contains("note: collectives in a node") && l.contains("the user's 1 point(s)")), "{text}");
    assert!(!text.contains("GEMMs now by"), "{text}");
}

/// The user's measurements across nodes describe their cluster: `project`, `search` and
/// `validate` place the GPUs in nodes of the size those were taken at where the node size is not
/// given (Polaris' nccl-tests, 4 A100s a node), said in a note, and price the same as with that
/// size given; given another, a note says the measurements price none of its collectives across
/// nodes. Before, LLaMA-2 7B over 64 A100-40GB with Polaris' measurements was projected byte
/// for byte as without them (8 a node, DGX's curves), with a note that they had been added.
#[test]
fn the_users_measurements_across_nodes_set_the_node_size_where_none_is_given() {
    let dir = common::scratch("users-node-size");
    let polaris = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/polaris/polaris-le32.csv");
    let project = |extra: &[&str], name: &str| {
        let out = dir.join(name);
        let mut args: Vec<&std::ffi::OsStr> = ["project", "--model", "llama2-7b", "--system", "a100-40gb", "--gpus", "64"]
            .iter()
            .chain(["--parallel", "fsdp=64,gbs=256", "--json"].iter())
            .map(|a| a.as_ref())
            .collect();
        args.push(out.as_os_str());
        args.extend(extra.iter().map(|a| std::ffi::OsStr::new(a)));
        let o = common::run(&args);
        assert!(o.status.success(), "{}", common::stderr(&o));
        (json(&out), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let m = polaris.to_str().unwrap();
    let (shipped, _) = project(&[], "shipped.json");
    let (theirs, text) = project(&["--measurements", m], "theirs.json");
    let (given, given_text) = project(&["--measurements", m, "--gpus-per-node", "4"], "given.json");
    let (eight, eight_text) = project(&["--measurements", m, "--gpus-per-node", "8"], "eight.json");
    assert!(text.contains("4 GPUs per node, as your measurements (alcf-polaris-nccl) across nodes were taken"), "{text}");
    assert!(!text.contains("8 GPUs a node"), "{text}");
    assert_eq!(theirs["iteration_ms"], given["iteration_ms"], "{text}\n{given_text}");
    assert!(theirs["iteration_ms"].as_f64().unwrap() > 1.2 * shipped["iteration_ms"].as_f64().unwrap(), "{text}");
    assert!(!given_text.contains("as your measurements"), "{given_text}");
    assert_eq!(eight["iteration_ms"], shipped["iteration_ms"], "{eight_text}");
    assert!(
        eight_text.contains("your measurements (alcf-polaris-nccl) were taken at 4 GPUs per node, not this system's 8"),
        "{eight_text}"
    );
    // search places its plans in the same nodes: no tensor parallelism beyond 4.
    let out = dir.join("search.json");
    let o = common::run(&[
        "search".as_ref(),
        "--model".as_ref(),
        "llama2-7b".as_ref(),
        "--system".as_ref(),
        "a100-40gb".as_ref(),
        "--gpus".as_ref(),
        "64".as_ref(),
        "--gbs".as_ref(),
        "256".as_ref(),
        "--measurements".as_ref(),
        polaris.as_os_str(),
        "--json".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("note (system): 4 GPUs per node, as your measurements (alcf-polaris-nccl)"), "{said}");
    let ranked = json(&out)["ranked"].as_array().unwrap().clone();
    assert!(!ranked.is_empty());
    let tp = |p: &serde_json::Value| -> u32 {
        let plan = p["plan"].as_str().unwrap();
        plan.split(',').find_map(|kv| kv.strip_prefix("tp=")).and_then(|t| t.parse().ok()).unwrap_or_else(|| panic!("{plan}"))
    };
    assert!(ranked.iter().all(|p| tp(p) <= 4), "{ranked:?}");
    // validate: a run without gpus_per_node the same as one stating 4.
    let runs = serde_json::json!({"runs": [
        {"id": "bare", "model": {"preset": "llama2-7b", "seq": 4096.0}, "system": {"gpu": "a100-40gb", "gpus": 64},
         "plan": "fsdp=64,mb=1,gbs=256", "measured": {"tokens_per_s_per_gpu": 1000.0}},
        {"id": "four", "model": {"preset": "llama2-7b", "seq": 4096.0}, "system": {"gpu": "a100-40gb", "gpus": 64, "gpus_per_node": 4},
         "plan": "fsdp=64,mb=1,gbs=256", "measured": {"tokens_per_s_per_gpu": 1000.0}}]});
    let file = dir.join("runs.json");
    std::fs::write(&file, serde_json::to_vec(&runs).unwrap()).unwrap();
    let out = dir.join("v.json");
    let o = common::run(&[
        "validate".as_ref(),
        file.as_os_str(),
        "--measurements".as_ref(),
        polaris.as_os_str(),
        "--json".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v = json(&out);
    let tps = |i: usize| v["runs"][i]["predicted_tokens_per_s_per_gpu"].as_f64().unwrap();
    assert_eq!(tps(0), tps(1), "{v}");
}

/// A node preset is a system: its GPU, its GPUs a node and its NICs, as stating them does — a
/// user's own node from a `--hw` file and a shipped one alike (both had been "unknown hardware"
/// while `hw list` showed them); `search` takes it too.
#[test]
fn a_node_preset_is_a_system_of_its_gpus_and_nics() {
    let dir = common::scratch("node-preset-system");
    let hw = dir.join("polaris.toml");
    std::fs::write(&hw, "[[node]]\nid = \"polaris\"\ngpu = \"a100-40gb\"\ngpus = 4\nnics = 2\nnic_gbps = 25.0\nsource = \"test\"\n")
        .unwrap();
    let hw = hw.to_str().unwrap();
    let project = |system: &[&str], name: &str| {
        let out = dir.join(name);
        let mut args: Vec<&str> =
            vec!["project", "--model", "llama2-7b", "--gpus", "64", "--parallel", "fsdp=64,gbs=256", "--hw", hw, "--system"];
        args.extend(system);
        args.extend(["--json", out.to_str().unwrap()]);
        let o = common::run(&args.iter().map(std::ffi::OsStr::new).collect::<Vec<_>>());
        assert!(o.status.success(), "{}", common::stderr(&o));
        (json(&out)["iteration_ms"].as_f64().unwrap(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let (preset, text) = project(&["polaris"], "preset.json");
    let (stated, _) = project(&["a100-40gb", "--gpus-per-node", "4", "--nic-gbps-per-gpu", "12.5"], "stated.json");
    assert_eq!(preset, stated, "{text}");
    assert!(text.contains("--system polaris: node preset polaris of a100-40gb — 4 GPUs and 2 × 25 GB/s NICs a node"), "{text}");
    // What the preset gives is not said as given, and its GPU's measured training runs hold the MFU
    // (a preset had read as "names no catalog GPU", its warning of an MFU above them gone).
    assert!(text.contains("4 GPUs per node as node preset polaris gives") && !text.contains("as given"), "{text}");
    assert!(text.contains("shipped training run(s) on a GPU of a100-40gb's compute") && !text.contains("names no catalog GPU"), "{text}");
    // The user's node is their GPU's (the shipped DGX A100 had stayed a100-40gb's default beside
    // it); the shipped preset, named, is still itself.
    let (bare, bare_text) = project(&["a100-40gb"], "bare.json");
    assert_eq!(bare, preset, "{bare_text}");
    assert!(bare_text.contains("node preset polaris: 4 GPUs a node, 2 × 25 GB/s NICs"), "{bare_text}");
    let (dgx, _) = project(&["dgx-a100-320gb"], "dgx.json");
    assert!(dgx != preset, "{preset} {dgx}");
    // search places its plans in the preset's nodes: tensor parallelism up to 4, where DGX A100's 8 reach 8.
    let largest_tp = |system: &str| {
        let out = dir.join("search.json");
        let args = ["search", "--model", "llama2-7b", "--gpus", "64", "--gbs", "256", "--hw", hw, "--system", system, "--json"];
        let mut args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
        args.push(out.as_os_str());
        let o = common::run(&args);
        assert!(o.status.success(), "{}", common::stderr(&o));
        let said = String::from_utf8_lossy(&o.stdout);
        assert!(said.contains("The best MFU measured in training on a GPU of this compute"), "{said}");
        let ranked = json(&out)["ranked"].as_array().unwrap().clone();
        ranked
            .iter()
            .map(|p| {
                let plan = p["plan"].as_str().unwrap();
                plan.split(',').find_map(|kv| kv.strip_prefix("tp=")).and_then(|t| t.parse::<u32>().ok()).unwrap()
            })
            .max()
            .unwrap()
    };
    assert_eq!(largest_tp("polaris"), 4);
    assert_eq!(largest_tp("dgx-a100-320gb"), 8);
}

/// `project --from` carries a run onto a GPU: a node preset as `--system` is refused with the
/// GPU and nodes to give instead (it had read "unknown hardware" while `hw list` shows it), and
/// the command it suggests runs.
#[test]
fn a_carried_run_names_the_gpu_of_a_node_preset() {
    let from = format!("{}:llama3-8b-4l-seq8192", Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/h200/runs.json").display());
    let o = common::run(&["project", "--from", &from, "--system", "dgx-b200"].map(std::ffi::OsStr::new));
    assert!(!o.status.success());
    let said = common::stderr(&o);
    let hint = "--system b200 --gpus-per-node 8 --nic-gbps-per-gpu 50";
    assert!(said.contains("--system dgx-b200: a node preset") && said.contains(hint), "{said}");
    let mut args = vec!["project", "--from", &from];
    args.extend(hint.split(' '));
    let o = common::run(&args.iter().map(std::ffi::OsStr::new).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", common::stderr(&o));
}

/// Issue 25: degrees whose product passes u32 were refused as "tp × cp × pp × dp = 0"
/// in release builds and panicked (overflow) in debug ones.
#[test]
fn overflowing_plan_degrees_are_refused_by_name() {
    for (parallel, named) in [
        ("tp=65536,pp=65536", "tp × cp × pp × dp = 65536 × 1 × 65536 × 1 overflows"),
        ("dp=65536,mb=65536,gbs=65536", "dp × mb = 65536 × 65536 overflows"),
        ("pp=65536,vpp=65536", "pp × vpp = 65536 × 65536 overflows"),
        // A whole number past 32 bits was said not to be one.
        ("tp=4294967296", "tp=4294967296: more than 4294967295"),
    ] {
        let o = bin()
            .args(["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--parallel", parallel])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{parallel}: {}", stderr(&o));
        assert!(stderr(&o).contains(named), "{parallel}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{parallel}: {}", stderr(&o));
    }
}

/// Inputs that take a step past the simulator's i64 clock, or a GPU's memory to 0 or
/// infinity, are refused by name: a decode at a context and batch of 2^32 − 1 had printed an
/// iteration (clamped) shorter than its compute, --hbm-gbps 5e-324 an infinite step, exit 0.
#[test]
fn out_of_range_steps_and_memories_are_refused() {
    for (extra, named) in [
        (vec!["--task", "decode", "--context", "4294967295", "--batch", "4294967295"], "more than a year: an input is out of range"),
        (vec!["--hbm-gbps", "5e-324"], "hbm_gbps 5e-324: from 1 to 1000000"),
        (vec!["--hbm-gb", "1e308"], "hbm_gb 1e308: from 1 to 1000000"),
    ] {
        let o = bin().args(["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8"]).args(&extra).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(named), "{extra:?}: {}", stderr(&o));
    }
    // A model file's dimension the projection refuses names the file.
    let dir = std::env::temp_dir().join(format!("tracecast-huge-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let huge = dir.join("huge.json");
    let dims = r#"{"hidden":4096,"layers":4294967295,"heads":32,"kv_heads":32,"ffn":11008,"vocab":32000,"seq":4096,"activation":"swiglu"}"#;
    std::fs::write(&huge, dims).unwrap();
    let o = bin().args(["project", "--system", "h100-sxm", "--gpus", "8", "--model"]).arg(&huge).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("--model {}: layers 4294967295: more than", huge.display())), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An inference task takes its batch from --batch: a plan's training batch settings were
/// echoed ("microbatches=64") and not run (global batch 1).
#[test]
fn inference_refuses_the_plans_training_batch_settings() {
    let decode = |extra: &[&str]| {
        bin()
            .args(["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--task", "decode"])
            .args(extra)
            .output()
            .unwrap()
    };
    // Nor does a forward pass keep gradients or optimizer states to shard, or recompute for a
    // backward: `recompute,zero=3` had been echoed in the plan and priced as nothing.
    for (parallel, named) in [
        ("tp=8,gbs=64", "gbs"),
        ("tp=8,mb=4", "mb"),
        ("tp=8,microbatches=2", "microbatches"),
        ("tp=8,recompute,zero=3", "zero, recompute"),
        ("tp=4,fsdp=2", "fsdp"),
    ] {
        let o = decode(&["--parallel", parallel]);
        assert_eq!(o.status.code(), Some(2), "{parallel}");
        let e = stderr(&o);
        assert!(e.contains(&format!(": {named} ")) && e.contains("training setting") && e.contains("--batch"), "{parallel}: {e}");
        assert!(!e.contains("setting(s)"), "{e}");
    }
    // search's --with too: the one rule.
    let o = bin()
        .args([
            "search",
            "--model",
            "llama2-7b",
            "--system",
            "h100-sxm",
            "--gpus",
            "8",
            "--task",
            "decode",
            "--with",
            "grad_sync=after,bucket=50",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("grad_sync, bucket are training settings"), "{}", stderr(&o));
    let o = decode(&["--parallel", "tp=8", "--batch", "64"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("one token for each of 64 sequences"), "{}", String::from_utf8_lossy(&o.stdout));
}

/// The measured runs files beside the repository.
fn runs_file(rel: &str) -> PathBuf {
    shared().join("..").join(rel)
}

/// Tokens per second per GPU of a training projection's JSON: the global batch's tokens over the iteration.
fn tokens_per_s_per_gpu(p: &serde_json::Value, seq: f64, gpus: f64, iteration_ms: f64) -> f64 {
    p["global_batch"].as_f64().unwrap() * seq / (iteration_ms / 1e3) / gpus
}

#[test]
fn project_from_a_measured_run_carries_the_stacks_time_to_the_next_generation() {
    let dir = scratch("project-from");
    let published = runs_file("validation/published-runs.json");
    let run = |id: &str| file_run(&published, id);
    // llm-foundry's MPT-7B measured on 8 A100 and, with the same stack, on 8 H100 (its own plan there).
    let (a100, h100) = (run("mpt-7b-8xa100-80gb"), run("mpt-7b-8xh100-sxm"));
    let measured = h100["measured"]["tokens_per_s_per_gpu"].as_f64().unwrap();
    let out = dir.join("h100.json");
    let from = format!("{}:mpt-7b-8xa100-80gb", published.display());
    let o = bin()
        .args(["project", "--from", &from, "--system", "h100-sxm", "--gpus", "8", "--parallel", h100["plan"].as_str().unwrap(), "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Stack time carried from the measured run"), "{text}");
    let p = json(&out);
    let (iteration, stack) = (p["iteration_ms"].as_f64().unwrap(), p["stack_ms"].as_f64().unwrap());
    let carried = tokens_per_s_per_gpu(&p, 2048.0, 8.0, iteration);
    let plain = tokens_per_s_per_gpu(&p, 2048.0, 8.0, iteration - stack);
    // The plain projection is too fast for this stack (+12.7 %: beyond issue 22's 10 %); with its A100 run's
    // unexplained time carried it is within that 10 % of a next-generation measurement (−4.9 %).
    assert!(plain > 1.1 * measured, "plain {plain:.0} against {measured}");
    assert!((carried / measured - 1.0).abs() < 0.10, "carried {carried:.0} against {measured}");
    assert!(p["notes"][0].as_str().unwrap().contains("mpt-7b-8xa100-80gb"), "{}", p["notes"][0]);
    // Onto its own system the carried projection is the measurement itself.
    let own = dir.join("own.json");
    let o = bin().args(["project", "-q", "--from", &from, "--json"]).arg(&own).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let p = json(&own);
    let own_rate = tokens_per_s_per_gpu(&p, 2048.0, 8.0, p["iteration_ms"].as_f64().unwrap());
    let a100_measured = a100["measured"]["tokens_per_s_per_gpu"].as_f64().unwrap();
    assert!((own_rate / a100_measured - 1.0).abs() < 1e-9, "{own_rate} against {a100_measured}");
    // And its MFU, above the other runs' best, is said to be the run's own, not an upper estimate
    // (the note had held the measurement against the others and called it one).
    let notes = p["notes"].to_string();
    assert!(
        notes.contains(
            "MFU 61.7 % is run mpt-7b-8xa100-80gb's own, measured (nothing of it changed), above the 15 other shipped training run(s)"
        ),
        "{notes}"
    );
    assert!(!notes.contains("upper estimate"), "{notes}");
}

#[test]
fn project_from_carries_nothing_where_the_model_is_slower_and_refuses_what_it_cannot_carry() {
    let dir = scratch("project-from-refused");
    let evidence = runs_file("evidence/training-runs.json");
    // A Megatron-Bridge run the model prices slower than measured: nothing to carry, said so.
    let slower = ["mb26.06-pre-training-llama3.1-405b-gb300-256-fp8"];
    assert_eq!(file_run(&evidence, slower[0])["id"], slower[0]);
    let out = dir.join("p.json");
    let o = bin().args(["project", "-q", "--from", &format!("{}:{}", evidence.display(), slower[0]), "--json"]).arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let p = json(&out);
    assert!(p.get("stack_ms").is_none(), "{p}");
    assert!(p["notes"][0].as_str().unwrap().contains("nothing carried"), "{}", p["notes"][0]);
    // A file of many runs needs the run's id; an unknown id names some that exist; the model is the run's.
    let published = runs_file("validation/published-runs.json");
    let refused = |args: &[&str], says: &str| {
        let o = bin().args(["project", "--system", "h100-sxm"]).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    };
    let p = published.display().to_string();
    refused(&["--from", &p], "name one of its 17 runs");
    refused(&["--from", &format!("{p}:mpt-8b")], "has no run \"mpt-8b\" (it has sc21-gpt-1.7b");
    refused(&["--from", &format!("{p}:mpt-7b-8xa100-80gb"), "--model", "llama2-7b"], "takes the model from the run");
    refused(&["--from", &format!("{p}:mpt-7b-8xa100-80gb"), "--task", "decode"], "is not training");
    refused(&["--from", &format!("{}:x", dir.join("absent.json").display())], "absent.json");
    // A training step reads no inference shape: refused, as without --from (it was ignored).
    refused(&["--from", &format!("{p}:mpt-7b-8xa100-80gb"), "--batch", "4"], "--batch applies to --task prefill and decode");
    refused(&["--from", &format!("{p}:mpt-7b-8xa100-80gb"), "--context", "100"], "--context applies to --task decode");
    // A run's number format is its stack's: an FP8 run does not carry onto a GPU without FP8.
    let o = bin()
        .args(["project", "--system", "a100-80gb", "--from", &format!("{}:nemo24.07-pretrain-gpt3-5b-64xh100", evidence.display())])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("trains its linear layers in FP8 (its precision); a100-80gb has no FP8 peak"), "{}", stderr(&o));
    // A 16-bit run carries onto a GPU of FP16 and no BF16 (V100), as project prices one there,
    // and says so (it had priced FP16 without a word).
    let v100 = dir.join("v100.json");
    let o = bin()
        .args(["project", "-q", "--system", "v100", "--from", &format!("{p}:mpt-7b-8xa100-80gb"), "--json"])
        .arg(&v100)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let notes = json(&v100)["notes"].to_string();
    assert!(notes.contains("trains in bf16; v100 has no bf16 path: its linear layers priced in fp16"), "{notes}");
    // A plan given in place of the run's is said beside the run's.
    let h100 = dir.join("h100.json");
    let o = bin()
        .args(["project", "-q", "--system", "h100-sxm", "--from", &format!("{p}:mpt-7b-8xa100-80gb")])
        .args(["--parallel", "tp=2,fsdp=4,mb=6,gbs=96", "--json"])
        .arg(&h100)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let notes = json(&h100)["notes"].to_string();
    assert!(notes.contains(r#"plan \"tp=2,fsdp=4,mb=6,gbs=96\" given in place of the run's \"fsdp=8,mb=6,gbs=96\""#), "{notes}");
    assert!(!notes.contains("no bf16 path"), "{notes}");
    // A file of one run needs no id.
    let one = dir.join("one.json");
    let mpt = file_run(&published, "mpt-7b-8xa100-80gb");
    std::fs::write(&one, serde_json::json!({"runs": [mpt]}).to_string()).unwrap();
    let o = bin().args(["project", "-q", "--from"]).arg(&one).args(["--system", "h100-sxm"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // An id may hold colons: the file is the prefix that names one.
    let mut colon = mpt.clone();
    colon["id"] = serde_json::json!("mpt:7b:a100");
    let colons = dir.join("colons.json");
    std::fs::write(&colons, serde_json::json!({"runs": [colon, mpt]}).to_string()).unwrap();
    let o = bin().args(["project", "-q", "--from", &format!("{}:mpt:7b:a100", colons.display()), "--system", "h100-sxm"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A profile `validate --fit` writes with `--hw` is of the catalog it read: the same `--hw` reads
/// it back (it had been refused, its device the shipped profile's peaks), and a catalog without
/// that entry refuses it, saying why.
#[test]
fn a_profile_fitted_with_a_users_catalog_reads_back_with_that_catalog() {
    let dir = scratch("fit-with-hw");
    let mut runs: serde_json::Value = serde_json::from_slice(&std::fs::read(runs_file("validation/published-runs.json")).unwrap()).unwrap();
    runs["runs"].as_array_mut().unwrap().retain(|r| r["system"]["gpu"] == "h100-sxm");
    let (runs_path, hw, fit) = (dir.join("h100-runs.json"), dir.join("capped.toml"), dir.join("fit.json"));
    std::fs::write(&runs_path, runs.to_string()).unwrap();
    std::fs::write(
        &hw,
        "[[gpu]]\nid = \"h100-sxm\"\nname = \"NVIDIA H100 capped\"\nsource = \"a test\"\nbf16 = 800.0\nfp16 = 800.0\nmemory_gb = 80.0\nhbm_gbps = 3000.0\nlink_gbps = 450.0\nsms = 132\n",
    )
    .unwrap();
    let o = bin().args(["validate", "-q"]).arg(&runs_path).arg("--hw").arg(&hw).arg("--fit").arg(&fit).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let project = |with_hw: bool| {
        let mut c = bin();
        c.args(["project", "-q", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--profile"]).arg(&fit);
        if with_hw {
            c.arg("--hw").arg(&hw);
        }
        c.output().unwrap()
    };
    let o = project(true);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = project(false);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("fitted against bf16 peak 800, where the catalog has 989.4"), "{}", stderr(&o));
}

/// A target profile fitted to measured runs (`validate --fit`) holds their stack's time in
/// its GEMM correction: `--from` then carries none of the source run's (it had counted the
/// stack twice: MPT-7B A100 → H100 at 9 088 tokens/s per GPU where 10 643 were measured), and
/// the MFU is of the step it prints. A run whose linear layers are FP8 gets no BF16
/// correction, so its stack time is still carried.
#[test]
fn project_from_carries_no_stack_time_onto_a_profile_fitted_to_runs_of_its_format() {
    let dir = scratch("project-from-fitted");
    let published = runs_file("validation/published-runs.json");
    let fit = dir.join("fit.json");
    let o = bin().args(["validate", "-q"]).arg(&published).arg("--fit").arg(&fit).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let h100_fit = dir.join("fit.h100-sxm.json");
    let h100 = file_run(&published, "mpt-7b-8xh100-sxm");
    let measured = h100["measured"]["tokens_per_s_per_gpu"].as_f64().unwrap();
    let carry = |from: &std::path::Path, id: &str, name: &str| {
        let out = dir.join(name);
        let o = bin()
            .args(["project", "-q", "--from", &format!("{}:{id}", from.display())])
            .args(["--system", "h100-sxm", "--gpus", "8", "--parallel", h100["plan"].as_str().unwrap(), "--profile"])
            .arg(&h100_fit)
            .arg("--json")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        json(&out)
    };
    let p = carry(&published, "mpt-7b-8xa100-80gb", "bf16.json");
    assert!(p.get("stack_ms").is_none(), "{p}");
    assert!(p["notes"][0].as_str().unwrap().contains("not carried"), "{}", p["notes"][0]);
    let rate = |p: &serde_json::Value| tokens_per_s_per_gpu(p, 2048.0, 8.0, p["iteration_ms"].as_f64().unwrap());
    // Within the fit's own in-sample error on this run (+3.1 %, the three H100 runs share one
    // correction); counting the stack twice had given −14.6 %.
    assert!((rate(&p) / measured - 1.0).abs() < 0.05, "{:.0} against {measured}", rate(&p));
    // A run with FP8 linear layers: the fit has no FP8 correction, so the stack time is
    // carried; the MFU is of the step printed, so MFU per token/s is the model's, as without it.
    let mut fp8 = file_run(&published, "mpt-7b-8xa100-80gb");
    fp8["precision"] = serde_json::json!("FP8");
    // On a GPU with an FP8 peak (Hopper), at the A100's measured rate: time the model does not explain.
    fp8["system"]["gpu"] = serde_json::json!("h200");
    let one = dir.join("fp8-run.json");
    std::fs::write(&one, serde_json::json!({"runs": [fp8]}).to_string()).unwrap();
    let q = carry(&one, "mpt-7b-8xa100-80gb", "fp8.json");
    assert!(q["stack_ms"].as_f64().is_some_and(|s| s > 0.0), "{q}");
    let per_rate = |p: &serde_json::Value| p["mfu"].as_f64().unwrap() / rate(p);
    assert!((per_rate(&q) / per_rate(&p) - 1.0).abs() < 1e-9, "{} vs {}", per_rate(&q), per_rate(&p));
}

fn file_run(path: &std::path::Path, id: &str) -> serde_json::Value {
    json(path)["runs"].as_array().unwrap().iter().find(|r| r["id"] == id).unwrap().clone()
}

#[test]
fn project_from_keeps_the_runs_gpu_variant_on_its_gpu_and_names_it_elsewhere() {
    let dir = scratch("project-from-variant");
    let evidence = runs_file("evidence/training-runs.json");
    // torchtitan's Grand Teton H100s: 96 GB of HBM2e at 2.4 TB/s, not the catalog's 80 GB.
    let id = "tt-llama3.1-8b-8xh100-fsdp8-cp1";
    assert_eq!(file_run(&evidence, id)["system"]["hbm_gb"], 96);
    let from = format!("{}:{id}", evidence.display());
    let project = |args: &[&str], name: &str| {
        let out = dir.join(name);
        let o = bin().args(["project", "-q", "--from", &from, "--json"]).arg(&out).args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        json(&out)
    };
    let own = project(&["--gpus", "8"], "own.json");
    assert_eq!(own["hbm_gb"], 96.0);
    let same_gpu = project(&["--system", "h100-sxm"], "same.json");
    assert_eq!(same_gpu["hbm_gb"], 96.0);
    let other = project(&["--system", "h200"], "h200.json");
    assert_eq!(other["hbm_gb"], 141.0);
    let notes: Vec<&str> = other["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
    assert!(notes.iter().any(|n| n.contains("hbm_gb 96") && n.contains("not carried")), "{notes:?}");
}

#[test]
fn a_task_shape_flag_the_task_does_not_read_is_refused() {
    for (task, flag, value, wants) in [
        ("train", "--prompt", "7", "--prompt applies to --task prefill"),
        ("prefill", "--context", "99", "--context applies to --task decode"),
        ("decode", "--prompt", "99", "--prompt applies to --task prefill"),
        ("train", "--batch", "4", "--batch applies to --task prefill and decode, not --task train"),
    ] {
        let o = common::bin()
            .args(["project", "--model", "llama3-8b", "--system", "h100-sxm", "--gpus", "8", "--task", task, flag, value])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{task} {flag}");
        assert!(common::stderr(&o).contains(wants), "{}", common::stderr(&o));
    }
    // A MAD-Max task file sets its own batch and lengths, given whole or as --task.
    let task = madmax("task_cfgs/llm/llm_train.json");
    let whole = [madmax("model_cfgs/llm/llama2_70b.json"), madmax("system_cfgs/dc_A/dc_A_2048.json"), task.clone()];
    let o = common::bin().args(["project", "--batch", "4", "--madmax"]).args(&whole).output().unwrap();
    assert!(!o.status.success() && common::stderr(&o).contains("--batch applies to --task prefill and decode; the MAD-Max task file"));
    let o = common::bin()
        .args(["project", "--model", "llama2-70b", "--system", "a100-80gb", "--gpus", "2048", "--prompt", "512", "--task"])
        .arg(&task)
        .output()
        .unwrap();
    assert!(!o.status.success() && common::stderr(&o).contains("--prompt applies to --task prefill and decode; the MAD-Max task file"));
    // A decode step's throughput is tokens: one for each sequence per step.
    let o = common::bin()
        .args(["project", "--model", "llama3-8b", "--system", "h100-sxm", "--gpus", "8", "--parallel", "tp=8"])
        .args(["--task", "decode", "--batch", "32", "--context", "1024"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("one token for each of 32 sequences") && !text.contains("samples/s"), "{text}");
}

#[test]
fn validate_takes_one_profile_per_gpu() {
    // Two profiles of H100: which one priced the runs would be the order's accident.
    let h100 = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("calibrate/profiles/h100-sxm.json");
    let runs = common::shared().join("../validation/published-runs.json");
    let o = common::run(&[
        "validate".as_ref(),
        runs.as_os_str(),
        "--profile".as_ref(),
        h100.as_os_str(),
        "--profile".as_ref(),
        h100.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(common::stderr(&o).contains("are both of h100-sxm: give one profile per GPU"), "{}", common::stderr(&o));
    // A profile of a GPU no run uses prices nothing, and says so.
    let mi300x = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("calibrate/profiles/mi300x.json");
    let o = common::run(&["validate".as_ref(), runs.as_os_str(), "--profile".as_ref(), mi300x.as_os_str()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("is of mi300x, which no run uses"), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn a_profile_fit_outside_the_physical_bounds_is_said_where_project_leaves_it_out() {
    // The shipped H100 profile with its GEMM efficiency edited to 7 (700 % of the peak):
    // `replay --target` said it was not used; `project` had left it out in silence.
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("calibrate/profiles/h100-sxm.json");
    let mut p: serde_json::Value = serde_json::from_slice(&std::fs::read(shipped).unwrap()).unwrap();
    let gemms: Vec<&mut serde_json::Value> = p["kernels"].as_array_mut().unwrap().iter_mut().filter(|k| k["class"] == "gemm").collect();
    assert!(!gemms.is_empty());
    for k in gemms {
        k["efficiency"] = serde_json::json!(7.0);
    }
    let edited = common::scratch("unphysical-fit").join("h100.json");
    std::fs::write(&edited, serde_json::to_vec(&p).unwrap()).unwrap();
    let o = common::bin()
        .args(["project", "--model", "llama3-8b", "--system", "h100-sxm", "--gpus", "8", "--profile"])
        .arg(&edited)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("calibration profile: gemm/") && text.contains("η 7.000") && text.contains("is not used"), "{text}");
    // search and validate say it too.
    let o = common::bin()
        .args(["search", "--model", "llama3-8b", "--system", "h100-sxm", "--gpus", "8", "--profile"])
        .arg(&edited)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("note: calibration profile: gemm/") && text.contains("η 7.000"), "{text}");
    let runs = common::shared().join("../validation/published-runs.json");
    let o = common::bin().arg("validate").arg(&runs).arg("--profile").arg(&edited).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("h100.json: gemm/") && text.contains("η 7.000") && text.contains("is not used"), "{text}");
}

#[test]
fn gpus_that_do_not_fill_whole_nodes_are_said() {
    let o = common::bin()
        .args(["project", "--model", "llama3-8b", "--system", "h100-sxm", "--gpus", "16", "--gpus-per-node", "3", "--parallel", "fsdp=16"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("16 GPUs do not fill nodes of 3: 5 full nodes and one of 1"), "{text}");
}

#[test]
fn a_torchtitan_runs_memory_is_near_what_it_logged() {
    // torchtitan logged the memory its caching allocator reserved (47.96 and 46.97 GiB) for
    // Llama-3.1-8B, FP8 linears, per-op selective checkpointing, 2 × 8192 tokens per GPU on 32 and
    // 64 H200s. Keeping every activation and no logits had priced 68.5 and 66.3 GB (33 and 31 %
    // above); the policy's saved outputs and the loss's 32-bit logits 49.1 and 46.9 GB.
    let dir = scratch("project-from-memory");
    let evidence = runs_file("evidence/training-runs.json");
    for id in ["tt-llama3.1-8b-32xh200-trainy", "tt-llama3.1-8b-64xh200-trainy"] {
        let run = file_run(&evidence, id);
        let published = run["measured"]["as_published"].as_str().unwrap();
        let gib: f64 = published.split("memory ").nth(1).unwrap().split(" GiB").next().unwrap().parse().unwrap();
        let out = dir.join(format!("{id}.json"));
        let o = bin().args(["project", "-q", "--from", &format!("{}:{id}", evidence.display()), "--json"]).arg(&out).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let p = json(&out);
        let gb = p["memory_gb_per_gpu"].as_f64().unwrap();
        let logged = gib * 1024f64.powi(3) / 1e9;
        assert!((gb / logged - 1.0).abs() < 0.15, "{id}: {gb:.1} GB projected, {logged:.1} GB logged");
    }
}

#[test]
fn search_with_settings_refuses_what_it_chooses() {
    let o =
        common::bin().args(["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--with", "gbs=8"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        common::stderr(&o).contains("--with gbs=8: the search chooses gbs itself (the global batch is --gbs)"),
        "{}",
        common::stderr(&o)
    );
    // A degree is pinned, and said above the ranking; the baseline it leaves out is said to be.
    let o = common::bin()
        .args(["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--top", "3", "--with", "tp=2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.contains("  only plans with tp=2 (--with)"), "{text}");
    assert!(text.contains("(tp=1, pp=1): not among the plans --with tp=2 leaves"), "{text}");
    assert!(text.lines().filter(|l| l.contains("  tp=")).all(|l| l.contains("tp=2,")), "{text}");
    // Ranked by latency: said above the ranking and in the JSON, the shortest step first.
    let dir = scratch("search-latency");
    let doc = dir.join("s.json");
    let o = common::bin()
        .args(["search", "--model", "llama2-70b", "--system", "h100-sxm", "--gpus", "64", "--task", "decode", "--batch", "16"])
        .args(["--objective", "latency", "--json"])
        .arg(&doc)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.contains("  ranked by latency: time per output token, the shortest first"), "{text}");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&doc).unwrap()).unwrap();
    assert_eq!(doc["objective"], "latency");
    let steps: Vec<f64> = doc["ranked"].as_array().unwrap().iter().map(|p| p["tpot_ms"].as_f64().unwrap()).collect();
    assert!(steps.len() > 2 && steps.windows(2).all(|w| w[0] <= w[1]), "{steps:?}");
    // A family no measurement names is refused before any plan is tried (each would be).
    let typo = ["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--with", "attention=fa-trition"];
    let o = common::bin().args(typo).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(common::stderr(&o).contains("attention=fa-trition: no measured attention kernel family"), "{}", common::stderr(&o));
    let o = common::bin()
        .args(["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--top", "1", "--with", "bucket=40"])
        .output()
        .unwrap();
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains(",bucket=40 "), "{}", String::from_utf8_lossy(&o.stdout));
    // Plans longer than the plan column keep their numbers under the headings: each row's
    // iteration time ends where the heading "iteration ms" ends.
    let long = ["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "64", "--top", "5"];
    let o = common::bin().args(long).args(["--with", "attention=fa2,bucket=76,tp_overlap"]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let head = text.lines().find(|l| l.starts_with("rank  plan")).unwrap_or_else(|| panic!("{text}"));
    let end = head.find("iteration ms").unwrap() + "iteration ms".len();
    let rows: Vec<&str> = text.lines().filter(|l| l.trim_start().split(' ').next().is_some_and(|r| r.parse::<u32>().is_ok())).collect();
    assert_eq!(rows.len(), 5, "{text}");
    for row in rows {
        assert!(row.len() > end && row.as_bytes()[end] == b' ' && row.as_bytes()[end - 1] != b' ', "{row}\n{head}");
    }
}

/// `--hbm-gbps` moves what streams from HBM both ways: an H100 given H200's 4.8 TB/s decodes
/// as fast as an H200 (one Hopper GEMM table; each streams its weights at its own bandwidth),
/// and an H200 given the H100's 3.35 TB/s as slow as an H100. A faster HBM had sped up only
/// attention: the GEMMs kept the catalog part's streaming rate.
#[test]
fn an_hbm_bandwidth_variant_decodes_as_the_gpu_with_that_bandwidth() {
    let dir = scratch("project-hbm-variant");
    let decode = |system: &str, extra: &[&str], name: &str| {
        let out = dir.join(format!("{name}.json"));
        let o = bin()
            .args(["project", "-q", "--model", "llama3-8b", "--system", system, "--gpus", "1", "--task", "decode", "--batch", "1"])
            .args(["--context", "4096", "--parallel", "tp=1", "--json"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        json(&out)["compute_ms"].as_f64().unwrap()
    };
    let (h100, h200) = (decode("h100-sxm", &[], "h100"), decode("h200", &[], "h200"));
    assert!(h200 < 0.8 * h100, "{h200} vs {h100}");
    let faster = decode("h100-sxm", &["--hbm-gbps", "4800"], "faster");
    let slower = decode("h200", &["--hbm-gbps", "3350"], "slower");
    // Within the two parts' measured streaming rates (H100 2.97, H200 4.15 TB/s of 3.35 and 4.8).
    assert!((faster / h200 - 1.0).abs() < 0.05, "{faster} vs {h200}");
    assert!((slower / h100 - 1.0).abs() < 0.05, "{slower} vs {h100}");
}

/// `search`'s "plain FSDP" baseline is plain FSDP: Mixtral's had been `fsdp=512,ep=8`, expert
/// parallelism included, which made the best plan's speed-up over it smaller than over FSDP.
#[test]
fn the_plain_fsdp_baseline_has_no_expert_or_context_parallelism() {
    let dir = scratch("search-baseline");
    let out = dir.join("s.json");
    let o = bin()
        .args(["search", "-q", "--model", "mixtral-8x7b", "--system", "h100-sxm", "--gpus", "64", "--top", "3", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&out);
    let plan = doc["baseline"]["plan"].as_str().unwrap().to_string();
    assert!(plan.starts_with("tp=1,pp=1,fsdp=") && !plan.contains("ep=") && !plan.contains("cp="), "{plan}");
}

/// What priced a projection, said of the job it prices: one GPU has no collectives, so no
/// rule for them is named (the in-node all-reduce's was); attention no measured kernel prices
/// is priced by an efficiency the note states (it had said "by η" without a number).
#[test]
fn the_notes_name_the_rules_and_numbers_of_this_job() {
    let notes = |args: &[&str]| {
        let o = bin().arg("project").args(args).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.trim_start().starts_with("note:")).map(str::to_string).collect::<Vec<_>>()
    };
    let one = notes(&["--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "1"]);
    assert!(!one.iter().any(|l| l.contains("collectives")), "{one:#?}");
    let eight = notes(&["--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8"]);
    assert!(eight.iter().any(|l| l.contains("collectives in a node")), "{eight:#?}");
    // A GPU a user added, of no vendor the catalog knows, and no profile: the default GEMM η.
    let dir = scratch("project-notes");
    let hw = dir.join("gpu.toml");
    std::fs::write(
        &hw,
        "[[gpu]]\nid = \"my-gpu\"\nname = \"A GPU of mine\"\nsource = \"test\"\nfp32 = 50.0\nbf16 = 500.0\nfp16 = 500.0\nmemory_gb = 96.0\nhbm_gbps = 3000.0\nlink_gbps = 300.0\n",
    )
    .unwrap();
    let mine = notes(&["--model", "llama2-7b", "--system", "my-gpu", "--gpus", "8", "--hw", hw.to_str().unwrap()]);
    let default_eta = mine.iter().find_map(|l| l.split("default GEMM η ").nth(1)).expect("the default GEMM η named");
    let default_eta: f64 = default_eta.split(',').next().unwrap().parse().unwrap();
    let attention = mine.iter().find(|l| l.contains("attention by η")).unwrap_or_else(|| panic!("{mine:#?}"));
    let eta: f64 = attention.split("by η ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert_eq!(eta, default_eta, "{attention}");
    assert!(attention.contains("the GEMM η: no attention fit"), "{attention}");
    // A GPU of H100's design point without traces takes H100's fits; `search` says its best GEMM
    // was measured there (it had said "measured on this GPU" of a GPU nobody measured).
    let like_h100 = dir.join("like-h100.toml");
    std::fs::write(
        &like_h100,
        "[[gpu]]\nid = \"my-hopper\"\nname = \"A Hopper of mine\"\nsource = \"test\"\nfp32 = 67.0\nbf16 = 1000.0\nfp16 = 1000.0\nmemory_gb = 80.0\nhbm_gbps = 3350.0\nlink_gbps = 450.0\nsms = 132\nsms_source = \"test\"\n",
    )
    .unwrap();
    let o = bin()
        .args(["search", "--model", "llama3-8b", "--system", "my-hopper", "--gpus", "8", "--top", "1", "--hw", like_h100.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("the best GEMM measured on h100-sxm, the traced GPU most like this one: "), "{text}");
    assert!(!text.contains("measured on this GPU"), "{text}");
    // Decode attention (one query token) is priced by its KV reads or its FLOPs on every GPU:
    // said so, not that nothing was measured (H100's attention kernels are).
    let decode = notes(&["--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "1", "--task", "decode", "--batch", "1"]);
    assert!(decode.iter().any(|l| l.contains("decode attention: the slower of its KV-cache reads")), "{decode:#?}");
    assert!(!decode.iter().any(|l| l.contains("no measured")), "{decode:#?}");
}

/// The repository's llm-foundry runs file (`fixtures/llm-foundry`, written by its `extract.py`)
/// stays a runs file every run of which projects: 216 MPT runs on A100-40GB, A100-80GB and H100,
/// the per-GPU lines under the summary.
#[test]
fn llm_foundrys_published_runs_all_project() {
    let runs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/llm-foundry/runs.json");
    let out = scratch("llm-foundry").join("v.json");
    let o = common::run(&["validate".as_ref(), runs.as_os_str(), "--json".as_ref(), out.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("216 runs: median |error|"), "{text}");
    for gpu in ["a100-40gb", "a100-80gb", "h100-sxm"] {
        assert!(text.lines().any(|l| l.trim_start().starts_with(gpu) && l.contains(" runs: median |error|")), "{gpu}: {text}");
    }
    assert!(!text.contains("not projected"), "{text}");
    // Each model's H100 runs at 128 and 512 GPUs (one configuration, FSDP over all of them):
    // the projection falls with the GPU count as the measured throughput does (2–10 %), where
    // the all-gathers' ring, priced step by step from a 2-node all-reduce curve whose small sizes
    // are its fixed cost, had made it fall 5–41 % (MPT-7B −30.8 % at 512 GPUs against +8.3 %
    // at 128).
    let v = json(&out);
    let rows = v["runs"].as_array().unwrap();
    let rate = |id: &str| {
        let r = rows.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("{id}"));
        (r["measured_tokens_per_s_per_gpu"].as_f64().unwrap(), r["predicted_tokens_per_s_per_gpu"].as_f64().unwrap())
    };
    for (model, config) in [("1b", "mb12"), ("3b", "mb8"), ("7b", "mb6"), ("13b", "mb16"), ("30b", "mb8"), ("70b", "mb8")] {
        let id = |gpus: u32| {
            rows.iter()
                .filter_map(|r| r["id"].as_str())
                .find(|i| i.starts_with(&format!("mpt-{model}-{gpus}xh100-sxm-seq2048-{config}-")))
                .unwrap_or_else(|| panic!("mpt-{model} {gpus} {config}"))
                .to_string()
        };
        let ((m128, p128), (m512, p512)) = (rate(&id(128)), rate(&id(512)));
        let (measured, projected) = (m512 / m128, p512 / p128);
        assert!((projected / measured - 1.0).abs() < 0.10, "mpt-{model}: 512 ÷ 128 GPUs {projected:.3} projected, {measured:.3} measured");
    }
}

/// FlashAttention 2 (code written for Ampere) on B200 gains what it gained from A100 to H100
/// for their peaks, not B200's whole peak ratio. Checked against two measurements the rule was
/// not built on: torchtitan's Llama-3-8B on B200 ran 12 211 tokens/s per GPU with cuDNN
/// attention and 10 902 with FA2 (pytorch/torchtitan PR #1196, 2025-05-14), where the two had
/// been priced the same; and the held-back H200 → B200 Llama-3-8B speed-up of issue 22, 1.69×
/// measured with one software stack, where the whole peak ratio gave 1.87×.
#[test]
fn flash_attention_2_on_blackwell_gains_what_its_code_gained_the_generation_before() {
    let dir = scratch("project-fa2-blackwell");
    let iteration = |system: &str, plan: &str| {
        let out = dir.join(format!("{system}-{}.json", plan.replace([',', '='], "_")));
        let o = bin()
            .args(["project", "-q", "--model", "llama3-8b", "--system", system, "--gpus", "8", "--parallel", plan, "--json"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let p = json(&out);
        (p["iteration_ms"].as_f64().unwrap(), p["notes"].to_string())
    };
    // torchtitan's configuration of the time: batch 1, FSDP over the 8 GPUs, per-op checkpointing.
    let torchtitan = "fsdp=8,mb=1,recompute=op,grad_reduce=fp32";
    let (fa2, notes) = iteration("b200", &format!("{torchtitan},attention=fa2"));
    let (cudnn, _) = iteration("b200", &format!("{torchtitan},attention=cudnn"));
    assert!(notes.contains("to the power") && notes.contains("a100-80gb to h100-sxm"), "{notes}");
    let measured = 12211.0 / 10902.0;
    assert!(fa2 / cudnn > 1.05 && fa2 / cudnn < measured * 1.05, "FA2 ÷ cuDNN step {:.3} against {measured:.3} measured", fa2 / cudnn);
    let (h200, _) = iteration("h200", "fsdp=8,mb=2,attention=fa2");
    let (b200, _) = iteration("b200", "fsdp=8,mb=2,attention=fa2");
    assert!((h200 / b200 / 1.69 - 1.0).abs() < 0.10, "H200 → B200 {:.3}× against 1.69× measured", h200 / b200);
}

/// `validate --fit` says which GPUs and formats it fitted nothing to and why: a user's own GEMM
/// table of the GPU prices its runs, which no table correction then moves (the 16-bit fit had been
/// left out without a word). With nothing fitted at all it is an error that says so.
#[test]
fn validate_fit_names_what_it_did_not_fit() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let (h200_runs, gemms) = (root.join("fixtures/h200/runs.json"), root.join("fixtures/h200/gemm.csv"));
    let dir = scratch("validate-not-fitted");
    let fit = dir.join("fit.json");
    let o = bin().arg("validate").arg(&h200_runs).arg("--measurements").arg(&gemms).arg("--fit").arg(&fit).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(stderr(&o).contains("nothing to fit; h200 bf16: your measurements price h200's bf16 GEMMs"), "{}", stderr(&o));
    assert!(!fit.exists());
    // Beside H100 runs, which are fitted: the H200 runs are named, and their leave-one-out rows
    // are priced, not dropped.
    let mut runs: serde_json::Value = json(&h200_runs);
    let foundry = json(&root.join("fixtures/llm-foundry/runs.json"));
    let h100: Vec<serde_json::Value> =
        foundry["runs"].as_array().unwrap().iter().filter(|r| r["system"]["gpu"] == "h100-sxm").take(3).cloned().collect();
    runs["runs"].as_array_mut().unwrap().extend(h100);
    let file = dir.join("runs.json");
    std::fs::write(&file, serde_json::to_vec(&runs).unwrap()).unwrap();
    let out = dir.join("fit-result.json");
    let o =
        bin().arg("validate").arg(&file).arg("--measurements").arg(&gemms).arg("--fit").arg(&fit).arg("--json").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("h100-sxm     bf16 GEMM correction"), "{stdout}");
    assert!(stdout.contains("h200         bf16 not fitted (9 run(s)): your measurements price"), "{stdout}");
    let r = json(&out);
    assert_eq!(r["not_fitted"][0]["runs"].as_array().unwrap().len(), 9);
    let loo = r["leave_one_out"]["runs"].as_array().unwrap();
    let h200_row = loo.iter().find(|x| x["id"] == "llama3-8b-4l-seq8192").unwrap();
    assert!(h200_row["predicted_tokens_per_s_per_gpu"].as_f64().is_some(), "{h200_row}");
    assert!(h200_row["notes"][0].as_str().unwrap().starts_with("not fitted: your measurements price"), "{h200_row}");
}

/// `search --with attention=fa3` on H100 (FA3's backward not measured) says its plans' attention
/// was priced by the fastest measured family, as `project` does: it had shown `attention=fa3`
/// in every plan at FA2's prices without a word.
#[test]
fn search_says_what_its_with_settings_were_priced_as() {
    let o = bin()
        .args(["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--top", "1", "--with", "attention=fa3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("note (--with, on the best plan): attention=fa3: no forward-plus-backward measurement"), "{stdout}");
    let o = bin()
        .args(["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--top", "1", "--with", "attention=fa2"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&o.stdout).contains("note (--with"));
}

/// Inference's default plan is the widest TP inside a node that divides the GPUs and the heads:
/// 12 GPUs of 8 a node had been given tp=8 and refused as if the user's plan were wrong.
#[test]
fn inference_picks_a_default_plan_that_divides() {
    // Nodes of 12: TP stays inside one (tp=8 would straddle two).
    for (gpus, per_node, plan) in [
        ("12", "8", "plan tp=4,pp=1,dp=3 ("),
        ("7", "8", "plan tp=1,pp=1,dp=7 ("),
        ("16", "8", "plan tp=8,pp=1,dp=2 ("),
        ("24", "12", "plan tp=4,pp=1,dp=6 ("),
    ] {
        let o = bin()
            .args([
                "project",
                "--model",
                "llama2-7b",
                "--system",
                "h100-sxm",
                "--gpus",
                gpus,
                "--gpus-per-node",
                per_node,
                "--task",
                "decode",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{gpus}: {}", stderr(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains(plan), "{gpus}: {}", String::from_utf8_lossy(&o.stdout));
    }
}

/// With `--madmax` the three files name the model, system and task: `--model`, `--system` and
/// `--task` are refused, and so are `--gpus` and `--parallel` under MAD-Max's assumptions; under
/// tracecast's they replace the files' and the notes say so (each had been ignored or applied
/// without a word).
#[test]
fn madmax_files_and_the_flags_that_would_say_the_same() {
    let files =
        [madmax("model_cfgs/llm/llama2_70b.json"), madmax("system_cfgs/dc_A/dc_A_2048.json"), madmax("task_cfgs/llm/llm_train.json")];
    let project = |extra: &[&str]| bin().arg("project").arg("--madmax").args(&files).args(extra).output().unwrap();
    for (extra, why) in [
        (&["--model", "llama2-7b"][..], "leave out --model and --system"),
        (&["--system", "h100-sxm", "--gpus", "2048"][..], "leave out --model and --system"),
        (&["--task", "decode"][..], "the MAD-Max task file sets the task"),
        (&["--assumptions", "madmax", "--gpus", "64"][..], "do not apply under --assumptions madmax"),
        (&["--assumptions", "madmax", "--parallel", "tp=8,fsdp=256"][..], "do not apply under --assumptions madmax"),
    ] {
        let o = project(extra);
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        assert!(stderr(&o).contains(why), "{extra:?}: {}", stderr(&o));
    }
    // A key MAD-Max's files do not have (a misspelt `pooling_size`) is refused, not ignored.
    let dir = scratch("madmax-unknown-key");
    let mut model = json(&files[0]);
    model["poolng_size"] = serde_json::json!(150);
    let misspelt = dir.join("model.json");
    std::fs::write(&misspelt, serde_json::to_vec(&model).unwrap()).unwrap();
    let o = bin().arg("project").arg("--madmax").arg(&misspelt).args(&files[1..]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown field `poolng_size`"), "{}", stderr(&o));
    // Files that do not go together are named with the error (a DLRM on an LLM's task had
    // said "mlp_parallel: degrees multiply to 1, …" alone).
    let dlrm = madmax("model_cfgs/dlrm/dlrm_a.json");
    let o = bin().args(["project", "--assumptions", "madmax", "--madmax"]).arg(&dlrm).args(&files[1..]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("dlrm_a.json") && e.contains("llm_train.json") && e.contains("degrees multiply to 1"), "{e}");
    let o = project(&["--parallel", "tp=8,pp=4,fsdp=64,gbs=2048"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("note: --parallel tp=8,pp=4,fsdp=64,gbs=2048 in place of the plan of"));
    // `--gpus` alone spreads the task file's plan over them by its data parallelism, the global
    // batch kept (it had been refused: "tp × cp × pp × dp = 2048 but the cluster has 1024 GPUs").
    let o = project(&["--gpus", "1024"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("plan tp=1,pp=1,fsdp=1024,mb=1,microbatches=2"), "{text}");
    assert!(
        text.contains("dp 2048 → 1024 (tp, cp and pp kept), the global batch of 2048 sequences kept (2 microbatches a replica)"),
        "{text}"
    );
}

/// tracecast's DLRM runs every GPU of the system with one batch: a MAD-Max task of another GPU
/// count (512 on ZionEX-128) or whose embeddings take another global batch than its MLPs is
/// refused, as under MAD-Max's assumptions (it had been projected as another job, silently).
#[test]
fn a_dlrm_task_of_another_job_is_refused_not_resized() {
    let (model, system) = (madmax("model_cfgs/dlrm/dlrm_a.json"), madmax("system_cfgs/zionex/zionex_128.json"));
    let o =
        bin().arg("project").arg("--madmax").arg(&model).arg(&system).arg(madmax("task_cfgs/dlrm/dlrm_inference.json")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("mlp_parallel_degree [512] multiplies to 512, the system has 128 GPUs"), "{}", stderr(&o));
    // --gpus runs it on that many, and says so.
    let o = bin()
        .arg("project")
        .arg("--madmax")
        .arg(&model)
        .arg(&system)
        .arg(madmax("task_cfgs/dlrm/dlrm_inference.json"))
        .args(["--gpus", "64"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("note: --gpus 64 in place of the 128 GPUs of"));
    // The system's own count given: still said that the task's degrees were not run.
    let dlrm = |extra: &[&str]| {
        bin()
            .arg("project")
            .arg("--madmax")
            .arg(&model)
            .arg(&system)
            .arg(madmax("task_cfgs/dlrm/dlrm_inference.json"))
            .args(extra)
            .output()
            .unwrap()
    };
    let o = dlrm(&["--gpus", "128"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("--gpus 128: the task's mlp_parallel_degree [512] (512 GPUs) run on 128 GPUs"));
    // --parallel lays out a transformer: refused for a DLRM (it had been noted as applied and ignored).
    let o = dlrm(&["--gpus", "128", "--parallel", "tp=8"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--parallel lays out a transformer"), "{}", stderr(&o));
    // The embeddings' global batch (1024 × 1, model parallel) against the MLPs' (512 × 128).
    let dir = scratch("dlrm-batches");
    let mut task = json(&madmax("task_cfgs/dlrm/dlrm_train.json"));
    task["local_emb_bs"] = serde_json::json!(1024);
    let file = dir.join("task.json");
    std::fs::write(&file, serde_json::to_vec(&task).unwrap()).unwrap();
    let o = bin().arg("project").arg("--madmax").arg(&model).arg(&system).arg(&file).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("a global batch of 1024 for the embeddings and of 65536 for the MLPs"), "{}", stderr(&o));
}

/// A MAD-Max DLRM file given to `--model` is pointed to `project --madmax` (`search` cannot run
/// it): it had been called "not DLRM" and told to use `--assumptions madmax`, which `search`
/// does not take and which the plain DLRM does not need.
#[test]
fn a_dlrm_given_as_model_is_pointed_to_its_madmax_files() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/madmax-configs/model_cfgs");
    for (cmd, file, flag) in [("project", "dlrm/dlrm_a.json", false), ("search", "dlrm_moe/dlrm_a_moe.json", true)] {
        let path = dir.join(file);
        let o = bin().args([cmd, "--model"]).arg(&path).args(["--system", "h100-sxm", "--gpus", "128"]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{cmd}");
        let e = stderr(&o);
        assert!(e.contains("--model takes transformers (LLM, LLM_MoE, ViT)") && e.contains("project --madmax MODEL SYSTEM TASK"), "{e}");
        assert_eq!(e.contains("--assumptions madmax"), flag, "{e}");
        assert!(!e.contains("not DLRM"), "{e}");
    }
}

/// MAD-Max's GPT-4 MoE task gives its embedding a global batch of 2048 and its transformer one
/// of 16384: tracecast's model projects the transformer's and says so (it had dropped the
/// embedding's without a word); MAD-Max's assumptions refuse the task, naming both.
#[test]
fn a_madmax_task_whose_embedding_batch_differs_is_said_or_refused() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/madmax-configs");
    let files = [
        dir.join("model_cfgs/llm_moe/gpt4_1.8t.json"),
        dir.join("system_cfgs/cloud_A/cloud_A_h100.80_2048.json"),
        dir.join("task_cfgs/llm_moe/llm_moe_train.json"),
    ];
    let o = bin().arg("project").arg("--madmax").args(&files).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("the embedding's global batch (2048) is not the transformer's (16384): projected at the transformer's"), "{out}");
    // Spread over other GPUs, the task's plan is not what ran: nothing said of its batches.
    let o = bin().arg("project").arg("--madmax").args(&files).args(["--gpus", "1024"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("the embedding's global batch"));
    let o = bin().arg("project").arg("--madmax").args(&files).args(["--assumptions", "madmax"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("embedding 2048, transformer 16384"), "{}", stderr(&o));
}

/// `project --from` keeps the run's power limit on its own GPU, said as `validate` says it, and
/// names it among what is not carried to another GPU (it had been dropped without a word).
#[test]
fn project_from_a_run_says_its_power_limit() {
    let runs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/evidence/training-runs.json");
    let from = format!("{}:tt-llama3.1-8b-8xh100-fsdp8-cp1", runs.display());
    let o = bin().args(["project", "--from", &from]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("note: power limit 500 W: not modelled"));
    let o = bin().args(["project", "--from", &from, "--system", "h200"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("power_w 500 describe its h100-sxm, not h200: not carried") && !out.contains("power limit 500 W"), "{out}");
}

/// A run carried with a fitted profile (`validate --fit`) adds no stack time ("not carried"):
/// the MFU note does not then say the framework time is the source run's, carried.
#[test]
fn a_fitted_profile_run_does_not_say_its_stack_time_was_carried() {
    let dir = std::env::temp_dir().join(format!("tracecast-fit-carry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/validation/published-runs.json");
    let fit = dir.join("fit.json");
    let o = bin().arg("validate").arg(&runs).arg("--fit").arg(&fit).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let from = format!("{}:mpt-7b-8xa100-80gb", runs.display());
    let o = bin()
        .args(["project", "--from", &from, "--system", "h100-sxm", "--parallel", "fsdp=8,mb=6,gbs=48", "--profile"])
        .arg(dir.join("fit.h100-sxm.json"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("): not carried, the profile's bf16 GEMM correction"), "{out}");
    assert!(!out.contains("the framework time is the source run's, carried"), "{out}");
    // validate --profile says in its text what the profile prices with (it had said it in --json only).
    let o = bin().arg("validate").arg(&runs).arg("--profile").arg(dir.join("fit.h100-sxm.json")).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("fit.h100-sxm.json prices the 3 run(s) on h100-sxm: bf16 gemm table × 1.1"), "{out}");
}

/// A `--model` file of another kind (a profiler trace) is refused by its cause, without its text:
/// the message had echoed 400 characters of the trace's metadata and cut the cause off.
#[test]
fn a_model_file_of_another_kind_is_refused_by_its_cause_not_its_text() {
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo/rank-0.json.gz");
    let dir = scratch("model-of-another-kind");
    let file = dir.join("rank-0.json");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&trace).unwrap()).read_to_string(&mut text).unwrap();
    std::fs::write(&file, text).unwrap();
    for command in ["project", "search"] {
        let o = run(&[
            command.as_ref(),
            "--model".as_ref(),
            file.as_os_str(),
            "--system".as_ref(),
            "h100-sxm".as_ref(),
            "--gpus".as_ref(),
            "8".as_ref(),
        ]);
        assert!(!o.status.success());
        let err = stderr(&o);
        // The cause first (a terminal line is cut at 400 characters), the trace's values nowhere.
        assert!(err.contains("model: unknown field `deviceProperties`, expected one of `name`"), "{command}: {err}");
        assert!(!err.contains("H100 80GB") && !err.contains("default_pg"), "{command}: {err}");
    }
}

/// Sequence parallelism in decode is refused (one token a sequence has nothing to split: it had
/// priced an all-gather and a reduce-scatter of it over tp), and `search` offers no such plan;
/// experts folded over tp, which need it, are refused for decode in words that do not ask for it.
#[test]
fn sequence_parallel_decode_is_refused_and_not_searched() {
    let project = |plan: &str| {
        bin()
            .args(["project", "--model", "mixtral-8x7b", "--system", "h100-sxm", "--gpus", "8", "--task", "decode", "--batch", "16"])
            .args(["--parallel", plan])
            .output()
            .unwrap()
    };
    let o = project("tp=8,sp");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a decode step runs one new token a sequence: leave sp out"), "{}", stderr(&o));
    let o = project("tp=2,dp=4,ep=8");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("give an ep that divides dp × cp = 4") && !stderr(&o).contains("add sp"), "{}", stderr(&o));
    assert!(project("tp=8").status.success());
    let o = bin()
        .args(["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--task", "decode", "--batch", "16"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    // The ranked rows (a decode plan states no microbatches: they are training settings).
    let plans: Vec<&str> = text.lines().filter(|l| l.split_whitespace().next().is_some_and(|t| t.parse::<u32>().is_ok())).collect();
    assert!(plans.iter().any(|l| l.contains("tp=8")), "{text}");
    assert!(plans.iter().all(|l| !l.contains(",sp")), "{text}");
    // The front says the batch it holds (it had said "one sequence per GPU, as without --gbs"),
    // and --gbs, a training batch, is refused for inference (it had been ignored, the caption
    // claiming it scaled).
    assert!(text.contains("Pareto front (the best plan at each GPU count, 16 sequence(s) a replica, as --batch)"), "{text}");
    let o = bin()
        .args(["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--task", "decode", "--gbs", "64"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--gbs is a training step's global batch, not --task decode's"), "{}", stderr(&o));
}

/// Context parallelism in inference: decode refuses it (it had been echoed and not run: twice
/// the GPUs, the same step and cache), and prefill keeps each rank's share of the KV cache,
/// without a word of gradients.
#[test]
fn context_parallel_inference_splits_the_prefill_cache_and_is_refused_for_decode() {
    let project = |task: &[&str], json: Option<&Path>| {
        let mut cmd = bin();
        cmd.args(["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--batch", "8", "--parallel", "cp=2,tp=4"]);
        cmd.args(task);
        if let Some(out) = json {
            cmd.arg("--json").arg(out);
        }
        cmd.output().unwrap()
    };
    let o = project(&["--task", "decode", "--context", "4096"], None);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cp=2: context parallelism splits each sequence's tokens over ranks"), "{}", stderr(&o));
    let dir = scratch("cp-prefill");
    let out = dir.join("p.json");
    let o = project(&["--task", "prefill", "--prompt", "4096"], Some(&out));
    assert!(o.status.success(), "{}", stderr(&o));
    // K and V × 32 layers × 32 KV heads × 128 × 4096 tokens × 8 sequences × 2 bytes, over tp=4 and cp=2.
    let want = 2.0 * 32.0 * 32.0 * 128.0 * 4096.0 * 8.0 * 2.0 / 4.0 / 2.0 / 1e9;
    let p = json(&out);
    let got = p["memory"]["kv_cache_gb"].as_f64().unwrap_or_else(|| panic!("{p}"));
    assert!((got - want).abs() < 1e-3 * want, "KV cache {got} GB, {want} by hand");
    let text = String::from_utf8_lossy(&o.stdout);
    let note = text.lines().find(|l| l.contains("note: cp=2")).unwrap_or_else(|| panic!("{text}"));
    assert!(!note.contains("gradients") && note.contains("each keeps the KV cache of its 1/2"), "{note}");
}

/// The note on collectives across nodes names the rule that prices the job's widest ones: at
/// 4 096 GPUs it had named a measured curve "at this GPU count" (a 2-node probe of 16 GPUs).
#[test]
fn the_note_across_nodes_is_of_the_jobs_size() {
    let project = |gpus: &str| {
        let o = bin()
            .args(["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", gpus, "--parallel"])
            .arg(format!("dp={gpus}"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        text.lines().find(|l| l.contains("note: collectives across nodes")).unwrap_or_else(|| panic!("{text}")).to_string()
    };
    let wide = project("4096");
    assert!(wide.contains("scale-out rule") && wide.contains("a 64 MiB all-reduce over all 4096 GPUs of the job"), "{wide}");
    // With a profile that fits the link in a node only, the tier across nodes is probed at the
    // job's nodes too (it had been at 2).
    let dir = scratch("note-across-profile");
    let demo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo");
    let profile = dir.join("demo.json");
    let o = bin().arg("calibrate").arg(&demo).arg("--out").arg(&profile).arg("-q").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = bin()
        .args(["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "4096", "--parallel", "dp=4096", "--profile"])
        .arg(&profile)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains("the tier in a node by the profile's α-β fit")
            && text.contains("each GPU's 1/8 of a 64 MiB all-reduce over 512 nodes"),
        "{text}"
    );
    // Each tier's note says what its fit was fitted on, outside which its prices extrapolate
    // (`hw cost --profile` said so; `project` and `search` had not).
    let in_a_node = text.lines().find(|l| l.contains("note: collectives in a node")).unwrap_or_else(|| panic!("{text}"));
    assert!(
        in_a_node.contains("by the profile's α-β fit (fitted on all-reduces of ")
            && in_a_node.contains(" bus bytes over 4 ranks; a collective outside them is extrapolated)"),
        "{in_a_node}"
    );
    let two_nodes = project("16");
    assert!(
        two_nodes.contains("a measured collective curve at this GPU count") && two_nodes.contains("over all 16 GPUs of the job"),
        "{two_nodes}"
    );
}

/// A search that finds no plan says so on stderr, `-q` or not (it had exited 1 without a word).
#[test]
fn a_search_without_a_plan_says_so_on_stderr() {
    for quiet in [false, true] {
        let mut args = vec!["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "1"];
        if quiet {
            args.push("-q");
        }
        let o = bin().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains("error: no plan runs on 1 GPU:"), "{args:?}: {}", stderr(&o));
        // No empty ranking's header above it.
        assert!(!String::from_utf8_lossy(&o.stdout).contains("iteration ms"), "{}", String::from_utf8_lossy(&o.stdout));
    }
    // Why, by reason: LLaMA-2 7B's weights, gradients and Adam states (16 bytes a parameter,
    // 108 GB) fit no 80 GB GPU alone, and the reasons add up to the count (it said "degrees that
    // do not divide or memory that does not fit" whatever they were).
    let dir = scratch("search-rejected");
    let out = dir.join("s.json");
    let o =
        bin().args(["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "1", "-q", "--json"]).arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let doc = json(&out);
    let why = &doc["rejected_why"];
    let sum = ["batch", "memory", "refused"].iter().map(|k| why[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(Some(sum), doc["rejected"].as_u64(), "{why}");
    assert!(why["memory"].as_u64().unwrap() > 0 && stderr(&o).contains("that do not fit in memory"), "{why}: {}", stderr(&o));
}

/// A correction that stops at a limit says so: a run measured 10× slower fitted 4.000, one at
/// 2× or 1e9 tokens/s the 0.827 below which H200's GEMMs are held at its sustained rate, each
/// printed as a fit.
#[test]
fn validate_fit_says_a_correction_that_stopped_at_a_limit() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = scratch("validate-fit-limit");
    let runs = json(&root.join("fixtures/h200/runs.json"));
    // (A run "measured" at 1e9 tokens/s had been one of these: it is refused now, above every peak.)
    for (factor, says) in [(2.0, "where a smaller correction moves no run"), (0.1, "at the fit's limit (0.25× to 4×)"), (1.0, "")] {
        let mut one = runs.clone();
        let run = &mut one["runs"].as_array_mut().unwrap()[0];
        let measured = run["measured"]["tokens_per_s_per_gpu"].as_f64().unwrap();
        run["measured"]["tokens_per_s_per_gpu"] = (measured * factor).into();
        one["runs"].as_array_mut().unwrap().truncate(1);
        let (file, fit, out) = (dir.join("runs.json"), dir.join("fit.json"), dir.join("fit-result.json"));
        std::fs::write(&file, one.to_string()).unwrap();
        let o = bin().arg("validate").arg(&file).arg("--fit").arg(&fit).arg("--json").arg(&out).output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let limit = &json(&out)["gpus"][0]["by_dtype"][0]["limit"];
        if says.is_empty() {
            assert!(limit.is_null() && !text.contains("the correction stopped"), "{factor:?}: {text}");
        } else {
            assert!(text.contains(&format!("note: the correction stopped {says}")), "{factor:?}: {text}");
            assert!(limit.as_str().unwrap().contains(says), "{factor:?}: {limit}");
        }
    }
}

/// ZeRO-2 over several microbatches says which implementation it prices (a gather in every
/// microbatch's forward, FSDP's SHARD_GRAD_OP, where DeepSpeed's gathers once a step).
#[test]
fn zero_2_says_which_gather_it_prices() {
    let project = |plan: &str| {
        let o =
            bin().args(["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--parallel", plan]).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let four = project("dp=8,zero=2,mb=1,microbatches=4");
    assert!(four.contains("zero=2 as FSDP's SHARD_GRAD_OP: each of the 4 microbatches gathers the weights"), "{four}");
    assert!(!project("dp=8,zero=2,mb=1,microbatches=1").contains("SHARD_GRAD_OP"));
}

/// A MAD-Max system file's link rates are read as MAD-Max reads them (half, both directions
/// stated) and the note says the rates that gives: ZionEX's 12 × 50 GB/s × 0.6667 / 2 = 200 GB/s
/// in a node, 8 × 25 GB/s × 0.56 / 2 ÷ 8 GPUs = 7 GB/s per GPU across nodes.
#[test]
fn a_madmax_systems_link_rates_are_said_as_read() {
    let files =
        [madmax("model_cfgs/dlrm/dlrm_a.json"), madmax("system_cfgs/zionex/zionex_128.json"), madmax("task_cfgs/dlrm/dlrm_inference.json")];
    let o = bin().args(["project", "--gpus", "512", "--madmax"]).args(&files).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("200.0 GB/s in a node") && text.contains("7.0 GB/s per GPU across nodes"), "{text}");
}

/// `search` says that it left context parallelism out below 16 384 tokens (a search of "every
/// feasible plan" of Llama-2 70B at 4096 tokens had left it out unsaid), and a pinned degree is
/// tried; at 32 768 tokens it is tried without a pin, and not said.
#[test]
fn search_says_it_left_context_parallelism_out_of_short_sequences() {
    let dir = scratch("search-cp");
    let search = |model: &str, with: Option<&str>, name: &str| {
        let out = dir.join(name);
        let mut c = bin();
        c.args(["search", "--model", model, "--system", "h100-sxm", "--gpus", "8", "--top", "3", "--json"]).arg(&out);
        if let Some(w) = with {
            c.args(["--with", w]);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let plans: Vec<String> = json(&out)["ranked"].as_array().unwrap().iter().map(|p| p["plan"].as_str().unwrap().to_string()).collect();
        (String::from_utf8_lossy(&o.stdout).to_string(), json(&out)["not_tried"].as_str().map(str::to_string), plans)
    };
    let (text, not_tried, plans) = search("llama2-7b", None, "a.json");
    assert!(text.contains("note: context parallelism was not tried: the search tries it from 16384 tokens"), "{text}");
    assert!(not_tried.is_some_and(|n| n.contains("this model's is 4096")));
    assert!(plans.iter().all(|p| !p.contains("cp=")), "{plans:?}");
    let (text, not_tried, plans) = search("llama2-7b", Some("cp=2"), "b.json");
    assert!(!text.contains("context parallelism was not tried") && not_tried.is_none(), "{text}");
    assert!(plans.iter().all(|p| p.contains("cp=2")), "{plans:?}");
    let long = dir.join("long.json");
    std::fs::write(&long, r#"{"preset":"llama2-7b","seq":32768}"#).unwrap();
    let (text, not_tried, plans) = search(long.to_str().unwrap(), None, "c.json");
    assert!(!text.contains("context parallelism was not tried") && not_tried.is_none(), "{text}");
    assert!(!plans.is_empty());
}

/// `search` tries microbatches up to 64 sequences: a small model whose best plan runs 32 a
/// microbatch (ViT-B/16 over 8 A100s, 256 images a step) had been ranked at 16 (its space
/// stopped there, under "every feasible plan").
#[test]
fn search_tries_microbatches_past_16() {
    let dir = scratch("search-mb");
    let vit = dir.join("vitb.json");
    std::fs::write(&vit, r#"{"name":"ViT_B16","type":"ViT","bytes_per_nonemb_param":2,"bytes_per_emb_param":2,"num_transformer_layers":12,"num_transformer_heads":12,"attention_dim":768,"transformer_fc_dim":3072,"image_size":224,"patch_dim":16}"#).unwrap();
    let out = dir.join("s.json");
    let o = bin()
        .arg("search")
        .arg("--model")
        .arg(&vit)
        .args(["--system", "a100-40gb", "--gpus", "8", "--gbs", "256", "-q", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let plans = json(&out)["ranked"].as_array().unwrap().iter().map(|p| p["plan"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert!(plans[0].contains("mb=32") || plans[0].contains("mb=64"), "{plans:?}");
    // Its head is said as the model file sets it: with 14-pixel patches 14² × 3 = 588 pixel values
    // a patch (not the hidden size, 768), not logits.
    let text = std::fs::read_to_string(&vit).unwrap().replace("\"patch_dim\":16", "\"patch_dim\":14");
    let vit14 = dir.join("vit14.json");
    std::fs::write(&vit14, text).unwrap();
    let o = bin()
        .arg("project")
        .arg("--model")
        .arg(&vit14)
        .args(["--system", "a100-40gb", "--gpus", "8", "--parallel", "dp=8,mb=32"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("the loss unfused on the output head's 588 values a token") && !text.contains("logits cast"), "{text}");
}

/// A DLRM projection says how each op is priced, the interaction's dot products left out among
/// them (its notes had named the optimizers alone).
#[test]
fn a_dlrm_projection_says_how_it_prices_each_op() {
    let files =
        [madmax("model_cfgs/dlrm/dlrm_a.json"), madmax("system_cfgs/zionex/zionex_128.json"), madmax("task_cfgs/dlrm/dlrm_train.json")];
    let o = bin().args(["project", "--madmax"]).args(&files).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    for said in [
        "embedding lookups as 15 rows a table and sample",
        "exchanged all-to-all",
        "no dot products counted",
        "[4097, 94] × [94, 4097]",
        "GEMM [512, 3994] × [3994, 3994]",
    ] {
        assert!(text.contains(said), "{said}: {text}");
    }
    assert!(text.contains("their backward as the gradient rows read") && text.contains("their gradients back the same way"), "{text}");
    // Inference prices no backward, and the note says none.
    let files =
        [madmax("model_cfgs/dlrm/dlrm_a.json"), madmax("system_cfgs/zionex/zionex_128.json"), madmax("task_cfgs/dlrm/dlrm_inference.json")];
    let o = bin().args(["project", "--gpus", "512", "--madmax"]).args(&files).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("priced: embedding lookups") && !text.contains("backward") && !text.contains("gradients back"), "{text}");
}

/// The node layout a plan is placed on is said where a catalog preset gives it (H100's 8 GPUs a
/// node and 8 × 50 GB/s NICs had shown only inside the collectives' note), and not beside a
/// layout the user gives.
#[test]
fn a_node_presets_layout_is_said_unless_one_is_given() {
    let project = |extra: &[&str]| {
        let o = bin()
            .args(["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "64", "--parallel", "fsdp=64"])
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let preset = "note: nodes as the catalog's node preset dgx-h100: 8 GPUs a node, 8 × 50 GB/s NICs";
    assert!(project(&[]).contains(preset));
    let given = project(&["--gpus-per-node", "4"]);
    assert!(!given.contains(preset) && given.contains("4 GPUs per node as given"), "{given}");
}

/// A training projection gives tokens per second per GPU, as runs files state them: samples/s
/// × the sequence ÷ the GPUs (LLaMA-2 7B: 4 096 tokens a sample), and `project --from` a run on
/// its own system gives the run's measured rate (the stack's time carried).
#[test]
fn a_training_projection_gives_tokens_per_second_per_gpu() {
    let dir = scratch("tokens-per-gpu");
    let out = dir.join("p.json");
    let o = bin()
        .args(["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--parallel", "fsdp=8,gbs=16", "-q", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let p = json(&out);
    let want = p["throughput"].as_f64().unwrap() * 4096.0 / 8.0;
    assert!((p["tokens_per_s_per_gpu"].as_f64().unwrap() / want - 1.0).abs() < 1e-9, "{p}");
    let runs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/h200/runs.json");
    let o = bin()
        .arg("project")
        .arg("--from")
        .arg(format!("{}:llama3-8b-4l-seq8192", runs.display()))
        .args(["--system", "h200"])
        .output()
        .unwrap();
    let measured = json(&runs)["runs"].as_array().unwrap().iter().find(|r| r["id"] == "llama3-8b-4l-seq8192").unwrap()["measured"]["tokens_per_s_per_gpu"].as_f64().unwrap();
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!(" · {measured:.1} tokens/s per GPU")),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// No run is priced with more exposed communication than communication (the timelines' clock
/// is whole nanoseconds, the priced sums are not: SC21's GPT-1.7B had read 54.813357 exposed of
/// 54.813354 ms), in `validate`'s JSON as `project`'s.
#[test]
fn exposed_communication_never_exceeds_communication() {
    let dir = scratch("exposed-within-comm");
    for (name, runs) in [("published", "../shared/validation/published-runs.json"), ("training", "../shared/evidence/training-runs.json")] {
        let out = dir.join(format!("{name}.json"));
        let runs = Path::new(env!("CARGO_MANIFEST_DIR")).join(runs);
        let o = bin().arg("validate").arg(&runs).arg("-q").arg("--json").arg(&out).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let doc = json(&out);
        let mut checked = 0;
        for run in doc["runs"].as_array().unwrap() {
            let t = &run["times"];
            let (Some(exposed), Some(comm)) = (t["exposed_comm_ms"].as_f64(), t["comm_ms"].as_f64()) else { continue };
            assert!(exposed <= comm, "{}: exposed {exposed} ms of {comm} ms", run["id"]);
            checked += 1;
        }
        assert!(checked > 10, "{name}: {checked} runs");
    }
}

/// An inference search's plans run as `project` takes them: the best decode plan had read
/// `tp=1,pp=1,dp=8,mb=1,microbatches=1`, training settings `project --task decode` refuses,
/// under a `samples/s` column of tokens per second and "0 rejected ()".
#[test]
fn an_inference_searchs_best_plan_runs_in_project() {
    let task = ["--task", "decode", "--batch", "16", "--context", "4096"];
    let o =
        bin().args(["search", "--model", "llama3-8b", "--system", "h100-sxm", "--gpus", "8", "--top", "1"]).args(task).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(" tokens/s ") && !text.contains("samples/s") && !text.contains("()"), "{text}");
    let row = text.lines().find(|l| l.trim_start().starts_with("1 ")).unwrap_or_else(|| panic!("{text}"));
    let plan = row.split_whitespace().nth(1).unwrap();
    assert!(!plan.contains("mb=") && !plan.contains("microbatches"), "{plan}");
    let o = bin()
        .args(["project", "--model", "llama3-8b", "--system", "h100-sxm", "--gpus", "8", "--parallel", plan])
        .args(task)
        .output()
        .unwrap();
    assert!(o.status.success(), "{plan}: {}", stderr(&o));
    // The same step as the search ranked it.
    let ms = row.split_whitespace().nth(2).unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("Iteration {ms} ms")), "{}", String::from_utf8_lossy(&o.stdout));
}

/// The plans a ranked plan stands for (the text's "prices identically" groups) are in the
/// JSON too (they had been in the text alone).
#[test]
fn the_plans_that_price_identically_are_in_the_json() {
    let dir = scratch("search-identical");
    let out = dir.join("s.json");
    let o = bin()
        .args(["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--gbs", "64", "--top", "3", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let doc = json(&out);
    let mut groups = 0;
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.windows(2) {
        if let Some(same) = pair[1].trim().strip_prefix("(prices identically: ").and_then(|s| s.strip_suffix(')')) {
            let plan = pair[0].split_whitespace().nth(1).unwrap();
            let listed: Vec<&str> = doc["prices_identically"][plan]
                .as_array()
                .unwrap_or_else(|| panic!("{plan}: {doc}"))
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            assert_eq!(listed.join("; "), same, "{plan}");
            groups += 1;
        }
    }
    assert!(groups >= 1, "{text}");
}

/// A profile calibrated on FP32 traces (an A100 job of the corpus: its GEMM and elementwise fits
/// are fp32) prices none of a BF16 model's ops: the note had said the profile held no kernel fits
/// at all; it now names the fits and why they are not used.
#[test]
fn a_profile_of_another_number_format_is_said_not_called_empty() {
    let dir = scratch("fp32-profile");
    let profile = dir.join("a100.json");
    let control = shared().join("hta/trace_diff/control/control.json.gz");
    let o = bin().arg("calibrate").arg(&control).arg("--out").arg(&profile).arg("-q").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let fits = json(&profile)["kernels"].as_array().unwrap().iter().map(|k| format!("{}/{}", k["class"], k["dtype"])).collect::<Vec<_>>();
    assert!(fits.iter().any(|f| f == "\"gemm\"/\"fp32\"") && !fits.iter().any(|f| f.ends_with("\"bf16\"")), "{fits:?}");
    let o = bin()
        .args(["project", "--model", "llama2-7b", "--system", "a100-40gb", "--gpus", "8", "--parallel", "tp=8", "--profile"])
        .arg(&profile)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("no kernel fits of bf16 in the calibration profile"), "{text}");
    assert!(text.contains("gemm/fp32") && text.contains("do not price the model's bf16 ops"), "{text}");
    assert!(!text.contains("no kernel fits in the calibration profile"), "{text}");
}

/// A plan of one pipeline stage has no bubble (a rounding residue had printed 9.09e-13 ms of
/// one), and `--task finetune` on a plan that freezes nothing says why the step is pretraining's
/// (the header said `pretrain` without a word).
#[test]
fn one_stage_has_no_bubble_and_a_finetune_that_freezes_nothing_says_so() {
    let dir = scratch("no-bubble");
    let out = dir.join("p.json");
    let project = |extra: &[&str]| {
        let o = bin()
            .args(["project", "-q", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--json"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        json(&out)
    };
    for plan in ["fsdp=8", "tp=2,fsdp=4,mb=2", "tp=8"] {
        let p = project(&["--parallel", plan]);
        assert_eq!(p["bubble_ms"].as_f64(), Some(0.0), "{plan}: {}", p["bubble_ms"]);
    }
    let p = project(&["--parallel", "tp=2,pp=4,fsdp=1,mb=1,gbs=16"]);
    assert!(p["bubble_ms"].as_f64().unwrap() > 1.0, "{}", p["bubble_ms"]);
    let said = "--task finetune: the plan freezes no layer";
    let p = project(&["--task", "finetune"]);
    assert!(p["task"] == "pretrain" && p["notes"].to_string().contains(said), "{p}");
    let p = project(&["--task", "finetune", "--parallel", "fsdp=8,frozen=4"]);
    assert!(p["task"] == "finetune" && !p["notes"].to_string().contains(said), "{p}");
}

/// A plan that fits within a tenth of the GPU's memory says what the count leaves out (a plan
/// at 94 % of 80 GB read "fits" without a word); one with more room says nothing of it.
#[test]
fn a_plan_that_fits_tightly_says_what_the_memory_count_leaves_out() {
    let notes = |plan: &str| {
        let o =
            bin().args(["project", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--parallel", plan]).output().unwrap();
        assert!(o.status.success(), "{plan}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let said = "fits as counted, but the CUDA context, NCCL's buffers";
    let tight = notes("tp=4,fsdp=2,mb=8");
    assert!(tight.contains("GB of 80 GB: fits") && tight.contains(said), "{tight}");
    let roomy = notes("tp=2,fsdp=4,mb=5");
    assert!(roomy.contains(": fits") && !roomy.contains(said), "{roomy}");
}

/// An expert-parallel degree the plan cannot take says which of its conditions failed (one
/// message for all three had left the user to guess).
#[test]
fn an_expert_degree_refused_says_which_condition_failed() {
    for (model, gpus, plan, says) in [
        ("llama3-8b", "8", "tp=1,dp=8,ep=2", "ep=2: llama3-8b is not a mixture of experts"),
        ("mixtral-8x7b", "8", "dp=8,ep=16", "ep=16: mixtral-8x7b's 8 experts do not divide by it"),
        ("mixtral-8x7b", "6", "dp=6,ep=4", "ep=4: the plan's 6 ranks that hold experts do not divide by it"),
        // `ep=8` alone on 8 GPUs (as `--help` had shown it) is one rank: ep adds no GPUs.
        (
            "mixtral-8x7b",
            "8",
            "ep=8",
            "= 1 but the cluster has 8 GPUs (ep places the experts over the data-parallel ranks and adds no GPUs",
        ),
    ] {
        let o = bin().args(["project", "--model", model, "--system", "h100-sxm", "--gpus", gpus, "--parallel", plan]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{plan}");
        assert!(stderr(&o).contains(says), "{plan}: {}", stderr(&o));
    }
}

/// A pipeline that spans several nodes has stage boundaries between nodes, and the network
/// prices its transfers (tp = 2, dp = 2, pp = 16 on nodes of 8: four nodes, three boundaries
/// across them, had been priced at NVLink's rate whatever `--nic-gbps-per-gpu` said); a
/// pipeline inside one node is untouched by the network.
#[test]
fn a_pipeline_across_nodes_pays_the_network_at_its_stage_boundaries() {
    let dir = scratch("pipeline-across-nodes");
    let send_recv_ms = |gpus: &str, plan: &str, nic: &str| {
        let out = dir.join(format!("{gpus}-{nic}.json"));
        let o = bin()
            .args(["project", "--model", "llama2-70b", "--system", "h100-sxm", "--gpus", gpus, "--parallel", plan])
            .args(["--nic-gbps-per-gpu", nic, "--json"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{plan}: {}", stderr(&o));
        json(&out)["by_kind_ms"]["send_recv"].as_f64().unwrap()
    };
    let across = "tp=2,pp=16,dp=2,zero=1,mb=1,gbs=512";
    let (slow, fast) = (send_recv_ms("64", across, "12.5"), send_recv_ms("64", across, "400"));
    assert!(slow > 4.0 * fast, "12.5 GB/s {slow} ms, 400 GB/s {fast} ms");
    let inside = "tp=2,pp=4,dp=1,mb=1,gbs=64";
    assert_eq!(send_recv_ms("8", inside, "12.5"), send_recv_ms("8", inside, "400"));
}

/// A `--with` setting no plan can take is named by the refusal it meets, not counted among
/// degrees that do not divide (`frozen=32` of 32 layers: 822 plans "the model refuses
/// (degrees its heads, layers or experts do not divide)").
#[test]
fn a_search_names_why_the_model_refused_its_plans() {
    let o = bin().args(["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "16", "--with", "frozen=32"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(text.contains("the model or the settings refuse (the first: frozen=32 leaves none of the 32 layers to train)"), "{text}");
}

/// Of two plans that price alike, the simpler is shown and the other listed under it, whatever
/// `--with` adds (with `tp_overlap` the plan with `recompute=selective` had been shown, by name).
#[test]
fn a_search_shows_the_simpler_of_plans_that_price_alike() {
    for with in [&[][..], &["--with", "tp_overlap"]] {
        let o = bin()
            .args(["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "16", "--top", "1"])
            .args(with)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout);
        let best = text.lines().find(|l| l.trim_start().starts_with("1  ")).unwrap_or_else(|| panic!("{text}"));
        let alike = text.lines().find(|l| l.contains("(prices identically: ")).unwrap_or_else(|| panic!("{text}"));
        assert!(!best.contains("recompute=selective") && alike.contains("recompute=selective"), "{with:?}\n{text}");
    }
}

/// A model under a billion parameters is counted to three figures: ViT-L's had read "0.3 B".
/// By hand: 24 layers × 12 × 1024² = 302.0 M in the blocks, and the patch (16·16·3 × 1024) and
/// position embeddings (197 × 1024) add 1.0 M: between 0.302 and 0.310 B.
#[test]
fn a_model_under_a_billion_parameters_is_counted_to_three_figures() {
    let files = [
        madmax("model_cfgs/vit/vit_l.json"),
        madmax("system_cfgs/cloud_A/cloud_A_h100.80_128.json"),
        madmax("task_cfgs/vit/vit_train.json"),
    ];
    let o = bin().arg("project").arg("--madmax").args(&files).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let note = text.lines().find(|l| l.contains(" B parameters")).unwrap_or_else(|| panic!("{text}"));
    let count: f64 = note
        .split(" B parameters")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{note}"));
    assert!(note.contains(&format!("{count:.3} B parameters")) && (0.302..0.310).contains(&count), "{note}");
}

/// Experts split over the tensor-parallel ranks make each rank's all-to-all carry its group's
/// tokens: said, since `ep=4` then cost more than `ep=8` (Mixtral, tp=2: 358 against 257 ms)
/// without a word; whole experts (ep folded over tp) need no such note.
#[test]
fn split_experts_say_what_their_all_to_all_carries() {
    let notes = |plan: &str| {
        let o =
            bin().args(["project", "--model", "mixtral-8x7b", "--system", "h100-sxm", "--gpus", "8", "--parallel", plan]).output().unwrap();
        assert!(o.status.success(), "{plan}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let split = notes("tp=2,sp,dp=4,ep=4,gbs=64");
    assert!(split.contains("expert all-to-all: experts split over etp=2 ranks"), "{split}");
    assert!(!notes("tp=2,sp,dp=4,ep=8,gbs=64").contains("expert all-to-all:"));
}

/// `search --task` names what a search takes: its error had offered a MAD-Max task file, then
/// refused one (a task file states one plan, which `project` projects).
#[test]
fn a_search_says_which_tasks_it_takes() {
    let task_file = madmax("task_cfgs/llm/llm_train.json");
    let o =
        bin().args(["search", "--model", "llama2-7b", "--system", "h100-sxm", "--gpus", "8", "--task"]).arg(&task_file).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("a search takes train, prefill or decode (a MAD-Max task file states one plan"), "{}", stderr(&o));
}

/// A MAD-Max task file's plan that the cluster cannot take, projected with tracecast's
/// assumptions, is refused naming the task and system files and the keys that hold the plan
/// ("tp × cp × pp × dp = 128 but the cluster has 64 GPUs" had named neither).
#[test]
fn a_madmax_task_plan_the_system_cannot_take_names_its_files() {
    let (m, s, t) = (
        madmax("model_cfgs/vit/dinov2_b.json"),
        madmax("system_cfgs/cloud_A/cloud_A_h100.80_64.json"),
        madmax("task_cfgs/vit/vit_train.json"),
    );
    let o = bin().arg("project").arg("--madmax").args([&m, &s, &t]).args(["--assumptions", "tracecast"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = common::stderr(&o);
    assert!(
        e.contains("vit_train.json: its plan (tp=1,pp=1,fsdp=128,mb=16,microbatches=1, from transformer_parallel and its degrees) on ")
            && e.contains("cloud_A_h100.80_64.json: tp × cp × pp × dp = 128"),
        "{e}"
    );
}
