//! The rows of an export's tables, read into plain structs (one pass per
//! table, the tables on separate connections in parallel).

use rustc_hash::FxHashMap;

use super::nvtx;
use super::tables::{self, Export, int, rows, with_text};
use crate::collective::Collective;
use crate::device::DeviceProperties;
use crate::error::Result;
use crate::event::EventKind;

/// A kernel, memcpy or memset.
#[derive(Debug, Clone)]
pub(crate) struct Activity {
    pub(crate) kind: EventKind,
    /// For kernels a `StringIds` id; for copies and sets an index into [`Rows::labels`].
    pub(crate) name: i64,
    pub(crate) start: i64,
    pub(crate) end: i64,
    pub(crate) device: i64,
    pub(crate) stream: i64,
    pub(crate) correlation: i64,
    pub(crate) global_pid: i64,
    pub(crate) bytes: Option<u64>,
}

/// A CUDA runtime or driver API call.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) start: i64,
    pub(crate) end: i64,
    pub(crate) global_tid: i64,
    pub(crate) correlation: i64,
    /// `StringIds` id of the function name.
    pub(crate) name: i64,
}

/// What an NCCL NVTX range is, for naming the collective of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nccl {
    GroupStart,
    GroupEnd,
    Op(Collective),
    /// PyTorch's op around the NCCL calls (`nccl:all_to_all`, `c10d::alltoall_base_`): what
    /// they do together, where the calls are sends and receives.
    Torch(Collective),
}

/// A closed NVTX push/pop or start/end range.
#[derive(Debug, Clone)]
pub(crate) struct Range {
    pub(crate) start: i64,
    pub(crate) end: i64,
    pub(crate) global_tid: i64,
    pub(crate) kind: EventKind,
    /// Index into [`Rows::range_names`].
    pub(crate) name: u32,
    pub(crate) op_id: Option<i64>,
    pub(crate) sizes: Option<Box<str>>,
    pub(crate) nccl: Option<Nccl>,
}

/// A synchronization the GPU recorded (`cudaStreamSynchronize`, `cudaEventSynchronize`, …).
#[derive(Debug, Clone)]
pub(crate) struct Sync {
    pub(crate) start: i64,
    pub(crate) end: i64,
    pub(crate) stream: i64,
    pub(crate) correlation: i64,
    pub(crate) global_pid: i64,
    pub(crate) sync_type: i64,
    pub(crate) event_sync: Option<i64>,
}

/// A `cudaEventRecord` (from `CUDA_EVENT`, recorded with `--cuda-event-trace`).
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub(crate) stream: i64,
    pub(crate) correlation: i64,
}

/// Event records by (global pid, event sync id).
pub(crate) type Records = FxHashMap<(i64, i64), Record>;

/// What a range text says: kind, name index, `op_id`, `sizes`, NCCL role.
type ParsedRange = (EventKind, u32, Option<i64>, Option<Box<str>>, Option<Nccl>);

/// Everything read from one export.
#[derive(Debug, Default)]
pub(crate) struct Rows {
    pub(crate) activity: Vec<Activity>,
    /// Names of memcpy / memset rows (`Memcpy HtoD (Pinned -> Device)`).
    pub(crate) labels: Vec<String>,
    pub(crate) calls: Vec<Call>,
    pub(crate) ranges: Vec<Range>,
    pub(crate) range_names: Vec<String>,
    pub(crate) syncs: Vec<Sync>,
    pub(crate) records: Records,
    /// `StringIds` values of the kernel and call names.
    pub(crate) strings: FxHashMap<i64, String>,
    /// GPU model per (process id, device id), and for any device.
    pub(crate) gpus: Gpus,
    /// UTC epoch minus the session clock at the capture's start, ns.
    pub(crate) utc_offset_ns: Option<i64>,
    /// Rows without a usable start and end.
    pub(crate) unusable: u64,
    /// NVTX ranges that were never closed.
    pub(crate) unclosed_ranges: u64,
    /// Copies and sets whose byte count is negative (kept without bytes).
    pub(crate) negative_bytes: u64,
}

