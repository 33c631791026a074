//! Replaying a measured job: identity (measured durations) and what-if
//! scaling of compute, memory and link speed, with per-step measured and
//! replayed times and the §3 breakdown of the replayed timeline.

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use tracecast_calibrate::DeviceModel;
use tracecast_calibrate::cost::{AlphaBeta, CrossDevice, Rule};
use tracecast_calibrate::work::{KernelWork, kernel_work};
use tracecast_ingest::Job;
use tracecast_ingest::analysis::CollectiveSample;
use tracecast_ingest::analysis::{
    self, ActivityClass, Breakdown, Classifier, RankSets, Window, collective_samples, find_steps, step_of_activity,
};
use tracecast_ingest::collective::Collective;
use tracecast_ingest::link::Links;

use crate::critical::CriticalPath;
use crate::graph::{ExecGraph, RankGraph, TaskKind, build};
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
        let inter = n > i64::from(gpus_per_node);
        let link = if inter {
            AlphaBeta {
                alpha_us: self.inter_alpha_us.unwrap_or(self.alpha_us),
                busbw_gbps: self.inter_busbw_gbps.unwrap_or(self.busbw_gbps),
            }
        } else {
            AlphaBeta { alpha_us: self.alpha_us, busbw_gbps: self.busbw_gbps }
        };
        link.collective_us(collective, bytes as f64, n)
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
    /// Communication classifier.
    pub classifier: Classifier,
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
    /// The device the trace was measured on, for `target`. Default: none
    /// (the trace's own calibration).
    pub source: Option<DeviceModel>,
    /// The hardware catalog (with the user's `--hw` files). Default: none (built-in).
    pub catalog: Option<tracecast_calibrate::Catalog>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            classifier: Classifier::default(),
            scale: Scale::default(),
            world_size: None,
            gpus_per_node: 8,
            intra_gbps: 450.0,
            inter_gbps: 50.0,
            target: None,
            link: None,
            source: None,
            catalog: None,
        }
    }
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
    /// The number after `ProfilerStep#` (`-1` for the whole GPU window of a trace without steps).
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
    /// Per step.
    pub steps: Vec<StepReplay>,
    /// The §3 breakdown of the replayed timeline over the replayed steps.
    pub replayed: Breakdown,
    /// The graph's measured timings and what explained each GPU start.
    pub graph: RankGraph,
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
    /// Per rank.
    pub ranks: Vec<RankReplay>,
    /// Measured / replayed mean step time over all ranks (1 for identity).
    pub speedup: f64,
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

