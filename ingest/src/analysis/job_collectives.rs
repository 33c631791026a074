//! The one cross-rank matching of a job's collectives (DESIGN §1): which
//! kernels of different ranks are the same collective instance (operation,
//! process group and sequence number in the group), and what that tells —
//! its transfer time (the shortest duration over its ranks), the clock
//! offsets that make instances end together, who arrived last and made the
//! others wait. The analysis, calibration, replay and report all read it.

use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap as HashMap;

use super::breakdown::Window;
use super::collectives::{self, ClockAlignment, CollectiveSample, CollectiveStats, Instance, InstanceKey, RankCollectives, Straggler};
use super::facts::{Fact, count};
use crate::collective::Collective;

/// What the ranks of a job say about one collective instance.
#[derive(Debug, Clone, Copy)]
struct Matched {
    /// Ranks it was found on.
    ranks: u32,
    /// Its shortest duration over them, ns.
    transfer_ns: i64,
}

/// An instance's identity with its group strings numbered job-wide.
type CheapKey = (Collective, Option<u32>, Option<u32>, Option<u64>, u32);

/// A job's collectives matched across its ranks, once. Built from every
/// rank's [`RankCollectives`] (any order; held in rank order); the clock
/// alignment and the link samples are worked out on first use.
#[derive(Debug)]
pub struct JobCollectives {
    /// Global rank of each rank index, ascending.
    ranks: Vec<u32>,
    world: u32,
    per_rank: Vec<Vec<Instance>>,
    /// Per rank index and instance: its instance id (index into `matched`).
    id_of: Vec<Vec<u32>>,
    /// Per instance id, ids in order of first appearance (rank, then time).
    matched: Vec<Matched>,
    /// Members of each instance id, (rank index, instance index) in rank
    /// order: `members[member_start[id]..member_start[id + 1]]`.
    member_start: Vec<u32>,
    members: Vec<(u32, u32)>,
    /// Instance ids in the order of their keys (operation, group, ranks, sequence number).
    by_key: Vec<u32>,
    /// Instance ids in the iteration order of a hash map of their keys
    /// filled in order of first appearance: the order stragglers' waits are
    /// summed in (kept so their µs are the same to the last digit).
    hash_order: Vec<u32>,
    alignment: OnceLock<Option<ClockAlignment>>,
    samples: OnceLock<Vec<CollectiveSample>>,
    /// Per rank index, its analysed window once the job's reduce set them
    /// (`None`: not set, or no GPU activity): what the per-instance tables count.
    windows: Vec<Option<Window>>,
}

