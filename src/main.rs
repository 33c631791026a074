//! The `tracecast` command line: argument parsing and wiring only.

/// `println!` that hands back the write's error instead of panicking on it:
/// every line the binary prints on stdout goes through this or a `writeln!`
/// on a locked stdout, with `?`, so a closed pipe (`tracecast demo | head -1`)
/// ends the command through `main`, which exits 0 on a broken pipe.
macro_rules! outln {
    ($($arg:tt)*) => {
        writeln!(std::io::stdout().lock(), $($arg)*)
    };
}

mod report;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use tracecast_ingest::analysis::{self, AnalyzeOptions, Classifier, JobAnalysis, WindowMode};
use tracecast_ingest::{Job, ReadOptions, job, output};
use tracecast_pipeline::demo::Page;
use tracecast_pipeline::hardware::{
    catalog_with, job_gpu, node_gpus_for, node_gpus_of, pricing_with, replay_options_for, target_model, world_of_rank,
};
use tracecast_pipeline::inputs::{TraceOptions, WindowOptions, jobs_of, progress_bar};
use tracecast_pipeline::output::per_device;
use tracecast_pipeline::{Outcome, calibrate, demo, export, hw, ingest, project, search, summary, synth, validate};

/// Trace-calibrated profiling and replay for large GPU training and inference jobs.
#[derive(Parser)]
#[command(name = "tracecast", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Where GPU time went, above all exposed communication, per rank, step and collective.
    Analyze(AnalyzeArgs),
    /// Fit kernel efficiencies and link latency/bandwidth from traces into a profile per device.
    Calibrate(CalibrateArgs),
    /// Rebuild the execution graph of measured runs and re-simulate it (identity or what-if speed-ups).
    Replay(ReplayArgs),
    /// Project an iteration from a model, a system and a parallelization plan (MAD-Max's model, calibrated).
    Project(ProjectArgs),
    /// Every feasible plan of a model on a system, simulated and ranked; the best against plain FSDP.
    Search(SearchArgs),
    /// Project published, measured runs (a runs file) and compare: how the model matches your clusters.
    Validate(ValidateArgs),
    /// One self-contained HTML page: summary, charts, tables (and the diff of two jobs).
    Report(ReportArgs),
    /// Compare two runs (before / after a change): per kernel class, collective, step and kernel.
    Diff(DiffArgs),
    /// Write the traces of one job as a Parquet dataset that every command reads (much faster than JSON).
    Ingest(IngestArgs),
    /// Write Kineto traces of a synthetic job with known ground truth.
    Synth(SynthArgs),
    /// The hardware catalog: `hw list`, `hw show ID`.
    Hw(HwArgs),
    /// Analyze the bundled demo job (a synthetic 4-rank data-parallel run) and write its HTML report.
    Demo,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum CommKernelsArg {
    /// Every known communication kernel family.
    Families,
    /// Exactly `^nccl.*Kernel` (as HTA).
    Nccl,
}

impl ReadArgs {
    /// The library's options for reading traces.
    fn trace_options(&self) -> TraceOptions {
        let mut o = TraceOptions::default();
        o.comm_pattern = self.comm_pattern.clone();
        o.comm_kernels = match self.comm_kernels {
            CommKernelsArg::Families => tracecast_ingest::analysis::CommKernels::Families,
            CommKernelsArg::Nccl => tracecast_ingest::analysis::CommKernels::Nccl,
        };
        (o.strict, o.gpus_per_node, o.hw, o.device, o.quiet) =
            (self.strict, self.gpus_per_node, self.hw.clone(), self.device.clone(), self.quiet);
        o
    }

    /// The communication classifier these options ask for.
    fn classifier(&self) -> Result<Classifier> {
        self.trace_options().classifier()
    }

