//! Writing outputs atomically: a temporary file beside the target, then a rename,
//! so a reader never sees half a file and a failed run leaves the old one intact.
//! A target that is not a file (`/dev/null`, a FIFO, `-` for standard output)
//! is written through instead, and a symbolic link is followed: a rename
//! would put a file in its place.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// Creates `path` atomically from what `fill` writes.
pub fn write_atomic_with(path: &Path, fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>) -> Result<()> {
    stage_with(path, fill)?.commit()
}

/// A file written in full under a hidden temporary name beside its target and
/// renamed onto it by [`Staged::commit`]; dropped uncommitted, it is removed.
/// Readers of a folder skip dot files, so a staged file is seen by none.
#[derive(Debug)]
#[must_use = "a staged file is removed unless committed"]
pub struct Staged {
    /// The temporary file; empty once renamed.
    tmp: PathBuf,
    path: PathBuf,
    /// A target that is not a file (a device, a pipe, standard output or error),
    /// open, that the commit copies the temporary file into.
    through: Option<std::fs::File>,
}

impl Staged {
    /// Renames the staged file onto its target.
    pub fn commit(mut self) -> Result<()> {
        let fail = |cause| Error::Write { path: self.path.clone(), cause };
        if let Some(mut target) = self.through.take() {
            // What the command printed before goes first; the temporary file goes with `self`.
            let _ = (std::io::stdout().flush(), std::io::stderr().flush());
            let mut staged = std::fs::File::open(&self.tmp).map_err(fail)?;
            return match std::io::copy(&mut staged, &mut target).and_then(|_| target.flush()) {
                // A reader that closed the pipe took what it wanted (`--json - | head`), as the
                // terminal text's reader does: the command keeps its own exit status.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.map_err(fail),
            };
        }
        refuse_input(&self.path)?;
        std::fs::rename(&self.tmp, &self.path).map_err(fail)?;
        live_staged().remove(&self.tmp);
        self.tmp = PathBuf::new();
        Ok(())
    }

    /// The file it will be once committed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The staged file itself, for a writer that opens it by name ([`stage_for_writer`]).
    pub fn staged_path(&self) -> &Path {
        &self.tmp
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
            live_staged().remove(&self.tmp);
        }
    }
}

/// This process's staged files not yet put in place or removed: what a stop removes
/// ([`remove_staged_when_stopped`]).
static LIVE_STAGED: std::sync::LazyLock<std::sync::Mutex<std::collections::HashSet<PathBuf>>> = std::sync::LazyLock::new(Default::default);

fn live_staged() -> std::sync::MutexGuard<'static, std::collections::HashSet<PathBuf>> {
    LIVE_STAGED.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// From now on, a command stopped by SIGINT, SIGTERM or SIGHUP removes the files it was
/// staging before it ends as the signal ends it: an interrupted `ingest` had left a hidden
/// part per rank and table (a 256-rank job: up to 1 178 files), and `replay` its half-written
/// Perfetto timeline, which no later run removed. (SIGKILL cannot be caught: a dataset's next
/// ingest removes a killed one's parts once they are [`crate::dataset`]'s ten minutes old.)
pub fn remove_staged_when_stopped() {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        // A signal the command was started ignoring stays ignored: `nohup tracecast ingest …`
        // outlives its terminal, and a script's background command its Ctrl-C.
        let ignored = |signal: i32| {
            // SAFETY: a null new action only reads the current one into `old`.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN }
        };
        let caught: Vec<i32> = [SIGINT, SIGTERM, SIGHUP].into_iter().filter(|&s| !ignored(s)).collect();
        let Ok(mut signals) = signal_hook::iterator::Signals::new(caught) else { return };
        std::thread::spawn(move || {
            if let Some(signal) = signals.forever().next() {
                // Held to the end: no thread stages a file meanwhile (one put in place meanwhile
                // is whole; its staged name is gone, and removing it fails harmlessly).
                let live = live_staged();
                for tmp in live.iter() {
                    let _ = std::fs::remove_file(tmp);
                }
                // Then the folders the command made, where they are left empty.
                for (folder, made) in made_folders().iter() {
                    remove_empty_folders(folder, made);
                }
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                std::process::exit(128 + signal);
            }
        });
    }
}

/// Folders a command writes into, each with the folders it made to (deepest first), that a stop
/// empties of empty folders ([`remove_empty_folders`]).
static MADE_FOLDERS: std::sync::Mutex<Vec<(PathBuf, Vec<PathBuf>)>> = std::sync::Mutex::new(Vec::new());

