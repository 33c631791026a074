//! Mixture-of-experts training runs measured by Megatron-Bridge, against `validate`'s projection.
//!
//! `../shared/evidence/training-runs.json` keeps its MoE runs apart (`runs_without_dims`): the
//! source names the model but gives no dimensions. Where the name is a model with a built-in
//! preset (its public `config.json`), the run is projected as `validate` projects any run, with
//! `{"preset": …, "seq": …}` as its model (the sequence its notes state). Runs of other models
//! (DeepSeek-V4, Nemotron's hybrid Mamba layers) are counted and left out.
//!
//! `cargo run --release -p tracecast-pipeline --example moe_runs -- [--markdown]`

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use tracecast_calibrate::fit::median;
use tracecast_replay::workload::validate::{self, RunsFile};

/// Model names of the source table → tracecast presets.
const PRESETS: [(&str, &str); 5] = [
    ("Qwen3_30B_a3B", "qwen3-30b-a3b"),
    ("Qwen3_235B_a22B", "qwen3-235b-a22b"),
    ("GPT OSS 120B", "gpt-oss-120b"),
    ("DeepSeekV3", "deepseek-v3"),
    ("Kimi_K2", "kimi-k2"),
];

/// The sequence length a run's notes state (`sequence 4096`).
fn sequence(notes: &str) -> Option<f64> {
    let rest = &notes[notes.find("sequence ")? + "sequence ".len()..];
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// The measured MoE runs of the evidence file whose model has a preset, each with
/// `{"preset", "seq"}` as its model, and how many runs of each other model were left out.
fn moe_runs() -> Result<(RunsFile, usize, BTreeMap<String, usize>)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/evidence/training-runs.json");
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).with_context(|| path.display().to_string())?)?;
    let all = file["runs_without_dims"].as_array().context("no runs_without_dims")?;
    let mut runs = Vec::new();
    let mut left_out: BTreeMap<String, usize> = BTreeMap::new();
    for r in all {
        let name = r["model"]["name"].as_str().unwrap_or("");
        // "Qwen3_30B_a3B (tokendrop)": the same model with capacity-limited routing.
        let base = name.split(" (").next().unwrap_or(name);
        let notes = r["notes"].as_str().unwrap_or("");
        match (PRESETS.iter().find(|(n, _)| *n == base), sequence(notes)) {
            (Some((_, preset)), Some(seq)) => {
                let mut run = r.clone();
                run["model"] = serde_json::json!({"preset": preset, "seq": seq});
                runs.push(run);
            }
            _ => *left_out.entry(base.to_string()).or_default() += 1,
        }
    }
    Ok((serde_json::from_value(serde_json::json!({"runs": runs}))?, all.len(), left_out))
}

fn main() -> Result<()> {
    let markdown = std::env::args().skip(1).any(|a| a == "--markdown");
    let (file, all, left_out) = moe_runs()?;
    let catalog = tracecast_pipeline::hardware::catalog_with(&[])?;
    let v = validate::validate(&file, &catalog, &[], None);
    let mut by: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    if markdown {
        println!("| run | measured tok/s/GPU | projected | error |");
        println!("|---|---:|---:|---:|");
    }
    for (run, r) in file.runs.iter().zip(&v.runs) {
        let (Some(p), Some(e)) = (r.predicted_tokens_per_s_per_gpu, r.error) else {
            if markdown {
                println!("| {} | {:.0} | {} | |", r.id, r.measured_tokens_per_s_per_gpu, r.notes.join("; "));
            } else {
                println!("{:<62} {}", r.id, r.notes.join("; "));
            }
            continue;
        };
        let model = match &run.model {
            validate::RunModel::Preset(p) => p.preset.clone(),
            _ => String::new(),
        };
        by.entry((model, run.system.gpu.clone())).or_default().push(e);
        if markdown {
            println!("| {} | {:.0} | {:.0} | {:+.1} % |", r.id, r.measured_tokens_per_s_per_gpu, p, 100.0 * e);
        } else {
            println!("{:<62} measured {:>8.0}  projected {:>8.0}  {:+6.1} %", r.id, r.measured_tokens_per_s_per_gpu, p, 100.0 * e);
        }
    }
    println!();
    if markdown {
        println!("| model | GPU | runs | median error | range |");
        println!("|---|---|---:|---:|---|");
    }
    for ((model, gpu), mut errors) in by {
        let (lo, hi) = errors.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &e| (a.min(e), b.max(e)));
        let n = errors.len();
        let m = median(&mut errors).unwrap_or(0.0);
        if markdown {
            println!("| {model} | {gpu} | {n} | {:+.1} % | {:+.1} … {:+.1} % |", 100.0 * m, 100.0 * lo, 100.0 * hi);
        } else {
            println!("{model:<16} {gpu:<9} {n:>3} runs: median {:+6.1} %, {:+6.1} … {:+6.1} %", 100.0 * m, 100.0 * lo, 100.0 * hi);
        }
    }
    let projected = v.runs.iter().filter(|r| r.error.is_some()).count();
    println!(
        "\n{projected} of {all} MoE runs projected: median |error| {:.1} %, max {:.1} %; {} faster than measured, {} slower. Left out (no preset): {}",
        100.0 * v.median_abs_error.unwrap_or(f64::NAN),
        100.0 * v.max_abs_error.unwrap_or(f64::NAN),
        v.optimistic,
        v.pessimistic,
        left_out.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::moe_runs;
    use tracecast_calibrate::Catalog;
    use tracecast_replay::workload::validate::{RunModel, RunsFile, validate};

    /// Megatron-Bridge's runs of the newest containers (26.06 and later), GPT-OSS aside (its
    /// sinks, biases and head are not modelled): the measurements, not this code, give the
    /// expected values. BENCHMARKS.md, *Mixture-of-experts runs*.
    #[test]
    fn the_newest_mixture_of_experts_runs_project_within_a_third_of_their_measurement() {
        let (file, _, _) = moe_runs().unwrap();
        let newest = |id: &str| id.starts_with("mb26.06") || id.starts_with("mb26.08");
        let gpt_oss = |m: &RunModel| matches!(m, RunModel::Preset(p) if p.preset == "gpt-oss-120b");
        let runs: Vec<_> = file.runs.into_iter().filter(|r| newest(&r.id) && !gpt_oss(&r.model)).collect();
        assert!(runs.len() >= 20, "{} runs", runs.len());
        let v =
            validate(&RunsFile { about: None, runs, unread_lists: Vec::new(), unread_keys: Vec::new() }, &Catalog::builtin(), &[], None);
        for r in &v.runs {
            let e = r.error.unwrap_or_else(|| panic!("{} not projected: {:?}", r.id, r.notes));
            println!("{:<60} {:+.1} %", r.id, 100.0 * e);
            assert!(e.abs() < 1.0 / 3.0, "{}: {:+.1} %", r.id, 100.0 * e);
        }
        assert!(v.median_abs_error.is_some_and(|m| m < 0.15), "median {:?}", v.median_abs_error);
    }
}
