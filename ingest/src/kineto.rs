//! The Kineto (PyTorch profiler) Chrome-trace reader.
//!
//! [`read_path`] opens a `.json` or gzip file (detected by its magic bytes) and
//! [`parse_bytes`] turns JSON text into a [`RankTrace`]. The top level is
//! scanned structurally (see `scan`), then the events are deserialized into
//! borrowed, typed rows in parallel chunks and appended to columns.

use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::collective::CollectiveArgs;
use crate::device::{DeviceProperties, DistributedInfo, RawDeviceProperties, RawDistributedInfo};
use crate::error::{Error, Result};
use crate::event::{EventKind, Events, NameId, Names, Row};
use crate::fast::{ArgFields, Fields};
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
    /// Keep flow (`s`/`f`) events: lossy links that only replay's fallbacks
    /// use; they are a third of the events of some traces. Default: false.
    pub flows: bool,
    /// Keep CPU-op `Input Dims` / `Input type` for work accounting. Default: true.
    pub shapes: bool,
    /// The GPU of traces that do not record theirs (Nsight Systems exports
    /// without `TARGET_INFO_GPU`), as `--device` names it. Default: none.
    pub device: Option<crate::device::DeviceProperties>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions { python_functions: false, flows: false, shapes: true, device: None }
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

/// An event read through serde (the reference for the fast path).
#[cfg(test)]
pub(crate) fn serde_fields(slice: &[u8]) -> serde_json::Result<Fields<'_>> {
    serde_json::from_slice::<RawEvent<'_>>(slice).map(RawEvent::into_fields)
}

impl<'a> RawEvent<'a> {
    fn into_fields(self) -> Fields<'a> {
        let args = self.args.unwrap_or_default();
        Fields {
            ph: self.ph.map(|t| t.0),
            cat: self.cat.map(|t| t.0),
            name: self.name.map(|t| t.0),
            ts: self.ts.map(RawValue::get),
            dur: self.dur.map(RawValue::get),
            pid: self.pid,
            tid: self.tid,
            id: self.id,
            args: ArgFields {
                correlation: args.correlation,
                external_id: args.external_id,
                collective_name: args.collective_name,
                in_nelems: args.in_nelems,
                out_nelems: args.out_nelems,
                dtype: args.dtype,
                group_size: args.group_size,
                pg_name: args.pg_name,
                pg_desc: args.pg_desc,
                pg_ranks: args.pg_ranks,
                input_dims: args.input_dims.map(RawValue::get),
                input_type: args.input_type.map(RawValue::get),
                concrete_inputs: args.concrete_inputs.map(RawValue::get),
                bytes: args.bytes,
                wait_on_stream: args.wait_on_stream,
                wait_on_record: args.wait_on_record,
            },
        }
    }
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
    #[serde(default, borrow, rename = "Concrete Inputs")]
    concrete_inputs: Option<&'a RawValue>,
    #[serde(default)]
    bytes: Num,
    #[serde(default)]
    wait_on_stream: Num,
    #[serde(default, rename = "wait_on_cuda_event_record_corr_id")]
    wait_on_record: Num,
}

