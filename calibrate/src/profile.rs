//! The calibration profile of one device: kernel efficiencies and link
//! parameters fitted from traces, with their quality (DESIGN §4).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tracecast_ingest::Job;
use tracecast_ingest::analysis::{Classifier, CollectiveSample, JobCollectives, RankContext};
use tracecast_ingest::collective::Collective;

use crate::catalog::{Catalog, Dtype, Gpu, MatchKind, Node};
use crate::fit::{lower_envelope, relative_line_nonneg};
use crate::work::{self, KernelClass, OpShape, WorkSample};

/// Options of [`calibrate`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CalibrateOptions {
    /// Communication classifier. Default: `^nccl.*Kernel`.
    pub classifier: Classifier,
    /// GPUs per node, to tell intra- from inter-node groups. Default: the
    /// matched GPU's node preset, else 8.
    pub gpus_per_node: Option<u32>,
    /// Fewest samples for a fit. Default: 5.
    pub min_samples: usize,
}

impl Default for CalibrateOptions {
    fn default() -> Self {
        CalibrateOptions { classifier: Classifier::default(), gpus_per_node: None, min_samples: 5 }
    }
}

/// The device a profile describes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceInfo {
    /// `deviceProperties.name` as in the traces.
    pub name: String,
    /// Catalog id, when the device is in the catalog.
    pub catalog_id: Option<String>,
    /// How it was matched.
    pub matched_by: Option<MatchKind>,
    /// Catalog peaks, TFLOP/s (TOPS for int8), by dtype.
    pub peak_tflops: BTreeMap<String, f64>,
    /// Catalog HBM bandwidth, GB/s.
    pub hbm_gbps: Option<f64>,
    /// Catalog intra-node link bandwidth per direction, GB/s.
    pub link_gbps: Option<f64>,
    /// Per-GPU share of the node's NIC bandwidth, GB/s.
    pub nic_gbps_per_gpu: Option<f64>,
    /// GPUs per node assumed for domains.
    pub gpus_per_node: u32,
}

/// One bin of the efficiency-vs-size curve.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizeBin {
    /// Smallest work in the bin (FLOPs or bytes).
    pub work_min: f64,
    /// Largest work in the bin.
    pub work_max: f64,
    /// Samples.
    pub samples: usize,
    /// Median achieved throughput / peak.
    pub efficiency: f64,
}

/// A kernel-class fit: t = t0 + W / (η · P).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelFit {
    /// Kernel class.
    pub class: KernelClass,
    /// Dtype of the ops (memory-bound classes are fitted per dtype too).
    pub dtype: Option<Dtype>,
    /// `flop` or `byte`.
    pub unit: String,
    /// The peak P: TFLOP/s for FLOP classes, GB/s for byte classes.
    pub peak: f64,
    /// Which peak was used (`bf16`, `tf32`, `hbm`, …).
    pub peak_of: String,
    /// Fitted efficiency η (achieved / peak on large work).
    pub efficiency: f64,
    /// 95 % interval of η.
    pub efficiency_ci95: [f64; 2],
    /// Fitted fixed overhead t0, µs.
    pub overhead_us: f64,
    /// 95 % interval of t0.
    pub overhead_ci95: [f64; 2],
    /// R² of the fit.
    pub r2: f64,
    /// Op instances fitted.
    pub samples: usize,
    /// RMS relative residual.
    pub residual_spread: f64,
    /// Best throughput of one op instance relative to the peak (what the
    /// hardware demonstrably reached).
    pub achieved_max: f64,
    /// Efficiency by work size (log-spaced bins).
    pub size_curve: Vec<SizeBin>,
    /// Smallest and largest work fitted (at least 4× apart).
    #[serde(default)]
    pub work_range: [f64; 2],
    /// How the fit was constrained.
    #[serde(default)]
    pub notes: Vec<String>,
    /// (work, µs) of every sample, for plots.
    #[serde(skip)]
    pub points: Vec<(f64, f64)>,
}

impl KernelFit {
    /// The peak P in FLOP/s (FLOP classes) or bytes/s (byte classes).
    pub fn peak_per_s(&self) -> f64 {
        peak_per_s(&self.unit, self.peak)
    }

    /// The fitted time of an op with `work` FLOPs or bytes, µs.
    pub fn time_us(&self, work: f64) -> f64 {
        self.overhead_us + work / (self.efficiency * self.peak_per_s()) * 1e6
    }
}

/// A profile's peak (TFLOP/s for `flop`, GB/s for `byte`) in units per second.
pub(crate) fn peak_per_s(unit: &str, peak: f64) -> f64 {
    if unit == "flop" { peak * 1e12 } else { peak * 1e9 }
}

/// A link fit: t = α + k · S / B.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkFit {
    /// Collective.
    pub collective: Collective,
    /// Ranks in the group.
    pub group_size: Option<i64>,
    /// `intra`, `inter` or `unknown` (node).
    pub domain: String,
    /// NCCL algorithm, when the kernel name gives it.
    pub algo: Option<String>,
    /// NCCL protocol, when the kernel name gives it.
    pub proto: Option<String>,
    /// Latency α, µs.
    pub alpha_us: f64,
    /// 95 % interval of α.
    pub alpha_ci95: [f64; 2],
    /// Bus bandwidth B, GB/s.
    pub busbw_gbps: f64,
    /// 95 % interval of B.
    pub busbw_ci95: [f64; 2],
    /// B / nominal bandwidth of the domain.
    pub efficiency: Option<f64>,
    /// The nominal bandwidth compared with, GB/s.
    pub nominal_gbps: Option<f64>,
    /// R² of the fit.
    pub r2: f64,
    /// Points fitted.
    pub samples: usize,
    /// `transfer` (min over matched ranks) or `lower_envelope` (one rank).
    pub fitted_on: String,
    /// The least and most bus bytes (k·S) fitted: a price outside them is extrapolated
    /// (absent from profiles written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_bytes_range: Option<[f64; 2]>,
    /// (bus bytes k·S, µs) of every point fitted, for plots.
    #[serde(skip)]
    pub points: Vec<(f64, f64)>,
}

/// Something the traces could not support a fit for, and why.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unfitted {
    /// What (`gemm/bf16`, `all_reduce/8/intra`, …).
    pub what: String,
    /// Samples available.
    pub samples: usize,
    /// Σ time of those samples, µs.
    pub total_us: f64,
    /// Why there is no fit.
    pub reason: String,
}

/// The calibration of one device.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The device.
    pub device: DeviceInfo,
    /// Trace files used.
    pub traces: Vec<String>,
    /// Kernel-class fits.
    pub kernels: Vec<KernelFit>,
    /// Link fits.
    pub links: Vec<LinkFit>,
    /// What could not be fitted.
    pub unfitted: Vec<Unfitted>,
    /// The 10th percentile of compute-kernel durations, µs: what the short,
    /// latency-bound kernels take on this device (projection scales kernels
    /// without a fitted class by it).
    pub kernel_floor_us: Option<f64>,
    /// Remarks.
    pub notes: Vec<String>,
    /// How this device's traced ops ran against the measured tables of the
    /// pricing layer, per class and dtype (the software stack's correction).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub table_corrections: Vec<TableCorrection>,
}

/// The rule of a [`TableCorrection`] fitted by `validate --fit` to measured runs'
/// throughput (no traced shapes: it applies to every size).
pub const FITTED_TO_RUNS: &str = "fitted by validate --fit";

/// The median ratio of a class's measured op times on this device to what the
/// pricing layer's measured tables predict for the same shapes: what this
/// software stack achieves against the public measurements. A projection
/// multiplies the table's price by it (a class fit from other workloads
/// corrects the table; it does not replace it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableCorrection {
    /// The class (`gemm`).
    pub class: KernelClass,
    /// The dtype.
    pub dtype: Option<Dtype>,
    /// Median of measured ÷ table-predicted time.
    pub ratio: f64,
    /// Interquartile range of ln(ratio): the spread of the correction.
    pub ln_spread: f64,
    /// Ops with a shape that the ratio is the median of.
    pub samples: usize,
    /// The rule of the predictions (`gemm_table`, `gemm_spec_model`).
    pub rule: String,
    /// FLOPs of the largest op the ratio was measured on (traced GEMMs; none when fitted
    /// to whole runs): larger shapes are out of its range and priced without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_flops: Option<f64>,
    /// The correction of the traced GEMMs whose rows are not whole 16-byte units
    /// ([`crate::pricing::GemmShape::misaligned`]), where they and the others each make one
    /// ([`TABLE_CORRECTION_MIN_SAMPLES`]); `ratio` and `max_flops` are then of the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misaligned: Option<TracedRatio>,
}

