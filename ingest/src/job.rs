//! A [`Job`]: the rank files of one run, read in parallel, with ranks resolved.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::kineto::{self, ReadOptions};
use crate::rank::RankTrace;

/// Where a rank number came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankSource {
    /// `distributedInfo.rank`.
    DistributedInfo,
    /// The file name (`rank-N`, `rankN`, `rank_N`, `workerN`).
    FileName,
    /// Position in the sorted file list.
    FileOrder,
    /// Position among the job's Nsight Systems exports: the exports in file
    /// order, each one's ranks by GPU (`deviceId`), then process.
    Export,
}

impl RankSource {
    /// How much a rank number from this source is trusted when two files claim
    /// one number: what a trace or an export declares, then a file name, then a position.
    fn strength(self) -> u8 {
        match self {
            RankSource::DistributedInfo | RankSource::Export => 2,
            RankSource::FileName => 1,
            RankSource::FileOrder => 0,
        }
    }
}

/// Of a file holding `rank` (`held`, numbered from `held_source`) and another
/// claiming it (`claim`), which keeps it — the stronger source, else the first
/// — and the error naming the one left out: `(the claim wins, error)`.
fn contest(rank: u32, held: (&Path, RankSource), claim: (&Path, RankSource)) -> (bool, Error) {
    let wins = claim.1.strength() > held.1.strength();
    let (first, second) = if wins { (claim.0, held.0) } else { (held.0, claim.0) };
    (wins, Error::DuplicateRank { rank, first: first.to_path_buf(), second: second.to_path_buf() })
}

/// A rank summarized before ([`Job::summarize_or`]): what its file says of it without reading it.
pub struct KnownRank<T> {
    /// Global rank, as resolved when the summary was made.
    pub rank: u32,
    /// Where the number came from.
    pub source: RankSource,
    /// The trace the rank was read from.
    pub path: PathBuf,
    /// The world size the trace declares (`distributedInfo.world_size`): the job's rule applies to it.
    pub declared_world: Option<u32>,
    /// The summary.
    pub summary: T,
}

impl<T> KnownRank<T> {
    /// The same rank with its summary mapped.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> KnownRank<U> {
        let KnownRank { rank, source, path, declared_world, summary } = self;
        KnownRank { rank, source, path, declared_world, summary: f(summary) }
    }
}

/// `files` with each file once: a file given twice, or again through a link (the same
/// [`crate::input::file_key`]), is left out and named — DESIGN §2: duplicates are an error naming
/// both files. An Nsight export's ranks are numbered by its place among the exports, so its
/// second reading had counted its GPUs again as more ranks.
pub fn distinct_files(files: Vec<PathBuf>) -> (Vec<PathBuf>, Vec<Error>) {
    let mut first_of: std::collections::HashMap<PathBuf, usize> = std::collections::HashMap::new();
    let (mut kept, mut repeated): (Vec<PathBuf>, Vec<Error>) = (Vec::with_capacity(files.len()), Vec::new());
    for f in files {
        match crate::input::file_key(&f).map(|key| first_of.get(&key).copied().ok_or(key)) {
            Some(Ok(i)) => repeated.push(Error::SameFile { first: kept[i].clone(), path: f }),
            Some(Err(key)) => {
                first_of.insert(key, kept.len());
                kept.push(f);
            }
            None => kept.push(f),
        }
    }
    // A byte-identical copy under another name is the same capture (an export copied beside
    // itself had become twice its ranks). Only files of one size are compared, their first
    // 64 KiB first: ranks of one job differ from their first bytes.
    // Ordered by size: the errors (and a dataset's record of them) the same on every run.
    let mut by_size: std::collections::BTreeMap<u64, Vec<usize>> = std::collections::BTreeMap::new();
    for (i, f) in kept.iter().enumerate() {
        if let Some(m) = std::fs::metadata(f).ok().filter(|m| m.is_file() && m.len() > 0) {
            by_size.entry(m.len()).or_default().push(i);
        }
    }
    let mut copies: Vec<usize> = Vec::new();
    for group in by_size.into_values().filter(|g| g.len() > 1) {
        for (n, &i) in group.iter().enumerate() {
            if let Some(&first) = group[..n].iter().find(|&&j| !copies.contains(&j) && same_bytes(&kept[j], &kept[i])) {
                repeated.push(Error::SameFile { first: kept[first].clone(), path: kept[i].clone() });
                copies.push(i);
            }
        }
    }
    copies.sort_unstable();
    for i in copies.into_iter().rev() {
        kept.remove(i);
    }
    (kept, repeated)
}

