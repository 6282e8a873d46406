//! Open handles: positioned I/O, metadata, delete-on-close (byte-range
//! locks in `handle_lock.rs`, renames in `handle_rename.rs`, directory
//! listings in `handle_dir.rs`).

use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::clock::Clock;
use crate::direct::DirectWriter;
use crate::error::{last_errno, FsError, FsResult};
use crate::info;
use crate::meta::fd_cache::DropReason;
use crate::meta::{FdKey, FdMode};
use crate::open_table::{FileKey, Node, NodeTable};
use crate::path;
use crate::service_create::preallocate;
use crate::share::ShareRef;
use crate::sys;
use crate::types::{access as acc, attr, BasicTimes, FileInfo};
use crate::uring::RingSlot;

/// How long after the first write through an open its LastWriteTime
/// update waits (Samba's default "smbd:writetimeupdatedelay"; see
/// [`crate::open_table::OpenWriteTime`]).
/// Rights whose use changes the file: refused in a snapshot.
const CHANGE_RIGHTS: u32 = acc::FILE_WRITE_DATA
    | acc::FILE_APPEND_DATA
    | acc::FILE_WRITE_EA
    | acc::FILE_WRITE_ATTRIBUTES
    | acc::FILE_DELETE_CHILD
    | acc::DELETE
    | acc::WRITE_DAC
    | acc::WRITE_OWNER;

const WRITE_TIME_DELAY: Duration = Duration::from_secs(2);

pub(crate) struct HandleInner {
    pub(crate) id: u64,
    pub(crate) share: ShareRef,
    pub(crate) nodes: Arc<NodeTable>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) node: Arc<Node>,
    /// Taken out only when the handle drops: closed, or kept for the next
    /// open of the file (`meta/fd_cache.rs`).
    pub(crate) fd: ManuallyDrop<OwnedFd>,
    /// What the fd is kept under after the close, when the share keeps
    /// fds and this is a plain file's read or read-write fd.
    pub(crate) keep_as: OnceLock<FdKey>,
    /// Cleared when the close leaves the file deleted or to be deleted,
    /// or locks could not be shown released: the fd is then closed.
    pub(crate) keepable: AtomicBool,
    pub(crate) is_dir: bool,
    pub(crate) access: u32,
    pub(crate) share_access: u32,
    /// Internal share-relative path ('/'-joined, on-disk case).
    pub(crate) path: Mutex<String>,
    pub(crate) closed: AtomicBool,
    /// Open.CurrentByteOffset (MS-FSA 2.1.1.5), FilePositionInformation.
    pub(crate) position: AtomicU64,
    /// A write through this open would change nothing in its
    /// [`crate::open_table::OpenWriteTime`]: writes skip the file's state.
    pub(crate) write_noted: AtomicBool,
    /// The page-cache bypass for large aligned writes (see `direct.rs`).
    pub(crate) direct: DirectWriter,
    pub(crate) ring: Arc<RingSlot>,
    /// Set for an open of a named stream (`stream_handle.rs`): `fd` and
    /// `path` are then those of the file the stream belongs to, `node` the
    /// stream's own.
    pub(crate) stream: Option<crate::stream_handle::StreamOpen>,
}

impl HandleInner {
    /// The bytes of Netatalk's locks this open holds: on a share with
    /// Netatalk locking, for an open of a file's data fork
    /// (`netatalk_lock.rs`).
    pub(crate) fn netatalk_marks(&self) -> Vec<u64> {
        if self.is_dir || self.stream.is_some() || !self.share.netatalk_locking() {
            return Vec::new();
        }
        crate::netatalk_lock::marks(self.access, self.share_access)
    }

