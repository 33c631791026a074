//! The GPU-time breakdown of DESIGN §3 and the analyses `tracecast analyze` reports.
//!
//! Definitions (per rank, window W, ∪ = union of intervals clipped to W):
//! `gpu_span_us` = |W|; `busy_us` = |∪ GPU activity|; `idle_us` = span − busy;
//! `compute_us`, `comm_us`, `memory_us` = |∪| of each class; `overlap_us` =
//! |∪comm ∩ ∪compute| (in a trace one process wrote of several GPUs, only a
//! GPU's own compute overlaps its communication: [`RankSets::new`]);
//! `exposed_comm_us` = comm − overlap. GPU activity is
//! kernels, memcpy and memset; sync rows and CPU ops carrying a stream are not.
//! These equal HTA 0.5's temporal breakdown and comm/comp overlap when HTA's
//! µs rounding is disabled and its extra rows are left out.

/// The version of what a rank's analysis computes: caches of it (a dataset's
/// `summaries`, see [`summary_key`]) made under another version are not used.
/// Bump it with every change to the analysis output — a fixed rule, a new or
/// renamed field, a different default — so that a dataset ingested before the
/// change is re-analysed from its events instead of serving stale numbers.
pub const SCHEMA_VERSION: u32 = 10;

mod breakdown;
mod classify;
pub(crate) use classify::is_nccl_kernel;
mod collectives;
mod context;
pub mod dimension;
pub mod facts;
mod idle;
pub mod interval;
mod job;
mod job_collectives;
mod kernels;
mod steps;

pub use breakdown::{Breakdown, RankSets, Window, WindowMode};
pub use classify::{ActivityClass, Classifier, CommKernels, FAMILIES, Family, family_collective};
pub use collectives::{
    ClockAlignment, CollectiveSample, CollectiveStats, MessageSizeRow, RankCollectives, Straggler, bandwidth_text, collective_samples,
    message_size_rows, message_size_rows_of,
};
pub use context::RankContext;
pub use idle::{IdleSplit, StreamIdle};
pub use job::{
    AnalyzeOptions, BadFile, DimensionTotal, GpuHours, JobAnalysis, JobStep, RankAnalysis, RankCount, RankSpread, RankSummary, Totals,
    analyze_job, gpu_hours_text, job_steps, measured_breakdown, notes_by_text, notes_in_words, rank_list, reduce, reduce_matched,
    runs_apart, summarize, summarize_rank, summary_key, three_figures,
};
pub use job_collectives::JobCollectives;
pub use kernels::{KernelStats, kernel_stats, short_kernel_name, short_kernel_names};
pub use steps::{Step, StepBreakdown, describe_numbers, find_steps, partition_windows, step_of_activity, steps_window};
