//! Analytical projection and strategy search: inference bounded by memory
//! traffic, a search over a large cluster that respects memory, and the
//! projection's internal consistency.

use tracecast_calibrate::Catalog;
use tracecast_calibrate::catalog::Dtype;
use tracecast_replay::workload::llm::{Cluster, Plan, SystemOverrides, Task, Transformer, project};
use tracecast_replay::workload::search::{SearchSpace, front, search};

fn cluster(gpu: &str, gpus: u32) -> Cluster {
    Cluster::from_catalog(&Catalog::builtin(), gpu, gpus, Dtype::Bf16, None).unwrap()
}

#[test]
fn decode_is_bounded_below_by_weights_and_kv_cache_over_hbm_bandwidth() {
    let model = Transformer::preset("llama2-70b").unwrap();
    let c = cluster("h100-sxm", 8);
    let plan = Plan::parse("tp=8").unwrap();
    let prefill = project(&model, &c, &plan, Task::Prefill { batch: 8, prompt: 2048 }).unwrap();
    let ttft = prefill.ttft_ms.unwrap();
    assert!(prefill.fits_memory, "{prefill:?}");
    let mut last_tpot = 0.0;
    for context in [512u32, 2048, 8192] {
        for batch in [1u32, 16, 64] {
            let d = project(&model, &c, &plan, Task::Decode { batch, context }).unwrap();
            let tpot = d.tpot_ms.unwrap();
            // Every step reads this GPU's weights and its share of the KV cache from HBM.
            let bytes = (d.memory.weights_gb + d.memory.kv_cache_gb) * 1e9;
            let bound_ms = bytes / c.hbm_bw * 1e3;
            println!("context {context:>5} batch {batch:>3}: TPOT {tpot:.3} ms, bound {bound_ms:.3} ms, TTFT(8×2048) {ttft:.1} ms");
            assert!(tpot >= bound_ms, "TPOT {tpot} below the memory bound {bound_ms}");
            // Its compute within a small factor of it: decode is memory-bound at these batches.
            // (Its 160 tensor-parallel all-reduces per token come on top, at NCCL's measured
            // small-message times on an H100 node: 25–35 µs each.)
            let compute = d.times.compute_ms;
            assert!(compute < 3.0 * bound_ms + 1.0, "compute {compute} far above the bound {bound_ms}");
            if batch == 16 {
                assert!(tpot > last_tpot, "longer contexts read more KV cache");
                last_tpot = tpot;
            }
        }
    }
    // A step of one token per sequence is far cheaper than a prefill of 2048.
    assert!(ttft > 20.0 * last_tpot / 4.0);
    // Prefill time grows with the prompt, its attention quadratically (16× the FLOPs for 4×
    // the prompt); the GEMMs less than linearly (larger shapes run nearer the peak).
    let p = |prompt| project(&model, &c, &plan, Task::Prefill { batch: 1, prompt }).unwrap();
    let (short, long) = (p(2048), p(8192));
    let attention = |x: &tracecast_replay::workload::Projection| x.times.by_kind_ms.get("attention").copied().unwrap_or(0.0);
    assert!(attention(&long) > 8.0 * attention(&short), "{} {}", attention(&long), attention(&short));
    assert!(long.ttft_ms.unwrap() > 3.0 * short.ttft_ms.unwrap(), "{:?} {:?}", long.ttft_ms, short.ttft_ms);
}

