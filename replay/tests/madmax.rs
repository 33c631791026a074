//! `--assumptions madmax` reproduces the reference implementation's printed
//! outputs for the shared MAD-Max configurations (README of
//! ../shared/madmax-configs), within 1 %.

use std::path::{Path, PathBuf};

use tracecast_replay::workload::madmax::{read_configs, run};

fn configs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/madmax-configs")
}

struct Reference<'a> {
    files: [&'a str; 3],
    /// (kind, ms) as printed.
    times: &'a [(&'a str, f64)],
    exposed_ms: f64,
    iteration_ms: f64,
    throughput: f64,
}

fn check(r: &Reference<'_>) {
    let c = configs();
    let (m, s, t) = read_configs(
        &c.join("model_cfgs").join(r.files[0]),
        &c.join("system_cfgs").join(r.files[1]),
        &c.join("task_cfgs").join(r.files[2]),
    )
    .unwrap();
    let out = run(&m, &s, &t).unwrap();
    let times = out.timeline.times();
    // Within 1 %, or within the rounding of the printed figure (two decimals).
    let close = |what: &str, got: f64, want: f64, printed_unit: f64| {
        let err = (got - want).abs() / want;
        println!("{:<24} {what:<16} {got:>14.4} {want:>12.2} {:>7.3} %", r.files[0], 100.0 * err);
        assert!(err <= 0.01 || (got - want).abs() <= printed_unit / 2.0, "{}: {what} {got} vs {want}", r.files[0]);
    };
    for (kind, want) in r.times {
        close(kind, times.by_kind_ms.get(kind).copied().unwrap_or(0.0), *want, 0.01);
    }
    close("exposed comm", times.exposed_comm_ms, r.exposed_ms, 0.01);
    close("iteration", times.iteration_ms, r.iteration_ms, 0.01);
    let unit = if r.throughput > 1e5 { 0.01e6 } else { 0.01 };
    close("throughput", out.global_batch / (times.iteration_ms / 1e3), r.throughput, unit);
}

#[test]
fn dlrm_a_on_zionex_128() {
    check(&Reference {
        files: ["dlrm/dlrm_a.json", "zionex/zionex_128.json", "val/dlrm_train_val_128.json"],
        times: &[("gemm", 8.91), ("embedding", 9.10), ("all_to_all", 26.40), ("all_reduce", 21.27)],
        exposed_ms: 35.99,
        iteration_ms: 54.00,
        throughput: 1.21e6,
    });
}

#[test]
fn llama2_70b_on_dc_a_2048() {
    check(&Reference {
        files: ["llm/llama2_70b.json", "dc_A/dc_A_2048.json", "llm/llm_train.json"],
        times: &[("gemm", 5598.63), ("embedding", 0.21), ("all_gather", 1670.28), ("reduce_scatter", 835.14), ("all_reduce", 2.24)],
        exposed_ms: 1676.89,
        iteration_ms: 7275.72,
        throughput: 281.48,
    });
}

