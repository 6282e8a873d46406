//! Listeners: bind every configured address and serve connections.

use std::sync::Arc;

use braid_fs::{FileService, SystemClock};
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

use crate::config::ServerConfig;
use crate::smb::conn::serve_connection;
use crate::state::ServerState;
use crate::users_live::LiveUsers;

pub struct Server {
    pub state: Arc<ServerState>,
    listeners: Vec<TcpListener>,
    /// The admin HTTP API's listener (`admin_listen`), when on.
    admin: Option<TcpListener>,
    /// The NFSv4.1 listeners (`nfs_listen`), when on.
    nfs: Option<crate::nfs::NfsServer>,
}

impl Server {
    /// Validate the shares and bind the listeners; errors are one line
    /// saying what failed and how to fix it.
    pub async fn bind(config: ServerConfig, users: LiveUsers) -> Result<Server, String> {
        let files = FileService::new(Arc::new(SystemClock));
        let state = Arc::new(ServerState::new(config, users, files)?);
        state
            .caching
            .register("smb", crate::smb::caching::holder(&state));
        state
            .host_watch
            .set_dir_listener(crate::smb::host_watch::dir_listener(&state));
        let config = state.config();
        let mut listeners = Vec::new();
        for addr in &config.listen {
            let l = TcpListener::bind(addr).await.map_err(|e| match e.kind() {
                std::io::ErrorKind::AddrInUse => {
                    format!("listen {addr}: address already in use; stop the other server or choose another port with --listen")
                }
                std::io::ErrorKind::PermissionDenied => format!(
                    "listen {addr}: permission denied; ports below 1024 need root or CAP_NET_BIND_SERVICE (setcap cap_net_bind_service=+ep $(which braid)), or use a port such as 4445"
                ),
                _ => format!("listen {addr}: {e}"),
            })?;
            listeners.push(l);
        }
        let admin = match config.admin_listen {
            Some(addr) => match crate::admin::bind(addr).await {
                Ok(l) => Some(l),
                // The built-in default address may be taken (another braid):
                // run without the admin API rather than not at all.
                Err(e) if config.admin_listen_is_default => {
                    warn!("{e}; running without the admin API");
                    None
                }
                Err(e) => return Err(e),
            },
            None => None,
        };
        // NFS client records go to the server's store only where it
        // outlives the process (etcd, or files under state_dir; in memory
        // nothing is recorded and a restart has no grace period).
        let lasting = config.state_dir.is_some()
            || !matches!(config.state_store, crate::config::StateStoreConfig::Local);
        let store = lasting.then(|| state.store.clone());
        let nfs = crate::nfs::NfsServer::bind(&config, store).await?;
        if let Some(nfs) = &nfs {
            let _ = state.nfs.set(nfs.state.clone());
            let _ = nfs.state.files.set(state.files.clone());
            state
                .caching
                .register("nfs", crate::nfs::state::caching::holder(&nfs.state));
            let _ = nfs.state.grants.set(state.caching.clone());
            let _ = nfs.state.host_watch.set(state.host_watch.clone());
            let _ = nfs.state.qos.set(state.qos.clone());
            let _ = nfs.state.metrics.set(crate::nfs::op_class::NfsMetrics {
                ops: state.metrics.ops.clone(),
                workloads: state.metrics.workloads.clone(),
            });
        }
        // Persistent opens (and durable ones a graceful stop kept) wait
        // for their clients before the first connection is accepted.
        crate::smb::persistent::restore_all(&state).await;
        Ok(Server {
            state,
            listeners,
            admin,
            nfs,
        })
    }

    pub fn local_addrs(&self) -> Vec<std::net::SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// The NFS listeners' addresses (empty when NFS is off).
    pub fn nfs_local_addrs(&self) -> Vec<std::net::SocketAddr> {
        self.nfs
            .as_ref()
            .map(|n| n.local_addrs())
            .unwrap_or_default()
    }

    /// Where a reload (`reload.rs`) reads the config from.
    pub fn set_config_source(&self, source: crate::reload::ConfigSource) {
        let _ = self.state.config_source.set(source);
    }