/// A mixture of experts decoding one token reads the weights of the experts it was routed to,
/// not all of them: with top-8 routing, a model of 128 experts and one of 512 (the same active
/// parameters) take the same time per token at batch 1, within a bound of those weights and the
/// KV cache over HBM; a batch that routes to every expert reads them all.
#[test]
fn moe_decode_reads_the_experts_its_tokens_touch() {
    let c = cluster("h100-sxm", 1);
    let plan = Plan::parse("tp=1").unwrap();
    let base = Transformer::preset("qwen3-30b-a3b").unwrap();
    let mut wide = base.clone();
    wide.experts *= 4.0;
    let tpot = |m: &Transformer, batch: u32| project(m, &c, &plan, Task::Decode { batch, context: 4096 }).unwrap().tpot_ms.unwrap();
    let (one, one_wide) = (tpot(&base, 1), tpot(&wide, 1));
    assert!((one_wide / one - 1.0).abs() < 0.02, "batch 1: {one} ms with {} experts, {one_wide} ms with {}", base.experts, wide.experts);
    // Active weights at 2 bytes: under 3.4 B parameters a token, read at the HBM bandwidth at most once.
    let active_bound_ms = 3.4e9 * 2.0 / c.hbm_bw * 1e3;
    assert!(one < 2.0 * active_bound_ms, "{one} ms against {active_bound_ms} ms");
    // 64 tokens × 8 experts cover the 128: all of them read, more than 4× the one token's time.
    assert!(tpot(&base, 64) > 4.0 * one, "{} against {one}", tpot(&base, 64));
    // 16 tokens make 128 (token, expert) pairs but, routed uniformly, reach 128·(1 − (120/128)^16)
    // ≈ 82 experts, not all 128: well under the time of reading them all.
    assert!(tpot(&base, 16) < 0.8 * tpot(&base, 64), "{} against {}", tpot(&base, 16), tpot(&base, 64));
}

/// A sliding window shortens the cache a windowed layer reads, not the kernel's fixed cost:
/// GPT-OSS's time per token never falls as its context grows past its 128-token window (its
/// attention had gone 0.163 → 0.095 ms from 128 to 1024 tokens).
#[test]
fn decode_time_per_token_grows_with_the_context_under_a_sliding_window() {
    let model = Transformer::preset("gpt-oss-120b").unwrap();
    let c = cluster("h100-sxm", 4);
    let plan = Plan::parse("tp=4").unwrap();
    let attention = |context: u32| {
        let p = project(&model, &c, &plan, Task::Decode { batch: 1, context }).unwrap();
        p.times.by_kind_ms.get("attention").copied().unwrap()
    };
    let mut last = 0.0;
    for context in [64u32, 128, 192, 256, 512, 1024, 4096, 16384] {
        let a = attention(context);
        assert!(a >= last, "{context} tokens: attention {a} ms after {last} ms");
        last = a;
    }
}

