//! Prints, per trace, the distribution of gaps between queued kernels and of
//! launch-to-start latency on idle streams (evidence for the graph's rules).
use tracecast_ingest::link::Links;
use tracecast_ingest::{EventKind, Job, ReadOptions};

fn q(v: &mut [i64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p) as usize] as f64 / 1000.0
}

fn main() {
    for path in std::env::args().skip(1) {
        let p = std::path::PathBuf::from(&path);
        let files = tracecast_ingest::job::trace_files(&p).unwrap();
        let job = Job::read(p.clone(), &files, &ReadOptions::default(), &|_| {});
        let t = &job.ranks[0].trace;
        let ev = &t.events;
        let links = Links::new(t);
        let mut streams: std::collections::HashMap<(i64, i64), Vec<usize>> = Default::default();
        for i in t.gpu_activity() {
            streams.entry((ev.pid[i], ev.tid[i])).or_default().push(i);
        }
        let (mut queued, mut lat, mut all) = (Vec::new(), Vec::new(), Vec::new());
        for rows in streams.values_mut() {
            rows.sort_by_key(|&i| ev.ts_ns[i]);
            for k in 1..rows.len() {
                let (p, i) = (rows[k - 1], rows[k]);
                let gap = ev.ts_ns[i] - ev.end_ns(p);
                all.push(gap);
                if let Some(l) = links.launch_ns(t, i) {
                    if l + 5_000 < ev.end_ns(p) {
                        queued.push(gap);
                    }
                    if l > ev.end_ns(p) {
                        lat.push(ev.ts_ns[i] - l);
                    }
                }
            }
        }
        let mut calls: Vec<i64> =
            (0..ev.len()).filter(|&i| ev.kind[i] == EventKind::Runtime && t.name(i).contains("aunch")).map(|i| ev.dur_ns[i]).collect();
        println!(
            "{path}\n  queued n={} p10 {:.2} p50 {:.2} p90 {:.2} p99 {:.2} | all p50 {:.2} | idle-launch n={} p10 {:.1} p50 {:.1} p90 {:.1} | launch call p50 {:.1} p99 {:.1} max {:.1}",
            queued.len(),
            q(&mut queued, 0.1),
            q(&mut queued, 0.5),
            q(&mut queued, 0.9),
            q(&mut queued, 0.99),
            q(&mut all, 0.5),
            lat.len(),
            q(&mut lat, 0.1),
            q(&mut lat, 0.5),
            q(&mut lat, 0.9),
            q(&mut calls, 0.5),
            q(&mut calls, 0.99),
            q(&mut calls, 1.0)
        );
    }
}
