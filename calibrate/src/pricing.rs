//! The pricing layer: what one GEMM, attention kernel or collective costs on
//! a GPU, from the measured performance base ([`crate::measured`]) and the
//! catalog, with the rule that priced it, whether it extrapolates, and a band
//! from the rule's measured error.
//!
//! A GEMM is priced by the most specific knowledge:
//! 1. **the GPU's measured table**, interpolated in shape: multilinear in
//!    log₂(batch, m, n, k) of log time over a complete grid (XLA's tables),
//!    else inverse-distance weighting of the achieved rate over the nearest
//!    measured shapes. Outside the measured range a dimension above it scales
//!    the time with the work (the rate saturates), one below it keeps the
//!    time of the smallest measured size (tiles are not filled): both say
//!    `extrapolated`.
//! 2. **a model from the GPU's specs whose shape behaviour is learned across
//!    the measured GPUs**: each measured GPU g gives, at this shape, the
//!    fraction r_g of its own roofline max(F/P_g, bytes/BW_g) that it
//!    achieved; the GPU's time is its roofline ÷ the weighted geometric mean
//!    of those fractions, weighted by how close g's specs are (peak, HBM
//!    bandwidth, SM/CU count, vendor: weight exp(−2·Σ|ln ratio|), vendor
//!    mismatch counting as a factor 2).
//!
//! A collective is priced from measured curves (nccl-tests sweeps): the
//! user's first, then the shipped ones of the GPU, interpolated in log size
//! at a measured GPU count, in log₂ of the count between two measured counts
//! of one system, and beyond the largest by the **scale-out rule**: the
//! small-message latency grows linearly in log₂(nodes) (fitted over the
//! system's measured node counts) and the rest of the time is that of the
//! largest measured count, scaled by the bus factor — the bandwidth of the
//! slowest tier carries over; an NVIDIA all-reduce across nodes plus the cheaper
//! of its ring's added steps and its tree's bandwidth share in NCCL's tuning
//! model. Collectives without a curve of their own use
//! the all-reduce curve at equal bus bytes, and say so.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use tracecast_ingest::collective::Collective;

use crate::catalog::{Catalog, Dtype, Gpu};
use crate::cost::AlphaBeta;
use crate::measured::{AttentionRow, CollectiveRow, Direction, GemmRow, Measurements};

/// Which rule priced an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PriceRule {
    /// The GPU's own measured GEMM table, interpolated in shape.
    GemmTable,
    /// The spec model with shape behaviour learned across measured GPUs.
    GemmSpecModel,
    /// The user's measurement of this very shape on this GPU.
    GemmMeasuredShape,
    /// A format no table or spec model prices (FP32 on CUDA cores): the calibration profile's
    /// fit of the GPU's GEMMs in it, t0 + FLOPs ÷ (η × peak).
    GemmProfileFit,
    /// The GPU's measured attention kernels, interpolated in sequence length.
    AttentionTable,
    /// Another GPU's measured attention kernels (same vendor where one measured any, closest specs):
    /// the matmul share scaled by the peaks, the exponentials by the SFU rates.
    AttentionSpecModel,
    /// A kernel family this GPU has no measurement of, from another GPU that
    /// measured it, × the ratio the families measured on both GPUs show.
    AttentionCarried,
    /// Another GPU of the same silicon (peak, SMs, exponential rate) measured at
    /// the shape, where this GPU's own rows reach it only by extrapolation.
    AttentionSameSilicon,
    /// A measured collective curve at this GPU count, interpolated in size.
    CollectiveCurve,
    /// Between two measured GPU counts of one system.
    CollectiveCounts,
    /// Beyond the measured GPU counts: the scale-out rule.
    CollectiveScaleOut,
    /// Beyond the measured GPU counts, an all-gather or reduce-scatter: NCCL's ring, each of
    /// its n − 1 steps priced as the same step at the largest measured count.
    CollectiveRing,
    /// Below the measured GPU counts: the smallest measured count's curve, its latency kept and
    /// the rest by the collective's bus factor (no bound: NVLS speeds 8 H200s' all-reduce past
    /// what 4 measured).
    CollectiveBelowCounts,
    /// More GPUs in one node than measured (an NVLink domain larger than the measured
    /// curves'): the largest count's curve, its latency kept and the rest by the bus factor.
    CollectiveAboveCounts,
    /// No curve of this GPU: α–β from its catalog link (in a node) or NICs
    /// (across nodes), with the share of them and the latency learned across
    /// the measured GPUs.
    CollectiveLinkSpec,
    /// A calibration profile's α–β fit of the tier (in a node, across nodes) from the user's
    /// own traces; a tier it does not fit by the pricing layer.
    CollectiveProfileFit,
    /// The user's measurement of this collective, size, GPU count and node layout.
    CollectiveMeasured,
}

impl PriceRule {
    /// The stable snake_case name (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            PriceRule::GemmTable => "gemm_table",
            PriceRule::GemmSpecModel => "gemm_spec_model",
            PriceRule::GemmMeasuredShape => "gemm_measured_shape",
            PriceRule::GemmProfileFit => "gemm_profile_fit",
            PriceRule::AttentionTable => "attention_table",
            PriceRule::AttentionSpecModel => "attention_spec_model",
            PriceRule::AttentionCarried => "attention_carried",
            PriceRule::AttentionSameSilicon => "attention_same_silicon",
            PriceRule::CollectiveCurve => "collective_curve",
            PriceRule::CollectiveCounts => "collective_counts",
            PriceRule::CollectiveScaleOut => "collective_scale_out",
            PriceRule::CollectiveRing => "collective_ring",
            PriceRule::CollectiveBelowCounts => "collective_below_counts",
            PriceRule::CollectiveAboveCounts => "collective_above_counts",
            PriceRule::CollectiveLinkSpec => "collective_link_spec",
            PriceRule::CollectiveProfileFit => "collective_profile_fit",
            PriceRule::CollectiveMeasured => "collective_measured",
        }
    }

    /// In words.
    pub fn describe(self) -> &'static str {
        match self {
            PriceRule::GemmTable => "the GPU's measured GEMM table, interpolated in log shape",
            PriceRule::GemmSpecModel => "the GPU's specs, shape behaviour learned across measured GPUs",
            PriceRule::GemmMeasuredShape => "the user's measurement of this shape on this GPU",
            PriceRule::GemmProfileFit => {
                "the calibration profile's fit of this GPU's GEMMs in the format (t0 + FLOPs ÷ (η × peak)), where no measured table or spec model prices it"
            }
            PriceRule::AttentionTable => "the GPU's measured attention kernels, interpolated in sequence length",
            PriceRule::AttentionSpecModel => {
                "the closest measured GPU's attention kernels (of its vendor, where one measured any): matmul share scaled by the peaks, exponentials by the SFU rates"
            }
            PriceRule::AttentionCarried => {
                "a kernel family measured on another GPU of the vendor, × the median ratio of the families measured on both GPUs at this shape (else at the nearest shape both measured)"
            }
            PriceRule::AttentionSameSilicon => {
                "the attention kernels of a GPU of the same silicon measured at this shape (this GPU's own rows are of another, or of a slower family)"
            }
            PriceRule::CollectiveCurve => "a measured collective curve at this GPU count, interpolated in log size",
            PriceRule::CollectiveCounts => "measured curves at the two nearest GPU counts, interpolated in log count",
            PriceRule::CollectiveScaleOut => {
                "scale-out rule: latency growing with log nodes, bandwidth of the largest measured count (NVIDIA across nodes, in NCCL's tuning model: an all-reduce plus the cheaper of its ring's added steps and its tree's bandwidth share; an all-gather or reduce-scatter from the all-reduce's curve plus its ring's added steps)"
            }
            PriceRule::CollectiveRing => {
                "ring beyond the measured GPU counts: an all-gather's or reduce-scatter's n − 1 steps, each as the same step at the largest measured count"
            }
            PriceRule::CollectiveBelowCounts => {
                "fewer GPUs than measured: the smallest measured count's curve, its latency kept and the rest by the bus factor"
            }
            PriceRule::CollectiveAboveCounts => {
                "more GPUs in one node than measured: the largest measured count's curve, its latency kept and the rest by the bus factor"
            }
            PriceRule::CollectiveLinkSpec => {
                "no measured curve of this GPU and node layout: α–β from its catalog link or NICs, share and latency learned across measured GPUs"
            }
            PriceRule::CollectiveProfileFit => {
                "the calibration profile's α–β fit of the link tier from the user's traces (a collective's tier in a node, each GPU's share across nodes; a transfer or an all-to-all's share as it moves); a tier it does not fit by the pricing layer"
            }
            PriceRule::CollectiveMeasured => {
                "a measurement of this collective, size, GPU count and node layout (the user's, else the evidence's)"
            }
        }
    }

    /// The rule's measured relative error (median |error| of its validation,
    /// BENCHMARKS.md "Pricing layer"): the band a projection states.
    pub fn band(self) -> f64 {
        match self {
            PriceRule::GemmTable | PriceRule::GemmMeasuredShape => GEMM_TABLE_BAND,
            PriceRule::GemmSpecModel => GEMM_SPEC_BAND,
            // Nominal: a price states its fit's own RMS residual ([`gemm_by_profile_fit`]).
            PriceRule::GemmProfileFit => GEMM_SPEC_BAND,
            PriceRule::AttentionTable => ATTENTION_TABLE_BAND,
            PriceRule::AttentionSpecModel => ATTENTION_SPEC_BAND,
            PriceRule::AttentionCarried => ATTENTION_CARRIED_BAND,
            PriceRule::AttentionSameSilicon => ATTENTION_TABLE_BAND,
            PriceRule::CollectiveCurve => COLLECTIVE_CURVE_BAND,
            PriceRule::CollectiveCounts
            | PriceRule::CollectiveScaleOut
            | PriceRule::CollectiveBelowCounts
            | PriceRule::CollectiveAboveCounts => COLLECTIVE_SCALE_OUT_BAND,
            PriceRule::CollectiveRing => COLLECTIVE_RING_BAND,
            // The worse of its two regimes; a price states its size's ([`link_spec_band`]).
            PriceRule::CollectiveLinkSpec => COLLECTIVE_LINK_SPEC_SMALL_BAND,
            // The fit reproduces the user's own collectives as a measured curve does; a price
            // states the fit's own 95 % interval where that is wider.
            PriceRule::CollectiveProfileFit => COLLECTIVE_CURVE_BAND,
            // nccl-tests' in-place and out-of-place columns at one size, as a curve's point.
            PriceRule::CollectiveMeasured => COLLECTIVE_CURVE_BAND,
        }
    }
}

/// The table rule's band: XLA's 16-bit tables thinned to every other size
/// predict the left-out sizes at a median |error| of 8.0 % (test
/// `grid_interpolation_predicts_the_sizes_left_out`; at twice the spacing the
/// rule interpolates over).
pub const GEMM_TABLE_BAND: f64 = 0.10;
/// Leave-one-GPU-out on the three XLA tables (`calibrate/tests/pricing.rs`):
/// pooled 16-bit median |error| 14.7 % with the GPU's best-shape measurement,
/// 24.7 % from specs alone.
pub const GEMM_SPEC_BAND: f64 = 0.25;
/// Not validated on held-out attention measurements (too few per GPU): the
/// table rule's band; the FA charts' values were read by eye (±5 TFLOP/s).
pub const ATTENTION_TABLE_BAND: f64 = 0.10;
/// Not validated (the measured attention GPUs are A100, H100, H200, MI300X);
/// the GEMM spec model's band.
pub const ATTENTION_SPEC_BAND: f64 = GEMM_SPEC_BAND;
/// Each family measured on both A100 and H100 predicted from the other GPU's
/// measurement of it × the median ratio of the other common families, every
/// shape both ways (`calibrate/tests/pricing.rs`,
/// `a_family_carried_by_its_siblings_beats_the_peak_ratio`): median |error|
/// 5.9 % over 136 shapes (the peak ratio 67 %); the table rule's band.
pub const ATTENTION_CARRIED_BAND: f64 = ATTENTION_TABLE_BAND;
/// nccl-tests' in-place and out-of-place columns differ by a few per cent at one size.
pub const COLLECTIVE_CURVE_BAND: f64 = 0.05;
/// Each sweep's largest GPU count from its smaller ones: median |error| over
/// all sizes 0.4–6.3 % (`calibrate/tests/pricing.rs`).
pub const COLLECTIVE_SCALE_OUT_BAND: f64 = 0.10;
/// How much the scale-out rule's band widens for each doubling of the GPU count beyond twice
/// the largest measured one. From ALCF Polaris' public nccl-tests (`fixtures/polaris/`, NCCL
/// 2.21.5): the all-reduce over 1024 A100s priced from the 8- and 32-GPU runs (32×) is off by a
/// median |error| over its 29 sizes of 29.8 % (setup 4) and 17.1 % (setup 5), the middle 23.5 %
/// = 10 % + 4 doublings × 3.4 %. Held out: over 2160 GPUs (67.5×) the band is 27.3 % where the
/// two setups measured 23.9 % (NCCL 2.21.5) and 37.6 % (2.18); test
/// `the_scale_out_band_is_the_error_measured_that_far_beyond_the_counts`.
pub const COLLECTIVE_SCALE_OUT_BAND_PER_DOUBLING: f64 = 0.034;

/// The band of a collective priced over `asked` GPUs from a curve measured at `measured`, beyond
/// the largest measured count or below the smallest: [`COLLECTIVE_SCALE_OUT_BAND`] up to twice
/// (or half) it (the sweeps' largest counts from their halves), wider by
/// [`COLLECTIVE_SCALE_OUT_BAND_PER_DOUBLING`] for each doubling further.
fn band_beyond_counts(measured: u32, asked: u32) -> f64 {
    let (a, b) = (f64::from(measured.max(1)), f64::from(asked.max(1)));
    let reach = a.max(b) / a.min(b);
    COLLECTIVE_SCALE_OUT_BAND + COLLECTIVE_SCALE_OUT_BAND_PER_DOUBLING * (reach / 2.0).log2().max(0.0)
}

/// The all-gather's ring beyond the measured counts on ALCF Polaris' public nccl-tests (from
/// the 8- and 32-GPU runs to 512, 1024 and 2160 GPUs, three setups, `tests/hw_cost.rs`): median
/// |error| 6.8 % over the 82 sizes measured there (setup 4 alone 30 %: its messages of 16 KiB
/// to 4 MiB took 8 µs a step at 1024 GPUs where 32 took 2; BENCHMARKS.md).
pub const COLLECTIVE_RING_BAND: f64 = 0.068;

/// NCCL's tree all-reduce reaches 0.92 of the bus bandwidth its ring reaches over the same
/// channels: NCCL's own tuning model (`src/graph/tuning.cc`, the tree all-reduce's
/// `busBw * .92`), which its tuner weighs against the ring's 2(n − 1) steps.
const TREE_BUS_SHARE: f64 = 0.92;

/// The latency NCCL's tuning model charges a ring `collective` over `gpus`, `gpus_per_node` to
/// a node, µs, with the default constants it ships for the Simple protocol that large messages
/// use (`src/graph/tuning.cc`: a base of 8.4 µs, a step over NVLink 3.4 µs, over the network
/// 14 µs): an all-reduce's 2(n − 1) steps, 2(whole nodes − 1) of them across nodes, × 1.4
/// across nodes (`ncclTopoGetAlgoTime`'s "plateau effect of ring" on Ampere and later, all-reduce
/// only); an all-gather's or reduce-scatter's n − 1 steps, whole nodes − 1 across. What the
/// tuner weighs, not what the steps cost; netOverhead (1–2 µs a step by host CPU) and the
/// graph's extra network latency are left out.
fn nccl_ring_latency_us(collective: Collective, gpus: u32, gpus_per_node: u32) -> f64 {
    let gpus = gpus.max(1);
    let nodes = gpus.div_ceil(gpus_per_node.max(1));
    let all_reduce = collective == Collective::AllReduce;
    let per = if all_reduce { 2.0 } else { 1.0 };
    let (steps, across) = (per * f64::from(gpus - 1), per * f64::from(nodes - 1));
    let plateau = if nodes > 1 && all_reduce { 1.4 } else { 1.0 };
    plateau * (8.4 + (steps - across) * 3.4 + across * 14.0)
}

/// What a ring over `gpus` adds to one over `largest` in NCCL's tuning model ([`nccl_ring_latency_us`]), µs.
fn nccl_ring_steps_beyond_us(collective: Collective, gpus: u32, largest: u32, gpus_per_node: u32) -> f64 {
    (nccl_ring_latency_us(collective, gpus, gpus_per_node) - nccl_ring_latency_us(collective, largest, gpus_per_node)).max(0.0)
}

/// Leave-one-GPU-out of the link rule (`calibrate/tests/pricing.rs`
/// `link_spec_predicts_each_gpu_from_the_others`): each measured GPU's
/// 8-GPU all-reduce from the other GPUs' curves, median |error| 15.7 % at
/// ≥ 64 MiB (this band, rounded up) and 22.4 % at ≤ 8 KiB ([`COLLECTIVE_LINK_SPEC_SMALL_BAND`],
/// latency differs most between stacks); a price states the band of its size,
/// in log size between the two ([`link_spec_band`]).
pub const COLLECTIVE_LINK_SPEC_BAND: f64 = 0.16;
/// The link rule's band at ≤ 8 KiB (see [`COLLECTIVE_LINK_SPEC_BAND`]).
pub const COLLECTIVE_LINK_SPEC_SMALL_BAND: f64 = 0.23;

/// A profile's α–β fit, in words.
fn profile_fit_words(fit: &AlphaBeta) -> String {
    format!("the profile's all-reduce fit (α {:.1} µs, B {:.1} GB/s)", fit.alpha_us, fit.busbw_gbps)
}

/// A calibration profile's α–β fit of one tier of links (in a node, across nodes) as the
/// pricing layer prices by it: the fit, its relative 95 % band, and what it was fitted over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TierFit {
    /// The fit.
    pub fit: AlphaBeta,
    /// Its relative 95 % band.
    pub band: f64,
    /// The all-reduces it was fitted on; `None` where unknown (a profile written before it was
    /// kept, a link the user gave): then no price by it is said to be extrapolated.
    pub fitted_over: Option<FittedOver>,
}

/// The all-reduces a link fit was fitted on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FittedOver {
    /// The least and most bus bytes (k·S).
    pub bus_bytes: [f64; 2],
    /// Ranks in their group, where known.
    pub ranks: Option<i64>,
}

impl FittedOver {
    /// What the fit was fitted on, in words (a projection's note on the tier it prices).
    pub fn words(&self) -> String {
        let [least, most] = self.bus_bytes;
        let ranks = self.ranks.map_or(String::new(), |n| format!(" over {n} ranks"));
        format!("fitted on all-reduces of {least:.0}–{most:.0} bus bytes{ranks}; a collective outside them is extrapolated")
    }
}

impl TierFit {
    /// A model's link (one the user gave, or a profile's fit its cluster holds): its band 0,
    /// its range unknown.
    pub fn given(fit: AlphaBeta) -> TierFit {
        TierFit { fit, band: 0.0, fitted_over: None }
    }

    /// Why `bytes` moved at bus factor `k` over `ranks` ranks lie outside what the fit was
    /// fitted on (other sizes, another group size); `None` inside it or where that is unknown.
    /// Sizes compare as bus bytes (k·S, what the fit's time grows with), said as this operation's.
    fn outside(&self, bytes: f64, k: f64, ranks: Option<i64>) -> Option<String> {
        let over = self.fitted_over?;
        let [least, most] = over.bus_bytes;
        let mut why = Vec::new();
        if bytes * k < least * (1.0 - 1e-9) || bytes * k > most * (1.0 + 1e-9) {
            why.push(format!(
                "{bytes:.0} bytes, outside the fitted all-reduces' {:.0}–{:.0} (at this operation's bus factor)",
                least / k,
                most / k
            ));
        }
        if let (Some(asked), Some(fitted)) = (ranks, over.ranks)
            && asked != fitted
        {
            why.push(format!("{asked} ranks, fitted over {fitted}"));
        }
        (!why.is_empty()).then(|| format!("extrapolated: {}", why.join(", ")))
    }
}

/// A GEMM of a format no table or spec model prices, by `profile`'s fit of `gpu`'s GEMMs in
/// that format ([`PriceRule::GemmProfileFit`]): its band the fit's RMS relative residual,
/// extrapolated outside the FLOPs it was fitted over.
fn gemm_by_profile_fit(fit: &crate::profile::KernelFit, gpu: &Gpu, s: &GemmShape) -> Price {
    let flops = s.flops();
    let [low, high] = fit.work_range;
    let dtype = s.dtype.as_str();
    let basis = format!(
        "the profile's fit of {} traced {dtype} GEMMs on {}: η {:.3} of the {} peak ({:.1} TFLOP/s), t0 {:.1} µs, R² {:.2}, RMS residual {:.0} % (the band, at least the spec model's); no measured {dtype} table or spec model prices this format",
        fit.samples,
        gpu.id,
        fit.efficiency,
        fit.peak_of,
        fit.peak_per_s() / 1e12,
        fit.overhead_us,
        fit.r2,
        fit.residual_spread * 100.0
    );
    // Never tighter than the spec model's band: an in-sample residual says little of other shapes.
    Price::new(
        fit.time_us(flops),
        PriceRule::GemmProfileFit,
        !(low..=high).contains(&flops),
        basis,
        fit.residual_spread.max(GEMM_SPEC_BAND),
    )
}

/// `profile`'s fit of its GPU's GEMMs in `dtype` ([`crate::profile::Profile::kernel_fit`]) against
/// that format's own peak: FP32 GEMMs fitted against the TF32 peak ran on tensor cores (A100's
/// corpus traces), which `--dtype tf32` prices; they would price FP32 on CUDA cores 3.4× past its peak.
fn profile_gemm_fit(profile: &crate::profile::Profile, dtype: Dtype) -> Option<&crate::profile::KernelFit> {
    profile.kernel_fit(crate::work::KernelClass::Gemm, Some(dtype)).filter(|f| f.peak_of == dtype.as_str())
}

/// The link rule's band for a message of `bytes`: its measured error at ≤ 8 KiB and ≥ 64 MiB,
/// in log size between.
fn link_spec_band(bytes: f64) -> f64 {
    let (small, large) = (8192f64.ln(), 67108864f64.ln());
    let t = ((bytes.max(1.0).ln() - small) / (large - small)).clamp(0.0, 1.0);
    COLLECTIVE_LINK_SPEC_SMALL_BAND + t * (COLLECTIVE_LINK_SPEC_BAND - COLLECTIVE_LINK_SPEC_SMALL_BAND)
}

/// Measured shapes a GEMM table needs to price by shape (a sweep, not a best-shape search).
pub const MIN_TABLE_SHAPES: usize = 8;

/// A price.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Price {
    /// Time, µs.
    pub time_us: f64,
    /// The rule.
    pub rule: PriceRule,
    /// Whether the operation lies outside what was measured (shape, size, GPU count).
    pub extrapolated: bool,
    /// What priced it, in words (table, sources, GPUs learned from, substitutions).
    pub basis: String,
    /// Relative band of the rule (its measured error).
    pub band: f64,
    /// Whether a GEMM's price ends at a bound of its GPU, slower than its tables or a correction
    /// of them say: held to the rate it sustains under load (no correction after it), or capped
    /// at the fastest it was measured ([`Price::at_a_bound`]). Set where the bound is applied,
    /// not read back from the basis, which can quote another price's words.
    #[serde(skip)]
    bound: bool,
    /// Whether the user's measurements of the GPU priced it ([`Price::by_the_user`]), set once
    /// where a GEMM's price is made ([`Pricing::gemm`]).
    #[serde(skip)]
    by_user: bool,
}

impl Price {
    /// A price by `rule`, at no bound of its GPU and of no measurement of the user's.
    fn new(time_us: f64, rule: PriceRule, extrapolated: bool, basis: String, band: f64) -> Price {
        Price { time_us, rule, extrapolated, basis, band, bound: false, by_user: false }
    }

    /// Whether a GEMM's price ends at a bound of its GPU (the sustained rate, the fastest measured).
    pub fn at_a_bound(&self) -> bool {
        self.bound
    }

    /// Whether the user's own measurements of the GPU priced this GEMM (a shape, a sweep, a
    /// table): of their stack already, so no trace correction applies.
    pub fn by_the_user(&self) -> bool {
        self.by_user
    }
}

/// A GEMM's shape and input type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GemmShape {
    /// Independent GEMMs.
    pub batch: f64,
    /// Output rows.
    pub m: f64,
    /// Output columns.
    pub n: f64,
    /// Reduction dimension.
    pub k: f64,
    /// Input type.
    pub dtype: Dtype,
}

impl GemmShape {
    /// The shape of a traced op, when it is a GEMM in a dtype the tables price
    /// (16-bit, FP8, TF32; plain FP32 GEMMs run on other units than the tables measured).
    pub fn of_op(shape: Option<crate::work::OpShape>, dtype: Option<Dtype>) -> Option<GemmShape> {
        let Some(crate::work::OpShape::Gemm { batch, m, n, k }) = shape else { return None };
        let dtype = dtype.filter(|d| matches!(d, Dtype::Bf16 | Dtype::Fp16 | Dtype::Fp8 | Dtype::Tf32))?;
        Some(GemmShape { batch, m, n, k, dtype })
    }

    /// 2·batch·m·n·k.
    pub fn flops(&self) -> f64 {
        2.0 * self.batch * self.m * self.n * self.k
    }

    /// Whether a row of its k × n operand, or of its m × k one, spans 16-byte units and is not a
    /// whole number of them: the leading dimensions of row-major operands (attention's `Q·Kᵀ`
    /// over 3137 tokens writes rows of 3137 elements). Hopper's tensor-memory accelerator needs
    /// 16-byte-aligned strides, and cuBLAS falls back to other kernels without it (the corpus's
    /// H100 traces run such GEMMs at 1.9–2.5× XLA's table, MI300X's at 0.5–0.8×). Rows shorter
    /// than 16 bytes (a matrix-vector product's one column) are another kernel's business.
    /// Known from the shape alone: a transposed operand's stride is its other dimension, which
    /// this does not see; sizes that are not whole numbers (a mean, as tokens per expert) are not
    /// strides and never count.
    pub fn misaligned(&self) -> bool {
        let per_16_bytes = 16.0 / dtype_bytes(self.dtype);
        [self.k, self.n].iter().any(|&d| d.fract() == 0.0 && d > per_16_bytes && (d / per_16_bytes).fract() != 0.0)
    }

    /// Operands and output once, bytes.
    pub fn bytes(&self) -> f64 {
        self.batch * (self.m * self.k + self.k * self.n + self.m * self.n) * dtype_bytes(self.dtype)
    }
}

fn dtype_bytes(d: Dtype) -> f64 {
    match d {
        Dtype::Fp64 => 8.0,
        Dtype::Fp32 | Dtype::Tf32 => 4.0,
        Dtype::Bf16 | Dtype::Fp16 => 2.0,
        Dtype::Fp8 | Dtype::Int8 => 1.0,
    }
}

/// The dtype class the tables are kept by: 16-bit types share one.
pub(crate) fn table_dtype(d: Dtype) -> Dtype {
    if d == Dtype::Fp16 { Dtype::Bf16 } else { d }
}

/// Which price of the same silicon [`Pricing::attention_twin`] takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Twin {
    /// Measured at the shape, not extrapolated.
    Measured,
    /// Extrapolated too.
    Any,
    /// Extrapolated too, from rows of the shape's mask, head dimension and direction.
    CoveringMask,
}

/// An attention kernel's shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionShape {
    /// Batch.
    pub batch: f64,
    /// Query heads.
    pub heads: f64,
    /// Sequence length.
    pub seq: f64,
    /// Head dimension.
    pub head_dim: f64,
    /// Causal mask.
    pub causal: bool,
    /// Forward plus backward (else forward only).
    pub backward: bool,
}

/// Query rows per tile of the measured attention kernels (FlashAttention 2 and 3
/// at head dimensions up to 128): the unit that spreads over the SMs.
const ATTENTION_QUERY_TILE: f64 = 128.0;

impl AttentionShape {
    /// FLOPs as the attention benchmarks count them: forward 4·b·h·s²·d
    /// (half when causal); forward plus backward 3.5× that.
    pub fn flops(&self) -> f64 {
        let fwd = 4.0 * self.batch * self.heads * self.seq * self.seq * self.head_dim * if self.causal { 0.5 } else { 1.0 };
        if self.backward { 3.5 * fwd } else { fwd }
    }

    /// Softmax exponentials: one per score of the forward (half the scores
    /// when causal); the backward recomputes the probabilities, one more each.
    pub fn exponentials(&self) -> f64 {
        let fwd = self.batch * self.heads * self.seq * self.seq * if self.causal { 0.5 } else { 1.0 };
        if self.backward { 2.0 * fwd } else { fwd }
    }
}

/// (measurement id, dtype class, the user's, source id): one GEMM table.
type TableKey = (Arc<str>, Dtype, bool, Arc<str>);

/// What a kernel family's code gained from one GPU generation to the next for
/// their peaks (see [`Pricing::family_elasticity`]).
#[derive(Debug, Clone)]
struct CodeElasticity {
    /// d ln(1/time) / d ln(16-bit peak) of the matmul share.
    elasticity: f64,
    /// Where it was measured, in words (an open parenthesis the basis closes).
    how: String,
}

/// How a carried attention price scaled with the peaks, in words; `written_for`: the GPU of a
/// higher peak the fastest measured family (none named) stands for a kernel written for.
fn scaled_by(peaks: f64, code: Option<&CodeElasticity>, written_for: Option<&str>) -> String {
    match code {
        None => match written_for {
            // Said: naming the same family (`--kernel fa2`) prices it by what its code gained instead.
            Some(gpu) => format!(
                "the two 16-bit peaks (the fastest family measured, standing for a kernel written for {gpu}; a family named is scaled by what its code gained a generation before)"
            ),
            None => "the two 16-bit peaks".into(),
        },
        Some(c) => format!("the two 16-bit peaks' {peaks:.3} to the power {:.2}: {})", c.elasticity, c.how),
    }
}

/// (TFLOP/s, extrapolated, kernel family, sources) of the fastest attention family.
type Fastest = (f64, bool, Arc<str>, Vec<Arc<str>>);

/// (source id, measurement id, GPUs per node): one measuring system of collectives.
type SystemKey = (Arc<str>, Arc<str>, u32);

/// One measured GEMM table: a (measurement id, dtype class, user or shipped) group.
#[derive(Debug, Clone)]
struct GemmTable {
    gpu: Arc<str>,
    user: bool,
    sources: Vec<Arc<str>>,
    /// (log₂ batch, m, n, k), ln time µs.
    points: Vec<([f64; 4], f64)>,
    grid: Option<Grid>,
}

/// A complete grid: sorted axis values (log₂) and ln time per node, row-major.
#[derive(Debug, Clone)]
struct Grid {
    axes: [Vec<f64>; 4],
    values: Vec<f64>,
}

impl Grid {
    fn of(points: &[([f64; 4], f64)]) -> Option<Grid> {
        let mut axes: [Vec<f64>; 4] = Default::default();
        for (d, axis) in axes.iter_mut().enumerate() {
            let mut v: Vec<f64> = points.iter().map(|p| p.0[d]).collect();
            v.sort_by(f64::total_cmp);
            v.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
            *axis = v;
        }
        let size: usize = axes.iter().map(Vec::len).product();
        if size != points.len() || axes.iter().any(|a| a.len() < 2) {
            return None;
        }
        let mut values = vec![f64::NAN; size];
        for (x, v) in points {
            let idx = Self::index(&axes, |d| axes[d].iter().position(|a| (a - x[d]).abs() < 1e-9))?;
            *values.get_mut(idx)? = *v;
        }
        values.iter().all(|v| v.is_finite()).then_some(Grid { axes, values })
    }

    fn index(axes: &[Vec<f64>; 4], mut at: impl FnMut(usize) -> Option<usize>) -> Option<usize> {
        let mut idx = 0;
        for (d, axis) in axes.iter().enumerate() {
            idx = idx * axis.len() + at(d)?;
        }
        Some(idx)
    }

    /// ln time at `x` (log₂ coordinates), and whether it extrapolated.
    fn at(&self, x: [f64; 4]) -> Option<(f64, bool)> {
        let mut extrapolated = false;
        let mut beyond = 0.0;
        let mut cell = [(0usize, 0.0f64); 4];
        for d in 0..4 {
            let axis = &self.axes[d];
            let (lo, hi) = (*axis.first()?, *axis.last()?);
            let mut v = x[d];
            if v < lo - 1e-9 {
                extrapolated = true;
                v = lo;
            } else if v > hi + 1e-9 {
                extrapolated = true;
                // Above the grid the time grows with the work (log₂ → ln).
                beyond += (v - hi) * std::f64::consts::LN_2;
                v = hi;
            }
            let i = axis.iter().rposition(|a| *a <= v + 1e-12).unwrap_or(0).min(axis.len() - 2);
            let (a, b) = (axis[i], axis[i + 1]);
            cell[d] = (i, ((v - a) / (b - a)).clamp(0.0, 1.0));
        }
        let mut sum = 0.0;
        for corner in 0..16usize {
            let mut w = 1.0;
            let idx = Self::index(&self.axes, |d| {
                let up = (corner >> d) & 1 == 1;
                w *= if up { cell[d].1 } else { 1.0 - cell[d].1 };
                Some(cell[d].0 + usize::from(up))
            })?;
            if w > 0.0 {
                sum += w * self.values.get(idx)?;
            }
        }
        Some((sum + beyond, extrapolated))
    }
}

impl GemmTable {
    /// Its sources, as the basis names them.
    fn sources_text(&self) -> String {
        self.sources.iter().map(|s| &**s).collect::<Vec<_>>().join(", ")
    }

    /// The table's measured ÷ `priced` times at its shapes, averaged in log with the inverse square
    /// of each shape's distance from `shape` in log shape as its weight: how a user's stack runs
    /// against a rule, said most by its nearest shapes (one mean over every shape had put a shape
    /// between two measured ones above both their rates when a third, far off, ran faster). The
    /// factor and the shapes it was taken over; `None` where `priced` prices none of them.
    fn ratio_near(&self, shape: &GemmShape, priced: impl Fn(&GemmShape) -> Option<f64>) -> Option<(f64, usize)> {
        // As the points are placed (a dimension below 1 at 1: a 0 had priced NaN).
        let query = [shape.batch, shape.m, shape.n, shape.k].map(|d| d.max(1.0).log2());
        let (mut weights, mut weighted, mut n) = (0.0, 0.0, 0);
        for (x, ln_t) in &self.points {
            let at = GemmShape { batch: x[0].exp2(), m: x[1].exp2(), n: x[2].exp2(), k: x[3].exp2(), dtype: shape.dtype };
            let Some(time_us) = priced(&at) else { continue };
            let distance2: f64 = x.iter().zip(query).map(|(a, b)| (a - b).powi(2)).sum();
            let w = 1.0 / distance2.max(1e-12);
            (weights, weighted, n) = (weights + w, weighted + w * (ln_t.exp() / time_us).ln(), n + 1);
        }
        (n > 0).then(|| ((weighted / weights).exp(), n))
    }

    /// Whether `shape` is smaller in m, n or k than every shape a scattered
    /// table measured: its rates (of larger shapes, whose tiles
    /// are full) would make such a GEMM arbitrarily fast (A100's 8 shapes of
    /// at least 1024 rows priced 64³ at 0.00 µs). A grid keeps its smallest
    /// size's time below its range instead.
    fn scattered_below(&self, shape: &GemmShape) -> bool {
        if self.grid.is_some() {
            return false;
        }
        let x = [shape.m.max(1.0).log2(), shape.n.max(1.0).log2(), shape.k.max(1.0).log2()];
        (0..3).any(|d| x[d] < self.least(d + 1) - 1e-9)
    }

    /// The table's measurement of `shape` itself (log₂ coordinates, ln time), if it has one.
    fn point_at(&self, shape: &GemmShape) -> Option<&([f64; 4], f64)> {
        let x = [shape.batch.max(1.0).log2(), shape.m.max(1.0).log2(), shape.n.max(1.0).log2(), shape.k.max(1.0).log2()];
        self.points.iter().find(|(p, _)| (0..4).all(|d| (p[d] - x[d]).abs() < 1e-9))
    }

    /// The least measured value of `axis` (0 batch, 1 m, 2 n, 3 k), log2.
    fn least(&self, axis: usize) -> f64 {
        self.points.iter().map(|p| p.0[axis]).fold(f64::INFINITY, f64::min)
    }