/// Rows and side tables of one chunk of events, merged in file order.
#[derive(Default)]
struct Chunk {
    names: Names,
    events: Events,
    collective_args: Vec<(u32, CollectiveArgs)>,
    op_shapes: Vec<OpShapes>,
    copy_bytes: Vec<(u32, u64)>,
    sync_waits: Vec<(u32, crate::rank::SyncWait)>,
    unknown_categories: Vec<String>,
    /// Events dropped without being stored (metadata, Python frames, instants).
    skipped: u64,
    /// Events whose `dur` was negative (stored with duration 0).
    negative_durations: u64,
    /// Complete events (`ph` X) without a `dur`, kept 0 long.
    without_duration: u64,
    /// Events without `ph` (their type): stored as other events, never kernels or ops.
    without_phase: u64,
    /// Top-level values we read: (key, offset, text).
    values: Vec<(&'static str, u64, Vec<u8>)>,
}

/// Times are clamped to ranges (years 1933–2116, durations up to 36 years)
/// in which no sum or difference the analyses form can overflow i64.
pub(crate) const MIN_TS_NS: i64 = -(1 << 60);
pub(crate) const MAX_TS_NS: i64 = 1 << 62;
pub(crate) const MAX_DUR_NS: i64 = 1 << 60;

/// The largest event the reader accepts; text that has not closed an event
/// by then is not a trace (Kineto events are well under a MiB).
const MAX_EVENT_BYTES: usize = 64 << 20;

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

fn time_ns(text: &str, base: &[u8], what: &str) -> std::result::Result<i64, EventError> {
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
        let raw = match crate::fast::event(slice) {
            Some(fields) => fields,
            None => {
                let raw: RawEvent<'_> = serde_json::from_slice(slice).map_err(|e| EventError {
                    offset: span.0 + line_col_offset(slice, e.line(), e.column()),
                    // serde's line and column count from the event's start, not the file's: the
                    // byte offset says where, and they had contradicted it.
                    message: format!("invalid event: {}", crate::error::json_message(&e)),
                })?;
                raw.into_fields()
            }
        };
        let ph = raw.ph.as_deref().unwrap_or("");
        let kind = match ph {
            "M" => {
                self.skipped += 1;
                return Ok(());
            }
            "X" => match raw.cat.as_deref() {
                Some(cat) => match EventKind::from_category(cat) {
                    Some(kind) => kind,
                    None => {
                        if !self.unknown_categories.iter().any(|c| c == cat) {
                            self.unknown_categories.push(cat.to_string());
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
            self.skipped += 1;
            return Ok(());
        }
        let Some(ts) = raw.ts else {
            if ph == "X" {
                return Err(EventError { offset: span.0, message: "complete event (ph \"X\") without `ts`".into() });
            }
            return Ok(());
        };
        let ts_ns = time_ns(ts, text, "ts")?.clamp(MIN_TS_NS, MAX_TS_NS);
        // Counted where it is kept (one without `ts` either, a trailing `{}`, is dropped above).
        if raw.ph.is_none() {
            self.without_phase += 1;
        }
        let dur_ns = match raw.dur {
            Some(d) => {
                let d = time_ns(d, text, "dur")?;
                if d < 0 {
                    self.negative_durations += 1;
                }
                d.clamp(0, MAX_DUR_NS)
            }
            None => {
                // A complete event is an interval: without its length its time is lost (said).
                if raw.ph.as_deref() == Some("X") {
                    self.without_duration += 1;
                }
                0
            }
        };
        let name = raw.name.as_deref().unwrap_or("");
        // 2021 traces record ProfilerStep#N as an `Operator`.
        let kind = if kind == EventKind::CpuOp && name.starts_with("ProfilerStep#") { EventKind::UserAnnotation } else { kind };
        let name_id: NameId = self.names.intern(name);
        let args = raw.args;
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
        if opts.shapes
            && matches!(kind, EventKind::CpuOp | EventKind::UserAnnotation)
            && let Some(dims) = args.input_dims
        {
            self.op_shapes.push(OpShapes {
                event: index,
                input_dims: dims.to_string(),
                input_types: args.input_type.map(str::to_string).unwrap_or_default(),
                concrete_inputs: args.concrete_inputs.map(str::to_string).unwrap_or_default(),
            });
        }
        if matches!(kind, EventKind::Memcpy | EventKind::Memset)
            && let Some(b) = args.bytes.as_i64().and_then(|b| u64::try_from(b).ok())
        {
            self.copy_bytes.push((index, b));
        }
        if kind == EventKind::GpuSync
            && let (Some(stream), Some(record)) = (args.wait_on_stream.as_i64(), args.wait_on_record.as_i64())
        {
            self.sync_waits.push((index, crate::rank::SyncWait { wait_on_stream: stream, record_correlation: record }));
        }
        Ok(())
    }
}

/// Whether a file starting with `head` is gzip (its magic bytes): what the
/// readers, the file sniffing of a job and `synth` tell a compressed trace by.
pub fn is_gzip(head: &[u8]) -> bool {
    head.starts_with(&[0x1f, 0x8b])
}

/// Whether a file starting with `head` holds a Kineto trace: gzip, or JSON
/// whose first non-blank byte opens an object.
pub fn looks_like_trace(head: &[u8]) -> bool {
    is_gzip(head) || head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Opens `path` as an input and reads its first four bytes (fewer if it is shorter:
/// how many), which the returned reader yields again before the rest — put back in
/// front, not by seeking: a pipe (`<(zcat t.json.gz)`) cannot seek.
fn open_peeked(path: &Path) -> Result<([u8; 4], usize, impl Read + Send + use<>)> {
    let io = |cause| Error::Io { path: path.to_path_buf(), cause };
    let mut file = crate::input::open(path).map_err(io)?;
    let mut magic = [0u8; 4];
    let got = read_full(&mut file, &mut magic).map_err(io)?;
    Ok((magic, got, std::io::Read::chain(std::io::Cursor::new(magic[..got].to_vec()), file)))
}

/// Reads one trace file: plain JSON or gzip (by magic bytes, not by name),
/// inflating, scanning and parsing in a pipeline of blocks.
pub fn read_path(path: &Path, opts: &ReadOptions) -> Result<RankTrace> {
    // What the file is, by its magic bytes: gzip, a rank of a trace dataset (Parquet), else JSON.
    let (magic, got, file) = open_peeked(path)?;
    if got == 4 && &magic == b"SQLi" && crate::nsys::is_export(path) {
        return Err(Error::Schema {
            path: path.to_path_buf(),
            message: "an Nsight Systems export (SQLite) holds one rank per process and GPU: read it with `nsys::read_path` or as a job"
                .into(),
        });
    }
    // SQLite reads a file it can seek: an export piped in (`<(cat x.sqlite)`) had been called not JSON.
    if got == 4 && &magic == b"SQLi" && !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Err(Error::Schema {
            path: path.to_path_buf(),
            message:
                "an SQLite database (an Nsight Systems export?) from a pipe: SQLite reads only a file it can seek, give the export's path"
                    .into(),
        });
    }
    if got == 4 && &magic == b"PAR1" {
        drop(file);
        return crate::dataset::read_part(path, opts);
    }
    if is_gzip(&magic[..got]) {
        let decoder = flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 18, file));
        parse_stream(decoder, path, opts, true)
    } else {
        parse_stream(file, path, opts, false)
    }
}

/// The JSON text of a trace file, inflated when it is gzip.
pub fn read_text(path: &Path) -> Result<Vec<u8>> {
    let io = |cause| Error::Io { path: path.to_path_buf(), cause };
    let (magic, got, mut file) = open_peeked(path)?;
    let mut out = Vec::new();
    if is_gzip(&magic[..got]) {
        let mut decoder = flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 18, file));
        // In reads of at most GZIP_CALL bytes, as the block reader's: the offset an error says.
        let mut chunk = vec![0u8; GZIP_CALL];
        loop {
            match read_full_counted(&mut decoder, &mut chunk, GZIP_CALL) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err((n, source)) => {
                    return Err(Error::Gzip { path: path.to_path_buf(), decompressed_offset: (out.len() + n) as u64, cause: source });
                }
            }
        }
    } else {
        file.read_to_end(&mut out).map_err(io)?;
    }
    Ok(out)
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
pub(crate) fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    read_full_counted(r, buf, usize::MAX).map_err(|(_, e)| e)
}

