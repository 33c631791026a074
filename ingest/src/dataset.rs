//! A trace dataset: the rank traces of a job as Parquet part files, written
//! once by `tracecast ingest` and read back by every command much faster
//! than the JSON (no text to parse).
//!
//! Layout (version 1), one part file per rank in each table, named after the
//! rank (`rank-000012.parquet`; a file whose rank comes only from its
//! position among the files is keyed by a hash of its path instead):
//!
//! ```text
//! DATASET/manifest.json          format, version, what each table holds
//! DATASET/ranks/<part>.parquet   one row: rank, file, device, distributed info, …
//! DATASET/events/<part>.parquet  every event of the rank with its arguments
//! DATASET/steps/<part>.parquet   ProfilerStep windows (CPU and GPU)
//! DATASET/collectives/<part>.parquet  communication kernels: collective, group, bytes, times
//! DATASET/summaries/<part>.json  the rank's analysis summary under the options it was made with
//! ```
//!
//! `events` and `ranks` hold the whole trace (a rank read back is the trace
//! read from JSON, field for field); `summaries` cache what `analyze` needs of
//! each rank, used only when `analyze` runs with the options (and world size)
//! they were made under and by an analysis of the same
//! [`crate::analysis::SCHEMA_VERSION`]; `steps` and `collectives` are derived,
//! for querying the dataset directly with polars, DuckDB or Spark
//! (`SELECT … FROM 'DATASET/events/*.parquet'`). Each part is written to a
//! hidden temporary name and renamed once the job's ranks are resolved, so
//! several `ingest` runs on disjoint files can fill one dataset at the same
//! time, a reader never sees half a part, and a file that lost its rank to
//! another leaves nothing behind.

use std::path::{Path, PathBuf};

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use crate::analysis::{RankSummary, Step};
use crate::collective::CollectiveArgs;
use crate::device::{DeviceProperties, DistributedInfo};
use crate::error::{Error, Result};
use crate::event::{EventKind, Events, Names};
use crate::job::{Rank, RankSource};
use crate::rank::{OpShapes, RankTrace, SyncWait};

/// The `format` of a dataset's manifest.
pub const FORMAT: &str = "tracecast-dataset";
/// The layout version this code writes and reads.
pub const VERSION: u32 = 1;

/// `manifest.json`: what the dataset is and what its tables hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// Layout version ([`VERSION`]).
    pub version: u32,
    /// The tables: directory name and what a row is.
    pub tables: Vec<(String, String)>,
}

impl Manifest {
    fn current() -> Manifest {
        let t = |n: &str, d: &str| (n.to_string(), d.to_string());
        Manifest {
            format: FORMAT.into(),
            version: VERSION,
            tables: vec![
                t(
                    "ranks",
                    "one row per rank file: rank, rank_source, file, json_bytes, events, device_name, devices (JSON), distributed (JSON), base_time_ns, skipped_events, warnings (JSON)",
                ),
                t(
                    "events",
                    "one row per event: rank, row, kind, name, ts_ns, dur_ns, pid, tid, correlation, external_id, input_dims, input_types, concrete_inputs, bytes, wait_on_stream, record_correlation, collective_args, collective_name, in_nelems, out_nelems, dtype, group_size, pg_name, pg_desc, pg_ranks",
                ),
                t("steps", "one row per ProfilerStep: rank, step, cpu_start_ns, cpu_end_ns, gpu_start_ns, gpu_end_ns"),
                t(
                    "collectives",
                    "one row per communication kernel (as `ingest --comm-kernels/--comm-pattern` define them): rank, row, collective, process_group, group_size, bytes, start_ns, end_ns, seq",
                ),
            ],
        }
    }
}

/// A dataset's table folders.
const TABLES: [&str; 5] = ["ranks", "events", "steps", "collectives", "summaries"];

/// Whether `dir` is a dataset (has a tracecast manifest).
pub fn is_dataset(dir: &Path) -> bool {
    dir.join("manifest.json").is_file() && dir.join("events").is_dir()
}

/// What a folder that is a dataset in part is (`None` for a whole dataset or another folder), in
/// words that follow "a tracecast dataset": a tracecast manifest without the `events` folder, the
/// `events` and `ranks` tables without the manifest, or those tables holding nothing but what an
/// ingest stopped before its first rank was put in place left (its staged parts, or nothing).
/// Such a folder had been read as a folder of traces ("manifest.json: not a Kineto trace", or
/// "no trace files"), the missing part unnamed.
pub fn missing_core(dir: &Path) -> Option<&'static str> {
    if is_dataset(dir) {
        return None;
    }
    let manifest = dir.join("manifest.json");
    let ours = manifest.is_file()
        && std::fs::read(&manifest).is_ok_and(|b| serde_json::from_slice::<Manifest>(&b).is_ok_and(|m| m.format == FORMAT));
    if ours {
        return Some("without its events folder: damaged or copied in part");
    }
    if manifest.exists() {
        return None;
    }
    // Rank parts in both tables (a folder of traces may hold folders of those names; a first
    // ingest stages its parts under dot names before it writes the manifest).
    let names = |table: &str| -> Option<Vec<String>> {
        let entries = std::fs::read_dir(dir.join(table)).ok()?;
        Some(entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
    };
    let is_part = |name: &String| name.starts_with("rank-") && name.ends_with(".parquet");
    if let (Some(events), Some(ranks)) = (names("events"), names("ranks"))
        && events.iter().any(is_part)
        && ranks.iter().any(is_part)
    {
        return Some("without its manifest.json: damaged or copied in part");
    }
    // Nothing here but hidden files (the record's lock) and table folders holding nothing but
    // staged parts, two folders or one staged part at least: the folder an ingest stopped
    // (Ctrl-C) before it put its first rank in place (each table's folder is made with its
    // first part).
    let (mut tables, mut parts, mut running) = (0, 0, false);
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let staged = if TABLES.contains(&name.as_str()) && entry.path().is_dir() { names(&name) } else { None };
        let pids: Option<Vec<&str>> = staged.as_ref().and_then(|names| names.iter().map(|n| crate::output::staging_pid(n)).collect());
        let Some(pids) = pids else { return None };
        // A process of this host still staging (an ingest under way). Staged names carry no
        // host: another host's live ingest reads as stopped here.
        running |= pids.iter().any(|p| !process_gone(p));
        (tables, parts) = (tables + 1, parts + pids.len());
    }
    (tables >= 2 || (tables == 1 && parts > 0)).then_some(if running {
        "that an ingest is still writing, or whose ingest was stopped, before any rank was put in place"
    } else {
        "whose ingest was stopped before it put any rank in place"
    })
}