/// The median measured ÷ table time of a group of a GPU's traced GEMMs: a [`TableCorrection`]'s
/// misaligned ones (the library runs other kernels for them than for the shapes the tables
/// measured), or, while a correction is made, either group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TracedRatio {
    /// Median of measured ÷ table-predicted time.
    pub ratio: f64,
    /// Interquartile range of ln(ratio).
    pub ln_spread: f64,
    /// GEMMs the median is of.
    pub samples: usize,
}

impl TableCorrection {
    /// Whether traced kernels measured it (the rule that priced them), not a fit to whole runs
    /// (`validate --fit`, whose `samples` are runs).
    pub fn measured_on_traces(&self) -> bool {
        self.rule == crate::pricing::PriceRule::GemmTable.as_str() || self.rule == crate::pricing::PriceRule::GemmSpecModel.as_str()
    }

    /// Where a fit to whole runs comes from, in words (`None`: measured on traces).
    pub fn fitted_to_runs(&self) -> Option<String> {
        (!self.measured_on_traces()).then(|| {
            format!("fitted to {} measured run(s) ({})", self.samples, if self.rule.is_empty() { "validate --fit" } else { &self.rule })
        })
    }

    /// Where the ratio comes from, in words: the runs it was fitted to, or the traced GEMMs
    /// whose median it is and the sizes it holds for (`calibrate`'s summary and `validate`).
    pub fn basis_in_words(&self) -> String {
        self.fitted_to_runs().unwrap_or_else(|| {
            let sizes =
                self.max_flops.map_or(String::new(), |f| format!(" of at most {:.3} GFLOP (larger ones: the table alone)", f / 1e9));
            format!("median of {} {} traced GEMMs{sizes}", if self.misaligned.is_some() { "the other" } else { "all" }, self.samples)
        })
    }
}

impl Profile {
    /// The valid fit of `class` for exactly `dtype` ([`crate::DeviceModel::kernel_fit`], which
    /// asks it): one inside the physical bounds; for TF32, the FP32 ops fitted against the TF32
    /// peak (they ran on its tensor cores).
    pub fn kernel_fit(&self, class: KernelClass, dtype: Option<Dtype>) -> Option<&KernelFit> {
        let physical = crate::model::physical;
        self.kernels.iter().find(|f| f.class == class && f.dtype == dtype && physical(f)).or_else(|| {
            (dtype == Some(Dtype::Tf32)).then_some(())?;
            self.kernels
                .iter()
                .find(|f| f.class == class && f.dtype == Some(Dtype::Fp32) && f.peak_of == Dtype::Tf32.as_str() && physical(f))
        })
    }

    /// Whether its traces fitted nothing a projection prices by: no kernel class, no link and no
    /// correction of the tables (a short-kernel time alone, or nothing: a CPU-only trace, a device
    /// the catalog does not know). Such a profile would only replace a GPU's shipped fits by defaults.
    pub fn fits_nothing(&self) -> bool {
        self.kernels.is_empty() && self.links.is_empty() && self.table_corrections.is_empty()
    }

    /// The all-reduce α–β fits of the links in a node and across nodes ([`Profile::link`], the
    /// ones `project` prices with), with the relative half-width of each one's bus-bandwidth 95 % interval: what
    /// prices a tier of a collective before the measured base.
    pub fn all_reduce_fits(&self) -> [Option<crate::pricing::TierFit>; 2] {
        ["intra", "inter"].map(|domain| {
            let l = self.link(Collective::AllReduce, None, domain)?.fit;
            let band = if l.busbw_gbps > 0.0 { (l.busbw_ci95[1] - l.busbw_ci95[0]).abs() / 2.0 / l.busbw_gbps } else { 0.0 };
            let fitted_over = l.bus_bytes_range.map(|bus_bytes| crate::pricing::FittedOver { bus_bytes, ranks: l.group_size });
            Some(crate::pricing::TierFit {
                fit: crate::cost::AlphaBeta { alpha_us: l.alpha_us, busbw_gbps: l.busbw_gbps },
                band,
                fitted_over,
            })
        })
    }

    /// The correction of `class` in `dtype` against the pricing layer's tables, when the traces measured one.
    pub fn table_correction(&self, class: KernelClass, dtype: Option<Dtype>) -> Option<&TableCorrection> {
        self.table_corrections.iter().find(|c| c.class == class && c.dtype == dtype)
    }

    /// A profile of catalog GPU `gpu` with nothing fitted yet (its peaks,
    /// HBM and links from the catalog): what `validate --fit` starts from
    /// when the GPU has no shipped calibration.
    pub fn of_catalog_gpu(gpu: &Gpu, catalog: &Catalog) -> Profile {
        let node = catalog.node_of(&gpu.id);
        let mut peak_tflops = BTreeMap::new();
        for d in Dtype::ALL {
            if let Some(p) = gpu.peak_flops(d) {
                peak_tflops.insert(d.as_str().to_string(), p / 1e12);
            }
        }
        Profile {
            device: DeviceInfo {
                name: gpu.name.clone(),
                catalog_id: Some(gpu.id.clone()),
                matched_by: None,
                peak_tflops,
                hbm_gbps: Some(gpu.hbm_gbps),
                link_gbps: Some(gpu.link_gbps),
                nic_gbps_per_gpu: node.map(Node::nic_gbps_per_gpu),
                gpus_per_node: catalog.gpus_per_node(Some(&gpu.id), None),
            },
            traces: Vec::new(),
            kernels: Vec::new(),
            links: Vec::new(),
            unfitted: Vec::new(),
            kernel_floor_us: None,
            notes: Vec::new(),
            table_corrections: Vec::new(),
        }
    }

    /// Whether the GEMM table correction of `dtype` was fitted to whole measured runs
    /// ([`FITTED_TO_RUNS`]): it then holds what their software stack spent beyond the
    /// model, not only its kernels' speed.
    pub fn gemm_fitted_to_runs(&self, dtype: Dtype) -> bool {
        self.table_corrections.iter().any(|c| c.class == KernelClass::Gemm && c.dtype == Some(dtype) && c.rule == FITTED_TO_RUNS)
    }

    /// Sets the GEMM table correction for `dtype` to `ratio` (measured ÷ table
    /// time), as fitted elsewhere than on traced kernels (`how` says where).
    /// A correction of the traces' misaligned GEMMs is kept: it measures the library's fallback
    /// kernels, which runs do not.
    pub fn set_gemm_correction(&mut self, dtype: Dtype, ratio: f64, samples: usize, how: &str) {
        let is_it = |c: &TableCorrection| c.class == KernelClass::Gemm && c.dtype == Some(dtype);
        let misaligned = self.table_corrections.iter().find(|c| is_it(c)).and_then(|c| c.misaligned.clone());
        self.table_corrections.retain(|c| !is_it(c));
        self.table_corrections.push(TableCorrection {
            class: KernelClass::Gemm,
            dtype: Some(dtype),
            ratio,
            ln_spread: 0.0,
            samples,
            rule: how.to_string(),
            max_flops: None,
            misaligned,
        });
    }

    /// Sets the GEMM efficiency for `dtype` to `efficiency` (keeping the
    /// fitted t0 when there is one, else `overhead_us`), as fitted elsewhere
    /// than on kernels (`how` says where; it becomes the fit's note).
    pub fn set_gemm_efficiency(&mut self, dtype: Dtype, efficiency: f64, overhead_us: f64, samples: usize, how: String) {
        let peak = self.device.peak_tflops.get(dtype.as_str()).copied().unwrap_or(0.0);
        match self.kernels.iter_mut().find(|k| k.class == KernelClass::Gemm && k.dtype == Some(dtype)) {
            Some(k) => {
                k.efficiency = efficiency;
                k.efficiency_ci95 = [efficiency, efficiency];
                k.achieved_max = k.achieved_max.max(efficiency);
                k.notes.push(how);
            }
            None => self.kernels.push(KernelFit {
                class: KernelClass::Gemm,
                dtype: Some(dtype),
                unit: "flop".into(),
                peak,
                peak_of: dtype.as_str().into(),
                efficiency,
                efficiency_ci95: [efficiency, efficiency],
                overhead_us,
                overhead_ci95: [overhead_us, overhead_us],
                r2: 0.0,
                samples,
                residual_spread: 0.0,
                achieved_max: efficiency,
                size_curve: Vec::new(),
                work_range: [0.0, 0.0],
                notes: vec![how],
                points: Vec::new(),
            }),
        }
    }
}

