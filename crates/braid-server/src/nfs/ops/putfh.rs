//! OP_PUTFH (RFC 8881 18.19): every handle is checked (sealed by this
//! server, of an export this client may use) before it becomes current.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::fh::Fh;

pub fn run(c: &mut Compound, a: &PUTFH4args) -> PUTFH4res {
    let fh = Fh::from_wire(&c.state, &a.object);
    put(c, fh)
}

/// PUTFH on the reactor: None (nothing done) when the handle's object is
/// not kept open, so resolving it could wait (`Fh::from_wire_cached`).
pub fn run_cached(c: &mut Compound, a: &PUTFH4args) -> Option<PUTFH4res> {
    let fh = Fh::from_wire_cached(&c.state, &a.object).transpose()?;
    Some(put(c, fh))
}

fn put(c: &mut Compound, fh: Result<Fh, nfsstat4>) -> PUTFH4res {
    let status = match fh.and_then(|fh| {
        c.set_current(fh.clone())?;
        c.put_fh_flavor_check(&fh)
    }) {
        Ok(()) => NFS4_OK,
        Err(e) => e,
    };
    PUTFH4res { status }
}
