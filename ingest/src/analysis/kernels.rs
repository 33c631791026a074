//! Per-kernel-name statistics.

use rustc_hash::FxHashMap as HashMap;

use serde::Serialize;

use super::breakdown::Window;
use super::classify::ActivityClass;
use crate::rank::RankTrace;

/// Time spent in one GPU activity name inside the window (clipped to it).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct KernelStats {
    /// Kernel (or memcpy/memset) name.
    pub name: String,
    /// compute, comm or memory.
    pub class: ActivityClass,
    /// Instances.
    pub count: u64,
    /// Σ duration, µs.
    pub total_us: f64,
    /// Mean duration, µs.
    pub mean_us: f64,
    /// Longest instance, µs.
    pub max_us: f64,
}

/// Statistics per name, longest total first (ties by name).
pub fn kernel_stats(trace: &RankTrace, classes: &[Option<ActivityClass>], w: Window) -> Vec<KernelStats> {
    let ev = &trace.events;
    let mut by_name: HashMap<u32, (ActivityClass, u64, i64, i64)> = HashMap::default();
    for (i, class) in classes.iter().enumerate() {
        let Some(class) = *class else { continue };
        let Some(d) = w.overlap_ns(ev.ts_ns.get(i).copied().unwrap_or(0), ev.end_ns(i)) else { continue };
        let entry = by_name.entry(ev.name.get(i).copied().unwrap_or(0)).or_insert((class, 0, 0, 0));
        entry.1 += 1;
        entry.2 = entry.2.saturating_add(d);
        entry.3 = entry.3.max(d);
    }
    let mut out: Vec<KernelStats> = by_name
        .into_iter()
        .map(|(name, (class, count, total, max))| KernelStats {
            name: trace.names.get(name).to_string(),
            class,
            count,
            total_us: total as f64 / 1000.0,
            mean_us: total as f64 / 1000.0 / count.max(1) as f64,
            max_us: max as f64 / 1000.0,
        })
        .collect();
    out.sort_by(|a, b| b.total_us.total_cmp(&a.total_us).then_with(|| a.name.cmp(&b.name)));
    out
}

/// [`short_kernel_name`] of each of `names`, shown together (a table's rows): names that
/// shorten alike though they differ are widened, up to twice `width`, until they are told
/// apart (the part that differs had been cut out of the middle: two `split_embedding_backward…`
/// kernels read as one), and what even that cannot tell apart (names that differ only in
/// their parameter lists) is numbered, `[1]`, `[2]`, in the rows' order.
pub fn short_kernel_names(names: &[&str], width: usize) -> Vec<String> {
    let mut out: Vec<String> = names.iter().map(|n| short_kernel_name(n, width)).collect();
    let alike = |out: &[String]| -> Vec<usize> {
        (0..out.len()).filter(|&i| (0..out.len()).any(|j| out[j] == out[i] && names[j] != names[i])).collect()
    };
    for wider in [width * 5 / 4, width * 3 / 2, width * 2] {
        let clash = alike(&out);
        if clash.is_empty() {
            return out;
        }
        for i in clash {
            out[i] = short_kernel_name(names[i], wider);
        }
    }
    // Numbered by distinct name: one name in two rows keeps one number.
    let clash = alike(&out);
    let mut numbers: std::collections::HashMap<&str, (String, usize)> = std::collections::HashMap::new();
    let mut next: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for &i in &clash {
        if !numbers.contains_key(names[i]) {
            let k = next.entry(out[i].clone()).or_default();
            *k += 1;
            numbers.insert(names[i], (out[i].clone(), *k));
        }
    }
    for i in clash {
        let (short, k) = &numbers[names[i]];
        out[i] = format!("{short} [{k}]");
    }
    out
}