/// Whether two files of one size hold the same bytes: their first 64 KiB, then the rest.
fn same_bytes(a: &Path, b: &Path) -> bool {
    let (Ok(mut a), Ok(mut b)) = (std::fs::File::open(a), std::fs::File::open(b)) else { return false };
    let (mut x, mut y) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    loop {
        let read = |f: &mut std::fs::File, buf: &mut [u8]| crate::kineto::read_full(f, buf);
        let (Ok(n), Ok(m)) = (read(&mut a, &mut x), read(&mut b, &mut y)) else { return false };
        if n != m || x[..n] != y[..m] {
            return false;
        }
        if n == 0 {
            return true;
        }
    }
}

/// One rank of a job.
#[derive(Debug, Clone)]
pub struct Rank {
    /// Global rank.
    pub rank: u32,
    /// How the rank was determined.
    pub source: RankSource,
    /// Its trace.
    pub trace: RankTrace,
}

/// The rank traces of one run, sorted by rank, and the files that could not be read.
#[derive(Debug)]
pub struct Job {
    /// The directory, or the first file when files were given.
    pub path: PathBuf,
    /// Ranks that were read, ascending.
    pub ranks: Vec<Rank>,
    /// Files that failed, with why; they do not stop the others.
    pub failures: Vec<Error>,
}

impl Job {
    /// Number of ranks in the run ([`world_size`]).
    pub fn world_size(&self) -> u32 {
        world_size(
            self.ranks.iter().filter_map(|r| r.trace.declared_world_size()).max(),
            count(self.ranks.len()).saturating_add(unread_ranks(&self.failures)),
            self.ranks.iter().map(|r| r.rank).max(),
        )
    }

