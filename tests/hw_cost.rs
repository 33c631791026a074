//! `tracecast hw cost` as a user runs it: one operation priced the way
//! projections do, with the user's own measurements first.

mod common;

use std::ffi::OsStr;

fn quote(args: &[&str], json: &std::path::Path) -> serde_json::Value {
    let mut all: Vec<&OsStr> = vec!["hw".as_ref(), "cost".as_ref()];
    all.extend(args.iter().map(|a| OsStr::new(*a)));
    all.extend(["--json".as_ref(), json.as_os_str()]);
    let o = common::run(&all);
    assert!(o.status.success(), "{args:?}: {}", common::stderr(&o));
    serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap()
}

#[test]
fn a_measured_gemm_is_priced_at_its_measured_time_and_says_so() {
    let dir = common::scratch("hw-cost-gemm");
    let out = dir.join("q.json");
    // XLA's measured B200 table: 1 × 1024 × 1024 × 1024 bf16 (evidence gemm.csv).
    let csv = std::fs::read_to_string(common::shared().join("../evidence/gemm.csv")).unwrap();
    let row = csv
        .lines()
        .find(|l| l.starts_with("xla-matmul-perf-table,b200,bf16->bf16,1,1024,1024,1024,"))
        .expect("the B200 row in the evidence");
    let tflops: f64 = row.split(',').nth(7).unwrap().parse().unwrap();
    let want_us = 2.0 * 1024f64.powi(3) / (tflops * 1e12) * 1e6;
    let q = quote(&["b200", "gemm", "--m", "1024", "--n", "1024", "--k", "1024"], &out);
    // × the shipped profile's correction of the table, as projections price it (the basis states it).
    let basis = q["basis"].as_str().unwrap();
    let correction: f64 = basis.split("; × ").nth(1).and_then(|r| r.split(',').next()).and_then(|f| f.parse().ok()).unwrap_or(1.0);
    assert!((q["time_us"].as_f64().unwrap() - want_us * correction).abs() < 1e-3 * want_us, "{q}");
    assert_eq!(q["rule"], "gemm_table");
    assert_eq!(q["extrapolated"], false);
    assert!(q["basis"].as_str().unwrap().contains("xla-matmul-perf-table"), "{q}");
    // The user's own sweep of that GPU (at least 8 shapes: a table) comes first.
    let mut sweep = String::from("gpu,dtype,m,n,k,time_us\n");
    for (i, m) in [256, 512, 1024, 2048].iter().enumerate() {
        for n in [1024, 4096] {
            sweep.push_str(&format!("b200,bf16,{m},{n},1024,{}\n", 10.0 * (i + 1) as f64 * f64::from(n) / 1024.0));
        }
    }
    let mine = dir.join("sweep.csv");
    std::fs::write(&mine, sweep).unwrap();
    let q = quote(&["b200", "gemm", "--m", "1024", "--n", "1024", "--k", "1024", "--measurements", mine.to_str().unwrap()], &out);
    assert!((q["time_us"].as_f64().unwrap() - 30.0).abs() < 1e-9, "{q}");
    assert!(q["basis"].as_str().unwrap().contains("the user's"), "{q}");
    // A bad row names the file and line.
    std::fs::write(&mine, "gpu,dtype,m,n,k,time_us\nb200,bf16,1024,1024,x,3\n").unwrap();
    let o = common::run(&[
        "hw".as_ref(),
        "cost".as_ref(),
        "b200".as_ref(),
        "gemm".as_ref(),
        "--m=1".as_ref(),
        "--n=1".as_ref(),
        "--k=1".as_ref(),
        "--measurements".as_ref(),
        mine.as_os_str(),
    ]);
    assert!(!o.status.success());
    assert!(common::stderr(&o).contains("sweep.csv: line 2"), "{}", common::stderr(&o));
}

