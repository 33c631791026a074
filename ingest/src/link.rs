//! Which CPU op launched each GPU activity, and how CPU events nest.
//!
//! A GPU activity belongs to the innermost CPU op around its launch: the
//! runtime call with the same correlation id, then the innermost op or
//! annotation on that thread whose interval contains the call. `External id`
//! is used when the runtime call is missing, and checked against the call
//! otherwise (before 2024 it often equals the correlation, not an op's id).

use rustc_hash::FxHashMap as HashMap;

use crate::event::EventKind;
use crate::rank::RankTrace;

/// Marks "none" in [`Links`].
pub const NONE: u32 = u32::MAX;

/// Per-row links of one trace.
#[derive(Debug, Clone)]
pub struct Links {
    /// For CPU ops, annotations and runtime calls: the innermost enclosing CPU
    /// op or annotation on the same thread; [`NONE`] otherwise.
    pub parent: Vec<u32>,
    /// For GPU activity: the runtime call that launched it; [`NONE`] otherwise.
    pub launch: Vec<u32>,
    /// For GPU activity: the innermost CPU op or annotation that launched it.
    pub launch_op: Vec<u32>,
}

impl Links {
    /// Builds the links of `trace`.
    pub fn new(trace: &RankTrace) -> Links {
        crate::analysis::facts::count(crate::analysis::facts::Fact::Links);
        let ev = &trace.events;
        let n = ev.len();
        let mut parent = vec![NONE; n];
        let is_host = |k: EventKind| matches!(k, EventKind::CpuOp | EventKind::UserAnnotation | EventKind::Runtime);
        let mut by_thread: HashMap<(i64, i64), Vec<usize>> = HashMap::default();
        for i in 0..n {
            if ev.kind.get(i).is_some_and(|&k| is_host(k)) {
                by_thread.entry((ev.pid[i], ev.tid[i])).or_default().push(i);
            }
        }
        let mut threads: Vec<_> = by_thread.into_values().collect();
        threads.sort_by_key(|rows| rows.first().copied());
        for mut rows in threads {
            // Outer before inner: earlier start, then longer, then ops before the calls they make.
            rows.sort_by_key(|&i| (ev.ts_ns[i], -ev.dur_ns[i], ev.kind[i] == EventKind::Runtime, i));
            let mut stack: Vec<usize> = Vec::new();
            for i in rows {
                let (s, e) = (ev.ts_ns[i], ev.end_ns(i));
                while let Some(&top) = stack.last() {
                    if ev.ts_ns[top] <= s && e <= ev.end_ns(top) {
                        break;
                    }
                    stack.pop();
                }
                if let Some(&top) = stack.last() {
                    parent[i] = top as u32;
                }
                if ev.kind[i] != EventKind::Runtime {
                    stack.push(i);
                }
            }
        }
        let mut runtime_of: HashMap<i64, usize> = HashMap::default();
        let mut op_of_external: HashMap<i64, usize> = HashMap::default();
        for i in 0..n {
            match ev.kind[i] {
                EventKind::Runtime if ev.correlation[i] >= 0 => {
                    runtime_of.entry(ev.correlation[i]).or_insert(i);
                }
                EventKind::CpuOp if ev.external_id[i] >= 0 => {
                    // The innermost op carries the id its launches repeat: keep the latest-starting one.
                    let e = op_of_external.entry(ev.external_id[i]).or_insert(i);
                    if ev.ts_ns[i] >= ev.ts_ns[*e] {
                        *e = i;
                    }
                }
                _ => {}
            }
        }
        let mut launch = vec![NONE; n];
        let mut launch_op = vec![NONE; n];
        for i in 0..n {
            if !ev.kind[i].is_gpu_activity() {
                continue;
            }
            let call = runtime_of.get(&ev.correlation[i]).copied();
            let by_external = op_of_external.get(&ev.external_id[i]).copied().filter(|&op| match call {
                Some(c) => ev.ts_ns[op] <= ev.ts_ns[c] && ev.end_ns(c) <= ev.end_ns(op),
                None => true,
            });
            if let Some(c) = call {
                launch[i] = c as u32;
            }
            launch_op[i] = match (by_external, call) {
                (Some(op), _) => op as u32,
                (None, Some(c)) => parent[c],
                (None, None) => NONE,
            };
        }
        Links { parent, launch, launch_op }
    }

    /// Host start (ns) of the runtime call that launched GPU activity `row`.
    pub fn launch_ns(&self, trace: &RankTrace, row: usize) -> Option<i64> {
        let call = *self.launch.get(row)?;
        if call == NONE { None } else { trace.events.ts_ns.get(call as usize).copied() }
    }

    /// `row`, then its enclosing ops outward (at most `depth` of them).
    pub fn ancestors(&self, row: u32, depth: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(Some(row).filter(|&r| r != NONE), move |&r| self.parent.get(r as usize).copied().filter(|&p| p != NONE))
            .take(depth + 1)
            .map(|r| r as usize)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::kineto::{ReadOptions, parse_bytes};

    #[test]
    fn kernel_is_attributed_to_innermost_op_around_its_launch() {
        // 2022 style: the kernel's External id is its correlation and matches no op.
        let json = br#"{"traceEvents": [
          {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
          {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": 10, "dur": 30, "args": {"External id": 5}},
          {"ph": "X", "cat": "cpu_op", "name": "nccl:all_reduce", "pid": 1, "tid": 1, "ts": 12, "dur": 20, "args": {"External id": 6}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 15, "dur": 5, "args": {"correlation": 77, "External id": 77}},
          {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 0, "tid": 20, "ts": 25, "dur": 50, "args": {"correlation": 77, "External id": 77}}
        ]}"#;
        let t = parse_bytes(json, Path::new("t.json"), &ReadOptions::default()).unwrap();
        let links = Links::new(&t);
        assert_eq!(links.launch[4], 3);
        assert_eq!(links.launch_op[4], 2);
        let names: Vec<&str> = links.ancestors(links.launch_op[4], 5).map(|r| t.name(r)).collect();
        assert_eq!(names, ["nccl:all_reduce", "c10d::allreduce_", "ProfilerStep#1"]);
    }
}
