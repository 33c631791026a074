//! A scatter with an optional fitted curve, written as SVG and PNG.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::combinators::{BindKeyPointMethod, LogCoord, WithKeyPointMethod};
use plotters::coord::ranged1d::{BoldPoints, LightPoints, Ranged};
use plotters::prelude::*;
use plotters::style::FontStyle;

/// Errors while drawing or writing a chart or the page.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Drawing failed.
    #[error("{}: cannot draw: {message}", path.display())]
    Draw {
        /// The chart file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Writing failed.
    #[error(transparent)]
    Write(#[from] tracecast_ingest::Error),
    /// A drawn part of the page, held deflated, could not be inflated again.
    #[error("cannot restore a drawn part of the page: {cause}")]
    Held {
        /// What went wrong.
        cause: std::io::Error,
    },
}

/// The font every chart uses, embedded so no system font library is needed.
const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

pub(crate) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The embedded font is valid; a failure would only lose the labels.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// Points (x, y) and a fitted curve on linear or log axes.
#[derive(Debug, Clone)]
pub struct Scatter {
    /// Title above the plot.
    pub title: String,
    /// X axis label, with its unit.
    pub x_label: String,
    /// Y axis label, with its unit.
    pub y_label: String,
    /// Measured points.
    pub points: Vec<(f64, f64)>,
    /// The fitted curve, drawn as a line through these points.
    pub curve: Vec<(f64, f64)>,
    /// Log-scale x.
    pub log_x: bool,
    /// Log-scale y.
    pub log_y: bool,
    /// A horizontal reference line (value, label), e.g. the device's peak.
    pub reference: Option<(f64, String)>,
    /// Legend of the points and of the curve.
    pub legend: [String; 2],
}

/// Something drawable on any plotters backend: the same drawing becomes the
/// report's inline SVG and, on request, PNG files.
pub trait Chart {
    /// Draws the chart onto `root`.
    fn draw_on<DB: DrawingBackend>(&self, root: DrawingArea<DB, plotters::coord::Shift>) -> Result<(), String>;
    /// Pixel size.
    fn size(&self) -> (u32, u32) {
        SIZE
    }
}

impl Chart for Scatter {
    fn draw_on<DB: DrawingBackend>(&self, root: DrawingArea<DB, plotters::coord::Shift>) -> Result<(), String> {
        draw(root, self)
    }
}

/// A hover tooltip over a mark: its pixel box and its exact values.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tip {
    pub(crate) x0: i32,
    pub(crate) y0: i32,
    pub(crate) x1: i32,
    pub(crate) y1: i32,
    pub(crate) text: String,
}

thread_local! {
    /// Tooltips of the chart being drawn into an SVG (none while drawing PNGs).
    static TIPS: std::cell::RefCell<Option<Vec<Tip>>> = const { std::cell::RefCell::new(None) };
}

/// Whether the chart being drawn collects tooltips (only for SVG).
pub(crate) fn collecting_tips() -> bool {
    TIPS.with(|t| t.borrow().is_some())
}

/// Records a tooltip over the pixel box (x0, y0)–(x1, y1) of a mark.
pub(crate) fn tip(a: (i32, i32), b: (i32, i32), text: String) {
    TIPS.with(|t| {
        if let Some(tips) = t.borrow_mut().as_mut() {
            tips.push(Tip { x0: a.0.min(b.0), y0: a.1.min(b.1), x1: a.0.max(b.0), y1: a.1.max(b.1), text });
        }
    });
}

