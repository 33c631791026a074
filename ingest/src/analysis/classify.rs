//! Which GPU activity is compute, communication or memory.

use regex::Regex;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::rank::RankTrace;

/// Whether a kernel name is an NCCL (or RCCL) communication kernel (`ncclDevKernel_…`, `ncclKernel_…`).
pub(crate) fn is_nccl_kernel(name: &str) -> bool {
    name.strip_prefix("nccl").is_some_and(|rest| rest.contains("Kernel"))
}

/// The class of a GPU activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivityClass {
    /// Every kernel that is not communication.
    Compute,
    /// Communication kernels (the known families, or `^nccl.*Kernel` only, plus user patterns).
    Comm,
    /// Memcpy and memset.
    Memory,
}

impl ActivityClass {
    /// Its name, as serialized (`compute`, `comm`, `memory`).
    pub fn as_str(self) -> &'static str {
        match self {
            ActivityClass::Compute => "compute",
            ActivityClass::Comm => "comm",
            ActivityClass::Memory => "memory",
        }
    }
}

/// Which kernels count as communication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommKernels {
    /// Every known communication family ([`FAMILIES`]), and any kernel whose
    /// args carry `Collective name`.
    #[default]
    Families,
    /// Exactly `^nccl.*Kernel`, the definition HTA uses (results compare across tools).
    Nccl,
}

/// A family of communication kernels: its name, a regular expression over
/// kernel names (from the libraries' own sources), and how to read the
/// collective from a name of the family.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// Family name in outputs.
    pub name: &'static str,
    /// Matches the kernel names of the family.
    pub pattern: &'static str,
    /// The library and where its kernel names come from.
    pub source: &'static str,
}

/// The communication kernel families tracecast knows (users add patterns
/// with `--comm-pattern`).
pub const FAMILIES: &[Family] = &[
    Family { name: "nccl", pattern: r"^nccl.*Kernel", source: "NCCL / RCCL: ncclKernel_*, ncclDevKernel_*, ncclDevKernel_Generic" },
    Family {
        name: "deepep",
        // Not `layout::get_dispatch_layout`: that computes, it does not communicate.
        pattern: r"(\bdeep_ep|\bep)::(intranode|internode|internode_ll)::(dispatch|combine|notify_dispatch|notify_combine|cached_notify_dispatch|cached_notify_combine|cached_notify|clean_low_latency_buffer)\b",
        source: "DeepEP csrc/kernels/{intranode,internode,internode_ll}.cu",
    },
    Family {
        name: "nvshmem",
        pattern: r"(^|[\s:])nvshmemi?x?_\w+",
        source: "NVSHMEM device collectives (nvshmem_*, nvshmemi_*, nvshmemx_*)",
    },
    Family {
        name: "torch_symm_mem",
        pattern: r"symmetric_memory::|symm_mem|\b(one|two)_shot_all_reduce\w*|\bmultimem_\w*all_(reduce|gather)\w*",
        source: "PyTorch c10d symmetric memory (CUDASymmetricMemoryOps.cu: one_shot_all_reduce_kernel, two_shot_all_reduce_kernel, multimem_*)",
    },
    Family {
        name: "custom_allreduce",
        pattern: r"\bcross_device_reduce_[12]stage",
        source: "vLLM / SGLang custom all-reduce (custom_all_reduce.cuh: cross_device_reduce_1stage, _2stage)",
    },
    Family {
        name: "tensorrt_llm",
        pattern: r"tensorrt_llm::kernels::\w*(?i:all_?reduce|allgather|lamport)\w*",
        source: "TensorRT-LLM customAllReduceKernels.cu (oneShotAllReduceKernel, twoShotAllReduceKernel, allreduce_fusion_kernel)",
    },
    Family { name: "mscclpp", pattern: r"\bmscclpp::", source: "MSCCL++ (namespace mscclpp)" },
    Family { name: "userbuffers", pattern: r"userbuffers", source: "Transformer Engine userbuffers (userbuffers_*, kuserbuffers_*)" },
    Family {
        name: "hccl",
        pattern: r"(?i)(^|[\s:])(hccl|hcom)_?\w*(all|reduce|gather|broadcast|send|recv)",
        source: "HCCL (Ascend / Gaudi collective kernels)",
    },
];

/// Classifies GPU activity. By default a kernel is communication when it
/// belongs to a known family ([`FAMILIES`]) or its args carry a collective
/// name; [`CommKernels::Nccl`] restricts that to exactly `^nccl.*Kernel`
/// (NCCL `ncclKernel_*`, `ncclDevKernel_*`, RCCL `ncclDevKernel_Generic`), as
/// HTA does. Users may add patterns for custom communication kernels.
#[derive(Debug, Clone)]
pub struct Classifier {
    mode: CommKernels,
    families: Vec<(&'static str, Regex)>,
    extra: Vec<Regex>,
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier::new(CommKernels::default(), &[]).unwrap_or_else(|_| Classifier {
            mode: CommKernels::Nccl,
            families: Vec::new(),
            extra: Vec::new(),
        })
    }
}

