//! The flags of `hw`: the catalog and the price of one operation.

use std::path::PathBuf;

use clap::Subcommand;
use tracecast_pipeline::hw;

#[derive(clap::Args)]
pub(crate) struct HwArgs {
    #[command(subcommand)]
    pub(crate) command: HwCommand,
    /// Extra hardware catalog file (TOML).
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) hw: Vec<PathBuf>,
}

#[derive(Subcommand)]
pub(crate) enum HwCommand {
    /// Every GPU and node preset.
    List,
    /// One GPU with its sources, or a node preset and its GPU.
    Show {
        /// GPU or node id, e.g. `h100-sxm`, `dgx-h100`.
        id: String,
    },
    /// Prices one operation the way projections do: its time, achieved rate, rule and whether it extrapolates.
    Cost(Box<CostArgs>),
}

#[derive(clap::Args)]
pub(crate) struct CostArgs {
    /// GPU id, e.g. `h100-sxm`.
    pub(crate) gpu: String,
    /// `gemm`, `attention`, or a collective: `all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `broadcast`,
    /// `reduce`, `send_recv` (NCCL and c10d spellings such as `allreduce` are read too).
    pub(crate) op: String,
    /// GEMM rows.
    #[arg(long, value_parser = super::whole_size, allow_negative_numbers = true)]
    pub(crate) m: Option<f64>,
    /// GEMM columns.
    #[arg(long, value_parser = super::whole_size, allow_negative_numbers = true)]
    pub(crate) n: Option<f64>,
    /// GEMM reduction dimension.
    #[arg(long, value_parser = super::whole_size, allow_negative_numbers = true)]
    pub(crate) k: Option<f64>,
    /// Independent GEMMs, or the attention batch [default: 1]
    #[arg(long, value_parser = super::whole_size, allow_negative_numbers = true)]
    pub(crate) batch: Option<f64>,
    /// Input type: bf16, fp16, fp8, tf32, fp32 (attention: bf16 or fp16) [default: bf16]
    #[arg(long)]
    pub(crate) dtype: Option<String>,
    /// Attention heads.
    #[arg(long, value_parser = super::whole_size, allow_negative_numbers = true)]
    pub(crate) heads: Option<f64>,
    /// Attention sequence length.
    #[arg(long, value_parser = super::whole_size, allow_negative_numbers = true)]
    pub(crate) seq: Option<f64>,
    /// Attention head dimension.
    #[arg(long, value_parser = super::whole_size, allow_negative_numbers = true)]
    pub(crate) head_dim: Option<f64>,
    /// Causal attention.
    #[arg(long)]
    pub(crate) causal: bool,
    /// Attention forward plus backward.
    #[arg(long)]
    pub(crate) backward: bool,
    /// Attention kernel family (`fa2`, `fa3`, `cudnn`, …; default: the fastest measured).
    #[arg(long)]
    pub(crate) kernel: Option<String>,
    /// Collective size, bytes (nccl-tests' size: the full buffer).
    #[arg(long, value_parser = super::whole_size, allow_negative_numbers = true)]
    pub(crate) bytes: Option<f64>,
    /// GPUs taking part in the collective.
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) gpus: Option<u32>,
    /// GPUs per node (default: that of your --measurements across nodes, else the GPU's node preset, else 8).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), allow_negative_numbers = true)]
    pub(crate) gpus_per_node: Option<u32>,
    /// Network per GPU, GB/s, across nodes (default: the GPU's node preset), as `project`'s flag.
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) nic_gbps_per_gpu: Option<f64>,
    /// Your own measurements (GEMM sweep, nccl-tests, … in the formats README describes; repeatable).
    #[arg(long, value_name = "FILE.csv")]
    pub(crate) measurements: Vec<PathBuf>,
    /// Calibration profile of the GPU: its traces' correction of the GEMM table (default: the GPU's shipped profile, as projections without one).
    #[arg(long, value_name = "P.json")]
    pub(crate) profile: Option<PathBuf>,
    /// Writes `{"time_us", "rule", "extrapolated", …}` here.
    #[arg(long, value_name = "F")]
    pub(crate) json: Option<PathBuf>,
}

impl HwArgs {
    pub(crate) fn into_options(self) -> hw::Options {
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
    pub(crate) fn into_options(self) -> hw::Cost {
        let mut o = hw::Cost::default();
        (o.gpu, o.op, o.m, o.n, o.k, o.batch, o.dtype) = (self.gpu, self.op, self.m, self.n, self.k, self.batch, self.dtype);
        (o.heads, o.seq, o.head_dim, o.causal, o.backward, o.kernel) =
            (self.heads, self.seq, self.head_dim, self.causal, self.backward, self.kernel);
        (o.bytes, o.gpus, o.gpus_per_node, o.measurements, o.profile, o.json) =
            (self.bytes, self.gpus, self.gpus_per_node, self.measurements, self.profile, self.json);
        o.nic_gbps_per_gpu = self.nic_gbps_per_gpu;
        o
    }
}