    pub(crate) fn rel(&self) -> String {
        self.path.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the share shows this file as hidden by its name.
    fn hidden_by_name(&self) -> bool {
        self.share
            .0
            .hides(&self.path.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn set_rel(&self, p: String) {
        *self.path.lock().unwrap_or_else(|p| p.into_inner()) = p;
    }

    /// Leave the file's open table; performs delete-on-close when this was
    /// the last open of a delete-pending file (MS-FSA 2.1.5.4).
    fn release(&self) {
        self.share.0.unregister(self.id);
        let node = &self.node;
        let now = self.clock.now();
        let mut s = node.lock();
        s.settle_write_times(now);
        if let Some(i) = s.opens.iter().position(|o| o.id == self.id) {
            // A write not yet shown moves the LastWriteTime to the time of
            // the close; a time the client set through this open stays
            // (see OpenWriteTime).
            let w = s.opens[i].write_time;
            if !w.sticky && (w.on_close || w.due.is_some()) {
                s.write_time = Some(now);
            }
            let e = s.opens.swap_remove(i);
            // Open.DeleteOnClose turns into File.DeletePending on close.
            if e.delete_on_close {
                s.delete_pending = true;
            }
        }
        if s.delete_pending {
            self.keepable.store(false, Ordering::Relaxed);
        }
        let had_locks = s.locks.remove_open(self.id);
        if (had_locks || !self.netatalk_marks().is_empty()) && self.stream.is_none() {
            crate::posix_lock::release_all(self.fd.as_raw_fd());
        }
        if s.opens.is_empty() {
            // The file's deletion waits for the opens of its streams too.
            let idle = s.stream_opens.is_empty();
            if !s.delete_pending {
                crate::mac_streams::last_close(self);
            }
            if s.delete_pending {
                let r = match &self.stream {
                    Some(st) => crate::mac_streams::delete_on_close(self, st),
                    None if idle => self.unlink_now(&node.key, self.is_dir),
                    None => Ok(()),
                };
                if let Err(e) = r {
                    tracing::debug!(path = %self.rel(), error = %e, "delete on close failed");
                }
            } else if let Some(t) = s.write_time {
                // The LastWriteTime shown while open becomes the host's.
                let fd = self.fd.as_raw_fd();
                let mtime = sys::fstat(fd).map(|st| sys::ts(st.st_mtime, st.st_mtime_nsec));
                if mtime.is_ok_and(|m| m != t) {
                    if let Err(e) = sys::futimens(fd, None, Some(t)) {
                        tracing::debug!(path = %self.rel(), error = %e, "write time on close");
                    }
                }
                // The entry may outlive its opens (for its stream opens):
                // from now on the host mtime tells the time again.
                s.write_time = None;
            }
            if idle && s.reservations.is_empty() {
                s.dead = true;
                self.nodes.remove(node);
            }
        }
        drop(s);
        node.notify.notify_waiters();
        if let Some(st) = &self.stream {
            st.leave_file(self);
        }
    }

    /// Remove the current name of the file `key` (this open's file, or the
    /// file a stream open belongs to), if it still names that file.
    pub(crate) fn unlink_now(&self, key: &FileKey, is_dir: bool) -> FsResult<()> {
        let rel = self.rel();
        if rel.is_empty() {
            return Err(FsError::CannotDelete);
        }
        let (parent, name) = path::split_last(&rel);
        let root = self.share.0.root_fd();
        let pfd = path::open_beneath(root, parent, libc::O_PATH | libc::O_DIRECTORY, 0)
            .map_err(FsError::from_errno)?;
        let cname = sys::cstr(name)?;
        let st = sys::lstat_at(pfd.as_raw_fd(), &cname).map_err(FsError::from_errno)?;
        if FileKey::of(&st) != key.with_stream(0) {
            return Err(FsError::NotFound);
        }
        if is_dir {
            let dir = sys::openat(
                pfd.as_raw_fd(),
                &cname,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0,
            )
            .map_err(FsError::from_errno)?;
            crate::veto_delete::clear_vetoed(&self.share.0, dir.as_raw_fd())?;
        }
        let flag = if is_dir { libc::AT_REMOVEDIR } else { 0 };
        // SAFETY: plain syscall on a validated single component.
        sys::check(unsafe { libc::unlinkat(pfd.as_raw_fd(), cname.as_ptr(), flag) })?;
        if let Some(fds) = self.share.0.fds() {
            // Its space goes back now, not at the next sweep.
            fds.forget_inode(st.st_dev, st.st_ino, DropReason::Unlinked);
        }
        if !is_dir {
            crate::resource_fork_file::file_deleted(&self.share, pfd.as_raw_fd(), name);
        }
        self.share.0.tunnel.remember(parent, name, self.clock.now());
        Ok(())
    }
}

impl Drop for HandleInner {
    fn drop(&mut self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            self.release();
        }
        // SAFETY: taken once, here, and never used again.
        let fd = unsafe { ManuallyDrop::take(&mut self.fd) };
        // release() gave up this open's byte-range locks (OFD locks, owned
        // by the fd) and would have cleared `keepable` for a deleted file.
        match (self.keep_as.get(), self.share.0.fds()) {
            (Some(key), Some(fds)) if self.keepable.load(Ordering::Relaxed) => fds.park(*key, fd),
            _ => drop(fd),
        }
    }
}

/// One open of a file or directory. Cheap to clone (an `Arc` inside); all
/// clones are the same open. `close()` ends the open; dropping the last
/// clone without `close()` closes it too.
#[derive(Clone)]
pub struct OpenHandle(pub(crate) Arc<HandleInner>);

impl std::fmt::Debug for OpenHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenHandle")
            .field("id", &self.0.id)
            .field("path", &self.0.rel())
            .finish_non_exhaustive()
    }
}

