//! Seek distances with btt's definition (overlap = 0, forward = start - previous end, else
//! start - previous start; the first from sector 0) and a correct median: btt walks its tree
//! without summing counts, so the MEDIAN it prints is not the median.
//!
//! Memory and speed: btt spends ~43% of its time inserting distances into a tree that grows
//! with the trace. Here distances below `EXACT` (2 MiB) are counted exactly in a dense array
//! of 16 KiB, which stays in the L1 cache. Larger ones are counted exactly per distinct value
//! in a small hash table while there are at most `LARGE_CAP` distinct values (a few streams
//! far apart seek by a handful of distances); past that (random IO: nearly every distance is
//! new) they go to the log-linear histogram (within 0.4%), and a median among them is flagged
//! approximate. So memory is bounded (under 200 KiB) whatever the trace's length.
//!
//! A mode is a value, and a histogram bucket holds many values, so the mode is never taken
//! from one (a bucket of distances that each came once would outnumber a distance that came
//! eleven times). Past the cap, each large distance is also counted in one of `REPEAT_SLOTS`
//! counters chosen by a hash of it: a slot counts its distance and every other that shares
//! it, so the fullest slot bounds how often any one large distance came. When the most
//! frequent small distance came at least that often, it is the mode, exactly; otherwise the
//! summary says the mode is not known and gives the bound (on random IO, n large distances
//! fill the slots to about n / 32,768 each, so that happens when repeats are rarer than that).
//!
//! Large distances wait in a short buffer and are counted a buffer at a time: the dense
//! array's count takes no branch on the distance (large ones land on one unread counter), and
//! the buffer's end moves on only for large ones, so the small and large cases, which
//! alternate at random on random IO, cost no mispredicted branch (that was 7% of the reader
//! thread's time).
//!
//! Before, distances below 2^16 had a 256 KiB array, and larger ones were kept exactly up to
//! 65,536 distinct values in a sorted list, merged a buffer at a time after a radix sort.
//! Measured on a 2.1 M-event mixed trace, both threads' seek counting then took ~16% of the
//! analysis's wall time (leaving seeks out altogether saved that much; this layout saves most
//! of it): the array and the list pushed the state machine's tables out of the L2 cache, for
//! medians exact to the sector among distances of megabytes.

use serde::Serialize;

use super::keymap::KeyMap;
use super::latency::LogHist;

/// Distances below this are counted exactly, in a dense array.
const EXACT: u64 = 1 << 12;
/// Distinct large distances counted exactly (the table stays within 128 KiB).
const LARGE_CAP: usize = 1 << 12;
/// Large distances buffered before they are counted (8 KiB).
const PENDING: usize = 1 << 10;
/// Counters that bound the count of any one large distance once they are too many to count
/// one by one (64 KiB).
const REPEAT_SLOTS: usize = 1 << 15;

#[derive(Debug, Clone, Default)]
pub struct Seeks {
    last_start: u64,
    last_end: u64,
    n: u64,
    sum_abs: u128,
    /// Counts of distances below `EXACT`, and at `EXACT` a counter of the others (unread).
    small: Vec<u32>,
    /// Large distances not yet counted: the first `pending_len` of `PENDING` + 1 slots.
    pending: Vec<u64>,
    pending_len: usize,
    /// Distinct large distances and their counts (until the cap).
    large: KeyMap<u32>,
    /// The large distances, once more than `LARGE_CAP` distinct ones came.
    overflow: Option<LogHist>,
    /// From then on, the same distances counted by hash slot (saturating).
    repeats: Vec<u16>,
    n_large: u64,
}

/// btt's seek distance of an IO [start, end) after one at [last_start, last_end): 0 when they
/// overlap, forward = start - previous end, else start - previous start (absolute).
#[inline]
pub fn distance(last_start: u64, last_end: u64, start: u64, end: u64) -> u64 {
    let (ls, le) = (last_start, last_end);
    if (ls <= start && start <= le) || (ls <= end && end <= le) {
        0
    } else if start > le {
        start - le
    } else {
        // start < previous start here (else it would overlap or lie beyond the end).
        ls.abs_diff(start)
    }
}

