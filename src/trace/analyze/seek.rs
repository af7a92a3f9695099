//! Seek distances with btt's definition (overlap = 0, forward = start - previous end, else
//! start - previous start; the first from sector 0) and a correct median: btt walks its tree
//! without summing counts, so the MEDIAN it prints is not the median. Distances are counted
//! exactly in a hash map; past a cap of distinct values (random I/O over a huge device) they
//! fall back to the log histogram so memory stays bounded, and the result says it is approximate.

use std::collections::HashMap;

use serde::Serialize;

use super::latency::LogHist;

const EXACT_CAP: usize = 1 << 20;

#[derive(Debug, Default, Clone)]
pub struct Seeks {
    last_start: u64,
    last_end: u64,
    n: u64,
    sum_abs: u128,
    exact: HashMap<u64, u64>,
    approx: Option<LogHist>,
}

impl Seeks {
    /// Feeds one IO (start sector, end = start + sectors).
    pub fn add(&mut self, start: u64, end: u64) {
        let (ls, le) = (self.last_start, self.last_end);
        let dist: i128 = if (ls <= start && start <= le) || (ls <= end && end <= le) {
            0
        } else if start > le {
            i128::from(start) - i128::from(le)
        } else {
            i128::from(start) - i128::from(ls)
        };
        self.last_start = start;
        self.last_end = end;
        let d = dist.unsigned_abs() as u64;
        self.n += 1;
        self.sum_abs += u128::from(d);
        match &mut self.approx {
            Some(h) => h.add(d),
            None => {
                *self.exact.entry(d).or_insert(0) += 1;
                if self.exact.len() > EXACT_CAP {
                    let mut h = LogHist::default();
                    for (&v, &c) in &self.exact {
                        for _ in 0..c {
                            h.add(v);
                        }
                    }
                    self.exact = HashMap::new();
                    self.approx = Some(h);
                }
            }
        }
    }

    pub fn summary(&self) -> Option<SeekSummary> {
        if self.n == 0 {
            return None;
        }
        let mean = self.sum_abs as f64 / self.n as f64;
        if let Some(h) = &self.approx {
            return Some(SeekSummary {
                nseeks: self.n,
                mean,
                median: h.quantile(0.5, self.n).unwrap_or(0),
                mode: 0,
                mode_count: 0,
                approximate: true,
            });
        }
        let mut sorted: Vec<(u64, u64)> = self.exact.iter().map(|(&v, &c)| (v, c)).collect();
        sorted.sort_unstable();
        // The median: the value at position n/2 (0-based) of the sorted distances.
        let target = self.n / 2;
        let mut seen = 0;
        let mut median = 0;
        for &(v, c) in &sorted {
            if seen + c > target {
                median = v;
                break;
            }
            seen += c;
        }
        let (mode, mode_count) = sorted.iter().fold(
            (0, 0),
            |best, &(v, c)| if c > best.1 { (v, c) } else { best },
        );
        Some(SeekSummary {
            nseeks: self.n,
            mean,
            median,
            mode,
            mode_count,
            approximate: false,
        })
    }
}

/// Seek statistics in sectors.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SeekSummary {
    pub nseeks: u64,
    /// Mean absolute distance.
    pub mean: f64,
    /// True median of the absolute distances.
    pub median: u64,
    /// Most frequent distance (the smallest on ties) and how often it occurred.
    pub mode: u64,
    pub mode_count: u64,
    /// True when distinct distances overflowed the exact table (median from a histogram,
    /// mode unknown).
    pub approximate: bool,
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
        assert_eq!((sum.mode, sum.mode_count), (0, 2));
    }
}
