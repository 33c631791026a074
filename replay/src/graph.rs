//! The execution graph of a measured job: host threads, launches, GPU streams,
//! synchronising calls, cross-stream waits and cross-rank collectives, as
//! tasks and edges for the simulator (DESIGN §5).
//!
//! Edges are *causes*, never measured start times, so a what-if moves every
//! operation that depends on what it changed:
//! - Host: each thread's runtime/driver calls in order; the measured gap
//!   between consecutive calls (CPU work) is kept. The host blocks only on
//!   synchronising calls (`*Synchronize`, blocking copies such as `cudaMemcpy`
//!   or `hipMemcpyWithStream`, `cuda_sync` event syncs): their end follows the
//!   GPU work they waited for, plus their measured tail. A loop of
//!   `cudaEventQuery`/`hipStreamQuery`-style calls that ends right after GPU
//!   work launched before it ended polled for that work: it ends when that
//!   work ends, and its queries after the first take no time of their own.
//! - A GPU activity starts at the latest of: its launch call plus the launch
//!   latency, the previous activity on its stream plus the queue gap, the
//!   events it waits on, and (collectives) its peers. The queue gap and the
//!   launch latency are measured per trace ([`Timings`]): the median gap
//!   between back-to-back queued activities and the median launch-to-start
//!   latency of activities launched onto an idle stream.
//! - Which of those causes explains each measured start decides which edge
//!   carries the measured lag (so identity replay is exact); the others get the
//!   trace's typical lag. A start that none explains within the trace's
//!   tolerances first looks for a cross-stream wait (`cuda_sync` rows when the
//!   trace records them, else the activity on another stream that ended just
//!   before); failing that it gets an explicit *unexplained wait* task after
//!   its binding cause, which the replay reports ([`StartRules`]).
//! - Collectives matched across ranks end on every rank at the latest arrival
//!   plus the transfer time (the shortest measured duration), on clocks aligned
//!   so matched collectives end together.

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use tracecast_ingest::analysis::{ActivityClass, ClockAlignment, JobCollectives};
use tracecast_ingest::link::{Links, NONE};
use tracecast_ingest::{EventKind, RankTrace};

use crate::sim::{At, Graph, TaskId};

/// What a task stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    /// A runtime or driver call on a host thread.
    Host,
    /// A GPU activity of the given class.
    Gpu(ActivityClass),
    /// A delay before a GPU activity that nothing in the trace explains
    /// (its origin row is that activity's).
    Wait,
    /// The arrival of every member of one collective instance (zero
    /// duration; its origin is the first member's): members' starts lead into
    /// it and each member's end follows it by the transfer, so an instance of
    /// n ranks costs 2n edges, not n².
    Join,
}

/// One task: which rank and trace row it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskOrigin {
    /// Index of the rank in the job.
    pub rank: u32,
    /// Row in that rank's trace.
    pub row: u32,
    /// Kind.
    pub kind: TaskKind,
}

/// The per-trace timings the graph's rules use, measured on the trace, µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Timings {
    /// Median gap between back-to-back activities on a stream whose launch
    /// came well before the previous one ended (the device's queue gap).
    pub queue_gap_us: f64,
    /// Gaps up to this still count as "queued behind the previous activity"
    /// (99th percentile of the queued gaps, within 2–20 µs: 2–15 µs on the
    /// corpus's NVIDIA traces).
    pub queue_tolerance_us: f64,
    /// Queued gaps the two numbers above were measured on.
    pub queue_samples: usize,
    /// Median launch-to-start latency of activities launched onto an idle stream.
    pub launch_latency_us: f64,
    /// Latencies up to this still count as "started by its launch" (90th
    /// percentile, at most twice the median plus 5 µs).
    pub launch_tolerance_us: f64,
    /// Launches the two numbers above were measured on (0: 5 µs assumed).
    pub launch_samples: usize,
}

/// Which cause explained the measured start of each GPU activity of a rank.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct StartRules {
    /// Queued behind the previous activity on its stream.
    pub stream: usize,
    /// Started by its launch call.
    pub launch: usize,
    /// Waited for another stream, as the trace's `cuda_sync` rows record.
    pub cross_stream_recorded: usize,
    /// Waited for another stream, inferred (started right after an activity
    /// on another stream ended, later than its launch and stream allowed).
    pub cross_stream_inferred: usize,
    /// Started later than any cause explains: an unexplained-wait task holds it.
    pub unexplained: usize,
    /// Total time of those unexplained waits, µs.
    pub unexplained_us: f64,
    /// Neither launch call nor predecessor: held at its measured start.
    pub anchored: usize,
}

/// The rules and timings of one rank's graph.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct RankGraph {
    /// Measured timings.
    pub timings: Timings,
    /// What explained each GPU start.
    pub starts: StartRules,
    /// Host calls that block on the GPU (syncs, blocking copies).
    pub host_syncs: usize,
    /// Loops of event/stream queries that polled until GPU work ended: each
    /// ends when that work ends (plus its measured tail), not after its
    /// measured duration.
    pub host_polls: usize,
    /// Host gaps without runtime calls that ended right after a collective the
    /// thread had launched ended: the host waited on memory the GPU writes
    /// (DeepEP's receive counters, flags), so it resumes when the collective ends.
    pub host_comm_waits: usize,
    /// Launches queued but not started when the launch queue was full (the
    /// most the trace shows; 0 when it never filled).
    pub launch_queue_depth: usize,
    /// Launch calls that blocked on a full launch queue: each returns when
    /// the GPU starts the activity that frees a slot.
    pub queue_full_launches: usize,
    /// Host calls that resumed an idle thread after a call on another thread.
    pub thread_handoffs: usize,
}

/// A graph with the measured schedule it was built from.
#[derive(Debug, Clone, Default)]
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
    /// Per rank: the rules that built its graph.
    pub ranks: Vec<RankGraph>,
}

