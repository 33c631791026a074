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
        self.input_dims.split_whitespace().collect()
    }

    /// `Input Dims` as one shape per input; inputs that are not a flat list of
    /// integers (scalars, TensorLists, `[]`) give an empty shape.
    pub fn dims(&self) -> Vec<Vec<i64>> {
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
    let Ok(inputs) = serde_json::from_str::<Vec<serde_json::Value>>(json) else { return Vec::new() };
    inputs.iter().map(|v| v.as_str().unwrap_or_default().to_string()).collect()
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
}

impl RankTrace {
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
        self.devices.iter().filter_map(|d| d.name.as_deref()).find(|n| !n.is_empty())
    }
}