    /// How to read the traces: `--device` names the GPU of those that do not record theirs.
    fn read_options(&self) -> Result<ReadOptions> {
        self.trace_options().read_options()
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum WindowArg {
    /// First to last GPU activity.
    All,
    /// First to last ProfilerStep (falls back to `all` without steps).
    Steps,
}

/// The traces a command reads, as every command takes them.
#[derive(clap::Args)]
struct Inputs {
    /// Trace files (`.json` or gzip) of one job, or directories (one job each).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Treat every file as its own job instead of the ranks of one job (directories: every trace file under them).
    #[arg(long)]
    each: bool,
    #[command(flatten)]
    read: ReadArgs,
}

/// `tracecast ingest`.
#[derive(clap::Args)]
struct IngestArgs {
    /// Trace files (`.json` or gzip) of one job, or its directory. Several runs on disjoint files of
    /// one job may write into the same dataset at the same time (ranks from distributedInfo or file names).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The dataset directory (made when missing; a rank already in it is replaced).
    #[arg(long, value_name = "DATASET")]
    out: PathBuf,
    #[command(flatten)]
    read: ReadArgs,
    /// Each rank's analysis summary is kept in the dataset for this window: `analyze DATASET` with the
    /// same options reads it instead of the events.
    #[command(flatten)]
    window: WindowArgs,
}

/// How traces are read and what counts as communication: one definition for
/// every command that reads traces (analyze, calibrate, replay, report, diff).
#[derive(clap::Args)]
struct ReadArgs {
    /// Extra regular expression for communication kernels (repeatable), added to the definition below.
    #[arg(long, value_name = "RE")]
    comm_pattern: Vec<String>,
    /// What counts as communication: every known kernel family (NCCL/RCCL, DeepEP, NVSHMEM, PyTorch
    /// symmetric memory, vLLM/SGLang custom all-reduce, TensorRT-LLM, MSCCL++, userbuffers, HCCL) and
    /// kernels with a Collective name; or exactly `^nccl.*Kernel`, HTA's definition.
    #[arg(long, value_enum, default_value_t = CommKernelsArg::Families)]
    comm_kernels: CommKernelsArg,
    /// Stop at the first unreadable file instead of reporting it and going on.
    #[arg(long)]
    strict: bool,
    /// GPUs per node, to tell intra- from inter-node groups and dimensions (default: the GPU's node
    /// preset in the catalog, else 8).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    gpus_per_node: Option<u32>,
    /// Extra hardware catalog file (TOML, the format of `calibrate/hw/gpus.toml`): GPUs the traces ran on
    /// that the built-in catalog lacks.
    #[arg(long, value_name = "FILE")]
    hw: Vec<PathBuf>,
    /// The GPU the traces ran on (an id of `hw list`), for traces that do not record it: Nsight
    /// Systems exports without a TARGET_INFO_GPU table.
    #[arg(long, value_name = "ID")]
    device: Option<String>,
    /// Print nothing on stdout (outputs and errors only).
    #[arg(long, short)]
    quiet: bool,
}

/// The analysed window: one definition for every command that breaks GPU
/// time down (analyze, report, diff).
#[derive(clap::Args)]
struct WindowArgs {
    /// Analysed window.
    #[arg(long, value_enum, default_value = "steps")]
    window: WindowArg,
    /// Gaps shorter than this many µs between queued GPU work count as kernel wait.
    #[arg(long, value_name = "US", default_value_t = 30.0, value_parser = non_negative)]
    kernel_wait_us: f64,
    /// Leave out each rank's last profiler step (HTA's default window: the last step is often cut short).
    #[arg(long)]
    drop_last_step: bool,
    /// Only these profiler steps, by number: `2-5` or `3`.
    #[arg(long, value_name = "A-B", value_parser = parse_step_range)]
    steps: Option<(i64, i64)>,
}

impl WindowArgs {
    /// The library's window options.
    fn window_options(&self) -> WindowOptions {
        let mut o = WindowOptions::default();
        o.window = match self.window {
            WindowArg::All => WindowMode::All,
            WindowArg::Steps => WindowMode::Steps,
        };
        (o.kernel_wait_us, o.drop_last_step, o.steps) = (self.kernel_wait_us, self.drop_last_step, self.steps);
        o
    }

    /// Analysis options with this window and `read`'s classifier.
    fn analyze_options(&self, read: &ReadArgs) -> Result<AnalyzeOptions> {
        self.window_options().analyze_options(&read.trace_options())
    }
}

/// A finite number ≥ 0.
fn non_negative(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a non-negative number")),
        Err(_) => Err(format!("{s:?} is not a number")),
    }
}

/// A finite number > 0.
fn positive(s: &str) -> Result<f64, String> {
    match non_negative(s) {
        Ok(v) if v > 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a positive number")),
        Err(e) => Err(e),
    }
}

#[derive(clap::Args)]
struct AnalyzeArgs {
    #[command(flatten)]
    inputs: Inputs,
    #[command(flatten)]
    window: WindowArgs,
    /// Write the analysis as JSON (DESIGN §6 keys).
    #[arg(long, value_name = "F")]
    json: Option<PathBuf>,
    /// Write breakdown, steps, collectives and kernels tables as CSV into DIR.
    #[arg(long, value_name = "DIR")]
    csv: Option<PathBuf>,
    /// Write the same tables as Parquet into DIR.
    #[arg(long, value_name = "DIR")]
    parquet: Option<PathBuf>,
    /// Draw the per-rank breakdown of each job (SVG and PNG) into DIR.
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
    /// GPUs of the whole job, to extrapolate GPU-hours (with --job-hours).
    #[arg(long, value_name = "G", requires = "job_hours", value_parser = positive)]
    job_gpus: Option<f64>,
    /// Wall-clock hours of the whole job (with --job-gpus).
    #[arg(long, value_name = "H", requires = "job_gpus", value_parser = positive)]
    job_hours: Option<f64>,
}

/// `2-5` or `3` as an inclusive range of step numbers.
fn parse_step_range(s: &str) -> Result<(i64, i64), String> {
    let num = |x: &str| x.trim().parse::<i64>().map_err(|_| format!("{x:?} is not a step number"));
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (num(a)?, num(b)?),
        None => (num(s)?, num(s)?),
    };
    if a > b {
        return Err(format!("{a}-{b}: the first step comes after the last"));
    }
    Ok((a, b))
}

#[derive(clap::Args)]
struct CalibrateArgs {
    #[command(flatten)]
    inputs: Inputs,
    /// Profile to write (JSON). With traces of several GPUs, one file per device: OUT with the GPU id before `.json`.
    #[arg(long, value_name = "PROFILE.json")]
    out: PathBuf,
    /// Draw every fit (measured points and fitted curve, SVG and PNG) into DIR.
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
    /// Also write a MAD-Max system configuration with the fitted utilization factors.
    #[arg(long, value_name = "F")]
    madmax_system: Option<PathBuf>,
    /// Nodes of the MAD-Max system configuration.
    #[arg(long, default_value_t = 1)]
    nodes: u32,
}

