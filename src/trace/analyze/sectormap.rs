//! A map from start sector to an IO in flight, tuned for what a trace holds: usually a few
//! dozen IOs in flight, sometimes thousands — mostly stale ones: the Q of a split bio is never
//! completed (each part's C covers only the part, as in btt), and lost completions and
//! bio-based devices leave theirs too. A mixed trace (random IO beside a buffered writer whose
//! writeback splits) carried about 2,000 such entries and a B-tree of them took 43% of the
//! analysis' instructions.
//!
//! So the map has two tiers. Recent entries live in the *hot* tier, two unsorted vectors
//! (keys apart from values): a lookup is a branch-free, vectorised scan of at most `HOT`
//! keys, and a removal a swap with the last entry. When the hot tier passes `HOT` entries, the
//! older half moves to the *cold* tier: a B-tree of keys to slot numbers with the values in a
//! slab. A count of cold keys per 2^`BUCKET_BITS`-sector bucket (a small hash table) tells
//! nearly every lookup that nothing cold lies near its sectors, so the B-tree is walked only
//! where cold entries are. Both tiers together behave as one map: the same keys, the same
//! answers, whatever tier an entry sits in (tested against a `BTreeMap`).
//!
//! Ranges are visited in no particular order; every caller only sums, counts and takes minima
//! over them (exact integer arithmetic), so the order changes no result.

use std::collections::BTreeMap;

use super::seek::FastMap;

/// Most entries of the hot tier before its older half moves to the cold one.
const HOT: usize = 64;
/// Cold keys are counted per bucket of 2^10 sectors (512 KiB).
const BUCKET_BITS: u32 = 10;
/// A range spanning more buckets than this asks the B-tree at once.
const MAX_BUCKET_PROBES: u64 = 8;

#[derive(Debug, Clone)]
pub struct SectorMap<V> {
    keys: Vec<u64>,
    vals: Vec<V>,
    /// Insertion number of each hot entry (which half is older).
    ages: Vec<u64>,
    inserted: u64,
    cold: BTreeMap<u64, u32>,
    slots: Vec<Option<V>>,
    free: Vec<u32>,
    /// Cold keys per bucket (`key >> BUCKET_BITS`); buckets without any are absent.
    buckets: FastMap<u64, u32>,
    /// The longest range ever inserted: no entry starting this far below a sector holds it,
    /// which bounds the search of [`SectorMap::containing_mut`].
    max_span: u64,
}

impl<V> Default for SectorMap<V> {
    fn default() -> Self {
        SectorMap {
            keys: Vec::new(),
            vals: Vec::new(),
            ages: Vec::new(),
            inserted: 0,
            cold: BTreeMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            buckets: FastMap::default(),
            max_span: 0,
        }
    }
}

