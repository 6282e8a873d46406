//! One ONC RPC call (RFC 5531): the header, the credential, and the two
//! procedures of NFSv4 (RFC 8881 16.1 NULL, 16.2 COMPOUND).

use std::sync::Arc;

use braid_nfs_proto::rpc::{
    decode_call, encode_reply, AcceptStat, AuthStat, AuthSysParms, OpaqueAuth, ReplyStat, RpcError,
    AUTH_NONE, AUTH_SYS, NFS4_PROGRAM, NFSPROC4_COMPOUND, NFSPROC4_NULL, NFS_V4,
};
use braid_nfs_proto::xdr::{Xdr, XdrReader, XdrWriter};
use bytes::Bytes;
use tracing::debug;

use super::compound::CompoundReply;
use super::conn::Connection;
use super::NfsState;

/// Who sent a call, as its credential says (before any export squashes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// AUTH_NONE.
    Anonymous,
    /// AUTH_SYS: ids as the client claims them.
    Sys {
        uid: u32,
        gid: u32,
        gids: Vec<u32>,
        machinename: Vec<u8>,
    },
}

impl Caller {
    /// The principal RFC 8881 18.35.5 compares between EXCHANGE_IDs: for
    /// AUTH_SYS the uid (and machine name), as Linux nfsd compares it.
    pub fn principal(&self) -> Vec<u8> {
        match self {
            Caller::Anonymous => b"none".to_vec(),
            Caller::Sys { uid, .. } => format!("sys:{uid}").into_bytes(),
        }
    }
}

fn verf_none() -> OpaqueAuth {
    OpaqueAuth {
        flavor: AUTH_NONE,
        body: Vec::new(),
    }
}

fn reply(xid: u32, stat: ReplyStat) -> Vec<Bytes> {
    let mut w = XdrWriter::with_capacity(32);
    encode_reply(&mut w, xid, &stat);
    w.into_segments()
}

fn accepted(xid: u32, stat: AcceptStat) -> Vec<Bytes> {
    reply(
        xid,
        ReplyStat::Accepted {
            verf: verf_none(),
            stat,
        },
    )
}

/// A reply record's segments, and what stays held until it is written.
pub struct Reply {
    pub segments: Vec<Bytes>,
    /// A COMPOUND's place in its session's workload (requests in flight).
    pub in_flight: Option<crate::workload::InFlight>,
}

impl From<Vec<Bytes>> for Reply {
    fn from(segments: Vec<Bytes>) -> Reply {
        Reply {
            segments,
            in_flight: None,
        }
    }
}

/// Answer one call record; None: nothing to answer (not even an xid could
/// be read, RFC 5531 9 lets such a message go unanswered).
pub async fn handle_call(
    state: &Arc<NfsState>,
    conn: &Arc<Connection>,
    record: Bytes,
) -> Option<Reply> {
    let request_len = record.len();
    let mut r = XdrReader::new(record);
    let call = match decode_call(&mut r) {
        Ok(call) => call,
        Err(RpcError::RpcMismatch { xid, .. }) => {
            return Some(reply(xid, ReplyStat::DeniedRpcMismatch { low: 2, high: 2 }).into())
        }
        Err(RpcError::Xdr { xid: Some(xid), .. }) => {
            return Some(accepted(xid, AcceptStat::GarbageArgs).into())
        }
        Err(e) => {
            debug!(peer = %conn.peer, "undecodable RPC call: {e}");
            return None;
        }
    };
    let xid = call.xid;
    if call.prog != NFS4_PROGRAM {
        return Some(accepted(xid, AcceptStat::ProgUnavail).into());
    }
    if call.vers != NFS_V4 {
        return Some(
            accepted(
                xid,
                AcceptStat::ProgMismatch {
                    low: NFS_V4,
                    high: NFS_V4,
                },
            )
            .into(),
        );
    }
    let caller = match call.cred.flavor {
        AUTH_NONE => Caller::Anonymous,
        AUTH_SYS => {
            let mut body = XdrReader::new(Bytes::from(call.cred.body));
            match AuthSysParms::decode(&mut body).and_then(|p| body.finish().map(|_| p)) {
                Ok(p) => Caller::Sys {
                    uid: p.uid,
                    gid: p.gid,
                    gids: p.gids,
                    machinename: p.machinename,
                },
                Err(_) => {
                    return Some(reply(xid, ReplyStat::DeniedAuth(AuthStat::AUTH_BADCRED)).into())
                }
            }
        }
        // RFC 5531 8.2 / RFC 2203: a flavour the server does not offer
        // (RPCSEC_GSS until Kerberos is supported) is a bad credential, as
        // Linux's svc_authenticate answers.
        _ => return Some(reply(xid, ReplyStat::DeniedAuth(AuthStat::AUTH_BADCRED)).into()),
    };
    match call.proc_ {
        NFSPROC4_NULL => Some(accepted(xid, AcceptStat::Success).into()),
        NFSPROC4_COMPOUND => {
            match super::compound::run(state, conn, caller, r, request_len).await {
                CompoundReply::Body(body, in_flight) => {
                    let mut segments = accepted(xid, AcceptStat::Success);
                    segments.extend(body);
                    Some(Reply {
                        segments,
                        in_flight,
                    })
                }
                CompoundReply::GarbageArgs => Some(accepted(xid, AcceptStat::GarbageArgs).into()),
                CompoundReply::SystemErr => Some(accepted(xid, AcceptStat::SystemErr).into()),
            }
        }
        _ => Some(accepted(xid, AcceptStat::ProcUnavail).into()),
    }
}
