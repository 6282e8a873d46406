//! OP_LOCKU (RFC 8881 18.12): release a range of a lock owner's locks.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::state::locks;
use crate::nfs::state::stateids::{resolve_real, session_client};

pub fn run(c: &mut Compound, a: &LOCKU4args) -> LOCKU4res {
    match locku(c, a) {
        Ok(s) => LOCKU4res::NFS4_OK(s),
        Err(e) => LOCKU4res::Default(e),
    }
}

fn locku(c: &mut Compound, a: &LOCKU4args) -> Result<stateid4, nfsstat4> {
    let client = session_client(c)?;
    let (_, obj) = c.current_object(NFS4ERR_ISDIR)?;
    super::lock::require_file(obj.kind())?;
    if a.locktype.0 < READ_LT.0 || a.locktype.0 > WRITEW_LT.0 {
        return Err(NFS4ERR_INVAL);
    }
    let sid = resolve_real(c, &a.lock_stateid)?;
    let out = locks::unlock(
        &c.state.stateids,
        &client,
        obj.key(),
        &sid,
        a.offset,
        a.length,
    )?;
    c.current_stateid = Some(out.clone());
    Ok(out)
}
