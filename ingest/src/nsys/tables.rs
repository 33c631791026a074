//! The tables of an export: opening it, checking its schema, reading rows.
//!
//! Only these tables are read: `CUPTI_ACTIVITY_KIND_{KERNEL,MEMCPY,MEMSET,RUNTIME,
//! SYNCHRONIZATION,CUDA_EVENT}`, `NVTX_EVENTS`, `StringIds` (the names they
//! reference), `TARGET_INFO_GPU` / `TARGET_INFO_CUDA_DEVICE` (the GPU model),
//! `TARGET_INFO_SESSION_START_TIME` (the UTC clock), the `ENUM_*` labels, and
//! one row of `META_DATA_EXPORT`, `EXPORT_SCHEMA_VERSION`. Free-form metadata
//! (environments, command lines, process and thread names, paths) is never read.

use std::path::{Path, PathBuf};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Row};
use rustc_hash::FxHashMap;

use crate::error::{Error, Result};

pub(crate) const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
pub(crate) const MEMCPY: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
pub(crate) const MEMSET: &str = "CUPTI_ACTIVITY_KIND_MEMSET";
pub(crate) const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
pub(crate) const SYNC: &str = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
pub(crate) const CUDA_EVENT: &str = "CUPTI_ACTIVITY_KIND_CUDA_EVENT";
pub(crate) const NVTX: &str = "NVTX_EVENTS";
pub(crate) const STRINGS: &str = "StringIds";
pub(crate) const GPU_INFO: &str = "TARGET_INFO_GPU";
pub(crate) const CUDA_DEVICE: &str = "TARGET_INFO_CUDA_DEVICE";
pub(crate) const SESSION_START: &str = "TARGET_INFO_SESSION_START_TIME";
const META_EXPORT: &str = "META_DATA_EXPORT";

/// The tables whose columns are looked up.
pub(crate) const KNOWN: [&str; 15] = [
    KERNEL,
    MEMCPY,
    MEMSET,
    RUNTIME,
    SYNC,
    CUDA_EVENT,
    NVTX,
    STRINGS,
    GPU_INFO,
    CUDA_DEVICE,
    SESSION_START,
    META_EXPORT,
    "ENUM_NSYS_EVENT_TYPE",
    "ENUM_CUDA_MEMCPY_OPER",
    "ENUM_CUDA_MEM_KIND",
];

/// The export schema major version this reader knows.
pub(crate) const SCHEMA_MAJOR: &str = "3";
/// The export schema the reader was checked on.
pub(crate) const TESTED_SCHEMA: &str = "3.25.0 (Nsight Systems 2026.2)";

/// An open export and what its schema holds.
pub(crate) struct Export {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
    /// `EXPORT_SCHEMA_VERSION`, when the export records it.
    pub(crate) version: Option<String>,
    /// Columns of the known tables present, by table.
    columns: FxHashMap<&'static str, Vec<String>>,
}

/// Where an export's tables are: its SQLite file, or (for a `parquetdir`
/// export) an in-memory database loaded from its Parquet files, which stays
/// alive while this is held. `path` is what messages name.
pub(crate) struct Db {
    pub(crate) path: PathBuf,
    /// The shared-cache URI of the in-memory database and the connection that keeps it.
    memory: Option<(String, std::sync::Mutex<Connection>)>,
}

impl Db {
    /// The SQLite export at `path`.
    pub(crate) fn file(path: &Path) -> Db {
        Db { path: path.to_path_buf(), memory: None }
    }

    /// An in-memory database at `uri`, kept alive by `keeper`, read as the export at `path`.
    pub(crate) fn memory(path: &Path, uri: String, keeper: Connection) -> Db {
        Db { path: path.to_path_buf(), memory: Some((uri, std::sync::Mutex::new(keeper))) }
    }

    /// A new read-only connection to the tables (one per parallel reader).
    pub(crate) fn connect(&self) -> Result<Connection> {
        match &self.memory {
            None => connect(&self.path),
            Some((uri, _)) => {
                let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                Connection::open_with_flags(uri, flags).map_err(|e| sql_error(&self.path, &e))
            }
        }
    }
}

/// Opens `path` read-only (no journal, no lock held past a read).
pub(crate) fn connect(path: &Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| sql_error(path, &e))?;
    // A writer holding the lock gets a moment, then the file is reported as locked.
    conn.busy_timeout(std::time::Duration::from_millis(500)).map_err(|e| sql_error(path, &e))?;
    Ok(conn)
}

