//! The one cost model: what a measured kernel would take on another device.
//!
//! Every consumer that re-prices kernels (replay `--target`, the report's
//! projection, synth's truth) goes through [`CrossDevice::kernel`]. A kernel
//! whose op has FLOPs or bytes is priced by the ratio of two rooflines of the
//! same formula, one per device,
//!
//! ```text
//! T(device) = L + max(F / (η_c · P), B / (η_m · BW))
//! ```
//!
//! with L the op's fixed cost (the smaller of the device's short-kernel time
//! and the class's fitted t0), P the peak for the op's dtype, BW the HBM
//! bandwidth, and η_c, η_m the efficiencies fitted on that device
//! (its calibration profile) — or, where only one device has a fit, that one
//! carried to the other (the no-profile path onto a GPU nobody has traced).
//! The measured time is split into the source's latency L and the rest, its
//! work; the projection is the target's L plus that work scaled by the two
//! rooflines' work terms. So the measurement keeps what it knows about this
//! very op (its shape's own inefficiency) and only what the devices change
//! changes. (The ratio of whole rooflines instead gave 16.5 % mean error in
//! the leave-one-out H100 ↔ MI300X test, this 10.1 %; quantizing 128 × 128
//! output tiles into waves over the SMs/CUs made it worse, 26.7 %: the
//! libraries pick their tiles per GPU and shape, and the fitted efficiencies
//! already average the waves they ran.) Arithmetic intensity decides per op which term
//! binds on each device. A kernel without work and short (up to four
//! short-kernel times) is latency-bound: it scales by the ratio of the
//! devices' short-kernel times, which one vendor's GPUs share. Anything else keeps its measured time. Every
//! kernel says which [`Rule`] priced it.

use serde::Serialize;
use tracecast_ingest::collective::Collective;

use crate::catalog::{Dtype, Gpu};
use crate::model::DeviceModel;
use crate::pricing::{AttentionShape, GemmShape, PriceRule, Pricing};
use crate::work::{KernelClass, KernelWork, OpWork};

/// Which rule priced a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The target's measured GEMM table at the op's shape × the target traces' correction.
    GemmTargetTable,
    /// Measured time × the ratio of the two GPUs' measured GEMM tables at its shape.
    GemmTables,
    /// A GEMM priced by shape with the spec model on one side at least (target price × its correction, or the ratio of the prices).
    GemmSpecModel,
    /// Measured time × the ratio of both GPUs' measured (or vendor-scaled) attention kernels at its shape.
    AttentionTables,
    /// Roofline ratio with efficiencies fitted on both devices.
    RooflineFitted,
    /// Roofline ratio with an efficiency fitted on one device and carried to the other.
    RooflineCarried,
    /// Roofline ratio of the catalog peaks alone (no fit on either device).
    RooflinePeaks,
    /// Short kernel without work: the ratio of the devices' short-kernel times (1 onto a GPU of
    /// the same vendor priced by the shipped base: [`CrossDevice::latencies`]).
    LatencyBound,
    /// Kept its measured time: no work model, not short.
    Measured,
    /// Kept its measured time: the target has no peak in the catalog for the op's number
    /// format (a GPU whose datasheet gives BF16 alone, an FP32 op onto it), not short.
    NoTargetPeak,
    /// Kept its measured time: the GPU it was measured on is not known (the trace records
    /// none the catalog has), so nothing prices it there.
    UnknownSourceGpu,
    /// Kept its measured time: measured on the target GPU itself.
    MeasuredOnTarget,
}

impl Rule {
    /// Whether it priced the kernel at its shape from the measured tables (what a user's
    /// GEMM or attention measurements change).
    pub fn by_shape(self) -> bool {
        matches!(self, Rule::GemmTargetTable | Rule::GemmTables | Rule::GemmSpecModel | Rule::AttentionTables)
    }

