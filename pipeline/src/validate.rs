//! `tracecast validate`: published, measured runs (a runs file) projected
//! and compared, and the model's free parameter fitted to them.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::Outcome;
use crate::hardware::catalog_with;
use crate::output::{per_device, write_json};

/// The runs `validate` projects, and where it writes the comparison.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// The runs file (default: empty, which is refused).
    pub runs: PathBuf,
    /// Calibration profiles of GPUs of the runs, each pricing the runs on its GPU (default: none).
    pub profile: Vec<PathBuf>,
    /// Extra hardware catalog files (default: none).
    pub hw: Vec<PathBuf>,
    /// Write the comparison as JSON here (default: none).
    pub json: Option<PathBuf>,
    /// Fit the GEMM table correction per GPU to the runs and write the fitted profile(s) here (default: none).
    pub fit: Option<PathBuf>,
    /// The user's measurements for the pricing layer (default: none).
    pub measurements: Vec<PathBuf>,
    /// Write nothing on the terminal (default: false).
    pub quiet: bool,
}

fn print_validation(out: &mut dyn Write, v: &tracecast_replay::workload::validate::Validation) -> Result<()> {
    writeln!(out, "{:<28} {:>14} {:>14} {:>9}  memory", "run", "measured tok/s", "projected", "error")?;
    for r in &v.runs {
        let fits = match r.fits_memory {
            Some(true) => "fits",
            Some(false) => "DOES NOT FIT",
            None => "",
        };
        match (r.predicted_tokens_per_s_per_gpu, r.error) {
            (Some(p), Some(e)) => {
                writeln!(out, "{:<28} {:>14.1} {:>14.1} {:>+8.1}%  {fits}", r.id, r.measured_tokens_per_s_per_gpu, p, 100.0 * e)?
            }
            _ => {
                // A run refused before its measurement was read has none to show.
                let measured = Some(r.measured_tokens_per_s_per_gpu).filter(|m| *m > 0.0).map_or("-".into(), |m| format!("{m:.1}"));
                writeln!(out, "{:<28} {:>14} {:>14} {:>9}  {}", r.id, measured, "-", "-", r.notes.join("; "))?
            }
        }
    }
    let (Some(median), Some(max)) = (v.median_abs_error, v.max_abs_error) else {
        writeln!(out, "no run projected: nothing to compare")?;
        return Ok(());
    };
    let projected = v.runs.iter().filter(|r| r.error.is_some()).count();
    // Runs within 0.05 % of their measurement are on neither side.
    let on = |runs: usize, faster: usize, slower: usize| {
        let on = runs.saturating_sub(faster + slower);
        if on > 0 { format!(", {on} on it") } else { String::new() }
    };
    writeln!(
        out,
        "{projected} {}: median |error| {:.1} %, max {:.1} %; {} projected faster than measured, {} slower{} (tokens/s per GPU)",
        runs_word(projected),
        100.0 * median,
        100.0 * max,
        v.optimistic,
        v.pessimistic,
        on(projected, v.optimistic, v.pessimistic)
    )?;
    // Which way the model leans on each GPU: one stack's or one generation's miss shows here first.
    for g in &v.by_gpu {
        writeln!(
            out,
            "  {:<12} {:>4} {}: median |error| {:.1} %, median error {:+.1} %; {} faster, {} slower{}",
            g.gpu,
            g.runs,
            runs_word(g.runs),
            100.0 * g.median_abs_error,
            100.0 * g.median_error,
            g.optimistic,
            g.pessimistic,
            on(g.runs, g.optimistic, g.pessimistic)
        )?;
    }
    // A measured run ran, so it fit: a plan that does not is missing what made it fit
    // (activation offloading, recomputation the source does not state) or the memory model is.
    let not_fitting = v.runs.iter().filter(|r| r.fits_memory == Some(false)).count();
    if not_fitting > 0 {
        writeln!(
            out,
            "{not_fitting} of them do not fit their GPU's memory as priced for their stated plans: they ran, so the plan leaves out what made it fit (offloading, recomputation) or the memory model counts too much"
        )?;
    }
    Ok(())
}

