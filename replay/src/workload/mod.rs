//! Analytical workloads (MAD-Max's role, DESIGN §5): a model, a
//! parallelization plan and a system become a compute lane and a
//! communication lane of timed operations with dependencies between them —
//! a [`Graph`] for the same simulator that replays measured traces.
//!
//! [`madmax`] reads MAD-Max's model / system / task files and builds their
//! timelines with that model's simplifications; [`llm`] is tracecast's own
//! transformer model (attention's quadratic term, SwiGLU, α-β collectives,
//! calibrated efficiencies, memory per GPU, inference); [`search`] ranks
//! plans.

pub mod carry;
pub mod dlrm;
pub mod llm;
pub mod madmax;
pub mod search;
pub mod validate;

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::sim::{At, Graph, Schedule, TaskId, simulate};

/// What an operation is, for the totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// Matrix multiplies (and attention's score / context products).
    Gemm,
    /// Embedding lookups.
    Embedding,
    /// Norms, activations, residuals, KV-cache reads: HBM-bound work.
    MemoryBound,
    /// Attention's score and context products (flash attention).
    Attention,
    /// All-to-all.
    AllToAll,
    /// All-reduce.
    AllReduce,
    /// All-gather.
    AllGather,
    /// Reduce-scatter.
    ReduceScatter,
    /// Pipeline point-to-point transfers.
    SendRecv,
}

/// Every kind, in declaration order (`kind as usize` indexes it).
const KINDS: [OpKind; 9] = [
    OpKind::Gemm,
    OpKind::Embedding,
    OpKind::MemoryBound,
    OpKind::Attention,
    OpKind::AllToAll,
    OpKind::AllReduce,
    OpKind::AllGather,
    OpKind::ReduceScatter,
    OpKind::SendRecv,
];

impl OpKind {
    /// Stable name in outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Gemm => "gemm",
            OpKind::Embedding => "embedding",
            OpKind::MemoryBound => "memory_bound",
            OpKind::Attention => "attention",
            OpKind::AllToAll => "all_to_all",
            OpKind::AllReduce => "all_reduce",
            OpKind::AllGather => "all_gather",
            OpKind::ReduceScatter => "reduce_scatter",
            OpKind::SendRecv => "send_recv",
        }
    }

    /// Whether this runs on the compute lane.
    pub fn is_compute(self) -> bool {
        matches!(self, OpKind::Gemm | OpKind::Embedding | OpKind::MemoryBound | OpKind::Attention)
    }
}

/// An operation's name: text, or a block of a layer (formatted only when shown,
/// so that a search over thousands of plans allocates no strings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Label {
    /// A name.
    Text(String),
    /// `{what}{layer}_{pass}`.
    Layer(&'static str, u32, &'static str),
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Label::Text(s) => f.write_str(s),
            Label::Layer(what, l, pass) => write!(f, "{what}{l}_{pass}"),
        }
    }
}

/// Identifies an operation for dependencies.
pub type Key = u64;

/// The key of a name.
pub fn key(name: &str) -> Key {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    name.hash(&mut h);
    h.finish()
}

/// One timed operation.
#[derive(Debug, Clone)]
pub struct Op {
    /// Name (`Attn3_f`, `TransformerFC3_b_c_wg_rs`, …).
    pub name: Label,
    /// Its kind (of the first part).
    pub kind: OpKind,
    /// Duration, seconds.
    pub dur_s: f64,
    /// A block of several kinds run back to back (GEMM, attention, norm):
    /// the time of each, for the totals. Unused slots have zero time.
    pub parts: [(OpKind, f64); 3],
    /// The lane it ran on (0 compute, 1 communication, 2 data-parallel communication,
    /// 3 pipeline sends and receives).
    pub lane: u8,
}

