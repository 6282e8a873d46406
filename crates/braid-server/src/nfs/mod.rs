//! The NFSv4.1 server (RFC 8881): listener, connections, sessions and the
//! COMPOUND operations, over the protocol-neutral file service. Nothing here
//! imports the SMB modules, and the SMB modules import nothing from here.
//!
//! A request goes: `conn.rs` (record marking, one task per RPC) →
//! `rpc.rs` (RPC header, credentials, NULL and COMPOUND) → `compound.rs`
//! (SEQUENCE and the slot table, the operation loop, the reply cache; it
//! starts on the reactor and moves to the blocking pool at the first
//! operation `reactor.rs` does not run inline) →
//! `dispatch.rs` (the table of operations) → `ops/<op>.rs` → braid-fs's
//! POSIX face (`braid_fs::posix`).

pub mod attrs;
pub mod callback;
pub mod compound;
pub mod conn;
pub mod dispatch;
pub mod errors;
pub mod export;
pub mod exports;
pub mod fh;
pub mod op_class;
pub mod ops;
pub mod qos;
pub mod reactor;
pub mod rpc;
pub mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::config::ServerConfig;

/// Limits that keep one client from taking the server (issue 42, "Limits and
/// hostility"); the defaults are generous for Linux clients.
#[derive(Clone, Debug)]
pub struct NfsLimits {
    /// Largest READ/WRITE payload (ca_maxrequestsize/ca_maxresponsesize are
    /// this plus room for the rest of a COMPOUND).
    pub max_io: u32,
    /// Slots per session (ca_maxrequests), enough for QD 64 on each of 16
    /// nconnect connections would be 1024; Linux asks for 64 or fewer.
    pub max_slots: u32,
    /// Operations per COMPOUND (ca_maxoperations).
    pub max_ops: u32,
    /// Sessions per client.
    pub max_sessions_per_client: usize,
    /// Client records in all.
    pub max_clients: usize,
    /// Requests one connection may have running at once.
    pub max_in_flight_per_connection: usize,
    /// Connections from one address.
    pub max_connections_per_address: usize,
    /// Opens (open stateids) per client, and byte-range lock stateids.
    pub max_opens_per_client: usize,
    pub max_locks_per_client: usize,
    /// A record must arrive whole within this once it has begun.
    pub record_timeout: Duration,
}

impl Default for NfsLimits {
    fn default() -> Self {
        NfsLimits {
            max_io: 1024 * 1024,
            max_slots: 128,
            max_ops: 64,
            max_sessions_per_client: 16,
            max_clients: 4096,
            max_in_flight_per_connection: 256,
            max_connections_per_address: 64,
            max_opens_per_client: 65536,
            max_locks_per_client: 65536,
            record_timeout: Duration::from_secs(60),
        }
    }
}

impl NfsLimits {
    /// The largest record the server accepts: a WRITE of max_io and its
    /// COMPOUND around it.
    pub fn max_request(&self) -> u32 {
        self.max_io + 64 * 1024
    }

    pub fn max_response(&self) -> u32 {
        self.max_io + 64 * 1024
    }
}

/// Everything the NFS side of the server shares between connections.
pub struct NfsState {
    pub exports: exports::Exports,
    pub clients: state::clients::ClientTable,
    pub sessions: state::sessions::SessionTable,
    pub limits: NfsLimits,
    pub lease_time: Duration,
    /// RFC 8881 8.4.2: after a restart, only reclaims until this instant
    /// (None: no grace, nobody held state).
    pub grace: state::grace::Grace,
    /// Identifies this server instance: the write verifier (RFC 8881
    /// 18.32.3) and part of client ids, so ids of an earlier run are stale.
    pub boot_verifier: [u8; 8],
    pub boot_epoch: u32,
    /// Who we are to clients (RFC 8881 2.10.5: server owner and scope);
    /// connections to any of our addresses share these, so trunking works.
    pub server_owner_major: Vec<u8>,
    pub server_scope: Vec<u8>,
    pub state_dir: Option<PathBuf>,
    next_connection_id: AtomicU64,
    pub connections: state::connections::ConnectionTable,
    pub started: Instant,
    /// Opens, byte-range locks and delegations (RFC 8881 8.2, 9, 10).
    pub stateids: state::stateids::StateTable,
    /// The SMB side's file service, whose share-mode table NFS opens join
    /// (issue 42: one share, two protocols); set by the server at start.
    pub files: std::sync::OnceLock<Arc<braid_fs::FileService>>,
    /// The cross-protocol caching registry (braid-fs's): NFS opens and
    /// writes break other protocols' caching through it (issue 42); set by
    /// the server at start.
    pub grants: std::sync::OnceLock<Arc<braid_fs::caching::CachingGrants>>,
    /// Marks delegated files for host changes, which recall their
    /// delegations through `grants` (set by the server at start).
    pub host_watch: std::sync::OnceLock<Arc<crate::host_watch::HostWatch>>,
    /// The shares' QoS gates (`crate::qos`), shared with SMB; set by the
    /// server at start (none: NFS requests are not gated).
    pub qos: std::sync::OnceLock<Arc<crate::qos::QosRegistry>>,
    /// The server's per-operation metrics and workload table; set by the
    /// server at start (tests may run without).
    pub metrics: std::sync::OnceLock<op_class::NfsMetrics>,
    /// What each client holds, recorded for checking reclaims after a
    /// restart (`state/held.rs`; the state table writes to it).
    pub held: Arc<state::held::HeldLog>,
    /// Reclaims and lease expiries, for `/metrics`.
    pub reclaims: state::held::ReclaimCounts,
}

