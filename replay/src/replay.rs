//! Replaying a measured job: identity (measured durations) and what-if
//! scaling of compute, memory and link speed, with per-step measured and
//! replayed times and the §3 breakdown of the replayed timeline.

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use tracecast_calibrate::DeviceModel;
use tracecast_calibrate::cost::{AlphaBeta, CrossDevice, Rule};
use tracecast_calibrate::pricing::CollectiveQuery;
use tracecast_calibrate::work::{KernelWork, kernel_work_of};
use tracecast_ingest::Job;
use tracecast_ingest::analysis::CollectiveSample;
use tracecast_ingest::analysis::{
    self, ActivityClass, Breakdown, CollectiveStats, JobCollectives, JobStep, RankContext, RankSets, Totals, Window,
};
use tracecast_ingest::collective::Collective;

use crate::critical::CriticalPath;
use crate::graph::{ExecGraph, Placement, RankGraph, RankPiece, TaskKind, build};
use crate::sim::TaskId;
use crate::sim::{Schedule, simulate};

/// Speed-ups applied to the measured durations (1 = as measured, 2 = twice as fast).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Scale {
    /// Compute kernels.
    pub compute: f64,
    /// Memcpy / memset.
    pub memory: f64,
    /// Communication (the transfer part of collectives).
    pub link: f64,
}

/// Link α-β overrides: a collective with a known message size and group
/// takes `alpha + bus_factor(n) · bytes / busbw` (nccl-tests convention)
/// instead of its measured transfer time. Groups larger than a node use the
/// inter-node pair when given.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct LinkOverride {
    /// Latency per collective inside a node, µs.
    pub alpha_us: f64,
    /// Bus bandwidth inside a node, GB/s.
    pub busbw_gbps: f64,
    /// Latency of groups that span nodes, µs (default: `alpha_us`).
    pub inter_alpha_us: Option<f64>,
    /// Bus bandwidth of groups that span nodes, GB/s (default: `busbw_gbps`).
    pub inter_busbw_gbps: Option<f64>,
}

impl LinkOverride {
    /// Transfer time of `collective` moving `bytes` in a group of `n` ranks, µs
    /// (`None` when the bus factor of the collective is unknown).
    pub fn transfer_us(&self, collective: Collective, bytes: u64, n: i64, gpus_per_node: u32) -> Option<f64> {
        collective.bus_factor(n)?;
        let link =
            if n > i64::from(gpus_per_node) { self.inter() } else { AlphaBeta { alpha_us: self.alpha_us, busbw_gbps: self.busbw_gbps } };
        link.collective_us(collective, bytes as f64, n)
    }

    /// The link of groups that span nodes: the inter-node values, else the in-node ones.
    pub fn inter(&self) -> AlphaBeta {
        AlphaBeta { alpha_us: self.inter_alpha_us.unwrap_or(self.alpha_us), busbw_gbps: self.inter_busbw_gbps.unwrap_or(self.busbw_gbps) }
    }
}

impl Default for Scale {
    fn default() -> Self {
        Scale { compute: 1.0, memory: 1.0, link: 1.0 }
    }
}

/// Options of [`replay_job`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReplayOptions {
    /// What-if speed-ups. Default: none (identity replay).
    pub scale: Scale,
    /// Data-parallel scale-out: the job's world-size groups become this many
    /// ranks. Default: none (as measured).
    pub world_size: Option<u32>,
    /// GPUs per node for the intra/inter-node split of scaled groups.
    /// Default: 8.
    pub gpus_per_node: u32,
    /// Nominal intra-node link bandwidth per GPU, GB/s (catalog `link_gbps`). Default: 450.
    pub intra_gbps: f64,
    /// Nominal inter-node bandwidth per GPU, GB/s (NIC share). Default: 50.
    pub inter_gbps: f64,
    /// Project onto another GPU: each compute kernel gets the time this
    /// model gives its op's work (split over the op's kernels as measured);
    /// kernels without a work model or a fit for their class keep their
    /// measured time. Default: none.
    pub target: Option<DeviceModel>,
    /// Re-cost collectives with these link parameters. Default: none (measured transfers).
    pub link: Option<LinkOverride>,
    /// The device the trace was measured on, for `target` (the user's `--source-profile`).
    /// Default: none (the trace's own calibration).
    pub source: Option<DeviceModel>,
    /// The trace's own calibration, made already by the caller (`report`'s one pass over the
    /// ranks): what prices the source side where no `source` applies, as the calibration this
    /// replay would make, said as that, not as a profile the user gave. Default: none (made here).
    pub own_calibration: Option<DeviceModel>,
    /// The hardware catalog (with the user's `--hw` files). Default: none (built-in).
    pub catalog: Option<tracecast_calibrate::Catalog>,
    /// The pricing layer (measured base) that prices GEMMs by shape for `target`.
    /// Default: the shipped base over the catalog.
    pub pricing: Option<std::sync::Arc<tracecast_calibrate::pricing::Pricing>>,
    /// The analysed window of the measured trace (its `window`, `steps` and
    /// `drop_last_step`, as `analyze` takes them): the steps whose times, speed-up
    /// and breakdowns the replay reports. The simulation always runs the whole
    /// trace. Default: `analyze`'s default.
    pub window: analysis::AnalyzeOptions,
    /// Say with the replay what the analysis says of each rank (its trace's warnings, its
    /// window, no GPU activity, steps without GPU work). Default: true; a report page says
    /// them with its analysis.
    pub rank_notes: bool,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            scale: Scale::default(),
            world_size: None,
            gpus_per_node: 8,
            intra_gbps: 450.0,
            inter_gbps: 50.0,
            target: None,
            link: None,
            source: None,
            own_calibration: None,
            catalog: None,
            pricing: None,
            window: analysis::AnalyzeOptions::default(),
            rank_notes: true,
        }
    }
}

/// A measured transfer slower than this many times the measured curve's
/// price at its size waited for peers: nccl-tests curves of one GPU model on
/// different systems differ by less (8-GPU A100 all-reduce, Echo's, Azure's and
/// ml-engineering's sweeps: within 1.46× of each other from 1 KiB to 1 GiB).
pub const WAIT_FACTOR: f64 = 4.0;

/// (price at `from` GPUs, price at `to` GPUs, ns; the rule of the latter) of a
/// collective on `gpu` from the pricing layer (measured curves, else the GPU's
/// links); `None` when nothing prices it. A group below the measured counts is priced
/// by the pricing layer's rule for it (the smallest count's curve by the bus factor): a
/// 4-GPU job grown to 64 had fallen back to the nominal links' ratio, 10× slower where the
/// curves say 2.6–3×; an 8-GPU job shrunk to 4 in its node likewise.
fn priced_scaling(
    pricing: &tracecast_calibrate::pricing::Pricing,
    gpu: &tracecast_calibrate::catalog::Gpu,
    collective: Collective,
    bytes: f64,
    from: i64,
    to: u32,
    opts: &ReplayOptions,
) -> Option<(f64, f64, tracecast_calibrate::pricing::PriceRule, tracecast_calibrate::pricing::PriceRule)> {
    // A count below the measured curves' takes the smallest measured count's price by the bus
    // factor, in a node and across nodes, as `hw cost` prices it (9–15 H100s, 8 a node, had
    // fallen to the nominal links and cost 5× what 16 did).
    let price = |n: u32, per_node: u32| {
        pricing
            .collective(gpu, &CollectiveQuery::new(collective, bytes, n, per_node))
            .filter(|p| p.time_us > 0.0)
            .map(|p| (p.time_us * 1000.0, p.rule))
    };
    let from = u32::try_from(from).ok()?;
    let (old, old_rule) = price(from, opts.gpus_per_node)?;
    let (new, rule) = price(to, opts.gpus_per_node)?;
    Some((old, new, old_rule, rule))
}

/// How much longer a collective's transfer gets when its group grows from
/// `n` to `to` ranks: the nccl-tests bus factor grows, and a group that no
/// longer fits in a node moves from the intra-node link to the NICs.
pub fn scale_out_factor(collective: Collective, n: i64, to: i64, opts: &ReplayOptions) -> f64 {
    let (Some(k0), Some(k1)) = (collective.bus_factor(n), collective.bus_factor(to)) else { return 1.0 };
    let bw = |g: i64| if g <= i64::from(opts.gpus_per_node) { opts.intra_gbps } else { opts.inter_gbps };
    if k0 <= 0.0 {
        // A group of one moved no data: scale from the smallest real group.
        let k2 = collective.bus_factor(2).unwrap_or(1.0);
        return (k1 / k2) * (bw(2) / bw(to));
    }
    (k1 / k0) * (bw(n) / bw(to))
}

