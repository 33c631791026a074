//! Work accounting: which op launched each kernel, what class it is, and how
//! many FLOPs or bytes that op does, from its type and `Input Dims`.
//!
//! Each op instance becomes one sample: its work against the summed duration
//! of the kernels it launched (each kernel belongs to the innermost op around
//! its launch, so no kernel is counted twice). GEMM-like ops count FLOPs
//! (mm/addmm 2MKN, bmm/baddbmm 2BMKN, linear, convolution forward and backward
//! with each op's own argument order (`conv`), attention 4·B·H·Sq·Sk·D
//! forward and 2.5× that backward); memory-bound ops count the bytes of their
//! inputs and output.

use serde::Serialize;
use tracecast_ingest::analysis::facts::{self, Fact};
use tracecast_ingest::analysis::{ActivityClass, Classifier, RankContext};
use tracecast_ingest::job::RankSource;
use tracecast_ingest::link::NONE;
use tracecast_ingest::{OpShapes, RankTrace};

use crate::catalog::Dtype;

mod conv;

/// A kernel class (DESIGN §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelClass {
    /// Matrix multiplies.
    Gemm,
    /// Attention (SDPA, flash, memory-efficient).
    Attention,
    /// Convolutions.
    Conv,
    /// Elementwise and other memory-bound ops.
    Elementwise,
    /// Reductions and normalisations.
    Reduction,
    /// Embedding lookups.
    Embedding,
    /// Anything else.
    Other,
}

impl KernelClass {
    /// Name as in the profile.
    pub fn as_str(self) -> &'static str {
        match self {
            KernelClass::Gemm => "gemm",
            KernelClass::Attention => "attention",
            KernelClass::Conv => "conv",
            KernelClass::Elementwise => "elementwise",
            KernelClass::Reduction => "reduction",
            KernelClass::Embedding => "embedding",
            KernelClass::Other => "other",
        }
    }

    /// Whether work is counted in FLOPs (else bytes).
    pub fn counts_flops(self) -> bool {
        matches!(self, KernelClass::Gemm | KernelClass::Attention | KernelClass::Conv)
    }

    /// The class an operator's name gives, for an operator without a work
    /// model: only a namespaced name (`fbgemm::…`, `aten::…`) that says one of
    /// the classes of [`KernelClass::from_kernel_name`]. Callers pass CPU ops
    /// only: a `record_function` label (`FSDP::post_backward_reduce`) names a
    /// module or phase, not the work of the kernels under it.
    pub fn from_op_name(name: &str) -> Option<KernelClass> {
        let (namespace, _) = name.split_once("::")?;
        if namespace.is_empty() || !namespace.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return None;
        }
        Some(KernelClass::from_kernel_name(name)).filter(|c| *c != KernelClass::Other)
    }

    /// The class a kernel name suggests, when no op says. Attention is
    /// tested first, then convolution (both run GEMMs inside and often say
    /// so: `implicit_convolve_sgemm`, `xmma_fprop_implicit_gemm`, CK's
    /// `grouped_conv_fwd_…GridwiseGemm`), then GEMM: besides the generic
    /// words, AMD's Tensile and hipBLASLt kernels (`Cijk_Alik_Bljk_…`, named
    /// after their index order) and NVIDIA cuBLAS's `nvjet_…` kernels.
    /// Convolution words are specific enough that `_typeConvert` is none.
    pub fn from_kernel_name(name: &str) -> KernelClass {
        // FBGEMM (Meta's embedding and quantization library) names every kernel after itself:
        // its "gemm" says nothing about the work (`fbgemm_gpu::split_embedding_codegen_…`).
        let n = name.to_ascii_lowercase().replace("fbgemm", "");
        let has = |s: &[&str]| s.iter().any(|x| n.contains(x));
        if has(&["flash", "fmha", "attention", "attn"]) {
            KernelClass::Attention
        } else if has(&[
            "convol",
            "conv_fwd",
            "conv_bwd",
            "conv1d",
            "conv2d",
            "conv3d",
            "dconv",
            "winograd",
            "implicit_gemm",
            "fprop",
            "dgrad",
            "wgrad",
            "im2col",
        ]) {
            KernelClass::Conv
        } else if has(&["gemm", "cutlass", "xmma", "matmul", "cublas", "wgmma", "_mm_", "cijk_a", "nvjet_"]) {
            KernelClass::Gemm
        } else if has(&["embedding"]) {
            KernelClass::Embedding
        } else if has(&["reduce", "norm", "softmax", "sum_", "mean"]) {
            KernelClass::Reduction
        } else if has(&["elementwise", "vectorized", "copy", "fill", "unrolled"]) {
            KernelClass::Elementwise
        } else {
            KernelClass::Other
        }
    }
}

/// One op instance and the kernels it launched.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkSample {
    /// The class.
    pub class: KernelClass,
    /// Dtype of the op's first tensor input, when known.
    pub dtype: Option<Dtype>,
    /// FLOPs (GEMM-like classes) or bytes (the others); `None` without shapes.
    pub work: Option<f64>,
    /// Bytes the op reads and writes, when its shapes give them (for FLOP
    /// classes, where the op sits against the roofline's ridge).
    pub bytes: Option<f64>,
    /// Σ duration of the op's kernels, µs.
    pub dur_us: f64,
    /// Kernels summed.
    pub kernels: u32,
    /// The op's shape, where the pricing layer's tables are indexed by it
    /// (shared by a rank's samples of one shape: a job has millions of samples).
    #[serde(skip)]
    pub shape: Option<std::sync::Arc<OpShape>>,
}

