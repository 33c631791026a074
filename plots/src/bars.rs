//! Bar charts: stacked (shares of a whole: the breakdowns) or grouped
//! (measured against replayed), one group per category.

use plotters::prelude::*;

use crate::chart::{Chart, collecting_tips, exact, si, tip};

/// One series of bars.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Fill colour (r, g, b).
    pub color: (u8, u8, u8),
    /// One value per category.
    pub values: Vec<f64>,
}

/// Bars per category, stacked or side by side.
#[derive(Debug, Clone)]
pub struct Bars {
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label, with its unit.
    pub y_label: String,
    /// Category names along x (ranks, steps, runs).
    pub categories: Vec<String>,
    /// The series.
    pub series: Vec<Series>,
    /// Stack the series (true) or put them side by side.
    pub stacked: bool,
}

/// The colours of the §3 breakdown, shared by every chart that shows it.
pub const COMPUTE: (u8, u8, u8) = (76, 114, 176);
/// Communication hidden under compute.
pub const OVERLAPPED: (u8, u8, u8) = (129, 178, 154);
/// Exposed communication.
pub const EXPOSED: (u8, u8, u8) = (214, 39, 40);
/// Memory copies and other busy time.
pub const MEMORY: (u8, u8, u8) = (221, 170, 51);
/// Idle.
pub const IDLE: (u8, u8, u8) = (200, 200, 200);

impl Bars {
    fn top(&self) -> f64 {
        let n = self.categories.len();
        let per = |i: usize| -> f64 {
            let v = self.series.iter().map(|s| s.values.get(i).copied().unwrap_or(0.0).max(0.0));
            if self.stacked { v.sum() } else { v.fold(0.0, f64::max) }
        };
        let top = (0..n).map(per).fold(0.0, f64::max);
        // A share of a whole ends at 100 %.
        if self.y_label.contains('%') && top <= 100.0 + 1e-6 && top > 0.0 {
            return 100.0;
        }
        // The legend sits beside the plot, so bars need only a little headroom.
        if top > 0.0 { top * 1.05 } else { 1.0 }
    }
}

/// Width of the legend column right of the plot, px.
const LEGEND_PX: u32 = 170;

