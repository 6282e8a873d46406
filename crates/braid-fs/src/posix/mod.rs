//! The POSIX, handle-based face of the file service, for NFSv4.1.
//!
//! NFS needs POSIX semantics (case-sensitive names, hard links, symlinks,
//! fifos/sockets/devices, mode bits, numeric owners), so this layer works on
//! objects, not paths: every object is an `O_PATH` fd and every name
//! operation is an `*at` syscall relative to a directory fd with one
//! validated name component. Nothing is resolved by path, so nothing a
//! client sends can walk outside the share: names are one component (not
//! empty, at most 255 bytes, no '/', no NUL, not "." or ".."), lookups never
//! follow symlinks, and the parent of the share root is refused.
//!
//! Handles are described in `handle.rs`; credentials in `cred.rs`.
//!
//! One share is one file system: a lookup that would cross a mount point
//! fails with EXDEV, because a kernel handle means nothing on another file
//! system. Handles are bound to inodes, not paths (like knfsd's
//! `no_subtree_check`): an object a client once reached and a local user then
//! moved out of the share stays reachable by its handle.

mod attr;
mod create;
mod cred;
mod dir_ops;
mod handle;
mod io;
mod object;
mod readdir;
mod sys;
mod types;
mod xattr;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

pub use cred::{current_fsgid, current_fsuid};
pub use handle::MAX_HANDLE;
pub use io::{cached_size, clone_range, read_into_vec, read_into_vec_nowait, OpenFile};
pub use object::Object;
pub use types::*;
pub use xattr::{XattrSet, XATTR_NAME_MAX, XATTR_SIZE_MAX};

use cred::CredGuard;
use handle::HandleCache;
use object::ObjectInner;

/// Objects the handle cache keeps by default (each holds one fd).
pub const DEFAULT_CACHE_ENTRIES: usize = 16384;

pub struct PosixShare {
    export_id: u32,
    key: [u8; 32],
    root: Object,
    /// A real (not O_PATH) fd of the root: open_by_handle_at refuses O_PATH
    /// mount fds. None when we may not read the root (then only cached
    /// handles resolve).
    mount_fd: Option<OwnedFd>,
    cache: HandleCache,
    /// Running as root: switch to the client's fs ids per call and let the
    /// kernel check; otherwise check mode bits here.
    privileged: bool,
    /// The fds of closed files kept for the opens that follow
    /// (`meta/fd_cache.rs`), with the share's metadata cache.
    fds: std::sync::OnceLock<Arc<crate::meta::FdCache>>,
}

impl PosixShare {
    /// `export_id` is a stable number for this share (the server derives it
    /// from the share name); `key` is the server's persistent 32-byte handle
    /// key (the server keeps it in its state dir, 0600).
    pub fn new(root: &Path, export_id: u32, key: [u8; 32]) -> std::io::Result<PosixShare> {
        PosixShare::with_cache(root, export_id, key, DEFAULT_CACHE_ENTRIES)
    }

