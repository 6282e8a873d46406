//! Resource forks kept in AppleDouble sidecars (`._NAME` next to `NAME`,
//! `apple_double.rs`), as Samba's vfs_fruit keeps them with its default
//! `fruit:resource = file` and netatalk always did: a share written by
//! either reads the same through Braid, and a resource fork is not held to
//! the 64 KiB of one xattr. Per share ([`crate::ShareRef::set_apple_double`]).
//!
//! A sidecar macOS wrote itself (copying to a share without streams, or a
//! tool such as `dot_clean` not run) carries the file's Finder info and
//! its other extended attributes too. The first time Braid looks at such a
//! sidecar it converts it as vfs_fruit does (Samba `ad_convert`): each
//! packed attribute becomes a named stream, the Finder info becomes the
//! AFP_AfpInfo stream, and the sidecar is rewritten to hold the resource
//! fork only; optionally a blank resource fork is dropped and a sidecar
//! left empty deleted.
//!
//! Every access opens the sidecar by path and holds an exclusive `flock`
//! on it while it reads the header and works, so that opens of one
//! resource fork through different handles see one length.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::apple_double::{
    stream_name_of_xattr, Sidecar, BLANK_RESOURCE_FORK, FILLER_MACOS, FILLER_NETATALK, MAX_HEADER,
    RESOURCE_FORK_OFFSET,
};
use crate::error::{FsError, FsResult};
use crate::mac_listing::AFP_INFO_STREAM;
use crate::share::ShareRef;
use crate::{mac_streams, path, stream, sys};

/// How a share keeps resource forks and treats the sidecars it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AppleDoubleOptions {
    /// Keep AFP_Resource in `._NAME` sidecars instead of a named stream.
    pub resource_fork_in_sidecar: bool,
    /// On conversion, drop the resource fork macOS writes for a file that
    /// has none (Samba `fruit:wipe_intentionally_left_blank_rfork`).
    pub wipe_blank_resource_fork: bool,
    /// On conversion, delete a sidecar left with an empty resource fork
    /// (Samba `fruit:delete_empty_adfiles`).
    pub delete_empty_sidecars: bool,
}

/// A resource fork can grow to what the sidecar header can describe.
const MAX_RESOURCE_FORK: u64 = u32::MAX as u64;
/// Moving a resource fork within its sidecar goes in pieces of this.
const MOVE_CHUNK: usize = 1 << 20;

/// The share-relative path of the sidecar of `rel` (not of the root).
pub(crate) fn sidecar_rel(rel: &str) -> Option<String> {
    if rel.is_empty() {
        return None;
    }
    let (parent, name) = path::split_last(rel);
    Some(path::join(parent, &format!("._{name}")))
}

/// An open, locked, parsed sidecar.
pub(crate) struct ResourceFork {
    fd: OwnedFd,
    ad: Sidecar,
    /// Opened for writing (not so on a read-only share, or for a sidecar
    /// the server may only read).
    writable: bool,
}

impl ResourceFork {
    /// The sidecar of the file at `rel` (whose descriptor is `base_fd`),
    /// converted if macOS wrote it and the share is writable; `None` when
    /// there is none, it is not a valid AppleDouble, or conversion deleted
    /// it.
    pub(crate) fn open(share: &ShareRef, base_fd: RawFd, rel: &str) -> FsResult<Option<Self>> {
        let Some(side) = sidecar_rel(rel) else {
            return Ok(None);
        };
        let root = share.0.root_fd();
        let mut writable = share.0.check_writable().is_ok();
        let flags = if writable {
            libc::O_RDWR
        } else {
            libc::O_RDONLY
        };
        let opened = match path::open_beneath(root, &side, flags | FLAGS, 0) {
            // A sidecar this process may only read is used as it is.
            Err(libc::EACCES | libc::EPERM | libc::EROFS) if writable => {
                writable = false;
                path::open_beneath(root, &side, libc::O_RDONLY | FLAGS, 0)
            }
            r => r,
        };
        let fd = match opened {
            Ok(fd) => fd,
            Err(libc::ENOENT | libc::ENOTDIR | libc::ELOOP) => return Ok(None),
            Err(e) => return Err(FsError::from_errno(e)),
        };
        let Some(mut rf) = Self::parse(fd, writable)? else {
            return Ok(None);
        };
        if writable && !rf.convert(share, base_fd)? {
            let _ = unlink_at_root(share, &side);
            return Ok(None);
        }
        Ok(Some(rf))
    }