/// The GPU models `TARGET_INFO_GPU` records.
#[derive(Debug, Default, Clone)]
pub(crate) struct Gpus {
    /// By `TARGET_INFO_GPU.id`.
    pub(crate) by_id: Vec<(i64, DeviceProperties)>,
    /// `TARGET_INFO_CUDA_DEVICE`: (OS pid, CUDA device id) → `TARGET_INFO_GPU.id`.
    pub(crate) cuda_to_gpu: FxHashMap<(i64, i64), i64>,
}

impl Gpus {
    /// The model of CUDA device `device` of process `pid`: through the
    /// process's device map when recorded, else the GPU of that id, else the
    /// one model every GPU of the export has.
    pub(crate) fn of(&self, pid: i64, device: i64) -> Option<DeviceProperties> {
        let id = self.cuda_to_gpu.get(&(pid, device)).copied().unwrap_or(device);
        if let Some((_, d)) = self.by_id.iter().find(|(i, _)| *i == id) {
            return Some(DeviceProperties { id: Some(device), ..d.clone() });
        }
        let first = self.by_id.first().map(|(_, d)| d)?;
        self.by_id
            .iter()
            .all(|(_, d)| d.name == first.name && d.num_sms == first.num_sms)
            .then(|| DeviceProperties { id: Some(device), ..first.clone() })
    }
}

/// The SQL of every read, made from the export's columns on the opening connection.
pub(crate) struct Plan {
    kernels: Option<String>,
    memcpys: Option<String>,
    memsets: Option<String>,
    calls: Option<String>,
    ranges: Option<String>,
    syncs: Option<String>,
    records: Option<String>,
    copy_kinds: FxHashMap<i64, String>,
    mem_kinds: FxHashMap<i64, String>,
}

impl Plan {
    pub(crate) fn of(x: &Export) -> Result<Plan> {
        use tables::*;
        let kernels = if x.has(KERNEL) {
            let cols = x.select(KERNEL, &["start", "end", "deviceId", "streamId", "demangledName"], &["correlationId", "globalPid"])?;
            Some(format!("SELECT {cols} FROM {KERNEL}"))
        } else {
            None
        };
        let memcpys = if x.has(MEMCPY) {
            let required = ["start", "end", "deviceId", "streamId", "bytes", "copyKind"];
            Some(format!("SELECT {} FROM {MEMCPY}", x.select(MEMCPY, &required, &["correlationId", "globalPid", "srcKind", "dstKind"])?))
        } else {
            None
        };
        let memsets = if x.has(MEMSET) {
            let required = ["start", "end", "deviceId", "streamId", "bytes"];
            Some(format!("SELECT {} FROM {MEMSET}", x.select(MEMSET, &required, &["correlationId", "globalPid", "memKind"])?))
        } else {
            None
        };
        let calls = if x.has(RUNTIME) {
            Some(format!("SELECT {} FROM {RUNTIME}", x.select(RUNTIME, &["start", "end", "globalTid", "nameId"], &["correlationId"])?))
        } else {
            None
        };
        let ranges = if x.has(NVTX) {
            let types = range_types(x)?;
            Some(format!(
                "SELECT {} FROM {NVTX} WHERE eventType IN ({types})",
                x.select(NVTX, &["start", "eventType", "globalTid"], &["end", "text", "textId"])?
            ))
        } else {
            None
        };
        let syncs = if x.has(SYNC) {
            Some(format!(
                "SELECT {} FROM {SYNC}",
                x.select(
                    SYNC,
                    &["start", "end", "streamId"],
                    &["correlationId", "globalPid", "syncType", "deprecatedSyncType", "eventSyncId"]
                )?
            ))
        } else {
            None
        };
        let records = if x.has(CUDA_EVENT) && x.has_column(CUDA_EVENT, "eventSyncId") {
            Some(format!(
                "SELECT {} FROM {CUDA_EVENT}",
                x.select(CUDA_EVENT, &["globalPid", "eventSyncId", "streamId", "correlationId"], &[])?
            ))
        } else {
            None
        };
        Ok(Plan {
            kernels,
            memcpys,
            memsets,
            calls,
            ranges,
            syncs,
            records,
            copy_kinds: enum_names(x, "ENUM_CUDA_MEMCPY_OPER", "name")?,
            mem_kinds: enum_names(x, "ENUM_CUDA_MEM_KIND", "label")?,
        })
    }
}

