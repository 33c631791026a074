//! `tracecast hw`: the hardware catalog (`list`, `show`) and the price of one
//! operation the way projections price it (`cost`).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use tracecast_calibrate::Catalog;
use tracecast_calibrate::pricing::{CollectiveQuery, Operation};

use crate::Outcome;
use crate::calibrate_summary::{write_catalog, write_gpu, write_node, write_quote};
use crate::hardware::{catalog_with, ensure_profile_of, pricing_with};
use crate::output::write_json;

/// What `hw` shows.
#[derive(Debug, Clone, Default)]
pub enum Command {
    /// Every GPU and node preset.
    #[default]
    List,
    /// One GPU (by catalog id) with its sources, or a node preset (`hw list` lists both) and its GPU.
    Show {
        /// The GPU's or the node preset's catalog id.
        id: String,
    },
    /// The price of one operation.
    Cost(Box<Cost>),
}

/// `hw`'s options.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// What to show (default: the list).
    pub command: Command,
    /// Extra hardware catalog files (default: none).
    pub hw: Vec<PathBuf>,
}

/// One operation to price on one GPU (`hw cost`): a GEMM, an attention or a collective.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Cost {
    /// The GPU's catalog id (default: empty, which is refused).
    pub gpu: String,
    /// `gemm`, `attention`, or a collective such as `all_reduce` (default: `gemm`).
    pub op: String,
    /// GEMM rows (default: none; needed by a GEMM).
    pub m: Option<f64>,
    /// GEMM columns (default: none; needed by a GEMM).
    pub n: Option<f64>,
    /// GEMM reduction dimension (default: none; needed by a GEMM).
    pub k: Option<f64>,
    /// Independent GEMMs, or the attention batch (default: none, which is 1).
    pub batch: Option<f64>,
    /// The GEMM's or attention's input type (default: none, which is bf16).
    pub dtype: Option<String>,
    /// Attention heads (default: none; needed by an attention).
    pub heads: Option<f64>,
    /// Attention sequence length (default: none; needed by an attention).
    pub seq: Option<f64>,
    /// Attention head dimension (default: none; needed by an attention).
    pub head_dim: Option<f64>,
    /// Causal attention (default: false).
    pub causal: bool,
    /// Attention forward plus backward (default: false).
    pub backward: bool,
    /// Attention kernel family (default: the fastest measured).
    pub kernel: Option<String>,
    /// Collective size in bytes, the full buffer (default: none; needed by a collective).
    pub bytes: Option<f64>,
    /// GPUs in the collective (default: none; at least 2 needed by a collective).
    pub gpus: Option<u32>,
    /// GPUs per node (default: the rule of [`Catalog::gpus_per_node`]).
    pub gpus_per_node: Option<u32>,
    /// Network per GPU across nodes, GB/s (default: the GPU's node preset).
    pub nic_gbps_per_gpu: Option<f64>,
    /// The user's measurements for the pricing layer (default: none).
    pub measurements: Vec<PathBuf>,
    /// Calibration profile of the GPU: its traces' correction of the GEMM table (default: the GPU's shipped profile, as projections take it).
    pub profile: Option<PathBuf>,
    /// Write the price as JSON here (default: none).
    pub json: Option<PathBuf>,
}

impl Default for Cost {
    fn default() -> Self {
        Cost {
            gpu: String::new(),
            op: "gemm".into(),
            m: None,
            n: None,
            k: None,
            batch: None,
            dtype: None,
            heads: None,
            seq: None,
            head_dim: None,
            causal: false,
            backward: false,
            kernel: None,
            bytes: None,
            gpus: None,
            gpus_per_node: None,
            nic_gbps_per_gpu: None,
            measurements: Vec::new(),
            profile: None,
            json: None,
        }
    }
}

/// What a size of `hw cost` is (elements, heads, bytes): a whole number below 2^53, exact in an
/// f64 (every number from 2^53 up parses to one at least 2^53, so 2^53 + 1, rounded down, is
/// refused too).
pub const WHOLE_SIZE: &str = "a whole number from 1 to 2^53 − 1";

/// Whether `x` is a size of `hw cost` ([`WHOLE_SIZE`]).
pub fn is_whole_size(x: f64) -> bool {
    x.is_finite() && x >= 1.0 && x.fract() == 0.0 && x < 2f64.powi(53)
}

