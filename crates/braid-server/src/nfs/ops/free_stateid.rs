//! OP_FREE_STATEID (RFC 8881 18.38): a lock stateid with no locks left, or
//! a revoked delegation's stateid, is forgotten.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::state::locks;
use crate::nfs::state::stateids::{resolve_real, session_client};

pub fn run(c: &mut Compound, a: &FREE_STATEID4args) -> FREE_STATEID4res {
    let fsr_status = match free(c, a) {
        Ok(()) => NFS4_OK,
        Err(e) => e,
    };
    FREE_STATEID4res { fsr_status }
}

fn free(c: &mut Compound, a: &FREE_STATEID4args) -> Result<(), nfsstat4> {
    let client = session_client(c)?;
    let sid = resolve_real(c, &a.fsa_stateid)?;
    let gone = locks::free(&c.state.stateids, &client, &sid)?;
    drop(gone);
    Ok(())
}