impl Seeks {
    /// Feeds one IO (start sector, end = start + sectors); returns its seek distance.
    #[inline]
    pub fn add(&mut self, start: u64, end: u64) -> u64 {
        let d = distance(self.last_start, self.last_end, start, end);
        self.last_start = start;
        self.last_end = end;
        self.n += 1;
        self.sum_abs += u128::from(d);
        if self.small.is_empty() {
            self.allocate();
        }
        let large = d >= EXACT;
        let c = &mut self.small[d.min(EXACT) as usize];
        *c = c.wrapping_add(1);
        self.pending[self.pending_len] = d;
        self.pending_len += usize::from(large);
        self.n_large += u64::from(large);
        if self.pending_len == PENDING {
            self.count_pending();
        }
        d
    }

    #[cold]
    #[inline(never)]
    fn allocate(&mut self) {
        self.small = vec![0; EXACT as usize + 1];
        self.pending = vec![0; PENDING + 1];
    }

    /// Counts the buffered large distances: exactly per value until more than `LARGE_CAP`
    /// distinct ones came, then in the histogram.
    #[cold]
    #[inline(never)]
    fn count_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for &d in &pending[..std::mem::take(&mut self.pending_len)] {
            if let Some(h) = &mut self.overflow {
                h.add(d);
                let slot = &mut self.repeats[repeat_slot(d)];
                *slot = slot.saturating_add(1);
                continue;
            }
            let full = self.large.len() >= LARGE_CAP;
            match self.large.get_mut(d) {
                Some(c) if *c < u32::MAX => *c += 1,
                None if !full => {
                    self.large.insert(d, 1);
                }
                _ => self.spill(d),
            }
        }
        self.pending = pending;
    }

    /// Moves the large distances to the histogram and the repeat slots, `d` with them: from
    /// here on a median among them is approximate, and their mode known only by a bound.
    #[cold]
    fn spill(&mut self, d: u64) {
        let mut h = LogHist::default();
        let mut repeats = vec![0u16; REPEAT_SLOTS];
        for (v, c) in self.large.iter().chain([(d, 1)]) {
            h.add_count(v, u64::from(c));
            let slot = &mut repeats[repeat_slot(v)];
            *slot = slot.saturating_add(u16::try_from(c).unwrap_or(u16::MAX));
        }
        self.large = KeyMap::default();
        self.overflow = Some(h);
        self.repeats = repeats;
    }

    /// Counts what is buffered, so [`Seeks::summary`] needs no copy.
    pub fn settle(&mut self) {
        if self.pending_len > 0 {
            self.count_pending();
        }
    }

    pub fn summary(&self) -> Option<SeekSummary> {
        if self.pending_len > 0 {
            let mut folded = self.clone();
            folded.count_pending();
            return folded.summary();
        }
        if self.n == 0 {
            return None;
        }
        let mean = self.sum_abs as f64 / self.n as f64;
        let n_small = self.n - self.n_large;
        // The median: the value at position n/2 (0-based) of the sorted distances.
        let target = self.n / 2;
        let (median, median_exact) = if target < n_small {
            let mut seen = 0u64;
            let mut m = 0;
            for (v, &c) in self.small.iter().take(EXACT as usize).enumerate() {
                seen += u64::from(c);
                if seen > target {
                    m = v as u64;
                    break;
                }
            }
            (m, true)
        } else if let Some(h) = &self.overflow {
            let q = (target - n_small + 1) as f64 / self.n_large as f64;
            (h.quantile(q, self.n_large).unwrap_or(EXACT), false)
        } else {
            (
                nth_of_sorted(&self.large_sorted(), target - n_small).unwrap_or(EXACT),
                true,
            )
        };
        let (mode, mode_count) = self.small.iter().take(EXACT as usize).enumerate().fold(
            (0u64, 0u64),
            |best, (v, &c)| {
                if u64::from(c) > best.1 {
                    (v as u64, u64::from(c))
                } else {
                    best
                }
            },
        );
        let (mode, mode_count, mode_bound) = if self.overflow.is_some() {
            // No large distance came more often than its slot counted.
            let bound = u64::from(self.repeats.iter().copied().max().unwrap_or(0));
            (mode, mode_count, (bound > mode_count).then_some(bound))
        } else {
            let (v, c) = self
                .large
                .iter()
                .map(|(v, c)| (v, u64::from(c)))
                .min_by_key(|&(v, c)| (std::cmp::Reverse(c), v))
                .unwrap_or((0, 0));
            if c > mode_count {
                (v, c, None)
            } else {
                (mode, mode_count, None)
            }
        };
        Some(SeekSummary {
            nseeks: self.n,
            mean,
            median,
            median_exact,
            mode,
            mode_count,
            mode_exact: mode_bound.is_none(),
            mode_bound,
        })
    }

    /// The distinct large distances and their counts, sorted by distance.
    fn large_sorted(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self.large.iter().map(|(d, c)| (d, u64::from(c))).collect();
        v.sort_unstable();
        v
    }
}

