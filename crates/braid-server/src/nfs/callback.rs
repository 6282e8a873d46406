//! Calls to the client on the backchannel (RFC 8881 20): CB_COMPOUND with
//! CB_SEQUENCE first (20.9) and CB_RECALL (20.2), sent on a connection the
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

/// RFC 8881 20.2: CB_RECALL of delegation `stateid` on file `fh`. Runs on
/// the tokio runtime; the result is logged (a client that does not answer
/// has its delegation revoked after a lease period).
pub async fn recall(state: Arc<NfsState>, clientid: clientid4, stateid: stateid4, fh: Vec<u8>) {
    let Some((session, conn_id)) = back_channel(&state, clientid) else {
        debug!(clientid, "CB_RECALL: no backchannel");
        return;
    };
    let Some(conn) = state.connections.get(conn_id) else {
        return;
    };
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
    let (program, seqid) = {
        let mut cb = session.callback.lock().unwrap();
        cb.seqid = cb.seqid.wrapping_add(1);
        (cb.program, cb.seqid)
    };
    let cred = credential(&session);
    let args = CB_COMPOUND4args {
        tag: Vec::new(),
        minorversion: 1,
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
            nfs_cb_argop4::OP_CB_RECALL(CB_RECALL4args {
                stateid,
                truncate: false,
                fh,
            }),
        ],
    };
    let build = |xid: u32| -> Vec<Bytes> {
        let mut w = XdrWriter::with_capacity(256);
        encode_call(
            &mut w,
            &CallHeader {
                xid,
                prog: program,
                vers: NFS_CB,
                proc_: CB_COMPOUND,
                cred,
                verf: OpaqueAuth::none(),
            },
        );
        args.encode(&mut w);
        w.into_segments()
    };
    let Some(reply) = conn.call(build, CALLBACK_TIMEOUT).await else {
        debug!(clientid, "CB_RECALL: no answer");
        session.callback.lock().unwrap().path_down = true;
        return;
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
            Ok(res) => debug!(clientid, status = res.status.name(), "CB_RECALL answered"),
            Err(e) => debug!(clientid, "CB_RECALL: undecodable reply: {e}"),
        },
        other => debug!(clientid, "CB_RECALL refused: {other:?}"),
    }
}