/// [`read_full`] in calls of at most `call` bytes, an error coming with the bytes read before
/// it. A gzip reader that meets damage drops what it inflated in that call: calls of at most
/// [`GZIP_CALL`] bytes place the damage within that many of the offset said (a plain file's
/// reads need no cap: a block in one call).
fn read_full_counted(r: &mut impl Read, buf: &mut [u8], call: usize) -> std::result::Result<usize, (usize, std::io::Error)> {
    let mut n = 0;
    while n < buf.len() {
        let end = n.saturating_add(call).min(buf.len());
        match r.read(&mut buf[n..end]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err((n, e)),
        }
    }
    Ok(n)
}

/// Parses the JSON text of one trace held in memory. `path` only names the
/// source in errors and in the result.
pub fn parse_bytes(text: &[u8], path: &Path, opts: &ReadOptions) -> Result<RankTrace> {
    parse_stream(text, path, opts, false)
}

/// The most bytes one read asks of a (gzip) reader: the damage of a corrupt stream is said
/// within this many bytes after the offset an error gives.
pub(crate) const GZIP_CALL: usize = 64 << 10;

/// Text is inflated and scanned in blocks of this size; each block's events
/// are parsed on the thread pool while the next block is inflated.
const BLOCK: usize = 4 << 20;

