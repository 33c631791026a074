//! The traces a command reads: which files make which job, how they are read
//! and what counts as communication ([`TraceOptions`]), the analysed window
//! ([`WindowOptions`]), and the loop that reads the jobs one at a time
//! ([`for_each_input`]).

use std::path::{Path, PathBuf};

use anyhow::Result;
use tracecast_ingest::analysis::{AnalyzeOptions, Classifier, CommKernels, WindowMode};
use tracecast_ingest::{ReadOptions, job};

/// How traces are read and what counts as communication: one definition for
/// every command that reads traces (analyze, calibrate, ingest, replay, report, diff).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct TraceOptions {
    /// Extra regular expressions for communication kernels, added to `comm_kernels` (default: none).
    pub comm_pattern: Vec<String>,
    /// What counts as communication (default: every known kernel family).
    pub comm_kernels: CommKernels,
    /// Stop at the first unreadable file instead of reporting it and going on (default: false).
    pub strict: bool,
    /// GPUs per node as given (default: none, the rule of [`crate::hardware::node_gpus_of`]).
    pub gpus_per_node: Option<u32>,
    /// Extra hardware catalog files (TOML) to add to the built-in catalog (default: none).
    pub hw: Vec<PathBuf>,
    /// The GPU (catalog id) the traces ran on, for traces that do not record it (default: none).
    pub device: Option<String>,
    /// Write nothing on the terminal (default: false).
    pub quiet: bool,
}

impl TraceOptions {
    /// The communication classifier these options ask for.
    pub fn classifier(&self) -> Result<Classifier> {
        Ok(Classifier::new(self.comm_kernels, &self.comm_pattern)?)
    }

    /// How to read the traces: `device` names the GPU of those that do not record theirs, from
    /// `catalog` (the command's, `--hw` files and all: read once).
    pub fn read_options(&self, catalog: &tracecast_calibrate::Catalog) -> Result<ReadOptions> {
        let mut o = ReadOptions::default();
        if let Some(id) = &self.device {
            let gpu = catalog.gpu(id)?;
            // A name the catalog matches back to this GPU.
            let name = gpu.match_names.first().cloned().unwrap_or_else(|| gpu.name.clone());
            o.device = Some(tracecast_ingest::device::DeviceProperties { name: Some(name), ..Default::default() });
        }
        Ok(o)
    }
}

/// The analysed window: one definition for every command that breaks GPU
/// time down (analyze, ingest, report, diff).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WindowOptions {
    /// The analysed window (default: steps).
    pub window: WindowMode,
    /// Gaps shorter than this many µs between queued GPU work count as kernel wait (default: 30).
    pub kernel_wait_us: f64,
    /// Leave out each rank's last profiler step (default: false).
    pub drop_last_step: bool,
    /// Only the profiler steps with these numbers, inclusive (default: all).
    pub steps: Option<(i64, i64)>,
}

impl Default for WindowOptions {
    fn default() -> Self {
        WindowOptions { window: WindowMode::Steps, kernel_wait_us: 30.0, drop_last_step: false, steps: None }
    }
}

impl WindowOptions {
    /// Analysis options with this window and `read`'s classifier.
    pub fn analyze_options(&self, read: &TraceOptions) -> Result<AnalyzeOptions> {
        let mut opts = AnalyzeOptions::default();
        opts.window = self.window;
        opts.classifier = read.classifier()?;
        opts.kernel_wait_threshold_us = self.kernel_wait_us;
        opts.drop_last_step = self.drop_last_step;
        opts.steps = self.steps;
        Ok(opts)
    }
}

/// A whole job's GPUs (a whole number) and wall-clock hours (`--job-gpus`, `--job-hours`), whose
/// product must be a number of GPU-hours (`1e308` hours printed "inf GPU-hours").
pub fn job_size(gpus: Option<f64>, hours: Option<f64>) -> Result<(Option<f64>, Option<f64>)> {
    if let Some(g) = gpus {
        anyhow::ensure!(g >= 1.0 && g.fract() == 0.0 && g <= 2f64.powi(53), "--job-gpus {g}: a whole number of GPUs from 1 to 2^53");
    }
    if let (Some(g), Some(h)) = (gpus, hours) {
        let show = |x: f64| if x.abs() >= 1e9 { format!("{x:e}") } else { format!("{x}") };
        anyhow::ensure!((g * h).is_finite(), "--job-gpus {} × --job-hours {}: more GPU-hours than a number holds", show(g), show(h));
    }
    Ok((gpus, hours))
}

/// The traces a command reads, as every command takes them.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Inputs {
    /// Trace files of one job, or directories (one job each) (default: none).
    pub paths: Vec<PathBuf>,
    /// Every file is its own job, and every trace file under a directory (default: false).
    pub each: bool,
    /// How the traces are read.
    pub read: TraceOptions,
}

