//! OP_LOCKU (RFC 8881 18).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(_c: &mut Compound, _a: &LOCKU4args) -> LOCKU4res {
    LOCKU4res::Default(NFS4ERR_NOTSUPP)
}
