//! `tracecast report`: one self-contained HTML page per run (or pair of runs)
//! — the summary in words, every chart as inline SVG, sortable tables, and the
//! diff of two runs. No network access: no external scripts, styles, fonts or
//! images; the inlined script (`assets/report.js`) sorts and filters tables
//! and makes the timeline explorable.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use tracecast_calibrate::Profile;
use tracecast_calibrate::diff::{Delta, TraceDiff};
use tracecast_calibrate::work::OpRow;
use tracecast_ingest::analysis::{ActivityClass, CollectiveSample, CollectiveStats, JobAnalysis, MessageSizeRow, gpu_hours_text};
use tracecast_replay::JobReplay;

use crate::bars::{Bars, Series};
use crate::breakdown::{SEGMENTS, rank_breakdown, segments, step_breakdown};
use crate::chart::{Error, Scatter};
use crate::fits::kernel_charts;
use crate::page::{Hole, Page, Part, esc};
use crate::timeline::StepKernels;

/// Everything the report shows about one measured job: results only,
/// computed before (one rank at a time, see the CLI's `report`); the page
/// draws them ([`draw_measured`]).
#[derive(Debug, Clone, Copy)]
pub struct JobReport<'a> {
    /// Their analysis (`analyze`).
    pub analysis: &'a JobAnalysis,
    /// The calibration of this job's device(s), when computed.
    pub profile: Option<&'a Profile>,
    /// The GPU timeline of one step and its note, when the traces have kernels.
    pub timeline: Option<&'a (StepKernels, String)>,
    /// Every communication kernel, matched across ranks.
    pub collectives: &'a [CollectiveSample],
    /// The collectives table of the job, as `analyze` prints it ([`JobAnalysis::collectives_over_ranks`]).
    pub collectives_over_ranks: &'a [CollectiveStats],
    /// Collectives by type, group and message size.
    pub message_sizes: &'a [MessageSizeRow],
    /// Compute kernels by launching op.
    pub ops: &'a [OpRow],
}

/// One job's section of the page, drawn in two steps so that no result
/// outlives what it is drawn from: what was measured as soon as the job is
/// analysed ([`draw_measured`]; the replay runs after), then its replays
/// ([`JobPart::draw_replays`]). Its HTML leaves the job's and the figures'
/// numbers for the page to fill in, and (with a chart directory) its chart
/// files keep provisional names until the page numbers them. Dropped without
/// a page, it removes them.
#[derive(Debug)]
pub struct JobPart {
    path: String,
    measured: Part,
    replays: Option<Part>,
}

/// Draws the measured part of a job's section and holds it until the page
/// takes it ([`JobPart::draw_replays`] adds the replays); with `png_dir`, its
/// charts also go there as SVG and PNG files.
pub fn draw_measured(job: &JobReport<'_>, png_dir: Option<&Path>) -> Result<JobPart, Error> {
    let mut measured = Part::new(png_dir);
    measured_section(&mut measured, job)?;
    measured.hold();
    Ok(JobPart { path: job.analysis.path.clone(), measured, replays: None })
}

impl JobPart {
    /// Draws the job's identity replay and, when there is one, a projection
    /// (its label, such as `MI300X`, and its replay) below what was measured.
    pub fn draw_replays(&mut self, replay: &JobReplay, projection: Option<(&str, &JobReplay)>) -> Result<(), Error> {
        let mut part = Part::new(self.measured.png_dir());
        replay_section(&mut part, replay, projection)?;
        part.hold();
        self.replays = Some(part);
        Ok(())
    }
}

/// The whole page.
#[derive(Debug)]
pub struct Report<'a> {
    /// One section per job.
    pub jobs: Vec<JobPart>,
    /// The comparison of the first two jobs, when two were given.
    pub diff: Option<&'a TraceDiff>,
    /// Jobs given that gave no section (no rank could be read), each with the first reason:
    /// said at the top, so that a page of one job is never taken for the pair asked for.
    pub unread_jobs: Vec<(String, String)>,
    /// Line at the foot of the page (tool and version).
    pub generator: String,
    /// Where the diff's charts also go as SVG and PNG files (the jobs' went
    /// where [`draw_measured`] was told).
    pub png_dir: Option<PathBuf>,
}

/// Jobs with more ranks than this get the spread across ranks instead of a row per rank.
const DISTRIBUTION_FROM: usize = 16;