/// The lanes being built: operations are appended in program order; each
/// waits for the previous one on its lane and for its named dependencies
/// among the operations already added.
#[derive(Debug, Clone, Default)]
pub struct Lanes {
    ops: Vec<Op>,
    graph: Graph,
    by_key: FxHashMap<Key, TaskId>,
    last: [Option<TaskId>; LANES],
    /// Tasks every next operation waits for (a barrier between passes).
    barrier: Vec<TaskId>,
    barrier_used: [bool; LANES],
    /// How much slower compute runs while communication runs beside it (0: not at all).
    contention: f64,
}

/// Which lane an operation runs on: compute, the communication that compute
/// waits for (tensor, context and expert parallelism), the data-parallel
/// collectives (FSDP gathers, gradient reduction), which PyTorch runs on their
/// own process group's NCCL stream, or the pipeline's sends and receives
/// (Megatron's `batch_isend_irecv` on the pipeline group's communicator), each
/// concurrently with the others (contention for links and SMs is not modelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// By the operation's kind: compute, or the communication lane.
    ByKind,
    /// The data-parallel communication lane.
    DataParallel,
    /// The pipeline's point-to-point lane.
    Pipeline,
}

/// Lanes: compute, communication, data-parallel communication, pipeline transfers.
const LANES: usize = 4;

fn lane_index(kind: OpKind, lane: Lane) -> usize {
    match lane {
        _ if kind.is_compute() => 0,
        Lane::ByKind => 1,
        Lane::DataParallel => 2,
        Lane::Pipeline => 3,
    }
}

impl Lanes {
    /// Room for `ops` operations.
    pub fn with_capacity(ops: usize) -> Lanes {
        let mut l = Lanes::default();
        l.ops.reserve(ops);
        l.graph.dur_ns.reserve(ops);
        l.graph.release_ns.reserve(ops);
        l.graph.edges.reserve(3 * ops);
        l.by_key.reserve(ops);
        l
    }

    /// Appends an operation; `deps` that name no earlier operation are ignored.
    pub fn add(&mut self, name: impl Into<String>, kind: OpKind, dur_s: f64, deps: &[String]) -> TaskId {
        let name = name.into();
        let deps: Vec<Key> = deps.iter().map(|d| key(d)).collect();
        self.add_keyed(key(&name), Label::Text(name), kind, dur_s, &deps)
    }

    /// [`Lanes::add`] with keys instead of names.
    pub fn add_keyed(&mut self, k: Key, name: Label, kind: OpKind, dur_s: f64, deps: &[Key]) -> TaskId {
        self.add_keyed_on(Lane::ByKind, k, name, kind, dur_s, deps)
    }

    /// [`Lanes::add_keyed`] on `lane`.
    pub fn add_keyed_on(&mut self, lane: Lane, k: Key, name: Label, kind: OpKind, dur_s: f64, deps: &[Key]) -> TaskId {
        let id = self.graph.task((dur_s * 1e9).round() as i64, 0);
        let lane = lane_index(kind, lane);
        if let Some(prev) = self.last[lane] {
            self.graph.edge(prev, At::End, id, At::Start, 0);
        }
        if !self.barrier_used[lane] {
            for &b in &self.barrier {
                self.graph.edge(b, At::End, id, At::Start, 0);
            }
            self.barrier_used[lane] = true;
        }
        for d in deps {
            if let Some(&from) = self.by_key.get(d) {
                self.graph.edge(from, At::End, id, At::Start, 0);
            }
        }
        self.last[lane] = Some(id);
        self.by_key.insert(k, id);
        self.ops.push(Op { name, kind, dur_s, parts: [(kind, dur_s), (kind, 0.0), (kind, 0.0)], lane: lane as u8 });
        id
    }

    /// A block of up to three kinds of work run back to back on one lane
    /// (they must share the lane).
    pub fn add_block(&mut self, k: Key, name: Label, parts: [(OpKind, f64); 3], deps: &[Key]) -> TaskId {
        let total = parts.iter().map(|p| p.1).sum();
        let id = self.add_keyed(k, name, parts[0].0, total, deps);
        if let Some(op) = self.ops.last_mut() {
            op.parts = parts;
        }
        id
    }

