//! OPEN with OPEN4_CREATE: creating (or, for UNCHECKED4 and a retried
//! EXCLUSIVE4_1, finding) a regular file.

use std::ffi::CStr;
use std::os::fd::AsRawFd;

use super::cred::{self, MAY_EXEC, MAY_WRITE};
use super::dir_ops::{change_of, dir_change};
use super::types::*;
use super::{attr, require_dir, sys, Object, PosixShare};

/// Where EXCLUSIVE4_1 keeps its verifier. `trusted.*` when the server runs
/// as root: clients cannot read or forge it through user xattrs, and
/// setting it needs no write permission on the file (the new file's mode
/// may deny its owner writing). An unprivileged server can only use
/// `user.*`.
const VERF_TRUSTED: &CStr = c"trusted.braid.nfs.verf";
const VERF_USER: &CStr = c"user.braid.nfs.verf";

/// A few rounds of "create failed: it exists" / "lookup failed: it is gone"
/// against a concurrent remover before giving up.
const RACE_RETRIES: usize = 4;

impl PosixShare {
    /// RFC 8881 18.16.3: creates a regular file `name` in `dir` as `cred`.
    /// UNCHECKED4 on an existing regular file returns it (created = false),
    /// truncating it when `attrs.size` is set, and applies no other
    /// attribute (as knfsd does). GUARDED4 fails with EEXIST. EXCLUSIVE4_1
    /// stores the verifier with the new file; a retry with the same verifier
    /// finds it (created = false), any other existing object is EEXIST.
    /// An existing directory is EISDIR, a symlink ELOOP, anything else that
    /// is not a regular file EINVAL.
    pub fn create_file(
        &self,
        cred: &Credentials,
        dir: &Object,
        name: &[u8],
        mode: u32,
        how: CreateMode,
        attrs: &SetAttrs,
    ) -> PosixResult<(Object, bool, DirChange)> {
        require_dir(dir)?;
        let c = validate_name(name)?;
        self.check_own(cred, dir, MAY_EXEC)?;
        let may_create = self.privileged
            || cred::mode_allows(cred, &sys::statx(dir.fd())?, MAY_WRITE | MAY_EXEC);
        let before = change_of(dir);
        let perm = mode & 0o7777;
        let verf_name = if self.privileged {
            VERF_TRUSTED
        } else {
            VERF_USER
        };
        let _as = self.as_cred(cred)?;
        for _ in 0..RACE_RETRIES {
            // Owner read/write until the attributes are in: a truncate or a
            // user.* xattr would otherwise be refused by the file's own mode.
            let initial = perm | 0o600;
            let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDONLY | libc::O_NOFOLLOW;
            let made = if may_create {
                self.retry_fds(|| sys::openat(dir.fd(), &c, flags, initial))
            } else {
                Err(PosixError::Errno(libc::EACCES))
            };
            match made {
                Ok(real) => {
                    // Keep only an O_PATH fd: a cached read fd would count
                    // as an open and, for one, block write leases.
                    let done = sys::reopen(real.as_raw_fd(), libc::O_PATH)
                        .and_then(|fd| self.make_object(fd))
                        .and_then(|obj| {
                            if let CreateMode::Exclusive { verifier } = how {
                                sys::set_xattr(obj.fd(), verf_name, &verifier)?;
                            }
                            finish_new_file(&obj, perm, attrs)?;
                            Ok(obj)
                        });
                    return match done {
                        Ok(obj) => Ok((obj, true, dir_change(before, dir))),
                        Err(e) => {
                            let _ = sys::unlinkat(dir.fd(), &c, 0);
                            Err(e)
                        }
                    };
                }
                Err(PosixError::Errno(libc::EEXIST)) if how == CreateMode::Guarded => {
                    return Err(PosixError::Errno(libc::EEXIST));
                }
                Err(PosixError::Errno(e)) if e == libc::EEXIST || !may_create => {
                    let fd = match sys::open_path_nofollow(dir.fd(), &c) {
                        Ok(fd) => fd,
                        // Removed since: try creating again.
                        Err(PosixError::Errno(libc::ENOENT)) if may_create => continue,
                        Err(PosixError::Errno(libc::ENOENT)) => {
                            return Err(PosixError::Errno(e));
                        }
                        Err(x) => return Err(x),
                    };
                    let existing = sys::statx(fd.as_raw_fd())?;
                    let obj = self.make_object(fd)?;
                    match how {
                        CreateMode::Exclusive { verifier } => {
                            let same = existing.kind == ObjectKind::File
                                && sys::get_xattr(obj.fd(), verf_name).ok().as_deref()
                                    == Some(&verifier[..]);
                            if !same {
                                return Err(PosixError::Errno(libc::EEXIST));
                            }
                        }
                        _ => {
                            match existing.kind {
                                ObjectKind::File => {}
                                ObjectKind::Directory => {
                                    return Err(PosixError::Errno(libc::EISDIR))
                                }
                                ObjectKind::Symlink => return Err(PosixError::Errno(libc::ELOOP)),
                                _ => return Err(PosixError::Errno(libc::EINVAL)),
                            }
                            if let Some(size) = attrs.size {
                                if !self.privileged {
                                    cred::require(cred, &existing, MAY_WRITE)?;
                                }
                                let only_size = SetAttrs {
                                    size: Some(size),
                                    ..SetAttrs::default()
                                };
                                attr::apply(&obj, &only_size)?;
                            }
                        }
                    }
                    return Ok((obj, false, dir_change(before, dir)));
                }
                Err(e) => return Err(e),
            }
        }
        Err(PosixError::Errno(libc::EAGAIN))
    }
}

/// The client's attributes on a file we just created (with owner rw), then
/// its final mode, exactly (the process umask does not apply to NFS clients,
/// which apply their own).
fn finish_new_file(obj: &Object, perm: u32, attrs: &SetAttrs) -> PosixResult<()> {
    let mut rest = SetAttrs {
        mode: None,
        ..attrs.clone()
    };
    if rest.size == Some(0) {
        // Already empty; a no-op that needs no permission.
        rest.size = None;
    }
    if !rest.is_empty() {
        attr::apply(obj, &rest)?;
    }
    let want = attrs.mode.unwrap_or(perm) & 0o7777;
    if sys::statx(obj.fd())?.mode != want {
        sys::chmod_fd(obj.fd(), want)?;
    }
    Ok(())
}