/// One step, measured and replayed.
#[derive(Debug, Clone, Serialize)]
pub struct StepReplay {
    /// The number after `ProfilerStep#`.
    pub step: i64,
    /// Measured GPU window of the step, µs.
    pub measured_step_us: f64,
    /// Replayed GPU window, µs.
    pub replayed_step_us: f64,
    /// (replayed − measured) / measured.
    pub error: f64,
}

/// One rank, measured and replayed.
#[derive(Debug, Clone, Serialize)]
pub struct RankReplay {
    /// The trace file.
    pub file: String,
    /// Global rank.
    pub rank: u32,
    /// The §3 breakdown of the measured trace (as `analyze` reports it).
    #[serde(flatten)]
    pub measured: Breakdown,
    /// Mean measured step time (the whole GPU window without steps), µs.
    pub measured_step_us: f64,
    /// Mean replayed step time, µs.
    pub replayed_step_us: f64,
    /// (replayed − measured) / measured of the means.
    pub error: f64,
    /// Per profiler step (none for a trace without steps, whose whole GPU window the
    /// rank's measured and replayed times are).
    pub steps: Vec<StepReplay>,
    /// The measured collectives in the measured window by type, process group
    /// and size, as `analyze` reports them (by [`replay_parts_with_collectives`];
    /// empty from [`replay_parts`]).
    pub collectives: Vec<CollectiveStats>,
    /// The §3 breakdown of the replayed timeline over the replayed steps.
    pub replayed: Breakdown,
    /// The graph's measured timings and what explained each GPU start.
    pub graph: RankGraph,
}

/// A speed-up in words, `1.234×`: three decimals, or two significant digits for a slowdown of
/// more than a hundredfold (a what-if of seconds-long latencies had read `0.000×`).
pub fn speedup_in_words(speedup: f64) -> String {
    if speedup > 0.0 && speedup < 0.01 { format!("{speedup:.1e}×") } else { format!("{speedup:.3}×") }
}

/// The replay of a job.
#[derive(Debug, Clone, Serialize)]
pub struct JobReplay {
    /// The job's directory or first file.
    pub path: String,
    /// Ranks in the run.
    pub world_size: u32,
    /// The speed-ups applied.
    pub scale: Scale,
    /// The world size the collectives were re-priced at (`--world-size`; absent: the run's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replayed_world_size: Option<u32>,
    /// The link the collectives were re-priced on (`--link`; absent: as measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkOverride>,
    /// Per rank.
    pub ranks: Vec<RankReplay>,
    /// Sums over ranks of the measured trace and the job's step time, as
    /// `analyze` reports them, with the replayed timeline's beside them.
    pub totals: ReplayTotals,
    /// Measured ÷ replayed job step time (the slowest rank's per step, as
    /// `analyze` reports it; mean over the steps): 1 for identity.
    pub speedup: f64,
    /// The job step time the speed-up is of, measured, µs (the slowest rank's
    /// per step, mean over the steps; a trace without steps: its whole window).
    pub measured_job_step_us: f64,
    /// The same, replayed, µs.
    pub replayed_job_step_us: f64,
    /// Where the time on the critical path went.
    pub critical_path: CriticalPath,
    /// Tasks and dependency edges simulated.
    pub tasks: usize,
    /// Edges simulated.
    pub edges: usize,
    /// Remarks.
    pub notes: Vec<String>,
    /// How the kernels were priced on the target GPU (with `target`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projection: Option<ProjectionReport>,
}

/// A job's totals, measured and replayed.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayTotals {
    /// The measured trace's sums over ranks, fractions and job step time (`analyze`'s `totals`).
    #[serde(flatten)]
    pub measured: Totals,
    /// The same of the replayed timeline.
    pub replayed: Totals,
}

/// [`replay_parts`] with each rank's measured collectives in its report
/// (`analyze`'s rows: by type, process group and size in the measured window,
/// with their transfer and wait where matched), taken from the matching before
/// the replay frees it: what `replay` reports. The report, whose analysis has
/// them in its own window, calls [`replay_parts`].
pub fn replay_parts_with_collectives<C: std::borrow::Borrow<JobCollectives>>(
    path: String,
    parts: Vec<RankPart<'_>>,
    matching: C,
    opts: &ReplayOptions,
    catalog: &tracecast_calibrate::Catalog,
) -> Replayed {
    let collectives = matching.borrow();
    let mut rows: Vec<(u32, Vec<CollectiveStats>)> = parts
        .iter()
        .filter_map(|p| {
            let r = collectives.ranks().binary_search(&p.rank).ok()?;
            Some((p.rank, p.window.map(|w| collectives.stats(r, w)).unwrap_or_default()))
        })
        .collect();
    let mut replayed = replay_parts(path, parts, matching, opts, catalog);
    // Both in rank order.
    rows.sort_unstable_by_key(|r| r.0);
    for (rank, (id, rows)) in replayed.report.ranks.iter_mut().zip(rows) {
        debug_assert_eq!(rank.rank, id);
        rank.collectives = rows;
    }
    replayed
}

/// What priced the kernels of a projection onto another GPU.
#[derive(Debug, Clone, Serialize)]
pub struct ProjectionReport {
    /// The GPU the trace was measured on.
    pub source_gpu: Option<String>,
    /// Where the source's efficiencies come from.
    pub source_fits: String,
    /// The target GPU.
    pub target_gpu: Option<String>,
    /// Where the target's efficiencies come from.
    pub target_fits: String,
    /// Per rule: kernels, their measured and projected time.
    pub rules: Vec<RuleShare>,
    /// Σ projected compute-kernel time with the target's efficiencies at the
    /// top and the bottom of their 95 % intervals, µs.
    pub projected_band_us: [f64; 2],
    /// Per kernel class: kernels, their measured and projected time (to set
    /// beside a measured trace of the target, class by class).
    pub classes: Vec<ClassShare>,
}

impl ProjectionReport {
    /// The projected time of the compute kernels, µs (every rule's share).
    pub fn projected_us(&self) -> f64 {
        self.rules.iter().fold(0.0, |sum, r| sum + r.projected_us)
    }

    /// `from h100-sxm (its fits) onto mi300x (its fits)`: what priced each side, as `replay`
    /// and the report say it.
    pub fn sides_in_words(&self) -> String {
        let gpu = |g: &Option<String>| g.as_deref().unwrap_or("an unknown GPU").to_string();
        format!("from {} ({}) onto {} ({})", gpu(&self.source_gpu), self.source_fits, gpu(&self.target_gpu), self.target_fits)
    }

    /// `projected kernel time 12.345 ms (95 % band of the rules' prices: 11.000–13.000 ms)`.
    pub fn kernel_time_in_words(&self) -> String {
        let [low, high] = self.projected_band_us.map(|x| x / 1000.0);
        format!("projected kernel time {:.3} ms (95 % band of the rules' prices: {low:.3}–{high:.3} ms)", self.projected_us() / 1000.0)
    }
}

/// One kernel class of a projection.
#[derive(Debug, Clone, Serialize)]
pub struct ClassShare {
    /// The class.
    pub class: tracecast_calibrate::work::KernelClass,
    /// Compute kernels of the class.
    pub kernels: usize,
    /// Their measured time, µs.
    pub measured_us: f64,
    /// Their projected time, µs.
    pub projected_us: f64,
}

/// The share of a projection one cost-model rule priced.
#[derive(Debug, Clone, Serialize)]
pub struct RuleShare {
    /// The rule.
    pub rule: Rule,
    /// In words.
    pub description: &'static str,
    /// Compute kernels it priced.
    pub kernels: usize,
    /// Their measured time, µs.
    pub measured_us: f64,
    /// Their projected time, µs.
    pub projected_us: f64,
}