impl Chart for Bars {
    fn draw_on<DB: DrawingBackend>(&self, root: DrawingArea<DB, plotters::coord::Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let n = self.categories.len().max(1) as u32;
        // plotters' segmented axis has at least two segments: one category takes the middle of
        // three, centred (it had filled the left half beside an empty, unlabelled second slot).
        let first = u32::from(n == 1);
        let segments = if n == 1 { 3 } else { n };
        let top = self.top();
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 22))
            .margin(16)
            // Room on the right for the legend, clear of the bars (shares fill the plot to 100 %).
            .margin_right(LEGEND_PX)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d((0u32..segments - 1).into_segmented(), 0.0..top)
            .map_err(|e| e.to_string())?;
        // Many categories: label every k-th so the labels never overlap.
        let every = (self.categories.len() / 24).max(1);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .x_labels((segments as usize).clamp(2, 24))
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) if *i >= first && ((*i - first) as usize).is_multiple_of(every) => {
                    self.categories.get((*i - first) as usize).cloned().unwrap_or_default()
                }
                _ => String::new(),
            })
            .y_label_formatter(&|v| si(*v))
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 17))
            .draw()
            .map_err(|e| e.to_string())?;
        let groups = self.series.len().max(1) as u32;
        // Pixels per category, as the axis places them (an estimate from the chart's width had
        // been 8 px wider than the plot's: side-by-side bars overlapped by that much).
        let at = |i: u32| chart.backend_coord(&(SegmentValue::Exact(i), 0.0)).0;
        let category_px = u32::try_from(at(first + 1) - at(first)).unwrap_or(0);
        let gap = (category_px / 10).clamp(1, 12);
        let slot = category_px.saturating_sub(2 * gap) / groups;
        if collecting_tips() {
            for (k, s) in self.series.iter().enumerate() {
                for (i, &v) in s.values.iter().enumerate().filter(|(_, v)| **v > 0.0) {
                    let (base, (left, right)) = if self.stacked {
                        (self.series[..k].iter().map(|p| p.values.get(i).copied().unwrap_or(0.0).max(0.0)).sum(), (gap, gap))
                    } else {
                        (0.0, (gap + k as u32 * slot, gap + (groups - 1 - k as u32) * slot + 1))
                    };
                    let (x0, y0) = chart.backend_coord(&(SegmentValue::Exact(i as u32 + first), base));
                    let (x1, y1) = chart.backend_coord(&(SegmentValue::Exact(i as u32 + first + 1), base + v));
                    let category = self.categories.get(i).map_or(String::new(), |c| format!("{} {c}: ", self.x_label));
                    tip(
                        (x0 + left as i32, y0),
                        (x1 - right as i32, y1),
                        format!("{category}{} = {} ({})", s.label, exact(v), self.y_label),
                    );
                }
            }
        }
        for (k, s) in self.series.iter().enumerate() {
            let color = RGBColor(s.color.0, s.color.1, s.color.2);
            let bars = s.values.iter().enumerate().map(|(i, &v)| {
                let v = v.max(0.0);
                let x0 = SegmentValue::Exact(i as u32 + first);
                let x1 = SegmentValue::Exact(i as u32 + first + 1);
                if self.stacked {
                    let base: f64 = self.series[..k].iter().map(|p| p.values.get(i).copied().unwrap_or(0.0).max(0.0)).sum();
                    let mut bar = Rectangle::new([(x0, base), (x1, base + v)], color.filled());
                    bar.set_margin(0, 0, gap, gap);
                    bar
                } else {
                    // Side by side: series k takes the k-th slot of the category's width.
                    let mut bar = Rectangle::new([(x0, 0.0), (x1, v)], color.filled());
                    // One pixel short on the right: a rectangle covers both its edge pixels.
                    bar.set_margin(0, 0, gap + k as u32 * slot, gap + (groups - 1 - k as u32) * slot + 1);
                    bar
                }
            });
            chart.draw_series(bars).map_err(|e| e.to_string())?;
        }
        // The legend, in the right margin, top to bottom in series order.
        let (w, _) = self.size();
        let x = w as i32 - LEGEND_PX as i32 + 8;
        for (k, s) in self.series.iter().enumerate() {
            let y = 60 + 22 * k as i32;
            let color = RGBColor(s.color.0, s.color.1, s.color.2);
            root.draw(&Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled())).map_err(|e| e.to_string())?;
            root.draw(&Text::new(s.label.as_str(), (x + 20, y - 8), ("sans-serif", 14))).map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The x of every bar's left and right edges in an SVG (the compute colour; not the legend's square or a tooltip).
    fn bar_edges(svg: &str) -> Vec<(f64, f64)> {
        let attr = |r: &str, name: &str| -> Option<f64> { r.split(&format!(" {name}=\"")).nth(1)?.split('"').next()?.parse().ok() };
        svg.split("<rect")
            .skip(1)
            .filter(|r| r.contains("fill=\"#4C72B0\"") || r.contains("fill=\"#4c72b0\""))
            .filter(|r| attr(r, "height").is_some_and(|h| h > 20.0) && !r.contains("transparent"))
            .filter_map(|r| Some((attr(r, "x")?, attr(r, "x")? + attr(r, "width")?)))
            .collect()
    }

    /// One category (one rank, one step) draws its bar in the middle of the plot, as one of
    /// three slots, and labels only it (it had filled the left half beside an empty slot).
    #[test]
    fn one_category_is_drawn_in_the_middle() {
        let chart = |categories: Vec<String>| Bars {
            title: "t".into(),
            x_label: "rank".into(),
            y_label: "ms".into(),
            series: vec![Series { label: "compute".into(), color: COMPUTE, values: vec![5.0; categories.len()] }],
            categories,
            stacked: true,
        };
        let svg = crate::chart::to_svg(&chart(vec!["r3".into()])).unwrap();
        let bars = bar_edges(&svg);
        assert_eq!(bars.len(), 1, "{svg}");
        let (w, _) = chart(vec!["r3".into()]).size();
        let centre = (bars[0].0 + bars[0].1) / 2.0;
        // The plot runs from the y labels (~96 px) to the legend's column (w − 170 − 16).
        let (left, right) = (96.0, f64::from(w) - 186.0);
        assert!((centre - (left + right) / 2.0).abs() < 0.05 * (right - left), "bar {bars:?} in {left}..{right}");
        assert_eq!(svg.matches(">\nr3\n<").count(), 1, "the category labelled once");
        // Two categories keep their two halves.
        let bars = bar_edges(&crate::chart::to_svg(&chart(vec!["0".into(), "1".into()])).unwrap());
        assert_eq!(bars.len(), 2);
        assert!(bars[0].1 <= bars[1].0);
    }

    /// Series side by side do not overlap (measured and replayed had overlapped by 8 px).
    #[test]
    fn side_by_side_bars_do_not_overlap() {
        for n in [1usize, 4] {
            let chart = Bars {
                title: "t".into(),
                x_label: "rank".into(),
                y_label: "ms".into(),
                series: vec![
                    Series { label: "measured".into(), color: COMPUTE, values: vec![5.0; n] },
                    Series { label: "replayed".into(), color: (0xDD, 0x84, 0x52), values: vec![5.0; n] },
                ],
                categories: (0..n).map(|i| i.to_string()).collect(),
                stacked: false,
            };
            let svg = crate::chart::to_svg(&chart).unwrap();
            let attr = |r: &str, name: &str| -> Option<f64> { r.split(&format!(" {name}=\"")).nth(1)?.split('"').next()?.parse().ok() };
            let mut bars: Vec<(f64, f64)> = svg
                .split("<rect")
                .skip(1)
                .filter(|r| {
                    attr(r, "height").is_some_and(|h| h > 20.0)
                        && !r.contains("transparent")
                        && !r.contains("#FFFFFF")
                        && !r.contains("#ffffff")
                })
                .filter_map(|r| Some((attr(r, "x")?, attr(r, "x")? + attr(r, "width")?)))
                .collect();
            bars.sort_by(|a, b| a.0.total_cmp(&b.0));
            assert_eq!(bars.len(), 2 * n, "{svg}");
            assert!(bars.windows(2).all(|w| w[0].1 <= w[1].0), "{n} categories: {bars:?}");
        }
    }
}
