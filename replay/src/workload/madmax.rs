//! MAD-Max's model / system / task files and its timelines under its own
//! assumptions (`--assumptions madmax`): one utilization factor for compute
//! and one for HBM, collectives as bytes ÷ an effective bandwidth with no
//! latency, a compute lane and a communication lane, FSDP weight gathers one
//! layer ahead. Re-derived from the paper's definitions and the printed
//! outputs of the reference implementation (Hsia et al., ISCA 2024), so that
//! tracecast reproduces them; tracecast's own model is [`super::llm`].
//!
//! The rules, in MAD-Max's terms:
//! - effective FLOP/s = peak of the dense parameters' dtype × `flops_util`;
//!   effective HBM = `mem_bw` × `mem_bw_util`;
//! - per GPU, one direction: intra-node = NVLinks × bw/2 × util, inter-node =
//!   NIC ports × bw/2 × util ÷ GPUs per node; all-to-all runs at the
//!   intra- or inter-node figure of its level, all-reduce at the `ar_perc_intra`
//!   blend of the two (the intra figure at the inner level of a 2-D plan), and
//!   all-gather and reduce-scatter at twice the all-reduce figure;
//! - a GEMM of F FLOPs takes F ÷ effective FLOP/s (backward twice forward), an
//!   embedding lookup of B bytes B ÷ effective HBM, a collective of B bytes
//!   B ÷ its bandwidth;
//! - exposed communication = iteration − (GEMM + embedding time): on these
//!   two lanes, where one of them always runs, the communication with no
//!   compute under it, tracecast's one definition (`tests/madmax.rs` holds it
//!   to the references).

use std::path::Path;

use serde::Deserialize;

use super::{Lanes, Memory, OpKind, Projection, Timeline};

/// Errors reading or running MAD-Max configurations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or parsed.
    #[error("{}: {message}", path.display())]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The combination cannot run under MAD-Max's rules.
    #[error("{0}")]
    Invalid(String),
}

type Result<T> = std::result::Result<T, Error>;

fn read<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = tracecast_ingest::input::read(path).map_err(|e| Error::File { path: path.to_path_buf(), message: e.to_string() })?;
    serde_json::from_slice(&text)
        .map_err(|e| Error::File { path: path.to_path_buf(), message: format!("not a MAD-Max configuration: {e}") })
}

/// A MAD-Max model description (the fields of every model type).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Name.
    pub name: String,
    /// `LLM`, `LLM_MoE`, `DLRM`, `DLRM_MoE`, `DLRM_Transformer`, `ViT`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Bytes per dense parameter (selects the FLOP/s peak).
    pub bytes_per_nonemb_param: f64,
    /// Bytes per embedding parameter.
    pub bytes_per_emb_param: f64,
    /// Rows per embedding table (vocabulary for LLMs).
    #[serde(default)]
    pub entries_per_table: f64,
    /// Transformer layers.
    #[serde(default)]
    pub num_transformer_layers: usize,
    /// Attention heads.
    #[serde(default)]
    pub num_transformer_heads: f64,
    /// Model width.
    #[serde(default)]
    pub attention_dim: f64,
    /// FFN width.
    #[serde(default)]
    pub transformer_fc_dim: f64,
    /// Sequence length.
    #[serde(default)]
    pub transformer_seq_len: f64,
    /// DLRM bottom MLP layers.
    #[serde(default)]
    pub num_bot_mlp_layers: usize,
    /// DLRM top MLP layers.
    #[serde(default)]
    pub num_top_mlp_layers: usize,
    /// DLRM MLP width.
    #[serde(default)]
    pub mlp_dim: f64,
    /// DLRM embedding tables.
    #[serde(default)]
    pub num_tables: f64,
    /// DLRM embedding dimension.
    #[serde(default)]
    pub emb_dim: f64,
    /// DLRM lookups pooled per table and sample.
    #[serde(default)]
    pub pooling_size: f64,
    /// MoE experts.
    #[serde(default)]
    pub num_experts: f64,
    /// MoE experts active per token.
    #[serde(default)]
    pub num_active_experts: f64,
    /// ViT image side, pixels.
    #[serde(default)]
    pub image_size: f64,
    /// ViT patch side, pixels.
    #[serde(default)]
    pub patch_dim: f64,
}

pub use tracecast_calibrate::madmax::SystemConfig;

/// A MAD-Max task: what runs and how it is parallelized.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskConfig {
    /// Name.
    pub name: String,
    /// `pretrain`, `finetune` or `inference`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Embedding parallelism per level (`ddp`, `mp`).
    #[serde(default)]
    pub emb_parallel: Vec<String>,
    /// Degrees of the embedding levels.
    #[serde(default)]
    pub emb_parallel_degree: Vec<u32>,
    /// Transformer parallelism per level (`ddp`, `fsdp`, `tp`).
    #[serde(default)]
    pub transformer_parallel: Vec<String>,
    /// Degrees.
    #[serde(default)]
    pub transformer_parallel_degree: Vec<u32>,
    /// DLRM MLP parallelism per level (`ddp`, `fsdp`, `tp`).
    #[serde(default)]
    pub mlp_parallel: Vec<String>,
    /// Degrees.
    #[serde(default)]
    pub mlp_parallel_degree: Vec<u32>,
    /// Per-GPU batch of the embedding part.
    #[serde(default)]
    pub local_emb_bs: f64,
    /// Per-GPU batch of the transformer part.
    #[serde(default)]
    pub local_transformer_bs: f64,
    /// Per-GPU batch of the MLPs.
    #[serde(default)]
    pub local_mlp_bs: f64,
    /// Fine-tuning: frozen parts.
    #[serde(default)]
    pub freeze_emb: bool,
    /// Fine-tuning: transformer frozen.
    #[serde(default)]
    pub freeze_transformer: bool,
    /// Fine-tuning: layers from this one up are frozen.
    #[serde(default)]
    pub min_frozen_layer: Option<usize>,
    /// Fine-tuning: DLRM top MLP frozen.
    #[serde(default)]
    pub freeze_top_mlp: bool,
    /// Fine-tuning: DLRM bottom MLP frozen.
    #[serde(default)]
    pub freeze_bot_mlp: bool,
}

/// Reads the three files.
pub fn read_configs(model: &Path, system: &Path, task: &Path) -> Result<(ModelConfig, SystemConfig, TaskConfig)> {
    Ok((read_model(model)?, read_system(system)?, read_task(task)?))
}

/// Reads a model file: its layer counts at most what a projection simulates
/// ([`super::llm::MAX_LAYERS`]; each layer is tasks of the timeline, and a count
/// of 2^32 aborted the process allocating them).
pub fn read_model(path: &Path) -> Result<ModelConfig> {
    let m: ModelConfig = read(path)?;
    let counts = [
        ("num_transformer_layers", m.num_transformer_layers),
        ("num_bot_mlp_layers", m.num_bot_mlp_layers),
        ("num_top_mlp_layers", m.num_top_mlp_layers),
    ];
    if let Some((key, n)) = counts.iter().find(|(_, n)| *n > super::llm::MAX_LAYERS) {
        return Err(Error::File {
            path: path.to_path_buf(),
            message: format!("{key} {n}: more than the {} a projection simulates", super::llm::MAX_LAYERS),
        });
    }
    model_values_make_sense(&m).map_err(|message| Error::File { path: path.to_path_buf(), message })?;
    Ok(m)
}