/// A kernel name shortened to its distinguishing part for a terminal column
/// of `width` characters: the function without its namespaces, return type
/// and parameter list, and its template arguments with their namespaces and
/// lambda bodies dropped, so `void at::native::vectorized_elementwise_kernel<4,
/// at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, …)`
/// reads `vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, Array<char*, 3>>`
/// and the variants stay apart. The full name stays in JSON and tables.
pub fn short_kernel_name(name: &str, width: usize) -> String {
    // A copy or a set is no C++ signature: its parenthesis says which kind (the text table had
    // printed pinned and pageable `Memcpy HtoD (… -> Device)` under one name).
    if name.starts_with("Memcpy ") || name.starts_with("Memset ") {
        return cut_to_width(name.trim().to_string(), width);
    }
    let cleaned = name.trim().replace("(anonymous namespace)::", "");
    let name = cleaned.strip_prefix("void ").unwrap_or(&cleaned);
    // Cut the parameter list: the first '(' outside template brackets that
    // follows the function name (lambda signatures inside templates stay in).
    // Parentheses inside template arguments hold expressions whose `>` is no bracket
    // (`std::enable_if<(((8)>(1))), void>::type f<…>(…)` had been cut to `enable_if<(((8)>`).
    let (mut depth, mut paren) = (0i32, 0i32);
    let mut cut = name.len();
    let mut last_space = None;
    for (i, c) in name.char_indices() {
        match c {
            '(' if depth > 0 => paren += 1,
            ')' if depth > 0 => paren -= 1,
            '<' if paren == 0 => depth += 1,
            '>' if paren == 0 => depth -= 1,
            '(' if depth == 0 && i > 0 => {
                cut = i;
                break;
            }
            ' ' if depth == 0 && paren == 0 => last_space = Some(i),
            _ => {}
        }
    }
    // A return type before the function's name (`std::enable_if<…>::type vllm::fused_add_rms_norm_kernel`).
    let start = last_space.filter(|&i| i + 1 < cut).map_or(0, |i| i + 1);
    let base = &name[start..cut];
    // Drop namespace qualifiers of every identifier path (`a::b::c` → `c`),
    // and lambda paths (`f(…)::{lambda()#2}::…` → `f·λ`).
    let mut out = String::with_capacity(base.len());
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        if !token.is_empty() {
            let t = if let Some(p) = token.find("::{lambda") {
                format!("{}·λ", last_segment(&token[..p]).split('(').next().unwrap_or_default())
            } else {
                last_segment(token).to_string()
            };
            out.push_str(&t);
            token.clear();
        }
    };
    let mut paren = 0i32;
    for c in base.chars() {
        match c {
            '(' => {
                paren += 1;
                token.push(c);
            }
            ')' => {
                paren -= 1;
                token.push(c);
            }
            '<' | '>' | ',' if paren == 0 => {
                flush(&mut token, &mut out);
                if c == '>' && out.ends_with(' ') {
                    out.pop();
                }
                out.push(c);
            }
            ' ' if paren == 0 && token.is_empty() => {
                if out.ends_with(',') {
                    out.push(' ');
                }
            }
            _ => token.push(c),
        }
    }
    flush(&mut token, &mut out);
    if out.trim().is_empty() {
        out = name.to_string();
    }
    cut_to_width(out, width)
}

/// `out` itself when it fits `width` characters, else its start and end.
fn cut_to_width(out: String, width: usize) -> String {
    let chars: Vec<char> = out.chars().collect();
    if chars.len() <= width {
        return out;
    }
    // The start and the end, cut in the middle: names of one family differ at either (cuBLAS's
    // `…_execute_kernel__5x_cublas` and `…_execute_split_k_kernel__5x_cublas` had printed alike).
    let tail = width / 3;
    let head = width.saturating_sub(1 + tail);
    let mut s: String = chars[..head].iter().collect();
    s.push('…');
    s.extend(&chars[chars.len() - tail..]);
    s
}

/// `at::native::add_kernel` → `add_kernel`; keeps `(anonymous namespace)`-free tails.
fn last_segment(path: &str) -> &str {
    let path = path.trim();
    // Split on `::` outside parentheses.
    let mut depth = 0i32;
    let mut start = 0;
    let bytes = path.as_bytes();
    let mut i = 0;
    while i + 1 < bytes.len() {
        match bytes[i] {
            b'(' => depth += 1,
            b')' => depth -= 1,
            b':' if depth == 0 && bytes[i + 1] == b':' => {
                start = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    &path[start..]
}

#[cfg(test)]
mod short_name_tests {
    use super::short_kernel_name;

    #[test]
    fn elementwise_variants_stay_apart() {
        let names = [
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
            "void at::native::vectorized_elementwise_kernel<2, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
            "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >(int, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2>)",
            "void at::native::vectorized_elementwise_kernel<4, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)",
        ];
        let short: Vec<String> = names.iter().map(|n| short_kernel_name(n, 80)).collect();
        assert_eq!(short[0], "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, Array<char*, 3>>");
        assert_eq!(short[1], "vectorized_elementwise_kernel<2, CUDAFunctor_add<float>, Array<char*, 3>>");
        for (i, a) in short.iter().enumerate() {
            assert!(a.chars().count() <= 80, "{a}");
            for b in &short[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert!(short[3].starts_with("vectorized_elementwise_kernel<4, sigmoid_kernel_cuda·λ"), "{}", short[3]);
        assert_eq!(
            short_kernel_name("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 70),
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
        );
        assert_eq!(
            short_kernel_name(
                "void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<float, unsigned int>)",
                80
            ),
            "indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>"
        );
        // Copies of two kinds (an Nsight export's pinned and pageable HtoD) stay apart.
        let copies =
            ["Memcpy HtoD (Pinned -> Device)", "Memcpy HtoD (Pageable -> Device)", "Memset (Device)"].map(|n| short_kernel_name(n, 80));
        assert_eq!(copies, ["Memcpy HtoD (Pinned -> Device)", "Memcpy HtoD (Pageable -> Device)", "Memset (Device)"]);
    }

    /// A return type before the name, with a comparison inside its template arguments (vLLM's
    /// kernels on B200), had left `enable_if<(((8)>` of the name; two cuBLAS kernels differing
    /// near their ends had printed alike, cut at the end.
    #[test]
    fn the_name_is_kept_and_names_that_differ_show_it() {
        assert_eq!(
            short_kernel_name(
                "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, c10::BFloat16 const*, float, int, int)",
                80
            ),
            "fused_add_rms_norm_kernel<BFloat16, 8>"
        );
        let [a, b] = [
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_split_k_kernel__5x_cublas",
        ]
        .map(|n| short_kernel_name(n, 80));
        assert_ne!(a, b);
        assert_eq!(a.chars().count(), 80);
        assert!(a.starts_with("sm80_xmma_gemm_f32f32") && b.ends_with("split_k_kernel__5x_cublas"), "{a} | {b}");
    }
}
