//! Collectives: their names across NCCL/RCCL/c10d spellings, kernel-name
//! parsing, message sizes and the nccl-tests bus-bandwidth factors.

use serde::Serialize;

/// A collective operation, named as in DESIGN §4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    /// All-reduce.
    AllReduce,
    /// All-gather (message size = the gathered output).
    AllGather,
    /// Reduce-scatter (message size = the full input).
    ReduceScatter,
    /// All-to-all (runs as `SendRecv` kernels in NCCL).
    AllToAll,
    /// Broadcast.
    Broadcast,
    /// Reduce.
    Reduce,
    /// Point-to-point send / receive.
    SendRecv,
    /// Barrier (a tiny all-reduce).
    Barrier,
    /// Communication whose operation the trace does not name (e.g. `ncclDevKernel_Generic`).
    Unknown,
}

impl Collective {
    /// The stable snake_case name used in outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::AllToAll => "all_to_all",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::SendRecv => "send_recv",
            Collective::Barrier => "barrier",
            Collective::Unknown => "unknown",
        }
    }

    /// Whether a CPU op or range is PyTorch's around a collective: `record_function`'s
    /// `nccl:all_to_all`, the `c10d::alltoall_base_` operator. The one test both readers ask
    /// (Kineto's launching ops, Nsight's NVTX ranges): an all-to-all runs as NCCL sends and
    /// receives, and only this op says what it was.
    pub fn is_torch_op(name: &str) -> bool {
        name.starts_with("nccl:") || name.starts_with("c10d::")
    }

    /// Reads a c10d / profiler `Collective name` (`allreduce`, `_allgather_base`,
    /// `reduce_scatter_tensor_coalesced`, `alltoall_base`, `send`, …) or an NCCL
    /// kernel operation (`AllReduce`, `SendRecv`). `None` for bookkeeping (`wait`)
    /// and for names that are not communication.
    pub fn from_name(name: &str) -> Option<Collective> {
        let name = name.strip_prefix("nccl:").or_else(|| name.strip_prefix("c10d::")).unwrap_or(name);
        let key: String = name.chars().filter(|c| *c != '_' && *c != '-').flat_map(char::to_lowercase).collect();
        let c = if key.contains("allreduce") {
            Collective::AllReduce
        } else if key.contains("allgather") {
            Collective::AllGather
        } else if key.contains("reducescatter") {
            Collective::ReduceScatter
        } else if key.contains("alltoall") {
            Collective::AllToAll
        } else if key.contains("broadcast") || key == "bcast" {
            Collective::Broadcast
        } else if key.contains("sendrecv") || key.starts_with("send") || key.starts_with("recv") {
            Collective::SendRecv
        } else if key.starts_with("reduce") {
            Collective::Reduce
        } else if key.contains("barrier") {
            Collective::Barrier
        } else if key == "generic" {
            Collective::Unknown
        } else {
            return None;
        };
        Some(c)
    }

    /// A collective named by a user (a measurements file's `collective`
    /// column, `hw cost`'s operation): one of the names nccl-tests and this
    /// tool give them (`all_reduce` or `allreduce`, `all_gather`,
    /// `reduce_scatter`, `all_to_all` or `alltoall`, `broadcast`, `reduce`,
    /// `send_recv` or `sendrecv`), exactly, in any case — unlike a trace's names
    /// ([`Collective::from_name`]), where `allreduce_coalesced` is an all-reduce.
    pub fn from_user_name(name: &str) -> Option<Collective> {
        let key: String = name.trim().chars().filter(|c| *c != '_' && *c != '-').flat_map(char::to_lowercase).collect();
        Some(match key.as_str() {
            "allreduce" => Collective::AllReduce,
            "allgather" => Collective::AllGather,
            "reducescatter" => Collective::ReduceScatter,
            "alltoall" => Collective::AllToAll,
            "broadcast" => Collective::Broadcast,
            "reduce" => Collective::Reduce,
            "sendrecv" => Collective::SendRecv,
            _ => return None,
        })
    }

    /// [`Collective::bus_factor`] when the group's size may be unknown:
    /// point-to-point, broadcast and reduce move the message once whatever the group.
    pub fn bus_factor_in(self, n: Option<i64>) -> Option<f64> {
        match (n.and_then(|n| self.bus_factor(n)), self) {
            (Some(k), _) => Some(k),
            (None, Collective::SendRecv | Collective::Broadcast | Collective::Reduce) => Some(1.0),
            _ => None,
        }
    }

    /// The nccl-tests bus-bandwidth factor for a group of `n` ranks:
    /// busbw = algbw × factor.
    pub fn bus_factor(self, n: i64) -> Option<f64> {
        if n < 1 {
            return None;
        }
        let n = n as f64;
        match self {
            Collective::AllReduce => Some(2.0 * (n - 1.0) / n),
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => Some((n - 1.0) / n),
            Collective::Broadcast | Collective::Reduce | Collective::SendRecv => Some(1.0),
            Collective::Barrier | Collective::Unknown => None,
        }
    }
}

