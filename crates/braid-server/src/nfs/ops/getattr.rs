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
    // writes that change these two: its holder is asked (CB_GETATTR), or,
    // if it does not answer, the delegation is recalled (DELAY until it
    // is returned).
    let mut held_back = None;
    if requested.contains(FATTR4_SIZE) || requested.contains(FATTR4_CHANGE) {
        if let Ok((_, obj)) = c.current_object(NFS4ERR_NOFILEHANDLE) {
            held_back = delegations::ask_holder(c, obj.key())?;
        }
    }
    let fh = c.current_fh()?;
    let Some(h) = held_back else {
        return attrs::encode_for(&c.state, fh, &requested, c.minorversion);
    };
    attrs::encode_for_with(&c.state, fh, &requested, c.minorversion, |a| {
        a.size = Some(h.size);
        a.change = a.change.map(|v| v.wrapping_add(h.change_bump));
    })
}
