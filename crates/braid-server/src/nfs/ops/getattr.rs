//! OP_GETATTR (RFC 8881 18.7).

use braid_nfs_proto::nfs4::attr::Bitmap;
use braid_nfs_proto::nfs4::*;

use crate::nfs::attrs;
use crate::nfs::compound::Compound;
use crate::nfs::fh::Fh;
use crate::nfs::state::delegations;

pub fn run(c: &mut Compound, a: &GETATTR4args) -> GETATTR4res {
    match getattr(c, a) {
        Ok(obj_attributes) => GETATTR4res::NFS4_OK(GETATTR4resok { obj_attributes }),
        Err(e) => GETATTR4res::Default(e),
    }
}

/// GETATTR on the reactor: None (nothing done) when answering may wait:
/// another client may hold a delegation of the file (it may be asked with
/// CB_GETATTR), or the attributes need more than the inode the kernel
/// holds in memory (`attrs::encode_cached`).
pub fn run_cached(c: &mut Compound, a: &GETATTR4args) -> Option<GETATTR4res> {
    let requested = match checked_request(a) {
        Ok(r) => r,
        Err(e) => return Some(GETATTR4res::Default(e)),
    };
    let Some(Fh::Object { obj, .. }) = &c.current else {
        return None;
    };
    if delegations::delegated(c, obj.key()) {
        return None;
    }
    let fh = c.current.as_ref()?;
    Some(
        match attrs::encode_cached(&c.state, fh, &requested, c.minorversion)? {
            Ok(obj_attributes) => GETATTR4res::NFS4_OK(GETATTR4resok { obj_attributes }),
            Err(e) => GETATTR4res::Default(e),
        },
    )
}

fn checked_request(a: &GETATTR4args) -> Result<Bitmap, nfsstat4> {
    let requested = attrs::request_bitmap(&a.attr_request)?;
    // RFC 8881 18.7.3: the write-only attributes cannot be read.
    if requested.contains(FATTR4_TIME_ACCESS_SET) || requested.contains(FATTR4_TIME_MODIFY_SET) {
        return Err(NFS4ERR_INVAL);
    }
    Ok(requested)
}

fn getattr(c: &mut Compound, a: &GETATTR4args) -> Result<fattr4, nfsstat4> {
    let requested = checked_request(a)?;
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
