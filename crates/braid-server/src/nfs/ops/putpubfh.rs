//! OP_PUTPUBFH (RFC 8881 18.20): the public filehandle is the pseudo-root,
//! as on Linux's nfsd without a `public` export.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::fh::Fh;

pub fn run(c: &mut Compound) -> PUTPUBFH4res {
    let status = match c
        .set_current(Fh::Pseudo)
        .and_then(|()| c.put_fh_flavor_check(&Fh::Pseudo))
    {
        Ok(()) => NFS4_OK,
        Err(e) => e,
    };
    PUTPUBFH4res { status }
}