/// Refuses a model's values no model has: a negative or non-finite size, a fractional count, a
/// transformer without width, heads or sequence (a width of 0 had projected a step of 0.00 ms,
/// a sequence of -4096 pure communication, both exit 0).
fn model_values_make_sense(m: &ModelConfig) -> std::result::Result<(), String> {
    // (key, value, a whole number)
    let values = [
        ("bytes_per_nonemb_param", m.bytes_per_nonemb_param, false),
        ("bytes_per_emb_param", m.bytes_per_emb_param, false),
        ("entries_per_table", m.entries_per_table, false),
        ("num_transformer_heads", m.num_transformer_heads, true),
        ("attention_dim", m.attention_dim, true),
        ("transformer_fc_dim", m.transformer_fc_dim, true),
        ("transformer_seq_len", m.transformer_seq_len, true),
        ("mlp_dim", m.mlp_dim, true),
        ("num_tables", m.num_tables, true),
        ("emb_dim", m.emb_dim, true),
        ("pooling_size", m.pooling_size, false),
        ("num_experts", m.num_experts, true),
        ("num_active_experts", m.num_active_experts, true),
        ("image_size", m.image_size, true),
        ("patch_dim", m.patch_dim, true),
    ];
    for (key, v, whole) in values {
        if !v.is_finite() || v < 0.0 || (whole && v.fract() != 0.0) {
            let what = if whole { "a whole number, 0 or more" } else { "a number, 0 or more" };
            return Err(format!("{key} {v}: must be {what}"));
        }
    }
    for (key, v) in [("bytes_per_nonemb_param", m.bytes_per_nonemb_param), ("bytes_per_emb_param", m.bytes_per_emb_param)] {
        if v <= 0.0 {
            return Err(format!("{key} {v}: must be above 0"));
        }
    }
    // The dense parameters' bytes choose the system file's peak (i8, f16, f32, f64): another
    // number had been blamed on the system file ("3 bytes per dense parameter: no matching peak").
    if ![1.0, 2.0, 4.0, 8.0].contains(&m.bytes_per_nonemb_param) {
        return Err(format!(
            "bytes_per_nonemb_param {}: 1, 2, 4 or 8 (the bytes of the system file's i8_ops, f16_flops, f32_flops, f64_flops)",
            m.bytes_per_nonemb_param
        ));
    }
    // A transformer without layers had stopped a projection with "0 layers cannot fill pp=1
    // stages", naming neither the file nor the key.
    if matches!(m.kind.as_str(), "LLM" | "LLM_MoE" | "ViT") && m.num_transformer_layers == 0 {
        return Err(format!("num_transformer_layers 0 (or missing): a transformer ({}) needs at least one layer", m.kind));
    }
    if m.num_transformer_layers > 0 {
        let mut needed = vec![
            ("num_transformer_heads", m.num_transformer_heads),
            ("attention_dim", m.attention_dim),
            ("transformer_fc_dim", m.transformer_fc_dim),
        ];
        // A ViT's sequence is its patches.
        if m.kind == "ViT" {
            needed.extend([("image_size", m.image_size), ("patch_dim", m.patch_dim)]);
        } else {
            needed.push(("transformer_seq_len", m.transformer_seq_len));
        }
        // (A width its heads do not divide is MAD-Max's own: its gpt4_1.8t has 10 704 over 96.)
        if let Some((key, _)) = needed.iter().find(|(_, v)| *v == 0.0) {
            return Err(format!("{key} 0 (or missing): a model of transformer layers needs it above 0"));
        }
    }
    if m.num_active_experts > m.num_experts {
        return Err(format!("num_active_experts {} is more than num_experts {}", m.num_active_experts, m.num_experts));
    }
    Ok(())
}

/// Reads a task file: each parallelization list with as many degrees as
/// strategies, every degree at least 1 (a short list was cut silently, and a
/// degree of 0 surfaced as "tp × cp × pp × dp = 0").
pub fn read_task(path: &Path) -> Result<TaskConfig> {
    let t: TaskConfig = read(path)?;
    let lists = [
        ("emb_parallel", &t.emb_parallel, &t.emb_parallel_degree),
        ("transformer_parallel", &t.transformer_parallel, &t.transformer_parallel_degree),
        ("mlp_parallel", &t.mlp_parallel, &t.mlp_parallel_degree),
    ];
    for (name, strategies, degrees) in lists {
        let message = if strategies.len() != degrees.len() {
            format!("{name} lists {} strateg(ies) and {name}_degree {} degree(s): one degree each", strategies.len(), degrees.len())
        } else if degrees.contains(&0) {
            format!("{name}_degree {degrees:?}: every degree at least 1")
        } else {
            continue;
        };
        return Err(Error::File { path: path.to_path_buf(), message });
    }
    Ok(t)
}

/// Reads a system file and checks that it can price (under either assumptions).
pub fn read_system(path: &Path) -> Result<SystemConfig> {
    let s: SystemConfig = read(path)?;
    s.unpriceable().map_or(Ok(s), |message| Err(Error::File { path: path.to_path_buf(), message }))
}

/// The system's effective rates.
#[derive(Debug, Clone)]
pub struct Rates {
    /// FLOP/s of the dense parameters' dtype.
    pub flops: f64,
    /// HBM bytes/s.
    pub hbm: f64,
    /// All-to-all bytes/s per level (intra, inter; one entry on one node).
    pub all_to_all: Vec<f64>,
    /// All-reduce bytes/s per level.
    pub all_reduce: Vec<f64>,
    /// All-gather / reduce-scatter bytes/s per level.
    pub all_gather: Vec<f64>,
}

impl Rates {
    /// MAD-Max's effective rates of `system` for dense parameters of `bytes` bytes.
    pub fn of(system: &SystemConfig, bytes_per_param: f64) -> Result<Rates> {
        let s = system;
        let peak = s.peak_for(bytes_per_param).map_err(Error::Invalid)?;
        if s.num_nodes == 0 || !s.num_devices.is_multiple_of(s.num_nodes) {
            return Err(Error::Invalid(format!("{}: {} GPUs do not divide into {} nodes", s.name, s.num_devices, s.num_nodes)));
        }
        // Per GPU and direction: half the bidirectional link rate.
        let (intra, inter) = s.link_rates_bps();
        let blend = (1.0 - s.ar_perc_intra) * inter + s.ar_perc_intra * intra;
        let (all_to_all, all_reduce) = if s.num_nodes > 1 {
            (vec![intra, inter], vec![intra, blend])
        } else {
            if (s.ar_perc_intra - 1.0).abs() > 1e-12 {
                return Err(Error::Invalid(format!("{}: one node, so ar_perc_intra must be 1 (intra-node links only)", s.name)));
            }
            (vec![intra], vec![blend])
        };
        let all_gather = all_reduce.iter().map(|b| 2.0 * b).collect();
        Ok(Rates { flops: peak * s.flops_util, hbm: s.mem_bw * s.mem_bw_util, all_to_all, all_reduce, all_gather })
    }
}

/// The bandwidth of parallelism level `level` of a plan with `levels` levels.
fn level(bws: &[f64], levels: usize, level: usize) -> Result<f64> {
    let i = bws.len() as isize - levels as isize + level as isize;
    usize::try_from(i)
        .ok()
        .and_then(|i| bws.get(i).copied())
        .ok_or_else(|| Error::Invalid(format!("a {levels}-level plan on a system with {} network level(s)", bws.len())))
}

/// One level of a plan.
#[derive(Debug, Clone, PartialEq)]
struct Level {
    strategy: String,
    degree: u32,
}

