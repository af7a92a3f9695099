//! A map from an exact 64-bit key to a small value: the requests in the driver by start
//! sector (a D inserts its request, its C or a requeue removes it by the same sector, nothing
//! asks for a range), and the [`SectorMap`](super::sectormap::SectorMap)'s buckets. One
//! open-addressed table (linear probing on a Fibonacci hash of the key, at most half full,
//! backward-shift deletion) holds the entries themselves, so an insert or a removal is a probe
//! or two. For the driver's requests, the range-aware sector map took about five times the
//! instructions.

/// Fibonacci hashing's multiplier, 2^64 / golden ratio: the product's top bits are the home.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// One table entry. A flag rather than an `Option` keeps a `u32` value's entry at 16 bytes
/// (the sector map's bucket table is read on every event).
#[derive(Debug, Clone, Copy, Default)]
struct Slot<V> {
    key: u64,
    value: V,
    used: bool,
}

#[derive(Debug, Clone)]
pub struct KeyMap<V> {
    table: Vec<Slot<V>>,
    /// `table.len() - 1` (a power of two minus one).
    mask: usize,
    /// 64 - log2(table.len()).
    shift: u32,
    len: usize,
}

impl<V: Copy + Default> Default for KeyMap<V> {
    fn default() -> Self {
        KeyMap {
            table: vec![Slot::default(); 16],
            mask: 15,
            shift: 60,
            len: 0,
        }
    }
}

impl<V: Copy + Default> KeyMap<V> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries the table has room for (twice the most ever held, or more).
    pub fn capacity(&self) -> usize {
        self.table.len()
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
            let e = &self.table[i];
            if !e.used {
                return (i, false);
            }
            if e.key == key {
                return (i, true);
            }
            i = (i + 1) & self.mask;
        }
    }

    #[inline(always)]
    pub fn get(&self, key: u64) -> Option<V> {
        match self.find(key) {
            (at, true) => Some(self.table[at].value),
            _ => None,
        }
    }

    #[inline(always)]
    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        match self.find(key) {
            (at, true) => Some(&mut self.table[at].value),
            _ => None,
        }
    }

    /// Inserts `value` at `key`, returning the value it replaced.
    #[inline]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        let (mut at, found) = self.find(key);
        if found {
            return Some(std::mem::replace(&mut self.table[at].value, value));
        }
        if (self.len + 1) * 2 > self.table.len() {
            self.grow();
            at = self.find(key).0;
        }
        self.table[at] = Slot {
            key,
            value,
            used: true,
        };
        self.len += 1;
        None
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let bits = 64 - self.shift + 1;
        let old = std::mem::replace(&mut self.table, vec![Slot::default(); 1 << bits]);
        self.mask = (1 << bits) - 1;
        self.shift = 64 - bits;
        for e in old.into_iter().filter(|e| e.used) {
            let (at, _) = self.find(e.key);
            self.table[at] = e;
        }
    }

    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        let (mut hole, found) = self.find(key);
        if !found {
            return None;
        }
        let value = self.table[hole].value;
        self.len -= 1;
        // Backward shift: pull later entries of the run into the hole when the hole lies on
        // their probe path (between their home and where they sit), so lookups that passed
        // through the removed entry still find them.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let e = self.table[j];
            if !e.used {
                break;
            }
            let from_home = j.wrapping_sub(self.home(e.key)) & self.mask;
            let from_hole = j.wrapping_sub(hole) & self.mask;
            if from_home >= from_hole {
                self.table[hole] = e;
                hole = j;
            }
        }
        self.table[hole].used = false;
        Some(value)
    }

    /// Every entry, in table order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, V)> + '_ {
        self.table
            .iter()
            .filter(|e| e.used)
            .map(|e| (e.key, e.value))
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