impl<V> SectorMap<V> {
    pub fn len(&self) -> usize {
        self.keys.len() + self.cold.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether cold keys may lie in [from, to] (inclusive); false means surely none.
    #[inline]
    fn cold_near(&self, from: u64, to: u64) -> bool {
        if self.cold.is_empty() {
            return false;
        }
        let (lo, hi) = (from >> BUCKET_BITS, to >> BUCKET_BITS);
        hi - lo >= MAX_BUCKET_PROBES || (lo..=hi).any(|b| self.buckets.contains_key(&b))
    }

    /// The slot of a cold key.
    #[inline]
    fn cold_slot(&self, key: u64) -> Option<u32> {
        if !self.cold_near(key, key) {
            return None;
        }
        self.cold.get(&key).copied()
    }

    fn slot_mut(&mut self, slot: u32) -> &mut V {
        self.slots[slot as usize]
            .as_mut()
            .expect("a cold key's slot holds a value")
    }

    /// Inserts the entry for the range [`key`, `end`), returning the value it replaced.
    pub fn insert(&mut self, key: u64, end: u64, value: V) -> Option<V> {
        self.max_span = self.max_span.max(end.saturating_sub(key));
        if let Some(i) = position(&self.keys, key) {
            return Some(std::mem::replace(&mut self.vals[i], value));
        }
        if let Some(slot) = self.cold_slot(key) {
            return self.slots[slot as usize].replace(value);
        }
        self.keys.push(key);
        self.vals.push(value);
        self.ages.push(self.inserted);
        self.inserted += 1;
        if self.keys.len() > HOT {
            self.cool();
        }
        None
    }

    /// Moves the entry at `key` to the cold tier at once, when it is hot: for an entry the
    /// caller knows will linger (the Q of a split bio, which no C ever covers), so it does not
    /// crowd the hot tier's scans. Where an entry sits changes no answer.
    pub fn demote(&mut self, key: u64) {
        if let Some(i) = position(&self.keys, key) {
            self.keys.swap_remove(i);
            self.ages.swap_remove(i);
            let value = self.vals.swap_remove(i);
            self.put_cold(key, value);
        }
    }

    /// Stores an entry in the cold tier (its key is in neither tier).
    fn put_cold(&mut self, key: u64, value: V) {
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
        self.cold.insert(key, slot);
        *self.buckets.entry(key >> BUCKET_BITS).or_insert(0) += 1;
    }

    /// Moves the older half of the hot tier to the cold one.
    fn cool(&mut self) {
        let young = self.inserted - (HOT / 2) as u64;
        let mut i = self.keys.len();
        while i > 0 {
            i -= 1;
            if self.ages[i] >= young {
                continue;
            }
            let key = self.keys.swap_remove(i);
            let value = self.vals.swap_remove(i);
            self.ages.swap_remove(i);
            self.put_cold(key, value);
        }
    }

    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        if let Some(i) = position(&self.keys, key) {
            return Some(&mut self.vals[i]);
        }
        let slot = self.cold_slot(key)?;
        Some(self.slot_mut(slot))
    }

    pub fn remove(&mut self, key: u64) -> Option<V> {
        if let Some(i) = position(&self.keys, key) {
            self.keys.swap_remove(i);
            self.ages.swap_remove(i);
            return Some(self.vals.swap_remove(i));
        }
        if !self.cold_near(key, key) {
            return None;
        }
        let slot = self.cold.remove(&key)?;
        let bucket = key >> BUCKET_BITS;
        if let Some(n) = self.buckets.get_mut(&bucket) {
            *n -= 1;
            if *n == 0 {
                self.buckets.remove(&bucket);
            }
        }
        let value = self.slots[slot as usize].take();
        self.free.push(slot);
        if self.cold.is_empty() {
            // Nothing cold left: give the slab's memory back.
            self.slots = Vec::new();
            self.free = Vec::new();
        }
        value
    }

    /// The entry whose range holds `sector`: the exact start if there is one, else the entry
    /// with the greatest start below `sector` whose end (`end_of`) lies beyond it. This is how
    /// btt finds the bio of a later event: every part of a split bio starts inside it.
    pub fn containing_mut(&mut self, sector: u64, end_of: impl Fn(&V) -> u64) -> Option<&mut V> {
        if let Some(i) = position(&self.keys, sector) {
            return Some(&mut self.vals[i]);
        }
        if let Some(slot) = self.cold_slot(sector) {
            return Some(self.slot_mut(slot));
        }
        let mut hot: Option<usize> = None;
        for (i, (&k, v)) in self.keys.iter().zip(self.vals.iter()).enumerate() {
            if k < sector && sector < end_of(v) && hot.is_none_or(|b| self.keys[b] < k) {
                hot = Some(i);
            }
        }
        // Only entries starting within the longest range below can hold the sector.
        let low = sector.saturating_sub(self.max_span);
        let cold = if self.cold_near(low, sector) {
            let slots = &self.slots;
            self.cold
                .range(low..sector)
                .rev()
                .find(|(_, &slot)| {
                    slots[slot as usize]
                        .as_ref()
                        .is_some_and(|v| sector < end_of(v))
                })
                .map(|(&k, &slot)| (k, slot))
        } else {
            None
        };
        match (hot, cold) {
            (Some(i), Some((k, slot))) if k > self.keys[i] => Some(self.slot_mut(slot)),
            (Some(i), _) => Some(&mut self.vals[i]),
            (None, Some((_, slot))) => Some(self.slot_mut(slot)),
            (None, None) => None,
        }
    }

