//! OP_DESTROY_SESSION (RFC 8881 18.37).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &DESTROY_SESSION4args) -> DESTROY_SESSION4res {
    let status = destroy(c, a);
    DESTROY_SESSION4res { dsr_status: status }
}

fn destroy(c: &mut Compound, a: &DESTROY_SESSION4args) -> nfsstat4 {
    let Some(session) = c.state.sessions.get(&a.dsa_sessionid) else {
        return NFS4ERR_BADSESSION;
    };
    // RFC 8881 18.37.3: outside a SEQUENCE of the same session the
    // connection must be bound to it.
    let own = c
        .session
        .as_ref()
        .is_some_and(|s| s.id == a.dsa_sessionid);
    if !own && !session.is_bound(c.conn.id) {
        return NFS4ERR_CONN_NOT_BOUND_TO_SESSION;
    }
    if session.client.principal != c.caller.principal() {
        return NFS4ERR_PERM;
    }
    // Other requests of the session still running: come back later.
    let running = session.requests_in_progress();
    if running > usize::from(own) {
        return NFS4ERR_DELAY;
    }
    c.state.sessions.remove(&a.dsa_sessionid);
    session
        .client
        .sessions
        .lock()
        .unwrap()
        .retain(|id| *id != a.dsa_sessionid);
    NFS4_OK
}
