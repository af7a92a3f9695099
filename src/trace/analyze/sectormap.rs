//! A map from start sector to an IO in flight, tuned for what a trace holds: usually a few
//! dozen IOs in flight, sometimes (bio-based devices, lost completions) very many. Small maps
//! are two unsorted vectors, keys apart from values: a lookup is a linear scan of at most
//! `LARGE` keys (a few cache lines, vectorised, no unpredictable branches) and a removal is
//! a swap with the last entry, where a sorted vector paid a binary search and a memmove of
//! every later entry on each insert and removal (~12% of the analysis' main thread). Past
//! `LARGE` entries the map becomes a B-tree so nothing goes quadratic.
//!
//! Ranges of a small map are visited in no particular order; every caller only sums, counts
//! and takes minima over them (exact integer arithmetic), so the order changes no result.

use std::collections::BTreeMap;

const LARGE: usize = 256;

#[derive(Debug, Clone)]
pub enum SectorMap<V> {
    Small { keys: Vec<u64>, vals: Vec<V> },
    Large(BTreeMap<u64, V>),
}

impl<V> Default for SectorMap<V> {
    fn default() -> Self {
        SectorMap::Small {
            keys: Vec::new(),
            vals: Vec::new(),
        }
    }
}

impl<V> SectorMap<V> {
    pub fn len(&self) -> usize {
        match self {
            SectorMap::Small { keys, .. } => keys.len(),
            SectorMap::Large(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inserts, returning the value it replaced.
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        match self {
            SectorMap::Small { keys, vals } => match position(keys, key) {
                Some(i) => Some(std::mem::replace(&mut vals[i], value)),
                None => {
                    keys.push(key);
                    vals.push(value);
                    if keys.len() > LARGE {
                        let m: BTreeMap<u64, V> = std::mem::take(keys)
                            .into_iter()
                            .zip(std::mem::take(vals))
                            .collect();
                        *self = SectorMap::Large(m);
                    }
                    None
                }
            },
            SectorMap::Large(m) => m.insert(key, value),
        }
    }

    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        match self {
            SectorMap::Small { keys, vals } => position(keys, key).map(|i| &mut vals[i]),
            SectorMap::Large(m) => m.get_mut(&key),
        }
    }

    pub fn remove(&mut self, key: u64) -> Option<V> {
        match self {
            SectorMap::Small { keys, vals } => {
                let i = position(keys, key)?;
                keys.swap_remove(i);
                Some(vals.swap_remove(i))
            }
            SectorMap::Large(m) => {
                let r = m.remove(&key);
                if m.len() < LARGE / 4 {
                    let (keys, vals) = std::mem::take(m).into_iter().unzip();
                    *self = SectorMap::Small { keys, vals };
                }
                r
            }
        }
    }

    /// The entry whose range holds `sector`: the exact start if there is one, else the entry
    /// with the greatest start below `sector` whose end (`end_of`) lies beyond it. This is how
    /// btt finds the bio of a later event: every part of a split bio starts inside it.
    pub fn containing_mut(&mut self, sector: u64, end_of: impl Fn(&V) -> u64) -> Option<&mut V> {
        match self {
            SectorMap::Small { keys, vals } => {
                if let Some(i) = position(keys, sector) {
                    return Some(&mut vals[i]);
                }
                let mut best: Option<usize> = None;
                for (i, (&k, v)) in keys.iter().zip(vals.iter()).enumerate() {
                    if k < sector && sector < end_of(v) && best.is_none_or(|b| keys[b] < k) {
                        best = Some(i);
                    }
                }
                best.map(|i| &mut vals[i])
            }
            SectorMap::Large(m) => m
                .range_mut(..=sector)
                .next_back()
                .filter(|(&k, v)| k == sector || sector < end_of(v))
                .map(|(_, v)| v),
        }
    }

    /// Calls `f` for every entry with `from <= key < to` (in key order only for large maps).
    pub fn for_range_mut(&mut self, from: u64, to: u64, mut f: impl FnMut(u64, &mut V)) {
        match self {
            SectorMap::Small { keys, vals } => {
                // One unsigned comparison per key: k - from wraps above `span` when k < from.
                let span = to.saturating_sub(from);
                for (&k, v) in keys.iter().zip(vals.iter_mut()) {
                    if k.wrapping_sub(from) < span {
                        f(k, v);
                    }
                }
            }
            SectorMap::Large(m) => {
                for (&k, val) in m.range_mut(from..to) {
                    f(k, val);
                }
            }
        }
    }
}

/// Where `key` is in an unsorted key list: a scan, the list is short. Eight keys are compared
/// per step into a bit mask without a branch per key, which the compiler turns into SIMD
/// compares: `iter().position()` stops after each key and was 40% of the state machine's
/// time on a trace with a few hundred bios queued (a buffered writer), where most scans
/// (every new Q) run to the end without a match.
#[inline]
fn position(keys: &[u64], key: u64) -> Option<usize> {
    let mut chunks = keys.chunks_exact(8);
    let mut base = 0;
    for chunk in &mut chunks {
        let mut mask = 0u32;
        for (i, &k) in chunk.iter().enumerate() {
            mask |= u32::from(k == key) << i;
        }
        if mask != 0 {
            return Some(base + mask.trailing_zeros() as usize);
        }
        base += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&k| k == key)
        .map(|i| base + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containing_finds_the_entry_whose_range_holds_a_sector() {
        // Two bios in flight: [100, 356) and [1000, 1008).
        let mut s: SectorMap<u64> = SectorMap::default();
        s.insert(100, 356);
        s.insert(1000, 1008);
        let end = |v: &u64| *v;
        assert_eq!(s.containing_mut(100, end).copied(), Some(356));
        assert_eq!(s.containing_mut(228, end).copied(), Some(356));
        assert_eq!(s.containing_mut(356, end), None);
        assert_eq!(s.containing_mut(99, end), None);
        assert_eq!(s.containing_mut(1007, end).copied(), Some(1008));
        let mut large: SectorMap<u64> = SectorMap::default();
        for k in 0..400u64 {
            large.insert(k * 1000, k * 1000 + 256);
        }
        assert!(matches!(large, SectorMap::Large(_)));
        assert_eq!(large.containing_mut(5128, end).copied(), Some(5256));
        assert_eq!(large.containing_mut(5256, end), None);
    }

    #[test]
    fn position_finds_the_first_match_anywhere() {
        let keys: Vec<u64> = (0..37).map(|k| k * 3).collect();
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(position(&keys, k), Some(i));
        }
        assert_eq!(position(&keys, 1), None);
        assert_eq!(position(&[], 1), None);
        assert_eq!(position(&[5, 5, 5, 5, 5, 5, 5, 5, 5], 5), Some(0));
    }

    #[test]
    fn behaves_like_a_btreemap_across_the_switch() {
        let mut s: SectorMap<u64> = SectorMap::default();
        let mut b: BTreeMap<u64, u64> = BTreeMap::new();
        let mut x = 12345u64;
        for i in 0..5000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = (x >> 33) % 2000;
            if i % 3 == 2 {
                assert_eq!(s.remove(key), b.remove(&key));
            } else {
                assert_eq!(s.insert(key, i), b.insert(key, i));
            }
            assert_eq!(s.len(), b.len());
            if i % 97 == 0 {
                let mut got = Vec::new();
                s.for_range_mut(500, 900, |k, v| got.push((k, *v)));
                got.sort();
                let want: Vec<(u64, u64)> = b.range(500..900).map(|(&k, &v)| (k, v)).collect();
                assert_eq!(got, want);
            }
        }
        assert!(matches!(s, SectorMap::Large(_)));
        for k in 0..2000 {
            let want = b.range(..=k).next_back().map(|(&start, &v)| (start, v));
            let got = s.containing_mut(k, |_| k + 1).map(|v| *v);
            assert_eq!(got, want.map(|(_, v)| v), "{k}");
        }
        for k in 0..2000 {
            s.remove(k);
        }
        assert!(s.is_empty() && matches!(s, SectorMap::Small { .. }));
    }
}