impl Classifier {
    /// The default families plus `patterns` (regular expressions matched anywhere in the kernel name).
    pub fn with_patterns(patterns: &[String]) -> Result<Classifier> {
        Classifier::new(CommKernels::default(), patterns)
    }

    /// The communication definition `mode` plus `patterns`.
    pub fn new(mode: CommKernels, patterns: &[String]) -> Result<Classifier> {
        let compile = |p: &str| {
            // An empty expression matches every name: every kernel would be communication.
            if p.is_empty() {
                return Err(Error::Pattern { pattern: String::new(), message: "an empty pattern matches every kernel".into() });
            }
            Regex::new(p).map_err(|e| Error::Pattern { pattern: p.to_string(), message: e.to_string() })
        };
        // The families' expressions are compiled once per process (every
        // default classifier of every rank shares them; a clone is a reference).
        static COMPILED: std::sync::OnceLock<Vec<(&'static str, Regex)>> = std::sync::OnceLock::new();
        let families = match mode {
            CommKernels::Families => {
                COMPILED.get_or_init(|| FAMILIES.iter().filter_map(|f| Regex::new(f.pattern).ok().map(|r| (f.name, r))).collect()).clone()
            }
            CommKernels::Nccl => Vec::new(),
        };
        let extra = patterns.iter().map(|p| compile(p)).collect::<Result<Vec<_>>>()?;
        Ok(Classifier { mode, families, extra })
    }

    /// Which definition of communication this is.
    pub fn mode(&self) -> CommKernels {
        self.mode
    }

    /// The definition in words, for outputs.
    pub fn definition(&self) -> String {
        let base = match self.mode {
            CommKernels::Families => format!(
                "kernel families {} and any kernel with a Collective name",
                FAMILIES.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
            ),
            CommKernels::Nccl => "^nccl.*Kernel (as HTA)".to_string(),
        };
        if self.extra.is_empty() {
            base
        } else {
            format!("{base}, plus {}", self.extra.iter().map(Regex::as_str).collect::<Vec<_>>().join(", "))
        }
    }

    /// The family of a communication kernel name (`user` for a user pattern), `None` when it is not one.
    pub fn family(&self, name: &str) -> Option<&'static str> {
        if is_nccl_kernel(name) {
            return Some("nccl");
        }
        if let Some((f, _)) = self.families.iter().find(|(_, r)| r.is_match(name)) {
            return Some(f);
        }
        self.extra.iter().any(|r| r.is_match(name)).then_some("user")
    }

    /// Whether a kernel of this name is communication.
    pub fn is_comm_kernel(&self, name: &str) -> bool {
        self.family(name).is_some()
    }

    /// The class of every row that is GPU activity, `None` for the others.
    pub fn classes(&self, trace: &RankTrace) -> Vec<Option<ActivityClass>> {
        super::facts::count(super::facts::Fact::Classes);
        let comm_names: Vec<bool> = trace.names.iter().map(|n| self.is_comm_kernel(n)).collect();
        let ev = &trace.events;
        let by_args = self.mode == CommKernels::Families;
        ev.kind
            .iter()
            .zip(&ev.name)
            .enumerate()
            .map(|(i, (kind, &name))| match kind {
                EventKind::Kernel if comm_names.get(name as usize).copied().unwrap_or(false) => Some(ActivityClass::Comm),
                EventKind::Kernel if by_args && trace.collective_args_of(i).is_some_and(|a| a.collective().is_some()) => {
                    Some(ActivityClass::Comm)
                }
                EventKind::Kernel => Some(ActivityClass::Compute),
                EventKind::Memcpy | EventKind::Memset => Some(ActivityClass::Memory),
                _ => None,
            })
            .collect()
    }
}

/// The collective a communication kernel outside NCCL performs, from its
/// name alone (the family read off the name's namespace).
pub(crate) fn comm_kernel_collective(name: &str) -> Option<crate::collective::Collective> {
    let family = if name.contains("ep::internode") || name.contains("ep::intranode") {
        "deepep"
    } else if name.contains("cross_device_reduce") {
        "custom_allreduce"
    } else if name.contains("userbuffers") {
        "userbuffers"
    } else {
        "other"
    };
    family_collective(family, name)
}