impl ExecGraph {
    /// Hands back the spare capacity of every list.
    fn shrink_to_fit(&mut self) {
        self.graph.dur_ns.shrink_to_fit();
        self.graph.release_ns.shrink_to_fit();
        self.graph.edges.shrink_to_fit();
        self.origin.shrink_to_fit();
        self.measured_start_ns.shrink_to_fit();
        self.measured_end_ns.shrink_to_fit();
    }

    /// Room for `tasks` more tasks and `edges` more edges.
    fn reserve(&mut self, tasks: usize, edges: usize) {
        self.graph.dur_ns.reserve_exact(tasks);
        self.graph.release_ns.reserve_exact(tasks);
        self.graph.edges.reserve_exact(edges);
        self.origin.reserve_exact(tasks);
        self.measured_start_ns.reserve_exact(tasks);
        self.measured_end_ns.reserve_exact(tasks);
    }
}

/// Host calls that block until GPU work is done: syncs, and copies without
/// `Async` (`cudaMemcpy`, `hipMemcpyWithStream`, `cuMemcpyDtoH_v2`, …).
pub fn is_blocking_call(name: &str) -> bool {
    name.contains("Synchronize") || (name.contains("Memcpy") && !name.contains("Async"))
}

/// A copy call longer than this that returns after its copy ended waited
/// for it (launch calls take a few µs; the corpus's V100 DLRM trace has
/// `cudaMemcpyAsync` calls of up to 52 ms that end with their device-to-host copy).
const BLOCKING_COPY_NS: i64 = 20_000;

/// How far past a synchronising call's return the work it waited for may
/// appear to end: GPU timestamps converted to the host clock lead or lag it
/// by a few µs (an Nsight Systems export of two H100 processes: the awaited
/// copy ends 4–7 µs after `cudaStreamSynchronize` returned in one process,
/// 8–10 µs before in the other; Kineto's traces within 1 µs). Whether an
/// "async" copy blocked at all is still told at 1 µs; once it did, it gets
/// this slack too.
const SYNC_CLOCK_SLACK_NS: i64 = 20_000;

/// How far past an "async" copy call's return its copy may end for the call to
/// count as having waited for it (pageable memory made it synchronous): 1 µs.
const BLOCKED_COPY_END_NS: i64 = 1_000;

/// Runtime calls that ask whether GPU work is done without blocking.
pub fn is_query_call(name: &str) -> bool {
    name.contains("EventQuery") || name.contains("StreamQuery")
}

/// Longest gap between two queries of one polling loop: a loop that sleeps
/// up to a millisecond between polls still polls.
const POLL_GAP_NS: i64 = 1_000_000;

/// Queries in a row that make a polling loop.
const MIN_POLLS: usize = 3;

/// A polling loop on a host thread: `rows` are its query calls in order.
/// It polled for GPU work when an activity launched before the loop began
/// ended between the start of the next-to-last query (which still saw it
/// running) and the end of the last one (which saw it done): `awaited`.
struct PollLoop {
    rows: Vec<usize>,
    awaited: usize,
}

/// The polling loops of one thread's calls (in time order) and the GPU work each waited for.
fn poll_loops(t: &RankTrace, links: &Links, rows: &[usize], gpu_by_end: &[(i64, usize)]) -> Vec<PollLoop> {
    let ev = &t.events;
    let mut out = Vec::new();
    let mut k = 0;
    while k < rows.len() {
        let mut j = k;
        while j < rows.len() && is_query_call(t.name(rows[j])) && (j == k || ev.ts_ns[rows[j]] - ev.end_ns(rows[j - 1]) <= POLL_GAP_NS) {
            j += 1;
        }
        if j - k >= MIN_POLLS {
            let run = &rows[k..j];
            let (first, before_last, last) = (run[0], run[run.len() - 2], run[run.len() - 1]);
            let (lo, hi) = (ev.ts_ns[before_last], ev.end_ns(last));
            let from = gpu_by_end.partition_point(|e| e.0 <= lo);
            let to = gpu_by_end.partition_point(|e| e.0 <= hi);
            let awaited =
                gpu_by_end[from..to].iter().rev().find(|e| links.launch_ns(t, e.1).is_some_and(|l| l < ev.ts_ns[first])).map(|e| e.1);
            if let Some(awaited) = awaited {
                out.push(PollLoop { rows: run.to_vec(), awaited });
            }
        }
        k = j.max(k + 1);
    }
    out
}

/// Shortest host gap that can be a wait on GPU-written memory (and at least
/// 20× the thread's median gap between calls): CPU work between launches takes
/// a few µs.
const HOST_WAIT_MIN_NS: i64 = 20_000;

/// Gaps on one thread's calls (in time order) that ended within `tolerance`
/// after a communication kernel ended which the thread launched before the gap
/// began and which had not ended when it began: resuming row → kernel row.
/// Only ends count: a gap ending while a long collective runs is common in
/// data-parallel training and says nothing of what the host waited for.
fn comm_waits(t: &RankTrace, links: &Links, classes: &[Option<ActivityClass>], rows: &[usize], tolerance: i64) -> FxHashMap<usize, usize> {
    let ev = &t.events;
    let mut out = FxHashMap::default();
    let Some(&first) = rows.first() else { return out };
    let thread = (ev.pid[first], ev.tid[first]);
    // Communication kernels launched from this thread: (end, kernel, launch call).
    let mut comm: Vec<(i64, usize, usize)> = t
        .gpu_activity()
        .filter(|&k| classes.get(k).copied().flatten() == Some(ActivityClass::Comm))
        .filter_map(|k| {
            let c = links.launch.get(k).copied().filter(|&c| c != NONE)? as usize;
            ((ev.pid[c], ev.tid[c]) == thread).then_some((ev.end_ns(k), k, c))
        })
        .collect();
    if comm.is_empty() {
        return out;
    }
    comm.sort_unstable();
    let mut gaps: Vec<i64> = rows.windows(2).map(|w| ev.ts_ns[w[1]] - ev.end_ns(w[0])).collect();
    let long = (20 * quantile(&mut gaps, 0.5).unwrap_or(0).max(0)).max(HOST_WAIT_MIN_NS);
    for w in rows.windows(2) {
        let (p, i) = (w[0], w[1]);
        let (began, resumed) = (ev.end_ns(p), ev.ts_ns[i]);
        if resumed - began < long {
            continue;
        }
        let lo = comm.partition_point(|e| e.0 < resumed - tolerance);
        let hi = comm.partition_point(|e| e.0 <= resumed);
        if let Some(&(_, k, _)) = comm[lo..hi].iter().rev().find(|e| ev.ts_ns[e.2] <= began && e.0 > began) {
            out.insert(i, k);
        }
    }
    out
}