    /// ln time at `shape`, whether extrapolated.
    fn at(&self, shape: &GemmShape) -> Option<(f64, bool)> {
        let mut x = [shape.batch.max(1.0).log2(), shape.m.max(1.0).log2(), shape.n.max(1.0).log2(), shape.k.max(1.0).log2()];
        if let Some(g) = &self.grid {
            // More independent GEMMs than measured run like one with more rows
            // (small matrices leave tiles unfilled; the batch fills them): the
            // excess batch folds into m, never into work at m's smallest size.
            let max_batch = g.axes[0].last().copied().unwrap_or(0.0);
            if x[0] > max_batch {
                x[1] += x[0] - max_batch;
                x[0] = max_batch;
                return g.at(x).map(|(t, _)| (t, true));
            }
            return g.at(x);
        }
        // Scattered: inverse-distance weighting of the achieved rate (ln FLOP/µs) over the four nearest shapes.
        // A GEMM runs no slower than a measured one it holds in every dimension, and no faster than
        // one that holds it (tiles fill as a dimension grows): the weighting alone had priced
        // 4096×2048×2048 below both 2048³ and 4096³ (H100 FP8: 859 TFLOP/s between 1011 and 1217),
        // and 1024×256×1024 at 1.6× the rate of 1024³. One pass, no allocation (a search prices
        // thousands): the four nearest kept in order, (d², ln rate).
        let ln_flops = shape.flops().ln();
        let mut near = [(f64::INFINITY, 0.0f64); 4];
        let (mut floor, mut ceiling) = (f64::NEG_INFINITY, f64::INFINITY);
        for (p, ln_t) in &self.points {
            // ln(2·b·m·n·k) − ln t, the coordinates being log₂.
            let rate = std::f64::consts::LN_2 * (1.0 + p.iter().sum::<f64>()) - ln_t;
            let d2: f64 = (0..4).map(|d| (p[d] - x[d]).powi(2)).sum();
            if let Some(i) = near.iter().position(|n| d2 < n.0) {
                near.copy_within(i..3, i + 1);
                near[i] = (d2, rate);
            }
            if (0..4).all(|d| p[d] <= x[d] + 1e-9) {
                floor = floor.max(rate);
            }
            if (0..4).all(|d| p[d] >= x[d] - 1e-9) {
                ceiling = ceiling.min(rate);
            }
        }
        let nearest = near[0].0;
        if !nearest.is_finite() {
            return None;
        }
        if nearest < 1e-12 {
            return Some((ln_flops - near[0].1, false));
        }
        let (num, den) = near.iter().filter(|n| n.0.is_finite()).fold((0.0, 0.0), |(n, d), (d2, rate)| (n + rate / d2, d + 1.0 / d2));
        let mut ln_rate = num / den;
        if floor <= ceiling {
            ln_rate = ln_rate.clamp(floor, ceiling);
        }
        // Farther than a factor 2 in some dimension from every measured shape.
        Some((ln_flops - ln_rate, nearest > 1.0 + 1e-9))
    }
}

/// The pricing layer over a catalog and a measured base.
#[derive(Debug, Clone)]
pub struct Pricing {
    /// The catalog (specs of every GPU). Fixed once pricing starts: prices made are kept
    /// (build a new layer for another catalog).
    pub catalog: Catalog,
    /// The measured base (with the GEMM tables derived from it, kept on it).
    pub measurements: Arc<Measurements>,
    link_shares: std::sync::OnceLock<LinkShares>,
    attention_prices: KeptPrices<AttentionKey, Option<AttentionParts>>,
    gemm_prices: KeptPrices<GemmKey>,
    collective_prices: KeptPrices<CollectiveKey>,
    /// A send/recv across nodes by its size and the network given (a pipeline's transfers).
    transfer_prices: KeptPrices<(u64, Option<u64>)>,
    hbm_rates: HbmRates,
    typical_fractions: TypicalFractions,
}

/// A GEMM's shape as bits: batch, m, n, k and its input type.
type GemmKey = ([u64; 4], Dtype);

/// A collective query as bits: which, size, GPUs, GPUs per node, the network given.
type CollectiveKey = (Collective, u64, u32, u32, Option<u64>);

/// GPUs whose prices a pricing layer keeps, and prices kept per GPU; beyond, it prices afresh.
const GPUS_KEPT: usize = 16;
const PRICES_KEPT_PER_GPU: usize = 16384;

/// GEMM, collective or attention prices made so far, per GPU: a search prices the same few
/// shapes for each of thousands of plans, and making a price writes its basis in words (half of
/// `search`'s time had been formatting bases nobody read; the carried attention rule reads every
/// peer GPU's rows for each). The whole GPU is compared, not its id: a variant of a catalog GPU
/// (other HBM) keeps its id and has other prices.
#[derive(Debug)]
struct KeptPrices<K, V = Option<Price>>(std::sync::Mutex<Vec<(Gpu, HashMap<K, V>)>>);

impl<K, V> Default for KeptPrices<K, V> {
    fn default() -> KeptPrices<K, V> {
        KeptPrices(std::sync::Mutex::new(Vec::new()))
    }
}

/// A copy of a pricing layer starts with no prices made.
impl<K, V> Clone for KeptPrices<K, V> {
    fn clone(&self) -> KeptPrices<K, V> {
        KeptPrices::default()
    }
}

impl<K: std::hash::Hash + Eq, V: Clone> KeptPrices<K, V> {
    /// The price kept for `gpu` and `key`, else `price()`, kept while there is room.
    fn get_or_price(&self, gpu: &Gpu, key: K, price: impl FnOnce() -> V) -> V {
        // A poisoned lock only means another thread panicked while pricing: price afresh.
        if let Ok(kept) = self.0.lock()
            && let Some(priced) = kept.iter().find(|(g, _)| g == gpu).and_then(|(_, prices)| prices.get(&key))
        {
            return priced.clone();
        }
        // Priced outside the lock: a price may ask for others (a collective's tiers).
        let priced = price();
        if let Ok(mut kept) = self.0.lock() {
            let at = match kept.iter().position(|(g, _)| g == gpu) {
                Some(at) => Some(at),
                None if kept.len() < GPUS_KEPT => {
                    kept.push((gpu.clone(), HashMap::new()));
                    Some(kept.len() - 1)
                }
                None => None,
            };
            if let Some(at) = at
                && kept[at].1.len() < PRICES_KEPT_PER_GPU
            {
                kept[at].1.insert(key, priced.clone());
            }
        }
        priced
    }
}

/// [`Pricing::typical_best_fraction`] once worked out per GPU, dtype and left-out
/// measurements: every GEMM price of a GPU never measured reads it (a V100 search had taken
/// 1.4× its time scanning the catalog for each).
#[derive(Debug, Default)]
struct TypicalFractions(std::sync::Mutex<Vec<((String, Dtype, Vec<String>), Option<(f64, usize)>)>>);

impl Clone for TypicalFractions {
    fn clone(&self) -> TypicalFractions {
        TypicalFractions::default()
    }
}

/// Each GPU's measured HBM rate once looked up ([`Pricing::hbm_bytes_per_s`]), by its id and
/// datasheet bandwidth (a variant keeps its id): a search's GEMM prices each check it.
#[derive(Debug, Default)]
struct HbmRates(std::sync::Mutex<Vec<(String, u64, (f64, Arc<str>))>>);

impl Clone for HbmRates {
    fn clone(&self) -> HbmRates {
        HbmRates::default()
    }
}

/// An attention's price in its parts: the work's own time, the kernel family that
/// priced it and the GPU's shortest kernel, which the price never goes under.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionParts {
    /// The work's own time, without the floor: what a ratio of two GPUs' prices
    /// scales, or a model scales to its share of the shape, before flooring.
    pub work: Price,
    /// The kernel family (`fa2`, `fa3`, …).
    pub family: Arc<str>,
    /// The GPU's shortest kernel, µs ([`Pricing::shortest_kernel_us`]).
    pub floor_us: Option<f64>,
}

impl AttentionParts {
    /// The price: the work's, raised to the floor where it is under it.
    pub fn priced(&self) -> Price {
        floored(self.work.clone(), self.floor_us)
    }
}

/// `price` raised to the GPU's shortest kernel `floor` where it is under it, said in its basis.
fn floored(mut price: Price, floor: Option<f64>) -> Price {
    if let Some(floor) = floor
        && price.time_us < floor
    {
        price.basis.push_str(&format!("; raised to {floor:.2} µs, the shortest kernel of this GPU (its GEMM pricing's 1×1×1)"));
        price.time_us = floor;
    }
    price
}

/// An attention's shape as bits (batch, heads, sequence, head dimension), its mask and
/// direction, the family asked for and whether the user named it ([`KeptPrices`] per GPU).
type AttentionKey = ([u64; 4], bool, bool, Option<Arc<str>>, bool);

fn attention_key(s: &AttentionShape, kernel: Option<&str>, named: bool) -> AttentionKey {
    let AttentionShape { batch, heads, seq, head_dim, causal, backward } = *s;
    ([batch, heads, seq, head_dim].map(f64::to_bits), causal, backward, kernel.map(Arc::from), named)
}

impl Pricing {
    /// The pricing layer of `catalog` and `measurements`.
    pub fn new(catalog: Catalog, measurements: Arc<Measurements>) -> Pricing {
        Pricing {
            catalog,
            measurements,
            link_shares: std::sync::OnceLock::new(),
            attention_prices: KeptPrices::default(),
            gemm_prices: KeptPrices::default(),
            collective_prices: KeptPrices::default(),
            transfer_prices: KeptPrices::default(),
            hbm_rates: HbmRates::default(),
            typical_fractions: TypicalFractions::default(),
        }
    }

    /// The base's GEMM tables and rates, built on first use and kept on the
    /// base: every pricing layer over it shares them (the analytical model
    /// makes a cluster, and so a pricing layer, per projected run).
    fn gemms(&self) -> &Gemms {
        self.measurements
            .gemm_index
            .0
            .get_or_init(|| Gemms { tables: gemm_tables(&self.measurements), rates: GemmRates::of(&self.measurements) })
    }

    /// The user's measurement rows that cannot be: a GPU the catalog does not
    /// know (the row would price nothing, silently), a GEMM above its dtype's
    /// peak, a collective whose bus bandwidth is over twice the GPU's link
    /// (in-switch reduction reaches ~1.1×). One message per such row, naming
    /// its file and line.
    pub fn impossible_user_rows(&self) -> Vec<String> {
        let m = &self.measurements;
        let mut out = Vec::new();
        let mut say =
            |from: &crate::measured::Provenance, message: String| out.push(format!("{}: line {}: {message}", from.file, from.line));
        let unknown = |id: &str| format!("GPU {id:?} is not in the catalog (`hw list`; `--hw FILE` adds one)");
        for r in m.gemm.iter().chain(&m.gemm_sustained).filter(|r| m.is_user(&r.from)) {
            let Some(g) = self.gpu_of_measurement_id(&r.gpu) else {
                say(&r.from, unknown(&r.gpu));
                continue;
            };
            let flops = GemmShape { batch: r.batch, m: r.m, n: r.n, k: r.k, dtype: r.dtype }.flops();
            if let Some(p) = peak(g, r.dtype)
                && flops / (r.time_us * 1e-6) > p * 1.02
            {
                let tflops = flops / (r.time_us * 1e6);
                // A time of 1e-300 µs is a rate of 300 digits: said in scientific notation beyond a million.
                let rate = if tflops < 1e6 { format!("{tflops:.0}") } else { format!("{tflops:.3e}") };
                say(
                    &r.from,
                    format!("{rate} TFLOP/s (time_us {}) is above {}'s {} peak of {:.0}", r.time_us, g.id, r.dtype.as_str(), p / 1e12),
                );
            }
        }
        for r in m.attention.iter().filter(|r| m.is_user(&r.from)) {
            let Some(g) = self.gpu_of_measurement_id(&r.gpu) else {
                say(&r.from, unknown(&r.gpu));
                continue;
            };
            // The row's rate as its source counts FLOPs, against the 16-bit peak (attention runs in 16 bits).
            if let Some(p) = peak(g, Dtype::Bf16)
                && r.tflops * 1e12 > p * 1.02
            {
                say(&r.from, format!("{:.0} TFLOP/s of attention is above {}'s 16-bit peak of {:.0}", r.tflops, g.id, p / 1e12));
            }
        }
        for r in m.memory.iter().filter(|r| m.is_user(&r.from)) {
            let Some(g) = self.gpu_of_measurement_id(&r.gpu) else {
                say(&r.from, unknown(&r.gpu));
                continue;
            };
            // Every metric (STREAM, host and peer copies) is bounded by the HBM it reads or writes.
            if g.hbm_gbps > 0.0 && r.bandwidth_gbps > g.hbm_gbps * 1.02 {
                say(
                    &r.from,
                    format!("{} at {:.0} GB/s is above {}'s HBM bandwidth of {:.0} GB/s", r.metric, r.bandwidth_gbps, g.id, g.hbm_gbps),
                );
            }
        }
        for r in m.collectives.iter().filter(|r| m.is_user(&r.from)) {
            let Some(g) = self.gpu_of_measurement_id(&r.gpu) else {
                say(&r.from, unknown(&r.gpu));
                continue;
            };
            let busbw = r.collective.bus_factor_in(Some(i64::from(r.gpus))).unwrap_or(0.0) * r.size_bytes / (r.time_us * 1e3);
            if g.link_gbps > 0.0 && busbw > 2.0 * g.link_gbps {
                say(
                    &r.from,
                    format!(
                        "{} at {busbw:.0} GB/s of bus bandwidth: over twice {}'s {:.0} GB/s link",
                        r.collective.as_str(),
                        g.id,
                        g.link_gbps
                    ),
                );
            }
        }
        out
    }

    /// The shipped catalog and measured base.
    pub fn builtin() -> Pricing {
        Pricing::new(Catalog::builtin(), Measurements::shared())
    }

    /// The table that prices `gpu`'s GEMMs of `dtype`: the user's, else the
    /// one with the most measured shapes (its own id before `measured_as` ones).
    fn gemm_table(&self, gpu: &Gpu, dtype: Dtype) -> Option<&GemmTable> {
        let ids: Vec<&str> = gpu.measurement_ids().collect();
        let mut best: Option<(&GemmTable, (bool, usize, usize))> = None;
        for (rank, id) in ids.iter().enumerate() {
            // A few best shapes (a max-achievable-matmul row) are no table: they say what the
            // GPU reaches at its best, which the spec model uses, not how time follows shape.
            for t in self
                .gemms()
                .tables
                .get(&(Arc::from(*id), table_dtype(dtype)))
                .into_iter()
                .flatten()
                .filter(|t| t.points.len() >= MIN_TABLE_SHAPES)
            {
                let score = (t.user, t.points.len(), usize::MAX - rank);
                if best.as_ref().is_none_or(|b| score > b.1) {
                    best = Some((t, score));
                }
            }
        }
        best.map(|b| b.0).or_else(|| self.same_silicons_table(gpu, dtype))
    }

    /// `gpu`'s own GEMM table of `dtype`'s class (one of its measurement ids'), not a twin's.
    fn own_gemm_table(&self, gpu: &Gpu, dtype: Dtype) -> Option<&GemmTable> {
        self.gemm_table(gpu, dtype).filter(|t| !lent(gpu, t))
    }

    /// Whether table `t`, which prices `gpu`, holds times measured with other memory than
    /// `gpu`'s: a twin's table, or one measured on a GPU of faster HBM than this one (a variant
    /// of slower HBM: torchtitan's Grand Teton H100s at 2.4 TB/s, priced by Hopper's table).
    /// Such a price is held to this GPU's operand traffic, where HBM bounds the shape.
    fn measured_on_other_memory(&self, gpu: &Gpu, t: &GemmTable) -> bool {
        // The table's GPU: a catalog id, or an id several GPUs are measured as (`a100-sxm`: the
        // 40 and 80 GB), which says no more than the slowest of their memories.
        let measured_on = match self.catalog.gpus.iter().find(|g| g.id == *t.gpu) {
            Some(g) => Some(g.hbm_gbps),
            None => self.catalog.gpus.iter().filter(|g| g.measured_as.iter().any(|m| *m == *t.gpu)).map(|g| g.hbm_gbps).reduce(f64::min),
        };
        lent(gpu, t) || measured_on.is_some_and(|hbm| hbm > gpu.hbm_gbps)
    }

    /// The GPU whose GEMM table of `dtype`'s class prices `gpu`, where it has none of its own
    /// (its silicon's twin; `hw show` says so).
    pub fn table_lender(&self, gpu: &Gpu, dtype: Dtype) -> Option<String> {
        self.gemm_table(gpu, dtype).filter(|t| lent(gpu, t)).map(|t| t.gpu.to_string())
    }

    /// The GEMM table of another GPU of the same silicon, for a GPU without one: one that
    /// shares a `measured_as` id with it and has its 16-bit peak and SM count (A100 40 GB and
    /// 80 GB: one GA100 at the same clocks, whose HBM alone differs; Azure measured the 80 GB's).
    /// Its times are the other GPU's: where HBM bounds a shape, [`Pricing::gemm_by_rule`]
    /// holds it to this GPU's operand traffic.
    /// Only an unambiguous twin lends: where several GPUs of the silicon have tables of the dtype
    /// (GH200's FP8: H100's and H200's cuBLASLt rows, H800's DeepGEMM), which of their
    /// libraries this GPU runs is not known, and the spec model learns from them all.
    fn same_silicons_table(&self, gpu: &Gpu, dtype: Dtype) -> Option<&GemmTable> {
        let tables = &self.gemms().tables;
        let mut lenders = self.catalog.gpus.iter().filter(|o| self.same_silicon(gpu, o, dtype)).filter_map(|other| {
            tables
                .get(&(Arc::from(other.id.as_str()), table_dtype(dtype)))
                .into_iter()
                .flatten()
                .filter(|t| t.points.len() >= MIN_TABLE_SHAPES)
                .max_by_key(|t| (t.user, t.points.len()))
        });
        let first = lenders.next()?;
        lenders.next().is_none().then_some(first)
    }

    /// Whether `other` is another GPU of `gpu`'s silicon for `dtype`: a shared `measured_as`
    /// id, the same SM count and the same peak in that dtype's class.
    fn same_silicon(&self, gpu: &Gpu, other: &Gpu, dtype: Dtype) -> bool {
        other.id != gpu.id
            && shared_tables(gpu, other).next().is_some()
            && gpu.sms.is_some()
            && other.sms == gpu.sms
            && peak(gpu, dtype).is_some()
            && peak(other, dtype) == peak(gpu, dtype)
    }

    /// The catalog GPU whose specs stand for measurement id `id`.
    fn gpu_of_measurement_id(&self, id: &str) -> Option<&Gpu> {
        self.catalog.gpus.iter().find(|g| g.id == id).or_else(|| self.catalog.gpus.iter().find(|g| g.measurement_ids().any(|m| m == id)))
    }

    /// The share of its rows' rates `gpu` runs where they were measured on another catalog GPU
    /// of a higher 16-bit peak that its `measured_as` names (this GPU's peak ÷ that one's); 1 for
    /// its own rows, a silicon id's and a GPU of no higher peak.
    fn slower_than_its_rows(&self, gpu: &Gpu, row_gpu: &str) -> f64 {
        if row_gpu == gpu.id {
            return 1.0;
        }
        let Some(other) = self.catalog.gpus.iter().find(|g| g.id == row_gpu) else { return 1.0 };
        match (peak(gpu, Dtype::Bf16), peak(other, Dtype::Bf16)) {
            (Some(mine), Some(theirs)) if mine < theirs * (1.0 - 1e-9) => mine / theirs,
            _ => 1.0,
        }
    }

    /// `shape`'s roofline on `gpu`, µs: max(FLOPs / peak, bytes / HBM bandwidth).
    fn roofline_us(gpu: &Gpu, shape: &GemmShape) -> Option<f64> {
        let peak = peak(gpu, shape.dtype)?;
        Some((shape.flops() / peak).max(shape.bytes() / gpu.hbm_bytes_per_s()) * 1e6)
    }

    /// What `shape` costs on `gpu`. `learn_without` names measurement ids
    /// the spec model must not learn from (leave-one-GPU-out validation).
    /// The user's rows of this GPU, when too few for a table of their own
    /// ([`MIN_TABLE_SHAPES`]), still come first: the shape they measured is
    /// priced at its measured time; other shapes at the rule's price × the rows'
    /// measured ÷ priced times, averaged in log with the inverse square of each
    /// row's distance in log shape as its weight.
    pub fn gemm_excluding(&self, gpu: &Gpu, shape: &GemmShape, exclude: &[&str]) -> Option<Price> {
        let Some(rows) = self.user_gemm_rows(gpu, shape.dtype).filter(|t| !exclude.contains(&&*t.gpu)) else {
            return self.gemm_by_rule(gpu, shape, exclude);
        };
        if let Some(p) = rows.point_at(shape) {
            let basis = format!("the user's measurement of this shape on {} ({})", rows.gpu, rows.sources_text());
            return Some(Price::new(p.1.exp(), PriceRule::GemmMeasuredShape, false, basis, PriceRule::GemmMeasuredShape.band()));
        }
        let mut price = self.gemm_by_rule(gpu, shape, exclude)?;
        if let Some((f, n)) = rows.ratio_near(shape, |at| self.gemm_by_rule(gpu, at, exclude).map(|p| p.time_us)) {
            price.time_us *= f;
            price.basis.push_str(&format!(
                "; × {f:.3}, the measured ÷ table time (before any hold) of the user's {n} shape(s) of {} ({}), each weighted by the inverse square of its distance in log shape (too few for a table of their own)",
                rows.gpu,
                rows.sources_text()
            ));
        }
        Some(price)
    }

    /// The user's GEMM rows of `gpu` and `dtype`'s class when fewer than a table needs.
    fn user_gemm_rows(&self, gpu: &Gpu, dtype: Dtype) -> Option<&GemmTable> {
        let tables = &self.gemms().tables;
        gpu.measurement_ids()
            .filter_map(|id| tables.get(&(Arc::from(id), table_dtype(dtype))))
            .flatten()
            .find(|t| t.user && t.points.len() < MIN_TABLE_SHAPES)
    }

