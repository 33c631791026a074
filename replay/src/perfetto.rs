//! The replayed timeline as Chrome-trace JSON that opens in ui.perfetto.dev
//! beside the original: the tracks of the original (per rank, one process
//! per GPU and per host process, one track per GPU stream and host thread,
//! with extra lanes only where slices would otherwise partly overlap), the
//! replayed GPU work and runtime calls, the CPU ops and annotations
//! (`ProfilerStep#N` among them) moved with the runtime calls of their
//! thread, every slice with its measured time and the original args the
//! model keeps (op shapes, collective sizes and groups), and flow arrows
//! along the critical path.

use std::fmt::Write as _;
use std::io::Write;

use rustc_hash::FxHashMap;
use tracecast_ingest::analysis::ActivityClass;
use tracecast_ingest::{EventKind, Job, RankTrace};

use crate::graph::{ExecGraph, TaskKind};
use crate::sim::Schedule;

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn us(ns: i64, t0: i64) -> String {
    let d = ns - t0;
    format!("{}.{:03}", d.div_euclid(1000), d.rem_euclid(1000))
}

/// One slice of the output, before its track lane is known.
struct Slice {
    rank: usize,
    row: usize,
    gpu: bool,
    start: i64,
    end: i64,
    cat: &'static str,
    /// Task of the graph (for the critical path's arrows).
    task: Option<usize>,
}

/// Measured → replayed time on one host thread: the shift of the latest
/// replayed runtime call (start or end) at or before a measured time.
struct Warp {
    /// (measured ns, replayed − measured ns), by measured time.
    anchors: Vec<(i64, i64)>,
}

impl Warp {
    fn at(&self, t: i64) -> i64 {
        let k = self.anchors.partition_point(|a| a.0 <= t);
        let shift = if k == 0 { self.anchors.first().map_or(0, |a| a.1) } else { self.anchors[k - 1].1 };
        t + shift
    }
}

/// The original args the model keeps, as a JSON object body (may be empty).
fn original_args(trace: &RankTrace, row: usize) -> String {
    let mut out = String::new();
    if let Some(s) = trace.op_shapes_of(row) {
        let dims = s.compact_dims();
        let types: String = s.input_types.split_whitespace().collect();
        let _ = write!(out, ", \"Input Dims\": \"{}\", \"Input type\": \"{}\"", escape(&dims), escape(&types));
    }
    if let Some(c) = trace.collective_args_of(row) {
        let mut field = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                let _ = write!(out, ", \"{k}\": \"{}\"", escape(&v));
            }
        };
        field("Collective name", c.collective_name.clone());
        field("In msg nelems", c.in_nelems.map(|n| n.to_string()));
        field("Out msg nelems", c.out_nelems.map(|n| n.to_string()));
        field("dtype", c.dtype.clone());
        field("Group size", c.group_size.map(|n| n.to_string()));
        field("Process Group Name", c.pg_name.clone());
        field("Process Group Description", c.pg_desc.clone());
        field("Process Group Ranks", c.pg_ranks.clone());
    }
    let ev = &trace.events;
    if ev.correlation.get(row).is_some_and(|c| *c >= 0) {
        let _ = write!(out, ", \"correlation\": {}", ev.correlation[row]);
    }
    if ev.external_id.get(row).is_some_and(|c| *c >= 0) {
        let _ = write!(out, ", \"External id\": {}", ev.external_id[row]);
    }
    out
}