impl OpenHandle {
    /// Let the close of this open keep its fd for the next open of the
    /// file (`meta/fd_cache.rs`), when the share keeps fds: `st` is the
    /// file's, `mode` how the fd was opened (`None`: an `O_PATH` fd, never
    /// kept), `sync` whether with `O_DSYNC`.
    pub(crate) fn keep_fd_at_close(&self, st: &libc::stat, mode: Option<FdMode>, sync: bool) {
        let (Some(mode), Some(_)) = (mode, self.0.share.0.fds()) else {
            return;
        };
        // A snapshot's opens never take one (`take_kept_fd`).
        if self.0.stream.is_some()
            || st.st_mode & libc::S_IFMT != libc::S_IFREG
            || self.0.share.0.read_only()
        {
            return;
        }
        let _ = self.0.keep_as.set(FdKey {
            dev: st.st_dev,
            ino: st.st_ino,
            mode,
            sync,
        });
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.0.fd.as_raw_fd()
    }

    pub(crate) fn live(&self) -> FsResult<()> {
        if self.0.closed.load(Ordering::Acquire) {
            Err(FsError::FileClosed)
        } else {
            Ok(())
        }
    }

    pub(crate) fn need(&self, rights: u32) -> FsResult<()> {
        self.live()?;
        if self.0.access & rights == 0 {
            return Err(FsError::AccessDenied);
        }
        // An open in a snapshot may hold write access (it is granted as
        // the file's ACL says, as Samba does) but changes nothing.
        if rights & CHANGE_RIGHTS != 0 {
            self.0.share.0.check_writable()?;
        }
        Ok(())
    }

    /// Unique id of this open within the service.
    pub fn open_id(&self) -> u64 {
        self.0.id
    }

    /// The share this open belongs to.
    pub fn share(&self) -> &ShareRef {
        &self.0.share
    }

    /// Share-relative path with `\` separators, in on-disk case ("" = root).
    /// Follows renames of this file (by any open).
    pub fn path(&self) -> String {
        path::to_client(&self.0.rel())
    }

    /// Byte-range locks this open holds now.
    pub fn lock_count(&self) -> usize {
        let s = self.0.node.lock();
        s.locks
            .locks()
            .iter()
            .filter(|l| l.holder.open_id == self.0.id)
            .count()
    }

    pub fn is_directory(&self) -> bool {
        self.0.is_dir
    }

    /// The concrete access rights granted (GENERIC_*/MAXIMUM_ALLOWED resolved).
    pub fn granted_access(&self) -> u32 {
        self.0.access
    }

    /// The FILE_SHARE_* mode of this open.
    pub fn share_access(&self) -> u32 {
        self.0.share_access
    }

    /// Open.CurrentByteOffset (MS-FSA 2.1.1.5): the byte offset kept for
    /// FilePositionInformation. Positioned I/O neither uses nor moves it;
    /// protocols that track it call [`OpenHandle::set_position`].
    pub fn position(&self) -> u64 {
        self.0.position.load(Ordering::Relaxed)
    }

    /// Set Open.CurrentByteOffset (MS-FSA 2.1.5.14.9 FilePositionInformation).
    pub fn set_position(&self, offset: u64) {
        self.0.position.store(offset, Ordering::Relaxed);
    }