/// Bus bandwidth against message size per collective type, with the fitted
/// α-β curve when the profile has one.
pub fn collective_charts(samples: &[CollectiveSample], profile: Option<&Profile>) -> Vec<Scatter> {
    // Per collective: its points (message size, bus bandwidth) and how many were of each group size.
    type Points = (Vec<(f64, f64)>, BTreeMap<i64, usize>);
    let mut by: BTreeMap<&'static str, (tracecast_ingest::collective::Collective, Points)> = BTreeMap::new();
    for c in samples {
        let (Some(bytes), Some(n)) = (c.bytes, c.group_size) else { continue };
        let Some(k) = c.collective.bus_factor(n).filter(|k| *k > 0.0) else { continue };
        let t = c.transfer_us.unwrap_or(c.dur_us);
        if bytes == 0 || t <= 0.0 {
            continue;
        }
        let (_, (points, sizes)) = by.entry(c.collective.as_str()).or_insert((c.collective, Default::default()));
        points.push((bytes as f64, k * bytes as f64 / t / 1e3));
        *sizes.entry(n).or_default() += 1;
    }
    by.into_iter()
        .map(|(name, (collective, (points, sizes)))| {
            // The fit of the group size most of the points are of, drawn against message size S:
            // its time at bus bytes k·S (it had been drawn at k·S on this S axis, 1.5× to the right
            // for an all-reduce over 4).
            let common = sizes.iter().max_by_key(|(n, c)| (**c, std::cmp::Reverse(**n))).map(|(n, _)| *n);
            let fit = profile.and_then(|p| {
                let of = |l: &&tracecast_calibrate::profile::LinkFit| l.collective == collective;
                p.links.iter().filter(of).find(|l| l.group_size == common).or_else(|| p.links.iter().find(of))
            });
            // The link rule's time of each size (`AlphaBeta::collective_us`), as bus bandwidth.
            let curve = fit
                .and_then(|l| {
                    let n = l.group_size.or(common)?;
                    let k = collective.bus_factor(n).filter(|k| *k > 0.0)?;
                    let (lo, hi) = points.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
                    let link = tracecast_calibrate::cost::AlphaBeta::of_fit(l);
                    let at = |s: f64| Some((s, k * s / link.collective_us(collective, s, n).filter(|t| *t > 0.0)? / 1e3));
                    Some(crate::fits::log_grid(lo, hi, 60).into_iter().filter_map(at).collect())
                })
                .unwrap_or_default();
            let legend = match fit {
                Some(l) => format!(
                    "calibrated α-β (α {:.1} µs, B {:.1} GB/s{})",
                    l.alpha_us,
                    l.busbw_gbps,
                    l.group_size.map_or(String::new(), |n| format!(", groups of {n}"))
                ),
                None => "calibrated α-β".into(),
            };
            Scatter {
                title: format!("{name}: bus bandwidth by message size ({} kernels)", points.len()),
                x_label: "message size (bytes)".into(),
                y_label: "bus bandwidth (GB/s)".into(),
                curve,
                reference: fit.and_then(|l| l.nominal_gbps.map(|b| (b, format!("nominal {b:.0} GB/s")))),
                legend: ["measured".into(), legend],
                points,
                log_x: true,
                log_y: true,
            }
        })
        .collect()
}

fn ms(us: f64) -> String {
    format!("{:.3}", us / 1000.0)
}

/// `words` as a sentence begins: its first letter capitalised (by character, not byte).
fn sentence(words: &str) -> String {
    let mut chars = words.chars();
    chars.next().map_or(String::new(), |first| first.to_uppercase().chain(chars).collect())
}

fn pct(x: f64) -> String {
    format!("{:.1}", 100.0 * x)
}

/// The summary of a job in words.
fn summary_words(a: &JobAnalysis) -> Vec<String> {
    let t = &a.totals;
    let b = &t.breakdown;
    let mut out = Vec::new();
    let hours = match &t.gpu_hours {
        Some(h) => format!(
            ": {} GPU-hours on this job ({:.0} GPUs × {:.1} h, of {} GPU-hours in all)",
            gpu_hours_text(h.exposed_comm),
            h.job_gpus,
            h.job_hours,
            gpu_hours_text(h.total)
        ),
        None => format!(
            " ({:.3} GPU-seconds of the {:.3} traced; give --job-gpus and --job-hours for the whole job's GPU-hours)",
            b.exposed_comm_us / 1e6,
            b.gpu_span_us / 1e6
        ),
    };
    out.push(format!("{} % of GPU time was communication with nothing overlapping it{hours}.", pct(t.exposed_comm_fraction)));
    out.push(format!(
        "Compute kept the GPUs busy {} % of the time; communication took {} % in all, {} % of it hidden under compute; memory copies and sets ran {} % of the time; the GPUs sat idle {} % of the time.",
        pct(t.compute_fraction),
        pct(t.comm_fraction),
        if b.comm_us > 0.0 { pct(b.overlap_us / b.comm_us) } else { "0.0".into() },
        if b.gpu_span_us > 0.0 { pct(b.memory_us / b.gpu_span_us) } else { "0.0".into() },
        pct(t.idle_fraction)
    ));
    let steps: usize = a.ranks.iter().map(|r| r.steps.len()).max().unwrap_or(0);
    // Which window every number of the page is of (`--window`, `--steps`, `--drop-last-step`).
    let mut numbers: Vec<i64> = a.ranks.iter().flat_map(|r| r.steps.iter().map(|s| s.step)).collect();
    numbers.sort_unstable();
    numbers.dedup();
    let by_steps = a.ranks.iter().any(|r| r.window == tracecast_ingest::analysis::WindowMode::Steps) && !numbers.is_empty();
    let window = if by_steps {
        format!("the analysed window is the profiler {}", tracecast_ingest::analysis::describe_numbers(&numbers))
    } else {
        "the analysed window is each rank's whole GPU window".to_string()
    };
    out.push(format!(
        "{} rank(s) of a world of {}, {} step(s) per rank, {:.3} ms of GPU span per rank; {window}.",
        a.ranks.len(),
        a.world_size,
        steps,
        b.gpu_span_us / 1000.0 / a.ranks.len().max(1) as f64
    ));
    // As the terminal says it (the page had said the count alone).
    let missing = a.ranks_not_read();
    if !missing.is_empty() {
        out.push(format!(
            "Not read: {} of the world's {} (the totals are of the ranks read).",
            tracecast_ingest::analysis::rank_list(&missing),
            a.world_size
        ));
    }
    out
}

