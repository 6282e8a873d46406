//! Opens, stateids and locks through the real COMPOUND path (RFC 8881 8.2,
//! 9, 18.2, 18.10-18.12, 18.16, 18.38, 18.48), two clients on one export
//! in a temporary directory.

use std::net::SocketAddr;
use std::sync::Arc;

use braid_nfs_proto::nfs4::compound::CompoundArgs;
use braid_nfs_proto::nfs4::*;
use braid_nfs_proto::xdr::from_bytes;
use bytes::Bytes;

use crate::config::{ServerConfig, ShareConfig};
use crate::nfs::compound::Compound;
use crate::nfs::conn::Connection;
use crate::nfs::export::Squash;
use crate::nfs::rpc::Caller;
use crate::nfs::state::clients::Client;
use crate::nfs::NfsState;

struct Env {
    state: Arc<NfsState>,
    conn: Arc<Connection>,
    dir: std::path::PathBuf,
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn env(name: &str) -> Env {
    let dir = std::env::temp_dir().join(format!("braid-nfs-state-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut share = ShareConfig::with_defaults("data", &dir);
    share.nfs.squash = Squash::None;
    share.notify_host_changes = false;
    let config = ServerConfig {
        shares: vec![share],
        ..ServerConfig::default()
    };
    let state = NfsState::new(&config).expect("NFS state");
    let peer: SocketAddr = "127.0.0.1:700".parse().unwrap();
    let conn = Connection::detached(state.next_connection_id(), peer);
    Env { state, conn, dir }
}

/// One client with one session, its compounds on slot 0.
struct Session {
    id: sessionid4,
    seqid: u32,
    client: Arc<Client>,
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
    fn run(&self, ops: Vec<nfs_argop4>) -> COMPOUND4res {
        let declared = ops.len() as u32;
        let mut c = Compound::new(&self.state, &self.conn, root(), declared as usize);
        let args = CompoundArgs {
            tag: b"t".to_vec(),
            minorversion: 1,
            ops,
            stopped: None,
        };
        let segments: Vec<Bytes> = c.execute(args, declared, 512);
        let bytes: Vec<u8> = segments.iter().flat_map(|s| s.iter().copied()).collect();
        from_bytes(&bytes).expect("a COMPOUND4res")
    }

    fn session(&self, owner: &[u8]) -> Session {
        let res = self.run(vec![nfs_argop4::OP_EXCHANGE_ID(EXCHANGE_ID4args {
            eia_clientowner: client_owner4 {
                co_verifier: [1; 8],
                co_ownerid: owner.to_vec(),
            },
            eia_flags: 0,
            eia_state_protect: state_protect4_a::SP4_NONE,
            eia_client_impl_id: vec![],
        })]);
        let nfs_resop4::OP_EXCHANGE_ID(EXCHANGE_ID4res::NFS4_OK(eid)) = &res.resarray[0] else {
            panic!("EXCHANGE_ID: {res:?}");
        };
        let chan = channel_attrs4 {
            ca_headerpadsize: 0,
            ca_maxrequestsize: 1 << 20,
            ca_maxresponsesize: 1 << 20,
            ca_maxresponsesize_cached: 8192,
            ca_maxoperations: 16,
            ca_maxrequests: 4,
            ca_rdma_ird: vec![],
        };
        let res = self.run(vec![nfs_argop4::OP_CREATE_SESSION(CREATE_SESSION4args {
            csa_clientid: eid.eir_clientid,
            csa_sequence: eid.eir_sequenceid,
            csa_flags: 0,
            csa_fore_chan_attrs: chan.clone(),
            csa_back_chan_attrs: chan,
            csa_cb_program: 0x4000_0000,
            csa_sec_parms: vec![callback_sec_parms4::AUTH_NONE],
        })]);
        let nfs_resop4::OP_CREATE_SESSION(CREATE_SESSION4res::NFS4_OK(cs)) = &res.resarray[0]
        else {
            panic!("CREATE_SESSION: {res:?}");
        };
        let client = self.state.clients.get(eid.eir_clientid).unwrap();
        let mut s = Session {
            id: cs.csr_sessionid,
            seqid: 0,
            client,
        };
        let r = self.call(
            &mut s,
            vec![nfs_argop4::OP_RECLAIM_COMPLETE(RECLAIM_COMPLETE4args {
                rca_one_fs: false,
            })],
        );
        assert_eq!(r.status, NFS4_OK);
        s
    }

    /// SEQUENCE, then `ops`.
    fn call(&self, s: &mut Session, ops: Vec<nfs_argop4>) -> COMPOUND4res {
        s.seqid += 1;
        let mut all = vec![nfs_argop4::OP_SEQUENCE(SEQUENCE4args {
            sa_sessionid: s.id,
            sa_sequenceid: s.seqid,
            sa_slotid: 0,
            sa_highest_slotid: 0,
            sa_cachethis: false,
        })];
        all.extend(ops);
        self.run(all)
    }

    /// The export's root as the current filehandle.
    fn home(&self) -> Vec<nfs_argop4> {
        vec![
            nfs_argop4::OP_PUTROOTFH,
            nfs_argop4::OP_LOOKUP(LOOKUP4args {
                objname: b"data".to_vec(),
            }),
        ]
    }

    /// OPEN `name` (creating it, UNCHECKED4); the stateid and filehandle.
    fn open(
        &self,
        s: &mut Session,
        owner: &[u8],
        name: &[u8],
        access: u32,
        deny: u32,
    ) -> Result<(stateid4, Vec<u8>), nfsstat4> {
        let mut ops = self.home();
        ops.push(nfs_argop4::OP_OPEN(OPEN4args {
            seqid: 0,
            share_access: access | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
            share_deny: deny,
            owner: open_owner4 {
                clientid: 0,
                owner: owner.to_vec(),
            },
            openhow: openflag4::OPEN4_CREATE(createhow4::UNCHECKED4(fattr4 {
                attrmask: vec![],
                attr_vals: Vec::new(),
            })),
            claim: open_claim4::CLAIM_NULL(name.to_vec()),
        }));
        ops.push(nfs_argop4::OP_GETFH);
        let res = self.call(s, ops);
        if res.status != NFS4_OK {
            return Err(res.status);
        }
        let n = res.resarray.len();
        let nfs_resop4::OP_OPEN(OPEN4res::NFS4_OK(o)) = &res.resarray[n - 2] else {
            panic!("{res:?}");
        };
        let nfs_resop4::OP_GETFH(GETFH4res::NFS4_OK(fh)) = &res.resarray[n - 1] else {
            panic!("{res:?}");
        };
        Ok((o.stateid.clone(), fh.object.clone()))
    }

    /// PUTFH `fh`, then `op`: the last result.
    fn on(&self, s: &mut Session, fh: &[u8], op: nfs_argop4) -> (nfsstat4, nfs_resop4) {
        let res = self.call(
            s,
            vec![
                nfs_argop4::OP_PUTFH(PUTFH4args {
                    object: fh.to_vec(),
                }),
                op,
            ],
        );
        (res.status, res.resarray.last().unwrap().clone())
    }
}

fn read(sid: &stateid4) -> nfs_argop4 {
    nfs_argop4::OP_READ(READ4args {
        stateid: sid.clone(),
        offset: 0,
        count: 100,
    })
}

fn write(sid: &stateid4, data: &'static [u8]) -> nfs_argop4 {
    nfs_argop4::OP_WRITE(WRITE4args {
        stateid: sid.clone(),
        offset: 0,
        stable: UNSTABLE4,
        data: Bytes::from_static(data),
    })
}

fn close(sid: &stateid4) -> nfs_argop4 {
    nfs_argop4::OP_CLOSE(CLOSE4args {
        seqid: 0,
        open_stateid: sid.clone(),
    })
}

fn lock_new(open: &stateid4, owner: &[u8], t: nfs_lock_type4, off: u64, len: u64) -> nfs_argop4 {
    nfs_argop4::OP_LOCK(LOCK4args {
        locktype: t,
        reclaim: false,
        offset: off,
        length: len,
        locker: locker4::TRUE(open_to_lock_owner4 {
            open_seqid: 0,
            open_stateid: open.clone(),
            lock_seqid: 0,
            lock_owner: lock_owner4 {
                clientid: 0,
                owner: owner.to_vec(),
            },
        }),
    })
}

fn lockt(owner: &[u8], t: nfs_lock_type4, off: u64, len: u64) -> nfs_argop4 {
    nfs_argop4::OP_LOCKT(LOCKT4args {
        locktype: t,
        offset: off,
        length: len,
        owner: lock_owner4 {
            clientid: 0,
            owner: owner.to_vec(),
        },
    })
}

fn locku(sid: &stateid4, off: u64, len: u64) -> nfs_argop4 {
    nfs_argop4::OP_LOCKU(LOCKU4args {
        locktype: WRITE_LT,
        seqid: 0,
        lock_stateid: sid.clone(),
        offset: off,
        length: len,
    })
}

fn with_seqid(sid: &stateid4, seqid: u32) -> stateid4 {
    stateid4 {
        seqid,
        other: sid.other,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn upgrades_keep_the_stateid_and_seqids_are_checked() {
    let e = env("seqid");
    let mut a = e.session(b"a");
    let (s1, fh) = e
        .open(&mut a, b"o", b"f", OPEN4_SHARE_ACCESS_READ, 0)
        .unwrap();
    assert_eq!(s1.seqid, 1);
    assert!(a.client.has_state());
    // RFC 8881 9.11: the same open owner again upgrades its open.
    let (s2, _) = e
        .open(&mut a, b"o", b"f", OPEN4_SHARE_ACCESS_BOTH, 0)
        .unwrap();
    assert_eq!((s2.other, s2.seqid), (s1.other, 2));
    // 8.2.2: seqid 0 is the current one, older is OLD, newer BAD.
    assert_eq!(
        e.on(&mut a, &fh, write(&with_seqid(&s2, 0), b"abc")).0,
        NFS4_OK
    );
    assert_eq!(e.on(&mut a, &fh, read(&s1)).0, NFS4ERR_OLD_STATEID);
    assert_eq!(
        e.on(&mut a, &fh, read(&with_seqid(&s2, 3))).0,
        NFS4ERR_BAD_STATEID
    );
    let (st, r) = e.on(&mut a, &fh, read(&s2));
    assert_eq!(st, NFS4_OK);
    let nfs_resop4::OP_READ(READ4res::NFS4_OK(r)) = r else {
        panic!()
    };
    assert_eq!((&r.data[..], r.eof), (&b"abc"[..], true));
    // Another client may not use it; nor may it be used on another file.
    let mut b = e.session(b"b");
    assert_eq!(e.on(&mut b, &fh, read(&s2)).0, NFS4ERR_BAD_STATEID);
    let (_, fh2) = e
        .open(&mut a, b"o", b"g", OPEN4_SHARE_ACCESS_READ, 0)
        .unwrap();
    assert_eq!(e.on(&mut a, &fh2, read(&s2)).0, NFS4ERR_BAD_STATEID);
    // TEST_STATEID says the same; CLOSE ends it.
    let (_, r) = e.on(
        &mut a,
        &fh,
        nfs_argop4::OP_TEST_STATEID(TEST_STATEID4args {
            ts_stateids: vec![
                s1.clone(),
                s2.clone(),
                stateid4 {
                    seqid: 0,
                    other: [0; 12],
                },
            ],
        }),
    );
    let nfs_resop4::OP_TEST_STATEID(TEST_STATEID4res::NFS4_OK(t)) = r else {
        panic!()
    };
    assert_eq!(
        t.tsr_status_codes,
        vec![NFS4ERR_OLD_STATEID, NFS4_OK, NFS4ERR_BAD_STATEID]
    );
    assert_eq!(e.on(&mut a, &fh, close(&s2)).0, NFS4_OK);
    assert_eq!(e.on(&mut a, &fh, read(&s2)).0, NFS4ERR_BAD_STATEID);
    assert_eq!(e.on(&mut a, &fh, close(&s2)).0, NFS4ERR_BAD_STATEID);
}

#[tokio::test(flavor = "multi_thread")]
async fn share_reservations_across_clients_and_open_modes() {
    let e = env("share");
    let mut a = e.session(b"a");
    let mut b = e.session(b"b");
    let (sa, fh) = e
        .open(
            &mut a,
            b"o",
            b"f",
            OPEN4_SHARE_ACCESS_READ,
            OPEN4_SHARE_DENY_WRITE,
        )
        .unwrap();
    assert_eq!(
        e.open(&mut b, b"o", b"f", OPEN4_SHARE_ACCESS_WRITE, 0),
        Err(NFS4ERR_SHARE_DENIED)
    );
    // Reading is not denied; but b's read denies a's upgrade to writing.
    let (sb, _) = e
        .open(
            &mut b,
            b"o",
            b"f",
            OPEN4_SHARE_ACCESS_READ,
            OPEN4_SHARE_DENY_WRITE,
        )
        .unwrap();
    assert_eq!(
        e.open(&mut a, b"o", b"f", OPEN4_SHARE_ACCESS_WRITE, 0),
        Err(NFS4ERR_SHARE_DENIED)
    );
    // WRITE on a read open is NFS4ERR_OPENMODE; the anonymous stateid
    // meets the deny (NFS4ERR_LOCKED).
    assert_eq!(e.on(&mut a, &fh, write(&sa, b"x")).0, NFS4ERR_OPENMODE);
    let anon = stateid4 {
        seqid: 0,
        other: [0; 12],
    };
    assert_eq!(e.on(&mut a, &fh, write(&anon, b"x")).0, NFS4ERR_LOCKED);
    assert_eq!(e.on(&mut b, &fh, close(&sb)).0, NFS4_OK);
    assert_eq!(e.on(&mut a, &fh, close(&sa)).0, NFS4_OK);
    assert_eq!(e.on(&mut a, &fh, write(&anon, b"x")).0, NFS4_OK);
    assert!(!a.client.has_state());
}

#[tokio::test(flavor = "multi_thread")]
async fn locks_between_owners_and_what_they_hold() {
    let e = env("locks");
    let mut a = e.session(b"a");
    let mut b = e.session(b"b");
    let (sa, fh) = e
        .open(&mut a, b"o", b"f", OPEN4_SHARE_ACCESS_BOTH, 0)
        .unwrap();
    let (sb, _) = e
        .open(&mut b, b"o", b"f", OPEN4_SHARE_ACCESS_BOTH, 0)
        .unwrap();
    assert_eq!(
        e.on(&mut a, &fh, lock_new(&sa, b"l", WRITE_LT, 0, 0)).0,
        NFS4ERR_INVAL
    );
    let (st, r) = e.on(&mut a, &fh, lock_new(&sa, b"l", WRITE_LT, 0, 10));
    assert_eq!(st, NFS4_OK);
    let nfs_resop4::OP_LOCK(LOCK4res::NFS4_OK(l)) = r else {
        panic!()
    };
    let la = l.lock_stateid;
    assert_eq!(la.seqid, 1);
    // The other client is denied, and told who holds what.
    let (st, r) = e.on(&mut b, &fh, lock_new(&sb, b"l", READ_LT, 5, u64::MAX));
    assert_eq!(st, NFS4ERR_DENIED);
    let nfs_resop4::OP_LOCK(LOCK4res::NFS4ERR_DENIED(d)) = r else {
        panic!()
    };
    assert_eq!((d.offset, d.length, d.locktype), (0, 10, WRITE_LT));
    assert_eq!(d.owner.owner, b"l".to_vec());
    assert_eq!(
        e.on(&mut b, &fh, lockt(b"l", READ_LT, 9, 1)).0,
        NFS4ERR_DENIED
    );
    assert_eq!(e.on(&mut b, &fh, lockt(b"l", READ_LT, 10, 1)).0, NFS4_OK);
    // The owner's own lockt meets nothing.
    assert_eq!(e.on(&mut a, &fh, lockt(b"l", WRITE_LT, 0, 10)).0, NFS4_OK);
    // Held locks keep the open and the lock stateid.
    assert_eq!(e.on(&mut a, &fh, close(&sa)).0, NFS4ERR_LOCKS_HELD);
    let free = |sid: &stateid4| {
        nfs_argop4::OP_FREE_STATEID(FREE_STATEID4args {
            fsa_stateid: sid.clone(),
        })
    };
    assert_eq!(e.on(&mut a, &fh, free(&la)).0, NFS4ERR_LOCKS_HELD);
    assert_eq!(e.on(&mut a, &fh, free(&sa)).0, NFS4ERR_LOCKS_HELD);
    // An unlock in the middle splits the range (POSIX).
    let (st, r) = e.on(&mut a, &fh, locku(&la, 4, 2));
    assert_eq!(st, NFS4_OK);
    let nfs_resop4::OP_LOCKU(LOCKU4res::NFS4_OK(la2)) = r else {
        panic!()
    };
    assert_eq!(la2.seqid, 2);
    assert_eq!(e.on(&mut b, &fh, lockt(b"l", WRITE_LT, 4, 2)).0, NFS4_OK);
    assert_eq!(
        e.on(&mut b, &fh, lockt(b"l", WRITE_LT, 6, 1)).0,
        NFS4ERR_DENIED
    );
    assert_eq!(
        e.on(&mut a, &fh, locku(&la, 0, u64::MAX)).0,
        NFS4ERR_OLD_STATEID
    );
    assert_eq!(e.on(&mut a, &fh, locku(&la2, 0, u64::MAX)).0, NFS4_OK);
    assert_eq!(
        e.on(&mut b, &fh, lock_new(&sb, b"l", WRITE_LT, 0, 10)).0,
        NFS4_OK
    );
    // No locks left: the lock stateid may be freed, then it is gone.
    assert_eq!(e.on(&mut a, &fh, free(&with_seqid(&la2, 0))).0, NFS4_OK);
    assert_eq!(
        e.on(&mut a, &fh, locku(&with_seqid(&la2, 0), 0, 1)).0,
        NFS4ERR_BAD_STATEID
    );
    assert_eq!(e.on(&mut a, &fh, close(&sa)).0, NFS4_OK);
}

#[tokio::test(flavor = "multi_thread")]
async fn destroying_a_client_releases_its_opens_and_locks() {
    let e = env("destroy");
    let mut a = e.session(b"a");
    let mut b = e.session(b"b");
    let (sa, fh) = e
        .open(
            &mut a,
            b"o",
            b"f",
            OPEN4_SHARE_ACCESS_BOTH,
            OPEN4_SHARE_DENY_BOTH,
        )
        .unwrap();
    assert_eq!(
        e.on(&mut a, &fh, lock_new(&sa, b"l", WRITE_LT, 0, 10)).0,
        NFS4_OK
    );
    assert_eq!(
        e.open(&mut b, b"o", b"f", OPEN4_SHARE_ACCESS_READ, 0),
        Err(NFS4ERR_SHARE_DENIED)
    );
    crate::nfs::state::reaper::destroy_client(&e.state, &a.client);
    assert!(!a.client.has_state());
    let (sb, _) = e
        .open(&mut b, b"o", b"f", OPEN4_SHARE_ACCESS_BOTH, 0)
        .unwrap();
    assert_eq!(
        e.on(&mut b, &fh, lock_new(&sb, b"l", WRITE_LT, 0, 10)).0,
        NFS4_OK
    );
}
