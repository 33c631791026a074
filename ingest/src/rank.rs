//! [`RankTrace`]: everything read from one trace file.

use std::path::PathBuf;

use crate::collective::CollectiveArgs;
use crate::device::{DeviceProperties, DistributedInfo};
use crate::event::{Events, Names};

/// `Input Dims` and `Input type` of a CPU op, kept as their JSON text and
/// parsed on demand by work accounting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpShapes {
    /// Row of the CPU op in [`Events`].
    pub event: u32,
    /// `Input Dims` as written, e.g. `[[2048, 4096], [4096, 1024]]`.
    pub input_dims: String,
    /// `Input type` as written, e.g. `["c10::BFloat16", "c10::BFloat16"]`.
    pub input_types: String,
    /// `Concrete Inputs` as written (scalar arguments such as strides), or empty.
    pub concrete_inputs: String,
}

impl OpShapes {
    /// `Input Dims` without the whitespace some profilers pretty-print into it.
    pub fn compact_dims(&self) -> String {
        let d = &self.input_dims;
        if d.is_ascii() {
            // ASCII's white space is what `split_whitespace` splits at there.
            return d.chars().filter(|c| !matches!(c, '\t'..='\r' | ' ')).collect();
        }
        d.split_whitespace().collect()
    }

    /// `Input Dims` as one shape per input; inputs that are not a flat list of
    /// integers (scalars, TensorLists, `[]`) give an empty shape.
    pub fn dims(&self) -> Vec<Vec<i64>> {
        if let Some(dims) = int_lists(&self.input_dims) {
            return dims;
        }
        let Ok(inputs) = serde_json::from_str::<Vec<serde_json::Value>>(&self.input_dims) else { return Vec::new() };
        inputs
            .iter()
            .map(|v| match v.as_array() {
                Some(a) => a.iter().map(serde_json::Value::as_i64).collect::<Option<Vec<i64>>>().unwrap_or_default(),
                None => Vec::new(),
            })
            .collect()
    }

    /// `Input type` as one string per input (empty where not a string).
    pub fn types(&self) -> Vec<String> {
        strings(&self.input_types)
    }

    /// [`OpShapes::types`], borrowing the text where it needs no unescaping.
    pub fn type_names(&self) -> Vec<std::borrow::Cow<'_, str>> {
        match plain_strs(&self.input_types) {
            Some(v) => v.into_iter().map(std::borrow::Cow::Borrowed).collect(),
            None => self.types().into_iter().map(std::borrow::Cow::Owned).collect(),
        }
    }

    /// `Concrete Inputs` as one string per input (empty where not recorded).
    pub fn concrete(&self) -> Vec<String> {
        strings(&self.concrete_inputs)
    }

    /// Bytes of the largest input tensor whose shape and dtype are known.
    pub fn largest_input_bytes(&self) -> Option<u64> {
        let types = self.types();
        self.dims()
            .iter()
            .zip(types.iter())
            .filter(|(d, _)| !d.is_empty())
            .filter_map(|(d, t)| {
                let numel = d.iter().try_fold(1u64, |acc, &x| acc.checked_mul(u64::try_from(x).ok()?))?;
                numel.checked_mul(crate::collective::dtype_size(t)?)
            })
            .max()
    }
}

fn strings(json: &str) -> Vec<String> {
    if let Some(strings) = plain_strs(json) {
        return strings.into_iter().map(str::to_string).collect();
    }
    let Ok(inputs) = serde_json::from_str::<Vec<serde_json::Value>>(json) else { return Vec::new() };
    inputs.iter().map(|v| v.as_str().unwrap_or_default().to_string()).collect()
}

/// Skips JSON whitespace from `*i`.
fn skip_ws(b: &[u8], i: &mut usize) {
    while b.get(*i).is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r')) {
        *i += 1;
    }
}

/// The elements of a JSON array from `*i` (at its `[`), each read by `item`;
/// `None` when the text is not such an array or an item gives up.
fn array<T>(b: &[u8], i: &mut usize, mut item: impl FnMut(&[u8], &mut usize) -> Option<T>) -> Option<Vec<T>> {
    if b.get(*i) != Some(&b'[') {
        return None;
    }
    *i += 1;
    let mut out = Vec::new();
    skip_ws(b, i);
    if b.get(*i) == Some(&b']') {
        *i += 1;
        return Some(out);
    }
    loop {
        skip_ws(b, i);
        out.push(item(b, i)?);
        skip_ws(b, i);
        match b.get(*i) {
            Some(b',') => *i += 1,
            Some(b']') => {
                *i += 1;
                return Some(out);
            }
            _ => return None,
        }
    }
}

