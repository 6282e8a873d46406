//! Writes made on the host, outside the server, to files the server's
//! clients cache: what Windows gets from its local opens going through
//! the same oplock package as remote ones, so that a client caching a
//! file (a Read lease, a level II or exclusive oplock) is told when a
//! local job changes it. The server breaks those clients' caching.
//!
//! A fanotify group (fanotify_init(2), `FAN_REPORT_FID`) with one inode
//! mark per cached file. Each mark asks for `FAN_MODIFY`, an event on the
//! first write(2) (or truncation) after the last one was read, so the
//! break goes out while the writer is still at work rather than when it
//! closes the file; the server's own writes to a marked file queue events
//! too, which it drops by pid (about 1 µs per write, so only files someone
//! caches are marked). And `FAN_ATTRIB`, which among attribute changes
//! reports a change of link count: a file removed or replaced by a rename
//! on the host is reported as `Unlinked` once it has no name left.
//!
//! A mark outlives the last watch of its file by up to [`IDLE_FOR`] (at
//! most [`IDLE_MAX`] such idle marks), so that a file opened and read
//! again is watched with no system call but its identity. Removing a mark
//! is what costs: the kernel hands the mark and its inode's connector to
//! a worker thread, whose wake-up preempted the server on this 2-core VM
//! (+1.8 context switches and +1.4 migrations per leased open, ~40 µs of
//! server CPU; docs/BENCHMARKS.md section 6). Idle marks are removed in
//! batches by [`HostWriteFeed::sweep`], one worker wake-up for many.
//!
//! Each mark keeps an `O_PATH` descriptor of its file, to remove the mark
//! through and to read the link count from. An `O_PATH` descriptor takes
//! no part in the file's locks, leases or share modes, so a mark may
//! outlive the opens it was made for; it does keep the inode, so the mark
//! of a file with no name left is removed at once, not kept idle.
//!
//! Where fanotify is not available the feed cannot be made or a file
//! cannot be marked; clients are then only told of changes made through
//! the server.

use std::collections::BTreeSet;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::handle::OpenHandle;
use crate::host_changes::{group, identity, parse_events, read_queue, MarkTable};

/// How long a mark is kept after the last watch of its file ends.
pub const IDLE_FOR: Duration = Duration::from_secs(30);
/// How many idle marks are kept at most; beyond this the longest idle
/// sixteenth goes at once.
pub const IDLE_MAX: usize = 1024;

/// Which marked file an event is about: one per file, however many opens
/// of it are cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
    /// An `O_PATH` descriptor of the file.
    inode: OwnedFd,
    /// Live watches of the file.
    watches: usize,
    /// Since when it has had none.
    idle_since: Option<Instant>,
}

#[derive(Default)]
struct Marks {
    table: MarkTable<Mark>,
    /// Idle marks, by when they became idle.
    idle: BTreeSet<(Instant, FileMarkId)>,
}

/// One `watch` of a file, ended by `unwatch`.
pub struct FileWatch {
    pub id: FileMarkId,
}

/// The fanotify group that watches cached files for the server.
pub struct HostWriteFeed {
    fd: OwnedFd,
    marks: Mutex<Marks>,
    own_pid: i32,
    /// /proc/self/fd, which names each descriptor as a link to its file.
    proc_fds: OwnedFd,
    idle_for: Duration,
    idle_max: usize,
}

impl AsRawFd for HostWriteFeed {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl HostWriteFeed {
    /// A non-blocking feed: poll its fd for readability, then `read`.
    pub fn new() -> io::Result<Self> {
        Self::with_idle_limits(IDLE_FOR, IDLE_MAX)
    }

    /// As `new`, keeping idle marks for `idle_for`, at most `idle_max`.
    pub fn with_idle_limits(idle_for: Duration, idle_max: usize) -> io::Result<Self> {
        Ok(HostWriteFeed {
            fd: group(libc::FAN_REPORT_FID)?,
            marks: Mutex::new(Marks::default()),
            own_pid: std::process::id() as i32,
            proc_fds: open_path(libc::AT_FDCWD, c"/proc/self/fd", libc::O_DIRECTORY)?,
            idle_for,
            idle_max,
        })
    }

    /// Watch the file `file` is an open of; one mark per file however
    /// many opens of it are watched, kept from an earlier watch if the
    /// file has been watched lately.
    pub fn watch(&self, file: &OpenHandle) -> io::Result<FileWatch> {
        self.watch_fd(file.fd(), false)
    }

    /// As `watch`, for an object of the POSIX face (an NFS file), whose
    /// descriptor is `O_PATH`.
    pub fn watch_object(&self, file: &crate::posix::Object) -> io::Result<FileWatch> {
        self.watch_fd(file.0.fd.as_raw_fd(), true)
    }

    /// `o_path`: `fd` is an `O_PATH` descriptor, which fanotify_mark(2)
    /// takes only through its /proc link.
    fn watch_fd(&self, fd: RawFd, o_path: bool) -> io::Result<FileWatch> {
        let key = identity(fd)?;
        // Mark syscalls happen under the lock: a removal racing with a new
        // watch of the same file would take the new watch's mark away.
        let mut marks = self.marks.lock().unwrap();
        if let Some(m) = marks.table.by_key_mut(&key) {
            m.watches += 1;
            let id = m.id;
            if let Some(since) = m.idle_since.take() {
                marks.idle.remove(&(since, id));
            }
            return Ok(FileWatch { id });
        }
        let inode = open_path(self.proc_fds.as_raw_fd(), &fd_name(fd), 0)?;
        if o_path {
            let link = fd_name(fd);
            self.mark(libc::FAN_MARK_ADD, self.proc_fds.as_raw_fd(), Some(&link))?;
        } else {
            self.mark(libc::FAN_MARK_ADD, fd, None)?;
        }
        let id = marks.table.insert(key, |id| Mark {
            id: FileMarkId(id),
            inode,
            watches: 1,
            idle_since: None,
        });
        Ok(FileWatch { id: FileMarkId(id) })
    }

