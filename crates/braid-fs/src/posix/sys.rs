//! Syscall wrappers for the POSIX face. Every call takes an fd; the only
//! path strings are single validated components and `/proc/self/fd/N`
//! (the documented way to reach an `O_PATH` fd's inode for calls that have
//! no fd form).

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::types::{ObjectKind, PosixAttr, PosixError, PosixResult, Timespec};

pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

pub(crate) fn err() -> PosixError {
    PosixError::Errno(errno())
}

fn check(r: libc::c_int) -> PosixResult<()> {
    if r < 0 {
        Err(err())
    } else {
        Ok(())
    }
}

/// `/proc/self/fd/N`: following it reaches the fd's own inode, never a
/// path, so a rename in between cannot redirect it.
pub(crate) fn proc_path(fd: RawFd) -> CString {
    CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL in a number")
}

pub(crate) fn openat(dirfd: RawFd, name: &CStr, flags: i32, mode: u32) -> PosixResult<OwnedFd> {
    loop {
        // SAFETY: name is NUL-terminated; the fd is owned on success.
        let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags | libc::O_CLOEXEC, mode) };
        if fd >= 0 {
            // SAFETY: a fresh fd we own.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = errno();
        if e != libc::EINTR {
            return Err(PosixError::Errno(e));
        }
    }
}