    /// The next operation on each lane starts after everything so far has
    /// ended (forward pass, then backward pass).
    pub fn barrier(&mut self) {
        self.barrier = self.last.iter().flatten().copied().collect();
        self.barrier_used = [false; LANES];
    }

    /// Compute that runs while communication kernels run beside it takes
    /// `slowdown` longer per unit of that overlap (0.189: 18.9 % — see
    /// [`llm::DEFAULT_OVERLAP_SLOWDOWN`]): the collectives' kernels occupy SMs
    /// and HBM bandwidth the compute kernels would use. Default 0 (MAD-Max's
    /// two-stream overlap, where concurrent communication costs compute nothing).
    pub fn set_contention(&mut self, slowdown: f64) {
        self.contention = slowdown.max(0.0);
    }

    /// Runs the simulator over the lanes. With contention (see
    /// [`Lanes::set_contention`]), a second pass: each compute operation is
    /// lengthened by the slowdown × the time communication ran under it in the
    /// first pass, and the lanes are simulated again.
    pub fn simulate(mut self) -> Timeline {
        let mut schedule = simulate(&self.graph);
        if self.contention > 0.0 && self.contend(&schedule) {
            schedule = simulate(&self.graph);
        }
        Timeline { ops: self.ops, schedule }
    }

    /// Lengthens the compute operations that `schedule` overlapped with
    /// communication; whether any changed.
    fn contend(&mut self, schedule: &Schedule) -> bool {
        // The union of the communication intervals.
        let comm: Vec<(i64, i64)> = self
            .ops
            .iter()
            .zip(schedule.start_ns.iter().zip(&schedule.end_ns))
            .filter(|(op, _)| !op.kind.is_compute())
            .map(|(_, (&s, &e))| (s, e))
            .collect();
        let comm = tracecast_ingest::analysis::interval::IntervalSet::union(comm);
        if comm.spans().is_empty() {
            return false;
        }
        let mut changed = false;
        for (i, op) in self.ops.iter_mut().enumerate() {
            let (Some(&s), Some(&e)) = (schedule.start_ns.get(i), schedule.end_ns.get(i)) else { continue };
            if !op.kind.is_compute() || e <= s {
                continue;
            }
            let overlap = comm.measure(s, e);
            if overlap <= 0 {
                continue;
            }
            let extra = (self.contention * overlap as f64).round() as i64;
            let Some(d) = self.graph.dur_ns.get_mut(i) else { continue };
            let before = *d;
            *d += extra;
            if before > 0 {
                let k = *d as f64 / before as f64;
                op.dur_s *= k;
                for p in &mut op.parts {
                    p.1 *= k;
                }
            }
            changed = true;
        }
        changed
    }
}

/// Operations with their simulated start and end.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// The operations, in program order.
    pub ops: Vec<Op>,
    /// Their schedule (task i is `ops[i]`).
    pub schedule: Schedule,
}

