//! Charts of a calibration profile: for every kernel fit, time against work
//! with the fitted t0 + W/(η·P); for every link fit, bus bandwidth against
//! message size with the fitted α-β curve.

use std::path::{Path, PathBuf};

use tracecast_calibrate::Profile;

use crate::chart::{Error, Scatter, write_scatter};

fn log_grid(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo) {
        return vec![lo, hi];
    }
    let (a, b) = (lo.ln(), hi.ln());
    (0..n).map(|i| (a + (b - a) * i as f64 / (n - 1) as f64).exp()).collect()
}

/// Writes one SVG and one PNG per fit of `profile` into `dir`; returns the files.
pub fn write_profile_charts(profile: &Profile, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let device = profile.device.catalog_id.clone().unwrap_or_else(|| "device".into());
    let mut files = Vec::new();
    for k in &profile.kernels {
        let dtype = k.dtype.map_or("any", |d| d.as_str());
        let (lo, hi) = k.points.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
        let curve = log_grid(lo, hi, 50).into_iter().map(|w| (w, k.time_us(w))).collect();
        let unit = if k.unit == "flop" { "FLOP" } else { "bytes" };
        let chart = Scatter {
            title: format!(
                "{device} {} {dtype}: η = {:.3} [{:.3}, {:.3}], t0 = {:.1} µs, R² = {:.3}, n = {}",
                k.class.as_str(),
                k.efficiency,
                k.efficiency_ci95[0],
                k.efficiency_ci95[1].min(99.0),
                k.overhead_us,
                k.r2,
                k.samples
            ),
            x_label: format!("work per op ({unit})"),
            y_label: "kernel time per op (µs)".into(),
            points: k.points.clone(),
            curve,
            log_x: true,
            log_y: true,
        };
        files.extend(write_scatter(&chart, &dir.join(format!("kernel-{}-{dtype}", k.class.as_str())))?);
    }
    for l in &profile.links {
        let n = l.group_size.map_or("n".into(), |n| n.to_string());
        // Points are (bus bytes k·S, µs): bus bandwidth = k·S / t.
        let points: Vec<(f64, f64)> = l.points.iter().map(|&(x, t)| (x, x / t / 1e3)).collect();
        let (lo, hi) = l.points.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
        let curve = log_grid(lo, hi, 60).into_iter().map(|x| (x, x / (l.alpha_us + x / (l.busbw_gbps * 1e3)) / 1e3)).collect();
        let chart = Scatter {
            title: format!(
                "{device} {} ×{n} {}: α = {:.1} µs, B = {:.1} GB/s, R² = {:.3}, n = {}",
                l.collective.as_str(),
                l.domain,
                l.alpha_us,
                l.busbw_gbps,
                l.r2,
                l.samples
            ),
            x_label: "bus bytes k·S (bytes)".into(),
            y_label: "bus bandwidth (GB/s)".into(),
            points,
            curve,
            log_x: true,
            log_y: true,
        };
        files.extend(write_scatter(&chart, &dir.join(format!("link-{}-{n}-{}", l.collective.as_str(), l.domain)))?);
    }
    Ok(files)
}