    /// As [`ResourceFork::open`], creating an empty sidecar when there is
    /// none (or one that is not valid AppleDouble, which is replaced).
    pub(crate) fn open_or_create(share: &ShareRef, base_fd: RawFd, rel: &str) -> FsResult<Self> {
        share.0.check_writable()?;
        if let Some(rf) = Self::open(share, base_fd, rel)? {
            return Ok(rf);
        }
        let side = sidecar_rel(rel).ok_or(FsError::InvalidParameter)?;
        let mode = share.0.create_mode(false).unwrap_or(0o666);
        let fd = path::open_beneath(
            share.0.root_fd(),
            &side,
            libc::O_RDWR | libc::O_CREAT | FLAGS,
            mode,
        )
        .map_err(FsError::from_errno)?;
        lock(fd.as_raw_fd())?;
        // Someone may have created it between the two opens.
        let st = sys::fstat(fd.as_raw_fd())?;
        if let Some(rf) = Self::parse_locked(fd.as_raw_fd(), st.st_size as u64)? {
            return Ok(ResourceFork {
                fd,
                ad: rf,
                writable: true,
            });
        }
        if st.st_size != 0 {
            // Not AppleDouble: someone's file of that name, not to be
            // overwritten with a resource fork.
            tracing::warn!(path = %side, "not an AppleDouble file: resource fork not written");
            return Err(FsError::AccessDenied);
        }
        let ad = Sidecar::empty();
        sys::pwrite(fd.as_raw_fd(), &ad.header(), 0)?;
        sys::check(unsafe { libc::ftruncate(fd.as_raw_fd(), RESOURCE_FORK_OFFSET as i64) })?;
        Ok(ResourceFork {
            fd,
            ad,
            writable: true,
        })
    }

