//! Nsight Systems exports (issue #26): the breakdown of each GPU of the two
//! shared exports against an independent computation in SQL over the
//! export's own tables, run here with SQLite.
//!
//! The reference shares no code with the reader: it selects each (process,
//! GPU)'s kernels, memcpys and memsets straight from the `CUPTI_ACTIVITY_KIND_*`
//! tables, classifies kernels by name with `GLOB 'nccl*Kernel*'`, and measures
//! unions of intervals with window functions (gaps and islands), DESIGN §3's
//! definitions: busy = |∪ activity|, comm = |∪ NCCL kernels|, overlap =
//! |∪ comm ∩ ∪ compute| = comm + compute − |∪ (comm ∪ compute)|, exposed = comm − overlap.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use tracecast_ingest::analysis::{AnalyzeOptions, CommKernels, WindowMode, analyze_job};
use tracecast_ingest::event::EventKind;
use tracecast_ingest::{Job, ReadOptions};

fn export(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces/nsys").join(name);
    assert!(p.exists(), "../shared/traces/nsys is missing: {}", p.display());
    p
}

const EXPORTS: [&str; 2] = ["h100_2gpu_1s.sqlite", "mfu_2gpu_before.sqlite"];

/// One GPU's GPU activity as a table expression: (start, end, class).
fn activity(pid: i64, device: i64) -> String {
    format!(
        "SELECT k.start AS s, k.\"end\" AS e, CASE WHEN n.value GLOB 'nccl*Kernel*' THEN 'comm' ELSE 'compute' END AS class
           FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds n ON n.id = k.demangledName
          WHERE k.globalPid = {pid} AND k.deviceId = {device}
         UNION ALL SELECT start, \"end\", 'memory' FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE globalPid = {pid} AND deviceId = {device}
         UNION ALL SELECT start, \"end\", 'memory' FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE globalPid = {pid} AND deviceId = {device}"
    )
}

