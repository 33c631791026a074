//! Communication per parallelism dimension (TP, DP/FSDP, PP, EP, CP): which
//! dimension each process group serves, and per rank the communication and
//! exposed communication of each (DESIGN §3; MAD-Max's central figure).

use serde::Serialize;

use super::breakdown::{RankSets, Window};
use super::collectives::Instance;
use super::interval::IntervalSet;

/// A parallelism dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// Tensor parallelism.
    Tp,
    /// Data parallelism (DDP, FSDP/ZeRO).
    Dp,
    /// Pipeline parallelism.
    Pp,
    /// Expert parallelism.
    Ep,
    /// Context (sequence) parallelism.
    Cp,
    /// A group whose role neither its name nor its ranks say.
    Other,
}

impl Dimension {
    /// Name in outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Tp => "tp",
            Dimension::Dp => "dp",
            Dimension::Pp => "pp",
            Dimension::Ep => "ep",
            Dimension::Cp => "cp",
            Dimension::Other => "other",
        }
    }
}

/// The dimension a process group's name or description says (`tp`,
/// `tensor_parallel`, `dp_shard`, `pipeline`, `expert`, `cp`, …), as words
/// of the name (`tp_group`, `mesh_dp`, `default_pg` is the whole world).
///
/// Composite names say their dimension by their most specific word: Megatron's
/// `PIPELINE_MODEL_PARALLEL_GROUP` and `EXPERT_MODEL_PARALLEL_GROUP` are pipeline and
/// expert groups (`model` alone, its `MODEL_PARALLEL_GROUP`, is tensor parallel's),
/// `DATA_PARALLEL_GROUP_WITH_CP` and torchtitan's `dp_shard_cp` reduce gradients (data
/// parallel), and an expert group of data or tensor parallelism (`EXPERT_DATA_PARALLEL_GROUP`)
/// is that dimension's; its tied embeddings' group (`EMBEDDING_GROUP`, first and last
/// pipeline stages) is the pipeline's.
pub fn from_description(desc: &str) -> Option<Dimension> {
    let lower = desc.to_ascii_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let has = |keys: &[&str]| words.iter().any(|w| keys.iter().any(|k| w == k || w.starts_with(k) && k.len() > 3));
    let data = has(&["dp", "data", "fsdp", "ddp", "shard", "replicate", "zero"]);
    let tensor = has(&["tp", "tensor", "mp"]);
    if has(&["pp", "pipe", "pipeline", "embedding"]) {
        Some(Dimension::Pp)
    } else if has(&["ep", "expert", "moe"]) {
        Some(if data {
            Dimension::Dp
        } else if tensor {
            Dimension::Tp
        } else {
            Dimension::Ep
        })
    } else if data {
        Some(Dimension::Dp)
    } else if tensor {
        Some(Dimension::Tp)
    } else if has(&["cp", "context", "sp", "sequence"]) {
        Some(Dimension::Cp)
    } else if has(&["model"]) {
        Some(Dimension::Tp)
    } else {
        None
    }
}

/// The dimension a group's member ranks suggest: contiguous ranks inside one
/// node are tensor parallel (placed innermost), ranks a fixed stride apart are
/// data parallel; the whole world of a job is its data-parallel group.
pub fn from_ranks(ranks: &[i64], world: i64, gpus_per_node: i64) -> Option<Dimension> {
    if ranks.len() < 2 {
        return None;
    }
    if ranks.len() as i64 == world {
        return Some(Dimension::Dp);
    }
    // The ranks are the trace's numbers: a difference that overflows (ranks
    // near i64::MIN and i64::MAX) is no fixed stride.
    let step = |w: &[i64]| match w {
        [a, b] => b.checked_sub(*a),
        _ => None,
    };
    let stride = step(ranks.get(..2)?)?;
    if stride <= 0 || ranks.windows(2).any(|w| step(w) != Some(stride)) {
        return None;
    }
    let node = |r: &i64| r / gpus_per_node.max(1);
    let first = node(ranks.first()?);
    let one_node = ranks.iter().all(|r| node(r) == first);
    if stride == 1 && one_node { Some(Dimension::Tp) } else { Some(Dimension::Dp) }
}

