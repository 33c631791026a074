//! Strategy search: every feasible plan of a model on a cluster (degrees
//! that divide, memory that fits), each simulated, ranked by throughput;
//! the best against a named baseline, and the Pareto front of throughput
//! against GPU count.

use serde::Serialize;

use super::Projection;
use super::llm::{Cluster, Plan, StatedKeys, Task, Transformer, memory, project};

/// What to search.
#[derive(Debug, Clone)]
pub struct SearchSpace {
    /// Sequences per iteration over the whole cluster (training).
    pub global_batch: u32,
    /// Microbatch sizes to try.
    pub microbatch_sizes: Vec<u32>,
    /// Try activation recomputation.
    pub recompute: bool,
    /// Try sequence parallelism.
    pub sequence_parallel: bool,
    /// What every plan keeps, the software stack's settings ([`SearchSpace::with`]): the
    /// attention kernel, gradient buckets, FP8, dropout, overlap options; the degrees,
    /// microbatches and recomputation are the search's.
    pub settings: Plan,
    /// The keys `settings` stated: what a plan's [`Projection::unpriced_keys`] are held against.
    pub stated: StatedKeys,
    /// What the plans are ranked by.
    pub objective: Objective,
}

/// What a search ranks plans by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// Samples (decode: tokens) per second over the cluster, the most first.
    #[default]
    Throughput,
    /// The step's time, the shortest first: time per output token in decode, time to first
    /// token in prefill (a serving budget); in training, at a fixed global batch, the same
    /// order as throughput.
    Latency,
}

impl Objective {
    /// The objective named `name` (`throughput`, `latency`).
    pub fn named(name: &str) -> Option<Objective> {
        match name {
            "throughput" => Some(Objective::Throughput),
            "latency" => Some(Objective::Latency),
            _ => None,
        }
    }

    /// How good a plan of `throughput` and step time `iteration_ms` is by this objective: the
    /// larger the better (a ranked plan and a point of the front alike).
    fn score(self, throughput: f64, iteration_ms: f64) -> f64 {
        match self {
            Objective::Throughput => throughput,
            Objective::Latency => -iteration_ms,
        }
    }
}

impl Default for SearchSpace {
    fn default() -> Self {
        SearchSpace {
            global_batch: 0,
            microbatch_sizes: vec![1, 2, 4, 8, 16, 32, 64],
            recompute: true,
            sequence_parallel: true,
            settings: Plan::default(),
            stated: StatedKeys::default(),
            objective: Objective::Throughput,
        }
    }
}

impl SearchSpace {
    /// This space with `settings` (plan keys, `attention=fa2,bucket=76,tp_overlap`) kept by
    /// every plan; a key the search chooses (a degree, the microbatches, recomputation) is refused,
    /// and for inference (`task`) a training setting.
    pub fn with(mut self, settings: &str, task: super::llm::Task) -> Result<SearchSpace, crate::Error> {
        let (plan, stated) = Plan::parse_stated(settings)?;
        stated.refuse_training_keys(task).map_err(|e| crate::Error::Plan(format!("{settings:?}: {e}")))?;
        // A degree, the microbatch size, sequence parallelism or recomputation given is pinned
        // (`pp=1` where the stack has no pipeline); the microbatch count is `--gbs`'s and the
        // stage split the search's.
        let chosen: Vec<&str> = StatedKeys::layout_keys().iter().copied().filter(|k| stated.contains(k) && !PINNABLE.contains(k)).collect();
        if !chosen.is_empty() {
            return Err(crate::Error::Plan(format!(
                "{}: the search chooses {} itself{}; settings are what every plan keeps ({}), or a degree it keeps ({})",
                settings,
                chosen.join(", "),
                if chosen.iter().any(|k| ["gbs", "microbatches", "m"].contains(k)) { " (the global batch is --gbs)" } else { "" },
                StatedKeys::setting_keys().join(", "),
                PINNABLE.join(", ")
            )));
        }
        // `etp=1` keeps whole experts on every candidate; another value fails to parse here
        // (the settings' text has tp = 1), since split experts (etp = tp) are each plan's default.
        self.settings = plan;
        self.stated = stated;
        Ok(self)
    }

    /// Whether `--with` pinned one of `keys` (its value is the settings').
    fn pins(&self, keys: &[&str]) -> bool {
        keys.iter().any(|k| self.stated.contains(k))
    }

