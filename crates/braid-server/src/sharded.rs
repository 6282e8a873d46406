//! A small sharded map so that session and open lookups on the request path
//! never contend on one global lock.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const SHARDS: usize = 16;

pub struct ShardedMap<K, V> {
    shards: Vec<Mutex<HashMap<K, V>>>,
    hasher: RandomState,
    /// Entries over all shards, kept as they change (under the shard's
    /// lock), so that `len` locks nothing: CREATE asks it every time.
    count: AtomicUsize,
}

impl<K: Hash + Eq, V: Clone> Default for ShardedMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Hash + Eq, V: Clone> ShardedMap<K, V> {
    pub fn new() -> Self {
        ShardedMap {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
            count: AtomicUsize::new(0),
        }
    }
    fn shard(&self, k: &K) -> &Mutex<HashMap<K, V>> {
        let h = self.hasher.hash_one(k) as usize;
        &self.shards[h % SHARDS]
    }
    pub fn get(&self, k: &K) -> Option<V> {
        self.shard(k).lock().unwrap().get(k).cloned()
    }
    // The count changes under the shard's lock, after the entry did:
    // an entry's removal cannot then be counted before its insertion.
    pub fn insert(&self, k: K, v: V) -> Option<V> {
        let mut shard = self.shard(&k).lock().unwrap();
        let old = shard.insert(k, v);
        if old.is_none() {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
        old
    }
    pub fn remove(&self, k: &K) -> Option<V> {
        let mut shard = self.shard(k).lock().unwrap();
        let old = shard.remove(k);
        if old.is_some() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        old
    }
    pub fn contains(&self, k: &K) -> bool {
        self.shard(k).lock().unwrap().contains_key(k)
    }
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Snapshot of all values (admin views, teardown); not for the hot path.
    pub fn values(&self) -> Vec<V> {
        self.shards
            .iter()
            .flat_map(|s| s.lock().unwrap().values().cloned().collect::<Vec<_>>())
            .collect()
    }
    /// Remove and return every value matching `pred`.
    /// Whether some value matches `pred`.
    pub fn any(&self, mut pred: impl FnMut(&V) -> bool) -> bool {
        self.shards
            .iter()
            .any(|s| s.lock().unwrap().values().any(&mut pred))
    }

    pub fn drain_where(&self, mut pred: impl FnMut(&V) -> bool) -> Vec<V> {
        let mut out = Vec::new();
        for s in &self.shards {
            let mut m = s.lock().unwrap();
            let before = out.len();
            m.retain(|_, v| {
                if pred(v) {
                    out.push(v.clone());
                    false
                } else {
                    true
                }
            });
            self.count.fetch_sub(out.len() - before, Ordering::Relaxed);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::ShardedMap;

    #[test]
    fn len_follows_inserts_removes_and_drains() {
        let m = ShardedMap::new();
        for k in 0..100u32 {
            assert!(m.insert(k, k).is_none());
        }
        assert_eq!(
            m.insert(7, 70),
            Some(7),
            "a replaced entry is not a new one"
        );
        assert_eq!(m.len(), 100);
        assert_eq!(m.remove(&7), Some(70));
        assert_eq!(m.remove(&7), None, "nothing left to remove");
        assert_eq!(m.len(), 99);
        let odd = m.drain_where(|v| v % 2 == 1);
        assert_eq!(odd.len(), 49);
        assert_eq!(m.len(), 50);
        assert_eq!(m.len(), m.values().len());
    }
}
