//! tracecast's own transformer model: what MAD-Max's LLM model leaves out —
//! grouped-query attention, SwiGLU, attention's quadratic term (flash
//! attention), norms and activations as HBM-bound work, a fixed cost per
//! kernel, α-β collectives placed on the intra- or inter-node links (and
//! hierarchical when a group spans nodes), pipeline parallelism with 1F1B
//! bubbles, mixture-of-experts all-to-alls, ZeRO stages, memory per GPU, and
//! inference prefill and decode. Efficiencies and link parameters come from a
//! calibration profile when one is given, else from stated defaults.
//!
//! Placement follows Megatron-LM: tensor-parallel ranks are adjacent (inside a
//! node), data-parallel ranks next, pipeline stages outermost.

use serde::{Deserialize, Serialize};

use tracecast_calibrate::DeviceModel;
use tracecast_calibrate::catalog::{Catalog, Dtype};
use tracecast_calibrate::pricing::{CollectiveQuery, TierFit};
use tracecast_calibrate::work::KernelClass;
use tracecast_ingest::collective::Collective;

use super::madmax::{ModelConfig, SystemConfig, TaskConfig};
use super::{IterationTimes, Key, Label, Lane, Lanes, Memory, OpKind, Projection, Timeline};

/// A decoder-only transformer (LLM), dense or mixture-of-experts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transformer {
    /// Name.
    pub name: String,
    /// Layers.
    pub layers: usize,
    /// Model width d.
    pub hidden: f64,
    /// Attention heads.
    pub heads: f64,
    /// Key/value heads (grouped-query attention; = heads without GQA).
    pub kv_heads: f64,
    /// Width of one attention head (`hidden / heads` unless the model says
    /// otherwise: Qwen3's are 128 wide whatever its width).
    pub head_dim: f64,
    /// FFN width (of one expert in a mixture of experts).
    pub ffn: f64,
    /// Vocabulary.
    pub vocab: f64,
    /// Training sequence length.
    pub seq: f64,
    /// SwiGLU FFN (three matrices) instead of two.
    pub swiglu: bool,
    /// Experts per MoE layer (1 for a dense model).
    pub experts: f64,
    /// Experts each token is routed to.
    pub top_k: f64,
    /// Bytes per parameter and activation (2 for BF16).
    pub bytes: f64,
    /// Causal attention (decoders); a ViT attends to every patch.
    pub causal: bool,
    /// The input embedding and the output head share one matrix.
    pub tied_embeddings: bool,
    /// Sliding-window attention: the window in tokens (0: every layer attends to the whole causal context).
    pub window: f64,
    /// Layers whose attention is windowed (GPT-OSS: every second).
    pub windowed_layers: usize,
    /// Experts every token runs through besides its `top_k` routed ones, each `ffn` wide (DeepSeek: 1).
    pub shared_experts: f64,
    /// Multi-head latent attention (DeepSeek): low-rank query and key/value projections.
    pub mla: Option<Mla>,
    /// Of a mixture of experts, the first layers whose MLP is one dense FFN of
    /// `dense_ffn` instead of experts (DeepSeek-V3: 3, Kimi-K2: 1; 0: none).
    pub dense_layers: usize,
    /// Width of those layers' dense FFN.
    pub dense_ffn: f64,
}

/// Multi-head latent attention's projections (DeepSeek-V2/V3): the query
/// through a rank-`q_lora` bottleneck, keys and values from one shared latent of
/// `kv_lora` plus a `qk_rope`-wide positional key; per head a `qk_nope + qk_rope`
/// query/key width and a `v_head` value width. The model's `head_dim` is the
/// mean of the two widths, which is what the attention core's FLOPs see.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Mla {
    /// Query bottleneck rank.
    pub q_lora: f64,
    /// Key/value latent rank.
    pub kv_lora: f64,
    /// Per-head query/key width without rotary embedding.
    pub qk_nope: f64,
    /// Per-head rotary query/key width (one shared rotary key).
    pub qk_rope: f64,
    /// Per-head value width.
    pub v_head: f64,
}

impl Mla {
    /// The head width the attention core's FLOPs see: the mean of the query/key and value widths.
    pub const fn head_dim(&self) -> f64 {
        (self.qk_nope + self.qk_rope + self.v_head) / 2.0
    }
}

/// A built-in model (public architecture figures).
#[derive(Debug, Clone, Copy)]
struct Preset {
    name: &'static str,
    layers: usize,
    hidden: f64,
    heads: f64,
    kv_heads: f64,
    /// Head width where it is not `hidden / heads` (0: that).
    head_dim: f64,
    ffn: f64,
    vocab: f64,
    seq: f64,
    swiglu: bool,
    experts: f64,
    top_k: f64,
    window: f64,
    windowed_layers: usize,
    shared_experts: f64,
    mla: Option<Mla>,
    dense_layers: usize,
    dense_ffn: f64,
}

#[allow(clippy::too_many_arguments)] // one argument per column of the table below
const fn preset(name: &'static str, layers: usize, hidden: f64, heads: f64, kv_heads: f64, ffn: f64, vocab: f64, seq: f64) -> Preset {
    Preset {
        name,
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim: 0.0,
        ffn,
        vocab,
        seq,
        swiglu: true,
        experts: 1.0,
        top_k: 1.0,
        window: 0.0,
        windowed_layers: 0,
        shared_experts: 0.0,
        mla: None,
        dense_layers: 0,
        dense_ffn: 0.0,
    }
}

/// DeepSeek-V3's latent attention (Kimi-K2's too).
const DEEPSEEK_MLA: Mla = Mla { q_lora: 1536.0, kv_lora: 512.0, qk_nope: 128.0, qk_rope: 64.0, v_head: 128.0 };

/// DeepSeek-V3 (`deepseek-ai/DeepSeek-V3` config.json: multi-head latent attention with
/// q_lora_rank 1536, kv_lora_rank 512, 128 heads of 128 + 64 rotary query/key and 128 value
/// widths; 256 routed experts of 2048, 8 per token, and one shared; sequence 4096 as
/// Megatron-Bridge trains it). Its first 3 of 61 layers are dense (`first_k_dense_replace` 3,
/// `intermediate_size` 18 432); the multi-token-prediction layer is not modelled.
const DEEPSEEK_V3: Preset = Preset {
    head_dim: DEEPSEEK_MLA.head_dim(),
    experts: 256.0,
    top_k: 8.0,
    shared_experts: 1.0,
    mla: Some(DEEPSEEK_MLA),
    dense_layers: 3,
    dense_ffn: 18432.0,
    ..preset("deepseek-v3", 61, 7168.0, 128.0, 128.0, 2048.0, 129280.0, 4096.0)
};

/// Built-in models.
const PRESETS: &[Preset] = &[
    preset("llama2-7b", 32, 4096.0, 32.0, 32.0, 11008.0, 32000.0, 4096.0),
    preset("llama2-13b", 40, 5120.0, 40.0, 40.0, 13824.0, 32000.0, 4096.0),
    preset("llama2-70b", 80, 8192.0, 64.0, 8.0, 28672.0, 32000.0, 4096.0),
    preset("llama3-8b", 32, 4096.0, 32.0, 8.0, 14336.0, 128256.0, 8192.0),
    preset("llama3-70b", 80, 8192.0, 64.0, 8.0, 28672.0, 128256.0, 8192.0),
    preset("llama3-405b", 126, 16384.0, 128.0, 8.0, 53248.0, 128256.0, 8192.0),
    Preset { swiglu: false, ..preset("gpt3-175b", 96, 12288.0, 96.0, 96.0, 49152.0, 50257.0, 2048.0) },
    Preset { experts: 8.0, top_k: 2.0, ..preset("mixtral-8x7b", 32, 4096.0, 32.0, 8.0, 14336.0, 32000.0, 4096.0) },
    // Qwen3 MoE (Hugging Face `Qwen/Qwen3-30B-A3B` and `Qwen/Qwen3-235B-A22B` config.json:
    // head_dim 128, every layer a mixture of 128 experts of `moe_intermediate_size`, 8 per
    // token, no shared expert, untied embeddings; sequence 4096 as Megatron-Bridge trains them).
    Preset { head_dim: 128.0, experts: 128.0, top_k: 8.0, ..preset("qwen3-30b-a3b", 48, 2048.0, 32.0, 4.0, 768.0, 151936.0, 4096.0) },
    Preset { head_dim: 128.0, experts: 128.0, top_k: 8.0, ..preset("qwen3-235b-a22b", 94, 4096.0, 64.0, 4.0, 1536.0, 151936.0, 4096.0) },
    // GPT-OSS-120B (`openai/gpt-oss-120b` config.json: 64 heads of 64, 128 experts of 2880, 4 per
    // token, a 128-token sliding window on every second layer; sequence 4096 as Megatron-Bridge trains it).
    Preset {
        head_dim: 64.0,
        experts: 128.0,
        top_k: 4.0,
        window: 128.0,
        windowed_layers: 18,
        ..preset("gpt-oss-120b", 36, 2880.0, 64.0, 8.0, 2880.0, 201088.0, 4096.0)
    },
    DEEPSEEK_V3,
    // Kimi-K2 (`moonshotai/Kimi-K2` config.json): DeepSeek-V3's layout with 64 heads, 384 routed
    // experts and a 163 840-token vocabulary; its first layer dense (`first_k_dense_replace` 1).
    Preset { name: "kimi-k2", heads: 64.0, kv_heads: 64.0, experts: 384.0, vocab: 163840.0, dense_layers: 1, ..DEEPSEEK_V3 },
];

impl Transformer {
    /// A built-in model by name.
    pub fn preset(name: &str) -> Option<Transformer> {
        PRESETS.iter().find(|p| p.name.eq_ignore_ascii_case(name)).map(|p| Transformer {
            name: p.name.to_string(),
            layers: p.layers,
            hidden: p.hidden,
            heads: p.heads,
            kv_heads: p.kv_heads,
            head_dim: if p.head_dim > 0.0 { p.head_dim } else { p.hidden / p.heads },
            ffn: p.ffn,
            vocab: p.vocab,
            seq: p.seq,
            swiglu: p.swiglu,
            experts: p.experts,
            top_k: p.top_k,
            bytes: 2.0,
            causal: true,
            tied_embeddings: false,
            window: p.window,
            windowed_layers: p.windowed_layers,
            shared_experts: p.shared_experts,
            mla: p.mla,
            dense_layers: p.dense_layers,
            dense_ffn: p.dense_ffn,
        })
    }

    /// Names of the built-in models.
    pub fn preset_names() -> Vec<&'static str> {
        PRESETS.iter().map(|p| p.name).collect()
    }

    /// Key/value width per token (what a KV cache holds): latent attention keeps its shared latent and rotary key.
    fn kv_dim(&self) -> f64 {
        match self.mla {
            Some(m) => m.kv_lora + m.qk_rope,
            None => self.kv_heads * self.head_dim,
        }
    }

    /// Tensors of [`Transformer::kv_dim`] a token keeps per layer: keys and values, or latent attention's one latent.
    fn kv_tensors(&self) -> f64 {
        if self.mla.is_some() { 1.0 } else { 2.0 }
    }

    /// The output projection's input width.
    fn o_in(&self) -> f64 {
        match self.mla {
            Some(m) => self.heads * m.v_head,
            None => self.q_dim(),
        }
    }

    /// Query width (the output projection's input): `hidden` unless the heads are wider or narrower.
    fn q_dim(&self) -> f64 {
        self.heads * self.head_dim
    }

    /// Attention parameters of one layer (Q, K, V, output projections).
    pub fn attention_params(&self) -> f64 {
        let d = self.hidden;
        match self.mla {
            Some(_) => self.attention_gemms(1.0).iter().map(|&(_, k, n)| k * n).sum(),
            None => {
                let q = self.q_dim();
                d * (q + 2.0 * self.kv_dim()) + q * d
            }
        }
    }

    /// The attention block's forward GEMMs for `tokens` tokens as (m, k, n), the
    /// tensor-parallel ones split over `tp` (latent attention's down-projections are not).
    fn attention_gemms_tp(&self, tokens: f64, tp: f64) -> Vec<(f64, f64, f64)> {
        let d = self.hidden;
        match self.mla {
            Some(m) => {
                let h = self.heads;
                vec![
                    (tokens, d, m.q_lora),
                    (tokens, m.q_lora, h * (m.qk_nope + m.qk_rope) / tp),
                    (tokens, d, m.kv_lora + m.qk_rope),
                    (tokens, m.kv_lora, h * (m.qk_nope + m.v_head) / tp),
                    (tokens, h * m.v_head / tp, d),
                ]
            }
            None => {
                let q = self.q_dim();
                vec![(tokens, d, (q + 2.0 * self.kv_dim()) / tp), (tokens, q / tp, d)]
            }
        }
    }

    /// [`Transformer::attention_gemms_tp`] on one GPU.
    fn attention_gemms(&self, tokens: f64) -> Vec<(f64, f64, f64)> {
        self.attention_gemms_tp(tokens, 1.0)
    }

    /// Parameters of a layer that every GPU holds its tensor-parallel share of:
    /// attention and the shared experts.
    pub(crate) fn dense_params(&self) -> f64 {
        self.attention_params() + self.shared_experts * self.ffn_params()
    }

    /// Attention parameters on one GPU of `tp`: latent attention keeps its two
    /// down-projections whole on every rank (Megatron replicates them).
    fn attention_per_gpu(&self, tp: f64) -> f64 {
        match self.mla {
            Some(m) => {
                let d = self.hidden;
                let whole = d * m.q_lora + d * (m.kv_lora + m.qk_rope);
                whole + (self.attention_params() - whole) / tp
            }
            None => self.attention_params() / tp,
        }
    }

    /// [`Transformer::dense_params`] on one GPU of `tp`.
    fn dense_per_gpu(&self, tp: f64) -> f64 {
        match self.mla {
            Some(_) => self.attention_per_gpu(tp) + self.shared_experts * self.ffn_params() / tp,
            None => self.dense_params() / tp,
        }
    }

    /// Ranks the KV cache's heads split over under `tp`: none for latent attention's one shared latent.
    fn kv_split(&self, tp: f64) -> f64 {
        if self.mla.is_some() { 1.0 } else { tp.min(self.kv_heads.max(1.0)) }
    }

    /// FFN parameters of one expert of one layer.
    pub fn ffn_params(&self) -> f64 {
        (if self.swiglu { 3.0 } else { 2.0 }) * self.hidden * self.ffn
    }

    /// Parameters of one layer (all experts).
    pub fn layer_params(&self) -> f64 {
        self.dense_params() + self.experts * self.ffn_params()
    }

    /// Of the first `layers` layers, those with a dense FFN in place of experts.
    pub(crate) fn dense_of(&self, layers: usize) -> usize {
        if self.experts > 1.0 { self.dense_layers.min(layers) } else { 0 }
    }

    /// Parameters of a dense FFN layer's MLP ([`Transformer::dense_layers`]).
    fn dense_mlp_params(&self) -> f64 {
        (if self.swiglu { 3.0 } else { 2.0 }) * self.hidden * self.dense_ffn
    }

    /// Parameters of one of the first, dense FFN layers of a mixture of experts.
    fn dense_layer_params(&self) -> f64 {
        self.attention_params() + self.dense_mlp_params()
    }

    /// [`Transformer::dense_layer_params`] on one GPU of `tp`: its FFN split over TP like every dense weight.
    fn dense_layer_per_gpu(&self, tp: f64) -> f64 {
        self.attention_per_gpu(tp) + self.dense_mlp_params() / tp
    }

    /// The dense FFN layers on each pipeline stage of `counts` layers (they are the first).
    fn dense_per_stage(&self, counts: &[usize]) -> Vec<usize> {
        let mut left = self.dense_of(self.layers);
        counts
            .iter()
            .map(|&n| {
                let here = left.min(n);
                left -= here;
                here
            })
            .collect()
    }

    /// Embedding and output head (one matrix when tied).
    pub fn embedding_params(&self) -> f64 {
        self.embedding_copies(1) * self.vocab * self.hidden
    }

    /// Parameters of one vocabulary matrix (the input embedding or the output head) on
    /// each of `tpf` tensor-parallel ranks, which split it by vocabulary.
    fn vocab_matrix(&self, tpf: f64) -> f64 {
        self.vocab * self.hidden / tpf
    }

    /// Vocabulary matrices a pipeline stage holds: the first the input
    /// embedding, the last the output head, a single stage both — one when
    /// they are tied (Megatron keeps a tied copy on the last stage, so with
    /// `pp > 1` every end stage holds one either way).
    fn embedding_copies(&self, pp: u32) -> f64 {
        if pp <= 1 && !self.tied_embeddings { 2.0 } else { 1.0 }
    }

    /// The forward GEMMs of one layer for `tokens` tokens, as (m, k, n):
    /// QKV, output projection, FFN up (and gate, fused) and down.
    pub fn layer_gemms(&self, tokens: u64) -> Vec<(u64, u64, u64)> {
        let d = self.hidden as u64;
        let ffn = self.ffn as u64;
        let up = if self.swiglu { 2 * ffn } else { ffn };
        let mut gemms: Vec<(u64, u64, u64)> =
            self.attention_gemms(tokens as f64).into_iter().map(|(m, k, n)| (m as u64, k as u64, n as u64)).collect();
        gemms.extend([(tokens, d, up), (tokens, ffn, d)]);
        gemms
    }

    /// Whether `tp` ranks split the heads (KV heads fewer than the ranks are replicated).
    pub fn heads_split_over(&self, tp: u32) -> bool {
        let (heads, kv) = (self.heads as u32, self.kv_heads as u32);
        heads.is_multiple_of(tp) && (kv < tp || kv.is_multiple_of(tp))
    }

    /// All parameters.
    pub fn params(&self) -> f64 {
        let dense = self.dense_of(self.layers) as f64;
        (self.layers as f64 - dense) * self.layer_params() + dense * self.dense_layer_params() + self.embedding_params()
    }

    /// Parameters each token runs through: all of a dense model; of a
    /// mixture of experts the attention, `top_k` experts per layer and the
    /// embeddings (what model FLOPs and MFU count).
    pub fn active_params(&self) -> f64 {
        let k = self.top_k.min(self.experts);
        let dense = self.dense_of(self.layers) as f64;
        (self.layers as f64 - dense) * (self.dense_params() + k * self.ffn_params())
            + dense * self.dense_layer_params()
            + self.embedding_params()
    }

    /// Parameters a token's matmuls use: the active parameters less an untied
    /// input embedding (a lookup, no FLOPs; a tied one is the output head's
    /// matrix). The N of MFU's 6·N per token, and what OpenAI's GPT-OSS card
    /// counts as active (5.13 B of 117 B: experts, attention and unembedding).
    pub fn matmul_params(&self) -> f64 {
        let lookup = if self.tied_embeddings { 0.0 } else { self.vocab * self.hidden };
        self.active_params() - lookup
    }

    /// Training FLOPs per token that MFU counts: 6 · the parameters a token's
    /// matmuls use ([`Transformer::matmul_params`]: a mixture of experts counts
    /// the experts each token runs through, no model the embedding lookup) and
    /// the attention core's score and context products forward and backward,
    /// 12 · layers · (heads · head width) · sequence (PaLM's count, Chowdhery
    /// et al. 2022, appendix B), halved under a causal mask as flash kernels
    /// skip the masked half (Megatron-LM's count) and at a sliding window's
    /// share. The `frozen` bottom layers run forward only: a third of that.
    /// Recomputation is not model FLOPs.
    pub fn model_flops_per_token(&self, frozen: usize) -> f64 {
        let mask = if self.causal { 0.5 * self.window_factor(self.seq, false) } else { 1.0 };
        let attention_per_layer = 12.0 * self.q_dim() * self.seq * mask;
        let frozen = frozen.min(self.layers);
        let dense = self.dense_of(self.layers);
        let (frozen_dense, frozen_moe) = (frozen.min(dense), frozen.saturating_sub(dense));
        let k = self.top_k.min(self.experts);
        let frozen_matmul =
            frozen_dense as f64 * self.dense_layer_params() + frozen_moe as f64 * (self.dense_params() + k * self.ffn_params());
        6.0 * self.matmul_params() + self.layers as f64 * attention_per_layer
            - 2.0 / 3.0 * (6.0 * frozen_matmul + frozen as f64 * attention_per_layer)
    }

    /// The attention core's work per layer, on average, against every layer
    /// attending to its whole causal context of `context` tokens (`decode`: one
    /// query over a cache of `context`): a windowed layer's query sees at most
    /// `window` keys, so over a sequence of s its causal work is (2sw − w²)/s² of
    /// the full one; one decode step's w/context.
    pub(crate) fn window_factor(&self, context: f64, decode: bool) -> f64 {
        if self.window <= 0.0 || self.windowed_layers == 0 || context <= self.window {
            return 1.0;
        }
        let (w, s) = (self.window, context);
        let windowed = if decode { w / s } else { (2.0 * s * w - w * w) / (s * s) };
        let share = self.windowed_layers.min(self.layers) as f64 / self.layers.max(1) as f64;
        1.0 - share + share * windowed
    }
}

/// One link class: the one collective cost model's α-β.
pub type Link = tracecast_calibrate::cost::AlphaBeta;

/// The share of a GPU's memory above which a plan that fits as counted is said to be tight: a
/// tenth left for what the model does not count (a margin chosen, not measured).
const TIGHT_MEMORY: f64 = 0.9;

/// A cluster of one GPU type with its efficiencies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cluster {
    /// Name.
    pub name: String,
    /// GPUs in all.
    pub gpus: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// Peak dense FLOP/s of the model's dtype.
    pub peak_flops: f64,
    /// HBM bytes/s (peak).
    pub hbm_bw: f64,
    /// HBM bytes.
    pub hbm_bytes: f64,
    /// GEMM efficiency η (achieved / peak on large GEMMs).
    pub gemm_efficiency: f64,
    /// Fixed cost per GEMM kernel, seconds.
    pub gemm_overhead_s: f64,
    /// Efficiency of the fused (flash) attention kernels, where a profile fitted
    /// them; else they run at the GEMM η.
    pub attention_efficiency: Option<f64>,
    /// HBM efficiency of memory-bound kernels.
    pub memory_efficiency: f64,
    /// Links inside a node, where the pricing layer does not price them (a
    /// profile's fit, MAD-Max's system files, clusters built by hand).
    pub intra: Link,
    /// Links between nodes (per GPU's share of the NICs), where the pricing
    /// layer does not price them; a run's network goes in with [`SystemOverrides`].
    pub inter: Link,
    /// How much longer compute takes while communication runs beside it, per
    /// unit of that overlap ([`DEFAULT_OVERLAP_SLOWDOWN`]; 0 under MAD-Max's assumptions).
    pub overlap_slowdown: f64,
    /// What priced GEMMs, attention and collectives (empty for MAD-Max's system files).
    pub priced_by: PricingNotes,
    /// Where the other figures come from.
    pub notes: Vec<String>,
    /// Dense FP8 peak, FLOP/s, where the GPU has one (for `fp8` plans).
    pub fp8_peak_flops: Option<f64>,
    /// GEMMs, flash attention and in-node collectives priced from measurements by
    /// the pricing layer; `None`: by η, t0 and α-β above (MAD-Max's assumptions,
    /// hand-built clusters).
    #[serde(skip)]
    pub prices: Option<MeasuredPrices>,
}

/// The pricing layer for one GPU, as the analytical model uses it: GEMMs at
/// their shapes from the GPU's measured table (else its spec model) × the
/// correction its traces measured for their software stack where the profile
/// has one — the same price `hw cost` and `replay --target` give —, flash
/// attention from measured kernels, in-node collectives from measured curves.
#[derive(Debug, Clone)]
pub struct MeasuredPrices {
    /// The pricing layer.
    pub pricing: std::sync::Arc<tracecast_calibrate::pricing::Pricing>,
    /// The GPU.
    pub gpu: tracecast_calibrate::catalog::Gpu,
    /// The model's dtype.
    pub dtype: Dtype,
    /// The GPU's profile (its traces' correction against the tables), when there is one.
    pub profile: Option<tracecast_calibrate::Profile>,
    /// Whether the in-node and across-node links are a profile's fits: those
    /// price transfers before the measured base.
    pub links_given: [bool; 2],
    /// What each of those fits was fitted on, where the profile kept it.
    pub fitted_over: [Option<tracecast_calibrate::pricing::FittedOver>; 2],
    /// The network per GPU where the user gave it (a run's `nic_gbps_per_gpu`):
    /// collectives across nodes are priced over it.
    pub nic_gbps_per_gpu: Option<f64>,
}

impl PartialEq for MeasuredPrices {
    fn eq(&self, other: &Self) -> bool {
        self.gpu.id == other.gpu.id
            && self.dtype == other.dtype
            && self.links_given == other.links_given
            && self.fitted_over == other.fitted_over
            && self.nic_gbps_per_gpu == other.nic_gbps_per_gpu
            && self.profile.as_ref().map(|p| &p.table_corrections) == other.profile.as_ref().map(|p| &p.table_corrections)
    }
}

impl MeasuredPrices {
    /// Seconds of `batch` GEMMs [m, k] × [k, n] in `dtype`.
    pub fn time_s(&self, batch: f64, m: f64, k: f64, n: f64, dtype: Dtype) -> Option<f64> {
        let shape = tracecast_calibrate::pricing::GemmShape { batch, m, n, k, dtype };
        let correction = self.profile.as_ref().and_then(|p| p.table_correction(KernelClass::Gemm, Some(dtype)));
        Some(self.pricing.gemm_corrected(&self.gpu, &shape, correction)?.time_us * 1e-6)
    }
}

/// How a cluster's note on its flash-attention pricing begins.
const ATTENTION_NOTE: &str = "flash attention";
/// The cluster's note where its profile has no attention fit (void where
/// measured kernels or materialized attention priced the model).
const ATTENTION_AT_GEMM_ETA: &str = "attention kernels at the GEMM η (the profile has no attention fit)";

/// What priced a cluster's GEMMs, attention and collectives, in words; kept
/// apart from its other notes so that a projection (what priced its own
/// model's attention) and a new base or network replace them by field.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PricingNotes {
    /// GEMMs at a probe shape.
    pub gemm: Option<String>,
    /// Attention at a probe shape, or what priced a projection's model.
    pub attention: Option<String>,
    /// A profile priced other classes but has no attention fit: attention at its GEMM η.
    pub attention_at_gemm_eta: bool,
    /// Collectives in a node and across nodes.
    pub collectives: Vec<String>,
}

impl PricingNotes {
    /// The notes in the order a projection prints them; a cluster of `gpus` inside one node of
    /// `gpus_per_node` crosses no NICs, so what would price collectives across nodes is not said
    /// of it, and of one GPU, which has no collectives, neither rule.
    fn lines(&self, gpus: u32, gpus_per_node: u32) -> impl Iterator<Item = String> + '_ {
        let eta = self.attention_at_gemm_eta.then(|| ATTENTION_AT_GEMM_ETA.to_string());
        let one_node = gpus <= gpus_per_node;
        let collectives = self.collectives.iter().filter(move |l| gpus > 1 && !(one_node && l.starts_with("collectives across nodes")));
        self.gemm.iter().chain(&self.attention).cloned().chain(eta).chain(collectives.cloned())
    }
}

/// What prices a cluster's GEMMs, attention and collectives, in words: each
/// rule at a probe shape (8192³ GEMM, 32 heads of 128 over 4096 tokens, a
/// 64 MiB all-reduce in a node), the GEMM table's `correction` (its ratio, traced
/// GEMMs and their largest size) from the GPU's profile.
fn pricing_notes(
    pricing: &tracecast_calibrate::pricing::Pricing,
    gpu: &tracecast_calibrate::catalog::Gpu,
    dtype: Dtype,
    correction: Option<&tracecast_calibrate::profile::TableCorrection>,
    (per_node, gpus): (u32, u32),
    links_given: [bool; 2],
    fitted_over: [Option<tracecast_calibrate::pricing::FittedOver>; 2],
    nic_gbps_per_gpu: Option<f64>,
) -> PricingNotes {
    let probe = tracecast_calibrate::pricing::GemmShape { batch: 1.0, m: 8192.0, n: 8192.0, k: 8192.0, dtype };
    // The probe priced as every GEMM is (`gemm_corrected`): its basis is the one description of
    // a correction — its ratio, its traced GEMMs, and whether it applies at the probe's size.
    let priced = pricing.gemm_corrected(gpu, &probe, correction);
    // (The user's own measurements leave every trace correction out.)
    let users = priced.as_ref().is_some_and(|p| p.by_the_user());
    let misaligned = correction.and_then(|c| c.misaligned.as_ref()).filter(|_| !users).map_or(String::new(), |m| {
        format!("; GEMMs whose rows are not whole 16-byte units × {:.3} at any size ({} traced)", m.ratio, m.samples)
    });
    // Where no GEMM of this silicon was timed under sustained load, a projection onto it keeps
    // the table's rates while a GPU that was (Hopper) is held to its: said, since it favours it.
    let sustained = pricing.sustained_gemm_rate(gpu, dtype);
    let measured_probe = priced.as_ref().is_some_and(|p| p.rule == tracecast_calibrate::pricing::PriceRule::GemmMeasuredShape);
    let unsustained = match &sustained {
        None if !users && matches!(dtype, Dtype::Bf16 | Dtype::Fp16) => {
            format!("; no GEMM of {} was timed under sustained load: its prices are not held to one", gpu.id)
        }
        _ => String::new(),
    };
    // The user measured the probe itself: its basis is their time, which hides how the shapes
    // they did not measure are priced (their ratio to the table, a sustained hold): one of those
    // in words instead.
    let unmeasured = measured_probe
        .then(|| {
            [4096.0, 2048.0, 16384.0, 1024.0]
                .into_iter()
                .map(|n| tracecast_calibrate::pricing::GemmShape { m: n, n, k: n, ..probe })
                .filter_map(|shape| Some((shape, pricing.gemm_corrected(gpu, &shape, correction)?)))
                .find(|(_, p)| p.rule != tracecast_calibrate::pricing::PriceRule::GemmMeasuredShape)
        })
        .flatten()
        .map(|(shape, p)| format!("; a shape the user did not measure, {0}³: {1} ({2})", shape.m, p.rule.describe(), p.basis));
    let held = unmeasured.unwrap_or(unsustained);
    let gemm = match (priced, correction) {
        // The basis is the probe's (the correction applies or not by each GEMM's own size): said so.
        (Some(p), Some(_)) => {
            format!(
                "GEMMs at their shapes: {} (each by its own size; an 8192³ GEMM, for one: {}{misaligned}{held})",
                p.rule.describe(),
                p.basis
            )
        }
        (Some(p), None) => {
            format!("GEMMs at their shapes: {} ({}{held}); no traces of this GPU correct it", p.rule.describe(), p.basis)
        }
        (None, _) => "GEMMs by η and t0 (no measured table nor spec model prices this GPU)".into(),
    };
    let shape = tracecast_calibrate::pricing::AttentionShape {
        batch: 1.0,
        heads: 32.0,
        seq: 4096.0,
        head_dim: 128.0,
        causal: true,
        backward: true,
    };
    let attention = match pricing.attention(gpu, &shape, None) {
        Some(p) => format!("{ATTENTION_NOTE} at its shapes: {} ({})", p.rule.describe(), p.basis),
        None => format!("{ATTENTION_NOTE} by η (no attention kernel of this GPU or its vendor measured)"),
    };
    // Collectives at a 64 MiB all-reduce in one node and over two.
    // The job's own GPUs where it fills less than a node (a 4-GPU job was described at 8).
    let in_node = per_node.min(gpus).max(2);
    let gpn = per_node.max(1);
    let priced = |tier: &str, bytes: f64, gpus: u32, gpn: u32, what: &str| match pricing
        .collective(gpu, &CollectiveQuery::new(Collective::AllReduce, bytes, gpus, gpn).over_network(nic_gbps_per_gpu))
    {
        Some(p) => format!("collectives {tier}: {} ({}; {what})", p.rule.describe(), p.basis),
        None => format!("collectives {tier} by α-β at the defaults (nothing measured nor a link prices this GPU)"),
    };
    // What the fit was fitted on, where the profile kept it: outside it a price extrapolates.
    let span = |t: usize| fitted_over[t].map_or(String::new(), |f| format!(" ({})", f.words()));
    let fit = |tier: &str, t: usize| format!("collectives {tier} by the profile's α-β fit{}", span(t));
    let in_a_node = if links_given[0] {
        fit("in a node", 0)
    } else {
        priced("in a node", 67108864.0, in_node, in_node, &format!("a 64 MiB all-reduce over {in_node} GPUs"))
    };
    // A profile that fits one tier prices that tier of a collective across nodes; the
    // pricing layer the other (`Pricing::collective_with_fits`).
    // Across nodes at the job's size (at 4 096 GPUs a 2-node probe had named the rule of 16 GPUs, a
    // measured curve, where the job's widest collectives are priced by another), at least two nodes.
    let across_gpus = gpus.max(2 * gpn);
    let across = match links_given {
        [false, false] => {
            let over = if across_gpus == gpus { format!("all {gpus} GPUs of the job") } else { format!("{across_gpus} GPUs") };
            priced("across nodes", 67108864.0, across_gpus, gpn, &format!("a 64 MiB all-reduce over {over}"))
        }
        [true, true] => fit("across nodes", 1),
        [false, true] => {
            format!("collectives across nodes: the tier across nodes by the profile's α-β fit{}, the tier in a node as in a node", span(1))
        }
        // The tier across nodes at the job's nodes, as the other branch probes the job's size.
        [true, false] => {
            let nodes = across_gpus.div_ceil(gpn).max(2);
            priced(
                &format!("across nodes: the tier in a node by the profile's α-β fit{}, the tier across nodes", span(0)),
                67108864.0 / f64::from(gpn),
                nodes,
                1,
                &format!("each GPU's 1/{gpn} of a 64 MiB all-reduce over {nodes} nodes"),
            )
        }
    };
    PricingNotes { gemm: Some(gemm), attention: Some(attention), attention_at_gemm_eta: false, collectives: vec![in_a_node, across] }
}

/// What priced an `fp8` plan's linear layers: the pricing layer's FP8 GEMMs
/// at their shapes where it has them (named at a probe shape, as the 16-bit
/// note is), else the 16-bit GEMM η at the FP8 peak.
fn fp8_note(cluster: &Cluster, task: Task) -> String {
    let probe = tracecast_calibrate::pricing::GemmShape { batch: 1.0, m: 8192.0, n: 8192.0, k: 8192.0, dtype: Dtype::Fp8 };
    let priced = cluster.prices.as_ref().filter(|_| cluster.fp8_peak_flops.is_some()).and_then(|p| {
        let correction = p.profile.as_ref().and_then(|f| f.table_correction(KernelClass::Gemm, Some(Dtype::Fp8)));
        p.pricing.gemm_corrected(&p.gpu, &probe, correction)
    });
    let gemms = match priced {
        Some(p) => format!("linear layers' GEMMs at their shapes in FP8: {} ({})", p.rule.describe(), p.basis),
        None => format!(
            "linear layers at the FP8 peak {:.0} TFLOP/s with the 16-bit GEMM η {:.3} (no FP8 table or trace prices this GPU)",
            cluster.fp8_peak_flops.unwrap_or(0.0) / 1e12,
            cluster.gemm_efficiency
        ),
    };
    if matches!(task, Task::Train) {
        format!("fp8: {gemms}, their inputs cast (3 bytes per element), an FP8 copy of the weights")
    } else {
        format!("fp8: {gemms}, their inputs cast (3 bytes per element), the weights held and read in FP8 (1 byte per parameter)")
    }
}

/// Inference under `fp8` serves FP8 weights (vLLM's and TensorRT-LLM's FP8 checkpoints: the
/// linear layers' weights stored in one byte, no 16-bit copy); training keeps the 16-bit
/// master weights and adds Transformer Engine's FP8 copy.
fn serves_fp8_weights(plan: &Plan, task: Task) -> bool {
    plan.fp8 && !matches!(task, Task::Train)
}

/// Default efficiencies when no calibration profile is given.
pub const DEFAULT_GEMM_EFFICIENCY: f64 = 0.70;
/// Default HBM efficiency.
pub const DEFAULT_MEMORY_EFFICIENCY: f64 = 0.80;
/// Default fixed cost per GEMM kernel, seconds.
pub const DEFAULT_GEMM_OVERHEAD_S: f64 = 5e-6;
/// Default share of the nominal NVLink bandwidth NCCL reaches as bus bandwidth.
pub const DEFAULT_INTRA_LINK_EFFICIENCY: f64 = 0.80;
/// Default share of the NIC bandwidth NCCL reaches.
pub const DEFAULT_INTER_LINK_EFFICIENCY: f64 = 0.90;
/// Default collective latency inside a node, seconds.
pub const DEFAULT_INTRA_ALPHA_S: f64 = 10e-6;
/// Default collective latency across nodes, seconds.
pub const DEFAULT_INTER_ALPHA_S: f64 = 25e-6;
/// How much slower compute kernels run while communication kernels run beside
/// them: 18.9 %, the average slowdown Lee, Phanishayee and Mahajan measured for
/// overlapped compute against the same compute alone over GPT and LLaMA training
/// on A100, H100, MI250 and MI210 (maximum 40 %; "Characterizing Compute-Communication
/// Overlap in GPU-Accelerated Distributed Deep Learning: Performance and Power
/// Implications", arXiv 2507.03114, 2025). The collectives' kernels take SMs and
/// HBM bandwidth from the compute kernels beside them.
pub const DEFAULT_OVERLAP_SLOWDOWN: f64 = 0.189;

/// A parallelization plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Tensor parallel degree.
    pub tp: u32,
    /// Pipeline stages.
    pub pp: u32,
    /// Data parallel degree (replicas, or FSDP shards).
    pub dp: u32,
    /// ZeRO stage of the data-parallel dimension: 0 (DDP), 1, 2, 3 (FSDP).
    pub zero: u8,
    /// Sequence parallelism with TP (activations sharded; the TP all-reduce becomes reduce-scatter + all-gather).
    pub sp: bool,
    /// Expert parallel degree (inside the data-parallel dimension).
    pub ep: u32,
    /// Sequences per microbatch.
    pub microbatch: u32,
    /// Microbatches per iteration (gradient accumulation; pipeline depth).
    pub microbatches: u32,
    /// Recompute activations in the backward pass (full recomputation).
    pub recompute: bool,
    /// Selective recomputation (Korthikanti et al. 2022): only the attention
    /// core is recomputed; with flash attention its backward already does, so
    /// it costs nothing extra and stores what no recomputation stores.
    pub selective: bool,
    /// Virtual pipeline stages per GPU (interleaved 1F1B, Megatron's
    /// `--num-layers-per-virtual-pipeline-stage`): the bubble shrinks by this
    /// factor, each microbatch crosses this many more stage boundaries.
    pub vpp: u32,
    /// Fine-tuning: this many bottom layers are frozen (no backward, no
    /// gradients, no optimizer state), and with them the input embedding below
    /// them (a tied one too: the usual partial fine-tuning, and a trained tied
    /// matrix would need the frozen layers' backward). 0 for pre-training.
    pub frozen: u32,
    /// FSDP (ZeRO-3) prefetch depth: weights are gathered this many layers
    /// ahead of the compute that needs them (0: just in time). Default 1.
    pub prefetch: u32,
    /// The attention core materializes the b·h·s² score matrix (`attention=materialized`:
    /// frameworks before FlashAttention, 2022, e.g. Megatron-LM's fused
    /// scale-mask-softmax) instead of computing it in tiles on chip (`flash`, the default).
    pub materialized_attention: bool,
    /// Gradient bucket of the data-parallel reduction (DDP, ZeRO-1), bytes (`bucket=MiB`):
    /// `None` is PyTorch DDP's `bucket_cap_mb` of 25.
    pub bucket_bytes: Option<u64>,
    /// Gradients reduced and kept in FP32 (`grad_reduce=fp32`: FSDP2's `reduce_dtype`,
    /// torchtitan's `mixed_precision_reduce = "float32"`, Megatron's `grad_reduce_in_fp32`);
    /// otherwise in the model's 16 bits (`grad_reduce=bf16`, the default).
    pub grad_reduce_fp32: bool,
    /// The flash attention kernel family the framework runs (`attention=fa2`, `fa-triton`,
    /// `cudnn`, … as the measurements name them); `None`: the fastest measured family.
    pub attention_kernel: Option<String>,
    /// Context parallel degree (`cp=C`): each sequence is split over C ranks
    /// (load-balanced causal chunks); K and V are all-gathered across them
    /// before the attention core and their gradients reduce-scattered, as in
    /// Llama 3's context parallelism. The C ranks hold the same weights, so
    /// gradients and ZeRO shards span dp × cp.
    pub cp: u32,
    /// FP8 GEMMs (`fp8`, Transformer Engine style): the linear layers run at
    /// the FP8 peak, their inputs cast from 16 bits first; attention and the
    /// rest stay in 16 bits.
    pub fp8: bool,
    /// Dropout in training (`dropout`: GPT-2/3 and Megatron-LM's attention and
    /// hidden dropout). Materialized attention then draws, applies and keeps a
    /// mask over the score matrix (1 byte per score) and its dropped copy;
    /// the hidden dropouts add their masks to the bias-dropout-add passes.
    /// Flash attention draws its mask on chip (no HBM traffic).
    pub dropout: bool,
    /// Layers of the first and of the last pipeline stage (`first=N`, `last=N`, Megatron's
    /// `--decoder-first/last-pipeline-num-layers`); the other layers are spread over the
    /// other stages (see [`stage_layer_counts`]).
    pub first_stage_layers: Option<u32>,
    /// See `first_stage_layers`.
    pub last_stage_layers: Option<u32>,
    /// `grad_sync=after`: data-parallel gradients are reduced after the whole backward
    /// pass (Megatron-LM before `--overlap-grad-reduce`, DeepSpeed without `overlap_comm`)
    /// instead of behind it layer by layer on their own stream (`grad_sync=overlap`, the
    /// default: PyTorch DDP and FSDP, Megatron-LM with overlap).
    pub grad_sync_after: bool,
    /// `tp_overlap`: Megatron's tensor-parallel communication overlap
    /// (`--tp-comm-overlap`, Transformer Engine userbuffers; Megatron-Bridge's
    /// `CommOverlapConfig(tp_comm_overlap=True)`): with sequence parallelism the
    /// TP all-gather and reduce-scatter are split into `tp` chunks pipelined with
    /// the GEMMs beside them. Needs `sp` and tp > 1 (Megatron-Bridge turns it off
    /// otherwise; the projection says so).
    pub tp_overlap: bool,
    /// `p2p_overlap`: the pipeline's sends and receives run beside compute
    /// (Megatron's `overlap_p2p_comm`, which NeMo and Megatron-Bridge set with
    /// interleaved 1F1B): in the steady state a chunk's transfers overlap the
    /// compute of the chunk before; only what outlasts it is exposed.
    pub p2p_overlap: bool,
    /// `recompute=op`: torchtitan's per-op selective activation checkpointing
    /// (`selective_ac_option = "op"`): the outputs of matmuls, attention and
    /// reduce-scatters are saved except every second matmul of a block; the
    /// backward recomputes those matmuls (per layer: K, output and the SwiGLU up
    /// projection, or K, output and FC2) and every memory-bound forward op.
    /// Memory: each layer keeps its input and the outputs it saves (dense
    /// models; MoE and latent attention as `recompute=selective`).
    pub op_sac: bool,
    /// `etp`: the ranks each expert is split over, as stated (Megatron-Core's
    /// `--expert-tensor-parallel-size`): 1, whole experts on each GPU (the expert-parallel
    /// group folded over TP × CP × DP), or `tp`; unstated, `tp` where `ep` divides dp × cp.
    pub etp: Option<u32>,
}

/// The keys of [`Plan::parse`] that a plan's text stated, as written (`ddp`
/// and `dp`, `mb` and `microbatch` apart), one bit per key
/// ([`Plan::parse_stated`]): where a plan came from, which a framework's
/// defaults leave alone, not what it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatedKeys(u32);

impl StatedKeys {
    /// Every key [`Plan::parse`] takes, in the order of their bits.
    const KEYS: [&'static str; 29] = [
        "tp",
        "pp",
        "dp",
        "ddp",
        "fsdp",
        "zero",
        "ep",
        "mb",
        "microbatch",
        "microbatches",
        "m",
        "gbs",
        "sp",
        "recompute",
        "vpp",
        "cp",
        "first",
        "last",
        "fp8",
        "dropout",
        "grad_sync",
        "frozen",
        "p2p_overlap",
        "tp_overlap",
        "attention",
        "prefetch",
        "bucket",
        "grad_reduce",
        "etp",
    ];

    /// The keys that lay a plan out — its degrees, microbatches, recomputation and stage
    /// split (what `search` chooses); the rest are settings of the software stack.
    pub fn layout_keys() -> &'static [&'static str] {
        &Self::KEYS[..18]
    }

    /// The keys only training has: its batches (`mb`, `gbs`, …), how gradients and optimizer
    /// states are sharded and reduced, and what the backward pass recomputes; inference refuses them.
    pub fn training_keys() -> &'static [&'static str] {
        &[
            "fsdp",
            "zero",
            "mb",
            "microbatch",
            "microbatches",
            "m",
            "gbs",
            "recompute",
            "vpp",
            "dropout",
            "grad_sync",
            "frozen",
            "prefetch",
            "bucket",
            "grad_reduce",
        ]
    }

    /// Refuses, for an inference `task`, the training settings a plan's text stated: its batch
    /// comes from the task, and a forward pass keeps no gradients or optimizer states to shard
    /// or reduce, nor recomputes for a backward (such a setting had been echoed and not run).
    pub fn refuse_training_keys(&self, task: Task) -> Result<(), crate::Error> {
        if task == Task::Train {
            return Ok(());
        }
        let named: Vec<&str> = Self::training_keys().iter().copied().filter(|k| self.contains(k)).collect();
        match named.as_slice() {
            [] => Ok(()),
            [one] => Err(crate::Error::Plan(format!(
                "{one} is a training setting (batches, gradients, optimizer states, the backward pass); {} runs one forward pass of its batch (--batch, a run's `batch`)",
                task.as_str()
            ))),
            many => Err(crate::Error::Plan(format!(
                "{} are training settings (batches, gradients, optimizer states, the backward pass); {} runs one forward pass of its batch (--batch, a run's `batch`)",
                many.join(", "),
                task.as_str()
            ))),
        }
    }

    /// The other keys: settings of the software stack (attention kernel, buckets, overlap, …).
    pub fn setting_keys() -> &'static [&'static str] {
        &Self::KEYS[18..]
    }

    fn bit(key: &str) -> Option<u32> {
        Self::KEYS.iter().position(|k| *k == key).map(|i| 1 << i)
    }

    fn insert(&mut self, key: &str) {
        let bit = Self::bit(key);
        debug_assert!(bit.is_some(), "plan key {key:?} is parsed but missing from StatedKeys::KEYS");
        self.0 |= bit.unwrap_or(0);
    }

    /// Whether `key` (as [`Plan::parse`] takes it) was stated.
    pub fn contains(&self, key: &str) -> bool {
        Self::bit(key).is_some_and(|b| self.0 & b != 0)
    }
}

impl Default for Plan {
    fn default() -> Self {
        Plan {
            tp: 1,
            pp: 1,
            dp: 1,
            zero: 0,
            sp: false,
            ep: 1,
            microbatch: 1,
            microbatches: 1,
            recompute: false,
            selective: false,
            vpp: 1,
            frozen: 0,
            prefetch: 1,
            materialized_attention: false,
            attention_kernel: None,
            bucket_bytes: None,
            grad_reduce_fp32: false,
            cp: 1,
            fp8: false,
            dropout: false,
            first_stage_layers: None,
            last_stage_layers: None,
            grad_sync_after: false,
            tp_overlap: false,
            p2p_overlap: false,
            op_sac: false,
            etp: None,
        }
    }
}

/// Measured attention kernel families that materialize the score matrix in HBM, as the
/// evidence names them (`shared/evidence/README.md`: `pytorch-standard`, "materialized
/// softmax attention", the FlashAttention papers' PyTorch baseline): their time is their
/// measured rows', their memory that of `attention=materialized`.
const MATERIALIZING_FAMILIES: &[&str] = &["pytorch-standard"];

impl Plan {
    /// Whether the attention core holds the b·h·s² scores in HBM: `attention=materialized`,
    /// or a measured family that materializes them (`attention=pytorch-standard` had been
    /// priced at its unfused time and counted in memory as flash attention).
    pub fn scores_in_memory(&self) -> bool {
        self.materialized_attention || self.attention_kernel.as_deref().is_some_and(|k| MATERIALIZING_FAMILIES.contains(&k))
    }

    /// The number format of the linear layers: FP8 under `fp8`, else the 16-bit one MFU is of.
    pub fn linear_format(&self) -> tracecast_calibrate::catalog::Dtype {
        if self.fp8 { tracecast_calibrate::catalog::Dtype::Fp8 } else { tracecast_calibrate::catalog::Dtype::Bf16 }
    }

    /// GPUs the plan uses: tp × cp × pp × dp. Every plan [`Plan::parse`] returns
    /// has a product that fits; for one built by hand whose product does not,
    /// this is `u32::MAX` and [`Plan::checked_gpus`] names the overflow.
    pub fn gpus(&self) -> u32 {
        self.checked_gpus().unwrap_or(u32::MAX)
    }

    /// tp × cp × pp × dp, or an error naming the product and its degrees when it passes `u32::MAX`.
    pub fn checked_gpus(&self) -> Result<u32, crate::Error> {
        checked_product("tp × cp × pp × dp", &[self.tp, self.cp, self.pp, self.dp])
    }

    /// The plan on `gpus` GPUs by its data-parallel degree alone (tp, cp, pp and the rest kept),
    /// with the global batch kept where its microbatches divide over the new replicas, and the
    /// change in words; `None` where the other degrees do not divide `gpus` (or `ep` the new dp).
    /// What a GPU count given beside a plan of another (MAD-Max's task file) means.
    pub fn on_gpus(&self, gpus: u32) -> Option<(Plan, String)> {
        let model_parallel = checked_product("tp × cp × pp", &[self.tp, self.cp, self.pp]).ok()?;
        if gpus == 0 || !gpus.is_multiple_of(model_parallel) {
            return None;
        }
        let dp = gpus / model_parallel;
        let mut plan = Plan { dp, ..self.clone() };
        // The experts spread by the plan's own rule at its new size (over dp × cp, or folded
        // over tp × cp × dp): it had asked dp alone, refusing a cp=2 plan on its own GPU count,
        // then the old plan's folding.
        if !plan.expert_ranks().is_multiple_of(u64::from(self.ep.max(1))) {
            return None;
        }
        let sequences = u64::from(self.dp) * u64::from(self.microbatch) * u64::from(self.microbatches);
        let per_replica = u64::from(dp) * u64::from(self.microbatch);
        let batch = if sequences.is_multiple_of(per_replica) && sequences / per_replica >= 1 {
            plan.microbatches = u32::try_from(sequences / per_replica).ok()?;
            format!("the global batch of {sequences} sequences kept ({} microbatches a replica)", plan.microbatches)
        } else {
            format!(
                "{} microbatches a replica kept: the global batch {} sequences (its {sequences} do not divide over {dp} replicas)",
                plan.microbatches,
                per_replica * u64::from(plan.microbatches)
            )
        };
        Some((plan, format!("dp {} → {dp} (tp, cp and pp kept), {batch}", self.dp)))
    }

    /// Ranks that hold the same weights: the gradient and ZeRO group (dp × cp;
    /// at most [`Plan::gpus`], so it fits whenever that does).
    pub fn replicas(&self) -> u32 {
        self.dp.saturating_mul(self.cp)
    }

    /// Ranks each expert's weights are split over (Megatron-Core's expert
    /// tensor parallelism): `tp` where the expert-parallel group fits in the
    /// data-parallel one (its default, expert TP = TP); else 1 — the experts
    /// whole on each GPU and the expert-parallel group folded over the tensor-,
    /// context- and data-parallel ranks (MoE parallel folding: EP × expert DP
    /// = TP × CP × DP), as Megatron-Bridge's Qwen3-235B recipes on H100 run
    /// `tp=2, dp=16, ep=32`.
    pub(crate) fn expert_tp(&self) -> u32 {
        if self.folds_experts() { 1 } else { self.tp }
    }

    /// Whether expert parallelism folds over the tensor-parallel ranks: `etp=1` with tp > 1,
    /// or `ep` does not divide the data-parallel ranks (dp × cp).
    pub(crate) fn folds_experts(&self) -> bool {
        self.ep > 1 && (self.etp == Some(1) && self.tp > 1 || !self.replicas().is_multiple_of(self.ep))
    }

    /// Ranks that hold the same experts (expert data parallelism): dp × cp ÷ ep,
    /// folded: tp × cp × dp ÷ ep.
    pub(crate) fn expert_replicas(&self) -> u32 {
        u32::try_from(self.expert_ranks() / u64::from(self.ep.max(1))).unwrap_or(u32::MAX).max(1)
    }

    /// The ranks the experts spread over: the data-parallel ones (dp × cp), folded over
    /// tp × cp × dp ([`Plan::folds_experts`]).
    pub(crate) fn expert_ranks(&self) -> u64 {
        u64::from(self.replicas()) * u64::from(self.tp / self.expert_tp())
    }

    /// Parses `tp=8,pp=4,fsdp=64`, `tp=8,dp=16,zero=1,mb=2,gbs=1024,sp,recompute`.
    /// `fsdp=N` is `dp=N` with ZeRO-3; `gbs` sets the microbatches from the global batch.
    pub fn parse(spec: &str) -> Result<Plan, crate::Error> {
        Plan::parse_stated(spec).map(|(p, _)| p)
    }

    /// [`Plan::parse`], and the keys the text stated, whatever their values.
    pub fn parse_stated(spec: &str) -> Result<(Plan, StatedKeys), crate::Error> {
        let mut p = Plan::default();
        let mut stated = StatedKeys::default();
        let mut gbs = None;
        // The settings each part set, and the part: a setting written twice is refused (as `--scale`
        // refuses a key given twice), whatever its spelling (`dp`, `ddp` and `fsdp` all set dp;
        // `fsdp` sets the ZeRO stage too, `gbs` the microbatches).
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = part.split_once('=').map_or((part, None), |(k, v)| (k.trim(), Some(v.trim())));
            if StatedKeys::bit(k).is_some() {
                let own = [k];
                let settings: &[&str] = match k {
                    "dp" | "ddp" => &["dp"],
                    "fsdp" => &["dp", "zero"],
                    "mb" | "microbatch" => &["mb"],
                    "microbatches" | "m" | "gbs" => &["microbatches"],
                    _ => &own,
                };
                for &setting in settings {
                    if let Some((_, first)) = seen.iter().find(|(s, _)| *s == setting) {
                        return Err(crate::Error::Plan(format!("{setting} is given twice ({first}, {part})")));
                    }
                    seen.push((setting, part));
                }
            }
            let num = |v: Option<&str>| -> Result<u32, crate::Error> {
                let v = v.ok_or_else(|| crate::Error::Plan(format!("{k} needs a value")))?;
                v.parse::<u64>()
                    .map_err(|_| crate::Error::Plan(format!("{k}: {v:?} is not a whole number")))
                    .and_then(|n| u32::try_from(n).map_err(|_| crate::Error::Plan(format!("{k}={n}: more than {}", u32::MAX))))
                    .and_then(|n| if n == 0 { Err(crate::Error::Plan(format!("{k} must be at least 1"))) } else { Ok(n) })
            };
            // A setting that is on or off: bare (`sp`) or `=on` turns it on, `=off` off; anything
            // else is refused (`fp8=0` had turned FP8 on).
            let switch = |v: Option<&str>| -> Result<bool, crate::Error> {
                match v {
                    None | Some("on") => Ok(true),
                    Some("off") => Ok(false),
                    Some(other) => Err(crate::Error::Plan(format!("{k}={other}: on or off"))),
                }
            };
            match k {
                "tp" => p.tp = num(v)?,
                "pp" => p.pp = num(v)?,
                "dp" | "ddp" => p.dp = num(v)?,
                "fsdp" => {
                    p.dp = num(v)?;
                    p.zero = 3;
                }
                "zero" => {
                    let z =
                        num(v).or_else(|_| if v == Some("0") { Ok(0) } else { Err(crate::Error::Plan("zero: 0, 1, 2 or 3".into())) })?;
                    if z > 3 {
                        return Err(crate::Error::Plan("zero: 0, 1, 2 or 3".into()));
                    }
                    p.zero = z as u8;
                }
                "ep" => p.ep = num(v)?,
                "etp" => p.etp = Some(num(v)?),
                "mb" | "microbatch" => p.microbatch = num(v)?,
                "microbatches" | "m" => p.microbatches = num(v)?,
                "gbs" => gbs = Some(num(v)?),
                "sp" => p.sp = switch(v)?,
                "recompute" => match v {
                    None | Some("full") => p.recompute = true,
                    Some("selective") => p.selective = true,
                    Some("op") => {
                        p.selective = true;
                        p.op_sac = true;
                    }
                    Some("none") => {}
                    Some(other) => return Err(crate::Error::Plan(format!("recompute={other}: full, selective, op or none"))),
                },
                "vpp" => p.vpp = num(v)?,
                "cp" => p.cp = num(v)?,
                "fp8" => p.fp8 = switch(v)?,
                "dropout" => p.dropout = switch(v)?,
                "first" => p.first_stage_layers = Some(num(v)?),
                "last" => p.last_stage_layers = Some(num(v)?),
                "grad_sync" => match v {
                    Some("overlap") => p.grad_sync_after = false,
                    Some("after") => p.grad_sync_after = true,
                    other => return Err(crate::Error::Plan(format!("grad_sync={}: overlap or after", other.unwrap_or("")))),
                },
                "frozen" => p.frozen = num(v)?,
                "p2p_overlap" => p.p2p_overlap = switch(v)?,
                "tp_overlap" => p.tp_overlap = switch(v)?,
                "attention" => match v {
                    Some("flash") => (p.materialized_attention, p.attention_kernel) = (false, None),
                    Some("materialized") => (p.materialized_attention, p.attention_kernel) = (true, None),
                    // A kernel family as the measurements name it (`fa2`, `fa-triton`, `cudnn`, …).
                    Some(family) if !family.is_empty() && family.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') => {
                        (p.materialized_attention, p.attention_kernel) = (false, Some(family.to_ascii_lowercase()))
                    }
                    other => {
                        return Err(crate::Error::Plan(format!(
                            "attention={}: flash, materialized or a kernel family (fa2, fa3, cudnn, fa-triton, …)",
                            other.unwrap_or("")
                        )));
                    }
                },
                "prefetch" => p.prefetch = if v == Some("0") { 0 } else { num(v)? },
                "grad_reduce" => match v {
                    Some("fp32") => p.grad_reduce_fp32 = true,
                    Some("bf16" | "fp16") => p.grad_reduce_fp32 = false,
                    other => return Err(crate::Error::Plan(format!("grad_reduce={}: fp32 or bf16", other.unwrap_or("")))),
                },
                "bucket" => {
                    let mib: f64 = v.and_then(|x| x.parse().ok()).filter(|x: &f64| x.is_finite() && *x > 0.0).ok_or_else(|| {
                        crate::Error::Plan(format!(
                            "bucket={}: a gradient bucket in MiB (PyTorch DDP's bucket_cap_mb, default 25)",
                            v.unwrap_or("")
                        ))
                    })?;
                    p.bucket_bytes = Some(bucket_bytes(mib));
                }
                other => {
                    return Err(crate::Error::Plan(format!(
                        "unknown key {other:?} (tp, pp, dp, fsdp, zero, ep, etp, mb, microbatches, gbs, sp[=on|off], recompute[=full|selective|op|none], vpp, frozen, prefetch, attention=flash|materialized|FAMILY, bucket=MiB, grad_reduce=fp32|bf16, cp, fp8[=on|off], dropout[=on|off], first, last, grad_sync=overlap|after, tp_overlap[=on|off], p2p_overlap[=on|off])"
                    )));
                }
            }
            stated.insert(k);
        }
        // Expert TP as Megatron-Core has it: whole experts, or split as attention is.
        if let Some(etp) = p.etp {
            if etp != 1 && etp != p.tp {
                // With tp=1 the two choices are one: said as one (it had read "1 (…) or tp=1 (…)").
                return Err(crate::Error::Plan(if p.tp == 1 {
                    format!("etp={etp}: 1 (whole experts on each GPU): experts are split over at most the tensor-parallel ranks, and tp=1")
                } else {
                    format!(
                        "etp={etp}: 1 (whole experts on each GPU, the expert-parallel group folded over TP × CP × DP) or tp={} (each expert split as attention is)",
                        p.tp
                    )
                }));
            }
            if etp == p.tp && p.tp > 1 && p.ep > 1 && !p.replicas().is_multiple_of(p.ep) {
                return Err(crate::Error::Plan(format!(
                    "etp={etp} splits each expert over TP, so ep={} must divide dp × cp = {} (or etp=1 folds it over TP)",
                    p.ep,
                    p.replicas()
                )));
            }
        }
        // Degrees are the user's numbers: every product the projection forms of them must fit.
        p.checked_gpus()?;
        checked_product("pp × vpp", &[p.pp, p.vpp])?;
        if let Some(g) = gbs {
            let per = checked_product("dp × mb", &[p.dp, p.microbatch])?;
            if g % per != 0 {
                return Err(crate::Error::Plan(format!("gbs={g} is not a multiple of dp × mb = {per}")));
            }
            p.microbatches = g / per;
        }
        Ok((p, stated))
    }

    /// The model chunks per stage the training schedule interleaves: `vpp` where the
    /// microbatches divide by the stages — Megatron's interleaved 1F1B needs them to and
    /// refuses the plan otherwise — else 1 (plain 1F1B, which `project` notes).
    pub fn interleaved_chunks(&self) -> u32 {
        if self.vpp > 1 && self.pp > 1 && self.microbatches.max(1).is_multiple_of(self.pp) { self.vpp } else { 1 }
    }

    /// Whether the input embedding is frozen: frozen bottom layers (`frozen=N`) stop the
    /// backward above it, so it has no gradient, a tied one neither (see [`Plan::frozen`]).
    pub fn embedding_frozen(&self) -> bool {
        self.frozen > 0
    }

    /// Bytes of one gradient element as the data-parallel reduction moves and keeps it:
    /// 4 under `grad_reduce=fp32`, else the model's `bytes`.
    pub fn grad_bytes(&self, bytes: f64) -> f64 {
        if self.grad_reduce_fp32 { 4.0 } else { bytes }
    }

    /// [`Plan::describe`] as `task` runs it: an inference task's plan without the training
    /// settings it refuses ([`StatedKeys::training_keys`]; `search --task decode` had printed
    /// `mb=1,microbatches=1`, which `project --task decode` then refused).
    pub fn describe_for(&self, task: Task) -> String {
        let text = self.describe();
        if task == Task::Train {
            return text;
        }
        let training = StatedKeys::training_keys();
        text.split(',').filter(|part| !training.contains(&part.split('=').next().unwrap_or(part))).collect::<Vec<_>>().join(",")
    }

    /// `tp=8,pp=4,dp=64,zero=3,mb=1,microbatches=16` (only what differs from 1 / off).
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("tp={}", self.tp), format!("pp={}", self.pp)];
        parts.push(if self.zero == 3 { format!("fsdp={}", self.dp) } else { format!("dp={}", self.dp) });
        if self.zero > 0 && self.zero < 3 {
            parts.push(format!("zero={}", self.zero));
        }
        if self.ep > 1 {
            parts.push(format!("ep={}", self.ep));
        }
        if let Some(etp) = self.etp {
            parts.push(format!("etp={etp}"));
        }
        if self.sp {
            parts.push("sp".into());
        }
        parts.push(format!("mb={}", self.microbatch));
        parts.push(format!("microbatches={}", self.microbatches));
        if self.recompute {
            parts.push("recompute".into());
        }
        if self.op_sac {
            parts.push("recompute=op".into());
        } else if self.selective {
            parts.push("recompute=selective".into());
        }
        if self.materialized_attention {
            parts.push("attention=materialized".into());
        }
        if let Some(k) = &self.attention_kernel {
            parts.push(format!("attention={k}"));
        }
        if let Some(b) = self.bucket_bytes {
            // The fewest decimals that read back as the same bytes: `bucket=76.3` had come back
            // as 76.30000019073486 (76.3 MiB rounded to whole bytes).
            let mib = b as f64 / MIB;
            let shown = (0..=7usize)
                .map(|d| format!("{mib:.d$}"))
                .find(|t| t.parse::<f64>().is_ok_and(|v| v > 0.0 && bucket_bytes(v) == b))
                .unwrap_or_else(|| mib.to_string());
            parts.push(format!("bucket={shown}"));
        }
        if self.grad_reduce_fp32 {
            parts.push("grad_reduce=fp32".into());
        }
        if self.cp > 1 {
            parts.push(format!("cp={}", self.cp));
        }
        if self.fp8 {
            parts.push("fp8".into());
        }
        if self.dropout {
            parts.push("dropout".into());
        }
        if let Some(n) = self.first_stage_layers {
            parts.push(format!("first={n}"));
        }
        if let Some(n) = self.last_stage_layers {
            parts.push(format!("last={n}"));
        }
        if self.grad_sync_after {
            parts.push("grad_sync=after".into());
        }
        if self.tp_overlap {
            parts.push("tp_overlap".into());
        }
        if self.p2p_overlap {
            parts.push("p2p_overlap".into());
        }
        if self.vpp > 1 {
            parts.push(format!("vpp={}", self.vpp));
        }
        if self.frozen > 0 {
            parts.push(format!("frozen={}", self.frozen));
        }
        if self.zero == 3 && self.prefetch != 1 {
            parts.push(format!("prefetch={}", self.prefetch));
        }
        parts.join(",")
    }
}

/// The product of `factors` (user-supplied degrees), or an error naming it
/// (`what`, as `tp × pp`) and its factors when it passes `u32::MAX`.
fn checked_product(what: &str, factors: &[u32]) -> Result<u32, crate::Error> {
    factors.iter().try_fold(1u32, |acc, f| acc.checked_mul(*f)).ok_or_else(|| {
        let values: Vec<String> = factors.iter().map(u32::to_string).collect();
        crate::Error::Plan(format!("{what} = {} overflows: more than {}", values.join(" × "), u32::MAX))
    })
}

/// What runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Task {
    /// Pre-training (fine-tuning costs the same per step): forward, backward, gradient sync.
    Train,
    /// Inference prefill of `batch` prompts of `prompt` tokens per replica: time to first token.
    Prefill {
        /// Sequences per replica.
        batch: u32,
        /// Prompt tokens.
        prompt: u32,
    },
    /// Inference decode of `batch` sequences per replica at `context` tokens: time per output token.
    Decode {
        /// Sequences per replica.
        batch: u32,
        /// Context (prompt + generated) tokens whose KV cache is read.
        context: u32,
    },
}

impl Task {
    /// Name in outputs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Task::Train => "pretrain",
            Task::Prefill { .. } => "prefill",
            Task::Decode { .. } => "decode",
        }
    }
}

impl Plan {
    /// An inference plan where none is given: the widest TP that divides the GPUs, a node and
    /// the heads, replicas over the rest (12 GPUs of 8 a node: tp=4, dp=3).
    pub fn serving_default(model: &Transformer, cluster: &Cluster) -> Plan {
        let tp = (1..=cluster.gpus_per_node.min(cluster.gpus).max(1))
            .rev()
            .find(|&t| cluster.gpus.is_multiple_of(t) && cluster.gpus_per_node.is_multiple_of(t) && model.heads_split_over(t))
            .unwrap_or(1);
        Plan { tp, dp: cluster.gpus / tp, ..Plan::default() }
    }

    /// The transformer plan and task of a MAD-Max task file: `tp`, `ddp`, `fsdp`
    /// levels; the local transformer batch is the microbatch; inference is a
    /// prefill of the model's sequence length.
    pub fn from_madmax(t: &TaskConfig, seq: f64) -> Result<(Plan, Task), crate::Error> {
        let mut p = Plan::default();
        for (s, d) in t.transformer_parallel.iter().zip(&t.transformer_parallel_degree) {
            match s.as_str() {
                "tp" => p.tp = *d,
                "ddp" => p.dp = checked_product("the ddp × fsdp degrees", &[p.dp, *d])?,
                "fsdp" => {
                    p.dp = checked_product("the ddp × fsdp degrees", &[p.dp, *d])?;
                    p.zero = 3;
                }
                "pp" => p.pp = *d,
                other => return Err(crate::Error::Plan(format!("transformer_parallel {other:?} is not modelled"))),
            }
        }
        p.checked_gpus()?;
        p.microbatch = (t.local_transformer_bs.max(1.0)) as u32;
        let task = match t.kind.as_str() {
            "pretrain" | "finetune" => Task::Train,
            "inference" => Task::Prefill { batch: p.microbatch, prompt: seq as u32 },
            other => return Err(crate::Error::Plan(format!("task type {other:?}"))),
        };
        Ok((p, task))
    }
}

/// Where a group of `n` ranks with adjacent members `stride` apart sits:
/// members per node (1 when every member is on another node).
fn members_per_node(n: u32, stride: u32, gpus_per_node: u32) -> u32 {
    if n <= 1 {
        return 1;
    }
    if stride >= gpus_per_node {
        return 1;
    }
    (gpus_per_node / stride).clamp(1, n)
}

impl Transformer {
    /// The transformer of a MAD-Max model file (`LLM`, `LLM_MoE`, `ViT`): its
    /// FC layer has two matrices, attention full multi-head.
    pub fn from_madmax(m: &ModelConfig) -> Result<Transformer, crate::Error> {
        let (seq, vocab) = match m.kind.as_str() {
            "LLM" | "LLM_MoE" => (m.transformer_seq_len, m.entries_per_table),
            "ViT" if m.patch_dim > 0.0 => ((m.image_size / m.patch_dim).ceil().powi(2), m.patch_dim * m.patch_dim * 3.0),
            other => {
                return Err(crate::Error::Model(format!(
                    "tracecast's own models cover transformers (LLM, LLM_MoE, ViT) and plain DLRMs, not {other}: use --assumptions madmax"
                )));
            }
        };
        Ok(Transformer {
            name: m.name.clone(),
            layers: m.num_transformer_layers,
            hidden: m.attention_dim,
            heads: m.num_transformer_heads,
            kv_heads: m.num_transformer_heads,
            head_dim: m.attention_dim / m.num_transformer_heads.max(1.0),
            ffn: m.transformer_fc_dim,
            vocab,
            seq,
            swiglu: false,
            experts: m.num_experts.max(1.0),
            top_k: if m.num_experts > 1.0 { m.num_active_experts.max(1.0) } else { 1.0 },
            bytes: m.bytes_per_nonemb_param,
            causal: m.kind != "ViT",
            tied_embeddings: false,
            window: 0.0,
            windowed_layers: 0,
            shared_experts: 0.0,
            mla: None,
            dense_layers: 0,
            dense_ffn: 0.0,
        })
    }
}

/// How the note on a catalog system's node preset begins (the layout a plan is placed on).
const NODE_PRESET_NOTE: &str = "nodes as the catalog's node preset";

/// What a cluster differs in from its catalog entry and node preset: a
/// runs file's `system` fields, and `project`/`search` flags of the same names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct SystemOverrides {
    /// GPUs per node (default: the catalog's node preset).
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// Network bandwidth per GPU, GB/s (default: the node preset's NICs).
    #[serde(default)]
    pub nic_gbps_per_gpu: Option<f64>,
    /// HBM capacity, GB (a GPU variant).
    #[serde(default)]
    pub hbm_gb: Option<f64>,
    /// HBM bandwidth, GB/s (a GPU variant).
    #[serde(default)]
    pub hbm_gbps: Option<f64>,
}

impl SystemOverrides {
    /// These figures, each where given, else `other`'s.
    pub fn or(self, other: SystemOverrides) -> SystemOverrides {
        SystemOverrides {
            gpus_per_node: self.gpus_per_node.or(other.gpus_per_node),
            nic_gbps_per_gpu: self.nic_gbps_per_gpu.or(other.nic_gbps_per_gpu),
            hbm_gb: self.hbm_gb.or(other.hbm_gb),
            hbm_gbps: self.hbm_gbps.or(other.hbm_gbps),
        }
    }

    /// The figures given, by their runs-file key.
    pub fn given(&self) -> Vec<(&'static str, f64)> {
        [
            ("gpus_per_node", self.gpus_per_node.map(f64::from)),
            ("nic_gbps_per_gpu", self.nic_gbps_per_gpu),
            ("hbm_gb", self.hbm_gb),
            ("hbm_gbps", self.hbm_gbps),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }

    /// `cluster` with these figures in place of the catalog's, each named in its notes.
    ///
    /// (The node preset's layout, [`NODE_PRESET_NOTE`], is said unless one is given.)
    pub fn apply(&self, c: Cluster) -> Result<Cluster, crate::Error> {
        self.apply_as(c, "as given")
    }

    /// [`SystemOverrides::apply`], each figure's note ending in `said` (where it came from:
    /// "as given", "as node preset X gives").
    pub fn apply_as(&self, mut c: Cluster, said: &str) -> Result<Cluster, crate::Error> {
        let positive = |key: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(crate::Error::System(format!("{key} {}: must be a positive number", tracecast_calibrate::catalog::shown(v))))
            }
        };
        // A preset's layout, replaced by what is given: not said beside it.
        if self.gpus_per_node.is_some() || self.nic_gbps_per_gpu.is_some() {
            c.notes.retain(|n| !n.starts_with(NODE_PRESET_NOTE));
        }
        if let Some(g) = self.gpus_per_node {
            positive("gpus_per_node", f64::from(g))?;
            c.place_in_nodes_of(g, format!("{g} GPUs per node {said}"));
        }
        if let Some(nic) = self.nic_gbps_per_gpu {
            let nic = tracecast_calibrate::catalog::nic_gbps_per_gpu_given(nic)
                .map_err(|e| crate::Error::System(format!("nic_gbps_per_gpu {e}")))?;
            c.inter = Link { alpha_us: c.inter.alpha_us, busbw_gbps: nic * DEFAULT_INTER_LINK_EFFICIENCY };
            c.notes.push(format!("network {nic} GB/s per GPU {said}"));
            if let Some(p) = c.prices.as_mut() {
                // A profile's fit across nodes is of the network it was traced on:
                // the given one replaces it (the pricing layer prices over it).
                if p.links_given[1] {
                    p.links_given[1] = false;
                    c.notes.push("the profile's link fit across nodes set aside: it is of the traced network, not the given one".into());
                }
                p.nic_gbps_per_gpu = Some(nic);
                c.refresh_pricing_notes();
            } else {
                c.notes.push(format!("bus bandwidth across nodes {:.0} % of the network", DEFAULT_INTER_LINK_EFFICIENCY * 100.0));
            }
        }
        // A memory of 1 GB to 1 PB, read at 1 GB/s to 1 PB/s: every GPU's HBM lies inside
        // (16 GB to 288 GB; 0.9 to 8 TB/s); outside, a step prices at 0 or at infinity.
        let within = |key: &str, v: f64| {
            let v = positive(key, v)?;
            if (1.0..=1e6).contains(&v) {
                Ok(v)
            } else {
                Err(crate::Error::System(format!("{key} {}: from 1 to 1000000", tracecast_calibrate::catalog::shown(v))))
            }
        };
        if let Some(gb) = self.hbm_gb {
            c.hbm_bytes = within("hbm_gb", gb)? * 1e9;
            c.notes.push(format!("HBM {gb} GB as given"));
        }
        if let Some(bw) = self.hbm_gbps {
            c.hbm_bw = within("hbm_gbps", bw)? * 1e9;
            c.notes.push(format!("HBM bandwidth {bw} GB/s as given"));
            // The pricing layer streams a GEMM's operands at the variant's bandwidth too (a faster
            // HBM had sped up nothing it priced: decode's GEMMs kept the catalog part's time).
            if let Some(p) = c.prices.as_mut() {
                p.gpu.hbm_gbps = bw;
            }
        }
        Ok(c)
    }
}

impl Cluster {
    /// `gpus` GPUs of catalog entry `gpu_id` in nodes of its node preset (8
    /// per node without one); efficiencies and links from `device` (a
    /// calibration profile of that GPU) where it has them, else the defaults.
    pub fn from_catalog(
        catalog: &Catalog,
        gpu_id: &str,
        gpus: u32,
        dtype: Dtype,
        device: Option<&DeviceModel>,
    ) -> Result<Cluster, crate::Error> {
        let gpu = catalog.gpu(gpu_id).map_err(|e| crate::Error::System(e.to_string()))?;
        let node = catalog.node_of(&gpu.id);
        let per_node = catalog.gpus_per_node(Some(&gpu.id), None);
        let peak =
            gpu.peak_flops(dtype).ok_or_else(|| crate::Error::System(format!("{}: the catalog has no {} peak", gpu.id, dtype.as_str())))?;
        let mut notes = Vec::new();
        let (mut gemm_efficiency, mut gemm_overhead_s, mut memory_efficiency) =
            (DEFAULT_GEMM_EFFICIENCY, DEFAULT_GEMM_OVERHEAD_S, DEFAULT_MEMORY_EFFICIENCY);
        let (nic, nic_rule) = catalog.nic_gbps_per_gpu(&gpu.id);
        // The node layout the plan is placed on, said where a preset gives it too (H100's 8 GPUs
        // a node and 50 GB/s of network had shown only inside the collectives' note).
        notes.push(match node {
            Some(n) => format!(
                "{NODE_PRESET_NOTE} {}: {} GPUs a node, {} × {} GB/s NICs (gpus_per_node / nic_gbps_per_gpu state yours)",
                n.id, n.gpus, n.nics, n.nic_gbps
            ),
            None => nic_rule,
        });
        let mut intra = Link::from_si(DEFAULT_INTRA_ALPHA_S, gpu.link_gbps * 1e9 * DEFAULT_INTRA_LINK_EFFICIENCY);
        let mut inter = Link::from_si(DEFAULT_INTER_ALPHA_S, nic * 1e9 * DEFAULT_INTER_LINK_EFFICIENCY);
        let mut from_profile = Vec::new();
        let mut links_given = [false; 2];
        let mut fitted_over = [None; 2];
        let mut attention_efficiency = None;
        if let Some(dev) = device {
            if let Some((eta, t0)) = dev.efficiency(KernelClass::Gemm, Some(dtype)) {
                gemm_efficiency = eta;
                gemm_overhead_s = t0.max(0.0) * 1e-6;
                // Only a GEMM no measured table prices takes them: said, since the GEMM note above
                // names the table that prices the rest (its correction may be left out at their size).
                from_profile.push(format!("GEMM η {eta:.3}, t0 {t0:.1} µs (for the GEMMs a measured table does not price)"));
            }
            if let Some((eta, _)) = dev.efficiency(KernelClass::Attention, Some(dtype)) {
                attention_efficiency = Some(eta);
                from_profile.push(format!("attention η {eta:.3}"));
            }
            if let Some((eta, _)) = dev.efficiency(KernelClass::Elementwise, Some(dtype)) {
                memory_efficiency = eta.min(1.0);
                from_profile.push(format!("HBM η {eta:.3}"));
            }
            for (k, (domain, link)) in [("intra", &mut intra), ("inter", &mut inter)].into_iter().enumerate() {
                if let Some(m) = dev.link(Collective::AllReduce, None, domain) {
                    links_given[k] = true;
                    let l = m.fit;
                    fitted_over[k] =
                        l.bus_bytes_range.map(|bus_bytes| tracecast_calibrate::pricing::FittedOver { bus_bytes, ranks: l.group_size });
                    *link = Link { alpha_us: l.alpha_us, busbw_gbps: l.busbw_gbps };
                    let group = l.group_size.map_or("?".into(), |n| n.to_string());
                    from_profile.push(format!(
                        "{domain}-node α {:.1} µs, B {:.1} GB/s (all-reduce fit over {group} ranks)",
                        l.alpha_us, l.busbw_gbps
                    ));
                }
            }
        }
        // GEMMs at their shapes through the pricing layer, corrected by the profile's traces where it has that.
        let pricing = std::sync::Arc::new(tracecast_calibrate::pricing::Pricing::new(
            catalog.clone(),
            tracecast_calibrate::measured::Measurements::shared(),
        ));
        let profile = device.and_then(|d| d.profile.clone());
        let correction = profile.as_ref().and_then(|p| p.table_correction(KernelClass::Gemm, Some(dtype)));
        let mut priced_by = pricing_notes(&pricing, gpu, dtype, correction, (per_node, gpus), links_given, fitted_over, None);
        // A fit the profile holds but the model cannot use is said, as `replay --target` says it.
        notes.extend(device.into_iter().flat_map(|d| d.rejected_fits()).map(|why| format!("calibration profile: {why}")));
        // Fits of the classes above in another number format than the model's price none of its
        // ops: said, so that a profile of FP32 traces is not read as empty (or as used).
        let other_formats: Vec<String> = device
            .and_then(|d| d.profile.as_ref())
            .into_iter()
            .flat_map(|p| &p.kernels)
            .filter(|f| matches!(f.class, KernelClass::Gemm | KernelClass::Attention | KernelClass::Elementwise))
            .filter(|f| f.dtype != Some(dtype))
            .filter(|f| device.and_then(|d| d.kernel_fit(f.class, Some(dtype))).is_none_or(|used| !std::ptr::eq(used, *f)))
            .map(|f| format!("{}/{}", f.class.as_str(), f.dtype.map_or("unknown", Dtype::as_str)))
            .collect();
        let other_formats = if other_formats.is_empty() {
            String::new()
        } else {
            format!(" (its fits of other number formats, {}, do not price the model's {} ops)", other_formats.join(", "), dtype.as_str())
        };
        if from_profile.is_empty() {
            // Collectives are always the pricing layer's (its notes above): only compute has defaults.
            notes.push(format!(
                "no kernel fits{} in the calibration profile{}{other_formats}: where no measurement prices an op, catalog peaks with default GEMM η {DEFAULT_GEMM_EFFICIENCY}, t0 {} µs, HBM η {DEFAULT_MEMORY_EFFICIENCY}",
                if other_formats.is_empty() { String::new() } else { format!(" of {}", dtype.as_str()) },
                if correction.is_some() {  " (its correction of the GEMM table: the GEMM note above)" } else { "" },
                DEFAULT_GEMM_OVERHEAD_S * 1e6,
            ));
        } else {
            let of = device.map_or("the calibration profile".to_string(), |d| d.source.clone());
            notes.push(format!("from {of}: {}; the rest catalog defaults{other_formats}", from_profile.join(", ")));
            priced_by.attention_at_gemm_eta = attention_efficiency.is_none();
        }
        Ok(Cluster {
            name: format!("{} × {gpus}", gpu.id),
            gpus,
            gpus_per_node: per_node,
            peak_flops: peak,
            hbm_bw: gpu.hbm_bytes_per_s(),
            hbm_bytes: gpu.memory_gb * 1e9,
            gemm_efficiency,
            gemm_overhead_s,
            attention_efficiency,
            memory_efficiency,
            intra,
            inter,
            overlap_slowdown: DEFAULT_OVERLAP_SLOWDOWN,
            priced_by,
            notes,
            fp8_peak_flops: gpu.peak_flops(Dtype::Fp8),
            prices: Some(MeasuredPrices { pricing, gpu: gpu.clone(), dtype, profile, links_given, fitted_over, nic_gbps_per_gpu: None }),
        })
    }

    /// [`Cluster::from_catalog`] in the dtype a model of `bytes_per_param`
    /// runs in: 16-bit models in BF16 where the GPU has it, else FP16 (V100);
    /// 32-bit models in TF32, else FP32.
    pub fn for_model(
        catalog: &Catalog,
        gpu_id: &str,
        gpus: u32,
        bytes_per_param: f64,
        device: Option<&DeviceModel>,
    ) -> Result<Cluster, crate::Error> {
        let dtypes: &[Dtype] = if bytes_per_param >= 4.0 { &[Dtype::Tf32, Dtype::Fp32] } else { &[Dtype::Bf16, Dtype::Fp16] };
        let mut last = crate::Error::System(format!("{gpu_id}: no 16- or 32-bit peak in the catalog"));
        for &dtype in dtypes {
            match Cluster::from_catalog(catalog, gpu_id, gpus, dtype, device) {
                Ok(c) => return Ok(c),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The cluster of a MAD-Max system file: its utilization factors become
    /// the efficiencies, its effective link rates the bus bandwidths, with
    /// the default latencies added.
    pub fn from_madmax(s: &SystemConfig, bytes_per_param: f64) -> Result<Cluster, crate::Error> {
        let peak = s.peak_for(bytes_per_param).map_err(crate::Error::System)?;
        let per_node = s.num_devices / s.num_nodes.max(1);
        // Half the file's rates, as MAD-Max reads them (they state both directions): said with
        // the rates they give, per GPU (a user reading 25 GB/s NICs had expected 25).
        let (intra_bps, inter_bps) = s.link_rates_bps();
        Ok(Cluster {
            name: s.name.clone(),
            gpus: s.num_devices,
            gpus_per_node: per_node.max(1),
            peak_flops: peak,
            hbm_bw: s.mem_bw,
            hbm_bytes: s.mem_cap,
            gemm_efficiency: s.flops_util,
            gemm_overhead_s: DEFAULT_GEMM_OVERHEAD_S,
            attention_efficiency: None,
            memory_efficiency: s.mem_bw_util,
            intra: Link::from_si(DEFAULT_INTRA_ALPHA_S, intra_bps),
            inter: Link::from_si(DEFAULT_INTER_ALPHA_S, inter_bps),
            overlap_slowdown: 0.0,
            fp8_peak_flops: None,
            prices: None,
            priced_by: PricingNotes::default(),
            notes: vec![format!(
                "system {}: its flops_util ({}) and mem_bw_util ({}) as η, its effective link rates as bus bandwidth — half the file's rates × their utilization, as MAD-Max reads them (the file states both directions): {:.1} GB/s in a node (nvlinks × bw_per_nvlink / 2 × nvlink_util), {:.1} GB/s per GPU across nodes (ibroce ports × ibroce_bw / 2 × ibroce_util ÷ {} GPUs a node) — α {} / {} µs added, {} µs per GEMM",
                s.name,
                s.flops_util,
                s.mem_bw_util,
                intra_bps / 1e9,
                inter_bps / 1e9,
                per_node.max(1),
                DEFAULT_INTRA_ALPHA_S * 1e6,
                DEFAULT_INTER_ALPHA_S * 1e6,
                DEFAULT_GEMM_OVERHEAD_S * 1e6
            )],
        })
    }

    fn link_time(&self, link: Link, bytes: f64) -> f64 {
        link.transfer_s(bytes)
    }

    /// Prices GEMMs and in-node collectives from `measurements` (the shipped
    /// base and the user's files) instead of the shipped base alone; a cluster
    /// without measured prices (MAD-Max's assumptions) is left as it is.
    ///
    /// The user's measurements across nodes describe their cluster: unless the node size is
    /// given (`node_size_given`), the GPUs are placed in nodes of the size they were taken at
    /// (Polaris' 4 A100s a node had been placed 8 a node, their curves left unused in silence).
    pub fn use_measurements(&mut self, measurements: std::sync::Arc<tracecast_calibrate::measured::Measurements>, node_size_given: bool) {
        let Some(p) = &mut self.prices else { return };
        let catalog = p.pricing.catalog.clone();
        p.pricing = std::sync::Arc::new(tracecast_calibrate::pricing::Pricing::new(catalog, measurements));
        let files = p.pricing.measurements.user_files.join(", ");
        let theirs = p.pricing.measurements.users_gpus_per_node(&p.gpu).filter(|(g, _)| *g != self.gpus_per_node);
        self.notes.push(format!("measurements of {files} added to the shipped base"));
        match theirs {
            Some((g, sources)) if !node_size_given => {
                self.notes.retain(|n| !n.starts_with(NODE_PRESET_NOTE));
                // (Its notes on what priced the work are rebuilt there, for the new nodes.)
                self.place_in_nodes_of(
                    g,
                    format!(
                        "{g} GPUs per node, as your measurements ({}) across nodes were taken (gpus_per_node states another)",
                        sources.join(", ")
                    ),
                );
            }
            other => {
                self.refresh_pricing_notes();
                if let Some((g, sources)) = other {
                    self.notes.push(format!(
                        "your measurements ({}) were taken at {g} GPUs per node, not this system's {}: they price none of its collectives across nodes",
                        sources.join(", "),
                        self.gpus_per_node
                    ));
                }
            }
        }
    }

    /// The GPUs placed `g` to a node, said by `why`.
    fn place_in_nodes_of(&mut self, g: u32, why: String) {
        self.gpus_per_node = g;
        self.refresh_pricing_notes();
        self.notes.push(why);
        // GPUs that do not fill whole nodes: the last node is partial (said, not refused).
        if self.gpus > g && !self.gpus.is_multiple_of(g) {
            self.notes.push(format!(
                "{} GPUs do not fill nodes of {g}: {} full nodes and one of {}; groups are placed as if every node were full",
                self.gpus,
                self.gpus / g,
                self.gpus % g
            ));
        }
    }

    /// The notes on what priced GEMMs, attention and collectives rebuilt after
    /// the base or the network changed.
    fn refresh_pricing_notes(&mut self) {
        let Some(p) = &self.prices else { return };
        let correction = p.profile.as_ref().and_then(|f| f.table_correction(KernelClass::Gemm, Some(p.dtype)));
        let eta = self.priced_by.attention_at_gemm_eta;
        self.priced_by = pricing_notes(
            &p.pricing,
            &p.gpu,
            p.dtype,
            correction,
            (self.gpus_per_node, self.gpus),
            p.links_given,
            p.fitted_over,
            p.nic_gbps_per_gpu,
        );
        self.priced_by.attention_at_gemm_eta = eta;
    }

    /// Every note: what priced the work, then where the other figures come from.
    pub fn all_notes(&self) -> Vec<String> {
        self.priced_by.lines(self.gpus, self.gpus_per_node).chain(self.notes.iter().cloned()).collect()
    }

    /// The profile's α-β fits of the links in a node and across nodes where they price them (the
    /// cluster's links then hold them; bands are the pricing layer's to state, not the model's).
    fn link_fits(&self) -> [Option<TierFit>; 2] {
        let given = self.prices.as_ref().map_or([false; 2], |p| p.links_given);
        let over = self.prices.as_ref().map_or([None; 2], |p| p.fitted_over);
        // What each fit was fitted on goes with it: a price outside that span is said to extrapolate.
        let fit = |link, t: usize| TierFit { fitted_over: over[t], ..TierFit::given(link) };
        [given[0].then(|| fit(self.intra, 0)), given[1].then(|| fit(self.inter, 1))]
    }

    /// A collective over `n` ranks, `g` of them per node, priced by the
    /// pricing layer with the profile's α-β fits of the tiers it has
    /// ([`Pricing::collective_with_fits`](tracecast_calibrate::pricing::Pricing::collective_with_fits)),
    /// seconds — the price `hw cost --profile` gives; `None` where the cluster
    /// has no pricing layer (MAD-Max's system files).
    fn priced_collective(&self, collective: Collective, bytes: f64, n: u32, g: u32) -> Option<f64> {
        let p = self.prices.as_ref()?;
        if n < 2 || bytes <= 0.0 {
            return None;
        }
        let g = g.min(n).min(self.gpus_per_node.max(1));
        let q = CollectiveQuery::new(collective, bytes, n, g).over_network(p.nic_gbps_per_gpu);
        Some(p.pricing.collective_with_fits(&p.gpu, &q, self.link_fits())?.time_us * 1e-6)
    }

    /// A plan's attention kernel family that no measurement names is a typo, not a kernel
    /// to substitute: refused, with the names there are (a cluster without the pricing
    /// layer, MAD-Max's, has no names to hold it to).
    pub fn check_attention_kernel(&self, plan: &Plan) -> Result<(), crate::Error> {
        let (Some(k), Some(p)) = (&plan.attention_kernel, &self.prices) else { return Ok(()) };
        // Every projection of a search checks: a scan, the sorted list only for the error.
        if p.pricing.measurements.attention.iter().any(|r| r.kernel.eq_ignore_ascii_case(k)) {
            return Ok(());
        }
        Err(crate::Error::Plan(format!(
            "attention={k}: no measured attention kernel family of that name (flash, materialized, or one of: {})",
            p.pricing.measurements.attention_families(&[]).join(", ")
        )))
    }

    /// A pipeline's point-to-point transfer of `bytes` between stages, in a
    /// node or across nodes: the profile's fit of that tier where given, else
    /// the pricing layer's point-to-point price, else the cluster's link.
    pub fn point_to_point(&self, bytes: f64, across_nodes: bool) -> f64 {
        let link = if across_nodes { self.inter } else { self.intra };
        self.prices
            .as_ref()
            .and_then(|p| p.pricing.point_to_point_with_fits(&p.gpu, bytes, across_nodes, p.nic_gbps_per_gpu, self.link_fits()))
            .map_or_else(|| link.transfer_s(bytes), |p| p.time_us * 1e-6)
    }

    /// All-gather (or reduce-scatter) of a buffer of `bytes` (the full,
    /// gathered size) over `n` ranks, `g` of them per node: the inter-node
    /// step moves (k−1)/n of it per GPU over the NICs, the intra-node step
    /// (g−1)/g over NVLink.
    pub fn all_gather(&self, bytes: f64, n: u32, g: u32) -> f64 {
        self.hierarchical(Collective::AllGather, 1.0, bytes, n, g)
    }

    /// Reduce-scatter of a buffer of `bytes` (the full, unscattered size) over
    /// `n` ranks, `g` of them per node: the all-gather's bytes, priced as itself.
    pub fn reduce_scatter(&self, bytes: f64, n: u32, g: u32) -> f64 {
        self.hierarchical(Collective::ReduceScatter, 1.0, bytes, n, g)
    }

    /// All-reduce (hierarchical across nodes): twice the all-gather's bytes on
    /// each tier, one latency α per tier — the convention of the profile's link
    /// fits (t = α + k·S/B with the all-reduce bus factor k = 2(n−1)/n).
    pub fn all_reduce(&self, bytes: f64, n: u32, g: u32) -> f64 {
        self.hierarchical(Collective::AllReduce, 2.0, bytes, n, g)
    }

    /// A collective over `n` ranks, `g` per node: by the pricing layer, else
    /// (a profile's fit, MAD-Max's rates) `passes` × the all-gather's bytes per
    /// tier over the cluster's links, one α per tier.
    fn hierarchical(&self, collective: Collective, passes: f64, bytes: f64, n: u32, g: u32) -> f64 {
        if n <= 1 {
            return 0.0;
        }
        if let Some(t) = self.priced_collective(collective, bytes, n, g) {
            return t;
        }
        let g = g.clamp(1, n);
        let nodes = n.div_ceil(g);
        let (nf, gf, kf) = (f64::from(n), f64::from(g), f64::from(nodes));
        let mut t = 0.0;
        if g > 1 {
            t += self.link_time(self.intra, passes * (gf - 1.0) / gf * bytes);
        }
        if nodes > 1 {
            t += self.link_time(self.inter, passes * (kf - 1.0) / nf * bytes);
        }
        t
    }

    /// All-to-all of `bytes` per GPU over `n` ranks, `g` per node: the
    /// intra- and inter-node shares move at the same time.
    pub fn all_to_all(&self, bytes: f64, n: u32, g: u32) -> f64 {
        if n <= 1 {
            return 0.0;
        }
        if let Some(t) = self.priced_collective(Collective::AllToAll, bytes, n, g) {
            return t;
        }
        let g = g.clamp(1, n);
        let (nf, gf) = (f64::from(n), f64::from(g));
        let intra = (gf - 1.0) / nf * bytes;
        let inter = (nf - gf) / nf * bytes;
        let ti = if intra > 0.0 { self.link_time(self.intra, intra) } else { 0.0 };
        let te = if inter > 0.0 { self.link_time(self.inter, inter) } else { 0.0 };
        ti.max(te)
    }

    /// `batch` GEMMs [m, k] × [k, n]: (forward, backward) seconds, the
    /// backward being the data gradient [m, n] × [n, k] and the weight
    /// gradient [k, m] × [m, n]. Priced at these shapes by the pricing layer
    /// where the cluster has it, else by η and t0 (backward twice the forward).
    pub(crate) fn gemm_at(&self, batch: f64, m: f64, k: f64, n: f64, fp8: bool) -> (f64, f64) {
        (self.batched_gemm(batch, m, k, n, fp8), self.batched_gemm(batch, m, n, k, fp8) + self.batched_gemm(batch, k, m, n, fp8))
    }

    /// `batch` GEMMs [m, k] × [k, n] in one kernel (in FP8 where `fp8` and the GPU has it),
    /// seconds: at their shape by the pricing layer where it prices this GPU, else by η and t0.
    pub(crate) fn batched_gemm(&self, batch: f64, m: f64, k: f64, n: f64, fp8: bool) -> f64 {
        let priced = self.prices.as_ref().and_then(|p| {
            let dtype = if fp8 && self.fp8_peak_flops.is_some() { Dtype::Fp8 } else { p.dtype };
            p.time_s(batch, m, k, n, dtype)
        });
        priced.unwrap_or_else(|| {
            let flops = 2.0 * batch * m * k * n;
            if fp8 { self.gemm_fp8(flops) } else { self.gemm(flops) }
        })
    }

    /// A GEMM of `flops` (one kernel).
    pub(crate) fn gemm(&self, flops: f64) -> f64 {
        self.gemm_overhead_s + flops / (self.gemm_efficiency * self.peak_flops)
    }

    /// Causal flash attention of `batch` sequences of `seq` tokens, `heads`
    /// heads of `head_dim` on this GPU, doing `flops` forward FLOPs (a context-
    /// parallel rank's share): (forward, backward) seconds from the GPU's measured
    /// attention kernels (forward rows for the forward, forward-plus-backward rows
    /// less it for the backward); `None` without measurements of both. Without a
    /// backward (`train` false: a prefill) the forward alone, from the family's — or the
    /// fastest family's — forward rows: a server runs the fastest forward kernel it has.
    #[allow(clippy::too_many_arguments)]
    fn attention_at(
        &self,
        batch: f64,
        heads: f64,
        seq: f64,
        head_dim: f64,
        flops: f64,
        kernel: Option<&str>,
        train: bool,
    ) -> Option<(f64, f64, String)> {
        let p = self.prices.as_ref()?;
        let shape = |backward| tracecast_calibrate::pricing::AttentionShape { batch, heads, seq, head_dim, causal: true, backward };
        let (fwd, both) = (shape(false), shape(true));
        let basis = |price: &tracecast_calibrate::pricing::Price| {
            format!(
                "{ATTENTION_NOTE} at its shapes: {} ({} heads of {head_dim} over {seq} tokens: {})",
                price.rule.describe(),
                heads,
                price.basis
            )
        };
        // The shapes' work scaled to this GPU's share of it (1/cp of the sequence, another
        // width), then floored at the GPU's shortest kernel: floored before the scaling, a
        // context-parallel rank's attention came out under it.
        let floor = |parts: &tracecast_calibrate::pricing::AttentionParts| parts.floor_us.unwrap_or(0.0) * 1e-6;
        if !train {
            let parts = p.pricing.attention_parts(&p.gpu, &fwd, kernel)?;
            let f = (parts.work.time_us * 1e-6 * flops / fwd.flops()).max(floor(&parts));
            return Some((f, (2.5 * f).max(floor(&parts)), basis(&parts.priced())));
        }
        // One kernel family for both passes (a framework runs one attention kernel): the
        // fastest measured forward plus backward, and that family's forward where the same
        // rule measured it, else its forward-plus-backward time split by the FLOPs (the
        // same rate). Taking the fastest forward of any family paired FA3's forward-only
        // chart with FA2's forward plus backward on H100: a forward 2× too fast, counted
        // twice under full recomputation.
        let both_parts = p.pricing.attention_parts(&p.gpu, &both, kernel)?;
        let fb = both_parts.work.time_us * 1e-6 * flops / fwd.flops();
        let f = p
            .pricing
            .attention_work_of_family(&p.gpu, &fwd, &both_parts.family, kernel.is_some())
            .filter(|x| x.rule == both_parts.work.rule)
            .map_or(fb * fwd.flops() / both.flops(), |x| x.time_us * 1e-6 * flops / fwd.flops());
        // Never under 1.5× the forward: the backward does 2.5× its FLOPs; each pass a kernel at least.
        let floor = floor(&both_parts);
        Some((f.max(floor), (fb - f).max(1.5 * f).max(floor), basis(&both_parts.priced())))
    }

    /// A fused attention kernel of `flops` (one kernel).
    fn attention(&self, flops: f64) -> f64 {
        self.gemm_overhead_s + flops / (self.attention_efficiency.unwrap_or(self.gemm_efficiency) * self.peak_flops)
    }

    /// A GEMM of `flops` in FP8 (the 16-bit GEMM efficiency at the FP8 peak).
    fn gemm_fp8(&self, flops: f64) -> f64 {
        match self.fp8_peak_flops {
            Some(peak) => self.gemm_overhead_s + flops / (self.gemm_efficiency * peak),
            None => self.gemm(flops),
        }
    }

    /// An HBM-bound pass over `bytes`.
    fn memory(&self, bytes: f64) -> f64 {
        bytes / (self.memory_efficiency * self.hbm_bw)
    }
}

/// HBM bytes of one trained parameter's optimizer step under mixed precision, as frameworks
/// run it: fused Adam over FP32 parameters (read parameter, gradient, momentum and variance,
/// write all but the gradient: 28 B; PyTorch's `fused=True`, Apex's and Megatron-LM's
/// multi-tensor kernels), the 16-bit gradient cast into the FP32 one it steps (read 2 B, write
/// 4) and the updated FP32 parameter cast back into the 16-bit one the model computes with
/// (read 4, write 2): Megatron-LM's main parameters (with its gradient-accumulation fusion the
/// weight-gradient GEMMs write FP32 gradients and the first cast is not run: 6 B over), FSDP2's
/// FP32 shards under `param_dtype=bf16`, autocast over FP32 parameters (its casts run each
/// microbatch; counted once). `fixtures/h200/memory-ops.csv` and the bf16-parameter steps of `fixtures/h200/runs.json`:
/// on an H200, fused AdamW alone 8.2 ps a parameter (28 B at 3.43 TB/s, 81 % of its measured
/// streaming rate) and the step with its two casts 13.9 ps in the traced bf16-parameter step.
const OPTIMIZER_BYTES_PER_PARAMETER: f64 = 28.0 + 6.0 + 6.0;

/// HBM bytes the loss moves per logit of `bytes`-wide activations. Prefill writes FP32 logits,
/// read once. Training runs the cross-entropy as frameworks do, unfused, on logits cast to FP32
/// (torchtitan's and Hugging Face's `cross_entropy(logits.float(), …)`; Megatron-LM's
/// vocabulary-parallel cross-entropy casts too and moves a few bytes more). Its passes, by op
/// semantics — a row of the vocabulary (≥ 128 KB in FP32) is more than a thread block keeps on
/// chip, so each reduction over it reads it again:
/// - forward: the cast (read the 16-bit logit, write 4 B); log-softmax's max, sum of
///   exponentials and output passes (read 12 B, write 4 B);
/// - backward: NLL's dense gradient (write 4 B); log-softmax's backward, one pass summing the
///   incoming gradient and one reading it and the output to write the input's gradient (read
///   12 B, write 4 B); the cast back (read 4 B, write the 16-bit one).
///
/// 48 bytes a 16-bit logit, 36 an FP32 one. The previous rule (12 B: logits written, read,
/// gradient written) priced a fifth of what `fixtures/h200/memory-ops.csv` measures.
fn loss_bytes_per_logit(bytes: f64, task: Task) -> f64 {
    if task != Task::Train {
        return 2.0 * 4.0;
    }
    let cast = if bytes < 4.0 { 2.0 * (bytes + 4.0) } else { 0.0 };
    cast + 16.0 + 4.0 + 16.0
}

/// Per-layer costs of one microbatch on one GPU.
struct LayerCosts {
    /// Context parallelism's K/V all-gather (forward) or reduce-scatter (backward).
    cp_kv: f64,
    attn_f: f64,
    mlp_f: f64,
    attn_core_f: f64,
    /// Backward GEMM time of the attention block.
    attn_b: f64,
    mlp_b: f64,
    attn_core_b: f64,
    /// Norms, activations and residuals (HBM-bound), forward.
    elementwise_f: f64,
    /// Their backward.
    elementwise_b: f64,
    /// The attention block's tensor-parallel collective (all-reduce, or its
    /// sequence-parallel all-gather and reduce-scatter), each way.
    tp_comm: f64,
    /// The share of each tensor-parallel collective's time that is its
    /// reduce-scatter under sequence parallelism (the rest its all-gather); 0: an all-reduce.
    tp_rs_share: f64,
    /// The MLP block's (none where experts fold over the TP ranks).
    mlp_tp_comm: f64,
    /// TP communication overlapped with the GEMMs beside it (`tp_overlap`): the
    /// share of each TP collective that cannot overlap (the last of the `tp`
    /// chunks of its reduce-scatter half, 1 / 2tp), 0 without the overlap.
    tp_exposed_share: f64,
    /// Pipeline transfers beside compute (`p2p_overlap`) instead of before and after it.
    p2p_overlap: bool,
    /// `recompute=op`: the matmuls, memory-bound ops and tensor-parallel collectives its
    /// backward recomputes (GEMM, HBM, collective), per layer.
    op_sac: (f64, f64, f64),
    moe_a2a: f64,
    attn_gather: f64,
    mlp_gather: f64,
    /// The weights gathered again for the backward (ZeRO-3); ZeRO-2 keeps the forward's.
    gathers_in_backward: bool,
    attn_grad: f64,
    mlp_grad: f64,
    grad_kind: OpKind,
    /// Gradients synchronized after the whole backward instead of behind it layer by layer.
    grad_after: bool,
    /// A single stage's input embedding and output head (the FSDP root unit's weights):
    /// gathered once before the first layer (the root keeps them through the backward),
    /// the head's gradient reduced behind its backward (DDP and ZeRO buckets fill in the
    /// order gradients are ready), the embedding's — and under FSDP the whole root's —
    /// after the whole backward, when the embedding's gradient exists.
    embed_gather: f64,
    head_grad: f64,
    embed_grad: f64,
    /// Output head GEMM (vocabulary projection) and the loss over the logits, forward.
    head_gemm_f: f64,
    head_loss_f: f64,
    /// Compute's slowdown under concurrent communication (the cluster's `overlap_slowdown`).
    contention: f64,
}

/// Projects one iteration of `task` for `model` on `cluster` with `plan`.
pub fn project(model: &Transformer, cluster: &Cluster, plan: &Plan, task: Task) -> Result<Projection, crate::Error> {
    project_timeline(model, cluster, plan, task).map(|x| x.0)
}

/// The most layers a projection simulates: each is a few dozen tasks of a stage's
/// timeline (about 2.6 KB), and the deepest published models have under 200.
pub const MAX_LAYERS: usize = 100_000;

/// The longest step a projection prices, ms (a year).
const MAX_STEP_MS: f64 = 365.0 * 24.0 * 3600.0 * 1e3;

/// Checks that `plan` can run `model` on `cluster` at all.
fn check(model: &Transformer, cluster: &Cluster, plan: &Plan) -> Result<(), crate::Error> {
    let (tp, pp) = (plan.tp, plan.pp);
    if model.layers > MAX_LAYERS {
        return Err(crate::Error::Model(format!("layers {}: more than the {MAX_LAYERS} a projection simulates", model.layers)));
    }
    let gpus = plan.checked_gpus()?;
    if gpus != cluster.gpus {
        // `ep=8` alone reads as eight GPUs of experts; it adds none.
        let ep =
            if plan.ep > 1 { " (ep places the experts over the data-parallel ranks and adds no GPUs: dp=8,ep=8 on 8 GPUs)" } else { "" };
        return Err(crate::Error::Plan(format!("tp × cp × pp × dp = {gpus} but the cluster has {} GPUs{ep}", cluster.gpus)));
    }
    if tp > cluster.gpus_per_node {
        return Err(crate::Error::Plan(format!("tp={tp} spans nodes ({} GPUs per node)", cluster.gpus_per_node)));
    }
    cluster.check_attention_kernel(plan)?;
    // Heads split over TP ranks; fewer KV heads than ranks are replicated.
    if !model.heads_split_over(tp) {
        return Err(crate::Error::Plan(format!("{} heads / {} KV heads do not divide over tp={tp}", model.heads, model.kv_heads)));
    }
    if (model.layers as u64) < u64::from(pp) {
        return Err(crate::Error::Plan(format!("{} layers cannot fill pp={pp} stages", model.layers)));
    }
    // Interleaved: every model chunk of a stage holds a layer, but the first stage's first chunk
    // can hold the input embedding and the last stage's last the loss in its place (Megatron-Core's
    // `account_for_embedding_in_pipeline_split` and `account_for_loss_in_pipeline_split`, which
    // Megatron-Bridge's Llama 3.1 405B recipe sets: 126 layers on pp=16 × vpp=8, the end stages
    // 7 layers and the embedding or the loss) where `first=` / `last=` do not set that stage.
    if plan.vpp > 1 && pp <= 1 {
        return Err(crate::Error::Plan(format!(
            "vpp={}: virtual stages split a pipeline's stages into model chunks: they need pp ≥ 2",
            plan.vpp
        )));
    }
    if plan.vpp > 1 && pp > 1 {
        let counts = stage_layer_counts(model.layers, pp, plan.first_stage_layers, plan.last_stage_layers)?;
        let last = counts.len() - 1;
        for (stage, &n) in counts.iter().enumerate() {
            let end = match stage {
                0 => plan.first_stage_layers.is_none().then_some("the embedding"),
                s if s == last => plan.last_stage_layers.is_none().then_some("the loss"),
                _ => None,
            };
            if n + usize::from(end.is_some()) < plan.vpp as usize {
                return Err(crate::Error::Plan(format!(
                    "vpp={}: pipeline stage {stage} holds {n} layers{} for {} model chunks",
                    plan.vpp,
                    end.map_or(String::new(), |e| format!(" and {e}")),
                    plan.vpp
                )));
            }
        }
    }
    if plan.fp8 && cluster.fp8_peak_flops.is_none() {
        return Err(crate::Error::Plan(format!("fp8: {} has no FP8 peak in the catalog", cluster.name)));
    }
    if plan.cp > 1 && !(model.seq as u64).is_multiple_of(2 * u64::from(plan.cp)) {
        return Err(crate::Error::Plan(format!(
            "cp={}: the sequence of {} tokens does not split into 2·cp load-balanced chunks",
            plan.cp, model.seq
        )));
    }
    if plan.frozen as usize >= model.layers {
        return Err(crate::Error::Plan(format!("frozen={} leaves none of the {} layers to train", plan.frozen, model.layers)));
    }
    if plan.frozen > 0 && plan.pp > 1 {
        return Err(crate::Error::Plan("frozen layers are modelled without pipeline parallelism (pp=1)".into()));
    }
    // Expert parallelism within the data-parallel ranks, or folded over tp × cp × dp: the plan's one rule.
    // Which condition failed is said (one message for all three had left the user to guess).
    if plan.ep > 1 {
        let why = if model.experts < 2.0 {
            Some(format!("{} is not a mixture of experts", model.name))
        } else if !(model.experts as u32).is_multiple_of(plan.ep) {
            Some(format!("{}'s {} experts do not divide by it", model.name, model.experts))
        } else if !plan.expert_ranks().is_multiple_of(u64::from(plan.ep)) {
            Some(format!("the plan's {} ranks that hold experts do not divide by it", plan.expert_ranks()))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(crate::Error::Plan(format!(
                "ep={}: {why} (ep needs a MoE model whose experts divide by it, and dp × cp (or tp × cp × dp, folded) too)",
                plan.ep
            )));
        }
    }
    // Folded, each GPU routes its sequence-parallel shard of the tokens to whole experts.
    if plan.folds_experts() && tp > 1 && !plan.sp {
        return Err(crate::Error::Plan(format!(
            "ep={} folds over tp={tp} (it does not divide dp × cp): that needs sequence parallelism (add sp), as Megatron-Core's MoE with TP does",
            plan.ep
        )));
    }
    Ok(())
}

/// Model FLOPs utilization of a training step under `plan`: the model FLOPs per
/// token ([`Transformer::model_flops_per_token`], its frozen layers forward only)
/// · the step's tokens (`global_batch` sequences) over its time and the
/// cluster's 16-bit peak.
pub fn mfu(model: &Transformer, cluster: &Cluster, plan: &Plan, global_batch: f64, iteration_ms: f64) -> f64 {
    let tokens = global_batch * model.seq;
    model.model_flops_per_token(plan.frozen as usize) * tokens / (iteration_ms / 1e3) / (f64::from(cluster.gpus) * cluster.peak_flops)
}

/// The layers of the first pipeline stage that do not split into `vpp` equal model
/// chunks, if one does not: Megatron-Core splits a stage into equal chunks unless a
/// pipeline layout says otherwise. The first and last stages may count the input
/// embedding or the loss as a chunk's layer (`account_for_embedding_in_pipeline_split`),
/// where `first` / `last` do not set them.
pub fn unequal_chunks(layers: usize, pp: u32, vpp: u32, first: Option<u32>, last: Option<u32>) -> Option<usize> {
    let counts = stage_layer_counts(layers, pp, first, last).ok()?;
    let v = vpp.max(1) as usize;
    let end = counts.len() - 1;
    let splits = |(stage, &n): (usize, &usize)| {
        let may_hold_end = (stage == 0 && first.is_none()) || (stage == end && last.is_none());
        n % v == 0 || (may_hold_end && (n + 1) % v == 0)
    };
    counts.iter().enumerate().find(|&c| !splits(c)).map(|(_, &n)| n)
}

/// Layers of each pipeline stage. `first` and `last` fix the end stages'
/// (Megatron's `--decoder-first/last-pipeline-num-layers`); the other layers
/// are spread evenly over the other stages, and layers that do not divide go
/// to the middle stages first: the end stages also hold the input embedding
/// and the output head, so they are the ones made lighter (Llama 3 405B: 126
/// layers on 16 stages, one layer fewer on the first and the last).
pub fn stage_layer_counts(layers: usize, pp: u32, first: Option<u32>, last: Option<u32>) -> Result<Vec<usize>, crate::Error> {
    let p = pp.max(1) as usize;
    if p == 1 {
        if first.is_some() || last.is_some() {
            return Err(crate::Error::Plan("first= and last= set the end stages of a pipeline: they need pp ≥ 2".into()));
        }
        return Ok(vec![layers]);
    }
    let mut counts = vec![0usize; p];
    let mut free: Vec<usize> = Vec::with_capacity(p);
    // Order of preference for the layers that do not divide: middle stages, then first, then last.
    free.extend(1..p - 1);
    let mut fixed = 0usize;
    for (i, n) in [(0, first), (p - 1, last)] {
        match n {
            Some(n) => {
                counts[i] = n as usize;
                fixed += n as usize;
            }
            None => free.push(i),
        }
    }
    let remaining = layers
        .checked_sub(fixed)
        .ok_or_else(|| crate::Error::Plan(format!("first + last = {fixed} layers, more than the model's {layers}")))?;
    if free.is_empty() {
        if remaining != 0 {
            return Err(crate::Error::Plan(format!("first + last = {fixed} layers on pp=2, but the model has {layers}")));
        }
    } else {
        let (base, extra) = (remaining / free.len(), remaining % free.len());
        for (k, &i) in free.iter().enumerate() {
            counts[i] = base + usize::from(k < extra);
        }
    }
    if counts.contains(&0) {
        return Err(crate::Error::Plan(format!(
            "{layers} layers cannot fill pp={pp} stages with first={first:?}, last={last:?}: a stage would hold none"
        )));
    }
    Ok(counts)
}

/// Memory per GPU of `plan`: that of the pipeline stage that needs the most (each
/// stage its own layers, the end stages the embedding and the output head, and
/// under 1F1B stage s holds min(pp − s, microbatches) microbatches in flight).
pub fn memory(model: &Transformer, plan: &Plan, task: Task) -> Memory {
    let pp = plan.pp.max(1);
    // A split that cannot be made is an error of `project` (through the same function); the
    // memory of such a plan is that of an even split.
    let counts = stage_layer_counts(model.layers, pp, plan.first_stage_layers, plan.last_stage_layers)
        .unwrap_or_else(|_| vec![model.layers.div_ceil(pp as usize); pp as usize]);
    let last = counts.len() - 1;
    // Frozen layers are the bottom ones: on the first stages.
    let mut frozen_left = plan.frozen as usize;
    let dense_counts = model.dense_per_stage(&counts);
    let mut best = Memory::default();
    for (s, (&layers, &dense)) in counts.iter().zip(&dense_counts).enumerate() {
        let frozen = frozen_left.min(layers);
        frozen_left -= frozen;
        let vocab = if s == 0 || s == last { model.embedding_copies(pp) } else { 0.0 };
        let stage = StageLayers { layers, dense, frozen, loss: s == last };
        let m = stage_memory(model, plan, task, stage, vocab, in_flight(plan, s as u32));
        if s == 0 || m.total_gb() > best.total_gb() {
            best = m;
        }
    }
    best
}

/// A gradient bucket of `mib` MiB in whole bytes, at least one (`bucket=MiB`, parsed and shown).
fn bucket_bytes(mib: f64) -> u64 {
    ((mib * MIB).round() as u64).max(1)
}

/// PyTorch DDP's default gradient bucket, MiB (`bucket_cap_mb=25`,
/// `torch/nn/parallel/distributed.py`).
pub const DDP_BUCKET_MIB: f64 = 25.0;

/// Bytes in a MiB.
pub(crate) const MIB: f64 = 1024.0 * 1024.0;

/// FSDP (ZeRO-3) training under a pipeline, as PyTorch's pipelining runs it: torchtitan
/// does not reshard after the forward when PP is on (`reshard_after_forward = not
/// pp_enabled`, "to avoid per-microbatch all-gathers", `parallelize_llama.py`), and the
/// schedule runs every backward with `set_reshard_after_backward(False)` and
/// `set_requires_gradient_sync(False)` (`torch/distributed/pipelining/stage.py`,
/// `backward_maybe_with_nosync`), reducing after the stage's last backward. So a stage's
/// weights are gathered once per step and stay whole, its gradients accumulate whole in
/// FSDP2's reduce type (`to_accumulated_grad_if_needed`; `grad_reduce=fp32` for torchtitan's
/// FP32) and are reduce-scattered once. (DeepSpeed does not combine ZeRO-3 with its pipeline.)
fn fsdp_under_pipeline(plan: &Plan, task: Task) -> bool {
    task == Task::Train && plan.zero >= 3 && plan.pp > 1 && plan.replicas() > 1
}

/// Microbatches' worth of activations pipeline rank `s` holds at its peak.
/// 1F1B: min(pp − s, microbatches). Interleaved 1F1B (`vpp` = v model chunks
/// per rank, Megatron's schedule): the rank runs 2(pp − s − 1) + (v − 1)·pp
/// chunks forward before its first backward and holds one more, each chunk
/// 1/v of its layers — rank 0 1 + (pp − 1)/(pp·v) times 1F1B's pp
/// (Korthikanti et al. 2022, §4.2.3) — at most all microbatches × v chunks.
fn in_flight(plan: &Plan, s: u32) -> f64 {
    let (pp, m) = (plan.pp.max(1), plan.microbatches.max(1));
    let s = s.min(pp - 1);
    match plan.interleaved_chunks() {
        v if v > 1 => f64::from((2 * (pp - s - 1) + (v - 1) * pp + 1).min(m * v)) / f64::from(v),
        _ => f64::from((pp - s).min(m)),
    }
}

/// A pipeline stage's layers: how many, how many of them (its first) are a
/// mixture of experts' dense FFN layers, how many (its first) are frozen, and
/// whether it computes the loss (the last stage: final norm, output head).
#[derive(Debug, Clone, Copy)]
struct StageLayers {
    layers: usize,
    dense: usize,
    frozen: usize,
    loss: bool,
}

#[cfg(test)]
impl StageLayers {
    /// `layers` trainable layers of one kind, without the loss.
    fn plain(layers: usize) -> StageLayers {
        StageLayers { layers, dense: 0, frozen: 0, loss: false }
    }
}

/// Memory of one pipeline stage of `stage` layers, holding `vocab` vocabulary
/// matrices and `in_flight` microbatches' activations.
fn stage_memory(model: &Transformer, plan: &Plan, task: Task, stage: StageLayers, vocab: f64, in_flight: f64) -> Memory {
    let StageLayers { layers, dense, frozen, loss } = stage;
    // ZeRO shards over every rank that holds the same weights (dp × cp).
    let (tpf, dpf) = (f64::from(plan.tp), f64::from(plan.replicas()));
    let d = model.hidden;
    let bytes = model.bytes;
    let layers_per_stage = layers as f64;
    let etpf = f64::from(plan.expert_tp());
    let mlp_params_gpu = model.ffn_params() * model.experts / etpf / f64::from(plan.ep);
    let moe_layer_gpu = model.dense_per_gpu(tpf) + mlp_params_gpu;
    let dense_layer_gpu = model.dense_layer_per_gpu(tpf);
    let moe_layers = (layers - dense) as f64;
    let layer_params_gpu = moe_layer_gpu * moe_layers + dense_layer_gpu * dense as f64;
    let params_gpu = layer_params_gpu + vocab * model.vocab_matrix(tpf);
    // ZeRO shards a parameter over the ranks that hold it: the dense part over
    // every replica, an expert over its replicas only (dp × cp ÷ ep: each
    // expert-parallel group of ep ranks holds every expert once).
    let expert_params_gpu = if model.experts > 1.0 { mlp_params_gpu * moe_layers } else { 0.0 };
    let dense_params_gpu = params_gpu - expert_params_gpu;
    let expert_replicas = f64::from(plan.expert_replicas());
    let shard = |stage: u8, replicas: f64| if plan.zero >= stage && plan.replicas() > 1 { replicas } else { 1.0 };
    let sharded = |stage: u8, dense: f64, expert: f64| dense / shard(stage, dpf) + expert / shard(stage, expert_replicas);
    let mut m = Memory { weights_gb: sharded(3, dense_params_gpu, expert_params_gpu) * bytes / 1e9, ..Memory::default() };
    if serves_fp8_weights(plan, task) {
        // The linear layers' weights in one byte instead of `bytes`.
        m.weights_gb -= sharded(3, layer_params_gpu - expert_params_gpu, expert_params_gpu) * (bytes - 1.0) / 1e9;
    } else if plan.fp8 {
        // Transformer Engine keeps an FP8 copy of the linear layers' weights (1 byte per parameter).
        m.weights_gb += sharded(3, layer_params_gpu - expert_params_gpu, expert_params_gpu) / 1e9;
    }
    let fsdp_pp = fsdp_under_pipeline(plan, task);
    if fsdp_pp {
        // Under a pipeline the stage's weights stay gathered across its microbatches: whole
        // beside the shards of what FSDP shards (experts held whole by their one replica are
        // already whole).
        let expert_whole = if expert_replicas > 1.0 { expert_params_gpu } else { 0.0 };
        m.weights_gb += (dense_params_gpu + expert_whole) * bytes / 1e9;
    } else if plan.zero >= 3 && plan.replicas() > 1 {
        // ZeRO-3 holds the gathered weights of the layer in use and of those prefetched.
        let largest = if dense > 0 && dense == layers { dense_layer_gpu } else { moe_layer_gpu };
        m.weights_gb += f64::from(plan.prefetch + 1) * largest * bytes / 1e9;
        // The root unit (embedding and head) stays gathered from the forward's start to the
        // backward's end (FSDP does not reshard the root after the forward).
        m.weights_gb += vocab * model.vocab_matrix(tpf) * bytes * (1.0 - 1.0 / dpf) / 1e9;
    }
    // Frozen bottom layers keep weights only: the dense FFN layers first, then MoE layers.
    let trainable_layers = (layers - frozen) as f64;
    let (frozen_dense, frozen_moe) = (frozen.min(dense), frozen.saturating_sub(dense));
    // The input embedding frozen with the stage's frozen layers above it (`Plan::embedding_frozen`;
    // frozen layers need a single stage: with a pipeline they are refused).
    let frozen_embedding = if frozen > 0 && vocab > 0.0 { model.vocab_matrix(tpf) } else { 0.0 };
    let trainable = params_gpu - dense_layer_gpu * frozen_dense as f64 - moe_layer_gpu * frozen_moe as f64 - frozen_embedding;
    let trainable_experts = if model.experts > 1.0 { mlp_params_gpu * (moe_layers - frozen_moe as f64) } else { 0.0 };
    let trainable_dense = trainable - trainable_experts;
    match task {
        Task::Train => {
            // Gradients in their reduce type; under a pipeline FSDP accumulates the stage's whole until its last backward.
            let grad = plan.grad_bytes(bytes);
            m.gradients_gb = if fsdp_pp { trainable * grad } else { sharded(2, trainable_dense, trainable_experts) * grad } / 1e9;
            // Adam in mixed precision: FP32 master weights, momentum and variance.
            m.optimizer_gb = sharded(1, trainable_dense, trainable_experts) * 12.0 / 1e9;
            // Korthikanti et al. (2022) per layer and microbatch, with flash attention (no s² term),
            // term by term ([`LayerActivations`]): GPT-3's s·b·d·(10 + 24/t) bytes, 34/t with sequence
            // parallelism; Llama's no dropout masks, its gated FFN and grouped KV heads; under FP8 the
            // linear layers' saved inputs cast to 1 byte. Full recomputation keeps each layer's
            // 16-bit input, 2·s·b·d (sequence-parallel: 1/t of it per rank), and the layer being
            // recomputed holds its full activations once.
            // Context parallelism: each rank keeps the activations of its 1/cp of the sequence.
            let sbd = f64::from(plan.microbatch) * model.seq / f64::from(plan.cp.max(1)) * d;
            let acts = LayerActivations::of(model, plan);
            let dense_width = if model.experts > 1.0 { model.dense_ffn } else { model.ffn };
            let dense_full = sbd * (acts.rest + acts.mlp(dense_width));
            // A mixture of experts keeps, in place of the dense MLP's terms, each token's routed
            // copies: per copy its input (d wide, FP8: 1 byte) and its experts' up and activation
            // outputs; shared experts' outputs likewise. Routed outputs split over the TP ranks (by
            // width, or folded by tokens).
            let full = if model.experts > 1.0 {
                let up = if model.swiglu { 2.0 * model.ffn } else { model.ffn };
                let (k, sb) = (model.top_k.min(model.experts), sbd / d);
                let routed_in = k * acts.cast * sbd / if plan.sp { tpf } else { 1.0 };
                let outputs = (k + model.shared_experts) * sb * (2.0 * up + acts.cast * model.ffn) / tpf;
                sbd * acts.rest + routed_in + outputs
            } else {
                dense_full
            };
            let kept_input = 2.0 * sbd / if plan.sp { tpf } else { 1.0 };
            // torchtitan's per-op selective checkpointing keeps what its policy saves.
            let op_sac =
                (plan.op_sac && !plan.recompute && model.experts <= 1.0 && model.mla.is_none()).then(|| sbd * acts.op_sac_saved(model));
            let mut per_layer = if plan.recompute { kept_input } else { op_sac.unwrap_or(full) };
            // Its dense FFN layers keep Korthikanti's dense terms.
            let mut per_dense_layer = if plan.recompute { kept_input } else { op_sac.unwrap_or(dense_full) };
            // Materialized attention keeps the softmax output for the backward
            // (Korthikanti's 5·a·s/h term without dropout: 2·a·s²·b bytes per layer),
            // unless recomputed (full, or selective: the attention core is what it recomputes).
            // With dropout also its mask and dropped copy: Korthikanti's full 5·a·s²·b.
            if plan.scores_in_memory() && !plan.recompute && !plan.selective {
                let scores = f64::from(plan.microbatch) * model.heads / tpf * model.seq / f64::from(plan.cp.max(1)) * model.seq;
                per_layer += if plan.dropout { 5.0 } else { 2.0 } * scores;
                per_dense_layer += if plan.dropout { 5.0 } else { 2.0 } * scores;
            }
            let trainable_dense_layers = (dense - frozen_dense) as f64;
            // The layer being recomputed: the larger kind the stage has.
            let recomputed = match (dense, layers - dense) {
                (0, _) => full,
                (_, 0) => dense_full,
                _ => full.max(dense_full),
            };
            // The layer being recomputed at its full size, on top of what it keeps (its input, and
            // under per-op checkpointing its saved outputs): counted twice, an upper bound of at most
            // one layer's kept bytes, as Korthikanti et al. count full recomputation.
            let working = if (plan.recompute || op_sac.is_some()) && trainable_layers > 0.0 { recomputed } else { 0.0 };
            let kept = per_layer * (trainable_layers - trainable_dense_layers) + per_dense_layer * trainable_dense_layers;
            // The stage with the loss also keeps, for the microbatch whose backward starts there,
            // the final norm's and the output head's inputs (2·s·b·d each, split by sequence
            // parallelism) and the logits the cross-entropy computes in 32 bits, vocabulary-
            // parallel over TP: Korthikanti et al. (2022) §4.3's 4·s·b·d/t·(1 + v/d).
            let head = if loss { 2.0 * kept_input + 4.0 * sbd / d * model.vocab / tpf } else { 0.0 };
            m.activations_gb = (kept * in_flight + working + head) / 1e9;
        }
        Task::Prefill { batch, prompt: tokens } | Task::Decode { batch, context: tokens } => {
            let kv_per_gpu = model.kv_dim() / model.kv_split(tpf);
            // A windowed layer keeps its window of keys, as the decode step reads them (vLLM's and
            // TensorRT-LLM's sliding-window caches): the share of the cache decode reads.
            // An encoder (a ViT) attends within one forward pass and keeps no cache.
            let cached = if model.causal { model.window_factor(f64::from(tokens), true) } else { 0.0 };
            // Under context parallelism (prefill: decode refuses it) each rank keeps the keys and
            // values of its share of the tokens; the all-gathered ones are transient.
            m.kv_cache_gb = model.kv_tensors() * f64::from(batch) * f64::from(tokens) / f64::from(plan.cp.max(1))
                * cached
                * kv_per_gpu
                * bytes
                * layers_per_stage
                / 1e9;
            // A forward pass keeps nothing for a backward, but a layer's tensors are alive while it
            // runs: the residual and the normed input (d each, whole on every TP rank), beside the
            // larger of attention's Q, K, V and output-projection input and the MLP's up (and gate)
            // projection with its activation (the routed experts' for each token), split over TP.
            // Prefill runs every prompt token at once (a 100 000-token prompt of Llama-2 7B: 8 GB,
            // where nothing had been counted); decode one token per sequence.
            let tokens_here = match task {
                Task::Prefill { batch, prompt } => f64::from(batch) * f64::from(prompt) / f64::from(plan.cp.max(1)),
                _ => f64::from(batch),
            };
            // Per GPU: query and output-projection input split over TP; keys and values over TP
            // where there are KV heads enough (else replicated); latent attention's after its
            // up-projections, per head. Materialized attention holds its scores and their softmax
            // (b·h·s² each) as well. Experts split over their tensor-parallel ranks, a dense
            // layer's FFN over TP.
            let attention_width = match model.mla {
                Some(a) => model.heads * (2.0 * (a.qk_nope + a.qk_rope) + 2.0 * a.v_head) / tpf,
                None => (model.q_dim() + model.o_in()) / tpf + 2.0 * model.kv_heads * model.head_dim / model.kv_split(tpf),
            };
            let scores = match task {
                Task::Prefill { batch, prompt } if plan.scores_in_memory() => {
                    2.0 * f64::from(batch) * model.heads / tpf * f64::from(prompt) / f64::from(plan.cp.max(1)) * f64::from(prompt)
                }
                // One query per sequence over its context.
                Task::Decode { batch, context } if plan.scores_in_memory() => {
                    2.0 * f64::from(batch) * model.heads / tpf * f64::from(context)
                }
                _ => 0.0,
            };
            let per_ffn = if model.swiglu { 3.0 } else { 2.0 };
            let mlp_width = if model.experts > 1.0 {
                let routed = model.ffn * model.top_k / f64::from(plan.expert_tp()) + model.ffn * model.shared_experts / tpf;
                let dense = if dense > 0 { model.dense_ffn / tpf } else { 0.0 };
                per_ffn * routed.max(dense)
            } else {
                per_ffn * model.ffn / tpf
            };
            // Under sequence parallelism the residual is split, the normed input gathered whole
            // for the projections.
            let residual = if plan.sp { d / tpf + d } else { 2.0 * d };
            m.activations_gb =
                (tokens_here * residual + (tokens_here * attention_width + scores).max(tokens_here * mlp_width)) * bytes / 1e9;
        }
    }
    m
}

/// What one layer keeps for its backward, in units of s·b·d bytes (d the
/// hidden width), Korthikanti et al. (2022, Table 2) term by term so that
/// other architectures follow from their shapes. Kept whole on every TP rank
/// without sequence parallelism: both norms' inputs (2 + 2), the QKV and FC1
/// inputs (2 each; FP8: 1, Transformer Engine keeps the cast), dropout's two
/// masks (1 + 1); split over TP: Q, K and V (2 per width d), the attention
/// output (2; FP8 +1, the output projection's cast input), FC1's output (2 per
/// width: both halves of a gated FFN) and the activation's (2 per width; FP8:
/// 1). GPT-3 (FFN 4d, no GQA, dropout, BF16): 10 + 24/t, Korthikanti's 34;
/// Llama-3 70B (gated 3.5d, 8 of 64 KV heads, no dropout): 8 + 25.5/t, in FP8
/// 6 + 23/t.
struct LayerActivations {
    /// Without the MLP's terms, per TP rank.
    rest: f64,
    /// Bytes a linear layer keeps per element of its input: 2, FP8 1.
    cast: f64,
    tp: f64,
    sp: bool,
    swiglu: bool,
    d: f64,
}

impl LayerActivations {
    fn of(model: &Transformer, plan: &Plan) -> LayerActivations {
        let (d, tp, sp) = (model.hidden, f64::from(plan.tp), plan.sp);
        let cast = if plan.fp8 { 1.0 } else { 2.0 };
        let masks = if plan.dropout { 2.0 } else { 0.0 };
        // The attention core's saved inputs and output: latent attention's per-head query/key and
        // value widths after the up-projections, and its low-rank inputs (whole on every rank).
        let (q, k, v, latent) = match model.mla {
            Some(m) => {
                (model.heads * (m.qk_nope + m.qk_rope), model.heads * (m.qk_nope + m.qk_rope), model.heads * m.v_head, m.q_lora + m.kv_lora)
            }
            None => (model.q_dim(), model.kv_heads * model.head_dim, model.kv_heads * model.head_dim, 0.0),
        };
        let whole = 4.0 + cast + masks + cast * latent / d;
        let split = 2.0 * (q + k + v) / d + (2.0 + if plan.fp8 { 1.0 } else { 0.0 }) * model.o_in() / d;
        let act = LayerActivations { rest: 0.0, cast, tp, sp, swiglu: model.swiglu, d };
        LayerActivations { rest: act.whole(whole) + split / tp, ..act }
    }

    /// Terms kept whole on every TP rank unless sequence parallelism splits them.
    fn whole(&self, units: f64) -> f64 {
        if self.sp { units / self.tp } else { units }
    }

    /// What a dense layer keeps under torchtitan's per-op selective checkpointing,
    /// in s·b·d bytes per TP rank. Its policy (`_custom_policy` in torchtitan's
    /// activation checkpointing) saves the outputs of matmuls, attention and
    /// reduce-scatters, except every second matmul of the block in execution
    /// order; the checkpoint keeps the block's input. In a block's order (Q, K,
    /// V, O, then gate, up, down or FC1, FC2) that saves Q, V, the attention
    /// output, the gate (FC1) and the down projection (a gated FFN's seventh
    /// matmul; FC2 is the sixth): under TP the down projection's output is the
    /// partial sum, whole on every rank, and with sequence parallelism the
    /// reduce-scatters after the output and down projections keep 1/t each.
    /// Everything else the backward recomputes.
    fn op_sac_saved(&self, model: &Transformer) -> f64 {
        let (d, tp) = (self.d, self.tp);
        let q = model.q_dim();
        let v = model.kv_heads * model.head_dim;
        let input = self.whole(2.0);
        let attention = 2.0 * (q + v + q) / d / tp;
        let ffn_in = 2.0 * model.ffn / d / tp;
        let down = if self.swiglu { 2.0 } else { 0.0 };
        // The reduce-scatters after the output and the down (FC2) projections.
        let scattered = if tp > 1.0 && self.sp { 2.0 * 2.0 / tp } else { 0.0 };
        input + attention + ffn_in + down + scattered
    }

    /// The MLP's terms for an FFN of `width`, per TP rank.
    fn mlp(&self, width: f64) -> f64 {
        let up = if self.swiglu { 2.0 * width } else { width };
        self.whole(self.cast) + (2.0 * up + self.cast * width) / self.d / self.tp
    }
}

/// [`project`] with the simulated timeline of the last microbatch on the first stage.
pub fn project_timeline(model: &Transformer, cluster: &Cluster, plan: &Plan, task: Task) -> Result<(Projection, Timeline), crate::Error> {
    // Sequence parallelism splits each sequence's tokens over the tensor-parallel ranks; a
    // decode step has one (it had priced an all-gather and a reduce-scatter of one token over
    // 8 ranks, and `search` ranked such plans). Said before the plan's checks, one of which
    // asks for sp (experts folded over tp).
    if plan.tp > 1 && matches!(task, Task::Decode { .. }) {
        if plan.sp {
            return Err(crate::Error::Plan(format!(
                "sp: sequence parallelism splits each sequence's tokens over the tp={} ranks, and a decode step runs one new token a sequence: leave sp out (tp alone splits the weights)",
                plan.tp
            )));
        }
        if plan.folds_experts() {
            return Err(crate::Error::Plan(format!(
                "ep={} folds over tp={}, which needs sequence parallelism, and a decode step runs one new token a sequence: give an ep that divides dp × cp = {}",
                plan.ep,
                plan.tp,
                plan.replicas()
            )));
        }
    }
    check(model, cluster, plan)?;
    if !model.causal && matches!(task, Task::Decode { .. }) {
        return Err(crate::Error::Model(format!(
            "{} is an encoder (every token attends to every other): it generates no tokens to decode; its inference is --task prefill",
            model.name
        )));
    }
    // Context parallelism splits a sequence's tokens over ranks; a decode step has one new token
    // a sequence (it had been echoed and not run: twice the GPUs, the same step).
    if plan.cp > 1 && matches!(task, Task::Decode { .. }) {
        return Err(crate::Error::Plan(format!(
            "cp={}: context parallelism splits each sequence's tokens over ranks, and a decode step runs one new token a sequence (a KV cache split over ranks is not modelled): use tp, pp or dp",
            plan.cp
        )));
    }
    // `dp` below is the group that holds the same weights (gradients, ZeRO): dp × cp;
    // the sequences of the global batch are split over plan.dp replicas.
    let (tp, pp, dp) = (plan.tp, plan.pp, plan.replicas());
    let cp = plan.cp.max(1);
    let cpf = f64::from(cp);
    let d = model.hidden;
    let bytes = model.bytes;
    let stage_counts = stage_layer_counts(model.layers, pp, plan.first_stage_layers, plan.last_stage_layers)?;
    let layers_per_stage = stage_counts.iter().copied().max().unwrap_or(model.layers);
    let (tokens_per_seq, batch, kv_context, decode) = match task {
        Task::Train => (model.seq, f64::from(plan.microbatch), model.seq, false),
        Task::Prefill { batch, prompt } => (f64::from(prompt), f64::from(batch), f64::from(prompt), false),
        Task::Decode { batch, context } => (1.0, f64::from(batch), f64::from(context), true),
    };
    // Each context-parallel rank computes its 1/cp of every sequence's tokens.
    let tokens = batch * tokens_per_seq / if decode { 1.0 } else { cpf };
    let tpf = f64::from(tp);
    // Members per node of each group: TP adjacent, DP next, PP outermost.
    // Megatron's order: TP adjacent, CP next, then DP; the weight group (dp × cp) next to TP.
    let tp_g = members_per_node(tp, 1, cluster.gpus_per_node);
    let cp_g = members_per_node(cp, tp, cluster.gpus_per_node);
    let dp_g = members_per_node(dp, tp, cluster.gpus_per_node);
    // Expert parallelism next to TP × CP, or folded over them (the experts whole on each GPU).
    let etp = plan.expert_tp();
    let etpf = f64::from(etp);
    let ep_g = if plan.folds_experts() {
        members_per_node(plan.ep, 1, cluster.gpus_per_node)
    } else {
        members_per_node(plan.ep, tp * cp, cluster.gpus_per_node)
    };
    // A node holds gpus-per-node ÷ (tp × dp) whole stages, PP outermost: some stage boundary
    // crosses nodes once the pipeline spans more than one node, and that stage's transfer paces
    // every microbatch (tp = 2, dp = 2, pp = 16 on nodes of 8 had been priced in a node at every
    // boundary, whatever the network).
    let pp_crosses = pp > 1 && u64::from(tp) * u64::from(dp) * u64::from(pp) > u64::from(cluster.gpus_per_node);

    // Forward FLOPs per microbatch and GPU.
    let attn_proj_flops =
        if model.mla.is_some() { 2.0 * tokens * model.attention_per_gpu(tpf) } else { 2.0 * tokens * model.attention_params() / tpf };
    // Score and context products: 4·s²·(heads · head width) per sequence, half of it under the
    // causal mask. Context parallelism splits each sequence's (load-balanced) causal attention
    // evenly over its ranks.
    let q = model.q_dim();
    let attn_core_flops =
        if decode { 4.0 * batch * kv_context * q / tpf } else { 4.0 * batch * tokens_per_seq * tokens_per_seq * q * 0.5 / tpf / cpf };
    let active = model.top_k.min(model.experts);
    let mlp_flops = 2.0 * tokens * model.ffn_params() * (active + model.shared_experts) / tpf;
    // The experts of this GPU its tokens reach. Routed uniformly, each of the T tokens reaching the
    // expert-parallel group misses a given expert with probability 1 − k/E: here·(1 − (1 − k/E)^T)
    // are touched on average (fewer than the (token, expert) pairs once two tokens share one).
    let (experts_per_gpu, routed) = (model.experts / f64::from(plan.ep), tokens / (tpf / etpf) * f64::from(plan.ep));
    let experts_touched = if model.experts > 1.0 {
        let miss = (1.0 - (active / model.experts).min(1.0)).powf(routed);
        (experts_per_gpu * (1.0 - miss)).clamp(1.0_f64.min(experts_per_gpu), experts_per_gpu)
    } else {
        1.0
    };
    // Weights read per step (what bounds decode): attention + the experts the batch touches,
    // in the bytes a linear layer's weight is held in.
    let weight_elem = if serves_fp8_weights(plan, task) { 1.0 } else { bytes };
    let attn_weight_bytes =
        if model.mla.is_some() { model.attention_per_gpu(tpf) * weight_elem } else { model.attention_params() * weight_elem / tpf };
    let mlp_weight_bytes =
        model.ffn_params() * experts_touched * weight_elem / etpf + model.shared_experts * model.ffn_params() * weight_elem / tpf;
    // KV heads split over TP ranks (replicated when fewer than the ranks).
    let kv_bytes_read = if decode { model.kv_tensors() * batch * kv_context * model.kv_dim() * bytes / model.kv_split(tpf) } else { 0.0 };
    // Roofline per block: compute or HBM, whichever is slower.
    // FP8 runs the linear layers at the FP8 peak (the attention core stays in 16 bits).
    let linear = |flops: f64| if plan.fp8 { cluster.gemm_fp8(flops) } else { cluster.gemm(flops) };
    // The linear layers' GEMMs at their shapes (TP shards; MoE: each GPU's experts as a
    // grouped GEMM of the tokens routed to them), forward and backward.
    let up = if model.swiglu { 2.0 * model.ffn } else { model.ffn };
    // Folded (expert TP 1), each GPU routes its 1/tp of the tokens (sequence-parallel) to whole experts.
    // A grouped GEMM computes the experts tokens were routed to and no others: fewer (token,
    // expert) pairs than the GPU's experts (decode) touch at most as many experts, whose weights
    // alone are read (every expert had been priced, TPOT growing with the experts a model has).
    let (experts_here, expert_tokens) = if model.experts > 1.0 {
        (experts_touched, experts_per_gpu * routed * active / model.experts / experts_touched)
    } else {
        (1.0, tokens)
    };
    let sum = |gemms: &[(f64, f64, f64, f64)]| {
        gemms.iter().map(|&(b, m, k, n)| cluster.gemm_at(b, m, k, n, plan.fp8)).fold((0.0, 0.0), |a, x| (a.0 + x.0, a.1 + x.1))
    };
    let (attn_lin_f, attn_lin_b) = if cluster.prices.is_some() {
        let gemms: Vec<_> = model.attention_gemms_tp(tokens, tpf).into_iter().map(|(m, k, n)| (1.0, m, k, n)).collect();
        sum(&gemms)
    } else {
        (linear(attn_proj_flops), 2.0 * linear(attn_proj_flops))
    };
    let (mlp_lin_f, mlp_lin_b) = if cluster.prices.is_some() {
        let mut gemms = vec![(experts_here, expert_tokens, d, up / etpf), (experts_here, expert_tokens, model.ffn / etpf, d)];
        // Shared experts: a dense MLP of their summed width over every token, split over TP.
        if model.shared_experts > 0.0 {
            let s = model.shared_experts;
            gemms.extend([(1.0, tokens, d, s * up / tpf), (1.0, tokens, s * model.ffn / tpf, d)]);
        }
        sum(&gemms)
    } else {
        (linear(mlp_flops), 2.0 * linear(mlp_flops))
    };
    let attn_f = attn_lin_f.max(cluster.memory(attn_weight_bytes));
    // Flash attention (training, prefill) at its shape from the GPU's measured attention
    // kernels where it has them (the plan's kernel family, else the fastest measured; causal),
    // else at the profile's η. A family nothing measured on this GPU's vendor is said to be
    // replaced by the fastest.
    let flash_at = |kernel| {
        let heads = (model.heads / tpf).max(1.0);
        cluster.attention_at(batch, heads, tokens_per_seq, model.head_dim, attn_core_flops, kernel, task == Task::Train)
    };
    let mut kernel_unpriced = None;
    let measured_flash = match plan.attention_kernel.as_deref() {
        _ if decode => None,
        Some(k) => flash_at(Some(k)).or_else(|| {
            kernel_unpriced = Some(k);
            flash_at(None)
        }),
        None => flash_at(None),
    };
    let flash_core_f = match measured_flash {
        Some((f, _, _)) => f,
        None => (cluster.attention(attn_core_flops) - cluster.gemm_overhead_s).max(cluster.memory(kv_bytes_read)) + cluster.gemm_overhead_s,
    };
    // Materialized attention (training and prefill): the score matrix of
    // E = b·(heads/t)·s² elements goes through HBM. Forward: QKᵀ writes it
    // (2·E·d_head FLOPs, all of it: the causal mask is applied after), the
    // fused scale-mask-softmax reads and writes it, P·V reads it. Backward:
    // dP = dO·Vᵀ writes E, the softmax backward reads P and dP and writes dS,
    // and the three GEMMs for dQ, dK, dV read dS, dS and P. Each is a batched GEMM
    // (one per sequence and head) priced at its shape, never under the time its score
    // traffic takes (with d_head = 64–128 the reduction is short: tensor cores idle).
    let materialized = (plan.materialized_attention && !decode).then(|| {
        let heads = (model.heads / tpf).max(1.0);
        let (seqs, q_len) = (batch * heads, tokens_per_seq / cpf);
        let e = seqs * q_len * kv_context;
        let d_head = model.head_dim;
        let gemm =
            |m: f64, k: f64, n: f64| cluster.batched_gemm(seqs, m, k, n, false).max(cluster.memory(e * bytes) + cluster.gemm_overhead_s);
        // Dropout on the probabilities: forward reads P, writes the dropped copy and the
        // 1-byte mask; backward reads the incoming gradient and the mask, writes dP.
        let dropout = if plan.dropout && task == Task::Train { cluster.memory(e * (2.0 * bytes + 1.0)) } else { 0.0 };
        // QKᵀ, then P·V.
        let forward = gemm(q_len, d_head, kv_context) + cluster.memory(2.0 * e * bytes) + dropout + gemm(q_len, kv_context, d_head);
        // dP = dO·Vᵀ; dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q.
        let backward = gemm(q_len, d_head, kv_context)
            + dropout
            + cluster.memory(3.0 * e * bytes)
            + 2.0 * gemm(kv_context, q_len, d_head)
            + gemm(q_len, kv_context, d_head);
        (forward, backward)
    });
    // Sliding windows: the windowed layers' attention core at their share of the causal work.
    // (Materialized attention computes every score; the mask is applied after.)
    let window = if materialized.is_some() { 1.0 } else { model.window_factor(if decode { kv_context } else { tokens_per_seq }, decode) };
    let core_f = materialized.map_or(flash_core_f, |m| m.0);
    // Flash attention's backward recomputes the scores: 2.5× the forward.
    // Materialized: its own backward, plus the forward again under selective recomputation.
    let core_b =
        materialized.map_or(measured_flash.as_ref().map_or(2.5 * core_f, |(_, b, _)| *b), |m| m.1 + if plan.selective { m.0 } else { 0.0 });
    // A measured family that materializes its scores (pytorch-standard) keeps none under selective
    // recomputation (`scores_in_memory`): its forward runs again, as a materialized core's does.
    let core_b = if materialized.is_none() && plan.selective && plan.scores_in_memory() && !decode { core_b + core_f } else { core_b };
    // Decode: the window shortens the cache a windowed layer reads, not the kernel's fixed cost
    // (GPT-OSS's time per token had fallen as its context grew past the window).
    let (attn_core_f, attn_core_b) = if decode {
        let o = cluster.gemm_overhead_s.min(core_f);
        ((core_f - o) * window + o, core_b * window)
    } else {
        (core_f * window, core_b * window)
    };
    let mlp_f = mlp_lin_f.max(cluster.memory(mlp_weight_bytes));
    // Norms, residual adds and the MLP activation move, per token and layer, in 16-bit
    // elements (fused norm kernels: their FP32 math stays in registers):
    // forward — two norms read and write d (4d), two residual adds read 2d and write d
    // (6d), the activation reads and writes its ffn/t width (GeLU 2f; SwiGLU reads the
    // gate and the up projection and writes their product: 3f);
    // backward — each norm reads its input and the incoming gradient and writes the
    // input's (6d), the residual branches add gradients (6d), the activation reads its
    // inputs and the gradient and writes its inputs' gradients (GeLU 3f, SwiGLU 5f).
    // The d-wide tensors are 1/t per rank with sequence parallelism; MoE: top-k experts.
    let act_elems = tokens * d / if plan.sp { tpf } else { 1.0 };
    let ffn_elems = tokens * model.ffn * (model.top_k.min(model.experts) + model.shared_experts) / tpf;
    let (act_fwd, act_bwd) = if model.swiglu { (3.0, 5.0) } else { (2.0, 3.0) };
    // FP8: each linear layer's input is cast from 16 bits (read 2 bytes, write 1): QKV and
    // FC1 read the full width, the output projection and FC2 their 1/tp shards.
    let fp8_casts =
        if plan.fp8 { 3.0 * tokens * (2.0 * d + (model.o_in() + model.ffn * (model.top_k + model.shared_experts)) / tpf) } else { 0.0 };
    // Dropout: the two bias-dropout-adds write a 1-byte mask each (read back in the backward).
    let dropout_masks = if plan.dropout && task == Task::Train { 2.0 * act_elems } else { 0.0 };
    // A mixture of experts moves each token to its k experts and back in kernels of their own
    // (Megatron-Core's all-to-all dispatcher, torchtitan's, DeepSpeed's; even with ep = 1: the
    // grouped GEMM reads its experts' tokens contiguously): the permutation reads the token's row
    // and writes its k copies, the combine reads the k expert outputs and writes the token's row;
    // the backward mirrors it. 2(k + 1) rows a token each way, what Transformer Engine's fused
    // permute kernels move (unfused ones move more; DeepEP's and HybridEP's dispatch permutes
    // inside the all-to-all: less), of the tokens the all-to-all carries.
    let moe_dispatch = if model.experts > 1.0 { 2.0 * (model.top_k + 1.0) * tokens * d * etpf / tpf * bytes } else { 0.0 };
    let elementwise_f = cluster.memory((10.0 * act_elems + act_fwd * ffn_elems) * bytes + dropout_masks + fp8_casts + moe_dispatch);
    // Backward: the masks read back, the gradients cast to FP8 like the inputs.
    let elementwise_b = cluster.memory((12.0 * act_elems + act_bwd * ffn_elems) * bytes + dropout_masks + fp8_casts + moe_dispatch);
    // Context parallelism: the full sequence's K and V all-gathered over the cp ranks before
    // each layer's attention (their gradients reduce-scattered in the backward).
    // Latent attention up-projects before the core: its ranks exchange per-head keys and values.
    let kv_heads_gpu = match model.mla {
        Some(m) => model.heads * (m.qk_nope + m.qk_rope + m.v_head) / 2.0 / tpf,
        None => model.kv_dim() / tpf.min(model.kv_heads.max(1.0)),
    };
    let cp_kv = if cp > 1 && !decode { cluster.all_gather(2.0 * batch * tokens_per_seq * kv_heads_gpu * bytes, cp, cp_g) } else { 0.0 };
    let act_bytes = tokens * d * bytes;
    // The output head on the last stage (vocabulary-parallel over TP), then the loss over its
    // logits (`loss_bytes_per_logit`). Decode samples one token: no head here. A prefill (an
    // encoder's inference) heads one token of each sequence, the one sampled from (vLLM's
    // `logits_indices`, Hugging Face's `logits_to_keep`, TensorRT-LLM without context logits; a
    // ViT's class token): the whole prompt's logits had cost a Llama-3-8B prefill 6 % more work.
    let head_rows = if matches!(task, Task::Prefill { .. }) { batch } else { tokens };
    let (head_gemm_f, head_loss_f) = if decode {
        (0.0, 0.0)
    } else {
        let logits = head_rows * model.vocab / tpf;
        (cluster.gemm_at(1.0, head_rows, d, model.vocab / tpf, false).0, cluster.memory(loss_bytes_per_logit(bytes, task) * logits))
    };
    // Sequence parallelism replaces each tensor-parallel all-reduce by a reduce-scatter and an
    // all-gather of the same bytes (Korthikanti et al. 2022), each priced as itself: an all-reduce
    // curve's in-switch reduction (NVLS) does not carry over to them.
    let (tp_comm, tp_rs_share) = match (tp > 1, plan.sp) {
        (false, _) => (0.0, 0.0),
        (true, false) => (cluster.all_reduce(act_bytes, tp, tp_g), 0.0),
        (true, true) => {
            let (rs, ag) = (cluster.reduce_scatter(act_bytes, tp, tp_g), cluster.all_gather(act_bytes, tp, tp_g));
            (rs + ag, if rs + ag > 0.0 { rs / (rs + ag) } else { 0.5 })
        }
    };
    // Folded experts are whole on each GPU: the MLP block has no tensor-parallel collective,
    // unless shared experts (split over TP) run beside them.
    let mlp_tp_comm = if etp == tp || model.shared_experts > 0.0 { tp_comm } else { 0.0 };
    // Megatron's TP overlap needs sequence parallelism (its all-gather / reduce-scatter pair).
    let tp_overlap = plan.tp_overlap && tp > 1 && plan.sp;
    let moe_a2a = if plan.ep > 1 { cluster.all_to_all(act_bytes / (tpf / etpf) * model.top_k, plan.ep, ep_g) } else { 0.0 };
    // Sharded weights are gathered layer by layer before the forward uses them
    // (prefetched): ZeRO-3 shards them between uses and gathers them again for the
    // backward; ZeRO-2, which updates a shard of whole weights, gathers the updated
    // weights in the next forward and keeps them through the backward (FSDP's
    // SHARD_GRAD_OP), the bytes of ZeRO-1's all-reduce beyond a reduce-scatter.
    let gathered = plan.zero >= 2 && dp > 1;
    let fsdp_pp = fsdp_under_pipeline(plan, task);
    let dense_bytes_gpu = if model.mla.is_some() { model.dense_per_gpu(tpf) * bytes } else { model.dense_params() * bytes / tpf };
    let attn_gather = if gathered { cluster.all_gather(dense_bytes_gpu, dp, dp_g) } else { 0.0 };
    let mlp_params_gpu = model.ffn_params() * model.experts / etpf / f64::from(plan.ep);
    // Experts are gathered and reduced over their replicas (dense: the data-parallel group).
    let mlp_dp = plan.expert_replicas();
    let mlp_g = members_per_node(mlp_dp, etp * plan.ep, cluster.gpus_per_node);
    let mlp_gather = if plan.zero >= 2 && mlp_dp > 1 { cluster.all_gather(mlp_params_gpu * bytes, mlp_dp, mlp_g) } else { 0.0 };
    // Gradients: all-reduce (DDP, ZeRO-1) or reduce-scatter (ZeRO-2/3) over the ranks that hold
    // the weights (experts: over the replicas of each expert), in their reduce type: FP32
    // (`grad_reduce=fp32`) or the model's 16 bits. DDP and ZeRO-1 (Megatron's distributed
    // optimizer) reduce in buckets (PyTorch DDP's `bucket_cap_mb`, Megatron-Core's
    // `bucket_size`): a layer's gradients cost their share of a bucket's all-reduce, a layer
    // smaller than a bucket sharing one, a larger one split over several; reduced after the
    // backward (`grad_sync=after`) the stage's gradients are one bucket (Megatron-Core without
    // overlap). ZeRO-2 (FSDP's SHARD_GRAD_OP) and FSDP reduce each layer's unit as it is.
    let grad_scale = plan.grad_bytes(bytes) / bytes;
    // One vocabulary matrix's weights per GPU. A single stage's input embedding and output head
    // (one matrix when tied): their gradients are reduced as the layers' are; with a pipeline
    // they sit on the end stages, outside the simulated fullest stage (`end_stage_grads`).
    let matrix = model.vocab_matrix(tpf) * bytes;
    let (embed_bytes, head_bytes) = match (pp == 1 && task == Task::Train, model.tied_embeddings) {
        (false, _) => (0.0, 0.0),
        (true, true) => (matrix, 0.0),
        (true, false) => (matrix, matrix),
    };
    let embed_grads = if plan.embedding_frozen() { 0.0 } else { embed_bytes };
    // The gradients the stage reduces: its trained layers' and the embedding's and head's.
    let trained_layers = layers_per_stage.saturating_sub(plan.frozen as usize) as f64;
    let stage_bytes = ((dense_bytes_gpu + mlp_params_gpu * bytes) * trained_layers + embed_grads + head_bytes) * grad_scale;
    let bucket =
        if plan.grad_sync_after { stage_bytes } else { plan.bucket_bytes.map_or(DDP_BUCKET_MIB * MIB, |b| b as f64).min(stage_bytes) };
    let reduce_grads = |weight_bytes: f64, n: u32, g: u32| {
        let grad_bytes = weight_bytes * grad_scale;
        if plan.zero >= 2 {
            cluster.reduce_scatter(grad_bytes, n, g)
        } else if grad_bytes > 0.0 {
            cluster.all_reduce(bucket, n, g) * grad_bytes / bucket
        } else {
            cluster.all_reduce(grad_bytes, n, g)
        }
    };
    let (attn_grad, mlp_grad, grad_kind) = if dp > 1 || mlp_dp > 1 {
        let kind = if plan.zero >= 2 { OpKind::ReduceScatter } else { OpKind::AllReduce };
        (reduce_grads(dense_bytes_gpu, dp, dp_g), reduce_grads(mlp_params_gpu * bytes, mlp_dp, mlp_g), kind)
    } else {
        (0.0, 0.0, OpKind::AllReduce)
    };
    // The embedding and head: gathered with the root unit before the first layer; an untied
    // head's gradient reduced behind the head's backward (DDP's buckets and DeepSpeed's ZeRO
    // fill in the order gradients are ready), the input embedding's (a tied matrix's) once the
    // backward reaches it; FSDP's root unit (FSDP1, and FSDP2 wrapping the model) reduces its
    // gradients together, after the whole backward.
    let (embed_gather, head_grad, embed_grad) = if dp > 1 && embed_bytes > 0.0 {
        let gather = if gathered { cluster.all_gather(embed_bytes + head_bytes, dp, dp_g) } else { 0.0 };
        let (early, late) = if plan.zero >= 3 { (0.0, embed_grads + head_bytes) } else { (head_bytes, embed_grads) };
        let reduce = |b: f64| if b > 0.0 { reduce_grads(b, dp, dp_g) } else { 0.0 };
        (gather, reduce(early), reduce(late))
    } else {
        (0.0, 0.0, 0.0)
    };
    // With a pipeline the embedding and head sit on the end stages, outside the simulated
    // fullest stage: what their gradients add to those stages' ends, (first, tied, last) seconds.
    // The first stage's input embedding is reduced after its last backward, which ends the
    // schedule's drain (its bucket is the last; FSDP under a pipeline reduces the stage's
    // gradients then anyway), the last stage's head behind its own backward unless FSDP under
    // a pipeline holds it to the end. Tied, Megatron all-reduces the two end stages' copies'
    // gradients once the backward is over (`_allreduce_word_embedding_grads`).
    let end_stage_grads = if pp > 1 && task == Task::Train {
        let reduce = |b: f64| if dp > 1 { reduce_grads(b, dp, dp_g) } else { 0.0 };
        let tied = if model.tied_embeddings {
            // Ranks are TP, then CP and DP, then PP outermost: the end stages are (pp − 1)·tp·dp
            // ranks apart, in one node only when the whole job is.
            let g = if pp * tp * dp <= cluster.gpus_per_node { 2 } else { 1 };
            cluster.all_reduce(matrix * grad_scale, 2, g)
        } else {
            0.0
        };
        // (FSDP's reduce-scatter of the last stage covers its copy of a tied matrix too.)
        let head = if fsdp_pp { reduce(matrix) } else { 0.0 };
        (reduce(matrix), tied, head)
    } else {
        (0.0, 0.0, 0.0)
    };
    // With a pipeline the output head runs on the last stage only: the timeline is that of
    // the fullest stage without it, and the schedule adds it to the last stage.
    let head = if pp > 1 { Head { gemm_f: head_gemm_f, loss_f: head_loss_f } } else { Head::default() };
    let (head_gemm_f, head_loss_f) = if pp > 1 { (0.0, 0.0) } else { (head_gemm_f, head_loss_f) };
    // `recompute=op`: every second matmul of a block in execution order: Q, K, V, O → K and O;
    // SwiGLU's gate, up, down → up; GELU's FC1, FC2 → FC2. K and O are as large as V and Q:
    // half the attention block's GEMM FLOPs. Latent attention's five: q_b and kv_b, by their FLOPs.
    // Collectives are not in the policy's save list (torchtitan @820504e saves matmuls, attention,
    // `max` and, with TP, reduce-scatters), so the backward runs again those whose outputs its
    // recomputation needs: with sequence parallelism the all-gathers into each block (their
    // outputs are the saved matmuls' inputs, which the weight gradients read); without it the
    // attention block's all-reduce (its output, added to the residual, feeds the MLP's norm).
    let op_sac = |mlp_f: f64, elementwise_f: f64, mlp_tp_comm: f64| {
        if !(plan.op_sac && !plan.recompute && task == Task::Train) {
            return (0.0, 0.0, 0.0);
        }
        let tp_again = if plan.sp { (tp_comm + mlp_tp_comm) * (1.0 - tp_rs_share) } else { tp_comm };
        let attn_share = if model.mla.is_some() {
            let gemms = model.attention_gemms(1.0);
            let flops = |i: usize| gemms.get(i).map_or(0.0, |&(m, k, n)| m * k * n);
            (flops(1) + flops(3)) / gemms.iter().map(|&(m, k, n)| m * k * n).sum::<f64>()
        } else {
            0.5
        };
        let mlp_share = if model.swiglu { 1.0 / 3.0 } else { 0.5 };
        (attn_f * attn_share + mlp_f * mlp_share, elementwise_f, tp_again)
    };
    let costs = LayerCosts {
        cp_kv,
        attn_f,
        mlp_f,
        attn_core_f,
        attn_b: attn_lin_b.max(2.0 * cluster.memory(attn_weight_bytes)),
        mlp_b: mlp_lin_b.max(2.0 * cluster.memory(mlp_weight_bytes)),
        attn_core_b,
        elementwise_f,
        elementwise_b,
        tp_comm,
        tp_rs_share,
        mlp_tp_comm,
        tp_exposed_share: if tp_overlap { 1.0 / (2.0 * tpf) } else { 0.0 },
        // Megatron overlaps pipeline transfers only in the interleaved schedule.
        p2p_overlap: plan.p2p_overlap && plan.interleaved_chunks() > 1,
        op_sac: op_sac(mlp_f, elementwise_f, mlp_tp_comm),
        moe_a2a,
        attn_gather,
        mlp_gather,
        gathers_in_backward: plan.zero == 3 && !fsdp_pp,
        attn_grad,
        mlp_grad,
        grad_kind,
        grad_after: plan.grad_sync_after || fsdp_pp,
        embed_gather,
        head_grad,
        embed_grad,
        head_gemm_f,
        head_loss_f,
        contention: cluster.overlap_slowdown,
    };
    // A mixture of experts' dense FFN layers (its first): one FFN of `dense_ffn` over every
    // token, split over TP with its TP collective, no all-to-all; its weights gathered and
    // reduced over the data-parallel group, as attention's.
    let dense_costs = (model.dense_of(model.layers) > 0).then(|| {
        let width = model.dense_ffn;
        let up = if model.swiglu { 2.0 * width } else { width };
        let weight_bytes = model.dense_mlp_params() * bytes / tpf;
        let read_bytes = model.dense_mlp_params() * weight_elem / tpf;
        let (lin_f, lin_b) = if cluster.prices.is_some() {
            sum(&[(1.0, tokens, d, up / tpf), (1.0, tokens, width / tpf, d)])
        } else {
            let flops = 2.0 * tokens * model.dense_mlp_params() / tpf;
            (linear(flops), 2.0 * linear(flops))
        };
        let mlp_f = lin_f.max(cluster.memory(read_bytes));
        let ffn_elems = tokens * width / tpf;
        let casts = if plan.fp8 { 3.0 * tokens * (2.0 * d + (model.o_in() + width) / tpf) } else { 0.0 };
        let elementwise_f = cluster.memory((10.0 * act_elems + act_fwd * ffn_elems) * bytes + dropout_masks + casts);
        let elementwise_b = cluster.memory((12.0 * act_elems + act_bwd * ffn_elems) * bytes + dropout_masks + casts);
        // Reduced as the other layers' gradients are (reduce type, buckets).
        let mlp_grad = reduce_grads(weight_bytes, dp, dp_g);
        LayerCosts {
            mlp_f,
            mlp_b: lin_b.max(2.0 * cluster.memory(weight_bytes)),
            elementwise_f,
            elementwise_b,
            mlp_tp_comm: tp_comm,
            op_sac: op_sac(mlp_f, elementwise_f, tp_comm),
            moe_a2a: 0.0,
            mlp_gather: if gathered { cluster.all_gather(weight_bytes, dp, dp_g) } else { 0.0 },
            mlp_grad,
            ..costs
        }
    });
    // The stage whose timeline is simulated: of the fullest stages the one with the
    // fewest dense FFN layers (the slowest; the dense layers are the first stages').
    let dense_here = stage_counts
        .iter()
        .zip(model.dense_per_stage(&stage_counts))
        .filter(|(n, _)| **n == layers_per_stage)
        .map(|(_, dense)| dense)
        .min()
        .unwrap_or(0);
    // Pipeline: the activations of one microbatch cross each stage boundary.
    let p2p = if pp > 1 {
        // Each TP rank sends its 1/tp slice (Megatron's scatter-gather across stages):
        // the user's link where given, else the pricing layer's point-to-point price.
        // Interleaved 1F1B: a microbatch crosses vpp times as many stage boundaries.
        // (Inference: a request crosses every virtual stage, interleaved or not.)
        let chunks = if task == Task::Train { plan.interleaved_chunks() } else { plan.vpp.max(1) };
        cluster.point_to_point(act_bytes / tpf, pp_crosses) * f64::from(chunks)
    } else {
        0.0
    };
    let train = task == Task::Train;
    // DDP and ZeRO-1 accumulate full gradients and reduce them after the last microbatch;
    // ZeRO-2/3 keep only their shard of the gradients, so every microbatch reduce-scatters
    // its gradients (what the memory model assumes). With one microbatch only the last runs.
    // FSDP under a pipeline (PyTorch's pipelining) gathers a stage's weights once per step
    // and reduce-scatters its gradients once, after its last backward: the microbatches
    // before the last neither gather nor reduce; the last microbatch's timeline carries the
    // step's gather and the reduction. Every forward of the schedule is the ungathered one,
    // so the gather's exposure lands in the last microbatch's backward (the drain).
    let sync_every = plan.zero >= 2 && dp > 1 && !fsdp_pp;
    let dense = dense_costs.as_ref().map(|d| (d, dense_here));
    let last =
        stage_timeline(&costs, dense, layers_per_stage, plan.frozen as usize, plan.prefetch as usize, train, plan.recompute, train, p2p);
    let t_last = last.times();
    let (ungathered, ungathered_dense) = if fsdp_pp {
        let dense = dense_costs.as_ref().map(|d| LayerCosts { attn_gather: 0.0, mlp_gather: 0.0, ..*d });
        (Some(LayerCosts { attn_gather: 0.0, mlp_gather: 0.0, ..costs }), dense)
    } else {
        (None, None)
    };
    // Where every microbatch synchronizes as the last does (ZeRO-2/3), the first's timeline is
    // the last's: not simulated twice (a search simulates thousands of plans).
    let first_differs = ungathered.is_some() || !sync_every;
    let first_timeline = (train && plan.microbatches > 1 && first_differs).then(|| {
        stage_timeline(
            ungathered.as_ref().unwrap_or(&costs),
            ungathered_dense.as_ref().map(|d| (d, dense_here)).or(dense),
            layers_per_stage,
            plan.frozen as usize,
            plan.prefetch as usize,
            train,
            plan.recompute,
            sync_every,
            p2p,
        )
    });
    let t_first = first_timeline.as_ref().map_or_else(|| t_last.clone(), Timeline::times);
    let m = if train { f64::from(plan.microbatches) } else { 1.0 };
    let mut times = IterationTimes::default();
    for (k, v) in &t_first.by_kind_ms {
        *times.by_kind_ms.entry(k).or_default() += v * (m - 1.0);
    }
    for (k, v) in &t_last.by_kind_ms {
        *times.by_kind_ms.entry(k).or_default() += v;
    }
    times.compute_ms = t_first.compute_ms * (m - 1.0) + t_last.compute_ms;
    times.comm_ms = t_first.comm_ms * (m - 1.0) + t_last.comm_ms;
    // Training: the stages run the 1F1B schedule (interleaved over vpp chunks) as a graph
    // for the one simulator; the bubble is what the schedule adds to a stage's own work.
    let stage_latency_ms = t_first.iteration_ms;
    // Each stage's work: the fullest stage's timeline scaled by its layers, the last
    // stage's output head added.
    // Every microbatch's forward but the one that gathers (FSDP under a pipeline): the others'.
    let fwd_ms = forward_end_ms(first_timeline.as_ref().filter(|_| fsdp_pp).unwrap_or(&last));
    let fullest = PipelineStage {
        fwd_s: fwd_ms / 1e3,
        bwd_s: (t_first.iteration_ms - fwd_ms).max(0.0) / 1e3,
        last_bwd_s: (t_last.iteration_ms - fwd_ms).max(0.0) / 1e3,
    };
    // A stage's work in units of the fullest stage's.
    let share = |n: usize| n as f64 / layers_per_stage.max(1) as f64;
    let last_stage = stage_counts.len() - 1;
    let stages: Vec<PipelineStage> = stage_counts
        .iter()
        .enumerate()
        .map(|(s, &n)| {
            let (hf, hb) = if s == last_stage { (head.fwd_s(), head.bwd_s()) } else { (0.0, 0.0) };
            let r = share(n);
            PipelineStage { fwd_s: r * fullest.fwd_s + hf, bwd_s: r * fullest.bwd_s + hb, last_bwd_s: r * fullest.last_bwd_s + hb }
        })
        .collect();
    // What is reported, in units of the fullest stage's timeline: in training the
    // stage that bounds the step (its output head added if it is the last); in
    // inference the request's pass through every stage (and the head once).
    // The end stages' embedding and head gradient time the step adds, by kind, ms.
    let mut end_grads_ms = [(OpKind::AllReduce, 0.0); 2];
    let reported_share = if train {
        let mb = plan.microbatches.max(1);
        let (bound, busy_s) =
            stages.iter().map(|st| st.busy_s(mb)).enumerate().fold((0, 0.0), |a, (i, b)| if b > a.1 { (i, b) } else { a });
        // Overlapped transfers leave the stages' work; each crossing still delays the chunk
        // that waits for it (the fill and the drain).
        let hop_s = if costs.p2p_overlap { p2p / f64::from(plan.interleaved_chunks()) } else { 0.0 };
        // The end stages' embedding and head gradients: what they add to the step is
        // communication nothing runs beside (the step's end).
        let (first, tied, last) = end_stage_grads;
        let mut extra = vec![0.0; stages.len()];
        extra[0] += first + tied;
        extra[last_stage] += last + tied;
        let (makespan_s, ended_s) = pipeline_makespan_s(pp, plan.interleaved_chunks(), mb, &stages, hop_s, &extra);
        let makespan_ms = makespan_s * 1e3;
        // A rounding residue is no bubble (one stage printed 9.09e-13 ms of it).
        let bubble_ms = makespan_ms - busy_s * 1e3;
        times.bubble_ms = if bubble_ms > 1e-9 * makespan_ms { bubble_ms } else { 0.0 };
        if first + tied + last > 0.0 {
            let added_ms = (ended_s * 1e3 - makespan_ms).max(0.0);
            let reduced = first + last;
            end_grads_ms =
                [(costs.grad_kind, added_ms * reduced / (reduced + tied)), (OpKind::AllReduce, added_ms * tied / (reduced + tied))];
        }
        times.iteration_ms = busy_s * 1e3 + times.bubble_ms + end_grads_ms.iter().map(|x| x.1).sum::<f64>();
        times.scale(share(stage_counts[bound]));
        if bound == last_stage {
            head.add_to(&mut times, f64::from(mb), f64::from(mb));
        }
        share(stage_counts[bound])
    } else {
        let pass: f64 = stage_counts.iter().map(|&n| share(n)).sum();
        times.iteration_ms = pass * stage_latency_ms + head.fwd_s() * 1e3;
        times.scale(pass);
        head.add_to(&mut times, 1.0, 0.0);
        pass
    };
    if train {
        // Adam's step over this GPU's shard of the trainable parameters, HBM-bound
        // (`OPTIMIZER_BYTES_PER_PARAMETER`).
        // ZeRO shards the dense parameters over the data-parallel ranks, the experts over their replicas.
        let shard = |ranks: u32| if plan.zero >= 1 && ranks > 1 { f64::from(ranks) } else { 1.0 };
        // The simulated stage's trained layers: its dense FFN layers (frozen first) and MoE layers.
        let frozen = plan.frozen as usize;
        let trained_dense = dense_here.saturating_sub(frozen) as f64;
        let trained = (layers_per_stage - frozen) as f64 - trained_dense;
        let dense_layer_gpu = model.dense_layer_per_gpu(tpf);
        let frozen_embedding = if plan.embedding_frozen() { 1.0 } else { 0.0 };
        let stage_params = (model.dense_per_gpu(tpf) + mlp_params_gpu) * trained
            + dense_layer_gpu * trained_dense
            + (model.embedding_copies(pp) - frozen_embedding) * model.vocab_matrix(tpf);
        let bytes_stepped = if model.experts > 1.0 {
            let experts = mlp_params_gpu * trained;
            OPTIMIZER_BYTES_PER_PARAMETER * ((stage_params - experts) / shard(dp) + experts / shard(plan.expert_replicas()))
        } else {
            OPTIMIZER_BYTES_PER_PARAMETER * stage_params / shard(dp)
        };
        let optimizer_ms = cluster.memory(bytes_stepped) * 1e3;
        times.iteration_ms += optimizer_ms;
        times.compute_ms += optimizer_ms;
        *times.by_kind_ms.entry(OpKind::MemoryBound.as_str()).or_default() += optimizer_ms;
    }
    // Exposed communication by the one definition of traces and replays: per microbatch's
    // stage timeline, communication with no compute under it (the bubble holds none).
    let exposed_first = if train && plan.microbatches > 1 { t_first.exposed_comm_ms } else { 0.0 };
    times.exposed_comm_ms =
        if train { exposed_first * (m - 1.0) + t_last.exposed_comm_ms } else { t_last.exposed_comm_ms } * reported_share;
    for (kind, ms) in end_grads_ms.into_iter().filter(|x| x.1 > 0.0) {
        *times.by_kind_ms.entry(kind.as_str()).or_default() += ms;
        times.comm_ms += ms;
        times.exposed_comm_ms += ms;
    }
    // The timelines run on a clock of whole nanoseconds, the priced sums do not: never more
    // exposed than there is communication (SC21's GPT-1.7B had read 54.813357 of 54.813354 ms).
    times.exposed_comm_ms = times.exposed_comm_ms.min(times.comm_ms);
    times.overlapped_comm_ms = (times.comm_ms - times.exposed_comm_ms).max(0.0);

    let memory = memory(model, plan, task);
    let dpf = f64::from(plan.dp);
    // What priced this model's attention core, in place of the cluster's note on its probe shape.
    let mut priced_by = cluster.priced_by.clone();
    let attention_note = match (&measured_flash, &materialized) {
        (_, Some(_)) => Some(format!(
            "attention materialized: the score matrix (batch × heads × seq² per layer) written and read through HBM at HBM η {:.3}{}; QKᵀ, P·V and their gradients each the slower of that traffic and {}",
            cluster.memory_efficiency,
            if plan.dropout && task == Task::Train { ", its dropout mask and dropped copy too" } else { "" },
            // (`batched_gemm` takes the GEMM η where the pricing layer prices no GEMM of this GPU.)
            if cluster.prices.as_ref().is_some_and(|p| p.time_s(1.0, 2048.0, model.head_dim, 2048.0, p.dtype).is_some()) {
                "a batched GEMM at its shape (one per sequence and head) as GEMMs are priced".to_string()
            } else {
                format!("GEMM η {:.3} of the peak", cluster.gemm_efficiency)
            }
        )),
        (Some((_, _, basis)), None) => Some(basis.clone()),
        // Priced by an efficiency: which η, whose, and why, in the note that says so.
        (None, None) => {
            let eta = format!(
                "η {:.3} of the peak ({})",
                cluster.attention_efficiency.unwrap_or(cluster.gemm_efficiency),
                if cluster.attention_efficiency.is_some() { "its profile's attention fit" } else { "the GEMM η: no attention fit" }
            );
            Some(if decode {
                // One query token a sequence: no measured kernel is of that shape.
                format!(
                    "decode attention: the slower of its KV-cache reads at HBM η {:.3} and its FLOPs at {eta}",
                    cluster.memory_efficiency
                )
            } else {
                format!(
                    "{ATTENTION_NOTE} by {eta}: no measured {} attention kernel of this GPU or another GPU of its vendor prices it",
                    if task == Task::Train { "forward-plus-backward" } else { "forward" }
                )
            })
        }
    };
    if let Some(a) = attention_note.filter(|_| priced_by.attention.is_some()) {
        priced_by.attention = Some(a);
        priced_by.attention_at_gemm_eta = false;
    }
    let mut notes: Vec<String> = priced_by.lines(cluster.gpus, cluster.gpus_per_node).chain(cluster.notes.iter().cloned()).collect();
    // Stated keys not priced as asked, by key (also in the notes, in their place).
    let mut unpriced_keys: Vec<(&'static str, String)> = Vec::new();
    let mut unpriced = |notes: &mut Vec<String>, key: &'static str, text: String| {
        unpriced_keys.push((key, text.clone()));
        notes.push(text);
    };
    if let Some(k) = kernel_unpriced.filter(|_| materialized.is_none()) {
        unpriced(
            &mut notes,
            "attention",
            format!(
                "attention={k}: no {} measurement of that kernel family on this GPU or another of its vendor{}; the attention core priced {}",
                if task == Task::Train { "forward-plus-backward" } else { "forward" },
                if task == Task::Train { " (a forward-only chart does not price a training step's backward)" } else { "" },
                if measured_flash.is_some() { "by the fastest measured family instead" } else { "by η" }
            ),
        );
    }
    if !decode {
        // The memory-bound rules in words: what each moves, at which bandwidth.
        notes.push(format!(
            "memory-bound ops over HBM at {:.0} GB/s (η {:.3}): norms, residual adds and the MLP activation as fused kernels move them per token and layer{}; {}",
            cluster.memory_efficiency * cluster.hbm_bw / 1e9,
            cluster.memory_efficiency,
            if model.experts > 1.0 {
                format!(
                    ", each token permuted to its {} experts and combined back in kernels of their own ({} rows of its width a token each way{})",
                    model.top_k,
                    2.0 * (model.top_k + 1.0),
                    if plan.ep > 1 { "; DeepEP-style dispatch moves them in the all-to-all" } else { "" }
                )
            } else {
                String::new()
            },
            if train {
                // An encoder's head (a MAD-Max ViT's: one patch's pixels a token) has no vocabulary:
                // its outputs said as they are (the note had spoken of logits).
                let per = loss_bytes_per_logit(bytes, task);
                let outputs = if model.causal {
                    format!("logits cast to FP32 ({per:.0} bytes a logit)")
                } else {
                    format!(
                        "the output head's {:.0} values a token cast to FP32 ({per:.0} bytes a value; an encoder's head as its model file sets it: a MAD-Max ViT's predicts one patch's pixels)",
                        model.vocab
                    )
                };
                format!(
                    "the loss unfused on {outputs}; the optimizer step with its mixed-precision casts ({OPTIMIZER_BYTES_PER_PARAMETER:.0} bytes a trained parameter of the GPU's shard)"
                )
            } else {
                format!("the logits of one token per sequence (the one sampled from; an encoder's class token) written and read in FP32 ({:.0} bytes a logit)", loss_bytes_per_logit(bytes, task))
            }
        ));
    }
    if fsdp_pp {
        notes.push(format!(
            "fsdp under pp (PyTorch's pipelining; torchtitan does not reshard after the forward with PP): each stage's weights gathered once per step and kept whole across its {} microbatches, its gradients accumulated whole in {} and reduce-scattered once, after its last backward",
            plan.microbatches,
            if plan.grad_reduce_fp32 { "FP32" } else { "16 bits" }
        ));
    }
    if plan.fp8 {
        notes.push(fp8_note(cluster, task));
    }
    if plan.sp && plan.tp <= 1 {
        notes.push("sp: sequence parallelism splits activations over the tensor-parallel group; with tp=1 it changes nothing".into());
    }
    if cluster.gpus > cluster.gpus_per_node && !cluster.gpus.is_multiple_of(cluster.gpus_per_node.max(1)) {
        notes.push(format!(
            "{} GPUs are not whole nodes of {}: collectives across nodes are priced at {} GPUs per node, the last node too",
            cluster.gpus, cluster.gpus_per_node, cluster.gpus_per_node
        ));
    }
    if tp_overlap {
        notes.push(format!(
            "tp_overlap: each TP all-gather / reduce-scatter ({:.3} ms per block) pipelined in {tp} chunks with the block's GEMMs; the last reduce-scatter chunk (1/{}) and what outlasts the GEMMs exposed",
            tp_comm * 1e3,
            2 * tp
        ));
    } else if plan.tp_overlap {
        unpriced(&mut notes, "tp_overlap", "tp_overlap: not applied (it needs sp and tp > 1, as Megatron-Bridge requires)".into());
    }
    if plan.vpp > 1 && plan.interleaved_chunks() == 1 && task == Task::Train {
        unpriced(
            &mut notes,
            "vpp",
            format!(
                "vpp={}: not applied — {} microbatches do not divide by pp={} (Megatron's interleaved schedule needs them to and refuses the plan otherwise): priced as plain 1F1B",
                plan.vpp, plan.microbatches, plan.pp
            ),
        );
    } else if let Some(n) = (plan.interleaved_chunks() > 1 && task == Task::Train)
        .then(|| unequal_chunks(model.layers, plan.pp, plan.vpp, plan.first_stage_layers, plan.last_stage_layers))
        .flatten()
    {
        notes.push(format!(
            "vpp={}: {n} layers per stage do not split into {} equal model chunks; the bubble is priced as for equal chunks (1/vpp of 1F1B's)",
            plan.vpp, plan.vpp
        ));
    } else if plan.p2p_overlap && plan.pp > 1 && plan.vpp <= 1 {
        unpriced(
            &mut notes,
            "p2p_overlap",
            "p2p_overlap: not applied (Megatron overlaps pipeline transfers only in the interleaved schedule, vpp > 1: its arguments set overlap_p2p_comm off otherwise)"
                .into(),
        );
    }
    // Keys a plan may state that this plan gives nothing to act on: said, not dropped silently.
    if plan.p2p_overlap && plan.pp <= 1 {
        unpriced(&mut notes, "p2p_overlap", "p2p_overlap: not applied (pp=1: no pipeline transfers to overlap)".into());
    }
    if plan.prefetch != Plan::default().prefetch && !(plan.zero >= 3 && plan.replicas() > 1) {
        unpriced(
            &mut notes,
            "prefetch",
            format!(
                "prefetch={}: not applied (FSDP's prefetch depth of sharded weights; this plan shards none: fsdp or zero=3 over more than one GPU does)",
                plan.prefetch
            ),
        );
    }
    if let Some(b) = plan.bucket_bytes
        && (plan.zero >= 2 || plan.grad_sync_after || plan.replicas() <= 1 || task != Task::Train)
    {
        unpriced(
            &mut notes,
            "bucket",
            format!(
                "bucket={}: not applied (the gradient bucket of an overlapped all-reduce, DDP or ZeRO-1; this plan {})",
                b as f64 / (1024.0 * 1024.0),
                if task != Task::Train {
                    "does not train"
                } else if plan.replicas() <= 1 {
                    "has no data-parallel replicas"
                } else if plan.zero >= 2 {
                    "reduce-scatters its gradients"
                } else {
                    "reduces its gradients after the backward (grad_sync=after)"
                }
            ),
        );
    }
    if plan.etp.is_some() && model.experts <= 1.0 {
        unpriced(&mut notes, "etp", "etp: not applied (a dense model has no experts to split)".into());
    }
    // Which ZeRO-2 is priced, where it matters (several microbatches): said, as the two main
    // implementations gather a different number of times.
    if plan.zero == 2 && plan.pp == 1 && plan.microbatches > 1 && plan.replicas() > 1 && task == Task::Train {
        notes.push(format!(
            "zero=2 as FSDP's SHARD_GRAD_OP: each of the {} microbatches gathers the weights for its forward and keeps them through its backward, and reduce-scatters its gradients; DeepSpeed's ZeRO-2 keeps whole weights and gathers once a step, after the optimizer (fewer gathers than priced here)",
            plan.microbatches
        ));
    }
    if plan.zero == 2 && plan.pp > 1 && plan.replicas() > 1 && task == Task::Train {
        notes.push(
            "zero=2 under a pipeline: priced as it would run (each microbatch's layer gradients reduce-scattered, the first stage's input embedding once, after its last backward); no mainstream framework runs it: DeepSpeed's pipeline engine refuses ZeRO-2/3, Megatron's distributed optimizer is ZeRO-1"
                .into(),
        );
    }
    if window < 1.0 {
        notes.push(format!(
            "sliding-window attention on {} of {} layers ({:.0} tokens): their attention core at its share of the causal work, {:.1} % of every layer attending to its whole context on average{}",
            model.windowed_layers.min(model.layers),
            model.layers,
            model.window,
            100.0 * window,
            if task == Task::Train { "" } else { "; their KV cache keeps the window only" }
        ));
    }
    if cp > 1 {
        // A forward pass has no gradients; its ranks keep the cache of their share of the tokens.
        let after =
            if task == Task::Train { format!("gradients over dp × cp = {dp}") } else { format!("each keeps the KV cache of its 1/{cp}") };
        notes.push(format!(
            "cp={cp}: each rank computes 1/{cp} of every sequence; K and V all-gathered per layer ({:.3} ms), {after}",
            cp_kv * 1e3
        ));
    }
    if task == Task::Train {
        // The 16-bit type the GPU runs (V100: FP16, no BF16).
        let half = cluster.prices.as_ref().map_or("BF16", |p| if p.dtype == Dtype::Fp16 { "FP16" } else { "BF16" });
        notes.push(format!(
            "memory: {half} weights, {} gradients, Adam (12 bytes per parameter), activations as in Korthikanti et al. 2022 with {}",
            if plan.grad_reduce_fp32 { "FP32" } else { half },
            if !plan.scores_in_memory() {
                "flash attention"
            } else if plan.recompute || plan.selective {
                "materialized attention (its scores recomputed, not kept)"
            } else {
                "materialized attention (its softmax output kept for the backward)"
            }
        ));
    }
    let memory_gb = memory.total_gb();
    let hbm_gb = cluster.hbm_bytes / 1e9;
    // "Fits" is the counted memory against the GPU's: what the model does not count is said
    // where the margin is thin (a plan at 79.9 of 80 GB had read as fitting without a word).
    if memory_gb <= hbm_gb && memory_gb > TIGHT_MEMORY * hbm_gb {
        notes.push(format!(
            "memory {memory_gb:.1} of {hbm_gb:.0} GB ({:.0} %): fits as counted, but the CUDA context, NCCL's buffers, library workspaces and the allocator's fragmentation are not counted, and take some of what is left",
            100.0 * memory_gb / hbm_gb
        ));
    }
    let global_batch = match task {
        Task::Train => f64::from(plan.microbatch) * f64::from(plan.microbatches) * dpf,
        Task::Prefill { batch, .. } | Task::Decode { batch, .. } => f64::from(batch) * dpf,
    };
    // The simulated clock counts whole nanoseconds in an i64 (292 years): a step beyond a year
    // comes from an input out of range (a sequence, batch or context of billions, a bandwidth
    // of 1e-300), and its numbers would be clamped, not priced.
    // `f64::max` drops a NaN: a NaN time is looked for on its own (hidden 1e308 had printed
    // "Iteration NaN ms" with exit 0).
    let spans = [times.iteration_ms, times.compute_ms, times.comm_ms];
    if spans.iter().any(|t| t.is_nan()) {
        return Err(crate::Error::Model(
            "the step's time is not a number: an input is out of range (a model size, the sequence, batch or context; a bandwidth, peak or profile value given)".into(),
        ));
    }
    let longest = spans.into_iter().fold(0.0, f64::max);
    if !longest.is_finite() || longest > MAX_STEP_MS {
        return Err(crate::Error::Model(format!(
            "a step of {longest:.3e} ms, more than a year: an input is out of range (the sequence, batch or context; a bandwidth, peak or profile value given)"
        )));
    }
    let throughput = if times.iteration_ms > 0.0 { global_batch / (times.iteration_ms / 1e3) } else { 0.0 };
    let (ttft_ms, tpot_ms) = match task {
        Task::Train => (None, None),
        // An encoder (a ViT) emits no tokens: its forward pass has no first token to time.
        Task::Prefill { .. } if !model.causal => (None, None),
        Task::Prefill { .. } => (Some(times.iteration_ms), None),
        Task::Decode { .. } => (None, Some(times.iteration_ms)),
    };
    let per_stage = if stage_counts.iter().all(|&n| n == layers_per_stage) {
        format!("{layers_per_stage} layers per stage")
    } else {
        let list: Vec<String> = stage_counts.iter().map(usize::to_string).collect();
        format!("layers per stage {} (the output head on the last)", list.join(", "))
    };
    let active = if model.experts > 1.0 {
        format!(" ({:.1} B active per token, {:.1} B of them in matmuls)", model.active_params() / 1e9, model.matmul_params() / 1e9)
    } else {
        String::new()
    };
    // Under a billion, three significant figures (ViT-L's 304 M had read "0.3 B").
    let params = model.params() / 1e9;
    let params = if params < 1.0 { tracecast_ingest::analysis::three_figures(params) } else { format!("{params:.1}") };
    notes.push(format!("{} on {}: {params} B parameters{active}, {per_stage}", model.name, cluster.name));
    // The precision inference reads its weights at, said: a checkpoint shipped quantized reads fewer bytes.
    if matches!(task, Task::Prefill { .. } | Task::Decode { .. }) && !serves_fp8_weights(plan, task) {
        notes.push(format!(
            "weights read at {} byte(s) a parameter, the model's training precision: a checkpoint served quantized reads fewer (fp8 in the plan serves FP8 weights; 4-bit, as GPT-OSS's MXFP4 experts ship, is not modelled)",
            model.bytes
        ));
    }
    // A KV cache the tensor-parallel ranks cannot split, said: each rank holds more than 1/tp of it.
    if matches!(task, Task::Prefill { .. } | Task::Decode { .. }) && model.causal && plan.tp > 1 {
        let tpf = f64::from(plan.tp);
        if model.mla.is_some() {
            notes.push(format!("KV cache: the latent (MLA) cache whole on each of the tp={} ranks (replicated, not split)", plan.tp));
        } else if model.kv_split(tpf) < tpf {
            notes.push(format!(
                "KV cache: {} KV heads over tp={}: each head's cache replicated on {} ranks",
                model.kv_heads,
                plan.tp,
                tpf / model.kv_split(tpf)
            ));
        }
    }
    // What the MoE model takes of routing, said (a user had found ep=4 and ep=8 priced alike at batch 1).
    if model.experts > 1.0 {
        notes.push(format!(
            "experts: each token routed to {} of {}, spread evenly over the GPUs that hold them (no capacity factor, dropped tokens or load imbalance modelled)",
            model.top_k, model.experts
        ));
        // Split experts send what whole ones would not: said, since `ep` over fewer ranks can
        // then cost more than over more (Mixtral tp=2,ep=4: 358 ms against 257 at ep=8, whole).
        let etp = plan.expert_tp();
        if plan.ep > 1 && etp > 1 {
            notes.push(format!(
                "expert all-to-all: experts split over etp={etp} ranks, so each rank dispatches and combines the tokens of its {etp}-rank tensor-parallel group, {etp}× what it moves with each expert whole on one GPU"
            ));
        }
    }
    let step_mfu =
        (matches!(task, Task::Train) && times.iteration_ms > 0.0).then(|| mfu(model, cluster, plan, global_batch, times.iteration_ms));
    let projection = Projection {
        model: model.name.clone(),
        system: cluster.name.clone(),
        task: match task {
            _ if plan.frozen > 0 => "finetune".into(),
            Task::Prefill { .. } if !model.causal => "inference".into(),
            _ => task.as_str().into(),
        },
        plan: plan.describe_for(task),
        assumptions: "tracecast",
        times,
        throughput,
        global_batch,
        memory_gb_per_gpu: memory_gb,
        memory,
        hbm_gb,
        fits_memory: memory_gb <= hbm_gb,
        ttft_ms,
        tpot_ms,
        mfu: step_mfu,
        tokens_per_s_per_gpu: matches!(task, Task::Train).then(|| throughput * model.seq / f64::from(cluster.gpus.max(1))),
        linear_format: plan.linear_format(),
        notes,
        unpriced_keys,
    };
    Ok((projection, last))
}

/// End of the forward pass in a stage's timeline, ms.
fn forward_end_ms(t: &Timeline) -> f64 {
    t.ops.iter().zip(&t.schedule.end_ns).filter(|(op, _)| matches!(op.name, Label::Layer(_, _, "f"))).map(|(_, &e)| e).max().unwrap_or(0)
        as f64
        / 1e6
}

/// A pipeline stage's work on one microbatch, seconds (the stage's p2p sends and receives included).
#[derive(Debug, Clone, Copy)]
struct PipelineStage {
    fwd_s: f64,
    bwd_s: f64,
    /// The last microbatch's backward, with the gradient synchronisation.
    last_bwd_s: f64,
}

impl PipelineStage {
    /// The stage's own work over `m` microbatches.
    fn busy_s(&self, m: u32) -> f64 {
        f64::from(m) * (self.fwd_s + self.bwd_s) + self.last_bwd_s - self.bwd_s
    }
}

/// The output head and the loss of one microbatch on the last pipeline stage,
/// forward, seconds, when the stage timeline leaves them out (pp > 1).
#[derive(Debug, Clone, Copy, Default)]
struct Head {
    gemm_f: f64,
    loss_f: f64,
}

impl Head {
    fn fwd_s(&self) -> f64 {
        self.gemm_f + self.loss_f
    }

    /// The backward: the two GEMMs of the input and weight gradients.
    fn bwd_s(&self) -> f64 {
        2.0 * self.gemm_f
    }

    /// Adds `fwd` forward and `bwd` backward passes to the totals.
    fn add_to(&self, times: &mut IterationTimes, fwd: f64, bwd: f64) {
        let (gemm_ms, loss_ms) = ((fwd + 2.0 * bwd) * self.gemm_f * 1e3, fwd * self.loss_f * 1e3);
        for (kind, ms) in [(OpKind::Gemm, gemm_ms), (OpKind::MemoryBound, loss_ms)] {
            if ms > 0.0 {
                *times.by_kind_ms.entry(kind.as_str()).or_default() += ms;
                times.compute_ms += ms;
            }
        }
    }
}

/// The iteration of `pp` stages running `m` microbatches by Megatron's 1F1B
/// schedule — interleaved over `v` model chunks per stage ([`Plan::interleaved_chunks`]:
/// 1 unless the microbatches divide by `pp`) — built as a graph of forward and backward
/// tasks for the one simulator: each stage runs its tasks in schedule
/// order, a chunk's forward waits for the previous virtual stage's, its
/// backward for the next one's. Each stage has its own durations; seconds.
/// `hop_s`: the lag of each crossing between virtual stages (a transfer overlapped with
/// compute, outside the stages' work). Returns the makespan as the stages are, and with
/// `extra[s]` more on stage `s`'s last backward (the end stages' embedding gradients): what
/// follows a stage's last backward delays no other stage, so one simulation gives both.
fn pipeline_makespan_s(pp: u32, v: u32, m: u32, stages: &[PipelineStage], hop_s: f64, extra: &[f64]) -> (f64, f64) {
    let spans = |ends: &[i64]| (stages_end_s(ends, stages, &[]), stages_end_s(ends, stages, extra));
    // Lags between stages lengthen the cycle two neighbouring stages' forwards and backwards
    // make, so a steady microbatch can cost more than the slowest stage's work: the whole graph.
    if hop_s > 0.0 {
        return spans(&pipeline_stage_ends_ns(pp, v, m, stages, hop_s));
    }
    // Once the slowest stage is never idle, every further microbatch (round of pp when
    // interleaved, whose order repeats per round) adds one forward and one backward of
    // it, so only that much of the graph is simulated and the rest added (a search
    // simulates thousands of plans). Stages alike but for the last (the output head
    // there) are steady after the first round; uneven splits are simulated for
    // doubling counts until the added ones cost exactly the slowest stage's work, with
    // and without the extra. The tests check both against full graphs.
    let round = if v > 1 { pp } else { 1 };
    let slowest = stages.iter().map(|s| s.fwd_s + s.bwd_s).fold(0.0, f64::max);
    let alike_but_last = stages[..stages.len() - 1].windows(2).all(|w| w[0].fwd_s == w[1].fwd_s && w[0].bwd_s == w[1].bwd_s)
        && stages.last().is_some_and(|l| l.fwd_s + l.bwd_s >= stages[0].fwd_s + stages[0].bwd_s);
    let mut k = round.min(m);
    let mut t = spans(&pipeline_stage_ends_ns(pp, v, k, stages, hop_s));
    if !alike_but_last {
        // (Task durations are whole nanoseconds: equal to 1 ppm.)
        while k < m {
            let more = (2 * k).min(m);
            let next = spans(&pipeline_stage_ends_ns(pp, v, more, stages, hop_s));
            let added = f64::from(more - k) * slowest;
            let steady = |a: f64, b: f64| (b - a - added).abs() <= 1e-6 * added;
            let both = steady(t.0, next.0) && steady(t.1, next.1);
            (k, t) = (more, next);
            if both {
                break;
            }
        }
    }
    let rest = f64::from(m - k) * slowest;
    (t.0 + rest, t.1 + rest)
}

/// The step's end from each stage's last backward (`ends`, ns): the latest of them with
/// what its last microbatch's gradient synchronisation adds, `extra[s]` more on stage `s`; s.
fn stages_end_s(ends: &[i64], stages: &[PipelineStage], extra: &[f64]) -> f64 {
    let ns = |s: f64| (s * 1e9).round() as i64;
    let tail = |s: usize| ns((stages[s].last_bwd_s + extra.get(s).copied().unwrap_or(0.0) - stages[s].bwd_s).max(0.0));
    ends.iter().enumerate().map(|(s, &end)| end + tail(s)).max().unwrap_or(0) as f64 / 1e9
}

/// [`pipeline_makespan_s`] simulated for all `m` microbatches (`v` chunks, already checked):
/// when each stage's last backward ends, ns.
fn pipeline_stage_ends_ns(pp: u32, v: u32, m: u32, stages: &[PipelineStage], hop_s: f64) -> Vec<i64> {
    use crate::sim::{At, Graph, simulate};
    let (p, units) = (pp as usize, (m * v) as usize);
    let chunks = v as usize;
    // Virtual stage (chunk · pp + stage) and microbatch of the k-th forward / backward unit of a stage.
    let unit = |k: usize, backward: bool| -> (usize, usize) {
        if chunks == 1 {
            return (0, k);
        }
        let group = k / p;
        let chunk = if backward { chunks - 1 - group % chunks } else { group % chunks };
        (chunk, (group / chunks) * p + k % p)
    };
    let ms = m as usize;
    let mut g = Graph::default();
    let ns = |s: f64| (s * 1e9).round() as i64;
    let idx = |vs: usize, mb: usize| vs * ms + mb;
    let total_vs = chunks * p;
    let mut fwd = vec![0u32; total_vs * ms];
    let mut bwd = vec![0u32; total_vs * ms];
    for vs in 0..total_vs {
        for mb in 0..ms {
            let stage = &stages[vs % p];
            fwd[idx(vs, mb)] = g.task(ns(stage.fwd_s / v as f64), 0);
            bwd[idx(vs, mb)] = g.task(ns(stage.bwd_s / v as f64), 0);
        }
    }
    let hop = ns(hop_s);
    for vs in 0..total_vs {
        for mb in 0..ms {
            if vs > 0 {
                g.edge(fwd[idx(vs - 1, mb)], At::End, fwd[idx(vs, mb)], At::Start, hop);
            }
            if vs + 1 < total_vs {
                g.edge(bwd[idx(vs + 1, mb)], At::End, bwd[idx(vs, mb)], At::Start, hop);
            } else {
                g.edge(fwd[idx(vs, mb)], At::End, bwd[idx(vs, mb)], At::Start, 0);
            }
        }
    }
    // Each stage's own order: warm-up forwards, then one forward and one backward in turn, then the rest.
    let mut last_tasks = Vec::with_capacity(p);
    for s in 0..p {
        let warmup = if chunks == 1 { (p - s - 1).min(units) } else { ((p - s - 1) * 2 + (chunks - 1) * p).min(units) };
        let mut order = Vec::with_capacity(2 * units);
        let task = |k: usize, backward: bool| {
            let (chunk, mb) = unit(k, backward);
            let vs = chunk * p + s;
            if backward { bwd[idx(vs, mb)] } else { fwd[idx(vs, mb)] }
        };
        for k in 0..warmup {
            order.push(task(k, false));
        }
        for j in 0..units - warmup {
            order.push(task(warmup + j, false));
            order.push(task(j, true));
        }
        for k in units - warmup..units {
            order.push(task(k, true));
        }
        for w in order.windows(2) {
            g.edge(w[0], At::End, w[1], At::Start, 0);
        }
        last_tasks.push(order.last().copied());
    }
    let schedule = simulate(&g);
    if !schedule.unscheduled.is_empty() {
        // Not a valid schedule (cannot happen for 1F1B): the closed form for every stage instead.
        let slowest = stages.iter().map(|s| s.fwd_s + s.bwd_s).fold(0.0, f64::max);
        return vec![ns((f64::from(m) + f64::from(pp - 1) / f64::from(v)) * slowest); p];
    }
    last_tasks.iter().map(|t| t.map_or(0, |t| schedule.end_ns[t as usize])).collect()
}

/// One microbatch through one pipeline stage: forward, then (training)
/// backward; `sync` adds the gradient communication of the last microbatch.
#[allow(clippy::too_many_arguments)]
fn stage_timeline(
    c: &LayerCosts,
    dense: Option<(&LayerCosts, usize)>,
    layers: usize,
    frozen: usize,
    prefetch: usize,
    train: bool,
    recompute: bool,
    sync: bool,
    p2p: f64,
) -> Timeline {
    use OpKind::*;
    // Layer l's costs: a mixture of experts' first `n` layers are its dense FFN layers.
    let c_of = |l: usize| -> &LayerCosts {
        match dense {
            Some((d, n)) if l < n => d,
            _ => c,
        }
    };
    // Blocks are keyed by (what, layer, pass) without building strings: a
    // search simulates thousands of plans.
    fn name(what: &'static str, l: usize, pass: &'static str) -> (Key, Label) {
        let w = what.bytes().fold(0u64, |h, b| h.wrapping_mul(131).wrapping_add(u64::from(b)));
        let p = u64::from(pass.as_bytes().first().copied().unwrap_or(0));
        ((w << 40) ^ ((l as u64) << 8) ^ p, Label::Layer(what, l as u32, pass))
    }
    let k = |what: &'static str, l: usize, pass: &'static str| name(what, l, pass).0;
    let mut lanes = Lanes::with_capacity(layers * if train { 16 } else { 6 } + 8);
    lanes.set_contention(c.contention);
    let add = |lanes: &mut Lanes, what: &'static str, l: usize, pass: &'static str, kind: OpKind, dur: f64, deps: &[Key]| {
        let (key, label) = name(what, l, pass);
        // FSDP gathers and gradient reduction run on the data-parallel group's own stream.
        // The pipeline's sends and receives on their own communicator and stream.
        let lane = match what {
            "attn_ag" | "mlp_ag" | "attn_grad" | "mlp_grad" | "embed_ag" | "head_grad" | "embed_grad" => Lane::DataParallel,
            "recv" | "send" => Lane::Pipeline,
            _ => Lane::ByKind,
        };
        lanes.add_keyed_on(lane, key, label, kind, dur, deps);
    };
    let block = |lanes: &mut Lanes, what: &'static str, l: usize, pass: &'static str, parts: [(OpKind, f64); 3], deps: &[Key]| {
        let (key, label) = name(what, l, pass);
        lanes.add_block(key, label, parts, deps);
    };
    // `tp_overlap`: TP collectives taking `comm` beside the block whose GEMMs (`gemm`) hide
    // them, `hidden` running from the block's start (its dependencies) as long as the GEMMs
    // do, the rest after it.
    let tp_split = |comm: f64, gemm: f64| -> (f64, f64) {
        let tail = comm * c.tp_exposed_share;
        let hidden = (comm - tail).min(gemm.max(0.0));
        (hidden, comm - hidden)
    };
    let overlap_tp = c.tp_comm > 0.0 && c.tp_exposed_share > 0.0;
    // A tensor-parallel collective of `dur`: an all-reduce, or under sequence parallelism its
    // reduce-scatter and then its all-gather (the pair sits between the blocks as the all-reduce did).
    let rs_share = c.tp_rs_share;
    let tp = |lanes: &mut Lanes, what: &'static str, l: usize, pass: &'static str, dur: f64, deps: &[Key]| {
        if rs_share <= 0.0 {
            return add(lanes, what, l, pass, AllReduce, dur, deps);
        }
        let rs = match what {
            "attn_tp" => "attn_tp_rs",
            "attn_tpo" => "attn_tpo_rs",
            "mlp_tp" => "mlp_tp_rs",
            "mlp_tpo" => "mlp_tpo_rs",
            "rc_tp" => "rc_tp_rs",
            "rc_tpo" => "rc_tpo_rs",
            other => unreachable!("no reduce-scatter label for the tensor-parallel collective {other}"),
        };
        add(lanes, rs, l, pass, ReduceScatter, dur * rs_share, deps);
        add(lanes, what, l, pass, AllGather, dur * (1.0 - rs_share), &[k(rs, l, pass)]);
    };
    // FSDP gathers are issued one block ahead (forward and backward prefetch):
    // each is queued right after the compute of the block before.
    let f = "f";
    let b = "b";
    if p2p > 0.0 {
        add(&mut lanes, "recv", 0, f, SendRecv, p2p, &[]);
        // Overlapped: the previous chunk's send runs beside this one's compute too; nothing waits for either.
        if c.p2p_overlap {
            add(&mut lanes, "send", 0, f, SendRecv, p2p, &[]);
        }
    }
    // The embedding and head first (the root unit's pre-forward), then the first layers'
    // weights (as deep as the prefetch reaches), before anything runs.
    if c.embed_gather > 0.0 {
        add(&mut lanes, "embed_ag", 0, f, AllGather, c.embed_gather, &[]);
    }
    for l in 0..prefetch.max(1).min(layers) {
        if c.attn_gather > 0.0 {
            add(&mut lanes, "attn_ag", l, f, AllGather, c.attn_gather, &[]);
        }
        if c_of(l).mlp_gather > 0.0 && prefetch > 0 {
            add(&mut lanes, "mlp_ag", l, f, AllGather, c_of(l).mlp_gather, &[]);
        }
    }
    let mut prev = [if c.p2p_overlap { 0 } else { k("recv", 0, f) }, 0, 0];
    for l in 0..layers {
        let c = c_of(l);
        // Context parallelism: the layer's K and V from every rank of the sequence first.
        if c.cp_kv > 0.0 {
            add(&mut lanes, "kv_ag", l, f, AllGather, c.cp_kv, &prev);
        }
        // Projections, attention core and norm run back to back: one block.
        let parts = [(Gemm, c.attn_f), (Attention, c.attn_core_f), (MemoryBound, c.elementwise_f / 2.0)];
        let deps = [prev[0], prev[1], prev[2], k("attn_ag", l, f), k("kv_ag", l, f), k("embed_ag", l, f)];
        if overlap_tp {
            tp(&mut lanes, "attn_tpo", l, f, tp_split(c.tp_comm, c.attn_f).0, &deps);
        }
        block(&mut lanes, "attn", l, f, parts, &deps);
        // Prefetch: the gather `prefetch` layers ahead; just in time (0): this layer's MLP weights now.
        if prefetch == 0 && c.mlp_gather > 0.0 {
            add(&mut lanes, "mlp_ag", l, f, AllGather, c.mlp_gather, &[k("attn", l, f)]);
        }
        if prefetch > 0 && l + prefetch < layers && c.attn_gather > 0.0 {
            add(&mut lanes, "attn_ag", l + prefetch, f, AllGather, c.attn_gather, &[k("attn", l, f)]);
        }
        if overlap_tp {
            tp(&mut lanes, "attn_tp", l, f, tp_split(c.tp_comm, c.attn_f).1, &[k("attn", l, f), k("attn_tpo", l, f)]);
        } else if c.tp_comm > 0.0 {
            tp(&mut lanes, "attn_tp", l, f, c.tp_comm, &[k("attn", l, f)]);
        }
        if c.moe_a2a > 0.0 {
            add(&mut lanes, "dispatch", l, f, AllToAll, c.moe_a2a, &[k("attn_tp", l, f), k("attn", l, f)]);
        }
        let parts = [(Gemm, c.mlp_f), (MemoryBound, c.elementwise_f / 2.0), (Gemm, 0.0)];
        let deps = [k("attn", l, f), k("attn_tp", l, f), k("mlp_ag", l, f), k("dispatch", l, f)];
        if overlap_tp && c.mlp_tp_comm > 0.0 {
            tp(&mut lanes, "mlp_tpo", l, f, tp_split(c.mlp_tp_comm, c.mlp_f).0, &deps);
        }
        block(&mut lanes, "mlp", l, f, parts, &deps);
        if prefetch == 0 && l + 1 < layers && c.attn_gather > 0.0 {
            add(&mut lanes, "attn_ag", l + 1, f, AllGather, c.attn_gather, &[k("mlp", l, f)]);
        }
        if prefetch > 0 && l + prefetch < layers && c_of(l + prefetch).mlp_gather > 0.0 {
            add(&mut lanes, "mlp_ag", l + prefetch, f, AllGather, c_of(l + prefetch).mlp_gather, &[k("mlp", l, f)]);
        }
        if c.moe_a2a > 0.0 {
            add(&mut lanes, "combine", l, f, AllToAll, c.moe_a2a, &[k("mlp", l, f)]);
        }
        if overlap_tp && c.mlp_tp_comm > 0.0 {
            let deps = [k("mlp", l, f), k("combine", l, f), k("mlp_tpo", l, f)];
            tp(&mut lanes, "mlp_tp", l, f, tp_split(c.mlp_tp_comm, c.mlp_f).1, &deps);
        } else if c.mlp_tp_comm > 0.0 {
            tp(&mut lanes, "mlp_tp", l, f, c.mlp_tp_comm, &[k("mlp", l, f), k("combine", l, f)]);
        }
        prev = [k("mlp", l, f), k("mlp_tp", l, f), k("combine", l, f)];
    }
    // The last stage's output head and loss (the stage that bounds the step).
    if c.head_gemm_f > 0.0 {
        block(&mut lanes, "head", 0, f, [(Gemm, c.head_gemm_f), (MemoryBound, c.head_loss_f), (Gemm, 0.0)], &prev);
        prev = [k("head", 0, f), 0, 0];
    }
    if p2p > 0.0 && !c.p2p_overlap {
        add(&mut lanes, "send", 0, f, SendRecv, p2p, &prev);
    }
    if !train {
        return lanes.simulate();
    }
    lanes.barrier();
    if p2p > 0.0 {
        add(&mut lanes, "recv", 0, b, SendRecv, p2p, &[]);
        if c.p2p_overlap {
            add(&mut lanes, "send", 0, b, SendRecv, p2p, &[]);
        }
    }
    // ZeRO-2 keeps the forward's gathered weights through the backward.
    let attn_gather = if c.gathers_in_backward { c.attn_gather } else { 0.0 };
    let mlp_gather = |l: usize| if c.gathers_in_backward { c_of(l).mlp_gather } else { 0.0 };
    for depth in 0..prefetch.max(1) {
        let Some(l) = (layers - 1).checked_sub(depth).filter(|l| *l >= frozen) else { break };
        if mlp_gather(l) > 0.0 {
            add(&mut lanes, "mlp_ag", l, b, AllGather, mlp_gather(l), &[]);
        }
        if attn_gather > 0.0 && (prefetch > 0 || depth > 0) {
            add(&mut lanes, "attn_ag", l, b, AllGather, attn_gather, &[]);
        }
    }
    let mut prev = if c.p2p_overlap { 0 } else { k("recv", 0, b) };
    if c.head_gemm_f > 0.0 {
        block(&mut lanes, "head", 0, b, [(Gemm, 2.0 * c.head_gemm_f), (Gemm, 0.0), (Gemm, 0.0)], &[prev]);
        prev = k("head", 0, b);
        if sync && !c.grad_after && c.head_grad > 0.0 {
            add(&mut lanes, "head_grad", 0, b, c.grad_kind, c.head_grad, &[prev]);
        }
    }
    // Frozen bottom layers need no backward: nothing below them wants a gradient.
    for l in (frozen..layers).rev() {
        let c = c_of(l);
        if recompute {
            if c.cp_kv > 0.0 {
                add(&mut lanes, "kv_ag", l, b, AllGather, c.cp_kv, &[prev]);
            }
            let parts = [(Gemm, c.attn_f + c.mlp_f), (Attention, c.attn_core_f), (MemoryBound, c.elementwise_f)];
            let deps = [prev, k("mlp_ag", l, b), k("kv_ag", l, b), k("attn_tp", l + 1, b)];
            block(&mut lanes, "recompute", l, b, parts, &deps);
            // The recomputed forward runs its two tensor-parallel collectives again.
            if c.tp_comm > 0.0 {
                let total = c.tp_comm + c.mlp_tp_comm;
                if overlap_tp {
                    let (hidden, rest) = tp_split(total, c.attn_f + c.mlp_f);
                    tp(&mut lanes, "rc_tpo", l, b, hidden, &deps);
                    tp(&mut lanes, "rc_tp", l, b, rest, &[k("recompute", l, b), k("rc_tpo", l, b)]);
                } else {
                    tp(&mut lanes, "rc_tp", l, b, total, &[k("recompute", l, b)]);
                }
            }
        } else if c.op_sac.0 + c.op_sac.1 > 0.0 {
            let parts = [(Gemm, c.op_sac.0), (MemoryBound, c.op_sac.1), (Gemm, 0.0)];
            let deps = [prev, k("mlp_ag", l, b), k("attn_tp", l + 1, b)];
            block(&mut lanes, "recompute", l, b, parts, &deps);
            // Its collectives again: all-gathers under sequence parallelism, else an all-reduce.
            if c.op_sac.2 > 0.0 {
                let kind = if rs_share > 0.0 { AllGather } else { AllReduce };
                if overlap_tp {
                    let (hidden, rest) = tp_split(c.op_sac.2, c.op_sac.0);
                    add(&mut lanes, "rc_tpo", l, b, kind, hidden, &deps);
                    add(&mut lanes, "rc_tp", l, b, kind, rest, &[k("recompute", l, b), k("rc_tpo", l, b)]);
                } else {
                    add(&mut lanes, "rc_tp", l, b, kind, c.op_sac.2, &[k("recompute", l, b)]);
                }
            }
        }
        if overlap_tp && c.mlp_tp_comm > 0.0 {
            let deps = [prev, k("attn_tp", l + 1, b), k("recompute", l, b), k("rc_tp", l, b)];
            tp(&mut lanes, "mlp_tpo", l, b, tp_split(c.mlp_tp_comm, c.mlp_b).0, &deps);
        } else if c.mlp_tp_comm > 0.0 {
            tp(&mut lanes, "mlp_tp", l, b, c.mlp_tp_comm, &[prev]);
        }
        if c.moe_a2a > 0.0 {
            add(&mut lanes, "combine", l, b, AllToAll, c.moe_a2a, &[prev]);
        }
        // The layer above's K/V gradients must be reduced before its input gradient is used here.
        let deps = [
            prev,
            k("mlp_ag", l, b),
            k("mlp_tp", l, b),
            k("combine", l, b),
            k("recompute", l, b),
            k("kv_rs", l + 1, b),
            k("attn_tp", l + 1, b),
            k("rc_tp", l, b),
        ];
        block(&mut lanes, "mlp", l, b, [(Gemm, c.mlp_b), (MemoryBound, c.elementwise_b), (Gemm, 0.0)], &deps);
        if overlap_tp && c.mlp_tp_comm > 0.0 {
            tp(&mut lanes, "mlp_tp", l, b, tp_split(c.mlp_tp_comm, c.mlp_b).1, &[k("mlp", l, b), k("mlp_tpo", l, b)]);
        }
        if prefetch == 0 && attn_gather > 0.0 {
            add(&mut lanes, "attn_ag", l, b, AllGather, attn_gather, &[k("mlp", l, b)]);
        }
        if prefetch > 0 && l >= frozen + prefetch && mlp_gather(l - prefetch) > 0.0 {
            add(&mut lanes, "mlp_ag", l - prefetch, b, AllGather, mlp_gather(l - prefetch), &[k("mlp", l, b)]);
        }
        if sync && !c.grad_after && c.mlp_grad > 0.0 {
            add(&mut lanes, "mlp_grad", l, b, c.grad_kind, c.mlp_grad, &[k("mlp", l, b)]);
        }
        if c.moe_a2a > 0.0 {
            add(&mut lanes, "dispatch", l, b, AllToAll, c.moe_a2a, &[k("mlp", l, b)]);
        }
        if overlap_tp {
            tp(&mut lanes, "attn_tpo", l, b, tp_split(c.tp_comm, c.attn_b).0, &[k("mlp", l, b), k("mlp_tp", l, b)]);
        } else if c.tp_comm > 0.0 {
            tp(&mut lanes, "attn_tp", l, b, c.tp_comm, &[k("mlp", l, b)]);
        }
        let deps = [k("mlp", l, b), k("dispatch", l, b), k("attn_ag", l, b), k("attn_tp", l, b), k("mlp_tp", l, b)];
        block(&mut lanes, "attn", l, b, [(Attention, c.attn_core_b), (Gemm, c.attn_b), (Gemm, 0.0)], &deps);
        if overlap_tp {
            tp(&mut lanes, "attn_tp", l, b, tp_split(c.tp_comm, c.attn_b).1, &[k("attn", l, b), k("attn_tpo", l, b)]);
        }
        if prefetch == 0 && l > frozen && mlp_gather(l - 1) > 0.0 {
            add(&mut lanes, "mlp_ag", l - 1, b, AllGather, mlp_gather(l - 1), &[k("attn", l, b)]);
        }
        if prefetch > 0 && l >= frozen + prefetch && attn_gather > 0.0 {
            add(&mut lanes, "attn_ag", l - prefetch, b, AllGather, attn_gather, &[k("attn", l, b)]);
        }
        if sync && !c.grad_after && c.attn_grad > 0.0 {
            add(&mut lanes, "attn_grad", l, b, c.grad_kind, c.attn_grad, &[k("attn", l, b)]);
        }
        if c.cp_kv > 0.0 {
            add(&mut lanes, "kv_rs", l, b, ReduceScatter, c.cp_kv, &[k("attn", l, b)]);
        }
        prev = k("attn", l, b);
    }
    // The embedding's gradient once the backward has reached it (and under `grad_sync=after`
    // the head's with it).
    if sync {
        let head = if c.grad_after { c.head_grad } else { 0.0 };
        if c.embed_grad + head > 0.0 {
            add(&mut lanes, "embed_grad", 0, b, c.grad_kind, c.embed_grad + head, &[prev]);
        }
    }
    // grad_sync=after: every gradient reduced once the backward has ended.
    if sync && c.grad_after {
        for l in (frozen..layers).rev() {
            if c_of(l).mlp_grad > 0.0 {
                add(&mut lanes, "mlp_grad", l, b, c.grad_kind, c_of(l).mlp_grad, &[prev]);
            }
            if c.attn_grad > 0.0 {
                add(&mut lanes, "attn_grad", l, b, c.grad_kind, c.attn_grad, &[prev]);
            }
        }
    }
    // The input gradient is whole once the first layer's TP collective and K/V reduction end.
    if p2p > 0.0 && !c.p2p_overlap {
        add(&mut lanes, "send", 0, b, SendRecv, p2p, &[prev, k("attn_tp", 0, b), k("kv_rs", 0, b)]);
    }
    lanes.simulate()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_plan_spread_over_other_gpus_keeps_its_experts_by_the_plans_own_rule() {
        // cp=2, dp=4, ep=8: the experts over dp × cp = 8 ranks. Over its own 8 GPUs the plan
        // had been refused (dp 4 alone does not divide by 8).
        let within = Plan::parse("cp=2,dp=4,ep=8").unwrap();
        assert_eq!(within.on_gpus(8).map(|(p, _)| (p.dp, p.ep)), Some((4, 8)));
        assert_eq!(within.on_gpus(16).map(|(p, _)| p.dp), Some(8));
        assert!(within.on_gpus(4).is_none(), "dp 2 × cp 2 = 4 ranks hold no 8 experts' group");
        // Folded (tp=4, dp=8, ep=16: 8 does not divide by 16): over tp × cp × dp.
        let folded = Plan::parse("tp=4,sp,dp=8,ep=16").unwrap();
        assert!(folded.folds_experts());
        assert_eq!(folded.on_gpus(48).map(|(p, _)| p.dp), Some(12), "4 × 12 = 48 ranks hold the group of 16");
        assert!(folded.on_gpus(40).is_none(), "4 × 10 = 40 ranks do not");
        // Not folded at its own size (tp=2, dp=8, ep=8), folded on fewer GPUs (dp=4: 4 ranks do
        // not hold 8 experts, tp × dp = 8 do), as the plan's rule folds it there: the old
        // plan's layout had refused it.
        let unfolded = Plan::parse("tp=2,sp,dp=8,ep=8").unwrap();
        assert!(!unfolded.folds_experts());
        let (smaller, _) = unfolded.on_gpus(8).expect("tp 2 × dp 4 = 8 ranks hold the group of 8");
        assert!(smaller.folds_experts() && smaller.expert_replicas() == 1, "{smaller:?}");
    }

    use super::*;

    /// A model file with 4 294 967 295 layers aborted the process ("memory allocation of
    /// 7146825579712 bytes failed"): refused by name before anything is built.
    #[test]
    fn layers_beyond_what_a_projection_simulates_are_refused_by_name() {
        let mut m = Transformer::preset("llama2-7b").unwrap();
        m.layers = 4_294_967_295;
        let e = project(&m, &a100(8), &Plan::parse("tp=8").unwrap(), Task::Train).unwrap_err().to_string();
        assert!(e.contains("layers 4294967295: more than the 100000 a projection simulates"), "{e}");
    }

    /// Seconds of memory-bound work in a training step of `m` under `plan`.
    fn memory_bound_s(m: &Transformer, c: &Cluster, plan: &Plan) -> f64 {
        let p = project(m, c, plan, Task::Train).unwrap();
        p.times.by_kind_ms.get(OpKind::MemoryBound.as_str()).copied().unwrap_or(0.0) / 1e3
    }

    fn a100(gpus: u32) -> Cluster {
        Cluster {
            name: "test".into(),
            gpus,
            gpus_per_node: 8,
            peak_flops: 312e12,
            hbm_bw: 2.0e12,
            hbm_bytes: 80e9,
            gemm_efficiency: 0.7,
            gemm_overhead_s: 5e-6,
            attention_efficiency: None,
            memory_efficiency: 0.8,
            intra: Link::from_si(10e-6, 240e9),
            inter: Link::from_si(25e-6, 22.5e9),
            overlap_slowdown: 0.0,
            priced_by: PricingNotes::default(),
            notes: vec![],
            fp8_peak_flops: Some(624e12),
            prices: None,
        }
    }

    /// `tp_overlap` (Megatron's userbuffers): each TP collective runs beside the GEMMs of its block; only the last
    /// of the `tp` chunks of its reduce-scatter half (1/2tp of it) and what outlasts the GEMMs stay exposed.
    /// `p2p_overlap`: the pipeline's transfers beside the stage's compute.
    #[test]
    fn tensor_parallel_and_pipeline_overlap_hide_communication_behind_compute() {
        let costs = |gemm_ms: f64, share: f64| LayerCosts {
            cp_kv: 0.0,
            attn_f: gemm_ms * 1e-3,
            mlp_f: gemm_ms * 1e-3,
            attn_core_f: 0.0,
            attn_b: 2.0 * gemm_ms * 1e-3,
            mlp_b: 2.0 * gemm_ms * 1e-3,
            attn_core_b: 0.0,
            elementwise_f: 0.0,
            elementwise_b: 0.0,
            tp_comm: 0.4e-3,
            tp_rs_share: 0.5,
            mlp_tp_comm: 0.4e-3,
            tp_exposed_share: share,
            p2p_overlap: false,
            op_sac: (0.0, 0.0, 0.0),
            moe_a2a: 0.0,
            attn_gather: 0.0,
            mlp_gather: 0.0,
            gathers_in_backward: false,
            attn_grad: 0.0,
            mlp_grad: 0.0,
            grad_kind: OpKind::AllReduce,
            grad_after: false,
            embed_gather: 0.0,
            head_grad: 0.0,
            embed_grad: 0.0,
            head_gemm_f: 0.0,
            head_loss_f: 0.0,
            contention: 0.0,
        };
        let step_ms = |c: &LayerCosts| stage_timeline(c, None, 2, 0, 1, true, false, false, 0.0).times().iteration_ms;
        // Without the overlap: 2 layers × (forward 2 × 1 ms + backward 2 × 2 ms + 4 collectives of 0.4 ms).
        assert!((step_ms(&costs(1.0, 0.0)) - 2.0 * (6.0 + 1.6)).abs() < 1e-6);
        // tp = 4: 1/8 of each 0.4 ms collective exposed (0.05 ms), the rest under the 1 ms GEMMs.
        assert!((step_ms(&costs(1.0, 1.0 / 8.0)) - 2.0 * (6.0 + 4.0 * 0.05)).abs() < 1e-6);
        // GEMMs of 0.1 ms hide only 0.1 ms of each (forward); the backward's 0.2 ms GEMMs hide 0.2 ms.
        let exposed = 2.0 * (2.0 * (0.4 - 0.1) + 2.0 * (0.4 - 0.2));
        assert!((step_ms(&costs(0.1, 1.0 / 8.0)) - (2.0 * 0.6 + exposed)).abs() < 1e-6);
        // Full recomputation re-runs the forward, its two 0.4 ms TP collectives included (Megatron-LM's
        // tensor_parallel CheckpointFunction.backward calls the forward function again): 2 ms + 0.8 ms per layer.
        let recomputed = stage_timeline(&costs(1.0, 0.0), None, 2, 0, 1, true, true, false, 0.0).times().iteration_ms;
        assert!((recomputed - step_ms(&costs(1.0, 0.0)) - 2.0 * (2.0 + 0.8)).abs() < 1e-6, "{recomputed}");
        // With the overlap the recomputed forward's two collectives (0.8 ms) run under its 2 ms of GEMMs
        // but for their exposed eighth: 0.1 ms per layer.
        let recomputed = stage_timeline(&costs(1.0, 1.0 / 8.0), None, 2, 0, 1, true, true, false, 0.0).times().iteration_ms;
        assert!((recomputed - step_ms(&costs(1.0, 1.0 / 8.0)) - 2.0 * (2.0 + 0.1)).abs() < 1e-6, "{recomputed}");
        // p2p_overlap (Megatron's overlap_p2p_comm): the stage's receive and send of 0.5 ms run beside the
        // 4 ms forward and 8 ms backward instead of before and after them (2 × 1 ms); transfers longer than
        // the compute (5 ms each) are exposed by what they outlast it.
        let p2p = |c: &LayerCosts, ms: f64| stage_timeline(c, None, 2, 0, 1, true, false, false, ms * 1e-3).times().iteration_ms;
        let serial = LayerCosts { tp_comm: 0.0, mlp_tp_comm: 0.0, ..costs(1.0, 0.0) };
        let overlapped = LayerCosts { p2p_overlap: true, tp_comm: 0.0, mlp_tp_comm: 0.0, ..costs(1.0, 0.0) };
        assert!((p2p(&serial, 0.5) - (12.0 + 2.0)).abs() < 1e-6);
        assert!((p2p(&overlapped, 0.5) - 12.0).abs() < 1e-6);
        assert!((p2p(&serial, 5.0) - (12.0 + 20.0)).abs() < 1e-6);
        assert!((p2p(&overlapped, 5.0) - 20.0).abs() < 1e-6);
        // The transfers run on the pipeline group's own stream, beside the tensor-parallel
        // collectives that compute waits for (0.4 ms each, not overlapped): they delay none of them.
        let tp_serial = LayerCosts { p2p_overlap: true, ..costs(1.0, 0.0) };
        assert!((p2p(&tp_serial, 0.5) - p2p(&tp_serial, 0.0)).abs() < 1e-6, "{} vs {}", p2p(&tp_serial, 0.5), p2p(&tp_serial, 0.0));
        // Not overlapped, the backward's send waits for the first layer's TP collective, whose
        // exposed tail (`tp_overlap`) follows the block: the four 0.5 ms transfers add 2 ms.
        let tp_tail = costs(1.0, 1.0 / 8.0);
        assert!((p2p(&tp_tail, 0.5) - p2p(&tp_tail, 0.0) - 2.0).abs() < 1e-6, "{} vs {}", p2p(&tp_tail, 0.5), p2p(&tp_tail, 0.0));
        assert!(Plan::parse(&Plan::parse("pp=2,vpp=2,p2p_overlap").unwrap().describe()).unwrap().p2p_overlap);
        // The key: parsed, described, and refused without sequence parallelism.
        assert!(Plan::parse(&Plan::parse("tp=2,sp,tp_overlap").unwrap().describe()).unwrap().tp_overlap);
        let model = Transformer::preset("llama2-7b").unwrap();
        let p = project(&model, &a100(8), &Plan::parse("tp=8,mb=1,gbs=1,tp_overlap").unwrap(), Task::Train).unwrap();
        assert!(p.notes.iter().any(|n| n.contains("tp_overlap: not applied")), "{:?}", p.notes);
        // Megatron overlaps the pipeline's transfers only when interleaved.
        let plain = |spec: &str| project(&model, &a100(8), &Plan::parse(spec).unwrap(), Task::Train).unwrap();
        let (serial, asked) = (plain("pp=2,dp=4,mb=1,gbs=8"), plain("pp=2,dp=4,mb=1,gbs=8,p2p_overlap"));
        assert_eq!(serial.times.iteration_ms, asked.times.iteration_ms);
        assert!(asked.notes.iter().any(|n| n.contains("p2p_overlap: not applied")), "{:?}", asked.notes);
        // ZeRO-2 under a pipeline is priced, and said to be a plan no mainstream framework runs.
        let zero2 = |spec: &str| plain(spec).notes.iter().any(|n| n.starts_with("zero=2 under a pipeline"));
        assert!(zero2("pp=2,dp=4,zero=2,mb=1,gbs=8") && !zero2("pp=2,dp=4,zero=1,mb=1,gbs=8") && !zero2("dp=8,zero=2,mb=1,gbs=8"));
        // Interleaving needs the microbatches to divide by the stages: otherwise plain 1F1B in
        // every respect (schedule, transfers, memory), said.
        let (odd, plain_1f1b) = (plain("pp=4,dp=2,vpp=2,mb=1,gbs=12"), plain("pp=4,dp=2,mb=1,gbs=12"));
        assert_eq!((odd.times.iteration_ms, odd.memory_gb_per_gpu), (plain_1f1b.times.iteration_ms, plain_1f1b.memory_gb_per_gpu));
        let not_applied = |p: &Projection| p.notes.iter().any(|n| n.starts_with("vpp=2: not applied"));
        assert!(not_applied(&odd) && !not_applied(&plain("pp=4,dp=2,vpp=2,mb=1,gbs=16")), "{:?}", odd.notes);
        assert!(plain("pp=4,dp=2,vpp=2,mb=1,gbs=16").times.iteration_ms < plain("pp=4,dp=2,mb=1,gbs=16").times.iteration_ms);
        // Virtual stages without a pipeline are refused, as first= and last= are.
        let err = project(&model, &a100(8), &Plan::parse("dp=8,mb=1,gbs=64,vpp=2").unwrap(), Task::Train).unwrap_err().to_string();
        assert!(err.contains("vpp=2") && err.contains("pp ≥ 2"), "{err}");
        // Keys this plan gives nothing to act on change nothing and are said.
        let said = |spec: &str, key: &str| {
            let without = spec.split(',').filter(|part| !part.starts_with(key.split('=').next().unwrap())).collect::<Vec<_>>().join(",");
            let (p, base) = (plain(spec), plain(&without));
            assert_eq!(p.times.iteration_ms, base.times.iteration_ms, "{spec}");
            p.notes.iter().any(|n| n.starts_with(key) && n.contains("not applied"))
        };
        assert!(said("dp=8,mb=1,gbs=8,p2p_overlap", "p2p_overlap"));
        assert!(said("dp=8,mb=1,gbs=8,prefetch=3", "prefetch=3"));
        assert!(said("dp=8,mb=1,gbs=8,etp=1", "etp"));
        assert!(said("dp=8,mb=1,gbs=8,grad_sync=after,bucket=50", "bucket=50"));
        let sharded = plain("fsdp=8,mb=1,gbs=8,bucket=50");
        assert!(
            sharded.notes.iter().any(|n| n.starts_with("bucket=50: not applied") && n.contains("reduce-scatters")),
            "{:?}",
            sharded.notes
        );
        // Where they act, no such note.
        assert!(!plain("fsdp=8,mb=1,gbs=8,prefetch=2").notes.iter().any(|n| n.contains("not applied")));
        assert!(!plain("dp=8,mb=1,gbs=8,bucket=50").notes.iter().any(|n| n.contains("not applied")));
        let with = |spec: &str| project(&model, &a100(8), &Plan::parse(spec).unwrap(), Task::Train).unwrap().times;
        let (plain, overlapped) = (with("tp=8,sp,mb=1,gbs=4"), with("tp=8,sp,mb=1,gbs=4,tp_overlap"));
        assert!(overlapped.exposed_comm_ms < 0.5 * plain.exposed_comm_ms, "{overlapped:?} vs {plain:?}");
        assert!(overlapped.iteration_ms < plain.iteration_ms);
    }

    /// Megatron-Core's equal chunks: 80 layers on 16 stages are 5 a stage, which no two
    /// chunks split; 126 on 16 (7, 8 × 14, 7) split into 8 with the embedding and the loss as
    /// the end stages' eighth; 70 on 4 (17, 18, 18, 17) into 2 the same way; 32 on 4 not into 3.
    #[test]
    fn stages_whose_layers_do_not_split_into_equal_chunks_are_found() {
        assert_eq!(unequal_chunks(80, 16, 2, None, None), Some(5));
        assert_eq!(unequal_chunks(126, 16, 8, None, None), None);
        assert_eq!(unequal_chunks(70, 4, 2, None, None), None);
        assert_eq!(unequal_chunks(32, 4, 3, None, None), Some(8));
        assert_eq!(unequal_chunks(32, 4, 2, None, None), None);
    }

    /// `recompute=op` (torchtitan's per-op selective checkpointing, `parallelize_llama.py` @820504e: every second
    /// matmul of a block recomputed): the backward recomputes K and O (half the attention GEMMs) and SwiGLU's up
    /// projection (a third of the MLP's), and every memory-bound forward op, as full recomputation does.
    #[test]
    fn per_op_selective_checkpointing_recomputes_every_second_matmul() {
        let model = Transformer::preset("llama3-8b").unwrap();
        let mut c = a100(1);
        c.overlap_slowdown = 0.0;
        let t = |r: &str| project(&model, &c, &Plan::parse(&format!("mb=1,gbs=2,recompute={r}")).unwrap(), Task::Train).unwrap().times;
        let (sel, op, full) = (t("selective"), t("op"), t("full"));
        let gemm = |x: &IterationTimes| x.by_kind_ms["gemm"];
        let mem = |x: &IterationTimes| x.by_kind_ms["memory_bound"];
        // The same memory-bound recomputation as full checkpointing.
        assert!(((mem(&op) - mem(&sel)) - (mem(&full) - mem(&sel))).abs() < 1e-9 * mem(&full));
        // Between a third and a half of full recomputation's extra GEMM time; attention is not recomputed.
        let share = (gemm(&op) - gemm(&sel)) / (gemm(&full) - gemm(&sel));
        assert!(share > 1.0 / 3.0 && share < 0.5, "{share}");
        assert_eq!(op.by_kind_ms["attention"], sel.by_kind_ms["attention"]);
        assert_eq!(
            Plan::parse("recompute=op").unwrap().describe(),
            Plan::parse(&Plan::parse("recompute=op").unwrap().describe()).unwrap().describe()
        );
        assert!(Plan::parse("recompute=op").unwrap().describe().contains("recompute=op"));
    }

    /// GB200 / GB300 NVL72: the node is the 72-GPU NVLink domain (DGX GB200 User Guide: 72-GPU NVL domains of 18
    /// trays × 4 GPUs); each tray has one NIC per GPU: 4 ConnectX-7 at 400 Gb/s (GB200, 50 GB/s per GPU), 4
    /// ConnectX-8 at 800 Gb/s (GB300, 100 GB/s per GPU).
    #[test]
    fn nvl72_racks_are_one_node_of_72_gpus_with_one_nic_per_gpu() {
        let catalog = Catalog::builtin();
        for (gpu, nic_gbps) in [("gb200", 50.0), ("gb300", 100.0)] {
            let c = Cluster::from_catalog(&catalog, gpu, 144, Dtype::Bf16, None).unwrap();
            assert_eq!(c.gpus_per_node, 72, "{gpu}");
            assert!((c.inter.busbw_gbps - nic_gbps * DEFAULT_INTER_LINK_EFFICIENCY).abs() < 1e-9, "{gpu}: {}", c.inter.busbw_gbps);
            // A tensor-parallel group of 16 no longer spans nodes.
            let plan = Plan::parse("tp=16,dp=9,mb=1,gbs=9").unwrap();
            let model = Transformer::preset("llama3-70b").unwrap();
            assert!(project(&model, &c, &plan, Task::Train).is_ok(), "{gpu}");
        }
    }

    #[test]
    fn parameter_counts_match_the_published_sizes() {
        let p = |n: &str| Transformer::preset(n).unwrap().params() / 1e9;
        assert!((p("llama2-7b") - 6.74).abs() < 0.1, "{}", p("llama2-7b"));
        assert!((p("llama2-70b") - 69.0).abs() < 1.0, "{}", p("llama2-70b"));
        assert!((p("gpt3-175b") - 175.0).abs() < 2.5, "{}", p("gpt3-175b"));
        assert!((p("mixtral-8x7b") - 46.7).abs() < 0.5, "{}", p("mixtral-8x7b"));
    }

    #[test]
    fn model_flops_per_token_count_as_published_model_tflops() {
        // Megatron-Bridge publishes model TFLOP/s per GPU with tokens/s per GPU
        // (`../shared/evidence/training-runs.json`, performance-summary-archive.md, container 25.09):
        // Llama 3 8B on 8 H100, 14 079 tokens/s and 725 TFLOP/s; Llama 3.1 405B on 1024 H100,
        // 302 and 763. Their counts are these FLOPs per token, the causal attention halved.
        for (preset, tokens_per_s, published) in [("llama3-8b", 14079.0, 725.0), ("llama3-405b", 302.0, 763.0)] {
            let m = Transformer::preset(preset).unwrap();
            assert_eq!(m.seq, 8192.0);
            let tflops = m.model_flops_per_token(0) * tokens_per_s / 1e12;
            assert!((tflops / published - 1.0).abs() < 0.005, "{preset}: {tflops:.1} TFLOP/s, published {published}");
        }
        // Frozen bottom layers run forward only: of Llama 3 8B's 32 layers of 218 103 808 matmul
        // parameters (4096·(4096 + 2·1024) + 4096² + 3·4096·14336) and 12·4096·8192/2 attention
        // FLOPs per token, 31 frozen take two thirds of their 6·N + attention away.
        let m = Transformer::preset("llama3-8b").unwrap();
        let (layer, attention) = (218_103_808.0, 6.0 * 4096.0 * 8192.0);
        let want = m.model_flops_per_token(0) - 2.0 / 3.0 * 31.0 * (6.0 * layer + attention);
        assert!((m.model_flops_per_token(31) / want - 1.0).abs() < 1e-12, "{} vs {want}", m.model_flops_per_token(31));
    }

    #[test]
    fn moe_memory_shards_experts_over_their_replicas_and_mfu_counts_active_parameters() {
        // Mixtral 8×7B: attention 4096·(4096 + 2·1024) + 4096² = 41 943 040 and one
        // expert 3·4096·14336 = 176 160 768 parameters per layer, 32 layers, untied
        // embeddings 2·32000·4096; 2 of 8 experts per token.
        let m = Transformer::preset("mixtral-8x7b").unwrap();
        let (attn, expert, emb) = (41_943_040.0, 176_160_768.0, 2.0 * 32000.0 * 4096.0);
        assert_eq!(m.params(), 32.0 * (attn + 8.0 * expert) + emb);
        assert_eq!(m.active_params(), 32.0 * (attn + 2.0 * expert) + emb);
        // ZeRO-3 over 64 ranks: every parameter sharded 64 ways whether or not the
        // experts are spread over ep=4 (each expert then has 16 replicas), so
        // Adam's 12 bytes per parameter come to the same per GPU.
        let optimizer = |spec: &str| {
            let plan = Plan::parse(spec).unwrap();
            stage_memory(&m, &plan, Task::Train, StageLayers::plain(32), m.embedding_copies(1), 1.0).optimizer_gb
        };
        let truth = 12.0 * m.params() / 64.0 / 1e9;
        for spec in ["fsdp=64", "fsdp=64,ep=4", "fsdp=64,ep=8"] {
            assert!((optimizer(spec) - truth).abs() < 1e-9 * truth, "{spec}: {} GB, truth {truth} GB", optimizer(spec));
        }
        // MFU from the parameters a token's matmuls use (the active ones less the input
        // embedding's lookup) and the causal attention core, 6 · 32 layers · 4096 · s
        // (half of 12 · L · q · s; the preset has no sliding window): (6 · 12.75 B + 6 · 32 · 4096 · 4096) · tokens / (time · GPUs · peak).
        let c = a100(64);
        let plan = Plan::parse("fsdp=64,ep=8,mb=1,gbs=64").unwrap();
        let p = project(&m, &c, &plan, Task::Train).unwrap();
        let matmul = 32.0 * (attn + 2.0 * expert) + 32000.0 * 4096.0;
        assert_eq!(m.seq, 4096.0);
        let per_token = 6.0 * matmul + 6.0 * 32.0 * 4096.0 * 4096.0;
        let want = per_token * 64.0 * m.seq / (p.times.iteration_ms / 1e3) / (64.0 * c.peak_flops);
        assert!(
            (mfu(&m, &c, &plan, p.global_batch, p.times.iteration_ms) - want).abs() < 1e-12,
            "{} vs {want}",
            mfu(&m, &c, &plan, p.global_batch, p.times.iteration_ms)
        );
        assert_eq!(p.mfu, Some(mfu(&m, &c, &plan, p.global_batch, p.times.iteration_ms)));
        assert!(
            mfu(&m, &c, &plan, p.global_batch, p.times.iteration_ms) < 1.0,
            "{}",
            mfu(&m, &c, &plan, p.global_batch, p.times.iteration_ms)
        );
    }

    #[test]
    fn expert_parallelism_beyond_the_data_parallel_ranks_folds_over_tensor_parallelism() {
        // Qwen3-235B-A22B (attention 4096·(8192 + 2·512) + 8192·4096 and one expert
        // 3·4096·1536 parameters per layer, 128 experts) as Megatron-Bridge runs it on H100:
        // tp=2, dp=16, ep=32. EP 32 does not fit in the 16 data-parallel ranks: it folds over
        // tp × dp, each GPU holding 128 / 32 = 4 whole experts (expert TP 1), one replica of each
        // (tp · dp / ep = 1), where tp=2, dp=16, ep=8 splits each of 16 experts over the TP pair.
        let m = Transformer::preset("qwen3-235b-a22b").unwrap();
        let (attn, expert) = (4096.0 * (8192.0 + 2.0 * 512.0) + 8192.0 * 4096.0, 3.0 * 4096.0 * 1536.0);
        assert_eq!(m.attention_params(), attn);
        let folded = Plan::parse("tp=2,dp=16,ep=32,sp").unwrap();
        let within = Plan::parse("tp=2,dp=16,ep=8,sp").unwrap();
        assert_eq!((folded.expert_tp(), folded.expert_replicas()), (1, 1));
        assert_eq!((within.expert_tp(), within.expert_replicas()), (2, 2));
        let weights = |plan: &Plan| stage_memory(&m, plan, Task::Train, StageLayers::plain(1), 0.0, 1.0).weights_gb * 1e9 / 2.0;
        assert!((weights(&folded) - (attn / 2.0 + 4.0 * expert)).abs() < 1.0, "{}", weights(&folded));
        assert!((weights(&within) - (attn / 2.0 + 16.0 * expert / 2.0)).abs() < 1.0, "{}", weights(&within));
        // ZeRO-1 shards each expert's optimizer state over its replicas: none to share with folded, two within.
        let optimizer = |plan: &str| {
            let plan = Plan::parse(plan).unwrap();
            stage_memory(&m, &plan, Task::Train, StageLayers::plain(1), 0.0, 1.0).optimizer_gb * 1e9 / 12.0
        };
        assert!((optimizer("tp=2,dp=16,ep=32,sp,zero=1") - (attn / 2.0 / 16.0 + 4.0 * expert)).abs() < 1.0);
        assert!((optimizer("tp=2,dp=16,ep=8,sp,zero=1") - (attn / 2.0 / 16.0 + 16.0 * expert / 2.0 / 2.0)).abs() < 1.0);
        // The plan projects where it was refused; folded without sequence parallelism it is refused, by name.
        let c = a100(32);
        let p = project(&m, &c, &folded, Task::Train).unwrap();
        assert!(p.times.by_kind_ms.get(OpKind::AllToAll.as_str()).is_some_and(|&t| t > 0.0));
        let e = project(&m, &c, &Plan::parse("tp=2,dp=16,ep=32").unwrap(), Task::Train).unwrap_err().to_string();
        assert!(e.contains("needs sequence parallelism"), "{e}");
        let e = project(&m, &c, &Plan::parse("tp=2,dp=16,ep=64,sp").unwrap(), Task::Train).unwrap_err().to_string();
        assert!(e.contains("ep=64"), "{e}");
    }

    /// A prefill heads the one token of each sequence that is sampled from: what a larger
    /// vocabulary adds is the same over a prompt of 512 or 4096 tokens (it had grown 8×, the whole
    /// prompt's logits). An encoder's forward pass is `inference`, with no first token and no cache.
    #[test]
    fn a_prefill_heads_one_token_of_each_sequence() {
        let c = a100(1);
        let plan = Plan::parse("mb=1").unwrap();
        let m = Transformer::preset("llama3-8b").unwrap();
        let wide = Transformer { vocab: 4.0 * m.vocab, ..m.clone() };
        let head = |prompt: u32| {
            let t = |m: &Transformer| project(m, &c, &plan, Task::Prefill { batch: 2, prompt }).unwrap().times.iteration_ms;
            t(&wide) - t(&m)
        };
        let (short, long) = (head(512), head(4096));
        assert!(short > 0.0 && (long / short - 1.0).abs() < 1e-9, "{short} {long}");
        let p = project(&m, &c, &plan, Task::Prefill { batch: 2, prompt: 512 }).unwrap();
        assert_eq!((p.task.as_str(), p.ttft_ms), ("prefill", Some(p.times.iteration_ms)));
        assert!(p.memory.kv_cache_gb > 0.0);
        let encoder = Transformer { causal: false, ..m };
        let p = project(&encoder, &c, &plan, Task::Prefill { batch: 2, prompt: 512 }).unwrap();
        assert_eq!((p.task.as_str(), p.ttft_ms, p.memory.kv_cache_gb), ("inference", None, 0.0));
        // It has nothing to decode.
        let e = project(&encoder, &c, &plan, Task::Decode { batch: 2, context: 512 }).unwrap_err().to_string();
        assert!(e.contains("is an encoder"), "{e}");
    }

    /// Inference keeps no activations for a backward, but a layer's tensors are alive while it
    /// runs (it had counted 0.00 GB for a 100 000-token prefill). Llama-2 7B (hidden 4096, 32
    /// heads of 128, SwiGLU FFN 11 008): per token the residual and normed input (2 × 4096), beside
    /// the larger of Q, K, V and the output projection's input (4 × 4096 = 16 384) and gate, up
    /// and activation (3 × 11 008 = 33 024): 41 216 BF16 values, 82 432 bytes.
    #[test]
    fn inference_counts_a_layers_working_tensors() {
        let m = Transformer::preset("llama2-7b").unwrap();
        let acts =
            |plan: &str, task: Task| stage_memory(&m, &Plan::parse(plan).unwrap(), task, StageLayers::plain(32), 0.0, 1.0).activations_gb;
        let prefill = acts("tp=1", Task::Prefill { batch: 1, prompt: 100_000 });
        assert!((prefill * 1e9 / (100_000.0 * 82_432.0) - 1.0).abs() < 1e-12, "{prefill}");
        // TP=2 splits the projections, not the residual: 2 × 4096 + 33 024 / 2 = 24 704 values.
        let tp2 = acts("tp=2", Task::Prefill { batch: 1, prompt: 100_000 });
        assert!((tp2 * 1e9 / (100_000.0 * 2.0 * 24_704.0) - 1.0).abs() < 1e-12, "{tp2}");
        // Sequence parallelism splits the residual (4096 / 2) but gathers the normed input whole
        // (4096) for the projections: 6144 + 16 512 values.
        let sp = acts("tp=2,sp", Task::Prefill { batch: 1, prompt: 100_000 });
        assert!((sp * 1e9 / (100_000.0 * 2.0 * 22_656.0) - 1.0).abs() < 1e-12, "{sp}");
        // Decode: one token per sequence.
        let decode = acts("tp=1", Task::Decode { batch: 16, context: 4096 });
        assert!((decode * 1e9 / (16.0 * 82_432.0) - 1.0).abs() < 1e-12, "{decode}");
        // Materialized attention also holds its scores and their softmax, 2 × 32 heads × 4096² of
        // BF16 values for a 4096-token prompt: the attention side (2 147 483 648 bytes beside
        // 4096 × 16 384 × 2) outgrows the MLP's, beside the residual's 4096 × 8192 × 2.
        let scores = acts("tp=1,attention=materialized", Task::Prefill { batch: 1, prompt: 4096 });
        let want = 4096.0 * 8192.0 * 2.0 + 2.0 * 32.0 * 4096.0 * 4096.0 * 2.0 + 4096.0 * 16_384.0 * 2.0;
        assert!((scores * 1e9 / want - 1.0).abs() < 1e-12, "{scores}");
        // Decoding with it, one query per sequence: 2 × 32 heads × 4096 scores for each of 16.
        let decode = acts("tp=1,attention=materialized", Task::Decode { batch: 16, context: 4096 });
        let want = 16.0 * 8192.0 * 2.0 + (2.0 * 16.0 * 32.0 * 4096.0 * 2.0 + 16.0 * 16_384.0 * 2.0_f64).max(16.0 * 33_024.0 * 2.0);
        assert!((decode * 1e9 / want - 1.0).abs() < 1e-12, "{decode}");
        // The measured family that is materialized softmax attention holds the same scores.
        let family = acts("tp=1,attention=pytorch-standard", Task::Prefill { batch: 1, prompt: 4096 });
        assert!((family / scores - 1.0).abs() < 1e-12, "{family} against {scores}");
        assert!(acts("tp=1,attention=fa2", Task::Prefill { batch: 1, prompt: 4096 }) < 0.5 * scores);
        // And in training, its softmax output kept for the backward: 2 bytes × 32 heads × 4096² a layer.
        let train = |spec: &str| memory(&m, &Plan::parse(spec).unwrap(), Task::Train).activations_gb * 1e9;
        let kept = train("tp=1,mb=1,gbs=1,attention=pytorch-standard") - train("tp=1,mb=1,gbs=1,attention=fa2");
        assert!((kept / (32.0 * 2.0 * 32.0 * 4096.0 * 4096.0) - 1.0).abs() < 1e-9, "{kept}");
    }

    #[test]
    fn sliding_windows_price_the_windowed_layers_at_their_share_of_the_causal_work() {
        // GPT-OSS-120B (config.json: 36 layers of 64 heads of 64, 8 KV heads, 128 experts of
        // 2880, untied 201 088-token vocabulary): the model card's 117 B parameters.
        let m = Transformer::preset("gpt-oss-120b").unwrap();
        assert!((m.params() / 117e9 - 1.0).abs() < 0.01, "{}", m.params());
        // The card's 5.13 B active: experts, attention and the unembedding, not the input embedding.
        assert!((m.matmul_params() / 5.13e9 - 1.0).abs() < 0.01, "{}", m.matmul_params());
        assert_eq!(m.active_params() - m.matmul_params(), 201088.0 * 2880.0);
        // Half the layers see 128 keys at most: over 4096 tokens a windowed layer's causal work
        // is (2·4096·128 − 128²) / 4096² of the full one; decode over a 4096-token cache 128/4096.
        let windowed = (2.0 * 4096.0 * 128.0 - 128.0 * 128.0) / (4096.0 * 4096.0);
        assert!((m.window_factor(4096.0, false) - (0.5 + 0.5 * windowed)).abs() < 1e-12);
        assert!((m.window_factor(4096.0, true) - (0.5 + 0.5 * 128.0 / 4096.0)).abs() < 1e-12);
        assert_eq!(m.window_factor(128.0, false), 1.0);
        // The KV cache keeps a windowed layer's window only: 8 sequences of 32 768 tokens over
        // tp=8 (one KV head of 64 per GPU, 16-bit) hold 18 layers' whole context and 18 layers'
        // 128 tokens, 18·2·64·2·8·(32 768 + 128) bytes (it had held all 36 layers' whole context).
        let plan = Plan::parse("tp=8").unwrap();
        let cache = |task| stage_memory(&m, &plan, task, StageLayers::plain(36), 0.0, 1.0).kv_cache_gb * 1e9;
        let want = 18.0 * 2.0 * 64.0 * 2.0 * 8.0 * (32768.0 + 128.0);
        assert!((cache(Task::Decode { batch: 8, context: 32768 }) / want - 1.0).abs() < 1e-12);
        assert!((cache(Task::Prefill { batch: 8, prompt: 32768 }) / want - 1.0).abs() < 1e-12);
        // Within the window every layer keeps every token.
        assert!((cache(Task::Decode { batch: 8, context: 100 }) / (36.0 * 2.0 * 64.0 * 2.0 * 8.0 * 100.0) - 1.0).abs() < 1e-12);
        // The projection's attention is that share of the same model without windows.
        let full = Transformer { windowed_layers: 0, ..m.clone() };
        let c = a100(8);
        let plan = Plan::parse("dp=8,ep=8,mb=1").unwrap();
        let attention = |m: &Transformer| {
            let p = project(m, &c, &plan, Task::Train).unwrap();
            p.times.by_kind_ms.get(OpKind::Attention.as_str()).copied().unwrap_or(0.0)
        };
        let ratio = attention(&m) / attention(&full);
        assert!((ratio - m.window_factor(4096.0, false)).abs() < 1e-9, "{ratio}");
        // Its notes say which kernels priced its 64-wide heads, at its own shape (H100's measured ones).
        let h100 = Cluster::for_model(&Catalog::builtin(), "h100-sxm", 8, 2.0, None).unwrap();
        let notes = project(&m, &h100, &plan, Task::Train).unwrap().notes;
        let flash = notes.iter().find(|n| n.starts_with("flash attention at its shapes")).unwrap();
        assert!(flash.contains("64 heads of 64 over 4096 tokens") && flash.contains("head dim 64"), "{flash}");
        assert!(notes.iter().any(|n| n.starts_with("sliding-window attention on 18 of 36 layers")), "{notes:?}");
    }

    #[test]
    fn dense_ffn_layers_of_a_mixture_of_experts_route_nothing_and_hold_no_experts() {
        // DeepSeek-V3 on one pipeline stage, FSDP over 256 GPUs and experts over 64: its first 3
        // of 61 layers (one FFN of 18 432 = 9 experts' width) have no all-to-all ...
        let m = Transformer::preset("deepseek-v3").unwrap();
        let all_moe = Transformer { dense_layers: 0, ..m.clone() };
        let gb200 = Cluster::for_model(&Catalog::builtin(), "gb200", 256, 2.0, None).unwrap();
        let plan = Plan::parse("fsdp=256,ep=64,mb=1,gbs=2048").unwrap();
        let run = |m: &Transformer| project(m, &gb200, &plan, Task::Train).unwrap();
        let (dense_first, moe) = (run(&m), run(&all_moe));
        let a2a = |p: &Projection| p.times.by_kind_ms["all_to_all"];
        assert!((a2a(&dense_first) / a2a(&moe) - 58.0 / 61.0).abs() < 1e-9, "{} vs {}", a2a(&dense_first), a2a(&moe));
        // ... and hold no experts: per GPU 4 of each layer's 256 experts, sharded over their 4
        // replicas, and its shared expert over all 256 ranks, where a dense layer holds its FFN
        // sharded over the 256 ranks (16-bit weights).
        let expert = 3.0 * 7168.0 * 2048.0;
        let fewer = 3.0 * (4.0 * expert / 4.0 + expert / 256.0 - 9.0 * expert / 256.0) * 2.0 / 1e9;
        let weights = moe.memory.weights_gb - dense_first.memory.weights_gb;
        assert!((weights / fewer - 1.0).abs() < 1e-9, "{weights} GB fewer, expected {fewer}");
        // The runs format takes the same two figures (`dense_layers`, `dense_ffn`); a dense model has none.
        assert_eq!(Transformer::preset("llama3-8b").unwrap().dense_of(32), 0);
    }

    #[test]
    fn latent_attention_and_shared_experts_count_deepseeks_parameters() {
        // DeepSeek-V3 per layer: q_a 7168·1536, q_b 1536·128·(128+64), kv_a 7168·(512+64),
        // kv_b 512·128·(128+128), o 128·128·7168; 256 routed and 1 shared expert of 3·7168·2048.
        let m = Transformer::preset("deepseek-v3").unwrap();
        let attn = 7168.0 * 1536.0 + 1536.0 * 128.0 * 192.0 + 7168.0 * 576.0 + 512.0 * 128.0 * 256.0 + 128.0 * 128.0 * 7168.0;
        let expert = 3.0 * 7168.0 * 2048.0;
        assert_eq!(m.attention_params(), attn);
        assert_eq!(m.layer_params(), attn + 257.0 * expert);
        // Its first 3 layers have one dense FFN of 18 432 (3·7168·18432 = 9 experts' parameters)
        // in place of experts: 671 B parameters and 37 B activated per token, as the model card says.
        let (dense_ffn, embeddings) = (3.0 * 7168.0 * 18432.0, 2.0 * 129280.0 * 7168.0);
        let close = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-12;
        assert!(close(m.params(), 58.0 * (attn + 257.0 * expert) + 3.0 * (attn + dense_ffn) + embeddings), "{}", m.params());
        assert!((m.params() / 671e9 - 1.0).abs() < 0.001, "{}", m.params());
        assert!(close(m.active_params(), 58.0 * (attn + 9.0 * expert) + 3.0 * (attn + dense_ffn) + embeddings));
        assert!((m.active_params() / 37e9 - 1.0).abs() < 0.02, "{}", m.active_params());
        // Kimi-K2, the same layout with 64 heads, 384 experts, a 163 840-token vocabulary and one
        // dense layer: 1 T parameters and 32 B activated, as its model card says.
        let kimi = Transformer::preset("kimi-k2").unwrap();
        let kimi_attn = 7168.0 * 1536.0 + 1536.0 * 64.0 * 192.0 + 7168.0 * 576.0 + 512.0 * 64.0 * 256.0 + 64.0 * 128.0 * 7168.0;
        let kimi_embeddings = 2.0 * 163840.0 * 7168.0;
        assert!(close(kimi.params(), 60.0 * (kimi_attn + 385.0 * expert) + kimi_attn + dense_ffn + kimi_embeddings));
        assert!((kimi.params() / 1e12 - 1.0).abs() < 0.05, "{}", kimi.params());
        assert!((kimi.active_params() / 32e9 - 1.0).abs() < 0.03, "{}", kimi.active_params());
        // The KV cache holds one latent of 512 and the rotary key of 64 per token and layer, 16-bit,
        // on every tensor-parallel rank (all heads share it).
        let cache = |tp: &str| {
            let plan = Plan::parse(tp).unwrap();
            stage_memory(&m, &plan, Task::Decode { batch: 1, context: 4096 }, StageLayers::plain(1), 0.0, 1.0).kv_cache_gb * 1e9
        };
        assert_eq!(cache("tp=1"), 4096.0 * (512.0 + 64.0) * 2.0);
        assert_eq!(cache("tp=8"), cache("tp=1"));
        // Under TP the two down-projections stay whole on every rank, the rest is split.
        let whole = 7168.0 * 1536.0 + 7168.0 * 576.0;
        assert!((m.attention_per_gpu(8.0) - (whole + (attn - whole) / 8.0)).abs() < 1.0);
        // The attention core's FLOPs: per head a 192-wide query/key product and a 128-wide value product.
        let mla = m.mla.unwrap();
        assert_eq!(m.q_dim() * 2.0, m.heads * (mla.qk_nope + mla.qk_rope + mla.v_head));
        // The same model without its shared expert: less MLP time, the routed experts unchanged.
        let c = a100(16);
        let plan = Plan::parse("dp=16,ep=16,mb=1").unwrap();
        let gemm = |m: &Transformer| project(m, &c, &plan, Task::Train).unwrap().times.by_kind_ms[OpKind::Gemm.as_str()];
        assert!(gemm(&m) > gemm(&Transformer { shared_experts: 0.0, ..m.clone() }));
    }

    #[test]
    fn a_mixture_of_experts_keeps_its_routed_activations() {
        // Mixtral (d 4096, 8 of 32 KV heads, SwiGLU experts of 14 336, 2 per token, no dropout), one
        // layer, 4096 tokens, no TP: Korthikanti's terms without the MLP's — norms 4, QKV input 2,
        // Q 2, K and V 2 · 2 · 1/4, output 2: 11·s·b·d — plus two routed copies of the input
        // (2 · 2d bytes) and of the experts' up (2 · 14 336) and activation (14 336) outputs in 16 bits.
        let m = Transformer::preset("mixtral-8x7b").unwrap();
        let plan = Plan::parse("dp=8,ep=8,mb=1").unwrap();
        let activations = stage_memory(&m, &plan, Task::Train, StageLayers::plain(1), 0.0, 1.0).activations_gb * 1e9;
        let sbd = 4096.0 * 4096.0;
        let want = 11.0 * sbd + 2.0 * 2.0 * sbd + 2.0 * 2.0 * 4096.0 * (2.0 * 14336.0 + 14336.0);
        assert!((activations - want).abs() < 1.0, "{activations} vs {want}");
        // Llama-3-8B's terms (the same with a dense SwiGLU FFN of 3.5d: 8 whole, 5 + 21 split) sum to GPT-3's 34.
        let dense = Transformer::preset("llama3-8b").unwrap();
        let a = stage_memory(&dense, &Plan::parse("mb=1").unwrap(), Task::Train, StageLayers::plain(1), 0.0, 1.0).activations_gb * 1e9;
        assert!((a - 34.0 * 8192.0 * 4096.0).abs() < 1.0, "{a}");
    }

    #[test]
    fn norms_residuals_and_activations_move_their_framework_traffic() {
        // The same model with a SwiGLU or a GeLU MLP of equal width differs in the
        // activation's traffic only: per token and layer SwiGLU moves 3f forward and
        // 5f backward 16-bit elements, GeLU 2f and 3f, so the difference in
        // memory-bound time is layers · tokens · 3f · 2 bytes at η·BW (one step, mb=1),
        // plus the optimizer's 40 bytes for each of the gate's layers · d · f parameters.
        let mut swiglu = Transformer::preset("llama2-7b").unwrap();
        swiglu.swiglu = true;
        let gelu = Transformer { swiglu: false, ..swiglu.clone() };
        let c = a100(1);
        let plan = Plan::parse("mb=1").unwrap();
        let layers = swiglu.layers as f64;
        let traffic = layers * swiglu.seq * 3.0 * swiglu.ffn * 2.0 + 40.0 * layers * swiglu.hidden * swiglu.ffn;
        let truth = traffic / (c.memory_efficiency * c.hbm_bw);
        let got = memory_bound_s(&swiglu, &c, &plan) - memory_bound_s(&gelu, &c, &plan);
        assert!((got - truth).abs() < 1e-6 * truth, "{got} s, truth {truth} s");
    }

    /// A mixture of experts moves each token to its experts and back: one more expert a token
    /// (Mixtral's top 2 → 3) adds, per token and MoE layer, that expert's SwiGLU traffic (3f
    /// forward, 5f backward) and two more rows of d each way (the permutation's write of one more
    /// copy, the combine's read of it), 16-bit, at η·BW; nothing else memory-bound moves.
    #[test]
    fn a_mixture_of_experts_moves_its_tokens_to_their_experts_and_back() {
        let top2 = Transformer::preset("mixtral-8x7b").unwrap();
        let top3 = Transformer { top_k: 3.0, ..top2.clone() };
        let c = a100(1);
        let plan = Plan::parse("mb=1").unwrap();
        let (layers, tokens) = (top2.layers as f64, top2.seq);
        let traffic = layers * tokens * (8.0 * top2.ffn + 4.0 * top2.hidden) * 2.0;
        let truth = traffic / (c.memory_efficiency * c.hbm_bw);
        let got = memory_bound_s(&top3, &c, &plan) - memory_bound_s(&top2, &c, &plan);
        assert!((got - truth).abs() < 1e-6 * truth, "{got} s, truth {truth} s");
    }

    /// `etp=1` (Megatron-Core's expert TP of 1) keeps whole experts on each GPU and folds the
    /// expert-parallel group over TP × CP × DP, as an `ep` that does not divide dp × cp does:
    /// Mixtral on `tp=2,dp=32,ep=8` holds each expert over 4 replicas split in two, with `etp=1`
    /// over 8 replicas whole (2 × 32 ÷ 8), its all-to-all inside a node of 8 (ep adjacent), and
    /// the MoE weights per GPU twice as large. `etp` is 1 or tp, and tp splits only an `ep` that
    /// divides dp × cp.
    #[test]
    fn expert_tp_of_one_folds_the_experts_over_tensor_parallelism() {
        let split = Plan::parse("tp=2,ep=8,dp=32,sp").unwrap();
        let whole = Plan::parse("tp=2,ep=8,etp=1,dp=32,sp").unwrap();
        assert!(!split.folds_experts() && whole.folds_experts());
        assert_eq!((split.expert_tp(), split.expert_replicas()), (2, 4));
        assert_eq!((whole.expert_tp(), whole.expert_replicas()), (1, 8));
        assert_eq!(Plan::parse("tp=2,ep=8,etp=2,dp=32,sp").unwrap().expert_tp(), 2);
        assert!(whole.describe().contains("etp=1"), "{}", whole.describe());
        assert!(Plan::parse("tp=2,ep=8,etp=4,dp=32,sp").unwrap_err().to_string().contains("etp=4: 1 (whole experts"));
        // With tp=1 the two choices are one, said as one (it had read "1 (…) or tp=1 (…)").
        let e = Plan::parse("dp=8,ep=8,etp=2").unwrap_err().to_string();
        assert!(
            e.contains("etp=2: 1 (whole experts on each GPU): experts are split over at most the tensor-parallel ranks, and tp=1")
                && !e.contains("or tp=1"),
            "{e}"
        );
        assert!(Plan::parse("tp=2,ep=3,etp=2,dp=4,sp").unwrap_err().to_string().contains("ep=3 must divide dp × cp = 4"));
        let m = Transformer::preset("mixtral-8x7b").unwrap();
        let weights = |p: &Plan| stage_memory(&m, p, Task::Train, StageLayers::plain(1), 0.0, 1.0).weights_gb;
        let expert_gb = m.ffn_params() * m.experts / 8.0 * m.bytes / 1e9;
        let dense_gb = |p: &Plan| weights(p) - expert_gb / f64::from(p.expert_tp());
        assert!((dense_gb(&split) - dense_gb(&whole)).abs() < 1e-9, "{} {}", weights(&split), weights(&whole));
    }

    #[test]
    fn per_op_selective_checkpointing_keeps_the_outputs_its_policy_saves() {
        // Llama-3-8B (d 4096, 8 of 32 KV heads of 128, SwiGLU 14 336), one layer of 8192
        // tokens, no TP: the block's input (2), Q (2), V (2 · 1024/4096), the attention
        // output (2), the gate (2 · 3.5) and the down projection (2): 15.5 · s·b·d, plus the
        // layer being recomputed at its full 34 · s·b·d.
        let m = Transformer::preset("llama3-8b").unwrap();
        let sbd = 8192.0 * 4096.0;
        let one = |spec: &str, layers: usize| {
            let plan = Plan::parse(spec).unwrap();
            stage_memory(&m, &plan, Task::Train, StageLayers::plain(layers), 0.0, 1.0).activations_gb * 1e9
        };
        let (a1, a2) = (one("mb=1,recompute=op", 1), one("mb=1,recompute=op", 2));
        assert!((a2 - a1 - 15.5 * sbd).abs() < 1.0, "{}", (a2 - a1) / sbd);
        assert!((a1 - (15.5 + 34.0) * sbd).abs() < 1.0, "{}", a1 / sbd);
        // tp=8 with sequence parallelism: the input, Q, V, attention output and gate split 8
        // ways (13.5 / 8), the down projection's partial sum whole (2), the two
        // reduce-scatters' outputs 2 / 8 each.
        let (t1, t2) = (one("tp=8,sp,mb=1,recompute=op", 1), one("tp=8,sp,mb=1,recompute=op", 2));
        let want = 13.5 / 8.0 + 2.0 + 4.0 / 8.0;
        assert!((t2 - t1 - want * sbd).abs() < 1.0, "{} vs {want}", (t2 - t1) / sbd);

        // torchtitan's Llama-2 70B on 64 A100-80GB, FSDP, per-op selective checkpointing:
        // local batch 1 ran, "local batch 2 OOMs with selective AC" (its performance table's
        // footnote, `tt-llama2-70b-64xa100-selective-op-lbs1` in the evidence's training-runs.json). Keeping every activation, as
        // before, made local batch 1 not fit either (89.9 GB of activations).
        let llama2 = Transformer { seq: 4096.0, ..Transformer::preset("llama2-70b").unwrap() };
        let c = a100(64);
        let fits = |spec: &str| project(&llama2, &c, &Plan::parse(spec).unwrap(), Task::Train).unwrap().fits_memory;
        assert!(fits("fsdp=64,mb=1,recompute=op"));
        assert!(!fits("fsdp=64,mb=2,recompute=op"));
    }

    #[test]
    fn full_recomputation_keeps_each_layers_input_sharded_by_sequence_parallelism() {
        // Llama-3-70B, tp=8, microbatch 16 of 8192 tokens: each of the 80 layers keeps its
        // 16-bit input (2·s·b·d bytes; with sequence parallelism 1/8 of it per rank), and the
        // layer being recomputed its full activations once (Korthikanti's terms for its shapes:
        // s·b·d·(8 + 25.5/t), all of it over t with SP).
        let m = Transformer::preset("llama3-70b").unwrap();
        let sbd = 16.0 * 8192.0 * 8192.0;
        let acts = |spec: &str| {
            let plan = Plan::parse(spec).unwrap();
            stage_memory(&m, &plan, Task::Train, StageLayers::plain(80), m.embedding_copies(1), 1.0).activations_gb
        };
        let with_sp = (2.0 * sbd / 8.0 * 80.0 + sbd * 33.5 / 8.0) / 1e9;
        let without = (2.0 * sbd * 80.0 + sbd * (8.0 + 25.5 / 8.0)) / 1e9;
        assert!((acts("tp=8,dp=32,sp,mb=16,recompute=full") - with_sp).abs() < 1e-9 * with_sp);
        assert!((acts("tp=8,dp=32,mb=16,recompute=full") - without).abs() < 1e-9 * without);
    }

    #[test]
    fn plans_parse_and_describe() {
        let p = Plan::parse("tp=8,pp=4,fsdp=64,mb=2,gbs=1024,sp").unwrap();
        assert_eq!((p.tp, p.pp, p.dp, p.zero, p.microbatch, p.microbatches, p.sp), (8, 4, 64, 3, 2, 8, true));
        assert_eq!(Plan::parse(&p.describe()).unwrap(), p);
        assert!(Plan::parse("tp=0").is_err());
        assert!(Plan::parse("tq=2").is_err());
        assert!(Plan::parse("dp=3,gbs=10").is_err());
    }

    /// A setting written twice is refused, naming it and both parts, whatever its spelling;
    /// a value that is not a whole number is quoted as written.
    #[test]
    fn plans_refuse_a_setting_given_twice_and_quote_bad_numbers() {
        let err = |spec: &str| Plan::parse(spec).unwrap_err().to_string();
        for (spec, setting, first, second) in [
            ("tp=8,tp=4", "tp", "tp=8", "tp=4"),
            ("tp=2,dp=2,fsdp=4", "dp", "dp=2", "fsdp=4"),
            ("ddp=2,dp=2", "dp", "ddp=2", "dp=2"),
            ("mb=2, microbatch=4", "mb", "mb=2", "microbatch=4"),
            ("microbatches=2,m=4", "microbatches", "microbatches=2", "m=4"),
            ("sp,sp", "sp", "sp", "sp"),
            ("recompute,recompute=selective", "recompute", "recompute", "recompute=selective"),
            // fsdp=N is dp=N with ZeRO-3; gbs sets the microbatches (either one silently won).
            ("fsdp=8,zero=1", "zero", "fsdp=8", "zero=1"),
            ("zero=3,fsdp=8", "zero", "zero=3", "fsdp=8"),
            ("dp=4,gbs=64,microbatches=2", "microbatches", "gbs=64", "microbatches=2"),
        ] {
            assert_eq!(err(spec), format!("{setting} is given twice ({first}, {second})"), "{spec}");
        }
        // Different settings that read alike are not twice the same.
        assert_eq!(Plan::parse("mb=2,microbatches=4").unwrap().microbatches, 4);
        for key in ["tp", "pp", "dp", "fsdp", "ep", "mb", "microbatches", "gbs", "vpp", "cp", "first", "last", "frozen", "prefetch"] {
            for value in ["-1", "x", "1.5"] {
                assert_eq!(err(&format!("{key}={value}")), format!("{key}: \"{value}\" is not a whole number"));
            }
        }
        // A setting that is on or off takes `on` or `off`, or nothing (on): `fp8=0` had turned FP8 on.
        let on = |spec: &str| Plan::parse(spec).unwrap();
        for (key, get) in [
            ("sp", (|p: &Plan| p.sp) as fn(&Plan) -> bool),
            ("fp8", |p| p.fp8),
            ("dropout", |p| p.dropout),
            ("p2p_overlap", |p| p.p2p_overlap),
            ("tp_overlap", |p| p.tp_overlap),
        ] {
            assert!(get(&on(key)) && get(&on(&format!("{key}=on"))), "{key}");
            assert!(!get(&on(&format!("{key}=off"))), "{key}=off");
            for value in ["0", "1", "false", "no"] {
                assert_eq!(err(&format!("{key}={value}")), format!("{key}={value}: on or off"));
            }
        }
    }

    /// A plan parsed with its stated keys: those its text wrote, as written, whatever their value
    /// (what `validate`'s framework defaults leave alone); the text does not change what it runs.
    #[test]
    fn plans_remember_the_keys_their_text_states() {
        let (p, stated) = Plan::parse_stated(" tp = 2 ,ddp=4, zero=0,tp_overlap=off,,recompute=none").unwrap();
        for key in ["tp", "ddp", "zero", "tp_overlap", "recompute"] {
            assert!(stated.contains(key), "{key}");
        }
        for key in ["dp", "fsdp", "sp", "p2p_overlap", "pp", "", "tq"] {
            assert!(!stated.contains(key), "{key}");
        }
        assert_eq!(p, Plan { tp: 2, dp: 4, ..Plan::default() });
        assert_eq!(Plan::parse_stated("tp=2,dp=4").unwrap().0, p);
        assert!(StatedKeys::KEYS.iter().all(|k| !StatedKeys::default().contains(k)));
        // What a search chooses, the rest being the stack's settings.
        let layout = "tp,pp,dp,ddp,fsdp,zero,ep,mb,microbatch,microbatches,m,gbs,sp,recompute,vpp,cp,first,last";
        assert_eq!(StatedKeys::layout_keys().join(","), layout);
        assert_eq!(
            StatedKeys::setting_keys().join(","),
            "fp8,dropout,grad_sync,frozen,p2p_overlap,tp_overlap,attention,prefetch,bucket,grad_reduce,etp"
        );
        // Every key parse takes has its bit.
        let every = "tp=1,pp=1,dp=1,ddp=1,fsdp=1,zero=1,ep=1,etp=1,mb=1,microbatch=1,microbatches=1,m=1,gbs=1,sp,recompute,vpp=1,cp=1,\
                     fp8,dropout,first=1,last=1,grad_sync=after,frozen=1,p2p_overlap,tp_overlap,attention=flash,prefetch=1,bucket=25,grad_reduce=fp32";
        assert_eq!(every.split(',').count(), StatedKeys::KEYS.len());
        // One key at a time: `dp`, `ddp` and `fsdp` (and `mb` and `microbatch`, …) set one setting, given once.
        for part in every.split(',') {
            let (_, stated) = Plan::parse_stated(part).unwrap();
            assert!(stated.contains(part.trim().split('=').next().unwrap()), "{part}: {stated:?}");
        }
    }

    #[test]
    fn hierarchical_collectives_cost_more_across_nodes() {
        let c = a100(64);
        let inside = c.all_reduce(1e9, 8, 8);
        let across = c.all_reduce(1e9, 64, 8);
        let flat = c.all_reduce(1e9, 8, 1);
        assert!(inside < across && across < flat, "{inside} {across} {flat}");
        // Bandwidth-bound: twice the bytes, about twice the time.
        assert!((c.all_reduce(2e9, 8, 8) / inside - 2.0).abs() < 0.01);
    }

    #[test]
    fn collectives_are_the_price_hw_cost_gives_in_a_node_and_across_nodes() {
        use tracecast_calibrate::pricing::{Operation, Pricing};
        use tracecast_ingest::collective::Collective;
        let catalog = Catalog::builtin();
        let cluster = Cluster::from_catalog(&catalog, "h100-sxm", 64, Dtype::Bf16, None).unwrap();
        let pricing = Pricing::builtin();
        let gpu = catalog.gpu("h100-sxm").unwrap();
        let quote = |collective, bytes, gpus, gpus_per_node, nic_gbps_per_gpu| {
            let op = Operation::Collective(CollectiveQuery { collective, bytes, gpus, gpus_per_node, nic_gbps_per_gpu });
            pricing.quote(gpu, &op, None, None).unwrap().time_us
        };
        let same = |a: f64, b: f64| (a * 1e6 / b - 1.0).abs() < 1e-9;
        for (gpus, per_node) in [(8, 8), (16, 8), (64, 8), (8, 1)] {
            let (ar, ag, a2a) = (
                cluster.all_reduce(16e9, gpus, per_node),
                cluster.all_gather(1e9, gpus, per_node),
                cluster.all_to_all(1e8, gpus, per_node),
            );
            assert!(same(ar, quote(Collective::AllReduce, 16e9, gpus, per_node, None)), "all-reduce over {gpus}: {ar} s");
            assert!(same(ag, quote(Collective::AllGather, 1e9, gpus, per_node, None)), "all-gather over {gpus}: {ag} s");
            assert!(same(a2a, quote(Collective::AllToAll, 1e8, gpus, per_node, None)), "all-to-all over {gpus}: {a2a} s");
        }
        // A run's network other than the node preset's (50 GB/s per GPU): the link rule over
        // it across nodes; inside a node nothing changes.
        let slow = SystemOverrides { nic_gbps_per_gpu: Some(12.5), ..Default::default() }.apply(cluster.clone()).unwrap();
        let across = slow.all_reduce(16e9, 16, 8);
        assert!(same(across, quote(Collective::AllReduce, 16e9, 16, 8, Some(12.5))), "{across} s");
        assert!(across > 2.0 * cluster.all_reduce(16e9, 16, 8), "a quarter of the network: {across} s");
        assert_eq!(slow.all_reduce(16e9, 8, 8), cluster.all_reduce(16e9, 8, 8));
        assert!(
            slow.priced_by
                .collectives
                .iter()
                .any(|n| n.starts_with("collectives across nodes") && n.contains("12.5 GB/s of network per GPU")),
            "{:#?}",
            slow.priced_by
        );
    }

    #[test]
    fn a_profile_fitting_one_tier_prices_that_tier_and_the_pricing_layer_the_other() {
        use tracecast_calibrate::pricing::Pricing;
        let catalog = Catalog::builtin();
        let base = Cluster::from_catalog(&catalog, "h100-sxm", 64, Dtype::Bf16, None).unwrap();
        let pricing = Pricing::builtin();
        let gpu = catalog.gpu("h100-sxm").unwrap();
        let price = |bytes: f64, gpus: u32, gpn: u32| {
            pricing.collective(gpu, &CollectiveQuery::new(Collective::AllReduce, bytes, gpus, gpn)).unwrap().time_us * 1e-6
        };
        let bytes = 1e9;
        // A traced node whose links ran slowly (a profile's in-node fit only): 20 GB/s.
        let mut slow_node = base.clone();
        slow_node.intra = Link { alpha_us: 10.0, busbw_gbps: 20.0 };
        slow_node.prices.as_mut().unwrap().links_given = [true, false];
        let (inside, across) = (slow_node.all_reduce(bytes, 8, 8), slow_node.all_reduce(bytes, 16, 8));
        // In the node the fit, 2·(g−1)/g of the buffer; across nodes that tier plus each GPU's
        // 1/8 share over 2 nodes at one GPU per node by the pricing layer. More GPUs over the
        // same slow links never price faster (the whole across-nodes price had ignored the fit).
        assert!((inside / slow_node.intra.transfer_s(2.0 * 7.0 / 8.0 * bytes) - 1.0).abs() < 1e-9);
        assert!((across / (inside + price(bytes / 8.0, 2, 1)) - 1.0).abs() < 1e-9, "{across} s");
        assert!(across > inside);
        // A profile that fits the network only: the in-node tier is the pricing layer's
        // 8-GPU price (it had been the default α-β), the tier across nodes its fit.
        let mut fit_network = base.clone();
        fit_network.inter = Link { alpha_us: 30.0, busbw_gbps: 40.0 };
        fit_network.prices.as_mut().unwrap().links_given = [false, true];
        let across = fit_network.all_reduce(bytes, 16, 8);
        let want = price(bytes, 8, 8) + fit_network.inter.transfer_s(2.0 * 1.0 / 16.0 * bytes);
        assert!((across / want - 1.0).abs() < 1e-9, "{across} s, want {want}");
        assert_eq!(fit_network.all_reduce(bytes, 8, 8), price(bytes, 8, 8));
    }

    #[test]
    fn sequence_parallelism_reduce_scatters_and_gathers_where_tensor_parallelism_all_reduces() {
        // One H100 node, tp=8, one microbatch of one sequence: per layer two tensor-parallel
        // collectives each way over the layer's activations (seq × hidden × 2 bytes). Without sp
        // each is an all-reduce; with sp a reduce-scatter and an all-gather, priced as themselves.
        let catalog = Catalog::builtin();
        let c = Cluster::from_catalog(&catalog, "h100-sxm", 8, Dtype::Bf16, None).unwrap();
        let m = Transformer::preset("llama3-8b").unwrap();
        let act = m.seq * m.hidden * 2.0;
        let per_kind = |spec: &str| project(&m, &c, &Plan::parse(spec).unwrap(), Task::Train).unwrap().times.by_kind_ms;
        let ops = 4.0 * m.layers as f64;
        let plain = per_kind("tp=8,mb=1,gbs=1");
        assert!((plain["all_reduce"] / (ops * c.all_reduce(act, 8, 8) * 1e3) - 1.0).abs() < 1e-9, "{plain:?}");
        assert!(!plain.contains_key("all_gather") && !plain.contains_key("reduce_scatter"), "{plain:?}");
        let sp = per_kind("tp=8,sp,mb=1,gbs=1");
        assert!(!sp.contains_key("all_reduce"), "{sp:?}");
        assert!((sp["all_gather"] / (ops * c.all_gather(act, 8, 8) * 1e3) - 1.0).abs() < 1e-9, "{sp:?}");
        assert!((sp["reduce_scatter"] / (ops * c.reduce_scatter(act, 8, 8) * 1e3) - 1.0).abs() < 1e-9, "{sp:?}");
        // H100's all-reduce curve includes in-switch reduction; the pair moves the same bytes slower.
        assert!(sp["all_gather"] + sp["reduce_scatter"] > plain["all_reduce"], "{sp:?} {plain:?}");
        // torchtitan's per-op checkpointing saves no collective but reduce-scatters: its backward
        // gathers each block's input again (two all-gathers a layer with sp), or, without sp,
        // all-reduces the attention output again (the MLP's recomputed norm reads it).
        let op_sp = per_kind("tp=8,sp,mb=1,gbs=1,recompute=op");
        assert!((op_sp["all_gather"] / (1.5 * ops * c.all_gather(act, 8, 8) * 1e3) - 1.0).abs() < 1e-9, "{op_sp:?}");
        assert_eq!(op_sp["reduce_scatter"], sp["reduce_scatter"]);
        let op_plain = per_kind("tp=8,mb=1,gbs=1,recompute=op");
        assert!((op_plain["all_reduce"] / (1.25 * ops * c.all_reduce(act, 8, 8) * 1e3) - 1.0).abs() < 1e-9, "{op_plain:?}");
        // What the pair costs is measured on an H200 node (mle-h200-collectives, 16 GiB):
        // all-gather 361.4 and reduce-scatter 362.9 GB/s bus bandwidth against the in-switch
        // all-reduce's 480; each is priced at its own measurement, not the all-reduce's.
        let h200 = Cluster::from_catalog(&catalog, "h200", 8, Dtype::Bf16, None).unwrap();
        let size = 16.0 * 1024f64.powi(3);
        let at = |busbw_gbps: f64| 7.0 / 8.0 * size / (busbw_gbps * 1e9);
        assert!((h200.all_gather(size, 8, 8) / at(361.4) - 1.0).abs() < 1e-9, "{}", h200.all_gather(size, 8, 8));
        assert!((h200.reduce_scatter(size, 8, 8) / at(362.9) - 1.0).abs() < 1e-9, "{}", h200.reduce_scatter(size, 8, 8));
        // (The all-reduce by Azure's curve, 479.98 GB/s at its largest 8 GiB, within 0.1 % of the 480.)
        assert!((h200.all_reduce(size, 8, 8) / (2.0 * at(480.0)) - 1.0).abs() < 1e-3, "{}", h200.all_reduce(size, 8, 8));
    }

    #[test]
    fn activations_follow_korthikanti_term_by_term_and_interleaving_holds_more_in_flight() {
        let acts = |m: &Transformer, spec: &str| memory(m, &Plan::parse(spec).unwrap(), Task::Train).activations_gb * 1e9;
        let close = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-9;
        // GPT-3 175B (FFN 4h, every head its own K and V) with dropout in BF16: Korthikanti et
        // al.'s Table 2, 34·s·b·h per layer under sequence parallelism, 10 + 24/t without.
        // Without a pipeline the one stage also keeps what §4.3 adds for the output: the final
        // norm's and the head's inputs, 2·s·b·h each (over t with sequence parallelism), and the
        // 32-bit logits, 4·s·b·v/t.
        let gpt3 = Transformer::preset("gpt3-175b").unwrap();
        let sbh = gpt3.seq * gpt3.hidden;
        let layers = gpt3.layers as f64;
        let head = |m: &Transformer, sp: bool| 4.0 * m.seq * m.hidden / if sp { 8.0 } else { 1.0 } + 4.0 * m.seq * m.vocab / 8.0;
        assert!(close(acts(&gpt3, "tp=8,sp,dropout,mb=1,gbs=1"), layers * 34.0 / 8.0 * sbh + head(&gpt3, true)));
        assert!(close(acts(&gpt3, "tp=8,dropout,mb=1,gbs=1"), layers * (10.0 + 24.0 / 8.0) * sbh + head(&gpt3, false)));
        // Llama-3 70B (gated FFN 3.5h, 8 of 64 KV heads, no dropout): norms 4, QKV and FC1 inputs 2 + 2
        // kept whole; Q 2, K and V 2 · 2/8, output 2, FC1's both halves 2 · 7, SiLU·up 2 · 3.5 split.
        // In FP8 the linear inputs are kept cast (1 byte), the output projection's beside the attention's.
        let llama = Transformer::preset("llama3-70b").unwrap();
        let sbh = llama.seq * llama.hidden;
        assert!(close(acts(&llama, "tp=8,mb=1,gbs=1"), 80.0 * (8.0 + 25.5 / 8.0) * sbh + head(&llama, false)));
        assert!(close(acts(&llama, "tp=8,fp8,mb=1,gbs=1"), 80.0 * (6.0 + 23.0 / 8.0) * sbh + head(&llama, false)));
        // Interleaved 1F1B: rank 0 of pp=4 runs 2·3 + 4·4 chunks of 1/5 of its 20 layers ahead and
        // holds one more: 4.6 microbatches' worth, 1 + 3/20 times 1F1B's 4.
        let per_layer = (8.0 + 25.5) / 8.0 * sbh;
        assert!(close(acts(&llama, "tp=8,pp=4,sp,mb=1,gbs=16"), 20.0 * 4.0 * per_layer));
        assert!(close(acts(&llama, "tp=8,pp=4,vpp=5,sp,mb=1,gbs=16"), 20.0 * 4.6 * per_layer));
        // Fewer microbatches than the warm-up wants: all of them, each chunk once.
        assert!(close(acts(&llama, "tp=8,pp=4,vpp=5,sp,mb=1,gbs=4"), 20.0 * 4.0 * per_layer));
    }

    #[test]
    fn selective_recomputation_runs_a_materializing_familys_forward_again() {
        // pytorch-standard keeps no scores under selective recomputation, so its forward runs
        // again in the backward: the attention time grows by the forward's, layers × f.
        let m = Transformer::preset("llama2-7b").unwrap();
        let catalog = Catalog::builtin();
        let c = Cluster::from_catalog(&catalog, "h100-sxm", 1, Dtype::Bf16, None).unwrap();
        let attention = |spec: &str| {
            let plan = Plan::parse(spec).unwrap();
            project(&m, &c, &plan, Task::Train).unwrap().times.by_kind_ms["attention"] / 1e3
        };
        let flops = 4.0 * m.heads * m.seq * m.seq * m.head_dim * 0.5;
        let (f, _, _) = c.attention_at(1.0, m.heads, m.seq, m.head_dim, flops, Some("pytorch-standard"), true).unwrap();
        let added = attention("mb=1,recompute=selective,attention=pytorch-standard") - attention("mb=1,attention=pytorch-standard");
        assert!((added / (m.layers as f64 * f) - 1.0).abs() < 1e-6, "{added} s against {} × {f} s", m.layers);
        // A flash family recomputes its scores in its own backward: selective recomputation costs it nothing.
        assert_eq!(attention("mb=1,recompute=selective,attention=fa2"), attention("mb=1,attention=fa2"));
    }

    #[test]
    fn materialized_attention_moves_the_score_matrix_through_hbm() {
        // A GPU whose compute is nearly free and kernels have no fixed cost: what
        // materialized attention adds is its score traffic alone, per layer
        // 4·E (forward: QKᵀ writes, softmax reads and writes, P·V reads) and
        // 7·E (backward) elements of 2 bytes, E = b·heads·s², at η·BW.
        let m = Transformer::preset("llama2-7b").unwrap();
        let mut c = a100(1);
        c.peak_flops = 1e24;
        c.gemm_overhead_s = 0.0;
        let time = |spec: &str| {
            let plan = Plan::parse(spec).unwrap();
            project(&m, &c, &plan, Task::Train).unwrap().times.iteration_ms / 1e3
        };
        let (flash, materialized) = (time("mb=1"), time("mb=1,attention=materialized"));
        let e = m.heads * m.seq * m.seq;
        let truth = m.layers as f64 * (4.0 + 7.0) * e * 2.0 / (c.memory_efficiency * c.hbm_bw);
        let added = materialized - flash;
        assert!((added / truth - 1.0).abs() < 0.02, "{added} s added, {truth} s of score traffic");
        // The softmax output is kept for the backward unless recomputed.
        let mem = |spec: &str| memory(&m, &Plan::parse(spec).unwrap(), Task::Train).activations_gb;
        let kept = mem("mb=1,attention=materialized") - mem("mb=1");
        assert!((kept - m.layers as f64 * 2.0 * e / 1e9).abs() < 1e-6, "{kept} GB");
        assert_eq!(mem("mb=1,recompute,attention=materialized"), mem("mb=1,recompute"));
        assert!(Plan::parse("attention=").unwrap_err().to_string().contains("flash, materialized or a kernel family"));
        assert!(Plan::parse(&Plan::parse("attention=materialized").unwrap().describe()).unwrap().materialized_attention);
        let family = Plan::parse("attention=FA-Triton").unwrap();
        assert_eq!((family.attention_kernel.as_deref(), family.materialized_attention), (Some("fa-triton"), false));
        assert_eq!(Plan::parse(&family.describe()).unwrap(), family);
    }

    #[test]
    fn dropout_draws_applies_and_keeps_a_mask_over_materialized_scores() {
        // Free compute, no fixed cost: dropout over materialized scores adds, per layer,
        // 5 bytes per score forward (read P, write the dropped copy and a 1-byte mask) and
        // 5 backward (read the gradient and the mask, write dP), plus the 1-byte masks of the
        // two hidden dropouts (written forward, read backward) over b·s·d elements.
        let m = Transformer::preset("llama2-7b").unwrap();
        let mut c = a100(1);
        c.peak_flops = 1e24;
        c.gemm_overhead_s = 0.0;
        let time = |spec: &str| project(&m, &c, &Plan::parse(spec).unwrap(), Task::Train).unwrap().times.iteration_ms / 1e3;
        let bw = c.memory_efficiency * c.hbm_bw;
        let e = m.heads * m.seq * m.seq;
        let hidden = 2.0 * m.seq * m.hidden;
        let added = time("mb=1,attention=materialized,dropout") - time("mb=1,attention=materialized");
        let truth = m.layers as f64 * (2.0 * 5.0 * e + 2.0 * hidden) / bw;
        assert!((added / truth - 1.0).abs() < 0.02, "{added} s added, {truth} s of mask traffic");
        // Flash attention draws its mask on chip: only the hidden masks remain.
        let added = time("mb=1,dropout") - time("mb=1");
        assert!((added / (m.layers as f64 * 2.0 * hidden / bw) - 1.0).abs() < 0.02, "{added} s");
        // Kept for the backward: Korthikanti's 5·a·s²·b bytes instead of 2 without dropout, and
        // the two hidden dropouts' 1-byte masks over s·b·d.
        let mem = |spec: &str| memory(&m, &Plan::parse(spec).unwrap(), Task::Train).activations_gb;
        let kept = mem("mb=1,attention=materialized,dropout") - mem("mb=1");
        assert!((kept - m.layers as f64 * (5.0 * e + hidden) / 1e9).abs() < 1e-6, "{kept} GB");
        assert!(Plan::parse(&Plan::parse("dropout").unwrap().describe()).unwrap().dropout);
    }

    /// ZeRO-2 updates a shard of whole weights: the next forward all-gathers the updated
    /// weights layer by layer (once per microbatch, as FSDP's SHARD_GRAD_OP) and the
    /// backward keeps them, where ZeRO-3 gathers them again. ZeRO-2 had gathered nothing,
    /// moving half of ZeRO-1's bytes, and `search` ranked it first for that.
    #[test]
    fn zero_2_gathers_the_updated_weights_in_each_forward_only() {
        let m = Transformer::preset("llama2-7b").unwrap();
        let c = a100(16);
        let kind = |spec: &str, k: &str| {
            project(&m, &c, &Plan::parse(spec).unwrap(), Task::Train).unwrap().times.by_kind_ms.get(k).copied().unwrap_or(0.0)
        };
        let layers = m.layers as f64;
        let bytes = m.bytes;
        // One layer's weights gathered over the 16 replicas (8 to a node), in ms; the input
        // embedding and the output head (untied: two 32 000 × 4 096 matrices) with the root unit,
        // once per forward (the root keeps them through the backward).
        let layer_ms = (c.all_gather(m.attention_params() * bytes, 16, 8) + c.all_gather(m.ffn_params() * bytes, 16, 8)) * 1e3;
        let matrix = 32000.0 * 4096.0 * bytes;
        let embed_ms = c.all_gather(2.0 * matrix, 16, 8) * 1e3;
        for microbatches in [1.0, 3.0] {
            let spec = |z: u32| format!("dp=16,zero={z},mb=1,microbatches={microbatches}");
            let (two, three) = (kind(&spec(2), "all_gather"), kind(&spec(3), "all_gather"));
            let want = microbatches * (layers * layer_ms + embed_ms);
            assert!((two / want - 1.0).abs() < 1e-9, "zero=2: {two} ms, {microbatches} × ({layers} × {layer_ms} + {embed_ms})");
            let want = microbatches * (2.0 * layers * layer_ms + embed_ms);
            assert!((three / want - 1.0).abs() < 1e-9, "zero=3 {three} ms against {want}");
            // Both reduce-scatter every microbatch's gradients layer by layer (no buckets): ZeRO-2
            // the head's behind its backward and the embedding's at the end, FSDP both together
            // with the root unit.
            let (attn, ffn) = (m.attention_params() * bytes, m.ffn_params() * bytes);
            let per_layer = layers * (c.reduce_scatter(attn, 16, 8) + c.reduce_scatter(ffn, 16, 8)) * 1e3;
            for (z, embed) in [(2, 2.0 * c.reduce_scatter(matrix, 16, 8)), (3, c.reduce_scatter(2.0 * matrix, 16, 8))] {
                let rs = kind(&spec(z), "reduce_scatter");
                let want = microbatches * (per_layer + embed * 1e3);
                assert!((rs / want - 1.0).abs() < 1e-9, "zero={z}: {rs} ms against {want}");
            }
            assert_eq!(kind(&spec(1), "all_gather"), 0.0);
        }
    }

    #[test]
    fn flash_attention_runs_at_the_fitted_attention_efficiency() {
        // Attention at half the GEMM η: its core takes twice as long, the GEMMs do not move.
        let m = Transformer::preset("llama2-7b").unwrap();
        let mut c = a100(8);
        c.gemm_overhead_s = 0.0;
        let plan = Plan::parse("tp=8,mb=1").unwrap();
        let kind = |c: &Cluster, k: &str| project(&m, c, &plan, Task::Train).unwrap().times.by_kind_ms[k];
        let (attn, gemm) = (kind(&c, "attention"), kind(&c, "gemm"));
        let mut slow = c.clone();
        slow.attention_efficiency = Some(c.gemm_efficiency / 2.0);
        assert!((kind(&slow, "attention") / attn - 2.0).abs() < 1e-9, "{} vs {attn}", kind(&slow, "attention"));
        assert_eq!(kind(&slow, "gemm"), gemm);
    }

    #[test]
    fn flash_attention_prices_both_passes_with_one_kernel_family() {
        // H100's measured attention: FA3's chart is forward only, FA2's chart forward plus
        // backward. A training step runs one of them: the two passes add up to FA2's
        // forward-plus-backward time, and the forward is not FA3's (about 2× faster).
        let catalog = Catalog::builtin();
        let c = Cluster::from_catalog(&catalog, "h100-sxm", 8, Dtype::Bf16, None).unwrap();
        let p = c.prices.as_ref().unwrap();
        let shape = |backward| tracecast_calibrate::pricing::AttentionShape {
            batch: 1.0,
            heads: 32.0,
            seq: 8192.0,
            head_dim: 128.0,
            causal: true,
            backward,
        };
        let flops = shape(false).flops();
        let (f, b, _) = c.attention_at(1.0, 32.0, 8192.0, 128.0, flops, None, true).unwrap();
        let (fb, family) = p.pricing.attention_of_family(&p.gpu, &shape(true), None).unwrap();
        assert_eq!(&*family, "fa2");
        assert!(((f + b) * 1e6 - fb.time_us).abs() < 1e-6 * fb.time_us, "{f} + {b} s vs {} µs", fb.time_us);
        let fa3 = p.pricing.attention(&p.gpu, &shape(false), Some("fa3")).unwrap();
        assert!(f * 1e6 > 1.5 * fa3.time_us, "forward {} µs vs FA3's {} µs", f * 1e6, fa3.time_us);
    }

    /// FSDP's root unit (the input embedding and the output head) stays gathered from the
    /// forward's start to the backward's end: whole on every GPU beside its shard; frozen
    /// bottom layers freeze the input embedding below them (no gradient, no Adam state, no
    /// reduction), the head still trains.
    #[test]
    fn the_embedding_is_held_whole_under_fsdp_and_frozen_with_the_bottom_layers() {
        let m = Transformer::preset("llama2-7b").unwrap();
        let matrix = 32000.0 * 4096.0;
        let stage = |spec: &str, frozen: usize, vocab: f64| {
            let stage = StageLayers { layers: 32, dense: 0, frozen, loss: true };
            stage_memory(&m, &Plan::parse(spec).unwrap(), Task::Train, stage, vocab, 1.0)
        };
        // Two 16-bit matrices held whole: their shard (1/16) and the rest gathered (15/16).
        let held = stage("dp=16,zero=3,mb=1", 0, 2.0).weights_gb - stage("dp=16,zero=3,mb=1", 0, 0.0).weights_gb;
        assert!((held * 1e9 - 2.0 * matrix * 2.0).abs() < 1e-3, "{held} GB");
        // DDP, nothing sharded: one layer and the input embedding leave the Adam states (12 bytes
        // a parameter) and the 16-bit gradients; the head's stay.
        let (all, frozen) = (stage("dp=16,mb=1", 0, 2.0), stage("dp=16,mb=1", 1, 2.0));
        let layer = m.dense_params() + m.ffn_params();
        assert!(((all.optimizer_gb - frozen.optimizer_gb) * 1e9 - 12.0 * (layer + matrix)).abs() < 1e-2);
        assert!(((all.gradients_gb - frozen.gradients_gb) * 1e9 - 2.0 * (layer + matrix)).abs() < 1e-2);
        // The optimizer step (40 bytes a trained parameter at the HBM rate) loses one layer and
        // the input embedding: more than a frozen layer's backward norms and activations save
        // beside one layer's step alone (about 0.8 GB of traffic against the matrix's 5.2 GB).
        let c = a100(16);
        let memory_bound_ms =
            |spec: &str| project(&m, &c, &Plan::parse(spec).unwrap(), Task::Train).unwrap().times.by_kind_ms["memory_bound"];
        let saved = memory_bound_ms("dp=16,mb=1") - memory_bound_ms("dp=16,mb=1,frozen=1");
        assert!(saved > c.memory(40.0 * (layer + matrix)) * 1e3, "{saved} ms");
    }

    /// With a pipeline the first stage's input embedding is reduced after its last backward,
    /// which ends the schedule: the step grows by that reduction, all of it exposed. Llama-2-7B
    /// on pp=2 × dp=4 (DDP, 25 MiB buckets): the reported stage's 16 layers and the embedding
    /// (32 000 × 4 096 16-bit weights) in buckets.
    #[test]
    fn a_pipelines_first_stage_reduces_its_embedding_at_the_end_of_the_step() {
        let m = Transformer::preset("llama2-7b").unwrap();
        let c = a100(8);
        let p = project(&m, &c, &Plan::parse("pp=2,dp=4,mb=1,gbs=16").unwrap(), Task::Train).unwrap();
        let bucket = 25.0 * 1024.0 * 1024.0;
        let (layers, embedding) = (16.0 * (m.dense_params() + m.ffn_params()) * m.bytes, 32000.0 * 4096.0 * m.bytes);
        let g = members_per_node(4, 1, 8);
        let per_byte = c.all_reduce(bucket, 4, g) / bucket * 1e3;
        let all_reduce = p.times.by_kind_ms["all_reduce"];
        assert!((all_reduce / (per_byte * (layers + embedding)) - 1.0).abs() < 1e-6, "{all_reduce} ms");
        assert!(p.times.exposed_comm_ms >= per_byte * embedding - 1e-6, "{} ms exposed", p.times.exposed_comm_ms);
        // Tied, on 16 GPUs (tp=2 with sp, dp=4, pp=2): the end stages are 8 ranks apart, on two nodes, and
        // all-reduce their copies' gradients across them after the backward, as Megatron does.
        let mut tied = m.clone();
        tied.tied_embeddings = true;
        let c = a100(16);
        let p = project(&tied, &c, &Plan::parse("tp=2,pp=2,dp=4,sp,mb=1,gbs=16").unwrap(), Task::Train).unwrap();
        let per_byte = c.all_reduce(bucket, 4, members_per_node(4, 2, 8)) / bucket * 1e3;
        let want = per_byte * (layers + embedding) / 2.0 + c.all_reduce(embedding / 2.0, 2, 1) * 1e3;
        let all_reduce = p.times.by_kind_ms["all_reduce"];
        assert!((all_reduce / want - 1.0).abs() < 1e-6, "{all_reduce} ms against {want}");
    }

    #[test]
    fn ddp_reduces_gradients_in_buckets() {
        // Llama-2-7B on 8 GPUs, DDP: each layer's 16-bit gradients (attention and MLP weights) are
        // reduced as their share of a bucket's all-reduce; the step's all-reduce time is the
        // stage's gradient bytes in buckets of 25 MiB (PyTorch DDP's default), or of `bucket=`.
        let m = Transformer::preset("llama2-7b").unwrap();
        let c = a100(8);
        let all_reduce = |spec: &str| project(&m, &c, &Plan::parse(spec).unwrap(), Task::Train).unwrap().times.by_kind_ms["all_reduce"];
        // The input embedding's and the output head's gradients too (two 32 000 × 4 096 matrices).
        let (attn, mlp) = (m.dense_params() * m.bytes, m.ffn_params() * m.bytes);
        let stage = (attn + mlp) * m.layers as f64 + 2.0 * 32000.0 * 4096.0 * m.bytes;
        let at = |bucket: f64| (c.all_reduce(bucket, 8, 8) * stage / bucket) * 1e3;
        let mib = 1024.0 * 1024.0;
        for (spec, bucket) in [("dp=8,mb=1", 25.0 * mib), ("dp=8,mb=1,bucket=100", 100.0 * mib)] {
            assert!((all_reduce(spec) / at(bucket) - 1.0).abs() < 1e-9, "{spec}: {} vs {}", all_reduce(spec), at(bucket));
        }
        // A bucket larger than the stage is one all-reduce of it; so is a reduction after the backward.
        for spec in ["dp=8,mb=1,bucket=1000000", "dp=8,mb=1,grad_sync=after"] {
            assert!((all_reduce(spec) / at(stage) - 1.0).abs() < 1e-9, "{spec}");
        }
        // A frozen bottom layer has no gradients, nor has the input embedding below it (the
        // backward stops above them); the head's still are reduced.
        let frozen = (c.all_reduce(25.0 * mib, 8, 8) * (stage - attn - mlp - 32000.0 * 4096.0 * m.bytes) / (25.0 * mib)) * 1e3;
        assert!((all_reduce("dp=8,mb=1,frozen=1") / frozen - 1.0).abs() < 1e-9, "{} vs {frozen}", all_reduce("dp=8,mb=1,frozen=1"));
        // Small buckets pay the collective's latency more often.
        assert!(all_reduce("dp=8,mb=1,bucket=1") > all_reduce("dp=8,mb=1"));
        assert!(Plan::parse("bucket=0").unwrap_err().to_string().contains("bucket=0: a gradient bucket in MiB"));
        assert_eq!(Plan::parse(&Plan::parse("bucket=76.3").unwrap().describe()).unwrap(), Plan::parse("bucket=76.3").unwrap());
        // Shown as given, not as the bytes it rounds to.
        for given in ["76.3", "25", "0.5", "1000"] {
            assert!(Plan::parse(&format!("dp=8,bucket={given}")).unwrap().describe().ends_with(&format!(",bucket={given}")), "{given}");
        }
        // A bucket under a byte is one byte, shown as a size that reads back (it had been "0").
        let tiny = Plan::parse("dp=8,bucket=0.0000001").unwrap();
        assert_eq!(Plan::parse(&tiny.describe()).unwrap(), tiny, "{}", tiny.describe());
    }

    #[test]
    fn every_layers_gradients_follow_the_reduce_type() {
        // DeepSeek-V3's first three layers are dense FFN layers: their gradients are reduced like
        // the MoE layers' (in 25 MiB buckets, linear in the bytes), so FP32 gradients double the
        // step's all-reduce time, dense layers included.
        let m = Transformer::preset("deepseek-v3").unwrap();
        let c = a100(16);
        let all_reduce = |spec: &str| project(&m, &c, &Plan::parse(spec).unwrap(), Task::Train).unwrap().times.by_kind_ms["all_reduce"];
        let (bf16, fp32) = (all_reduce("dp=16,ep=8,mb=1,gbs=16"), all_reduce("dp=16,ep=8,mb=1,gbs=16,grad_reduce=fp32"));
        assert!((fp32 / bf16 - 2.0).abs() < 1e-9, "{fp32} ms against {bf16} ms");
    }

    #[test]
    fn fsdp_under_a_pipeline_gathers_and_reduces_once_per_step_and_keeps_the_stage_whole() {
        let m = Transformer::preset("llama2-7b").unwrap();
        let c = a100(16);
        let kinds = |spec: &str| project(&m, &c, &Plan::parse(spec).unwrap(), Task::Train).unwrap().times.by_kind_ms;
        // With a pipeline the step's gathers and reductions do not grow with its microbatches ...
        let (two, eight) = (kinds("pp=2,fsdp=8,mb=1,microbatches=2"), kinds("pp=2,fsdp=8,mb=1,microbatches=8"));
        for k in ["all_gather", "reduce_scatter"] {
            assert!(two[k] > 0.0 && (eight[k] / two[k] - 1.0).abs() < 1e-9, "{k}: {} vs {}", eight[k], two[k]);
        }
        // ... without one, each microbatch gathers its weights twice and reduce-scatters its gradients.
        let c8 = a100(8);
        let plain = |mb: u32| {
            project(&m, &c8, &Plan::parse(&format!("fsdp=8,mb=1,microbatches={mb}")).unwrap(), Task::Train).unwrap().times.by_kind_ms
        };
        assert!((plain(8)["all_gather"] / plain(2)["all_gather"] - 4.0).abs() < 1e-9);
        // Memory: the stage's weights whole beside their shard, its gradients whole in their reduce type.
        let mem = |spec: &str| memory(&m, &Plan::parse(spec).unwrap(), Task::Train);
        let (whole, fsdp) = (mem("pp=2,mb=1,microbatches=8"), mem("pp=2,fsdp=8,mb=1,microbatches=8"));
        assert!((fsdp.weights_gb - whole.weights_gb * (1.0 + 1.0 / 8.0)).abs() < 1e-9, "{} vs {}", fsdp.weights_gb, whole.weights_gb);
        assert!((fsdp.gradients_gb - whole.gradients_gb).abs() < 1e-9, "{} vs {}", fsdp.gradients_gb, whole.gradients_gb);
        // In FP32 (torchtitan's reduce type) twice the 16-bit gradients.
        let fp32 = mem("pp=2,fsdp=8,mb=1,microbatches=8,grad_reduce=fp32");
        assert!((fp32.gradients_gb - whole.gradients_gb * 4.0 / m.bytes).abs() < 1e-9, "{} vs {}", fp32.gradients_gb, whole.gradients_gb);
        assert!((fsdp.optimizer_gb - whole.optimizer_gb / 8.0).abs() < 1e-9);
        let p = project(&m, &c, &Plan::parse("pp=2,fsdp=8,mb=1,microbatches=8").unwrap(), Task::Train).unwrap();
        assert!(p.notes.iter().any(|n| n.starts_with("fsdp under pp") && n.contains("8 microbatches")), "{:?}", p.notes);
    }

    #[test]
    fn a_plans_attention_kernel_family_prices_the_core() {
        // MPT-7B's shapes (32 heads of 128, 2048 tokens, causal) on A100: FlashAttention-2's
        // chart measures 155 TFLOP/s forward plus backward, its "FlashAttention Triton" 68
        // (`fa2-chart-a100`): the attention core takes 155/68 as long, nothing else moves
        // (one GPU: no collective beside the compute to slow it).
        let mut m = Transformer::preset("llama2-7b").unwrap();
        m.seq = 2048.0;
        let catalog = Catalog::builtin();
        let c = Cluster::from_catalog(&catalog, "a100-80gb", 1, Dtype::Bf16, None).unwrap();
        let run = |spec: &str| project(&m, &c, &Plan::parse(spec).unwrap(), Task::Train);
        let (fast, triton) = (run("mb=4").unwrap(), run("mb=4,attention=fa-triton").unwrap());
        let ratio = triton.times.by_kind_ms["attention"] / fast.times.by_kind_ms["attention"];
        assert!((ratio / (155.0 / 68.0) - 1.0).abs() < 0.01, "{ratio}");
        assert_eq!(triton.times.by_kind_ms["gemm"], fast.times.by_kind_ms["gemm"]);
        assert!(triton.notes.iter().any(|n| n.contains("fa-triton on a100-80gb")), "{:?}", triton.notes);
        // A family measured only on another vendor's GPUs is said to be replaced by the fastest.
        let amd = run("mb=4,attention=aotriton").unwrap();
        assert_eq!(amd.times.by_kind_ms["attention"], fast.times.by_kind_ms["attention"]);
        assert!(
            amd.notes.iter().any(|n| n.starts_with("attention=aotriton: no forward-plus-backward measurement") && n.contains("fastest")),
            "{:?}",
            amd.notes
        );
        // A name no measurement knows is refused, with the names it could be.
        let typo = run("mb=4,attention=fa-trition").unwrap_err().to_string();
        assert!(typo.contains("attention=fa-trition") && typo.contains("fa-triton"), "{typo}");
    }

    #[test]
    fn a_prefill_runs_the_fastest_forward_kernel_and_a_forward_only_family() {
        // H100's FA3 chart is forward only (602 TFLOP/s at 8 k tokens, head dim 128, where FA2's
        // forward plus backward runs 308): a prefill prices its attention by the fastest forward
        // (FA3's) by default and by `attention=fa3`; a training step cannot run FA3 from that chart
        // and says so.
        let catalog = Catalog::builtin();
        let c = Cluster::from_catalog(&catalog, "h100-sxm", 1, Dtype::Bf16, None).unwrap();
        let mut m = Transformer::preset("llama2-7b").unwrap();
        m.seq = 8192.0;
        let prefill = Task::Prefill { batch: 1, prompt: 8192 };
        let attn = |spec: &str, task| project(&m, &c, &Plan::parse(spec).unwrap(), task).unwrap().times.by_kind_ms["attention"];
        let p = c.prices.as_ref().unwrap();
        let fwd = tracecast_calibrate::pricing::AttentionShape {
            batch: 1.0,
            heads: 32.0,
            seq: 8192.0,
            head_dim: 128.0,
            causal: true,
            backward: false,
        };
        let fa3 = p.pricing.attention(&p.gpu, &fwd, Some("fa3")).unwrap().time_us * 1e-3 * m.layers as f64;
        for spec in ["mb=1", "mb=1,attention=fa3"] {
            assert!((attn(spec, prefill) / fa3 - 1.0).abs() < 1e-6, "{spec}: {} ms against FA3's {fa3} ms", attn(spec, prefill));
        }
        let train = project(&m, &c, &Plan::parse("mb=1,attention=fa3").unwrap(), Task::Train).unwrap();
        assert!(train.notes.iter().any(|n| n.starts_with("attention=fa3: no forward-plus-backward measurement")), "{:?}", train.notes);
    }

    #[test]
    fn context_parallelism_splits_the_sequence_and_gathers_its_keys_and_values() {
        let m = Transformer::preset("llama2-7b").unwrap();
        let mut long = m.clone();
        long.seq = 32768.0;
        let c = a100(8);
        let run = |spec: &str| project(&long, &c, &Plan::parse(spec).unwrap(), Task::Train).unwrap();
        let (one, split) = (run("tp=8,mb=1"), run("tp=2,cp=4,mb=1"));
        // Same GPUs, same global batch: each cp rank computes a quarter of the sequence.
        assert_eq!(one.global_batch, split.global_batch);
        let gemm = |p: &Projection| p.times.by_kind_ms["gemm"];
        // GEMM work per GPU: tp=8 splits each GEMM 8 ways, tp=2 × cp=4 splits the tokens 4 and the GEMMs 2 ways.
        assert!((gemm(&split) / gemm(&one) - 1.0).abs() < 0.1, "{} vs {}", gemm(&split), gemm(&one));
        // The K/V all-gathers are there (forward, and reduce-scatters backward), the activations a quarter.
        assert!(split.notes.iter().any(|n| n.starts_with("cp=4")), "{:?}", split.notes);
        let act = |spec: &str| memory(&long, &Plan::parse(spec).unwrap(), Task::Train).activations_gb;
        assert!((act("tp=2,cp=4") / act("tp=2") - 0.25).abs() < 1e-9);
        // Gradients and ZeRO shards span dp × cp.
        let opt = |spec: &str| memory(&long, &Plan::parse(spec).unwrap(), Task::Train).optimizer_gb;
        assert!((opt("tp=2,cp=4,zero=1") / opt("tp=2,zero=1") - 0.25).abs() < 1e-9);
        assert!(Plan::parse("tp=2,cp=4").unwrap().gpus() == 8);
        let odd = Transformer { seq: 1001.0, ..m.clone() };
        assert!(project(&odd, &a100(2), &Plan::parse("cp=2").unwrap(), Task::Train).unwrap_err().to_string().contains("chunks"));
    }

    #[test]
    fn fp8_runs_the_linear_layers_at_the_fp8_peak() {
        let m = Transformer::preset("llama2-7b").unwrap();
        let mut c = a100(8);
        // Nearly free HBM: the GEMM time alone shows the peak used.
        c.hbm_bw = 1e18;
        let run = |spec: &str| project(&m, &c, &Plan::parse(spec).unwrap(), Task::Train).unwrap();
        let (bf16, fp8) = (run("fsdp=8,mb=1"), run("fsdp=8,mb=1,fp8"));
        let gemm = |p: &Projection| p.times.by_kind_ms["gemm"];
        // The test cluster's FP8 peak is twice its 16-bit one; the output head stays 16-bit.
        let ratio = gemm(&fp8) / gemm(&bf16);
        assert!(ratio > 0.5 && ratio < 0.6, "{ratio}");
        assert!(fp8.notes.iter().any(|n| n.starts_with("fp8:")), "{:?}", fp8.notes);
        let mut no_fp8 = a100(8);
        no_fp8.fp8_peak_flops = None;
        assert!(project(&m, &no_fp8, &Plan::parse("fsdp=8,fp8").unwrap(), Task::Train).unwrap_err().to_string().contains("no FP8 peak"));
    }

    /// Serving under `fp8` holds and reads the linear layers' weights in one byte (vLLM's and
    /// TensorRT-LLM's FP8 checkpoints); training keeps its 16-bit weights beside an FP8 copy.
    /// A decode step, bound by reading the weights, is then faster, not slower.
    #[test]
    fn fp8_serving_holds_and_reads_fp8_weights() {
        let m = Transformer::preset("llama2-70b").unwrap();
        let h100 = Cluster::for_model(&Catalog::builtin(), "h100-sxm", 8, 2.0, None).unwrap();
        let decode = Task::Decode { batch: 16, context: 4096 };
        let run = |spec: &str, task: Task| project(&m, &h100, &Plan::parse(spec).unwrap(), task).unwrap();
        let (bf16, fp8) = (run("tp=8", decode), run("tp=8,fp8", decode));
        // Per GPU: the linear layers' weights in one byte, the two vocabulary matrices in two.
        let linear = m.params() - m.embedding_params();
        let want = (linear + 2.0 * m.embedding_params()) / 8.0 / 1e9;
        assert!((fp8.memory.weights_gb / want - 1.0).abs() < 1e-9, "{} vs {want}", fp8.memory.weights_gb);
        assert!((bf16.memory.weights_gb / (2.0 * m.params() / 8.0 / 1e9) - 1.0).abs() < 1e-9);
        let gemm = |p: &Projection| p.times.by_kind_ms["gemm"];
        assert!(gemm(&fp8) < 0.85 * gemm(&bf16), "{} vs {}", gemm(&fp8), gemm(&bf16));
        assert!(fp8.times.iteration_ms < bf16.times.iteration_ms);
        assert!(fp8.notes.iter().any(|n| n.starts_with("fp8:") && n.contains("held and read in FP8")), "{:?}", fp8.notes);
        // The 16-bit serving says the precision it read the weights at (a checkpoint served in 4 bits reads less).
        let read_at = |p: &Projection| p.notes.iter().any(|n| n.starts_with("weights read at 2 byte(s) a parameter"));
        assert!(read_at(&bf16) && !read_at(&fp8), "{:?}", bf16.notes);
        // Training: the FP8 copy beside the 16-bit weights.
        let train = run("tp=8,fp8,mb=1,gbs=1", Task::Train);
        assert!((train.memory.weights_gb / ((2.0 * m.params() + linear) / 8.0 / 1e9) - 1.0).abs() < 1e-9, "{}", train.memory.weights_gb);
    }

    /// A KV cache the tensor-parallel ranks cannot split is said: Qwen3-30B-A3B's 4 KV heads
    /// (config.json) over tp = 8 are each on 2 ranks; DeepSeek-V3's latent cache is whole on each.
    #[test]
    fn inference_says_a_kv_cache_replicated_over_tp() {
        let h100 = Cluster::for_model(&Catalog::builtin(), "h100-sxm", 8, 2.0, None).unwrap();
        let decode = Task::Decode { batch: 1, context: 1024 };
        let notes =
            |model: &str| project(&Transformer::preset(model).unwrap(), &h100, &Plan::parse("tp=8").unwrap(), decode).unwrap().notes;
        let kv = |notes: &[String]| notes.iter().find(|n| n.starts_with("KV cache:")).cloned();
        assert_eq!(kv(&notes("qwen3-30b-a3b")).as_deref(), Some("KV cache: 4 KV heads over tp=8: each head's cache replicated on 2 ranks"));
        assert!(kv(&notes("deepseek-v3")).is_some_and(|n| n.contains("latent (MLA) cache whole on each of the tp=8 ranks")));
        // Llama-2 7B's 32 KV heads split over 8 ranks: nothing to say.
        assert_eq!(kv(&notes("llama2-7b")), None);
    }

    #[test]
    fn notes_name_what_priced_attention_and_fp8_linears() {
        // Materialized attention is priced by its score traffic and η GEMMs, not by flash
        // kernels: its note replaces the cluster's flash one, and memory says what it keeps.
        let m = Transformer::preset("llama2-7b").unwrap();
        let catalog = Catalog::builtin();
        let a100_80gb = Cluster::for_model(&catalog, "a100-80gb", 8, 2.0, None).unwrap();
        let notes = |c: &Cluster, spec: &str| project(&m, c, &Plan::parse(spec).unwrap(), Task::Train).unwrap().notes;
        let flash = notes(&a100_80gb, "dp=8,mb=1");
        assert!(flash.iter().any(|n| n.starts_with("flash attention at its shapes") && n.contains("32 heads of 128")), "{flash:?}");
        assert!(flash.iter().any(|n| n.starts_with("memory:") && n.ends_with("with flash attention")), "{flash:?}");
        let materialized = notes(&a100_80gb, "dp=8,mb=1,attention=materialized,dropout");
        assert!(!materialized.iter().any(|n| n.contains("flash attention")), "{materialized:?}");
        assert!(materialized.iter().any(|n| n.starts_with("attention materialized:") && n.contains("dropout mask")), "{materialized:?}");
        assert!(materialized.iter().any(|n| n.starts_with("memory:") && n.contains("softmax output kept")), "{materialized:?}");
        let recomputed = notes(&a100_80gb, "dp=8,mb=1,recompute,attention=materialized");
        assert!(recomputed.iter().any(|n| n.starts_with("memory:") && n.contains("recomputed, not kept")), "{recomputed:?}");
        // FP8 linears on H100: the measured FP8 GEMM table priced them, and the note says so.
        let h100 = Cluster::for_model(&catalog, "h100-sxm", 8, 2.0, None).unwrap();
        let fp8 = notes(&h100, "dp=8,mb=1,fp8");
        assert!(
            fp8.iter().any(|n| n.starts_with("fp8: linear layers' GEMMs at their shapes in FP8") && n.contains("FP8 table")),
            "{fp8:?}"
        );
        // Without a pricing layer (the test cluster: an FP8 peak, no tables): the 16-bit η at the FP8 peak.
        let eta = notes(&a100(8), "fsdp=8,mb=1,fp8");
        assert!(eta.iter().any(|n| n.starts_with("fp8: linear layers at the FP8 peak") && n.contains("16-bit GEMM η")), "{eta:?}");
    }

    /// The chunks a plan of `pp` stages, `vpp` and `m` microbatches interleaves.
    fn chunks(pp: u32, vpp: u32, m: u32) -> u32 {
        Plan { pp, vpp, microbatches: m, ..Plan::default() }.interleaved_chunks()
    }

    /// The pipeline's makespan as projections extrapolate it, no extra on any stage.
    fn makespan(pp: u32, v: u32, m: u32, stages: &[PipelineStage], hop_s: f64) -> f64 {
        pipeline_makespan_s(pp, chunks(pp, v, m), m, stages, hop_s, &[]).0
    }

    /// The same simulated for every microbatch.
    fn whole_graph(pp: u32, v: u32, m: u32, stages: &[PipelineStage], hop_s: f64) -> f64 {
        stages_end_s(&pipeline_stage_ends_ns(pp, v, m, stages, hop_s), stages, &[])
    }

    #[test]
    fn the_pipeline_schedule_graph_gives_megatrons_bubble() {
        // Uniform stages, f = 1 s, b = 2 s: 1F1B takes (m + pp − 1)(f + b), interleaved over v
        // chunks (m + (pp − 1)/v)(f + b) (Narayanan et al. 2021); the last microbatch's
        // gradient sync (here +0.5 s) is added once, by the stage that finishes last.
        let st = PipelineStage { fwd_s: 1.0, bwd_s: 2.0, last_bwd_s: 2.5 };
        let uniform = |pp: u32| vec![st; pp as usize];
        for (pp, v, m, want) in [(4, 1, 8, 33.0), (4, 2, 8, 28.5), (8, 1, 64, 213.0), (2, 1, 1, 6.0), (1, 1, 4, 12.0), (8, 4, 16, 53.25)] {
            let got = makespan(pp, v, m, &uniform(pp), 0.0);
            assert!((got - (want + 0.5)).abs() < 1e-6, "pp {pp} vpp {v} m {m}: {got} s, want {}", want + 0.5);
        }
        // Interleaving needs the microbatches to divide by the stages; otherwise plain 1F1B.
        assert!((makespan(4, 2, 6, &uniform(4), 0.0) - (9.0 * 3.0 + 0.5)).abs() < 1e-6);
        // The extrapolation past the first microbatch (round) equals the whole graph (with lags
        // between stages the whole graph is simulated).
        for (pp, v, m) in [(4, 1, 8), (4, 2, 8), (8, 1, 64), (8, 4, 16), (3, 1, 2), (4, 2, 32)] {
            let (short, full) = (makespan(pp, v, m, &uniform(pp), 0.0), whole_graph(pp, v, m, &uniform(pp), 0.0));
            assert!((short - full).abs() < 1e-6, "pp {pp} vpp {v} m {m}: {short} vs {full}");
            // The lags delay at least the first microbatch's way through the first chunk's stages
            // and back; interleaved, the other chunks' work hides the rest but for at most every
            // crossing of one microbatch's way there and back (1F1B has no such slack: each
            // microbatch's exchange between neighbours waits, which is why Megatron overlaps
            // transfers only when interleaved).
            let hop = 0.05;
            let added = makespan(pp, v, m, &uniform(pp), hop) - makespan(pp, v, m, &uniform(pp), 0.0);
            assert!(added >= 2.0 * f64::from(pp - 1) * hop - 1e-6, "pp {pp} v {v} m {m}: {added}");
            if v > 1 && m.is_multiple_of(pp) {
                assert!(added <= 2.0 * f64::from(pp * v - 1) * hop + 1e-6, "pp {pp} v {v} m {m}: {added}");
            }
        }
        // Uneven stages: lighter end stages (7/8 of the middle's work, the last one with a
        // head worth 0.6 of a layer's eighth), and one heavy middle stage.
        let light = PipelineStage { fwd_s: 0.875, bwd_s: 1.75, last_bwd_s: 2.25 };
        let headed = PipelineStage { fwd_s: 0.95, bwd_s: 1.9, last_bwd_s: 2.4 };
        let heavy = PipelineStage { fwd_s: 1.25, bwd_s: 2.5, last_bwd_s: 3.0 };
        for stages in [vec![light, st, st, headed], vec![st, heavy, st, st, st, headed], vec![light, headed]] {
            let pp = stages.len() as u32;
            for (v, m) in [(1, 1), (1, 2), (1, 8), (1, 33), (2, 2 * pp), (2, 4 * pp), (3, 3 * pp), (2, 8 * pp)] {
                let (short, full) = (makespan(pp, v, m, &stages, 0.0), whole_graph(pp, chunks(pp, v, m), m, &stages, 0.0));
                assert!((short - full).abs() <= 1e-9 * full, "pp {pp} vpp {v} m {m}: {short} vs {full}");
            }
            // Never faster than the slowest stage's own work, never slower than uniform at the slowest.
            let slowest = stages.iter().copied().max_by(|a, b| a.busy_s(1).total_cmp(&b.busy_s(1))).unwrap();
            let t = makespan(pp, 1, 16, &stages, 0.0);
            assert!(t >= slowest.busy_s(16) - 1e-9 && t <= makespan(pp, 1, 16, &vec![slowest; pp as usize], 0.0) + 1e-9, "{t}");
        }
    }

    #[test]
    fn the_extrapolated_schedule_equals_the_whole_graph_for_any_stages() {
        // Stages ±15 % apart at random, and alike stages with a heavier last one (the output
        // head), 1F1B and interleaved: the simulated-then-extrapolated makespan is the graph's.
        let mut seed = 7u64;
        let mut rnd = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as f64 / (1u64 << 31) as f64
        };
        let st = |r: f64| PipelineStage { fwd_s: r, bwd_s: 2.0 * r, last_bwd_s: 2.0 * r + 0.3 };
        for pp in [2u32, 3, 4, 8, 16] {
            let n = pp as usize;
            let mut cases: Vec<Vec<PipelineStage>> = (0..12).map(|_| (0..n).map(|_| st(0.85 + 0.3 * rnd())).collect()).collect();
            for h in [0.0, 0.05, 0.3, 1.0] {
                cases.push((0..n).map(|s| st(if s + 1 == n { 1.0 + h } else { 1.0 })).collect());
                cases.push(
                    (0..n)
                        .map(|s| {
                            st(if s == 0 {
                                0.875
                            } else if s + 1 == n {
                                0.875 + h
                            } else {
                                1.0
                            })
                        })
                        .collect(),
                );
            }
            for stages in &cases {
                for (v, m) in [(1, 1), (1, 2), (1, 5), (1, 16), (1, 64), (2, pp), (2, 3 * pp), (2, 8 * pp), (4, 4 * pp)] {
                    let full = whole_graph(pp, chunks(pp, v, m), m, stages, 0.0);
                    let short = makespan(pp, v, m, stages, 0.0);
                    assert!((short - full).abs() <= 1e-6 * full, "pp {pp} vpp {v} m {m}: {short} vs {full} ({stages:?})");
                    // The end stages' gradient time from the same simulation: the whole graph of
                    // stages whose last backward is that much longer.
                    let extra: Vec<f64> = (0..n)
                        .map(|s| {
                            if s == 0 {
                                0.4
                            } else if s + 1 == n {
                                0.2
                            } else {
                                0.0
                            }
                        })
                        .collect();
                    let ended: Vec<PipelineStage> =
                        stages.iter().zip(&extra).map(|(st, x)| PipelineStage { last_bwd_s: st.last_bwd_s + x, ..*st }).collect();
                    let full = whole_graph(pp, chunks(pp, v, m), m, &ended, 0.0);
                    let (plain, with_extra) = pipeline_makespan_s(pp, chunks(pp, v, m), m, stages, 0.0, &extra);
                    assert!((plain - short).abs() < 1e-12, "pp {pp} vpp {v} m {m}: {plain} vs {short}");
                    assert!((with_extra - full).abs() <= 1e-6 * full, "pp {pp} vpp {v} m {m}: {with_extra} vs {full} ({stages:?})");
                }
            }
        }
    }

    #[test]
    fn data_parallel_collectives_run_on_their_own_stream() {
        // Tensor parallelism inside a node, ZeRO-2 gradients reduce-scattered across nodes every
        // microbatch (slow NICs, so they queue up). On their own lane they never hold up a
        // tensor-parallel all-reduce: each starts the moment the compute before it ends.
        let m = Transformer::preset("llama2-7b").unwrap();
        let plan = Plan::parse("tp=8,dp=4,zero=2,mb=1,gbs=16").unwrap();
        let mut c = a100(32);
        c.inter.busbw_gbps /= 10.0;
        let (p, timeline) = project_timeline(&m, &c, &plan, Task::Train).unwrap();
        assert!(p.times.by_kind_ms["reduce_scatter"] > p.times.compute_ms, "the gradients outlast the compute");
        let (start, end) = (&timeline.schedule.start_ns, &timeline.schedule.end_ns);
        let mut tp_ops = 0;
        for (i, op) in timeline.ops.iter().enumerate() {
            if let Label::Layer("attn_tp" | "mlp_tp", _, _) = op.name {
                let before = (0..i).rev().find(|&j| timeline.ops[j].kind.is_compute()).unwrap();
                assert_eq!(start[i], end[before], "{} waited behind other communication", op.name);
                tp_ops += 1;
            }
        }
        assert_eq!(tp_ops, 4 * m.layers, "forward and backward, attention and MLP");
        // grad_sync=after (Megatron-LM 2021): the gradient all-reduce waits for the whole
        // backward, so all of it is exposed; behind the backward, what the backward's compute
        // can hide is not (here about half: the slow test NICs).
        let ddp = |spec: &str| project(&m, &c, &Plan::parse(spec).unwrap(), Task::Train).unwrap().times;
        let (overlap, after) = (ddp("dp=32,mb=1,gbs=64"), ddp("dp=32,mb=1,gbs=64,grad_sync=after"));
        let grads = after.by_kind_ms["all_reduce"];
        assert!((after.exposed_comm_ms - grads).abs() < 0.01 * grads, "{} vs {grads}", after.exposed_comm_ms);
        assert!(overlap.exposed_comm_ms < 0.7 * grads && after.iteration_ms > overlap.iteration_ms + 0.3 * grads, "{overlap:?}");
        assert!(Plan::parse(&Plan::parse("grad_sync=after").unwrap().describe()).unwrap().grad_sync_after);
        assert!(Plan::parse("grad_sync=later").unwrap_err().to_string().contains("overlap or after"));
    }

    #[test]
    fn layers_that_do_not_divide_make_the_end_stages_lighter() {
        // Llama 3 405B: 126 layers on 16 stages, one fewer on the first and the last (Meta's split).
        let c = stage_layer_counts(126, 16, None, None).unwrap();
        assert_eq!((c[0], c[15], c.iter().sum::<usize>()), (7, 7, 126));
        assert!(c[1..15].iter().all(|&n| n == 8), "{c:?}");
        // BLOOM: 70 layers on 12 stages: 5 on the ends, 6 in the middle.
        assert_eq!(stage_layer_counts(70, 12, None, None).unwrap(), [5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5]);
        assert_eq!(stage_layer_counts(32, 4, None, None).unwrap(), [8, 8, 8, 8]);
        // Given: first=N,last=N, the rest spread over the middle.
        assert_eq!(stage_layer_counts(30, 4, Some(6), Some(6)).unwrap(), [6, 9, 9, 6]);
        assert_eq!(stage_layer_counts(31, 4, Some(6), None).unwrap(), [6, 9, 8, 8]);
        for (l, pp, f, la, why) in [
            (10, 1, Some(2), None, "pp ≥ 2"),
            (10, 2, Some(4), Some(4), "pp=2"),
            (10, 3, Some(6), Some(6), "more than"),
            (4, 4, Some(1), Some(3), "hold none"),
        ] {
            assert!(stage_layer_counts(l, pp, f, la).unwrap_err().to_string().contains(why), "{l} {pp}");
        }
        let p = Plan::parse("pp=4,first=6,last=6").unwrap();
        assert_eq!((p.first_stage_layers, p.last_stage_layers), (Some(6), Some(6)));
        assert_eq!(Plan::parse(&p.describe()).unwrap(), p);
        // The step: 126 layers on 16 stages cost what 128 layers on 16 even stages cost (the
        // 8-layer stages bound it), not more, and the projection names the split.
        let mut m = Transformer::preset("llama2-7b").unwrap();
        m.layers = 126;
        let mut even = m.clone();
        even.layers = 128;
        let c = a100(16);
        let plan = Plan::parse("pp=16,mb=1,gbs=64").unwrap();
        let (uneven_p, even_p) = (project(&m, &c, &plan, Task::Train).unwrap(), project(&even, &c, &plan, Task::Train).unwrap());
        // 128 even layers put 8 and the head (about 0.65 of a layer here) on the last stage.
        let (a, b) = (uneven_p.times.iteration_ms, even_p.times.iteration_ms);
        assert!(a < b && a > 0.9 * b, "{a} vs {b}");
        assert!(uneven_p.notes.iter().any(|n| n.contains("layers per stage 7, 8,")), "{:?}", uneven_p.notes);
        // Heavier end stages (first=last=14, 7 on each of the 14 middle ones) make it slower.
        let heavy = project(&m, &c, &Plan::parse("pp=16,mb=1,gbs=64,first=14,last=14").unwrap(), Task::Train).unwrap();
        assert!(heavy.times.iteration_ms > 1.4 * a, "{} vs {a}", heavy.times.iteration_ms);
        // Interleaved over 8 chunks a stage: 126 layers and the embedding and the loss fill the
        // 128 chunks (Megatron-Bridge's Llama 3.1 405B recipe); 9 chunks a stage are too many.
        let interleaved = |vpp: u32| project(&m, &c, &Plan::parse(&format!("pp=16,vpp={vpp},mb=1,gbs=64")).unwrap(), Task::Train);
        assert!(interleaved(8).is_ok());
        let e = interleaved(9).unwrap_err().to_string();
        assert!(e.contains("vpp=9: pipeline stage 0 holds 7 layers and the embedding for 9 model chunks"), "{e}");
        // Where `first=` sets the first stage, that stage's chunks are all layers (128 layers): 8 of
        // them for 8 chunks pass, 7 do not.
        let first = |n: u32| project(&even, &c, &Plan::parse(&format!("pp=16,vpp=8,first={n},mb=1,gbs=64")).unwrap(), Task::Train);
        assert!(first(8).is_ok());
        assert!(first(7).unwrap_err().to_string().contains("stage 0 holds 7 layers for 8 model chunks"));
    }

    #[test]
    fn exposed_communication_is_communication_with_no_compute_under_it() {
        // The definition of traces and replays (∪comm − ∪comm ∩ ∪compute): with free compute all
        // communication is exposed; with free links none is; otherwise between 0 and all of it.
        let m = Transformer::preset("llama2-7b").unwrap();
        let plan = Plan::parse("dp=8,mb=1,gbs=16").unwrap();
        let run = |c: &Cluster| project(&m, c, &plan, Task::Train).unwrap().times;
        let mut free_compute = a100(8);
        free_compute.peak_flops = 1e24;
        free_compute.hbm_bw = 1e24;
        free_compute.gemm_overhead_s = 0.0;
        let t = run(&free_compute);
        assert!(t.comm_ms > 0.0 && (t.exposed_comm_ms / t.comm_ms - 1.0).abs() < 0.01, "{} of {}", t.exposed_comm_ms, t.comm_ms);
        let mut free_links = a100(8);
        free_links.intra = Link::from_si(0.0, 1e18);
        free_links.inter = Link::from_si(0.0, 1e18);
        assert!(run(&free_links).exposed_comm_ms < 1e-3);
        let t = run(&a100(8));
        assert!(t.exposed_comm_ms > 0.0 && t.exposed_comm_ms < t.comm_ms, "{} of {}", t.exposed_comm_ms, t.comm_ms);
        assert!((t.overlapped_comm_ms - (t.comm_ms - t.exposed_comm_ms)).abs() < 1e-9);
    }

    #[test]
    fn more_microbatches_shrink_the_bubble_share() {
        let m = Transformer::preset("llama2-7b").unwrap();
        let c = a100(32);
        let share = |mb: u32| {
            let plan = Plan { tp: 8, pp: 4, dp: 1, microbatches: mb, ..Plan::default() };
            let p = project(&m, &c, &plan, Task::Train).unwrap();
            p.times.bubble_ms / p.times.iteration_ms
        };
        assert!(share(32) < share(4) / 4.0, "{} {}", share(32), share(4));
    }

    #[test]
    fn interleaved_stages_divide_the_bubble_and_uneven_stages_run() {
        let m = Transformer::preset("llama2-7b").unwrap();
        let c = a100(32);
        let bubble = |vpp: u32| {
            let plan = Plan { tp: 8, pp: 4, dp: 1, microbatches: 8, vpp, ..Plan::default() };
            project(&m, &c, &plan, Task::Train).unwrap().times.bubble_ms
        };
        // (pp − 1)/vpp slots: the slot itself grows a little (more stage crossings per microbatch).
        let (one, two) = (bubble(1), bubble(2));
        assert!(two < 0.55 * one && two > 0.45 * one, "{one} {two}");
        // 32 layers on pp=3 stages: 11, 11 and 10 on the last, which holds the output head.
        let plan = Plan { tp: 8, pp: 3, dp: 1, microbatches: 6, ..Plan::default() };
        let p = project(&m, &a100(24), &plan, Task::Train).unwrap();
        assert!(p.notes.iter().any(|n| n.contains("layers per stage 11, 11, 10")), "{:?}", p.notes);
    }

    #[test]
    fn plan_keys_for_recomputation_and_virtual_stages() {
        let p = Plan::parse("tp=8,pp=4,dp=2,vpp=3,mb=2,gbs=64,recompute=selective").unwrap();
        assert_eq!((p.vpp, p.selective, p.recompute, p.microbatches), (3, true, false, 16));
        assert!(Plan::parse("recompute=full").unwrap().recompute);
        assert!(Plan::parse("recompute").unwrap().recompute);
        assert!(!Plan::parse("recompute=none").unwrap().recompute);
        assert!(Plan::parse("recompute=some").unwrap_err().to_string().contains("full, selective, op or none"));
        let cp = Plan::parse("tp=2,cp=2,fp8").unwrap();
        assert_eq!((cp.cp, cp.fp8, cp.gpus()), (2, true, 4));
        assert_eq!(Plan::parse(&cp.describe()).unwrap(), cp);
        assert_eq!(Plan::parse(&p.describe()).unwrap().vpp, 3);
    }

    #[test]
    fn the_loss_moves_what_pytorch_moves_on_our_h200() {
        // fixtures/h200/memory-ops.csv: `cross_entropy(logits.float(), labels)`, forward and
        // backward, on bf16 logits of 8192 or 16384 rows × 32 000 to 256 000 words, timed on one H200.
        let csv = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/h200/memory-ops.csv")).unwrap();
        let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        // Only `notes`, the last column, is free text (quoted, with commas): split into the header's
        // columns so that its commas stay in it.
        assert_eq!(col("notes"), header.len() - 1);
        let c = Cluster::from_catalog(&Catalog::builtin(), "h200", 1, Dtype::Bf16, None).unwrap();
        let mut checked = 0;
        for line in csv.lines().skip(1) {
            let f: Vec<&str> = line.splitn(header.len(), ',').collect();
            if f[col("op")] != "cross_entropy" || f[col("variant")] != "fp32-cast" || f[col("direction")] != "forward+backward" {
                continue;
            }
            let (logits, measured_us): (f64, f64) = (f[col("elements")].parse().unwrap(), f[col("time_us")].parse().unwrap());
            let priced_us = c.memory(loss_bytes_per_logit(2.0, Task::Train) * logits) * 1e6;
            assert!((priced_us / measured_us - 1.0).abs() < 0.15, "{line}: priced {priced_us:.0} µs");
            checked += 1;
        }
        assert_eq!(checked, 8);
    }

    #[test]
    fn materialized_attention_prices_its_batched_gemms_at_their_shapes() {
        // Megatron-LM 2021's GPT-1.7B (24 heads of 96, sequence 2048, micro-batch 16): QKᵀ is
        // 384 GEMMs of 2048 × 96 × 2048, whose reduction of 96 leaves tensor cores idle; `hw cost`
        // prices that shape, and the projection must price it the same, not at the GEMM η.
        let c = Cluster::from_catalog(&Catalog::builtin(), "a100-80gb", 32, Dtype::Bf16, None).unwrap();
        let shape = tracecast_calibrate::pricing::GemmShape { batch: 384.0, m: 2048.0, n: 2048.0, k: 96.0, dtype: Dtype::Bf16 };
        let pricing = tracecast_calibrate::pricing::Pricing::builtin();
        let a100 = pricing.catalog.gpu("a100-80gb").unwrap().clone();
        let quoted = pricing.gemm(&a100, &shape).unwrap().time_us * 1e-6;
        let projected = c.batched_gemm(384.0, 2048.0, 96.0, 2048.0, false);
        assert!((projected / quoted - 1.0).abs() < 1e-9, "{projected} s against hw cost's {quoted} s");
        assert!(projected > c.gemm(shape.flops()), "{projected} s, no slower than the GEMM η's {} s", c.gemm(shape.flops()));
    }

    #[test]
    fn the_output_head_and_the_optimizer_step_are_priced() {
        // A 128k vocabulary makes the head a visible part of an 8B model's step.
        let mut m = Transformer::preset("llama2-7b").unwrap();
        let c = a100(8);
        let plan = Plan { tp: 8, pp: 1, dp: 1, microbatches: 1, ..Plan::default() };
        let small = project(&m, &c, &plan, Task::Train).unwrap().times.iteration_ms;
        m.vocab *= 4.0;
        let big = project(&m, &c, &plan, Task::Train).unwrap().times.iteration_ms;
        // 3 × 2·tokens·d·ΔV FLOPs over 8 GPUs at 0.7 of the peak, at least.
        let tokens = m.seq;
        let head_s = 3.0 * 2.0 * tokens * m.hidden * (m.vocab * 0.75) / 8.0 / (0.7 * 312e12);
        assert!(big - small >= head_s * 1e3 * 0.99, "{small} -> {big} ms, head alone {} ms", head_s * 1e3);
    }
}
