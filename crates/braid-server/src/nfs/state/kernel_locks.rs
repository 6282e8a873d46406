//! NFS byte-range locks mirrored as Linux open file description locks
//! (`F_OFD_SETLK`), the way braid-fs mirrors SMB's (`posix_lock.rs`, on
//! by default with the share's `posix_locking`): an SMB client's lock
//! and a local process's POSIX lock hold NFS clients off, and an NFS lock
//! holds them off, across protocols (issue 42), through the kernel.
//!
//! Each lock stateid (one lock owner on one file) has its own file
//! description, so the kernel sees one owner per NFS lock owner, and its
//! POSIX semantics (a lock over the owner's own range replaces it, an
//! unlock splits) are those of NFS (RFC 8881 9.5,
//! OPEN4_RESULT_LOCKTYPE_POSIX). Closing the description (the stateid
//! freed, the open closed, the client gone) drops its locks.
//!
//! Bytes past `i64::MAX` (off_t) are the NFS table's alone.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

const OFF_MAX: u64 = i64::MAX as u64;

/// A new file description of the file `f` is open on (through
/// /proc/self/fd: a new open, not a dup, so it is a lock owner of its own).
pub fn reopen(f: &File, write: bool) -> std::io::Result<File> {
    let path = CString::new(format!("/proc/self/fd/{}", f.as_raw_fd()))
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = if write { libc::O_RDWR } else { libc::O_RDONLY };
    // SAFETY: a valid C string; the fd returned is ours to own.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// [start, end] (end inclusive, u64::MAX: to the end of the file) as
/// l_start/l_len; None when no byte of it is within off_t.
fn span(start: u64, end: u64) -> Option<(i64, i64)> {
    if start > OFF_MAX {
        return None;
    }
    if end >= OFF_MAX {
        // l_len 0: to the end of the file, whatever it grows to.
        return Some((start as i64, 0));
    }
    Some((start as i64, (end - start + 1) as i64))
}

fn flock(typ: i32, start: i64, len: i64) -> libc::flock {
    // SAFETY: flock is plain data; all-zero is valid.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = typ as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    fl
}

/// Take (`Some(write)`) or release (`None`) [start, end] on the lock
/// owner's description. Err(EAGAIN) when a lock held outside the NFS
/// table is in the way.
pub fn set(fd: RawFd, start: u64, end: u64, lock: Option<bool>) -> Result<(), i32> {
    let Some((s, l)) = span(start, end) else {
        return Ok(());
    };
    let typ = match lock {
        None => libc::F_UNLCK,
        Some(true) => libc::F_WRLCK,
        Some(false) => libc::F_RDLCK,
    };
    let fl = flock(typ, s, l);
    loop {
        // SAFETY: fcntl with a valid flock pointer.
        let rc = unsafe { libc::fcntl(fd, libc::F_OFD_SETLK, &fl) };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        match e {
            libc::EINTR => continue,
            libc::EACCES | libc::EAGAIN => return Err(libc::EAGAIN),
            // A file system without POSIX locks: the NFS table alone.
            libc::ENOLCK | libc::EOPNOTSUPP | libc::EINVAL => return Ok(()),
            e => return Err(e),
        }
    }
}

/// A lock held outside the NFS table that [start, end] of `write` type
/// would meet, as (first byte, last byte, write), seen from `fd` (a
/// description that holds no lock of the asker's).
pub fn conflict(fd: RawFd, start: u64, end: u64, write: bool) -> Option<(u64, u64, bool)> {
    let (s, l) = span(start, end)?;
    let mut fl = flock(if write { libc::F_WRLCK } else { libc::F_RDLCK }, s, l);
    // SAFETY: fcntl with a valid, writable flock pointer.
    let rc = unsafe { libc::fcntl(fd, libc::F_OFD_GETLK, &mut fl) };
    if rc != 0 || fl.l_type == libc::F_UNLCK as libc::c_short {
        return None;
    }
    let first = fl.l_start as u64;
    let last = if fl.l_len == 0 {
        u64::MAX
    } else {
        first + fl.l_len as u64 - 1
    };
    Some((first, last, fl.l_type == libc::F_WRLCK as libc::c_short))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_locks_between_descriptions() {
        let path = std::env::temp_dir().join(format!("braid-nfs-ofd-{}", std::process::id()));
        std::fs::write(&path, b"0123456789").unwrap();
        let a = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let b = reopen(&a, true).unwrap();
        set(a.as_raw_fd(), 0, 9, Some(true)).unwrap();
        assert_eq!(set(b.as_raw_fd(), 5, 5, Some(false)), Err(libc::EAGAIN));
        assert_eq!(
            conflict(b.as_raw_fd(), 5, u64::MAX, false),
            Some((0, 9, true))
        );
        // Unlock splits, as NFS does: 0-4 stays.
        set(a.as_raw_fd(), 5, u64::MAX, None).unwrap();
        set(b.as_raw_fd(), 5, 5, Some(true)).unwrap();
        assert_eq!(conflict(b.as_raw_fd(), 0, 9, false), Some((0, 4, true)));
        drop(a);
        assert_eq!(conflict(b.as_raw_fd(), 0, 4, true), None);
        std::fs::remove_file(&path).unwrap();
    }
}