    /// In words.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::GemmTargetTable => "the target's measured GEMM table at the op's shape × its traces' correction for their software stack",
            Rule::GemmTables => "measured time × the ratio of both GPUs' measured GEMM tables at the op's shape",
            Rule::GemmSpecModel => {
                "the GEMM priced at the op's shape, the spec model on one side at least (target price × its correction, or measured time × the ratio of prices)"
            }
            Rule::AttentionTables => {
                "measured time × the ratio of both GPUs' attention prices at the op's shape (their fastest measured kernels, or the vendor's closest GPU's × peaks)"
            }
            Rule::RooflineFitted => {
                "roofline of the op's FLOPs and bytes, efficiencies fitted on both GPUs (the op's class, else a compute op's GEMM fit)"
            }
            Rule::RooflineCarried => {
                "roofline of the op's FLOPs and bytes, an efficiency fitted on one GPU carried to the other (the op's class, else a compute op's GEMM fit)"
            }
            Rule::RooflinePeaks => "roofline of the op's FLOPs and bytes, catalog peaks only",
            Rule::LatencyBound => "latency-bound short kernel, scaled by the GPUs' short-kernel times",
            Rule::Measured => "kept its measured time (no work model)",
            Rule::NoTargetPeak => {
                "kept its measured time (the target's catalog entry has no peak for the op's number format: add it with --hw)"
            }
            Rule::UnknownSourceGpu => "kept its measured time (the GPU it ran on is unknown: name it with --device ID)",
            Rule::MeasuredOnTarget => {
                "kept its measured time (measured on the target GPU itself; give a profile of another stack with --profile to price it)"
            }
        }
    }
}

/// Kernels up to this many short-kernel times count as latency-bound when
/// their op has no work model (leave-one-out H100→MI300X: 20 % → 12.7 %
/// mean busy-time error when these scale instead of keeping their time).
pub const SHORT_KERNEL_FLOORS: f64 = 4.0;

/// Pricing from one device (where the trace was measured) to another.
#[derive(Debug, Clone)]
pub struct CrossDevice<'a> {
    /// Where the kernels were measured.
    pub source: &'a DeviceModel,
    /// Where they are projected.
    pub target: &'a DeviceModel,
    /// The measured base (shape-aware GEMM prices); `None`: rooflines only.
    pub pricing: Option<&'a Pricing>,
}

/// One side's numbers for an op.
struct Side<'a> {
    gpu: &'a Gpu,
    model: &'a DeviceModel,
}

impl Side<'_> {
    /// The compute efficiency for an op of `class`: its class's fit, else
    /// the GEMM fit (convolutions and attention run on the same units), with its 95 % interval.
    fn compute_eta(&self, class: KernelClass, dtype: Option<Dtype>) -> Option<Eta> {
        let fit = |c| self.model.kernel_fit(c, dtype).map(Eta::of);
        fit(class).or_else(|| if class == KernelClass::Gemm { None } else { fit(KernelClass::Gemm) })
    }

    /// The HBM efficiency for an op of `class`: its memory-bound class's fit, else the elementwise fit.
    fn memory_eta(&self, class: KernelClass, dtype: Option<Dtype>) -> Option<Eta> {
        let fit = |c| self.model.kernel_fit(c, dtype).map(Eta::of);
        if class.counts_flops() { fit(KernelClass::Elementwise) } else { fit(class).or_else(|| fit(KernelClass::Elementwise)) }
    }

    /// The op's time at compute efficiency `eta_c` of the peak `compute` names and HBM efficiency `eta_m`.
    fn roofline_us(&self, op: &OpWork, (eta_c, compute): (f64, PeakOf), eta_m: f64, latency_us: f64) -> Option<f64> {
        let compute = match (op.flops, op.dtype.and_then(|d| compute.flops(self.gpu, d))) {
            (Some(f), Some(p)) => Some(f / (eta_c * p) * 1e6),
            (Some(_), None) => return None,
            _ => None,
        };
        let memory = op.bytes.map(|b| b / (eta_m * self.gpu.hbm_bytes_per_s()) * 1e6);
        let t = match (compute, memory) {
            (Some(c), Some(m)) => c.max(m),
            (Some(c), None) => c,
            (None, Some(m)) => m,
            (None, None) => return None,
        };
        Some(latency_us + t)
    }
}