/// The chart as an SVG document (for inlining into a page): every mark has
/// a hover tooltip with its exact values (an SVG `<title>` on a transparent
/// box laid over the drawing).
pub fn to_svg(chart: &impl Chart) -> Result<String, Error> {
    register_font();
    let mut text = String::new();
    TIPS.with(|t| *t.borrow_mut() = Some(Vec::new()));
    let drawn = chart.draw_on(SVGBackend::with_string(&mut text, chart.size()).into_drawing_area());
    let tips = TIPS.with(|t| t.borrow_mut().take()).unwrap_or_default();
    drawn.map_err(|message| Error::Draw { path: PathBuf::from("(inline SVG)"), message })?;
    if !tips.is_empty()
        && let Some(end) = text.rfind("</svg>")
    {
        let mut overlay = String::from("<g class=\"tips\">");
        for t in &tips {
            use std::fmt::Write as _;
            let _ = write!(
                overlay,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"transparent\"><title>{}</title></rect>",
                t.x0,
                t.y0,
                (t.x1 - t.x0).max(1),
                (t.y1 - t.y0).max(1),
                xml_escape(&t.text)
            );
        }
        overlay.push_str("</g>");
        text.insert_str(end, &overlay);
    }
    Ok(text)
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A number as a tooltip shows it: enough digits to read the exact value.
pub(crate) fn exact(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e6).contains(&a) {
        format!("{v:.4e}")
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Writes `STEM.svg` and `STEM.png` (atomically) and returns their paths.
pub fn write_chart(chart: &impl Chart, stem: &Path) -> Result<Vec<PathBuf>, Error> {
    register_font();
    render(stem, chart.size(), |root| chart.draw_on(root), |root| chart.draw_on(root))
}

pub(crate) const SIZE: (u32, u32) = (900, 600);

/// Tick labels with SI prefixes: 1.5k, 20M, 3G; plain below 1000.
pub(crate) fn si(v: f64) -> String {
    let a = v.abs();
    let (x, p) = if a >= 1e15 {
        (v / 1e15, "P")
    } else if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else if a > 0.0 && a < 1e-4 {
        // Small values keep their digits instead of printing as 0.
        return format!("{v:.1e}");
    } else if a > 0.0 && a < 1.0 {
        // Three significant digits: ticks every 0.005 ms had read "5.0e-3, 0.01, 0.01, 0.02" (two
        // decimals each, one in another notation).
        let decimals = (2 - a.log10().floor() as i32).clamp(2, 6) as usize;
        let s = format!("{v:.decimals$}");
        return s.trim_end_matches('0').trim_end_matches('.').to_string();
    } else {
        (v, "")
    };
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{p}")
}

fn range(values: impl Iterator<Item = f64> + Clone, log: bool) -> (f64, f64) {
    let v = values.filter(|x| x.is_finite() && (!log || *x > 0.0));
    let lo = v.clone().fold(f64::INFINITY, f64::min);
    let hi = v.fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        // To the 1-2-5 values around the data, not whole decades (points between 5 and 41 had
        // sat in a fifth of a 1–100 axis); `log_axis` labels an axis of few bold ticks by 1-2-5.
        (one_two_five_at_or_below(lo / 1.2), one_two_five_at_or_above(hi * 1.2))
    } else {
        let pad = ((hi - lo) * 0.05).max(hi.abs() * 0.05).max(1e-9);
        ((lo - pad).min(0.0_f64.max(lo - pad)), hi + pad)
    }
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, plotters::coord::Shift>, c: &Scatter) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let xs = c.points.iter().chain(&c.curve).map(|p| p.0);
    let reference = c.reference.iter().map(|r| r.0);
    let ys = c.points.iter().chain(&c.curve).map(|p| p.1).chain(reference);
    let (x0, x1) = range(xs, c.log_x);
    let (y0, y1) = range(ys, c.log_y);
    let mut builder = ChartBuilder::on(&root);
    builder.caption(&c.title, ("sans-serif", 22)).margin(16).x_label_area_size(50).y_label_area_size(80);
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(&c.x_label)
                .y_desc(&c.y_label)
                .x_label_formatter(&|v| si(*v))
                .y_label_formatter(&|v| si(*v))
                .label_style(("sans-serif", 15))
                .axis_desc_style(("sans-serif", 17))
                .draw()
                .map_err(|e| e.to_string())?;
            let keep = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite() && (!c.log_x || p.0 > 0.0) && (!c.log_y || p.1 > 0.0);
            if collecting_tips() {
                // At most a few thousand tooltips per chart: the page stays small.
                let step = (c.points.len() / 3000).max(1);
                for &(x, y) in c.points.iter().filter(keep).step_by(step) {
                    let (px, py) = chart.backend_coord(&(x, y));
                    tip(
                        (px - 4, py - 4),
                        (px + 4, py + 4),
                        format!("{}: {} = {}, {} = {}", c.legend[0], c.x_label, exact(x), c.y_label, exact(y)),
                    );
                }
            }
            // Points that land on one pixel are drawn once, as opaque as their
            // overdraw (1 − 0.5ⁿ): circles are placed at whole pixels, so the
            // picture is the same. A collective matched across ranks gives every
            // member rank the same point (a 1024-rank job's page drew 1.6 M
            // circles, 150 MB of SVG).
            let mut index: rustc_hash::FxHashMap<(i32, i32), usize> = rustc_hash::FxHashMap::default();
            let mut distinct: Vec<((f64, f64), i32)> = Vec::new();
            for &(x, y) in c.points.iter().filter(keep) {
                let k = *index.entry(chart.backend_coord(&(x, y))).or_insert_with(|| {
                    distinct.push(((x, y), 0));
                    distinct.len() - 1
                });
                if let Some(d) = distinct.get_mut(k) {
                    d.1 = d.1.saturating_add(1);
                }
            }
            chart
                .draw_series(distinct.iter().map(|&((x, y), n)| Circle::new((x, y), 3, BLUE.mix(1.0 - 0.5f64.powi(n.min(10))).filled())))
                .map_err(|e| e.to_string())?
                .label(c.legend[0].as_str())
                .legend(|(x, y)| Circle::new((x, y), 4, BLUE.mix(0.5).filled()));
            if !c.curve.is_empty() {
                chart
                    .draw_series(LineSeries::new(c.curve.iter().filter(keep).copied(), RED.stroke_width(2)))
                    .map_err(|e| e.to_string())?
                    .label(c.legend[1].as_str())
                    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED.stroke_width(2)));
            }
            if let Some((v, label)) = &c.reference {
                let (xa, xb) = (x0, x1);
                chart
                    .draw_series(LineSeries::new([(xa, *v), (xb, *v)], BLACK.stroke_width(1)))
                    .map_err(|e| e.to_string())?
                    .label(label.as_str())
                    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(1)));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 15))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| e.to_string())?;
        }};
    }
    match (c.log_x, c.log_y) {
        (true, true) => body!(builder.build_cartesian_2d(log_axis(x0, x1), log_axis(y0, y1)).map_err(|e| e.to_string())?),
        (true, false) => body!(builder.build_cartesian_2d(log_axis(x0, x1), y0..y1).map_err(|e| e.to_string())?),
        (false, true) => body!(builder.build_cartesian_2d(x0..x1, log_axis(y0, y1)).map_err(|e| e.to_string())?),
        (false, false) => body!(builder.build_cartesian_2d(x0..x1, y0..y1).map_err(|e| e.to_string())?),
    }
    root.present().map_err(|e| e.to_string())
}

