//! Synthetic Kineto traces of a data-parallel transformer training job, made
//! from known ground truth: GEMM efficiency and launch overhead, memory-bound
//! efficiency, all-reduce latency α and bus bandwidth, rank skew and noise.
//!
//! Each rank runs, per step: an input copy, forward GEMMs and elementwise
//! kernels per layer, backward GEMMs per layer with one gradient all-reduce
//! bucket per layer (sizes spread over five decades) on a separate communication stream (overlapping the
//! remaining backward work), an optimizer that waits for the last bucket, and
//! a host synchronisation. A collective instance starts on each rank when that
//! rank arrives and ends on every rank at the latest arrival plus its transfer
//! time α + 2(n−1)/n · S / B, so early ranks wait.
//!
//! The timing is that of a real stack: the host runs ahead of the GPU;
//! back-to-back queued kernels are separated by a queue gap drawn from
//! `queue_gap_us` (1–3 µs on NVIDIA GPUs); the communication stream waits for
//! each gradient bucket through `cudaEventRecord` + `cudaStreamWaitEvent`
//! (and the optimizer for the last bucket the same way), with an event
//! latency of the same size; the host synchronises with the GPU once per step
//! (blocking, or with `host_poll` by polling an event).
//! With `sync_rows` the trace also carries the `cuda_sync` rows newer Kineto
//! versions write for those waits. The random draws do not depend on the
//! truth, so two specs that differ in one parameter give traces that differ
//! only where that parameter acts.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Ground truth and shape of a synthetic job.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobSpec {
    /// Ranks (one file each). Default: 4.
    pub ranks: u32,
    /// Profiler steps. Default: 3.
    pub steps: u32,
    /// Transformer layers. Default: 8.
    pub layers: u32,
    /// Hidden size. Default: 4096.
    pub hidden: u64,
    /// Tokens per step and rank (batch × sequence). Default: 4096.
    pub tokens: u64,
    /// The GPU the traces name in `deviceProperties` (what `calibrate` and `replay`
    /// match against the catalog). Default: an H100 SXM.
    pub device: SynthDevice,
    /// Peak dense bf16 FLOP/s of the GPU. Default: 989e12 (H100 SXM).
    pub peak_flops: f64,
    /// Peak HBM bandwidth, bytes/s. Default: 3.35e12.
    pub peak_hbm_bytes_per_s: f64,
    /// GEMM efficiency η. Default: 0.70.
    pub gemm_efficiency: f64,
    /// Fixed per-kernel overhead t0, µs. Default: 4.
    pub kernel_overhead_us: f64,
    /// Memory-bound efficiency. Default: 0.80.
    pub memory_efficiency: f64,
    /// All-reduce latency α, µs. Default: 15.
    pub allreduce_alpha_us: f64,
    /// All-reduce bus bandwidth B, GB/s. Default: 150.
    pub allreduce_busbw_gbps: f64,
    /// Spread of the per-rank host time before each step (data loading):
    /// each rank loads for `data_loading_us × (1 + rank_skew · u)`, u uniform
    /// in [0, 1); stragglers make the other ranks wait at collectives.
    /// Kernels themselves run at the stated efficiencies on every rank. Default: 0.5.
    pub rank_skew: f64,
    /// Relative noise of each kernel duration. Default: 0.02.
    pub noise: f64,
    /// Largest clock offset between ranks, µs. Default: 40.
    pub clock_skew_us: f64,
    /// Host time spent loading data at the start of each step, µs. Default: 300.
    pub data_loading_us: f64,
    /// Random seed. Default: 1.
    pub seed: u64,
    /// Write `.json.gz` instead of `.json`. Default: true.
    pub gzip: bool,
    /// One slowed rank and how much longer its host takes before each step, µs
    /// (a straggler the others wait for at every collective). Default: none.
    pub slow_rank: Option<(u32, f64)>,
    /// Range of the gap between back-to-back queued kernels on a stream, and
    /// of the latency of a cross-stream event wait, µs (uniform). Default: 1–3.
    pub queue_gap_us: (f64, f64),
    /// Write `cuda_sync` rows (`Stream Wait Event`) for the event waits. Default: true.
    pub sync_rows: bool,
    /// At the end of each step the host polls for the GPU (`cudaEventQuery`
    /// every 5 µs until the step's last kernel has ended) instead of blocking
    /// in `cudaStreamSynchronize`. Default: false.
    pub host_poll: bool,
    /// Before the optimizer the host spins on memory the GPU writes (no
    /// runtime call) until the last gradient all-reduce has ended, as DeepEP's
    /// receive counters make it. Default: false.
    pub host_flag_wait: bool,
    /// Forward GEMMs of one layer as (m, k, n), from a workload model; the
    /// backward runs each as a data-gradient and a weight-gradient GEMM.
    /// Default: empty, a GPT-style layer of `hidden` (QKV, output, 4h MLP).
    pub layer_gemms: Vec<(u64, u64, u64)>,
}