/// Whether a process group (`name`, or `name (description)`) is PyTorch's
/// default group, the whole world of the job; a collective without group
/// args belongs to it too.
pub fn is_default_group(process_group: Option<&str>) -> bool {
    process_group.is_none_or(|g| g == "0" || g.starts_with("0 ") || g.contains("default"))
}

/// The group size of a collective instance without `Group size` args
/// (older PyTorch): the whole `world` for the default group, else the
/// number of ranks of the job it was matched on (`None` when seen once).
pub fn inferred_group_size(process_group: Option<&str>, world: i64, matched_ranks: usize) -> Option<i64> {
    if is_default_group(process_group) && world > 1 {
        Some(world)
    } else if matched_ranks >= 2 {
        Some(matched_ranks as i64)
    } else {
        None
    }
}

/// Ranks listed in a `Process Group Ranks` string such as `"[0, 1, 2]"`.
pub fn parse_ranks(s: &str) -> Vec<i64> {
    s.trim_matches(|c| c == '[' || c == ']').split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

/// What an NCCL/RCCL kernel name says: `ncclKernel_AllReduce_RING_LL_Sum_float(...)`,
/// `ncclDevKernel_AllGather_RING_LL`, `ncclDevKernel_AllReduce_Sum_bf16_RING_LL` (NCCL 2.19's
/// order: the reduction and type before the algorithm), `ncclDevKernel_Generic`. Every part is
/// optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NcclKernelName {
    /// The operation, when named.
    pub collective: Option<Collective>,
    /// Algorithm: `RING`, `TREE`, `NVLS`, `COLLNET_DIRECT`, `PAT`, …
    pub algo: Option<String>,
    /// Protocol: `LL`, `LL128`, `SIMPLE`.
    pub proto: Option<String>,
}

impl NcclKernelName {
    /// Parses a kernel name; `None` when it is not an NCCL/RCCL kernel name.
    pub fn parse(name: &str) -> Option<NcclKernelName> {
        let base = name.split('(').next().unwrap_or(name);
        let rest = base.strip_prefix("ncclDevKernel_").or_else(|| base.strip_prefix("ncclKernel_"))?;
        let mut parts = rest.split('_');
        let op = parts.next().unwrap_or_default();
        let mut parsed = NcclKernelName { collective: Collective::from_name(op), ..Default::default() };
        let rest: Vec<&str> = parts.collect();
        // The algorithm right after the operation, or after its reduction and type (it had been
        // looked for first only, and NCCL 2.19's names gave a profile's links no algorithm).
        let mut i = 0;
        if let Some(at) = rest.iter().position(|p| matches!(*p, "RING" | "TREE" | "NVLS" | "NVLSTREE" | "COLLNET" | "PAT")) {
            let mut algo = rest[at].to_string();
            i = at + 1;
            while let Some(next) = rest.get(i) {
                if matches!(*next, "DIRECT" | "CHAIN") {
                    algo.push('_');
                    algo.push_str(next);
                    i += 1;
                } else {
                    break;
                }
            }
            parsed.algo = Some(algo);
        }
        if let Some(p) = rest.get(i).filter(|p| matches!(**p, "LL" | "LL128" | "SIMPLE")) {
            parsed.proto = Some((*p).to_string());
        }
        Some(parsed)
    }
}

/// Size in bytes of a profiler dtype name (`Float`, `BFloat16`, `c10::Half`, `long int`, …).
pub fn dtype_size(dtype: &str) -> Option<u64> {
    let d = dtype.trim().trim_start_matches("c10::");
    // Lower case on the stack: this runs for every typed input of every op.
    let mut buf = [0u8; 24];
    let owned;
    let d = match buf.get_mut(..d.len()) {
        Some(b) => {
            b.copy_from_slice(d.as_bytes());
            b.make_ascii_lowercase();
            std::str::from_utf8(b).unwrap_or_default()
        }
        None => {
            owned = d.to_ascii_lowercase();
            owned.as_str()
        }
    };
    let size = match d {
        "float" | "float32" | "int" | "int32" | "uint32" | "complexhalf" | "unsigned int" => 4,
        "double" | "float64" | "long" | "int64" | "uint64" | "long int" | "complexfloat" | "long long" => 8,
        "half" | "float16" | "bfloat16" | "short" | "int16" | "uint16" => 2,
        "byte" | "char" | "bool" | "int8" | "uint8" | "signed char" | "unsigned char" => 1,
        "complexdouble" => 16,
        _ if d.starts_with("float8") => 1,
        _ => return None,
    };
    Some(size)
}

