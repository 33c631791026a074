//! Collectives per rank and process group, and what several ranks of one job
//! tell about them: transfer vs wait, and the clock offsets between ranks.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use serde::Serialize;

use super::breakdown::Window;
use super::classify::ActivityClass;
use crate::collective::{Collective, CollectiveArgs, NcclKernelName};
use crate::link::Links;
use crate::rank::RankTrace;

/// Identifies the same collective on every member rank: operation, process
/// group (name and member list when known), size where every member moves
/// the same ([`Instance::matching_bytes`]) and its sequence number among the
/// rank's instances of that operation, group and size. A rank whose trace
/// lacks an instance (a filtered or cut trace) then shifts only the
/// instances of that size: an all-reduce is never paired with one of another size.
pub(crate) type InstanceKey = (Collective, Option<Arc<str>>, Option<Arc<str>>, Option<u64>, u32);

/// One communication kernel.
#[derive(Debug, Clone)]
pub(crate) struct Instance {
    pub(crate) collective: Collective,
    // Shared within a rank: a world group's rank list is kilobytes, repeated on every instance.
    pub(crate) process_group: Option<Arc<str>>,
    pub(crate) pg_ranks: Option<Arc<str>>,
    pub(crate) group_size: Option<i64>,
    pub(crate) bytes: Option<u64>,
    pub(crate) start_ns: i64,
    pub(crate) end_ns: i64,
    pub(crate) seq: u32,
    // Interned within a rank like the groups: a few names over thousands of kernels.
    pub(crate) algo: Option<Arc<str>>,
    pub(crate) proto: Option<Arc<str>>,
    pub(crate) row: u32,
}

impl Instance {
    pub(crate) fn key(&self) -> InstanceKey {
        (self.collective, self.process_group.clone(), self.pg_ranks.clone(), self.matching_bytes(), self.seq)
    }

    /// The size every member of the instance moves, where the operation
    /// requires one (all-reduce, all-gather, reduce-scatter, broadcast,
    /// reduce); `None` for all-to-all and point-to-point, whose sizes may
    /// differ by rank.
    pub(crate) fn matching_bytes(&self) -> Option<u64> {
        match self.collective {
            Collective::AllReduce | Collective::AllGather | Collective::ReduceScatter | Collective::Broadcast | Collective::Reduce => {
                self.bytes
            }
            _ => None,
        }
    }
}

/// A rank's instances as cached text: each distinct string once (a world
/// group's rank list is kilobytes, on every instance; algorithm and protocol
/// names shared again when read back), then rows.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct CachedInstances {
    strings: Vec<Arc<str>>,
    /// collective, process group, group ranks (indices into `strings`), group
    /// size, bytes, start, end, sequence number, algorithm, protocol (indices
    /// into `strings`), row.
    #[allow(clippy::type_complexity)]
    rows: Vec<(Collective, Option<u32>, Option<u32>, Option<i64>, Option<u64>, i64, i64, u32, Option<u32>, Option<u32>, u32)>,
}

impl CachedInstances {
    pub(crate) fn of(instances: &[Instance]) -> CachedInstances {
        let mut strings: Vec<Arc<str>> = Vec::new();
        let mut index: HashMap<Arc<str>, u32> = HashMap::default();
        let mut id = |s: &Option<Arc<str>>| {
            s.as_ref().map(|s| {
                *index.entry(s.clone()).or_insert_with(|| {
                    strings.push(s.clone());
                    strings.len() as u32 - 1
                })
            })
        };
        let rows = instances
            .iter()
            .map(|i| {
                let (pg, ranks, algo, proto) = (id(&i.process_group), id(&i.pg_ranks), id(&i.algo), id(&i.proto));
                (i.collective, pg, ranks, i.group_size, i.bytes, i.start_ns, i.end_ns, i.seq, algo, proto, i.row)
            })
            .collect();
        CachedInstances { strings, rows }
    }