/// The device a synthetic trace states: its name, memory, compute capability and SMs.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthDevice {
    /// `deviceProperties.name`, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// `totalGlobalMem`, bytes.
    pub memory_bytes: u64,
    /// `computeMajor`, `computeMinor`, where known.
    pub compute: Option<(u32, u32)>,
    /// `numSms`, where known.
    pub sms: Option<u32>,
}

impl Default for SynthDevice {
    fn default() -> Self {
        SynthDevice { name: "NVIDIA H100 80GB HBM3".into(), memory_bytes: 85_017_755_648, compute: Some((9, 0)), sms: Some(132) }
    }
}

impl SynthDevice {
    /// The device a trace of catalog GPU `gpu` states: a name of the catalog's own `match`
    /// list (the longest that `catalog` reads back as `gpu`), its memory, SMs (compute units)
    /// and gfx version where the catalog has them. `None` where no name of `gpu` is read back
    /// as it (a longer name of another GPU contains it).
    pub fn of(gpu: &crate::catalog::Gpu, catalog: &crate::Catalog) -> Option<SynthDevice> {
        let mut names: Vec<&String> = gpu.match_names.iter().collect();
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        let compute = gpu.match_gfx.first().map(|v| (v.trunc() as u32, (10.0 * v.fract()).round() as u32));
        let sms = gpu.sms.or_else(|| gpu.match_cus.first().and_then(|c| u32::try_from(*c).ok()));
        names.into_iter().find_map(|name| {
            let props = tracecast_ingest::device::DeviceProperties {
                name: Some(name.clone()),
                num_sms: sms.map(i64::from),
                compute_major: compute.map(|c| i64::from(c.0)),
                compute_minor: compute.map(|c| i64::from(c.1)),
                ..Default::default()
            };
            let read_back = catalog.match_device(&props).is_some_and(|(g, _)| g.id == gpu.id);
            read_back.then(|| SynthDevice { name: name.clone(), memory_bytes: (gpu.memory_gb * 1e9) as u64, compute, sms })
        })
    }

    /// The `deviceProperties` entry of a trace.
    fn json(&self) -> String {
        let mut s = format!(
            "{{\"id\": 0, \"name\": {}, \"totalGlobalMem\": {}",
            serde_json::to_string(&self.name).unwrap_or_else(|_| "\"\"".into()),
            self.memory_bytes
        );
        if let Some((major, minor)) = self.compute {
            let _ = write!(s, ", \"computeMajor\": {major}, \"computeMinor\": {minor}");
        }
        if let Some(n) = self.sms {
            let _ = write!(s, ", \"numSms\": {n}");
        }
        s.push('}');
        s
    }
}

/// The most ranks `synth` writes.
pub const MAX_RANKS: u32 = 65_536;
/// The most steps × layers of one synthetic rank (about 460 MB of JSON).
pub const MAX_LAYER_STEPS: u64 = 20_000;
/// The most ranks × steps × layers of one synthetic job: the whole job's trace text is held
/// in memory until its last step (collectives tie the ranks), about 20 KB a layer and step of
/// a rank (measured: 256–512 ranks, 8–32 layers), so about 10 GB here. 4 096 ranks of 3 steps
/// of 32 layers, or 16 384 of 8 layers, fit; the limits above alone had let 64 ranks × 2 500
/// steps × 8 layers, or 65 536 ranks, abort on a failed allocation.
pub const MAX_JOB_LAYER_STEPS: u64 = 1 << 19;
/// Bytes of memory a layer and step of one rank takes while a job is made ([`MAX_JOB_LAYER_STEPS`]).
const BYTES_PER_LAYER_STEP: u64 = 20_000;

