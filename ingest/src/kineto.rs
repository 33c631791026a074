//! The Kineto (PyTorch profiler) Chrome-trace reader.
//!
//! [`read_path`] opens a `.json` or gzip file (detected by its magic bytes) and
//! [`parse_bytes`] turns JSON text into a [`RankTrace`]. The top level is
//! scanned structurally (see `scan`), then the events are deserialized into
//! borrowed, typed rows in parallel chunks and appended to columns.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use rayon::prelude::*;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::collective::CollectiveArgs;
use crate::device::{DeviceProperties, DistributedInfo, RawDeviceProperties, RawDistributedInfo};
use crate::error::{Error, Result};
use crate::event::{EventKind, Events, NameId, Names, Row};
use crate::lenient::{Id, Num, OptText, Text};
use crate::rank::{OpShapes, RankTrace};
use crate::scan;
use crate::time::us_text_to_ns;

/// What to keep while reading.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Keep `python_function` events (up to 200k per file; the breakdown does not need them). Default: false.
    pub python_functions: bool,
    /// Keep flow (`s`/`f`) events. Default: true.
    pub flows: bool,
    /// Keep CPU-op `Input Dims` / `Input type` for work accounting. Default: true.
    pub shapes: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions { python_functions: false, flows: true, shapes: true }
    }
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(default, borrow)]
    ph: Option<Text<'a>>,
    #[serde(default, borrow)]
    cat: Option<Text<'a>>,
    #[serde(default, borrow)]
    name: Option<Text<'a>>,
    #[serde(default, borrow)]
    ts: Option<&'a RawValue>,
    #[serde(default, borrow)]
    dur: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pid: Option<Id<'a>>,
    #[serde(default, borrow)]
    tid: Option<Id<'a>>,
    #[serde(default, borrow)]
    id: Option<Id<'a>>,
    #[serde(default, borrow)]
    args: Option<RawArgs<'a>>,
}

#[derive(Deserialize, Default)]
struct RawArgs<'a> {
    #[serde(default)]
    correlation: Num,
    #[serde(default, rename = "External id", alias = "external id")]
    external_id: Num,
    #[serde(default, borrow, rename = "Collective name")]
    collective_name: OptText<'a>,
    #[serde(default, rename = "In msg nelems")]
    in_nelems: Num,
    #[serde(default, rename = "Out msg nelems")]
    out_nelems: Num,
    #[serde(default, borrow)]
    dtype: OptText<'a>,
    #[serde(default, rename = "Group size")]
    group_size: Num,
    #[serde(default, borrow, rename = "Process Group Name")]
    pg_name: OptText<'a>,
    #[serde(default, borrow, rename = "Process Group Description")]
    pg_desc: OptText<'a>,
    #[serde(default, borrow, rename = "Process Group Ranks")]
    pg_ranks: OptText<'a>,
    #[serde(default, borrow, rename = "Input Dims")]
    input_dims: Option<&'a RawValue>,
    #[serde(default, borrow, rename = "Input type")]
    input_type: Option<&'a RawValue>,
    #[serde(default)]
    bytes: Num,
}

/// Rows and side tables of one chunk of events, merged in file order.
#[derive(Default)]
struct Chunk {
    names: Names,
    events: Events,
    collective_args: Vec<(u32, CollectiveArgs)>,
    op_shapes: Vec<OpShapes>,
    copy_bytes: Vec<(u32, u64)>,
    unknown_categories: Vec<String>,
    skipped_metadata: u64,
}

/// Times are clamped to ranges (years 1933–2116, durations up to 36 years)
/// in which no sum or difference the analyses form can overflow i64.
const MIN_TS_NS: i64 = -(1 << 60);
const MAX_TS_NS: i64 = 1 << 62;
const MAX_DUR_NS: i64 = 1 << 60;

struct EventError {
    offset: usize,
    message: String,
}

/// Maps a textual pid/tid to a number: numeric text as its value,
/// `"stream 7"` as 7, anything else to a stable negative id.
fn id_number(id: Option<Id<'_>>) -> i64 {
    match id {
        None => -1,
        Some(Id::Int(v)) => v,
        Some(Id::Text(t)) => {
            let s = t.trim();
            if let Ok(v) = s.parse::<i64>() {
                return v;
            }
            if let Some(v) = s.strip_prefix("stream").and_then(|r| r.trim().parse::<i64>().ok()) {
                return v;
            }
            // FNV-1a: stable across chunks and runs.
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in s.bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            -((h & 0x3fff_ffff_ffff_ffff) as i64) - 2
        }
    }
}

