//! Unions of time intervals and their measure inside a window.

/// A union of half-open intervals `[start, end)` in ns: sorted, disjoint, with
/// touching intervals merged; prefix sums answer "how much of this lies in
/// window W" in O(log n).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntervalSet {
    spans: Vec<(i64, i64)>,
    /// prefix[i] = total length of spans[..i].
    prefix: Vec<i64>,
}

impl IntervalSet {
    /// The union of `intervals` (empty ones are dropped).
    pub fn union(mut intervals: Vec<(i64, i64)>) -> IntervalSet {
        intervals.retain(|(s, e)| e > s);
        intervals.sort_unstable();
        let mut spans: Vec<(i64, i64)> = Vec::with_capacity(intervals.len());
        for (s, e) in intervals {
            match spans.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => spans.push((s, e)),
            }
        }
        IntervalSet::from_disjoint(spans)
    }

    fn from_disjoint(spans: Vec<(i64, i64)>) -> IntervalSet {
        let mut prefix = Vec::with_capacity(spans.len() + 1);
        let mut total = 0;
        prefix.push(0);
        for (s, e) in &spans {
            total += e - s;
            prefix.push(total);
        }
        IntervalSet { spans, prefix }
    }

    /// The intersection of two unions.
    pub fn intersect(&self, other: &IntervalSet) -> IntervalSet {
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while let (Some(&(a0, a1)), Some(&(b0, b1))) = (self.spans.get(i), other.spans.get(j)) {
            let (s, e) = (a0.max(b0), a1.min(b1));
            if s < e {
                out.push((s, e));
            }
            if a1 < b1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        IntervalSet::from_disjoint(out)
    }

    /// What of this union `other` does not cover.
    pub fn minus(&self, other: &IntervalSet) -> IntervalSet {
        let mut out = Vec::new();
        let mut j = 0;
        for &(a0, a1) in &self.spans {
            let mut start = a0;
            // `other`'s spans that end before this one starts cannot cut it, nor any later one.
            while other.spans.get(j).is_some_and(|&(_, b1)| b1 <= a0) {
                j += 1;
            }
            let mut k = j;
            while let Some(&(b0, b1)) = other.spans.get(k).filter(|&&(b0, _)| b0 < a1) {
                if b0 > start {
                    out.push((start, b0));
                }
                start = start.max(b1);
                k += 1;
            }
            if start < a1 {
                out.push((start, a1));
            }
        }
        IntervalSet::from_disjoint(out)
    }

    /// The disjoint spans.
    pub fn spans(&self) -> &[(i64, i64)] {
        &self.spans
    }

    /// Total length, ns.
    pub fn total(&self) -> i64 {
        self.prefix.last().copied().unwrap_or(0)
    }

    /// Length of the part inside `[lo, hi)`, ns.
    pub fn measure(&self, lo: i64, hi: i64) -> i64 {
        if hi <= lo || self.spans.is_empty() {
            return 0;
        }
        // First span ending after lo, first span starting at or after hi.
        let first = self.spans.partition_point(|&(_, e)| e <= lo);
        let last = self.spans.partition_point(|&(s, _)| s < hi);
        if first >= last {
            return 0;
        }
        let mut total = self.prefix.get(last).copied().unwrap_or(0) - self.prefix.get(first).copied().unwrap_or(0);
        if let Some(&(s, _)) = self.spans.get(first) {
            total -= (lo - s).max(0);
        }
        if let Some(&(_, e)) = self.spans.get(last - 1) {
            total -= (e - hi).max(0);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::IntervalSet;

    #[test]
    fn union_merges_touching_and_overlapping() {
        let u = IntervalSet::union(vec![(5, 7), (0, 2), (2, 3), (6, 9), (4, 4)]);
        assert_eq!(u.spans(), &[(0, 3), (5, 9)]);
        assert_eq!(u.total(), 7);
    }

    #[test]
    fn minus_leaves_what_the_other_does_not_cover() {
        let a = IntervalSet::union(vec![(0, 10), (20, 30), (40, 50)]);
        let b = IntervalSet::union(vec![(-5, 2), (4, 6), (8, 22), (25, 26), (45, 60)]);
        assert_eq!(a.minus(&b).spans(), &[(2, 4), (6, 8), (22, 25), (26, 30), (40, 45)]);
        assert_eq!(a.minus(&IntervalSet::union(Vec::new())).spans(), a.spans());
        assert!(a.minus(&a).spans().is_empty());
        // Together with the intersection, the whole.
        assert_eq!(a.minus(&b).total() + a.intersect(&b).total(), a.total());
    }

    #[test]
    fn measure_clips_to_window() {
        let u = IntervalSet::union(vec![(0, 10), (20, 30), (40, 50)]);
        assert_eq!(u.measure(5, 45), 5 + 10 + 5);
        assert_eq!(u.measure(10, 20), 0);
        assert_eq!(u.measure(-100, 100), 30);
        assert_eq!(u.measure(22, 25), 3);
        assert_eq!(u.measure(50, 10), 0);
    }

    #[test]
    fn intersection() {
        let a = IntervalSet::union(vec![(0, 10), (20, 30)]);
        let b = IntervalSet::union(vec![(5, 25)]);
        assert_eq!(a.intersect(&b).spans(), &[(5, 10), (20, 25)]);
    }

    #[test]
    fn measure_matches_brute_force() {
        // Deterministic pseudo-random intervals against a per-ns count.
        let mut x: u64 = 12345;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 200) as i64
        };
        for _ in 0..50 {
            let iv: Vec<(i64, i64)> = (0..8)
                .map(|_| {
                    let s = next();
                    (s, s + next() % 30)
                })
                .collect();
            let u = IntervalSet::union(iv.clone());
            let (lo, hi) = (next(), next() + 20);
            let brute = (lo..hi).filter(|t| iv.iter().any(|(s, e)| s <= t && t < e)).count() as i64;
            assert_eq!(u.measure(lo, hi), brute.max(0));
        }
    }
}
