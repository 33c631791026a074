//! `tracecast project` and `tracecast search`: wiring of the workload models
//! and their terminal summaries.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use tracecast_replay::workload::llm::{Cluster, Plan, SystemOverrides, Task, Transformer};
use tracecast_replay::workload::{Projection, madmax};

/// A model given as a preset name, a model file with the fields of a runs
/// file's `model` (validate's format), or a MAD-Max model file.
pub(crate) fn model(spec: &str) -> Result<Transformer> {
    if let Some(m) = Transformer::preset(spec) {
        return Ok(m);
    }
    let path = Path::new(spec);
    anyhow::ensure!(path.exists(), "--model {spec}: neither a preset ({}) nor a file", Transformer::preset_names().join(", "));
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let name = path.file_stem().map_or_else(|| spec.to_string(), |s| s.to_string_lossy().into_owned());
    // A MAD-Max file says its `type`; anything else is read as a runs file's model.
    let value: serde_json::Value = serde_json::from_slice(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    if value.get("type").is_some() {
        let m: madmax::ModelConfig =
            serde_json::from_value(value).with_context(|| format!("{}: not a MAD-Max model configuration", path.display()))?;
        return Transformer::from_madmax(&m).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
    }
    let m: tracecast_replay::workload::validate::RunModel = serde_json::from_value(value).map_err(|_| {
        anyhow::anyhow!(
            "{}: neither a model (layers, hidden, heads, kv_heads, ffn, vocab, seq, activation, tied_embeddings; or preset, seq) nor a MAD-Max model configuration (type, …)",
            path.display()
        )
    })?;
    m.transformer(&name).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// A cluster given as a catalog GPU id with a GPU count, or a MAD-Max system file.
pub(crate) fn cluster(
    spec: &str,
    gpus: Option<u32>,
    overrides: &SystemOverrides,
    bytes_per_param: f64,
    catalog: &tracecast_calibrate::Catalog,
    device: Option<&tracecast_calibrate::DeviceModel>,
    measurements: &[std::path::PathBuf],
) -> Result<Cluster> {
    let mut c = cluster_of(spec, gpus, bytes_per_param, catalog, device)?;
    if !measurements.is_empty() {
        c.use_measurements(std::sync::Arc::new(tracecast_calibrate::measured::Measurements::with_files(measurements)?));
    }
    overrides.apply(c).map_err(|e| anyhow::anyhow!("--system {spec}: {e}"))
}

fn cluster_of(
    spec: &str,
    gpus: Option<u32>,
    bytes_per_param: f64,
    catalog: &tracecast_calibrate::Catalog,
    device: Option<&tracecast_calibrate::DeviceModel>,
) -> Result<Cluster> {
    let path = Path::new(spec);
    if path.exists() {
        let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let s: madmax::SystemConfig =
            serde_json::from_slice(&text).with_context(|| format!("{}: not a MAD-Max system configuration", path.display()))?;
        let mut c = Cluster::from_madmax(&s, bytes_per_param).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if let Some(n) = gpus {
            c.gpus = n;
        }
        return Ok(c);
    }
    let n = gpus.context("--system GPU needs --gpus N (how many)")?;
    // A profile must be of the system's GPU; without one, the GPU's shipped profile.
    let gpu = catalog.gpu(spec)?;
    let shipped;
    let device = match device {
        Some(d) => {
            let of = d.gpu.as_ref().map(|g| g.id.clone());
            anyhow::ensure!(
                of.as_deref() == Some(gpu.id.as_str()),
                "--profile ({}) is of {}, not of --system {} (calibrate traces measured on {} and pass that profile)",
                d.source,
                of.as_deref().unwrap_or("a GPU the catalog does not know"),
                gpu.id,
                gpu.id
            );
            Some(d)
        }
        None => {
            shipped = tracecast_calibrate::shipped::for_gpu(gpu, catalog);
            shipped.as_ref()
        }
    };
    Cluster::for_model(catalog, spec, n, bytes_per_param, device).map_err(|e| anyhow::anyhow!("--system {spec}: {e}"))
}

/// The task from `--task` (train, prefill, decode); `seq` is the model's sequence length.
pub(crate) fn task(spec: &str, shape: &crate::InferenceArgs, seq: u32) -> Result<Task> {
    let batch = shape.batch;
    Ok(match spec {
        "train" | "pretrain" | "finetune" => Task::Train,
        "prefill" => Task::Prefill { batch, prompt: shape.prompt.unwrap_or(seq) },
        "decode" => Task::Decode { batch, context: shape.context.unwrap_or(seq) },
        other => anyhow::bail!("--task {other}: train, prefill, decode, or a MAD-Max task file"),
    })
}

/// The terminal summary of a projection.
pub(crate) fn print(out: &mut impl Write, p: &Projection) -> std::io::Result<()> {
    let t = &p.times;
    writeln!(out, "{} on {} — {}, plan {} (assumptions: {})", p.model, p.system, p.task, p.plan, p.assumptions)?;
    let list = |compute: bool| {
        t.by_kind_ms
            .iter()
            .filter(|(k, _)| matches!(**k, "gemm" | "embedding" | "memory_bound" | "attention") == compute)
            .map(|(k, v)| format!("{k} {v:.2} ms"))
            .collect::<Vec<_>>()
            .join(" · ")
    };
    writeln!(out, "  Compute:       {:.2} ms ({})", t.compute_ms, list(true))?;
    writeln!(out, "  Communication: {:.2} ms ({})", t.comm_ms, list(false))?;
    let of = |a: f64, b: f64| if b > 0.0 { 100.0 * a / b } else { 0.0 };
    writeln!(
        out,
        "  Exposed communication {:.2} ms ({:.1} % of communication, {:.1} % of the iteration); overlapped {:.2} ms",
        t.exposed_comm_ms,
        of(t.exposed_comm_ms, t.comm_ms),
        of(t.exposed_comm_ms, t.iteration_ms),
        t.overlapped_comm_ms
    )?;
    if t.bubble_ms > 0.0 {
        writeln!(out, "  Pipeline bubble {:.2} ms ({:.1} % of the iteration)", t.bubble_ms, of(t.bubble_ms, t.iteration_ms))?;
    }
    writeln!(out, "  Iteration {:.2} ms · throughput {:.2} samples/s (global batch {})", t.iteration_ms, p.throughput, p.global_batch)?;
    if let Some(v) = p.ttft_ms {
        writeln!(out, "  Time to first token {v:.2} ms")?;
    }
    if let Some(v) = p.tpot_ms {
        writeln!(out, "  Time per output token {v:.3} ms ({:.0} tokens/s over the system)", p.throughput)?;
    }
    let m = &p.memory;
    writeln!(
        out,
        "  Memory per GPU {:.2} GB of {:.0} GB: {} (weights {:.2}, gradients {:.2}, optimizer {:.2}, activations {:.2}, KV cache {:.2})",
        p.memory_gb_per_gpu,
        p.hbm_gb,
        if p.fits_memory { "fits" } else { "DOES NOT FIT" },
        m.weights_gb,
        m.gradients_gb,
        m.optimizer_gb,
        m.activations_gb,
        m.kv_cache_gb
    )?;
    for n in &p.notes {
        writeln!(out, "  note: {n}")?;
    }
    Ok(())
}

/// Writes `value` as pretty JSON, atomically.
pub(crate) fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    tracecast_ingest::output::write_atomic(path, &bytes)?;
    Ok(())
}

/// Writes the timeline for Perfetto (gzip when the name ends in .gz).
pub(crate) fn write_perfetto(path: &Path, timeline: &tracecast_replay::workload::Timeline, title: &str) -> Result<()> {
    let mut text = Vec::new();
    timeline.write_perfetto(&mut text, title)?;
    let bytes = if path.to_string_lossy().ends_with(".gz") {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&text)?;
        enc.finish()?
    } else {
        text
    };
    tracecast_ingest::output::write_atomic(path, &bytes)?;
    Ok(())
}