    /// Positioned read (MS-FSA 2.1.5.3); short at EOF. Needs FILE_READ_DATA
    /// or FILE_EXECUTE. Does not check byte-range locks: call
    /// [`OpenHandle::check_io_lock`] first.
    pub fn read(&self, offset: u64, len: usize) -> FsResult<Vec<u8>> {
        let mut buf = Vec::new();
        self.read_append(offset, len, &mut buf)?;
        Ok(buf)
    }

    /// Positioned read of up to `len` bytes appended to `buf` (short at
    /// EOF); returns the bytes read. Lets a protocol layer read straight
    /// behind the headers it has already reserved, so the payload is never
    /// copied again on its way to the socket.
    pub fn read_append(&self, offset: u64, len: usize, buf: &mut Vec<u8>) -> FsResult<usize> {
        self.need(acc::FILE_READ_DATA | acc::FILE_EXECUTE)?;
        if self.0.is_dir {
            return Err(FsError::IsADirectory);
        }
        if let Some(x) = self.stream_xattr() {
            return self.stream_read_append(&x, offset, len, buf);
        }
        sys::pread_into_vec(self.fd(), buf, len, offset)
    }

    /// As [`OpenHandle::read_append`], from the page cache only: Ok(None),
    /// with `buf` unchanged, when reading would wait for the disk. Safe to
    /// call where blocking is not (a network reactor thread).
    pub fn read_append_cached(
        &self,
        offset: u64,
        len: usize,
        buf: &mut Vec<u8>,
    ) -> FsResult<Option<usize>> {
        self.need(acc::FILE_READ_DATA | acc::FILE_EXECUTE)?;
        if self.0.is_dir {
            return Err(FsError::IsADirectory);
        }
        if let Some(x) = self.stream_xattr() {
            return self.stream_read_append(&x, offset, len, buf).map(Some);
        }
        sys::pread_into_vec_nowait(self.fd(), buf, len, offset)
    }

    /// Positioned read into `buf`; returns the bytes read (short at EOF).
    pub fn read_into(&self, offset: u64, buf: &mut [u8]) -> FsResult<usize> {
        self.need(acc::FILE_READ_DATA | acc::FILE_EXECUTE)?;
        if self.0.is_dir {
            return Err(FsError::IsADirectory);
        }
        if let Some(x) = self.stream_xattr() {
            let mut v = Vec::new();
            let n = self.stream_read_append(&x, offset, buf.len(), &mut v)?;
            buf[..n].copy_from_slice(&v);
            return Ok(n);
        }
        sys::pread(self.fd(), buf, offset)
    }

    /// Positioned write (MS-FSA 2.1.5.4); returns bytes written. A full disk
    /// is [`FsError::DiskFull`]; bytes already on disk are not touched.
    /// Write-through opens are durable before this returns (O_DSYNC).
    /// Does not check byte-range locks: call [`OpenHandle::check_io_lock`].
    pub fn write(&self, offset: u64, data: &[u8]) -> FsResult<usize> {
        self.need(acc::FILE_WRITE_DATA | acc::FILE_APPEND_DATA)?;
        if self.0.is_dir {
            return Err(FsError::IsADirectory);
        }
        if let Some(x) = self.stream_xattr() {
            return self.stream_write(&x, offset, data);
        }
        if !data.is_empty() {
            // An empty write changes no size, wherever it points.
            self.check_room_to_grow(offset.saturating_add(data.len() as u64))?;
        }
        self.note_write();
        let _serial = self.serialize_writes();
        let direct = match self.0.share.0.direct_writes() {
            true => self.0.direct.try_write(self.fd(), offset, data),
            false => None,
        };
        match direct.unwrap_or_else(|| sys::pwrite(self.fd(), data, offset)) {
            // The host fd is read-only (e.g. MAXIMUM_ALLOWED downgraded).
            Err(FsError::FileClosed) => Err(FsError::AccessDenied),
            r => r,
        }
    }

