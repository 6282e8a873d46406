//! The COMPOUND procedure (RFC 8881 16.2.3): SEQUENCE and the slot table,
//! the rules on which operation may come where, the operation loop with its
//! current and saved filehandles and stateids, the reply size limits of the
//! session (RFC 8881 2.10.6.4) and the reply cache.

use std::sync::Arc;

use braid_nfs_proto::nfs4::compound::{decode_compound_args, CompoundArgs, StopKind};
use braid_nfs_proto::nfs4::*;
use braid_nfs_proto::xdr::{Xdr, XdrReader, XdrWriter};
use bytes::{Bytes, BytesMut};

use super::conn::Connection;
use super::dispatch;
use super::fh::Fh;
use super::ops::sequence::{self, SequenceOutcome};
use super::rpc::Caller;
use super::state::sessions::Session;
use super::NfsState;

/// The RPC reply header before a COMPOUND4res: xid, REPLY, MSG_ACCEPTED, an
/// AUTH_NONE verifier (flavour and length) and SUCCESS. RFC 8881 18.36.3
/// counts it in ca_maxresponsesize ("including the RPC headers").
pub const RPC_REPLY_HEADER: usize = 24;

/// The state one COMPOUND carries from operation to operation.
pub struct Compound {
    pub state: Arc<NfsState>,
    pub conn: Arc<Connection>,
    pub caller: Caller,
    /// The session of the SEQUENCE that opened the compound.
    pub session: Option<Arc<Session>>,
    pub slotid: Option<u32>,
    /// sa_cachethis of that SEQUENCE.
    pub cachethis: bool,
    pub current: Option<Fh>,
    pub saved: Option<Fh>,
    /// RFC 8881 16.2.3.1.2: the stateid the last operation produced, used
    /// by a later operation that sends the special "current" stateid.
    pub current_stateid: Option<stateid4>,
    pub saved_stateid: Option<stateid4>,
    /// Index of the operation running and the number in the compound (as
    /// the client declared it).
    pub index: usize,
    pub op_count: usize,
    /// The operation after this one, if any (RFC 8881 2.6.3.1.1: whether
    /// a put-filehandle operation answers NFS4ERR_WRONGSEC depends on it).
    pub next_op: Option<nfs_opnum4>,
    /// Bytes the reply may still grow by, this operation's result included,
    /// before it passes the session's ca_maxresponsesize (or
    /// ca_maxresponsesize_cached when the client asked for caching): READ
    /// and READDIR can size their answers by it (RFC 8881 2.10.6.4).
    pub reply_room: usize,
    /// The tokio runtime, for the few operations that must wait on the
    /// network from the blocking thread the compound runs on (callbacks).
    pub runtime: tokio::runtime::Handle,
    /// The COMPOUND's minor version: 1, or 2 (RFC 7862: 4.1's operations
    /// plus ALLOCATE, COPY, SEEK, the xattr operations...).
    pub minorversion: u32,
    /// The compound in its session's workload, once `execute` has run
    /// (`CompoundReply::Body`).
    pub in_flight: Option<crate::workload::InFlight>,
}

