//! The open-descriptor layer of the metadata cache: the fd of a plain file
//! is kept for a short while after its open closes, so that an open of the
//! same file with the same access that follows takes it instead of walking
//! the path again (`openat2`) and closing it once more (knfsd's file cache,
//! `fs/nfsd/filecache.c`, keeps its files the same way).
//!
//! What makes reuse safe:
//! - **The key is the inode, after the name was resolved.** An opener
//!   resolves the name to a (dev, ino) first (`lstat`, or the object it
//!   already holds) and asks for that inode's fd. A kept fd pins its inode,
//!   so no other file can take its number while it is kept: a kept fd of an
//!   unlinked file can never answer an open of a new file at the same name.
//! - **The access mode is in the key** (read, write, read-write, and
//!   `O_DSYNC`), as knfsd keys on the read/write mode. `O_DIRECT` writes use
//!   a descriptor of their own (`direct.rs`), never kept.
//! - **The caller's permission is checked again on every reuse**
//!   ([`caller_may_use`]: `faccessat2(fd, "", mode, AT_EACCESS |
//!   AT_EMPTY_PATH)`, which the kernel answers with the calling thread's
//!   fsuid, fsgid and groups, as it would an open). NFS runs file-system
//!   calls as the client's fsuid, so uid B never reuses uid A's fd of a
//!   file B may not open, and a chmod since the park is seen.
//! - **A kept fd holds no byte-range locks.** Locks are open file
//!   description (OFD) locks, owned by the fd: the closer releases them all
//!   before parking (SMB: `HandleInner::release`; NFS takes its locks on
//!   descriptions of their own, `kernel_locks.rs`).
//! - **Offsets do not matter**: every read and write is positioned
//!   (`pread`/`pwrite`, io_uring with offsets), and nothing sets file status
//!   flags (`F_SETFL`) on a served fd.
//!
//! Dropped: when idle longer than [`FdLimits::idle`] (knfsd: about 2 s);
//! the least recently parked first when [`FdLimits::max_fds`] are kept;
//! when its file is unlinked (Braid's delete-on-close drops it at once;
//! any unlink, the host's `rm` included, is seen by [`FdCache::sweep`],
//! which the server runs every [`SWEEP_EVERY`] and which checks each kept
//! fd's link count, so the file's space is returned); before a host lease
//! (`F_SETLEASE`) would be asked for ([`FdCache::forget_inode`]: the
//! kernel refuses a write lease while another fd is open); all of them
//! when the share goes ([`FdCache::clear`], and on drop).
//!
//! What a kept fd still changes on the host, for at most the idle time:
//! the file counts as open (for writing, with a write fd): `exec` of it
//! fails with ETXTBSY, a local process's `F_SETLEASE` is refused, and a
//! watcher's close event (inotify `IN_CLOSE_WRITE`) comes when the fd is
//! dropped rather than at the client's close.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime};

use crate::clock::Clock;

/// How often the server sweeps its kept fds (idle ones, unlinked files).
pub const SWEEP_EVERY: Duration = Duration::from_millis(200);

/// The access an fd was opened with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FdMode {
    Read,
    Write,
    ReadWrite,
}

impl FdMode {
    /// The mode of `open(2)` flags; `None` for `O_PATH` fds, never kept.
    pub fn of_flags(flags: i32) -> Option<FdMode> {
        if flags & libc::O_PATH != 0 {
            return None;
        }
        match flags & libc::O_ACCMODE {
            libc::O_RDONLY => Some(FdMode::Read),
            libc::O_WRONLY => Some(FdMode::Write),
            libc::O_RDWR => Some(FdMode::ReadWrite),
            _ => None,
        }
    }

    /// The `access(2)` mode a reuse re-checks.
    fn access_mode(self) -> i32 {
        match self {
            FdMode::Read => libc::R_OK,
            FdMode::Write => libc::W_OK,
            FdMode::ReadWrite => libc::R_OK | libc::W_OK,
        }
    }
}

