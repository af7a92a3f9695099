//! A map from an exact start sector to a small value, for the requests in the driver: a D
//! inserts its request, its C (or a requeue) removes it by the same sector, and nothing asks
//! for a range. One open-addressed table (linear probing on a Fibonacci hash of the sector,
//! at most half full, backward-shift deletion) holds the entries themselves, so an insert or
//! a removal is a probe or two. The range-aware [`SectorMap`](super::sectormap::SectorMap)
//! took about five times the instructions for the same work.

/// Fibonacci hashing's multiplier, 2^64 / golden ratio: the product's top bits are the home.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

#[derive(Debug, Clone)]
pub struct KeyMap<V> {
    table: Vec<Option<(u64, V)>>,
    /// `table.len() - 1` (a power of two minus one).
    mask: usize,
    /// 64 - log2(table.len()).
    shift: u32,
    len: usize,
}

impl<V> Default for KeyMap<V> {
    fn default() -> Self {
        KeyMap {
            table: (0..16).map(|_| None).collect(),
            mask: 15,
            shift: 60,
            len: 0,
        }
    }
}

impl<V> KeyMap<V> {
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
            match &self.table[i] {
                None => return (i, false),
                Some((k, _)) if *k == key => return (i, true),
                Some(_) => i = (i + 1) & self.mask,
            }
        }
    }

    /// Inserts `value` at `key`, returning the value it replaced.
    #[inline]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        let (mut at, found) = self.find(key);
        if found {
            return self.table[at].replace((key, value)).map(|(_, v)| v);
        }
        if (self.len + 1) * 2 > self.table.len() {
            self.grow();
            at = self.find(key).0;
        }
        self.table[at] = Some((key, value));
        self.len += 1;
        None
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let bits = 64 - self.shift + 1;
        let old = std::mem::replace(&mut self.table, (0..1usize << bits).map(|_| None).collect());
        self.mask = (1 << bits) - 1;
        self.shift = 64 - bits;
        for (key, value) in old.into_iter().flatten() {
            let (at, _) = self.find(key);
            self.table[at] = Some((key, value));
        }
    }

    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        let (mut hole, found) = self.find(key);
        if !found {
            return None;
        }
        let (_, value) = self.table[hole].take()?;
        self.len -= 1;
        // Backward shift: pull later entries of the run into the hole when the hole lies on
        // their probe path (between their home and where they sit), so lookups that passed
        // through the removed entry still find them.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let Some((k, _)) = &self.table[j] else { break };
            let from_home = j.wrapping_sub(self.home(*k)) & self.mask;
            let from_hole = j.wrapping_sub(hole) & self.mask;
            if from_home >= from_hole {
                self.table[hole] = self.table[j].take();
                hole = j;
            }
        }
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn behaves_like_a_hashmap() {
        let mut m: KeyMap<u64> = KeyMap::default();
        let mut h: HashMap<u64, u64> = HashMap::new();
        let mut x = 42u64;
        for i in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Sectors of 4 KiB IOs in a small range, so keys collide and come back.
            let key = (x >> 33) % 3000 * 8;
            if i % 3 == 0 {
                assert_eq!(m.remove(key), h.remove(&key), "remove {key}");
            } else {
                assert_eq!(m.insert(key, i), h.insert(key, i), "insert {key}");
            }
            assert_eq!(m.len(), h.len());
        }
        for key in (0..3000).map(|k| k * 8) {
            assert_eq!(m.remove(key), h.remove(&key), "{key}");
        }
        assert!(m.is_empty());
    }
}
