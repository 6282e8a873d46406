//! OP_COMMIT (RFC 8881 18).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(_c: &mut Compound, _a: &COMMIT4args) -> COMMIT4res {
    COMMIT4res::Default(NFS4ERR_NOTSUPP)
}
