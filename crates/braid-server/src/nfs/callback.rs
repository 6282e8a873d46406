//! Calls to the client on the backchannel (RFC 8881 20): CB_NULL, the probe
//! of a new backchannel, and CB_COMPOUND with CB_SEQUENCE first (20.9) and
//! CB_RECALL (20.2) and CB_GETATTR (20.1), sent on a connection the
//! client bound to its session's backchannel, with the callback program and
//! credentials it gave in CREATE_SESSION or BACKCHANNEL_CTL.

use std::sync::Arc;
use std::time::Duration;

use braid_nfs_proto::nfs4::compound::decode_cb_compound_res;
use braid_nfs_proto::nfs4::*;
use braid_nfs_proto::rpc::{
    decode_reply, encode_call, AcceptStat, CallHeader, OpaqueAuth, ReplyStat,
};
use braid_nfs_proto::xdr::{Xdr, XdrReader, XdrWriter};
use bytes::Bytes;
use tracing::debug;

use super::state::sessions::Session;
use super::NfsState;

/// How long to wait for the client's answer to one callback.
const CALLBACK_TIMEOUT: Duration = Duration::from_secs(15);

/// A session of `clientid` with a live backchannel connection, and that
/// connection's id.
fn back_channel(state: &NfsState, clientid: clientid4) -> Option<(Arc<Session>, u64)> {
    for s in state.sessions.all() {
        if s.client.clientid != clientid {
            continue;
        }
        // The most recently bound connection first.
        for id in s.back_connections().into_iter().rev() {
            if state.connections.get(id).is_some_and(|c| !c.is_closed()) {
                return Some((s, id));
            }
        }
    }
    None
}

/// Whether `clientid` can be called back now (delegations are granted only
/// then: a delegation that cannot be recalled blocks other clients).
pub fn reachable(state: &NfsState, clientid: clientid4) -> bool {
    back_channel(state, clientid).is_some_and(|(s, _)| !s.callback.lock().unwrap().path_down)
}

// RFC 8881 18.36.3 csa_sec_parms / 18.33: the first flavour we can speak.
fn credential(session: &Session) -> OpaqueAuth {
    let cb = session.callback.lock().unwrap();
    for p in &cb.sec_parms {
        match p {
            callback_sec_parms4::AUTH_NONE => return OpaqueAuth::none(),
            callback_sec_parms4::AUTH_SYS(sys) => {
                return OpaqueAuth {
                    flavor: braid_nfs_proto::rpc::AUTH_SYS,
                    body: braid_nfs_proto::xdr::to_bytes(sys),
                }
            }
            callback_sec_parms4::RPCSEC_GSS(_) => {}
        }
    }
    OpaqueAuth::none()
}

/// The RPC call header of callback procedure `proc_` (RFC 8881 20).
fn encode_cb_call(w: &mut XdrWriter, xid: u32, program: u32, proc_: u32, cred: OpaqueAuth) {
    encode_call(
        w,
        &CallHeader {
            xid,
            prog: program,
            vers: NFS_CB,
            proc_,
            cred,
            verf: OpaqueAuth::none(),
        },
    );
}

/// RFC 8881 20 (procedure 0, CB_NULL) and 18.36.3: a new session's
/// backchannel is probed at once with the program and credential the
/// client gave, as Linux's nfsd does, so a client learns early that its
/// callback service is reached and the server that it answers. A probe
/// that gets no answer marks the path down (no delegations are granted
/// until a later call gets through); one answered marks it up.
pub async fn probe(state: Arc<NfsState>, session: Arc<Session>) {
    let Some(conn) = session
        .back_connections()
        .into_iter()
        .rev()
        .find_map(|id| state.connections.get(id).filter(|c| !c.is_closed()))
    else {
        return;
    };
    let program = session.callback.lock().unwrap().program;
    let cred = credential(&session);
    let build = |xid: u32| -> Vec<Bytes> {
        let mut w = XdrWriter::with_capacity(64);
        encode_cb_call(&mut w, xid, program, CB_NULL, cred.clone());
        w.into_segments()
    };
    let answered = match conn.call(build, CALLBACK_TIMEOUT).await {
        Some(reply) => matches!(
            decode_reply(&mut XdrReader::new(reply)),
            Ok((
                _,
                ReplyStat::Accepted {
                    stat: AcceptStat::Success,
                    ..
                },
            ))
        ),
        None => false,
    };
    debug!(session = ?session.id, answered, "CB_NULL probe");
    session.callback.lock().unwrap().path_down = !answered;
}

/// How long to wait before sending a recall again that got no answer or
/// found no backchannel.
const RECALL_RETRY: Duration = Duration::from_secs(1);

