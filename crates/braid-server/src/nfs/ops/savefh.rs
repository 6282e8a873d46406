//! OP_SAVEFH (RFC 8881 18.28): the current filehandle, and with it the
//! current stateid (RFC 8881 16.2.3.1.2), are saved.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound) -> SAVEFH4res {
    c.saved = c.current.clone();
    c.saved_stateid = c.current_stateid.clone();
    SAVEFH4res { status: NFS4_OK }
}
