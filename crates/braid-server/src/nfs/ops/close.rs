//! OP_CLOSE (RFC 8881 18.2): the open owner's share reservation and open
//! stateid go. RFC 8881 18.2.4: the stateid returned is of no use, and the
//! server SHOULD return the invalid special stateid (seqid all ones, other
//! all zeros), as knfsd does.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::state::opens;
use crate::nfs::state::stateids::{resolve_real, session_client};

pub fn run(c: &mut Compound, a: &CLOSE4args) -> CLOSE4res {
    match close(c, a) {
        Ok(s) => CLOSE4res::NFS4_OK(s),
        Err(e) => CLOSE4res::Default(e),
    }
}

fn close(c: &mut Compound, a: &CLOSE4args) -> Result<stateid4, nfsstat4> {
    let client = session_client(c)?;
    let (_, obj) = c.current_object(NFS4ERR_BAD_STATEID)?;
    let sid = resolve_real(c, &a.open_stateid)?;
    let (_, gone) = opens::close(&c.state.stateids, &client, obj.key(), &sid)?;
    // The fds close here, outside the table's lock.
    drop(gone);
    let invalid = stateid4 {
        seqid: u32::MAX,
        other: [0; 12],
    };
    c.current_stateid = Some(invalid.clone());
    Ok(invalid)
}
