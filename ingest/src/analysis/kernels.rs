//! Per-kernel-name statistics.

use rustc_hash::FxHashMap as HashMap;

use serde::Serialize;

use super::breakdown::Window;
use super::classify::ActivityClass;
use crate::rank::RankTrace;

/// Time spent in one GPU activity name inside the window (clipped to it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelStats {
    /// Kernel (or memcpy/memset) name.
    pub name: String,
    /// compute, comm or memory.
    pub class: ActivityClass,
    /// Instances.
    pub count: u64,
    /// Σ duration, µs.
    pub total_us: f64,
    /// Mean duration, µs.
    pub mean_us: f64,
    /// Longest instance, µs.
    pub max_us: f64,
}

/// Statistics per name, longest total first (ties by name).
pub fn kernel_stats(trace: &RankTrace, classes: &[Option<ActivityClass>], w: Window) -> Vec<KernelStats> {
    let ev = &trace.events;
    let mut by_name: HashMap<u32, (ActivityClass, u64, i64, i64)> = HashMap::default();
    for (i, class) in classes.iter().enumerate() {
        let Some(class) = *class else { continue };
        let (s, e) = (ev.ts_ns.get(i).copied().unwrap_or(0), ev.end_ns(i));
        if e < w.start_ns || s > w.end_ns || (e == s && (s < w.start_ns || s >= w.end_ns)) {
            continue;
        }
        let d = e.min(w.end_ns) - s.max(w.start_ns);
        let entry = by_name.entry(ev.name.get(i).copied().unwrap_or(0)).or_insert((class, 0, 0, 0));
        entry.1 += 1;
        entry.2 = entry.2.saturating_add(d.max(0));
        entry.3 = entry.3.max(d);
    }
    let mut out: Vec<KernelStats> = by_name
        .into_iter()
        .map(|(name, (class, count, total, max))| KernelStats {
            name: trace.names.get(name).to_string(),
            class,
            count,
            total_us: total as f64 / 1000.0,
            mean_us: total as f64 / 1000.0 / count.max(1) as f64,
            max_us: max as f64 / 1000.0,
        })
        .collect();
    out.sort_by(|a, b| b.total_us.total_cmp(&a.total_us).then_with(|| a.name.cmp(&b.name)));
    out
}
