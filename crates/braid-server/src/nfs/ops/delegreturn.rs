//! OP_DELEGRETURN (RFC 8881 18).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(_c: &mut Compound, _a: &DELEGRETURN4args) -> DELEGRETURN4res {
    DELEGRETURN4res { status: NFS4ERR_NOTSUPP }
}