/// `Input Dims` read directly when it is an array of arrays of plain
/// integers (the common case; `None` otherwise, and serde decides): the same
/// result as [`OpShapes::dims`]' serde reading, without a `Value` per number.
fn int_lists(text: &str) -> Option<Vec<Vec<i64>>> {
    let b = text.as_bytes();
    let mut i = 0;
    skip_ws(b, &mut i);
    let int = |b: &[u8], i: &mut usize| -> Option<i64> {
        let negative = b.get(*i) == Some(&b'-');
        if negative {
            *i += 1;
        }
        let start = *i;
        let mut v: i64 = 0;
        while let Some(d) = b.get(*i).filter(|c| c.is_ascii_digit()) {
            let d = i64::from(d - b'0');
            v = v.checked_mul(10)?.checked_add(if negative { -d } else { d })?;
            *i += 1;
        }
        let digits = *i - start;
        // No digits, a leading zero, a fraction or exponent, or `-0` (serde reads
        // it as the float −0.0): not a plain integer.
        if digits == 0
            || (digits > 1 && b.get(start) == Some(&b'0'))
            || b.get(*i).is_some_and(|c| matches!(c, b'.' | b'e' | b'E'))
            || (negative && v == 0)
        {
            return None;
        }
        Some(v)
    };
    let dims = array(b, &mut i, |b, i| array(b, i, int))?;
    skip_ws(b, &mut i);
    (i == b.len()).then_some(dims)
}

/// `Input type` (or `Concrete Inputs`) read directly when it is an array of
/// strings without escapes (`None` otherwise, and serde decides).
fn plain_strs(text: &str) -> Option<Vec<&str>> {
    let b = text.as_bytes();
    let mut i = 0;
    skip_ws(b, &mut i);
    let string = |b: &[u8], i: &mut usize| -> Option<&str> {
        if b.get(*i) != Some(&b'"') {
            return None;
        }
        let start = *i + 1;
        let len = b.get(start..)?.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        if b.get(start + len) != Some(&b'"') {
            return None;
        }
        *i = start + len + 1;
        text.get(start..start + len)
    };
    let strings = array(b, &mut i, string)?;
    skip_ws(b, &mut i);
    (i == b.len()).then_some(strings)
}

/// The event a `cuda_sync` row waited on: recorded on `wait_on_stream` by
/// the `cudaEventRecord` call with correlation `record_correlation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncWait {
    /// Stream the event was recorded on.
    pub wait_on_stream: i64,
    /// Correlation of the `cudaEventRecord` call.
    pub record_correlation: i64,
}

/// One trace file: its events as columns plus the metadata we use.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RankTrace {
    /// The file this came from.
    pub path: PathBuf,
    /// Size of the JSON text (after gzip inflation), bytes; for the ranks of
    /// an Nsight Systems export, the file's size shared equally among them.
    pub json_bytes: u64,
    /// Interned event names.
    pub names: Names,
    /// The events, in file order.
    pub events: Events,
    /// Collective arguments of NCCL kernels and `record_param_comms` ops, by row, ascending.
    pub collective_args: Vec<(u32, CollectiveArgs)>,
    /// CPU-op shapes, by row, ascending.
    pub op_shapes: Vec<OpShapes>,
    /// `bytes` of memcpy / memset rows, ascending.
    pub copy_bytes: Vec<(u32, u64)>,
    /// What `cuda_sync` rows (`Event Sync`, `Stream Wait Event`) waited on, by row, ascending.
    pub sync_waits: Vec<(u32, SyncWait)>,
    /// `deviceProperties` (or `computeProperties`).
    pub devices: Vec<DeviceProperties>,
    /// `distributedInfo`, when present.
    pub distributed: Option<DistributedInfo>,
    /// `baseTimeNanoseconds`, when present (already added to every `ts_ns`).
    pub base_time_ns: Option<i64>,
    /// Events read but not stored: `M` metadata rows, Python frames (unless
    /// [`ReadOptions::python_functions`](crate::ReadOptions)) and CPU instants.
    pub skipped_events: u64,
    /// Oddities that were tolerated (never free-form metadata).
    pub warnings: Vec<String>,
    /// The rank and its source as resolved before the trace reached its job:
    /// when it was ingested into a dataset, or from its place among the
    /// job's Nsight Systems exports (`None` for a trace read from JSON).
    pub(crate) ingested_rank: Option<(u32, crate::job::RankSource)>,
    /// The (process, GPU) of an Nsight Systems export this rank is.
    pub(crate) export_rank: Option<crate::nsys::ExportRank>,
    /// The dataset part this trace was read back from (`DATASET/events/rank-N.parquet`):
    /// an error about its data names the file the user gave, not one it was ingested from.
    pub(crate) dataset_part: Option<PathBuf>,
}