/// The ingest error for an SQLite failure on `path`.
pub(crate) fn sql_error(path: &Path, e: &rusqlite::Error) -> Error {
    use rusqlite::ErrorCode;
    let message = match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseCorrupt) => format!("the database is damaged or truncated ({e})"),
        Some(ErrorCode::NotADatabase) => format!("not a readable SQLite database ({e})"),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            format!("the database is locked by another process; is the export still being written? ({e})")
        }
        Some(ErrorCode::CannotOpen) => format!("cannot open the database ({e})"),
        _ => e.to_string(),
    };
    Error::Sqlite { path: path.to_path_buf(), message }
}

impl Export {
    /// Opens an export and checks that it is one this reader knows.
    pub(crate) fn open(db: &Db) -> Result<Export> {
        let path = db.path.as_path();
        let conn = db.connect()?;
        let mut tables: Vec<String> = Vec::new();
        {
            let mut stmt =
                conn.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").map_err(|e| sql_error(path, &e))?;
            let mut rows = stmt.query([]).map_err(|e| sql_error(path, &e))?;
            while let Some(row) = rows.next().map_err(|e| sql_error(path, &e))? {
                if let Some(name) = text(row, 0) {
                    tables.push(name);
                }
            }
        }
        let mut columns = FxHashMap::default();
        for table in KNOWN {
            if !tables.iter().any(|t| t == table) {
                continue;
            }
            let mut cols = Vec::new();
            let mut stmt = conn.prepare(&format!("PRAGMA table_info({table})")).map_err(|e| sql_error(path, &e))?;
            let mut rows = stmt.query([]).map_err(|e| sql_error(path, &e))?;
            while let Some(row) = rows.next().map_err(|e| sql_error(path, &e))? {
                if let Some(name) = text(row, 1) {
                    cols.push(name);
                }
            }
            columns.insert(table, cols);
        }
        let mut export = Export { conn, path: path.to_path_buf(), version: None, columns };
        if export.has_column(META_EXPORT, "name") && export.has_column(META_EXPORT, "value") {
            let sql = format!("SELECT value FROM {META_EXPORT} WHERE name = 'EXPORT_SCHEMA_VERSION'");
            export.version = export.first_text(&sql)?;
        }
        export.check()?;
        Ok(export)
    }

    /// The schema version in words, for messages.
    pub(crate) fn version_text(&self) -> String {
        match &self.version {
            Some(v) => format!("export schema {v}"),
            None => "an export without EXPORT_SCHEMA_VERSION".to_string(),
        }
    }

    fn schema_error(&self, message: String) -> Error {
        Error::Schema { path: self.path.clone(), message }
    }

    /// The version this reader knows, and GPU activity to read.
    fn check(&self) -> Result<()> {
        if let Some(v) = &self.version
            && v.split('.').next() != Some(SCHEMA_MAJOR)
        {
            return Err(self.schema_error(format!(
                "Nsight Systems export schema {v} is not supported: tracecast reads export schema {SCHEMA_MAJOR}.x (checked on {TESTED_SCHEMA}); \
                 export the report again with a Nsight Systems of that schema"
            )));
        }
        if ![KERNEL, MEMCPY, MEMSET].iter().any(|t| self.has(t)) {
            let nsys = [STRINGS, NVTX, META_EXPORT, RUNTIME].iter().any(|t| self.has(t));
            return Err(self.schema_error(if nsys {
                format!(
                    "this Nsight Systems export ({}) has no CUDA activity (no {KERNEL}, {MEMCPY} or {MEMSET} table): record with `nsys profile -t cuda,nvtx …`",
                    self.version_text()
                )
            } else {
                format!("an SQLite database that is not an Nsight Systems export (no {KERNEL}, {MEMCPY} or {MEMSET} table)")
            }));
        }
        if (self.has(KERNEL) || self.has(RUNTIME)) && !self.has(STRINGS) {
            return Err(self
                .schema_error(format!("this export ({}) has no {STRINGS} table, which names its kernels and calls", self.version_text())));
        }
        // Kernels launched (one by one or in CUDA graphs) but no kernel table: an export stripped
        // or cut short, whose every figure would read as if no kernel had run. Host functions
        // (`cuLaunchHostFunc`) launch none.
        // A kernel table with no row is the same loss (an export whose kernels were deleted had
        // been analysed as a job 99 % idle, exit 0).
        let no_kernels =
            !self.has(KERNEL) || self.first_text(&format!("SELECT CAST(EXISTS(SELECT 1 FROM {KERNEL}) AS TEXT)"))?.as_deref() == Some("0");
        if no_kernels && self.has_column(RUNTIME, "nameId") && self.has_column(STRINGS, "id") && self.has_column(STRINGS, "value") {
            let sql = format!(
                "SELECT COUNT(*) FROM {RUNTIME} r JOIN {STRINGS} s ON r.nameId = s.id WHERE s.value LIKE '%LaunchKernel%' OR s.value LIKE '%LaunchCooperativeKernel%' OR s.value LIKE '%GraphLaunch%'"
            );
            let launches = self.first_text(&format!("SELECT CAST(({sql}) AS TEXT)"))?.and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
            if launches > 0 {
                return Err(self.schema_error(format!(
                    "this export ({}) has {launches} kernel or graph launch calls in {RUNTIME} but {} {KERNEL} table: its kernels are missing (a stripped or partial export; export the report again)",
                    self.version_text(),
                    if self.has(KERNEL) { "an empty" } else { "no" }
                )));
            }
        }
        Ok(())
    }