/// Residual above which matched collectives are not joined across ranks: the
/// instances do not end together, so the matching cannot be trusted.
const JOIN_RESIDUAL_NS: i64 = 100_000;

/// A host thread idle for longer than this (and 100× its median gap between
/// calls) was waiting for another thread: the autograd thread idles through
/// the forward pass (tens of ms in the corpus's V100 trace) while its working
/// gaps are a few µs.
const IDLE_GAP_NS: i64 = 100_000;

/// Launch latency assumed when a trace has no launch onto an idle stream.
const DEFAULT_LAUNCH_NS: i64 = 5_000;

/// Value at quantile `p` of `v` (sorted in place) as the graph's [`Timings`]
/// take it, the sample at the rounded rank; `None` when empty.
pub fn quantile(v: &mut [i64], p: f64) -> Option<i64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    v.get(((v.len() - 1) as f64 * p).round() as usize).copied()
}

/// The samples behind a rank's [`Timings`], ns: the gaps between
/// back-to-back GPU activities (kernels, copies, memsets) of a stream, those
/// of them that were queued, and the launch-to-start latencies of activities
/// launched onto an idle stream.
#[derive(Debug, Clone, Default)]
pub struct GapSamples {
    /// Every back-to-back gap (negative where the next activity started
    /// before the previous ended); [`GapSamples::of`] fills it, the graph's
    /// own samples leave it empty (its [`Timings`] do not read it).
    pub all: Vec<i64>,
    /// The gaps of activities whose launch call started at least a launch
    /// latency (the idle launches' median) before the previous one ended: the
    /// device's own per-activity cost. Without launch calls in the trace, the
    /// lower half of all gaps (a stream that went idle was not queued).
    pub queued: Vec<i64>,
    /// Launch-to-start latencies of activities launched onto an idle stream.
    pub idle_launch: Vec<i64>,
}

impl GapSamples {
    /// The samples of trace `t` with launch links `links`.
    pub fn of(t: &RankTrace, links: &Links) -> GapSamples {
        GapSamples::of_streams(t, links, &streams_of(t), true).0
    }

    /// The samples of `streams`, each a stream's GPU activities in start
    /// order, and the launch latency that picked the queued gaps (the idle
    /// launches' median, ns; [`DEFAULT_LAUNCH_NS`] without idle launches);
    /// `all` filled only `with_all`.
    fn of_streams(t: &RankTrace, links: &Links, streams: &[Vec<usize>], with_all: bool) -> (GapSamples, i64) {
        let ev = &t.events;
        let mut idle_launch = Vec::new();
        let mut gaps: Vec<(i64, Option<i64>, i64)> = Vec::new(); // (gap, launch, previous end)
        for rows in streams {
            for (k, &i) in rows.iter().enumerate() {
                let prev_end = k.checked_sub(1).and_then(|p| rows.get(p)).map(|&p| ev.end_ns(p));
                let l = links.launch_ns(t, i);
                if let Some(e) = prev_end {
                    gaps.push((ev.ts_ns[i] - e, l, e));
                }
                if let Some(l) = l
                    && prev_end.is_none_or(|e| e < l)
                    && ev.ts_ns[i] >= l
                {
                    idle_launch.push(ev.ts_ns[i] - l);
                }
            }
        }
        let launch = quantile(&mut idle_launch, 0.5).unwrap_or(DEFAULT_LAUNCH_NS);
        let queued = if links.launch.iter().all(|&c| c == NONE) {
            let mut lower: Vec<i64> = gaps.iter().map(|g| g.0).collect();
            lower.sort_unstable();
            lower.truncate(lower.len().div_ceil(2));
            lower
        } else {
            gaps.iter().filter(|(_, l, e)| l.is_some_and(|l| l + launch <= *e)).map(|g| g.0).collect()
        };
        let all = if with_all { gaps.iter().map(|g| g.0).collect() } else { Vec::new() };
        (GapSamples { all, queued, idle_launch }, launch)
    }
}

/// A trace's GPU activities per stream (device, stream), each in start order
/// (row order among equal starts), the streams in the order of their first row.
fn streams_of(t: &RankTrace) -> Vec<Vec<usize>> {
    let ev = &t.events;
    let mut by_stream: FxHashMap<(i64, i64), Vec<usize>> = FxHashMap::default();
    for i in t.gpu_activity() {
        by_stream.entry((ev.pid[i], ev.tid[i])).or_default().push(i);
    }
    let mut streams: Vec<Vec<usize>> = by_stream.into_values().collect();
    streams.sort_by_key(|rows| rows.first().copied());
    for rows in &mut streams {
        rows.sort_by_key(|&i| (ev.ts_ns[i], i));
    }
    streams
}