fn numel(d: &[i64]) -> Option<f64> {
    if d.is_empty() {
        return None;
    }
    d.iter().try_fold(1f64, |acc, &x| (x >= 0).then_some(acc * x as f64))
}

fn elem_size(t: &str) -> Option<f64> {
    tracecast_ingest::collective::dtype_size(t).map(|b| b as f64)
}

/// Σ bytes of the inputs with known shape and dtype.
fn input_bytes(dims: &[Vec<i64>], types: &[std::borrow::Cow<'_, str>]) -> Option<f64> {
    let mut total = 0.0;
    let mut any = false;
    for (d, t) in dims.iter().zip(types) {
        if let (Some(n), Some(s)) = (numel(d), elem_size(t)) {
            total += n * s;
            any = true;
        }
    }
    any.then_some(total)
}

/// Parses `"[2, 2]"` or `"2"` from `Concrete Inputs`.
fn ints(s: &str) -> Vec<i64> {
    s.trim_matches(|c| c == '[' || c == ']').split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

/// What an op does: its class, FLOPs and bytes (each when its shapes give
/// it), dtype. All arithmetic is in f64, so trace-supplied dims never overflow.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpWork {
    /// The class.
    pub class: KernelClass,
    /// Floating-point operations (GEMM-like classes).
    pub flops: Option<f64>,
    /// Bytes read and written at least once (every class where shapes give them).
    pub bytes: Option<f64>,
    /// Dtype of the first typed input.
    pub dtype: Option<Dtype>,
    /// The op's shape where the pricing layer's measured tables are indexed by it.
    pub shape: Option<OpShape>,
}

/// The shape of a GEMM or attention op, as the measured tables index them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OpShape {
    /// `batch` GEMMs of [m, k] × [k, n].
    Gemm {
        /// Independent GEMMs (bmm's batch; 1 for mm).
        batch: f64,
        /// Rows of the output.
        m: f64,
        /// Columns of the output.
        n: f64,
        /// The reduction dimension.
        k: f64,
    },
    /// Scaled-dot-product attention.
    Attention {
        /// Batch.
        batch: f64,
        /// Query heads.
        heads: f64,
        /// Query sequence length.
        seq_q: f64,
        /// Key sequence length.
        seq_k: f64,
        /// Head dimension.
        head_dim: f64,
        /// Causal mask.
        causal: bool,
        /// The backward pass.
        backward: bool,
    },
}

impl OpShape {
    /// Its numbers as bits: equal shapes, equal keys.
    fn key(&self) -> [u64; 6] {
        match *self {
            OpShape::Gemm { batch, m, n, k } => [0, batch.to_bits(), m.to_bits(), n.to_bits(), k.to_bits(), 0],
            OpShape::Attention { batch, heads, seq_q, seq_k, head_dim, causal, backward } => [
                1 | u64::from(causal) << 1 | u64::from(backward) << 2,
                batch.to_bits(),
                heads.to_bits(),
                seq_q.to_bits(),
                seq_k.to_bits(),
                head_dim.to_bits(),
            ],
        }
    }
}

impl OpWork {
    /// The work a class is fitted on: FLOPs for GEMM-like classes, bytes otherwise.
    pub fn work(&self) -> Option<f64> {
        if self.class.counts_flops() { self.flops } else { self.bytes }
    }
}

/// Product of dims in f64 (`None` for an empty or negative shape).
fn prod(d: &[i64]) -> Option<f64> {
    numel(d)
}

/// Position of `is_causal` (or Dao's `causal`) among an attention op's
/// arguments, from the ATen and flash-attn signatures.
fn causal_arg(base: &str) -> Option<usize> {
    Some(match base {
        "scaled_dot_product_attention" => 5,
        "_scaled_dot_product_flash_attention" | "_scaled_dot_product_flash_attention_for_cpu" => 4,
        "_scaled_dot_product_efficient_attention" | "_scaled_dot_product_cudnn_attention" => 6,
        "_cudnn_attention_forward" => 10,
        "_scaled_dot_product_cudnn_attention_backward" | "_cudnn_attention_backward" => 14,
        "_flash_attention_forward" => 8,
        "_scaled_dot_product_flash_attention_backward" | "_scaled_dot_product_efficient_attention_backward" => 11,
        "_flash_attention_backward" => 11,
        _ if base.ends_with("_flash_attn_forward") => 5,
        _ if base.ends_with("_flash_attn_backward") => 11,
        _ => return None,
    })
}

/// Class and work of an op from its name and shapes; `None` when the op is not one we model.
pub fn op_work(name: &str, shapes: Option<&OpShapes>) -> Option<OpWork> {
    op_work_with(name, shapes, None)
}

