//! Windows and the §3 breakdown of one window.

use serde::Serialize;

use super::classify::{ActivityClass, Classifier};
use super::interval::IntervalSet;
use crate::rank::RankTrace;

/// How the analysed window is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowMode {
    /// From the first GPU activity start to the last GPU activity end.
    All,
    /// From the GPU start of the first `ProfilerStep#` to the GPU end of the
    /// last one; falls back to `All` for traces without steps.
    #[default]
    Steps,
}

/// A time window `[start_ns, end_ns)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Window {
    /// Start, ns.
    pub start_ns: i64,
    /// End, ns.
    pub end_ns: i64,
}

impl Window {
    /// From the first GPU activity start to the last end; `None` without GPU activity.
    pub fn all(trace: &RankTrace) -> Option<Window> {
        let ev = &trace.events;
        let mut w: Option<Window> = None;
        for i in trace.gpu_activity() {
            w = Some(Window::cover(w, ev.ts_ns.get(i).copied().unwrap_or(0), ev.end_ns(i)));
        }
        w
    }

    /// `w` widened to cover `[start_ns, end_ns]` (that span alone without `w`).
    pub fn cover(w: Option<Window>, start_ns: i64, end_ns: i64) -> Window {
        match w {
            None => Window { start_ns, end_ns },
            Some(w) => Window { start_ns: w.start_ns.min(start_ns), end_ns: w.end_ns.max(end_ns) },
        }
    }

    /// Length in ns.
    pub fn len_ns(&self) -> i64 {
        (self.end_ns - self.start_ns).max(0)
    }

    /// The time of the activity `[start_ns, end_ns]` inside the window, ns;
    /// `None` when it lies outside: shares no time with it (one that only touches
    /// an edge — the next step's first kernel, starting where this step's window
    /// ends — had been counted here with no time), or, an instant, falls outside
    /// `[start_ns, end_ns)`. The one rule of per-kernel times and counts (per-class
    /// times measure the interval sets instead).
    pub fn overlap_ns(&self, start_ns: i64, end_ns: i64) -> Option<i64> {
        let outside = if end_ns == start_ns {
            start_ns < self.start_ns || start_ns >= self.end_ns
        } else {
            end_ns <= self.start_ns || start_ns >= self.end_ns
        };
        (!outside).then(|| end_ns.min(self.end_ns).saturating_sub(start_ns.max(self.start_ns)).max(0))
    }

    /// Whether an activity starting at `start_ns` is counted in the window:
    /// the one rule of the per-instance tables (collectives, stragglers, ops,
    /// message sizes), which count whole kernels by where they start.
    pub fn starts_inside(&self, start_ns: i64) -> bool {
        start_ns >= self.start_ns && start_ns < self.end_ns
    }
}

/// The unions of one rank's GPU activity by class, built once and measured in any window.
#[derive(Debug, Clone, Default)]
pub struct RankSets {
    /// ∪ all GPU activity.
    pub all: IntervalSet,
    /// ∪ compute kernels.
    pub compute: IntervalSet,
    /// ∪ communication kernels.
    pub comm: IntervalSet,
    /// ∪ memcpy / memset.
    pub memory: IntervalSet,
    /// ∪comm ∩ ∪compute (of one GPU; of several, see [`RankSets::new`]).
    pub overlap: IntervalSet,
    /// The GPUs (device ordinals) its GPU activity ran on, ascending: one, but for a trace
    /// one process wrote of several; empty for a timeline of intervals alone.
    pub devices: Vec<i64>,
}

impl RankSets {
    /// Builds the unions from `(start, end, class)` intervals (a replayed timeline, say).
    pub fn from_intervals(intervals: impl IntoIterator<Item = (i64, i64, ActivityClass)>) -> RankSets {
        let (mut all, mut compute, mut comm, mut memory) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (s, e, class) in intervals {
            all.push((s, e));
            match class {
                ActivityClass::Compute => compute.push((s, e)),
                ActivityClass::Comm => comm.push((s, e)),
                ActivityClass::Memory => memory.push((s, e)),
            }
        }
        let compute = IntervalSet::union(compute);
        let comm = IntervalSet::union(comm);
        let overlap = comm.intersect(&compute);
        RankSets { all: IntervalSet::union(all), compute, comm, memory: IntervalSet::union(memory), overlap, devices: Vec::new() }
    }

    /// Builds the unions from per-row classes (see [`Classifier::classes`]).
    /// Communication is overlapped only by compute on its own GPU: in a trace one
    /// process wrote of several GPUs (GPU rows' pid is the device), the exposed
    /// time is when any GPU's communication runs without its own compute (the
    /// union over GPUs of comm_d less compute_d) and the overlap the rest of ∪comm;
    /// busy and idle time stay of the union of all.
    pub fn new(trace: &RankTrace, classes: &[Option<ActivityClass>]) -> RankSets {
        super::facts::count(super::facts::Fact::Sets);
        let ev = &trace.events;
        let rows = || classes.iter().enumerate().filter_map(|(i, c)| Some((i, (*c)?)));
        let interval = |i: usize| (ev.ts_ns.get(i).copied().unwrap_or(0), ev.end_ns(i));
        let mut sets = RankSets::from_intervals(rows().map(|(i, c)| (interval(i).0, interval(i).1, c)));
        let device = |i: usize| ev.pid.get(i).copied().unwrap_or(0);
        let mut devices: Vec<i64> = Vec::new();
        for (i, _) in rows() {
            if !devices.contains(&device(i)) {
                devices.push(device(i));
            }
        }
        devices.sort_unstable();
        // Several GPUs (rare: one process driving them): each one's communication and compute.
        if devices.len() > 1 {
            type Spans = Vec<(i64, i64)>;
            let mut by_device: std::collections::BTreeMap<i64, (Spans, Spans)> = Default::default();
            for (i, c) in rows() {
                let (comm, compute) = by_device.entry(device(i)).or_default();
                match c {
                    ActivityClass::Comm => comm.push(interval(i)),
                    ActivityClass::Compute => compute.push(interval(i)),
                    ActivityClass::Memory => {}
                }
            }
            let exposed: Vec<(i64, i64)> = by_device
                .into_values()
                .flat_map(|(comm, compute)| IntervalSet::union(comm).minus(&IntervalSet::union(compute)).spans().to_vec())
                .collect();
            sets.overlap = sets.comm.minus(&IntervalSet::union(exposed));
        }
        sets.devices = devices;
        sets
    }
}