    /// Reads the files of one job in parallel. `on_file` is called once per
    /// file as it finishes (for progress display) with its JSON size.
    pub fn read(path: PathBuf, files: &[PathBuf], opts: &ReadOptions, on_file: &(dyn Fn(&Path) + Sync)) -> Job {
        let mut results: Vec<Vec<Result<RankTrace>>> = files
            .par_iter()
            .map(|f| {
                let r = read_file(f, opts, 0);
                on_file(f);
                match r {
                    Ok(traces) => traces.into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(e)],
                }
            })
            .collect();
        // The job's files are read: the reader's block buffers go back now.
        crate::kineto::release_read_buffers();
        // An export's ranks follow those of the job's exports before it (as
        // `export_starts` numbers them, here without reading an export twice).
        let mut next = 0u32;
        for (f, traces) in files.iter().zip(&mut results) {
            if !crate::nsys::is_export(f) {
                continue;
            }
            // An export that cannot be read counts as the job's world counts it ([`ranks_of_file`]).
            let count = if traces.iter().all(Result::is_err) { ranks_of_file(f) } else { u32::try_from(traces.len()).unwrap_or(u32::MAX) };
            for t in traces.iter_mut().flatten() {
                if let Some((r, RankSource::Export)) = &mut t.ingested_rank {
                    *r = r.saturating_add(next);
                }
            }
            next = next.saturating_add(count);
        }
        Job::from_traces(path, results.into_iter().flatten().collect())
    }

    /// Reads the files of one job in parallel and hands each rank to
    /// `summarize` as soon as it is read; its trace is dropped right after,
    /// so memory holds one trace per worker thread plus the summaries,
    /// whatever the number of ranks. Ranks are resolved as [`Job::read`]
    /// does; a file claiming a rank an earlier file has is a failure.
    pub fn summarize<T: Send>(
        files: &[PathBuf],
        opts: &ReadOptions,
        on_file: &(dyn Fn(&Path) + Sync),
        summarize: &(dyn Fn(&Rank) -> T + Sync),
    ) -> (Vec<T>, Vec<Error>) {
        Job::summarize_or(files, opts, on_file, &|_| None, summarize)
    }

    /// [`Job::summarize`], where `known` may give a file's rank and summary
    /// without reading it (a summary cached in a dataset).
    pub fn summarize_or<T: Send>(
        files: &[PathBuf],
        opts: &ReadOptions,
        on_file: &(dyn Fn(&Path) + Sync),
        known: &(dyn Fn(&Path) -> Option<KnownRank<T>> + Sync),
        summarize: &(dyn Fn(&Rank) -> T + Sync),
    ) -> (Vec<T>, Vec<Error>) {
        let starts = export_starts(files);
        let results: Vec<Vec<Result<KnownRank<T>>>> = files
            .par_iter()
            .enumerate()
            .map(|(order, f)| {
                if let Some(k) = known(f) {
                    on_file(f);
                    // A dataset keeps the rank, and where it came from, as resolved when it was made.
                    return vec![Ok(k)];
                }
                // An export's ranks are summarized in parallel, each dropped once summarized.
                let r = match read_file(f, opts, starts.get(order).copied().unwrap_or(0)) {
                    Ok(traces) => traces
                        .into_par_iter()
                        .map(|trace| {
                            let (rank, source) = resolve_rank(&trace, order);
                            let (path, declared_world) = (trace.path.clone(), trace.declared_world_size());
                            let rank = Rank { rank, source, trace };
                            Ok(KnownRank { rank: rank.rank, source, path, declared_world, summary: summarize(&rank) })
                        })
                        .collect(),
                    Err(e) => vec![Err(e)],
                };
                on_file(f);
                r
            })
            .collect();
        // The job's files are read: the reader's block buffers go back before
        // the caller's reduce (a report calibrates and replays inside its read).
        crate::kineto::release_read_buffers();
        // Each rank's file, where its number came from and its place in `out`.
        let mut seen: Vec<(u32, PathBuf, RankSource, usize)> = Vec::new();
        let (mut out, mut failures) = (Vec::new(), Vec::new());
        let results: Vec<_> = results.into_iter().flatten().collect();
        let world = JobWorld::of(results.iter().filter_map(|r| r.as_ref().ok()).map(|r| (r.path.as_path(), r.declared_world)));
        for r in results {
            match r {
                Ok(KnownRank { path, declared_world, .. }) if let Some(e) = world.refusal(&path, declared_world) => failures.push(e),
                Ok(KnownRank { rank, source, path, summary: t, .. }) => {
                    if let Some(held) = seen.iter_mut().find(|s| s.0 == rank) {
                        let (wins, error) = contest(rank, (&held.1, held.2), (&path, source));
                        if wins {
                            (held.1, held.2) = (path, source);
                            if let Some(slot) = out.get_mut(held.3) {
                                *slot = t;
                            }
                        }
                        failures.push(error);
                        continue;
                    }
                    seen.push((rank, path, source, out.len()));
                    out.push(t);
                }
                Err(e) => failures.push(e),
            }
        }
        (out, said_once(failures))
    }

    /// [`Job::summarize_or`] with a `summarize` that may refuse a rank (a step
    /// range the trace does not have): its error joins the failures.
    pub fn try_summarize_or<T: Send>(
        files: &[PathBuf],
        opts: &ReadOptions,
        on_file: &(dyn Fn(&Path) + Sync),
        known: &(dyn Fn(&Path) -> Option<KnownRank<T>> + Sync),
        summarize: &(dyn Fn(&Rank) -> Result<T> + Sync),
    ) -> (Vec<T>, Vec<Error>) {
        let known = |f: &Path| known(f).map(|k| k.map(Ok));
        let (results, mut failures) = Job::summarize_or(files, opts, on_file, &known, summarize);
        let mut out = Vec::with_capacity(results.len());
        for r in results {
            match r {
                Ok(t) => out.push(t),
                Err(e) => failures.push(e),
            }
        }
        (out, said_once(failures))
    }

    /// Assembles a job from read results (in file order), resolving ranks.
    pub fn from_traces(path: PathBuf, results: Vec<Result<RankTrace>>) -> Job {
        let mut ranks: Vec<Rank> = Vec::new();
        let mut failures = Vec::new();
        let world = JobWorld::of(results.iter().filter_map(|r| r.as_ref().ok()).map(|t| (t.path.as_path(), t.declared_world_size())));
        for (order, result) in results.into_iter().enumerate() {
            let trace = match result {
                Ok(t) if let Some(e) = world.refusal(&t.path, t.declared_world_size()) => {
                    failures.push(e);
                    continue;
                }
                Ok(t) => t,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            let (rank, source) = resolve_rank(&trace, order);
            if let Some(held) = ranks.iter_mut().find(|r| r.rank == rank) {
                let (wins, error) = contest(rank, (&held.trace.path, held.source), (&trace.path, source));
                if wins {
                    *held = Rank { rank, source, trace };
                }
                failures.push(error);
                continue;
            }
            ranks.push(Rank { rank, source, trace });
        }
        ranks.sort_by_key(|r| r.rank);
        Job { path, ranks, failures: said_once(failures) }
    }
}

