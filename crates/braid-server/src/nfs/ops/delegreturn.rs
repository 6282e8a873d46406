//! OP_DELEGRETURN (RFC 8881 18.6): the client gives a delegation back
//! (after a CB_RECALL, or when it no longer wants it).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::state::delegations;
use crate::nfs::state::stateids::{resolve_real, session_client};

pub fn run(c: &mut Compound, a: &DELEGRETURN4args) -> DELEGRETURN4res {
    let status = match delegreturn(c, a) {
        Ok(()) => NFS4_OK,
        Err(e) => e,
    };
    DELEGRETURN4res { status }
}

fn delegreturn(c: &mut Compound, a: &DELEGRETURN4args) -> Result<(), nfsstat4> {
    let client = session_client(c)?;
    let (_, obj) = c.current_object(NFS4ERR_BAD_STATEID)?;
    let sid = resolve_real(c, &a.deleg_stateid)?;
    let gone = delegations::delegreturn(&c.state.stateids, &client, obj.key(), &sid)?;
    drop(gone);
    Ok(())
}