/// What a kept fd is found by: its file's identity and how it was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FdKey {
    pub dev: u64,
    pub ino: u64,
    pub mode: FdMode,
    /// Opened with `O_DSYNC` (an SMB write-through open).
    pub sync: bool,
}

/// Bounds of one share's kept fds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdLimits {
    /// Kept at most, per share.
    pub max_fds: usize,
    /// Dropped after this long unused.
    pub idle: Duration,
}

impl FdLimits {
    /// What a share that keeps fds keeps unless told otherwise: 256 fds,
    /// 1.5 s (knfsd keeps NFSv3's files about 2 s).
    pub const KEEPING: FdLimits = FdLimits {
        max_fds: 256,
        idle: Duration::from_millis(1500),
    };
}

impl Default for FdLimits {
    /// None kept: a kept fd makes the kernel refuse a local process's
    /// write lease on the file (`F_SETLEASE` wants no other open fd; knfsd
    /// closes its cached files from the kernel's lease notifier, which a
    /// user-space server has no hook into), so keeping fds is asked for
    /// per server (`metadata_cache_max_fds`). smbtorture's
    /// smb2.kernel-oplocks.kernel_oplocks8 is that local process.
    fn default() -> Self {
        FdLimits {
            max_fds: 0,
            ..FdLimits::KEEPING
        }
    }
}

/// Why a kept fd was closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Unused for the idle time.
    Idle,
    /// The bound on kept fds was reached: the least recently parked went.
    Capacity,
    /// Its file has no name left (deleted by Braid or on the host).
    Unlinked,
    /// Braid is about to do something a kept fd would change (a host
    /// lease request) or the share is going.
    Invalidated,
    /// The caller of an open that would have reused it may not (its
    /// permission check failed, or the file changed under it).
    Refused,
}

/// What the layer reports (admin API and `/metrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FdStats {
    /// Fds parked at a close instead of closed.
    pub kept: u64,
    /// Opens that took a kept fd.
    pub reused: u64,
    /// Opens of a plain file that found none to take.
    pub missed: u64,
    pub dropped_idle: u64,
    pub dropped_capacity: u64,
    pub dropped_unlinked: u64,
    pub dropped_invalidated: u64,
    pub dropped_refused: u64,
    /// Fds kept now.
    pub open: u64,
}

struct Kept {
    fd: OwnedFd,
    parked_at: SystemTime,
    /// Order of parking, for least-recently-used eviction.
    tick: u64,
}

#[derive(Default)]
struct State {
    kept: HashMap<FdKey, Vec<Kept>>,
    count: usize,
    tick: u64,
}

#[derive(Default)]
struct Counters {
    kept: AtomicU64,
    reused: AtomicU64,
    missed: AtomicU64,
    idle: AtomicU64,
    capacity: AtomicU64,
    unlinked: AtomicU64,
    invalidated: AtomicU64,
    refused: AtomicU64,
}

/// One share's kept fds. `Send + Sync`.
pub struct FdCache {
    clock: Arc<dyn Clock>,
    limits: FdLimits,
    state: Mutex<State>,
    counters: Counters,
    /// Tests only: never drop a kept fd because its file was unlinked, to
    /// show the e2e test of a host `rm` catches it.
    skip_unlink_drops: AtomicBool,
}

impl FdCache {
    pub fn new(clock: Arc<dyn Clock>, limits: FdLimits) -> FdCache {
        FdCache {
            clock,
            limits,
            state: Mutex::default(),
            counters: Counters::default(),
            skip_unlink_drops: AtomicBool::new(false),
        }
    }

    /// A deliberately broken layer that keeps the fds of unlinked files
    /// until they idle out: only for the test that proves it is caught.
    #[doc(hidden)]
    pub fn skip_unlink_drops(&self) {
        self.skip_unlink_drops.store(true, Relaxed);
    }

