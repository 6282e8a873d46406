//! OP_TEST_STATEID (RFC 8881 18).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(_c: &mut Compound, _a: &TEST_STATEID4args) -> TEST_STATEID4res {
    TEST_STATEID4res::Default(NFS4ERR_NOTSUPP)
}