    /// The admin API's address, when it is on.
    pub fn admin_addr(&self) -> Option<std::net::SocketAddr> {
        self.admin.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Keep every durable open in the state store, so that a restart with
    /// the same store resumes them, and sync what NFS clients hold
    /// (blocking).
    pub fn save_state(state: &ServerState) -> usize {
        // What NFS clients hold was written without a sync (`held.rs`):
        // synced now, so that it survives the machine too.
        if let Some(nfs) = state.nfs.get() {
            nfs.held.flush();
        }
        crate::smb::persistent::save_all_durable(state)
    }

    /// Serve until a stop is asked for (`stop.rs`); returns once every
    /// listener is closed.
    pub async fn run(self) {
        let mut tasks = Vec::new();
        if let Some(l) = self.admin {
            tokio::spawn(crate::admin::serve(self.state.clone(), l));
        }
        tokio::spawn(crate::host_watch::run(self.state.clone()));
        if let Some(nfs) = self.nfs {
            let state = self.state.clone();
            let admits =
                std::sync::Arc::new(move |ip: std::net::IpAddr| state.config().hosts.admits(ip));
            tasks.push(tokio::spawn(nfs.run(admits, self.state.stop.clone())));
        }
        for l in self.listeners {
            tasks.push(tokio::spawn(accept_smb(self.state.clone(), l)));
        }
        info!("serving");
        for t in tasks {
            let _ = t.await;
        }
    }

    /// A graceful stop (`stop.rs`): close the listeners (`serving` is the
    /// task running `run`, unless it ended), let connections finish what
    /// they run, then keep every durable open in the state store. Returns
    /// how many were kept.
    pub async fn stop(
        state: &Arc<ServerState>,
        serving: Option<tokio::task::JoinHandle<()>>,
    ) -> usize {
        state.stop.request();
        if let Some(serving) = serving {
            let _ = serving.await;
        }
        info!("listeners closed; connections finish their running requests");
        // Beyond the connections' own deadline: their teardown (closing
        // the opens that are not durable) takes a moment too.
        let limit = state.stop.deadline() + std::time::Duration::from_secs(2);
        if tokio::time::timeout_at(limit, state.stop.drained())
            .await
            .is_err()
        {
            warn!("connections still open at the stop's deadline; their durable opens are saved as they are");
        }
        let state = state.clone();
        tokio::task::spawn_blocking(move || Server::save_state(&state))
            .await
            .unwrap_or(0)
    }
}

/// Accept SMB connections on `l` until a stop is asked for, then close it.
async fn accept_smb(state: Arc<ServerState>, l: TcpListener) {
    let mut refused = RefusalLog::default();
    let mut hosts_refused = RefusalLog::default();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = state.stop.requested() => break,
            a = l.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // As now: a reload applies to connections accepted after it.
        let config = state.config();
        if !config.hosts.admits(peer.ip()) {
            // Logged before the close, so whoever sees the reset finds the
            // reason in the log.
            hosts_refused.note(peer, "not in hosts_allow, or in hosts_deny");
            drop(stream);
            continue;
        }
        if state.smb.connections.len() >= config.max_connections {
            // Closed at once: the client sees a reset and may try again
            // later.
            state
                .metrics
                .connections_refused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            refused.note(peer, "max_connections reached");
            drop(stream);
            continue;
        }
        // Held while the connection is served (a refusal is logged by
        // `take`).
        let Some(slot) = state.smb.client_connections.take(peer.ip()) else {
            drop(stream);
            state
                .metrics
                .connections_refused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            continue;
        };
        let serving = state.stop.serving();
        let state = state.clone();
        tokio::spawn(async move {
            serve_connection(state, stream).await;
            drop(slot);
            drop(serving);
        });
    }
    debug!("SMB listener closed");
}

/// Connections refused at accept, logged at most every 10 s for each
/// reason, so that a flood does not flood the log too.
#[derive(Default)]
struct RefusalLog {
    since_last: u64,
    last: Option<std::time::Instant>,
}

impl RefusalLog {
    fn note(&mut self, peer: std::net::SocketAddr, why: &str) {
        self.since_last += 1;
        if self
            .last
            .is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(10))
        {
            return;
        }
        warn!(
            %peer,
            refused = self.since_last,
            "connection refused: {why}"
        );
        self.since_last = 0;
        self.last = Some(std::time::Instant::now());
    }
}
