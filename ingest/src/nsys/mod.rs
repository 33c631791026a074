//! The Nsight Systems export reader: `nsys export --type sqlite` files, and
//! `nsys export --type parquetdir` directories (one `TABLE.parquet` per table,
//! loaded into an in-memory SQLite database and read the same way).
//!
//! An export holds every process and GPU of one capture (usually one node).
//! [`read_path`] turns it into one [`RankTrace`] per (process, GPU) — the
//! rank model the Kineto reader produces — so every command reads it
//! unchanged:
//!
//! | export | rank model |
//! |---|---|
//! | `CUPTI_ACTIVITY_KIND_KERNEL` | kernels (demangled names), pid = `deviceId`, tid = `streamId`, correlation |
//! | `CUPTI_ACTIVITY_KIND_MEMCPY` / `_MEMSET` | memcpy / memset (`Memcpy HtoD (Pinned -> Device)`, `Memset (Device)`) with bytes |
//! | `CUPTI_ACTIVITY_KIND_RUNTIME` | runtime and driver calls (`cudaLaunchKernel`, API version suffix dropped), pid/tid of the thread, correlation |
//! | `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION` | `Stream Sync`, `Event Sync`, `Stream Wait Event`, `Context Sync` rows; what an event wait waited on from `CUDA_EVENT` when recorded |
//! | `NVTX_EVENTS` ranges | PyTorch `emit_nvtx` operators (`aten::mm, seq = …, op_id = N, sizes = …`) as CPU ops named `aten::mm` with `Input Dims` from `sizes` and `Input type` from their kernels' names (`emit_nvtx` records no dtypes); other ranges as user annotations named by their text |
//! | NVTX `nccl*` ranges | the collective of the NCCL kernel launched inside them (`ncclGroupStart … ncclSend, ncclRecv … ncclGroupEnd` → `send_recv`) |
//! | PyTorch's `nccl:*` / `c10d::*` ranges | around a group of sends and receives, the collective they run together (`nccl:all_to_all` → `all_to_all`) |
//! | `TARGET_INFO_GPU` | device properties (name, SMs, memory, compute capability) |
//! | `TARGET_INFO_SESSION_START_TIME` | times made absolute (UTC ns), as `baseTimeNanoseconds` does for Kineto |
//!
//! Times stay integer nanoseconds: the export's session clock plus one
//! integer offset to UTC (when recorded). Free-form metadata
//! (environments, command lines, process and thread names, paths) is never
//! read; of `META_DATA_EXPORT` only `EXPORT_SCHEMA_VERSION`.

mod dtype;
mod nvtx;
mod parquet;
mod ranks;
mod rows;
mod tables;

pub(crate) use ranks::UNRECORDED_GPU;

use std::path::Path;

use crate::error::{Error, Result};
use crate::kineto::ReadOptions;
use crate::rank::RankTrace;

/// The first 16 bytes of every SQLite database file.
pub const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Whether a file starting with `head` is an SQLite database (an export).
pub fn is_sqlite(head: &[u8]) -> bool {
    head.starts_with(SQLITE_MAGIC)
}

/// Whether `path` is an export: a file that starts with the SQLite magic, or
/// a `parquetdir` export (a directory holding `CUPTI_ACTIVITY_KIND_KERNEL.parquet`,
/// `…_MEMCPY.parquet` or `…_MEMSET.parquet`).
pub fn is_export(path: &Path) -> bool {
    use std::io::Read;
    if parquet::is_parquet_export(path) {
        return true;
    }
    // Only a regular file: SQLite needs one, and sniffing a pipe (`<(zcat t.json.gz)`) would eat its first bytes.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = [0u8; 16];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head)).is_ok() && is_sqlite(&head)
}

/// One rank of an export: the work of one process on one GPU. Ranks sort
/// by device, then process, which is their order in the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExportRank {
    /// CUDA device id (`deviceId`).
    pub device: i64,
    /// OS process id.
    pub pid: i64,
    /// Nsight Systems' serialized process id (`globalPid`).
    pub global_pid: i64,
}

