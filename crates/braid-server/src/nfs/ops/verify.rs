//! OP_VERIFY (RFC 8881 18.31): go on only if the attributes are as given.

use braid_nfs_proto::nfs4::*;

use crate::nfs::attrs;
use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &VERIFY4args) -> VERIFY4res {
    let status = match c
        .current_fh()
        .and_then(|fh| attrs::verify_pair(&c.state, fh, &a.obj_attributes, c.minorversion))
    {
        Ok((theirs, ours)) if theirs == ours => NFS4_OK,
        Ok(_) => NFS4ERR_NOT_SAME,
        Err(e) => e,
    };
    VERIFY4res { status }
}