    /// Calls `f` for every entry with `from <= key < to`, in no particular order.
    pub fn for_range_mut(&mut self, from: u64, to: u64, mut f: impl FnMut(u64, &mut V)) {
        if from >= to {
            return;
        }
        // One unsigned comparison per key: k - from wraps above `span` when k < from.
        let span = to - from;
        for (&k, v) in self.keys.iter().zip(self.vals.iter_mut()) {
            if k.wrapping_sub(from) < span {
                f(k, v);
            }
        }
        if self.cold_near(from, to - 1) {
            for (&k, &slot) in self.cold.range(from..to) {
                if let Some(v) = self.slots[slot as usize].as_mut() {
                    f(k, v);
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
        assert!(!large.cold.is_empty());
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

    /// Cold entries far from each other: lookups near none of them skip the B-tree (their
    /// bucket is empty) and still find every entry, hot or cold.
    #[test]
    fn cold_entries_are_found_across_buckets() {
        let mut s: SectorMap<u64> = SectorMap::default();
        let end = |v: &u64| *v;
        for k in 0..300u64 {
            let at = k * 1_000_000;
            s.insert(at, at + 2048, at + 2048);
        }
        assert!(s.cold.len() > 200 && s.keys.len() <= HOT);
        for k in 0..300u64 {
            let at = k * 1_000_000;
            assert_eq!(s.get_mut(at).copied(), Some(at + 2048), "{k}");
            assert_eq!(s.containing_mut(at + 2047, end).copied(), Some(at + 2048));
            assert_eq!(s.containing_mut(at + 2048, end), None);
            let mut seen = Vec::new();
            s.for_range_mut(at, at + 1, |key, _| seen.push(key));
            assert_eq!(seen, [at]);
        }
        assert_eq!(s.insert(5_000_000, 5_000_008, 7), Some(5_002_048));
        assert_eq!(s.remove(5_000_000), Some(7));
        assert_eq!(s.remove(5_000_000), None);
        assert_eq!(s.len(), 299);
        let mut all = 0;
        s.for_range_mut(0, u64::MAX, |_, _| all += 1);
        assert_eq!(all, 299);
    }

    /// A demoted entry leaves the hot tier at once and is found as before, by its key, by
    /// a sector inside its range, and by a range holding it.
    #[test]
    fn demoted_entries_stay_in_the_map() {
        let mut s: SectorMap<u64> = SectorMap::default();
        let end = |v: &u64| *v;
        s.insert(100, 356, 356);
        s.insert(1000, 1008, 1008);
        s.demote(100);
        s.demote(5); // absent: nothing happens
        assert_eq!((s.keys.len(), s.cold.len(), s.len()), (1, 1, 2));
        assert_eq!(s.containing_mut(228, end).copied(), Some(356));
        assert_eq!(s.get_mut(100).copied(), Some(356));
        let mut seen = Vec::new();
        s.for_range_mut(0, 2000, |k, _| seen.push(k));
        seen.sort_unstable();
        assert_eq!(seen, [100, 1000]);
        assert_eq!(s.insert(100, 108, 108), Some(356));
        assert_eq!(s.remove(100), Some(108));
        assert_eq!(s.len(), 1);
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
            } else if i % 11 == 4 {
                // Demoting (a split bio's Q) moves an entry, never changes the map.
                s.demote(key);
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
        assert!(!s.cold.is_empty() && !s.keys.is_empty());
        for k in 0..2030 {
            let got = s.containing_mut(k, |v| v.0).map(|v| *v);
            assert_eq!(got, want_containing(&b, k), "{k}");
        }
        for k in 0..2000 {
            s.remove(k);
        }
        assert!(s.is_empty() && s.buckets.is_empty());
    }
}
