//! The rows of an export → one [`RankTrace`] per (process, GPU).
//!
//! GPU activity goes to the rank of its process and device; a runtime call
//! to the rank whose activity it launched (by correlation), else to every
//! rank of its process, as do NVTX ranges; a synchronization to the rank of
//! its stream. Times are the export's session clock plus the UTC offset of
//! the capture's start when the export records it (as Kineto's
//! `baseTimeNanoseconds` makes its times absolute).

use rustc_hash::FxHashMap;

use super::ExportRank;
use super::nvtx;
use super::rows::{Activity, Nccl, Rows};
use crate::collective::{Collective, CollectiveArgs};
use crate::device::DeviceProperties;
use crate::event::{EventKind, NameId, Row};
use crate::kineto::ReadOptions;
use crate::rank::{OpShapes, RankTrace, SyncWait};

/// How a rank's warning that its export names no GPU model begins.
pub(crate) const UNRECORDED_GPU: &str = "the export does not record the GPU model";

/// The OS process id in a serialized global id.
pub(crate) fn os_pid(global: i64) -> i64 {
    (global >> 24) & 0xFF_FFFF
}

/// The OS thread id in a serialized global thread id.
pub(crate) fn os_tid(global_tid: i64) -> i64 {
    global_tid & 0xFF_FFFF
}

/// The global process id of a global thread id (its thread bits cleared).
pub(crate) fn process_of(global_tid: i64) -> i64 {
    global_tid & !0xFF_FFFF
}

/// Whether a row's `deviceId` names a GPU: a negative one (a damaged or
/// hand-made row) makes no rank, which would also renumber the GPUs after it.
pub(crate) fn names_a_gpu(device: i64) -> bool {
    device >= 0
}

/// The ranks of an export's GPU activity: by device, then process.
pub(crate) fn keys(activity: &[Activity]) -> Vec<ExportRank> {
    let mut keys: Vec<ExportRank> = activity
        .iter()
        .filter(|a| names_a_gpu(a.device))
        .map(|a| ExportRank { device: a.device, pid: os_pid(a.global_pid), global_pid: a.global_pid })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

// Times are clamped as the Kineto reader clamps them (no sum the analyses form overflows).
use crate::kineto::{MAX_DUR_NS, MAX_TS_NS, MIN_TS_NS};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum NameRef {
    /// A `StringIds` value (kernel names).
    String(i64),
    /// A `StringIds` value without its `_v3020` API version suffix (runtime calls).
    Call(i64),
    /// A memcpy / memset label.
    Label(i64),
    /// An NVTX range name.
    Range(u32),
    Fixed(&'static str),
}

#[derive(Debug)]
enum Extra {
    None,
    Bytes(u64),
    Shapes(Box<str>),
    Wait(SyncWait),
    Collective(Collective),
}

#[derive(Debug)]
struct Pending {
    ts: i64,
    end: i64,
    kind: EventKind,
    name: NameRef,
    pid: i64,
    tid: i64,
    correlation: i64,
    external_id: i64,
    extra: Extra,
}

/// `cudaLaunchKernel` for `cudaLaunchKernel_v7000`: Kineto's names (driver
/// names such as `cuMemcpyDtoH_v2` keep their short suffix).
fn call_name(name: &str) -> &str {
    match name.rsplit_once("_v") {
        Some((base, v)) if v.len() >= 4 && v.bytes().all(|c| c.is_ascii_digit()) && !base.is_empty() => base,
        _ => name,
    }
}

fn sync_name(sync_type: i64) -> &'static str {
    match sync_type {
        1 => "Event Sync",
        2 => "Stream Wait Event",
        3 => "Stream Sync",
        4 => "Context Sync",
        _ => "Unknown Sync",
    }
}

/// The highest `sm_XY` the kernel names were built for (`nvjet_*` is cuBLAS's Hopper-and-newer generator).
fn kernel_arch<'a>(names: impl Iterator<Item = &'a str>) -> Option<u32> {
    let mut best: Option<u32> = None;
    for n in names {
        let mut arch = if n.starts_with("nvjet") { Some(90) } else { None };
        let mut rest = n;
        while let Some(at) = rest.find("sm") {
            rest = rest.get(at + 2..).unwrap_or_default();
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if (2..=3).contains(&digits.len())
                && let Ok(v) = digits.parse::<u32>()
                && (50..=200).contains(&v)
            {
                arch = arch.max(Some(v));
            }
        }
        best = best.max(arch);
    }
    best
}