/// The derived tables' parts (`steps`, `collectives`) of the rank of `events_path` that are not
/// in its dataset: nothing a command reads, but a query of those tables would miss the rank.
fn missing_derived(events_path: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (events_path.parent().and_then(Path::parent), events_path.file_name()) else { return Vec::new() };
    ["steps", "collectives"].iter().map(|t| dir.join(t).join(name)).filter(|p| !p.is_file()).collect()
}

/// The first entry of folder `dir` that is not a dataset's own (its manifest, its tables'
/// folders, a hidden file being written): a folder of other files is not one to write a
/// dataset into. `None` for a dataset (it takes ranks whatever else its folder holds), a
/// missing or empty folder, or one a dataset is being written into.
pub fn foreign_entry(dir: &Path) -> Option<PathBuf> {
    if is_dataset(dir) {
        return None;
    }
    std::fs::read_dir(dir).ok()?.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| {
        let name = p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        !(TABLES.contains(&&*name) || ["manifest.json", UNREAD].contains(&&*name) || name.starts_with('.'))
    })
}

/// The dataset's record of the files `ingest` could not take in: `[[file, why], …]`, with a
/// third element, [`NOT_A_RANK`], for a file that is no rank of the job (one that lost its rank
/// to another file's).
const UNREAD: &str = "unread.json";

/// The lock the writers of [`UNREAD`] take in turn (hidden: not a dataset's table or record).
const UNREAD_LOCK: &str = ".unread.lock";

/// The errors of a filesystem that keeps no file locks: Linux's ENOLCK, ENOSYS, EOPNOTSUPP.
#[cfg(target_os = "linux")]
const NO_FILE_LOCKS: [i32; 3] = [37, 38, 95];
#[cfg(not(target_os = "linux"))]
const NO_FILE_LOCKS: [i32; 0] = [];

/// The mark of a file the record keeps that is no rank of the job (the world does not count it).
const NOT_A_RANK: &str = "not a rank of the job";

/// Records in dataset `dir` the files this ingest could not take in (`unread`: file as given, why,
/// whether it is a rank of the job that could not be read), replacing what an earlier ingest
/// recorded of them and dropping its record of the files this one wrote (`written`: file as
/// given, its rank) and of unread files whose name gives a rank this one wrote from a file
/// whose name gives that rank too (`rank-2.json` mended as another folder's `rank-2.json`; not
/// `host-worker-3_…` files, whose names give no rank of theirs): reading the dataset then names
/// them, as reading the traces does.
pub fn record_unread(dir: &Path, written: &[(String, u32)], unread: &[(String, String, bool)]) -> Result<()> {
    let path = dir.join(UNREAD);
    // Ingests writing into one dataset at once (the Dask driver's shares) each read, edit and
    // write the record: held one at a time, or one's edit is lost (bad ranks unnamed, the record
    // gone). Released when `_held` drops, or by the system if the process dies.
    let lock_path = dir.join(UNREAD_LOCK);
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path);
    let lock = lock.map_err(|cause| Error::Write { path: lock_path.clone(), cause })?;
    // A filesystem without file locks (Lustre mounted `noflock`, some FUSE and SMB mounts)
    // writes the record unlocked, as before the lock: the ranks are in the dataset already, and
    // one writer at a time (`--shares 1`) keeps every record there (README, Datasets).
    let _held = match lock.lock() {
        Ok(()) => Some(lock),
        Err(e) if e.kind() == std::io::ErrorKind::Unsupported || e.raw_os_error().is_some_and(|c| NO_FILE_LOCKS.contains(&c)) => None,
        Err(cause) => return Err(Error::Write { path: lock_path, cause }),
    };
    let named = |f: &str| crate::job::rank_from_file_name(Path::new(f));
    let written_ranks: std::collections::HashSet<u32> = written.iter().filter(|w| named(&w.0) == Some(w.1)).map(|w| w.1).collect();
    // Files by where they are, however they were spelt (`./job/r.json`, `/abs/job/r.json`) and
    // from wherever the ingest ran: a record kept as given was dropped only by the same spelling.
    let written: Vec<PathBuf> = written.iter().map(|f| where_file_is(&f.0)).collect();
    let unread: Vec<Vec<String>> = unread
        .iter()
        .map(|(f, why, rank)| {
            let mut entry = vec![where_file_is(f).display().to_string(), why.clone()];
            if !rank {
                entry.push(NOT_A_RANK.to_string());
            }
            entry
        })
        .collect();
    let mut list = read_unread(dir).map_err(|why| damaged_record(dir, &why))?;
    list.retain(|entry| {
        let f = where_file_is(entry.first().map_or("", String::as_str));
        // A file that lost its rank and is gone (the stray copy deleted) takes nothing from the job.
        let not_a_rank = entry.get(2).is_some_and(|mark| mark == NOT_A_RANK);
        let stray_gone = not_a_rank && !f.exists();
        // A rank the dataset now holds from another file is no longer missing.
        let rank_written = !not_a_rank && crate::job::rank_from_file_name(&f).is_some_and(|r| written_ranks.contains(&r));
        !written.contains(&f) && !unread.iter().any(|u| Path::new(&u[0]) == f) && !stray_gone && !rank_written
    });
    list.extend(unread);
    if list.is_empty() {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Write { path, cause: e }),
            _ => Ok(()),
        };
    }
    let bytes = serde_json::to_vec_pretty(&list).unwrap_or_default();
    crate::output::write_atomic(&path, &bytes)
}

