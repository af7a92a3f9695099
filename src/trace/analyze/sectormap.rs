//! A map from start sector to an IO in flight, tuned for what a trace holds: usually a few
//! dozen IOs in flight, sometimes (a buffered writer's writeback, bio-based devices, lost
//! completions) thousands. Small maps are two unsorted vectors, keys apart from values: a
//! lookup is a linear scan of at most `LARGE` keys (a few cache lines, vectorised, no
//! unpredictable branches) and a removal is a swap with the last entry, where a sorted vector
//! paid a binary search and a memmove of every later entry on each insert and removal (~12%
//! of the analysis' main thread). Past `LARGE` entries the map becomes a B-tree so nothing
//! goes quadratic.
//!
//! The large form orders only keys and 4-byte slot numbers; the values (80 bytes for a bio)
//! stay put in a slab. A B-tree of the values themselves moved them on every insert and
//! removal and walked nodes of a kilobyte: it was 43% of the instructions of a mixed trace
//! (random IO beside a buffered writer), the single largest cost of the analysis.
//!
//! Ranges of a small map are visited in no particular order; every caller only sums, counts
//! and takes minima over them (exact integer arithmetic), so the order changes no result.

use std::collections::BTreeMap;

/// Small maps switch to the large form past this many entries, and back below a quarter.
const LARGE: usize = 64;

#[derive(Debug, Clone)]
pub enum SectorMap<V> {
    Small {
        keys: Vec<u64>,
        vals: Vec<V>,
        /// The longest range inserted (carried into the large form).
        max_span: u64,
    },
    Large(Slab<V>),
}

/// The large form: key order in a B-tree of slot numbers, values in slots reused after removal.
#[derive(Debug, Clone)]
pub struct Slab<V> {
    order: BTreeMap<u64, u32>,
    slots: Vec<Option<V>>,
    free: Vec<u32>,
    /// The longest range ever inserted: no entry starting this far below a sector holds it,
    /// which bounds the backward search of [`SectorMap::containing_mut`].
    max_span: u64,
}

impl<V> Slab<V> {
    fn new() -> Self {
        Slab {
            order: BTreeMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            max_span: 0,
        }
    }

    fn from_pairs(keys: Vec<u64>, vals: Vec<V>, max_span: u64) -> Self {
        let mut s = Slab::new();
        s.max_span = max_span;
        for (k, v) in keys.into_iter().zip(vals) {
            s.insert(k, 0, v);
        }
        s
    }

    fn insert(&mut self, key: u64, end: u64, value: V) -> Option<V> {
        self.max_span = self.max_span.max(end.saturating_sub(key));
        if let Some(&slot) = self.order.get(&key) {
            return self.slots[slot as usize].replace(value);
        }
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(value);
                slot
            }
            None => {
                self.slots.push(Some(value));
                (self.slots.len() - 1) as u32
            }
        };
        self.order.insert(key, slot);
        None
    }

    fn remove(&mut self, key: u64) -> Option<V> {
        let slot = self.order.remove(&key)?;
        self.free.push(slot);
        self.slots[slot as usize].take()
    }

    fn slot_mut(&mut self, slot: u32) -> &mut V {
        self.slots[slot as usize]
            .as_mut()
            .expect("a slot in the order holds a value")
    }

    /// Everything, in key order (for switching back to the small form).
    fn into_pairs(mut self) -> (Vec<u64>, Vec<V>) {
        let mut keys = Vec::with_capacity(self.order.len());
        let mut vals = Vec::with_capacity(self.order.len());
        for (k, slot) in std::mem::take(&mut self.order) {
            if let Some(v) = self.slots[slot as usize].take() {
                keys.push(k);
                vals.push(v);
            }
        }
        (keys, vals)
    }
}

impl<V> Default for SectorMap<V> {
    fn default() -> Self {
        SectorMap::Small {
            keys: Vec::new(),
            vals: Vec::new(),
            max_span: 0,
        }
    }
}

