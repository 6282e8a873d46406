//! OP_LOCKT (RFC 8881 18.11): would a lock conflict? No state is made.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::state::locks;
use crate::nfs::state::stateids::session_client;

pub fn run(c: &mut Compound, a: &LOCKT4args) -> LOCKT4res {
    match lockt(c, a) {
        Ok(None) => LOCKT4res::NFS4_OK,
        Ok(Some(d)) => LOCKT4res::NFS4ERR_DENIED(d),
        Err(s) => LOCKT4res::Default(s),
    }
}

fn lockt(c: &mut Compound, a: &LOCKT4args) -> Result<Option<LOCK4denied>, nfsstat4> {
    let client = session_client(c)?;
    let (_, obj) = c.current_object(NFS4ERR_ISDIR)?;
    super::lock::require_file(obj.kind())?;
    if a.locktype.0 < READ_LT.0 || a.locktype.0 > WRITEW_LT.0 {
        return Err(NFS4ERR_INVAL);
    }
    // RFC 8881 18.11.3: in 4.1 the owner's client is the session's (its
    // clientid field is ignored).
    locks::test(
        &c.state.stateids,
        client.clientid,
        obj.key(),
        &a.owner.owner,
        a.locktype,
        a.offset,
        a.length,
    )
}
