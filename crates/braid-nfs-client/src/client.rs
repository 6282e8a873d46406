//! The session: EXCHANGE_ID, CREATE_SESSION and RECLAIM_COMPLETE, then
//! every COMPOUND behind a SEQUENCE on a slot of the table, sent on one of
//! the session's connections.

use crate::slots::{Outcome, SlotTable, Ticket};
use crate::transport::{Conn, Traffic};
use crate::{Error, Result};
use braid_nfs_proto::nfs4::*;
use braid_nfs_proto::rpc::{
    decode_reply, encode_call, AcceptStat, AuthSysParms, CallHeader, OpaqueAuth, ReplyStat,
    NFS4_PROGRAM, NFSPROC4_COMPOUND, NFS_V4,
};
use braid_nfs_proto::xdr::{Xdr, XdrReader, XdrWriter};
use bytes::Bytes;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How to connect.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Server addresses: the first one carries EXCHANGE_ID and
    /// CREATE_SESSION; every other one must show the same server owner
    /// and scope (session trunking) or the connect fails.
    pub addrs: Vec<SocketAddr>,
    /// Connections per address (Linux's `nconnect`), 1..=16.
    pub nconnect: u32,
    /// AUTH_SYS credential.
    pub uid: u32,
    pub gid: u32,
    pub gids: Vec<u32>,
    pub machine_name: String,
    /// Fore channel slots asked for (ca_maxrequests).
    pub slots: u32,
    /// Largest READ/WRITE asked for (sizes the channel's request and
    /// response limits).
    pub max_io: u32,
    /// Client owner id (co_ownerid); default unique per Client.
    pub owner: Option<Vec<u8>>,
    /// A call with no reply after this long fails (its slot is retired).
    pub timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            addrs: Vec::new(),
            nconnect: 1,
            uid: 0,
            gid: 0,
            gids: Vec::new(),
            machine_name: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "braid".into()),
            slots: 64,
            max_io: 1 << 20,
            owner: None,
            timeout: Duration::from_secs(60),
        }
    }
}

/// What one address's EXCHANGE_ID answer says about the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerIdentity {
    pub addr: SocketAddr,
    pub clientid: u64,
    pub major_id: Vec<u8>,
    pub minor_id: u64,
    pub scope: Vec<u8>,
    /// eir_server_impl_id: domain, name.
    pub implementation: String,
}

/// An NFSv4.1 client with one session over one or more connections.
pub struct Client {
    conns: Vec<Arc<Conn>>,
    rr: AtomicUsize,
    xid: AtomicU32,
    /// The RPC call header after the xid (fixed for the client's life).
    call_prefix: Vec<u8>,
    clientid: u64,
    sessionid: sessionid4,
    slots: Mutex<SlotTable>,
    timeout: Duration,
    max_read: u32,
    max_write: u32,
    servers: Vec<ServerIdentity>,
    pub(crate) owner_seq: AtomicU64,
    pub(crate) dir_cache: Mutex<HashMap<String, Vec<u8>>>,
    fore: channel_attrs4,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("clientid", &format_args!("{:#x}", self.clientid))
            .field("conns", &self.conns)
            .finish()
    }
}

static CLIENT_SEQ: AtomicU64 = AtomicU64::new(0);

fn prefix(opts: &ClientOptions) -> Vec<u8> {
    let cred = OpaqueAuth::sys(&AuthSysParms {
        stamp: std::process::id(),
        machinename: opts.machine_name.as_bytes()[..opts.machine_name.len().min(255)].to_vec(),
        uid: opts.uid,
        gid: opts.gid,
        gids: opts.gids.iter().take(16).copied().collect(),
    });
    let mut w = XdrWriter::new();
    encode_call(
        &mut w,
        &CallHeader {
            xid: 0,
            prog: NFS4_PROGRAM,
            vers: NFS_V4,
            proc_: NFSPROC4_COMPOUND,
            cred,
            verf: OpaqueAuth::none(),
        },
    );
    let v = w.into_vec();
    v[4..].to_vec()
}

/// Decodes a COMPOUND reply record.
fn decode_compound(rec: Bytes) -> Result<COMPOUND4res> {
    let mut r = XdrReader::new(rec);
    let (_, st) = decode_reply(&mut r).map_err(|e| Error::Rpc(format!("reply header: {e}")))?;
    match st {
        ReplyStat::Accepted {
            stat: AcceptStat::Success,
            ..
        } => {}
        o => return Err(Error::Rpc(format!("call not accepted: {o:?}"))),
    }
    COMPOUND4res::decode(&mut r).map_err(|e| Error::Protocol(format!("COMPOUND4res: {e}")))
}

