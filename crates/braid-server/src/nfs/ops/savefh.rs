//! OP_SAVEFH (RFC 8881 18.28): the current filehandle, and with it the
//! current stateid (RFC 8881 16.2.3.1.2), are saved.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound) -> SAVEFH4res {
    let status = match c.current_fh() {
        // RFC 8881 2.6.3.1.1.1: SAVEFH judges the flavour for the
        // put-filehandle operation before it.
        Ok(fh) if !c.flavor_ok(fh) => NFS4ERR_WRONGSEC,
        Ok(fh) => {
            c.saved = Some(fh.clone());
            c.saved_stateid = c.current_stateid.clone();
            NFS4_OK
        }
        Err(e) => e,
    };
    SAVEFH4res { status }
}
