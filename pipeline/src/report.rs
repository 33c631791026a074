//! `tracecast report`: one self-contained HTML page per run (the diff of two
//! jobs when there are two): the analysis, the profile, the replay and a
//! projection, every product of a rank built from its one context.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use tracecast_calibrate::diff::{ClassTimes, DiffSide, diff_sides};
use tracecast_calibrate::timeline::{FirstRanks, step_kernels};
use tracecast_calibrate::work::{OpRow, kernel_work_of, merge_op_rows, op_rows_of_rank};
use tracecast_ingest::Job;
use tracecast_ingest::analysis::{self, AnalyzeOptions, JobAnalysis, RankContext};
use tracecast_plots::report::{JobPart, JobReport, Report, draw_measured, write_report};
use tracecast_replay::ReplayOptions;

use crate::Outcome;
use crate::hardware::{catalog_with, rank_analysis, replay_options_for};
use crate::inputs::{Inputs, JobInput, TraceOptions, WindowOptions, for_each_input};
use crate::replay::WhatIf;

/// What `report` reads, what its page shows beyond the measured job, and where it goes.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// The traces.
    pub inputs: Inputs,
    /// The analysed window; the replay sections honour it too.
    pub window: WindowOptions,
    /// The HTML file to write (default: empty, refused).
    pub out: PathBuf,
    /// The what-if the page shows beside the measured run, as `replay`'s (default: none).
    pub what_if: WhatIf,
    /// GPUs of the whole job, to state its GPU-hours (with `job_hours`) (default: none).
    pub job_gpus: Option<f64>,
    /// Wall-clock hours of the whole job (with `job_gpus`) (default: none).
    pub job_hours: Option<f64>,
    /// Also write every chart as SVG and PNG into this directory (default: none).
    pub png: Option<PathBuf>,
}

/// What a report shows beyond the measured job.
pub(crate) struct Plan<'a> {
    pub(crate) catalog: &'a tracecast_calibrate::Catalog,
    pub(crate) analyze: &'a AnalyzeOptions,
    /// Replay options of the projection (target and/or speed-ups), with its label.
    pub(crate) projection: Option<(String, ReplayOptions)>,
    pub(crate) gpus_per_node: Option<u32>,
    /// Also write every chart as SVG and PNG here.
    pub(crate) png_dir: Option<PathBuf>,
}

impl Plan<'_> {
    /// Whether the page calibrates the job for the projection's source device (made once at
    /// the reduce; the ranks keep no samples for it): with a `--source-profile` too, which
    /// does not apply to a job of another GPU (the projection had been the measured run then).
    fn calibrates_source(&self) -> bool {
        self.projection.as_ref().is_some_and(|(_, p)| p.target.is_some())
    }
}

/// One job of the page: its section, drawn (what was measured before the
/// replay ran, its results gone by then), and what a diff with another job reads of it.
pub(crate) struct Section {
    part: JobPart,
    diff: DiffSide,
}

/// Jobs given none of whose ranks could be read or analysed: each one's path and the first reason.
pub(crate) type UnreadJobs = Vec<(String, String)>;

/// What one rank gives the report, built from its context while its trace is in memory.
struct RankPart<'c> {
    summary: analysis::RankSummary,
    samples: tracecast_calibrate::profile::RankSamples<'c>,
    replay: tracecast_replay::RankPart<'c>,
    projection: Option<tracecast_replay::RankPart<'c>>,
    ops: Vec<OpRow>,
    class_times: ClassTimes,
}