/// Offset in `slice` of serde_json's 1-based (line, column).
fn line_col_offset(slice: &[u8], line: usize, column: usize) -> usize {
    let mut line_start = 0;
    if line > 1 {
        let mut seen = 1;
        for (i, &c) in slice.iter().enumerate() {
            if c == b'\n' {
                seen += 1;
                if seen == line {
                    line_start = i + 1;
                    break;
                }
            }
        }
    }
    (line_start + column.saturating_sub(1)).min(slice.len())
}

fn time_ns(raw: &RawValue, base: &[u8], what: &str) -> std::result::Result<i64, EventError> {
    let text = raw.get();
    us_text_to_ns(text.as_bytes()).ok_or_else(|| EventError {
        offset: (text.as_ptr() as usize).saturating_sub(base.as_ptr() as usize),
        message: format!("`{what}` is not a number of microseconds: {}", truncate(text, 40)),
    })
}

fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

impl Chunk {
    fn add(&mut self, text: &[u8], span: (usize, usize), opts: &ReadOptions) -> std::result::Result<(), EventError> {
        let slice = text.get(span.0..span.1).unwrap_or_default();
        let raw: RawEvent<'_> = serde_json::from_slice(slice).map_err(|e| EventError {
            offset: span.0 + line_col_offset(slice, e.line(), e.column()),
            message: format!("invalid event: {e}"),
        })?;
        let ph = raw.ph.as_ref().map_or("", |t| &t.0);
        let kind = match ph {
            "M" => {
                self.skipped_metadata += 1;
                return Ok(());
            }
            "X" => match raw.cat.as_ref() {
                Some(cat) => match EventKind::from_category(&cat.0) {
                    Some(kind) => kind,
                    None => {
                        if !self.unknown_categories.iter().any(|c| *c == *cat.0) {
                            self.unknown_categories.push(cat.0.to_string());
                        }
                        EventKind::Other
                    }
                },
                None => EventKind::Other,
            },
            "i" | "I" => EventKind::Instant,
            "s" | "f" | "t" => {
                if !opts.flows {
                    return Ok(());
                }
                EventKind::Flow
            }
            _ => EventKind::Other,
        };
        if kind == EventKind::PythonFunction && !opts.python_functions {
            return Ok(());
        }
        let Some(ts) = raw.ts else {
            if ph == "X" {
                return Err(EventError { offset: span.0, message: "complete event (ph \"X\") without `ts`".into() });
            }
            return Ok(());
        };
        let ts_ns = time_ns(ts, text, "ts")?.clamp(MIN_TS_NS, MAX_TS_NS);
        let dur_ns = match raw.dur {
            Some(d) => time_ns(d, text, "dur")?.clamp(0, MAX_DUR_NS),
            None => 0,
        };
        let name = raw.name.as_ref().map_or("", |t| &t.0);
        // 2021 traces record ProfilerStep#N as an `Operator`.
        let kind = if kind == EventKind::CpuOp && name.starts_with("ProfilerStep#") { EventKind::UserAnnotation } else { kind };
        let name_id: NameId = self.names.intern(name);
        let args = raw.args.unwrap_or_default();
        let correlation = if kind == EventKind::Flow {
            match raw.id {
                Some(Id::Int(v)) => v,
                other => id_number(other),
            }
        } else {
            args.correlation.as_i64().unwrap_or(-1)
        };
        let index = self.events.len() as u32;
        self.events.push(Row {
            kind,
            name: name_id,
            ts_ns,
            dur_ns,
            pid: id_number(raw.pid),
            tid: id_number(raw.tid),
            correlation,
            external_id: args.external_id.as_i64().unwrap_or(-1),
        });
        let has_collective = args.collective_name.as_str().is_some() || args.in_nelems != Num::Absent;
        if has_collective && matches!(kind, EventKind::Kernel | EventKind::CpuOp) {
            self.collective_args.push((
                index,
                CollectiveArgs {
                    collective_name: args.collective_name.into_string(),
                    in_nelems: args.in_nelems.as_i64(),
                    out_nelems: args.out_nelems.as_i64(),
                    dtype: args.dtype.into_string(),
                    group_size: args.group_size.as_i64(),
                    pg_name: args.pg_name.into_string(),
                    pg_desc: args.pg_desc.into_string(),
                    pg_ranks: args.pg_ranks.into_string(),
                },
            ));
        }
        if opts.shapes && matches!(kind, EventKind::CpuOp | EventKind::UserAnnotation) {
            if let Some(dims) = args.input_dims {
                self.op_shapes.push(OpShapes {
                    event: index,
                    input_dims: dims.get().to_string(),
                    input_types: args.input_type.map(|t| t.get().to_string()).unwrap_or_default(),
                });
            }
        }
        if matches!(kind, EventKind::Memcpy | EventKind::Memset) {
            if let Some(b) = args.bytes.as_i64().and_then(|b| u64::try_from(b).ok()) {
                self.copy_bytes.push((index, b));
            }
        }
        Ok(())
    }
}

