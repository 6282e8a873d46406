//! LOCK: MS-SMB2 3.3.5.14, with blocking locks answered asynchronously.

use braid_fs::{FsError, LockOwner};
use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::lock::flags;
use braid_smb_proto::messages::negotiate::dialect;
use braid_smb_proto::messages::{LockElement, LockRequest, LockResponse};
use braid_smb_proto::NtStatus;

use crate::smb::session::Open;
use crate::smb::status_map::fs_status;
use crate::smb::{OpResult, Reply, Request};

/// SMB2 locks belong to the open, not to a process.
const OWNER: LockOwner = LockOwner(0);

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = LockRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let open = req.open(r.file_id)?;
    // MS-SMB2 3.3.5.14: lock sequence verification, for durable opens and
    // on 3.x connections that offered multichannel. A LOCK carrying the
    // number of the last successful one in its bucket is a replay of it,
    // sent again after a channel failed: it succeeds without taking effect
    // again (smbtorture smb2.lock.replay_smb3_specification_*). Windows
    // verifies resilient and persistent opens only (note <314>).
    let bucket = lock_sequence_bucket(req, &open, r.lock_sequence_index);
    if let Some(i) = bucket {
        let mut seqs = open.lock_sequences.lock().unwrap();
        if seqs[i] == r.lock_sequence_number {
            return Ok(Reply::of(&LockResponse));
        }
        seqs[i] = crate::smb::session::NO_LOCK_SEQUENCES[i];
    }
    let result = apply(req, &r, &open).await;
    if let (Some(i), Ok(_)) = (bucket, &result) {
        open.lock_sequences.lock().unwrap()[i] = r.lock_sequence_number;
    }
    if result.is_ok() {
        // A persistent open's locks are held again after a restart.
        crate::smb::persistent::resave_if_persistent(&req.conn.server, &open).await;
    }
    result
}

/// The Open.LockSequenceArray entry a LOCK is verified against, if any:
/// LockSequenceIndex 1 to 64 on an open that verifies lock sequences.
fn lock_sequence_bucket(req: &Request<'_>, open: &Open, index: u32) -> Option<usize> {
    if !(1..=64).contains(&index) {
        return None;
    }
    let multichannel = req.conn.dialect() >= dialect::SMB300 && req.conn.config.multichannel;
    let durable = open.durable.lock().unwrap().is_some();
    (multichannel || durable).then_some(index as usize - 1)
}

async fn apply(req: &mut Request<'_>, r: &LockRequest, open: &Open) -> OpResult {
    if r.locks.is_empty() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // 3.3.5.14.1: a request either unlocks or locks, never both.
    if r.locks[0].flags & flags::UNLOCK != 0 {
        for l in &r.locks {
            if l.flags != flags::UNLOCK {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            open.handle
                .unlock(l.offset, l.length, OWNER)
                .map_err(|e| match e {
                    FsError::InvalidLockRange => NtStatus::INVALID_LOCK_RANGE,
                    _ => NtStatus::RANGE_NOT_LOCKED,
                })?;
        }
        return Ok(Reply::of(&LockResponse));
    }
    for l in &r.locks {
        let kind = l.flags & !flags::FAIL_IMMEDIATELY;
        if kind != flags::SHARED_LOCK && kind != flags::EXCLUSIVE_LOCK {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        // 3.3.5.14.2: only a single-element request may block.
        if r.locks.len() > 1 && l.flags & flags::FAIL_IMMEDIATELY == 0 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
    }
    // MS-FSA 2.1.5.7: a byte-range lock breaks the read caching of the
    // file's other holders (level II oplocks, Read leases).
    if let Some(o) = &open.oplock {
        o.file.break_level2_except(o.key);
    }
    if r.locks.len() > 1 {
        return lock_all_or_none(open, &r.locks).map(|_| Reply::of(&LockResponse));
    }

    let l = r.locks[0];
    let exclusive = l.flags & flags::EXCLUSIVE_LOCK != 0;
    let immediate = l.flags & flags::FAIL_IMMEDIATELY != 0;
    let notify = open.handle.lock_changed();
    let cancel = if immediate {
        None
    } else {
        Some(req.cancellable())
    };
    loop {
        let released = notify.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        match open.handle.lock(l.offset, l.length, exclusive, OWNER) {
            Ok(()) => return Ok(Reply::of(&LockResponse)),
            Err(FsError::LockNotGranted | FsError::LockConflict)
                if !immediate && req.in_compound =>
            {
                // MS-SMB2 3.3.4.2 <159>: only a compound's last request may
                // go async; one before it that would wait fails instead.
                return Err(NtStatus::INTERNAL_ERROR);
            }
            Err(e @ (FsError::LockNotGranted | FsError::LockConflict)) if !immediate => {
                let _ = e;
                req.go_async()?;
                let cancel = cancel.as_ref().expect("blocking lock is cancellable");
                // A close (tree disconnect, logoff) ends the wait with
                // RANGE_NOT_LOCKED, as Samba answers; checked first.
                tokio::select! {
                    biased;
                    _ = open.close_signal.cancelled() => return Err(NtStatus::RANGE_NOT_LOCKED),
                    _ = cancel.cancelled() => return Err(NtStatus::CANCELLED),
                    _ = &mut released => {
                        if open.closed.load(std::sync::atomic::Ordering::Acquire) {
                            return Err(NtStatus::RANGE_NOT_LOCKED);
                        }
                        continue;
                    }
                    // A lock held by a local process (braid-fs posix_lock)
                    // is released without a word to Braid: look again now
                    // and then, as Samba retries a blocked POSIX lock.
                    _ = tokio::time::sleep(HOST_LOCK_RETRY) => continue,
                }
            }
            Err(e) => return Err(fs_status(&e)),
        }
    }
}

/// How often a waiting lock looks again for a release it cannot be told of.
const HOST_LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// Several elements: take them all or none (3.3.5.14.2 rolls back).
fn lock_all_or_none(open: &Open, locks: &[LockElement]) -> Result<(), NtStatus> {
    for (i, l) in locks.iter().enumerate() {
        let exclusive = l.flags & flags::EXCLUSIVE_LOCK != 0;
        if let Err(e) = open.handle.lock(l.offset, l.length, exclusive, OWNER) {
            for p in &locks[..i] {
                let _ = open.handle.unlock(p.offset, p.length, OWNER);
            }
            return Err(fs_status(&e));
        }
    }
    Ok(())
}