impl JobCollectives {
    /// Matches the collectives of a job's ranks; `unread` ranks of the job could not be read
    /// (the world size counts them: [`crate::job::world_size`]).
    pub fn new(ranks: impl IntoIterator<Item = RankCollectives>, unread: u32) -> JobCollectives {
        count(Fact::Matching);
        let mut ranks: Vec<RankCollectives> = ranks.into_iter().collect();
        ranks.sort_by_key(|r| r.rank());
        let world = crate::job::world_size(
            ranks.iter().filter_map(|r| r.declared_world()).max(),
            u32::try_from(ranks.len()).unwrap_or(u32::MAX).saturating_add(unread),
            ranks.iter().map(|r| r.rank()).max(),
        );
        // Group strings numbered job-wide, each distinct string (not each kernel) hashed once per rank.
        let mut string_id: HashMap<Arc<str>, u32> = HashMap::default();
        let mut id_of_key: HashMap<CheapKey, u32> = HashMap::default();
        let mut matched: Vec<Matched> = Vec::new();
        let mut first: Vec<(u32, u32)> = Vec::new();
        let mut id_of: Vec<Vec<u32>> = Vec::with_capacity(ranks.len());
        for (r, rank) in ranks.iter().enumerate() {
            let mut by_pointer: HashMap<*const u8, u32> = HashMap::default();
            let mut number = |s: &Option<Arc<str>>| -> Option<u32> {
                let s = s.as_ref()?;
                let p = Arc::as_ptr(s) as *const u8;
                if let Some(&id) = by_pointer.get(&p) {
                    return Some(id);
                }
                let next = string_id.len() as u32;
                let id = *string_id.entry(s.clone()).or_insert(next);
                by_pointer.insert(p, id);
                Some(id)
            };
            let ids = rank
                .rows()
                .iter()
                .enumerate()
                .map(|(i, inst)| {
                    let key = (inst.collective, number(&inst.process_group), number(&inst.pg_ranks), inst.matching_bytes(), inst.seq);
                    let next = matched.len() as u32;
                    let id = *id_of_key.entry(key).or_insert(next);
                    if id == next {
                        matched.push(Matched { ranks: 0, transfer_ns: i64::MAX });
                        first.push((r as u32, i as u32));
                    }
                    if let Some(m) = matched.get_mut(id as usize) {
                        m.ranks += 1;
                        m.transfer_ns = m.transfer_ns.min(inst.end_ns - inst.start_ns);
                    }
                    id
                })
                .collect();
            id_of.push(ids);
        }
        drop(id_of_key);
        drop(string_id);
        let rank_ids: Vec<u32> = ranks.iter().map(RankCollectives::rank).collect();
        let per_rank: Vec<Vec<Instance>> = ranks.into_iter().map(RankCollectives::into_rows).collect();
        // Members of each id, by counting sort (rank order kept).
        let mut member_start = vec![0u32; matched.len() + 1];
        for ids in &id_of {
            for &id in ids {
                if let Some(c) = member_start.get_mut(id as usize + 1) {
                    *c += 1;
                }
            }
        }
        for k in 1..member_start.len() {
            member_start[k] += member_start[k - 1];
        }
        let mut fill = member_start.clone();
        let mut members = vec![(0u32, 0u32); member_start.last().copied().unwrap_or(0) as usize];
        for (r, ids) in id_of.iter().enumerate() {
            for (i, &id) in ids.iter().enumerate() {
                if let Some(at) = fill.get_mut(id as usize) {
                    if let Some(m) = members.get_mut(*at as usize) {
                        *m = (r as u32, i as u32);
                    }
                    *at += 1;
                }
            }
        }
        // The full keys of the distinct instances (group strings by content).
        let key_of =
            |&(r, i): &(u32, u32)| -> Option<InstanceKey> { per_rank.get(r as usize).and_then(|l| l.get(i as usize)).map(Instance::key) };
        let keys: Vec<Option<InstanceKey>> = first.iter().map(key_of).collect();
        let mut by_key: Vec<u32> = (0..matched.len() as u32).collect();
        by_key.sort_by(|&a, &b| keys[a as usize].cmp(&keys[b as usize]));
        let mut in_hash: HashMap<InstanceKey, u32> = HashMap::default();
        for (id, k) in keys.into_iter().enumerate() {
            if let Some(k) = k {
                in_hash.insert(k, id as u32);
            }
        }
        let hash_order = in_hash.into_values().collect();
        JobCollectives {
            ranks: rank_ids,
            world,
            per_rank,
            id_of,
            matched,
            member_start,
            members,
            by_key,
            hash_order,
            alignment: OnceLock::new(),
            samples: OnceLock::new(),
            windows: Vec::new(),
        }
    }

    /// The job's world size.
    pub fn world(&self) -> u32 {
        self.world
    }

    /// Global ranks, ascending (the rank index of the other methods is a position here).
    pub fn ranks(&self) -> &[u32] {
        &self.ranks
    }

    fn members(&self, id: u32) -> &[(u32, u32)] {
        let (a, b) = (self.member_start.get(id as usize), self.member_start.get(id as usize + 1));
        match (a, b) {
            (Some(&a), Some(&b)) => self.members.get(a as usize..b as usize).unwrap_or_default(),
            _ => &[],
        }
    }

    fn instance(&self, r: u32, i: u32) -> Option<&Instance> {
        self.per_rank.get(r as usize)?.get(i as usize)
    }

