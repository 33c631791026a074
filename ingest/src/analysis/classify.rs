//! Which GPU activity is compute, communication or memory.

use regex::Regex;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::event::EventKind;
use crate::rank::RankTrace;

/// The class of a GPU activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivityClass {
    /// Every kernel that is not communication.
    Compute,
    /// Communication kernels (`^nccl.*Kernel`, plus user patterns).
    Comm,
    /// Memcpy and memset.
    Memory,
}

/// Classifies GPU activity. The default communication rule is exactly
/// `^nccl.*Kernel` (NCCL `ncclKernel_*`, `ncclDevKernel_*`, RCCL
/// `ncclDevKernel_Generic`) so results compare across tools; users may add
/// patterns for custom communication kernels.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    extra: Vec<Regex>,
}

impl Classifier {
    /// The default rule plus `patterns` (regular expressions matched anywhere in the kernel name).
    pub fn with_patterns(patterns: &[String]) -> Result<Classifier> {
        let extra = patterns
            .iter()
            .map(|p| Regex::new(p).map_err(|e| Error::Pattern { pattern: p.clone(), message: e.to_string() }))
            .collect::<Result<Vec<_>>>()?;
        Ok(Classifier { extra })
    }

    /// Whether a kernel of this name is communication.
    pub fn is_comm_kernel(&self, name: &str) -> bool {
        let nccl = name.strip_prefix("nccl").is_some_and(|rest| rest.contains("Kernel"));
        nccl || self.extra.iter().any(|r| r.is_match(name))
    }

    /// The class of every row that is GPU activity, `None` for the others.
    pub fn classes(&self, trace: &RankTrace) -> Vec<Option<ActivityClass>> {
        let comm_names: Vec<bool> = trace.names.iter().map(|n| self.is_comm_kernel(n)).collect();
        let ev = &trace.events;
        ev.kind
            .iter()
            .zip(&ev.name)
            .map(|(kind, &name)| match kind {
                EventKind::Kernel if comm_names.get(name as usize).copied().unwrap_or(false) => Some(ActivityClass::Comm),
                EventKind::Kernel => Some(ActivityClass::Compute),
                EventKind::Memcpy | EventKind::Memset => Some(ActivityClass::Memory),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Classifier;

    #[test]
    fn default_rule_is_nccl_kernel() {
        let c = Classifier::default();
        assert!(c.is_comm_kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"));
        assert!(c.is_comm_kernel("ncclDevKernel_Generic"));
        assert!(!c.is_comm_kernel("void at::native::elementwise_kernel"));
        assert!(!c.is_comm_kernel("xnccl_Kernel"));
        let c = Classifier::with_patterns(&["^custom_allreduce".into()]).unwrap();
        assert!(c.is_comm_kernel("custom_allreduce_kernel<8>"));
        assert!(Classifier::with_patterns(&["(".into()]).is_err());
    }
}
