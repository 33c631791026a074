//! The execution graph of a measured job: host threads, launches, GPU streams,
//! synchronising calls, cross-stream waits and cross-rank collectives, as
//! tasks and edges for the simulator (DESIGN §5).
//!
//! - Host: each thread's runtime/driver calls in order; the measured gap
//!   between consecutive calls (CPU work) is kept.
//! - Launch: a GPU activity starts no earlier than its launching call's start
//!   plus the launch latency (measured when the stream was free, else the
//!   rank's typical latency).
//! - Stream order: an activity starts after the previous one on its stream ends.
//! - Cross-stream: from the trace's `cuda_sync` rows when it has them (a
//!   `Stream Wait Event` names the `cudaEventRecord` it waits on); otherwise
//!   inferred: an activity that started later than both its launch and its
//!   stream allowed, right when an activity on another stream ended, waits for it.
//! - Synchronising calls (`*Synchronize`, blocking `cudaMemcpy`) end after the
//!   GPU work they waited for, plus their measured tail.
//! - Collectives matched across ranks end on every rank at the latest arrival
//!   plus the transfer time (the shortest measured duration), on clocks aligned
//!   so matched collectives end together.

use rustc_hash::FxHashMap;
use tracecast_ingest::analysis::{ActivityClass, ClockAlignment, CollectiveSample};
use tracecast_ingest::link::{Links, NONE};
use tracecast_ingest::{EventKind, Job};

use crate::sim::{At, Graph, TaskId};

/// What a task stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    /// A runtime or driver call on a host thread.
    Host,
    /// A GPU activity of the given class.
    Gpu(ActivityClass),
}

/// One task: which rank and trace row it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskOrigin {
    /// Index of the rank in the job.
    pub rank: usize,
    /// Row in that rank's trace.
    pub row: u32,
    /// Kind.
    pub kind: TaskKind,
}

/// A graph with the measured schedule it was built from.
#[derive(Debug, Clone)]
pub struct ExecGraph {
    /// Tasks and edges.
    pub graph: Graph,
    /// Where each task came from.
    pub origin: Vec<TaskOrigin>,
    /// Measured start of each task on the aligned clock, ns.
    pub measured_start_ns: Vec<i64>,
    /// Measured end, ns.
    pub measured_end_ns: Vec<i64>,
    /// The clock offset applied to each rank, ns.
    pub offsets_ns: Vec<i64>,
    /// Indices (into `graph.edges`) of the collective join edges, whose lag is the transfer time.
    pub join_edges: Vec<usize>,
}

fn is_sync_call(name: &str) -> bool {
    name.contains("Synchronize") || name == "cudaMemcpy" || name == "hipMemcpy" || name == "cuMemcpy"
}

/// Residual above which matched collectives are not joined across ranks: the
/// instances do not end together, so the matching cannot be trusted.
const JOIN_RESIDUAL_NS: i64 = 100_000;