fn op_name(r: &nfs_resop4) -> &'static str {
    r.discriminant().name()
}

/// The first failed op of a compound, as an error.
fn compound_error(res: &COMPOUND4res) -> Error {
    Error::Nfs {
        op: res.resarray.last().map(op_name).unwrap_or("COMPOUND"),
        status: res.status,
    }
}

impl Client {
    fn next_xid(&self) -> u32 {
        self.xid.fetch_add(1, Ordering::Relaxed)
    }

    fn encode_head(&self, xid: u32, nops: usize) -> XdrWriter {
        let mut w = XdrWriter::with_capacity(self.call_prefix.len() + 96);
        w.put_u32(xid);
        w.put_fixed(&self.call_prefix);
        w.put_u32(0); // tag: empty
        w.put_u32(1); // minorversion
        w.put_u32(nops as u32);
        w
    }

    /// A COMPOUND without SEQUENCE (EXCHANGE_ID, CREATE_SESSION) on `conn`.
    async fn raw_compound(
        conn: &Conn,
        prefix: &[u8],
        xid: u32,
        ops: Vec<nfs_argop4>,
        timeout: Duration,
    ) -> Result<COMPOUND4res> {
        let mut w = XdrWriter::new();
        w.put_u32(xid);
        w.put_fixed(prefix);
        COMPOUND4args {
            tag: Vec::new(),
            minorversion: 1,
            argarray: ops,
        }
        .encode(&mut w);
        let rec = tokio::time::timeout(timeout, conn.call(xid, w.into_segments()))
            .await
            .map_err(|_| Error::Io(format!("{}: no reply", conn.remote_addr())))??;
        let res = decode_compound(rec)?;
        if res.status != NFS4_OK {
            return Err(compound_error(&res));
        }
        Ok(res)
    }

    async fn exchange_id(
        conn: &Conn,
        prefix: &[u8],
        xid: u32,
        owner: &client_owner4,
        timeout: Duration,
    ) -> Result<(EXCHANGE_ID4resok, ServerIdentity)> {
        let res = Self::raw_compound(
            conn,
            prefix,
            xid,
            vec![nfs_argop4::OP_EXCHANGE_ID(EXCHANGE_ID4args {
                eia_clientowner: owner.clone(),
                eia_flags: EXCHGID4_FLAG_USE_NON_PNFS,
                eia_state_protect: state_protect4_a::SP4_NONE,
                eia_client_impl_id: vec![nfs_impl_id4 {
                    nii_domain: b"braid".to_vec(),
                    nii_name: format!("braid-nfs-client {}", env!("CARGO_PKG_VERSION"))
                        .into_bytes(),
                    nii_date: nfstime4 {
                        seconds: 0,
                        nseconds: 0,
                    },
                }],
            })],
            timeout,
        )
        .await?;
        match res.resarray.into_iter().next() {
            Some(nfs_resop4::OP_EXCHANGE_ID(EXCHANGE_ID4res::NFS4_OK(ok))) => {
                let id = ServerIdentity {
                    addr: conn.remote_addr(),
                    clientid: ok.eir_clientid,
                    major_id: ok.eir_server_owner.so_major_id.clone(),
                    minor_id: ok.eir_server_owner.so_minor_id,
                    scope: ok.eir_server_scope.clone(),
                    implementation: ok
                        .eir_server_impl_id
                        .first()
                        .map(|i| {
                            format!(
                                "{} {}",
                                String::from_utf8_lossy(&i.nii_domain),
                                String::from_utf8_lossy(&i.nii_name)
                            )
                        })
                        .unwrap_or_default(),
                };
                Ok((ok, id))
            }
            _ => Err(Error::Protocol("EXCHANGE_ID: no result".into())),
        }
    }

