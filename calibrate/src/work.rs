//! Work accounting: which op launched each kernel, what class it is, and how
//! many FLOPs or bytes that op does, from its type and `Input Dims`.
//!
//! Each op instance becomes one sample: its work against the summed duration
//! of the kernels it launched (each kernel belongs to the innermost op around
//! its launch, so no kernel is counted twice). GEMM-like ops count FLOPs
//! (mm/addmm 2MKN, bmm/baddbmm 2BMKN, linear, convolution, attention 4·B·H·Sq·Sk·D
//! forward and 2.5× that backward); memory-bound ops count the bytes of their
//! inputs and output.

use serde::Serialize;
use tracecast_ingest::analysis::{ActivityClass, Classifier};
use tracecast_ingest::link::{Links, NONE};
use tracecast_ingest::{OpShapes, RankTrace};

use crate::catalog::Dtype;

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

    /// The class a kernel name suggests, when no op says.
    pub fn from_kernel_name(name: &str) -> KernelClass {
        let n = name.to_ascii_lowercase();
        let has = |s: &[&str]| s.iter().any(|x| n.contains(x));
        if has(&["flash", "fmha", "attention", "attn"]) {
            KernelClass::Attention
        } else if has(&["gemm", "cutlass", "xmma", "matmul", "cublas", "wgmma", "_mm_"]) {
            KernelClass::Gemm
        } else if has(&["conv", "winograd", "implicit_gemm", "fprop", "dgrad", "wgrad"]) {
            KernelClass::Conv
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
    /// Σ duration of the op's kernels, µs.
    pub dur_us: f64,
    /// Kernels summed.
    pub kernels: u32,
    /// The op's name (or the kernel's, without an op).
    pub op: String,
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
fn input_bytes(dims: &[Vec<i64>], types: &[String]) -> Option<f64> {
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

/// Class and work of an op from its name and shapes; `None` when the op is not one we model.
fn op_work(name: &str, shapes: Option<&OpShapes>) -> Option<(KernelClass, Option<f64>, Option<Dtype>)> {
    let base = name.strip_prefix("aten::").unwrap_or(name);
    let dims = shapes.map(OpShapes::dims).unwrap_or_default();
    let types = shapes.map(OpShapes::types).unwrap_or_default();
    let dtype = types.iter().find_map(|t| Dtype::from_profiler(t));
    let dim = |i: usize| dims.get(i).map(Vec::as_slice).unwrap_or_default();
    let gemm = |m: i64, k: i64, n: i64, b: i64| Some(2.0 * b as f64 * m as f64 * k as f64 * n as f64);
    let work = match base {
        "mm" => match (dim(0), dim(1)) {
            ([m, k], [_, n]) => (KernelClass::Gemm, gemm(*m, *k, *n, 1)),
            _ => (KernelClass::Gemm, None),
        },
        "addmm" => match (dim(1), dim(2)) {
            ([m, k], [_, n]) => (KernelClass::Gemm, gemm(*m, *k, *n, 1)),
            _ => (KernelClass::Gemm, None),
        },
        "bmm" => match (dim(0), dim(1)) {
            ([b, m, k], [_, _, n]) => (KernelClass::Gemm, gemm(*m, *k, *n, *b)),
            _ => (KernelClass::Gemm, None),
        },
        "baddbmm" => match (dim(1), dim(2)) {
            ([b, m, k], [_, _, n]) => (KernelClass::Gemm, gemm(*m, *k, *n, *b)),
            _ => (KernelClass::Gemm, None),
        },
        "linear" => {
            let (x, w) = (dim(0), dim(1));
            match (x.split_last(), w) {
                (Some((k, rows)), [n, _]) => (KernelClass::Gemm, gemm(rows.iter().product(), *k, *n, 1)),
                _ => (KernelClass::Gemm, None),
            }
        }
        "convolution" | "_convolution" | "cudnn_convolution" | "conv2d" | "miopen_convolution" => {
            let concrete = shapes.map(OpShapes::concrete).unwrap_or_default();
            let (x, w) = (dim(0), dim(1));
            let flops = match (x, w) {
                ([n, _cin, h, wd], [cout, cin_g, kh, kw]) if concrete.len() >= 6 => {
                    let stride = ints(concrete.get(3).map_or("", String::as_str));
                    let pad = ints(concrete.get(4).map_or("", String::as_str));
                    let dil = ints(concrete.get(5).map_or("", String::as_str));
                    let get = |v: &[i64], i: usize, d: i64| v.get(i).or(v.first()).copied().unwrap_or(d);
                    let out = |size: i64, k: i64, i: usize| {
                        (size + 2 * get(&pad, i, 0) - get(&dil, i, 1) * (k - 1) - 1) / get(&stride, i, 1).max(1) + 1
                    };
                    let (ho, wo) = (out(*h, *kh, 0), out(*wd, *kw, 1));
                    (ho > 0 && wo > 0).then(|| 2.0 * (*n * *cout * ho * wo * *cin_g * *kh * *kw) as f64)
                }
                _ => None,
            };
            (KernelClass::Conv, flops)
        }
        _ if base.contains("attention") || base.contains("flash_attn") => {
            let backward = base.contains("backward");
            // Forward: (q, k, …); backward: (grad_out, q, k, …).
            let (q, k) = if backward { (dim(1), dim(2)) } else { (dim(0), dim(1)) };
            let flops = match (q, k) {
                ([b, h, sq, d], [_, _, sk, _]) => Some(4.0 * (*b * *h * *sq * *sk * *d) as f64 * if backward { 2.5 } else { 1.0 }),
                _ => None,
            };
            (KernelClass::Attention, flops)
        }
        "embedding" | "embedding_bag" | "_embedding_bag" | "embedding_dense_backward" => {
            let (w, idx) = (dim(0), dim(1));
            let bytes = match (w, numel(idx)) {
                ([_, d], Some(n)) => Some(n * *d as f64 * types.first().and_then(|t| elem_size(t)).unwrap_or(4.0) + n * 8.0),
                _ => None,
            };
            (KernelClass::Embedding, bytes)
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
            (KernelClass::Reduction, input_bytes(&dims, &types).zip(first).map(|(a, b)| a + b))
        }
        "sum" | "mean" | "max" | "min" | "amax" | "argmax" | "norm" | "linalg_vector_norm" | "var_mean" | "std" => {
            (KernelClass::Reduction, input_bytes(&dims, &types))
        }
        // Writes only.
        "fill_" | "zero_" => (KernelClass::Elementwise, numel(dim(0)).zip(types.first().and_then(|t| elem_size(t))).map(|(n, s)| n * s)),
        // Reads the source, writes the destination: both are inputs.
        "copy_" => (KernelClass::Elementwise, input_bytes(&dims, &types)),
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
            (KernelClass::Elementwise, input_bytes(&dims, &types).zip(largest).map(|(a, b)| a + b))
        }
        _ if base.starts_with("_foreach_") => {
            // Tensor lists: shapes are not recorded per tensor.
            (KernelClass::Elementwise, None)
        }
        _ => return None,
    };
    Some((work.0, work.1.filter(|w| *w > 0.0 && w.is_finite()), dtype))
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
    /// The op's row, when a modelled op launched it.
    pub op_row: Option<u32>,
    /// This kernel's share of its op's kernel time (1 without an op).
    pub share: f64,
}

/// For every row: what the compute kernel there belongs to (`None` for other rows).
pub fn kernel_work(trace: &RankTrace, classifier: &Classifier) -> Vec<Option<KernelWork>> {
    let classes = classifier.classes(trace);
    let links = Links::new(trace);
    let ev = &trace.events;
    let mut out: Vec<Option<KernelWork>> = vec![None; ev.len()];
    let mut op_time: std::collections::BTreeMap<u32, i64> = std::collections::BTreeMap::new();
    for (i, class) in classes.iter().enumerate() {
        if *class != Some(ActivityClass::Compute) {
            continue;
        }
        let op = links.launch_op.get(i).copied().unwrap_or(NONE);
        // Innermost op with a model wins; walk out at most a few levels (e.g. from a
        // record_function wrapper inside aten::linear).
        let modelled = links.ancestors(op, 3).find_map(|r| op_work(trace.name(r), trace.op_shapes_of(r)).map(|w| (r as u32, w)));
        out[i] = Some(match modelled {
            Some((row, (class, work, dtype))) => {
                *op_time.entry(row).or_insert(0) += ev.dur_ns.get(i).copied().unwrap_or(0);
                KernelWork { class, dtype, op_work: work, op_row: Some(row), share: 1.0 }
            }
            None => {
                KernelWork { class: KernelClass::from_kernel_name(trace.name(i)), dtype: None, op_work: None, op_row: None, share: 1.0 }
            }
        });
    }
    for (i, k) in out.iter_mut().enumerate() {
        if let Some(k) = k
            && let Some(total) = k.op_row.and_then(|r| op_time.get(&r)).filter(|t| **t > 0)
        {
            k.share = ev.dur_ns.get(i).copied().unwrap_or(0) as f64 / *total as f64;
        }
    }
    out
}

/// The work samples of one rank: one per op instance that launched compute kernels.
pub fn samples(trace: &RankTrace, classifier: &Classifier) -> Vec<WorkSample> {
    let ev = &trace.events;
    let mut by_op: std::collections::BTreeMap<u32, WorkSample> = std::collections::BTreeMap::new();
    let mut unattributed: Vec<WorkSample> = Vec::new();
    for (i, k) in kernel_work(trace, classifier).into_iter().enumerate() {
        let Some(k) = k else { continue };
        let dur_us = ev.dur_ns.get(i).copied().unwrap_or(0) as f64 / 1000.0;
        match k.op_row {
            Some(row) => {
                let s = by_op.entry(row).or_insert_with(|| WorkSample {
                    class: k.class,
                    dtype: k.dtype,
                    work: k.op_work,
                    dur_us: 0.0,
                    kernels: 0,
                    op: trace.name(row as usize).to_string(),
                });
                s.dur_us += dur_us;
                s.kernels += 1;
            }
            None => {
                unattributed.push(WorkSample { class: k.class, dtype: None, work: None, dur_us, kernels: 1, op: trace.name(i).to_string() })
            }
        }
    }
    let mut out: Vec<WorkSample> = by_op.into_values().collect();
    out.extend(unattributed);
    out
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
        assert_eq!(op_work("aten::mm", Some(&s)), Some((KernelClass::Gemm, Some(2.0 * 64.0 * 128.0 * 32.0), Some(Dtype::Bf16))));
        let s = shapes("[[32], [64, 128], [128, 32]]", r#"["float", "float", "float"]"#, "");
        assert_eq!(op_work("aten::addmm", Some(&s)).unwrap().1, Some(2.0 * 64.0 * 128.0 * 32.0));
        let s = shapes("[[4, 64, 128], [4, 128, 32]]", r#"["float", "float"]"#, "");
        assert_eq!(op_work("aten::bmm", Some(&s)).unwrap().1, Some(2.0 * 4.0 * 64.0 * 128.0 * 32.0));
        let s = shapes("[[8, 16, 128], [32, 128], [32]]", r#"["float", "float", "float"]"#, "");
        assert_eq!(op_work("aten::linear", Some(&s)).unwrap().1, Some(2.0 * 128.0 * 128.0 * 32.0));
        // 3x3 conv, stride 2, padding 1: 224 -> 112.
        let s = shapes(
            "[[1, 3, 224, 224], [64, 3, 3, 3], []]",
            r#"["float", "float", ""]"#,
            r#"["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]"#,
        );
        assert_eq!(op_work("aten::convolution", Some(&s)).unwrap().1, Some(2.0 * 64.0 * 112.0 * 112.0 * 3.0 * 9.0));
        let s =
            shapes("[[2, 8, 1024, 64], [2, 8, 1024, 64], [2, 8, 1024, 64]]", r#"["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"]"#, "");
        assert_eq!(
            op_work("aten::_scaled_dot_product_flash_attention", Some(&s)).unwrap().1,
            Some(4.0 * 2.0 * 8.0 * 1024.0 * 1024.0 * 64.0)
        );
    }

    #[test]
    fn bytes_of_memory_bound_ops() {
        let s = shapes("[[1024], [1024], []]", r#"["float", "float", "Scalar"]"#, "");
        assert_eq!(op_work("aten::add", Some(&s)).unwrap().1, Some(3.0 * 4096.0));
        assert_eq!(op_work("aten::unknown_op", Some(&s)), None);
        assert_eq!(KernelClass::from_kernel_name("sm90_xmma_gemm_bf16bf16"), KernelClass::Gemm);
        assert_eq!(KernelClass::from_kernel_name("void at::native::vectorized_elementwise_kernel<4>"), KernelClass::Elementwise);
    }
}