/// RFC 8881 20.2: CB_RECALL of delegation `stateid` on file `fh`. Runs on
/// the tokio runtime. A recall that finds no backchannel or gets no
/// answer is sent again, on whichever backchannel the client has then (a
/// new session's, after it destroyed the one the recall went to), until
/// the client answers, the delegation is returned or revoked, or a lease
/// period has passed (the delegation is then revoked at the next
/// conflict, `delegations::conflicting`). The result is logged.
pub async fn recall(state: Arc<NfsState>, clientid: clientid4, stateid: stateid4, fh: Vec<u8>) {
    let started = std::time::Instant::now();
    loop {
        if !outstanding(&state, &stateid)
            || recall_once(&state, clientid, stateid.clone(), &fh).await
        {
            return;
        }
        if started.elapsed() >= state.lease_time {
            debug!(clientid, "CB_RECALL: unanswered for a lease period");
            return;
        }
        tokio::time::sleep(RECALL_RETRY).await;
    }
}

/// Whether delegation `stateid` is still held (not returned, not revoked).
fn outstanding(state: &NfsState, stateid: &stateid4) -> bool {
    let inner = state.stateids.lock();
    matches!(
        inner.states.get(&stateid.other).map(|s| &s.kind),
        Some(super::state::stateids::Kind::Deleg(d)) if !d.revoked
    )
}

/// One CB_RECALL; whether the client answered it.
async fn recall_once(
    state: &Arc<NfsState>,
    clientid: clientid4,
    stateid: stateid4,
    fh: &[u8],
) -> bool {
    let op = nfs_cb_argop4::OP_CB_RECALL(CB_RECALL4args {
        stateid,
        truncate: false,
        fh: fh.to_vec(),
    });
    let Some(res) = call_once(state, clientid, op, "CB_RECALL").await else {
        return false;
    };
    // RFC 8881 20.9.3, 15.1.1.3: a CB_SEQUENCE the client could not take
    // (a session it no longer knows, a slot out of step) or a busy
    // client: the recall did not get in.
    !matches!(
        res.status,
        NFS4ERR_DELAY
            | NFS4ERR_BADSESSION
            | NFS4ERR_BADSLOT
            | NFS4ERR_SEQ_MISORDERED
            | NFS4ERR_SEQ_FALSE_RETRY
            | NFS4ERR_RETRY_UNCACHED_REP
    )
}

/// What the holder of a write delegation says of the file it caches
/// (RFC 8881 10.4.3): its size and change attribute as the client sees
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HolderAttrs {
    pub change: u64,
    pub size: u64,
}

/// RFC 8881 20.1: CB_GETATTR of the change attribute and size of file
/// `fh` from `clientid`, which holds its write delegation. None: no
/// backchannel, no answer, an error, or an answer without both (the
/// caller recalls the delegation instead).
pub async fn getattr(
    state: &Arc<NfsState>,
    clientid: clientid4,
    fh: Vec<u8>,
) -> Option<HolderAttrs> {
    let op = nfs_cb_argop4::OP_CB_GETATTR(CB_GETATTR4args {
        fh,
        attr_request: vec![CB_GETATTR_MASK],
    });
    let res = call_once(state, clientid, op, "CB_GETATTR").await?;
    if res.status != NFS4_OK {
        debug!(clientid, status = res.status.name(), "CB_GETATTR failed");
        return None;
    }
    let attrs = res.resarray.into_iter().find_map(|r| match r {
        nfs_cb_resop4::OP_CB_GETATTR(CB_GETATTR4res::NFS4_OK(ok)) => Some(ok.obj_attributes),
        _ => None,
    })?;
    holder_attrs(&attrs)
}

/// The attributes CB_GETATTR asks for (RFC 8881 10.4.3): change and size,
/// both in the bitmap's first word.
const CB_GETATTR_MASK: u32 = (1 << FATTR4_CHANGE) | (1 << FATTR4_SIZE);

/// The change and size of a CB_GETATTR answer, the first two attributes
/// in bit order (RFC 8881 5.4): nothing before them in the bitmap's first
/// word. A holder may add attributes of later words — an RFC 9754 client
/// holding delegated timestamps adds time_deleg_access and
/// time_deleg_modify (84, 85) — whose values follow and are not read;
/// values with no bit to name them are refused.
pub fn holder_attrs(a: &fattr4) -> Option<HolderAttrs> {
    let (first, rest) = a.attrmask.split_first()?;
    if *first != CB_GETATTR_MASK {
        return None;
    }
    let more = rest.iter().any(|w| *w != 0);
    let mut r = XdrReader::new(Bytes::copy_from_slice(&a.attr_vals));
    let change = r.get_u64().ok()?;
    let size = r.get_u64().ok()?;
    ((r.remaining() > 0) == more).then_some(HolderAttrs { change, size })
}

