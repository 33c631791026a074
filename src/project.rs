//! `tracecast project` and `tracecast search`: wiring of the workload models
//! and their terminal summaries.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use tracecast_calibrate::catalog::Dtype;
use tracecast_replay::workload::llm::{Cluster, Plan, Task, Transformer};
use tracecast_replay::workload::{Projection, madmax};

/// A model given as a preset name or a MAD-Max model file.
pub(crate) fn model(spec: &str) -> Result<Transformer> {
    if let Some(m) = Transformer::preset(spec) {
        return Ok(m);
    }
    let path = Path::new(spec);
    anyhow::ensure!(path.exists(), "--model {spec}: neither a preset ({}) nor a file", Transformer::preset_names().join(", "));
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let m: madmax::ModelConfig =
        serde_json::from_slice(&text).with_context(|| format!("{}: not a MAD-Max model configuration", path.display()))?;
    Transformer::from_madmax(&m).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// A cluster given as a catalog GPU id with a GPU count, or a MAD-Max system file.
pub(crate) fn cluster(
    spec: &str,
    gpus: Option<u32>,
    bytes_per_param: f64,
    catalog: &tracecast_calibrate::Catalog,
    device: Option<&tracecast_calibrate::DeviceModel>,
) -> Result<Cluster> {
    let path = Path::new(spec);
    if path.exists() {
        let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let s: madmax::SystemConfig =
            serde_json::from_slice(&text).with_context(|| format!("{}: not a MAD-Max system configuration", path.display()))?;
        let mut c = Cluster::from_madmax(&s, bytes_per_param).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if let Some(n) = gpus {
            c.gpus = n;
        }
        return Ok(c);
    }
    let dtype = if bytes_per_param >= 4.0 { Dtype::Tf32 } else { Dtype::Bf16 };
    let n = gpus.context("--system GPU needs --gpus N (how many)")?;
    Cluster::from_catalog(catalog, spec, n, dtype, device).map_err(|e| anyhow::anyhow!("--system {spec}: {e}"))
}

/// The task from `--task` (train, prefill, decode, or a MAD-Max task file).
pub(crate) fn task(spec: &str, batch: u32, prompt: u32, context: u32) -> Result<Task> {
    Ok(match spec {
        "train" | "pretrain" | "finetune" => Task::Train,
        "prefill" => Task::Prefill { batch, prompt },
        "decode" => Task::Decode { batch, context },
        other => anyhow::bail!("--task {other}: train, prefill, decode, or a MAD-Max task file"),
    })
}

/// The terminal summary of a projection.
pub(crate) fn print(out: &mut impl Write, p: &Projection) -> std::io::Result<()> {
    let t = &p.times;
    writeln!(out, "{} on {} — {}, plan {} (assumptions: {})", p.model, p.system, p.task, p.plan, p.assumptions)?;
    let list = |compute: bool| {
        t.by_kind_ms
            .iter()
            .filter(|(k, _)| matches!(**k, "gemm" | "embedding" | "memory_bound" | "attention") == compute)
            .map(|(k, v)| format!("{k} {v:.2} ms"))
            .collect::<Vec<_>>()
            .join(" · ")
    };
    writeln!(out, "  Compute:       {:.2} ms ({})", t.compute_ms, list(true))?;
    writeln!(out, "  Communication: {:.2} ms ({})", t.comm_ms, list(false))?;
    let of = |a: f64, b: f64| if b > 0.0 { 100.0 * a / b } else { 0.0 };
    writeln!(
        out,
        "  Exposed communication {:.2} ms ({:.1} % of communication, {:.1} % of the iteration); overlapped {:.2} ms",
        t.exposed_comm_ms,
        of(t.exposed_comm_ms, t.comm_ms),
        of(t.exposed_comm_ms, t.iteration_ms),
        t.overlapped_comm_ms
    )?;
    if t.bubble_ms > 0.0 {
        writeln!(out, "  Pipeline bubble {:.2} ms ({:.1} % of the iteration)", t.bubble_ms, of(t.bubble_ms, t.iteration_ms))?;
    }
    writeln!(out, "  Iteration {:.2} ms · throughput {:.2} samples/s (global batch {})", t.iteration_ms, p.throughput, p.global_batch)?;
    if let Some(v) = p.ttft_ms {
        writeln!(out, "  Time to first token {v:.2} ms")?;
    }
    if let Some(v) = p.tpot_ms {
        writeln!(out, "  Time per output token {v:.3} ms ({:.0} tokens/s over the system)", p.throughput)?;
    }
    let m = &p.memory;
    writeln!(
        out,
        "  Memory per GPU {:.2} GB of {:.0} GB: {} (weights {:.2}, gradients {:.2}, optimizer {:.2}, activations {:.2}, KV cache {:.2})",
        p.memory_gb_per_gpu,
        p.hbm_gb,
        if p.fits_memory { "fits" } else { "DOES NOT FIT" },
        m.weights_gb,
        m.gradients_gb,
        m.optimizer_gb,
        m.activations_gb,
        m.kv_cache_gb
    )?;
    for n in &p.notes {
        writeln!(out, "  note: {n}")?;
    }
    Ok(())
}

/// Writes `value` as pretty JSON, atomically.
pub(crate) fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    tracecast_ingest::output::write_atomic(path, &bytes)?;
    Ok(())
}

/// Writes the timeline for Perfetto (gzip when the name ends in .gz).
pub(crate) fn write_perfetto(path: &Path, timeline: &tracecast_replay::workload::Timeline, title: &str) -> Result<()> {
    let mut text = Vec::new();
    timeline.write_perfetto(&mut text, title)?;
    let bytes = if path.to_string_lossy().ends_with(".gz") {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&text)?;
        enc.finish()?
    } else {
        text
    };
    tracecast_ingest::output::write_atomic(path, &bytes)?;
    Ok(())
}

/// A plan from `--parallel`.
pub(crate) fn plan(spec: &str) -> Result<Plan> {
    Plan::parse(spec).map_err(|e| anyhow::anyhow!("--parallel {spec:?}: {e}"))
}