/// The longest a GPU activity is taken to have run as recorded, ns: an hour. PyTorch's NCCL
/// watchdog ends a collective after 10 minutes by default, and a profiler records seconds to
/// minutes of a run; a longer activity is a clock or unit error of its writer.
pub(crate) const LONGEST_GPU_ACTIVITY_NS: i64 = HOUR_NS;

/// An hour, ns.
pub(crate) const HOUR_NS: i64 = 3_600 * 1_000_000_000;

/// The farthest a GPU activity is taken to start from the rank's others (their median start)
/// as recorded, ns: a day. A profiler captures seconds to minutes of a run; an activity a day
/// away is a clock error or a damaged timestamp of its writer.
pub(crate) const FARTHEST_GPU_START_NS: i64 = 24 * HOUR_NS;

impl RankTrace {
    /// Warns of GPU activity that lasts longer than anything runs ([`LONGEST_GPU_ACTIVITY_NS`]):
    /// it is analysed as recorded (a kernel of 11.6 days had made a rank 100 % busy, without a
    /// word); and of activity that starts too far from the rest ([`Self::warn_of_far_gpu_starts`]).
    pub(crate) fn warn_of_implausible_gpu_activity(&mut self) {
        self.warn_of_clamped_times();
        self.warn_of_far_gpu_starts();
        self.warn_of_duplicate_gpu_activity();
        let long: Vec<usize> =
            self.gpu_activity().filter(|&i| self.events.dur_ns.get(i).is_some_and(|&d| d > LONGEST_GPU_ACTIVITY_NS)).collect();
        let Some(&longest) = long.iter().max_by_key(|&&i| self.events.dur_ns.get(i).copied().unwrap_or(0)) else { return };
        let hours = self.events.dur_ns.get(longest).copied().unwrap_or(0) as f64 / 3.6e12;
        self.warnings.push(format!(
            "{} GPU activit{} longer than an hour (the longest, {}, {hours:.1} h): nothing runs that long on a GPU (PyTorch's NCCL watchdog ends a collective after 10 minutes), a clock or unit error of the trace's writer? Analysed as recorded",
            long.len(),
            if long.len() == 1 { "y lasts" } else { "ies last" },
            crate::analysis::short_kernel_name(self.name(longest), 60)
        ));
    }

    /// Warns of GPU activity that starts farther from the rank's other GPU activity than a
    /// capture spans ([`FARTHEST_GPU_START_NS`]): analysed as recorded (a kernel whose `ts` had
    /// lost its sign made its rank 100 % idle over 2.9 billion seconds, and the job 0 % busy,
    /// with a word only of unrelated runs, on another rank).
    fn warn_of_far_gpu_starts(&mut self) {
        let mut starts: Vec<i64> = self.gpu_activity().filter_map(|i| self.events.ts_ns.get(i).copied()).collect();
        if starts.is_empty() {
            return;
        }
        let middle = starts.len() / 2;
        let median = *starts.select_nth_unstable(middle).1;
        // (row, how far its start is from the median), of the activity farther than a capture spans.
        let far: Vec<(usize, i64)> = self
            .gpu_activity()
            .filter_map(|i| Some((i, self.events.ts_ns.get(i)?.saturating_sub(median).saturating_abs())))
            .filter(|&(_, away)| away > FARTHEST_GPU_START_NS)
            .collect();
        let Some(&(farthest, away)) = far.iter().max_by_key(|f| f.1) else { return };
        self.warnings.push(format!(
            "{} GPU activit{} more than a day from the rest of the rank's (the farthest, {}, {:.1} h away): a profiler captures seconds to minutes, a clock error or a damaged timestamp of the trace's writer? Analysed as recorded",
            far.len(),
            if far.len() == 1 { "y starts" } else { "ies start" },
            crate::analysis::short_kernel_name(self.name(farthest), 60),
            away as f64 / HOUR_NS as f64
        ));
    }

