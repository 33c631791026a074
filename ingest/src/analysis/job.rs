//! Everything `tracecast analyze` reports for one job.

use rayon::prelude::*;
use serde::Serialize;

use super::breakdown::{Breakdown, Window, WindowMode};
use super::classify::Classifier;
use super::collectives::{self, ClockAlignment, CollectiveStats};
use super::context::RankContext;
use super::idle::{IdleSplit, StreamIdle};
use super::job_collectives::JobCollectives;
use super::kernels::{self, KernelStats};
use super::steps::{self, Step, StepBreakdown};
use crate::job::{Job, RankSource};

/// Options of [`analyze_job`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AnalyzeOptions {
    /// Window mode. Default: [`WindowMode::Steps`].
    pub window: WindowMode,
    /// Communication classifier. Default: the known communication kernel families.
    pub classifier: Classifier,
    /// Gaps shorter than this between queued work are "kernel wait", µs. Default: 30 (HTA's `consecutive_kernel_delay`).
    pub kernel_wait_threshold_us: f64,
    /// Kernel names kept per rank in the report, longest first. Default: 20.
    pub top_kernels: usize,
    /// GPUs of the whole job, for the GPU-hours extrapolation. Default: none.
    pub job_gpus: Option<f64>,
    /// Wall-clock hours of the whole job. Default: none.
    pub job_hours: Option<f64>,
    /// Leave out each rank's last profiler step (HTA's default). Default: false.
    pub drop_last_step: bool,
    /// Only the steps numbered in this inclusive range. Default: all.
    pub steps: Option<(i64, i64)>,
    /// GPUs per node, to tell a tensor-parallel group (contiguous ranks inside
    /// a node) from a data-parallel one by its members. Default: 8.
    pub gpus_per_node: i64,
}

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions {
            window: WindowMode::Steps,
            classifier: Classifier::default(),
            kernel_wait_threshold_us: 30.0,
            top_kernels: 20,
            job_gpus: None,
            job_hours: None,
            gpus_per_node: 8,
            drop_last_step: false,
            steps: None,
        }
    }
}

/// One parallelism dimension's communication over the job's ranks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DimensionTotal {
    /// The dimension.
    pub dimension: super::dimension::Dimension,
    /// Σ over ranks of its communication, µs.
    pub comm_us: f64,
    /// Σ of its exposed communication, µs.
    pub exposed_comm_us: f64,
    /// Its exposed communication as GPU-hours of the whole job (with `--job-gpus`/`--job-hours`).
    pub exposed_gpu_hours: Option<f64>,
}

/// The analysis of one rank.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RankAnalysis {
    /// The trace file.
    pub file: String,
    /// Global rank.
    pub rank: u32,
    /// Where the rank number came from.
    pub rank_source: RankSource,
    /// GPU name from `deviceProperties`, when present.
    pub device: Option<String>,
    /// The window actually used (`steps` falls back to `all` without steps).
    pub window: WindowMode,
    /// Window start relative to the rank's first GPU activity, µs.
    pub window_start_us: f64,
    /// The §3 breakdown of the window.
    #[serde(flatten)]
    pub breakdown: Breakdown,
    /// Idle time of the GPU (the union of its streams) by cause; sums to `idle_us`.
    pub idle_split: IdleSplit,
    /// Idle time of each stream by cause, as HTA reports it.
    pub idle_by_stream: Vec<StreamIdle>,
    /// Per-step breakdowns, in time order.
    pub steps: Vec<StepBreakdown>,
    /// Collectives by type and process group.
    pub collectives: Vec<CollectiveStats>,
    /// Communication and exposed communication per parallelism dimension.
    pub comm_by_dimension: Vec<super::dimension::DimensionComm>,
    /// The kernels with the most time, longest first.
    pub top_kernels: Vec<KernelStats>,
    /// Clock offset fitted from matched collectives, µs (multi-rank jobs only).
    pub clock_offset_us: Option<f64>,
    /// Things the user should know (no GPU activity, fallbacks, tolerated oddities).
    pub notes: Vec<String>,
    /// All kernel statistics (for table export; not in JSON).
    #[serde(skip)]
    pub all_kernels: Vec<KernelStats>,
}

/// One part of the breakdown over a job's ranks ([`JobAnalysis::spread_over_ranks`]), µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankSpread {
    /// The smallest value.
    pub min: f64,
    /// The rank with the smallest value (the first in rank order among equals).
    pub min_rank: u32,
    /// 10th percentile.
    pub p10: f64,
    /// 50th percentile.
    pub median: f64,
    /// 90th percentile.
    pub p90: f64,
    /// The largest value.
    pub max: f64,
    /// The rank with the largest value (the last in rank order among equals).
    pub max_rank: u32,
}

/// GPU-hours in words, to three significant figures (at least whole hours): one rule
/// for every table and sentence, so that a headline does not say 0 where a table says 0.2.
/// Below one hour at least three decimals (0.500; a tenth of a GPU-minute had printed 0.000).
pub fn gpu_hours_text(hours: f64) -> String {
    let digits = if hours.abs() < 1.0 { decimals_for_three_figures(hours).max(3) } else { decimals_for_three_figures(hours) };
    format!("{hours:.digits$}")
}

/// `v` to three significant figures (0.000412, 0.304, 41.2; from 100 on whole): the one rule of
/// the small numbers the terminal shows (GPU-hours, parameter counts, a fit's work span).
pub fn three_figures(v: f64) -> String {
    let digits = decimals_for_three_figures(v);
    format!("{v:.digits$}")
}