/// The world size of a job, the one rule of every command: the largest `distributedInfo.world_size`
/// its ranks declare; else its `ranks` (those read and those that could not be, each unreadable
/// file one), and never fewer than its highest rank + 1 (a lone `rank-3.json` is of a world of 4
/// at least; a job whose second file is bad had been a world of 3 with a rank 3).
pub fn world_size(declared: Option<u32>, ranks: u32, highest_rank: Option<u32>) -> u32 {
    declared.unwrap_or_else(|| ranks.max(highest_rank.map_or(0, |r| r.saturating_add(1))))
}

/// The ranks of a job that could not be read, among its `failures` ([`Error::is_unread_rank`]).
pub fn unread_ranks(failures: &[Error]) -> u32 {
    count(failures.iter().filter(|e| e.is_unread_rank()).count())
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The world size the ranks of one job declare (`distributedInfo.world_size`): the one most of
/// its ranks declare (of as many, the largest: whatever the files' order). A rank declaring
/// another is of another run: matched with this one's ranks, its collectives had been fitted as
/// this job's (a V100 trace of 2 ranks calibrated beside an A100 one of 8 took the A100's
/// all-to-all bandwidth). [`Job::world_size`] is then the world all its ranks declare.
struct JobWorld {
    /// The job's world size and the first file declaring it; None where no file declares one.
    declared: Option<(u32, PathBuf)>,
}

impl JobWorld {
    fn of<'p>(files: impl Iterator<Item = (&'p Path, Option<u32>)>) -> JobWorld {
        // (world size, first file, files declaring it), in the order first declared.
        let mut counts: Vec<(u32, &Path, usize)> = Vec::new();
        for (path, world) in files {
            let Some(w) = world else { continue };
            match counts.iter_mut().find(|c| c.0 == w) {
                Some(c) => c.2 += 1,
                None => counts.push((w, path, 1)),
            }
        }
        let declared = counts.iter().max_by_key(|c| (c.2, c.0)).map(|c| (c.0, c.1.to_path_buf()));
        JobWorld { declared }
    }

    /// Why the file at `path`, declaring `world`, is another run's: `None` where it is this job's.
    fn refusal(&self, path: &Path, world: Option<u32>) -> Option<Error> {
        let (job_world, first) = self.declared.as_ref()?;
        let world = world.filter(|w| w != job_world)?;
        Some(Error::OtherRun { path: path.to_path_buf(), world, job_world: *job_world, first: first.clone() })
    }
}

