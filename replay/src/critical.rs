//! The critical path of a replayed job, summarised by what its time was spent
//! on — "what would speeding this up buy me".

use serde::Serialize;
use tracecast_ingest::analysis::ActivityClass;

use crate::graph::{ExecGraph, TaskKind};
use crate::sim::{NO_EVENT, Schedule};

/// Time on the critical path by category, µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CriticalPath {
    /// From the start of the replayed steps (the path's first event without
    /// steps) to the job's last GPU end, or the analysed steps' where a range
    /// selects steps: at least every step it covers.
    pub total_us: f64,
    /// Compute kernels on the path.
    pub compute_us: f64,
    /// Communication on the path (kernels, transfers of joined collectives):
    /// communication nothing else hid.
    pub comm_us: f64,
    /// Memcpy / memset on the path.
    pub memory_us: f64,
    /// Runtime calls and CPU time between them.
    pub cpu_us: f64,
    /// Launch latency from a call to its kernel's start, queue gaps between
    /// back-to-back kernels and event-wait latencies.
    pub launch_us: f64,
    /// Delays before GPU activities that nothing in the trace explains.
    pub unexplained_us: f64,
    /// Events on the path.
    pub events: usize,
}

impl CriticalPath {
    /// Shares of the path, percent: compute, communication, memory, CPU,
    /// launch latency and queue gaps, unexplained waits (zeros for an empty path).
    pub fn percent(&self) -> [f64; 6] {
        let pct = |v: f64| if self.total_us > 0.0 { 100.0 * v / self.total_us } else { 0.0 };
        [pct(self.compute_us), pct(self.comm_us), pct(self.memory_us), pct(self.cpu_us), pct(self.launch_us), pct(self.unexplained_us)]
    }

    /// Whether the host, not the GPU, bounds the path: CPU time and launch
    /// latency make up more than half of it.
    pub fn host_bound(&self) -> bool {
        self.total_us > 0.0 && self.cpu_us + self.launch_us > 0.5 * self.total_us
    }
}

/// Follows the binding edges back from the end of `last` (the GPU task of the
/// analysed steps that ends last, where a range selects steps; `None`: the
/// job's last GPU end) and adds up the time from `from_ns` on (the start of
/// the replayed steps: host time before the first step's GPU work bounds
/// nothing the user measures); `i64::MIN` for the whole path.
pub fn critical_path(eg: &ExecGraph, s: &Schedule, from_ns: i64, last: Option<usize>) -> (CriticalPath, Vec<u32>) {
    let last = last.or_else(|| {
        eg.origin
            .iter()
            .enumerate()
            .filter(|(_, o)| matches!(o.kind, TaskKind::Gpu(_)))
            // A task on a cycle keeps the partial time of a schedule that never reached it.
            .filter(|(t, _)| s.is_scheduled(*t))
            .max_by_key(|(t, _)| (s.end_ns[*t], std::cmp::Reverse(*t)))
            .map(|(t, _)| t)
    });
    let last = last.map(|t| 2 * t as u32 + 1);
    let Some(last) = last else { return (CriticalPath::default(), Vec::new()) };
    let path = s.critical_path(last);
    let mut cp = CriticalPath { events: path.len(), ..Default::default() };
    // How far back the path's time is accounted: an edge with a negative lag
    // (a sync that returned within the clock slack before the work it awaited
    // ended) steps forward in time, and that stretch is counted once.
    let mut reached = path.first().map_or(i64::MAX, |&e| s.event_ns(e));
    for pair in path.windows(2) {
        let (later, earlier) = (pair[0], pair[1]);
        if earlier == NO_EVENT {
            break;
        }
        if s.event_ns(later) <= from_ns {
            break;
        }
        let dt = (s.event_ns(later).min(reached) - s.event_ns(earlier).max(from_ns)).max(0) as f64 / 1000.0;
        reached = reached.min(s.event_ns(earlier));
        let (lt, et) = (later as usize / 2, earlier as usize / 2);
        let later_kind = eg.origin[lt].kind;
        let earlier_kind = eg.origin[et].kind;
        let same_task = lt == et;
        let bucket = match (same_task, later_kind, earlier_kind, later % 2) {
            // A task's own duration.
            (true, TaskKind::Host, _, _) => &mut cp.cpu_us,
            (true, TaskKind::Gpu(ActivityClass::Compute), _, _) => &mut cp.compute_us,
            (true, TaskKind::Gpu(ActivityClass::Comm), _, _) => &mut cp.comm_us,
            (true, TaskKind::Gpu(ActivityClass::Memory), _, _) => &mut cp.memory_us,
            (true, TaskKind::Wait, _, _) => &mut cp.unexplained_us,
            // Members arriving at a collective (no time passes here).
            (_, TaskKind::Join, _, _) => &mut cp.comm_us,
            // A collective's end set by another member's arrival: the transfer.
            (false, TaskKind::Gpu(ActivityClass::Comm), _, 1) => &mut cp.comm_us,
            // Host to GPU: launch latency.
            (false, TaskKind::Gpu(_) | TaskKind::Wait, TaskKind::Host, _) => &mut cp.launch_us,
            // Host chain gaps and synchronising tails.
            (false, TaskKind::Host, _, _) => &mut cp.cpu_us,
            // GPU to GPU (stream order, cross-stream waits): a queue gap or event latency.
            (false, TaskKind::Gpu(_) | TaskKind::Wait, _, _) => &mut cp.launch_us,
        };
        *bucket += dt;
    }
    if let (Some(&first), Some(&end)) = (path.last(), path.first()) {
        // A path that begins after the steps do (at a thread's first call or
        // an anchored activity on a rank that started late) still explains
        // the whole window: the time before its first event is that start's.
        let begin = s.event_ns(first);
        if from_ns != i64::MIN && begin > from_ns {
            let before = (begin - from_ns) as f64 / 1000.0;
            match eg.origin[first as usize / 2].kind {
                TaskKind::Host => cp.cpu_us += before,
                _ => cp.unexplained_us += before,
            }
        }
        let from = if from_ns == i64::MIN { begin } else { from_ns };
        cp.total_us = (s.event_ns(end) - from).max(0) as f64 / 1000.0;
    }
    (cp, path)
}
