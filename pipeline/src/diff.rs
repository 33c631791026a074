//! `tracecast diff`: two runs compared (before / after a change) per kernel
//! class, collective, step and kernel, with regression gates for CI.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use tracecast_calibrate::diff::{ClassTimes, Delta, TraceDiff};
use tracecast_calibrate::work::kernel_work_of;
use tracecast_ingest::Job;
use tracecast_ingest::analysis::{self, RankContext};

use crate::Outcome;
use crate::hardware::{catalog_with, rank_analysis};
use crate::inputs::{JobInput, TraceOptions, WindowOptions, for_each_listed};

/// The two runs `diff` compares and what it writes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Run A (before): a trace file or a directory of per-rank files (default: empty).
    pub a: PathBuf,
    /// Run B (after) (default: empty).
    pub b: PathBuf,
    /// How the traces are read.
    pub read: TraceOptions,
    /// The analysed window of both runs.
    pub window: WindowOptions,
    /// Write the comparison as JSON (default: none).
    pub json: Option<PathBuf>,
    /// Kernels listed in the per-kernel comparison (default: 25).
    pub top: usize,
    /// Regression gates, e.g. `step>+3%,exposed>+5%` (default: none).
    pub fail_if: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        let (a, b, read, window) = Default::default();
        Options { a, b, read, window, json: None, top: 25, fail_if: None }
    }
}

fn write_rows(out: &mut dyn Write, title: &str, rows: &[Delta], limit: usize) -> std::io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n{title}")?;
    writeln!(out, "  {:<44} {:>9} {:>9} {:>12} {:>12} {:>11} {:>8}", "", "count A", "count B", "A ms", "B ms", "Δ ms", "Δ %")?;
    let shown = &rows[..limit.min(rows.len())];
    let short = |name: &str| if name.chars().count() > 44 { name.chars().take(43).collect::<String>() + "…" } else { name.to_string() };
    let names: Vec<String> = shown.iter().map(|d| short(&d.name)).collect();
    // Two kernels cut to one name (template arguments past the cut) are told apart by their
    // place among the rows that look alike; the JSON keeps the full names.
    let mut alike: std::collections::HashMap<&str, usize> = Default::default();
    for n in &names {
        *alike.entry(n.as_str()).or_default() += 1;
    }
    let mut seen: std::collections::HashMap<&str, usize> = Default::default();
    for (d, short) in shown.iter().zip(&names) {
        let mut name = short.clone();
        if alike.get(short.as_str()).is_some_and(|&n| n > 1) {
            let k = seen.entry(short.as_str()).or_default();
            *k += 1;
            let tag = format!(" [{k}]");
            name = name.chars().take(44 - tag.chars().count()).collect::<String>() + &tag;
        }
        writeln!(
            out,
            "  {name:<44} {:>9} {:>9} {:>12.3} {:>12.3} {:>+11.3} {:>8}",
            Delta::count_text(d.count_a),
            Delta::count_text(d.count_b),
            d.time_a_us / 1000.0,
            d.time_b_us / 1000.0,
            d.delta_us / 1000.0,
            d.change_text()
        )?;
    }
    Ok(())
}

/// The terminal form of a diff.
pub fn print_diff(out: &mut dyn Write, d: &TraceDiff) -> std::io::Result<()> {
    writeln!(out, "A: {} ({} rank(s))\nB: {} ({} rank(s))", d.a, d.ranks[0], d.b, d.ranks[1])?;
    match d.per_step {
        Some([a, b]) => writeln!(
            out,
            "Times and counts are per rank and analysed step (A analysed {a} steps, B {b}: a run profiled over more steps is not slower); step times are the job's (the slowest rank per step, as analyze reports), steps matched in order."
        )?,
        None => writeln!(
            out,
            "Times are per rank; step times are the job's (the slowest rank per step, as analyze reports), steps matched in order."
        )?,
    }
    let headline: Vec<String> = d.summary.iter().take(4).map(|r| format!("{} {}", r.name, r.change_in_words())).collect();
    writeln!(out, "Headline (B against A): {}", headline.join(", "))?;
    writeln!(out, "{}", d.shared_words())?;
    if let Some(note) = d.little_in_common() {
        writeln!(out, "note: {note}")?;
    }
    if let Some(note) = d.unrelated_note() {
        writeln!(out, "note: {note}")?;
    }
    for note in d.notes.iter().chain(&d.rank_notes) {
        writeln!(out, "note: {note}")?;
    }
    match d.kernel_classes.first() {
        Some(k) if k.delta_us != 0.0 => writeln!(out, "Moved most: {} ({:+.3} ms {})", k.name, k.delta_us / 1000.0, d.per_what())?,
        _ => writeln!(out, "No kernel class moved.")?,
    }
    write_rows(out, "Summary", &d.summary, 10)?;
    write_rows(out, "Per kernel class", &d.kernel_classes, 20)?;
    write_rows(out, "Per collective", &d.collectives, 20)?;
    write_rows(out, "Per step", &d.steps, 20)?;
    // As many as --top asked for: the diff keeps that many.
    write_rows(out, "Kernels that moved most", &d.kernels, d.kernels.len())
}