fn plan(what: &str, strategies: &[String], degrees: &[u32], devices: u32, per_node: u32, allowed: &[&str]) -> Result<Vec<Level>> {
    if strategies.len() != degrees.len() {
        return Err(Error::Invalid(format!("{what}: {} strategies but {} degrees", strategies.len(), degrees.len())));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut product = 1u64;
    for (i, (s, d)) in strategies.iter().zip(degrees).enumerate() {
        if !allowed.contains(&s.as_str()) {
            return Err(Error::Invalid(format!("{what}: unknown strategy {s:?} ({})", allowed.join(", "))));
        }
        if !seen.insert(s.as_str()) {
            return Err(Error::Invalid(format!("{what}: {s} appears twice")));
        }
        if s == "fsdp" && i > 0 {
            return Err(Error::Invalid(format!("{what}: FSDP must be the first level")));
        }
        if *d <= 1 {
            return Err(Error::Invalid(format!("{what}: a degree of {d} is redundant")));
        }
        product = product.checked_mul(u64::from(*d)).ok_or_else(|| {
            let degrees: Vec<String> = degrees.iter().map(u32::to_string).collect();
            Error::Invalid(format!("{what}: degrees {} multiply past {}", degrees.join(" × "), u64::MAX))
        })?;
    }
    if product != u64::from(devices) {
        return Err(Error::Invalid(format!("{what}: degrees multiply to {product}, the system has {devices} GPUs")));
    }
    // MAD-Max models up to 2-D plans whose first level is a node or the whole system.
    if strategies.len() > 2 {
        return Err(Error::Invalid(format!("{what}: MAD-Max models up to two levels of parallelism")));
    }
    if let Some(d) = degrees.first()
        && *d != per_node
        && *d != devices
    {
        return Err(Error::Invalid(format!("{what}: the first level ({d}) must span a node ({per_node}) or the system ({devices})")));
    }
    Ok(strategies.iter().zip(degrees).map(|(s, d)| Level { strategy: s.clone(), degree: *d }).collect())
}

impl TaskConfig {
    /// The global batches of the MLPs and of the embeddings: each local batch × its
    /// data-parallel degrees (a model-parallel embedding's local batch is the whole batch).
    pub fn global_batches(&self) -> (f64, f64) {
        let replicas = |strategies: &[String], degrees: &[u32]| {
            let levels: Vec<Level> = strategies.iter().zip(degrees).map(|(s, &degree)| Level { strategy: s.clone(), degree }).collect();
            factors(&levels).0
        };
        (
            self.local_mlp_bs * replicas(&self.mlp_parallel, &self.mlp_parallel_degree),
            self.local_emb_bs * replicas(&self.emb_parallel, &self.emb_parallel_degree),
        )
    }
}

/// The one global batch of a task's parts (name, local batch, levels): each local batch ×
/// its data-parallel degrees. Parts that disagree are refused, each named with its batch.
fn global_batch(parts: &[(&str, f64, &[Level])]) -> Result<f64> {
    let batches: Vec<(&str, f64)> = parts.iter().map(|&(name, local, levels)| (name, local * factors(levels).0)).collect();
    let first = batches.first().map_or(0.0, |b| b.1);
    if batches.iter().any(|b| (b.1 - first).abs() > 1e-9) {
        let each: Vec<String> = batches.iter().map(|(name, b)| format!("{name} {b}")).collect();
        return Err(Error::Invalid(format!("the parts' global batches differ: {}", each.join(", "))));
    }
    Ok(first)
}

/// Products of the degrees by role: replicas (data parallel) and shards.
fn factors(levels: &[Level]) -> (f64, f64) {
    let (mut duplicate, mut shard) = (1.0, 1.0);
    for l in levels {
        let d = f64::from(l.degree);
        match l.strategy.as_str() {
            "ddp" => duplicate *= d,
            "mp" | "tp" | "pp" => shard *= d,
            "fsdp" => {
                duplicate *= d;
                shard *= d;
            }
            _ => {}
        }
    }
    (duplicate, shard)
}

/// What a MAD-Max run reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MadmaxRun {
    /// The simulated lanes.
    #[serde(skip)]
    pub timeline: Timeline,
    /// Samples per iteration over the whole system.
    pub global_batch: f64,
    /// Model weights per GPU, bytes (MAD-Max counts weights only).
    pub weight_bytes_per_gpu: f64,
    /// HBM per GPU, bytes.
    pub hbm_bytes: f64,
}

impl MadmaxRun {
    /// The run as a [`Projection`].
    pub fn projection(&self, model: &ModelConfig, system: &SystemConfig, task: &TaskConfig) -> Projection {
        let times = self.timeline.times();
        let weights_gb = self.weight_bytes_per_gpu / 1e9;
        let hbm_gb = self.hbm_bytes / 1e9;
        let levels = |name: &str, s: &[String], d: &[u32]| -> Option<String> {
            (!s.is_empty()).then(|| format!("{name}: {}", s.iter().zip(d).map(|(s, d)| format!("{s}={d}")).collect::<Vec<_>>().join("×")))
        };
        let plan = [
            levels("emb", &task.emb_parallel, &task.emb_parallel_degree),
            levels("transformer", &task.transformer_parallel, &task.transformer_parallel_degree),
            levels("mlp", &task.mlp_parallel, &task.mlp_parallel_degree),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ");
        Projection {
            model: model.name.clone(),
            system: system.name.clone(),
            task: task.kind.clone(),
            plan,
            assumptions: "madmax",
            throughput: if times.iteration_ms > 0.0 { self.global_batch / (times.iteration_ms / 1e3) } else { 0.0 },
            times,
            global_batch: self.global_batch,
            memory_gb_per_gpu: weights_gb,
            memory: Memory { weights_gb, ..Memory::default() },
            hbm_gb,
            fits_memory: weights_gb <= hbm_gb,
            ttft_ms: None,
            tpot_ms: None,
            mfu: None,
            tokens_per_s_per_gpu: None,
            linear_format: tracecast_calibrate::catalog::Dtype::Bf16,
            // The system file's numbers that priced it, said with the rules.
            notes: vec![format!(
                "MAD-Max assumptions: one utilization factor for compute (flops_util {}) and one for HBM (mem_bw_util {}) of {}, collectives as bytes / effective bandwidth without latency, two streams; memory counts model weights only",
                system.flops_util, system.mem_bw_util, system.name
            )],
            unpriced_keys: Vec::new(),
        }
    }
}

/// Builds and simulates the task under MAD-Max's assumptions.
pub fn run(model: &ModelConfig, system: &SystemConfig, task: &TaskConfig) -> Result<MadmaxRun> {
    let rates = Rates::of(system, model.bytes_per_nonemb_param)?;
    if !matches!(task.kind.as_str(), "pretrain" | "finetune" | "inference") {
        return Err(Error::Invalid(format!("task type {:?} (pretrain, finetune, inference)", task.kind)));
    }
    match model.kind.as_str() {
        "LLM" | "LLM_MoE" => transformer(model, system, task, &rates, Backward::GatherAfterLayerAbove),
        // MAD-Max's ViT task is its "post-optimized" transformer: the backward gathers are not
        // held behind the layer above. Patches are its tokens.
        "ViT" => transformer(model, system, task, &rates, Backward::Prefetch),
        "DLRM" | "DLRM_MoE" => dlrm(model, system, task, &rates),
        "DLRM_Transformer" => dlrm_transformer(model, system, task, &rates),
        other => Err(Error::Invalid(format!(
            "model type {other}: not a MAD-Max model type (LLM, LLM_MoE, ViT, DLRM, DLRM_MoE, DLRM_Transformer)"
        ))),
    }
}

fn per_node(system: &SystemConfig) -> u32 {
    system.num_devices / system.num_nodes.max(1)
}

/// Names an operation `{prefix}{layer}{suffix}` (no operation for negative layers).
fn at(prefix: &str, layer: isize, suffix: &str) -> String {
    format!("{prefix}{layer}{suffix}")
}

/// The embedding's communication in one pass, named `{pass}_c_…`; returns the names.
fn embedding_comm(
    lanes: &mut Lanes,
    emb: &[Level],
    lookup_bytes: f64,
    rates: &Rates,
    pass: &str,
    backward: bool,
    deps: &[String],
) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for (i, l) in emb.iter().enumerate() {
        if l.strategy == "mp" {
            let t = 2.0 * (lookup_bytes / f64::from(l.degree)) / level(&rates.all_to_all, emb.len(), i)?;
            let name = format!("{pass}_c_all2all{i}");
            lanes.add(name.clone(), OpKind::AllToAll, t, deps);
            names.push(name);
        } else if backward && emb[0].strategy == "ddp" {
            // Replicated tables: their gradients are all-reduced after the backward pass.
            let t = lookup_bytes / level(&rates.all_reduce, emb.len(), i)?;
            let name = format!("{pass}_c_ar{i}");
            lanes.add(name.clone(), OpKind::AllReduce, t, deps);
            names.push(name);
        }
    }
    Ok(names)
}

/// How the backward pass orders FSDP weight gathers (MAD-Max has two task
/// versions: LLM runs the first, ViT the second).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backward {
    /// A layer's gathers wait for the backward of the layer above and queue
    /// behind its gradient reduce-scatters.
    GatherAfterLayerAbove,
    /// The last layer's FC weights are prefetched (whatever the plan); the
    /// other gathers have no dependency and only queue on the lane.
    Prefetch,
}