/// One CB_COMPOUND of CB_SEQUENCE and `op` to `clientid` on its
/// backchannel (one callback at a time per session); the client's answer,
/// or None if there was no backchannel, no answer or an RPC-level refusal
/// (the client's callback service failed, GARBAGE_ARGS, SYSTEM_ERR: it
/// did not take the call in).
async fn call_once(
    state: &Arc<NfsState>,
    clientid: clientid4,
    op: nfs_cb_argop4,
    what: &'static str,
) -> Option<CB_COMPOUND4res> {
    let Some((session, conn_id)) = back_channel(state, clientid) else {
        debug!(clientid, "{what}: no backchannel");
        return None;
    };
    let conn = state.connections.get(conn_id)?;
    let slot = {
        let mut slots = state
            .stateids
            .cb_slots
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Sessions gone since: their entries go too.
        slots.retain(|id, _| *id == session.id || state.sessions.get(id).is_some());
        slots.entry(session.id).or_default().clone()
    };
    let _slot = slot.lock().await;
    let (program, seqid, minorversion) = {
        let mut cb = session.callback.lock().unwrap();
        cb.seqid = cb.seqid.wrapping_add(1);
        (cb.program, cb.seqid, cb.minorversion)
    };
    let cred = credential(&session);
    let args = CB_COMPOUND4args {
        tag: Vec::new(),
        minorversion,
        callback_ident: 0,
        argarray: vec![
            nfs_cb_argop4::OP_CB_SEQUENCE(CB_SEQUENCE4args {
                csa_sessionid: session.id,
                csa_sequenceid: seqid,
                csa_slotid: 0,
                csa_highest_slotid: 0,
                csa_cachethis: false,
                csa_referring_call_lists: Vec::new(),
            }),
            op,
        ],
    };
    let build = |xid: u32| -> Vec<Bytes> {
        let mut w = XdrWriter::with_capacity(256);
        encode_cb_call(&mut w, xid, program, CB_COMPOUND, cred.clone());
        args.encode(&mut w);
        w.into_segments()
    };
    let Some(reply) = conn.call(build, CALLBACK_TIMEOUT).await else {
        debug!(clientid, "{what}: no answer");
        let mut cb = session.callback.lock().unwrap();
        cb.path_down = true;
        // RFC 8881 20.9.3: the client may never have seen this call; the
        // slot's next call (the retry) reuses its sequence id, so a client
        // that did see it answers from its reply cache.
        if cb.seqid == seqid {
            cb.seqid = seqid.wrapping_sub(1);
        }
        return None;
    };
    let mut r = XdrReader::new(reply);
    match decode_reply(&mut r) {
        Ok((
            _,
            ReplyStat::Accepted {
                stat: AcceptStat::Success,
                ..
            },
        )) => match decode_cb_compound_res(&mut r) {
            Ok(res) => {
                debug!(clientid, status = res.status.name(), "{what} answered");
                Some(res)
            }
            Err(e) => {
                debug!(clientid, "{what}: undecodable reply: {e}");
                None
            }
        },
        other => {
            debug!(clientid, "{what} refused: {other:?}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(mask: Vec<u32>, vals: &[u64]) -> fattr4 {
        fattr4 {
            attrmask: mask,
            attr_vals: vals.iter().flat_map(|v| v.to_be_bytes()).collect(),
        }
    }

    #[test]
    fn a_cb_getattr_answer_gives_change_then_size() {
        let a = answer(vec![CB_GETATTR_MASK], &[41, 5]);
        assert_eq!(
            holder_attrs(&a),
            Some(HolderAttrs {
                change: 41,
                size: 5
            })
        );
        // Trailing zero words of the bitmap are no attributes.
        let a = answer(vec![CB_GETATTR_MASK, 0], &[41, 5]);
        assert!(holder_attrs(&a).is_some());
    }

    #[test]
    fn a_cb_getattr_answer_without_both_or_with_more_is_refused() {
        assert_eq!(holder_attrs(&answer(vec![1 << FATTR4_SIZE], &[5])), None);
        assert_eq!(holder_attrs(&answer(vec![CB_GETATTR_MASK], &[41])), None);
        assert_eq!(
            holder_attrs(&answer(vec![CB_GETATTR_MASK], &[1, 2, 3])),
            None
        );
        // A later attribute named without its value.
        assert_eq!(
            holder_attrs(&answer(vec![CB_GETATTR_MASK, 1], &[1, 2])),
            None
        );
        assert_eq!(holder_attrs(&answer(vec![], &[])), None);
        // An attribute before change.
        assert_eq!(
            holder_attrs(&answer(
                vec![CB_GETATTR_MASK | 1 << FATTR4_TYPE],
                &[1, 1, 2]
            )),
            None
        );
    }

    #[test]
    fn a_cb_getattr_answer_with_delegated_timestamps_gives_change_and_size() {
        // RFC 9754: time_deleg_access and time_deleg_modify (84, 85) after
        // them, two nfstime4 values (12 bytes each).
        let mut a = answer(
            vec![CB_GETATTR_MASK, 0, 3 << (FATTR4_TIME_DELEG_ACCESS - 64)],
            &[41, 5],
        );
        a.attr_vals.extend_from_slice(&[0; 24]);
        assert_eq!(
            holder_attrs(&a),
            Some(HolderAttrs {
                change: 41,
                size: 5
            })
        );
    }

    #[test]
    fn the_reported_change_moves_once_per_new_modification() {
        use super::super::state::stateids::CbGetattr;
        let mut cb = CbGetattr {
            change_at_grant: 10,
            ..CbGetattr::default()
        };
        assert_eq!(cb.answered(10), None, "unmodified");
        assert_eq!(cb.answered(11), Some(1));
        assert_eq!(cb.answered(11), Some(1), "the same modification");
        assert_eq!(cb.answered(12), Some(2));
        assert_eq!(cb.answered(10), None);
    }
}