/// "run" or "runs" after a count.
fn runs_word(n: usize) -> &'static str {
    if n == 1 { "run" } else { "runs" }
}

/// Projects the runs and compares (or fits, with `fit`), writing the terminal text and files.
pub fn run(args: &Options, out: &mut dyn Write) -> Result<Outcome> {
    use tracecast_replay::workload::validate;
    // The files it reads are no output of it (said before the runs are projected and printed).
    let inputs: Vec<PathBuf> =
        std::iter::once(&args.runs).chain(&args.profile).chain(&args.hw).chain(&args.measurements).cloned().collect();
    crate::output::distinct_outputs(&[("--json", args.json.as_deref()), ("--fit", args.fit.as_deref())], &inputs)?;
    let catalog = catalog_with(&args.hw)?;
    let file = validate::RunsFile::read(&args.runs)?;
    anyhow::ensure!(!file.runs.is_empty(), "{}: no runs to compare", args.runs.display());
    if !args.quiet
        && let Some(words) = file.unread_lists_in_words()
    {
        writeln!(out, "note: {}: {words}", args.runs.display())?;
    }
    let devices = args
        .profile
        .iter()
        .map(|p| tracecast_calibrate::DeviceModel::from_profile_file(p, &catalog).map_err(anyhow::Error::from))
        .collect::<Result<Vec<_>>>()?;
    let measurements = crate::hardware::measurements_of(&args.measurements, &catalog)?;
    // One profile per GPU: of two, which prices the runs would be the order's accident.
    let mut gpus: Vec<(&str, &Path)> =
        devices.iter().zip(&args.profile).filter_map(|(d, p)| Some((d.gpu.as_ref()?.id.as_str(), p.as_path()))).collect();
    gpus.sort_by_key(|g| g.0);
    if let Some(w) = gpus.windows(2).find(|w| w[0].0 == w[1].0) {
        anyhow::bail!("--profile {} and --profile {} are both of {}: give one profile per GPU", w[0].1.display(), w[1].1.display(), w[0].0);
    }
    if let Some(out_path) = &args.fit {
        let fit = validate::fit(&file, &catalog, &devices, &args.runs.display().to_string(), measurements.as_ref());
        if fit.gpus.is_empty() {
            let whys: Vec<String> = fit.not_fitted.iter().map(|n| format!("{} {}: {}", n.gpu, n.dtype, n.why)).collect();
            anyhow::bail!(if whys.is_empty() {
                format!(
                    "{}: no run priced on a catalog GPU (`tracecast validate` without --fit says why of each): nothing to fit",
                    args.runs.display()
                )
            } else {
                format!("{}: nothing to fit; {}", args.runs.display(), whys.join("; "))
            });
        }
        let many = fit.gpus.len() > 1;
        let mut written = Vec::new();
        for g in &fit.gpus {
            let path = if many { per_device(out_path, &g.gpu)? } else { out_path.clone() };
            let mut bytes = serde_json::to_vec_pretty(&g.profile)?;
            bytes.push(b'\n');
            tracecast_ingest::output::write_atomic(&path, &bytes)?;
            written.push(path);
        }
        if !args.quiet {
            writeln!(
                out,
                "The model's free parameter, fitted per GPU and number format of the linear layers (least squares of log(projected / measured)): the GEMM table correction, measured ÷ table time"
            )?;
            for g in &fit.gpus {
                for d in &g.by_dtype {
                    writeln!(
                        out,
                        "  {:<12} {:<4} GEMM correction {:.3} (was {:.3}, {}) from {} run(s)",
                        g.gpu,
                        d.dtype,
                        d.gemm_correction,
                        d.previous_gemm_correction,
                        d.previous_source,
                        d.runs.len()
                    )?;
                    if let Some(why) = &d.limit {
                        writeln!(out, "  {:<12} {:<4}   note: the correction stopped {why}", "", "")?;
                    }
                    // One free parameter: one run is reproduced exactly, and two leave one other run each
                    // to test it on. Written, since it is what the user asked for, but said.
                    if let Some(few) = few_runs_note(d.runs.len()) {
                        writeln!(out, "  {:<12} {:<4}   note: {few}", "", "")?;
                    }
                }
            }
            for n in &fit.not_fitted {
                writeln!(out, "  {:<12} {:<4} not fitted ({} run(s)): {}", n.gpu, n.dtype, n.runs.len(), n.why)?;
            }
            writeln!(out, "\nWith the fitted correction:")?;
            print_validation(out, &fit.fitted)?;
            writeln!(out, "\nLeave one run out (each run priced by the correction fitted to the other runs of its GPU and format):")?;
            print_validation(out, &fit.leave_one_out)?;
            for p in &written {
                writeln!(out, "Profile written to {} (read by project, search, validate and hw cost --profile)", p.display())?;
            }
        }
        if let Some(path) = &args.json {
            write_json(path, &fit)?;
        }
        return Ok(refused(&fit.fitted, &args.runs));
    }
    let v = validate::validate(&file, &catalog, &devices, measurements.as_ref());
    if !args.quiet {
        print_validation(out, &v)?;
        // A profile that prices nothing is said, not silently dropped.
        // And one that prices runs says which, and what it is (its fits and corrections are in each run's notes, --json).
        for (d, path) in devices.iter().zip(&args.profile) {
            let Some(g) = &d.gpu else { continue };
            let runs = file.runs.iter().filter(|r| catalog.gpu(&r.system.gpu).is_ok_and(|x| x.id == g.id)).count();
            if runs == 0 {
                writeln!(out, "note: --profile {} is of {}, which no run uses", path.display(), g.id)?;
            } else {
                let corrections: Vec<String> = d
                    .profile
                    .iter()
                    .flat_map(|p| &p.table_corrections)
                    .map(|c| {
                        format!(
                            "{} {} table × {:.3} ({})",
                            c.dtype.map_or("", |d| d.as_str()),
                            c.class.as_str(),
                            c.ratio,
                            c.basis_in_words()
                        )
                    })
                    .collect();
                let what = if corrections.is_empty() { "its fitted efficiencies".to_string() } else { corrections.join(", ") };
                writeln!(out, "note: --profile {} prices the {runs} run(s) on {}: {what}", path.display(), g.id)?;
            }
            // A fit the model leaves out is said once here (each run's notes in --json say it too).
            for why in d.rejected_fits() {
                writeln!(out, "note: --profile {}: {why}", path.display())?;
            }
        }
    }
    if let Some(path) = &args.json {
        write_json(path, &v)?;
    }
    Ok(refused(&v, &args.runs))
}