/// An `O_PATH` fd for the name itself: symlinks are never followed, so a
/// client-made symlink cannot point a lookup outside the share.
pub(crate) fn open_path_nofollow(dirfd: RawFd, name: &CStr) -> PosixResult<OwnedFd> {
    openat(dirfd, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
}

/// Reopens an object (usually an `O_PATH` fd) with real access flags.
pub(crate) fn reopen(fd: RawFd, flags: i32) -> PosixResult<OwnedFd> {
    openat(libc::AT_FDCWD, &proc_path(fd), flags, 0)
}

fn ts(sec: i64, nsec: u32) -> Timespec {
    Timespec { sec, nsec }
}

pub(crate) fn statx(fd: RawFd) -> PosixResult<PosixAttr> {
    statx_flags(fd, 0)
}

/// statx of an fd held open, from what the kernel already holds in memory:
/// AT_STATX_DONT_SYNC (statx(2)) tells a network or FUSE file system to
/// answer from its cached attributes instead of asking its server; a local
/// file system answers from the in-core inode, which the open fd pins in
/// memory. So the call reads no disk and waits for no server, and may run
/// where waiting is not allowed (the NFS reactor path).
pub(crate) fn statx_cached(fd: RawFd) -> PosixResult<PosixAttr> {
    statx_flags(fd, libc::AT_STATX_DONT_SYNC)
}

fn statx_flags(fd: RawFd, extra: libc::c_int) -> PosixResult<PosixAttr> {
    // SAFETY: zeroed statx is a valid out-buffer.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let mask = libc::STATX_BASIC_STATS | libc::STATX_BTIME;
    // SAFETY: valid pointers; "" with AT_EMPTY_PATH names the fd itself.
    let r = unsafe {
        libc::statx(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW | extra,
            mask,
            &mut st,
        )
    };
    check(r)?;
    let mode = st.stx_mode as u32;
    let kind = ObjectKind::from_mode(mode).ok_or(PosixError::Errno(libc::EINVAL))?;
    let ctime = ts(st.stx_ctime.tv_sec, st.stx_ctime.tv_nsec);
    Ok(PosixAttr {
        kind,
        mode: mode & 0o7777,
        nlink: st.stx_nlink,
        uid: st.stx_uid,
        gid: st.stx_gid,
        size: st.stx_size,
        space_used: st.stx_blocks.saturating_mul(512),
        rdev_major: st.stx_rdev_major,
        rdev_minor: st.stx_rdev_minor,
        // The same encoding as stat's st_dev, which the open table keys on.
        dev: libc::makedev(st.stx_dev_major, st.stx_dev_minor),
        fileid: st.stx_ino,
        atime: ts(st.stx_atime.tv_sec, st.stx_atime.tv_nsec),
        mtime: ts(st.stx_mtime.tv_sec, st.stx_mtime.tv_nsec),
        ctime,
        btime: (st.stx_mask & libc::STATX_BTIME != 0)
            .then(|| ts(st.stx_btime.tv_sec, st.stx_btime.tv_nsec)),
        change: (ctime.sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ctime.nsec as u64),
    })
}

/// The kernel's persistent handle for an fd: (type, bytes).
pub(crate) fn name_to_handle(fd: RawFd) -> PosixResult<(i32, Vec<u8>)> {
    #[repr(C)]
    struct Buf {
        handle_bytes: u32,
        handle_type: i32,
        f_handle: [u8; libc::MAX_HANDLE_SZ as usize],
    }
    let mut buf = Buf {
        handle_bytes: libc::MAX_HANDLE_SZ as u32,
        handle_type: 0,
        f_handle: [0; libc::MAX_HANDLE_SZ as usize],
    };
    let mut mount_id: libc::c_int = 0;
    // SAFETY: Buf has file_handle's layout with MAX_HANDLE_SZ bytes behind it.
    let r = unsafe {
        libc::name_to_handle_at(
            fd,
            c"".as_ptr(),
            &mut buf as *mut Buf as *mut libc::file_handle,
            &mut mount_id,
            libc::AT_EMPTY_PATH,
        )
    };
    check(r)?;
    let n = (buf.handle_bytes as usize).min(buf.f_handle.len());
    Ok((buf.handle_type, buf.f_handle[..n].to_vec()))
}

/// `open_by_handle_at(mount_fd, O_PATH)`; needs CAP_DAC_READ_SEARCH.
pub(crate) fn open_by_handle(mount_fd: RawFd, ty: i32, bytes: &[u8]) -> PosixResult<OwnedFd> {
    #[repr(C)]
    struct Buf {
        handle_bytes: u32,
        handle_type: i32,
        f_handle: [u8; libc::MAX_HANDLE_SZ as usize],
    }
    if bytes.len() > libc::MAX_HANDLE_SZ as usize {
        return Err(PosixError::BadHandle);
    }
    let mut buf = Buf {
        handle_bytes: bytes.len() as u32,
        handle_type: ty,
        f_handle: [0; libc::MAX_HANDLE_SZ as usize],
    };
    buf.f_handle[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: as in name_to_handle.
    let fd = unsafe {
        libc::open_by_handle_at(
            mount_fd,
            &mut buf as *mut Buf as *mut libc::file_handle,
            libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        )
    };
    if fd < 0 {
        return Err(err());
    }
    // SAFETY: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn mkdirat(dirfd: RawFd, name: &CStr, mode: u32) -> PosixResult<()> {
    // SAFETY: NUL-terminated name.
    check(unsafe { libc::mkdirat(dirfd, name.as_ptr(), mode) })
}

pub(crate) fn symlinkat(target: &CStr, dirfd: RawFd, name: &CStr) -> PosixResult<()> {
    // SAFETY: NUL-terminated strings.
    check(unsafe { libc::symlinkat(target.as_ptr(), dirfd, name.as_ptr()) })
}

pub(crate) fn mknodat(dirfd: RawFd, name: &CStr, mode: u32, dev: libc::dev_t) -> PosixResult<()> {
    // SAFETY: NUL-terminated name.
    check(unsafe { libc::mknodat(dirfd, name.as_ptr(), mode, dev) })
}

/// A hard link to the object behind `fd` (any fd, O_PATH included).
/// `linkat(AT_EMPTY_PATH)` would need CAP_DAC_READ_SEARCH, which the
/// kernel drops as soon as the fsuid is not 0; following `/proc/self/fd/N`
/// needs nothing beyond the ordinary link permission checks.
pub(crate) fn link_fd(fd: RawFd, dirfd: RawFd, name: &CStr) -> PosixResult<()> {
    let p = proc_path(fd);
    // SAFETY: NUL-terminated strings.
    check(unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            p.as_ptr(),
            dirfd,
            name.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    })
}

pub(crate) fn renameat(fd1: RawFd, n1: &CStr, fd2: RawFd, n2: &CStr) -> PosixResult<()> {
    // SAFETY: NUL-terminated names.
    check(unsafe { libc::renameat(fd1, n1.as_ptr(), fd2, n2.as_ptr()) })
}

pub(crate) fn unlinkat(dirfd: RawFd, name: &CStr, flags: i32) -> PosixResult<()> {
    // SAFETY: NUL-terminated name.
    check(unsafe { libc::unlinkat(dirfd, name.as_ptr(), flags) })
}

pub(crate) fn readlink_fd(fd: RawFd) -> PosixResult<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: the buffer is writable for its length; "" names the fd.
    let n = unsafe {
        libc::readlinkat(
            fd,
            c"".as_ptr(),
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
        )
    };
    if n < 0 {
        return Err(err());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// Permission check with the thread's fs ids (AT_EACCESS: not the real
/// ids), so ACLs and the client's groups count as they would for an open.
pub(crate) fn access_fd(fd: RawFd, mode: i32) -> PosixResult<()> {
    // SAFETY: "" with AT_EMPTY_PATH names the fd itself.
    let r = unsafe {
        libc::syscall(
            libc::SYS_faccessat2,
            fd,
            c"".as_ptr(),
            mode,
            libc::AT_EACCESS | libc::AT_EMPTY_PATH,
        )
    };
    if r < 0 {
        Err(err())
    } else {
        Ok(())
    }
}

pub(crate) fn chmod_fd(fd: RawFd, mode: u32) -> PosixResult<()> {
    let p = proc_path(fd);
    // SAFETY: NUL-terminated path.
    check(unsafe { libc::chmod(p.as_ptr(), mode) })
}

/// `u32::MAX` (-1) leaves that id alone, as chown(2) defines.
pub(crate) fn chown_fd(fd: RawFd, uid: u32, gid: u32) -> PosixResult<()> {
    // SAFETY: "" with AT_EMPTY_PATH names the fd itself (a symlink included).
    check(unsafe {
        libc::fchownat(
            fd,
            c"".as_ptr(),
            uid,
            gid,
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    })
}

pub(crate) fn truncate_fd(fd: RawFd, size: u64) -> PosixResult<()> {
    let size = i64::try_from(size).map_err(|_| PosixError::Errno(libc::EFBIG))?;
    let p = proc_path(fd);
    // SAFETY: NUL-terminated path.
    check(unsafe { libc::truncate(p.as_ptr(), size) })
}

pub(crate) fn utimens_fd(fd: RawFd, times: &[libc::timespec; 2]) -> PosixResult<()> {
    // SAFETY: two timespecs; "" with AT_EMPTY_PATH names the fd itself.
    check(unsafe {
        libc::utimensat(
            fd,
            c"".as_ptr(),
            times.as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
        )
    })
}

/// Reads an xattr of a regular file or directory through its fd's inode.
pub(crate) fn get_xattr(fd: RawFd, name: &CStr) -> PosixResult<Vec<u8>> {
    let p = proc_path(fd);
    let mut buf = [0u8; 64];
    // SAFETY: the buffer is writable for its length.
    let n = unsafe {
        libc::getxattr(
            p.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
        )
    };
    if n < 0 {
        return Err(err());
    }
    Ok(buf[..n as usize].to_vec())
}

pub(crate) fn set_xattr(fd: RawFd, name: &CStr, value: &[u8]) -> PosixResult<()> {
    set_xattr_flags(fd, name, value, 0)
}

/// A value of unknown size from a getxattr-like call: `call(null, 0)` gives
/// the size, then `call(buf, len)` fills it; ERANGE (it grew in between)
/// asks again.
fn read_sized(call: impl Fn(*mut libc::c_void, usize) -> isize) -> PosixResult<Vec<u8>> {
    loop {
        let size = call(std::ptr::null_mut(), 0);
        if size < 0 {
            return Err(err());
        }
        let mut buf = vec![0u8; size as usize];
        let n = call(buf.as_mut_ptr() as *mut libc::c_void, buf.len());
        if n >= 0 {
            buf.truncate(n as usize);
            return Ok(buf);
        }
        if errno() != libc::ERANGE {
            return Err(err());
        }
    }
}

/// Reads an xattr whatever its size (at most 64 KiB, Linux's limit).
pub(crate) fn get_xattr_any(fd: RawFd, name: &CStr) -> PosixResult<Vec<u8>> {
    let p = proc_path(fd);
    // SAFETY: read_sized passes a null buffer with size 0, or a buffer
    // writable for its length.
    read_sized(|buf, len| unsafe { libc::getxattr(p.as_ptr(), name.as_ptr(), buf, len) })
}

pub(crate) fn set_xattr_flags(fd: RawFd, name: &CStr, value: &[u8], flags: i32) -> PosixResult<()> {
    let p = proc_path(fd);
    // SAFETY: value is readable for its length.
    check(unsafe {
        libc::setxattr(
            p.as_ptr(),
            name.as_ptr(),
            value.as_ptr() as *const libc::c_void,
            value.len(),
            flags,
        )
    })
}

pub(crate) fn remove_xattr(fd: RawFd, name: &CStr) -> PosixResult<()> {
    let p = proc_path(fd);
    // SAFETY: both strings are NUL-terminated.
    check(unsafe { libc::removexattr(p.as_ptr(), name.as_ptr()) })
}

/// Every xattr name of the object, NUL-separated.
pub(crate) fn list_xattrs(fd: RawFd) -> PosixResult<Vec<u8>> {
    let p = proc_path(fd);
    // SAFETY: as in get_xattr_any.
    read_sized(|buf, len| unsafe { libc::listxattr(p.as_ptr(), buf as *mut libc::c_char, len) })
}

pub(crate) fn fstatfs(fd: RawFd) -> PosixResult<libc::statfs64> {
    // SAFETY: zeroed statfs is a valid out-buffer.
    let mut st: libc::statfs64 = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs accepts O_PATH fds.
    check(unsafe { libc::fstatfs64(fd, &mut st) })?;
    Ok(st)
}

pub(crate) fn lseek(fd: &OwnedFd, off: i64) -> PosixResult<()> {
    // SAFETY: plain syscall on an fd we own.
    let r = unsafe { libc::lseek64(fd.as_raw_fd(), off, libc::SEEK_SET) };
    if r < 0 {
        Err(err())
    } else {
        Ok(())
    }
}

/// One `getdents64` batch into `buf`; returns the bytes filled (0 at the end).
pub(crate) fn getdents64(fd: &OwnedFd, buf: &mut [u8]) -> PosixResult<usize> {
    loop {
        // SAFETY: the buffer is writable for its length.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = errno();
        if e != libc::EINTR {
            return Err(PosixError::Errno(e));
        }
    }
}
