//! GETATTR, SETATTR and ACCESS.

use super::cred::{self, MAY_EXEC, MAY_READ, MAY_WRITE};
use super::sys;
use super::types::*;
use super::{Object, PosixShare};

impl PosixShare {
    /// `statx(AT_EMPTY_PATH)` on the object's `O_PATH` fd.
    pub fn getattr(&self, obj: &Object) -> PosixResult<PosixAttr> {
        sys::statx(obj.fd())
    }

    /// [`getattr`](Self::getattr) from what the kernel holds in memory
    /// (`statx(AT_STATX_DONT_SYNC)`: the object's fd pins its inode, so a
    /// local file system reads no disk and a network one asks no server).
    pub fn getattr_cached(&self, obj: &Object) -> PosixResult<PosixAttr> {
        sys::statx_cached(obj.fd())
    }

    /// Applies `attrs` as `cred` (RFC 8881 18.30). POSIX rules: the owner
    /// may chmod; only root chowns, the owner may chgrp to a group it is in;
    /// setting times to now needs write permission or ownership, to explicit
    /// times needs ownership; a size change needs write permission.
    pub fn setattr(
        &self,
        cred: &Credentials,
        obj: &Object,
        attrs: &SetAttrs,
    ) -> PosixResult<PosixAttr> {
        if !attrs.is_empty() {
            if !self.privileged {
                check_setattr(cred, &sys::statx(obj.fd())?, attrs)?;
            }
            let guard = self.as_cred(cred)?;
            apply_owner_mode_size(obj, attrs)?;
            let times = [attrs.atime, attrs.mtime];
            let only_now = times.contains(&Some(SetTime::ServerNow))
                && !times.iter().any(|t| matches!(t, Some(SetTime::Client(_))));
            match apply_times(obj, attrs) {
                // Linux lets a writer who is not the owner set both times to
                // now, but not one of them (utimensat(2)). NFS sets them
                // separately (RFC 8881 time_modify_set,
                // SET_TO_SERVER_TIME4) and, as knfsd does, write permission
                // is enough for that: checked as the client, done as us.
                Err(PosixError::Errno(libc::EPERM)) if only_now && guard.is_some() => {
                    sys::access_fd(obj.fd(), libc::W_OK)?;
                    drop(guard);
                    apply_times(obj, attrs)?;
                }
                r => r?,
            }
        }
        sys::statx(obj.fd())
    }

    /// RFC 8881 18.1: which of `requested` (the ACCESS4 bits) `cred` is
    /// allowed by the mode bits, as knfsd maps them: for a directory, READ
    /// is r, LOOKUP is x, MODIFY/EXTEND/DELETE need w and x; for anything
    /// else READ is r, MODIFY/EXTEND are w, EXECUTE is x, and LOOKUP/DELETE
    /// do not apply. Root passes read and write, and execute only where
    /// some x bit is set (always for directories).
    pub fn access(&self, cred: &Credentials, obj: &Object, requested: u32) -> PosixResult<u32> {
        let attr = sys::statx(obj.fd())?;
        let ok = |want| cred::mode_allows(cred, &attr, want);
        let mut granted = 0;
        let mut grant = |bit: u32, allowed: bool| {
            if requested & bit != 0 && allowed {
                granted |= bit;
            }
        };
        if attr.kind == ObjectKind::Directory {
            grant(ACCESS_READ, ok(MAY_READ));
            grant(ACCESS_LOOKUP, ok(MAY_EXEC));
            let wx = ok(MAY_WRITE | MAY_EXEC);
            grant(ACCESS_MODIFY, wx);
            grant(ACCESS_EXTEND, wx);
            grant(ACCESS_DELETE, wx);
        } else {
            grant(ACCESS_READ, ok(MAY_READ));
            grant(ACCESS_MODIFY, ok(MAY_WRITE));
            grant(ACCESS_EXTEND, ok(MAY_WRITE));
            grant(ACCESS_EXECUTE, ok(MAY_EXEC));
        }
        Ok(granted)
    }
}

/// Applies the attributes with the thread's current identity. Owner first
/// (a chown clears suid/sgid, so the mode must come after it), then mode,
/// size, and times last (a truncate moves mtime).
pub(crate) fn apply(obj: &Object, attrs: &SetAttrs) -> PosixResult<()> {
    apply_owner_mode_size(obj, attrs)?;
    apply_times(obj, attrs)
}

fn apply_owner_mode_size(obj: &Object, attrs: &SetAttrs) -> PosixResult<()> {
    let fd = obj.fd();
    if attrs.uid.is_some() || attrs.gid.is_some() {
        sys::chown_fd(
            fd,
            attrs.uid.unwrap_or(u32::MAX),
            attrs.gid.unwrap_or(u32::MAX),
        )?;
    }
    // Linux has no symlink modes; knfsd ignores a mode set on one too.
    if let (Some(mode), false) = (attrs.mode, obj.kind() == ObjectKind::Symlink) {
        sys::chmod_fd(fd, mode & 0o7777)?;
    }
    if let Some(size) = attrs.size {
        match obj.kind() {
            ObjectKind::File => sys::truncate_fd(fd, size)?,
            ObjectKind::Directory => return Err(PosixError::Errno(libc::EISDIR)),
            _ => return Err(PosixError::Errno(libc::EINVAL)),
        }
    }
    Ok(())
}

/// Times go last: a truncate moves mtime.
fn apply_times(obj: &Object, attrs: &SetAttrs) -> PosixResult<()> {
    let fd = obj.fd();
    let t = |s: Option<SetTime>| match s {
        None | Some(SetTime::DontChange) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(SetTime::ServerNow) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(SetTime::Client(ts)) => libc::timespec {
            tv_sec: ts.sec,
            tv_nsec: ts.nsec as i64,
        },
    };
    let times = [t(attrs.atime), t(attrs.mtime)];
    // An nsec of 1e9 or more is refused by the kernel (EINVAL).
    if times.iter().any(|t| t.tv_nsec != libc::UTIME_OMIT) {
        sys::utimens_fd(fd, &times)?;
    }
    Ok(())
}

/// What the kernel would check, for a server that cannot switch to the
/// client's identity.
fn check_setattr(cred: &Credentials, cur: &PosixAttr, attrs: &SetAttrs) -> PosixResult<()> {
    let root = cred.uid == 0;
    let owner = root || cred.uid == cur.uid;
    let eperm = Err(PosixError::Errno(libc::EPERM));
    if attrs.uid.is_some_and(|u| u != cur.uid) && !root {
        return eperm;
    }
    if let Some(g) = attrs.gid.filter(|&g| g != cur.gid) {
        if !(root || (owner && cred.in_group(g))) {
            return eperm;
        }
    }
    if attrs.mode.is_some() && !owner {
        return eperm;
    }
    let writable = cred::mode_allows(cred, cur, MAY_WRITE);
    if attrs.size.is_some() && !writable {
        return Err(PosixError::Errno(libc::EACCES));
    }
    for t in [attrs.atime, attrs.mtime] {
        match t {
            Some(SetTime::ServerNow) if !(owner || writable) => {
                return Err(PosixError::Errno(libc::EACCES))
            }
            Some(SetTime::Client(_)) if !owner => return eperm,
            _ => {}
        }
    }
    Ok(())
}
