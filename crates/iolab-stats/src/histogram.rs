//! Completion-latency histograms from fio's json+ output (`clat_ns.bins`: `{ns: count}`).
//!
//! Percentiles cannot be averaged across runs or hosts; fio's bins can be summed, because
//! every fio uses the same bucket boundaries and the keys are the buckets' values in ns.
//! Merging is therefore exact, and percentiles of the merge are what fio itself would print
//! for one run holding all the I/Os: the value of the first bucket whose cumulative count
//! reaches p% of the total (fio's `calc_clat_percentiles`).

use std::collections::BTreeMap;

use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LatencyHistogram {
    /// bucket value in ns -> number of I/Os
    bins: BTreeMap<u64, u64>,
}

impl LatencyHistogram {
    pub fn new() -> Self {
        Self::default()
    }

    /// From (ns, count) pairs; repeated keys add up.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut h = Self::new();
        for (ns, count) in pairs {
            h.add(ns, count);
        }
        h
    }

    pub fn add(&mut self, ns: u64, count: u64) {
        // Saturating, as every sum here: counts come from files and databases, and a sum past
        // u64 must neither panic nor wrap into a small, plausible count.
        if count > 0 {
            let at = self.bins.entry(ns).or_insert(0);
            *at = at.saturating_add(count);
        }
    }

    /// Adds every bucket of `other`: exact, because fio's bucket values are identical everywhere.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (&ns, &count) in &other.bins {
            self.add(ns, count);
        }
    }

    /// Merge of many runs (repetitions, hosts).
    pub fn merged<'a>(all: impl IntoIterator<Item = &'a LatencyHistogram>) -> Self {
        let mut h = Self::new();
        for x in all {
            h.merge(x);
        }
        h
    }

    pub fn total(&self) -> u64 {
        saturating_total(&self.bins)
    }

    pub fn is_empty(&self) -> bool {
        self.bins.is_empty()
    }

    pub fn bins(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.bins.iter().map(|(&k, &v)| (k, v))
    }

    /// The `p`-th percentile (0 < p <= 100) in ns, as fio computes it; `None` when empty.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        percentile_of(&self.bins, p)
    }

    /// The empirical CDF as (ns, fraction of I/Os <= ns), one point per bucket.
    pub fn cdf(&self) -> Vec<(u64, f64)> {
        let total = self.total() as f64;
        let mut cumulative = 0u64;
        self.bins
            .iter()
            .map(|(&ns, &count)| {
                cumulative = cumulative.saturating_add(count);
                (ns, cumulative as f64 / total)
            })
            .collect()
    }

    /// Mean latency in ns from the bucket values; `None` when empty.
    pub fn mean(&self) -> Option<f64> {
        let total = self.total();
        (total > 0).then(|| {
            self.bins
                .iter()
                .map(|(&ns, &c)| ns as f64 * c as f64)
                .sum::<f64>()
                / total as f64
        })
    }
}

fn saturating_total(bins: &BTreeMap<u64, u64>) -> u64 {
    bins.values().fold(0u64, |a, &b| a.saturating_add(b))
}

/// The `p`-th percentile (0 < p <= 100) of fio's bins (`{ns: count}`), the way fio computes
/// it: the first bucket at which the running count reaches p% of all samples. `None` when
/// empty or `p` is out of range. Also for bins read straight from fio's JSON.
pub fn percentile_of(bins: &BTreeMap<u64, u64>, p: f64) -> Option<u64> {
    let total = saturating_total(bins);
    if total == 0 || !(p > 0.0 && p <= 100.0) {
        return None;
    }
    let threshold = p / 100.0 * total as f64;
    let mut cumulative = 0u64;
    for (&ns, &count) in bins {
        cumulative = cumulative.saturating_add(count);
        if cumulative as f64 >= threshold {
            return Some(ns);
        }
    }
    bins.keys().next_back().copied()
}

/// Adds fio's bins bucket by bucket (exact: the bucket values are the same on every host and
/// job).
pub fn merge_bins<'a>(all: impl IntoIterator<Item = &'a BTreeMap<u64, u64>>) -> BTreeMap<u64, u64> {
    let mut merged = LatencyHistogram::new();
    for bins in all {
        for (&ns, &count) in bins {
            merged.add(ns, count);
        }
    }
    merged.bins
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts past u64 (from a database nobody checked) saturate: no panic, and no wrap
    /// into a small count that would move every percentile.
    #[test]
    fn counts_past_u64_saturate() {
        let mut h = LatencyHistogram::from_pairs([(1000, u64::MAX), (2000, 5)]);
        assert_eq!(h.total(), u64::MAX);
        assert_eq!(h.percentile(50.0), Some(1000));
        assert_eq!(h.percentile(100.0), Some(1000));
        h.add(1000, 7);
        assert_eq!(h.bins().next(), Some((1000, u64::MAX)));
        assert!(h.cdf().iter().all(|(_, f)| *f <= 1.0));
    }

    #[test]
    fn percentile_of_bins_matches_fios_rule() {
        let bins: BTreeMap<u64, u64> = [(10, 1), (20, 1), (30, 2)].into_iter().collect();
        assert_eq!(percentile_of(&bins, 25.0), Some(10));
        assert_eq!(percentile_of(&bins, 25.1), Some(20));
        assert_eq!(percentile_of(&bins, 50.0), Some(20));
        assert_eq!(percentile_of(&bins, 100.0), Some(30));
        assert_eq!(percentile_of(&BTreeMap::new(), 50.0), None);
    }

    #[test]
    fn merge_is_exact_and_percentiles_follow_fio() {
        let a = LatencyHistogram::from_pairs([(1000, 50), (2000, 40), (10_000, 10)]);
        let b = LatencyHistogram::from_pairs([(1000, 50), (3000, 49), (50_000, 1)]);
        let m = LatencyHistogram::merged([&a, &b]);
        assert_eq!(m.total(), 200);
        assert_eq!(m.percentile(50.0), Some(1000)); // 100 of 200 at 1000
        assert_eq!(m.percentile(50.1), Some(2000));
        assert_eq!(m.percentile(99.0), Some(10_000)); // 198 reached at 10_000 (50+40+49+... )
        assert_eq!(m.percentile(99.9), Some(50_000));
        assert_eq!(m.percentile(100.0), Some(50_000));
        assert_eq!(m.cdf().last(), Some(&(50_000, 1.0)));
    }

    #[test]
    fn empty_input() {
        let h = LatencyHistogram::new();
        assert_eq!(h.percentile(50.0), None);
        assert_eq!(h.mean(), None);
        assert!(h.cdf().is_empty());
    }
}