/// Whether a profile of the GPU the traces ran on (`--source-profile`) applies to ranks of
/// `rank_gpus` (their catalog ids, `None` where the catalog does not know the GPU): every
/// rank's GPU known and the profile's, the one rule of `replay` and `report`; else the note
/// that says why it is not used. A rank of another GPU had been priced by it when it came
/// after one of the profile's, and a trace of no known GPU had taken the profile's.
fn source_profile_applies<'a>(source: &DeviceModel, rank_gpus: impl IntoIterator<Item = Option<&'a str>>) -> Result<(), String> {
    let of = source.gpu.as_ref().map(|g| g.id.as_str());
    let mut ran_on: Vec<&str> = Vec::new();
    let mut unknown = false;
    for g in rank_gpus {
        match g {
            Some(g) if !ran_on.contains(&g) => ran_on.push(g),
            Some(_) => {}
            None => unknown = true,
        }
    }
    if !unknown && !ran_on.is_empty() && ran_on.iter().all(|g| Some(*g) == of) {
        return Ok(());
    }
    let traces = match (ran_on.is_empty(), unknown) {
        (true, _) => "the traces record no GPU the catalog knows (name it with --device)".to_string(),
        (false, true) => format!("the traces ran on {} and a GPU the catalog does not know", ran_on.join(", ")),
        (false, false) => format!("the traces ran on {}", ran_on.join(", ")),
    };
    Err(format!(
        "the source profile is of {}, {traces}: not used, the traces' own calibration prices their kernels",
        of.unwrap_or("a GPU the catalog does not know")
    ))
}

/// Re-prices every compute kernel of `eg` on `target` through the one cost
/// model; the source device is `opts.source` where it applies to the ranks, else the trace's
/// own calibration (`opts.own_calibration`, or fitted here from the ranks' samples).
#[allow(clippy::too_many_arguments)]
fn project_kernels(
    parts: &mut [RankPart<'_>],
    place: &Placement,
    collectives: &JobCollectives,
    eg: &mut ExecGraph,
    target: &DeviceModel,
    opts: &ReplayOptions,
    catalog: &tracecast_calibrate::Catalog,
    pricing: &tracecast_calibrate::pricing::Pricing,
    notes: &mut Vec<String>,
) -> ProjectionReport {
    // A source profile that is not of the traces' GPU: said and not used (the traces' own
    // calibration prices the source side), as a target profile of another GPU is refused.
    let given = opts.source.as_ref().filter(|s| match source_profile_applies(s, parts.iter().map(|p| p.gpu_id())) {
        Ok(()) => true,
        Err(why) => {
            notes.push(why);
            false
        }
    });
    let source = match (given, &opts.own_calibration) {
        (Some(s), _) => s.clone(),
        (None, Some(own)) => own.clone(),
        (None, None) => {
            let mut copts = tracecast_calibrate::CalibrateOptions::default();
            copts.classifier = opts.window.classifier.clone();
            let samples: Vec<_> = parts.iter_mut().filter_map(|p| p.samples.take()).collect();
            let profiles = tracecast_calibrate::profile::calibrate_summaries(vec![(samples, collectives)], catalog, &copts);
            DeviceModel::from_own_calibration(profiles.into_iter().next(), catalog)
        }
    };
    for r in target.rejected_fits() {
        notes.push(format!("target profile: {r}"));
    }
    if source.gpu.is_none() {
        notes.push("the trace records no GPU the catalog knows (no device properties, or a device not in it): kernels keep their measured time and the projection is the measured run (name a catalog GPU with --device ID, or add one with --hw FILE)".into());
    }
    if target.profile.is_none() {
        notes.push(format!(
            "no profile of {} nor of a similar GPU: the source GPU's fitted efficiencies are carried to its catalog specs",
            target.gpu.as_ref().map_or("the target", |g| g.id.as_str())
        ));
    }
    // A profile of the trace's own GPU calibrated on the trace itself prices no other stack: its
    // pooled fits differ from the trace's own by their error (a BERT trace replayed with the
    // profile of it and two other traces had read +42 % GPU time).
    // Files compared as the same file (a profile names them as calibrate was given them, so one
    // given relative to another directory is not found); a GPU's default model is not the user's.
    if !target.default_for_gpu && source.gpu.is_some() && source.gpu.as_ref().map(|g| &g.id) == target.gpu.as_ref().map(|g| &g.id) {
        let file = |p: &str| tracecast_ingest::input::file_key(std::path::Path::new(p));
        let traces: std::collections::HashSet<_> = target.profile.iter().flat_map(|p| &p.traces).filter_map(|t| file(t)).collect();
        let own = parts.iter().filter(|p| file(&p.file).is_some_and(|f| traces.contains(&f))).count();
        if own > 0 {
            notes.push(format!(
                "the target profile was calibrated on {own} of this run's own trace(s) on the same GPU ({} in all): what it moves is the difference between its fits and this run's own calibration, not another software stack (without --profile every kernel keeps its measured time)",
                target.profile.as_ref().map_or(0, |p| p.traces.len())
            ));
        }
    }
    let model = CrossDevice { source: &source, target, pricing: Some(pricing) };
    if let (Some(vendor), Some(_)) = (model.one_vendor(), model.latencies()) {
        notes.push(format!(
            "latency-bound kernels keep the trace's time: a short kernel costs what {vendor}'s driver and runtime make it cost, on either GPU"
        ));
    } else if model.latencies().is_some_and(|(s, t)| s == t) && target.kernel_floor_us.is_none() {
        notes.push("the target's short-kernel time is unknown: latency-bound kernels keep the trace's".into());
    }
    let mut shares: std::collections::BTreeMap<Rule, (usize, f64, f64)> = Default::default();
    let mut classes: std::collections::BTreeMap<tracecast_calibrate::work::KernelClass, (usize, f64, f64)> = Default::default();
    let mut band = [0.0, 0.0];
    // Taken: nothing after the projection reads the parts' work, so it is freed here, before the
    // simulation, rather than copied onto this thread with the rest (`RankPart::copy_here`).
    let work = parts
        .iter_mut()
        .enumerate()
        .flat_map(|(r, p)| std::mem::take(&mut p.work).into_iter().map(move |(t, k)| (place.base[r] as usize + t as usize, k)));
    // 16-bit work of a type the target has no path for (V100: FP16, no BF16), priced as the
    // other: counted, and said once (only `hw cost`'s basis had said it).
    let mut other_path: std::collections::BTreeMap<(&'static str, &'static str), usize> = Default::default();
    // GEMMs held to the target's sustained rate, slower than its tables (or a profile's correction of them) say.
    let (mut held, mut held_us, mut held_dtypes) = (0usize, 0.0, std::collections::BTreeSet::new());
    // Kernels the user's own measurements priced: said, as `project` says its files were added.
    let (mut by_user, mut by_user_us) = (0usize, 0.0);
    for (t, k) in work {
        if let Some(d) = k.dtype
            && let Some(other) = target.gpu.as_ref().and_then(|g| g.sixteen_bit_stand_in(d))
        {
            *other_path.entry((d.as_str(), other.as_str())).or_default() += 1;
        }
        let measured_us = eg.graph.dur_ns[t] as f64 / 1000.0;
        let cost = model.kernel(&k, measured_us);
        if cost.at_a_bound {
            (held, held_us) = (held + 1, held_us + cost.us);
            held_dtypes.insert(k.dtype);
        }
        if cost.by_user {
            (by_user, by_user_us) = (by_user + 1, by_user_us + cost.us);
        }
        let e = shares.entry(cost.rule).or_default();
        e.0 += 1;
        e.1 += measured_us;
        e.2 += cost.us;
        let c = classes.entry(k.class).or_default();
        c.0 += 1;
        c.1 += measured_us;
        c.2 += cost.us;
        band[0] += cost.low_us;
        band[1] += cost.high_us;
        eg.graph.dur_ns[t] = (cost.us * 1000.0).round() as i64;
    }
    if held > 0 {
        let gpu = target.gpu.as_ref();
        // The sustained rate quoted only where the held kernels are of one number format (its rate).
        let one_dtype = match held_dtypes.iter().collect::<Vec<_>>().as_slice() {
            [Some(d)] => Some(*d),
            _ => None,
        };
        let rate = gpu.zip(one_dtype).and_then(|(g, d)| Some((pricing.sustained_gemm_rate(g, d)?, d)));
        notes.push(format!(
            "{held} GEMM kernel(s) ({:.3} ms projected) at a bound of {}: the rate it sustains under load{}, or the fastest it was measured at (`hw cost` says which): no table or profile's correction prices them faster",
            held_us / 1000.0,
            gpu.map_or("the target", |g| g.id.as_str()),
            rate.map_or(String::new(), |((r, who), d)| format!(" ({:.1} TFLOP/s in {}, {who})", r / 1e12, d.as_str()))
        ));
    }
    // Much of the kernel time without a work model: the speed-up leaves it at the source's speed
    // (a V100 trace without input shapes had projected onto an H100 at 1.000×, said only in the
    // rules table's last row).
    let kernel_us: f64 = shares.values().map(|s| s.1).sum();
    if let Some(&(kept, kept_us, _)) = shares.get(&Rule::Measured)
        && source.gpu.is_some()
        && kept_us >= KEPT_SHARE_SAID * kernel_us
    {
        notes.push(format!(
            "{kept} kernel(s), {:.3} of {:.3} ms of kernel time ({:.0} %), kept their measured time: their ops have no work model or record no input shapes (torch.profiler's record_shapes=True records them), so the projection leaves that time at the source GPU's speed",
            kept_us / 1000.0,
            kernel_us / 1000.0,
            100.0 * kept_us / kernel_us
        ));
    }
    // A given source profile prices no GEMM the target's table and correction price (the source's
    // time does not enter them): said, or the flag reads as if it had moved them.
    if given.is_some()
        && let Some(&(n, _, us)) = shares.get(&Rule::GemmTargetTable)
    {
        notes.push(format!(
            "--source-profile: {n} GEMM kernel(s) ({:.3} ms projected) priced at the target's table × its traces' correction, which the source side does not enter; it prices the other kernels",
            us / 1000.0
        ));
    }
    // Priced at a table of the target, a GEMM of one shape costs the same on every rank: a
    // straggler's slower GEMMs, and the waits on collectives they caused, do not carry (a
    // same-GPU replay with the job's own profile had exposed 1.0 ms of communication where the
    // job measured 2.3, unexplained).
    if parts.len() > 1
        && let Some(&(n, _, _)) = shares.get(&Rule::GemmTargetTable)
    {
        notes.push(format!(
            "{n} GEMM kernel(s) priced at the target's table × its traces' correction cost the same on every rank: the measured differences between ranks (stragglers) and the collective waits they caused do not carry"
        ));
    }
    if by_user > 0 {
        notes.push(format!(
            "{by_user} kernel(s) ({:.3} ms projected) priced at their shapes by your measurements ({})",
            by_user_us / 1000.0,
            pricing.measurements.user_files.join(", ")
        ));
    }
    for ((dtype, other), kernels) in other_path {
        notes.push(format!(
            "{} has no {dtype} path: {kernels} kernel(s) of {dtype} work priced as {other}, at its {other} peak",
            target.gpu.as_ref().map_or("the target", |g| g.id.as_str())
        ));
    }
    ProjectionReport {
        source_gpu: source.gpu.as_ref().map(|g| g.id.clone()),
        source_fits: source.source.clone(),
        target_gpu: target.gpu.as_ref().map(|g| g.id.clone()),
        target_fits: target.source.clone(),
        rules: shares
            .into_iter()
            .map(|(rule, (kernels, measured_us, projected_us))| RuleShare {
                rule,
                description: rule.describe(),
                kernels,
                measured_us,
                projected_us,
            })
            .collect(),
        projected_band_us: band,
        classes: classes
            .into_iter()
            .map(|(class, (kernels, measured_us, projected_us))| ClassShare { class, kernels, measured_us, projected_us })
            .collect(),
    }
}

/// The share of a trace's kernel time kept at its measured time (no work model) from which a
/// projection says so in a note: a quarter, where the speed-up leaves much of the step unmoved.
const KEPT_SHARE_SAID: f64 = 0.25;

/// A replay with its timeline, for Perfetto output.
#[derive(Debug, Clone)]
pub struct Replayed {
    /// The report.
    pub report: JobReplay,
    /// The graph that was simulated.
    pub graph: ExecGraph,
    /// Its schedule.
    pub schedule: Schedule,
    /// Events of the critical path, latest first.
    pub critical: Vec<u32>,
}

/// Replays `job` with its measured durations scaled by `opts.scale`.
pub fn replay_job(job: &Job, opts: &ReplayOptions) -> JobReplay {
    replay(job, opts).report
}

/// Replays `job` and keeps the simulated timeline.
pub fn replay(job: &Job, opts: &ReplayOptions) -> Replayed {
    let builtin;
    let catalog = match &opts.catalog {
        Some(c) => c,
        None => {
            builtin = tracecast_calibrate::Catalog::builtin();
            &builtin
        }
    };
    let (parts, collectives) = job_parts(job, opts, catalog);
    replay_parts_with_collectives(job.path.display().to_string(), parts, collectives, opts, catalog)
}

/// The replay parts of every rank of `job` for `opts` (one [`RankContext`]
/// per rank) and its collectives matched across them: what several replays
/// of one job ([`replay_parts`] of copies) share.
pub fn job_parts<'c>(job: &Job, opts: &ReplayOptions, catalog: &'c tracecast_calibrate::Catalog) -> (Vec<RankPart<'c>>, JobCollectives) {
    let (parts, ranks): (Vec<RankPart<'c>>, Vec<_>) =
        job.ranks.par_iter().map(|r| part_and_collectives(RankContext::new(r, &opts.window.classifier), opts, catalog)).unzip();
    (parts, JobCollectives::new(ranks, tracecast_ingest::job::unread_ranks(&job.failures)))
}

/// [`job_parts`] of the ranks whose steps hold the options' `--steps` range
/// ([`RankContext::check_step_range`]): a rank whose steps do not is taken out
/// of `job`, its error (naming the steps it has) among the job's failures.
pub fn checked_job_parts<'c>(
    job: &mut Job,
    opts: &ReplayOptions,
    catalog: &'c tracecast_calibrate::Catalog,
) -> (Vec<RankPart<'c>>, JobCollectives) {
    let (steps, drop_last) = (opts.window.steps, opts.window.drop_last_step);
    let built: Vec<tracecast_ingest::Result<_>> = job
        .ranks
        .par_iter()
        .map(|r| {
            let ctx = RankContext::new(r, &opts.window.classifier);
            ctx.check_step_range(steps, drop_last)?;
            Ok(part_and_collectives(ctx, opts, catalog))
        })
        .collect();
    // The ranks that hold the range stay in the job with their parts; the others leave as failures.
    let (mut parts, mut ranks) = (Vec::with_capacity(built.len()), Vec::with_capacity(built.len()));
    let mut kept = Vec::with_capacity(built.len());
    for (rank, b) in std::mem::take(&mut job.ranks).into_iter().zip(built) {
        match b {
            Ok((part, collectives)) => {
                parts.push(part);
                ranks.push(collectives);
                kept.push(rank);
            }
            Err(e) => job.failures.push(e),
        }
    }
    job.ranks = kept;
    (parts, JobCollectives::new(ranks, tracecast_ingest::job::unread_ranks(&job.failures)))
}