/// A job's section up to its replay: what was measured.
fn measured_section(page: &mut Part, j: &JobReport<'_>) -> Result<(), Error> {
    let a = j.analysis;
    let devices: std::collections::BTreeSet<&str> = a.ranks.iter().filter_map(|r| r.device.as_deref()).collect();
    page.html.push_str("<section><h2>Job ");
    page.hole(Hole::Job);
    let _ = write!(page.html, ": {}</h2><p class=\"meta\">{}</p>", esc(&a.path), esc(&devices.into_iter().collect::<Vec<_>>().join(", ")));
    page.html.push_str("<div class=\"summary\">");
    for s in summary_words(a) {
        let _ = write!(page.html, "<p>{}</p>", esc(&s));
    }
    page.html.push_str("</div>");
    // Files that could not be read are named on the page, not only on the terminal.
    if !a.bad_files.is_empty() {
        let _ = write!(
            page.html,
            "<p class=\"note\">{} file(s) of this job could not be read; nothing on this page includes them:</p><ul class=\"note\">",
            a.bad_files.len()
        );
        for b in &a.bad_files {
            let _ = write!(page.html, "<li>{}</li>", esc(&b.error));
        }
        page.html.push_str("</ul>");
    }
    // What the analysis noted of the ranks (a GPU the trace does not name, shapes it lacks, …), as `analyze` prints it.
    let notes = a.notes_in_words();
    if !notes.is_empty() {
        page.html.push_str("<p class=\"note\">Notes:</p><ul class=\"note\">");
        for n in notes {
            let _ = write!(page.html, "<li>{}</li>", esc(&n));
        }
        page.html.push_str("</ul>");
    }

    page.html.push_str("<h3>Where GPU time goes</h3>");
    // What cannot be drawn is said, not left out silently (nor drawn empty under a caption).
    if a.totals.breakdown.gpu_span_us > 0.0 {
        let bars = rank_breakdown(a);
        page.figure(&bars.title.clone(), &bars, None)?;
        match step_breakdown(a) {
            Some(steps) => page.figure(&steps.title.clone(), &steps, None)?,
            None => page.html.push_str("<p class=\"note\">No per-step chart: the traces have no ProfilerStep annotations (profile with torch.profiler's schedule and prof.step() to get them).</p>"),
        }
    } else {
        page.html.push_str("<p class=\"note\">No chart of GPU time: the analysed window holds no GPU activity.</p>");
    }
    match j.timeline {
        Some((k, note)) => page.explorable_timeline(k, note)?,
        None => page.html.push_str("<p class=\"note\">No timeline: the traces have no GPU kernels.</p>"),
    }
    if a.ranks.len() > DISTRIBUTION_FROM {
        // Thousands of rows help nobody: how the ranks spread, and which rank is at each end.
        let metrics: [(&str, fn(&tracecast_ingest::analysis::Breakdown) -> f64); 7] = [
            ("GPU span", |b| b.gpu_span_us),
            ("busy", |b| b.busy_us),
            ("compute", |b| b.compute_us),
            ("communication", |b| b.comm_us),
            ("exposed comm", |b| b.exposed_comm_us),
            ("memory", |b| b.memory_us),
            ("idle", |b| b.idle_us),
        ];
        let rows: Vec<Vec<String>> = metrics
            .iter()
            .filter_map(|(name, f)| {
                let s = a.spread_over_ranks(f)?;
                Some(vec![
                    (*name).to_string(),
                    ms(s.min),
                    s.min_rank.to_string(),
                    ms(s.p10),
                    ms(s.median),
                    ms(s.p90),
                    ms(s.max),
                    s.max_rank.to_string(),
                ])
            })
            .collect();
        page.table(
            &format!("Across the {} ranks (ms): the spread of each part of the breakdown", a.ranks.len()),
            &["metric", "min", "rank of min", "p10", "median", "p90", "max", "rank of max"],
            &rows,
        );
    } else {
        let rows: Vec<Vec<String>> = a
            .ranks
            .iter()
            .map(|r| {
                let b = &r.breakdown;
                vec![
                    r.rank.to_string(),
                    ms(b.gpu_span_us),
                    ms(b.busy_us),
                    ms(b.compute_us),
                    ms(b.comm_us),
                    ms(b.exposed_comm_us),
                    ms(b.memory_us),
                    ms(b.idle_us),
                    r.steps.len().to_string(),
                ]
            })
            .collect();
        page.table(
            "Per rank (ms)",
            &["rank", "GPU span", "busy", "compute", "communication", "exposed comm", "memory", "idle", "steps"],
            &rows,
        );
    }
    if let Some(idle) = a.idle_split_over_ranks() {
        let words = format!(
            "Idle time of all ranks: host wait {} ms (the work's launch call started only after the GPU went idle), kernel wait {} ms (gaps between queued work shorter than {} µs), other {} ms.",
            ms(idle.host_wait_us),
            ms(idle.kernel_wait_us),
            idle.kernel_wait_threshold_us,
            ms(idle.other_us)
        );
        let _ = write!(page.html, "<p>{}</p>", esc(&words));
    }

    page.html.push_str("<h3>Collectives</h3>");
    let charts = collective_charts(j.collectives, j.profile);
    if charts.is_empty() && j.collectives_over_ranks.is_empty() {
        page.html.push_str("<p>This job ran no collective.</p>");
    } else if charts.is_empty() {
        page.html.push_str("<p>No collective in this job has a known message size and group, so no bandwidth can be shown.</p>");
    }
    for c in &charts {
        page.figure(&c.title, c, None)?;
    }
    let coll = j.collectives_over_ranks;
    if !coll.is_empty() {
        let rows: Vec<Vec<String>> = coll
            .iter()
            .map(|c| {
                vec![
                    c.collective.as_str().to_string(),
                    c.process_group.clone().unwrap_or_else(|| "–".into()),
                    c.group_size.map_or("?".into(), |n| n.to_string()),
                    c.count.to_string(),
                    ms(c.total_us),
                    c.wait_us.map_or("–".into(), ms),
                    c.busbw_gbps.map_or("–".into(), tracecast_ingest::analysis::bandwidth_text),
                ]
            })
            .collect();
        // As `analyze` says it: the wait is of the kernels matched across ranks (20 % of all
        // the time had read beside analyze's 31 % of the matched).
        let some_unmatched = coll.iter().any(|c| c.wait_us.is_some() && c.matched < c.count);
        page.table(
            if some_unmatched {
                "Collectives over all ranks (wait ms is of the kernels matched across ranks, which not every kernel was)"
            } else {
                "Collectives over all ranks"
            },
            &["collective", "process group", "group", "kernels", "time ms", "wait ms", "busbw GB/s"],
            &rows,
        );
    }
    let sizes = j.message_sizes;
    if !sizes.is_empty() {
        let rows: Vec<Vec<String>> = sizes
            .iter()
            .map(|m| {
                vec![
                    m.collective.to_string(),
                    m.group_size.to_string(),
                    m.bytes.to_string(),
                    m.count.to_string(),
                    ms(m.time_us),
                    format!("{:.1}", m.time_us / m.count.max(1) as f64),
                    m.busbw_gbps.map_or("–".into(), tracecast_ingest::analysis::bandwidth_text),
                ]
            })
            .collect();
        page.table(
            "Collectives per message size (all ranks; time is the transfer where matched across ranks)",
            &["collective", "group", "bytes", "kernels", "time ms", "mean µs", "busbw GB/s"],
            &rows,
        );
    }
    if a.comm_by_dimension.iter().any(|d| d.comm_us > 0.0) {
        let rows: Vec<Vec<String>> = a
            .comm_by_dimension
            .iter()
            .map(|d| {
                vec![
                    d.dimension.as_str().to_string(),
                    ms(d.comm_us),
                    ms(d.exposed_comm_us),
                    d.exposed_gpu_hours.map_or("–".into(), gpu_hours_text),
                ]
            })
            .collect();
        page.table(
            "Communication per parallelism dimension (all ranks)",
            &["dimension", "comm ms", "exposed ms", "exposed GPU-hours"],
            &rows,
        );
    }
    if !a.stragglers.is_empty() {
        let rows: Vec<Vec<String>> = a
            .stragglers
            .iter()
            .take(10)
            .map(|s| {
                vec![
                    s.rank.to_string(),
                    s.times_last.to_string(),
                    ms(s.wait_caused_us),
                    s.wait_caused_gpu_hours.map_or("–".into(), gpu_hours_text),
                ]
            })
            .collect();
        let beyond = a.straggler_waits_beyond_exposed().map_or(String::new(), |words| format!("; {words}"));
        page.table(
            &format!("Slowest ranks: last to arrive at matched collectives (the time the others' collectives waited for them, lost only where no compute ran beside it{beyond})"),
            &["rank", "times last", "wait caused GPU-ms", "GPU-hours waited in the job"],
            &rows,
        );
    }

    page.html.push_str("<h3>Kernels</h3>");
    let kcharts = j.profile.map(kernel_charts).unwrap_or_default();
    if kcharts.is_empty() {
        let why = j
            .profile
            .map(|p| p.unfitted.iter().take(4).map(|u| format!("{}: {}", u.what, u.reason)).collect::<Vec<_>>().join("; "))
            .unwrap_or_default();
        let _ = write!(page.html, "<p>No kernel class could be fitted on this job. {}</p>", esc(&why));
    }
    for (_, c) in &kcharts {
        page.figure(&c.title, c, None)?;
    }
    if !kcharts.is_empty() {
        // The page's window narrows its tables, not its fits: said (it had gone unsaid beside tables that follow `--steps`).
        page.html.push_str("<p class=\"meta\">The fits use every kernel of the trace, as <code>calibrate</code> does: the window (--steps, --drop-last-step, --window) narrows the tables, not the fits, nor the calibrated α-β curves of the collective charts.</p>");
    }
    let ops = j.ops;
    if !ops.is_empty() {
        let peaks = j.profile.map(|p| &p.device);
        let fp32_on_tf32 = peaks.is_some_and(|d| tracecast_calibrate::work::fp32_ran_on_tf32(ops, d));
        let rows: Vec<Vec<String>> = ops
            .iter()
            .take(40)
            .map(|o| {
                let achieved = o.achieved();
                let of_peak = peaks.and_then(|d| o.fraction_of_peak(d, fp32_on_tf32));
                let work = if o.counts_flops {
                    o.flops.map(|f| format!("{:.3} GFLOP", f / 1e9))
                } else {
                    o.bytes.map(|b| format!("{:.3} MB", b / 1e6))
                };
                vec![
                    o.op.clone(),
                    o.shapes.clone(),
                    o.dtype.clone().unwrap_or_else(|| "–".into()),
                    o.calls.to_string(),
                    ms(o.time_us),
                    work.unwrap_or_else(|| "–".into()),
                    achieved.map_or("–".into(), |a| format!("{a:.1} {}", if o.counts_flops { "TFLOP/s" } else { "GB/s" })),
                    match of_peak {
                        // Named where it is not the op's own dtype's (FP32 run on TF32 tensor cores).
                        Some((f, of)) if o.dtype.as_deref().is_some_and(|d| d != of) && of != "hbm" => {
                            format!("{:.1} of {of}{}", 100.0 * f, above_peak(f))
                        }
                        Some((f, _)) => format!("{:.1}{}", 100.0 * f, above_peak(f)),
                        None => "–".into(),
                    },
                ]
            })
            .collect();
        page.table(
            "Ops with the most kernel time (all ranks): shapes, work per call, achieved rate and % of the GPU's peak",
            &["op", "shapes", "dtype", "calls", "time ms", "work per call", "achieved", "% of peak"],
            &rows,
        );
        if rows.iter().any(|r| r.last().is_some_and(|c| c.ends_with(ABOVE_PEAK))) {
            let _ = write!(
                page.html,
                "<p class=\"meta\">{}</p>",
                esc(&format!(
                    "{ABOVE_PEAK} above the GPU's peak, which no kernel reaches: the op did less work than its shapes count (cuDNN's Winograd and FFT convolutions do fewer multiplications than the direct convolution counted), or its kernels' time is not the whole op's."
                ))
            );
        }
    }
    let rows: Vec<Vec<String>> = a
        .kernels_over_ranks()
        .iter()
        .take(25)
        .map(|k| {
            let class = match k.class {
                ActivityClass::Compute => "compute",
                ActivityClass::Comm => "communication",
                ActivityClass::Memory => "memory",
            };
            vec![k.name.clone(), class.into(), k.count.to_string(), ms(k.total_us), format!("{:.1}", k.mean_us), format!("{:.1}", k.max_us)]
        })
        .collect();
    // A table of headers alone reads as a page that failed to fill it.
    if rows.is_empty() {
        page.html.push_str("<p>No kernel, copy or set ran on a GPU in the analysed window.</p>");
    } else {
        page.table("Kernels with the most time (all ranks)", &["kernel", "kind", "count", "time ms", "mean µs", "max µs"], &rows);
    }
    Ok(())
}

