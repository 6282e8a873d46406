//! Changes made on the host, outside the server, to the entries of
//! directories the server watches: what Samba's `kernel change notify`
//! gives it with inotify. The servers turn them into change notifications
//! and directory lease breaks.
//!
//! Built on fanotify (fanotify_init(2), fanotify_mark(2)) rather than
//! inotify because each event names the process that caused it: the
//! server reports its own changes itself, with the exact Windows actions
//! (rename pairs, writes reported at close), and must not see them twice.
//! An unprivileged listener is told its own pid and 0 for any other
//! process (Linux 5.13), which is all this needs. Marks are per directory
//! (not recursive), as inotify's are: a change in a subdirectory of a
//! watched tree is seen only when that subdirectory is watched too.
//!
//! Where fanotify is not available (an older kernel, a file system
//! without file handles) the feed cannot be made or a directory cannot be
//! marked, and only the server's own changes are reported.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use crate::handle::OpenHandle;

/// Which watched directory an event is about: one per marked directory,
/// however many times it is watched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MarkId(pub u64);

/// One change to an entry of a watched directory, made by another process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostChange {
    Created {
        dir: MarkId,
        name: String,
        is_dir: bool,
    },
    Removed {
        dir: MarkId,
        name: String,
        is_dir: bool,
    },
    /// Renamed within one watched directory (a move out of it is
    /// `Removed`, into it `Created`).
    Renamed {
        dir: MarkId,
        old: String,
        new: String,
        is_dir: bool,
    },
    /// The entry was written: a file opened for writing was closed.
    Written { dir: MarkId, name: String },
    /// Its mode, owner, times or extended attributes changed.
    AttributesChanged {
        dir: MarkId,
        name: String,
        is_dir: bool,
    },
    /// The kernel's queue overflowed: changes were lost, in any watched
    /// directory.
    Overflow,
}

impl HostChange {
    /// The watched directory it happened in; `None` for an overflow,
    /// which may concern any of them.
    pub fn dir(&self) -> Option<MarkId> {
        match self {
            HostChange::Created { dir, .. }
            | HostChange::Removed { dir, .. }
            | HostChange::Renamed { dir, .. }
            | HostChange::Written { dir, .. }
            | HostChange::AttributesChanged { dir, .. } => Some(*dir),
            HostChange::Overflow => None,
        }
    }
}

// fanotify(7): the event and info record layouts and flags, as the kernel
// defines them (include/uapi/linux/fanotify.h).
const MASK: u64 = libc::FAN_CREATE
    | libc::FAN_DELETE
    | libc::FAN_MOVED_FROM
    | libc::FAN_MOVED_TO
    // Not FAN_MODIFY: that is an event for every write(2), the server's
    // own included, and cost each 4 KiB write in a marked directory about
    // 1 us more (0.78 -> 1.75 us); a close after writing costs writes
    // ~0.15 us. Windows reports writes late too (at close, or when the
    // time is updated).
    | libc::FAN_CLOSE_WRITE
    | libc::FAN_ATTRIB
    | libc::FAN_ONDIR
    | libc::FAN_EVENT_ON_CHILD;
const METADATA_LEN: usize = 24;
const INFO_HEADER_LEN: usize = 4;
const FSID_LEN: usize = 8;
const FILE_HANDLE_HEADER_LEN: usize = 8;
const MAX_HANDLE_BYTES: usize = 128;

struct Mark {
    id: MarkId,
    /// The directory, kept open to remove the mark by.
    dir: OwnedFd,
    refs: usize,
}

/// The fanotify group that watches directories for the server.
pub struct HostChangeFeed {
    fd: OwnedFd,
    marks: Mutex<MarkTable<Mark>>,
    own_pid: i32,
    /// The name of a move out of a watched directory, kept until the next
    /// event shows whether it was a rename within it.
    pending_move: Mutex<Option<(MarkId, String, bool)>>,
}

impl AsRawFd for HostChangeFeed {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl HostChangeFeed {
    /// A non-blocking feed: poll its fd for readability, then `read`.
    pub fn new() -> io::Result<Self> {
        Ok(HostChangeFeed {
            fd: group(libc::FAN_REPORT_DFID_NAME)?,
            marks: Mutex::new(MarkTable::default()),
            own_pid: std::process::id() as i32,
            pending_move: Mutex::new(None),
        })
    }

