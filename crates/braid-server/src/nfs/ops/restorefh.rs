//! OP_RESTOREFH (RFC 8881 18.27): the saved filehandle, and with it the
//! saved stateid (RFC 8881 16.2.3.1.2), become current again.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound) -> RESTOREFH4res {
    let Some(saved) = c.saved.clone() else {
        return RESTOREFH4res {
            status: NFS4ERR_RESTOREFH,
        };
    };
    c.current = Some(saved.clone());
    c.current_stateid = c.saved_stateid.clone();
    // RFC 8881 2.6.3.1.1: a put-filehandle operation like the others.
    let status = match c.put_fh_flavor_check(&saved) {
        Ok(()) => NFS4_OK,
        Err(e) => e,
    };
    RESTOREFH4res { status }
}
