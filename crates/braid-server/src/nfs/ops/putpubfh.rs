//! OP_PUTPUBFH (RFC 8881 18.20): the public filehandle is the pseudo-root,
//! as on Linux's nfsd without a `public` export.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::fh::Fh;

pub fn run(c: &mut Compound) -> PUTPUBFH4res {
    c.current = Some(Fh::Pseudo);
    PUTPUBFH4res { status: NFS4_OK }
}
