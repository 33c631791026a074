//! Reads trace files (one job) and computes the full breakdown, printing the
//! time of each phase: the program `bench/run.sh` measures (wall time and peak
//! memory) without the CLI's table and plotting dependencies.
//!
//! `cargo run --release -p tracecast-ingest --example analyze_file -- FILE...`

use std::path::PathBuf;
use std::time::Instant;

use tracecast_ingest::analysis::{AnalyzeOptions, WindowMode, analyze_job};
use tracecast_ingest::{Job, ReadOptions};

fn main() {
    let files: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if files.is_empty() {
        eprintln!("usage: analyze_file FILE...");
        std::process::exit(2);
    }
    if std::env::var_os("TRACECAST_PHASES").is_some() {
        for f in &files {
            let a = Instant::now();
            let text = tracecast_ingest::kineto::read_text(f).unwrap();
            let b = Instant::now();
            let t = tracecast_ingest::kineto::parse_bytes(&text, f, &ReadOptions::default()).unwrap();
            let c = Instant::now();
            eprintln!("inflate {:.3}s parse {:.3}s events {}", (b - a).as_secs_f64(), (c - b).as_secs_f64(), t.events.len());
        }
    }
    let t0 = Instant::now();
    let job = Job::read(files[0].clone(), &files, &ReadOptions::default(), &|_| {});
    let t1 = Instant::now();
    for e in &job.failures {
        eprintln!("error: {e}");
    }
    let mut opts = AnalyzeOptions::default();
    opts.window = WindowMode::All;
    let a = analyze_job(&job, &opts);
    let t2 = Instant::now();
    let bytes: u64 = job.ranks.iter().map(|r| r.trace.json_bytes).sum();
    let events: usize = job.ranks.iter().map(|r| r.trace.events.len()).sum();
    let read_s = (t1 - t0).as_secs_f64();
    let total_s = (t2 - t0).as_secs_f64();
    println!(
        "json_mb={:.1} events={} read_s={:.3} analyze_s={:.3} total_s={:.3} mb_per_s={:.0} exposed_comm_us={:.1}",
        bytes as f64 / 1e6,
        events,
        read_s,
        (t2 - t1).as_secs_f64(),
        total_s,
        bytes as f64 / 1e6 / total_s,
        a.totals.breakdown.exposed_comm_us
    );
}