/// Where the file named `file` is, as inputs are known ([`crate::input::file_key`]).
fn where_file_is(file: &str) -> PathBuf {
    crate::input::file_key(Path::new(file)).unwrap_or_else(|| file.into())
}

/// Dataset `dir`'s record of the files it could not take in (file, why[, NOT_A_RANK]); none
/// where it has no record.
/// A record that cannot be read is an error (why, in words): read as none, it had let the
/// dataset pass as whole and the next ingest delete the record.
fn read_unread(dir: &Path) -> std::result::Result<Vec<Vec<String>>, String> {
    let bytes = match std::fs::read(dir.join(UNREAD)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.to_string()),
    };
    let list: Vec<Vec<String>> = serde_json::from_slice(&bytes).map_err(|e| format!("not a list of [file, why] records ({e})"))?;
    Ok(list.into_iter().filter(|entry| entry.len() >= 2).collect())
}

/// An error where dataset `dir`'s record of unread files cannot be read: an ingest refuses
/// it before it writes anything (it had put its ranks in place, then failed on the record).
pub fn check_unread_record(dir: &Path) -> Result<()> {
    read_unread(dir).map(drop).map_err(|why| damaged_record(dir, &why))
}

/// The error of dataset `dir`'s record of unread files that cannot be read (`why`), to its reader.
fn damaged_record(dir: &Path, why: &str) -> Error {
    let message = format!(
        "the dataset's record of the files its ingest could not take in is damaged: {why}; the ranks it named are not known (ingest the job's traces into a new dataset, or delete the record to start it afresh)"
    );
    Error::DamagedRecord { path: dir.join(UNREAD), message }
}

/// The files dataset `dir`'s ingest could not take in, as errors of the job it stands for.
pub fn unread_at_ingest(dir: &Path) -> Vec<Error> {
    // Named as bad files of the job, as ranks it could not read would be; no rank of it.
    let stopped = stopped_commits(dir).into_iter().map(|(mark, pid, parts)| {
        let ranks: Vec<u32> = parts.iter().filter_map(|p| p.strip_prefix("rank-")?.strip_suffix(".parquet")?.parse().ok()).collect();
        Error::DamagedRecord {
            path: mark,
            message: format!(
                "an ingest (process {pid}) was stopped while it put {} in place: they may hold its files or an earlier ingest's (ingest the job's traces again)",
                // Parts of ranks numbered by file order are named by a hash, not a rank.
                if ranks.len() == parts.len() { crate::analysis::rank_list(&ranks) } else { format!("{} rank part(s)", parts.len()) }
            ),
        }
    });
    let list = match read_unread(dir) {
        Ok(list) => list,
        Err(why) => {
            return stopped.chain(std::iter::once(damaged_record(dir, &why))).collect();
        }
    };
    let unread = list.into_iter().map(|mut entry| {
        let rank = entry.get(2).is_none_or(|mark| mark != NOT_A_RANK);
        entry.truncate(2);
        let (message, file) = (entry.pop().unwrap_or_default(), entry.pop().unwrap_or_default());
        Error::UnreadAtIngest { path: file.into(), dataset: dir.to_path_buf(), message, rank }
    });
    stopped.chain(unread).collect()
}

/// The mark an ingest leaves in a dataset while it puts its ranks in place:
/// `.committing-HOST-PID`, the events parts it puts, a name a line. Each part is renamed whole, but a stopped
/// (killed) ingest leaves some ranks of its files beside others of an earlier ingest's: the
/// mark outlives it and says so to every reader ([`unread_at_ingest`]).
const COMMITTING: &str = ".committing-";

/// An ingest's [`COMMITTING`] mark, ended by [`CommitMark::end`] once its ranks are in place.
#[derive(Debug)]
pub struct CommitMark {
    path: PathBuf,
    /// The events parts it puts.
    parts: Vec<String>,
}

/// Leaves the mark of this ingest putting `parts` (events part names) in place in dataset `dir`.
pub fn begin_commit(dir: &Path, parts: &[String]) -> Result<CommitMark> {
    // The host in its name: shares of one dataset on several hosts (the Dask driver's) may
    // run under one process id, and a process of another host cannot be looked up here.
    let path = dir.join(format!("{COMMITTING}{}-{}", this_host(), std::process::id()));
    crate::output::write_atomic(&path, parts.join("\n").as_bytes())?;
    Ok(CommitMark { path, parts: parts.to_vec() })
}

impl CommitMark {
    /// Ends the mark, every rank put in place, and the marks of stopped ingests whose every part
    /// this one has put again.
    pub fn end(self, dir: &Path) {
        let _ = std::fs::remove_file(&self.path);
        for (mark, _, parts) in stopped_commits(dir) {
            if parts.iter().all(|p| self.parts.contains(p)) {
                let _ = std::fs::remove_file(mark);
            }
        }
    }
}

/// How long a file an ingest writes (a staged part, a commit mark) must have gone unwritten to
/// be a stopped ingest's, where its process cannot be looked up: ten minutes, far more than
/// staging a part or putting a job's ranks in place takes.
const STOPPED_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// Whether no process `pid` runs on this host (Linux: `/proc/PID`; `false` elsewhere, where it
/// cannot be told).
fn process_gone(pid: &str) -> bool {
    cfg!(target_os = "linux") && !Path::new("/proc").join(pid).exists()
}

/// Whether nothing has written `entry` for [`STOPPED_AGE`].
fn idle_since_long(entry: &std::fs::DirEntry) -> bool {
    entry.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age > STOPPED_AGE)
}