/// The decimals that show `v` to three significant figures (none from 100 on, nor for 0).
fn decimals_for_three_figures(v: f64) -> usize {
    let v = v.abs();
    if v == 0.0 || !v.is_finite() || v >= 100.0 { 0 } else { (2 - v.log10().floor() as i32).clamp(0, 12) as usize }
}

/// GPU-hours of the whole job, extrapolated from the traced fractions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GpuHours {
    /// GPUs in the job.
    pub job_gpus: f64,
    /// Wall-clock hours.
    pub job_hours: f64,
    /// G × H.
    pub total: f64,
    /// Exposed-communication fraction × G × H.
    pub exposed_comm: f64,
    /// Compute fraction × G × H.
    pub compute: f64,
    /// Idle fraction × G × H.
    pub idle: f64,
}

/// Sums over ranks and the fractions derived from them.
#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    /// Ranks analysed.
    pub ranks: usize,
    /// Field-wise sums over ranks.
    #[serde(flatten)]
    pub breakdown: Breakdown,
    /// Σ exposed_comm / Σ gpu_span.
    pub exposed_comm_fraction: f64,
    /// Σ comm / Σ gpu_span.
    pub comm_fraction: f64,
    /// Σ compute / Σ gpu_span.
    pub compute_fraction: f64,
    /// Σ idle / Σ gpu_span.
    pub idle_fraction: f64,
    /// With `job_gpus` and `job_hours`.
    pub gpu_hours: Option<GpuHours>,
    /// The job's step time per profiler step: the slowest rank's (steps matched by number).
    pub steps: Vec<JobStep>,
}

/// One profiler step of the job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobStep {
    /// The number after `ProfilerStep#`.
    pub step: i64,
    /// The slowest rank's GPU window of the step, µs: the job's step time.
    pub step_us: f64,
    /// That rank.
    pub slowest_rank: u32,
    /// Ranks with GPU work in this step.
    pub ranks: usize,
}

impl Totals {
    /// The totals of `ranks` ranks whose breakdowns sum to `sum`, with the
    /// job's steps and, given (GPUs, hours) of the whole job, its GPU-hours.
    pub fn new(ranks: usize, sum: Breakdown, steps: Vec<JobStep>, job: Option<(f64, f64)>) -> Totals {
        let span = sum.gpu_span_us;
        let gpu_hours = job.map(|(g, h)| GpuHours {
            job_gpus: g,
            job_hours: h,
            total: g * h,
            exposed_comm: fraction(sum.exposed_comm_us, span) * g * h,
            compute: fraction(sum.compute_us, span) * g * h,
            idle: fraction(sum.idle_us, span) * g * h,
        });
        Totals {
            ranks,
            breakdown: sum,
            exposed_comm_fraction: fraction(sum.exposed_comm_us, span),
            comm_fraction: fraction(sum.comm_us, span),
            compute_fraction: fraction(sum.compute_us, span),
            idle_fraction: fraction(sum.idle_us, span),
            gpu_hours,
            steps,
        }
    }
}

/// Whether a step of `gpu_span_us` ran GPU work: only such steps make the job's step time.
pub(crate) fn ran_gpu_work(gpu_span_us: f64) -> bool {
    gpu_span_us > 0.0
}

/// The job's step time per profiler step from (rank, step, the rank's GPU
/// window of the step in µs): the slowest rank's, steps matched by number —
/// the one definition of a job's step time (`analyze`, `replay`, `diff`). A
/// rank without GPU work in a step has no GPU window there and does not
/// count (a trailing step with CPU work only is no 0 µs step of the job).
pub fn job_steps(rank_steps: impl IntoIterator<Item = (u32, i64, f64)>) -> Vec<JobStep> {
    let mut by_step: std::collections::BTreeMap<i64, JobStep> = Default::default();
    for (rank, step, us) in rank_steps.into_iter().filter(|&(_, _, us)| ran_gpu_work(us)) {
        let e = by_step.entry(step).or_insert(JobStep { step, step_us: -1.0, slowest_rank: rank, ranks: 0 });
        e.ranks += 1;
        if us > e.step_us {
            e.step_us = us;
            e.slowest_rank = rank;
        }
    }
    by_step.into_values().collect()
}

/// How many ranks a job's times per rank are of ([`JobAnalysis::rank_count`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RankCount {
    /// The ranks, each counted as its share of the most steps of GPU work a rank analysed.
    pub ranks: f64,
    /// The most steps of GPU work a rank analysed (0 without steps).
    pub most_steps: usize,
    /// The ranks that analysed fewer, with how many: (rank, steps).
    pub short: Vec<(u32, usize)>,
    /// Whether every rank was analysed by its steps (else each counts whole).
    pub by_steps: bool,
}

/// A file of the job that could not be analysed.
#[derive(Debug, Clone, Serialize)]
pub struct BadFile {
    /// The file.
    pub file: String,
    /// Why, as printed.
    pub error: String,
    /// Whether it is a rank of the job that could not be read (the world size counts it:
    /// [`crate::Error::is_unread_rank`]).
    #[serde(skip)]
    pub unread_rank: bool,
}

/// The analysis of one job.
#[derive(Debug, Clone, Serialize)]
pub struct JobAnalysis {
    /// The job's directory or first file.
    pub path: String,
    /// Ranks in the run (from `distributedInfo`, else the ranks read).
    pub world_size: u32,
    /// Per rank, ascending.
    pub ranks: Vec<RankAnalysis>,
    /// Sums and fractions.
    pub totals: Totals,
    /// Clock alignment across ranks, when collectives could be matched.
    pub clock_alignment: Option<ClockAlignment>,
    /// Ranks the others waited for at matched collectives, most waiting caused first.
    pub stragglers: Vec<collectives::Straggler>,
    /// Communication per parallelism dimension, summed over the ranks.
    pub comm_by_dimension: Vec<DimensionTotal>,
    /// Files that could not be read.
    pub bad_files: Vec<BadFile>,
}