    /// The instances back; `None` when a string index is out of range.
    pub(crate) fn into_instances(self) -> Option<Vec<Instance>> {
        let get = |k: Option<u32>| -> Option<Option<Arc<str>>> {
            match k {
                None => Some(None),
                Some(k) => self.strings.get(k as usize).cloned().map(Some),
            }
        };
        self.rows
            .iter()
            .map(|r| {
                Some(Instance {
                    collective: r.0,
                    process_group: get(r.1)?,
                    pg_ranks: get(r.2)?,
                    group_size: r.3,
                    bytes: r.4,
                    start_ns: r.5,
                    end_ns: r.6,
                    seq: r.7,
                    algo: get(r.8)?,
                    proto: get(r.9)?,
                    row: r.10,
                })
            })
            .collect()
    }
}

/// What the CPU ops around a communication kernel's launch say (traces
/// before May 2024 carry no collective arguments on kernels): the operation
/// from an enclosing `nccl:*` / `c10d::*` op name, the size from its largest
/// input tensor.
fn from_launching_ops(trace: &RankTrace, links: &Links, row: usize) -> (Option<Collective>, Option<u64>) {
    let Some(&op) = links.launch_op.get(row) else { return (None, None) };
    for r in links.ancestors(op, 4) {
        let name = trace.name(r);
        if Collective::is_torch_op(name) {
            let bytes = trace.op_shapes_of(r).and_then(|s| s.largest_input_bytes());
            let collective = Collective::from_name(name);
            if collective.is_some() || bytes.is_some() {
                return (collective, bytes);
            }
        }
    }
    (None, None)
}

/// The collective arguments of the `record_param_comms` op around a kernel's launch: where the
/// kernel carries none (PyTorch of April 2024 put them on the CPU op alone), its own.
fn launching_op_args<'t>(trace: &'t RankTrace, links: &Links, row: usize) -> Option<&'t CollectiveArgs> {
    let &op = links.launch_op.get(row)?;
    links.ancestors(op, 4).find_map(|r| trace.collective_args_of(r).filter(|a| !a.is_bookkeeping()))
}

/// The communication kernels of a rank in time order. The operation comes
/// from the kernel's collective arguments, else its name, else the CPU op
/// that launched it; the size from the arguments (`In/Out msg nelems` ×
/// dtype), else from that op's input shapes.
pub(crate) fn instances(trace: &RankTrace, classes: &[Option<ActivityClass>], links: &Links) -> Vec<Instance> {
    super::facts::count(super::facts::Fact::Instances);
    let ev = &trace.events;
    let groups = trace.distributed.as_ref().map(|d| d.process_groups.as_slice()).unwrap_or_default();
    let mut rows: Vec<usize> = classes.iter().enumerate().filter(|(_, c)| **c == Some(ActivityClass::Comm)).map(|(i, _)| i).collect();
    rows.sort_by_key(|&i| (ev.ts_ns.get(i).copied().unwrap_or(0), i));
    let mut seq: HashMap<(Collective, Option<Arc<str>>, Option<Arc<str>>, Option<u64>), u32> = HashMap::default();
    let mut interned: HashMap<String, Arc<str>> = HashMap::default();
    let mut out = Vec::with_capacity(rows.len());
    for i in rows {
        let args = trace.collective_args_of(i).filter(|a| !a.is_bookkeeping()).or_else(|| launching_op_args(trace, links, i));
        let from_args = args.and_then(|a| a.collective());
        let parsed = NcclKernelName::parse(trace.name(i));
        let kernel = match &parsed {
            Some(k) => k.collective,
            None => super::classify::comm_kernel_collective(trace.name(i)),
        };
        let bytes = args.and_then(|a| a.message_bytes());
        let (op_collective, op_bytes) =
            if from_args.is_none() || bytes.is_none() { from_launching_ops(trace, links, i) } else { (None, None) };
        // All-to-all runs as SendRecv kernels; the op that launched them names it.
        let kernel_first = kernel.filter(|c| !matches!(c, Collective::Unknown | Collective::SendRecv));
        let collective = from_args.or(kernel_first).or(op_collective).or(kernel).unwrap_or(Collective::Unknown);
        let pg_name = args.and_then(|a| a.pg_name.clone());
        let process_group = match (pg_name.as_deref(), args.and_then(|a| a.pg_desc.as_deref())) {
            (Some(n), Some(d)) if !d.is_empty() && d != n => Some(format!("{n} ({d})")),
            (Some(n), _) => Some(n.to_string()),
            (None, Some(d)) => Some(d.to_string()),
            (None, None) => None,
        };
        // Looked up by reference: a world group's rank list is copied once per rank, not per kernel.
        let mut shared = |s: &str| -> Arc<str> {
            if let Some(a) = interned.get(s) {
                return a.clone();
            }
            let a: Arc<str> = Arc::from(s);
            interned.insert(s.to_string(), a.clone());
            a
        };
        let process_group = process_group.as_deref().map(&mut shared);
        let pg_ranks = args.and_then(|a| a.pg_ranks.as_deref()).filter(|r| *r != "[]").map(&mut shared);
        let group_size = args.and_then(|a| a.group_size).or_else(|| {
            let pg = groups.iter().find(|g| g.name.is_some() && g.name == pg_name)?;
            pg.size.or(Some(pg.ranks.len() as i64)).filter(|&n| n > 0)
        });
        let mut inst = Instance {
            collective,
            process_group,
            pg_ranks,
            group_size,
            bytes: bytes.or(op_bytes),
            start_ns: ev.ts_ns.get(i).copied().unwrap_or(0),
            end_ns: ev.end_ns(i),
            seq: 0,
            algo: parsed.as_ref().and_then(|k| k.algo.as_deref()).map(&mut shared),
            proto: parsed.as_ref().and_then(|k| k.proto.as_deref()).map(&mut shared),
            row: i as u32,
        };
        let counter = seq.entry((collective, inst.process_group.clone(), inst.pg_ranks.clone(), inst.matching_bytes())).or_insert(0);
        inst.seq = *counter;
        *counter += 1;
        out.push(inst);
    }
    out
}

