//! OP_OPEN_DOWNGRADE (RFC 8881 18.18): an open owner gives up some of its
//! access or deny (to a mode it opened with before); the same stateid
//! with its seqid one up. The fd stays as opened: the stateid checks hold
//! I/O to the new access.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::state::opens;
use crate::nfs::state::stateids::{resolve_real, session_client};

pub fn run(c: &mut Compound, a: &OPEN_DOWNGRADE4args) -> OPEN_DOWNGRADE4res {
    match downgrade(c, a) {
        Ok(s) => OPEN_DOWNGRADE4res::NFS4_OK(OPEN_DOWNGRADE4resok { open_stateid: s }),
        Err(e) => OPEN_DOWNGRADE4res::Default(e),
    }
}

fn downgrade(c: &mut Compound, a: &OPEN_DOWNGRADE4args) -> Result<stateid4, nfsstat4> {
    let client = session_client(c)?;
    let (_, obj) = c.current_object(NFS4ERR_BAD_STATEID)?;
    // RFC 8881 18.18.3: the "want" bits are ignored here; access must stay
    // non-empty.
    let access = a.share_access & OPEN4_SHARE_ACCESS_BOTH;
    if access == 0 || a.share_deny & !OPEN4_SHARE_DENY_BOTH != 0 {
        return Err(NFS4ERR_INVAL);
    }
    let sid = resolve_real(c, &a.open_stateid)?;
    let out = opens::downgrade(
        &c.state.stateids,
        &client,
        obj.key(),
        &sid,
        access,
        a.share_deny,
    )?;
    c.current_stateid = Some(out.clone());
    Ok(out)
}
