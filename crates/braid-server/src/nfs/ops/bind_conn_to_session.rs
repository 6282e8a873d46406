//! OP_BIND_CONN_TO_SESSION (RFC 8881 18.34): a client binds a connection
//! to the fore channel, the backchannel or both (Linux does it in recovery,
//! and to restore a lost backchannel).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &BIND_CONN_TO_SESSION4args) -> BIND_CONN_TO_SESSION4res {
    let Some(session) = c.state.sessions.get(&a.bctsa_sessid) else {
        return BIND_CONN_TO_SESSION4res::Default(NFS4ERR_BADSESSION);
    };
    // RFC 8881 2.10.8.3: only SP4_MACH_CRED and SP4_SSV (not offered)
    // restrict who may bind; with SP4_NONE any principal may, as with Linux
    // nfsd. A client that expired must start again.
    if !session.client.renew() {
        return BIND_CONN_TO_SESSION4res::Default(NFS4ERR_BADSESSION);
    }
    // RFC 8881 18.34.3: the server may refuse RDMA mode; it says so in
    // the answer.
    let (fore, back, dir) = match a.bctsa_dir {
        CDFC4_FORE => (true, false, CDFS4_FORE),
        CDFC4_BACK => (false, true, CDFS4_BACK),
        CDFC4_FORE_OR_BOTH | CDFC4_BACK_OR_BOTH => (true, true, CDFS4_BOTH),
        _ => return BIND_CONN_TO_SESSION4res::Default(NFS4ERR_INVAL),
    };
    session.bind(c.conn.id, fore, back);
    BIND_CONN_TO_SESSION4res::NFS4_OK(BIND_CONN_TO_SESSION4resok {
        bctsr_sessid: a.bctsa_sessid,
        bctsr_dir: dir,
        bctsr_use_conn_in_rdma_mode: false,
    })
}