fn made_folders() -> std::sync::MutexGuard<'static, Vec<(PathBuf, Vec<PathBuf>)>> {
    MADE_FOLDERS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a command that wrote nothing into `folder` leaves of it: its empty subfolders (a
/// dataset's tables) go, then each folder of `made` (those the command made, deepest first) that
/// is left empty. A folder the user made stays.
pub fn remove_empty_folders(folder: &Path, made: &[PathBuf]) {
    for sub in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let _ = std::fs::remove_dir(sub.path());
    }
    for folder in made {
        let _ = std::fs::remove_dir(folder);
    }
}

/// A stop ([`remove_staged_when_stopped`]) does [`remove_empty_folders`] of `folder` and `made`:
/// an ingest stopped before its first rank was put in place leaves nothing, as one that fails does.
pub fn remove_empty_folders_when_stopped(folder: PathBuf, made: Vec<PathBuf>) {
    made_folders().push((folder, made));
}

/// This process's next staged name for a file of `path`'s name ([`staging_name`]): unique per
/// process and call, so that threads (and `ingest` runs sharing a dataset) never share one.
fn next_staging_name(path: &Path, suffix: &str) -> String {
    static NEXT_STAGING: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let n = NEXT_STAGING.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}{suffix}", staging_name(&file_name, std::process::id(), n))
}

/// The hidden name a file of `file_name` is staged under by process `pid` (its `n`th staging).
fn staging_name(file_name: &str, pid: u32, n: u64) -> String {
    format!(".{file_name}.tmp-{pid}-{n}")
}

/// The process that staged a file of this name ([`staging_name`]), when it is one.
pub(crate) fn staging_pid(name: &str) -> Option<&str> {
    let (_, rest) = name.strip_prefix('.')?.rsplit_once(".tmp-")?;
    rest.split_once('-').map(|(pid, _)| pid).filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}
/// Writes what `fill` writes, synced, under a temporary name beside `path`
/// (its folder made when missing), for [`Staged::commit`] to put in place.
/// The path is claimed as this command's output ([`claim`]) as it is staged: a second output
/// of one name is refused before any is put in place.
pub fn stage_with(path: &Path, fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>) -> Result<Staged> {
    stage_claimed(path, fill, true, "")
}

/// [`stage`] of a dataset's rank part, not claimed: an ingest refuses two staged files of one
/// rank by name before it puts any in place ([`claim`] would name the part, not the files).
pub fn stage_part(path: &Path, bytes: &[u8]) -> Result<Staged> {
    stage_claimed(path, |w| w.write_all(bytes), false, "")
}

/// An empty staged file for `path` that a library which opens files by name writes
/// ([`Staged::staged_path`]; a chart's PNG, whose encoder knows the format by the name's end,
/// `suffix`), then [`Staged::commit`] puts in place. Not claimed: the caller claims `path` when
/// it claims its other outputs.
pub fn stage_for_writer(path: &Path, suffix: &str) -> Result<Staged> {
    stage_claimed(path, |_| Ok(()), false, suffix)
}

fn stage_claimed(path: &Path, fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>, claimed: bool, suffix: &str) -> Result<Staged> {
    let fail = |cause| Error::Write { path: path.to_path_buf(), cause };
    refuse_input(path)?;
    let (path, through) = match target_of(path).map_err(fail)? {
        // A link stays; the file it names is replaced.
        Target::File(resolved) => {
            if claimed {
                claim(&resolved)?;
            }
            (resolved, None)
        }
        // Staged in the temporary directory and copied at the commit, so that a command's
        // outputs still go all or none.
        Target::Through(f) => (path.to_path_buf(), Some(f)),
    };
    let path = path.as_path();
    let dir = match path.parent() {
        _ if through.is_some() => std::env::temp_dir(),
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(next_staging_name(path, suffix));
    // Its folder and itself made and registered under one hold of the set, which a stop holds
    // to the end: a stop in between would leave them (a folder made again after the stop had
    // removed it).
    let mut live = live_staged();
    // A missing output directory is made, as `--plots DIR` does.
    create_dir(&dir).map_err(fail)?;
    let created = std::fs::File::create(&tmp);
    if created.is_ok() {
        live.insert(tmp.clone());
    }
    drop(live);
    let mut f = created.map_err(fail)?;
    let staged = Staged { tmp, path: path.to_path_buf(), through };
    // On failure `staged` is dropped, which removes the temporary file.
    fill(&mut f).and_then(|()| f.flush()).and_then(|()| f.sync_all()).map_err(fail)?;
    Ok(staged)
}

/// Puts every staged file in place, in order: a command stages all its outputs
/// first, so that one that cannot be written leaves the others as they were.
pub fn commit_all(staged: Vec<Staged>) -> Result<()> {
    staged.into_iter().try_for_each(Staged::commit)
}

/// Where an output goes.
enum Target {
    /// A regular file (existing or not) at this path, symbolic links followed.
    File(PathBuf),
    /// Something that is not a file (a device, a FIFO, standard output), opened for writing.
    Through(std::fs::File),
}

/// What `path` names as an output: `-` is standard output; a symbolic link
/// is followed to the path it names (which may not exist yet); an existing
/// target that is neither a file nor a directory is opened to write through.
fn target_of(path: &Path) -> std::io::Result<Target> {
    if path.as_os_str() == "-" {
        return stdout_file().map(Target::Through);
    }
    // The kernel follows every link, `/proc/self/fd`'s too (`/dev/stdout` on a pipe is `pipe:[N]`).
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.is_dir() {
            // Said before anything is written (the rename would fail only at the commit).
            return Err(std::io::Error::new(std::io::ErrorKind::IsADirectory, "a directory is in its place"));
        }
        if !meta.is_file() {
            return std::fs::OpenOptions::new().write(true).open(path).map(Target::Through);
        }
        // This process's standard output or error redirected to a file (`--json /dev/stdout >> log`):
        // written through the descriptor, at its offset, not replaced.
        if let Some(f) = standard_stream_at(&meta)? {
            return Ok(Target::Through(f));
        }
    }
    // A regular file, or nothing yet: its links followed one at a time, so that a dangling
    // one resolves to the file it would make too; 40 as the kernel's limit.
    let mut resolved = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&resolved) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let to = std::fs::read_link(&resolved)?;
                resolved = match resolved.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(Target::File(resolved)),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// Standard output or error, duplicated, where it is the file `meta` describes.