/// The measured timings of one rank (see [`Timings`]) from its samples and
/// the launch latency [`GapSamples::of_streams`] took (`launch`, ns), in ns:
/// (queue gap, queue tolerance, launch tolerance) and the report.
fn measure(mut s: GapSamples, launch: i64) -> ([i64; 3], Timings) {
    let launch_tol = quantile(&mut s.idle_launch, 0.9).unwrap_or(launch).clamp(launch, 2 * launch + 5_000);
    let queue = quantile(&mut s.queued, 0.5).unwrap_or(0).max(0);
    let queue_tol = quantile(&mut s.queued, 0.99).unwrap_or(0).clamp(2_000, 20_000);
    let us = |ns: i64| ns as f64 / 1000.0;
    let report = Timings {
        queue_gap_us: us(queue),
        queue_tolerance_us: us(queue_tol),
        queue_samples: s.queued.len(),
        launch_latency_us: us(launch),
        launch_tolerance_us: us(launch_tol),
        launch_samples: s.idle_launch.len(),
    };
    ([queue, queue_tol, launch_tol], report)
}

/// One rank's tasks and edges, built while its trace is in memory: task ids
/// are local to the rank, `origin.rank` is 0 and times are on the rank's own
/// clock until [`build`] places the piece in the job's graph.
#[derive(Debug, Clone, Default)]
pub struct RankPiece {
    /// The rank's graph alone (one entry in `ranks`, no joins).
    pub graph: ExecGraph,
    /// (row, task) of every GPU activity, by row.
    pub gpu_tasks: Vec<(u32, TaskId)>,
}

impl RankPiece {
    /// The graph of one rank's trace; `classes` are its rows' activity
    /// classes, `links` its launch links.
    pub fn of(t: &RankTrace, classes: &[Option<ActivityClass>], links: &Links) -> RankPiece {
        tracecast_ingest::analysis::facts::count(tracecast_ingest::analysis::facts::Fact::Graph);
        let mut g = ExecGraph::default();
        let (tasks, rules) = build_rank(&mut g, t, classes, links);
        g.ranks.push(rules);
        g.offsets_ns.push(0);
        let mut gpu_tasks: Vec<(u32, TaskId)> =
            tasks.into_iter().filter(|&(_, id)| matches!(g.origin[id as usize].kind, TaskKind::Gpu(_))).collect();
        gpu_tasks.sort_unstable();
        // A job holds every rank's piece until its graph is built: no spare capacity.
        g.shrink_to_fit();
        gpu_tasks.shrink_to_fit();
        RankPiece { graph: g, gpu_tasks }
    }
}

/// Where each rank's tasks sit in a job's graph.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    /// First task of each rank (its tasks are contiguous).
    pub base: Vec<TaskId>,
    /// Number of tasks of each rank (collective joins come after all ranks).
    pub len: Vec<u32>,
    /// (row, global task) of every GPU activity, by rank, then by row: one
    /// job-sized list (a list per rank would stay where its rank thread
    /// allocated it, pinning that memory through the simulation).
    gpu_tasks: Vec<(u32, TaskId)>,
    /// Where each rank's GPU activities start in `gpu_tasks`, and the end.
    gpu_first: Vec<u32>,
}

impl Placement {
    /// The global task of GPU row `row` of rank index `r`.
    pub fn task_of(&self, r: usize, row: u32) -> Option<TaskId> {
        let list = self.gpu_tasks.get(*self.gpu_first.get(r)? as usize..*self.gpu_first.get(r + 1)? as usize)?;
        list.binary_search_by_key(&row, |&(x, _)| x).ok().map(|k| list[k].1)
    }

    /// The tasks of rank index `r`.
    pub fn tasks(&self, r: usize) -> std::ops::Range<usize> {
        let b = self.base.get(r).copied().unwrap_or(0) as usize;
        b..b + self.len.get(r).copied().unwrap_or(0) as usize
    }
}

/// Builds the graph of a job from its ranks' pieces (in the rank order of
/// `collectives`): each piece is moved onto the clock of `alignment`, and
/// collectives matched across ranks are joined. Pieces are consumed one by
/// one, so the job's graph and one piece are in memory at a time.
pub fn build(pieces: Vec<RankPiece>, collectives: &JobCollectives, alignment: Option<&ClockAlignment>) -> (ExecGraph, Placement) {
    let mut g = ExecGraph::default();
    let join = alignment.is_some_and(|a| (a.residual_us * 1000.0) as i64 <= JOIN_RESIDUAL_NS);
    // The job's lists at their final size from the start, the joins' task and
    // two edges per member included (at most): growing them would hold up to
    // three times their size while they move.
    let (join_tasks, join_edges) = if join {
        let (instances, members) = collectives.joined_counts();
        (instances, 2 * members)
    } else {
        (0, 0)
    };
    g.reserve(
        pieces.iter().map(|p| p.graph.graph.len()).sum::<usize>() + join_tasks,
        pieces.iter().map(|p| p.graph.graph.edges.len()).sum::<usize>() + join_edges,
    );
    let mut place = Placement::default();
    place.gpu_tasks.reserve_exact(pieces.iter().map(|p| p.gpu_tasks.len()).sum());
    place.gpu_first.push(0);
    for (r, piece) in pieces.into_iter().enumerate() {
        // The pieces were made on the rank threads, in their allocator arenas,
        // where the job's lists cannot reuse what they free: hand it back as we go.
        if r % 256 == 255 {
            tracecast_ingest::memory::release_for_replay();
        }
        let off = alignment.and_then(|a| a.offsets_us.get(r)).map_or(0, |o| (o * 1000.0).round() as i64);
        let base = g.graph.len() as TaskId;
        let p = piece.graph;
        place.base.push(base);
        place.len.push(p.graph.len() as u32);
        place.gpu_tasks.extend(piece.gpu_tasks.iter().map(|&(row, t)| (row, t + base)));
        place.gpu_first.push(place.gpu_tasks.len() as u32);
        g.graph.dur_ns.extend(p.graph.dur_ns);
        g.graph.release_ns.extend(p.graph.release_ns.into_iter().map(|x| if x == i64::MIN { x } else { x + off }));
        g.graph.edges.extend(p.graph.edges.into_iter().map(|e| crate::sim::Edge { from: e.from + 2 * base, to: e.to + 2 * base, ..e }));
        g.origin.extend(p.origin.into_iter().map(|o| TaskOrigin { rank: r as u32, ..o }));
        g.measured_start_ns.extend(p.measured_start_ns.into_iter().map(|x| x + off));
        g.measured_end_ns.extend(p.measured_end_ns.into_iter().map(|x| x + off));
        g.offsets_ns.push(off);
        g.ranks.extend(p.ranks);
    }
    // Collectives: every member ends at the latest arrival plus the transfer.
    if join {
        let mut members: FxHashMap<u32, Vec<(TaskId, i64)>> = FxHashMap::default();
        for (r, row, instance, transfer_ns) in collectives.joins() {
            if let Some(id) = place.task_of(r, row) {
                members.entry(instance).or_default().push((id, transfer_ns));
            }
        }
        let mut instances: Vec<_> = members.into_iter().collect();
        instances.sort_by_key(|(k, _)| *k);
        for (_, list) in instances {
            let transfer = list.iter().map(|m| m.1).min().unwrap_or(0);
            let Some(&(first, _)) = list.first() else { continue };
            let origin = TaskOrigin { kind: TaskKind::Join, ..g.origin[first as usize] };
            let arrival = g.graph.task(0, i64::MIN);
            g.origin.push(origin);
            g.measured_start_ns.push(list.iter().map(|&(m, _)| g.measured_start_ns[m as usize]).max().unwrap_or(0));
            g.measured_end_ns.push(*g.measured_start_ns.last().unwrap_or(&0));
            for &(x, _) in &list {
                g.graph.edge(x, At::Start, arrival, At::Start, 0);
            }
            for &(m, _) in &list {
                g.graph.dur_ns[m as usize] = transfer;
                g.join_edges.push(g.graph.edges.len());
                g.graph.edge(arrival, At::Start, m, At::End, transfer);
            }
        }
    }
    (g, place)
}