/// Reads one trace file: plain JSON or gzip (by magic bytes, not by name).
pub fn read_path(path: &Path, opts: &ReadOptions) -> Result<RankTrace> {
    let text = read_text(path)?;
    let mut trace = parse_bytes(&text, path, opts)?;
    trace.json_bytes = text.len() as u64;
    Ok(trace)
}

/// The JSON text of a trace file, inflated when it is gzip.
pub fn read_text(path: &Path) -> Result<Vec<u8>> {
    let io = |source| Error::Io { path: path.to_path_buf(), source };
    let mut file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let mut magic = [0u8; 2];
    let got = read_up_to(&mut file, &mut magic).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    if got == 2 && magic == [0x1f, 0x8b] {
        // ISIZE (the last four bytes) is the inflated size mod 2^32: a capacity hint.
        let mut hint = 0usize;
        if len >= 18 {
            let mut isize = [0u8; 4];
            file.seek(SeekFrom::End(-4)).map_err(io)?;
            file.read_exact(&mut isize).map_err(io)?;
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            let size = u32::from_le_bytes(isize) as u64;
            if size >= len && size <= len.saturating_mul(1032) {
                hint = size as usize;
            }
        }
        let mut out = Vec::with_capacity(hint.saturating_add(1));
        let mut decoder = flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 20, file));
        if let Err(source) = decoder.read_to_end(&mut out) {
            return Err(Error::Gzip { path: path.to_path_buf(), decompressed_offset: out.len() as u64, source });
        }
        Ok(out)
    } else {
        let mut out = Vec::with_capacity(len as usize + 1);
        file.read_to_end(&mut out).map_err(io)?;
        Ok(out)
    }
}

