//! `tracecast report` and `tracecast diff`: wiring of the plots crate's page
//! and the calibrate crate's run comparison.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use tracecast_calibrate::diff::{Delta, TraceDiff, diff_jobs};
use tracecast_ingest::Job;
use tracecast_ingest::analysis::{AnalyzeOptions, Classifier, JobAnalysis, analyze_job};
use tracecast_plots::report::{JobReport, Report, write_report};
use tracecast_replay::{JobReplay, ReplayOptions, Scale};

/// What a report shows beyond the measured job.
pub(crate) struct ReportPlan<'a> {
    pub(crate) classifier: &'a Classifier,
    pub(crate) catalog: &'a tracecast_calibrate::Catalog,
    pub(crate) analyze: &'a AnalyzeOptions,
    /// Replay options of the projection (target and/or speed-ups), with its label.
    pub(crate) projection: Option<(String, ReplayOptions)>,
    pub(crate) gpus_per_node: Option<u32>,
    /// Also write every chart as SVG and PNG here.
    pub(crate) png_dir: Option<std::path::PathBuf>,
}

/// Everything computed for one job.
struct Section {
    analysis: JobAnalysis,
    profile: Option<tracecast_calibrate::Profile>,
    replay: JobReplay,
    projection: Option<JobReplay>,
}

fn section(job: &Job, plan: &ReportPlan<'_>) -> Section {
    let mut analyze = plan.analyze.clone();
    analyze.gpus_per_node = i64::from(crate::node_gpus(job, plan.catalog, plan.gpus_per_node));
    let analysis = analyze_job(job, &analyze);
    let mut copts = tracecast_calibrate::CalibrateOptions::default();
    copts.classifier = plan.classifier.clone();
    copts.gpus_per_node = plan.gpus_per_node;
    let profile = tracecast_calibrate::calibrate(std::slice::from_ref(job), plan.catalog, &copts).into_iter().next();
    let mut base = ReplayOptions::default();
    base.classifier = plan.classifier.clone();
    let base = crate::replay_options_for(crate::job_gpu(&job.ranks, plan.catalog), &base, plan.catalog, plan.gpus_per_node);
    let replay = tracecast_replay::replay_job(job, &base);
    let projection = plan.projection.as_ref().map(|(_, p)| {
        let mut o = crate::replay_options_for(crate::job_gpu(&job.ranks, plan.catalog), p, plan.catalog, plan.gpus_per_node);
        o.classifier = plan.classifier.clone();
        tracecast_replay::replay_job(job, &o)
    });
    Section { analysis, profile, replay, projection }
}

/// Writes the report of `jobs` (the diff of the first two when there are two) to `out`.
pub(crate) fn write(jobs: &[Job], plan: &ReportPlan<'_>, out: &Path) -> Result<Vec<std::path::PathBuf>> {
    let sections: Vec<Section> = jobs.iter().map(|j| section(j, plan)).collect();
    let diff = match (jobs, sections.as_slice()) {
        ([a, b], [sa, sb]) => Some(diff_jobs((a, &sa.analysis), (b, &sb.analysis), plan.classifier, 25)),
        _ => None,
    };
    let label = plan.projection.as_ref().map(|p| p.0.as_str());
    let report = Report {
        jobs: jobs
            .iter()
            .zip(&sections)
            .map(|(job, s)| JobReport {
                job,
                analysis: &s.analysis,
                classifier: plan.classifier,
                profile: s.profile.as_ref(),
                replay: Some(&s.replay),
                projection: label.zip(s.projection.as_ref()),
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
    let classifier = args.inputs.read.classifier()?;
    let catalog = crate::catalog_with(&args.inputs.read.hw)?;
    let target = crate::target_model(args.target.as_ref(), args.profile.as_ref(), &catalog)?;
    let scale = args.scale.as_deref().map(crate::parse_scale).transpose()?.unwrap_or_default();
    let link = args.link.as_deref().map(crate::parse_link).transpose()?;
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
    let mut jobs = Vec::new();
    let failed = crate::for_each_job(&args.inputs, |job| jobs.push(job))?;
    anyhow::ensure!(!jobs.is_empty(), "no readable trace: nothing to report");
    let plan = ReportPlan {
        classifier: &classifier,
        catalog: &catalog,
        analyze: &analyze,
        projection,
        gpus_per_node: args.inputs.read.gpus_per_node,
        png_dir: args.png.clone(),
    };
    let charts = write(&jobs, &plan, &args.out)?;
    if !args.inputs.read.quiet {
        println!("wrote {}", args.out.display());
        for f in charts {
            println!("wrote {}", f.display());
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
    let mut jobs = Vec::new();
    let mut failed = false;
    for p in [&args.a, &args.b] {
        failed |= crate::for_each_job_in(std::slice::from_ref(p), false, &args.read, |job| jobs.push(job))?;
    }
    let [a, b] = jobs.as_slice() else { anyhow::bail!("diff needs two readable runs (see the errors above)") };
    let catalog = crate::catalog_with(&args.read.hw)?;
    let analyze_run = |job: &Job| {
        let mut o = analyze.clone();
        o.gpus_per_node = i64::from(crate::node_gpus(job, &catalog, args.read.gpus_per_node));
        analyze_job(job, &o)
    };
    let (aa, ba) = (analyze_run(a), analyze_run(b));
    let d = tracecast_calibrate::diff::diff_jobs((a, &aa), (b, &ba), &classifier, args.top);
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