#[cfg(unix)]
fn standard_stream_at(meta: &std::fs::Metadata) -> std::io::Result<Option<std::fs::File>> {
    use std::os::fd::AsFd as _;
    use std::os::unix::fs::MetadataExt as _;
    let streams = [std::io::stdout().as_fd().try_clone_to_owned(), std::io::stderr().as_fd().try_clone_to_owned()];
    for fd in streams.into_iter().flatten() {
        let f = std::fs::File::from(fd);
        if f.metadata().is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino()) {
            return Ok(Some(f));
        }
    }
    Ok(None)
}

#[cfg(not(unix))]
fn standard_stream_at(_: &std::fs::Metadata) -> std::io::Result<Option<std::fs::File>> {
    Ok(None)
}

/// Standard output as a file to write through (the commit flushes what was printed before).
#[cfg(unix)]
fn stdout_file() -> std::io::Result<std::fs::File> {
    use std::os::fd::AsFd as _;
    Ok(std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?))
}

#[cfg(not(unix))]
fn stdout_file() -> std::io::Result<std::fs::File> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "standard output as an output path is supported on Unix only"))
}

/// [`stage_with`] for bytes in memory.
pub fn stage(path: &Path, bytes: &[u8]) -> Result<Staged> {
    stage_with(path, |w| w.write_all(bytes))
}

/// The files this run of the command line has written, where each is claimed once
/// ([`claim_each_output_once`]); `None` in a library's use.
static WRITTEN: std::sync::Mutex<Option<std::collections::HashSet<PathBuf>>> = std::sync::Mutex::new(None);

/// From now on, an output path this process writes twice is an error ([`claim`]): one command
/// line's outputs are each a file of their own. Names a command derives (`fit.json` →
/// `fit.a100-80gb.json`, `t.json.gz` → `t.job2.json.gz`, a folder's `breakdown.csv`) had
/// replaced another output of the same run in silence.
pub fn claim_each_output_once() {
    *WRITTEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Default::default());
}

/// An error when this run has written `path` already ([`claim_each_output_once`]).
pub fn claim(path: &Path) -> Result<()> {
    let mut written = WRITTEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let Some(written) = written.as_mut() else { return Ok(()) };
    let key = crate::input::file_key(path).unwrap_or_else(|| path.to_path_buf());
    if !written.insert(key) {
        return Err(Error::Write {
            path: path.to_path_buf(),
            cause: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "this command wrote it already, as another of its outputs (a name one flag gives and another derives): give each output its own name",
            ),
        });
    }
    Ok(())
}

/// An error when `path` is a file this command read ([`crate::input`]): an
/// output never replaces an input.
pub fn refuse_input(path: &Path) -> Result<()> {
    if crate::input::is_input(path) {
        return Err(Error::Write {
            path: path.to_path_buf(),
            cause: std::io::Error::new(std::io::ErrorKind::AlreadyExists, "it is an input of this command; choose another output path"),
        });
    }
    Ok(())
}