fn read_up_to(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Parses the JSON text of one trace. `path` only names the source in errors
/// and in the result.
pub fn parse_bytes(text: &[u8], path: &Path, opts: &ReadOptions) -> Result<RankTrace> {
    if text.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::Empty { path: path.to_path_buf() });
    }
    let top = scan::scan(text).map_err(|e| Error::Json { path: path.to_path_buf(), byte_offset: e.offset as u64, message: e.message })?;
    if !top.has_trace_events {
        return Err(Error::Schema {
            path: path.to_path_buf(),
            message: "not a Kineto trace: the top-level object has no `traceEvents`".into(),
        });
    }
    let chunk_len = (top.events.len() / (rayon::current_num_threads() * 4)).clamp(2048, 65536);
    let chunks: Vec<std::result::Result<Chunk, EventError>> = top
        .events
        .par_chunks(chunk_len)
        .map(|spans| {
            let mut chunk = Chunk::default();
            for &span in spans {
                chunk.add(text, span, opts)?;
            }
            Ok(chunk)
        })
        .collect();

    let mut trace = RankTrace::new(path.to_path_buf());
    let mut unknown: Vec<String> = Vec::new();
    let mut metadata_events = 0u64;
    for chunk in chunks {
        let chunk = chunk.map_err(|e| Error::Json { path: path.to_path_buf(), byte_offset: e.offset as u64, message: e.message })?;
        let name_map: Vec<NameId> = chunk.names.iter().map(|n| trace.names.intern(n)).collect();
        let offset = trace.events.len() as u32;
        trace.events.append(chunk.events, &name_map);
        trace.collective_args.extend(chunk.collective_args.into_iter().map(|(i, a)| (i + offset, a)));
        trace.op_shapes.extend(chunk.op_shapes.into_iter().map(|mut s| {
            s.event += offset;
            s
        }));
        trace.copy_bytes.extend(chunk.copy_bytes.into_iter().map(|(i, b)| (i + offset, b)));
        for c in chunk.unknown_categories {
            if !unknown.contains(&c) {
                unknown.push(c);
            }
        }
        metadata_events += chunk.skipped_metadata;
    }
    trace.metadata_events = metadata_events;
    if top.missing_close {
        trace.warnings.push(format!(
            "the file ends after event {} without closing `traceEvents` (the writer was probably killed); the events read are used",
            top.events.len()
        ));
    }
    unknown.sort();
    for c in unknown {
        trace.warnings.push(format!("unknown event category {c:?} kept as \"other\""));
    }

    for (key, (start, end)) in top.values {
        let value = text.get(start..end).unwrap_or_default();
        match key {
            "deviceProperties" | "computeProperties" => match serde_json::from_slice::<Vec<RawDeviceProperties<'_>>>(value) {
                Ok(list) if trace.devices.is_empty() => trace.devices = list.into_iter().map(DeviceProperties::from).collect(),
                Ok(_) => {}
                Err(e) => trace.warnings.push(format!("`{key}` at byte {start} is unreadable and was ignored: {e}")),
            },
            "distributedInfo" => match serde_json::from_slice::<RawDistributedInfo<'_>>(value) {
                Ok(info) => trace.distributed = Some(DistributedInfo::from(info)),
                Err(e) => trace.warnings.push(format!("`distributedInfo` at byte {start} is unreadable and was ignored: {e}")),
            },
            "baseTimeNanoseconds" => {
                let digits = std::str::from_utf8(value).unwrap_or_default().trim_matches('"');
                match digits.parse::<i64>() {
                    Ok(base) => trace.base_time_ns = Some(base),
                    Err(_) => trace.warnings.push(format!("`baseTimeNanoseconds` at byte {start} is not an integer and was ignored")),
                }
            }
            _ => {}
        }
    }
    if let Some(base) = trace.base_time_ns {
        // ts is relative to the base; both are integers, so no precision is lost.
        for t in &mut trace.events.ts_ns {
            *t = t.saturating_add(base).clamp(MIN_TS_NS, MAX_TS_NS);
        }
    }
    trace.json_bytes = text.len() as u64;
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RankTrace> {
        parse_bytes(text.as_bytes(), Path::new("t.json"), &ReadOptions::default())
    }

    #[test]
    fn reads_kinds_ids_and_times() {
        let t = parse(
            r#"{"traceEvents": [
            {"ph": "X", "cat": "Kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 10.5, "dur": 2, "args": {"correlation": 3}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": "Spans", "tid": "25738", "ts": 9, "dur": 1, "args": {"External id": 4, "Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}},
            {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "x"}},
            {"ph": "X", "cat": "weird", "name": "w", "pid": 1, "tid": 1, "ts": 1, "dur": 1}
            ], "baseTimeNanoseconds": 1000}"#,
        )
        .unwrap();
        assert_eq!(t.events.kind, [EventKind::Kernel, EventKind::CpuOp, EventKind::Other]);
        assert_eq!(t.events.ts_ns, [11_500, 10_000, 2_000]);
        assert_eq!(t.events.tid[0], 7);
        assert_eq!(t.events.tid[1], 25738);
        assert!(t.events.pid[1] < -1);
        assert_eq!(t.events.correlation[0], 3);
        assert_eq!(t.events.external_id[1], 4);
        assert_eq!(t.op_shapes[0].input_dims, "[[2, 3], [3, 4]]");
        assert_eq!(t.metadata_events, 1);
        assert!(t.warnings.iter().any(|w| w.contains("weird")));
    }

    #[test]
    fn errors_name_file_and_offset() {
        let e = parse(r#"{"traceEvents": [{"ph": "X", "ts": "abc"}]}"#).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("t.json: byte 35:"), "{msg}");
        let e = parse(r#"{"traceEvents": [{"ph": "X", "ts": 1, "name": 5}]}"#).unwrap_err();
        assert!(matches!(e, Error::Json { .. }), "{e}");
        let e = parse(r#"{"other": []}"#).unwrap_err();
        assert!(matches!(e, Error::Schema { .. }));
        assert!(matches!(parse("  \n").unwrap_err(), Error::Empty { .. }));
    }

    #[test]
    fn escaped_names_are_read() {
        let t = parse(r#"{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a\"b", "ts": 1, "dur": 1, "pid": 1, "tid": 1}]}"#).unwrap();
        assert_eq!(t.names.get(t.events.name[0]), "a\"b");
    }
}