/// Re-prices every compute kernel of `eg` on `target` through the one cost
/// model; the source device is the trace's own calibration (`opts.source`
/// when given).
fn project_kernels(job: &Job, eg: &mut ExecGraph, target: &DeviceModel, opts: &ReplayOptions, notes: &mut Vec<String>) -> ProjectionReport {
    let catalog = opts.catalog.clone().unwrap_or_else(tracecast_calibrate::Catalog::builtin);
    let source = match &opts.source {
        Some(s) => s.clone(),
        None => {
            let mut copts = tracecast_calibrate::CalibrateOptions::default();
            copts.classifier = opts.classifier.clone();
            let profiles = tracecast_calibrate::profile::calibrate_jobs(std::iter::once(job), &catalog, &copts);
            match profiles.into_iter().next() {
                Some(mut p) => {
                    // Classes this trace cannot fit take the GPU's shipped fits.
                    let shipped = p.device.catalog_id.as_deref().and_then(tracecast_calibrate::shipped::profile);
                    let filled = shipped.map_or(0, |sh| p.fill_from(&sh));
                    let mut m = DeviceModel::from_profile(&p, &catalog);
                    m.source = if filled > 0 {
                        format!("this trace's own calibration, {filled} class(es) from the shipped profile")
                    } else {
                        "this trace's own calibration".into()
                    };
                    m
                }
                None => DeviceModel { gpu: None, profile: None, source: "none".into(), kernel_floor_us: None },
            }
        }
    };
    for r in target.rejected_fits() {
        notes.push(format!("target profile: {r}"));
    }
    if source.gpu.is_none() {
        notes.push("the trace's GPU is not in the catalog: kernels keep their measured time (add it with --hw FILE)".into());
    }
    if target.profile.is_none() {
        notes.push(format!(
            "no profile of {} nor of a similar GPU: the source GPU's fitted efficiencies are carried to its catalog specs",
            target.gpu.as_ref().map_or("the target", |g| g.id.as_str())
        ));
    }
    let model = CrossDevice { source: &source, target };
    if model.latencies().is_some_and(|(s, t)| s == t) && target.kernel_floor_us.is_none() {
        notes.push("the target's short-kernel time is unknown: latency-bound kernels keep the trace's".into());
    }
    let work: Vec<Vec<Option<KernelWork>>> = job.ranks.iter().map(|r| kernel_work(&r.trace, &opts.classifier)).collect();
    let mut shares: std::collections::BTreeMap<Rule, (usize, f64, f64)> = Default::default();
    let mut band = [0.0, 0.0];
    for (t, o) in eg.origin.iter().enumerate() {
        if o.kind != TaskKind::Gpu(ActivityClass::Compute) {
            continue;
        }
        let Some(Some(k)) = work.get(o.rank).and_then(|w| w.get(o.row as usize)) else { continue };
        let measured_us = eg.graph.dur_ns[t] as f64 / 1000.0;
        let cost = model.kernel(k, measured_us);
        let e = shares.entry(cost.rule).or_default();
        e.0 += 1;
        e.1 += measured_us;
        e.2 += cost.us;
        band[0] += cost.low_us;
        band[1] += cost.high_us;
        eg.graph.dur_ns[t] = (cost.us * 1000.0).round() as i64;
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
    }
}

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
    let classes: Vec<Vec<Option<ActivityClass>>> = job.ranks.iter().map(|r| opts.classifier.classes(&r.trace)).collect();
    let links: Vec<Links> = job.ranks.iter().map(|r| Links::new(&r.trace)).collect();
    let collectives = collective_samples(job, &opts.classifier);
    let mut analyze = analysis::AnalyzeOptions::default();
    analyze.classifier = opts.classifier.clone();
    let measured_analysis = analysis::analyze_job(job, &analyze);
    let alignment = measured_analysis.clock_alignment.clone();
    let mut notes = Vec::new();
    if let Some(a) = &alignment
        && a.residual_us * 1000.0 > 100_000.0
    {
        notes.push(format!(
            "matched collectives do not end together across ranks (residual {:.0} µs): ranks are replayed without cross-rank joins",
            a.residual_us
        ));
    }
    let mut eg = build(job, &classes, &links, &collectives, alignment.as_ref());
    let mut projection = None;
    if let Some(target) = &opts.target {
        projection = Some(project_kernels(job, &mut eg, target, opts, &mut notes));
    }
    let s = opts.scale;
    for (t, o) in eg.origin.iter().enumerate() {
        let factor = match o.kind {
            TaskKind::Host | TaskKind::Wait | TaskKind::Join | TaskKind::Gpu(ActivityClass::Comm) => 1.0,
            TaskKind::Gpu(ActivityClass::Compute) => s.compute,
            TaskKind::Gpu(ActivityClass::Memory) => s.memory,
        };
        if factor != 1.0 && factor > 0.0 {
            eg.graph.dur_ns[t] = (eg.graph.dur_ns[t] as f64 / factor).round() as i64;
        }
    }
    recost_communication(job, &mut eg, &collectives, opts, &mut notes);
    let schedule = simulate(&eg.graph);
    if schedule.unscheduled > 0 {
        notes.push(format!("{} tasks sit on a dependency cycle and were not replayed", schedule.unscheduled));
    }
    // Per rank: task of each GPU row (an unexplained wait shares its activity's row).
    let mut task_of_row: Vec<FxHashMap<u32, usize>> = vec![Default::default(); job.ranks.len()];
    for (t, o) in eg.origin.iter().enumerate().filter(|(_, o)| matches!(o.kind, TaskKind::Gpu(_))) {
        task_of_row[o.rank].insert(o.row, t);
    }
    let mut ranks = Vec::new();
    let (mut measured_total, mut replayed_total) = (0.0, 0.0);
    let mut steps_from_ns = i64::MAX;
    for (r, rank) in job.ranks.iter().enumerate() {
        let trace = &rank.trace;
        let steps = find_steps(trace, &links[r]);
        let assignment = step_of_activity(trace, &links[r], &steps);
        let nsteps = steps.len().max(1);
        // Window per step (or one window for the whole trace), measured and replayed.
        let mut measured: Vec<Option<(i64, i64)>> = vec![None; nsteps];
        let mut replayed: Vec<Option<(i64, i64)>> = vec![None; nsteps];
        let widen = |w: &mut Option<(i64, i64)>, s: i64, e: i64| {
            *w = Some(w.map_or((s, e), |(a, b)| (a.min(s), b.max(e))));
        };
        for i in trace.gpu_activity() {
            let k = if steps.is_empty() { Some(0) } else { assignment[i].map(|k| k as usize) };
            let (Some(k), Some(&t)) = (k, task_of_row[r].get(&(i as u32))) else { continue };
            widen(&mut measured[k], eg.measured_start_ns[t], eg.measured_end_ns[t]);
            widen(&mut replayed[k], schedule.start_ns[t], schedule.end_ns[t]);
        }
        let mut rows = Vec::new();
        for k in 0..nsteps {
            let (Some(m), Some(p)) = (measured[k], replayed[k]) else { continue };
            let (m_us, p_us) = ((m.1 - m.0) as f64 / 1000.0, (p.1 - p.0) as f64 / 1000.0);
            rows.push(StepReplay {
                step: steps.get(k).map_or(-1, |s| s.number),
                measured_step_us: m_us,
                replayed_step_us: p_us,
                error: if m_us > 0.0 { (p_us - m_us) / m_us } else { 0.0 },
            });
        }
        let mean = |f: fn(&StepReplay) -> f64| if rows.is_empty() { 0.0 } else { rows.iter().map(f).sum::<f64>() / rows.len() as f64 };
        let (m, p) = (mean(|s| s.measured_step_us), mean(|s| s.replayed_step_us));
        measured_total += m;
        replayed_total += p;
        // Breakdown of the replayed timeline over the replayed steps.
        let window =
            replayed.iter().flatten().fold(None, |w: Option<(i64, i64)>, &(a, b)| Some(w.map_or((a, b), |(x, y)| (x.min(a), y.max(b)))));
        if let Some((a, _)) = window {
            steps_from_ns = steps_from_ns.min(a);
        }
        let sets = RankSets::from_intervals(eg.origin.iter().enumerate().filter(|(_, o)| o.rank == r).filter_map(|(t, o)| match o.kind {
            TaskKind::Gpu(c) => Some((schedule.start_ns[t], schedule.end_ns[t], c)),
            TaskKind::Host | TaskKind::Wait | TaskKind::Join => None,
        }));
        let replayed_breakdown = window.map(|(a, b)| Breakdown::from_sets(&sets, Window { start_ns: a, end_ns: b })).unwrap_or_default();
        ranks.push(RankReplay {
            file: trace.path.display().to_string(),
            rank: rank.rank,
            measured: measured_analysis.ranks.get(r).map(|a| a.breakdown).unwrap_or_default(),
            measured_step_us: m,
            replayed_step_us: p,
            error: if m > 0.0 { (p - m) / m } else { 0.0 },
            steps: rows,
            replayed: replayed_breakdown,
            graph: eg.ranks.get(r).copied().unwrap_or_default(),
        });
    }
    let (critical_path, critical) =
        crate::critical::critical_path(&eg, &schedule, if steps_from_ns == i64::MAX { i64::MIN } else { steps_from_ns });
    if critical_path.host_bound() {
        let [.., cpu, launch, _] = critical_path.percent();
        notes.push(format!(
            "the host bounds the step: {:.0} % of the critical path is CPU time and launch latency, so faster GPU work shortens it little",
            cpu + launch
        ));
    }
    let report = JobReplay {
        path: job.path.display().to_string(),
        world_size: job.world_size(),
        scale: opts.scale,
        ranks,
        speedup: if replayed_total > 0.0 { measured_total / replayed_total } else { 1.0 },
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
fn recost_communication(job: &Job, eg: &mut ExecGraph, collectives: &[CollectiveSample], opts: &ReplayOptions, notes: &mut Vec<String>) {
    let s = opts.scale;
    let rescale = s.link != 1.0 && s.link > 0.0;
    if !rescale && opts.link.is_none() && opts.world_size.is_none() {
        return;
    }
    let joined: FxHashSet<usize> = eg.join_edges.iter().filter_map(|&e| eg.graph.edges.get(e)).map(|e| e.to as usize).collect();
    let mut task_of: FxHashMap<(usize, u32), usize> = FxHashMap::default();
    for (t, o) in eg.origin.iter().enumerate() {
        if matches!(o.kind, TaskKind::Gpu(_)) {
            task_of.insert((o.rank, o.row), t);
        }
    }
    let rank_index: FxHashMap<u32, usize> = job.ranks.iter().enumerate().map(|(i, r)| (r.rank, i)).collect();
    let sample_task = |c: &CollectiveSample| rank_index.get(&c.rank).and_then(|&r| task_of.get(&(r, c.row)).copied());
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
    let world = i64::from(job.world_size());
    let mut new_transfer: FxHashMap<usize, i64> = FxHashMap::default();
    let (mut unknown, mut relinked, mut grown, mut split) = (0usize, 0usize, 0usize, 0usize);
    for c in collectives {
        let Some(t) = sample_task(c) else { continue };
        let is_joined = joined.contains(&t);
        let dur = eg.graph.dur_ns[t];
        let transfer =
            if is_joined { dur } else { envelope.get(&(c.rank, c.collective, c.group_size, c.bytes)).copied().unwrap_or(dur).min(dur) };
        // The data-parallel groups that --world-size grows are costed at their new size.
        let grows = opts.world_size.is_some() && c.group_size == Some(world);
        let n = match (c.group_size, opts.world_size) {
            (Some(g), Some(to)) if g == world => Some(i64::from(to)),
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
                transfer as f64 * scale_out_factor(c.collective, world, i64::from(opts.world_size.unwrap_or(1)), opts)
            }
            None => transfer as f64,
        };
        if rescale && overridden.is_none() {
            tr /= s.link;
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
            && let Some(&ns) = new_transfer.get(&(edge.to as usize))
        {
            edge.lag_ns = ns;
        }
    }
    if opts.link.is_some() {
        if relinked == 0 {
            notes.push("--link: no collective has a known message size and group, nothing was re-costed".to_string());
        } else if unknown > 0 {
            notes.push(format!("--link: {unknown} collective kernel(s) without a known size or group keep their measured transfer"));
        }
    }
    if opts.world_size.is_some() && grown == 0 && relinked == 0 {
        notes.push(format!("--world-size: no collective spans the job's {world} ranks, nothing was rescaled"));
    }
    if split > 0 {
        notes.push(format!(
            "{split} collective kernel(s) not matched across ranks: only their transfer (the fastest of this rank's kernels of the same collective, group and size) was re-costed; their wait for peers is kept as measured"
        ));
    }
}
