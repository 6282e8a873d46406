//! OP_CREATE_SESSION (RFC 8881 18.36): confirms a client record on first
//! use, negotiates the channels (slots, sizes) and binds the connection.
//!
//! Order (as Linux nfsd, and as pynfs's CSESS tests need): the arguments
//! are checked first and an error there changes nothing (CSESS29 sends ten
//! thousand TOOSMALL requests with one sequence id, then a good one with
//! the same id); then the client and its one-slot cache (18.36.4): a replay
//! gets the cached reply whoever sends it, a principal other than the one
//! of an unconfirmed record is NFS4ERR_CLID_INUSE (not cached: it must not
//! spoil the slot for the real client); then the session is made, and that
//! result, success or not, is cached and advances the slot.

use std::sync::Arc;

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::state::clients::Client;
use crate::nfs::state::reaper::destroy_client;
use crate::nfs::state::sessions::{Callback, Session};

const KNOWN_FLAGS: u32 = CREATE_SESSION4_FLAG_PERSIST
    | CREATE_SESSION4_FLAG_CONN_BACK_CHAN
    | CREATE_SESSION4_FLAG_CONN_RDMA;

/// The smallest fore channel a session can work with: a request of
/// SEQUENCE, PUTFH and GETATTR with its RPC header and an AUTH_SYS
/// credential, and its reply (Linux nfsd's NFSD_MIN_REQ_HDR_SEQ_SZ and
/// NFSD_MIN_RESP_HDR_SEQ_SZ are of this size).
const MIN_REQUEST: u32 = 220;
const MIN_RESPONSE: u32 = 188;

/// The smallest backchannel the server can call back on: a CB_COMPOUND of
/// CB_SEQUENCE and CB_RECALL (with a filehandle of up to 128 bytes and the
/// RPC header) and its reply, two operations.
const MIN_CB_REQUEST: u32 = 256;
const MIN_CB_RESPONSE: u32 = 128;
const MIN_CB_OPS: u32 = 2;

/// The largest reply a slot caches (ca_maxresponsesize_cached): the
/// replies of the non-idempotent operations clients ask to cache (OPEN,
/// LOCK, CREATE, RENAME...) are far smaller; 128 slots of this bound a
/// session's reply cache to 2 MiB.
const MAX_CACHED: u32 = 16 * 1024;

pub fn run(c: &mut Compound, a: &CREATE_SESSION4args) -> CREATE_SESSION4res {
    // RFC 8881 18.36.3: the arguments.
    let (fore, back) = match negotiate(c, a) {
        Ok(attrs) => attrs,
        Err(e) => return CREATE_SESSION4res::Default(e),
    };
    let Some(client) = c.state.clients.get(a.csa_clientid) else {
        return CREATE_SESSION4res::Default(NFS4ERR_STALE_CLIENTID);
    };
    // RFC 8881 18.35.4: a record not confirmed within a lease period is
    // gone (EID9), though the reaper may not have come by yet.
    if client.is_expired() || (!client.is_confirmed() && client.lease_expired(c.state.lease_time)) {
        destroy_client(&c.state, &client);
        return CREATE_SESSION4res::Default(NFS4ERR_STALE_CLIENTID);
    }
    // RFC 8881 18.36.4: the client's one-slot CREATE_SESSION cache.
    let mut slot = client
        .create_session
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if a.csa_sequence == slot.seqid {
        if let Some(reply) = &slot.reply {
            return reply.clone();
        }
    }
    if a.csa_sequence != slot.seqid.wrapping_add(1) {
        return CREATE_SESSION4res::Default(NFS4ERR_SEQ_MISORDERED);
    }
    // RFC 8881 18.35.5, 18.36.4: the record is confirmed by the principal
    // that made it; a confirmed one may get sessions from any (CSESS10).
    if !client.is_confirmed() && client.principal != c.caller.principal() {
        return CREATE_SESSION4res::Default(NFS4ERR_CLID_INUSE);
    }
    // The slot's lock is held to the end: two CREATE_SESSIONs with one
    // sequence id (a retransmission on another connection) run one after
    // the other, and the second is a replay.
    let res = create(c, &client, a, fore, back);
    slot.seqid = a.csa_sequence;
    slot.reply = Some(res.clone());
    res
}

