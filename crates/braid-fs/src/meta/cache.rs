//! The metadata cache: a layer over any [`MetadataStore`] that answers
//! case-insensitive lookups, positive and negative, from a per-directory
//! index of names instead of scanning the directory (the scan is what
//! makes creating a new name in a directory of 100,000 entries slow: SMB
//! must first be sure no name equal to it under case folding exists).
//!
//! Coherence: an index is built only after its directory is watched, and
//! every change the store reports since (made by this server through
//! either protocol, or by any other process on the host) is applied before
//! the next answer by re-reading the one name it names. A store that cannot
//! watch (or a queue overflow, which drops every index) falls back to the
//! directory's change stamp: an index is trusted only while the stamp is
//! unchanged and was already older than `RACY_MARGIN` when the names were
//! read, because file systems stamp changes at a coarse clock and a change
//! in the same tick as the read would otherwise leave the stamp as it was
//! (git's "racily clean" rule).
//!
//! Memory is bounded by a [`CacheBudget`] shared by every share's cache;
//! the least recently used directory goes first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, UNIX_EPOCH};

use crate::clock::Clock;
use crate::error::FsResult;
use crate::meta::stats::{CacheBudget, CacheStats, Counters};
use crate::meta::store::{DirId, DirStamp, MetadataStore, StoreChange};

/// How much older than the read of its names a directory's change stamp
/// must be for an unwatched index to be trusted: above the coarse clock
/// tick file systems stamp with (1-10 ms).
pub const RACY_MARGIN: Duration = Duration::from_millis(50);

/// Directories one cache keeps open (each holds a file descriptor).
pub const MAX_DIRS: usize = 4096;

/// Estimated bytes one cached name costs: the stored and the folded copy,
/// their `String` headers and the map slot.
fn name_cost(name: &str) -> u64 {
    2 * name.len() as u64 + 96
}

struct DirIndex<H> {
    held: H,
    watched: bool,
    stamp: DirStamp,
    /// When its names were read (the injected clock).
    read_ns: i128,
    /// Stored names by their lower-cased form.
    folded: HashMap<String, Vec<String>>,
    /// Stored names by 8.3 short name (upper case), built on first use.
    short: Option<HashMap<String, String>>,
    entries: u64,
    bytes: u64,
    last_used: u64,
}

impl<H> DirIndex<H> {
    fn add(&mut self, name: &str) -> (u64, u64) {
        let names = self.folded.entry(name.to_lowercase()).or_default();
        if names.iter().any(|n| n == name) {
            return (0, 0);
        }
        names.push(name.to_string());
        self.short = None;
        let cost = name_cost(name);
        self.entries += 1;
        self.bytes += cost;
        (1, cost)
    }

    fn remove(&mut self, name: &str) -> (u64, u64) {
        let key = name.to_lowercase();
        let Some(names) = self.folded.get_mut(&key) else {
            return (0, 0);
        };
        let Some(i) = names.iter().position(|n| n == name) else {
            return (0, 0);
        };
        names.swap_remove(i);
        if names.is_empty() {
            self.folded.remove(&key);
        }
        self.short = None;
        let cost = name_cost(name);
        self.entries -= 1;
        self.bytes -= cost;
        (1, cost)
    }

    fn find(&mut self, name: &str) -> Option<String> {
        if let Some(first) = self
            .folded
            .get(&name.to_lowercase())
            .and_then(|v| v.first())
        {
            return Some(first.clone());
        }
        // Only a generated short name has a '~' (`P#####~H.EXT`).
        if !(name.contains('~') && crate::shortname::is_8_3(name)) {
            return None;
        }
        let short = self.short.get_or_insert_with(|| {
            let mut by_short = HashMap::new();
            for stored in self.folded.values().flatten() {
                by_short
                    .entry(crate::shortname::short_name(stored).to_uppercase())
                    .or_insert_with(|| stored.clone());
            }
            by_short
        });
        short.get(&name.to_uppercase()).cloned()
    }
}

struct State<H> {
    dirs: HashMap<DirId, DirIndex<H>>,
    tick: u64,
    entries: u64,
    bytes: u64,
}

