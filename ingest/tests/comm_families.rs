//! Communication beyond NCCL (DESIGN §3): every known kernel family counts as
//! communication by default, tested on traces that contain the real kernel
//! names; `--comm-kernels nccl` (HTA's definition) does not see them.

use std::path::{Path, PathBuf};

use tracecast_ingest::analysis::{AnalyzeOptions, Classifier, CommKernels, WindowMode, analyze_job};
use tracecast_ingest::{Job, ReadOptions, kineto};

fn analyze(job: &Job, mode: CommKernels) -> tracecast_ingest::analysis::JobAnalysis {
    let mut opts = AnalyzeOptions::default();
    opts.window = WindowMode::All;
    opts.classifier = Classifier::new(mode, &[]).unwrap();
    analyze_job(job, &opts)
}

fn kernel(name: &str, stream: i64, ts: f64, dur: f64) -> String {
    format!(
        r#"{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": {stream}, "ts": {ts}, "dur": {dur}, "args": {{"stream": {stream}}}}}"#
    )
}

fn job_of(events: &[String]) -> Job {
    let json = format!(r#"{{"traceEvents": [{}]}}"#, events.join(",\n"));
    let t = kineto::parse_bytes(json.as_bytes(), Path::new("rank-0.json"), &ReadOptions::default()).unwrap();
    Job::from_traces(PathBuf::from("synthetic"), vec![Ok(t)])
}

#[test]
fn a_deepep_step_reports_its_dispatch_and_combine_as_communication() {
    // An expert-parallel step whose communication is only DeepEP kernels (the
    // names of csrc/kernels/internode.cu): notify and dispatch before the
    // experts' GEMMs, combine after, partly overlapped by shared-expert work.
    let gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel__5x_cublas";
    let events = vec![
        kernel(
            "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, int, int)",
            7,
            0.0,
            10.0,
        ),
        kernel("void deep_ep::internode::notify_dispatch<false, 8>(int const*, int*, int, int const*, int*, int, int)", 20, 10.0, 15.0),
        kernel("void deep_ep::internode::dispatch<false, 8, 1, 4, 24, 8>(int4*, float*, int*, long*, float*)", 20, 25.0, 300.0),
        kernel(gemm, 7, 100.0, 150.0), // shared expert, overlaps the dispatch
        kernel(gemm, 7, 330.0, 400.0), // routed experts
        kernel("void deep_ep::internode::combine<__nv_bfloat16, 8, 4, 24>(int4*, float*, int const*, int4 const*)", 20, 735.0, 250.0),
        kernel(gemm, 7, 800.0, 100.0), // overlaps the combine
    ];
    let job = job_of(&events);
    let a = analyze(&job, CommKernels::Families);
    let r = &a.ranks[0].breakdown;
    // The DeepEP kernels' own union: [10, 325) ∪ [735, 985) = 565 µs.
    assert!((r.comm_us - 565.0).abs() <= 0.01 * 565.0, "comm {}", r.comm_us);
    // Overlapped by compute: [100, 250) ∪ [800, 900) = 250 µs; exposed the rest.
    assert!((r.overlap_us - 250.0).abs() < 1e-6, "overlap {}", r.overlap_us);
    assert!((r.exposed_comm_us - 315.0).abs() < 1e-6, "exposed {}", r.exposed_comm_us);
    // The layout kernel computes: it is not communication.
    assert!((r.compute_us - (10.0 + 150.0 + 400.0 + 100.0)).abs() < 1e-6, "compute {}", r.compute_us);
    // HTA's definition sees no communication at all.
    assert_eq!(analyze(&job, CommKernels::Nccl).ranks[0].breakdown.comm_us, 0.0);
}

#[test]
fn every_family_counts_on_a_trace_with_its_kernel_names() {
    let names = [
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*, float*)",
        "void nvshmemi_reduce_kernel<float, (rdxn_ops)0>(int, float*)",
        "void c10d::symmetric_memory::two_shot_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16**)",
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)",
        "void tensorrt_llm::kernels::twoShotAllReduceKernel<__nv_bfloat16, 8>(tensorrt_llm::kernels::AllReduceParams)",
        "void mscclpp::allgather6<false>(void*, mscclpp::DeviceHandle<mscclpp::SmChannel>*)",
        "userbuffers_fp16_sum_inplace_gpu_rw_ag(int, int, int, int, int, void**, int, unsigned long)",
        "hcom_allGather_AIV_kernel",
    ];
    // One 10 µs kernel of each family, 100 µs apart, on a communication stream.
    let events: Vec<String> = names.iter().enumerate().map(|(i, n)| kernel(n, 20, 100.0 * i as f64, 10.0)).collect();
    let job = job_of(&events);
    let r = analyze(&job, CommKernels::Families).ranks[0].breakdown;
    assert!((r.comm_us - 10.0 * names.len() as f64).abs() < 1e-6, "comm {}", r.comm_us);
    let nccl = analyze(&job, CommKernels::Nccl).ranks[0].breakdown;
    assert!((nccl.comm_us - 10.0).abs() < 1e-6, "nccl-only comm {}", nccl.comm_us);
}