    /// [`Pricing::gemm_excluding`] by the table and spec-model rules alone.
    fn gemm_by_rule(&self, gpu: &Gpu, shape: &GemmShape, exclude: &[&str]) -> Option<Price> {
        let table = self.gemm_table(gpu, shape.dtype).filter(|t| !exclude.contains(&&*t.gpu));
        // Below a scattered table's shapes, the spec model (shape behaviour learned
        // from the measured grids) prices it; the table only where nothing else can.
        if let Some(t) = table.filter(|t| t.scattered_below(shape))
            && let Some(mut p) = self.gemm_spec_model(gpu, shape, exclude)
        {
            p.basis.push_str(&format!("; below the shapes of {}'s {}-shape table", t.gpu, t.points.len()));
            p.extrapolated = true;
            // A user's table says how their stack runs against the spec model at its shapes: below
            // them the spec model × that ratio, as a user's few rows correct a price (an eighth
            // slow row had turned a 2× slower stack's small GEMMs faster than the shipped table).
            if t.user
                && let Some((f, n)) = t.ratio_near(shape, |at| self.gemm_spec_model(gpu, at, exclude).map(|m| m.time_us))
            {
                p.time_us *= f;
                p.basis.push_str(&format!(
                    "; × {f:.3}, the measured ÷ spec-model time of the user's {n} shapes of {} ({}), each weighted by the inverse square of its distance in log shape",
                    t.gpu,
                    t.sources_text()
                ));
            }
            let least_rows = t.least(1).exp2();
            self.hold_fp8_to_16_bit(gpu, shape, exclude, least_rows, &format!("fewer than {}'s table measured", t.gpu), &mut p);
            // Never above the table's price of the shape raised to the table's smallest measured
            // dimensions: a smaller GEMM never costs more than one it fits in (H100 FP8
            // 1000×256×4096 had cost 9.26 µs by the spec model, 1024×256×4096 5.74 by the table).
            let least = |d: usize, v: f64| v.max(t.least(d).exp2());
            let larger = GemmShape { m: least(1, shape.m), n: least(2, shape.n), k: least(3, shape.k), ..*shape };
            // (Never below the table, raised to its least: the guard keeps the call from recursing.)
            if !t.scattered_below(&larger)
                && let Some(cap) = self.gemm_by_rule(gpu, &larger, exclude)
                && cap.time_us < p.time_us
            {
                p.time_us = cap.time_us;
                p.basis.push_str(&format!(
                    "; held to {:.2} µs, the table's price of {}×{}×{}, the smallest shape it covers that holds it (no GEMM costs more than the table's price of one it fits in)",
                    cap.time_us, larger.m, larger.n, larger.k
                ));
            }
            return Some(p);
        }
        if let Some(t) = table
            && let Some((ln_t, extrapolated)) = t.at(shape)
        {
            let basis = format!(
                "{} table of {} ({} shapes; {}{})",
                shape.dtype.class_words(),
                t.gpu,
                t.points.len(),
                t.sources_text(),
                if t.user { ", the user's" } else { "" }
            );
            let mut time_us = ln_t.exp();
            let mut basis = basis;
            // A table measured on GPUs of a higher peak than this one's (a user's variant
            // `measured_as` a catalog table at a lower clock): their times × the ratio of the
            // shape's rooflines on the two GPUs, max(FLOPs ÷ peak, bytes ÷ HBM), outside what was
            // measured — the time above the table's shortest (a launch's, which no peak moves)
            // scaled, not that. It had run at 100 % of its own peak; then, as the peaks' ratio, a
            // memory-bound shape on a part of faster HBM had cost 6.7× the table's.
            let mut extrapolated = extrapolated;
            if let Some(other) = self.gpu_of_measurement_id(&t.gpu)
                && let (Some(theirs), Some(mine)) = (peak(other, shape.dtype), peak(gpu, shape.dtype))
                && mine < theirs * (1.0 - 1e-9)
                && let (Some(on_this), Some(on_theirs)) = (Self::roofline_us(gpu, shape), Self::roofline_us(other, shape))
                && on_theirs > 0.0
            {
                let ratio = on_this / on_theirs;
                let shortest = t.points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min).exp().min(time_us);
                time_us = shortest + (time_us - shortest) * ratio;
                extrapolated = true;
                basis.push_str(&format!(
                    "; × {ratio:.3}, the shape's roofline on this GPU over the table's {} (peaks {:.0} against {:.0} TFLOP/s, HBM {:.0} against {:.0} GB/s)",
                    other.id,
                    mine / 1e12,
                    theirs / 1e12,
                    gpu.hbm_gbps,
                    other.hbm_gbps
                ));
            }
            // (After the table is this GPU's: its streaming time is this GPU's.)
            // Fewer rows than measured (decode's projections, m = the batch): from the
            // smallest measured row count m₀ down to one row the time moves, in log m,
            // from the table's time to the operands' streaming time at the GPU's
            // measured HBM bandwidth (a one-row GEMM is a matrix-vector product that
            // streams its weights), never under the table's shortest time.
            if let Some(g) = &t.grid
                && let Some(m0) = g.axes[1].first().map(|lo| lo.exp2())
            {
                let floor = g.values.iter().copied().fold(f64::INFINITY, f64::min).exp();
                if let Some(words) = self.toward_streaming(gpu, shape, m0, floor, &mut time_us) {
                    basis.push_str(&words);
                }
            }
            // Another GPU's table (the same silicon): its times, at least this GPU's traffic.
            if lent(gpu, t) {
                let shared: Vec<&str> =
                    self.catalog.gpus.iter().find(|o| o.id == *t.gpu).map(|o| shared_tables(gpu, o).collect()).unwrap_or_default();
                basis.push_str(&format!(
                    "; {} is the same silicon as {} (both measured as {}, with the same SMs and {} peak)",
                    t.gpu,
                    gpu.id,
                    shared.join(", "),
                    shape.dtype.class_words()
                ));
            }
            let other_memory = self.measured_on_other_memory(gpu, t);
            let mut price = Price::new(time_us, PriceRule::GemmTable, extrapolated, basis, GEMM_TABLE_BAND);
            if (extrapolated || other_memory)
                && let Some((bw, bw_basis)) = self.at_least_its_traffic(gpu, shape, &mut price)
            {
                price.basis.push_str(&format!("; at least its operands' traffic once at {:.0} GB/s ({bw_basis})", bw / 1e9));
            }
            // A measurement of the shape itself (the user's table's, or a row at it) keeps its word;
            // FP8 first: every table price passes here, and only FP8's scans the rows.
            if shape.dtype == Dtype::Fp8 && !t.user && t.point_at(shape).is_none() {
                self.fp8_at_least_its_16_bit_share(gpu, shape, exclude, &mut price);
            }
            price.basis.push_str(&self.set_aside_at(gpu, shape, t, exclude));
            return Some(price);
        }
        let mut p = self.gemm_spec_model(gpu, shape, exclude)?;
        // No FP8 table of this GPU (GH200, B300, …): decode's few rows as below a table's.
        self.hold_fp8_to_16_bit(gpu, shape, exclude, f64::INFINITY, "no FP8 table of this GPU", &mut p);
        Some(p)
    }

    /// The other measurements of `shape` itself on `gpu` than those of table `chosen`, which
    /// prices it, as a clause of the basis ("" where there are none). One table prices a GPU's
    /// GEMMs, so that neighbouring shapes agree; a smaller sweep that timed the very shape
    /// (ml-engineering's six SwiGLU `bmm`s on an H100 of unstated form factor, 395 TFLOP/s where
    /// XLA's Hopper table and the sustained hold price 666) had been set aside without a word.
    fn set_aside_at(&self, gpu: &Gpu, shape: &GemmShape, chosen: &GemmTable, exclude: &[&str]) -> String {
        let tables = &self.gemms().tables;
        let words: Vec<String> = gpu
            .measurement_ids()
            .filter_map(|id| tables.get(&(Arc::from(id), table_dtype(shape.dtype))))
            .flatten()
            .filter(|t| !std::ptr::eq(*t, chosen) && !exclude.contains(&&*t.gpu))
            .filter_map(|t| {
                let time_us = t.point_at(shape)?.1.exp();
                Some(format!("{} on {} at {:.2} µs ({:.1} TFLOP/s)", t.sources_text(), t.gpu, time_us, shape.flops() / time_us / 1e6))
            })
            .collect();
        if words.is_empty() {
            return String::new();
        }
        format!(
            "; set aside, measured at this very shape: {} (one table prices a GPU's GEMMs, the user's, else the one of the most shapes, so that neighbouring shapes agree)",
            words.join("; ")
        )
    }

    /// An FP8 GEMM a table priced at no less than its 16-bit shape's time × the two peaks' ratio: FP8 doubles
    /// the peak and halves the operands' bytes, and nothing more, whatever bounds the shape.
    /// A few square FP8 shapes (Azure's nine on H100) had priced 1024×256×1024 at 1.24 µs, 6× the
    /// rate of the same shape in 16 bits (XLA's Hopper FP8 table: 5.87 µs).
    fn fp8_at_least_its_16_bit_share(&self, gpu: &Gpu, shape: &GemmShape, exclude: &[&str], p: &mut Price) {
        if shape.dtype != Dtype::Fp8 {
            return;
        }
        let (Some(eight), Some(sixteen_peak)) = (peak(gpu, Dtype::Fp8), peak(gpu, Dtype::Bf16)) else { return };
        let Some(sixteen) = self.gemm_by_rule(gpu, &GemmShape { dtype: Dtype::Bf16, ..*shape }, exclude) else { return };
        let least = sixteen.time_us * (sixteen_peak / eight).min(1.0);
        if p.time_us < least {
            p.basis.push_str(&format!(
                "; at least its 16-bit price × the peaks' {:.2}, {least:.2} µs (FP8 doubles the peak and halves the operands, no more; 16 bits: {:.2} µs, {})",
                sixteen_peak / eight,
                sixteen.time_us,
                sixteen.basis
            ));
            p.time_us = least;
        }
    }

    /// An FP8 GEMM the spec model priced, of fewer rows than any FP8 measurement (`below`: its
    /// FP8 table's fewest rows, or every GEMM of a GPU with no FP8 table), held to the 16-bit
    /// price of its shape: the 16-bit table's rule for fewer rows than it measured (from its
    /// time at its fewest rows toward the operands' streaming time), streaming FP8 operands, where
    /// that is faster. At the 16-bit table's fewest rows FP8 costs the 16-bit time: XLA's B200 and
    /// Hopper tables at their fewest rows (256, 512) with weights of 2048² and more measured FP8 at
    /// most 1.03× the 16-bit time on 71 of 72 shapes (median 0.69–0.89×); at one row, a
    /// matrix-vector product streams FP8 weights in half the bytes.
    fn hold_fp8_to_16_bit(&self, gpu: &Gpu, shape: &GemmShape, exclude: &[&str], below: f64, why: &str, p: &mut Price) {
        if shape.dtype != Dtype::Fp8 || shape.m >= below * (1.0 - 1e-9) {
            return;
        }
        let Some(mut sixteen) = self.gemm_by_rule(gpu, &GemmShape { dtype: Dtype::Bf16, ..*shape }, exclude) else { return };
        // Below the 16-bit grid's fewest rows (m0), blended toward FP8 streaming; elsewhere (at or
        // above them, or a 16-bit table of scattered shapes: MI355X's) no dearer than the 16-bit price.
        // The 16-bit table left out (leave-one-GPU-out) lends not even its grid.
        let table = self.gemm_table(gpu, Dtype::Bf16).filter(|t| !exclude.contains(&&*t.gpu));
        let m0 = table.and_then(|t| t.grid.as_ref()?.axes[1].first().map(|x| x.exp2()));
        let m0 = m0.filter(|&m0| shape.m < m0 && m0 > 1.0).unwrap_or(f64::NAN);
        // A 16-bit table of scattered shapes prices fewer rows than it measured by the spec
        // model, which can cost more than the table's fewest rows: no FP8 GEMM of fewer rows
        // costs more than the 16-bit one of those (MI355X's had cost 9.5 µs at 16 rows, 4.8 at 32).
        if let Some(t) = table.filter(|t| t.grid.is_none())
            && let least = t.least(1).exp2()
            && shape.m < least
            && let Some(at_least) = self.gemm_by_rule(gpu, &GemmShape { dtype: Dtype::Bf16, m: least, ..*shape }, exclude)
            && at_least.time_us < sixteen.time_us
        {
            sixteen = Price { basis: format!("{} at {least} rows, the table's fewest", at_least.basis), ..at_least };
        }
        let streamed = |m: f64, dtype: Dtype| GemmShape { m, dtype, ..*shape }.bytes();
        let (time_us, how) = if m0.is_nan() {
            (sixteen.time_us, "its 16-bit price".to_string())
        } else {
            let f = shape.m.max(1.0).ln() / m0.ln();
            let ln = (streamed(shape.m, Dtype::Fp8) / streamed(shape.m, Dtype::Bf16)).ln()
                - f * (streamed(m0, Dtype::Fp8) / streamed(m0, Dtype::Bf16)).ln();
            (sixteen.time_us * ln.exp(), format!("its 16-bit price toward FP8 operands' streaming time below {m0} rows"))
        };
        if time_us < p.time_us {
            p.basis = format!(
                "{}; held to {how}, {time_us:.2} µs: {} rows, {why} (16 bits: {:.2} µs, {})",
                p.basis, shape.m, sixteen.time_us, sixteen.basis
            );
            p.time_us = time_us;
        }
    }

    /// Holds an extrapolated GEMM price (a shape off the table's grid, or a trace correction's
    /// ratio applied to one) to at least its operands' traffic once at the GPU's measured HBM
    /// rate: outside what was measured nothing else bounds it from below. A batch beyond the
    /// grid folds into m as if its matrices shared one k × n operand, while each brings its own
    /// (TimeSformer's 37 632 temporal-attention GEMMs of 8 × 64 × 8 move 82 MB; the fold priced
    /// 19 µs on H100, which ran them in 41), and an MoE GPU's grouped GEMM of few tokens per
    /// expert streams every expert's weights. The rate and its basis, when it raised the price.
    fn at_least_its_traffic(&self, gpu: &Gpu, shape: &GemmShape, price: &mut Price) -> Option<(f64, Arc<str>)> {
        let bits = gpu.hbm_gbps.to_bits();
        let cached = self.hbm_rates.0.lock().ok().and_then(|m| m.iter().find(|r| r.0 == gpu.id && r.1 == bits).map(|r| r.2.clone()));
        let (bw, basis) = cached.unwrap_or_else(|| {
            let (bw, basis) = self.hbm_bytes_per_s(gpu);
            let rate = (bw, Arc::<str>::from(basis));
            if let Ok(mut m) = self.hbm_rates.0.lock() {
                m.push((gpu.id.clone(), bits, rate.clone()));
            }
            rate
        });
        let streamed = shape.bytes() / bw * 1e6;
        // (A one-row GEMM below the grid is already at its streaming time, up to rounding.)
        (streamed > price.time_us * (1.0 + 1e-9)).then(|| {
            price.time_us = streamed;
            (bw, basis)
        })
    }

    /// GPUs per node, the one rule: `given`, else the node size of the user's measurements
    /// across nodes of `gpu` (their cluster's: [`Measurements::users_gpus_per_node`]), else
    /// [`Catalog::gpus_per_node`] (the GPU's node preset, else 8).
    pub fn gpus_per_node(&self, gpu: Option<&Gpu>, given: Option<u32>) -> u32 {
        let users = gpu.and_then(|g| self.measurements.users_gpus_per_node(g)).map(|(n, _)| n);
        self.catalog.gpus_per_node(gpu.map(|g| g.id.as_str()), given.or(users))
    }

    /// The HBM bandwidth streaming kernels reach on `gpu`, bytes/s: its best
    /// measured streaming rate (BabelStream copy/mul/add/triad), else its
    /// datasheet bandwidth × the median measured ÷ datasheet ratio of the GPUs
    /// that were measured (0.77–0.89 in the shipped base).
    pub fn hbm_bytes_per_s(&self, gpu: &Gpu) -> (f64, String) {
        let streaming = |r: &&crate::measured::MemoryRow| r.metric.starts_with("stream_") && &*r.metric != "stream_dot";
        let ids: Vec<&str> = gpu.measurement_ids().collect();
        let m = &self.measurements;
        let of_gpu = |r: &&crate::measured::MemoryRow| streaming(r) && ids.contains(&&*r.gpu);
        // The user's rows first, as their GEMMs and collectives come first: their 1000 GB/s
        // beside a shipped 2970 had been outbid by the shipped row, in silence.
        let users = m.memory.iter().filter(of_gpu).any(|r| m.is_user(&r.from));
        if let Some(r) = m
            .memory
            .iter()
            .filter(of_gpu)
            .filter(|r| !users || m.is_user(&r.from))
            .max_by(|a, b| a.bandwidth_gbps.total_cmp(&b.bandwidth_gbps))
        {
            // A variant of the measured GPU (`--hbm-gbps`): its measured rate × the two datasheet
            // bandwidths (an H100 at 4.8 TB/s had streamed at the 3.35 TB/s part's measured rate).
            let measured_on = self.gpu_of_measurement_id(&r.gpu).map_or(gpu.hbm_gbps, |g| g.hbm_gbps);
            let scale = if measured_on > 0.0 && gpu.hbm_gbps > 0.0 { gpu.hbm_gbps / measured_on } else { 1.0 };
            let mut basis = format!("measured, {} {}", r.from.source_id, r.metric);
            if (scale - 1.0).abs() > 1e-9 {
                basis.push_str(&format!(" × {scale:.3}, {} GB/s of HBM where it was measured on {measured_on}", gpu.hbm_gbps));
            }
            return (r.bandwidth_gbps * 1e9 * scale, basis);
        }
        let mut ratios: Vec<f64> = Vec::new();
        for g in &self.catalog.gpus {
            let best = self
                .measurements
                .memory
                .iter()
                .filter(streaming)
                .filter(|r| g.measurement_ids().any(|m| m == &*r.gpu))
                .map(|r| r.bandwidth_gbps)
                .fold(0.0, f64::max);
            if best > 0.0 && g.hbm_gbps > 0.0 {
                ratios.push(best / g.hbm_gbps);
            }
        }
        ratios.sort_by(f64::total_cmp);
        let ratio = if ratios.is_empty() { 1.0 } else { ratios[ratios.len() / 2] };
        (gpu.hbm_bytes_per_s() * ratio, format!("datasheet × {ratio:.2}, the median measured ratio of {} GPUs", ratios.len()))
    }

    /// What `shape` costs on a GPU whose traces measured their software stack
    /// against the tables (`correction`, from its profile): the price × the
    /// correction's ratio. The one GEMM price of `hw cost --profile`,
    /// `replay --target` and `project`.
    pub fn gemm_corrected(&self, gpu: &Gpu, shape: &GemmShape, correction: Option<&crate::profile::TableCorrection>) -> Option<Price> {
        self.gemm_corrected_by(gpu, shape, correction, None)
    }

    /// [`Pricing::gemm_corrected`] with a correction of GPU `lent_by`'s traces, whose profile
    /// prices `gpu` (a GPU without traces: [`crate::shipped::similar`]), named in the basis.
    pub fn gemm_corrected_by(
        &self,
        gpu: &Gpu,
        shape: &GemmShape,
        correction: Option<&crate::profile::TableCorrection>,
        lent_by: Option<&str>,
    ) -> Option<Price> {
        // Whose correction, in words: only where a basis says it (every GEMM price passes here).
        let correction_of = || match lent_by {
            Some(lender) => format!("the correction of {lender}'s profile, which prices {} (it has no traces of its own)", gpu.id),
            None => "the profile's correction".to_string(),
        };
        let on = || match lent_by {
            Some(lender) => format!("on {lender}, whose profile prices {} (it has no traces of its own)", gpu.id),
            None => "on the profile's GPU".to_string(),
        };
        let mut p = self.gemm(gpu, shape)?;
        // The user's measurements of this GPU (a shape, a sweep, a table) are of their stack
        // already: the traces' correction is of the shipped tables.
        let users = p.by_the_user();
        if let Some(c) = correction.filter(|_| users) {
            p.basis.push_str(&format!("; {} (× {:.3}) left out: the user's measurements are of their stack", correction_of(), c.ratio));
        }
        // The price × a correction's ratio, its spread in the band. A correction measured on the
        // traces' GEMMs (B200's: 109 GEMMs of at most a few GFLOP in one inference trace) never
        // makes a shape faster than the fastest rate any measurement of this GPU reached (B200:
        // 1745 TFLOP/s, the max-achievable-matmul search; the table × 0.79 priced Llama-3-8B's
        // training GEMMs at 1793).
        // A table of other memory (a twin's, or one measured on faster HBM) is another GPU's times:
        // a correction never takes it under this GPU's traffic.
        // Looked up only where a correction applies (without a profile, every search's GEMM).
        let other_memory = || self.gemm_table(gpu, shape.dtype).is_some_and(|t| self.measured_on_other_memory(gpu, t));
        let apply = |p: &mut Price, ratio: f64, ln_spread: f64, from: String| {
            p.time_us *= ratio;
            p.band = (p.band.powi(2) + (ln_spread / 2.0).powi(2)).sqrt();
            p.basis.push_str(&format!("; × {ratio:.3}, {from}"));
            // A correction after a hold prices past it; a cap after the correction is a bound again.
            p.bound = false;
            if ratio < 1.0
                && let Some(capped) = cap_at_best(&mut p.time_us, gpu, shape, self.best_gemm_fraction(gpu, shape.dtype).as_ref())
            {
                p.basis.push_str(&capped);
                p.bound = true;
            }
            if ratio < 1.0 && (p.extrapolated || other_memory()) && self.at_least_its_traffic(gpu, shape, p).is_some() {
                p.basis.push_str("; held at its operands' traffic");
            }
        };
        // A GEMM with misaligned rows (`GemmShape::misaligned`) runs other kernels than the
        // tables measured: where the traces ran such GEMMs, their own ratio prices it, at any
        // size (what it measures is the kernels the library falls back to, not a size range).
        if let Some(m) = correction.and_then(|c| c.misaligned.as_ref()).filter(|_| !users && shape.misaligned()) {
            let from = format!(
                "the measured ÷ table time of the {} traced GEMMs whose rows are not whole 16-byte units, as this one's (their software stack, {})",
                m.samples,
                on()
            );
            apply(&mut p, m.ratio, m.ln_spread, from);
            return Some(p);
        }
        // A correction speaks for the sizes its traces ran: the tables' error is a function of
        // shape (our H200 sweep: small shapes run 20 % faster than XLA's Hopper table, training
        // shapes 15 % slower), so a ratio measured on an inference trace's GEMMs of a few
        // GFLOP does not carry to a training step's of a TFLOP.
        let beyond = correction.and_then(|c| c.max_flops).filter(|&max| shape.flops() > max);
        if let (Some(c), Some(max), false) = (correction, beyond, users) {
            p.basis.push_str(&format!(
                "; {} (× {:.3}) left out: its {} traced GEMMs were of at most {:.3} GFLOP, this one of {:.3}",
                correction_of(),
                c.ratio,
                c.samples,
                max / 1e9,
                shape.flops() / 1e9
            ));
        }
        if let Some(c) = correction.filter(|_| !users && beyond.is_none()) {
            // From traced kernels (the rule that priced them), or fitted elsewhere (`validate --fit`: to runs).
            let from = if c.measured_on_traces() {
                format!("the measured ÷ table time of {} traced GEMMs (their software stack, {})", c.samples, on())
            } else if c.rule.is_empty() {
                format!("a correction of {} measured run(s)", c.samples)
            } else {
                format!("{} to {} measured run(s) (their software stack)", c.rule, c.samples)
            };
            apply(&mut p, c.ratio, c.ln_spread, from);
        }
        Some(p)
    }

    /// What `shape` costs on `gpu`; never faster than the dtype's peak (XLA's
    /// Hopper FP8 table has values above it).
    pub fn gemm(&self, gpu: &Gpu, shape: &GemmShape) -> Option<Price> {
        let GemmShape { batch, m, n, k, dtype } = *shape;
        let key = ([batch, m, n, k].map(f64::to_bits), dtype);
        self.gemm_prices.get_or_price(gpu, key, || self.gemm_afresh(gpu, shape))
    }

    /// [`Pricing::gemm`], priced afresh.
    fn gemm_afresh(&self, gpu: &Gpu, shape: &GemmShape) -> Option<Price> {
        let mut p = self.gemm_before_twins(gpu, shape)?;
        self.hold_to_higher_power_twin(gpu, shape, &mut p);
        // Without the user's files (every search), no table lookup.
        p.by_user = p.rule == PriceRule::GemmMeasuredShape
            || (!self.measurements.user_files.is_empty()
                && (self.user_gemm_rows(gpu, shape.dtype).is_some() || self.own_gemm_table(gpu, shape.dtype).is_some_and(|t| t.user)));
        Some(p)
    }

    /// [`Pricing::gemm`] before the bound of a higher-power twin (what bounds another GPU: both
    /// conditions carry through a chain of twins, so one flat maximum over them all suffices, and
    /// no twin's price recurses into its own twins).
    fn gemm_before_twins(&self, gpu: &Gpu, shape: &GemmShape) -> Option<Price> {
        let mut p = self.gemm_excluding(gpu, shape, &[])?;
        // A 16-bit type the GPU has no path for (V100: FP16, no BF16) is priced as the other.
        if let Some(other) = gpu.sixteen_bit_stand_in(shape.dtype) {
            p.basis.push_str(&format!("; {} has no {} path: priced as {}", gpu.id, shape.dtype.as_str(), other.as_str()));
        }
        if let Some(peak) = peak(gpu, shape.dtype) {
            let floor = shape.flops() / peak * 1e6;
            if p.time_us < floor {
                p.time_us = floor;
                p.basis.push_str("; capped at the peak: the table is faster than the datasheet allows");
            }
        }
        self.hold_to_sustained(gpu, shape, &mut p);
        Some(p)
    }

    /// The same silicon under a lower board power limit runs no GEMM faster than under a higher
    /// one, with memory no slower: a 250 W A100 PCIe card's price, from the spec model and its one
    /// best-shape measurement, had been faster than the 400 W SXM4 board's measured table (261
    /// against 228 TFLOP/s at 4096³). What measured this GPU itself keeps its word: its own table,
    /// a shape the user measured.
    fn hold_to_higher_power_twin(&self, gpu: &Gpu, shape: &GemmShape, p: &mut Price) {
        let Some(tdp) = gpu.tdp_w else { return };
        // Cheapest first (every GEMM price of a GPU with a power limit passes here): a shape the
        // user measured, the twins, then whether this GPU's own measurement speaks for it.
        if p.rule == PriceRule::GemmMeasuredShape {
            return;
        }
        let twins: Vec<&Gpu> = self
            .catalog
            .gpus
            .iter()
            .filter(|o| o.tdp_w.is_some_and(|t| t > tdp) && o.hbm_gbps >= gpu.hbm_gbps && gpu.same_compute(o) && o.same_vendor(gpu))
            .collect();
        if twins.is_empty() {
            return;
        }
        // A table of this GPU's own speaks for it: the user's, or one no faster twin is measured
        // as. A table shared with a twin (a 500 W H100 `measured_as` Hopper's, as the 700 W one
        // is) timed the silicon at some power, not at this one's limit: it had priced the 500 W
        // GPU 17 % faster than the 700 W H100.
        if let Some(t) = self.own_gemm_table(gpu, shape.dtype)
            && (t.user || !twins.iter().any(|o| o.measurement_ids().any(|id| id == &*t.gpu)))
        {
            return;
        }
        // The slowest of them bounds it; of equal prices, one from a measured table is named.
        let bound = twins.iter().filter_map(|&o| self.gemm_before_twins(o, shape).map(|q| (o, q))).max_by(|a, b| {
            a.1.time_us
                .total_cmp(&b.1.time_us)
                .then((a.1.rule == PriceRule::GemmTable).cmp(&(b.1.rule == PriceRule::GemmTable)))
                // Of equals, the twin most like this GPU: its memory, then its links.
                .then(b.0.hbm_gbps.total_cmp(&a.0.hbm_gbps))
                .then((b.0.link_gbps - gpu.link_gbps).abs().total_cmp(&(a.0.link_gbps - gpu.link_gbps).abs()))
        });
        if let Some((o, q)) = bound
            && q.time_us > p.time_us
        {
            let time_us = q.time_us;
            // The twin's measurement prices it now: its rule and band, not this GPU's spec model.
            (p.time_us, p.rule, p.band, p.extrapolated) = (time_us, q.rule, q.band, p.extrapolated || q.extrapolated);
            p.basis.push_str(&format!(
                "; no faster than {} ({:.1} µs), the same compute at a higher power limit ({:.0} W against {tdp:.0} W)",
                o.id,
                time_us,
                o.tdp_w.unwrap_or(tdp)
            ));
        }
    }

    /// The tables time each shape for a moment; a GPU kept busy runs at its power limit, and
    /// its clock falls (our H200: an 8192×14336×4096 GEMM 769–801 TFLOP/s in its first calls,
    /// 665 over 8 s back to back, where XLA's Hopper table says 780). No table's shape of a busy
    /// GPU runs faster than the rate its silicon holds, where that was measured. What measured
    /// this GPU itself keeps its word: a shape the user measured, a table of their own, and a
    /// correction from its traces ([`Pricing::gemm_corrected`]), which applies to the held
    /// price (it is measured against it, and its GEMMs ran on that GPU under their own load).
    fn hold_to_sustained(&self, gpu: &Gpu, shape: &GemmShape, p: &mut Price) {
        // Every GEMM price passes here (a search prices thousands): the words only when it holds.
        let rows = self.sustained_rows(gpu, shape.dtype);
        let Some(rate) = median_rate(&rows) else { return };
        let floor = shape.flops() / rate * 1e6;
        if p.time_us >= floor || p.rule == PriceRule::GemmMeasuredShape || self.own_gemm_table(gpu, shape.dtype).is_some_and(|t| t.user) {
            return;
        }
        p.time_us = floor;
        p.basis.push_str(&format!(
            "; held at {:.1} TFLOP/s, the rate {}: the tables time a moment, a busy GPU runs at its power limit",
            rate / 1e12,
            sustained_words(gpu, &rows)
        ));
        p.bound = true;
    }

    /// The GEMM rate `gpu` holds under sustained load in `dtype`'s class, FLOP/s, and
    /// whose measurement says so: the median of the `load = sustained` rows of the GPU —
    /// or of a GPU measured as the same table (`measured_as`) at the same board power
    /// limit (`tdp_w`), the same silicon held to the same power; the user's rows first.
    /// None where nothing of that silicon and power was measured so: its tables stand.
    pub fn sustained_gemm_rate(&self, gpu: &Gpu, dtype: Dtype) -> Option<(f64, String)> {
        let rows = self.sustained_rows(gpu, dtype);
        Some((median_rate(&rows)?, sustained_words(gpu, &rows)))
    }

    /// The `load = sustained` rows that speak for `gpu` in `dtype`'s class ([`Pricing::sustained_gemm_rate`]).
    fn sustained_rows(&self, gpu: &Gpu, dtype: Dtype) -> Vec<&GemmRow> {
        let rows = &self.measurements.gemm_sustained;
        if rows.is_empty() {
            return Vec::new();
        }
        let speaks_for = |r: &GemmRow| {
            if table_dtype(r.dtype) != table_dtype(dtype) {
                return false;
            }
            // A row of this GPU, or of a table it is measured as (the row's author says so).
            if gpu.measurement_ids().any(|id| id == &*r.gpu) {
                return true;
            }
            let Ok(theirs) = self.catalog.gpu(&r.gpu) else { return false };
            shared_tables(gpu, theirs).next().is_some() && theirs.tdp_w.is_some() && theirs.tdp_w == gpu.tdp_w
        };
        // This GPU's own rows (of its id or table) before a twin's, the user's before the shipped.
        let mine: Vec<&GemmRow> = rows.iter().filter(|r| speaks_for(r)).collect();
        let own: Vec<&GemmRow> = mine.iter().copied().filter(|r| gpu.measurement_ids().any(|id| id == &*r.gpu)).collect();
        let closest = if own.is_empty() { mine } else { own };
        let users: Vec<&GemmRow> = closest.iter().copied().filter(|r| self.measurements.is_user(&r.from)).collect();
        if users.is_empty() { closest } else { users }
    }

    /// Fewer rows than measured (decode's projections, m = the batch): from the smallest
    /// measured row count `m0` down to one row `time_us` (the price at `m0`'s rows, as the
    /// tables hold it there) moves, in log m, to the operands' streaming time at the GPU's
    /// measured HBM bandwidth (a one-row GEMM is a matrix-vector product that streams its
    /// weights), never under `floor`. The words said, where it lowered the price.
    fn toward_streaming(&self, gpu: &Gpu, shape: &GemmShape, m0: f64, floor: f64, time_us: &mut f64) -> Option<String> {
        if shape.m >= m0 {
            return None;
        }
        let (bw, bw_basis) = self.hbm_bytes_per_s(gpu);
        let streamed = |m: f64| GemmShape { m, ..*shape }.bytes() / bw * 1e6;
        let f = shape.m.max(1.0).ln() / m0.ln();
        let blended = (streamed(shape.m).ln() + f * (time_us.ln() - streamed(m0).ln())).exp().max(floor);
        (blended < *time_us).then(|| {
            *time_us = blended;
            format!("; {} rows, below the measured {m0}: toward its operands' streaming time at {:.0} GB/s ({bw_basis})", shape.m, bw / 1e9)
        })
    }

    /// Below the grids' fewest rows a 16-bit price moves toward the operands' streaming time
    /// ([`Pricing::toward_streaming`]); FP8 has its own hold to its 16-bit shape.
    fn gemm_spec_model(&self, gpu: &Gpu, shape: &GemmShape, exclude: &[&str]) -> Option<Price> {
        let own = Self::roofline_us(gpu, shape)?;
        let mine = specs(gpu, shape.dtype)?;
        // What the GPU reached at its best measured shape (a max-achievable-matmul
        // search, a user's sweep), as a fraction of its peak: the throughput
        // its software stack attains, which the datasheet does not say.
        let best = self.best_fraction(gpu.measurement_ids().filter(|id| !exclude.contains(id)), gpu, shape.dtype);
        let (mut sum_w, mut sum_wln, mut extrapolated) = (0.0, 0.0, false);
        let mut learned: Vec<(String, f64, f64)> = Vec::new();
        // The grids' smallest measured row count and shortest time: below them, as the table rule.
        let (mut m0, mut floor) = (f64::INFINITY, f64::INFINITY);
        let mut ids: Vec<&Arc<str>> = self.gemms().tables.keys().filter(|(_, d)| *d == table_dtype(shape.dtype)).map(|(g, _)| g).collect();
        ids.sort();
        ids.dedup();
        for id in ids {
            if exclude.contains(&&**id) || gpu.measurement_ids().any(|m| m == &**id) {
                continue;
            }
            let Some(other) = self.gpu_of_measurement_id(id) else { continue };
            let Some(t) =
                self.gemms().tables.get(&(id.clone(), table_dtype(shape.dtype))).and_then(|v| v.iter().find(|t| t.grid.is_some()))
            else {
                continue;
            };
            let (Some((ln_t, ex)), Some(roof), Some(theirs)) = (t.at(shape), Self::roofline_us(other, shape), specs(other, shape.dtype))
            else {
                continue;
            };
            // How the measured time responds to work at this shape: the mean
            // elasticity d ln t / d ln work over m, n and k (0 where launch
            // latency and unfilled tiles bound it, 1 where throughput does).
            let halved = |d: usize| {
                let mut s = *shape;
                match d {
                    0 => s.m /= 2.0,
                    1 => s.n /= 2.0,
                    _ => s.k /= 2.0,
                }
                t.at(&s).map(|x| x.0)
            };
            let mut elasticity = 0.0;
            for d in 0..3 {
                elasticity += (ln_t - halved(d)?) / std::f64::consts::LN_2 / 3.0;
            }
            let elasticity = elasticity.clamp(0.0, 1.0);
            let mut distance = spec_distance(&mine.0, &theirs.0);
            if mine.1 != theirs.1 {
                distance += std::f64::consts::LN_2;
            }
            let w = (-2.0 * distance).exp();
            // Their time, with the throughput-bound part scaled by the two
            // rooflines and by the two GPUs' best measured fractions of peak.
            let attained = match (&best, self.best_fraction([&**id], other, shape.dtype)) {
                (Some((b, _)), Some((theirs, _))) => (theirs / *b).ln(),
                _ => 0.0,
            };
            if let Some(g) = &t.grid {
                m0 = m0.min(g.axes[1].first().map_or(f64::INFINITY, |lo| lo.exp2()));
                floor = floor.min(g.values.iter().copied().fold(f64::INFINITY, f64::min).exp());
            }
            sum_wln += w * (ln_t + elasticity * (own.ln() - roof.ln() + attained));
            sum_w += w;
            extrapolated |= ex;
            learned.push((id.to_string(), w, elasticity));
        }
        if sum_w <= 0.0 {
            return None;
        }
        let mut time_us = (sum_wln / sum_w).exp();
        let total: f64 = learned.iter().map(|l| l.1).sum();
        // Below the grids' rows their times stand at the smallest measured (GB200's one-row GEMM
        // had cost B200's 256-row time, 2.9× its streaming time on the same 8 TB/s of HBM).
        let streaming =
            if shape.dtype != Dtype::Fp8 && m0.is_finite() { self.toward_streaming(gpu, shape, m0, floor, &mut time_us) } else { None };
        // Never faster than the fastest this GPU was measured at any shape (a
        // max-achievable-matmul search): the learned scaling from a GPU 3× as fast
        // put A100's mid-size GEMMs above its peak. A GPU never measured: never
        // faster than its vendor's measured GPUs typically reach at their best shape
        // (V100's 1024³ FP16 GEMM, scaled from Hopper's 8× the peak, had run at 100 %
        // of its peak, as had a user's new GPU's).
        let typical = if best.is_none() { self.typical_best_fraction(gpu, shape.dtype, exclude) } else { None };
        let at_best = cap_at_best(&mut time_us, gpu, shape, best.as_ref());
        let bound = at_best.is_some();
        let capped = at_best.or_else(|| {
            let (b, n) = typical?;
            let floor = shape.flops() / (b * peak(gpu, shape.dtype)?) * 1e6;
            (time_us < floor).then(|| {
                time_us = floor;
                format!("; capped at {:.0} % of peak, the median of the best {n} measured GPU(s) of its vendor reached", 100.0 * b)
            })
        });
        // No GEMM of this GPU measured at all: outside the measured range whatever the shape.
        extrapolated |= best.is_none();
        let basis = format!(
            "measured GPUs' times at this shape, their throughput-bound share scaled to {}'s roofline{} (weight, elasticity: {})",
            gpu.id,
            best.map_or(" (no measured GEMM of it: its peak taken as attainable as theirs)".to_string(), |(b, from)| format!(
                " and its best measured {:.0} % of peak ({from})",
                100.0 * b
            )),
            learned.iter().map(|(g, w, e)| format!("{g} {:.2}, {e:.2}", w / total)).collect::<Vec<_>>().join("; ")
        ) + streaming.as_deref().unwrap_or("")
            + capped.as_deref().unwrap_or("");
        Some(Price { bound, ..Price::new(time_us, PriceRule::GemmSpecModel, extrapolated, basis, GEMM_SPEC_BAND) })
    }

    /// The best fraction of its `dtype` peak any measured GEMM of `gpu` reached
    /// (its own id and its `measured_as` ids), with the source.
    pub fn best_gemm_fraction(&self, gpu: &Gpu, dtype: Dtype) -> Option<(f64, Arc<str>)> {
        self.best_fraction(gpu.measurement_ids(), gpu, dtype)
    }

    /// The median over the catalog's other GPUs of `gpu`'s vendor of the best fraction of
    /// its `dtype` peak each was measured at (their max-achievable-matmul searches, their
    /// tables), and how many: what a GPU never measured is taken to reach at best. Neither
    /// the measurements left out (`exclude`: leave-one-GPU-out) nor this GPU's own ids count.
    fn typical_best_fraction(&self, gpu: &Gpu, dtype: Dtype, exclude: &[&str]) -> Option<(f64, usize)> {
        // Looked up without allocating (every spec-model price of a GPU never measured asks);
        // the owned key only when it is added.
        let same =
            |k: &(String, Dtype, Vec<String>)| k.0 == gpu.id && k.1 == dtype && k.2.iter().map(String::as_str).eq(exclude.iter().copied());
        if let Some(known) = self.typical_fractions.0.lock().ok().and_then(|m| m.iter().find(|(k, _)| same(k)).map(|(_, v)| *v)) {
            return known;
        }
        let typical = self.typical_best_fraction_uncached(gpu, dtype, exclude);
        if let Ok(mut m) = self.typical_fractions.0.lock() {
            m.push(((gpu.id.clone(), dtype, exclude.iter().map(|e| e.to_string()).collect()), typical));
        }
        typical
    }

    /// [`Pricing::typical_best_fraction`], worked out.
    fn typical_best_fraction_uncached(&self, gpu: &Gpu, dtype: Dtype, exclude: &[&str]) -> Option<(f64, usize)> {
        // Each measurement once (a table shared by four Hopper GPUs is one vote); of the GPU's
        // vendor, else of every vendor where it has none measured (a user's GPU of no vendor).
        let of_vendor = |vendor: Option<String>| {
            let mut seen = std::collections::HashSet::new();
            let mut fractions = Vec::new();
            for o in self.catalog.gpus.iter().filter(|o| o.id != gpu.id && vendor.as_ref().is_none_or(|v| o.vendor().as_ref() == Some(v))) {
                for id in o.measurement_ids() {
                    if exclude.contains(&id) || gpu.measurement_ids().any(|m| m == id) || !seen.insert(id.to_string()) {
                        continue;
                    }
                    fractions.extend(self.best_fraction([id], o, dtype).map(|b| b.0));
                }
            }
            fractions
        };
        let mut fractions = of_vendor(gpu.vendor());
        if fractions.is_empty() {
            fractions = of_vendor(None);
        }
        Some((crate::fit::median(&mut fractions)?, fractions.len()))
    }

    /// The best fraction of `gpu`'s `dtype` peak any measured GEMM of the
    /// measurement ids `ids` reached, with its source.
    fn best_fraction<'a>(&self, ids: impl IntoIterator<Item = &'a str>, gpu: &Gpu, dtype: Dtype) -> Option<(f64, Arc<str>)> {
        self.gemms().rates.best_fraction(ids, dtype, peak(gpu, dtype)?)
    }

    /// What an attention kernel of `shape` costs on `gpu` with kernel family
    /// `kernel` (`None`: the fastest measured family), from the GPU's measured
    /// attention kernels: the achieved TFLOP/s interpolated in log sequence
    /// length at the nearest head dimension, same direction and mask.
    pub fn attention(&self, gpu: &Gpu, shape: &AttentionShape, kernel: Option<&str>) -> Option<Price> {
        self.attention_of_family(gpu, shape, kernel).map(|x| x.0)
    }

    /// [`Pricing::attention`] and the kernel family that priced it (`fa2`, `fa3`, …):
    /// a training step runs one family's forward and backward, so a model prices the
    /// forward with the family that priced the forward plus backward.
    pub fn attention_of_family(&self, gpu: &Gpu, shape: &AttentionShape, kernel: Option<&str>) -> Option<(Price, Arc<str>)> {
        self.attention_parts(gpu, shape, kernel).map(|p| (p.priced(), p.family))
    }

    /// The time of an attention's work alone, without the floor of the GPU's
    /// shortest kernel: what a ratio of two GPUs' prices scales (a measured
    /// source time holds its own fixed cost; a ratio of two floors says
    /// nothing of the kernel, and [`crate::cost`] tells latency-bound kernels
    /// by this time against the trace's short-kernel time).
    pub fn attention_work(&self, gpu: &Gpu, shape: &AttentionShape, kernel: Option<&str>) -> Option<Price> {
        self.attention_parts(gpu, shape, kernel).map(|p| p.work)
    }

    /// [`Pricing::attention_of_family`] in its parts (the work's time, the family, the
    /// floor), kept for the next call.
    pub fn attention_parts(&self, gpu: &Gpu, shape: &AttentionShape, kernel: Option<&str>) -> Option<AttentionParts> {
        self.attention_parts_as(gpu, shape, kernel, kernel.is_some())
    }

    /// The work's time of kernel family `family` at `shape`, the family as the fastest measured
    /// one stands for a kernel written for the GPU where `named` is false: a training step's
    /// forward priced by the family that priced its forward plus backward, as that was.
    pub fn attention_work_of_family(&self, gpu: &Gpu, shape: &AttentionShape, family: &str, named: bool) -> Option<Price> {
        self.attention_parts_as(gpu, shape, Some(family), named).map(|p| p.work)
    }

    /// [`Pricing::attention_parts`], a family `named` (by the user, not as the fastest measured).
    fn attention_parts_as(&self, gpu: &Gpu, shape: &AttentionShape, kernel: Option<&str>, named: bool) -> Option<AttentionParts> {
        self.attention_prices.get_or_price(gpu, attention_key(shape, kernel, named), || {
            self.attention_unfloored(gpu, shape, kernel, named).map(|(work, family)| AttentionParts {
                work,
                family,
                floor_us: self.shortest_kernel_us(gpu),
            })
        })
    }

    /// [`Pricing::attention_of_family`], priced afresh, never under the GPU's
    /// shortest kernel: the measured rates are of full grids, and scaled down
    /// to one query tile they would price a one-token attention at 0.00 µs.
    #[cfg(test)]
    fn attention_priced(&self, gpu: &Gpu, shape: &AttentionShape, kernel: Option<&str>) -> Option<(Price, Arc<str>)> {
        let (price, family) = self.attention_unfloored(gpu, shape, kernel, kernel.is_some())?;
        Some((floored(price, self.shortest_kernel_us(gpu)), family))
    }

    /// The shortest kernel as this GPU's GEMM pricing knows it: its table's
    /// smallest measured times (about 4–5 µs on the tables' GPUs), else the
    /// catalog's t0.
    fn shortest_kernel_us(&self, gpu: &Gpu) -> Option<f64> {
        let tiny = GemmShape { batch: 1.0, m: 1.0, n: 1.0, k: 1.0, dtype: Dtype::Bf16 };
        self.gemm(gpu, &tiny).map(|p| p.time_us)
    }

    /// [`Pricing::attention_priced`] before the floor of the GPU's shortest kernel.
    fn attention_unfloored(&self, gpu: &Gpu, shape: &AttentionShape, kernel: Option<&str>, named: bool) -> Option<(Price, Arc<str>)> {
        let own = self.attention_measured(gpu, shape, kernel);
        // Where the GPU's own rows price this shape only from another mask, head dimension or
        // length, a GPU of the same compute (H100 for H200: one GH100) measured at it prices it.
        // Where no family is named, the fastest kernel the silicon was measured to run is the
        // fastest this GPU runs: H200's own rows are one FA2 benchmark, H100's include FA3.
        // (A family its own rows measured keeps their price: the same kernel measured on this GPU.)
        if let Some((p, fam)) = &own {
            if p.extrapolated
                && let Some(twin) = self.attention_twin(gpu, shape, kernel, Twin::Measured, "whose own rows are of another shape")
            {
                return Some(twin);
            }
            // Beyond the same silicon's measured lengths too, its rows of this mask, head dimension
            // and direction extrapolate better than this GPU's rows of another mask: H200's causal
            // attention had switched from H100's chart to its own unmasked row one token past 16 384.
            if p.extrapolated
                && !self.attention_covers(gpu, shape)
                && let Some(twin) =
                    self.attention_twin(gpu, shape, kernel, Twin::CoveringMask, "whose own rows are of another mask or head dimension")
            {
                return Some(twin);
            }
            if kernel.is_none() && !self.has_user_attention(gpu, shape) {
                let mine = self.attention_families(gpu);
                let why = format!("faster than the {fam} of its own rows, {:.1} µs", p.time_us);
                // Extrapolated in length as its own row is, where that is so (H200 beyond the charts' 16 k tokens).
                let faster = self
                    .attention_twin(gpu, shape, None, if p.extrapolated { Twin::Any } else { Twin::Measured }, &why)
                    .filter(|t| !mine.iter().any(|m| m.eq_ignore_ascii_case(&t.1)) && t.0.time_us < p.time_us);
                if let Some(twin) = faster {
                    return Some(twin);
                }
            }
        }
        own.or_else(|| kernel.and_then(|k| self.attention_carried(gpu, shape, k)))
            .or_else(|| self.attention_spec_model(gpu, shape, kernel, named))
    }

    /// Whether `gpu` has attention rows of `shape`'s mask, head dimension and direction (any length).
    fn attention_covers(&self, gpu: &Gpu, shape: &AttentionShape) -> bool {
        let ids: Vec<&str> = gpu.measurement_ids().collect();
        let want = if shape.backward { Direction::ForwardBackward } else { Direction::Forward };
        self.measurements
            .attention
            .iter()
            .any(|r| ids.contains(&&*r.gpu) && r.direction == want && r.causal == shape.causal && r.head_dim == shape.head_dim)
    }

    /// The catalog's other GPUs of `gpu`'s vendor: whose attention kernels can stand for its.
    fn vendor_peers<'a>(&'a self, gpu: &'a Gpu) -> impl Iterator<Item = &'a Gpu> {
        self.catalog.gpus.iter().filter(move |g| g.id != gpu.id && g.same_vendor(gpu))
    }

    /// A price of this shape measured without extrapolation on another GPU of the same
    /// vendor and the same compute (16-bit peak and SM count): the same silicon's kernels.
    fn attention_twin(&self, gpu: &Gpu, shape: &AttentionShape, kernel: Option<&str>, which: Twin, why: &str) -> Option<(Price, Arc<str>)> {
        // The user's own attention rows of this GPU come first, whatever shape they cover.
        let ids: Vec<&str> = gpu.measurement_ids().collect();
        if self.measurements.attention.iter().any(|r| ids.contains(&&*r.gpu) && self.measurements.is_user(&r.from)) {
            return None;
        }
        // The same silicon: the same 16-bit peak, SM count and exponential rate, all stated.
        self.vendor_peers(gpu)
            .filter(|g| gpu.same_compute(g) && (which != Twin::CoveringMask || self.attention_covers(g, shape)))
            .filter_map(|g| {
                self.attention_measured(g, shape, kernel).filter(|(p, _)| which != Twin::Measured || !p.extrapolated).map(|x| (g, x))
            })
            .min_by(|a, b| a.1.0.time_us.total_cmp(&b.1.0.time_us))
            .map(|(_, (mut p, fam))| {
                p.basis = format!("{} (the same compute as {}, {why})", p.basis, gpu.id);
                p.rule = PriceRule::AttentionSameSilicon;
                (p, fam)
            })
    }

    /// The attention kernel families measured on `gpu` (any direction), sorted.
    pub fn attention_families(&self, gpu: &Gpu) -> Vec<Arc<str>> {
        self.measurements.attention_families(&gpu.measurement_ids().collect::<Vec<_>>())
    }

    /// A family `kernel` that `gpu` has no measurement of, where `gpu` has
    /// measurements of other families: its time on a GPU of the vendor that
    /// measured it and shares at least one other family with
    /// `gpu` (the most shared families, then the closest specs), × the median
    /// of those shared families' time ratios (this GPU ÷ that one) at this shape. What a generation gave kernels of the same
    /// code is the evidence, where the peaks are not: FlashAttention 1 and 2
    /// and PyTorch's materialized attention, written for Ampere, ran 1.6–1.8×
    /// faster on H100 than on A100 for 3.2× the 16-bit peak (`fa2-chart-*`).
    fn attention_carried(&self, gpu: &Gpu, shape: &AttentionShape, kernel: &str) -> Option<(Price, Arc<str>)> {
        let mine = self.attention_families(gpu);
        if mine.is_empty() {
            return None;
        }
        let my_specs = attention_compute(gpu);
        // The shapes this GPU measured (length, batch, heads), nearest to the query's in length,
        // then in the query tiles' count (a grid of fewer heads than the charts' is extrapolated
        // too); at equal distance (twice and half the length) the shorter, then the smaller grid:
        // a total order, so that equal shapes sit together and dedup. Made once, where a sibling
        // measured nothing at the query's shape.
        let nearest_shapes = std::cell::OnceCell::new();
        let nearest = || {
            nearest_shapes.get_or_init(|| {
                let ids: Vec<&str> = gpu.measurement_ids().collect();
                let far = |r: &(f64, f64, f64)| ((r.0 / shape.seq).ln().abs(), (r.1 * r.2 / (shape.batch * shape.heads)).ln().abs());
                let mut measured: Vec<(f64, f64, f64)> =
                    self.measurements.attention.iter().filter(|r| ids.contains(&&*r.gpu)).map(|r| (r.seq, r.batch, r.heads)).collect();
                measured.sort_by(|a, b| {
                    let (fa, fb) = (far(a), far(b));
                    fa.0.total_cmp(&fb.0).then(fa.1.total_cmp(&fb.1)).then(a.0.total_cmp(&b.0)).then((a.1 * a.2).total_cmp(&(b.1 * b.2)))
                });
                measured.dedup();
                measured
            })
        };
        // (distance, other GPU, its price of the family, (ratio, family) of the shared families,
        // the length the ratios were measured at where not this shape's)
        let mut best: Option<(f64, &Gpu, Price, Vec<(f64, Arc<str>)>, Option<AttentionShape>)> = None;
        for other in self.vendor_peers(gpu) {
            let Some((theirs, _)) = self.attention_measured(other, shape, Some(kernel)) else { continue };
            // Only siblings measured at this shape on both GPUs (their mask, head dimension and
            // length range): a ratio of one GPU's causal row to the other's unmasked one is not
            // what the generation gave the kernel.
            let ratios_at = |at: &AttentionShape| -> Vec<(f64, Arc<str>)> {
                self.attention_families(other)
                    .into_iter()
                    .filter(|f| !f.eq_ignore_ascii_case(kernel) && mine.contains(f))
                    .filter_map(|f| {
                        let (a, _) = self.attention_measured(gpu, at, Some(&f)).filter(|(p, _)| !p.extrapolated)?;
                        let (b, _) = self.attention_measured(other, at, Some(&f)).filter(|(p, _)| !p.extrapolated)?;
                        Some((a.time_us / b.time_us, f))
                    })
                    .collect()
            };
            let mut ratios = ratios_at(shape);
            // Longer (or shorter) than both GPUs measured: the ratios at the nearest length they
            // did. The family's own time there is its GPU's extrapolation in length; switching
            // rules at the charts' last length had priced H100's 32 k-token attention 1.8× more
            // efficient than its 16 k-token one (the peak ratio instead of the families').
            let mut at_seq = None;
            if ratios.is_empty() {
                for &(seq, batch, heads) in nearest() {
                    let at = AttentionShape { seq, batch, heads, ..*shape };
                    ratios = ratios_at(&at);
                    if !ratios.is_empty() {
                        at_seq = Some(at);
                        break;
                    }
                }
            }
            if ratios.is_empty() {
                continue;
            }
            ratios.sort_by(|a, b| a.0.total_cmp(&b.0));
            let distance = match (&my_specs, attention_compute(other)) {
                (Some(a), Some(b)) => spec_distance(a, &b),
                _ => f64::INFINITY,
            };
            // Ratios at this shape first, then the most shared families (more siblings, firmer
            // evidence), then the closest specs.
            if best.as_ref().is_none_or(|b| (at_seq.is_none(), ratios.len(), -distance) > (b.4.is_none(), b.3.len(), -b.0)) {
                best = Some((distance, other, theirs, ratios, at_seq));
            }
        }
        let (_, _, theirs, ratios, at_seq) = best?;
        let n = ratios.len();
        let median = if n % 2 == 1 { ratios[n / 2].0 } else { (ratios[n / 2 - 1].0 * ratios[n / 2].0).sqrt() };
        let shared = ratios.iter().map(|(r, f)| format!("{f} ×{:.2}", 1.0 / r)).collect::<Vec<_>>().join(", ");
        let price = Price::new(
            theirs.time_us * median,
            PriceRule::AttentionCarried,
            theirs.extrapolated,
            format!(
                "{kernel} not measured on {}: {} × {:.3}, the median time ratio of the families measured on both ({shared} faster on {}{})",
                gpu.id,
                theirs.basis,
                median,
                gpu.id,
                at_seq.map_or(String::new(), |a| format!(
                    ", at the nearest shape both measured: {:.0} tokens, batch {:.0}, {:.0} heads",
                    a.seq, a.batch, a.heads
                ))
            ),
            ATTENTION_CARRIED_BAND,
        );
        Some((price, Arc::from(kernel)))
    }

    /// A GPU without measured attention kernels: the measured GPU of the same
    /// vendor with the closest compute (16-bit peak, SM/CU count), its price
    /// at this shape with the matmul share scaled by the two 16-bit peaks
    /// (attention at these sizes is compute-bound: the same fraction of peak
    /// carries over) and the softmax's exponentials by the two SFU rates.
    fn attention_spec_model(&self, gpu: &Gpu, shape: &AttentionShape, kernel: Option<&str>, named: bool) -> Option<(Price, Arc<str>)> {
        // Attention at these sizes is compute-bound: the distance is over the
        // 16-bit peak and SM count (HBM bandwidth left out). Among GPUs of the
        // same compute (H100 and H200, one GH100) a price measured at this head
        // dimension, mask and length comes first, then the fastest kernel, as
        // on a GPU's own table.
        let mine = attention_compute(gpu)?;
        let priced = |g: &Gpu| -> Option<(f64, (Price, Arc<str>))> {
            // A family the GPU did not measure but carries from a sibling GPU counts as its
            // own: H200 takes H100's carried price (one GH100), not A100's by the peaks.
            let priced = self.attention_measured(g, shape, kernel).or_else(|| kernel.and_then(|k| self.attention_carried(g, shape, k)));
            Some((spec_distance(&mine, &attention_compute(g)?), priced?))
        };
        let mut candidates: Vec<(&Gpu, f64, (Price, Arc<str>))> =
            self.vendor_peers(gpu).filter_map(|g| priced(g).map(|(d, p)| (g, d, p))).collect();
        // A known vendor none of whose GPUs measured attention (Intel's Gaudi): the closest
        // measured GPU of any vendor, rather than the GEMM efficiency (Gaudi 3 had been priced
        // 4.4× H100's FA2). A GPU of no stated vendor (one a user added) keeps what its
        // profile or the most similar traced GPU's fits say of its attention.
        let other_vendor = candidates.is_empty() && gpu.vendor().is_some();
        if other_vendor && kernel.is_none() {
            candidates = self.catalog.gpus.iter().filter(|g| g.id != gpu.id).filter_map(|g| priced(g).map(|(d, p)| (g, d, p))).collect();
        }
        let nearest = candidates.iter().map(|c| c.1).min_by(f64::total_cmp)?;
        let (other, _, (p, fam)) = candidates
            .into_iter()
            .filter(|c| c.1 <= nearest + 1e-9)
            .min_by(|a, b| a.2.0.extrapolated.cmp(&b.2.0.extrapolated).then(a.2.0.time_us.total_cmp(&b.2.0.time_us)))?;
        let peaks = peak(other, Dtype::Bf16)? / peak(gpu, Dtype::Bf16)?;
        // A named family carried to a GPU of a higher peak gains what its code gained the
        // generation before, not the whole peak ratio: FlashAttention 2, written for Ampere's
        // instructions, ran H100's matmul share 3.17^0.44 faster than A100's, not 3.17×. The
        // fastest family (no name) stands for a kernel written for the GPU: the peaks.
        let code = kernel.filter(|_| named && peaks < 1.0).and_then(|_| {
            self.family_elasticity(other, shape, &fam)
                .or_else(|| (p.rule == PriceRule::AttentionCarried).then(|| self.siblings_elasticity(other, shape, &fam)).flatten())
        });
        let scale = code.as_ref().map_or(peaks, |c| peaks.powf(c.elasticity));
        let written_for = (!named && peaks < 1.0).then_some(gpu.id.as_str());
        // The softmax's exponentials run on the special-function units, whose
        // rate grew slower than the matrix units' (H100 3.9, B200 5, B300 10.7
        // T/s against 989, 2250, 2250 TFLOP/s): the measured time less the
        // exponentials at the measured GPU's rate is its matmul share, scaled by
        // the peaks; the exponentials are priced at this GPU's rate. Measured
        // FA kernels bear it out: 1/throughput grows as 1/head dim (fewer FLOPs
        // per exponential), by about the exponential time (BENCHMARKS.md).
        let exp_us = |rate: f64| shape.exponentials() / (rate * 1e12) * 1e6;
        // A grid of fewer query tiles than SMs: the measured GPU's share of its SMs out,
        // this GPU's in (the peaks scale a full GPU). A GPU the catalog gives no SM
        // count keeps the measured GPU's share (GB200's grid of 64 tiles had been
        // priced on a full GPU, 2.5× too fast).
        let (theirs_idle, mine_idle) = match gpu.sms {
            Some(_) => (idle_sms(other, shape).map_or(1.0, |x| x.0), idle_sms(gpu, shape)),
            None => match idle_sms(other, shape) {
                Some((f, words)) => (f, Some((f, format!("{words} of {}, kept: the catalog gives {} no SM count", other.id, gpu.id)))),
                None => (1.0, None),
            },
        };
        let full_us = p.time_us / theirs_idle;
        let its_time = if theirs_idle > 1.0 { "its time on a grid that fills it" } else { "its time" };
        let (time_us, how) = match (other.exp_tps, gpu.exp_tps) {
            (Some(their_rate), Some(my_rate)) => {
                let (theirs, mine) = (exp_us(their_rate), exp_us(my_rate));
                (
                    // A kernel that beat its exponentials at the SFU rate (emulating
                    // some in software) has no matmul share left: the exponentials bound it.
                    (full_us - theirs).max(0.0) * scale + mine,
                    format!(
                        "{its_time} less its exponentials ({theirs:.1} µs at {their_rate} T/s{}) × {scale:.3}, {}, plus the exponentials at {}'s {my_rate} T/s",
                        if theirs >= full_us { ", more than its time" } else { "" },
                        scaled_by(peaks, code.as_ref(), written_for),
                        gpu.id,
                    ),
                )
            }
            _ => (
                full_us * scale,
                format!("× {scale:.3}, {} (no exponential rate of both GPUs in the catalog)", scaled_by(peaks, code.as_ref(), written_for)),
            ),
        };
        let (time_us, how) = match mine_idle {
            Some((f, words)) => (time_us * f, format!("{how}{words}")),
            None => (time_us, how),
        };
        let price = Price::new(
            time_us,
            PriceRule::AttentionSpecModel,
            true,
            format!(
                "{} (no attention of this family and shape measured on {}{}), {how}",
                p.basis,
                gpu.id,
                if other_vendor { " or another GPU of its vendor: the closest measured GPU of any vendor" } else { "" }
            ),
            ATTENTION_SPEC_BAND,
        );
        Some((price, fam))
    }

    /// How kernel family `family`'s matmul share followed the 16-bit peak from the
    /// previous GPU of `newer`'s vendor that measured it to `newer`: the median over the
    /// shapes both measured (this one's direction) of ln(time ratio) ÷ ln(peak ratio),
    /// each time less its exponentials at its GPU's SFU rate. `None` where no GPU of a
    /// lower peak measured the family at a shape `newer` did.
    fn family_elasticity(&self, newer: &Gpu, shape: &AttentionShape, family: &str) -> Option<CodeElasticity> {
        // A direction no pair of GPUs measured (FA2's A100 chart is forward plus backward only): the other's.
        self.family_elasticity_in(newer, shape, family).or_else(|| {
            let other = AttentionShape { backward: !shape.backward, ..*shape };
            self.family_elasticity_in(newer, &other, family).map(|c| CodeElasticity {
                how: format!("{}, {}", c.how, if other.backward { "forward plus backward" } else { "forward" }),
                ..c
            })
        })
    }

    /// [`Pricing::family_elasticity`] in the shape's own direction.
    fn family_elasticity_in(&self, newer: &Gpu, shape: &AttentionShape, family: &str) -> Option<CodeElasticity> {
        let (new_peak, new_exp) = (peak(newer, Dtype::Bf16)?, newer.exp_tps?);
        let want = if shape.backward { Direction::ForwardBackward } else { Direction::Forward };
        let rows_of = |g: &Gpu| -> Vec<&AttentionRow> {
            let ids: Vec<&str> = g.measurement_ids().collect();
            self.measurements
                .attention
                .iter()
                .filter(|r| ids.contains(&&*r.gpu) && r.direction == want && r.kernel.eq_ignore_ascii_case(family))
                .collect()
        };
        let mine = rows_of(newer);
        // The matmul share of a row's time, µs.
        let matmul_us = |r: &AttentionRow, exp_rate: f64| {
            let at = AttentionShape {
                batch: r.batch,
                heads: r.heads,
                seq: r.seq,
                head_dim: r.head_dim,
                causal: r.causal,
                backward: shape.backward,
            };
            at.flops() / (r.tflops * 1e12) * 1e6 - at.exponentials() / (exp_rate * 1e12) * 1e6
        };
        let mut best: Option<(usize, CodeElasticity)> = None;
        for older in self.vendor_peers(newer) {
            let (Some(old_peak), Some(old_exp)) = (peak(older, Dtype::Bf16), older.exp_tps) else { continue };
            if old_peak >= new_peak {
                continue;
            }
            let mut each: Vec<f64> = rows_of(older)
                .into_iter()
                .filter_map(|o| {
                    let n = mine
                        .iter()
                        .find(|n| (n.causal, n.head_dim, n.seq, n.batch, n.heads) == (o.causal, o.head_dim, o.seq, o.batch, o.heads))?;
                    let (a, b) = (matmul_us(o, old_exp), matmul_us(n, new_exp));
                    (a > 0.0 && b > 0.0).then(|| (a / b).ln() / (new_peak / old_peak).ln())
                })
                .collect();
            // The most shapes measured on both; one GPU's rows in the catalog under several ids count once.
            let n = each.len();
            if n > best.as_ref().map_or(0, |b| b.0)
                && let Some(median) = crate::fit::median(&mut each)
            {
                best = Some((
                    n,
                    CodeElasticity {
                        elasticity: median.clamp(0.0, 1.0),
                        how: format!(
                            "what the family's code gained from {} to {} for their peaks (median of {n} shapes both measured",
                            older.id, newer.id
                        ),
                    },
                ));
            }
        }
        best.map(|b| b.1)
    }

    /// What the families `gpu` measured gained from the generation before (the median of
    /// their [`Pricing::family_elasticity`]): the code of a family `gpu` only carries from
    /// them (xformers and FA-Triton on H100, from A100's charts by their ratios) gained what
    /// theirs did.
    fn siblings_elasticity(&self, gpu: &Gpu, shape: &AttentionShape, family: &str) -> Option<CodeElasticity> {
        let each: Vec<(f64, Arc<str>)> = self
            .attention_families(gpu)
            .into_iter()
            .filter(|f| !f.eq_ignore_ascii_case(family))
            .filter_map(|f| self.family_elasticity(gpu, shape, &f).map(|c| (c.elasticity, f)))
            .collect();
        let median = crate::fit::median(&mut each.iter().map(|e| e.0).collect::<Vec<_>>())?;
        let named = each.iter().map(|(e, f)| format!("{f} {e:.2}")).collect::<Vec<_>>().join(", ");
        Some(CodeElasticity {
            elasticity: median,
            how: format!(
                "{family} is carried to {} from the families measured there: the median of what their code gained ({named}",
                gpu.id
            ),
        })
    }

    /// Whether the user measured attention of `gpu` (its id or a `measured_as` one) in `shape`'s
    /// direction: their rows price it, not a faster family of the same silicon.
    pub fn has_user_attention(&self, gpu: &Gpu, shape: &AttentionShape) -> bool {
        // Asked of every attention kernel a projection prices: no scan without the user's files.
        if self.measurements.user_files.is_empty() {
            return false;
        }
        let want = if shape.backward { Direction::ForwardBackward } else { Direction::Forward };
        self.measurements.attention.iter().any(|r| {
            (r.direction == want || r.direction == Direction::Unstated)
                && self.measurements.is_user(&r.from)
                && gpu.measurement_ids().any(|id| id == &*r.gpu)
        })
    }

    fn attention_measured(&self, gpu: &Gpu, shape: &AttentionShape, kernel: Option<&str>) -> Option<(Price, Arc<str>)> {
        let ids: Vec<&str> = gpu.measurement_ids().collect();
        let want = if shape.backward { Direction::ForwardBackward } else { Direction::Forward };
        let rows: Vec<_> = self
            .measurements
            .attention
            .iter()
            .filter(|r| ids.contains(&&*r.gpu) && (r.direction == want || r.direction == Direction::Unstated))
            .filter(|r| kernel.is_none_or(|k| r.kernel.eq_ignore_ascii_case(k)))
            .collect();
        // The user's own rows of this GPU come first, whatever their family's speed: they are
        // of their stack (a user's slower kernel had been passed over for a shipped FA2 chart).
        let users: Vec<_> = rows.iter().copied().filter(|r| self.measurements.is_user(&r.from)).collect();
        let rows = if users.is_empty() { rows } else { users };
        // The nearest head dimension, the same mask where measured, then per kernel family.
        let hd =
            rows.iter().map(|r| r.head_dim).min_by(|a, b| (a / shape.head_dim).ln().abs().total_cmp(&(b / shape.head_dim).ln().abs()))?;
        let same_mask = rows.iter().any(|r| r.head_dim == hd && r.causal == shape.causal);
        let mut best: Option<Fastest> = None;
        let mut best_family: Option<Arc<str>> = None;
        let mut families: Vec<&Arc<str>> = rows.iter().map(|r| &r.kernel).collect();
        families.sort();
        families.dedup();
        for fam in families {
            // A family measured in the wanted direction does not mix in rows whose source did not
            // say what it timed (Azure's one row per family sits among the FA charts' and, at
            // their last length, replaced the chart's value by whichever sorted last).
            let stated = rows.iter().any(|r| &r.kernel == fam && r.head_dim == hd && r.direction == want);
            let mut pts: Vec<(f64, f64, &Arc<str>)> = rows
                .iter()
                .filter(|r| &r.kernel == fam && r.head_dim == hd && (!same_mask || r.causal == shape.causal))
                .filter(|r| !stated || r.direction == want)
                .map(|r| (r.seq.ln(), (r.tflops * self.slower_than_its_rows(gpu, &r.gpu)).ln(), &r.from.source_id))
                .collect();
            if pts.is_empty() {
                continue;
            }
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let x = shape.seq.ln();
            let (ln_tf, ex) = interpolate(&pts.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>(), x);
            let tflops = ln_tf.exp();
            let mut sources: Vec<Arc<str>> = pts.iter().map(|p| p.2.clone()).collect();
            sources.sort();
            sources.dedup();
            if best.as_ref().is_none_or(|b| tflops > b.0) {
                best = Some((tflops, ex || hd != shape.head_dim || !same_mask, fam.clone(), sources));
                best_family = Some(fam.clone());
            }
        }
        let (tflops, mut extrapolated, fam, sources) = best?;
        let mut time_us = shape.flops() / (tflops * 1e12) * 1e6;
        // Rows of another catalog GPU of a higher peak, which `measured_as` names (a user's
        // cut-down part of that silicon): its rates × the two peaks' ratio, said, outside what
        // was measured. They had been this GPU's own: 308 TFLOP/s on a 148 TFLOP/s part.
        // Said of the family that priced it, each GPU whose rows it scaled once.
        let mut slower: Vec<(&str, f64)> = rows
            .iter()
            .filter(|r| best_family.as_ref() == Some(&r.kernel) && r.head_dim == hd)
            .map(|r| (&*r.gpu, self.slower_than_its_rows(gpu, &r.gpu)))
            .filter(|(_, f)| *f < 1.0)
            .collect();
        slower.sort_by(|a, b| a.0.cmp(b.0));
        slower.dedup_by(|a, b| a.0 == b.0);
        let slower_words: String = slower
            .iter()
            .map(|(id, f)| {
                format!("; rows of {id} × {f:.3}, the two 16-bit peaks' ratio (its `measured_as` names that GPU of a higher peak)")
            })
            .collect();
        extrapolated |= !slower.is_empty();
        // The measured rates are of grids that fill the GPU (batch × heads of 16–1024 ×
        // sequence tiles); a grid of fewer query tiles (128 rows each, as FlashAttention
        // splits them) than SMs leaves the rest idle: its rate is that share of the
        // measured one (1 × 1 × 512 at 225 TFLOP/s was priced at 0.15 µs).
        let occupancy = match idle_sms(gpu, shape) {
            Some((f, words)) => {
                time_us *= f;
                words
            }
            None => String::new(),
        };
        let least = rows.iter().map(|r| r.batch * r.heads).fold(f64::INFINITY, f64::min);
        extrapolated |= shape.batch * shape.heads < least;
        let basis = format!(
            "{fam} on {} at head dim {hd}{} ({}){slower_words}{occupancy}",
            gpu.id,
            if same_mask { "" } else { ", other mask" },
            sources.iter().map(|s| &**s).collect::<Vec<_>>().join(", ")
        );
        Some((Price::new(time_us, PriceRule::AttentionTable, extrapolated, basis, ATTENTION_TABLE_BAND), fam))
    }

    /// What `collective` of `bytes` (nccl-tests size) over `gpus` GPUs,
    /// `gpus_per_node` to a node, costs on `gpu`, from measured curves.
    /// The user's rows of the GPU come first: their curves when they make
    /// one; else the shipped rows' price, at the user's measured time where
    /// they measured this collective, size and GPU count, and otherwise × their
    /// measured ÷ priced times at this GPU count in log size, rising through
    /// them (their points of it too few for a curve); without the user's, the evidence's points
    /// of this count that no curve at it priced, the same way. `nic_gbps_per_gpu`: the network of the
    /// query's nodes where the user gave it, else the node preset's; a curve
    /// across nodes measured over another network is carried onto it
    /// ([`Pricing::onto_network`]).
    pub fn collective(&self, gpu: &Gpu, q: &CollectiveQuery) -> Option<Price> {
        // Every field of the query (a field added is a compile error here, not a stale price).
        let CollectiveQuery { collective, bytes, gpus, gpus_per_node, nic_gbps_per_gpu } = *q;
        let key = (collective, bytes.to_bits(), gpus, gpus_per_node, nic_gbps_per_gpu.map(f64::to_bits));
        self.collective_prices.get_or_price(gpu, key, || self.collective_afresh(gpu, q))
    }

    /// [`Pricing::collective`], priced afresh.
    fn collective_afresh(&self, gpu: &Gpu, q: &CollectiveQuery) -> Option<Price> {
        let CollectiveQuery { collective, bytes, gpus, .. } = *q;
        if gpus < 2 {
            return None;
        }
        let m = &self.measurements;
        let users = self.curves(gpu, collective, true);
        if let Some(p) = self.collective_of_rows(gpu, q, true) {
            return Some(p);
        }
        let price = |bytes: f64| {
            let q = CollectiveQuery { bytes, ..*q };
            self.collective_of_rows(gpu, &q, false).or_else(|| self.collective_link_spec(gpu, &q))
        };
        let mut p = price(bytes)?;
        // The user's points of this GPU count and node layout (in a node, or across nodes): a two-node
        // send/recv does not price one inside a node.
        let across = q.across_nodes();
        let at_this_count = |rows: &[usize]| -> Vec<&CollectiveRow> {
            rows.iter()
                .map(|&i| &m.collectives[i])
                .filter(|r| r.gpus == gpus && r.time_us > 0.0 && (r.gpus > r.gpus_per_node.max(1)) == across)
                // Across nodes, of the query's node layout: 16 GPUs as 4 nodes of 4 are not 2 of 8.
                .filter(|r| !across || r.gpus_per_node == q.gpus_per_node)
                .collect()
        };
        let mut points = at_this_count(&users.rows);
        // Without the user's, the shipped points of this count and layout that no curve at this count
        // priced (a sweep's one size, another source's count): 4 nodes of H200 measured at 4 GiB had
        // gone unused for the link rule, 8 GPUs' curve "an upper bound" for 4 that measured slower.
        let users_points = !points.is_empty() || p.rule == PriceRule::CollectiveCurve;
        if !users_points {
            points = at_this_count(&self.curves(gpu, collective, false).rows);
        }
        let whose = if users_points { "the user's" } else { "the evidence's" };
        // The points as a rising curve, as the user's curves are taken ([`rising_in_size`]): rows
        // that fell with size had made one byte more cost a third as much.
        let mut measured: Vec<(f64, f64)> = points.iter().map(|r| (r.size_bytes, r.time_us)).collect();
        rising_in_size(&mut measured);
        if let Some(&(_, t)) = measured.iter().find(|s| s.0 == bytes)
            && let Some(r) = points.iter().filter(|r| r.size_bytes == bytes).min_by(|a, b| a.time_us.total_cmp(&b.time_us))
        {
            let waited =
                if t < r.time_us { format!(": {t:.2} µs, a larger size's, where it measured {:.2}", r.time_us) } else { String::new() };
            let what = if users_points { "the user's measurement" } else { "a measurement" };
            let mut price = Price::new(
                t,
                PriceRule::CollectiveMeasured,
                false,
                format!("{what} of this size at {gpus} GPUs, {} to a node ({}){waited}", r.gpus_per_node, r.from.source_id),
                PriceRule::CollectiveMeasured.band(),
            );
            // Another system's point is held as its neighbours are (a point skipped by the hold
            // had priced its own size under the held price of one byte less); the user's own is
            // their system's, kept.
            if !users_points {
                self.no_faster_than_in_a_node(gpu, q, &mut price);
            }
            return Some(price);
        }
        // Their measured ÷ priced times scale the price, in log size: between two points their
        // ratios interpolated, beyond the outermost its ratio tapered to 1 at 16× (4 octaves) away —
        // a small message's latency says nothing of a large one's bandwidth (a 1 KiB point at 10 µs
        // had priced 1 GiB at 2.7× NVLink). A cut-off at 16× had made one byte more cost less
        // than half as much.
        let ratios: Vec<(f64, f64)> = measured.iter().filter_map(|&(b, t)| Some((b.log2(), (t / price(b)?.time_us).ln()))).collect();
        if let Some(ln_f) = ln_ratio_in_log_size(&ratios, bytes.log2(), POINT_REACH_OCTAVES) {
            let f = ln_f.exp();
            p.time_us *= f;
            p.basis.push_str(&format!(
                "; × {f:.3}, the measured ÷ priced time of {whose} {} point(s) at {gpus} GPUs in log size (between them interpolated, beyond them tapering to 1 at 16×; too few for a curve of their own)",
                measured.len()
            ));
        } else if !points.is_empty() {
            p.basis.push_str(&format!(
                "; {whose} {} point(s) at {gpus} GPUs are of other sizes (over 16× apart): no ratio of theirs scales it",
                points.len()
            ));
        }
        // Scaled by a ratio that changes with size, a flat latency could fall as the message grows:
        // the price rises through the user's points instead (a larger message never takes less).
        if !ratios.is_empty() {
            let scaled =
                |b: f64| Some(price(b)?.time_us * ln_ratio_in_log_size(&ratios, b.log2(), POINT_REACH_OCTAVES).map_or(1.0, f64::exp));
            if let Some(t) = rising_through_points(bytes, &measured, &scaled, POINT_REACH_OCTAVES) {
                if (t / p.time_us - 1.0).abs() > 5e-4 {
                    p.basis.push_str(&format!(
                        "; {t:.2} µs where the scaled price was {:.2}: prices rise with size through {whose} measured points",
                        p.time_us
                    ));
                }
                p.time_us = t;
            }
        }
        self.no_faster_than_in_a_node(gpu, q, &mut p);
        Some(p)
    }

    /// A ring collective across nodes held to the bus bandwidth a measured curve of the GPU
    /// reaches in one node at the same size: every ring (and tree) across nodes also runs
    /// through the links in each node, so it moves no byte faster than a node's own ring. A
    /// user's 8-GPU curve at 10 GB/s had priced 64 of those GPUs from the shipped curves at
    /// 310 GB/s, and `replay --world-size 64` scaled the job's collectives down 28×. The user's
    /// own measurements describe one system, whose larger rings pay their node's whole time
    /// (latency too) and no less than their own smaller rings of the same node layout (16 GPUs
    /// measured at 30 ms had priced 32 at 11.8 from the link rule); shipped curves of a node
    /// bound the bandwidth alone, their latency being another system's (Echo's 16 A100s across
    /// two nodes measured 34.5 µs at 1 KiB, Azure's 8 in one node 41.9).
    fn no_faster_than_in_a_node(&self, gpu: &Gpu, q: &CollectiveQuery, p: &mut Price) {
        if !q.across_nodes() || !matches!(q.collective, Collective::AllReduce | Collective::AllGather | Collective::ReduceScatter) {
            return;
        }
        let Some(k_across) = q.collective.bus_factor(i64::from(q.gpus)) else { return };
        let m = &self.measurements;
        let users = self.curves(gpu, q.collective, true);
        let users_rows = || users.rows.iter().map(|&i| &m.collectives[i]).filter(|r| r.time_us > 0.0);
        // (floor µs, words) of each bound; the highest holds the price.
        let mut bounds: Vec<(f64, String)> = Vec::new();
        let measured = [
            PriceRule::CollectiveCurve,
            PriceRule::CollectiveMeasured,
            PriceRule::CollectiveCounts,
            PriceRule::CollectiveBelowCounts,
            PriceRule::CollectiveAboveCounts,
        ];
        let inside = CollectiveQuery { gpus: q.gpus_per_node, ..*q };
        if let Some(k_in) = q.collective.bus_factor(i64::from(inside.gpus)).filter(|k| *k > 0.0 && inside.gpus >= 2)
            && let Some(node) = self.collective(gpu, &inside).filter(|n| measured.contains(&n.rule))
        {
            let users_node = users_rows().any(|r| r.gpus == inside.gpus && r.gpus <= r.gpus_per_node.max(1));
            let latency = if users_node {
                0.0
            } else {
                self.collective(gpu, &CollectiveQuery { bytes: 8.0, ..inside }).map_or(0.0, |l| l.time_us.min(node.time_us))
            };
            let moving = node.time_us - latency;
            if moving > 0.0 {
                let beyond = if users_node { String::new() } else { format!(" beyond its {latency:.1} µs latency") };
                bounds.push((
                    moving * k_across / k_in,
                    format!(
                        "the bus bandwidth a node of {} reaches at this size{beyond} ({:.1} GB/s: {}): a ring across nodes also runs through the links in each node",
                        inside.gpus,
                        q.bytes * k_in / moving / 1e3,
                        node.basis
                    ),
                ));
            }
        }
        // The user's own rings across nodes of this layout at fewer GPUs.
        let mut counts: Vec<u32> = users_rows()
            .filter(|r| r.gpus < q.gpus && r.gpus > r.gpus_per_node.max(1) && r.gpus_per_node == q.gpus_per_node)
            .map(|r| r.gpus)
            .collect();
        counts.sort_unstable();
        counts.dedup();
        for n in counts {
            if let Some(k_n) = q.collective.bus_factor(i64::from(n)).filter(|k| *k > 0.0)
                && let Some(smaller) = self.collective(gpu, &CollectiveQuery { gpus: n, ..*q })
            {
                bounds.push((
                    smaller.time_us * k_across / k_n,
                    format!(
                        "the bus bandwidth the user's {n} GPUs, {} to a node, reach at this size ({:.1} GB/s: {}): a larger ring of the same nodes moves no byte faster",
                        q.gpus_per_node,
                        q.bytes * k_n / smaller.time_us / 1e3,
                        smaller.basis
                    ),
                ));
            }
        }
        if let Some((floor, words)) = bounds.into_iter().max_by(|a, b| a.0.total_cmp(&b.0))
            && floor > p.time_us * (1.0 + 1e-9)
        {
            p.basis.push_str(&format!("; held to {floor:.2} µs, {words}"));
            p.time_us = floor;
        }
    }

    /// [`Pricing::collective`] from the user's rows of the GPU alone (`user`)
    /// or the shipped ones: `None` when they make no curve for the query.
    fn collective_of_rows(&self, gpu: &Gpu, q: &CollectiveQuery, user: bool) -> Option<Price> {
        let CollectiveQuery { collective, bytes, gpus, gpus_per_node, .. } = *q;
        let m = &self.measurements;
        let multi = q.across_nodes();
        let own = self.curves(gpu, collective, user);
        let all_reduce;
        // An all-gather and a reduce-scatter are the same ring run the other way (NCCL moves
        // the same bytes in the same steps): without a curve of its own, the other's curve.
        let own_system = own.systems[usize::from(multi)].best(gpus, gpus_per_node, multi);
        let mirrored = ring_mirror(collective).filter(|_| own_system.is_none()).map(|other| (other, self.curves(gpu, other, user)));
        let own_or_mirror = own_system.map(|s| (s, None)).or_else(|| {
            let (other, curves) = mirrored.as_ref()?;
            let system = curves.systems[usize::from(multi)].best(gpus, gpus_per_node, multi)?;
            Some((system, Some(format!("no {} curve: the {} curve, the same ring the other way", collective.as_str(), other.as_str()))))
        });
        // Without a curve of its own (or its mirror's), the all-reduce curve at equal bus bytes.
        let (system, size, substitution, mirror_note) = match own_or_mirror {
            Some((system, note)) => (system, bytes, None, note),
            None => {
                let k = collective.bus_factor_in(Some(i64::from(gpus)))?;
                let ar = Collective::AllReduce.bus_factor(i64::from(gpus))?;
                all_reduce = self.curves(gpu, Collective::AllReduce, user);
                let note = (collective != Collective::AllReduce)
                    .then(|| format!("no {} curve: the all-reduce curve at equal bus bytes", collective.as_str()));
                (all_reduce.systems[usize::from(multi)].best(gpus, gpus_per_node, multi)?, bytes * k / ar, note, None)
            }
        };
        // The curve's own collective (the all-reduce where it stands in) by the link rule over the
        // curve's network: how its time falls below its smallest measured size.
        let curve_of = if substitution.is_some() { Collective::AllReduce } else { collective };
        // At the curve's own GPU count and node size: a curve of 8 GPUs priced for 2 had been
        // shaped by the 2-GPU rule, and cost 1.75× its own 8-GPU time below its smallest size
        // (MI325X, 1 KiB). Nothing of the query but what the curve is of.
        let link_rule = |b: f64, n: u32| {
            let curves = CollectiveQuery {
                collective: curve_of,
                bytes: b,
                gpus: n,
                gpus_per_node: system.gpus_per_node,
                nic_gbps_per_gpu: system.nic_gbps_per_gpu,
            };
            self.collective_link_spec(gpu, &curves).map(|p| p.time_us)
        };
        let nvidia = gpu.is_vendor("NVIDIA");
        let CurvePrice { mut time_us, mut rule, extrapolated, what, scale_out } = system.price(curve_of, size, gpus, &link_rule, nvidia)?;
        // In one node no node is added: the scale-out rule's latency stays the largest count's
        // and only the bus factor carries the rest (it had been named the rule across nodes).
        if rule == PriceRule::CollectiveScaleOut && !multi {
            rule = PriceRule::CollectiveAboveCounts;
        }
        // An all-reduce across nodes beyond the measured counts (NCCL's; RCCL tunes its own): the
        // curves measured up to a few nodes are the ring's at large sizes. Beyond them it costs
        // what its ring's added steps cost in NCCL's model, or what NCCL's tree gives up in
        // bandwidth (its model's share) where that is less: NCCL's tuner switches to the tree at
        // hundreds of nodes. The cheaper increment, so that the price never falls as bytes grow.
        // Latency NCCL's model adds beyond the measured count, µs: added after the curve is carried
        // onto the query's network, which scales bandwidth, not a step's fixed cost.
        let mut steps_added: Option<(f64, String)> = None;
        // (the largest measured count, the tree's bandwidth increment before the network carry, the ring's steps)
        let mut all_reduce_beyond: Option<(u32, f64, f64)> = None;
        if let Some(ScaleOut { largest: a, latency_us: latency, bandwidth_us: bandwidth }) =
            scale_out.filter(|_| nvidia && collective == Collective::AllReduce && substitution.is_none() && multi)
        {
            // NCCL's model also corrects the tree's share down at medium sizes
            // (`treeCorrectionFactor`), not monotonically in the size: left out, so that more
            // bytes never cost less.
            let tree_extra = bandwidth * (1.0 / TREE_BUS_SHARE - 1.0);
            time_us = latency + bandwidth;
            all_reduce_beyond = Some((a, tree_extra, nccl_ring_steps_beyond_us(collective, gpus, a, system.gpus_per_node)));
        }
        // An all-gather or a reduce-scatter priced from the all-reduce's curve beyond its counts:
        // that curve's small sizes are the all-reduce's latency (its tree, in-switch reduction, the
        // measured network's fixed cost), not a ring step's, so its steps are not carried (A3 Mega's
        // 16-GPU all-reduce made each of the 511 steps of a 400 MB all-gather over 512 H100s 23 µs
        // of latency). The ring's added steps as NCCL's tuning model charges them instead.
        let ring_from_all_reduce = nvidia && substitution.is_some() && ring_mirror(collective).is_some() && multi;
        if let Some(ScaleOut { largest: a, .. }) = scale_out.filter(|_| ring_from_all_reduce) {
            let extra = nccl_ring_steps_beyond_us(collective, gpus, a, system.gpus_per_node);
            let more = gpus - a;
            steps_added = Some((
                extra,
                format!("its ring's {more} step{} beyond {a} GPUs, {extra:.0} µs in NCCL's tuning model", if more == 1 { "" } else { "s" }),
            ));
        }
        let network = if multi {
            // The latency the network does not move: the same rule's price of the smallest message.
            let latency = system.price(curve_of, LATENCY_BYTES, gpus, &link_rule, nvidia).map_or(0.0, |c| c.time_us).min(time_us);
            self.onto_network(gpu, q, system, time_us, latency)
        } else {
            None
        };
        let carried = network.as_ref().map_or(1.0, |n| n.0);
        if let Some((_, t, _)) = &network {
            time_us = *t;
        }
        // The cheaper of the tree's bandwidth (carried onto the network, as bandwidth is) and the
        // ring's steps (latency, which is not), compared as charged: more bytes never cost less.
        if let Some((a, tree_extra, ring_extra)) = all_reduce_beyond {
            let (tree, share) = (tree_extra * carried, TREE_BUS_SHARE);
            if tree < ring_extra {
                steps_added = Some((
                    tree,
                    format!(
                        "as NCCL's tree: {share} of the ring's bus bandwidth (NCCL's tuning model), {tree:.0} µs on this network, less than its ring's added steps ({ring_extra:.0} µs in that model)"
                    ),
                ));
            } else {
                steps_added = Some((
                    ring_extra,
                    format!(
                        "as NCCL's ring: its steps beyond {a} GPUs, {ring_extra:.0} µs in NCCL's tuning model, less than its tree's bandwidth ({tree:.0} µs at {share} of the ring's)"
                    ),
                ));
            }
        }
        let mut substitution = substitution;
        // The band of the link rule's price where it holds the curve's (its size's).
        let mut held_band = None;
        if substitution.is_some() {
            // Single measured points of the collective itself (too few for a
            // curve) scale the all-reduce curve: the geometric mean of their ratios.
            let k = collective.bus_factor_in(Some(i64::from(gpus)));
            let points: Vec<OwnPoint> = own
                .rows
                .iter()
                .map(|&i| &m.collectives[i])
                .filter(|r| r.gpus == gpus)
                .filter_map(|r| {
                    let ar = Collective::AllReduce.bus_factor(i64::from(gpus))?;
                    let at = r.size_bytes * k? / ar;
                    let curve_us = system.price(curve_of, at, gpus, &link_rule, nvidia)?.time_us;
                    Some(OwnPoint { bytes: r.size_bytes, time_us: r.time_us, curve_us, curve_busbw_gbps: at * ar / curve_us / 1e3 })
                })
                .collect();
            let in_switch = !points.is_empty() && points.iter().all(|p| gpu.above_its_links(p.curve_busbw_gbps));
            if let Some((f, n)) = geometric_mean(points.iter().map(|p| p.time_us / p.curve_us)) {
                if f > 1.0 && in_switch && !multi {
                    // Slower than an all-reduce curve that ran above the wire rate (in-switch
                    // reduction): what the points measured is the ring's bandwidth, a ceiling, not
                    // a factor on every size. As a factor, 8 × H200's one all-gather at 16 GiB
                    // (361 GB/s against the all-reduce's 480) had made every smaller all-gather
                    // 1.33× slower too, slower than H100's without any point (107 µs against 85 at 16 MiB).
                    // In one node nothing is carried onto a network: the points' rate as it ran.
                    let (line, slowest) = points
                        .iter()
                        .map(|p| (bytes * p.time_us / p.bytes, p))
                        .max_by(|a, b| a.0.total_cmp(&b.0))
                        .expect("points is not empty");
                    // Said where it binds (below the point's size the all-reduce's curve stands as it is).
                    if line > time_us {
                        time_us = line;
                        substitution = substitution.map(|s| {
                            format!(
                                "{s}, held to the {} bandwidth it measured itself ({:.1} GB/s bus bandwidth at {} bytes: the all-reduce's in-switch reduction does not carry over to it)",
                                collective.as_str(),
                                slowest.bytes * k.unwrap_or(1.0) / slowest.time_us / 1e3,
                                slowest.bytes
                            )
                        });
                    }
                } else {
                    time_us *= f;
                    substitution =
                        substitution.map(|s| format!("{s}, × {f:.3} from {n} measured point(s) of the {} itself", collective.as_str()));
                }
            } else if let Some(spec) = self.collective_link_spec_of(gpu, q, false)
                && spec.time_us > time_us + steps_added.as_ref().map_or(0.0, |s| s.0)
            {
                // Hopper and Blackwell switches reduce in the switch (NVLS): their
                // all-reduce curves pass the wire rate, which an all-gather or a
                // reduce-scatter never gets (8 × H200: 361 / 363 GB/s against the
                // all-reduce's 480, `mle-h200-collectives`). Without points of its
                // own the collective is held to the link rule's price.
                (time_us, rule, held_band) = (spec.time_us, spec.rule, Some(spec.band));
                // The link rule prices the ring's steps its own way.
                steps_added = None;
                substitution = substitution.map(|s| {
                    format!(
                        "{s}, held to the link rule (the all-reduce's in-switch reduction and shared NICs do not carry over to the {})",
                        collective.as_str()
                    )
                });
            }
        }
        // Added after the network carry, and said after it.
        let steps_note = steps_added.map(|(extra, words)| {
            time_us += extra;
            words
        });
        // NCCL's all-gather and reduce-scatter have no tree: a ring of n − 1 steps, each moving
        // bytes/n. Beyond the largest measured count a, each step is priced as the same step at
        // a (the collective of bytes·a/n there, carried onto this network), so the latency grows
        // with n, not log n (Polaris' 16 KiB all-gather: 65 µs over 32 A100s, 8.2 ms over 1024).
        // Never below the rule above.
        // Across nodes only: Polaris' runs are what the rule was checked on, and in a node
        // (an NVLink domain beyond the measured GPUs) NCCL has NVLS and the steps are cheaper.
        let largest = system.curves.iter().max_by_key(|c| c.0);
        if let Some((a, curve)) =
            largest.filter(|(a, _)| ring_mirror(collective).is_some() && !ring_from_all_reduce && multi && *a >= 2 && gpus > *a)
        {
            let a = *a;
            let (step_bytes, steps) = (bytes * f64::from(a) / f64::from(gpus), f64::from(gpus - 1) / f64::from(a - 1));
            // A curve that measured no small message says nothing of a step's latency (B200's
            // 32-GPU sweep starts at 32 KiB and stays at 357 µs up to 2 MiB: overhead, not
            // 31 steps of 11.5 µs): the link rule's ring steps instead.
            let smallest = curve.points.first().map_or(f64::INFINITY, |p| p.0.exp());
            let ring = if curve.measures_latency() {
                self.collective_of_rows(gpu, &CollectiveQuery { bytes: step_bytes, gpus: a, ..*q }, user).map(|step| {
                    let basis = format!(
                        "a ring of {} steps beyond {}'s largest count, {} × the price of the same {} of {} bytes over {a} GPUs ({:.1} µs: {})",
                        gpus - 1,
                        system.label,
                        format_args!("{}/{}", gpus - 1, a - 1),
                        collective.as_str(),
                        if step_bytes < 10.0 { format!("{step_bytes:.2}") } else { format!("{step_bytes:.0}") },
                        step.time_us,
                        step.basis
                    );
                    (step.time_us * steps, basis)
                })
            } else {
                self.collective_link_spec(gpu, q).map(|link| {
                    let basis = format!(
                        "a ring of {} steps beyond {}'s largest count, by the link rule ({}): its curve at {a} GPUs starts at {smallest:.0} bytes, no small message measured",
                        gpus - 1,
                        system.label,
                        link.basis
                    );
                    (link.time_us, basis)
                })
            };
            if let Some((ring, basis)) = ring.filter(|(t, _)| *t > time_us) {
                return Some(Price::new(ring, PriceRule::CollectiveRing, true, basis, PriceRule::CollectiveRing.band()));
            }
        }
        // A twin's curve ([`Pricing::curves`]): said whose, and why it stands for this GPU.
        let twin = of_another(gpu, &system.gpu).then(|| format!("; {}'s curve: the same silicon and link as {}", system.gpu, gpu.id));
        let basis = format!(
            "{} {}{}{}{}{}{}{}",
            system.label,
            what,
            twin.unwrap_or_default(),
            if user { " (the user's measurements)" } else { "" },
            network.map(|(_, _, note)| format!("; {note}")).unwrap_or_default(),
            mirror_note.map(|s| format!("; {s}")).unwrap_or_default(),
            substitution.map(|s| format!("; {s}")).unwrap_or_default(),
            steps_note.map(|s| format!("; then {s}")).unwrap_or_default()
        );
        // Beyond the largest measured count the band widens with how far the price reaches.
        // Below the smallest, likewise with how far below (Echo's A100 all-reduce over 2 and 4
        // GPUs from its 8: median |error| 14.2 % and 3.9 %, band 13.4 % and 10 %).
        let band = held_band.unwrap_or_else(|| match (rule, scale_out) {
            (PriceRule::CollectiveScaleOut | PriceRule::CollectiveAboveCounts, Some(s)) => band_beyond_counts(s.largest, gpus),
            (PriceRule::CollectiveBelowCounts, _) => band_beyond_counts(system.curves.iter().map(|c| c.0).min().unwrap_or(gpus), gpus),
            _ => rule.band(),
        });
        Some(Price::new(time_us, rule, extrapolated, basis, band))
    }

    /// A curve measured across nodes carried onto the query's network (the
    /// given GB/s of NICs per GPU, else the node preset's): the factor on its
    /// time beyond its latency (the curve's price of its smallest message at this
    /// count: a network's speed moves bytes, not a step's fixed cost), the link
    /// rule's bandwidth time over the query's network ÷ over the curve's (the
    /// networks table's, else the node preset's). The rule's bus bandwidth is the
    /// node's NICs' share, never above its in-node links, so no network carries
    /// it past them. One factor at every size: more bytes never cost less (the
    /// link rule's whole price, latency and all, had been the factor, and fell
    /// with size: 32 MiB over 16 H100s priced below 16 MiB, 674 against 679 µs).
    /// `None` where the networks are the same. A faster network never prices
    /// slower: A3 Mega's 25 GB/s curve had priced H100 at 50 GB/s (its preset)
    /// and a given 49 GB/s by the link rule alone, faster.
    fn onto_network(&self, gpu: &Gpu, q: &CollectiveQuery, system: &System, time_us: f64, latency_us: f64) -> Option<(f64, f64, String)> {
        let (preset, _) = self.catalog.nic_gbps_per_gpu(&gpu.id);
        let query = q.nic_gbps_per_gpu.unwrap_or(preset);
        let (curve, whose) = match system.nic_gbps_per_gpu {
            Some(nic) => (nic, "its source's network"),
            None => (preset, "its source states no network: the node preset's taken"),
        };
        if (query - curve).abs() <= 1e-9 * curve {
            return None;
        }
        // The link rule's time beyond its latency is bytes over its bus bandwidth: the factor is
        // the ratio of its bus bandwidths over the two networks, whatever the size.
        let busbw = |nic: f64| self.link_bus(gpu, &q.over_network(Some(nic))).busbw;
        let (over_curve, over_query) = (busbw(curve), busbw(query));
        if !(over_curve > 0.0 && over_query > 0.0) {
            return None;
        }
        let f = over_curve / over_query;
        let carried = latency_us + (time_us - latency_us).max(0.0) * f;
        let words = format!(
            "its time beyond its {latency_us:.1} µs latency × {f:.3} for {query} GB/s of network per GPU where the curve ran over {curve} ({whose}): the link rule's bandwidth time over the one ÷ over the other"
        );
        // However fast the network, a ring across nodes still crosses the node's own links:
        // never below the link rule's whole price over an unbounded network (its in-node bound),
        // nor below the curve itself where it already ran faster than that.
        let bound = self.collective_link_spec(gpu, &q.over_network(Some(f64::INFINITY)))?.time_us.min(time_us);
        if carried < bound {
            return Some((
                f,
                bound,
                format!(
                    "{:.1} µs, the link rule's bound in a node ({} GB/s of links), which {query} GB/s of network per GPU would pass ({words})",
                    bound, gpu.link_gbps
                ),
            ));
        }
        Some((f, carried, words))
    }
}