/// Makes the output directory `dir` and its missing parents; where a part
/// of it is a file, the error says so (`create_dir_all` says only "File
/// exists" or "Not a directory").
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| not_a_directory(dir).unwrap_or(e))
}

/// Why `dir` cannot be made when a part of it is a file: `create_dir_all`
/// says only "File exists" or "Not a directory". `None` when the deepest
/// part of `dir` that exists is a directory (the cause is something else).
pub fn not_a_directory(dir: &Path) -> Option<std::io::Error> {
    let existing = dir.ancestors().filter(|a| !a.as_os_str().is_empty()).find(|a| a.exists())?;
    (!existing.is_dir())
        .then(|| std::io::Error::new(std::io::ErrorKind::NotADirectory, format!("{} is not a directory", existing.display())))
}

/// A table as Parquet bytes. polars writes the newest Arrow schema (strings
/// as `string_view`) into the footer, which readers older than Arrow 15
/// cannot open; the oldest schema (large strings) describes the same pages,
/// so it replaces it.
pub fn parquet_bytes(df: &mut polars::prelude::DataFrame) -> polars::prelude::PolarsResult<Vec<u8>> {
    parquet_bytes_with(df, polars::prelude::ParquetCompression::default(), true)
}

/// [`parquet_bytes`] with a compression and whether polars may use its
/// threads (not when the caller already writes one table per thread).
pub fn parquet_bytes_with(
    df: &mut polars::prelude::DataFrame,
    compression: polars::prelude::ParquetCompression,
    parallel: bool,
) -> polars::prelude::PolarsResult<Vec<u8>> {
    use polars::prelude::*;
    let mut buf: Vec<u8> = Vec::new();
    let schema = df.schema().to_arrow(CompatLevel::oldest());
    let key = polars_parquet::write::schema_to_metadata_key(&schema);
    ParquetWriter::new(&mut buf)
        .with_compression(compression)
        .set_parallel(parallel)
        .with_key_value_metadata(Some(polars::io::parquet::write::KeyValueMetadata::Static(vec![key])))
        .finish(df)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_staged_files_process_is_read_from_the_name_it_was_staged_under() {
        assert_eq!(super::staging_pid(&super::staging_name("rank-000003.parquet", 4242, 7)), Some("4242"));
        assert_eq!([super::staging_pid("rank-000003.parquet"), super::staging_pid(".x.tmp--1")], [None, None]);
    }

    #[test]
    fn replaces_whole_file() {
        let dir = std::env::temp_dir().join(format!("tracecast-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.json");
        super::write_atomic(&p, b"first").unwrap();
        super::write_atomic(&p, b"second").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A symbolic link is followed: the file it names is replaced, the link
    /// stays; a dangling one makes the file it names.
    #[cfg(unix)]
    #[test]
    fn a_link_is_followed_not_replaced() {
        let dir = std::env::temp_dir().join(format!("tracecast-out-link-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let (target, link) = (dir.join("sub/target.json"), dir.join("link.json"));
        std::fs::write(&target, b"old").unwrap();
        std::os::unix::fs::symlink("sub/target.json", &link).unwrap();
        super::write_atomic(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        let dangling = dir.join("dangling.json");
        std::os::unix::fs::symlink("sub/made.json", &dangling).unwrap();
        super::write_atomic(&dangling, b"made").unwrap();
        assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(dir.join("sub/made.json")).unwrap(), b"made");
        // No temporary file left beside either.
        assert_eq!(std::fs::read_dir(dir.join("sub")).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A FIFO (as `/dev/null` or `/dev/stdout`) is written through, not
    /// replaced by a file.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_fifo_is_written_through() {
        use std::io::Read as _;
        use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
        let dir = std::env::temp_dir().join(format!("tracecast-out-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path and a mode.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // A reader opened without waiting, so that the writer's open does not block.
        let mut reader = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo).unwrap();
        super::write_atomic(&fifo, b"through").unwrap();
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        let mut got = Vec::new();
        reader.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"through");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An output whose directory is a file (or lies under one) names that file.
    #[test]
    fn a_file_where_the_directory_should_be_is_named() {
        let dir = std::env::temp_dir().join(format!("tracecast-out-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("afile");
        std::fs::write(&file, b"kept").unwrap();
        for path in [file.join("x.json"), file.join("sub/x.json")] {
            let e = super::write_atomic(&path, b"new").unwrap_err().to_string();
            assert_eq!(e, format!("{}: cannot write: {} is not a directory", path.display(), file.display()));
        }
        // Output directories (synth --out, --csv, --plots) the same.
        for sub in [file.join("csv"), file.join("a/b")] {
            assert_eq!(super::create_dir(&sub).unwrap_err().to_string(), format!("{} is not a directory", file.display()));
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"kept");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
