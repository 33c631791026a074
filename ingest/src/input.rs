//! Opening the files a command reads, and remembering them, so that no output
//! of the same command replaces one (`report trace.json --out trace.json`
//! would otherwise turn the trace into HTML): [`crate::output::write_atomic`]
//! refuses a path this process read as an input.
//!
//! A file is known by its canonical path (symbolic links and `./` resolved),
//! not by its inode: an inode is reused once its file is deleted, and a later
//! output that happened to get it must not be refused.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

/// Process-wide and never cleared: a library user embedding several commands in
/// one process cannot write over a file any of them read.
static INPUTS: LazyLock<Mutex<HashSet<PathBuf>>> = LazyLock::new(Default::default);

/// The name a file is known by, inputs and outputs alike: its canonical path;
/// where it does not exist yet, its folder's canonical path and its name; else
/// its absolute path with `.` and `..` resolved.
pub fn file_key(path: &Path) -> Option<PathBuf> {
    let folder = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let in_folder = || Some(std::fs::canonicalize(folder).ok()?.join(path.file_name()?));
    std::fs::canonicalize(path).ok().or_else(in_folder).or_else(|| lexical(path))
}

/// `path` absolute with `.` and `..` resolved, without reading the file system.
fn lexical(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in std::path::absolute(path).ok()?.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// Remembers `path` as an input of this process.
pub fn mark(path: &Path) {
    if let Some(k) = file_key(path) {
        INPUTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(k);
    }
}

/// Whether `path` names a file this process read as an input.
pub fn is_input(path: &Path) -> bool {
    file_key(path).is_some_and(|k| INPUTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).contains(&k))
}

/// Opens `path` for reading and remembers it as an input.
pub fn open(path: &Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::File::open(path)?;
    mark(path);
    Ok(file)
}

/// Reads all of `path` and remembers it as an input.
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    let bytes = std::fs::read(path)?;
    mark(path);
    Ok(bytes)
}

/// Reads all of `path` as UTF-8 text and remembers it as an input.
pub fn read_to_string(path: &Path) -> std::io::Result<String> {
    let text = std::fs::read_to_string(path)?;
    mark(path);
    Ok(text)
}

#[cfg(test)]
mod tests {
    /// An output onto a file the process read is refused, by any spelling of
    /// its path; other outputs in the same folder are written.
    #[test]
    fn an_input_is_never_replaced_by_an_output() {
        let dir = std::env::temp_dir().join(format!("tracecast-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("trace.json");
        std::fs::write(&trace, b"{\"traceEvents\": []}").unwrap();
        assert!(!super::is_input(&trace));
        assert_eq!(super::read(&trace).unwrap(), b"{\"traceEvents\": []}");
        let spelled = dir.join(".").join("trace.json");
        for path in [&trace, &spelled] {
            let e = crate::output::write_atomic(path, b"<html>").unwrap_err().to_string();
            assert!(e.contains("is an input of this command"), "{e}");
        }
        #[cfg(unix)]
        {
            let link = dir.join("link.json");
            std::os::unix::fs::symlink(&trace, &link).unwrap();
            let e = crate::output::write_atomic(&link, b"<html>").unwrap_err().to_string();
            assert!(e.contains("is an input of this command"), "{e}");
        }
        assert_eq!(std::fs::read(&trace).unwrap(), b"{\"traceEvents\": []}");
        crate::output::write_atomic(&dir.join("report.html"), b"<html>").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
