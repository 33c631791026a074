//! `tracecast project`: an iteration of a model on a system under a
//! parallelization plan (MAD-Max's model, calibrated), and the model, system
//! and task specifications `search` and `synth` read too.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tracecast_replay::workload::llm::{Cluster, Plan, SystemOverrides, Task, Transformer};
use tracecast_replay::workload::{Projection, madmax};

use crate::Outcome;
use crate::hardware::catalog_with;
use crate::output::write_json;

/// Whose assumptions a projection makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Assumptions {
    /// tracecast's own model: calibrated efficiencies, α-β collectives, attention, SwiGLU, memory.
    #[default]
    Tracecast,
    /// MAD-Max's simplifications (reproduces its printed outputs; needs the MAD-Max files).
    Madmax,
}

/// The shape of an inference task, as `project` and `search` take it.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Inference {
    /// Sequences per replica of prefill and decode (default: 1).
    pub batch: Option<u32>,
    /// Prompt tokens of prefill (default: the model's sequence length).
    pub prompt: Option<u32>,
    /// Context tokens whose KV cache each decode step reads (default: the model's sequence length).
    pub context: Option<u32>,
}

impl Inference {
    /// A MAD-Max task file sets its own batch and lengths: a shape flag
    /// beside it would be ignored, so it is refused.
    fn refuse_with_task_file(&self, task: &Path) -> Result<()> {
        for (given, flag) in [(self.batch.is_some(), "--batch"), (self.prompt.is_some(), "--prompt"), (self.context.is_some(), "--context")]
        {
            anyhow::ensure!(!given, "{flag} applies to --task prefill and decode; the MAD-Max task file {} sets its own", task.display());
        }
        Ok(())
    }
}

/// MAD-Max's model, system and task configuration files.
#[derive(Debug, Clone)]
pub struct MadmaxFiles {
    /// The model configuration.
    pub model: PathBuf,
    /// The system configuration.
    pub system: PathBuf,
    /// The task configuration.
    pub task: PathBuf,
}

/// What `project` projects, and where it writes the projection.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// A model preset, a model file or a MAD-Max model file (default: none; needed without `madmax`).
    pub model: Option<String>,
    /// A catalog GPU id or node preset id (with `gpus`) or a MAD-Max system file (default: none; needed without `madmax`).
    pub system: Option<String>,
    /// GPUs of the system (default: none, the system file's).
    pub gpus: Option<u32>,
    /// What the system differs in from its catalog entry (default: nothing).
    pub system_overrides: SystemOverrides,
    /// The user's measurements for the pricing layer (default: none).
    pub measurements: Vec<PathBuf>,
    /// train, prefill, decode, or a MAD-Max task file (default: train).
    pub task: String,
    /// The shape of an inference task.
    pub inference: Inference,
    /// The parallelization plan, `tp=8,pp=4,fsdp=64` (default: FSDP over every GPU for training,
    /// tensor parallel over a node otherwise).
    pub parallel: Option<String>,
    /// Calibration profile of the GPU (default: the GPU's shipped profile).
    pub profile: Option<PathBuf>,
    /// MAD-Max model, system and task files, instead of `model`, `system` and `task` (default: none).
    pub madmax: Option<MadmaxFiles>,
    /// DLRM embedding sharding: tw, rw, cw or dp (default: the task file's).
    pub sharding: Option<String>,
    /// Whose assumptions (default: tracecast's).
    pub assumptions: Assumptions,
    /// Write the projection as JSON here (default: none).
    pub json: Option<PathBuf>,
    /// Write the simulated timeline for Perfetto here (default: none).
    pub perfetto: Option<PathBuf>,
    /// Extra hardware catalog files (default: none).
    pub hw: Vec<PathBuf>,
    /// A measured training run, `RUNS.json:ID` (a runs file, the format of
    /// `shared/validation/published-runs.json`; `:ID` may be left out when the
    /// file has one run): projected onto `system` (default: the run's own
    /// system) and `gpus` (default: the run's) with its model, plan (unless
    /// `parallel`), precision and framework, its time the model does not
    /// explain carried unchanged (default: none).
    pub from: Option<String>,
    /// Write nothing on the terminal (default: false).
    pub quiet: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            model: None,
            system: None,
            gpus: None,
            system_overrides: SystemOverrides::default(),
            measurements: Vec::new(),
            task: "train".into(),
            inference: Inference::default(),
            parallel: None,
            profile: None,
            madmax: None,
            sharding: None,
            assumptions: Assumptions::Tracecast,
            json: None,
            perfetto: None,
            hw: Vec::new(),
            from: None,
            quiet: false,
        }
    }
}