/// Collectives of one type, process group and group size on one rank, inside the window.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CollectiveStats {
    /// `all_reduce`, `all_gather`, … (`unknown` when the trace does not say).
    pub collective: Collective,
    /// Process group name (and description), when the trace gives it.
    pub process_group: Option<String>,
    /// Ranks in the group, when known.
    pub group_size: Option<i64>,
    /// Kernels.
    pub count: u64,
    /// Σ kernel duration, µs.
    pub total_us: f64,
    /// Mean kernel duration, µs.
    pub mean_us: f64,
    /// Σ message bytes over the kernels whose size is known.
    pub bytes: Option<u64>,
    /// Kernels whose size is known.
    pub sized_count: u64,
    /// Algorithm bandwidth Σbytes / Σtime over the sized kernels, GB/s.
    pub algbw_gbps: Option<f64>,
    /// Bus bandwidth: algbw × the nccl-tests factor for the group size, GB/s.
    pub busbw_gbps: Option<f64>,
    /// Kernels matched with the same collective on other ranks of the job.
    pub matched: u64,
    /// Σ transfer time of matched kernels (min duration over the ranks), µs.
    pub transfer_us: Option<f64>,
    /// Σ wait time of matched kernels (duration − transfer), µs.
    pub wait_us: Option<f64>,
}

/// Collectives of one rank in window `w` by type, process group and size.
/// `matched(i)` gives, for instance `i` when it was matched across ranks, its
/// transfer time (the minimum duration over the ranks) and its ranks.
/// Bandwidths use the transfer time where the instance was matched across
/// ranks (waiting is not moving bytes); a group without `Group size` args
/// takes its size from [`crate::collective::inferred_group_size`].
pub(crate) fn collective_stats(
    instances: &[Instance],
    w: Window,
    matched: impl Fn(usize) -> Option<(i64, usize)>,
    world: i64,
) -> Vec<CollectiveStats> {
    type Key = (Collective, Option<String>, Option<i64>);
    #[derive(Default)]
    struct Acc {
        count: u64,
        total: i64,
        bytes: u64,
        sized: u64,
        sized_time: i64,
        matched: u64,
        transfer: i64,
        wait: i64,
    }
    let mut acc: BTreeMap<Key, Acc> = BTreeMap::new();
    for (i, inst) in instances.iter().enumerate().filter(|(_, x)| w.starts_inside(x.start_ns)) {
        let matched = matched(i);
        let group_size = inst
            .group_size
            .or_else(|| crate::collective::inferred_group_size(inst.process_group.as_deref(), world, matched.map_or(1, |m| m.1)));
        let a = acc.entry((inst.collective, inst.process_group.as_deref().map(str::to_string), group_size)).or_default();
        let d = inst.end_ns - inst.start_ns;
        let transfer = matched.map(|m| m.0);
        a.count += 1;
        a.total = a.total.saturating_add(d);
        if let Some(b) = inst.bytes {
            a.bytes = a.bytes.saturating_add(b);
            a.sized += 1;
            a.sized_time = a.sized_time.saturating_add(transfer.unwrap_or(d));
        }
        if let Some(t) = transfer {
            a.matched += 1;
            a.transfer = a.transfer.saturating_add(t);
            a.wait = a.wait.saturating_add(d - t);
        }
    }
    acc.into_iter()
        .map(|((collective, process_group, group_size), a)| {
            let algbw = (a.sized > 0 && a.sized_time > 0).then(|| a.bytes as f64 / a.sized_time as f64);
            CollectiveStats {
                collective,
                process_group,
                group_size,
                count: a.count,
                total_us: a.total as f64 / 1000.0,
                mean_us: a.total as f64 / 1000.0 / a.count.max(1) as f64,
                bytes: (a.sized > 0).then_some(a.bytes),
                sized_count: a.sized,
                algbw_gbps: algbw,
                busbw_gbps: algbw.and_then(|bw| Some(bw * collective.bus_factor_in(group_size)?)),
                matched: a.matched,
                transfer_us: (a.matched > 0).then(|| a.transfer as f64 / 1000.0),
                wait_us: (a.matched > 0).then(|| a.wait as f64 / 1000.0),
            }
        })
        .collect()
}

