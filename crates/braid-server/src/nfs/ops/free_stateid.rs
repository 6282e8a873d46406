//! OP_FREE_STATEID (RFC 8881 18).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(_c: &mut Compound, _a: &FREE_STATEID4args) -> FREE_STATEID4res {
    FREE_STATEID4res { fsr_status: NFS4ERR_NOTSUPP }
}