/// This host's name as a mark's name holds it (letters, digits and `-`).
fn this_host() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_default();
    let name: String = name.trim().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    if name.is_empty() { "host".to_string() } else { name }
}

/// The marks of ingests that were stopped while they put ranks in place in dataset `dir`
/// (mark, process id, events parts): of this host, no process of the mark's id runs (Linux,
/// where a process's liveness is `/proc/PID`, as [`remove_stopped_staging`]); of another host
/// or system, the mark is older than a put takes by far ([`STOPPED_AGE`]).
fn stopped_commits(dir: &Path) -> Vec<(PathBuf, String, Vec<String>)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let host = this_host();
    let mut out: Vec<_> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (mark_host, pid) = name.strip_prefix(COMMITTING)?.rsplit_once('-')?;
            let pid = pid.to_string();
            if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let stopped = if mark_host == host && cfg!(target_os = "linux") { process_gone(&pid) } else { idle_since_long(&e) };
            if !stopped {
                return None;
            }
            let parts = std::fs::read_to_string(e.path()).unwrap_or_default().lines().map(str::to_string).collect();
            Some((e.path(), pid, parts))
        })
        .collect();
    out.sort();
    out
}

/// The event part files of the dataset `dir`, sorted (one per rank): every
/// rank with an events part, and every rank the `ranks` table has, so that a
/// rank whose events part was lost (or is still being written: it is written
/// last) is read as a missing file, a bad rank, not left out unseen.
pub fn part_files(dir: &Path) -> Result<Vec<PathBuf>> {
    read_manifest(dir)?;
    let events = dir.join("events");
    let mut names = std::collections::BTreeSet::new();
    for table in [&events, &dir.join("ranks")] {
        let io = |cause| Error::Io { path: table.clone(), cause };
        let entries = match std::fs::read_dir(table) {
            Ok(entries) => entries,
            Err(cause) if table == &events => return Err(io(cause)),
            // A dataset without a ranks table is refused when a rank is read.
            Err(_) => continue,
        };
        for entry in entries {
            let name = entry.map_err(io)?.file_name().to_string_lossy().into_owned();
            // Dot files are parts still being written.
            if !name.starts_with('.') && name.ends_with(".parquet") {
                names.insert(name);
            }
        }
    }
    if names.is_empty() {
        return Err(Error::EmptyDataset { path: dir.to_path_buf() });
    }
    Ok(names.into_iter().map(|n| events.join(n)).collect())
}