/// The collective a kernel of a non-NCCL family performs, from its name:
/// DeepEP dispatch and combine are all-to-alls; the all-reduce libraries'
/// kernels say what they do.
pub fn family_collective(family: &str, name: &str) -> Option<crate::collective::Collective> {
    use crate::collective::Collective;
    let lower = name.to_ascii_lowercase();
    match family {
        "deepep" if lower.contains("::dispatch") || lower.contains("::combine") => Some(Collective::AllToAll),
        "deepep" => None,
        "custom_allreduce" => Some(Collective::AllReduce),
        "userbuffers" if lower.contains("_rs") || lower.contains("reducescatter") => Some(Collective::ReduceScatter),
        "userbuffers" if lower.contains("_ag") || lower.contains("allgather") => Some(Collective::AllGather),
        // TensorRT-LLM's Lamport kernels are all-reduces; the rest say what they do.
        _ if lower.contains("lamport") => Some(Collective::AllReduce),
        _ => Collective::from_name(&lower).filter(|c| !matches!(c, Collective::Unknown | Collective::Barrier)),
    }
}

#[cfg(test)]
mod tests {
    use super::{ActivityClass, Classifier};

    #[test]
    fn a_class_name_is_its_serialized_name() {
        for c in [ActivityClass::Compute, ActivityClass::Comm, ActivityClass::Memory] {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
    }

    /// `--comm-pattern ""` made every kernel communication, silently.
    #[test]
    fn an_empty_pattern_is_refused() {
        let e = Classifier::with_patterns(&[String::new()]).unwrap_err().to_string();
        assert!(e.contains("an empty pattern matches every kernel"), "{e}");
        assert!(Classifier::with_patterns(&["my_allreduce".into()]).is_ok());
    }

    #[test]
    fn the_nccl_rule_is_exactly_nccl_kernel() {
        let c = Classifier::new(super::CommKernels::Nccl, &[]).unwrap();
        assert!(c.is_comm_kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"));
        assert!(!c.is_comm_kernel("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*)"));
        assert!(c.is_comm_kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"));
        assert!(c.is_comm_kernel("ncclDevKernel_Generic"));
        assert!(!c.is_comm_kernel("void at::native::elementwise_kernel"));
        assert!(!c.is_comm_kernel("xnccl_Kernel"));
        let c = Classifier::new(super::CommKernels::Nccl, &["^custom_allreduce".into()]).unwrap();
        assert!(c.is_comm_kernel("custom_allreduce_kernel<8>"));
        assert!(Classifier::with_patterns(&["(".into()]).is_err());
    }

    #[test]
    fn every_family_recognises_its_library_kernel_names() {
        use crate::collective::Collective;
        let c = Classifier::default();
        // (kernel name as the libraries define it, family, collective)
        let cases: &[(&str, &str, Option<Collective>)] = &[
            ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl", None),
            ("void deep_ep::internode::dispatch<false, 8, 1, 4, 24, 8>(int4*, float*, int*)", "deepep", Some(Collective::AllToAll)),
            ("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*, float*)", "deepep", Some(Collective::AllToAll)),
            ("void deep_ep::internode::notify_dispatch<false, 8>(int const*, int*, int)", "deepep", None),
            ("void deep_ep::intranode::cached_notify_dispatch<8>(int const*, int, void**, int**, int)", "deepep", None),
            ("void deep_ep::internode_ll::dispatch<false, 3, 7168>(void*, float*)", "deepep", Some(Collective::AllToAll)),
            ("void nvshmemi_reduce_kernel<float, (rdxn_ops)0>(int, float*)", "nvshmem", None),
            (
                "void c10d::symmetric_memory::one_shot_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16**)",
                "torch_symm_mem",
                Some(Collective::AllReduce),
            ),
            (
                "void c10d::symmetric_memory::multimem_all_gather_kernel<16>(unsigned int*, unsigned int*)",
                "torch_symm_mem",
                Some(Collective::AllGather),
            ),
            (
                "void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)",
                "custom_allreduce",
                Some(Collective::AllReduce),
            ),
            ("void sglang::cross_device_reduce_1stage<float, 4>(sglang::RankData*)", "custom_allreduce", Some(Collective::AllReduce)),
            (
                "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>(tensorrt_llm::kernels::AllReduceParams)",
                "tensorrt_llm",
                Some(Collective::AllReduce),
            ),
            (
                "void mscclpp::allreduce8<__half>(__half*, mscclpp::DeviceHandle<mscclpp::SmChannel>*)",
                "mscclpp",
                Some(Collective::AllReduce),
            ),
            (
                "userbuffers_fp16_sum_inplace_gpu_rr_rs(int, int, int, int, int, void**, int, unsigned long)",
                "userbuffers",
                Some(Collective::ReduceScatter),
            ),
            ("hcom_allReduce_AIV_kernel", "hccl", Some(Collective::AllReduce)),
        ];
        for (name, family, collective) in cases {
            assert_eq!(c.family(name), Some(*family), "{name}");
            if *family != "nccl" {
                assert_eq!(super::family_collective(family, name), *collective, "{name}");
            }
        }
        // Not communication: DeepEP's layout computation, ordinary kernels.
        for name in [
            "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)",
            "void at::native::vectorized_elementwise_kernel<4>",
            "sm90_xmma_gemm_bf16bf16",
        ] {
            assert_eq!(c.family(name), None, "{name}");
        }
    }
}
