//! A small sharded map so that session and open lookups on the request path
//! never contend on one global lock.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::Mutex;

const SHARDS: usize = 16;

pub struct ShardedMap<K, V> {
    shards: Vec<Mutex<HashMap<K, V>>>,
    hasher: RandomState,
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
        }
    }
    fn shard(&self, k: &K) -> &Mutex<HashMap<K, V>> {
        let h = self.hasher.hash_one(k) as usize;
        &self.shards[h % SHARDS]
    }
    pub fn get(&self, k: &K) -> Option<V> {
        self.shard(k).lock().unwrap().get(k).cloned()
    }
    pub fn insert(&self, k: K, v: V) -> Option<V> {
        self.shard(&k).lock().unwrap().insert(k, v)
    }
    pub fn remove(&self, k: &K) -> Option<V> {
        self.shard(k).lock().unwrap().remove(k)
    }
    pub fn contains(&self, k: &K) -> bool {
        self.shard(k).lock().unwrap().contains_key(k)
    }
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap().len()).sum()
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
    pub fn drain_where(&self, mut pred: impl FnMut(&V) -> bool) -> Vec<V> {
        let mut out = Vec::new();
        for s in &self.shards {
            let mut m = s.lock().unwrap();
            m.retain(|_, v| {
                if pred(v) {
                    out.push(v.clone());
                    false
                } else {
                    true
                }
            });
        }
        out
    }
}