/// What `run` answers.
pub enum CompoundReply {
    /// The encoded COMPOUND4res (after the RPC header), and the compound's
    /// place in its session's workload: it stays in flight until the
    /// reply is on the wire (the writer drops it), as SMB's requests do.
    Body(Vec<Bytes>, Option<crate::workload::InFlight>),
    /// The arguments are not a COMPOUND at all: RPC GARBAGE_ARGS.
    GarbageArgs,
    /// The compound could not be run (an operation panicked): RPC
    /// SYSTEM_ERR.
    SystemErr,
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

/// RFC 8881 16.2.3 and 15.1.3.4: OP_ILLEGAL, and the operations of a later
/// minor version (4.2's, which the decoder knows), are illegal in 4.1
/// wherever they come, even before SEQUENCE.
fn illegal(op: &nfs_argop4, minorversion: u32) -> bool {
    matches!(op, nfs_argop4::OP_ILLEGAL)
        || (minorversion < 2 && dispatch::is_v42(op.discriminant()))
}

/// Bytes an opaque of `n` bytes takes in XDR, padding included.
pub fn xdr_len(n: usize) -> usize {
    (n + 3) & !3
}

/// Decode, run and encode one COMPOUND. `request_len` is the size of the
/// whole RPC call (RFC 8881 18.36.3: ca_maxrequestsize counts the RPC
/// header and credential).
pub async fn run(
    state: &Arc<NfsState>,
    conn: &Arc<Connection>,
    caller: Caller,
    mut r: XdrReader,
    request_len: usize,
) -> CompoundReply {
    // One operation more than a session may ever allow is enough to answer
    // any compound: a longer one is NFS4ERR_TOO_MANY_OPS at SEQUENCE (or
    // NOT_ONLY_OP / OP_NOT_IN_SESSION without one), so the rest of a
    // compound declaring 100000 operations is never decoded.
    let max_decode = state.limits.max_ops as usize + 1;
    let Ok((args, declared)) = decode_compound_args(&mut r, max_decode) else {
        return CompoundReply::GarbageArgs;
    };
    // RFC 8881 16.2.3: minor versions 1 and 2 (RFC 7862) are served here;
    // the result array of a mismatch is empty. 4.0 clients are refused.
    if !(1..=2).contains(&args.minorversion) {
        return CompoundReply::Body(
            encode_res(&COMPOUND4res {
                status: NFS4ERR_MINOR_VERS_MISMATCH,
                tag: args.tag,
                resarray: Vec::new(),
            }),
            None,
        );
    }
    // RFC 8881 16.2.3 (the tag is a utf8str_cs), 14.4: a tag that is not
    // valid UTF-8 is refused before any operation runs, as nfs-ganesha
    // refuses it.
    if !crate::nfs::fh::is_valid_utf8(&args.tag) {
        return CompoundReply::Body(
            encode_res(&COMPOUND4res {
                status: NFS4ERR_INVAL,
                tag: args.tag,
                resarray: Vec::new(),
            }),
            None,
        );
    }
    // RFC 8881 16.2.3: a compound of no operations succeeds and does
    // nothing; it needs no thread.
    if declared == 0 {
        return CompoundReply::Body(
            encode_res(&COMPOUND4res {
                status: NFS4_OK,
                tag: args.tag,
                resarray: Vec::new(),
            }),
            None,
        );
    }
    let mut c = Compound::new(state, conn, caller, declared as usize);
    c.minorversion = args.minorversion;
    let mut progress = c.begin(args, declared, request_len);
    // The compound starts here, on the reactor, and runs the operations
    // that never wait (`nfs/reactor.rs`); at the first that may, it moves
    // to a blocking-pool thread with everything it carries (slot guard,
    // reply so far, in-flight record) and goes on there. An operation that
    // panics ends the compound with SYSTEM_ERR on either side, and the
    // guard, dropped, frees the slot.
    let inline = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        c.proceed(&mut progress, Place::Reactor)
    }));
    match inline {
        Ok(Some(body)) => return CompoundReply::Body(body, c.in_flight.take()),
        Ok(None) => {}
        Err(_) => return CompoundReply::SystemErr,
    }
    let run = move || {
        let body = c.proceed(&mut progress, Place::Pool);
        (body, c.in_flight.take())
    };
    match tokio::task::spawn_blocking(run).await {
        Ok((Some(body), in_flight)) => CompoundReply::Body(body, in_flight),
        // Not reached: in the pool every operation runs.
        Ok((None, _)) => CompoundReply::SystemErr,
        Err(_) => CompoundReply::SystemErr,
    }
}

/// Where a compound's operations run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Place {
    /// On the tokio worker that read the request: only what
    /// `reactor::run_inline` says never waits.
    Reactor,
    /// On a blocking-pool thread: everything.
    Pool,
}