impl JobSpec {
    /// Why these truths cannot make a job (`None`: they can): counts of at
    /// least one, efficiencies in (0, 1], positive peaks and link bandwidth,
    /// non-negative latencies. A zero bandwidth or efficiency would write
    /// kernels of effectively infinite duration.
    pub fn invalid(&self) -> Option<String> {
        let counts = [("ranks", self.ranks), ("steps", self.steps), ("layers", self.layers)];
        if let Some((name, _)) = counts.iter().find(|(_, n)| *n == 0) {
            return Some(format!("{name} 0: at least 1"));
        }
        // Each rank's trace is rendered in memory (about 23 KB of JSON per layer and step),
        // and a job of many thousands of ranks is what the reader is built for.
        if self.ranks > MAX_RANKS {
            return Some(format!("ranks {}: at most {MAX_RANKS}", self.ranks));
        }
        let per_rank = u64::from(self.steps) * u64::from(self.layers);
        if per_rank > MAX_LAYER_STEPS {
            return Some(format!(
                "steps × layers = {} × {} per rank: at most {MAX_LAYER_STEPS} (about 23 KB of trace each)",
                self.steps, self.layers
            ));
        }
        let job = per_rank * u64::from(self.ranks);
        if job > MAX_JOB_LAYER_STEPS {
            return Some(format!(
                "ranks × steps × layers = {} × {} × {} = {job}: at most {MAX_JOB_LAYER_STEPS} (the job's traces are made in memory, about {:.0} GB here; fewer ranks, steps or layers)",
                self.ranks,
                self.steps,
                self.layers,
                (job * BYTES_PER_LAYER_STEP) as f64 / 1e9
            ));
        }
        let fraction = [("GEMM efficiency", self.gemm_efficiency), ("HBM efficiency", self.memory_efficiency)];
        if let Some((name, x)) = fraction.iter().find(|(_, x)| !(*x > 0.0 && *x <= 1.0)) {
            return Some(format!("{name} {x}: a fraction of the peak in (0, 1]"));
        }
        let positive = [
            ("all-reduce bus bandwidth (GB/s)", self.allreduce_busbw_gbps),
            ("peak FLOP/s", self.peak_flops),
            ("peak HBM bandwidth", self.peak_hbm_bytes_per_s),
        ];
        if let Some((name, x)) = positive.iter().find(|(_, x)| !(x.is_finite() && *x > 0.0)) {
            return Some(format!("{name} {x}: more than 0"));
        }
        // Bounded so that a step stays within the trace's microsecond clock: --busbw-gbps 1e-300
        // or --alpha-us 1e308 had written traces of 4e12 ms steps that ran no GPU work.
        if !(1e-3..=1e6).contains(&self.allreduce_busbw_gbps) {
            return Some(format!(
                "all-reduce bus bandwidth (GB/s) {}: from 0.001 to 1000000",
                crate::catalog::shown(self.allreduce_busbw_gbps)
            ));
        }
        let latency = [("all-reduce latency (µs)", self.allreduce_alpha_us), ("kernel fixed cost (µs)", self.kernel_overhead_us)];
        if let Some((name, x)) = latency.iter().find(|(_, x)| !(x.is_finite() && (0.0..=1e6).contains(x))) {
            return Some(format!("{name} {}: from 0 to 1000000", crate::catalog::shown(*x)));
        }
        if !self.layer_gemms.is_empty() && self.tokens == 0 {
            return Some("tokens 0: a model's layer needs at least 1".into());
        }
        None
    }
}

impl Default for JobSpec {
    fn default() -> Self {
        JobSpec {
            ranks: 4,
            steps: 3,
            layers: 8,
            hidden: 4096,
            tokens: 4096,
            device: SynthDevice::default(),
            peak_flops: 989e12,
            peak_hbm_bytes_per_s: 3.35e12,
            gemm_efficiency: 0.70,
            kernel_overhead_us: 4.0,
            memory_efficiency: 0.80,
            allreduce_alpha_us: 15.0,
            allreduce_busbw_gbps: 150.0,
            rank_skew: 0.5,
            noise: 0.02,
            clock_skew_us: 40.0,
            data_loading_us: 300.0,
            seed: 1,
            gzip: true,
            queue_gap_us: (1.0, 3.0),
            sync_rows: true,
            host_poll: false,
            host_flag_wait: false,
            slow_rank: None,
            layer_gemms: Vec::new(),
        }
    }
}

/// Deterministic generator (splitmix64) so the same spec gives the same bytes.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-12);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
    /// A factor 1 + spread·N(0,1), kept within ±3 spreads and positive.
    fn jitter(&mut self, spread: f64) -> f64 {
        (1.0 + spread * self.normal().clamp(-3.0, 3.0)).max(0.05)
    }
}

const CPU_PID: i64 = 4242;
const CPU_TID: i64 = 4243;
const COMPUTE_STREAM: i64 = 7;
const COMM_STREAM: i64 = 20;
const LAUNCH_US: f64 = 4.0;
const LAUNCH_LATENCY_US: f64 = 5.0;

/// One rank's events as Kineto JSON rows, in µs relative to the job start.
struct RankWriter {
    rank: u32,
    rows: Vec<String>,
    next_id: i64,
    cpu_us: f64,
    compute_free_us: f64,
    comm_free_us: f64,
    loading_us: f64,
    clock_offset_us: f64,
    /// Queue gap / event latency range, µs.
    gap_us: (f64, f64),
    /// The next queue gap, drawn before each launch so the draws never depend on the truth.
    next_gap_us: f64,
    /// The next launch also waits for this time (an event wait), µs.
    hold_us: f64,
}

/// Job start on the trace clock, ns (2023-11-14, like a real epoch timestamp).
const EPOCH_NS: i64 = 1_700_000_000_000_000_000;

/// µs with three decimals, computed in integer ns so large epochs lose nothing.
fn ts(v_us: f64, base_ns: i64) -> String {
    let ns = base_ns + (v_us * 1000.0).round() as i64;
    format!("{}.{:03}", ns.div_euclid(1000), ns.rem_euclid(1000))
}