/// The repeat counter of a large distance (Fibonacci hashing: consecutive and strided
/// distances spread over all slots).
#[inline]
fn repeat_slot(d: u64) -> usize {
    (d.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - REPEAT_SLOTS.trailing_zeros())) as usize
}

/// The value at 0-based `rank` of the multiset given as distinct (value, count) pairs sorted
/// by value (as `Seeks::large` is kept).
fn nth_of_sorted(items: &[(u64, u64)], rank: u64) -> Option<u64> {
    let mut seen = 0;
    items.iter().find_map(|&(v, c)| {
        seen += c;
        (seen > rank).then_some(v)
    })
}

/// Seek statistics in sectors.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SeekSummary {
    pub nseeks: u64,
    /// Mean absolute distance.
    pub mean: f64,
    /// True median of the absolute distances.
    pub median: u64,
    /// False when distances overflowed the exact tables (then within 0.4%).
    pub median_exact: bool,
    /// Most frequent distance (the smallest on ties) and how often it occurred.
    pub mode: u64,
    pub mode_count: u64,
    /// False when the mode is not known: then `mode` is the most frequent distance below
    /// 4,096 sectors, and a larger one (too many distinct ones came to count them one by one)
    /// may have come as often as `mode_bound`.
    pub mode_exact: bool,
    /// When the mode is not known, how often a distance of 4,096 sectors or more may have
    /// come, at most.
    pub mode_bound: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn btt_distances_and_true_median() {
        let mut s = Seeks::default();
        s.add(100, 108); // from 0: forward 100
        s.add(108, 116); // overlaps at the boundary: 0
        s.add(50, 58); // backward: 50 - 108 = -58
        s.add(1000, 1008); // forward: 1000 - 58 = 942
        s.add(1000, 1008); // overlap: 0
        let sum = s.summary().unwrap();
        assert_eq!(sum.nseeks, 5);
        assert!((sum.mean - (100.0 + 58.0 + 942.0) / 5.0).abs() < 1e-9);
        // Sorted |d|: 0 0 58 100 942 -> position 2 is 58.
        assert_eq!(sum.median, 58);
        assert!(sum.median_exact);
        assert_eq!((sum.mode, sum.mode_count), (0, 2));
    }

    /// Large distances folded over several buffers give the exact median and mode of all
    /// of them (checked against a sort of every distance).
    #[test]
    fn large_distances_are_exact_across_buffers() {
        let mut s = Seeks::default();
        let mut all = Vec::new();
        let (mut last_start, mut last_end) = (0u64, 0u64);
        let mut x = 5u64;
        for i in 0..(20 * PENDING as u64 + 123) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            // Few distinct far targets (fewer than the cap), so counts pile up across
            // buffers; every other IO goes back to 0.
            let at = if i % 2 == 0 {
                0
            } else {
                1_000_000 + (x >> 54) * 4096
            };
            all.push(distance(last_start, last_end, at, at + 8));
            (last_start, last_end) = (at, at + 8);
            s.add(at, at + 8);
        }
        summary_matches_a_sort(&s, all);
    }

    /// Distances of every size, over several buffers, give the median, mode and mean of a sort
    /// of all of them.
    #[test]
    fn distances_of_every_size_are_counted_exactly() {
        let mut s = Seeks::default();
        let mut all = Vec::new();
        let (mut last_start, mut last_end) = (0u64, 0u64);
        let mut x = 11u64;
        let mut at = 0u64;
        for _ in 0..(2 * PENDING as u64 + 4321) {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Small distances of two ranges or a large one, at random: few distinct values of
            // each, and the most frequent one in the middle range.
            let step = match (x >> 60) % 3 {
                0 => 8 + ((x >> 40) % 7) * 64,
                1 => 8192 + ((x >> 40) % 2) * 4096,
                _ => EXACT * 3 + ((x >> 40) % 9) * 100_000,
            };
            at += step;
            all.push(distance(last_start, last_end, at, at + 8));
            (last_start, last_end) = (at, at + 8);
            s.add(at, at + 8);
        }
        summary_matches_a_sort(&s, all);
    }

    /// The count, mean, median and mode of `s` are those of a sort of `all` its distances,
    /// and exact.
    fn summary_matches_a_sort(s: &Seeks, mut all: Vec<u64>) {
        let sum = s.summary().unwrap();
        all.sort_unstable();
        assert_eq!(sum.nseeks, all.len() as u64);
        assert_eq!(sum.median, all[all.len() / 2]);
        assert!(sum.median_exact && sum.mode_exact);
        let mean = all.iter().sum::<u64>() as f64 / all.len() as f64;
        assert!((sum.mean - mean).abs() < 1e-6 * mean);
        let mut best = (0u64, 0u64);
        let mut i = 0;
        while i < all.len() {
            let j = all[i..].partition_point(|&v| v == all[i]) + i;
            if (j - i) as u64 > best.1 {
                best = (all[i], (j - i) as u64);
            }
            i = j;
        }
        assert_eq!((sum.mode, sum.mode_count), best);
    }

    /// Past the cap, a bucket of distances that each came once is not a mode: the distance
    /// that came four times is, and known exactly. A large distance that does recur more
    /// often than any small one leaves the mode unknown, with a bound no lower than its count.
    #[test]
    fn a_mode_is_a_value_not_a_histogram_bucket() {
        let mut s = Seeks::default();
        let mut at = 0;
        for i in 0..5000u64 {
            at += 8 + 100_000 + i; // forward gaps of 100,000 + i sectors: all distinct
            s.add(at, at + 8);
            if i % 2000 == 0 {
                s.add(at, at + 8); // the same IO again: distance 0
            }
        }
        let sum = s.summary().unwrap();
        assert!(!sum.median_exact);
        assert_eq!((sum.mode, sum.mode_count, sum.mode_exact), (0, 3, true));
        assert_eq!(sum.mode_bound, None);

        for _ in 0..50 {
            // Back and forth between two places 9,000,000 sectors apart: two large distances
            // (out 9,000,000 - 8 from the end, back 9,000,000 from the start), 50 times each.
            s.add(at + 9_000_000, at + 9_000_008);
            s.add(at, at + 8);
        }
        let sum = s.summary().unwrap();
        assert_eq!((sum.mode, sum.mode_count, sum.mode_exact), (0, 3, false));
        assert!(sum.mode_bound.unwrap() >= 50, "{sum:?}");
    }

    #[test]
    fn large_distances_are_exact_until_the_cap_then_approximate() {
        let mut s = Seeks::default();
        for i in 0..1001u64 {
            // Far-apart regions: distinct large distances, fewer than the cap.
            let at = if i % 2 == 0 { 0 } else { 2_000_000 + i * 1000 };
            s.add(at, at + 8);
        }
        let sum = s.summary().unwrap();
        assert!(sum.median_exact && sum.mode_exact);
        assert!(sum.median > 2_000_000, "{}", sum.median);

        let mut s = Seeks::default();
        for i in 0..(3 * LARGE_CAP as u64) {
            let at = if i % 2 == 0 { 0 } else { 2_000_000 + i * 16 };
            s.add(at, at + 8);
        }
        let sum = s.summary().unwrap();
        assert!(!sum.median_exact);
        let want = 2_000_000.0 + 1.5 * LARGE_CAP as f64 * 16.0;
        assert!(
            (sum.median as f64 - want).abs() / want < 0.01,
            "{}",
            sum.median
        );
    }
}