/// Times of an iteration: compute is the compute lane's busy time, exposed
/// communication the communication with no compute under it (the one
/// definition of traces and replays, [`Timeline::exposed_comm_ms`]).
#[derive(Debug, Clone, Default, Serialize)]
pub struct IterationTimes {
    /// Iteration (step) time, ms.
    pub iteration_ms: f64,
    /// Compute lane busy time, ms.
    pub compute_ms: f64,
    /// Communication lane busy time, ms.
    pub comm_ms: f64,
    /// Communication with no compute under it (∪comm − ∪comm ∩ ∪compute), ms.
    pub exposed_comm_ms: f64,
    /// Pipeline bubble (stages idle at the start and end of a 1F1B schedule), ms.
    pub bubble_ms: f64,
    /// Communication hidden under compute, ms.
    pub overlapped_comm_ms: f64,
    /// Time per kind (`gemm`, `embedding`, `all_gather`, …), ms.
    pub by_kind_ms: BTreeMap<&'static str, f64>,
    /// Time of the software stack carried from a measured run (`project
    /// --from`), in the iteration beside what the model prices, ms.
    #[serde(skip_serializing_if = "is_zero")]
    pub stack_ms: f64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl IterationTimes {
    /// Compute, communication and the per-kind times multiplied by `k` (a
    /// pipeline stage's share of the timeline they were measured on).
    pub fn scale(&mut self, k: f64) {
        for v in self.by_kind_ms.values_mut() {
            *v *= k;
        }
        self.compute_ms *= k;
        self.comm_ms *= k;
    }
}

impl Timeline {
    /// Totals of the simulated iteration.
    pub fn times(&self) -> IterationTimes {
        let mut t = IterationTimes { iteration_ms: self.span_ms(), ..Default::default() };
        // Summed per kind in an array (a search calls this thousands of times), then named.
        let mut per_kind = [0.0f64; KINDS.len()];
        for op in &self.ops {
            for &(kind, dur) in op.parts.iter().filter(|p| p.1 > 0.0) {
                per_kind[kind as usize] += dur * 1e3;
            }
        }
        for (kind, ms) in KINDS.iter().zip(per_kind) {
            if ms > 0.0 {
                t.by_kind_ms.insert(kind.as_str(), ms);
                if kind.is_compute() {
                    t.compute_ms += ms;
                } else {
                    t.comm_ms += ms;
                }
            }
        }
        t.exposed_comm_ms = self.exposed_comm_ms();
        t.overlapped_comm_ms = (t.comm_ms - t.exposed_comm_ms).max(0.0);
        t
    }

    /// Communication with no compute under it, ms — the same definition and
    /// code as the breakdown of traces and of replays (∪comm − ∪comm ∩ ∪compute,
    /// `ingest::analysis::Breakdown`).
    pub fn exposed_comm_ms(&self) -> f64 {
        use tracecast_ingest::analysis::interval::IntervalSet;
        // The two lanes' unions and their intersection, as `Breakdown::from_sets` measures them
        // (only the two sets it needs: a search calls this for every plan).
        let (mut compute, mut comm) = (Vec::with_capacity(self.ops.len()), Vec::new());
        for (op, (&s, &e)) in self.ops.iter().zip(self.schedule.start_ns.iter().zip(&self.schedule.end_ns)) {
            if op.kind.is_compute() { compute.push((s, e)) } else { comm.push((s, e)) }
        }
        if comm.is_empty() {
            return 0.0;
        }
        let comm = IntervalSet::union(comm);
        let overlap = comm.intersect(&IntervalSet::union(compute));
        (comm.total() - overlap.total()) as f64 / 1e6
    }

    /// When the lanes' last operation ends, ms.
    pub fn span_ms(&self) -> f64 {
        self.schedule.end_ns.iter().copied().max().unwrap_or(0) as f64 / 1e6
    }