/// A rank's replay part and its collective instances, from its context.
fn part_and_collectives<'c>(
    ctx: RankContext<'_>,
    opts: &ReplayOptions,
    catalog: &'c tracecast_calibrate::Catalog,
) -> (RankPart<'c>, tracecast_ingest::analysis::RankCollectives) {
    (RankPart::of(&ctx, opts, catalog, None), ctx.into_collectives())
}

/// Everything the replay needs of one rank, built from its
/// [`RankContext`] while its trace is in memory (see [`RankPart::of`]); the
/// trace can then be dropped, so a job of thousands of ranks is replayed from
/// these and the job's [`JobCollectives`] alone.
#[derive(Debug, Clone)]
pub struct RankPart<'c> {
    rank: u32,
    file: String,
    /// Catalog id of the rank's GPU, when the catalog knows it.
    gpu: Option<String>,
    /// The rank's tasks and edges.
    piece: RankPiece,
    /// Numbers of its steps (none: the whole GPU window is one).
    steps: Vec<i64>,
    /// (local task, step index) of its GPU tasks inside a step.
    step_of_task: Vec<(TaskId, u32)>,
    /// The §3 breakdown of the measured trace, as `analyze` reports it with the options' window.
    measured: Breakdown,
    /// That window (`None` without GPU activity).
    window: Option<Window>,
    /// Whether that window is the rank's whole GPU window (`--window all`, or no step to
    /// analyse), not the cover of its analysed steps.
    whole_window: bool,
    /// Numbers of its steps the window leaves out (`--steps`, `--drop-last-step`): the
    /// simulation runs them, the step times and breakdowns do not count them.
    left_out: Vec<i64>,
    /// Compute kernels' work, (local task, work); only with a target. The
    /// projection takes it, before the simulation.
    work: Vec<(TaskId, KernelWork)>,
    /// Calibration samples for the source device; only in a part made by
    /// [`RankPart::of`] with a target and no source in the options.
    samples: Option<tracecast_calibrate::profile::RankSamples<'c>>,
    /// Whether it was built for a projection (work and samples kept).
    for_target: bool,
    /// What the analysis says of the rank besides its numbers ([`analysis::measured_breakdown`]).
    notes: Vec<String>,
}

