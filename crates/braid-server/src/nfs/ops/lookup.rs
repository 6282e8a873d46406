//! OP_LOOKUP (RFC 8881 18).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(_c: &mut Compound, _a: &LOOKUP4args) -> LOOKUP4res {
    LOOKUP4res { status: NFS4ERR_NOTSUPP }
}