/// Whether FP32 FLOP work ran on TF32 tensor cores: some of it went faster than the FP32 peak
/// (`best_of_fp32_peak`, its best rate as a fraction of that peak, above 1), which only TF32
/// tensor cores reach. A calibration fits such a group against the TF32 peak; the report's op
/// table gives such a job's FP32 work as a share of it. One rule for both.
pub fn ran_on_tf32(dtype: Option<Dtype>, counts_flops: bool, best_of_fp32_peak: f64) -> bool {
    dtype == Some(Dtype::Fp32) && counts_flops && best_of_fp32_peak > 1.0
}

/// A rank's compute-kernel durations in ns, 4 bytes each (a job holds
/// millions until it is calibrated); the rare one outside `u32` kept apart.
#[derive(Debug, Clone, Default)]
struct KernelDurations {
    ns: Vec<u32>,
    other_ns: Vec<i64>,
}

impl KernelDurations {
    /// The compute kernels of a trace, given its rows' activity classes.
    fn of(trace: &tracecast_ingest::RankTrace, classes: &[Option<tracecast_ingest::analysis::ActivityClass>]) -> KernelDurations {
        let mut d = KernelDurations::default();
        let compute =
            trace.gpu_activity().filter(|&i| classes.get(i).copied().flatten() == Some(tracecast_ingest::analysis::ActivityClass::Compute));
        for i in compute {
            let ns = trace.events.dur_ns.get(i).copied().unwrap_or(0);
            match u32::try_from(ns) {
                Ok(short) => d.ns.push(short),
                Err(_) => d.other_ns.push(ns),
            }
        }
        d.ns.shrink_to_fit();
        d
    }
}

/// The 10th percentile of the ranks' compute-kernel durations, µs (None when
/// there are none): the (n/10)-th smallest of them all. The 4-byte durations
/// stay 4 bytes (one list of every rank's, each rank's freed as it joins);
/// the rare others are negative, below them all, or above `u32` ns.
fn kernel_floor_us(ranks: Vec<KernelDurations>) -> Option<f64> {
    let mut ns = Vec::with_capacity(ranks.iter().map(|r| r.ns.len()).sum());
    let mut other = Vec::new();
    for r in ranks {
        ns.extend_from_slice(&r.ns);
        other.extend(r.other_ns);
    }
    let n = ns.len() + other.len();
    if n == 0 {
        return None;
    }
    let k = n / 10;
    other.sort_unstable();
    let below = other.partition_point(|&x| x < 0);
    let kth = match k.checked_sub(below) {
        None => other[k],
        Some(j) if j < ns.len() => i64::from(*ns.select_nth_unstable(j).1),
        Some(_) => other[k - ns.len()],
    };
    Some(kth as f64 / 1000.0)
}

fn peak_for(gpu: Option<&Gpu>, class: KernelClass, dtype: Option<Dtype>) -> Option<(f64, String)> {
    let gpu = gpu?;
    if class.counts_flops() {
        let d = dtype?;
        Some((gpu.peak_flops(d)?, d.as_str().to_string()))
    } else {
        Some((gpu.hbm_bytes_per_s(), "hbm".to_string()))
    }
}

fn kernel_fit(
    class: KernelClass,
    dtype: Option<Dtype>,
    samples: &[&ClassSamples],
    (peak, peak_of): (f64, String),
    min_work: f64,
    min: usize,
) -> Result<KernelFit, String> {
    let mut notes_of_fit = Vec::new();
    // The points with known work, counted, and those of at least `min_work`
    // kept (a job has millions of samples: one copy, not several).
    let known = samples.iter().flat_map(|c| c.sized()).filter_map(|(s, t)| Some((s.work?, t))).filter(|(w, t)| *w > 0.0 && *t > 0.0);
    let all = known.clone().count();
    let mut pts: Vec<(f64, f64)> = known.filter(|(w, _)| *w >= min_work).collect();
    // The points stay in the profile for its charts: without the growth's spare capacity.
    pts.shrink_to_fit();
    if pts.len() < min {
        return Err(if all >= min && min_work > 0.0 {
            format!(
                "{} of {} samples move at least {:.0} MB (twice the last-level cache); smaller ones can run from cache and do not measure HBM",
                pts.len(),
                all,
                min_work / 1e6
            )
        } else {
            format!("{} samples with known work (need {min})", pts.len())
        });
    }
    let (lo, hi) = pts.iter().fold((f64::INFINITY, 0.0f64), |(a, b), &(w, _)| (a.min(w), b.max(w)));
    if hi < MIN_WORK_SPAN * lo {
        let mut d: Vec<f64> = pts.iter().map(|p| p.1).collect();
        d.sort_by(f64::total_cmp);
        return Err(format!(
            "latency-bound or too narrow: the work spans {:.1}× (a fit needs {MIN_WORK_SPAN}×); over the {} samples with known work{}: measured time median {:.1} µs, 90th percentile {:.1} µs",
            hi / lo.max(f64::MIN_POSITIVE),
            pts.len(),
            if min_work > 0.0 { format!(" of at least {:.0} MB", min_work / 1e6) } else { String::new() },
            d[d.len() / 2],
            d[(d.len() * 9 / 10).min(d.len() - 1)]
        ));
    }
    let f = relative_line_nonneg(&pts).ok_or("all samples have the same work: efficiency and overhead cannot be separated")?;
    if f.slope_ci95[0] <= 0.0 {
        return Err("time does not grow significantly with work in these samples (95 % interval of the slope includes 0)".into());
    }
    if f.intercept == 0.0 {
        notes_of_fit.push("t0 constrained to 0 (the free fit was negative)".to_string());
    }
    let per_us = peak / 1e6;
    let eta = 1.0 / (f.slope * per_us);
    let eta_lo = if f.slope_ci95[1] > 0.0 { 1.0 / (f.slope_ci95[1] * per_us) } else { 0.0 };
    let eta_hi = if f.slope_ci95[0] > 0.0 { 1.0 / (f.slope_ci95[0] * per_us) } else { f64::INFINITY };
    // Efficiency by size: median achieved throughput per half-decade of work.
    // Each point's bin (a log10 of a positive f64 × 2 fits an i16) and rate,
    // and the points' indices sorted once by (bin, rate): each bin is a run.
    let bin_of: Vec<i16> = pts.iter().map(|&(w, _)| (w.log10() * 2.0).floor() as i16).collect();
    let rate_of: Vec<f64> = pts.iter().map(|&(w, t)| w / t).collect();
    let rate = |i: u32| rate_of[i as usize];
    let mut order: Vec<u32> = (0..pts.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| bin_of[a as usize].cmp(&bin_of[b as usize]).then(rate(a).total_cmp(&rate(b))));
    let size_curve = order
        .chunk_by(|&a, &b| bin_of[a as usize] == bin_of[b as usize])
        .map(|run| {
            let (work_min, work_max) =
                run.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &i| (lo.min(pts[i as usize].0), hi.max(pts[i as usize].0)));
            SizeBin { work_min, work_max, samples: run.len(), efficiency: rate(run[run.len() / 2]) / per_us }
        })
        .collect();
    let peak_shown = if class.counts_flops() { peak / 1e12 } else { peak / 1e9 };
    Ok(KernelFit {
        class,
        dtype,
        unit: if class.counts_flops() { "flop" } else { "byte" }.to_string(),
        peak: peak_shown,
        peak_of,
        efficiency: eta,
        efficiency_ci95: [eta_lo, eta_hi],
        overhead_us: f.intercept,
        overhead_ci95: f.intercept_ci95,
        r2: f.r2,
        samples: pts.len(),
        residual_spread: f.residual_spread,
        achieved_max: pts.iter().map(|(w, t)| w / t).fold(0.0, f64::max) / per_us,
        size_curve,
        work_range: [lo, hi],
        notes: notes_of_fit,
        points: pts,
    })
}

/// A kernel fit needs samples whose work spans at least this ratio: over a
/// narrower range a line cannot separate the fixed cost t0 from the
/// throughput (the corpus's H100 reductions, 2.2× apart, gave t0 = −774 µs).
pub const MIN_WORK_SPAN: f64 = 4.0;

/// Calibrates every device found in `jobs`: one profile per device.
pub fn calibrate(jobs: &[Job], catalog: &Catalog, opts: &CalibrateOptions) -> Vec<Profile> {
    calibrate_jobs(jobs.iter(), catalog, opts)
}