impl<'c> RankPart<'c> {
    /// One rank's part from its context (whose classifier should be
    /// `opts.window.classifier`). With a target in `opts` it keeps the compute
    /// kernels' work — `work`, the context's [`kernel_work_of`], computed here
    /// when not given — and, without a source device in `opts`, the rank's
    /// calibration samples, from which the replay calibrates the source.
    pub fn of(
        ctx: &RankContext<'_>,
        opts: &ReplayOptions,
        catalog: &'c tracecast_calibrate::Catalog,
        work: Option<&[Option<KernelWork>]>,
    ) -> RankPart<'c> {
        let trace = ctx.trace();
        let piece = RankPiece::of(trace, ctx.classes(), ctx.links());
        let steps = ctx.steps();
        let step_of_task = piece
            .gpu_tasks
            .iter()
            .filter_map(|&(row, t)| if steps.is_empty() { Some((t, 0)) } else { ctx.step_of(row as usize).map(|k| (t, k)) })
            .collect();
        let (measured, window, analysed, whole_window, notes) = analysis::measured_breakdown(ctx, &opts.window);
        let left_out = steps.iter().map(|s| s.number).filter(|n| !analysed.contains(n)).collect();
        let mut part = RankPart {
            rank: ctx.rank(),
            file: trace.path.display().to_string(),
            gpu: trace.devices.iter().find_map(|d| catalog.match_device(d)).map(|(g, _)| g.id.clone()),
            piece,
            steps: steps.iter().map(|s| s.number).collect(),
            step_of_task,
            measured,
            window,
            whole_window,
            left_out,
            work: Vec::new(),
            samples: None,
            for_target: false,
            notes,
        };
        part.add_target(ctx, opts, catalog, work, true);
        part
    }

    /// This part for a replay with other options (`opts`) of the same rank
    /// (`ctx`): the graph piece is copied, not built again; `work` as for
    /// [`RankPart::of`]. It keeps no calibration samples: a projection's
    /// source device is the caller's to give, in `opts` or set in the
    /// options later (a report's own calibration of the job).
    pub fn retarget(
        &self,
        ctx: &RankContext<'_>,
        opts: &ReplayOptions,
        catalog: &'c tracecast_calibrate::Catalog,
        work: Option<&[Option<KernelWork>]>,
    ) -> RankPart<'c> {
        let mut part = self.without_target();
        part.add_target(ctx, opts, catalog, work, false);
        part
    }

    /// This part for a replay without a target (its kernels keep their measured time).
    pub fn without_target(&self) -> RankPart<'c> {
        RankPart { work: Vec::new(), samples: None, for_target: false, ..self.clone() }
    }

    /// What a projection with `opts` needs (nothing without a target): the
    /// compute kernels' work and, `with_samples`, the rank's calibration
    /// samples, from which the replay calibrates the projection's source
    /// where no source profile applies.
    fn add_target(
        &mut self,
        ctx: &RankContext<'_>,
        opts: &ReplayOptions,
        catalog: &'c tracecast_calibrate::Catalog,
        work: Option<&[Option<KernelWork>]>,
        with_samples: bool,
    ) {
        self.for_target = opts.target.is_some();
        if opts.target.is_none() {
            return;
        }
        let computed;
        let all = match work {
            Some(w) => w,
            None => {
                computed = kernel_work_of(ctx);
                &computed
            }
        };
        let origin = &self.piece.graph.origin;
        self.work = self
            .piece
            .gpu_tasks
            .iter()
            .filter(|&&(_, t)| origin[t as usize].kind == TaskKind::Gpu(ActivityClass::Compute))
            .filter_map(|&(row, t)| all.get(row as usize).cloned().flatten().map(|k| (t, k)))
            .collect();
        // Taken even beside a source profile: one that does not apply to the job (of another
        // GPU than some rank's) leaves the ranks' own calibration to price it.
        if with_samples {
            self.samples = Some(tracecast_calibrate::profile::rank_samples(ctx, all, catalog));
        }
    }
}

impl RankPart<'_> {
    /// Copies what the replay keeps of the part through the simulation onto
    /// this thread. The part was made on its rank's thread, among what that
    /// thread has freed since (the rank's trace, its context): left there, its
    /// lists would keep those pages from going back to the system (5–7 MiB at
    /// 1024 ranks, BENCHMARKS.md).
    fn copy_here(&mut self) {
        fn copy<T: Clone>(x: &mut T) {
            *x = x.clone();
        }
        copy(&mut self.file);
        copy(&mut self.gpu);
        copy(&mut self.steps);
        copy(&mut self.step_of_task);
        copy(&mut self.left_out);
        copy(&mut self.notes);
    }

    /// Catalog id of the rank's GPU, when the catalog knows it.
    pub fn gpu_id(&self) -> Option<&str> {
        self.gpu.as_deref()
    }
}