/// An efficiency with its 95 % interval, and the peak it is a fraction of.
#[derive(Debug, Clone, Copy)]
struct Eta {
    value: f64,
    lo: f64,
    hi: f64,
    of: PeakOf,
}

impl Eta {
    fn of(f: &crate::profile::KernelFit) -> Eta {
        let [lo, hi] = f.efficiency_ci95;
        let value = f.efficiency;
        let of = if f.peak_of == Dtype::Tf32.as_str() { PeakOf::Tf32 } else { PeakOf::Dtype };
        Eta { value, lo: lo.clamp(value * 0.5, value), hi: hi.clamp(value, (value * 2.0).min(1.0).max(value)), of }
    }

    fn peak() -> Eta {
        Eta { value: 1.0, lo: 1.0, hi: 1.0, of: PeakOf::Dtype }
    }
}

/// Which compute peak an efficiency is a fraction of. A calibration fits FP32 GEMMs that ran
/// faster than the FP32 peak against the TF32 peak (TF32 tensor cores were allowed); that
/// efficiency prices FP32 work against the TF32 peak on either GPU, where the GPU has one
/// (a V100 has none: its FP32 peak).
#[derive(Debug, Clone, Copy, PartialEq)]
enum PeakOf {
    /// The op's dtype's peak.
    Dtype,
    /// The TF32 peak for FP32 ops.
    Tf32,
}

impl PeakOf {
    fn flops(self, gpu: &Gpu, d: Dtype) -> Option<f64> {
        match (self, d) {
            (PeakOf::Tf32, Dtype::Fp32) => gpu.peak_flops(Dtype::Tf32).or_else(|| peak(gpu, d)),
            _ => peak(gpu, d),
        }
    }
}

/// The dtype's peak, FLOP/s; 16-bit types fall back to each other (a GPU
/// that lists FP16 but not BF16, V100) and FP32 never takes a tensor-core peak.
fn peak(gpu: &Gpu, d: Dtype) -> Option<f64> {
    gpu.peak_flops_or_stand_in(d)
}

/// A kernel's projected time, its band and the rule that priced it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelCost {
    /// Projected duration, µs.
    pub us: f64,
    /// With the target's efficiencies at the top of their 95 % intervals, µs.
    pub low_us: f64,
    /// With them at the bottom, µs.
    pub high_us: f64,
    /// The rule.
    pub rule: Rule,
    /// Whether its price ends at a bound of the target ([`crate::pricing::Price::at_a_bound`]):
    /// the tables, or a profile's correction of them, faster than the GPU runs.
    pub at_a_bound: bool,
    /// Whether the user's own measurements (`--measurements`) of either GPU priced it.
    pub by_user: bool,
}