    /// The layout keys `--with` pinned, as it gave them (`tp=8`, `recompute=full`), in the
    /// order of [`PINNABLE`]; empty where none.
    pub fn pinned(&self) -> Vec<String> {
        let s = &self.settings;
        let recompute = match (s.recompute, s.selective, s.op_sac) {
            (true, _, _) => "full",
            (_, true, true) => "op",
            (_, true, false) => "selective",
            _ => "none",
        };
        let shown = [
            (&["tp"][..], format!("tp={}", s.tp)),
            (&["pp"], format!("pp={}", s.pp)),
            (&["dp", "ddp", "fsdp"], format!("dp={}", s.dp)),
            (&["zero", "fsdp", "ddp"], format!("zero={}", s.zero)),
            (&["ep"], format!("ep={}", s.ep)),
            (&["cp"], format!("cp={}", s.cp)),
            (&["mb", "microbatch"], format!("mb={}", s.microbatch)),
            (&["sp"], format!("sp={}", if s.sp { "on" } else { "off" })),
            (&["recompute"], format!("recompute={recompute}")),
            (&["vpp"], format!("vpp={}", s.vpp)),
        ];
        shown.into_iter().filter(|(keys, _)| self.pins(keys)).map(|(_, text)| text).collect()
    }

    /// Whether the pins leave out the baseline's layout on `gpus` GPUs (tp = pp = cp = ep =
    /// vpp = 1, data parallelism over all of them and, for training, ZeRO-3).
    pub fn pins_out_baseline(&self, train: bool, gpus: u32) -> bool {
        let s = &self.settings;
        (self.pins(&["tp"]) && s.tp != 1)
            || (self.pins(&["pp"]) && s.pp != 1)
            || (self.pins(&["dp", "ddp", "fsdp"]) && s.dp != gpus)
            || (train && self.pins(&["zero", "fsdp", "ddp"]) && s.zero != 3)
            || (self.pins(&["ep"]) && s.ep != 1)
            || (self.pins(&["cp"]) && s.cp != 1)
            || (self.pins(&["vpp"]) && s.vpp != 1)
    }

    /// The notes of `plan` on the settings it was asked to keep and did not price as asked
    /// (not applied, or priced by another rule): what `--with` must hear of.
    pub fn unpriced_settings<'p>(&self, plan: &'p Projection) -> impl Iterator<Item = &'p str> {
        let stated = self.stated;
        plan.unpriced_keys.iter().filter(move |(key, _)| stated.contains(key)).map(|(_, note)| note.as_str())
    }
}

/// The layout keys `--with` may pin: every candidate keeps the value given.
const PINNABLE: [&str; 13] = ["tp", "pp", "dp", "ddp", "fsdp", "zero", "ep", "cp", "mb", "microbatch", "sp", "recompute", "vpp"];

/// Outcome of a search.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResult {
    /// Plans simulated (they fit in memory).
    pub simulated: usize,
    /// Plans rejected before simulation (degrees that do not divide, memory that does not fit).
    pub rejected: usize,
    /// Why they were: `rejected` by reason.
    pub rejected_why: Rejected,
    /// The feasible plans, best first.
    pub ranked: Vec<Projection>,
    /// What the baseline is: plain FSDP (training) or plain data parallelism (inference).
    pub baseline_name: &'static str,
    /// The best baseline plan (tp=1, pp=1; ZeRO-3 for training, replicas without
    /// expert parallelism for inference), when one fits.
    pub baseline: Option<Projection>,
    /// Throughput of the best plan over the baseline's (ranked by latency: the baseline's
    /// step time over the best plan's).
    pub speedup_over_baseline: Option<f64>,
    /// Plans left out of `ranked` because they price exactly as a ranked one (its plan → them).
    pub identical: std::collections::BTreeMap<String, Vec<String>>,
    /// Why the first plan the model refused was refused, in its words: a setting of `--with`
    /// that no plan can take (`frozen=32` of 32 layers, `fp8` on a GPU without an FP8 peak)
    /// is named by it, not only counted among degrees that do not divide.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused_for_one: Option<String>,
    /// A degree the search did not try, in words, with how to try it: context parallelism
    /// below [`CP_FROM_TOKENS`] (a search said "every feasible plan" and had left it out unsaid).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_tried: Option<String>,
}

/// Training sequences from which the search tries context parallelism: it splits attention's
/// s² work, which dominates only at long sequences, and the model prices it optimistically
/// there already (torchtitan's Llama 3.1 8B on 8 H100s at 32k–256k tokens: +42 % at cp=1 to
/// +81 % at cp=8, `validate` on the training runs), so shorter sequences are left to a pin.
pub const CP_FROM_TOKENS: f64 = 16384.0;