/// Replays the ranks of one job from their parts (any order; `path` names
/// the job) and the job's collectives matched across those ranks, and keeps
/// the simulated timeline. Given the matching itself rather than a reference,
/// it frees it before the simulation, the replay's peak (a job's collective
/// instances are tens of MB at a thousand ranks).
pub fn replay_parts<C: std::borrow::Borrow<JobCollectives>>(
    path: String,
    mut parts: Vec<RankPart<'_>>,
    matching: C,
    opts: &ReplayOptions,
    catalog: &tracecast_calibrate::Catalog,
) -> Replayed {
    let collectives = matching.borrow();
    parts.sort_by_key(|p| p.rank);
    debug_assert!(parts.iter().all(|p| p.for_target == opts.target.is_some()), "parts built with other options than the replay");
    let rank_ids: Vec<u32> = parts.iter().map(|p| p.rank).collect();
    debug_assert_eq!(rank_ids, collectives.ranks(), "collectives of other ranks than the parts'");
    let world = collectives.world();
    let alignment = collectives.alignment();
    let mut notes = Vec::new();
    // Two captures given as one job (Nsight exports declare no world size): said, as `analyze` says it.
    if let Some(why) = analysis::runs_apart(parts.iter().map(|p| p.window.map(|w| w.start_ns)), collectives.trusted_alignment()) {
        notes.push(format!(
            "ranks of unrelated runs? {why}: replayed as one job, whose critical path spans the gap (give the files with --each to replay each alone)"
        ));
    }
    if let Some(a) = &alignment
        && a.residual_us * 1000.0 > 100_000.0
    {
        notes.push(format!(
            "matched collectives do not end together across ranks (residual {:.0} µs): ranks are replayed without cross-rank joins",
            a.residual_us
        ));
    }
    // What `analyze` says of each rank, said here too (a rank with no GPU work replays to zeros).
    if opts.rank_notes {
        notes.extend(analysis::notes_in_words(parts.iter().map(|p| (p.rank, p.notes.as_slice()))));
    }
    let pieces: Vec<RankPiece> = parts.iter_mut().map(|p| std::mem::take(&mut p.piece)).collect();
    for p in &mut parts {
        p.copy_here();
    }
    let (mut eg, place) = build(pieces, collectives, alignment);
    // The pricing layer: the caller's (with the user's measurements), else the shipped base.
    let shipped;
    let pricing = match &opts.pricing {
        Some(p) => p.as_ref(),
        None => {
            shipped = tracecast_calibrate::pricing::Pricing::new(catalog.clone(), tracecast_calibrate::measured::Measurements::shared());
            &shipped
        }
    };
    let mut projection = None;
    if let Some(target) = &opts.target {
        projection = Some(project_kernels(&mut parts, &place, collectives, &mut eg, target, opts, catalog, pricing, &mut notes));
    }
    let job_gpu = parts.iter().find_map(|p| p.gpu.as_deref()).and_then(|id| catalog.gpu(id).ok());
    let s = opts.scale;
    // Composed, as --link and --scale link: the target's price, then the speed-up.
    if projection.is_some() && s.compute != 1.0 {
        notes.push(format!(
            "--target and --scale compute={}: each compute kernel at the target's price, then {}× faster (the projected kernel time above is before the speed-up)",
            s.compute, s.compute
        ));
    }
    // Which kernel classes the window has: a speed-up of a class it lacks changes nothing, said.
    let (mut has_compute, mut has_memory, mut has_comm) = (false, false, false);
    for (t, o) in eg.origin.iter().enumerate() {
        let factor = match o.kind {
            TaskKind::Host | TaskKind::Wait | TaskKind::Join => 1.0,
            TaskKind::Gpu(ActivityClass::Comm) => {
                has_comm = true;
                1.0
            }
            TaskKind::Gpu(ActivityClass::Compute) => {
                has_compute = true;
                s.compute
            }
            TaskKind::Gpu(ActivityClass::Memory) => {
                has_memory = true;
                s.memory
            }
        };
        if factor != 1.0 && factor > 0.0 {
            eg.graph.dur_ns[t] = (eg.graph.dur_ns[t] as f64 / factor).round() as i64;
        }
    }
    for (name, factor, has, kernels) in [
        ("compute", s.compute, has_compute, "compute kernel"),
        ("memory", s.memory, has_memory, "memory copy or set"),
        ("link", s.link, has_comm, "communication kernel"),
    ] {
        if factor != 1.0 && !has {
            notes.push(format!("--scale {name}={factor}: no {kernels} in the replayed window, nothing was sped up"));
        }
    }
    let priced = job_gpu.map(|g| (g, pricing));
    recost_communication(world, &rank_ids, &place, &mut eg, collectives, opts, priced, &mut notes);
    drop(matching);
    tracecast_ingest::memory::release_for_replay();
    let schedule = simulate(&eg.graph);
    // Tasks on a cycle (a damaged trace's times) have no replayed times: they cover no window.
    let mut on_cycle: Vec<(u32, usize)> = Vec::new();
    let mut ranks = Vec::new();
    let (mut measured_sum, mut replayed_sum) = (Breakdown::default(), Breakdown::default());
    // The start of the analysed steps, and the GPU task of theirs that ends last (end, task).
    let (mut steps_from_ns, mut steps_last) = (i64::MAX, None::<(i64, usize)>);
    for (r, part) in parts.iter().enumerate() {
        let base = place.base[r] as usize;
        let nsteps = part.steps.len().max(1);
        // Window per step (or one window for the whole trace), measured and replayed.
        let mut measured: Vec<Option<Window>> = vec![None; nsteps];
        let mut replayed: Vec<Option<Window>> = vec![None; nsteps];
        let unscheduled = schedule.unscheduled_in(place.tasks(r));
        if unscheduled > 0 {
            on_cycle.push((part.rank, unscheduled));
        }
        for &(t, k) in &part.step_of_task {
            let (t, k) = (base + t as usize, k as usize);
            let (Some(m), Some(p)) = (measured.get_mut(k), replayed.get_mut(k)) else { continue };
            *m = Some(Window::cover(*m, eg.measured_start_ns[t], eg.measured_end_ns[t]));
            if !schedule.is_scheduled(t) {
                continue;
            }
            *p = Some(Window::cover(*p, schedule.start_ns[t], schedule.end_ns[t]));
            if part.steps.get(k).is_none_or(|n| !part.left_out.contains(n)) && steps_last.is_none_or(|(end, _)| schedule.end_ns[t] > end) {
                steps_last = Some((schedule.end_ns[t], t));
            }
        }
        // The steps partition the window as `analyze`'s do (one rule): a
        // lagging stream's work belongs to the step it overlaps.
        if !part.steps.is_empty() {
            analysis::partition_windows(&mut measured);
            analysis::partition_windows(&mut replayed);
        }
        let mut rows = Vec::new();
        let mut analysed_window = None;
        for k in 0..nsteps {
            let step = part.steps.get(k).copied().unwrap_or(-1);
            let (Some(m), Some(p)) = (measured[k], replayed[k]) else { continue };
            if part.left_out.contains(&step) {
                continue;
            }
            analysed_window = Some(Window::cover(analysed_window, p.start_ns, p.end_ns));
            let (m_us, p_us) = ((m.end_ns - m.start_ns) as f64 / 1000.0, (p.end_ns - p.start_ns) as f64 / 1000.0);
            rows.push(StepReplay {
                step,
                measured_step_us: m_us,
                replayed_step_us: p_us,
                error: if m_us > 0.0 { (p_us - m_us) / m_us } else { 0.0 },
            });
        }
        let mean = |f: fn(&StepReplay) -> f64| if rows.is_empty() { 0.0 } else { rows.iter().map(f).sum::<f64>() / rows.len() as f64 };
        let (m, p) = (mean(|s| s.measured_step_us), mean(|s| s.replayed_step_us));
        // Breakdown of the replayed timeline over the analysed window: its steps, or the
        // rank's whole replayed GPU window as the measured one is.
        // The critical path starts with the first analysed step (not a step --steps leaves out).
        if let Some(w) = analysed_window {
            steps_from_ns = steps_from_ns.min(w.start_ns);
        }
        let gpu_work = || {
            place.tasks(r).filter(|&t| schedule.is_scheduled(t)).filter_map(|t| match eg.origin[t].kind {
                TaskKind::Gpu(c) => Some((schedule.start_ns[t], schedule.end_ns[t], c)),
                TaskKind::Host | TaskKind::Wait | TaskKind::Join => None,
            })
        };
        let window = if part.whole_window { gpu_work().fold(None, |w, (a, b, _)| Some(Window::cover(w, a, b))) } else { analysed_window };
        let sets = RankSets::from_intervals(gpu_work());
        let replayed_breakdown = window.map(|w| Breakdown::from_sets(&sets, w)).unwrap_or_default();
        measured_sum.add(&part.measured);
        replayed_sum.add(&replayed_breakdown);
        ranks.push(RankReplay {
            file: part.file.clone(),
            rank: part.rank,
            measured: part.measured,
            measured_step_us: m,
            replayed_step_us: p,
            error: if m > 0.0 { (p - m) / m } else { 0.0 },
            steps: rows,
            collectives: Vec::new(),
            replayed: replayed_breakdown,
            graph: eg.ranks.get(r).copied().unwrap_or_default(),
        });
    }
    if !on_cycle.is_empty() {
        // A replayed time of −7 443 589 s had been printed for a rank whose cycle's tasks kept the
        // partial times of a schedule that never reached them.
        let each: Vec<String> = on_cycle.iter().map(|(rank, n)| format!("rank {rank}: {n}")).collect();
        notes.push(format!(
            "{} tasks sit on a dependency cycle, or wait on one, and were not replayed ({}): the order the trace records contradicts itself (a damaged timestamp?); those ranks' replayed times cover the tasks that were",
            schedule.unscheduled.len(),
            each.join(", ")
        ));
    }
    // A step range ends the critical path with its last step (it had run to the trace's last GPU
    // work: `--steps 1` of three gave the three steps' path beside one step's time).
    let selected = parts.iter().any(|p| !p.left_out.is_empty());
    if selected {
        // Under --window all the breakdowns are of the whole window (the analysis says so).
        let covered = if parts.iter().all(|p| p.whole_window) { "step times and speed-up" } else { "step times, speed-up and breakdowns" };
        notes.push(format!(
            "the {covered} cover the analysed steps (--steps, --drop-last-step), and so does the critical path; the simulation runs the whole trace"
        ));
    }
    let from_ns = if steps_from_ns == i64::MAX { i64::MIN } else { steps_from_ns };
    let last = steps_last.filter(|_| selected).map(|(_, t)| t);
    let (critical_path, critical) = crate::critical::critical_path(&eg, &schedule, from_ns, last);
    if critical_path.host_bound() {
        let [.., cpu, launch, _] = critical_path.percent();
        // GPU starts nothing explains are held as waits of their measured length, off the host's
        // path: where they fill much of the time the path spans (a filtered or sampled trace
        // loses launches), the verdict rests on what the trace lost, and that is said.
        let unexplained = most_unexplained_wait_us(&eg, &schedule, from_ns, &critical);
        let caveat = if unexplained > 0.1 * critical_path.total_us {
            format!(
                "; but GPU starts that nothing in the trace explains wait {:.3} ms on one rank within the time the path spans ({:.0} % of it): a trace that lost launches (filtered, sampled) can look host-bound without being so",
                unexplained / 1e3,
                100.0 * unexplained / critical_path.total_us
            )
        } else {
            String::new()
        };
        notes.push(format!(
            "the host bounds the step: {:.0} % of the critical path is CPU time and launch latency, so faster GPU work shortens it little{caveat}",
            cpu + launch
        ));
    }
    // The job's step time per step, the slowest rank's (a trace without steps has
    // one, -1: its whole GPU window). The speed-up is of its mean; the totals list
    // the profiler steps, as `analyze` does.
    let job_steps = |us: fn(&StepReplay) -> f64| -> (f64, Vec<JobStep>) {
        let steps = analysis::job_steps(ranks.iter().flat_map(|r| r.steps.iter().map(move |s| (r.rank, s.step, us(s)))));
        // Folded from +0.0: an empty f64 sum is -0.0 (a job step time of "-0.0").
        let mean = steps.iter().fold(0.0, |sum, s| sum + s.step_us) / steps.len().max(1) as f64;
        (mean, steps.into_iter().filter(|s| s.step >= 0).collect())
    };
    let ((measured_step, measured_steps), (replayed_step, replayed_steps)) =
        (job_steps(|s| s.measured_step_us), job_steps(|s| s.replayed_step_us));
    // A rank's steps are its profiler steps, as `analyze` lists them: the whole window of a
    // trace without steps is its measured and replayed times, not a step numbered -1.
    for r in &mut ranks {
        r.steps.retain(|s| s.step >= 0);
    }
    let totals = ReplayTotals {
        measured: Totals::new(ranks.len(), measured_sum, measured_steps, None),
        replayed: Totals::new(ranks.len(), replayed_sum, replayed_steps, None),
    };
    let report = JobReplay {
        path,
        world_size: world,
        scale: opts.scale,
        replayed_world_size: opts.world_size,
        link: opts.link,
        ranks,
        totals,
        speedup: if replayed_step > 0.0 { measured_step / replayed_step } else { 1.0 },
        measured_job_step_us: measured_step,
        replayed_job_step_us: replayed_step,
        critical_path,
        tasks: eg.graph.len(),
        edges: eg.graph.edges.len(),
        notes,
        projection,
    };
    Replayed { report, graph: eg, schedule, critical }
}

