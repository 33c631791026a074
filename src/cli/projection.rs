//! The flags of the commands that project models: `project`, `search` and `validate`.

use std::path::PathBuf;

use clap::ValueEnum;
use tracecast_pipeline::{project, search, validate};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AssumptionsArg {
    /// tracecast's own model: calibrated efficiencies, α-β collectives, attention, SwiGLU, memory.
    Tracecast,
    /// MAD-Max's simplifications (reproduces its printed outputs; needs --madmax files).
    Madmax,
}

/// The shape of an inference task, as `project` and `search` take it.
#[derive(clap::Args)]
pub(crate) struct InferenceArgs {
    /// Sequences per replica (prefill and decode; default 1). A training step's batch is the plan's `gbs` and `mb`.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub(crate) batch: Option<u32>,
    /// Prompt tokens (prefill; default: the model's sequence length).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub(crate) prompt: Option<u32>,
    /// Context tokens whose KV cache each decode step reads (default: the model's sequence length).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub(crate) context: Option<u32>,
}

/// The files the models are priced with beyond the built-in catalog and
/// measurements: one definition for `project`, `search` and `validate`.
#[derive(clap::Args)]
pub(crate) struct PricedWith {
    /// Extra hardware catalog file (TOML, the format of the built-in catalog; repeatable).
    #[arg(long, value_name = "FILE")]
    pub(crate) hw: Vec<PathBuf>,
    /// Your own measurements for the pricing layer (a GEMM sweep, nccl-tests, … in the formats README describes; repeatable).
    #[arg(long, value_name = "FILE.csv")]
    pub(crate) measurements: Vec<PathBuf>,
}

/// What the system differs in from its catalog entry (the fields of a runs file's `system`).
#[derive(clap::Args, Clone, Copy)]
pub(crate) struct SystemArgs {
    /// GPUs per node (default: that of your --measurements across nodes, else the GPU's node preset, else 8).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub(crate) gpus_per_node: Option<u32>,
    /// Network bandwidth per GPU in GB/s (default: the node preset's NICs), e.g. 25 for one 200 Gb/s NIC per GPU.
    #[arg(long, value_name = "GB/s", allow_negative_numbers = true)]
    pub(crate) nic_gbps_per_gpu: Option<f64>,
    /// HBM capacity per GPU in GB (a variant of the catalog GPU).
    #[arg(long, value_name = "GB", allow_negative_numbers = true)]
    pub(crate) hbm_gb: Option<f64>,
    /// HBM bandwidth per GPU in GB/s (a variant of the catalog GPU).
    #[arg(long, value_name = "GB/s", allow_negative_numbers = true)]
    pub(crate) hbm_gbps: Option<f64>,
}

impl SystemArgs {
    /// The cluster's overrides.
    pub(crate) fn overrides(self) -> tracecast_replay::workload::llm::SystemOverrides {
        tracecast_replay::workload::llm::SystemOverrides {
            gpus_per_node: self.gpus_per_node,
            nic_gbps_per_gpu: self.nic_gbps_per_gpu,
            hbm_gb: self.hbm_gb,
            hbm_gbps: self.hbm_gbps,
        }
    }
}