/// RFC 8881 18.36.3: check the channel attributes and lower them to what
/// the server gives (never raise them, but for at least one slot).
fn negotiate(
    c: &Compound,
    a: &CREATE_SESSION4args,
) -> Result<(channel_attrs4, channel_attrs4), nfsstat4> {
    if a.csa_flags & !KNOWN_FLAGS != 0 {
        return Err(NFS4ERR_INVAL);
    }
    let limits = &c.state.limits;
    let fa = &a.csa_fore_chan_attrs;
    if fa.ca_maxrequestsize < MIN_REQUEST || fa.ca_maxresponsesize < MIN_RESPONSE {
        return Err(NFS4ERR_TOOSMALL);
    }
    let ba = &a.csa_back_chan_attrs;
    if ba.ca_maxrequestsize < MIN_CB_REQUEST
        || ba.ca_maxresponsesize < MIN_CB_RESPONSE
        || ba.ca_maxoperations < MIN_CB_OPS
    {
        return Err(NFS4ERR_TOOSMALL);
    }
    let maxresponsesize = fa.ca_maxresponsesize.min(limits.max_response());
    let fore = channel_attrs4 {
        // No header padding, and no RDMA: ca_rdma_ird is returned empty.
        ca_headerpadsize: 0,
        ca_maxrequestsize: fa.ca_maxrequestsize.min(limits.max_request()),
        ca_maxresponsesize: maxresponsesize,
        ca_maxresponsesize_cached: fa
            .ca_maxresponsesize_cached
            .min(MAX_CACHED)
            .min(maxresponsesize),
        ca_maxoperations: fa.ca_maxoperations.min(limits.max_ops),
        // CSESS22: 2049 slots asked for is not what the client gets.
        ca_maxrequests: fa.ca_maxrequests.clamp(1, limits.max_slots),
        ca_rdma_ird: Vec::new(),
    };
    // The backchannel is the client's to size: callbacks are small, use
    // one slot and two operations, and the client is asked to cache
    // nothing. Its replies may be as large as it said (Linux refuses a
    // session whose backchannel ca_maxresponsesize was lowered).
    let back = channel_attrs4 {
        ca_headerpadsize: 0,
        ca_maxrequestsize: ba.ca_maxrequestsize.min(16 * 1024),
        ca_maxresponsesize: ba.ca_maxresponsesize,
        ca_maxresponsesize_cached: 0,
        ca_maxoperations: ba.ca_maxoperations.min(8),
        ca_maxrequests: ba.ca_maxrequests.clamp(1, 4),
        ca_rdma_ird: Vec::new(),
    };
    Ok((fore, back))
}

fn create(
    c: &mut Compound,
    client: &Arc<Client>,
    a: &CREATE_SESSION4args,
    fore: channel_attrs4,
    back: channel_attrs4,
) -> CREATE_SESSION4res {
    if client
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .len()
        >= c.state.limits.max_sessions_per_client
    {
        return CREATE_SESSION4res::Default(NFS4ERR_NOSPC);
    }
    // Neither a persistent reply cache nor RDMA is offered; the
    // backchannel is bound to this connection when the client asks.
    let flags = a.csa_flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN;
    if let Some(old) = c.state.clients.confirm(client) {
        // RFC 8881 18.35.5 case 4: a restarted client's old record goes
        // now that the new one is confirmed, with its state.
        destroy_client(&c.state, &old);
    }
    let id = c.state.sessions.new_id(client.clientid);
    let session = Arc::new(Session::new(
        id,
        client.clone(),
        fore.clone(),
        back.clone(),
        flags,
        // RFC 8881 18.36.3: csa_sec_parms may name flavours the server
        // cannot use (RPCSEC_GSS, CSESS16): callbacks use the first of
        // AUTH_NONE and AUTH_SYS, and without one there is no usable
        // backchannel (the session is still made).
        Callback {
            program: a.csa_cb_program,
            sec_parms: a.csa_sec_parms.clone(),
            seqid: 0,
            path_down: false,
            minorversion: c.minorversion,
        },
    ));
    session.bind(
        c.conn.id,
        true,
        flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN != 0,
    );
    if flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN != 0 {
        c.runtime.spawn(crate::nfs::callback::probe(
            c.state.clone(),
            session.clone(),
        ));
    }
    c.state.sessions.insert(session);
    client
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(id);
    client.renew();
    CREATE_SESSION4res::NFS4_OK(CREATE_SESSION4resok {
        csr_sessionid: id,
        // RFC 8881 18.36.3: csr_sequence equals csa_sequence (CSESS24).
        csr_sequence: a.csa_sequence,
        csr_flags: flags,
        csr_fore_chan_attrs: fore,
        csr_back_chan_attrs: back,
    })
}
