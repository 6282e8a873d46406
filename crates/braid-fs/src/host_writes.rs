//! Writes made on the host, outside the server, to files the server's
//! clients cache: what Windows gets from its local opens going through
//! the same oplock package as remote ones, so that a client caching a
//! file (a Read lease, a level II or exclusive oplock) is told when a
//! local job changes it. The server breaks those clients' caching.
//!
//! A fanotify group (fanotify_init(2), `FAN_REPORT_FID`) with one inode
//! mark per cached file, kept while an open caching it lives (a watch
//! and an unwatch cost about 5 µs of system calls). Each mark asks for
//! `FAN_MODIFY`, an event on the first write(2) (or truncation) after the
//! last one was read, so the break goes out while the writer is still at
//! work rather than when it closes the file; the server's own writes to
//! a marked file queue events too, which it drops by pid (about 1 µs per
//! write, so only files someone caches are marked). And `FAN_ATTRIB`,
//! which among attribute changes reports a change of link count: a file
//! removed or replaced by a rename on the host is reported as `Unlinked`
//! once it has no name left (`fstat` of a watch's descriptor).
//!
//! Where fanotify is not available the feed cannot be made or a file
//! cannot be marked; clients are then only told of changes made through
//! the server.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use crate::handle::OpenHandle;
use crate::host_changes::{group, identity, mark, parse_events, read_queue};

/// Which marked file an event is about: one per file, however many opens
/// of it are cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileMarkId(pub u64);

/// A change another process made to a marked file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostFileChange {
    /// Written or truncated.
    Written(FileMarkId),
    /// Its last name is gone: removed, or replaced by a rename.
    Unlinked(FileMarkId),
    /// The kernel's queue overflowed: changes to any marked file were lost.
    Overflow,
}

const MASK: u64 = libc::FAN_MODIFY | libc::FAN_ATTRIB;

struct Mark {
    id: FileMarkId,
    /// The descriptors of the live `FileWatch`es of the file, which name
    /// its inode to look at the link count of and, for the last one, to
    /// remove the mark from.
    fds: Vec<RawFd>,
}

#[derive(Default)]
struct Marks {
    /// By the kernel's identity of the file (fsid and file handle), which
    /// is what each event carries.
    by_key: HashMap<Vec<u8>, Mark>,
    keys: HashMap<FileMarkId, Vec<u8>>,
    next_id: u64,
}

/// One `watch` of a file, ended by `unwatch`. It holds a duplicate of the
/// open's descriptor: the same open file description, so it takes no
/// part of its own in the file's locks or share modes, and it is closed
/// with the watch, which ends with the open.
pub struct FileWatch {
    pub id: FileMarkId,
    fd: OwnedFd,
}

/// The fanotify group that watches cached files for the server.
pub struct HostWriteFeed {
    fd: OwnedFd,
    marks: Mutex<Marks>,
    own_pid: i32,
}

impl AsRawFd for HostWriteFeed {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl HostWriteFeed {
    /// A non-blocking feed: poll its fd for readability, then `read`.
    pub fn new() -> io::Result<Self> {
        Ok(HostWriteFeed {
            fd: group(libc::FAN_REPORT_FID)?,
            marks: Mutex::new(Marks::default()),
            own_pid: std::process::id() as i32,
        })
    }

    /// Watch the file `file` is an open of; one mark per file however
    /// many opens of it are watched.
    pub fn watch(&self, file: &OpenHandle) -> io::Result<FileWatch> {
        let key = identity(file.fd())?;
        // SAFETY: plain syscall; the new fd is owned here.
        let raw = unsafe { libc::fcntl(file.fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new fd nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut marks = self.marks.lock().unwrap();
        if let Some(m) = marks.by_key.get_mut(&key) {
            m.fds.push(fd.as_raw_fd());
            return Ok(FileWatch { id: m.id, fd });
        }
        self.mark(libc::FAN_MARK_ADD, &fd)?;
        marks.next_id += 1;
        let id = FileMarkId(marks.next_id);
        marks.keys.insert(id, key.clone());
        marks.by_key.insert(
            key,
            Mark {
                id,
                fds: vec![fd.as_raw_fd()],
            },
        );
        Ok(FileWatch { id, fd })
    }

    /// End a watch; the last of a file removes its mark.
    pub fn unwatch(&self, watch: FileWatch) {
        let mut marks = self.marks.lock().unwrap();
        let Some(key) = marks.keys.get(&watch.id).cloned() else {
            return;
        };
        let Some(m) = marks.by_key.get_mut(&key) else {
            return;
        };
        m.fds.retain(|&fd| fd != watch.fd.as_raw_fd());
        if !m.fds.is_empty() {
            return;
        }
        marks.by_key.remove(&key);
        marks.keys.remove(&watch.id);
        drop(marks);
        let _ = self.mark(libc::FAN_MARK_REMOVE, &watch.fd);
    }

    /// Files marked now.
    pub fn marked(&self) -> usize {
        self.marks.lock().unwrap().by_key.len()
    }

    fn mark(&self, flags: libc::c_uint, file: &OwnedFd) -> io::Result<()> {
        mark(&self.fd, flags, MASK, file)
    }

    /// The changes queued now, made by other processes, one per file and
    /// kind. `WouldBlock` when there are none.
    pub fn read(&self) -> io::Result<Vec<HostFileChange>> {
        let buf = read_queue(&self.fd, 16 * 1024)?;
        let marks = self.marks.lock().unwrap();
        let mut out = Vec::new();
        for event in parse_events(&buf) {
            let change = if event.mask & libc::FAN_Q_OVERFLOW != 0 {
                Some(HostFileChange::Overflow)
            } else if event.pid == self.own_pid {
                None
            } else if let Some(m) = marks.by_key.get(&event.object_key) {
                if event.mask & libc::FAN_ATTRIB != 0 && link_count(m.fds[0]) == Some(0) {
                    Some(HostFileChange::Unlinked(m.id))
                } else if event.mask & libc::FAN_MODIFY != 0 {
                    Some(HostFileChange::Written(m.id))
                } else {
                    // Mode, owner, times, extended attributes, or a link
                    // added or removed with a name left: nothing cached
                    // goes stale.
                    None
                }
            } else {
                None
            };
            if let Some(c) = change {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        Ok(out)
    }
}

/// `fd` is open while the marks' lock is held (see `FileWatch`).
fn link_count(fd: RawFd) -> Option<u64> {
    // SAFETY: stat is plain data, filled by the call.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: plain syscall into the struct above.
    if unsafe { libc::fstat(fd, &mut st) } < 0 {
        return None;
    }
    Some(st.st_nlink)
}
