//! CSV / Parquet tables of an analysis, built with polars.

use std::path::Path;

use anyhow::Result;
use polars::prelude::*;
use tracecast_ingest::analysis::{Breakdown, JobAnalysis, RankAnalysis, WindowMode};
use tracecast_ingest::output;

/// Table file format.
#[derive(Clone, Copy)]
pub enum Format {
    /// Comma-separated values with a header row.
    Csv,
    /// Parquet (the oldest Arrow schema, for every reader).
    Parquet,
}

fn col<T, P: ?Sized>(name: &str, values: T) -> Column
where
    Series: NamedFrom<T, P>,
{
    Column::new(name.into(), values)
}

fn stage(df: &mut DataFrame, dir: &Path, stem: &str, format: Format) -> Result<output::Staged> {
    let path = match format {
        Format::Csv => dir.join(format!("{stem}.csv")),
        Format::Parquet => dir.join(format!("{stem}.parquet")),
    };
    let mut buf: Vec<u8> = Vec::new();
    match format {
        Format::Csv => CsvWriter::new(&mut buf).finish(df)?,
        Format::Parquet => buf = output::parquet_bytes(df)?,
    }
    Ok(output::stage(&path, &buf)?)
}

/// A column of `rows`: its name and what each row gives.
fn column<R, V>(rows: &[R], name: &str, value: impl Fn(&R) -> V) -> Column
where
    Series: NamedFrom<Vec<V>, [V]>,
{
    col(name, rows.iter().map(value).collect::<Vec<V>>())
}

/// The rows of a table with a row per rank and item: every `items` of every
/// rank of every job, with the job's path and the rank.
fn per_rank<'a, T: 'a>(jobs: &'a [JobAnalysis], items: impl Fn(&'a RankAnalysis) -> &'a [T]) -> Vec<(&'a str, u32, &'a T)> {
    let items = &items;
    jobs.iter().flat_map(|j| j.ranks.iter().flat_map(move |r| items(r).iter().map(move |x| (j.path.as_str(), r.rank, x)))).collect()
}

/// The breakdown's columns (§3 of DESIGN), in the tables' order.
const BREAKDOWN: [&str; 8] = ["gpu_span_us", "busy_us", "idle_us", "compute_us", "comm_us", "memory_us", "overlap_us", "exposed_comm_us"];

/// A breakdown's values in [`BREAKDOWN`]'s order.
fn breakdown_values(b: &Breakdown) -> [f64; 8] {
    [b.gpu_span_us, b.busy_us, b.idle_us, b.compute_us, b.comm_us, b.memory_us, b.overlap_us, b.exposed_comm_us]
}