impl Pricing {
    /// A point-to-point transfer of `bytes` between two GPUs (a pipeline's
    /// activations): in a node the two-GPU send/recv by the collective rules
    /// (its own curves, else the all-reduce curves at equal bus bytes, else the
    /// link rule); across nodes the user's two-node send/recv curve where given, else the
    /// link rule over one GPU's NIC share, since the shipped multi-node curves are of 16
    /// GPUs and more (over `nic_gbps_per_gpu` where the user gave it).
    pub fn point_to_point(&self, gpu: &Gpu, bytes: f64, across_nodes: bool, nic_gbps_per_gpu: Option<f64>) -> Option<Price> {
        self.point_to_point_with_fits(gpu, bytes, across_nodes, nic_gbps_per_gpu, [None, None])
    }

    /// [`Pricing::point_to_point`] where a calibration profile's α–β fit of the tier prices it
    /// first (its α plus the bytes at its bus bandwidth): what a pipeline's transfer costs in
    /// `project --profile` and `hw cost send_recv --gpus 2 --profile`.
    pub fn point_to_point_with_fits(
        &self,
        gpu: &Gpu,
        bytes: f64,
        across_nodes: bool,
        nic_gbps_per_gpu: Option<f64>,
        fits: [Option<TierFit>; 2],
    ) -> Option<Price> {
        if let Some(tier) = fits[usize::from(across_nodes)] {
            // A point-to-point transfer's bus bytes are its bytes; its group is not the fit's.
            let outside = tier.outside(bytes, 1.0, None);
            return Some(Price::new(
                tier.fit.transfer_us(bytes),
                PriceRule::CollectiveProfileFit,
                outside.is_some(),
                format!(
                    "{} {}{}",
                    if across_nodes { "across nodes" } else { "in a node" },
                    profile_fit_words(&tier.fit),
                    outside.map_or(String::new(), |w| format!(" ({w})"))
                ),
                tier.band.max(COLLECTIVE_CURVE_BAND),
            ));
        }
        if across_nodes {
            // The user's send/recv curve between two nodes (nccl-tests `sendrecv_perf`) first.
            let q = CollectiveQuery::new(Collective::SendRecv, bytes, 2, 1).over_network(nic_gbps_per_gpu);
            let key = (bytes.to_bits(), nic_gbps_per_gpu.map(f64::to_bits));
            self.transfer_prices
                .get_or_price(gpu, key, || self.collective_of_rows(gpu, &q, true).or_else(|| self.collective_link_spec(gpu, &q)))
        } else {
            self.collective(gpu, &CollectiveQuery::new(Collective::SendRecv, bytes, 2, 2))
        }
    }

