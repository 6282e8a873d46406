//! Thin, safe wrappers over the Linux system calls the backend needs.
//! Every path-taking call here is relative to a directory fd; the only
//! multi-component paths go through [`openat2_beneath`].

use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{last_errno, FsError, FsResult};

pub(crate) fn cstr(s: &str) -> FsResult<CString> {
    CString::new(s).map_err(|_| FsError::InvalidName)
}

/// `openat2(dirfd, path, how{flags, mode, RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS})`.
/// Returns the raw errno on failure so callers can tell ENOENT from ENOTDIR.
pub(crate) fn openat2_beneath(
    dirfd: RawFd,
    path: &CStr,
    flags: i32,
    mode: u32,
) -> Result<OwnedFd, i32> {
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 {
        mode as u64
    } else {
        0
    };
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    // EAGAIN: a concurrent rename raced the lookup; retry a few times.
    for _ in 0..8 {
        // SAFETY: valid pointers; size matches the struct passed.
        let r = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dirfd,
                path.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if r >= 0 {
            // SAFETY: the kernel returned a fresh fd.
            return Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) });
        }
        let e = last_errno();
        if e != libc::EAGAIN && e != libc::EINTR {
            return Err(e);
        }
    }
    Err(libc::EAGAIN)
}

/// `openat(dirfd, name, flags)` for a single, already validated component.
pub(crate) fn openat(dirfd: RawFd, name: &CStr, flags: i32, mode: u32) -> Result<OwnedFd, i32> {
    // SAFETY: plain syscall with a valid C string.
    let r = unsafe { libc::openat(dirfd, name.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if r < 0 {
        Err(last_errno())
    } else {
        // SAFETY: fresh fd.
        Ok(unsafe { OwnedFd::from_raw_fd(r) })
    }
}

pub(crate) fn fstat(fd: RawFd) -> FsResult<libc::stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a valid out pointer.
    if unsafe { libc::fstat(fd, &mut st) } < 0 {
        return Err(FsError::last_os());
    }
    Ok(st)
}

/// `fstatvfs(fd)`: the file system `fd` is on (any fd, `O_PATH` too).
pub(crate) fn fstatvfs(fd: RawFd) -> FsResult<libc::statvfs> {
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: s is a valid out pointer.
    if unsafe { libc::fstatvfs(fd, &mut s) } < 0 {
        return Err(FsError::last_os());
    }
    Ok(s)
}

pub(crate) fn fstatfs(fd: RawFd) -> FsResult<libc::statfs> {
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: s is a valid out pointer.
    if unsafe { libc::fstatfs(fd, &mut s) } < 0 {
        return Err(FsError::last_os());
    }
    Ok(s)
}

/// The fragment size a statvfs reports (its block size when it gives none).
pub(crate) fn fragment_size(s: &libc::statvfs) -> u64 {
    if s.f_frsize != 0 {
        s.f_frsize
    } else {
        s.f_bsize
    }
}

/// `fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW)`; raw errno on failure.
pub(crate) fn lstat_at(dirfd: RawFd, name: &CStr) -> Result<libc::stat, i32> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    if unsafe { libc::fstatat(dirfd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } < 0 {
        return Err(last_errno());
    }
    Ok(st)
}

/// Birth time via statx, if the file system records it.
pub(crate) fn btime(fd: RawFd) -> Option<SystemTime> {
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let empty = c"";
    // SAFETY: valid pointers; AT_EMPTY_PATH stats the fd itself.
    let r = unsafe {
        libc::statx(
            fd,
            empty.as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_BTIME,
            &mut stx,
        )
    };
    if r < 0 || stx.stx_mask & libc::STATX_BTIME == 0 {
        return None;
    }
    Some(ts(stx.stx_btime.tv_sec, stx.stx_btime.tv_nsec as i64))
}

/// Seconds + nanoseconds since the epoch (may be negative) to SystemTime.
pub(crate) fn ts(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs()) + Duration::from_nanos(nsec as u64)
    }
}

