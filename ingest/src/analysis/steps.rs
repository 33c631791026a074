//! `ProfilerStep#N` annotations and their GPU windows.

use serde::Serialize;

use super::breakdown::{Breakdown, Window};
use crate::event::EventKind;
use crate::link::Links;
use crate::rank::RankTrace;

/// One profiler step: its CPU annotation and the GPU work launched inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The number after `#`.
    pub number: i64,
    /// CPU annotation start, ns.
    pub cpu_start_ns: i64,
    /// CPU annotation end, ns.
    pub cpu_end_ns: i64,
    /// From the first GPU activity launched inside the annotation to the last one's end;
    /// `None` when no GPU activity was launched in it.
    pub gpu: Option<Window>,
}

/// A step's breakdown as reported.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct StepBreakdown {
    /// The number after `#`.
    pub step: i64,
    /// Duration of the CPU annotation, µs.
    pub cpu_dur_us: f64,
    /// The §3 breakdown of the step's GPU window (zeros when it launched no GPU work).
    #[serde(flatten)]
    pub breakdown: Breakdown,
}

impl StepBreakdown {
    /// Whether the step ran GPU work: only such steps make the job's step time.
    pub fn ran_gpu_work(&self) -> bool {
        super::job::ran_gpu_work(self.breakdown.gpu_span_us)
    }
}

/// The steps of a trace, in time order. Only CPU `ProfilerStep#` annotations
/// count (their `gpu_user_annotation` copies are ignored); a repeated number is kept once.
pub fn find_steps(trace: &RankTrace, links: &Links) -> Vec<Step> {
    steps_and_rows(trace, links).0
}

/// [`find_steps`] and, for every row, the index into them of the step its
/// GPU activity belongs to ([`step_of_activity`]; empty without steps).
pub(crate) fn steps_and_rows(trace: &RankTrace, links: &Links) -> (Vec<Step>, Vec<Option<u32>>) {
    super::facts::count(super::facts::Fact::Steps);
    let ev = &trace.events;
    let mut steps = annotations(trace);
    if steps.is_empty() {
        return (steps, Vec::new());
    }
    let rows = step_of_activity(trace, links, &steps);
    for (i, k) in rows.iter().enumerate() {
        let Some(step) = k.and_then(|k| steps.get_mut(k as usize)) else { continue };
        step.gpu = Some(Window::cover(step.gpu, ev.ts_ns.get(i).copied().unwrap_or(0), ev.end_ns(i)));
    }
    partition(&mut steps);
    (steps, rows)
}

/// The CPU `ProfilerStep#` annotations of a trace as steps without GPU
/// windows, in time order (see [`find_steps`]).
fn annotations(trace: &RankTrace) -> Vec<Step> {
    let ev = &trace.events;
    let mut steps: Vec<Step> = Vec::new();
    for i in 0..ev.len() {
        if ev.kind.get(i) != Some(&EventKind::UserAnnotation) {
            continue;
        }
        let Some(number) = trace.name(i).strip_prefix("ProfilerStep#").and_then(|n| n.trim().parse::<i64>().ok()) else {
            continue;
        };
        if steps.iter().any(|s| s.number == number) {
            continue;
        }
        let start = ev.ts_ns.get(i).copied().unwrap_or(0);
        steps.push(Step { number, cpu_start_ns: start, cpu_end_ns: ev.end_ns(i), gpu: None });
    }
    steps.sort_by_key(|s| (s.cpu_start_ns, s.number));
    steps
}

/// Checks that the inclusive step range `range` (`--steps`) selects at least
/// one of `steps` (a rank's, in time order, of the trace at `path`), after the
/// last is left out when `drop_last` (`--drop-last-step`), as the analysis
/// selects them. A range that selects nothing is an error naming the steps
/// the trace has: analysing the whole trace instead would answer another
/// question than the one asked. See [`super::RankContext::check_step_range`].
pub(crate) fn check_step_range(path: &std::path::Path, steps: &[Step], range: Option<(i64, i64)>, drop_last: bool) -> crate::Result<()> {
    let Some((first, last)) = range else { return Ok(()) };
    let mut numbers: Vec<i64> = steps.iter().map(|s| s.number).collect();
    let dropped = if drop_last && numbers.len() > 1 { numbers.pop() } else { None };
    if numbers.iter().any(|n| (first..=last).contains(n)) {
        return Ok(());
    }
    numbers.sort_unstable();
    let mut has = describe_numbers(&numbers);
    if let Some(n) = dropped {
        has.push_str(&format!(" (and step {n}, its last, which --drop-last-step leaves out)"));
    }
    Err(crate::Error::NoStepsSelected { path: path.to_path_buf(), first, last, has })
}

