//! `distributed/dask_ingest.py`: ingest on a Dask cluster writes one dataset
//! whose analysis equals the direct one.

mod common;

use std::path::{Path, PathBuf};

use common::{run, scratch, stderr};

/// The Python that has `dask.distributed`: `TRACECAST_PYTHON`, else `python3`.
/// `.ci/run` makes a virtual environment with it and sets
/// TRACECAST_REQUIRE_DASK=1; elsewhere a Python without Dask skips the test.
fn python_with_dask() -> Option<PathBuf> {
    let python = std::env::var_os("TRACECAST_PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    let ok = std::process::Command::new(&python).args(["-c", "import dask.distributed"]).output().is_ok_and(|o| o.status.success());
    ok.then_some(python)
}

fn analysis_of(path: &Path, out: &Path) -> serde_json::Value {
    let o = run(&["analyze".as_ref(), path.as_os_str(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap();
    doc["jobs"][0].as_object_mut().unwrap().remove("path");
    doc
}

/// The Python with dask.distributed, or `None` (the test is skipped) unless
/// `TRACECAST_REQUIRE_DASK` says it must be there.
fn python_or_skip() -> Option<PathBuf> {
    let python = python_with_dask();
    if python.is_none() {
        assert!(
            std::env::var_os("TRACECAST_REQUIRE_DASK").is_none(),
            "dask.distributed is required (TRACECAST_REQUIRE_DASK) but not importable"
        );
        eprintln!("skipped: no Python with dask.distributed (`.ci/run` installs it; or set TRACECAST_PYTHON)");
    }
    python
}

/// Runs the Dask driver on a two-worker local cluster: `input` into the dataset `out`; returns what it printed.
fn dask_ingest(python: &Path, input: &Path, out: &Path) -> String {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("distributed/dask_ingest.py");
    let o = std::process::Command::new(python)
        .arg(&driver)
        .args(["--scheduler", "local:2", "--tracecast", env!("CARGO_BIN_EXE_tracecast"), "--out"])
        .arg(out)
        .arg(input)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A synthetic job of `ranks` ranks and `layers` layers a step, written to `dir/job`.
fn synthetic_job(dir: &Path, ranks: u32, layers: u32) -> PathBuf {
    let job = dir.join("job");
    let mut spec = tracecast_calibrate::synth::JobSpec::default();
    spec.ranks = ranks;
    spec.layers = layers;
    tracecast_calibrate::synth::write_job(&spec, &job).unwrap();
    job
}

#[test]
fn dask_ingest_on_a_two_worker_local_cluster_equals_the_direct_analysis() {
    let Some(python) = python_or_skip() else { return };
    let dir = scratch("dask");
    let job = synthetic_job(&dir, 8, 4);
    let ds = dir.join("ds");
    let said = dask_ingest(&python, &job, &ds);
    assert!(said.contains("8 file(s)") && said.contains("on 2 worker(s)"), "{said}");
    assert_eq!(analysis_of(&ds, &dir.join("b.json")), analysis_of(&job, &dir.join("a.json")));
}

#[test]
fn dask_ingest_puts_a_jobs_nsight_exports_in_one_share() {
    let Some(python) = python_or_skip() else { return };
    let dir = scratch("dask-nsys");
    // Two exports of two GPUs each: their ranks are numbered by their place
    // among the job's exports, so they go to one share.
    let nsys = common::shared().join("nsys").canonicalize().unwrap();
    let ds = dir.join("ds");
    let said = dask_ingest(&python, &nsys, &ds);
    assert!(said.contains("2 file(s) in 1 share(s)"), "{said}");
    let (a, b) = (analysis_of(&nsys, &dir.join("a.json")), analysis_of(&ds, &dir.join("b.json")));
    assert_eq!(a["jobs"][0]["ranks"].as_array().unwrap().len(), 4);
    assert_eq!(a, b);
}

/// What the driver cannot run is said in one line and exit 2 before any share starts: a cluster
/// of no workers (it hung forever), an output that is a file (each share had said it, and the
/// summary named a dataset never made), a tracecast that is not there (a Python traceback).
#[test]
fn dask_ingest_refuses_what_it_cannot_run_in_one_line() {
    let Some(python) = python_or_skip() else { return };
    let dir = scratch("dask-refused");
    let job = synthetic_job(&dir, 2, 2);
    let file = dir.join("file.txt");
    std::fs::write(&file, "not a dataset").unwrap();
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("distributed/dask_ingest.py");
    let (ds, file) = (dir.join("ds").display().to_string(), file.display().to_string());
    let tracecast = env!("CARGO_BIN_EXE_tracecast");
    for (args, says) in [
        (["local:0", tracecast, &ds], "--scheduler local:0: local:N takes a number of workers of at least 1"),
        (["local:x", tracecast, &ds], "--scheduler local:x: local:N takes"),
        (["local:1", "/nowhere/tracecast", &ds], "--tracecast /nowhere/tracecast: no such program"),
        (["local:1", tracecast, &file], "is a file, not a dataset directory"),
    ] {
        let o = std::process::Command::new(&python)
            .arg(&driver)
            .args(["--scheduler", args[0], "--tracecast", args[1], "--out", args[2]])
            .arg(&job)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.starts_with("error: ") && e.contains(says) && e.lines().count() == 1, "{args:?}: {e}");
    }
    assert!(!dir.join("ds").exists());
}

/// A share whose files are all unreadable writes no rank and may end before any other share made
/// the dataset: its files had gone unrecorded, and the dataset then read as whole (exit 0). The
/// driver runs such a share again once the dataset is made, and every command that reads the
/// dataset names the file. A run that makes no dataset says nothing was written.
#[test]
fn dask_ingest_records_a_share_of_unreadable_files_alone() {
    let Some(python) = python_or_skip() else { return };
    let dir = scratch("dask-unread");
    let job = synthetic_job(&dir, 4, 2);
    let bad = job.join("rank-2.json.gz");
    let bytes = std::fs::read(&bad).unwrap();
    std::fs::write(&bad, &bytes[..bytes.len() / 2]).unwrap();
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("distributed/dask_ingest.py");
    let run = |out: &Path, input: &Path| {
        std::process::Command::new(&python)
            .arg(&driver)
            .args(["--scheduler", "local:2", "--shares", "4", "--tracecast", env!("CARGO_BIN_EXE_tracecast"), "--out"])
            .arg(out)
            .arg(input)
            .output()
            .unwrap()
    };
    let ds = dir.join("ds");
    let o = run(&ds, &job);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let read = common::run(&["analyze".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert_eq!(read.status.code(), Some(2));
    assert!(common::stderr(&read).contains("rank-2.json.gz: could not be read when the dataset"), "{}", common::stderr(&read));
    // Only unreadable files: no dataset, and the summary names none.
    let only = dir.join("only");
    std::fs::create_dir_all(&only).unwrap();
    std::fs::copy(&bad, only.join("rank-0.json.gz")).unwrap();
    let o = run(&dir.join("none"), &only);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stdout).contains("nothing was written to"), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(!dir.join("none").join("manifest.json").exists());
}