/// A model given as a preset name, a model file with the fields of a runs
/// file's `model` (validate's format), or a MAD-Max model file.
pub fn model(spec: &str) -> Result<Transformer> {
    if let Some(m) = Transformer::preset(spec) {
        return Ok(m);
    }
    let path = Path::new(spec);
    if !path.exists() {
        // A path (a separator, a `.json` name) is a file the user meant: say it is missing.
        let file_like = spec.contains(std::path::MAIN_SEPARATOR) || spec.contains('/') || spec.ends_with(".json");
        anyhow::ensure!(!file_like, "--model {spec}: no such file");
        anyhow::bail!("--model {spec}: neither a preset ({}) nor a file", Transformer::preset_names().join(", "));
    }
    let text = tracecast_ingest::input::read(path).with_context(|| format!("reading {}", path.display()))?;
    let name = path.file_stem().map_or_else(|| spec.to_string(), |s| s.to_string_lossy().into_owned());
    // A MAD-Max file says its `type`; anything else is read as a runs file's model.
    let value: serde_json::Value = serde_json::from_slice(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    if value.get("type").is_some() {
        let m = madmax::read_model(path)?;
        // A DLRM runs from its MAD-Max files (its plan is its task's): --model lays out transformers.
        if m.kind.starts_with("DLRM") {
            anyhow::bail!(
                "{}: a {} model; --model takes transformers (LLM, LLM_MoE, ViT): a DLRM runs from its MAD-Max files, `tracecast project --madmax MODEL SYSTEM TASK{}`{}",
                path.display(),
                m.kind,
                if m.kind == "DLRM" { "" } else { " --assumptions madmax" },
                if m.kind == "DLRM" { "" } else { " (tracecast's own DLRM is the plain one)" }
            );
        }
        return Transformer::from_madmax(&m).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
    }
    // Any other JSON is a runs file's model; `transformer` names what is missing or unknown.
    let m: tracecast_replay::workload::validate::RunModel = serde_json::from_value(value)?;
    m.transformer(&name).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The node preset `--system` names, where it names one (not a GPU, not a file).
pub(crate) fn preset_of<'c>(spec: &str, catalog: &'c tracecast_calibrate::Catalog) -> Option<&'c tracecast_calibrate::catalog::Node> {
    catalog.node(spec).ok().filter(|_| catalog.gpu(spec).is_err() && !Path::new(spec).exists())
}

/// The GPU `--system` names: a node preset's GPU, else the spec itself (a GPU id or a file).
pub(crate) fn system_gpu<'a>(spec: &'a str, catalog: &'a tracecast_calibrate::Catalog) -> &'a str {
    preset_of(spec, catalog).map_or(spec, |n| n.gpu.as_str())
}

/// A cluster given as a catalog GPU id with a GPU count, or a MAD-Max system file.
pub(crate) fn cluster(
    spec: &str,
    gpus: Option<u32>,
    overrides: &SystemOverrides,
    bytes_per_param: f64,
    catalog: &tracecast_calibrate::Catalog,
    device: Option<&tracecast_calibrate::DeviceModel>,
    measurements: &[std::path::PathBuf],
) -> Result<Cluster> {
    // A node preset names its GPU, its GPUs a node and its NICs (a user's own node in a `--hw`
    // file: `--system polaris` had been "unknown hardware" while `hw list` showed it); what
    // the user states beside it stands.
    let preset = preset_of(spec, catalog);
    let c = cluster_of(preset.map_or(spec, |n| n.gpu.as_str()), gpus, bytes_per_param, catalog, device)?;
    let mut c = overrides.apply(c).map_err(|e| anyhow::anyhow!("--system {spec}: {e}"))?;
    if let Some(node) = preset {
        let its = SystemOverrides {
            gpus_per_node: Some(node.gpus).filter(|_| overrides.gpus_per_node.is_none()),
            nic_gbps_per_gpu: Some(node.nic_gbps_per_gpu()).filter(|_| overrides.nic_gbps_per_gpu.is_none()),
            ..Default::default()
        };
        c = its.apply_as(c, &format!("as node preset {} gives", node.id)).map_err(|e| anyhow::anyhow!("--system {spec}: {e}"))?;
        c.notes.push(format!(
            "--system {spec}: node preset {} of {} — {} GPUs and {} × {} GB/s NICs a node",
            node.id, node.gpu, node.gpus, node.nics, node.nic_gbps
        ));
    }
    if let Some(m) = crate::hardware::measurements_of(measurements, catalog)? {
        c.use_measurements(m, overrides.gpus_per_node.is_some() || preset.is_some());
    }
    Ok(c)
}