#[derive(clap::Args)]
pub(crate) struct ProjectArgs {
    /// Model: a preset (llama2-7b, llama2-70b, llama3-70b, gpt3-175b, mixtral-8x7b, qwen3-30b-a3b, …), a model file
    /// (JSON: `layers, hidden, heads, kv_heads, ffn, vocab, seq, activation` gelu|swiglu, and optional keys as in a runs
    /// file — README; or `preset, seq`) or a MAD-Max model file.
    #[arg(long, value_name = "NAME|F")]
    pub(crate) model: Option<String>,
    /// System: a catalog GPU id or node preset id (with --gpus) or a MAD-Max system file.
    #[arg(long, value_name = "GPU|F")]
    pub(crate) system: Option<String>,
    /// GPUs of the system.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub(crate) gpus: Option<u32>,
    #[command(flatten)]
    pub(crate) system_overrides: SystemArgs,
    #[command(flatten)]
    pub(crate) priced_with: PricedWith,
    /// train, prefill, decode, or a MAD-Max task file.
    #[arg(long, value_name = "TASK|F", default_value = "train")]
    pub(crate) task: String,
    #[command(flatten)]
    pub(crate) inference: InferenceArgs,
    /// Parallelization: `tp=8,pp=4,fsdp=64`, `tp=8,dp=16,zero=1,mb=2,gbs=1024,sp,recompute`, `dp=8,ep=8` (experts over the data-parallel ranks).
    #[arg(long, value_name = "SPEC")]
    pub(crate) parallel: Option<String>,
    /// Calibration profile of the GPU (`tracecast calibrate`): its efficiencies and link fits.
    #[arg(long, value_name = "P.json")]
    pub(crate) profile: Option<PathBuf>,
    /// MAD-Max model, system and task files.
    #[arg(long, num_args = 3, value_names = ["MODEL", "SYSTEM", "TASK"])]
    pub(crate) madmax: Option<Vec<PathBuf>>,
    /// DLRM embedding sharding: tw (table-wise), rw (row-wise), cw (column-wise), dp (replicated).
    #[arg(long, value_name = "tw|rw|cw|dp")]
    pub(crate) sharding: Option<String>,
    /// Whose assumptions.
    #[arg(long, value_enum, default_value = "tracecast")]
    pub(crate) assumptions: AssumptionsArg,
    /// Write the projection as JSON (DESIGN §6 keys; `-`: standard output, the summary then on stderr).
    #[arg(long, value_name = "F")]
    pub(crate) json: Option<PathBuf>,
    /// Write the simulated lanes for ui.perfetto.dev (tracecast's transformer model: one microbatch on one pipeline stage, a note says how much of the iteration)
    #[arg(long, value_name = "F")]
    pub(crate) perfetto: Option<PathBuf>,
    /// A measured training run of your stack (a runs file, `validate`'s format; `:ID` names the run, needless when the
    /// file has one): projected onto --system and --gpus (default: its own) with its model, plan (unless --parallel),
    /// precision and framework, and the time it spent beyond what the model prices carried unchanged (host dispatch
    /// and other costs no GPU shortens).
    #[arg(long, value_name = "RUNS.json:ID")]
    pub(crate) from: Option<String>,
    /// Print nothing on stdout.
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

#[derive(clap::Args)]
pub(crate) struct SearchArgs {
    /// Model: a preset, a model file (the fields of a runs file's `model`) or a MAD-Max model file.
    #[arg(long, value_name = "NAME|F")]
    pub(crate) model: String,
    /// System: a catalog GPU id, a node preset id or a MAD-Max system file.
    #[arg(long, value_name = "GPU|F")]
    pub(crate) system: String,
    /// GPUs.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub(crate) gpus: Option<u32>,
    #[command(flatten)]
    pub(crate) system_overrides: SystemArgs,
    #[command(flatten)]
    pub(crate) priced_with: PricedWith,
    /// train, prefill or decode.
    #[arg(long, default_value = "train")]
    pub(crate) task: String,
    /// Sequences per iteration over the system (training; default: one per GPU).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub(crate) gbs: Option<u32>,
    #[command(flatten)]
    pub(crate) inference: InferenceArgs,
    /// Calibration profile of the GPU.
    #[arg(long, value_name = "P.json")]
    pub(crate) profile: Option<PathBuf>,
    /// Plans to print.
    #[arg(long, default_value_t = 10, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), allow_negative_numbers = true)]
    pub(crate) top: usize,
    /// Write the ranked plans (ten times --top of them), the baseline and the front as JSON (`-`: standard output).
    #[arg(long, value_name = "F")]
    pub(crate) json: Option<PathBuf>,
    /// Draw the Pareto front of throughput against GPU count into DIR (SVG and PNG).
    #[arg(long, value_name = "DIR")]
    pub(crate) plots: Option<PathBuf>,
    /// Plan settings every candidate keeps, your stack's: `attention=fa2,bucket=76,tp_overlap`; a degree, `mb`, `sp` or `recompute` given is pinned (`pp=1` where your stack has no pipeline), the rest the search chooses.
    #[arg(long, value_name = "SETTINGS")]
    pub(crate) with: Option<String>,
    /// Print nothing on stdout.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// Rank by `throughput` or by `latency`: the step's time (decode: per output token; prefill: to the first token).
    #[arg(long, value_parser = ["throughput", "latency"], default_value = "throughput")]
    pub(crate) objective: String,
}

#[derive(clap::Args)]
pub(crate) struct ValidateArgs {
    /// Runs file (`shared/validation/published-runs.json` format: id, model, system, plan, measured).
    pub(crate) runs: PathBuf,
    /// Calibration profile of a GPU of the runs (repeatable; each prices the runs on its GPU).
    #[arg(long, value_name = "P.json")]
    pub(crate) profile: Vec<PathBuf>,
    /// Write the comparison as JSON (`-`: standard output, the summary then on stderr).
    #[arg(long, value_name = "F")]
    pub(crate) json: Option<PathBuf>,
    /// Fit the model's free parameter (the GEMM table correction per GPU) to the runs, print the
    /// leave-one-run-out error, and write the fitted profile(s) here (several GPUs: one file each, the GPU id before `.json`).
    #[arg(long, value_name = "OUT.json")]
    pub(crate) fit: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) priced_with: PricedWith,
    /// Print nothing on stdout.
    #[arg(short, long)]
    pub(crate) quiet: bool,
}

