//! What only the SMB server keeps, server-wide: its sessions and
//! connections, oplocks and directory leases, CHANGE_NOTIFY watches,
//! durable opens waiting for their client, and the per-client limits of
//! its listeners. `ServerState::smb` holds it beside what both protocols
//! share (config, shares, file service, metrics, QoS, caching grants);
//! NFS keeps its own in `nfs::NfsState`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::config::ServerConfig;
use crate::sharded::ShardedMap;

use super::session::Session;

pub struct SmbState {
    pub sessions: ShardedMap<u64, Arc<Session>>,
    /// Live connections (for the admin view and channel lookups).
    pub connections: ShardedMap<u64, std::sync::Weak<super::conn::Connection>>,
    pub oplocks: super::oplock::OplockTable,
    /// CHANGE_NOTIFY watches, fed by the handlers that change things.
    pub notify: super::notify::NotifyHub,
    /// Directory opens holding a directory lease (`dir_lease.rs`).
    pub dir_leases: super::dir_lease::DirLeases,
    /// MS-SMB2 3.3.1.5 ServerGuid, answered in NEGOTIATE.
    pub server_guid: [u8; 16],
    /// Keys the tags of copy-chunk resume keys (ops/fsctl_copy.rs).
    pub resume_key_secret: std::hash::RandomState,
    /// Durable opens whose connection was lost, waiting for a reconnect.
    pub preserved: Arc<super::durable::PreservedOpens>,
    /// Failed logons per client address (`logon_throttle.rs`).
    pub logon_throttle: super::logon_throttle::LogonThrottle,
    /// Opens held per client address (`max_open_files_per_client`).
    pub client_opens: Arc<super::per_client::PerClient>,
    /// Connections per client address (`max_connections_per_client`).
    pub client_connections: Arc<super::per_client::PerClient>,
    next_session_id: AtomicU64,
    /// File ids are unique server-wide (MS-SMB2 3.3.1.10: a durable open
    /// keeps its id when reconnected on another session).
    next_file_id: AtomicU64,
    next_connection_id: AtomicU64,
}

impl SmbState {
    pub fn new(config: &ServerConfig) -> SmbState {
        SmbState {
            sessions: ShardedMap::new(),
            connections: ShardedMap::new(),
            oplocks: Default::default(),
            notify: Default::default(),
            dir_leases: Default::default(),
            server_guid: rand::random(),
            resume_key_secret: std::hash::RandomState::new(),
            preserved: Default::default(),
            logon_throttle: super::logon_throttle::LogonThrottle::new(
                config.logon_failures_per_minute,
            ),
            client_opens: super::per_client::PerClient::new(
                "max_open_files_per_client",
                config.max_open_files_per_client,
            ),
            client_connections: super::per_client::PerClient::new(
                "max_connections_per_client",
                config.max_connections_per_client,
            ),
            // Session ids fit in 32 bits, as Samba's do: some clients keep
            // them in 32-bit variables (smbtorture smb2.session-id does).
            // A random start below 2^31 leaves 2^31 ids before they would
            // grow past 32 bits.
            next_session_id: AtomicU64::new(u64::from(rand::random::<u32>() >> 1).max(1)),
            next_file_id: AtomicU64::new(1),
            next_connection_id: AtomicU64::new(1),
        }
    }

    pub fn new_session_id(&self) -> u64 {
        self.next_session_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn new_file_id(&self) -> u64 {
        self.next_file_id.fetch_add(1, Ordering::Relaxed)
    }

    /// File ids restored from the state store up to `highest` are taken:
    /// new opens get ids above them.
    pub fn reserve_file_ids_through(&self, highest: u64) {
        self.next_file_id
            .fetch_max(highest.saturating_add(1), Ordering::Relaxed);
    }

    pub fn new_connection_id(&self) -> u64 {
        self.next_connection_id.fetch_add(1, Ordering::Relaxed)
    }
}