#[test]
fn search_on_llama2_70b_over_2048_a100s_fits_memory_and_beats_plain_fsdp() {
    let model = Transformer::preset("llama2-70b").unwrap();
    let c = cluster("a100-80gb", 2048);
    let r = search(&model, &c, Task::Train, &SearchSpace::default());
    assert!(r.simulated > 100, "{} plans", r.simulated);
    assert!(!r.ranked.is_empty());
    for p in &r.ranked {
        assert!(p.fits_memory && p.memory_gb_per_gpu <= 80.0, "{} needs {} GB", p.plan, p.memory_gb_per_gpu);
        assert!(p.throughput > 0.0 && p.times.iteration_ms > 0.0);
    }
    // Ranked best first.
    assert!(r.ranked.windows(2).all(|w| w[0].throughput >= w[1].throughput));
    let base = r.baseline.as_ref().expect("a plain FSDP plan fits (with recomputation)");
    assert!(base.plan.starts_with("tp=1,pp=1,fsdp=2048"), "{}", base.plan);
    let x = r.speedup_over_baseline.unwrap();
    println!(
        "best {} at {:.1} samples/s; plain FSDP {} at {:.1}: {x:.2}×",
        r.ranked[0].plan, r.ranked[0].throughput, base.plan, base.throughput
    );
    // The speed-up is over the fastest plain FSDP plan, of a best plan that is not one:
    // (`x >= 1` could not fail, the baseline being one of the ranked plans.)
    let plain = |p: &tracecast_replay::workload::Projection| p.plan.starts_with("tp=1,pp=1,fsdp=");
    assert!(r.ranked.iter().filter(|p| plain(p)).all(|p| p.throughput <= base.throughput), "a faster plain FSDP plan than {}", base.plan);
    assert!(!plain(&r.ranked[0]), "{}", r.ranked[0].plan);
    assert!((x - r.ranked[0].throughput / base.throughput).abs() < 1e-12, "{x}");
    // The ranked numbers are the projections of the plans they name (re-parsed from the
    // name, priced again), and the best beats plain FSDP by a margin, not by a rounding.
    let again =
        |p: &tracecast_replay::workload::Projection| project(&model, &c, &Plan::parse(&p.plan).unwrap(), Task::Train).unwrap().throughput;
    let (best, plain_fsdp) = (again(&r.ranked[0]), again(base));
    assert_eq!((best, plain_fsdp), (r.ranked[0].throughput, base.throughput));
    assert!(best > 1.1 * plain_fsdp, "{best} vs {plain_fsdp}");
    // Every plan at this batch trains on 2048 sequences.
    assert!(r.ranked.iter().all(|p| (p.global_batch - 2048.0).abs() < 1e-9));
    // Only plans a framework runs: ZeRO-2 without a pipeline, pipelines with ZeRO-1 or FSDP.
    let parsed: Vec<Plan> = r.ranked.iter().map(|p| Plan::parse(&p.plan).unwrap()).collect();
    assert!(
        parsed.iter().all(|p| !(p.zero == 2 && p.pp > 1)),
        "a ZeRO-2 pipeline among {:?}",
        r.ranked.iter().map(|p| &p.plan).collect::<Vec<_>>()
    );
    assert!(parsed.iter().any(|p| p.zero == 2) && parsed.iter().any(|p| p.pp > 1 && p.zero >= 1));
}

#[test]
fn pareto_front_is_monotone_and_starts_where_the_model_fits() {
    let model = Transformer::preset("llama2-13b").unwrap();
    let c = cluster("h100-sxm", 256);
    let counts = [8, 16, 32, 64, 128, 256];
    let points = front(&model, &c, Task::Train, &SearchSpace::default(), &counts);
    assert!(!points.is_empty());
    let on_front: Vec<_> = points.iter().filter(|p| p.pareto).collect();
    assert!(on_front.windows(2).all(|w| w[1].throughput > w[0].throughput && w[1].gpus > w[0].gpus));
    // More GPUs at the same batch per GPU: more throughput.
    assert!(points.last().unwrap().throughput > points[0].throughput * 4.0);
}

