//! Device properties and distributed info: the per-file metadata we read.
//!
//! Only these named fields are read from the top level of a trace; free-form
//! metadata (environment dumps, user and job names) is never parsed or kept.

use serde::{Deserialize, Serialize};

use crate::lenient::{Num, OptText};

/// One entry of `deviceProperties` (or legacy `computeProperties`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceProperties {
    /// Device ordinal as listed (on ROCm not necessarily the kernels' `device`).
    pub id: Option<i64>,
    /// Marketing name, e.g. `NVIDIA A100-PG509-200` (may be empty on ROCm).
    pub name: Option<String>,
    /// Device memory in bytes.
    pub total_global_mem: Option<u64>,
    /// Compute capability major (gfx major on ROCm).
    pub compute_major: Option<i64>,
    /// Compute capability minor.
    pub compute_minor: Option<i64>,
    /// Streaming multiprocessors (compute units on ROCm).
    pub num_sms: Option<i64>,
}

/// Whether `devices` name the GPU a rank ran on: a device with a name, or with compute units
/// (ROCm may leave the name empty; the catalog knows such a GPU by them).
pub fn records_gpu(devices: &[DeviceProperties]) -> bool {
    name_of(devices).is_some() || devices.iter().any(|d| d.num_sms.is_some())
}

/// The GPU name `devices` record (the first not empty).
pub fn name_of(devices: &[DeviceProperties]) -> Option<&str> {
    devices.iter().filter_map(|d| d.name.as_deref()).find(|n| !n.is_empty())
}

/// `--device` on a rank: the GPU of a rank that records none (a Kineto trace without
/// `deviceProperties`, an Nsight Systems export without `TARGET_INFO_GPU`, either read back
/// from a dataset), every listed device named so. A rank that records its GPU keeps it and
/// says that the option was not applied.
pub(crate) fn name_unrecorded_gpu(trace: &mut crate::rank::RankTrace, device: &DeviceProperties) {
    if records_gpu(&trace.devices) {
        let name = name_of(&trace.devices);
        let what = name.map_or_else(|| "its GPU by its compute units".to_string(), |n| format!("{n:?}"));
        let warning = format!("--device not applied: the trace records {what}");
        if !trace.warnings.contains(&warning) {
            trace.warnings.push(warning);
        }
        return;
    }
    // A CPU-only rank (gloo) ran on no GPU: the option names none for it.
    if trace.devices.is_empty() && trace.gpu_activity().next().is_some() {
        trace.devices.push(device.clone());
    }
    for d in &mut trace.devices {
        *d = DeviceProperties { id: d.id, ..device.clone() };
    }
    // Answered by the option: not said (a dataset keeps them, as recorded).
    trace.warnings.retain(|w| !w.starts_with(crate::nsys::UNRECORDED_GPU));
}

#[derive(Deserialize)]
pub(crate) struct RawDeviceProperties<'a> {
    #[serde(default)]
    id: Num,
    #[serde(default, borrow)]
    name: OptText<'a>,
    /// `None` where the key is missing or null; `Some` of what it holds (perhaps no number).
    #[serde(default, rename = "totalGlobalMem")]
    total_global_mem: Option<Num>,
    #[serde(default, rename = "computeMajor", alias = "major")]
    compute_major: Option<Num>,
    #[serde(default, rename = "computeMinor", alias = "minor")]
    compute_minor: Option<Num>,
    #[serde(default, rename = "numSms", alias = "multiProcessorCount")]
    num_sms: Option<Num>,
}

impl RawDeviceProperties<'_> {
    /// The keys given but holding no whole number at or above zero (`"eighty"`, `-1`, `1.5`):
    /// without a word they would read as missing, and the GPU be matched without them.
    pub(crate) fn unreadable_numbers(&self) -> Vec<&'static str> {
        [
            ("totalGlobalMem", self.total_global_mem),
            ("computeMajor", self.compute_major),
            ("computeMinor", self.compute_minor),
            ("numSms", self.num_sms),
        ]
        .into_iter()
        .filter(|(_, v)| v.is_some_and(|n| n.as_i64().is_none_or(|i| i < 0)))
        .map(|(k, _)| k)
        .collect()
    }
}