    /// End a watch. The last of a file leaves its mark idle, to be removed
    /// by `sweep` once idle for long enough; true if it did.
    pub fn unwatch(&self, watch: FileWatch, now: Instant) -> bool {
        let mut marks = self.marks.lock().unwrap();
        let Some(m) = marks.table.get_mut(watch.id.0) else {
            return false;
        };
        m.watches = m.watches.saturating_sub(1);
        if m.watches > 0 {
            return false;
        }
        if link_count(m.inode.as_raw_fd()) == Some(0) {
            // Kept, the mark would keep a removed file's blocks in use.
            self.remove(&mut marks, watch.id);
            return false;
        }
        m.idle_since = Some(now);
        marks.idle.insert((now, watch.id));
        if marks.idle.len() > self.idle_max {
            // A batch, not one: each removal wakes the kernel's worker,
            // and one wake-up serves all the removals queued before it runs.
            let keep = self.idle_max - self.idle_max / 16;
            while marks.idle.len() > keep {
                let Some((_, id)) = marks.idle.first().copied() else {
                    break;
                };
                self.remove(&mut marks, id);
            }
        }
        // With no room for idle marks at all, the batch took this one.
        marks.table.get_mut(watch.id.0).is_some()
    }

    /// Remove the marks idle since `idle_for` before `now`. Returns when
    /// the next one is due, if any is idle.
    pub fn sweep(&self, now: Instant) -> Option<Instant> {
        let mut marks = self.marks.lock().unwrap();
        while let Some(&(since, id)) = marks.idle.first() {
            let due = since + self.idle_for;
            if due > now {
                return Some(due);
            }
            self.remove(&mut marks, id);
        }
        None
    }

    /// Files marked now, watched or idle.
    pub fn marked(&self) -> usize {
        self.marks.lock().unwrap().table.len()
    }

    /// Marks kept with no watch.
    pub fn idle(&self) -> usize {
        self.marks.lock().unwrap().idle.len()
    }

    fn remove(&self, marks: &mut Marks, id: FileMarkId) {
        if let Some(m) = marks.table.remove(id.0) {
            if let Some(since) = m.idle_since {
                marks.idle.remove(&(since, id));
            }
            let link = fd_name(m.inode.as_raw_fd());
            let _ = self.mark(
                libc::FAN_MARK_REMOVE,
                self.proc_fds.as_raw_fd(),
                Some(&link),
            );
        }
    }

    /// Mark or unmark the file open on `fd`, or the one `path` names from
    /// `fd`. fanotify_mark(2) takes no `O_PATH` descriptor as the object
    /// itself, but follows a /proc link to the inode it names.
    fn mark(&self, flags: libc::c_uint, fd: RawFd, path: Option<&CStr>) -> io::Result<()> {
        let path = path.map_or(std::ptr::null(), |p| p.as_ptr());
        // SAFETY: plain syscall; the path, if any, is NUL-terminated.
        let r = unsafe { libc::fanotify_mark(self.fd.as_raw_fd(), flags, MASK, fd, path) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The changes queued now, made by other processes, one per file and
    /// kind. `WouldBlock` when there are none.
    pub fn read(&self) -> io::Result<Vec<HostFileChange>> {
        let buf = read_queue(&self.fd, 16 * 1024)?;
        let mut marks = self.marks.lock().unwrap();
        let mut out = Vec::new();
        let mut gone = Vec::new();
        for event in parse_events(&buf) {
            if event.mask & libc::FAN_Q_OVERFLOW != 0 {
                if !out.contains(&HostFileChange::Overflow) {
                    out.push(HostFileChange::Overflow);
                }
                continue;
            }
            let Some(m) = marks.table.by_key(&event.object_key) else {
                continue;
            };
            let idle = m.idle_since.is_some();
            // A live mark ignores this process's own changes; an idle one
            // still lets go of a file removed through this process.
            if event.pid == self.own_pid && !idle {
                continue;
            }
            let unlinked =
                event.mask & libc::FAN_ATTRIB != 0 && link_count(m.inode.as_raw_fd()) == Some(0);
            if idle {
                // Nobody caches the file: only let a removed one go.
                if unlinked && !gone.contains(&m.id) {
                    gone.push(m.id);
                }
                continue;
            }
            let change = if unlinked {
                Some(HostFileChange::Unlinked(m.id))
            } else if event.mask & libc::FAN_MODIFY != 0 {
                Some(HostFileChange::Written(m.id))
            } else {
                // Mode, owner, times, extended attributes, or a link
                // added or removed with a name left: nothing cached
                // goes stale.
                None
            };
            if let Some(c) = change {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        for id in gone {
            self.remove(&mut marks, id);
        }
        Ok(out)
    }
}

fn link_count(fd: RawFd) -> Option<u64> {
    // SAFETY: stat is plain data, filled by the call.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: plain syscall into the struct above.
    if unsafe { libc::fstat(fd, &mut st) } < 0 {
        return None;
    }
    Some(st.st_nlink)
}

/// A descriptor's name in /proc/self/fd.
fn fd_name(fd: RawFd) -> CString {
    CString::new(fd.to_string()).expect("no NUL in a number")
}

/// An `O_PATH` descriptor of what `path` names from `dir`.
fn open_path(dir: RawFd, path: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with a NUL-terminated path; the result is
    // owned here.
    let raw = unsafe { libc::openat(dir, path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC | flags) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}