/// Writes the replayed timeline of `eg` to `w`.
pub fn write(w: &mut impl Write, job: &Job, eg: &ExecGraph, s: &Schedule, critical: &[u32]) -> std::io::Result<()> {
    // The graph's tasks (unexplained waits are gaps on the GPU track, not slices).
    let mut slices: Vec<Slice> = Vec::new();
    let mut anchors: FxHashMap<(usize, i64, i64), Vec<(i64, i64)>> = FxHashMap::default();
    for (t, o) in eg.origin.iter().enumerate() {
        if matches!(o.kind, TaskKind::Wait | TaskKind::Join) || s.start_ns[t] == i64::MIN || !s.is_scheduled(t) {
            continue;
        }
        let trace = &job.ranks[o.rank as usize].trace;
        let row = o.row as usize;
        let ev = &trace.events;
        let cat = match o.kind {
            TaskKind::Host | TaskKind::Wait | TaskKind::Join => "cuda_runtime",
            TaskKind::Gpu(ActivityClass::Compute) => "kernel",
            TaskKind::Gpu(ActivityClass::Comm) => "kernel",
            TaskKind::Gpu(ActivityClass::Memory) => match ev.kind[row] {
                EventKind::Memset => "gpu_memset",
                EventKind::Memcpy => "gpu_memcpy",
                _ => "kernel",
            },
        };
        let gpu = matches!(o.kind, TaskKind::Gpu(_));
        if !gpu {
            let a = anchors.entry((o.rank as usize, ev.pid[row], ev.tid[row])).or_default();
            a.push((ev.ts_ns[row], s.start_ns[t] - ev.ts_ns[row]));
            a.push((ev.end_ns(row), s.end_ns[t] - ev.end_ns(row)));
        }
        slices.push(Slice { rank: o.rank as usize, row, gpu, start: s.start_ns[t], end: s.end_ns[t], cat, task: Some(t) });
    }
    // CPU ops and annotations move with the runtime calls of their thread.
    let warps: FxHashMap<(usize, i64, i64), Warp> = anchors
        .into_iter()
        .map(|(k, mut a)| {
            a.sort_unstable();
            (k, Warp { anchors: a })
        })
        .collect();
    for (r, rank) in job.ranks.iter().enumerate() {
        let ev = &rank.trace.events;
        for i in 0..ev.len() {
            let cat = match ev.kind[i] {
                EventKind::CpuOp => "cpu_op",
                EventKind::UserAnnotation => "user_annotation",
                _ => continue,
            };
            let Some(warp) = warps.get(&(r, ev.pid[i], ev.tid[i])) else { continue };
            let start = warp.at(ev.ts_ns[i]);
            let end = warp.at(ev.end_ns(i)).max(start);
            slices.push(Slice { rank: r, row: i, gpu: false, start, end, cat, task: None });
        }
    }
    let t0 = slices.iter().map(|x| x.start).min().unwrap_or(0);
    // Parents before children; a slice goes on the first lane of its track
    // where it nests (or the lane is free), so every lane nests strictly.
    slices.sort_by_key(|x| (x.rank, x.start, std::cmp::Reverse(x.end), x.task.is_some(), x.row));
    let mut lanes: FxHashMap<(usize, bool, i64, i64), Vec<Vec<i64>>> = FxHashMap::default();
    let mut process_ids: FxHashMap<(usize, bool, i64), i64> = FxHashMap::default();
    let mut processes: Vec<(i64, String)> = Vec::new();
    let mut track_ids: FxHashMap<(usize, bool, i64, i64, usize), (i64, i64)> = FxHashMap::default();
    let mut threads: Vec<(i64, i64, String)> = Vec::new();
    let mut placed: Vec<(i64, i64)> = Vec::with_capacity(slices.len());
    for x in &slices {
        let ev = &job.ranks[x.rank].trace.events;
        let key = (x.rank, x.gpu, ev.pid[x.row], ev.tid[x.row]);
        let stacks = lanes.entry(key).or_default();
        let lane = stacks.iter_mut().position(|open| {
            while open.last().is_some_and(|&e| e <= x.start) {
                open.pop();
            }
            open.last().is_none_or(|&e| x.end <= e)
        });
        let lane = lane.unwrap_or_else(|| {
            stacks.push(Vec::new());
            stacks.len() - 1
        });
        stacks[lane].push(x.end);
        let next_pid = processes.len() as i64;
        let pid = *process_ids.entry((key.0, key.1, key.2)).or_insert_with(|| {
            let rank = job.ranks[x.rank].rank;
            let name = if x.gpu { format!("rank {rank} · GPU {}", key.2) } else { format!("rank {rank} · host process {}", key.2) };
            processes.push((next_pid, name));
            next_pid
        });
        let next_tid = threads.len() as i64 + 1;
        let id = *track_ids.entry((key.0, key.1, key.2, key.3, lane)).or_insert_with(|| {
            let label = if x.gpu { format!("stream {}", key.3) } else { format!("thread {}", key.3) };
            threads.push((pid, next_tid, if lane == 0 { label } else { format!("{label} ({})", lane + 1) }));
            (pid, next_tid)
        });
        placed.push(id);
    }
    writeln!(w, "{{\"displayTimeUnit\": \"ms\", \"traceEvents\": [")?;
    let mut first = true;
    let mut sep = |w: &mut dyn Write| -> std::io::Result<()> {
        if !first {
            w.write_all(b",\n")?;
        }
        first = false;
        Ok(())
    };
    for (pid, name) in &processes {
        sep(w)?;
        write!(
            w,
            "{{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": {pid}, \"tid\": 0, \"args\": {{\"name\": \"{}\"}}}}",
            escape(name)
        )?;
    }
    for (pid, tid, label) in &threads {
        sep(w)?;
        write!(
            w,
            "{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {pid}, \"tid\": {tid}, \"args\": {{\"name\": \"{}\"}}}}",
            escape(label)
        )?;
    }
    let mut tid_of_task: FxHashMap<usize, (i64, i64)> = FxHashMap::default();
    for (x, &(pid, tid)) in slices.iter().zip(&placed) {
        let trace = &job.ranks[x.rank].trace;
        let ev = &trace.events;
        if let Some(t) = x.task {
            tid_of_task.insert(t, (pid, tid));
        }
        sep(w)?;
        write!(
            w,
            "{{\"ph\": \"X\", \"cat\": \"{}\", \"name\": \"{}\", \"pid\": {pid}, \"tid\": {tid}, \"ts\": {}, \"dur\": {}, \"args\": {{\"measured ts\": {}, \"measured dur\": {}{}}}}}",
            x.cat,
            escape(trace.name(x.row)),
            us(x.start, t0),
            us(x.end - x.start + t0, t0),
            us(ev.ts_ns[x.row], 0),
            us(ev.dur_ns[x.row], 0),
            original_args(trace, x.row)
        )?;
    }
    // Flow arrows between consecutive tasks on the critical path (earliest first).
    let mut tasks: Vec<usize> = critical.iter().rev().map(|e| *e as usize / 2).filter(|t| tid_of_task.contains_key(t)).collect();
    tasks.dedup();
    for (id, pair) in tasks.windows(2).enumerate() {
        let (a, b) = (pair[0], pair[1]);
        let ((pa, ta), (pb, tb)) = (tid_of_task[&a], tid_of_task[&b]);
        sep(w)?;
        write!(
            w,
            "{{\"ph\": \"s\", \"cat\": \"critical\", \"name\": \"critical path\", \"id\": {id}, \"pid\": {pa}, \"tid\": {ta}, \"ts\": {}}}",
            us(s.start_ns[a], t0)
        )?;
        sep(w)?;
        write!(
            w,
            "{{\"ph\": \"f\", \"bp\": \"e\", \"cat\": \"critical\", \"name\": \"critical path\", \"id\": {id}, \"pid\": {pb}, \"tid\": {tb}, \"ts\": {}}}",
            us(s.start_ns[b], t0)
        )?;
    }
    writeln!(w, "\n]}}")
}