/// The ranks of the export at `path`, in order, without reading its events
/// (one query over the GPU activity tables).
pub fn ranks(path: &Path) -> Result<Vec<ExportRank>> {
    let db = open_db(path)?;
    let x = tables::Export::open(&db)?;
    let mut keys = Vec::new();
    for table in [tables::KERNEL, tables::MEMCPY, tables::MEMSET] {
        if !x.has(table) {
            continue;
        }
        x.select(table, &["start", "end", "deviceId"], &[])?;
        let pid = if x.has_column(table, "globalPid") { "globalPid" } else { "NULL" };
        let sql = format!(
            "SELECT DISTINCT deviceId, {pid} FROM {table} WHERE typeof(start) IN ('integer', 'real') \
             AND typeof(\"end\") IN ('integer', 'real') AND typeof(deviceId) IN ('integer', 'real')"
        );
        tables::rows(&x.conn, &x.path, &sql, |row| {
            if let Some(device) = tables::int(row, 0).filter(|d| ranks::names_a_gpu(*d)) {
                let global_pid = tables::int(row, 1).unwrap_or(0);
                keys.push(ExportRank { device, pid: ranks::os_pid(global_pid), global_pid });
            }
        })?;
    }
    keys.sort_unstable();
    keys.dedup();
    Ok(keys)
}

/// The tables of the export at `path`: its SQLite file, or a `parquetdir`
/// export's Parquet files loaded into memory.
fn open_db(path: &Path) -> Result<tables::Db> {
    crate::input::mark(path);
    if parquet::is_parquet_export(path) { parquet::load(path) } else { Ok(tables::Db::file(path)) }
}

/// Reads every rank of the export at `path`, in [`ranks`] order. The tables
/// are read in parallel, each on its own read-only connection.
pub fn read_path(path: &Path, opts: &ReadOptions) -> Result<Vec<RankTrace>> {
    let file_bytes = if parquet::is_parquet_export(path) {
        parquet::bytes(path)?
    } else {
        std::fs::metadata(path).map_err(|cause| Error::Io { path: path.to_path_buf(), cause })?.len()
    };
    let db = open_db(path)?;
    let x = tables::Export::open(&db)?;
    let plan = rows::Plan::of(&x)?;
    let ((activity, (calls, ranges)), syncs) = rayon::join(
        || {
            rayon::join(
                || rows::read_activity(&db, &plan),
                || rayon::join(|| rows::read_calls(&db, &plan), || rows::read_ranges(&db, &plan)),
            )
        },
        || rows::read_syncs(&db, &plan),
    );
    let (activity, labels, unusable_activity, negative_bytes) = activity?;
    let (calls, unusable_calls) = calls?;
    let (ranges, range_names, unclosed_ranges) = ranges?;
    let (syncs, records) = syncs?;
    let names = activity.iter().filter(|a| a.kind == crate::event::EventKind::Kernel).map(|a| a.name);
    let mut ids: Vec<i64> = names.chain(calls.iter().map(|c| c.name)).collect();
    ids.sort_unstable();
    ids.dedup();
    let all = rows::Rows {
        strings: rows::strings(&x, ids)?,
        gpus: rows::gpus(&x)?,
        utc_offset_ns: rows::utc_offset(&x)?,
        activity,
        labels,
        calls,
        ranges,
        range_names,
        syncs,
        records,
        unusable: unusable_activity + unusable_calls,
        unclosed_ranges,
        negative_bytes,
    };
    let traces = ranks::split(all, path, file_bytes, opts);
    if traces.is_empty() {
        // Rows there, none usable (times beyond 64-bit nanoseconds, text): not an export without GPU work.
        let why = if unusable_activity > 0 {
            format!(
                "its {unusable_activity} GPU activity row(s) have no usable start, end or device (NULL, text, or a time beyond 64-bit nanoseconds)"
            )
        } else {
            "it has no GPU activity (kernels, memcpy, memset)".to_string()
        };
        return Err(Error::Schema {
            path: path.to_path_buf(),
            message: format!("this Nsight Systems export ({}): {why}: no rank to read", x.version_text()),
        });
    }
    Ok(traces)
}