/// The NVTX event types that are ranges (push/pop and start/end).
fn range_types(x: &Export) -> Result<String> {
    let mut ids = Vec::new();
    if x.has_column("ENUM_NSYS_EVENT_TYPE", "name") {
        rows(
            &x.conn,
            &x.path,
            "SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name IN ('NvtxPushPopRange', 'NvtxStartEndRange', 'NvtxtPushPopRange', 'NvtxtStartEndRange')",
            |row| ids.extend(int(row, 0)),
        )?;
    }
    if ids.is_empty() {
        // The ids of Nsight Systems 2021–2026 exports.
        ids = vec![59, 60];
    }
    Ok(ids.iter().map(i64::to_string).collect::<Vec<_>>().join(", "))
}

/// `id → column` of an `ENUM_*` table, empty when the export has none.
fn enum_names(x: &Export, table: &str, column: &str) -> Result<FxHashMap<i64, String>> {
    let mut out = FxHashMap::default();
    if x.has_column(table, "id") && x.has_column(table, column) {
        rows(&x.conn, &x.path, &format!("SELECT id, \"{column}\" FROM {table}"), |row| {
            if let (Some(id), Some(v)) = (int(row, 0), tables::text(row, 1)) {
                out.insert(id, v);
            }
        })?;
    }
    Ok(out)
}

/// `HtoD` for copy kind `CUDA_MEMCPY_KIND_HTOD` (the CUPTI numbering when the export has no enum table).
fn copy_kind(plan: &Plan, id: i64) -> String {
    let symbol = plan.copy_kinds.get(&id).map(String::as_str).unwrap_or(match id {
        1 => "CUDA_MEMCPY_KIND_HTOD",
        2 => "CUDA_MEMCPY_KIND_DTOH",
        3 => "CUDA_MEMCPY_KIND_HTOA",
        4 => "CUDA_MEMCPY_KIND_ATOH",
        5 => "CUDA_MEMCPY_KIND_ATOA",
        6 => "CUDA_MEMCPY_KIND_ATOD",
        7 => "CUDA_MEMCPY_KIND_DTOA",
        8 => "CUDA_MEMCPY_KIND_DTOD",
        9 => "CUDA_MEMCPY_KIND_HTOH",
        10 => "CUDA_MEMCPY_KIND_PTOP",
        _ => "CUDA_MEMCPY_KIND_UNKNOWN",
    });
    let short = symbol.strip_prefix("CUDA_MEMCPY_KIND_").unwrap_or(symbol);
    let (uvm, pair) = match short.strip_prefix("UVM_") {
        Some(p) => ("UVM ", p),
        None => ("", short),
    };
    let b = pair.as_bytes();
    if b.len() == 4 && b.get(1..3) == Some(b"TO".as_slice()) {
        let (from, to) = (char::from(b[0]), char::from(b[3]));
        return format!("{uvm}{from}to{to}");
    }
    let mut s = short.to_ascii_lowercase();
    if let Some(c) = s.get_mut(..1) {
        c.make_ascii_uppercase();
    }
    s
}

/// `Pinned` for memory kind 1 (the export's own labels when it has them).
fn mem_kind(plan: &Plan, id: Option<i64>) -> String {
    let Some(id) = id else { return "Unknown".into() };
    if let Some(l) = plan.mem_kinds.get(&id) {
        return l.clone();
    }
    ["Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static"]
        .get(usize::try_from(id).unwrap_or(usize::MAX))
        .map_or("Unknown", |s| s)
        .to_string()
}

