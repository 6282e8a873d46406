//! OP_SEQUENCE (RFC 8881 18.46): the session, the slot and its reply cache,
//! the lease renewal, and the binding of a new connection to the fore
//! channel (RFC 8881 2.10.3.1, how Linux's nconnect adds connections).

use braid_nfs_proto::nfs4::*;
use bytes::Bytes;

use crate::nfs::compound::Compound;
use crate::nfs::state::slots::SlotVerdict;

pub enum SequenceOutcome {
    /// Run the rest of the compound; cache its reply if the flag is set.
    Proceed(nfs_resop4, bool),
    /// A retransmission: send this cached COMPOUND reply.
    Replay(Bytes),
    /// SEQUENCE failed: the compound ends with its error.
    Refused(nfs_resop4),
}

fn refused(status: nfsstat4) -> SequenceOutcome {
    SequenceOutcome::Refused(nfs_resop4::OP_SEQUENCE(SEQUENCE4res::Default(status)))
}

// RFC 8881 18.46.3.
pub fn begin(c: &mut Compound, a: &SEQUENCE4args, op_count: u32) -> SequenceOutcome {
    let Some(session) = c.state.sessions.get(&a.sa_sessionid) else {
        return refused(NFS4ERR_BADSESSION);
    };
    // A connection that is not bound yet joins the fore channel. (With
    // SP4_NONE any connection may; the backchannel is never bound here.)
    if !session.is_fore_bound(c.conn.id) {
        session.bind(c.conn.id, true, false);
    }
    if op_count > session.fore.ca_maxoperations {
        return refused(NFS4ERR_TOO_MANY_OPS);
    }
    match session.begin(a.sa_slotid, a.sa_sequenceid, a.sa_highest_slotid) {
        SlotVerdict::Execute => {}
        SlotVerdict::Replay(body) => return SequenceOutcome::Replay(body),
        SlotVerdict::RetryUncached => return refused(NFS4ERR_RETRY_UNCACHED_REP),
        SlotVerdict::Delay => return refused(NFS4ERR_DELAY),
        SlotVerdict::BadSlot => return refused(NFS4ERR_BADSLOT),
        SlotVerdict::Misordered => return refused(NFS4ERR_SEQ_MISORDERED),
    }
    session.client.renew();
    let (highest, target) = session.slot_limits();
    let mut flags = 0;
    if session.callback.lock().unwrap().path_down {
        flags |= SEQ4_STATUS_CB_PATH_DOWN_SESSION;
    }
    c.slotid = Some(a.sa_slotid);
    c.session = Some(session);
    SequenceOutcome::Proceed(
        nfs_resop4::OP_SEQUENCE(SEQUENCE4res::NFS4_OK(SEQUENCE4resok {
            sr_sessionid: a.sa_sessionid,
            sr_sequenceid: a.sa_sequenceid,
            sr_slotid: a.sa_slotid,
            sr_highest_slotid: highest,
            sr_target_highest_slotid: target,
            sr_status_flags: flags,
        })),
        a.sa_cachethis,
    )
}

/// SEQUENCE anywhere but first is refused by the compound loop; this is
/// the dispatch table's entry, never reached.
pub fn run(_c: &mut Compound, _a: &SEQUENCE4args) -> SEQUENCE4res {
    SEQUENCE4res::Default(NFS4ERR_SEQUENCE_POS)
}