fn transformer(m: &ModelConfig, system: &SystemConfig, task: &TaskConfig, rates: &Rates, backward: Backward) -> Result<MadmaxRun> {
    let node = per_node(system);
    let emb = plan("emb_parallel", &task.emb_parallel, &task.emb_parallel_degree, system.num_devices, node, &["ddp", "mp"])?;
    let tf = plan(
        "transformer_parallel",
        &task.transformer_parallel,
        &task.transformer_parallel_degree,
        system.num_devices,
        node,
        &["ddp", "fsdp", "tp"],
    )?;
    let (_, emb_shard) = factors(&emb);
    let (_, tf_shard) = factors(&tf);
    let global_batch = global_batch(&[("embedding", task.local_emb_bs, &emb), ("transformer", task.local_transformer_bs, &tf)])?;
    // A ViT's tokens are its patches, its "vocabulary" one patch of RGB pixels.
    let (seq, entries) = if m.kind == "ViT" {
        if m.patch_dim <= 0.0 {
            return Err(Error::Invalid("ViT: patch_dim must be positive".into()));
        }
        ((m.image_size / m.patch_dim).ceil().powi(2), m.patch_dim * m.patch_dim * 3.0)
    } else {
        (m.transformer_seq_len, m.entries_per_table)
    };
    let (d, layers) = (m.attention_dim, m.num_transformer_layers);
    if layers == 0 || layers > super::llm::MAX_LAYERS {
        return Err(Error::Invalid(format!("num_transformer_layers {layers}: from 1 to {}", super::llm::MAX_LAYERS)));
    }
    let attn_params = 4.0 * d * d;
    // MoE: every expert's FC weights are gathered and reduced; a token's FLOPs go through its active experts;
    // under TP the experts are spread over the ranks, and tokens are dispatched to them and back (all-to-all).
    let moe = m.kind == "LLM_MoE";
    if moe && m.num_active_experts > m.num_experts {
        return Err(Error::Invalid(format!("{} active experts of {}", m.num_active_experts, m.num_experts)));
    }
    let (experts, active) = if moe { (m.num_experts, m.num_active_experts) } else { (1.0, 1.0) };
    let fc_params = 2.0 * d * m.transformer_fc_dim * experts;
    let tp = tf.iter().find(|l| l.strategy == "tp").map_or(1.0, |l| f64::from(l.degree));
    let attn_flops = 2.0 * attn_params * seq * task.local_transformer_bs / tp;
    let fc_flops = 2.0 * (fc_params / experts) * active * seq * task.local_transformer_bs / tp;
    let lookup = 2.0 * seq * d * m.bytes_per_emb_param * task.local_emb_bs / emb_shard;
    let bytes = m.bytes_per_nonemb_param;
    let fsdp = tf[0].strategy == "fsdp";
    let first_degree = f64::from(tf[0].degree);
    let gather_bw = level(&rates.all_gather, tf.len(), 0)?;
    let attn_gather = attn_params / tf_shard * first_degree * bytes / gather_bw;
    let fc_gather = fc_params / tf_shard * first_degree * bytes / gather_bw;
    let act_bytes = task.local_transformer_bs * seq * d * bytes;
    // The tokens a rank exchanges with the experts of the others.
    let dispatch = |lanes: &mut Lanes, name: String, dep: Vec<String>| -> Result<()> {
        if moe {
            for (i, lv) in tf.iter().enumerate() {
                if lv.strategy == "tp" {
                    let t = act_bytes / experts / level(&rates.all_to_all, tf.len(), i)?;
                    lanes.add(name.clone(), OpKind::AllToAll, t, &dep);
                }
            }
        }
        Ok(())
    };
    let v: fn(&[&str]) -> Vec<String> = |x| x.iter().map(|s| (*s).to_string()).collect();

    let mut lanes = Lanes::default();
    // Forward.
    lanes.add("EMB_f", OpKind::Embedding, lookup / rates.hbm, &[]);
    let emb_f_c = embedding_comm(&mut lanes, &emb, lookup, rates, "EMB_f", false, &v(&["EMB_f"]))?;
    for l in 0..layers as isize {
        if fsdp {
            lanes.add(at("Attn", l, "_f_c_wgt_ag"), OpKind::AllGather, attn_gather, &[at("Attn", l - 1, "_f")]);
        }
        let mut deps = vec![at("Attn", l, "_f_c_wgt_ag")];
        if l == 0 {
            deps.extend(emb_f_c.iter().cloned());
        } else {
            deps.extend([
                at("TransformerFC", l - 1, "_f"),
                at("TransformerFC", l - 1, "_f_c_act_ar"),
                at("MoE", l - 1, "_f_c_act_all2all2"),
            ]);
        }
        lanes.add(at("Attn", l, "_f"), OpKind::Gemm, attn_flops / rates.flops, &deps);
        for (i, lv) in tf.iter().enumerate() {
            if lv.strategy == "tp" {
                let t = act_bytes / level(&rates.all_reduce, tf.len(), i)?;
                lanes.add(at("Attn", l, "_f_c_act_ar"), OpKind::AllReduce, t, &[at("Attn", l, "_f")]);
            }
        }
        if fsdp {
            lanes.add(at("TransformerFC", l, "_f_c_wgt_ag"), OpKind::AllGather, fc_gather, &[at("TransformerFC", l - 1, "_f")]);
        }
        dispatch(&mut lanes, at("MoE", l, "_f_c_act_all2all1"), vec![at("Attn", l, "_f_c_act_ar")])?;
        let deps =
            [at("Attn", l, "_f"), at("Attn", l, "_f_c_act_ar"), at("TransformerFC", l, "_f_c_wgt_ag"), at("MoE", l, "_f_c_act_all2all1")];
        lanes.add(at("TransformerFC", l, "_f"), OpKind::Gemm, fc_flops / rates.flops, &deps);
        for (i, lv) in tf.iter().enumerate() {
            if lv.strategy == "tp" {
                let t = act_bytes / level(&rates.all_reduce, tf.len(), i)?;
                lanes.add(at("TransformerFC", l, "_f_c_act_ar"), OpKind::AllReduce, t, &[at("TransformerFC", l, "_f")]);
                if moe {
                    let t = act_bytes / experts / level(&rates.all_to_all, tf.len(), i)?;
                    let deps = [at("TransformerFC", l, "_f"), at("TransformerFC", l, "_f_c_act_ar")];
                    lanes.add(at("MoE", l, "_f_c_act_all2all2"), OpKind::AllToAll, t, &deps);
                }
            }
        }
    }
    if task.kind != "inference" {
        let (freeze_emb, freeze_tf, min_frozen) = if task.kind == "finetune" {
            (task.freeze_emb, task.freeze_transformer, task.min_frozen_layer.unwrap_or(layers))
        } else {
            (false, false, layers)
        };
        if freeze_emb && freeze_tf {
            return Err(Error::Invalid("fine-tuning with everything frozen trains nothing".into()));
        }
        lanes.barrier();
        // Backward: each layer's weights are gathered once the layer above
        // has finished its backward; gradients are reduce-scattered (FSDP) or
        // all-reduced (DDP) after each layer; activations all-reduced under TP.
        // The gathers queue behind the gradient traffic on the one
        // communication lane, which is where MAD-Max's FSDP exposure comes from.
        for l in (0..layers as isize).rev() {
            let top = l == layers as isize - 1;
            match backward {
                Backward::GatherAfterLayerAbove if fsdp => {
                    lanes.add(at("TransformerFC", l, "_b_c_wgt_ag"), OpKind::AllGather, fc_gather, &[at("TransformerFC", l + 1, "_b")]);
                }
                Backward::Prefetch => {
                    if top {
                        lanes.add(at("TransformerFC", l, "_b_c_wgt_ag"), OpKind::AllGather, fc_gather, &[]);
                    }
                    if fsdp {
                        lanes.add(at("Attn", l, "_b_c_wgt_ag"), OpKind::AllGather, attn_gather, &[]);
                    }
                }
                _ => {}
            }
            dispatch(&mut lanes, at("MoE", l, "_b_c_act_all2all1"), vec![at("Attn", l + 1, "_b_c_act_ar")])?;
            let deps = [
                at("Attn", l + 1, "_b"),
                at("Attn", l + 1, "_b_c_act_ar"),
                at("TransformerFC", l, "_b_c_wgt_ag"),
                at("MoE", l, "_b_c_act_all2all1"),
            ];
            lanes.add(at("TransformerFC", l, "_b"), OpKind::Gemm, 2.0 * fc_flops / rates.flops, &deps);
            let trains = !freeze_tf && (l as usize) < min_frozen;
            let combine = moe.then(|| (at("MoE", l, "_b_c_act_all2all2"), act_bytes / experts));
            let fc = Gradients { trains, combine, ..Gradients::new(&tf, fc_params, bytes, tf_shard, act_bytes) };
            fc.add(&mut lanes, rates, &at("TransformerFC", l, "_b"))?;
            match backward {
                Backward::GatherAfterLayerAbove if fsdp => {
                    lanes.add(at("Attn", l, "_b_c_wgt_ag"), OpKind::AllGather, attn_gather, &[at("Attn", l + 1, "_b")]);
                }
                Backward::Prefetch if fsdp && l > 0 => {
                    lanes.add(at("TransformerFC", l - 1, "_b_c_wgt_ag"), OpKind::AllGather, fc_gather, &[]);
                }
                _ => {}
            }
            let deps = [
                at("TransformerFC", l, "_b"),
                at("TransformerFC", l, "_b_c_act_ar"),
                at("MoE", l, "_b_c_act_all2all2"),
                at("Attn", l, "_b_c_wgt_ag"),
            ];
            lanes.add(at("Attn", l, "_b"), OpKind::Gemm, 2.0 * attn_flops / rates.flops, &deps);
            let attn = Gradients { trains, ..Gradients::new(&tf, attn_params, bytes, tf_shard, act_bytes) };
            attn.add(&mut lanes, rates, &at("Attn", l, "_b"))?;
        }
        if !freeze_emb {
            let c = embedding_comm(&mut lanes, &emb, lookup, rates, "EMB_b", true, &v(&["Attn0_b", "Attn0_b_c_act_ar"]))?;
            lanes.add("EMB_b", OpKind::Embedding, lookup / rates.hbm, &c);
        }
    }
    let weights = entries * d + seq * d;
    let weight_bytes = weights * m.bytes_per_emb_param / emb_shard + layers as f64 * (attn_params + fc_params) * bytes / tf_shard;
    Ok(MadmaxRun { timeline: lanes.simulate(), global_batch, weight_bytes_per_gpu: weight_bytes, hbm_bytes: system.mem_cap })
}