#[test]
fn projection_totals_are_consistent() {
    let model = Transformer::preset("llama3-8b").unwrap();
    let c = cluster("h100-sxm", 64);
    for spec in ["fsdp=64", "tp=8,dp=8", "tp=4,pp=2,dp=8,gbs=256", "tp=8,pp=8,gbs=64,sp,recompute", "dp=64,zero=1"] {
        let plan = Plan::parse(spec).unwrap();
        let p = project(&model, &c, &plan, Task::Train).unwrap();
        let t = &p.times;
        let kinds: f64 = t.by_kind_ms.values().sum();
        assert!((kinds - t.compute_ms - t.comm_ms).abs() < 1e-6 * kinds, "{spec}");
        // The iteration covers the compute, and the exposed communication is the rest (less the bubble).
        assert!(t.iteration_ms + 1e-9 >= t.compute_ms + t.bubble_ms, "{spec}: {t:?}");
        assert!((t.iteration_ms - t.compute_ms - t.bubble_ms - t.exposed_comm_ms).abs() < 1e-6 * t.iteration_ms, "{spec}");
        assert!(p.throughput > 0.0 && p.fits_memory, "{spec}: {} GB", p.memory_gb_per_gpu);
    }
    // Inference through a pipeline: every stage once, the output head once, the same totals identity;
    // and the same work as one stage plus the stage crossings.
    let prefill = Task::Prefill { batch: 4, prompt: 2048 };
    let one = project(&model, &cluster("h100-sxm", 8), &Plan::parse("tp=8").unwrap(), prefill).unwrap().times;
    for spec in ["tp=8,pp=4,dp=2", "tp=8,pp=8"] {
        let plan = Plan::parse(spec).unwrap();
        let t = project(&model, &c, &plan, prefill).unwrap().times;
        assert!((t.iteration_ms - t.compute_ms - t.exposed_comm_ms).abs() < 1e-6 * t.iteration_ms, "{spec}: {t:?}");
        assert!((t.compute_ms - one.compute_ms).abs() < 0.02 * one.compute_ms, "{spec}: {} vs {}", t.compute_ms, one.compute_ms);
        assert!(t.iteration_ms >= one.iteration_ms, "{spec}");
    }
    // Faster links never slow an iteration down; a slower network exposes more communication.
    let plan = Plan::parse("fsdp=64").unwrap();
    let network = |nic: f64| {
        let c = SystemOverrides { nic_gbps_per_gpu: Some(nic), ..Default::default() }.apply(c.clone()).unwrap();
        project(&model, &c, &plan, Task::Train).unwrap().times
    };
    // A quarter of, the same as, and four times the node preset's 50 GB/s of network per GPU.
    let (slow, preset, fast) = (network(12.5), network(50.0), network(200.0));
    assert_eq!(preset.iteration_ms, project(&model, &c, &plan, Task::Train).unwrap().times.iteration_ms);
    assert!(fast.iteration_ms <= preset.iteration_ms && preset.iteration_ms < slow.iteration_ms, "{fast:?} {preset:?} {slow:?}");
    assert!(fast.exposed_comm_ms <= preset.exposed_comm_ms && preset.exposed_comm_ms < slow.exposed_comm_ms);
}

#[test]
fn fine_tuning_with_frozen_layers_is_cheaper_in_time_and_memory() {
    let model = Transformer::preset("llama2-7b").unwrap();
    let c = cluster("a100-80gb", 8);
    let full = project(&model, &c, &Plan::parse("fsdp=8").unwrap(), Task::Train).unwrap();
    let half = project(&model, &c, &Plan::parse("fsdp=8,frozen=16").unwrap(), Task::Train).unwrap();
    let most = project(&model, &c, &Plan::parse("fsdp=8,frozen=30").unwrap(), Task::Train).unwrap();
    assert!(half.times.iteration_ms < full.times.iteration_ms && most.times.iteration_ms < half.times.iteration_ms);
    assert!(half.memory.optimizer_gb < full.memory.optimizer_gb && half.memory.activations_gb < full.memory.activations_gb);
    // The forward pass is the same: a step never gets cheaper than a third of the full one.
    assert!(most.times.iteration_ms > full.times.iteration_ms / 3.0);
    assert!(project(&model, &c, &Plan::parse("fsdp=8,frozen=32").unwrap(), Task::Train).is_err());
}

#[test]
fn fsdp_prefetch_hides_gathers_and_costs_memory() {
    let model = Transformer::preset("llama2-13b").unwrap();
    let c = cluster("a100-80gb", 64);
    let at = |depth: u32| project(&model, &c, &Plan::parse(&format!("fsdp=64,prefetch={depth},recompute")).unwrap(), Task::Train).unwrap();
    let (none, one, two) = (at(0), at(1), at(2));
    // Same gathers in all; prefetching overlaps them with compute.
    assert!((none.times.by_kind_ms["all_gather"] - one.times.by_kind_ms["all_gather"]).abs() < 1e-6);
    assert!(none.times.exposed_comm_ms > one.times.exposed_comm_ms, "{} vs {}", none.times.exposed_comm_ms, one.times.exposed_comm_ms);
    assert!(two.times.iteration_ms <= one.times.iteration_ms + 1e-6);
    // Each layer prefetched is held gathered.
    assert!(two.memory.weights_gb > one.memory.weights_gb && one.memory.weights_gb > none.memory.weights_gb);
    assert!(two.plan.contains("prefetch=2"));
}