    fn parse(fd: OwnedFd, writable: bool) -> FsResult<Option<Self>> {
        lock(fd.as_raw_fd())?;
        let st = sys::fstat(fd.as_raw_fd())?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Ok(None);
        }
        let ad = Self::parse_locked(fd.as_raw_fd(), st.st_size as u64)?;
        Ok(ad.map(|ad| ResourceFork { fd, ad, writable }))
    }

    fn parse_locked(fd: RawFd, size: u64) -> FsResult<Option<Sidecar>> {
        let want = size.min(MAX_HEADER as u64) as usize;
        let mut buf = vec![0u8; want];
        let n = read_full(fd, &mut buf, 0)?;
        Ok(Sidecar::parse(&buf[..n], size))
    }

    pub(crate) fn len(&self) -> u64 {
        self.ad.resource_fork_len
    }

    /// Read up to `len` bytes at `offset` of the resource fork, appended
    /// to `buf`.
    pub(crate) fn read_at(&self, offset: u64, len: usize, buf: &mut Vec<u8>) -> FsResult<usize> {
        let end = self.len();
        if offset >= end {
            return Ok(0);
        }
        let n = (end - offset).min(len as u64) as usize;
        let start = buf.len();
        buf.resize(start + n, 0);
        let at = self.ad.resource_fork_offset + offset;
        let got = read_full(self.fd.as_raw_fd(), &mut buf[start..], at)?;
        buf.truncate(start + got);
        Ok(got)
    }

    /// Write `data` at `offset` of the resource fork, growing it.
    pub(crate) fn write_at(&mut self, offset: u64, data: &[u8]) -> FsResult<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|e| *e <= MAX_RESOURCE_FORK)
            .ok_or(FsError::DiskFull)?;
        self.need_writable()?;
        self.make_plain()?;
        sys::pwrite(self.fd.as_raw_fd(), data, RESOURCE_FORK_OFFSET + offset)?;
        if end > self.ad.resource_fork_len {
            self.ad.resource_fork_len = end;
            self.write_header()?;
        }
        Ok(data.len())
    }

    /// Set the resource fork's length (FileEndOfFileInformation).
    pub(crate) fn set_len(&mut self, size: u64) -> FsResult<()> {
        if size > MAX_RESOURCE_FORK {
            return Err(FsError::DiskFull);
        }
        self.need_writable()?;
        self.make_plain()?;
        let fd = self.fd.as_raw_fd();
        sys::check(unsafe { libc::ftruncate(fd, (RESOURCE_FORK_OFFSET + size) as i64) })?;
        self.ad.resource_fork_len = size;
        self.write_header()
    }

    /// Zero `offset..end` of the resource fork, within its length.
    pub(crate) fn zero_range(&mut self, offset: u64, end: u64) -> FsResult<()> {
        let end = end.min(self.len());
        let mut at = offset;
        let zeros = vec![0u8; MOVE_CHUNK.min(end.saturating_sub(offset) as usize)];
        while at < end {
            let n = ((end - at) as usize).min(zeros.len());
            self.write_at(at, &zeros[..n])?;
            at += n as u64;
        }
        Ok(())
    }

    fn need_writable(&self) -> FsResult<()> {
        if self.writable {
            Ok(())
        } else {
            Err(FsError::AccessDenied)
        }
    }

    fn write_header(&self) -> FsResult<()> {
        sys::pwrite(self.fd.as_raw_fd(), &self.ad.header(), 0)?;
        Ok(())
    }

    /// Move the resource fork to right after the Finder info (where it is
    /// in every sidecar but one macOS wrote with attributes, which
    /// conversion has dealt with unless the share is read-only).
    fn make_plain(&mut self) -> FsResult<()> {
        if self.ad.is_plain() {
            return Ok(());
        }
        let fd = self.fd.as_raw_fd();
        let (from, len) = (self.ad.resource_fork_offset, self.ad.resource_fork_len);
        // The fork only moves towards the start: copying forwards in
        // pieces never overwrites what is still to be read.
        let mut buf = vec![0u8; MOVE_CHUNK.min(len as usize)];
        let mut done = 0u64;
        while done < len {
            let n = ((len - done) as usize).min(buf.len());
            let got = read_full(fd, &mut buf[..n], from + done)?;
            if got == 0 {
                break;
            }
            sys::pwrite(fd, &buf[..got], RESOURCE_FORK_OFFSET + done)?;
            done += got as u64;
        }
        self.ad.xattrs.clear();
        self.ad.resource_fork_offset = RESOURCE_FORK_OFFSET;
        self.ad.resource_fork_len = done;
        self.write_header()?;
        sys::check(unsafe { libc::ftruncate(fd, (RESOURCE_FORK_OFFSET + done) as i64) })
    }

    /// Samba `ad_convert`: a sidecar macOS wrote gives its attributes and
    /// Finder info to the file's streams and keeps only the resource fork.
    /// Returns false when the sidecar should go (emptied by conversion on
    /// a share that deletes empty ones).
    fn convert(&mut self, share: &ShareRef, base_fd: RawFd) -> FsResult<bool> {
        let opts = share.apple_double();
        let mut converted = false;
        if !self.ad.xattrs.is_empty() {
            for x in &self.ad.xattrs {
                let name = stream_name_of_xattr(&x.name);
                let Ok(xn) = stream::xattr_name(&name) else {
                    tracing::debug!(name = %x.name, "AppleDouble attribute with no stream name");
                    continue;
                };
                if let Err(e) = stream::write(base_fd, &xn, &x.value) {
                    tracing::debug!(name = %x.name, error = %e, "AppleDouble attribute not converted");
                }
            }
            self.make_plain()?;
            converted = true;
        }
        if opts.wipe_blank_resource_fork && self.len() == BLANK_RESOURCE_FORK.len() as u64 {
            let mut fork = Vec::with_capacity(BLANK_RESOURCE_FORK.len());
            self.read_at(0, BLANK_RESOURCE_FORK.len(), &mut fork)?;
            if fork == BLANK_RESOURCE_FORK {
                self.set_len(0)?;
                converted = true;
            }
        }
        if self.ad.filler == FILLER_MACOS {
            if self.ad.finder_info.iter().any(|b| *b != 0) {
                let mut ai = mac_streams::default_afpinfo();
                ai[16..48].copy_from_slice(&self.ad.finder_info);
                let xn = match mac_streams::find(share, base_fd, AFP_INFO_STREAM)? {
                    Some(x) => x,
                    None => mac_streams::xattr_for(share, AFP_INFO_STREAM)?,
                };
                stream::write(base_fd, &xn, &ai)?;
            }
            // Converted once: a later AfpInfo written by a client is not
            // overwritten by the sidecar's old Finder info.
            self.ad.filler = FILLER_NETATALK;
            self.write_header()?;
            converted = true;
        }
        Ok(!(converted && opts.delete_empty_sidecars && self.len() == 0))
    }
}