/// [`op_work`], with the gradients a convolution backward computed when
/// the trace shows them otherwise than by its `output_mask`.
fn op_work_with(name: &str, shapes: Option<&OpShapes>, grads: Option<conv::Grads>) -> Option<OpWork> {
    let base = name.strip_prefix("aten::").unwrap_or(name);
    let dims = shapes.map(OpShapes::dims).unwrap_or_default();
    let types = shapes.map(OpShapes::type_names).unwrap_or_default();
    let dtype = types.iter().find_map(|t| Dtype::from_profiler(t));
    let elem = types.iter().find_map(|t| elem_size(t)).unwrap_or(2.0);
    let dim = |i: usize| dims.get(i).map(Vec::as_slice).unwrap_or_default();
    let f = |x: &i64| *x as f64;
    // FLOPs and bytes of b GEMMs [m,k]×[k,n]: both operands and the output once.
    let gemm = |m: f64, k: f64, n: f64, b: f64| (Some(2.0 * b * m * k * n), Some(b * (m * k + k * n + m * n) * elem));
    let conv = conv::ConvOp::of(base).map(|op| conv::work(op, &dims, &shapes.map(OpShapes::concrete).unwrap_or_default(), elem, grads));
    let mut shape = None;
    let mut gemm_shape = |m: f64, k: f64, n: f64, b: f64| {
        shape = Some(OpShape::Gemm { batch: b, m, n, k });
        gemm(m, k, n, b)
    };
    let (class, flops, bytes) = match base {
        "mm" | "matmul" => match (dim(0), dim(1)) {
            ([m, k], [_, n]) => {
                let (fl, by) = gemm_shape(f(m), f(k), f(n), 1.0);
                (KernelClass::Gemm, fl, by)
            }
            _ => (KernelClass::Gemm, None, None),
        },
        "addmm" => match (dim(1), dim(2)) {
            ([m, k], [_, n]) => {
                let (fl, by) = gemm_shape(f(m), f(k), f(n), 1.0);
                (KernelClass::Gemm, fl, by)
            }
            _ => (KernelClass::Gemm, None, None),
        },
        "bmm" => match (dim(0), dim(1)) {
            ([b, m, k], [_, _, n]) => {
                let (fl, by) = gemm_shape(f(m), f(k), f(n), f(b));
                (KernelClass::Gemm, fl, by)
            }
            _ => (KernelClass::Gemm, None, None),
        },
        "baddbmm" => match (dim(1), dim(2)) {
            ([b, m, k], [_, _, n]) => {
                let (fl, by) = gemm_shape(f(m), f(k), f(n), f(b));
                (KernelClass::Gemm, fl, by)
            }
            _ => (KernelClass::Gemm, None, None),
        },
        "linear" => {
            let (x, w) = (dim(0), dim(1));
            match (x.split_last(), w) {
                (Some((k, rows)), [n, _]) => {
                    let m: f64 = rows.iter().map(f).product();
                    let (fl, by) = gemm_shape(m, f(k), f(n), 1.0);
                    (KernelClass::Gemm, fl, by)
                }
                _ => (KernelClass::Gemm, None, None),
            }
        }
        _ if conv.is_some() => {
            let (flops, bytes) = conv.unwrap_or_default();
            (KernelClass::Conv, flops, bytes)
        }
        _ if base.contains("attention") || base.contains("flash_attn") => {
            let backward = base.contains("backward");
            // Forward: (q, k, …); backward: (grad_out, q, k, …). ATen's SDPA
            // ops are [B, H, S, D]; `_flash_attention_*` and flash-attn's are [B, S, H, D].
            let (q, k) = if backward { (dim(1), dim(2)) } else { (dim(0), dim(1)) };
            let bshd = base.starts_with("_flash_attention") || base.contains("flash_attn");
            let causal = causal_arg(base)
                .and_then(|i| shapes.map(OpShapes::concrete).and_then(|c| c.get(i).cloned()))
                .is_some_and(|v| v.eq_ignore_ascii_case("true"));
            let work = match (q, k) {
                ([b, x1, x2, d], [_, y1, y2, _]) => {
                    let (h, sq, sk) = if bshd { (f(x2), f(x1), f(y1)) } else { (f(x1), f(x2), f(y2)) };
                    let _ = y1;
                    let fwd = 4.0 * f(b) * h * sq * sk * f(d) * if causal { 0.5 } else { 1.0 };
                    shape = Some(OpShape::Attention { batch: f(b), heads: h, seq_q: sq, seq_k: sk, head_dim: f(d), causal, backward });
                    // q, k, v and the output, read or written once (the S×S scores stay on chip).
                    let bytes = (2.0 * prod(q).unwrap_or(0.0) + 2.0 * prod(k).unwrap_or(0.0)) * elem * if backward { 2.0 } else { 1.0 };
                    Some((fwd * if backward { 2.5 } else { 1.0 }, bytes))
                }
                _ => None,
            };
            (KernelClass::Attention, work.map(|w| w.0), work.map(|w| w.1))
        }
        "embedding" | "embedding_bag" | "_embedding_bag" | "embedding_dense_backward" => {
            let (w, idx) = (dim(0), dim(1));
            let bytes = match (w, numel(idx)) {
                ([_, d], Some(n)) => Some(n * f(d) * types.first().and_then(|t| elem_size(t)).unwrap_or(4.0) + n * 8.0),
                _ => None,
            };
            (KernelClass::Embedding, None, bytes)
        }
        "layer_norm"
        | "native_layer_norm"
        | "batch_norm"
        | "native_batch_norm"
        | "cudnn_batch_norm"
        | "rms_norm"
        | "_fused_rms_norm"
        | "group_norm"
        | "native_group_norm"
        | "softmax"
        | "_softmax"
        | "log_softmax"
        | "_log_softmax"
        | "native_layer_norm_backward"
        | "_softmax_backward_data" => {
            // Output has the shape of the first input.
            let first = numel(dim(0)).zip(types.first().and_then(|t| elem_size(t))).map(|(n, s)| n * s);
            (KernelClass::Reduction, None, input_bytes(&dims, &types).zip(first).map(|(a, b)| a + b))
        }
        "sum" | "mean" | "max" | "min" | "amax" | "argmax" | "norm" | "linalg_vector_norm" | "var_mean" | "std" => {
            (KernelClass::Reduction, None, input_bytes(&dims, &types))
        }
        // Writes only.
        "fill_" | "zero_" => {
            (KernelClass::Elementwise, None, numel(dim(0)).zip(types.first().and_then(|t| elem_size(t))).map(|(n, s)| n * s))
        }
        // Reads the source, writes the destination: both are inputs.
        "copy_" => (KernelClass::Elementwise, None, input_bytes(&dims, &types)),
        "add" | "add_" | "mul" | "mul_" | "sub" | "sub_" | "div" | "div_" | "relu" | "relu_" | "gelu" | "silu" | "silu_" | "sigmoid"
        | "tanh" | "where" | "clamp" | "clamp_" | "native_dropout" | "dropout" | "cat" | "_to_copy" | "pow" | "rsqrt" | "exp" | "neg"
        | "addcmul_" | "addcdiv_" | "lerp_" | "sqrt" | "masked_fill" | "masked_fill_" | "gelu_backward" | "threshold_backward"
        | "silu_backward" | "contiguous" | "clone" => {
            // Inputs read plus an output the size of the largest input.
            let largest = dims
                .iter()
                .zip(&types)
                .filter_map(|(d, t)| Some(numel(d)? * elem_size(t)?))
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
            (KernelClass::Elementwise, None, input_bytes(&dims, &types).zip(largest).map(|(a, b)| a + b))
        }
        _ if base.starts_with("_foreach_") => {
            // Tensor lists: shapes are not recorded per tensor.
            (KernelClass::Elementwise, None, None)
        }
        _ => return None,
    };
    let ok = |w: Option<f64>| w.filter(|w| *w > 0.0 && w.is_finite());
    Some(OpWork { class, flops: ok(flops), bytes: ok(bytes), dtype, shape })
}

