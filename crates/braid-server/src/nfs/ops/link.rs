//! OP_LINK (RFC 8881 18).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(_c: &mut Compound, _a: &LINK4args) -> LINK4res {
    LINK4res::Default(NFS4ERR_NOTSUPP)
}
