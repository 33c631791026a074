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
/// otherwise **kernel wait** when the gap is at most `kernel_wait_threshold_us`
/// (launch overhead between back-to-back kernels); otherwise **other**
/// (synchronisation, dependencies). The gap after the last activity is other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
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

/// The idle split of one GPU stream.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
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
        let streams: std::collections::BTreeSet<(i64, i64)> = trace.gpu_activity().map(|i| (ev.pid[i], ev.tid[i])).collect();
        streams
            .into_iter()
            .map(|(device, stream)| StreamIdle {
                device,
                stream,
                idle: IdleSplit::compute(trace, links, w, kernel_wait_threshold_us, Some((device, stream))),
            })
            .collect()
    }
}

impl IdleSplit {
    /// Splits the idle time of `trace` in `w`: of the whole GPU (`stream`
    /// `None`), or of one `(device, stream)` as HTA reports it.
    pub fn compute(trace: &RankTrace, links: &Links, w: Window, kernel_wait_threshold_us: f64, stream: Option<(i64, i64)>) -> IdleSplit {
        let ev = &trace.events;
        // (start, end, launch) of GPU activity overlapping the window, by start.
        let mut acts: Vec<(i64, i64, Option<i64>)> = trace
            .gpu_activity()
            .filter(|&i| stream.is_none_or(|(d, s)| ev.pid[i] == d && ev.tid[i] == s))
            .map(|i| {
                let launch = links.launch_ns(trace, i);
                (ev.ts_ns.get(i).copied().unwrap_or(0), ev.end_ns(i), launch)
            })
            .filter(|&(s, e, _)| e > w.start_ns && s < w.end_ns)
            .collect();
        acts.sort_unstable_by_key(|&(s, e, l)| (s, e, l));
        let threshold_ns = (kernel_wait_threshold_us * 1000.0) as i64;
        let (mut host, mut kernel, mut other) = (0i64, 0i64, 0i64);
        let mut busy_until = w.start_ns;
        for (s, e, launch) in acts {
            let s = s.max(w.start_ns);
            if s > busy_until {
                let gap = s - busy_until;
                match launch {
                    Some(l) if l >= busy_until => host += gap,
                    _ if gap <= threshold_ns => kernel += gap,
                    _ => other += gap,
                }
            }
            busy_until = busy_until.max(e.min(w.end_ns));
        }
        other += (w.end_ns - busy_until).max(0);
        IdleSplit {
            host_wait_us: host as f64 / 1000.0,
            kernel_wait_us: kernel as f64 / 1000.0,
            other_us: other as f64 / 1000.0,
            kernel_wait_threshold_us,
        }
    }
}
