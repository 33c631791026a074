//! Convolution work: FLOPs and bytes of the forward and backward ATen
//! convolution ops, reading each op's arguments where its schema puts them.
//!
//! The schemas differ between the dispatcher's ops (from PyTorch's
//! `aten/src/ATen/native/native_functions.yaml`; the backend backward ops
//! from the releases that still had them, ≤ 1.10):
//!
//! | op | arguments |
//! |----|-----------|
//! | `convolution`, `_convolution`, `convolution_overrideable` | input, weight, bias, **stride, padding, dilation**, transposed, output_padding, groups, … |
//! | `conv1d`, `conv2d`, `conv3d` | input, weight, bias, **stride, padding, dilation**, groups |
//! | `cudnn_convolution` | self, weight, **padding, stride, dilation**, groups, benchmark, deterministic, allow_tf32 |
//! | `miopen_convolution`, `miopen_depthwise_convolution` | self, weight, bias, **padding, stride, dilation**, groups, benchmark, deterministic |
//! | `cudnn_convolution_relu`, `miopen_convolution_relu` | self, weight, bias, **stride, padding, dilation**, groups |
//! | `cudnn_convolution_add_relu`, `miopen_convolution_add_relu` | self, weight, z, alpha, bias, **stride, padding, dilation**, groups |
//! | `convolution_backward` | grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, output_mask[3] |
//! | `convolution_backward_overrideable` | grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups, output_mask[3] |
//! | `cudnn_convolution_backward` | self, grad_output, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32, output_mask[2] |
//! | `miopen_convolution_backward`, `miopen_depthwise_convolution_backward` | self, grad_output, weight, padding, stride, dilation, groups, benchmark, deterministic, output_mask[3] |
//!
//! The weight is `[Cout, Cin/groups, k…]` (transposed: `[Cin, Cout/groups, k…]`),
//! so one pass costs 2 · N · (output positions) · numel(weight), which is DESIGN's
//! 2·N·Cout·Hout·Wout·(Cin/groups)·Kh·Kw for any number of spatial dims and any
//! groups; a transposed convolution visits every *input* position instead.
//! Backward: the input gradient and the weight gradient each cost one forward
//! pass, counted for each `output_mask` entry that is true (both when the
//! mask is not recorded); the bias gradient is a reduction and adds bytes only.
//!
//! The backends' per-gradient ops (`*_backward_input`, `*_backward_weight`,
//! `*_backward_bias`, PyTorch ≤ 1.10) are not modelled on their own: the
//! weight gradient's op records the weight's size as a list the traces of
//! that time do not keep, so its FLOPs are unknown there. Their kernels count
//! toward the enclosing `*_convolution_backward`, whose shapes give both
//! gradients (see [`super::kernel_work`], which also reads which gradients
//! were computed from which of these ops launched kernels).

use super::{ints, numel};

/// Where an op keeps the arguments the work needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum ConvOp {
    /// A forward convolution.
    Forward {
        /// Position of the stride.
        stride: usize,
        /// Position of the padding.
        padding: usize,
        /// Position of the dilation.
        dilation: usize,
        /// Whether the op is transposed: fixed by the op, or the position of its `transposed` flag.
        transposed: Flag,
    },
    /// A transposed convolution op: its work follows the input's positions, so it needs no stride.
    Transposed,
    /// A backward convolution.
    Backward {
        /// Position of grad_output.
        grad_output: usize,
        /// Position of the forward's input.
        input: usize,
        /// Position of the `transposed` flag, when the op has one.
        transposed: Flag,
        /// Position of `output_mask`.
        mask: usize,
    },
}

/// A boolean that an op fixes or takes as an argument.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Flag {
    /// Fixed by the op.
    Fixed(bool),
    /// Argument at this position.
    Arg(usize),
}

