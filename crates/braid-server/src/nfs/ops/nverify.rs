//! OP_NVERIFY (RFC 8881 18.15): go on only if the attributes differ from
//! those given.

use braid_nfs_proto::nfs4::*;

use crate::nfs::attrs;
use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &NVERIFY4args) -> NVERIFY4res {
    let status = match c
        .current_fh()
        .and_then(|fh| attrs::verify_pair(&c.state, fh, &a.obj_attributes, c.minorversion))
    {
        Ok((theirs, ours)) if theirs == ours => NFS4ERR_SAME,
        Ok(_) => NFS4_OK,
        Err(e) => e,
    };
    NVERIFY4res { status }
}