/// Removes from dataset `dir`'s tables the parts an ingest was staging when it was stopped
/// (killed): a staged part is named `.NAME.tmp-PID-N`, no process `PID` runs here any more, and
/// nothing has written it for [`STOPPED_AGE`]. Those of a running ingest (several may
/// write one dataset at once, from other hosts too, whose PIDs this one cannot see: a part is
/// written in one go, then renamed) are kept. Linux only (where a process's liveness is
/// `/proc/PID`); elsewhere nothing is removed.
pub fn remove_stopped_staging(dir: &Path) {
    if !cfg!(target_os = "linux") || !(is_dataset(dir) || missing_core(dir).is_some()) {
        return;
    }
    let Ok(tables) = std::fs::read_dir(dir) else { return };
    for table in tables.flatten().map(|e| e.path()).filter(|p| p.is_dir()) {
        let Ok(entries) = std::fs::read_dir(&table) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if crate::output::staging_pid(&name).is_some_and(process_gone) && idle_since_long(&entry) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join("manifest.json");
    let text = crate::input::read(&path).map_err(|cause| Error::Io { path: path.clone(), cause })?;
    let m: Manifest =
        serde_json::from_slice(&text).map_err(|e| Error::Schema { path: path.clone(), message: format!("not a dataset manifest: {e}") })?;
    if m.format != FORMAT || m.version != VERSION {
        return Err(Error::Schema {
            path,
            message: format!("dataset {} version {}; this tracecast reads {FORMAT} version {VERSION}", m.format, m.version),
        });
    }
    Ok(m)
}

/// LZ4 decodes several times faster than the zstd polars defaults to, for
/// files ~25 % larger: a dataset is written once and read by every command.
const COMPRESSION: ParquetCompression = ParquetCompression::Lz4Raw;

/// The name of a rank's part files.
fn part_name(rank: &Rank) -> String {
    match rank.source {
        RankSource::DistributedInfo | RankSource::FileName => format!("rank-{:06}.parquet", rank.rank),
        RankSource::FileOrder => {
            // FNV-1a of the path: stable across runs and machines for the same path.
            let path = std::fs::canonicalize(&rank.trace.path).unwrap_or_else(|_| rank.trace.path.clone());
            let hash =
                path.to_string_lossy().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
            format!("file-{hash:016x}.parquet")
        }
        // An export's ranks: by the file and which process and GPU of it, so
        // ingesting the export again replaces them whatever else was ingested with it.
        RankSource::Export => {
            let path = std::fs::canonicalize(&rank.trace.path).unwrap_or_else(|_| rank.trace.path.clone());
            let key = rank.trace.export_rank.map(|k| format!("#{}#{}", k.device, k.global_pid)).unwrap_or_default();
            let hash = path
                .to_string_lossy()
                .bytes()
                .chain(key.bytes())
                .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
            format!("export-{hash:016x}.parquet")
        }
    }
}

fn polars_error(path: &Path, e: PolarsError) -> Error {
    Error::Schema { path: path.to_path_buf(), message: format!("dataset part: {e}") }
}

fn col<T, P: ?Sized>(name: &str, values: T) -> Column
where
    Series: NamedFrom<T, P>,
{
    Column::new(name.into(), values)
}

/// A side table (by row, ascending) spread over every row: `None` where it has no entry.
fn spread<'a, T: 'a>(n: usize, rows: impl IntoIterator<Item = (u32, &'a T)>) -> Vec<Option<&'a T>> {
    let mut out = vec![None; n];
    for (row, v) in rows {
        if let Some(slot) = out.get_mut(row as usize) {
            *slot = Some(v);
        }
    }
    out
}

/// A rank's part files written under hidden temporary names
/// ([`write_rank`]), put in place by [`StagedRank::commit`] once the job's
/// ranks are resolved; dropped uncommitted (the file that lost its rank to
/// another), they are removed and the dataset never sees them.
#[derive(Debug)]
#[must_use = "a staged rank is removed unless committed"]
pub struct StagedRank {
    /// The dataset.
    dir: PathBuf,
    /// The summary and the derived tables, then the events part: committed in this order.
    parts: Vec<crate::output::Staged>,
    /// The rank's summary of an earlier ingest, where this one caches none: removed before the
    /// events part is replaced (it had stayed, served wherever the new part had the old length).
    stale_summary: Option<PathBuf>,
}

impl StagedRank {
    /// The name of the events part it puts in place (`rank-000003.parquet`).
    pub fn events_name(&self) -> Option<String> {
        Some(self.parts.last()?.path().file_name()?.to_string_lossy().into_owned())
    }

    /// Renames the rank's parts into the dataset, the events part last: its
    /// events are read only once its other tables are in place (a reader that
    /// lists it between the renames names it as a rank without its events
    /// part, [`part_files`]). Every part is checked against the command's
    /// inputs before any is renamed, so a refusal leaves the rank as it was.
    /// The dataset's manifest is written with its first rank, here: a run that
    /// commits no rank leaves none (nor removes another run's).
    /// Returns the events part's path.
    pub fn commit(self) -> Result<PathBuf> {
        let events = self.parts.last().map(|p| p.path().to_path_buf()).unwrap_or_default();
        for part in &self.parts {
            crate::output::refuse_input(part.path())?;
        }
        if !self.dir.join("manifest.json").is_file() {
            let manifest = serde_json::to_vec_pretty(&Manifest::current()).unwrap_or_default();
            crate::output::write_atomic(&self.dir.join("manifest.json"), &manifest)?;
        }
        if let Some(stale) = &self.stale_summary {
            match std::fs::remove_file(stale) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(crate::error::Error::Io { path: stale.clone(), cause: e });
                }
                _ => {}
            }
        }
        for part in self.parts {
            part.commit()?;
        }
        Ok(events)
    }
}

/// Writes one rank for the dataset `dir` (made when missing; its manifest comes
/// with the first commit): its part files, staged for [`StagedRank::commit`]. `summary`
/// is the rank's analysis summary, cached under `key`
/// ([`crate::analysis::summary_key`]; none cached without one), and `steps`
/// its profiler steps ([`crate::analysis::RankContext::steps`]); the
/// `collectives` table lists its communication kernels.
///
/// Staged, not written in place, because which of two files claiming one rank
/// keeps it is known only once every file of the job is read: the loser's
/// parts must neither mix with the winner's nor stay behind under a name of
/// their own.
pub fn write_rank(dir: &Path, rank: &Rank, steps: &[Step], key: Option<&str>, summary: &RankSummary) -> Result<StagedRank> {
    let t = &rank.trace;
    let name = part_name(rank);
    let r = rank.rank;
    let ev = &t.events;
    let n = ev.len();

    // events
    let shapes = spread(n, t.op_shapes.iter().map(|s| (s.event, s)));
    let bytes = spread(n, t.copy_bytes.iter().map(|(row, b)| (*row, b)));
    let waits = spread(n, t.sync_waits.iter().map(|(row, w)| (*row, w)));
    let args = spread(n, t.collective_args.iter().map(|(row, a)| (*row, a)));
    let text = |f: fn(&OpShapes) -> &str| shapes.iter().map(|s| s.map(f)).collect::<Vec<Option<&str>>>();
    let arg_text = |f: fn(&CollectiveArgs) -> Option<&str>| args.iter().map(|a| a.and_then(f)).collect::<Vec<Option<&str>>>();
    let arg_num = |f: fn(&CollectiveArgs) -> Option<i64>| args.iter().map(|a| a.and_then(f)).collect::<Vec<Option<i64>>>();
    let mut events = DataFrame::new_infer_height(vec![
        col("rank", vec![r; n]),
        col("row", (0..n as u32).collect::<Vec<u32>>()),
        col("kind", ev.kind.iter().map(|k| k.as_str()).collect::<Vec<&str>>()),
        col("name", ev.name.iter().map(|&id| t.names.get(id)).collect::<Vec<&str>>()),
        col("ts_ns", ev.ts_ns.clone()),
        col("dur_ns", ev.dur_ns.clone()),
        col("pid", ev.pid.clone()),
        col("tid", ev.tid.clone()),
        col("correlation", ev.correlation.clone()),
        col("external_id", ev.external_id.clone()),
        col("input_dims", text(|s| &s.input_dims)),
        col("input_types", text(|s| &s.input_types)),
        col("concrete_inputs", text(|s| &s.concrete_inputs)),
        col("bytes", bytes.iter().map(|b| b.copied()).collect::<Vec<Option<u64>>>()),
        col("wait_on_stream", waits.iter().map(|w| w.map(|w| w.wait_on_stream)).collect::<Vec<Option<i64>>>()),
        col("record_correlation", waits.iter().map(|w| w.map(|w| w.record_correlation)).collect::<Vec<Option<i64>>>()),
        col("collective_args", args.iter().map(Option::is_some).collect::<Vec<bool>>()),
        col("collective_name", arg_text(|a| a.collective_name.as_deref())),
        col("in_nelems", arg_num(|a| a.in_nelems)),
        col("out_nelems", arg_num(|a| a.out_nelems)),
        col("dtype", arg_text(|a| a.dtype.as_deref())),
        col("group_size", arg_num(|a| a.group_size)),
        col("pg_name", arg_text(|a| a.pg_name.as_deref())),
        col("pg_desc", arg_text(|a| a.pg_desc.as_deref())),
        col("pg_ranks", arg_text(|a| a.pg_ranks.as_deref())),
    ])
    .map_err(|e| polars_error(&t.path, e))?;

    // ranks, as the trace recorded them (ingest reads without `--device`: a later `--device`
    // names the GPU, as it would name the trace's).
    let mut ranks = DataFrame::new_infer_height(vec![
        col("rank", vec![r]),
        col("rank_source", vec![source_name(rank.source)]),
        col("file", vec![t.path.display().to_string()]),
        col("json_bytes", vec![t.json_bytes]),
        col("events", vec![n as u64]),
        col("device_name", vec![t.device_name()]),
        col("devices", vec![json(&t.devices)]),
        col("distributed", vec![t.distributed.as_ref().map(json)]),
        col("base_time_ns", vec![t.base_time_ns]),
        col("skipped_events", vec![t.skipped_events]),
        col("warnings", vec![json(&t.warnings)]),
    ])
    .map_err(|e| polars_error(&t.path, e))?;

    // steps and collectives (derived)
    let mut steps_df = DataFrame::new_infer_height(vec![
        col("rank", vec![r; steps.len()]),
        col("step", steps.iter().map(|s| s.number).collect::<Vec<i64>>()),
        col("cpu_start_ns", steps.iter().map(|s| s.cpu_start_ns).collect::<Vec<i64>>()),
        col("cpu_end_ns", steps.iter().map(|s| s.cpu_end_ns).collect::<Vec<i64>>()),
        col("gpu_start_ns", steps.iter().map(|s| s.gpu.map(|w| w.start_ns)).collect::<Vec<Option<i64>>>()),
        col("gpu_end_ns", steps.iter().map(|s| s.gpu.map(|w| w.end_ns)).collect::<Vec<Option<i64>>>()),
    ])
    .map_err(|e| polars_error(&t.path, e))?;
    let colls = summary.collectives();
    let inst = colls.rows();
    let mut colls_df = DataFrame::new_infer_height(vec![
        col("rank", vec![r; inst.len()]),
        col("row", inst.iter().map(|i| i.row).collect::<Vec<u32>>()),
        col("collective", inst.iter().map(|i| i.collective.as_str()).collect::<Vec<&str>>()),
        col("process_group", inst.iter().map(|i| i.process_group.as_deref()).collect::<Vec<Option<&str>>>()),
        col("group_size", inst.iter().map(|i| i.group_size).collect::<Vec<Option<i64>>>()),
        col("bytes", inst.iter().map(|i| i.bytes).collect::<Vec<Option<u64>>>()),
        col("start_ns", inst.iter().map(|i| i.start_ns).collect::<Vec<i64>>()),
        col("end_ns", inst.iter().map(|i| i.end_ns).collect::<Vec<i64>>()),
        col("seq", inst.iter().map(|i| i.seq).collect::<Vec<u32>>()),
    ])
    .map_err(|e| polars_error(&t.path, e))?;

    let events_bytes = crate::output::parquet_bytes_with(&mut events, COMPRESSION, false).map_err(|e| polars_error(&t.path, e))?;
    let mut parts = Vec::new();
    let summary_path = dir.join("summaries").join(name.replace(".parquet", ".json"));
    let stale_summary = key.is_none().then(|| summary_path.clone());
    if let Some(key) = key {
        let cached = CachedSummary {
            key: key.to_string(),
            events_bytes: Some(events_bytes.len() as u64),
            summary: serde_json::value::RawValue::from_string(summary.to_cache()).ok(),
        };
        let text = serde_json::to_string(&cached).unwrap_or_default();
        parts.push(crate::output::stage_part(&summary_path, text.as_bytes())?);
    }
    for (table, df) in [("ranks", &mut ranks), ("steps", &mut steps_df), ("collectives", &mut colls_df)] {
        let bytes = crate::output::parquet_bytes_with(df, COMPRESSION, false).map_err(|e| polars_error(&t.path, e))?;
        parts.push(crate::output::stage_part(&dir.join(table).join(&name), &bytes)?);
    }
    parts.push(crate::output::stage_part(&dir.join("events").join(&name), &events_bytes)?);
    Ok(StagedRank { dir: dir.to_path_buf(), parts, stale_summary })
}

/// JSON text of the metadata kept in the `ranks` table.
fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn source_name(s: RankSource) -> &'static str {
    match s {
        RankSource::DistributedInfo => "distributed_info",
        RankSource::FileName => "file_name",
        RankSource::FileOrder => "file_order",
        RankSource::Export => "export",
    }
}

