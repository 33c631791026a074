//! `tracecast report` and `tracecast diff`: wiring of the plots crate's page
//! and the calibrate crate's run comparison.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use std::path::PathBuf;

use tracecast_calibrate::diff::{ClassTimes, Delta, TraceDiff, diff_jobs};
use tracecast_calibrate::timeline::{FirstRanks, StepKernels, step_kernels};
use tracecast_calibrate::work::{OpRow, kernel_work_of, merge_op_rows, op_rows_of_rank};
use tracecast_ingest::Job;
use tracecast_ingest::analysis::{self, AnalyzeOptions, CollectiveSample, JobAnalysis, MessageSizeRow, RankContext};
use tracecast_plots::report::{JobReport, Report, write_report};
use tracecast_replay::{JobReplay, ReplayOptions, Scale};

/// What a report shows beyond the measured job.
pub(crate) struct ReportPlan<'a> {
    pub(crate) catalog: &'a tracecast_calibrate::Catalog,
    pub(crate) analyze: &'a AnalyzeOptions,
    /// Replay options of the projection (target and/or speed-ups), with its label.
    pub(crate) projection: Option<(String, ReplayOptions)>,
    pub(crate) gpus_per_node: Option<u32>,
    /// Also write every chart as SVG and PNG here.
    pub(crate) png_dir: Option<std::path::PathBuf>,
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
pub(crate) fn sections(paths: &[PathBuf], each: bool, read: &crate::ReadArgs, plan: &ReportPlan<'_>) -> Result<(Vec<Section>, bool)> {
    let read_opts = read.read_options()?;
    let mut base = ReplayOptions::default();
    base.classifier = plan.analyze.classifier.clone();
    let projection = plan.projection.as_ref().map(|(_, p)| {
        let mut o = p.clone();
        o.classifier = plan.analyze.classifier.clone();
        o
    });
    let mut copts = tracecast_calibrate::CalibrateOptions::default();
    copts.classifier = plan.analyze.classifier.clone();
    copts.gpus_per_node = plan.gpus_per_node;
    let mut out = Vec::new();
    let job_of = |path: PathBuf, files: &[PathBuf], on_file: &(dyn Fn(&Path) + Sync)| {
        let first = FirstRanks::default();
        let part = |rank: &tracecast_ingest::job::Rank| {
            analysis::check_step_range(&rank.trace, plan.analyze.steps, plan.analyze.drop_last_step)?;
            let world = crate::world_of_rank(rank.trace.declared_world_size(), files);
            let mut analyze = plan.analyze.clone();
            analyze.gpus_per_node = i64::from(crate::node_gpus_of(std::slice::from_ref(rank), plan.catalog, plan.gpus_per_node));
            // Every product of the rank from one context: each fact computed once.
            let ctx = RankContext::new(rank, &plan.analyze.classifier);
            let work = kernel_work_of(&ctx);
            first.offer(&ctx, &work);
            let summary = analysis::summarize(&ctx, world, &analyze);
            // The per-class times of the analysed window, as the analysis (`--window`, `--steps`).
            let class_times = ClassTimes::of_rank(&rank.trace, ctx.classes(), &work, summary.window());
            let samples = tracecast_calibrate::profile::rank_samples(&ctx, &work, plan.catalog);
            let replay = tracecast_replay::RankPart::of(&ctx, &base, plan.catalog, Some(&work), None);
            let projection = projection.as_ref().map(|o| {
                // The calibration samples made above serve the projection's source device too.
                let source = o.target.is_some().then(|| samples.clone());
                replay.retarget(&ctx, o, plan.catalog, Some(&work), source)
            });
            Ok(RankPart { summary, samples, replay, projection, ops: op_rows_of_rank(&rank.trace, &work), class_times })
        };
        let (parts, failures) = Job::try_summarize_or(files, &read_opts, on_file, &|_| None, &part);
        if parts.is_empty() {
            return (None, failures);
        }
        let bad = failures.iter().map(analysis::BadFile::of).collect();
        (Some(reduce(path, parts, first, bad, plan, &base, projection.as_ref(), &copts)), failures)
    };
    let failed = crate::for_each_input(paths, each, read, job_of, |s, _| out.push(s))?;
    Ok((out, failed))
}

