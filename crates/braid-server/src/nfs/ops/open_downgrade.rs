//! OP_OPEN_DOWNGRADE (RFC 8881 18).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(_c: &mut Compound, _a: &OPEN_DOWNGRADE4args) -> OPEN_DOWNGRADE4res {
    OPEN_DOWNGRADE4res::Default(NFS4ERR_NOTSUPP)
}