impl CrossDevice<'_> {
    /// Short-kernel times (source, target), µs: the target's from its
    /// profile, else carried from the source; one GPU's of the same vendor as
    /// the source carried too. A short kernel costs what the vendor's driver and
    /// runtime make it cost ([`crate::shipped::untraced`]); a floor (the tenth
    /// percentile of a profile's kernels) orders by the workloads traced, not by
    /// the GPU: NVIDIA's shipped ones run V100 1.0 µs, H100 1.86, B200 2.78, A100
    /// 3.0. Their ratio had tripled V100's kernels of no work on A100.
    /// A target profile the user gave (`--profile`, fitted on the target's traces) keeps its own.
    pub fn latencies(&self) -> Option<(f64, f64)> {
        let s = self.source.kernel_floor_us.filter(|v| *v > 0.0)?;
        if self.shares_vendor() {
            return Some((s, s));
        }
        Some((s, self.target.kernel_floor_us.filter(|v| *v > 0.0).unwrap_or(s)))
    }

    /// The vendor of both GPUs, where they share one (and the target is priced by the shipped
    /// base, not a profile the user gave): their short kernels cost the same.
    pub fn one_vendor(&self) -> Option<String> {
        self.shares_vendor().then(|| self.source.gpu.as_ref().and_then(Gpu::vendor)).flatten()
    }

    /// [`CrossDevice::one_vendor`] without its name (asked of every kernel).
    fn shares_vendor(&self) -> bool {
        self.target.default_for_gpu && matches!((&self.source.gpu, &self.target.gpu), (Some(a), Some(b)) if a.same_vendor(b))
    }

    /// The projected time of a compute kernel measured at `measured_us`.
    pub fn kernel(&self, k: &KernelWork, measured_us: f64) -> KernelCost {
        let keep = KernelCost {
            us: measured_us,
            low_us: measured_us,
            high_us: measured_us,
            rule: Rule::Measured,
            at_a_bound: false,
            by_user: false,
        };
        let Some(sg) = self.source.gpu.as_ref() else { return KernelCost { rule: Rule::UnknownSourceGpu, ..keep } };
        let Some(tg) = self.target.gpu.as_ref() else { return keep };
        // The most specific price of a kernel on a GPU is its own measurement there: the
        // GPU's default model is fitted on other work (a profile chosen for its software
        // stack prices the kernels: "this run with that stack").
        if sg.id == tg.id && self.target.default_for_gpu {
            return KernelCost { rule: Rule::MeasuredOnTarget, ..keep };
        }
        let (src, tgt) = (Side { gpu: sg, model: self.source }, Side { gpu: tg, model: self.target });
        if let Some(cost) = self.gemm_by_shape(k, sg, tg, measured_us) {
            return cost;
        }
        if let Some(cost) = self.attention_by_shape(k, sg, tg, measured_us) {
            return cost;
        }
        let (ls, lt) = self.latencies().unwrap_or((0.0, 0.0));
        // Work the source prices but the target cannot (no peak for its format): kept, and said so.
        let mut no_target_peak = false;
        if let Some(op) = &k.op
            && (op.flops.is_some() || op.bytes.is_some())
        {
            let (cs, ct) = (src.compute_eta(op.class, op.dtype), tgt.compute_eta(op.class, op.dtype));
            let (ms, mt) = (src.memory_eta(op.class, op.dtype), tgt.memory_eta(op.class, op.dtype));
            // The op's fixed cost: both the short-kernel time (its shortest
            // kernels still do some work) and the class's fitted t0 (which can
            // absorb small ops' inefficiency) bound it from above; the smaller
            // one is used. On a synthetic trace of large kernels the floor is
            // 41 µs and t0 the true 4 µs; on the corpus's H100/MI300X traces
            // the floors (1.9 / 4.7 µs) are below the GEMM t0s (4.5 / 7.1 µs).
            let t0 = |side: &Side| side.model.kernel_fit(op.class, op.dtype).map(|f| f.overhead_us).filter(|t| *t > 0.0);
            let (ls, lt) = (t0(&src).map_or(ls, |t| t.min(ls)), t0(&tgt).map_or(lt, |t| t.min(lt)));
            let fitted = |a: Option<Eta>, b: Option<Eta>| match (a, b) {
                (Some(_), Some(_)) => 2,
                (None, None) => 0,
                _ => 1,
            };
            // The rule is named after the efficiency of the op's own kind of work.
            let level = if op.flops.is_some() { fitted(cs, ct) } else { fitted(ms, mt) };
            let carry = |a: Option<Eta>, b: Option<Eta>| (a.or(b).unwrap_or(Eta::peak()), b.or(a).unwrap_or(Eta::peak()));
            let source_fitted = cs.is_some();
            let ((mut cs, ct), (ms, mt)) = (carry(cs, ct), carry(ms, mt));
            // A source with no fit of its own whose FP32 op ran faster than its FP32 peak ran on
            // TF32 tensor cores: whatever efficiency it borrows is one of its TF32 peak.
            if !source_fitted
                && let (Some(Dtype::Fp32), Some(flops), Some(fp32)) = (op.dtype, op.flops, peak(sg, Dtype::Fp32))
                && sg.peak_flops(Dtype::Tf32).is_some()
                && flops / (measured_us * 1e-6) > fp32
            {
                cs.of = PeakOf::Tf32;
            }
            // Work the measurement could not have done at the source's peaks
            // means the op's work model does not hold for it (a mis-read
            // convolution stride): it is not priced by its work.
            let at_peak = src.roofline_us(op, (1.0, cs.of), 1.0, 0.0).unwrap_or(0.0);
            let target_at = |c: f64, m: f64| tgt.roofline_us(op, (c, ct.of), m, lt);
            if let (Some(ts), Some(tt), Some(fast), Some(slow)) = (
                src.roofline_us(op, (cs.value, cs.of), ms.value, ls),
                target_at(ct.value, mt.value),
                target_at(ct.hi, mt.hi),
                target_at(ct.lo, mt.lo),
            ) && ts > ls
                && at_peak <= measured_us
            {
                let rule = match level {
                    2 => Rule::RooflineFitted,
                    1 => Rule::RooflineCarried,
                    _ => Rule::RooflinePeaks,
                };
                // The measured time is the source's latency plus its work;
                // the latency becomes the target's and the work scales by
                // the two rooflines' work terms.
                let work_s = ts - ls;
                let excess = (measured_us - ls).max(0.0);
                // A kernel that ran in less than the source's latency was all latency: it scales
                // as the latencies do (it had been raised to the target's: MI300X → MI325X, one
                // short-kernel time, priced a 1.96 µs integer add at 4.64 µs).
                let latency = if ls > 0.0 { measured_us.min(ls) * lt / ls } else { lt };
                let at = |t: f64| latency + excess * (t - lt) / work_s;
                return KernelCost { us: at(tt), low_us: at(fast), high_us: at(slow), rule, at_a_bound: false, by_user: false };
            }
            // Only where the work model holds (the measurement could have done the work).
            no_target_peak = op.flops.is_some() && at_peak > 0.0 && at_peak <= measured_us && target_at(1.0, 1.0).is_none();
        }
        if ls > 0.0 && measured_us <= SHORT_KERNEL_FLOORS * ls {
            let us = measured_us * lt / ls;
            return KernelCost { us, low_us: us, high_us: us, rule: Rule::LatencyBound, at_a_bound: false, by_user: false };
        }
        if no_target_peak {
            return KernelCost { rule: Rule::NoTargetPeak, ..keep };
        }
        keep
    }
}