/// What calibration needs of one rank: its device, its work samples and
/// compute-kernel durations (its collectives come from the job's
/// [`JobCollectives`]). Built from the rank's context while its trace is in
/// memory; the trace can then be dropped.
#[derive(Debug, Clone)]
pub struct RankSamples<'c> {
    rank: u32,
    name: String,
    gpu: Option<(&'c Gpu, MatchKind)>,
    path: String,
    classes: Vec<ClassSamples>,
    durations: KernelDurations,
    /// What reading the rank's trace warned of (`--device` not applied, …): the profile says it.
    warnings: Vec<String>,
}

/// One rank's samples of one (class, dtype), reduced on the rank's thread to
/// what the fits read: a job holds every rank's samples until it is
/// calibrated, millions of them, and a rank's ops repeat a few dozen sizes.
#[derive(Debug, Clone)]
struct ClassSamples {
    class: KernelClass,
    dtype: Option<Dtype>,
    /// Samples of the class, with a work model or not.
    count: usize,
    /// Their summed time, µs.
    total_us: f64,
    /// The distinct sizes of the samples with a work or a shape.
    sizes: Vec<SampleSize>,
    /// Those samples in the rank's order: the index of each one's size and
    /// its time, µs (12 bytes a sample, not a [`WorkSample`]'s 56).
    size_of: Vec<u32>,
    dur_us: Vec<f64>,
}

/// The size of an op: what a kernel fit, its support check and the table
/// corrections read besides its time.
#[derive(Debug, Clone)]
struct SampleSize {
    /// FLOPs or bytes, when the op has a work model.
    work: Option<f64>,
    /// Bytes the op moves, when its shapes give them.
    bytes: Option<f64>,
    shape: Option<std::sync::Arc<OpShape>>,
}

impl ClassSamples {
    /// A rank's samples by (class, dtype), each class's in the rank's order.
    fn group(samples: Vec<WorkSample>) -> Vec<ClassSamples> {
        let mut by: BTreeMap<(KernelClass, Option<Dtype>), ClassSamples> = BTreeMap::new();
        // A size's index, by its work and bytes bits and its shape (shared within a rank).
        type SizeKey = (KernelClass, Option<Dtype>, Option<u64>, Option<u64>, usize);
        let mut index: rustc_hash::FxHashMap<SizeKey, u32> = rustc_hash::FxHashMap::default();
        for s in samples {
            let c = by.entry((s.class, s.dtype)).or_insert_with(|| ClassSamples {
                class: s.class,
                dtype: s.dtype,
                count: 0,
                total_us: 0.0,
                sizes: Vec::new(),
                size_of: Vec::new(),
                dur_us: Vec::new(),
            });
            c.count += 1;
            c.total_us += s.dur_us;
            if s.work.is_none() && s.shape.is_none() {
                continue;
            }
            let size = SampleSize { work: s.work, bytes: s.bytes, shape: s.shape };
            let shape_at = size.shape.as_ref().map_or(0, |a| std::sync::Arc::as_ptr(a) as usize);
            let key = (s.class, s.dtype, size.work.map(f64::to_bits), size.bytes.map(f64::to_bits), shape_at);
            let i = *index.entry(key).or_insert_with(|| {
                c.sizes.push(size);
                u32::try_from(c.sizes.len() - 1).unwrap_or(u32::MAX)
            });
            c.size_of.push(i);
            c.dur_us.push(s.dur_us);
        }
        by.into_values()
            .map(|mut c| {
                c.sizes.shrink_to_fit();
                c.size_of.shrink_to_fit();
                c.dur_us.shrink_to_fit();
                c
            })
            .collect()
    }

    /// The samples with a work or a shape, in the rank's order: their size and time (µs).
    fn sized(&self) -> impl Iterator<Item = (&SampleSize, f64)> + Clone + '_ {
        self.size_of.iter().zip(&self.dur_us).filter_map(|(&i, &t)| Some((self.sizes.get(i as usize)?, t)))
    }
}

/// One rank's calibration samples from its context and its kernel work
/// ([`work::kernel_work_of`] of the same context).
pub fn rank_samples<'c>(ctx: &RankContext<'_>, kernel_work: &[Option<work::KernelWork>], catalog: &'c Catalog) -> RankSamples<'c> {
    let t = ctx.trace();
    let mut warnings = t.warnings.clone();
    // A trace of no GPU kernel (CPU ops only) fits nothing: said by file, since among good
    // traces it had been counted as one fitted on, and alone it had been named only by its GPU.
    use tracecast_ingest::analysis::ActivityClass;
    if !ctx.classes().iter().any(|c| matches!(c, Some(ActivityClass::Compute | ActivityClass::Comm))) {
        warnings.push(format!("{}: no GPU kernel in the trace: nothing of it is fitted", t.path.display()));
    }
    RankSamples {
        rank: ctx.rank(),
        name: t.device_name().unwrap_or("").to_string(),
        gpu: t.devices.iter().find_map(|d| catalog.match_device(d)),
        path: t.path.display().to_string(),
        classes: ClassSamples::group(work::samples_of(t, kernel_work)),
        durations: KernelDurations::of(t, ctx.classes()),
        warnings,
    }
}

/// [`calibrate`] over borrowed jobs.
pub fn calibrate_jobs<'j>(jobs: impl IntoIterator<Item = &'j Job>, catalog: &Catalog, opts: &CalibrateOptions) -> Vec<Profile> {
    let (mut samples, mut collectives) = (Vec::new(), Vec::new());
    for job in jobs {
        let (s, c): (Vec<_>, Vec<_>) = job
            .ranks
            .iter()
            .map(|r| {
                let ctx = RankContext::new(r, &opts.classifier);
                (rank_samples(&ctx, &work::kernel_work_of(&ctx), catalog), ctx.into_collectives())
            })
            .unzip();
        samples.push(s);
        collectives.push(JobCollectives::new(c, tracecast_ingest::job::unread_ranks(&job.failures)));
    }
    calibrate_summaries(samples.into_iter().zip(&collectives).collect(), catalog, opts)
}