/// Adds one rank's tasks and edges; returns row → task and the rules used.
fn build_rank(g: &mut ExecGraph, t: &RankTrace, classes: &[Option<ActivityClass>], links: &Links) -> (FxHashMap<u32, TaskId>, RankGraph) {
    let (r, off) = (0, 0);
    let ev = &t.events;
    let mut tasks: FxHashMap<u32, TaskId> = FxHashMap::default();
    let add = |g: &mut ExecGraph, tasks: &mut FxHashMap<u32, TaskId>, row: usize, kind: TaskKind, dur: i64, release: i64| -> TaskId {
        let id = g.graph.task(dur, release);
        g.origin.push(TaskOrigin { rank: r, row: row as u32, kind });
        g.measured_start_ns.push(ev.ts_ns[row] + off);
        g.measured_end_ns.push(ev.end_ns(row) + off);
        if kind != TaskKind::Wait {
            tasks.insert(row as u32, id);
        }
        id
    };
    let mut out = RankGraph::default();

    // GPU activities, per stream in start order.
    let streams = streams_of(t);
    let (samples, launch) = GapSamples::of_streams(t, links, &streams, false);
    let ([queue, queue_tol, launch_tol], timings) = measure(samples, launch);
    out.timings = timings;

    // Host calls first (launch edges need them), per thread in order.
    let mut by_thread: FxHashMap<(i64, i64), Vec<usize>> = FxHashMap::default();
    for i in 0..ev.len() {
        if ev.kind[i] == EventKind::Runtime {
            by_thread.entry((ev.pid[i], ev.tid[i])).or_default().push(i);
        }
    }
    let mut threads: Vec<Vec<usize>> = by_thread.into_values().collect();
    threads.sort_by_key(|rows| rows.first().copied());
    let mut syncs: Vec<(usize, TaskId)> = Vec::new();
    for rows in &mut threads {
        rows.sort_by_key(|&i| (ev.ts_ns[i], i));
        for &i in rows.iter() {
            let id = add(g, &mut tasks, i, TaskKind::Host, ev.dur_ns[i], i64::MIN);
            if is_blocking_call(t.name(i)) {
                syncs.push((i, id));
            }
        }
    }
    // Polling loops: every query after the first only waits, so it takes no
    // time of its own and follows the previous one at once; the last one ends
    // when the awaited GPU work ends (an edge added once GPU tasks exist).
    let mut gpu_by_end: Vec<(i64, usize)> = t.gpu_activity().map(|i| (ev.end_ns(i), i)).collect();
    gpu_by_end.sort_unstable();
    let polls: Vec<PollLoop> = threads.iter().flat_map(|rows| poll_loops(t, links, rows, &gpu_by_end)).collect();
    let mut polling: FxHashSet<usize> = FxHashSet::default();
    for p in &polls {
        for &row in &p.rows[1..] {
            polling.insert(row);
            g.graph.dur_ns[tasks[&(row as u32)] as usize] = 0;
        }
    }
    // Waits on GPU-written memory: the gap's edge keeps the thread's typical
    // gap, the collective's end holds the resuming call (added once GPU tasks exist).
    let waits: FxHashMap<usize, usize> =
        threads.iter().flat_map(|rows| comm_waits(t, links, classes, rows, launch_tol.max(queue_tol))).collect();
    // Every host call's end, for hand-offs between threads: (end, thread, row).
    let mut ends: Vec<(i64, usize, usize)> =
        threads.iter().enumerate().flat_map(|(k, rows)| rows.iter().map(move |&i| (ev.end_ns(i), k, i))).collect();
    ends.sort_unstable();
    let handoff_from = |k: usize, i: usize| -> Option<usize> {
        let j = ends.partition_point(|e| e.0 <= ev.ts_ns[i]);
        ends[..j].iter().rev().find(|e| e.1 != k && ev.pid[e.2] == ev.pid[i]).map(|e| e.2)
    };
    for (k, rows) in threads.iter().enumerate() {
        let mut gaps: Vec<i64> = rows.windows(2).map(|w| ev.ts_ns[w[1]] - ev.end_ns(w[0])).collect();
        let median_gap = quantile(&mut gaps, 0.5).unwrap_or(0).max(0);
        let idle_gap = (100 * median_gap).max(IDLE_GAP_NS);
        for (n, &i) in rows.iter().enumerate() {
            let id = tasks[&(i as u32)];
            let prev = n.checked_sub(1).and_then(|p| rows.get(p)).copied();
            let gap = prev.map(|p| ev.ts_ns[i] - ev.end_ns(p));
            // A thread that was idle (or had not started) resumes when another
            // thread hands it work: the latest call that ended on another thread.
            let idle = gap.is_none_or(|gp| gp > idle_gap);
            let waited = waits.contains_key(&i);
            let from = if idle && !waited { handoff_from(k, i) } else { None };
            if let Some(o) = from {
                g.graph.edge(tasks[&(o as u32)], At::End, id, At::Start, ev.ts_ns[i] - ev.end_ns(o));
                out.thread_handoffs += 1;
            }
            match (prev, gap) {
                (Some(p), Some(gp)) if gp >= 0 => {
                    let lag = if polling.contains(&i) {
                        0
                    } else if from.is_some() || waited {
                        median_gap.min(gp)
                    } else {
                        gp
                    };
                    g.graph.edge(tasks[&(p as u32)], At::End, id, At::Start, lag);
                }
                (Some(p), _) => g.graph.edge(tasks[&(p as u32)], At::Start, id, At::Start, ev.ts_ns[i] - ev.ts_ns[p]),
                // The process's first call: the only host anchor to the clock.
                (None, _) if from.is_none() => g.graph.release_ns[id as usize] = ev.ts_ns[i] + off,
                (None, _) => {}
            }
        }
    }
    // All GPU tasks first: cross-stream edges may point at any stream.
    let call_of = |i: usize| -> Option<usize> {
        let c = links.launch.get(i).copied().unwrap_or(NONE);
        (c != NONE && tasks.contains_key(&c)).then_some(c as usize)
    };
    let calls: Vec<Vec<Option<usize>>> = streams.iter().map(|rows| rows.iter().map(|&i| call_of(i)).collect()).collect();
    for (si, rows) in streams.iter().enumerate() {
        for (k, &i) in rows.iter().enumerate() {
            let class = classes.get(i).copied().flatten().unwrap_or(ActivityClass::Compute);
            // Nothing to hold it but the clock: neither a launch nor a predecessor.
            let anchored = calls[si][k].is_none() && k == 0;
            let release = if anchored { ev.ts_ns[i] + off } else { i64::MIN };
            add(g, &mut tasks, i, TaskKind::Gpu(class), ev.dur_ns[i], release);
            if anchored {
                out.starts.anchored += 1;
            }
        }
    }
    // Correlation → runtime call, for what the `cuda_sync` rows name (built once).
    let call_of = if t.sync_waits.is_empty() { FxHashMap::default() } else { runtime_calls(t) };
    let recorded = recorded_waits(t, links, &streams, &call_of);
    // Ends on every stream in time order, for the cross-stream inference.
    let mut ends_by_time: Vec<(i64, usize, usize)> = Vec::new(); // (end, stream index, row)
    for (si, rows) in streams.iter().enumerate() {
        for &i in rows {
            ends_by_time.push((ev.end_ns(i), si, i));
        }
    }
    ends_by_time.sort_unstable();
    let cross_tol = queue_tol + 3_000;
    for (si, rows) in streams.iter().enumerate() {
        for (k, &i) in rows.iter().enumerate() {
            let id = tasks[&(i as u32)];
            let s = ev.ts_ns[i];
            let prev = k.checked_sub(1).and_then(|p| rows.get(p)).copied();
            let call = calls[si][k];
            let stream_gap = prev.map(|p| s - ev.end_ns(p));
            let latency = call.map(|c| s - ev.ts_ns[c]);
            let by_stream = stream_gap.is_some_and(|gap| gap <= queue_tol);
            let by_launch = latency.is_some_and(|l| l <= launch_tol);
            // Recorded waits always hold; the latest one may explain the start.
            let mut by_recorded = false;
            for &a in recorded.get(&i).map_or(&[][..], |v| v.as_slice()) {
                let lag = s - ev.end_ns(a);
                if lag < 0 {
                    continue;
                }
                let explains = lag <= cross_tol && !by_stream && !by_launch;
                g.graph.edge(tasks[&(a as u32)], At::End, id, At::Start, if explains { lag } else { 0 });
                by_recorded |= explains;
            }
            let inferred = if by_stream || by_launch || by_recorded || (prev.is_none() && call.is_none()) {
                None
            } else {
                let j = ends_by_time.partition_point(|e| e.0 <= s);
                ends_by_time[..j].iter().rev().find(|e| e.1 != si).filter(|e| s - e.0 <= cross_tol).map(|e| (e.0, e.2))
            };
            if let Some((end, other)) = inferred {
                g.graph.edge(tasks[&(other as u32)], At::End, id, At::Start, s - end);
            }
            // The stream and launch edges: the measured lag on the one that
            // explains the start, the typical lag (never more than measured) otherwise.
            let explained = by_stream || by_launch || by_recorded || inferred.is_some();
            let stream_binds = by_stream && !(by_launch && latency.zip(stream_gap).is_some_and(|(l, gp)| l - launch < gp - queue));
            let mut wait: Option<(TaskId, At, i64)> = None; // unexplained: after this event + lag
            if let (Some(p), Some(gap)) = (prev, stream_gap) {
                let pid = tasks[&(p as u32)];
                let lag = if stream_binds { gap } else { queue.min(gap) };
                g.graph.edge(pid, At::End, id, At::Start, lag);
                if !explained {
                    wait = Some((pid, At::End, queue.min(gap)));
                }
            }
            if let (Some(c), Some(l)) = (call, latency) {
                let cid = tasks[&(c as u32)];
                let lag = if by_launch && !stream_binds { l } else { launch.min(l) };
                g.graph.edge(cid, At::Start, id, At::Start, lag);
                // The later of the two typical readiness times binds the wait.
                let ready_launch = ev.ts_ns[c] + launch.min(l);
                let ready_stream = prev.map_or(i64::MIN, |p| ev.end_ns(p) + queue.min(stream_gap.unwrap_or(0)));
                if !explained && ready_launch >= ready_stream {
                    wait = Some((cid, At::Start, launch.min(l)));
                }
            }
            match wait {
                Some((from, at, lag)) if !(prev.is_none() && call.is_none()) => {
                    let ready = match at {
                        At::Start => g.measured_start_ns[from as usize] - off,
                        At::End => g.measured_end_ns[from as usize] - off,
                    } + lag;
                    let dur = (s - ready).max(0);
                    let w = add(g, &mut tasks, i, TaskKind::Wait, dur, i64::MIN);
                    g.measured_start_ns[w as usize] = ready + off;
                    g.measured_end_ns[w as usize] = s + off;
                    g.graph.edge(from, at, w, At::Start, lag);
                    g.graph.edge(w, At::End, id, At::Start, 0);
                    out.starts.unexplained += 1;
                    out.starts.unexplained_us += dur as f64 / 1000.0;
                }
                _ if by_recorded && !by_stream && !by_launch => out.starts.cross_stream_recorded += 1,
                _ if inferred.is_some() => out.starts.cross_stream_inferred += 1,
                _ if stream_binds => out.starts.stream += 1,
                _ if by_launch => out.starts.launch += 1,
                _ => {}
            }
        }
    }
    launch_queue(g, t, links, &streams, &tasks, &mut out);
    // An "async" copy that returned only after its own copy ended blocked
    // (pageable host memory makes `cudaMemcpyAsync` synchronous): a sync too.
    let mut named: FxHashSet<usize> = syncs.iter().map(|s| s.0).collect();
    for rows in &streams {
        for &k in rows {
            let Some(c) = links.launch.get(k).copied().filter(|&c| c != NONE).map(|c| c as usize) else { continue };
            let (call_start, call_end) = (ev.ts_ns[c], ev.end_ns(c));
            if t.name(c).contains("Memcpy")
                && ev.dur_ns[c] > BLOCKING_COPY_NS
                && ev.end_ns(k) > call_start
                && ev.end_ns(k) <= call_end + BLOCKED_COPY_END_NS
                && named.insert(c)
                && let Some(&id) = tasks.get(&(c as u32))
            {
                syncs.push((c, id));
            }
        }
    }
    // Synchronising calls end after the GPU work they waited for.
    for (i, id) in syncs {
        let (start, end) = (ev.ts_ns[i], ev.end_ns(i));
        let device_wide = t.name(i).contains("DeviceSynchronize") || t.name(i).contains("CtxSynchronize");
        let mut awaited_end = i64::MIN;
        for rows in &streams {
            // The last activity launched on this stream before the call began
            // (a sync does not wait for work other threads launch meanwhile).
            let last = rows.iter().rev().find(|&&k| links.launch_ns(t, k).is_some_and(|l| l <= start));
            let Some(&k) = last else { continue };
            let k_end = ev.end_ns(k);
            // A device sync waits for every stream; other syncs for the
            // streams whose work ended while the host waited.
            if k_end <= end + SYNC_CLOCK_SLACK_NS && (device_wide || k_end > start) {
                // Negative within the clock slack: the identity replay ends the call where it was measured.
                let tail = end - k_end;
                g.graph.edge(tasks[&(k as u32)], At::End, id, At::End, tail);
                awaited_end = awaited_end.max(k_end);
            }
        }
        if awaited_end > start {
            g.graph.dur_ns[id as usize] = (end - awaited_end).max(0);
            out.host_syncs += 1;
        }
    }
    // `Event Sync` rows: the host call waited for the recorded activity.
    event_syncs(g, t, links, &streams, &tasks, &call_of);
    for (&call, &kernel) in &waits {
        if let (Some(&call_id), Some(&kernel_id)) = (tasks.get(&(call as u32)), tasks.get(&(kernel as u32))) {
            g.graph.edge(kernel_id, At::End, call_id, At::Start, ev.ts_ns[call] - ev.end_ns(kernel));
            out.host_comm_waits += 1;
        }
    }
    for p in &polls {
        let (Some(&last), Some(&awaited)) = (p.rows.last().and_then(|r| tasks.get(&(*r as u32))), tasks.get(&(p.awaited as u32))) else {
            continue;
        };
        let tail = (ev.end_ns(p.rows[p.rows.len() - 1]) - ev.end_ns(p.awaited)).max(0);
        g.graph.edge(awaited, At::End, last, At::End, tail);
        out.host_polls += 1;
    }
    (tasks, out)
}