/// Failures with one message said once: the ranks of one export share its file, and
/// an error of the file (a step range it does not have) is the same for each of them.
fn said_once(failures: Vec<Error>) -> Vec<Error> {
    let mut seen = std::collections::HashSet::new();
    failures.into_iter().filter(|e| seen.insert(e.to_string())).collect()
}

/// Reads one file of a job: a Kineto trace or a dataset part (one rank), or
/// an Nsight Systems export (one rank per process and GPU, numbered from
/// `first` on; an export of a single rank takes its number from its file
/// name when that has one, as a Kineto file does).
fn read_file(path: &Path, opts: &ReadOptions, first: u32) -> Result<Vec<RankTrace>> {
    if !crate::nsys::is_export(path) {
        let name = path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        let schema = |message: &str| Error::Schema { path: path.to_path_buf(), message: message.to_string() };
        if name.ends_with(".nsys-rep") || name.ends_with(".qdrep") {
            return Err(schema("an Nsight Systems report, which only nsys reads: export it with `nsys export --type sqlite FILE`"));
        }
        let non_empty = std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
        // What a file is goes by its content, whatever its name: a Kineto trace named `.sqlite` is read as one.
        let kineto_content = || {
            let mut head = [0u8; 64];
            let n = std::fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut head)).unwrap_or(0);
            let head = &head[..n];
            kineto::looks_like_trace(head)
        };
        if name.ends_with(".sqlite") && non_empty && !kineto_content() {
            return Err(schema("not an SQLite database (it does not start with `SQLite format 3`): not an Nsight Systems export"));
        }
        return kineto::read_path(path, opts).map(|t| vec![t]);
    }
    let mut traces = crate::nsys::read_path(path, opts)?;
    let named = if traces.len() == 1 { rank_from_file_name(path) } else { None };
    for (i, t) in traces.iter_mut().enumerate() {
        t.ingested_rank = Some(match named {
            Some(r) => (r, RankSource::FileName),
            None => (first.saturating_add(i as u32), RankSource::Export),
        });
    }
    Ok(traces)
}

impl Job {
    /// How many ranks the files of one job hold: one per trace file (or dataset
    /// part), an Nsight Systems export's one per process and GPU (an export
    /// that cannot be read counts one: it fails, as a file, when it is read).
    pub fn ranks_in(files: &[PathBuf]) -> u32 {
        files.iter().map(|f| ranks_of_file(f)).fold(0u32, u32::saturating_add)
    }
}

/// How many ranks one file of a job holds: one per trace file (or dataset part), an
/// Nsight Systems export's one per process and GPU, one for an export that cannot be
/// read (it fails, as a file, when it is read, and the ranks after it keep their numbers).
fn ranks_of_file(file: &Path) -> u32 {
    if !crate::nsys::is_export(file) {
        return 1;
    }
    crate::nsys::ranks(file).map_or(1, |r| u32::try_from(r.len().max(1)).unwrap_or(u32::MAX))
}

/// Where the ranks of each Nsight Systems export among `files` start: after
/// those of the exports before it (each counted by [`ranks_of_file`]; the last
/// export is never counted). 0 for other files. Only [`Job::summarize_or`] needs
/// this before reading (it hands each rank on before the others are read).
fn export_starts(files: &[PathBuf]) -> Vec<u32> {
    let exports: Vec<usize> = files.iter().enumerate().filter(|(_, f)| crate::nsys::is_export(f)).map(|(i, _)| i).collect();
    let mut starts = vec![0u32; files.len()];
    let mut next = 0u32;
    for (k, &i) in exports.iter().enumerate() {
        if let Some(s) = starts.get_mut(i) {
            *s = next;
        }
        if k + 1 < exports.len() {
            next = next.saturating_add(files.get(i).map_or(0, |f| ranks_of_file(f)));
        }
    }
    starts
}