/// What one compute kernel belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelWork {
    /// The class.
    pub class: KernelClass,
    /// The op's dtype, when known.
    pub dtype: Option<Dtype>,
    /// The work of the op that launched it (FLOPs or bytes), when modelled.
    pub op_work: Option<f64>,
    /// The op's FLOPs and bytes, when its shapes give them (the roofline of the cost model).
    pub op: Option<OpWork>,
    /// The op's row, when a modelled op launched it.
    pub op_row: Option<u32>,
    /// This kernel's share of its op's kernel time (1 without an op).
    pub share: f64,
}

/// For every row: what the compute kernel there belongs to (`None` for other
/// rows). For a trace read on its own; a command that builds other products
/// of the rank too takes [`kernel_work_of`] its [`RankContext`].
pub fn kernel_work(trace: &RankTrace, classifier: &Classifier) -> Vec<Option<KernelWork>> {
    kernel_work_of(&RankContext::of_trace(trace, 0, RankSource::FileOrder, classifier))
}

/// [`kernel_work`] of a rank's context (its classes and launch links).
pub fn kernel_work_of(ctx: &RankContext<'_>) -> Vec<Option<KernelWork>> {
    facts::count(Fact::KernelWork);
    let (trace, classes, links) = (ctx.trace(), ctx.classes(), ctx.links());
    let ev = &trace.events;
    let mut out: Vec<Option<KernelWork>> = vec![None; ev.len()];
    let mut op_time: std::collections::BTreeMap<u32, i64> = std::collections::BTreeMap::new();
    // Old convolution backwards (PyTorch ≤ 1.10) launch their kernels in one
    // child op per gradient: which children did says which gradients were computed.
    let mut conv_grads: std::collections::BTreeMap<u32, conv::Grads> = std::collections::BTreeMap::new();
    // The work of an op is a function of its name and shapes, which are parsed
    // text: worked out once per distinct (name, shapes) — a model's layers and
    // steps repeat a few dozen of them — not per kernel and caller.
    type OpText<'t> = (tracecast_ingest::NameId, Option<(&'t str, &'t str, &'t str)>);
    let mut work_of_op: rustc_hash::FxHashMap<OpText<'_>, Option<OpWork>> = rustc_hash::FxHashMap::default();
    // The class a kernel's name says, once per name.
    let mut class_of_name: rustc_hash::FxHashMap<tracecast_ingest::NameId, KernelClass> = rustc_hash::FxHashMap::default();
    let mut class_of_op_name: rustc_hash::FxHashMap<tracecast_ingest::NameId, Option<KernelClass>> = rustc_hash::FxHashMap::default();
    for (i, class) in classes.iter().enumerate() {
        if *class != Some(ActivityClass::Compute) {
            continue;
        }
        let op = links.launch_op.get(i).copied().unwrap_or(NONE);
        // Innermost op with a model wins; walk out at most a few levels (e.g. from a
        // record_function wrapper inside aten::linear).
        let modelled = links.ancestors(op, 3).find_map(|r| {
            let shapes = trace.op_shapes_of(r);
            let text = (
                ev.name.get(r).copied().unwrap_or_default(),
                shapes.map(|s| (s.input_dims.as_str(), s.input_types.as_str(), s.concrete_inputs.as_str())),
            );
            let w = *work_of_op.entry(text).or_insert_with(|| op_work(trace.name(r), shapes));
            w.map(|w| (r as u32, w))
        });
        out[i] = Some(match modelled {
            Some((row, w)) => {
                *op_time.entry(row).or_insert(0) += ev.dur_ns.get(i).copied().unwrap_or(0);
                if w.class == KernelClass::Conv && op != row {
                    for r in links.ancestors(op, 3).take_while(|&r| r != row as usize) {
                        let name = trace.name(r);
                        let g = conv_grads.entry(row).or_insert(conv::Grads { input: false, weight: false });
                        g.input |= name.ends_with("convolution_backward_input");
                        g.weight |= name.ends_with("convolution_backward_weight");
                    }
                }
                KernelWork { class: w.class, dtype: w.dtype, op_work: w.work(), op: Some(w), op_row: Some(row), share: 1.0 }
            }
            None => {
                // The op type first (DESIGN §4): a CPU op without a work model that names its
                // class (`fbgemm::split_embedding_codegen_lookup_…` launching
                // `fbgemm_gpu::…` kernels) classes its kernels, else the kernel's name does.
                let op = op as usize;
                let op_says = (ev.kind.get(op) == Some(&tracecast_ingest::EventKind::CpuOp))
                    .then(|| ev.name.get(op).copied().unwrap_or_default())
                    .and_then(|name| *class_of_op_name.entry(name).or_insert_with(|| KernelClass::from_op_name(trace.name(op))));
                let class = op_says.unwrap_or_else(|| {
                    *class_of_name
                        .entry(ev.name.get(i).copied().unwrap_or_default())
                        .or_insert_with(|| KernelClass::from_kernel_name(trace.name(i)))
                });
                KernelWork { class, dtype: None, op_work: None, op: None, op_row: None, share: 1.0 }
            }
        });
    }
    let regraded: std::collections::BTreeMap<u32, OpWork> = conv_grads
        .into_iter()
        .filter(|(_, g)| g.input || g.weight)
        .filter_map(|(row, g)| Some((row, op_work_with(trace.name(row as usize), trace.op_shapes_of(row as usize), Some(g))?)))
        .collect();
    for (i, k) in out.iter_mut().enumerate() {
        let Some(k) = k else { continue };
        if let Some(w) = k.op_row.and_then(|r| regraded.get(&r)) {
            k.op_work = w.work();
            k.op = Some(*w);
        }
        if let Some(total) = k.op_row.and_then(|r| op_time.get(&r)).filter(|t| **t > 0) {
            k.share = ev.dur_ns.get(i).copied().unwrap_or(0) as f64 / *total as f64;
        }
    }
    out
}