/// Issue 25: plans whose degrees multiply past u32 are refused with the product named,
/// by the parser and by the projection of a plan built by hand; none panics.
#[test]
fn overflowing_degrees_are_errors_naming_the_product() {
    let e = Plan::parse("tp=65536,pp=65536").unwrap_err().to_string();
    assert!(e.contains("tp × cp × pp × dp = 65536 × 1 × 65536 × 1 overflows"), "{e}");
    let e = Plan::parse("cp=65536,dp=65536").unwrap_err().to_string();
    assert!(e.contains("tp × cp × pp × dp = 1 × 65536 × 1 × 65536 overflows"), "{e}");
    let e = Plan::parse("fsdp=65536,mb=65536,gbs=65536").unwrap_err().to_string();
    assert!(e.contains("dp × mb = 65536 × 65536 overflows"), "{e}");
    // Products that fit are still plans.
    assert_eq!(Plan::parse("tp=8,pp=65536").unwrap().gpus(), 8 * 65536);
    let by_hand = Plan { tp: 65536, pp: 65536, ..Plan::default() };
    assert!(by_hand.checked_gpus().is_err());
    let model = Transformer::preset("llama2-7b").unwrap();
    let e = project(&model, &cluster("h100-sxm", 8), &by_hand, Task::Train).unwrap_err().to_string();
    assert!(e.contains("tp × cp × pp × dp = 65536 × 1 × 65536 × 1 overflows"), "{e}");
    let by_hand = Plan { pp: 65536, vpp: 65536, ..Plan::default() };
    assert!(project(&model, &cluster("h100-sxm", 65536), &by_hand, Task::Train).is_err());
    // A search over microbatch sizes whose dp × mb cannot be formed rejects those plans.
    let space = SearchSpace { microbatch_sizes: vec![u32::MAX, 0], ..SearchSpace::default() };
    let r = search(&model, &cluster("h100-sxm", 8), Task::Train, &space);
    assert_eq!((r.simulated, r.ranked.len()), (0, 0));
    assert!(r.rejected > 0);
}

/// A search keeps the stack's settings on every plan: MPT-style Triton attention on A100
/// (FlashAttention-2's chart: 68 against FA2's 155 TFLOP/s at 128-wide causal heads) makes every
/// plan slower than with the fastest kernel; the keys the search chooses are refused.
#[test]
fn a_search_keeps_the_stacks_settings_on_every_plan() {
    let model = Transformer::preset("llama2-7b").unwrap();
    let c = cluster("a100-80gb", 16);
    let space = SearchSpace::default();
    let triton = space.clone().with("attention=fa-triton,bucket=40", Task::Train).unwrap();
    let (fast, slow) = (search(&model, &c, Task::Train, &space), search(&model, &c, Task::Train, &triton));
    assert!(!slow.ranked.is_empty());
    for p in &slow.ranked {
        assert!(p.plan.contains(",attention=fa-triton") && p.plan.contains(",bucket=40"), "{}", p.plan);
    }
    let best = |r: &tracecast_replay::workload::search::SearchResult| r.ranked[0].throughput;
    assert!(best(&slow) < best(&fast), "{} against {}", best(&slow), best(&fast));
    // The microbatch count and the stage split stay the search's (the batch is --gbs's).
    for key in ["gbs=64", "microbatches=4", "first=3", "mb=2,m=8"] {
        let e = space.clone().with(key, Task::Train).unwrap_err().to_string();
        assert!(e.contains("the search chooses"), "{key}: {e}");
    }
}

