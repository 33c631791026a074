//! `--assumptions madmax` reproduces the reference implementation's printed
//! outputs for the shared MAD-Max configurations (README of
//! ../shared/madmax-configs), within 1 %.

use std::path::{Path, PathBuf};

use tracecast_replay::workload::madmax::{read_configs, run};

fn configs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/madmax-configs")
}

struct Reference<'a> {
    files: [&'a str; 3],
    /// (kind, ms) as printed.
    times: &'a [(&'a str, f64)],
    exposed_ms: f64,
    iteration_ms: f64,
    throughput: f64,
}

fn check(r: &Reference<'_>) {
    let c = configs();
    let (m, s, t) = read_configs(
        &c.join("model_cfgs").join(r.files[0]),
        &c.join("system_cfgs").join(r.files[1]),
        &c.join("task_cfgs").join(r.files[2]),
    )
    .unwrap();
    let out = run(&m, &s, &t).unwrap();
    let times = out.timeline.times();
    // Within 1 %, or within the rounding of the printed figure (two decimals).
    let close = |what: &str, got: f64, want: f64, printed_unit: f64| {
        let err = (got - want).abs() / want;
        println!("{:<24} {what:<16} {got:>14.4} {want:>12.2} {:>7.3} %", r.files[0], 100.0 * err);
        assert!(err <= 0.01 || (got - want).abs() <= printed_unit / 2.0, "{}: {what} {got} vs {want}", r.files[0]);
    };
    for (kind, want) in r.times {
        close(kind, times.by_kind_ms.get(kind).copied().unwrap_or(0.0), *want, 0.01);
    }
    close("exposed comm", times.exposed_comm_ms, r.exposed_ms, 0.01);
    close("iteration", times.iteration_ms, r.iteration_ms, 0.01);
    let unit = if r.throughput > 1e5 { 0.01e6 } else { 0.01 };
    close("throughput", out.global_batch / (times.iteration_ms / 1e3), r.throughput, unit);
}

#[test]
fn dlrm_a_on_zionex_128() {
    check(&Reference {
        files: ["dlrm/dlrm_a.json", "zionex/zionex_128.json", "val/dlrm_train_val_128.json"],
        times: &[("gemm", 8.91), ("embedding", 9.10), ("all_to_all", 26.40), ("all_reduce", 21.27)],
        exposed_ms: 35.99,
        iteration_ms: 54.00,
        throughput: 1.21e6,
    });
}

#[test]
fn llama2_70b_on_dc_a_2048() {
    check(&Reference {
        files: ["llm/llama2_70b.json", "dc_A/dc_A_2048.json", "llm/llm_train.json"],
        times: &[("gemm", 5598.63), ("embedding", 0.21), ("all_gather", 1670.28), ("reduce_scatter", 835.14), ("all_reduce", 2.24)],
        exposed_ms: 1676.89,
        iteration_ms: 7275.72,
        throughput: 281.48,
    });
}