/// The report's sections of the jobs `paths` stand for, each read one rank
/// at a time (a rank's trace is dropped once its part is built; the timeline
/// keeps the first ranks' kernels only); `show_analysis` sees each job's
/// analysis before it is dropped, ahead of the job's drawing and replay
/// (`demo` prints it). Returns whether any file was bad.
pub(crate) fn sections(
    paths: &[PathBuf],
    each: bool,
    read: &TraceOptions,
    plan: &Plan<'_>,
    show_analysis: &mut dyn FnMut(&JobAnalysis) -> Result<()>,
) -> Result<(Vec<Section>, UnreadJobs, bool)> {
    let read_opts = read.read_options(plan.catalog)?;
    // The page's window is the replays' too: their step times cover the analysed steps.
    // What the analysis says of each rank the page says once, with the analysis.
    let mut base = ReplayOptions::default();
    (base.window, base.rank_notes) = (plan.analyze.clone(), false);
    let projection = plan.projection.as_ref().map(|(_, p)| {
        let mut o = p.clone();
        (o.window, o.rank_notes) = (plan.analyze.clone(), false);
        o
    });
    let mut copts = tracecast_calibrate::CalibrateOptions::default();
    copts.classifier = plan.analyze.classifier.clone();
    copts.gpus_per_node = plan.gpus_per_node;
    let mut out = Vec::new();
    let job_of = |input: &mut JobInput<'_>| {
        let first = FirstRanks::default();
        let job_ranks = Job::ranks_in(&input.files);
        let part = |rank: &tracecast_ingest::job::Rank| {
            // Every product of the rank from one context: each fact computed once.
            let ctx = RankContext::new(rank, &plan.analyze.classifier);
            let (analyze, world) = rank_analysis(&ctx, job_ranks, plan.analyze, plan.catalog, plan.gpus_per_node)?;
            let work = kernel_work_of(&ctx);
            let summary = analysis::summarize(&ctx, world, &analyze);
            // The analysed window, empty where nothing was analysed (not the whole trace `None` stands for).
            first.offer(&ctx, &work, Some(summary.tables_window()));
            // The per-class times of the analysed window, as the analysis (`--window`, `--steps`).
            let class_times = ClassTimes::of_rank(&rank.trace, ctx.classes(), &work, Some(summary.tables_window()));
            let ops = op_rows_of_rank(&rank.trace, &work, Some(summary.tables_window()));
            let samples = tracecast_calibrate::profile::rank_samples(&ctx, &work, plan.catalog);
            let replay = tracecast_replay::RankPart::of(&ctx, &base, plan.catalog, Some(&work));
            // The projection's source is the page's own calibration (the reduce sets it): no rank keeps a copy of its samples.
            let projection = projection.as_ref().map(|o| replay.retarget(&ctx, o, plan.catalog, Some(&work)));
            Ok(RankPart { summary, samples, replay, projection, ops, class_times })
        };
        let (parts, failures) = input.summarize(&read_opts, &part);
        if parts.is_empty() {
            return (None, failures);
        }
        let bad = failures.iter().map(analysis::BadFile::of).collect();
        (Some(reduce(input.path.clone(), parts, first, bad, plan, &base, projection.as_ref(), &copts, &mut *show_analysis)), failures)
    };
    let reads = for_each_input(paths, each, read, job_of, |s, _| out.push(s))?;
    let jobs = out.into_iter().collect::<Result<Vec<_>>>()?;
    // Jobs none of whose ranks could be read, with the first reason: the page names them.
    let unread = reads.unread_jobs.into_iter().map(|u| (u.path, u.error)).collect();
    Ok((jobs, unread, reads.failed))
}

