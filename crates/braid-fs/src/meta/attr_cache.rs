//! The attribute layer of the metadata cache: per file, the metadata Braid
//! keeps beside POSIX's (the DOS record `user.braid.dos`, the security
//! descriptor `user.braid.sd`) and the file's birth time, so that an open,
//! a query and a close read them once instead of once each (every SMB
//! CREATE of an existing file, QUERY_INFO and CLOSE read the DOS record,
//! CREATE the descriptor, and each a `statx` for the birth time).
//!
//! Coherence rests on the inode's change time, which the caller has at
//! hand already (every reader has just `fstat`ed the file for the POSIX
//! attributes, which are never cached): any change of an xattr (`setxattr`,
//! `removexattr`: Braid's own through SMB or NFS 4.2 SETXATTR, or any
//! process's on the host: `setfattr`, `rsync -X`) and any chmod, chown,
//! truncate, write or rename of the inode moves it, and nobody can set it.
//! An entry is kept under the change time the reader saw, and answers only
//! a reader that sees the same one. Two rules make "the same change time"
//! mean "no change":
//! - a change in the same tick of the file system's coarse clock as the
//!   read would leave the change time as it was, so an entry is kept only
//!   when the change time was already older than [`RACY_MARGIN`] when the
//!   value was read (git's "racily clean" rule, as the name index does);
//! - a file system stamping whole seconds could still hide a change within
//!   the second: an entry is kept only when its change time has a nonzero
//!   fraction of a second (such file systems always report zero).
//!
//! Both clocks are the wall clock (the kernel stamps with its coarse
//! realtime clock; the injected clock is realtime in service): a step of
//! the system clock backwards can, in principle, let a later change land
//! on a kept change time to the nanosecond; nothing else can.
//!
//! Inode numbers reused after a delete come with a new change time. The
//! birth time never changes for an inode. Files whose metadata was just
//! changed (a create-and-delete loop) are therefore read from the file
//! system as before: the cache serves files that stay put, which is what
//! repeated opens of a working set look like.
//!
//! Memory: at most a quarter of the shared [`CacheBudget`]'s entries and
//! bytes per share; when full, the least recently used half goes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::clock::Clock;
use crate::meta::cache::RACY_MARGIN;
use crate::meta::stats::CacheBudget;

/// A file's identity and change time, from its `stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    pub dev: u64,
    pub ino: u64,
    /// Change time in nanoseconds since the Unix epoch.
    pub ctime_ns: i128,
}

impl FileStamp {
    pub fn of(st: &libc::stat) -> FileStamp {
        FileStamp {
            dev: st.st_dev,
            ino: st.st_ino,
            ctime_ns: st.st_ctime as i128 * 1_000_000_000 + st.st_ctime_nsec as i128,
        }
    }
}

/// The xattrs of Braid's own metadata the layer keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeptXattr {
    /// The DOS record (attributes, creation time, EaSize, ChangeTime).
    Dos = 0,
    /// The stored security descriptor.
    Descriptor = 1,
}

const KEPT: usize = 2;

/// What a read of a kept xattr found: its value, or that it is absent.
/// Errors (an `O_PATH` fd, a value too large for the reader) are never
/// kept: the next reader asks the file system again.
pub type XattrValue = Option<Arc<[u8]>>;

/// Bytes an entry costs beyond its values (map slot, headers).
const ENTRY_COST: u64 = 128;

struct Entry {
    ctime_ns: i128,
    xattrs: [Option<XattrValue>; KEPT],
    btime: Option<SystemTime>,
    bytes: u64,
    last_used: u64,
}

impl Entry {
    fn new(ctime_ns: i128) -> Entry {
        Entry {
            ctime_ns,
            xattrs: [None, None],
            btime: None,
            bytes: ENTRY_COST,
            last_used: 0,
        }
    }
}

struct State {
    files: HashMap<(u64, u64), Entry>,
    tick: u64,
    bytes: u64,
}

/// What the attribute layer reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttrStats {
    /// Reads answered from the layer.
    pub hits: u64,
    /// Reads that went to the file system.
    pub misses: u64,
    /// Entries found stale (their file's change time moved) and dropped.
    pub invalidations: u64,
    /// Files held now.
    pub files: u64,
    /// Estimated memory held now, in bytes.
    pub bytes: u64,
}

/// One share's attribute layer.
pub struct AttrCache {
    clock: Arc<dyn Clock>,
    budget: Arc<CacheBudget>,
    state: Mutex<State>,
    hits: AtomicU64,
    misses: AtomicU64,
    invalidations: AtomicU64,
    /// The deliberately broken layer of the coherence tests: it keeps
    /// every value and never compares change times. Never set in service.
    skip_validation: bool,
}

impl AttrCache {
    pub fn new(clock: Arc<dyn Clock>, budget: Arc<CacheBudget>) -> AttrCache {
        AttrCache {
            clock,
            budget,
            state: Mutex::new(State {
                files: HashMap::new(),
                tick: 0,
                bytes: 0,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            invalidations: AtomicU64::new(0),
            skip_validation: false,
        }
    }

    /// The broken layer the coherence tests prove they catch.
    pub fn skipping_validation(mut self) -> AttrCache {
        self.skip_validation = true;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now_ns(&self) -> i128 {
        match self.clock.now().duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        }
    }

    /// Whether a value read now of a file with this stamp may be kept.
    fn keepable(&self, stamp: &FileStamp, read_ns: i128) -> bool {
        if self.skip_validation {
            return true;
        }
        let whole_second = stamp.ctime_ns.rem_euclid(1_000_000_000) == 0;
        !whole_second && stamp.ctime_ns < read_ns - RACY_MARGIN.as_nanos() as i128
    }

    /// The entry of `stamp`'s file if it is still valid; a stale one is
    /// dropped.
    fn valid<'a>(&self, st: &'a mut State, stamp: &FileStamp) -> Option<&'a mut Entry> {
        let key = (stamp.dev, stamp.ino);
        let stale = match st.files.get(&key) {
            None => return None,
            Some(e) => !self.skip_validation && e.ctime_ns != stamp.ctime_ns,
        };
        if stale {
            self.invalidations.fetch_add(1, Relaxed);
            self.remove(st, key);
            return None;
        }
        st.tick += 1;
        let tick = st.tick;
        let e = st.files.get_mut(&key).expect("present");
        e.last_used = tick;
        Some(e)
    }