pub(crate) fn to_timespec(t: SystemTime) -> libc::timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        },
        Err(e) => {
            let d = e.duration();
            let mut sec = -(d.as_secs() as i64);
            let mut nsec = -(d.subsec_nanos() as i64);
            if nsec < 0 {
                sec -= 1;
                nsec += 1_000_000_000;
            }
            libc::timespec {
                tv_sec: sec as libc::time_t,
                tv_nsec: nsec as libc::c_long,
            }
        }
    }
}

/// futimens with optional atime/mtime (UTIME_OMIT for None).
pub(crate) fn futimens(
    fd: RawFd,
    atime: Option<SystemTime>,
    mtime: Option<SystemTime>,
) -> FsResult<()> {
    let omit = libc::timespec {
        tv_sec: 0,
        tv_nsec: libc::UTIME_OMIT,
    };
    let times = [
        atime.map(to_timespec).unwrap_or(omit),
        mtime.map(to_timespec).unwrap_or(omit),
    ];
    // SAFETY: valid array of two timespecs.
    if unsafe { libc::futimens(fd, times.as_ptr()) } < 0 {
        return Err(FsError::last_os());
    }
    Ok(())
}

/// Read an xattr of an open fd. `Ok(None)` when absent or unsupported.
pub(crate) fn fgetxattr(fd: RawFd, name: &CStr) -> Option<Vec<u8>> {
    fgetxattr_small(fd, name).ok()
}

/// An xattr of up to 64 bytes of an open fd; the raw errno on failure
/// (ENODATA: absent; ERANGE: larger).
pub(crate) fn fgetxattr_small(fd: RawFd, name: &CStr) -> Result<Vec<u8>, i32> {
    let mut buf = vec![0u8; 64];
    // SAFETY: buffer pointer and length are valid.
    let r = unsafe { libc::fgetxattr(fd, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return Err(last_errno());
    }
    buf.truncate(r as usize);
    Ok(buf)
}

/// Read an xattr of `name` inside the directory `dirfd` without following a
/// final symlink. `name` is a single component from readdir (no `/`), so the
/// `/proc/self/fd/N/name` path cannot leave the directory.
pub(crate) fn getxattr_at(dirfd: RawFd, name: &OsStr, attr: &CStr) -> Option<Vec<u8>> {
    getxattr_at_small(dirfd, name, attr).ok()
}

/// [`getxattr_at`] with the raw errno on failure (ENODATA: absent;
/// ERANGE: more than 64 bytes; EINVAL: a name with a NUL).
pub(crate) fn getxattr_at_small(dirfd: RawFd, name: &OsStr, attr: &CStr) -> Result<Vec<u8>, i32> {
    let mut p = format!("/proc/self/fd/{dirfd}/").into_bytes();
    p.extend_from_slice(name.as_bytes());
    let p = CString::new(p).map_err(|_| libc::EINVAL)?;
    let mut buf = vec![0u8; 64];
    // SAFETY: valid pointers.
    let r = unsafe {
        libc::lgetxattr(
            p.as_ptr(),
            attr.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if r < 0 {
        return Err(last_errno());
    }
    buf.truncate(r as usize);
    Ok(buf)
}

/// Set an xattr; returns the raw errno on failure.
pub(crate) fn fsetxattr(fd: RawFd, name: &CStr, val: &[u8]) -> Result<(), i32> {
    // SAFETY: valid pointers.
    let r = unsafe { libc::fsetxattr(fd, name.as_ptr(), val.as_ptr().cast(), val.len(), 0) };
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(())
    }
}

/// Names in a directory (excluding "." and ".."), read through a fresh fd so
/// the caller's fd offset is untouched.
pub(crate) fn list_dir(dirfd: RawFd) -> FsResult<Vec<Vec<u8>>> {
    let fd =
        openat(dirfd, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0).map_err(FsError::from_errno)?;
    let raw = fd.as_raw_fd();
    // SAFETY: fdopendir takes ownership of the fd on success.
    let dir = unsafe { libc::fdopendir(raw) };
    if dir.is_null() {
        return Err(FsError::last_os());
    }
    std::mem::forget(fd);
    let mut out = Vec::new();
    loop {
        // SAFETY: dir is a valid DIR*.
        let ent = unsafe { libc::readdir64(dir) };
        if ent.is_null() {
            break;
        }
        // SAFETY: d_name is NUL-terminated.
        let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) }.to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        out.push(name.to_vec());
    }
    // SAFETY: closes the DIR and its fd.
    unsafe { libc::closedir(dir) };
    Ok(out)
}