impl JobAnalysis {
    /// Each distinct note of the job's ranks, with the ranks it was made for (ascending),
    /// in the order the notes first appear: a job of many ranks says a thing once.
    pub fn notes_by_text(&self) -> Vec<(&str, Vec<u32>)> {
        notes_by_text(self.ranks.iter().map(|r| (r.rank, r.notes.as_slice())))
    }

    /// The ranks of the world that are not among those read, by which ranks (a rank numbered past
    /// the world stands in for none of it); empty for a world past 2^20 ranks, not listed.
    pub fn ranks_not_read(&self) -> Vec<u32> {
        if self.world_size > 1 << 20 {
            return Vec::new();
        }
        let read: std::collections::HashSet<u32> = self.ranks.iter().map(|r| r.rank).collect();
        (0..self.world_size).filter(|r| !read.contains(r)).collect()
    }

    /// [`JobAnalysis::notes_by_text`], one line a note ([`notes_in_words`]).
    pub fn notes_in_words(&self) -> Vec<String> {
        notes_in_words(self.ranks.iter().map(|r| (r.rank, r.notes.as_slice())))
    }

    /// Where the stragglers' waits (GPU time) add up to more than the job's exposed
    /// communication, that said in words, as the terminal and the page print it: at least
    /// 1 − exposed ÷ waits of them ran under compute, and fixing the stragglers saves at most the
    /// exposed time (a synthetic job's five stragglers "waited" 5.8× its exposed communication,
    /// each wait beside its GPU-hours as if lost).
    pub fn straggler_waits_beyond_exposed(&self) -> Option<String> {
        let waited: f64 = self.stragglers.iter().map(|s| s.wait_caused_us).sum();
        let exposed = self.totals.breakdown.exposed_comm_us;
        (waited > exposed).then(|| {
            format!(
                "their waits add up to {:.3} GPU-ms, more than the job's {:.3} GPU-ms of exposed communication: at least {:.0} % of them ran under compute, and making every rank arrive on time saves at most the exposed time",
                waited / 1000.0,
                exposed / 1000.0,
                100.0 * (1.0 - exposed / waited)
            )
        })
    }

    /// The job's step time, µs: the mean over its steps of the slowest rank's ([`job_steps`]);
    /// without steps, the slowest rank's analysed window.
    pub fn mean_step_us(&self) -> f64 {
        let steps = &self.totals.steps;
        if steps.is_empty() {
            return self.ranks.iter().map(|r| r.breakdown.gpu_span_us).fold(0.0, f64::max);
        }
        steps.iter().map(|s| s.step_us).sum::<f64>() / steps.len() as f64
    }

    /// How many ranks the job's times per rank are of ([`RankCount`]): where every rank was
    /// analysed by steps, a rank that analysed fewer steps of GPU work than the rank with most
    /// (a trace cut short) counts as that share of a rank, steps counted as the job's step
    /// time counts them; else each rank counts whole. One rank of four with one step of three,
    /// counted whole, had read as a quarter less busy time per rank, a slower run as faster.
    pub fn rank_count(&self) -> RankCount {
        let by_steps = !self.ranks.is_empty() && self.ranks.iter().all(|r| r.window == WindowMode::Steps);
        let worked = |r: &RankAnalysis| r.steps.iter().filter(|s| s.ran_gpu_work()).count();
        let most = self.ranks.iter().map(worked).max().unwrap_or(0);
        if !(by_steps && most > 0) {
            return RankCount { ranks: self.ranks.len() as f64, most_steps: most, short: Vec::new(), by_steps };
        }
        RankCount {
            ranks: self.ranks.iter().map(|r| worked(r) as f64 / most as f64).sum(),
            most_steps: most,
            short: self.ranks.iter().map(|r| (r.rank, worked(r))).filter(|&(_, k)| k < most).collect(),
            by_steps,
        }
    }

    /// How one part of the breakdown spreads over the job's ranks (`None` without ranks):
    /// its two ends with their ranks, and the 10th, 50th and 90th percentiles, each
    /// between the two nearest ranks (the median of an even count is the mean of the middle two).
    pub fn spread_over_ranks(&self, part: impl Fn(&Breakdown) -> f64) -> Option<RankSpread> {
        let mut v: Vec<(f64, u32)> = self.ranks.iter().map(|r| (part(&r.breakdown), r.rank)).collect();
        v.sort_by(|x, y| x.0.total_cmp(&y.0));
        let (&lo, &hi) = (v.first()?, v.last()?);
        let q = |p: f64| {
            let at = (v.len() - 1) as f64 * p;
            let (below, above) = (v[at.floor() as usize].0, v[at.ceil() as usize].0);
            below + (above - below) * at.fract()
        };
        Some(RankSpread { min: lo.0, min_rank: lo.1, p10: q(0.1), median: q(0.5), p90: q(0.9), max: hi.0, max_rank: hi.1 })
    }

