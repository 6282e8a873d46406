//! OP_BACKCHANNEL_CTL (RFC 8881 18.33): a new callback program and
//! security parameters for the session's backchannel.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &BACKCHANNEL_CTL4args) -> BACKCHANNEL_CTL4res {
    let Some(session) = c.session.clone() else {
        return BACKCHANNEL_CTL4res {
            bcr_status: NFS4ERR_OP_NOT_IN_SESSION,
        };
    };
    let mut cb = session.callback.lock().unwrap();
    cb.program = a.bca_cb_program;
    cb.sec_parms = a.bca_sec_parms.clone();
    BACKCHANNEL_CTL4res {
        bcr_status: NFS4_OK,
    }
}