impl Cost {
    /// The operation the flags describe; a missing flag is named.
    pub fn operation(&self, catalog: &Catalog) -> Result<Operation> {
        use tracecast_calibrate::catalog::Dtype;
        use tracecast_calibrate::pricing::{AttentionShape, GemmShape};
        let need = |v: Option<f64>, flag: &str| match v {
            None => Err(anyhow::anyhow!("hw cost {}: --{flag} is required", self.op)),
            Some(x) if is_whole_size(x) => Ok(x),
            Some(x) => Err(anyhow::anyhow!("hw cost {}: --{flag} {x}: {WHOLE_SIZE}", self.op)),
        };
        // The operation is named first (a mistyped one is not taken for a collective); then a flag
        // of another kind of operation is refused, not ignored.
        let collective = match self.op.as_str() {
            "gemm" | "attention" => None,
            other => Some(
                tracecast_ingest::collective::Collective::from_user_name(other).filter(|c| c.bus_factor_in(Some(2)).is_some()).ok_or_else(
                    || anyhow::anyhow!("hw cost: {other:?} is not gemm, attention, all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce or send_recv"),
                )?,
            ),
        };
        let kind = if collective.is_some() { "collective" } else { self.op.as_str() };
        let (batch, dtype) = (self.batch.unwrap_or(1.0), self.dtype.as_deref().unwrap_or("bf16"));
        let foreign: Vec<&str> = [
            ("m", self.m.is_some(), "gemm"),
            ("n", self.n.is_some(), "gemm"),
            ("k", self.k.is_some(), "gemm"),
            ("heads", self.heads.is_some(), "attention"),
            ("seq", self.seq.is_some(), "attention"),
            ("head-dim", self.head_dim.is_some(), "attention"),
            ("causal", self.causal, "attention"),
            ("backward", self.backward, "attention"),
            ("kernel", self.kernel.is_some(), "attention"),
            ("bytes", self.bytes.is_some(), "collective"),
            ("gpus", self.gpus.is_some(), "collective"),
            ("gpus-per-node", self.gpus_per_node.is_some(), "collective"),
            ("nic-gbps-per-gpu", self.nic_gbps_per_gpu.is_some(), "collective"),
            ("batch", self.batch.is_some(), if kind == "collective" { "gemm" } else { kind }),
            ("dtype", self.dtype.is_some(), if kind == "collective" { "gemm" } else { kind }),
        ]
        .into_iter()
        .filter(|(_, given, of)| *given && *of != kind)
        .map(|(flag, _, _)| flag)
        .collect();
        let a_kind = match kind {
            "gemm" => "a GEMM",
            "attention" => "an attention",
            _ => "a collective",
        };
        anyhow::ensure!(
            foreign.is_empty(),
            "hw cost {}: --{} {} not apply to {a_kind}",
            self.op,
            foreign.join(", --"),
            if foreign.len() == 1 { "does" } else { "do" }
        );
        Ok(match self.op.as_str() {
            "gemm" => {
                let dtype = Dtype::from_name(dtype)
                    .ok_or_else(|| anyhow::anyhow!("--dtype {dtype:?}: one of fp64, fp32, tf32, bf16, fp16, fp8, int8"))?;
                Operation::Gemm(GemmShape {
                    batch: need(Some(batch), "batch")?,
                    m: need(self.m, "m")?,
                    n: need(self.n, "n")?,
                    k: need(self.k, "k")?,
                    dtype,
                })
            }
            "attention" => {
                // Attention is priced from 16-bit measurements (FlashAttention's charts, Azure's
                // suite, traces): the evidence has no FP8 attention kernel to price one.
                match Dtype::from_name(dtype) {
                    Some(Dtype::Bf16 | Dtype::Fp16) => {}
                    Some(_) => {
                        anyhow::bail!("hw cost attention --dtype {dtype}: attention is priced from 16-bit (bf16, fp16) measurements only")
                    }
                    None => anyhow::bail!("--dtype {dtype:?}: one of bf16, fp16 for attention"),
                }
                Operation::Attention(
                    AttentionShape {
                        batch: need(Some(batch), "batch")?,
                        heads: need(self.heads, "heads")?,
                        seq: need(self.seq, "seq")?,
                        head_dim: need(self.head_dim, "head-dim")?,
                        causal: self.causal,
                        backward: self.backward,
                    },
                    self.kernel.clone(),
                )
            }
            other => {
                // (Named above: an unknown operation was refused there.)
                let Some(collective) = collective else { anyhow::bail!("hw cost: {other:?} is not an operation it prices") };
                let gpus = match self.gpus {
                    None => anyhow::bail!("hw cost {other}: --gpus (at least 2) is required"),
                    Some(n) if n < 2 => anyhow::bail!("hw cost {other}: --gpus {n}: a collective spans at least 2 GPUs"),
                    // A point-to-point transfer joins two GPUs: more had been priced as if it were two.
                    Some(n) if n != 2 && collective == tracecast_ingest::collective::Collective::SendRecv => anyhow::bail!(
                        "hw cost send_recv: --gpus {n}: a transfer joins two GPUs (--gpus 2; with --gpus-per-node 1 across two nodes)"
                    ),
                    Some(n) => n,
                };
                let gpus_per_node = catalog.gpus_per_node(Some(&self.gpu), self.gpus_per_node);
                let nic_gbps_per_gpu = match self.nic_gbps_per_gpu {
                    Some(nic) => Some(
                        tracecast_calibrate::catalog::nic_gbps_per_gpu_given(nic).map_err(|e| anyhow::anyhow!("--nic-gbps-per-gpu {e}"))?,
                    ),
                    None => None,
                };
                Operation::Collective(CollectiveQuery {
                    collective,
                    bytes: need(self.bytes, "bytes")?,
                    gpus,
                    gpus_per_node,
                    nic_gbps_per_gpu,
                })
            }
        })
    }
}