/// Runs whose own description was refused (a model of no layers, an unknown GPU, no
/// positive measurement): the others are compared, the count is said on stderr and the
/// status is 2, as for a job's unreadable files. Work the tool cannot price (FP4) is not
/// the input's fault: its rows say so and the status stays 0.
fn refused(v: &tracecast_replay::workload::validate::Validation, runs: &Path) -> Outcome {
    let n = v.runs.iter().filter(|r| r.refused).count();
    if n == 0 {
        return Outcome::Done;
    }
    crate::output::stderr_line(format_args!(
        "error: {}: {n} run(s) refused; their rows say why (\"refused\": true in --json)",
        runs.display()
    ));
    Outcome::BadFiles
}

/// What a correction fitted to `runs` runs can be trusted with, where they are too few (under
/// [`FIT_RUNS_TO_TEST`]): one free parameter reproduces one run exactly, and leave one run out
/// tests it on a single other run.
fn few_runs_note(runs: usize) -> Option<String> {
    match runs {
        0 => None,
        1 => Some(
            "from 1 run: the correction reproduces it exactly and nothing tests it; fit on more runs of this GPU before trusting it".into(),
        ),
        n if n < FIT_RUNS_TO_TEST => Some(format!(
            "from {n} runs: leave one run out predicts each from a fit to the {} other(s); fit on at least {FIT_RUNS_TO_TEST} runs of this GPU before trusting it",
            n - 1
        )),
        _ => None,
    }
}

/// Runs of a GPU and format below which a fitted correction is said to be untested: with three,
/// each run is predicted from a fit to two others, so a spread of the error can show.
const FIT_RUNS_TO_TEST: usize = 3;