    /// Chrome-trace JSON of the lanes (one process, a track per lane that ran
    /// something), for ui.perfetto.dev. A slice is one operation; where it is
    /// a block of several kinds (a GEMM and its norm), its args give each
    /// kind's time in ms, its category is `block`, and a slice of each kind's time
    /// (one after the other: the model does not order them) sits inside it, so that
    /// the slices' categories add up to the breakdown by kind (a block had taken its
    /// largest kind's category: FA2's forward in a block counted as GEMM time).
    pub fn write_perfetto(&self, w: &mut impl std::io::Write, title: &str) -> std::io::Result<()> {
        write!(w, "{{\"displayTimeUnit\":\"ms\",\"traceEvents\":[")?;
        let name = serde_json::to_string(title).unwrap_or_else(|_| "\"projection\"".into());
        write!(w, "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"args\":{{\"name\":{name}}}}}")?;
        for (tid, lane) in [(0, "compute"), (1, "communication"), (2, "data-parallel communication"), (3, "pipeline communication")] {
            if self.ops.iter().any(|op| op.lane == tid) {
                write!(w, ",{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":{tid},\"args\":{{\"name\":\"{lane}\"}}}}")?;
            }
        }
        for (i, op) in self.ops.iter().enumerate() {
            let (s, e) = (self.schedule.start_ns[i], self.schedule.end_ns[i]);
            let label = op.name.to_string();
            let name = serde_json::to_string(&label).unwrap_or_default();
            let parts: Vec<_> = op.parts.iter().filter(|p| p.1 > 0.0).collect();
            let block = parts.len() > 1;
            write!(
                w,
                ",{{\"ph\":\"X\",\"pid\":0,\"tid\":{},\"name\":{name},\"cat\":\"{}\",\"ts\":{:.3},\"dur\":{:.3},\"args\":{{",
                op.lane,
                if block { "block" } else { op.kind.as_str() },
                s as f64 / 1e3,
                (e - s) as f64 / 1e3
            )?;
            for (k, (kind, dur_s)) in parts.iter().enumerate() {
                let comma = if k > 0 { "," } else { "" };
                write!(w, "{comma}\"{}_ms\":{:.6}", kind.as_str(), dur_s * 1e3)?;
            }
            write!(w, "}}}}")?;
            if block {
                // Each kind's share of the block's scheduled span, one after the other inside it, at
                // whole nanoseconds (the last ends where the block does: rounded apart, a child could
                // end past its parent and break the nesting).
                let total: f64 = parts.iter().map(|p| p.1).sum();
                let (mut done, mut start) = (0.0, s);
                for (k, (kind, dur_s)) in parts.iter().enumerate() {
                    done += dur_s;
                    let end = if k + 1 == parts.len() { e } else { s + ((e - s) as f64 * done / total).round() as i64 };
                    let name = serde_json::to_string(&format!("{label} · {}", kind.as_str())).unwrap_or_default();
                    write!(
                        w,
                        ",{{\"ph\":\"X\",\"pid\":0,\"tid\":{},\"name\":{name},\"cat\":\"{}\",\"ts\":{:.3},\"dur\":{:.3}}}",
                        op.lane,
                        kind.as_str(),
                        start as f64 / 1e3,
                        (end - start) as f64 / 1e3
                    )?;
                    start = end;
                }
            }
        }
        writeln!(w, "]}}")
    }
}

/// Memory per GPU, GB (1e9 bytes).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Memory {
    /// Weights.
    pub weights_gb: f64,
    /// Gradients.
    pub gradients_gb: f64,
    /// Optimizer state.
    pub optimizer_gb: f64,
    /// Activations kept for the backward pass.
    pub activations_gb: f64,
    /// KV cache (inference).
    pub kv_cache_gb: f64,
}

impl Memory {
    /// Sum.
    pub fn total_gb(&self) -> f64 {
        self.weights_gb + self.gradients_gb + self.optimizer_gb + self.activations_gb + self.kv_cache_gb
    }
}