/// A rank's number: `distributedInfo.rank`, else from its file name, else its position among the files.
fn resolve_rank(trace: &RankTrace, order: usize) -> (u32, RankSource) {
    if let Some(resolved) = trace.ingested_rank {
        resolved
    } else if let Some(r) = trace.declared_rank().and_then(|r| u32::try_from(r).ok()) {
        (r, RankSource::DistributedInfo)
    } else if let Some(r) = rank_from_file_name(&trace.path) {
        (r, RankSource::FileName)
    } else {
        (order as u32, RankSource::FileOrder)
    }
}

/// The trace files a path stands for: the file itself (or a `parquetdir`
/// Nsight Systems export directory), or the `*.json`, `*.json.gz`, `*.gz`
/// and `*.sqlite` (Nsight Systems export) files and `parquetdir` exports of
/// a directory (not recursive), sorted by name.
pub fn trace_files(path: &Path) -> Result<Vec<PathBuf>> {
    let io = |cause| Error::Io { path: path.to_path_buf(), cause };
    let meta = std::fs::metadata(path).map_err(io)?;
    // A `parquetdir` Nsight Systems export is one export (read whole), not a directory of traces.
    if !meta.is_dir() || crate::nsys::is_export(path) {
        return Ok(vec![path.to_path_buf()]);
    }
    if crate::dataset::is_dataset(path) {
        return crate::dataset::part_files(path);
    }
    if let Some(missing) = crate::dataset::missing_core(path) {
        return Err(Error::Schema {
            path: path.to_path_buf(),
            message: format!("a tracecast dataset {missing}; ingest the traces into it again"),
        });
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(io)? {
        let entry = entry.map_err(io)?;
        let p = entry.path();
        let name = entry.file_name().to_string_lossy().to_ascii_lowercase();
        // A link that leads nowhere (dangling, or a loop) is a rank that cannot be read: listed,
        // so that reading it names it, not skipped without a word.
        let broken_link = entry.file_type().is_ok_and(|t| t.is_symlink()) && std::fs::metadata(&p).is_err();
        if !name.starts_with('.') && (((p.is_file() || broken_link) && is_trace_name(&name)) || (p.is_dir() && crate::nsys::is_export(&p)))
        {
            files.push(p);
        }
    }
    if files.is_empty() {
        return Err(Error::NoTraces { path: path.to_path_buf() });
    }
    files.sort();
    Ok(files)
}

/// Whether a (lower-case) file name is one of a trace: `.json`, `.gz`, `.sqlite`.
fn is_trace_name(name: &str) -> bool {
    name.ends_with(".json") || name.ends_with(".gz") || name.ends_with(".sqlite")
}

/// Every trace file (`.json`, `.json.gz`, `.gz`, `.sqlite`), `parquetdir` export and
/// dataset under `dir`, at any depth, sorted: a corpus of unrelated runs, to be read one
/// file (or dataset) per job.
pub fn trace_files_under(dir: &Path) -> Result<Vec<PathBuf>> {
    // Each directory once, by its canonical path: a symbolic link back up the tree
    // (`loop/self -> .`) would otherwise be walked forever or list a file many times.
    fn walk(dir: &Path, seen: &mut std::collections::HashSet<PathBuf>, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        if !seen.insert(std::fs::canonicalize(dir)?) {
            return Ok(());
        }
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let p = entry.path();
            let name = entry.file_name().to_string_lossy().to_ascii_lowercase();
            if name.starts_with('.') {
                continue;
            }
            // A `parquetdir` export and a dataset are each one job, not folders of traces; so is a
            // dataset damaged in part (read as one, its error names what it lacks: its manifest and
            // summaries had been read as traces).
            if p.is_dir() && (crate::nsys::is_export(&p) || crate::dataset::is_dataset(&p) || crate::dataset::missing_core(&p).is_some()) {
                out.push(p);
            } else if p.is_dir() {
                walk(&p, seen, out)?;
            } else if is_trace_name(&name) {
                out.push(p);
            }
        }
        Ok(())
    }
    // Given a dataset (whole or damaged) or a `parquetdir` export itself: it is the one job.
    if crate::nsys::is_export(dir) || crate::dataset::is_dataset(dir) || crate::dataset::missing_core(dir).is_some() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut files = Vec::new();
    walk(dir, &mut Default::default(), &mut files).map_err(|cause| Error::Io { path: dir.to_path_buf(), cause })?;
    files.sort();
    Ok(files)
}

