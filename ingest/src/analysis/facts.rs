//! How often this process computed each per-rank fact and each cross-rank
//! matching: a diagnostic that shows every command computes a rank's facts
//! once (DESIGN §1: one [`super::RankContext`] per rank, one
//! [`super::JobCollectives`] per job). The counters are relaxed atomics bumped
//! once per rank (never per event), so they cost nothing measurable.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A fact computed from one rank's trace (or, for [`Fact::Matching`], from a job's ranks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Fact {
    /// The activity class of every row ([`super::Classifier::classes`]).
    Classes,
    /// Launch links and CPU nesting ([`crate::link::Links::new`]).
    Links,
    /// The profiler steps, their partitioned GPU windows and the step of every GPU row.
    Steps,
    /// The unions of GPU activity by class ([`super::RankSets::new`]).
    Sets,
    /// The communication kernels as collective instances.
    Instances,
    /// The rank's analysis ([`super::summarize`]).
    Analysis,
    /// The work of every compute kernel (calibrate's `kernel_work`).
    KernelWork,
    /// The rank's part of the execution graph (replay's `RankPiece`).
    Graph,
    /// One cross-rank matching of a job's collectives ([`super::JobCollectives::new`]).
    Matching,
}

impl Fact {
    /// Every fact, in the order [`Counts`] prints them.
    pub const ALL: [Fact; 9] = [
        Fact::Classes,
        Fact::Links,
        Fact::Steps,
        Fact::Sets,
        Fact::Instances,
        Fact::Analysis,
        Fact::KernelWork,
        Fact::Graph,
        Fact::Matching,
    ];

    /// Name as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Fact::Classes => "classes",
            Fact::Links => "links",
            Fact::Steps => "steps",
            Fact::Sets => "sets",
            Fact::Instances => "instances",
            Fact::Analysis => "analysis",
            Fact::KernelWork => "kernel_work",
            Fact::Graph => "graph",
            Fact::Matching => "matching",
        }
    }

    fn index(self) -> usize {
        Fact::ALL.iter().position(|&f| f == self).unwrap_or(0)
    }
}

static COUNTS: [AtomicUsize; 9] = [const { AtomicUsize::new(0) }; 9];

/// Records that `fact` was computed once more.
pub fn count(fact: Fact) {
    if let Some(c) = COUNTS.get(fact.index()) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// The counts so far in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts(Vec<(Fact, usize)>);

impl Counts {
    /// How often `fact` was computed.
    pub fn of(&self, fact: Fact) -> usize {
        self.0.iter().find(|(f, _)| *f == fact).map_or(0, |x| x.1)
    }
}

impl std::fmt::Display for Counts {
    /// `classes=4 links=4 …`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(fact, n)| format!("{}={n}", fact.as_str())).collect();
        f.write_str(&parts.join(" "))
    }
}

/// The counts so far in this process.
pub fn counts() -> Counts {
    Counts(Fact::ALL.iter().map(|&f| (f, COUNTS.get(f.index()).map_or(0, |c| c.load(Ordering::Relaxed)))).collect())
}
