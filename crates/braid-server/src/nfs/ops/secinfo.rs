//! OP_SECINFO (RFC 8881 18).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(_c: &mut Compound, _a: &SECINFO4args) -> SECINFO4res {
    SECINFO4res::Default(NFS4ERR_NOTSUPP)
}
