//! The command line's flags: one clap struct per subcommand (doc comments are
//! the help), each with its conversion to the library's options.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use tracecast_ingest::analysis::WindowMode;
use tracecast_pipeline::inputs::{TraceOptions, WindowOptions};
use tracecast_pipeline::{analyze, calibrate, diff, ingest, replay, report, synth};

mod hardware;
mod projection;

pub(crate) use hardware::HwArgs;
pub(crate) use projection::{ProjectArgs, SearchArgs, ValidateArgs};

/// Trace-calibrated profiling and replay for large GPU training and inference jobs.
#[derive(Parser)]
#[command(name = "tracecast", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
    /// Write the traces of one job as a Parquet dataset that every command reads (much faster than JSON); every event and step is stored: --window, --steps and --drop-last-step choose the analysis summary cached beside them.
    Ingest(IngestArgs),
    /// Write Kineto traces of a synthetic job with known ground truth.
    Synth(SynthArgs),
    /// The hardware catalog: `hw list`, `hw show ID`, and the price of one operation: `hw cost GPU OP`.
    Hw(HwArgs),
    /// Analyze the bundled demo job (a synthetic 4-rank data-parallel run) and write its HTML report.
    Demo,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum CommKernelsArg {
    /// Every known communication kernel family.
    Families,
    /// Exactly `^nccl.*Kernel` (as HTA).
    Nccl,
}