pub(crate) fn pread(fd: RawFd, buf: &mut [u8], offset: u64) -> FsResult<usize> {
    // SAFETY: the pointer and length describe `buf`, initialised memory.
    unsafe { pread_raw(fd, buf.as_mut_ptr(), buf.len(), offset, 0) }.map_err(FsError::from_errno)
}

/// Positioned read of up to `len` bytes appended to `buf`'s spare capacity,
/// without zero-filling it first (an 8 MiB READ would otherwise memset
/// 8 MiB before the kernel overwrites it).
pub(crate) fn pread_into_vec(
    fd: RawFd,
    buf: &mut Vec<u8>,
    len: usize,
    offset: u64,
) -> FsResult<usize> {
    pread_spare(fd, buf, len, offset, 0).map_err(FsError::from_errno)
}

/// As [`pread_into_vec`], but only from the page cache: preadv2 with
/// RWF_NOWAIT, which returns EAGAIN instead of waiting for the disk. Ok(None)
/// when any part of the range is not cached (or the file system cannot say);
/// `buf` is then unchanged.
pub(crate) fn pread_into_vec_nowait(
    fd: RawFd,
    buf: &mut Vec<u8>,
    len: usize,
    offset: u64,
) -> FsResult<Option<usize>> {
    match pread_spare(fd, buf, len, offset, libc::RWF_NOWAIT) {
        Ok(n) => Ok(Some(n)),
        Err(libc::EAGAIN | libc::EOPNOTSUPP | libc::ENOSYS) => Ok(None),
        Err(e) => Err(FsError::from_errno(e)),
    }
}

/// Read into `buf`'s spare capacity; its length grows only on success.
/// Errors are errnos.
pub(crate) fn pread_spare(
    fd: RawFd,
    buf: &mut Vec<u8>,
    len: usize,
    offset: u64,
    flags: libc::c_int,
) -> Result<usize, i32> {
    buf.reserve(len);
    let start = buf.len();
    let spare = buf.spare_capacity_mut();
    // SAFETY: `spare` has room for at least `len` bytes; preadv2 only writes.
    let done = unsafe { pread_raw(fd, spare.as_mut_ptr().cast(), len, offset, flags)? };
    // SAFETY: preadv2 initialised exactly `done` bytes after `start`.
    unsafe { buf.set_len(start + done) };
    Ok(done)
}

/// preadv2() until `len` bytes, EOF, or the 63-bit offset limit; errors are
/// errnos (EINVAL for an offset that overflows).
///
/// # Safety
/// `ptr` must be valid for writes of `len` bytes.
unsafe fn pread_raw(
    fd: RawFd,
    ptr: *mut u8,
    len: usize,
    offset: u64,
    flags: libc::c_int,
) -> Result<usize, i32> {
    let mut done = 0;
    while done < len {
        let off = offset.checked_add(done as u64).ok_or(libc::EINVAL)?;
        if off > i64::MAX as u64 {
            break;
        }
        let iov = libc::iovec {
            // SAFETY: within the caller's `len` bytes at `ptr`.
            iov_base: unsafe { ptr.add(done) }.cast(),
            iov_len: len - done,
        };
        // SAFETY: one iovec over the caller's writable bytes.
        let r = unsafe { libc::preadv2(fd, &iov, 1, off as i64, flags) };
        if r < 0 {
            match last_errno() {
                libc::EINTR => continue,
                e => return Err(e),
            }
        }
        if r == 0 {
            break;
        }
        done += r as usize;
    }
    Ok(done)
}