/// A plan from `--parallel`.
pub(crate) fn parse_plan(spec: &str) -> Result<Plan> {
    Plan::parse(spec).map_err(|e| anyhow::anyhow!("--parallel {spec:?}: {e}"))
}

fn device_of(profile: Option<&PathBuf>, catalog: &tracecast_calibrate::Catalog) -> Result<Option<tracecast_calibrate::DeviceModel>> {
    Ok(match profile {
        Some(p) => Some(tracecast_calibrate::DeviceModel::from_profile_file(p, catalog)?),
        None => None,
    })
}

pub(crate) fn run_project(args: crate::ProjectArgs) -> Result<ExitCode> {
    use tracecast_replay::workload::{llm, madmax};
    let catalog = crate::catalog_with(&args.hw)?;
    let device = device_of(args.profile.as_ref(), &catalog)?;
    let overrides = args.system_overrides.overrides();
    let (projection, timeline) = if let Some(files) = &args.madmax {
        anyhow::ensure!(
            overrides == SystemOverrides::default(),
            "--gpus-per-node, --nic-gbps-per-gpu, --hbm-gb and --hbm-gbps change a catalog system (--system GPU); edit the MAD-Max system file instead"
        );
        let (m, s, t) = madmax::read_configs(&files[0], &files[1], &files[2])?;
        match args.assumptions {
            crate::AssumptionsArg::Madmax => {
                let run = madmax::run(&m, &s, &t)?;
                (run.projection(&m, &s, &t), run.timeline)
            }
            crate::AssumptionsArg::Tracecast if m.kind == "DLRM" => {
                use tracecast_replay::workload::dlrm;
                let model = dlrm::Dlrm::from_madmax(&m).map_err(anyhow::Error::msg)?;
                let mut cluster = llm::Cluster::from_madmax(&s, m.bytes_per_nonemb_param).map_err(anyhow::Error::msg)?;
                if let Some(n) = args.gpus {
                    cluster.gpus = n;
                }
                let mut plan = dlrm::DlrmPlan::from_madmax(&t).map_err(|e| anyhow::anyhow!("{}: {e}", files[2].display()))?;
                if let Some(sh) = &args.sharding {
                    plan.sharding = dlrm::Sharding::parse(sh).map_err(anyhow::Error::msg)?;
                }
                dlrm::project(&model, &cluster, &plan, t.kind != "inference")?
            }
            crate::AssumptionsArg::Tracecast => {
                let model = llm::Transformer::from_madmax(&m).map_err(|e| anyhow::anyhow!("{}: {e}", files[0].display()))?;
                let mut cluster = llm::Cluster::from_madmax(&s, m.bytes_per_nonemb_param).map_err(anyhow::Error::msg)?;
                if let Some(n) = args.gpus {
                    cluster.gpus = n;
                }
                let (mut plan, task) = llm::Plan::from_madmax(&t, model.seq).map_err(|e| anyhow::anyhow!("{}: {e}", files[2].display()))?;
                if let Some(spec) = &args.parallel {
                    plan = parse_plan(spec)?;
                }
                llm::project_timeline(&model, &cluster, &plan, task)?
            }
        }
    } else {
        anyhow::ensure!(
            args.assumptions == crate::AssumptionsArg::Tracecast,
            "--assumptions madmax needs the MAD-Max files: --madmax MODEL SYSTEM TASK"
        );
        let (Some(m), Some(sys)) = (&args.model, &args.system) else {
            anyhow::bail!("give --model and --system (or --madmax MODEL SYSTEM TASK)")
        };
        let model = model(m)?;
        let cluster = cluster(sys, args.gpus, &overrides, model.bytes, &catalog, device.as_ref(), &args.measurements)?;
        let seq = model.seq as u32;
        let (plan, task) = if Path::new(&args.task).exists() {
            let text = std::fs::read(&args.task)?;
            let t: madmax::TaskConfig = serde_json::from_slice(&text).with_context(|| format!("{}: not a MAD-Max task", args.task))?;
            llm::Plan::from_madmax(&t, model.seq).map_err(anyhow::Error::msg)?
        } else {
            let task = task(&args.task, &args.inference, seq)?;
            let default = if task == llm::Task::Train {
                format!("fsdp={}", cluster.gpus)
            } else {
                let tp = cluster.gpus_per_node.min(cluster.gpus);
                format!("tp={tp},dp={}", cluster.gpus / tp.max(1))
            };
            (parse_plan(args.parallel.as_deref().unwrap_or(&default))?, task)
        };
        let plan = match &args.parallel {
            Some(spec) => parse_plan(spec)?,
            None => plan,
        };
        llm::project_timeline(&model, &cluster, &plan, task)?
    };
    if !args.quiet {
        print(&mut std::io::stdout().lock(), &projection)?;
    }
    if let Some(path) = &args.json {
        write_json(path, &projection)?;
    }
    if let Some(path) = &args.perfetto {
        write_perfetto(path, &timeline, &format!("{} on {}", projection.model, projection.system))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn run_search(args: crate::SearchArgs) -> Result<ExitCode> {
    use tracecast_replay::workload::search;
    let catalog = crate::catalog_with(&args.hw)?;
    let device = device_of(args.profile.as_ref(), &catalog)?;
    let model = model(&args.model)?;
    let cluster =
        cluster(&args.system, args.gpus, &args.system_overrides.overrides(), model.bytes, &catalog, device.as_ref(), &args.measurements)?;
    let seq = model.seq as u32;
    let task = task(&args.task, &args.inference, seq)?;
    let space = search::SearchSpace { global_batch: args.gbs.unwrap_or(0), ..Default::default() };
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
    let front =
        if args.plots.is_some() || args.json.is_some() { search::front(&model, &cluster, task, &space, &counts) } else { Vec::new() };
    if !args.quiet {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "{} on {} — {}: {} plans simulated, {} rejected (degrees that do not divide or memory that does not fit), {:.2} s",
            model.name,
            cluster.name,
            task.as_str(),
            result.simulated,
            result.rejected,
            elapsed
        )?;
        writeln!(out, "{:>4}  {:<58} {:>13} {:>14} {:>9} {:>10}", "rank", "plan", "iteration ms", "samples/s", "exposed", "memory GB")?;
        for (i, p) in result.ranked.iter().take(args.top).enumerate() {
            writeln!(
                out,
                "{:>4}  {:<58} {:>13.2} {:>14.2} {:>8.1}% {:>10.1}",
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
                "Baseline {} ({}): {:.2} samples/s; the best plan is {x:.2}× faster",
                result.baseline_name, b.plan, b.throughput
            )?,
            _ => writeln!(out, "Baseline {} (tp=1, pp=1): no such plan fits in memory", result.baseline_name)?,
        }
        if result.ranked.is_empty() {
            writeln!(out, "No plan fits in memory on {} GPUs.", cluster.gpus)?;
        }
        // The best plan's model FLOPs utilization against what this GPU was measured to reach.
        if let (Some(best), tracecast_replay::workload::llm::Task::Train) = (result.ranked.first(), task) {
            let mfu = tracecast_replay::workload::llm::mfu(&model, &cluster, best);
            let gpu = catalog.gpu(&args.system).ok();
            // The best 16-bit GEMM measured (the MFU is of the 16-bit peak).
            use tracecast_calibrate::catalog::Dtype;
            let traced = gpu
                .and_then(|g| device.clone().or_else(|| tracecast_calibrate::shipped::for_gpu(g, &catalog)))
                .and_then(|d| d.best_achieved(tracecast_calibrate::work::KernelClass::Gemm, &[Dtype::Bf16, Dtype::Fp16]));
            // And the measured performance base's best 16-bit GEMM of this GPU.
            let published =
                gpu.zip(cluster.prices.as_ref()).and_then(|(g, p)| p.pricing.best_gemm_fraction(g, Dtype::Bf16)).map(|(f, _)| f);
            let measured = match (traced, published) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            match measured {
                Some(m) if mfu > m => writeln!(
                    out,
                    "note: the best plan implies {:.0} % MFU, more than the best GEMM measured on this GPU reached ({:.0} % of peak): its absolute throughput is optimistic (the ranking of plans still holds)",
                    100.0 * mfu,
                    100.0 * m
                )?,
                Some(m) => writeln!(
                    out,
                    "The best plan implies {:.0} % MFU (the best GEMM measured on this GPU: {:.0} % of peak)",
                    100.0 * mfu,
                    100.0 * m
                )?,
                None => writeln!(
                    out,
                    "note: the best plan implies {:.0} % MFU; no GEMM of this GPU was measured to bound it (no profile, shipped calibration or measured base)",
                    100.0 * mfu
                )?,
            }
        }
        for p in front.iter().filter(|p| p.pareto) {
            writeln!(out, "  front: {:>6} GPUs {:>14.2} samples/s  {}", p.gpus, p.throughput, p.plan)?;
        }
    }
    if let Some(path) = &args.json {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            simulated: usize,
            rejected: usize,
            best: Option<&'a tracecast_replay::workload::Projection>,
            baseline: &'a Option<tracecast_replay::workload::Projection>,
            speedup_over_baseline: Option<f64>,
            ranked: &'a [tracecast_replay::workload::Projection],
            front: &'a [search::FrontPoint],
        }
        let top = &result.ranked[..result.ranked.len().min(args.top.max(1).saturating_mul(10))];
        write_json(
            path,
            &Doc {
                simulated: result.simulated,
                rejected: result.rejected,
                best: result.ranked.first(),
                baseline: &result.baseline,
                speedup_over_baseline: result.speedup_over_baseline,
                ranked: top,
                front: &front,
            },
        )?;
    }
    if let Some(dir) = &args.plots {
        let chart = tracecast_plots::fits::pareto_chart(&model.name, &front);
        for f in tracecast_plots::write_chart(&chart, &dir.join("pareto"))? {
            if !args.quiet {
                outln!("wrote {}", f.display())?;
            }
        }
    }
    Ok(if result.ranked.is_empty() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn print_validation(out: &mut impl Write, v: &tracecast_replay::workload::validate::Validation) -> Result<()> {
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
            _ => writeln!(out, "{:<28} {:>14.1} {:>14} {:>9}  {}", r.id, r.measured_tokens_per_s_per_gpu, "-", "-", r.notes.join("; "))?,
        }
    }
    writeln!(
        out,
        "{} runs: median |error| {:.1} %, max {:.1} %; {} projected faster than measured, {} slower (tokens/s per GPU)",
        v.runs.iter().filter(|r| r.error.is_some()).count(),
        100.0 * v.median_abs_error,
        100.0 * v.max_abs_error,
        v.optimistic,
        v.pessimistic
    )?;
    Ok(())
}