impl ReadArgs {
    /// The library's options for reading traces.
    pub(crate) fn trace_options(&self) -> TraceOptions {
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
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum WindowArg {
    /// First to last GPU activity.
    All,
    /// First to last ProfilerStep (falls back to `all` without steps).
    Steps,
}

/// The traces a command reads, as every command takes them.
#[derive(clap::Args)]
pub(crate) struct Inputs {
    /// Trace files (Kineto `.json` or gzip, Nsight Systems `.sqlite` exports) of one job, or directories (one job each).
    #[arg(required = true)]
    pub(crate) paths: Vec<PathBuf>,
    /// Treat every file as its own job instead of the ranks of one job (directories: every trace file under them).
    #[arg(long)]
    pub(crate) each: bool,
    #[command(flatten)]
    pub(crate) read: ReadArgs,
}

/// `tracecast ingest`.
#[derive(clap::Args)]
pub(crate) struct IngestArgs {
    /// Trace files (Kineto `.json` or gzip, Nsight Systems `.sqlite` exports) of one job, or its directory. Several runs on disjoint files of
    /// one job may write into the same dataset at the same time (ranks from distributedInfo or file names).
    #[arg(required = true)]
    pub(crate) paths: Vec<PathBuf>,
    /// The dataset directory (made when missing; a rank already in it is replaced).
    #[arg(long, value_name = "DATASET")]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    pub(crate) read: ReadArgs,
    /// Each rank's analysis summary is kept in the dataset for this window: `analyze DATASET` with the
    /// same options reads it instead of the events.
    #[command(flatten)]
    pub(crate) window: WindowArgs,
    #[command(flatten)]
    pub(crate) idle: IdleArgs,
}

/// How traces are read and what counts as communication: one definition for
/// every command that reads traces (analyze, calibrate, replay, report, diff).
#[derive(clap::Args)]
pub(crate) struct ReadArgs {
    /// Extra regular expression for communication kernels (repeatable), added to the definition below.
    #[arg(long, value_name = "RE")]
    pub(crate) comm_pattern: Vec<String>,
    /// What counts as communication: every known kernel family (NCCL/RCCL, DeepEP, NVSHMEM, PyTorch
    /// symmetric memory, vLLM/SGLang custom all-reduce, TensorRT-LLM, MSCCL++, userbuffers, HCCL) and
    /// kernels with a Collective name; or exactly `^nccl.*Kernel`, HTA's definition.
    #[arg(long, value_enum, default_value_t = CommKernelsArg::Families)]
    pub(crate) comm_kernels: CommKernelsArg,
    /// Stop at the first job with unreadable files (each named; a job's files are read together) instead of going on.
    #[arg(long)]
    pub(crate) strict: bool,
    /// GPUs per node, to tell intra- from inter-node groups and dimensions (default: that of replay's
    /// --measurements across nodes of the GPU, else the GPU's node preset in the catalog, else 8).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub(crate) gpus_per_node: Option<u32>,
    /// Extra hardware catalog file (TOML, the format of `calibrate/hw/gpus.toml`): GPUs the traces ran on
    /// that the built-in catalog lacks.
    #[arg(long, value_name = "FILE")]
    pub(crate) hw: Vec<PathBuf>,
    /// The GPU the traces ran on (an id of `hw list`), for traces that do not record it: Kineto
    /// traces without `deviceProperties`, Nsight Systems exports without a TARGET_INFO_GPU table.
    /// A trace that records its GPU keeps it (a warning says so).
    #[arg(long, value_name = "ID")]
    pub(crate) device: Option<String>,
    /// Print nothing on stdout (outputs and errors only).
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

/// The analysed window: one definition for every command that breaks GPU
/// time down (analyze, ingest, report, diff, replay).
#[derive(clap::Args)]
pub(crate) struct WindowArgs {
    /// Analysed window.
    #[arg(long, value_enum, default_value = "steps")]
    pub(crate) window: WindowArg,
    /// Leave out each rank's last profiler step (HTA's default window: the last step is often cut short).
    #[arg(long)]
    pub(crate) drop_last_step: bool,
    /// Only these profiler steps, by number: `2-5` or `3`.
    #[arg(long, value_name = "A-B", value_parser = parse_step_range)]
    pub(crate) steps: Option<(i64, i64)>,
}

/// How idle GPU time is split: the commands that report the split (analyze, ingest's summaries, report).
#[derive(clap::Args)]
pub(crate) struct IdleArgs {
    /// Gaps shorter than this many µs between queued GPU work count as kernel wait in the idle split.
    #[arg(long, value_name = "US", default_value_t = 30.0, value_parser = non_negative, allow_negative_numbers = true)]
    pub(crate) kernel_wait_us: f64,
}

impl WindowArgs {
    /// The library's window options, with the idle split's threshold where the command reports the split.
    pub(crate) fn window_options(&self, idle: Option<&IdleArgs>) -> WindowOptions {
        let mut o = WindowOptions::default();
        o.window = match self.window {
            WindowArg::All => WindowMode::All,
            WindowArg::Steps => WindowMode::Steps,
        };
        (o.drop_last_step, o.steps) = (self.drop_last_step, self.steps);
        if let Some(idle) = idle {
            o.kernel_wait_us = idle.kernel_wait_us;
        }
        o
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

/// A size of `hw cost` ([`tracecast_pipeline::hw::is_whole_size`]), a bad one named as typed
/// (`18446744073709551615` had been echoed as `18446744073709552000`).
pub(crate) fn whole_size(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if tracecast_pipeline::hw::is_whole_size(v) => Ok(v),
        _ => Err(tracecast_pipeline::hw::WHOLE_SIZE.to_string()),
    }
}

/// A finite number > 0 (a negative one is said to be not positive either, not "not non-negative").
fn positive(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a positive number")),
        Err(_) => Err(format!("{s:?} is not a number")),
    }
}

#[derive(clap::Args)]
pub(crate) struct AnalyzeArgs {
    #[command(flatten)]
    pub(crate) inputs: Inputs,
    #[command(flatten)]
    pub(crate) window: WindowArgs,
    #[command(flatten)]
    pub(crate) idle: IdleArgs,
    /// Write the analysis as JSON (DESIGN §6 keys; `-`: standard output, the summary then on stderr).
    #[arg(long, value_name = "F")]
    pub(crate) json: Option<PathBuf>,
    /// Write the breakdown, steps, collectives, kernels, dimensions and stragglers tables as CSV into DIR.
    #[arg(long, value_name = "DIR")]
    pub(crate) csv: Option<PathBuf>,
    /// Write the same tables as Parquet into DIR.
    #[arg(long, value_name = "DIR")]
    pub(crate) parquet: Option<PathBuf>,
    /// Draw the per-rank breakdown of each job (SVG and PNG) into DIR.
    #[arg(long, value_name = "DIR")]
    pub(crate) plots: Option<PathBuf>,
    /// GPUs of the whole job, to extrapolate GPU-hours (with --job-hours).
    #[arg(long, value_name = "G", requires = "job_hours", value_parser = positive, allow_negative_numbers = true)]
    pub(crate) job_gpus: Option<f64>,
    /// Wall-clock hours of the whole job (with --job-gpus).
    #[arg(long, value_name = "H", requires = "job_gpus", value_parser = positive, allow_negative_numbers = true)]
    pub(crate) job_hours: Option<f64>,
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
pub(crate) struct CalibrateArgs {
    #[command(flatten)]
    pub(crate) inputs: Inputs,
    /// Profile to write (JSON). With traces of several GPUs, one file per device: OUT with the GPU id before `.json`.
    #[arg(long, value_name = "PROFILE.json")]
    pub(crate) out: PathBuf,
    /// Draw every fit (measured points and fitted curve, SVG and PNG) into DIR.
    #[arg(long, value_name = "DIR")]
    pub(crate) plots: Option<PathBuf>,
    /// Also write a MAD-Max system configuration with the fitted utilization factors.
    #[arg(long, value_name = "F")]
    pub(crate) madmax_system: Option<PathBuf>,
    /// Nodes of the MAD-Max system configuration (with --madmax-system).
    #[arg(long, default_value_t = 1, requires = "madmax_system", value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub(crate) nodes: u32,
}

/// What a replay changes from the measured run: the flags `replay` and
/// `report` share.
#[derive(clap::Args)]
pub(crate) struct WhatIfArgs {
    /// Speed-ups, e.g. `compute=2,memory=1.5,link=2` (2 = twice as fast): `compute` every compute kernel
    /// (GEMMs, attention, elementwise and the rest), `memory` copies and sets, `link` communication; the GEMMs
    /// alone: `--target --profile` with the profile's `table_corrections` gemm `ratio` set (not its η).
    #[arg(long, value_name = "K=V,...")]
    pub(crate) scale: Option<String>,
    /// Link α-β overrides: `alpha=US,busbw=GBPS[,inter-alpha=US,inter-busbw=GBPS]` (alpha not given: 0 µs); each collective
    /// with a known size and group then takes α + bus factor × bytes / busbw (nccl-tests convention; `--scale link=K` speeds that up K×).
    #[arg(long, value_name = "K=V,...")]
    pub(crate) link: Option<String>,
    /// Data-parallel scale-out: collectives over the whole job run over N ranks (bus factor and
    /// intra/inter-node bandwidth from the hardware catalog follow); 1 to 2^20.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(tracecast_replay::scenario::MAX_WORLD_SIZE)), allow_negative_numbers = true)]
    pub(crate) world_size: Option<u32>,
    /// Project onto this GPU (catalog id): compute kernels are re-costed from their ops' work.
    #[arg(long, value_name = "GPU")]
    pub(crate) target: Option<String>,
    /// Calibration profile of the target GPU (`tracecast calibrate` on traces measured there; default: its
    /// shipped profile).
    #[arg(long, value_name = "P.json", requires = "target")]
    pub(crate) profile: Option<PathBuf>,
    /// Calibration profile of the GPU the traces ran on, for `--target` (default: calibrated on the traces themselves).
    #[arg(long, value_name = "P.json", requires = "target")]
    pub(crate) source_profile: Option<PathBuf>,
    /// Your own measurements for the pricing layer (a GEMM sweep, nccl-tests, … in the formats README describes; repeatable).
    #[arg(long, value_name = "FILE.csv")]
    pub(crate) measurements: Vec<PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct ReplayArgs {
    #[command(flatten)]
    pub(crate) inputs: Inputs,
    #[command(flatten)]
    pub(crate) window: WindowArgs,
    #[command(flatten)]
    pub(crate) what_if: WhatIfArgs,
    /// Write the replay as JSON (`-`: standard output, the summary then on stderr).
    #[arg(long, value_name = "F")]
    pub(crate) json: Option<PathBuf>,
    /// Write the replayed timeline as Chrome-trace JSON for ui.perfetto.dev (gzip when F ends in .gz);
    /// with several jobs, the later ones beside it (t.json.gz → t.job2.json.gz, …, each named).
    #[arg(long, value_name = "F")]
    pub(crate) perfetto: Option<PathBuf>,
    /// A what-if beside the others in one table of speed-ups (repeatable), `NAME:K=V,...`: `compute`,
    /// `memory`, `link` (speed-ups, as --scale), `world-size` (as --world-size), `alpha`, `busbw`,
    /// `inter-alpha`, `inter-busbw` (as --link; α-β keys need busbw, here or in --link). --scale, --link, --world-size and
    /// --target apply to every scenario and the keys a scenario names replace theirs. Each job is read
    /// whole (as with --perfetto) and replayed once per scenario, after an identity replay ("measured").
    #[arg(long = "what-if", value_name = "NAME:K=V,...", action = clap::ArgAction::Append)]
    pub(crate) scenarios: Vec<String>,
}

/// `tracecast report`: its what-if flags are `replay`'s, shown beside the measured run.
#[derive(clap::Args)]
pub(crate) struct ReportArgs {
    #[command(flatten)]
    pub(crate) inputs: Inputs,
    #[command(flatten)]
    pub(crate) window: WindowArgs,
    #[command(flatten)]
    pub(crate) idle: IdleArgs,
    /// The HTML file to write.
    #[arg(long, value_name = "report.html")]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    pub(crate) what_if: WhatIfArgs,
    /// GPUs of the whole job, to state its GPU-hours (with --job-hours).
    #[arg(long, value_name = "G", requires = "job_hours", value_parser = positive, allow_negative_numbers = true)]
    pub(crate) job_gpus: Option<f64>,
    /// Wall-clock hours of the whole job (with --job-gpus).
    #[arg(long, value_name = "H", requires = "job_gpus", value_parser = positive, allow_negative_numbers = true)]
    pub(crate) job_hours: Option<f64>,
    /// Also write every chart of the page as SVG and PNG files into DIR.
    #[arg(long, value_name = "DIR")]
    pub(crate) png: Option<PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct DiffArgs {
    /// Run A (before): a trace file or a directory of per-rank files.
    pub(crate) a: PathBuf,
    /// Run B (after).
    pub(crate) b: PathBuf,
    #[command(flatten)]
    pub(crate) read: ReadArgs,
    #[command(flatten)]
    pub(crate) window: WindowArgs,
    /// Write the comparison as JSON (`-`: standard output, the summary then on stderr).
    #[arg(long, value_name = "F")]
    pub(crate) json: Option<PathBuf>,
    /// Kernels listed in the per-kernel comparison.
    #[arg(long, default_value_t = 25, allow_negative_numbers = true)]
    pub(crate) top: usize,
    /// Exit 1 when B regresses past a bound, for CI: `step>+3%,exposed>+5%` (metrics step, busy,
    /// idle, exposed, comm, compute; bounds in % of A).
    #[arg(long, value_name = "GATES")]
    pub(crate) fail_if: Option<String>,
}

#[derive(clap::Args)]
pub(crate) struct SynthArgs {
    /// Output directory (created).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// Ranks.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true)]
    pub(crate) ranks: u32,
    /// Training steps per rank.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true)]
    pub(crate) steps: u32,
    /// Transformer-like layers per step.
    #[arg(long, default_value_t = 8, allow_negative_numbers = true)]
    pub(crate) layers: u32,
    /// Random seed (noise and rank skew).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub(crate) seed: u64,
    /// True all-reduce bus bandwidth, GB/s.
    #[arg(long, default_value_t = 150.0, conflicts_with = "profile", allow_negative_numbers = true)]
    pub(crate) busbw_gbps: f64,
    /// True all-reduce latency α, µs.
    #[arg(long, default_value_t = 15.0, conflicts_with = "profile", allow_negative_numbers = true)]
    pub(crate) alpha_us: f64,
    /// True GEMM efficiency η.
    #[arg(long, default_value_t = 0.70, conflicts_with = "profile", allow_negative_numbers = true)]
    pub(crate) gemm_efficiency: f64,
    /// Write plain JSON instead of gzip.
    #[arg(long)]
    pub(crate) plain: bool,
    /// Layers shaped like this model (a preset or MAD-Max model file): its per-layer GEMMs.
    #[arg(long, value_name = "NAME|F")]
    pub(crate) model: Option<String>,
    /// Tokens per step and rank (with --model).
    #[arg(long, default_value_t = 4096, requires = "model", allow_negative_numbers = true)]
    pub(crate) tokens: u64,
    /// Take the ground truth from this calibration profile: its GEMM η and t0, HBM η, peaks and link α-β.
    #[arg(long, value_name = "P.json")]
    pub(crate) profile: Option<PathBuf>,
    /// Print nothing on stdout.
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

impl Inputs {
    /// The library's inputs.
    pub(crate) fn inputs(&self) -> tracecast_pipeline::inputs::Inputs {
        let mut o = tracecast_pipeline::inputs::Inputs::default();
        (o.paths, o.each, o.read) = (self.paths.clone(), self.each, self.read.trace_options());
        o
    }
}

impl IngestArgs {
    pub(crate) fn into_options(self) -> ingest::Options {
        let mut o = ingest::Options::default();
        (o.paths, o.out, o.read, o.window) =
            (self.paths, self.out, self.read.trace_options(), self.window.window_options(Some(&self.idle)));
        o
    }
}

impl CalibrateArgs {
    pub(crate) fn into_options(self) -> calibrate::Options {
        let mut o = calibrate::Options::default();
        (o.inputs, o.out, o.plots, o.madmax_system, o.nodes) = (self.inputs.inputs(), self.out, self.plots, self.madmax_system, self.nodes);
        o
    }
}

impl SynthArgs {
    pub(crate) fn into_options(self) -> synth::Options {
        let mut o = synth::Options::default();
        (o.out, o.ranks, o.steps, o.layers, o.seed) = (self.out, self.ranks, self.steps, self.layers, self.seed);
        (o.busbw_gbps, o.alpha_us, o.gemm_efficiency, o.plain) = (self.busbw_gbps, self.alpha_us, self.gemm_efficiency, self.plain);
        (o.model, o.tokens, o.profile, o.quiet) = (self.model, self.tokens, self.profile, self.quiet);
        o
    }
}

impl AnalyzeArgs {
    pub(crate) fn into_options(self) -> analyze::Options {
        let mut o = analyze::Options::default();
        (o.inputs, o.window, o.json, o.csv, o.parquet) =
            (self.inputs.inputs(), self.window.window_options(Some(&self.idle)), self.json, self.csv, self.parquet);
        (o.plots, o.job_gpus, o.job_hours) = (self.plots, self.job_gpus, self.job_hours);
        o
    }
}

impl WhatIfArgs {
    fn options(self) -> replay::WhatIf {
        let mut o = replay::WhatIf::default();
        (o.scale, o.link, o.world_size) = (self.scale, self.link, self.world_size);
        (o.target, o.profile, o.source_profile, o.measurements) = (self.target, self.profile, self.source_profile, self.measurements);
        o
    }
}

impl ReplayArgs {
    pub(crate) fn into_options(self) -> replay::Options {
        let mut o = replay::Options::default();
        (o.inputs, o.what_if, o.scenarios) = (self.inputs.inputs(), self.what_if.options(), self.scenarios);
        (o.window, o.json, o.perfetto) = (self.window.window_options(None), self.json, self.perfetto);
        o
    }
}

impl ReportArgs {
    pub(crate) fn into_options(self) -> report::Options {
        let mut o = report::Options::default();
        let window = self.window.window_options(Some(&self.idle));
        (o.inputs, o.window, o.out, o.what_if) = (self.inputs.inputs(), window, self.out, self.what_if.options());
        (o.job_gpus, o.job_hours, o.png) = (self.job_gpus, self.job_hours, self.png);
        o
    }
}

impl DiffArgs {
    pub(crate) fn into_options(self) -> diff::Options {
        let mut o = diff::Options::default();
        (o.a, o.b, o.read, o.window) = (self.a, self.b, self.read.trace_options(), self.window.window_options(None));
        (o.json, o.top, o.fail_if) = (self.json, self.top, self.fail_if);
        o
    }
}