/// The §3 breakdown of one window, µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Breakdown {
    /// |W|.
    pub gpu_span_us: f64,
    /// |∪ GPU activity ∩ W|.
    pub busy_us: f64,
    /// span − busy.
    pub idle_us: f64,
    /// |∪ compute ∩ W|.
    pub compute_us: f64,
    /// |∪ communication ∩ W|.
    pub comm_us: f64,
    /// |∪ memcpy/memset ∩ W|.
    pub memory_us: f64,
    /// |∪comm ∩ ∪compute ∩ W| (a trace of several GPUs: ∪comm less the time any GPU's
    /// communication runs without its own compute, [`RankSets::new`]).
    pub overlap_us: f64,
    /// comm − overlap: communication with no compute under it.
    pub exposed_comm_us: f64,
}

fn us(ns: i64) -> f64 {
    ns as f64 / 1000.0
}

/// Adds `us` to `sum`, both times measured in whole nanoseconds, holding the sum to the whole
/// nanosecond (the one rule of a job's sums of µs: an f64 sum had printed as `3025638.1459999997`).
pub(crate) fn add_measured_us(sum: &mut f64, us: f64) {
    *sum = ((*sum + us) * 1000.0).round() / 1000.0;
}

impl Breakdown {
    /// Measures the unions in `w`.
    pub fn from_sets(sets: &RankSets, w: Window) -> Breakdown {
        let (lo, hi) = (w.start_ns, w.end_ns);
        let span = w.len_ns();
        let busy = sets.all.measure(lo, hi);
        let comm = sets.comm.measure(lo, hi);
        let overlap = sets.overlap.measure(lo, hi);
        Breakdown {
            gpu_span_us: us(span),
            busy_us: us(busy),
            idle_us: us(span - busy),
            compute_us: us(sets.compute.measure(lo, hi)),
            comm_us: us(comm),
            memory_us: us(sets.memory.measure(lo, hi)),
            overlap_us: us(overlap),
            exposed_comm_us: us(comm - overlap),
        }
    }

    /// Convenience: classify, build the unions and measure `w`.
    pub fn of_window(trace: &RankTrace, classifier: &Classifier, w: Window) -> Breakdown {
        let classes = classifier.classes(trace);
        Breakdown::from_sets(&RankSets::new(trace, &classes), w)
    }

    /// Adds another breakdown field by field (for totals), each sum held to the whole
    /// nanosecond its parts are measured in: a sum of µs values had printed as
    /// `3025638.1459999997` (exact up to 2^53 ns, 104 days of GPU time).
    pub fn add(&mut self, o: &Breakdown) {
        let sum = add_measured_us;
        sum(&mut self.gpu_span_us, o.gpu_span_us);
        sum(&mut self.busy_us, o.busy_us);
        sum(&mut self.idle_us, o.idle_us);
        sum(&mut self.compute_us, o.compute_us);
        sum(&mut self.comm_us, o.comm_us);
        sum(&mut self.memory_us, o.memory_us);
        sum(&mut self.overlap_us, o.overlap_us);
        sum(&mut self.exposed_comm_us, o.exposed_comm_us);
    }
}

#[cfg(test)]
#[test]
fn an_activity_touching_a_window_only_at_its_edge_is_outside_it() {
    let w = Window { start_ns: 100, end_ns: 200 };
    // The next step's first kernel, starting where the window ends; the last one of the step before.
    assert_eq!(w.overlap_ns(200, 210), None);
    assert_eq!(w.overlap_ns(90, 100), None);
    // Inside, across an edge, around the window.
    assert_eq!(w.overlap_ns(150, 160), Some(10));
    assert_eq!(w.overlap_ns(190, 210), Some(10));
    assert_eq!(w.overlap_ns(50, 250), Some(100));
    // An instant counts in [start, end).
    assert_eq!(w.overlap_ns(100, 100), Some(0));
    assert_eq!(w.overlap_ns(200, 200), None);
}

#[cfg(test)]
#[test]
fn totals_hold_the_whole_nanoseconds_their_parts_are_measured_in() {
    // Three ranks' spans, measured in ns: their f64 sum in µs had carried float noise.
    let spans_ns = [1_008_546_049_i64, 1_008_546_049, 1_008_546_048];
    let mut total = Breakdown::default();
    for ns in spans_ns {
        total.add(&Breakdown { gpu_span_us: us(ns), ..Breakdown::default() });
    }
    assert_eq!(total.gpu_span_us, us(spans_ns.iter().sum()));
    assert_eq!(format!("{}", total.gpu_span_us), "3025638.146");
}