/// The caching layer over `B`.
pub struct MetadataCache<B: MetadataStore> {
    backend: B,
    clock: Arc<dyn Clock>,
    budget: Arc<CacheBudget>,
    state: Mutex<State<B::Held>>,
    counters: Counters,
    /// A deliberately broken layer for the coherence tests: it applies no
    /// change and trusts every index. Never set in service.
    skip_invalidation: bool,
}

impl<B: MetadataStore> MetadataCache<B> {
    pub fn new(backend: B, clock: Arc<dyn Clock>, budget: Arc<CacheBudget>) -> Self {
        MetadataCache {
            backend,
            clock,
            budget,
            state: Mutex::new(State {
                dirs: HashMap::new(),
                tick: 0,
                entries: 0,
                bytes: 0,
            }),
            counters: Counters::default(),
            skip_invalidation: false,
        }
    }

    /// The broken layer the coherence tests prove they catch.
    pub fn skipping_invalidation(mut self) -> Self {
        self.skip_invalidation = true;
        self
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    fn lock(&self) -> MutexGuard<'_, State<B::Held>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now_ns(&self) -> i128 {
        match self.clock.now().duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        }
    }

    /// Apply every change the store reported since the last call.
    fn catch_up(&self, st: &mut State<B::Held>) {
        let mut changes = Vec::new();
        self.backend.drain_changes(&mut |c| changes.push(c));
        if self.skip_invalidation {
            return;
        }
        for change in changes {
            match change {
                StoreChange::Overflow => {
                    let ids: Vec<DirId> = st.dirs.keys().copied().collect();
                    for id in ids {
                        self.drop_dir(st, id);
                    }
                }
                StoreChange::Entry { dir, name } => self.recheck(st, dir, &name),
            }
        }
    }

    /// Re-read one name of a cached directory; `.` (the directory itself
    /// was deleted or moved) or a failed read drops the directory.
    fn recheck(&self, st: &mut State<B::Held>, dir: DirId, name: &str) {
        let Some(ix) = st.dirs.get_mut(&dir) else {
            return;
        };
        if name == "." {
            self.drop_dir(st, dir);
            return;
        }
        Counters::bump(&self.counters.invalidations);
        match self.backend.exists(self.backend.held_dir(&ix.held), name) {
            Ok(true) => {
                let (e, b) = ix.add(name);
                st.entries += e;
                st.bytes += b;
                self.budget.add(e, b);
            }
            Ok(false) => {
                let (e, b) = ix.remove(name);
                st.entries -= e;
                st.bytes -= b;
                self.budget.sub(e, b);
            }
            Err(_) => self.drop_dir(st, dir),
        }
    }

    fn drop_dir(&self, st: &mut State<B::Held>, id: DirId) {
        if let Some(ix) = st.dirs.remove(&id) {
            if ix.watched {
                self.backend.unwatch(&ix.held);
            }
            st.entries -= ix.entries;
            st.bytes -= ix.bytes;
            self.budget.sub(ix.entries, ix.bytes);
            Counters::bump(&self.counters.invalidations);
        }
    }

    fn evict(&self, st: &mut State<B::Held>, id: DirId) {
        if let Some(ix) = st.dirs.remove(&id) {
            if ix.watched {
                self.backend.unwatch(&ix.held);
            }
            st.entries -= ix.entries;
            st.bytes -= ix.bytes;
            self.budget.sub(ix.entries, ix.bytes);
        }
    }

    fn trusted(&self, ix: &DirIndex<B::Held>, now: &DirStamp) -> bool {
        if self.skip_invalidation || ix.watched {
            return true;
        }
        let margin = RACY_MARGIN.as_nanos() as i128;
        *now == ix.stamp && ix.stamp.changed_ns < ix.read_ns - margin
    }

    /// Read `dir`'s names into a new index, watching it first so that no
    /// change during the read is missed, and keep it if the budget allows
    /// (the least recently used directories of this cache make room).
    fn build(
        &self,
        st: &mut State<B::Held>,
        dir: B::Dir,
        stamp: DirStamp,
        name: &str,
    ) -> FsResult<Option<String>> {
        let held = self.backend.hold(dir)?;
        let watched = self.backend.watch(&held, stamp.id);
        let mut ix = DirIndex {
            held,
            watched,
            stamp,
            read_ns: self.now_ns(),
            folded: HashMap::new(),
            short: None,
            entries: 0,
            bytes: 0,
            last_used: st.tick,
        };
        let listed = self.backend.list_names(dir, &mut |n| {
            ix.add(n);
        });
        if let Err(e) = listed {
            if watched {
                self.backend.unwatch(&ix.held);
            }
            return Err(e);
        }
        let answer = ix.find(name);
        while (self.budget.would_exceed(ix.entries, ix.bytes) || st.dirs.len() >= MAX_DIRS)
            && !st.dirs.is_empty()
        {
            let lru = st
                .dirs
                .iter()
                .min_by_key(|(_, d)| d.last_used)
                .map(|(id, _)| *id);
            match lru {
                Some(id) => self.evict(st, id),
                None => break,
            }
        }
        if self.budget.would_exceed(ix.entries, ix.bytes) {
            // Larger than the whole budget: answered, not kept.
            if watched {
                self.backend.unwatch(&ix.held);
            }
            return Ok(answer);
        }
        st.entries += ix.entries;
        st.bytes += ix.bytes;
        self.budget.add(ix.entries, ix.bytes);
        st.dirs.insert(stamp.id, ix);
        Ok(answer)
    }

    /// Forget everything (a share reconfigured or a test).
    pub fn clear(&self) {
        let mut st = self.lock();
        let ids: Vec<DirId> = st.dirs.keys().copied().collect();
        for id in ids {
            self.evict(&mut st, id);
        }
    }
}

