//! The COMPOUND rules through the real path (`Compound::execute`): the
//! reply cache never runs a request twice, the size limits of a session,
//! and where each operation may come.

use std::net::SocketAddr;
use std::sync::Arc;

use braid_nfs_proto::nfs4::compound::{CompoundArgs, StopKind, StoppedOp};
use braid_nfs_proto::nfs4::*;
use braid_nfs_proto::xdr::{from_bytes, XdrError};

use super::{Compound, Place, RPC_REPLY_HEADER};
use crate::config::ServerConfig;
use crate::nfs::conn::Connection;
use crate::nfs::rpc::Caller;
use crate::nfs::NfsState;

struct Env {
    state: Arc<NfsState>,
    conn: Arc<Connection>,
}

fn env() -> Env {
    let state = NfsState::new(&ServerConfig::default()).expect("NFS state");
    let peer: SocketAddr = "127.0.0.1:700".parse().unwrap();
    let conn = Connection::detached(state.next_connection_id(), peer);
    Env { state, conn }
}

fn root() -> Caller {
    Caller::Sys {
        uid: 0,
        gid: 0,
        gids: vec![],
        machinename: b"test".to_vec(),
    }
}

impl Env {
    /// Run `ops` as one COMPOUND and decode the reply.
    fn run(&self, ops: Vec<nfs_argop4>) -> COMPOUND4res {
        self.run_sized(ops, 200)
    }

    fn run_sized(&self, ops: Vec<nfs_argop4>, request_len: usize) -> COMPOUND4res {
        let declared = ops.len() as u32;
        self.run_args(
            CompoundArgs {
                tag: b"t".to_vec(),
                minorversion: 1,
                ops,
                stopped: None,
            },
            declared,
            request_len,
        )
    }

    fn run_args(&self, args: CompoundArgs, declared: u32, request_len: usize) -> COMPOUND4res {
        let bytes = self.raw(args, declared, request_len);
        from_bytes(&bytes).expect("a COMPOUND4res")
    }

    /// As `compound::run` does, without its thread hand-off: the
    /// operations that never wait first ("on the reactor"), then the rest.
    fn raw(&self, args: CompoundArgs, declared: u32, request_len: usize) -> Vec<u8> {
        let mut c = Compound::new(&self.state, &self.conn, root(), declared as usize);
        let mut progress = c.begin(args, declared, request_len);
        let segments = match c.proceed(&mut progress, Place::Reactor) {
            Some(segments) => segments,
            None => c
                .proceed(&mut progress, Place::Pool)
                .expect("the pool runs all"),
        };
        segments.iter().flat_map(|s| s.iter().copied()).collect()
    }

    /// EXCHANGE_ID and CREATE_SESSION with these fore channel attributes.
    fn session(&self, owner: &[u8], fore: channel_attrs4) -> sessionid4 {
        let res = self.run(vec![exchange_id(owner)]);
        let nfs_resop4::OP_EXCHANGE_ID(EXCHANGE_ID4res::NFS4_OK(eid)) = &res.resarray[0] else {
            panic!("EXCHANGE_ID failed: {res:?}");
        };
        let res = self.run(vec![nfs_argop4::OP_CREATE_SESSION(CREATE_SESSION4args {
            csa_clientid: eid.eir_clientid,
            csa_sequence: eid.eir_sequenceid,
            csa_flags: 0,
            csa_fore_chan_attrs: fore,
            csa_back_chan_attrs: attrs(8192, 8192, 8),
            csa_cb_program: 0x4000_0000,
            csa_sec_parms: vec![callback_sec_parms4::AUTH_NONE],
        })]);
        let nfs_resop4::OP_CREATE_SESSION(CREATE_SESSION4res::NFS4_OK(cs)) = &res.resarray[0]
        else {
            panic!("CREATE_SESSION failed: {res:?}");
        };
        cs.csr_sessionid
    }
}