/// ioctl FICLONERANGE: `len` bytes of `src` at `src_offset` (0: to its
/// end) share their blocks with `dest` at `dest_offset`, on file systems
/// that share extents; Err(errno) otherwise (EOPNOTSUPP, ENOTTY, EXDEV,
/// EINVAL for a range off block boundaries).
pub(crate) fn clone_range(
    src: RawFd,
    src_offset: u64,
    len: u64,
    dest: RawFd,
    dest_offset: u64,
) -> Result<(), i32> {
    let range = libc::file_clone_range {
        src_fd: src as i64,
        src_offset,
        src_length: len,
        dest_offset,
    };
    // SAFETY: plain ioctl with a pointer to a live, initialised struct.
    if unsafe { libc::ioctl(dest, libc::FICLONERANGE, &range) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    }
}

pub(crate) fn pwrite(fd: RawFd, data: &[u8], offset: u64) -> FsResult<usize> {
    let mut done = 0;
    while done < data.len() {
        let off = offset
            .checked_add(done as u64)
            .ok_or(FsError::InvalidParameter)?;
        if off > i64::MAX as u64 {
            return Err(FsError::FileTooLarge);
        }
        // SAFETY: pointer/len are within data.
        let r = unsafe {
            libc::pwrite64(
                fd,
                data[done..].as_ptr().cast(),
                data.len() - done,
                off as i64,
            )
        };
        if r < 0 {
            let e = last_errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(FsError::from_errno(e));
        }
        done += r as usize;
    }
    Ok(done)
}

pub(crate) fn check(r: libc::c_int) -> FsResult<()> {
    if r < 0 {
        Err(FsError::last_os())
    } else {
        Ok(())
    }
}

/// Birth time of `name` in `dirfd`, without following a final symlink.
pub(crate) fn btime_at(dirfd: RawFd, name: &CStr) -> Option<SystemTime> {
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    let r = unsafe {
        libc::statx(
            dirfd,
            name.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_BTIME,
            &mut stx,
        )
    };
    if r < 0 || stx.stx_mask & libc::STATX_BTIME == 0 {
        return None;
    }
    Some(ts(stx.stx_btime.tv_sec, stx.stx_btime.tv_nsec as i64))
}

/// `/proc/self/fd/N`: lets the path-based xattr calls work on `O_PATH` fds.
/// chmod the file behind `fd`, which may be an O_PATH fd (fchmod refuses
/// those; the /proc path reaches the same inode).
pub(crate) fn fchmod_any(fd: RawFd, mode: u32) -> FsResult<()> {
    let p = proc_fd_path(fd);
    // SAFETY: p is a valid NUL-terminated path.
    check(unsafe { libc::chmod(p.as_ptr(), mode as libc::mode_t) })
}

fn proc_fd_path(fd: RawFd) -> CString {
    CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL in a number")
}