/// Collective arguments carried by an NCCL kernel (May 2024 and later) or by a
/// `record_param_comms` CPU op.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CollectiveArgs {
    /// `Collective name` as written.
    pub collective_name: Option<String>,
    /// `In msg nelems` (elements, not bytes).
    pub in_nelems: Option<i64>,
    /// `Out msg nelems`.
    pub out_nelems: Option<i64>,
    /// `dtype` (`Float`, `BFloat16`, …).
    pub dtype: Option<String>,
    /// `Group size`.
    pub group_size: Option<i64>,
    /// `Process Group Name`.
    pub pg_name: Option<String>,
    /// `Process Group Description`.
    pub pg_desc: Option<String>,
    /// `Process Group Ranks` as written (a string such as `"[0, 1]"`).
    pub pg_ranks: Option<String>,
}

impl CollectiveArgs {
    /// The operation these arguments name.
    pub fn collective(&self) -> Option<Collective> {
        self.collective_name.as_deref().and_then(Collective::from_name)
    }

    /// Whether these arguments describe bookkeeping (`wait`) rather than traffic.
    pub fn is_bookkeeping(&self) -> bool {
        self.collective_name.as_deref().is_some_and(|n| n.eq_ignore_ascii_case("wait"))
    }

    /// Message size in bytes as nccl-tests counts it: the larger of the input
    /// and output (the gathered size for all-gather, the full input for
    /// reduce-scatter).
    pub fn message_bytes(&self) -> Option<u64> {
        let elem = dtype_size(self.dtype.as_deref()?)?;
        let n = self.in_nelems.unwrap_or(0).max(self.out_nelems.unwrap_or(0));
        if n <= 0 { None } else { (n as u64).checked_mul(elem) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_collective_names_match_exactly() {
        for (name, c) in [
            ("all_reduce", Collective::AllReduce),
            ("AllReduce", Collective::AllReduce),
            ("all-gather", Collective::AllGather),
            ("reduce_scatter", Collective::ReduceScatter),
            ("alltoall", Collective::AllToAll),
            ("send_recv", Collective::SendRecv),
            ("reduce", Collective::Reduce),
        ] {
            assert_eq!(Collective::from_user_name(name), Some(c), "{name}");
        }
        // A trace's names match loosely; a user's typo or a compound name does not.
        for name in ["allreduceX", "xall_reduce", "all_reduce_scatter", "allreduce_coalesced", "reduce_scatterX", "wait", ""] {
            assert_eq!(Collective::from_user_name(name), None, "{name}");
        }
        assert_eq!(Collective::from_name("allreduce_coalesced"), Some(Collective::AllReduce));
    }

    #[test]
    fn kernel_names_of_every_era() {
        let k = NcclKernelName::parse("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)").unwrap();
        assert_eq!(k.collective, Some(Collective::AllReduce));
        assert_eq!(k.algo.as_deref(), Some("RING"));
        assert_eq!(k.proto.as_deref(), Some("LL"));
        let k = NcclKernelName::parse("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)").unwrap();
        assert_eq!(k.collective, Some(Collective::AllGather));
        let k = NcclKernelName::parse("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t").unwrap();
        assert_eq!(k.collective, Some(Collective::SendRecv));
        assert_eq!(k.proto.as_deref(), Some("SIMPLE"));
        // NCCL 2.19's order: reduction and type first.
        let k = NcclKernelName::parse("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)").unwrap();
        assert_eq!((k.collective, k.algo.as_deref(), k.proto.as_deref()), (Some(Collective::AllReduce), Some("RING"), Some("LL")));
        let k = NcclKernelName::parse("ncclDevKernel_ReduceScatter_Sum_f32_RING_SIMPLE").unwrap();
        assert_eq!((k.algo.as_deref(), k.proto.as_deref()), (Some("RING"), Some("SIMPLE")));
        let k = NcclKernelName::parse("ncclDevKernel_Generic").unwrap();
        assert_eq!(k.collective, Some(Collective::Unknown));
        assert!(NcclKernelName::parse("ampere_sgemm_128x64_tn").is_none());
    }

    #[test]
    fn c10d_names_normalise() {
        assert_eq!(Collective::from_name("allreduce"), Some(Collective::AllReduce));
        assert_eq!(Collective::from_name("_allgather_base"), Some(Collective::AllGather));
        assert_eq!(Collective::from_name("_reduce_scatter_base"), Some(Collective::ReduceScatter));
        assert_eq!(Collective::from_name("alltoall_base"), Some(Collective::AllToAll));
        assert_eq!(Collective::from_name("recv"), Some(Collective::SendRecv));
        assert_eq!(Collective::from_name("reduce"), Some(Collective::Reduce));
        assert_eq!(Collective::from_name("wait"), None);
    }

    #[test]
    fn message_bytes_and_bus_factors() {
        let args = CollectiveArgs {
            collective_name: Some("allreduce".into()),
            in_nelems: Some(6_637_568),
            out_nelems: Some(6_637_568),
            dtype: Some("Float".into()),
            ..Default::default()
        };
        assert_eq!(args.message_bytes(), Some(26_550_272));
        assert_eq!(Collective::AllReduce.bus_factor(2), Some(1.0));
        assert_eq!(Collective::AllGather.bus_factor(8), Some(0.875));
        assert_eq!(dtype_size("c10::BFloat16"), Some(2));
    }
}