/// Builds the graph of `job`. `classes[r]` are the activity classes of rank
/// `r`'s rows, `links[r]` its launch links, `collectives` the job's matched
/// communication kernels and `alignment` its clock alignment.
pub fn build(
    job: &Job,
    classes: &[Vec<Option<ActivityClass>>],
    links: &[Links],
    collectives: &[CollectiveSample],
    alignment: Option<&ClockAlignment>,
) -> ExecGraph {
    let mut g = ExecGraph {
        graph: Graph::default(),
        origin: Vec::new(),
        measured_start_ns: Vec::new(),
        measured_end_ns: Vec::new(),
        offsets_ns: Vec::new(),
        join_edges: Vec::new(),
    };
    let join = alignment.is_some_and(|a| (a.residual_us * 1000.0) as i64 <= JOIN_RESIDUAL_NS);
    // (rank, row) -> task
    let mut task_of: Vec<FxHashMap<u32, TaskId>> = Vec::with_capacity(job.ranks.len());
    for (r, rank) in job.ranks.iter().enumerate() {
        let t = &rank.trace;
        let ev = &t.events;
        let off = alignment.and_then(|a| a.offsets_us.get(r)).map_or(0, |o| (o * 1000.0).round() as i64);
        g.offsets_ns.push(off);
        let mut tasks: FxHashMap<u32, TaskId> = FxHashMap::default();
        let add = |g: &mut ExecGraph, tasks: &mut FxHashMap<u32, TaskId>, row: usize, kind: TaskKind, dur: i64, release: i64| -> TaskId {
            let id = g.graph.task(dur, release);
            g.origin.push(TaskOrigin { rank: r, row: row as u32, kind });
            g.measured_start_ns.push(ev.ts_ns[row] + off);
            g.measured_end_ns.push(ev.end_ns(row) + off);
            tasks.insert(row as u32, id);
            id
        };
        let classes = &classes[r];
        let links = &links[r];

        // GPU activities, per stream in start order.
        let mut streams: FxHashMap<(i64, i64), Vec<usize>> = FxHashMap::default();
        for i in t.gpu_activity() {
            streams.entry((ev.pid[i], ev.tid[i])).or_default().push(i);
        }
        let mut streams: Vec<Vec<usize>> = streams.into_values().collect();
        streams.sort_by_key(|rows| rows.first().copied());
        for rows in &mut streams {
            rows.sort_by_key(|&i| (ev.ts_ns[i], i));
        }
        // The rank's typical launch latency: a low percentile of start − launch
        // over activities their stream did not hold back.
        let mut lat: Vec<i64> = Vec::new();
        for rows in &streams {
            for (k, &i) in rows.iter().enumerate() {
                let free = k.checked_sub(1).is_none_or(|p| ev.ts_ns[i] > ev.end_ns(rows[p]) + 1_000);
                if let (true, Some(l)) = (free, links.launch_ns(t, i)) {
                    lat.push(ev.ts_ns[i] - l);
                }
            }
        }
        lat.retain(|l| *l >= 0);
        lat.sort_unstable();
        let typical = lat.get(lat.len() / 10).copied().unwrap_or(5_000);

        // Host calls first (launch edges need them), per thread in order.
        let mut threads: FxHashMap<(i64, i64), Vec<usize>> = FxHashMap::default();
        for i in 0..ev.len() {
            if ev.kind[i] == EventKind::Runtime {
                threads.entry((ev.pid[i], ev.tid[i])).or_default().push(i);
            }
        }
        let mut threads: Vec<Vec<usize>> = threads.into_values().collect();
        threads.sort_by_key(|rows| rows.first().copied());
        let mut syncs: Vec<(usize, TaskId)> = Vec::new();
        for rows in &mut threads {
            rows.sort_by_key(|&i| (ev.ts_ns[i], i));
            let mut prev: Option<usize> = None;
            for &i in rows.iter() {
                let id = add(&mut g, &mut tasks, i, TaskKind::Host, ev.dur_ns[i], ev.ts_ns[i] + off);
                if let Some(p) = prev {
                    let pid = tasks[&(p as u32)];
                    if ev.ts_ns[i] >= ev.end_ns(p) {
                        g.graph.edge(pid, At::End, id, At::Start, ev.ts_ns[i] - ev.end_ns(p));
                    } else {
                        g.graph.edge(pid, At::Start, id, At::Start, ev.ts_ns[i] - ev.ts_ns[p]);
                    }
                    // Only the first call of a thread is anchored to the clock.
                    g.graph.release_ns[id as usize] = i64::MIN;
                }
                if is_sync_call(t.name(i)) {
                    syncs.push((i, id));
                }
                prev = Some(i);
            }
        }
        // GPU activities.
        let mut ends_by_time: Vec<(i64, usize, usize)> = Vec::new(); // (end, stream index, row)
        for (si, rows) in streams.iter().enumerate() {
            for &i in rows {
                ends_by_time.push((ev.end_ns(i), si, i));
            }
        }
        ends_by_time.sort_unstable();
        // All GPU tasks first: cross-stream edges may point at any stream.
        for rows in &streams {
            for &i in rows {
                let class = classes.get(i).copied().flatten().unwrap_or(ActivityClass::Compute);
                let call = links.launch.get(i).copied().unwrap_or(NONE);
                let anchored = call == NONE || !tasks.contains_key(&call);
                let release = if anchored { ev.ts_ns[i] + off } else { i64::MIN };
                add(&mut g, &mut tasks, i, TaskKind::Gpu(class), ev.dur_ns[i], release);
            }
        }
        for (si, rows) in streams.iter().enumerate() {
            let mut prev: Option<usize> = None;
            for &i in rows {
                let id = tasks[&(i as u32)];
                let call = links.launch.get(i).copied().unwrap_or(NONE);
                let anchored = call == NONE || !tasks.contains_key(&call) || g.origin[tasks[&call] as usize].kind != TaskKind::Host;
                let blocked = prev.is_some_and(|p| ev.ts_ns[i] <= ev.end_ns(p) + 1_000);
                if let Some(p) = prev {
                    g.graph.edge(tasks[&(p as u32)], At::End, id, At::Start, 0);
                }
                if !anchored {
                    let call_id = tasks[&call];
                    let measured = ev.ts_ns[i] - ev.ts_ns[call as usize];
                    let mut latency = if blocked { measured.min(typical) } else { measured };
                    if !blocked && measured > typical + 20_000 {
                        // Started late for no reason on its own stream: find the
                        // activity on another stream that ended just before.
                        let k = ends_by_time.partition_point(|e| e.0 <= ev.ts_ns[i]);
                        if let Some(&(end, _, other)) = ends_by_time[..k].iter().rev().find(|e| e.1 != si)
                            && ev.ts_ns[i] - end <= 5_000
                            && let Some(&oid) = tasks.get(&(other as u32))
                        {
                            g.graph.edge(oid, At::End, id, At::Start, ev.ts_ns[i] - end);
                            latency = typical.min(measured);
                        }
                    }
                    g.graph.edge(call_id, At::Start, id, At::Start, latency.max(0));
                }
                prev = Some(i);
            }
        }
        // Synchronising calls end after the GPU work they waited for.
        for (i, id) in syncs {
            let (start, end) = (ev.ts_ns[i], ev.end_ns(i));
            let mut awaited_end = i64::MIN;
            for rows in &streams {
                // The last activity launched on this stream before the call.
                let last = rows.iter().rev().find(|&&k| links.launch_ns(t, k).is_some_and(|l| l <= start));
                if let Some(&k) = last
                    && ev.end_ns(k) <= end + 1_000
                {
                    let tail = (end - ev.end_ns(k)).max(0);
                    g.graph.edge(tasks[&(k as u32)], At::End, id, At::End, tail);
                    awaited_end = awaited_end.max(ev.end_ns(k));
                }
            }
            if awaited_end > start {
                g.graph.dur_ns[id as usize] = (end - awaited_end).max(0);
            }
        }
        // What `cuda_sync` rows say they waited on, when the trace records it:
        // the last activity launched on the recorded stream before the
        // `cudaEventRecord` call. A `Stream Wait Event` holds the next activity
        // launched on the waiting stream; an `Event Sync` holds the host call.
        if !t.sync_waits.is_empty() {
            let mut call_of: FxHashMap<i64, usize> = FxHashMap::default();
            for i in 0..ev.len() {
                if ev.kind[i] == EventKind::Runtime && ev.correlation[i] >= 0 {
                    call_of.insert(ev.correlation[i], i);
                }
            }
            let on_stream = |stream: i64| streams.iter().find(|rows| rows.first().is_some_and(|&k| ev.tid[k] == stream));
            for &(row, wait) in &t.sync_waits {
                let row = row as usize;
                let Some(&record) = call_of.get(&wait.record_correlation) else { continue };
                let recorded_at = ev.ts_ns[record];
                let Some(&awaited) = on_stream(wait.wait_on_stream)
                    .and_then(|rows| rows.iter().rev().find(|&&k| links.launch_ns(t, k).is_some_and(|l| l <= recorded_at)))
                else {
                    continue;
                };
                let Some(&awaited_id) = tasks.get(&(awaited as u32)) else { continue };
                let waiter = call_of.get(&ev.correlation[row]).copied();
                if t.name(row) == "Stream Wait Event" {
                    let after = waiter.map_or(ev.ts_ns[row], |c| ev.ts_ns[c]);
                    let next =
                        on_stream(ev.tid[row]).and_then(|rows| rows.iter().find(|&&k| links.launch_ns(t, k).is_some_and(|l| l >= after)));
                    if let Some(&next) = next
                        && ev.ts_ns[next] >= ev.end_ns(awaited)
                        && let Some(&next_id) = tasks.get(&(next as u32))
                    {
                        g.graph.edge(awaited_id, At::End, next_id, At::Start, 0);
                    }
                } else if let Some(c) = waiter
                    && ev.end_ns(c) >= ev.end_ns(awaited)
                    && let Some(&call_id) = tasks.get(&(c as u32))
                {
                    g.graph.edge(awaited_id, At::End, call_id, At::End, ev.end_ns(c) - ev.end_ns(awaited));
                }
            }
        }
        task_of.push(tasks);
    }
    // Collectives: every member ends at the latest arrival plus the transfer.
    if join {
        let mut members: FxHashMap<u32, Vec<(TaskId, i64)>> = FxHashMap::default();
        for c in collectives {
            let (Some(instance), Some(transfer)) = (c.instance, c.transfer_us) else { continue };
            let Some(r) = job.ranks.iter().position(|x| x.rank == c.rank) else { continue };
            if let Some(&id) = task_of[r].get(&c.row) {
                members.entry(instance).or_default().push((id, (transfer * 1000.0).round() as i64));
            }
        }
        let mut instances: Vec<_> = members.into_iter().collect();
        instances.sort_by_key(|(k, _)| *k);
        for (_, list) in instances {
            let transfer = list.iter().map(|m| m.1).min().unwrap_or(0);
            for &(m, _) in &list {
                g.graph.dur_ns[m as usize] = transfer;
                for &(x, _) in &list {
                    g.join_edges.push(g.graph.edges.len());
                    g.graph.edge(x, At::Start, m, At::End, transfer);
                }
            }
        }
    }
    g
}
