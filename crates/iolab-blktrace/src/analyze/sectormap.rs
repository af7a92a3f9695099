//! A map from start sector to an IO in flight, tuned for what a trace holds: a few dozen to
//! a few hundred IOs in flight, plus stale ones that linger: the Q of a split bio is never
//! completed (each part's C covers only the part, as in btt), and lost completions and
//! bio-based devices leave theirs too. A mixed trace (random IO beside a buffered writer
//! whose writeback splits) keeps hundreds of bios live and about 2,000 stale split Qs.
//!
//! Every value sits in a slab; one open-addressed hash table of (start sector, slot) pairs
//! indexes it. The table hashes a key's 2^`BUCKET_BITS`-sector bucket, not the key itself,
//! and probes linearly, so every key of a bucket lies in the run of occupied entries that
//! starts at the bucket's home: an exact lookup (nearly every event's: G, I, M and C of an
//! unsplit bio, every D and C of the driver's view) walks that run, and so does each bucket
//! of a range visit (D and C) or of the containing-range search of a split bio's parts. So
//! a lookup or an insert is one short probe whatever the number in flight, and a range
//! visit one per bucket it spans. The table is kept at most half full and deletes by
//! backward shift (no tombstones). It replaced two general hash maps (start sector to slot,
//! bucket to a linked list through the slab), whose four lookups per insert and remove cost
//! ~175 instructions each on that trace, and before them a scanned vector in front of a
//! B-tree (~700 per event). The table follows the most entries ever live at once.
//!
//! Ranges are visited in no particular order; every caller only sums, counts and takes minima
//! over them (exact integer arithmetic), so the order changes no result.

/// Sectors per bucket: 2^7 = 64 KiB. A 4 KiB IO lies in one bucket, a 128 KiB one in two or
/// three; a bucket holds few keys unless a writer queues many small bios side by side.
const BUCKET_BITS: u32 = 7;
/// The slot of an empty table entry.
const NIL: u32 = u32::MAX;
/// Fibonacci hashing's multiplier, 2^64 / golden ratio: the product's top bits are the home.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

#[derive(Debug, Clone, Copy)]
struct Entry {
    key: u64,
    slot: u32,
}

const EMPTY: Entry = Entry { key: 0, slot: NIL };

#[derive(Debug, Clone)]
pub struct SectorMap<V> {
    values: Vec<Option<V>>,
    free: Vec<u32>,
    table: Vec<Entry>,
    /// `table.len() - 1` (a power of two minus one).
    mask: usize,
    /// 64 - log2(table.len()).
    shift: u32,
    len: usize,
    /// The longest range ever inserted: no entry starting this far below a sector holds it,
    /// which bounds the search of [`SectorMap::containing_mut`].
    max_span: u64,
}

