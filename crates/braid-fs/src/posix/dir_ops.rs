//! Name operations: LOOKUP, LOOKUPP, CREATE (non-regular), LINK, RENAME,
//! REMOVE, READLINK. Each is one `*at` call on a directory fd and one
//! validated component, made as the client.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};

use super::cred::{MAY_EXEC, MAY_WRITE};
use super::types::*;
use super::{attr, handle, require_dir, sys, Object, PosixShare};

impl PosixShare {
    /// RFC 8881 18.13 LOOKUP. Needs search permission on `dir`; never
    /// follows a symlink (the symlink itself is the answer).
    pub fn lookup(&self, cred: &Credentials, dir: &Object, name: &[u8]) -> PosixResult<Object> {
        require_dir(dir)?;
        let c = validate_name(name)?;
        self.check_own(cred, dir, MAY_EXEC)?;
        let fd = {
            let _as = self.as_cred(cred)?;
            self.retry_fds(|| sys::open_path_nofollow(dir.fd(), &c))?
        };
        self.make_object(fd)
    }

    /// RFC 8881 18.14 LOOKUPP. None at the share root: its parent is not
    /// part of the share (the server goes to its pseudo-root instead).
    pub fn parent(&self, cred: &Credentials, dir: &Object) -> PosixResult<Option<Object>> {
        require_dir(dir)?;
        if dir.is_root() {
            return Ok(None);
        }
        self.check_own(cred, dir, MAY_EXEC)?;
        let fd = {
            let _as = self.as_cred(cred)?;
            self.retry_fds(|| {
                sys::openat(
                    dir.fd(),
                    c"..",
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                    0,
                )
            })?
        };
        self.make_object(fd).map(Some)
    }

    /// RFC 8881 18.4 CREATE: a directory, symlink, fifo, socket or device
    /// node. EEXIST if the name exists. `mode` is applied exactly (the
    /// process umask does not apply to NFS clients, which apply their own).
    pub fn create(
        &self,
        cred: &Credentials,
        dir: &Object,
        name: &[u8],
        kind: CreateKind,
        mode: u32,
        attrs: &SetAttrs,
    ) -> PosixResult<(Object, DirChange)> {
        require_dir(dir)?;
        let c = validate_name(name)?;
        self.check_own(cred, dir, MAY_WRITE | MAY_EXEC)?;
        let before = change_of(dir);
        let perm = mode & 0o7777;
        let _as = self.as_cred(cred)?;
        match kind {
            CreateKind::Directory => sys::mkdirat(dir.fd(), &c, perm)?,
            CreateKind::Symlink(target) => {
                let t = CString::new(target).map_err(|_| PosixError::Errno(libc::EINVAL))?;
                sys::symlinkat(&t, dir.fd(), &c)?
            }
            CreateKind::Fifo => sys::mknodat(dir.fd(), &c, libc::S_IFIFO | perm, 0)?,
            CreateKind::Socket => sys::mknodat(dir.fd(), &c, libc::S_IFSOCK | perm, 0)?,
            CreateKind::BlockDevice { major, minor } => sys::mknodat(
                dir.fd(),
                &c,
                libc::S_IFBLK | perm,
                libc::makedev(major, minor),
            )?,
            CreateKind::CharDevice { major, minor } => sys::mknodat(
                dir.fd(),
                &c,
                libc::S_IFCHR | perm,
                libc::makedev(major, minor),
            )?,
        }
        let done = self
            .retry_fds(|| sys::open_path_nofollow(dir.fd(), &c))
            .and_then(|fd| self.make_object(fd))
            .and_then(|obj| {
                finish_new(&obj, perm, attrs)?;
                Ok(obj)
            });
        match done {
            Ok(obj) => Ok((obj, dir_change(before, dir))),
            Err(e) => {
                // All or nothing: do not leave a half-made object behind.
                let flags = if matches!(kind, CreateKind::Directory) {
                    libc::AT_REMOVEDIR
                } else {
                    0
                };
                let _ = sys::unlinkat(dir.fd(), &c, flags);
                Err(e)
            }
        }
    }

    /// RFC 8881 18.9 LINK: a new name `name` in `dir` for `obj`. EISDIR for
    /// a directory (NFS4ERR_ISDIR).
    pub fn link(
        &self,
        cred: &Credentials,
        obj: &Object,
        dir: &Object,
        name: &[u8],
    ) -> PosixResult<DirChange> {
        require_dir(dir)?;
        if obj.kind() == ObjectKind::Directory {
            return Err(PosixError::Errno(libc::EISDIR));
        }
        let c = validate_name(name)?;
        self.check_own(cred, dir, MAY_WRITE | MAY_EXEC)?;
        let before = change_of(dir);
        {
            let _as = self.as_cred(cred)?;
            sys::link_fd(obj.fd(), dir.fd(), &c)?;
        }
        Ok(dir_change(before, dir))
    }

    /// RFC 8881 18.26 RENAME with POSIX rename(2) rules, which the kernel
    /// enforces: a directory over a non-empty directory is ENOTEMPTY or
    /// EEXIST, a file over a directory EISDIR, a directory over a file
    /// ENOTDIR; renaming onto another name of the same object succeeds and
    /// changes nothing. Returns (source dir change, target dir change).
    pub fn rename(
        &self,
        cred: &Credentials,
        from_dir: &Object,
        from: &[u8],
        to_dir: &Object,
        to: &[u8],
    ) -> PosixResult<(DirChange, DirChange)> {
        self.rename_checked(cred, from_dir, from, to_dir, to, |_| Ok(()))
    }

