//! `tracecast report`: one self-contained HTML page per run (the diff of two
//! jobs when there are two): the analysis, the profile, the replay and a
//! projection, every product of a rank built from its one context.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use tracecast_calibrate::diff::{ClassTimes, diff_jobs};
use tracecast_calibrate::timeline::{FirstRanks, StepKernels, step_kernels};
use tracecast_calibrate::work::{OpRow, kernel_work_of, merge_op_rows, op_rows_of_rank};
use tracecast_ingest::Job;
use tracecast_ingest::analysis::{self, AnalyzeOptions, CollectiveSample, JobAnalysis, MessageSizeRow, RankContext};
use tracecast_plots::report::{JobReport, Report, write_report};
use tracecast_replay::{JobReplay, ReplayOptions};

use crate::Outcome;
use crate::hardware::{catalog_with, rank_analysis, replay_options_for};
use crate::inputs::{Inputs, TraceOptions, WindowOptions, for_each_input};
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
    /// Whether the projection's source device is the page's own calibration
    /// of the job (made once at the reduce; the ranks keep no samples for it).
    fn calibrates_source(&self) -> bool {
        self.projection.as_ref().is_some_and(|(_, p)| p.target.is_some() && p.source.is_none())
    }
}

/// Everything computed for one job: the results the page draws.
pub(crate) struct Section {
    analysis: JobAnalysis,
    profile: Option<tracecast_calibrate::Profile>,
    replay: JobReplay,
    projection: Option<JobReplay>,
    timeline: Option<(StepKernels, String)>,
    collectives: Vec<CollectiveSample>,
    message_sizes: Vec<MessageSizeRow>,
    ops: Vec<OpRow>,
    class_times: ClassTimes,
}

impl Section {
    /// The job's analysis.
    pub(crate) fn analysis(&self) -> &JobAnalysis {
        &self.analysis
    }
}

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
/// keeps the first ranks' kernels only). Returns whether any file was bad.
pub(crate) fn sections(paths: &[PathBuf], each: bool, read: &TraceOptions, plan: &Plan<'_>) -> Result<(Vec<Section>, bool)> {
    let read_opts = read.read_options()?;
    let mut base = ReplayOptions::default();
    base.classifier = plan.analyze.classifier.clone();
    let projection = plan.projection.as_ref().map(|(_, p)| {
        let mut o = p.clone();
        o.classifier = plan.analyze.classifier.clone();
        // A source is set, so no rank keeps a copy of its samples; the reduce
        // puts the page's calibration in its place.
        if plan.calibrates_source() {
            o.source = Some(tracecast_replay::replay::source_model(None, plan.catalog));
        }
        o
    });
    let mut copts = tracecast_calibrate::CalibrateOptions::default();
    copts.classifier = plan.analyze.classifier.clone();
    copts.gpus_per_node = plan.gpus_per_node;
    let mut out = Vec::new();
    let job_of = |path: PathBuf, files: &[PathBuf], on_file: &(dyn Fn(&Path) + Sync)| {
        let first = FirstRanks::default();
        let part = |rank: &tracecast_ingest::job::Rank| {
            let (analyze, world) = rank_analysis(rank, files, plan.analyze, plan.catalog, plan.gpus_per_node)?;
            // Every product of the rank from one context: each fact computed once.
            let ctx = RankContext::new(rank, &plan.analyze.classifier);
            let work = kernel_work_of(&ctx);
            first.offer(&ctx, &work);
            let summary = analysis::summarize(&ctx, world, &analyze);
            // The per-class times of the analysed window, as the analysis (`--window`, `--steps`).
            let class_times = ClassTimes::of_rank(&rank.trace, ctx.classes(), &work, summary.window());
            let samples = tracecast_calibrate::profile::rank_samples(&ctx, &work, plan.catalog);
            let replay = tracecast_replay::RankPart::of(&ctx, &base, plan.catalog, Some(&work));
            let projection = projection.as_ref().map(|o| replay.retarget(&ctx, o, plan.catalog, Some(&work)));
            Ok(RankPart { summary, samples, replay, projection, ops: op_rows_of_rank(&rank.trace, &work), class_times })
        };
        let (parts, failures) = Job::try_summarize_or(files, &read_opts, on_file, &|_| None, &part);
        if parts.is_empty() {
            return (None, failures);
        }
        let bad = failures.iter().map(analysis::BadFile::of).collect();
        (Some(reduce(path, parts, first, bad, plan, &base, projection.as_ref(), &copts)), failures)
    };
    let failed = for_each_input(paths, each, read, job_of, |s, _| out.push(s))?;
    Ok((out, failed))
}