/// The plans a search rejected, by reason (they sum to [`SearchResult::rejected`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rejected {
    /// Data-parallel degree × microbatch size does not divide the global batch.
    pub batch: usize,
    /// The plan does not fit in the GPU's memory.
    pub memory: usize,
    /// The model refuses the plan (heads, layers or experts its degrees do not divide, …).
    pub refused: usize,
}

impl Rejected {
    /// In words, the reasons that count: `600 that do not fit in memory, 716 whose …`;
    /// `one_refused`: why the first refused plan was ([`SearchResult::refused_for_one`]).
    pub fn in_words(&self, one_refused: Option<&str>) -> String {
        let parts = [
            (self.memory, "that do not fit in memory"),
            (self.batch, "whose data-parallel degree × microbatch does not divide the global batch"),
        ];
        let mut said: Vec<String> = parts.iter().filter(|(n, _)| *n > 0).map(|(n, why)| format!("{n} {why}")).collect();
        if self.refused > 0 {
            said.push(format!(
                "{} the model or the settings refuse ({})",
                self.refused,
                one_refused
                    .map_or("degrees its heads, layers or experts do not divide, …".to_string(), |why| format!("the first: {why}"))
            ));
        }
        said.join(", ")
    }
}

fn divisors(n: u32) -> Vec<u32> {
    (1..=n).filter(|d| n.is_multiple_of(*d)).collect()
}

