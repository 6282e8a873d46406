//! Byte-range locks (RFC 8881 9.5, 18.10-18.12): POSIX semantics
//! (OPEN4_RESULT_LOCKTYPE_POSIX): a lock owner's locks never conflict with
//! each other, a new lock over its own range replaces the type there, and
//! an unlock may split a range. One lock stateid per lock owner and file,
//! made from an open stateid (open_to_lock_owner4).

use std::os::fd::AsRawFd;
use std::sync::Arc;

use braid_nfs_proto::nfs4::*;

use super::super::errors::errno_status;
use super::clients::Client;
use super::kernel_locks;
use super::opens::next_seqid;
use super::stateids::*;

/// Ranges one file may carry (all owners): a bound against a client that
/// would split a file into millions of ranges.
const MAX_RANGES_PER_FILE: usize = 65536;

/// RFC 8881 18.10.3: [offset, offset + length - 1]; a length of all ones
/// is "to the end of the file"; zero, or a range past 2^64 - 1, is
/// NFS4ERR_INVAL.
pub fn range(offset: u64, length: u64) -> Result<(u64, u64), nfsstat4> {
    if length == 0 {
        return Err(NFS4ERR_INVAL);
    }
    if length == u64::MAX {
        return Ok((offset, u64::MAX));
    }
    let end = offset.checked_add(length - 1).ok_or(NFS4ERR_INVAL)?;
    Ok((offset, end))
}

fn is_write(t: nfs_lock_type4) -> bool {
    t == WRITE_LT || t == WRITEW_LT
}

/// LOCK4denied for a conflicting range.
fn denied(r: &LockRange) -> LOCK4denied {
    LOCK4denied {
        offset: r.start,
        length: if r.end == u64::MAX {
            u64::MAX
        } else {
            r.end - r.start + 1
        },
        locktype: if r.write { WRITE_LT } else { READ_LT },
        owner: lock_owner4 {
            clientid: r.clientid,
            owner: r.owner.clone(),
        },
    }
}

/// A lock held outside NFS (an SMB client, a local process): no NFS owner
/// to name.
fn outside_holder(start: u64, end: u64, write: bool) -> LOCK4denied {
    LOCK4denied {
        offset: start,
        length: if end == u64::MAX {
            u64::MAX
        } else {
            end - start + 1
        },
        locktype: if write { WRITE_LT } else { READ_LT },
        owner: lock_owner4 {
            clientid: 0,
            owner: b"braid:not-nfs".to_vec(),
        },
    }
}

/// The first range of another lock owner that a lock of `write` type on
/// [start, end] conflicts with.
pub fn conflict<'a>(
    f: &'a FileState,
    clientid: clientid4,
    owner: &[u8],
    start: u64,
    end: u64,
    write: bool,
) -> Option<&'a LockRange> {
    f.locks.iter().find(|r| {
        (r.clientid != clientid || r.owner != owner)
            && r.start <= end
            && start <= r.end
            && (write || r.write)
    })
}

/// Remove [start, end] from `stateid`'s ranges, splitting where needed.
fn carve(locks: &mut Vec<LockRange>, stateid: &Other, start: u64, end: u64) {
    let mut out = Vec::with_capacity(locks.len() + 1);
    for r in locks.drain(..) {
        if &r.stateid != stateid || r.end < start || end < r.start {
            out.push(r);
            continue;
        }
        if r.start < start {
            out.push(LockRange {
                end: start - 1,
                ..r.clone()
            });
        }
        if end < r.end {
            out.push(LockRange {
                start: end + 1,
                ..r.clone()
            });
        }
    }
    *locks = out;
}

pub enum LockError {
    Status(nfsstat4),
    Denied(LOCK4denied),
}

impl From<nfsstat4> for LockError {
    fn from(s: nfsstat4) -> Self {
        LockError::Status(s)
    }
}

