//! One GEMM price: `hw cost` (the pricing layer's quote), `project` (the
//! analytical model's cluster) and `replay --target` (the cost model of a
//! measured kernel) give the same time for the same GEMM on the same GPU,
//! with and without a profile whose traces correct the table.

use std::sync::Arc;

use tracecast_calibrate::catalog::Dtype;
use tracecast_calibrate::cost::{CrossDevice, Rule};
use tracecast_calibrate::measured::Measurements;
use tracecast_calibrate::pricing::{GemmShape, Operation, Pricing};
use tracecast_calibrate::profile::TableCorrection;
use tracecast_calibrate::work::{KernelClass, KernelWork, OpShape, OpWork};
use tracecast_calibrate::{Catalog, DeviceModel, Profile};
use tracecast_replay::workload::llm::Cluster;

#[test]
fn hw_cost_project_and_replay_price_a_gemm_alike() {
    let catalog = Catalog::builtin();
    let pricing = Pricing::new(catalog.clone(), Arc::new(Measurements::builtin()));
    let (m, k, n) = (8192.0, 4096.0, 14336.0);
    for gpu_id in ["mi300x", "h100-sxm", "v100"] {
        let gpu = catalog.gpu(gpu_id).unwrap().clone();
        let dtype = if gpu_id == "v100" { Dtype::Fp16 } else { Dtype::Bf16 };
        let shape = GemmShape { batch: 1.0, m, n, k, dtype };
        // A profile whose traces ran GEMMs at 1.1× the table's time (a correction
        // that speeds the table up is capped at the GPU's best measured GEMM).
        let mut profile = Profile::of_catalog_gpu(&gpu, &catalog);
        profile.table_corrections.push(TableCorrection {
            class: KernelClass::Gemm,
            dtype: Some(dtype),
            ratio: 1.1,
            ln_spread: 0.2,
            samples: 100,
            rule: "gemm_table".into(),
            max_flops: None,
            misaligned: None,
        });
        let target = DeviceModel::from_profile(&profile, &catalog);
        // hw cost GPU gemm --m --n --k [--profile P]
        let plain = pricing.quote(&gpu, &Operation::Gemm(shape), None, None).unwrap().time_us;
        let quoted = pricing.quote(&gpu, &Operation::Gemm(shape), Some(&profile), None).unwrap().time_us;
        assert!((quoted - 1.1 * plain).abs() < 1e-9 * plain, "{gpu_id}: {quoted} vs 1.1 × {plain}");
        // project: the cluster's forward GEMM of that shape.
        let cluster = Cluster::from_catalog(&catalog, gpu_id, 8, dtype, Some(&target)).unwrap();
        let projected = cluster.prices.as_ref().unwrap().time_s(1.0, m, k, n, dtype).unwrap() * 1e6;
        assert!((projected - quoted).abs() < 1e-9 * quoted, "{gpu_id}: project {projected} vs hw cost {quoted}");
        // replay --target: a kernel of that op measured on an A100.
        let source = DeviceModel::from_gpu(catalog.gpu("a100-80gb").unwrap());
        let op = OpWork {
            class: KernelClass::Gemm,
            flops: Some(shape.flops()),
            bytes: Some(shape.bytes()),
            dtype: Some(dtype),
            shape: Some(OpShape::Gemm { batch: 1.0, m, n, k }),
        };
        let kernel =
            KernelWork { class: KernelClass::Gemm, dtype: Some(dtype), op_work: op.flops, op: Some(op), op_row: Some(0), share: 1.0 };
        let cost = CrossDevice { source: &source, target: &target, pricing: Some(&pricing) }.kernel(&kernel, 1234.0);
        assert!(matches!(cost.rule, Rule::GemmTargetTable | Rule::GemmSpecModel), "{:?}", cost.rule);
        assert!((cost.us - quoted).abs() < 1e-9 * quoted, "{gpu_id}: replay {} vs hw cost {quoted}", cost.us);
        println!("{gpu_id}: {quoted:.1} µs by hw cost, project and replay --target ({:?})", cost.rule);
    }
}
