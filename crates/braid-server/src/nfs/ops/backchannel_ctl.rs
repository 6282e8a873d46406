//! OP_BACKCHANNEL_CTL (RFC 8881 18.33): a new callback program and
//! security parameters for the session's backchannel.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &BACKCHANNEL_CTL4args) -> BACKCHANNEL_CTL4res {
    // RFC 8881 18.33.3: it works on the session of the compound's
    // SEQUENCE (the compound loop lets no sessionless compound reach it).
    let Some(session) = c.session.clone() else {
        return BACKCHANNEL_CTL4res {
            bcr_status: NFS4ERR_OP_NOT_IN_SESSION,
        };
    };
    let mut cb = session.callback.lock().unwrap_or_else(|e| e.into_inner());
    cb.program = a.bca_cb_program;
    // As in CREATE_SESSION, flavours the server cannot use (RPCSEC_GSS)
    // may be listed: callbacks use the first AUTH_NONE or AUTH_SYS one.
    cb.sec_parms = a.bca_sec_parms.clone();
    BACKCHANNEL_CTL4res {
        bcr_status: NFS4_OK,
    }
}