impl NfsState {
    pub fn new(config: &ServerConfig) -> Result<Arc<NfsState>, String> {
        let store = state::store::LocalStore::open(config.state_dir.as_deref())?;
        Self::with_store(config, store)
    }

    /// The NFS state with its client records kept in `store`.
    pub fn with_store(
        config: &ServerConfig,
        store: state::store::LocalStore,
    ) -> Result<Arc<NfsState>, String> {
        let state_dir = config.state_dir.clone();
        let key = exports::handle_key_in(store.inner().as_deref(), state_dir.as_deref())?;
        let exports = exports::Exports::new(config, key)?;
        let boot_verifier: [u8; 8] = rand::random();
        let boot_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as u32)
            .unwrap_or(1);
        let grace =
            state::grace::Grace::start(&store, config.nfs_grace_time, config.nfs_lease_time);
        let held = Arc::new(state::held::HeldLog::start(store.inner()));
        if held.unchecked() && grace.active() {
            tracing::info!(
                "NFS clients of the last run reclaim unchecked: it did not record what they held"
            );
        }
        let host = hostname();
        Ok(Arc::new(NfsState {
            exports,
            clients: state::clients::ClientTable::new(boot_epoch, store),
            sessions: state::sessions::SessionTable::default(),
            limits: NfsLimits::default(),
            lease_time: config.nfs_lease_time,
            grace,
            boot_verifier,
            boot_epoch,
            server_owner_major: format!("braid:{host}").into_bytes(),
            server_scope: format!("braid:{host}").into_bytes(),
            state_dir,
            next_connection_id: AtomicU64::new(1),
            connections: state::connections::ConnectionTable::default(),
            started: Instant::now(),
            stateids: state::stateids::StateTable::with_held(boot_epoch, held.clone()),
            held,
            reclaims: Default::default(),
            files: std::sync::OnceLock::new(),
            grants: std::sync::OnceLock::new(),
            host_watch: std::sync::OnceLock::new(),
            qos: std::sync::OnceLock::new(),
            metrics: std::sync::OnceLock::new(),
        }))
    }

    pub fn next_connection_id(&self) -> u64 {
        self.next_connection_id.fetch_add(1, Ordering::Relaxed)
    }
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The NFS listeners and their state.
pub struct NfsServer {
    pub state: Arc<NfsState>,
    listeners: Vec<TcpListener>,
}

impl NfsServer {
    /// Bind every `nfs_listen` address; errors are one line naming the
    /// setting and the fix.
    /// `store`: the server's state store, where client records are kept
    /// (None: files under `state_dir`, when there is one).
    pub async fn bind(
        config: &ServerConfig,
        store: Option<Arc<dyn braid_fs::state_store::StateStore>>,
    ) -> Result<Option<NfsServer>, String> {
        if config.nfs_listen.is_empty() {
            return Ok(None);
        }
        let state = match store {
            Some(s) => NfsState::with_store(config, state::store::LocalStore::over(s))?,
            None => NfsState::new(config)?,
        };
        let mut listeners = Vec::new();
        for addr in &config.nfs_listen {
            let l = TcpListener::bind(addr).await.map_err(|e| match e.kind() {
                std::io::ErrorKind::AddrInUse => format!(
                    "nfs_listen {addr}: address already in use; stop the other NFS server or choose another port with --nfs-listen"
                ),
                std::io::ErrorKind::PermissionDenied => format!(
                    "nfs_listen {addr}: permission denied; port 2049 needs root or CAP_NET_BIND_SERVICE, or use a port such as 20490"
                ),
                _ => format!("nfs_listen {addr}: {e}"),
            })?;
            listeners.push(l);
        }
        Ok(Some(NfsServer { state, listeners }))
    }

    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// Serve until a stop is asked for (`stop.rs`); returns once every
    /// listener is closed. `admits` is the server-wide
    /// hosts_allow/hosts_deny check.
    pub async fn run(
        self,
        admits: Arc<dyn Fn(std::net::IpAddr) -> bool + Send + Sync>,
        stop: Arc<crate::stop::Stop>,
    ) {
        let state = self.state;
        tokio::spawn(state::reaper::run(state.clone()));
        let mut tasks = Vec::new();
        for l in self.listeners {
            let state = state.clone();
            let admits = admits.clone();
            let stop = stop.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let accepted = tokio::select! {
                        biased;
                        _ = stop.requested() => break,
                        a = l.accept() => a,
                    };
                    match accepted {
                        Ok((stream, peer)) => {
                            if !admits(peer.ip()) {
                                drop(stream);
                                continue;
                            }
                            let Some(slot) = state
                                .connections
                                .admit(peer.ip(), state.limits.max_connections_per_address)
                            else {
                                warn!(%peer, "NFS connection refused: too many from this address");
                                drop(stream);
                                continue;
                            };
                            let state = state.clone();
                            let serving = stop.serving();
                            let stop = stop.clone();
                            tokio::spawn(async move {
                                conn::serve(state, stream, peer, &stop).await;
                                drop(slot);
                                drop(serving);
                            });
                        }
                        Err(e) => {
                            warn!("NFS accept failed: {e}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
            }));
        }
        info!("serving NFSv4.1 and 4.2");
        for t in tasks {
            let _ = t.await;
        }
    }
}