/// Stages `jobs`, `job_steps`, `breakdown`, `steps`, `collectives`, `kernels`,
/// `dimensions` and `stragglers` tables in `dir`, for the caller to commit once every output
/// of its command is staged (one that cannot be written leaves none of them).
pub fn stage_tables(jobs: &[JobAnalysis], dir: &Path, format: Format) -> Result<Vec<output::Staged>> {
    tracecast_ingest::output::create_dir(dir)?;
    let mut staged = Vec::new();
    let mut table = |stem: &str, columns: Vec<Column>| -> Result<()> {
        staged.push(stage(&mut DataFrame::new_infer_height(columns)?, dir, stem, format)?);
        Ok(())
    };

    // One row per job: its totals as the JSON's `totals` (the per-rank tables alone had left
    // the job's step time, fractions and GPU-hours to be worked out again).
    let mut cols = vec![
        col("job", jobs.iter().map(|j| j.path.as_str()).collect::<Vec<&str>>()),
        column(jobs, "world_size", |j| j.world_size),
        column(jobs, "ranks", |j| j.totals.ranks as u64),
    ];
    cols.extend(BREAKDOWN.iter().enumerate().map(|(k, name)| column(jobs, name, |j| breakdown_values(&j.totals.breakdown)[k])));
    cols.extend([
        column(jobs, "exposed_comm_fraction", |j| j.totals.exposed_comm_fraction),
        column(jobs, "comm_fraction", |j| j.totals.comm_fraction),
        column(jobs, "compute_fraction", |j| j.totals.compute_fraction),
        column(jobs, "idle_fraction", |j| j.totals.idle_fraction),
        column(jobs, "mean_step_us", |j| j.mean_step_us()),
        column(jobs, "gpu_hours", |j| j.totals.gpu_hours.as_ref().map(|h| h.total)),
        column(jobs, "exposed_comm_gpu_hours", |j| j.totals.gpu_hours.as_ref().map(|h| h.exposed_comm)),
        column(jobs, "compute_gpu_hours", |j| j.totals.gpu_hours.as_ref().map(|h| h.compute)),
        column(jobs, "idle_gpu_hours", |j| j.totals.gpu_hours.as_ref().map(|h| h.idle)),
    ]);
    table("jobs", cols)?;

    // One row per job and step: the job's step time (its slowest rank's).
    let rows: Vec<_> = jobs.iter().flat_map(|j| j.totals.steps.iter().map(move |s| (j.path.as_str(), s))).collect();
    table(
        "job_steps",
        vec![
            column(&rows, "job", |x| x.0),
            column(&rows, "step", |x| x.1.step),
            column(&rows, "step_us", |x| x.1.step_us),
            column(&rows, "slowest_rank", |x| x.1.slowest_rank),
            column(&rows, "ranks", |x| x.1.ranks as u64),
        ],
    )?;

    // One row per rank.
    let rows = per_rank(jobs, std::slice::from_ref);
    let mut cols = vec![
        column(&rows, "job", |x| x.0),
        column(&rows, "file", |x| x.2.file.as_str()),
        column(&rows, "rank", |x| x.1),
        column(&rows, "window", |x| if x.2.window == WindowMode::Steps { "steps" } else { "all" }),
    ];
    cols.extend(BREAKDOWN.iter().enumerate().map(|(k, name)| column(&rows, name, |x| breakdown_values(&x.2.breakdown)[k])));
    let idle = [("host_wait_us", 0), ("kernel_wait_us", 1), ("other_idle_us", 2)];
    cols.extend(idle.iter().map(|&(name, k)| {
        column(&rows, name, |x| {
            let i = &x.2.idle_split;
            [i.host_wait_us, i.kernel_wait_us, i.other_us][k]
        })
    }));
    table("breakdown", cols)?;

    // One row per rank and step.
    let rows = per_rank(jobs, |r| &r.steps);
    let mut cols = vec![
        column(&rows, "job", |x| x.0),
        column(&rows, "rank", |x| x.1),
        column(&rows, "step", |x| x.2.step),
        column(&rows, "cpu_dur_us", |x| x.2.cpu_dur_us),
    ];
    cols.extend(BREAKDOWN.iter().enumerate().map(|(k, name)| column(&rows, name, |x| breakdown_values(&x.2.breakdown)[k])));
    table("steps", cols)?;

    // One row per rank, collective and process group.
    let rows = per_rank(jobs, |r| &r.collectives);
    table(
        "collectives",
        vec![
            column(&rows, "job", |x| x.0),
            column(&rows, "rank", |x| x.1),
            column(&rows, "collective", |x| x.2.collective.as_str()),
            column(&rows, "process_group", |x| x.2.process_group.as_deref()),
            column(&rows, "group_size", |x| x.2.group_size),
            column(&rows, "count", |x| x.2.count),
            column(&rows, "total_us", |x| x.2.total_us),
            column(&rows, "mean_us", |x| x.2.mean_us),
            column(&rows, "bytes", |x| x.2.bytes),
            // The kernels the bytes and bandwidths are of, and those the transfer and wait are of:
            // without them the columns do not add up (4 kernels, 3 matched).
            column(&rows, "sized_count", |x| x.2.sized_count),
            column(&rows, "algbw_gbps", |x| x.2.algbw_gbps),
            column(&rows, "busbw_gbps", |x| x.2.busbw_gbps),
            column(&rows, "matched", |x| x.2.matched),
            column(&rows, "transfer_us", |x| x.2.transfer_us),
            column(&rows, "wait_us", |x| x.2.wait_us),
        ],
    )?;

    // One row per rank and kernel name.
    let rows = per_rank(jobs, |r| &r.all_kernels);
    table(
        "kernels",
        vec![
            column(&rows, "job", |x| x.0),
            column(&rows, "rank", |x| x.1),
            column(&rows, "name", |x| x.2.name.as_str()),
            column(&rows, "class", |x| x.2.class.as_str()),
            column(&rows, "count", |x| x.2.count),
            column(&rows, "total_us", |x| x.2.total_us),
            column(&rows, "mean_us", |x| x.2.mean_us),
            column(&rows, "max_us", |x| x.2.max_us),
        ],
    )?;

    // One row per rank and parallelism dimension.
    let rows = per_rank(jobs, |r| &r.comm_by_dimension);
    table(
        "dimensions",
        vec![
            column(&rows, "job", |x| x.0),
            column(&rows, "rank", |x| x.1),
            column(&rows, "dimension", |x| x.2.dimension.as_str()),
            column(&rows, "from", |x| x.2.from),
            column(&rows, "comm_us", |x| x.2.comm_us),
            column(&rows, "exposed_comm_us", |x| x.2.exposed_comm_us),
        ],
    )?;

    // One row per straggling rank.
    let rows: Vec<_> = jobs.iter().flat_map(|j| j.stragglers.iter().map(move |s| (j.path.as_str(), s))).collect();
    table(
        "stragglers",
        vec![
            column(&rows, "job", |x| x.0),
            column(&rows, "rank", |x| x.1.rank),
            column(&rows, "times_last", |x| x.1.times_last as u64),
            column(&rows, "wait_caused_us", |x| x.1.wait_caused_us),
            column(&rows, "wait_caused_gpu_hours", |x| x.1.wait_caused_gpu_hours),
        ],
    )?;
    Ok(staged)
}