/// Read a whole xattr of an fd (any size); raw errno on failure.
pub(crate) fn xattr_get(fd: RawFd, name: &CStr) -> Result<Vec<u8>, i32> {
    let p = proc_fd_path(fd);
    loop {
        // SAFETY: a NULL buffer with size 0 asks for the size.
        let n = unsafe { libc::getxattr(p.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
        if n < 0 {
            return Err(last_errno());
        }
        let mut buf = vec![0u8; n as usize];
        // SAFETY: buffer pointer and length are valid.
        let r = unsafe {
            libc::getxattr(
                p.as_ptr(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if r >= 0 {
            buf.truncate(r as usize);
            return Ok(buf);
        }
        if last_errno() != libc::ERANGE {
            return Err(last_errno());
        }
    }
}

/// getxattrat(2) (Linux 6.13); new system calls have one number on every
/// architecture.
const SYS_GETXATTRAT: libc::c_long = 464;

/// Read a whole xattr of `fd`, an fd open for I/O; raw errno on failure
/// (ENODATA when absent). One `fgetxattr` for a value of up to 256 bytes;
/// an `O_PATH` fd (EBADF) is read as [`xattr_read_dir`] reads one.
pub(crate) fn xattr_read(fd: RawFd, name: &CStr) -> Result<Vec<u8>, i32> {
    let mut buf = [0u8; 256];
    // SAFETY: buffer pointer and length are valid.
    let r = unsafe { libc::fgetxattr(fd, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r >= 0 {
        return Ok(buf[..r as usize].to_vec());
    }
    match last_errno() {
        libc::EBADF => xattr_read_dir(fd, name),
        libc::ERANGE => xattr_get(fd, name),
        e => Err(e),
    }
}

/// getxattrat(2) of `attr` on `path` relative to `dfd` into `buf`: the
/// value's length, or the raw errno.
fn getxattrat(
    dfd: RawFd,
    path: &CStr,
    at_flags: libc::c_int,
    attr: &CStr,
    buf: &mut [u8],
) -> Result<usize, i32> {
    #[repr(C)]
    struct XattrArgs {
        value: u64,
        size: u32,
        flags: u32,
    }
    let mut args = XattrArgs {
        value: buf.as_mut_ptr() as u64,
        size: buf.len() as u32,
        flags: 0,
    };
    // SAFETY: valid C strings and an xattr_args of the size passed,
    // pointing at `buf`, which outlives the call.
    let r = unsafe {
        libc::syscall(
            SYS_GETXATTRAT,
            dfd,
            path.as_ptr(),
            at_flags,
            attr.as_ptr(),
            &mut args as *mut XattrArgs,
            std::mem::size_of::<XattrArgs>(),
        )
    };
    if r >= 0 {
        Ok(r as usize)
    } else {
        Err(last_errno())
    }
}

/// Read a whole xattr of the directory `fd`, an `O_PATH` fd (what path
/// resolution gives for a parent, which `fgetxattr` refuses); raw errno on
/// failure. One `getxattrat(fd, ".")` for a value of up to 256 bytes,
/// where `/proc/self/fd` ([`xattr_get`]) costs a path walk through procfs,
/// five times as much. Kernels without getxattrat, larger values and
/// anything that is not a directory go through [`xattr_get`].
pub(crate) fn xattr_read_dir(fd: RawFd, name: &CStr) -> Result<Vec<u8>, i32> {
    let mut buf = [0u8; 256];
    // "." names the directory `fd` itself.
    match getxattrat(fd, c".", 0, name, &mut buf) {
        Ok(n) => Ok(buf[..n].to_vec()),
        Err(e @ (libc::ENODATA | libc::ENOTSUP)) => Err(e),
        // ENOSYS, ENOTDIR (not a directory), ERANGE, a sandbox's EPERM.
        Err(_) => xattr_get(fd, name),
    }
}

/// Read a whole xattr of `name` in the directory `dfd` without following
/// a symlink; raw errno on failure (ENODATA when absent). One
/// `getxattrat` for a value of up to 4 KiB; kernels without it (and
/// larger values) open the name `O_PATH` and go through [`xattr_get`].
pub(crate) fn xattr_read_child(dfd: RawFd, name: &CStr, attr: &CStr) -> Result<Vec<u8>, i32> {
    let mut buf = vec![0u8; 4096];
    match getxattrat(dfd, name, libc::AT_SYMLINK_NOFOLLOW, attr, &mut buf) {
        Ok(n) => {
            buf.truncate(n);
            Ok(buf)
        }
        Err(e @ (libc::ENODATA | libc::ENOTSUP | libc::ENOENT)) => Err(e),
        Err(_) => {
            let fd = openat(dfd, name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
            xattr_get(fd.as_raw_fd(), attr)
        }
    }
}

/// Names of an fd's xattrs; raw errno on failure.
pub(crate) fn xattr_list(fd: RawFd) -> Result<Vec<Vec<u8>>, i32> {
    let p = proc_fd_path(fd);
    loop {
        // SAFETY: a NULL buffer with size 0 asks for the size.
        let n = unsafe { libc::listxattr(p.as_ptr(), std::ptr::null_mut(), 0) };
        if n < 0 {
            return Err(last_errno());
        }
        let mut buf = vec![0u8; n as usize];
        // SAFETY: buffer pointer and length are valid.
        let r = unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if r >= 0 {
            buf.truncate(r as usize);
            return Ok(buf
                .split(|&b| b == 0)
                .filter(|s| !s.is_empty())
                .map(<[u8]>::to_vec)
                .collect());
        }
        if last_errno() != libc::ERANGE {
            return Err(last_errno());
        }
    }
}

/// Set (`Some`) or remove (`None`) an xattr of an fd; raw errno on failure.
pub(crate) fn xattr_put(fd: RawFd, name: &CStr, val: Option<&[u8]>) -> Result<(), i32> {
    let p = proc_fd_path(fd);
    // SAFETY: valid pointers.
    let r = unsafe {
        match val {
            Some(v) => libc::setxattr(p.as_ptr(), name.as_ptr(), v.as_ptr().cast(), v.len(), 0),
            None => libc::removexattr(p.as_ptr(), name.as_ptr()),
        }
    };
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(())
    }
}

/// Create an xattr of an fd that must not exist yet (`XATTR_CREATE`); raw
/// errno on failure (`EEXIST` when it exists).
pub(crate) fn xattr_create(fd: RawFd, name: &CStr, val: &[u8]) -> Result<(), i32> {
    let p = proc_fd_path(fd);
    // SAFETY: valid pointers.
    let r = unsafe {
        libc::setxattr(
            p.as_ptr(),
            name.as_ptr(),
            val.as_ptr().cast(),
            val.len(),
            libc::XATTR_CREATE,
        )
    };
    if r < 0 {
        Err(last_errno())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xattr_read_through_every_kind_of_fd() {
        let dir = std::env::temp_dir().join(format!("braid-sys-xattr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = CString::new(dir.as_os_str().as_bytes()).unwrap();
        let name = c"user.braid.test";
        let small = vec![7u8; 40];
        let large = vec![9u8; 1000];
        // SAFETY: plain syscalls with valid C strings.
        let path_fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY) };
        let ro_fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
        assert!(path_fd >= 0 && ro_fd >= 0);
        // SAFETY: fresh fds.
        let (path_fd, ro_fd) =
            unsafe { (OwnedFd::from_raw_fd(path_fd), OwnedFd::from_raw_fd(ro_fd)) };
        for fd in [path_fd.as_raw_fd(), ro_fd.as_raw_fd()] {
            assert_eq!(
                xattr_read_dir(path_fd.as_raw_fd(), name),
                Err(libc::ENODATA)
            );
            match xattr_read(fd, name) {
                Err(libc::ENODATA) => {}
                Err(libc::ENOTSUP) => {
                    eprintln!("no user xattrs on the test file system: skipped");
                    return;
                }
                other => panic!("{other:?}"),
            }
        }
        for v in [&small, &large] {
            xattr_put(ro_fd.as_raw_fd(), name, Some(v)).unwrap();
            assert_eq!(xattr_read(path_fd.as_raw_fd(), name).as_ref(), Ok(v));
            assert_eq!(xattr_read(ro_fd.as_raw_fd(), name).as_ref(), Ok(v));
            assert_eq!(xattr_read_dir(path_fd.as_raw_fd(), name).as_ref(), Ok(v));
            assert_eq!(xattr_read_dir(ro_fd.as_raw_fd(), name).as_ref(), Ok(v));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