/// |∪ intervals| of the classes in `classes` (ns): islands of intervals
/// that overlap or touch what came before them in start order.
fn union_ns(db: &Connection, pid: i64, device: i64, classes: &str) -> i64 {
    let sql = format!(
        "WITH a AS ({}),
              sel AS (SELECT s, e FROM a WHERE class IN ({classes})),
              o AS (SELECT s, e, MAX(e) OVER (ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach FROM sel),
              g AS (SELECT s, e, SUM(CASE WHEN reach IS NULL OR s > reach THEN 1 ELSE 0 END)
                                 OVER (ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island FROM o)
         SELECT COALESCE(SUM(hi - lo), 0) FROM (SELECT MIN(s) AS lo, MAX(e) AS hi FROM g GROUP BY island)",
        activity(pid, device)
    );
    db.query_row(&sql, [], |r| r.get(0)).unwrap()
}

#[derive(Debug)]
struct Reference {
    device: i64,
    pid: i64,
    span: i64,
    busy: i64,
    compute: i64,
    comm: i64,
    memory: i64,
    overlap: i64,
    exposed: i64,
    kernels: i64,
    launched: i64,
    calls: i64,
}

fn reference(path: &Path) -> Vec<Reference> {
    let db = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = db
        .prepare(
            "SELECT deviceId, globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL UNION SELECT deviceId, globalPid FROM CUPTI_ACTIVITY_KIND_MEMCPY
             UNION SELECT deviceId, globalPid FROM CUPTI_ACTIVITY_KIND_MEMSET ORDER BY 1, 2",
        )
        .unwrap();
    let gpus: Vec<(i64, i64)> = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
    gpus.into_iter()
        .map(|(device, pid)| {
            let (lo, hi): (i64, i64) = db
                .query_row(&format!("SELECT MIN(s), MAX(e) FROM ({})", activity(pid, device)), [], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap();
            let u = |c: &str| union_ns(&db, pid, device, c);
            let (compute, comm) = (u("'compute'"), u("'comm'"));
            let overlap = compute + comm - u("'compute', 'comm'");
            let count = |sql: String| -> i64 { db.query_row(&sql, [], |r| r.get(0)).unwrap() };
            Reference {
                device,
                pid,
                span: hi - lo,
                busy: u("'compute', 'comm', 'memory'"),
                compute,
                comm,
                memory: u("'memory'"),
                overlap,
                exposed: comm - overlap,
                kernels: count(format!("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE globalPid = {pid} AND deviceId = {device}")),
                // Kernels whose launching call (same correlation, same process) is in the export.
                launched: count(format!(
                    "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE k.globalPid = {pid} AND k.deviceId = {device}
                       AND EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                                    WHERE r.correlationId = k.correlationId AND (r.globalTid >> 24) = ({pid} >> 24))"
                )),
                calls: count(format!("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE (globalTid >> 24) = ({pid} >> 24)")),
            }
        })
        .collect()
}

fn close(what: &str, file: &str, rank: u32, got_us: f64, want_ns: i64) {
    let want = want_ns as f64 / 1000.0;
    // Exact in integer ns; the bar is 0.1 %.
    assert!((got_us - want).abs() <= 1e-6 * want.abs().max(1.0), "{file} rank {rank}: {what}: tracecast {got_us} µs, SQL {want} µs");
}

#[test]
fn each_gpu_of_the_shared_exports_matches_sql_over_its_tables() {
    for name in EXPORTS {
        let path = export(name);
        let want = reference(&path);
        assert_eq!(want.len(), 2, "{name}: two GPUs");
        let job = Job::read(path.clone(), std::slice::from_ref(&path), &ReadOptions::default(), &|_| {});
        assert!(job.failures.is_empty(), "{:?}", job.failures);
        assert_eq!(job.ranks.len(), want.len(), "{name}: one rank per (process, GPU)");
        for mode in [CommKernels::Nccl, CommKernels::Families] {
            let mut opts = AnalyzeOptions::default();
            opts.window = WindowMode::All;
            opts.classifier = tracecast_ingest::analysis::Classifier::new(mode, &[]).unwrap();
            let analysis = analyze_job(&job, &opts);
            for (r, w) in analysis.ranks.iter().zip(&want) {
                let b = &r.breakdown;
                println!(
                    "{name} rank {} (GPU {}, pid {}): span {:.3} busy {:.3} compute {:.3} comm {:.3} exposed {:.3} memory {:.3} µs (SQL: {} {} {} {} {} {} ns)",
                    r.rank,
                    w.device,
                    w.pid >> 24 & 0xFF_FFFF,
                    b.gpu_span_us,
                    b.busy_us,
                    b.compute_us,
                    b.comm_us,
                    b.exposed_comm_us,
                    b.memory_us,
                    w.span,
                    w.busy,
                    w.compute,
                    w.comm,
                    w.exposed,
                    w.memory
                );
                close("gpu_span_us", name, r.rank, b.gpu_span_us, w.span);
                close("busy_us", name, r.rank, b.busy_us, w.busy);
                close("idle_us", name, r.rank, b.idle_us, w.span - w.busy);
                close("compute_us", name, r.rank, b.compute_us, w.compute);
                close("comm_us", name, r.rank, b.comm_us, w.comm);
                close("memory_us", name, r.rank, b.memory_us, w.memory);
                close("overlap_us", name, r.rank, b.overlap_us, w.overlap);
                close("exposed_comm_us", name, r.rank, b.exposed_comm_us, w.exposed);
            }
        }
        for (rank, w) in job.ranks.iter().zip(&want) {
            let t = &rank.trace;
            let count = |k: EventKind| t.events.kind.iter().filter(|&&x| x == k).count() as i64;
            assert_eq!(count(EventKind::Kernel), w.kernels, "{name} rank {}", rank.rank);
            assert_eq!(count(EventKind::Runtime), w.calls, "{name} rank {}: every call of its process", rank.rank);
            // Each kernel is tied to the call that launched it.
            let links = tracecast_ingest::link::Links::new(t);
            let tied = t.gpu_activity().filter(|&i| t.events.kind[i] == EventKind::Kernel && links.launch[i] != u32::MAX).count() as i64;
            assert_eq!(tied, w.launched, "{name} rank {}", rank.rank);
            assert!(t.events.pid.iter().zip(&t.events.kind).filter(|(_, k)| k.is_gpu_activity()).all(|(p, _)| *p == w.device));
        }
    }
}

#[test]
fn emit_nvtx_ranges_are_the_ops_that_launch_kernels() {
    let path = export("mfu_2gpu_before.sqlite");
    let job = Job::read(path.clone(), std::slice::from_ref(&path), &ReadOptions::default(), &|_| {});
    let t = &job.ranks[0].trace;
    let links = tracecast_ingest::link::Links::new(t);
    // Every GEMM kernel launched in the export's window is launched inside an
    // `aten::addmm` / `aten::mm` / … range (the window cut the calls of a few).
    let mut gemms = 0;
    for i in t.gpu_activity() {
        if !t.name(i).starts_with("nvjet") || links.launch[i] == u32::MAX {
            continue;
        }
        gemms += 1;
        let op = links.launch_op[i];
        assert_ne!(op, u32::MAX, "{} has no op", t.name(i));
        let names: Vec<&str> = links.ancestors(op, 3).map(|r| t.name(r)).collect();
        assert!(
            names.iter().any(|n| matches!(*n, "aten::addmm" | "aten::mm" | "aten::bmm" | "aten::matmul" | "aten::linear")),
            "{names:?}"
        );
        assert_eq!(t.events.kind[op as usize], EventKind::CpuOp);
    }
    assert!(gemms > 100, "{gemms} GEMM kernels");
    // The NCCL kernels are communication, named by their group of NVTX ranges (ncclSend + ncclRecv)
    // and, around the group, PyTorch's `nccl:all_to_all` range: an all-to-all runs as sends and
    // receives. One group of the rank's 33 lies outside any such range: sends and receives.
    let comm: Vec<usize> = t.gpu_activity().filter(|&i| t.name(i).starts_with("ncclDevKernel_SendRecv")).collect();
    assert_eq!(comm.len(), 33);
    let launched: Vec<usize> = comm.iter().copied().filter(|&i| links.launch[i] != u32::MAX).collect();
    assert!(launched.len() >= 30, "{} of 33 NCCL kernels launched in the window", launched.len());
    let named: Vec<String> = launched
        .iter()
        .map(|&i| t.collective_args_of(i).expect("the NCCL group names the collective").collective_name.clone().unwrap_or_default())
        .collect();
    assert!(named.iter().all(|n| n == "all_to_all" || n == "send_recv"), "{named:?}");
    assert!(named.iter().filter(|n| *n == "all_to_all").count() + 1 >= launched.len(), "{named:?}");
    // No shapes in these exports (recorded without autograd-shapes-nvtx), and no free-form metadata.
    assert!(t.op_shapes.is_empty());
    assert!(t.names.iter().all(|n| !n.contains("REDACTED") && !n.contains("torchrun") && !n.contains("FastVideo")));
    assert!(t.warnings.iter().any(|w| w.contains("does not record the GPU model")), "{:?}", t.warnings);
}

#[test]
fn exports_of_one_job_number_their_ranks_in_file_order() {
    let paths: Vec<PathBuf> = EXPORTS.iter().map(|n| export(n)).collect();
    let job = Job::read(paths[0].clone(), &paths, &ReadOptions::default(), &|_| {});
    assert!(job.failures.is_empty(), "{:?}", job.failures);
    let ranks: Vec<(u32, String)> =
        job.ranks.iter().map(|r| (r.rank, r.trace.path.file_name().unwrap().to_string_lossy().into_owned())).collect();
    assert_eq!(ranks, [(0, EXPORTS[0].to_string()), (1, EXPORTS[0].to_string()), (2, EXPORTS[1].to_string()), (3, EXPORTS[1].to_string())]);
    assert!(job.ranks.iter().all(|r| r.source == tracecast_ingest::job::RankSource::Export));
    // The same through the one-rank-at-a-time path every command uses.
    let (ranks, failures) = Job::summarize(&paths, &ReadOptions::default(), &|_| {}, &|r| (r.rank, r.trace.events.len()));
    assert!(failures.is_empty());
    let mut numbers: Vec<u32> = ranks.iter().map(|r| r.0).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, [0, 1, 2, 3]);
    assert_eq!(tracecast_ingest::nsys::ranks(&paths[1]).unwrap().len(), 2);
}

/// A small export written here: two processes, one of them driving two GPUs,
/// with copies, sets, syncs, an event wait and an NCCL all-reduce.
fn synthetic(path: &Path) {
    let _ = std::fs::remove_file(path);
    let db = Connection::open(path).unwrap();
    let (p1, p2) = ((1i64 << 48) | (10 << 24), (1i64 << 48) | (20 << 24));
    let (t1, t2) = (p1 | 11, p2 | 20);
    db.execute_batch(&format!(
        "CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
         INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.25.0'), ('EXPORT_USER', 'someone');
         CREATE TABLE META_DATA_CAPTURE (name TEXT, value TEXT);
         INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:COMMAND', 'secret_command');
         CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, systemClockNs INTEGER);
         INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, 'x', 'y', 1000);
         CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER, name TEXT, totalMemory INTEGER, smCount INTEGER, computeMajor INTEGER, computeMinor INTEGER);
         INSERT INTO TARGET_INFO_GPU VALUES (1, 0, 'NVIDIA H100 80GB HBM3', 85000000000, 132, 9, 0), (1, 1, 'NVIDIA H200', 150000000000, 132, 9, 0);
         CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER, pid INTEGER, uuid TEXT, numMultiprocessors INTEGER);
         INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (1, 0, 20, 'u', 132);
         CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
         INSERT INTO StringIds VALUES (1, 'gemm_kernel'), (2, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)'),
             (3, 'cudaLaunchKernel_v7000'), (4, 'cudaStreamSynchronize_v3020'), (5, 'cudaMemcpyAsync_v3020'), (6, 'ncclAllReduce');
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, contextId INTEGER, streamId INTEGER,
             correlationId INTEGER, globalPid INTEGER, demangledName INTEGER, shortName INTEGER);
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES
             (2000, 3000, 0, 1, 7, 1, {p1}, 1, 1), (2000, 2500, 1, 2, 13, 2, {p1}, 1, 1), (2500, 4000, 0, 3, 7, 1, {p2}, 2, 2),
             (5000, NULL, 0, 3, 7, 9, {p2}, 1, 1);
         CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, deviceId INTEGER, contextId INTEGER, streamId INTEGER,
             correlationId INTEGER, globalPid INTEGER, bytes INTEGER, copyKind INTEGER, srcKind INTEGER, dstKind INTEGER);
         INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (3000, 3400, 0, 1, 7, 3, {p1}, 4096, 1, 1, 2);
         CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER, end INTEGER, deviceId INTEGER, contextId INTEGER, streamId INTEGER,
             correlationId INTEGER, globalPid INTEGER, value INTEGER, bytes INTEGER, memKind INTEGER);
         INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (3500, 3600, 0, 1, 7, 4, {p1}, 0, 64, 2);
         CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, eventClass INTEGER, globalTid INTEGER, correlationId INTEGER,
             nameId INTEGER, returnValue INTEGER);
         INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
             (1000, 1100, 1, {t1}, 1, 3, 0), (1200, 1300, 1, {t1}, 2, 3, 0), (1400, 1500, 1, {t1}, 3, 5, 0), (1600, 1700, 1, {t1}, 4, 5, 0),
             (1800, 3700, 1, {t1}, 5, 4, 0), (1100, 1200, 1, {t2}, 1, 3, 0);
         CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER, end INTEGER, deviceId INTEGER, contextId INTEGER, streamId INTEGER,
             correlationId INTEGER, globalPid INTEGER, syncType INTEGER, eventId INTEGER, eventSyncId INTEGER);
         INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (1800, 3700, 0, 1, 7, 5, {p1}, 3, 0, NULL), (1900, 1950, 0, 1, 13, 6, {p1}, 2, 1, 77);
         CREATE TABLE CUPTI_ACTIVITY_KIND_CUDA_EVENT (timestamp INTEGER, deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,
             globalPid INTEGER, eventId INTEGER, eventSyncId INTEGER);
         INSERT INTO CUPTI_ACTIVITY_KIND_CUDA_EVENT VALUES (0, 0, 1, 7, 42, {p1}, 1, 77);
         CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER);
         INSERT INTO NVTX_EVENTS VALUES (900, 1350, 59, 'aten::mm, seq = 3, op_id = 17, sizes = [[64, 32], [32, 128]]', {t1}, NULL, 0),
             (1050, 1300, 59, NULL, {t2}, 6, 1), (990, NULL, 59, 'forward', {t1}, NULL, 0);"
    ))
    .unwrap();
}