/// Who asks for the lock.
pub enum Locker<'a> {
    /// A new lock owner, from an open stateid.
    New { open: &'a stateid4, owner: &'a [u8] },
    /// A lock owner that has a lock stateid on this file.
    Existing(&'a stateid4),
}

/// One LOCK request.
pub struct LockRequest<'a> {
    pub key: FileKey,
    pub locker: Locker<'a>,
    pub locktype: nfs_lock_type4,
    pub offset: u64,
    pub length: u64,
    /// NfsLimits::max_locks_per_client (lock stateids).
    pub max_locks: usize,
    pub expire: Expire<'a>,
}

/// RFC 8881 18.10.3: LOCK.
pub fn lock(
    table: &StateTable,
    client: &Arc<Client>,
    req: LockRequest<'_>,
) -> Result<stateid4, LockError> {
    let LockRequest {
        key,
        locker,
        locktype,
        offset,
        length,
        max_locks,
        expire,
    } = req;
    let (start, end) = range(offset, length)?;
    let write = is_write(locktype);
    let mut inner = table.lock();
    let clientid = client.clientid;
    // The lock stateid, or the open it will be made from.
    let (lock_other, open_other, owner) = match locker {
        Locker::New { open, owner } => {
            let st = inner.check(clientid, Some(key), open)?;
            if !matches!(st.kind, Kind::Open(_)) {
                return Err(NFS4ERR_BAD_STATEID.into());
            }
            let existing = inner
                .lock_owners
                .get(&(clientid, owner.to_vec(), key))
                .copied();
            (existing, open.other, owner.to_vec())
        }
        Locker::Existing(sid) => {
            let st = inner.check(clientid, Some(key), sid)?;
            let Kind::Lock(l) = &st.kind else {
                return Err(NFS4ERR_BAD_STATEID.into());
            };
            (Some(sid.other), l.open, st.owner.clone())
        }
    };
    // RFC 8881 18.10.3: the open must allow the kind of lock
    // (NFS4ERR_OPENMODE), as knfsd checks it.
    let access = match inner.states.get(&open_other) {
        Some(State {
            kind: Kind::Open(o),
            ..
        }) => o.access,
        _ => return Err(NFS4ERR_BAD_STATEID.into()),
    };
    let needed = if write {
        OPEN4_SHARE_ACCESS_WRITE
    } else {
        OPEN4_SHARE_ACCESS_READ
    };
    if access & needed == 0 {
        return Err(NFS4ERR_OPENMODE.into());
    }
    // A conflicting lock of a courtesy client goes; a live one denies.
    while let Some(r) = inner
        .files
        .get(&key)
        .and_then(|f| conflict(f, clientid, &owner, start, end, write))
    {
        let (holder, d) = (r.clientid, denied(r));
        if holder == clientid || !inner.evict(holder, expire) {
            return Err(LockError::Denied(d));
        }
    }
    if let Some(f) = inner.files.get(&key) {
        if f.locks.len() >= MAX_RANGES_PER_FILE {
            return Err(NFS4ERR_RESOURCE.into());
        }
    }
    // The kernel's view (SMB clients, local processes): on the lock
    // owner's own description, made for a new lock owner from the open's.
    let new_fd = match lock_other {
        Some(_) => None,
        None => match inner.states.get(&open_other) {
            Some(State {
                kind: Kind::Open(o),
                ..
            }) => kernel_locks::reopen(&o.io.file, o.io.write).ok(),
            _ => None,
        },
    };
    let fd = match lock_other {
        Some(o) => match inner.states.get(&o) {
            Some(State {
                kind: Kind::Lock(l),
                ..
            }) => l.fd.as_ref().map(|f| f.as_raw_fd()),
            _ => None,
        },
        None => new_fd.as_ref().map(|f| f.as_raw_fd()),
    };
    if let Some(fd) = fd {
        match kernel_locks::set(fd, start, end, Some(write)) {
            Ok(()) => {}
            Err(libc::EAGAIN) => {
                let (s, e, w) =
                    kernel_locks::conflict(fd, start, end, write).unwrap_or((start, end, true));
                return Err(LockError::Denied(outside_holder(s, e, w)));
            }
            Err(e) => return Err(errno_status(e).into()),
        }
    }
    let (other, seqid) = match lock_other {
        Some(other) => {
            let Some(st) = inner.states.get_mut(&other) else {
                return Err(NFS4ERR_BAD_STATEID.into());
            };
            st.seqid = next_seqid(st.seqid);
            (other, st.seqid)
        }
        None => {
            {
                let cs = client.state.lock().unwrap_or_else(|e| e.into_inner());
                if cs.locks.len() >= max_locks {
                    return Err(NFS4ERR_RESOURCE.into());
                }
            }
            let other = table.new_other();
            let (export, obj) = match inner.states.get_mut(&open_other) {
                Some(State {
                    export,
                    obj,
                    kind: Kind::Open(o),
                    ..
                }) => {
                    o.locks.push(other);
                    (export.clone(), obj.clone())
                }
                _ => return Err(NFS4ERR_BAD_STATEID.into()),
            };
            inner.states.insert(
                other,
                State {
                    seqid: 1,
                    clientid,
                    key,
                    owner: owner.clone(),
                    export,
                    obj,
                    kind: Kind::Lock(LockState {
                        open: open_other,
                        fd: new_fd,
                    }),
                },
            );
            inner
                .lock_owners
                .insert((clientid, owner.clone(), key), other);
            client
                .state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .locks
                .insert(other);
            (other, 1)
        }
    };
    let f = inner.file(key);
    carve(&mut f.locks, &other, start, end);
    f.locks.push(LockRange {
        stateid: other,
        clientid,
        owner,
        start,
        end,
        write,
    });
    inner.note_held(client, &other);
    Ok(stateid4 { seqid, other })
}