    /// Connects: EXCHANGE_ID and CREATE_SESSION on the first address,
    /// EXCHANGE_ID on each other address (same owner: the answers must
    /// show one server), `nconnect` connections to each address, then
    /// RECLAIM_COMPLETE.
    pub async fn connect(opts: ClientOptions) -> Result<Arc<Client>> {
        if opts.addrs.is_empty() {
            return Err(Error::Io("no server address".into()));
        }
        let nconnect = opts.nconnect.clamp(1, 16);
        let prefix = prefix(&opts);
        let max_io = opts.max_io.clamp(4096, 16 << 20);
        // Room for the headers around a READ/WRITE payload.
        let max_record = max_io as usize + 64 * 1024;
        let seed = {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            t.as_nanos() as u64 ^ ((std::process::id() as u64) << 32)
        };
        let xid = AtomicU32::new((seed as u32) | 1);
        let n = CLIENT_SEQ.fetch_add(1, Ordering::Relaxed);
        let owner = client_owner4 {
            co_verifier: seed.to_be_bytes(),
            co_ownerid: opts.owner.clone().unwrap_or_else(|| {
                format!(
                    "braid-nfs-client/{}/{}/{n}/{seed:x}",
                    opts.machine_name,
                    std::process::id()
                )
                .into_bytes()
            }),
        };
        let t = opts.timeout;
        let first = Conn::connect(opts.addrs[0], max_record).await?;
        let (eid, id0) = Self::exchange_id(
            &first,
            &prefix,
            xid.fetch_add(1, Ordering::Relaxed),
            &owner,
            t,
        )
        .await?;
        let mut servers = vec![id0.clone()];
        let fore = channel_attrs4 {
            ca_headerpadsize: 0,
            ca_maxrequestsize: max_record as u32,
            ca_maxresponsesize: max_record as u32,
            ca_maxresponsesize_cached: 8192,
            ca_maxoperations: 16,
            ca_maxrequests: opts.slots.clamp(1, crate::slots::MAX_SLOTS),
            ca_rdma_ird: Vec::new(),
        };
        let back = channel_attrs4 {
            ca_headerpadsize: 0,
            ca_maxrequestsize: 4096,
            ca_maxresponsesize: 4096,
            ca_maxresponsesize_cached: 0,
            ca_maxoperations: 2,
            ca_maxrequests: 1,
            ca_rdma_ird: Vec::new(),
        };
        let res = Self::raw_compound(
            &first,
            &prefix,
            xid.fetch_add(1, Ordering::Relaxed),
            vec![nfs_argop4::OP_CREATE_SESSION(CREATE_SESSION4args {
                csa_clientid: eid.eir_clientid,
                csa_sequence: eid.eir_sequenceid,
                csa_flags: 0,
                csa_fore_chan_attrs: fore,
                csa_back_chan_attrs: back,
                csa_cb_program: 0x4000_0000,
                csa_sec_parms: vec![callback_sec_parms4::AUTH_NONE],
            })],
            t,
        )
        .await?;
        let cs = match res.resarray.into_iter().next() {
            Some(nfs_resop4::OP_CREATE_SESSION(CREATE_SESSION4res::NFS4_OK(ok))) => ok,
            _ => return Err(Error::Protocol("CREATE_SESSION: no result".into())),
        };
        let fore = cs.csr_fore_chan_attrs;
        let mut conns = vec![first.clone()];
        // The first connection to each other address: the session is
        // checked on it below.
        let mut probes = Vec::new();
        for _ in 1..nconnect {
            conns.push(Conn::connect(opts.addrs[0], max_record).await?);
        }
        for &addr in &opts.addrs[1..] {
            let c = Conn::connect(addr, max_record).await?;
            let (_, id) =
                Self::exchange_id(&c, &prefix, xid.fetch_add(1, Ordering::Relaxed), &owner, t)
                    .await?;
            if id.major_id != id0.major_id || id.scope != id0.scope {
                return Err(Error::Trunking(format!(
                    "{addr} is another server: server owner {:?} scope {:?}, but {} answered {:?} scope {:?}",
                    String::from_utf8_lossy(&id.major_id),
                    String::from_utf8_lossy(&id.scope),
                    id0.addr,
                    String::from_utf8_lossy(&id0.major_id),
                    String::from_utf8_lossy(&id0.scope)
                )));
            }
            if id.clientid != id0.clientid {
                return Err(Error::Trunking(format!(
                    "{addr} gave client id {:#x}, {} gave {:#x}: not one server",
                    id.clientid, id0.addr, id0.clientid
                )));
            }
            servers.push(id);
            probes.push((conns.len(), addr));
            conns.push(c);
            for _ in 1..nconnect {
                conns.push(Conn::connect(addr, max_record).await?);
            }
        }
        // Linux's sunrpc puts one request per connection first in turn;
        // keep the address order but interleave nothing else.
        let room = |limit: u32| limit.saturating_sub(1024).max(4096);
        let client = Arc::new(Client {
            conns,
            rr: AtomicUsize::new(0),
            xid,
            call_prefix: prefix,
            clientid: eid.eir_clientid,
            sessionid: cs.csr_sessionid,
            slots: Mutex::new(SlotTable::new(fore.ca_maxrequests.max(1))),
            timeout: t,
            max_read: max_io.min(room(fore.ca_maxresponsesize)),
            max_write: max_io.min(room(fore.ca_maxrequestsize)),
            servers,
            owner_seq: AtomicU64::new(0),
            dir_cache: Mutex::new(HashMap::new()),
            fore,
        });
        client
            .compound(vec![nfs_argop4::OP_RECLAIM_COMPLETE(
                RECLAIM_COMPLETE4args { rca_one_fs: false },
            )])
            .await
            .or_else(|e| match e.status() {
                // A server that needs none says so; not an error here.
                Some(s) if s == NFS4ERR_COMPLETE_ALREADY => Ok(Vec::new()),
                _ => Err(e),
            })?;
        // Every other address must know the session: a server owner and
        // client id that only look alike (two servers of one host started
        // in the same second) answer NFS4ERR_BADSESSION here.
        for (i, addr) in probes {
            if let Err(e) = client.compound_via(Some(i), Vec::new()).await {
                return Err(Error::Trunking(format!(
                    "{addr} is another server: SEQUENCE of the session on it: {e}"
                )));
            }
        }
        Ok(client)
    }