    /// Every kernel's statistics over all ranks, longest total first (ties by name):
    /// counts and times summed, the longest instance of any rank.
    pub fn kernels_over_ranks(&self) -> Vec<KernelStats> {
        let mut by: std::collections::BTreeMap<&str, KernelStats> = Default::default();
        for k in self.ranks.iter().flat_map(|r| &r.all_kernels) {
            let e = by.entry(k.name.as_str()).or_insert_with(|| KernelStats { count: 0, total_us: 0.0, max_us: 0.0, ..k.clone() });
            e.count += k.count;
            super::breakdown::add_measured_us(&mut e.total_us, k.total_us);
            e.max_us = e.max_us.max(k.max_us);
        }
        let mut out: Vec<KernelStats> = by.into_values().collect();
        for k in &mut out {
            k.mean_us = k.total_us / k.count.max(1) as f64;
        }
        // Stable: equal totals stay in name order.
        out.sort_by(|x, y| y.total_us.total_cmp(&x.total_us));
        out
    }

    /// The ranks' idle splits summed (`None` without idle time): the threshold is the
    /// analysis's, the same for every rank.
    pub fn idle_split_over_ranks(&self) -> Option<IdleSplit> {
        let mut sum = IdleSplit { kernel_wait_threshold_us: self.ranks.first()?.idle_split.kernel_wait_threshold_us, ..Default::default() };
        for r in &self.ranks {
            sum.host_wait_us += r.idle_split.host_wait_us;
            sum.kernel_wait_us += r.idle_split.kernel_wait_us;
            sum.other_us += r.idle_split.other_us;
        }
        (sum.host_wait_us + sum.kernel_wait_us + sum.other_us > 0.0).then_some(sum)
    }

    /// The job's collectives over all ranks, by type, process group and
    /// group size (in that order; an unnamed group as `-`): each rank's rows
    /// summed, the bandwidth Σ bytes ÷ Σ time of the kernels that have one.
    pub fn collectives_over_ranks(&self) -> Vec<CollectiveStats> {
        // (bytes, time) of the kernels with a bandwidth beside each row while
        // summing: a rank's bytes without a time do not raise the bandwidth.
        let mut by: std::collections::BTreeMap<(String, String, String), (CollectiveStats, u64, f64)> = Default::default();
        for c in self.ranks.iter().flat_map(|r| &r.collectives) {
            let key = (
                c.collective.as_str().to_string(),
                c.process_group.clone().unwrap_or_else(|| "-".into()),
                c.group_size.map_or("-".into(), |n| n.to_string()),
            );
            let (row, timed_bytes, timed_us) = by.entry(key).or_insert_with(|| {
                let row = CollectiveStats {
                    collective: c.collective,
                    process_group: c.process_group.clone(),
                    group_size: c.group_size,
                    count: 0,
                    total_us: 0.0,
                    mean_us: 0.0,
                    bytes: None,
                    sized_count: 0,
                    algbw_gbps: None,
                    busbw_gbps: None,
                    matched: 0,
                    transfer_us: None,
                    wait_us: None,
                };
                (row, 0, 0.0)
            });
            row.count += c.count;
            super::breakdown::add_measured_us(&mut row.total_us, c.total_us);
            row.sized_count += c.sized_count;
            row.matched += c.matched;
            if let Some(b) = c.bytes {
                row.bytes = Some(row.bytes.unwrap_or(0) + b);
                if let Some(bw) = c.algbw_gbps.filter(|bw| *bw > 0.0) {
                    *timed_bytes += b;
                    *timed_us += b as f64 / bw / 1000.0;
                }
            }
            if let (Some(wt), Some(tr)) = (c.wait_us, c.transfer_us) {
                row.wait_us = Some(row.wait_us.unwrap_or(0.0) + wt);
                row.transfer_us = Some(row.transfer_us.unwrap_or(0.0) + tr);
            }
        }
        by.into_values()
            .map(|(mut row, timed_bytes, timed_us)| {
                row.mean_us = if row.count > 0 { row.total_us / row.count as f64 } else { 0.0 };
                row.algbw_gbps = (timed_us > 0.0).then(|| timed_bytes as f64 / timed_us / 1000.0);
                row.busbw_gbps = row.algbw_gbps.and_then(|a| Some(a * row.collective.bus_factor_in(row.group_size)?));
                row
            })
            .collect()
    }
}

impl BadFile {
    /// The file and message of a read error.
    pub fn of(e: &crate::Error) -> BadFile {
        BadFile {
            file: e.path().map(|p| p.display().to_string()).unwrap_or_default(),
            error: e.to_string(),
            unread_rank: e.is_unread_rank(),
        }
    }
}

fn fraction(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { part / whole } else { 0.0 }
}

/// What the job-level analysis needs of one rank: its own analysis and the
/// compact rows of its collectives (for matching across ranks). Built in one
/// pass over the rank's trace, which can then be dropped: a job of thousands
/// of ranks is summarized one rank at a time and reduced.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RankSummary {
    analysis: RankAnalysis,
    // Cached apart: their group strings are shared (see `to_cache`).
    #[serde(skip)]
    instances: Vec<collectives::Instance>,
    window: Option<Window>,
    comm_by_dimension: Vec<super::dimension::DimensionComm>,
    declared_world: Option<u32>,
}

/// What a rank's summary depends on besides its trace: the analysis itself
/// ([`super::SCHEMA_VERSION`]), the options (less the job-level GPU-hours
/// inputs, which only the reduce uses) and the world size.
/// A summary cached under one key stands for a fresh one under the same key.
pub fn summary_key(opts: &AnalyzeOptions, world: u32) -> String {
    let mut o = opts.clone();
    o.job_gpus = None;
    o.job_hours = None;
    format!("analysis schema {} summary of {o:?} in a world of {world}", super::SCHEMA_VERSION)
}

