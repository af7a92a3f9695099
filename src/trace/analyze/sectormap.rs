//! A map from start sector to an IO in flight, tuned for what a trace holds: a few dozen to
//! a few hundred IOs in flight, plus stale ones that linger: the Q of a split bio is never
//! completed (each part's C covers only the part, as in btt), and lost completions and
//! bio-based devices leave theirs too. A mixed trace (random IO beside a buffered writer
//! whose writeback splits) keeps hundreds of bios live and about 2,000 stale split Qs.
//!
//! Every entry sits in a slab. Two hash tables index it: start sector to slot, for the exact
//! lookups that are nearly every event's (G, I, M and C of an unsplit bio, every D and C of
//! the driver's view), and a coarse one from a 2^`BUCKET_BITS`-sector bucket to a list of the
//! slots whose keys fall in it (linked through the slab), for the range visits of D and C and
//! the containing-range search of a split bio's parts. So a lookup costs one hash probe
//! whatever the number in flight, and a range visit a probe per bucket it spans plus the
//! entries in those buckets. (It replaced a scanned vector of recent entries in front of a
//! B-tree, which cost ~700 instructions per event on that trace: a 64-entry hot tier
//! overflowed all the time.) The tables' memory follows the most entries ever live at once.
//!
//! Ranges are visited in no particular order; every caller only sums, counts and takes minima
//! over them (exact integer arithmetic), so the order changes no result.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Sectors per bucket of the range index: 2^7 = 64 KiB. A 4 KiB IO lies in one bucket, a
/// 128 KiB one in two or three; a bucket holds few keys unless a writer queues many small
/// bios side by side.
const BUCKET_BITS: u32 = 7;
/// No slot (end of a bucket's list).
const NIL: u32 = u32::MAX;

/// A multiplicative (Fx-style) hasher for sector numbers. The product's high bits are folded
/// into the low ones: sectors are mostly multiples of 8, and the table picks its home slot
/// from the low bits, which a plain product leaves zero.
#[derive(Default)]
pub struct SectorHasher(u64);

impl Hasher for SectorHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

type SectorTable = HashMap<u64, u32, BuildHasherDefault<SectorHasher>>;

#[derive(Debug, Clone)]
struct Slot<V> {
    key: u64,
    /// Neighbours in the bucket's list.
    prev: u32,
    next: u32,
    /// None when the slot is free.
    value: Option<V>,
}

#[derive(Debug, Clone)]
pub struct SectorMap<V> {
    slots: Vec<Slot<V>>,
    free: Vec<u32>,
    /// Start sector to slot.
    exact: SectorTable,
    /// Bucket (`key >> BUCKET_BITS`) to the first slot of its list; empty buckets are absent.
    heads: SectorTable,
    /// The longest range ever inserted: no entry starting this far below a sector holds it,
    /// which bounds the search of [`SectorMap::containing_mut`].
    max_span: u64,
}

impl<V> Default for SectorMap<V> {
    fn default() -> Self {
        SectorMap {
            slots: Vec::new(),
            free: Vec::new(),
            exact: SectorTable::default(),
            heads: SectorTable::default(),
            max_span: 0,
        }
    }
}

impl<V> SectorMap<V> {
    pub fn len(&self) -> usize {
        self.exact.len()
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty()
    }

    fn value_mut(&mut self, slot: u32) -> &mut V {
        self.slots[slot as usize]
            .value
            .as_mut()
            .expect("an indexed slot holds a value")
    }