impl RankWriter {
    #[allow(clippy::too_many_arguments)] // one argument per Chrome-trace field
    fn x(&mut self, cat: &str, name: &str, pid: i64, tid: i64, start: f64, dur: f64, args: &str) {
        let start = start + self.clock_offset_us;
        self.rows.push(format!(
            "{{\"ph\": \"X\", \"cat\": \"{cat}\", \"name\": \"{name}\", \"pid\": {pid}, \"tid\": {tid}, \"ts\": {}, \"dur\": {}, \"args\": {{{args}}}}}",
            ts(start, EPOCH_NS),
            ts(dur.max(0.0), 0)
        ));
    }

    /// A CPU op that launches one GPU activity on `stream`; returns (start, end) of the activity.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &mut self,
        op: &str,
        op_args: &str,
        kernel_cat: &str,
        kernel: &str,
        kernel_args: &str,
        stream: i64,
        ready_us: f64,
        dur_us: f64,
    ) -> (f64, f64) {
        let ext = self.next_id;
        let corr = self.next_id + 1;
        self.next_id += 2;
        let op_start = self.cpu_us;
        let launch_start = op_start + 2.0;
        let op_dur = LAUNCH_US + 4.0;
        let sep = if op_args.is_empty() { "" } else { ", " };
        self.x("cpu_op", op, CPU_PID, CPU_TID, op_start, op_dur, &format!("\"External id\": {ext}{sep}{op_args}"));
        self.x(
            "cuda_runtime",
            "cudaLaunchKernel",
            CPU_PID,
            CPU_TID,
            launch_start,
            LAUNCH_US,
            &format!("\"External id\": {ext}, \"correlation\": {corr}"),
        );
        let free = if stream == COMM_STREAM { self.comm_free_us } else { self.compute_free_us };
        let start = (launch_start + LAUNCH_LATENCY_US).max(free + self.next_gap_us).max(ready_us).max(self.hold_us);
        self.hold_us = 0.0;
        let end = start + dur_us;
        let sep = if kernel_args.is_empty() { "" } else { ", " };
        self.x(
            kernel_cat,
            kernel,
            0,
            stream,
            start,
            dur_us,
            &format!("\"device\": 0, \"stream\": {stream}, \"correlation\": {corr}, \"External id\": {ext}{sep}{kernel_args}"),
        );
        self.cpu_us = op_start + op_dur + 1.0;
        if stream == COMM_STREAM {
            self.comm_free_us = end;
        } else {
            self.compute_free_us = end;
        }
        (start, end)
    }
}

impl RankWriter {
    /// Draws the queue gap of the next launch.
    fn draw_gap(&mut self, rng: &mut Rng) -> f64 {
        let (lo, hi) = self.gap_us;
        self.next_gap_us = lo + (hi - lo).max(0.0) * rng.uniform();
        self.next_gap_us
    }

    /// `cudaEventRecord` on `stream` then `cudaStreamWaitEvent` on `waiting`
    /// at the host's current time,
    /// and writes the `cuda_sync` row at `gpu_at_us` when `sync_rows`.
    fn event_wait(&mut self, stream: i64, waiting: i64, gpu_at_us: f64, sync_rows: bool) {
        let record = self.next_id;
        let wait = self.next_id + 1;
        self.next_id += 2;
        let cpu = self.cpu_us;
        self.x("cuda_runtime", "cudaEventRecord", CPU_PID, CPU_TID, cpu, 2.0, &format!("\"correlation\": {record}"));
        self.x("cuda_runtime", "cudaStreamWaitEvent", CPU_PID, CPU_TID, cpu + 3.0, 2.0, &format!("\"correlation\": {wait}"));
        if sync_rows {
            self.x(
                "cuda_sync",
                "Stream Wait Event",
                0,
                waiting,
                gpu_at_us,
                0.0,
                &format!(
                    "\"cuda_sync_kind\": \"Stream Wait Event\", \"device\": 0, \"stream\": {waiting}, \"wait_on_stream\": {stream}, \"wait_on_cuda_event_record_corr_id\": {record}, \"correlation\": {wait}"
                ),
            );
        }
        self.cpu_us = cpu + 6.0;
    }
}

/// GEMM [m,k]×[k,n] on the compute stream.
fn gemm(w: &mut RankWriter, rng: &mut Rng, spec: &JobSpec, name: &str, m: u64, k: u64, n: u64) {
    w.draw_gap(rng);
    let flops = 2.0 * m as f64 * k as f64 * n as f64;
    // Noise never takes a kernel past the peak (at η 0.95 a 3σ draw of 2 % would);
    // a nanosecond above it, as the trace's rounding to ns could land below.
    let dur = ((spec.kernel_overhead_us + flops / (spec.gemm_efficiency * spec.peak_flops) * 1e6) * rng.jitter(spec.noise))
        .max(flops / spec.peak_flops * 1e6 + 1e-3);
    let args = format!("\"Input Dims\": [[{m}, {k}], [{k}, {n}]], \"Input type\": [\"c10::BFloat16\", \"c10::BFloat16\"]");
    w.launch(
        name,
        &args,
        "kernel",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "",
        COMPUTE_STREAM,
        0.0,
        dur,
    );
}