/// Writes the diff as JSON.
fn write_diff_json(path: &Path, d: &TraceDiff) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(d)?;
    bytes.push(b'\n');
    tracecast_ingest::output::write_atomic(path, &bytes)?;
    Ok(())
}

/// Compares the two runs, writes what the options ask for and applies the gates.
pub fn run(args: &Options, out: &mut dyn Write) -> Result<Outcome> {
    crate::output::distinct_outputs(&[("--json", args.json.as_deref())], &[args.a.clone(), args.b.clone()])?;
    let analyze = args.window.analyze_options(&args.read)?;
    let classifier = analyze.classifier.clone();
    if let Some(spec) = &args.fail_if {
        tracecast_calibrate::diff::parse_gates(spec).map_err(|e| anyhow::anyhow!("--fail-if: {e}"))?;
    }
    let catalog = catalog_with(&args.read.hw)?;
    let read_opts = args.read.read_options(&catalog)?;
    // One rank at a time, as `analyze`: each trace gives its summary and its kernel-class times.
    let mut runs = Vec::new();
    let read = |input: &mut JobInput<'_>| {
        let job_ranks = Job::ranks_in(&input.files);
        let part = |rank: &tracecast_ingest::job::Rank| {
            let ctx = RankContext::new(rank, &classifier);
            let (o, world) = rank_analysis(&ctx, job_ranks, &analyze, &catalog, args.read.gpus_per_node)?;
            let work = kernel_work_of(&ctx);
            let summary = analysis::summarize(&ctx, world, &o);
            // The per-class times of the analysed window (`--window`, `--steps`), as every other table.
            let times = ClassTimes::of_rank(&rank.trace, ctx.classes(), &work, Some(summary.tables_window()));
            Ok((summary, times))
        };
        let (parts, failures) = input.summarize(&read_opts, &part);
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
        (Some((analysis::reduce(input.path.display().to_string(), summaries, bad, &analyze), times)), failures)
    };
    // Both runs in one pass over the inputs: each path is its own job.
    let jobs = [&args.a, &args.b].map(|p| (p.clone(), vec![p.clone()])).into();
    let failed = for_each_listed(jobs, &args.read, read, |run, _| runs.push(run))?.failed;
    let [(aa, at), (ba, bt)] = runs.as_slice() else { anyhow::bail!("diff needs two readable runs (see the errors above)") };
    let d = tracecast_calibrate::diff::diff_jobs((at, aa), (bt, ba), args.top);
    if !args.read.quiet {
        print_diff(out, &d)?;
    }
    if let Some(path) = &args.json {
        write_diff_json(path, &d)?;
    }
    if let Some(spec) = &args.fail_if {
        let gates = tracecast_calibrate::diff::parse_gates(spec).map_err(|e| anyhow::anyhow!("--fail-if: {e}"))?;
        // What does not compare gates nothing: an error, not a pass or a regression; the
        // gates that do compare still say their regressions first (they had gone unsaid).
        let (comparable, incomparable): (Vec<_>, Vec<_>) = gates.into_iter().partition(|g| d.incomparable(&g.metric).is_none());
        let failed_gates = tracecast_calibrate::diff::failed_gates(&d, &comparable);
        for f in &failed_gates {
            crate::output::stderr_line(format_args!("regression: {f}"));
        }
        if let Some(why) = incomparable.iter().find_map(|g| d.incomparable(&g.metric)) {
            anyhow::bail!("--fail-if: {why}");
        }
        // A run read in part is not compared whole: its bad files (exit 2) outrank a regression (exit 1).
        if !failed_gates.is_empty() && !failed {
            return Ok(Outcome::Regressed);
        }
    }
    Ok(Outcome::bad_files_if(failed))
}