    /// (transfer ns, ranks) of instance `i` of rank index `r` when at least two ranks have it.
    fn matched_of(&self, r: usize, i: usize) -> Option<(i64, usize)> {
        let id = *self.id_of.get(r)?.get(i)?;
        let m = self.matched.get(id as usize)?;
        (m.ranks >= 2).then_some((m.transfer_ns, m.ranks as usize))
    }

    /// Clock offsets that make matched collectives end together (least squares); `None` without any.
    pub fn alignment(&self) -> Option<&ClockAlignment> {
        self.alignment
            .get_or_init(|| {
                // (k, rank index, end) for every member of every matched instance, k in key order.
                let mut ends = Vec::new();
                let matched = self.by_key.iter().filter(|&&id| self.matched.get(id as usize).is_some_and(|m| m.ranks >= 2));
                for (k, &id) in matched.enumerate() {
                    for &(r, i) in self.members(id) {
                        if let Some(inst) = self.instance(r, i) {
                            ends.push((k, r as usize, inst.end_ns));
                        }
                    }
                }
                collectives::align_clocks(&ends, self.per_rank.len())
            })
            .as_ref()
    }

    /// The clock alignment where the matched collectives bear it out ([`JobCollectives::doubtful`]
    /// says nothing): what ties the ranks into one run.
    pub fn trusted_alignment(&self) -> Option<&ClockAlignment> {
        self.alignment().filter(|_| self.doubtful().is_none())
    }

    /// Why the matching may pair unrelated kernels, in words, or `None`: the
    /// instances matched across ranks do not end together even after the clock
    /// alignment — its residual exceeds their median transfer — as when the ranks'
    /// traces begin at different collectives (sampled or filtered traces).
    pub fn doubtful(&self) -> Option<String> {
        let a = self.alignment()?;
        let mut transfers: Vec<i64> = self.matched.iter().filter(|m| m.ranks >= 2).map(|m| m.transfer_ns).collect();
        transfers.sort_unstable();
        let median_us = *transfers.get(transfers.len() / 2)? as f64 / 1000.0;
        (a.residual_us > median_us.max(1.0)).then(|| {
            format!(
                "the {} collectives matched across ranks do not end together (clock residual {:.1} ms RMS against a median transfer of {:.3} ms): the ranks' traces may begin at different collectives, so the clock offsets, waits and stragglers may pair unrelated kernels",
                a.instances,
                a.residual_us / 1000.0,
                median_us / 1000.0
            )
        })
    }

    /// Per rank: how often it arrived last at a collective matched across
    /// ranks and the waiting it caused the others, most first. The last to
    /// arrive spends the least time in the collective's kernel (the
    /// instance's transfer); each other member waited its kernel's time
    /// beyond that, the wait of the collectives table: one definition, which
    /// needs no clock alignment and never exceeds a rank's kernel time.
    ///
    /// A member's wait counts where its kernel starts inside its rank's
    /// analysed window ([`JobCollectives::set_windows`]), the collectives
    /// table's inclusion rule, so the two agree under `--steps` and
    /// `--drop-last-step` too.
    pub fn stragglers(&self) -> Vec<Straggler> {
        let mut out: Vec<Straggler> =
            self.ranks.iter().map(|&rank| Straggler { rank, times_last: 0, wait_caused_us: 0.0, wait_caused_gpu_hours: None }).collect();
        let inside = |r: usize, inst: &Instance| self.inside_window(r, inst.start_ns);
        for &id in &self.hash_order {
            let Some(m) = self.matched.get(id as usize).filter(|m| m.ranks >= 2) else { continue };
            // (rank index, kernel time, inside its window)
            let durations: Vec<(usize, i64, bool)> = self
                .members(id)
                .iter()
                .filter_map(|&(r, i)| self.instance(r, i).map(|inst| (r as usize, inst.end_ns - inst.start_ns, inside(r as usize, inst))))
                .collect();
            let Some(&(last, _, _)) = durations.iter().min_by_key(|(r, d, _)| (*d, *r)) else { continue };
            let waited: i64 =
                durations.iter().filter(|(r, _, counted)| *r != last && *counted).map(|(_, d, _)| (d - m.transfer_ns).max(0)).sum();
            // Arriving together is no straggling.
            if waited <= 0 {
                continue;
            }
            if let Some(s) = out.get_mut(last) {
                s.times_last += 1;
                super::breakdown::add_measured_us(&mut s.wait_caused_us, waited as f64 / 1000.0);
            }
        }
        out.retain(|s| s.times_last > 0);
        out.sort_by(|a, b| b.wait_caused_us.total_cmp(&a.wait_caused_us).then(a.rank.cmp(&b.rank)));
        out
    }