/// A log axis over `lo..hi` with plotters' ticks, each once: its last tick of
/// a decade (1e7 × 10) and the next decade's first (1e8) can differ by a
/// rounding and were drawn as two "100M" labels.
/// Where plotters gives fewer than three labels (an axis of one decade had one), the 1-2-5
/// steps of each decade label it.
fn log_axis(lo: f64, hi: f64) -> WithKeyPointMethod<LogCoord<f64>> {
    let axis = (lo..hi).log_scale();
    let (bold, light) = (axis.clone(), axis.clone());
    axis.with_key_point_func(move |n| {
        let mut ticks = LogCoord::from(bold.clone()).key_points(BoldPoints(n));
        // Within two decades plotters labels from the first whole decade on: the 1-2-5 values
        // below it too (an axis of 2–50 had no label under 10).
        if hi <= 100.0 * lo {
            ticks.extend(decade_multiples(lo, hi, &ONE_TWO_FIVE));
        }
        let ticks = distinct_ticks(ticks);
        if ticks.len() >= 3 {
            return ticks;
        }
        // Within two decades the 1-2-5 values are among them already.
        if hi > 100.0 * lo {
            let ticks = decade_multiples(lo, hi, &ONE_TWO_FIVE);
            if ticks.len() >= 3 {
                return ticks;
            }
        }
        decade_multiples(lo, hi, &ONE_TO_NINE)
    })
    .with_light_point_func(move |n| distinct_ticks(LogCoord::from(light.clone()).key_points(LightPoints::new(n, n))))
}