impl ConvOp {
    /// The argument layout of op `base` (without `aten::`); `None` for an op that is no modelled convolution.
    pub(super) fn of(base: &str) -> Option<ConvOp> {
        use ConvOp::{Backward, Forward};
        use Flag::{Arg, Fixed};
        let fwd = |stride, padding, dilation, transposed| Forward { stride, padding, dilation, transposed };
        Some(match base {
            "convolution" | "_convolution" | "convolution_overrideable" => fwd(3, 4, 5, Arg(6)),
            "conv1d" | "conv2d" | "conv3d" => fwd(3, 4, 5, Fixed(false)),
            "cudnn_convolution" => fwd(3, 2, 4, Fixed(false)),
            "miopen_convolution" | "miopen_depthwise_convolution" => fwd(4, 3, 5, Fixed(false)),
            "cudnn_convolution_relu" | "miopen_convolution_relu" => fwd(3, 4, 5, Fixed(false)),
            "cudnn_convolution_add_relu" | "miopen_convolution_add_relu" => fwd(5, 6, 7, Fixed(false)),
            "cudnn_convolution_transpose"
            | "miopen_convolution_transpose"
            | "conv_transpose1d"
            | "conv_transpose2d"
            | "conv_transpose3d" => ConvOp::Transposed,
            "convolution_backward" => Backward { grad_output: 0, input: 1, transposed: Arg(7), mask: 10 },
            "convolution_backward_overrideable" => Backward { grad_output: 0, input: 1, transposed: Arg(6), mask: 9 },
            "cudnn_convolution_backward" => Backward { grad_output: 1, input: 0, transposed: Fixed(false), mask: 10 },
            "miopen_convolution_backward" | "miopen_depthwise_convolution_backward" => {
                Backward { grad_output: 1, input: 0, transposed: Fixed(false), mask: 9 }
            }
            _ => return None,
        })
    }
}

/// Which gradients a backward op computes: input, weight (the bias gradient adds no FLOPs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Grads {
    /// The input gradient.
    pub(super) input: bool,
    /// The weight gradient.
    pub(super) weight: bool,
}

impl Grads {
    /// Both gradients: what a backward op computes when its mask is not recorded.
    pub(super) const BOTH: Grads = Grads { input: true, weight: true };

    /// The recorded `output_mask` (`[True, True, False]` or `[1, 1, 0]`), when there is one.
    pub(super) fn parse(s: &str) -> Option<Grads> {
        let flags: Vec<bool> = s
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .filter_map(|x| match x.trim().to_ascii_lowercase().as_str() {
                "true" | "1" => Some(true),
                "false" | "0" => Some(false),
                _ => None,
            })
            .collect();
        match flags.as_slice() {
            [input, weight, ..] => Some(Grads { input: *input, weight: *weight }),
            _ => None,
        }
    }
}