/// A compound between two of its operations: what the operation loop
/// carries, so that it can stop on the reactor before an operation that
/// may wait and resume on a blocking thread.
pub struct Progress {
    args: CompoundArgs,
    declared: u32,
    request_len: usize,
    reply: ReplyBuilder,
    /// Should the compound end early (a panic in an operation), the slot
    /// must not stay "in progress" for ever: retries would get
    /// NFS4ERR_DELAY until the session ends.
    guard: SlotGuard,
    status: nfsstat4,
    /// This compound in its session's workload (from its SEQUENCE on)
    /// until it drops: when its reply is written.
    flight: Option<crate::workload::InFlight>,
    /// The next operation to run.
    next: usize,
    /// The loop is over (every operation ran, or one failed).
    ran: bool,
}

fn encode_res(res: &COMPOUND4res) -> Vec<Bytes> {
    let mut w = XdrWriter::with_capacity(64);
    res.encode(&mut w);
    w.into_segments()
}

/// The results of a COMPOUND as they are produced: encoded one by one, so
/// that the one that would make the reply too big is known (RFC 8881
/// 2.10.6.4) and the reply needs no second encoding. Small results are
/// gathered in one buffer; large payloads (READ data) stay their own
/// segments for the vectored write.
struct ReplyBuilder {
    segments: Vec<Bytes>,
    small: BytesMut,
    /// Bytes of the reply so far, RPC header included.
    len: usize,
    count: u32,
    /// The session's limit and the error for passing it.
    limit: usize,
    too_big: nfsstat4,
}

const SMALL_SEGMENT: usize = 4096;

impl ReplyBuilder {
    fn new(tag: &[u8]) -> ReplyBuilder {
        ReplyBuilder {
            segments: Vec::new(),
            small: BytesMut::with_capacity(512),
            // RPC header, status, tag, result count.
            len: RPC_REPLY_HEADER + 4 + 4 + xdr_len(tag.len()) + 4,
            count: 0,
            limit: usize::MAX,
            too_big: NFS4_OK,
        }
    }

    /// Room for the next result, its op number and status included.
    fn room(&self) -> usize {
        self.limit.saturating_sub(self.len)
    }

    /// Add a result; false (and nothing added) when it does not fit.
    fn push(&mut self, res: &nfs_resop4) -> bool {
        let mut w = XdrWriter::with_capacity(128);
        res.encode(&mut w);
        if self.len + w.len() > self.limit {
            return false;
        }
        self.push_encoded(w);
        true
    }

    /// Add a result whatever its size (an error result, 8 bytes).
    fn force(&mut self, res: &nfs_resop4) {
        let mut w = XdrWriter::with_capacity(16);
        res.encode(&mut w);
        self.push_encoded(w);
    }

    fn push_encoded(&mut self, w: XdrWriter) {
        self.len += w.len();
        self.count += 1;
        for seg in w.into_segments() {
            if seg.len() < SMALL_SEGMENT {
                self.small.extend_from_slice(&seg);
            } else {
                if !self.small.is_empty() {
                    self.segments.push(self.small.split().freeze());
                }
                self.segments.push(seg);
            }
        }
    }

    /// The COMPOUND4res: status, tag, the results.
    fn finish(mut self, status: nfsstat4, tag: &[u8]) -> Vec<Bytes> {
        if !self.small.is_empty() {
            self.segments.push(self.small.split().freeze());
        }
        let mut w = XdrWriter::with_capacity(16 + tag.len());
        status.encode(&mut w);
        w.put_opaque(tag);
        w.put_u32(self.count);
        let mut out = w.into_segments();
        out.extend(self.segments);
        out
    }
}

impl Compound {
    pub fn new(
        state: &Arc<NfsState>,
        conn: &Arc<Connection>,
        caller: Caller,
        op_count: usize,
    ) -> Compound {
        Compound {
            state: state.clone(),
            conn: conn.clone(),
            caller,
            session: None,
            slotid: None,
            cachethis: false,
            current: None,
            saved: None,
            current_stateid: None,
            saved_stateid: None,
            index: 0,
            op_count,
            next_op: None,
            reply_room: usize::MAX,
            runtime: tokio::runtime::Handle::current(),
            minorversion: 1,
            in_flight: None,
        }
    }

