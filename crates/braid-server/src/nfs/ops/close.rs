//! OP_CLOSE (RFC 8881 18).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(_c: &mut Compound, _a: &CLOSE4args) -> CLOSE4res {
    CLOSE4res::Default(NFS4ERR_NOTSUPP)
}
