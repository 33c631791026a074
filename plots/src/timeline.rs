//! The GPU timeline of one step: one lane per (rank, stream), kernels as
//! boxes coloured by kind. As a picture ([`Timeline`], SVG/PNG) runs longer
//! than the chart has pixels are merged into boxes at least a pixel wide; in
//! the page (its explorable timeline) every kernel is there, with its name,
//! stream, times, launching op, shapes and work, and the page's script zooms,
//! pans, shows each kernel on hover and highlights the ones a search matches
//! (merging only what a pixel cannot show at the current zoom).

use std::fmt::Write as _;

use plotters::prelude::*;

use crate::chart::{Chart, collecting_tips, exact, si, tip};

pub use tracecast_calibrate::timeline::{KernelSpan, StepKernels};

fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '<' => out.push_str("\\u003c"), // never `</script>` inside the data
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The picture of a step: every lane's spans, merged to what the chart's pixels can show.
pub(crate) fn static_timeline(step: &StepKernels) -> Timeline {
    let mut lanes: Vec<Lane> = step.lanes.iter().map(|l| Lane { label: l.clone(), spans: Vec::new() }).collect();
    for k in &step.kernels {
        if let Some(l) = lanes.get_mut(k.lane) {
            l.spans.push((k.start_us, k.start_us + k.dur_us, k.kind));
        }
    }
    for l in &mut lanes {
        l.spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let mut t = Timeline { title: step.title.clone(), lanes, kinds: step.kinds.clone() };
    t.downsample(1000);
    t
}

/// The explorable timeline as HTML, `<div class="timeline">` and what is in
/// it: the kernels as JSON data (names, ops and shapes in one string table)
/// that the page's script finds by the class and draws.
pub(crate) fn explorable_html(step: &StepKernels) -> String {
    // Names, ops and shapes repeat: one string table.
    fn intern<'a>(s: &'a str, strings: &mut Vec<&'a str>, index: &mut std::collections::HashMap<&'a str, usize>) -> usize {
        *index.entry(s).or_insert_with(|| {
            strings.push(s);
            strings.len() - 1
        })
    }
    let mut strings: Vec<&str> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut rows = String::new();
    for (i, k) in step.kernels.iter().enumerate() {
        if i > 0 {
            rows.push(',');
        }
        let name = intern(&k.name, &mut strings, &mut index);
        let op = k.op.as_deref().map_or(-1, |o| intern(o, &mut strings, &mut index) as i64);
        let shapes = k.shapes.as_deref().map_or(-1, |o| intern(o, &mut strings, &mut index) as i64);
        let num = |v: Option<f64>| v.map_or("null".to_string(), |v| format!("{v:.6e}"));
        let _ = write!(
            rows,
            "[{},{:.3},{:.3},{},{name},{op},{shapes},{},{}]",
            k.lane,
            k.start_us,
            k.dur_us,
            k.kind,
            num(k.flops),
            num(k.bytes)
        );
    }
    let mut data = String::from("{\"lanes\":[");
    for (i, l) in step.lanes.iter().enumerate() {
        if i > 0 {
            data.push(',');
        }
        json_str(&mut data, l);
    }
    data.push_str("],\"kinds\":[");
    for (i, (label, c)) in step.kinds.iter().enumerate() {
        if i > 0 {
            data.push(',');
        }
        data.push('[');
        json_str(&mut data, label);
        let _ = write!(data, ",\"#{:02x}{:02x}{:02x}\"]", c.0, c.1, c.2);
    }
    data.push_str("],\"strings\":[");
    for (i, s) in strings.iter().enumerate() {
        if i > 0 {
            data.push(',');
        }
        json_str(&mut data, s);
    }
    let _ = write!(data, "],\"kernels\":[{rows}]}}");
    let mut legend = String::new();
    for (label, c) in &step.kinds {
        let _ = write!(
            legend,
            "<span class=\"tl-kind\"><i style=\"background:#{:02x}{:02x}{:02x}\"></i>{}</span>",
            c.0,
            c.1,
            c.2,
            label.replace('&', "&amp;").replace('<', "&lt;")
        );
    }
    let mut html = String::new();
    let _ = write!(
        html,
        "<div class=\"timeline\"><div class=\"tl-bar\"><input type=\"search\" class=\"tl-search\" placeholder=\"search kernels, ops, shapes\" aria-label=\"search kernels\"> <span class=\"tl-hits\"></span> <button type=\"button\" class=\"tl-reset\">{reset}</button> <span class=\"tl-help\">wheel: zoom · drag: pan · hover: the kernel</span><div class=\"tl-legend\">{legend}</div></div>\
         <svg class=\"tl-svg\" viewBox=\"0 0 {WIDTH} {}\" role=\"img\" aria-label=\"{}\"></svg><script type=\"application/json\" class=\"tl-data\">{data}</script></div>",
        60 + LANE_PX * step.lanes.len().max(1) as u32,
        step.title.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;"),
        // A trace without steps is drawn whole: its button had read "whole step".
        reset = if step.step.is_some() { "whole step" } else { "whole window" },
    );
    html
}

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