fn cluster_of(
    spec: &str,
    gpus: Option<u32>,
    bytes_per_param: f64,
    catalog: &tracecast_calibrate::Catalog,
    device: Option<&tracecast_calibrate::DeviceModel>,
) -> Result<Cluster> {
    let path = Path::new(spec);
    if path.exists() {
        let s = madmax::read_system(path)?;
        let mut c = Cluster::from_madmax(&s, bytes_per_param).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if let Some(n) = gpus {
            c.gpus = n;
        }
        return Ok(c);
    }
    let n = gpus.context("--system needs --gpus N (how many GPUs)")?;
    // A profile must be of the system's GPU; without one, the GPU's shipped profile.
    let gpu = catalog.gpu(spec)?;
    let shipped;
    let device = match device {
        Some(d) => {
            let of = crate::hardware::profile_gpu(d);
            anyhow::ensure!(
                of == Some(gpu.id.as_str()),
                "--profile ({}) is of {}, not of --system {} (calibrate traces measured on {} and pass that profile)",
                d.source,
                of.unwrap_or("a GPU the catalog does not know"),
                gpu.id,
                gpu.id
            );
            Some(d)
        }
        None => {
            shipped = tracecast_calibrate::shipped::for_gpu(gpu, catalog);
            shipped.as_ref()
        }
    };
    Cluster::for_model(catalog, spec, n, bytes_per_param, device).map_err(|e| anyhow::anyhow!("--system {spec}: {e}"))
}

/// The task from `--task` (train, prefill, decode); `seq` is the model's sequence length.
pub(crate) fn task(spec: &str, shape: &Inference, seq: u32) -> Result<Task> {
    let batch = shape.batch.unwrap_or(1);
    let task = match spec {
        "train" | "pretrain" | "finetune" => Task::Train,
        "prefill" => Task::Prefill { batch, prompt: shape.prompt.unwrap_or(seq) },
        "decode" => Task::Decode { batch, context: shape.context.unwrap_or(seq) },
        other => anyhow::bail!("--task {other}: train, prefill, decode, or a MAD-Max task file"),
    };
    // A shape flag the task does not read is refused, not ignored.
    anyhow::ensure!(
        shape.batch.is_none() || matches!(task, Task::Prefill { .. } | Task::Decode { .. }),
        "--batch applies to --task prefill and decode, not --task {spec}: a training step's batch is the plan's gbs (and mb)"
    );
    for (given, flag, reads) in [(shape.prompt.is_some(), "--prompt", "prefill"), (shape.context.is_some(), "--context", "decode")] {
        anyhow::ensure!(!given || spec == reads, "{flag} applies to --task {reads}, not --task {spec}");
    }
    Ok(task)
}

/// Why a projection can be above every run measured in training, and how to read it.
pub(crate) const ABOVE_MEASURED: &str = "the model prices kernels at the rates benchmarks measured and no framework time between them, so read the throughput as an upper estimate";

/// The same for a projection carried from a measured run: its framework time is the run's.
const ABOVE_MEASURED_CARRIED: &str = "its kernels are priced at the rates benchmarks measured (the framework time is the source run's, carried), so read the throughput as an upper estimate";

/// A training projection's MFU held against what training runs on a GPU of its compute
/// measured ([`tracecast_replay::workload::validate::mfu_bound`]), in words.
pub(crate) struct MeasuredMfuNote {
    /// The note, in words (also where there is nothing to hold it against).
    pub(crate) text: String,
    /// The bound, where shipped runs give one.
    pub(crate) bound: Option<tracecast_replay::workload::validate::MfuBound>,
}

impl MeasuredMfuNote {
    /// Whether `mfu` is above the bound, at the precision printed (a projection carried from the
    /// best run onto its own system reproduces it to the last digits).
    pub(crate) fn is_above(&self, mfu: f64) -> bool {
        self.bound.as_ref().is_some_and(|b| (1000.0 * mfu).round() > (1000.0 * b.best.mfu).round())
    }
}

