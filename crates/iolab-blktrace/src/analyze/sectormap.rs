//! A map from start sector to an IO in flight, tuned for what a trace holds: a few dozen to
//! a few hundred IOs in flight, plus stale ones that linger where completions were lost or a
//! bio-based device never completes. A split bio's Q is cut into its parts (`device.rs`),
//! each found by its start or, before its cut, by the range that holds it.
//!
//! Keys are grouped by their 2^`BUCKET_BITS`-sector bucket: each bucket in use has a short
//! list of its keys with their values, and one open-addressed hash table ([`KeyMap`]: linear
//! probing, at most half full, backward-shift deletion) maps a bucket number to its list.
//! Bucket numbers are unique in the table, so a probe is nearly always one read, and a
//! bucket's list holds only its own keys. An exact lookup (G, I, M and C of an unsplit bio)
//! is a probe and a scan of one list; a range visit (D and C) or the search for the bio
//! holding a split part is a probe per bucket it spans; a C removes its bios in the same
//! pass that visits them. Lists left empty go back to a spare pool with their capacity, so a
//! steady trace allocates nothing.
//!
//! Before this, the table held the keys themselves, hashed by bucket: the keys of a busy
//! bucket (a writer's 4 KiB bios side by side) formed long clusters that every lookup of any
//! bucket hashing nearby walked, and every removal shifted back; removal alone cost ~200
//! instructions on the mixed benchmark trace, and the map half of the analysis's time.
//!
//! Ranges are visited in no particular order; every caller only sums, counts and takes minima
//! over them (exact integer arithmetic), so the order changes no result.

/// Sectors per bucket: 2^7 = 64 KiB. A 4 KiB IO lies in one bucket, a 128 KiB one in two or
/// three; a bucket holds few keys unless a writer queues many small bios side by side.
const BUCKET_BITS: u32 = 7;

use super::keymap::KeyMap;
/// One bucket's keys with their values.
#[derive(Debug, Clone)]
struct List<V> {
    items: Vec<(u64, V)>,
}

impl<V> List<V> {
    #[inline(always)]
    fn position(&self, key: u64) -> Option<usize> {
        self.items.iter().position(|&(k, _)| k == key)
    }

    #[inline(always)]
    fn swap_remove(&mut self, i: usize) -> (u64, V) {
        self.items.swap_remove(i)
    }

    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[derive(Debug, Clone)]
pub struct SectorMap<V> {
    /// Each bucket in use and its list.
    buckets: KeyMap<u32>,
    lists: Vec<List<V>>,
    /// Lists not in use (empty, capacity kept).
    spare: Vec<u32>,
    len: usize,
    /// The longest range ever inserted: no entry starting this far below a sector holds it,
    /// which bounds the search of [`SectorMap::containing_mut`].
    max_span: u64,
    /// Where the last key inserted or found sits (key, list, position): a bio's G and I
    /// nearly always come right after its Q. Checked before use (the key must still be
    /// there), so nothing needs to invalidate it.
    last: (u64, u32, u32),
}

impl<V> Default for SectorMap<V> {
    fn default() -> Self {
        SectorMap {
            buckets: KeyMap::default(),
            lists: Vec::new(),
            spare: Vec::new(),
            len: 0,
            max_span: 0,
            last: (u64::MAX, u32::MAX, 0),
        }
    }
}

impl<V> SectorMap<V> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The list of `bucket`, if it has keys.
    #[inline(always)]
    fn list_of(&self, bucket: u64) -> Option<u32> {
        self.buckets.get(bucket)
    }

    /// Inserts the entry for the range [`key`, `end`), returning the value it replaced.
    #[inline]
    pub fn insert(&mut self, key: u64, end: u64, value: V) -> Option<V> {
        self.max_span = self.max_span.max(end.saturating_sub(key));
        let bucket = key >> BUCKET_BITS;
        if let Some(li) = self.list_of(bucket) {
            let list = &mut self.lists[li as usize];
            if let Some(i) = list.position(key) {
                return Some(std::mem::replace(&mut list.items[i].1, value));
            }
            list.items.push((key, value));
            self.last = (key, li, (list.items.len() - 1) as u32);
            self.len += 1;
            return None;
        }
        let li = match self.spare.pop() {
            Some(li) => li,
            None => {
                self.lists.push(List { items: Vec::new() });
                (self.lists.len() - 1) as u32
            }
        };
        self.lists[li as usize].items.push((key, value));
        self.last = (key, li, 0);
        self.buckets.insert(bucket, li);
        self.len += 1;
        None
    }