/// The timeline's vertical axis: `lanes` rows of height 1 from 0 up, a tick at each
/// row's centre (plotters' segmented axis of a range counts its end as a segment too).
struct LaneAxis {
    lanes: usize,
}

impl Ranged for LaneAxis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let share = value / self.lanes.max(1) as f64;
        (f64::from(limit.0) + share * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: plotters::coord::ranged1d::KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        (0..self.lanes).map(|i| i as f64 + 0.5).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        0.0..self.lanes.max(1) as f64
    }
}

/// Width of the drawing.
const WIDTH: u32 = 1100;
/// Height of one lane.
const LANE_PX: u32 = 26;
/// Height of one entry of the timeline chart's legend, pixels (14-px labels).
const LEGEND_ROW_PX: u32 = 20;

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

    /// Per kind, whether some lane has a span of it (the legend's entries), in one pass over the spans.
    fn drawn_kinds(&self) -> Vec<bool> {
        let mut drawn = vec![false; self.kinds.len()];
        for s in self.lanes.iter().flat_map(|l| &l.spans) {
            if let Some(d) = drawn.get_mut(s.2) {
                *d = true;
            }
        }
        drawn
    }

    /// Spans drawn, over all lanes.
    pub fn spans(&self) -> usize {
        self.lanes.iter().map(|l| l.spans.len()).sum()
    }
}