/// [`MeasuredMfuNote`] of training projection `p` on catalog GPU `gpu` (`None`: a system that
/// names no catalog GPU), not held against the run it was carried from (`from`); `None` for a
/// projection with no MFU (inference).
pub(crate) fn measured_mfu_note(
    catalog: &tracecast_calibrate::Catalog,
    gpu: Option<&str>,
    p: &Projection,
    from: Option<&CarriedFrom>,
) -> Option<MeasuredMfuNote> {
    let carried_from = from.map(|f| f.run.as_str());
    use tracecast_replay::workload::validate::mfu_bound;
    let mfu = p.mfu?;
    let Some(gpu) = gpu.and_then(|g| catalog.gpu(g).ok()) else {
        let text = format!("MFU {:.1} %: the system names no catalog GPU, so no shipped training run holds it", 100.0 * mfu);
        return Some(MeasuredMfuNote { text, bound: None });
    };
    let linear = p.linear_format;
    let Some(bound) = mfu_bound(catalog, gpu, linear, carried_from) else {
        let text = format!(
            "MFU {:.1} %: no shipped training run on a GPU of {}'s compute with {} linear layers to hold it against",
            100.0 * mfu,
            gpu.id,
            linear.class_words()
        );
        return Some(MeasuredMfuNote { text, bound: None });
    };
    let mut note = MeasuredMfuNote { text: String::new(), bound: None };
    let (runs, format, best, cited) = (bound.runs, bound.format, 100.0 * bound.best.mfu, bound.best.cited());
    let other = if carried_from.is_some() { "other " } else { "" };
    let of = format!("the {runs} {other}shipped training run(s) on a GPU of {}'s compute with {format} linear layers", gpu.id);
    note.bound = Some(bound);
    note.text = if let Some(CarriedFrom { run, reproduced: true }) = from {
        // The run itself, measured: no estimate to warn of (it had been called an upper one).
        let against = if note.is_above(mfu) { "above" } else { "within" };
        format!("MFU {:.1} % is run {run}'s own, measured (nothing of it changed), {against} {of} (best {best:.1} %: {cited})", 100.0 * mfu)
    } else if note.is_above(mfu) {
        // The source run's framework time in the iteration only where it was carried (a fitted
        // profile holds it in its correction instead: "not carried", said beside).
        let why = if carried_from.is_some() && p.times.stack_ms > 0.0 { ABOVE_MEASURED_CARRIED } else { ABOVE_MEASURED };
        format!("MFU {:.1} % is above {of} (best {best:.1} %: {cited}): {why}", 100.0 * mfu)
    } else {
        format!("MFU {:.1} % is within {of} (best {best:.1} %: {cited})", 100.0 * mfu)
    };
    Some(note)
}