/// A rank the others waited for at collectives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Straggler {
    /// Global rank.
    pub rank: u32,
    /// Matched collective instances at which it arrived last.
    pub times_last: usize,
    /// Σ over those instances and the other ranks of how long each waited for
    /// it (their kernel time beyond the instance's transfer, the collectives
    /// table's wait), GPU-µs.
    pub wait_caused_us: f64,
    /// That wait as GPU-hours of the whole job (with `--job-gpus`/`--job-hours`).
    pub wait_caused_gpu_hours: Option<f64>,
}

/// One row of the per-message-size table (the nccl-tests view).
#[derive(Debug, Clone, PartialEq)]
pub struct MessageSizeRow {
    /// Collective type.
    pub collective: &'static str,
    /// Ranks in the group.
    pub group_size: i64,
    /// Bytes per rank.
    pub bytes: u64,
    /// Kernels over all ranks.
    pub count: u64,
    /// Their time, µs (transfer time where matched across ranks).
    pub time_us: f64,
    /// Bus bandwidth over that time, GB/s.
    pub busbw_gbps: Option<f64>,
}

/// Collectives by type, group size and message size, over every rank.
pub fn message_size_rows(job: &crate::job::Job, classifier: &super::Classifier) -> Vec<MessageSizeRow> {
    message_size_rows_of(&collective_samples(job, classifier))
}

/// [`message_size_rows`] of a job's matched communication kernels.
pub fn message_size_rows_of(samples: &[CollectiveSample]) -> Vec<MessageSizeRow> {
    let mut by: BTreeMap<(&'static str, i64, u64), (u64, f64, Option<f64>)> = BTreeMap::new();
    for c in samples {
        let (Some(bytes), Some(n)) = (c.bytes, c.group_size) else { continue };
        let t = c.transfer_us.unwrap_or(c.dur_us);
        let e = by.entry((c.collective.as_str(), n, bytes)).or_insert((0, 0.0, c.collective.bus_factor(n)));
        e.0 += 1;
        e.1 += t;
    }
    by.into_iter()
        .map(|((collective, group_size, bytes), (count, time_us, factor))| MessageSizeRow {
            collective,
            group_size,
            bytes,
            count,
            time_us,
            busbw_gbps: factor.filter(|_| time_us > 0.0).map(|k| k * bytes as f64 * count as f64 / time_us / 1e3),
        })
        .collect()
}

/// Clock offsets that make matched collectives end together (least squares).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClockAlignment {
    /// Offset to add to each rank's clock, µs (the first rank is 0), in rank order.
    pub offsets_us: Vec<f64>,
    /// Root-mean-square of the remaining end-time differences, µs.
    pub residual_us: f64,
    /// Collective instances used.
    pub instances: usize,
    /// Why the matched collectives may pair unrelated kernels, where they do not end together
    /// even aligned ([`super::JobCollectives::doubtful`]): these offsets and the stragglers are
    /// then not to be trusted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doubtful: Option<String>,
}