#[test]
fn a_synthetic_export_maps_onto_the_rank_model() {
    let dir = std::env::temp_dir().join(format!("tracecast-ingest-nsys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("small.sqlite");
    synthetic(&path);
    let job = Job::read(path.clone(), std::slice::from_ref(&path), &ReadOptions::default(), &|_| {});
    assert!(job.failures.is_empty(), "{:?}", job.failures);
    // GPU 0 of process 10, GPU 0 of process 20, GPU 1 of process 10.
    assert_eq!(job.ranks.len(), 3);
    let (a, b, c) = (&job.ranks[0].trace, &job.ranks[1].trace, &job.ranks[2].trace);
    let names =
        |t: &tracecast_ingest::RankTrace| (0..t.events.len()).map(|i| (t.events.kind[i], t.name(i).to_string())).collect::<Vec<_>>();
    let base = 1_700_000_000_000_000_000 - 1000;
    assert_eq!(a.base_time_ns, Some(base));
    let na = names(a);
    assert!(na.contains(&(EventKind::Memcpy, "Memcpy HtoD (Pinned -> Device)".into())), "{na:?}");
    assert!(na.contains(&(EventKind::Memset, "Memset (Device)".into())), "{na:?}");
    assert!(na.contains(&(EventKind::Runtime, "cudaStreamSynchronize".into())));
    assert!(na.contains(&(EventKind::GpuSync, "Stream Sync".into())));
    assert!(na.contains(&(EventKind::CpuOp, "aten::mm".into())));
    assert!(!na.iter().any(|(_, n)| n == "forward"), "an unclosed range is skipped");
    // A call that launched GPU work goes to that GPU's rank only (GPU 0: the kernel, copy and set;
    // GPU 1: its kernel); the synchronize, which launched nothing, to both ranks of its process.
    let launches = |t: &tracecast_ingest::RankTrace| {
        t.events.correlation.iter().zip(&t.events.kind).filter(|(_, k)| **k == EventKind::Runtime).count()
    };
    assert_eq!((launches(a), launches(c)), (4, 2));
    let kernel = (0..a.events.len()).find(|&i| a.events.kind[i] == EventKind::Kernel).unwrap();
    assert_eq!((a.events.ts_ns[kernel], a.events.dur_ns[kernel], a.events.pid[kernel], a.events.tid[kernel]), (base + 2000, 1000, 0, 7));
    let memcpy = (0..a.events.len()).find(|&i| a.events.kind[i] == EventKind::Memcpy).unwrap();
    assert_eq!(a.copy_bytes_of(memcpy), Some(4096));
    // The op has its shapes and its host times; a Stream Wait Event knows the record it waited on.
    assert_eq!(a.op_shapes[0].input_dims, "[[64, 32], [32, 128]]");
    let wait = (0..c.events.len()).find(|&i| c.name(i) == "Stream Wait Event").unwrap();
    assert_eq!(c.sync_waits, [(wait as u32, tracecast_ingest::SyncWait { wait_on_stream: 7, record_correlation: 42 })]);
    // GPU models: process 20's CUDA device 0 is GPU 1 (an H200); process 10's device 0 is GPU 0.
    assert_eq!(a.device_name(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(b.device_name(), Some("NVIDIA H200"));
    // NCCL all-reduce named by its range; the kernel without an end is skipped and said.
    let nccl = (0..b.events.len()).find(|&i| b.name(i).starts_with("ncclDevKernel")).unwrap();
    assert_eq!(b.collective_args_of(nccl).and_then(|x| x.collective_name.as_deref()), Some("all_reduce"));
    assert!(b.warnings.iter().any(|w| w.contains("1 row(s) without a start, end or device")), "{:?}", b.warnings);
    assert!(b.warnings.iter().any(|w| w.contains("1 NVTX range(s) were never closed")), "{:?}", b.warnings);
    for t in [a, b, c] {
        assert!(t.names.iter().all(|n| !n.contains("secret") && !n.contains("someone")));
        assert!(t.warnings.iter().all(|w| !w.contains("secret") && !w.contains("someone")));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn damaged_exports_give_a_trace_or_an_error_never_a_panic() {
    let bytes = std::fs::read(export("mfu_2gpu_before.sqlite")).unwrap();
    let dir = std::env::temp_dir().join(format!("tracecast-ingest-nsys-damaged-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("damaged.sqlite");
    // A fixed pseudo-random sequence: overwritten runs of bytes anywhere (header, schema, table pages) and cuts.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut ok, mut failed) = (0, 0);
    for round in 0..48 {
        let mut b = bytes.clone();
        if round % 4 == 3 {
            b.truncate((next() as usize) % bytes.len());
        } else {
            for _ in 0..1 + round % 8 {
                let at = (next() as usize) % b.len();
                let len = 1 + (next() as usize) % 64;
                for k in at..(at + len).min(b.len()) {
                    b[k] = next() as u8;
                }
            }
        }
        std::fs::write(&path, &b).unwrap();
        let job = Job::read(path.clone(), std::slice::from_ref(&path), &ReadOptions::default(), &|_| {});
        if job.failures.is_empty() {
            ok += 1;
            let _ = analyze_job(&job, &AnalyzeOptions::default());
        } else {
            failed += 1;
            for e in &job.failures {
                assert!(e.to_string().starts_with(&path.display().to_string()), "{e}");
            }
        }
    }
    println!("{ok} damaged exports read, {failed} refused");
    assert_eq!(ok + failed, 48);
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- `nsys export --type parquetdir` ---------------------------------------

#[path = "support/parquetdir.rs"]
mod parquetdir;
use parquetdir::to_parquetdir;

#[test]
fn a_parquetdir_export_reads_as_its_sqlite_export() {
    let base = std::env::temp_dir().join(format!("tracecast-ingest-nsys-parquetdir-{}", std::process::id()));
    for name in EXPORTS {
        let path = export(name);
        let dir = base.join(name.trim_end_matches(".sqlite"));
        to_parquetdir(&path, &dir);
        assert!(tracecast_ingest::nsys::is_export(&dir), "{name}: recognised by its tables");
        assert_eq!(tracecast_ingest::job::trace_files(&dir).unwrap(), vec![dir.clone()], "{name}: one export, not a directory of traces");
        assert_eq!(tracecast_ingest::nsys::ranks(&dir).unwrap(), tracecast_ingest::nsys::ranks(&path).unwrap());
        let want = tracecast_ingest::nsys::read_path(&path, &ReadOptions::default()).unwrap();
        let got = tracecast_ingest::nsys::read_path(&dir, &ReadOptions::default()).unwrap();
        assert_eq!(got.len(), want.len(), "{name}: ranks");
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(g.path, dir);
            assert_eq!(g.events.len(), w.events.len(), "{name} rank {i}: events");
            let mut g = g.clone();
            g.path = w.path.clone();
            g.json_bytes = w.json_bytes;
            assert!(format!("{g:?}") == format!("{w:?}"), "{name} rank {i}: the same trace as from the SQLite export");
        }
        // The same per-GPU numbers through a job.
        let (a, b) = (
            Job::read(path.clone(), std::slice::from_ref(&path), &ReadOptions::default(), &|_| {}),
            Job::read(dir.clone(), std::slice::from_ref(&dir), &ReadOptions::default(), &|_| {}),
        );
        assert!(a.failures.is_empty() && b.failures.is_empty(), "{:?}", b.failures);
        let mut opts = AnalyzeOptions::default();
        opts.window = WindowMode::All;
        let (a, b) = (analyze_job(&a, &opts), analyze_job(&b, &opts));
        assert_eq!(a.ranks.len(), b.ranks.len());
        for (x, y) in a.ranks.iter().zip(&b.ranks) {
            let (x, y) = (&x.breakdown, &y.breakdown);
            let nums = |b: &tracecast_ingest::analysis::Breakdown| {
                [b.gpu_span_us, b.busy_us, b.compute_us, b.comm_us, b.exposed_comm_us, b.memory_us, b.overlap_us]
            };
            assert_eq!(nums(x), nums(y), "{name}");
        }
    }
    // A damaged table file is named; no panic.
    let dir = base.join("damaged");
    to_parquetdir(&export(EXPORTS[1]), &dir);
    std::fs::write(dir.join("StringIds.parquet"), b"PAR1 not really parquet PAR1").unwrap();
    let e = tracecast_ingest::nsys::read_path(&dir, &ReadOptions::default()).unwrap_err().to_string();
    assert!(e.contains("StringIds.parquet") && e.contains(&dir.display().to_string()) && !e.contains('\n'), "{e}");
    // A missing required table is the SQLite export's error, naming the directory.
    std::fs::remove_file(dir.join("StringIds.parquet")).unwrap();
    let e = tracecast_ingest::nsys::read_path(&dir, &ReadOptions::default()).unwrap_err().to_string();
    assert!(e.contains("no StringIds table") && e.contains(&dir.display().to_string()), "{e}");
    let _ = std::fs::remove_dir_all(&base);
}