impl RankSummary {
    /// The summary as JSON text, every field included (the per-rank kernel
    /// list that analysis outputs leave out too), for [`RankSummary::from_cache`].
    pub fn to_cache(&self) -> String {
        #[derive(Serialize)]
        struct Cached<'a> {
            summary: &'a RankSummary,
            all_kernels: &'a [super::KernelStats],
            instances: collectives::CachedInstances,
        }
        let instances = collectives::CachedInstances::of(&self.instances);
        serde_json::to_string(&Cached { summary: self, all_kernels: &self.analysis.all_kernels, instances }).unwrap_or_default()
    }

    /// A summary written by [`RankSummary::to_cache`]; `None` when the text is not one.
    pub fn from_cache(text: &[u8]) -> Option<RankSummary> {
        #[derive(serde::Deserialize)]
        struct Cached {
            summary: RankSummary,
            all_kernels: Vec<super::KernelStats>,
            instances: collectives::CachedInstances,
        }
        let c: Cached = serde_json::from_slice(text).ok()?;
        let mut s = c.summary;
        s.analysis.all_kernels = c.all_kernels;
        s.instances = c.instances.into_instances()?;
        Some(s)
    }

    /// The rank this summarizes.
    pub fn rank(&self) -> u32 {
        self.analysis.rank
    }

    /// The window analysed (`None` without GPU activity).
    pub fn window(&self) -> Option<Window> {
        self.window
    }

    /// The window the per-class and per-op tables count ([`Window::starts_inside`],
    /// [`Window::overlap_ns`]): the analysed one, or an empty one where nothing was analysed
    /// (steps chosen that ran no GPU work) — not the whole trace, which their `None` stands for.
    pub fn tables_window(&self) -> Window {
        self.window.unwrap_or(Window { start_ns: 0, end_ns: 0 })
    }

    /// The rank's collective instances for matching across ranks (a copy).
    pub fn collectives(&self) -> collectives::RankCollectives {
        collectives::RankCollectives::new(self.analysis.rank, self.declared_world, self.instances.clone())
    }

    /// [`RankSummary::collectives`], moved out of the summary.
    fn take_collectives(&mut self) -> collectives::RankCollectives {
        collectives::RankCollectives::new(self.analysis.rank, self.declared_world, std::mem::take(&mut self.instances))
    }
}

/// Analyses every rank of `job` (in parallel) and the job as a whole.
pub fn analyze_job(job: &Job, opts: &AnalyzeOptions) -> JobAnalysis {
    let world = job.world_size();
    let summaries: Vec<RankSummary> = job.ranks.par_iter().map(|rank| summarize_rank(rank, world, opts)).collect();
    let bad_files = job.failures.iter().map(BadFile::of).collect();
    reduce(job.path.display().to_string(), summaries, bad_files, opts)
}

/// One rank's pass: everything the job needs of it (see [`RankSummary`]);
/// `world` is the job's world size (for the default group and dimensions).
/// For a rank read on its own; a command that builds other products of the
/// rank too takes [`summarize`] its [`RankContext`].
pub fn summarize_rank(rank: &crate::job::Rank, world: u32, opts: &AnalyzeOptions) -> RankSummary {
    summarize(&RankContext::new(rank, &opts.classifier), world, opts)
}

/// What an analysis with `opts` covers of a rank: the steps it keeps, the
/// window mode used and the window (`None` without GPU activity), the whole
/// GPU window, and notes on fallbacks.
struct Selection {
    steps: Vec<Step>,
    mode: WindowMode,
    window: Option<Window>,
    all: Option<Window>,
    notes: Vec<String>,
}

fn select(ctx: &RankContext<'_>, opts: &AnalyzeOptions) -> Selection {
    let mut steps = ctx.steps().to_vec();
    // The steps the trace has, before --drop-last-step leaves one out (for the notes).
    let has: Vec<i64> = steps.iter().map(|s| s.number).collect();
    let mut notes = Vec::new();
    // The step --drop-last-step left out, for the range's note.
    let mut dropped = None;
    if opts.drop_last_step && steps.len() > 1 {
        dropped = steps.pop().map(|s| s.number);
    } else if opts.drop_last_step && steps.len() == 1 {
        notes.push("--drop-last-step: the trace has one step, kept (dropping it would leave nothing to analyse)".to_string());
    } else if opts.drop_last_step {
        // Said by the option's name, as --steps says it (the general note does not name it).
        notes.push("--drop-last-step: the trace has no profiler steps, nothing to leave out".to_string());
    }
    // What --drop-last-step left out, said (the analysis had read as the whole trace's); a last
    // step outside --steps leaves out nothing the range has, and that is said too.
    match (dropped, opts.steps) {
        (Some(n), Some((lo, hi))) if !(lo..=hi).contains(&n) => {
            notes.push(format!("--drop-last-step: the last step, {n}, is outside --steps {lo}-{hi}: nothing more left out"))
        }
        (Some(n), None) => notes.push(format!("--drop-last-step: step {n}, the last, left out")),
        // Within the range, the range's own note names it.
        _ => {}
    }
    if let Some((lo, hi)) = opts.steps {
        steps.retain(|s| s.number >= lo && s.number <= hi);
        // A range this trace has only part of is analysed for that part, and said (`--steps 3-4`
        // on steps 4–6 had analysed step 4 alone without a word); one it has none of is an
        // error before this (`check_step_range`).
        let named = hi.saturating_sub(lo).saturating_add(1);
        if !steps.is_empty() && (steps.len() as i64) < named {
            let mut sorted = has.clone();
            sorted.sort_unstable();
            // A step of the range the trace has but --drop-last-step left out is named so (the
            // note had said the trace lacked it while listing it).
            let dropped: Vec<i64> = dropped.filter(|n| (lo..=hi).contains(n)).into_iter().collect();
            notes.push(if dropped.is_empty() {
                format!(
                    "--steps {lo}-{hi}: this trace has {} of the {named} steps named (it has {})",
                    steps.len(),
                    steps::describe_numbers(&sorted)
                )
            } else {
                format!(
                    "--steps {lo}-{hi}: {} of the {named} steps named analysed (the trace has {}; --drop-last-step left out {})",
                    steps.len(),
                    steps::describe_numbers(&sorted),
                    steps::describe_numbers(&dropped)
                )
            });
        }
    }
    if opts.window == WindowMode::All && (opts.steps.is_some() || opts.drop_last_step) {
        notes.push(
            "--window all: the breakdown and tables cover the whole GPU window; --steps / --drop-last-step choose only the steps listed per step"
                .to_string(),
        );
    }
    let all = ctx.window_all();
    let (mode, window) = match (opts.window, steps::steps_window(&steps)) {
        (WindowMode::Steps, Some(w)) => (WindowMode::Steps, Some(w)),
        // Steps named by --steps that ran no GPU work on this rank: nothing of it is analysed.
        // The whole window had been analysed in their place (another step's work under the
        // selected step's name), where `replay` gave them zero.
        (WindowMode::Steps, None) if opts.steps.is_some() && !steps.is_empty() && all.is_some() => {
            let numbers: Vec<i64> = steps.iter().map(|s| s.number).collect();
            notes.push(format!(
                "--steps: the {} selected ran no GPU work on this rank: nothing of it is analysed (its times are zero)",
                steps::describe_numbers(&numbers)
            ));
            (WindowMode::Steps, None)
        }
        (WindowMode::Steps, None) => {
            if all.is_some() {
                notes.push(if steps.is_empty() {
                    "no ProfilerStep annotations: the whole GPU window is analysed".to_string()
                } else {
                    "no GPU work could be tied to a ProfilerStep: the whole GPU window is analysed".to_string()
                });
            }
            (WindowMode::All, all)
        }
        (WindowMode::All, _) => (WindowMode::All, all),
    };
    Selection { steps, mode, window, all, notes }
}

