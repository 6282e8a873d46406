//! Byte-range locks mirrored as Linux open file description locks
//! (`F_OFD_SETLK`), as Samba's "posix locking" does: a local process (or
//! another server) that takes a POSIX lock sees what SMB clients hold, and
//! its own locks hold SMB clients off (LOCK_NOT_GRANTED, or a blocking lock
//! that waits).
//!
//! Braid's [`crate::locks::LockTable`] stays the authority between SMB
//! opens; the kernel lock of an open is derived from that open's entries.
//! Each open has its own file description, so an open is one POSIX owner.
//! POSIX cannot express everything SMB can, and what it cannot is left to
//! the table alone: zero-length locks, and bytes past `i64::MAX` (off_t).

use std::os::fd::RawFd;

use crate::locks::ByteRangeLock;

/// Last byte offset a POSIX lock can cover.
const OFF_MAX: u64 = i64::MAX as u64;

/// The bytes of an SMB range that POSIX can lock, as (first, last), both
/// inclusive; None when there are none.
fn span(offset: u64, length: u64) -> Option<(u64, u64)> {
    if length == 0 || offset > OFF_MAX {
        return None;
    }
    let last = offset.saturating_add(length - 1).min(OFF_MAX);
    Some((offset, last))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Unlocked,
    Shared,
    Exclusive,
}

/// What the kernel lock of one open must be over `first..=last`, given that
/// open's locks: maximal runs of one kind, in order.
fn plan(locks: &[(u64, u64, bool)], first: u64, last: u64) -> Vec<(u64, u64, Kind)> {
    let mut cuts = vec![first, last + 1];
    for &(s, e, _) in locks {
        if s <= last && e >= first {
            cuts.push(s.max(first));
            cuts.push(e.min(last) + 1);
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut runs: Vec<(u64, u64, Kind)> = Vec::new();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1] - 1);
        let mut kind = Kind::Unlocked;
        for &(s, e, exclusive) in locks {
            if s <= a && e >= a {
                kind = if exclusive {
                    Kind::Exclusive
                } else {
                    kind.max_shared()
                };
            }
            if kind == Kind::Exclusive {
                break;
            }
        }
        match runs.last_mut() {
            Some(r) if r.2 == kind && r.1 + 1 == a => r.1 = b,
            _ => runs.push((a, b, kind)),
        }
    }
    runs
}

impl Kind {
    fn max_shared(self) -> Kind {
        match self {
            Kind::Unlocked => Kind::Shared,
            k => k,
        }
    }
}

/// Bring the kernel lock of `fd` over an SMB range in line with the open's
/// locks (`own`: that open's entries in the lock table, after the change;
/// `held`: single bytes the open keeps read-locked whatever its SMB locks,
/// Netatalk's in `netatalk_lock.rs`).
/// Err(EAGAIN) when a lock held outside Braid is in the way; the caller
/// then takes its table entry back and calls this again, which only
/// releases or downgrades and so cannot fail on a conflict.
pub(crate) fn sync(
    fd: RawFd,
    own: &[ByteRangeLock],
    held: &[u64],
    offset: u64,
    length: u64,
) -> Result<(), i32> {
    let Some((first, last)) = span(offset, length) else {
        return Ok(());
    };
    let spans: Vec<(u64, u64, bool)> = own
        .iter()
        .filter_map(|l| span(l.offset, l.length).map(|(s, e)| (s, e, l.exclusive)))
        .chain(held.iter().map(|&b| (b, b, false)))
        .collect();
    for (a, b, kind) in plan(&spans, first, last) {
        set(fd, a, b, kind)?;
    }
    Ok(())
}

/// Drop every kernel lock of `fd` (on close: the description may outlive
/// the open while a request still holds the handle).
pub(crate) fn release_all(fd: RawFd) {
    let _ = set(fd, 0, OFF_MAX, Kind::Unlocked);
}

fn set(fd: RawFd, first: u64, last: u64, kind: Kind) -> Result<(), i32> {
    let typ = match kind {
        Kind::Unlocked => libc::F_UNLCK,
        Kind::Shared => libc::F_RDLCK,
        Kind::Exclusive => libc::F_WRLCK,
    };
    match ofd_setlk(fd, first, last, typ) {
        // A write lock needs a description open for writing; an SMB open
        // with read access alone may still lock exclusively, so the kernel
        // gets a read lock there, as Samba does (map_posix_lock_type).
        Err(libc::EBADF) if typ == libc::F_WRLCK => {
            ofd_setlk(fd, first, last, libc::F_RDLCK).or_else(ignore_unlockable)
        }
        Err(e) => ignore_unlockable(e),
        Ok(()) => Ok(()),
    }
}

/// A description that cannot hold a lock of that kind at all (an O_PATH
/// open has no data access) leaves the table alone in charge.
fn ignore_unlockable(e: i32) -> Result<(), i32> {
    match e {
        libc::EBADF | libc::EINVAL => Ok(()),
        e => Err(e),
    }
}

