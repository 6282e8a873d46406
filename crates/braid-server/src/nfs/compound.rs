//! The COMPOUND procedure (RFC 8881 16.2.3): SEQUENCE and the slot table,
//! the rules on which operation may come where, the operation loop with its
//! current and saved filehandles and stateids, and the reply cache.

use std::sync::Arc;

use braid_nfs_proto::nfs4::compound::{decode_compound_args, StopKind};
use braid_nfs_proto::nfs4::*;
use braid_nfs_proto::xdr::{Xdr, XdrReader, XdrWriter};
use bytes::Bytes;

use super::conn::Connection;
use super::dispatch;
use super::fh::Fh;
use super::ops::sequence::{self, SequenceOutcome};
use super::rpc::Caller;
use super::state::sessions::Session;
use super::NfsState;

/// The state one COMPOUND carries from operation to operation.
pub struct Compound {
    pub state: Arc<NfsState>,
    pub conn: Arc<Connection>,
    pub caller: Caller,
    /// The session of the SEQUENCE that opened the compound.
    pub session: Option<Arc<Session>>,
    pub slotid: Option<u32>,
    pub current: Option<Fh>,
    pub saved: Option<Fh>,
    /// RFC 8881 16.2.3.1.2: the stateid the last operation produced, used
    /// by a later operation that sends the special "current" stateid.
    pub current_stateid: Option<stateid4>,
    pub saved_stateid: Option<stateid4>,
    /// Index of the operation running and the number in the compound.
    pub index: usize,
    pub op_count: usize,
    /// The tokio runtime, for the few operations that must wait on the
    /// network from the blocking thread the compound runs on (callbacks).
    pub runtime: tokio::runtime::Handle,
}

/// Operations that may open a compound without SEQUENCE, as its only
/// operation (RFC 8881 18.35.3, 18.36.3, 18.37.3, 18.34.3, 18.50.3).
fn sessionless(op: &nfs_argop4) -> bool {
    matches!(
        op,
        nfs_argop4::OP_EXCHANGE_ID(_)
            | nfs_argop4::OP_CREATE_SESSION(_)
            | nfs_argop4::OP_DESTROY_SESSION(_)
            | nfs_argop4::OP_BIND_CONN_TO_SESSION(_)
            | nfs_argop4::OP_DESTROY_CLIENTID(_)
    )
}

fn encode_res(res: &COMPOUND4res) -> Vec<Bytes> {
    let mut w = XdrWriter::with_capacity(512);
    res.encode(&mut w);
    w.into_segments()
}

/// Decode, run and encode one COMPOUND. None: the arguments are not a
/// COMPOUND at all (the caller answers GARBAGE_ARGS).
pub async fn run(
    state: &Arc<NfsState>,
    conn: &Arc<Connection>,
    caller: Caller,
    mut r: XdrReader,
) -> Option<Vec<Bytes>> {
    let max_decode = (state.limits.max_ops as usize).max(1024);
    let (args, declared) = decode_compound_args(&mut r, max_decode).ok()?;
    // RFC 8881 16.2.3: only minor version 1 is served here; 4.0 and 4.2
    // clients fall back (mount.nfs tries 4.2, then 4.1).
    if args.minorversion != 1 {
        return Some(encode_res(&COMPOUND4res {
            status: NFS4ERR_MINOR_VERS_MISMATCH,
            tag: args.tag,
            resarray: Vec::new(),
        }));
    }
    let mut c = Compound {
        state: state.clone(),
        conn: conn.clone(),
        caller,
        session: None,
        slotid: None,
        current: None,
        saved: None,
        current_stateid: None,
        saved_stateid: None,
        index: 0,
        op_count: declared as usize,
        runtime: tokio::runtime::Handle::current(),
    };
    let out = tokio::task::spawn_blocking(move || c.execute(args, declared))
        .await
        .ok()?;
    Some(out)
}

impl Compound {
    fn execute(
        &mut self,
        args: braid_nfs_proto::nfs4::compound::CompoundArgs,
        declared: u32,
    ) -> Vec<Bytes> {
        let mut resarray: Vec<nfs_resop4> = Vec::with_capacity(args.ops.len() + 1);
        let mut status = NFS4_OK;
        let mut cachethis = false;
        let mut too_many = false;
        for (i, op) in args.ops.iter().enumerate() {
            self.index = i;
            let opnum = op.discriminant();
            let res = if i == 0 {
                match op {
                    nfs_argop4::OP_SEQUENCE(a) => match sequence::begin(self, a, declared) {
                        SequenceOutcome::Proceed(res, cache) => {
                            cachethis = cache;
                            res
                        }
                        SequenceOutcome::Replay(body) => return vec![body],
                        SequenceOutcome::Refused(res) => res,
                    },
                    _ if sessionless(op) && declared > 1 => {
                        dispatch::error_result(opnum, NFS4ERR_NOT_ONLY_OP)
                    }
                    _ if sessionless(op) => dispatch::dispatch(self, op),
                    // RFC 8881 2.10.6.4? no: 18.46.3 — every other compound
                    // begins with SEQUENCE.
                    _ => dispatch::error_result(opnum, NFS4ERR_OP_NOT_IN_SESSION),
                }
            } else if matches!(op, nfs_argop4::OP_SEQUENCE(_)) {
                dispatch::error_result(opnum, NFS4ERR_SEQUENCE_POS)
            } else if self.session.is_none() && sessionless(op) {
                // A sessionless operation after a sessionless first one.
                dispatch::error_result(opnum, NFS4ERR_NOT_ONLY_OP)
            } else if self.session.is_none() {
                dispatch::error_result(opnum, NFS4ERR_OP_NOT_IN_SESSION)
            } else {
                dispatch::dispatch(self, op)
            };
            status = dispatch::status_of(&res);
            resarray.push(res);
            if status != NFS4_OK {
                break;
            }
            if i + 1 == args.ops.len() && (args.ops.len() as u32) < declared {
                too_many = true;
            }
        }
        if status == NFS4_OK {
            if let Some(stop) = &args.stopped {
                // The operation that could not be decoded answers for itself.
                let (opnum, err) = match stop.kind {
                    StopKind::Illegal => (OP_ILLEGAL, NFS4ERR_OP_ILLEGAL),
                    StopKind::BadXdr(_) => (nfs_opnum4(stop.opnum as i32), NFS4ERR_BADXDR),
                };
                let res = if self.session.is_none() && resarray.is_empty() && err == NFS4ERR_BADXDR
                {
                    dispatch::error_result(opnum, NFS4ERR_BADXDR)
                } else {
                    dispatch::error_result(opnum, err)
                };
                status = err;
                resarray.push(res);
            } else if too_many {
                status = NFS4ERR_RESOURCE;
            }
        }
        let res = COMPOUND4res {
            status,
            tag: args.tag,
            resarray,
        };
        let mut w = XdrWriter::with_capacity(512);
        res.encode(&mut w);
        let segments = w.into_segments();
        if let (Some(session), Some(slotid)) = (&self.session, self.slotid) {
            let cached = if cachethis {
                Some(concat(&segments))
            } else {
                None
            };
            session.finish(slotid, cached);
        }
        segments
    }
}

fn concat(segments: &[Bytes]) -> Bytes {
    if segments.len() == 1 {
        return segments[0].clone();
    }
    let mut v = Vec::with_capacity(segments.iter().map(|s| s.len()).sum());
    for s in segments {
        v.extend_from_slice(s);
    }
    Bytes::from(v)
}