    fn remove(&self, st: &mut State, key: (u64, u64)) {
        if let Some(e) = st.files.remove(&key) {
            st.bytes -= e.bytes;
            self.budget.sub(1, e.bytes);
        }
    }

    /// Room for `bytes` more: the least recently used half goes when this
    /// share's quarter of the budget is full.
    fn make_room(&self, st: &mut State, bytes: u64) {
        let max_files = (self.budget.max_entries() / 4).max(1);
        let max_bytes = self.budget.max_bytes() / 4;
        let full = st.files.len() as u64 + 1 > max_files
            || st.bytes + bytes > max_bytes
            || self.budget.would_exceed(1, bytes);
        if !full || st.files.is_empty() {
            return;
        }
        let mut ages: Vec<u64> = st.files.values().map(|e| e.last_used).collect();
        let mid = ages.len() / 2;
        let (_, median, _) = ages.select_nth_unstable(mid);
        let cut = *median;
        let old: Vec<(u64, u64)> = st
            .files
            .iter()
            .filter(|(_, e)| e.last_used <= cut)
            .map(|(k, _)| *k)
            .collect();
        for key in old {
            self.remove(st, key);
        }
    }

    /// Keep something learnt of `stamp`'s file, read at `read_ns`.
    fn keep(&self, stamp: &FileStamp, read_ns: i128, bytes: u64, put: impl FnOnce(&mut Entry)) {
        if !self.keepable(stamp, read_ns) {
            return;
        }
        let mut st = self.lock();
        let key = (stamp.dev, stamp.ino);
        if self.valid(&mut st, stamp).is_none() {
            self.make_room(&mut st, ENTRY_COST + bytes);
            if self.budget.would_exceed(1, ENTRY_COST + bytes) {
                return;
            }
            st.files.insert(key, Entry::new(stamp.ctime_ns));
            st.bytes += ENTRY_COST;
            self.budget.add(1, ENTRY_COST);
        }
        st.tick += 1;
        let tick = st.tick;
        let e = st.files.get_mut(&key).expect("present");
        e.last_used = tick;
        put(e);
        e.bytes += bytes;
        st.bytes += bytes;
        self.budget.add(0, bytes);
    }

    /// The kept xattr `which` of the file `stamp` names: from the layer
    /// while the file's change time is the one it was read under, else
    /// from `read` (`Ok(None)`: absent; `Err`: not kept).
    pub fn xattr<E>(
        &self,
        stamp: &FileStamp,
        which: KeptXattr,
        read: impl FnOnce() -> Result<Option<Vec<u8>>, E>,
    ) -> Result<XattrValue, E> {
        {
            let mut st = self.lock();
            if let Some(v) = self
                .valid(&mut st, stamp)
                .and_then(|e| e.xattrs[which as usize].clone())
            {
                self.hits.fetch_add(1, Relaxed);
                return Ok(v);
            }
        }
        self.misses.fetch_add(1, Relaxed);
        // The time is taken before the read: a change after it moves the
        // change time past the margin the entry was kept under.
        let read_ns = self.now_ns();
        let value: XattrValue = read()?.map(Arc::from);
        let bytes = value.as_ref().map_or(0, |v| v.len() as u64);
        let kept = value.clone();
        self.keep(stamp, read_ns, bytes, |e| {
            if e.xattrs[which as usize].is_none() {
                e.xattrs[which as usize] = Some(kept);
            }
        });
        Ok(value)
    }

    /// The birth time of the file `stamp` names (`None` where the file
    /// system has none: not kept).
    pub fn btime(
        &self,
        stamp: &FileStamp,
        read: impl FnOnce() -> Option<SystemTime>,
    ) -> Option<SystemTime> {
        {
            let mut st = self.lock();
            if let Some(t) = self.valid(&mut st, stamp).and_then(|e| e.btime) {
                self.hits.fetch_add(1, Relaxed);
                return Some(t);
            }
        }
        self.misses.fetch_add(1, Relaxed);
        let read_ns = self.now_ns();
        let t = read()?;
        self.keep(stamp, read_ns, 0, |e| e.btime = Some(t));
        Some(t)
    }

    /// Forget the file (Braid deleted it or replaced its metadata; the
    /// change time would tell as well, this frees the memory at once).
    pub fn forget(&self, dev: u64, ino: u64) {
        let mut st = self.lock();
        self.remove(&mut st, (dev, ino));
    }

    pub fn stats(&self) -> AttrStats {
        let st = self.lock();
        AttrStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            invalidations: self.invalidations.load(Relaxed),
            files: st.files.len() as u64,
            bytes: st.bytes,
        }
    }

    /// Forget everything.
    pub fn clear(&self) {
        let mut st = self.lock();
        let keys: Vec<(u64, u64)> = st.files.keys().copied().collect();
        for key in keys {
            self.remove(&mut st, key);
        }
    }
}

impl Drop for AttrCache {
    fn drop(&mut self) {
        self.clear();
    }
}
