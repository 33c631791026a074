//! The `tracecast` command line: argument parsing and wiring only.

/// `println!` that hands back the write's error instead of panicking on it:
/// every line the binary prints on stdout goes through this or a `writeln!`
/// on a locked stdout, with `?`, so a closed pipe (`tracecast demo | head -1`)
/// ends the command through `main`, which exits 0 on a broken pipe.
macro_rules! outln {
    ($($arg:tt)*) => {
        writeln!(std::io::stdout().lock(), $($arg)*)
    };
}

mod cli;
mod report;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use cli::{AnalyzeArgs, Cli, Command, DiffArgs, Inputs, ReadArgs, ReplayArgs, ReportArgs};
use tracecast_ingest::analysis::{self, JobAnalysis};
use tracecast_ingest::{Job, output};
use tracecast_pipeline::demo::Page;
use tracecast_pipeline::hardware::{
    catalog_with, job_gpu, node_gpus_for, node_gpus_of, pricing_with, replay_options_for, target_model, world_of_rank,
};
use tracecast_pipeline::output::per_device;
use tracecast_pipeline::{Outcome, calibrate, demo, export, hw, ingest, project, search, summary, synth, validate};

/// The exit status of a command's outcome.
fn exit_code(outcome: Outcome) -> ExitCode {
    match outcome {
        Outcome::Done => ExitCode::SUCCESS,
        Outcome::NoPlan => ExitCode::from(1),
        Outcome::BadFiles => ExitCode::from(2),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut out = std::io::stdout();
    let result = match cli.command {
        Command::Analyze(args) => analyze(args),
        Command::Calibrate(args) => calibrate::run(&args.into_options(), &mut out).map(exit_code),
        Command::Replay(args) => replay(args),
        Command::Project(args) => project::run(&args.into_options(), &mut out).map(exit_code),
        Command::Search(args) => search::run(&args.into_options(), &mut out).map(exit_code),
        Command::Validate(args) => validate::run(&args.into_options(), &mut out).map(exit_code),
        Command::Report(args) => report::run_report(args),
        Command::Diff(args) => report::run_diff(args),
        Command::Ingest(args) => ingest::run(&args.into_options(), &mut out).map(exit_code),
        Command::Synth(args) => synth::run(&args.into_options(), &mut out).map(exit_code),
        Command::Hw(args) => hw::run(&args.into_options(), &mut out).map(exit_code),
        Command::Demo => {
            let mut o = demo::Options::default();
            o.dir = PathBuf::from(DEMO_DIR);
            demo::run(&o, &DemoReport, &mut out).map(exit_code)
        }
    };
    // A diagnostic for tests: how often each per-rank fact was computed.
    if std::env::var_os("TRACECAST_COUNT_FACTS").is_some() {
        eprintln!("facts computed: {}", analysis::facts::counts());
    }
    match result {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Whether the error is a write to a closed pipe (`tracecast … | head`). Such
/// a command ends quietly with exit status 0, as ripgrep's: the reader took
/// what it wanted, nothing went wrong (STYLE: broken pipe exits 0). Rust
/// ignores SIGPIPE, so the write fails with `BrokenPipe` instead of killing
/// the process; every stdout write returns that error here (`outln!`).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

fn analyze(args: AnalyzeArgs) -> Result<ExitCode> {
    let mut opts = args.window.analyze_options(&args.inputs.read)?;
    opts.job_gpus = args.job_gpus;
    opts.job_hours = args.job_hours;
    let opts = opts;
    let read_opts = args.inputs.read.read_options()?;
    let catalog = catalog_with(&args.inputs.read.hw)?;
    let given_node = args.inputs.read.gpus_per_node;
    let mut analyses = Vec::new();
    // One rank at a time: each trace is summarized as it is read and dropped,
    // so a job of thousands of ranks never sits in memory whole.
    let failed = for_each_input(
        &args.inputs.paths,
        args.inputs.each,
        &args.inputs.read,
        |path, files, on_file| {
            let summarize = |rank: &tracecast_ingest::job::Rank| {
                analysis::check_step_range(&rank.trace, opts.steps, opts.drop_last_step)?;
                let mut o = opts.clone();
                o.gpus_per_node = i64::from(node_gpus_of(std::slice::from_ref(rank), &catalog, given_node));
                Ok(analysis::summarize_rank(rank, world_of_rank(rank.trace.declared_world_size(), files), &o))
            };
            // A dataset's rank summarized with these options already: its cached summary, events unread.
            let cached = |f: &std::path::Path| {
                if f.extension().is_none_or(|e| e != "parquet") {
                    return None;
                }
                let meta = tracecast_ingest::dataset::rank_meta(f).ok()?;
                let mut o = opts.clone();
                o.gpus_per_node = i64::from(node_gpus_for(&meta.devices, &catalog, given_node));
                let world = world_of_rank(meta.declared_world_size(), files);
                let summary = tracecast_ingest::dataset::cached_summary(f, &analysis::summary_key(&o, world))?;
                Some((meta.rank, meta.file, summary))
            };
            let (summaries, failures) = Job::try_summarize_or(files, &read_opts, on_file, &cached, &summarize);
            let bad = failures.iter().map(analysis::BadFile::of).collect();
            let job = (!summaries.is_empty()).then(|| analysis::reduce(path.display().to_string(), summaries, bad, &opts));
            (job, failures)
        },
        |a, _| analyses.push(a),
    )?;
    let definition = opts.classifier.definition();
    emit(&analyses, &definition, args.json.as_ref(), args.csv.as_ref(), args.parquet.as_ref(), args.inputs.read.quiet)?;
    if let Some(dir) = &args.plots {
        for (i, a) in analyses.iter().enumerate() {
            let stem = if analyses.len() == 1 { dir.join("breakdown") } else { dir.join(format!("breakdown-{}", i + 1)) };
            for f in tracecast_plots::breakdown::write_breakdown(a, &stem)? {
                if !args.inputs.read.quiet {
                    outln!("wrote {}", f.display())?;
                }
            }
        }
    }
    Ok(if failed { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

fn emit(
    analyses: &[JobAnalysis],
    comm_kernels: &str,
    json: Option<&PathBuf>,
    csv: Option<&PathBuf>,
    parquet: Option<&PathBuf>,
    quiet: bool,
) -> Result<()> {
    if !quiet {
        let mut out = std::io::stdout().lock();
        for a in analyses {
            summary::write_job(&mut out, a)?;
        }
        out.flush()?;
    }
    if let Some(path) = json {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            /// Which kernels counted as communication.
            comm_kernels: String,
            jobs: &'a [JobAnalysis],
        }
        let mut bytes = serde_json::to_vec_pretty(&Doc { comm_kernels: comm_kernels.to_string(), jobs: analyses })?;
        bytes.push(b'\n');
        output::write_atomic(path, &bytes)?;
    }
    if let Some(dir) = csv {
        export::write_tables(analyses, dir, export::Format::Csv).with_context(|| format!("writing CSV tables to {}", dir.display()))?;
    }
    if let Some(dir) = parquet {
        export::write_tables(analyses, dir, export::Format::Parquet)
            .with_context(|| format!("writing Parquet tables to {}", dir.display()))?;
    }
    Ok(())
}

/// Reads the jobs the paths stand for one at a time (so only one is held in
/// memory) and hands each to `each_job`; bad files are reported on stderr.
/// Returns whether any file was bad; with `strict`, the first bad file is an error.
fn for_each_job(inputs: &Inputs, each_job: impl FnMut(Job)) -> Result<bool> {
    for_each_job_in(&inputs.paths, inputs.each, &inputs.read, each_job)
}

/// [`for_each_job`] over `paths` read with `opts`.
fn for_each_job_in(paths: &[PathBuf], each: bool, opts: &ReadArgs, mut each_job: impl FnMut(Job)) -> Result<bool> {
    let read_opts = opts.read_options()?;
    let read = |path, files: &[PathBuf], on_file: &(dyn Fn(&std::path::Path) + Sync)| {
        let mut job = Job::read(path, files, &read_opts, on_file);
        let failures = std::mem::take(&mut job.failures);
        ((!job.ranks.is_empty()).then_some(job), failures)
    };
    for_each_input(paths, each, opts, read, |mut job, failures| {
        job.failures = failures;
        each_job(job)
    })
}

/// The jobs `paths` stand for, each read by `read` and handed to `each_job`
/// (the pipeline's reading loop with these flags).
fn for_each_input<T>(
    paths: &[PathBuf],
    each: bool,
    opts: &ReadArgs,
    read: impl Fn(PathBuf, &[PathBuf], &(dyn Fn(&std::path::Path) + Sync)) -> (Option<T>, Vec<tracecast_ingest::Error>),
    each_job: impl FnMut(T, Vec<tracecast_ingest::Error>),
) -> Result<bool> {
    tracecast_pipeline::inputs::for_each_input(paths, each, &opts.trace_options(), read, each_job)
}

fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let read_opts = args.inputs.read.read_options()?;
    let mut opts = tracecast_replay::ReplayOptions::default();
    opts.classifier = args.inputs.read.classifier()?;
    if let Some(spec) = &args.scale {
        opts.scale = spec.parse()?;
    }
    if let Some(spec) = &args.link {
        opts.link = Some(spec.parse()?);
    }
    let scenarios = tracecast_replay::scenario::parse_scenarios(&args.what_if)?;
    let catalog = catalog_with(&args.inputs.read.hw)?;
    opts.target = target_model(args.target.as_ref(), args.profile.as_ref(), &catalog)?;
    opts.pricing = Some(pricing_with(&catalog, &args.measurements)?);
    opts.world_size = args.world_size;
    let opts = opts;
    let (mut replays, mut what_ifs) = (Vec::new(), Vec::new());
    let mut perfetto_error = None;
    let mut jobs_seen = 0usize;
    let given_node = args.inputs.read.gpus_per_node;
    let failed = if args.perfetto.is_none() && scenarios.is_empty() {
        // One rank at a time: each trace becomes its part of the graph (and
        // what the report needs of it) and is dropped.
        let read = |path: PathBuf, files: &[PathBuf], on_file: &(dyn Fn(&std::path::Path) + Sync)| {
            let part = |rank: &tracecast_ingest::job::Rank| {
                let ctx = analysis::RankContext::new(rank, &opts.classifier);
                (tracecast_replay::RankPart::of(&ctx, &opts, &catalog, None, None), ctx.into_collectives())
            };
            let (parts, failures) = Job::summarize(files, &read_opts, on_file, &part);
            ((!parts.is_empty()).then_some((path, parts)), failures)
        };
        for_each_input(&args.inputs.paths, args.inputs.each, &args.inputs.read, read, |(path, parts), _| {
            let (parts, collectives): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
            let collectives = analysis::JobCollectives::new(collectives);
            let gpu = parts.iter().find_map(|p| p.gpu_id()).and_then(|id| catalog.gpu(id).ok());
            let opts = replay_options_for(gpu, &opts, &catalog, given_node);
            replays.push(tracecast_replay::replay_parts(path.display().to_string(), parts, &collectives, &opts, &catalog).report);
        })?
    } else {
        // Perfetto output writes every event of every rank, and what-ifs replay the job once each: the whole job is read.
        for_each_job(&args.inputs, |job| {
            let opts = replay_options_for(job_gpu(&job.ranks, &catalog), &opts, &catalog, given_node);
            // One context per rank for the replay and every what-if.
            let (parts, collectives) = tracecast_replay::job_parts(&job, &opts, &catalog);
            let path = job.path.display().to_string();
            what_ifs.push(tracecast_replay::scenario_rows(&path, &parts, &collectives, &opts, &scenarios, &catalog));
            let replayed = tracecast_replay::replay_parts(path, parts, &collectives, &opts, &catalog);
            if let (Some(path), None) = (&args.perfetto, &perfetto_error) {
                let path = if jobs_seen == 0 { path.clone() } else { per_device(path, &format!("job{}", jobs_seen + 1)) };
                if let Err(e) = write_perfetto(&path, &job, &replayed) {
                    perfetto_error = Some(e);
                }
            }
            jobs_seen += 1;
            replays.push(replayed.report);
        })?
    };
    if let Some(e) = perfetto_error {
        return Err(e);
    }
    if !args.inputs.read.quiet {
        let mut out = std::io::stdout().lock();
        for (i, r) in replays.iter().enumerate() {
            writeln!(out, "Job {} — {} rank(s), {} tasks, {} edges", r.path, r.ranks.len(), r.tasks, r.edges)?;
            let what = if r.scale == tracecast_replay::Scale::default()
                && args.world_size.is_none()
                && args.target.is_none()
                && args.link.is_none()
            {
                "error"
            } else {
                "change"
            };
            writeln!(out, "{:>5} {:>10} {:>16} {:>16} {:>8}", "rank", "steps", "measured ms", "replayed ms", what)?;
            for k in &r.ranks {
                writeln!(
                    out,
                    "{:>5} {:>10} {:>16.3} {:>16.3} {:>7.2}%",
                    k.rank,
                    k.steps.len(),
                    k.measured_step_us / 1000.0,
                    k.replayed_step_us / 1000.0,
                    100.0 * k.error
                )?;
            }
            if r.scale != tracecast_replay::Scale::default() || args.world_size.is_some() || args.target.is_some() || args.link.is_some() {
                writeln!(out, "Speed-up of the step over the measured run: {:.3}×", r.speedup)?;
                let measured: f64 = r.ranks.iter().map(|k| k.measured.busy_us).sum();
                let replayed: f64 = r.ranks.iter().map(|k| k.replayed.busy_us).sum();
                writeln!(out, "GPU busy time: measured {:.3} ms, replayed {:.3} ms", measured / 1000.0, replayed / 1000.0)?;
            }
            if let Some(p) = &r.projection {
                let gpu = |g: &Option<String>| g.clone().unwrap_or_else(|| "an unknown GPU".into());
                writeln!(
                    out,
                    "Compute kernels priced from {} ({}) onto {} ({}):",
                    gpu(&p.source_gpu),
                    p.source_fits,
                    gpu(&p.target_gpu),
                    p.target_fits
                )?;
                for s in &p.rules {
                    writeln!(
                        out,
                        "  {:>6} kernels {:>12.3} ms → {:>12.3} ms  {}",
                        s.kernels,
                        s.measured_us / 1000.0,
                        s.projected_us / 1000.0,
                        s.description
                    )?;
                }
                let by_class: Vec<String> = p
                    .classes
                    .iter()
                    .map(|c| format!("{} {:.3} → {:.3}", c.class.as_str(), c.measured_us / 1000.0, c.projected_us / 1000.0))
                    .collect();
                writeln!(out, "  by kernel class (ms): {}", by_class.join(" · "))?;
                let total: f64 = p.rules.iter().map(|s| s.projected_us).sum();
                writeln!(
                    out,
                    "  projected kernel time {:.3} ms (95 % band of the efficiencies: {:.3}–{:.3} ms)",
                    total / 1000.0,
                    p.projected_band_us[0] / 1000.0,
                    p.projected_band_us[1] / 1000.0
                )?;
            }
            let c = &r.critical_path;
            if c.total_us > 0.0 {
                let [compute, comm, memory, cpu, launch, unexplained] = c.percent();
                writeln!(
                    out,
                    "Critical path {:.3} ms: compute {compute:.1} %, communication {comm:.1} %, memory {memory:.1} %, CPU {cpu:.1} %, launch/queue {launch:.1} %, unexplained waits {unexplained:.1} %",
                    c.total_us / 1000.0
                )?;
            }
            for k in r.ranks.iter().take(if r.ranks.len() <= 8 { usize::MAX } else { 1 }) {
                let (tm, st) = (&k.graph.timings, &k.graph.starts);
                writeln!(
                    out,
                    "Graph of rank {}: queue gap {:.1} µs, launch latency {:.1} µs (measured); GPU starts by stream {}, launch {}, cross-stream {} recorded + {} inferred, unexplained {} ({:.3} ms), anchored {}",
                    k.rank,
                    tm.queue_gap_us,
                    tm.launch_latency_us,
                    st.stream,
                    st.launch,
                    st.cross_stream_recorded,
                    st.cross_stream_inferred,
                    st.unexplained,
                    st.unexplained_us / 1000.0,
                    st.anchored
                )?;
            }
            for n in &r.notes {
                writeln!(out, "note: {n}")?;
            }
            tracecast_replay::scenario::write_table(&mut out, what_ifs.get(i).map_or(&[], Vec::as_slice))?;
            writeln!(out)?;
        }
    }
    if let Some(path) = &args.json {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            jobs: Vec<tracecast_replay::scenario::JobWithScenarios<'a>>,
        }
        let what_if = |i: usize| what_ifs.get(i).map_or(&[][..], Vec::as_slice);
        let jobs =
            replays.iter().enumerate().map(|(i, replay)| tracecast_replay::scenario::JobWithScenarios { replay, what_if: what_if(i) });
        let mut bytes = serde_json::to_vec_pretty(&Doc { jobs: jobs.collect() })?;
        bytes.push(b'\n');
        output::write_atomic(path, &bytes)?;
    }
    Ok(if failed { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

fn write_perfetto(path: &std::path::Path, job: &Job, r: &tracecast_replay::Replayed) -> Result<()> {
    let mut text = Vec::new();
    tracecast_replay::perfetto::write(&mut text, job, &r.graph, &r.schedule, &r.critical)?;
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        use std::io::Write as _;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&text)?;
        enc.finish()?
    } else {
        text
    };
    output::write_atomic(path, &bytes)?;
    Ok(())
}

/// The bundled demo job, relative to the crate root so `cargo run` finds it anywhere.
const DEMO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/demo");

/// The demo's page from the report module (until the report takes the library's options).
struct DemoReport;

impl demo::Report for DemoReport {
    type Section = report::Section;

    fn sections(&self, dir: &Path, page: &Page) -> Result<(Vec<report::Section>, bool)> {
        report::sections(&[dir.to_path_buf()], false, &ReadArgs::from_options(&page.read), &demo_plan(page))
    }

    fn analysis(section: &report::Section) -> &JobAnalysis {
        section.analysis()
    }

    fn write(&self, sections: &[report::Section], page: &Page, out: &Path) -> Result<()> {
        report::write(sections, &demo_plan(page), out).map(drop)
    }
}

/// The report plan of the demo's page.
fn demo_plan(page: &Page) -> report::ReportPlan<'_> {
    let projection = Some((report::projection_label(None, page.what_if.scale), page.what_if.clone()));
    report::ReportPlan { catalog: &page.catalog, analyze: &page.analyze, projection, gpus_per_node: None, png_dir: None }
}
