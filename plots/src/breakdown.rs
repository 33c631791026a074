//! The §3 breakdown as stacked bars: per rank (shares of the GPU span) and
//! per step over time (milliseconds, mean over ranks): compute alone,
//! communication hidden under compute, exposed communication, memory alone, idle.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tracecast_ingest::analysis::{Breakdown, JobAnalysis};

use crate::bars::{Bars, COMPUTE, EXPOSED, IDLE, MEMORY, OVERLAPPED, Series};
use crate::chart::{Error, write_chart};

/// Segment labels and colours in drawing order.
pub const SEGMENTS: [(&str, (u8, u8, u8)); 5] = [
    ("compute only", COMPUTE),
    ("comm under compute", OVERLAPPED),
    ("exposed comm", EXPOSED),
    ("memory / other busy", MEMORY),
    ("idle", IDLE),
];

/// The five segments of a breakdown, µs; they add up to the GPU span.
pub fn segments(b: &Breakdown) -> [f64; 5] {
    let compute_only = b.compute_us - b.overlap_us;
    let other_busy = b.busy_us - b.compute_us - b.exposed_comm_us;
    [compute_only.max(0.0), b.overlap_us.max(0.0), b.exposed_comm_us.max(0.0), other_busy.max(0.0), b.idle_us.max(0.0)]
}

fn series(rows: &[[f64; 5]]) -> Vec<Series> {
    SEGMENTS
        .iter()
        .enumerate()
        .map(|(k, (label, color))| Series { label: (*label).into(), color: *color, values: rows.iter().map(|r| r[k]).collect() })
        .collect()
}

/// Per-rank shares of the GPU span.
pub fn rank_breakdown(job: &JobAnalysis) -> Bars {
    let rows: Vec<[f64; 5]> = job
        .ranks
        .iter()
        .map(|r| {
            let span = r.breakdown.gpu_span_us.max(1e-9);
            segments(&r.breakdown).map(|v| 100.0 * v / span)
        })
        .collect();
    Bars {
        title: format!("GPU time by rank — {:.1} % exposed communication", 100.0 * job.totals.exposed_comm_fraction),
        x_label: "rank".into(),
        y_label: "share of GPU span (%)".into(),
        categories: job.ranks.iter().map(|r| r.rank.to_string()).collect(),
        series: series(&rows),
        stacked: true,
    }
}

/// Per step, the breakdown in ms averaged over the ranks that ran the step;
/// `None` when the job has no steps.
pub fn step_breakdown(job: &JobAnalysis) -> Option<Bars> {
    let mut by_step: BTreeMap<i64, ([f64; 5], usize)> = BTreeMap::new();
    for r in &job.ranks {
        for s in &r.steps {
            let e = by_step.entry(s.step).or_insert(([0.0; 5], 0));
            for (a, v) in e.0.iter_mut().zip(segments(&s.breakdown)) {
                *a += v / 1000.0;
            }
            e.1 += 1;
        }
    }
    if by_step.is_empty() {
        return None;
    }
    let rows: Vec<[f64; 5]> = by_step.values().map(|(v, n)| v.map(|x| x / *n as f64)).collect();
    Some(Bars {
        title: "GPU time per step (mean over ranks)".into(),
        x_label: "step".into(),
        y_label: "time (ms)".into(),
        categories: by_step.keys().map(|k| k.to_string()).collect(),
        series: series(&rows),
        stacked: true,
    })
}

/// Writes `STEM.svg` and `STEM.png` with the job's per-rank breakdown.
pub fn write_breakdown(job: &JobAnalysis, stem: &Path) -> Result<Vec<PathBuf>, Error> {
    write_chart(&rank_breakdown(job), stem)
}
