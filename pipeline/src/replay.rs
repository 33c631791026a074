//! `tracecast replay`: the execution graph of measured runs rebuilt and
//! re-simulated, at identity or under what-ifs, with its terminal table.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use tracecast_calibrate::Catalog;
use tracecast_ingest::analysis::{JobCollectives, RankContext};
use tracecast_ingest::{Job, output};
use tracecast_replay::scenario::{self, JobWithScenarios};
use tracecast_replay::{JobReplay, ReplayOptions, Replayed, Scale};

use crate::Outcome;
use crate::hardware::{catalog_with, job_gpu, pricing_with, replay_options_for, target_model};
use crate::inputs::{Inputs, JobInput, WindowOptions, for_each_input};
use crate::output::per_device_name;

/// What a replay changes from the measured run: one definition for `replay`
/// and the report's projection.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct WhatIf {
    /// Speed-ups, e.g. `compute=2,memory=1.5,link=2` (default: none).
    pub scale: Option<String>,
    /// Link α-β overrides, `alpha=US,busbw=GBPS[,inter-alpha=US,inter-busbw=GBPS]` (default: none).
    pub link: Option<String>,
    /// Collectives over the whole job run over this many ranks (default: as measured).
    pub world_size: Option<u32>,
    /// Project onto this GPU (catalog id) (default: none).
    pub target: Option<String>,
    /// Calibration profile of the target GPU (default: its shipped profile).
    pub profile: Option<PathBuf>,
    /// Calibration profile of the GPU the traces ran on (default: calibrated on the traces).
    pub source_profile: Option<PathBuf>,
    /// The user's measurements for the pricing layer (default: none).
    pub measurements: Vec<PathBuf>,
}

impl WhatIf {
    /// Replay options with these changes (parsed, the target's model found,
    /// priced by the shipped base and the user's measurements).
    pub fn replay_options(&self, catalog: &Catalog) -> Result<ReplayOptions> {
        let mut o = ReplayOptions::default();
        if let Some(spec) = &self.scale {
            o.scale = spec.parse()?;
        }
        if let Some(spec) = &self.link {
            o.link = Some(spec.parse()?);
        }
        o.target = target_model(self.target.as_ref(), self.profile.as_ref(), catalog)?;
        // The source side's efficiencies fitted like the target's (on other runs of its GPU), so
        // that both prices come from comparable fits (README's leave-one-out table is priced so).
        o.source = self.source_profile.as_ref().map(|p| tracecast_calibrate::DeviceModel::from_profile_file(p, catalog)).transpose()?;
        o.pricing = Some(pricing_with(catalog, &self.measurements)?);
        o.world_size = self.world_size;
        Ok(o)
    }

    /// Where the user's measurements can price nothing (no `--target` to price kernels onto and
    /// no `--world-size`, here or in a scenario, to price collectives at), the words that say so.
    pub fn measurements_unused(&self, scenarios: &[scenario::Scenario]) -> Option<&'static str> {
        let resized = self.world_size.is_some() || scenarios.iter().any(|s| s.overrides.world_size.is_some());
        (!self.measurements.is_empty() && self.target.is_none() && !resized).then_some(
            "--measurements: read, and used by nothing here: they price kernels onto --target GPU and collectives under --world-size",
        )
    }

    /// Whether anything differs from the measured run.
    pub fn changes_anything(&self, scale: Scale) -> bool {
        scale != Scale::default() || self.world_size.is_some() || self.target.is_some() || self.link.is_some()
    }

    /// A label for the changes: the target, the speed-ups, the ranks and the link.
    pub fn label(&self, scale: Scale) -> String {
        let mut parts: Vec<String> = self.target.iter().cloned().collect();
        for (k, v) in [("compute", scale.compute), ("memory", scale.memory), ("link", scale.link)] {
            if v != 1.0 {
                parts.push(format!("{k} ×{v}"));
            }
        }
        parts.extend(self.world_size.map(|n| format!("{n} ranks")));
        parts.extend(self.link.as_ref().map(|l| format!("link {l}")));
        parts.join(", ")
    }
}