    pub fn clientid(&self) -> u64 {
        self.clientid
    }

    pub fn sessionid(&self) -> &sessionid4 {
        &self.sessionid
    }

    /// The fore channel attributes the server granted.
    pub fn fore_channel(&self) -> &channel_attrs4 {
        &self.fore
    }

    /// The EXCHANGE_ID answer of each address.
    pub fn servers(&self) -> &[ServerIdentity] {
        &self.servers
    }

    pub fn max_read(&self) -> u32 {
        self.max_read
    }

    pub fn max_write(&self) -> u32 {
        self.max_write
    }

    /// The session's connections.
    pub fn connections(&self) -> &[Arc<Conn>] {
        &self.conns
    }

    /// Traffic per connection (local, remote, alive, counters).
    pub fn traffic(&self) -> Vec<(SocketAddr, SocketAddr, bool, Traffic)> {
        self.conns
            .iter()
            .map(|c| (c.local_addr(), c.remote_addr(), c.is_alive(), c.traffic()))
            .collect()
    }

    /// Slots usable now (the server's target + 1) and in use.
    pub fn slot_usage(&self) -> (u32, u32) {
        let st = self.slots.lock().expect("slot table");
        (st.limit() + 1, st.in_use())
    }

    /// Round robin over live connections, skipping one whose queue is
    /// longer than the average (Linux's xprt_switch_find_next_entry_roundrobin).
    fn pick(&self) -> Result<&Arc<Conn>> {
        let n = self.conns.len();
        let (mut total, mut active) = (0usize, 0usize);
        for c in &self.conns {
            if c.is_alive() {
                total += c.outstanding();
                active += 1;
            }
        }
        if active == 0 {
            return Err(Error::NoConnection);
        }
        let start = self.rr.fetch_add(1, Ordering::Relaxed);
        let mut fallback = None;
        for i in 0..n {
            let c = &self.conns[(start + i) % n];
            if !c.is_alive() {
                continue;
            }
            if c.outstanding() * active <= total {
                return Ok(c);
            }
            fallback.get_or_insert(c);
        }
        fallback.ok_or(Error::NoConnection)
    }

    async fn acquire(&self) -> Result<Ticket> {
        let r = self.slots.lock().expect("slot table").acquire();
        match r {
            Ok(t) => Ok(t),
            Err(rx) => rx.await.map_err(|_| Error::Closed),
        }
    }

    fn complete(&self, t: &Ticket, o: Outcome) {
        self.slots.lock().expect("slot table").complete(t, o);
    }

    /// Runs `ops` behind a SEQUENCE and returns their results (without
    /// SEQUENCE's). Any failed op is an error. NFS4ERR_DELAY (from
    /// SEQUENCE or a later op) is retried after a growing pause.
    pub async fn compound(&self, ops: Vec<nfs_argop4>) -> Result<Vec<nfs_resop4>> {
        self.compound_via(None, ops).await
    }