/// `summaries/<part>.json`: a rank's analysis summary under the key of the options it was made with.
#[derive(Serialize, Deserialize)]
struct CachedSummary {
    key: String,
    /// The length of the rank's events part the summary was made with: a part
    /// replaced or cut since (a damaged copy) is read again, never summarized from the cache.
    #[serde(default)]
    events_bytes: Option<u64>,
    summary: Option<Box<serde_json::value::RawValue>>,
}

/// The analysis summary cached for the rank of `events_path` when it was made
/// under `key` ([`crate::analysis::summary_key`]); `None` otherwise.
pub fn cached_summary(events_path: &Path, key: &str) -> Option<RankSummary> {
    // A rank missing a derived part is read from its events, whose reading says so.
    if !missing_derived(events_path).is_empty() {
        return None;
    }
    let name = events_path.file_name()?.to_string_lossy().replace(".parquet", ".json");
    let path = events_path.parent()?.parent()?.join("summaries").join(name);
    let text = crate::input::read(&path).ok()?;
    let c: CachedSummary = serde_json::from_slice(&text).ok()?;
    // Only a part that is there, with the length the summary was made from (a cache
    // written before the length was kept is not trusted).
    let length = std::fs::metadata(events_path).ok().map(|m| m.len());
    if c.key != key || !matches!((c.events_bytes, length), (Some(a), Some(b)) if a == b) {
        return None;
    }
    // The rank's events are this command's input though the cache stands in for them.
    crate::input::mark(events_path);
    RankSummary::from_cache(c.summary?.get().as_bytes())
}