    /// [`PriceRule::CollectiveLinkSpec`]: `collective` of `bytes` over `gpus`
    /// on a GPU without curves, as α + bus factor × bytes ÷ (share × link),
    /// the link being the catalog's in a node and the NICs' share per GPU
    /// across nodes (`nic_gbps_per_gpu` where the user gave it, else [`Catalog::nic_gbps_per_gpu`]).
    fn collective_link_spec(&self, gpu: &Gpu, q: &CollectiveQuery) -> Option<Price> {
        self.collective_link_spec_of(gpu, q, true)
    }

    /// What the measured all-reduce curves say about links in general ([`LinkShares`]), learned once.
    fn link_shares(&self) -> &LinkShares {
        self.link_shares.get_or_init(|| LinkShares::learn(&self.measurements, &self.catalog))
    }

    /// The link rule's bus bandwidth for `q`, GB/s: in a node the catalog link's measured share;
    /// across nodes a ring's chunk crosses each node boundary once per node, so the share of the
    /// node's NICs together (`across`: their GB/s), never above the in-node rate. The one number
    /// the rule's price and the carry of a curve onto another network both take.
    fn link_bus(&self, gpu: &Gpu, q: &CollectiveQuery) -> LinkBus {
        let shares = self.link_shares();
        let intra_busbw = shares.intra_share * gpu.link_gbps;
        if !q.across_nodes() {
            return LinkBus { busbw: intra_busbw, across: None };
        }
        let CollectiveQuery { collective, gpus, gpus_per_node, nic_gbps_per_gpu, .. } = *q;
        let nic = nic_gbps_per_gpu.unwrap_or_else(|| self.catalog.nic_gbps_per_gpu(&gpu.id).0);
        let gpn = gpus_per_node.max(1);
        let node_nics = if collective == Collective::AllToAll {
            // An all-to-all sends (n − g)/n of each GPU's data to other nodes through
            // its own NIC share, against (n − 1)/n bus bytes: no ring shares the NICs.
            nic * f64::from(gpus - 1) / f64::from(gpus.saturating_sub(gpn).max(1))
        } else {
            nic * f64::from(gpn)
        };
        LinkBus { busbw: (shares.inter_share * node_nics).min(intra_busbw), across: Some(node_nics) }
    }

    /// [`Pricing::collective_link_spec`], with an all-gather's or reduce-scatter's ring
    /// steps across nodes (`ring`) or without them: the bound an all-reduce curve standing in
    /// for one is held to at its measured counts, where the curve measured the latency.
    fn collective_link_spec_of(&self, gpu: &Gpu, q: &CollectiveQuery, ring: bool) -> Option<Price> {
        let CollectiveQuery { collective, bytes, gpus, nic_gbps_per_gpu, .. } = *q;
        let k = collective.bus_factor(i64::from(gpus)).filter(|k| *k > 0.0)?;
        let shares = self.link_shares();
        let LinkBus { busbw, across } = self.link_bus(gpu, q);
        let mut what = format!(
            "catalog link {} GB/s × {:.2} (median share of {} measured system(s))",
            gpu.link_gbps, shares.intra_share, shares.intra_systems
        );
        let (alpha_us, step_us) = match across {
            Some(node_nics) => {
                let rule = match nic_gbps_per_gpu {
                    Some(nic) => format!("{nic} GB/s of network per GPU, as the system states"),
                    None => self.catalog.nic_gbps_per_gpu(&gpu.id).1,
                };
                what = format!(
                    "{rule}; the node's {node_nics:.0} GB/s of NICs × {:.2} (median share of {} measured multi-node system(s)), at most the {what}",
                    shares.inter_share, shares.inter_systems
                );
                (shares.inter_alpha_us, shares.inter_step_us)
            }
            // In a node (one NVLink domain) the steps are short and NVLS serves the larger
            // domains: α alone, as the nodes measured it.
            None => (shares.intra_alpha_us, 0.0),
        };
        if !(busbw > 0.0 && alpha_us.is_finite()) {
            return None;
        }
        let mut basis = format!("{what}, α {alpha_us:.1} µs (the median small-message time of those systems)");
        // An all-gather's or reduce-scatter's ring (no tree) takes n − 1 steps: the
        // same per-step latency as the curve rule's ring beyond its largest count.
        let ring_us = step_us * f64::from(gpus - 1);
        let alpha_us = if ring && ring_mirror(collective).is_some() && ring_us > alpha_us {
            basis = format!(
                "{what}, latency {ring_us:.1} µs: a ring of {} steps of {step_us:.2} µs (the median over those systems' all-reduce curves of the small-message time at their largest count n ÷ n − 1, an all-gather there priced as the all-reduce of equal bus bytes)",
                gpus - 1
            );
            ring_us
        } else {
            alpha_us
        };
        let time_us = alpha_us + k * bytes / (busbw * 1e3);
        Some(Price::new(time_us, PriceRule::CollectiveLinkSpec, true, basis, link_spec_band(bytes)))
    }
}

/// The collectives NCCL runs only as a ring (no tree), each the other run the other way: an
/// all-gather's mirror is the reduce-scatter (the same bytes in the same steps), and back.
fn ring_mirror(collective: Collective) -> Option<Collective> {
    match collective {
        Collective::AllGather => Some(Collective::ReduceScatter),
        Collective::ReduceScatter => Some(Collective::AllGather),
        _ => None,
    }
}

/// The link rule's bus bandwidth for one query ([`Pricing::link_bus`]).
struct LinkBus {
    /// GB/s.
    busbw: f64,
    /// Across nodes, the node's NICs together, GB/s.
    across: Option<f64>,
}

/// What the measured all-reduce curves say about links in general: the share
/// of the nominal link (in a node) or of the node's NICs (across nodes) reached as bus
/// bandwidth at each system's largest size, and the small-message time; medians
/// over the systems.
#[derive(Debug, Clone, Copy)]
struct LinkShares {
    intra_share: f64,
    intra_alpha_us: f64,
    intra_systems: usize,
    inter_share: f64,
    inter_alpha_us: f64,
    /// Across nodes, the small-message time per ring step (÷ n − 1 at the curve's largest count n), median.
    inter_step_us: f64,
    inter_systems: usize,
}

impl LinkShares {
    fn learn(m: &Measurements, catalog: &Catalog) -> LinkShares {
        let rows: Vec<&CollectiveRow> = m.collectives.iter().filter(|r| r.collective == Collective::AllReduce).collect();
        let median = |mut v: Vec<f64>| -> f64 {
            v.retain(|x| x.is_finite());
            v.sort_by(f64::total_cmp);
            if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
        };
        let mut learned = [(Vec::new(), Vec::new(), Vec::new()), (Vec::new(), Vec::new(), Vec::new())];
        for (multi, (shares, alphas, steps)) in learned.iter_mut().enumerate() {
            for system in Systems::of(&rows, multi == 1, m).0 {
                // The catalog GPU the system measured (its id, or one measured as it).
                let gpu_id = &*system.gpu;
                let Some(gpu) = catalog.gpus.iter().find(|g| g.id == gpu_id || g.measured_as.iter().any(|a| a == gpu_id)) else {
                    continue;
                };
                let Some((n, curve)) = system.curves.iter().max_by_key(|c| c.0) else { continue };
                let Some(&(x, y)) = curve.points.last() else { continue };
                let busbw_gbps = Collective::AllReduce.bus_factor(i64::from(*n)).unwrap_or(0.0) * x.exp() / (y.exp() * 1e3);
                let link = if multi == 1 {
                    match catalog.node_of(&gpu.id) {
                        Some(_) => catalog.nic_gbps_per_gpu(&gpu.id).0 * f64::from(system.gpus_per_node.max(1)),
                        None => continue,
                    }
                } else {
                    gpu.link_gbps
                };
                shares.push(busbw_gbps / link);
                // Only a sweep that measured small messages says what their latency is.
                if curve.measures_latency() {
                    let latency = curve.latency_us(&|_| None);
                    alphas.push(latency);
                    if multi == 1 {
                        steps.push(latency / f64::from(n.saturating_sub(1).max(1)));
                    }
                }
            }
        }
        let [(intra_s, intra_a, _), (inter_s, inter_a, inter_t)] = learned;
        LinkShares {
            intra_systems: intra_s.len(),
            inter_systems: inter_s.len(),
            intra_share: median(intra_s),
            intra_alpha_us: median(intra_a),
            inter_share: median(inter_s),
            inter_alpha_us: median(inter_a),
            inter_step_us: median(inter_t),
        }
    }
}

/// One operation to price (`tracecast hw cost`).
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    /// A GEMM.
    Gemm(GemmShape),
    /// An attention kernel, of a kernel family or the fastest measured.
    Attention(AttentionShape, Option<String>),
    /// A collective.
    Collective(CollectiveQuery),
}

/// A collective to price: which, of `bytes` (nccl-tests size) over `gpus`,
/// `gpus_per_node` to a node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollectiveQuery {
    /// Which.
    pub collective: Collective,
    /// nccl-tests size, bytes.
    pub bytes: f64,
    /// GPUs.
    pub gpus: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// Network per GPU across nodes, GB/s, where the user gave it (else the node preset's).
    pub nic_gbps_per_gpu: Option<f64>,
}

impl CollectiveQuery {
    /// `collective` of `bytes` over `gpus`, `gpus_per_node` to a node, on the node preset's network.
    pub fn new(collective: Collective, bytes: f64, gpus: u32, gpus_per_node: u32) -> CollectiveQuery {
        CollectiveQuery { collective, bytes, gpus, gpus_per_node, nic_gbps_per_gpu: None }
    }

    /// The same over `nic_gbps_per_gpu` GB/s of network per GPU where given.
    pub fn over_network(self, nic_gbps_per_gpu: Option<f64>) -> CollectiveQuery {
        CollectiveQuery { nic_gbps_per_gpu, ..self }
    }

    /// GPUs a node as the price takes them: at least one, at most the query's GPUs.
    fn node_size(&self) -> u32 {
        self.gpus_per_node.clamp(1, self.gpus.max(1))
    }

    /// Whether its GPUs span more than one node.
    fn across_nodes(&self) -> bool {
        self.gpus > self.gpus_per_node.max(1)
    }
}

/// A priced operation, as `hw cost` prints and writes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quote {
    /// The GPU.
    pub gpu: String,
    /// The operation in words.
    pub operation: String,
    /// Time, µs.
    pub time_us: f64,
    /// Achieved TFLOP/s (GEMM, attention).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
    /// Fraction of the dtype's peak (GEMM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fraction_of_peak: Option<f64>,
    /// nccl-tests bus bandwidth, GB/s (collectives).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busbw_gbps: Option<f64>,
    /// The rule.
    pub rule: PriceRule,
    /// The rule in words.
    pub rule_description: &'static str,
    /// Outside the measured range.
    pub extrapolated: bool,
    /// What priced it.
    pub basis: String,
    /// Relative band of the rule (its measured error).
    pub band: f64,
}

impl Pricing {
    /// A collective where a calibration profile's α–β fits price a tier, `fits` (in a node,
    /// across nodes; each with its relative 95 % band): in a node the g-GPU collective, across
    /// nodes the k-node collective at one GPU per node of each GPU's 1/g share (every GPU of a
    /// node drives its own NIC share); a tier without a fit by [`Pricing::collective`]. Without
    /// a fit of a tier the query crosses, [`Pricing::collective`] alone. The one price
    /// `project`, `search` and `hw cost --profile` give.
    pub fn collective_with_fits(&self, gpu: &Gpu, q: &CollectiveQuery, fits: [Option<TierFit>; 2]) -> Option<Price> {
        let CollectiveQuery { collective, bytes, gpus, nic_gbps_per_gpu, .. } = *q;
        let g = q.node_size();
        let nodes = gpus.div_ceil(g);
        let crosses = [g > 1, nodes > 1];
        if gpus < 2 || !(0..2).any(|t| crosses[t] && fits[t].is_some()) {
            return self.collective(gpu, q);
        }
        if collective == Collective::AllToAll {
            return self.all_to_all_with_fits(gpu, q, fits);
        }
        let (mut time_us, mut band, mut extrapolated, mut parts) = (0.0, 0.0_f64, false, Vec::new());
        for (tier, (ranks, share)) in [(g, bytes), (nodes, bytes / f64::from(g))].into_iter().enumerate() {
            if !crosses[tier] {
                continue;
            }
            let name = if tier == 0 { "in a node" } else { "across nodes" };
            match fits[tier] {
                Some(tier_fit) => {
                    let t = tier_fit.fit.collective_us(collective, share, i64::from(ranks))?;
                    // A fit across nodes was fitted on the whole group's collectives (16 ranks of
                    // 2 nodes, k(16)·S): the query is checked as that whole collective.
                    let (asked_bytes, asked_ranks) = if tier == 0 { (share, ranks) } else { (bytes, gpus) };
                    let k = collective.bus_factor_in(Some(i64::from(asked_ranks))).filter(|k| *k > 0.0).unwrap_or(1.0);
                    let outside = tier_fit.outside(asked_bytes, k, Some(i64::from(asked_ranks)));
                    parts.push(format!(
                        "{name} {} over {ranks} ranks: {t:.1} µs{}",
                        profile_fit_words(&tier_fit.fit),
                        outside.as_ref().map_or(String::new(), |w| format!(" ({w})"))
                    ));
                    time_us += t;
                    band = band.max(tier_fit.band.max(COLLECTIVE_CURVE_BAND));
                    extrapolated |= outside.is_some();
                }
                None => {
                    let tier_query = if tier == 0 {
                        CollectiveQuery::new(collective, share, ranks, ranks)
                    } else {
                        CollectiveQuery::new(collective, share, ranks, 1).over_network(nic_gbps_per_gpu)
                    };
                    let p = self.collective(gpu, &tier_query)?;
                    parts.push(format!("{name} {:.1} µs: {} ({})", p.time_us, p.rule.describe(), p.basis));
                    time_us += p.time_us;
                    band = band.max(p.band);
                    extrapolated |= p.extrapolated;
                }
            }
        }
        Some(Price::new(time_us, PriceRule::CollectiveProfileFit, extrapolated, parts.join("; "), band))
    }

    /// [`Pricing::collective_with_fits`] of an all-to-all of `bytes` per GPU: its share to
    /// the node's other GPUs and its share to other nodes move at the same time, the slower
    /// bounds it — in a node the g-GPU all-to-all of the node's share (or the fit over its
    /// bytes), across nodes the NIC's point-to-point transfer (or the fit).
    fn all_to_all_with_fits(&self, gpu: &Gpu, q: &CollectiveQuery, fits: [Option<TierFit>; 2]) -> Option<Price> {
        let CollectiveQuery { bytes, gpus, nic_gbps_per_gpu, .. } = *q;
        let g = q.node_size();
        let (nf, gf) = (f64::from(gpus), f64::from(g));
        let (intra, inter) = ((gf - 1.0) / nf * bytes, (nf - gf) / nf * bytes);
        let mut tiers: Vec<(f64, f64, bool, String)> = Vec::new();
        // A fit's basis says its tier; another rule's is said with its rule.
        let tier = |p: Price, name: &str| {
            let words =
                if p.rule == PriceRule::CollectiveProfileFit { p.basis } else { format!("{name} {} ({})", p.rule.describe(), p.basis) };
            (p.time_us, p.band, p.extrapolated, words)
        };
        if intra > 0.0 {
            // A fit prices the share's bytes as one transfer; the measured base the node's all-to-all of its share.
            let p = match fits[0] {
                Some(_) => self.point_to_point_with_fits(gpu, intra, false, None, fits)?,
                None => self.collective(gpu, &CollectiveQuery::new(Collective::AllToAll, bytes * gf / nf, g, g))?,
            };
            tiers.push(tier(p, "in a node"));
        }
        if inter > 0.0 {
            tiers.push(tier(self.point_to_point_with_fits(gpu, inter, true, nic_gbps_per_gpu, fits)?, "across nodes"));
        }
        let slowest = tiers.iter().map(|t| t.0).fold(0.0, f64::max);
        Some(Price::new(
            slowest,
            PriceRule::CollectiveProfileFit,
            tiers.iter().any(|t| t.2),
            format!(
                "the slower of its shares moving at once: {}",
                tiers.iter().map(|t| format!("{} {:.1} µs", t.3, t.0)).collect::<Vec<_>>().join("; ")
            ),
            tiers.iter().map(|t| t.1).fold(0.0, f64::max),
        ))
    }

    /// Prices `op` on `gpu`, a GEMM corrected by `profile`'s traces of that
    /// GPU where it has them — or of GPU `lent_by`, whose profile prices a GPU
    /// without traces ([`crate::shipped::similar`]); `Err` says why nothing could.
    pub fn quote(
        &self,
        gpu: &Gpu,
        op: &Operation,
        profile: Option<&crate::profile::Profile>,
        lent_by: Option<&str>,
    ) -> Result<Quote, String> {
        let (operation, price, tflops, fraction_of_peak, busbw_gbps) = match op {
            Operation::Gemm(s) => {
                let what = format!("gemm {}×{}×{}×{} {}", s.batch, s.m, s.n, s.k, s.dtype.as_str());
                let correction = profile.and_then(|p| p.table_correction(crate::work::KernelClass::Gemm, Some(s.dtype)));
                // A format nothing measured (FP32 on CUDA cores) by the user's fit of this GPU's
                // GEMMs in it, as `project` prices it with that profile (not a lender's: its
                // efficiency is of another GPU's peak).
                let fit = profile.filter(|_| lent_by.is_none()).and_then(|p| profile_gemm_fit(p, s.dtype));
                let by_fit = || fit.map(|f| gemm_by_profile_fit(f, gpu, s));
                let p = self.gemm_corrected_by(gpu, s, correction, lent_by).or_else(by_fit).ok_or_else(|| {
                    let dtype = s.dtype.as_str();
                    match peak(gpu, s.dtype) {
                        None => format!("{what} on {}: no measured {dtype} table and no {dtype} peak in the catalog to price it", gpu.id),
                        // The spec model learns how time follows shape from other GPUs' tables of the dtype.
                        Some(_) => format!(
                            "{what} on {}: no measured {dtype} GEMMs of it nor of another GPU to learn how their time follows shape (give a sweep of {dtype} GEMMs with --measurements){}",
                            gpu.id,
                            // The tables' `f32` rows ran on TF32 tensor cores, as PyTorch's FP32 matmuls do with TF32 allowed.
                            if s.dtype == Dtype::Fp32 && peak(gpu, Dtype::Tf32).is_some() {
                                "; FP32 matmuls with TF32 allowed (torch.backends.cuda.matmul.allow_tf32, XLA's default) run on TF32 tensor cores: --dtype tf32 prices those"
                            } else {
                                ""
                            }
                        ),
                    }
                })?;
                let tf = s.flops() / p.time_us * 1e-6;
                // A fit's share is of the peak it was fitted against (FP32 GEMMs that ran on TF32
                // tensor cores: of the TF32 peak, not 262 % of the FP32 one).
                let peak_of = match fit.filter(|_| p.rule == PriceRule::GemmProfileFit) {
                    Some(f) => Some(f.peak_per_s()),
                    None => peak(gpu, s.dtype),
                };
                (what, p.clone(), Some(tf), peak_of.map(|pk| tf * 1e12 / pk), None)
            }
            Operation::Attention(s, kernel) => {
                let what = format!(
                    "attention b{} h{} s{} d{}{}{}",
                    s.batch,
                    s.heads,
                    s.seq,
                    s.head_dim,
                    if s.causal { " causal" } else { "" },
                    if s.backward { " fwd+bwd" } else { " fwd" }
                );
                let p = self.attention(gpu, s, kernel.as_deref()).ok_or_else(|| {
                    // Name the families that could price it: this GPU's, else its vendor's other GPUs'
                    // (only those stand in for it).
                    let here = self.attention_families(gpu);
                    let known = if here.is_empty() {
                        let ids: Vec<&str> = self.vendor_peers(gpu).flat_map(Gpu::measurement_ids).collect();
                        // (An empty id list would mean every GPU's families.)
                        let peers = if ids.is_empty() { Vec::new() } else { self.measurements.attention_families(&ids) };
                        if peers.is_empty() {
                            "no family measured on it or on another GPU of its vendor".to_string()
                        } else {
                            format!("no family measured on it; on other GPUs of its vendor: {}", peers.join(", "))
                        }
                    } else {
                        format!("families measured on it: {}", here.join(", "))
                    };
                    // A family measured on this GPU in the other direction only (fa-triton on A100:
                    // forward plus backward) had been said not measured, and priced by the peak.
                    let ids: Vec<&str> = gpu.measurement_ids().collect();
                    let directions = |k: &str| {
                        let rows = self.measurements.attention.iter().filter(|r| &*r.kernel == k && ids.contains(&&*r.gpu));
                        rows.fold((false, false), |(f, b), r| match r.direction {
                            crate::measured::Direction::Forward => (true, b),
                            crate::measured::Direction::ForwardBackward => (f, true),
                            crate::measured::Direction::Unstated => (f, b),
                        })
                    };
                    match kernel.as_deref().map(|k| (k, directions(k))) {
                        Some((k, (false, true))) if !s.backward => format!(
                            "{what} on {}: family {k} is measured on this GPU for the forward plus backward only (price that with --backward); a projection's forward prices by another rule, and its notes say which",
                            gpu.id
                        ),
                        Some((k, (true, false))) if s.backward => format!(
                            "{what} on {}: family {k} is measured on this GPU for the forward only (price that without --backward); a projection's training step prices by another rule, and its notes say which",
                            gpu.id
                        ),
                        _ => format!(
                            "{what} on {}: no measured attention kernel of this GPU{} ({known}); a projection prices it by another rule (another family, or an efficiency of the peak), and its notes say which",
                            gpu.id,
                            kernel.as_ref().map_or(String::new(), |k| format!(" in family {k}"))
                        ),
                    }
                })?;
                let tf = s.flops() / p.time_us * 1e-6;
                (what, p, Some(tf), None, None)
            }
            Operation::Collective(q) => {
                let CollectiveQuery { collective, bytes, gpus, gpus_per_node, nic_gbps_per_gpu } = q;
                // The node as the price takes it: no more GPUs a node than the query has (4 GPUs
                // had read "(8 per node)"), and a last node short of the others said.
                let per_node = q.node_size();
                let short = (gpus % per_node != 0).then(|| format!(", the last node {}", gpus % per_node)).unwrap_or_default();
                let what = format!("{} of {bytes} bytes over {gpus} GPUs ({per_node} per node{short})", collective.as_str());
                // Two GPUs exchanging one buffer: the point-to-point price (what a pipeline's transfer costs).
                let p2p = *collective == Collective::SendRecv && *gpus == 2;
                let mut fits = profile.map_or([None, None], |p| p.all_reduce_fits());
                // A given network replaces the profile's fit across nodes, which is of the traced one (as in `project`).
                if nic_gbps_per_gpu.is_some() {
                    fits[1] = None;
                }
                let price = if p2p {
                    self.point_to_point_with_fits(gpu, *bytes, *gpus_per_node < 2, *nic_gbps_per_gpu, fits)
                } else {
                    self.collective_with_fits(gpu, q, fits)
                };
                let p = price.ok_or_else(|| {
                    format!("{what} on {}: no measured collective curve of this GPU (add yours with --measurements FILE.csv)", gpu.id)
                })?;
                let k = collective.bus_factor_in(Some(i64::from(*gpus))).unwrap_or(1.0);
                let busbw = k * bytes / (p.time_us * 1e3);
                let mut p = p;
                // Inside a node a ring moves its bus bytes over the GPU's links: an all-reduce curve
                // measured at this count above their rate reduces in the switch (NVLS; H200's 480 GB/s
                // over 450 GB/s links). Not said of a price carried to another count by the bus factor.
                if *collective == Collective::AllReduce
                    && p.rule == PriceRule::CollectiveCurve
                    && *gpus <= *gpus_per_node
                    && gpu.is_vendor("NVIDIA")
                    && gpu.above_its_links(busbw)
                {
                    p.basis.push_str(&format!(
                        "; above the {:.0} GB/s NVLink rate: the measured runs reduce in the switch (NVLS), which no link bound limits",
                        gpu.link_gbps
                    ));
                }
                (what, p, None, None, Some(busbw))
            }
        };
        Ok(Quote {
            gpu: gpu.id.clone(),
            operation,
            time_us: price.time_us,
            tflops,
            fraction_of_peak,
            busbw_gbps,
            rule: price.rule,
            rule_description: price.rule.describe(),
            extrapolated: price.extrapolated,
            basis: price.basis,
            band: price.band,
        })
    }
}