/// The job-level results from its ranks' parts.
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
) -> Section {
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
    let timeline = step_kernels(&first.into_ranks());
    let profile = tracecast_calibrate::profile::calibrate_summaries(vec![(samples, &collectives)], plan.catalog, copts).into_iter().next();
    // The summaries and calibration samples are gone: their memory goes back
    // before the replay builds its graph.
    tracecast_replay::release_freed_memory();
    let gpu = replay_parts.iter().find_map(|p| p.gpu_id()).and_then(|id| plan.catalog.gpu(id).ok());
    let opts = replay_options_for(gpu, base, plan.catalog, plan.gpus_per_node);
    let replay = tracecast_replay::replay_parts(name.clone(), replay_parts, &collectives, &opts, plan.catalog).report;
    let projection = projection.map(|p| {
        let mut o = replay_options_for(gpu, p, plan.catalog, plan.gpus_per_node);
        if plan.calibrates_source() {
            o.source = Some(tracecast_replay::replay::source_model(profile.clone(), plan.catalog));
        }
        tracecast_replay::replay_parts(name.clone(), projection_parts, &collectives, &o, plan.catalog).report
    });
    let collectives = collectives.into_samples();
    Section {
        analysis,
        profile,
        replay,
        projection,
        timeline,
        message_sizes: analysis::message_size_rows_of(&collectives),
        collectives,
        ops: merge_op_rows(ops),
        class_times,
    }
}

/// Writes the report of the sections (the diff of the first two when there are two) to `out`.
pub(crate) fn write(sections: &[Section], plan: &Plan<'_>, out: &Path) -> Result<Vec<PathBuf>> {
    let diff = match sections {
        [sa, sb] => Some(diff_jobs((&sa.class_times, &sa.analysis), (&sb.class_times, &sb.analysis), 25)),
        _ => None,
    };
    let label = plan.projection.as_ref().map(|p| p.0.as_str());
    let report = Report {
        jobs: sections
            .iter()
            .map(|s| JobReport {
                analysis: &s.analysis,
                profile: s.profile.as_ref(),
                replay: Some(&s.replay),
                projection: label.zip(s.projection.as_ref()),
                timeline: s.timeline.as_ref(),
                collectives: &s.collectives,
                message_sizes: &s.message_sizes,
                ops: &s.ops,
            })
            .collect(),
        diff: diff.as_ref(),
        generator: format!("Made by tracecast {} from the traces named above.", env!("CARGO_PKG_VERSION")),
        png_dir: plan.png_dir.clone(),
    };
    Ok(write_report(&report, out)?)
}

/// Writes the page of every job the inputs stand for.
pub fn run(args: &Options, out: &mut dyn Write) -> Result<Outcome> {
    let read = &args.inputs.read;
    let catalog = catalog_with(&read.hw)?;
    let projection = args.what_if.replay_options(&catalog)?;
    let projection = args.what_if.changes_anything(projection.scale).then(|| (args.what_if.label(projection.scale), projection));
    let mut analyze = args.window.analyze_options(read)?;
    (analyze.job_gpus, analyze.job_hours) = (args.job_gpus, args.job_hours);
    let plan = Plan { catalog: &catalog, analyze: &analyze, projection, gpus_per_node: read.gpus_per_node, png_dir: args.png.clone() };
    let (sections, failed) = sections(&args.inputs.paths, args.inputs.each, read, &plan)?;
    anyhow::ensure!(!sections.is_empty(), "no readable trace: nothing to report");
    let charts = write(&sections, &plan, &args.out)?;
    if !read.quiet {
        writeln!(out, "wrote {}", args.out.display())?;
        for f in charts {
            writeln!(out, "wrote {}", f.display())?;
        }
    }
    Ok(Outcome::bad_files_if(failed))
}