/// The jobs the paths stand for: each directory is a job; the files together
/// are one job (or one job each with `each`).
fn jobs_of(paths: &[PathBuf], each: bool) -> Vec<(PathBuf, Vec<PathBuf>)> {
    let mut jobs = Vec::new();
    let mut files = Vec::new();
    // The loose files' one job takes the place of its first file: jobs keep the command line's
    // order (a report of a file and a directory is a diff of the first against the second).
    let mut files_at = None;
    for p in paths {
        if p.is_dir() && each {
            // A directory of unrelated runs: every trace file under it is its own job.
            match job::trace_files_under(p) {
                Ok(files) => jobs.extend(files.into_iter().map(|f| (f.clone(), vec![f]))),
                Err(_) => jobs.push((p.clone(), vec![p.clone()])),
            }
        } else if p.is_dir() || each {
            jobs.push((p.clone(), vec![p.clone()]));
        } else {
            files_at.get_or_insert(jobs.len());
            files.push(p.clone());
        }
    }
    if let Some(at) = files_at {
        jobs.insert(at, (files[0].clone(), files));
    }
    jobs
}

/// A progress bar on stderr over a job's files, hidden when `quiet` or the job is small.
fn progress_bar(files: usize, bytes: u64, quiet: bool) -> indicatif::ProgressBar {
    if quiet || (files < 4 && bytes < 64 << 20) {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(files as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} reading rank traces {pos}/{len} {wide_bar} {elapsed}") {
        bar.set_style(style);
    }
    bar
}

/// One job as listed: its name, its trace files, and what listing them found
/// wrong — paths that are not there, repeated files, the rank files a
/// dataset's ingest could not read. Its ranks are read through it, so that
/// those errors join the job's failures in one place: its bad files, its
/// unread ranks (the world size) and what stderr says, in every command.
pub struct JobInput<'a> {
    /// The directory, or the first file when files were given.
    pub path: PathBuf,
    /// The job's trace files.
    pub files: Vec<PathBuf>,
    listed: Vec<tracecast_ingest::Error>,
    on_file: &'a (dyn Fn(&Path) + Sync),
}

impl JobInput<'_> {
    /// Each rank of the job made into `T` as it is read (and dropped), and the job's
    /// failures: files not read, ranks `summarize` refused, then the listing's.
    pub fn summarize<T: Send>(
        &mut self,
        opts: &ReadOptions,
        summarize: &(dyn Fn(&job::Rank) -> tracecast_ingest::Result<T> + Sync),
    ) -> (Vec<T>, Vec<tracecast_ingest::Error>) {
        self.summarize_or(opts, &|_| None, summarize)
    }

    /// [`JobInput::summarize`], where `known` may give a file's rank and `T` without
    /// reading it (a summary cached in a dataset).
    pub fn summarize_or<T: Send>(
        &mut self,
        opts: &ReadOptions,
        known: &(dyn Fn(&Path) -> Option<job::KnownRank<T>> + Sync),
        summarize: &(dyn Fn(&job::Rank) -> tracecast_ingest::Result<T> + Sync),
    ) -> (Vec<T>, Vec<tracecast_ingest::Error>) {
        let (out, mut failures) = job::Job::try_summarize_or(&self.files, opts, self.on_file, known, summarize);
        failures.append(&mut self.listed);
        (out, failures)
    }

    /// The whole job read, the listing's errors among its failures.
    pub fn read(&mut self, opts: &ReadOptions) -> job::Job {
        let mut job = job::Job::read(self.path.clone(), &self.files, opts, self.on_file);
        job.failures.append(&mut self.listed);
        job
    }
}