    /// As [`PosixShare::new`], with the handle cache bounded to `entries`.
    pub fn with_cache(
        root: &Path,
        export_id: u32,
        key: [u8; 32],
        entries: usize,
    ) -> std::io::Result<PosixShare> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(root.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        let fd =
            sys::openat(libc::AT_FDCWD, &c, libc::O_PATH | libc::O_DIRECTORY, 0).map_err(to_io)?;
        let attr = sys::statx(fd.as_raw_fd()).map_err(to_io)?;
        let mount_fd = sys::reopen(fd.as_raw_fd(), libc::O_RDONLY | libc::O_DIRECTORY).ok();
        let (ty, kernel) = sys::name_to_handle(fd.as_raw_fd()).map_err(to_io)?;
        let handle = handle::encode(&key, export_id, ty, &kernel)
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EOVERFLOW))?;
        let root = Object(Arc::new(ObjectInner {
            fd,
            handle,
            kind: attr.kind,
            dev: attr.dev,
            ino: attr.fileid,
            is_root: true,
        }));
        // SAFETY: geteuid cannot fail.
        let privileged = unsafe { libc::geteuid() } == 0;
        Ok(PosixShare {
            export_id,
            key,
            root,
            mount_fd,
            cache: HandleCache::new(entries),
            privileged,
            fds: std::sync::OnceLock::new(),
        })
    }

    /// A fresh random handle key, for a server that has none stored yet.
    pub fn generate_key() -> [u8; 32] {
        rand::random()
    }

    /// Keep the fds of closed files for the opens that follow
    /// (`meta/fd_cache.rs`). Set once, before the share is served.
    pub fn set_fd_cache(&self, cache: Arc<crate::meta::FdCache>) {
        let _ = self.fds.set(cache);
    }

    /// The share's kept fds, if it keeps any.
    pub fn fd_cache(&self) -> Option<Arc<crate::meta::FdCache>> {
        self.fds.get().cloned()
    }

    pub fn export_id(&self) -> u32 {
        self.export_id
    }

    pub fn root(&self) -> Object {
        self.root.clone()
    }

    /// Reads only the export id from a wire handle (the server picks the
    /// share by it); None if malformed. The MAC is checked by `resolve`.
    pub fn export_id_of(handle: &[u8]) -> Option<u32> {
        handle::parse(handle).map(|p| p.export_id)
    }

    /// [`resolve`](Self::resolve) without waiting: the object when the
    /// handle is the root's or a kept object's that still has links (its
    /// link count read by [`sys::statx_cached`], which reads no disk);
    /// `Ok(None)` when answering needs more (an `open_by_handle_at`, an
    /// object gone or orphaned): the caller then calls `resolve` where it
    /// may wait. Malformed or forged handles fail here as there.
    pub fn resolve_cached(&self, handle: &[u8]) -> PosixResult<Option<Object>> {
        let p = handle::parse(handle).ok_or(PosixError::BadHandle)?;
        if p.export_id != self.export_id || !p.mac_ok(&self.key) {
            return Err(PosixError::BadHandle);
        }
        if handle == self.root.handle() {
            return Ok(Some(self.root()));
        }
        let Some(inner) = self.cache.get(handle) else {
            return Ok(None);
        };
        let obj = Object(inner);
        Ok(match sys::statx_cached(obj.fd()) {
            Ok(a) if a.nlink > 0 => Some(obj),
            _ => None,
        })
    }

    /// RFC 8881 4.2.2 (persistent filehandles): resolves a handle this share
    /// issued. BadHandle if it is malformed, its MAC is wrong or it belongs
    /// to another export; Stale if the object is gone (not resolvable any
    /// more, or a non-directory with no links left, or a removed directory).
    pub fn resolve(&self, handle: &[u8]) -> PosixResult<Object> {
        let p = handle::parse(handle).ok_or(PosixError::BadHandle)?;
        if p.export_id != self.export_id || !p.mac_ok(&self.key) {
            return Err(PosixError::BadHandle);
        }
        if handle == self.root.handle() {
            return Ok(self.root());
        }
        if let Some(inner) = self.cache.get(handle) {
            let obj = Object(inner);
            match sys::statx(obj.fd()) {
                // rmdir and the last unlink both leave nlink 0.
                Ok(a) if a.nlink > 0 => return Ok(obj),
                Ok(_) => {
                    drop(obj);
                    self.cache.orphan(handle);
                }
                Err(_) => {
                    self.cache.remove(handle);
                    return Err(PosixError::Stale);
                }
            }
        }
        // RFC 8881 4.2.3: a removed object's handle is stale, except while
        // the server itself holds the object open (an NFS open of it): then,
        // as knfsd does, the handle still works (pynfs RNM21: CLOSE after a
        // RENAME replaced the open file).
        if let Some(inner) = self.cache.get_orphan(handle) {
            return Ok(Object(inner));
        }
        let Some(mount_fd) = &self.mount_fd else {
            return Err(PosixError::Stale);
        };
        let open = || sys::open_by_handle(mount_fd.as_raw_fd(), p.ty, p.kernel);
        let fd = match self.retry_fds(open) {
            Ok(fd) => fd,
            // ESTALE/ENOENT: gone. EPERM: an unprivileged server cannot
            // open by handle, so an uncached handle is as good as gone.
            Err(PosixError::Errno(e @ (libc::EMFILE | libc::ENFILE | libc::ENOMEM))) => {
                return Err(PosixError::Errno(e))
            }
            Err(_) => return Err(PosixError::Stale),
        };
        let attr = sys::statx(fd.as_raw_fd()).map_err(|_| PosixError::Stale)?;
        if attr.dev != self.root.0.dev || attr.nlink == 0 {
            return Err(PosixError::Stale);
        }
        let obj = ObjectInner {
            fd,
            handle: handle.to_vec(),
            kind: attr.kind,
            dev: attr.dev,
            ino: attr.fileid,
            is_root: false,
        };
        Ok(Object(self.cache.insert(Arc::new(obj))))
    }

    /// Wraps a fresh `O_PATH` fd into an Object, reusing the cached one
    /// when there is one.
    pub(crate) fn make_object(&self, fd: OwnedFd) -> PosixResult<Object> {
        let attr = sys::statx(fd.as_raw_fd())?;
        if attr.dev != self.root.0.dev {
            return Err(PosixError::Errno(libc::EXDEV));
        }
        if (attr.dev, attr.fileid) == self.root.key() {
            return Ok(self.root());
        }
        let (ty, kernel) = sys::name_to_handle(fd.as_raw_fd())?;
        let handle = handle::encode(&self.key, self.export_id, ty, &kernel)
            .ok_or(PosixError::Errno(libc::EOVERFLOW))?;
        let inner = ObjectInner {
            fd,
            handle,
            kind: attr.kind,
            dev: attr.dev,
            ino: attr.fileid,
            is_root: false,
        };
        Ok(Object(self.cache.insert(Arc::new(inner))))
    }

    /// Runs `f`, and once more after halving the cache if it ran out of fds:
    /// the cache is the one big holder of fds we can give back.
    pub(crate) fn retry_fds<T>(&self, mut f: impl FnMut() -> PosixResult<T>) -> PosixResult<T> {
        match f() {
            Err(PosixError::Errno(libc::EMFILE | libc::ENFILE)) => {
                self.cache.shrink();
                f()
            }
            r => r,
        }
    }

    /// The client's identity on this thread while the guard lives (root
    /// server only; an unprivileged one checks mode bits instead).
    pub(crate) fn as_cred(&self, cred: &Credentials) -> PosixResult<Option<CredGuard>> {
        if self.privileged {
            CredGuard::enter(cred).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Mode-bit check done here only when the kernel will not do it as the
    /// client (unprivileged server).
    pub(crate) fn check_own(&self, cred: &Credentials, obj: &Object, want: u32) -> PosixResult<()> {
        if self.privileged {
            return Ok(());
        }
        cred::require(cred, &sys::statx(obj.fd())?, want)
    }
}

pub(crate) fn require_dir(dir: &Object) -> PosixResult<()> {
    if dir.kind() == ObjectKind::Directory {
        Ok(())
    } else {
        Err(PosixError::Errno(libc::ENOTDIR))
    }
}

fn to_io(e: PosixError) -> std::io::Error {
    match e {
        PosixError::Errno(n) => std::io::Error::from_raw_os_error(n),
        other => std::io::Error::other(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_is_bounded() {
        let dir = std::env::temp_dir().join(format!("braid-posix-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..200 {
            std::fs::write(dir.join(format!("f{i}")), b"").unwrap();
        }
        let share = PosixShare::with_cache(&dir, 1, [1; 32], 32).unwrap();
        let root = share.root();
        let cred = Credentials::root();
        for i in 0..200 {
            share
                .lookup(&cred, &root, format!("f{i}").as_bytes())
                .unwrap();
        }
        assert!(share.cache.len() <= 32, "{}", share.cache.len());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// What an unprivileged server does: mode-bit checks here, and only
    /// cached handles resolve. (Run as root, with the privilege switched off.)
    #[test]
    fn unprivileged_checks_mode_bits_itself() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("braid-posix-unpriv-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("private")).unwrap();
        std::fs::write(dir.join("secret"), b"s").unwrap();
        std::fs::set_permissions(dir.join("private"), PermissionsExt::from_mode(0o700)).unwrap();
        std::fs::set_permissions(dir.join("secret"), PermissionsExt::from_mode(0o600)).unwrap();
        let privileged = PosixShare::new(&dir, 1, [1; 32]).unwrap();
        let uncached = privileged
            .lookup(&Credentials::root(), &privileged.root(), b"secret")
            .unwrap()
            .handle()
            .to_vec();
        let mut share = PosixShare::new(&dir, 1, [1; 32]).unwrap();
        share.privileged = false;
        share.mount_fd = None;
        let u = Credentials {
            uid: 1234,
            gid: 1234,
            groups: vec![],
        };
        let root = share.root();
        let eacces = Err(PosixError::Errno(libc::EACCES));
        let eperm = Err(PosixError::Errno(libc::EPERM));
        assert_eq!(share.resolve(&uncached).map(|_| ()), Err(PosixError::Stale));
        let private = share.lookup(&u, &root, b"private").unwrap();
        let secret = share.lookup(&u, &root, b"secret").unwrap();
        assert_eq!(share.resolve(secret.handle()).unwrap(), secret);
        assert_eq!(share.lookup(&u, &private, b"x").map(|_| ()), eacces);
        assert_eq!(share.readdir(&u, &private, 0, 9).map(|_| ()), eacces);
        let none = SetAttrs::default();
        let mk = share.create_file(&u, &private, b"n", 0o644, CreateMode::Unchecked, &none);
        assert_eq!(mk.map(|_| ()), eacces);
        assert_eq!(share.remove(&u, &root, b"secret").map(|_| ()), eacces);
        assert_eq!(
            share.open_file(&u, &secret, true, false, false).map(|_| ()),
            eacces
        );
        let chown = SetAttrs {
            uid: Some(1234),
            ..SetAttrs::default()
        };
        assert_eq!(share.setattr(&u, &secret, &chown).map(|_| ()), eperm);
        let chmod = SetAttrs {
            mode: Some(0o777),
            ..SetAttrs::default()
        };
        assert_eq!(share.setattr(&u, &secret, &chmod).map(|_| ()), eperm);
        assert!(share
            .open_file(&Credentials::root(), &secret, true, true, false)
            .is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