/// The steps of a decade a log axis is labelled by: 1, 2 and 5; where they give too few (an
/// axis of 500–1000), 1 to 9.
const ONE_TWO_FIVE: [f64; 3] = [1.0, 2.0, 5.0];
const ONE_TO_NINE: [f64; 9] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];

/// `steps` times each power of ten within `lo..=hi` (a relative 1e-9 of slack at either end).
fn decade_multiples(lo: f64, hi: f64, steps: &[f64]) -> Vec<f64> {
    let (from, to) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let within = |t: &f64| *t >= lo * (1.0 - 1e-9) && *t <= hi * (1.0 + 1e-9);
    distinct_ticks((from..=to).flat_map(|e| steps.iter().map(move |m| m * 10f64.powi(e))).filter(within).collect())
}

/// The largest of 1, 2 and 5 times a power of ten at or below `v` (> 0).
fn one_two_five_at_or_below(v: f64) -> f64 {
    let decade = 10f64.powf(v.log10().floor());
    ONE_TWO_FIVE.iter().rev().map(|m| m * decade).find(|t| *t <= v * (1.0 + 1e-9)).unwrap_or(decade)
}

/// The smallest of 1, 2 and 5 times a power of ten at or above `v` (> 0).
fn one_two_five_at_or_above(v: f64) -> f64 {
    let decade = 10f64.powf(v.log10().floor());
    ONE_TWO_FIVE.iter().map(|m| m * decade).find(|t| *t >= v * (1.0 - 1e-9)).unwrap_or(10.0 * decade)
}

/// Ticks in ascending order, one of each value within a relative 1e-9.
fn distinct_ticks(mut ticks: Vec<f64>) -> Vec<f64> {
    ticks.sort_by(f64::total_cmp);
    ticks.dedup_by(|b, a| (*b - *a).abs() <= 1e-9 * a.abs().max(b.abs()));
    ticks
}

/// Writes `STEM.svg` and `STEM.png` (atomically) and returns their paths.
pub fn write_scatter(chart: &Scatter, stem: &Path) -> Result<Vec<PathBuf>, Error> {
    write_chart(chart, stem)
}