/// What the `ranks` part says of the rank of `events_path` (without reading its events).
#[derive(Debug, Clone)]
pub struct RankMeta {
    /// The rank, as resolved at ingest.
    pub rank: u32,
    /// How it was resolved.
    pub source: RankSource,
    /// The trace file it came from.
    pub file: PathBuf,
    /// Its `deviceProperties`.
    pub devices: Vec<DeviceProperties>,
    /// Its `distributedInfo`.
    pub distributed: Option<DistributedInfo>,
    /// Size of its JSON text, bytes.
    pub json_bytes: u64,
    /// Events read but not stored.
    pub skipped_events: u64,
    /// `baseTimeNanoseconds`, when the trace had it.
    pub base_time_ns: Option<i64>,
    /// Oddities tolerated when it was read.
    pub warnings: Vec<String>,
}

/// The `ranks` row of the rank of `events_path`.
pub fn rank_meta(events_path: &Path) -> Result<RankMeta> {
    rank_meta_read(events_path, read_df)
}

/// [`rank_meta`], its `ranks` part read by `read`: the dataset an ingest writes into is not
/// one of its inputs ([`crate::input`]), which it could not replace.
fn rank_meta_read(events_path: &Path, read: fn(&Path) -> Result<DataFrame>) -> Result<RankMeta> {
    let bad = |message: String| Error::Schema { path: events_path.to_path_buf(), message };
    let name = events_path.file_name().ok_or_else(|| bad("not a part file".into()))?;
    let dir = events_path.parent().and_then(Path::parent).ok_or_else(|| bad("not inside a dataset".into()))?;
    let ranks_path = dir.join("ranks").join(name);
    let meta = read(&ranks_path)?;
    let me = |e: PolarsError| polars_error(&ranks_path, e);
    let get_str = |c: &str| -> Result<Option<String>> { Ok(meta.column(c).map_err(me)?.str().map_err(me)?.get(0).map(str::to_string)) };
    let decode = |c: &str| -> Result<serde_json::Value> {
        match get_str(c)? {
            Some(s) => serde_json::from_str(&s).map_err(|e| Error::Schema { path: ranks_path.clone(), message: format!("{c}: {e}") }),
            None => Ok(serde_json::Value::Null),
        }
    };
    let invalid = |c: &str, e: serde_json::Error| Error::Schema { path: ranks_path.clone(), message: format!("{c}: {e}") };
    let file = get_str("file")?.ok_or_else(|| bad("ranks part has no file".into()))?;
    let rank = meta.column("rank").map_err(me)?.u32().map_err(me)?.get(0).ok_or_else(|| bad("ranks part has no rank".into()))?;
    let source = match get_str("rank_source")?.as_deref() {
        Some("distributed_info") => RankSource::DistributedInfo,
        Some("file_name") => RankSource::FileName,
        Some("export") => RankSource::Export,
        _ => RankSource::FileOrder,
    };
    let get_u64 = |c: &str| -> Result<Option<u64>> { Ok(meta.column(c).map_err(me)?.u64().map_err(me)?.get(0)) };
    Ok(RankMeta {
        rank,
        source,
        file: PathBuf::from(file),
        devices: serde_json::from_value(decode("devices")?).map_err(|e| invalid("devices", e))?,
        distributed: serde_json::from_value(decode("distributed")?).map_err(|e| invalid("distributed", e))?,
        json_bytes: get_u64("json_bytes")?.unwrap_or(0),
        skipped_events: get_u64("skipped_events")?.unwrap_or(0),
        base_time_ns: meta.column("base_time_ns").map_err(me)?.i64().map_err(me)?.get(0),
        warnings: serde_json::from_value::<Option<Vec<String>>>(decode("warnings")?)
            .map_err(|e| invalid("warnings", e))?
            .unwrap_or_default(),
    })
}

impl RankMeta {
    /// The world size from `distributedInfo`, when positive.
    pub fn declared_world_size(&self) -> Option<u32> {
        self.distributed.as_ref().and_then(DistributedInfo::positive_world_size)
    }
}

/// A part file, read as an input of the command ([`crate::input`]).
fn read_df(path: &Path) -> Result<DataFrame> {
    read_df_by(path, crate::input::open)
}

/// A part file opened by `open`.
fn read_df_by(path: &Path, open: fn(&Path) -> std::io::Result<std::fs::File>) -> Result<DataFrame> {
    let file = open(path).map_err(|cause| Error::Io { path: path.to_path_buf(), cause })?;
    // One part per thread already: polars' own threads would only contend.
    ParquetReader::new(file).read_parallel(ParallelStrategy::None).finish().map_err(|e| polars_error(path, e))
}

/// The world size dataset `dir`'s ranks declare, with the source file of the first rank
/// declaring one (`None`: no dataset, or no rank declares one). A dataset holds one job: its
/// first parts say its world.
pub fn declared_world(dir: &Path) -> Option<(u32, PathBuf)> {
    if !is_dataset(dir) {
        return None;
    }
    // Read as the output it is, not as an input: the ingest replaces its parts.
    let unmarked = |path: &Path| read_df_by(path, |p| std::fs::File::open(p));
    let parts = part_files(dir).ok()?;
    parts.iter().take(8).filter_map(|p| rank_meta_read(p, unmarked).ok()).find_map(|m| Some((m.declared_world_size()?, m.file.clone())))
}