    /// [`compound`](Self::compound) on connection `via`, or on the next
    /// one in turn.
    async fn compound_via(
        &self,
        via: Option<usize>,
        ops: Vec<nfs_argop4>,
    ) -> Result<Vec<nfs_resop4>> {
        let mut body = XdrWriter::new();
        for op in &ops {
            op.encode(&mut body);
        }
        let body = body.into_segments();
        let mut pause = Duration::from_millis(1);
        let mut tries = 0u32;
        loop {
            tries += 1;
            let t = self.acquire().await?;
            let xid = self.next_xid();
            let mut w = self.encode_head(xid, ops.len() + 1);
            nfs_argop4::OP_SEQUENCE(SEQUENCE4args {
                sa_sessionid: self.sessionid,
                sa_sequenceid: t.seqid,
                sa_slotid: t.slot,
                sa_highest_slotid: t.highest,
                sa_cachethis: false,
            })
            .encode(&mut w);
            let mut segs = w.into_segments();
            segs.extend(body.iter().cloned());
            let picked = match via {
                Some(i) => self.conns.get(i).ok_or(Error::NoConnection),
                None => self.pick(),
            };
            let conn = match picked {
                Ok(c) => c,
                Err(e) => {
                    self.complete(&t, Outcome::NotExecuted);
                    return Err(e);
                }
            };
            let rec = match tokio::time::timeout(self.timeout, conn.call(xid, segs)).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    self.complete(&t, Outcome::Lost);
                    return Err(e);
                }
                Err(_) => {
                    self.complete(&t, Outcome::Lost);
                    return Err(Error::Io(format!(
                        "{}: no reply in {:?}",
                        conn.remote_addr(),
                        self.timeout
                    )));
                }
            };
            let mut res = match decode_compound(rec) {
                Ok(r) => r,
                Err(e) => {
                    self.complete(&t, Outcome::Lost);
                    return Err(e);
                }
            };
            match res.resarray.first() {
                Some(nfs_resop4::OP_SEQUENCE(SEQUENCE4res::NFS4_OK(ok))) => {
                    if ok.sr_slotid != t.slot || ok.sr_sequenceid != t.seqid {
                        self.complete(&t, Outcome::Lost);
                        return Err(Error::Protocol(format!(
                            "SEQUENCE answered slot {} seqid {} for slot {} seqid {}",
                            ok.sr_slotid, ok.sr_sequenceid, t.slot, t.seqid
                        )));
                    }
                    self.complete(
                        &t,
                        Outcome::Done {
                            highest_slotid: ok.sr_highest_slotid,
                            target_highest_slotid: ok.sr_target_highest_slotid,
                        },
                    );
                }
                Some(nfs_resop4::OP_SEQUENCE(SEQUENCE4res::Default(st))) => {
                    let st = *st;
                    self.complete(&t, Outcome::NotExecuted);
                    if st == NFS4ERR_DELAY && tries < 1000 {
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_millis(100));
                        continue;
                    }
                    return Err(if st == NFS4ERR_SEQ_MISORDERED {
                        Error::SeqMisordered {
                            slot: t.slot,
                            seqid: t.seqid,
                        }
                    } else if st == NFS4ERR_BADSLOT {
                        Error::BadSlot { slot: t.slot }
                    } else {
                        Error::Nfs {
                            op: "SEQUENCE",
                            status: st,
                        }
                    });
                }
                _ => {
                    self.complete(&t, Outcome::NotExecuted);
                    return Err(compound_error(&res));
                }
            }
            if res.status == NFS4ERR_DELAY && tries < 1000 {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(100));
                continue;
            }
            if res.status != NFS4_OK {
                return Err(compound_error(&res));
            }
            res.resarray.remove(0);
            return Ok(res.resarray);
        }
    }

    /// DESTROY_SESSION and DESTROY_CLIENTID (best effort).
    pub async fn shutdown(&self) {
        let Ok(c) = self.pick() else { return };
        let _ = Self::raw_compound(
            c,
            &self.call_prefix,
            self.next_xid(),
            vec![nfs_argop4::OP_DESTROY_SESSION(DESTROY_SESSION4args {
                dsa_sessionid: self.sessionid,
            })],
            Duration::from_secs(5),
        )
        .await;
        let _ = Self::raw_compound(
            c,
            &self.call_prefix,
            self.next_xid(),
            vec![nfs_argop4::OP_DESTROY_CLIENTID(DESTROY_CLIENTID4args {
                dca_clientid: self.clientid,
            })],
            Duration::from_secs(5),
        )
        .await;
    }
}