/// `rank-3`, `rank3`, `rank_3`, `worker3` in a file name.
pub fn rank_from_file_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
    for key in ["rank", "worker"] {
        let mut from = 0;
        while let Some(k) = name.get(from..).and_then(|s| s.find(key)) {
            let rest = name.get(from + k + key.len()..).unwrap_or_default();
            let rest = rest.strip_prefix(['-', '_']).unwrap_or(rest);
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse::<u32>() {
                return Some(n);
            }
            from += k + key.len();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::rank_from_file_name;
    use std::path::Path;

    /// As `summarize_or`: a rank the trace declares keeps its number against a file
    /// numbered by its position, whichever comes first.
    #[test]
    fn a_declared_rank_outranks_a_position_when_a_job_is_assembled() {
        let trace = |name: &str, rank: &str| {
            let json = format!(
                r#"{{"distributedInfo": {{"rank": {rank}, "world_size": 2}}, "traceEvents": [{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 10}}]}}"#
            );
            crate::kineto::parse_bytes(json.as_bytes(), Path::new(name), &crate::ReadOptions::default())
        };
        let job = super::Job::from_traces("job".into(), vec![trace("a.json", "-3"), trace("b.json", "0")]);
        assert_eq!(job.ranks.len(), 1);
        assert_eq!((job.ranks[0].rank, job.ranks[0].trace.path.as_path()), (0, Path::new("b.json")));
        assert_eq!(job.failures.len(), 1);
        assert!(job.failures[0].to_string().starts_with("a.json: rank 0 is also claimed by b.json"), "{}", job.failures[0]);
    }

    /// The job's world size is the one most of its ranks declare; of as many, the largest,
    /// whatever the files' order (the first file's had won a tie, so a folder's name order
    /// decided which run was left out).
    #[test]
    fn a_jobs_world_size_does_not_depend_on_the_files_order() {
        let trace = |name: &str, rank: u32, world: u32| {
            let json = format!(
                r#"{{"distributedInfo": {{"rank": {rank}, "world_size": {world}}}, "traceEvents": [{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 10}}]}}"#
            );
            crate::kineto::parse_bytes(json.as_bytes(), Path::new(name), &crate::ReadOptions::default())
        };
        for order in [[("a.json", 8), ("b.json", 128)], [("b.json", 128), ("a.json", 8)]] {
            let job = super::Job::from_traces("job".into(), order.iter().map(|&(n, w)| trace(n, 0, w)).collect());
            assert_eq!((job.ranks.len(), job.world_size()), (1, 128), "{order:?}");
            assert!(job.failures[0].to_string().starts_with("a.json: declares a world size of 8, where this job's files declare 128"));
        }
        // Two ranks of 8 outvote one of 128.
        let job = super::Job::from_traces("job".into(), vec![trace("c.json", 5, 128), trace("a.json", 0, 8), trace("b.json", 1, 8)]);
        assert_eq!((job.ranks.len(), job.world_size()), (2, 8));
    }

    #[test]
    fn ranks_from_file_names() {
        assert_eq!(rank_from_file_name(Path::new("d/rank-34.Jul_15.pt.trace.json.gz")), Some(34));
        assert_eq!(rank_from_file_name(Path::new("sampled_rank-1.json.gz")), Some(1));
        assert_eq!(rank_from_file_name(Path::new("graph_capture_rank_0.177.pt.trace.json.gz")), Some(0));
        assert_eq!(rank_from_file_name(Path::new("worker0.1623143089861.pt.trace.json.gz")), Some(0));
        assert_eq!(rank_from_file_name(Path::new("trace.json")), None);
    }
}