/// The communication after the backward of a layer of `params` parameters:
/// its gradients all-reduced (DDP) or reduce-scattered (FSDP), its
/// activations all-reduced under TP and, for MoE, the tokens' return from the
/// experts — per level of the plan, in the plan's order.
struct Gradients<'a> {
    levels: &'a [Level],
    params: f64,
    bytes: f64,
    shard: f64,
    act_bytes: f64,
    /// Whether the gradients are reduced (not for frozen parts).
    trains: bool,
    /// Whether this layer all-reduces its activations under TP (DLRM: every other layer).
    tp_here: bool,
    /// How many plan levels index the TP all-reduce's bandwidth (MAD-Max takes
    /// the other component's plan in two places of its DLRM-Transformer).
    tp_levels: usize,
    /// MoE: the return all-to-all (name, bytes) after the activation all-reduce.
    combine: Option<(String, f64)>,
}

impl<'a> Gradients<'a> {
    fn new(levels: &'a [Level], params: f64, bytes: f64, shard: f64, act_bytes: f64) -> Gradients<'a> {
        Gradients { levels, params, bytes, shard, act_bytes, trains: true, tp_here: true, tp_levels: levels.len(), combine: None }
    }

    /// Appends the operations after `op`.
    fn add(&self, lanes: &mut Lanes, rates: &Rates, op: &str) -> Result<()> {
        let mut shard = self.shard;
        let deps = [op.to_string()];
        let n = self.levels.len();
        for (i, l) in self.levels.iter().enumerate() {
            match l.strategy.as_str() {
                "ddp" if self.trains => {
                    let t = self.params / shard * self.bytes / level(&rates.all_reduce, n, i)?;
                    lanes.add(format!("{op}_c_wg_ar"), OpKind::AllReduce, t, &deps);
                }
                "fsdp" => {
                    shard /= f64::from(l.degree);
                    if self.trains {
                        let t = self.params / shard * self.bytes / level(&rates.all_gather, n, 0)?;
                        lanes.add(format!("{op}_c_wg_rs"), OpKind::ReduceScatter, t, &deps);
                    }
                }
                "tp" => {
                    shard /= f64::from(l.degree);
                    if self.tp_here {
                        let t = self.act_bytes / level(&rates.all_reduce, self.tp_levels, i)?;
                        lanes.add(format!("{op}_c_act_ar"), OpKind::AllReduce, t, &deps);
                    }
                    if let Some((name, bytes)) = &self.combine {
                        let t = bytes / level(&rates.all_to_all, n, i)?;
                        lanes.add(name.clone(), OpKind::AllToAll, t, &[op.to_string(), format!("{op}_c_act_ar")]);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn dlrm(m: &ModelConfig, system: &SystemConfig, task: &TaskConfig, rates: &Rates) -> Result<MadmaxRun> {
    let node = per_node(system);
    let mlp = plan("mlp_parallel", &task.mlp_parallel, &task.mlp_parallel_degree, system.num_devices, node, &["ddp", "fsdp", "tp"])?;
    let emb = plan("emb_parallel", &task.emb_parallel, &task.emb_parallel_degree, system.num_devices, node, &["ddp", "mp"])?;
    if mlp.iter().any(|l| l.strategy == "tp") && (!m.num_bot_mlp_layers.is_multiple_of(2) || !m.num_top_mlp_layers.is_multiple_of(2)) {
        return Err(Error::Invalid("tensor-parallel MLPs need an even number of layers".into()));
    }
    let (_, mlp_shard) = factors(&mlp);
    let (_, emb_shard) = factors(&emb);
    let global_batch = global_batch(&[("MLPs", task.local_mlp_bs, &mlp), ("embeddings", task.local_emb_bs, &emb)])?;
    let layer_params = m.mlp_dim * m.mlp_dim;
    let tp = mlp.iter().find(|l| l.strategy == "tp").map_or(1.0, |l| f64::from(l.degree));
    let layer_flops = 2.0 * layer_params * task.local_mlp_bs / tp;
    let lookup = m.num_tables * m.pooling_size * m.emb_dim * m.bytes_per_emb_param * task.local_emb_bs / emb_shard;
    let bytes = m.bytes_per_nonemb_param;
    let fsdp = mlp[0].strategy == "fsdp";
    let gather = layer_params / mlp_shard * f64::from(mlp[0].degree) * bytes / level(&rates.all_gather, mlp.len(), 0)?;
    let act_bytes = task.local_mlp_bs * m.mlp_dim * bytes;
    let t_layer = layer_flops / rates.flops;
    // DLRM-MoE: every top-MLP layer is a set of experts — their weights are all
    // gathered and reduced, a sample runs through its active ones, and under TP
    // samples go to the experts and back (all-to-all) around each layer.
    let moe = m.kind == "DLRM_MoE";
    if moe && m.num_active_experts > m.num_experts {
        return Err(Error::Invalid(format!("{} active experts of {}", m.num_active_experts, m.num_experts)));
    }
    let (experts, active) = if moe { (m.num_experts, m.num_active_experts) } else { (1.0, 1.0) };
    let top_params = experts * layer_params;
    let top_gather = experts * gather;
    let t_top = active * t_layer;
    let exchange = |lanes: &mut Lanes, name: String, deps: &[String]| -> Result<()> {
        if moe {
            for (i, l) in mlp.iter().enumerate() {
                if l.strategy == "tp" {
                    let t = act_bytes / experts / level(&rates.all_to_all, mlp.len(), i)?;
                    lanes.add(name.clone(), OpKind::AllToAll, t, deps);
                }
            }
        }
        Ok(())
    };
    let (nb, nt) = (m.num_bot_mlp_layers as isize, m.num_top_mlp_layers as isize);
    let bottom = BottomMlp { levels: &mlp, layers: nb, fsdp, gather, t_layer, layer_params, bytes, shard: mlp_shard, act_bytes };

    let mut lanes = Lanes::default();
    lanes.add("EMB_f", OpKind::Embedding, lookup / rates.hbm, &[]);
    let emb_f_c = embedding_comm(&mut lanes, &emb, lookup, rates, "EMB_f", false, &["EMB_f".to_string()])?;
    bottom.forward(&mut lanes, rates)?;
    for l in 0..nt {
        if fsdp {
            let dep = match l {
                0 => at("MLPBot", nb - 2, "_f"),
                1 => at("MLPBot", nb - 1, "_f"),
                _ => at("MLPTop", l - 2, "_f"),
            };
            lanes.add(at("MLPTop", l, "_f_c_wgt_ag"), OpKind::AllGather, top_gather, &[dep]);
        }
        exchange(&mut lanes, at("MoE", l, "_f_c_act_all2all1"), &[at("MoE", l - 1, "_f_c_act_all2all2")])?;
        let mut deps = vec![at("MLPTop", l, "_f_c_wgt_ag"), at("MoE", l, "_f_c_act_all2all1")];
        if l == 0 {
            deps.extend(emb_f_c.iter().cloned());
            deps.extend([at("MLPBot", nb - 1, "_f"), at("MLPBot", nb - 1, "_f_c_act_ar")]);
        } else {
            deps.extend([at("MLPTop", l - 1, "_f"), at("MLPTop", l - 1, "_f_c_act_ar")]);
        }
        lanes.add(at("MLPTop", l, "_f"), OpKind::Gemm, t_top, &deps);
        // Per TP level: the activation all-reduce (odd layers), then the return all-to-all.
        for (i, lv) in mlp.iter().enumerate() {
            if lv.strategy == "tp" {
                if l % 2 == 1 {
                    let t = act_bytes / level(&rates.all_reduce, mlp.len(), i)?;
                    lanes.add(at("MLPTop", l, "_f_c_act_ar"), OpKind::AllReduce, t, &[at("MLPTop", l, "_f")]);
                }
                if moe {
                    let t = act_bytes / experts / level(&rates.all_to_all, mlp.len(), i)?;
                    let deps = [at("MLPTop", l, "_f"), at("MLPTop", l, "_f_c_act_ar")];
                    lanes.add(at("MoE", l, "_f_c_act_all2all2"), OpKind::AllToAll, t, &deps);
                }
            }
        }
    }
    if task.kind != "inference" {
        let (freeze_top, freeze_bot, freeze_emb) =
            if task.kind == "finetune" { (task.freeze_top_mlp, task.freeze_bot_mlp, task.freeze_emb) } else { (false, false, false) };
        if freeze_top && freeze_bot && freeze_emb {
            return Err(Error::Invalid("fine-tuning with everything frozen trains nothing".into()));
        }
        lanes.barrier();
        for l in (0..nt).rev() {
            if fsdp {
                lanes.add(at("MLPTop", l, "_b_c_wgt_ag"), OpKind::AllGather, top_gather, &[at("MLPTop", l + 2, "_b")]);
            }
            exchange(&mut lanes, at("MoE", l, "_b_c_act_all2all1"), &[at("MoE", l + 1, "_b_c_act_all2all2")])?;
            let mut deps = vec![at("MLPTop", l, "_b_c_wgt_ag"), at("MoE", l, "_b_c_act_all2all1")];
            if l < nt - 1 {
                deps.extend([at("MLPTop", l + 1, "_b"), at("MLPTop", l + 1, "_b_c_act_ar")]);
            }
            lanes.add(at("MLPTop", l, "_b"), OpKind::Gemm, 2.0 * t_top, &deps);
            let combine = moe.then(|| (at("MoE", l, "_b_c_act_all2all2"), act_bytes / experts));
            let top = Gradients {
                trains: !freeze_top,
                tp_here: l % 2 == 0,
                combine,
                ..Gradients::new(&mlp, top_params, bytes, mlp_shard, act_bytes)
            };
            top.add(&mut lanes, rates, &at("MLPTop", l, "_b"))?;
        }
        let mut emb_b_c = Vec::new();
        if !freeze_emb {
            emb_b_c =
                embedding_comm(&mut lanes, &emb, lookup, rates, "EMB_b", true, &[at("MLPTop", 0, "_b"), at("MLPTop", 0, "_b_c_act_ar")])?;
        }
        if !freeze_bot {
            bottom.backward(&mut lanes, rates, |l| at("MLPBot", l + 2, "_b"))?;
        }
        if !freeze_emb {
            lanes.add("EMB_b", OpKind::Embedding, lookup / rates.hbm, &emb_b_c);
        }
    }
    let mlp_params = m.num_bot_mlp_layers as f64 * layer_params + m.num_top_mlp_layers as f64 * top_params;
    let emb_params = m.num_tables * m.entries_per_table * m.emb_dim;
    let weight_bytes = mlp_params * bytes / mlp_shard + emb_params * m.bytes_per_emb_param / emb_shard;
    Ok(MadmaxRun { timeline: lanes.simulate(), global_batch, weight_bytes_per_gpu: weight_bytes, hbm_bytes: system.mem_cap })
}

/// A DLRM's bottom MLP, for its forward and backward passes.
struct BottomMlp<'a> {
    levels: &'a [Level],
    layers: isize,
    fsdp: bool,
    gather: f64,
    t_layer: f64,
    layer_params: f64,
    bytes: f64,
    shard: f64,
    act_bytes: f64,
}

impl BottomMlp<'_> {
    /// Layers bottom-up: each one's FSDP weight gather (two layers ahead), its
    /// GEMM, and under TP an activation all-reduce after every other layer.
    fn forward(&self, lanes: &mut Lanes, rates: &Rates) -> Result<()> {
        for l in 0..self.layers {
            if self.fsdp {
                lanes.add(at("MLPBot", l, "_f_c_wgt_ag"), OpKind::AllGather, self.gather, &[at("MLPBot", l - 2, "_f")]);
            }
            let mut deps = vec![at("MLPBot", l, "_f_c_wgt_ag")];
            if l > 0 {
                deps.extend([at("MLPBot", l - 1, "_f"), at("MLPBot", l - 1, "_f_c_act_ar")]);
            }
            let op = at("MLPBot", l, "_f");
            lanes.add(op.clone(), OpKind::Gemm, self.t_layer, &deps);
            for (i, lv) in self.levels.iter().enumerate() {
                if lv.strategy == "tp" && l % 2 == 1 {
                    let t = self.act_bytes / level(&rates.all_reduce, self.levels.len(), i)?;
                    lanes.add(format!("{op}_c_act_ar"), OpKind::AllReduce, t, std::slice::from_ref(&op));
                }
            }
        }
        Ok(())
    }

    /// Layers top-down after the top MLP's backward: each one's FSDP weight
    /// gather (waiting for `gather_after(layer)`), its GEMMs, its gradient and
    /// TP traffic.
    fn backward(&self, lanes: &mut Lanes, rates: &Rates, gather_after: impl Fn(isize) -> String) -> Result<()> {
        for l in (0..self.layers).rev() {
            if self.fsdp {
                lanes.add(at("MLPBot", l, "_b_c_wgt_ag"), OpKind::AllGather, self.gather, &[gather_after(l)]);
            }
            let mut deps = vec![at("MLPBot", l, "_b_c_wgt_ag")];
            if l == self.layers - 1 {
                deps.extend([at("MLPTop", 0, "_b"), at("MLPTop", 0, "_b_c_act_ar")]);
            } else {
                deps.extend([at("MLPBot", l + 1, "_b"), at("MLPBot", l + 1, "_b_c_act_ar")]);
            }
            lanes.add(at("MLPBot", l, "_b"), OpKind::Gemm, 2.0 * self.t_layer, &deps);
            let grads =
                Gradients { tp_here: l % 2 == 0, ..Gradients::new(self.levels, self.layer_params, self.bytes, self.shard, self.act_bytes) };
            grads.add(lanes, rates, &at("MLPBot", l, "_b"))?;
        }
        Ok(())
    }
}

/// DLRM with transformer layers over the bottom MLP's output and the
/// pooled embeddings (feature interaction), then the top MLP.
fn dlrm_transformer(m: &ModelConfig, system: &SystemConfig, task: &TaskConfig, rates: &Rates) -> Result<MadmaxRun> {
    let node = per_node(system);
    let mlp = plan("mlp_parallel", &task.mlp_parallel, &task.mlp_parallel_degree, system.num_devices, node, &["ddp", "fsdp", "tp"])?;
    let emb = plan("emb_parallel", &task.emb_parallel, &task.emb_parallel_degree, system.num_devices, node, &["ddp", "mp"])?;
    let tf = plan(
        "transformer_parallel",
        &task.transformer_parallel,
        &task.transformer_parallel_degree,
        system.num_devices,
        node,
        &["ddp", "fsdp", "tp"],
    )?;
    let (_, mlp_shard) = factors(&mlp);
    let (_, emb_shard) = factors(&emb);
    let (_, tf_shard) = factors(&tf);
    let global_batch = global_batch(&[
        ("MLPs", task.local_mlp_bs, &mlp),
        ("embeddings", task.local_emb_bs, &emb),
        ("transformer", task.local_transformer_bs, &tf),
    ])?;
    let bytes = m.bytes_per_nonemb_param;
    let tp_of = |levels: &[Level]| levels.iter().find(|l| l.strategy == "tp").map_or(1.0, |l| f64::from(l.degree));
    // MLPs.
    let layer_params = m.mlp_dim * m.mlp_dim;
    let t_layer = 2.0 * layer_params * task.local_mlp_bs / tp_of(&mlp) / rates.flops;
    let mlp_fsdp = mlp[0].strategy == "fsdp";
    let mlp_gather = layer_params / mlp_shard * f64::from(mlp[0].degree) * bytes / level(&rates.all_gather, mlp.len(), 0)?;
    let mlp_act = task.local_mlp_bs * m.mlp_dim * bytes;
    // Transformer.
    let (d, seq) = (m.attention_dim, m.transformer_seq_len);
    let attn_params = 4.0 * d * d;
    let fc_params = 2.0 * d * m.transformer_fc_dim;
    let t_attn = 2.0 * attn_params * seq * task.local_transformer_bs / tp_of(&tf) / rates.flops;
    let t_fc = 2.0 * fc_params * seq * task.local_transformer_bs / tp_of(&tf) / rates.flops;
    let tf_fsdp = tf[0].strategy == "fsdp";
    let tf_gather_bw = level(&rates.all_gather, tf.len(), 0)?;
    let attn_gather = attn_params / tf_shard * f64::from(tf[0].degree) * bytes / tf_gather_bw;
    let fc_gather = fc_params / tf_shard * f64::from(tf[0].degree) * bytes / tf_gather_bw;
    let tf_act = task.local_transformer_bs * seq * d * bytes;
    let lookup = m.num_tables * m.pooling_size * m.emb_dim * m.bytes_per_emb_param * task.local_emb_bs / emb_shard;
    let (nb, nt, layers) = (m.num_bot_mlp_layers as isize, m.num_top_mlp_layers as isize, m.num_transformer_layers as isize);
    // An activation all-reduce per TP level; `levels` picks the bandwidth list
    // length (MAD-Max uses the other component's in two places).
    let act_ar = |lanes: &mut Lanes, name: &str, owner: &[Level], levels: usize, bytes: f64| -> Result<()> {
        for (i, l) in owner.iter().enumerate() {
            if l.strategy == "tp" {
                let t = bytes / level(&rates.all_reduce, levels, i)?;
                lanes.add(format!("{name}_c_act_ar"), OpKind::AllReduce, t, &[name.to_string()]);
            }
        }
        Ok(())
    };

    let mut lanes = Lanes::default();
    lanes.add("EMB_f", OpKind::Embedding, lookup / rates.hbm, &[]);
    let emb_f_c = embedding_comm(&mut lanes, &emb, lookup, rates, "EMB_f", false, &["EMB_f".to_string()])?;
    let bottom = BottomMlp {
        levels: &mlp,
        layers: nb,
        fsdp: mlp_fsdp,
        gather: mlp_gather,
        t_layer,
        layer_params,
        bytes,
        shard: mlp_shard,
        act_bytes: mlp_act,
    };
    bottom.forward(&mut lanes, rates)?;
    for l in 0..layers {
        if tf_fsdp {
            let dep = if l == 0 { at("MLPBot", nb - 2, "_f") } else { at("Attn", l - 1, "_f") };
            lanes.add(at("Attn", l, "_f_c_wgt_ag"), OpKind::AllGather, attn_gather, &[dep]);
        }
        let mut deps = vec![at("Attn", l, "_f_c_wgt_ag")];
        if l == 0 {
            deps.extend(emb_f_c.iter().cloned());
            deps.extend([at("MLPBot", nb - 1, "_f"), at("MLPBot", nb - 1, "_f_c_act_ar")]);
        } else {
            deps.extend([at("TransformerFC", l - 1, "_f"), at("TransformerFC", l - 1, "_f_c_act_ar")]);
        }
        lanes.add(at("Attn", l, "_f"), OpKind::Gemm, t_attn, &deps);
        act_ar(&mut lanes, &at("Attn", l, "_f"), &tf, tf.len(), tf_act)?;
        if tf_fsdp {
            let dep = if l == 0 { at("MLPBot", nb - 1, "_f") } else { at("TransformerFC", l - 1, "_f") };
            lanes.add(at("TransformerFC", l, "_f_c_wgt_ag"), OpKind::AllGather, fc_gather, &[dep]);
        }
        let deps = [at("Attn", l, "_f"), at("Attn", l, "_f_c_act_ar"), at("TransformerFC", l, "_f_c_wgt_ag")];
        lanes.add(at("TransformerFC", l, "_f"), OpKind::Gemm, t_fc, &deps);
        act_ar(&mut lanes, &at("TransformerFC", l, "_f"), &tf, tf.len(), tf_act)?;
    }
    let last = layers - 1;
    for l in 0..nt {
        if mlp_fsdp {
            let dep = match l {
                0 => at("Attn", last, "_f"),
                1 => at("TransformerFC", last, "_f"),
                _ => at("MLPTop", l - 2, "_f"),
            };
            lanes.add(at("MLPTop", l, "_f_c_wgt_ag"), OpKind::AllGather, mlp_gather, &[dep]);
        }
        let mut deps = vec![at("MLPTop", l, "_f_c_wgt_ag")];
        if l == 0 {
            deps.extend([at("TransformerFC", last, "_f"), at("TransformerFC", last, "_f_c_act_ar")]);
        } else {
            deps.extend([at("MLPTop", l - 1, "_f"), at("MLPTop", l - 1, "_f_c_act_ar")]);
        }
        lanes.add(at("MLPTop", l, "_f"), OpKind::Gemm, t_layer, &deps);
        if l % 2 == 1 {
            act_ar(&mut lanes, &at("MLPTop", l, "_f"), &mlp, mlp.len(), mlp_act)?;
        }
    }
    if task.kind != "inference" {
        let finetune = task.kind == "finetune";
        let freeze_top = finetune && task.freeze_top_mlp;
        let freeze_bot = finetune && task.freeze_bot_mlp;
        let freeze_emb = finetune && task.freeze_emb;
        let freeze_tf = finetune && task.freeze_transformer;
        if freeze_top && freeze_bot && freeze_emb && freeze_tf {
            return Err(Error::Invalid("fine-tuning with everything frozen trains nothing".into()));
        }
        lanes.barrier();
        for l in (0..nt).rev() {
            if mlp_fsdp {
                lanes.add(at("MLPTop", l, "_b_c_wgt_ag"), OpKind::AllGather, mlp_gather, &[at("MLPTop", l + 2, "_b")]);
            }
            let mut deps = vec![at("MLPTop", l, "_b_c_wgt_ag")];
            if l < nt - 1 {
                deps.extend([at("MLPTop", l + 1, "_b"), at("MLPTop", l + 1, "_b_c_act_ar")]);
            }
            lanes.add(at("MLPTop", l, "_b"), OpKind::Gemm, 2.0 * t_layer, &deps);
            // MAD-Max sizes this TP all-reduce by the transformer plan's depth.
            let top = Gradients {
                trains: !freeze_top,
                tp_here: l % 2 == 0,
                tp_levels: tf.len(),
                ..Gradients::new(&mlp, layer_params, bytes, mlp_shard, mlp_act)
            };
            top.add(&mut lanes, rates, &at("MLPTop", l, "_b"))?;
        }
        if !(freeze_bot && freeze_emb && freeze_tf) {
            for l in (0..layers).rev() {
                if tf_fsdp {
                    let dep = if l == last { "MLPTop1_b".to_string() } else { at("TransformerFC", l + 1, "_b") };
                    lanes.add(at("TransformerFC", l, "_b_c_wgt_ag"), OpKind::AllGather, fc_gather, &[dep]);
                }
                let mut deps = vec![at("TransformerFC", l, "_b_c_wgt_ag")];
                if l == last {
                    deps.extend(["MLPTop0_b".to_string(), "MLPTop0_b_c_act_ar".to_string()]);
                } else {
                    deps.extend([at("Attn", l + 1, "_b"), at("Attn", l + 1, "_b_c_act_ar")]);
                }
                lanes.add(at("TransformerFC", l, "_b"), OpKind::Gemm, 2.0 * t_fc, &deps);
                let fc = Gradients { trains: !freeze_tf, ..Gradients::new(&tf, fc_params, bytes, tf_shard, tf_act) };
                fc.add(&mut lanes, rates, &at("TransformerFC", l, "_b"))?;
                if tf_fsdp {
                    let dep = if l == last { "MLPTop0_b".to_string() } else { at("Attn", l + 1, "_b") };
                    lanes.add(at("Attn", l, "_b_c_wgt_ag"), OpKind::AllGather, attn_gather, &[dep]);
                }
                // As in MAD-Max: the attention waits for the FC of the layer above, not its own.
                let deps = [at("TransformerFC", l + 1, "_b"), at("TransformerFC", l + 1, "_b_c_act_ar"), at("Attn", l, "_b_c_wgt_ag")];
                lanes.add(at("Attn", l, "_b"), OpKind::Gemm, 2.0 * t_attn, &deps);
                // Its TP all-reduce is sized by the MLP plan's depth (MAD-Max).
                let attn =
                    Gradients { trains: !freeze_tf, tp_levels: mlp.len(), ..Gradients::new(&tf, attn_params, bytes, tf_shard, tf_act) };
                attn.add(&mut lanes, rates, &at("Attn", l, "_b"))?;
            }
        }
        let mut emb_b_c = Vec::new();
        if !freeze_emb {
            emb_b_c =
                embedding_comm(&mut lanes, &emb, lookup, rates, "EMB_b", true, &["Attn0_b".to_string(), "Attn0_b_c_act_ar".to_string()])?;
        }
        if !freeze_bot {
            // MAD-Max's choice of what each gather waits for (a loop variable carried over).
            bottom.backward(&mut lanes, rates, |l| {
                if l == nb - 1 {
                    "TransformerFC0_b".to_string()
                } else if l == nb - 2 {
                    if nb == 2 { "Attn0_b".to_string() } else { "MLPTop0_b".to_string() }
                } else {
                    at("MLPBot", l + 2, "_b")
                }
            })?;
        }
        if !freeze_emb {
            lanes.add("EMB_b", OpKind::Embedding, lookup / rates.hbm, &emb_b_c);
        }
    }
    let weight_bytes = (m.num_bot_mlp_layers + m.num_top_mlp_layers) as f64 * layer_params * bytes / mlp_shard
        + m.num_tables * m.entries_per_table * m.emb_dim * m.bytes_per_emb_param / emb_shard
        + layers as f64 * (attn_params + fc_params) * bytes / tf_shard;
    Ok(MadmaxRun { timeline: lanes.simulate(), global_batch, weight_bytes_per_gpu: weight_bytes, hbm_bytes: system.mem_cap })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A system file that cannot price (flops_util 0, a negative memory bandwidth, no
    /// nodes, nodes that do not hold the GPUs) printed NaN and negative times under the
    /// tracecast assumptions; it is refused naming the value. MAD-Max's own files price.
    #[test]
    fn a_system_that_cannot_price_is_refused_naming_the_value() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/madmax-configs/system_cfgs/cloud_A");
        let good = dir.join("cloud_A_a100.40_1024.json");
        assert!(read_system(&good).is_ok());
        let text: serde_json::Value = serde_json::from_slice(&std::fs::read(&good).unwrap()).unwrap();
        let scratch = std::env::temp_dir().join(format!("tracecast-madmax-system-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).unwrap();
        for (key, value, says) in [
            ("flops_util", serde_json::json!(0), "flops_util 0: a fraction in (0, 1]"),
            ("mem_bw", serde_json::json!(-1), "mem_bw -1: above 0"),
            ("num_nodes", serde_json::json!(0), "1024 GPUs in 0 nodes"),
            ("num_nodes", serde_json::json!(3), "1024 GPUs in 3 nodes"),
            ("ibroce_bw", serde_json::json!(0), "several nodes and no network bandwidth"),
        ] {
            let mut bad = text.clone();
            bad[key] = value;
            let path = scratch.join("bad.json");
            std::fs::write(&path, serde_json::to_vec(&bad).unwrap()).unwrap();
            let e = read_system(&path).unwrap_err().to_string();
            assert!(e.contains("bad.json") && e.contains(says), "{key}: {e}");
        }
        std::fs::remove_dir_all(&scratch).unwrap();
        // A peak of 0 for the model's bytes: refused under either assumptions (tracecast's
        // cluster priced it at infinite time).
        let mut s = read_system(&good).unwrap();
        s.f16_flops = 0.0;
        for e in
            [Rates::of(&s, 2.0).err().map(|e| e.to_string()), super::super::llm::Cluster::from_madmax(&s, 2.0).err().map(|e| e.to_string())]
        {
            assert!(e.is_some_and(|e| e.contains("the peak for 2 bytes per dense parameter is 0: above 0")));
        }
    }

    /// A DLRM's MLP of 2^32 layers aborted allocating its timeline; refused by name when read.
    #[test]
    fn a_model_of_more_layers_than_a_projection_simulates_is_refused_when_read() {
        let good = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/madmax-configs/model_cfgs/dlrm/dlrm_a.json");
        assert!(read_model(&good).is_ok());
        let mut bad: serde_json::Value = serde_json::from_slice(&std::fs::read(&good).unwrap()).unwrap();
        bad["num_bot_mlp_layers"] = serde_json::json!(4_294_967_295u64);
        let path = std::env::temp_dir().join(format!("tracecast-madmax-model-{}.json", std::process::id()));
        std::fs::write(&path, serde_json::to_vec(&bad).unwrap()).unwrap();
        let e = read_model(&path).unwrap_err().to_string();
        assert!(e.contains("num_bot_mlp_layers 4294967295: more than the 100000 a projection simulates"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }

    /// Each model's parts must run one global batch; a task whose parts' batches differ is
    /// refused naming each part's batch (the three models had each written the check).
    #[test]
    fn a_task_whose_parts_run_different_global_batches_is_refused_naming_each() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/madmax-configs");
        for (model, task, system, key, says) in [
            ("llm/llama2_70b.json", "llm/llm_train.json", "dc_A/dc_A_2048.json", "local_transformer_bs", "transformer"),
            ("dlrm/dlrm_a.json", "dlrm/dlrm_train.json", "dc_A/dc_A_128.json", "local_mlp_bs", "MLPs"),
            (
                "dlrm_transformer/dlrm_a_transformer.json",
                "dlrm_transformer/dlrm_transformer_train.json",
                "dc_A/dc_A_128.json",
                "local_transformer_bs",
                "transformer",
            ),
        ] {
            let system = read_system(&dir.join("system_cfgs").join(system)).unwrap();
            let model = read_model(&dir.join("model_cfgs").join(model)).unwrap();
            let mut task = read_task(&dir.join("task_cfgs").join(task)).unwrap();
            let (_, one) = task.global_batches();
            assert!(run(&model, &system, &task).is_ok(), "{key}: {:?}", run(&model, &system, &task).err());
            match key {
                "local_transformer_bs" => task.local_transformer_bs *= 2.0,
                _ => task.local_mlp_bs *= 2.0,
            }
            let Err(e) = run(&model, &system, &task) else { panic!("{key}: the task ran") };
            let e = e.to_string();
            assert!(e.contains("global batches differ") && e.contains(&format!("{says} {}", 2.0 * one)), "{key}: {e}");
        }
    }

    /// A task whose degrees do not match its strategies was cut to the shorter list
    /// (or a degree of 0 surfaced as "tp × cp × pp × dp = 0"); refused naming the lists.
    #[test]
    fn a_task_of_unmatched_degrees_is_refused_naming_the_lists() {
        let good = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/madmax-configs/task_cfgs/llm/llm_train.json");
        assert!(read_task(&good).is_ok());
        let text: serde_json::Value = serde_json::from_slice(&std::fs::read(&good).unwrap()).unwrap();
        let scratch = std::env::temp_dir().join(format!("tracecast-madmax-task-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).unwrap();
        let n = text["transformer_parallel"].as_array().unwrap().len();
        for (degrees, says) in [
            (
                serde_json::json!(vec![1; n + 1]),
                format!("transformer_parallel lists {n} strateg(ies) and transformer_parallel_degree {} degree(s)", n + 1),
            ),
            (serde_json::json!(vec![0; n]), "transformer_parallel_degree [0".to_string()),
        ] {
            let mut bad = text.clone();
            bad["transformer_parallel_degree"] = degrees;
            let path = scratch.join("task.json");
            std::fs::write(&path, serde_json::to_vec(&bad).unwrap()).unwrap();
            let e = read_task(&path).unwrap_err().to_string();
            assert!(e.contains("task.json") && e.contains(&says), "{e}");
        }
        std::fs::remove_dir_all(&scratch).unwrap();
    }
}
