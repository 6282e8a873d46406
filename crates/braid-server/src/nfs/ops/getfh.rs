//! OP_GETFH (RFC 8881 18.8).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound) -> GETFH4res {
    match c.current_fh() {
        Ok(fh) => GETFH4res::NFS4_OK(GETFH4resok {
            object: fh.handle(),
        }),
        Err(e) => GETFH4res::Default(e),
    }
}