#[test]
fn collectives_at_a_larger_scale_from_the_users_smaller_sweeps() {
    // The user's nccl-tests of their A100 cluster up to 64 GPUs (Echo's logs in the
    // evidence); priced at 128 GPUs and compared with Echo's 128-GPU measurement.
    let dir = common::scratch("hw-cost-collectives");
    let csv = std::fs::read_to_string(common::shared().join("../evidence/collectives.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    let rows: Vec<&str> = csv.lines().filter(|l| l.starts_with("echo-a100,")).collect();
    let gpus = |l: &str| l.split(',').nth(4).unwrap().parse::<u32>().unwrap();
    let mine = dir.join("nccl-tests.csv");
    let small: Vec<&str> = rows.iter().copied().filter(|l| gpus(l) <= 64).collect();
    std::fs::write(&mine, format!("{header}\n{}\n", small.join("\n"))).unwrap();
    let measured = |size: &str| -> f64 {
        // The faster of the in-place and out-of-place columns, as the pricing layer reads a sweep
        // (Echo's rows have no quoted commas before `notes`).
        rows.iter()
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|f| f[4] == "128" && f[9] == size)
            .map(|f| f[10].parse::<f64>().unwrap())
            .fold(f64::INFINITY, f64::min)
    };
    let out = dir.join("q.json");
    for (size, bound) in [("1073741824", 1.15), ("4294967296", 1.15), ("2048", 2.0), ("4096", 2.0)] {
        let q = quote(
            &[
                "a100-40gb",
                "all_reduce",
                "--bytes",
                size,
                "--gpus",
                "128",
                "--gpus-per-node",
                "8",
                "--measurements",
                mine.to_str().unwrap(),
            ],
            &out,
        );
        let (got, want) = (q["time_us"].as_f64().unwrap(), measured(size));
        let factor = (got / want).max(want / got);
        println!("{size:>10} B over 128 GPUs: {got:.1} µs, measured {want:.1} µs ({factor:.3}×)");
        assert!(factor < bound, "{size}: {got} vs {want}");
        assert_eq!(q["rule"], "collective_scale_out");
        assert_eq!(q["extrapolated"], true);
        // Over 16 nodes NCCL's model keeps a large all-reduce on its ring (its steps cost less
        // than the tree's bandwidth), and so does the price.
        if size.len() >= 10 {
            assert!(!q["basis"].as_str().unwrap().contains("as NCCL's tree"), "{q}");
        }
        assert!(q["basis"].as_str().unwrap().contains("the user's measurements"), "{q}");
    }
}

/// An FP32 GEMM on a GPU whose catalog states an FP32 peak: no measured FP32 GEMMs to learn
/// shape behaviour from, which the error says (it said "no fp32 peak in the catalog"
/// beside `hw show` listing 67 TFLOP/s); a user's FP32 sweep prices it.
#[test]
fn a_gemm_in_a_dtype_nothing_measured_says_what_is_missing_and_a_users_sweep_prices_it() {
    let dir = common::scratch("hw-cost-fp32");
    let args = ["hw", "cost", "h100-sxm", "gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "fp32"];
    let o = common::run(&args.iter().map(OsStr::new).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(2));
    let e = common::stderr(&o);
    assert!(e.contains("no measured fp32 GEMMs") && !e.contains("peak"), "{e}");
    let sweep = dir.join("fp32.csv");
    std::fs::write(&sweep, "gpu,dtype,m,n,k,time_us\nh100-sxm,fp32,4096,4096,4096,2500\n").unwrap();
    let q = quote(
        &["h100-sxm", "gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "fp32", "--measurements", sweep.to_str().unwrap()],
        &dir.join("q.json"),
    );
    assert!((q["time_us"].as_f64().unwrap() / 2500.0 - 1.0).abs() < 1e-9, "{q}");
    assert_eq!(q["rule"], "gemm_measured_shape", "{q}");
}

#[test]
fn the_help_names_every_operation_hw_cost_prices() {
    let help = |args: &[&str]| String::from_utf8_lossy(&common::bin().args(args).output().unwrap().stdout).into_owned();
    let cost_help = help(&["hw", "cost", "--help"]);
    // The collectives `Collective::from_name` reads that have a bus factor; `barrier` has none.
    for op in ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv"] {
        let gpus = if op == "send_recv" { "2" } else { "8" };
        let o = common::bin().args(["hw", "cost", "h100-sxm", op, "--bytes", "1e8", "--gpus", gpus]).output().unwrap();
        assert!(o.status.success(), "{op}: {}", common::stderr(&o));
        assert!(cost_help.contains(&format!("`{op}`")), "{op} missing from: {cost_help}");
    }
    let o = common::bin().args(["hw", "cost", "h100-sxm", "barrier", "--bytes", "1e8", "--gpus", "8"]).output().unwrap();
    assert!(!o.status.success());
    // A transfer joins two GPUs; a collective spans at least two: the count given is named.
    for (op, gpus, says) in
        [("send_recv", "4", "--gpus 4: a transfer joins two GPUs"), ("all_reduce", "1", "--gpus 1: a collective spans at least 2 GPUs")]
    {
        let o = common::bin().args(["hw", "cost", "h100-sxm", op, "--bytes", "1e8", "--gpus", gpus]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{op}");
        assert!(common::stderr(&o).contains(says), "{op}: {}", common::stderr(&o));
    }
    assert!(help(&["hw", "--help"]).contains("hw cost"));
    assert!(help(&["--help"]).contains("hw cost"));
}

#[test]
fn a_users_measurements_that_cannot_be_are_refused_and_single_points_scale_only_their_sizes() {
    let dir = common::scratch("hw-cost-impossible");
    let out = dir.join("q.json");
    // A GPU the catalog does not know, and a GEMM 5× above H100's bf16 peak: refused, each by line.
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "gpu,collective,gpus,size_bytes,time_us\nh999,all_reduce,8,1048576,100\n").unwrap();
    let o = common::run(&[
        "hw".as_ref(),
        "cost".as_ref(),
        "h100-sxm".as_ref(),
        "all_reduce".as_ref(),
        "--bytes".as_ref(),
        "1024".as_ref(),
        "--gpus".as_ref(),
        "8".as_ref(),
        "--measurements".as_ref(),
        bad.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(common::stderr(&o).contains("bad.csv: line 2: GPU \"h999\" is not in the catalog"), "{}", common::stderr(&o));
    // Rows faster than the datasheet allows are refused: GEMMs against their dtype's peak; attention
    // and HBM rows too (an attention row at 1e9 TFLOP/s had priced a 16-head attention at 0.00 µs,
    // a STREAM row of 1e308 GB/s was taken).
    for (name, table, says) in [
        (
            "fast.csv",
            "gpu,dtype,m,n,k,tflops\nh100-sxm,bf16,4096,4096,4096,5000\n",
            "fast.csv: line 2: 5000 TFLOP/s (time_us 27.4877906944) is above h100-sxm's bf16 peak",
        ),
        (
            "att.csv",
            "gpu,kernel,direction,causal,head_dim,seqlen,batch,heads,tflops\nh100-sxm,fa2,fwd,0,128,4096,1,16,1e9\n",
            "att.csv: line 2: 1000000000 TFLOP/s of attention is above h100-sxm's 16-bit peak of 989",
        ),
        ("hbm.csv", "gpu,metric,bandwidth_gbps\nh100-sxm,stream_copy,1e308\n", "hbm.csv: line 2: stream_copy at "),
    ] {
        let f = dir.join(name);
        std::fs::write(&f, table).unwrap();
        let o = common::run(&[
            "hw".as_ref(),
            "cost".as_ref(),
            "h100-sxm".as_ref(),
            "gemm".as_ref(),
            "--m".as_ref(),
            "64".as_ref(),
            "--n".as_ref(),
            "64".as_ref(),
            "--k".as_ref(),
            "64".as_ref(),
            "--measurements".as_ref(),
            f.as_os_str(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{name}");
        assert!(common::stderr(&o).contains(says), "{name}: {}", common::stderr(&o));
    }
    // One 1 KiB all-reduce point (latency) scales 4 KiB, not 1 GiB (it had priced 1 GiB at 2.7× NVLink).
    let point = dir.join("point.csv");
    std::fs::write(&point, "gpu,collective,gpus,size_bytes,time_us\nh100-sxm,all_reduce,8,1024,10\n").unwrap();
    let m = point.to_str().unwrap();
    let shipped = quote(&["h100-sxm", "all_reduce", "--bytes", "1073741824", "--gpus", "8"], &out)["time_us"].as_f64().unwrap();
    let large = quote(&["h100-sxm", "all_reduce", "--bytes", "1073741824", "--gpus", "8", "--measurements", m], &out);
    assert_eq!(large["time_us"].as_f64().unwrap(), shipped, "{large}");
    let small_shipped = quote(&["h100-sxm", "all_reduce", "--bytes", "4096", "--gpus", "8"], &out)["time_us"].as_f64().unwrap();
    let small = quote(&["h100-sxm", "all_reduce", "--bytes", "4096", "--gpus", "8", "--measurements", m], &out);
    assert!(small["time_us"].as_f64().unwrap() < small_shipped, "{small}");
}

/// A network other than the node preset's (as `project --nic-gbps-per-gpu` and a runs file's
/// `system.nic_gbps_per_gpu` give it) prices collectives across nodes over that network; the
/// preset's own figure changes nothing.
#[test]
fn a_given_network_prices_collectives_across_nodes_over_it() {
    let out = common::scratch("hw-cost-network").join("q.json");
    let across = ["h100-sxm", "all_reduce", "--bytes", "1073741824", "--gpus", "16", "--gpus-per-node", "8"];
    let preset = quote(&across, &out);
    let with = |nic: &str| quote(&[&across[..], &["--nic-gbps-per-gpu", nic]].concat(), &out);
    let time = |nic: &str| with(nic)["time_us"].as_f64().unwrap();
    assert_eq!(with("50")["time_us"], preset["time_us"], "dgx-h100's NICs are 8 × 50 GB/s");
    // Over A3 Mega's own network (8 × 200 Gb/s per 8 GPUs) the price is its measured
    // 1 GiB all-reduce: 298.82 GB/s bus bandwidth in place (a3mega-h100 in the evidence).
    let measured_us = 2.0 * 15.0 / 16.0 * 1073741824.0 / (298.82 * 1e3);
    assert!((time("25") / measured_us - 1.0).abs() < 1e-3, "{} µs, measured {measured_us}", time("25"));
    // A faster network never prices slower (a given 49 GB/s had priced faster than the preset's 50).
    let times: Vec<f64> = ["12.5", "25", "45", "49", "50", "100"].iter().map(|nic| time(nic)).collect();
    assert!(times.windows(2).all(|w| w[1] <= w[0]), "{times:?}");
    // Half the network: about twice the bandwidth-bound time.
    let slow = with("12.5");
    assert!(slow["basis"].as_str().unwrap().contains("12.5 GB/s of network per GPU where the curve ran over 25"), "{slow}");
    let halved = times[0] / times[1];
    assert!(halved > 1.8 && halved <= 2.0, "{halved}");
    // However fast the network, the ring also crosses each node's NVLink (450 GB/s).
    let busbw = with("100")["busbw_gbps"].as_f64().unwrap();
    assert!(busbw < 450.0, "{busbw} GB/s");
    // Inside one node the network plays no part.
    let inside = ["h100-sxm", "all_reduce", "--bytes", "1073741824", "--gpus", "8"];
    assert_eq!(quote(&[&inside[..], &["--nic-gbps-per-gpu", "12.5"]].concat(), &out)["time_us"], quote(&inside, &out)["time_us"]);
    // A network that cannot be is refused, not priced at 10^290 s.
    let bad = ["hw", "cost", "h100-sxm", "all_reduce", "--bytes", "1e9", "--gpus", "16", "--nic-gbps-per-gpu", "1e-300"];
    let bad = common::run(&bad.iter().map(OsStr::new).collect::<Vec<_>>());
    assert!(!bad.status.success());
    assert!(common::stderr(&bad).contains("from 0.1 to 1000000"), "{}", common::stderr(&bad));
    // Nor one that prices communication at nothing (1e30 GB/s had been taken).
    let huge = ["hw", "cost", "h100-sxm", "all_reduce", "--bytes", "1e9", "--gpus", "16", "--nic-gbps-per-gpu", "1e30"];
    let huge = common::run(&huge.iter().map(OsStr::new).collect::<Vec<_>>());
    assert_eq!(huge.status.code(), Some(2));
    assert!(common::stderr(&huge).contains("1e30 GB/s of network per GPU: from 0.1 to 1000000"), "{}", common::stderr(&huge));
}

/// An attention family the GPU has no price for: the error names the families that could
/// price it (the GPU's own, or where it has none, those measured on others).
#[test]
fn an_attention_family_nothing_prices_is_refused_with_the_families_that_exist() {
    let shape = ["attention", "--batch", "1", "--heads", "8", "--seq", "1024", "--head-dim", "128", "--kernel", "nope"];
    for (gpu, want) in [("h100-sxm", "families measured on it: "), ("mi210", "no family measured on it; on other GPUs of its vendor: ")] {
        let args: Vec<&str> = ["hw", "cost", gpu].iter().chain(&shape).copied().collect();
        let o = common::run(&args.iter().map(OsStr::new).collect::<Vec<_>>());
        assert_eq!(o.status.code(), Some(2), "{gpu}");
        let e = common::stderr(&o);
        assert!(e.contains("in family nope") && e.contains(want) && e.contains("fa2"), "{gpu}: {e}");
    }
}

/// Sizes count things: `--m 1.5` priced a "1×1.5×1×1" GEMM, `--heads 1.5` and `--bytes 0.5`
/// were priced too, a 64-bit size was shown rounded, and NaN was said to be missing.
#[test]
fn sizes_are_whole_numbers_and_a_bad_one_is_named() {
    for (args, says) in [
        (vec!["h100-sxm", "gemm", "--m", "1.5", "--n", "8", "--k", "8"], "'1.5' for '--m <M>': a whole number from 1 to 2^53"),
        (vec!["h100-sxm", "gemm", "--m", "NaN", "--n", "8", "--k", "8"], "'NaN' for '--m <M>': a whole number"),
        // Named as typed (it had been echoed rounded, as 18446744073709552000).
        (
            vec!["h100-sxm", "gemm", "--m", "18446744073709551615", "--n", "8", "--k", "8"],
            "'18446744073709551615' for '--m <M>': a whole number from 1 to 2^53",
        ),
        (vec!["h100-sxm", "gemm", "--n", "8", "--k", "8"], "--m is required"),
        (vec!["h100-sxm", "attention", "--heads", "1.5", "--seq", "1024", "--head-dim", "128"], "'1.5' for '--heads <HEADS>'"),
        (vec!["h100-sxm", "all_reduce", "--bytes", "0.5", "--gpus", "8"], "'0.5' for '--bytes <BYTES>'"),
        // 2^53 + 1 parses to 2^53: it had been priced as "9007199254740992 bytes".
        (vec!["h100-sxm", "all_reduce", "--bytes", "9007199254740993", "--gpus", "8"], "a whole number from 1 to 2^53 − 1"),
    ] {
        let mut all: Vec<&OsStr> = vec!["hw".as_ref(), "cost".as_ref()];
        all.extend(args.iter().map(|a| OsStr::new(*a)));
        let o = common::run(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(common::stderr(&o).contains(says), "{args:?}: {}", common::stderr(&o));
    }
}

/// Without `--profile`, `hw cost` prices a GEMM as `project` does: with the GPU's shipped
/// profile's correction of the table (B200's traces ran the table's shapes 0.79× as long) within
/// the sizes its traces ran (at most 3.27 GFLOP; a 1024³ GEMM, 2.15 GFLOP, is within them), the table alone beyond. It had
/// priced the bare table, 19 % apart from `project`.
#[test]
fn without_a_profile_hw_cost_takes_the_correction_project_takes() {
    let dir = common::scratch("hw-cost-shipped");
    let o =
        common::run(&["project", "--model", "llama3-8b", "--system", "b200", "--gpus", "8", "--parallel", "fsdp=8,gbs=8"].map(OsStr::new));
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let note = text.lines().find(|l| l.contains("GEMMs at their shapes")).unwrap().to_string();
    // The note prices an 8192³ probe, beyond the traces' sizes: the correction is named and left out.
    let factor: f64 = note.split("correction (× ").nth(1).unwrap().split(')').next().unwrap().parse().unwrap();
    assert!(note.contains("left out: its 109 traced GEMMs were of at most 3.274 GFLOP, this one of 1099.512"), "{note}");
    let q = quote(&["b200", "gemm", "--m", "1024", "--n", "1024", "--k", "1024"], &dir.join("q.json"));
    let basis = q["basis"].as_str().unwrap();
    let quoted: f64 = basis.split("; × ").nth(1).unwrap().split(',').next().unwrap().parse().unwrap();
    assert!((quoted - factor).abs() <= 0.005, "project × {factor}, hw cost × {quoted}: {basis}");
    let big = quote(&["b200", "gemm", "--m", "8192", "--n", "4096", "--k", "4096"], &dir.join("big.json"));
    assert!(big["basis"].as_str().unwrap().contains("correction (× 0.793) left out"), "{}", big["basis"]);
}

/// A flag of another kind of operation was accepted and ignored (`gemm --heads 8`), and an
/// attention "in FP8" was priced from 16-bit measurements without a word; `--dtype nonsense`
/// was refused for a GEMM and taken for an attention.
#[test]
fn flags_an_operation_does_not_read_are_refused_by_name() {
    let attention = ["attention", "--heads", "32", "--seq", "4096", "--head-dim", "128"];
    for (args, says) in [
        (vec!["gemm", "--m", "8", "--n", "8", "--k", "8", "--heads", "8", "--kernel", "fa2"], "--heads, --kernel do not apply to a GEMM"),
        (vec!["all_reduce", "--bytes", "1024", "--gpus", "8", "--m", "3"], "--m does not apply to a collective"),
        (vec!["all_reduce", "--bytes", "1024", "--gpus", "8", "--dtype", "bf16"], "--dtype does not apply to a collective"),
        // A mistyped operation is named as such, not taken for a collective with GEMM flags.
        (vec!["gem", "--m", "8", "--n", "8", "--k", "8"], "\"gem\" is not gemm, attention, all_reduce"),
        (attention.iter().copied().chain(["--bytes", "4"]).collect(), "--bytes does not apply to an attention"),
        (attention.iter().copied().chain(["--dtype", "fp8"]).collect(), "attention is priced from 16-bit (bf16, fp16) measurements only"),
        (attention.iter().copied().chain(["--dtype", "nonsense"]).collect(), "--dtype \"nonsense\": one of bf16, fp16"),
    ] {
        let mut all: Vec<&OsStr> = vec!["hw".as_ref(), "cost".as_ref(), "h100-sxm".as_ref()];
        all.extend(args.iter().map(|a| OsStr::new(*a)));
        let o = common::run(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(common::stderr(&o).contains(says), "{args:?}: {}", common::stderr(&o));
    }
    // A 16-bit attention in either spelling is priced, the same.
    let dir = common::scratch("hw-cost-flags");
    let [bf16, fp16] = ["bf16", "fp16"].map(|d| {
        let args: Vec<&str> = attention[..].iter().copied().chain(["--dtype", d]).collect();
        let mut all = vec!["h100-sxm"];
        all.extend(args);
        quote(&all, &dir.join(format!("{d}.json")))["time_us"].as_f64().unwrap()
    });
    assert_eq!(bf16, fp16);
}

/// Issue 22's scale-out check on public data: ALCF Polaris' nccl-tests at 8 and 32 A100s
/// (4 a node, Slingshot 11) as the user's measurements, priced at 1024 GPUs and held against
/// the same system's run at 1024 (`fixtures/polaris/extract.py` says where each number is
/// from), in two setups of NCCL 2.21.5: a small all-reduce within 2× of what ran, the 1 GiB one
/// within 15 % and priced as NCCL's tree (at 256 nodes its ring's 2046 steps cost more than the
/// tree gives up in bandwidth; at 32 GPUs the curve is the ring's). As the rule of the largest
/// count's bandwidth it had been 16 % short in both.
#[test]
fn an_all_reduce_at_1024_gpus_from_measurements_at_32_is_within_what_ran() {
    let dir = common::scratch("hw-cost-polaris");
    let polaris = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/polaris");
    for setup in [polaris.clone(), polaris.join("nccl-2.21-setup5")] {
        let ran = std::fs::read_to_string(setup.join("polaris-1024.csv")).unwrap();
        let measured = |bytes: &str| -> f64 {
            ran.lines()
                .map(|l| l.split(',').collect::<Vec<_>>())
                .find(|f| f[2] == "all_reduce" && f[4] == "1024" && f[9] == bytes)
                .and_then(|f| f[10].parse().ok())
                .expect("the all-reduce at 1024 GPUs")
        };
        let le32 = setup.join("polaris-le32.csv");
        for (bytes, bound) in [("4096", 2.0), ("1073741824", 1.15)] {
            let args = ["a100-40gb", "all_reduce", "--bytes", bytes, "--gpus", "1024", "--gpus-per-node", "4", "--measurements"];
            let mut all: Vec<&str> = args.to_vec();
            all.push(le32.to_str().unwrap());
            let q = quote(&all, &dir.join("q.json"));
            let (priced, ran) = (q["time_us"].as_f64().unwrap(), measured(bytes));
            println!("{}: {bytes} B over 1024 GPUs priced {priced:.1} µs, ran {ran:.1} µs", setup.display());
            assert!(priced < ran * bound && ran < priced * bound, "{bytes}: priced {priced} µs, ran {ran} µs: {q}");
            let basis = q["basis"].as_str().unwrap();
            assert!(basis.contains("alcf-polaris-nccl") && basis.contains("as NCCL's tree"), "{q}");
        }
    }
}

/// Fewer GPUs than a curve measured: NCCL's ring over fewer GPUs has fewer steps, and its
/// latency is NCCL's tuning model's at each count. Echo's A100 all-reduce at 8 GPUs alone, as
/// the user's measurements, predicts Echo's own 2- and 4-GPU curves (shipped beside it) within a
/// median |error| of 15 % and 5 % over their sizes; keeping the 8-GPU latency had been 42 % and
/// 45 % off (8.5 µs measured over 2 GPUs, 31 µs priced).
#[test]
fn fewer_gpus_than_measured_pay_nccls_ring_latency_at_their_count() {
    let dir = common::scratch("hw-cost-below-counts");
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("calibrate/measurements/collectives.csv");
    let shipped = std::fs::read_to_string(shipped).unwrap();
    let header = shipped.lines().next().unwrap();
    let echo: Vec<&str> = shipped.lines().filter(|l| l.starts_with("echo-a100,a100-40gb,all_reduce,")).collect();
    let field = |l: &str, i: usize| l.split(',').nth(i).unwrap().to_string();
    let eight: Vec<&str> = echo.iter().copied().filter(|l| field(l, 4) == "8" && field(l, 5) == "1").collect();
    assert!(eight.len() >= 40, "{}", eight.len());
    let mine = dir.join("eight.csv");
    std::fs::write(&mine, format!("{header}\n{}\n", eight.join("\n"))).unwrap();
    for (gpus, bound) in [("2", 0.15), ("4", 0.05)] {
        // Each size's faster column, as the curves take it.
        let mut measured: std::collections::BTreeMap<u64, f64> = Default::default();
        for l in echo.iter().filter(|l| field(l, 4) == gpus && field(l, 5) == "1") {
            let (size, t): (u64, f64) = (field(l, 9).parse().unwrap(), field(l, 10).parse().unwrap());
            let e = measured.entry(size).or_insert(t);
            *e = e.min(t);
        }
        let mut errors = Vec::new();
        for (size, ran) in &measured {
            let b = size.to_string();
            let q = quote(
                &["a100-40gb", "all_reduce", "--bytes", &b, "--gpus", gpus, "--measurements", mine.to_str().unwrap()],
                &dir.join("q.json"),
            );
            assert_eq!(q["rule"], "collective_below_counts", "{q}");
            errors.push((q["time_us"].as_f64().unwrap() / ran - 1.0).abs());
        }
        errors.sort_by(f64::total_cmp);
        let median = errors[errors.len() / 2];
        println!("{gpus} GPUs: {} sizes, median |error| {median:.3}", errors.len());
        assert!(errors.len() >= 20 && median <= bound, "{gpus} GPUs: median |error| {median}");
    }
}

/// The scale-out rule's band is the error measured that far beyond the counts: over the
/// all-reduce's sizes at 1024 and 2160 A100s of ALCF Polaris, priced from each setup's 8- and
/// 32-GPU runs, the median |error| lies within 1.6× of the band the price states either way
/// (±10 % had been stated where 17–38 % was measured).
#[test]
fn the_scale_out_band_is_the_error_measured_that_far_beyond_the_counts() {
    let dir = common::scratch("hw-cost-scale-out-band");
    let polaris = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/polaris");
    let mut checked = 0;
    for setup in [polaris.clone(), polaris.join("nccl-2.21-setup5"), polaris.join("nccl-2.18-setup5")] {
        let ran = std::fs::read_to_string(setup.join("polaris-1024.csv")).unwrap();
        let le32 = setup.join("polaris-le32.csv");
        for gpus in ["1024", "2160"] {
            let rows: Vec<(String, f64)> = ran
                .lines()
                .map(|l| l.split(',').collect::<Vec<_>>())
                .filter(|f| f.len() > 10 && f[2] == "all_reduce" && f[4] == gpus)
                .filter_map(|f| Some((f[9].to_string(), f[10].parse().ok()?)))
                .collect();
            if rows.is_empty() {
                continue;
            }
            let mut errors = Vec::new();
            let mut band = None;
            for (bytes, ran) in &rows {
                let args = ["a100-40gb", "all_reduce", "--bytes", bytes, "--gpus", gpus, "--gpus-per-node", "4", "--measurements"];
                let mut all: Vec<&str> = args.to_vec();
                all.push(le32.to_str().unwrap());
                let q = quote(&all, &dir.join("q.json"));
                assert_eq!(q["rule"], "collective_scale_out", "{q}");
                errors.push((q["time_us"].as_f64().unwrap() / ran - 1.0).abs());
                band = Some(q["band"].as_f64().unwrap());
            }
            errors.sort_by(f64::total_cmp);
            let median = errors[errors.len() / 2];
            let band = band.unwrap();
            println!("{} at {gpus}: median |error| {median:.3}, band {band:.3}", setup.display());
            assert!(median < 1.6 * band && band < 1.6 * median, "{} at {gpus}: median |error| {median}, band {band}", setup.display());
            checked += 1;
        }
    }
    assert_eq!(checked, 4);
}

/// The user's measurements across nodes describe their cluster: without `--gpus-per-node`, a
/// collective is priced at the node size they were taken at (Polaris' 4 A100s a node), on their
/// curves, and the basis says so; asked at another node size, the basis says their
/// measurements were not of it. Before, the query took the catalog's 8 a node, priced the
/// 1 GiB all-reduce over 1024 GPUs by another system's curves at 18.2 ms where 70.7 ms ran,
/// and the user's file went unused without a word.
#[test]
fn a_collective_takes_the_node_size_of_the_users_measurements() {
    let dir = common::scratch("hw-cost-users-node");
    let polaris = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/polaris");
    let ran = std::fs::read_to_string(polaris.join("polaris-1024.csv")).unwrap();
    let ran: f64 = ran
        .lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f[2] == "all_reduce" && f[4] == "1024" && f[9] == "1073741824")
        .and_then(|f| f[10].parse().ok())
        .expect("the 1 GiB all-reduce at 1024 GPUs");
    let le32 = polaris.join("polaris-le32.csv");
    let le32 = le32.to_str().unwrap();
    let q = quote(&["a100-40gb", "all_reduce", "--bytes", "1073741824", "--gpus", "1024", "--measurements", le32], &dir.join("q.json"));
    let priced = q["time_us"].as_f64().unwrap();
    assert!((priced / ran - 1.0).abs() <= 0.15, "priced {priced} µs, ran {ran} µs: {q}");
    assert!(q["operation"].as_str().unwrap().contains("(4 per node)"), "{q}");
    let basis = q["basis"].as_str().unwrap();
    assert!(basis.contains("alcf-polaris-nccl (a100-40gb, 4 per node)"), "{q}");
    assert!(basis.contains("4 GPUs per node, as your measurements (alcf-polaris-nccl) were taken"), "{q}");
    let args = ["a100-40gb", "all_reduce", "--bytes", "1073741824", "--gpus", "1024", "--gpus-per-node", "8", "--measurements", le32];
    let q = quote(&args, &dir.join("q8.json"));
    assert!(q["operation"].as_str().unwrap().contains("(8 per node)"), "{q}");
    let basis = q["basis"].as_str().unwrap();
    assert!(basis.contains("your measurements (alcf-polaris-nccl) were taken at 4 GPUs per node, not the 8 asked"), "{q}");
    // Their own node size asked for: priced as without it, and nothing more said.
    let args = ["a100-40gb", "all_reduce", "--bytes", "1073741824", "--gpus", "1024", "--gpus-per-node", "4", "--measurements", le32];
    let q4 = quote(&args, &dir.join("q4.json"));
    assert_eq!(q4["time_us"].as_f64().unwrap(), priced);
    assert!(!q4["basis"].as_str().unwrap().contains("your measurements"), "{q4}");
}

/// An all-gather is a ring (NCCL has no tree for it): over n GPUs each of its n − 1 steps
/// moves an nth of the data, as the same step over 32 GPUs does for a 32nd of a message n/32×
/// smaller. From Polaris' 8- and 32-GPU runs, the 1 GiB all-gather over 1024 GPUs (NCCL 2.21.5)
/// and over 512 and 2160 (NCCL 2.18, another setup, each from its own small runs) is within
/// issue 22's 15 % of what ran (the rule of latency in log nodes had priced 1024 GPUs 31 % short),
/// and over more GPUs or of more bytes it never costs less.
#[test]
fn a_large_all_gather_at_scale_is_priced_as_a_ring_from_its_steps_at_32() {
    let dir = common::scratch("hw-cost-polaris-ring");
    let polaris = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/polaris");
    for fixture in [polaris.clone(), polaris.join("nccl-2.18-setup5")] {
        let le32 = fixture.join("polaris-le32.csv");
        let le32 = le32.to_str().unwrap();
        let large = std::fs::read_to_string(fixture.join("polaris-1024.csv")).unwrap();
        // The largest all-gather at each large count (1 GiB, or the nearest multiple of its ranks).
        let mut checked = 0;
        for gpus in [512u32, 1024, 2160] {
            let Some((bytes, ran)) = large
                .lines()
                .filter(|l| l.contains(",all_gather,") && l.split(',').nth(4) == Some(&gpus.to_string()))
                .filter_map(|l| Some((l.split(',').nth(9)?.parse::<u64>().ok()?, l.split(',').nth(10)?.parse::<f64>().ok()?)))
                .max_by_key(|r| r.0)
            else {
                continue;
            };
            assert!(bytes > 1 << 29, "{}: {bytes} bytes at {gpus} GPUs", fixture.display());
            let (b, g) = (bytes.to_string(), gpus.to_string());
            let args = ["a100-40gb", "all_gather", "--bytes", &b, "--gpus", &g, "--gpus-per-node", "4", "--measurements", le32];
            let q = quote(&args, &dir.join("ring.json"));
            let priced = q["time_us"].as_f64().unwrap();
            assert!((priced / ran - 1.0).abs() <= 0.15, "{gpus} GPUs: priced {priced} µs, ran {ran} µs: {q}");
            assert!(q["basis"].as_str().unwrap().contains(&format!("a ring of {} steps", gpus - 1)), "{q}");
            checked += 1;
        }
        assert!(checked >= 1, "{}: no large all-gather", fixture.display());
    }
    let le32 = polaris.join("polaris-le32.csv");
    let le32 = le32.to_str().unwrap();
    let price = |bytes: u64, gpus: u32| {
        let (bytes, gpus) = (bytes.to_string(), gpus.to_string());
        let args = ["a100-40gb", "all_gather", "--bytes", &bytes, "--gpus", &gpus, "--gpus-per-node", "4", "--measurements", le32];
        quote(&args, &dir.join("sweep.json"))["time_us"].as_f64().unwrap()
    };
    let mut last = 0.0;
    for bytes in [8u64, 4096, 1 << 20, 1 << 24, 1 << 30] {
        let t = price(bytes, 1024);
        assert!(t >= last, "{bytes} bytes: {t} µs after {last}");
        last = t;
    }
    let mut last = 0.0;
    for gpus in [32u32, 64, 256, 1024, 4096] {
        let t = price(1 << 20, gpus);
        assert!(t >= last, "{gpus} GPUs: {t} µs after {last}");
        last = t;
    }
}

/// With no curve of the GPU and node layout (A100 at 4 a node), the link rule gives an
/// all-gather its ring's steps too, each at the small-message time per ring step of the shipped
/// multi-node curves (none of them Polaris'): the smallest all-gathers that ran over Polaris'
/// 1024 GPUs (16 KiB and 1 MiB, about 8.2–8.4 ms, 1023 steps of 8 µs) within 2× (the link rule's
/// latency alone had priced them at well under a millisecond).
#[test]
fn the_link_rule_prices_an_all_gathers_ring_steps() {
    let dir = common::scratch("hw-cost-link-ring");
    let measured =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/polaris/polaris-1024.csv")).unwrap();
    for bytes in ["16384", "1048576"] {
        let ran: f64 = measured
            .lines()
            .find(|l| l.contains(",all_gather,") && l.split(',').nth(9) == Some(bytes))
            .and_then(|l| l.split(',').nth(10)?.parse().ok())
            .expect("the all-gather at 1024 GPUs");
        let q = quote(&["a100-40gb", "all_gather", "--bytes", bytes, "--gpus", "1024", "--gpus-per-node", "4"], &dir.join("q.json"));
        let priced = q["time_us"].as_f64().unwrap();
        assert_eq!(q["rule"], "collective_link_spec", "{q}");
        assert!(priced > ran / 2.0 && priced < ran * 2.0, "{bytes} bytes: priced {priced} µs, ran {ran} µs: {q}");
    }
}

/// Found in review of the ring rule: a reduce-scatter is the all-gather's ring the other way
/// and costs what it costs where only the all-gather was measured (Polaris measured no
/// reduce-scatter: it had taken the all-reduce curve and the shipped systems' step latency,
/// 4.2× the all-gather at 1024 GPUs and 3.9× at 32, a measured count); at a measured count an
/// all-gather standing on the all-reduce curve is not held to the ring's steps (over 128 of
/// Echo's A100s, 1 MiB: 1 041 µs where the all-reduce of those bytes, twice its bus bytes, took
/// 183); and in a node the ring does not extrapolate beyond the measured GPUs.
#[test]
fn a_reduce_scatter_is_the_all_gathers_ring_and_the_ring_stays_across_nodes() {
    let dir = common::scratch("hw-cost-ring-review");
    let le32 = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/polaris/polaris-le32.csv");
    let le32 = le32.to_str().unwrap();
    for gpus in ["32", "1024"] {
        let [ag, rs] = ["all_gather", "reduce_scatter"].map(|c| {
            let args = ["a100-40gb", c, "--bytes", "16384", "--gpus", gpus, "--gpus-per-node", "4", "--measurements", le32];
            quote(&args, &dir.join(format!("{c}.json")))
        });
        assert_eq!(ag["time_us"], rs["time_us"], "{gpus} GPUs: {ag} {rs}");
    }
    let [ag, ar] = ["all_gather", "all_reduce"]
        .map(|c| quote(&["a100-40gb", c, "--bytes", "1048576", "--gpus", "128", "--gpus-per-node", "8"], &dir.join(format!("{c}.json"))));
    assert!(ag["time_us"].as_f64().unwrap() <= ar["time_us"].as_f64().unwrap(), "{ag} {ar}");
    let in_node = quote(&["h200", "all_gather", "--bytes", "8", "--gpus", "72", "--gpus-per-node", "72"], &dir.join("nvl.json"));
    assert_ne!(in_node["rule"], "collective_ring", "{in_node}");
}

/// A profile's α–β fit of the links prices a collective in `hw cost --profile` as it does in
/// `project --profile` (it had been ignored: the measured base's 325 µs beside the fit's
/// 686). Known truth: `synth`'s job runs its all-reduces over 4 ranks at α 15 µs, 150 GB/s.
#[test]
fn a_profiles_link_fit_prices_hw_cost_as_it_prices_projections() {
    use common::{bin, scratch};
    let json = |p: &std::path::Path| -> serde_json::Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    let dir = scratch("hw-cost-link-fit");
    let (job, profile) = (dir.join("job"), dir.join("p.json"));
    common::synth(&job, &[]);
    assert!(bin().args(["calibrate", "-q"]).arg(&job).arg("--out").arg(&profile).status().unwrap().success());
    let fit = &json(&profile)["links"][0];
    let (alpha, busbw) = (fit["alpha_us"].as_f64().unwrap(), fit["busbw_gbps"].as_f64().unwrap());
    assert!((alpha - 15.0).abs() < 1.0 && (busbw - 150.0).abs() < 5.0, "{fit}");
    let bytes = 67108864.0;
    let p = quote(
        &["h100-sxm", "all_reduce", "--bytes", "67108864", "--gpus", "4", "--profile", profile.to_str().unwrap()],
        &dir.join("q.json"),
    );
    assert_eq!(p["rule"], "collective_profile_fit");
    let want = alpha + 2.0 * 3.0 / 4.0 * bytes / (busbw * 1e3);
    assert!((p["time_us"].as_f64().unwrap() / want - 1.0).abs() < 1e-9, "{} µs, want {want}", p["time_us"]);
    // Over two nodes the fit prices the tier it was fitted on, the measured base the other.
    let across = quote(
        &["h100-sxm", "all_reduce", "--bytes", "67108864", "--gpus", "16", "--profile", profile.to_str().unwrap()],
        &dir.join("a.json"),
    );
    assert_eq!(across["rule"], "collective_profile_fit");
    let basis = across["basis"].as_str().unwrap();
    assert!(basis.contains("in a node the profile's all-reduce fit") && basis.contains("across nodes"), "{basis}");
    // A pipeline's transfer in a node, as `project --profile` prices it: α plus the bytes at B.
    let p2p = quote(
        &["h100-sxm", "send_recv", "--bytes", "67108864", "--gpus", "2", "--profile", profile.to_str().unwrap()],
        &dir.join("s.json"),
    );
    assert_eq!(p2p["rule"], "collective_profile_fit");
    let want = alpha + bytes / (busbw * 1e3);
    assert!((p2p["time_us"].as_f64().unwrap() / want - 1.0).abs() < 1e-9, "{} µs, want {want}", p2p["time_us"]);
    // Inside the sizes and group the fit was fitted on it is measured ground; outside either it
    // is extrapolated, and the basis says which (every fit's price had said "within the
    // measured range", 1 kB or 10 GB, 4 ranks or 8).
    assert_eq!(p["extrapolated"], false, "{p}");
    let [least, most] = [0, 1].map(|i| fit["bus_bytes_range"][i].as_f64().unwrap());
    let in_bytes = |b: f64| 1.5 * b; // the all-reduce's bus factor over 4 ranks
    assert!(in_bytes(bytes) > least && in_bytes(bytes) < most, "{fit}");
    let profile = profile.to_str().unwrap();
    for (args, why) in [
        (["all_reduce", "--bytes", "1000", "--gpus", "4", "--gpus-per-node", "8"], "extrapolated: 1000 bytes, outside the fitted"),
        (["all_reduce", "--bytes", "67108864", "--gpus", "8", "--gpus-per-node", "8"], "extrapolated: 8 ranks, fitted over 4"),
        (["all_gather", "--bytes", "1000", "--gpus", "4", "--gpus-per-node", "8"], "extrapolated: 1000 bytes, outside the fitted"),
    ] {
        let q = quote(&[&["h100-sxm"][..], &args[..], &["--profile", profile][..]].concat(), &dir.join("x.json"));
        assert_eq!((q["rule"].as_str(), q["extrapolated"].as_bool()), (Some("collective_profile_fit"), Some(true)), "{args:?}: {q}");
        assert!(q["basis"].as_str().unwrap().contains(why), "{args:?}: {q}");
    }
}

/// A user's measurement across nodes prices a query of its node layout only, by a rule of its
/// own: 16 GPUs as 4 nodes of 4 had priced 16 GPUs as 2 nodes of 8 (and said the link rule).
#[test]
fn a_users_point_across_nodes_prices_its_own_node_layout_and_says_so() {
    let dir = common::scratch("hw-cost-user-point-layout");
    let csv = dir.join("c.csv");
    std::fs::write(&csv, "gpu,collective,gpus,nodes,gpus_per_node,size_bytes,time_us\nh100-sxm,all_reduce,16,4,4,1073741824,8000\n")
        .unwrap();
    let m = csv.to_str().unwrap();
    let base = ["h100-sxm", "all_reduce", "--bytes", "1073741824", "--gpus", "16", "--measurements", m];
    let four = quote(&[&base[..], &["--gpus-per-node", "4"]].concat(), &dir.join("4.json"));
    assert_eq!(four["rule"], "collective_measured");
    assert_eq!(four["time_us"].as_f64(), Some(8000.0));
    let eight = quote(&[&base[..], &["--gpus-per-node", "8"]].concat(), &dir.join("8.json"));
    assert_ne!(eight["rule"], "collective_measured");
    assert_ne!(eight["time_us"].as_f64(), Some(8000.0));
}

/// An FP32 GEMM has no measured table (the tables' `f32` rows ran on TF32 tensor cores): refused,
/// saying which dtype prices FP32 matmuls run with TF32 allowed.
#[test]
fn an_fp32_gemm_is_refused_pointing_at_tf32() {
    let o = common::run(
        &["hw", "cost", "h100-sxm", "gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "fp32"].map(std::ffi::OsStr::new),
    );
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("--dtype tf32 prices those"), "{}", common::stderr(&o));
}

/// A GPU added with `--hw` and never traced is priced with the most similar traced GPU's
/// profile; the GEMM correction it applies names that GPU (it had said "of the profile's GPU",
/// a profile the user never gave).
#[test]
fn a_gpu_without_traces_names_whose_correction_prices_it() {
    let dir = common::scratch("hw-cost-lent");
    let hw = dir.join("mine.toml");
    std::fs::write(
        &hw,
        "[[gpu]]\nid = \"acme-x1\"\nname = \"Acme X1\"\nvendor = \"NVIDIA\"\nsource = \"test\"\nfp32 = 80.0\nbf16 = 1200.0\nfp16 = 1200.0\n\
         memory_gb = 96.0\nhbm_gbps = 4000.0\nlink_gbps = 450.0\nsms = 140\nclock_mhz = 1900.0\nsms_source = \"test\"\n",
    )
    .unwrap();
    let q = quote(&["acme-x1", "gemm", "--m", "2048", "--n", "2048", "--k", "2048", "--hw", hw.to_str().unwrap()], &dir.join("q.json"));
    let basis = q["basis"].as_str().unwrap();
    assert!(
        basis.contains("traced GEMMs (their software stack, on h100-sxm, whose profile prices acme-x1 (it has no traces of its own))"),
        "{basis}"
    );
    assert!(!basis.contains("the profile's GPU"), "{basis}");
}

/// Two GPUs of no known vendor (`--hw` entries named "Foo …" without `vendor`) are not of one:
/// one's attention measurements do not price the other's (they had, as "of its vendor", where
/// README says a GPU without a vendor gets none of them).
#[test]
fn gpus_of_no_known_vendor_lend_each_other_nothing() {
    let dir = common::scratch("hw-cost-no-vendor");
    let entry = |id: &str, name: &str| {
        format!(
            "[[gpu]]\nid = \"{id}\"\nname = \"{name}\"\nsource = \"a test\"\nmatch = [\"{name}\"]\nbf16 = 800.0\nfp16 = 800.0\nfp32 = 60.0\nmemory_gb = 96.0\nhbm_gbps = 3000.0\nlink_gbps = 400.0\nsms = 120\nclock_mhz = 1800.0\n"
        )
    };
    let hw = dir.join("hw.toml");
    std::fs::write(&hw, entry("foo1", "Foo One") + &entry("foo2", "Foo Two")).unwrap();
    let rows = dir.join("att.csv");
    std::fs::write(&rows, "gpu,kernel,direction,causal,head_dim,seqlen,batch,heads,tflops\nfoo1,mykernel,fwd,0,128,4096,4,32,50\n")
        .unwrap();
    let cost = |gpu: &str| {
        let args = ["hw", "cost", gpu, "attention", "--batch", "4", "--heads", "32", "--seq", "4096", "--head-dim", "128", "--hw"];
        let mut all: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        all.extend([hw.as_os_str(), "--measurements".as_ref(), rows.as_os_str()]);
        common::run(&all)
    };
    let own = cost("foo1");
    assert!(own.status.success(), "{}", common::stderr(&own));
    assert!(String::from_utf8_lossy(&own.stdout).contains("achieved  50.0 TFLOP/s"), "{}", String::from_utf8_lossy(&own.stdout));
    let other = cost("foo2");
    assert!(!other.status.success(), "{}", String::from_utf8_lossy(&other.stdout));
    assert!(common::stderr(&other).contains("no measured attention kernel of this GPU"), "{}", common::stderr(&other));
    // Measured in the other direction only: said so, with the flag that prices it (it had been
    // "no measured attention kernel" of a family the GPU's own row names).
    let backward = common::run(&[
        "hw".as_ref(),
        "cost".as_ref(),
        "foo1".as_ref(),
        "attention".as_ref(),
        "--batch=4".as_ref(),
        "--heads=32".as_ref(),
        "--seq=4096".as_ref(),
        "--head-dim=128".as_ref(),
        "--kernel=mykernel".as_ref(),
        "--backward".as_ref(),
        "--hw".as_ref(),
        hw.as_os_str(),
        "--measurements".as_ref(),
        rows.as_os_str(),
    ]);
    assert!(!backward.status.success());
    assert!(
        common::stderr(&backward).contains("family mykernel is measured on this GPU for the forward only (price that without --backward)"),
        "{}",
        common::stderr(&backward)
    );
}

/// The evidence's points of one GPU count and node layout too few for a curve price the query
/// there: four p5en nodes of H200 measured an all-reduce of 4 GiB at 364.87 GB/s bus bandwidth
/// (the link rule had said 24.1 ms), four of a node's eight at 8 GiB at 363.3 (the 8-GPU curve,
/// NVLS, had said 31.3 ms, called an upper bound). Near them the price is scaled by their ratio.
#[test]
fn the_evidences_single_collective_points_price_their_own_count() {
    let dir = common::scratch("hw-cost-points");
    let csv = std::fs::read_to_string(common::shared().join("../evidence/collectives.csv")).unwrap();
    let busbw = |prefix: &str| -> f64 {
        let row = csv.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("{prefix} in the evidence"));
        // Fields split outside quotes (the network column holds commas); bus bandwidth is the 13th.
        let (mut fields, mut field, mut quoted) = (Vec::new(), String::new(), false);
        for c in row.chars() {
            match c {
                '"' => quoted = !quoted,
                ',' if !quoted => fields.push(std::mem::take(&mut field)),
                c => field.push(c),
            }
        }
        fields[12].parse().unwrap()
    };
    for (prefix, gpus, bytes) in [
        ("mle-h200-p5en-4node,h200,all_reduce,", 32u32, 4294967296f64),
        ("mle-h200-nvls-sweep,h200,all_reduce,nccl (version not stated for this sweep),4,", 4, 8589934592.0),
    ] {
        let n = f64::from(gpus);
        let want_us = 2.0 * (n - 1.0) / n * bytes / (busbw(prefix) * 1e9) * 1e6;
        let q = quote(&["h200", "all_reduce", "--bytes", &format!("{bytes}"), "--gpus", &gpus.to_string()], &dir.join("q.json"));
        assert!((q["time_us"].as_f64().unwrap() - want_us).abs() < 1e-3 * want_us, "{want_us} µs: {q}");
        assert_eq!(q["rule"], "collective_measured", "{q}");
    }
    // 1 GiB over 4: the 8-GPU curve scaled toward the 4-GPU point, slower than the curve alone.
    let q = quote(&["h200", "all_reduce", "--bytes", "1073741824", "--gpus", "4"], &dir.join("q.json"));
    assert!(q["basis"].as_str().unwrap().contains("the measured ÷ priced time of the evidence's 1 point(s) at 4 GPUs"), "{q}");
    assert!(!q["rule_description"].as_str().unwrap().contains("upper bound"), "{q}");
}

#[test]
fn an_in_node_all_reduce_above_the_nvlink_rate_says_the_switch_reduces() {
    let dir = common::scratch("hw-cost-nvls");
    let out = dir.join("q.json");
    // H200's links: 900 GB/s NVLink 4 in total, 450 per direction (the datasheet the catalog cites).
    let big = quote(&["h200", "all_reduce", "--bytes", "17179869184", "--gpus", "8"], &out);
    assert!(big["busbw_gbps"].as_f64().unwrap() > 450.0, "{big}");
    assert!(
        big["basis"].as_str().unwrap().contains("above the 450 GB/s NVLink rate: the measured runs reduce in the switch (NVLS)"),
        "{big}"
    );
    // Not of a price carried by the bus factor to a count nobody measured (H100's 8-GPU curve at 2 GPUs).
    let carried = quote(&["h100-sxm", "all_reduce", "--bytes", "17179869184", "--gpus", "2"], &out);
    assert!(carried["busbw_gbps"].as_f64().unwrap() > 450.0 && !carried["basis"].as_str().unwrap().contains("NVLS"), "{carried}");
    let small = quote(&["h200", "all_reduce", "--bytes", "1048576", "--gpus", "8"], &out);
    assert!(small["busbw_gbps"].as_f64().unwrap() < 450.0, "{small}");
    assert!(!small["basis"].as_str().unwrap().contains("NVLS"), "{small}");
}

/// An FP32 GEMM that no table or spec model prices, on a GPU whose profile fitted its traces'
/// FP32 GEMMs against the FP32 peak (a V100 job of the corpus: V100 has no TF32): priced by that
/// fit, t0 + FLOPs ÷ (η × peak), as `replay --target` prices the same kernels with it, its band
/// the fit's own residual (at least the spec model's). `hw cost` had refused it with the fit at
/// hand. An A100 profile's FP32 GEMMs ran on TF32 tensor cores (fitted against that peak): they
/// price no FP32 GEMM on CUDA cores, which stays refused, pointing at `--dtype tf32`.
#[test]
fn an_fp32_gemm_is_priced_by_the_profiles_fit_where_nothing_measured_prices_it() {
    let dir = common::scratch("hw-cost-fp32-fit");
    let calibrated = |name: &str, trace: &str| {
        let profile = dir.join(name);
        let trace = common::shared().join(trace);
        let o = common::run(&["calibrate".as_ref(), trace.as_os_str(), "--out".as_ref(), profile.as_os_str(), "-q".as_ref()]);
        assert!(o.status.success(), "{}", common::stderr(&o));
        let p: serde_json::Value = serde_json::from_slice(&std::fs::read(&profile).unwrap()).unwrap();
        (profile, p)
    };
    let (v100, p) = calibrated("v100.json", "hta/trace_diff/test/test.json.gz");
    let fit = p["kernels"].as_array().unwrap().iter().find(|k| k["class"] == "gemm" && k["dtype"] == "fp32").expect("an fp32 GEMM fit");
    assert_eq!(fit["peak_of"], "fp32");
    let (eta, t0, peak_tflops) = (fit["efficiency"].as_f64().unwrap(), fit["overhead_us"].as_f64().unwrap(), fit["peak"].as_f64().unwrap());
    let flops = 2.0 * 2048.0 * 4096.0 * 1024.0;
    let want_us = t0 + flops / (eta * peak_tflops * 1e12) * 1e6;
    let shape = ["gemm", "--m", "2048", "--n", "4096", "--k", "1024", "--dtype", "fp32", "--profile"];
    let q = quote(&[&["v100"][..], &shape, &[v100.to_str().unwrap()]].concat(), &dir.join("q.json"));
    assert_eq!(q["rule"], "gemm_profile_fit", "{q}");
    assert!((q["time_us"].as_f64().unwrap() / want_us - 1.0).abs() < 1e-9, "{q} against {want_us}");
    assert!((q["band"].as_f64().unwrap() - fit["residual_spread"].as_f64().unwrap().max(0.25)).abs() < 1e-12, "{q}");
    // Never past the FP32 peak it was fitted against.
    assert!(q["fraction_of_peak"].as_f64().unwrap() < 1.0, "{q}");
    // The A100's FP32 GEMMs ran on TF32 tensor cores: refused for FP32, with the way to price them.
    let (a100, p) = calibrated("a100.json", "hta/trace_diff/control/control.json.gz");
    assert!(p["kernels"].as_array().unwrap().iter().any(|k| k["class"] == "gemm" && k["dtype"] == "fp32" && k["peak_of"] == "tf32"));
    let args: Vec<&str> = [&["hw", "cost", "a100-40gb"][..], &shape, &[a100.to_str().unwrap()]].concat();
    let o = common::run(&args.iter().map(OsStr::new).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("--dtype tf32 prices those"), "{}", common::stderr(&o));
}

/// A user's part that names another catalog GPU's measurements as its own (`measured_as`: a
/// cut-down H100, 148 of 989 TFLOP/s BF16 on faster HBM, 4000 against 3350 GB/s) runs them at
/// its own specs: attention at H100's measured rate × the peaks' ratio (it had been H100's rate,
/// 308 TFLOP/s on a 148 TFLOP/s part), a GEMM at H100's table time × the ratio of the shape's
/// rooflines (a memory-bound one had been × the peaks' ratio, 6.7× slower than H100 on faster HBM).
#[test]
fn a_part_measured_as_a_faster_gpu_runs_its_measurements_at_its_own_specs() {
    let dir = common::scratch("hw-cost-measured-as");
    let hw = dir.join("h20.toml");
    std::fs::write(
        &hw,
        "[[gpu]]\nid = \"h20m\"\nname = \"NVIDIA H20 96 GB\"\nsource = \"test\"\nmeasured_as = [\"hopper-sm90\", \"h100-sxm\"]\n\
         bf16 = 148.0\nfp16 = 148.0\nmemory_gb = 96.0\nhbm_gbps = 4000.0\nlink_gbps = 450.0\n",
    )
    .unwrap();
    let cost = |gpu: &str, op: &[&str], name: &str| {
        quote(&[&["--hw", hw.to_str().unwrap(), gpu][..], op].concat(), &dir.join(format!("{name}.json")))
    };
    let attention = ["attention", "--batch", "16", "--heads", "32", "--seq", "8192", "--head-dim", "128", "--causal"];
    let (h100, h20) = (cost("h100-sxm", &attention, "a-h100"), cost("h20m", &attention, "a-h20"));
    let ratio = h20["tflops"].as_f64().unwrap() / h100["tflops"].as_f64().unwrap();
    assert!((ratio - 148.0 / 989.0).abs() < 0.01 && h20["tflops"].as_f64().unwrap() < 148.0, "{h20}");
    assert_eq!(h20["extrapolated"], true, "{h20}");
    // Memory-bound: 16 rows streaming 512 MiB of weights, faster on the faster HBM.
    let skinny = ["gemm", "--m", "16", "--n", "16384", "--k", "16384"];
    let (h100, h20) = (cost("h100-sxm", &skinny, "g-h100"), cost("h20m", &skinny, "g-h20"));
    assert!(h20["time_us"].as_f64().unwrap() < h100["time_us"].as_f64().unwrap(), "{h20} against {h100}");
    // Launch-bound (256³ runs at under 5 % of H100's peak): the launch's time is not scaled by
    // the peaks (it had been ×1.93, twice H100's 4.8 µs).
    let tiny = ["gemm", "--m", "256", "--n", "256", "--k", "256"];
    let (h100, h20) = (cost("h100-sxm", &tiny, "t-h100"), cost("h20m", &tiny, "t-h20"));
    assert!(h20["time_us"].as_f64().unwrap() < 1.2 * h100["time_us"].as_f64().unwrap(), "{h20} against {h100}");
    // Compute-bound: never past its own peak.
    let square = ["gemm", "--m", "8192", "--n", "8192", "--k", "8192"];
    let h20 = cost("h20m", &square, "s-h20");
    assert!(h20["fraction_of_peak"].as_f64().unwrap() < 1.0, "{h20}");
}

/// A fit across nodes is of the whole group's all-reduces (16 ranks over 2 nodes): the query is
/// checked as that whole collective, so the calibrated job's own sizes are inside it (checked as
/// the 2-node tier, every price across nodes had been called extrapolated).
#[test]
fn a_fit_across_nodes_is_checked_against_the_whole_groups_sizes() {
    use common::{bin, scratch};
    let dir = scratch("hw-cost-inter-fit-range");
    let (job, profile) = (dir.join("job"), dir.join("p.json"));
    // 40 GB/s: below the 50 GB/s of NICs per GPU, so the fit across nodes is kept.
    common::synth(&job, &["--ranks", "16", "--busbw-gbps", "40"]);
    assert!(bin().args(["calibrate", "-q"]).arg(&job).arg("--out").arg(&profile).status().unwrap().success());
    let fit: serde_json::Value = serde_json::from_slice(&std::fs::read(&profile).unwrap()).unwrap();
    let link = &fit["links"][0];
    assert_eq!((link["domain"].as_str(), link["group_size"].as_i64()), (Some("inter"), Some(16)), "{link}");
    let profile = profile.to_str().unwrap();
    let price = |bytes: &str| {
        quote(
            &["h100-sxm", "all_reduce", "--bytes", bytes, "--gpus", "16", "--gpus-per-node", "8", "--profile", profile],
            &dir.join("q.json"),
        )
    };
    let inside = price("67108864");
    assert_eq!(inside["extrapolated"], false, "{inside}");
    assert!(inside["basis"].as_str().unwrap().contains("across nodes the profile's all-reduce fit"), "{inside}");
    let below = price("1000");
    assert_eq!(below["extrapolated"], true, "{below}");
}

/// The operation is said with the node the price takes: no more GPUs a node than the query has
/// (4 GPUs had read "(8 per node)"), and a last node short of the others.
#[test]
fn a_collectives_nodes_are_said_as_priced() {
    let dir = common::scratch("hw-cost-nodes-said");
    for (gpus, said) in
        [("4", "over 4 GPUs (4 per node)"), ("12", "over 12 GPUs (8 per node, the last node 4)"), ("16", "over 16 GPUs (8 per node)")]
    {
        let q = quote(&["h100-sxm", "all_reduce", "--bytes", "1048576", "--gpus", gpus, "--gpus-per-node", "8"], &dir.join("q.json"));
        assert!(q["operation"].as_str().unwrap().contains(said), "{gpus}: {q}");
    }
}
