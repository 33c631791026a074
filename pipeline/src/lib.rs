//! # tracecast-pipeline
//!
//! The work of each `tracecast` command, from plain option structs to the
//! files it writes and its terminal text: the binary parses flags into a
//! command's `Options` and makes one call here. Each command is a module with
//! an `Options` struct (public fields, each with its default) and a `run`
//! function that takes the options and a writer for the terminal text and
//! says how the command ended ([`Outcome`]); a failed write to that writer
//! (a closed pipe) comes back as the command's error.
//!
//! - [`inputs`]: which files make which job, how traces are read
//!   ([`inputs::TraceOptions`]), the analysed window, and the rank-at-a-time
//!   reading loop.
//! - [`hardware`]: the one rule each for world size, GPUs per node, the
//!   job's link bandwidths, the target GPU's model and "a profile of another GPU".
//! - [`summary`], [`calibrate_summary`]: terminal text of an analysis, a
//!   profile, the catalog and a price; [`export`]: the analysis tables as CSV or
//!   Parquet; [`output`]: JSON files and per-device file names.
//! - The commands: [`analyze`], [`calibrate`], [`replay`], [`project`],
//!   [`search`], [`validate`], [`report`], [`diff`], [`ingest`], [`synth`],
//!   [`hw`], [`demo`].
//!
//! ```
//! use tracecast_pipeline::{Outcome, hw};
//! let mut out = Vec::new();
//! let outcome = hw::run(&hw::Options::default(), &mut out).unwrap();
//! assert_eq!(outcome, Outcome::Done);
//! assert!(String::from_utf8(out).unwrap().contains("h100-sxm"));
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod analyze;
pub mod calibrate;
pub mod calibrate_summary;
pub mod demo;
pub mod diff;
pub mod export;
pub mod hardware;
pub mod hw;
pub mod ingest;
pub mod inputs;
pub mod output;
pub mod project;
pub mod replay;
pub mod report;
pub mod search;
pub mod summary;
pub mod synth;
pub mod validate;

/// How a command ended, for the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything asked for was done.
    Done,
    /// Some input files could not be read, or an output asked for could not be made (each
    /// reported on stderr); the others were.
    BadFiles,
    /// `search`: no plan fits on the system.
    NoPlan,
    /// `diff`: run B regressed past a gate.
    Regressed,
}

impl Outcome {
    /// [`Outcome::BadFiles`] when `bad`, else [`Outcome::Done`].
    pub fn bad_files_if(bad: bool) -> Outcome {
        if bad { Outcome::BadFiles } else { Outcome::Done }
    }
}
