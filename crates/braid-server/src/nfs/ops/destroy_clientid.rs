//! OP_DESTROY_CLIENTID (RFC 8881 18.50).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::state::reaper::destroy_client;

pub fn run(c: &mut Compound, a: &DESTROY_CLIENTID4args) -> DESTROY_CLIENTID4res {
    DESTROY_CLIENTID4res {
        dcr_status: destroy(c, a),
    }
}

fn destroy(c: &mut Compound, a: &DESTROY_CLIENTID4args) -> nfsstat4 {
    let Some(client) = c.state.clients.get(a.dca_clientid) else {
        return NFS4ERR_STALE_CLIENTID;
    };
    // RFC 8881 2.10.8.3: with SP4_NONE (the only protection offered) any
    // principal may, as with Linux nfsd. RFC 8881 18.50.3: not while the
    // client has sessions or state (DESCID5, DESCID6).
    if client.has_sessions() || client.has_state() {
        return NFS4ERR_CLIENTID_BUSY;
    }
    destroy_client(&c.state, &client);
    NFS4_OK
}