impl Chart for Timeline {
    fn size(&self) -> (u32, u32) {
        // Tall enough for the legend's rows inside the plot (two lanes had left two of its seven
        // entries below its box, over the time axis' labels).
        let legend = 140 + LEGEND_ROW_PX * self.drawn_kinds().iter().filter(|d| **d).count() as u32;
        (WIDTH, (150 + LANE_PX * self.lanes.len().max(1) as u32).max(legend))
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
            // Lane i from row n − 1 − i to the next, a tick at its centre (segments of `0..n` had drawn
            // an empty lane on top; of `0..n − 1`, none at all for one lane).
            .build_cartesian_2d(0.0..(hi - lo) * 1.3, LaneAxis { lanes: n })
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("time since the first kernel drawn (µs)")
            .x_label_formatter(&|v| si(*v))
            .y_labels(n)
            .y_label_formatter(&|v| {
                let row = v.floor();
                (row >= 0.0 && row < n as f64)
                    .then(|| (n - 1).checked_sub(row as usize))
                    .flatten()
                    .and_then(|k| self.lanes.get(k))
                    .map_or(String::new(), |l| l.label.clone())
            })
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 16))
            .draw()
            .map_err(|e| e.to_string())?;
        if collecting_tips() {
            for (i, lane) in self.lanes.iter().enumerate() {
                let row = (n - 1 - i) as f64;
                for &(s, e, k) in &lane.spans {
                    let a = chart.backend_coord(&(s - lo, row));
                    let b = chart.backend_coord(&(e - lo, row + 1.0));
                    let kind = self.kinds.get(k).map_or("", |x| x.0.as_str());
                    tip(a, b, format!("{}: {kind}, {}–{} µs ({} µs)", lane.label, exact(s - lo), exact(e - lo), exact(e - s)));
                }
            }
        }
        // The legend names the kinds drawn (it had listed attention and copies on a job of neither).
        let drawn = self.drawn_kinds();
        for (k, (label, c)) in self.kinds.iter().enumerate().filter(|&(k, _)| drawn[k]) {
            let color = RGBColor(c.0, c.1, c.2);
            let boxes = self.lanes.iter().enumerate().flat_map(|(i, lane)| {
                let row = (n - 1 - i) as f64;
                lane.spans.iter().filter(move |s| s.2 == k).map(move |&(s, e, _)| {
                    let mut r = Rectangle::new([(s - lo, row), (e - lo, row + 1.0)], color.filled());
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

    /// Every legend entry of a two-lane timeline is drawn above the time axis' labels (two of
    /// seven had fallen below the legend's box, over the tick labels), and no empty lane is drawn.
    #[test]
    fn a_timeline_of_two_lanes_holds_its_legend() {
        let kinds: Vec<(String, (u8, u8, u8))> = (0..7).map(|i| (format!("kind{i}"), (10 * i as u8, 0, 0))).collect();
        let lane = |label: &str| Lane { label: label.into(), spans: (0..7).map(|k| (k as f64 * 10.0, k as f64 * 10.0 + 5.0, k)).collect() };
        let t = Timeline { title: "t".into(), lanes: vec![lane("rank 0"), lane("rank 1")], kinds };
        let svg = crate::chart::to_svg(&t).unwrap();
        // The y of a text element holding `what`.
        let y_of = |what: &str| -> f64 {
            let at = svg.find(&format!(">\n{what}\n</text>")).unwrap_or_else(|| panic!("{what} not drawn"));
            let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
            let y = tag.split(" y=\"").nth(1).unwrap().split('"').next().unwrap();
            y.parse().unwrap()
        };
        // The time axis' first tick label, below the plot.
        let axis = y_of("0");
        for i in 0..7 {
            assert!(y_of(&format!("kind{i}")) < axis - 10.0, "kind{i} at {} against the axis at {axis}", y_of(&format!("kind{i}")));
        }
        // Lanes 0 and 1 labelled, rank 0 above rank 1, and the lane's bars between them.
        assert!(y_of("rank 0") < y_of("rank 1"));
        // One lane: labelled, at the plot's middle, its bars as tall as the plot allows.
        let one = Timeline { lanes: vec![lane("rank 0")], ..t };
        let svg = crate::chart::to_svg(&one).unwrap();
        assert!(svg.contains(">\nrank 0\n<"), "one lane labelled");
        let bar_heights: Vec<f64> =
            svg.split("<rect ").skip(2).filter_map(|r| r.split(" height=\"").nth(1)?.split('"').next()?.parse().ok()).collect();
        assert!(bar_heights.iter().any(|h| *h > 20.0), "{bar_heights:?}");
    }

    /// The legend names the kinds the timeline draws, not every kind it knows (a job of GEMMs
    /// and collectives had listed attention, convolutions and copies).
    #[test]
    fn the_legend_names_only_the_kinds_drawn() {
        let kinds: Vec<(String, (u8, u8, u8))> = ["gemm", "attention", "nccl"].iter().map(|k| (k.to_string(), (0, 0, 0))).collect();
        let lane = Lane { label: "rank 0".into(), spans: vec![(0.0, 5.0, 0), (5.0, 9.0, 2)] };
        let svg = crate::chart::to_svg(&Timeline { title: "t".into(), lanes: vec![lane], kinds }).unwrap();
        assert!(svg.contains(">\ngemm\n<") && svg.contains(">\nnccl\n<"), "drawn kinds in the legend");
        assert!(!svg.contains(">\nattention\n<"), "a kind with no span is not in the legend");
    }
}