/// Splits the export's rows into its ranks (in [`keys`] order).
pub(crate) fn split(rows: Rows, path: &std::path::Path, file_bytes: u64, opts: &ReadOptions) -> Vec<RankTrace> {
    let keys = keys(&rows.activity);
    let index: FxHashMap<(i64, i64), usize> = keys.iter().enumerate().map(|(i, k)| ((k.global_pid, k.device), i)).collect();
    let mut by_process: FxHashMap<i64, Vec<usize>> = FxHashMap::default();
    for (i, k) in keys.iter().enumerate() {
        by_process.entry(k.global_pid).or_default().push(i);
    }
    let offset = rows.utc_offset_ns.unwrap_or(0);
    let (mut negative, mut before_session) = (0u64, 0u64);
    let mut time = |start: i64, end: i64| -> (i64, i64) {
        // An export's clock starts at its session (0): a start before it is a damaged row.
        if start < 0 {
            before_session += 1;
        }
        let ts = start.saturating_add(offset).clamp(MIN_TS_NS, MAX_TS_NS);
        let dur = end.saturating_sub(start);
        if dur < 0 {
            negative += 1;
        }
        (ts, ts.saturating_add(dur.clamp(0, MAX_DUR_NS)))
    };
    let mut pending: Vec<Vec<Pending>> = keys.iter().map(|_| Vec::new()).collect();
    let mut stream_device: FxHashMap<(i64, i64), i64> = FxHashMap::default();
    let mut launched: FxHashMap<(i64, i64), usize> = FxHashMap::default();
    let mut nccl_kernels: Vec<(usize, usize, i64, i64)> = Vec::new();
    for a in &rows.activity {
        let Some(&r) = index.get(&(a.global_pid, a.device)) else { continue };
        stream_device.insert((a.global_pid, a.stream), a.device);
        if a.correlation >= 0 {
            launched.insert((a.global_pid, a.correlation), r);
        }
        let (ts, end) = time(a.start, a.end);
        let name = if a.kind == EventKind::Kernel { NameRef::String(a.name) } else { NameRef::Label(a.name) };
        let Some(list) = pending.get_mut(r) else { continue };
        if a.kind == EventKind::Kernel
            && rows.strings.get(&a.name).is_some_and(|n| crate::analysis::is_nccl_kernel(n))
            && a.correlation >= 0
        {
            nccl_kernels.push((r, list.len(), a.global_pid, a.correlation));
        }
        list.push(Pending {
            ts,
            end,
            kind: a.kind,
            name,
            pid: a.device,
            tid: a.stream,
            correlation: a.correlation,
            external_id: -1,
            extra: a.bytes.map_or(Extra::None, Extra::Bytes),
        });
    }
    let mut launches: FxHashMap<(i64, i64), (i64, i64)> = FxHashMap::default();
    for c in &rows.calls {
        let process = process_of(c.global_tid);
        let only = launched.get(&(process, c.correlation)).copied();
        let targets: &[usize] = match (&only, by_process.get(&process)) {
            (Some(r), _) => std::slice::from_ref(r),
            (None, Some(all)) => all,
            (None, None) => continue,
        };
        if only.is_some() && !nccl_kernels.is_empty() {
            launches.insert((process, c.correlation), (c.global_tid, c.start));
        }
        let (ts, end) = time(c.start, c.end);
        for &r in targets {
            if let Some(list) = pending.get_mut(r) {
                list.push(Pending {
                    ts,
                    end,
                    kind: EventKind::Runtime,
                    name: NameRef::Call(c.name),
                    pid: os_pid(c.global_tid),
                    tid: os_tid(c.global_tid),
                    correlation: c.correlation,
                    external_id: -1,
                    extra: Extra::None,
                });
            }
        }
    }
    let mut nccl_ranges: FxHashMap<i64, Vec<(i64, i64, Nccl)>> = FxHashMap::default();
    for g in &rows.ranges {
        let Some(targets) = by_process.get(&process_of(g.global_tid)) else { continue };
        if let Some(n) = g.nccl {
            nccl_ranges.entry(g.global_tid).or_default().push((g.start, g.end, n));
        }
        let (ts, end) = time(g.start, g.end);
        for &r in targets {
            let extra = match &g.sizes {
                Some(s) if opts.shapes => Extra::Shapes(s.clone()),
                _ => Extra::None,
            };
            if let Some(list) = pending.get_mut(r) {
                list.push(Pending {
                    ts,
                    end,
                    kind: g.kind,
                    name: NameRef::Range(g.name),
                    pid: os_pid(g.global_tid),
                    tid: os_tid(g.global_tid),
                    correlation: -1,
                    external_id: if g.kind == EventKind::CpuOp { g.op_id.unwrap_or(-1) } else { -1 },
                    extra,
                });
            }
        }
    }
    for s in &rows.syncs {
        let one = stream_device.get(&(s.global_pid, s.stream)).and_then(|d| index.get(&(s.global_pid, *d))).copied();
        let targets: &[usize] = match (&one, by_process.get(&s.global_pid)) {
            (Some(r), _) => std::slice::from_ref(r),
            (None, Some(all)) => all,
            (None, None) => continue,
        };
        let wait = match (s.sync_type, s.event_sync) {
            (1 | 2, Some(id)) => rows.records.get(&(s.global_pid, id)),
            _ => None,
        };
        let (ts, end) = time(s.start, s.end);
        for &r in targets {
            let device = keys.get(r).map_or(-1, |k| k.device);
            if let Some(list) = pending.get_mut(r) {
                list.push(Pending {
                    ts,
                    end,
                    kind: EventKind::GpuSync,
                    name: NameRef::Fixed(sync_name(s.sync_type)),
                    pid: device,
                    tid: s.stream,
                    correlation: s.correlation,
                    external_id: -1,
                    extra: wait
                        .map_or(Extra::None, |w| Extra::Wait(SyncWait { wait_on_stream: w.stream, record_correlation: w.correlation })),
                });
            }
        }
    }
    for list in nccl_ranges.values_mut() {
        list.sort_unstable_by_key(|&(s, e, _)| (s, std::cmp::Reverse(e)));
    }
    for (r, k, process, correlation) in nccl_kernels {
        let Some(&(tid, at)) = launches.get(&(process, correlation)) else { continue };
        let Some(c) = nccl_ranges.get(&tid).and_then(|list| group_of(list, at)) else { continue };
        if let Some(p) = pending.get_mut(r).and_then(|l| l.get_mut(k)) {
            p.extra = Extra::Collective(c);
        }
    }
    let mut warnings = Vec::new();
    if rows.unusable > 0 {
        warnings.push(format!("{} row(s) without a start, end or device were skipped", rows.unusable));
    }
    if rows.negative_bytes > 0 {
        warnings.push(format!(
            "{} memcpy/memset row(s) record a negative byte count (a damaged export): kept without bytes, so no bandwidth is told for them",
            rows.negative_bytes
        ));
    }
    if rows.unclosed_ranges > 0 {
        warnings.push(format!("{} NVTX range(s) were never closed and were skipped", rows.unclosed_ranges));
    }
    if before_session > 0 {
        warnings.push(format!(
            "{before_session} event(s) start before the capture's session began (a negative timestamp): kept where they say, which stretches the span"
        ));
    }
    if negative > 0 {
        warnings.push(format!("{negative} event(s) ended before they started; they are kept with duration 0"));
    }
    // Rows that name no GPU (`keys`): left out, and said.
    let no_device = rows.activity.iter().filter(|a| !names_a_gpu(a.device)).count();
    if no_device > 0 {
        warnings.push(format!("{no_device} GPU activity row(s) of a negative deviceId name no GPU and were left out"));
    }
    // The file's bytes shared among its ranks, so that sums over ranks are the file's size.
    let n = keys.len().max(1) as u64;
    keys.iter()
        .zip(pending)
        .enumerate()
        .map(|(i, (key, list))| {
            // Kernels whose name is not in the string table (a damaged or hand-edited export): kept,
            // but nothing tells communication from compute among them; said on their rank, not left
            // to read as compute.
            let unnamed = list.iter().filter(|p| matches!(p.name, NameRef::String(id) if !rows.strings.contains_key(&id))).count();
            // GPU activity without a correlationId where the export has the runtime calls that
            // launch it: tied to no launch, so no host thread waits on it or is waited on (silent).
            let gpu_activity = |k: EventKind| matches!(k, EventKind::Kernel | EventKind::Memcpy | EventKind::Memset);
            let unlinked = if rows.calls.is_empty() { 0 } else { list.iter().filter(|p| gpu_activity(p.kind) && p.correlation < 0).count() };
            let no_kernels = !list.iter().any(|p| p.kind == EventKind::Kernel) && list.iter().any(|p| gpu_activity(p.kind));
            let mut t = build(key, list, &rows, path, opts);
            if unlinked > 0 {
                t.warnings.push(format!(
                    "{unlinked} GPU activity row(s) have no correlationId: no runtime call is known to have launched them, so the replay ties them to no host thread"
                ));
            }
            // GPU activity, but not one kernel on the rank: an export whose kernel table was
            // emptied (99 % idle, said nowhere, where no runtime table showed the launches lost), a
            // capture without kernels, or a GPU only initialized; its figures read as an idle GPU.
            if no_kernels {
                t.warnings.push(
                    "no kernel ran on this rank's GPU in the export, only memory copies and sets: its GPU time reads as idle (a kernel table emptied or not recorded reads the same; record with `nsys profile -t cuda`)"
                        .to_string(),
                );
            }
            if unnamed > 0 {
                t.warnings.push(format!(
                    "{unnamed} kernel(s) name a string the export's StringIds table does not hold: kept without a name, so no class (communication, GEMM, …) can be told for them; the export is damaged or incomplete"
                ));
            }
            t.json_bytes = file_bytes / n + if i == 0 { file_bytes % n } else { 0 };
            t.base_time_ns = rows.utc_offset_ns;
            t.skipped_events = rows.unusable + rows.unclosed_ranges;
            t.warnings.extend(warnings.iter().cloned());
            // Last, after every warning of the export's own (its rank's and the file's): a dataset
            // keeps the trace as recorded. An export's own GPU is kept, and the rule says
            // `--device` was not applied.
            if let Some(d) = &opts.device {
                crate::device::name_unrecorded_gpu(&mut t, d);
            }
            t
        })
        .collect()
}