    /// Inserts the entry for the range [`key`, `end`), returning the value it replaced.
    pub fn insert(&mut self, key: u64, end: u64, value: V) -> Option<V> {
        self.max_span = self.max_span.max(end.saturating_sub(key));
        let vacant = match self.exact.entry(key) {
            Entry::Occupied(o) => {
                let slot = *o.get();
                return self.slots[slot as usize].value.replace(value);
            }
            Entry::Vacant(v) => v,
        };
        let next = *self.heads.get(&(key >> BUCKET_BITS)).unwrap_or(&NIL);
        let entry = Slot {
            key,
            prev: NIL,
            next,
            value: Some(value),
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = entry;
                slot
            }
            None => {
                self.slots.push(entry);
                (self.slots.len() - 1) as u32
            }
        };
        vacant.insert(slot);
        if next != NIL {
            self.slots[next as usize].prev = slot;
        }
        self.heads.insert(key >> BUCKET_BITS, slot);
        None
    }

    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        let slot = *self.exact.get(&key)?;
        Some(self.value_mut(slot))
    }

    pub fn remove(&mut self, key: u64) -> Option<V> {
        let slot = self.exact.remove(&key)?;
        let Slot {
            prev, next, value, ..
        } = std::mem::replace(
            &mut self.slots[slot as usize],
            Slot {
                key: 0,
                prev: NIL,
                next: NIL,
                value: None,
            },
        );
        if prev != NIL {
            self.slots[prev as usize].next = next;
        } else if next != NIL {
            self.heads.insert(key >> BUCKET_BITS, next);
        } else {
            self.heads.remove(&(key >> BUCKET_BITS));
        }
        if next != NIL {
            self.slots[next as usize].prev = prev;
        }
        self.free.push(slot);
        value
    }

    /// Buckets from `lo` to `hi` (inclusive) are worth walking one by one rather than every
    /// slot: fewer of them than entries.
    #[inline]
    fn walk_buckets(&self, lo: u64, hi: u64) -> bool {
        hi - lo < self.exact.len() as u64
    }

    /// The entry whose range holds `sector`: the exact start if there is one, else the entry
    /// with the greatest start below `sector` whose end (`end_of`) lies beyond it. This is how
    /// btt finds the bio of a later event: every part of a split bio starts inside it.
    pub fn containing_mut(&mut self, sector: u64, end_of: impl Fn(&V) -> u64) -> Option<&mut V> {
        if let Some(&slot) = self.exact.get(&sector) {
            return Some(self.value_mut(slot));
        }
        if sector == 0 || self.max_span <= 1 || self.exact.is_empty() {
            return None;
        }
        // Only entries starting within the longest range below can hold the sector.
        let low = sector.saturating_sub(self.max_span);
        let holds = |s: &Slot<V>| {
            low <= s.key && s.key < sector && s.value.as_ref().is_some_and(|v| sector < end_of(v))
        };
        let (lo, hi) = (low >> BUCKET_BITS, (sector - 1) >> BUCKET_BITS);
        let mut best: Option<(u64, u32)> = None;
        if self.walk_buckets(lo, hi) {
            // Downwards: the first bucket with a holder has the greatest.
            for b in (lo..=hi).rev() {
                let mut at = *self.heads.get(&b).unwrap_or(&NIL);
                while at != NIL {
                    let s = &self.slots[at as usize];
                    if holds(s) && best.is_none_or(|(k, _)| k < s.key) {
                        best = Some((s.key, at));
                    }
                    at = s.next;
                }
                if best.is_some() {
                    break;
                }
            }
        } else {
            for (at, s) in self.slots.iter().enumerate() {
                if holds(s) && best.is_none_or(|(k, _)| k < s.key) {
                    best = Some((s.key, at as u32));
                }
            }
        }
        let (_, slot) = best?;
        Some(self.value_mut(slot))
    }

    /// Calls `f` for every entry with `from <= key < to`, in no particular order.
    pub fn for_range_mut(&mut self, from: u64, to: u64, mut f: impl FnMut(u64, &mut V)) {
        if from >= to || self.exact.is_empty() {
            return;
        }
        // One unsigned comparison per key: k - from wraps above `span` when k < from.
        let span = to - from;
        let (lo, hi) = (from >> BUCKET_BITS, (to - 1) >> BUCKET_BITS);
        if self.walk_buckets(lo, hi) {
            for b in lo..=hi {
                let mut at = *self.heads.get(&b).unwrap_or(&NIL);
                while at != NIL {
                    let s = &mut self.slots[at as usize];
                    if s.key.wrapping_sub(from) < span {
                        if let Some(v) = s.value.as_mut() {
                            f(s.key, v);
                        }
                    }
                    at = s.next;
                }
            }
        } else {
            for s in &mut self.slots {
                if s.key.wrapping_sub(from) < span {
                    if let Some(v) = s.value.as_mut() {
                        f(s.key, v);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

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

    /// Entries far from each other, each alone in its bucket: found by key, by a sector
    /// inside, by a range; a range over more buckets than entries scans the slab instead.
    #[test]
    fn entries_are_found_across_buckets() {
        let mut s: SectorMap<u64> = SectorMap::default();
        let end = |v: &u64| *v;
        for k in 0..300u64 {
            let at = k * 1_000_000;
            s.insert(at, at + 2048, at + 2048);
        }
        assert_eq!(s.heads.len(), 300);
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
                assert_eq!(s.get_mut(key).map(|v| *v), b.get(&key).copied());
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
        for k in 0..2030 {
            let got = s.containing_mut(k, |v| v.0).map(|v| *v);
            assert_eq!(got, want_containing(&b, k), "{k}");
        }
        for k in 0..2000 {
            s.remove(k);
        }
        assert!(s.is_empty() && s.heads.is_empty());
    }
}
