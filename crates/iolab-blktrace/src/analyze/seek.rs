//! Seek distances with btt's definition (overlap = 0, forward = start - previous end, else
//! start - previous start; the first from sector 0) and a correct median: btt walks its tree
//! without summing counts, so the MEDIAN it prints is not the median.
//!
//! Memory and speed: btt spends ~43% of its time inserting distances into a tree that grows
//! with the trace. Here distances below 2^16 sectors (32 MiB) are counted exactly in a dense
//! array (256 KiB, constant), larger ones as a sorted list of at most 2^16 distinct values
//! with their counts; past that cap they go to the log-linear histogram (within 0.4%) and the
//! median and mode are flagged approximate. So memory is bounded whatever the trace's length.
//!
//! Only distances below `HOT` (2^12) are counted as they come, in the first 16 KiB of the
//! dense array, which stays in the L1 cache. Every other distance is appended to a short
//! buffer and folded a buffer at a time: a radix sort, then the ones below `EXACT` are
//! counted in ascending order (a sequential walk of the array) and the larger ones merged
//! into the sorted list in one pass. Counting each as it came took a cache miss per seek
//! into the 256 KiB array on a random or mixed trace: a fifth of the reader thread's time.
//! Counting takes no branch on the distance: every distance is written to the buffer, whose
//! end moves on only for the ones it keeps (hot and cold alternate at random on random IO,
//! and mispredicting which was 7% of the reader thread's time). A hash table of distinct
//! distances, as before, took a cache miss per seek once it outgrew the cache. The fold gives
//! the same counts; whether the cap is passed depends only on how many distinct large
//! distances there are in all, so folding late changes no result.

use serde::Serialize;

use super::latency::LogHist;

const EXACT: u64 = 1 << 16;
/// Distances below this are counted at once (16 KiB of counters: cached); the others wait
/// in the buffer.
const HOT: u64 = 1 << 12;
const LARGE_CAP: usize = 1 << 16;
/// Distances buffered before a fold (256 KiB).
const PENDING: usize = 1 << 15;

#[derive(Debug, Clone, Default)]
pub struct Seeks {
    last_start: u64,
    last_end: u64,
    n: u64,
    sum_abs: u128,
    /// Counts of distances below `EXACT`, and at `EXACT` a counter of the buffered ones
    /// (unread).
    small: Vec<u32>,
    /// Distances of `HOT` or more not yet folded: the first `pending_len` of `PENDING` + 1
    /// slots.
    pending: Vec<u64>,
    pending_len: usize,
    /// Distinct large distances and their counts, sorted by distance (until the cap).
    large: Vec<(u64, u64)>,
    overflow: Option<LogHist>,
    n_large: u64,
    /// The radix sort's second buffer, and the merge's: kept from fold to fold, since
    /// fresh buffers of this size cost a page fault per 4 KiB each time.
    scratch: Vec<u64>,
    merged: Vec<(u64, u64)>,
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
        let cold = d >= HOT;
        let c = &mut self.small[if cold { EXACT } else { d } as usize];
        *c = c.wrapping_add(1);
        self.pending[self.pending_len] = d;
        self.pending_len += usize::from(cold);
        self.n_large += u64::from(d >= EXACT);
        if self.pending_len == PENDING {
            self.fold();
        }
        d
    }

    #[cold]
    #[inline(never)]
    fn allocate(&mut self) {
        self.small = vec![0; EXACT as usize + 1];
        self.pending = vec![0; PENDING + 1];
    }

    /// Counts the pending distances: those below `EXACT` into the dense array, the others into
    /// the sorted list, and moves the large ones to the histogram once the list holds more
    /// than `LARGE_CAP` distinct distances.
    #[cold]
    #[inline(never)]
    fn fold(&mut self) {
        let pending = &mut self.pending[..self.pending_len];
        self.pending_len = 0;
        if let Some(h) = &mut self.overflow {
            for &d in pending.iter() {
                if d < EXACT {
                    self.small[d as usize] += 1;
                } else {
                    h.add(d);
                }
            }
            return;
        }
        radix_sort(pending, &mut self.scratch);
        let below = pending.partition_point(|&d| d < EXACT);
        for &d in &pending[..below] {
            self.small[d as usize] += 1;
        }
        let pending = &pending[below..];
        let mut merged = std::mem::take(&mut self.merged);
        merged.clear();
        let mut old = self.large.iter().copied().peekable();
        let mut new = pending.iter().copied().peekable();
        loop {
            // The next distinct pending distance and how often it came.
            let next_new = new.next().map(|v| {
                let mut c = 1;
                while new.next_if_eq(&v).is_some() {
                    c += 1;
                }
                (v, c)
            });
            let Some((v, c)) = next_new else {
                merged.extend(old);
                break;
            };
            while let Some(o) = old.next_if(|&(ov, _)| ov < v) {
                merged.push(o);
            }
            match old.next_if(|&(ov, _)| ov == v) {
                Some((_, oc)) => merged.push((v, oc + c)),
                None => merged.push((v, c)),
            }
        }
        self.merged = std::mem::replace(&mut self.large, merged);
        if self.large.len() > LARGE_CAP {
            let mut h = LogHist::default();
            for &(v, c) in &self.large {
                for _ in 0..c {
                    h.add(v);
                }
            }
            self.large = Vec::new();
            self.overflow = Some(h);
        }
    }

    /// Folds what is pending, so [`Seeks::summary`] needs no copy.
    pub fn settle(&mut self) {
        if self.pending_len > 0 {
            self.fold();
        }
    }

    pub fn summary(&self) -> Option<SeekSummary> {
        if self.pending_len > 0 {
            let mut folded = self.clone();
            folded.fold();
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
                nth_of_sorted(&self.large, target - n_small).unwrap_or(EXACT),
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
        let (large_mode, large_count, large_exact) = match &self.overflow {
            Some(h) => {
                let (v, c) = h.mode().unwrap_or((0, 0));
                (v, c, false)
            }
            None => {
                let (v, c) = self
                    .large
                    .iter()
                    .copied()
                    .min_by_key(|&(v, c)| (std::cmp::Reverse(c), v))
                    .unwrap_or((0, 0));
                (v, c, true)
            }
        };
        let (mode, mode_count, mode_exact) = if large_count > mode_count {
            (large_mode, large_count, large_exact)
        } else {
            (mode, mode_count, true)
        };
        Some(SeekSummary {
            nseeks: self.n,
            mean,
            median,
            median_exact,
            mode,
            mode_count,
            mode_exact,
        })
    }
}

