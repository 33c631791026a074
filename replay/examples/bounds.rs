//! Per trace: what bounds the identity replay's critical path, and the
//! speed-up of `--scale compute=2` (the table in BENCHMARKS.md).
use tracecast_ingest::{Job, ReadOptions};
use tracecast_replay::{ReplayOptions, Scale, replay_job};

fn main() {
    println!("| trace | GPU busy % | critical path: GPU % / host % | compute=2 speed-up |");
    println!("|---|---|---|---|");
    for path in std::env::args().skip(1) {
        let p = std::path::PathBuf::from(&path);
        let Ok(files) = tracecast_ingest::job::trace_files(&p) else { continue };
        let job = Job::read(p.clone(), &files, &ReadOptions::default(), &|_| {});
        if job.ranks.is_empty() {
            continue;
        }
        let base = replay_job(&job, &ReplayOptions::default());
        let mut opts = ReplayOptions::default();
        opts.scale = Scale { compute: 2.0, ..Scale::default() };
        let fast = replay_job(&job, &opts);
        let busy: f64 = base.ranks.iter().map(|r| r.measured.busy_us).sum::<f64>();
        let span: f64 = base.ranks.iter().map(|r| r.measured.gpu_span_us).sum::<f64>();
        let [c, m, mem, cpu, l, u] = base.critical_path.percent();
        let name = path.split("shared/traces/").last().unwrap_or(&path);
        println!(
            "| {name} | {:.0} | {:.0} / {:.0} (unexplained {u:.1}) | {:.3}× |",
            100.0 * busy / span.max(1.0),
            c + m + mem,
            cpu + l,
            fast.speedup
        );
    }
}
