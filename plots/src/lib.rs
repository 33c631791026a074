//! # tracecast-plots
//!
//! Draws what users would rather look at than read: per-rank breakdown bars,
//! step timelines, bandwidth-vs-size and efficiency-vs-work curves with their
//! fits, replay and projection comparisons, as plotters SVG/PNG charts and one
//! self-contained HTML report per job. It only reads the output types of the
//! crates below it.
//!
//! This crate is a placeholder until the plots issue lands.
#![deny(missing_docs)]
#![warn(unreachable_pub)]