/// Events whose category or phase shows, before any parsing, that they will
/// be dropped: metadata rows, Python stack frames and CPU instants (memory
/// samples), which are half the bytes of some traces. Only the head of the
/// event is looked at (Kineto writes `ph` and `cat` first); anything else is
/// parsed and filtered as usual.
fn skippable(event: &[u8], opts: &ReadOptions) -> bool {
    let head = event.get(..event.len().min(96)).unwrap_or(event);
    static KEYS: std::sync::OnceLock<[memchr::memmem::Finder<'static>; 2]> = std::sync::OnceLock::new();
    let [ph, cat] = KEYS.get_or_init(|| [memchr::memmem::Finder::new(b"\"ph\""), memchr::memmem::Finder::new(b"\"cat\"")]);
    let value_of = |key: &memchr::memmem::Finder<'_>| -> Option<&[u8]> {
        let at = key.find(head)?;
        let rest = head.get(at + key.needle().len()..)?;
        let colon = rest.iter().position(|c| !c.is_ascii_whitespace())?;
        if rest.get(colon) != Some(&b':') {
            return None;
        }
        let rest = rest.get(colon + 1..)?;
        let start = rest.iter().position(|c| !c.is_ascii_whitespace())?;
        rest.get(start..)
    };
    if let Some(v) = value_of(ph)
        && (v.starts_with(b"\"M\"") || (!opts.flows && (v.starts_with(b"\"s\"") || v.starts_with(b"\"f\"") || v.starts_with(b"\"t\""))))
    {
        return true;
    }
    match value_of(cat) {
        Some(v) => (!opts.python_functions && v.starts_with(b"\"python_function\"")) || v.starts_with(b"\"cpu_instant_event\""),
        None => false,
    }
}

/// One block of text with the units the scanner found in it.
struct Block {
    index: usize,
    /// Offset of `text[0]` in the whole JSON text.
    base: u64,
    /// The buffer; only `text[..used]` belongs to this block.
    text: Vec<u8>,
    used: usize,
    items: Vec<scan::Item>,
}

fn parse_block(block: &Block, opts: &ReadOptions) -> std::result::Result<Chunk, EventError> {
    let mut chunk = Chunk::default();
    chunk.events.reserve(block.items.len());
    let text = block.text.get(..block.used).unwrap_or_default();
    for item in &block.items {
        match *item {
            scan::Item::Event(s, e) => {
                let event = text.get(s..e).unwrap_or_default();
                if skippable(event, opts) {
                    chunk.skipped += 1;
                    continue;
                }
                chunk.add(text, (s, e), opts).map_err(|mut err| {
                    err.offset += block.base as usize;
                    err
                })?;
            }
            scan::Item::Value(key, s, e) => {
                chunk.values.push((key, block.base + s as u64, text.get(s..e).unwrap_or_default().to_vec()));
            }
        }
    }
    Ok(chunk)
}

/// Block buffers shared by every file this process reads: a job of thousands
/// of rank files zeroes its few multi-MiB buffers once, not per file.
static BLOCK_POOL: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

/// Frees the reader's block buffers (tens of MiB; more with more threads)
/// once a job's files are read, so what comes next has that memory.
pub fn release_read_buffers() {
    if let Ok(mut pool) = BLOCK_POOL.lock() {
        *pool = Vec::new();
    }
}

