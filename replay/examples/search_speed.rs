//! Strategy-search speed: plans simulated per second on one core, for
//! LLaMA-2 70B on 2048 A100s (catalog defaults) and a smaller job.
//!
//! `cargo run --release -p tracecast-replay --example search_speed`

use std::time::Instant;

use tracecast_calibrate::Catalog;
use tracecast_calibrate::catalog::Dtype;
use tracecast_replay::workload::llm::{Cluster, Task, Transformer};
use tracecast_replay::workload::search::{SearchSpace, search};

fn main() {
    let catalog = Catalog::builtin();
    for (model, gpu, gpus) in [("llama2-70b", "a100-80gb", 2048), ("llama2-7b", "h100-sxm", 256), ("mixtral-8x7b", "h100-sxm", 512)] {
        let m = Transformer::preset(model).unwrap();
        let c = Cluster::from_catalog(&catalog, gpu, gpus, Dtype::Bf16, None).unwrap();
        let space = SearchSpace::default();
        // Warm up, then time several rounds, each on its own: on a machine shared with other work
        // the median round says what a search takes, the total would add the others' bursts.
        let _ = search(&m, &c, Task::Train, &space);
        let rounds = 7;
        let mut rates = Vec::with_capacity(rounds);
        let (mut simulated, mut best) = (0, 0.0);
        for _ in 0..rounds {
            let started = Instant::now();
            let r = search(&m, &c, Task::Train, &space);
            rates.push(r.simulated as f64 / started.elapsed().as_secs_f64());
            simulated = r.simulated;
            best = r.ranked.first().map_or(0.0, |p| p.throughput);
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "{model:<14} on {gpus:>5} × {gpu:<10}: {simulated:>6} plans simulated per search, {:>9.0} plans/s (median of {rounds} searches; {:.0}–{:.0}), best {best:.1} samples/s",
            rates[rounds / 2],
            rates[0],
            rates[rounds - 1]
        );
    }
}