/// Every plan of `model` on `cluster` for `task`, simulated and ranked.
pub fn search(model: &Transformer, cluster: &Cluster, task: Task, space: &SearchSpace) -> SearchResult {
    let gpus = cluster.gpus;
    let gbs = if space.global_batch > 0 { space.global_batch } else { gpus };
    let mut ranked = Vec::new();
    let (mut simulated, mut why) = (0usize, Rejected::default());
    let mut refused_for_one: Option<String> = None;
    let pin = &space.settings;
    let tps: Vec<u32> =
        divisors(cluster.gpus_per_node).into_iter().filter(|t| gpus.is_multiple_of(*t) && (!space.pins(&["tp"]) || *t == pin.tp)).collect();
    let experts = model.experts as u32;
    let train = task == Task::Train;
    // Context parallelism pays for long sequences only (a pinned degree is tried at any length).
    let cp_tried = train && model.seq >= CP_FROM_TOKENS;
    // Recomputation: none, selective (the attention core: free with flash attention), full.
    let rcs: &[(bool, bool)] = if space.recompute && train { &[(false, false), (false, true), (true, false)] } else { &[(false, false)] };
    let rcs: Vec<(bool, bool)> =
        rcs.iter().copied().filter(|rc| !space.pins(&["recompute"]) || *rc == (pin.recompute, pin.selective)).collect();
    for &tp in &tps {
        // Every stage count that divides the layers, and uneven splits whose stages hold at
        // least 4 layers: with fewer, one layer more or less unbalances the stages by 25 % or
        // more, and the uneven schedule costs a longer simulation (its transient).
        let stage_counts = divisors(gpus / tp).into_iter().filter(|p| {
            (model.layers.is_multiple_of(*p as usize) || model.layers >= 4 * *p as usize) && (!space.pins(&["pp"]) || *p == pin.pp)
        });
        for pp in stage_counts {
            let cps: Vec<u32> = if space.pins(&["cp"]) {
                let c = pin.cp;
                let fits = (gpus / (tp * pp)).is_multiple_of(c) && (c == 1 || (model.seq as u64).is_multiple_of(2 * u64::from(c)));
                if fits { vec![c] } else { Vec::new() }
            } else if cp_tried {
                divisors(gpus / (tp * pp))
                    .into_iter()
                    .filter(|c| [1, 2, 4, 8].contains(c) && (model.seq as u64).is_multiple_of(2 * u64::from(*c)))
                    .collect()
            } else {
                vec![1]
            };
            // Interleaved 1F1B with two virtual stages where the layers allow it.
            // Two model chunks per stage where each stage's layers split into them evenly
            // (Megatron-Core's interleaved schedule needs equal chunks).
            let even = crate::workload::llm::unequal_chunks(model.layers, pp, 2, None, None).is_none();
            let vpps: &[u32] = if pp > 1 && train && model.layers >= 2 * pp as usize && even { &[1, 2] } else { &[1] };
            let vpps: Vec<u32> = if space.pins(&["vpp"]) { vec![pin.vpp] } else { vpps.to_vec() };
            for &cp in &cps {
                let dp = gpus / (tp * pp * cp);
                if space.pins(&["dp", "ddp", "fsdp"]) && dp != pin.dp {
                    continue;
                }
                // Expert parallelism inside the data-parallel ranks, or folded over tp × cp × dp.
                let eps: Vec<u32> =
                    if experts > 1 { divisors(tp * cp * dp).into_iter().filter(|e| experts.is_multiple_of(*e)).collect() } else { vec![1] };
                let eps: Vec<u32> = eps.into_iter().filter(|e| !space.pins(&["ep"]) || *e == pin.ep).collect();
                // ZeRO-2 under a pipeline is a plan no framework runs (DeepSpeed's pipeline engine
                // refuses ZeRO-2/3, Megatron's distributed optimizer is ZeRO-1; PyTorch's
                // pipelining shards with FSDP, zero=3 here): not offered.
                let zeros: &[u8] = match (dp * cp > 1 && train, pp > 1) {
                    (false, _) => &[0],
                    (true, false) => &[0, 1, 2, 3],
                    (true, true) => &[0, 1, 3],
                };
                // `ddp` is data parallelism without ZeRO (as `project` reads it), `fsdp` with ZeRO-3.
                let zeros: Vec<u8> = zeros.iter().copied().filter(|z| !space.pins(&["zero", "fsdp", "ddp"]) || *z == pin.zero).collect();
                let mbs: Vec<u32> = match (train, space.pins(&["mb", "microbatch"])) {
                    (true, true) => vec![pin.microbatch],
                    (true, false) => space.microbatch_sizes.clone(),
                    (false, _) => vec![1],
                };
                // Not in decode: a step of one token a sequence has nothing to split.
                let decode = matches!(task, Task::Decode { .. });
                let sps: &[bool] = if tp > 1 && space.sequence_parallel && !decode { &[false, true] } else { &[false] };
                // Pinned, every plan keeps it (a plan the model refuses with it is refused).
                let sps: Vec<bool> = if space.pins(&["sp"]) { vec![pin.sp] } else { sps.to_vec() };
                for &ep in &eps {
                    for &zero in &zeros {
                        for &mb in &mbs {
                            let microbatches = if train {
                                // A microbatch size from the space can be any number: dp × mb may not fit.
                                match dp.checked_mul(mb) {
                                    Some(per) if per > 0 && gbs.is_multiple_of(per) => gbs / per,
                                    _ => {
                                        why.batch += 1;
                                        continue;
                                    }
                                }
                            } else {
                                1
                            };
                            for &sp in &sps {
                                for &(recompute, selective) in &rcs {
                                    for &vpp in &vpps {
                                        // Interleaving needs the microbatches to divide by the stages
                                        // (else it would be the plain 1F1B plan again, under another name).
                                        if vpp > 1 && !microbatches.is_multiple_of(pp) {
                                            continue;
                                        }
                                        let plan = Plan {
                                            tp,
                                            pp,
                                            dp,
                                            zero,
                                            sp,
                                            ep,
                                            microbatch: mb,
                                            microbatches,
                                            recompute,
                                            selective,
                                            vpp,
                                            cp,
                                            // The rest as the settings say, by default as today's frameworks
                                            // run (flash attention, 16-bit GEMMs, no dropout, overlapped
                                            // gradients, Megatron's split).
                                            ..space.settings.clone()
                                        };
                                        // Memory first: a plan that cannot fit is not simulated.
                                        if memory(model, &plan, task).total_gb() * 1e9 > cluster.hbm_bytes {
                                            why.memory += 1;
                                            continue;
                                        }
                                        match project(model, cluster, &plan, task) {
                                            Ok(p) if p.fits_memory => {
                                                simulated += 1;
                                                ranked.push(p);
                                            }
                                            Ok(_) => {
                                                simulated += 1;
                                                why.memory += 1;
                                            }
                                            Err(e) => {
                                                why.refused += 1;
                                                refused_for_one.get_or_insert_with(|| e.to_string());
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    // Of equal throughputs the plan of fewer words first, then by name: the simpler of two that
    // price alike is the one shown, whatever `--with` adds (with `tp_overlap` the plan with
    // `recompute=selective` had sorted first by name).
    let settings = |p: &Projection| p.plan.matches(',').count();
    let score = |p: &Projection| space.objective.score(p.throughput, p.times.iteration_ms);
    // By the objective, then (latency) the higher throughput of two equally fast steps.
    ranked.sort_by(|a, b| {
        score(b)
            .total_cmp(&score(a))
            .then_with(|| b.throughput.total_cmp(&a.throughput))
            .then_with(|| settings(a).cmp(&settings(b)))
            .then_with(|| a.plan.cmp(&b.plan))
    });
    // Plans that price identically (selective recomputation with flash attention
    // recomputes nothing; …) are shown once: the simplest, the others listed.
    let mut identical: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::new();
    let mut kept: Vec<Projection> = Vec::with_capacity(ranked.len());
    for p in ranked {
        match kept.iter().rev().take_while(|k| score(k) == score(&p)).find(|k| same_price(k, &p)) {
            Some(k) => identical.entry(k.plan.clone()).or_default().push(p.plan),
            None => kept.push(p),
        }
    }
    let ranked = kept;
    let plain = |p: &&Projection| !p.plan.contains("ep=") && !p.plan.contains("cp=");
    let fsdp = |p: &&Projection| p.plan.starts_with("tp=1,pp=1,fsdp=") || (gpus == 1 && p.plan.starts_with("tp=1,pp=1,"));
    // Plain FSDP where one fits; else FSDP with the expert or context parallelism it needs
    // (Mixtral's experts, a long sequence), named as such.
    let (baseline_name, baseline) = if train {
        match ranked.iter().filter(fsdp).find(plain) {
            Some(p) => ("plain FSDP", Some(p.clone())),
            None => ("FSDP without tensor or pipeline parallelism", ranked.iter().find(fsdp).cloned()),
        }
    } else {
        ("plain data parallelism", ranked.iter().find(|p| p.plan.starts_with("tp=1,pp=1,dp=") && plain(p)).cloned())
    };
    let speedup_over_baseline = match (ranked.first(), &baseline, space.objective) {
        (Some(best), Some(b), Objective::Throughput) if b.throughput > 0.0 => Some(best.throughput / b.throughput),
        (Some(best), Some(b), Objective::Latency) if best.times.iteration_ms > 0.0 => Some(b.times.iteration_ms / best.times.iteration_ms),
        _ => None,
    };
    let rejected = why.batch + why.memory + why.refused;
    let not_tried = (train && !cp_tried && !space.pins(&["cp"])).then(|| {
        format!(
            "context parallelism was not tried: the search tries it from {CP_FROM_TOKENS} tokens a sequence, and this model's is {} (--with cp=N tries that degree)",
            model.seq
        )
    });
    SearchResult {
        simulated,
        rejected,
        rejected_why: why,
        ranked,
        baseline_name,
        baseline,
        speedup_over_baseline,
        identical,
        refused_for_one,
        not_tried,
    }
}

/// Whether two projections are the same in every number a user ranks by.
fn same_price(a: &Projection, b: &Projection) -> bool {
    a.throughput == b.throughput && a.times.iteration_ms == b.times.iteration_ms && a.memory_gb_per_gpu == b.memory_gb_per_gpu
}

/// One point of the front: the best plan at a GPU count.
#[derive(Debug, Clone, Serialize)]
pub struct FrontPoint {
    /// GPUs.
    pub gpus: u32,
    /// Best throughput, samples/s.
    pub throughput: f64,
    /// Its step's time, ms.
    pub iteration_ms: f64,
    /// Its plan.
    pub plan: String,
    /// Whether no smaller GPU count reaches this throughput (ranked by latency: this step
    /// time) — on the Pareto front.
    pub pareto: bool,
}

/// The best plan at each GPU count (`cluster` resized, nodes kept whole), and
/// which counts are on the Pareto front of throughput against GPUs.
pub fn front(model: &Transformer, cluster: &Cluster, task: Task, space: &SearchSpace, counts: &[u32]) -> Vec<FrontPoint> {
    let mut points: Vec<FrontPoint> = counts
        .iter()
        .filter_map(|&n| {
            let mut c = cluster.clone();
            c.gpus = n;
            // The global batch scales with the cluster (same batch per GPU).
            let mut s = space.clone();
            if s.global_batch > 0 {
                s.global_batch = (u64::from(s.global_batch) * u64::from(n) / u64::from(cluster.gpus.max(1))).max(1) as u32;
            }
            let r = search(model, &c, task, &s);
            r.ranked.first().map(|b| FrontPoint {
                gpus: n,
                throughput: b.throughput,
                iteration_ms: b.times.iteration_ms,
                plan: b.plan.clone(),
                pareto: false,
            })
        })
        .collect();
    points.sort_by_key(|p| p.gpus);
    let score = |p: &FrontPoint| space.objective.score(p.throughput, p.iteration_ms);
    // A plan of no throughput is on no front.
    let mut best = match space.objective {
        Objective::Throughput => 0.0,
        Objective::Latency => f64::NEG_INFINITY,
    };
    for p in &mut points {
        if score(p) > best {
            p.pareto = true;
            best = score(p);
        }
    }
    points
}
