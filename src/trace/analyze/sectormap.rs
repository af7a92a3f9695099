//! A map from start sector to an IO in flight, tuned for what a trace holds: usually a few
//! dozen IOs in flight, sometimes (bio-based devices, lost completions) very many. Small maps
//! are a sorted vector (binary search, short memmoves: several times faster than a B-tree at
//! this size); past `LARGE` entries the map becomes a B-tree so nothing goes quadratic.

use std::collections::BTreeMap;

const LARGE: usize = 256;

#[derive(Debug, Clone)]
pub enum SectorMap<V> {
    Small(Vec<(u64, V)>),
    Large(BTreeMap<u64, V>),
}

impl<V> Default for SectorMap<V> {
    fn default() -> Self {
        SectorMap::Small(Vec::new())
    }
}

impl<V> SectorMap<V> {
    pub fn len(&self) -> usize {
        match self {
            SectorMap::Small(v) => v.len(),
            SectorMap::Large(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inserts, returning the value it replaced.
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        match self {
            SectorMap::Small(v) => match v.binary_search_by_key(&key, |e| e.0) {
                Ok(i) => Some(std::mem::replace(&mut v[i].1, value)),
                Err(i) => {
                    v.insert(i, (key, value));
                    if v.len() > LARGE {
                        let m: BTreeMap<u64, V> = std::mem::take(v).into_iter().collect();
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
            SectorMap::Small(v) => match v.binary_search_by_key(&key, |e| e.0) {
                Ok(i) => Some(&mut v[i].1),
                Err(_) => None,
            },
            SectorMap::Large(m) => m.get_mut(&key),
        }
    }

    pub fn remove(&mut self, key: u64) -> Option<V> {
        match self {
            SectorMap::Small(v) => match v.binary_search_by_key(&key, |e| e.0) {
                Ok(i) => Some(v.remove(i).1),
                Err(_) => None,
            },
            SectorMap::Large(m) => {
                let r = m.remove(&key);
                if m.len() < LARGE / 4 {
                    let v: Vec<(u64, V)> = std::mem::take(m).into_iter().collect();
                    *self = SectorMap::Small(v);
                }
                r
            }
        }
    }

    /// Calls `f` for every entry with `from <= key < to`, in key order.
    pub fn for_range_mut(&mut self, from: u64, to: u64, mut f: impl FnMut(u64, &mut V)) {
        match self {
            SectorMap::Small(v) => {
                let start = v.partition_point(|e| e.0 < from);
                for e in v[start..].iter_mut() {
                    if e.0 >= to {
                        break;
                    }
                    f(e.0, &mut e.1);
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

#[cfg(test)]
mod tests {
    use super::*;

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
                let want: Vec<(u64, u64)> = b.range(500..900).map(|(&k, &v)| (k, v)).collect();
                assert_eq!(got, want);
            }
        }
        assert!(matches!(s, SectorMap::Large(_)));
        for k in 0..2000 {
            s.remove(k);
        }
        assert!(s.is_empty() && matches!(s, SectorMap::Small(_)));
    }
}