    /// Writes of one file run one at a time (concurrent pwrite()s of one
    /// file made the kernel's inode lock spin; docs/BENCHMARKS.md).
    pub(crate) fn serialize_writes(&self) -> std::sync::MutexGuard<'_, ()> {
        self.0
            .node
            .write_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// MS-FSA 2.1.4.17 for a write through this open, called before the
    /// data changes: schedules the delayed LastWriteTime update of the
    /// first write, notes later ones for the close, and from the first
    /// write on keeps the file showing the LastWriteTime it had before (see
    /// [`crate::open_table::OpenWriteTime`]). Cheap once noted: one atomic
    /// load per write until something consumes the note.
    pub(crate) fn note_write(&self) {
        if self.0.write_noted.load(Ordering::Acquire) {
            return;
        }
        let now = self.0.clock.now();
        let mut s = self.0.node.lock();
        s.settle_write_times(now);
        if s.write_time.is_none() {
            if let Ok(st) = sys::fstat(self.fd()) {
                s.write_time = Some(sys::ts(st.st_mtime, st.st_mtime_nsec));
            }
        }
        let Some(e) = s.opens.iter_mut().find(|o| o.id == self.0.id) else {
            return;
        };
        let w = &mut e.write_time;
        w.modified = true;
        if !w.sticky {
            w.on_close = true;
            if !w.triggered {
                w.triggered = true;
                w.due = Some(now + WRITE_TIME_DELAY);
            }
        }
        // While an update is scheduled, writes must look at the state: it
        // may fall due in between.
        let quiet = w.sticky || w.due.is_none();
        self.0.write_noted.store(quiet, Ordering::Release);
    }

    /// Whether data was written through this open (WRITE, copy-chunk,
    /// zeroing): the server reports a change of the file when it closes.
    pub fn has_written(&self) -> bool {
        let s = self.0.node.lock();
        s.opens
            .iter()
            .any(|o| o.id == self.0.id && o.write_time.modified)
    }

    /// Move the file's LastWriteTime to now on behalf of this open and
    /// consume its pending update ([`crate::open_table::NodeState::update_write_time`]); with
    /// `only_if_written`, only if this open has written.
    fn update_write_time(&self, only_if_written: bool) {
        let now = self.0.clock.now();
        let mut s = self.0.node.lock();
        s.settle_write_times(now);
        let Some(i) = s.opens.iter().position(|o| o.id == self.0.id) else {
            return;
        };
        if only_if_written && !s.opens[i].write_time.modified {
            return;
        }
        s.update_write_time(i, now);
        // The next write has something to note again.
        if !s.opens[i].write_time.sticky {
            self.0.write_noted.store(false, Ordering::Release);
        }
    }

    /// Flush data and metadata to stable storage (fsync).
    pub fn sync(&self) -> FsResult<()> {
        self.live()?;
        // SAFETY: plain syscall.
        match unsafe { libc::fsync(self.fd()) } {
            0 => Ok(()),
            _ => match last_errno() {
                libc::EBADF | libc::EINVAL => Ok(()), // O_PATH opens have nothing to flush
                e => Err(FsError::from_errno(e)),
            },
        }
    }

    /// A FLUSH request (MS-SMB2 3.3.5.11, MS-FSA 2.1.5.7): [`OpenHandle::sync`],
    /// then, if this open has written, its LastWriteTime update is made at
    /// once (see [`crate::open_table::OpenWriteTime`]).
    pub fn flush(&self) -> FsResult<()> {
        self.sync()?;
        self.update_write_time(true);
        Ok(())
    }

    /// Current metadata. While the file is open, its LastWriteTime is the
    /// one the delayed write-time updates show (`OpenWriteTime`).
    pub fn info(&self) -> FsResult<FileInfo> {
        self.live()?;
        let mut info = info::fd_info_cached(self.0.share.0.attrs(), self.fd(), false)?;
        self.stream_adjust_info(&mut info)?;
        if self.0.hidden_by_name() {
            info::show_hidden(&mut info);
        }
        let now = self.0.clock.now();
        let mut s = self.0.node.lock();
        s.settle_write_times(now);
        info.delete_pending = s.delete_pending;
        info.last_write_time = s.last_write_time(info.last_write_time);
        Ok(info)
    }

