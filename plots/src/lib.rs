//! # tracecast-plots
//!
//! Draws what users would rather look at than read, as SVG (for pages) and
//! PNG: the calibration fits ([`fits`]: achieved throughput against work per
//! kernel class with the fitted curve and the peak, bus bandwidth against
//! message size per collective with the fitted α-β curve, the Pareto front of
//! a plan search), the GPU-time breakdown per rank and per step
//! ([`breakdown`], on [`bars`]), the GPU timeline of a step ([`timeline`]),
//! and the self-contained HTML page that gathers them with tables and a diff
//! of two runs ([`report`]). Text uses an embedded DejaVu Sans, so no system
//! font libraries are needed. This crate only reads the output types of the
//! crates below it.
//!
//! ```
//! let dir = std::env::temp_dir().join(format!("tracecast-plots-doc-{}", std::process::id()));
//! let chart = tracecast_plots::Scatter {
//!     title: "gemm bf16".into(),
//!     x_label: "work (FLOP)".into(),
//!     y_label: "time (µs)".into(),
//!     points: vec![(1e9, 5.0), (1e10, 20.0), (1e11, 160.0)],
//!     curve: vec![(1e9, 5.5), (1e11, 150.0)],
//!     log_x: true,
//!     log_y: true,
//!     reference: None,
//!     legend: ["measured".into(), "fit".into()],
//! };
//! let files = tracecast_plots::write_scatter(&chart, &dir.join("gemm")).unwrap();
//! assert_eq!(files.len(), 2);
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod bars;
pub mod breakdown;
mod chart;
pub mod fits;
mod page;
pub mod report;
pub mod timeline;

pub use chart::{Chart, Error, Scatter, to_svg, write_chart, write_scatter};
