//! tracecast's own DLRM model: bottom and top MLPs on every GPU (data
//! parallel or FSDP), embedding tables sharded table-wise, row-wise or
//! column-wise (or replicated), pooled lookups as HBM-bound work, and the
//! exchange each sharding needs — all-to-all of pooled embeddings (table- and
//! column-wise), reduce-scatter of partial sums (row-wise), all-reduce of
//! table gradients (replicated) — costed with the cluster's α-β links.

use serde::Serialize;

use super::llm::Cluster;
use super::madmax::{ModelConfig, TaskConfig};
use super::{IterationTimes, Key, Label, Lanes, Memory, OpKind, Projection, Timeline};

/// A DLRM: MLPs and pooled embedding tables.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dlrm {
    /// Name.
    pub name: String,
    /// Bottom MLP layers.
    pub bottom_layers: usize,
    /// Top MLP layers.
    pub top_layers: usize,
    /// MLP width.
    pub mlp_dim: f64,
    /// Embedding tables.
    pub tables: f64,
    /// Rows per table.
    pub rows: f64,
    /// Embedding dimension.
    pub dim: f64,
    /// Lookups pooled per table and sample.
    pub pooling: f64,
    /// Bytes per dense parameter.
    pub dense_bytes: f64,
    /// Bytes per embedding parameter.
    pub emb_bytes: f64,
}

impl Dlrm {
    /// The DLRM of a MAD-Max model file (type `DLRM`).
    pub fn from_madmax(m: &ModelConfig) -> Result<Dlrm, crate::Error> {
        if m.kind != "DLRM" {
            return Err(crate::Error::Model(format!("{} is not a DLRM", m.kind)));
        }
        Ok(Dlrm {
            name: m.name.clone(),
            bottom_layers: m.num_bot_mlp_layers,
            top_layers: m.num_top_mlp_layers,
            mlp_dim: m.mlp_dim,
            tables: m.num_tables,
            rows: m.entries_per_table,
            dim: m.emb_dim,
            pooling: m.pooling_size,
            dense_bytes: m.bytes_per_nonemb_param,
            emb_bytes: m.bytes_per_emb_param,
        })
    }
}

/// How the embedding tables are spread over the GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sharding {
    /// Whole tables per GPU; pooled embeddings exchanged all-to-all.
    TableWise,
    /// Every table split by rows over all GPUs; partial pooled sums reduce-scattered.
    RowWise,
    /// Every table split by columns; slices of the pooled embeddings exchanged all-to-all.
    ColumnWise,
    /// Tables replicated; their gradients all-reduced.
    DataParallel,
}

impl Sharding {
    /// Parses `tw`, `rw`, `cw`, `dp`.
    pub fn parse(s: &str) -> Result<Sharding, crate::Error> {
        Ok(match s {
            "tw" | "table" | "table-wise" => Sharding::TableWise,
            "rw" | "row" | "row-wise" => Sharding::RowWise,
            "cw" | "column" | "column-wise" => Sharding::ColumnWise,
            "dp" | "data-parallel" => Sharding::DataParallel,
            other => return Err(crate::Error::Plan(format!("embedding sharding {other:?}: tw, rw, cw or dp"))),
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Sharding::TableWise => "tw",
            Sharding::RowWise => "rw",
            Sharding::ColumnWise => "cw",
            Sharding::DataParallel => "dp",
        }
    }
}

/// A DLRM plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DlrmPlan {
    /// Samples per GPU and iteration.
    pub batch_per_gpu: u32,
    /// MLP weights sharded (FSDP) instead of replicated (DDP).
    pub fsdp: bool,
    /// Embedding sharding.
    pub sharding: Sharding,
}

impl DlrmPlan {
    /// The plan of a MAD-Max DLRM task: MLPs `ddp` or `fsdp`, tables `mp`
    /// (table-wise) or `ddp` (replicated).
    pub fn from_madmax(t: &TaskConfig) -> Result<DlrmPlan, crate::Error> {
        let fsdp = t.mlp_parallel.first().is_some_and(|s| s == "fsdp");
        if t.mlp_parallel.iter().any(|s| s == "tp") {
            return Err(crate::Error::Plan("tensor-parallel MLPs are not in tracecast's DLRM model (use --assumptions madmax)".into()));
        }
        let sharding = match t.emb_parallel.first().map(String::as_str) {
            Some("mp") | None => Sharding::TableWise,
            Some("ddp") => Sharding::DataParallel,
            Some(other) => return Err(crate::Error::Plan(format!("emb_parallel {other:?}"))),
        };
        Ok(DlrmPlan { batch_per_gpu: t.local_mlp_bs.max(1.0) as u32, fsdp, sharding })
    }