/// Elementwise op over `elems` bf16 values (two inputs, one output).
fn elementwise(w: &mut RankWriter, rng: &mut Rng, spec: &JobSpec, op: &str, elems: u64) {
    w.draw_gap(rng);
    let bytes = 3.0 * 2.0 * elems as f64;
    let dur = ((spec.kernel_overhead_us + bytes / (spec.memory_efficiency * spec.peak_hbm_bytes_per_s) * 1e6) * rng.jitter(spec.noise))
        .max(bytes / spec.peak_hbm_bytes_per_s * 1e6 + 1e-3);
    let args = format!("\"Input Dims\": [[{elems}], [{elems}]], \"Input type\": [\"c10::BFloat16\", \"c10::BFloat16\"]");
    w.launch(
        op,
        &args,
        "kernel",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>",
        "",
        COMPUTE_STREAM,
        0.0,
        dur,
    );
}

/// A queue gap or event latency from the spec's range.
fn gap(rng: &mut Rng, spec: &JobSpec) -> f64 {
    let (lo, hi) = spec.queue_gap_us;
    lo + (hi - lo).max(0.0) * rng.uniform()
}

/// One rank of a synthetic job: its trace and the truth about it.
#[derive(Debug, Clone)]
pub struct SynthRank {
    /// The Kineto JSON text.
    pub json: String,
    /// The offset added to this rank's clock, µs (rank 0: 0).
    pub clock_offset_us: f64,
    /// Host time before each step on this rank, µs (rank skew).
    pub data_loading_us: f64,
    /// All-reduces at which this rank arrived last.
    pub times_last: usize,
    /// The waiting it caused the other ranks there, GPU-µs.
    pub wait_caused_us: f64,
}

/// The ranks' trace files as JSON text, in rank order, with their truth.
pub fn render_job(spec: &JobSpec) -> Vec<SynthRank> {
    let mut out = Vec::new();
    render_job_each(spec, |r| out.push(r));
    out
}

/// Stands for the world's rank list in the rows until a rank is rendered (a
/// 4096-rank list on every collective row of every rank would not fit in memory).
const RANKS_MARK: &str = "\u{1}ranks\u{1}";

