//! The GPU timeline of one step per rank, as data for the report: built one
//! rank at a time ([`RankKernels::of`], from the rank's context while its
//! trace is in memory) from the first ranks of a job ([`FirstRanks`]), then
//! cut to one step ([`step_kernels`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use tracecast_ingest::analysis::{ActivityClass, RankContext, Window};

use crate::work::{KernelClass, KernelWork};

/// One kernel (or copy) of the step, for the page's explorable timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelSpan {
    /// Index into [`StepKernels::lanes`].
    pub lane: usize,
    /// Start, µs from its rank's start of the step.
    pub start_us: f64,
    /// Duration, µs.
    pub dur_us: f64,
    /// Index into [`StepKernels::kinds`].
    pub kind: usize,
    /// Kernel name as in the trace.
    pub name: String,
    /// The CPU op that launched it, when known.
    pub op: Option<String>,
    /// That op's `Input Dims`, when recorded.
    pub shapes: Option<String>,
    /// The op's FLOPs, when its shapes give them.
    pub flops: Option<f64>,
    /// The op's bytes, when its shapes give them.
    pub bytes: Option<f64>,
}

/// Every kernel of one step, lane by lane.
#[derive(Debug, Clone)]
pub struct StepKernels {
    /// Title above the timeline.
    pub title: String,
    /// Lane labels (`rank 0 · stream 7`), top to bottom.
    pub lanes: Vec<String>,
    /// Kinds: legend label and colour.
    pub kinds: Vec<(String, (u8, u8, u8))>,
    /// The kernels, by lane then start.
    pub kernels: Vec<KernelSpan>,
    /// The profiler step drawn (`None`: the whole GPU window of a trace without steps).
    pub step: Option<i64>,
}

/// Kinds of the timeline, in legend order.
pub const KINDS: [(&str, (u8, u8, u8)); 7] = [
    ("gemm", (76, 114, 176)),
    ("attention", (100, 60, 160)),
    ("conv", (23, 190, 207)),
    ("elementwise / reduction", (140, 160, 200)),
    ("other compute", (150, 150, 150)),
    ("communication", (214, 39, 40)),
    ("memcpy / memset", (221, 170, 51)),
];

fn kind_of(class: Option<ActivityClass>, kernel: Option<KernelClass>) -> Option<usize> {
    Some(match class? {
        ActivityClass::Comm => 5,
        ActivityClass::Memory => 6,
        ActivityClass::Compute => match kernel {
            Some(KernelClass::Gemm) => 0,
            Some(KernelClass::Attention) => 1,
            Some(KernelClass::Conv) => 2,
            Some(KernelClass::Elementwise | KernelClass::Reduction | KernelClass::Embedding) => 3,
            _ => 4,
        },
    })
}

/// Lanes beyond this many are left out of the timeline (noted under it).
pub const MAX_LANES: usize = 32;

/// One GPU activity a timeline can show, before it is cut to a step.
#[derive(Debug, Clone)]
struct Span {
    stream: (i64, i64),
    start_ns: i64,
    end_ns: i64,
    kind: usize,
    name: String,
    op: Option<String>,
    shapes: Option<String>,
    flops: Option<f64>,
    bytes: Option<f64>,
}

/// One rank's GPU activities with their steps, for [`step_kernels`].
#[derive(Debug, Clone)]
pub struct RankKernels {
    rank: u32,
    /// (step number, its GPU window) in trace order.
    steps: Vec<(i64, Option<Window>)>,
    spans: Vec<Span>,
}

impl RankKernels {
    /// The kernels, copies and collectives of a rank, from its context and
    /// its kernel work (`work`, the context's [`crate::work::kernel_work_of`]);
    /// its steps those whose GPU window starts inside `analysed` (the rank's
    /// analysed window: `--steps`, `--drop-last-step`), all of them without one.
    pub fn of(ctx: &RankContext<'_>, work: &[Option<KernelWork>], analysed: Option<Window>) -> RankKernels {
        let (trace, links, classes) = (ctx.trace(), ctx.links(), ctx.classes());
        let ev = &trace.events;
        let mut spans = Vec::new();
        // Only what the analysed window holds: nothing where the steps chosen ran no GPU work
        // (the page had drawn another step's kernels under the analysis of an empty one).
        let inside = |i: usize| analysed.is_none_or(|a| a.overlap_ns(ev.ts_ns[i], ev.end_ns(i)).is_some());
        for i in trace.gpu_activity().filter(|&i| inside(i)) {
            let w = work.get(i).and_then(Option::as_ref);
            let Some(kind) = kind_of(classes.get(i).copied().flatten(), w.map(|w| w.class)) else { continue };
            let op_row = w.and_then(|w| w.op_row).map(|r| r as usize).or_else(|| {
                let op = links.launch_op.get(i).copied().unwrap_or(tracecast_ingest::link::NONE);
                (op != tracecast_ingest::link::NONE).then_some(op as usize)
            });
            let op_work = w.and_then(|w| w.op.as_ref());
            spans.push(Span {
                stream: (ev.pid[i], ev.tid[i]),
                start_ns: ev.ts_ns[i],
                end_ns: ev.end_ns(i),
                kind,
                name: trace.name(i).to_string(),
                op: op_row.map(|r| trace.name(r).to_string()),
                shapes: op_row.and_then(|r| trace.op_shapes_of(r)).map(|s| s.compact_dims()).filter(|d| !d.is_empty()),
                flops: op_work.and_then(|o| o.flops),
                bytes: op_work.and_then(|o| o.bytes),
            });
        }
        let selected = |g: &Option<Window>| match (analysed, g) {
            (Some(a), Some(g)) => a.starts_inside(g.start_ns),
            _ => true,
        };
        let steps = ctx.steps().iter().filter(|s| selected(&s.gpu)).map(|s| (s.number, s.gpu)).collect();
        RankKernels { rank: ctx.rank(), steps, spans }
    }
}

