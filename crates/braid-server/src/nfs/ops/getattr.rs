//! OP_GETATTR (RFC 8881 18.7).

use braid_nfs_proto::nfs4::*;

use crate::nfs::attrs;
use crate::nfs::compound::Compound;
use crate::nfs::state::delegations;

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
    // RFC 8881 10.4.3: another client's write delegation may hold back
    // writes that change these two: recalled (no CB_GETATTR), DELAY until
    // it is returned.
    if requested.contains(FATTR4_SIZE) || requested.contains(FATTR4_CHANGE) {
        if let Ok((_, obj)) = c.current_object(NFS4ERR_NOFILEHANDLE) {
            delegations::break_for_read(c, obj.key())?;
        }
    }
    let fh = c.current_fh()?;
    attrs::encode_for(&c.state, fh, &requested, c.minorversion)
}
