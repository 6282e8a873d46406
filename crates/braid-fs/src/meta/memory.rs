//! An in-memory [`MetadataStore`]: a tree of directories for tests and
//! fuzzing of the layers above it. Its own methods (`create`, `remove`,
//! `rename`, `mkdir`) are changes "on the host": they stamp the directory
//! with the injected clock rounded down to a coarse tick, as a file
//! system does, and are reported to watchers like fanotify reports them,
//! unless the store is made without a feed.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::UNIX_EPOCH;

use crate::clock::Clock;
use crate::error::{FsError, FsResult};
use crate::meta::store::{DirId, DirStamp, MetadataStore, StoreChange};

/// The tick change stamps are rounded down to (Linux stamps with a coarse
/// clock of 1-10 ms).
pub const STAMP_TICK_NS: i128 = 4_000_000;

const DEVICE: u64 = 1;

#[derive(Default)]
struct MemDir {
    /// Entry names, to the inode of a subdirectory (0 for a file).
    entries: BTreeMap<String, u64>,
    changed_ns: i128,
}

struct Inner {
    dirs: BTreeMap<u64, MemDir>,
    next_ino: u64,
    watched: HashSet<u64>,
    queue: Vec<StoreChange>,
}

/// The in-memory tree. Directory 1 is the root.
pub struct MemoryStore {
    clock: Arc<dyn Clock>,
    reports_changes: bool,
    /// Changes queued beyond this are lost and reported as an overflow.
    queue_limit: usize,
    inner: Mutex<Inner>,
    scans: AtomicU64,
}

pub const ROOT: u64 = 1;

impl MemoryStore {
    /// A store that reports changes to watched directories.
    pub fn new(clock: Arc<dyn Clock>) -> MemoryStore {
        let mut dirs = BTreeMap::new();
        dirs.insert(ROOT, MemDir::default());
        MemoryStore {
            clock,
            reports_changes: true,
            queue_limit: 16384,
            inner: Mutex::new(Inner {
                dirs,
                next_ino: ROOT + 1,
                watched: HashSet::new(),
                queue: Vec::new(),
            }),
            scans: AtomicU64::new(0),
        }
    }

    /// One that cannot watch (as where fanotify is unavailable).
    pub fn without_feed(mut self) -> MemoryStore {
        self.reports_changes = false;
        self
    }

    /// One whose change queue holds only `limit` changes.
    pub fn with_queue_limit(mut self, limit: usize) -> MemoryStore {
        self.queue_limit = limit;
        self
    }