impl From<RawDeviceProperties<'_>> for DeviceProperties {
    fn from(r: RawDeviceProperties<'_>) -> Self {
        DeviceProperties {
            id: r.id.as_i64(),
            name: r.name.into_string(),
            total_global_mem: r.total_global_mem.and_then(Num::as_i64).and_then(|v| u64::try_from(v).ok()),
            compute_major: r.compute_major.and_then(Num::as_i64).filter(|&v| v >= 0),
            compute_minor: r.compute_minor.and_then(Num::as_i64).filter(|&v| v >= 0),
            num_sms: r.num_sms.and_then(Num::as_i64).filter(|&v| v >= 0),
        }
    }
}

/// A process group from `distributedInfo.pg_config`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessGroup {
    /// `pg_name` (a number as text, e.g. `"0"`).
    pub name: Option<String>,
    /// `pg_desc` (e.g. `default_pg`), or the 2024 `uid`.
    pub desc: Option<String>,
    /// `pg_size`.
    pub size: Option<i64>,
    /// Global ranks in the group.
    pub ranks: Vec<i64>,
}

/// `distributedInfo`: rank, world size and process groups.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DistributedInfo {
    /// `nccl`, `gloo`, `mtia:hccl,cpu:gloo`, …
    pub backend: Option<String>,
    /// Global rank of this file.
    pub rank: Option<i64>,
    /// Number of ranks in the job.
    pub world_size: Option<i64>,
    /// Process groups, when the trace lists them.
    pub process_groups: Vec<ProcessGroup>,
}

impl DistributedInfo {
    /// `world_size` when it is a positive rank count.
    pub fn positive_world_size(&self) -> Option<u32> {
        self.world_size.and_then(|w| u32::try_from(w).ok()).filter(|&w| w > 0)
    }
}

#[derive(Deserialize)]
pub(crate) struct RawDistributedInfo<'a> {
    #[serde(default, borrow)]
    backend: OptText<'a>,
    /// `None` where the key is missing or null; `Some` of what it holds (perhaps no number).
    #[serde(default)]
    rank: Option<Num>,
    #[serde(default)]
    world_size: Option<Num>,
    #[serde(default, borrow)]
    pg_config: Option<Vec<RawProcessGroup<'a>>>,
}

impl RawDistributedInfo<'_> {
    /// The keys of `rank` and `world_size` given but holding no whole number
    /// (`"abc"`, `1.5`, `true`): without a word they would read as missing.
    pub(crate) fn unreadable_numbers(&self) -> Vec<&'static str> {
        [("rank", self.rank), ("world_size", self.world_size)]
            .into_iter()
            .filter(|(_, v)| v.is_some_and(|n| n.as_i64().is_none()))
            .map(|(k, _)| k)
            .collect()
    }
}

#[derive(Deserialize)]
struct RawProcessGroup<'a> {
    #[serde(default, borrow)]
    pg_name: OptText<'a>,
    #[serde(default, borrow)]
    pg_desc: OptText<'a>,
    #[serde(default, borrow)]
    uid: OptText<'a>,
    #[serde(default)]
    pg_size: Num,
    #[serde(default)]
    ranks: Option<Vec<Num>>,
}

impl From<RawDistributedInfo<'_>> for DistributedInfo {
    fn from(r: RawDistributedInfo<'_>) -> Self {
        DistributedInfo {
            backend: r.backend.into_string(),
            rank: r.rank.and_then(Num::as_i64),
            world_size: r.world_size.and_then(Num::as_i64),
            process_groups: r
                .pg_config
                .unwrap_or_default()
                .into_iter()
                .map(|pg| ProcessGroup {
                    name: pg.pg_name.into_string(),
                    desc: pg.pg_desc.into_string().or_else(|| pg.uid.into_string()),
                    size: pg.pg_size.as_i64(),
                    ranks: pg.ranks.unwrap_or_default().into_iter().filter_map(|n| n.as_i64()).collect(),
                })
                .collect(),
        }
    }
}