/// Fits offsets o_r minimising Σ (end_rk + o_r − c_k)² by alternating means
/// (the problem is a connected least-squares graph; this converges to its
/// solution), with o_0 = 0. `None` without matched instances.
pub(crate) fn align_clocks(ends: &[(usize, usize, i64)], ranks: usize) -> Option<ClockAlignment> {
    if ends.is_empty() || ranks < 2 {
        return None;
    }
    let n_inst = ends.iter().map(|e| e.0).max().map_or(0, |m| m + 1);
    // Work relative to each instance's first end to keep magnitudes small.
    let mut reference = vec![i64::MAX; n_inst];
    for &(k, _, e) in ends {
        if let Some(r) = reference.get_mut(k) {
            *r = (*r).min(e);
        }
    }
    let rel: Vec<(usize, usize, f64)> = ends.iter().map(|&(k, r, e)| (k, r, (e - reference.get(k).copied().unwrap_or(e)) as f64)).collect();
    let mut offset = vec![0.0f64; ranks];
    let mut center = vec![0.0f64; n_inst];
    for _ in 0..200 {
        let mut sum = vec![0.0f64; n_inst];
        let mut cnt = vec![0usize; n_inst];
        for &(k, r, e) in &rel {
            if let (Some(s), Some(c)) = (sum.get_mut(k), cnt.get_mut(k)) {
                *s += e + offset.get(r).copied().unwrap_or(0.0);
                *c += 1;
            }
        }
        for (c, (s, n)) in center.iter_mut().zip(sum.iter().zip(&cnt)) {
            *c = if *n > 0 { s / *n as f64 } else { 0.0 };
        }
        let mut osum = vec![0.0f64; ranks];
        let mut ocnt = vec![0usize; ranks];
        for &(k, r, e) in &rel {
            if let (Some(s), Some(c)) = (osum.get_mut(r), ocnt.get_mut(r)) {
                *s += center.get(k).copied().unwrap_or(0.0) - e;
                *c += 1;
            }
        }
        let base = if ocnt.first().copied().unwrap_or(0) > 0 { osum[0] / ocnt[0] as f64 } else { 0.0 };
        let mut change = 0.0f64;
        for (r, o) in offset.iter_mut().enumerate() {
            let new = if ocnt[r] > 0 { osum[r] / ocnt[r] as f64 - base } else { 0.0 };
            change = change.max((new - *o).abs());
            *o = new;
        }
        if change < 0.5 {
            break;
        }
    }
    let mut sq = 0.0;
    for &(k, r, e) in &rel {
        let d = e + offset.get(r).copied().unwrap_or(0.0) - center.get(k).copied().unwrap_or(0.0);
        sq += d * d;
    }
    Some(ClockAlignment {
        offsets_us: offset.iter().map(|o| o / 1000.0).collect(),
        residual_us: (sq / rel.len() as f64).sqrt() / 1000.0,
        instances: n_inst,
        doubtful: None,
    })
}

/// A bandwidth in GB/s as tables print it: two decimals, or three significant digits below
/// 0.01 (a measured 1e-4 GB/s had read 0.00).
pub fn bandwidth_text(gbps: f64) -> String {
    if gbps == 0.0 || gbps.abs() >= 0.01 || !gbps.is_finite() { format!("{gbps:.2}") } else { format!("{gbps:.2e}") }
}

#[cfg(test)]
mod tests {
    use super::align_clocks;

    #[test]
    fn recovers_known_offsets() {
        // Three ranks, clocks shifted by 0, +5 µs, −3 µs; ten collectives.
        let shifts = [0i64, 5_000, -3_000];
        let mut ends = Vec::new();
        for k in 0..10 {
            for (r, s) in shifts.iter().enumerate() {
                ends.push((k, r, 1_000_000 * k as i64 + s));
            }
        }
        let a = align_clocks(&ends, 3).unwrap();
        assert!((a.offsets_us[1] + 5.0).abs() < 0.01, "{a:?}");
        assert!((a.offsets_us[2] - 3.0).abs() < 0.01, "{a:?}");
        assert!(a.residual_us < 0.01);
    }
}

