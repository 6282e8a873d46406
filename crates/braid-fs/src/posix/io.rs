//! Opening a real fd for I/O, and FS statistics.

use std::fs::File;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use super::cred::{self, MAY_READ, MAY_WRITE};
use super::types::*;
use super::{sys, Object, PosixShare};
use crate::meta::fd_cache::caller_may_use;
use crate::meta::{FdCache, FdKey, FdMode};

/// An fd [`PosixShare::open_file`] opened (or took from the share's kept
/// fds, `meta/fd_cache.rs`) for I/O. Dropped, it is closed, or kept for
/// the next open of the file when the share keeps fds. NFS takes its
/// byte-range locks on descriptions of their own (the server's
/// `kernel_locks.rs`), so this one holds none.
pub struct OpenFile {
    file: ManuallyDrop<File>,
    keep: Option<(Arc<FdCache>, FdKey)>,
}

impl OpenFile {
    fn new(file: File, keep: Option<(Arc<FdCache>, FdKey)>) -> OpenFile {
        OpenFile {
            file: ManuallyDrop::new(file),
            keep,
        }
    }
}

impl std::fmt::Debug for OpenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenFile")
            .field("fd", &self.file.as_raw_fd())
            .field("kept_as", &self.keep.as_ref().map(|(_, k)| k))
            .finish()
    }
}

impl std::ops::Deref for OpenFile {
    type Target = File;
    fn deref(&self) -> &File {
        &self.file
    }
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        // SAFETY: taken once, here, and never used again.
        let file = unsafe { ManuallyDrop::take(&mut self.file) };
        match self.keep.take() {
            Some((cache, key)) => cache.park(key, OwnedFd::from(file)),
            None => drop(file),
        }
    }
}

/// Positioned read of up to `len` bytes at `offset`, appended to `buf`
/// without zero-filling it first (a 1 MiB READ would otherwise memset
/// 1 MiB the kernel then overwrites). Stops early only at end of file.
pub fn read_into_vec(
    file: &File,
    buf: &mut Vec<u8>,
    len: usize,
    offset: u64,
) -> std::io::Result<usize> {
    crate::sys::pread_spare(file.as_raw_fd(), buf, len, offset, 0)
        .map_err(std::io::Error::from_raw_os_error)
}

/// As [`read_into_vec`], but only from the page cache (preadv2 with
/// RWF_NOWAIT, which fails with EAGAIN rather than wait for the disk):
/// `Ok(None)` when some of the range is not cached, or the file system
/// cannot tell; `buf` is then unchanged.
pub fn read_into_vec_nowait(
    file: &File,
    buf: &mut Vec<u8>,
    len: usize,
    offset: u64,
) -> std::io::Result<Option<usize>> {
    match crate::sys::pread_spare(file.as_raw_fd(), buf, len, offset, libc::RWF_NOWAIT) {
        Ok(n) => Ok(Some(n)),
        Err(libc::EAGAIN | libc::EOPNOTSUPP | libc::ENOSYS) => Ok(None),
        Err(e) => Err(std::io::Error::from_raw_os_error(e)),
    }
}

/// The size of an open file from the attributes the kernel holds in
/// memory (`sys::statx_cached`: no disk, no server round trip); None if
/// the call fails.
pub fn cached_size(file: &File) -> Option<u64> {
    sys::statx_cached(file.as_raw_fd()).ok().map(|a| a.size)
}

/// NFSv4.2 CLONE's primitive: `len` bytes of `src` at `src_offset` (0: to
/// its end) share their blocks with `dest` at `dest_offset` (FICLONERANGE;
/// no copy is made where the file system cannot share them: the errno
/// says why).
pub fn clone_range(
    src: &File,
    src_offset: u64,
    len: u64,
    dest: &File,
    dest_offset: u64,
) -> std::io::Result<()> {
    crate::sys::clone_range(
        src.as_raw_fd(),
        src_offset,
        len,
        dest.as_raw_fd(),
        dest_offset,
    )
    .map_err(std::io::Error::from_raw_os_error)
}