/// The collective of the NCCL call around `at`: an operation's own range, or
/// the one collective of the `ncclGroupStart … ncclGroupEnd` group whose end launched it;
/// where those are sends and receives (or no NCCL call is recorded), the collective of the
/// innermost PyTorch range around it (`nccl:all_to_all`): an all-to-all runs as sends and
/// receives, as the Kineto reader's rule has it.
fn group_of(ranges: &[(i64, i64, Nccl)], at: i64) -> Option<Collective> {
    let around = |&(s, e, _): &(i64, i64, Nccl)| s <= at && at <= e;
    let torch = ranges.iter().rev().filter(|r| around(r)).find_map(|&(_, _, n)| match n {
        Nccl::Torch(c) => Some(c),
        _ => None,
    });
    match (nccl_calls_of(ranges, at), torch) {
        (Some(Collective::SendRecv) | None, Some(t)) => Some(t),
        (calls, _) => calls,
    }
}

/// [`group_of`] from the NCCL calls' own ranges alone.
fn nccl_calls_of(ranges: &[(i64, i64, Nccl)], at: i64) -> Option<Collective> {
    let k = ranges.iter().rposition(|&(s, e, n)| s <= at && at <= e && !matches!(n, Nccl::Torch(_)))?;
    match ranges.get(k)?.2 {
        Nccl::Op(c) => Some(c),
        Nccl::GroupStart | Nccl::Torch(_) => None,
        Nccl::GroupEnd => {
            let mut depth = 1;
            let mut ops = Vec::new();
            for &(_, _, n) in ranges.get(..k)?.iter().rev() {
                match n {
                    Nccl::GroupEnd => depth += 1,
                    Nccl::GroupStart => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    Nccl::Op(c) => ops.push(c),
                    Nccl::Torch(_) => {}
                }
            }
            nvtx::group_collective(ops)
        }
    }
}

