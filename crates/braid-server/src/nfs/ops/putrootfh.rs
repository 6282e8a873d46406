//! OP_PUTROOTFH (RFC 8881 18.21): the pseudo-root, whose entries are the
//! NFS exports (RFC 8881 7.3).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::fh::Fh;

pub fn run(c: &mut Compound) -> PUTROOTFH4res {
    let status = match c
        .set_current(Fh::Pseudo)
        .and_then(|()| c.put_fh_flavor_check(&Fh::Pseudo))
    {
        Ok(()) => NFS4_OK,
        Err(e) => e,
    };
    PUTROOTFH4res { status }
}