/// The work samples of one rank: one per op instance that launched compute kernels.
pub fn samples(trace: &RankTrace, classifier: &Classifier) -> Vec<WorkSample> {
    samples_of(trace, &kernel_work(trace, classifier))
}

/// [`samples`] from the rank's [`kernel_work`].
pub fn samples_of(trace: &RankTrace, kernel_work: &[Option<KernelWork>]) -> Vec<WorkSample> {
    let ev = &trace.events;
    let mut by_op: std::collections::BTreeMap<u32, WorkSample> = std::collections::BTreeMap::new();
    let mut shapes: rustc_hash::FxHashMap<[u64; 6], std::sync::Arc<OpShape>> = rustc_hash::FxHashMap::default();
    let mut shape = |s: Option<OpShape>| s.map(|s| shapes.entry(s.key()).or_insert_with(|| std::sync::Arc::new(s)).clone());
    let mut unattributed: Vec<WorkSample> = Vec::new();
    for (i, k) in kernel_work.iter().enumerate() {
        let Some(k) = k else { continue };
        let dur_us = ev.dur_ns.get(i).copied().unwrap_or(0) as f64 / 1000.0;
        match k.op_row {
            Some(row) => {
                let s = by_op.entry(row).or_insert_with(|| WorkSample {
                    class: k.class,
                    dtype: k.dtype,
                    work: k.op_work,
                    bytes: k.op.and_then(|o| o.bytes),
                    dur_us: 0.0,
                    kernels: 0,
                    shape: shape(k.op.and_then(|o| o.shape)),
                });
                s.dur_us += dur_us;
                s.kernels += 1;
            }
            None => unattributed.push(WorkSample { class: k.class, dtype: None, work: None, bytes: None, dur_us, kernels: 1, shape: None }),
        }
    }
    let mut out: Vec<WorkSample> = by_op.into_values().collect();
    out.extend(unattributed);
    // A job holds every rank's samples until it is calibrated: no spare capacity.
    out.shrink_to_fit();
    out
}

/// One row of the per-op table: an op with its shapes and dtype, over all ranks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpRow {
    /// CPU op name (`aten::mm`).
    pub op: String,
    /// Its `Input Dims`.
    pub shapes: String,
    /// Dtype of its first typed input.
    pub dtype: Option<String>,
    /// Op instances (calls) that launched kernels.
    pub calls: u64,
    /// Kernels they launched.
    pub kernels: u64,
    /// Kernel time, µs.
    pub time_us: f64,
    /// FLOPs per call, when the shapes give them.
    pub flops: Option<f64>,
    /// Bytes per call, when the shapes give them.
    pub bytes: Option<f64>,
    /// Whether the op is priced in FLOPs (GEMM, attention, conv) rather than bytes.
    pub counts_flops: bool,
}

impl OpRow {
    /// Achieved rate: TFLOP/s for FLOP-priced ops, GB/s for the others.
    pub fn achieved(&self) -> Option<f64> {
        let w = if self.counts_flops { self.flops? / 1e12 } else { self.bytes? / 1e9 };
        (self.time_us > 0.0).then(|| w * self.calls as f64 / (self.time_us / 1e6))
    }