/// Rows the evidence README marks as no clean measurement, kept in the base
/// (and shown by `hw show`) but never pricing: XLA's Hopper FP8 table (87 of its
/// 1 125 values exceed the dense FP8 peak) and its gfx942 FP8 table (a fallback
/// path: median 56 TFLOP/s with isolated values up to 1 392).
fn unreliable(r: &crate::measured::GemmRow) -> bool {
    &*r.from.source_id == "xla-matmul-perf-table" && r.dtype == Dtype::Fp8 && matches!(&*r.gpu, "hopper-sm90" | "cdna3-gfx942")
}

/// One GPU's measured rows of one collective (indices into the base's
/// collectives), the user's or the shipped ones, and the measuring systems
/// they make in one node (`systems[0]`) and across nodes (`systems[1]`).
struct CollectiveCurves {
    rows: Vec<usize>,
    systems: [Systems; 2],
}

/// The [`CollectiveCurves`] of a base per (the GPU's measurement ids, collective,
/// the user's rows), built on first use and kept on the base
/// ([`Measurements::collective_index`]) as [`GemmIndex`] keeps the GEMM tables:
/// `search` prices collectives of thousands of plans. Empty in a default or a clone.
#[derive(Default)]
pub(crate) struct CollectiveIndex(std::sync::Mutex<HashMap<(String, Collective, bool), Arc<CollectiveCurves>>>);

impl Clone for CollectiveIndex {
    fn clone(&self) -> CollectiveIndex {
        CollectiveIndex::default()
    }
}

impl std::fmt::Debug for CollectiveIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let built = self.0.lock().map_or(0, |m| m.len());
        f.debug_struct("CollectiveIndex").field("built", &built).finish()
    }
}

impl Pricing {
    /// `gpu`'s curves of `collective` from the user's rows or the shipped ones.
    fn curves(&self, gpu: &Gpu, collective: Collective, user: bool) -> Arc<CollectiveCurves> {
        let m = &self.measurements;
        let ids: Vec<&str> = gpu.measurement_ids().collect();
        // The twin is the GPU's (the catalog is fixed): keyed by its ids, looked for once.
        let key = (ids.join("\n"), collective, user);
        // A poisoned lock only means another thread panicked mid-insert: the map is still whole.
        let index = || m.collective_index.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = index().get(&key) {
            return c.clone();
        }
        let across = |r: &CollectiveRow, ids: &[&str]| {
            r.collective == collective && r.nodes > 1 && ids.contains(&&*r.gpu) && m.is_user(&r.from) == user
        };
        // No curve across nodes of its own: those of its one twin of the same silicon and link
        // (A100 80 GB: Echo's A100 40 GB cluster, the same GA100, NVLink 3 and DGX node; the 80 GB
        // had been priced by a median of other systems' latencies, 122 µs for an 8-byte all-reduce
        // over 16 GPUs where Echo's measured 34).
        let twin = if m.collectives.iter().any(|r| across(r, &ids)) {
            None
        } else {
            let mut twins = self.catalog.gpus.iter().filter(|o| {
                self.same_silicon(gpu, o, Dtype::Bf16)
                    && o.link_gbps == gpu.link_gbps
                    && m.collectives.iter().any(|r| across(r, &[o.id.as_str()]))
            });
            match (twins.next(), twins.next()) {
                (Some(t), None) => Some(t.id.as_str()),
                _ => None,
            }
        };
        let rows: Vec<usize> = (0..m.collectives.len())
            .filter(|&i| {
                let r = &m.collectives[i];
                (r.collective == collective && ids.contains(&&*r.gpu) && m.is_user(&r.from) == user)
                    || twin.is_some_and(|t| across(r, &[t]))
            })
            .collect();
        let of: Vec<&CollectiveRow> = rows.iter().map(|&i| &m.collectives[i]).collect();
        let systems = [Systems::of(&of, false, m), Systems::of(&of, true, m)];
        index().entry(key).or_insert_with(|| Arc::new(CollectiveCurves { rows, systems })).clone()
    }
}

/// An attention grid of fewer query tiles (128 rows each, as FlashAttention
/// splits them) than `gpu` has SMs runs at that share of the rate measured on
/// grids that fill it: (the factor on its time, the words); `None` when it fills them.
fn idle_sms(gpu: &Gpu, shape: &AttentionShape) -> Option<(f64, String)> {
    let tiles = shape.batch * shape.heads * (shape.seq / ATTENTION_QUERY_TILE).ceil();
    let sms = gpu.sms.map(f64::from).filter(|sms| tiles < *sms)?;
    Some((
        sms / tiles.max(1.0),
        format!("; {tiles:.0} query tiles of {ATTENTION_QUERY_TILE:.0} rows for {sms:.0} SMs: that share of its rate"),
    ))
}

/// GEMM tables per (measurement id, dtype class).
type GemmTables = HashMap<(Arc<str>, Dtype), Vec<GemmTable>>;

/// What the pricing layer derives from a measured base's GEMM rows (its
/// tables and measured rates), kept on the base
/// ([`Measurements::gemm_index`]): built by the first [`Pricing`] over the
/// base that prices a GEMM, shared by every later one. A default is empty,
/// and so is a clone (a cloned base may be changed): built again on use.
#[derive(Default)]
pub(crate) struct GemmIndex(std::sync::OnceLock<Gemms>);

impl Clone for GemmIndex {
    fn clone(&self) -> GemmIndex {
        GemmIndex::default()
    }
}

impl std::fmt::Debug for GemmIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GemmIndex").field("built", &self.0.get().is_some()).finish()
    }
}

/// A base's GEMM tables and the measured rates [`Pricing::best_fraction`] looks up.
struct Gemms {
    tables: GemmTables,
    rates: GemmRates,
}

/// One measured GEMM's rate, FLOP/s, and where it stands in the base.
#[derive(Debug, Clone)]
struct GemmRate {
    flops_per_s: f64,
    /// Its index in [`Measurements::gemm`]: of equal fractions, the last row's is the best.
    row: usize,
    source: Arc<str>,
}

/// The rates of a measured base's GEMMs (those that price: not [`unreliable`],
/// finite) per dtype class and measurement id, sorted by (rate, row): what
/// the best fraction of a GPU's peak is looked up in, built once per base.
#[derive(Debug, Default)]
struct GemmRates(rustc_hash::FxHashMap<Dtype, rustc_hash::FxHashMap<Arc<str>, Vec<GemmRate>>>);

impl GemmRates {
    fn of(measurements: &Measurements) -> GemmRates {
        let mut rates = GemmRates::default();
        for (row, r) in measurements.gemm.iter().enumerate().filter(|(_, r)| !unreliable(r)) {
            let flops_per_s = 2.0 * r.batch * r.m * r.n * r.k / (r.time_us * 1e-6);
            // A NaN or infinite rate is no finite fraction of any peak.
            if flops_per_s.is_finite() {
                let id = rates.0.entry(table_dtype(r.dtype)).or_default().entry(r.gpu.clone()).or_default();
                id.push(GemmRate { flops_per_s, row, source: r.from.source_id.clone() });
            }
        }
        for rates in rates.0.values_mut().flat_map(|by_id| by_id.values_mut()) {
            rates.sort_by(|a, b| a.flops_per_s.total_cmp(&b.flops_per_s).then(a.row.cmp(&b.row)));
        }
        rates
    }

    /// The best fraction of `peak` (at most 1) a GEMM of `dtype`'s class
    /// measured on one of `ids` reached, and its source: the largest rate ÷
    /// peak, of equal fractions the last row's, as a scan of the rows gives.
    fn best_fraction<'a>(&self, ids: impl IntoIterator<Item = &'a str>, dtype: Dtype, peak: f64) -> Option<(f64, Arc<str>)> {
        let by_id = self.0.get(&table_dtype(dtype))?;
        let mut best: Option<(f64, &GemmRate)> = None;
        for c in ids.into_iter().filter_map(|id| Self::best_of(by_id.get(id)?, peak)) {
            if best.is_none_or(|b| cmp_fraction(&c, &b).is_gt()) {
                best = Some(c);
            }
        }
        best.map(|(f, r)| (f, r.source.clone()))
    }

    /// [`GemmRates::best_fraction`] of one measurement id's sorted rates.
    fn best_of(rates: &[GemmRate], peak: f64) -> Option<(f64, &GemmRate)> {
        let fraction = |r: &GemmRate| r.flops_per_s / peak;
        if peak > 0.0 {
            // The fraction grows with the rate: the fractions ≤ 1 are a prefix,
            // the best is its last; of equal fractions, the last row's.
            let below = rates.get(..rates.partition_point(|r| fraction(r) <= 1.0))?;
            let top = fraction(below.last()?);
            if !top.is_finite() {
                return None;
            }
            return below.iter().rev().take_while(|r| fraction(r).total_cmp(&top).is_eq()).max_by_key(|r| r.row).map(|r| (top, r));
        }
        // A peak of 0, NaN or below: every row's fraction.
        rates.iter().map(|r| (fraction(r), r)).filter(|(f, _)| f.is_finite() && *f <= 1.0).max_by(cmp_fraction)
    }
}

/// Fractions of a peak in order, equal ones by their row.
fn cmp_fraction(a: &(f64, &GemmRate), b: &(f64, &GemmRate)) -> std::cmp::Ordering {
    a.0.total_cmp(&b.0).then(a.1.row.cmp(&b.1.row))
}

/// The GEMM tables of a measured base: one per GPU, dtype class and source, each a grid where it is one.
fn gemm_tables(measurements: &Measurements) -> GemmTables {
    // One table per GPU, dtype class and source: a source's sweep is one design (XLA's complete grid).
    let mut groups: HashMap<TableKey, GemmTable> = HashMap::new();
    let mut seen: HashMap<(TableKey, [u64; 4]), (usize, Vec<f64>)> = HashMap::new();
    for r in measurements.gemm.iter().filter(|r| !unreliable(r)) {
        let user = measurements.is_user(&r.from);
        let key = (r.gpu.clone(), table_dtype(r.dtype), user, r.from.source_id.clone());
        let x = [r.batch.max(1.0).log2(), r.m.log2(), r.n.log2(), r.k.log2()];
        let t = groups.entry(key.clone()).or_insert_with(|| GemmTable {
            gpu: r.gpu.clone(),
            user,
            sources: Vec::new(),
            points: Vec::new(),
            grid: None,
        });
        if !t.sources.contains(&r.from.source_id) {
            t.sources.push(r.from.source_id.clone());
        }
        let bits = x.map(f64::to_bits);
        let e = seen.entry((key, bits)).or_insert_with(|| {
            t.points.push((x, 0.0));
            (t.points.len() - 1, Vec::new())
        });
        e.1.push(r.time_us);
    }
    // Several rows of one shape (two output types, a repeated entry): their median.
    for ((key, _), (point, mut times)) in seen {
        if let Some(p) = groups.get_mut(&key).and_then(|t| t.points.get_mut(point))
            && let Some(median) = crate::fit::median(&mut times)
        {
            p.1 = median.ln();
        }
    }
    let mut gemm: HashMap<(Arc<str>, Dtype), Vec<GemmTable>> = HashMap::new();
    for ((gpu, dtype, _, _), mut t) in groups {
        t.grid = Grid::of(&t.points);
        gemm.entry((gpu, dtype)).or_default().push(t);
    }
    gemm
}

/// The median GEMM rate of sustained rows, FLOP/s; `None` without rows.
fn median_rate(rows: &[&GemmRow]) -> Option<f64> {
    let mut rates: Vec<f64> = rows.iter().map(|r| 2.0 * r.batch * r.m * r.n * r.k / (r.time_us * 1e-6)).collect();
    crate::fit::median(&mut rates)
}

/// Measured `(size, time)` points of a collective as a curve that never falls with size, in place:
/// by size, the faster of two rows of one size (nccl-tests' in-place and out-of-place times), and
/// a point above a larger one's time taken as that (its time waited: Echo's first 1 KiB at 128
/// GPUs took 1.2 ms, its 2 KiB 0.1 ms). Sizes and times may be in any increasing scale (log).
/// Returns the points it lowered, `(size, time measured)`, ascending.
fn rising_in_size(points: &mut Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    points.dedup_by(|later, first| (later.0 - first.0).abs() < 1e-12);
    let mut floor = f64::INFINITY;
    let mut lowered = Vec::new();
    for p in points.iter_mut().rev() {
        if p.1 > floor {
            lowered.push(*p);
        }
        p.1 = p.1.min(floor);
        floor = p.1;
    }
    lowered.reverse();
    lowered
}

/// How far beyond a user's collective points their ratio reaches, octaves (16×): a small
/// message's latency says nothing of a large one's bandwidth.
const POINT_REACH_OCTAVES: f64 = 4.0;

/// The log of a measured ÷ priced ratio at `x` (log2 bytes) from points `(log2 bytes, ln ratio)`
/// of distinct sizes, ascending: linear between neighbours, and beyond the outermost point its
/// value tapered linearly to 0 at `reach` octaves away. None where no point is within reach (or
/// none given).
fn ln_ratio_in_log_size(sizes: &[(f64, f64)], x: f64, reach: f64) -> Option<f64> {
    let (first, last) = (*sizes.first()?, *sizes.last()?);
    let taper = |(px, ln): (f64, f64)| ((x - px).abs() < reach).then(|| ln * (1.0 - (x - px).abs() / reach));
    if x <= first.0 {
        return taper(first);
    }
    if x >= last.0 {
        return taper(last);
    }
    let i = sizes.partition_point(|p| p.0 <= x);
    let (a, b) = (sizes[i - 1], sizes[i]);
    Some(a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0))
}

/// The price at `bytes` of a curve that does not fall as the message grows, through the user's
/// measured `(bytes, µs)` points (exact there) and otherwise from `scaled`, the shipped price
/// scaled by their ratios. Between two points (or from `reach` octaves below the smallest, where
/// the scaling has faded out) the running maximum of `scaled` on a grid of eighth octaves,
/// interpolated log–log between grid points; never below a smaller message measured, nor above a
/// larger one; past `reach` octaves above the largest point, the shipped price by its own rule
/// (which may dip by its rounding: 0.6 % over 16 H100s). `points` rise with size
/// ([`rising_in_size`]). None where `scaled` prices nothing.
fn rising_through_points(bytes: f64, points: &[(f64, f64)], scaled: &dyn Fn(f64) -> Option<f64>, reach: f64) -> Option<f64> {
    let ceiling = points.iter().filter(|p| p.0 > bytes).map(|p| p.1).fold(f64::INFINITY, f64::min);
    let floor = points.iter().filter(|p| p.0 < bytes).map(|p| p.1).fold(0.0, f64::max);
    let smallest = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let largest = points.iter().map(|p| p.0).fold(0.0, f64::max);
    // The segment's start: the largest point below, else where the scaling fades out below the smallest.
    let start = points.iter().map(|p| p.0).filter(|&s| s < bytes).fold(0.0, f64::max);
    let start = if start > 0.0 { start } else { smallest / 2f64.powf(reach) };
    if bytes <= start {
        return Some(scaled(bytes)?.min(ceiling));
    }
    // Past the fade above the largest point the shipped price alone, by its own rule.
    let end = largest * 2f64.powf(reach);
    let last = bytes.min(end);
    const STEPS: f64 = 8.0;
    let k = ((last / start).log2() * STEPS).floor() as i32;
    let mut running = 0.0f64;
    let (mut below, mut above) = (0.0, 0.0);
    for j in 0..=k + 1 {
        let x = start * 2f64.powf(f64::from(j) / STEPS);
        running = running.max(scaled(x.min(end))?);
        if j == k {
            below = running;
        } else if j == k + 1 {
            above = running;
        }
    }
    let x_k = start * 2f64.powf(f64::from(k) / STEPS);
    let frac = ((last / x_k).log2() * STEPS).clamp(0.0, 1.0);
    let mut t = (below.ln() + (above.ln() - below.ln()) * frac).exp();
    if bytes > end {
        t = t.max(scaled(bytes)?);
    }
    Some(t.max(floor).min(ceiling))
}

/// Whose sustained rows priced `gpu`, in words ("this GPU held under sustained load (2 row(s) of …)").
fn sustained_words(gpu: &Gpu, rows: &[&GemmRow]) -> String {
    let distinct = |of: &dyn Fn(&GemmRow) -> &str| {
        let mut v: Vec<&str> = rows.iter().map(|r| of(r)).collect();
        v.sort_unstable();
        v.dedup();
        v.join(", ")
    };
    let (gpus, sources) = (distinct(&|r| &r.gpu), distinct(&|r| &r.from.source_id));
    let who = if gpus == gpu.id {
        "this GPU held".to_string()
    } else if gpu.measured_as.contains(&gpus) {
        format!("GPUs of {gpus} held")
    } else {
        format!("{gpus} held (the same silicon at the same power limit)")
    };
    format!("{who} under sustained load ({} row(s) of {sources})", rows.len())
}

/// Whether table `t`, which prices `gpu`, is another GPU's (its silicon's twin's).
fn lent(gpu: &Gpu, t: &GemmTable) -> bool {
    of_another(gpu, &t.gpu)
}

/// Whether measurement id `id` is another GPU's than `gpu`'s (a twin's table or curve).
fn of_another(gpu: &Gpu, id: &str) -> bool {
    !gpu.measurement_ids().any(|m| m == id)
}

/// The evidence ids (`measured_as`) GPUs `a` and `b` are both measured as.
fn shared_tables<'a>(a: &'a Gpu, b: &Gpu) -> impl Iterator<Item = &'a str> {
    a.measured_as.iter().filter(|id| b.measured_as.contains(id)).map(String::as_str)
}

/// Raises `time_us` of `shape` on `gpu` to the time at `best`, the fastest
/// fraction of its dtype peak any measurement of the GPU reached (and where);
/// the basis text when it did.
fn cap_at_best(time_us: &mut f64, gpu: &Gpu, shape: &GemmShape, best: Option<&(f64, Arc<str>)>) -> Option<String> {
    let (b, from) = best?;
    let floor = shape.flops() / (b * peak(gpu, shape.dtype)?) * 1e6;
    (*time_us < floor).then(|| {
        *time_us = floor;
        format!("; capped at {:.0} % of peak, the fastest this GPU was measured ({from})", 100.0 * b)
    })
}

/// The dtype's peak, FLOP/s; 16-bit types fall back to each other.
fn peak(gpu: &Gpu, d: Dtype) -> Option<f64> {
    gpu.peak_flops_or_stand_in(d)
}

/// The geometric mean of measured ÷ priced time ratios (the positive, finite
/// ones) and their count: what a few measurements, too few for a table or a
/// curve of their own, scale a rule's price by.
fn geometric_mean(ratios: impl IntoIterator<Item = f64>) -> Option<(f64, usize)> {
    let ln: Vec<f64> = ratios.into_iter().filter(|r| r.is_finite() && *r > 0.0).map(f64::ln).collect();
    (!ln.is_empty()).then(|| ((ln.iter().sum::<f64>() / ln.len() as f64).exp(), ln.len()))
}

/// (peak, HBM bandwidth, SMs/CUs), vendor.
/// A GPU's specs for similarity: its `d` peak, HBM bandwidth and SM/CU count
/// (NaN where the catalog does not state it: that term is left out of the
/// distance), and its vendor.
fn specs(gpu: &Gpu, d: Dtype) -> Option<([f64; 3], Option<String>)> {
    Some(([peak(gpu, d)?, gpu.hbm_gbps, gpu.sms.map_or(f64::NAN, f64::from)], gpu.vendor()))
}

/// A GPU's compute for choosing whose attention kernels stand for it: its 16-bit
/// peak and SM count (attention at these sizes is compute-bound: HBM left out).
fn attention_compute(g: &Gpu) -> Option<[f64; 3]> {
    specs(g, Dtype::Bf16).map(|(s, _)| [s[0], f64::NAN, s[2]])
}

/// Σ |ln(a/b)| over the specs both GPUs state.
fn spec_distance(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x / y).ln().abs()).filter(|d| d.is_finite()).sum()
}

/// Piecewise-linear interpolation of sorted (x, y) points at `x`; outside,
/// the end value. Returns whether `x` lay outside.
fn interpolate(pts: &[(f64, f64)], x: f64) -> (f64, bool) {
    let (Some(first), Some(last)) = (pts.first(), pts.last()) else { return (f64::NAN, true) };
    // One point measures its own abscissa only: anywhere else is outside it, above as below.
    if pts.len() == 1 {
        return (first.1, (x - first.0).abs() > 1e-9);
    }
    if x <= first.0 {
        return (first.1, x < first.0 - 1e-9);
    }
    if x >= last.0 {
        return (last.1, x > last.0 + 1e-9);
    }
    let i = pts.iter().rposition(|p| p.0 <= x).unwrap_or(0).min(pts.len() - 2);
    let (a, b) = (pts[i], pts[i + 1]);
    (a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0), false)
}

/// A measured curve: ln size → ln time, sorted.
#[derive(Debug, Clone)]
struct Curve {
    points: Vec<(f64, f64)>,
    nodes: u32,
    /// The measured points slower than a larger size, taken at its time ([`rising_in_size`]):
    /// ln size, ln time measured.
    lowered: Vec<(f64, f64)>,
}

/// Messages up to this size are small (the issue's and nccl-tests' latency
/// regime): a curve whose smallest point is larger measured no latency.
const SMALL_MESSAGE_BYTES: f64 = 4096.0;

/// The size a curve's latency is read at: nccl-tests sweeps begin here.
const LATENCY_BYTES: f64 = 8.0;

impl Curve {
    /// Time at `size` bytes, µs: log-log interpolation; above the largest size
    /// its bandwidth; below the smallest the smallest one's time × the link
    /// rule's price at `size` ÷ at that size (`link_rule`: bytes → µs), never
    /// above it — the smallest time itself where the sweep starts among small
    /// messages, where the rule is flat. A curve of a training trace or a sweep
    /// that starts at gigabytes had held every smaller message at its time
    /// (an MI300X all-gather of 1 MiB at 6 ms).
    fn at(&self, size: f64, link_rule: &dyn Fn(f64) -> Option<f64>) -> (f64, bool) {
        let x = size.ln();
        let (Some(first), Some(last)) = (self.points.first(), self.points.last()) else { return (f64::NAN, true) };
        if x > last.0 {
            // Time grows with the bytes at the largest size's bandwidth.
            return ((last.1.exp()) * (size / last.0.exp()), true);
        }
        if x < first.0 {
            let (smallest, t) = (first.0.exp(), first.1.exp());
            let f = match (link_rule(size), link_rule(smallest)) {
                (Some(a), Some(b)) if a > 0.0 && b > 0.0 => (a / b).min(1.0),
                _ => 1.0,
            };
            return (t * f, x < first.0 - 1e-9);
        }
        let (y, _) = interpolate(&self.points, x);
        (y.exp(), false)
    }

    /// A measured point that [`rising_in_size`] lowered among those `size` is priced from (the
    /// two around it, or itself): its size and measured time, and the time taken, µs, in words.
    fn lowered_at(&self, size: f64) -> Option<String> {
        let x = size.ln();
        let i = self.points.iter().rposition(|p| p.0 <= x + 1e-9)?;
        let (lo, hi) = (self.points[i].0, self.points.get(i + 1).map_or(self.points[i].0, |p| p.0));
        let hi = if (self.points[i].0 - x).abs() < 1e-9 { lo } else { hi };
        let &(at, measured) = self.lowered.iter().find(|l| l.0 >= lo - 1e-9 && l.0 <= hi + 1e-9)?;
        let taken = self.points.iter().find(|p| (p.0 - at).abs() < 1e-9).map_or(measured, |p| p.1);
        Some(format!(
            "its {} B point measured {:.2} µs, slower than a larger size: taken at {:.2} µs, that size's (more bytes never cost less)",
            at.exp().round(),
            measured.exp(),
            taken.exp()
        ))
    }

    /// The small-message latency: the time at [`LATENCY_BYTES`] ([`Curve::at`]).
    fn latency_us(&self, link_rule: &dyn Fn(f64) -> Option<f64>) -> f64 {
        self.at(LATENCY_BYTES, link_rule).0
    }

    /// Whether the curve measured small messages (its smallest size is one).
    fn measures_latency(&self) -> bool {
        self.points.first().is_some_and(|p| p.0.exp() <= SMALL_MESSAGE_BYTES * (1.0 + 1e-9))
    }
}

/// One measuring system (a source's sweep on one GPU kind and node size):
/// its curves per GPU count.
struct System {
    label: String,
    /// The measured GPU's evidence id.
    gpu: Arc<str>,
    gpus_per_node: u32,
    user: bool,
    /// Across nodes: the GB/s of NICs per GPU its source ran over, where the
    /// networks table has it.
    nic_gbps_per_gpu: Option<f64>,
    curves: Vec<(u32, Curve)>,
}

struct Systems(Vec<System>);

impl Systems {
    fn of(rows: &[&CollectiveRow], multi: bool, m: &Measurements) -> Systems {
        // Per (source, GPU id, GPUs per node): one measuring system.
        let mut by: HashMap<SystemKey, Vec<&CollectiveRow>> = HashMap::new();
        for r in rows {
            // A single-node query uses single-node curves; a multi-node one multi-node curves.
            if (r.nodes > 1) != multi {
                continue;
            }
            by.entry((r.from.source_id.clone(), r.gpu.clone(), r.gpus_per_node)).or_default().push(r);
        }
        let mut systems = Vec::new();
        for ((source, gpu, gpn), rows) in by {
            let user = rows.first().is_some_and(|r| m.is_user(&r.from));
            let mut counts: Vec<u32> = rows.iter().map(|r| r.gpus).collect();
            counts.sort_unstable();
            counts.dedup();
            let mut curves = Vec::new();
            for n in counts {
                // The curve with most points at this count (one algorithm); at each size
                // the faster of nccl-tests' in-place and out-of-place columns (the slower
                // one waited: Echo's first out-of-place 1 KiB at 128 GPUs took 1.24 ms, in place 92 µs).
                let mut by_algo: HashMap<&str, Vec<(f64, f64)>> = HashMap::new();
                for r in rows.iter().filter(|r| r.gpus == n) {
                    by_algo.entry(&r.algo).or_default().push((r.size_bytes.ln(), r.time_us.ln()));
                }
                let Some((_, mut pts)) = by_algo.into_iter().max_by_key(|(algo, p)| (p.len(), algo.is_empty())) else {
                    continue;
                };
                let lowered = rising_in_size(&mut pts);
                if pts.len() >= 2 {
                    let nodes = rows.iter().find(|r| r.gpus == n).map_or(1, |r| r.nodes);
                    curves.push((n, Curve { points: pts, nodes, lowered }));
                }
            }
            if !curves.is_empty() {
                let nic_gbps_per_gpu = m.network_of(&source, &gpu, gpn).filter(|_| multi).map(|n| n.nic_gbps_per_gpu);
                systems.push(System {
                    label: format!("{source} ({gpu}, {gpn} per node)"),
                    gpu,
                    gpus_per_node: gpn,
                    user,
                    nic_gbps_per_gpu,
                    curves,
                });
            }
        }
        systems.sort_by(|a, b| a.label.cmp(&b.label));
        Systems(systems)
    }

    /// The system that knows most about `gpus` GPUs: the user's; then one
    /// measured at this count; then one whose counts bracket it; then the
    /// one measured at the largest count; the same node size first. Across
    /// nodes (`multi`) only the systems measured with `gpus_per_node` GPUs in
    /// a node: the GPUs of a node share its NVLink domain and NICs, so a curve
    /// of 8 per node is several times as fast as the same count at 1 per node
    /// (Echo's 16 A100s: 124.5 GB/s where one 25 GB/s NIC per GPU bounds it).
    fn best(&self, gpus: u32, gpus_per_node: u32, multi: bool) -> Option<&System> {
        self.0.iter().filter(|s| !multi || s.gpus_per_node == gpus_per_node).max_by_key(|s| {
            let max = s.curves.iter().map(|c| c.0).max().unwrap_or(0);
            let min = s.curves.iter().map(|c| c.0).min().unwrap_or(0);
            (
                s.user,
                s.curves.iter().any(|c| c.0 == gpus),
                min <= gpus && gpus <= max,
                s.gpus_per_node == gpus_per_node,
                max,
                s.curves.iter().map(|c| c.1.points.len()).sum::<usize>(),
            )
        })
    }
}

/// A measured point of a collective that has no curve of its own, beside the all-reduce
/// curve that stands in for it ([`Pricing::collective_of_rows`]).
struct OwnPoint {
    /// Its size and measured time, µs.
    bytes: f64,
    time_us: f64,
    /// The standing-in curve's time at equal bus bytes, µs, and its bus bandwidth there, GB/s.
    curve_us: f64,
    curve_busbw_gbps: f64,
}

/// A system's curves' price of one size over one GPU count ([`System::price`]).
struct CurvePrice {
    time_us: f64,
    rule: PriceRule,
    extrapolated: bool,
    /// Which curves, in words.
    what: String,
    /// Beyond the largest measured count: the scale-out rule's parts.
    scale_out: Option<ScaleOut>,
}

/// The scale-out rule's parts beyond a system's largest measured count.
#[derive(Clone, Copy)]
struct ScaleOut {
    /// The largest measured count.
    largest: u32,
    /// The latency, linear in log₂ nodes over the measured counts, µs.
    latency_us: f64,
    /// The rest: the largest count's time less its latency, by the bus factor, µs.
    bandwidth_us: f64,
}

impl System {
    /// The price of `size` bytes over `gpus` from this system's curves of `collective`
    /// (whose bus factor carries them to other counts); `link_rule` (bytes → µs) shapes a
    /// curve below its smallest size ([`Curve::at`]).
    ///
    /// `nccl`: the collective is NCCL's, whose ring latency over fewer GPUs than measured its
    /// tuning model gives ([`nccl_ring_latency_us`]).
    fn price(
        &self,
        collective: Collective,
        size: f64,
        gpus: u32,
        link_rule: &dyn Fn(f64, u32) -> Option<f64>,
        nccl: bool,
    ) -> Option<CurvePrice> {
        // Each curve below its smallest size by the link rule at its own count.
        let at = |n: u32, c: &Curve| c.at(size, &|b| link_rule(b, n));
        let priced = |time_us, rule, extrapolated, what| Some(CurvePrice { time_us, rule, extrapolated, what, scale_out: None });
        if let Some((_, c)) = self.curves.iter().find(|c| c.0 == gpus) {
            let (t, ex) = at(gpus, c);
            // A measurement the curve lowered is said, not substituted in silence.
            let lowered = c.lowered_at(size).map_or(String::new(), |l| format!("; {l}"));
            return priced(t, PriceRule::CollectiveCurve, ex, format!("measured at {gpus} GPUs{lowered}"));
        }
        let below = self.curves.iter().filter(|c| c.0 < gpus).max_by_key(|c| c.0);
        let above = self.curves.iter().filter(|c| c.0 > gpus).min_by_key(|c| c.0);
        if let (Some((a, ca)), Some((b, cb))) = (below, above) {
            let ((ta, ea), (tb, eb)) = (at(*a, ca), at(*b, cb));
            let f = (f64::from(gpus).log2() - f64::from(*a).log2()) / (f64::from(*b).log2() - f64::from(*a).log2());
            let t = (ta.ln() + f * (tb.ln() - ta.ln())).exp();
            return priced(t, PriceRule::CollectiveCounts, ea || eb, format!("between its curves at {a} and {b} GPUs"));
        }
        if let (Some((a, ca)), None) = (below, above) {
            let parts = self.scale_out(collective, *a, ca, size, gpus, link_rule);
            return Some(CurvePrice {
                time_us: parts.latency_us + parts.bandwidth_us,
                rule: PriceRule::CollectiveScaleOut,
                extrapolated: true,
                what: format!("beyond its largest count ({a} GPUs)"),
                scale_out: Some(parts),
            });
        }
        // Only larger counts measured: the smallest one's curve, its latency kept and the rest
        // by the bus factor, as beyond the largest count. Fewer GPUs move fewer bytes each (an
        // all-reduce over 2 moves 1/1.75 of what one over 8 moves): on A100, the only GPU with
        // curves at 2, 4 and 8 in a node, the 8-GPU curve so carried is 8.7 % and 5.1 % off the
        // 2- and 4-GPU ones from 1 MiB up, where it had been 47 % and 16 % slow as it stood.
        // The latency: NCCL's, over fewer GPUs, as its tuning model's ring latency at each
        // count scales it (its 2(n − 1) steps): Echo's A100 all-reduce over 2 and 4 GPUs from its
        // 8-GPU curve, median |error| over 28 sizes 41.7 → 14.2 % and 45.1 → 3.9 % (the model puts
        // 2 GPUs at 0.27 of 8, Echo measured 8.5 µs against 31.4: the larger count's latency had
        // been +260 % up to 4 KiB over 2 GPUs). Between 16 KiB and 4 MiB the 2-GPU curve rises
        // sooner than this carries (−30 to −68 % over 2 GPUs, where the kept latency was −15 to
        // +112 %): its band says so. Another library's latency is the larger count's.
        let (b, cb) = above?;
        let (t, _) = at(*b, cb);
        let latency = cb.latency_us(&|x| link_rule(x, *b));
        let (scale, how) = if nccl {
            let r = nccl_ring_latency_us(collective, gpus, self.gpus_per_node) / nccl_ring_latency_us(collective, *b, self.gpus_per_node);
            (r, format!(", its latency × {r:.2} (NCCL's ring latency at {gpus} against {b} GPUs, its tuning model)"))
        } else {
            (1.0, String::new())
        };
        let t = latency * scale + by_bus_factor(collective, t - latency, *b, gpus);
        priced(t, PriceRule::CollectiveBelowCounts, true, format!("its smallest measured count ({b} GPUs), by the bus factor{how}"))
    }

    /// The scale-out rule for `size` bytes over `gpus`, beyond the largest measured count `a`
    /// (curve `ca`): the latency linear in log₂ nodes over the measured counts, the rest that
    /// of a, by the bus factor.
    fn scale_out(
        &self,
        collective: Collective,
        a: u32,
        ca: &Curve,
        size: f64,
        gpus: u32,
        link_rule: &dyn Fn(f64, u32) -> Option<f64>,
    ) -> ScaleOut {
        let pts: Vec<(f64, f64)> =
            self.curves.iter().map(|(n, c)| (f64::from(c.nodes.max(1)).log2(), c.latency_us(&|b| link_rule(b, *n)))).collect();
        // The link rule at the largest measured count a.
        let at_a = |b: f64| link_rule(b, a);
        let nodes = f64::from(gpus.div_ceil(self.gpus_per_node.max(1)).max(1)).log2();
        let latency = if pts.len() >= 2 {
            let slope = crate::fit::slope(&pts).unwrap_or(0.0);
            let at_largest = ca.latency_us(&at_a);
            // Never below the largest count's own latency.
            (at_largest + slope.max(0.0) * (nodes - f64::from(ca.nodes.max(1)).log2())).max(at_largest)
        } else {
            ca.latency_us(&at_a)
        };
        let (t_a, _) = ca.at(size, &at_a);
        ScaleOut { largest: a, latency_us: latency, bandwidth_us: by_bus_factor(collective, t_a - ca.latency_us(&at_a), a, gpus) }
    }
}

/// A collective's time beyond its latency, µs, measured over `from` GPUs, carried to `to`: each
/// rank moves its bus factor's share (the collective's own: a broadcast's or a transfer's is 1
/// at every count). The one carry of the below-counts and scale-out rules.
fn by_bus_factor(collective: Collective, rest_us: f64, from: u32, to: u32) -> f64 {
    let k = |n: u32| collective.bus_factor(i64::from(n)).unwrap_or(1.0);
    rest_us.max(0.0) * k(to) / k(from)
}

#[cfg(test)]
mod tests {
    /// An attention of one query tile is priced no faster than the GPU's shortest kernel (a
    /// one-token attention had cost 0.00 µs); the work's own time, which ratios of two GPUs
    /// scale, stays below it.
    #[test]
    fn attention_is_never_faster_than_the_shortest_kernel() {
        let p = Pricing::builtin();
        for id in ["h100-sxm", "b200", "mi300x"] {
            let gpu = p.catalog.gpu(id).unwrap();
            let tiny = GemmShape { batch: 1.0, m: 1.0, n: 1.0, k: 1.0, dtype: Dtype::Bf16 };
            let floor = p.gemm(gpu, &tiny).unwrap().time_us;
            let shape = AttentionShape { batch: 1.0, heads: 1.0, seq: 1.0, head_dim: 64.0, causal: false, backward: false };
            let priced = p.attention(gpu, &shape, None).unwrap();
            assert_eq!(priced.time_us, floor, "{id}: {}", priced.basis);
            assert!(priced.basis.contains("the shortest kernel of this GPU"), "{id}: {}", priced.basis);
            assert!(p.attention_work(gpu, &shape, None).unwrap().time_us < 0.1 * floor, "{id}");
            // A full-size attention is far above the floor and untouched by it.
            let big = AttentionShape { seq: 8192.0, heads: 32.0, head_dim: 128.0, ..shape };
            assert_eq!(p.attention(gpu, &big, None).unwrap(), p.attention_work(gpu, &big, None).unwrap(), "{id}");
        }
    }