/// The rest of a job's section: its replay and projection.
fn replay_section(page: &mut Part, r: &JobReplay, projection: Option<(&str, &JobReplay)>) -> Result<(), Error> {
    page.html.push_str("<h3>Replay</h3>");
    // What bounds the step: the chain of dependencies that ends last.
    // Where a critical path's time went, in words.
    let shares = |c: &tracecast_replay::critical::CriticalPath| {
        let [compute, comm, memory, cpu, launch, unexplained] = c.percent();
        format!(
            "{:.3} ms: compute {compute:.1} %, communication {comm:.1} %, memory copies {memory:.1} %, CPU {cpu:.1} %, launch latency, queue gaps and event waits {launch:.1} %, waits the trace does not explain {unexplained:.1} %",
            c.total_us / 1000.0
        )
    };
    let c = &r.critical_path;
    if c.total_us > 0.0 {
        // Of the run as measured: a projection's own is given with it below (the page had given
        // this one alone beside a projection's speed-up).
        let of = if projection.is_some() { " of the replay as measured" } else { "" };
        let words = format!(
            "The critical path{of} (the chain of dependencies that sets the last GPU end) is {}. Speeding up what is not on it does not shorten the step.",
            shares(c)
        );
        let _ = write!(page.html, "<p>{}</p>", esc(&words));
    }
    // What the replay noted (the analysed steps against the whole-trace simulation, a host-bound step, …).
    if !r.notes.is_empty() {
        page.html.push_str("<ul class=\"note\">");
        for n in &r.notes {
            let _ = write!(page.html, "<li>{}</li>", esc(n));
        }
        page.html.push_str("</ul>");
    }
    let unexplained: Vec<String> = r
        .ranks
        .iter()
        .filter(|k| k.graph.starts.unexplained > 0)
        .map(|k| format!("rank {}: {} ({:.3} ms)", k.rank, k.graph.starts.unexplained, k.graph.starts.unexplained_us / 1000.0))
        .collect();
    if !unexplained.is_empty() {
        let words = format!(
            "GPU starts that nothing in the trace explains (no launch, queue, event or peer accounts for the delay), replayed as explicit waits: {}.",
            unexplained.join(", ")
        );
        let _ = write!(page.html, "<p>{}</p>", esc(&words));
    }
    let chart = Bars {
        title: format!("Measured and replayed step time per rank (speed-up {})", tracecast_replay::speedup_in_words(r.speedup)),
        x_label: "rank".into(),
        y_label: "mean step time (ms)".into(),
        categories: r.ranks.iter().map(|k| k.rank.to_string()).collect(),
        series: vec![
            Series {
                label: "measured".into(),
                color: (120, 120, 120),
                values: r.ranks.iter().map(|k| k.measured_step_us / 1000.0).collect(),
            },
            Series {
                label: "replayed".into(),
                color: (76, 114, 176),
                values: r.ranks.iter().map(|k| k.replayed_step_us / 1000.0).collect(),
            },
        ],
        stacked: false,
    };
    let worst = r.ranks.iter().map(|k| k.error.abs()).fold(0.0, f64::max);
    if r.ranks.iter().any(|k| k.measured_step_us > 0.0 || k.replayed_step_us > 0.0) {
        page.figure(&chart.title.clone(), &chart, Some(&format!("Largest per-rank error {:.2} %.", 100.0 * worst)))?;
    } else {
        page.html.push_str("<p class=\"note\">No chart of step times: no rank has GPU work in the analysed window to replay.</p>");
    }
    if let Some((label, p)) = projection {
        let mean = |f: &dyn Fn(&tracecast_replay::replay::RankReplay) -> [f64; 5]| {
            let n = p.ranks.len().max(1) as f64;
            p.ranks.iter().map(f).fold([0.0; 5], |acc, x| std::array::from_fn(|i| acc[i] + x[i] / n / 1000.0))
        };
        let measured = mean(&|k| segments(&k.measured));
        let projected = mean(&|k| segments(&k.replayed));
        let chart = Bars {
            title: format!("Measured and projected onto {label}: {} speed-up of the step", tracecast_replay::speedup_in_words(p.speedup)),
            x_label: "run".into(),
            y_label: "GPU time per rank (ms)".into(),
            categories: vec!["measured".into(), format!("projected: {label}")],
            series: SEGMENTS
                .iter()
                .enumerate()
                .map(|(k, (l, c))| Series { label: (*l).into(), color: *c, values: vec![measured[k], projected[k]] })
                .collect(),
            stacked: true,
        };
        page.figure(&chart.title.clone(), &chart, None)?;
        // The job's step, or its window where no rank has steps; the path where there is one.
        let step = if p.ranks.iter().all(|k| k.steps.is_empty()) { "window" } else { "step" };
        let path = if p.critical_path.total_us > 0.0 { format!("; its critical path {}", shares(&p.critical_path)) } else { String::new() };
        let words = format!(
            "Projected onto {label}: the job's {step} {} ms (measured {} ms){path}.",
            ms(p.replayed_job_step_us),
            ms(p.measured_job_step_us)
        );
        let _ = write!(page.html, "<p>{}</p>", esc(&words));
        // What priced the projection, as `replay --target` prints it: the sides' fits, the rule
        // of each share of the kernels, and the notes (the page had given the speed-up alone).
        if let Some(pr) = &p.projection {
            let _ = write!(page.html, "<p>Priced {}.</p>", esc(&pr.sides_in_words()));
            let rows: Vec<Vec<String>> = pr
                .rules
                .iter()
                .map(|r| vec![r.description.to_string(), r.kernels.to_string(), ms(r.measured_us), ms(r.projected_us)])
                .collect();
            page.table_of_words(
                "The rules that priced the kernels on the target (every kernel of the trace, all ranks: not narrowed to the window)",
                &["rule", "kernels", "measured ms", "projected ms"],
                &rows,
            );
            let rows: Vec<Vec<String>> = pr
                .classes
                .iter()
                .map(|c| vec![c.class.as_str().to_string(), c.kernels.to_string(), ms(c.measured_us), ms(c.projected_us)])
                .collect();
            page.table(
                "By kernel class (every kernel of the trace, all ranks)",
                &["class", "kernels", "measured ms", "projected ms"],
                &rows,
            );
            let words = pr.kernel_time_in_words();
            let _ = write!(page.html, "<p>{}.</p>", esc(&sentence(&words)));
        }
        if !p.notes.is_empty() {
            page.html.push_str("<ul class=\"note\">");
            for n in &p.notes {
                let _ = write!(page.html, "<li>{}</li>", esc(n));
            }
            page.html.push_str("</ul>");
        }
    }
    page.html.push_str("</section>\n");
    Ok(())
}