    /// FileBasicInformation (MS-FSA 2.1.5.14.2; 2.1.5.15.2 in later
    /// editions): set times (creation, last access, last write, change;
    /// `None` = unchanged) and DOS attributes. Needs FILE_WRITE_ATTRIBUTES.
    ///
    /// * A LastWriteTime set here sticks for this open (MS-FSA sets
    ///   Open.UserSetModificationTime): its later writes and its close do
    ///   not move it, and it replaces a delayed update still pending.
    /// * If this open has written, its pending LastWriteTime update is made
    ///   now, whatever the request sets (tested against Windows 2016 by
    ///   smbtorture smb2.timestamps.delayed-write-vs-setbasic).
    /// * POSIX cannot set a ctime: a ChangeTime is kept in the DOS record
    ///   with the mtime it goes with ([`info::ChangeTime`]). Setting the
    ///   attributes or the creation time without a ChangeTime drops a
    ///   ChangeTime set before, so that the host ctime shows the change,
    ///   unless that ChangeTime was set through this same open (MS-FSA
    ///   Open.UserSetChangeTime; smbtorture smb2.setinfo checks it).
    pub fn set_basic(&self, times: BasicTimes, attributes: Option<u32>) -> FsResult<()> {
        self.need(acc::FILE_WRITE_ATTRIBUTES)?;
        let [creation, atime, mtime, change] = times;
        let fd = self.fd();
        if let Some(a) = attributes {
            // MS-FSA 2.1.5.14.2: DIRECTORY on a file (or TEMPORARY on a
            // directory) is invalid.
            if (a & attr::DIRECTORY != 0 && !self.0.is_dir)
                || (a & attr::TEMPORARY != 0 && self.0.is_dir)
            {
                return Err(FsError::InvalidParameter);
            }
        }
        if atime.is_some() || mtime.is_some() {
            sys::futimens(fd, atime, mtime)?;
        }
        if let Some(t) = mtime {
            let mut s = self.0.node.lock();
            s.write_time = Some(t);
            if let Some(e) = s.opens.iter_mut().find(|o| o.id == self.0.id) {
                e.write_time.sticky = true;
                e.write_time.due = None;
                e.write_time.on_close = false;
            }
            self.0.write_noted.store(true, Ordering::Release);
        }
        self.update_write_time(true);
        if attributes.is_some() || creation.is_some() || change.is_some() {
            let user_set_change = {
                let mut s = self.0.node.lock();
                let e = s.opens.iter_mut().find(|o| o.id == self.0.id);
                e.is_some_and(|e| {
                    e.user_set_change_time |= change.is_some();
                    e.user_set_change_time
                })
            };
            // After the times: the ChangeTime goes with the final mtime.
            let st = sys::fstat(fd)?;
            let old = info::read_dos(fd);
            let mut m = info::dos_meta_or_default(old, &st);
            let change = match change {
                Some(c) => Some(c),
                // Set through this open before: it stays as set.
                None if user_set_change => old.and_then(|o| o.change).map(|c| c.value),
                None => None,
            };
            if let Some(a) = attributes {
                // SPARSE_FILE is not the client's to set here (MS-FSA
                // 2.1.5.14.2); keep what FSCTL_SET_SPARSE set.
                m.attributes = (a & attr::SETTABLE) | (m.attributes & attr::SPARSE_FILE);
            }
            if let Some(c) = creation {
                m.creation = Some(c);
            }
            m.change = change.map(|value| info::ChangeTime {
                value,
                mtime: sys::ts(st.st_mtime, st.st_mtime_nsec),
            });
            if Some(m) != old {
                info::write_dos(fd, &m, &st)?;
            }
        }
        Ok(())
    }

    /// FileEndOfFileInformation (MS-FSA 2.1.5.14.4): truncate or extend.
    /// Moves the LastWriteTime to now, and consumes this open's pending
    /// update (see [`crate::open_table::OpenWriteTime`]); setting the size
    /// the file already has does so only if this open has written.
    pub fn set_end_of_file(&self, size: u64) -> FsResult<()> {
        self.need(acc::FILE_WRITE_DATA)?;
        if self.0.is_dir {
            return Err(FsError::InvalidParameter);
        }
        if size > i64::MAX as u64 {
            return Err(FsError::DiskFull);
        }
        if let Some(x) = self.stream_xattr() {
            return self.stream_set_size(&x, size, true);
        }
        let st = sys::fstat(self.fd())?;
        if st.st_size as u64 == size {
            self.update_write_time(true);
            return Ok(());
        }
        self.check_room_to_grow(size)?;
        self.truncate(size)?;
        self.update_write_time(false);
        Ok(())
    }