    /// [`DlrmPlan::from_madmax`] run on `gpus` GPUs, `resized` where the user chose that count:
    /// tracecast's DLRM runs every GPU with one global batch, so a task whose degrees are of
    /// another count (unless resized; then said in the notes returned) or whose embeddings take
    /// another global batch than its MLPs is another job, refused as MAD-Max's code refuses it
    /// (its 512 × 128 had been projected as 128 × 128, silently).
    pub fn from_madmax_on(t: &TaskConfig, gpus: u32, resized: bool) -> Result<(DlrmPlan, Vec<String>), crate::Error> {
        let plan = DlrmPlan::from_madmax(t)?;
        let mut notes = Vec::new();
        for (what, degrees) in [("mlp_parallel_degree", &t.mlp_parallel_degree), ("emb_parallel_degree", &t.emb_parallel_degree)] {
            let product: u64 = degrees.iter().map(|&d| u64::from(d)).product();
            if degrees.is_empty() || product == u64::from(gpus) {
                continue;
            }
            if !resized {
                return Err(crate::Error::Plan(format!(
                    "{what} {degrees:?} multiplies to {product}, the system has {gpus} GPUs (tracecast's DLRM runs every GPU: give --gpus N to run the task's batch per GPU on N)"
                )));
            }
            notes.push(format!("--gpus {gpus}: the task's {what} {degrees:?} ({product} GPUs) run on {gpus} GPUs, the batch per GPU kept"));
        }
        let (mlp, emb) = t.global_batches();
        if t.local_emb_bs > 0.0 && emb != mlp {
            return Err(crate::Error::Plan(format!(
                "a global batch of {emb} for the embeddings and of {mlp} for the MLPs: tracecast's DLRM runs one batch through both"
            )));
        }
        Ok((plan, notes))
    }
}

