//! `tracecast search`: every feasible plan of a model on a system,
//! simulated and ranked, the best against plain FSDP, and the front of
//! throughput against GPU count.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use tracecast_replay::workload::llm::SystemOverrides;

use crate::Outcome;
use crate::hardware::catalog_with;
use crate::output::write_json;
use crate::project::{Inference, cluster, device_of, model, task};

/// What `search` searches, and where it writes the plans.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// A model preset, a model file or a MAD-Max model file (default: empty, which is refused).
    pub model: String,
    /// A catalog GPU id or a MAD-Max system file (default: empty, which is refused).
    pub system: String,
    /// GPUs (default: none, the system file's).
    pub gpus: Option<u32>,
    /// What the system differs in from its catalog entry (default: nothing).
    pub system_overrides: SystemOverrides,
    /// The user's measurements for the pricing layer (default: none).
    pub measurements: Vec<PathBuf>,
    /// train, prefill or decode (default: train).
    pub task: String,
    /// Sequences per iteration over the system, training (default: one per GPU).
    pub gbs: Option<u32>,
    /// The shape of an inference task.
    pub inference: Inference,
    /// Calibration profile of the GPU (default: the GPU's shipped profile).
    pub profile: Option<PathBuf>,
    /// Plans to print (default: 10).
    pub top: usize,
    /// Write the ranked plans, the baseline and the front as JSON here (default: none).
    pub json: Option<PathBuf>,
    /// Draw the Pareto front into this directory (default: none).
    pub plots: Option<PathBuf>,
    /// Extra hardware catalog files (default: none).
    pub hw: Vec<PathBuf>,
    /// Plan settings every candidate keeps, the software stack's (`attention=fa2,bucket=76`; default: none).
    pub with: Option<String>,
    /// What the plans are ranked by: `throughput` or `latency` (default: throughput).
    pub objective: String,
    /// Write nothing on the terminal (default: false).
    pub quiet: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            model: String::new(),
            system: String::new(),
            gpus: None,
            system_overrides: SystemOverrides::default(),
            measurements: Vec::new(),
            task: "train".into(),
            gbs: None,
            inference: Inference::default(),
            profile: None,
            top: 10,
            json: None,
            plots: None,
            hw: Vec::new(),
            with: None,
            objective: "throughput".into(),
            quiet: false,
        }
    }
}