/// The §3 breakdown a rank's analysis with `opts` reports ([`summarize`]'s
/// `breakdown`), without the rest of the analysis, the window it covers
/// (`None` without GPU activity), the numbers of the steps it lists (those
/// `--steps` and `--drop-last-step` select, whatever the window) and whether
/// the window is the rank's whole GPU window (`--window all`, or no step's
/// GPU work to cover).
/// What the analysis says of the rank besides its numbers ([`rank_notes`]) comes last.
pub fn measured_breakdown(ctx: &RankContext<'_>, opts: &AnalyzeOptions) -> (Breakdown, Option<Window>, Vec<i64>, bool, Vec<String>) {
    let selection = select(ctx, opts);
    let notes = rank_notes(ctx, &selection);
    let Selection { steps, mode, window, .. } = selection;
    let numbers = steps.iter().map(|s| s.number).collect();
    (window.map(|w| Breakdown::from_sets(ctx.sets(), w)).unwrap_or_default(), window, numbers, mode != WindowMode::Steps, notes)
}

/// What the analysis says of a rank besides its numbers, one rule for `analyze` and `replay`:
/// what reading its trace warned of, how its window was chosen, no GPU activity, several GPUs
/// in one trace, and the listed steps that ran no GPU work.
fn rank_notes(ctx: &RankContext<'_>, selection: &Selection) -> Vec<String> {
    let mut notes: Vec<String> = ctx.trace().warnings.clone();
    notes.extend(selection.notes.iter().cloned());
    if selection.all.is_none() {
        notes.push("no GPU activity (kernels, memcpy, memset) in this trace: all times are zero".to_string());
    }
    // One process that drove several GPUs wrote one trace: a rank here, its GPUs' times
    // unioned; communication is hidden only by compute on its own GPU. Said, not split.
    let devices = &ctx.sets().devices;
    if devices.len() > 1 {
        let list: Vec<String> = devices.iter().map(i64::to_string).collect();
        notes.push(format!(
            "GPU activity on {} devices ({}) in this one trace: analysed as one rank, communication exposed while any GPU's runs without its own compute, busy and idle time of their union; one trace per GPU gives per-GPU figures (and per-dimension rows that tell the GPUs apart)",
            devices.len(),
            list.join(", ")
        ));
    }
    // A step is listed per rank as annotated; the job's step time counts steps that ran GPU work.
    let span_us = |s: &Step| s.gpu.map_or(0.0, |g| g.len_ns() as f64 / 1000.0);
    let empty: Vec<String> = selection.steps.iter().filter(|s| !ran_gpu_work(span_us(s))).map(|s| s.number.to_string()).collect();
    if !empty.is_empty() && selection.window.is_some() {
        notes.push(format!("step(s) {} ran no GPU work: listed here, not in the job's step time (totals, diff, replay)", empty.join(", ")));
    }
    notes
}