/// [`calibrate`] from ranks summarized apart: per job, its ranks' samples and
/// its collectives matched across those ranks.
pub fn calibrate_summaries(jobs: Vec<(Vec<RankSamples<'_>>, &JobCollectives)>, catalog: &Catalog, opts: &CalibrateOptions) -> Vec<Profile> {
    // Group ranks by device.
    struct Group<'a> {
        name: String,
        gpu: Option<(&'a Gpu, MatchKind)>,
        traces: Vec<String>,
        // Per rank, as made (not copied into one list).
        samples: Vec<Vec<ClassSamples>>,
        links: LinkSamples,
        world: u32,
        durations: Vec<KernelDurations>,
        warnings: Vec<(u32, Vec<String>)>,
    }
    let mut groups: Vec<Group<'_>> = Vec::new();
    // Jobs by their files, ranks by number: the fits sum in one order whatever order the traces
    // were given in (`--each A B C` and `--each C A B` had differed in the last digits).
    let mut jobs = jobs;
    for (ranks, _) in &mut jobs {
        ranks.sort_by(|a, b| a.rank.cmp(&b.rank).then_with(|| a.path.cmp(&b.path)));
    }
    jobs.sort_by(|a, b| a.0.first().map(|r| &r.path).cmp(&b.0.first().map(|r| &r.path)));
    for (ranks, collectives) in jobs {
        let world = collectives.world();
        for r in ranks {
            let key = r.gpu.map(|(g, _)| g.id.clone()).unwrap_or_else(|| r.name.clone());
            let idx = match groups.iter().position(|g| g.gpu.map(|(x, _)| x.id.clone()).unwrap_or_else(|| g.name.clone()) == key) {
                Some(i) => i,
                None => {
                    groups.push(Group {
                        name: r.name.clone(),
                        gpu: r.gpu,
                        traces: Vec::new(),
                        samples: Vec::new(),
                        links: LinkSamples::default(),
                        world: 1,
                        durations: Vec::new(),
                        warnings: Vec::new(),
                    });
                    groups.len() - 1
                }
            };
            let g = &mut groups[idx];
            g.traces.push(r.path);
            g.samples.push(r.classes);
            g.links.add(collectives.rank_samples(r.rank));
            g.world = g.world.max(world);
            g.durations.push(r.durations);
            if !r.warnings.is_empty() {
                g.warnings.push((r.rank, r.warnings));
            }
        }
    }

    groups
        .into_iter()
        .map(|g| {
            let gpu = g.gpu.map(|(x, _)| x);
            let node = gpu.and_then(|x| catalog.node_of(&x.id));
            let gpus_per_node = catalog.gpus_per_node(gpu.map(|x| x.id.as_str()), opts.gpus_per_node);
            // What reading the traces warned of, once for all the ranks it was said of (calibrate had
            // dropped it: `--device h200` on H100 traces wrote an H100 profile without a word).
            let mut notes = tracecast_ingest::analysis::notes_in_words(g.warnings.iter().map(|(r, w)| (*r, w.as_slice())));
            // A device the traces do not name is said so, not quoted as `""`.
            let named = if g.name.is_empty() { "the unnamed device".to_string() } else { format!("device {:?}", g.name) };
            if gpu.is_none() {
                notes.push(format!(
                    "{named} is not in the hardware catalog: efficiencies need its peaks (name a catalog GPU with --device ID, or add one with --hw FILE)"
                ));
            }
            if let Some((x, MatchKind::ComputeUnits)) = g.gpu {
                notes.push(format!("{named} matched to {} by compute units and gfx version", x.id));
            }
            let mut peak_tflops = BTreeMap::new();
            if let Some(x) = gpu {
                for d in Dtype::ALL {
                    if let Some(p) = x.peak_flops(d) {
                        peak_tflops.insert(d.as_str().to_string(), p / 1e12);
                    }
                }
            }
            let nic_per_gpu = node.map(Node::nic_gbps_per_gpu);
            let device = DeviceInfo {
                name: g.name.clone(),
                catalog_id: gpu.map(|x| x.id.clone()),
                matched_by: g.gpu.map(|(_, m)| m),
                peak_tflops,
                hbm_gbps: gpu.map(|x| x.hbm_gbps),
                link_gbps: gpu.map(|x| x.link_gbps),
                nic_gbps_per_gpu: nic_per_gpu,
                gpus_per_node,
            };

            // The kernel fits, the link fits and the table corrections are
            // independent: worked out side by side, their notes kept in this order.
            let ((kernels, mut unfitted, kernel_notes), ((links, link_unfitted, link_notes), table_corrections)) = rayon::join(
                || {
                    let (mut unfitted, mut notes) = (Vec::new(), Vec::new());
                    (kernel_fits(&g.samples, gpu, opts, &mut unfitted, &mut notes), unfitted, notes)
                },
                || {
                    rayon::join(
                        || {
                            let (mut unfitted, mut notes) = (Vec::new(), Vec::new());
                            let links = link_fits(&g.links, g.world, gpus_per_node, gpu, nic_per_gpu, opts, &mut unfitted, &mut notes);
                            (links, unfitted, notes)
                        },
                        || gpu.map(|x| table_corrections(&g.samples, x, catalog)).unwrap_or_default(),
                    )
                },
            );
            unfitted.extend(link_unfitted);
            notes.extend(kernel_notes);
            notes.extend(link_notes);
            let kernel_floor_us = kernel_floor_us(g.durations);
            Profile { device, traces: g.traces, kernels, links, unfitted, kernel_floor_us, notes, table_corrections }
        })
        .collect()
}

/// Ops whose shape the tables price, per (class, dtype), for a correction.
pub const TABLE_CORRECTION_MIN_SAMPLES: usize = 4;

/// Largest |ln| of a correction's median and interquartile spread (a factor 4):
/// beyond it the traces measured something other than GEMM throughput.
pub const TABLE_CORRECTION_MAX_LN: f64 = std::f64::consts::LN_2 * 2.0;

/// The [`TableCorrection`]s of a device's samples: GEMMs with shapes, priced
/// by the pricing layer on `gpu` (its measured table, else its spec model).
fn table_corrections(samples: &[Vec<ClassSamples>], gpu: &Gpu, catalog: &Catalog) -> Vec<TableCorrection> {
    use crate::pricing::{GemmShape, Pricing};
    let pricing = Pricing::new(catalog.clone(), crate::measured::Measurements::shared());
    let mut by: BTreeMap<Option<Dtype>, DtypeRatios> = BTreeMap::new();
    // One price per distinct shape: the samples of a job repeat a few dozen shapes.
    type ShapeBits = (u64, u64, u64, u64, Dtype);
    let mut price_of: rustc_hash::FxHashMap<ShapeBits, Option<(f64, crate::pricing::PriceRule)>> = rustc_hash::FxHashMap::default();
    let shaped = samples.iter().flatten().flat_map(|c| c.sized().map(move |(s, t)| (c.dtype, s, t)));
    for (dtype, s, dur_us) in shaped.filter(|(_, _, t)| *t > 0.0) {
        let Some(shape) = GemmShape::of_op(s.shape.as_deref().copied(), dtype) else { continue };
        let bits = (shape.batch.to_bits(), shape.m.to_bits(), shape.n.to_bits(), shape.k.to_bits(), shape.dtype);
        let price = *price_of.entry(bits).or_insert_with(|| pricing.gemm(gpu, &shape).map(|p| (p.time_us, p.rule)));
        let Some((time_us, rule)) = price else { continue };
        let e = by.entry(dtype).or_insert_with(|| DtypeRatios { rule: rule.as_str().to_string(), ..DtypeRatios::default() });
        let group = if shape.misaligned() { &mut e.misaligned } else { &mut e.aligned };
        group.ln_ratios.push((dur_us / time_us).ln());
        group.max_flops = group.max_flops.max(shape.flops());
    }
    by.into_iter()
        .filter_map(|(dtype, DtypeRatios { aligned, misaligned, rule })| {
            // The misaligned GEMMs get a ratio of their own where both groups make one; else
            // one ratio over all of them, as before the split.
            let (rest, max_flops, misaligned) = match (aligned.correction(), misaligned.correction()) {
                (Some(a), Some(m)) => (a, aligned.max_flops, Some(m)),
                _ => {
                    let all = LnRatios {
                        ln_ratios: [aligned.ln_ratios, misaligned.ln_ratios].concat(),
                        max_flops: aligned.max_flops.max(misaligned.max_flops),
                    };
                    (all.correction()?, all.max_flops, None)
                }
            };
            Some(TableCorrection {
                class: KernelClass::Gemm,
                dtype,
                ratio: rest.ratio,
                ln_spread: rest.ln_spread,
                samples: rest.samples,
                rule,
                max_flops: Some(max_flops),
                misaligned,
            })
        })
        .collect()
}

/// One dtype's traced GEMMs measured against the tables, aligned and misaligned apart.
#[derive(Default)]
struct DtypeRatios {
    aligned: LnRatios,
    misaligned: LnRatios,
    /// The rule that priced them.
    rule: String,
}

/// ln(measured ÷ priced time) of a group of traced GEMMs, and the largest one's FLOPs.
#[derive(Default)]
struct LnRatios {
    ln_ratios: Vec<f64>,
    max_flops: f64,
}

impl LnRatios {
    /// The group's median ratio, when a correction may be made of it.
    fn correction(&self) -> Option<TracedRatio> {
        if self.ln_ratios.len() < TABLE_CORRECTION_MIN_SAMPLES {
            return None;
        }
        let mut v = self.ln_ratios.clone();
        v.sort_by(f64::total_cmp);
        let q = |f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
        let (median, spread) = (q(0.5), q(0.75) - q(0.25));
        // Traces whose ops run at a small fraction of the tables' speed with a
        // wide spread measured something else (launch-bound micro-benchmarks,
        // mis-counted ops): no correction rather than a wrong one.
        (median.abs() <= TABLE_CORRECTION_MAX_LN && spread <= TABLE_CORRECTION_MAX_LN).then(|| TracedRatio {
            ratio: median.exp(),
            ln_spread: spread,
            samples: v.len(),
        })
    }
}

/// Kernel fits per (class, dtype); what cannot be fitted goes to `unfitted`.
fn kernel_fits(
    samples: &[Vec<ClassSamples>],
    gpu: Option<&Gpu>,
    opts: &CalibrateOptions,
    unfitted: &mut Vec<Unfitted>,
    notes: &mut Vec<String>,
) -> Vec<KernelFit> {
    // Per (class, dtype), every rank's samples of it, in rank order.
    let mut by_class: BTreeMap<(KernelClass, Option<Dtype>), Vec<&ClassSamples>> = BTreeMap::new();
    for c in samples.iter().flatten() {
        by_class.entry((c.class, c.dtype)).or_default().push(c);
    }
    let mut kernels = Vec::new();
    for ((class, dtype), samples) in by_class {
        let what = format!("{}/{}", class.as_str(), dtype.map_or("unknown", Dtype::as_str));
        let count: usize = samples.iter().map(|c| c.count).sum();
        let total_us: f64 = samples.iter().map(|c| c.total_us).sum();
        let with_work = samples.iter().flat_map(|c| c.sized()).filter(|(s, _)| s.work.is_some()).count();
        let reason = if with_work == 0 {
            Some("no shapes: the ops of these kernels have no recorded Input Dims or no work model".to_string())
        } else {
            None
        };
        let fitted = match (reason, peak_for(gpu, class, dtype)) {
            (Some(r), _) => Err(r),
            (None, None) => Err(if gpu.is_none() { "device peak unknown".into() } else { "the catalog has no peak for this dtype".into() }),
            // Memory-bound ops measure HBM only above twice the last-level cache: a GPU whose
            // cache no source states has no such bound (B300's had fitted η 0.013 of HBM from
            // ops of at most 0.5 MB, and handed it to MAD-Max as the GPU's memory efficiency).
            (None, Some(_)) if !class.counts_flops() && gpu.is_some_and(|g| g.cache_mb.is_none()) => Err(format!(
                "the catalog states no last-level cache of {} (cache_mb): whether these ops reached HBM or ran from cache is unknown",
                gpu.map_or("", |g| g.id.as_str())
            )),
            (None, Some(peak)) => {
                let min_work = if class.counts_flops() { 0.0 } else { gpu.map_or(0.0, |x| 2.0 * x.cache_mb.unwrap_or(0.0) * 1e6) };
                let fit = kernel_fit(class, dtype, &samples, peak, min_work, opts.min_samples);
                // FP32 GEMMs faster than the FP32 peak ran on TF32 tensor cores.
                match (fit, gpu.and_then(|x| x.peak_flops(Dtype::Tf32))) {
                    (Ok(f), Some(tf32)) if ran_on_tf32(dtype, class.counts_flops(), f.achieved_max) => {
                        notes.push(format!(
                            "{what}: faster than the FP32 peak, so fitted against the TF32 peak (TF32 tensor cores were allowed)"
                        ));
                        kernel_fit(class, dtype, &samples, (tf32, "tf32".into()), min_work, opts.min_samples)
                    }
                    (f, _) => f,
                }
            }
        };
        // A fit is reported only when it is physically possible: above the
        // peak, the sizes span too narrow a range to separate overhead from
        // throughput, or the op's work is not what its shapes say.
        let fitted = fitted.and_then(|f| {
            if f.efficiency > 1.0 {
                Err(format!(
                    "the fit gives η = {:.2}, more than the peak: the sizes span too narrow a range to separate overhead from throughput, or the work model does not hold",
                    f.efficiency
                ))
            } else if f.achieved_max > 1.0 {
                Err(format!(
                    "the fit gives η = {:.2}, but the fastest op ran at {:.1} % of the peak, faster than the GPU can: its work is not what its shapes say, or its time is not the whole op's",
                    f.efficiency,
                    100.0 * f.achieved_max
                ))
            } else {
                Ok(f)
            }
        });
        let fitted = fitted.and_then(|f| {
            supported(f, &samples, gpu.map(Gpu::hbm_bytes_per_s), opts.min_samples).map_err(|reason| {
                notes.push(format!("{what} not fitted: {reason}"));
                reason
            })
        });
        match fitted {
            Ok(f) => kernels.push(f),
            Err(reason) => unfitted.push(Unfitted { what, samples: count, total_us, reason }),
        }
    }

    kernels
}

/// Least R² of a published kernel fit (see `supported`).
pub const MIN_FIT_R2: f64 = 0.3;

/// Whether the samples of a kernel fit support it. A fit already has at
/// least `min` points, a work span of [`MIN_WORK_SPAN`], t0 ≥ 0, a slope
/// significantly above 0 and η ≤ 1; it is published only if also:
///
/// 1. **R² ≥ [`MIN_FIT_R2`]**: the line explains at least that share of the
///    (relative, as weighted) variance of the times. Below it the work does
///    not predict these ops' times, whatever η the slope gives.
/// 2. **Throughput-bound samples**: at least `min` samples whose work term
///    W/(ηP) is at least t0, so that the fitted line says their time is mostly
///    work. η is the slope of time in work: where nearly every op sits at
///    t ≈ t0 (latency-bound ops, such as an H100 BERT-small's GEMMs, 1 of 26
///    throughput-bound, η 0.14) the slope rests on the spread around t0.
/// 3. **Compute-bound samples** (FLOP classes): at least `min` samples above
///    the roofline's ridge, FLOPs / P ≥ bytes / HBM bandwidth. Below it an
///    op's time is set by its memory traffic and η fitted on FLOPs is a
///    bandwidth in disguise (the B300 MoE micro-benchmarks' batched GEMVs, one
///    FLOP per byte, gave η 0.003).
///
/// A refused class goes to the profile's `unfitted` with the reason and to its
/// notes (`gemm/bf16 not fitted: R² 0.19 < 0.3 …`); it is not among `kernels`,
/// so nothing prices with it.
fn supported(f: KernelFit, samples: &[&ClassSamples], hbm_bytes_per_s: Option<f64>, min: usize) -> Result<KernelFit, String> {
    if f.r2 < MIN_FIT_R2 {
        return Err(format!("R² {:.2} < {MIN_FIT_R2}: the work explains too little of how the time of these ops varies", f.r2));
    }
    let throughput_bound = f.points.iter().filter(|(w, _)| f.time_us(*w) - f.overhead_us >= f.overhead_us).count();
    if throughput_bound < min {
        return Err(format!(
            "{throughput_bound} of {} samples are throughput-bound (work term W/(ηP) ≥ t0 = {:.1} µs; a fit needs {min}): the ops are latency-bound, so η = {:.3} rests on their spread around t0",
            f.points.len(),
            f.overhead_us,
            f.efficiency
        ));
    }
    if f.unit == "flop"
        && let Some(hbm) = hbm_bytes_per_s.filter(|b| *b > 0.0)
    {
        let peak = f.peak_per_s();
        let sized = samples
            .iter()
            .flat_map(|c| c.sized())
            .filter(|(_, t)| *t > 0.0)
            .filter_map(|(s, _)| Some((s.work?, s.bytes?)))
            .filter(|(w, b)| *w >= f.work_range[0] && *w > 0.0 && *b > 0.0);
        let (sized, compute_bound) = sized.fold((0, 0), |(n, c), (w, b)| (n + 1, c + usize::from(w / peak >= b / hbm)));
        if compute_bound < min {
            return Err(format!(
                "{compute_bound} of {sized} samples are compute-bound (above the roofline's ridge of {:.0} FLOP/byte; a fit needs {min}): the ops are memory-bound, so η = {:.4} would measure HBM traffic, not {} throughput",
                peak / hbm,
                f.efficiency,
                f.peak_of
            ));
        }
    }
    Ok(f)
}

/// A device's collective kernels as the link fits read them, in rank order: a
/// job has millions, so not as [`CollectiveSample`]s (their strings, and the
/// fields the fits do not read).
#[derive(Debug, Default)]
struct LinkSamples {
    samples: Vec<LinkSample>,
}

/// One collective kernel of a rank (see [`CollectiveSample`] for the fields).
#[derive(Debug)]
struct LinkSample {
    rank: u32,
    collective: Collective,
    group_size_inferred: bool,
    group_size: Option<i64>,
    pg_ranks: Option<std::sync::Arc<str>>,
    algo: Option<std::sync::Arc<str>>,
    proto: Option<std::sync::Arc<str>>,
    bytes: Option<u64>,
    dur_us: f64,
    transfer_us: Option<f64>,
}

impl LinkSamples {
    /// Adds one rank's collective samples.
    fn add(&mut self, rank: Vec<CollectiveSample>) {
        self.samples.extend(rank.into_iter().map(|s| LinkSample {
            rank: s.rank,
            collective: s.collective,
            group_size_inferred: s.group_size_inferred,
            group_size: s.group_size,
            pg_ranks: s.pg_ranks,
            algo: s.algo,
            proto: s.proto,
            bytes: s.bytes,
            dur_us: s.dur_us,
            transfer_us: s.transfer_us,
        }));
    }
}

/// Where a collective's group lives: one node, several, or unknown.
fn domain_of(s: &LinkSample, world: u32, gpus_per_node: u32) -> &'static str {
    match s.pg_ranks.as_deref().map(tracecast_ingest::collective::parse_ranks).filter(|r| !r.is_empty()) {
        Some(r) => {
            let nodes: std::collections::BTreeSet<i64> = r.iter().map(|x| x / gpus_per_node as i64).collect();
            if nodes.len() == 1 { "intra" } else { "inter" }
        }
        None if world <= gpus_per_node => "intra",
        None => match s.group_size {
            Some(n) if n > gpus_per_node as i64 => "inter",
            _ => "unknown",
        },
    }
}