/// Sorts `v` by its bits, 11 at a time from the lowest (as many passes as the largest value
/// needs: three for distances below 2^33 sectors). A fold's 32,768 large distances took a
/// comparison sort ~2,600 instructions each: an eighth of the whole analysis of a mixed trace.
fn radix_sort(v: &mut [u64], scratch: &mut Vec<u64>) {
    const BITS: u32 = 11;
    const MASK: u64 = (1 << BITS) - 1;
    let max = v.iter().copied().max().unwrap_or(0);
    let passes = (64 - max.leading_zeros()).div_ceil(BITS);
    scratch.clear();
    scratch.resize(v.len(), 0);
    let mut counts = vec![0usize; 1 << BITS];
    let mut in_scratch = false;
    for pass in 0..passes {
        let shift = pass * BITS;
        let (src, dst): (&[u64], &mut [u64]) = if in_scratch {
            (scratch, v)
        } else {
            (v, scratch)
        };
        counts.fill(0);
        for &x in src.iter() {
            counts[((x >> shift) & MASK) as usize] += 1;
        }
        let mut at = 0;
        for c in counts.iter_mut() {
            let n = *c;
            *c = at;
            at += n;
        }
        for &x in src.iter() {
            let d = &mut counts[((x >> shift) & MASK) as usize];
            dst[*d] = x;
            *d += 1;
        }
        in_scratch = !in_scratch;
    }
    if in_scratch {
        v.copy_from_slice(scratch);
    }
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
    /// False when distances overflowed the exact tables (then the middle of the fullest
    /// histogram bucket, and that bucket's count).
    pub mode_exact: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radix_sort_sorts_like_a_comparison_sort() {
        let mut x = 99u64;
        let mut scratch = Vec::new();
        for (n, bits) in [
            (0, 8),
            (1, 64),
            (1000, 12),
            (5000, 33),
            (5000, 64),
            (777, 22),
        ] {
            let mut v: Vec<u64> = (0..n)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (x >> 1) >> (64 - bits).min(63)
                })
                .collect();
            let mut want = v.clone();
            want.sort_unstable();
            radix_sort(&mut v, &mut scratch);
            assert_eq!(v, want, "{n} values of {bits} bits");
        }
    }

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
    fn folded_large_distances_are_exact() {
        let mut s = Seeks::default();
        let mut all = Vec::new();
        let (mut last_start, mut last_end) = (0u64, 0u64);
        let mut x = 5u64;
        for i in 0..(3 * PENDING as u64 + 123) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            // Few distinct far targets, so counts pile up across folds; every other IO
            // goes back to 0.
            let at = if i % 2 == 0 {
                0
            } else {
                1_000_000 + (x >> 52) * 4096
            };
            all.push(distance(last_start, last_end, at, at + 8));
            (last_start, last_end) = (at, at + 8);
            s.add(at, at + 8);
        }
        let sum = s.summary().unwrap();
        all.sort_unstable();
        assert_eq!(sum.median, all[all.len() / 2]);
        assert!(sum.median_exact && sum.mode_exact);
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

    /// Distances of every size (counted at once, buffered below `EXACT`, buffered above it)
    /// over several folds give the median, mode and mean of a sort of all of them.
    #[test]
    fn distances_of_every_size_are_counted_exactly() {
        let mut s = Seeks::default();
        let mut all = Vec::new();
        let (mut last_start, mut last_end) = (0u64, 0u64);
        let mut x = 11u64;
        let mut at = 0u64;
        for _ in 0..(2 * PENDING as u64 + 4321) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // A hot distance, a buffered one below EXACT, or a large one, at random: few
            // distinct values of each, and the most frequent one is buffered.
            let step = match (x >> 60) % 3 {
                0 => 8 + ((x >> 40) % 7) * 64,
                1 => 2 * HOT + ((x >> 40) % 2) * 4096,
                _ => EXACT * 3 + ((x >> 40) % 9) * 100_000,
            };
            at += step;
            all.push(distance(last_start, last_end, at, at + 8));
            (last_start, last_end) = (at, at + 8);
            s.add(at, at + 8);
        }
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

    #[test]
    fn large_distances_are_exact_until_the_cap_then_approximate() {
        let mut s = Seeks::default();
        for i in 0..1001u64 {
            // Far-apart regions: distinct distances above 2^16 sectors.
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