fn attrs(req: u32, resp: u32, ops: u32) -> channel_attrs4 {
    channel_attrs4 {
        ca_headerpadsize: 0,
        ca_maxrequestsize: req,
        ca_maxresponsesize: resp,
        ca_maxresponsesize_cached: resp,
        ca_maxoperations: ops,
        ca_maxrequests: 8,
        ca_rdma_ird: vec![],
    }
}

fn exchange_id(owner: &[u8]) -> nfs_argop4 {
    nfs_argop4::OP_EXCHANGE_ID(EXCHANGE_ID4args {
        eia_clientowner: client_owner4 {
            co_verifier: [1; 8],
            co_ownerid: owner.to_vec(),
        },
        eia_flags: 0,
        eia_state_protect: state_protect4_a::SP4_NONE,
        eia_client_impl_id: vec![],
    })
}

fn sequence(id: sessionid4, seqid: u32, cachethis: bool) -> nfs_argop4 {
    nfs_argop4::OP_SEQUENCE(SEQUENCE4args {
        sa_sessionid: id,
        sa_sequenceid: seqid,
        sa_slotid: 0,
        sa_highest_slotid: 0,
        sa_cachethis: cachethis,
    })
}

fn status_of(res: &nfs_resop4) -> nfsstat4 {
    crate::nfs::dispatch::status_of(res)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retransmission_is_answered_from_the_cache_and_never_run_again() {
    let e = env();
    let sid = e.session(b"replay", attrs(8192, 8192, 16));
    let clients = e.state.clients.len();
    // A non-idempotent request: EXCHANGE_ID of a new owner makes a record.
    let ops = vec![sequence(sid, 1, true), exchange_id(b"made-once")];
    let first = e.raw(
        CompoundArgs {
            tag: b"t".to_vec(),
            minorversion: 1,
            ops: ops.clone(),
            stopped: None,
        },
        2,
        200,
    );
    assert_eq!(e.state.clients.len(), clients + 1);
    for _ in 0..3 {
        let again = e.raw(
            CompoundArgs {
                tag: b"t".to_vec(),
                minorversion: 1,
                ops: ops.clone(),
                stopped: None,
            },
            2,
            200,
        );
        assert_eq!(again, first, "the cached reply, byte for byte");
        assert_eq!(e.state.clients.len(), clients + 1, "run once only");
    }
    // Not cached: the retry is refused, and not run either.
    let ops = vec![sequence(sid, 2, false), exchange_id(b"uncached")];
    let res = e.run(ops.clone());
    assert_eq!(res.status, NFS4_OK);
    assert_eq!(e.state.clients.len(), clients + 2);
    let res = e.run(ops);
    assert_eq!(res.status, NFS4ERR_RETRY_UNCACHED_REP);
    assert_eq!(e.state.clients.len(), clients + 2);
    // The same slot and sequence id from another principal is no retry.
    let mut c = Compound::new(&e.state, &e.conn, Caller::Anonymous, 2);
    let body = c.execute(
        CompoundArgs {
            tag: vec![],
            minorversion: 1,
            ops: vec![sequence(sid, 2, false), exchange_id(b"uncached")],
            stopped: None,
        },
        2,
        200,
    );
    let bytes: Vec<u8> = body.iter().flat_map(|s| s.iter().copied()).collect();
    let res: COMPOUND4res = from_bytes(&bytes).unwrap();
    assert_eq!(res.status, NFS4ERR_SEQ_FALSE_RETRY);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_operation_whose_result_does_not_fit_answers_rep_too_big() {
    let e = env();
    let sid = e.session(b"small-replies", attrs(8192, 200, 16));
    let mut ops = vec![sequence(sid, 1, false), nfs_argop4::OP_PUTROOTFH];
    ops.extend(std::iter::repeat_n(nfs_argop4::OP_GETFH, 8));
    let res = e.run(ops);
    assert_eq!(res.status, NFS4ERR_REP_TOO_BIG);
    let last = res.resarray.last().unwrap();
    assert!(matches!(last, nfs_resop4::OP_GETFH(_)));
    assert!(res.resarray.len() < 10, "the compound stopped there");
    for r in &res.resarray[..res.resarray.len() - 1] {
        assert_eq!(status_of(r), NFS4_OK);
    }
    // What was sent fits the limit.
    let len = braid_nfs_proto::xdr::to_bytes(&res).len() + RPC_REPLY_HEADER;
    assert!(len <= 200, "{len}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sequence_alone_too_big_to_cache_leaves_the_slot_unused() {
    let e = env();
    let mut fore = attrs(8192, 8192, 16);
    fore.ca_maxresponsesize_cached = 10;
    let sid = e.session(b"tiny-cache", fore);
    let res = e.run(vec![sequence(sid, 1, true)]);
    assert_eq!(res.status, NFS4ERR_REP_TOO_BIG_TO_CACHE);
    // The slot did not advance: sequence id 1 is still the next one.
    let res = e.run(vec![sequence(sid, 1, false)]);
    assert_eq!(res.status, NFS4_OK);
}

#[tokio::test(flavor = "multi_thread")]
async fn request_limits_are_checked_at_sequence() {
    let e = env();
    let sid = e.session(b"limits", attrs(1000, 8192, 3));
    let res = e.run_sized(
        vec![sequence(sid, 1, false), nfs_argop4::OP_PUTROOTFH],
        1001,
    );
    assert_eq!(res.status, NFS4ERR_REQ_TOO_BIG);
    let ops = vec![
        sequence(sid, 1, false),
        nfs_argop4::OP_PUTROOTFH,
        nfs_argop4::OP_GETFH,
        nfs_argop4::OP_GETFH,
    ];
    let res = e.run(ops);
    assert_eq!(res.status, NFS4ERR_TOO_MANY_OPS);
    // 100000 declared, a handful decoded: TOO_MANY_OPS, nothing run.
    let res = e.run_args(
        CompoundArgs {
            tag: vec![],
            minorversion: 1,
            ops: vec![sequence(sid, 1, false)],
            stopped: None,
        },
        100_000,
        200,
    );
    assert_eq!(res.status, NFS4ERR_TOO_MANY_OPS);
    assert_eq!(res.resarray.len(), 1);
    // The slot is still at 0: these changed nothing.
    let res = e.run(vec![sequence(sid, 1, false), nfs_argop4::OP_PUTROOTFH]);
    assert_eq!(res.status, NFS4_OK);
}

#[tokio::test(flavor = "multi_thread")]
async fn position_rules() {
    let e = env();
    // RFC 8881 16.2.3: an illegal op is OP_ILLEGAL even before SEQUENCE.
    let res = e.run(vec![nfs_argop4::OP_ILLEGAL]);
    assert_eq!(res.status, NFS4ERR_OP_ILLEGAL);
    assert!(matches!(res.resarray[0], nfs_resop4::OP_ILLEGAL(_)));
    // An op number no version has stops decoding: OP_ILLEGAL answers it.
    let res = e.run_args(
        CompoundArgs {
            tag: vec![],
            minorversion: 1,
            ops: vec![],
            stopped: Some(StoppedOp {
                opnum: 2,
                kind: StopKind::Illegal,
            }),
        },
        1,
        200,
    );
    assert_eq!(res.status, NFS4ERR_OP_ILLEGAL);
    assert_eq!(res.resarray.len(), 1);
    let res = e.run(vec![nfs_argop4::OP_PUTROOTFH]);
    assert_eq!(res.status, NFS4ERR_OP_NOT_IN_SESSION);
    let res = e.run(vec![exchange_id(b"x"), nfs_argop4::OP_PUTROOTFH]);
    assert_eq!(res.status, NFS4ERR_NOT_ONLY_OP);
    let sid = e.session(b"positions", attrs(8192, 8192, 16));
    let res = e.run(vec![sequence(sid, 1, false), sequence(sid, 2, false)]);
    assert_eq!(res.status, NFS4ERR_SEQUENCE_POS);
    // DESTROY_SESSION of the compound's own session must come last.
    let res = e.run(vec![
        sequence(sid, 2, false),
        nfs_argop4::OP_DESTROY_SESSION(DESTROY_SESSION4args { dsa_sessionid: sid }),
        nfs_argop4::OP_PUTROOTFH,
    ]);
    assert_eq!(res.status, NFS4ERR_NOT_ONLY_OP);
    // An op whose arguments do not decode answers BADXDR after the others.
    let res = e.run_args(
        CompoundArgs {
            tag: vec![],
            minorversion: 1,
            ops: vec![sequence(sid, 3, false), nfs_argop4::OP_PUTROOTFH],
            stopped: Some(StoppedOp {
                opnum: OP_LOOKUP.0 as u32,
                kind: StopKind::BadXdr(XdrError::Short),
            }),
        },
        3,
        200,
    );
    assert_eq!(res.status, NFS4ERR_BADXDR);
    assert_eq!(res.resarray.len(), 3);
    assert!(matches!(res.resarray[2], nfs_resop4::OP_LOOKUP(_)));
}

fn sequence_on(id: sessionid4, slot: u32, seqid: u32, cachethis: bool) -> nfs_argop4 {
    nfs_argop4::OP_SEQUENCE(SEQUENCE4args {
        sa_sessionid: id,
        sa_sequenceid: seqid,
        sa_slotid: slot,
        sa_highest_slotid: slot,
        sa_cachethis: cachethis,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn slots_run_at_once_and_a_lost_connection_loses_nothing() {
    let e = env();
    let sid = e.session(b"two-connections", attrs(8192, 8192, 16));
    let session = e.state.sessions.get(&sid).unwrap();
    // A request on slot 0 still running (begun, not finished) ...
    let fp = crate::nfs::ops::sequence::fingerprint(&root().principal(), 1);
    assert_eq!(
        session.begin(0, 1, 1, fp),
        crate::nfs::state::slots::SlotVerdict::Execute
    );
    // ... does not hold up slot 1, on another connection of the session
    // (its first SEQUENCE binds it, RFC 8881 2.10.3.1).
    let other = Connection::detached(
        e.state.next_connection_id(),
        "127.0.0.1:701".parse().unwrap(),
    );
    let e2 = Env {
        state: e.state.clone(),
        conn: other.clone(),
    };
    let res = e2.run(vec![sequence_on(sid, 1, 1, true), nfs_argop4::OP_PUTROOTFH]);
    assert_eq!(res.status, NFS4_OK);
    assert_eq!(session.fore_connections().0, 2);
    // A retry of the running request is told to wait.
    let res = e.run(vec![sequence_on(sid, 0, 1, false)]);
    assert_eq!(res.status, NFS4ERR_DELAY);
    session.finish(0, None);
    // The first connection goes: the session, its slots and cache stay,
    // and the retry of slot 1's request on the other is answered from
    // the cache.
    e.state.sessions.connection_lost(e.conn.id);
    assert_eq!(session.fore_connections().0, 1);
    let again = e2.run(vec![sequence_on(sid, 1, 1, true), nfs_argop4::OP_PUTROOTFH]);
    assert_eq!(again.status, NFS4_OK);
    assert_eq!(again.resarray.len(), 2);
    let res = e2.run(vec![sequence_on(sid, 0, 2, false)]);
    assert_eq!(res.status, NFS4_OK);
}

fn args(ops: Vec<nfs_argop4>) -> CompoundArgs {
    CompoundArgs {
        tag: b"t".to_vec(),
        minorversion: 1,
        ops,
        stopped: None,
    }
}

fn bytes_of(segments: &[bytes::Bytes]) -> Vec<u8> {
    segments.iter().flat_map(|s| s.iter().copied()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compound_of_operations_that_never_wait_ends_on_the_reactor() {
    let e = env();
    let sid = e.session(b"inline", attrs(8192, 8192, 16));
    let ops = vec![
        sequence(sid, 1, false),
        nfs_argop4::OP_PUTROOTFH,
        nfs_argop4::OP_SAVEFH,
        nfs_argop4::OP_RESTOREFH,
        nfs_argop4::OP_GETFH,
    ];
    let mut c = Compound::new(&e.state, &e.conn, root(), ops.len());
    let mut progress = c.begin(args(ops), 5, 200);
    let segments = c
        .proceed(&mut progress, Place::Reactor)
        .expect("no operation here may wait");
    let res: COMPOUND4res = from_bytes(&bytes_of(&segments)).unwrap();
    assert_eq!(res.status, NFS4_OK);
    assert_eq!(res.resarray.len(), 5);
    let nfs_resop4::OP_GETFH(GETFH4res::NFS4_OK(fh)) = &res.resarray[4] else {
        panic!("GETFH: {:?}", res.resarray[4]);
    };
    assert_eq!(fh.object, crate::nfs::fh::PSEUDO_ROOT);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_compound_moves_to_the_pool_at_its_first_operation_that_may_wait() {
    let e = env();
    let sid = e.session(b"moves", attrs(8192, 8192, 16));
    let lookup = nfs_argop4::OP_LOOKUP(LOOKUP4args {
        objname: b"no-such-export".to_vec(),
    });
    let ops = vec![sequence(sid, 1, true), nfs_argop4::OP_PUTROOTFH, lookup];
    let mut c = Compound::new(&e.state, &e.conn, root(), ops.len());
    let mut progress = c.begin(args(ops.clone()), 3, 200);
    assert!(c.proceed(&mut progress, Place::Reactor).is_none());
    assert_eq!(progress.next, 2, "stopped before LOOKUP, after PUTROOTFH");
    // The slot is held while the compound moves: a retry now is DELAY.
    let mut other = Compound::new(&e.state, &e.conn, root(), 3);
    let busy: COMPOUND4res =
        from_bytes(&bytes_of(&other.execute(args(ops.clone()), 3, 200))).unwrap();
    assert_eq!(busy.status, NFS4ERR_DELAY);
    let first = bytes_of(
        &c.proceed(&mut progress, Place::Pool)
            .expect("the pool runs all"),
    );
    let res: COMPOUND4res = from_bytes(&first).unwrap();
    assert_eq!(res.resarray.len(), 3, "{res:?}");
    assert_eq!(status_of(&res.resarray[0]), NFS4_OK);
    assert_eq!(status_of(&res.resarray[1]), NFS4_OK);
    assert!(matches!(res.resarray[2], nfs_resop4::OP_LOOKUP(_)));
    // The slot got the reply for its cache, as from one uninterrupted run.
    assert_eq!(e.raw(args(ops), 3, 200), first);
}

#[tokio::test(flavor = "multi_thread")]
async fn client_and_session_operations_never_start_on_the_reactor() {
    let e = env();
    let clients = e.state.clients.len();
    let mut c = Compound::new(&e.state, &e.conn, root(), 1);
    let mut progress = c.begin(args(vec![exchange_id(b"on-the-pool")]), 1, 200);
    assert!(c.proceed(&mut progress, Place::Reactor).is_none());
    assert_eq!(e.state.clients.len(), clients, "nothing ran");
    let res: COMPOUND4res =
        from_bytes(&bytes_of(&c.proceed(&mut progress, Place::Pool).unwrap())).unwrap();
    assert_eq!(res.status, NFS4_OK);
    assert_eq!(e.state.clients.len(), clients + 1);
}
