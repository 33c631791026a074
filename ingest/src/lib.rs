//! # tracecast-ingest
//!
//! Turns PyTorch profiler (Kineto) Chrome traces — one file per rank, `.json`
//! or `.json.gz` — and Nsight Systems SQLite exports ([`nsys`], one rank per
//! process and GPU) into a columnar event model, assembles ranks into a
//! [`Job`], and computes the GPU-time breakdown of DESIGN §3: busy, idle,
//! compute, communication, memory, their overlap and the **exposed
//! communication** that no computation overlaps, per rank, per step and per
//! collective.
//!
//! Main types: [`RankTrace`] (one file, struct of arrays), [`Job`] (the ranks
//! of one run), [`analysis::JobAnalysis`] (what `tracecast analyze` prints).
//!
//! ```
//! use std::path::Path;
//! use tracecast_ingest::{kineto, analysis, ReadOptions};
//!
//! let json = br#"{"traceEvents": [
//!   {"ph": "X", "cat": "kernel", "name": "sm80_gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 10},
//!   {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_RING_LL", "pid": 0, "tid": 20, "ts": 5, "dur": 10}
//! ]}"#;
//! let trace = kineto::parse_bytes(json, Path::new("rank0.json"), &ReadOptions::default()).unwrap();
//! let b = analysis::Breakdown::of_window(&trace, &analysis::Classifier::default(), analysis::Window::all(&trace).unwrap());
//! assert_eq!(b.comm_us, 10.0);
//! assert_eq!(b.exposed_comm_us, 5.0); // [10, 15) has no compute under it
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod analysis;
pub mod collective;
pub mod dataset;
pub mod device;
mod error;
pub mod event;
mod fast;
pub mod input;
pub mod job;
pub mod kineto;
mod lenient;
pub mod link;
pub mod memory;
pub mod nsys;
pub mod output;
mod rank;
mod scan;
pub mod time;

pub use error::{Error, Result, json_message};
pub use event::{EventKind, Events, NameId, Names};
pub use job::Job;
pub use kineto::ReadOptions;
pub use rank::{OpShapes, RankTrace, SyncWait};
