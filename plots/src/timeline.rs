//! The GPU timeline of one step: one lane per (rank, stream), kernels as
//! boxes coloured by kind. Runs longer than the chart has pixels are merged
//! into boxes at least a pixel wide, so a page stays small whatever the trace.

use plotters::prelude::*;

use crate::chart::{Chart, si};

/// One lane: a GPU stream of one rank.
#[derive(Debug, Clone)]
pub struct Lane {
    /// Label on the left (`rank 0 · stream 7`).
    pub label: String,
    /// (start µs, end µs, kind index into [`Timeline::kinds`]), sorted by start.
    pub spans: Vec<(f64, f64, usize)>,
}

/// Lanes over a common time axis.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// Title above the plot.
    pub title: String,
    /// The lanes, top to bottom.
    pub lanes: Vec<Lane>,
    /// Kinds: legend label and colour.
    pub kinds: Vec<(String, (u8, u8, u8))>,
}

/// Width of the drawing.
const WIDTH: u32 = 1100;
/// Height of one lane.
const LANE_PX: u32 = 26;

impl Timeline {
    /// Merges spans narrower than `resolution` µs with their neighbours of the
    /// same kind: what a pixel can show. Returns the spans drawn per lane.
    pub fn downsample(&mut self, pixels: u32) {
        let (lo, hi) = self.range();
        let resolution = (hi - lo) / f64::from(pixels.max(1));
        let kinds = self.lanes.iter().flat_map(|l| l.spans.iter().map(|s| s.2 + 1)).max().unwrap_or(1);
        for lane in &mut self.lanes {
            let mut out: Vec<(f64, f64, usize)> = Vec::with_capacity(lane.spans.len().min(4 * pixels as usize));
            // Time per kind inside the box being built: a merged box shows its dominant kind.
            let mut time = vec![0.0; kinds];
            let dominant = |time: &[f64]| time.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |x| x.0);
            for &(s, e, k) in &lane.spans {
                let merge = out.last().is_some_and(|last: &(f64, f64, usize)| {
                    // Closer than a pixel, and either the same kind or too narrow to show apart.
                    s - last.1 < resolution && (last.2 == k || e - s < resolution || last.1 - last.0 < resolution)
                });
                if merge && let Some(last) = out.last_mut() {
                    last.1 = last.1.max(e);
                    time[k] += e - s;
                    last.2 = dominant(&time);
                } else {
                    time.iter_mut().for_each(|t| *t = 0.0);
                    time[k] = e - s;
                    out.push((s, e.max(s + resolution * 0.5), k));
                }
            }
            lane.spans = out;
        }
    }

    fn range(&self) -> (f64, f64) {
        let spans = self.lanes.iter().flat_map(|l| &l.spans);
        let lo = spans.clone().map(|s| s.0).fold(f64::INFINITY, f64::min);
        let hi = spans.map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
        if lo.is_finite() && hi > lo { (lo, hi) } else { (0.0, 1.0) }
    }

    /// Spans drawn, over all lanes.
    pub fn spans(&self) -> usize {
        self.lanes.iter().map(|l| l.spans.len()).sum()
    }
}

impl Chart for Timeline {
    fn size(&self) -> (u32, u32) {
        (WIDTH, 150 + LANE_PX * self.lanes.len().max(1) as u32)
    }

    fn draw_on<DB: DrawingBackend>(&self, root: DrawingArea<DB, plotters::coord::Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (lo, hi) = self.range();
        let n = self.lanes.len().max(1);
        let longest = self.lanes.iter().map(|l| l.label.chars().count()).max().unwrap_or(4) as u32;
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(45)
            .y_label_area_size((longest * 8).clamp(60, 220))
            // Room on the right for the legend, clear of the lanes.
            .build_cartesian_2d(0.0..(hi - lo) * 1.3, (0..n as i32).into_segmented())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("time since the step's first kernel (µs)")
            .x_label_formatter(&|v| si(*v))
            .y_labels(n)
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => usize::try_from(*i)
                    .ok()
                    .and_then(|i| (n - 1).checked_sub(i))
                    .and_then(|k| self.lanes.get(k))
                    .map_or(String::new(), |l| l.label.clone()),
                _ => String::new(),
            })
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 16))
            .draw()
            .map_err(|e| e.to_string())?;
        for (k, (label, c)) in self.kinds.iter().enumerate() {
            let color = RGBColor(c.0, c.1, c.2);
            let boxes = self.lanes.iter().enumerate().flat_map(|(i, lane)| {
                let row = (n - 1 - i) as i32;
                lane.spans.iter().filter(move |s| s.2 == k).map(move |&(s, e, _)| {
                    let mut r =
                        Rectangle::new([(s - lo, SegmentValue::Exact(row)), (e - lo, SegmentValue::Exact(row + 1))], color.filled());
                    r.set_margin(4, 4, 0, 0);
                    r
                })
            });
            chart
                .draw_series(boxes)
                .map_err(|e| e.to_string())?
                .label(label.as_str())
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downsampling_merges_what_a_pixel_cannot_show_and_keeps_the_extent() {
        // 10 000 kernels of 1 µs with 1 µs gaps over 20 ms, on 1000 pixels (20 µs each).
        let spans: Vec<(f64, f64, usize)> = (0..10_000).map(|i| (2.0 * i as f64, 2.0 * i as f64 + 1.0, i % 2)).collect();
        let mut t = Timeline { title: "t".into(), lanes: vec![Lane { label: "l".into(), spans }], kinds: vec![] };
        let before = t.range();
        t.downsample(1000);
        assert!(t.spans() <= 2000, "{} spans", t.spans());
        assert_eq!(t.range(), before);
        // Long kernels are kept apart.
        let spans = vec![(0.0, 500.0, 0), (600.0, 1000.0, 1)];
        let mut t = Timeline { title: "t".into(), lanes: vec![Lane { label: "l".into(), spans: spans.clone() }], kinds: vec![] };
        t.downsample(1000);
        assert_eq!(t.lanes[0].spans, spans);
    }
}