    pub fn limits(&self) -> FdLimits {
        self.limits
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn count(&self, reason: DropReason, n: u64) {
        let c = match reason {
            DropReason::Idle => &self.counters.idle,
            DropReason::Capacity => &self.counters.capacity,
            DropReason::Unlinked => &self.counters.unlinked,
            DropReason::Invalidated => &self.counters.invalidated,
            DropReason::Refused => &self.counters.refused,
        };
        c.fetch_add(n, Relaxed);
    }

    /// Keep `fd`, just released by a close, for the next open of `key`.
    /// The caller guarantees the fd holds no locks and its file was not
    /// deleted by this close.
    pub fn park(&self, key: FdKey, fd: OwnedFd) {
        if self.limits.max_fds == 0 {
            return;
        }
        let now = self.clock.now();
        let mut evicted = None;
        {
            let mut s = self.lock();
            if s.count >= self.limits.max_fds {
                evicted = evict_oldest(&mut s);
            }
            s.tick += 1;
            let tick = s.tick;
            s.kept.entry(key).or_default().push(Kept {
                fd,
                parked_at: now,
                tick,
            });
            s.count += 1;
        }
        self.counters.kept.fetch_add(1, Relaxed);
        if evicted.is_some() {
            self.count(DropReason::Capacity, 1);
        }
        // The evicted fd closes here, outside the lock.
        drop(evicted);
    }

    /// A kept fd of `key`, if one was parked less than the idle time ago.
    /// The caller checks that its caller may use it ([`caller_may_use`])
    /// and gives it back to [`FdCache::refuse`] when not.
    pub fn take(&self, key: &FdKey) -> Option<OwnedFd> {
        let now = self.clock.now();
        let mut stale = Vec::new();
        let found = {
            let mut s = self.lock();
            let mut found = None;
            if let Some(list) = s.kept.get_mut(key) {
                // The most recently parked first; older ones that idled
                // out go.
                while let Some(k) = list.pop() {
                    if self.is_idle(&k, now) {
                        stale.push(k.fd);
                    } else {
                        found = Some(k.fd);
                        break;
                    }
                }
                if list.is_empty() {
                    s.kept.remove(key);
                }
            }
            s.count -= stale.len() + usize::from(found.is_some());
            found
        };
        self.count(DropReason::Idle, stale.len() as u64);
        match &found {
            Some(_) => &self.counters.reused,
            None => &self.counters.missed,
        }
        .fetch_add(1, Relaxed);
        found
    }

    /// Close a taken fd its caller could not use.
    pub fn refuse(&self, fd: OwnedFd) {
        self.counters.reused.fetch_sub(1, Relaxed);
        self.counters.missed.fetch_add(1, Relaxed);
        self.count(DropReason::Refused, 1);
        drop(fd);
    }

    fn is_idle(&self, k: &Kept, now: SystemTime) -> bool {
        // A clock stepped backwards makes the entry old, not young.
        now.duration_since(k.parked_at)
            .map_or(true, |d| d >= self.limits.idle)
    }

    /// Close every kept fd of the inode (dev, ino): Braid is deleting it,
    /// or is about to ask the kernel for a lease on it.
    pub fn forget_inode(&self, dev: u64, ino: u64, reason: DropReason) {
        if reason == DropReason::Unlinked && self.skip_unlink_drops.load(Relaxed) {
            return;
        }
        let dropped: Vec<Kept> = {
            let mut s = self.lock();
            let keys: Vec<FdKey> = s
                .kept
                .keys()
                .filter(|k| k.dev == dev && k.ino == ino)
                .copied()
                .collect();
            let mut out = Vec::new();
            for k in keys {
                out.extend(s.kept.remove(&k).unwrap_or_default());
            }
            s.count -= out.len();
            out
        };
        self.count(reason, dropped.len() as u64);
    }

    /// Close the fds that idled out and those whose file lost its last
    /// name (one `fstat` per kept fd). Run every [`SWEEP_EVERY`].
    pub fn sweep(&self) {
        let now = self.clock.now();
        let check_links = !self.skip_unlink_drops.load(Relaxed);
        let (mut idle, mut unlinked) = (Vec::new(), Vec::new());
        {
            let mut s = self.lock();
            for list in s.kept.values_mut() {
                let mut i = 0;
                while i < list.len() {
                    if self.is_idle(&list[i], now) {
                        idle.push(list.remove(i));
                    } else if check_links && link_count(list[i].fd.as_raw_fd()) == Some(0) {
                        unlinked.push(list.remove(i));
                    } else {
                        i += 1;
                    }
                }
            }
            s.kept.retain(|_, list| !list.is_empty());
            s.count -= idle.len() + unlinked.len();
        }
        self.count(DropReason::Idle, idle.len() as u64);
        self.count(DropReason::Unlinked, unlinked.len() as u64);
    }

    /// Close every kept fd (the share is going).
    pub fn clear(&self) {
        let all: Vec<Kept> = {
            let mut s = self.lock();
            s.count = 0;
            s.kept.drain().flat_map(|(_, v)| v).collect()
        };
        self.count(DropReason::Invalidated, all.len() as u64);
    }

    pub fn stats(&self) -> FdStats {
        let c = &self.counters;
        FdStats {
            kept: c.kept.load(Relaxed),
            reused: c.reused.load(Relaxed),
            missed: c.missed.load(Relaxed),
            dropped_idle: c.idle.load(Relaxed),
            dropped_capacity: c.capacity.load(Relaxed),
            dropped_unlinked: c.unlinked.load(Relaxed),
            dropped_invalidated: c.invalidated.load(Relaxed),
            dropped_refused: c.refused.load(Relaxed),
            open: self.lock().count as u64,
        }
    }

    /// Sweep `cache` every [`SWEEP_EVERY`] on a thread of its own, for as
    /// long as the cache lives.
    pub fn start_sweeper(cache: &Arc<FdCache>) {
        let weak: Weak<FdCache> = Arc::downgrade(cache);
        let spawned = std::thread::Builder::new()
            .name("braid-fd-sweep".into())
            .spawn(move || loop {
                std::thread::sleep(SWEEP_EVERY);
                match weak.upgrade() {
                    Some(c) => c.sweep(),
                    None => return,
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start the kept-fd sweeper ({e}); kept fds idle out only when an open finds them");
        }
    }
}

impl Drop for FdCache {
    fn drop(&mut self) {
        self.clear();
    }
}

fn evict_oldest(s: &mut State) -> Option<Kept> {
    let (key, idx) = s
        .kept
        .iter()
        .flat_map(|(k, list)| list.iter().enumerate().map(move |(i, e)| (e.tick, *k, i)))
        .min_by_key(|(tick, _, _)| *tick)
        .map(|(_, k, i)| (k, i))?;
    let list = s.kept.get_mut(&key)?;
    let e = list.remove(idx);
    if list.is_empty() {
        s.kept.remove(&key);
    }
    s.count -= 1;
    Some(e)
}

fn link_count(fd: RawFd) -> Option<u64> {
    crate::sys::fstat(fd).ok().map(|st| st.st_nlink)
}

/// Whether the calling thread may use `fd` with `mode`, as an open of the
/// file would be allowed now: `faccessat2(fd, "", ..., AT_EACCESS |
/// AT_EMPTY_PATH)` checks the inode's mode, ACLs, a read-only mount and
/// the immutable flag against the thread's fsuid, fsgid and groups (the
/// credentials an open uses; without AT_EACCESS it would use the real
/// ids). Linux 5.8 and later; an older kernel answers ENOSYS and no fd is
/// ever reused.
pub fn caller_may_use(fd: RawFd, mode: FdMode) -> bool {
    // SAFETY: plain syscall; the path is a valid empty C string.
    let r = unsafe {
        libc::syscall(
            libc::SYS_faccessat2,
            fd,
            c"".as_ptr(),
            mode.access_mode(),
            libc::AT_EACCESS | libc::AT_EMPTY_PATH,
        )
    };
    r == 0
}

#[cfg(test)]
#[path = "fd_cache_tests.rs"]
mod tests;
