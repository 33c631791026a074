//! Per-rank stacked bars of the GPU-time breakdown: compute alone,
//! communication hidden under compute, exposed communication, memory alone, idle.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use tracecast_ingest::analysis::JobAnalysis;

use crate::chart::{Error, register_font, render};

/// Segments in drawing order with their colours.
const SEGMENTS: [(&str, RGBColor); 5] = [
    ("compute only", RGBColor(76, 114, 176)),
    ("comm under compute", RGBColor(129, 178, 154)),
    ("exposed comm", RGBColor(214, 39, 40)),
    ("memory / other busy", RGBColor(221, 170, 51)),
    ("idle", RGBColor(200, 200, 200)),
];

/// Percent of the GPU span per segment for each rank.
fn shares(job: &JobAnalysis) -> Vec<(u32, [f64; 5])> {
    job.ranks
        .iter()
        .map(|r| {
            let b = &r.breakdown;
            let span = b.gpu_span_us.max(1e-9);
            let compute_only = b.compute_us - b.overlap_us;
            let other_busy = (b.busy_us - b.compute_us - b.exposed_comm_us).max(0.0);
            let pct = |v: f64| 100.0 * v.max(0.0) / span;
            (r.rank, [pct(compute_only), pct(b.overlap_us), pct(b.exposed_comm_us), pct(other_busy), pct(b.idle_us)])
        })
        .collect()
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, plotters::coord::Shift>, job: &JobAnalysis) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let rows = shares(job);
    let n = rows.len().max(1) as u32;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("GPU time by rank — {:.1} % exposed communication", 100.0 * job.totals.exposed_comm_fraction), ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((0u32..n.saturating_sub(1).max(1)).into_segmented(), 0.0..100.0)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("rank")
        .y_desc("share of GPU span (%)")
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => rows.get(*i as usize).map_or(String::new(), |r| r.0.to_string()),
            SegmentValue::Last => String::new(),
        })
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(|e| e.to_string())?;
    for (k, (label, color)) in SEGMENTS.iter().enumerate() {
        let bars = rows.iter().enumerate().map(|(i, (_, s))| {
            let base: f64 = s[..k].iter().sum();
            let x0 = SegmentValue::Exact(i as u32);
            let x1 = SegmentValue::Exact(i as u32 + 1);
            let mut bar = Rectangle::new([(x0, base), (x1, base + s[k])], color.filled());
            bar.set_margin(0, 0, 6, 6);
            bar
        });
        let color = *color;
        chart
            .draw_series(bars)
            .map_err(|e| e.to_string())?
            .label(*label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// Writes `STEM.svg` and `STEM.png` with the job's per-rank breakdown.
pub fn write_breakdown(job: &JobAnalysis, stem: &Path) -> Result<Vec<PathBuf>, Error> {
    register_font();
    render(stem, |root| draw(root, job), |root| draw(root, job))
}