impl PosixShare {
    /// A real fd (not O_PATH) for I/O on a regular file, reopened through
    /// `/proc/self/fd/N` of the object's O_PATH fd (an O_PATH fd cannot be
    /// upgraded in place; nfs-ganesha's VFS FSAL reopens the same way). The
    /// open is made as `cred`, so POSIX read/write permission applies, except
    /// that with `creator_override` the file's owner may read and write a
    /// file it has just created whatever its mode (RFC 8881 18.16.3: the
    /// create's mode must not lock out the creator's own OPEN).
    pub fn open_file(
        &self,
        cred: &Credentials,
        obj: &Object,
        read: bool,
        write: bool,
        creator_override: bool,
    ) -> PosixResult<Arc<OpenFile>> {
        match obj.kind() {
            ObjectKind::File => {}
            ObjectKind::Directory => return Err(PosixError::Errno(libc::EISDIR)),
            ObjectKind::Symlink => return Err(PosixError::Errno(libc::ELOOP)),
            _ => return Err(PosixError::Errno(libc::EINVAL)),
        }
        let flags = match (read, write) {
            (true, true) => libc::O_RDWR,
            (true, false) => libc::O_RDONLY,
            (false, true) => libc::O_WRONLY,
            (false, false) => return Err(PosixError::Errno(libc::EINVAL)),
        };
        let attr = sys::statx(obj.fd())?;
        let overridden = creator_override && cred.uid == attr.uid;
        let (dev, ino) = obj.key();
        let keep = self
            .fds
            .get()
            .zip(FdMode::of_flags(flags))
            .map(|(c, mode)| {
                let key = FdKey {
                    dev,
                    ino,
                    mode,
                    sync: false,
                };
                (c.clone(), key)
            });
        if let (Some((cache, key)), false) = (&keep, overridden) {
            if !self.privileged {
                let want = if read { MAY_READ } else { 0 } | if write { MAY_WRITE } else { 0 };
                cred::require(cred, &attr, want)?;
            }
            if let Some(fd) = cache.take(key) {
                // The kernel's own check, as the client (its fsuid, fsgid
                // and groups), as the open it replaces would have made.
                let allowed = {
                    let _as = self.as_cred(cred)?;
                    caller_may_use(fd.as_raw_fd(), key.mode)
                };
                if allowed {
                    return Ok(Arc::new(OpenFile::new(File::from(fd), keep)));
                }
                cache.refuse(fd);
            }
        }
        let fd = if overridden {
            // As the server itself: the client's identity would be refused.
            self.retry_fds(|| sys::reopen(obj.fd(), flags))?
        } else {
            if !self.privileged {
                let want = if read { MAY_READ } else { 0 } | if write { MAY_WRITE } else { 0 };
                cred::require(cred, &attr, want)?;
            }
            let _as = self.as_cred(cred)?;
            self.retry_fds(|| sys::reopen(obj.fd(), flags))?
        };
        // The magic link reaches the same inode; make sure it still is one
        // (a regular file cannot change kind, but the fd came from a path).
        let check = sys::statx(fd.as_raw_fd())?;
        if (check.dev, check.fileid) != obj.key() {
            return Err(PosixError::Stale);
        }
        Ok(Arc::new(OpenFile::new(File::from(fd), keep)))
    }

    /// RFC 8881 5.8.2 space_* / files_* attributes, from `fstatfs`.
    pub fn statfs(&self, obj: &Object) -> PosixResult<FsStat> {
        let st = sys::fstatfs(obj.fd())?;
        let bs = st.f_frsize as u64;
        Ok(FsStat {
            bytes_total: (st.f_blocks as u64).saturating_mul(bs),
            bytes_free: (st.f_bfree as u64).saturating_mul(bs),
            bytes_avail: (st.f_bavail as u64).saturating_mul(bs),
            files_total: st.f_files as u64,
            files_free: st.f_ffree as u64,
            // Linux keeps no separate root reserve for inodes.
            files_avail: st.f_ffree as u64,
            max_name: st.f_namelen as u32,
        })
    }
}
