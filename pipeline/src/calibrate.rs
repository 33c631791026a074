//! `tracecast calibrate`: kernel efficiencies and link latency/bandwidth
//! fitted from traces into a profile per device.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use tracecast_ingest::analysis;

use crate::Outcome;
use crate::calibrate_summary::write_profile;
use crate::hardware::catalog_with;
use crate::inputs::{Inputs, JobInput, for_each_input};
use crate::output::{device_file_id, per_device, stage_json};

/// What `calibrate` reads and where it writes the profiles.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// The traces.
    pub inputs: Inputs,
    /// The profile to write; with traces of several GPUs, one file per device, the GPU id
    /// before `.json` (default: empty, refused).
    pub out: PathBuf,
    /// Draw every fit into this directory (default: none).
    pub plots: Option<PathBuf>,
    /// Also write a MAD-Max system configuration with the fitted utilization factors here (default: none).
    pub madmax_system: Option<PathBuf>,
    /// Nodes of the MAD-Max system configuration (default: 1).
    pub nodes: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options { inputs: Inputs::default(), out: PathBuf::new(), plots: None, madmax_system: None, nodes: 1 }
    }
}

/// Fits the profiles, writes them (and their charts), and summarizes each on the terminal.
pub fn run(args: &Options, out: &mut dyn Write) -> Result<Outcome> {
    crate::output::distinct_outputs(
        &[("--out", Some(&args.out)), ("--plots", args.plots.as_deref()), ("--madmax-system", args.madmax_system.as_deref())],
        &args.inputs.paths,
    )?;
    crate::output::folder_outputs(&[("--plots", args.plots.as_deref())], &args.inputs.paths)?;
    let catalog = catalog_with(&args.inputs.read.hw)?;
    let read_opts = args.inputs.read.read_options(&catalog)?;
    let mut opts = tracecast_calibrate::CalibrateOptions::default();
    opts.classifier = args.inputs.read.classifier()?;
    opts.gpus_per_node = args.inputs.read.gpus_per_node;
    // One rank at a time, as `analyze`: each trace is reduced to its samples and dropped.
    let mut jobs = Vec::new();
    let read = |input: &mut JobInput<'_>| {
        let summarize = |rank: &tracecast_ingest::job::Rank| {
            let ctx = analysis::RankContext::new(rank, &opts.classifier);
            let work = tracecast_calibrate::work::kernel_work_of(&ctx);
            Ok((tracecast_calibrate::profile::rank_samples(&ctx, &work, &catalog), ctx.into_collectives()))
        };
        let (ranks, failures) = input.summarize(&read_opts, &summarize);
        let (samples, collectives): (Vec<_>, Vec<_>) = ranks.into_iter().unzip();
        let unread = tracecast_ingest::job::unread_ranks(&failures);
        ((!samples.is_empty()).then(|| (samples, analysis::JobCollectives::new(collectives, unread))), failures)
    };
    // The files no rank of a fit came from, for the profiles to say (they were named on stderr alone).
    let mut left_out: Vec<String> = Vec::new();
    let failed = for_each_input(&args.inputs.paths, args.inputs.each, &args.inputs.read, read, |job, failures| {
        left_out.extend(
            failures.iter().filter(|e| e.is_unread_rank()).map(|e| e.path().map_or_else(|| e.to_string(), |p| p.display().to_string())),
        );
        jobs.push(job);
    })?
    .failed;
    let (samples, collectives): (Vec<_>, Vec<_>) = jobs.into_iter().unzip();
    let mut profiles = tracecast_calibrate::profile::calibrate_summaries(samples.into_iter().zip(&collectives).collect(), &catalog, &opts);
    if !left_out.is_empty() {
        let shown: Vec<&str> = left_out.iter().take(4).map(String::as_str).collect();
        let more = if left_out.len() > shown.len() { format!(", … ({} in all)", left_out.len()) } else { String::new() };
        let note = format!("not fitted on {} rank file(s) that could not be read: {}{more}", left_out.len(), shown.join(", "));
        for p in &mut profiles {
            p.notes.push(note.clone());
        }
    }
    if profiles.is_empty() {
        anyhow::bail!("no trace could be read: nothing to calibrate");
    }
    // A profile that fits nothing is not written: given to `project --profile` it had replaced the
    // GPU's shipped fits by defaults. What could not be fitted, and why, is still printed.
    // Several devices name their files per device, whether or not each gets one.
    let many = profiles.len() > 1;
    let (profiles, empty): (Vec<_>, Vec<_>) = profiles.into_iter().partition(|p| !p.fits_nothing());
    for p in &empty {
        if !args.inputs.read.quiet {
            write_profile(out, p, args.inputs.read.device.as_deref())?;
        }
        crate::output::stderr_line(format_args!(
            "error: {}: nothing could be fitted from its traces (no kernel class, link or table correction): no profile written",
            p.device.catalog_id.as_deref().unwrap_or(if p.device.name.is_empty() { "the unnamed device" } else { &p.device.name })
        ));
    }
    if profiles.is_empty() {
        return Ok(Outcome::bad_files_if(true));
    }
    // The profiles (and MAD-Max systems) are staged and put in place only once every chart is
    // written: a --plots folder that cannot be written had left a new profile behind an error.
    let mut staged = Vec::new();
    // Per profile: the path it goes to and what the charts' line says, printed once all are in place.
    let mut said = Vec::new();
    // A MAD-Max system that cannot be priced (a GPU the catalog does not know) is left out and
    // said; the profiles are written (it had refused the whole run).
    let (mut systems_left_out, mut systems_written) = (Vec::new(), Vec::new());
    for p in &profiles {
        let id = device_file_id(p);
        let path = if many { per_device(&args.out, &id)? } else { args.out.clone() };
        staged.push(stage_json(&path, p)?);
        if let Some(f) = &args.madmax_system {
            let f = if many { per_device(f, &id)? } else { f.clone() };
            match tracecast_calibrate::madmax::system_config(p, &catalog, args.nodes) {
                Ok(system) => {
                    staged.push(stage_json(&f, &system)?);
                    systems_written.push(f);
                }
                // A file already there is another profile's system: said, so that it is not read
                // as this profile's.
                Err(why) => systems_left_out.push(format!(
                    "--madmax-system {}: not written{}: {why}",
                    f.display(),
                    if f.exists() { " (the file there is an earlier one, not of this profile)" } else { "" }
                )),
            }
        }
        let charts = match &args.plots {
            Some(dir) => {
                // As the profile's file is named: two GPUs the catalog lacks had shared `unknown/`.
                let dir = if many { dir.join(&id) } else { dir.clone() };
                let files = tracecast_plots::fits::write_profile_charts(p, &dir)?;
                Some(format!("{} chart file(s) written to {}", files.len(), dir.display()))
            }
            None => None,
        };
        said.push((p, path, charts));
    }
    tracecast_ingest::output::commit_all(staged)?;
    if !args.inputs.read.quiet {
        for (p, path, charts) in said {
            write_profile(out, p, args.inputs.read.device.as_deref())?;
            writeln!(out, "Profile written to {}", path.display())?;
            if let Some(line) = charts {
                writeln!(out, "{line}")?;
            }
        }
        // The system file said as the profile is (it had been written without a word).
        for f in &systems_written {
            writeln!(out, "MAD-Max system written to {}", f.display())?;
        }
    }
    for why in &systems_left_out {
        crate::output::stderr_line(format_args!("error: {why}"));
    }
    Ok(Outcome::bad_files_if(failed || !systems_left_out.is_empty() || !empty.is_empty()))
}