    /// Run the decoded operations in order until one fails (RFC 8881
    /// 16.2.3) and encode the reply; the slot of the SEQUENCE, if any, gets
    /// the reply for its cache. All on this thread.
    pub fn execute(&mut self, args: CompoundArgs, declared: u32, request_len: usize) -> Vec<Bytes> {
        let mut progress = self.begin(args, declared, request_len);
        self.proceed(&mut progress, Place::Pool)
            .expect("every operation runs in the pool")
    }

    /// A compound before its first operation.
    pub fn begin(&self, args: CompoundArgs, declared: u32, request_len: usize) -> Progress {
        Progress {
            reply: ReplyBuilder::new(&args.tag),
            args,
            declared,
            request_len,
            guard: SlotGuard {
                session: None,
                slotid: 0,
            },
            status: NFS4_OK,
            flight: None,
            next: 0,
            ran: false,
        }
    }

    /// Run the operations from `p.next` on, and finish the reply. On the
    /// reactor, stop before the first operation that may wait and answer
    /// None (nothing of that operation done); in the pool, always Some.
    pub fn proceed(&mut self, p: &mut Progress, place: Place) -> Option<Vec<Bytes>> {
        let state = self.state.clone();
        let metrics = state.metrics.get().filter(|m| m.ops.enabled());
        let declared = p.declared;
        while !p.ran && p.next < p.args.ops.len() {
            let i = p.next;
            let op = &p.args.ops[i];
            let op_started = std::time::Instant::now();
            let mut throttled = std::time::Duration::ZERO;
            self.index = i;
            self.next_op = p.args.ops.get(i + 1).map(|o| o.discriminant());
            self.reply_room = p.reply.room();
            let opnum = op.discriminant();
            let res = if illegal(op, self.minorversion) {
                dispatch::error_result(OP_ILLEGAL, NFS4ERR_OP_ILLEGAL)
            } else if i == 0 {
                match op {
                    // Slot table and session lookups, in memory: runs
                    // wherever the compound is.
                    nfs_argop4::OP_SEQUENCE(a) => {
                        let facts = sequence::RequestFacts {
                            declared_ops: declared,
                            request_len: p.request_len,
                            reply_so_far: p.reply.len,
                        };
                        match sequence::begin(self, a, &facts) {
                            SequenceOutcome::Proceed(res) => {
                                if let Some(s) = &self.session {
                                    p.guard.session = Some(s.clone());
                                    p.guard.slotid = a.sa_slotid;
                                    let (limit, too_big) = if self.cachethis {
                                        (
                                            s.fore.ca_maxresponsesize_cached,
                                            NFS4ERR_REP_TOO_BIG_TO_CACHE,
                                        )
                                    } else {
                                        (s.fore.ca_maxresponsesize, NFS4ERR_REP_TOO_BIG)
                                    };
                                    p.reply.limit = limit as usize;
                                    p.reply.too_big = too_big;
                                }
                                res
                            }
                            SequenceOutcome::Replay(body) => return Some(vec![body]),
                            SequenceOutcome::Refused(res) => res,
                        }
                    }
                    // RFC 8881 18.35.3 etc.: without SEQUENCE, these must be
                    // alone.
                    _ if sessionless(op) && declared > 1 => {
                        dispatch::error_result(opnum, NFS4ERR_NOT_ONLY_OP)
                    }
                    // Client and session records may be stored (a write
                    // to disk): never on the reactor.
                    _ if sessionless(op) && place == Place::Reactor => return None,
                    _ if sessionless(op) => dispatch::dispatch(self, op),
                    // RFC 8881 18.46.3: every other compound begins with
                    // SEQUENCE.
                    _ => dispatch::error_result(opnum, NFS4ERR_OP_NOT_IN_SESSION),
                }
            } else if matches!(op, nfs_argop4::OP_SEQUENCE(_)) {
                dispatch::error_result(opnum, NFS4ERR_SEQUENCE_POS)
            } else if self.session.is_none() {
                // Unreachable: a sessionless first operation is alone.
                dispatch::error_result(opnum, NFS4ERR_OP_NOT_IN_SESSION)
            } else if place == Place::Reactor {
                // None: this operation may wait; the pool resumes here.
                super::reactor::run_inline(self, op)?
            } else {
                // Over the share's provisioned limits the operation waits
                // here, then runs: QoS never fails an operation.
                let passed = super::qos::pass(self, op);
                let res = dispatch::dispatch(self, op);
                if let Some((gate, passed)) = passed {
                    throttled = passed.waited;
                    gate.done(passed, dispatch::status_of(&res) == NFS4_OK);
                }
                res
            };
            p.next = i + 1;
            p.status = dispatch::status_of(&res);
            if let Some(m) = metrics {
                if p.flight.is_none() {
                    if let Some(session) = &self.session {
                        p.flight = Some(begin_flight(m, session, &self.conn));
                    }
                }
                super::op_class::record(
                    m,
                    p.flight.as_ref(),
                    op,
                    &res,
                    p.status,
                    self.current.as_ref(),
                    crate::op_metrics::OpTiming {
                        latency: op_started.elapsed(),
                        throttled,
                    },
                );
            }
            if !p.reply.push(&res) {
                // RFC 8881 2.10.6.4: the operation whose result does not
                // fit answers NFS4ERR_REP_TOO_BIG (or _TO_CACHE) and the
                // compound ends there.
                p.status = p.reply.too_big;
                p.reply.force(&dispatch::error_result(opnum, p.status));
            }
            if p.status != NFS4_OK {
                p.ran = true;
            }
        }
        p.ran = true;
        // The first time a client holds state its record is stored (a
        // write to disk): that is done in the pool.
        if place == Place::Reactor {
            if let Some(session) = &p.guard.session {
                if self.state.clients.needs_record(&session.client) {
                    return None;
                }
            }
        }
        let mut status = p.status;
        if status == NFS4_OK {
            if let Some(stop) = &p.args.stopped {
                // The operation that could not be decoded answers for
                // itself (RFC 8881 15.1.3.4, 16.2.3).
                let (opnum, err) = match stop.kind {
                    StopKind::Illegal => (OP_ILLEGAL, NFS4ERR_OP_ILLEGAL),
                    StopKind::BadXdr(_) => (nfs_opnum4(stop.opnum as i32), NFS4ERR_BADXDR),
                };
                status = err;
                p.reply.force(&dispatch::error_result(opnum, err));
            } else if (p.args.ops.len() as u32) < declared {
                // Not reached: ca_maxoperations is below the decode limit,
                // so SEQUENCE refused the compound. Never answer for
                // operations not run.
                status = NFS4ERR_SERVERFAULT;
            }
        }
        let reply = std::mem::replace(&mut p.reply, ReplyBuilder::new(&[]));
        let segments = reply.finish(status, &p.args.tag);
        if let Some(session) = p.guard.session.take() {
            let cached = self.cachethis.then(|| concat(&segments));
            session.finish(p.guard.slotid, cached);
            self.state.clients.note_state(&session.client);
        }
        self.in_flight = p.flight.take();
        Some(segments)
    }
}

/// The session's workload entry, keyed as the admin API shows NFS
/// sessions (the last 8 bytes of the sessionid4).
fn begin_flight(
    metrics: &super::op_class::NfsMetrics,
    session: &Session,
    conn: &Connection,
) -> crate::workload::InFlight {
    let mut tail = [0u8; 8];
    tail.copy_from_slice(&session.id[8..]);
    metrics.workloads.begin(
        crate::op_metrics::Protocol::Nfs,
        u64::from_be_bytes(tail),
        || conn.peer.ip().to_string(),
    )
}

/// Finishes a slot left in progress when the compound unwinds.
struct SlotGuard {
    session: Option<Arc<Session>>,
    slotid: u32,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            s.finish(self.slotid, None);
        }
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

#[cfg(test)]
#[path = "compound_tests.rs"]
mod tests;