#[test]
fn a_kernel_with_collective_args_is_communication_whatever_its_name() {
    let events = vec![format!(
        r#"{{"ph": "X", "cat": "kernel", "name": "my_fused_allgather_matmul", "pid": 0, "tid": 20, "ts": 0, "dur": 40, "args": {{"stream": 20, "Collective name": "allgather", "In msg nelems": 1024, "Out msg nelems": 8192, "Group size": 8, "dtype": "BFloat16"}}}}"#
    )];
    let job = job_of(&events);
    assert!((analyze(&job, CommKernels::Families).ranks[0].breakdown.comm_us - 40.0).abs() < 1e-6);
    assert_eq!(analyze(&job, CommKernels::Nccl).ranks[0].breakdown.comm_us, 0.0);
}

#[test]
fn pytorch_symmetric_memory_all_reduces_on_the_real_b200_trace() {
    // The shared B200 trace runs its all-reduces as PyTorch symmetric-memory
    // `multimem_all_reduce_kernel`s (about 2.1 ms): HTA's definition sees only
    // its 22 µs of NCCL.
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces/tracelens/b200/eager_trace.json.gz");
    let job = Job::read(p.clone(), &[p], &ReadOptions::default(), &|_| {});
    let families = analyze(&job, CommKernels::Families).ranks[0].breakdown;
    let nccl = analyze(&job, CommKernels::Nccl).ranks[0].breakdown;
    assert!(nccl.comm_us < 30.0, "{}", nccl.comm_us);
    assert!(families.comm_us > 2000.0, "{}", families.comm_us);
    assert!(families.exposed_comm_us <= families.comm_us);
}

#[test]
fn a_two_dimensional_job_splits_its_communication_by_dimension() {
    // Rank 0 of a TP=2 × DP=2 job (world 4, 8 GPUs per node): its TP group is
    // ranks [0, 1] (contiguous in a node), its DP group [0, 2] (stride 2); a
    // third group says what it is in its description. Known truth per group:
    // TP all-reduces 3 × 50 µs, 50 µs of them under compute; DP 2 × 200 µs, all
    // exposed; the pipeline send 40 µs, exposed.
    let coll = |name: &str, ts: f64, dur: f64, pg: &str, desc: &str, ranks: &str| {
        format!(
            r#"{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 20, "ts": {ts}, "dur": {dur}, "args": {{"stream": 20, "Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "BFloat16", "Process Group Name": "{pg}", "Process Group Description": "{desc}", "Process Group Ranks": "{ranks}"}}}}"#
        )
    };
    let ar = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
    let mut events = vec![
        kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 7, 0.0, 100.0),
        coll(ar, 50.0, 50.0, "1", "undefined", "[0, 1]"),
        coll(ar, 200.0, 50.0, "1", "undefined", "[0, 1]"),
        coll(ar, 300.0, 50.0, "1", "undefined", "[0, 1]"),
        coll(ar, 400.0, 200.0, "2", "undefined", "[0, 2]"),
        coll(ar, 700.0, 200.0, "2", "undefined", "[0, 2]"),
        coll("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", 1000.0, 40.0, "3", "pipeline_parallel", "[0, 4]"),
        // An all-to-all of the unnamed stride-2 group, 30 µs exposed: its ranks say DP, but data
        // parallelism never issues an all-to-all (DLRM's embedding exchange had been counted as DP).
        coll("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", 1100.0, 30.0, "2", "undefined", "[0, 2]")
            .replace("\"allreduce\"", "\"all_to_all\""),
    ];
    events.push(r#"{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "gpu"}}"#.to_string());
    let json =
        format!(r#"{{"distributedInfo": {{"backend": "nccl", "rank": 0, "world_size": 4}}, "traceEvents": [{}]}}"#, events.join(",\n"));
    let t = kineto::parse_bytes(json.as_bytes(), Path::new("rank-0.json"), &ReadOptions::default()).unwrap();
    let job = Job::from_traces(PathBuf::from("2d"), vec![Ok(t)]);
    let a = analyze(&job, CommKernels::Families);
    let dims = &a.ranks[0].comm_by_dimension;
    let get = |d: &str| dims.iter().find(|x| x.dimension.as_str() == d).unwrap_or_else(|| panic!("{d} missing: {dims:?}"));
    let (tp, dp, pp) = (get("tp"), get("dp"), get("pp"));
    assert_eq!((tp.comm_us, tp.exposed_comm_us, tp.from), (150.0, 100.0, "ranks"));
    assert_eq!((dp.comm_us, dp.exposed_comm_us, dp.from), (400.0, 400.0, "ranks"));
    assert_eq!((pp.comm_us, pp.exposed_comm_us, pp.from), (40.0, 40.0, "description"));
    let other = get("other");
    assert_eq!((other.comm_us, other.exposed_comm_us, other.from), (30.0, 30.0, "collective"));
    // The job totals add the ranks up.
    let total: f64 = a.comm_by_dimension.iter().map(|d| d.comm_us).sum();
    assert!((total - a.ranks[0].breakdown.comm_us).abs() < 1e-6, "{total} vs {}", a.ranks[0].breakdown.comm_us);
}