/// RFC 8881 18.11.3: LOCKT: a conflicting lock of another owner, if any.
pub fn test(
    table: &StateTable,
    clientid: clientid4,
    key: FileKey,
    owner: &[u8],
    locktype: nfs_lock_type4,
    offset: u64,
    length: u64,
) -> Result<Option<LOCK4denied>, nfsstat4> {
    let (start, end) = range(offset, length)?;
    let write = is_write(locktype);
    let inner = table.read();
    let Some(f) = inner.files.get(&key) else {
        return Ok(None);
    };
    if let Some(r) = conflict(f, clientid, owner, start, end, write) {
        return Ok(Some(denied(r)));
    }
    // Outside NFS: asked through the owner's own description (its own
    // locks are no conflict), or an open's, which holds none. (Without an
    // NFS open of the file, the NFS table alone.)
    let own = inner
        .lock_owners
        .get(&(clientid, owner.to_vec(), key))
        .and_then(|o| match inner.states.get(o) {
            Some(State {
                kind: Kind::Lock(LockState { fd: Some(fd), .. }),
                ..
            }) => Some(fd.as_raw_fd()),
            _ => None,
        });
    let fd = own.or_else(|| {
        f.opens.iter().find_map(|o| match inner.states.get(o) {
            Some(State {
                kind: Kind::Open(o),
                ..
            }) => Some(o.io.file.as_raw_fd()),
            _ => None,
        })
    });
    Ok(fd
        .and_then(|fd| kernel_locks::conflict(fd, start, end, write))
        .map(|(s, e, w)| outside_holder(s, e, w)))
}