/// A projected iteration (DESIGN §6 `project --json` keys plus detail).
#[derive(Debug, Clone, Serialize)]
pub struct Projection {
    /// Model name.
    pub model: String,
    /// System name.
    pub system: String,
    /// Task (`pretrain`, `finetune`, `inference`, `prefill`, `decode`).
    pub task: String,
    /// The parallelization plan, as `tp=8,pp=4,dp=64` or MAD-Max's levels.
    pub plan: String,
    /// `madmax` or `tracecast`.
    pub assumptions: &'static str,
    /// Times of the iteration.
    #[serde(flatten)]
    pub times: IterationTimes,
    /// Samples (sequences, queries, images) per second over the whole system.
    pub throughput: f64,
    /// Samples per iteration over the whole system.
    pub global_batch: f64,
    /// Memory per GPU, GB.
    pub memory_gb_per_gpu: f64,
    /// Its parts (tracecast's model; MAD-Max counts weights only).
    pub memory: Memory,
    /// HBM per GPU, GB.
    pub hbm_gb: f64,
    /// Whether the plan fits in HBM.
    pub fits_memory: bool,
    /// Inference prefill: time to first token, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Inference decode: time per output token, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    /// Training: model FLOPs utilization against the 16-bit peak
    /// ([`llm::mfu`]: matmuls and the attention core, no recomputation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mfu: Option<f64>,
    /// Training: tokens per second per GPU, as a runs file's `measured` states them (what
    /// `validate` compares; samples/s had to be converted by hand).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_s_per_gpu: Option<f64>,
    /// The number format its linear layers were priced in ([`llm::Plan::linear_format`]; 16-bit
    /// for MAD-Max's models and DLRMs): what its MFU is held against.
    #[serde(skip)]
    pub linear_format: tracecast_calibrate::catalog::Dtype,
    /// Where the numbers come from, and what was assumed.
    pub notes: Vec<String>,
    /// Plan keys stated and not priced as asked (not applied, or priced by another rule), each
    /// with its note (also in `notes`): what `search --with` reports of its settings.
    #[serde(skip)]
    pub unpriced_keys: Vec<(&'static str, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_under_communication_is_slowed_by_the_contention_per_unit_of_overlap() {
        // A 10 ms GEMM on the compute lane with a 4 ms all-gather beside it from t = 0,
        // then a 2 ms norm after the GEMM. With a 25 % slowdown the GEMM overlapped 4 ms
        // of communication: 10 + 0.25 × 4 = 11 ms; the norm has nothing under it: 11 + 2 = 13 ms.
        let build = |contention: f64| {
            let mut l = Lanes::default();
            l.set_contention(contention);
            l.add("gemm", OpKind::Gemm, 10e-3, &[]);
            l.add_keyed_on(Lane::DataParallel, key("ag"), Label::Text("ag".into()), OpKind::AllGather, 4e-3, &[]);
            l.add("norm", OpKind::MemoryBound, 2e-3, &["gemm".into()]);
            l.simulate()
        };
        let t = build(0.25).times();
        assert!((t.iteration_ms - 13.0).abs() < 1e-6, "{t:?}");
        // The slowdown is compute time: the GEMM's 11 ms, the norm's 2.
        assert!((t.by_kind_ms["gemm"] - 11.0).abs() < 1e-6, "{t:?}");
        assert!((t.compute_ms - 13.0).abs() < 1e-6, "{t:?}");
        // Without contention (MAD-Max's two-stream overlap) the communication costs compute nothing.
        let t = build(0.0).times();
        assert!((t.iteration_ms - 12.0).abs() < 1e-6, "{t:?}");
    }

    #[test]
    fn exposed_communication_is_the_communication_no_compute_covers_not_the_iteration_left_over() {
        // A 2 ms GEMM, 1 ms with nothing running, then a 2 ms all-reduce of which the
        // GEMM covers none: 2 ms exposed (the trace and replay definition), where the
        // iteration less compute would say 3.
        let op = |kind: OpKind, lane: u8| Op {
            name: Label::Text(kind.as_str().into()),
            kind,
            dur_s: 2e-3,
            parts: [(kind, 2e-3), (kind, 0.0), (kind, 0.0)],
            lane,
        };
        let timeline = Timeline {
            ops: vec![op(OpKind::Gemm, 0), op(OpKind::AllReduce, 1)],
            schedule: crate::sim::Schedule {
                start_ns: vec![0, 3_000_000],
                end_ns: vec![2_000_000, 5_000_000],
                unscheduled: Vec::new(),
                binding: Vec::new(),
            },
        };
        let t = timeline.times();
        assert!((t.iteration_ms - 5.0).abs() < 1e-9 && (t.compute_ms - 2.0).abs() < 1e-9, "{t:?}");
        assert!((t.exposed_comm_ms - 2.0).abs() < 1e-9, "{t:?}");
        assert!(t.overlapped_comm_ms.abs() < 1e-9, "{t:?}");
    }
}