impl<V> SectorMap<V> {
    pub fn len(&self) -> usize {
        match self {
            SectorMap::Small { keys, .. } => keys.len(),
            SectorMap::Large(m) => m.order.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inserts the entry for the range [`key`, `end`), returning the value it replaced.
    pub fn insert(&mut self, key: u64, end: u64, value: V) -> Option<V> {
        match self {
            SectorMap::Small {
                keys,
                vals,
                max_span,
            } => {
                *max_span = (*max_span).max(end.saturating_sub(key));
                match position(keys, key) {
                    Some(i) => Some(std::mem::replace(&mut vals[i], value)),
                    None => {
                        keys.push(key);
                        vals.push(value);
                        if keys.len() > LARGE {
                            let m = Slab::from_pairs(
                                std::mem::take(keys),
                                std::mem::take(vals),
                                *max_span,
                            );
                            *self = SectorMap::Large(m);
                        }
                        None
                    }
                }
            }
            SectorMap::Large(m) => m.insert(key, end, value),
        }
    }

    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        match self {
            SectorMap::Small { keys, vals, .. } => position(keys, key).map(|i| &mut vals[i]),
            SectorMap::Large(m) => {
                let slot = *m.order.get(&key)?;
                Some(m.slot_mut(slot))
            }
        }
    }

    pub fn remove(&mut self, key: u64) -> Option<V> {
        match self {
            SectorMap::Small { keys, vals, .. } => {
                let i = position(keys, key)?;
                keys.swap_remove(i);
                Some(vals.swap_remove(i))
            }
            SectorMap::Large(m) => {
                let r = m.remove(key);
                if m.order.len() < LARGE / 4 {
                    let max_span = m.max_span;
                    let (keys, vals) = std::mem::replace(m, Slab::new()).into_pairs();
                    *self = SectorMap::Small {
                        keys,
                        vals,
                        max_span,
                    };
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
            SectorMap::Small { keys, vals, .. } => {
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
            SectorMap::Large(m) => {
                // Nearly every G, I and M names the exact start: one descent, no range cursor.
                if let Some(&slot) = m.order.get(&sector) {
                    return Some(m.slot_mut(slot));
                }
                // Else the nearest start below whose range holds the sector (as in the small
                // form), searched back only as far as the longest range could reach.
                let low = sector.saturating_sub(m.max_span);
                let slot = m
                    .order
                    .range(low..sector)
                    .rev()
                    .map(|(_, &slot)| slot)
                    .find(|&slot| {
                        m.slots[slot as usize]
                            .as_ref()
                            .is_some_and(|v| sector < end_of(v))
                    })?;
                Some(m.slot_mut(slot))
            }
        }
    }

    /// Calls `f` for every entry with `from <= key < to` (in key order only for large maps).
    pub fn for_range_mut(&mut self, from: u64, to: u64, mut f: impl FnMut(u64, &mut V)) {
        match self {
            SectorMap::Small { keys, vals, .. } => {
                // One unsigned comparison per key: k - from wraps above `span` when k < from.
                let span = to.saturating_sub(from);
                for (&k, v) in keys.iter().zip(vals.iter_mut()) {
                    if k.wrapping_sub(from) < span {
                        f(k, v);
                    }
                }
            }
            SectorMap::Large(m) => {
                if from >= to {
                    return;
                }
                let Slab { order, slots, .. } = m;
                for (&k, &slot) in order.range(from..to) {
                    if let Some(v) = slots[slot as usize].as_mut() {
                        f(k, v);
                    }
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
        s.insert(100, 356, 356);
        s.insert(1000, 1008, 1008);
        let end = |v: &u64| *v;
        assert_eq!(s.containing_mut(100, end).copied(), Some(356));
        assert_eq!(s.containing_mut(228, end).copied(), Some(356));
        assert_eq!(s.containing_mut(356, end), None);
        assert_eq!(s.containing_mut(99, end), None);
        assert_eq!(s.containing_mut(1007, end).copied(), Some(1008));
        let mut large: SectorMap<u64> = SectorMap::default();
        for k in 0..400u64 {
            large.insert(k * 1000, k * 1000 + 256, k * 1000 + 256);
        }
        assert!(matches!(large, SectorMap::Large(_)));
        assert_eq!(large.containing_mut(5128, end).copied(), Some(5256));
        assert_eq!(large.containing_mut(5256, end), None);
        // Overlapping ranges: the nearest start below that holds the sector, in both forms.
        for n in [3u64, 100] {
            let mut m: SectorMap<u64> = SectorMap::default();
            m.insert(0, 1000, 1000);
            for k in 1..n {
                m.insert(10_000 + k * 8, 10_000 + k * 8 + 4, 10_000 + k * 8 + 4);
            }
            m.insert(500, 504, 504);
            assert_eq!(m.containing_mut(600, end).copied(), Some(1000), "{n}");
            assert_eq!(m.containing_mut(502, end).copied(), Some(504), "{n}");
            assert_eq!(m.containing_mut(1000, end), None, "{n}");
        }
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
        // Values are (end, serial); ranges of 1 to 24 sectors, overlapping at times.
        let mut s: SectorMap<(u64, u64)> = SectorMap::default();
        let mut b: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let mut x = 12345u64;
        let want_containing = |b: &BTreeMap<u64, (u64, u64)>, k: u64| {
            b.get(&k)
                .copied()
                .or_else(|| b.range(..k).rev().find(|(_, v)| k < v.0).map(|(_, &v)| v))
        };
        for i in 0..5000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = (x >> 33) % 2000;
            let end = key + 1 + (x >> 20) % 24;
            if i % 3 == 2 {
                assert_eq!(s.remove(key), b.remove(&key));
            } else {
                assert_eq!(s.insert(key, end, (end, i)), b.insert(key, (end, i)));
            }
            assert_eq!(s.len(), b.len());
            if i % 97 == 0 {
                let mut got = Vec::new();
                s.for_range_mut(500, 900, |k, v| got.push((k, *v)));
                got.sort();
                let want: Vec<(u64, (u64, u64))> =
                    b.range(500..900).map(|(&k, &v)| (k, v)).collect();
                assert_eq!(got, want);
                let probe = (x >> 7) % 2000;
                let got = s.containing_mut(probe, |v| v.0).map(|v| *v);
                assert_eq!(got, want_containing(&b, probe), "{probe}");
            }
        }
        assert!(matches!(s, SectorMap::Large(_)));
        for k in 0..2030 {
            let got = s.containing_mut(k, |v| v.0).map(|v| *v);
            assert_eq!(got, want_containing(&b, k), "{k}");
        }
        for k in 0..2000 {
            s.remove(k);
        }
        assert!(s.is_empty() && matches!(s, SectorMap::Small { .. }));
    }
}
