//! The local POSIX directory as a [`MetadataStore`]: the system calls the
//! path resolver always made (`fstatat` for an exact name, a `readdir`
//! scan for a case-insensitive one), and, for a caching layer above it, a
//! fanotify group (fanotify(7), `FAN_REPORT_DFID_NAME`) reporting every
//! create, delete and rename in the directories it watches: made by this
//! server or by any other process. The kernel queues each event inside
//! the system call that made the change, so a drain after a change
//! returned always sees it.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use crate::error::{FsError, FsResult};
use crate::host_changes::{group, identity, mark, parse_events};
use crate::meta::store::{DirId, DirStamp, MetadataStore, StoreChange};
use crate::sys;

const WATCH_MASK: u64 = libc::FAN_CREATE
    | libc::FAN_DELETE
    | libc::FAN_MOVED_FROM
    | libc::FAN_MOVED_TO
    | libc::FAN_DELETE_SELF
    | libc::FAN_ONDIR;

/// Bytes read from the queue at once.
const QUEUE_READ: usize = 64 * 1024;

struct Feed {
    group: OwnedFd,
    /// fanotify's identity of each watched directory (fsid and file
    /// handle), to its [`DirId`].
    watched: HashMap<Vec<u8>, DirId>,
    by_id: HashMap<DirId, Vec<u8>>,
    buf: Vec<u8>,
}

/// The POSIX backend; with a feed when made by [`PosixStore::watching`].
pub struct PosixStore {
    feed: Option<Mutex<Feed>>,
}

impl PosixStore {
    /// Lookups only: nothing is watched.
    pub const fn plain() -> PosixStore {
        PosixStore { feed: None }
    }

    /// With a change feed when fanotify is available (root, or Linux 5.13
    /// and a file system with file handles); otherwise plain, and a cache
    /// above it revalidates by change stamps.
    pub fn watching() -> PosixStore {
        match group(libc::FAN_REPORT_DFID_NAME) {
            Ok(group) => PosixStore {
                feed: Some(Mutex::new(Feed {
                    group,
                    watched: HashMap::new(),
                    by_id: HashMap::new(),
                    buf: vec![0; QUEUE_READ],
                })),
            },
            Err(e) => {
                tracing::info!("metadata cache: no fanotify ({e}); revalidating by change time");
                PosixStore::plain()
            }
        }
    }

    /// Whether changes are reported.
    pub fn has_feed(&self) -> bool {
        self.feed.is_some()
    }

    fn feed(&self) -> Option<std::sync::MutexGuard<'_, Feed>> {
        self.feed
            .as_ref()
            .map(|f| f.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl MetadataStore for PosixStore {
    type Dir = RawFd;
    type Held = OwnedFd;

    fn dir_stamp(&self, dir: RawFd) -> FsResult<DirStamp> {
        let st = sys::fstat(dir)?;
        let ns = |s: i64, n: i64| s as i128 * 1_000_000_000 + n as i128;
        Ok(DirStamp {
            id: (st.st_dev, st.st_ino),
            changed_ns: ns(st.st_mtime, st.st_mtime_nsec).max(ns(st.st_ctime, st.st_ctime_nsec)),
        })
    }

    fn exists(&self, dir: RawFd, name: &str) -> FsResult<bool> {
        let c = sys::cstr(name)?;
        match sys::lstat_at(dir, &c) {
            Ok(_) => Ok(true),
            Err(libc::ENOENT) => Ok(false),
            Err(e) => Err(FsError::from_errno(e)),
        }
    }

    fn lookup_folded(&self, dir: RawFd, name: &str) -> FsResult<Option<String>> {
        crate::path::find_case_insensitive(dir, name)
    }

    fn list_names(&self, dir: RawFd, each: &mut dyn FnMut(&str)) -> FsResult<()> {
        for n in sys::list_dir(dir)? {
            if let Ok(s) = std::str::from_utf8(&n) {
                each(s);
            }
        }
        Ok(())
    }

    fn hold(&self, dir: RawFd) -> FsResult<OwnedFd> {
        let dot = CString::new(".").expect("no NUL");
        // SAFETY: plain syscall; the fd it returns is owned here. A
        // readable fd (not O_PATH): fanotify_mark needs one.
        let raw = unsafe {
            libc::openat(
                dir,
                dot.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(FsError::last_os());
        }
        // SAFETY: a new fd nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(raw) })
    }

    fn held_dir(&self, held: &OwnedFd) -> RawFd {
        held.as_raw_fd()
    }

    fn watch(&self, held: &OwnedFd, id: DirId) -> bool {
        let Some(mut feed) = self.feed() else {
            return false;
        };
        let Ok(key) = identity(held.as_raw_fd()) else {
            return false;
        };
        if mark(
            &feed.group,
            libc::FAN_MARK_ADD | libc::FAN_MARK_ONLYDIR,
            WATCH_MASK,
            held,
        )
        .is_err()
        {
            return false;
        }
        feed.by_id.insert(id, key.clone());
        feed.watched.insert(key, id);
        true
    }

    fn unwatch(&self, held: &OwnedFd) {
        let Some(mut feed) = self.feed() else {
            return;
        };
        // A directory deleted meanwhile took its mark with it (ENOENT).
        let _ = mark(&feed.group, libc::FAN_MARK_REMOVE, WATCH_MASK, held);
        if let Ok(st) = sys::fstat(held.as_raw_fd()) {
            if let Some(key) = feed.by_id.remove(&(st.st_dev, st.st_ino)) {
                feed.watched.remove(&key);
            }
        }
    }

    fn drain_changes(&self, each: &mut dyn FnMut(StoreChange)) {
        let Some(mut feed) = self.feed() else {
            return;
        };
        let feed = &mut *feed;
        loop {
            // SAFETY: reads into the feed's own buffer, of its length.
            let n = unsafe {
                libc::read(
                    feed.group.as_raw_fd(),
                    feed.buf.as_mut_ptr().cast(),
                    feed.buf.len(),
                )
            };
            if n <= 0 {
                let err = io::Error::last_os_error();
                if n < 0 && err.kind() != io::ErrorKind::WouldBlock {
                    // Unknown state: whatever was learnt may be stale.
                    each(StoreChange::Overflow);
                }
                return;
            }
            for event in parse_events(&feed.buf[..n as usize]) {
                if event.mask & libc::FAN_Q_OVERFLOW != 0 {
                    each(StoreChange::Overflow);
                    continue;
                }
                let Some(&dir) = feed.watched.get(&event.dir_key) else {
                    continue;
                };
                let name = match event.name {
                    Some(name) => name,
                    // An event on the directory itself (its deletion), or
                    // a name that is not UTF-8 (never served).
                    None if event.mask & libc::FAN_DELETE_SELF != 0 => ".".to_string(),
                    None => continue,
                };
                each(StoreChange::Entry { dir, name });
            }
            if (n as usize) < feed.buf.len() / 2 {
                return;
            }
        }
    }
}