/// Smallest queue that counts as a launch queue filling up: CUDA's holds
/// about 1024 launches (the corpus's V100 trace blocks at 1020–1021 queued).
const MIN_LAUNCH_QUEUE: usize = 256;

/// Launch calls blocked by a full launch queue. The queue's occupancy at a
/// call's return is the number of activities launched but not yet started;
/// where it reaches the trace's maximum (and that is a real queue), the call
/// returned because the GPU started the activity that freed a slot — the one
/// that started last before the return. The call keeps the thread's median
/// launch-call time as its own and waits for that start for the rest, so a
/// faster GPU frees slots sooner and the host runs ahead sooner.
fn launch_queue(
    g: &mut ExecGraph,
    t: &RankTrace,
    links: &Links,
    streams: &[Vec<usize>],
    tasks: &FxHashMap<u32, TaskId>,
    out: &mut RankGraph,
) {
    let ev = &t.events;
    let mut launched: Vec<i64> = Vec::new();
    let mut started: Vec<(i64, usize)> = Vec::new();
    for rows in streams {
        for &i in rows {
            if let Some(l) = links.launch_ns(t, i) {
                launched.push(l);
                started.push((ev.ts_ns[i], i));
            }
        }
    }
    if launched.len() < MIN_LAUNCH_QUEUE {
        return;
    }
    launched.sort_unstable();
    started.sort_unstable();
    let mut calls: Vec<usize> = links.launch.iter().filter(|&&c| c != NONE).map(|&c| c as usize).collect();
    calls.sort_unstable();
    calls.dedup();
    let occupancy = |at: i64| launched.partition_point(|&l| l < at).saturating_sub(started.partition_point(|s| s.0 <= at));
    let depth = calls.iter().map(|&c| occupancy(ev.end_ns(c))).max().unwrap_or(0);
    if depth < MIN_LAUNCH_QUEUE {
        return;
    }
    out.launch_queue_depth = depth;
    let mut durations: Vec<i64> = calls.iter().map(|&c| ev.dur_ns[c]).collect();
    let typical = quantile(&mut durations, 0.5).unwrap_or(0);
    for &c in &calls {
        let end = ev.end_ns(c);
        if occupancy(end) * 50 < depth * 49 || ev.dur_ns[c] <= typical {
            continue;
        }
        // The activity that started last before the call returned, launched before the call.
        let k = started.partition_point(|s| s.0 <= end);
        let freed = started[..k].iter().rev().take(64).find(|s| links.launch_ns(t, s.1).is_some_and(|l| l < ev.ts_ns[c]));
        let (Some(&(start, row)), Some(&call_id)) = (freed, tasks.get(&(c as u32))) else { continue };
        let Some(&freed_id) = tasks.get(&(row as u32)) else { continue };
        g.graph.edge(freed_id, At::Start, call_id, At::End, end - start);
        g.graph.dur_ns[call_id as usize] = typical;
        out.queue_full_launches += 1;
    }
}