    /// Takes an emptied bucket out, its list back to the spare pool.
    fn drop_bucket(&mut self, bucket: u64, li: u32) {
        self.buckets.remove(bucket);
        self.spare.push(li);
    }

    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        let li = self.list_of(key >> BUCKET_BITS)?;
        let list = &mut self.lists[li as usize];
        let i = list.position(key)?;
        Some(&mut list.items[i].1)
    }

    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        let bucket = key >> BUCKET_BITS;
        let li = self.list_of(bucket)?;
        let list = &mut self.lists[li as usize];
        let i = list.position(key)?;
        let (_, value) = list.swap_remove(i);
        let emptied = list.is_empty();
        self.len -= 1;
        if emptied {
            self.drop_bucket(bucket, li);
        }
        Some(value)
    }

    /// Buckets from `lo` to `hi` (inclusive) are worth walking one by one rather than
    /// scanning the whole table: a walk costs a probe or so per bucket, a scan one read per
    /// table entry plus its list.
    #[inline]
    fn walk_buckets(&self, lo: u64, hi: u64) -> bool {
        hi - lo < self.buckets.capacity() as u64 / 4
    }

    /// The entry whose range holds `sector`: the exact start if there is one, else the entry
    /// with the greatest start below `sector` whose end (`end_of`) lies beyond it. This is how
    /// btt finds the bio of a later event: every part of a split bio starts inside it.
    #[inline]
    pub fn containing_mut(&mut self, sector: u64, end_of: impl Fn(&V) -> u64) -> Option<&mut V> {
        let (key, li, i) = self.last;
        if key == sector {
            if let Some(list) = self.lists.get(li as usize) {
                if list.items.get(i as usize).is_some_and(|e| e.0 == sector) {
                    return Some(&mut self.lists[li as usize].items[i as usize].1);
                }
            }
        }
        let bucket = sector >> BUCKET_BITS;
        if let Some(li) = self.list_of(bucket) {
            if let Some(i) = self.lists[li as usize].position(sector) {
                self.last = (sector, li, i as u32);
                return Some(&mut self.lists[li as usize].items[i].1);
            }
        }
        self.containing_below(sector, end_of)
    }

    /// [`SectorMap::containing_mut`] when no entry starts at `sector`.
    #[inline(never)]
    fn containing_below(&mut self, sector: u64, end_of: impl Fn(&V) -> u64) -> Option<&mut V> {
        let (_, i, li) = self.find_below(sector, end_of)?;
        Some(&mut self.lists[li as usize].items[i].1)
    }

    /// Takes out the entry that starts below `sector` and holds it (as
    /// [`SectorMap::containing_mut`] finds one), with its key.
    pub fn take_below(&mut self, sector: u64, end_of: impl Fn(&V) -> u64) -> Option<(u64, V)> {
        let (key, _, _) = self.find_below(sector, end_of)?;
        self.remove(key).map(|v| (key, v))
    }

    /// The key, position and list of the entry with the greatest start below `sector` whose
    /// end lies beyond it.
    fn find_below(&self, sector: u64, end_of: impl Fn(&V) -> u64) -> Option<(u64, usize, u32)> {
        if sector == 0 || self.max_span <= 1 || self.len == 0 {
            return None;
        }
        // Only entries starting within the longest range below can hold the sector.
        let low = sector.saturating_sub(self.max_span);
        // The greatest key of a list that holds the sector, with its position.
        let best_in = |list: &List<V>, best: &mut Option<(u64, usize)>| {
            for (i, (key, value)) in list.items.iter().enumerate() {
                let key = *key;
                if low <= key
                    && key < sector
                    && best.is_none_or(|(k, _)| k < key)
                    && sector < end_of(value)
                {
                    *best = Some((key, i));
                }
            }
        };
        let (lo, hi) = (low >> BUCKET_BITS, (sector - 1) >> BUCKET_BITS);
        let mut found: Option<(u64, usize, u32)> = None;
        if self.walk_buckets(lo, hi) {
            // Downwards: the first bucket with a holder has the greatest.
            for b in (lo..=hi).rev() {
                let Some(li) = self.list_of(b) else { continue };
                let mut best = None;
                best_in(&self.lists[li as usize], &mut best);
                if let Some((key, i)) = best {
                    found = Some((key, i, li));
                    break;
                }
            }
        } else {
            for (_, li) in self.buckets.iter() {
                let mut best = None;
                best_in(&self.lists[li as usize], &mut best);
                if let Some((key, i)) = best {
                    if found.is_none_or(|(k, _, _)| k < key) {
                        found = Some((key, i, li));
                    }
                }
            }
        }
        found
    }

    /// Calls `f` for every entry with `from <= key < to`, in no particular order.
    #[inline]
    pub fn for_range_mut(&mut self, from: u64, to: u64, mut f: impl FnMut(u64, &mut V)) {
        if from >= to || self.len == 0 {
            return;
        }
        // One unsigned comparison per key: k - from wraps above `span` when k < from.
        let span = to - from;
        let mut visit = |list: &mut List<V>| {
            for (key, value) in list.items.iter_mut() {
                if key.wrapping_sub(from) < span {
                    f(*key, value);
                }
            }
        };
        let (lo, hi) = (from >> BUCKET_BITS, (to - 1) >> BUCKET_BITS);
        if self.walk_buckets(lo, hi) {
            for b in lo..=hi {
                if let Some(li) = self.list_of(b) {
                    visit(&mut self.lists[li as usize]);
                }
            }
        } else {
            for (_, li) in self.buckets.iter() {
                visit(&mut self.lists[li as usize]);
            }
        }
    }

    /// Removes every entry with `from <= key < to` whose value passes `pred`, handing each to
    /// `f`, in no particular order: the visit and the removal in one pass.
    #[inline]
    pub fn remove_range_if(
        &mut self,
        from: u64,
        to: u64,
        mut pred: impl FnMut(&V) -> bool,
        mut f: impl FnMut(u64, V),
    ) {
        if from >= to || self.len == 0 {
            return;
        }
        let span = to - from;
        // Removes from one list; returns how many went.
        let mut take = |list: &mut List<V>| {
            let mut removed = 0;
            let mut i = 0;
            while i < list.items.len() {
                let (key, value) = &list.items[i];
                if key.wrapping_sub(from) < span && pred(value) {
                    let (key, value) = list.swap_remove(i);
                    f(key, value);
                    removed += 1;
                } else {
                    i += 1;
                }
            }
            removed
        };
        let (lo, hi) = (from >> BUCKET_BITS, (to - 1) >> BUCKET_BITS);
        if self.walk_buckets(lo, hi) {
            for b in lo..=hi {
                let Some(li) = self.list_of(b) else { continue };
                let list = &mut self.lists[li as usize];
                self.len -= take(list);
                if list.is_empty() {
                    self.drop_bucket(b, li);
                }
            }
        } else {
            let mut emptied = Vec::new();
            for (b, li) in self.buckets.iter() {
                let list = &mut self.lists[li as usize];
                self.len -= take(list);
                if list.is_empty() {
                    emptied.push((b, li));
                }
            }
            for (b, li) in emptied {
                self.drop_bucket(b, li);
            }
        }
    }

    /// How many buckets hold keys (for tests of the layout).
    #[cfg(test)]
    fn buckets(&self) -> usize {
        self.buckets.len()
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
    /// inside, by a range; a range over more buckets than the table holds scans the table.
    #[test]
    fn entries_are_found_across_buckets() {
        let mut s: SectorMap<u64> = SectorMap::default();
        let end = |v: &u64| *v;
        for k in 0..300u64 {
            let at = k * 1_000_000;
            s.insert(at, at + 2048, at + 2048);
        }
        assert_eq!(s.buckets(), 300);
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
        // A removal over more buckets than the table holds scans it (and drops the buckets
        // it empties): every other entry goes.
        let mut gone = 0;
        s.remove_range_if(0, u64::MAX, |v| v % 2_000_000 == 2048, |_, _| gone += 1);
        assert_eq!((gone, s.len(), s.buckets()), (150, 149, 149));
        for k in 0..300u64 {
            let at = k * 1_000_000;
            assert_eq!(s.get_mut(at).is_some(), k % 2 == 1 && k != 5, "{k}");
        }
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
            if i % 211 == 0 {
                // A completion: every entry starting in [lo, hi) that ends by hi goes.
                let (lo, hi) = (x % 1900, x % 1900 + 1 + (x >> 40) % 300);
                let mut got = Vec::new();
                s.remove_range_if(lo, hi, |v| v.0 <= hi, |k, v| got.push((k, v)));
                got.sort();
                let want: Vec<(u64, (u64, u64))> = b
                    .range(lo..hi)
                    .filter(|(_, v)| v.0 <= hi)
                    .map(|(&k, &v)| (k, v))
                    .collect();
                for (k, _) in &want {
                    b.remove(k);
                }
                assert_eq!(got, want, "{lo}..{hi}");
                assert_eq!(s.len(), b.len());
            }
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
        assert!(s.is_empty() && s.buckets() == 0);
    }
}