/// FLOPs and bytes of convolution op `op` from its `dims`, `concrete`
/// inputs and element size; a backward op computes the gradients of its
/// recorded `output_mask`, else `grads`, else both. Each is `None` where the
/// shapes do not give it.
pub(super) fn work(op: ConvOp, dims: &[Vec<i64>], concrete: &[String], elem: f64, grads: Option<Grads>) -> (Option<f64>, Option<f64>) {
    let dim = |i: usize| dims.get(i).map(Vec::as_slice).unwrap_or_default();
    let arg = |i: usize| concrete.get(i).map_or("", String::as_str);
    let flag = |f: Flag| match f {
        Flag::Fixed(b) => Some(b),
        Flag::Arg(i) => match arg(i).to_ascii_lowercase().as_str() {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            _ => None,
        },
    };
    // Every input position meets every weight; the output's size needs
    // output_padding too, so bytes are left unknown.
    let transposed_fwd = |layout: &Layout<'_>| (Some(2.0 * layout.n * layout.spatial_in() * layout.weight), None);
    match op {
        ConvOp::Transposed => Layout::of(dim(0), dim(1)).map_or((None, None), |l| transposed_fwd(&l)),
        ConvOp::Forward { stride, padding, dilation, transposed } => {
            let (x, w) = (dim(0), dim(1));
            let Some(layout) = Layout::of(x, w) else { return (None, None) };
            // A convolution with no recorded `transposed` is taken as the usual, non-transposed one.
            if flag(transposed).unwrap_or(false) {
                return transposed_fwd(&layout);
            }
            let Some(out) = layout.out_spatial(arg(stride), arg(padding), arg(dilation)) else { return (None, None) };
            let flops = 2.0 * layout.n * out * layout.weight;
            let bytes = (numel(x).unwrap_or(0.0) + layout.weight + layout.n * layout.cout * out) * elem;
            (Some(flops), Some(bytes))
        }
        ConvOp::Backward { grad_output, input, transposed, mask } => {
            let (g, x, w) = (dim(grad_output), dim(input), dim(2));
            let (Some(layout), Some(go)) = (Layout::of(x, w), numel(g)) else { return (None, None) };
            let grads = Grads::parse(arg(mask)).or(grads).unwrap_or(Grads::BOTH);
            // One pass: over the output's positions (grad_output's), or the input's when transposed.
            let positions = if flag(transposed).unwrap_or(false) {
                layout.spatial_in()
            } else {
                let Some(spatial) = g.get(g.len().saturating_sub(layout.nd)..).and_then(numel) else { return (None, None) };
                spatial
            };
            let pass = 2.0 * layout.n * positions * layout.weight;
            let passes = f64::from(u8::from(grads.input) + u8::from(grads.weight));
            // grad_output is read; each gradient reads one of input and weight and writes the other's size.
            let xw = numel(x).unwrap_or(0.0) + layout.weight;
            let bytes = (go + passes * xw) * elem;
            (Some(pass * passes), Some(bytes))
        }
    }
}

/// The shapes of a convolution: batch, channels, spatial dims and weight size.
struct Layout<'a> {
    /// Batch (1 for an unbatched input).
    n: f64,
    /// Output channels (of a non-transposed weight).
    cout: f64,
    /// Spatial dims of the input.
    x_spatial: &'a [i64],
    /// Kernel dims.
    k: &'a [i64],
    /// Spatial dims: 1, 2 or 3.
    nd: usize,
    /// Elements of the weight: Cout · Cin/groups · Πk.
    weight: f64,
}