/// Projects one iteration (training, or a forward pass for inference).
pub fn project(model: &Dlrm, cluster: &Cluster, plan: &DlrmPlan, train: bool) -> Result<(Projection, Timeline), crate::Error> {
    let n = cluster.gpus.max(1);
    let nf = f64::from(n);
    let g = cluster.gpus_per_node.min(n).max(1);
    if plan.sharding == Sharding::TableWise && model.tables < nf {
        return Err(crate::Error::Plan(format!("{} tables cannot be spread table-wise over {n} GPUs", model.tables)));
    }
    let b = f64::from(plan.batch_per_gpu);
    let global = b * nf;
    let eb = model.emb_bytes;
    let pooled_row = model.dim * eb;
    // Table-wise, whole tables: the GPU that holds the most, ceil(tables / GPUs), sets the time and
    // the memory (200 tables over 128 GPUs had been priced at 1.56 tables a GPU where one holds 2).
    let tables_here = (model.tables / nf).ceil();
    // Lookups (HBM reads) per GPU, and the pooled output each GPU sends in the forward exchange.
    let (lookup_bytes, exchanged) = match plan.sharding {
        Sharding::TableWise => (global * tables_here * model.pooling * pooled_row, global * tables_here * pooled_row),
        Sharding::RowWise => (global * model.tables * model.pooling * pooled_row / nf, global * model.tables * pooled_row),
        Sharding::ColumnWise => (global * model.tables * model.pooling * pooled_row / nf, global * model.tables * pooled_row / nf),
        Sharding::DataParallel => (b * model.tables * model.pooling * pooled_row, 0.0),
    };
    let lookup = lookup_bytes / (cluster.memory_efficiency * cluster.hbm_bw);
    let emb_fwd_comm = match plan.sharding {
        Sharding::TableWise | Sharding::ColumnWise => cluster.all_to_all(exchanged, n, g),
        Sharding::RowWise => cluster.all_gather(exchanged, n, g),
        Sharding::DataParallel => 0.0,
    };
    let table_bytes = model.tables * model.rows * model.dim * eb;
    let emb_bwd_comm = match plan.sharding {
        Sharding::DataParallel => cluster.all_reduce(table_bytes, n, g),
        _ => emb_fwd_comm,
    };
    // The optimizer reads the gradient rows and writes the updated rows: twice the lookup traffic.
    let update = 2.0 * lookup;
    let layer_params = model.mlp_dim * model.mlp_dim;
    // One MLP layer's GEMM, [b, d] × [d, d], forward and both gradients, at its shape
    // through the pricing layer where the cluster has it.
    let (gemm, gemm_bwd) = cluster.gemm_at(1.0, b, model.mlp_dim, model.mlp_dim, false);
    let layer_bytes = layer_params * model.dense_bytes;
    let gather = if plan.fsdp { cluster.all_gather(layer_bytes, n, g) } else { 0.0 };
    let grad = if plan.fsdp { cluster.reduce_scatter(layer_bytes, n, g) } else { cluster.all_reduce(layer_bytes, n, g) };
    let grad_kind = if plan.fsdp { OpKind::ReduceScatter } else { OpKind::AllReduce };
    // Feature interaction: the pooled features read and the interaction written through HBM, no
    // dot products counted (a MAD-Max model file names no interaction architecture; a dot
    // interaction of 4097 features would be a 16.8 M-entry product a sample): said in the note.
    let interaction = b * (model.tables + 1.0) * model.dim * model.dense_bytes * 2.0 / (cluster.memory_efficiency * cluster.hbm_bw);

    fn name(what: &'static str, l: usize, pass: &'static str) -> (Key, Label) {
        let w = what.bytes().fold(0u64, |h, c| h.wrapping_mul(131).wrapping_add(u64::from(c)));
        ((w << 40) ^ ((l as u64) << 8) ^ u64::from(pass.as_bytes()[0]), Label::Layer(what, l as u32, pass))
    }
    let k = |what: &'static str, l: usize, pass: &'static str| name(what, l, pass).0;
    let mut lanes = Lanes::with_capacity(4 * (model.bottom_layers + model.top_layers) + 16);
    let add = |lanes: &mut Lanes, what: &'static str, l: usize, pass: &'static str, kind: OpKind, dur: f64, deps: &[Key]| {
        let (key, label) = name(what, l, pass);
        lanes.add_keyed(key, label, kind, dur, deps);
    };
    use OpKind::*;
    let (f, bw) = ("f", "b");
    add(&mut lanes, "emb", 0, f, Embedding, lookup, &[]);
    if emb_fwd_comm > 0.0 {
        let kind = if plan.sharding == Sharding::RowWise { ReduceScatter } else { AllToAll };
        add(&mut lanes, "emb_x", 0, f, kind, emb_fwd_comm, &[k("emb", 0, f)]);
    }
    for l in 0..model.bottom_layers {
        if gather > 0.0 {
            add(&mut lanes, "bot_ag", l, f, AllGather, gather, &[]);
        }
        add(&mut lanes, "bot", l, f, Gemm, gemm, &[k("bot_ag", l, f)]);
    }
    add(&mut lanes, "interact", 0, f, MemoryBound, interaction, &[k("emb_x", 0, f)]);
    for l in 0..model.top_layers {
        if gather > 0.0 {
            add(&mut lanes, "top_ag", l, f, AllGather, gather, &[]);
        }
        add(&mut lanes, "top", l, f, Gemm, gemm, &[k("top_ag", l, f)]);
    }
    if train {
        lanes.barrier();
        for l in (0..model.top_layers).rev() {
            if gather > 0.0 {
                add(&mut lanes, "top_ag", l, bw, AllGather, gather, &[]);
            }
            add(&mut lanes, "top", l, bw, Gemm, gemm_bwd, &[k("top_ag", l, bw)]);
            add(&mut lanes, "top_grad", l, bw, grad_kind, grad, &[k("top", l, bw)]);
        }
        add(&mut lanes, "interact", 0, bw, MemoryBound, interaction, &[]);
        // Gradients of the pooled embeddings go back to the shards that own them.
        if emb_bwd_comm > 0.0 && plan.sharding != Sharding::DataParallel {
            let kind = if plan.sharding == Sharding::RowWise { AllGather } else { AllToAll };
            add(&mut lanes, "emb_x", 0, bw, kind, emb_bwd_comm, &[k("interact", 0, bw)]);
        }
        for l in (0..model.bottom_layers).rev() {
            if gather > 0.0 {
                add(&mut lanes, "bot_ag", l, bw, AllGather, gather, &[]);
            }
            add(&mut lanes, "bot", l, bw, Gemm, gemm_bwd, &[k("bot_ag", l, bw), k("interact", 0, bw)]);
            add(&mut lanes, "bot_grad", l, bw, grad_kind, grad, &[k("bot", l, bw)]);
        }
        if plan.sharding == Sharding::DataParallel {
            add(&mut lanes, "emb_x", 0, bw, AllReduce, emb_bwd_comm, &[k("interact", 0, bw)]);
        }
        add(&mut lanes, "emb", 0, bw, Embedding, update, &[k("emb_x", 0, bw)]);
    }
    let timeline = lanes.simulate();
    let times: IterationTimes = timeline.times();
    // Memory per GPU: shards of the tables (with a row-wise Adagrad state), the MLPs (Adam), activations.
    let table_share = match plan.sharding {
        Sharding::DataParallel => 1.0,
        Sharding::TableWise => tables_here / model.tables,
        _ => 1.0 / nf,
    };
    let mlp_params = (model.bottom_layers + model.top_layers) as f64 * layer_params;
    let mlp_share = if plan.fsdp { 1.0 / nf } else { 1.0 };
    // Replicated tables' gradients are all-reduced whole (the price above moves every table's
    // bytes): the gradient buffer that all-reduce reads is held too.
    let table_gradients = if train && plan.sharding == Sharding::DataParallel { table_bytes } else { 0.0 };
    // What each GPU sends in the forward exchange is held until it is sent: row-wise, partial
    // sums of every table for the whole global batch (the reduce-scatter's input, priced above at
    // an all-gather of it, which costs what the reduce-scatter does);
    // table- or column-wise, its shards' pooled rows for every sample. Training and inference alike.
    let exchange_buffer = exchanged;
    // Under FSDP the layer being computed and those gathered ahead (the LLM model's default
    // prefetch, PyTorch FSDP's) are whole beside the shards, as the LLM and ViT models count them
    // (they had been left out here alone).
    let whole_layers = f64::from(crate::workload::llm::Plan::default().prefetch + 1).min((model.bottom_layers + model.top_layers) as f64);
    let gathered = if plan.fsdp { whole_layers * layer_bytes } else { 0.0 };
    let memory = Memory {
        weights_gb: (table_bytes * table_share + mlp_params * model.dense_bytes * mlp_share + gathered) / 1e9,
        gradients_gb: if train { (mlp_params * model.dense_bytes * mlp_share + table_gradients) / 1e9 } else { 0.0 },
        optimizer_gb: if train { (model.tables * model.rows * 4.0 * table_share + mlp_params * 8.0 * mlp_share) / 1e9 } else { 0.0 },
        activations_gb: exchange_buffer / 1e9
            + if train {
                b * (model.mlp_dim * (model.bottom_layers + model.top_layers) as f64 + model.tables * model.dim) * model.dense_bytes / 1e9
            } else {
                0.0
            },
        kv_cache_gb: 0.0,
    };
    let memory_gb = memory.total_gb();
    let hbm_gb = cluster.hbm_bytes / 1e9;
    let mut notes = cluster.all_notes();
    // How each op is priced, as the LLM notes say it (the note had said the optimizers alone);
    // the backward's parts in training only.
    let update_words =
        if train { ", their backward as the gradient rows read and the updated rows written (twice the lookups' traffic)" } else { "" };
    let exchange = match (plan.sharding, train) {
        (Sharding::TableWise | Sharding::ColumnWise, true) => "exchanged all-to-all forward, their gradients back the same way",
        (Sharding::TableWise | Sharding::ColumnWise, false) => "exchanged all-to-all",
        (Sharding::RowWise, true) => {
            "reduce-scattered from the row shards' partial sums forward and their gradients all-gathered backward (each priced as an all-gather of them, which costs what the reduce-scatter does)"
        }
        (Sharding::RowWise, false) => {
            "reduce-scattered from the row shards' partial sums (priced as an all-gather of them, which costs what the reduce-scatter does)"
        }
        (Sharding::DataParallel, true) => "looked up locally (replicated tables), their gradients all-reduced",
        (Sharding::DataParallel, false) => "looked up locally (replicated tables)",
    };
    notes.push(format!(
        "priced: embedding lookups as {pooling:.0} rows a table and sample read from HBM{update_words}; the pooled features {exchange}; the feature interaction as its {t:.0} features of {d:.0} read and written through HBM a sample (no dot products counted: the model file names no interaction architecture; DLRM's dot interaction would add a batched GEMM [{t:.0}, {d:.0}] × [{d:.0}, {t:.0}] a sample); each MLP layer a GEMM [{b:.0}, {w:.0}] × [{w:.0}, {w:.0}] at its shape",
        pooling = model.pooling,
        t = model.tables + 1.0,
        d = model.dim,
        w = model.mlp_dim,
    ));
    // Inference keeps weights alone: its note says so, not training's optimizer states.
    notes.push(if train {
        "embedding tables: row-wise Adagrad state (4 bytes per row); MLPs: Adam (8 bytes per parameter) beside the weights and gradients"
            .into()
    } else {
        "inference: the tables' and MLPs' weights alone (no gradients, no optimizer states)".into()
    });
    if exchange_buffer > 0.0 {
        let what =
            if plan.sharding == Sharding::RowWise { "partial sums of every table for all" } else { "its shards' pooled rows for all" };
        notes.push(format!(
            "memory: the forward exchange's send buffer, {:.2} GB a GPU ({what} {global:.0} samples of the global batch), among the activations",
            exchange_buffer / 1e9
        ));
    }
    if table_gradients > 0.0 {
        notes.push(format!(
            "memory: the replicated tables' whole gradient, {:.2} GB a GPU (the buffer their all-reduce reads), among the gradients",
            table_gradients / 1e9
        ));
    }
    let projection = Projection {
        model: model.name.clone(),
        system: cluster.name.clone(),
        task: if train { "pretrain".into() } else { "inference".into() },
        plan: format!("mlp={}{n},tables={}", if plan.fsdp { "fsdp=" } else { "ddp=" }, plan.sharding.as_str()),
        assumptions: "tracecast",
        throughput: if times.iteration_ms > 0.0 { global / (times.iteration_ms / 1e3) } else { 0.0 },
        times,
        global_batch: global,
        memory_gb_per_gpu: memory_gb,
        memory,
        hbm_gb,
        fits_memory: memory_gb <= hbm_gb,
        ttft_ms: None,
        tpot_ms: None,
        mfu: None,
        tokens_per_s_per_gpu: None,
        linear_format: tracecast_calibrate::catalog::Dtype::Bf16,
        notes,
        unpriced_keys: Vec::new(),
    };
    Ok((projection, timeline))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::llm::Link;

    fn cluster(gpus: u32) -> Cluster {
        Cluster {
            name: "test".into(),
            gpus,
            gpus_per_node: 8,
            peak_flops: 156e12,
            hbm_bw: 1.555e12,
            hbm_bytes: 80e9,
            gemm_efficiency: 0.7,
            gemm_overhead_s: 5e-6,
            attention_efficiency: None,
            memory_efficiency: 0.8,
            intra: Link::from_si(10e-6, 200e9),
            inter: Link::from_si(25e-6, 7e9),
            overlap_slowdown: 0.0,
            priced_by: Default::default(),
            notes: vec![],
            fp8_peak_flops: None,
            prices: None,
        }
    }

    fn model() -> Dlrm {
        Dlrm {
            name: "dlrm".into(),
            bottom_layers: 4,
            top_layers: 4,
            mlp_dim: 1024.0,
            tables: 512.0,
            rows: 1e6,
            dim: 128.0,
            pooling: 20.0,
            dense_bytes: 4.0,
            emb_bytes: 2.0,
        }
    }

    /// Table-wise, the GPU holding the most whole tables sets time and memory: 96 tables over 64
    /// GPUs price as 2 a GPU (column-wise splits them evenly: 1.5), and FSDP holds two MLP layers
    /// whole beside its shards.
    #[test]
    fn table_wise_prices_the_gpu_with_the_most_tables() {
        let c = cluster(64);
        let m = Dlrm { tables: 96.0, ..model() };
        let run = |s, fsdp| project(&m, &c, &DlrmPlan { batch_per_gpu: 512, fsdp, sharding: s }, true).unwrap().0;
        let (tw, cw) = (run(Sharding::TableWise, false), run(Sharding::ColumnWise, false));
        let table_gb = 1e6 * 128.0 * 2.0 / 1e9;
        let mlp_gb = 8.0 * 1024.0 * 1024.0 * 4.0 / 1e9;
        assert!((tw.memory.weights_gb - (2.0 * table_gb + mlp_gb)).abs() < 1e-9, "{}", tw.memory.weights_gb);
        assert!((cw.memory.weights_gb - (1.5 * table_gb + mlp_gb)).abs() < 1e-9, "{}", cw.memory.weights_gb);
        let lookups = |p: &Projection| p.times.by_kind_ms["embedding"];
        assert!((lookups(&tw) / lookups(&cw) - 2.0 / 1.5).abs() < 1e-9, "{} {}", lookups(&tw), lookups(&cw));
        let fsdp = run(Sharding::TableWise, true);
        let layer_gb = 1024.0 * 1024.0 * 4.0 / 1e9;
        assert!((fsdp.memory.weights_gb - (2.0 * table_gb + mlp_gb / 64.0 + 2.0 * layer_gb)).abs() < 1e-9, "{}", fsdp.memory.weights_gb);
    }

    #[test]
    fn shardings_trade_lookups_for_exchange() {
        let c = cluster(64);
        let run = |s| project(&model(), &c, &DlrmPlan { batch_per_gpu: 512, fsdp: false, sharding: s }, true).unwrap().0;
        let tw = run(Sharding::TableWise);
        let rw = run(Sharding::RowWise);
        let cw = run(Sharding::ColumnWise);
        let dp = run(Sharding::DataParallel);
        // Same lookups in all, up to how they are spread; the replicated tables do not fit.
        assert!(!dp.fits_memory && tw.fits_memory && rw.fits_memory && cw.fits_memory);
        // Row-wise moves unpooled partial sums of every table: more bytes than table-wise.
        let comm = |p: &Projection| p.times.comm_ms;
        assert!(comm(&rw) > comm(&tw), "{} {}", comm(&rw), comm(&tw));
        assert!(tw.throughput > 0.0 && cw.throughput > 0.0);
        // Inference is cheaper than training.
        let inf = project(&model(), &c, &DlrmPlan { batch_per_gpu: 512, fsdp: false, sharding: Sharding::TableWise }, false).unwrap().0;
        assert!(inf.times.iteration_ms < tw.times.iteration_ms);
        // Its note is of inference's memory, not training's optimizer states.
        assert!(tw.notes.iter().any(|n| n.contains("Adagrad")) && !inf.notes.iter().any(|n| n.contains("Adagrad")), "{:?}", inf.notes);
    }

    /// The buffers the priced communication reads are held in memory: row-wise sharding's
    /// partial sums of every table for the whole global batch (its memory had been table-wise's
    /// while its reduce-scatter moved 50 GB a GPU on a MAD-Max model), table-wise's pooled rows
    /// of its tables, and replicated tables' whole gradient for their all-reduce.
    #[test]
    fn memory_holds_what_the_exchanges_move() {
        let c = cluster(64);
        let run = |s, train| project(&model(), &c, &DlrmPlan { batch_per_gpu: 512, fsdp: false, sharding: s }, train).unwrap().0;
        // 512 samples × 64 GPUs; 512 tables of 128 × 2-byte columns; the MLPs' 8 layers of 1024 in 4 bytes.
        let (global, tables, row) = (512.0 * 64.0, 512.0, 128.0 * 2.0);
        let own = 512.0 * (1024.0 * 8.0 + 512.0 * 128.0) * 4.0;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9 * b.max(1.0);
        let rw = run(Sharding::RowWise, true);
        assert!(close(rw.memory.activations_gb * 1e9, global * tables * row + own), "{}", rw.memory.activations_gb);
        let tw = run(Sharding::TableWise, true);
        assert!(close(tw.memory.activations_gb * 1e9, global * tables / 64.0 * row + own), "{}", tw.memory.activations_gb);
        // Inference holds the send buffer too, and nothing of training's.
        let rw_inference = run(Sharding::RowWise, false);
        assert!(close(rw_inference.memory.activations_gb * 1e9, global * tables * row), "{}", rw_inference.memory.activations_gb);
        assert!(rw.notes.iter().any(|n| n.contains("partial sums of every table")), "{:?}", rw.notes);
        // Replicated: every table's gradient, 512 × 10⁶ rows × 256 bytes, beside the MLPs'.
        let dp = run(Sharding::DataParallel, true);
        let mlp_gradients = 8.0 * 1024.0 * 1024.0 * 4.0;
        assert!(close(dp.memory.gradients_gb * 1e9, tables * 1e6 * row + mlp_gradients), "{}", dp.memory.gradients_gb);
        assert!(close(dp.memory.activations_gb * 1e9, own), "{}", dp.memory.activations_gb);
        assert!(close(tw.memory.gradients_gb * 1e9, mlp_gradients), "{}", tw.memory.gradients_gb);
    }
}