impl InferenceArgs {
    pub(crate) fn options(&self) -> project::Inference {
        let mut o = project::Inference::default();
        (o.batch, o.prompt, o.context) = (self.batch, self.prompt, self.context);
        o
    }
}

impl ProjectArgs {
    pub(crate) fn into_options(self) -> project::Options {
        let mut o = project::Options::default();
        (o.model, o.system, o.gpus, o.system_overrides) = (self.model, self.system, self.gpus, self.system_overrides.overrides());
        (o.measurements, o.hw) = (self.priced_with.measurements, self.priced_with.hw);
        (o.task, o.inference, o.parallel) = (self.task, self.inference.options(), self.parallel);
        o.madmax = match self.madmax.as_deref() {
            Some([model, system, task]) => Some(project::MadmaxFiles { model: model.clone(), system: system.clone(), task: task.clone() }),
            _ => None,
        };
        o.assumptions = match self.assumptions {
            AssumptionsArg::Tracecast => project::Assumptions::Tracecast,
            AssumptionsArg::Madmax => project::Assumptions::Madmax,
        };
        (o.profile, o.sharding, o.json, o.perfetto, o.quiet) = (self.profile, self.sharding, self.json, self.perfetto, self.quiet);
        o.from = self.from;
        o
    }
}

impl SearchArgs {
    pub(crate) fn into_options(self) -> search::Options {
        let mut o = search::Options::default();
        (o.model, o.system, o.gpus, o.system_overrides) = (self.model, self.system, self.gpus, self.system_overrides.overrides());
        (o.measurements, o.hw) = (self.priced_with.measurements, self.priced_with.hw);
        (o.task, o.gbs, o.inference, o.profile) = (self.task, self.gbs, self.inference.options(), self.profile);
        (o.top, o.json, o.plots, o.quiet, o.with, o.objective) = (self.top, self.json, self.plots, self.quiet, self.with, self.objective);
        o
    }
}

impl ValidateArgs {
    pub(crate) fn into_options(self) -> validate::Options {
        let mut o = validate::Options::default();
        (o.measurements, o.hw) = (self.priced_with.measurements, self.priced_with.hw);
        (o.runs, o.profile, o.json, o.fit, o.quiet) = (self.runs, self.profile, self.json, self.fit, self.quiet);
        o
    }
}
