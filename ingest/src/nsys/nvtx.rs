//! NVTX range texts: what PyTorch's `emit_nvtx` writes, and NCCL's own ranges.
//!
//! `torch.autograd.profiler.emit_nvtx` (what `nsys profile --pytorch=autograd-nvtx`
//! and `…=autograd-shapes-nvtx` turn on) names each operator's range
//! `aten::mm, seq = 12, op_id = 34, sizes = [[64, 32], [32, 128]], input_op_ids = [(30,0)]`:
//! the operator, its autograd sequence number when it has one, a unique id,
//! the input shapes when shapes are recorded, and the ops its inputs came from.

use crate::collective::Collective;
use crate::event::EventKind;

/// What an NVTX range text says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Range<'a> {
    /// `CpuOp` for an `emit_nvtx` operator (a name with `::`), else `UserAnnotation`.
    pub(crate) kind: EventKind,
    /// The operator name (`aten::mm`), or the whole text of any other range.
    pub(crate) name: &'a str,
    /// `op_id`, when `emit_nvtx` wrote one.
    pub(crate) op_id: Option<i64>,
    /// `sizes`, as written (`[[64, 32], [32, 128]]`), when recorded.
    pub(crate) sizes: Option<&'a str>,
}

/// Reads a range text. A text is an `emit_nvtx` range when one of its
/// `, key = value` fields is `op_id`; its name is the part before the first
/// field. Among those, names with `::` (`aten::mm`,
/// `autograd::engine::evaluate_function: MmBackward0`) are CPU ops as Kineto
/// records them; `ProfilerStep#N` and other `record_function` labels are
/// user annotations, as in Kineto.
pub(crate) fn parse(text: &str) -> Range<'_> {
    let annotation = Range { kind: EventKind::UserAnnotation, name: text, op_id: None, sizes: None };
    // The name ends where the first known field starts.
    let Some(at) = FIELDS.iter().filter_map(|f| text.find(f)).min() else { return annotation };
    let (name, mut rest) = text.split_at(at);
    let mut op_id = None;
    let mut sizes = None;
    while let Some(field) = rest.strip_prefix(", ") {
        let Some((key, value)) = field.split_once(" = ") else { break };
        // A value runs to the next field: brackets are balanced inside it.
        let end = value_end(value);
        let (v, tail) = value.split_at(end);
        match key {
            "op_id" => op_id = v.trim().parse::<i64>().ok(),
            "sizes" => sizes = Some(v.trim()),
            _ => {}
        }
        rest = tail;
    }
    if op_id.is_none() {
        return annotation;
    }
    let kind = if name.contains("::") && !name.starts_with("ProfilerStep#") { EventKind::CpuOp } else { EventKind::UserAnnotation };
    Range { kind, name, op_id, sizes }
}

/// The fields `emit_nvtx` appends to an operator name.
const FIELDS: [&str; 4] = [", seq = ", ", op_id = ", ", sizes = ", ", input_op_ids = "];

/// Length of a field value: up to the next `, ` outside brackets and parentheses.
fn value_end(value: &str) -> usize {
    let mut depth = 0i32;
    let bytes = value.as_bytes();
    for (i, &c) in bytes.iter().enumerate() {
        match c {
            b'[' | b'(' => depth += 1,
            b']' | b')' => depth -= 1,
            b',' if depth <= 0 && bytes.get(i + 1) == Some(&b' ') => return i,
            _ => {}
        }
    }
    value.len()
}

/// The collective an NCCL API range names (`ncclAllReduce`, `ncclSend`,
/// `ncclRecv`, `ncclBcast`, …); `None` for bookkeeping ranges
/// (`ncclGroupStart`, `ncclCommCount`, `ncclCommInitRank`, …) and other texts.
pub(crate) fn nccl_collective(text: &str) -> Option<Collective> {
    let op = text.strip_prefix("nccl")?;
    // NCCL's API names go on in capitals (`ncclAllReduce`); `nccl:all_to_all` is PyTorch's
    // range around the calls ([`torch_collective`]).
    if !op.starts_with(|c: char| c.is_ascii_uppercase())
        || op.starts_with("Comm")
        || op.starts_with("Group")
        || op.starts_with("Mem")
        || op.starts_with("Get")
    {
        return None;
    }
    Collective::from_name(op).filter(|c| !matches!(c, Collective::Unknown | Collective::Barrier))
}

/// The collective a PyTorch range names: `record_function`'s `nccl:all_to_all` and the
/// `c10d::alltoall_base_` operator (`emit_nvtx`'s name, its fields parsed off). PyTorch runs
/// an all-to-all as NCCL sends and receives in one group: only these ranges say what it was.
pub(crate) fn torch_collective(name: &str) -> Option<Collective> {
    if !Collective::is_torch_op(name) {
        return None;
    }
    Collective::from_name(name).filter(|c| !matches!(c, Collective::Unknown | Collective::Barrier))
}