/// `steps 1009–1014`, `steps 1, 3–5`, `step 7`, or `no ProfilerStep annotations`, of sorted distinct numbers.
pub fn describe_numbers(numbers: &[i64]) -> String {
    let text = number_runs(numbers.iter().copied()).join(", ");
    match numbers.len() {
        0 => "no ProfilerStep annotations".to_string(),
        1 => format!("step {text}"),
        _ => format!("steps {text}"),
    }
}

/// Ascending numbers as their runs: `3`, `5–9`.
pub(crate) fn number_runs(numbers: impl IntoIterator<Item = i64>) -> Vec<String> {
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for n in numbers {
        match runs.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(n) => *end = n,
            _ => runs.push((n, n)),
        }
    }
    runs.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}–{b}") }).collect()
}

/// Makes the steps' GPU windows partition the timeline: a step runs from its
/// first GPU work to where the next step's GPU work begins (the GPU idling
/// for the host between steps is part of the step's time), the last one to
/// its last GPU work. Work of a lagging stream that is still running then
/// belongs to the time of the step it overlaps, instead of stretching every
/// step over its neighbours (an A100 rank of a 16-rank job had five 370 ms
/// steps inside a 1229 ms window).
fn partition(steps: &mut [Step]) {
    let mut windows: Vec<Option<Window>> = steps.iter().map(|s| s.gpu).collect();
    partition_windows(&mut windows);
    for (step, w) in steps.iter_mut().zip(windows) {
        step.gpu = w;
    }
}

/// The one partition rule of step windows (see [`find_steps`]), for windows
/// in step order: each window ends where the next step's GPU work begins,
/// the last one at its own end. `replay` applies it to replayed timelines so
/// its steps are `analyze`'s.
pub fn partition_windows(windows: &mut [Option<Window>]) {
    let starts: Vec<Option<i64>> = windows.iter().map(|w| w.map(|w| w.start_ns)).collect();
    for (k, window) in windows.iter_mut().enumerate() {
        let next = starts.iter().skip(k + 1).flatten().min().copied();
        if let (Some(w), Some(n)) = (window.as_mut(), next) {
            w.end_ns = n.max(w.start_ns);
        }
    }
}

/// For every row: the index (into `steps`, sorted by start) of the step whose
/// CPU annotation contains the launch of that GPU activity; `None` for other
/// rows and for GPU work launched outside every step.
pub fn step_of_activity(trace: &RankTrace, links: &Links, steps: &[Step]) -> Vec<Option<u32>> {
    let starts: Vec<i64> = steps.iter().map(|s| s.cpu_start_ns).collect();
    let mut out = vec![None; trace.events.len()];
    for i in trace.gpu_activity() {
        let Some(launch) = links.launch_ns(trace, i) else { continue };
        let k = starts.partition_point(|&s| s <= launch);
        let Some(k) = k.checked_sub(1) else { continue };
        if steps.get(k).is_some_and(|s| launch <= s.cpu_end_ns) {
            out[i] = Some(k as u32);
        }
    }
    out
}

/// The window spanning every step's GPU window, `None` when no step launched GPU work.
pub fn steps_window(steps: &[Step]) -> Option<Window> {
    steps.iter().filter_map(|s| s.gpu).fold(None, |w, g| Some(Window::cover(w, g.start_ns, g.end_ns)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_numbers_are_described_as_runs() {
        assert_eq!(describe_numbers(&[1009, 1010, 1011, 1012, 1013, 1014]), "steps 1009–1014");
        assert_eq!(describe_numbers(&[1, 3, 4, 5, 9]), "steps 1, 3–5, 9");
        assert_eq!(describe_numbers(&[7]), "step 7");
        assert_eq!(describe_numbers(&[i64::MAX - 1, i64::MAX]), format!("steps {}–{}", i64::MAX - 1, i64::MAX));
        assert_eq!(describe_numbers(&[]), "no ProfilerStep annotations");
    }
}
