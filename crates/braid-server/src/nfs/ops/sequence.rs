//! OP_SEQUENCE (RFC 8881 18.46): the session, the slot and its reply cache,
//! the request and reply size limits, the lease renewal, and the binding of
//! a new connection to the fore channel (RFC 8881 2.10.3.1, how Linux's
//! nconnect adds connections).

use std::hash::{Hash, Hasher};

use braid_nfs_proto::nfs4::*;
use bytes::Bytes;

use crate::nfs::compound::Compound;
use crate::nfs::state::slots::SlotVerdict;

pub enum SequenceOutcome {
    /// Run the rest of the compound (`c.session`, `c.slotid` and
    /// `c.cachethis` are set).
    Proceed(nfs_resop4),
    /// A retransmission: send this cached COMPOUND reply.
    Replay(Bytes),
    /// SEQUENCE failed: the compound ends with its error, and the slot is
    /// as it was (RFC 8881 18.46.3: a SEQUENCE in error does not advance
    /// it).
    Refused(nfs_resop4),
}

/// What SEQUENCE must know of the request around it.
pub struct RequestFacts {
    /// The operation count the client declared.
    pub declared_ops: u32,
    /// The size of the RPC call, header and credential included.
    pub request_len: usize,
    /// The reply's size before SEQUENCE's result (RPC header, status, tag,
    /// count).
    pub reply_so_far: usize,
}

/// SEQUENCE4resok with its op number and status.
const SEQUENCE_RESULT_LEN: usize = 4 + 4 + NFS4_SESSIONID_SIZE as usize + 5 * 4;

fn refused(status: nfsstat4) -> SequenceOutcome {
    SequenceOutcome::Refused(nfs_resop4::OP_SEQUENCE(SEQUENCE4res::Default(status)))
}

/// Names a request for the false-retry check (RFC 8881 2.10.6.1.3.1): the
/// principal that sent it and its operation count, as Linux nfsd compares.
pub(crate) fn fingerprint(principal: &[u8], ops: u32) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    principal.hash(&mut h);
    ops.hash(&mut h);
    h.finish()
}

// RFC 8881 18.46.3, in Linux nfsd's order: the session, the operation
// count, the request size, the slot and sequence id (a retry is answered
// from the cache here), then whether even SEQUENCE's own result fits the
// reply size the client allowed.
pub fn begin(c: &mut Compound, a: &SEQUENCE4args, facts: &RequestFacts) -> SequenceOutcome {
    let Some(session) = c.state.sessions.get(&a.sa_sessionid) else {
        return refused(NFS4ERR_BADSESSION);
    };
    // A client whose lease ran out and whose state is being released
    // (a courtesy client that lost a conflict) has no session any more.
    if session.client.is_expired() {
        return refused(NFS4ERR_BADSESSION);
    }
    // RFC 8881 18.46.3: more operations than ca_maxoperations.
    if facts.declared_ops > session.fore.ca_maxoperations {
        return refused(NFS4ERR_TOO_MANY_OPS);
    }
    // RFC 8881 2.10.6.4 and 15.1.11.x: a request larger than
    // ca_maxrequestsize.
    if facts.request_len > session.fore.ca_maxrequestsize as usize {
        return refused(NFS4ERR_REQ_TOO_BIG);
    }
    let fp = fingerprint(&c.caller.principal(), facts.declared_ops);
    match session.begin(a.sa_slotid, a.sa_sequenceid, a.sa_highest_slotid, fp) {
        SlotVerdict::Execute => {}
        SlotVerdict::Replay(body) => {
            // A retry is a request like any other for the lease and the
            // connection (the client may have retried on a new one).
            session.bind(c.conn.id, true, false);
            session.client.renew();
            return SequenceOutcome::Replay(body);
        }
        SlotVerdict::RetryUncached => return refused(NFS4ERR_RETRY_UNCACHED_REP),
        SlotVerdict::FalseRetry => return refused(NFS4ERR_SEQ_FALSE_RETRY),
        SlotVerdict::Delay => return refused(NFS4ERR_DELAY),
        SlotVerdict::BadSlot => return refused(NFS4ERR_BADSLOT),
        SlotVerdict::Misordered => return refused(NFS4ERR_SEQ_MISORDERED),
    }
    // RFC 8881 2.10.6.4 and 18.46.3: when even SEQUENCE's result passes the
    // reply size (ca_maxresponsesize, or ca_maxresponsesize_cached when the
    // client asked for the reply to be cached), SEQUENCE fails with it.
    let (limit, too_big) = if a.sa_cachethis {
        (
            session.fore.ca_maxresponsesize_cached,
            NFS4ERR_REP_TOO_BIG_TO_CACHE,
        )
    } else {
        (session.fore.ca_maxresponsesize, NFS4ERR_REP_TOO_BIG)
    };
    if facts.reply_so_far + SEQUENCE_RESULT_LEN > limit as usize {
        session.abandon(a.sa_slotid);
        return refused(too_big);
    }
    // RFC 8881 2.10.3.1: with SP4_NONE a SEQUENCE on a connection not bound
    // to the session binds it to the fore channel (how Linux's nconnect
    // adds its connections). The backchannel is never bound here.
    session.bind(c.conn.id, true, false);
    if !session.client.renew() {
        // Expired between the check above and now.
        session.abandon(a.sa_slotid);
        return refused(NFS4ERR_BADSESSION);
    }
    let (highest, target) = session.slot_limits();
    // Fewer slots asked for while QoS holds the client back (`nfs/qos.rs`).
    let target = crate::nfs::qos::target_slots(c, session.client.clientid, target);
    let flags = c.state.sessions.status_flags(&session);
    c.slotid = Some(a.sa_slotid);
    c.cachethis = a.sa_cachethis;
    c.session = Some(session);
    SequenceOutcome::Proceed(nfs_resop4::OP_SEQUENCE(SEQUENCE4res::NFS4_OK(
        SEQUENCE4resok {
            sr_sessionid: a.sa_sessionid,
            sr_sequenceid: a.sa_sequenceid,
            sr_slotid: a.sa_slotid,
            sr_highest_slotid: highest,
            sr_target_highest_slotid: target,
            sr_status_flags: flags,
        },
    )))
}

/// SEQUENCE anywhere but first is refused by the compound loop; this is
/// the dispatch table's entry, never reached.
pub fn run(_c: &mut Compound, _a: &SEQUENCE4args) -> SEQUENCE4res {
    SEQUENCE4res::Default(NFS4ERR_SEQUENCE_POS)
}
