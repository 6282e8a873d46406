//! OP_RESTOREFH (RFC 8881 18.27).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound) -> RESTOREFH4res {
    let Some(saved) = c.saved.clone() else {
        return RESTOREFH4res {
            status: NFS4ERR_RESTOREFH,
        };
    };
    c.current = Some(saved);
    c.current_stateid = c.saved_stateid.clone();
    RESTOREFH4res { status: NFS4_OK }
}