/// [`render_job`], handing each rank to `each` as soon as it is rendered (in rank
/// order), so a caller that writes it out holds one rank's text at a time.
pub fn render_job_each(spec: &JobSpec, mut each: impl FnMut(SynthRank)) {
    let n = spec.ranks.max(1);
    let mut rng = Rng(spec.seed ^ 0x5EED);
    let mut ranks: Vec<RankWriter> = (0..n)
        .map(|rank| RankWriter {
            rank,
            rows: Vec::new(),
            next_id: 1,
            cpu_us: 0.0,
            compute_free_us: 0.0,
            comm_free_us: 0.0,
            loading_us: spec.data_loading_us,
            clock_offset_us: 0.0,
            gap_us: spec.queue_gap_us,
            next_gap_us: 0.0,
            hold_us: 0.0,
        })
        .collect();
    for w in ranks.iter_mut() {
        w.loading_us = spec.data_loading_us * (1.0 + spec.rank_skew * rng.uniform());
        if let Some((slow, extra)) = spec.slow_rank
            && slow == w.rank
        {
            w.loading_us += extra;
        }
        w.clock_offset_us = if w.rank == 0 { 0.0 } else { (rng.uniform() * 2.0 - 1.0) * spec.clock_skew_us };
    }
    let h = spec.hidden;
    let t = spec.tokens;
    let custom = !spec.layer_gemms.is_empty();
    // qkv 3h², out h², mlp 8h² per layer, or the workload's weights.
    let grad_elems = if custom { spec.layer_gemms.iter().map(|g| g.1 * g.2).sum() } else { 12 * h * h };
    let ranks_list = (0..n).map(|r| r.to_string()).collect::<Vec<_>>().join(", ");
    let mut caused = vec![0.0; n as usize];
    let mut times_last = vec![0usize; n as usize];
    for step in 0..spec.steps {
        let mut step_starts = Vec::new();
        // Forward and backward compute, recording when each gradient bucket is ready.
        let mut ready: Vec<Vec<(f64, f64)>> = Vec::new(); // per rank: (cpu launch time, grads ready)
        for w in ranks.iter_mut() {
            let start = w.cpu_us;
            step_starts.push(start);
            w.x("user_annotation", "DataLoader.__next__", CPU_PID, CPU_TID, start + 1.0, w.loading_us, "");
            w.cpu_us = start + w.loading_us + 2.0;
            let bytes = t * 8;
            let copy = bytes as f64 / 20e9 * 1e6;
            let ext = w.next_id;
            let corr = w.next_id + 1;
            w.next_id += 2;
            let cpu = w.cpu_us;
            w.x(
                "cuda_runtime",
                "cudaMemcpyAsync",
                CPU_PID,
                CPU_TID,
                cpu,
                LAUNCH_US,
                &format!("\"External id\": {ext}, \"correlation\": {corr}"),
            );
            let gap = w.draw_gap(&mut rng);
            let s = (cpu + LAUNCH_LATENCY_US).max(w.compute_free_us + gap);
            w.x(
                "gpu_memcpy",
                "Memcpy HtoD (Pageable -> Device)",
                0,
                COMPUTE_STREAM,
                s,
                copy,
                &format!("\"device\": 0, \"stream\": {COMPUTE_STREAM}, \"correlation\": {corr}, \"bytes\": {bytes}"),
            );
            w.compute_free_us = s + copy;
            w.cpu_us = cpu + LAUNCH_US + 1.0;
            for _ in 0..spec.layers {
                if custom {
                    for (i, &(m, k, n)) in spec.layer_gemms.iter().enumerate() {
                        gemm(w, &mut rng, spec, "aten::mm", m, k, n);
                        if i % 2 == 1 {
                            elementwise(w, &mut rng, spec, "aten::add", t * h);
                        }
                    }
                    continue;
                }
                gemm(w, &mut rng, spec, "aten::mm", t, h, 3 * h);
                gemm(w, &mut rng, spec, "aten::mm", t, h, h);
                elementwise(w, &mut rng, spec, "aten::add", t * h);
                gemm(w, &mut rng, spec, "aten::mm", t, h, 4 * h);
                gemm(w, &mut rng, spec, "aten::mm", t, 4 * h, h);
                elementwise(w, &mut rng, spec, "aten::add", t * h);
            }
            let mut buckets = Vec::new();
            for _ in 0..spec.layers {
                if custom {
                    for &(m, k, n) in spec.layer_gemms.iter().rev() {
                        gemm(w, &mut rng, spec, "aten::mm", m, n, k); // data gradient
                        gemm(w, &mut rng, spec, "aten::mm", k, m, n); // weight gradient
                    }
                }
                for (k, nn) in if custom { vec![] } else { vec![(4 * h, h), (h, 4 * h), (h, h), (3 * h, h)] } {
                    gemm(w, &mut rng, spec, "aten::mm", t, nn, k); // data gradient
                    gemm(w, &mut rng, spec, "aten::mm", k, t, nn); // weight gradient
                }
                elementwise(w, &mut rng, spec, "aten::add", t * h);
                buckets.push((w.cpu_us, w.compute_free_us));
                w.cpu_us += 2.0 * LAUNCH_US + 16.0; // the event wait and the all-reduce launch, written below
            }
            ready.push(buckets);
        }
        // Gradient all-reduces, one instance at a time across ranks. Bucket
        // sizes spread over five decades (a layer's gradients down to 1/4^7 of
        // them) so latency and bandwidth can both be recovered.
        let factor = 2.0 * (n as f64 - 1.0) / n as f64;
        for b in 0..spec.layers as usize {
            let elems = (grad_elems >> (2 * (b % 8))).max(1);
            let bytes = elems * 2;
            let link = crate::cost::AlphaBeta { alpha_us: spec.allreduce_alpha_us, busbw_gbps: spec.allreduce_busbw_gbps };
            let transfer = link.transfer_us(factor * bytes as f64) * rng.jitter(spec.noise / 2.0);
            let arrivals: Vec<f64> = ranks
                .iter()
                .zip(&ready)
                .map(|(w, r)| {
                    let (cpu, grads) = r.get(b).copied().unwrap_or((0.0, 0.0));
                    let (queue, event) = (gap(&mut rng, spec), gap(&mut rng, spec));
                    (cpu + 8.0 + LAUNCH_LATENCY_US).max(w.comm_free_us + queue).max(grads + event)
                })
                .collect();
            let last_at = arrivals.iter().copied().fold(f64::MIN, f64::max);
            let end = last_at + transfer;
            // The truth about stragglers: the last to arrive made the others wait.
            if let Some(last) = arrivals.iter().position(|a| *a == last_at) {
                caused[last] += arrivals.iter().map(|a| last_at - a).sum::<f64>();
                times_last[last] += 1;
            }
            for ((w, r), arrive) in ranks.iter_mut().zip(&ready).zip(&arrivals) {
                let (cpu, _) = r.get(b).copied().unwrap_or((0.0, 0.0));
                let saved_cpu = w.cpu_us;
                w.cpu_us = cpu;
                w.event_wait(COMPUTE_STREAM, COMM_STREAM, *arrive, spec.sync_rows);
                w.next_gap_us = 0.0; // the arrival already holds the queue gap
                let op_args = format!(
                    "\"Collective name\": \"allreduce\", \"In msg nelems\": {elems}, \"Out msg nelems\": {elems}, \"Group size\": {n}, \"dtype\": \"BFloat16\", \"Process Group Name\": \"0\", \"Process Group Description\": \"default_pg\", \"Process Group Ranks\": \"[{RANKS_MARK}]\""
                );
                w.launch(
                    "record_param_comms",
                    &op_args,
                    "kernel",
                    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                    &op_args,
                    COMM_STREAM,
                    *arrive,
                    end - arrive,
                );
                w.cpu_us = saved_cpu;
            }
        }
        // Optimizer (waits for the last bucket), then the host waits for the GPU.
        for (i, w) in ranks.iter_mut().enumerate() {
            let event = gap(&mut rng, spec);
            let last_bucket = w.comm_free_us + event;
            if spec.host_flag_wait {
                // The host sees the flag 3 µs after the all-reduce ends.
                w.cpu_us = w.cpu_us.max(w.comm_free_us + 3.0);
            }
            w.event_wait(COMM_STREAM, COMPUTE_STREAM, last_bucket.max(w.compute_free_us), spec.sync_rows);
            w.hold_us = last_bucket;
            for _ in 0..4 {
                elementwise(w, &mut rng, spec, "aten::add_", grad_elems * spec.layers as u64 / 4);
            }
            let sync_start = w.cpu_us;
            let sync_end = if spec.host_poll {
                // cudaEventRecord, then a query every 5 µs until one sees the GPU done.
                w.x("cuda_runtime", "cudaEventRecord", CPU_PID, CPU_TID, sync_start, 2.0, "\"correlation\": 0");
                let mut at = sync_start + 3.0;
                loop {
                    w.x("cuda_runtime", "cudaEventQuery", CPU_PID, CPU_TID, at, 1.0, "\"correlation\": 0");
                    if at >= w.compute_free_us {
                        break at + 1.0;
                    }
                    at += 5.0;
                }
            } else {
                let end = sync_start.max(w.compute_free_us) + 3.0;
                w.x("cuda_runtime", "cudaStreamSynchronize", CPU_PID, CPU_TID, sync_start, end - sync_start, "\"correlation\": 0");
                end
            };
            w.cpu_us = sync_end + 5.0;
            let start = step_starts.get(i).copied().unwrap_or(0.0);
            let name = format!("ProfilerStep#{}", step + 1);
            w.x("user_annotation", &name, CPU_PID, CPU_TID, start, w.cpu_us - start - 1.0, "");
        }
    }
    let device = spec.device.json();
    for w in ranks {
        let synth = {
            let mut s = String::with_capacity(w.rows.iter().map(|r| r.len() + 3).sum::<usize>() + 1024);
            let _ = write!(
                s,
                "{{\"schemaVersion\": 1, \"tracecastSynth\": 1, \"deviceProperties\": [{}], \"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {}, \"world_size\": {n}, \"pg_count\": 1, \"pg_config\": [{{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cuda:nccl\", \"pg_size\": {n}, \"ranks\": [{ranks_list}]}}]}},\n\"traceEvents\": [\n",
                device, w.rank
            );
            for (i, row) in w.rows.iter().enumerate() {
                if i > 0 {
                    s.push_str(",\n");
                }
                match row.split_once(RANKS_MARK) {
                    Some((a, b)) => {
                        s.push_str(a);
                        s.push_str(&ranks_list);
                        s.push_str(b);
                    }
                    None => s.push_str(row),
                }
            }
            s.push_str("\n],\n\"traceName\": \"synthetic\"}\n");
            SynthRank {
                json: s,
                clock_offset_us: w.clock_offset_us,
                data_loading_us: w.loading_us,
                times_last: times_last[w.rank as usize],
                wait_caused_us: caused[w.rank as usize],
            }
        };
        each(synth);
    }
}

