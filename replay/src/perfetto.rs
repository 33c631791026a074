//! The replayed timeline as Chrome-trace JSON that opens in ui.perfetto.dev:
//! one process per rank, one track per host thread and GPU stream (with extra
//! lanes where slices would otherwise partly overlap, so every track nests
//! strictly), and flow arrows along the critical path.

use std::io::Write;

use rustc_hash::FxHashMap;
use tracecast_ingest::Job;
use tracecast_ingest::analysis::ActivityClass;

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

/// Writes the replayed timeline of `eg` to `w`.
pub fn write(w: &mut impl Write, job: &Job, eg: &ExecGraph, s: &Schedule, critical: &[u32]) -> std::io::Result<()> {
    let t0 = s.start_ns.iter().copied().filter(|t| *t > i64::MIN).min().unwrap_or(0);
    // Track of each task: (rank, host thread or GPU stream), then a lane that keeps slices nested.
    // Unexplained waits are gaps on the GPU track, not slices.
    let mut order: Vec<usize> = (0..eg.origin.len()).filter(|&t| eg.origin[t].kind != TaskKind::Wait).collect();
    order.sort_by_key(|&t| (eg.origin[t].rank, s.start_ns[t], std::cmp::Reverse(s.end_ns[t]), t));
    let mut lanes: FxHashMap<(usize, bool, i64, i64), Vec<i64>> = FxHashMap::default(); // lane ends
    let mut track_ids: FxHashMap<(usize, bool, i64, i64, usize), i64> = FxHashMap::default();
    let mut tid_of = vec![0i64; eg.origin.len()];
    let mut names: Vec<(usize, i64, String)> = Vec::new();
    for &t in &order {
        let o = eg.origin[t];
        let trace = &job.ranks[o.rank].trace;
        let row = o.row as usize;
        let gpu = matches!(o.kind, TaskKind::Gpu(_));
        let key = (o.rank, gpu, trace.events.pid[row], trace.events.tid[row]);
        let ends = lanes.entry(key).or_default();
        // A lane whose last slice ended before this one starts, or nests it.
        let lane = match ends.iter().position(|&e| e <= s.start_ns[t]) {
            Some(l) => l,
            None => {
                ends.push(i64::MIN);
                ends.len() - 1
            }
        };
        ends[lane] = s.end_ns[t];
        let next = track_ids.len() as i64 + 1;
        let id = *track_ids.entry((key.0, key.1, key.2, key.3, lane)).or_insert_with(|| {
            let label = if gpu { format!("GPU {} stream {}", key.2, key.3) } else { format!("thread {}", key.3) };
            names.push((o.rank, next, if lane == 0 { label } else { format!("{label} ({})", lane + 1) }));
            next
        });
        tid_of[t] = id;
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
    for (r, rank) in job.ranks.iter().enumerate() {
        sep(w)?;
        write!(
            w,
            "{{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": {r}, \"tid\": 0, \"args\": {{\"name\": \"rank {}\"}}}}",
            rank.rank
        )?;
    }
    for (rank, tid, label) in &names {
        sep(w)?;
        write!(
            w,
            "{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {rank}, \"tid\": {tid}, \"args\": {{\"name\": \"{}\"}}}}",
            escape(label)
        )?;
    }
    for &t in &order {
        let o = eg.origin[t];
        let name = job.ranks[o.rank].trace.name(o.row as usize);
        let cat = match o.kind {
            TaskKind::Host | TaskKind::Wait => "runtime",
            TaskKind::Gpu(ActivityClass::Compute) => "compute",
            TaskKind::Gpu(ActivityClass::Comm) => "communication",
            TaskKind::Gpu(ActivityClass::Memory) => "memory",
        };
        sep(w)?;
        write!(
            w,
            "{{\"ph\": \"X\", \"cat\": \"{cat}\", \"name\": \"{}\", \"pid\": {}, \"tid\": {}, \"ts\": {}, \"dur\": {}}}",
            escape(name),
            o.rank,
            tid_of[t],
            us(s.start_ns[t], t0),
            us(s.end_ns[t] - s.start_ns[t] + t0, t0)
        )?;
    }
    // Flow arrows between consecutive tasks on the critical path (earliest first).
    let mut tasks: Vec<usize> = critical.iter().rev().map(|e| *e as usize / 2).filter(|&t| eg.origin[t].kind != TaskKind::Wait).collect();
    tasks.dedup();
    for (id, pair) in tasks.windows(2).enumerate() {
        let (a, b) = (pair[0], pair[1]);
        let (oa, ob) = (eg.origin[a], eg.origin[b]);
        sep(w)?;
        write!(
            w,
            "{{\"ph\": \"s\", \"cat\": \"critical\", \"name\": \"critical path\", \"id\": {id}, \"pid\": {}, \"tid\": {}, \"ts\": {}}}",
            oa.rank,
            tid_of[a],
            us(s.start_ns[a], t0)
        )?;
        sep(w)?;
        write!(
            w,
            "{{\"ph\": \"f\", \"bp\": \"e\", \"cat\": \"critical\", \"name\": \"critical path\", \"id\": {id}, \"pid\": {}, \"tid\": {}, \"ts\": {}}}",
            ob.rank,
            tid_of[b],
            us(s.start_ns[b], t0)
        )?;
    }
    writeln!(w, "\n]}}")
}