    /// The achieved rate as a fraction of the `device`'s peak for it, and the peak's name: its
    /// dtype's TFLOP/s, or HBM bandwidth for byte-priced ops; FP32 FLOP work of a job whose FP32
    /// work ran on TF32 tensor cores (`fp32_on_tf32`, [`fp32_ran_on_tf32`]) a fraction of the TF32 peak.
    pub fn fraction_of_peak(&self, device: &crate::profile::DeviceInfo, fp32_on_tf32: bool) -> Option<(f64, &'static str)> {
        let achieved = self.achieved()?;
        let (peak, of) = if self.counts_flops {
            let dtype = Dtype::from_name(self.dtype.as_deref()?)?;
            match device.peak_tflops.get(Dtype::Tf32.as_str()) {
                Some(&tf32) if dtype == Dtype::Fp32 && fp32_on_tf32 => (tf32, "tf32"),
                _ => (*device.peak_tflops.get(dtype.as_str())?, dtype.as_str()),
            }
        } else {
            (device.hbm_gbps?, "hbm")
        };
        (peak > 0.0).then(|| (achieved / peak, of))
    }
}

/// Whether a job's FP32 FLOP work ran on TF32 tensor cores, by the rule a calibration applies
/// ([`crate::profile::ran_on_tf32`]) to its ops' best rate against the `device`'s FP32 peak.
pub fn fp32_ran_on_tf32(rows: &[OpRow], device: &crate::profile::DeviceInfo) -> bool {
    let Some(&fp32) = device.peak_tflops.get(Dtype::Fp32.as_str()).filter(|p| **p > 0.0) else { return false };
    let best = rows
        .iter()
        .filter(|o| o.counts_flops && o.dtype.as_deref() == Some(Dtype::Fp32.as_str()))
        .filter_map(OpRow::achieved)
        .fold(0.0, f64::max);
    device.peak_tflops.contains_key(Dtype::Tf32.as_str()) && crate::profile::ran_on_tf32(Some(Dtype::Fp32), true, best / fp32)
}

/// Compute kernels by the op that launched them (its name, shapes and dtype),
/// over every rank, longest total time first.
pub fn op_rows(job: &tracecast_ingest::Job, classifier: &Classifier) -> Vec<OpRow> {
    merge_op_rows(job.ranks.iter().map(|r| op_rows_of_rank(&r.trace, &kernel_work(&r.trace, classifier), None)))
}