/// Correlation → runtime call row.
fn runtime_calls(t: &RankTrace) -> FxHashMap<i64, usize> {
    let ev = &t.events;
    let mut call_of: FxHashMap<i64, usize> = FxHashMap::default();
    for i in 0..ev.len() {
        if ev.kind[i] == EventKind::Runtime && ev.correlation[i] >= 0 {
            call_of.insert(ev.correlation[i], i);
        }
    }
    call_of
}

/// The last activity launched on `stream` no later than `at`.
fn last_launched_on(t: &RankTrace, links: &Links, streams: &[Vec<usize>], stream: i64, at: i64) -> Option<usize> {
    let ev = &t.events;
    streams
        .iter()
        .find(|rows| rows.first().is_some_and(|&k| ev.tid[k] == stream))
        .and_then(|rows| rows.iter().rev().find(|&&k| links.launch_ns(t, k).is_some_and(|l| l <= at)).copied())
}

/// What `Stream Wait Event` rows say: waiting activity row → awaited rows
/// (the last activity launched on the recorded stream before the
/// `cudaEventRecord` call holds the next activity launched on the waiting stream).
fn recorded_waits(t: &RankTrace, links: &Links, streams: &[Vec<usize>], call_of: &FxHashMap<i64, usize>) -> FxHashMap<usize, Vec<usize>> {
    let ev = &t.events;
    let mut out: FxHashMap<usize, Vec<usize>> = FxHashMap::default();
    if t.sync_waits.is_empty() {
        return out;
    }
    for &(row, wait) in &t.sync_waits {
        let row = row as usize;
        if t.name(row) != "Stream Wait Event" {
            continue;
        }
        let Some(&record) = call_of.get(&wait.record_correlation) else { continue };
        let Some(awaited) = last_launched_on(t, links, streams, wait.wait_on_stream, ev.ts_ns[record]) else { continue };
        let after = call_of.get(&ev.correlation[row]).map_or(ev.ts_ns[row], |&c| ev.ts_ns[c]);
        let next = streams
            .iter()
            .find(|rows| rows.first().is_some_and(|&k| ev.tid[k] == ev.tid[row]))
            .and_then(|rows| rows.iter().find(|&&k| links.launch_ns(t, k).is_some_and(|l| l >= after)).copied());
        if let Some(next) = next
            && next != awaited
        {
            out.entry(next).or_default().push(awaited);
        }
    }
    out
}

/// `Event Sync` rows: the host call ends after the recorded activity ends.
fn event_syncs(
    g: &mut ExecGraph,
    t: &RankTrace,
    links: &Links,
    streams: &[Vec<usize>],
    tasks: &FxHashMap<u32, TaskId>,
    call_of: &FxHashMap<i64, usize>,
) {
    let ev = &t.events;
    if t.sync_waits.is_empty() {
        return;
    }
    for &(row, wait) in &t.sync_waits {
        let row = row as usize;
        if t.name(row) == "Stream Wait Event" {
            continue;
        }
        let Some(&record) = call_of.get(&wait.record_correlation) else { continue };
        let Some(awaited) = last_launched_on(t, links, streams, wait.wait_on_stream, ev.ts_ns[record]) else { continue };
        let Some(&awaited_id) = tasks.get(&(awaited as u32)) else { continue };
        if let Some(&c) = call_of.get(&ev.correlation[row])
            && ev.end_ns(c) + SYNC_CLOCK_SLACK_NS >= ev.end_ns(awaited)
            && let Some(&call_id) = tasks.get(&(c as u32))
        {
            g.graph.edge(awaited_id, At::End, call_id, At::End, ev.end_ns(c) - ev.end_ns(awaited));
        }
    }
}