/// Reads one rank back from its events part file (`DATASET/events/<part>`)
/// and the matching `ranks` part: the trace as read from its JSON, with the
/// rank resolved when it was ingested. `opts.device` names the GPU of an
/// export's rank that records none, as when the export is read.
pub fn read_part(events_path: &Path, opts: &crate::kineto::ReadOptions) -> Result<RankTrace> {
    let bad = |message: String| Error::Schema { path: events_path.to_path_buf(), message };
    let m = rank_meta(events_path)?;
    let df = read_df(events_path)?;
    let pe = |e: PolarsError| polars_error(events_path, e);
    let mut t = RankTrace::new(m.file);
    t.json_bytes = m.json_bytes;
    t.skipped_events = m.skipped_events;
    t.base_time_ns = m.base_time_ns;
    t.devices = m.devices;
    t.distributed = m.distributed;
    t.warnings = m.warnings;
    for part in missing_derived(events_path) {
        t.warnings.push(format!(
            "{}: missing from the dataset (a query of that table misses this rank; no command reads it): ingest the rank again",
            part.display()
        ));
    }
    t.ingested_rank = Some((m.rank, m.source));
    t.dataset_part = Some(events_path.to_path_buf());
    // Whatever numbered it (a one-rank export named `rank-3.sqlite` takes its file's number).

    let n = df.height();
    let i64s = |c: &str| -> Result<Vec<i64>> { Ok(df.column(c).map_err(pe)?.i64().map_err(pe)?.into_no_null_iter().collect()) };
    let opt_i64 = |c: &str| -> Result<Vec<Option<i64>>> { Ok(df.column(c).map_err(pe)?.i64().map_err(pe)?.iter().collect()) };
    let strs = |c: &str| -> Result<StringChunked> { Ok(df.column(c).map_err(pe)?.str().map_err(pe)?.clone()) };
    let mut names = Names::default();
    let name_col = strs("name")?;
    let kind_col = strs("kind")?;
    let mut events = Events::default();
    events.reserve(n);
    for (k, nm) in kind_col.iter().zip(name_col.iter()) {
        let k = k.and_then(EventKind::from_name).unwrap_or(EventKind::Other);
        events.kind.push(k);
        events.name.push(names.intern(nm.unwrap_or_default()));
    }
    events.ts_ns = i64s("ts_ns")?;
    events.dur_ns = i64s("dur_ns")?;
    events.pid = i64s("pid")?;
    events.tid = i64s("tid")?;
    events.correlation = i64s("correlation")?;
    events.external_id = i64s("external_id")?;
    if [&events.ts_ns, &events.dur_ns, &events.pid, &events.tid, &events.correlation, &events.external_id].iter().any(|c| c.len() != n) {
        return Err(bad("events part has missing values in a required column".into()));
    }
    let (dims, types, concrete) = (strs("input_dims")?, strs("input_types")?, strs("concrete_inputs")?);
    for (row, ((d, ty), c)) in dims.iter().zip(types.iter()).zip(concrete.iter()).enumerate() {
        if let (Some(d), Some(ty), Some(c)) = (d, ty, c) {
            t.op_shapes.push(OpShapes { event: row as u32, input_dims: d.into(), input_types: ty.into(), concrete_inputs: c.into() });
        }
    }
    let bytes = df.column("bytes").map_err(pe)?.u64().map_err(pe)?.clone();
    t.copy_bytes = bytes.iter().enumerate().filter_map(|(row, b)| b.map(|b| (row as u32, b))).collect();
    let (on, rec) = (opt_i64("wait_on_stream")?, opt_i64("record_correlation")?);
    t.sync_waits = on
        .iter()
        .zip(&rec)
        .enumerate()
        .filter_map(|(row, (a, b))| Some((row as u32, SyncWait { wait_on_stream: (*a)?, record_correlation: (*b)? })))
        .collect();
    let has = df.column("collective_args").map_err(pe)?.bool().map_err(pe)?.clone();
    let (cname, dtype, pg_name, pg_desc, pg_ranks) =
        (strs("collective_name")?, strs("dtype")?, strs("pg_name")?, strs("pg_desc")?, strs("pg_ranks")?);
    let (inn, outn, gsize) = (opt_i64("in_nelems")?, opt_i64("out_nelems")?, opt_i64("group_size")?);
    for (row, h) in has.iter().enumerate() {
        if h != Some(true) {
            continue;
        }
        let s = |c: &StringChunked| c.get(row).map(str::to_string);
        t.collective_args.push((
            row as u32,
            CollectiveArgs {
                collective_name: s(&cname),
                in_nelems: inn[row],
                out_nelems: outn[row],
                dtype: s(&dtype),
                group_size: gsize[row],
                pg_name: s(&pg_name),
                pg_desc: s(&pg_desc),
                pg_ranks: s(&pg_ranks),
            },
        ));
    }
    t.names = names;
    t.events = events;
    // `--device`, once its events say whether it ran on a GPU.
    if let Some(device) = &opts.device {
        crate::device::name_unrecorded_gpu(&mut t, device);
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    /// Shares of one ingest (the Dask driver's) record their unread files at once: each one's
    /// record is kept (without the lock, parallel shares named 2 of 8 bad ranks, or none).
    #[test]
    fn ingests_recording_unread_files_at_once_keep_every_record() {
        let dir = std::env::temp_dir().join(format!("tracecast-unread-{}", std::process::id()));
        for round in 0..10 {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let shares: Vec<_> = (0..8)
                .map(|i| {
                    let dir = dir.clone();
                    std::thread::spawn(move || {
                        let file = format!("/nowhere/job/rank-{i}.json");
                        super::record_unread(&dir, &[], &[(file, "truncated JSON".to_string(), true)]).unwrap();
                    })
                })
                .collect();
            for s in shares {
                s.join().unwrap();
            }
            assert_eq!(super::read_unread(&dir).unwrap().len(), 8, "round {round}: {:?}", super::read_unread(&dir));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