    /// How many times a directory was read in full.
    pub fn scans(&self) -> u64 {
        self.scans.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn stamp_now(&self) -> i128 {
        let ns = self
            .clock
            .now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        ns - ns % STAMP_TICK_NS
    }

    fn changed(&self, inner: &mut Inner, dir: u64, name: &str) {
        let now = self.stamp_now();
        if let Some(d) = inner.dirs.get_mut(&dir) {
            d.changed_ns = now;
        }
        if self.reports_changes && inner.watched.contains(&dir) {
            if inner.queue.len() >= self.queue_limit {
                if inner.queue.last() != Some(&StoreChange::Overflow) {
                    inner.queue.push(StoreChange::Overflow);
                }
                return;
            }
            inner.queue.push(StoreChange::Entry {
                dir: (DEVICE, dir),
                name: name.to_string(),
            });
        }
    }

    fn add(&self, dir: u64, name: &str, ino: u64) -> FsResult<()> {
        let mut inner = self.lock();
        let d = inner.dirs.get_mut(&dir).ok_or(FsError::PathNotFound)?;
        if d.entries.contains_key(name) {
            return Err(FsError::NameCollision);
        }
        d.entries.insert(name.to_string(), ino);
        if ino != 0 {
            inner.dirs.insert(ino, MemDir::default());
        }
        self.changed(&mut inner, dir, name);
        Ok(())
    }

    /// Create the file `name` in `dir`.
    pub fn create(&self, dir: u64, name: &str) -> FsResult<()> {
        self.add(dir, name, 0)
    }

    /// Create the directory `name` in `dir`; returns its inode.
    pub fn mkdir(&self, dir: u64, name: &str) -> FsResult<u64> {
        let ino = {
            let mut inner = self.lock();
            inner.next_ino += 1;
            inner.next_ino
        };
        self.add(dir, name, ino)?;
        Ok(ino)
    }

    /// Remove `name` from `dir`.
    pub fn remove(&self, dir: u64, name: &str) -> FsResult<()> {
        let mut inner = self.lock();
        let d = inner.dirs.get_mut(&dir).ok_or(FsError::PathNotFound)?;
        let ino = d.entries.remove(name).ok_or(FsError::NotFound)?;
        self.changed(&mut inner, dir, name);
        if ino != 0 {
            inner.dirs.remove(&ino);
            self.changed(&mut inner, ino, ".");
        }
        Ok(())
    }

    /// Rename `from` in `from_dir` to `to` in `to_dir` (replacing it).
    pub fn rename(&self, from_dir: u64, from: &str, to_dir: u64, to: &str) -> FsResult<()> {
        let mut inner = self.lock();
        let ino = inner
            .dirs
            .get_mut(&from_dir)
            .ok_or(FsError::PathNotFound)?
            .entries
            .remove(from)
            .ok_or(FsError::NotFound)?;
        self.changed(&mut inner, from_dir, from);
        let Some(target) = inner.dirs.get_mut(&to_dir) else {
            return Err(FsError::PathNotFound);
        };
        target.entries.insert(to.to_string(), ino);
        self.changed(&mut inner, to_dir, to);
        Ok(())
    }
}

impl MetadataStore for MemoryStore {
    type Dir = u64;
    type Held = u64;

    fn dir_stamp(&self, dir: u64) -> FsResult<DirStamp> {
        let inner = self.lock();
        let d = inner.dirs.get(&dir).ok_or(FsError::PathNotFound)?;
        Ok(DirStamp {
            id: (DEVICE, dir),
            changed_ns: d.changed_ns,
        })
    }

    fn exists(&self, dir: u64, name: &str) -> FsResult<bool> {
        let inner = self.lock();
        let d = inner.dirs.get(&dir).ok_or(FsError::PathNotFound)?;
        Ok(d.entries.contains_key(name))
    }

    fn lookup_folded(&self, dir: u64, name: &str) -> FsResult<Option<String>> {
        self.scans.fetch_add(1, Ordering::Relaxed);
        let inner = self.lock();
        let d = inner.dirs.get(&dir).ok_or(FsError::PathNotFound)?;
        let want = name.to_lowercase();
        let folded = d.entries.keys().find(|n| n.to_lowercase() == want);
        let short = || {
            let maybe_short = name.contains('~') && crate::shortname::is_8_3(name);
            d.entries
                .keys()
                .find(|n| maybe_short && crate::shortname::short_name(n).eq_ignore_ascii_case(name))
        };
        Ok(folded.or_else(short).cloned())
    }

    fn list_names(&self, dir: u64, each: &mut dyn FnMut(&str)) -> FsResult<()> {
        self.scans.fetch_add(1, Ordering::Relaxed);
        let names: Vec<String> = {
            let inner = self.lock();
            let d = inner.dirs.get(&dir).ok_or(FsError::PathNotFound)?;
            d.entries.keys().cloned().collect()
        };
        names.iter().for_each(|n| each(n));
        Ok(())
    }

    fn hold(&self, dir: u64) -> FsResult<u64> {
        self.dir_stamp(dir).map(|_| dir)
    }

    fn held_dir(&self, held: &u64) -> u64 {
        *held
    }

    fn watch(&self, held: &u64, _id: DirId) -> bool {
        if !self.reports_changes {
            return false;
        }
        self.lock().watched.insert(*held);
        true
    }

    fn unwatch(&self, held: &u64) {
        self.lock().watched.remove(held);
    }

    fn drain_changes(&self, each: &mut dyn FnMut(StoreChange)) {
        let queued = std::mem::take(&mut self.lock().queue);
        queued.into_iter().for_each(each);
    }
}