    /// Collectives of rank index `r` inside window `w` by type, process group
    /// and size, with their transfer and wait where matched.
    pub fn stats(&self, r: usize, w: Window) -> Vec<CollectiveStats> {
        let Some(list) = self.per_rank.get(r) else { return Vec::new() };
        collectives::collective_stats(list, w, |i| self.matched_of(r, i), i64::from(self.world))
    }

    /// Every communication kernel of every rank (rank order, then time) with
    /// what the other ranks tell about it: the material of link calibration,
    /// of the replay's re-costing and of the report's tables.
    pub fn samples(&self) -> &[CollectiveSample] {
        self.samples.get_or_init(|| {
            let mut out = Vec::with_capacity(self.members.len());
            for r in 0..self.per_rank.len() {
                out.extend(self.samples_of_index(r));
            }
            out
        })
    }

    /// Each rank's analysed window, in rank order (the summaries' windows),
    /// which [`JobCollectives::stragglers`] and
    /// [`JobCollectives::samples_in_windows`] count within.
    pub fn set_windows(&mut self, windows: Vec<Option<Window>>) {
        self.windows = windows;
    }

    /// Whether a kernel of rank index `r` starting at `start_ns` starts inside that rank's window.
    fn inside_window(&self, r: usize, start_ns: i64) -> bool {
        self.windows.get(r).copied().flatten().is_some_and(|w| w.starts_inside(start_ns))
    }

    /// The [`JobCollectives::samples`] whose kernels start inside their
    /// rank's analysed window, made afresh (not kept): the report's tables
    /// and charts per message size count what the collectives table counts.
    pub fn samples_in_windows(&self) -> Vec<CollectiveSample> {
        (0..self.per_rank.len())
            .flat_map(|r| self.samples_of_index(r).into_iter().filter(move |s| self.inside_window(r, s.start_ns)))
            .collect()
    }

    /// The [`JobCollectives::samples`] of global rank `rank`, made afresh
    /// (not kept): for a caller that needs them one rank at a time.
    pub fn rank_samples(&self, rank: u32) -> Vec<CollectiveSample> {
        match self.ranks.binary_search(&rank) {
            Ok(r) => self.samples_of_index(r),
            Err(_) => Vec::new(),
        }
    }

    fn samples_of_index(&self, r: usize) -> Vec<CollectiveSample> {
        let world = i64::from(self.world);
        let rank = self.ranks.get(r).copied().unwrap_or(0);
        let Some(list) = self.per_rank.get(r) else { return Vec::new() };
        list.iter()
            .enumerate()
            .map(|(i, inst)| {
                let id = self.id_of.get(r).and_then(|l| l.get(i)).copied().unwrap_or(0);
                let m = self.matched.get(id as usize).copied().unwrap_or(Matched { ranks: 1, transfer_ns: 0 });
                collectives::sample(rank, inst.clone(), m.ranks as usize, m.transfer_ns, id, world)
            })
            .collect()
    }

    /// [`JobCollectives::samples`], taken.
    pub fn into_samples(mut self) -> Vec<CollectiveSample> {
        let _ = self.samples();
        self.samples.take().unwrap_or_default()
    }

    /// What [`JobCollectives::joins`] yields, counted: the instances found on
    /// at least two ranks and their kernels.
    pub fn joined_counts(&self) -> (usize, usize) {
        self.matched.iter().filter(|m| m.ranks >= 2).fold((0, 0), |(n, k), m| (n + 1, k + m.ranks as usize))
    }