pub(crate) fn run_validate(args: crate::ValidateArgs) -> Result<ExitCode> {
    use tracecast_replay::workload::validate;
    let catalog = crate::catalog_with(&args.hw)?;
    let text = std::fs::read(&args.runs).with_context(|| format!("reading {}", args.runs.display()))?;
    let file: validate::RunsFile = serde_json::from_slice(&text)
        .with_context(|| format!("{}: not a runs file (see `tracecast validate --help`)", args.runs.display()))?;
    let devices = args
        .profile
        .iter()
        .map(|p| tracecast_calibrate::DeviceModel::from_profile_file(p, &catalog).map_err(anyhow::Error::from))
        .collect::<Result<Vec<_>>>()?;
    let measurements = if args.measurements.is_empty() {
        None
    } else {
        Some(std::sync::Arc::new(tracecast_calibrate::measured::Measurements::with_files(&args.measurements)?))
    };
    if let Some(out_path) = &args.fit {
        let fit = validate::fit(&file, &catalog, &devices, &args.runs.display().to_string(), measurements.as_ref());
        anyhow::ensure!(!fit.gpus.is_empty(), "{}: no run is on a catalog GPU: nothing to fit", args.runs.display());
        let many = fit.gpus.len() > 1;
        let mut written = Vec::new();
        for g in &fit.gpus {
            let path = if many { crate::per_device(out_path, &g.gpu) } else { out_path.clone() };
            let mut bytes = serde_json::to_vec_pretty(&g.profile)?;
            bytes.push(b'\n');
            tracecast_ingest::output::write_atomic(&path, &bytes)?;
            written.push(path);
        }
        if !args.quiet {
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "The model's free parameter, fitted per GPU (least squares of log(projected / measured)): the GEMM table correction, measured ÷ table time"
            )?;
            for g in &fit.gpus {
                writeln!(
                    out,
                    "  {:<12} GEMM correction {:.3} (was {:.3}, {}) from {} run(s)",
                    g.gpu,
                    g.gemm_correction,
                    g.previous_gemm_correction,
                    g.previous_source,
                    g.runs.len()
                )?;
            }
            writeln!(out, "\nWith the fitted correction:")?;
            print_validation(&mut out, &fit.fitted)?;
            writeln!(out, "\nLeave one run out (each run priced by the correction fitted to the other runs of its GPU):")?;
            print_validation(&mut out, &fit.leave_one_out)?;
            for p in &written {
                writeln!(out, "Profile written to {} (read by project, search and validate --profile)", p.display())?;
            }
        }
        if let Some(path) = &args.json {
            write_json(path, &fit)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let v = validate::validate(&file, &catalog, &devices, measurements.as_ref());
    if !args.quiet {
        print_validation(&mut std::io::stdout().lock(), &v)?;
    }
    if let Some(path) = &args.json {
        write_json(path, &v)?;
    }
    Ok(ExitCode::SUCCESS)
}