/// The analysis of one rank from its context (its activity classes are the
/// context's, `opts.classifier` is not consulted): everything the job needs
/// of it (see [`RankSummary`]); `world` is the job's world size (for the
/// default group and dimensions).
pub fn summarize(ctx: &RankContext<'_>, world: u32, opts: &AnalyzeOptions) -> RankSummary {
    super::facts::count(super::facts::Fact::Analysis);
    let trace = ctx.trace();
    let (links, classes, sets) = (ctx.links(), ctx.classes(), ctx.sets());
    let selection = select(ctx, opts);
    let notes = rank_notes(ctx, &selection);
    let Selection { steps, mode, window, all, .. } = selection;
    let w = window.unwrap_or(Window { start_ns: 0, end_ns: 0 });
    let breakdown = if window.is_some() { Breakdown::from_sets(sets, w) } else { Breakdown::default() };
    let idle_split = if window.is_some() {
        IdleSplit::compute(trace, links, w, opts.kernel_wait_threshold_us)
    } else {
        IdleSplit { kernel_wait_threshold_us: opts.kernel_wait_threshold_us, ..Default::default() }
    };
    let idle_by_stream = if window.is_some() { StreamIdle::all(trace, links, w, opts.kernel_wait_threshold_us) } else { Vec::new() };
    let step_rows: Vec<StepBreakdown> = steps
        .iter()
        .map(|s| StepBreakdown {
            step: s.number,
            cpu_dur_us: (s.cpu_end_ns - s.cpu_start_ns) as f64 / 1000.0,
            breakdown: s.gpu.map(|g| Breakdown::from_sets(sets, g)).unwrap_or_default(),
        })
        .collect();
    let all_kernels = if window.is_some() { kernels::kernel_stats(trace, classes, w) } else { Vec::new() };
    let instances = ctx.instances().to_vec();
    let world = i64::from(world);
    let comm_by_dimension =
        if window.is_some() { super::dimension::comm_by_dimension(&instances, sets, w, world, opts.gpus_per_node) } else { Vec::new() };
    RankSummary {
        declared_world: trace.declared_world_size(),
        analysis: RankAnalysis {
            file: trace.path.display().to_string(),
            rank: ctx.rank(),
            rank_source: ctx.source(),
            device: trace.device_name().map(str::to_string),
            window: mode,
            window_start_us: all.map_or(0.0, |a| (w.start_ns - a.start_ns) as f64 / 1000.0),
            breakdown,
            idle_split,
            idle_by_stream,
            steps: step_rows,
            collectives: Vec::new(),
            comm_by_dimension: Vec::new(),
            top_kernels: all_kernels.iter().take(opts.top_kernels).cloned().collect(),
            clock_offset_us: None,
            notes,
            all_kernels,
        },
        instances,
        window,
        comm_by_dimension,
    }
}

/// Whether ranks whose GPU windows start at `starts` (ns, in rank order; `None` without GPU
/// activity) look like unrelated runs, in words: more than an hour apart (Nsight exports of two
/// captures, which declare no world size) once their clocks are aligned on their matched
/// collectives (`alignment`, in the same order): ranks whose collectives match are one run,
/// whatever their clocks said. The one rule of `analyze`'s note and the replay's.
pub fn runs_apart(starts: impl Iterator<Item = Option<i64>>, alignment: Option<&super::ClockAlignment>) -> Option<String> {
    let offset = |r: usize| alignment.and_then(|a| a.offsets_us.get(r)).map_or(0, |o| (o * 1000.0).round() as i64);
    let starts = starts.enumerate().filter_map(|(r, s)| s.map(|s| s.saturating_add(offset(r))));
    let (lo, hi) = starts.fold((i64::MAX, i64::MIN), |(lo, hi), s| (lo.min(s), hi.max(s)));
    use crate::rank::HOUR_NS;
    (hi > lo && hi.saturating_sub(lo) > HOUR_NS)
        .then(|| format!("their GPU windows start {:.1} h apart", hi.saturating_sub(lo) as f64 / HOUR_NS as f64))
}

/// What the analysis says of ranks, one line a note: `ranks 0–3: …` ([`notes_by_text`], [`rank_list`]).
pub fn notes_in_words<'a>(ranks: impl Iterator<Item = (u32, &'a [String])>) -> Vec<String> {
    notes_by_text(ranks).into_iter().map(|(n, ranks)| format!("{}: {n}", rank_list(&ranks))).collect()
}

/// Each distinct note of `ranks` (rank, its notes), with the ranks it was made for, in the order
/// the notes first appear: a job of many ranks says a thing once.
pub fn notes_by_text<'a>(ranks: impl Iterator<Item = (u32, &'a [String])>) -> Vec<(&'a str, Vec<u32>)> {
    let mut out: Vec<(&str, Vec<u32>)> = Vec::new();
    let mut at: std::collections::HashMap<&str, usize> = Default::default();
    for (rank, notes) in ranks {
        for n in notes {
            let k = *at.entry(n.as_str()).or_insert_with(|| {
                out.push((n.as_str(), Vec::new()));
                out.len() - 1
            });
            out[k].1.push(rank);
        }
    }
    // A rank number said once, ascending (ranks of several jobs pooled, as a calibration's
    // ranks of one GPU are, had read `ranks 0, 0`).
    for (_, ranks) in &mut out {
        ranks.sort_unstable();
        ranks.dedup();
    }
    out
}

/// Ranks in words, runs joined: `rank 3`, `ranks 0, 2`, `ranks 0–1023`; past eight
/// runs the first eight and how many ranks in all.
pub fn rank_list(ranks: &[u32]) -> String {
    let runs = steps::number_runs(ranks.iter().map(|&r| i64::from(r)));
    match (ranks.len(), runs.len()) {
        (1, _) => format!("rank {}", runs.join("")),
        (_, n) if n > 8 => format!("ranks {}, … ({} ranks)", runs[..8].join(", "), ranks.len()),
        _ => format!("ranks {}", runs.join(", ")),
    }
}

