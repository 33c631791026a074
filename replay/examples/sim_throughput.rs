//! Simulator throughput: a synthetic graph shaped like a training step on many
//! streams (host chains launching kernels, stream order, cross-stream waits),
//! timed in events (task starts and ends) per second on one core.
//!
//! `cargo run --release -p tracecast-replay --example sim_throughput -- [TASKS] [queue]`

use std::time::Instant;

use tracecast_replay::sim::{At, Graph, simulate};

fn main() {
    let tasks: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2_000_000);
    let mut g = Graph::default();
    let mut x: u64 = 1;
    let mut rand = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let streams = 8usize;
    let mut last_host: Option<u32> = None;
    let mut last_on_stream = vec![None::<u32>; streams];
    for _ in 0..tasks / 2 {
        let host = g.task(3_000 + (rand() % 5_000) as i64, if last_host.is_none() { 0 } else { i64::MIN });
        if let Some(h) = last_host {
            g.edge(h, At::End, host, At::Start, (rand() % 10_000) as i64);
        }
        let s = (rand() % streams as u64) as usize;
        let k = g.task(5_000 + (rand() % 500_000) as i64, i64::MIN);
        g.edge(host, At::Start, k, At::Start, 5_000);
        if let Some(p) = last_on_stream[s] {
            g.edge(p, At::End, k, At::Start, 0);
        }
        let other = (s + 1) % streams;
        if rand() % 8 == 0
            && let Some(o) = last_on_stream[other]
        {
            g.edge(o, At::End, k, At::Start, 0);
        }
        last_on_stream[s] = Some(k);
        last_host = Some(host);
    }
    // `queue`: the same constraints listed in reverse, so the simulator cannot
    // sweep them in order and takes its priority queue (as for measured traces,
    // whose edges are not built in program order).
    if std::env::args().any(|a| a == "queue") {
        g.edges.reverse();
    }
    let t = Instant::now();
    let s = simulate(&g);
    let secs = t.elapsed().as_secs_f64();
    let events = 2 * g.len();
    println!(
        "tasks={} edges={} events={} seconds={:.3} events_per_s={:.2}M makespan_ms={:.1} unscheduled={}",
        g.len(),
        g.edges.len(),
        events,
        secs,
        events as f64 / secs / 1e6,
        s.end_ns.iter().max().copied().unwrap_or(0) as f64 / 1e6,
        s.unscheduled.len()
    );
}
