//! `nsys export --type parquetdir` exports: a directory of one Parquet file
//! per table, named after it (`CUPTI_ACTIVITY_KIND_KERNEL.parquet`, …).
//!
//! The tables the reader uses ([`tables::KNOWN`]; nothing else is read) are
//! loaded into one in-memory SQLite database, a table per file with its
//! columns typed from the Arrow types (integers and booleans INTEGER, floats
//! REAL, strings TEXT, binary BLOB, all-null columns untyped), so the SQL
//! reader reads them exactly as it reads an SQLite export. The database is
//! shared-cache (`file:…?mode=memory&cache=shared`): the parallel readers
//! each open their own connection to it while [`Db`] keeps it alive.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use polars::prelude::*;
use rusqlite::{Connection, OpenFlags};

use super::tables::{self, Db, KERNEL, MEMCPY, MEMSET};
use crate::error::{Error, Result};

/// Whether `path` is a directory holding a GPU activity table's Parquet file.
pub(crate) fn is_parquet_export(path: &Path) -> bool {
    [KERNEL, MEMCPY, MEMSET].iter().any(|t| path.join(format!("{t}.parquet")).is_file())
}

/// The size of the directory's `*.parquet` files together, bytes.
pub(crate) fn bytes(dir: &Path) -> Result<u64> {
    let io = |cause| Error::Io { path: dir.to_path_buf(), cause };
    let mut total = 0;
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        if entry.file_name().to_string_lossy().ends_with(".parquet") {
            total += entry.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    Ok(total)
}

/// Loads the known tables of the `parquetdir` export `dir` into memory.
pub(crate) fn load(dir: &Path) -> Result<Db> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let uri = format!("file:tracecast-nsys-{}-{}?mode=memory&cache=shared", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let flags =
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(&uri, flags).map_err(|e| tables::sql_error(dir, &e))?;
    for table in tables::KNOWN {
        let file = dir.join(format!("{table}.parquet"));
        if !file.is_file() {
            continue;
        }
        let name = format!("{table}.parquet");
        let bad = |message: String| Error::Schema { path: dir.to_path_buf(), message: format!("{name}: {}", message.replace('\n', " ")) };
        let f = crate::input::open(&file).map_err(|cause| Error::Io { path: file.clone(), cause })?;
        let df = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ParquetReader::new(f).finish()))
            .map_err(|_| bad("not a readable Parquet file (the reader failed)".into()))?
            .map_err(|e| bad(format!("not a readable Parquet file ({e})")))?;
        let columns = df
            .columns()
            .iter()
            .map(|c| Ok((c.name().to_string(), values(c)?)))
            .collect::<PolarsResult<Vec<(String, Values)>>>()
            .map_err(|e| bad(format!("a column cannot be read ({e})")))?;
        insert(&mut conn, table, &columns, df.height()).map_err(|e| bad(format!("cannot load it ({e})")))?;
    }
    Ok(Db::memory(dir, uri, conn))
}

/// One column's values, as SQLite stores them.
enum Values {
    Null,
    Int(Vec<Option<i64>>),
    Real(Vec<Option<f64>>),
    Text(Vec<Option<String>>),
    Blob(Vec<Option<Vec<u8>>>),
}

impl Values {
    /// The declared SQLite type of the column.
    fn sql_type(&self) -> &'static str {
        match self {
            Values::Null => "",
            Values::Int(_) => "INTEGER",
            Values::Real(_) => "REAL",
            Values::Text(_) => "TEXT",
            Values::Blob(_) => "BLOB",
        }
    }
}

/// A column's values by its Arrow type (other types as their text).
fn values(c: &Column) -> PolarsResult<Values> {
    let dt = c.dtype();
    Ok(if matches!(dt, DataType::Null) {
        Values::Null
    } else if dt.is_bool() || dt.is_integer() {
        Values::Int(c.cast(&DataType::Int64)?.i64()?.iter().collect())
    } else if dt.is_float() {
        Values::Real(c.cast(&DataType::Float64)?.f64()?.iter().collect())
    } else if matches!(dt, DataType::Binary) {
        Values::Blob(c.binary()?.iter().map(|b| b.map(<[u8]>::to_vec)).collect())
    } else {
        Values::Text(c.cast(&DataType::String)?.str()?.iter().map(|s| s.map(str::to_string)).collect())
    })
}

/// Creates `table` and inserts its rows in one transaction.
fn insert(conn: &mut Connection, table: &str, columns: &[(String, Values)], height: usize) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let decl: Vec<String> =
            columns.iter().map(|(n, v)| format!("\"{}\" {}", n.replace('"', "\"\""), v.sql_type()).trim_end().to_string()).collect();
        tx.execute_batch(&format!("CREATE TABLE {table} ({})", decl.join(", ")))?;
        let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
        let mut stmt = tx.prepare(&format!("INSERT INTO {table} VALUES ({})", marks.join(", ")))?;
        for r in 0..height {
            for (i, (_, v)) in columns.iter().enumerate() {
                let at = i + 1;
                match v {
                    Values::Null => stmt.raw_bind_parameter(at, rusqlite::types::Null)?,
                    Values::Int(x) => stmt.raw_bind_parameter(at, x.get(r).copied().flatten())?,
                    Values::Real(x) => stmt.raw_bind_parameter(at, x.get(r).copied().flatten())?,
                    Values::Text(x) => stmt.raw_bind_parameter(at, x.get(r).and_then(Option::as_deref))?,
                    Values::Blob(x) => stmt.raw_bind_parameter(at, x.get(r).and_then(Option::as_deref))?,
                }
            }
            stmt.raw_execute()?;
        }
    }
    tx.commit()
}
