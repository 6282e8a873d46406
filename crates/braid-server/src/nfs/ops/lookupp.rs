//! OP_LOOKUPP (RFC 8881 18).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(_c: &mut Compound) -> LOOKUPP4res {
    LOOKUPP4res { status: NFS4ERR_NOTSUPP }
}