/// The job-level results from its ranks' parts.
#[allow(clippy::too_many_arguments)]
fn reduce(
    path: PathBuf,
    parts: Vec<RankPart<'_>>,
    first: FirstRanks,
    bad: Vec<analysis::BadFile>,
    plan: &ReportPlan<'_>,
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
    // before the replay builds its graph (1024 ranks: 1.32 → 1.13 GB peak).
    release_freed_memory();
    let gpu = replay_parts.iter().find_map(|p| p.gpu_id()).and_then(|id| plan.catalog.gpu(id).ok());
    let opts = crate::replay_options_for(gpu, base, plan.catalog, plan.gpus_per_node);
    let replay = tracecast_replay::replay_parts(name.clone(), replay_parts, &collectives, &opts, plan.catalog).report;
    let projection = projection.map(|p| {
        let o = crate::replay_options_for(gpu, p, plan.catalog, plan.gpus_per_node);
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

/// Hands the memory freed so far back to the system. glibc keeps what the
/// rank threads freed in their arenas, where the main thread's replay graph
/// cannot reuse it.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it only returns free pages of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Writes the report of the sections (the diff of the first two when there are two) to `out`.
pub(crate) fn write(sections: &[Section], plan: &ReportPlan<'_>, out: &Path) -> Result<Vec<std::path::PathBuf>> {
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

/// A label for a projection: the target and the speed-ups.
pub(crate) fn projection_label(target: Option<&str>, scale: Scale) -> String {
    let mut parts = Vec::new();
    if let Some(t) = target {
        parts.push(t.to_string());
    }
    for (k, v) in [("compute", scale.compute), ("memory", scale.memory), ("link", scale.link)] {
        if v != 1.0 {
            parts.push(format!("{k} ×{v}"));
        }
    }
    parts.join(", ")
}

fn write_rows(out: &mut impl Write, title: &str, rows: &[Delta], limit: usize) -> std::io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n{title}")?;
    writeln!(out, "  {:<44} {:>9} {:>9} {:>12} {:>12} {:>11} {:>8}", "", "count A", "count B", "A ms", "B ms", "Δ ms", "Δ %")?;
    for d in rows.iter().take(limit) {
        let mut name = d.name.clone();
        if name.chars().count() > 44 {
            name = name.chars().take(43).collect::<String>() + "…";
        }
        writeln!(
            out,
            "  {name:<44} {:>9.0} {:>9.0} {:>12.3} {:>12.3} {:>+11.3} {:>8}",
            d.count_a,
            d.count_b,
            d.time_a_us / 1000.0,
            d.time_b_us / 1000.0,
            d.delta_us / 1000.0,
            d.change_text()
        )?;
    }
    Ok(())
}

/// The terminal form of a diff.
pub(crate) fn print_diff(out: &mut impl Write, d: &TraceDiff) -> std::io::Result<()> {
    writeln!(out, "A: {} ({} rank(s))\nB: {} ({} rank(s))", d.a, d.ranks[0], d.b, d.ranks[1])?;
    writeln!(out, "Times are per rank; step times are the mean over ranks, steps matched in order.")?;
    let headline: Vec<String> = d.summary.iter().take(4).map(|r| format!("{} {} %", r.name, r.change_text())).collect();
    writeln!(out, "Headline (B against A): {}", headline.join(", "))?;
    if let Some(k) = d.kernel_classes.first() {
        writeln!(out, "Moved most: {} ({:+.3} ms per rank)", k.name, k.delta_us / 1000.0)?;
    }
    write_rows(out, "Summary", &d.summary, 10)?;
    write_rows(out, "Per kernel class", &d.kernel_classes, 20)?;
    write_rows(out, "Per collective", &d.collectives, 20)?;
    write_rows(out, "Per step", &d.steps, 20)?;
    write_rows(out, "Kernels that moved most", &d.kernels, 15)
}

/// Writes the diff as JSON.
pub(crate) fn write_diff_json(path: &Path, d: &TraceDiff) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(d)?;
    bytes.push(b'\n');
    tracecast_ingest::output::write_atomic(path, &bytes)?;
    Ok(())
}

pub(crate) fn run_report(args: crate::ReportArgs) -> Result<ExitCode> {
    let catalog = crate::catalog_with(&args.inputs.read.hw)?;
    let target = crate::target_model(args.target.as_ref(), args.profile.as_ref(), &catalog)?;
    let scale = args.scale.as_deref().map(str::parse::<tracecast_replay::Scale>).transpose()?.unwrap_or_default();
    let link = args.link.as_deref().map(str::parse::<tracecast_replay::LinkOverride>).transpose()?;
    let what_if = target.is_some() || scale != tracecast_replay::Scale::default() || link.is_some() || args.world_size.is_some();
    let projection = what_if.then(|| {
        let mut o = tracecast_replay::ReplayOptions::default();
        o.scale = scale;
        o.target = target.clone();
        o.link = link;
        o.world_size = args.world_size;
        let mut label = projection_label(args.target.as_deref(), scale);
        for extra in [args.world_size.map(|n| format!("{n} ranks")), args.link.clone().map(|l| format!("link {l}"))].into_iter().flatten() {
            if !label.is_empty() {
                label.push_str(", ");
            }
            label.push_str(&extra);
        }
        (label, o)
    });
    let mut analyze = args.window.analyze_options(&args.inputs.read)?;
    analyze.job_gpus = args.job_gpus;
    analyze.job_hours = args.job_hours;
    let plan = ReportPlan {
        catalog: &catalog,
        analyze: &analyze,
        projection,
        gpus_per_node: args.inputs.read.gpus_per_node,
        png_dir: args.png.clone(),
    };
    let (sections, failed) = sections(&args.inputs.paths, args.inputs.each, &args.inputs.read, &plan)?;
    anyhow::ensure!(!sections.is_empty(), "no readable trace: nothing to report");
    let charts = write(&sections, &plan, &args.out)?;
    if !args.inputs.read.quiet {
        outln!("wrote {}", args.out.display())?;
        for f in charts {
            outln!("wrote {}", f.display())?;
        }
    }
    Ok(if failed { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

pub(crate) fn run_diff(args: crate::DiffArgs) -> Result<ExitCode> {
    let analyze = args.window.analyze_options(&args.read)?;
    let classifier = analyze.classifier.clone();
    if let Some(spec) = &args.fail_if {
        tracecast_calibrate::diff::parse_gates(spec).map_err(|e| anyhow::anyhow!("--fail-if: {e}"))?;
    }
    let catalog = crate::catalog_with(&args.read.hw)?;
    let read_opts = args.read.read_options()?;
    // One rank at a time, as `analyze`: each trace gives its summary and its kernel-class times.
    let mut runs = Vec::new();
    let mut failed = false;
    for p in [&args.a, &args.b] {
        let read = |path: PathBuf, files: &[PathBuf], on_file: &(dyn Fn(&Path) + Sync)| {
            let part = |rank: &tracecast_ingest::job::Rank| {
                analysis::check_step_range(&rank.trace, analyze.steps, analyze.drop_last_step)?;
                let mut o = analyze.clone();
                o.gpus_per_node = i64::from(crate::node_gpus_of(std::slice::from_ref(rank), &catalog, args.read.gpus_per_node));
                let world = crate::world_of_rank(rank.trace.declared_world_size(), files);
                let ctx = RankContext::new(rank, &classifier);
                let work = kernel_work_of(&ctx);
                let summary = analysis::summarize(&ctx, world, &o);
                // The per-class times of the analysed window (`--window`, `--steps`), as every other table.
                let times = ClassTimes::of_rank(&rank.trace, ctx.classes(), &work, summary.window());
                Ok((summary, times))
            };
            let (parts, failures) = Job::try_summarize_or(files, &read_opts, on_file, &|_| None, &part);
            if parts.is_empty() {
                return (None, failures);
            }
            let mut times = ClassTimes::default();
            let mut summaries = Vec::with_capacity(parts.len());
            for (s, t) in parts {
                summaries.push(s);
                times.add(t);
            }
            let bad = failures.iter().map(analysis::BadFile::of).collect();
            (Some((analysis::reduce(path.display().to_string(), summaries, bad, &analyze), times)), failures)
        };
        failed |= crate::for_each_input(std::slice::from_ref(p), false, &args.read, read, |run, _| runs.push(run))?;
    }
    let [(aa, at), (ba, bt)] = runs.as_slice() else { anyhow::bail!("diff needs two readable runs (see the errors above)") };
    let d = tracecast_calibrate::diff::diff_jobs((at, aa), (bt, ba), args.top);
    if !args.read.quiet {
        print_diff(&mut std::io::stdout().lock(), &d)?;
    }
    if let Some(path) = &args.json {
        write_diff_json(path, &d)?;
    }
    if let Some(spec) = &args.fail_if {
        let gates = tracecast_calibrate::diff::parse_gates(spec).map_err(|e| anyhow::anyhow!("--fail-if: {e}"))?;
        let failed_gates = tracecast_calibrate::diff::failed_gates(&d, &gates);
        for f in &failed_gates {
            eprintln!("regression: {f}");
        }
        if !failed_gates.is_empty() {
            return Ok(ExitCode::from(1));
        }
    }
    Ok(if failed { ExitCode::from(2) } else { ExitCode::SUCCESS })
}
