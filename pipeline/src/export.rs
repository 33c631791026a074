//! CSV / Parquet tables of an analysis, built with polars.

use std::path::Path;

use anyhow::Result;
use polars::prelude::*;
use tracecast_ingest::analysis::JobAnalysis;
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

fn write(df: &mut DataFrame, dir: &Path, stem: &str, format: Format) -> Result<()> {
    let path = match format {
        Format::Csv => dir.join(format!("{stem}.csv")),
        Format::Parquet => dir.join(format!("{stem}.parquet")),
    };
    let mut buf: Vec<u8> = Vec::new();
    match format {
        Format::Csv => CsvWriter::new(&mut buf).finish(df)?,
        Format::Parquet => buf = output::parquet_bytes(df)?,
    }
    output::write_atomic(&path, &buf)?;
    Ok(())
}

/// Writes `breakdown`, `steps`, `collectives`, `kernels`, `dimensions` and `stragglers` tables into `dir`.
pub fn write_tables(jobs: &[JobAnalysis], dir: &Path, format: Format) -> Result<()> {
    std::fs::create_dir_all(dir)?;

    // One row per rank.
    let mut job = Vec::new();
    let mut file = Vec::new();
    let mut rank = Vec::new();
    let mut window = Vec::new();
    let mut m: [Vec<f64>; 11] = Default::default();
    for j in jobs {
        for r in &j.ranks {
            job.push(j.path.clone());
            file.push(r.file.clone());
            rank.push(r.rank);
            window.push(if r.window == tracecast_ingest::analysis::WindowMode::Steps { "steps" } else { "all" });
            let b = &r.breakdown;
            let vals = [
                b.gpu_span_us,
                b.busy_us,
                b.idle_us,
                b.compute_us,
                b.comm_us,
                b.memory_us,
                b.overlap_us,
                b.exposed_comm_us,
                r.idle_split.host_wait_us,
                r.idle_split.kernel_wait_us,
                r.idle_split.other_us,
            ];
            for (c, v) in m.iter_mut().zip(vals) {
                c.push(v);
            }
        }
    }
    const NAMES: [&str; 11] = [
        "gpu_span_us",
        "busy_us",
        "idle_us",
        "compute_us",
        "comm_us",
        "memory_us",
        "overlap_us",
        "exposed_comm_us",
        "host_wait_us",
        "kernel_wait_us",
        "other_idle_us",
    ];
    let mut cols = vec![col("job", job), col("file", file), col("rank", rank), col("window", window)];
    for (name, values) in NAMES.iter().zip(m) {
        cols.push(col(name, values));
    }
    let mut df = DataFrame::new_infer_height(cols)?;
    write(&mut df, dir, "breakdown", format)?;

    // One row per rank and step.
    let (mut job, mut rank, mut step, mut cpu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut m: [Vec<f64>; 8] = Default::default();
    for j in jobs {
        for r in &j.ranks {
            for s in &r.steps {
                job.push(j.path.clone());
                rank.push(r.rank);
                step.push(s.step);
                cpu.push(s.cpu_dur_us);
                let b = &s.breakdown;
                let vals = [b.gpu_span_us, b.busy_us, b.idle_us, b.compute_us, b.comm_us, b.memory_us, b.overlap_us, b.exposed_comm_us];
                for (c, v) in m.iter_mut().zip(vals) {
                    c.push(v);
                }
            }
        }
    }
    let mut cols = vec![col("job", job), col("rank", rank), col("step", step), col("cpu_dur_us", cpu)];
    for (name, values) in NAMES.iter().zip(m) {
        cols.push(col(name, values));
    }
    let mut df = DataFrame::new_infer_height(cols)?;
    write(&mut df, dir, "steps", format)?;

    // One row per rank, collective and process group.
    let (mut job, mut rank, mut name, mut pg, mut size, mut count) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut total, mut bytes, mut algbw, mut busbw, mut transfer, mut wait) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for j in jobs {
        for r in &j.ranks {
            for c in &r.collectives {
                job.push(j.path.clone());
                rank.push(r.rank);
                name.push(c.collective.as_str());
                pg.push(c.process_group.clone());
                size.push(c.group_size);
                count.push(c.count);
                total.push(c.total_us);
                bytes.push(c.bytes);
                algbw.push(c.algbw_gbps);
                busbw.push(c.busbw_gbps);
                transfer.push(c.transfer_us);
                wait.push(c.wait_us);
            }
        }
    }
    let mut df = DataFrame::new_infer_height(vec![
        col("job", job),
        col("rank", rank),
        col("collective", name),
        col("process_group", pg),
        col("group_size", size),
        col("count", count),
        col("total_us", total),
        col("bytes", bytes),
        col("algbw_gbps", algbw),
        col("busbw_gbps", busbw),
        col("transfer_us", transfer),
        col("wait_us", wait),
    ])?;
    write(&mut df, dir, "collectives", format)?;

    // One row per rank and kernel name.
    let (mut job, mut rank, mut name, mut class, mut count, mut total, mut mean, mut max) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for j in jobs {
        for r in &j.ranks {
            for k in &r.all_kernels {
                job.push(j.path.clone());
                rank.push(r.rank);
                name.push(k.name.clone());
                class.push(k.class.as_str());
                count.push(k.count);
                total.push(k.total_us);
                mean.push(k.mean_us);
                max.push(k.max_us);
            }
        }
    }
    let mut df = DataFrame::new_infer_height(vec![
        col("job", job),
        col("rank", rank),
        col("name", name),
        col("class", class),
        col("count", count),
        col("total_us", total),
        col("mean_us", mean),
        col("max_us", max),
    ])?;
    write(&mut df, dir, "kernels", format)?;

    // One row per rank and parallelism dimension.
    let (mut job, mut rank, mut dim, mut from, mut comm, mut exposed) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for j in jobs {
        for r in &j.ranks {
            for d in &r.comm_by_dimension {
                job.push(j.path.clone());
                rank.push(r.rank);
                dim.push(d.dimension.as_str());
                from.push(d.from);
                comm.push(d.comm_us);
                exposed.push(d.exposed_comm_us);
            }
        }
    }
    let mut df = DataFrame::new_infer_height(vec![
        col("job", job),
        col("rank", rank),
        col("dimension", dim),
        col("from", from),
        col("comm_us", comm),
        col("exposed_comm_us", exposed),
    ])?;
    write(&mut df, dir, "dimensions", format)?;

    // One row per straggling rank.
    let (mut job, mut rank, mut last, mut wait, mut hours) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for j in jobs {
        for s in &j.stragglers {
            job.push(j.path.clone());
            rank.push(s.rank);
            last.push(s.times_last as u64);
            wait.push(s.wait_caused_us);
            hours.push(s.wait_caused_gpu_hours);
        }
    }
    let mut df = DataFrame::new_infer_height(vec![
        col("job", job),
        col("rank", rank),
        col("times_last", last),
        col("wait_caused_us", wait),
        col("wait_caused_gpu_hours", hours),
    ])?;
    write(&mut df, dir, "stragglers", format)?;
    Ok(())
}
