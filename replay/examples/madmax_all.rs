//! Prints the iteration time of every shared MAD-Max combination that runs
//! (a regression check when the builders change).
//!
//! `cargo run -p tracecast-replay --example madmax_all`

use std::path::Path;

use tracecast_replay::workload::madmax::{read_configs, run};

fn main() {
    let c = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/madmax-configs");
    let list = |dir: &str| {
        let mut out = Vec::new();
        for sub in std::fs::read_dir(c.join(dir)).unwrap() {
            for f in std::fs::read_dir(sub.unwrap().path()).unwrap() {
                out.push(f.unwrap().path());
            }
        }
        out.sort();
        out
    };
    let (models, systems, tasks) = (list("model_cfgs"), list("system_cfgs"), list("task_cfgs"));
    for m in &models {
        for t in &tasks {
            for s in &systems {
                let (model, system, task) = read_configs(m, s, t).unwrap();
                if let Ok(out) = run(&model, &system, &task) {
                    let times = out.timeline.times();
                    println!(
                        "{} {} {} {:.6} {:.6}",
                        m.file_name().unwrap().to_string_lossy(),
                        s.file_name().unwrap().to_string_lossy(),
                        t.file_name().unwrap().to_string_lossy(),
                        times.iteration_ms,
                        times.exposed_comm_ms
                    );
                }
            }
        }
    }
}