    use super::*;

    /// The shipped base with the user's measurements `csv` given as file `name`.
    fn with_users(csv: &str, name: &str) -> Pricing {
        let mut m = Measurements::builtin();
        m.add_text(csv.as_bytes(), name).unwrap();
        m.user_files.push(name.into());
        Pricing::new(Catalog::builtin(), Arc::new(m))
    }

    /// A pricing layer keeps the GEMM, collective and transfer prices it made (a search prices
    /// the same shapes for each of thousands of plans): a kept price is the fresh one, and a
    /// variant of a GPU under its id (a faster link) is priced as itself, never served the
    /// catalog GPU's kept price.
    #[test]
    fn kept_prices_are_the_fresh_prices_of_the_whole_gpu() {
        let p = Pricing::builtin();
        let v100 = p.catalog.gpu("v100").unwrap().clone();
        let q = CollectiveQuery::new(Collective::AllReduce, 1073741824.0, 8, 8);
        let kept = p.collective(&v100, &q).unwrap();
        assert_eq!(kept, p.collective(&v100, &q).unwrap());
        assert_eq!(kept, Pricing::builtin().collective_afresh(&v100, &q).unwrap());
        let mut wider = v100.clone();
        wider.link_gbps *= 2.0;
        let variant = p.collective(&wider, &q).unwrap();
        assert!(variant.time_us < 0.7 * kept.time_us, "{} against {}", variant.time_us, kept.time_us);
        assert_eq!(variant, Pricing::builtin().collective(&wider, &q).unwrap());
        // Across nodes, over the network given: each network its own price.
        let slow = p.point_to_point(&v100, 67108864.0, true, Some(12.5)).unwrap();
        let fast = p.point_to_point(&v100, 67108864.0, true, Some(50.0)).unwrap();
        assert!(fast.time_us < 0.5 * slow.time_us, "{} against {}", fast.time_us, slow.time_us);
        assert_eq!(slow, Pricing::builtin().point_to_point(&v100, 67108864.0, true, Some(12.5)).unwrap());
        for (m, n, k) in [(1.0, 8192.0, 8192.0), (4096.0, 4096.0, 4096.0), (8192.0, 28672.0, 8192.0)] {
            let shape = GemmShape { batch: 1.0, m, n, k, dtype: Dtype::Bf16 };
            let kept = p.gemm(&v100, &shape).unwrap();
            assert_eq!(kept, p.gemm(&v100, &shape).unwrap());
            assert_eq!(kept, Pricing::builtin().gemm_afresh(&v100, &shape).unwrap());
        }
    }