    fn truncate(&self, size: u64) -> FsResult<()> {
        // SAFETY: plain syscall.
        match unsafe { libc::ftruncate(self.fd(), size as i64) } {
            0 => Ok(()),
            _ => match last_errno() {
                libc::EFBIG => Err(FsError::DiskFull),
                libc::EBADF => Err(FsError::AccessDenied),
                e => Err(FsError::from_errno(e)),
            },
        }
    }

    /// FileAllocationInformation (MS-FSA 2.1.5.14.1): a size below EOF
    /// truncates the file; otherwise space is reserved and data kept.
    /// Either way the LastWriteTime moves to now, as for a write whose
    /// update is made at once (see [`crate::open_table::OpenWriteTime`]).
    pub fn set_allocation(&self, size: u64) -> FsResult<()> {
        self.need(acc::FILE_WRITE_DATA)?;
        if self.0.is_dir {
            return Err(FsError::InvalidParameter);
        }
        if let Some(x) = self.stream_xattr() {
            return self.stream_set_size(&x, size, false);
        }
        let st = sys::fstat(self.fd())?;
        let eof = st.st_size as u64;
        let allocated = st.st_blocks as u64 * 512;
        if size < eof {
            self.truncate(size)?;
        } else if size < allocated && allocated > eof.next_multiple_of(st.st_blksize as u64) {
            // Less than what was reserved past EOF: release it. Shrinking
            // the file frees every block past the new size, reserved ones
            // included, so grow it by a byte and shrink it back.
            self.truncate(eof + 1)?;
            self.truncate(eof)?;
            if size > eof {
                preallocate(self.fd(), size)?;
            }
        } else {
            preallocate(self.fd(), size)?;
        }
        self.update_write_time(false);
        Ok(())
    }

    /// FileDispositionInformation (MS-FSA 2.1.5.14.3): mark or unmark the
    /// file for deletion when its last open closes. Needs DELETE access;
    /// read-only → CannotDelete; non-empty directory → DirectoryNotEmpty.
    pub fn set_delete_on_close(&self, delete: bool) -> FsResult<()> {
        self.need(acc::DELETE)?;
        if delete {
            if self.0.rel().is_empty() && self.0.stream.is_none() {
                return Err(FsError::CannotDelete);
            }
            let st = sys::fstat(self.fd())?;
            let meta = info::read_dos_cached(self.0.share.0.attrs(), self.fd(), &st);
            if info::attributes(&st, meta.as_ref()) & attr::READONLY != 0 {
                return Err(FsError::CannotDelete);
            }
            if self.0.is_dir && !crate::veto_delete::empty_for_delete(&self.0.share.0, self.fd())? {
                return Err(FsError::DirectoryNotEmpty);
            }
            self.0.node.lock().delete_pending = true;
        } else {
            let mut s = self.0.node.lock();
            s.delete_pending = false;
            if let Some(o) = s.opens.iter_mut().find(|o| o.id == self.0.id) {
                o.delete_on_close = false;
            }
        }
        Ok(())
    }

    /// Close the open (MS-FSA 2.1.5.4): releases its locks and share mode,
    /// deletes the file if this was the last open and delete is pending.
    /// Returns the attributes as of the close.
    pub fn close(&self) -> FsResult<FileInfo> {
        if self.0.closed.swap(true, Ordering::AcqRel) {
            return Err(FsError::FileClosed);
        }
        self.0.release();
        let mut info = info::fd_info_cached(self.0.share.0.attrs(), self.fd(), false)?;
        self.stream_adjust_info(&mut info)?;
        // Other opens keep the file's LastWriteTime as they show it.
        let s = self.0.node.lock();
        if !s.dead {
            info.last_write_time = s.last_write_time(info.last_write_time);
            // Other opens remain; this close may have left the file
            // delete pending (its DeleteOnClose).
            info.delete_pending = s.delete_pending;
        }
        Ok(info)
    }
}