fn parse_stream(mut input: impl Read, path: &Path, opts: &ReadOptions, gzip: bool) -> Result<RankTrace> {
    let json_err =
        |offset: u64, message: String| Error::Json { path: path.to_path_buf(), byte_offset: offset, decompressed: gzip, message };
    let mut scanner = scan::Scanner::new();
    let results: std::sync::Mutex<Vec<(usize, std::result::Result<Chunk, EventError>)>> = std::sync::Mutex::new(Vec::new());
    let mut carry: Vec<u8> = Vec::new();
    let pool = &BLOCK_POOL;
    let mut base: u64 = 0;
    let mut total: u64 = 0;
    let mut block_len: usize = 64 << 10;
    let in_flight = AtomicUsize::new(0);
    let max_in_flight = 2 * rayon::current_num_threads() + 1;
    let mut any_content = false;
    let mut damaged: Option<(u64, String)> = None;
    let outcome: Result<()> = rayon::in_place_scope(|scope| {
        let mut index = 0;
        loop {
            // A block: the carried-over tail, then new text. Buffers come back
            // from the parsers, so they are allocated and zeroed once: fresh
            // multi-MiB allocations cost page faults on every block.
            // Backpressure: a fast inflater must not queue the whole file
            // ahead of the parsers. Help run their tasks (or wait) instead.
            while in_flight.load(Ordering::Acquire) >= max_in_flight {
                if rayon::yield_now() != Some(rayon::Yield::Executed) {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
            }
            let want = block_len.max(carry.len());
            // Small first blocks keep small files cheap; large files reach BLOCK quickly.
            block_len = (block_len * 4).min(BLOCK);
            let mut text = pool.lock().ok().and_then(|mut p| p.pop()).unwrap_or_default();
            if text.len() < carry.len() + want {
                text.resize(carry.len() + want, 0);
            }
            let old = carry.len();
            text[..old].copy_from_slice(&carry);
            let got = match read_full_counted(&mut input, &mut text[old..old + want], if gzip { GZIP_CALL } else { usize::MAX }) {
                Ok(n) => n,
                Err((n, source)) => {
                    // The offset of the damage itself: what was inflated before it, this block's part included.
                    return Err(if gzip {
                        Error::Gzip { path: path.to_path_buf(), decompressed_offset: total + n as u64, cause: source }
                    } else {
                        Error::Io { path: path.to_path_buf(), cause: source }
                    });
                }
            };
            let used = old + got;
            total += got as u64;
            let eof = got < want;
            if !any_content {
                any_content = text[..used].iter().any(|c| !c.is_ascii_whitespace());
                if !any_content {
                    if eof {
                        return Err(Error::Empty { path: path.to_path_buf() });
                    }
                    base += used as u64;
                    carry.clear();
                    continue;
                }
            }
            let mut items = Vec::new();
            let safe = scanner.scan(&text[..used], eof, &mut items).map_err(|e| json_err(base + e.offset as u64, e.message))?;
            // The rest of the file is not a trace: parse what was found, read no further.
            let stop = match scanner.damaged.take() {
                Some((at, why)) => {
                    damaged = Some((base + at as u64, why));
                    true
                }
                None => false,
            };
            let safe = if stop { used } else { safe };
            carry.clear();
            carry.extend_from_slice(&text[safe..used]);
            // No event is this large: the text is not a trace (bounded memory on garbage).
            if carry.len() > MAX_EVENT_BYTES {
                return Err(json_err(
                    base + safe as u64,
                    format!("no event ends within {} MiB: not a Kineto trace", MAX_EVENT_BYTES >> 20),
                ));
            }
            let block = Block { index, base, text, used: safe, items };
            base += safe as u64;
            index += 1;
            let results = &results;
            let in_flight = &in_flight;
            in_flight.fetch_add(1, Ordering::AcqRel);
            scope.spawn(move |_| {
                let parsed = parse_block(&block, opts);
                if let Ok(mut r) = results.lock() {
                    r.push((block.index, parsed));
                }
                if let Ok(mut p) = pool.lock()
                    && p.len() < 16
                {
                    p.push(block.text);
                }
                in_flight.fetch_sub(1, Ordering::AcqRel);
            });
            if eof || stop {
                return Ok(());
            }
        }
    });
    outcome?;
    if !scanner.has_trace_events {
        return Err(Error::Schema {
            path: path.to_path_buf(),
            message: "not a Kineto trace: the top-level object has no `traceEvents`".into(),
        });
    }
    let mut chunks = results.into_inner().unwrap_or_default();
    chunks.sort_by_key(|(i, _)| *i);

    let mut trace = RankTrace::new(path.to_path_buf());
    trace.events.reserve(chunks.iter().map(|(_, c)| c.as_ref().map_or(0, |c| c.events.len())).sum());
    let mut unknown: Vec<String> = Vec::new();
    let (mut negative, mut without_phase, mut without_duration) = (0u64, 0u64, 0u64);
    let mut values = Vec::new();
    for (_, chunk) in chunks {
        let chunk = chunk.map_err(|e| json_err(e.offset as u64, e.message))?;
        let name_map: Vec<NameId> = chunk.names.iter().map(|n| trace.names.intern(n)).collect();
        let offset = trace.events.len() as u32;
        trace.events.append(chunk.events, &name_map);
        trace.collective_args.extend(chunk.collective_args.into_iter().map(|(i, a)| (i + offset, a)));
        trace.op_shapes.extend(chunk.op_shapes.into_iter().map(|mut s| {
            s.event += offset;
            s
        }));
        trace.copy_bytes.extend(chunk.copy_bytes.into_iter().map(|(i, b)| (i + offset, b)));
        trace.sync_waits.extend(chunk.sync_waits.into_iter().map(|(i, w)| (i + offset, w)));
        for c in chunk.unknown_categories {
            if !unknown.contains(&c) {
                unknown.push(c);
            }
        }
        trace.skipped_events += chunk.skipped;
        negative += chunk.negative_durations;
        without_duration += chunk.without_duration;
        without_phase += chunk.without_phase;
        values.extend(chunk.values);
    }
    // Cut off before its first whole event: nothing of the rank was read, and a rank of zeros
    // would stand among the job's good ones as if it had run nothing.
    if scanner.events == 0 && (scanner.missing_close || damaged.is_some()) {
        let at = damaged.as_ref().map_or(total, |d| d.0);
        return Err(json_err(at, "the file ends before its first whole event (the writer was probably killed): nothing to analyse".into()));
    }
    if let Some((at, why)) = damaged {
        trace
            .warnings
            .push(format!("byte {at}: {why}; the {} events before it are used and the rest of the file is ignored", scanner.events));
    }
    if negative > 0 {
        trace.warnings.push(format!("{negative} event(s) had a negative duration; they are kept with duration 0"));
    }
    if without_duration > 0 {
        trace.warnings.push(format!("{without_duration} complete event(s) (`ph` X) had no `dur`; they are kept with duration 0"));
    }
    // A kernel without its `ph` had left the GPU's time in silence.
    if without_phase > 0 {
        trace
            .warnings
            .push(format!("{without_phase} event(s) without `ph` (the event's type): read as other events, not kernels, copies or ops"));
    }
    if scanner.missing_close {
        trace.warnings.push(format!(
            "the file ends after event {} without closing `traceEvents` (the writer was probably killed); the events read are used",
            scanner.events
        ));
    }
    unknown.sort();
    for c in unknown {
        trace.warnings.push(format!("unknown event category {c:?} kept as \"other\""));
    }
    for (key, start, value) in values {
        match key {
            "deviceProperties" | "computeProperties" => match serde_json::from_slice::<Vec<RawDeviceProperties<'_>>>(&value) {
                Ok(list) if trace.devices.is_empty() => {
                    for (i, d) in list.iter().enumerate() {
                        let keys = d.unreadable_numbers();
                        if !keys.is_empty() {
                            trace.warnings.push(format!(
                                "`{key}[{i}]` at byte {start}: {} not a whole number at or above zero, read as missing (the GPU is matched by what else it says)",
                                keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ") + if keys.len() == 1 { " is" } else { " are" }
                            ));
                        }
                    }
                    trace.devices = list.into_iter().map(DeviceProperties::from).collect()
                }
                Ok(_) => {}
                Err(e) => trace.warnings.push(format!("`{key}` at byte {start} is unreadable and was ignored: {e}")),
            },
            "distributedInfo" => match serde_json::from_slice::<RawDistributedInfo<'_>>(&value) {
                Ok(info) => {
                    for key in info.unreadable_numbers() {
                        trace.warnings.push(format!(
                            "`distributedInfo.{key}` at byte {start} is not a whole number (or too large) and was ignored{}",
                            if key == "rank" { ": the rank comes from the file name or the file's position" } else { "" }
                        ));
                    }
                    let mut info = DistributedInfo::from(info);
                    // A rank that is not a rank number would otherwise be dropped silently
                    // (and the file numbered by its position, perhaps as another file's rank).
                    if let Some(r) = info.rank.filter(|&r| u32::try_from(r).is_err()) {
                        trace.warnings.push(format!(
                            "`distributedInfo.rank` {r} at byte {start} is not a rank number and was ignored: the rank comes from the file name or the file's position"
                        ));
                        info.rank = None;
                    }
                    if let Some(w) = info.world_size.filter(|_| info.positive_world_size().is_none()) {
                        trace.warnings.push(format!(
                            "`distributedInfo.world_size` {w} at byte {start} is not a number of ranks and was ignored: the world size comes from the ranks read"
                        ));
                    }
                    if let (Some(r), Some(w)) = (info.rank, info.positive_world_size())
                        && r >= i64::from(w)
                    {
                        // Said, and kept: one of the two is wrong, and the rank's file name or
                        // position could be as wrong and lose a real rank's number to it.
                        trace.warnings.push(format!("`distributedInfo.rank` {r} at byte {start} is not below its world_size {w}"));
                    }
                    trace.distributed = Some(info);
                }
                Err(e) => trace.warnings.push(format!("`distributedInfo` at byte {start} is unreadable and was ignored: {e}")),
            },
            "baseTimeNanoseconds" => {
                let digits = std::str::from_utf8(&value).unwrap_or_default().trim_matches('"');
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
    trace.json_bytes = total;
    trace.warn_of_implausible_gpu_activity();
    // Last, after every warning of the trace's own: a dataset keeps the trace as recorded.
    if let Some(device) = &opts.device {
        crate::device::name_unrecorded_gpu(&mut trace, device);
    }
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
        assert_eq!(t.skipped_events, 1);
        assert!(t.warnings.iter().any(|w| w.contains("weird")));
    }

    /// A rank or world size given but not a whole number (`"abc"`, 1.5, true, 1e20) was read as
    /// missing without a note; a world size of -4 was dropped silently.
    #[test]
    fn unreadable_distributed_numbers_are_said() {
        for (info, says) in [
            (r#""rank": "abc", "world_size": 2"#, "`distributedInfo.rank` at byte"),
            (r#""rank": 1.5, "world_size": 2"#, "`distributedInfo.rank` at byte"),
            (r#""rank": true"#, "and was ignored: the rank comes from the file name"),
            (r#""rank": 0, "world_size": 1e20"#, "`distributedInfo.world_size` at byte"),
            (r#""rank": 0, "world_size": -4"#, "`distributedInfo.world_size` -4 at byte"),
        ] {
            let t = parse(&format!(r#"{{"distributedInfo": {{{info}}}, "traceEvents": []}}"#)).unwrap();
            assert!(t.warnings.iter().any(|w| w.contains(says)), "{info}: {:?}", t.warnings);
        }
        // Missing or readable: no note.
        for info in [r#""rank": 1, "world_size": 2"#, r#""backend": "nccl""#, r#""rank": "1", "world_size": "2""#] {
            let t = parse(&format!(r#"{{"distributedInfo": {{{info}}}, "traceEvents": []}}"#)).unwrap();
            assert!(t.warnings.is_empty(), "{info}: {:?}", t.warnings);
        }
    }

    /// A complete event without its length loses its time: said, as a negative length is.
    #[test]
    fn a_complete_event_without_a_duration_is_said() {
        let t = parse(r#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "pid": 0, "tid": 7}, {"ph": "i", "name": "m", "ts": 2, "pid": 0, "tid": 7}]}"#).unwrap();
        assert_eq!(t.warnings, ["1 complete event(s) (`ph` X) had no `dur`; they are kept with duration 0"]);
    }

    #[test]
    fn errors_name_file_and_offset() {
        let e = parse(r#"{"traceEvents": [{"ph": "X", "ts": "abc"}]}"#).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("t.json: byte 35:"), "{msg}");
        // The byte offset alone says where: serde's line and column, counted from the event's
        // start, had said "line 1 column 18" beside byte 33.
        let msg = parse(r#"{"traceEvents":[{"ph":"X","ts":1,,}]}"#).unwrap_err().to_string();
        assert!(msg.starts_with("t.json: byte 33: invalid event: ") && !msg.contains(" line "), "{msg}");
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
