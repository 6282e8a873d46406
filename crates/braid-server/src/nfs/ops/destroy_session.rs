//! OP_DESTROY_SESSION (RFC 8881 18.37).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &DESTROY_SESSION4args) -> DESTROY_SESSION4res {
    let status = destroy(c, a);
    DESTROY_SESSION4res { dsr_status: status }
}

fn destroy(c: &mut Compound, a: &DESTROY_SESSION4args) -> nfsstat4 {
    // RFC 8881 18.37.3: after a SEQUENCE of the same session,
    // DESTROY_SESSION must be the compound's last operation (DSESS9004).
    let own = c.session.as_ref().is_some_and(|s| s.id == a.dsa_sessionid);
    if own && c.index + 1 != c.op_count {
        return NFS4ERR_NOT_ONLY_OP;
    }
    let Some(session) = c.state.sessions.get(&a.dsa_sessionid) else {
        return NFS4ERR_BADSESSION;
    };
    // RFC 8881 18.37.3: otherwise the connection must be bound to the
    // session (DSESS9001).
    if !own && !session.is_bound(c.conn.id) {
        return NFS4ERR_CONN_NOT_BOUND_TO_SESSION;
    }
    // RFC 8881 2.10.8.3: with SP4_NONE (the only protection offered) any
    // principal may destroy a session, as with Linux nfsd.
    // RFC 8881 18.37.3: other requests of the session still running (ours
    // holds one slot when the SEQUENCE is of this session): come back
    // later.
    if session.requests_in_progress() > usize::from(own) {
        return NFS4ERR_DELAY;
    }
    c.state.sessions.remove(&a.dsa_sessionid);
    session
        .client
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|id| *id != a.dsa_sessionid);
    NFS4_OK
}