/// [`op_rows`] of one rank (in no particular order) from its [`kernel_work`],
/// to merge with [`merge_op_rows`]: the kernels that start inside `window`
/// when given (the analysed window; the collectives table's rule), else all.
pub fn op_rows_of_rank(trace: &RankTrace, work: &[Option<KernelWork>], window: Option<tracecast_ingest::analysis::Window>) -> Vec<OpRow> {
    type Key = (String, String, Option<String>);
    let ev = &trace.events;
    // Each op's row of the table, found once per op (not per kernel): ops of
    // one name, `Input Dims` text and dtype share it without building its
    // key; else the key (the dims without white space) decides.
    let mut row_of_op: rustc_hash::FxHashMap<u32, usize> = rustc_hash::FxHashMap::default();
    let mut row_of_text: rustc_hash::FxHashMap<(tracecast_ingest::NameId, &str, Option<Dtype>), usize> = rustc_hash::FxHashMap::default();
    let mut row_of_key: rustc_hash::FxHashMap<Key, usize> = rustc_hash::FxHashMap::default();
    let mut rows: Vec<(Key, OpRow)> = Vec::new();
    let inside = |i: usize| window.is_none_or(|w| ev.ts_ns.get(i).is_some_and(|&t| w.starts_inside(t)));
    for (i, w) in work.iter().enumerate() {
        let Some(w) = w else { continue };
        let Some(op) = w.op_row else { continue };
        if !inside(i) {
            continue;
        }
        let (k, first_call) = match row_of_op.get(&op) {
            Some(&k) => (k, false),
            None => {
                let shapes = trace.op_shapes_of(op as usize);
                let text = (ev.name.get(op as usize).copied().unwrap_or_default(), shapes.map_or("", |s| s.input_dims.as_str()), w.dtype);
                let k = match row_of_text.get(&text) {
                    Some(&k) => k,
                    None => {
                        let key = (
                            trace.name(op as usize).to_string(),
                            shapes.map(|s| s.compact_dims()).unwrap_or_default(),
                            w.dtype.map(|d| d.as_str().to_string()),
                        );
                        let k = match row_of_key.get(&key) {
                            Some(&k) => k,
                            None => {
                                let row = OpRow {
                                    op: key.0.clone(),
                                    shapes: key.1.clone(),
                                    dtype: key.2.clone(),
                                    flops: w.op.as_ref().and_then(|o| o.flops),
                                    bytes: w.op.as_ref().and_then(|o| o.bytes),
                                    counts_flops: w.class.counts_flops(),
                                    ..Default::default()
                                };
                                rows.push((key.clone(), row));
                                row_of_key.insert(key, rows.len() - 1);
                                rows.len() - 1
                            }
                        };
                        row_of_text.insert(text, k);
                        k
                    }
                };
                row_of_op.insert(op, k);
                (k, true)
            }
        };
        let Some((_, r)) = rows.get_mut(k) else { continue };
        r.kernels += 1;
        r.time_us += ev.dur_ns.get(i).copied().unwrap_or(0) as f64 / 1e3;
        if first_call {
            r.calls += 1;
        }
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows.into_iter().map(|(_, r)| r).collect()
}

/// The op rows of several ranks as one table: rows of the same op, shapes
/// and dtype add up; longest total time first.
pub fn merge_op_rows(ranks: impl IntoIterator<Item = Vec<OpRow>>) -> Vec<OpRow> {
    let mut by: std::collections::BTreeMap<(String, String, Option<String>), OpRow> = std::collections::BTreeMap::new();
    for rows in ranks {
        for r in rows {
            match by.entry((r.op.clone(), r.shapes.clone(), r.dtype.clone())) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(r);
                }
                std::collections::btree_map::Entry::Occupied(mut o) => {
                    let e = o.get_mut();
                    e.kernels += r.kernels;
                    e.calls += r.calls;
                    e.time_us += r.time_us;
                }
            }
        }
    }
    let mut rows: Vec<OpRow> = by.into_values().collect();
    rows.sort_by(|a, b| b.time_us.total_cmp(&a.time_us));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes(dims: &str, types: &str, concrete: &str) -> OpShapes {
        OpShapes { event: 0, input_dims: dims.into(), input_types: types.into(), concrete_inputs: concrete.into() }
    }

    #[test]
    fn flops_of_gemm_like_ops() {
        let s = shapes("[[64, 128], [128, 32]]", r#"["c10::BFloat16", "c10::BFloat16"]"#, "");
        let mm = op_work("aten::mm", Some(&s)).unwrap();
        assert_eq!((mm.class, mm.flops, mm.dtype), (KernelClass::Gemm, Some(2.0 * 64.0 * 128.0 * 32.0), Some(Dtype::Bf16)));
        assert_eq!(mm.bytes, Some(2.0 * (64.0 * 128.0 + 128.0 * 32.0 + 64.0 * 32.0)));
        let s = shapes("[[32], [64, 128], [128, 32]]", r#"["float", "float", "float"]"#, "");
        assert_eq!(op_work("aten::addmm", Some(&s)).unwrap().flops, Some(2.0 * 64.0 * 128.0 * 32.0));
        let s = shapes("[[4, 64, 128], [4, 128, 32]]", r#"["float", "float"]"#, "");
        assert_eq!(op_work("aten::bmm", Some(&s)).unwrap().flops, Some(2.0 * 4.0 * 64.0 * 128.0 * 32.0));
        let s = shapes("[[8, 16, 128], [32, 128], [32]]", r#"["float", "float", "float"]"#, "");
        assert_eq!(op_work("aten::linear", Some(&s)).unwrap().flops, Some(2.0 * 128.0 * 128.0 * 32.0));
        // 3x3 conv, stride 2, padding 1: 224 -> 112.
        let s = shapes(
            "[[1, 3, 224, 224], [64, 3, 3, 3], []]",
            r#"["float", "float", ""]"#,
            r#"["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]"#,
        );
        assert_eq!(op_work("aten::convolution", Some(&s)).unwrap().flops, Some(2.0 * 64.0 * 112.0 * 112.0 * 3.0 * 9.0));
        let s =
            shapes("[[2, 8, 1024, 64], [2, 8, 1024, 64], [2, 8, 1024, 64]]", r#"["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"]"#, "");
        assert_eq!(
            op_work("aten::_scaled_dot_product_flash_attention", Some(&s)).unwrap().flops,
            Some(4.0 * 2.0 * 8.0 * 1024.0 * 1024.0 * 64.0)
        );
        // Causal attention does half the work (is_causal is argument 4 of the flash op, 5 of SDPA).
        let causal = shapes(
            "[[2, 8, 1024, 64], [2, 8, 1024, 64], [2, 8, 1024, 64], [], []]",
            r#"["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"]"#,
            r#"["", "", "", "0.", "True", "False", ""]"#,
        );
        assert_eq!(
            op_work("aten::_scaled_dot_product_flash_attention", Some(&causal)).unwrap().flops,
            Some(2.0 * 2.0 * 8.0 * 1024.0 * 1024.0 * 64.0)
        );
        let sdpa = shapes(
            "[[2, 8, 1024, 64], [2, 8, 1024, 64], [2, 8, 1024, 64], [], [], []]",
            r#"["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "", "Scalar", "Scalar"]"#,
            r#"["", "", "", "", "0.", "True", ""]"#,
        );
        assert_eq!(
            op_work("aten::scaled_dot_product_attention", Some(&sdpa)).unwrap().flops,
            Some(2.0 * 2.0 * 8.0 * 1024.0 * 1024.0 * 64.0)
        );
        // Dims near i64::MAX multiply without overflow (f64), and give a finite or no work.
        let huge = shapes("[[9223372036854775807, 4096], [4096, 9223372036854775807]]", r#"["float", "float"]"#, "");
        let w = op_work("aten::mm", Some(&huge)).unwrap();
        assert!(w.flops.is_some_and(f64::is_finite));
    }

    /// FBGEMM's embedding kernels (half the GPU time of a DLRM step on `hta/trace_filter`)
    /// were GEMMs because of the library's name; its op names the class first.
    #[test]
    fn fbgemm_names_no_gemm_and_a_namespaced_op_names_its_class() {
        use KernelClass::*;
        for (name, class) in [
            ("void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, long>(...)", Embedding),
            ("void fbgemm_gpu::permute_2D_data_kernel<false, int, int>(int, int)", Other),
            ("void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_float_to_bfloat16>", Elementwise),
            ("fbgemm_gpu::gemm_kernel_like_name_sgemm", Gemm),
        ] {
            assert_eq!(KernelClass::from_kernel_name(name), class, "{name}");
        }
        assert_eq!(KernelClass::from_op_name("fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function"), Some(Embedding));
        // A module's record_function label names no work; an op whose name says no class gives none.
        assert_eq!(KernelClass::from_op_name("## forward ##: nn.Module: Attention"), None);
        assert_eq!(KernelClass::from_op_name("nn.Module: MultiheadAttention"), None);
        assert_eq!(KernelClass::from_op_name("aten::cat"), None);
    }

    #[test]
    fn bytes_of_memory_bound_ops() {
        let s = shapes("[[1024], [1024], []]", r#"["float", "float", "Scalar"]"#, "");
        assert_eq!(op_work("aten::add", Some(&s)).unwrap().bytes, Some(3.0 * 4096.0));
        assert_eq!(op_work("aten::unknown_op", Some(&s)), None);
        assert_eq!(KernelClass::from_kernel_name("sm90_xmma_gemm_bf16bf16"), KernelClass::Gemm);
        assert_eq!(KernelClass::from_kernel_name("void at::native::vectorized_elementwise_kernel<4>"), KernelClass::Elementwise);
    }

    #[test]
    fn gemm_and_conv_kernels_by_name_on_amd_and_nvidia() {
        // From the MI300X and B200 traces of the corpus (kernels without an op).
        for name in [
            "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT96x96x128_MI16x16x1_SN_LDSB1_AFC1_AG0_AFEM1",
            "Cijk_Ailk_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT64x288x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1",
            "nvjet_tst_144x128_64x6_2x1_v_bz_bias_TNN",
            "nvjet_sm103_tst_64x8_64x16_1x4_h_bz_TNT",
        ] {
            assert_eq!(KernelClass::from_kernel_name(name), KernelClass::Gemm, "{name}");
        }
        // Attention is still tested first.
        assert_eq!(KernelClass::from_kernel_name("flash_fwd_kernel_Cijk_like"), KernelClass::Attention);
        // Convolutions that run GEMMs are convolutions.
        for name in [
            "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int, int, int, float const*, int, float*)",
            "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4",
            "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_64x256_32x4_nhwc_align4>",
            "_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3INS_34GridwiseGemmMultiD",
            "cudnn_infer_volta_scudnn_128x64_3dconv_fprop_medium_nn_v1",
        ] {
            assert_eq!(KernelClass::from_kernel_name(name), KernelClass::Conv, "{name}");
        }
        // A type conversion is no convolution.
        assert_eq!(
            KernelClass::from_kernel_name("vllm::_typeConvert<c10::BFloat16>::exists, void>::type vllm::fused_add_rms_norm_kernel"),
            KernelClass::Reduction
        );
    }

    #[test]
    fn old_convolution_backward_counts_the_gradients_its_children_computed() {
        // PyTorch ≤ 1.10: cudnn_convolution_backward runs one child op per gradient.
        // The first layer (no input gradient) has only the weight child; its
        // mask is not recorded, so the child says which gradient ran.
        let op = |name: &str, ts: u32, dur: u32, id: u32, args: &str| {
            format!(
                r#"{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 2, "ts": {ts}, "dur": {dur}, "args": {{"External id": {id}{args}}}}}"#
            )
        };
        let launch = |ts: u32, c: u32| {
            format!(
                r#"{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": {ts}, "dur": 2, "args": {{"correlation": {c}, "External id": {c}}}}},
                {{"ph": "X", "cat": "kernel", "name": "implicit_convolve_sgemm", "pid": 0, "tid": 7, "ts": {}, "dur": 100, "args": {{"correlation": {c}, "External id": {c}}}}}"#,
                ts + 5
            )
        };
        let dims = r#", "Input Dims": [[32, 3, 224, 224], [32, 64, 112, 112], [64, 3, 7, 7], [], [], [], [], [], [], [], []], "Input type": ["float", "float", "float", "GenericList", "GenericList", "GenericList", "Int", "Bool", "Bool", "Bool", "GenericList"]"#;
        let events = [
            op("aten::cudnn_convolution_backward", 0, 1000, 1, dims),
            op("aten::cudnn_convolution_backward_weight", 10, 500, 2, ""),
            launch(20, 900),
            op("aten::cudnn_convolution_backward", 2000, 1000, 3, dims),
            op("aten::cudnn_convolution_backward_input", 2010, 400, 4, ""),
            launch(2020, 901),
            op("aten::cudnn_convolution_backward_weight", 2500, 400, 5, ""),
            launch(2520, 902),
        ];
        let json = format!(r#"{{"traceEvents": [{}]}}"#, events.join(",\n"));
        let t = tracecast_ingest::kineto::parse_bytes(json.as_bytes(), std::path::Path::new("t.json"), &Default::default()).unwrap();
        let fwd = 2.0 * 32.0 * 64.0 * 112.0 * 112.0 * 3.0 * 49.0;
        let mut works: Vec<(f64, u32)> = samples(&t, &Classifier::default()).iter().map(|s| (s.work.unwrap() / fwd, s.kernels)).collect();
        works.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert_eq!(works, [(1.0, 1), (2.0, 2)]);
    }
}