/// The jobs `paths` stand for, each read by `read` (given its [`JobInput`],
/// through which its ranks are read) and handed to `each_job`; bad files are
/// reported on stderr and, with `opts.strict`, stop everything. Returns
/// whether any file was bad and the jobs that gave none ([`Reads`]). What a
/// job's read freed goes back to the system before `each_job` runs
/// ([`tracecast_ingest::memory`]).
pub fn for_each_input<T>(
    paths: &[PathBuf],
    each: bool,
    opts: &TraceOptions,
    read: impl FnMut(&mut JobInput<'_>) -> (Option<T>, Vec<tracecast_ingest::Error>),
    each_job: impl FnMut(T, Vec<tracecast_ingest::Error>),
) -> Result<Reads> {
    for_each_listed(jobs_of(paths, each), opts, read, each_job)
}

/// A job given none of whose ranks could be read: its path and the first reason.
#[derive(Debug, Clone, serde::Serialize)]
pub struct UnreadJob {
    /// The job's directory or first file.
    pub path: String,
    /// Why, the first of its errors.
    pub error: String,
}

/// What reading a command's jobs came to.
#[derive(Debug, Default)]
pub struct Reads {
    /// Whether any file was bad.
    pub failed: bool,
    /// The jobs that gave none (their reader returned nothing), in the order given: a
    /// command's outputs name them (`analyze`'s JSON, the report's page).
    pub unread_jobs: Vec<UnreadJob>,
}

/// [`for_each_input`] over jobs the caller lists (each a name and its paths),
/// all of the command's rank passes in one loop, so that the last is known.
pub fn for_each_listed<T>(
    jobs: Vec<(PathBuf, Vec<PathBuf>)>,
    opts: &TraceOptions,
    mut read: impl FnMut(&mut JobInput<'_>) -> (Option<T>, Vec<tracecast_ingest::Error>),
    mut each_job: impl FnMut(T, Vec<tracecast_ingest::Error>),
) -> Result<Reads> {
    let (quiet, strict) = (opts.quiet, opts.strict);
    let mut reads = Reads::default();
    let count = jobs.len();
    for (k, (path, inputs)) in jobs.into_iter().enumerate() {
        let last = k + 1 == count;
        let mut files = Vec::new();
        let mut listing_errors = Vec::new();
        for p in &inputs {
            match job::trace_files(p) {
                Ok(f) => files.extend(f),
                Err(e) => listing_errors.push(e),
            }
            // A dataset names the rank files its ingest could not read.
            if tracecast_ingest::dataset::is_dataset(p) {
                listing_errors.extend(tracecast_ingest::dataset::unread_at_ingest(p));
            }
        }
        let (files, repeated) = job::distinct_files(files);
        listing_errors.extend(repeated);
        let total_bytes: u64 = files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
        let bar = progress_bar(files.len(), total_bytes, quiet);
        if last {
            tracecast_ingest::memory::last_rank_pass();
        }
        let on_file = |_: &Path| bar.inc(1);
        let mut input = JobInput { path, files, listed: listing_errors, on_file: &on_file };
        let (job, mut failures) = read(&mut input);
        tracecast_ingest::memory::release_freed_memory();
        bar.finish_and_clear();
        // A read that read no rank through its input still has its listing said.
        failures.append(&mut input.listed);
        for e in &failures {
            crate::output::stderr_line(format_args!("error: {e}"));
            if matches!(e, tracecast_ingest::Error::DuplicateRank { .. } | tracecast_ingest::Error::OtherRun { .. }) {
                crate::output::stderr_line(format_args!("  (files of unrelated runs? give them with --each)"));
            }
        }
        if !failures.is_empty() {
            reads.failed = true;
            if strict {
                anyhow::bail!("stopping at the first job with unreadable files, each named above (--strict)");
            }
        }
        if job.is_none() {
            let error = failures.first().map_or_else(|| "no trace files".to_string(), ToString::to_string);
            reads.unread_jobs.push(UnreadJob { path: input.path.display().to_string(), error });
        }
        if let Some(job) = job {
            each_job(job, failures);
        }
    }
    Ok(reads)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_job_of_more_gpu_hours_than_a_number_holds_is_refused() {
        let e = super::job_size(Some(8.0), Some(1e308)).unwrap_err().to_string();
        assert!(e.contains("--job-gpus 8 × --job-hours 1e308: more GPU-hours than a number holds"), "{e}");
        assert_eq!(super::job_size(Some(1024.0), Some(24.0)).unwrap(), (Some(1024.0), Some(24.0)));
    }

    #[test]
    fn jobs_keep_the_command_lines_order_when_files_and_directories_mix() {
        // A report of a file and a directory had diffed the directory against the file.
        let dir = std::env::temp_dir();
        let (file, other) = (std::path::PathBuf::from("before.json.gz"), std::path::PathBuf::from("also.json"));
        let names = |jobs: Vec<(std::path::PathBuf, Vec<std::path::PathBuf>)>| jobs.into_iter().map(|j| j.0).collect::<Vec<_>>();
        assert_eq!(names(super::jobs_of(&[file.clone(), dir.clone()], false)), [file.clone(), dir.clone()]);
        assert_eq!(names(super::jobs_of(&[dir.clone(), file.clone()], false)), [dir.clone(), file.clone()]);
        // Loose files are one job, where the first of them stands.
        let jobs = super::jobs_of(&[file.clone(), dir.clone(), other.clone()], false);
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0], (file.clone(), vec![file.clone(), other.clone()]));
        assert_eq!(jobs[1].0, dir);
    }
}