/// Every model of the shared configurations with every task of its type on
/// every system: MAD-Max's rules either reject the combination with a reason
/// or give totals that follow its definitions.
#[test]
fn every_shared_configuration_runs_or_is_rejected_with_a_reason() {
    use tracecast_replay::workload::madmax::{Error, Rates};
    let c = configs();
    let list = |dir: &str| {
        let mut out = Vec::new();
        for sub in std::fs::read_dir(c.join(dir)).unwrap() {
            let sub = sub.unwrap().path();
            for f in std::fs::read_dir(&sub).unwrap() {
                out.push(f.unwrap().path());
            }
        }
        out.sort();
        out
    };
    let (models, systems, tasks) = (list("model_cfgs"), list("system_cfgs"), list("task_cfgs"));
    let (mut ran, mut rejected, mut unmodelled) = (0, 0, 0);
    for m in &models {
        for t in &tasks {
            for s in &systems {
                let (model, system, task) = read_configs(m, s, t).unwrap();
                // Tasks are written for one model type: DLRM tasks name MLP parallelism, LLM tasks transformer parallelism.
                // Tasks are per model type: DLRM tasks have MLP parallelism, transformer DLRMs both.
                let dlrm_task = !task.mlp_parallel.is_empty();
                let transformer_task = !task.transformer_parallel.is_empty();
                let fits = match model.kind.as_str() {
                    "DLRM" | "DLRM_MoE" => dlrm_task && !transformer_task,
                    "DLRM_Transformer" => dlrm_task && transformer_task,
                    _ => !dlrm_task,
                };
                if !fits {
                    continue;
                }
                match run(&model, &system, &task) {
                    Ok(out) => {
                        ran += 1;
                        let times = out.timeline.times();
                        let rates = Rates::of(&system, model.bytes_per_nonemb_param).unwrap();
                        assert!(times.iteration_ms + 1e-9 >= times.compute_ms);
                        assert!(
                            times.exposed_comm_ms <= times.comm_ms + 1e-3,
                            "{} {} {}: exposed {} comm {} iteration {} compute {}",
                            m.display(),
                            s.display(),
                            t.display(),
                            times.exposed_comm_ms,
                            times.comm_ms,
                            times.iteration_ms,
                            times.compute_ms
                        );
                        // Backward GEMMs cost twice the forward: the total is 3× (training) or 1× (inference)
                        // the forward, and the forward is one GEMM per layer block at the effective FLOP/s.
                        let passes = if task.kind == "inference" { 1.0 } else { 3.0 };
                        let gemm = times.by_kind_ms.get("gemm").copied().unwrap_or(0.0);
                        let forward_ms = match model.kind.as_str() {
                            "DLRM" | "DLRM_MoE" => {
                                // A sample runs through its active experts of every top layer.
                                let active = if model.kind == "DLRM_MoE" { model.num_active_experts } else { 1.0 };
                                let layers = model.num_bot_mlp_layers as f64 + active * model.num_top_mlp_layers as f64;
                                let tp = task
                                    .mlp_parallel
                                    .iter()
                                    .zip(&task.mlp_parallel_degree)
                                    .find(|x| x.0 == "tp")
                                    .map_or(1.0, |x| f64::from(*x.1));
                                layers * 2.0 * model.mlp_dim * model.mlp_dim * task.local_mlp_bs / tp / rates.flops * 1e3
                            }
                            "DLRM_Transformer" => {
                                let layers = (model.num_bot_mlp_layers + model.num_top_mlp_layers) as f64;
                                let tp_m = task
                                    .mlp_parallel
                                    .iter()
                                    .zip(&task.mlp_parallel_degree)
                                    .find(|x| x.0 == "tp")
                                    .map_or(1.0, |x| f64::from(*x.1));
                                let tp_t = task
                                    .transformer_parallel
                                    .iter()
                                    .zip(&task.transformer_parallel_degree)
                                    .find(|x| x.0 == "tp")
                                    .map_or(1.0, |x| f64::from(*x.1));
                                let d = model.attention_dim;
                                let mlp = layers * 2.0 * model.mlp_dim * model.mlp_dim * task.local_mlp_bs / tp_m;
                                let tf = model.num_transformer_layers as f64
                                    * 2.0
                                    * (4.0 * d * d + 2.0 * d * model.transformer_fc_dim)
                                    * model.transformer_seq_len
                                    * task.local_transformer_bs
                                    / tp_t;
                                (mlp + tf) / rates.flops * 1e3
                            }
                            _ => {
                                let seq = if model.kind == "ViT" {
                                    (model.image_size / model.patch_dim).ceil().powi(2)
                                } else {
                                    model.transformer_seq_len
                                };
                                let d = model.attention_dim;
                                let tp = task
                                    .transformer_parallel
                                    .iter()
                                    .zip(&task.transformer_parallel_degree)
                                    .find(|x| x.0 == "tp")
                                    .map_or(1.0, |x| f64::from(*x.1));
                                // A token runs through its active experts' FC layers.
                                let active = if model.kind == "LLM_MoE" { model.num_active_experts } else { 1.0 };
                                model.num_transformer_layers as f64
                                    * 2.0
                                    * (4.0 * d * d + 2.0 * d * model.transformer_fc_dim * active)
                                    * seq
                                    * task.local_transformer_bs
                                    / tp
                                    / rates.flops
                                    * 1e3
                            }
                        };
                        assert!(
                            (gemm - passes * forward_ms).abs() <= 1e-6 * gemm.max(1.0),
                            "{}: gemm {gemm} vs {}",
                            m.display(),
                            passes * forward_ms
                        );
                    }
                    Err(Error::Invalid(why)) if why.contains("not a MAD-Max model type") => unmodelled += 1,
                    Err(Error::Invalid(why)) => {
                        assert!(!why.is_empty());
                        rejected += 1;
                    }
                    Err(e) => panic!("{}: {e}", m.display()),
                }
            }
        }
    }
    println!("{ran} combinations ran, {rejected} rejected by MAD-Max's rules, {unmodelled} of model types not modelled");
    assert!(ran >= 20, "{ran}");
}

/// Every model file shipped with MAD-Max reads; a model's value no model has is refused naming
/// the file and key (a width of 0 had projected a step of 0.00 ms, a sequence of -4096 pure
/// communication, a head count of -64 the reference's numbers, all without a word).
#[test]
fn model_files_read_and_values_no_model_has_are_refused() {
    use tracecast_replay::workload::madmax::read_model;
    let c = configs().join("model_cfgs");
    let mut read = 0;
    for family in std::fs::read_dir(&c).unwrap() {
        for file in std::fs::read_dir(family.unwrap().path()).unwrap() {
            let path = file.unwrap().path();
            read_model(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            read += 1;
        }
    }
    assert!(read >= 30, "{read} model files");
    let llama = std::fs::read_to_string(c.join("llm/llama2_70b.json")).unwrap();
    let dir = std::env::temp_dir().join(format!("tracecast-madmax-values-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (key, value, says) in [
        ("attention_dim", "0", "attention_dim 0 (or missing)"),
        ("num_transformer_heads", "-64", "num_transformer_heads -64: must be a whole number, 0 or more"),
        ("transformer_seq_len", "-4096", "transformer_seq_len -4096"),
        ("transformer_fc_dim", "21846.5", "transformer_fc_dim 21846.5: must be a whole number"),
        ("bytes_per_nonemb_param", "0", "bytes_per_nonemb_param 0: must be above 0"),
        // Blamed on the system file, and a missing layer count named neither file nor key.
        ("bytes_per_nonemb_param", "3", "bytes_per_nonemb_param 3: 1, 2, 4 or 8"),
        ("num_transformer_layers", "0", "num_transformer_layers 0 (or missing): a transformer (LLM) needs at least one layer"),
    ] {
        let at = llama.find(&format!("\"{key}\"")).unwrap_or_else(|| panic!("{key}"));
        let (start, end) = (llama[at..].find(':').unwrap() + at + 1, llama[at..].find([',', '\n']).unwrap() + at);
        let broken = format!("{} {value}{}", &llama[..start], &llama[end..]);
        let path = dir.join(format!("{key}.json"));
        std::fs::write(&path, broken).unwrap();
        let e = read_model(&path).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()) && e.contains(says), "{key}: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