/// Kernels, memcpys and memsets.
/// Returns the activity, the copy and set labels, the rows without a usable start, end or
/// device, and the copies and sets whose byte count is negative (kept without bytes).
pub(crate) fn read_activity(db: &tables::Db, plan: &Plan) -> Result<(Vec<Activity>, Vec<String>, u64, u64)> {
    let path = db.path.as_path();
    let conn = db.connect()?;
    let mut out = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    let mut label_ids: FxHashMap<String, i64> = FxHashMap::default();
    let mut unusable = 0u64;
    let mut negative_bytes = 0u64;
    let mut bytes_of = |row: &rusqlite::Row<'_>| {
        let b = int(row, 4)?;
        negative_bytes += u64::from(b < 0);
        u64::try_from(b).ok()
    };
    let mut label = |s: String| -> i64 {
        if let Some(&id) = label_ids.get(&s) {
            return id;
        }
        let id = labels.len() as i64;
        labels.push(s.clone());
        label_ids.insert(s, id);
        id
    };
    let common = |row: &rusqlite::Row<'_>, kind: EventKind, name: i64, bytes: Option<u64>, opt: usize| -> Option<Activity> {
        let (start, end) = (int(row, 0)?, int(row, 1)?);
        Some(Activity {
            kind,
            name,
            start,
            end,
            device: int(row, 2)?,
            stream: int(row, 3).unwrap_or(-1),
            correlation: int(row, opt).unwrap_or(-1),
            global_pid: int(row, opt + 1).unwrap_or(0),
            bytes,
        })
    };
    if let Some(sql) = &plan.kernels {
        rows(&conn, path, sql, |row| match int(row, 4).and_then(|name| common(row, EventKind::Kernel, name, None, 5)) {
            Some(a) => out.push(a),
            None => unusable += 1,
        })?;
    }
    if let Some(sql) = &plan.memcpys {
        let mut names: FxHashMap<(i64, Option<i64>, Option<i64>), i64> = FxHashMap::default();
        rows(&conn, path, sql, |row| {
            let key = (int(row, 5).unwrap_or(0), int(row, 8), int(row, 9));
            let name = *names.entry(key).or_insert_with(|| {
                label(format!("Memcpy {} ({} -> {})", copy_kind(plan, key.0), mem_kind(plan, key.1), mem_kind(plan, key.2)))
            });
            let bytes = bytes_of(row);
            match common(row, EventKind::Memcpy, name, bytes, 6) {
                Some(a) => out.push(a),
                None => unusable += 1,
            }
        })?;
    }
    if let Some(sql) = &plan.memsets {
        let mut names: FxHashMap<Option<i64>, i64> = FxHashMap::default();
        rows(&conn, path, sql, |row| {
            let kind = int(row, 7);
            let name = *names.entry(kind).or_insert_with(|| label(format!("Memset ({})", mem_kind(plan, kind))));
            let bytes = bytes_of(row);
            match common(row, EventKind::Memset, name, bytes, 5) {
                Some(a) => out.push(a),
                None => unusable += 1,
            }
        })?;
    }
    Ok((out, labels, unusable, negative_bytes))
}

/// Runtime and driver API calls.
pub(crate) fn read_calls(db: &tables::Db, plan: &Plan) -> Result<(Vec<Call>, u64)> {
    let path = db.path.as_path();
    let mut out = Vec::new();
    let mut unusable = 0;
    if let Some(sql) = &plan.calls {
        let conn = db.connect()?;
        rows(&conn, path, sql, |row| {
            let call = || {
                Some(Call {
                    start: int(row, 0)?,
                    end: int(row, 1)?,
                    global_tid: int(row, 2)?,
                    name: int(row, 3)?,
                    correlation: int(row, 4).unwrap_or(-1),
                })
            };
            match call() {
                Some(c) => out.push(c),
                None => unusable += 1,
            }
        })?;
    }
    Ok((out, unusable))
}

