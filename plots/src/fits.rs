//! Charts of a calibration profile: for every kernel fit, the achieved
//! throughput (TFLOP/s or GB/s) against work size with the fitted
//! t0 + W/(η·P) curve and the device's peak; for every link fit, bus
//! bandwidth against message size with the fitted α-β curve.

use std::path::{Path, PathBuf};

use tracecast_calibrate::Profile;

use crate::chart::{Error, Scatter, write_chart};

pub(crate) fn log_grid(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo) {
        return vec![lo, hi];
    }
    let (a, b) = (lo.ln(), hi.ln());
    (0..n).map(|i| (a + (b - a) * i as f64 / (n - 1) as f64).exp()).collect()
}

/// One chart per kernel fit, with a file stem (`kernel-gemm-bf16`).
pub fn kernel_charts(profile: &Profile) -> Vec<(String, Scatter)> {
    let device = profile.device.catalog_id.clone().unwrap_or_else(|| "device".into());
    let mut out = Vec::new();
    for k in &profile.kernels {
        let dtype = k.dtype.map_or("any", |d| d.as_str());
        let (lo, hi) = k.points.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
        // Throughput in the unit of the peak: TFLOP/s or GB/s.
        let scale = if k.unit == "flop" { 1e-12 } else { 1e-9 };
        let rate = |w: f64, us: f64| w / (us * 1e-6) * scale;
        let curve = log_grid(lo, hi, 50).into_iter().map(|w| (w, rate(w, k.time_us(w)))).collect();
        let (unit, rate_unit) = if k.unit == "flop" { ("FLOP", "TFLOP/s") } else { ("bytes", "GB/s") };
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
            y_label: format!("achieved ({rate_unit})"),
            points: k.points.iter().map(|&(w, us)| (w, rate(w, us))).collect(),
            curve,
            log_x: true,
            log_y: true,
            reference: Some((k.peak, format!("peak {} {:.0} {rate_unit}", k.peak_of, k.peak))),
            legend: ["measured".into(), "fit".into()],
        };
        out.push((format!("kernel-{}-{dtype}", k.class.as_str()), chart));
    }
    out
}

/// One chart per link fit, with a file stem (`link-all_reduce-8-intra`).
pub fn link_charts(profile: &Profile) -> Vec<(String, Scatter)> {
    let device = profile.device.catalog_id.clone().unwrap_or_else(|| "device".into());
    let mut out = Vec::new();
    for l in &profile.links {
        let n = l.group_size.map_or("n".into(), |n| n.to_string());
        // Points are (bus bytes k·S, µs): bus bandwidth = k·S / t.
        let points: Vec<(f64, f64)> = l.points.iter().map(|&(x, t)| (x, x / t / 1e3)).collect();
        let (lo, hi) = l.points.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
        let curve = log_grid(lo, hi, 60)
            .into_iter()
            .map(|x| (x, x / tracecast_calibrate::cost::AlphaBeta::of_fit(l).transfer_us(x) / 1e3))
            .collect();
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
            reference: l.nominal_gbps.map(|b| (b, format!("nominal {b:.0} GB/s"))),
            legend: ["measured".into(), "fit".into()],
        };
        let mut stem = format!("link-{}-{n}-{}", l.collective.as_str(), l.domain);
        // Fits told apart by NCCL's algorithm and protocol alone (LL for small messages, Simple
        // for large) had shared one file: the second chart replaced the first.
        if out.iter().any(|(s, _)| *s == stem) {
            for part in [&l.algo, &l.proto].into_iter().flatten() {
                stem = format!("{stem}-{}", part.to_ascii_lowercase());
            }
        }
        out.push((stem, chart));
    }
    out
}

/// Writes one SVG and one PNG per fit of `profile` into `dir`; returns the files.
pub fn write_profile_charts(profile: &Profile, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut files = Vec::new();
    let mut stems: Vec<String> = Vec::new();
    for (stem, chart) in kernel_charts(profile).into_iter().chain(link_charts(profile)) {
        // Each chart a file of its own, whatever its fit shares with another's.
        let (mut unique, mut k) = (stem.clone(), 1);
        while stems.contains(&unique) {
            k += 1;
            unique = format!("{stem}-{k}");
        }
        let stem = unique;
        files.extend(write_chart(&chart, &dir.join(&stem))?);
        stems.push(stem);
    }
    Ok(files)
}

/// Throughput of the best plan against GPU count (`unit`: samples/s, tokens/s for decode), or
/// its step time `by_latency`; the line joins the Pareto front.
pub fn pareto_chart(model: &str, points: &[tracecast_replay::workload::search::FrontPoint], by_latency: bool, unit: &str) -> Scatter {
    // What the front was chosen by is what the chart shows: a front of step times drawn on a
    // throughput axis had joined points the axis does not order.
    let y = |p: &tracecast_replay::workload::search::FrontPoint| if by_latency { p.iteration_ms } else { p.throughput };
    Scatter {
        title: format!("{model}: best plan per GPU count (Pareto front)"),
        x_label: "GPUs".into(),
        y_label: if by_latency { "step time (ms)".to_string() } else { format!("throughput ({unit})") },
        points: points.iter().map(|p| (f64::from(p.gpus), y(p))).collect(),
        curve: points.iter().filter(|p| p.pareto).map(|p| (f64::from(p.gpus), y(p))).collect(),
        log_x: true,
        log_y: true,
        reference: None,
        legend: ["best plan at this GPU count".into(), "Pareto front".into()],
    }
}

#[cfg(test)]
mod tests {
    /// Two link fits told apart by NCCL's protocol alone (LL, Simple) get charts of their own:
    /// they had shared one file, the second replacing the first.
    #[test]
    fn link_fits_of_two_protocols_get_charts_of_their_own() {
        let mut profile = tracecast_calibrate::shipped::profile("v100").expect("the shipped V100 profile");
        let mut ll = profile.links[0].clone();
        ll.proto = Some("LL".into());
        profile.links.push(ll);
        let stems: Vec<String> = super::link_charts(&profile).into_iter().map(|(s, _)| s).collect();
        assert_eq!(stems, ["link-all_to_all-2-intra", "link-all_to_all-2-intra-ring-ll"]);
    }
}