    /// A decode projection's FP8 GEMM (fewer rows than any FP8 table measured) had been
    /// priced by the spec model at 2.3× the same shape in 16 bits on H100: it streams FP8
    /// weights, so it costs at most the 16-bit time, half of it at one row.
    #[test]
    fn an_fp8_gemm_of_few_rows_costs_no_more_than_its_16_bit_shape() {
        let p = Pricing::builtin();
        // H100 and H200 have an FP8 table of a few large shapes; GH200 none (the spec model prices it).
        // MI355X has neither an FP8 table nor a 16-bit grid: its FP8 had cost 2× its 16-bit at 64 rows.
        let mi355x = p.catalog.gpu("mi355x").unwrap();
        let at = |m: f64, dtype: Dtype| p.gemm(mi355x, &GemmShape { batch: 1.0, m, n: 4096.0, k: 4096.0, dtype }).unwrap().time_us;
        for m in [1.0, 32.0, 64.0, 128.0, 1024.0] {
            assert!(at(m, Dtype::Fp8) <= at(m, Dtype::Bf16) * (1.0 + 1e-9), "mi355x at {m} rows");
        }
        // Nor does it fall as the rows grow (16 rows had cost 9.5 µs, 32 rows 4.8).
        let rows = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];
        assert!(
            rows.windows(2).all(|w| at(w[0], Dtype::Fp8) <= at(w[1], Dtype::Fp8) * (1.0 + 1e-9)),
            "{:?}",
            rows.map(|m| at(m, Dtype::Fp8))
        );
        for id in ["h100-sxm", "h200", "gh200"] {
            let gpu = p.catalog.gpu(id).unwrap();
            let at = |m: f64, dtype: Dtype| p.gemm(gpu, &GemmShape { batch: 1.0, m, n: 1024.0, k: 8192.0, dtype }).unwrap();
            for m in [32.0, 64.0, 128.0, 256.0, 512.0] {
                assert!(at(m, Dtype::Fp8).time_us <= at(m, Dtype::Bf16).time_us * (1.0 + 1e-9), "{id} at {m} rows");
            }
            let one = at(1.0, Dtype::Fp8).time_us / at(1.0, Dtype::Bf16).time_us;
            assert!((one - 0.5).abs() < 0.02, "{id}: {one}");
            let sixteen = at(16.0, Dtype::Fp8);
            assert!(sixteen.time_us < 0.8 * at(16.0, Dtype::Bf16).time_us, "{id}: {}", sixteen.basis);
            assert!(sixteen.basis.contains("16-bit price toward FP8 operands' streaming time"), "{id}: {}", sixteen.basis);
            assert!(at(1.0, Dtype::Fp8).time_us < sixteen.time_us);
        }
    }

    /// Leave-one-GPU-out withholds a table whole: an FP8 GEMM of few rows held to its 16-bit
    /// shape had still blended toward streaming below the withheld 16-bit table's fewest rows.
    #[test]
    fn a_withheld_16_bit_table_lends_no_grid_to_fp8_of_few_rows() {
        let p = Pricing::builtin();
        let h100 = p.catalog.gpu("h100-sxm").unwrap();
        let shape = GemmShape { batch: 1.0, m: 16.0, n: 1024.0, k: 8192.0, dtype: Dtype::Fp8 };
        let table = p.gemm_table(h100, Dtype::Bf16).expect("hopper's 16-bit table");
        assert!(p.gemm_excluding(h100, &shape, &[]).unwrap().basis.contains("streaming time below"));
        let withheld = p.gemm_excluding(h100, &shape, &[&*table.gpu]).unwrap();
        assert!(!withheld.basis.contains(&*table.gpu) && !withheld.basis.contains("streaming time below"), "{}", withheld.basis);
    }

    /// A GPU with no GEMM measured (V100, MI250X) is never priced closer to its peak than
    /// its vendor's measured GPUs reach at their best shapes: V100's 1024³ FP16 GEMM, scaled
    /// from Hopper's tables (8× its peak), had run at 100 % of its peak. The highest any
    /// NVIDIA GPU was measured at is A100's max-achievable-matmul, 86.9 %; AMD's MI355X's, 63 %.
    #[test]
    fn a_gpu_never_measured_runs_no_closer_to_its_peak_than_its_vendors_measured_ones() {
        let p = Pricing::builtin();
        for (id, best) in [("v100", 0.869), ("mi250x", 0.63)] {
            let gpu = p.catalog.gpu(id).unwrap();
            assert!(p.best_gemm_fraction(gpu, Dtype::Fp16).is_none(), "{id} has a measurement");
            for n in [1024.0, 2048.0, 4096.0, 8192.0] {
                let shape = GemmShape { dtype: Dtype::Fp16, ..bf16(n, n, n) };
                let priced = p.gemm(gpu, &shape).unwrap();
                let fraction = shape.flops() / (priced.time_us * 1e-6) / gpu.peak_flops(Dtype::Fp16).unwrap();
                assert!(fraction <= best + 1e-9, "{id} {n}³: {:.1} % of peak ({})", 100.0 * fraction, priced.basis);
            }
        }
    }

    /// A user's GPU measured as a catalog table at a lower peak (a power-capped Hopper at 740
    /// TFLOP/s, `measured_as = ["hopper-sm90"]`) is never priced faster than the table's own
    /// GPU: it had run 4096³ at 100 % of its peak in 185.7 µs, where H100 SXM takes 206.5.
    #[test]
    fn a_table_of_a_higher_peak_gpu_prices_a_slower_variant_no_faster() {
        let dir = std::env::temp_dir().join(format!("tracecast-variant-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("variant.toml");
        let h100 = Catalog::builtin().gpu("h100-sxm").unwrap().clone();
        std::fs::write(
            &file,
            format!(
                "[[gpu]]\nid = \"h100-capped\"\nname = \"H100 capped\"\nsource = \"test\"\nmeasured_as = [\"hopper-sm90\"]\nbf16 = 740.0\nfp16 = 740.0\nmemory_gb = 80.0\nhbm_gbps = {}\nlink_gbps = 450.0\n",
                h100.hbm_gbps
            ),
        )
        .unwrap();
        let mut catalog = Catalog::builtin();
        catalog.add_file(&file).unwrap();
        let p = Pricing::new(catalog, Measurements::shared());
        let capped = p.catalog.gpu("h100-capped").unwrap();
        for n in [1024.0, 4096.0, 8192.0] {
            let (slow, fast) = (p.gemm(capped, &bf16(n, n, n)).unwrap(), p.gemm(&h100, &bf16(n, n, n)).unwrap());
            assert!(slow.time_us >= fast.time_us, "{n}³: {} µs against H100's {} ({})", slow.time_us, fast.time_us, slow.basis);
            assert!(slow.extrapolated, "{n}³: {}", slow.basis);
        }
    }

    /// Fewer GPUs than any curve measured cost the smallest measured count's curve, its upper
    /// bound, below its smallest size too: MI325X's 8-GPU curve, shaped by the 2-GPU link rule
    /// where it starts above 1 KiB, had priced 2 GPUs at 1.75× its own 8-GPU time.
    #[test]
    fn fewer_gpus_than_measured_cost_the_smallest_counts_curve() {
        let p = Pricing::builtin();
        for id in ["mi325x", "mi300x"] {
            let gpu = p.catalog.gpu(id).unwrap();
            for c in [Collective::AllReduce, Collective::AllGather] {
                for bytes in [1024.0, 65536.0, 16_777_216.0, 1_073_741_824.0] {
                    let at = |n: u32, per_node: u32| p.collective(gpu, &CollectiveQuery::new(c, bytes, n, per_node)).unwrap().time_us;
                    // Whatever the query's node size: the curve is shaped by its own (a query of 4 per
                    // node had shaped the 8-GPU curve as two nodes', 2.1× its time).
                    for (n, per_node) in [(2, 8), (4, 8), (2, 4), (4, 4), (2, 2)] {
                        let (few, eight) = (at(n, per_node), at(8, 8));
                        assert!(
                            few <= eight * (1.0 + 1e-9),
                            "{id} {} of {bytes} B: {n} GPUs ({per_node} a node) {few} µs, 8 GPUs {eight} µs",
                            c.as_str()
                        );
                    }
                }
            }
        }
    }

    fn bf16(m: f64, n: f64, k: f64) -> GemmShape {
        GemmShape { batch: 1.0, m, n, k, dtype: Dtype::Bf16 }
    }

    /// NCCL's model charges a ring all-reduce over 256 nodes of 4 its 2046 steps (510 across the
    /// network, × 1.4 across nodes); 1000 GPUs of 3 to a node are 334 whole nodes; in one node no
    /// network step and no plateau; an all-gather over 64 nodes of 8 its 511 steps, 63 across.
    #[test]
    fn nccls_model_charges_the_ring_its_steps() {
        let ring = nccl_ring_latency_us(Collective::AllReduce, 1024, 4);
        assert!((ring - 1.4 * (8.4 + 1536.0 * 3.4 + 510.0 * 14.0)).abs() < 1e-9, "{ring}");
        let ring = nccl_ring_latency_us(Collective::AllReduce, 1000, 3);
        assert!((ring - 1.4 * (8.4 + (1998.0 - 666.0) * 3.4 + 666.0 * 14.0)).abs() < 1e-9, "{ring}");
        let ring = nccl_ring_latency_us(Collective::AllReduce, 8, 8);
        assert!((ring - (8.4 + 14.0 * 3.4)).abs() < 1e-9, "{ring}");
        // An all-gather's ring: n − 1 steps, nodes − 1 across, no plateau.
        let ring = nccl_ring_latency_us(Collective::AllGather, 512, 8);
        assert!((ring - (8.4 + 448.0 * 3.4 + 63.0 * 14.0)).abs() < 1e-9, "{ring}");
    }

    /// The all-reduce beyond the measured counts never costs less for more bytes: where NCCL's
    /// ring (its added steps) gives way to its tree (its bandwidth share) or back, the price
    /// is the cheaper of the two increments, continuous in the size.
    #[test]
    fn an_all_reduce_at_scale_costs_more_for_more_bytes() {
        let p = Pricing::builtin();
        let a100 = p.catalog.gpu("a100-40gb").unwrap().clone();
        let h100 = p.catalog.gpu("h100-sxm").unwrap().clone();
        // Also carried onto a network slower than the curve's (the tree's bandwidth is carried, the
        // ring's steps are not: compared before the carry, 1 133 596 281 bytes over 64 H100s at 12.5
        // GB/s had cost 4 % less than a byte fewer).
        for (gpu, gpus, nic) in
            [(&a100, 256, None), (&a100, 1024, None), (&a100, 4096, None), (&h100, 64, Some(12.5)), (&h100, 512, Some(12.5))]
        {
            let mut last = 0.0;
            let mut bytes = 1024.0;
            while bytes < 1.7e10 {
                let q = CollectiveQuery::new(Collective::AllReduce, bytes, gpus, 8).over_network(nic);
                let t = p.collective(gpu, &q).unwrap().time_us;
                assert!(t >= last, "{} {gpus} GPUs: {bytes} B {t} µs < {last} µs for fewer bytes", gpu.id);
                last = t;
                bytes *= 1.07;
            }
        }
    }

    /// Across nodes, every collective of every catalog GPU costs no less for more bytes, on its
    /// preset's network and on networks faster and slower than its curves' (a curve carried onto
    /// a faster network by a factor that falls with size had priced 32 MiB over 16 H100s below
    /// 16 MiB: 674 against 679 µs).
    #[test]
    fn a_collective_across_nodes_costs_no_less_for_more_bytes() {
        let p = Pricing::builtin();
        let collectives = [Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll];
        let mut falls = Vec::new();
        for gpu in &p.catalog.gpus {
            for collective in collectives {
                for gpus in [16, 64, 512] {
                    for nic in [None, Some(12.5), Some(100.0)] {
                        let mut last: Option<(f64, f64)> = None;
                        let mut bytes = 4096.0;
                        while bytes < 1.2e10 {
                            let q = CollectiveQuery::new(collective, bytes, gpus, 8).over_network(nic);
                            if let Some(t) = p.collective(gpu, &q).map(|c| c.time_us) {
                                if let Some((b, l)) = last.filter(|(_, l)| t < *l * (1.0 - 1e-9)) {
                                    falls.push(format!(
                                        "{} {} {gpus} GPUs {nic:?}: {bytes:.0} B {t:.2} µs < {b:.0} B {l:.2} µs",
                                        gpu.id,
                                        collective.as_str()
                                    ));
                                }
                                last = Some((bytes, t));
                            }
                            bytes *= 1.19;
                        }
                    }
                }
            }
        }
        assert!(falls.is_empty(), "{} falls:\n{}", falls.len(), falls.join("\n"));
    }

    #[test]
    fn a_measured_grid_shape_is_priced_at_its_measured_time() {
        let p = Pricing::builtin();
        let b200 = p.catalog.gpu("b200").unwrap().clone();
        // XLA's B200 bf16 256³: 4 960 ns (evidence gemm.csv line 2).
        let price = p.gemm(&b200, &bf16(256.0, 256.0, 256.0)).unwrap();
        assert_eq!(price.rule, PriceRule::GemmTable);
        assert!((price.time_us - 4.960).abs() < 1e-6, "{price:?}");
        assert!(!price.extrapolated);
        // Halfway in log between two grid points: the geometric mean of their times.
        let t = |m: f64| p.gemm(&b200, &bf16(m, 1024.0, 1024.0)).unwrap().time_us;
        let mid = p.gemm(&b200, &bf16((1024.0f64 * 2048.0).sqrt(), 1024.0, 1024.0)).unwrap().time_us;
        assert!((mid - (t(1024.0) * t(2048.0)).sqrt()).abs() < 1e-9 * mid);
        // Beyond the grid, time grows with the work and the price says it extrapolates.
        let big = p.gemm(&b200, &bf16(16384.0, 4096.0, 4096.0)).unwrap();
        assert!(big.extrapolated);
        assert!((big.time_us / t(4096.0).max(1e-9) - 1.0).abs() > 0.0);
        assert!((big.time_us - 4.0 * p.gemm(&b200, &bf16(4096.0, 4096.0, 4096.0)).unwrap().time_us).abs() < 1e-6 * big.time_us);
    }

    /// A shipped measurement of the very shape that the GPU's table overrules is named in the
    /// basis with its time, not set aside in silence.
    #[test]
    fn a_measurement_of_the_shape_that_the_table_overrules_is_named() {
        let p = Pricing::builtin();
        let h100 = p.catalog.gpu("h100-sxm").unwrap().clone();
        // ml-engineering's SwiGLU bmm, d_ff = 10848: 395.62 TFLOP/s (evidence gemm.csv).
        let shape = GemmShape { batch: 4.0, m: 4096.0, n: 4096.0, k: 10848.0, dtype: Dtype::Fp16 };
        let price = p.gemm(&h100, &shape).unwrap();
        assert_eq!(price.rule, PriceRule::GemmTable);
        let measured_us = shape.flops() / 395.62e12 * 1e6;
        assert!(price.time_us < 0.8 * measured_us, "the table prices it, not the row: {price:?}");
        assert!(price.basis.contains("set aside, measured at this very shape: mle-swiglu on h100-sxm"), "{}", price.basis);
        assert!(price.basis.contains(&format!("{measured_us:.2} µs (395.6 TFLOP/s)")), "{}", price.basis);
        // A shape nobody else measured says nothing of the kind.
        let other = GemmShape { k: 10000.0, ..shape };
        assert!(!p.gemm(&h100, &other).unwrap().basis.contains("set aside"));
    }

    /// The table rule's band: each XLA 16-bit table thinned to every other size
    /// (m, n, k ∈ 256, 1024, 4096) predicts the sizes left out (512, 2048) — twice
    /// the spacing the rule interpolates over, so an upper bound of its error.
    #[test]
    fn grid_interpolation_predicts_the_sizes_left_out() {
        let p = Pricing::builtin();
        let mut all = Vec::new();
        for id in ["b200", "hopper-sm90", "cdna3-gfx942"] {
            let t = p.gemms().tables.get(&(Arc::from(id), Dtype::Bf16)).and_then(|v| v.iter().find(|t| t.grid.is_some())).unwrap();
            let even = |x: f64| (x - 8.0).rem_euclid(2.0) < 1e-9;
            let kept: Vec<([f64; 4], f64)> = t.points.iter().filter(|(x, _)| (1..4).all(|d| even(x[d]))).copied().collect();
            let thin = Grid::of(&kept).expect("a complete thinned grid");
            let mut errors: Vec<f64> = t
                .points
                .iter()
                .filter(|(x, _)| !(1..4).all(|d| even(x[d])))
                .map(|(x, ln_t)| (thin.at(*x).unwrap().0 - ln_t).exp() - 1.0)
                .map(f64::abs)
                .collect();
            errors.sort_by(f64::total_cmp);
            println!("{id}: median |error| {:.1} % over {} left-out shapes", 100.0 * errors[errors.len() / 2], errors.len());
            all.extend(errors);
        }
        all.sort_by(f64::total_cmp);
        let median = all[all.len() / 2];
        println!("all: median |error| {:.1} %", 100.0 * median);
        assert!(median <= GEMM_TABLE_BAND, "{median}");
    }

    #[test]
    fn a_trace_correction_never_prices_a_gemm_faster_than_the_gpu_was_ever_measured() {
        // B200's corpus correction (0.79, from 109 GEMMs of an inference trace) on
        // Llama-3-8B's MLP up-projection (16384 tokens × 14336 × 4096): the table × 0.79 would
        // run it faster than the fastest B200 GEMM measured — the max-achievable-matmul row,
        // 1745.0 TFLOP/s (gemm.csv, `mamf`, ml-engineering README line 356).
        let p = Pricing::builtin();
        let b200 = p.catalog.gpu("b200").unwrap().clone();
        let shape = bf16(16384.0, 14336.0, 4096.0);
        let correction = crate::profile::TableCorrection {
            class: crate::work::KernelClass::Gemm,
            dtype: Some(Dtype::Bf16),
            ratio: 0.79,
            ln_spread: 0.12,
            samples: 109,
            rule: "gemm_table".into(),
            max_flops: None,
            misaligned: None,
        };
        let price = p.gemm_corrected(&b200, &shape, Some(&correction)).unwrap();
        let at_best = shape.flops() / 1745.0e12 * 1e6;
        assert!((price.time_us - at_best).abs() / at_best < 1e-9, "{} vs {at_best}", price.time_us);
        assert!(price.basis.contains("capped") && price.basis.contains("mamf"), "{}", price.basis);
        // A correction that slows the table down is applied as measured.
        let slower = crate::profile::TableCorrection { ratio: 1.7, ..correction.clone() };
        let table = p.gemm(&b200, &shape).unwrap().time_us;
        assert!((p.gemm_corrected(&b200, &shape, Some(&slower)).unwrap().time_us - 1.7 * table).abs() < 1e-6);
        // Measured on GEMMs of at most 3.27 GFLOP (the corpus trace's largest), the correction
        // does not speak for this one of 1 924 GFLOP: the table alone, saying so; a GEMM within
        // the traced sizes is corrected.
        let traced = crate::profile::TableCorrection { max_flops: Some(3.27e9), ..correction };
        let big = p.gemm_corrected(&b200, &shape, Some(&traced)).unwrap();
        assert_eq!(big.time_us, table);
        assert!(big.basis.contains("left out: its 109 traced GEMMs were of at most 3.270 GFLOP"), "{}", big.basis);
        let small = bf16(1024.0, 1024.0, 1024.0);
        let corrected = p.gemm_corrected(&b200, &small, Some(&traced)).unwrap().time_us;
        assert!((corrected - 0.79 * p.gemm(&b200, &small).unwrap().time_us).abs() < 1e-9 * corrected);
    }

    #[test]
    fn rows_that_are_not_whole_16_byte_units_are_misaligned() {
        let shape = |m: f64, n: f64, k: f64, dtype| GemmShape { batch: 1.0, m, n, k, dtype };
        // Q·Kᵀ over 3137 tokens (n), P·V (k); m, the rows, has no stride of its own.
        assert!(shape(3137.0, 3137.0, 64.0, Dtype::Bf16).misaligned());
        assert!(shape(3137.0, 64.0, 3137.0, Dtype::Bf16).misaligned());
        assert!(!shape(5185.0, 1024.0, 1024.0, Dtype::Bf16).misaligned());
        // One column (a matrix-vector product) is shorter than a unit: another kernel's case.
        assert!(!shape(5184.0, 1.0, 1024.0, Dtype::Bf16).misaligned());
        // 16 bytes are 16 FP8 elements and 4 TF32 ones.
        assert!(shape(4096.0, 24.0, 4096.0, Dtype::Fp8).misaligned());
        assert!(!shape(4096.0, 12.0, 4096.0, Dtype::Tf32).misaligned());
        // A mean size (Kimi-K2's 4096 tokens × 8 of 384 experts over ep=8: 682.67 per expert) is no stride.
        assert!(!shape(7168.0, 2048.0, 4096.0 * 8.0 / 384.0 * 8.0, Dtype::Bf16).misaligned());
    }

    #[test]
    fn a_batch_beyond_the_table_is_never_priced_under_its_operands_traffic() {
        // TimeSformer's temporal attention: 37 632 GEMMs of 8 × 64 × 8 (H100 trace: 40.9 µs). Folded
        // into m, as one GEMM sharing a 64 × 8 operand, the table had priced 18.7 µs, under the
        // 79 MB its matrices move at the H100's measured 2970 GB/s (STREAM, Azure's suite).
        let p = Pricing::builtin();
        let h100 = p.catalog.gpu("h100-sxm").unwrap().clone();
        let shape = GemmShape { batch: 37632.0, m: 8.0, n: 8.0, k: 64.0, dtype: Dtype::Bf16 };
        let price = p.gemm(&h100, &shape).unwrap();
        let streamed_us = shape.bytes() / 2970e9 * 1e6;
        assert!((price.time_us / streamed_us - 1.0).abs() < 1e-9, "{} µs against {streamed_us}: {}", price.time_us, price.basis);
        assert!(price.basis.contains("operands' traffic"), "{}", price.basis);
        // A trace correction that speeds the table up does not take it under the floor either.
        let correction = crate::profile::TableCorrection {
            class: crate::work::KernelClass::Gemm,
            dtype: Some(Dtype::Bf16),
            ratio: 0.79,
            ln_spread: 0.1,
            samples: 109,
            rule: "gemm_table".into(),
            max_flops: None,
            misaligned: None,
        };
        let corrected = p.gemm_corrected(&h100, &shape, Some(&correction)).unwrap();
        assert!(corrected.time_us >= streamed_us * (1.0 - 1e-9), "{} µs: {}", corrected.time_us, corrected.basis);
    }

    #[test]
    fn a_misaligned_gemm_takes_its_own_correction_at_any_size() {
        let p = Pricing::builtin();
        let h100 = p.catalog.gpu("h100-sxm").unwrap().clone();
        let correction = crate::profile::TableCorrection {
            class: crate::work::KernelClass::Gemm,
            dtype: Some(Dtype::Bf16),
            ratio: 0.97,
            ln_spread: 0.3,
            samples: 1472,
            rule: "gemm_table".into(),
            max_flops: Some(1.2e11),
            misaligned: Some(crate::profile::TracedRatio { ratio: 2.3, ln_spread: 0.08, samples: 265 }),
        };
        // Beyond the traced sizes (2 × 16 × 5185² × 64 ≈ 55 GFLOP, times 8): still its own ratio.
        let big = GemmShape { batch: 128.0, m: 5185.0, n: 5185.0, k: 64.0, dtype: Dtype::Bf16 };
        let table = p.gemm(&h100, &big).unwrap().time_us;
        let priced = p.gemm_corrected(&h100, &big, Some(&correction)).unwrap();
        assert!((priced.time_us / table - 2.3).abs() < 1e-9, "{}", priced.basis);
        assert!(priced.basis.contains("not whole 16-byte units"), "{}", priced.basis);
        // An aligned GEMM within the sizes takes the others' ratio.
        let aligned = bf16(5184.0, 1024.0, 1024.0);
        let priced = p.gemm_corrected(&h100, &aligned, Some(&correction)).unwrap().time_us;
        assert!((priced / p.gemm(&h100, &aligned).unwrap().time_us - 0.97).abs() < 1e-9);
        // A ratio that speeds the table up (MI300X's 0.59) is capped, like the others', at the
        // fastest this GPU was measured (H100: 81 % of its peak, XLA's table's best shape): the
        // traces' correction applies to the held price, as it was measured against it.
        let faster = crate::profile::TableCorrection {
            misaligned: Some(crate::profile::TracedRatio { ratio: 0.2, ln_spread: 0.08, samples: 265 }),
            ..correction
        };
        let large = bf16(8192.0, 8193.0, 8192.0);
        let priced = p.gemm_corrected(&h100, &large, Some(&faster)).unwrap();
        let achieved = large.flops() / (priced.time_us * 1e-6) / h100.peak_flops(Dtype::Bf16).unwrap();
        assert!((0.79..0.82).contains(&achieved), "{achieved} of the peak: {}", priced.basis);
        assert!(priced.basis.contains("capped at 81 %"), "{}", priced.basis);
        // Without a sustained measurement (B200) the cap at the fastest measured stands alone.
        let b200 = p.catalog.gpu("b200").unwrap().clone();
        let priced = p.gemm_corrected(&b200, &large, Some(&faster)).unwrap();
        let achieved = large.flops() / (priced.time_us * 1e-6) / b200.peak_flops(Dtype::Bf16).unwrap();
        assert!((0.77..0.78).contains(&achieved) && priced.basis.contains("capped"), "{achieved}: {}", priced.basis);
    }

    #[test]
    fn an_all_gather_without_points_of_its_own_is_held_to_the_link_rule() {
        // 8 × H200, NCCL 2.27.7, 16 GiB (`mle-h200-collectives`): all-reduce 480.0 GB/s
        // with in-switch reduction (NVLS), 367.2 without it; all-gather 361.4 and
        // reduce-scatter 362.9 — no NVLS for them. The H100 (the same NVLink 4 switch)
        // has no all-gather point: its all-reduce curve must not price one at the NVLS rate.
        let p = Pricing::builtin();
        let h100 = p.catalog.gpu("h100-sxm").unwrap().clone();
        let bytes = 17_179_869_184.0;
        let busbw = |c: Collective| {
            let price = p.collective(&h100, &CollectiveQuery::new(c, bytes, 8, 8)).unwrap();
            (c.bus_factor(8).unwrap() * bytes / (price.time_us * 1e-6) / 1e9, price)
        };
        let (all_reduce, _) = busbw(Collective::AllReduce);
        for c in [Collective::AllGather, Collective::ReduceScatter] {
            let (gbps, price) = busbw(c);
            assert!(gbps < all_reduce, "{c:?}: {gbps} GB/s, all-reduce {all_reduce}");
            assert!((gbps / 361.4 - 1.0).abs() < 0.10, "{c:?}: {gbps} GB/s against the H200's measured 361.4");
            assert_eq!(price.rule, PriceRule::CollectiveLinkSpec, "{}", price.basis);
            assert!(price.basis.contains("in-switch reduction"), "{}", price.basis);
        }
    }

    #[test]
    fn a_ring_collectives_own_point_beside_an_in_switch_all_reduce_is_a_ceiling_not_a_factor() {
        // 8 × H200: Azure's all-reduce sweep (NVLS) and one all-gather and one reduce-scatter
        // at 16 GiB (`mle-h200-collectives`, 361.4 and 362.9 GB/s bus bandwidth against the
        // all-reduce's 480). The points bound the ring's bandwidth; they do not slow every size
        // by their ratio (1.33×: 16 MiB had cost 107 µs, above H100's 85 without any point).
        let p = Pricing::builtin();
        let h200 = p.catalog.gpu("h200").unwrap().clone();
        let time = |c: Collective, bytes: f64| p.collective(&h200, &CollectiveQuery::new(c, bytes, 8, 8)).unwrap();
        // At 16 MiB: Azure's all-reduce at equal bus bytes (8 MiB, 181.94 GB/s bus bandwidth).
        let azure_8mib = 2.0 * 7.0 / 8.0 * 8_388_608.0 / 181.94e3;
        let big = 17_179_869_184.0;
        for (c, measured) in [(Collective::AllGather, 361.4), (Collective::ReduceScatter, 362.9)] {
            let small = time(c, 16_777_216.0);
            assert!((small.time_us / azure_8mib - 1.0).abs() < 1e-3, "{c:?}: {} µs: {}", small.time_us, small.basis);
            // Where the ceiling does not bind, the basis does not claim it.
            assert!(!small.basis.contains("held to the"), "{}", small.basis);
            let at = time(c, big);
            let busbw = 7.0 / 8.0 * big / at.time_us / 1e3;
            assert!((busbw / measured - 1.0).abs() < 1e-3, "{c:?}: {busbw} GB/s: {}", at.basis);
            assert!(at.basis.contains("held to the") && at.basis.contains(&format!("{measured:.1} GB/s bus bandwidth")), "{}", at.basis);
            // More bytes never cost less, and the H100 (the same switch, no point) is never faster above 1 MiB.
            let h100 = p.catalog.gpu("h100-sxm").unwrap().clone();
            let mut last = 0.0;
            for e in 16..=34 {
                let b = f64::from(1u32 << e.min(31)) * f64::from(1u32 << (e - e.min(31)));
                let t = time(c, b).time_us;
                assert!(t >= last, "{c:?}: {b} bytes {t} µs after {last}");
                last = t;
                let other = p.collective(&h100, &CollectiveQuery::new(c, b, 8, 8)).unwrap().time_us;
                assert!(e < 21 || t <= other * 1.05, "{c:?} {b} bytes: H200 {t} µs, H100 {other}");
            }
        }
    }

    /// A GPU priced by the spec model (no table of its own, or below a scattered one's shapes)
    /// streams a one-row GEMM's weights at its HBM bandwidth, as a GPU with a grid does: GB200,
    /// B300 and GB300 (8 TB/s, as B200) had cost a decode GEMM at B200's 256-row time, 2.9× its
    /// streaming time; A100 80GB (below Azure's 8 shapes) at 1.33× it.
    #[test]
    fn a_one_row_gemm_streams_its_weights_without_a_table_too() {
        let p = Pricing::builtin();
        let row = GemmShape { batch: 1.0, m: 1.0, n: 28672.0, k: 4096.0, dtype: Dtype::Bf16 };
        // (A100 80GB: Azure's 8 large shapes, the spec model below them.)
        for id in ["gb200", "b300", "gb300", "b200", "a100-80gb"] {
            let gpu = p.catalog.gpu(id).unwrap();
            let (bw, _) = p.hbm_bytes_per_s(gpu);
            let streamed = row.bytes() / bw * 1e6;
            let price = p.gemm(gpu, &row).unwrap();
            assert!((price.time_us / streamed - 1.0).abs() < 0.02, "{id}: {} µs, streamed {streamed}: {}", price.time_us, price.basis);
            // More rows never cost less.
            let wider = p.gemm(gpu, &GemmShape { m: 64.0, ..row }).unwrap();
            let full = p.gemm(gpu, &GemmShape { m: 256.0, ..row }).unwrap();
            assert!(
                price.time_us <= wider.time_us && wider.time_us <= full.time_us,
                "{id}: {} {} {}",
                price.time_us,
                wider.time_us,
                full.time_us
            );
            if id != "b200" {
                assert_eq!(price.rule, PriceRule::GemmSpecModel, "{}", price.basis);
                assert!(price.basis.contains("toward its operands' streaming time"), "{}", price.basis);
            }
        }
    }

    /// The best fraction of `peak` as a scan of every GEMM row works it out.
    fn best_fraction_of_rows(m: &Measurements, ids: &[&str], dtype: Dtype, peak: f64) -> Option<(f64, Arc<str>)> {
        m.gemm
            .iter()
            .filter(|r| table_dtype(r.dtype) == table_dtype(dtype) && ids.contains(&&*r.gpu) && !unreliable(r))
            .map(|r| (2.0 * r.batch * r.m * r.n * r.k / (r.time_us * 1e-6) / peak, r.from.source_id.clone()))
            .filter(|(f, _)| f.is_finite() && *f <= 1.0)
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }

    fn same(a: &Option<(f64, Arc<str>)>, b: &Option<(f64, Arc<str>)>) -> bool {
        a.as_ref().map(|(f, s)| (f.to_bits(), s)) == b.as_ref().map(|(f, s)| (f.to_bits(), s))
    }

    #[test]
    fn the_best_fraction_looked_up_is_the_one_a_scan_of_the_rows_finds() {
        let p = Pricing::builtin();
        let mut ids: Vec<&str> = p.measurements.gemm.iter().map(|r| &*r.gpu).collect();
        ids.sort_unstable();
        ids.dedup();
        let dtypes = [Dtype::Bf16, Dtype::Fp16, Dtype::Fp8, Dtype::Tf32, Dtype::Fp32, Dtype::Fp64, Dtype::Int8];
        let mut found = 0;
        for gpu in &p.catalog.gpus {
            let own: Vec<&str> = gpu.measurement_ids().collect();
            for d in dtypes {
                let want = peak(gpu, d).and_then(|pk| best_fraction_of_rows(&p.measurements, &own, d, pk));
                let got = p.best_gemm_fraction(gpu, d);
                assert!(same(&got, &want), "{} {d:?}: {got:?} vs {want:?}", gpu.id);
                found += usize::from(got.is_some());
            }
        }
        assert!(found > 10, "{found}");
        // Peaks that leave out the fastest rows, and ones no fraction is finite of.
        for d in dtypes {
            for pk in [1e15, 4e14, 1e14, 1e13, 1.0, 1e-310, f64::INFINITY, 0.0, -1e15, f64::NAN] {
                let sets = ids.iter().map(|id| vec![*id]).chain([ids.clone(), vec!["h200", "hopper-sm90"], vec!["nothing"]]);
                for set in sets {
                    let want = best_fraction_of_rows(&p.measurements, &set, d, pk);
                    let got = p.gemms().rates.best_fraction(set.iter().copied(), d, pk);
                    assert!(same(&got, &want), "{set:?} {d:?} at {pk}: {got:?} vs {want:?}");
                }
            }
        }
    }

    #[test]
    fn pricing_layers_of_one_base_share_its_gemm_tables_and_a_clone_builds_its_own() {
        let mut m = Measurements::builtin();
        m.add_text(b"gpu,dtype,m,n,k,tflops\nh100-sxm,bf16,4096,4096,4096,300\n", "mine.csv").unwrap();
        let m = Arc::new(m);
        assert!(m.gemm_index.0.get().is_none());
        let (a, b) = (Pricing::new(Catalog::builtin(), m.clone()), Pricing::new(Catalog::builtin(), m.clone()));
        assert!(std::ptr::eq(a.gemms(), b.gemms()));
        let copy = Arc::new((*m).clone());
        assert!(copy.gemm_index.0.get().is_none());
        let c = Pricing::new(Catalog::builtin(), copy);
        assert!(!std::ptr::eq(a.gemms(), c.gemms()));
        assert_eq!(a.gemms().tables.len(), c.gemms().tables.len());
    }

    /// Fewer GPUs than a system's curves measured move fewer bytes each: priced from the smallest
    /// count's curve by the bus factor, its latency NCCL's at the count. A100 is the one GPU with
    /// curves at 2, 4 and 8 in a node: from its 8-GPU curve alone, the 2- and 4-GPU all-reduce is
    /// within 15 % of what they measured from 16 MiB to 1 GiB (the 8-GPU curve as it stood had
    /// been 1.6× the 2-GPU time at 1 GiB), and at 1 KiB within 5 %.
    #[test]
    fn fewer_gpus_than_measured_cost_their_bus_factors_share() {
        let shipped = include_str!("../measurements/collectives.csv");
        let mut lines = shipped.lines();
        let header = lines.next().unwrap();
        let cols: Vec<&str> = header.split(',').collect();
        let col = |name: &str| cols.iter().position(|c| *c == name).unwrap();
        let (source, gpus, nodes, size, time) = (col("source_id"), col("gpus"), col("nodes"), col("size_bytes"), col("time_us"));
        // The rows' leading fields hold no quoted commas (the notes come last).
        let echo: Vec<Vec<&str>> =
            lines.map(|l| l.split(',').collect::<Vec<_>>()).filter(|f| f[source] == "echo-a100" && f[nodes] == "1").collect();
        let measured = |n: &str, bytes: &str| {
            echo.iter().filter(|f| f[gpus] == n && f[size] == bytes).map(|f| f[time].parse::<f64>().unwrap()).fold(f64::MAX, f64::min)
        };
        let only_eight: Vec<&str> = shipped
            .lines()
            .skip(1)
            .filter(|l| {
                let f: Vec<&str> = l.split(',').collect();
                f[source] == "echo-a100" && f[nodes] == "1" && f[gpus] == "8"
            })
            .collect();
        let mut m = Measurements::default();
        m.add_text(format!("{header}\n{}\n", only_eight.join("\n")).as_bytes(), "collectives.csv").unwrap();
        let p = Pricing::new(Catalog::builtin(), Arc::new(m));
        let a100 = p.catalog.gpu("a100-40gb").unwrap();
        for n in [2u32, 4] {
            for bytes in [1u64 << 24, 1 << 27, 1 << 30] {
                let price = p.collective(a100, &CollectiveQuery::new(Collective::AllReduce, bytes as f64, n, 8)).unwrap();
                assert_eq!(price.rule, PriceRule::CollectiveBelowCounts, "{}", price.basis);
                let want = measured(&n.to_string(), &bytes.to_string());
                assert!(
                    (price.time_us / want - 1.0).abs() < 0.15,
                    "{n} GPUs, {bytes} B: {} µs, measured {want}: {}",
                    price.time_us,
                    price.basis
                );
            }
            // The latency, NCCL's ring at n against 8 GPUs in its tuning model (the 8-GPU latency
            // kept had been 3.6× the 2-GPU one).
            let small = p.collective(a100, &CollectiveQuery::new(Collective::AllReduce, 1024.0, n, 8)).unwrap();
            let want = measured(&n.to_string(), "1024");
            assert!((small.time_us / want - 1.0).abs() < 0.05, "{n} GPUs, 1 KiB: {} µs, measured {want}", small.time_us);
        }
    }

    /// A GEMM below a table's shapes (priced by the spec model) never costs more than a larger
    /// one the table prices: H100 FP8 1000×256×4096 had cost 9.26 µs, 1024×256×4096 5.74.
    #[test]
    fn a_gemm_below_a_table_never_costs_more_than_a_larger_one() {
        let p = Pricing::builtin();
        let shape = |m: f64, n: f64, k: f64, dtype: Dtype| GemmShape { batch: 1.0, m, n, k, dtype };
        for (id, dtype) in [("h100-sxm", Dtype::Fp8), ("h100-sxm", Dtype::Bf16), ("a100-80gb", Dtype::Bf16), ("mi300x", Dtype::Bf16)] {
            let gpu = p.catalog.gpu(id).unwrap();
            for (m, n, k) in [(1000.0, 256.0, 4096.0), (256.0, 256.0, 256.0), (1024.0, 128.0, 1024.0), (100.0, 4096.0, 4096.0)] {
                let small = p.gemm(gpu, &shape(m, n, k, dtype)).unwrap();
                for larger in [
                    shape(1024.0_f64.max(m), n, k, dtype),
                    shape(m, 256.0_f64.max(n), k, dtype),
                    shape(1024.0_f64.max(m), 1024.0_f64.max(n), 1024.0_f64.max(k), dtype),
                ] {
                    let big = p.gemm(gpu, &larger).unwrap();
                    // Within 0.1 %: a complete grid interpolates measured times, not monotone to the last digit.
                    assert!(
                        small.time_us <= big.time_us * (1.0 + 1e-3),
                        "{id} {dtype:?} {m}×{n}×{k}: {} µs ({}) above {}×{}×{}: {} µs ({})",
                        small.time_us,
                        small.basis,
                        larger.m,
                        larger.n,
                        larger.k,
                        big.time_us,
                        big.basis
                    );
                }
            }
        }
    }

    /// Below the measured counts each collective's own bus factor carries its curve: a
    /// broadcast moves the same bytes a rank whatever the count (factor 1), so a user's 8-GPU
    /// broadcast curve prices 2 GPUs at its own time (the all-reduce's factor had made it 0.57×).
    #[test]
    fn a_broadcast_below_its_counts_keeps_its_bandwidth() {
        let mut csv = String::from("gpu,collective,gpus,nodes,gpus_per_node,size_bytes,time_us\n");
        for e in 10..=30 {
            let bytes = f64::from(1u32 << e);
            csv.push_str(&format!("h100-sxm,broadcast,8,1,8,{bytes},{}\n", 10.0 + bytes / 200e3));
        }
        let p = with_users(&csv, "bc.csv");
        let h100 = p.catalog.gpu("h100-sxm").unwrap();
        let at = |n: u32| p.collective(h100, &CollectiveQuery::new(Collective::Broadcast, f64::from(1u32 << 30), n, 8)).unwrap();
        let (two, eight) = (at(2), at(8));
        assert_eq!(two.rule, PriceRule::CollectiveBelowCounts, "{}", two.basis);
        // (Only the latency, 10 of its 5 378 µs, falls with the count: NCCL's chain of n − 1 steps.)
        assert!((two.time_us / eight.time_us - 1.0).abs() < 2e-3, "2 GPUs {} µs, 8 GPUs {} µs: {}", two.time_us, eight.time_us, two.basis);
    }

    /// A measured point slower than a larger size is priced at that size's time (more bytes
    /// never cost less) and the basis says so with the measurement (it had said only "within the
    /// measured range"): RCCL's 1 MiB all-reduce over 16 MI300X measured slower than its 2 MiB.
    #[test]
    fn a_measured_point_a_curve_lowered_is_said() {
        let p = Pricing::builtin();
        let mi300x = p.catalog.gpu("mi300x").unwrap();
        let rows = |bytes: f64| {
            p.measurements
                .collectives
                .iter()
                .filter(|r| {
                    &*r.from.source_id == "hisohara-rccl"
                        && &*r.gpu == "mi300x"
                        && r.gpus == 16
                        && r.size_bytes == bytes
                        && r.collective == Collective::AllReduce
                })
                .map(|r| r.time_us)
                .fold(f64::MAX, f64::min)
        };
        let (one, two) = (rows(1048576.0), rows(2097152.0));
        assert!(one > two, "the evidence's 1 MiB ({one} µs) is no longer slower than its 2 MiB ({two} µs)");
        let price = p.collective(mi300x, &CollectiveQuery::new(Collective::AllReduce, 1048576.0, 16, 8)).unwrap();
        assert_eq!(price.rule, PriceRule::CollectiveCurve, "{}", price.basis);
        assert!((price.time_us - two).abs() < 1e-6 * two, "{} µs, the 2 MiB point {two}: {}", price.time_us, price.basis);
        assert!(price.basis.contains(&format!("its 1048576 B point measured {one:.2} µs, slower than a larger size")), "{}", price.basis);
        // A size priced from points that were not lowered says nothing of it.
        let big = p.collective(mi300x, &CollectiveQuery::new(Collective::AllReduce, 1073741824.0, 16, 8)).unwrap();
        assert!(!big.basis.contains("slower than a larger size"), "{}", big.basis);
    }

    /// The FP8 bound of a table's price ([`Pricing::fp8_at_least_its_16_bit_share`]) never
    /// overrides a measurement of the shape itself: the user's FP8 table keeps its word.
    #[test]
    fn a_users_fp8_measurement_of_a_shape_keeps_its_word() {
        let rows = [
            (1024, 1024, 1024),
            (2048, 2048, 2048),
            (4096, 4096, 4096),
            (8192, 8192, 8192),
            (1024, 2048, 1024),
            (2048, 1024, 2048),
            (4096, 2048, 2048),
        ];
        let mut csv = String::from("gpu,dtype,m,n,k,time_us\n");
        for (m, n, k) in rows {
            csv.push_str(&format!("h100-sxm,fp8,{m},{n},{k},{}\n", 2.0 * f64::from(m) * f64::from(n) * f64::from(k) / 1.2e12 * 1e6));
        }
        csv.push_str("h100-sxm,fp8,1024,256,1024,1.0\n");
        let p = with_users(&csv, "mine.csv");
        let h100 = p.catalog.gpu("h100-sxm").unwrap();
        let at = p.gemm_excluding(h100, &GemmShape { batch: 1.0, m: 1024.0, n: 256.0, k: 1024.0, dtype: Dtype::Fp8 }, &[]).unwrap();
        assert_eq!(at.time_us, 1.0, "{}", at.basis);
    }

    /// A user's streaming rate prices the GPU's HBM where the shipped base measured a faster one.
    #[test]
    fn a_users_streaming_rate_comes_before_the_shipped_one() {
        let shipped = Pricing::builtin();
        let h100 = shipped.catalog.gpu("h100-sxm").unwrap().clone();
        assert!(shipped.hbm_bytes_per_s(&h100).0 > 2e12);
        let p = with_users("gpu,metric,bandwidth_gbps\nh100-sxm,stream_triad,1000\n", "mem.csv");
        let (bw, basis) = p.hbm_bytes_per_s(&h100);
        assert_eq!(bw, 1000e9, "{basis}");
        assert!(basis.contains("mem.csv stream_triad"), "{basis}");
        // A one-row GEMM streams its weights at that rate: slower than with the shipped one.
        let gemv = GemmShape { batch: 1.0, m: 1.0, n: 8192.0, k: 8192.0, dtype: Dtype::Bf16 };
        assert!(p.gemm(&h100, &gemv).unwrap().time_us > 2.0 * shipped.gemm(&h100, &gemv).unwrap().time_us);
    }

    /// A user's curve in a node at 10 GB/s of bus bandwidth holds every size across nodes to it:
    /// the shipped curves across nodes (A3 Mega's, 310 GB/s at 384 MiB over 64) are not faster
    /// than the node the user measured, and a group in one node keeps the user's curve as it is.
    #[test]
    fn a_collective_across_nodes_moves_no_byte_faster_than_a_measured_node() {
        let mut csv = String::from("gpu,collective,gpus,size_bytes,time_us\n");
        let sizes = [8u64, 1 << 20, 1 << 24, 1 << 28, 1 << 30];
        // All-reduce bus bytes 2·7/8 of the size at 10 GB/s, plus 20 µs.
        let node_us = |b: f64| 20.0 + b * 1.75 / 10e3;
        for b in sizes {
            csv.push_str(&format!("h100-sxm,all_reduce,8,{b},{:.3}\n", node_us(b as f64)));
        }
        let p = with_users(&csv, "slow.csv");
        let shipped = Pricing::builtin();
        let h100 = p.catalog.gpu("h100-sxm").unwrap();
        let bytes = 384.0 * 1024.0 * 1024.0;
        let q = CollectiveQuery::new(Collective::AllReduce, bytes, 64, 8);
        let across = p.collective(h100, &q).unwrap();
        // The user's node's whole time × the bus factors' ratio, 2·63/64 ÷ 2·7/8.
        let want = node_us(bytes) * (126.0 / 64.0) / 1.75;
        assert!((across.time_us / want - 1.0).abs() < 1e-3, "{} µs against {want}: {}", across.time_us, across.basis);
        assert!(across.basis.contains("a node of 8 reaches at this size (10.0 GB/s"), "{}", across.basis);
        // The shipped curves alone price it over 20× faster; in one node the user's curve stands.
        assert!(shipped.collective(h100, &q).unwrap().time_us < want / 20.0);
        let inside = p.collective(h100, &CollectiveQuery::new(Collective::AllReduce, bytes, 8, 8)).unwrap();
        assert!((inside.time_us / node_us(bytes) - 1.0).abs() < 1e-3, "{}", inside.basis);
        // Every size and count across nodes: at least the node's time × the bus factors' ratio.
        for b in [1u64 << 20, 1 << 24, 1 << 26] {
            for n in [16u32, 32, 512] {
                let t = p.collective(h100, &CollectiveQuery::new(Collective::AllReduce, b as f64, n, 8)).unwrap().time_us;
                let k = 2.0 * f64::from(n - 1) / f64::from(n);
                assert!(t >= node_us(b as f64) * k / 1.75 * (1.0 - 1e-6), "{b} B over {n}: {t} µs");
            }
        }
        // The user's ring of 16 GPUs, 4 to a node, bounds 32 of the same nodes: 30 ms × (2·31/32 ÷ 2·15/16).
        let p = with_users(
            "gpu,collective,gpus,nodes,gpus_per_node,size_bytes,time_us\nh100-sxm,all_reduce,16,4,4,1073741824,30000\n",
            "x16.csv",
        );
        let h100 = p.catalog.gpu("h100-sxm").unwrap();
        let wider = p.collective(h100, &CollectiveQuery::new(Collective::AllReduce, 1073741824.0, 32, 4)).unwrap();
        assert!((wider.time_us / (30000.0 * (62.0 / 32.0) / (30.0 / 16.0)) - 1.0).abs() < 1e-6, "{} µs: {}", wider.time_us, wider.basis);
        assert!(wider.basis.contains("the user's 16 GPUs, 4 to a node"), "{}", wider.basis);
    }

    /// Below a user's table of scattered shapes, its measured ÷ spec-model ratio carries: eight
    /// shapes at 300 TFLOP/s (about half the shipped table's rate) price 256×4096×4096 slower
    /// than the shipped base, as seven of them do (the eighth had priced it faster).
    #[test]
    fn below_a_users_table_its_stack_still_runs_as_measured() {
        let shipped = Pricing::builtin();
        let h100 = shipped.catalog.gpu("h100-sxm").unwrap().clone();
        let shapes = [
            (2048, 2048, 2048),
            (4096, 4096, 4096),
            (8192, 8192, 8192),
            (2048, 4096, 4096),
            (4096, 2048, 4096),
            (4096, 4096, 2048),
            (8192, 4096, 4096),
            (2048, 8192, 8192),
        ];
        let small = GemmShape { batch: 1.0, m: 256.0, n: 4096.0, k: 4096.0, dtype: Dtype::Bf16 };
        for rows in [7, 8] {
            let mut csv = String::from("gpu,dtype,m,n,k,tflops\n");
            for (m, n, k) in &shapes[..rows] {
                csv.push_str(&format!("h100-sxm,bf16,{m},{n},{k},300\n"));
            }
            let p = with_users(&csv, "g.csv");
            let price = p.gemm(&h100, &small).unwrap();
            assert!(price.time_us > 1.5 * shipped.gemm(&h100, &small).unwrap().time_us, "{rows} rows: {price:?}");
        }
    }

    /// A user's few GEMM shapes correct a shape by the nearest of them most: between two measured
    /// shapes the correction lies between theirs, nearer the nearer's; the file that priced it is named.
    #[test]
    fn a_users_few_gemm_shapes_correct_the_shapes_near_them_most() {
        let shipped = Pricing::new(Catalog::builtin(), Arc::new(Measurements::builtin()));
        let h100 = shipped.catalog.gpu("h100-sxm").unwrap();
        let cube = |x: f64| GemmShape { batch: 1.0, m: x, n: x, k: x, dtype: Dtype::Bf16 };
        let table = |x: f64| shipped.gemm(h100, &cube(x)).unwrap().time_us;
        // The user's stack: table time at 1024³ and 4096³, twice it at 8192³.
        let mut csv = String::from("gpu,dtype,m,n,k,time_us\n");
        for (x, r) in [(1024.0, 1.0), (4096.0, 1.0), (8192.0, 2.0)] {
            csv.push_str(&format!("h100-sxm,bf16,{x},{x},{x},{:.4}\n", r * table(x)));
        }
        let p = with_users(&csv, "mine.csv");
        let factor = |x: f64| p.gemm(h100, &cube(x)).unwrap().time_us / table(x);
        assert!((factor(8192.0) - 2.0).abs() < 1e-3, "{}", factor(8192.0));
        // 7168³ is 0.19 of a doubling from 8192³ per dimension, 0.81 from 4096³: mostly 8192's 2.
        let near = factor(7168.0);
        assert!(near > 1.8 && near < 2.0, "{near}");
        // 5120³ is nearer 4096³: mostly its 1, but more than it.
        let between = factor(5120.0);
        assert!(between > 1.0 && between < 1.5, "{between}");
        assert!(p.gemm(h100, &cube(5120.0)).unwrap().basis.contains("of h100-sxm (mine.csv), each weighted"));
        // A dimension of 0 sits where the rows' points put it, at 1 (it had priced NaN).
        let empty = p.gemm(h100, &GemmShape { batch: 0.0, ..cube(4096.0) }).unwrap();
        assert!(empty.time_us.is_finite(), "{}", empty.basis);
    }

    #[test]
    fn of_equal_best_fractions_the_last_row_gives_the_source() {
        let row = |gpu: &str, source: &str, m: f64, time_us: f64| crate::measured::GemmRow {
            gpu: gpu.into(),
            dtype: Dtype::Bf16,
            batch: 1.0,
            m,
            n: 1024.0,
            k: 1024.0,
            time_us,
            from: crate::measured::Provenance { source_id: source.into(), file: "test".into(), line: 1 },
        };
        let m = Measurements {
            gemm: vec![
                row("a", "first", 1024.0, 10.0),
                row("b", "second", 2048.0, 20.0),
                row("a", "third", 512.0, 5.0),
                row("b", "fourth", 1024.0, 10.0),
                row("a", "fastest", 1024.0, 1.0),
                row("a", "zero", 0.0, 1.0),
                row("a", "negative", -1.0, 1.0),
            ],
            gemm_sustained: Vec::new(),
            attention: Vec::new(),
            collectives: Vec::new(),
            memory: Vec::new(),
            networks: Vec::new(),
            user_files: Vec::new(),
            gemm_index: GemmIndex::default(),
            collective_index: CollectiveIndex::default(),
        };
        let rates = GemmRates::of(&m);
        for ids in [&["a"][..], &["b"], &["a", "b"], &["b", "a"]] {
            // 2 GFLOP/10 µs is 214.7 TFLOP/s; a peak of 1 PFLOP/s leaves out the fastest row (2.1 PFLOP/s).
            for pk in [1e15, 3e15, 1e14, f64::INFINITY, -1e15] {
                let want = best_fraction_of_rows(&m, ids, Dtype::Bf16, pk);
                assert!(same(&rates.best_fraction(ids.iter().copied(), Dtype::Bf16, pk), &want), "{ids:?} at {pk}: {want:?}");
            }
        }
        assert_eq!(rates.best_fraction(["a", "b"], Dtype::Bf16, 1e15).map(|b| b.1), Some("fourth".into()));
        assert_eq!(rates.best_fraction(["a"], Dtype::Fp16, 1e15).map(|b| b.1), Some("third".into()));
    }

    #[test]
    fn a_gpu_without_a_table_is_priced_by_its_specs_and_says_whose_shapes_it_learned() {
        let p = Pricing::builtin();
        let v100 = p.catalog.gpu("v100").unwrap().clone();
        let price = p.gemm(&v100, &bf16(4096.0, 4096.0, 4096.0)).unwrap();
        assert_eq!(price.rule, PriceRule::GemmSpecModel);
        // Never faster than its peak.
        let floor = 2.0 * 4096f64.powi(3) / 125e12 * 1e6;
        assert!(price.time_us > floor, "{} vs {floor}", price.time_us);
        assert!(price.basis.contains("b200"), "{}", price.basis);
    }

    #[test]
    fn a_grid_of_fewer_query_tiles_than_sms_runs_at_that_share_on_the_gpu_it_is_priced_for() {
        // Rates are measured on grids that fill the GPU and depend on the sequence length: at
        // one length the time is linear in batch × heads, until the grid has fewer 128-row
        // query tiles than SMs (H100 132, B200 148: its attention is H100's scaled).
        let p = Pricing::builtin();
        let shape = |batch: f64| AttentionShape { batch, heads: 8.0, seq: 1024.0, head_dim: 128.0, causal: true, backward: false };
        // GB200 has no SM count in the catalog: the measured H100's share is kept.
        for (id, sms) in [("h100-sxm", 132.0), ("b200", 148.0), ("gb200", 132.0)] {
            let gpu = p.catalog.gpu(id).unwrap();
            let time = |batch: f64| p.attention(gpu, &shape(batch), None).unwrap().time_us;
            // 3 × 8 × 8 = 192 tiles fill both; 1 × 8 × 8 = 64 leave SMs idle.
            let (full, small) = (time(3.0), time(1.0));
            let want = full / 3.0 * sms / 64.0;
            assert!((small / want - 1.0).abs() < 1e-9, "{id}: {small} µs, want {want}");
        }
    }

    #[test]
    fn an_attention_price_is_kept_for_its_gpu_shape_and_family_only() {
        let p = Pricing::builtin();
        let shape = AttentionShape { batch: 1.0, heads: 8.0, seq: 1024.0, head_dim: 128.0, causal: true, backward: true };
        let b200 = p.catalog.gpu("b200").unwrap().clone();
        let first = p.attention_of_family(&b200, &shape, None).unwrap();
        assert_eq!(p.attention_of_family(&b200, &shape, None).unwrap(), first, "kept");
        assert_eq!(p.attention_priced(&b200, &shape, None).unwrap(), first, "the kept price is the fresh one");
        // The same id with half the SMs: 64 query tiles fill more of it, so it must not get
        // the kept price of the whole GPU.
        let half = Gpu { sms: Some(74), ..b200.clone() };
        let other = p.attention_of_family(&half, &shape, None).unwrap();
        assert_eq!(other, p.attention_priced(&half, &shape, None).unwrap());
        assert!(other.0.time_us < first.0.time_us * 0.9, "{} µs on 74 SMs, {} µs on 148", other.0.time_us, first.0.time_us);
        // Another family or shape is priced afresh too.
        let fa2 = p.attention_of_family(&b200, &shape, Some("fa2")).unwrap();
        assert_eq!(fa2, p.attention_priced(&b200, &shape, Some("fa2")).unwrap());
        let longer = AttentionShape { seq: 4096.0, ..shape };
        assert!(p.attention_of_family(&b200, &longer, None).unwrap().0.time_us > first.0.time_us);
    }

    #[test]
    fn a_curve_across_nodes_is_carried_onto_the_network_it_is_priced_for() {
        let p = Pricing::builtin();
        let h100 = p.catalog.gpu("h100-sxm").unwrap().clone();
        let at = |nic: Option<f64>| {
            p.collective(&h100, &CollectiveQuery::new(Collective::AllGather, 268435456.0, 64, 8).over_network(nic)).unwrap().time_us
        };
        // A3 Mega's curve ran over 8 × 200 Gb/s per 8 GPUs (the networks table): over 25 GB/s
        // per GPU it is priced as measured; dgx-h100's 50 GB/s NICs price faster; never slower
        // for a faster network.
        let nics = [6.25, 12.5, 25.0, 40.0, 49.0, 50.0, 100.0, 400.0];
        let times: Vec<f64> = nics.iter().map(|n| at(Some(*n))).collect();
        assert!(times.windows(2).all(|w| w[1] <= w[0]), "{times:?}");
        assert_eq!(at(None), at(Some(50.0)));
        assert!(at(Some(50.0)) < at(Some(25.0)));
        let own = p.collective(&h100, &CollectiveQuery::new(Collective::AllGather, 268435456.0, 64, 8).over_network(Some(25.0))).unwrap();
        assert!(!own.basis.contains("network per GPU"), "{}", own.basis);
        // A user's networks row moves the curve's network, and so its price over 25 GB/s.
        let mut m = Measurements::builtin();
        m.add_text(b"source_id,gpu,gpus_per_node,nic_gbps_per_gpu\na3mega-h100,h100-sxm,8,50\n", "networks.csv").unwrap();
        let q = Pricing::new(p.catalog.clone(), Arc::new(m));
        let theirs =
            q.collective(&h100, &CollectiveQuery::new(Collective::AllGather, 268435456.0, 64, 8).over_network(Some(25.0))).unwrap();
        // The ring's added steps beyond the curve's 16 GPUs (227 µs in NCCL's model) are latency,
        // which the network does not scale: the rest is priced 1.56× slower.
        assert!(theirs.time_us > 1.4 * own.time_us, "{} vs {}", theirs.time_us, own.time_us);
        assert!(theirs.basis.contains("its ring's 48 steps beyond 16 GPUs, 227 µs"), "{}", theirs.basis);
        assert!(theirs.basis.contains("where the curve ran over 50"), "{}", theirs.basis);
    }

    /// More GPUs in one node than any curve measured (a 16-GPU NVLink domain of H100s, curves
    /// to 8) carry the 8-GPU curve by the bus factor, its latency kept — named so, not as the
    /// rule across nodes (whose latency grows with nodes, and NCCL's ring and tree steps).
    #[test]
    fn more_gpus_in_one_node_than_measured_is_its_own_rule() {
        let p = Pricing::builtin();
        let h100 = p.catalog.gpu("h100-sxm").unwrap();
        let at = |gpus, gpn| p.collective(h100, &CollectiveQuery::new(Collective::AllReduce, 1048576.0, gpus, gpn)).unwrap();
        let (eight, sixteen) = (at(8, 8), at(16, 16));
        assert_eq!(eight.rule, PriceRule::CollectiveCurve, "{}", eight.basis);
        assert_eq!(sixteen.rule, PriceRule::CollectiveAboveCounts, "{}", sixteen.basis);
        // Latency kept, the rest × 1.875 / 1.75: between the 8-GPU time and that time × the ratio.
        let ratio = (2.0 * 15.0 / 16.0) / (2.0 * 7.0 / 8.0);
        assert!(sixteen.time_us > eight.time_us && sixteen.time_us < eight.time_us * ratio, "{} vs {}", sixteen.time_us, eight.time_us);
        // Across nodes the scale-out rule stays.
        assert_eq!(at(1024, 8).rule, PriceRule::CollectiveScaleOut);
    }

    #[test]
    fn collective_curves_interpolate_in_size_and_scale_out_beyond_the_measured_counts() {
        let p = Pricing::builtin();
        let a100 = p.catalog.gpu("a100-40gb").unwrap().clone();
        // Echo's 16-GPU log, out-of-place, 1 MiB: measured time.
        let at16 = p.collective(&a100, &CollectiveQuery::new(Collective::AllReduce, 1048576.0, 16, 8)).unwrap();
        assert_eq!(at16.rule, PriceRule::CollectiveCurve);
        assert!(at16.basis.contains("echo-a100"), "{}", at16.basis);
        let beyond = p.collective(&a100, &CollectiveQuery::new(Collective::AllReduce, 1048576.0, 1024, 8)).unwrap();
        assert_eq!(beyond.rule, PriceRule::CollectiveScaleOut);
        assert!(beyond.extrapolated && beyond.time_us > at16.time_us);
        // Larger messages take longer.
        let big = p.collective(&a100, &CollectiveQuery::new(Collective::AllReduce, 1073741824.0, 16, 8)).unwrap();
        assert!(big.time_us > 10.0 * at16.time_us);
    }

    /// Known truth: a family whose matmul share ran exactly peak^0.5 faster from A100 to H100
    /// is carried to B200 (a higher peak, no attention rows) by the peaks' ratio to the power
    /// 0.5, exponentials at B200's rate; unnamed, the fastest family keeps the whole peak
    /// ratio; carried down to V100 (a lower peak) a family keeps the peaks too.
    #[test]
    fn a_named_family_gains_on_a_newer_gpu_what_its_code_gained_the_generation_before() {
        let shape = AttentionShape { batch: 4.0, heads: 16.0, seq: 4096.0, head_dim: 128.0, causal: true, backward: true };
        let builtin = Pricing::builtin();
        let (a100, h100, b200) = ["a100-80gb", "h100-sxm", "b200"].map(|id| builtin.catalog.gpu(id).unwrap().clone()).into();
        let exps_us = |g: &Gpu| shape.exponentials() / (g.exp_tps.unwrap() * 1e12) * 1e6;
        let (peak_a, peak_h, peak_b) =
            (peak(&a100, Dtype::Bf16).unwrap(), peak(&h100, Dtype::Bf16).unwrap(), peak(&b200, Dtype::Bf16).unwrap());
        let matmul_a = 2000.0;
        let matmul_h = matmul_a * (peak_a / peak_h).sqrt();
        let tflops = |us: f64| shape.flops() / (us * 1e-6) / 1e12;
        let row = |gpu: &str, us: f64| format!("test,{gpu},oldcode,fwd+bwd,1,128,4096,4,16,{},,bf16,known truth\n", tflops(us));
        let csv = format!(
            "source_id,gpu,kernel,direction,causal,head_dim,seqlen,batch,heads,tflops,time_us,dtype,notes\n{}{}",
            row("a100-80gb", matmul_a + exps_us(&a100)),
            row("h100-sxm", matmul_h + exps_us(&h100)),
        );
        let mut m = Measurements::builtin();
        m.add_text(csv.as_bytes(), "attention.csv").unwrap();
        let p = Pricing::new(builtin.catalog.clone(), Arc::new(m));
        let named = p.attention_work(&b200, &shape, Some("oldcode")).unwrap();
        let want = matmul_h * (peak_h / peak_b).sqrt() + exps_us(&b200);
        assert!((named.time_us / want - 1.0).abs() < 1e-6, "{} µs, want {want}: {}", named.time_us, named.basis);
        assert!(named.basis.contains("to the power 0.50") && named.basis.contains("a100-80gb to h100-sxm"), "{}", named.basis);
        // The fastest family, unnamed, is a kernel written for B200: the whole peak ratio.
        let fastest = p.attention_work(&b200, &shape, None).unwrap();
        assert!(!fastest.basis.contains("to the power"), "{}", fastest.basis);
        // And says so: the same family named prices otherwise (B200 FA2 fwd+bwd 2934 against 4379 µs).
        assert!(fastest.basis.contains("the fastest family measured, standing for a kernel written for b200"), "{}", fastest.basis);
        assert!(!named.basis.contains("standing for a kernel written for"), "{}", named.basis);
        // Down to a GPU of a lower peak the family keeps the peaks' ratio.
        let v100 = p.catalog.gpu("v100").unwrap();
        if let Some(down) = p.attention_work(v100, &shape, Some("oldcode")) {
            assert!(!down.basis.contains("to the power"), "{}", down.basis);
        }
        // Its forward, which no pair of GPUs measured, gains what its forward plus backward did.
        let forward = AttentionShape { backward: false, ..shape };
        if let Some(f) = p.attention_work(&b200, &forward, Some("oldcode")) {
            assert!(f.basis.contains("to the power 0.50") && f.basis.contains("forward plus backward"), "{}", f.basis);
        }
        // The family as the fastest measured one (a training step's forward priced by the family
        // of its forward plus backward, none named) stands for a kernel written for B200.
        let native = p.attention_work_of_family(&b200, &shape, "oldcode", false).unwrap();
        assert!(!native.basis.contains("to the power") && native.time_us < named.time_us, "{}", native.basis);
    }

    /// A family H100 never measured but carries from A100's charts by its siblings' ratios
    /// (xformers, FA-Triton) gains on B200 what those siblings' code gained, not the whole peak
    /// ratio: an Ampere kernel never gains more from Blackwell than FlashAttention 2 does.
    #[test]
    fn a_family_carried_from_its_siblings_gains_what_their_code_gained() {
        let p = Pricing::builtin();
        let shape = AttentionShape { batch: 1.0, heads: 32.0, seq: 8192.0, head_dim: 128.0, causal: true, backward: true };
        let (h200, b200) = (p.catalog.gpu("h200").unwrap(), p.catalog.gpu("b200").unwrap());
        let gain =
            |k: &str| p.attention_work(h200, &shape, Some(k)).unwrap().time_us / p.attention_work(b200, &shape, Some(k)).unwrap().time_us;
        let fa2 = gain("fa2");
        for family in ["xformers", "fa-triton"] {
            let on_b200 = p.attention_work(b200, &shape, Some(family)).unwrap();
            assert!(on_b200.basis.contains("is carried to h100-sxm from the families measured there"), "{}", on_b200.basis);
            assert!(gain(family) <= fa2 * 1.05, "{family} {:.2}× from H200 to B200 against FA2's {fa2:.2}×", gain(family));
        }
    }

    /// A GPU whose vendor measured no attention kernel (Gaudi) is priced from the closest
    /// measured GPU of any vendor, at that GPU's fraction of its peak, where it had taken the
    /// GEMM efficiency in `project` (Gaudi 3 at 4.4× H100's FA2) and no price in `hw cost`.
    #[test]
    fn attention_on_a_vendor_without_measurements_keeps_a_measured_fraction_of_peak() {
        let p = Pricing::builtin();
        let shape = AttentionShape { batch: 2.0, heads: 32.0, seq: 4096.0, head_dim: 128.0, causal: true, backward: false };
        let fraction = |id: &str| {
            let g = p.catalog.gpu(id).unwrap();
            let price = p.attention(g, &shape, None).unwrap();
            (shape.flops() / (price.time_us * 1e-6) / 1e12 / peak(g, Dtype::Bf16).unwrap(), price)
        };
        let (gaudi, price) = fraction("gaudi3");
        assert_eq!(price.rule, PriceRule::AttentionSpecModel);
        assert!(price.basis.contains("the closest measured GPU of any vendor"), "{}", price.basis);
        // Never a larger fraction of its peak than the measured GPUs reach at this shape.
        let best = ["h100-sxm", "a100-80gb", "mi300x", "b200"].map(|id| fraction(id).0).into_iter().fold(0.0, f64::max);
        assert!(gaudi <= best * (1.0 + 1e-9) && gaudi < 0.7, "{gaudi} of peak against the measured best {best}");
    }

    /// A curve that starts at gigabytes (MI300X's all-gathers and reduce-scatters, read from
    /// an FSDP training trace; MI325X's RCCL sweep, from 4 GiB) had held every smaller message at
    /// its smallest time: a 1 MiB all-gather over 8 MI300X at 6.0 ms, a 1 KiB all-reduce over 8
    /// MI325X at 23.7 ms. Below its smallest size a curve follows the link rule's shape, so time
    /// rises with the bytes and a small message costs about a latency, whatever the sweep.
    #[test]
    fn a_curve_that_starts_at_gigabytes_prices_small_messages_by_the_link_rules_shape() {
        let p = Pricing::builtin();
        let (mi300x, mi325x) = (p.catalog.gpu("mi300x").unwrap().clone(), p.catalog.gpu("mi325x").unwrap().clone());
        let at = |g: &Gpu, c: Collective, bytes: f64| p.collective(g, &CollectiveQuery::new(c, bytes, 8, 8)).unwrap().time_us;
        for (g, c) in [(&mi300x, Collective::AllGather), (&mi300x, Collective::ReduceScatter), (&mi325x, Collective::AllReduce)] {
            let sizes: Vec<f64> = (10..=34).map(|e| f64::from(2u32).powi(e)).collect();
            let times: Vec<f64> = sizes.iter().map(|&b| at(g, c, b)).collect();
            assert!(times.windows(2).all(|w| w[0] <= w[1] * (1.0 + 1e-9)), "{} {c:?}: {times:?}", g.id);
            // 1 KiB to 16 GiB: the smallest is a latency (MI300X's own measured 8-GPU all-reduce: 13 µs
            // at 1 KiB), the largest bandwidth-bound, thousands of times longer.
            assert!(times[0] < 100.0, "{} {c:?}: {} µs at 1 KiB", g.id, times[0]);
            assert!(times[times.len() - 1] > 1000.0 * times[0], "{} {c:?}: {times:?}", g.id);
        }
        // Sizes the sweeps measured keep their measured price.
        let measured = p.collective(&mi325x, &CollectiveQuery::new(Collective::AllReduce, 4294967296.0, 8, 8)).unwrap();
        assert!(!measured.extrapolated, "{}", measured.basis);
    }
}