impl<B: MetadataStore> Drop for MetadataCache<B> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl<B: MetadataStore> MetadataStore for MetadataCache<B> {
    type Dir = B::Dir;
    type Held = B::Held;

    fn dir_stamp(&self, dir: Self::Dir) -> FsResult<DirStamp> {
        self.backend.dir_stamp(dir)
    }

    /// Passed through: an exact lookup is one `fstatat` in the kernel's own
    /// dentry cache, no dearer than asking the index after catching up.
    fn exists(&self, dir: Self::Dir, name: &str) -> FsResult<bool> {
        self.backend.exists(dir, name)
    }

    fn lookup_folded(&self, dir: Self::Dir, name: &str) -> FsResult<Option<String>> {
        let stamp = self.backend.dir_stamp(dir)?;
        let mut st = self.lock();
        self.catch_up(&mut st);
        st.tick += 1;
        let tick = st.tick;
        if let Some(ix) = st.dirs.get(&stamp.id) {
            if self.trusted(ix, &stamp) {
                let ix = st.dirs.get_mut(&stamp.id).expect("present");
                ix.last_used = tick;
                let found = ix.find(name);
                if found.is_some() {
                    Counters::bump(&self.counters.hits);
                } else {
                    Counters::bump(&self.counters.negative_hits);
                }
                return Ok(found);
            }
            self.drop_dir(&mut st, stamp.id);
        }
        Counters::bump(&self.counters.misses);
        self.build(&mut st, dir, stamp, name)
    }

    fn list_names(&self, dir: Self::Dir, each: &mut dyn FnMut(&str)) -> FsResult<()> {
        self.backend.list_names(dir, each)
    }

    fn hold(&self, dir: Self::Dir) -> FsResult<Self::Held> {
        self.backend.hold(dir)
    }

    fn held_dir(&self, held: &Self::Held) -> Self::Dir {
        self.backend.held_dir(held)
    }

    fn cache_stats(&self) -> Option<CacheStats> {
        let st = self.lock();
        let c = &self.counters;
        use std::sync::atomic::Ordering::Relaxed;
        Some(CacheStats {
            hits: c.hits.load(Relaxed),
            negative_hits: c.negative_hits.load(Relaxed),
            misses: c.misses.load(Relaxed),
            entries: st.entries,
            bytes: st.bytes,
            invalidations: c.invalidations.load(Relaxed),
        })
    }
}