/// Writes the list, one GPU or one price.
pub fn run(args: &Options, out: &mut dyn Write) -> Result<Outcome> {
    let catalog = catalog_with(&args.hw)?;
    match &args.command {
        Command::List => write_catalog(out, &catalog)?,
        // A node preset `hw list` lists is shown too (it had been "unknown hardware").
        Command::Show { id } => match catalog.gpu(id) {
            Err(_) if let Ok(node) = catalog.node(id) => write_node(out, node, &catalog)?,
            gpu => write_gpu(out, gpu?, &catalog)?,
        },
        Command::Cost(c) => {
            let gpu = catalog.gpu(&c.gpu)?.clone();
            let mut op = c.operation(&catalog)?;
            let pricing = pricing_with(&catalog, &c.measurements)?;
            // The user's measurements across nodes describe their cluster: without
            // --gpus-per-node its node size, not the catalog's (Polaris' 4 A100s a node had been
            // priced at DGX's 8 by another system's curves, their own left unused in silence).
            let mut node_note = None;
            if let Operation::Collective(q) = &mut op
                && let Some((theirs, sources)) = pricing.measurements.users_gpus_per_node(&gpu)
                // In one node at either size, the node size changes nothing: not said.
                && q.gpus > theirs.min(q.gpus_per_node)
            {
                let sources = sources.join(", ");
                node_note = match c.gpus_per_node {
                    None if q.gpus_per_node != theirs => {
                        q.gpus_per_node = theirs;
                        Some(format!(
                            "{theirs} GPUs per node, as your measurements ({sources}) were taken (--gpus-per-node prices another node size)"
                        ))
                    }
                    Some(given) if given != theirs => Some(format!(
                        "your measurements ({sources}) were taken at {theirs} GPUs per node, not the {given} asked: they price no curve across nodes here"
                    )),
                    _ => None,
                };
            }
            let (profile, lent_by) = match &c.profile {
                Some(p) => {
                    let model = tracecast_calibrate::DeviceModel::from_profile_file(p, &pricing.catalog)?;
                    ensure_profile_of(&model, &gpu.id, p)?;
                    (model.profile, None)
                }
                // As projections price the GPU without a profile given: its shipped profile's
                // correction of the tables (B200 × 0.79), which had been left out here — or, for a
                // GPU without traces, the most similar traced GPU's, named.
                None => {
                    tracecast_calibrate::shipped::for_gpu(&gpu, &pricing.catalog).map_or((None, None), |m| (m.profile, m.fits_of_another))
                }
            };
            let mut quote = pricing.quote(&gpu, &op, profile.as_ref(), lent_by.as_deref()).map_err(anyhow::Error::msg)?;
            if let Some(note) = node_note {
                quote.basis = format!("{}; {note}", quote.basis);
            }
            write_quote(out, &quote)?;
            if let Some(path) = &c.json {
                write_json(path, &quote)?;
            }
        }
    }
    Ok(Outcome::Done)
}
