//! An open-addressed hash table from `u64` keys to `u64` values, for the analysis' integer
//! tables: the in-flight map's (`sectormap`) start sector to slot and range bucket to the
//! head of its list, and the counts of large seek distances (`seek`). Those lookups are a
//! few per event, so their cost is most of the matcher's; a general hash map
//! (SwissTable groups, a `Hasher` state, entry objects) spent ~40 instructions on each where
//! this spends ~10: Fibonacci hashing (the product's top bits: sectors are mostly multiples
//! of 8, which a low-bits hash would cluster), linear probing in one array of 16-byte
//! entries kept at most half full, and deletion by backward shift, so no tombstones pile up
//! as IOs come and go. It grows with the most keys ever held at once and never shrinks.

/// The value of an empty entry: not a value callers store (slot numbers and counts stay far
/// below it).
const EMPTY: u64 = u64::MAX;
/// The multiplier of Fibonacci hashing, 2^64 / golden ratio.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

#[derive(Debug, Clone, Copy)]
struct Entry {
    key: u64,
    val: u64,
}

#[derive(Debug, Clone)]
pub struct IntTable {
    entries: Vec<Entry>,
    /// `entries.len() - 1` (a power of two minus one).
    mask: usize,
    /// 64 - log2(entries.len()): the hash is the product's top bits.
    shift: u32,
    len: usize,
}

impl Default for IntTable {
    fn default() -> Self {
        IntTable::with_bits(4)
    }
}

impl IntTable {
    fn with_bits(bits: u32) -> Self {
        IntTable {
            entries: vec![Entry { key: 0, val: EMPTY }; 1 << bits],
            mask: (1 << bits) - 1,
            shift: 64 - bits,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(GOLDEN) >> self.shift) as usize
    }

    /// The position of `key`, or of the empty entry where it would go.
    #[inline(always)]
    fn find(&self, key: u64) -> (usize, bool) {
        let mut i = self.home(key);
        loop {
            let e = self.entries[i];
            if e.val == EMPTY {
                return (i, false);
            }
            if e.key == key {
                return (i, true);
            }
            i = (i + 1) & self.mask;
        }
    }

    #[inline]
    pub fn get(&self, key: u64) -> Option<u64> {
        match self.find(key) {
            (i, true) => Some(self.entries[i].val),
            _ => None,
        }
    }

    /// Sets `key` to `val`, returning the value it had.
    #[inline]
    pub fn insert(&mut self, key: u64, val: u64) -> Option<u64> {
        debug_assert!(val != EMPTY);
        let (i, found) = self.find(key);
        if found {
            return Some(std::mem::replace(&mut self.entries[i].val, val));
        }
        if (self.len + 1) * 2 > self.entries.len() {
            self.grow();
            let (i, _) = self.find(key);
            self.entries[i] = Entry { key, val };
        } else {
            self.entries[i] = Entry { key, val };
        }
        self.len += 1;
        None
    }

    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<u64> {
        let (mut hole, found) = self.find(key);
        if !found {
            return None;
        }
        let val = self.entries[hole].val;
        // Backward shift: pull later entries of the run into the hole when the hole lies on
        // their probe path (between their home and where they sit), so lookups that passed
        // through the removed entry still find them.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let e = self.entries[j];
            if e.val == EMPTY {
                break;
            }
            let from_home = j.wrapping_sub(self.home(e.key)) & self.mask;
            let from_hole = j.wrapping_sub(hole) & self.mask;
            if from_home >= from_hole {
                self.entries[hole] = e;
                hole = j;
            }
        }
        self.entries[hole].val = EMPTY;
        self.len -= 1;
        Some(val)
    }

    /// Adds `n` to the value of `key` (0 when absent): a counter.
    #[inline]
    pub fn add(&mut self, key: u64, n: u64) {
        let (i, found) = self.find(key);
        if found {
            self.entries[i].val += n;
        } else {
            self.insert(key, n);
        }
    }

    /// Every (key, value), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.entries
            .iter()
            .filter(|e| e.val != EMPTY)
            .map(|e| (e.key, e.val))
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let bits = 64 - self.shift + 1;
        let old = std::mem::replace(self, IntTable::with_bits(bits));
        for e in old.entries {
            if e.val != EMPTY {
                let (i, _) = self.find(e.key);
                self.entries[i] = e;
                self.len += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Random inserts, replacements, lookups and removals (keys from a small range, so runs
    /// of neighbours form and removals shift them) agree with a HashMap throughout.
    #[test]
    fn agrees_with_a_hashmap() {
        let mut s = IntTable::default();
        let mut m: HashMap<u64, u64> = HashMap::new();
        let mut x = 7u64;
        for i in 0..200_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Multiples of 8 over a range that fills and drains the table as it goes.
            let span = if (i / 20_000) % 2 == 0 { 3000 } else { 300 };
            let key = ((x >> 33) % span) * 8;
            match (x >> 20) % 4 {
                0 => assert_eq!(s.insert(key, i), m.insert(key, i)),
                3 => {
                    s.add(key, 2);
                    *m.entry(key).or_insert(0) += 2;
                }
                1 => assert_eq!(s.remove(key), m.remove(&key)),
                _ => assert_eq!(s.get(key), m.get(&key).copied()),
            }
            assert_eq!(s.len(), m.len());
        }
        for (&k, &v) in &m {
            assert_eq!(s.get(k), Some(v));
        }
        let mut listed: Vec<(u64, u64)> = s.iter().collect();
        let mut want: Vec<(u64, u64)> = m.iter().map(|(&k, &v)| (k, v)).collect();
        listed.sort_unstable();
        want.sort_unstable();
        assert_eq!(listed, want);
        let keys: Vec<u64> = m.keys().copied().collect();
        for k in keys {
            assert_eq!(s.remove(k), m.remove(&k));
        }
        assert!(s.is_empty());
        assert_eq!(s.get(0), None);
    }

    /// Keys that share a home (the worst case of linear probing) are still found and removed.
    #[test]
    fn colliding_keys() {
        let mut s = IntTable::default();
        let mut colliding = Vec::new();
        let mut k = 0u64;
        while colliding.len() < 6 {
            if s.home(k) == s.home(0) {
                colliding.push(k);
            }
            k += 1;
        }
        for (i, &k) in colliding.iter().enumerate() {
            assert_eq!(s.insert(k, i as u64), None);
        }
        assert_eq!(s.remove(colliding[0]), Some(0));
        for (i, &k) in colliding.iter().enumerate().skip(1) {
            assert_eq!(s.get(k), Some(i as u64));
        }
        assert_eq!(s.insert(u64::MAX, 9), None);
        assert_eq!(s.get(u64::MAX), Some(9));
    }
}