/// NVTX ranges, their texts read as they come (most are unique `emit_nvtx` texts).
pub(crate) fn read_ranges(db: &tables::Db, plan: &Plan) -> Result<(Vec<Range>, Vec<String>, u64)> {
    let path = db.path.as_path();
    let mut out = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut unclosed = 0;
    let Some(sql) = &plan.ranges else { return Ok((out, names, unclosed)) };
    let conn = db.connect()?;
    let mut name_ids: FxHashMap<String, u32> = FxHashMap::default();
    // Registered strings (`textId`) repeat: parsed once per id.
    let mut registered: FxHashMap<i64, Option<ParsedRange>> = FxHashMap::default();
    let mut lookup = conn.prepare("SELECT value FROM StringIds WHERE id = ?1").ok();
    let mut parse = |text: &str| -> ParsedRange {
        let r = nvtx::parse(text);
        let id = match name_ids.get(r.name) {
            Some(&id) => id,
            None => {
                let id = names.len() as u32;
                names.push(r.name.to_string());
                name_ids.insert(r.name.to_string(), id);
                id
            }
        };
        let nccl = match nvtx::group_edge(text) {
            Some(true) => Some(Nccl::GroupStart),
            Some(false) => Some(Nccl::GroupEnd),
            None => nvtx::nccl_collective(text).map(Nccl::Op).or_else(|| nvtx::torch_collective(r.name).map(Nccl::Torch)),
        };
        (r.kind, id, r.op_id, r.sizes.map(Box::from), nccl)
    };
    rows(&conn, path, sql, |row| {
        let (Some(start), Some(tid)) = (int(row, 0), int(row, 2)) else { return };
        let Some(end) = int(row, 3) else {
            unclosed += 1;
            return;
        };
        let parsed = match with_text(row, 4, &mut parse) {
            Some(p) => Some(p),
            None => int(row, 5).and_then(|id| {
                registered
                    .entry(id)
                    .or_insert_with(|| {
                        let text: Option<String> = lookup.as_mut().and_then(|s| s.query_row([id], |r| r.get::<_, String>(0)).ok());
                        text.map(|t| parse(&t))
                    })
                    .clone()
            }),
        };
        let Some((kind, name, op_id, sizes, nccl)) = parsed else { return };
        out.push(Range { start, end, global_tid: tid, kind, name, op_id, sizes, nccl });
    })?;
    Ok((out, names, unclosed))
}

/// Synchronizations and the event records they waited on.
pub(crate) fn read_syncs(db: &tables::Db, plan: &Plan) -> Result<(Vec<Sync>, Records)> {
    let path = db.path.as_path();
    let mut syncs = Vec::new();
    let mut records = FxHashMap::default();
    if plan.syncs.is_none() && plan.records.is_none() {
        return Ok((syncs, records));
    }
    let conn = db.connect()?;
    if let Some(sql) = &plan.syncs {
        rows(&conn, path, sql, |row| {
            let s = || {
                Some(Sync {
                    start: int(row, 0)?,
                    end: int(row, 1)?,
                    stream: int(row, 2)?,
                    correlation: int(row, 3).unwrap_or(-1),
                    global_pid: int(row, 4).unwrap_or(0),
                    sync_type: int(row, 5).or_else(|| int(row, 6)).unwrap_or(0),
                    event_sync: int(row, 7),
                })
            };
            syncs.extend(s());
        })?;
    }
    if let Some(sql) = &plan.records {
        rows(&conn, path, sql, |row| {
            if let (Some(pid), Some(id), Some(stream), Some(correlation)) = (int(row, 0), int(row, 1), int(row, 2), int(row, 3)) {
                records.insert((pid, id), Record { stream, correlation });
            }
        })?;
    }
    Ok((syncs, records))
}