impl<V> Default for SectorMap<V> {
    fn default() -> Self {
        SectorMap {
            values: Vec::new(),
            free: Vec::new(),
            table: vec![EMPTY; 16],
            mask: 15,
            shift: 60,
            len: 0,
            max_span: 0,
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

    /// Where a bucket's run starts.
    #[inline(always)]
    fn home(&self, bucket: u64) -> usize {
        (bucket.wrapping_mul(GOLDEN) >> self.shift) as usize
    }

    /// The table position of `key`, or of the empty entry where it would go.
    #[inline(always)]
    fn find(&self, key: u64) -> (usize, bool) {
        let mut i = self.home(key >> BUCKET_BITS);
        loop {
            let e = self.table[i];
            if e.slot == NIL {
                return (i, false);
            }
            if e.key == key {
                return (i, true);
            }
            i = (i + 1) & self.mask;
        }
    }

    #[inline(always)]
    fn value_mut(&mut self, slot: u32) -> &mut V {
        self.values[slot as usize]
            .as_mut()
            .expect("an indexed slot holds a value")
    }

    /// Inserts the entry for the range [`key`, `end`), returning the value it replaced.
    #[inline]
    pub fn insert(&mut self, key: u64, end: u64, value: V) -> Option<V> {
        self.max_span = self.max_span.max(end.saturating_sub(key));
        let (mut at, found) = self.find(key);
        if found {
            let slot = self.table[at].slot;
            return self.values[slot as usize].replace(value);
        }
        let slot = match self.free.pop() {
            Some(slot) => {
                self.values[slot as usize] = Some(value);
                slot
            }
            None => {
                self.values.push(Some(value));
                (self.values.len() - 1) as u32
            }
        };
        if (self.len + 1) * 2 > self.table.len() {
            self.grow();
            at = self.find(key).0;
        }
        self.table[at] = Entry { key, slot };
        self.len += 1;
        None
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let bits = 64 - self.shift + 1;
        let old = std::mem::replace(&mut self.table, vec![EMPTY; 1 << bits]);
        self.mask = (1 << bits) - 1;
        self.shift = 64 - bits;
        for e in old {
            if e.slot != NIL {
                let (at, _) = self.find(e.key);
                self.table[at] = e;
            }
        }
    }

    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        match self.find(key) {
            (at, true) => {
                let slot = self.table[at].slot;
                Some(self.value_mut(slot))
            }
            _ => None,
        }
    }

    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        let (mut hole, found) = self.find(key);
        if !found {
            return None;
        }
        let slot = self.table[hole].slot;
        // Backward shift: pull later entries of the run into the hole when the hole lies on
        // their probe path (between their home and where they sit), so lookups that passed
        // through the removed entry still find them.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let e = self.table[j];
            if e.slot == NIL {
                break;
            }
            let from_home = j.wrapping_sub(self.home(e.key >> BUCKET_BITS)) & self.mask;
            let from_hole = j.wrapping_sub(hole) & self.mask;
            if from_home >= from_hole {
                self.table[hole] = e;
                hole = j;
            }
        }
        self.table[hole] = EMPTY;
        self.len -= 1;
        self.free.push(slot);
        self.values[slot as usize].take()
    }

    /// Buckets from `lo` to `hi` (inclusive) are worth walking one by one rather than
    /// scanning the whole table: a walk costs a probe or so per bucket, a scan one read per
    /// table entry, and the table stays as large as the most entries ever live (a bound by
    /// the entries live now scanned thousands of empty entries whenever the queue ran low).
    #[inline]
    fn walk_buckets(&self, lo: u64, hi: u64) -> bool {
        hi - lo < self.table.len() as u64 / 4
    }

    /// The slots of bucket `b`'s keys, with their keys, through `f`.
    #[inline(always)]
    fn bucket_keys(&self, b: u64, mut f: impl FnMut(u64, u32)) {
        let mut i = self.home(b);
        loop {
            let e = self.table[i];
            if e.slot == NIL {
                return;
            }
            if e.key >> BUCKET_BITS == b {
                f(e.key, e.slot);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The entry whose range holds `sector`: the exact start if there is one, else the entry
    /// with the greatest start below `sector` whose end (`end_of`) lies beyond it. This is how
    /// btt finds the bio of a later event: every part of a split bio starts inside it.
    #[inline]
    pub fn containing_mut(&mut self, sector: u64, end_of: impl Fn(&V) -> u64) -> Option<&mut V> {
        if let (at, true) = self.find(sector) {
            let slot = self.table[at].slot;
            return Some(self.value_mut(slot));
        }
        self.containing_below(sector, end_of)
    }

    /// [`SectorMap::containing_mut`] when no entry starts at `sector`.
    #[inline(never)]
    fn containing_below(&mut self, sector: u64, end_of: impl Fn(&V) -> u64) -> Option<&mut V> {
        if sector == 0 || self.max_span <= 1 || self.len == 0 {
            return None;
        }
        // Only entries starting within the longest range below can hold the sector.
        let low = sector.saturating_sub(self.max_span);
        let values = &self.values;
        let holds = |key: u64, slot: u32| {
            low <= key
                && key < sector
                && values[slot as usize]
                    .as_ref()
                    .is_some_and(|v| sector < end_of(v))
        };
        let (lo, hi) = (low >> BUCKET_BITS, (sector - 1) >> BUCKET_BITS);
        let mut best: Option<(u64, u32)> = None;
        if self.walk_buckets(lo, hi) {
            // Downwards: the first bucket with a holder has the greatest.
            for b in (lo..=hi).rev() {
                self.bucket_keys(b, |key, slot| {
                    if holds(key, slot) && best.is_none_or(|(k, _)| k < key) {
                        best = Some((key, slot));
                    }
                });
                if best.is_some() {
                    break;
                }
            }
        } else {
            for e in &self.table {
                if e.slot != NIL && holds(e.key, e.slot) && best.is_none_or(|(k, _)| k < e.key) {
                    best = Some((e.key, e.slot));
                }
            }
        }
        let (_, slot) = best?;
        Some(self.value_mut(slot))
    }

    /// Calls `f` for every entry with `from <= key < to`, in no particular order.
    #[inline]
    pub fn for_range_mut(&mut self, from: u64, to: u64, mut f: impl FnMut(u64, &mut V)) {
        if from >= to || self.len == 0 {
            return;
        }
        // One unsigned comparison per key: k - from wraps above `span` when k < from.
        let span = to - from;
        let (lo, hi) = (from >> BUCKET_BITS, (to - 1) >> BUCKET_BITS);
        let walk = self.walk_buckets(lo, hi);
        let (table, values) = (&self.table, &mut self.values);
        let mut visit = |key: u64, slot: u32| {
            if key.wrapping_sub(from) < span {
                if let Some(v) = values[slot as usize].as_mut() {
                    f(key, v);
                }
            }
        };
        if walk {
            for b in lo..=hi {
                let mut i = (b.wrapping_mul(GOLDEN) >> self.shift) as usize;
                loop {
                    let e = table[i];
                    if e.slot == NIL {
                        break;
                    }
                    if e.key >> BUCKET_BITS == b {
                        visit(e.key, e.slot);
                    }
                    i = (i + 1) & self.mask;
                }
            }
        } else {
            for e in table {
                if e.slot != NIL {
                    visit(e.key, e.slot);
                }
            }
        }
    }

    /// How many buckets hold keys (for tests of the layout).
    #[cfg(test)]
    fn buckets(&self) -> usize {
        let mut b: Vec<u64> = self
            .table
            .iter()
            .filter(|e| e.slot != NIL)
            .map(|e| e.key >> BUCKET_BITS)
            .collect();
        b.sort_unstable();
        b.dedup();
        b.len()
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
        assert!(s.is_empty() && s.buckets() == 0);
    }
}
