//! The per-rank context: the facts about one rank's trace that several
//! products need (DESIGN §1), each computed at most once while the trace is
//! in memory, and borrowed by every product built from it — the rank's
//! analysis ([`super::summarize`]), calibration's kernel work and samples,
//! replay's part of the execution graph, the report's timeline rows.

use std::sync::OnceLock;

use super::breakdown::{RankSets, Window};
use super::classify::{ActivityClass, Classifier};
use super::collectives::{self, Instance, RankCollectives};
use super::steps::{self, Step};
use crate::job::{Rank, RankSource};
use crate::link::Links;
use crate::rank::RankTrace;

/// One rank's trace with its facts: activity classes (of one
/// [`Classifier`]), launch links, profiler steps with their partitioned GPU
/// windows and the step of every GPU row, the unions of GPU activity by
/// class, and the collective instances. Each fact is computed on first use
/// and kept, so a command computes only the facts its products need, once.
///
/// ```
/// use std::path::Path;
/// use tracecast_ingest::{kineto, job::{Rank, RankSource}, ReadOptions};
/// use tracecast_ingest::analysis::{Classifier, RankContext};
///
/// let json = br#"{"traceEvents": [
///   {"ph": "X", "cat": "kernel", "name": "sm80_gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 10}
/// ]}"#;
/// let trace = kineto::parse_bytes(json, Path::new("rank0.json"), &ReadOptions::default()).unwrap();
/// let rank = Rank { rank: 0, source: RankSource::FileOrder, trace };
/// let classifier = Classifier::default();
/// let ctx = RankContext::new(&rank, &classifier);
/// assert_eq!(ctx.sets().compute.measure(0, 10_000), 10_000);
/// assert!(ctx.steps().is_empty());
/// ```
#[derive(Debug)]
pub struct RankContext<'r> {
    trace: &'r RankTrace,
    rank: u32,
    source: RankSource,
    classifier: &'r Classifier,
    classes: OnceLock<Vec<Option<ActivityClass>>>,
    links: OnceLock<Links>,
    steps: OnceLock<(Vec<Step>, Vec<Option<u32>>)>,
    sets: OnceLock<RankSets>,
    instances: OnceLock<Vec<Instance>>,
}

impl<'r> RankContext<'r> {
    /// The context of `rank`, its activity classes those of `classifier`.
    pub fn new(rank: &'r Rank, classifier: &'r Classifier) -> RankContext<'r> {
        RankContext::of_trace(&rank.trace, rank.rank, rank.source, classifier)
    }

    /// The context of a trace read on its own as rank `rank`.
    pub fn of_trace(trace: &'r RankTrace, rank: u32, source: RankSource, classifier: &'r Classifier) -> RankContext<'r> {
        RankContext {
            trace,
            rank,
            source,
            classifier,
            classes: OnceLock::new(),
            links: OnceLock::new(),
            steps: OnceLock::new(),
            sets: OnceLock::new(),
            instances: OnceLock::new(),
        }
    }

    /// The trace.
    pub fn trace(&self) -> &'r RankTrace {
        self.trace
    }

    /// Global rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Where the rank number came from.
    pub fn source(&self) -> RankSource {
        self.source
    }

    /// The classifier of [`RankContext::classes`].
    pub fn classifier(&self) -> &'r Classifier {
        self.classifier
    }

    /// The activity class of every row (`None` for rows that are not GPU activity).
    pub fn classes(&self) -> &[Option<ActivityClass>] {
        self.classes.get_or_init(|| self.classifier.classes(self.trace))
    }

    /// Launch links and CPU nesting.
    pub fn links(&self) -> &Links {
        self.links.get_or_init(|| Links::new(self.trace))
    }

    fn steps_and_rows(&self) -> &(Vec<Step>, Vec<Option<u32>>) {
        self.steps.get_or_init(|| steps::steps_and_rows(self.trace, self.links()))
    }

    /// Every profiler step, in time order, their GPU windows partitioned (see [`super::find_steps`]).
    pub fn steps(&self) -> &[Step] {
        &self.steps_and_rows().0
    }

    /// Checks that the inclusive step range `range` (`--steps`) selects at
    /// least one of the rank's steps, after its last is left out when
    /// `drop_last` (`--drop-last-step`), as the analysis selects them; else an
    /// error naming the steps the trace has.
    pub fn check_step_range(&self, range: Option<(i64, i64)>, drop_last: bool) -> crate::Result<()> {
        match range {
            None => Ok(()),
            Some(_) => steps::check_step_range(self.trace.given_path(), self.steps(), range, drop_last),
        }
    }

    /// The index into [`RankContext::steps`] of the step GPU row `row` was
    /// launched in ([`super::step_of_activity`]); `None` for other rows, work
    /// launched outside every step, and traces without steps.
    pub fn step_of(&self, row: usize) -> Option<u32> {
        self.steps_and_rows().1.get(row).copied().flatten()
    }

    /// The unions of GPU activity by class.
    pub fn sets(&self) -> &RankSets {
        self.sets.get_or_init(|| RankSets::new(self.trace, self.classes()))
    }

    /// From the first GPU activity start to the last end; `None` without GPU activity.
    pub fn window_all(&self) -> Option<Window> {
        Window::all(self.trace)
    }

    /// The communication kernels as collective instances, in time order.
    pub(crate) fn instances(&self) -> &[Instance] {
        self.instances.get_or_init(|| collectives::instances(self.trace, self.classes(), self.links()))
    }

    /// The rank's collective instances for [`super::JobCollectives`] (a copy).
    pub fn collectives(&self) -> RankCollectives {
        RankCollectives::new(self.rank, self.trace.declared_world_size(), self.instances().to_vec())
    }

    /// [`RankContext::collectives`] without the copy, when the context is done with.
    pub fn into_collectives(self) -> RankCollectives {
        let rank = self.rank;
        let world = self.trace.declared_world_size();
        let _ = self.instances();
        RankCollectives::new(rank, world, self.instances.into_inner().unwrap_or_default())
    }
}
