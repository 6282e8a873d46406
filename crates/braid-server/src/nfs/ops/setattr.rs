//! OP_SETATTR (RFC 8881 18).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(_c: &mut Compound, _a: &SETATTR4args) -> SETATTR4res {
    SETATTR4res { status: NFS4ERR_NOTSUPP, attrsset: Default::default() }
}