/// What `replay` replays, under which what-ifs, and what it writes.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// The traces.
    pub inputs: Inputs,
    /// What the replay changes from the measured run (default: nothing, an identity replay).
    pub what_if: WhatIf,
    /// What-ifs replayed side by side, `NAME:K=V,...`, each on top of `what_if` (default: none).
    pub scenarios: Vec<String>,
    /// The analysed window, as `analyze`'s: the measured and replayed step times cover its steps (default: steps).
    pub window: WindowOptions,
    /// Write the replay as JSON (default: none).
    pub json: Option<PathBuf>,
    /// Write the replayed timeline as Chrome-trace JSON, gzip when it ends in `.gz` (default: none).
    pub perfetto: Option<PathBuf>,
}

/// Replays every job the inputs stand for and writes the table, the JSON and
/// the Perfetto timeline the options ask for.
pub fn run(args: &Options, out: &mut dyn Write) -> Result<Outcome> {
    // The traces and the files that price them are no output of it.
    let w = &args.what_if;
    let inputs: Vec<PathBuf> = args
        .inputs
        .paths
        .iter()
        .chain(&w.profile)
        .chain(&w.source_profile)
        .chain(&w.measurements)
        .chain(&args.inputs.read.hw)
        .cloned()
        .collect();
    crate::output::distinct_outputs(&[("--json", args.json.as_deref()), ("--perfetto", args.perfetto.as_deref())], &inputs)?;
    let read = &args.inputs.read;
    let catalog = catalog_with(&read.hw)?;
    let read_opts = read.read_options(&catalog)?;
    let mut opts = args.what_if.replay_options(&catalog)?;
    opts.window = args.window.analyze_options(read)?;
    let opts = opts;
    let scenarios = scenario::parse_scenarios(&args.scenarios, opts.link.as_ref())?;
    let (mut replays, mut what_ifs) = (Vec::new(), Vec::new());
    let mut perfetto_error = None;
    // Every output staged before any is put in place: one that cannot be written leaves the others as they were.
    let mut staged = Vec::new();
    // The Perfetto timelines: (job, file).
    let mut timelines: Vec<(String, PathBuf)> = Vec::new();
    let failed = if args.perfetto.is_none() && scenarios.is_empty() {
        // One rank at a time: each trace becomes its part of the graph and is dropped.
        let read_job = |input: &mut JobInput<'_>| {
            let part = |rank: &tracecast_ingest::job::Rank| {
                // Steps the trace does not have: said as `analyze` says it, not replayed to zeros.
                let ctx = RankContext::new(rank, &opts.window.classifier);
                ctx.check_step_range(args.window.steps, args.window.drop_last_step)?;
                Ok((tracecast_replay::RankPart::of(&ctx, &opts, &catalog, None), ctx.into_collectives()))
            };
            let (parts, failures) = input.summarize(&read_opts, &part);
            ((!parts.is_empty()).then(|| (input.path.clone(), parts)), failures)
        };
        for_each_input(&args.inputs.paths, args.inputs.each, read, read_job, |(path, parts), failures| {
            let (parts, collectives): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
            let collectives = JobCollectives::new(collectives, tracecast_ingest::job::unread_ranks(&failures));
            let gpu = parts.iter().find_map(|p| p.gpu_id()).and_then(|id| catalog.gpu(id).ok());
            let opts = replay_options_for(gpu, &opts, &catalog, read.gpus_per_node);
            let path = path.display().to_string();
            replays.push(tracecast_replay::replay_parts_with_collectives(path, parts, collectives, &opts, &catalog).report);
        })?
        .failed
    } else {
        // Perfetto output writes every event of every rank, and what-ifs replay the job once each: the whole job is read,
        // one context per rank making its part for the replay and every what-if.
        let read_job = |input: &mut JobInput<'_>| {
            // The listing's errors among the job's failures: its unread ranks count in its world.
            let mut job = input.read(&read_opts);
            // Steps the trace does not have: said as `analyze` says it, and the rank not replayed.
            let (parts, collectives) = tracecast_replay::checked_job_parts(&mut job, &opts, &catalog);
            let failures = std::mem::take(&mut job.failures);
            ((!job.ranks.is_empty()).then_some((job, parts, collectives)), failures)
        };
        for_each_input(&args.inputs.paths, args.inputs.each, read, read_job, |(job, parts, collectives), _| {
            let opts = replay_options_for(job_gpu(&job.ranks, &catalog), &opts, &catalog, read.gpus_per_node);
            let path = job.path.display().to_string();
            what_ifs.push(tracecast_replay::scenario_rows(&path, &parts, &collectives, &opts, &scenarios, &catalog));
            let replayed = tracecast_replay::replay_parts_with_collectives(path, parts, &collectives, &opts, &catalog);
            if let (Some(given), None) = (&args.perfetto, &perfetto_error) {
                // One timeline a job: the first at the name given, the others beside it, each named on the terminal.
                let path = if replays.is_empty() { given.clone() } else { per_device_name(given, &format!("job{}", replays.len() + 1)) };
                // Standard output, or a device or pipe (`/dev/stdout`), holds one timeline: a second had
                // gone to a file named `-.job2` (or beside the device).
                let one_stream = given == Path::new("-") || std::fs::metadata(given).is_ok_and(|m| !m.is_file() && !m.is_dir());
                let timeline = if replays.is_empty() || !one_stream {
                    stage_perfetto(&path, &job, &replayed)
                } else {
                    Err(anyhow::anyhow!(
                        "--perfetto {}: a stream holds one job's timeline, and {} jobs were given: give a file",
                        given.display(),
                        replays.len() + 1
                    ))
                };
                match timeline {
                    Ok(s) => {
                        staged.push(s);
                        timelines.push((job.path.display().to_string(), path));
                    }
                    Err(e) => perfetto_error = Some(e),
                }
            }
            replays.push(replayed.report);
        })?
        .failed
    };
    // The user's measurements price kernels at their shapes onto a target and collectives at a
    // new world size: where they priced nothing, said (the output had been the same, unexplained).
    if !args.what_if.measurements.is_empty() {
        let unused = args.what_if.measurements_unused(&scenarios);
        for r in &mut replays {
            let note = match &r.projection {
                None => match unused {
                    Some(words) => words,
                    None => continue,
                },
                Some(p) if !p.rules.iter().any(|s| s.rule.by_shape()) => {
                    "--measurements: no kernel was priced at its shape (a GEMM or attention whose shape and dtype the trace records), so their GEMM and attention rows changed nothing here"
                }
                _ => continue,
            };
            r.notes.push(note.to_string());
        }
    }
    if let Some(e) = perfetto_error {
        return Err(e);
    }
    let what_if = |i: usize| what_ifs.get(i).map_or(&[][..], Vec::as_slice);
    if !read.quiet {
        for (i, r) in replays.iter().enumerate() {
            write_replay(out, r, args.what_if.changes_anything(r.scale))?;
            scenario::write_table(out, what_if(i))?;
            writeln!(out)?;
        }
    }
    if replays.is_empty() {
        crate::output::nothing_written(&[("--json", args.json.as_deref()), ("--perfetto", args.perfetto.as_deref())]);
        return Ok(Outcome::bad_files_if(failed));
    }
    if let Some(path) = &args.json {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            /// Which kernels counted as communication, as `analyze --json` names them.
            comm_kernels: String,
            jobs: Vec<JobWithScenarios<'a>>,
        }
        let jobs = replays.iter().enumerate().map(|(i, replay)| JobWithScenarios { replay, what_if: what_if(i) });
        let mut bytes = serde_json::to_vec_pretty(&Doc { comm_kernels: opts.window.classifier.definition(), jobs: jobs.collect() })?;
        bytes.push(b'\n');
        staged.push(output::stage(path, &bytes)?);
    }
    output::commit_all(staged)?;
    // Each timeline named, one job's too, and with what-ifs what it is of (it had been written unsaid).
    if !read.quiet {
        let of = if scenarios.is_empty() { "" } else { "'s replay; the --what-if scenarios are not drawn" };
        for (job, file) in timelines.iter().filter(|(_, f)| f.as_path() != Path::new("-")) {
            writeln!(out, "wrote {} (the Perfetto timeline of {job}{of})", file.display())?;
        }
    }
    Ok(Outcome::bad_files_if(failed))
}