/// Searches the plans and writes them (terminal, JSON, the front's chart); [`Outcome::NoPlan`] when none fits.
pub fn run(args: &Options, out: &mut dyn Write) -> Result<Outcome> {
    // The files it reads are no output of it (said before the search is printed).
    let inputs: Vec<PathBuf> = args.profile.iter().chain(&args.measurements).chain(&args.hw).cloned().collect();
    crate::output::distinct_outputs(&[("--json", args.json.as_deref()), ("--plots", args.plots.as_deref())], &inputs)?;
    crate::output::folder_outputs(&[("--plots", args.plots.as_deref())], &inputs)?;
    use tracecast_replay::workload::search;
    let catalog = catalog_with(&args.hw)?;
    let device = device_of(args.profile.as_ref(), &catalog)?;
    let model = model(&args.model)?;
    let cluster = cluster(&args.system, args.gpus, &args.system_overrides, model.bytes, &catalog, device.as_ref(), &args.measurements)?;
    // The GPU --system names (a node preset's, where it names one).
    let gpu_id = crate::project::system_gpu(&args.system, &catalog);
    let seq = model.seq as u32;
    // A MAD-Max task file states one plan, which `project` projects: a search has none to take from
    // it (its error had offered a task file, then refused one).
    anyhow::ensure!(
        matches!(args.task.as_str(), "train" | "pretrain" | "finetune" | "prefill" | "decode"),
        "--task {}: a search takes train, prefill or decode{}",
        args.task,
        if std::path::Path::new(&args.task).is_file() {
            " (a MAD-Max task file states one plan, which `project --task FILE` projects)"
        } else {
            ""
        }
    );
    let task = task(&args.task, &args.inference, seq)?;
    // Refused, not ignored (the front's caption had claimed it scaled).
    anyhow::ensure!(
        args.gbs.is_none() || task == tracecast_replay::workload::llm::Task::Train,
        "--gbs is a training step's global batch, not --task {}'s: its batch is --batch (sequences a replica serves)",
        args.task
    );
    let objective = search::Objective::named(&args.objective)
        .ok_or_else(|| anyhow::anyhow!("--objective {}: throughput or latency", args.objective))?;
    let mut space = search::SearchSpace { global_batch: args.gbs.unwrap_or(0), objective, ..Default::default() };
    if let Some(settings) = &args.with {
        space = space.with(settings, task).map_err(|e| anyhow::anyhow!("--with {e}"))?;
        cluster.check_attention_kernel(&space.settings).map_err(|e| anyhow::anyhow!("--with {settings}: {e}"))?;
    }
    let started = std::time::Instant::now();
    let result = search::search(&model, &cluster, task, &space);
    let elapsed = started.elapsed().as_secs_f64();
    // The front: the best plan at each power-of-two GPU count from one node up.
    let mut counts = Vec::new();
    let mut n = cluster.gpus_per_node.min(cluster.gpus).max(1);
    while n < cluster.gpus {
        counts.push(n);
        // --gpus is the user's: doubling past u32 ends the list (the cluster's own count follows).
        let Some(next) = n.checked_mul(2) else { break };
        n = next;
    }
    counts.push(cluster.gpus);
    // Printed, written and drawn: computed unless nothing shows it.
    let shown = !args.quiet || args.plots.is_some() || args.json.is_some();
    let front = if shown { search::front(&model, &cluster, task, &space, &counts) } else { Vec::new() };
    // Training plans' MFU, each held against what training on a GPU of this compute measured.
    let measured = (!args.quiet || args.json.is_some())
        .then(|| result.ranked.first().and_then(|best| crate::project::measured_mfu_note(&catalog, Some(gpu_id), best, None)))
        .flatten();
    // What the plans are ranked by: a decode step's throughput is tokens, as `project` says it.
    let unit = if matches!(task, tracecast_replay::workload::llm::Task::Decode { .. }) { "tokens/s" } else { "samples/s" };
    if !args.quiet {
        // Nothing rejected: no empty reasons (an inference search had printed "0 rejected ()").
        let why = if result.rejected > 0 {
            format!(" ({})", result.rejected_why.in_words(result.refused_for_one.as_deref()))
        } else {
            String::new()
        };
        writeln!(
            out,
            "{} on {} — {}: {} plans simulated, {} rejected{why}, {:.2} s",
            model.name,
            cluster.name,
            task.as_str(),
            result.simulated,
            result.rejected,
            elapsed
        )?;
        // What the ranking is by, where it is not throughput: the step a serving budget bounds.
        if objective == search::Objective::Latency {
            let step = match task {
                tracecast_replay::workload::llm::Task::Decode { .. } => "time per output token",
                tracecast_replay::workload::llm::Task::Prefill { .. } => "time to first token",
                tracecast_replay::workload::llm::Task::Train => "iteration time (at a fixed global batch, the order of throughput)",
            };
            writeln!(out, "  ranked by latency: {step}, the shortest first")?;
        }
        let pinned = space.pinned();
        if !pinned.is_empty() {
            writeln!(out, "  only plans with {} (--with)", pinned.join(", "))?;
        }
        // The plan column as wide as its longest plan: `--with` settings had pushed the
        // numbers of long plans out of their columns.
        let wide = result.ranked.iter().take(args.top).map(|p| p.plan.chars().count()).max().unwrap_or(0).max(58);
        // No ranking to head where no plan ran (the error below says why).
        if !result.ranked.is_empty() {
            writeln!(
                out,
                "{:>4}  {:<wide$} {:>13} {:>14} {:>9} {:>10} {:>7}",
                "rank", "plan", "iteration ms", unit, "exposed", "memory GB", "MFU"
            )?;
        }
        let mut above = false;
        for (i, p) in result.ranked.iter().take(args.top).enumerate() {
            let mfu = match (p.mfu, &measured) {
                (Some(m), Some(n)) if n.is_above(m) => {
                    above = true;
                    format!("{:.1}%*", 100.0 * m)
                }
                (Some(m), _) => format!("{:.1}% ", 100.0 * m),
                (None, _) => "- ".into(),
            };
            writeln!(
                out,
                "{:>4}  {:<wide$} {:>13.2} {:>14.2} {:>8.1}% {:>10.1} {mfu:>7}",
                i + 1,
                p.plan,
                p.times.iteration_ms,
                p.throughput,
                100.0 * p.times.exposed_comm_ms / p.times.iteration_ms.max(1e-12),
                p.memory_gb_per_gpu
            )?;
            if let Some(same) = result.identical.get(&p.plan) {
                writeln!(out, "        (prices identically: {})", same.join("; "))?;
            }
        }
        match (&result.baseline, result.speedup_over_baseline) {
            (Some(b), Some(x)) => writeln!(
                out,
                "Baseline {} ({}): {:.2} {unit}; the best plan is {x:.2}× faster{}",
                result.baseline_name,
                b.plan,
                b.throughput,
                if objective == search::Objective::Latency { format!(" a step ({:.2} ms)", b.times.iteration_ms) } else { String::new() }
            )?,
            _ if space.pins_out_baseline(matches!(task, tracecast_replay::workload::llm::Task::Train), cluster.gpus) => writeln!(
                out,
                "Baseline {} (tp=1, pp=1): not among the plans --with {} leaves",
                result.baseline_name,
                space.pinned().join(",")
            )?,
            // Its degrees may not divide the batch (gbs=3 over fsdp=8) as well as not fit: both are said.
            _ => writeln!(
                out,
                "Baseline {} (tp=1, pp=1): no such plan runs (its degrees do not divide the batch, or it does not fit in memory)",
                result.baseline_name
            )?,
        }
        // The best plan's model FLOPs utilization against what this GPU was measured to reach.
        if let (Some(best), tracecast_replay::workload::llm::Task::Train) = (result.ranked.first(), task)
            && let Some(mfu) = best.mfu
        {
            let gpu = catalog.gpu(gpu_id).ok();
            use tracecast_calibrate::catalog::Dtype;
            // The best GEMM measured in the plan's linear format, as a fraction of the 16-bit
            // peak the MFU is of (an FP8 GEMM at 80 % of the FP8 peak is 160 % of it).
            let fp8 = best.linear_format == Dtype::Fp8;
            let formats: &[Dtype] = if fp8 { &[Dtype::Fp8] } else { &[Dtype::Bf16, Dtype::Fp16] };
            let of_16_bit = |d: Dtype| {
                let g = gpu?;
                Some(g.peak_flops(d)? / g.peak_flops(Dtype::Bf16).or_else(|| g.peak_flops(Dtype::Fp16))?)
            };
            // A GPU without traces of its own takes a similar GPU's fits: its best GEMM was
            // measured on that one (said so; it had read as measured on this GPU).
            let model = gpu.and_then(|g| device.clone().or_else(|| tracecast_calibrate::shipped::for_gpu(g, &catalog)));
            let traced_on = model.as_ref().and_then(|d| d.fits_of_another.clone());
            let traced = model
                .and_then(|d| d.best_achieved(tracecast_calibrate::work::KernelClass::Gemm, formats))
                .and_then(|f| Some(f * of_16_bit(formats[0])?));
            // And the measured performance base's best GEMM of this GPU in that format.
            let published = gpu
                .zip(cluster.prices.as_ref())
                .and_then(|(g, p)| p.pricing.best_gemm_fraction(g, formats[0]))
                .and_then(|(f, _)| Some(f * of_16_bit(formats[0])?));
            // The larger of the two, and where it was measured.
            let (measured, traced_wins) = match (traced, published) {
                (Some(a), Some(b)) => (Some(a.max(b)), a >= b),
                (a, b) => (a.or(b), a.is_some()),
            };
            let on = match traced_on.filter(|_| traced_wins) {
                Some(other) => format!("on {other}, the traced GPU most like this one"),
                None => "on this GPU".to_string(),
            };
            let format = if fp8 { "FP8 GEMM" } else { "GEMM" };
            match measured {
                Some(m) if mfu > m => writeln!(
                    out,
                    "note: the best plan implies {:.0} % MFU, more than the best {format} measured {on} reached ({:.0} % of the 16-bit peak): its absolute throughput is optimistic (the ranking of plans still holds)",
                    100.0 * mfu,
                    100.0 * m
                )?,
                Some(m) => writeln!(
                    out,
                    "The best plan implies {:.0} % MFU (the best {format} measured {on}: {:.0} % of the 16-bit peak)",
                    100.0 * mfu,
                    100.0 * m
                )?,
                None => writeln!(
                    out,
                    "note: the best plan implies {:.0} % MFU; no {format} of this GPU was measured to bound it (no profile, shipped calibration or measured base)",
                    100.0 * mfu
                )?,
            }
        }
        match measured.as_ref().map(|n| (n, &n.bound)) {
            Some((_, Some(b))) => writeln!(
                out,
                "The best MFU measured in training on a GPU of this compute with {} linear layers: {:.1} % of the 16-bit peak ({}; {} run(s) shipped){}",
                b.format,
                100.0 * b.best.mfu,
                b.best.cited(),
                b.runs,
                if above { format!("; * above it: {} (the plans' ranking holds)", crate::project::ABOVE_MEASURED) } else { String::new() }
            )?,
            Some((n, None)) => writeln!(out, "note: {}", n.text)?,
            None => {}
        }
        // What the --with settings could not be priced as, on the best plan (every plan has
        // them): `attention=fa3` on a GPU whose FA3 has no backward measured ran the fastest
        // measured family's prices without a word.
        if let Some(best) = result.ranked.first() {
            for n in space.unpriced_settings(best) {
                writeln!(out, "note (--with, on the best plan): {n}")?;
            }
        }
        if let Some(n) = &result.not_tried {
            writeln!(out, "note: {n}")?;
        }
        // A fit of --profile the model leaves out is said, as project says it.
        for why in device.iter().flat_map(|d| d.rejected_fits()) {
            writeln!(out, "note: calibration profile: {why}")?;
        }
        // The system every plan is placed on: its nodes, and what the user's measurements changed
        // (a search had said nothing of either; `project` and the JSON's plans say them).
        for n in &cluster.notes {
            writeln!(out, "note (system): {n}")?;
        }
        if front.iter().any(|p| p.pareto) {
            let batch = match task {
                tracecast_replay::workload::llm::Task::Prefill { batch, .. }
                | tracecast_replay::workload::llm::Task::Decode { batch, .. } => {
                    format!("{batch} sequence(s) a replica, as --batch")
                }
                _ if space.global_batch > 0 => "--gbs scaled with the GPU count: the same batch per GPU".to_string(),
                _ => "a global batch of one sequence per GPU, as without --gbs".to_string(),
            };
            writeln!(out, "Pareto front (the best plan at each GPU count, {batch}):")?;
        }
        for p in front.iter().filter(|p| p.pareto) {
            match objective {
                search::Objective::Throughput => writeln!(out, "  front: {:>6} GPUs {:>14.2} {unit}  {}", p.gpus, p.throughput, p.plan)?,
                search::Objective::Latency => writeln!(
                    out,
                    "  front: {:>6} GPUs {:>10.2} ms a step {:>14.2} {unit}  {}",
                    p.gpus, p.iteration_ms, p.throughput, p.plan
                )?,
            }
        }
    }
    if let Some(path) = &args.json {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            simulated: usize,
            rejected: usize,
            /// `rejected` by reason.
            rejected_why: search::Rejected,
            best: Option<&'a tracecast_replay::workload::Projection>,
            baseline: &'a Option<tracecast_replay::workload::Projection>,
            speedup_over_baseline: Option<f64>,
            /// What `ranked` is ordered by (`throughput`, `latency`).
            objective: search::Objective,
            ranked: &'a [tracecast_replay::workload::Projection],
            /// The plans each ranked plan stands for, which price identically (the text's groups).
            prices_identically: std::collections::BTreeMap<&'a str, &'a [String]>,
            front: &'a [search::FrontPoint],
            /// What training on a GPU of this compute measured (the shipped runs): the best run, how many.
            best_measured_mfu: Option<&'a tracecast_replay::workload::validate::MfuBound>,
            /// A degree the search did not try, and how to try it.
            #[serde(skip_serializing_if = "Option::is_none")]
            not_tried: Option<&'a str>,
        }
        let top = &result.ranked[..result.ranked.len().min(args.top.max(1).saturating_mul(10))];
        write_json(
            path,
            &Doc {
                simulated: result.simulated,
                rejected: result.rejected,
                rejected_why: result.rejected_why,
                best: result.ranked.first(),
                baseline: &result.baseline,
                speedup_over_baseline: result.speedup_over_baseline,
                objective,
                ranked: top,
                prices_identically: top
                    .iter()
                    .filter_map(|p| result.identical.get(&p.plan).map(|same| (p.plan.as_str(), same.as_slice())))
                    .collect(),
                front: &front,
                best_measured_mfu: measured.as_ref().and_then(|n| n.bound.as_ref()),
                not_tried: result.not_tried.as_deref(),
            },
        )?;
    }
    // No plan, no chart: an empty one on invented axes had been written before the error.
    if let Some(dir) = args.plots.as_ref().filter(|_| !front.is_empty()) {
        let chart = tracecast_plots::fits::pareto_chart(&model.name, &front, objective == search::Objective::Latency, unit);
        for f in tracecast_plots::write_chart(&chart, &dir.join("pareto"))? {
            if !args.quiet {
                writeln!(out, "wrote {}", f.display())?;
            }
        }
    }
    if result.ranked.is_empty() {
        // On stderr, as every command's failure: `-q` had exited 1 without a word.
        // The count the search kept (plans it never built, such as no context-parallel degree
        // dividing the sequence, are not among them).
        let pins = space.pinned();
        let tried = match result.rejected {
            // Pins a degree of the cluster cannot take (tp=3 on nodes of 8) build no plan.
            0 if !pins.is_empty() => format!(
                "no plan of the search space could be built with the pins {} (--with): no plan of this cluster, model and batch keeps them all",
                pins.join(", ")
            ),
            0 => "no plan of the search space could be built (its degrees do not divide this model or batch)".to_string(),
            n => format!("of the {n} plan(s) it rejected, {}", result.rejected_why.in_words(result.refused_for_one.as_deref())),
        };
        let gpus = if cluster.gpus == 1 { "1 GPU".to_string() } else { format!("{} GPUs", cluster.gpus) };
        crate::output::stderr_line(format_args!("error: no plan runs on {gpus}: {tried}"));
    }
    Ok(if result.ranked.is_empty() { Outcome::NoPlan } else { Outcome::Done })
}