/// RFC 8881 18.12.3: LOCKU: the owner's locks in the range go (a range
/// it does not hold is no error); the stateid's seqid goes up.
pub fn unlock(
    table: &StateTable,
    client: &Client,
    key: FileKey,
    sid: &stateid4,
    offset: u64,
    length: u64,
) -> Result<stateid4, nfsstat4> {
    let (start, end) = range(offset, length)?;
    let mut inner = table.lock();
    let st = inner.check(client.clientid, Some(key), sid)?;
    if !matches!(st.kind, Kind::Lock(_)) {
        return Err(NFS4ERR_BAD_STATEID);
    }
    if let Some(f) = inner.files.get_mut(&key) {
        carve(&mut f.locks, &sid.other, start, end);
    }
    if let Some(State {
        kind: Kind::Lock(LockState { fd: Some(fd), .. }),
        ..
    }) = inner.states.get(&sid.other)
    {
        // Only releases: cannot meet a conflict.
        let _ = kernel_locks::set(fd.as_raw_fd(), start, end, None);
    }
    let Some(st) = inner.states.get_mut(&sid.other) else {
        return Err(NFS4ERR_BAD_STATEID);
    };
    st.seqid = next_seqid(st.seqid);
    let stateid = stateid4 {
        seqid: st.seqid,
        other: sid.other,
    };
    inner.note_held(client, &sid.other);
    Ok(stateid)
}

/// RFC 8881 18.38.3: FREE_STATEID. A lock stateid with no lock held, or a
/// revoked delegation, goes; an open stateid, a lock stateid with locks,
/// or a delegation in force is NFS4ERR_LOCKS_HELD.
pub fn free(table: &StateTable, client: &Client, sid: &stateid4) -> Result<Vec<State>, nfsstat4> {
    let mut inner = table.lock();
    let st = match inner.check(client.clientid, None, sid) {
        Err(NFS4ERR_DELEG_REVOKED) => {
            let gone = inner.remove(client, &sid.other);
            super::delegations::clear_revoked_flag(&inner, client);
            return Ok(gone);
        }
        r => r?,
    };
    let key = st.key;
    match &st.kind {
        Kind::Lock(_) => {
            let held = inner
                .files
                .get(&key)
                .is_some_and(|f| f.locks.iter().any(|r| r.stateid == sid.other));
            if held {
                return Err(NFS4ERR_LOCKS_HELD);
            }
        }
        Kind::Open(_) | Kind::Deleg(_) => return Err(NFS4ERR_LOCKS_HELD),
    }
    Ok(inner.remove(client, &sid.other))
}

/// RFC 8881 18.48.3: TEST_STATEID's status for one stateid (of this
/// client; the current filehandle does not matter).
pub fn test_stateid(table: &StateTable, clientid: clientid4, sid: &stateid4) -> nfsstat4 {
    let inner = table.read();
    match inner.check(clientid, None, sid) {
        Ok(_) => NFS4_OK,
        Err(e) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(range(0, 0), Err(NFS4ERR_INVAL));
        assert_eq!(range(5, u64::MAX), Ok((5, u64::MAX)));
        assert_eq!(range(u64::MAX, 1), Ok((u64::MAX, u64::MAX)));
        assert_eq!(range(u64::MAX, 2), Err(NFS4ERR_INVAL));
        assert_eq!(range(10, 10), Ok((10, 19)));
    }

    fn r(id: u8, start: u64, end: u64) -> LockRange {
        LockRange {
            stateid: [id; 12],
            clientid: 1,
            owner: vec![id],
            start,
            end,
            write: true,
        }
    }

    #[test]
    fn carve_splits_and_keeps_others() {
        let mut v = vec![r(1, 0, 99), r(2, 0, 99)];
        carve(&mut v, &[1; 12], 10, 19);
        assert_eq!(v, vec![r(1, 0, 9), r(1, 20, 99), r(2, 0, 99)]);
        carve(&mut v, &[1; 12], 0, u64::MAX);
        assert_eq!(v, vec![r(2, 0, 99)]);
    }

    #[test]
    fn conflicts_only_with_other_owners() {
        let f = FileState {
            locks: vec![r(1, 0, 9)],
            ..FileState::default()
        };
        assert!(conflict(&f, 1, &[1], 0, 9, true).is_none());
        assert!(conflict(&f, 1, &[2], 9, 20, false).is_some());
        assert!(conflict(&f, 1, &[2], 10, 20, true).is_none());
        assert!(conflict(&f, 2, &[1], 0, 0, false).is_some());
    }
}