    /// Warns of events whose time the readers held at the edge of the range no analysis
    /// overflows in ([`crate::kineto::MAX_TS_NS`], years 1933–2116): a damaged timestamp; held
    /// there, they all read as one instant (an export shifted past 2116 read as 7.9 ms 100 % busy).
    fn warn_of_clamped_times(&mut self) {
        use crate::kineto::{MAX_TS_NS, MIN_TS_NS};
        let held = self.events.ts_ns.iter().filter(|&&t| t == MAX_TS_NS || t == MIN_TS_NS).count();
        if held > 0 {
            self.warnings.push(format!(
                "{held} event(s) at a time outside the years 1933–2116 (a damaged timestamp, or one in the wrong unit) were held at its edge: they read as one instant, and the analysis of them is not a measurement"
            ));
        }
    }

    /// Warns of GPU activity recorded twice: the same name on the same stream (pid, tid) with
    /// the same start and duration. A stream runs one activity at a time, so the second row is
    /// a duplicate of the trace's writer (none of the corpus' 50 traces has one); analysed as
    /// recorded, it counts twice in per-kernel and per-class times, not in busy time.
    fn warn_of_duplicate_gpu_activity(&mut self) {
        use std::hash::{Hash, Hasher};
        let e = &self.events;
        let key = |i: usize| Some((*e.pid.get(i)?, *e.tid.get(i)?, *e.ts_ns.get(i)?, *e.dur_ns.get(i)?, *e.name.get(i)?));
        // Every rank of every trace passes here: a hash per activity is sorted (12 bytes a row),
        // and only equal hashes are compared in full.
        let hash = |k: (i64, i64, i64, i64, u32)| {
            let mut h = rustc_hash::FxHasher::default();
            k.hash(&mut h);
            h.finish()
        };
        let mut rows: Vec<(u64, u32)> = self.gpu_activity().filter_map(|i| Some((hash(key(i)?), u32::try_from(i).ok()?))).collect();
        rows.sort_unstable();
        let again: Vec<usize> =
            rows.windows(2).filter(|w| w[0].0 == w[1].0 && key(w[0].1 as usize) == key(w[1].1 as usize)).map(|w| w[1].1 as usize).collect();
        let Some(&first) = again.iter().min() else { return };
        self.warnings.push(format!(
            "{} GPU activit{} another row (the same name, stream, start and duration; the first, {}): a duplicated row of the trace's writer? Analysed as recorded: counted again in per-kernel and per-class times",
            again.len(),
            if again.len() == 1 { "y repeats" } else { "ies repeat" },
            crate::analysis::short_kernel_name(self.name(first), 60)
        ));
    }

    /// The file the user gave for this rank: the dataset part it was read back from, else
    /// [`RankTrace::path`].
    pub fn given_path(&self) -> &std::path::Path {
        self.dataset_part.as_deref().unwrap_or(&self.path)
    }

    pub(crate) fn new(path: PathBuf) -> RankTrace {
        RankTrace {
            path,
            json_bytes: 0,
            names: Names::default(),
            events: Events::default(),
            collective_args: Vec::new(),
            op_shapes: Vec::new(),
            copy_bytes: Vec::new(),
            sync_waits: Vec::new(),
            devices: Vec::new(),
            distributed: None,
            base_time_ns: None,
            skipped_events: 0,
            warnings: Vec::new(),
            ingested_rank: None,
            export_rank: None,
            dataset_part: None,
        }
    }

    /// The name of row `i`.
    pub fn name(&self, i: usize) -> &str {
        self.events.name.get(i).map_or("", |&n| self.names.get(n))
    }

    /// Collective arguments of row `i`, if it has any.
    pub fn collective_args_of(&self, i: usize) -> Option<&CollectiveArgs> {
        let i = i as u32;
        self.collective_args.binary_search_by_key(&i, |(row, _)| *row).ok().and_then(|k| self.collective_args.get(k)).map(|(_, a)| a)
    }

