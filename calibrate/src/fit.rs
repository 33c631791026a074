//! Straight-line fits with confidence intervals: weighted least squares on
//! top of statrs' Student t distribution, and a lower-envelope variant for
//! durations that waits can only lengthen.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// y = intercept + slope · x, with 95 % confidence intervals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LineFit {
    /// Intercept.
    pub intercept: f64,
    /// 95 % interval of the intercept.
    pub intercept_ci95: [f64; 2],
    /// Slope.
    pub slope: f64,
    /// 95 % interval of the slope.
    pub slope_ci95: [f64; 2],
    /// Coefficient of determination, weighted like the fit.
    pub r2: f64,
    /// Points fitted.
    pub n: usize,
    /// Root-mean-square relative residual (y − ŷ)/ŷ.
    pub residual_spread: f64,
}

/// A line through `(x, y)` points weighted by 1/y² and constrained to a
/// non-negative intercept (`line_nonneg`), without copies of the points (a
/// job's kernel fit has millions). With durations whose noise grows with
/// their size, weights 1/y² make every point count by its relative error, so
/// small messages pin the latency and large ones the bandwidth. `None` with
/// fewer than three points or no spread in `x`.
pub fn relative_line_nonneg(points: &[(f64, f64)]) -> Option<LineFit> {
    line_nonneg(points.len(), |i: usize| {
        let (x, y) = points[i];
        (x, y, relative_weight(y))
    })
}

/// [`line`] constrained to a non-negative intercept: where the free fit's
/// intercept is negative (a fixed cost below zero, which no kernel or link
/// has), the line through the origin (weighted least squares of y = s·x).
fn line_nonneg(n: usize, at: impl Fn(usize) -> (f64, f64, f64)) -> Option<LineFit> {
    let free = line(n, &at)?;
    if free.intercept >= 0.0 { Some(free) } else { line_through_origin(free.n, at) }
}

/// The least-squares slope of `(x, y)` points, unweighted (a handful of points with no error
/// model, such as a collective's latency against log₂ nodes); `None` with fewer than two
/// points or no spread in `x`.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    (points.len() >= 2).then_some(())?;
    weighted_slope(points.len(), |i| (points[i].0, points[i].1, 1.0)).map(|s| s.slope)
}

/// The parts of a weighted least-squares line: slope, weighted means, weight sum and Sxx.
struct SlopeParts {
    slope: f64,
    xm: f64,
    ym: f64,
    sw: f64,
    sxx: f64,
}

/// The weighted least-squares slope of the `n` points `at(i)` = (x, y, weight); `None`
/// without spread in x.
fn weighted_slope(n: usize, at: impl Fn(usize) -> (f64, f64, f64)) -> Option<SlopeParts> {
    let sw: f64 = (0..n).map(|i| at(i).2).sum();
    let xm = (0..n).map(&at).map(|(x, _, w)| w * x).sum::<f64>() / sw;
    let ym = (0..n).map(&at).map(|(_, y, w)| w * y).sum::<f64>() / sw;
    let (mut sxx, mut sxy) = (0.0, 0.0);
    for i in 0..n {
        let (x, y, w) = at(i);
        let dx = x - xm;
        sxx += w * dx * dx;
        sxy += w * dx * (y - ym);
    }
    (sxx > 0.0 && sxx.is_finite()).then(|| SlopeParts { slope: sxy / sxx, xm, ym, sw, sxx })
}

/// Weighted least squares of the `n` points `at(i)` = (x, y, weight).
fn line(n: usize, at: impl Fn(usize) -> (f64, f64, f64)) -> Option<LineFit> {
    if n < 3 {
        return None;
    }
    let SlopeParts { slope, xm, ym, sw, sxx } = weighted_slope(n, &at)?;
    let intercept = ym - slope * xm;
    let (wss, wss_tot, rel) = residuals(n, &at, intercept, slope, ym);
    let dof = (n - 2) as f64;
    let sigma2 = wss / dof;
    let se_slope = (sigma2 / sxx).sqrt();
    let se_intercept = (sigma2 * (1.0 / sw + xm * xm / sxx)).sqrt();
    let t = StudentsT::new(0.0, 1.0, dof).map(|d| d.inverse_cdf(0.975)).unwrap_or(1.96);
    Some(LineFit {
        intercept,
        intercept_ci95: [intercept - t * se_intercept, intercept + t * se_intercept],
        slope,
        slope_ci95: [slope - t * se_slope, slope + t * se_slope],
        r2: if wss_tot > 0.0 { 1.0 - wss / wss_tot } else { 1.0 },
        n,
        residual_spread: (rel / n as f64).sqrt(),
    })
}

/// Weighted least squares of y = s·x over the `n` points `at(i)`.
fn line_through_origin(n: usize, at: impl Fn(usize) -> (f64, f64, f64)) -> Option<LineFit> {
    let sxx: f64 = (0..n).map(&at).map(|(x, _, w)| w * x * x).sum();
    let sxy: f64 = (0..n).map(&at).map(|(x, y, w)| w * x * y).sum();
    if sxx <= 0.0 || !sxx.is_finite() {
        return None;
    }
    let slope = sxy / sxx;
    let sw: f64 = (0..n).map(|i| at(i).2).sum();
    let ym = (0..n).map(&at).map(|(_, y, w)| w * y).sum::<f64>() / sw;
    let (wss, wss_tot, rel) = residuals(n, &at, 0.0, slope, ym);
    let dof = (n - 1) as f64;
    let se_slope = (wss / dof / sxx).sqrt();
    let t = StudentsT::new(0.0, 1.0, dof).map(|d| d.inverse_cdf(0.975)).unwrap_or(1.96);
    Some(LineFit {
        intercept: 0.0,
        intercept_ci95: [0.0, 0.0],
        slope,
        slope_ci95: [slope - t * se_slope, slope + t * se_slope],
        r2: if wss_tot > 0.0 { 1.0 - wss / wss_tot } else { 1.0 },
        n,
        residual_spread: (rel / n as f64).sqrt(),
    })
}