impl CrossDevice<'_> {
    /// A GEMM whose shape is known, on two GPUs the pricing layer prices: the
    /// target's price at that shape × the target traces' correction (the bare
    /// table for a GEMM larger than any they ran), else its measured time ×
    /// (target price ÷ source price) at that shape.
    fn gemm_by_shape(&self, k: &KernelWork, sg: &Gpu, tg: &Gpu, measured_us: f64) -> Option<KernelCost> {
        let pricing = self.pricing?;
        let op = k.op.as_ref()?;
        let shape = GemmShape::of_op(op.shape, op.dtype)?;
        // Where traces of the target measured its software stack against the
        // tables, the target's price at this shape × that correction (this
        // op's share of it): a library's fallback of the source (H100's cuBLAS
        // running sm75 CUTLASS kernels for misaligned rows) does not carry to
        // another vendor's library, and the target's own misaligned GEMMs take
        // their own ratio. Leave-one-out over the four public H100/MI300X pairs,
        // GEMM class: mean |error| 34 % with class-fitted rooflines, 13.8 % this way.
        // Without such traces, the source's measured time × the ratio of the
        // two prices: what the source's stack achieved carries over. A target
        // priced by another GPU's fits (H200 by H100's) has no traces of its own:
        // of the source's vendor, the source's libraries run it and this run's
        // stack carries (H100 → H200 had made the same GEMMs 14 % slower on the
        // faster GPU); of another vendor, the lender's correction is the evidence
        // of the target's libraries there is (H100 → MI325X, MI300X's).
        let same_stack = self.target.fits_of_another.is_some() && sg.same_vendor(tg);
        let own = gemm_correction(self.target, shape.dtype).filter(|_| !same_stack);
        let (us, band, rule, at_a_bound, by_user) = match own {
            Some(c) => {
                let pt = pricing.gemm_corrected(tg, &shape, Some(c))?;
                let rule = if pt.rule == PriceRule::GemmTable { Rule::GemmTargetTable } else { Rule::GemmSpecModel };
                let by_user = pt.by_the_user();
                (k.share * pt.time_us, pt.band, rule, pt.at_a_bound(), by_user)
            }
            None => {
                let (ps, pt) = (pricing.gemm(sg, &shape)?, pricing.gemm(tg, &shape)?);
                let spread = gemm_correction(self.source, shape.dtype).map_or(0.0, |c| c.ln_spread / 2.0);
                let band = (ps.band.powi(2) + pt.band.powi(2) + spread.powi(2)).sqrt();
                let both = ps.rule == PriceRule::GemmTable && pt.rule == PriceRule::GemmTable;
                let rule = if both { Rule::GemmTables } else { Rule::GemmSpecModel };
                let by_user = ps.by_the_user() || pt.by_the_user();
                (measured_us * pt.time_us / ps.time_us, band, rule, pt.at_a_bound(), by_user)
            }
        };
        Some(KernelCost { us, low_us: us * (1.0 - band).max(0.0), high_us: us * (1.0 + band), rule, at_a_bound, by_user })
    }
}

