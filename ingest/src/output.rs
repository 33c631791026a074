//! Writing outputs atomically: a temporary file beside the target, then a rename,
//! so a reader never sees half a file and a failed run leaves the old one intact.

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
}

impl Staged {
    /// Renames the staged file onto its target.
    pub fn commit(mut self) -> Result<()> {
        refuse_input(&self.path)?;
        std::fs::rename(&self.tmp, &self.path).map_err(|cause| Error::Write { path: self.path.clone(), cause })?;
        self.tmp = PathBuf::new();
        Ok(())
    }

    /// The file it will be once committed.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes what `fill` writes, synced, under a temporary name beside `path`
/// (its folder made when missing), for [`Staged::commit`] to put in place.
pub fn stage_with(path: &Path, fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>) -> Result<Staged> {
    let fail = |cause| Error::Write { path: path.to_path_buf(), cause };
    refuse_input(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    // A missing output directory is made, as `--plots DIR` does.
    create_dir(&dir).map_err(fail)?;
    // Unique per process and call: threads (and `ingest` runs sharing a dataset) never share one.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let staged = Staged { tmp: dir.join(format!(".{file_name}.tmp-{}-{n}", std::process::id())), path: path.to_path_buf() };
    let mut f = std::fs::File::create(&staged.tmp).map_err(fail)?;
    // On failure `staged` is dropped, which removes the temporary file.
    fill(&mut f).and_then(|()| f.flush()).and_then(|()| f.sync_all()).map_err(fail)?;
    Ok(staged)
}

/// [`stage_with`] for bytes in memory.
pub fn stage(path: &Path, bytes: &[u8]) -> Result<Staged> {
    stage_with(path, |w| w.write_all(bytes))
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
fn not_a_directory(dir: &Path) -> Option<std::io::Error> {
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
