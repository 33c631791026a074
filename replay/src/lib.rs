//! # tracecast-replay
//!
//! Rebuilds the execution graph of a measured run (host threads, runtime
//! calls, GPU streams, launch, stream-order, cross-stream and cross-rank
//! collective edges — [`graph`]) and re-simulates it with **one**
//! deterministic discrete-event simulator ([`sim`]); [`replay()`] replays a job
//! with its measured durations (the identity that tests the graph) or with
//! compute, memory and link speed-ups, sums up its [`critical`] path and
//! writes the timeline for Perfetto ([`perfetto`]); it also projects a trace
//! onto another GPU (a calibration profile's fits), other link α-β and other
//! data-parallel sizes; [`scenario`] replays several what-ifs of one job side
//! by side (`replay --what-if`). The analytical [`workload`] models (MAD-Max's, and
//! tracecast's own transformer and DLRM models) and the plan search turn model
//! descriptions into graphs for the same simulator (DESIGN §5).
//!
//! ```
//! use tracecast_replay::sim::{simulate, At, Graph};
//! let mut g = Graph::default();
//! let launch = g.task(5, 0);
//! let kernel = g.task(100, 0);
//! g.edge(launch, At::Start, kernel, At::Start, 7);
//! let s = simulate(&g);
//! assert_eq!((s.start_ns[1], s.end_ns[1]), (7, 107));
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod critical;
pub mod error;
pub mod graph;
pub mod perfetto;
pub mod replay;
pub mod scenario;
pub mod sim;
pub mod workload;

pub use error::Error;
pub use replay::{
    ClassShare, JobReplay, LinkOverride, ProjectionReport, RankPart, ReplayOptions, ReplayTotals, Replayed, RuleShare, Scale,
    checked_job_parts, job_parts, replay, replay_job, replay_parts, replay_parts_with_collectives, speedup_in_words,
};
pub use scenario::{Scenario, ScenarioRow, replay_scenarios, scenario_rows};