/// The terminal summary of a projection.
pub fn write_projection(out: &mut dyn Write, p: &Projection) -> std::io::Result<()> {
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
    // A bubble that rounds to 0.00 ms (a plan without a pipeline: float noise) is not one.
    if t.bubble_ms >= 0.005 {
        writeln!(out, "  Pipeline bubble {:.2} ms ({:.1} % of the iteration)", t.bubble_ms, of(t.bubble_ms, t.iteration_ms))?;
    }
    if t.stack_ms > 0.0 {
        writeln!(
            out,
            "  Stack time carried from the measured run {:.2} ms ({:.1} % of the iteration)",
            t.stack_ms,
            of(t.stack_ms, t.iteration_ms)
        )?;
    }
    if p.tpot_ms.is_some() {
        // A decode step advances every sequence by one token: its throughput is tokens, said below.
        writeln!(out, "  Iteration {:.2} ms · one token for each of {} sequences", t.iteration_ms, p.global_batch)?;
    } else {
        let mfu = p.mfu.map(|m| format!(" · MFU {:.1} % of the 16-bit peak", 100.0 * m)).unwrap_or_default();
        // Tokens per second per GPU, as runs files state them (training).
        let tokens = p.tokens_per_s_per_gpu.map(|t| format!(" · {t:.1} tokens/s per GPU")).unwrap_or_default();
        writeln!(
            out,
            "  Iteration {:.2} ms · throughput {:.2} samples/s (global batch {}){tokens}{mfu}",
            t.iteration_ms, p.throughput, p.global_batch
        )?;
    }
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

/// What the `--perfetto` timeline leaves out, when it draws less than the
/// iteration (a timeline of 207 ms beside a 2 101 ms iteration had been
/// written without a word): tracecast's transformer model simulates the lanes
/// of one microbatch on one pipeline stage (`one_microbatch`) and prices the
/// rest of the step outside them; the note gives the amounts it knows.
fn perfetto_note(
    timeline: &tracecast_replay::workload::Timeline,
    times: &tracecast_replay::workload::IterationTimes,
    one_microbatch: bool,
) -> Option<String> {
    let span = timeline.span_ms();
    // Within the printout's rounding the timeline is the iteration (DLRM's lanes, a decode step).
    (times.iteration_ms - span > 0.005 + 1e-6 * times.iteration_ms).then(|| {
        let what = if one_microbatch { "the lanes of one microbatch on one pipeline stage" } else { "the simulated lanes" };
        let known: Vec<String> = [("the pipeline bubble", times.bubble_ms), ("carried stack time", times.stack_ms)]
            .iter()
            .filter(|(_, ms)| *ms >= 0.005)
            .map(|(name, ms)| format!("{name} {ms:.2} ms"))
            .collect();
        let of_which = if known.is_empty() { String::new() } else { format!(" (of which {})", known.join(" and ")) };
        format!(
            "--perfetto draws {what}: {span:.2} ms of the {:.2} ms iteration; the model prices the other {:.2} ms{of_which} outside them (in the totals above, not on the timeline)",
            times.iteration_ms,
            times.iteration_ms - span
        )
    })
}

/// Writes the timeline for Perfetto (gzip when the name ends in .gz).
fn write_perfetto(path: &Path, timeline: &tracecast_replay::workload::Timeline, title: &str) -> Result<()> {
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
fn parse_plan(spec: &str) -> Result<Plan> {
    Plan::parse(spec).map_err(|e| anyhow::anyhow!("--parallel {spec:?}: {e}"))
}

pub(crate) fn device_of(
    profile: Option<&PathBuf>,
    catalog: &tracecast_calibrate::Catalog,
) -> Result<Option<tracecast_calibrate::DeviceModel>> {
    Ok(match profile {
        Some(p) => Some(tracecast_calibrate::DeviceModel::from_profile_file(p, catalog)?),
        None => None,
    })
}

/// `RUNS.json:ID` as its file and id: the file is the shortest prefix before a `:` that names
/// one (an id may hold colons), else the text up to the last `:` (its error names it).
fn from_parts(spec: &str) -> (&Path, Option<&str>) {
    if Path::new(spec).exists() {
        return (Path::new(spec), None);
    }
    let first_file = spec.match_indices(':').map(|(i, _)| i).find(|&i| Path::new(&spec[..i]).is_file());
    match first_file.or_else(|| spec.rfind(':')) {
        Some(i) => (Path::new(&spec[..i]), Some(&spec[i + 1..])),
        None => (Path::new(spec), None),
    }
}

/// The runs file of `--from FILE:ID`.
fn from_file(spec: &str) -> PathBuf {
    from_parts(spec).0.to_path_buf()
}

/// The run `RUNS.json:ID` names (`RUNS.json` alone: its one run).
fn source_run(spec: &str) -> Result<tracecast_replay::workload::validate::Run> {
    use tracecast_replay::workload::validate::RunsFile;
    let (path, id) = from_parts(spec);
    let file = RunsFile::read(path)?;
    let ids = || {
        let shown: Vec<&str> = file.runs.iter().take(12).map(|r| r.id.as_str()).collect();
        let more = if file.runs.len() > shown.len() { format!(", … ({} runs)", file.runs.len()) } else { String::new() };
        format!("{}{more}", shown.join(", "))
    };
    let run = match id {
        Some(id) => file.runs.iter().find(|r| r.id == id).cloned().ok_or_else(|| match file.unread_list_of(id) {
            Some(key) => anyhow::anyhow!(
                "--from {spec}: run {id:?} is listed under `{key}` of {}, which tracecast does not read (only `runs`)",
                path.display()
            ),
            None => anyhow::anyhow!("--from {spec}: {} has no run {id:?} (it has {})", path.display(), ids()),
        }),
        None => match file.runs.as_slice() {
            [one] => Ok(one.clone()),
            _ => anyhow::bail!("--from {spec}: name one of its {} runs as {}:ID ({})", file.runs.len(), path.display(), ids()),
        },
    }?;
    // A run whose entry does not read is refused, as `validate` refuses it in its row.
    if let Some(why) = &run.unreadable {
        anyhow::bail!("--from {spec}: run {:?} of {}: {why}", run.id, path.display());
    }
    Ok(run)
}

/// `--from RUNS.json:ID`: the measured run projected onto the system, its
/// unexplained time carried.
fn carried(
    from: &str,
    args: &Options,
    catalog: &tracecast_calibrate::Catalog,
    device: Option<&tracecast_calibrate::DeviceModel>,
) -> Result<(tracecast_replay::workload::Projection, tracecast_replay::workload::Timeline, String, CarriedFrom)> {
    use tracecast_replay::workload::carry::{carry_run, target_system};
    anyhow::ensure!(
        args.madmax.is_none() && args.assumptions == Assumptions::Tracecast,
        "--from projects with tracecast's model, not MAD-Max's files"
    );
    anyhow::ensure!(args.model.is_none(), "--from takes the model from the run; leave out --model");
    anyhow::ensure!(
        matches!(args.task.as_str(), "train" | "pretrain" | "finetune"),
        "--from carries a training run's step; --task {} is not training",
        args.task
    );
    // A shape flag a training step does not read is refused, as without --from (it was ignored).
    task(&args.task, &args.inference, 0)?;
    let run = source_run(from)?;
    // The target: --system (default: the run's GPU), --gpus (default: the run's), the overrides.
    // A node preset names a GPU and its nodes; a run is carried onto a GPU, its nodes stated beside it
    // (said, where "unknown hardware" had read as if `hw list` did not show the preset).
    if let Some(node) = args.system.as_deref().and_then(|s| preset_of(s, catalog)) {
        anyhow::bail!(
            "--from … --system {}: a node preset; a run is carried onto a GPU — give its GPU and nodes: --system {} --gpus-per-node {} --nic-gbps-per-gpu {}",
            node.id,
            node.gpu,
            node.gpus,
            node.nic_gbps_per_gpu()
        );
    }
    let target = target_system(&run, args.system.as_deref(), args.gpus, args.system_overrides, catalog)?;
    if let (Some(d), Some(path)) = (device, args.profile.as_deref()) {
        crate::hardware::ensure_profile_of(d, &target.system.gpu, path)?;
    }
    let measurements = crate::hardware::measurements_of(&args.measurements, catalog)?;
    let gpu = target.system.gpu.clone();
    let c = carry_run(&run, target, args.parallel.as_deref(), catalog, device, measurements.as_ref())
        .map_err(|e| anyhow::anyhow!("--from {from}: {e}"))?;
    // Nothing of the run changed: its measured rate, reproduced to the printed digits.
    let reproduced = match (c.projection.tokens_per_s_per_gpu, run.measured.tokens_per_s_per_gpu) {
        (Some(p), Some(m)) => m > 0.0 && ((p - m) / m).abs() < 5e-7,
        _ => false,
    };
    Ok((c.projection, c.timeline, gpu, CarriedFrom { run: run.id.clone(), reproduced }))
}

/// The run a projection was carried from, and whether it reproduces the run's measured rate.
pub(crate) struct CarriedFrom {
    run: String,
    reproduced: bool,
}

/// What `--gpus` and `--parallel` replaced of the MAD-Max files, in words (a projection of
/// another job than the files' had said nothing of it).
fn replaced_by_flags(args: &Options, system: &madmax::SystemConfig, files: &MadmaxFiles) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(n) = args.gpus.filter(|&n| n != system.num_devices) {
        notes.push(format!("--gpus {n} in place of the {} GPUs of {}", system.num_devices, files.system.display()));
    }
    if let Some(spec) = &args.parallel {
        notes.push(format!("--parallel {spec} in place of the plan of {}", files.task.display()));
    }
    notes
}

/// Projects the model and writes the projection (terminal, JSON, Perfetto).
pub fn run(args: &Options, out: &mut dyn Write) -> Result<Outcome> {
    // The files it reads are no output of it (said before the projection is printed).
    let mut inputs: Vec<PathBuf> = args.profile.iter().chain(&args.measurements).chain(&args.hw).cloned().collect();
    inputs.extend(args.madmax.iter().flat_map(|m| [m.model.clone(), m.system.clone(), m.task.clone()]));
    // `--from FILE:ID`: the file as `source_run` finds it (an id may hold colons).
    inputs.extend(args.from.as_deref().map(from_file));
    crate::output::distinct_outputs(&[("--json", args.json.as_deref()), ("--perfetto", args.perfetto.as_deref())], &inputs)?;
    use tracecast_replay::workload::{llm, madmax};
    let catalog = catalog_with(&args.hw)?;
    let device = device_of(args.profile.as_ref(), &catalog)?;
    let overrides = args.system_overrides;
    anyhow::ensure!(
        args.sharding.is_none() || args.madmax.is_some(),
        "--sharding shards a DLRM's embedding tables: give the MAD-Max DLRM files (--madmax MODEL SYSTEM TASK)"
    );
    // The catalog GPU projected onto, whose measured training runs its MFU is held against.
    let (mut gpu, mut carried_from) = (None, None);
    // Whether the timeline is tracecast's transformer model's: the lanes of one microbatch on one stage.
    let mut one_microbatch = false;
    let (mut projection, timeline) = if let Some(from) = &args.from {
        let (p, t, g, run) = carried(from, args, &catalog, device.as_ref())?;
        (gpu, carried_from, one_microbatch) = (Some(g), Some(run), true);
        (p, t)
    } else if let Some(files) = &args.madmax {
        args.inference.refuse_with_task_file(&files.task)?;
        anyhow::ensure!(
            overrides == SystemOverrides::default(),
            "--gpus-per-node, --nic-gbps-per-gpu, --hbm-gb and --hbm-gbps change a catalog system (--system GPU); edit the MAD-Max system file instead"
        );
        // The three files say the model, the system and the task: a flag that would say them too
        // had been ignored without a word (`--model llama2-7b` still projected the file's model).
        anyhow::ensure!(
            args.model.is_none() && args.system.is_none(),
            "--madmax MODEL SYSTEM TASK names the model and the system; leave out --model and --system"
        );
        anyhow::ensure!(
            matches!(args.task.as_str(), "train" | "pretrain"),
            "--task {}: the MAD-Max task file sets the task; leave out --task",
            args.task
        );
        anyhow::ensure!(
            args.assumptions == Assumptions::Tracecast || (args.gpus.is_none() && args.parallel.is_none()),
            "--gpus and --parallel do not apply under --assumptions madmax: the MAD-Max system and task files set them (edit those, or project with the tracecast assumptions, where they replace the files')"
        );
        let (m, s, t) = madmax::read_configs(&files.model, &files.system, &files.task)?;
        anyhow::ensure!(
            args.sharding.is_none() || (m.kind == "DLRM" && args.assumptions == Assumptions::Tracecast),
            "--sharding shards a DLRM's embedding tables under the tracecast assumptions; {} is {} under the {} assumptions",
            files.model.display(),
            m.kind,
            if args.assumptions == Assumptions::Tracecast { "tracecast" } else { "madmax" }
        );
        match args.assumptions {
            Assumptions::Madmax => {
                // Its errors are of the three files together (a plan's degrees against the system's GPUs).
                let run = madmax::run(&m, &s, &t)
                    .map_err(|e| anyhow::anyhow!("{}, {}, {}: {e}", files.model.display(), files.system.display(), files.task.display()))?;
                (run.projection(&m, &s, &t), run.timeline)
            }
            Assumptions::Tracecast if m.kind == "DLRM" => {
                use tracecast_replay::workload::dlrm;
                let model = dlrm::Dlrm::from_madmax(&m).map_err(|e| anyhow::anyhow!("{}: {e}", files.model.display()))?;
                let mut cluster = llm::Cluster::from_madmax(&s, m.bytes_per_nonemb_param)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", files.system.display()))?;
                if let Some(n) = args.gpus {
                    cluster.gpus = n;
                }
                anyhow::ensure!(
                    args.parallel.is_none(),
                    "--parallel lays out a transformer; a DLRM's plan is its task file's (its tables' layout: --sharding; its GPUs: --gpus)"
                );
                let (mut plan, resized) = dlrm::DlrmPlan::from_madmax_on(&t, cluster.gpus, args.gpus.is_some())
                    .map_err(|e| anyhow::anyhow!("{}: {e}", files.task.display()))?;
                if let Some(sh) = &args.sharding {
                    plan.sharding = dlrm::Sharding::parse(sh).map_err(anyhow::Error::msg)?;
                }
                let (mut p, timeline) = dlrm::project(&model, &cluster, &plan, t.kind != "inference")?;
                p.notes.extend(replaced_by_flags(args, &s, files));
                p.notes.extend(resized);
                (p, timeline)
            }
            Assumptions::Tracecast => {
                let model = llm::Transformer::from_madmax(&m).map_err(|e| anyhow::anyhow!("{}: {e}", files.model.display()))?;
                let mut cluster = llm::Cluster::from_madmax(&s, m.bytes_per_nonemb_param)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", files.system.display()))?;
                if let Some(n) = args.gpus {
                    cluster.gpus = n;
                }
                let (mut plan, task) =
                    llm::Plan::from_madmax(&t, model.seq).map_err(|e| anyhow::anyhow!("{}: {e}", files.task.display()))?;
                let mut resized = None;
                if let Some(spec) = &args.parallel {
                    plan = parse_plan(spec)?;
                } else if let Some(n) = args.gpus.filter(|&n| n != plan.gpus()) {
                    // A GPU count without a plan: the task file's plan over it by its data parallelism.
                    let (on_n, words) = plan.on_gpus(n).ok_or_else(|| {
                        anyhow::anyhow!(
                            "--gpus {n}: the plan of {} (tp={}, cp={}, pp={}, ep={}) does not spread over {n} GPUs by its data parallelism; give --parallel",
                            files.task.display(),
                            plan.tp,
                            plan.cp,
                            plan.pp,
                            plan.ep
                        )
                    })?;
                    plan = on_n;
                    resized = Some(format!("--gpus {n}: the plan of {} spread over them: {words}", files.task.display()));
                }
                let task_plan = args.parallel.is_none() && resized.is_none();
                // The task file's plan refused is the task file's to mend: named with its keys
                // ("tp × cp × pp × dp = 128 but the cluster has 64 GPUs" had named no file).
                let (mut p, timeline) = llm::project_timeline(&model, &cluster, &plan, task).map_err(|e| match task_plan {
                    true => anyhow::anyhow!(
                        "{}: its plan ({}, from transformer_parallel and its degrees) on {}: {e}",
                        files.task.display(),
                        plan.describe(),
                        files.system.display()
                    ),
                    false => anyhow::anyhow!(e),
                })?;
                one_microbatch = true;
                p.notes.extend(replaced_by_flags(args, &s, files));
                // The task's plan projects its transformer's batch; an embedding batch the task
                // gives otherwise (MAD-Max's own GPT-4 MoE task: 1 × 2048 against 8 × 2048) is said,
                // not dropped (MAD-Max's assumptions refuse such a task).
                let (_, emb_batch) = t.global_batches();
                if task_plan && t.local_emb_bs > 0.0 && (emb_batch - p.global_batch).abs() > 1e-9 {
                    p.notes.push(format!(
                        "{}: the embedding's global batch ({emb_batch}) is not the transformer's ({}): projected at the transformer's, one batch through the whole model",
                        files.task.display(),
                        p.global_batch
                    ));
                }
                p.notes.extend(resized);
                (p, timeline)
            }
        }
    } else {
        anyhow::ensure!(
            args.assumptions == Assumptions::Tracecast,
            "--assumptions madmax needs the MAD-Max files: --madmax MODEL SYSTEM TASK"
        );
        let (Some(m), Some(sys)) = (&args.model, &args.system) else {
            anyhow::bail!("give --model and --system (or --madmax MODEL SYSTEM TASK)")
        };
        let model = model(m)?;
        let cluster = cluster(sys, args.gpus, &overrides, model.bytes, &catalog, device.as_ref(), &args.measurements)?;
        gpu = Some(system_gpu(sys, &catalog).to_string());
        let seq = model.seq as u32;
        let (plan, task) = if Path::new(&args.task).exists() {
            args.inference.refuse_with_task_file(Path::new(&args.task))?;
            let t = madmax::read_task(Path::new(&args.task))?;
            llm::Plan::from_madmax(&t, model.seq).map_err(anyhow::Error::msg)?
        } else {
            let task = task(&args.task, &args.inference, seq)?;
            let default = if task == llm::Task::Train {
                parse_plan(&format!("fsdp={}", cluster.gpus))?
            } else {
                Plan::serving_default(&model, &cluster)
            };
            (default, task)
        };
        // The user's plan, parsed once; for inference, its training settings (batches, gradients,
        // the backward's recomputation) refused: they would be echoed in the plan and not run.
        let plan = match &args.parallel {
            Some(spec) => {
                let (plan, stated) = Plan::parse_stated(spec).map_err(|e| anyhow::anyhow!("--parallel {spec:?}: {e}"))?;
                stated.refuse_training_keys(task).map_err(|e| anyhow::anyhow!("--parallel {spec:?}: {e}"))?;
                plan
            }
            None => plan,
        };
        one_microbatch = true;
        // What is wrong with a model read from a file names the file (`layers 4294967295: …`).
        llm::project_timeline(&model, &cluster, &plan, task).map_err(|e| match e {
            tracecast_replay::Error::Model(why) if Transformer::preset(m).is_none() => anyhow::anyhow!("--model {m}: {why}"),
            e => e.into(),
        })?
    };
    if let Some(note) = measured_mfu_note(&catalog, gpu.as_deref(), &projection, carried_from.as_ref()) {
        projection.notes.push(note.text);
    }
    // Fine-tuning that freezes nothing is pretraining's step; the header says `pretrain` (said why).
    if args.task == "finetune" && projection.task != "finetune" {
        projection.notes.push(
            "--task finetune: the plan freezes no layer (`frozen=N` freezes the first N), so every layer trains: the step is pretraining's"
                .into(),
        );
    }
    if args.perfetto.is_some() {
        projection.notes.extend(perfetto_note(&timeline, &projection.times, one_microbatch));
    }
    if !args.quiet {
        write_projection(out, &projection)?;
    }
    if let Some(path) = &args.json {
        write_json(path, &projection)?;
    }
    if let Some(path) = &args.perfetto {
        write_perfetto(path, &timeline, &format!("{} on {}", projection.model, projection.system))?;
    }
    Ok(Outcome::Done)
}
