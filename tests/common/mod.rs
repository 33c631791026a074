//! Helpers shared by the CLI integration tests.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tracecast"))
}

pub fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/traces")
}

/// A fresh, empty directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tracecast-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn run(args: &[&std::ffi::OsStr]) -> Output {
    bin().args(args).output().unwrap()
}

/// `tracecast synth --out OUT -q EXTRA…`, which must succeed.
pub fn synth(out: &Path, extra: &[&str]) {
    let o = bin().args(["synth".as_ref(), "--out".as_ref(), out.as_os_str(), "-q".as_ref()]).args(extra).output().unwrap();
    assert!(o.status.success(), "synth {extra:?}: {}", stderr(&o));
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

pub fn all_shared_traces() -> Vec<PathBuf> {
    tracecast_ingest::job::trace_files_under(&shared()).unwrap().into_iter().filter(|p| p.to_string_lossy().ends_with(".json.gz")).collect()
}

/// A real trace (HTA's `trace_diff/control`, one V100 rank) copied to `to`, for tests
/// that change or guard a file they own.
pub fn copy_of_a_real_trace(to: &Path) {
    if let Some(folder) = to.parent() {
        std::fs::create_dir_all(folder).unwrap();
    }
    std::fs::copy(shared().join("hta/trace_diff/control/control.json.gz"), to).unwrap();
}