    /// Every kernel of an instance found on at least two ranks: (rank index,
    /// its row in the rank's trace, instance id, transfer ns), by rank then time.
    pub fn joins(&self) -> impl Iterator<Item = (usize, u32, u32, i64)> + '_ {
        self.per_rank.iter().enumerate().flat_map(move |(r, list)| {
            list.iter().enumerate().filter_map(move |(i, inst)| {
                let id = *self.id_of.get(r)?.get(i)?;
                let m = self.matched.get(id as usize)?;
                (m.ranks >= 2).then_some((r, inst.row, id, m.transfer_ns))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rank's all-reduces of these sizes (MB), one every millisecond, seq numbered as the reader does.
    fn rank(rank: u32, sizes_mb: &[u64]) -> RankCollectives {
        let pg: Option<Arc<str>> = Some(Arc::from("0"));
        let mut seen: HashMap<u64, u32> = HashMap::default();
        let instances = sizes_mb
            .iter()
            .enumerate()
            .map(|(k, &mb)| {
                let seq = seen.entry(mb).or_insert(0);
                *seq += 1;
                Instance {
                    collective: Collective::AllReduce,
                    process_group: pg.clone(),
                    pg_ranks: None,
                    group_size: Some(2),
                    bytes: Some(mb << 20),
                    start_ns: k as i64 * 1_000_000,
                    end_ns: k as i64 * 1_000_000 + 1000,
                    seq: *seq - 1,
                    algo: None,
                    proto: None,
                    row: k as u32,
                }
            })
            .collect();
        RankCollectives::new(rank, Some(2), instances)
    }

    #[test]
    fn an_all_reduce_is_never_matched_with_one_of_another_size() {
        // Rank 1's trace lacks the 107 MB all-reduce (a filtered trace): matching by position
        // in the group paired rank 0's 107 MB with rank 1's 105 MB and its 105 MB with nothing.
        let job = JobCollectives::new([rank(0, &[78, 107, 105, 22]), rank(1, &[78, 105, 22])], 0);
        let samples = job.samples();
        let mut by_instance: HashMap<u32, Vec<Option<u64>>> = HashMap::default();
        for s in samples.iter().filter(|s| s.matched_ranks >= 2) {
            by_instance.entry(s.instance.unwrap()).or_default().push(s.bytes);
        }
        assert_eq!(by_instance.len(), 3, "{by_instance:?}");
        assert!(by_instance.values().all(|b| b.len() == 2 && b[0] == b[1]), "{by_instance:?}");
        let unmatched: Vec<_> = samples.iter().filter(|s| s.matched_ranks < 2).map(|s| (s.rank, s.bytes)).collect();
        assert_eq!(unmatched, [(0, Some(107 << 20))]);
    }

    /// A rank's trace that begins one all-reduce later pairs each of its all-reduces with the
    /// one before on the other rank: they end milliseconds apart, where each lasts 1 µs.
    #[test]
    fn a_matching_whose_instances_do_not_end_together_is_doubted() {
        let aligned = JobCollectives::new([rank(0, &[8; 6]), rank(1, &[8; 6])], 0);
        assert_eq!(aligned.doubtful(), None);
        // Rank 0's all-reduces at k² ms; rank 1's k-th is rank 0's (k+1)-th (a constant
        // shift would be indistinguishable from a clock offset; a training step's are not regular).
        let at = |k: usize, rows: Vec<Instance>| -> Vec<Instance> {
            rows.into_iter()
                .enumerate()
                .map(|(i, mut inst)| {
                    let t = ((i + k) * (i + k)) as i64 * 1_000_000;
                    (inst.start_ns, inst.end_ns) = (t, t + 1000);
                    inst
                })
                .collect()
        };
        let first = RankCollectives::new(0, Some(2), at(0, rank(0, &[8; 6]).into_rows()));
        let late = RankCollectives::new(1, Some(2), at(1, rank(1, &[8; 5]).into_rows()));
        let shifted = JobCollectives::new([first, late], 0);
        let why = shifted.doubtful().expect("doubted");
        assert!(why.starts_with("the 5 collectives matched across ranks do not end together"), "{why}");
    }
}