fn delta_rows(d: &[Delta], limit: usize) -> Vec<Vec<String>> {
    d.iter()
        .take(limit)
        .map(|x| {
            vec![
                x.name.clone(),
                Delta::count_text(x.count_a),
                Delta::count_text(x.count_b),
                ms(x.time_a_us),
                ms(x.time_b_us),
                format!("{:+.3}", x.delta_us / 1000.0),
                x.change_text(),
            ]
        })
        .collect()
}

fn diff_section(page: &mut Part, d: &TraceDiff) -> Result<(), Error> {
    let _ = write!(page.html, "<section><h2>Diff: {} → {}</h2>", esc(&d.a), esc(&d.b));
    // The headline: step time, exposed communication, idle and busy, then what moved them.
    let words: Vec<String> = d
        .summary
        .iter()
        .take(4)
        .map(|r| format!("{} {} → {} ms ({})", r.name, ms(r.time_a_us), ms(r.time_b_us), r.change_in_words()))
        .collect();
    if let Some(note) = d.unrelated_note() {
        let _ = write!(page.html, "<p class=\"meta\">{}</p>", esc(&format!("Note: {note}.")));
    }
    // How much the runs share, as `diff` leads with it: two unrelated workloads compare little.
    let _ = write!(page.html, "<p class=\"meta\">{}.</p>", esc(&d.shared_words()));
    if let Some(note) = d.little_in_common() {
        let _ = write!(page.html, "<p class=\"meta\">{}</p>", esc(&format!("Note: {note}.")));
    }
    // What the analyses say of each rank the page says with each job; a rank short of steps changes the diff's times.
    for note in &d.notes {
        let _ = write!(page.html, "<p class=\"meta\">{}</p>", esc(&format!("Note: {note}.")));
    }
    if !words.is_empty() {
        let moved = d.kernel_classes.first().map_or(String::new(), |k| {
            format!(" The kernel class that moved most: {} ({:+.3} ms {}).", k.name, k.delta_us / 1000.0, d.per_what())
        });
        let _ = write!(
            page.html,
            "<div class=\"summary\"><p>{}</p></div>",
            esc(&format!("{}: {}.{moved}", sentence(d.per_what()), words.join("; ")))
        );
    }
    let chart = Bars {
        title: format!("Time {} by kernel class: A against B", d.per_what()),
        x_label: "kernel class".into(),
        y_label: format!("time {} (ms)", d.per_what()),
        categories: d.kernel_classes.iter().map(|x| x.name.clone()).collect(),
        series: vec![
            Series { label: "A".into(), color: (120, 120, 120), values: d.kernel_classes.iter().map(|x| x.time_a_us / 1000.0).collect() },
            Series { label: "B".into(), color: (76, 114, 176), values: d.kernel_classes.iter().map(|x| x.time_b_us / 1000.0).collect() },
        ],
        stacked: false,
    };
    page.figure(&chart.title.clone(), &chart, None)?;
    let head = ["name", "count A", "count B", "A ms", "B ms", "Δ ms", "Δ %"];
    let per = d.per_what();
    page.table(&format!("Summary {per}"), &head, &delta_rows(&d.summary, 10));
    page.table(&format!("Per kernel class, {per}"), &head, &delta_rows(&d.kernel_classes, 20));
    if !d.collectives.is_empty() {
        page.table(&format!("Per collective, {per}"), &head, &delta_rows(&d.collectives, 20));
    }
    if !d.steps.is_empty() {
        page.table("Step time (the slowest rank per step)", &head, &delta_rows(&d.steps, 50));
    }
    page.table(&format!("Kernels that moved most, {per}"), &head, &delta_rows(&d.kernels, 25));
    page.html.push_str("</section>\n");
    Ok(())
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:1150px;color:#222;padding:0 1rem}\
h1{font-size:1.6rem}h2{border-bottom:2px solid #ddd;padding-bottom:.3rem;margin-top:2.5rem;word-break:break-all}\
.summary{background:#f5f7fb;border-left:4px solid #d62728;padding:.4rem 1rem;margin:1rem 0}.summary p{margin:.4rem 0}\
.meta{color:#666}figure{margin:1.5rem 0}figcaption{color:#444;font-size:.9rem;margin-top:.3rem}.note{color:#777}\
svg.chart{max-width:100%;height:auto;border:1px solid #eee}\
table{border-collapse:collapse;margin:1rem 0;font-size:.85rem;width:100%}caption{text-align:left;font-weight:600;padding:.3rem 0}\
th,td{border-bottom:1px solid #e3e3e3;padding:.25rem .5rem;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\
th{cursor:pointer;background:#fafafa;user-select:none}th:hover{background:#eef}td:first-child{word-break:break-all}td{white-space:normal}td.n,th{white-space:nowrap}\
td[title]{text-decoration:underline dotted #bbb}input.filter{margin:.8rem 0 0;padding:.2rem .4rem;font-size:.85rem;width:18rem}\
.timeline{border:1px solid #eee}.tl-bar{padding:.4rem;font-size:.85rem;background:#fafafa}.tl-search{width:20rem;padding:.2rem .4rem}\
.tl-hits{color:#d62728}.tl-legend{margin-top:.3rem;color:#444}.tl-kind{margin-right:1rem;white-space:nowrap}.tl-kind i{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:-1px}.tl-help{color:#888;float:right}svg.tl-svg{width:100%;height:auto;display:block;cursor:grab;user-select:none}";

/// Sorts and filters tables, and draws the explorable timelines.
const SCRIPT: &str = include_str!("../assets/report.js");

/// The mark of an op's rate above the GPU's peak, explained under its table.
const ABOVE_PEAK: &str = " *";

fn above_peak(fraction: f64) -> &'static str {
    if fraction > 1.0 { ABOVE_PEAK } else { "" }
}

/// The page, with the chart files written beside it (with `png_dir`).
fn render(report: Report<'_>) -> Result<Page, Error> {
    let png_dir = report.png_dir.as_deref();
    let mut page = Page::default();
    page.html.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    let title = match report.jobs.as_slice() {
        [one] => format!("tracecast report — {}", one.path),
        // A few jobs by name (a diff's two had read "2 jobs"), many by count.
        jobs @ [_, _] | jobs @ [_, _, _] => {
            format!("tracecast report — {}", jobs.iter().map(|j| j.path.as_str()).collect::<Vec<_>>().join(" · "))
        }
        jobs => format!("tracecast report — {} jobs", jobs.len()),
    };
    let _ = write!(page.html, "<title>{}</title><style>{STYLE}</style></head><body><h1>{}</h1>", esc(&title), esc(&title));
    if !report.unread_jobs.is_empty() {
        let _ = write!(page.html, "<div class=\"summary\">");
        // Two jobs given, one unread: the diff asked for is not there either.
        let no_diff = report.diff.is_none() && report.jobs.len() + report.unread_jobs.len() == 2;
        for (job, why) in &report.unread_jobs {
            let _ = write!(
                page.html,
                "<p>{}</p>",
                esc(&format!(
                    "Job {job} was given, but none of its ranks could be read or analysed ({why}): it is not on this page{}.",
                    if no_diff { ", and no diff is shown" } else { "" }
                ))
            );
        }
        let _ = write!(page.html, "</div>");
    }
    if let Some(d) = report.diff {
        let mut part = Part::new(png_dir);
        diff_section(&mut part, d)?;
        page.append(part, 0)?;
    }
    for (i, j) in report.jobs.into_iter().enumerate() {
        page.append(j.measured, i)?;
        if let Some(replays) = j.replays {
            page.append(replays, i)?;
        }
    }
    let _ = writeln!(page.html, "<footer><p class=\"meta\">{}</p></footer><script>{SCRIPT}</script></body></html>", esc(&report.generator));
    Ok(page)
}

/// Writes the page to `path` atomically; returns the chart files written
/// beside it (SVG and PNG, with `png_dir`).
pub fn write_report(report: Report<'_>, path: &Path) -> Result<Vec<PathBuf>, Error> {
    let page = render(report)?;
    // A page that is not written takes its chart files with it (`Page`'s drop).
    tracecast_ingest::output::write_atomic(path, page.html.as_bytes())?;
    Ok(page.finish())
}

#[cfg(test)]
mod tests {
    /// The calibrated curve is drawn against message size, as the points are: a job whose
    /// all-reduces over 4 GPUs took exactly α + k·S/B has them on its curve (it had been drawn
    /// at bus bytes k·S, 1.5× to the right), and the legend gives α and B.
    #[test]
    fn the_fitted_curve_passes_through_points_that_obey_it() {
        use tracecast_ingest::collective::Collective;
        let (alpha_us, busbw_gbps, k) = (15.0, 12.0, 1.5);
        let sample = |bytes: u64| tracecast_ingest::analysis::CollectiveSample {
            rank: 0,
            collective: Collective::AllReduce,
            process_group: None,
            pg_ranks: None,
            group_size: Some(4),
            group_size_inferred: false,
            bytes: Some(bytes),
            algo: None,
            proto: None,
            start_ns: 0,
            dur_us: alpha_us + k * bytes as f64 / (busbw_gbps * 1e3),
            transfer_us: None,
            matched_ranks: 4,
            row: 0,
            instance: None,
        };
        let samples: Vec<_> = [24_576u64, 1 << 20, 403_000_000].into_iter().map(sample).collect();
        let mut profile = tracecast_calibrate::shipped::profile("h100-sxm").unwrap();
        profile.links = vec![tracecast_calibrate::profile::LinkFit {
            collective: Collective::AllReduce,
            group_size: Some(4),
            domain: "intra".into(),
            algo: None,
            proto: None,
            alpha_us,
            alpha_ci95: [alpha_us; 2],
            busbw_gbps,
            busbw_ci95: [busbw_gbps; 2],
            efficiency: None,
            nominal_gbps: None,
            r2: 1.0,
            samples: 3,
            fitted_on: "transfer".into(),
            bus_bytes_range: None,
            points: Vec::new(),
        }];
        let charts = super::collective_charts(&samples, Some(&profile));
        let chart = &charts[0];
        let (first, last) = (chart.curve[0], chart.curve[chart.curve.len() - 1]);
        for (at, point) in [(first, chart.points[0]), (last, chart.points[2])] {
            assert!((at.0 / point.0 - 1.0).abs() < 1e-9, "{at:?} {point:?}");
            assert!((at.1 / point.1 - 1.0).abs() < 1e-9, "curve {at:?} against point {point:?}");
        }
        assert!(chart.legend[1].contains("α 15.0 µs, B 12.0 GB/s, groups of 4"), "{}", chart.legend[1]);
    }

    #[test]
    fn a_sentence_capitalises_its_first_character_not_its_first_byte() {
        // A byte slice of the first letter had panicked on a phrase opening with a multi-byte one.
        assert_eq!(
            [super::sentence("projected kernel time"), super::sentence("énergie"), super::sentence("")],
            ["Projected kernel time", "Énergie", ""]
        );
    }
}
