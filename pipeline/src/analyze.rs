//! `tracecast analyze`: where GPU time went, above all exposed communication,
//! per rank, step and collective, read one rank at a time.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tracecast_ingest::analysis::{self, JobAnalysis};
use tracecast_ingest::{Job, output};

use crate::Outcome;
use crate::hardware::{catalog_with, node_gpus_for, rank_analysis, world_of_rank};
use crate::inputs::{Inputs, UnreadJob, WindowOptions, for_each_input};
use crate::{export, summary};

/// What `analyze` reads and what it writes.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// The traces.
    pub inputs: Inputs,
    /// The analysed window.
    pub window: WindowOptions,
    /// Write the analysis as JSON (DESIGN §6 keys) (default: none).
    pub json: Option<PathBuf>,
    /// Write the breakdown, steps, collectives and kernels tables as CSV into this directory (default: none).
    pub csv: Option<PathBuf>,
    /// Write the same tables as Parquet into this directory (default: none).
    pub parquet: Option<PathBuf>,
    /// Draw each job's per-rank breakdown (SVG and PNG) into this directory (default: none).
    pub plots: Option<PathBuf>,
    /// GPUs of the whole job, to extrapolate GPU-hours (with `job_hours`) (default: none).
    pub job_gpus: Option<f64>,
    /// Wall-clock hours of the whole job (with `job_gpus`) (default: none).
    pub job_hours: Option<f64>,
}

/// Analyses every job the inputs stand for, one rank at a time (each trace is
/// summarized as it is read and dropped, so a job of thousands of ranks never
/// sits in memory whole), and writes what the options ask for.
pub fn run(args: &Options, out: &mut dyn Write) -> Result<Outcome> {
    crate::output::distinct_outputs(
        &[
            ("--json", args.json.as_deref()),
            ("--csv", args.csv.as_deref()),
            ("--parquet", args.parquet.as_deref()),
            ("--plots", args.plots.as_deref()),
        ],
        &args.inputs.paths,
    )?;
    crate::output::folder_outputs(
        &[("--csv", args.csv.as_deref()), ("--parquet", args.parquet.as_deref()), ("--plots", args.plots.as_deref())],
        &args.inputs.paths,
    )?;
    let read = &args.inputs.read;
    let mut opts = args.window.analyze_options(read)?;
    (opts.job_gpus, opts.job_hours) = crate::inputs::job_size(args.job_gpus, args.job_hours)?;
    let opts = opts;
    let catalog = catalog_with(&read.hw)?;
    let read_opts = read.read_options(&catalog)?;
    let mut analyses = Vec::new();
    let reads = for_each_input(
        &args.inputs.paths,
        args.inputs.each,
        read,
        |input| {
            let job_ranks = Job::ranks_in(&input.files);
            let summarize = |rank: &tracecast_ingest::job::Rank| {
                let ctx = analysis::RankContext::new(rank, &opts.classifier);
                let (o, world) = rank_analysis(&ctx, job_ranks, &opts, &catalog, read.gpus_per_node)?;
                Ok(analysis::summarize(&ctx, world, &o))
            };
            // A dataset's rank summarized with these options already: its cached summary, events unread.
            let cached = |f: &Path| {
                // `--device` names the GPU of a rank that records none, or is said not applied to one that
                // records its own: the summary, made without it, says neither (its part not read for nothing).
                if f.extension().is_none_or(|e| e != "parquet") || read_opts.device.is_some() {
                    return None;
                }
                let meta = tracecast_ingest::dataset::rank_meta(f).ok()?;
                let mut o = opts.clone();
                o.gpus_per_node = i64::from(node_gpus_for(&meta.devices, &catalog, read.gpus_per_node));
                let world = world_of_rank(meta.declared_world_size(), job_ranks, meta.rank);
                let summary = tracecast_ingest::dataset::cached_summary(f, &analysis::summary_key(&o, world))?;
                let declared_world = meta.declared_world_size();
                Some(tracecast_ingest::job::KnownRank { rank: meta.rank, source: meta.source, path: meta.file, declared_world, summary })
            };
            let (summaries, failures) = input.summarize_or(&read_opts, &cached, &summarize);
            let bad = failures.iter().map(analysis::BadFile::of).collect();
            let job = (!summaries.is_empty()).then(|| analysis::reduce(input.path.display().to_string(), summaries, bad, &opts));
            (job, failures)
        },
        |a, _| analyses.push(a),
    )?;
    if !read.quiet {
        for a in &analyses {
            summary::write_job(out, a)?;
        }
        out.flush()?;
    }
    if analyses.is_empty() {
        let outputs = [("--json", args.json.as_deref()), ("--csv", args.csv.as_deref()), ("--parquet", args.parquet.as_deref())];
        crate::output::nothing_written(&[outputs.as_slice(), &[("--plots", args.plots.as_deref())]].concat());
        return Ok(Outcome::bad_files_if(reads.failed));
    }
    // Jobs of which no rank could be read (a file of `--each`): named in the JSON too, not on stderr alone.
    write_files(args, &analyses, &reads.unread_jobs, &opts.classifier.definition())?;
    if let Some(dir) = &args.plots {
        for (i, a) in analyses.iter().enumerate() {
            let stem = if analyses.len() == 1 { dir.join("breakdown") } else { dir.join(format!("breakdown-{}", i + 1)) };
            for f in tracecast_plots::breakdown::write_breakdown(a, &stem)? {
                if !read.quiet {
                    writeln!(out, "wrote {}", f.display())?;
                }
            }
        }
    }
    Ok(Outcome::bad_files_if(reads.failed))
}

/// The JSON document and the tables the options ask for.
fn write_files(args: &Options, analyses: &[JobAnalysis], unread_jobs: &[UnreadJob], comm_kernels: &str) -> Result<()> {
    let mut staged = Vec::new();
    if let Some(path) = &args.json {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            /// Which kernels counted as communication.
            comm_kernels: &'a str,
            jobs: &'a [JobAnalysis],
            #[serde(skip_serializing_if = "<[UnreadJob]>::is_empty")]
            unread_jobs: &'a [UnreadJob],
        }
        let mut bytes = serde_json::to_vec_pretty(&Doc { comm_kernels, jobs: analyses, unread_jobs })?;
        bytes.push(b'\n');
        staged.push(output::stage(path, &bytes)?);
    }
    for (dir, format, name) in [(&args.csv, export::Format::Csv, "CSV"), (&args.parquet, export::Format::Parquet, "Parquet")] {
        if let Some(dir) = dir {
            staged.extend(
                export::stage_tables(analyses, dir, format).with_context(|| format!("writing {name} tables to {}", dir.display()))?,
            );
        }
    }
    // Every output staged before any is put in place: one that cannot be written leaves the others as they were.
    output::commit_all(staged)?;
    Ok(())
}