/// Open flags of every sidecar access: never through a symlink.
const FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC;

fn lock(fd: RawFd) -> FsResult<()> {
    loop {
        // SAFETY: plain syscall on an fd we own.
        if unsafe { libc::flock(fd, libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = crate::error::last_errno();
        if e != libc::EINTR {
            return Err(FsError::from_errno(e));
        }
    }
}

/// `pread` until `buf` is full or the file ends.
fn read_full(fd: RawFd, buf: &mut [u8], offset: u64) -> FsResult<usize> {
    let mut done = 0;
    while done < buf.len() {
        let n = sys::pread(fd, &mut buf[done..], offset + done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

fn unlink_at_root(share: &ShareRef, side: &str) -> FsResult<()> {
    let (parent, name) = path::split_last(side);
    let pfd = path::open_beneath(
        share.0.root_fd(),
        parent,
        libc::O_PATH | libc::O_DIRECTORY,
        0,
    )
    .map_err(FsError::from_errno)?;
    unlink_in(pfd.as_raw_fd(), name)
}

fn unlink_in(dirfd: RawFd, sidecar_name: &str) -> FsResult<()> {
    let c = sys::cstr(sidecar_name)?;
    // SAFETY: plain syscall on a single component.
    match sys::check(unsafe { libc::unlinkat(dirfd, c.as_ptr(), 0) }) {
        Err(FsError::NotFound) | Ok(()) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The file `name` in directory `dirfd` was deleted: its sidecar goes too
/// (Samba `fruit_unlink_rsrc_adouble`).
pub(crate) fn file_deleted(share: &ShareRef, dirfd: RawFd, name: &str) {
    if !share.apple_double().resource_fork_in_sidecar {
        return;
    }
    if let Err(e) = unlink_in(dirfd, &format!("._{name}")) {
        tracing::debug!(name, error = %e, "removing the AppleDouble sidecar of a deleted file");
    }
}

/// Delete-on-close of an empty AFP_Resource: its sidecar goes.
pub(crate) fn remove(share: &ShareRef, rel: &str) -> FsResult<()> {
    match sidecar_rel(rel) {
        Some(side) => match unlink_at_root(share, &side) {
            Err(FsError::NotFound | FsError::PathNotFound) => Ok(()),
            r => r,
        },
        None => Ok(()),
    }
}

/// The file `old` was renamed to `new` (share-relative): its sidecar
/// follows, replacing any at the new name (Samba `fruit_rename`).
pub(crate) fn file_renamed(share: &ShareRef, old: &str, new: &str) {
    if !share.apple_double().resource_fork_in_sidecar {
        return;
    }
    let (Some(from), Some(to)) = (sidecar_rel(old), sidecar_rel(new)) else {
        return;
    };
    if let Err(e) = rename_sidecar(share, &from, &to) {
        if !matches!(e, FsError::NotFound) {
            tracing::debug!(from, to, error = %e, "renaming an AppleDouble sidecar");
        }
    }
}

fn rename_sidecar(share: &ShareRef, from: &str, to: &str) -> FsResult<()> {
    let root = share.0.root_fd();
    let dir = |rel: &str| {
        path::open_beneath(root, rel, libc::O_PATH | libc::O_DIRECTORY, 0)
            .map_err(FsError::from_errno)
    };
    let ((fp, fname), (tp, tname)) = (path::split_last(from), path::split_last(to));
    let (fdir, tdir) = (dir(fp)?, dir(tp)?);
    let (f, t) = (sys::cstr(fname)?, sys::cstr(tname)?);
    // SAFETY: plain syscall on single components of directories opened
    // beneath the share root.
    sys::check(unsafe {
        libc::renameat(fdir.as_raw_fd(), f.as_ptr(), tdir.as_raw_fd(), t.as_ptr())
    })
}