/// The job's section from its ranks' parts: what was measured is drawn (and
/// its diff side kept) before the replay, and dropped, so that the replay's
/// graph does not sit on top of them; then the replays are drawn below it.
#[allow(clippy::too_many_arguments)]
fn reduce(
    path: PathBuf,
    parts: Vec<RankPart<'_>>,
    first: FirstRanks,
    bad: Vec<analysis::BadFile>,
    plan: &Plan<'_>,
    base: &ReplayOptions,
    projection: Option<&ReplayOptions>,
    copts: &tracecast_calibrate::CalibrateOptions,
    show_analysis: &mut dyn FnMut(&JobAnalysis) -> Result<()>,
) -> Result<Section> {
    let name = path.display().to_string();
    let mut summaries = Vec::with_capacity(parts.len());
    let mut samples = Vec::with_capacity(parts.len());
    let mut replay_parts = Vec::with_capacity(parts.len());
    let mut projection_parts = Vec::new();
    let mut ops = Vec::with_capacity(parts.len());
    let mut class_times = ClassTimes::default();
    for p in parts {
        summaries.push(p.summary);
        samples.push(p.samples);
        replay_parts.push(p.replay);
        projection_parts.extend(p.projection);
        ops.push(p.ops);
        class_times.add(p.class_times);
    }
    // One matching of the job's collectives, read by the analysis, the calibration, the replays and the tables.
    let (analysis, collectives) = analysis::reduce_matched(name.clone(), summaries, bad, plan.analyze);
    let profile = tracecast_calibrate::profile::calibrate_summaries(vec![(samples, &collectives)], plan.catalog, copts).into_iter().next();
    // The summaries and calibration samples are gone: their memory goes back
    // before the page is drawn.
    tracecast_ingest::memory::release_for_replay();
    show_analysis(&analysis)?;
    let mut part = {
        // The page's samples made afresh (`samples()` would keep them in the
        // matching, which the replay reads), inside each rank's analysed window
        // (`--window`, `--steps`) as the collectives table counts them.
        let samples = collectives.samples_in_windows();
        let (timeline, message_sizes, ops) =
            (step_kernels(&first.into_ranks()), analysis::message_size_rows_of(&samples), merge_op_rows(ops));
        let collectives_over_ranks = analysis.collectives_over_ranks();
        let job = JobReport {
            analysis: &analysis,
            collectives_over_ranks: &collectives_over_ranks,
            profile: profile.as_ref(),
            timeline: timeline.as_ref(),
            collectives: &samples,
            message_sizes: &message_sizes,
            ops: &ops,
        };
        draw_measured(&job, plan.png_dir.as_deref())?
    };
    // What the rest needs of the measured job: the projection's source
    // (the page's own calibration) and what a diff reads.
    let source = plan.calibrates_source().then(|| tracecast_calibrate::DeviceModel::from_own_calibration(profile, plan.catalog));
    let diff = DiffSide::of(&class_times, &analysis);
    drop(analysis);
    // And what was drawn goes back before the replay builds its graph.
    tracecast_ingest::memory::release_for_replay();
    let gpu = replay_parts.iter().find_map(|p| p.gpu_id()).and_then(|id| plan.catalog.gpu(id).ok());
    let opts = replay_options_for(gpu, base, plan.catalog, plan.gpus_per_node);
    // The last replay of the job takes the matching, and frees it before its simulation.
    let (replay, projection) = match projection {
        None => (tracecast_replay::replay_parts(name, replay_parts, collectives, &opts, plan.catalog).report, None),
        Some(p) => {
            let replay = tracecast_replay::replay_parts(name.clone(), replay_parts, &collectives, &opts, plan.catalog).report;
            let mut o = replay_options_for(gpu, p, plan.catalog, plan.gpus_per_node);
            // `--source-profile` where it applies to the job (the replay's one rule, said where
            // not), else the page's own calibration, as the replay would make it: not said as a
            // profile given (the page had carried `--source-profile` notes nobody asked for).
            o.own_calibration = source;
            let projection = tracecast_replay::replay_parts(name, projection_parts, collectives, &o, plan.catalog).report;
            (replay, Some(projection))
        }
    };
    let label = plan.projection.as_ref().map(|p| p.0.as_str());
    part.draw_replays(&replay, label.zip(projection.as_ref()))?;
    Ok(Section { part, diff })
}

/// Writes the report of the sections (the diff first when there is one) to `out`.
pub(crate) fn write(sections: Vec<Section>, unread_jobs: UnreadJobs, plan: &Plan<'_>, out: &Path) -> Result<Vec<PathBuf>> {
    let diff = match sections.as_slice() {
        [a, b] => Some(diff_sides(&a.diff, &b.diff, 25)),
        _ => None,
    };
    let report = Report {
        jobs: sections.into_iter().map(|s| s.part).collect(),
        diff: diff.as_ref(),
        unread_jobs,
        generator: format!("Made by tracecast {} from the traces named above.", env!("CARGO_PKG_VERSION")),
        png_dir: plan.png_dir.clone(),
    };
    Ok(write_report(report, out)?)
}

/// Writes the page of every job the inputs stand for.
pub fn run(args: &Options, out: &mut dyn Write) -> Result<Outcome> {
    crate::output::distinct_outputs(&[("--out", Some(&args.out)), ("--png", args.png.as_deref())], &args.inputs.paths)?;
    crate::output::folder_outputs(&[("--png", args.png.as_deref())], &args.inputs.paths)?;
    let read = &args.inputs.read;
    let catalog = catalog_with(&read.hw)?;
    let projection = args.what_if.replay_options(&catalog)?;
    let projection = args.what_if.changes_anything(projection.scale).then(|| (args.what_if.label(projection.scale), projection));
    let mut analyze = args.window.analyze_options(read)?;
    (analyze.job_gpus, analyze.job_hours) = crate::inputs::job_size(args.job_gpus, args.job_hours)?;
    let plan = Plan { catalog: &catalog, analyze: &analyze, projection, gpus_per_node: read.gpus_per_node, png_dir: args.png.clone() };
    let (sections, unread, failed) = sections(&args.inputs.paths, args.inputs.each, read, &plan, &mut |_| Ok(()))?;
    anyhow::ensure!(!sections.is_empty(), "no readable trace: nothing to report");
    let charts = write(sections, unread, &plan, &args.out)?;
    if !read.quiet {
        if let Some(words) = args.what_if.measurements_unused(&[]) {
            writeln!(out, "note: {words}")?;
        }
        writeln!(out, "wrote {}", args.out.display())?;
        for f in charts {
            writeln!(out, "wrote {}", f.display())?;
        }
    }
    Ok(Outcome::bad_files_if(failed))
}