/// A degree, microbatch size, sequence parallelism or recomputation `--with` gives is pinned:
/// every plan keeps it (`pp=1` for a stack without pipelines), and the other keys stay the
/// search's. Without pins the best LLaMA-2 70B plan on 2048 A100s has a pipeline; with `pp=1`
/// none does, and the ranked plans are exactly the unpinned search's plans of pp=1.
#[test]
fn a_search_keeps_the_degrees_with_pins() {
    let model = Transformer::preset("llama2-70b").unwrap();
    let c = cluster("a100-80gb", 512);
    let space = SearchSpace { global_batch: 512, ..SearchSpace::default() };
    let free = search(&model, &c, Task::Train, &space);
    assert!(free.ranked[0].plan.contains(",pp=") && !free.ranked[0].plan.contains(",pp=1,"), "{}", free.ranked[0].plan);
    let no_pipeline = search(&model, &c, Task::Train, &space.clone().with("pp=1", Task::Train).unwrap());
    let of_pp1: Vec<&str> = free.ranked.iter().map(|p| p.plan.as_str()).filter(|p| p.contains(",pp=1,")).collect();
    let pinned: Vec<&str> = no_pipeline.ranked.iter().map(|p| p.plan.as_str()).collect();
    assert!(!pinned.is_empty() && pinned == of_pp1, "{pinned:?}\n{of_pp1:?}");
    // Several pins at once: each plan keeps every one.
    let pins = space.clone().with("tp=4,zero=1,mb=1,recompute=full", Task::Train).unwrap();
    assert_eq!(pins.pinned(), ["tp=4", "zero=1", "mb=1", "recompute=full"]);
    let r = search(&model, &c, Task::Train, &pins);
    assert!(!r.ranked.is_empty());
    for p in &r.ranked {
        assert!(p.plan.starts_with("tp=4,") && p.plan.contains(",zero=1,") && p.plan.contains(",mb=1,"), "{}", p.plan);
        assert!(p.plan.contains(",recompute") && !p.plan.contains("recompute=selective"), "{}", p.plan);
    }
    assert!(pins.pins_out_baseline(true, 512) && r.baseline.is_none());
    // A pinned dp other than the GPU count, or vpp, leaves the baseline out too; `ddp` is data
    // parallelism without ZeRO, and a pinned `sp` is kept at every tensor-parallel degree.
    for pin in ["dp=128", "fsdp=256", "vpp=2", "ddp=512"] {
        assert!(space.clone().with(pin, Task::Train).unwrap().pins_out_baseline(true, 512), "{pin}");
    }
    assert!(!space.clone().with("fsdp=512", Task::Train).unwrap().pins_out_baseline(true, 512));
    let ddp = search(&model, &c, Task::Train, &space.clone().with("ddp=16", Task::Train).unwrap());
    assert!(!ddp.ranked.is_empty(), "no DDP plan of 16 replicas");
    assert!(
        ddp.ranked.iter().all(|p| p.plan.contains(",dp=16,") && !p.plan.contains("zero=")),
        "{:?}",
        ddp.ranked.first().map(|p| &p.plan)
    );
    let sp = search(&model, &c, Task::Train, &space.clone().with("sp", Task::Train).unwrap());
    assert!(!sp.ranked.is_empty() && sp.ranked.iter().all(|p| p.plan.contains(",sp")), "{:?}", sp.ranked.first().map(|p| &p.plan));
}