/// `StringIds` values of `ids`.
pub(crate) fn strings(x: &Export, ids: impl IntoIterator<Item = i64>) -> Result<FxHashMap<i64, String>> {
    let mut out = FxHashMap::default();
    let mut stmt = x.conn.prepare("SELECT value FROM StringIds WHERE id = ?1").map_err(|e| tables::sql_error(&x.path, &e))?;
    for id in ids {
        if out.contains_key(&id) {
            continue;
        }
        match stmt.query_row([id], |r| r.get_ref(0).map(|v| v.as_str().map(str::to_string).unwrap_or_default())) {
            Ok(v) => {
                out.insert(id, v);
            }
            Err(rusqlite::Error::QueryReturnedNoRows) => {}
            Err(e) => return Err(tables::sql_error(&x.path, &e)),
        }
    }
    Ok(out)
}

/// The GPU models and the device map, when the export records them.
pub(crate) fn gpus(x: &Export) -> Result<Gpus> {
    use tables::{CUDA_DEVICE, GPU_INFO};
    let mut g = Gpus::default();
    if x.has_column(GPU_INFO, "id") {
        let sql = format!(
            "SELECT {} FROM {GPU_INFO}",
            x.select(GPU_INFO, &["id"], &["name", "totalMemory", "smCount", "computeMajor", "computeMinor"])?
        );
        rows(&x.conn, &x.path, &sql, |row| {
            let Some(id) = int(row, 0) else { return };
            let d = DeviceProperties {
                id: Some(id),
                name: tables::text(row, 1).filter(|n| !n.is_empty()),
                total_global_mem: int(row, 2).and_then(|v| u64::try_from(v).ok()),
                num_sms: int(row, 3),
                compute_major: int(row, 4),
                compute_minor: int(row, 5),
            };
            g.by_id.push((id, d));
        })?;
    }
    if x.has_column(CUDA_DEVICE, "gpuId") && x.has_column(CUDA_DEVICE, "cudaId") && x.has_column(CUDA_DEVICE, "pid") {
        rows(&x.conn, &x.path, &format!("SELECT pid, cudaId, gpuId FROM {CUDA_DEVICE}"), |row| {
            if let (Some(pid), Some(cuda), Some(gpu)) = (int(row, 0), int(row, 1), int(row, 2)) {
                g.cuda_to_gpu.insert((pid, cuda), gpu);
            }
        })?;
    }
    Ok(g)
}

/// UTC epoch minus the session clock (what turns export times into absolute ns).
pub(crate) fn utc_offset(x: &Export) -> Result<Option<i64>> {
    use tables::SESSION_START;
    if !(x.has_column(SESSION_START, "utcEpochNs") && x.has_column(SESSION_START, "systemClockNs")) {
        return Ok(None);
    }
    let mut out = None;
    rows(&x.conn, &x.path, &format!("SELECT utcEpochNs, systemClockNs FROM {SESSION_START}"), |row| {
        if out.is_none()
            && let (Some(utc), Some(clock)) = (int(row, 0), int(row, 1))
        {
            out = utc.checked_sub(clock);
        }
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            kernels: None,
            memcpys: None,
            memsets: None,
            calls: None,
            ranges: None,
            syncs: None,
            records: None,
            copy_kinds: FxHashMap::default(),
            mem_kinds: FxHashMap::default(),
        }
    }

    #[test]
    fn copy_and_memory_kinds_read_as_kineto_names_them() {
        let mut p = plan();
        assert_eq!(copy_kind(&p, 1), "HtoD");
        assert_eq!(copy_kind(&p, 8), "DtoD");
        assert_eq!(copy_kind(&p, 10), "PtoP");
        assert_eq!(copy_kind(&p, 99), "Unknown");
        p.copy_kinds.insert(13, "CUDA_MEMCPY_KIND_UVM_DTOD".into());
        assert_eq!(copy_kind(&p, 13), "UVM DtoD");
        assert_eq!(mem_kind(&p, Some(1)), "Pinned");
        assert_eq!(mem_kind(&p, Some(-3)), "Unknown");
        assert_eq!(mem_kind(&p, None), "Unknown");
    }
}