impl CrossDevice<'_> {
    /// An attention op whose shape is known: its measured time × (target price ÷
    /// source price) at that shape, each GPU's fastest measured kernel family
    /// (or its vendor's closest measured GPU: matmul share by the peaks, softmax by the SFU rates): what the
    /// source's stack achieved against its best kernel carries over.
    fn attention_by_shape(&self, k: &KernelWork, sg: &Gpu, tg: &Gpu, measured_us: f64) -> Option<KernelCost> {
        let pricing = self.pricing?;
        let op = k.op.as_ref()?;
        let Some(crate::work::OpShape::Attention { batch, heads, seq_q, seq_k, head_dim, causal, backward }) = op.shape else {
            return None;
        };
        // Self-attention shapes index the tables; cross-attention by the geometric mean of the lengths.
        let shape = AttentionShape { batch, heads, seq: (seq_q * seq_k).sqrt(), head_dim, causal, backward };
        // The work's times, without the floor of each GPU's shortest kernel (the source's measured time holds its own).
        let (ps, pt) = (pricing.attention_work(sg, &shape, None)?, pricing.attention_work(tg, &shape, None)?);
        // Work the tables price below the source's short-kernel time is not what the
        // kernel's time is made of (its launch and setup are): it scales by the two
        // GPUs' short-kernel times, as other latency-bound kernels do.
        if let Some((ls, lt)) = self.latencies()
            && ls > 0.0
            && ps.time_us <= ls
        {
            let us = measured_us * lt / ls;
            return Some(KernelCost { us, low_us: us, high_us: us, rule: Rule::LatencyBound, at_a_bound: false, by_user: false });
        }
        if !(ps.time_us > 0.0 && pt.time_us > 0.0) {
            return None;
        }
        let band = (ps.band.powi(2) + pt.band.powi(2)).sqrt();
        let us = measured_us * pt.time_us / ps.time_us;
        Some(KernelCost {
            us,
            low_us: us * (1.0 - band).max(0.0),
            high_us: us * (1.0 + band),
            rule: Rule::AttentionTables,
            at_a_bound: false,
            by_user: pricing.has_user_attention(sg, &shape) || pricing.has_user_attention(tg, &shape),
        })
    }
}

/// A device's GEMM table correction for `dtype`, from its profile.
fn gemm_correction(m: &DeviceModel, dtype: Dtype) -> Option<&crate::profile::TableCorrection> {
    m.profile.as_ref()?.table_correction(KernelClass::Gemm, Some(dtype))
}

/// The one collective cost model: a link class's latency α and bus
/// bandwidth B, and a collective of S bytes over n ranks takes
/// α + k(n)·S / B with k the nccl-tests bus factor (all-reduce 2(n−1)/n,
/// all-gather and reduce-scatter (n−1)/n of the full size, …). Replay's
/// `--link`, the analytical workload models, the calibration's link fits and
/// the report's α-β curves all use it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AlphaBeta {
    /// Latency per collective, µs.
    pub alpha_us: f64,
    /// Bus bandwidth, GB/s.
    pub busbw_gbps: f64,
}

