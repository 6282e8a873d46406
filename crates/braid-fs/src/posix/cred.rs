//! Running a syscall as the client, and the mode-bit checks used when we
//! cannot (an unprivileged server).
//!
//! A root server switches the calling thread's fsuid, fsgid and
//! supplementary groups to the request's credentials for the duration of
//! one operation, so the kernel makes every permission decision (ACLs,
//! sticky directories, protected_hardlinks included) and new objects get
//! the client's owner. Raw syscalls are used because glibc's wrappers
//! broadcast id changes to every thread of the process (POSIX wants
//! process-wide ids; we want exactly one thread). Changing the fsuid away
//! from 0 also drops CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_MKNOD...
//! from the thread's effective set, and setting it back to 0 restores them
//! (capabilities(7), "Effect of user ID changes on capabilities").

use std::marker::PhantomData;

use super::types::{Credentials, PosixAttr, PosixError, PosixResult};

/// AUTH_SYS carries at most 16 groups (RFC 5531 appendix A); the kernel
/// limit is far higher, this only bounds what we copy.
const MAX_GROUPS: usize = 65536;

/// Restores the thread's previous fs ids and groups when dropped. Not
/// `Send`: the ids belong to the thread that set them.
pub(crate) struct CredGuard {
    prev_uid: u32,
    prev_gid: u32,
    prev_groups: Vec<libc::gid_t>,
    _thread_bound: PhantomData<*const ()>,
}

fn setfsuid(uid: u32) -> u32 {
    // SAFETY: plain syscall, affects only the calling thread.
    unsafe { libc::syscall(libc::SYS_setfsuid, uid) as u32 }
}

fn setfsgid(gid: u32) -> u32 {
    // SAFETY: plain syscall, affects only the calling thread.
    unsafe { libc::syscall(libc::SYS_setfsgid, gid) as u32 }
}

fn setgroups(groups: &[libc::gid_t]) -> PosixResult<()> {
    // SAFETY: the pointer is valid for groups.len() entries.
    let r = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    if r < 0 {
        Err(super::sys::err())
    } else {
        Ok(())
    }
}

fn getgroups() -> PosixResult<Vec<libc::gid_t>> {
    // SAFETY: size 0 only asks for the count.
    let n = unsafe { libc::syscall(libc::SYS_getgroups, 0, std::ptr::null_mut::<libc::gid_t>()) };
    if n < 0 {
        return Err(super::sys::err());
    }
    let mut v = vec![0 as libc::gid_t; (n as usize).min(MAX_GROUPS)];
    // SAFETY: the buffer holds v.len() entries.
    let n = unsafe { libc::syscall(libc::SYS_getgroups, v.len(), v.as_mut_ptr()) };
    if n < 0 {
        return Err(super::sys::err());
    }
    v.truncate(n as usize);
    Ok(v)
}

/// The calling thread's fsuid (setfsuid with an invalid id only reports).
pub fn current_fsuid() -> u32 {
    setfsuid(u32::MAX)
}

/// The calling thread's fsgid.
pub fn current_fsgid() -> u32 {
    setfsgid(u32::MAX)
}

impl CredGuard {
    pub(crate) fn enter(cred: &Credentials) -> PosixResult<CredGuard> {
        if cred.groups.len() > MAX_GROUPS {
            return Err(PosixError::Errno(libc::EINVAL));
        }
        let prev_groups = getgroups()?;
        // Groups first: setgroups needs CAP_SETGID, which a non-zero fsuid
        // does not drop, but doing it first keeps the order obviously safe.
        setgroups(&cred.groups)?;
        let prev_gid = setfsgid(cred.gid);
        let prev_uid = setfsuid(cred.uid);
        let guard = CredGuard {
            prev_uid,
            prev_gid,
            prev_groups,
            _thread_bound: PhantomData,
        };
        // setfsuid reports no error; read the ids back to be sure they took.
        if current_fsuid() != cred.uid || current_fsgid() != cred.gid {
            return Err(PosixError::Errno(libc::EPERM));
        }
        Ok(guard)
    }
}

impl Drop for CredGuard {
    fn drop(&mut self) {
        setfsuid(self.prev_uid);
        setfsgid(self.prev_gid);
        if setgroups(&self.prev_groups).is_err() || current_fsuid() != self.prev_uid {
            // A thread left with a client's identity would run later
            // requests as that client; nothing sane can continue.
            std::process::abort();
        }
    }
}

// Permission bits as in inode_permission's generic_permission.
pub(crate) const MAY_READ: u32 = 4;
pub(crate) const MAY_WRITE: u32 = 2;
pub(crate) const MAY_EXEC: u32 = 1;

/// POSIX mode-bit check: the owner class if `cred` owns the object, else the
/// group class if it is in the group, else other. Root passes read and write
/// always, and execute if any x bit is set or the object is a directory.
pub(crate) fn mode_allows(cred: &Credentials, attr: &PosixAttr, want: u32) -> bool {
    if cred.uid == 0 {
        let need_x = want & MAY_EXEC != 0;
        return !need_x || attr.kind == super::ObjectKind::Directory || attr.mode & 0o111 != 0;
    }
    let class = if cred.uid == attr.uid {
        (attr.mode >> 6) & 7
    } else if cred.in_group(attr.gid) {
        (attr.mode >> 3) & 7
    } else {
        attr.mode & 7
    };
    class & want == want
}

/// The same check as an error, for the unprivileged server's own checks.
pub(crate) fn require(cred: &Credentials, attr: &PosixAttr, want: u32) -> PosixResult<()> {
    if mode_allows(cred, attr, want) {
        Ok(())
    } else {
        Err(PosixError::Errno(libc::EACCES))
    }
}