/// The synthetic job read back as `ingest` reads files (in memory, no disk).
pub fn job(spec: &JobSpec) -> tracecast_ingest::Job {
    let traces = render_job(spec)
        .into_iter()
        .enumerate()
        .map(|(r, s)| {
            tracecast_ingest::kineto::parse_bytes(
                s.json.as_bytes(),
                &PathBuf::from(format!("rank-{r}.json")),
                &tracecast_ingest::ReadOptions::default(),
            )
        })
        .collect();
    tracecast_ingest::Job::from_traces(PathBuf::from("synthetic"), traces)
}

/// Errors of [`write_job`].
#[derive(Debug, thiserror::Error)]
#[error("{}: cannot write: {cause}", path.display())]
pub struct WriteError {
    /// The file or directory.
    pub path: PathBuf,
    /// The cause (in the message, so not chained a second time).
    pub cause: std::io::Error,
}

/// Writes `rank-N.json(.gz)` files into `dir` (created) and returns their paths.
pub fn write_job(spec: &JobSpec, dir: &Path) -> Result<Vec<PathBuf>, WriteError> {
    Ok(write_job_with_truth(spec, dir)?.into_iter().map(|w| w.path).collect())
}

/// A rank's file [`write_job_with_truth`] wrote, with the truth of that rank it was made from.
#[derive(Debug, Clone)]
pub struct WrittenRank {
    /// The file.
    pub path: PathBuf,
    /// The offset added to the rank's clock, µs (rank 0: 0).
    pub clock_offset_us: f64,
    /// Host time before each step, µs.
    pub data_loading_us: f64,
    /// All-reduces at which the rank arrived last.
    pub times_last: usize,
    /// The waiting it caused the other ranks there, GPU-µs.
    pub wait_caused_us: f64,
}