    /// Whether the export has `table`.
    pub(crate) fn has(&self, table: &str) -> bool {
        self.columns.contains_key(table)
    }

    /// Whether `table` has `column`.
    pub(crate) fn has_column(&self, table: &str, column: &str) -> bool {
        self.columns.get(table).is_some_and(|c| c.iter().any(|x| x == column))
    }

    /// The select list `required, optional…` of `table`: a missing required
    /// column is an error naming the schema version; a missing optional one reads as NULL.
    pub(crate) fn select(&self, table: &str, required: &[&str], optional: &[&str]) -> Result<String> {
        let mut list = Vec::with_capacity(required.len() + optional.len());
        for c in required {
            if !self.has_column(table, c) {
                return Err(self.schema_error(format!(
                    "{table} has no column `{c}` ({}; tracecast reads export schema {SCHEMA_MAJOR}.x, checked on {TESTED_SCHEMA})",
                    self.version_text()
                )));
            }
            list.push(format!("\"{c}\""));
        }
        for c in optional {
            list.push(if self.has_column(table, c) { format!("\"{c}\"") } else { "NULL".to_string() });
        }
        Ok(list.join(", "))
    }

    /// The first column of the first row of `sql`, as text.
    pub(crate) fn first_text(&self, sql: &str) -> Result<Option<String>> {
        let mut out = None;
        rows(&self.conn, &self.path, sql, |row| {
            if out.is_none() {
                out = text(row, 0);
            }
        })?;
        Ok(out)
    }
}

/// Runs `sql` on `conn` and hands every row to `each`.
pub(crate) fn rows(conn: &Connection, path: &Path, sql: &str, mut each: impl FnMut(&Row<'_>)) -> Result<()> {
    let mut stmt = conn.prepare(sql).map_err(|e| sql_error(path, &e))?;
    let mut rows = stmt.query([]).map_err(|e| sql_error(path, &e))?;
    while let Some(row) = rows.next().map_err(|e| sql_error(path, &e))? {
        each(row);
    }
    Ok(())
}

/// Column `i` as an integer (`None` for NULL, text or blobs).
pub(crate) fn int(row: &Row<'_>, i: usize) -> Option<i64> {
    match row.get_ref(i) {
        Ok(ValueRef::Integer(v)) => Some(v),
        Ok(ValueRef::Real(f)) if f.is_finite() && f.abs() < 9.0e18 => Some(f as i64),
        _ => None,
    }
}

/// Column `i` as text (`None` for NULL and non-text values; invalid UTF-8 is replaced).
pub(crate) fn text(row: &Row<'_>, i: usize) -> Option<String> {
    match row.get_ref(i) {
        Ok(ValueRef::Text(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
        _ => None,
    }
}

/// Applies `f` to column `i` as text without copying it.
pub(crate) fn with_text<T>(row: &Row<'_>, i: usize, f: impl FnOnce(&str) -> T) -> Option<T> {
    match row.get_ref(i) {
        Ok(ValueRef::Text(bytes)) => Some(match std::str::from_utf8(bytes) {
            Ok(s) => f(s),
            Err(_) => f(&String::from_utf8_lossy(bytes)),
        }),
        _ => None,
    }
}