/// The terminal form of a job's replay: per-rank steps, the projection's
/// rules, the critical path, the graph's starts and the notes.
fn write_replay(out: &mut dyn Write, r: &JobReplay, changed: bool) -> std::io::Result<()> {
    writeln!(out, "Job {} — {} rank(s), {} tasks, {} edges", r.path, r.ranks.len(), r.tasks, r.edges)?;
    let what = if changed { "change" } else { "error" };
    // Per step (mean over the rank's steps), beside the critical path over all of them below; a
    // rank without steps is its whole window ("window" in the steps column).
    let per = if r.ranks.iter().all(|k| k.steps.is_empty()) { "" } else { "/step" };
    let (measured, replayed) = (format!("measured ms{per}"), format!("replayed ms{per}"));
    writeln!(out, "{:>5} {:>10} {measured:>17} {replayed:>17} {what:>8}", "rank", "steps")?;
    for k in &r.ranks {
        let (measured, replayed) = (k.measured_step_us / 1000.0, k.replayed_step_us / 1000.0);
        // A trace without steps: its whole GPU window.
        let steps = if k.steps.is_empty() { "window".to_string() } else { k.steps.len().to_string() };
        writeln!(out, "{:>5} {steps:>10} {measured:>17.3} {replayed:>17.3} {:>7.2}%", k.rank, 100.0 * k.error + 0.0)?;
    }
    if changed {
        writeln!(
            out,
            "Speed-up of the job's step (the slowest rank per step) over the measured run: {}",
            tracecast_replay::speedup_in_words(r.speedup)
        )?;
        let measured: f64 = r.ranks.iter().map(|k| k.measured.busy_us).sum();
        let replayed: f64 = r.ranks.iter().map(|k| k.replayed.busy_us).sum();
        // Summed over the ranks (`diff` gives it per rank): said, not left to look 4× apart.
        writeln!(
            out,
            "GPU busy time, summed over the {} ranks: measured {:.3} ms, replayed {:.3} ms",
            r.ranks.len(),
            measured / 1000.0,
            replayed / 1000.0
        )?;
    }
    if let Some(p) = &r.projection {
        writeln!(out, "Compute kernels priced {}:", p.sides_in_words())?;
        for s in &p.rules {
            let (measured, projected) = (s.measured_us / 1000.0, s.projected_us / 1000.0);
            writeln!(out, "  {:>6} kernels {measured:>12.3} ms → {projected:>12.3} ms  {}", s.kernels, s.description)?;
        }
        let by_class: Vec<String> = p
            .classes
            .iter()
            .map(|c| format!("{} {:.3} → {:.3}", c.class.as_str(), c.measured_us / 1000.0, c.projected_us / 1000.0))
            .collect();
        writeln!(out, "  by kernel class (ms): {}", by_class.join(" · "))?;
        writeln!(out, "  {}", p.kernel_time_in_words())?;
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
            "Graph of rank {}: queue gap {:.1} µs, launch latency {:.1} µs ({}); GPU starts by stream {}, launch {}, cross-stream {} recorded + {} inferred, unexplained {} ({:.3} ms), anchored {}",
            k.rank,
            tm.queue_gap_us,
            tm.launch_latency_us,
            if tm.launch_samples > 0 { "measured" } else { "assumed: no launch onto an idle stream to measure" },
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
    Ok(())
}

/// Stages the replayed timeline of `job` for ui.perfetto.dev (gzip when the path ends in `.gz`).
fn stage_perfetto(path: &Path, job: &Job, r: &Replayed) -> Result<output::Staged> {
    let mut text = Vec::new();
    tracecast_replay::perfetto::write(&mut text, job, &r.graph, &r.schedule, &r.critical)?;
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&text)?;
        enc.finish()?
    } else {
        text
    };
    Ok(output::stage(path, &bytes)?)
}