fn build(key: &ExportRank, mut list: Vec<Pending>, rows: &Rows, path: &std::path::Path, opts: &ReadOptions) -> RankTrace {
    list.sort_by_key(|p| p.ts);
    let mut t = RankTrace::new(path.to_path_buf());
    t.export_rank = Some(*key);
    t.events.reserve(list.len());
    let mut ids: FxHashMap<NameRef, NameId> = FxHashMap::default();
    for p in list {
        let name = *ids.entry(p.name).or_insert_with(|| {
            let s: &str = match p.name {
                NameRef::String(id) => rows.strings.get(&id).map_or("", String::as_str),
                NameRef::Call(id) => call_name(rows.strings.get(&id).map_or("", String::as_str)),
                NameRef::Label(i) => usize::try_from(i).ok().and_then(|i| rows.labels.get(i)).map_or("", String::as_str),
                NameRef::Range(i) => rows.range_names.get(i as usize).map_or("", String::as_str),
                NameRef::Fixed(s) => s,
            };
            t.names.intern(s)
        });
        let row = t.events.len() as u32;
        t.events.push(Row {
            kind: p.kind,
            name,
            ts_ns: p.ts,
            dur_ns: p.end - p.ts,
            pid: p.pid,
            tid: p.tid,
            correlation: p.correlation,
            external_id: p.external_id,
        });
        match p.extra {
            Extra::None => {}
            Extra::Bytes(b) => t.copy_bytes.push((row, b)),
            Extra::Shapes(dims) => t.op_shapes.push(OpShapes {
                event: row,
                input_dims: dims.into_string(),
                input_types: String::new(),
                concrete_inputs: String::new(),
            }),
            Extra::Wait(w) => t.sync_waits.push((row, w)),
            Extra::Collective(c) => {
                t.collective_args.push((row, CollectiveArgs { collective_name: Some(c.as_str().to_string()), ..Default::default() }))
            }
        }
    }
    super::dtype::fill_input_types(&mut t);
    let ops = t.events.kind.iter().zip(&t.events.external_id).filter(|(k, id)| **k == EventKind::CpuOp && **id >= 0).count();
    if ops > 0 && t.op_shapes.is_empty() && opts.shapes {
        t.warnings.push(format!(
            "the {ops} PyTorch op ranges (emit_nvtx) carry no input shapes, so their work is unknown to calibration: \
             record with `nsys profile --pytorch=autograd-shapes-nvtx`"
        ));
    }
    match rows.gpus.of(key.pid, key.device) {
        Some(d) => t.devices.push(d),
        None => {
            // As recorded (a dataset keeps it so); `--device` names it below.
            t.devices.push(DeviceProperties { id: Some(key.device), ..Default::default() });
            let kernels = t.events.kind.iter().zip(&t.events.name).filter(|(k, _)| **k == EventKind::Kernel).map(|(_, &n)| n);
            let mut seen: Vec<NameId> = kernels.collect();
            seen.sort_unstable();
            seen.dedup();
            let arch = kernel_arch(seen.iter().map(|&n| t.names.get(n)));
            t.warnings.push(match arch {
                Some(a) => format!(
                    "{UNRECORDED_GPU} (no TARGET_INFO_GPU table); its kernel names show code for sm_{a} \
                     or newer; give the GPU with --device ID (an id of `tracecast hw list`)"
                ),
                None => format!("{UNRECORDED_GPU} (no TARGET_INFO_GPU table); give it with --device ID (an id of `tracecast hw list`)"),
            });
        }
    }
    t.warn_of_implausible_gpu_activity();
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_ids_split_into_process_and_thread() {
        // 281476838981743: process 111, thread 111 (the main thread).
        assert_eq!(os_pid(281_476_838_981_743), 111);
        assert_eq!(os_tid(281_476_838_981_743), 111);
        assert_eq!(process_of(281_476_838_981_743), 281_476_838_981_632);
        assert_eq!(os_pid(281_476_838_981_632), 111);
    }

    #[test]
    fn call_names_lose_their_api_version() {
        assert_eq!(call_name("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
        assert_eq!(call_name("cudaStreamGetCaptureInfo_v2_v11030"), "cudaStreamGetCaptureInfo_v2");
        assert_eq!(call_name("cuMemcpyDtoH_v2"), "cuMemcpyDtoH_v2");
        assert_eq!(call_name("cuLaunchKernelEx"), "cuLaunchKernelEx");
        assert_eq!(call_name("_v1234"), "_v1234");
    }

    #[test]
    fn kernel_names_give_the_architecture() {
        assert_eq!(kernel_arch(["nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN", "sm80_xmma_gemm"].into_iter()), Some(90));
        assert_eq!(kernel_arch(["sm80_xmma_gemm_f32f32", "void at::native::elementwise_kernel<4>"].into_iter()), Some(80));
        assert_eq!(kernel_arch(["void at::native::reduce_kernel<512, 1>", "smem_kernel"].into_iter()), None);
    }

    #[test]
    fn a_group_end_names_the_groups_collective() {
        use Nccl::*;
        let send = Op(Collective::SendRecv);
        let list = [(0, 1, GroupStart), (2, 3, send), (4, 5, send), (6, 20, GroupEnd), (30, 40, Op(Collective::AllReduce))];
        assert_eq!(group_of(&list, 10), Some(Collective::SendRecv));
        assert_eq!(group_of(&list, 35), Some(Collective::AllReduce));
        assert_eq!(group_of(&list, 25), None);
        let mixed = [(0, 1, GroupStart), (2, 3, send), (4, 5, Op(Collective::AllReduce)), (6, 20, GroupEnd)];
        assert_eq!(group_of(&mixed, 10), None);
        // Nested groups: the outer end launches everything inside.
        let nested = [(0, 1, GroupStart), (2, 3, GroupStart), (4, 5, send), (6, 7, GroupEnd), (8, 9, send), (10, 20, GroupEnd)];
        assert_eq!(group_of(&nested, 15), Some(Collective::SendRecv));
        // PyTorch's all-to-all around a group of sends and receives (the real export's nesting:
        // `c10d::alltoall_base_` ⊃ `nccl:all_to_all` ⊃ the group) names it; around an
        // all-reduce's own call it changes nothing; alone, it names the kernel.
        let a2a = Torch(Collective::AllToAll);
        let torch = [(0, 100, a2a), (1, 90, a2a), (2, 3, GroupStart), (4, 5, send), (6, 7, send), (8, 20, GroupEnd)];
        assert_eq!(group_of(&torch, 10), Some(Collective::AllToAll));
        let around_all_reduce = [(0, 100, a2a), (30, 40, Op(Collective::AllReduce))];
        assert_eq!(group_of(&around_all_reduce, 35), Some(Collective::AllReduce));
        assert_eq!(group_of(&around_all_reduce, 50), Some(Collective::AllToAll));
        // Only around the launch: a range that ended before it names nothing.
        let before = [(0, 5, a2a), (6, 7, GroupStart), (8, 9, send), (10, 20, GroupEnd)];
        assert_eq!(group_of(&before, 15), Some(Collective::SendRecv));
    }
}