    /// Shapes of CPU op row `i`, if recorded.
    pub fn op_shapes_of(&self, i: usize) -> Option<&OpShapes> {
        let i = i as u32;
        self.op_shapes.binary_search_by_key(&i, |s| s.event).ok().and_then(|k| self.op_shapes.get(k))
    }

    /// Bytes moved by memcpy / memset row `i`, if recorded.
    pub fn copy_bytes_of(&self, i: usize) -> Option<u64> {
        let i = i as u32;
        self.copy_bytes.binary_search_by_key(&i, |(row, _)| *row).ok().and_then(|k| self.copy_bytes.get(k)).map(|(_, b)| *b)
    }

    /// Rows that are GPU activity (kernel, memcpy, memset).
    pub fn gpu_activity(&self) -> impl Iterator<Item = usize> + '_ {
        self.events.kind.iter().enumerate().filter(|(_, k)| k.is_gpu_activity()).map(|(i, _)| i)
    }

    /// The rank from `distributedInfo`, when the trace has it.
    pub fn declared_rank(&self) -> Option<i64> {
        self.distributed.as_ref().and_then(|d| d.rank)
    }

    /// The world size from `distributedInfo`, when the trace has a positive one.
    pub fn declared_world_size(&self) -> Option<u32> {
        self.distributed.as_ref().and_then(DistributedInfo::positive_world_size)
    }

    /// The name of the GPU this rank ran on: the first named device
    /// (`deviceProperties` lists every GPU of the node, or only the visible one).
    pub fn device_name(&self) -> Option<&str> {
        crate::device::name_of(&self.devices)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes(dims: &str, types: &str) -> OpShapes {
        OpShapes { event: 0, input_dims: dims.into(), input_types: types.into(), concrete_inputs: String::new() }
    }

    /// What serde alone reads (the reading the direct one stands in for).
    fn by_serde(dims: &str, types: &str) -> (Vec<Vec<i64>>, Vec<String>) {
        let d = serde_json::from_str::<Vec<serde_json::Value>>(dims).map_or_else(
            |_| Vec::new(),
            |v| {
                v.iter()
                    .map(|v| match v.as_array() {
                        Some(a) => a.iter().map(serde_json::Value::as_i64).collect::<Option<Vec<i64>>>().unwrap_or_default(),
                        None => Vec::new(),
                    })
                    .collect()
            },
        );
        let t = serde_json::from_str::<Vec<serde_json::Value>>(types)
            .map_or_else(|_| Vec::new(), |v| v.iter().map(|v| v.as_str().unwrap_or_default().to_string()).collect());
        (d, t)
    }

    #[test]
    fn shapes_read_directly_as_serde_reads_them() {
        let dims = [
            "[[2048, 4096], [4096, 1024]]",
            " [ [1,2] , [] ,[3] ] ",
            "[]",
            "[[]]",
            "[[-1, 0, -0, 9223372036854775807, -9223372036854775808]]",
            "[[9223372036854775808]]",
            "[[1.0, 2]]",
            "[[1e3]]",
            "[[01]]",
            "[[1], 2, \"x\", null, [[3]]]",
            "[[1],]",
            "[[1]] x",
            "",
            "[[1, 2]",
            "[[-]]",
            "[[1,\t2],\r\n [3]\x0b\x0c]",
            "[[1,\u{a0}2], [\u{2003}]]",
        ];
        let types = [
            "[\"c10::BFloat16\", \"float\", \"\"]",
            " [ \"a\" ,\"b\" ] ",
            "[]",
            "[\"a\\\"b\", \"c\"]",
            "[\"a\", null, 3]",
            "[\"a\",]",
            "[\"tab\there\"]",
            "",
            "[\"µs\", \"naïve\"]",
        ];
        for d in dims {
            for t in types {
                let s = shapes(d, t);
                assert_eq!((s.dims(), s.types()), by_serde(d, t), "{d:?} {t:?}");
                assert_eq!(s.type_names(), s.types(), "{t:?}");
                assert_eq!(s.compact_dims(), d.split_whitespace().collect::<String>(), "{d:?}");
            }
        }
    }
}
