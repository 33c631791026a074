//! `tracecast demo`: the bundled 4-rank demo job analysed, and its HTML page
//! written with an identity replay and a what-if with links twice as fast.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use tracecast_calibrate::Catalog;
use tracecast_ingest::analysis::{AnalyzeOptions, JobAnalysis};
use tracecast_replay::{ReplayOptions, Scale};

use crate::inputs::TraceOptions;
use crate::summary::write_job;
use crate::{Outcome, report};

/// Where the demo job is and where its page goes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// The demo job's directory (default: empty, the job bundled in the
    /// binary, written out beside the page as `traces/`).
    pub dir: PathBuf,
    /// The HTML page to write (default: `tracecast-demo/report.html`, relative to the working directory).
    pub report: PathBuf,
}

/// The demo job (`fixtures/demo`), in the binary: `demo` runs wherever the
/// binary is, not only in a checkout.
const BUNDLED: [(&str, &[u8]); 4] = [
    ("rank-0.json.gz", include_bytes!("../../fixtures/demo/rank-0.json.gz")),
    ("rank-1.json.gz", include_bytes!("../../fixtures/demo/rank-1.json.gz")),
    ("rank-2.json.gz", include_bytes!("../../fixtures/demo/rank-2.json.gz")),
    ("rank-3.json.gz", include_bytes!("../../fixtures/demo/rank-3.json.gz")),
];

/// Writes the bundled demo job's traces into `dir` (each atomically).
pub fn unpack(dir: &Path) -> Result<()> {
    // As `synth --out`: only traces the demo (or synth) wrote are replaced.
    let names: Vec<String> = BUNDLED.iter().map(|(n, _)| n.to_string()).collect();
    tracecast_calibrate::synth::refuse_to_replace(dir, &names)?;
    for (name, bytes) in BUNDLED {
        tracecast_ingest::output::write_atomic(&dir.join(name), bytes)?;
    }
    Ok(())
}

impl Default for Options {
    fn default() -> Self {
        Options { dir: PathBuf::new(), report: PathBuf::from("tracecast-demo/report.html") }
    }
}

/// What the demo's page shows: the job read and analysed as `analyze` would
/// with a 1024-GPU, 24-hour job's GPU-hours, and a what-if with links twice as fast.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Page {
    /// How the demo traces are read (quietly).
    pub read: TraceOptions,
    /// The analysis.
    pub analyze: AnalyzeOptions,
    /// The catalog.
    pub catalog: Catalog,
    /// The what-if's replay options.
    pub what_if: ReplayOptions,
}

impl Page {
    /// The demo's page.
    pub fn demo() -> Page {
        let read = TraceOptions { quiet: true, ..Default::default() };
        let mut analyze = AnalyzeOptions::default();
        analyze.job_gpus = Some(1024.0);
        analyze.job_hours = Some(24.0);
        let mut what_if = ReplayOptions::default();
        what_if.scale = Scale { link: 2.0, ..Default::default() };
        Page { read, analyze, catalog: Catalog::builtin(), what_if }
    }

    /// The report plan of the page: the measured job and the what-if, labelled by its speed-ups.
    fn plan(&self) -> report::Plan<'_> {
        let projection = Some((crate::replay::WhatIf::default().label(self.what_if.scale), self.what_if.clone()));
        report::Plan { catalog: &self.catalog, analyze: &self.analyze, projection, gpus_per_node: None, png_dir: None }
    }
}

/// Analyses the demo job, prints its summary and writes its page.
pub fn run(args: &Options, out: &mut dyn Write) -> Result<Outcome> {
    let dir = if args.dir.as_os_str().is_empty() {
        let dir = args.report.parent().unwrap_or(Path::new(".")).join("traces");
        unpack(&dir)?;
        dir
    } else {
        args.dir.clone()
    };
    writeln!(out, "tracecast demo: analysing the bundled synthetic 4-rank data-parallel job in {}", dir.display())?;
    writeln!(out, "(made by `tracecast synth --out fixtures/demo --busbw-gbps 12`: gradients all-reduced over a slow inter-node link;")?;
    writeln!(out, " point `tracecast analyze` at your own trace directory the same way)\n")?;
    // The page: charts, tables, an identity replay and a what-if with links twice as fast.
    let page = Page::demo();
    let plan = page.plan();
    // The terminal summary is printed from the page's analysis, as the job is reduced.
    let mut show_summary = |analysis: &JobAnalysis| -> Result<()> {
        write_job(out, analysis)?;
        Ok(out.flush()?)
    };
    let (sections, unread, failed) = report::sections(std::slice::from_ref(&dir), false, &page.read, &plan, &mut show_summary)?;
    anyhow::ensure!(!sections.is_empty(), "the demo traces could not be read");
    writeln!(out, "\nThe GPU-hours line extrapolates to a 1024-GPU, 24-hour job (--job-gpus 1024 --job-hours 24).")?;
    report::write(sections, unread, &plan, &args.report)?;
    let shown = std::fs::canonicalize(&args.report).unwrap_or_else(|_| args.report.clone());
    writeln!(out, "Report (charts, tables, replay and a links-×2 what-if): {}", shown.display())?;
    Ok(Outcome::bad_files_if(failed))
}