/// The [`RankKernels`] of the lowest-numbered ranks of a job, offered one
/// rank at a time from any thread: only [`MAX_LANES`] ranks are kept (each
/// has at least one lane), so memory does not grow with the job.
#[derive(Debug, Default)]
pub struct FirstRanks {
    ranks: Mutex<BTreeMap<u32, RankKernels>>,
}

impl FirstRanks {
    /// Offers a rank (its context, kernel work and analysed window): its
    /// kernels are collected only when it is among the lowest ranks so far.
    pub fn offer(&self, ctx: &RankContext<'_>, work: &[Option<KernelWork>], analysed: Option<Window>) {
        let rank = ctx.rank();
        let wanted = |m: &BTreeMap<u32, RankKernels>| m.len() < MAX_LANES || m.keys().next_back().is_some_and(|&k| rank < k);
        if !self.ranks.lock().map(|m| wanted(&m)).unwrap_or(false) {
            return;
        }
        let kernels = RankKernels::of(ctx, work, analysed);
        if let Ok(mut m) = self.ranks.lock() {
            m.insert(rank, kernels);
            while m.len() > MAX_LANES {
                m.pop_last();
            }
        }
    }

    /// The kept ranks, by rank.
    pub fn into_ranks(self) -> Vec<RankKernels> {
        self.ranks.into_inner().map(|m| m.into_values().collect()).unwrap_or_default()
    }
}

/// Every GPU kernel of one step per rank (the step with the median GPU time
/// of the first rank with steps; the whole GPU window without steps), with a
/// note on what was chosen and left out. `ranks` in rank order.
pub fn step_kernels(ranks: &[RankKernels]) -> Option<(StepKernels, String)> {
    let mut lanes: Vec<String> = Vec::new();
    let mut kernels: Vec<KernelSpan> = Vec::new();
    let mut chosen = None;
    let (mut left_out, mut last_drawn) = (0usize, None);
    for r in ranks {
        // Same step number on every rank: the median-length step of the first rank with steps.
        if chosen.is_none() {
            let mut with_gpu: Vec<_> = r.steps.iter().filter_map(|(n, g)| g.map(|w| (w.end_ns - w.start_ns, *n))).collect();
            with_gpu.sort();
            chosen = with_gpu.get(with_gpu.len() / 2).map(|x| x.1);
        }
        let window = chosen.and_then(|n| r.steps.iter().find(|s| s.0 == n)).and_then(|s| s.1);
        let mut by_stream: BTreeMap<(i64, i64), Vec<&Span>> = BTreeMap::new();
        for s in &r.spans {
            if let Some(w) = window
                && (s.end_ns <= w.start_ns || s.start_ns >= w.end_ns)
            {
                continue;
            }
            by_stream.entry(s.stream).or_default().push(s);
        }
        let clip = |s: &Span| window.map_or((s.start_ns, s.end_ns), |w| (s.start_ns.max(w.start_ns), s.end_ns.min(w.end_ns)));
        // Ranks' clocks differ: each lane is shown from its rank's own step start.
        let origin = by_stream.values().flatten().map(|s| clip(s).0).min().unwrap_or(0);
        for ((_, stream), mut spans) in by_stream {
            if lanes.len() >= MAX_LANES {
                left_out += 1;
                continue;
            }
            spans.sort_by_key(|s| clip(s));
            let lane = lanes.len();
            last_drawn = Some(r.rank);
            lanes.push(format!("rank {} · stream {stream}", r.rank));
            for s in spans {
                let (a, b) = clip(s);
                kernels.push(KernelSpan {
                    lane,
                    start_us: (a - origin) as f64 / 1e3,
                    dur_us: (b - a) as f64 / 1e3,
                    kind: s.kind,
                    name: s.name.clone(),
                    op: s.op.clone(),
                    shapes: s.shapes.clone(),
                    flops: s.flops,
                    bytes: s.bytes,
                });
            }
        }
    }
    if lanes.is_empty() {
        return None;
    }
    let what = chosen.map_or("the whole GPU window".to_string(), |n| format!("step {n}"));
    let mut note = format!(
        "Each lane is one GPU stream of one rank, from that rank's own start of {what}; all {} GPU activities (kernels, copies and memsets) are in the page (boxes a pixel cannot tell apart are merged until you zoom in).",
        kernels.len()
    );
    // Of the ranks past the drawn ones only the first few were kept ([`FirstRanks`]): how many
    // streams they hold is not known here (a count of theirs had said 32 of a job's 96).
    if left_out > 0 {
        let upto = last_drawn.map_or(String::new(), |r| format!(", up to rank {r}"));
        let _ = write!(note, " Only the first {MAX_LANES} streams are drawn{upto}: the later ones are not.");
    }
    let step = StepKernels {
        title: format!("GPU timeline of {what}"),
        lanes,
        kinds: KINDS.iter().map(|(l, c)| ((*l).to_string(), *c)).collect(),
        kernels,
        step: chosen,
    };
    Some((step, note))
}