/// Re-costs every communication kernel's transfer for `--scale link`,
/// `--link` and `--world-size`. A collective joined across ranks is all
/// transfer (its waits come from the join); one seen on a single rank is
/// split into transfer — the lower envelope of that rank's durations for the
/// same collective, group and message size, since waits only lengthen
/// kernels — and the wait for peers, which is kept as measured.
#[allow(clippy::too_many_arguments)]
fn recost_communication(
    world: u32,
    rank_ids: &[u32],
    place: &Placement,
    eg: &mut ExecGraph,
    collectives: &JobCollectives,
    opts: &ReplayOptions,
    priced: Option<(&tracecast_calibrate::catalog::Gpu, &tracecast_calibrate::pricing::Pricing)>,
    notes: &mut Vec<String>,
) {
    let s = opts.scale;
    let rescale = s.link != 1.0 && s.link > 0.0;
    if !rescale && opts.link.is_none() && opts.world_size.is_none() {
        return;
    }
    let collectives = collectives.samples();
    let joined: FxHashSet<usize> = eg.join_edges.iter().filter_map(|&e| eg.graph.edges.get(e)).map(|e| e.to_task() as usize).collect();
    let rank_index: FxHashMap<u32, usize> = rank_ids.iter().enumerate().map(|(i, &r)| (r, i)).collect();
    let sample_task = |c: &CollectiveSample| rank_index.get(&c.rank).and_then(|&r| place.task_of(r, c.row)).map(|t| t as usize);
    // The lower envelope per (rank, collective, group, size) of the unjoined kernels.
    let mut envelope: FxHashMap<(u32, Collective, Option<i64>, Option<u64>), i64> = FxHashMap::default();
    for c in collectives {
        if let Some(t) = sample_task(c)
            && !joined.contains(&t)
        {
            let e = envelope.entry((c.rank, c.collective, c.group_size, c.bytes)).or_insert(i64::MAX);
            *e = (*e).min(eg.graph.dur_ns[t]);
        }
    }
    let world = i64::from(world);
    let mut new_transfer: FxHashMap<usize, i64> = FxHashMap::default();
    let (mut unknown, mut relinked, mut grown, mut split) = (0usize, 0usize, 0usize, 0usize);
    let mut priced_by: std::collections::BTreeMap<(&'static str, &'static str), usize> = Default::default();
    let mut spanning = 0usize;
    let (mut waited, mut waited_us) = (0usize, 0.0f64);
    // --world-size at the job's own size resizes nothing (said below).
    let resizes = opts.world_size.is_some_and(|to| i64::from(to) != world);
    for c in collectives {
        let Some(t) = sample_task(c) else { continue };
        let is_joined = joined.contains(&t);
        let dur = eg.graph.dur_ns[t];
        let transfer =
            if is_joined { dur } else { envelope.get(&(c.rank, c.collective, c.group_size, c.bytes)).copied().unwrap_or(dur).min(dur) };
        // The data-parallel groups that --world-size grows are costed at their new size;
        // a point-to-point transfer (a pipeline's) stays between its two ranks, whatever
        // the size of the group it was issued in (a 2-rank job's world).
        let grows = resizes && c.group_size == Some(world) && c.collective != Collective::SendRecv;
        let n = match (c.group_size, opts.world_size) {
            (Some(_), Some(to)) if grows => Some(i64::from(to)),
            (g, _) => g,
        };
        let overridden = match (&opts.link, c.bytes, n) {
            (Some(link), Some(bytes), Some(n)) => {
                link.transfer_us(c.collective, bytes, n, opts.gpus_per_node).map(|us| (us * 1000.0).round() as i64)
            }
            _ => None,
        };
        if opts.link.is_some() && overridden.is_none() {
            unknown += 1;
        }
        let mut tr = match overridden {
            Some(ns) => {
                relinked += 1;
                ns as f64
            }
            None if grows => {
                grown += 1;
                let to = opts.world_size.unwrap_or(1);
                match priced.zip(c.bytes).and_then(|((gpu, p), bytes)| priced_scaling(p, gpu, c.collective, bytes as f64, world, to, opts))
                {
                    Some((old_ns, new_ns, old_rule, rule)) => {
                        // Both sizes' rules where they differ: an upper bound at the job's size is said too.
                        *priced_by.entry((old_rule.as_str(), rule.as_str())).or_default() += 1;
                        // A transfer far slower than the pricing layer's price at the job's
                        // size (under a quarter of its bus bandwidth) waited for peers: that
                        // part is a wait, kept as measured, and only the priced transfer scales.
                        // A collective joined across the job's ranks had its waits split off by
                        // the join: what is left moved data, however slow its link.
                        let moving = if !is_joined && transfer as f64 > WAIT_FACTOR * old_ns {
                            waited += 1;
                            waited_us += (transfer as f64 - old_ns) / 1000.0;
                            old_ns
                        } else {
                            transfer as f64
                        };
                        moving * new_ns / old_ns + (transfer as f64 - moving)
                    }
                    None => transfer as f64 * scale_out_factor(c.collective, world, i64::from(to), opts),
                }
            }
            None => transfer as f64,
        };
        // Composed, not merged: `--link` (or the world size) prices the
        // transfer, then `--scale link=k` speeds that up k times.
        if rescale {
            tr /= s.link;
        }
        if overridden.is_some() && n.is_some_and(|n| n > i64::from(opts.gpus_per_node)) {
            spanning += 1;
        }
        if !is_joined && (overridden.is_some() || grows || rescale) {
            split += 1;
        }
        new_transfer.insert(t, (dur - transfer) + tr.round() as i64);
    }
    for (&t, &ns) in &new_transfer {
        eg.graph.dur_ns[t] = ns;
    }
    for &e in &eg.join_edges {
        if let Some(edge) = eg.graph.edges.get_mut(e)
            && let Some(&ns) = new_transfer.get(&(edge.to_task() as usize))
        {
            edge.lag_ns = ns;
        }
    }
    if let Some(link) = &opts.link {
        if rescale && relinked > 0 {
            notes.push(format!("--link and --scale link={}: the --link price of each collective, then {}× faster", s.link, s.link));
        }
        if spanning == 0 && relinked > 0 && (link.inter_alpha_us.is_some() || link.inter_busbw_gbps.is_some()) {
            notes.push(format!(
                "--link: inter-alpha/inter-busbw not applied: no re-costed collective's group spans nodes (> {} GPUs)",
                opts.gpus_per_node
            ));
        }
        if spanning > 0 && (link.inter_alpha_us.is_none() || link.inter_busbw_gbps.is_none()) {
            // Each value said as given or taken from the link in a node (`inter-busbw=1` alone had
            // read as an in-node 1 GB/s, and as not given).
            let (inter, given) = (link.inter(), |v: Option<f64>| if v.is_some() { "as given" } else { "the in-node value" });
            let missing = match (link.inter_alpha_us, link.inter_busbw_gbps) {
                (None, None) => "inter-alpha/inter-busbw",
                (None, Some(_)) => "inter-alpha",
                _ => "inter-busbw",
            };
            notes.push(format!(
                "--link without {missing}: {spanning} collective(s) over groups spanning nodes (> {} GPUs) were priced at α {} µs ({}) and bus bandwidth {} GB/s ({})",
                opts.gpus_per_node,
                inter.alpha_us,
                given(link.inter_alpha_us),
                inter.busbw_gbps,
                given(link.inter_busbw_gbps)
            ));
        }
        if relinked == 0 {
            notes.push("--link: no collective has a known message size and group, nothing was re-costed".to_string());
        } else {
            // The link across nodes where a re-costed group spans nodes.
            let inter = if spanning > 0 {
                format!(", across nodes ({spanning}) at α {} µs and {} GB/s", link.inter().alpha_us, link.inter().busbw_gbps)
            } else {
                String::new()
            };
            notes.push(format!(
                "--link: {relinked} collective(s) re-costed as α + bus factor × bytes / bus bandwidth, in a node at α {} µs and {} GB/s{inter}{}",
                link.alpha_us,
                link.busbw_gbps,
                if unknown > 0 { format!("; {unknown} without a known size or group keep their measured transfer") } else { String::new() }
            ));
        }
    }
    let priced_count: usize = priced_by.values().sum();
    if priced_count > 0 {
        let rules: Vec<String> = priced_by
            .iter()
            .map(
                |((old, new), n)| {
                    if old == new { format!("{n} by {new}") } else { format!("{n} by {old} at the job's size, {new} at the new") }
                },
            )
            .collect();
        notes.push(format!(
            "--world-size: {priced_count} of {grown} resized collective(s) scaled by the pricing layer's price at both sizes ({}){}",
            rules.join(", "),
            if waited > 0 {
                format!(
                    "; {waited} of them took over {WAIT_FACTOR}× the price at the job's size: {:.1} ms of waiting for peers, kept as measured, not scaled",
                    waited_us / 1000.0
                )
            } else {
                String::new()
            }
        ));
    }
    // Whether the note on rows across nodes of another GPU was made (the note below would repeat it).
    let mut across_not_of_gpu = false;
    // The user's measurements across nodes of the GPU priced, at another node size than the
    // ranks are placed in: they price none of the grown collectives across nodes (said; a
    // replay onto Polaris' 4-a-node measurements had placed 8 a node in silence).
    if let Some(to) = opts.world_size
        && i64::from(to) > i64::from(opts.gpus_per_node)
        && grown > 0
        && let Some((gpu, pricing)) = priced
    {
        let m = &pricing.measurements;
        match m.users_gpus_per_node(gpu) {
            Some((g, sources)) if g == opts.gpus_per_node => notes.push(format!(
                "--world-size: ranks placed {g} to a node, as your measurements of {} ({}) across nodes were taken",
                gpu.id,
                sources.join(", ")
            )),
            Some((g, sources)) => notes.push(format!(
                "--measurements: yours of {} ({}) were taken at {g} GPUs per node, not the {} this replay places ranks in: they price none of its collectives across nodes (--gpus-per-node {g} places them so)",
                gpu.id,
                sources.join(", "),
                opts.gpus_per_node
            )),
            None if m.users_across_nodes(None).next().is_some() && m.users_across_nodes(Some(gpu)).next().is_none() => {
                across_not_of_gpu = true;
                notes.push(format!(
                    "--measurements: yours across nodes are not of {}, the job's GPU, on whose network --world-size prices the grown collectives (--target reprices kernels, not the network)",
                    gpu.id
                ))
            }
            _ => {}
        }
    }
    // A job in one node grown past it: its groups now cross nodes, at the NICs' price.
    if let Some(to) = opts.world_size
        && i64::from(to) > i64::from(opts.gpus_per_node)
        && world <= i64::from(opts.gpus_per_node)
        && grown > 0
    {
        notes.push(format!(
            "--world-size {to}: the grown groups span nodes of {} GPUs and are priced across them (give --gpus-per-node to keep them in one node)",
            opts.gpus_per_node
        ));
    }
    if let Some(to) = opts.world_size
        && i64::from(to) < world
    {
        notes.push(format!(
            "--world-size {to} is below the job's {world} ranks: its data-parallel collectives are priced at {to} rank{} with each rank's work unchanged (the global batch shrinks with the job)",
            if to == 1 { "" } else { "s" }
        ));
    }
    if grown > priced_count && priced.is_none() {
        // No GPU to price them on: the links are the defaults, said as such (an H100 node's).
        notes.push(format!(
            "--world-size: the trace names no GPU the catalog knows (give it with --device ID): {} resized collective(s) scaled by the bus factor and default link bandwidths, an H100 node's ({} GB/s in a node, {} GB/s across nodes)",
            grown - priced_count,
            opts.intra_gbps,
            opts.inter_gbps
        ));
    } else if grown > priced_count {
        notes.push(format!(
            "--world-size: {} resized collective(s) without a price at both sizes (no message size, or a size below the measured curves' smallest GPU count) scaled by the bus factor and the link bandwidths ({} GB/s in a node, {} GB/s across nodes)",
            grown - priced_count,
            opts.intra_gbps,
            opts.inter_gbps
        ));
    }
    if opts.world_size.is_some_and(|to| i64::from(to) == world) {
        notes.push(format!("--world-size {world} is the job's own world size: nothing was resized"));
    } else if opts.world_size.is_some() && grown == 0 && relinked == 0 {
        notes.push(format!("--world-size: no collective spans the job's {world} ranks, nothing was rescaled"));
    }
    // The user's collective rows of another GPU price nothing here (the step had moved as with
    // no rows at all, without a word).
    if let (Some(_), Some((gpu, pricing)), true) = (opts.world_size, priced, grown > 0) {
        let others = pricing.measurements.users_collectives_only_of_other_gpus(gpu);
        // Said once: where rows across nodes were, the note above said it of them.
        if !others.is_empty() && !across_not_of_gpu {
            notes.push(format!(
                "--measurements: its collective rows are of {}, not of the job's GPU {}: they price none of the resized collectives",
                others.join(", "),
                gpu.id
            ));
        }
    }
    if split > 0 {
        notes.push(format!(
            "{split} collective kernel(s) not matched across ranks: only their transfer (the fastest of this rank's kernels of the same collective, group and size) was re-costed; their wait for peers is kept as measured"
        ));
    }
}

/// The most replayed time any rank's unexplained-wait tasks take within the span of the
/// critical path `path` (from `from_ns`, or its first event, to its last), µs: the graph's
/// count is of the whole trace, and a step range's path spans less (`--steps 551` had put
/// 860 ms of waits at 136 % of its path).
fn most_unexplained_wait_us(eg: &ExecGraph, s: &Schedule, from_ns: i64, path: &[u32]) -> f64 {
    let (Some(&first), Some(&end)) = (path.last(), path.first()) else { return 0.0 };
    let (from, to) = (if from_ns == i64::MIN { s.event_ns(first) } else { from_ns }, s.event_ns(end));
    let mut per_rank = vec![0.0; eg.ranks.len()];
    for (t, o) in eg.origin.iter().enumerate() {
        if o.kind == TaskKind::Wait
            && let Some(r) = per_rank.get_mut(o.rank as usize)
        {
            *r += (s.end_ns[t].min(to) - s.start_ns[t].max(from)).max(0) as f64 / 1000.0;
        }
    }
    per_rank.into_iter().fold(0.0, f64::max)
}