/// Ranked by latency, a decode search puts first the plan of the shortest time per output token,
/// which is not the plan of the most tokens/s: LLaMA-2 70B serving 16 sequences a replica on 64
/// H100s reads its weights fastest split over a whole node (tp=8), and serves the most tokens
/// with more replicas of fewer GPUs. The set of plans is the throughput ranking's, reordered.
#[test]
fn a_search_by_latency_ranks_the_shortest_step_first() {
    let model = Transformer::preset("llama2-70b").unwrap();
    let c = cluster("h100-sxm", 64);
    let task = Task::Decode { batch: 16, context: 4096 };
    let by_throughput = search(&model, &c, task, &SearchSpace::default());
    let latency = SearchSpace { objective: tracecast_replay::workload::search::Objective::Latency, ..SearchSpace::default() };
    let by_latency = search(&model, &c, task, &latency);
    let shortest = by_throughput.ranked.iter().map(|p| p.times.iteration_ms).fold(f64::INFINITY, f64::min);
    assert_eq!(by_latency.ranked[0].times.iteration_ms, shortest);
    assert!(by_latency.ranked.windows(2).all(|w| w[0].times.iteration_ms <= w[1].times.iteration_ms));
    assert!(by_latency.ranked[0].plan.starts_with("tp=8,") && by_latency.ranked[0].plan != by_throughput.ranked[0].plan);
    let plans = |r: &tracecast_replay::workload::search::SearchResult| {
        let mut v: Vec<String> = r.ranked.iter().map(|p| p.plan.clone()).collect();
        v.sort();
        v
    };
    assert_eq!(plans(&by_latency), plans(&by_throughput));
}

/// `etp=1` is a setting a search keeps (Megatron-Bridge's MoE recipes run whole experts): every
/// ranked Mixtral plan on 64 H100s with tensor and expert parallelism folds its experts (and so
/// has sequence parallelism, which folding needs), and another `etp` is refused.
#[test]
fn a_search_keeps_whole_experts_where_the_stack_runs_them() {
    let model = Transformer::preset("mixtral-8x7b").unwrap();
    let c = cluster("h100-sxm", 64);
    let whole = SearchSpace::default().with("etp=1", Task::Train).unwrap();
    let r = search(&model, &c, Task::Train, &whole);
    let folded: Vec<&str> = r.ranked.iter().map(|p| p.plan.as_str()).filter(|p| !p.starts_with("tp=1,") && p.contains(",ep=")).collect();
    assert!(!folded.is_empty(), "{:?}", r.ranked.iter().map(|p| &p.plan).collect::<Vec<_>>());
    for p in folded {
        assert!(p.contains(",etp=1") && p.contains(",sp"), "{p}");
    }
    assert!(SearchSpace::default().with("etp=2", Task::Train).unwrap_err().to_string().contains("etp=2: 1 (whole experts"));
}

/// `search --with` hears of each setting it asked every plan to keep that a plan did not price
/// as asked, by key: the notes had been matched by their words ("not applied", "instead").
#[test]
fn search_with_settings_hears_of_each_it_stated_that_a_plan_did_not_price() {
    let model = Transformer::preset("llama2-7b").unwrap();
    let c = cluster("h100-sxm", 8);
    // ZeRO-2 shards no weights (prefetch) and reduce-scatters its gradients (bucket); tp=1 (tp_overlap).
    let plan = Plan::parse("dp=8,zero=2,mb=1,gbs=8,prefetch=2,bucket=25,tp_overlap,attention=fa2").unwrap();
    let p = project(&model, &c, &plan, Task::Train).unwrap();
    let keys: Vec<&str> = p.unpriced_keys.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, ["tp_overlap", "prefetch", "bucket"], "{:?}", p.notes);
    // Each is in the notes as well, in its place.
    assert!(p.unpriced_keys.iter().all(|(k, n)| n.starts_with(k) && p.notes.contains(n)));
    let space = SearchSpace::default().with("bucket=25,attention=fa2", Task::Train).unwrap();
    let heard: Vec<&str> = space.unpriced_settings(&p).collect();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(heard[0].starts_with("bucket=25: not applied"), "{heard:?}");
    // A plan that prices every stated key has nothing to say.
    let dp = project(&model, &c, &Plan::parse("dp=8,mb=1,gbs=8,bucket=25").unwrap(), Task::Train).unwrap();
    assert_eq!(space.unpriced_settings(&dp).count(), 0, "{:?}", dp.unpriced_keys);
}
