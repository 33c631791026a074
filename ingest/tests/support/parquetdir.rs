//! Test support shared by `ingest/tests/nsys.rs` and the CLI tests in `tests/nsys.rs`
//! (included by `#[path]` into both): an Nsight Systems SQLite export written out as a
//! `nsys export --type parquetdir` directory.

use std::path::Path;

use rusqlite::Connection;

/// Writes every table of the SQLite export `sqlite` as `dir/TABLE.parquet`,
/// as `nsys export --type parquetdir` does: integer columns Int64, real
/// ones Float64, text String, blobs Binary, all-null columns Null.
pub fn to_parquetdir(sqlite: &Path, dir: &Path) {
    use polars::prelude::*;
    use rusqlite::types::Value;
    std::fs::create_dir_all(dir).unwrap();
    let db = Connection::open(sqlite).unwrap();
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for t in tables {
        let mut stmt = db.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let names: Vec<String> = stmt.column_names().map(|s| s.to_string()).collect();
        let mut values: Vec<Vec<Value>> = vec![Vec::new(); names.len()];
        let mut rows = stmt.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            for (i, v) in values.iter_mut().enumerate() {
                v.push(row.get::<_, Value>(i).unwrap());
            }
        }
        let columns: Vec<Column> = names
            .iter()
            .zip(values)
            .map(|(n, v)| {
                let name: PlSmallStr = n.as_str().into();
                let any = |f: fn(&Value) -> bool| v.iter().any(f);
                if any(|x| matches!(x, Value::Text(_))) {
                    let s: Vec<Option<String>> = v
                        .iter()
                        .map(|x: &Value| match x {
                            Value::Text(s) => Some(s.clone()),
                            Value::Integer(i) => Some(i.to_string()),
                            Value::Real(f) => Some(f.to_string()),
                            _ => None,
                        })
                        .collect();
                    Column::new(name, s)
                } else if any(|x| matches!(x, Value::Real(_))) {
                    let f: Vec<Option<f64>> = v
                        .iter()
                        .map(|x: &Value| match x {
                            Value::Real(f) => Some(*f),
                            Value::Integer(i) => Some(*i as f64),
                            _ => None,
                        })
                        .collect();
                    Column::new(name, f)
                } else if any(|x| matches!(x, Value::Integer(_))) {
                    let i: Vec<Option<i64>> = v.iter().map(|x: &Value| if let Value::Integer(i) = x { Some(*i) } else { None }).collect();
                    Column::new(name, i)
                } else if any(|x| matches!(x, Value::Blob(_))) {
                    let b: Vec<Option<&[u8]>> =
                        v.iter().map(|x: &Value| if let Value::Blob(b) = x { Some(b.as_slice()) } else { None }).collect();
                    Column::new(name, b)
                } else {
                    Column::full_null(name, v.len(), &DataType::Null)
                }
            })
            .collect();
        let mut df = DataFrame::new_infer_height(columns).unwrap();
        let file = std::fs::File::create(dir.join(format!("{t}.parquet"))).unwrap();
        ParquetWriter::new(file).finish(&mut df).unwrap();
    }
}