impl<'a> Layout<'a> {
    /// From input `x` (`[N, C, …]` or unbatched `[C, …]`) and weight `w` (`[Cout, Cin/groups, k…]`).
    fn of(x: &'a [i64], w: &'a [i64]) -> Option<Layout<'a>> {
        let nd = w.len().checked_sub(2).filter(|nd| (1..=3).contains(nd))?;
        let n = match x.len() {
            l if l == nd + 2 => *x.first()? as f64,
            l if l == nd + 1 => 1.0,
            _ => return None,
        };
        let x_spatial = x.get(x.len() - nd..)?;
        Some(Layout { n, cout: *w.first()? as f64, x_spatial, k: w.get(2..)?, nd, weight: numel(w)? })
    }

    /// Input positions.
    fn spatial_in(&self) -> f64 {
        numel(self.x_spatial).unwrap_or(0.0)
    }

    /// Output positions of a non-transposed convolution with these recorded
    /// stride, padding and dilation (one value applies to every dim;
    /// padding `same` keeps the size, `valid` is 0); `None` where one is not recorded.
    fn out_spatial(&self, stride: &str, padding: &str, dilation: &str) -> Option<f64> {
        let (s, d) = (ints(stride), ints(dilation));
        let same = padding.trim_matches(|c| c == '"' || c == '\'').eq_ignore_ascii_case("same");
        let p = if padding.trim_matches(|c| c == '"' || c == '\'').eq_ignore_ascii_case("valid") { vec![0] } else { ints(padding) };
        if s.is_empty() || d.is_empty() || (p.is_empty() && !same) {
            return None;
        }
        let at = |v: &[i64], i: usize| v.get(i).or(v.first()).copied().unwrap_or(0) as f64;
        let mut out = 1.0;
        for (i, (&size, &k)) in self.x_spatial.iter().zip(self.k).enumerate() {
            let o = if same {
                size as f64
            } else {
                ((size as f64 + 2.0 * at(&p, i) - at(&d, i) * (k as f64 - 1.0) - 1.0) / at(&s, i).max(1.0)).floor() + 1.0
            };
            if o <= 0.0 {
                return None;
            }
            out *= o;
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use tracecast_ingest::OpShapes;

    use crate::work::{KernelClass, op_work};

    fn shapes(dims: &str, types: &str, concrete: &str) -> OpShapes {
        OpShapes { event: 0, input_dims: dims.into(), input_types: types.into(), concrete_inputs: concrete.into() }
    }

    fn flops(op: &str, s: &OpShapes) -> Option<f64> {
        let w = op_work(op, Some(s)).unwrap();
        assert_eq!(w.class, KernelClass::Conv, "{op}");
        w.flops
    }

    #[test]
    fn each_backend_op_reads_stride_and_padding_where_its_schema_puts_them() {
        // A stride-2, padding-1 3×3 conv of [1, 256, 56, 56] by [256, 256, 3, 3]: 56 → 28.
        let want = 2.0 * 256.0 * 28.0 * 28.0 * 256.0 * 9.0; // 0.92 GFLOP
        let bf16 = r#"["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar"]"#;
        // miopen_convolution(self, weight, bias, padding, stride, dilation, groups, benchmark, deterministic),
        // as MI300X traces record it. Read in `convolution`'s order (stride 3, padding 4) this was
        // stride 1 and padding 2: 58 × 58 outputs, 3.97 GFLOP.
        let miopen = shapes(
            "[[1, 256, 56, 56], [256, 256, 3, 3], [256], [], [], [], [], [], []]",
            bf16,
            r#"["", "", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False"]"#,
        );
        assert_eq!(flops("aten::miopen_convolution", &miopen), Some(want));
        // cudnn_convolution(self, weight, padding, stride, dilation, groups, …): no bias.
        let cudnn = shapes(
            "[[1, 256, 56, 56], [256, 256, 3, 3], [], [], [], [], [], [], []]",
            bf16,
            r#"["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"]"#,
        );
        assert_eq!(flops("aten::cudnn_convolution", &cudnn), Some(want));
        // convolution / _convolution / conv2d: (input, weight, bias, stride, padding, dilation, …).
        let generic = shapes(
            "[[1, 256, 56, 56], [256, 256, 3, 3], [256], [], [], [], [], [], []]",
            bf16,
            r#"["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]"#,
        );
        for op in ["aten::convolution", "aten::_convolution", "aten::conv2d"] {
            assert_eq!(flops(op, &generic), Some(want), "{op}");
        }
        // The owlv2 patch embedding on MI300X: stride 14, padding 0 → 72 × 72 outputs.
        let patch = shapes(
            "[[1, 3, 1008, 1008], [1024, 3, 14, 14], [], [], [], [], [], [], []]",
            bf16,
            r#"["", "", "", "[0, 0]", "[14, 14]", "[1, 1]", "1", "False", "False"]"#,
        );
        assert_eq!(flops("aten::miopen_convolution", &patch), Some(2.0 * 1024.0 * 72.0 * 72.0 * 3.0 * 196.0));
        // Without recorded strides (traces before PyTorch 2.1) the output size is unknown.
        let old = shapes("[[1, 256, 56, 56], [256, 256, 3, 3], [], [], [], [], [], [], []]", bf16, "");
        assert_eq!(flops("aten::cudnn_convolution", &old), None);
    }

    #[test]
    fn groups_one_and_three_dimensional_and_transposed_convolutions() {
        let f32s = r#"["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar"]"#;
        // Depthwise (groups = 32): the weight's second dim is Cin/groups = 1.
        let dw =
            shapes("[[2, 32, 16, 16], [32, 1, 3, 3], [], [], [], [], []]", f32s, r#"["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "32"]"#);
        assert_eq!(flops("aten::conv2d", &dw), Some(2.0 * 2.0 * 32.0 * 16.0 * 16.0 * 1.0 * 9.0));
        // conv1d, stride 2, no padding: (100 − 4 − 1) / 2 + 1 = 48.
        let c1 = shapes("[[4, 16, 100], [32, 16, 5], [], [], [], [], []]", f32s, r#"["", "", "", "[2]", "[0]", "[1]", "1"]"#);
        assert_eq!(flops("aten::conv1d", &c1), Some(2.0 * 4.0 * 32.0 * 48.0 * 16.0 * 5.0));
        // conv3d with a single value for every dim, and dilation 2: (10 + 2 − 4 − 1) + 1 = 8.
        let c3 = shapes("[[1, 8, 10, 10, 10], [16, 8, 3, 3, 3], [], [], [], [], []]", f32s, r#"["", "", "", "[1]", "[1]", "[2]", "1"]"#);
        assert_eq!(flops("aten::conv3d", &c3), Some(2.0 * 16.0 * 512.0 * 8.0 * 27.0));
        // padding="same" keeps the size.
        let same = shapes("[[1, 8, 10, 10], [16, 8, 3, 3], [], [], [], [], []]", f32s, r#"["", "", "", "[1, 1]", "same", "[1, 1]", "1"]"#);
        assert_eq!(flops("aten::conv2d", &same), Some(2.0 * 16.0 * 100.0 * 8.0 * 9.0));
        // Transposed (weight [Cin, Cout/groups, kh, kw]): every input position meets the whole weight.
        let t = shapes(
            "[[1, 64, 14, 14], [64, 32, 2, 2], [], [], [], [], [], [], []]",
            r#"["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]"#,
            r#"["", "", "", "[2, 2]", "[0, 0]", "[1, 1]", "True", "[0, 0]", "1"]"#,
        );
        assert_eq!(flops("aten::convolution", &t), Some(2.0 * 196.0 * 64.0 * 32.0 * 4.0));
    }

    #[test]
    fn backward_counts_one_forward_per_gradient_in_the_output_mask() {
        // Forward: [8, 64, 56, 56] * [128, 64, 3, 3], stride 2 → grad_output [8, 128, 28, 28].
        let fwd = 2.0 * 8.0 * 128.0 * 28.0 * 28.0 * 64.0 * 9.0; // 7.4 GFLOP
        let dims = "[[8, 128, 28, 28], [8, 64, 56, 56], [128, 64, 3, 3], [], [], [], [], [], [], [], []]";
        let types = r#"["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar", "ScalarList"]"#;
        let with_mask = |mask: &str| format!(r#"["", "", "", "[0]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "{mask}"]"#);
        let bw = |concrete: &str| flops("aten::convolution_backward", &shapes(dims, types, concrete));
        assert_eq!(bw(&with_mask("[True, True, True]")), Some(2.0 * fwd));
        // The first layer: no input gradient.
        assert_eq!(bw(&with_mask("[False, True, True]")), Some(fwd));
        assert_eq!(bw(&with_mask("[1, 0, 0]")), Some(fwd));
        // Not recorded: both.
        assert_eq!(bw(""), Some(2.0 * fwd));
        // PyTorch ≤ 1.10's cudnn_convolution_backward(self, grad_output, weight, …), as a ResNet-50 trace has it.
        let old = shapes(
            "[[32, 512, 7, 7], [32, 2048, 7, 7], [2048, 512, 1, 1], [], [], [], [], [], [], [], []]",
            r#"["float", "float", "float", "GenericList", "GenericList", "GenericList", "Int", "Bool", "Bool", "Bool", "GenericList"]"#,
            "",
        );
        assert_eq!(flops("aten::cudnn_convolution_backward", &old), Some(2.0 * 2.0 * 32.0 * 2048.0 * 49.0 * 512.0));
        // Its per-gradient children are not modelled: their kernels belong to it.
        assert_eq!(op_work("aten::cudnn_convolution_backward_weight", Some(&old)), None);
        assert_eq!(op_work("aten::cudnn_convolution_backward_input", Some(&old)), None);
    }
}