impl AlphaBeta {
    /// From seconds and bytes/s.
    pub fn from_si(alpha_s: f64, busbw_bytes_per_s: f64) -> AlphaBeta {
        AlphaBeta { alpha_us: alpha_s * 1e6, busbw_gbps: busbw_bytes_per_s / 1e9 }
    }

    /// Time to move `bus_bytes` (k·S) over the link, µs.
    pub fn transfer_us(&self, bus_bytes: f64) -> f64 {
        self.alpha_us + bus_bytes / (self.busbw_gbps * 1e3)
    }

    /// [`AlphaBeta::transfer_us`] in seconds.
    pub fn transfer_s(&self, bus_bytes: f64) -> f64 {
        self.transfer_us(bus_bytes) * 1e-6
    }

    /// Time of `collective` of `bytes` over `n` ranks, µs (`None` without a
    /// bus factor for it, or without bandwidth).
    pub fn collective_us(&self, collective: Collective, bytes: f64, n: i64) -> Option<f64> {
        let k = collective.bus_factor_in(Some(n))?;
        (self.busbw_gbps > 0.0).then(|| self.transfer_us(k * bytes))
    }

    /// The link as a profile's fit describes it.
    pub fn of_fit(l: &crate::profile::LinkFit) -> AlphaBeta {
        AlphaBeta { alpha_us: l.alpha_us, busbw_gbps: l.busbw_gbps }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An A100 trace's FP32 GEMMs ran on TF32 tensor cores (its calibration fits them against
    /// the TF32 peak); projected onto a V100, which has no TF32, they cannot run faster than
    /// its FP32 peak (15.7 TFLOP/s). Priced against the A100's FP32 peak, the source's
    /// measured 67 TFLOP/s could not have happened and the kernel kept its A100 time.
    #[test]
    fn fp32_gemms_fitted_against_tf32_are_priced_against_the_peak_they_ran_on() {
        let catalog = crate::Catalog::builtin();
        let model = |id: &str, eta: f64, tf32: bool| {
            let gpu = catalog.gpu(id).unwrap();
            let mut p = crate::Profile::of_catalog_gpu(gpu, &catalog);
            p.set_gemm_efficiency(Dtype::Fp32, eta, 5.0, 100, "test".into());
            if tf32 {
                let fit = p.kernels.iter_mut().find(|k| k.class == KernelClass::Gemm).unwrap();
                fit.peak_of = Dtype::Tf32.as_str().into();
                fit.peak = gpu.peak_flops(Dtype::Tf32).unwrap() / 1e12;
            }
            DeviceModel::from_profile(&p, &catalog)
        };
        let (a100, v100) = (model("a100-40gb", 0.43, true), model("v100", 0.83, false));
        let flops = 1e11;
        let op = OpWork { class: KernelClass::Gemm, flops: Some(flops), bytes: Some(1e8), dtype: Some(Dtype::Fp32), shape: None };
        let kernel =
            KernelWork { class: KernelClass::Gemm, dtype: Some(Dtype::Fp32), op_work: op.flops, op: Some(op), op_row: Some(0), share: 1.0 };
        // Measured at 67 TFLOP/s on the A100 (0.43 of its 156 TFLOP/s TF32 peak).
        let measured_us = flops / 67e12 * 1e6;
        let cost = CrossDevice { source: &a100, target: &v100, pricing: None }.kernel(&kernel, measured_us);
        let v100_fp32_peak = catalog.gpu("v100").unwrap().peak_flops(Dtype::Fp32).unwrap();
        assert_eq!(cost.rule, Rule::RooflineFitted);
        assert!(cost.us >= flops / v100_fp32_peak * 1e6, "{} µs: faster than the V100's FP32 peak", cost.us);
        // The V100's own η of its FP32 peak prices it: F / (0.83 · 15.7 TFLOP/s), plus its t0.
        let want = flops / (0.83 * v100_fp32_peak) * 1e6;
        assert!((cost.us - want).abs() < 0.01 * want, "{} µs against {want} µs", cost.us);
        // A source with no fit of its own (the efficiency borrowed from the V100's FP32 fit): what it
        // measured above its FP32 peak ran on TF32, and the V100 still cannot beat its FP32 peak.
        let bare_a100 = DeviceModel::from_gpu(catalog.gpu("a100-40gb").unwrap());
        let cost = CrossDevice { source: &bare_a100, target: &v100, pricing: None }.kernel(&kernel, measured_us);
        assert_eq!(cost.rule, Rule::RooflineCarried);
        assert!(cost.us >= flops / v100_fp32_peak * 1e6, "{} µs: faster than the V100's FP32 peak", cost.us);
        // Carried to an H100 without a fit of its own, the efficiency stays one of the TF32 peak.
        let h100 = DeviceModel::from_gpu(catalog.gpu("h100-sxm").unwrap());
        let cost = CrossDevice { source: &a100, target: &h100, pricing: None }.kernel(&kernel, measured_us);
        let h100_tf32 = catalog.gpu("h100-sxm").unwrap().peak_flops(Dtype::Tf32).unwrap();
        assert_eq!(cost.rule, Rule::RooflineCarried);
        assert!(cost.us < measured_us, "{} µs: slower on an H100 than the A100's {measured_us} µs", cost.us);
        assert!(cost.us >= flops / h100_tf32 * 1e6);
    }

    /// Onto a GPU of the same vendor priced by the shipped base, a kernel of no work keeps its
    /// time (one driver and runtime); a target profile the user fitted on the target's own
    /// traces keeps its short-kernel time.
    #[test]
    fn short_kernels_keep_their_time_onto_the_same_vendor_unless_the_target_was_calibrated() {
        let catalog = crate::Catalog::builtin();
        let floor = |id: &str, us: f64| {
            let mut m = DeviceModel::from_gpu(catalog.gpu(id).unwrap());
            m.kernel_floor_us = Some(us);
            m
        };
        let v100 = floor("v100", 1.0);
        let kernel = KernelWork { class: KernelClass::Elementwise, dtype: None, op_work: None, op: None, op_row: None, share: 1.0 };
        let mut shipped = floor("a100-80gb", 3.0);
        shipped.default_for_gpu = true;
        let cost = CrossDevice { source: &v100, target: &shipped, pricing: None }.kernel(&kernel, 1.8);
        assert_eq!((cost.rule, cost.us), (Rule::LatencyBound, 1.8));
        let calibrated = floor("a100-80gb", 3.0);
        let cost = CrossDevice { source: &v100, target: &calibrated, pricing: None }.kernel(&kernel, 1.8);
        assert_eq!(cost.rule, Rule::LatencyBound);
        assert!((cost.us - 5.4).abs() < 1e-9, "{}", cost.us);
        // Another vendor's GPU: the floors' ratio, shipped or not.
        let mut mi300x = floor("mi300x", 4.0);
        mi300x.default_for_gpu = true;
        assert!((CrossDevice { source: &v100, target: &mi300x, pricing: None }.kernel(&kernel, 1.8).us - 7.2).abs() < 1e-9);
    }

    #[test]
    fn the_collective_model_is_alpha_plus_bus_bytes_over_bandwidth() {
        let ab = AlphaBeta { alpha_us: 10.0, busbw_gbps: 100.0 };
        // All-reduce of 1 GB over 8 ranks: 2·7/8 GB at 100 GB/s = 17.5 ms, plus α.
        assert_eq!(ab.collective_us(Collective::AllReduce, 1e9, 8), Some(10.0 + 17_500.0));
        assert_eq!(ab.collective_us(Collective::AllGather, 1e9, 2), Some(10.0 + 5_000.0));
        assert!((AlphaBeta::from_si(10e-6, 100e9).transfer_s(1e9) - (10e-6 + 0.01)).abs() < 1e-12);
    }
}
