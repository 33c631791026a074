//! `Input type` of NVTX-shaped ops, from the names of the kernels they launched.
//!
//! `emit_nvtx` records input shapes but no dtypes, and work accounting needs
//! the dtype to pick a peak. The kernels an op launched say it: template
//! arguments (`c10::BFloat16`, `__nv_bfloat16`, `cutlass::half_t`, `float`),
//! library names (`sm90_xmma_gemm_bf16bf16_…`, `ampere_fp16_s16816gemm`), and
//! cuBLASLt's `nvjet_<a><c><d>_…` type letters (`nvjet_tst_…` launched by
//! `c10::BFloat16` GEMMs in the corpus's Kineto traces, `h` half, `s` float).
//! An op gets the dtype most of its kernels name; ops whose kernels name none
//! keep an empty `Input type`.

use rustc_hash::FxHashMap;

use crate::event::EventKind;
use crate::link::{Links, NONE};
use crate::rank::RankTrace;

/// The profiler dtype a kernel name shows, when it shows one.
pub(crate) fn of_kernel(name: &str) -> Option<&'static str> {
    const BF16: &str = "c10::BFloat16";
    const HALF: &str = "c10::Half";
    const FLOAT: &str = "float";
    const FP8: &str = "c10::Float8_e4m3fn";
    if let Some(rest) = name.strip_prefix("nvjet_") {
        // `nvjet_sm103_tst_…` names the architecture first.
        let code = rest.split('_').find(|p| p.len() == 3 && p.bytes().all(|c| c.is_ascii_lowercase()));
        return match code.and_then(|c| c.bytes().next()) {
            Some(b't') => Some(BF16),
            Some(b'h') => Some(HALF),
            Some(b's') => Some(FLOAT),
            _ => None,
        };
    }
    let l = name.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| l.contains(w));
    if has(&["bf16", "bfloat16"]) {
        Some(BF16)
    } else if has(&["e4m3", "e5m2", "fp8", "float8"]) {
        Some(FP8)
    } else if has(&["fp16", "f16", "half"]) {
        Some(HALF)
    } else if has(&["tf32", "f32", "sgemm", "<float", "float>", "float,"]) {
        Some(FLOAT)
    } else {
        None
    }
}

/// Fills the `Input type` of every shaped op from its kernels: one type per
/// input with a shape (empty for scalars and lists).
pub(crate) fn fill_input_types(t: &mut RankTrace) {
    if t.op_shapes.is_empty() {
        return;
    }
    let links = Links::new(t);
    let shaped = |row: usize| t.op_shapes_of(row).is_some();
    let mut votes: FxHashMap<usize, FxHashMap<&'static str, u32>> = FxHashMap::default();
    for i in 0..t.events.len() {
        if t.events.kind.get(i) != Some(&EventKind::Kernel) {
            continue;
        }
        let Some(dtype) = of_kernel(t.name(i)) else { continue };
        let op = links.launch_op.get(i).copied().unwrap_or(NONE);
        if let Some(row) = links.ancestors(op, 3).find(|&r| shaped(r)) {
            *votes.entry(row).or_default().entry(dtype).or_insert(0) += 1;
        }
    }
    for s in &mut t.op_shapes {
        let Some(v) = votes.get(&(s.event as usize)) else { continue };
        let Some((dtype, _)) = v.iter().max_by_key(|(d, n)| (**n, std::cmp::Reverse(**d))) else { continue };
        let types: Vec<&str> = s.dims().iter().map(|d| if d.is_empty() { "" } else { dtype }).collect();
        s.input_types = serde_json::to_string(&types).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::of_kernel;

    #[test]
    fn kernel_names_show_their_dtype() {
        assert_eq!(of_kernel("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN"), Some("c10::BFloat16"));
        assert_eq!(of_kernel("nvjet_sm103_tst_64x8_64x16_1x4_h_bz_TNT"), Some("c10::BFloat16"));
        assert_eq!(of_kernel("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN"), Some("c10::Half"));
        assert_eq!(of_kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"), Some("c10::BFloat16"));
        assert_eq!(of_kernel("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3"), Some("float"));
        assert_eq!(of_kernel("ampere_fp16_s16816gemm_fp16_64x64_sliced1x2_ldg8_f2f_stages_64x6_tn"), Some("c10::Half"));
        assert_eq!(
            of_kernel(
                "void at::native::vectorized_elementwise_kernel<(int)8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char *, 3>>"
            ),
            Some("c10::BFloat16")
        );
        assert_eq!(of_kernel("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, cutlass::bfloat16_t>>"), Some("c10::BFloat16"));
        assert_eq!(of_kernel("void at::native::reduce_kernel<512, 1>"), None);
    }
}