/// Renders one drawing into an SVG and a PNG next to each other.
pub(crate) fn render(
    stem: &Path,
    size: (u32, u32),
    svg: impl FnOnce(DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<(), String>,
    png: impl FnOnce(DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>) -> Result<(), String>,
) -> Result<Vec<PathBuf>, Error> {
    if let Some(dir) = stem.parent().filter(|d| !d.as_os_str().is_empty()) {
        tracecast_ingest::output::create_dir(dir).map_err(|cause| tracecast_ingest::Error::Write { path: dir.to_path_buf(), cause })?;
    }
    let svg_path = stem.with_extension("svg");
    let png_path = stem.with_extension("png");
    // Both names claimed, and the PNG staged (an input in its place refused), before either is
    // written: a clash leaves neither. The PNG is drawn into its staged file (removed if drawing
    // fails, or when the command is stopped), then put in place.
    tracecast_ingest::output::claim(&png_path)?;
    let staged = tracecast_ingest::output::stage_for_writer(&png_path, ".png")?;
    let mut text = String::new();
    svg(SVGBackend::with_string(&mut text, size).into_drawing_area()).map_err(|message| Error::Draw { path: svg_path.clone(), message })?;
    tracecast_ingest::output::write_atomic(&svg_path, text.as_bytes())?;
    png(BitMapBackend::new(staged.staged_path(), size).into_drawing_area())
        .map_err(|message| Error::Draw { path: png_path.clone(), message })?;
    staged.commit()?;
    Ok(vec![svg_path, png_path])
}

#[cfg(test)]
mod tests {
    use plotters::coord::ranged1d::Ranged;

    /// A message-size axis over 10–150 MB labelled every 10 MB: each label once
    /// (the page's all_gather chart had "100M" twice), the decade's bound included.
    #[test]
    fn log_axis_labels_each_tick_once() {
        for (lo, hi) in [(1e7, 1.5e8), (3.0, 2e9), (0.5, 7.0)] {
            let ticks = super::log_axis(lo, hi).key_points(100usize);
            let labels: Vec<String> = ticks.iter().map(|&v| super::si(v)).collect();
            let mut distinct = labels.clone();
            distinct.dedup();
            assert_eq!(labels, distinct, "{lo}..{hi}");
            assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{ticks:?}");
        }
        assert_eq!(super::log_axis(1e7, 1.5e8).key_points(100usize).iter().filter(|&&v| super::si(v) == "100M").count(), 1);
    }

    /// An axis of one decade (a collective's bus bandwidth of 0.32 GB/s: 0.1 to 1) had one
    /// label, "1", at its top: nothing to read a point's value by.
    #[test]
    fn a_log_axis_of_one_decade_has_labels_to_read_it_by() {
        for (lo, hi) in [(0.1, 1.0), (1.0, 10.0), (1e-4, 1e-3), (100.0, 1000.0)] {
            // The labelled ticks: those of the bold grid (a mesh's 10 labels by default).
            let ticks = super::log_axis(lo, hi).key_points(plotters::coord::ranged1d::BoldPoints(10));
            assert!(ticks.len() >= 3, "{lo}..{hi}: {ticks:?}");
            assert!(ticks.iter().all(|&t| t >= lo * (1.0 - 1e-9) && t <= hi * (1.0 + 1e-9)), "{lo}..{hi}: {ticks:?}");
        }
    }

    /// A log axis spans the 1-2-5 values around its data, not whole decades (a Pareto front of
    /// 5.1–40.8 samples/s had sat in a fifth of a 1–100 axis, GEMMs at ~690 TFLOP/s in a
    /// 100–10 000 one), and is labelled at least three times inside.
    #[test]
    fn a_log_axis_spans_its_data_closely_and_is_labelled() {
        for (lo, hi, want) in
            [(5.13, 40.76, (2.0, 50.0)), (8.0, 64.0, (5.0, 100.0)), (650.0, 720.0, (500.0, 1000.0)), (0.3, 0.3, (0.2, 0.5))]
        {
            let got = super::range([lo, hi].into_iter(), true);
            assert!((got.0 - want.0).abs() < 1e-9 * want.0 && (got.1 - want.1).abs() < 1e-9 * want.1, "{lo}..{hi}: {got:?}");
            let ticks = super::log_axis(got.0, got.1).key_points(plotters::coord::ranged1d::BoldPoints(10));
            assert!(
                ticks.len() >= 3 && ticks.iter().all(|&t| t >= got.0 * (1.0 - 1e-9) && t <= got.1 * (1.0 + 1e-9)),
                "{got:?}: {ticks:?}"
            );
            // A label at or below the lowest point (2–50 had none under 10, its point at 5.1).
            assert!(ticks[0] <= lo, "{got:?}: {ticks:?}");
        }
    }

    #[test]
    fn small_values_are_not_zero() {
        assert_eq!(super::si(0.001), "0.001");
        assert_eq!(super::si(5e-5), "5.0e-5");
        // A linear axis every 0.005 (a step of 0.05 ms): each label once, in one notation.
        let labels: Vec<String> = (0..=10).map(|k| super::si(0.005 * f64::from(k))).collect();
        assert_eq!(labels, ["0", "0.005", "0.01", "0.015", "0.02", "0.025", "0.03", "0.035", "0.04", "0.045", "0.05"]);
        assert_eq!(super::si(0.0), "0");
        assert_eq!(super::si(1500.0), "1.5k");
        assert_eq!(super::si(0.25), "0.25");
    }

    #[test]
    fn si_labels() {
        assert_eq!(super::si(100000.0), "100k");
        assert_eq!(super::si(1.5e9), "1.5G");
        assert_eq!(super::si(12.0), "12");
        assert_eq!(super::si(0.25), "0.25");
    }
}