/// Whether the text is NCCL's `ncclGroupStart` / `ncclGroupEnd`.
pub(crate) fn group_edge(text: &str) -> Option<bool> {
    match text {
        "ncclGroupStart" => Some(true),
        "ncclGroupEnd" => Some(false),
        _ => None,
    }
}

/// The one collective of an NCCL group: every operation in it the same
/// (sends and receives make a `send_recv`); `None` when they differ or none is named.
pub(crate) fn group_collective(ops: impl IntoIterator<Item = Collective>) -> Option<Collective> {
    let mut one: Option<Collective> = None;
    for c in ops {
        match one {
            None => one = Some(c),
            Some(o) if o == c => {}
            Some(_) => return None,
        }
    }
    one
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_nvtx_ranges_are_ops_with_shapes() {
        let r = parse("aten::mm, seq = 12, op_id = 34, sizes = [[64, 32], [32, 128]], input_op_ids = [(30,0), (31,0)]");
        assert_eq!(r, Range { kind: EventKind::CpuOp, name: "aten::mm", op_id: Some(34), sizes: Some("[[64, 32], [32, 128]]") });
        let r = parse("aten::addmm, seq = 45339, op_id = 990761");
        assert_eq!((r.kind, r.name, r.op_id, r.sizes), (EventKind::CpuOp, "aten::addmm", Some(990761), None));
        let r = parse("aten::as_strided, op_id = 314299");
        assert_eq!((r.kind, r.name, r.op_id), (EventKind::CpuOp, "aten::as_strided", Some(314299)));
        let r = parse("aten::cat, op_id = 7, sizes = [[], [2, 3]]");
        assert_eq!(r.sizes, Some("[[], [2, 3]]"));
        let r = parse("autograd::engine::evaluate_function: MmBackward0, op_id = 9");
        assert_eq!((r.kind, r.name), (EventKind::CpuOp, "autograd::engine::evaluate_function: MmBackward0"));
        let r = parse("ProfilerStep#3, op_id = 2");
        assert_eq!((r.kind, r.name), (EventKind::UserAnnotation, "ProfilerStep#3"));
        let r = parse("## forward ##, op_id = 2");
        assert_eq!((r.kind, r.name), (EventKind::UserAnnotation, "## forward ##"));
    }

    #[test]
    fn other_ranges_are_annotations_named_by_their_text() {
        for text in ["ncclAllReduce", "forward", "layer 3, block 2", "", "x, op_id = abc"] {
            let r = parse(text);
            assert_eq!((r.kind, r.name, r.op_id), (EventKind::UserAnnotation, text, None), "{text}");
        }
    }

    #[test]
    fn nccl_ranges_name_their_collective() {
        assert_eq!(nccl_collective("ncclAllReduce"), Some(Collective::AllReduce));
        assert_eq!(nccl_collective("ncclReduceScatter"), Some(Collective::ReduceScatter));
        assert_eq!(nccl_collective("ncclAllGather"), Some(Collective::AllGather));
        assert_eq!(nccl_collective("ncclBcast"), Some(Collective::Broadcast));
        assert_eq!(nccl_collective("ncclBroadcast"), Some(Collective::Broadcast));
        assert_eq!(nccl_collective("ncclReduce"), Some(Collective::Reduce));
        assert_eq!(nccl_collective("ncclSend"), Some(Collective::SendRecv));
        assert_eq!(nccl_collective("ncclRecv"), Some(Collective::SendRecv));
        for none in [
            "ncclGroupStart",
            "ncclGroupEnd",
            "ncclCommCount",
            "ncclCommInitRank",
            "ncclMemAlloc",
            "aten::mm",
            "nccl:all_to_all, op_id = 7",
        ] {
            assert_eq!(nccl_collective(none), None, "{none}");
        }
        assert_eq!(group_collective([Collective::SendRecv, Collective::SendRecv]), Some(Collective::SendRecv));
        assert_eq!(group_collective([Collective::AllReduce, Collective::SendRecv]), None);
        assert_eq!(group_collective([]), None);
    }

    #[test]
    fn pytorch_ranges_name_the_collective_their_nccl_calls_run() {
        assert_eq!(torch_collective("nccl:all_to_all"), Some(Collective::AllToAll));
        assert_eq!(torch_collective("c10d::alltoall_base_"), Some(Collective::AllToAll));
        assert_eq!(torch_collective("nccl:_all_gather_base"), Some(Collective::AllGather));
        assert_eq!(torch_collective("c10d::allreduce_"), Some(Collective::AllReduce));
        assert_eq!(torch_collective("nccl:send 0->1"), Some(Collective::SendRecv));
        for none in ["ncclAllReduce", "aten::all_to_all", "c10d::barrier", "forward", "nccl:unknown_thing"] {
            assert_eq!(torch_collective(none), None, "{none}");
        }
    }
}
