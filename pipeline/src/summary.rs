//! The terminal summary of `tracecast analyze`.

use std::io::{self, Write};

use tracecast_ingest::analysis::{self, JobAnalysis};

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { 100.0 * part / whole } else { 0.0 }
}

fn short(name: &str, width: usize) -> String {
    let base = name.split('(').next().unwrap_or(name).trim();
    if base.chars().count() <= width {
        return base.to_string();
    }
    let mut s: String = base.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Writes one job's summary: per-rank table, totals in words, collectives, steps, top kernels.
pub fn write_job(w: &mut dyn Write, a: &JobAnalysis) -> io::Result<()> {
    let t = &a.totals;
    let window = a.ranks.first().map_or("all", |r| if r.window == tracecast_ingest::analysis::WindowMode::Steps { "steps" } else { "all" });
    writeln!(w, "Job {} — {} rank(s) read, world size {}, window: {window}", a.path, a.ranks.len(), a.world_size)?;
    // The ranks of the world that are not here, named (a job missing rank 0 had read as whole
    // but for the count): the totals are of the ranks read.
    let missing = a.ranks_not_read();
    if !missing.is_empty() {
        // An export holds every GPU of its capture: unread, how many is not known.
        let exports =
            a.bad_files.iter().filter(|b| b.unread_rank && tracecast_ingest::nsys::is_export(std::path::Path::new(&b.file))).count();
        let exports = match exports {
            0 => String::new(),
            1 => "; the unreadable Nsight Systems export is counted as one rank, and may have held more".to_string(),
            n => format!("; each of the {n} unreadable Nsight Systems exports is counted as one rank, and may have held more"),
        };
        writeln!(
            w,
            "  not read: {} of the world's {} (the totals are of the ranks read{exports})",
            tracecast_ingest::analysis::rank_list(&missing),
            a.world_size
        )?;
    }
    // Ranks read whose number the world does not hold (kept, and noted per rank): the count
    // above had read as the world's ranks beside "not read" for the ones they stand in for.
    let outside: Vec<u32> = a.ranks.iter().map(|r| r.rank).filter(|&r| r >= a.world_size).collect();
    if !outside.is_empty() {
        writeln!(
            w,
            "  read but outside the world of {}: {} (their traces say a rank not below the world size; see Notes)",
            a.world_size,
            tracecast_ingest::analysis::rank_list(&outside)
        )?;
    }
    writeln!(
        w,
        "{:>5}  {:<24} {:>11} {:>6} {:>8} {:>6} {:>8} {:>8} {:>7} {:>6}",
        "rank", "device", "GPU span ms", "busy%", "compute%", "comm%", "overlap%", "exposed%", "memory%", "idle%"
    )?;
    let row = |w: &mut dyn Write, label: &str, device: &str, b: &tracecast_ingest::analysis::Breakdown| {
        let s = b.gpu_span_us;
        writeln!(
            w,
            "{label:>5}  {:<24} {:>11.3} {:>6.1} {:>8.1} {:>6.1} {:>8.1} {:>8.1} {:>7.1} {:>6.1}",
            short(device, 24),
            s / 1000.0,
            pct(b.busy_us, s),
            pct(b.compute_us, s),
            pct(b.comm_us, s),
            pct(b.overlap_us, s),
            pct(b.exposed_comm_us, s),
            pct(b.memory_us, s),
            pct(b.idle_us, s)
        )
    };
    for r in &a.ranks {
        row(w, &r.rank.to_string(), r.device.as_deref().unwrap_or("-"), &r.breakdown)?;
    }
    if a.ranks.len() > 1 {
        row(w, "all", "", &t.breakdown)?;
    }
    if a.ranks.len() > 1 && !t.steps.is_empty() {
        let mean = a.mean_step_us();
        let slowest = t.steps.iter().max_by(|x, y| x.step_us.total_cmp(&y.step_us)).map(|s| s.slowest_rank).unwrap_or_default();
        writeln!(
            w,
            "Job step time (the slowest rank per step): mean {:.3} ms over {} step{}; slowest step on rank {slowest}",
            mean / 1000.0,
            t.steps.len(),
            if t.steps.len() == 1 { "" } else { "s" }
        )?;
    }
    if a.comm_by_dimension.iter().any(|d| d.comm_us > 0.0) {
        let parts: Vec<String> = a
            .comm_by_dimension
            .iter()
            .map(|d| {
                let hours = d.exposed_gpu_hours.map_or(String::new(), |h| format!(", {} GPU-hours", analysis::gpu_hours_text(h)));
                format!("{} {:.3} ms (exposed {:.3} ms{hours})", d.dimension.as_str(), d.comm_us / 1000.0, d.exposed_comm_us / 1000.0)
            })
            .collect();
        writeln!(w, "Communication by parallelism dimension (all ranks): {}", parts.join("; "))?;
    }
    if !a.stragglers.is_empty() {
        // The waits are time in the others' collective kernels: lost only where no compute ran
        // beside them (a job whose communication hides under compute "waits" hours and loses none).
        writeln!(
            w,
            "Slowest ranks (arrived last at collectives matched across ranks; the time the others' collectives waited for them, lost only where no compute ran beside it, as exposed communication counts it):"
        )?;
        const SHOWN: usize = 5;
        for s in a.stragglers.iter().take(SHOWN) {
            let hours =
                s.wait_caused_gpu_hours.map_or(String::new(), |h| format!(", {} GPU-hours waited in the job", analysis::gpu_hours_text(h)));
            writeln!(w, "  rank {:>5}: last {:>5} times, {:>10.3} GPU-ms waited{hours}", s.rank, s.times_last, s.wait_caused_us / 1000.0)?;
        }
        if a.stragglers.len() > SHOWN {
            writeln!(w, "  … and {} more rank(s) (--json and --csv list every one)", a.stragglers.len() - SHOWN)?;
        }
        if let Some(words) = a.straggler_waits_beyond_exposed() {
            writeln!(w, "  {words}")?;
        }
    }
    writeln!(w)?;
    if t.breakdown.gpu_span_us <= 0.0 {
        // Steps that ran no GPU work (--steps) are not traces without GPU activity.
        let steps_chosen = a.ranks.iter().any(|r| r.window == tracecast_ingest::analysis::WindowMode::Steps);
        let what = if steps_chosen { "in the analysed steps" } else { "in this job's traces" };
        writeln!(w, "No GPU activity {what}: nothing to break down.")?;
    } else {
        writeln!(
            w,
            "Exposed communication: {:.1} % of GPU time ({:.3} ms of {:.3} ms over {} rank(s)) was communication with no compute running under it.",
            100.0 * t.exposed_comm_fraction,
            t.breakdown.exposed_comm_us / 1000.0,
            t.breakdown.gpu_span_us / 1000.0,
            t.ranks
        )?;
        writeln!(
            w,
            "Communication took {:.1} % of GPU time, {:.1} % of it hidden under compute; compute {:.1} %, memory copies and sets {:.1} %, idle {:.1} %.",
            100.0 * t.comm_fraction,
            pct(t.breakdown.overlap_us, t.breakdown.comm_us),
            100.0 * t.compute_fraction,
            pct(t.breakdown.memory_us, t.breakdown.gpu_span_us),
            100.0 * t.idle_fraction
        )?;
        if let Some(h) = &t.gpu_hours {
            writeln!(
                w,
                "On {} GPUs for {} h ({} GPU-hours): {} GPU-hours of exposed communication, {} of compute, {} idle.",
                h.job_gpus,
                h.job_hours,
                analysis::gpu_hours_text(h.total),
                analysis::gpu_hours_text(h.exposed_comm),
                analysis::gpu_hours_text(h.compute),
                analysis::gpu_hours_text(h.idle)
            )?;
        }
        if let Some(idle) = a.idle_split_over_ranks() {
            writeln!(
                w,
                "Idle: host wait {:.3} ms, kernel wait {:.3} ms (gaps < {} µs), other {:.3} ms.",
                idle.host_wait_us / 1000.0,
                idle.kernel_wait_us / 1000.0,
                idle.kernel_wait_threshold_us,
                idle.other_us / 1000.0
            )?;
        }
    }
    if let Some(c) = &a.clock_alignment {
        // A residual beyond the collectives' transfers is said where the alignment is (it had been
        // said only among rank 0's notes at the end, under an unqualified headline).
        let doubt = if c.doubtful.is_some() {
            ": more than the median transfer, so these offsets, the waits and the slowest ranks may pair unrelated kernels (notes)"
        } else {
            "."
        };
        writeln!(w, "Clocks aligned on {} matched collectives; residual {:.1} µs RMS{doubt}", c.instances, c.residual_us)?;
    }

    // Collectives summed over ranks.
    let coll = a.collectives_over_ranks();
    if !coll.is_empty() {
        writeln!(w, "\nCollectives (all ranks):")?;
        writeln!(
            w,
            "  {:<15} {:<18} {:>5} {:>7} {:>11} {:>10} {:>11} {:>11} {:>7}",
            "collective", "process group", "ranks", "count", "total ms", "GB", "algbw GB/s", "busbw GB/s", "wait%"
        )?;
        for c in &coll {
            let fmt = |v: Option<f64>| v.map_or("-".to_string(), tracecast_ingest::analysis::bandwidth_text);
            writeln!(
                w,
                "  {:<15} {:<18} {:>5} {:>7} {:>11.3} {:>10} {:>11} {:>11} {:>7}",
                c.collective.as_str(),
                clip(c.process_group.as_deref().unwrap_or("-"), 18),
                c.group_size.map_or("-".into(), |n| n.to_string()),
                c.count,
                c.total_us / 1000.0,
                c.bytes.map_or("-".into(), |b| format!("{:.3}", b as f64 / 1e9)),
                fmt(c.algbw_gbps),
                fmt(c.busbw_gbps),
                match (c.wait_us, c.transfer_us) {
                    (Some(wt), Some(tr)) if wt + tr > 0.0 => format!("{:.1}", pct(wt, wt + tr)),
                    _ => "-".into(),
                }
            )?;
        }
        if coll.iter().any(|c| c.wait_us.is_some() && c.matched < c.count) {
            writeln!(w, "  wait% is of the kernels matched across ranks, which not every kernel was (the CSV's `matched` beside `count`)")?;
        }
    }

    if let Some(r) = a.ranks.first() {
        if !r.steps.is_empty() {
            writeln!(w, "\nSteps (rank {}):", r.rank)?;
            writeln!(w, "  {:>8} {:>11} {:>11} {:>8} {:>9}", "step", "CPU ms", "GPU ms", "busy%", "exposed%")?;
            for s in &r.steps {
                let b = &s.breakdown;
                writeln!(
                    w,
                    "  {:>8} {:>11.3} {:>11.3} {:>8.1} {:>9.1}",
                    s.step,
                    s.cpu_dur_us / 1000.0,
                    b.gpu_span_us / 1000.0,
                    pct(b.busy_us, b.gpu_span_us),
                    pct(b.exposed_comm_us, b.gpu_span_us)
                )?;
            }
        }
        if !r.top_kernels.is_empty() {
            writeln!(w, "\nTop kernels (rank {}):", r.rank)?;
            writeln!(w, "  {:>7} {:>11} {:>6}  {:<8} name", "count", "total ms", "busy%", "class")?;
            let shown: Vec<_> = r.top_kernels.iter().take(8).collect();
            let names = tracecast_ingest::analysis::short_kernel_names(&shown.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), 80);
            for (k, name) in shown.iter().zip(names) {
                let class = k.class.as_str();
                writeln!(
                    w,
                    "  {:>7} {:>11.3} {:>6.1}  {:<8} {}",
                    k.count,
                    k.total_us / 1000.0,
                    pct(k.total_us, r.breakdown.busy_us),
                    class,
                    name
                )?;
            }
        }
    }
    let notes = a.notes_in_words();
    if !notes.is_empty() {
        writeln!(w, "\nNotes:")?;
        for n in notes {
            writeln!(w, "  {n}")?;
        }
    }
    writeln!(w)?;
    Ok(())
}
