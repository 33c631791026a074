//! Nsight Systems exports end to end (issue #26): every command on the two
//! shared exports (`../shared/traces/nsys`, read in place), calibration on
//! a synthetic export whose NVTX ranges carry shapes, and bad exports.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

mod common;

use common::*;

fn export(name: &str) -> PathBuf {
    let p = shared().join("nsys").join(name);
    assert!(p.exists(), "../shared/traces/nsys is missing: {}", p.display());
    p
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

const H100: &str = "h100_2gpu_1s.sqlite";
const MFU: &str = "mfu_2gpu_before.sqlite";

/// `tracecast replay FILE --json OUT -q EXTRA…`, which must succeed: its JSON.
fn replay_json(file: &Path, extra: &[&str], out: &Path) -> serde_json::Value {
    let mut args: Vec<&std::ffi::OsStr> = vec!["replay".as_ref(), file.as_os_str(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    let o = run(&args);
    assert!(o.status.success(), "{}: {}", file.display(), stderr(&o));
    json(out)
}

#[test]
fn analyze_reads_an_export_as_one_rank_per_gpu() {
    let dir = scratch("nsys-analyze");
    let out = dir.join("a.json");
    let f = export(MFU);
    let o = run(&["analyze".as_ref(), f.as_os_str(), "--json".as_ref(), out.as_os_str(), "--device".as_ref(), "h100-sxm".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&out);
    let ranks = doc["jobs"][0]["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2);
    for (i, r) in ranks.iter().enumerate() {
        assert_eq!(r["rank"], i as u64);
        assert_eq!(r["rank_source"], "export");
        assert!(r["comm_us"].as_f64().unwrap() > 1000.0, "the NCCL send/recv kernels are communication");
        assert!(r["exposed_comm_us"].as_f64().unwrap() <= r["comm_us"].as_f64().unwrap());
    }
    // The collectives are matched across the two GPUs (33 send/recv each).
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("H100 80GB HBM3"), "--device names the GPU:\n{text}");
    // Free-form metadata of the export (command lines, paths, hosts, users) is never read or echoed.
    let all = format!("{}{}{}", std::fs::read_to_string(&out).unwrap(), text, stderr(&o));
    for secret in ["torchrun", "fv_mfu_training", "FastVideo", "REDACTED", "mfu_h1002_nsys", "nsys-rep", "modal", "pt_nccl_watchdg"] {
        assert!(!all.contains(secret), "{secret} echoed");
    }
}

/// One export given twice, or once more through a link, is read once and named as a duplicate
/// (DESIGN §2): its ranks are numbered by its place among the exports, so a second reading had
/// made 4 ranks of 2 GPUs and doubled the job's exposed communication, exit 0.
#[test]
fn an_export_given_twice_is_read_once() {
    let dir = scratch("nsys-twice");
    let f = export(MFU);
    let link = dir.join("again.sqlite");
    std::os::unix::fs::symlink(&f, &link).unwrap();
    // A byte-identical copy under another name is the same capture (it had made 4 ranks too).
    let copy = dir.join("copy.sqlite");
    std::fs::copy(&f, &copy).unwrap();
    for second in [f.clone(), link, copy] {
        let out = dir.join("a.json");
        let o = run(&["analyze".as_ref(), f.as_os_str(), second.as_os_str(), "--json".as_ref(), out.as_os_str()]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(&format!("error: {}: the same file as {}", second.display(), f.display())), "{}", stderr(&o));
        let doc = json(&out);
        assert_eq!(doc["jobs"][0]["ranks"].as_array().unwrap().len(), 2, "the export's 2 GPUs, once");
        assert_eq!(doc["jobs"][0]["world_size"], 2);
    }
}

/// What a file is goes by its content: a Kineto trace named `.sqlite` was refused as "not an
/// SQLite database"; it reads as the trace it is (a `.sqlite` of neither is still refused).
#[test]
fn a_kineto_trace_named_sqlite_reads_as_kineto() {
    let dir = scratch("kineto-named-sqlite");
    let t = dir.join("trace.sqlite");
    copy_of_a_real_trace(&t);
    let o = run(&["analyze".as_ref(), t.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let junk = dir.join("junk.sqlite");
    std::fs::write(&junk, b"junk").unwrap();
    let o = run(&["analyze".as_ref(), junk.as_os_str(), "-q".as_ref()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not an SQLite database"), "{}", stderr(&o));
}

/// A copy of the shared export `name` at `to` that a test may change (the shared files are read-only).
fn writable_copy(name: &str, to: &Path) -> PathBuf {
    std::fs::copy(export(name), to).unwrap();
    let mut perms = std::fs::metadata(to).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(to, perms).unwrap();
    to.to_path_buf()
}

/// An export whose string table lost its rows: its kernels have no names, so its NCCL kernels
/// read as compute and communication vanished, with exit 0 and no word. Now said on every rank.
#[test]
fn kernels_whose_names_are_missing_are_said() {
    let dir = scratch("nsys-no-strings");
    let f = writable_copy(MFU, &dir.join("nostr.sqlite"));
    let c = Connection::open(&f).unwrap();
    c.execute("DELETE FROM StringIds", []).unwrap();
    drop(c);
    let out = dir.join("a.json");
    let o = run(&["analyze".as_ref(), f.as_os_str(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Each rank's own kernels, all of them: the export's 4010 are 1993 and 2017 on its two GPUs.
    let ranks = json(&out)["jobs"][0]["ranks"].as_array().unwrap().clone();
    for (r, n) in ranks.iter().zip([1993, 2017]) {
        let said = format!("{n} kernel(s) name a string the export's StringIds table does not hold");
        assert!(r["notes"].to_string().contains(&said), "{}", r["notes"]);
    }
}

/// Kernel rows of device -1 (a damaged or hand-made export) made two phantom ranks and
/// renumbered the real GPUs 2 and 3; a negative device id names no GPU and no rank.
#[test]
fn rows_of_no_gpu_make_no_rank() {
    let dir = scratch("nsys-negative-device");
    let f = writable_copy(MFU, &dir.join("neg.sqlite"));
    let c = Connection::open(&f).unwrap();
    let changed = c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = -1 WHERE rowid % 10 = 0", []).unwrap();
    assert!(changed > 100, "{changed}");
    drop(c);
    let out = dir.join("a.json");
    let o = run(&["analyze".as_ref(), f.as_os_str(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ranks = json(&out)["jobs"][0]["ranks"].as_array().unwrap().clone();
    assert_eq!(ranks.len(), 2, "the export has two GPUs");
    assert_eq!((ranks[0]["rank"].as_u64(), ranks[1]["rank"].as_u64()), (Some(0), Some(1)));
    // Left out, and said.
    let said = format!("{changed} GPU activity row(s) of a negative deviceId");
    assert!(ranks[0]["notes"].to_string().contains(&said), "{}", ranks[0]["notes"]);
    // And by a dataset ingested with --device (the export's file-wide warnings had come after the
    // trace as recorded was taken, and were lost).
    let (ds, out) = (dir.join("neg.tcds"), dir.join("d.json"));
    let o =
        run(&["ingest".as_ref(), f.as_os_str(), "--device".as_ref(), "h100-sxm".as_ref(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(json(&out)["jobs"][0]["ranks"][0]["notes"].to_string().contains(&said), "{}", json(&out)["jobs"][0]["ranks"][0]["notes"]);
}

#[test]
fn a_directory_of_exports_is_one_job_and_ingests_into_a_dataset() {
    let dir = scratch("nsys-job");
    let (direct, via) = (dir.join("direct.json"), dir.join("dataset.json"));
    let nsys = shared().join("nsys");
    let o = run(&["analyze".as_ref(), nsys.as_os_str(), "--json".as_ref(), direct.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&direct);
    let ranks = doc["jobs"][0]["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4, "two exports of two GPUs each");
    assert_eq!(doc["jobs"][0]["world_size"], 4);
    let ds = dir.join("job.tcds");
    let o = run(&["ingest".as_ref(), nsys.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["analyze".as_ref(), ds.as_os_str(), "--json".as_ref(), via.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let back = json(&via);
    for (a, b) in ranks.iter().zip(back["jobs"][0]["ranks"].as_array().unwrap()) {
        for k in ["rank", "file", "rank_source", "gpu_span_us", "busy_us", "comm_us", "exposed_comm_us", "memory_us"] {
            assert_eq!(a[k], b[k], "{k}");
        }
    }
}

#[test]
fn diff_report_and_replay_take_exports() {
    let dir = scratch("nsys-commands");
    let (a, b) = (export(H100), export(MFU));
    let o = run(&["diff".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("all_to_all"));
    let html = dir.join("report.html");
    let o = run(&["report".as_ref(), b.as_os_str(), "--out".as_ref(), html.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&html).unwrap().contains("ncclDevKernel_SendRecv"));
    for f in [&a, &b] {
        for r in replay_json(f, &[], &dir.join("replay.json"))["jobs"][0]["ranks"].as_array().unwrap() {
            let (m, p) = (r["measured_step_us"].as_f64().unwrap(), r["replayed_step_us"].as_f64().unwrap());
            assert!((p / m - 1.0).abs() < 0.01, "{}: identity replay {p} µs vs measured {m} µs", f.display());
            // The exports have no profiler steps: none listed, as `analyze` lists none (a step -1 had
            // stood for the whole window), which the rank's times are.
            assert_eq!(r["steps"].as_array().map(Vec::len), Some(0), "{r}");
        }
    }
    // An export that records no GPU projects nothing onto another, and says why (it had blamed
    // "no work model" and "not in the catalog"); with --device the kernels are priced.
    let o = run(&["replay".as_ref(), b.as_os_str(), "--target".as_ref(), "mi300x".as_ref()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("kept its measured time (the GPU it ran on is unknown: name it with --device ID)"), "{text}");
    assert!(text.contains("the trace records no GPU the catalog knows"), "{text}");
    let o = run(&["replay".as_ref(), b.as_os_str(), "--target".as_ref(), "mi300x".as_ref(), "--device".as_ref(), "h100-sxm".as_ref()]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("the GPU it ran on is unknown"), "{}", String::from_utf8_lossy(&o.stdout));
}

/// Each process of the training export calls `cudaStreamSynchronize` once a step (16 and
/// 17 calls). In one process the copy each call waits for ends 4–7 µs *after* the call
/// returned — GPU timestamps converted to the host clock — so only 3 of its calls were
/// taken as syncs and a 2× faster GPU sped that rank up 1.002×. Every call is a sync now,
/// the identity replay stays exact, and halving compute time shortens both ranks' steps.
#[test]
fn replay_waits_at_every_stream_sync_despite_the_clock_skew() {
    let dir = scratch("nsys-syncs");
    let f = export(MFU);
    let doc = replay_json(&f, &[], &dir.join("identity.json"));
    let identity = doc["jobs"][0]["ranks"].as_array().unwrap();
    // A sync that returned before its awaited copy ended (negative lag) is counted once on
    // the critical path: the shares add up to its length (they exceeded it by 11 µs).
    let cp = &doc["jobs"][0]["critical_path"];
    let parts: f64 =
        ["compute_us", "comm_us", "memory_us", "cpu_us", "launch_us", "unexplained_us"].iter().map(|k| cp[k].as_f64().unwrap()).sum();
    assert!((parts - cp["total_us"].as_f64().unwrap()).abs() < 0.5, "critical path parts {parts} µs, length {}", cp["total_us"]);
    let mut syncs: Vec<u64> = identity.iter().map(|r| r["graph"]["host_syncs"].as_u64().unwrap()).collect();
    syncs.sort();
    assert!(syncs[0] >= 16 && syncs[1] >= 17, "host syncs per rank {syncs:?}");
    for r in identity {
        let (m, p) = (r["measured_step_us"].as_f64().unwrap(), r["replayed_step_us"].as_f64().unwrap());
        assert!((p / m - 1.0).abs() < 0.001, "identity replay {p} µs vs measured {m} µs");
    }
    for r in replay_json(&f, &["--scale", "compute=2"], &dir.join("compute2.json"))["jobs"][0]["ranks"].as_array().unwrap() {
        let speedup = r["measured_step_us"].as_f64().unwrap() / r["replayed_step_us"].as_f64().unwrap();
        assert!(speedup > 1.1, "rank {}: compute 2× faster, step {speedup:.3}× faster", r["rank"]);
    }
}

#[test]
fn calibrate_says_why_an_export_without_shapes_cannot_be_fitted() {
    let dir = scratch("nsys-noshapes");
    let f = export(MFU);
    let out = dir.join("p.json");
    let o = run(&["calibrate".as_ref(), f.as_os_str(), "--out".as_ref(), out.as_os_str(), "--device".as_ref(), "h100-sxm".as_ref()]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("no shapes"), "{}", String::from_utf8_lossy(&o.stdout));
    // The export records no GPU name: the device is --device's, not read as if the trace named it.
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Device h100-sxm (1 trace file(s); --device names the GPU of those that record none)"), "{text}");
    assert!(!text.contains("H100 80GB HBM3"), "{text}");
    // Nothing else to fit either: no profile of defaults is written, and that is said.
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("h100-sxm: nothing could be fitted from its traces"), "{}", stderr(&o));
    assert!(!out.exists());
    let o = run(&["analyze".as_ref(), f.as_os_str()]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("--pytorch=autograd-shapes-nvtx"));
}

// ---- synthetic exports -------------------------------------------------

const GPID: i64 = (1 << 48) | (100 << 24);
const TID: i64 = GPID | 100;

/// A one-GPU export in the 3.25 layout (only the columns the reader needs,
/// plus a few): `gemms` `aten::mm` ops of shapes `[[m, k], [k, n]]`, each
/// launching one bf16 GEMM of the given duration (ns).
fn synthetic(path: &Path, version: &str, gemms: &[(i64, i64, i64, i64)]) {
    let _ = std::fs::remove_file(path);
    let db = Connection::open(path).unwrap();
    db.execute_batch(
        "CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
         CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, totalMemory INTEGER, smCount INTEGER,
                                       computeMajor INTEGER, computeMinor INTEGER);
         CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
             contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
             demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL);
         CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
             globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL);
         CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT, globalTid INTEGER,
             textId INTEGER, domainId INTEGER);
         INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (59, 'NvtxPushPopRange', 'NVTX Push/Pop Range');
         INSERT INTO TARGET_INFO_GPU VALUES (1, 0, 'NVIDIA H100 80GB HBM3', 85000000000, 132, 9, 0);
         INSERT INTO StringIds VALUES (1, 'nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN'), (2, 'cudaLaunchKernel_v7000');",
    )
    .unwrap();
    db.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', ?1)", [version]).unwrap();
    // Command lines are in the export too; they must never be read.
    db.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PARAM_INPUT_FILE', 'secret-run-name.nsys-rep')", []).unwrap();
    let mut gpu_free = 0i64;
    for (i, &(m, k, n, dur)) in gemms.iter().enumerate() {
        let i = i as i64;
        let t0 = 1_000_000 + i * 2_000_000;
        let text = format!("aten::mm, seq = {i}, op_id = {}, sizes = [[{m}, {k}], [{k}, {n}]], input_op_ids = [(1,0), (2,0)]", 1000 + i);
        db.execute("INSERT INTO NVTX_EVENTS VALUES (?1, ?2, 59, ?3, ?4, NULL, 0)", rusqlite::params![t0, t0 + 30_000, text, TID]).unwrap();
        db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?1, ?2, 1, ?3, ?4, 2, 0)",
            rusqlite::params![t0 + 5_000, t0 + 10_000, TID, i + 1],
        )
        .unwrap();
        let start = (t0 + 15_000).max(gpu_free + 1_000);
        gpu_free = start + dur;
        db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?1, ?2, 0, 1, 7, ?3, ?4, 1, 1)",
            rusqlite::params![start, start + dur, i + 1, GPID],
        )
        .unwrap();
    }
}

#[test]
fn calibrate_fits_gemms_from_nvtx_shaped_ops() {
    // Truth: t = 5 µs + 2mkn / (0.62 · 989.4 TFLOP/s), the H100's dense bf16 peak.
    let (eta, t0_ns, peak) = (0.62, 5_000.0, 989.4e12);
    let gemms: Vec<(i64, i64, i64, i64)> = (0..48)
        .map(|i| {
            let (m, k, n) = (1024 * (1 + i % 16), 4096, 2048 * (1 + i % 3));
            let flops = 2.0 * (m * k * n) as f64;
            (m, k, n, (t0_ns + flops / (eta * peak) * 1e9).round() as i64)
        })
        .collect();
    let dir = scratch("nsys-calibrate");
    let f = dir.join("shaped.sqlite");
    synthetic(&f, "3.25.0", &gemms);
    let out = dir.join("p.json");
    let o = run(&["calibrate".as_ref(), f.as_os_str(), "--out".as_ref(), out.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let p = json(&out);
    let fits = p["kernels"].as_array().unwrap();
    let gemm = fits.iter().find(|k| k["class"] == "gemm" && k["dtype"] == "bf16").unwrap_or_else(|| panic!("no bf16 GEMM fit: {p:#}"));
    let got = gemm["efficiency"].as_f64().unwrap();
    assert!((got / eta - 1.0).abs() < 0.02, "η {got} (truth {eta})");
    assert!((gemm["overhead_us"].as_f64().unwrap() - 5.0).abs() < 0.5, "{gemm}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("secret-run-name"));
}

// ---- bad exports ---------------------------------------------------------

fn assert_clean_failure(o: &std::process::Output, path: &Path, what: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{what}: exit code; stderr: {err}");
    assert!(err.contains(&path.display().to_string()), "{what}: the message names the file: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(&path.display().to_string())).collect();
    assert_eq!(lines.len(), 1, "{what}: one line: {err}");
}

fn analyze_fails(path: &Path, what: &str) -> String {
    let o = run(&["analyze".as_ref(), path.as_os_str(), "-q".as_ref()]);
    assert_clean_failure(&o, path, what);
    stderr(&o)
}

#[test]
fn an_unreadable_export_keeps_the_numbers_of_the_ranks_after_it() {
    // Two real exports of two GPUs each, and a damaged one between them by name: the job's
    // world counts the damaged export as one rank, and the ranks after it keep the numbers
    // that count gives, whether the job is summarized rank by rank or read whole.
    let dir = scratch("nsys-gap");
    let job = dir.join("job");
    std::fs::create_dir_all(&job).unwrap();
    std::os::unix::fs::symlink(export(H100), job.join("a.sqlite")).unwrap();
    // An export cut short: SQLite's header, then half of it.
    let bytes = std::fs::read(export(MFU)).unwrap();
    std::fs::write(job.join("b.sqlite"), &bytes[..bytes.len() / 2]).unwrap();
    std::os::unix::fs::symlink(export(MFU), job.join("c.sqlite")).unwrap();
    let (analysed, replayed, perfetto) = (dir.join("analyze.json"), dir.join("replay.json"), dir.join("timeline.json"));
    // The numbers of each file's ranks, as `analyze` gives them and as the replay reads the
    // job whole (writing a Perfetto timeline it reads every event); one bad file: exit 2.
    let numbers_by = |command: &str, file: &str| -> Vec<u64> {
        let out = if command == "analyze" { &analysed } else { &replayed };
        let mut args: Vec<&std::ffi::OsStr> = vec![command.as_ref(), job.as_os_str(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()];
        if command == "replay" {
            args.extend(["--perfetto".as_ref(), perfetto.as_os_str()]);
        }
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{command}: {}", stderr(&o));
        let doc = json(out);
        let ranks = doc["jobs"][0]["ranks"].as_array().unwrap().clone();
        ranks.iter().filter(|r| r["file"].as_str().unwrap().contains(file)).map(|r| r["rank"].as_u64().unwrap()).collect()
    };
    for command in ["analyze", "replay"] {
        assert_eq!((numbers_by(command, "a.sqlite"), numbers_by(command, "c.sqlite")), (vec![0, 1], vec![3, 4]), "{command}");
    }
    assert_eq!(json(&analysed)["jobs"][0]["world_size"], 5, "the damaged export counts one rank");
    // An export whose ranks can be listed (its kernel tables read) but whose events cannot:
    // it counts its two ranks in both ways of reading.
    std::fs::copy(export(H100), job.join("b.sqlite")).unwrap();
    Connection::open(job.join("b.sqlite")).unwrap().execute_batch("ALTER TABLE NVTX_EVENTS RENAME COLUMN start TO begin;").unwrap();
    for command in ["analyze", "replay"] {
        assert_eq!(numbers_by(command, "c.sqlite"), vec![4, 5], "{command}");
    }
    assert_eq!(json(&analysed)["jobs"][0]["world_size"], 6);
}

#[test]
fn truncated_and_foreign_files_are_clean_errors() {
    let dir = scratch("nsys-bad");
    let bytes = std::fs::read(export(MFU)).unwrap();
    let cut = dir.join("truncated.sqlite");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let err = analyze_fails(&cut, "truncated");
    assert!(err.contains("damaged or truncated"), "{err}");
    let garbage = dir.join("garbage.sqlite");
    let mut g = b"SQLite format 3\0".to_vec();
    g.extend((0..8192u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    std::fs::write(&garbage, &g).unwrap();
    analyze_fails(&garbage, "garbage after the magic");
    let text = dir.join("notes.sqlite");
    std::fs::write(&text, "not a database at all").unwrap();
    let err = analyze_fails(&text, "not SQLite");
    assert!(err.contains("not an SQLite database"), "{err}");
    let report = dir.join("run.nsys-rep");
    std::fs::write(&report, b"binary report").unwrap();
    let err = analyze_fails(&report, "an nsys report");
    assert!(err.contains("nsys export --type sqlite"), "{err}");
    let empty = dir.join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    analyze_fails(&empty, "empty file");
}

#[test]
fn empty_databases_missing_tables_and_other_schemas_are_named() {
    let dir = scratch("nsys-schema");
    let empty = dir.join("empty-db.sqlite");
    Connection::open(&empty).unwrap().execute_batch("CREATE TABLE t (x); DROP TABLE t;").unwrap();
    let err = analyze_fails(&empty, "empty database");
    assert!(err.contains("not an Nsight Systems export"), "{err}");
    let old = dir.join("old.sqlite");
    synthetic(&old, "2.9.1", &[(64, 64, 64, 10_000)]);
    let err = analyze_fails(&old, "other schema");
    assert!(err.contains("export schema 2.9.1"), "{err}");
    let no_cuda = dir.join("no-cuda.sqlite");
    synthetic(&no_cuda, "3.25.0", &[]);
    Connection::open(&no_cuda).unwrap().execute_batch("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;").unwrap();
    let err = analyze_fails(&no_cuda, "no CUDA tables");
    assert!(err.contains("no CUDA activity") && err.contains("3.25.0"), "{err}");
    // Kernels launched (the runtime's calls) but no kernel table beside a memset one: a stripped
    // export had read as a GPU busy with memory copies alone, exit 0.
    let stripped = dir.join("stripped.sqlite");
    synthetic(&stripped, "3.25.0", &[(64, 64, 64, 10_000), (64, 64, 64, 10_000)]);
    Connection::open(&stripped)
        .unwrap()
        .execute_batch("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER, end INTEGER); DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;")
        .unwrap();
    let err = analyze_fails(&stripped, "kernel table dropped");
    assert!(err.contains("2 kernel or graph launch calls") && err.contains("no CUPTI_ACTIVITY_KIND_KERNEL table"), "{err}");
    // The kernel table kept but emptied: the same loss (it had been analysed as a job 99 % idle).
    let emptied = dir.join("emptied.sqlite");
    synthetic(&emptied, "3.25.0", &[(64, 64, 64, 10_000), (64, 64, 64, 10_000)]);
    Connection::open(&emptied)
        .unwrap()
        .execute_batch("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER, end INTEGER); DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL;")
        .unwrap();
    let err = analyze_fails(&emptied, "kernel table emptied");
    assert!(err.contains("2 kernel or graph launch calls") && err.contains("an empty CUPTI_ACTIVITY_KIND_KERNEL table"), "{err}");
    let no_gpu = dir.join("no-gpu.sqlite");
    synthetic(&no_gpu, "3.25.0", &[]);
    let err = analyze_fails(&no_gpu, "no kernels");
    assert!(err.contains("no GPU activity"), "{err}");
    let no_column = dir.join("no-column.sqlite");
    synthetic(&no_column, "3.40.0", &[(64, 64, 64, 10_000)]);
    Connection::open(&no_column).unwrap().execute_batch("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN streamId;").unwrap();
    let err = analyze_fails(&no_column, "missing column");
    assert!(err.contains("streamId") && err.contains("export schema 3.40.0"), "{err}");
    assert!(!err.contains("secret-run-name"), "{err}");
}

#[test]
fn a_locked_export_is_a_clean_error() {
    let dir = scratch("nsys-locked");
    let f = dir.join("locked.sqlite");
    synthetic(&f, "3.25.0", &[(64, 64, 64, 10_000)]);
    let writer = Connection::open(&f).unwrap();
    writer.execute_batch("BEGIN EXCLUSIVE; INSERT INTO StringIds VALUES (99, 'x');").unwrap();
    let err = analyze_fails(&f, "locked");
    assert!(err.contains("locked"), "{err}");
    writer.execute_batch("ROLLBACK;").unwrap();
    let o = run(&["analyze".as_ref(), f.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "once the writer is done: {}", stderr(&o));
}

// ---- `nsys export --type parquetdir` ---------------------------------------

#[path = "../ingest/tests/support/parquetdir.rs"]
mod parquetdir;
use parquetdir::to_parquetdir;

#[test]
fn analyze_reads_a_parquetdir_export_as_its_sqlite_export() {
    let dir = scratch("nsys-parquetdir");
    let pq = dir.join("mfu_pq");
    to_parquetdir(&export(MFU), &pq);
    let (a, b) = (dir.join("sqlite.json"), dir.join("parquetdir.json"));
    let f = export(MFU);
    let o = run(&["analyze".as_ref(), f.as_os_str(), "-q".as_ref(), "--json".as_ref(), a.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["analyze".as_ref(), pq.as_os_str(), "-q".as_ref(), "--json".as_ref(), b.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (a, b) = (json(&a), json(&b));
    let (ra, rb) = (a["jobs"][0]["ranks"].as_array().unwrap(), b["jobs"][0]["ranks"].as_array().unwrap());
    assert_eq!(rb.len(), 2, "one export of two GPUs, not a directory of traces");
    for (x, y) in ra.iter().zip(rb) {
        assert_eq!(y["rank_source"], "export");
        for k in ["rank", "gpu_span_us", "busy_us", "compute_us", "comm_us", "exposed_comm_us", "memory_us"] {
            assert_eq!(x[k], y[k], "{k}");
        }
    }
    // A corrupt table file: exit 2, one line naming the directory and the file.
    std::fs::write(pq.join("CUPTI_ACTIVITY_KIND_KERNEL.parquet"), b"PAR1 damaged").unwrap();
    let err = analyze_fails(&pq, "a corrupt Parquet file");
    assert!(err.contains("CUPTI_ACTIVITY_KIND_KERNEL.parquet"), "{err}");
}

/// `--world-size` grows the groups that span the job; a point-to-point transfer stays
/// between its two ranks. The 2-GPU export's transfers had all been read as send/recv pairs
/// and all "resized" to 256 ranks (0.878×); 64 of its 66 are all-to-alls of the job's world
/// (PyTorch's ranges name them) and grow, the two sends and receives of their own do not.
#[test]
fn world_size_leaves_point_to_point_transfers_alone() {
    let dir = scratch("nsys-world-size");
    let f = export(MFU);
    let b = replay_json(&f, &["--world-size", "256"], &dir.join("grown.json"));
    let notes = b["jobs"][0]["notes"].as_array().unwrap();
    assert!(notes.iter().any(|n| n.as_str().unwrap().contains("64 resized collective(s)")), "{notes:?}");
}

/// One export and its dataset analyse the same, whole documents but the job's path: the
/// export's ranks had been analysed in a world of one (its one file), so its two-GPU
/// collectives were "other" read from the export and "dp" from the dataset; and `--device`
/// was ignored on the dataset, whose note still asked for it.
#[test]
fn an_export_and_its_dataset_analyse_the_same_with_and_without_device() {
    let dir = scratch("nsys-dataset-device");
    let file = export("mfu_2gpu_before.sqlite");
    let ds = dir.join("mfu.tcds");
    let o = run(&["ingest".as_ref(), file.as_os_str(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for device in [None, Some("h100-sxm")] {
        let analyze = |input: &Path, out: &Path| {
            let mut args: Vec<&std::ffi::OsStr> =
                vec!["analyze".as_ref(), input.as_os_str(), "-q".as_ref(), "--json".as_ref(), out.as_os_str()];
            if let Some(d) = device {
                args.extend([std::ffi::OsStr::new("--device"), std::ffi::OsStr::new(d)]);
            }
            let o = run(&args);
            assert!(o.status.success(), "{}", stderr(&o));
            let mut doc = json(out);
            doc["jobs"][0]["path"] = serde_json::Value::Null;
            doc
        };
        let (direct, via) = (analyze(&file, &dir.join("direct.json")), analyze(&ds, &dir.join("via.json")));
        assert_eq!(direct, via, "--device {device:?}");
        let ranks = direct["jobs"][0]["ranks"].as_array().unwrap();
        // Its communication is send/receive over both GPUs of the two-rank world: the whole world,
        // which says DP, but data parallelism never sends point to point (it had been "dp").
        let dims: Vec<(&str, &str)> = ranks
            .iter()
            .flat_map(|r| r["comm_by_dimension"].as_array().unwrap())
            .map(|d| (d["dimension"].as_str().unwrap(), d["from"].as_str().unwrap()))
            .collect();
        assert!(!dims.is_empty() && dims.iter().all(|d| *d == ("other", "collective")), "send/recv over a two-rank world: {dims:?}");
        let named = ranks.iter().all(|r| r["device"].as_str() == Some("H100 80GB HBM3"));
        assert_eq!(named, device.is_some(), "{ranks:?}");
        let asks = direct.to_string().contains("does not record the GPU model");
        assert_eq!(asks, device.is_none(), "the note asks for --device only where it is not given");
    }
}

/// What `analyze` notes of a rank is on the report page too, each note once with its
/// ranks: the page had left out that the export names no GPU model.
#[test]
fn the_report_page_carries_the_analysis_notes() {
    let dir = scratch("nsys-report-notes");
    let page = dir.join("r.html");
    let o = run(&["report".as_ref(), export("mfu_2gpu_before.sqlite").as_os_str(), "-q".as_ref(), "--out".as_ref(), page.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("the export does not record the GPU model").count(), 1, "once, for both ranks");
    assert!(html.contains("<li>ranks 0–1: the export does not record the GPU model"));
}

/// The two shared exports are captures 42 hours apart: given as one job, `replay` says they look
/// like unrelated runs, as `analyze` does (it had printed a 42-hour critical path without a word).
#[test]
fn replay_of_two_captures_as_one_job_says_they_look_unrelated() {
    let (a, b) = (export(H100), export(MFU));
    for cmd in ["analyze", "replay"] {
        let o = run(&[cmd.as_ref(), a.as_os_str(), b.as_os_str()]);
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
        assert!(text.contains("ranks of unrelated runs? their GPU windows start 42.3 h apart"), "{cmd}: {text}");
    }
    let o = run(&["replay".as_ref(), a.as_os_str()]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("unrelated runs"));
}

/// An export that records no GPU model, ingested with `--device`: the dataset keeps it as
/// recorded, so its ranks read back as the export does, with or without `--device` (the GPU
/// named at ingest had stayed, and the export's warning had gone).
#[test]
fn an_export_ingested_with_device_reads_back_as_the_export() {
    let dir = scratch("nsys-device");
    let file = export(MFU);
    let ds = dir.join("ds");
    let o =
        run(&["ingest".as_ref(), file.as_os_str(), "--device".as_ref(), "b200".as_ref(), "--out".as_ref(), ds.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (name, extra) in [("none", &[][..]), ("h100", &["--device", "h100-sxm"][..])] {
        let analysed = |input: &Path, out: &str| {
            let out = dir.join(out);
            let mut args: Vec<&std::ffi::OsStr> =
                vec!["analyze".as_ref(), input.as_os_str(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()];
            args.extend(extra.iter().map(std::ffi::OsStr::new));
            let o = run(&args);
            assert!(o.status.success(), "{}", stderr(&o));
            json(&out)["jobs"][0]["ranks"].clone()
        };
        let (direct, back) = (analysed(&file, &format!("e-{name}.json")), analysed(&ds, &format!("d-{name}.json")));
        for (a, b) in direct.as_array().unwrap().iter().zip(back.as_array().unwrap()) {
            for k in ["rank", "device", "notes", "busy_us"] {
                assert_eq!(a[k], b[k], "{k} with {extra:?}");
            }
        }
    }
}

/// The export's sequence-parallel all-to-all runs as NCCL sends and receives in one group
/// (`ncclGroupStart`, `ncclSend`, `ncclRecv`, …, `ncclGroupEnd`) inside PyTorch's
/// `nccl:all_to_all` and `c10d::alltoall_base_` ranges: an all-to-all, as the Kineto reader
/// names such kernels from the op that launched them (it had been 66 `send_recv`). 64 of its
/// 66 groups lie inside those ranges (counted in the export's NVTX_EVENTS); the other two are
/// sends and receives of their own.
#[test]
fn an_all_to_all_of_sends_and_receives_is_named_by_pytorchs_range() {
    let out = scratch("nsys-all-to-all").join("a.json");
    let o = run(&["analyze".as_ref(), export(MFU).as_os_str(), "-q".as_ref(), "--json".as_ref(), out.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc = json(&out);
    let count = |name: &str| -> u64 {
        doc["jobs"][0]["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["collectives"].as_array().unwrap())
            .filter(|c| c["collective"] == name)
            .map(|c| c["count"].as_u64().unwrap())
            .sum()
    };
    assert_eq!((count("all_to_all"), count("send_recv")), (64, 2));
}

/// A copy of the MFU export at `dir/name` changed by `sql`: the copy and the rows it changed.
fn mutated_export(dir: &Path, name: &str, sql: &str) -> (PathBuf, usize) {
    let f = writable_copy(MFU, &dir.join(name));
    let changed = Connection::open(&f).unwrap().execute(sql, []).unwrap();
    (f, changed)
}

/// The notes of `analyze --json` of `export` (which must succeed), its ranks' JSON as text.
fn rank_notes(export: &Path, dir: &Path) -> String {
    let out = dir.join("a.json");
    let o = run(&["analyze".as_ref(), export.as_os_str(), "--json".as_ref(), out.as_os_str(), "-q".as_ref()]);
    assert!(o.status.success(), "{}", stderr(&o));
    json(&out)["jobs"][0]["ranks"].to_string()
}

/// An activity before the capture's session began (a negative timestamp, a damaged row)
/// stretched a rank's span from 300 ms to 60 s without a word; it is said.
#[test]
fn an_activity_before_the_session_is_said() {
    let dir = scratch("nsys-before-session");
    let sql = "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -1000000, \"end\" = -500000 WHERE rowid = 1";
    let (f, changed) = mutated_export(&dir, "early.sqlite", sql);
    assert_eq!(changed, 1);
    let notes = rank_notes(&f, &dir);
    assert!(notes.contains("1 event(s) start before the capture's session began (a negative timestamp)"), "{notes}");
}

/// An export with memory copies but no kernel left (its kernel table emptied, its runtime table
/// gone, so no launch shows the loss) had read as a job 99 % idle, said nowhere.
#[test]
fn an_export_without_kernels_is_said_to_read_as_idle() {
    let dir = scratch("nsys-no-kernels");
    let f = writable_copy(MFU, &dir.join("nokernels.sqlite"));
    Connection::open(&f).unwrap().execute_batch("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL; DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME;").unwrap();
    let notes = rank_notes(&f, &dir);
    assert!(notes.contains("no kernel ran on this rank's GPU in the export, only memory copies and sets"), "{notes}");
    // The export as recorded says nothing of the kind.
    assert!(!rank_notes(&export(MFU), &dir).contains("no kernel ran"));
}

/// Kernels without a correlationId (NULL: a damaged export) were tied to no launch in silence.
#[test]
fn kernels_without_a_correlation_id_are_said() {
    let dir = scratch("nsys-no-correlation");
    let sql = "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = NULL WHERE rowid <= 3";
    let (f, changed) = mutated_export(&dir, "uncorrelated.sqlite", sql);
    assert_eq!(changed, 3);
    let said = |export: &Path| rank_notes(export, &dir).contains("GPU activity row(s) have no correlationId");
    assert!(!said(&export(MFU)));
    // Rows 1 and 3 are of GPU 1, row 2 of GPU 0: each rank says its own.
    let notes = rank_notes(&f, &dir);
    assert!(
        notes.contains("1 GPU activity row(s) have no correlationId") && notes.contains("2 GPU activity row(s) have no correlationId"),
        "{notes}"
    );
}

/// A kernel row given twice (a damaged or merged export) was counted twice in per-kernel and
/// per-class times without a word; it is said (the corpus' exports have no such row).
#[test]
fn a_kernel_row_recorded_twice_is_said() {
    let dir = scratch("nsys-duplicate-row");
    let sql = "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = 1";
    let (f, added) = mutated_export(&dir, "twice.sqlite", sql);
    assert_eq!(added, 1);
    let said = |export: &Path| rank_notes(export, &dir).contains("1 GPU activity repeats another row");
    assert!(!said(&export(MFU)));
    assert!(said(&f));
}

/// A copy of a negative byte count (a damaged export) was kept without bytes in silence.
#[test]
fn a_copy_of_negative_bytes_is_said() {
    let dir = scratch("nsys-negative-bytes");
    let (f, changed) = mutated_export(&dir, "neg.sqlite", "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = -4096 WHERE rowid <= 3");
    assert_eq!(changed, 3);
    let notes = rank_notes(&f, &dir);
    assert!(notes.contains("3 memcpy/memset row(s) record a negative byte count"), "{notes}");
}

/// Kernels whose start lost its sign (a damaged export) put a rank's tasks on a dependency cycle:
/// the replay printed a replayed time of −7 443 589 s for it, exit 0. No replayed time is
/// negative, and the note names the rank.
#[test]
fn a_rank_on_a_dependency_cycle_replays_no_negative_time() {
    let dir = scratch("nsys-cycle");
    let sql = "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -start, \"end\" = -start + 1000 WHERE rowid % 50 = 0 AND deviceId = 0";
    let (f, changed) = mutated_export(&dir, "cycle.sqlite", sql);
    assert!(changed > 10, "{changed}");
    let doc = replay_json(&f, &[], &dir.join("r.json"));
    let job = &doc["jobs"][0];
    for r in job["ranks"].as_array().unwrap() {
        assert!(r["replayed_step_us"].as_f64().unwrap() >= 0.0, "{r}");
    }
    assert!(job["critical_path"]["total_us"].as_f64().unwrap() >= 0.0);
    let notes = job["notes"].to_string();
    assert!(notes.contains("sit on a dependency cycle, or wait on one, and were not replayed (rank 0: "), "{notes}");
}

/// An export whose every GPU activity row has a time beyond 64-bit nanoseconds (SQLite stores it
/// as a REAL) was said to have no GPU activity at all; the error says its rows are unusable.
#[test]
fn an_export_of_unusable_times_says_so() {
    let dir = scratch("nsys-unusable-times");
    let f = writable_copy(MFU, &dir.join("huge.sqlite"));
    let c = Connection::open(&f).unwrap();
    for table in ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"] {
        c.execute(&format!("UPDATE {table} SET start = start + 1e19, \"end\" = \"end\" + 1e19"), []).unwrap();
    }
    drop(c);
    let o = run(&["analyze".as_ref(), f.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("huge.sqlite") && err.contains("5299 GPU activity row(s) have no usable start, end or device"), "{err}");
}

/// A job of exports one of which is damaged counts it as one rank (how many GPUs it held is not
/// known); the line of ranks not read says so rather than read as an exact world.
#[test]
fn an_unreadable_export_is_said_to_count_as_one_rank() {
    let dir = scratch("nsys-unread-export");
    let job = dir.join("job");
    std::fs::create_dir_all(&job).unwrap();
    writable_copy(MFU, &job.join("a.sqlite"));
    let whole = std::fs::read(export(H100)).unwrap();
    std::fs::write(job.join("b.sqlite"), &whole[..100_000]).unwrap();
    let o = run(&["analyze".as_ref(), job.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("not read: rank 2 of the world's 3 (the totals are of the ranks read; the unreadable Nsight Systems export is counted as one rank, and may have held more)"),
        "{text}"
    );
}
