//! Why the GPU was idle: host wait, kernel wait, other.

use serde::Serialize;

use super::breakdown::Window;
use crate::link::Links;
use crate::rank::RankTrace;

/// Idle time of a rank in a window, split by cause (µs). The three parts add
/// up to `idle_us` of the breakdown.
///
/// Each gap in the union of the rank's GPU activity is attributed by the
/// activity that ends it: **host wait** when that activity was launched
/// (its runtime call started) after the GPU went idle — the host was late;
/// otherwise **kernel wait** when the gap is shorter than `kernel_wait_threshold_us`
/// (launch overhead between back-to-back kernels); otherwise **other**
/// (synchronisation, dependencies). The gap after the last activity is other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct IdleSplit {
    /// The host launched the next work only after the GPU went idle.
    pub host_wait_us: f64,
    /// Short gaps between queued work.
    pub kernel_wait_us: f64,
    /// Everything else.
    pub other_us: f64,
    /// The threshold used, µs.
    pub kernel_wait_threshold_us: f64,
}

/// The idle split of one GPU stream, by HTA's per-stream rules (HTA 0.5
/// `get_idle_time_breakdown`): only the gaps *between* consecutive activities
/// of the stream count (no gap before its first or after its last activity);
/// a gap is **host wait** when the next activity's launch call started after
/// the previous activity ended (strictly), else **kernel wait** when it is
/// shorter than the threshold (strictly), else **other**. Activities are
/// those of the stream overlapping the window; HTA's default window is
/// `--window all --drop-last-step`. (HTA rounds float timestamps to whole µs
/// first; that rounding is not reproduced.)
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct StreamIdle {
    /// Device ordinal.
    pub device: i64,
    /// Stream id.
    pub stream: i64,
    /// Idle time of this stream in the window, by cause.
    #[serde(flatten)]
    pub idle: IdleSplit,
}

impl StreamIdle {
    /// The split of every stream with GPU activity, by (device, stream).
    pub fn all(trace: &RankTrace, links: &Links, w: Window, kernel_wait_threshold_us: f64) -> Vec<StreamIdle> {
        let ev = &trace.events;
        // (start, end, launch) of each stream's activities overlapping the window.
        let mut streams: std::collections::BTreeMap<(i64, i64), Vec<(i64, i64, Option<i64>)>> = Default::default();
        for i in trace.gpu_activity() {
            let (s, e) = (ev.ts_ns.get(i).copied().unwrap_or(0), ev.end_ns(i));
            if e > w.start_ns && s < w.end_ns {
                streams.entry((ev.pid[i], ev.tid[i])).or_default().push((s, e, links.launch_ns(trace, i)));
            }
        }
        let threshold_ns = kernel_wait_threshold_us * 1000.0;
        streams
            .into_iter()
            .map(|((device, stream), mut acts)| {
                acts.sort_unstable_by_key(|&(s, e, l)| (s, e, l));
                let (mut host, mut kernel, mut other) = (0i64, 0i64, 0i64);
                for pair in acts.windows(2) {
                    let ((_, prev_end, _), (start, _, launch)) = (pair[0], pair[1]);
                    let gap = start - prev_end;
                    if gap <= 0 {
                        continue; // back to back (or overlapping copies): no idle time
                    }
                    *cause(&mut host, &mut kernel, &mut other, gap, launch, prev_end, threshold_ns) += gap;
                }
                StreamIdle {
                    device,
                    stream,
                    idle: IdleSplit {
                        host_wait_us: host as f64 / 1000.0,
                        kernel_wait_us: kernel as f64 / 1000.0,
                        other_us: other as f64 / 1000.0,
                        kernel_wait_threshold_us,
                    },
                }
            })
            .collect()
    }
}

impl IdleSplit {
    /// Splits the idle time of the whole GPU of `trace` in `w`. A gap that crosses the window's
    /// edge is judged whole — by the work that ends it (after the window too), from when the GPU
    /// really went idle (before the window too) and by its whole length — and counted for its
    /// part inside: the split of a step window is its share of the whole run's (a dataloader
    /// stall at each step's end had been host wait over the whole run and `other` in each
    /// step's window). Idle time with no work after it, to the trace's end, is other.
    pub fn compute(trace: &RankTrace, links: &Links, w: Window, kernel_wait_threshold_us: f64) -> IdleSplit {
        let ev = &trace.events;
        // (start, end, launch) of all GPU activity, by start.
        let mut acts: Vec<(i64, i64, Option<i64>)> =
            trace.gpu_activity().map(|i| (ev.ts_ns.get(i).copied().unwrap_or(0), ev.end_ns(i), links.launch_ns(trace, i))).collect();
        acts.sort_unstable_by_key(|&(s, e, l)| (s, e, l));
        let threshold_ns = kernel_wait_threshold_us * 1000.0;
        let (mut host, mut kernel, mut other) = (0i64, 0i64, 0i64);
        // When the GPU went idle: the end of the work before (the window's start where none began before it).
        let mut busy_until: Option<i64> = None;
        for (s, e, launch) in acts {
            if e <= w.start_ns {
                busy_until = Some(busy_until.map_or(e, |b| b.max(e)));
                continue;
            }
            let idle_since = busy_until.unwrap_or(w.start_ns.min(s));
            if s > idle_since {
                let inside = s.min(w.end_ns) - idle_since.max(w.start_ns);
                if inside > 0 {
                    *cause(&mut host, &mut kernel, &mut other, s - idle_since, launch, idle_since, threshold_ns) += inside;
                }
            }
            busy_until = Some(busy_until.map_or(e, |b| b.max(e)));
            if s >= w.end_ns {
                break;
            }
        }
        // No work after the window's last: idle to its end is other.
        other += (w.end_ns - busy_until.map_or(w.start_ns, |b| b.max(w.start_ns))).max(0);
        IdleSplit {
            host_wait_us: host as f64 / 1000.0,
            kernel_wait_us: kernel as f64 / 1000.0,
            other_us: other as f64 / 1000.0,
            kernel_wait_threshold_us,
        }
    }
}

/// Which of the three counters a gap of `gap_ns` that began at `idle_since`
/// and was ended by work launched at `launch` belongs to — the one rule of
/// both splits: host wait when the launch call started after the GPU went
/// idle, else kernel wait when shorter than the threshold, else other.
fn cause<'a>(
    host: &'a mut i64,
    kernel: &'a mut i64,
    other: &'a mut i64,
    gap_ns: i64,
    launch: Option<i64>,
    idle_since: i64,
    threshold_ns: f64,
) -> &'a mut i64 {
    match launch {
        Some(l) if l > idle_since => host,
        _ if (gap_ns as f64) < threshold_ns => kernel,
        _ => other,
    }
}