#[cfg(test)]
#[test]
fn gpu_hours_keep_three_significant_figures() {
    assert_eq!(gpu_hours_text(6.7914), "6.79");
    assert_eq!(gpu_hours_text(136.28), "136");
    assert_eq!(gpu_hours_text(0.5), "0.500");
    // Below a thousandth of an hour it had printed 0.000.
    assert_eq!(gpu_hours_text(0.000_412_3), "0.000412");
    assert_eq!(gpu_hours_text(0.0), "0.000");
    // The rule itself: three figures at any size below 100 (a 12 M model had read 0.012 B).
    assert_eq!(three_figures(0.012_34), "0.0123");
    assert_eq!(three_figures(0.304), "0.304");
    assert_eq!(three_figures(41.23), "41.2");
    assert_eq!(three_figures(412.3), "412");
}

#[cfg(test)]
#[test]
fn rank_lists_join_runs_and_stop_at_eight() {
    assert_eq!(rank_list(&[3]), "rank 3");
    assert_eq!(rank_list(&[0, 2]), "ranks 0, 2");
    assert_eq!(rank_list(&(0..1024).collect::<Vec<_>>()), "ranks 0–1023");
    let every_other: Vec<u32> = (0..20).map(|r| 2 * r).collect();
    assert_eq!(rank_list(&every_other), "ranks 0, 2, 4, 6, 8, 10, 12, 14, … (20 ranks)");
}

/// The job's analysis from its ranks' summaries (any order; sorted by rank here).
pub fn reduce(path: String, partials: Vec<RankSummary>, bad_files: Vec<BadFile>, opts: &AnalyzeOptions) -> JobAnalysis {
    reduce_matched(path, partials, bad_files, opts).0
}

/// [`reduce`], and the job's collectives matched across its ranks (the
/// summaries' instances, moved), for the job's other results to read.
pub fn reduce_matched(
    path: String,
    mut partials: Vec<RankSummary>,
    bad_files: Vec<BadFile>,
    opts: &AnalyzeOptions,
) -> (JobAnalysis, JobCollectives) {
    partials.sort_by_key(|p| p.analysis.rank);
    let unread = u32::try_from(bad_files.iter().filter(|b| b.unread_rank).count()).unwrap_or(u32::MAX);
    let mut matched = JobCollectives::new(partials.iter_mut().map(RankSummary::take_collectives).collect::<Vec<_>>(), unread);
    matched.set_windows(partials.iter().map(|p| p.window).collect());
    let mut clock_alignment = matched.alignment().cloned();
    let mut stragglers = matched.stragglers();
    // Doubtful matching ties no clocks ([`JobCollectives::trusted_alignment`], its test done once here).
    let doubtful = matched.doubtful();
    if let Some(c) = &mut clock_alignment {
        c.doubtful = doubtful.clone();
    }
    // Ranks declaring different world sizes never get here: the job leaves out those of
    // another run (`job::JobWorld`).
    let unrelated =
        runs_apart(partials.iter().map(|p| p.window.map(|w| w.start_ns)), clock_alignment.as_ref().filter(|_| doubtful.is_none()));
    let mut ranks = Vec::with_capacity(partials.len());
    let mut sum = Breakdown::default();
    for (r, p) in partials.into_iter().enumerate() {
        let mut a = p.analysis;
        a.comm_by_dimension = p.comm_by_dimension;
        if let Some(w) = p.window {
            a.collectives = matched.stats(r, w);
        }
        a.clock_offset_us = clock_alignment.as_ref().and_then(|c| c.offsets_us.get(r).copied());
        if r == 0
            && let Some(why) = &unrelated
        {
            a.notes.push(format!("ranks of unrelated runs? {why}: analysed as one job (give the files with --each to analyse each alone)"));
        }
        if r == 0
            && let Some(why) = &doubtful
        {
            a.notes.push(why.clone());
        }
        sum.add(&a.breakdown);
        ranks.push(a);
    }
    let span = sum.gpu_span_us;
    let job_steps = job_steps(ranks.iter().flat_map(|r| r.steps.iter().map(|st| (r.rank, st.step, st.breakdown.gpu_span_us))));
    let mut dims: std::collections::BTreeMap<super::dimension::Dimension, (f64, f64)> = Default::default();
    for r in &ranks {
        for d in &r.comm_by_dimension {
            let e = dims.entry(d.dimension).or_default();
            super::breakdown::add_measured_us(&mut e.0, d.comm_us);
            super::breakdown::add_measured_us(&mut e.1, d.exposed_comm_us);
        }
    }
    let comm_by_dimension: Vec<DimensionTotal> = dims
        .into_iter()
        .map(|(dimension, (comm_us, exposed_comm_us))| DimensionTotal {
            dimension,
            comm_us,
            exposed_comm_us,
            exposed_gpu_hours: opts.job_gpus.zip(opts.job_hours).map(|(g, h)| fraction(exposed_comm_us, span) * g * h),
        })
        .collect();
    if let (Some(g), Some(h)) = (opts.job_gpus, opts.job_hours) {
        for st in &mut stragglers {
            st.wait_caused_gpu_hours = Some(fraction(st.wait_caused_us, span) * g * h);
        }
    }
    let analysis = JobAnalysis {
        stragglers,
        comm_by_dimension,
        path,
        world_size: matched.world(),
        totals: Totals::new(ranks.len(), sum, job_steps, opts.job_gpus.zip(opts.job_hours)),
        ranks,
        clock_alignment,
        bad_files,
    };
    (analysis, matched)
}

#[cfg(test)]
#[test]
fn a_note_names_each_rank_once_in_order() {
    // Ranks of two jobs pooled (a calibration's, per GPU) had read `ranks 0, 0`.
    let a = ["far start".to_string()];
    let notes = notes_in_words([(1, &a[..]), (0, &a[..]), (1, &a[..]), (0, &a[..])].into_iter());
    assert_eq!(notes, ["ranks 0–1: far start"]);
}
