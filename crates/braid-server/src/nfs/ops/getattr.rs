//! OP_GETATTR (RFC 8881 18.7).

use braid_nfs_proto::nfs4::*;

use crate::nfs::attrs;
use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &GETATTR4args) -> GETATTR4res {
    match getattr(c, a) {
        Ok(obj_attributes) => GETATTR4res::NFS4_OK(GETATTR4resok { obj_attributes }),
        Err(e) => GETATTR4res::Default(e),
    }
}

fn getattr(c: &mut Compound, a: &GETATTR4args) -> Result<fattr4, nfsstat4> {
    let requested = attrs::request_bitmap(&a.attr_request)?;
    // RFC 8881 18.7.3: the write-only attributes cannot be read.
    if requested.contains(FATTR4_TIME_ACCESS_SET) || requested.contains(FATTR4_TIME_MODIFY_SET) {
        return Err(NFS4ERR_INVAL);
    }
    let fh = c.current_fh()?;
    attrs::encode_for(&c.state, fh, &requested, c.minorversion)
}