/// Communication of one dimension on one rank, µs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DimensionComm {
    /// The dimension.
    pub dimension: Dimension,
    /// `description` (the group's name says it), `ranks` (inferred from its members),
    /// `collective` (its members said data parallel, but its operation is all-to-all or
    /// send/receive, which data parallelism never issues: `other`) or `unknown`.
    pub from: &'static str,
    /// |∪ communication of the dimension| in the window.
    pub comm_us: f64,
    /// The part of it with no compute under it.
    pub exposed_comm_us: f64,
}

// Read back from a rank summary cached in a dataset (`from` is one of three words).
impl<'de> serde::Deserialize<'de> for DimensionComm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        struct Raw {
            dimension: Dimension,
            from: String,
            comm_us: f64,
            exposed_comm_us: f64,
        }
        let r = Raw::deserialize(d)?;
        let from = ["description", "ranks", "collective"].into_iter().find(|k| *k == r.from).unwrap_or("unknown");
        Ok(DimensionComm { dimension: r.dimension, from, comm_us: r.comm_us, exposed_comm_us: r.exposed_comm_us })
    }
}

/// Per dimension, the communication of one rank's instances in window `w`.
pub(crate) fn comm_by_dimension(instances: &[Instance], sets: &RankSets, w: Window, world: i64, gpus_per_node: i64) -> Vec<DimensionComm> {
    let mut by: std::collections::BTreeMap<(Dimension, &'static str), Vec<(i64, i64)>> = Default::default();
    // A group's dimension depends on its name and ranks only: parsed once per group,
    // not per instance (a world group lists thousands of ranks on every kernel).
    // Keyed by whether the operation is one data parallelism issues too.
    type Group = (Option<std::sync::Arc<str>>, Option<std::sync::Arc<str>>, bool);
    let mut known: rustc_hash::FxHashMap<Group, (Dimension, &'static str)> = Default::default();
    for inst in instances {
        use crate::collective::Collective;
        let not_dp = matches!(inst.collective, Collective::AllToAll | Collective::SendRecv);
        let group = (inst.process_group.clone(), inst.pg_ranks.clone(), not_dp);
        if let Some(&(dim, from)) = known.get(&group) {
            by.entry((dim, from)).or_default().push((inst.start_ns.max(w.start_ns), inst.end_ns.min(w.end_ns)));
            continue;
        }
        let described = inst.process_group.as_deref().and_then(from_description);
        let (dim, from) = match described {
            Some(d) => (d, "description"),
            None => {
                let ranks = inst.pg_ranks.as_deref().map(crate::collective::parse_ranks).unwrap_or_default();
                // A group of the whole world's size that lists no ranks is the world too (its
                // kernels' `Group size`; it had been `other`).
                let default = crate::collective::is_default_group(inst.process_group.as_deref())
                    || (ranks.is_empty() && inst.group_size == Some(world));
                match from_ranks(&ranks, world, gpus_per_node) {
                    // A stride or the whole world said data parallel, but data parallelism only
                    // reduces and gathers: an unnamed group's all-to-all (DLRM's embedding
                    // exchange, a mixture of experts' dispatch) or send/receive (a pipeline's,
                    // a context ring's) is another dimension, which neither name nor ranks say.
                    Some(Dimension::Dp) if not_dp => (Dimension::Other, "collective"),
                    Some(d) => (d, "ranks"),
                    None if default && world > 1 && not_dp => (Dimension::Other, "collective"),
                    None if default && world > 1 => (Dimension::Dp, "ranks"),
                    None => (Dimension::Other, "unknown"),
                }
            }
        };
        known.insert(group, (dim, from));
        by.entry((dim, from)).or_default().push((inst.start_ns.max(w.start_ns), inst.end_ns.min(w.end_ns)));
    }
    by.into_iter()
        .map(|((dimension, from), spans)| {
            let set = IntervalSet::union(spans.into_iter().filter(|(s, e)| e > s).collect());
            let comm = set.measure(w.start_ns, w.end_ns);
            // Its communication while no GPU's communication runs without its own compute
            // (the rank's overlap, §3; in one GPU's trace, its communication under compute).
            let overlap = set.intersect(&sets.overlap).measure(w.start_ns, w.end_ns);
            DimensionComm { dimension, from, comm_us: comm as f64 / 1000.0, exposed_comm_us: (comm - overlap) as f64 / 1000.0 }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_named_or_recognised_by_their_ranks() {
        assert_eq!(from_description("tp_group"), Some(Dimension::Tp));
        assert_eq!(from_description("mesh_dp_shard"), Some(Dimension::Dp));
        assert_eq!(from_description("pipeline_parallel"), Some(Dimension::Pp));
        assert_eq!(from_description("expert_group"), Some(Dimension::Ep));
        assert_eq!(from_description("default_pg"), None);
        // Megatron-core's `group_desc`s: the specific word first (`model` had made pipeline and
        // expert groups tensor parallel, and `cp` the gradients' data-parallel group context's).
        for (desc, dim) in [
            ("TENSOR_MODEL_PARALLEL_GROUP", Dimension::Tp),
            ("PIPELINE_MODEL_PARALLEL_GROUP", Dimension::Pp),
            ("EXPERT_MODEL_PARALLEL_GROUP", Dimension::Ep),
            ("EXPERT_TENSOR_PARALLEL_GROUP", Dimension::Tp),
            ("EXPERT_DATA_PARALLEL_GROUP", Dimension::Dp),
            ("DATA_PARALLEL_GROUP", Dimension::Dp),
            ("DATA_PARALLEL_GROUP_WITH_CP", Dimension::Dp),
            ("CONTEXT_PARALLEL_GROUP", Dimension::Cp),
            ("MODEL_PARALLEL_GROUP", Dimension::Tp),
            ("EMBEDDING_GROUP", Dimension::Pp),
            // torchtitan's device-mesh names.
            ("dp_shard_cp", Dimension::Dp),
            ("cp", Dimension::Cp),
            ("tp", Dimension::Tp),
        ] {
            assert_eq!(from_description(desc), Some(dim), "{desc}");
        }
        assert_eq!(from_ranks(&[8, 9, 10, 11], 32, 8), Some(Dimension::Tp));
        assert_eq!(from_ranks(&[1, 5, 9, 13], 16, 4), Some(Dimension::Dp));
        assert_eq!(from_ranks(&[0, 1, 2, 3], 4, 8), Some(Dimension::Dp));
        assert_eq!(from_ranks(&[0, 3, 4], 16, 8), None);
    }

    /// Issue 25: the ranks of a malformed trace's process group overflowed i64
    /// when their stride was taken (a panic in debug builds).
    #[test]
    fn ranks_whose_differences_overflow_are_no_dimension() {
        assert_eq!(from_ranks(&[i64::MIN, i64::MAX], 4, 8), None);
        assert_eq!(from_ranks(&[i64::MAX, i64::MIN], 4, 8), None);
        assert_eq!(from_ranks(&[0, 1, i64::MIN], 4, 8), None);
        assert_eq!(from_ranks(&[-2, -1], 4, 8), Some(Dimension::Tp));
        // A group of such ranks in a trace: analysed, its dimension unknown.
        let json = r#"{"distributedInfo": {"rank": 0, "world_size": 4}, "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
             "args": {"stream": 7, "Collective name": "allreduce", "Process Group Name": "17", "Process Group Ranks": "[-9223372036854775808, 9223372036854775807]"}}
        ]}"#;
        let t =
            crate::kineto::parse_bytes(json.as_bytes(), std::path::Path::new("bad-ranks.json"), &crate::ReadOptions::default()).unwrap();
        let job = crate::Job::from_traces("bad-ranks".into(), vec![Ok(t)]);
        let a = crate::analysis::analyze_job(&job, &crate::analysis::AnalyzeOptions::default());
        let dims = &a.ranks[0].comm_by_dimension;
        assert_eq!(dims.iter().map(|d| d.dimension).collect::<Vec<_>>(), [Dimension::Other], "{dims:?}");
    }
}