    /// As [`PosixShare::rename`], calling `check` first with the (dev,
    /// ino) of the object moved and of the one it replaces (if any): the
    /// server's chance to refuse (share modes of another protocol) or to
    /// recall what others cache of them, without looking them up again.
    pub fn rename_checked<E: From<PosixError>>(
        &self,
        cred: &Credentials,
        from_dir: &Object,
        from: &[u8],
        to_dir: &Object,
        to: &[u8],
        mut check: impl FnMut((u64, u64)) -> Result<(), E>,
    ) -> Result<(DirChange, DirChange), E> {
        require_dir(from_dir)?;
        require_dir(to_dir)?;
        let cf = validate_name(from)?;
        let ct = validate_name(to)?;
        self.check_own(cred, from_dir, MAY_WRITE | MAY_EXEC)?;
        self.check_own(cred, to_dir, MAY_WRITE | MAY_EXEC)?;
        let before_from = change_of(from_dir);
        let before_to = change_of(to_dir);
        let victim = {
            let _as = self.as_cred(cred)?;
            let source = sys::open_path_nofollow(from_dir.fd(), &cf)?;
            let victim = sys::open_path_nofollow(to_dir.fd(), &ct).ok();
            for fd in std::iter::once(&source).chain(victim.as_ref()) {
                let a = sys::statx(fd.as_raw_fd())?;
                check((a.dev, a.fileid))?;
            }
            sys::renameat(from_dir.fd(), &cf, to_dir.fd(), &ct)?;
            victim
        };
        if let Some(v) = victim {
            self.forget_if_gone(&v);
        }
        Ok((
            dir_change(before_from, from_dir),
            dir_change(before_to, to_dir),
        ))
    }

    /// RFC 8881 18.25 REMOVE: unlinkat, with AT_REMOVEDIR when the name is
    /// a directory.
    pub fn remove(&self, cred: &Credentials, dir: &Object, name: &[u8]) -> PosixResult<DirChange> {
        self.remove_checked(cred, dir, name, |_| Ok(()))
    }

    /// As [`PosixShare::remove`], calling `check` with the (dev, ino) of
    /// what the name holds before removing it (see `rename_checked`).
    pub fn remove_checked<E: From<PosixError>>(
        &self,
        cred: &Credentials,
        dir: &Object,
        name: &[u8],
        check: impl FnOnce((u64, u64)) -> Result<(), E>,
    ) -> Result<DirChange, E> {
        require_dir(dir)?;
        let c = validate_name(name)?;
        self.check_own(cred, dir, MAY_WRITE | MAY_EXEC)?;
        let before = change_of(dir);
        let victim = {
            let _as = self.as_cred(cred)?;
            let victim = sys::open_path_nofollow(dir.fd(), &c)?;
            let a = sys::statx(victim.as_raw_fd())?;
            check((a.dev, a.fileid))?;
            let is_dir = a.kind == ObjectKind::Directory;
            let flags = |d: bool| if d { libc::AT_REMOVEDIR } else { 0 };
            match sys::unlinkat(dir.fd(), &c, flags(is_dir)) {
                // The name was replaced by the other kind in between.
                Err(PosixError::Errno(libc::EISDIR | libc::ENOTDIR)) => {
                    sys::unlinkat(dir.fd(), &c, flags(!is_dir))?
                }
                r => r?,
            }
            victim
        };
        self.forget_if_gone(&victim);
        Ok(dir_change(before, dir))
    }

    /// RFC 8881 18.24 READLINK: the target bytes, uninterpreted.
    pub fn readlink(&self, obj: &Object) -> PosixResult<Vec<u8>> {
        if obj.kind() != ObjectKind::Symlink {
            return Err(PosixError::Errno(libc::EINVAL));
        }
        sys::readlink_fd(obj.fd())
    }

    /// Drops a cached object whose last link went away, so the cache does
    /// not keep a deleted file's blocks allocated until it is evicted (an
    /// open of it keeps it, and its handle working, until closed).
    pub(crate) fn forget_if_gone(&self, fd: &OwnedFd) {
        let Ok(a) = sys::statx(fd.as_raw_fd()) else {
            return;
        };
        if a.nlink != 0 {
            return;
        }
        if let Some(fds) = self.fds.get() {
            // Its kept fds (`meta/fd_cache.rs`) go now, with its space.
            fds.forget_inode(a.dev, a.fileid, crate::meta::fd_cache::DropReason::Unlinked);
        }
        if let Ok((ty, kernel)) = sys::name_to_handle(fd.as_raw_fd()) {
            if let Some(h) = handle::encode(&self.key, self.export_id, ty, &kernel) {
                self.cache.orphan(&h);
            }
        }
    }
}

/// The directory's change attribute, or 0 if it cannot be read (the change
/// info is advisory; the operation itself has already succeeded or failed).
pub(crate) fn change_of(dir: &Object) -> u64 {
    sys::statx(dir.fd()).map(|a| a.change).unwrap_or(0)
}

pub(crate) fn dir_change(before: u64, dir: &Object) -> DirChange {
    DirChange {
        before,
        after: change_of(dir),
        atomic: false,
    }
}

/// After creating `obj` with `perm`: put back the permission bits the
/// process umask took (NFS clients apply their own umask), then the
/// client's attributes. Special bits are left as the kernel set them (it
/// may inherit sgid from the directory or drop it for a non-member).
pub(crate) fn finish_new(obj: &Object, perm: u32, attrs: &SetAttrs) -> PosixResult<()> {
    if obj.kind() != ObjectKind::Symlink && attrs.mode.is_none() {
        let got = sys::statx(obj.fd())?.mode;
        if perm & 0o777 & !got != 0 {
            sys::chmod_fd(obj.fd(), got | (perm & 0o777))?;
        }
    }
    if !attrs.is_empty() {
        attr::apply(obj, attrs)?;
    }
    Ok(())
}
