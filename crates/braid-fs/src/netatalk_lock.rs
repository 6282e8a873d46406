//! Netatalk's open and deny-mode locks, for a share whose files AFP clients
//! reach through Netatalk at the same time (Samba's `fruit:locking =
//! netatalk`).
//!
//! Netatalk records each open of a file's data fork as one-byte POSIX locks
//! at fixed offsets just below the largest `off_t`: a byte for "open for
//! reading", one for "open for writing", one per deny mode (its adouble.h,
//! `AD_FILELOCK_*`). Before an open of such a share is granted, those bytes
//! are tested: an AFP open that denies what this open asks, or that this
//! open would deny, makes it a sharing violation. The open then takes the
//! bytes that say what it does, so that Netatalk sees it as well. The bytes
//! are read-locked, since many opens may hold one, through the open's own
//! description (`F_OFD_*`, as in `posix_lock.rs`); they go when it closes.

use std::os::fd::RawFd;

use crate::error::{FsError, FsResult};
use crate::types::{access as acc, share as sh};

/// Netatalk's `AD_FILELOCK_BASE`: ten bytes below the largest `off_t`.
const BASE: u64 = i64::MAX as u64 - 9;
const OPEN_WR: u64 = BASE;
const OPEN_RD: u64 = BASE + 1;
const DENY_WR: u64 = BASE + 4;
const DENY_RD: u64 = BASE + 5;

/// The bytes an open of the data fork with `access` and `share_access`
/// holds. None without FILE_READ_DATA: a read lock needs a description
/// open for reading (Samba sets none then either).
pub(crate) fn marks(access: u32, share_access: u32) -> Vec<u64> {
    if access & acc::FILE_READ_DATA == 0 {
        return Vec::new();
    }
    let mut v = vec![OPEN_RD];
    if access & acc::FILE_WRITE_DATA != 0 {
        v.push(OPEN_WR);
    }
    if share_access & sh::READ == 0 {
        v.push(DENY_RD);
    }
    if share_access & sh::WRITE == 0 {
        v.push(DENY_WR);
    }
    v
}

/// Refuse the open behind `fd` when Netatalk's bytes say an AFP open
/// conflicts with it, else take its own bytes.
pub(crate) fn check_and_mark(fd: RawFd, access: u32, share_access: u32) -> FsResult<()> {
    let held = |offset: u64| held_elsewhere(fd, offset);
    let (Some(reading), Some(writing), Some(deny_read), Some(deny_write)) =
        (held(OPEN_RD), held(OPEN_WR), held(DENY_RD), held(DENY_WR))
    else {
        // A description without data access (O_PATH) can neither test nor
        // hold a lock: nothing to compare.
        return Ok(());
    };
    let conflict = (access & acc::FILE_READ_DATA != 0 && deny_read)
        || (share_access & sh::READ == 0 && reading)
        || (access & acc::FILE_WRITE_DATA != 0 && deny_write)
        || (share_access & sh::WRITE == 0 && writing);
    if conflict {
        return Err(FsError::SharingViolation);
    }
    for m in marks(access, share_access) {
        match ofd_lock(fd, libc::F_OFD_SETLK, libc::F_RDLCK, m) {
            Ok(_) | Err(libc::EBADF) | Err(libc::EINVAL) => {}
            // Someone holds the byte for writing: not Netatalk's way, but
            // a conflict all the same.
            Err(libc::EAGAIN) | Err(libc::EACCES) => return Err(FsError::SharingViolation),
            Err(e) => return Err(FsError::from_errno(e)),
        }
    }
    Ok(())
}

/// Whether a description other than `fd`'s holds a lock on byte `offset`.
/// None when `fd` cannot be asked (no data access).
fn held_elsewhere(fd: RawFd, offset: u64) -> Option<bool> {
    match ofd_lock(fd, libc::F_OFD_GETLK, libc::F_WRLCK, offset) {
        Ok(typ) => Some(typ != libc::F_UNLCK as i16),
        Err(libc::EBADF) => None,
        // Unknown: taken as held, as Samba's test_netatalk_lock does.
        Err(_) => Some(true),
    }
}

/// `fcntl(fd, cmd)` on the one byte at `offset`; the lock type the kernel
/// reports back (F_UNLCK when nothing is in the way, for F_OFD_GETLK).
fn ofd_lock(fd: RawFd, cmd: i32, typ: i32, offset: u64) -> Result<i16, i32> {
    // SAFETY: flock is plain data; all-zero is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = typ as i16;
    fl.l_whence = libc::SEEK_SET as i16;
    fl.l_start = offset as i64;
    fl.l_len = 1;
    // SAFETY: plain syscall with a valid flock (l_pid 0, as OFD needs).
    if unsafe { libc::fcntl(fd, cmd, &mut fl) } < 0 {
        return Err(crate::error::last_errno());
    }
    Ok(fl.l_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_holds_the_bytes_of_what_it_does_and_denies() {
        let rw = acc::FILE_READ_DATA | acc::FILE_WRITE_DATA;
        assert_eq!(marks(rw, sh::READ | sh::WRITE), [OPEN_RD, OPEN_WR]);
        assert_eq!(marks(acc::FILE_READ_DATA, 0), [OPEN_RD, DENY_RD, DENY_WR]);
        assert_eq!(marks(acc::FILE_WRITE_DATA, 0), Vec::<u64>::new());
        // Netatalk's AD_FILELOCK_BASE.
        assert_eq!(BASE, 0x7FFF_FFFF_FFFF_FFF6);
    }

    fn temp_file(name: &str) -> std::fs::File {
        let p = std::env::temp_dir().join(format!("braid-netatalk-{name}-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        let _ = std::fs::remove_file(&p);
        f
    }

    #[test]
    fn a_deny_write_open_elsewhere_refuses_a_writer_and_admits_a_reader() {
        use std::os::fd::AsRawFd;
        let f = temp_file("deny");
        let afp = f.try_clone().unwrap();
        // A second description of the same file, as Netatalk's own open.
        let path = format!("/proc/self/fd/{}", afp.as_raw_fd());
        let netatalk = std::fs::OpenOptions::new().read(true).open(&path).unwrap();
        check_and_mark(netatalk.as_raw_fd(), acc::FILE_READ_DATA, sh::READ).unwrap();
        let ours = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let rw = acc::FILE_READ_DATA | acc::FILE_WRITE_DATA;
        assert!(matches!(
            check_and_mark(ours.as_raw_fd(), rw, sh::READ | sh::WRITE),
            Err(FsError::SharingViolation)
        ));
        // A reader that shares reading gets in, and holds OPEN_RD.
        check_and_mark(ours.as_raw_fd(), acc::FILE_READ_DATA, sh::READ | sh::WRITE).unwrap();
        assert_eq!(held_elsewhere(netatalk.as_raw_fd(), OPEN_RD), Some(true));
        // Once Netatalk's open is gone, the writer gets in.
        drop(netatalk);
        let third = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        check_and_mark(third.as_raw_fd(), rw, sh::READ | sh::WRITE).unwrap();
    }
}