/// One communication kernel on one rank, with what the other ranks of the job
/// tell about it: the material of link calibration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectiveSample {
    /// Global rank of the kernel.
    pub rank: u32,
    /// The operation.
    pub collective: Collective,
    /// Process group name (and description), when known.
    pub process_group: Option<String>,
    /// Member ranks as written in the trace (`"[0, 1]"`), when known.
    pub pg_ranks: Option<Arc<str>>,
    /// Ranks in the group, when known.
    pub group_size: Option<i64>,
    /// Whether `group_size` was inferred (no `Group size` args): the world
    /// for the default group, else the ranks the instance was matched on.
    pub group_size_inferred: bool,
    /// Message size in bytes (nccl-tests convention), when known.
    pub bytes: Option<u64>,
    /// NCCL algorithm from the kernel name (`RING`, `TREE`, …).
    pub algo: Option<Arc<str>>,
    /// NCCL protocol from the kernel name (`LL`, `LL128`, `SIMPLE`).
    pub proto: Option<Arc<str>>,
    /// Kernel start, ns on the rank's clock.
    pub start_ns: i64,
    /// Kernel duration, µs.
    pub dur_us: f64,
    /// Shortest duration of this instance over the ranks that have it, µs
    /// (`None` when no other rank of the job has it).
    pub transfer_us: Option<f64>,
    /// Ranks of the job on which this instance was found.
    pub matched_ranks: usize,
    /// The kernel's row in its rank's trace.
    pub row: u32,
    /// Job-wide id shared by the samples of one collective instance on
    /// different ranks (`None` when no other rank has it).
    pub instance: Option<u32>,
}

/// The collective instances of one rank (its communication kernels with
/// their type, group, size and sequence number): what matching across ranks
/// ([`super::JobCollectives`]) needs of it, small enough to keep for
/// thousands of ranks. Made by [`super::RankContext::collectives`].
#[derive(Debug, Clone, Default)]
pub struct RankCollectives {
    rank: u32,
    declared_world: Option<u32>,
    instances: Vec<Instance>,
}

impl RankCollectives {
    pub(crate) fn new(rank: u32, declared_world: Option<u32>, instances: Vec<Instance>) -> RankCollectives {
        RankCollectives { rank, declared_world, instances }
    }

    /// The communication kernels, in time order.
    pub(crate) fn rows(&self) -> &[Instance] {
        &self.instances
    }

    pub(crate) fn into_rows(self) -> Vec<Instance> {
        self.instances
    }

    /// The rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The world size its trace declares (`distributedInfo.world_size`), if any.
    pub fn declared_world(&self) -> Option<u32> {
        self.declared_world
    }
}

/// Every communication kernel of every rank of `job`, matched across ranks
/// (see [`super::JobCollectives::samples`]).
pub fn collective_samples(job: &crate::job::Job, classifier: &super::Classifier) -> Vec<CollectiveSample> {
    let ranks = job.ranks.iter().map(|r| super::RankContext::new(r, classifier).into_collectives());
    super::JobCollectives::new(ranks, crate::job::unread_ranks(&job.failures)).into_samples()
}

/// The sample of instance `inst` of rank `rank`, found on `matched` ranks of
/// a job of `world` ranks with the shortest duration `min_ns` over them and
/// job-wide id `id`.
pub(crate) fn sample(rank: u32, inst: Instance, matched: usize, min_ns: i64, id: u32, world: i64) -> CollectiveSample {
    // Without `Group size` args (older PyTorch): the default group is
    // the whole world; a named group spans the ranks it was matched on.
    let inferred = match inst.group_size {
        Some(_) => None,
        None => crate::collective::inferred_group_size(inst.process_group.as_deref(), world, matched),
    };
    CollectiveSample {
        rank,
        collective: inst.collective,
        process_group: inst.process_group.as_deref().map(str::to_string),
        pg_ranks: inst.pg_ranks,
        group_size: inst.group_size.or(inferred),
        group_size_inferred: inferred.is_some(),
        bytes: inst.bytes,
        algo: inst.algo,
        proto: inst.proto,
        start_ns: inst.start_ns,
        dur_us: (inst.end_ns - inst.start_ns) as f64 / 1000.0,
        transfer_us: (matched >= 2).then(|| min_ns as f64 / 1000.0),
        matched_ranks: matched,
        row: inst.row,
        instance: (matched >= 2).then_some(id),
    }
}