    /// Watch the entries of the directory `dir` is an open of (counted:
    /// each call needs its own `unwatch`).
    pub fn watch(&self, dir: &OpenHandle) -> io::Result<MarkId> {
        let dot = CString::new(".").unwrap();
        // SAFETY: plain syscall on the handle's fd; the result is owned here.
        let raw = unsafe {
            libc::openat(
                dir.fd(),
                dot.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new fd nothing else owns.
        let dir_fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let key = identity(dir_fd.as_raw_fd())?;
        // Mark system calls happen under the lock: a removal racing with a
        // new watch of the same directory would take the new watch's mark.
        let mut marks = self.marks.lock().unwrap();
        if let Some(m) = marks.by_key_mut(&key) {
            m.refs += 1;
            return Ok(m.id);
        }
        self.mark(libc::FAN_MARK_ADD | libc::FAN_MARK_ONLYDIR, &dir_fd)?;
        let id = marks.insert(key, |id| Mark {
            id: MarkId(id),
            dir: dir_fd,
            refs: 1,
        });
        Ok(MarkId(id))
    }

    /// One `watch` of `id` ended; the last removes the mark.
    pub fn unwatch(&self, id: MarkId) {
        let mut marks = self.marks.lock().unwrap();
        let Some(m) = marks.get_mut(id.0) else {
            return;
        };
        m.refs -= 1;
        if m.refs > 0 {
            return;
        }
        if let Some(m) = marks.remove(id.0) {
            // A directory deleted meanwhile took its mark with it (ENOENT).
            let _ = self.mark(libc::FAN_MARK_REMOVE, &m.dir);
        }
    }

    /// Directories marked now.
    pub fn marked(&self) -> usize {
        self.marks.lock().unwrap().len()
    }

    fn mark(&self, flags: libc::c_uint, dir: &OwnedFd) -> io::Result<()> {
        mark(&self.fd, flags, MASK, dir)
    }

    /// The changes queued now, made by other processes. `WouldBlock` when
    /// there are none.
    pub fn read(&self) -> io::Result<Vec<HostChange>> {
        let buf = match read_queue(&self.fd, 64 * 1024) {
            Ok(buf) => buf,
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    && self.pending_move.lock().unwrap().is_some() =>
            {
                // Nothing follows the move out: it was not a rename here.
                return Ok(self.flush_pending_move().into_iter().collect());
            }
            Err(e) => return Err(e),
        };
        let marks = self.marks.lock().unwrap();
        let mut pending = self.pending_move.lock().unwrap();
        let mut out = Vec::new();
        for event in parse_events(&buf) {
            // Before the pid check: the overflow event is nobody's.
            if event.mask & libc::FAN_Q_OVERFLOW != 0 {
                out.extend(pending.take().map(moved_out));
                out.push(HostChange::Overflow);
                continue;
            }
            if event.pid == self.own_pid {
                continue;
            }
            let Some(mark) = marks.by_key(&event.dir_key) else {
                continue;
            };
            let dir = mark.id;
            let Some(name) = event.name else { continue };
            // An event on the watched directory itself, not an entry.
            if name == "." {
                continue;
            }
            let is_dir = event.mask & libc::FAN_ONDIR != 0;
            let m = event.mask;
            if m & libc::FAN_MOVED_TO != 0 {
                match pending.take() {
                    Some((from, old, _)) if from == dir => out.push(HostChange::Renamed {
                        dir,
                        old,
                        new: name.clone(),
                        is_dir,
                    }),
                    other => {
                        out.extend(other.map(moved_out));
                        out.push(HostChange::Created {
                            dir,
                            name: name.clone(),
                            is_dir,
                        });
                    }
                }
            } else {
                out.extend(pending.take().map(moved_out));
            }
            // The kernel merges queued events on one name into one mask,
            // which loses their order: a create and a delete are put in the
            // order that leaves the entry as it is now.
            let created = HostChange::Created {
                dir,
                name: name.clone(),
                is_dir,
            };
            let removed = HostChange::Removed {
                dir,
                name: name.clone(),
                is_dir,
            };
            match (m & libc::FAN_CREATE != 0, m & libc::FAN_DELETE != 0) {
                (true, true) if exists(&mark.dir, &name) => out.extend([removed, created]),
                (true, true) => out.extend([created, removed]),
                (true, false) => out.push(created),
                (false, true) => out.push(removed),
                (false, false) => {}
            }
            if m & libc::FAN_CLOSE_WRITE != 0 {
                let written = HostChange::Written {
                    dir,
                    name: name.clone(),
                };
                // One per file per read is enough: several writers may close.
                if !out.contains(&written) {
                    out.push(written);
                }
            }
            if m & libc::FAN_ATTRIB != 0 {
                out.push(HostChange::AttributesChanged {
                    dir,
                    name: name.clone(),
                    is_dir,
                });
            }
            if m & libc::FAN_MOVED_FROM != 0 {
                *pending = Some((dir, name, is_dir));
            }
        }
        Ok(out)
    }

    fn flush_pending_move(&self) -> Option<HostChange> {
        self.pending_move.lock().unwrap().take().map(moved_out)
    }
}

/// A non-blocking notification group (fanotify_init(2)) reporting what
/// `report` asks for.
pub(crate) fn group(report: libc::c_uint) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the fd it returns is owned here.
    let fd = unsafe {
        libc::fanotify_init(
            libc::FAN_CLASS_NOTIF | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK | report,
            (libc::O_RDONLY | libc::O_CLOEXEC) as u32,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The marks of one group, by the kernel's identity of their object
/// (fsid and file handle: what each event carries) and by the id each
/// was handed out under.
pub(crate) struct MarkTable<M> {
    by_key: HashMap<Vec<u8>, M>,
    keys: HashMap<u64, Vec<u8>>,
    next_id: u64,
}

impl<M> Default for MarkTable<M> {
    fn default() -> Self {
        MarkTable {
            by_key: HashMap::new(),
            keys: HashMap::new(),
            next_id: 0,
        }
    }
}

impl<M> MarkTable<M> {
    /// Add the mark `make` builds from its new id; returns the id.
    pub(crate) fn insert(&mut self, key: Vec<u8>, make: impl FnOnce(u64) -> M) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.keys.insert(id, key.clone());
        self.by_key.insert(key, make(id));
        id
    }

    pub(crate) fn by_key(&self, key: &[u8]) -> Option<&M> {
        self.by_key.get(key)
    }

    pub(crate) fn by_key_mut(&mut self, key: &[u8]) -> Option<&mut M> {
        self.by_key.get_mut(key)
    }

    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut M> {
        let key = self.keys.get(&id)?;
        self.by_key.get_mut(key)
    }

    pub(crate) fn remove(&mut self, id: u64) -> Option<M> {
        let key = self.keys.remove(&id)?;
        self.by_key.remove(&key)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }
}

/// fanotify_mark(2) on what `object` is open on (a null path).
pub(crate) fn mark(
    group: &OwnedFd,
    flags: libc::c_uint,
    mask: u64,
    object: &OwnedFd,
) -> io::Result<()> {
    // SAFETY: plain syscall; a null path marks `object` itself.
    let r = unsafe {
        libc::fanotify_mark(
            group.as_raw_fd(),
            flags,
            mask,
            object.as_raw_fd(),
            std::ptr::null(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One read(2) of a group's queue: whole events, up to `len` bytes.
pub(crate) fn read_queue(group: &OwnedFd, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    // SAFETY: reads into a buffer of the length given.
    let n = unsafe { libc::read(group.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// Whether `name` is an entry of `dir` now.
fn exists(dir: &OwnedFd, name: &str) -> bool {
    let Ok(cname) = CString::new(name) else {
        return false;
    };
    // SAFETY: stat is plain data, filled by the call.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: plain syscall on a single component beneath `dir`.
    unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            cname.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        ) == 0
    }
}

fn moved_out((dir, name, is_dir): (MarkId, String, bool)) -> HostChange {
    HostChange::Removed { dir, name, is_dir }
}

/// The kernel's identity of the directory `fd` is open on, as fanotify
/// reports it: the file system id, then the file handle (type and bytes).
pub(crate) fn identity(fd: RawFd) -> io::Result<Vec<u8>> {
    // SAFETY: statfs is plain data, filled by the call.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: plain syscall into the struct above.
    if unsafe { libc::fstatfs(fd, &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fsid_t is two i32s (its fields are private in libc).
    let fsid: [u8; FSID_LEN] = unsafe { std::mem::transmute(st.f_fsid) };
    // struct file_handle: handle_bytes, handle_type, then the bytes.
    let mut handle = [0u8; FILE_HANDLE_HEADER_LEN + MAX_HANDLE_BYTES];
    handle[..4].copy_from_slice(&(MAX_HANDLE_BYTES as u32).to_ne_bytes());
    let mut mount_id: libc::c_int = 0;
    let empty = CString::new("").unwrap();
    // SAFETY: the buffer holds a file_handle with room for
    // MAX_HANDLE_BYTES, as its first field says.
    let r = unsafe {
        libc::name_to_handle_at(
            fd,
            empty.as_ptr(),
            handle.as_mut_ptr().cast(),
            &mut mount_id,
            libc::AT_EMPTY_PATH,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let bytes = u32::from_ne_bytes(handle[..4].try_into().unwrap()) as usize;
    let mut key = fsid.to_vec();
    key.extend_from_slice(&handle[4..FILE_HANDLE_HEADER_LEN + bytes.min(MAX_HANDLE_BYTES)]);
    Ok(key)
}

pub(crate) struct Event {
    pub(crate) mask: u64,
    pub(crate) pid: i32,
    /// fsid, handle type and handle bytes of the directory.
    pub(crate) dir_key: Vec<u8>,
    pub(crate) name: Option<String>,
    /// The same, of the object itself (a group with `FAN_REPORT_FID`).
    pub(crate) object_key: Vec<u8>,
}

/// Split a read into events; anything malformed ends the parse (the
/// kernel writes whole events, so that would be a bug, not input).
pub(crate) fn parse_events(mut buf: &[u8]) -> Vec<Event> {
    let mut out = Vec::new();
    while buf.len() >= METADATA_LEN {
        let event_len = u32::from_ne_bytes(buf[0..4].try_into().unwrap()) as usize;
        let metadata_len = u16::from_ne_bytes(buf[6..8].try_into().unwrap()) as usize;
        if event_len < METADATA_LEN || event_len > buf.len() || metadata_len > event_len {
            break;
        }
        let mask = u64::from_ne_bytes(buf[8..16].try_into().unwrap());
        let pid = i32::from_ne_bytes(buf[20..24].try_into().unwrap());
        let mut event = Event {
            mask,
            pid,
            dir_key: Vec::new(),
            name: None,
            object_key: Vec::new(),
        };
        let mut info = &buf[metadata_len..event_len];
        while info.len() >= INFO_HEADER_LEN {
            let info_type = info[0];
            let len = u16::from_ne_bytes(info[2..4].try_into().unwrap()) as usize;
            if len < INFO_HEADER_LEN || len > info.len() {
                break;
            }
            if info_type == libc::FAN_EVENT_INFO_TYPE_DFID_NAME
                || info_type == libc::FAN_EVENT_INFO_TYPE_DFID
            {
                parse_dfid(&info[INFO_HEADER_LEN..len], &mut event);
            } else if info_type == libc::FAN_EVENT_INFO_TYPE_FID {
                if let Some((key, _)) = parse_fid(&info[INFO_HEADER_LEN..len]) {
                    event.object_key = key;
                }
            }
            info = &info[len..];
        }
        out.push(event);
        buf = &buf[event_len..];
    }
    out
}

/// fanotify_event_info_fid: fsid, struct file_handle, then (DFID_NAME) the
/// entry's name, NUL-terminated.
fn parse_dfid(record: &[u8], event: &mut Event) {
    let Some((key, rest)) = parse_fid(record) else {
        return;
    };
    event.dir_key = key;
    let name = rest.split(|&b| b == 0).next().unwrap_or(&[]);
    // Names that are not UTF-8 are not served (`path`), so not reported.
    if !name.is_empty() {
        event.name = std::str::from_utf8(name).ok().map(str::to_string);
    }
}

/// The fsid and file handle at the start of a fid record, as `identity`
/// gives them, and what follows.
fn parse_fid(record: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    if record.len() < FSID_LEN + FILE_HANDLE_HEADER_LEN {
        return None;
    }
    let bytes = u32::from_ne_bytes(record[FSID_LEN..FSID_LEN + 4].try_into().unwrap()) as usize;
    let handle_end = FSID_LEN + FILE_HANDLE_HEADER_LEN + bytes;
    if handle_end > record.len() {
        return None;
    }
    let mut key = record[..FSID_LEN].to_vec();
    key.extend_from_slice(&record[FSID_LEN + 4..handle_end]);
    Some((key, &record[handle_end..]))
}