fn ofd_setlk(fd: RawFd, first: u64, last: u64, typ: i32) -> Result<(), i32> {
    // l_len 0 reaches the largest offset: the only way to cover byte
    // OFF_MAX, since OFF_MAX + 1 does not fit an off_t.
    let len = if last == OFF_MAX {
        0
    } else {
        (last - first + 1) as i64
    };
    // SAFETY: flock is plain data; l_pid must be 0 for OFD locks.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = typ as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = first as libc::off_t;
    fl.l_len = len as libc::off_t;
    // SAFETY: fcntl with a valid flock pointer; fd is borrowed.
    let r = unsafe { libc::fcntl(fd, libc::F_OFD_SETLK, &mut fl) };
    if r < 0 {
        Err(crate::error::last_errno())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::Holder;
    use crate::types::LockOwner;
    use std::os::fd::AsRawFd;

    fn lk(offset: u64, length: u64, exclusive: bool) -> ByteRangeLock {
        ByteRangeLock {
            offset,
            length,
            exclusive,
            holder: Holder {
                open_id: 1,
                owner: LockOwner(0),
            },
        }
    }

    #[test]
    fn spans_posix_cannot_express_are_skipped() {
        assert_eq!(span(0, 0), None);
        assert_eq!(span(OFF_MAX + 1, 10), None);
        assert_eq!(span(5, 10), Some((5, 14)));
        assert_eq!(
            span(OFF_MAX - 1, u64::MAX - OFF_MAX),
            Some((OFF_MAX - 1, OFF_MAX))
        );
    }

    #[test]
    fn plan_takes_the_strongest_lock_over_each_byte() {
        let locks = [(0, 9, false), (5, 14, true), (20, 29, false)];
        assert_eq!(
            plan(&locks, 0, 29),
            vec![
                (0, 4, Kind::Shared),
                (5, 14, Kind::Exclusive),
                (15, 19, Kind::Unlocked),
                (20, 29, Kind::Shared),
            ]
        );
        assert_eq!(plan(&[], 3, 7), vec![(3, 7, Kind::Unlocked)]);
    }

    /// Another open file description stands in for a local process: OFD
    /// locks of different descriptions conflict as two processes' would.
    #[test]
    fn kernel_locks_follow_the_table_and_meet_other_owners() {
        let path = std::env::temp_dir().join(format!("braid-posix-lock-{}", std::process::id()));
        std::fs::write(&path, b"0123456789").unwrap();
        let open = |write| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(write)
                .open(&path)
                .unwrap()
        };
        let (ours, theirs) = (open(true), open(true));
        // Exclusive 0..10 taken: the other owner cannot read-lock byte 3.
        sync(ours.as_raw_fd(), &[lk(0, 10, true)], &[], 0, 10).unwrap();
        assert_eq!(
            ofd_setlk(theirs.as_raw_fd(), 3, 3, libc::F_RDLCK),
            Err(libc::EAGAIN)
        );
        // Down to a shared lock on 0..5 after an unlock: byte 3 can be
        // read-locked but not write-locked, byte 7 is free.
        sync(ours.as_raw_fd(), &[lk(0, 5, false)], &[], 0, 10).unwrap();
        assert_eq!(ofd_setlk(theirs.as_raw_fd(), 3, 3, libc::F_RDLCK), Ok(()));
        assert_eq!(
            ofd_setlk(theirs.as_raw_fd(), 3, 3, libc::F_WRLCK),
            Err(libc::EAGAIN)
        );
        assert_eq!(ofd_setlk(theirs.as_raw_fd(), 7, 7, libc::F_WRLCK), Ok(()));
        // Their write lock on 7 refuses ours over it.
        assert_eq!(
            sync(
                ours.as_raw_fd(),
                &[lk(0, 5, false), lk(6, 4, true)],
                &[],
                6,
                4
            ),
            Err(libc::EAGAIN)
        );
        // A read-only description still locks, as shared.
        let reader = open(false);
        release_all(ours.as_raw_fd());
        sync(reader.as_raw_fd(), &[lk(0, 2, true)], &[], 0, 2).unwrap();
        assert_eq!(
            ofd_setlk(theirs.as_raw_fd(), 1, 1, libc::F_WRLCK),
            Err(libc::EAGAIN)
        );
        release_all(reader.as_raw_fd());
        assert_eq!(ofd_setlk(theirs.as_raw_fd(), 1, 1, libc::F_WRLCK), Ok(()));
        let _ = std::fs::remove_file(&path);
    }

    /// A byte the open keeps held (Netatalk's) stays read-locked when an
    /// SMB lock over it comes and goes.
    #[test]
    fn a_held_byte_outlives_the_smb_locks_over_it() {
        let path = std::env::temp_dir().join(format!("braid-posix-held-{}", std::process::id()));
        std::fs::write(&path, b"x").unwrap();
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap()
        };
        let (ours, theirs) = (open(), open());
        let held = [OFF_MAX - 8];
        sync(
            ours.as_raw_fd(),
            &[lk(0, u64::MAX, true)],
            &held,
            0,
            u64::MAX,
        )
        .unwrap();
        sync(ours.as_raw_fd(), &[], &held, 0, u64::MAX).unwrap();
        assert_eq!(
            ofd_setlk(theirs.as_raw_fd(), OFF_MAX - 8, OFF_MAX - 8, libc::F_WRLCK),
            Err(libc::EAGAIN)
        );
        assert_eq!(ofd_setlk(theirs.as_raw_fd(), 0, 100, libc::F_WRLCK), Ok(()));
        let _ = std::fs::remove_file(&path);
    }
}