#[derive(clap::Args)]
struct ReplayArgs {
    #[command(flatten)]
    inputs: Inputs,
    /// Speed-ups, e.g. `compute=2,memory=1.5,link=2` (2 = twice as fast).
    #[arg(long, value_name = "K=V,...")]
    scale: Option<String>,
    /// Link α-β overrides: `alpha=US,busbw=GBPS[,inter-alpha=US,inter-busbw=GBPS]`; each collective
    /// with a known size and group then takes α + bus factor × bytes / busbw (nccl-tests convention).
    #[arg(long, value_name = "K=V,...")]
    link: Option<String>,
    /// Write the replay as JSON.
    #[arg(long, value_name = "F")]
    json: Option<PathBuf>,
    /// Write the replayed timeline as Chrome-trace JSON for ui.perfetto.dev (gzip when F ends in .gz).
    #[arg(long, value_name = "F")]
    perfetto: Option<PathBuf>,
    /// Data-parallel scale-out: collectives over the whole job run over N ranks (bus factor and
    /// intra/inter-node bandwidth from the hardware catalog follow).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    world_size: Option<u32>,
    /// Project onto this GPU (catalog id): compute kernels are re-costed from their ops' work.
    #[arg(long, value_name = "GPU")]
    target: Option<String>,
    /// Calibration profile of the target GPU (`tracecast calibrate` on traces measured there); required with --target.
    #[arg(long, value_name = "P.json", requires = "target")]
    profile: Option<PathBuf>,
    /// Your own measurements for the pricing layer (a GEMM sweep, nccl-tests, … in the formats README describes; repeatable).
    #[arg(long, value_name = "FILE.csv")]
    measurements: Vec<PathBuf>,
    /// A what-if beside the others in one table of speed-ups (repeatable), `NAME:K=V,...`: `compute`,
    /// `memory`, `link` (speed-ups, as --scale), `world-size` (as --world-size), `alpha`, `busbw`,
    /// `inter-alpha`, `inter-busbw` (as --link; α-β keys need busbw). --scale, --link, --world-size and
    /// --target apply to every scenario and the keys a scenario names replace theirs. Each job is read
    /// whole (as with --perfetto) and replayed once per scenario, after an identity replay ("measured").
    #[arg(long = "what-if", value_name = "NAME:K=V,...", action = clap::ArgAction::Append)]
    what_if: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum AssumptionsArg {
    /// tracecast's own model: calibrated efficiencies, α-β collectives, attention, SwiGLU, memory.
    Tracecast,
    /// MAD-Max's simplifications (reproduces its printed outputs; needs --madmax files).
    Madmax,
}

/// The shape of an inference task, as `project` and `search` take it.
#[derive(clap::Args)]
struct InferenceArgs {
    /// Sequences per replica (inference).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    batch: u32,
    /// Prompt tokens (prefill; default: the model's sequence length).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    prompt: Option<u32>,
    /// Context tokens whose KV cache each decode step reads (default: the model's sequence length).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    context: Option<u32>,
}

/// What the system differs in from its catalog entry (the fields of a runs file's `system`).
#[derive(clap::Args, Clone, Copy)]
struct SystemArgs {
    /// GPUs per node (default: the GPU's node preset in the catalog, else 8).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    gpus_per_node: Option<u32>,
    /// Network bandwidth per GPU in GB/s (default: the node preset's NICs), e.g. 25 for one 200 Gb/s NIC per GPU.
    #[arg(long, value_name = "GB/s")]
    nic_gbps_per_gpu: Option<f64>,
    /// HBM capacity per GPU in GB (a variant of the catalog GPU).
    #[arg(long, value_name = "GB")]
    hbm_gb: Option<f64>,
    /// HBM bandwidth per GPU in GB/s (a variant of the catalog GPU).
    #[arg(long, value_name = "GB/s")]
    hbm_gbps: Option<f64>,
}

impl SystemArgs {
    /// The cluster's overrides.
    fn overrides(self) -> tracecast_replay::workload::llm::SystemOverrides {
        tracecast_replay::workload::llm::SystemOverrides {
            gpus_per_node: self.gpus_per_node,
            nic_gbps_per_gpu: self.nic_gbps_per_gpu,
            hbm_gb: self.hbm_gb,
            hbm_gbps: self.hbm_gbps,
        }
    }
}

#[derive(clap::Args)]
struct ProjectArgs {
    /// Model: a preset (llama2-7b, llama2-70b, llama3-70b, gpt3-175b, mixtral-8x7b, …), a model file
    /// (JSON: `layers, hidden, heads, kv_heads, ffn, vocab, seq, activation` gelu|swiglu, `tied_embeddings`,
    /// as in a runs file; or `preset, seq`) or a MAD-Max model file.
    #[arg(long, value_name = "NAME|F")]
    model: Option<String>,
    /// System: a catalog GPU id (with --gpus) or a MAD-Max system file.
    #[arg(long, value_name = "GPU|F")]
    system: Option<String>,
    /// GPUs of the system.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    gpus: Option<u32>,
    #[command(flatten)]
    system_overrides: SystemArgs,
    /// Your own measurements for the pricing layer (a GEMM sweep, nccl-tests, … in the formats README describes; repeatable).
    #[arg(long, value_name = "FILE.csv")]
    measurements: Vec<PathBuf>,
    /// train, prefill, decode, or a MAD-Max task file.
    #[arg(long, value_name = "TASK|F", default_value = "train")]
    task: String,
    #[command(flatten)]
    inference: InferenceArgs,
    /// Parallelization: `tp=8,pp=4,fsdp=64`, `tp=8,dp=16,zero=1,mb=2,gbs=1024,sp,recompute`, `ep=8`.
    #[arg(long, value_name = "SPEC")]
    parallel: Option<String>,
    /// Calibration profile of the GPU (`tracecast calibrate`): its efficiencies and link fits.
    #[arg(long, value_name = "P.json")]
    profile: Option<PathBuf>,
    /// MAD-Max model, system and task files.
    #[arg(long, num_args = 3, value_names = ["MODEL", "SYSTEM", "TASK"])]
    madmax: Option<Vec<PathBuf>>,
    /// DLRM embedding sharding: tw (table-wise), rw (row-wise), cw (column-wise), dp (replicated).
    #[arg(long, value_name = "tw|rw|cw|dp")]
    sharding: Option<String>,
    /// Whose assumptions.
    #[arg(long, value_enum, default_value = "tracecast")]
    assumptions: AssumptionsArg,
    /// Write the projection as JSON (DESIGN §6 keys).
    #[arg(long, value_name = "F")]
    json: Option<PathBuf>,
    /// Write the simulated timeline for ui.perfetto.dev.
    #[arg(long, value_name = "F")]
    perfetto: Option<PathBuf>,
    /// Extra hardware catalog file (TOML).
    #[arg(long, value_name = "FILE")]
    hw: Vec<PathBuf>,
    /// Print nothing on stdout.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(clap::Args)]
struct SearchArgs {
    /// Model: a preset, a model file (the fields of a runs file's `model`) or a MAD-Max model file.
    #[arg(long, value_name = "NAME|F")]
    model: String,
    /// System: a catalog GPU id or a MAD-Max system file.
    #[arg(long, value_name = "GPU|F")]
    system: String,
    /// GPUs.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    gpus: Option<u32>,
    #[command(flatten)]
    system_overrides: SystemArgs,
    /// Your own measurements for the pricing layer (a GEMM sweep, nccl-tests, … in the formats README describes; repeatable).
    #[arg(long, value_name = "FILE.csv")]
    measurements: Vec<PathBuf>,
    /// train, prefill or decode.
    #[arg(long, default_value = "train")]
    task: String,
    /// Sequences per iteration over the system (training; default: one per GPU).
    #[arg(long, value_name = "N")]
    gbs: Option<u32>,
    #[command(flatten)]
    inference: InferenceArgs,
    /// Calibration profile of the GPU.
    #[arg(long, value_name = "P.json")]
    profile: Option<PathBuf>,
    /// Plans to print.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Write the ranked plans, the baseline and the front as JSON.
    #[arg(long, value_name = "F")]
    json: Option<PathBuf>,
    /// Draw the Pareto front of throughput against GPU count into DIR (SVG and PNG).
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
    /// Extra hardware catalog file (TOML).
    #[arg(long, value_name = "FILE")]
    hw: Vec<PathBuf>,
    /// Print nothing on stdout.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(clap::Args)]
struct ReportArgs {
    #[command(flatten)]
    inputs: Inputs,
    #[command(flatten)]
    window: WindowArgs,
    /// The HTML file to write.
    #[arg(long, value_name = "report.html")]
    out: PathBuf,
    /// Also project each job onto this GPU (catalog id; its shipped profile unless --profile is given).
    #[arg(long, value_name = "GPU")]
    target: Option<String>,
    /// Calibration profile of the --target GPU.
    #[arg(long, value_name = "P.json", requires = "target")]
    profile: Option<PathBuf>,
    /// Also show a what-if with these speed-ups, e.g. `link=2`.
    #[arg(long, value_name = "K=V,...")]
    scale: Option<String>,
    /// Also show a what-if with the job's collectives over N ranks (as `replay --world-size`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    world_size: Option<u32>,
    /// Also show a what-if with these link α-β (as `replay --link`).
    #[arg(long, value_name = "alpha=US,busbw=GBPS[,...]")]
    link: Option<String>,
    /// GPUs of the whole job, to state its GPU-hours (with --job-hours).
    #[arg(long, value_name = "G", requires = "job_hours", value_parser = positive)]
    job_gpus: Option<f64>,
    /// Wall-clock hours of the whole job (with --job-gpus).
    #[arg(long, value_name = "H", requires = "job_gpus", value_parser = positive)]
    job_hours: Option<f64>,
    /// Also write every chart of the page as SVG and PNG files into DIR.
    #[arg(long, value_name = "DIR")]
    png: Option<PathBuf>,
}

#[derive(clap::Args)]
struct DiffArgs {
    /// Run A (before): a trace file or a directory of per-rank files.
    a: PathBuf,
    /// Run B (after).
    b: PathBuf,
    #[command(flatten)]
    read: ReadArgs,
    #[command(flatten)]
    window: WindowArgs,
    /// Write the comparison as JSON.
    #[arg(long, value_name = "F")]
    json: Option<PathBuf>,
    /// Kernels listed in the per-kernel comparison.
    #[arg(long, default_value_t = 25)]
    top: usize,
    /// Exit 1 when B regresses past a bound, for CI: `step>+3%,exposed>+5%` (metrics step, busy,
    /// idle, exposed, comm, compute; bounds in % of A).
    #[arg(long, value_name = "GATES")]
    fail_if: Option<String>,
}

#[derive(clap::Args)]
struct HwArgs {
    #[command(subcommand)]
    command: HwCommand,
    /// Extra hardware catalog file (TOML).
    #[arg(long, value_name = "FILE", global = true)]
    hw: Vec<PathBuf>,
}

#[derive(Subcommand)]
enum HwCommand {
    /// Every GPU and node preset.
    List,
    /// One GPU with its sources.
    Show {
        /// GPU id, e.g. `h100-sxm`.
        id: String,
    },
    /// Prices one operation the way projections do: its time, achieved rate, rule and whether it extrapolates.
    Cost(Box<CostArgs>),
}

#[derive(clap::Args)]
struct CostArgs {
    /// GPU id, e.g. `h100-sxm`.
    gpu: String,
    /// `gemm`, `attention`, or a collective: `all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`.
    op: String,
    /// GEMM rows.
    #[arg(long)]
    m: Option<f64>,
    /// GEMM columns.
    #[arg(long)]
    n: Option<f64>,
    /// GEMM reduction dimension.
    #[arg(long)]
    k: Option<f64>,
    /// Independent GEMMs, or the attention batch.
    #[arg(long, default_value_t = 1.0)]
    batch: f64,
    /// Input type: bf16, fp16, fp8, tf32, fp32.
    #[arg(long, default_value = "bf16")]
    dtype: String,
    /// Attention heads.
    #[arg(long)]
    heads: Option<f64>,
    /// Attention sequence length.
    #[arg(long)]
    seq: Option<f64>,
    /// Attention head dimension.
    #[arg(long)]
    head_dim: Option<f64>,
    /// Causal attention.
    #[arg(long)]
    causal: bool,
    /// Attention forward plus backward.
    #[arg(long)]
    backward: bool,
    /// Attention kernel family (`fa2`, `fa3`, `cudnn`, …; default: the fastest measured).
    #[arg(long)]
    kernel: Option<String>,
    /// Collective size, bytes (nccl-tests' size: the full buffer).
    #[arg(long)]
    bytes: Option<f64>,
    /// GPUs taking part in the collective.
    #[arg(long)]
    gpus: Option<u32>,
    /// GPUs per node (default: the GPU's node preset, else 8).
    #[arg(long)]
    gpus_per_node: Option<u32>,
    /// Your own measurements (GEMM sweep, nccl-tests, … in the formats README describes; repeatable).
    #[arg(long, value_name = "FILE.csv")]
    measurements: Vec<PathBuf>,
    /// Calibration profile of the GPU: its traces' correction of the GEMM table (what projections with it apply).
    #[arg(long, value_name = "P.json")]
    profile: Option<PathBuf>,
    /// Writes `{"time_us", "rule", "extrapolated", …}` here.
    #[arg(long, value_name = "F")]
    json: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ValidateArgs {
    /// Runs file (`shared/validation/published-runs.json` format: id, model, system, plan, measured).
    runs: PathBuf,
    /// Calibration profile of a GPU of the runs (repeatable; each prices the runs on its GPU).
    #[arg(long, value_name = "P.json")]
    profile: Vec<PathBuf>,
    /// Hardware catalog file(s) to add (same TOML format as the built-in catalog).
    #[arg(long, value_name = "FILE")]
    hw: Vec<PathBuf>,
    /// Write the comparison as JSON.
    #[arg(long, value_name = "F")]
    json: Option<PathBuf>,
    /// Fit the model's free parameter (the GEMM table correction per GPU) to the runs, print the
    /// leave-one-run-out error, and write the fitted profile(s) here (several GPUs: one file each, the GPU id before `.json`).
    #[arg(long, value_name = "OUT.json")]
    fit: Option<PathBuf>,
    /// Your own measurements for the pricing layer (a GEMM sweep, nccl-tests, … in the formats README describes; repeatable).
    #[arg(long, value_name = "FILE.csv")]
    measurements: Vec<PathBuf>,
    /// Print nothing on stdout.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(clap::Args)]
struct SynthArgs {
    /// Output directory (created).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Ranks.
    #[arg(long, default_value_t = 4)]
    ranks: u32,
    /// Training steps per rank.
    #[arg(long, default_value_t = 3)]
    steps: u32,
    /// Transformer-like layers per step.
    #[arg(long, default_value_t = 8)]
    layers: u32,
    /// Random seed (noise and rank skew).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// True all-reduce bus bandwidth, GB/s.
    #[arg(long, default_value_t = 150.0)]
    busbw_gbps: f64,
    /// True all-reduce latency α, µs.
    #[arg(long, default_value_t = 15.0)]
    alpha_us: f64,
    /// True GEMM efficiency η.
    #[arg(long, default_value_t = 0.70)]
    gemm_efficiency: f64,
    /// Write plain JSON instead of gzip.
    #[arg(long)]
    plain: bool,
    /// Layers shaped like this model (a preset or MAD-Max model file): its per-layer GEMMs.
    #[arg(long, value_name = "NAME|F")]
    model: Option<String>,
    /// Tokens per step and rank (with --model).
    #[arg(long, default_value_t = 4096)]
    tokens: u64,
    /// Take the ground truth from this calibration profile: its GEMM η and t0, HBM η, peaks and link α-β.
    #[arg(long, value_name = "P.json")]
    profile: Option<PathBuf>,
    /// Print nothing on stdout.
    #[arg(long, short)]
    quiet: bool,
}

impl Inputs {
    /// The library's inputs.
    fn inputs(&self) -> tracecast_pipeline::inputs::Inputs {
        let mut o = tracecast_pipeline::inputs::Inputs::default();
        (o.paths, o.each, o.read) = (self.paths.clone(), self.each, self.read.trace_options());
        o
    }
}

impl ReadArgs {
    /// The flags of `o` (the report reads traces with these until it takes the library's options).
    fn from_options(o: &TraceOptions) -> ReadArgs {
        let comm_kernels = match o.comm_kernels {
            tracecast_ingest::analysis::CommKernels::Nccl => CommKernelsArg::Nccl,
            _ => CommKernelsArg::Families,
        };
        let (comm_pattern, strict, gpus_per_node, hw, device, quiet) =
            (o.comm_pattern.clone(), o.strict, o.gpus_per_node, o.hw.clone(), o.device.clone(), o.quiet);
        ReadArgs { comm_pattern, comm_kernels, strict, gpus_per_node, hw, device, quiet }
    }
}

impl IngestArgs {
    fn into_options(self) -> ingest::Options {
        let mut o = ingest::Options::default();
        (o.paths, o.out, o.read, o.window) = (self.paths, self.out, self.read.trace_options(), self.window.window_options());
        o
    }
}

impl CalibrateArgs {
    fn into_options(self) -> calibrate::Options {
        let mut o = calibrate::Options::default();
        (o.inputs, o.out, o.plots, o.madmax_system, o.nodes) = (self.inputs.inputs(), self.out, self.plots, self.madmax_system, self.nodes);
        o
    }
}

impl InferenceArgs {
    fn options(&self) -> project::Inference {
        let mut o = project::Inference::default();
        (o.batch, o.prompt, o.context) = (self.batch, self.prompt, self.context);
        o
    }
}

impl ProjectArgs {
    fn into_options(self) -> project::Options {
        let mut o = project::Options::default();
        (o.model, o.system, o.gpus, o.system_overrides) = (self.model, self.system, self.gpus, self.system_overrides.overrides());
        (o.measurements, o.task, o.inference, o.parallel) = (self.measurements, self.task, self.inference.options(), self.parallel);
        o.madmax = match self.madmax.as_deref() {
            Some([model, system, task]) => Some(project::MadmaxFiles { model: model.clone(), system: system.clone(), task: task.clone() }),
            _ => None,
        };
        o.assumptions = match self.assumptions {
            AssumptionsArg::Tracecast => project::Assumptions::Tracecast,
            AssumptionsArg::Madmax => project::Assumptions::Madmax,
        };
        (o.profile, o.sharding, o.json, o.perfetto, o.hw, o.quiet) =
            (self.profile, self.sharding, self.json, self.perfetto, self.hw, self.quiet);
        o
    }
}

impl SearchArgs {
    fn into_options(self) -> search::Options {
        let mut o = search::Options::default();
        (o.model, o.system, o.gpus, o.system_overrides) = (self.model, self.system, self.gpus, self.system_overrides.overrides());
        (o.measurements, o.task, o.gbs, o.inference, o.profile) =
            (self.measurements, self.task, self.gbs, self.inference.options(), self.profile);
        (o.top, o.json, o.plots, o.hw, o.quiet) = (self.top, self.json, self.plots, self.hw, self.quiet);
        o
    }
}

impl ValidateArgs {
    fn into_options(self) -> validate::Options {
        let mut o = validate::Options::default();
        (o.runs, o.profile, o.hw, o.json, o.fit, o.measurements, o.quiet) =
            (self.runs, self.profile, self.hw, self.json, self.fit, self.measurements, self.quiet);
        o
    }
}

impl HwArgs {
    fn into_options(self) -> hw::Options {
        let mut o = hw::Options::default();
        o.command = match self.command {
            HwCommand::List => hw::Command::List,
            HwCommand::Show { id } => hw::Command::Show { id },
            HwCommand::Cost(c) => hw::Command::Cost(Box::new(c.into_options())),
        };
        o.hw = self.hw;
        o
    }
}

impl CostArgs {
    fn into_options(self) -> hw::Cost {
        let mut o = hw::Cost::default();
        (o.gpu, o.op, o.m, o.n, o.k, o.batch, o.dtype) = (self.gpu, self.op, self.m, self.n, self.k, self.batch, self.dtype);
        (o.heads, o.seq, o.head_dim, o.causal, o.backward, o.kernel) =
            (self.heads, self.seq, self.head_dim, self.causal, self.backward, self.kernel);
        (o.bytes, o.gpus, o.gpus_per_node, o.measurements, o.profile, o.json) =
            (self.bytes, self.gpus, self.gpus_per_node, self.measurements, self.profile, self.json);
        o
    }
}

impl SynthArgs {
    fn into_options(self) -> synth::Options {
        let mut o = synth::Options::default();
        (o.out, o.ranks, o.steps, o.layers, o.seed) = (self.out, self.ranks, self.steps, self.layers, self.seed);
        (o.busbw_gbps, o.alpha_us, o.gemm_efficiency, o.plain) = (self.busbw_gbps, self.alpha_us, self.gemm_efficiency, self.plain);
        (o.model, o.tokens, o.profile, o.quiet) = (self.model, self.tokens, self.profile, self.quiet);
        o
    }
}

/// The exit status of a command's outcome.
fn exit_code(outcome: Outcome) -> ExitCode {
    match outcome {
        Outcome::Done => ExitCode::SUCCESS,
        Outcome::NoPlan => ExitCode::from(1),
        Outcome::BadFiles => ExitCode::from(2),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut out = std::io::stdout();
    let result = match cli.command {
        Command::Analyze(args) => analyze(args),
        Command::Calibrate(args) => calibrate::run(&args.into_options(), &mut out).map(exit_code),
        Command::Replay(args) => replay(args),
        Command::Project(args) => project::run(&args.into_options(), &mut out).map(exit_code),
        Command::Search(args) => search::run(&args.into_options(), &mut out).map(exit_code),
        Command::Validate(args) => validate::run(&args.into_options(), &mut out).map(exit_code),
        Command::Report(args) => report::run_report(args),
        Command::Diff(args) => report::run_diff(args),
        Command::Ingest(args) => ingest::run(&args.into_options(), &mut out).map(exit_code),
        Command::Synth(args) => synth::run(&args.into_options(), &mut out).map(exit_code),
        Command::Hw(args) => hw::run(&args.into_options(), &mut out).map(exit_code),
        Command::Demo => {
            let mut o = demo::Options::default();
            o.dir = PathBuf::from(DEMO_DIR);
            demo::run(&o, &DemoReport, &mut out).map(exit_code)
        }
    };
    // A diagnostic for tests: how often each per-rank fact was computed.
    if std::env::var_os("TRACECAST_COUNT_FACTS").is_some() {
        eprintln!("facts computed: {}", analysis::facts::counts());
    }
    match result {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Whether the error is a write to a closed pipe (`tracecast … | head`). Such
/// a command ends quietly with exit status 0, as ripgrep's: the reader took
/// what it wanted, nothing went wrong (STYLE: broken pipe exits 0). Rust
/// ignores SIGPIPE, so the write fails with `BrokenPipe` instead of killing
/// the process; every stdout write returns that error here (`outln!`).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

fn analyze(args: AnalyzeArgs) -> Result<ExitCode> {
    let mut opts = args.window.analyze_options(&args.inputs.read)?;
    opts.job_gpus = args.job_gpus;
    opts.job_hours = args.job_hours;
    let opts = opts;
    let read_opts = args.inputs.read.read_options()?;
    let catalog = catalog_with(&args.inputs.read.hw)?;
    let given_node = args.inputs.read.gpus_per_node;
    let mut analyses = Vec::new();
    // One rank at a time: each trace is summarized as it is read and dropped,
    // so a job of thousands of ranks never sits in memory whole.
    let failed = for_each_input(
        &args.inputs.paths,
        args.inputs.each,
        &args.inputs.read,
        |path, files, on_file| {
            let summarize = |rank: &tracecast_ingest::job::Rank| {
                analysis::check_step_range(&rank.trace, opts.steps, opts.drop_last_step)?;
                let mut o = opts.clone();
                o.gpus_per_node = i64::from(node_gpus_of(std::slice::from_ref(rank), &catalog, given_node));
                Ok(analysis::summarize_rank(rank, world_of_rank(rank.trace.declared_world_size(), files), &o))
            };
            // A dataset's rank summarized with these options already: its cached summary, events unread.
            let cached = |f: &std::path::Path| {
                if f.extension().is_none_or(|e| e != "parquet") {
                    return None;
                }
                let meta = tracecast_ingest::dataset::rank_meta(f).ok()?;
                let mut o = opts.clone();
                o.gpus_per_node = i64::from(node_gpus_for(&meta.devices, &catalog, given_node));
                let world = world_of_rank(meta.declared_world_size(), files);
                let summary = tracecast_ingest::dataset::cached_summary(f, &analysis::summary_key(&o, world))?;
                Some((meta.rank, meta.file, summary))
            };
            let (summaries, failures) = Job::try_summarize_or(files, &read_opts, on_file, &cached, &summarize);
            let bad = failures.iter().map(analysis::BadFile::of).collect();
            let job = (!summaries.is_empty()).then(|| analysis::reduce(path.display().to_string(), summaries, bad, &opts));
            (job, failures)
        },
        |a, _| analyses.push(a),
    )?;
    let definition = opts.classifier.definition();
    emit(&analyses, &definition, args.json.as_ref(), args.csv.as_ref(), args.parquet.as_ref(), args.inputs.read.quiet)?;
    if let Some(dir) = &args.plots {
        for (i, a) in analyses.iter().enumerate() {
            let stem = if analyses.len() == 1 { dir.join("breakdown") } else { dir.join(format!("breakdown-{}", i + 1)) };
            for f in tracecast_plots::breakdown::write_breakdown(a, &stem)? {
                if !args.inputs.read.quiet {
                    outln!("wrote {}", f.display())?;
                }
            }
        }
    }
    Ok(if failed { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

fn emit(
    analyses: &[JobAnalysis],
    comm_kernels: &str,
    json: Option<&PathBuf>,
    csv: Option<&PathBuf>,
    parquet: Option<&PathBuf>,
    quiet: bool,
) -> Result<()> {
    if !quiet {
        let mut out = std::io::stdout().lock();
        for a in analyses {
            summary::write_job(&mut out, a)?;
        }
        out.flush()?;
    }
    if let Some(path) = json {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            /// Which kernels counted as communication.
            comm_kernels: String,
            jobs: &'a [JobAnalysis],
        }
        let mut bytes = serde_json::to_vec_pretty(&Doc { comm_kernels: comm_kernels.to_string(), jobs: analyses })?;
        bytes.push(b'\n');
        output::write_atomic(path, &bytes)?;
    }
    if let Some(dir) = csv {
        export::write_tables(analyses, dir, export::Format::Csv).with_context(|| format!("writing CSV tables to {}", dir.display()))?;
    }
    if let Some(dir) = parquet {
        export::write_tables(analyses, dir, export::Format::Parquet)
            .with_context(|| format!("writing Parquet tables to {}", dir.display()))?;
    }
    Ok(())
}

/// Reads the jobs the paths stand for one at a time (so only one is held in
/// memory) and hands each to `each_job`; bad files are reported on stderr.
/// Returns whether any file was bad; with `strict`, the first bad file is an error.
fn for_each_job(inputs: &Inputs, each_job: impl FnMut(Job)) -> Result<bool> {
    for_each_job_in(&inputs.paths, inputs.each, &inputs.read, each_job)
}

/// [`for_each_job`] over `paths` read with `opts`.
fn for_each_job_in(paths: &[PathBuf], each: bool, opts: &ReadArgs, mut each_job: impl FnMut(Job)) -> Result<bool> {
    let read_opts = opts.read_options()?;
    let read = |path, files: &[PathBuf], on_file: &(dyn Fn(&std::path::Path) + Sync)| {
        let mut job = Job::read(path, files, &read_opts, on_file);
        let failures = std::mem::take(&mut job.failures);
        ((!job.ranks.is_empty()).then_some(job), failures)
    };
    for_each_input(paths, each, opts, read, |mut job, failures| {
        job.failures = failures;
        each_job(job)
    })
}

/// The jobs `paths` stand for, each read by `read` (given the job's path, its
/// files and a per-file progress callback); bad files are reported on stderr
/// and, with `--strict`, stop everything. Returns whether any file was bad.
fn for_each_input<T>(
    paths: &[PathBuf],
    each: bool,
    opts: &ReadArgs,
    read: impl Fn(PathBuf, &[PathBuf], &(dyn Fn(&std::path::Path) + Sync)) -> (Option<T>, Vec<tracecast_ingest::Error>),
    mut each_job: impl FnMut(T, Vec<tracecast_ingest::Error>),
) -> Result<bool> {
    let (quiet, strict) = (opts.quiet, opts.strict);
    let mut failed = false;
    for (path, inputs) in jobs_of(paths, each) {
        let mut files = Vec::new();
        let mut listing_errors = Vec::new();
        for p in &inputs {
            match job::trace_files(p) {
                Ok(f) => files.extend(f),
                Err(e) => listing_errors.push(e),
            }
        }
        let total_bytes: u64 = files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
        let bar = progress_bar(files.len(), total_bytes, quiet);
        let (job, mut failures) = read(path, &files, &|_| bar.inc(1));
        bar.finish_and_clear();
        failures.extend(listing_errors);
        for e in &failures {
            eprintln!("error: {e}");
            if matches!(e, tracecast_ingest::Error::DuplicateRank { .. }) {
                eprintln!("  (files of unrelated runs? give them with --each)");
            }
        }
        if !failures.is_empty() {
            failed = true;
            if strict {
                anyhow::bail!("stopping at the first bad file (--strict)");
            }
        }
        if let Some(job) = job {
            each_job(job, failures);
        }
    }
    Ok(failed)
}

fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let read_opts = args.inputs.read.read_options()?;
    let mut opts = tracecast_replay::ReplayOptions::default();
    opts.classifier = args.inputs.read.classifier()?;
    if let Some(spec) = &args.scale {
        opts.scale = spec.parse()?;
    }
    if let Some(spec) = &args.link {
        opts.link = Some(spec.parse()?);
    }
    let scenarios = tracecast_replay::scenario::parse_scenarios(&args.what_if)?;
    let catalog = catalog_with(&args.inputs.read.hw)?;
    opts.target = target_model(args.target.as_ref(), args.profile.as_ref(), &catalog)?;
    opts.pricing = Some(pricing_with(&catalog, &args.measurements)?);
    opts.world_size = args.world_size;
    let opts = opts;
    let (mut replays, mut what_ifs) = (Vec::new(), Vec::new());
    let mut perfetto_error = None;
    let mut jobs_seen = 0usize;
    let given_node = args.inputs.read.gpus_per_node;
    let failed = if args.perfetto.is_none() && scenarios.is_empty() {
        // One rank at a time: each trace becomes its part of the graph (and
        // what the report needs of it) and is dropped.
        let read = |path: PathBuf, files: &[PathBuf], on_file: &(dyn Fn(&std::path::Path) + Sync)| {
            let part = |rank: &tracecast_ingest::job::Rank| {
                let ctx = analysis::RankContext::new(rank, &opts.classifier);
                (tracecast_replay::RankPart::of(&ctx, &opts, &catalog, None, None), ctx.into_collectives())
            };
            let (parts, failures) = Job::summarize(files, &read_opts, on_file, &part);
            ((!parts.is_empty()).then_some((path, parts)), failures)
        };
        for_each_input(&args.inputs.paths, args.inputs.each, &args.inputs.read, read, |(path, parts), _| {
            let (parts, collectives): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
            let collectives = analysis::JobCollectives::new(collectives);
            let gpu = parts.iter().find_map(|p| p.gpu_id()).and_then(|id| catalog.gpu(id).ok());
            let opts = replay_options_for(gpu, &opts, &catalog, given_node);
            replays.push(tracecast_replay::replay_parts(path.display().to_string(), parts, &collectives, &opts, &catalog).report);
        })?
    } else {
        // Perfetto output writes every event of every rank, and what-ifs replay the job once each: the whole job is read.
        for_each_job(&args.inputs, |job| {
            let opts = replay_options_for(job_gpu(&job.ranks, &catalog), &opts, &catalog, given_node);
            // One context per rank for the replay and every what-if.
            let (parts, collectives) = tracecast_replay::job_parts(&job, &opts, &catalog);
            let path = job.path.display().to_string();
            what_ifs.push(tracecast_replay::scenario_rows(&path, &parts, &collectives, &opts, &scenarios, &catalog));
            let replayed = tracecast_replay::replay_parts(path, parts, &collectives, &opts, &catalog);
            if let (Some(path), None) = (&args.perfetto, &perfetto_error) {
                let path = if jobs_seen == 0 { path.clone() } else { per_device(path, &format!("job{}", jobs_seen + 1)) };
                if let Err(e) = write_perfetto(&path, &job, &replayed) {
                    perfetto_error = Some(e);
                }
            }
            jobs_seen += 1;
            replays.push(replayed.report);
        })?
    };
    if let Some(e) = perfetto_error {
        return Err(e);
    }
    if !args.inputs.read.quiet {
        let mut out = std::io::stdout().lock();
        for (i, r) in replays.iter().enumerate() {
            writeln!(out, "Job {} — {} rank(s), {} tasks, {} edges", r.path, r.ranks.len(), r.tasks, r.edges)?;
            let what = if r.scale == tracecast_replay::Scale::default()
                && args.world_size.is_none()
                && args.target.is_none()
                && args.link.is_none()
            {
                "error"
            } else {
                "change"
            };
            writeln!(out, "{:>5} {:>10} {:>16} {:>16} {:>8}", "rank", "steps", "measured ms", "replayed ms", what)?;
            for k in &r.ranks {
                writeln!(
                    out,
                    "{:>5} {:>10} {:>16.3} {:>16.3} {:>7.2}%",
                    k.rank,
                    k.steps.len(),
                    k.measured_step_us / 1000.0,
                    k.replayed_step_us / 1000.0,
                    100.0 * k.error
                )?;
            }
            if r.scale != tracecast_replay::Scale::default() || args.world_size.is_some() || args.target.is_some() || args.link.is_some() {
                writeln!(out, "Speed-up of the step over the measured run: {:.3}×", r.speedup)?;
                let measured: f64 = r.ranks.iter().map(|k| k.measured.busy_us).sum();
                let replayed: f64 = r.ranks.iter().map(|k| k.replayed.busy_us).sum();
                writeln!(out, "GPU busy time: measured {:.3} ms, replayed {:.3} ms", measured / 1000.0, replayed / 1000.0)?;
            }
            if let Some(p) = &r.projection {
                let gpu = |g: &Option<String>| g.clone().unwrap_or_else(|| "an unknown GPU".into());
                writeln!(
                    out,
                    "Compute kernels priced from {} ({}) onto {} ({}):",
                    gpu(&p.source_gpu),
                    p.source_fits,
                    gpu(&p.target_gpu),
                    p.target_fits
                )?;
                for s in &p.rules {
                    writeln!(
                        out,
                        "  {:>6} kernels {:>12.3} ms → {:>12.3} ms  {}",
                        s.kernels,
                        s.measured_us / 1000.0,
                        s.projected_us / 1000.0,
                        s.description
                    )?;
                }
                let by_class: Vec<String> = p
                    .classes
                    .iter()
                    .map(|c| format!("{} {:.3} → {:.3}", c.class.as_str(), c.measured_us / 1000.0, c.projected_us / 1000.0))
                    .collect();
                writeln!(out, "  by kernel class (ms): {}", by_class.join(" · "))?;
                let total: f64 = p.rules.iter().map(|s| s.projected_us).sum();
                writeln!(
                    out,
                    "  projected kernel time {:.3} ms (95 % band of the efficiencies: {:.3}–{:.3} ms)",
                    total / 1000.0,
                    p.projected_band_us[0] / 1000.0,
                    p.projected_band_us[1] / 1000.0
                )?;
            }
            let c = &r.critical_path;
            if c.total_us > 0.0 {
                let [compute, comm, memory, cpu, launch, unexplained] = c.percent();
                writeln!(
                    out,
                    "Critical path {:.3} ms: compute {compute:.1} %, communication {comm:.1} %, memory {memory:.1} %, CPU {cpu:.1} %, launch/queue {launch:.1} %, unexplained waits {unexplained:.1} %",
                    c.total_us / 1000.0
                )?;
            }
            for k in r.ranks.iter().take(if r.ranks.len() <= 8 { usize::MAX } else { 1 }) {
                let (tm, st) = (&k.graph.timings, &k.graph.starts);
                writeln!(
                    out,
                    "Graph of rank {}: queue gap {:.1} µs, launch latency {:.1} µs (measured); GPU starts by stream {}, launch {}, cross-stream {} recorded + {} inferred, unexplained {} ({:.3} ms), anchored {}",
                    k.rank,
                    tm.queue_gap_us,
                    tm.launch_latency_us,
                    st.stream,
                    st.launch,
                    st.cross_stream_recorded,
                    st.cross_stream_inferred,
                    st.unexplained,
                    st.unexplained_us / 1000.0,
                    st.anchored
                )?;
            }
            for n in &r.notes {
                writeln!(out, "note: {n}")?;
            }
            tracecast_replay::scenario::write_table(&mut out, what_ifs.get(i).map_or(&[], Vec::as_slice))?;
            writeln!(out)?;
        }
    }
    if let Some(path) = &args.json {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            jobs: Vec<tracecast_replay::scenario::JobWithScenarios<'a>>,
        }
        let what_if = |i: usize| what_ifs.get(i).map_or(&[][..], Vec::as_slice);
        let jobs =
            replays.iter().enumerate().map(|(i, replay)| tracecast_replay::scenario::JobWithScenarios { replay, what_if: what_if(i) });
        let mut bytes = serde_json::to_vec_pretty(&Doc { jobs: jobs.collect() })?;
        bytes.push(b'\n');
        output::write_atomic(path, &bytes)?;
    }
    Ok(if failed { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

fn write_perfetto(path: &std::path::Path, job: &Job, r: &tracecast_replay::Replayed) -> Result<()> {
    let mut text = Vec::new();
    tracecast_replay::perfetto::write(&mut text, job, &r.graph, &r.schedule, &r.critical)?;
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        use std::io::Write as _;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&text)?;
        enc.finish()?
    } else {
        text
    };
    output::write_atomic(path, &bytes)?;
    Ok(())
}

/// The bundled demo job, relative to the crate root so `cargo run` finds it anywhere.
const DEMO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/demo");

/// The demo's page from the report module (until the report takes the library's options).
struct DemoReport;

impl demo::Report for DemoReport {
    type Section = report::Section;

    fn sections(&self, dir: &Path, page: &Page) -> Result<(Vec<report::Section>, bool)> {
        report::sections(&[dir.to_path_buf()], false, &ReadArgs::from_options(&page.read), &demo_plan(page))
    }

    fn analysis(section: &report::Section) -> &JobAnalysis {
        section.analysis()
    }

    fn write(&self, sections: &[report::Section], page: &Page, out: &Path) -> Result<()> {
        report::write(sections, &demo_plan(page), out).map(drop)
    }
}

/// The report plan of the demo's page.
fn demo_plan(page: &Page) -> report::ReportPlan<'_> {
    let projection = Some((report::projection_label(None, page.what_if.scale), page.what_if.clone()));
    report::ReportPlan { catalog: &page.catalog, analyze: &page.analyze, projection, gpus_per_node: None, png_dir: None }
}