/// Link fits per (collective, group size, domain, algo, proto); what cannot
/// be fitted goes to `unfitted`.
#[allow(clippy::too_many_arguments)]
fn link_fits(
    samples: &LinkSamples,
    world: u32,
    gpus_per_node: u32,
    gpu: Option<&Gpu>,
    nic_per_gpu: Option<f64>,
    opts: &CalibrateOptions,
    unfitted: &mut Vec<Unfitted>,
    notes: &mut Vec<String>,
) -> Vec<LinkFit> {
    type LinkKey = (Collective, Option<i64>, &'static str, Option<std::sync::Arc<str>>, Option<std::sync::Arc<str>>);
    let mut by_link: BTreeMap<LinkKey, Vec<&LinkSample>> = BTreeMap::new();
    let mut domains: std::collections::HashMap<(Option<std::sync::Arc<str>>, Option<i64>), &'static str> = std::collections::HashMap::new();
    for s in &samples.samples {
        // Parsed once per group: a world group's rank list repeats on every kernel.
        let group = (s.pg_ranks.clone(), s.group_size);
        let domain = *domains.entry(group).or_insert_with(|| domain_of(s, world, gpus_per_node));
        by_link.entry((s.collective, s.group_size, domain, s.algo.clone(), s.proto.clone())).or_default().push(s);
    }
    let mut links = Vec::new();
    for ((collective, group_size, domain, algo, proto), samples) in by_link {
        let what = format!("{}/{}/{domain}", collective.as_str(), group_size.map_or("?".into(), |n| n.to_string()));
        if samples.iter().any(|s| s.group_size_inferred) {
            notes.push(format!("{what}: group size taken from the job (the kernels carry no Group size args)"));
        }
        let total_us: f64 = samples.iter().map(|s| s.dur_us).sum();
        let factor = collective.bus_factor_in(group_size);
        let Some(factor) = factor.filter(|f| *f > 0.0) else {
            // A group of one moves nothing between GPUs (its bus factor is 0); it had been said unknown.
            let reason = match group_size {
                Some(n) if n <= 1 => format!("a group of {n} rank moves no bytes between GPUs: no link to fit"),
                _ => "group size unknown: no bus factor".to_string(),
            };
            unfitted.push(Unfitted { what, samples: samples.len(), total_us, reason });
            continue;
        };
        // One point per matched instance: its transfer time; without
        // other ranks, the lower envelope of the rank's durations.
        let matched: Vec<(f64, f64)> =
            samples.iter().filter_map(|s| Some((s.bytes? as f64 * factor, s.transfer_us?))).filter(|(x, t)| *x > 0.0 && *t > 0.0).collect();
        let (points, fitted_on) = if matched.len() >= opts.min_samples {
            // A matched instance appears once per rank with the same
            // transfer time: keep the points of one rank.
            let first = samples.iter().filter(|s| s.transfer_us.is_some()).map(|s| s.rank).min();
            let one_rank: Vec<(f64, f64)> = samples
                .iter()
                .filter(|s| Some(s.rank) == first)
                .filter_map(|s| Some((s.bytes? as f64 * factor, s.transfer_us?)))
                .filter(|(x, t)| *x > 0.0 && *t > 0.0)
                .collect();
            (one_rank, "transfer")
        } else {
            let raw: Vec<(f64, f64)> =
                samples.iter().filter_map(|s| Some((s.bytes? as f64 * factor, s.dur_us))).filter(|(x, t)| *x > 0.0 && *t > 0.0).collect();
            let (x, y) = lower_envelope(&raw.iter().map(|p| p.0).collect::<Vec<_>>(), &raw.iter().map(|p| p.1).collect::<Vec<_>>());
            (x.into_iter().zip(y).collect(), "lower_envelope")
        };
        // Sizes, not points: repeats of one size say nothing of how time grows with it.
        let mut sizes: Vec<f64> = points.iter().map(|p| p.0).collect();
        sizes.sort_by(f64::total_cmp);
        sizes.dedup();
        if sizes.len() < 3 {
            let sized = samples.iter().filter(|s| s.bytes.is_some()).count();
            let reason = if sized == 0 {
                "no message sizes: the trace has no collective arguments or shapes".to_string()
            } else {
                format!("{} distinct message sizes (need 3 to separate latency from bandwidth)", sizes.len())
            };
            unfitted.push(Unfitted { what, samples: samples.len(), total_us, reason });
            continue;
        }
        let Some(f) = relative_line_nonneg(&points).filter(|f| f.slope_ci95[0] > 0.0) else {
            unfitted.push(Unfitted {
                what,
                samples: samples.len(),
                total_us,
                reason: "time does not grow significantly with message size (95 % interval of 1/B includes 0)".into(),
            });
            continue;
        };
        let bw = |slope: f64| if slope > 0.0 { 1.0 / slope / 1e3 } else { f64::INFINITY };
        let busbw = bw(f.slope);
        let nominal = match domain {
            "intra" => gpu.map(|x| x.link_gbps),
            "inter" => nic_per_gpu,
            _ => None,
        };
        if let Some(n) = nominal.filter(|n| busbw > *n) {
            unfitted.push(Unfitted {
                what,
                samples: samples.len(),
                total_us,
                reason: if domain == "inter" {
                    format!(
                        "the fit gives {busbw:.0} GB/s, above the {n:.0} GB/s of the NICs per GPU: the group may lie inside one node (--gpus-per-node says how many GPUs a node has), or the sizes do not separate latency from bandwidth"
                    )
                } else {
                    format!("the fit gives {busbw:.0} GB/s, above the nominal {n:.0} GB/s: the sizes do not separate latency from bandwidth")
                },
            });
            continue;
        }
        if f.intercept == 0.0 {
            notes.push(format!(
                "{what}: latency constrained to 0 (the free fit was negative: the sizes do not reach small enough messages)"
            ));
        }
        links.push(LinkFit {
            collective,
            group_size,
            domain: domain.to_string(),
            algo: algo.as_deref().map(str::to_string),
            proto: proto.as_deref().map(str::to_string),
            alpha_us: f.intercept,
            alpha_ci95: f.intercept_ci95,
            busbw_gbps: busbw,
            busbw_ci95: [bw(f.slope_ci95[1]), bw(f.slope_ci95[0])],
            efficiency: nominal.map(|n| busbw / n),
            nominal_gbps: nominal,
            r2: f.r2,
            samples: points.len(),
            fitted_on: fitted_on.to_string(),
            bus_bytes_range: Some([sizes[0], sizes[sizes.len() - 1]]),
            points,
        });
    }
    links
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misaligned_gemms_are_corrected_apart_only_where_both_groups_make_a_correction() {
        // GEMMs timed at a known multiple of the H100 table's price: aligned ones at 1×, misaligned
        // ones (n = 3137) at 2×.
        let catalog = Catalog::builtin();
        let gpu = catalog.gpu("h100-sxm").unwrap();
        let pricing = crate::pricing::Pricing::builtin();
        let sample = |m: f64, n: f64, times: f64| {
            let shape = crate::pricing::GemmShape { batch: 1.0, m, n, k: 1024.0, dtype: Dtype::Bf16 };
            WorkSample {
                class: KernelClass::Gemm,
                dtype: Some(Dtype::Bf16),
                work: Some(shape.flops()),
                bytes: Some(shape.bytes()),
                dur_us: times * pricing.gemm(gpu, &shape).unwrap().time_us,
                kernels: 1,
                shape: Some(std::sync::Arc::new(OpShape::Gemm { batch: 1.0, m, n, k: 1024.0 })),
            }
        };
        let corrections = |samples: Vec<WorkSample>| table_corrections(&[ClassSamples::group(samples)], gpu, &catalog);
        let aligned = [512.0, 1024.0, 2048.0, 4096.0].map(|m| sample(m, 1024.0, 1.0));
        let misaligned = [512.0, 1024.0, 2048.0, 4096.0, 8192.0].map(|m| sample(m, 3137.0, 2.0));
        let both = corrections(aligned.iter().chain(&misaligned).cloned().collect());
        let m = both[0].misaligned.as_ref().expect("both groups make a correction");
        assert!((m.ratio - 2.0).abs() < 1e-9 && m.samples == 5, "{m:?}");
        assert!((both[0].ratio - 1.0).abs() < 1e-9 && both[0].samples == 4, "{:?}", both[0]);
        // The size range is the aligned GEMMs' (4096 × 1024 × 1024), not the misaligned 8192-row one's.
        assert_eq!(both[0].max_flops, Some(2.0 * 4096.0 * 1024.0 * 1024.0));
        // Too few aligned GEMMs for a ratio of their own: one ratio over all, none apart.
        let few = corrections(aligned[..2].iter().chain(&misaligned).cloned().collect());
        assert!(few[0].misaligned.is_none() && few[0].samples == 7, "{:?}", few[0]);
        assert!((few[0].ratio - 2.0).abs() < 1e-9, "{:?}", few[0]);
    }

    #[test]
    fn a_correction_fitted_to_runs_keeps_the_traces_misaligned_ratio() {
        // `validate --fit` replaces the GEMM correction by one fitted to runs; the misaligned GEMMs'
        // ratio measures the library's fallback kernels, which the runs do not, and stays.
        let catalog = Catalog::builtin();
        let mut profile = Profile::of_catalog_gpu(catalog.gpu("h100-sxm").unwrap(), &catalog);
        let misaligned = TracedRatio { ratio: 2.3, ln_spread: 0.08, samples: 265 };
        profile.table_corrections.push(TableCorrection {
            class: KernelClass::Gemm,
            dtype: Some(Dtype::Bf16),
            ratio: 0.97,
            ln_spread: 0.3,
            samples: 1472,
            rule: "gemm_table".into(),
            max_flops: Some(1.18e11),
            misaligned: Some(misaligned.clone()),
        });
        profile.set_gemm_correction(Dtype::Bf16, 1.25, 4, "fitted to 4 runs");
        let c = profile.table_correction(KernelClass::Gemm, Some(Dtype::Bf16)).unwrap();
        assert_eq!((c.ratio, c.samples, c.max_flops), (1.25, 4, None));
        assert_eq!(c.misaligned.as_ref(), Some(&misaligned));
        assert_eq!(profile.table_corrections.len(), 1);
    }

    /// GEMM samples on an H100 (bf16 peak 989 TFLOP/s, HBM 3.35 TB/s): `(FLOPs, bytes, µs)`.
    fn fit_gemms(points: &[(f64, f64, f64)]) -> (Vec<KernelFit>, Vec<Unfitted>, Vec<String>) {
        let catalog = Catalog::builtin();
        let gpu = catalog.gpu("h100-sxm").unwrap();
        let samples: Vec<WorkSample> = points
            .iter()
            .map(|&(w, b, t)| WorkSample {
                class: KernelClass::Gemm,
                dtype: Some(Dtype::Bf16),
                work: Some(w),
                bytes: Some(b),
                dur_us: t,
                kernels: 1,
                shape: None,
            })
            .collect();
        let (mut unfitted, mut notes) = (Vec::new(), Vec::new());
        let fits = kernel_fits(&[ClassSamples::group(samples)], Some(gpu), &CalibrateOptions::default(), &mut unfitted, &mut notes);
        (fits, unfitted, notes)
    }

    #[test]
    fn the_kernel_floor_is_the_tenth_percentile_of_every_ranks_durations() {
        // Two ranks, one with durations outside u32 ns (a negative one from a
        // broken trace, one of 5 s): the (n/10)-th smallest of all, in µs.
        let ranks = [
            KernelDurations { ns: vec![9000, 1000, 7000, 3000, 5000], other_ns: vec![-500, 5_000_000_000] },
            KernelDurations { ns: vec![2000, 8000, 4000, 6000, 10_000, 11_000, 12_000, 13_000, 14_000, 15_000], other_ns: Vec::new() },
        ];
        let mut all: Vec<f64> = ranks
            .iter()
            .flat_map(|r| r.ns.iter().map(|&n| i64::from(n)).chain(r.other_ns.iter().copied()))
            .map(|n| n as f64 / 1000.0)
            .collect();
        all.sort_by(f64::total_cmp);
        assert_eq!(all.len(), 17);
        // Index 1 of [-0.5, 1, 2, …]: 1 µs.
        assert_eq!(kernel_floor_us(ranks.to_vec()), Some(all[17 / 10]));
        assert_eq!(kernel_floor_us(ranks.to_vec()), Some(1.0));
        let only_other = [KernelDurations { ns: Vec::new(), other_ns: vec![6_000_000_000, -1000] }];
        assert_eq!(kernel_floor_us(only_other.to_vec()), Some(-1.0));
        assert_eq!(kernel_floor_us(vec![KernelDurations::default()]), None);
    }

    /// ±`amp` deterministic relative noise on point `i`.
    fn noise(i: usize, amp: f64) -> f64 {
        1.0 + amp * ((i * 7 % 11) as f64 - 5.0) / 5.0
    }

    #[test]
    fn a_fit_is_published_only_where_the_samples_support_it() {
        let peak = 989.4e12 / 1e6; // FLOP per µs
        // Compute-bound GEMMs (intensity 1000 FLOP/byte) from 1 to 1000 GFLOP at η 0.6, t0 5 µs: fitted.
        let good: Vec<(f64, f64, f64)> = (0..40)
            .map(|i| {
                let w = 1e9 * 10f64.powf(i as f64 / 13.0);
                (w, w / 1000.0, (5.0 + w / (0.6 * peak)) * noise(i, 0.03))
            })
            .collect();
        let (fits, _, notes) = fit_gemms(&good);
        assert_eq!(fits.len(), 1, "{notes:?}");
        assert!((fits[0].efficiency - 0.6).abs() < 0.05, "{}", fits[0].efficiency);

        // Latency-bound: 36 small GEMMs at t ≈ t0 and 4 large ones; the line
        // fits, but only 4 samples say anything about η.
        let mut latency: Vec<(f64, f64, f64)> =
            (0..36).map(|i| (1e6 * (1.0 + i as f64), 1e3 * (1.0 + i as f64), 5.0 * noise(i, 0.05))).collect();
        latency.extend((0..4).map(|i| {
            let w = 2e10 * (1.0 + i as f64);
            (w, w / 1000.0, (5.0 + w / (0.15 * peak)) * noise(i, 0.05))
        }));
        let (fits, unfitted, notes) = fit_gemms(&latency);
        assert!(fits.is_empty(), "{fits:?}");
        assert!(unfitted[0].reason.contains("throughput-bound"), "{:?}", unfitted[0].reason);
        assert!(notes.iter().any(|n| n.starts_with("gemm/bf16 not fitted: 4 of 40 samples are throughput-bound")), "{notes:?}");

        // Batched GEMVs: one FLOP per byte, time set by HBM at 70 % of 3.35 TB/s.
        let gemv: Vec<(f64, f64, f64)> = (0..20)
            .map(|i| {
                let w = 1e7 * 10f64.powf(i as f64 / 7.0);
                (w, w, (3.0 + w / (0.7 * 3.35e6)) * noise(i, 0.02))
            })
            .collect();
        let (fits, unfitted, notes) = fit_gemms(&gemv);
        assert!(fits.is_empty(), "{fits:?}");
        assert!(unfitted[0].reason.starts_with("0 of 20 samples are compute-bound"), "{:?}", unfitted[0].reason);
        assert!(notes.iter().any(|n| n.contains("memory-bound")), "{notes:?}");

        // Times that barely follow the work (R² below the floor, though the slope is significant).
        let scattered: Vec<(f64, f64, f64)> = (0..400)
            .map(|i| {
                let w = 1e10 * (1.0 + (i % 40) as f64 / 10.0);
                (w, w / 1000.0, (5.0 + w / (0.3 * peak)) * if (i / 40) % 2 == 0 { 1.0 } else { 6.0 } * noise(i, 0.1))
            })
            .collect();
        let (fits, unfitted, notes) = fit_gemms(&scattered);
        assert!(fits.is_empty(), "R² {:?}", fits.iter().map(|f| f.r2).collect::<Vec<_>>());
        assert!(unfitted[0].reason.starts_with("R² 0."), "{:?}", unfitted[0].reason);
        assert!(notes.iter().any(|n| n.starts_with("gemm/bf16 not fitted: R² 0.")), "{notes:?}");
    }
}