/// [`write_job`], returning each rank's truth beside its file: what `synth` tells its user to
/// check `analyze` against.
pub fn write_job_with_truth(spec: &JobSpec, dir: &Path) -> Result<Vec<WrittenRank>, WriteError> {
    tracecast_ingest::output::create_dir(dir).map_err(|cause| WriteError { path: dir.to_path_buf(), cause })?;
    refuse_foreign_traces(spec, dir)?;
    let mut written = Vec::new();
    let mut failed = None;
    let mut rank = 0usize;
    render_job_each(spec, |synth| {
        if failed.is_some() {
            return;
        }
        let (clock_offset_us, data_loading_us, times_last, wait_caused_us) =
            (synth.clock_offset_us, synth.data_loading_us, synth.times_last, synth.wait_caused_us);
        match write_rank(spec, dir, rank, synth) {
            Ok(path) => written.push(WrittenRank { path, clock_offset_us, data_loading_us, times_last, wait_caused_us }),
            Err(e) => failed = Some(e),
        }
        rank += 1;
    });
    match failed {
        Some(e) => Err(e),
        None => Ok(written),
    }
}

/// The name of rank `rank`'s file.
fn rank_file_name(spec: &JobSpec, rank: usize) -> String {
    if spec.gzip { format!("rank-{rank}.json.gz") } else { format!("rank-{rank}.json") }
}

/// The first line of every trace `synth` writes carries this key: a file that
/// has it may be replaced by another synthetic job, any other may not.
const MARKER: &[u8] = b"\"tracecastSynth\"";

/// Whether the trace at `path` was written by `synth` (its first bytes, inflated
/// when gzip, hold [`MARKER`]).
fn is_synthetic(path: &Path) -> bool {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(path) else { return false };
    let mut head = Vec::with_capacity(256);
    let mut raw = std::io::BufReader::new(file);
    let gzip = std::io::BufRead::fill_buf(&mut raw).is_ok_and(tracecast_ingest::kineto::is_gzip);
    let got =
        if gzip { flate2::read::MultiGzDecoder::new(raw).take(256).read_to_end(&mut head) } else { raw.take(256).read_to_end(&mut head) };
    got.is_ok() && head.windows(MARKER.len()).any(|w| w == MARKER)
}

/// Refuses to write into `dir` when it holds trace files a synthetic job may
/// not replace: a trace `synth` did not write (someone's real trace), or one
/// this job would not overwrite (an earlier job's extra rank, which a job read
/// from the folder would mix with this one).
fn refuse_foreign_traces(spec: &JobSpec, dir: &Path) -> Result<(), WriteError> {
    let names: Vec<String> = (0..spec.ranks as usize).map(|r| rank_file_name(spec, r)).collect();
    refuse_to_replace(dir, &names)
}

/// Refuses to write the synthetic traces `names` into `dir` when it holds a
/// trace that is not one `synth` wrote, or one not among `names` (`demo`
/// unpacks its bundled job under the same rule).
pub fn refuse_to_replace(dir: &Path, names: &[String]) -> Result<(), WriteError> {
    let Ok(files) = tracecast_ingest::job::trace_files(dir) else { return Ok(()) };
    let ours: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    for file in files {
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let cause = if !ours.contains(name.as_str()) {
            "the folder holds this file, which reads as a trace and which this job would not replace (a job read from the folder would mix the two): choose another or an empty folder"
        } else if !is_synthetic(&file) {
            "not a trace `tracecast synth` wrote: not overwritten (choose another or an empty folder)"
        } else {
            continue;
        };
        return Err(WriteError { path: file, cause: std::io::Error::new(std::io::ErrorKind::AlreadyExists, cause) });
    }
    Ok(())
}

/// Writes one rank's file.
fn write_rank(spec: &JobSpec, dir: &Path, rank: usize, synth: SynthRank) -> Result<PathBuf, WriteError> {
    {
        let text = synth.json;
        let path = dir.join(rank_file_name(spec, rank));
        let bytes = if spec.gzip {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(9));
            enc.write_all(text.as_bytes()).and_then(|_| enc.finish()).map_err(|cause| WriteError { path: path.clone(), cause })?
        } else {
            text.into_bytes()
        };
        tracecast_ingest::output::write_atomic(&path, &bytes)
            .map_err(|e| WriteError { path: path.clone(), cause: std::io::Error::other(e.to_string()) })?;
        Ok(path)
    }
}
