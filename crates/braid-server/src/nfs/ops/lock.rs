//! OP_LOCK (RFC 8881 18.10): a byte-range lock for a lock owner, whose
//! lock stateid is made from an open stateid the first time
//! (open_to_lock_owner4) and named after that (exist_lock_owner4).

use braid_fs::posix::ObjectKind;
use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::state::held::ReclaimCounts;
use crate::nfs::state::locks::{self, LockError, LockRequest, Locker};
use crate::nfs::state::stateids::{courtesy, resolve_real, session_client};

pub fn run(c: &mut Compound, a: &LOCK4args) -> LOCK4res {
    match lock(c, a) {
        Ok(s) => LOCK4res::NFS4_OK(LOCK4resok { lock_stateid: s }),
        Err(LockError::Denied(d)) => LOCK4res::NFS4ERR_DENIED(d),
        Err(LockError::Status(s)) => LOCK4res::Default(s),
    }
}

/// RFC 8881 18.10.3: locks are on regular files.
pub fn require_file(kind: ObjectKind) -> Result<(), nfsstat4> {
    match kind {
        ObjectKind::File => Ok(()),
        ObjectKind::Directory => Err(NFS4ERR_ISDIR),
        ObjectKind::Symlink => Err(NFS4ERR_SYMLINK),
        _ => Err(NFS4ERR_INVAL),
    }
}

fn lock(c: &mut Compound, a: &LOCK4args) -> Result<stateid4, LockError> {
    let client = session_client(c)?;
    let (export, obj) = c.current_object(NFS4ERR_ISDIR)?;
    require_file(obj.kind())?;
    if a.locktype.0 < READ_LT.0 || a.locktype.0 > WRITEW_LT.0 {
        return Err(NFS4ERR_INVAL.into());
    }
    // RFC 8881 8.4.2, 18.10.3: reclaims only in the grace period, new
    // locks only outside it.
    if a.reclaim {
        if client
            .reclaim_complete
            .load(std::sync::atomic::Ordering::Acquire)
            || !c.state.grace.may_reclaim(&client.owner)
        {
            return Err(NFS4ERR_NO_GRACE.into());
        }
        // RFC 8881 8.4.2.1: only a lock the client held in the last run
        // (`state/held.rs`).
        let range = locks::range(a.offset, a.length)?;
        let write = a.locktype == WRITE_LT || a.locktype == WRITEW_LT;
        let file = (export.name.as_str(), obj.fileid());
        if !c.state.held.may_relock(&client.owner, file, range, write) {
            ReclaimCounts::bump(&c.state.reclaims.refused);
            return Err(NFS4ERR_RECLAIM_BAD.into());
        }
    } else if c.state.grace.active() {
        return Err(NFS4ERR_GRACE.into());
    }
    let (open_sid, lock_sid);
    let locker = match &a.locker {
        locker4::TRUE(o) => {
            open_sid = resolve_real(c, &o.open_stateid)?;
            Locker::New {
                open: &open_sid,
                owner: &o.lock_owner.owner,
            }
        }
        locker4::FALSE(e) => {
            lock_sid = resolve_real(c, &e.lock_stateid)?;
            Locker::Existing(&lock_sid)
        }
    };
    let expire = courtesy(c);
    let sid = locks::lock(
        &c.state.stateids,
        &client,
        LockRequest {
            key: obj.key(),
            locker,
            locktype: a.locktype,
            offset: a.offset,
            length: a.length,
            max_locks: c.state.limits.max_locks_per_client,
            expire: &expire,
        },
    )?;
    drop(expire);
    if a.reclaim {
        ReclaimCounts::bump(&c.state.reclaims.locks);
    }
    c.current_stateid = Some(sid.clone());
    Ok(sid)
}