/// Weighted residual and total sums of squares and the summed squared
/// relative residual of the line `intercept + slope · x` over the first `n` points.
fn residuals(n: usize, at: &impl Fn(usize) -> (f64, f64, f64), intercept: f64, slope: f64, ym: f64) -> (f64, f64, f64) {
    let (mut wss, mut wss_tot, mut rel) = (0.0, 0.0, 0.0);
    for i in 0..n {
        let (x, y, w) = at(i);
        let fit = intercept + slope * x;
        let r = y - fit;
        wss += w * r * r;
        wss_tot += w * (y - ym).powi(2);
        if fit != 0.0 {
            rel += (r / fit).powi(2);
        }
    }
    (wss, wss_tot, rel)
}

/// The relative-error weight 1/y².
fn relative_weight(y: f64) -> f64 {
    if y > 0.0 { 1.0 / (y * y) } else { 0.0 }
}

/// The median of `values` (sorted in place): the middle one, or the mean of
/// the two middle ones; `None` when there are none.
pub fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// The lower envelope of (x, y): per quarter-octave bin of x, the point with
/// the smallest y. Durations measured on one rank include waits for the
/// others, which only lengthen them, so the fastest point of each size is
/// the best estimate of the transfer itself.
pub fn lower_envelope(x: &[f64], y: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let mut best: std::collections::BTreeMap<i64, (f64, f64)> = std::collections::BTreeMap::new();
    for (&xi, &yi) in x.iter().zip(y) {
        if xi <= 0.0 || !yi.is_finite() {
            continue;
        }
        let bin = (xi.log2() * 4.0).floor() as i64;
        let e = best.entry(bin).or_insert((xi, yi));
        if yi < e.1 {
            *e = (xi, yi);
        }
    }
    best.into_values().unzip()
}

#[cfg(test)]
mod tests {
    /// The unweighted slope of known lines: exact on a line, the least-squares one through noise
    /// symmetric about it, and none without two points or spread in x.
    #[test]
    fn slope_of_known_lines() {
        assert_eq!(slope(&[(1.0, 5.0), (3.0, 9.0)]), Some(2.0));
        let noisy = [(0.0, 1.0), (1.0, 2.5), (2.0, 2.5), (3.0, 4.0)];
        assert!((slope(&noisy).unwrap() - 0.9).abs() < 1e-12);
        assert_eq!(slope(&[(1.0, 5.0)]), None);
        assert_eq!(slope(&[(2.0, 5.0), (2.0, 7.0)]), None);
    }

    use super::*;

    #[test]
    fn recovers_a_known_line_with_intervals() {
        let x: Vec<f64> = (1..=50).map(|i| i as f64 * 1000.0).collect();
        // Deterministic ±1 % multiplicative noise.
        let y: Vec<f64> =
            x.iter().enumerate().map(|(i, x)| (15.0 + x / 150.0) * (1.0 + 0.01 * ((i * 7 % 11) as f64 - 5.0) / 5.0)).collect();
        let f = line(x.len(), |i| (x[i], y[i], relative_weight(y[i]))).unwrap();
        assert!((f.slope * 150.0 - 1.0).abs() < 0.02, "{f:?}");
        assert!(f.slope_ci95[0] < f.slope && f.slope < f.slope_ci95[1]);
        assert!(f.r2 > 0.99);
        assert!(line(2, |i| ([1.0, 2.0][i], [1.0, 2.0][i], 1.0)).is_none());
        assert!(line(3, |i| (1.0, [1.0, 2.0, 3.0][i], 1.0)).is_none());
    }

    #[test]
    fn a_negative_intercept_is_refitted_through_the_origin() {
        // Points on y = 2x − 5: the free fit says t0 = −5; constrained, t0 = 0.
        let x = [10.0, 20.0, 40.0, 80.0];
        let y: Vec<f64> = x.iter().map(|x| 2.0 * x - 5.0).collect();
        assert!(line(4, |i| (x[i], y[i], 1.0)).unwrap().intercept < -4.9);
        let c = line_nonneg(4, |i| (x[i], y[i], 1.0)).unwrap();
        assert_eq!(c.intercept, 0.0);
        assert!(c.slope > 1.8 && c.slope < 2.0, "{}", c.slope);
        // A positive intercept is left alone.
        let y: Vec<f64> = x.iter().map(|x| 2.0 * x + 5.0).collect();
        assert!((line_nonneg(4, |i| (x[i], y[i], 1.0)).unwrap().intercept - 5.0).abs() < 1e-9);
    }

    #[test]
    fn envelope_keeps_the_fastest_point_per_size() {
        let (x, y) = lower_envelope(&[100.0, 101.0, 1000.0, 1001.0], &[5.0, 3.0, 9.0, 12.0]);
        assert_eq!(x, [101.0, 1000.0]);
        assert_eq!(y, [3.0, 9.0]);
    }
}
