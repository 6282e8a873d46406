//! OP_CREATE_SESSION (RFC 8881 18.36): confirms a client record on first
//! use, negotiates the channels (slots, sizes) and binds the connection.

use std::sync::Arc;

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::state::reaper::destroy_client;
use crate::nfs::state::sessions::{Callback, Session};

const KNOWN_FLAGS: u32 = CREATE_SESSION4_FLAG_PERSIST
    | CREATE_SESSION4_FLAG_CONN_BACK_CHAN
    | CREATE_SESSION4_FLAG_CONN_RDMA;

/// The smallest request and reply a session can work with: a SEQUENCE,
/// PUTFH and GETATTR with their headers (Linux nfsd's NFSD_MIN_REQ_HDR_SEQ_SZ
/// and NFSD_MIN_RESP_HDR_SEQ_SZ are of this size).
const MIN_REQUEST: u32 = 220;
const MIN_RESPONSE: u32 = 188;

pub fn run(c: &mut Compound, a: &CREATE_SESSION4args) -> CREATE_SESSION4res {
    let Some(client) = c.state.clients.get(a.csa_clientid) else {
        return CREATE_SESSION4res::Default(NFS4ERR_STALE_CLIENTID);
    };
    // RFC 8881 18.36.4: the client's one-slot CREATE_SESSION cache.
    {
        let slot = client.create_session.lock().unwrap();
        if a.csa_sequence == slot.seqid && slot.reply.is_some() {
            return slot.reply.clone().unwrap();
        }
        if a.csa_sequence != slot.seqid.wrapping_add(1) {
            return CREATE_SESSION4res::Default(NFS4ERR_SEQ_MISORDERED);
        }
    }
    if client.principal != c.caller.principal() {
        return CREATE_SESSION4res::Default(NFS4ERR_CLID_INUSE);
    }
    let res = create(c, &client, a);
    let mut slot = client.create_session.lock().unwrap();
    slot.seqid = a.csa_sequence;
    slot.reply = Some(res.clone());
    res
}

fn create(c: &mut Compound, client: &Arc<crate::nfs::state::clients::Client>, a: &CREATE_SESSION4args) -> CREATE_SESSION4res {
    if a.csa_flags & !KNOWN_FLAGS != 0 {
        return CREATE_SESSION4res::Default(NFS4ERR_INVAL);
    }
    let limits = &c.state.limits;
    let fa = &a.csa_fore_chan_attrs;
    if fa.ca_maxrequestsize < MIN_REQUEST || fa.ca_maxresponsesize < MIN_RESPONSE {
        return CREATE_SESSION4res::Default(NFS4ERR_TOOSMALL);
    }
    if fa.ca_maxrequests == 0 {
        return CREATE_SESSION4res::Default(NFS4ERR_INVAL);
    }
    if client.sessions.lock().unwrap().len() >= limits.max_sessions_per_client {
        return CREATE_SESSION4res::Default(NFS4ERR_NOSPC);
    }
    // RFC 8881 18.36.3: the server may lower what the client asked for,
    // never raise it.
    let fore = channel_attrs4 {
        ca_headerpadsize: 0,
        ca_maxrequestsize: fa.ca_maxrequestsize.min(limits.max_request()),
        ca_maxresponsesize: fa.ca_maxresponsesize.min(limits.max_response()),
        ca_maxresponsesize_cached: fa.ca_maxresponsesize_cached.min(64 * 1024),
        ca_maxoperations: fa.ca_maxoperations.min(limits.max_ops),
        ca_maxrequests: fa.ca_maxrequests.min(limits.max_slots),
        ca_rdma_ird: Vec::new(),
    };
    let ba = &a.csa_back_chan_attrs;
    let back = channel_attrs4 {
        ca_headerpadsize: 0,
        ca_maxrequestsize: ba.ca_maxrequestsize.min(16 * 1024),
        ca_maxresponsesize: ba.ca_maxresponsesize.min(16 * 1024),
        ca_maxresponsesize_cached: 0,
        ca_maxoperations: ba.ca_maxoperations.min(8),
        ca_maxrequests: ba.ca_maxrequests.clamp(1, 4),
        ca_rdma_ird: Vec::new(),
    };
    // Neither a persistent reply cache nor RDMA is offered.
    let flags = a.csa_flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN;
    if let Some(old) = c.state.clients.confirm(client) {
        // RFC 8881 18.35.5 case 5: a restarted client's old record goes
        // now that the new one is confirmed.
        destroy_client(&c.state, &old);
    }
    let id = c.state.sessions.new_id(client.clientid);
    let session = Arc::new(Session::new(
        id,
        client.clone(),
        fore.clone(),
        back.clone(),
        flags,
        Callback {
            program: a.csa_cb_program,
            sec_parms: a.csa_sec_parms.clone(),
            seqid: 0,
            path_down: false,
        },
    ));
    session.bind(c.conn.id, true, flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN != 0);
    c.state.sessions.insert(session);
    client.sessions.lock().unwrap().push(id);
    client.renew();
    CREATE_SESSION4res::NFS4_OK(CREATE_SESSION4resok {
        csr_sessionid: id,
        csr_sequence: a.csa_sequence,
        csr_flags: flags,
        csr_fore_chan_attrs: fore,
        csr_back_chan_attrs: back,
    })
}
