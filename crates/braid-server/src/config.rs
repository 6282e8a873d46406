//! Server settings after the binary has parsed and validated its config.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct ShareConfig {
    pub name: String,
    pub path: PathBuf,
    /// Require SMB3 encryption for this share.
    pub encrypt: bool,
    /// Large aligned WRITEs bypass the page cache (braid-fs `direct.rs`).
    pub direct_writes: bool,
    /// Byte-range locks are mirrored as kernel locks (braid-fs
    /// `posix_lock.rs`), so that local processes and clients see each other's.
    pub posix_locking: bool,
    /// Opens test and take Netatalk's open and deny-mode locks (braid-fs
    /// `netatalk_lock.rs`, Samba's `fruit:locking = netatalk`).
    pub netatalk_locking: bool,
    /// Named streams can be opened (stored in xattrs, braid-fs `stream.rs`).
    pub named_streams: bool,
    /// Directory listings leave out what the user may not read (MS-SMB2
    /// 2.2.10 SMB2_SHAREFLAG_ACCESS_BASED_DIRECTORY_ENUM).
    pub access_based_enumeration: bool,
    /// Report Unix dot files as hidden (Samba's `hide dot files`).
    pub hide_dot_files: bool,
    /// Name patterns (`*`, `?`) reported as hidden (Samba's `hide files`).
    pub hide_files: Vec<String>,
    /// Name patterns neither listed nor opened (Samba's `veto files`).
    pub veto_files: Vec<String>,
    /// A directory holding only vetoed names can be deleted, with them
    /// (Samba's `delete veto files`).
    pub delete_veto_files: bool,
    /// Names are resolved through the metadata cache (braid-fs
    /// `meta/cache.rs`).
    pub metadata_cache: bool,
    /// Unix modes of what clients create (Samba's `create mask`,
    /// `directory mask`); None: 0666 / 0777 less the umask.
    pub create_modes: Option<braid_fs::CreateModes>,
    /// DACL inheritance bits canonicalised on set, as Windows does
    /// (Samba's `acl flag inherited canonicalization`).
    pub canonicalize_acl_flags: bool,
    /// Who may connect, and who may write (`share_access.rs`).
    pub access: crate::smb::share_access::ShareAccess,
    /// Shown in share lists (Samba's `comment`).
    pub comment: String,
    /// Listed in share lists (Samba's `browseable`); connecting by name
    /// works either way.
    pub browseable: bool,
    /// Snapshots served as previous versions (braid-fs `snapshot.rs`).
    pub snapshots: Option<braid_fs::SnapshotConfig>,
    /// What macOS clients that negotiated Apple's extensions see.
    pub mac: MacShareOptions,
    /// CHANGE_NOTIFY is served (Samba's `change notify`); false answers
    /// NOT_IMPLEMENTED and clients poll instead.
    pub change_notify: bool,
    /// MS-SMB2 Share.IsCA: SMB2_SHARE_CAP_CONTINUOUS_AVAILABILITY, persistent
    /// handles kept in the state store (`smb/persistent.rs`), write-through
    /// writes.
    pub continuous_availability: bool,
    /// Changes made on the host by other processes are reported to
    /// CHANGE_NOTIFY and break directory leases (as Samba's `kernel change
    /// notify`), and host writes break the caching of files.
    pub notify_host_changes: bool,
    /// The protocols the share is served over (`protocols`).
    pub protocols: Protocols,
    /// What its NFS export allows (`nfs_clients`, `root_squash`, ...);
    /// used only when `protocols.nfs` and the server listens for NFS.
    pub nfs: crate::nfs::export::NfsExportOptions,
    /// Provisioned performance (`[share.qos]`, `qos.rs`); changing it
    /// (reload, admin API) keeps the clients connected.
    pub qos: braid_qos::Limits,
}

/// The protocols a share is served over. Without `smb` the share is in no
/// SMB share list and a TREE_CONNECT to it gets STATUS_BAD_NETWORK_NAME,
/// as for an unknown share; without `nfs` it is not exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protocols {
    pub smb: bool,
    pub nfs: bool,
}

impl Default for Protocols {
    fn default() -> Self {
        Protocols {
            smb: true,
            nfs: true,
        }
    }
}

impl ShareConfig {
    /// `path` served as `name` with every option at the default a
    /// `[[share]]` table gets (docs/CONFIG.md).
    pub fn with_defaults(name: &str, path: &std::path::Path) -> ShareConfig {
        ShareConfig {
            name: name.into(),
            path: path.to_path_buf(),
            encrypt: false,
            direct_writes: true,
            posix_locking: true,
            netatalk_locking: false,
            named_streams: true,
            access_based_enumeration: false,
            hide_dot_files: true,
            hide_files: Vec::new(),
            veto_files: Vec::new(),
            delete_veto_files: false,
            metadata_cache: true,
            create_modes: None,
            canonicalize_acl_flags: true,
            access: Default::default(),
            comment: String::new(),
            browseable: true,
            snapshots: None,
            mac: MacShareOptions::default(),
            change_notify: true,
            continuous_availability: false,
            notify_host_changes: true,
            protocols: Protocols::default(),
            nfs: Default::default(),
            qos: Default::default(),
        }
    }
}

/// Per-share behaviour for macOS clients (Samba's `fruit:` options).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacShareOptions {
    /// Answer the AAPL create context (Apple's SMB2 extensions) and keep
    /// the AfpInfo and resource fork streams as macOS expects.
    pub enabled: bool,
    /// A Time Machine destination: the volume reports full sync.
    pub time_machine: bool,
    /// Size reported for a Time Machine share, less what its backups
    /// (`*.sparsebundle`) use, so that Time Machine prunes old backups
    /// before the real disk fills.
    pub time_machine_max_size: Option<u64>,
    /// Report file id 0 to clients that negotiated AAPL (Samba's
    /// `fruit:zero_file_id`): macOS then does not rely on ids that a Linux
    /// file system may reuse.
    pub zero_file_id: bool,
    /// Where resource forks are kept (a named stream, or an AppleDouble
    /// `._NAME` sidecar as Samba's default `fruit:resource = file`), and
    /// what becomes of the sidecars macOS writes (braid-fs
    /// `resource_fork_file.rs`).
    pub apple_double: braid_fs::AppleDoubleOptions,
    /// With sidecars: `._*` names are neither listed nor opened by
    /// clients (Samba's `fruit:veto_appledouble`).
    pub veto_appledouble: bool,
    /// AFP_AfpInfo is served from Netatalk's metadata xattr (Samba's
    /// default `fruit:metadata = netatalk`; braid-fs `netatalk_meta.rs`).
    pub netatalk_metadata: bool,
}

impl Default for MacShareOptions {
    fn default() -> Self {
        MacShareOptions {
            enabled: true,
            time_machine: false,
            time_machine_max_size: None,
            zero_file_id: false,
            apple_double: braid_fs::AppleDoubleOptions::default(),
            veto_appledouble: true,
            netatalk_metadata: false,
        }
    }
}

/// The admin API's default address: loopback only, port 9445 (SMB's 445
/// behind a 9, as Braid's default SMB port 4445 puts a 4 before it).
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:9445";

/// One network interface reported by FSCTL_QUERY_NETWORK_INTERFACE_INFO
/// (MS-SMB2 2.2.32.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceConfig {
    pub address: IpAddr,
    pub if_index: u32,
    pub speed_mbps: u64,
    /// RSS_CAPABLE: clients may open several channels to this interface.
    pub rss: bool,
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: Vec<SocketAddr>,
    pub shares: Vec<ShareConfig>,
    /// Each user's own share (Samba's `[homes]`, `homes.rs`): a share
    /// whose path holds `%U`, served to each user under their name.
    pub homes: Option<ShareConfig>,
    /// MS-SMB2 3.3.1.5 RequireMessageSigning.
    pub signing_required: bool,
    /// Allow anonymous/guest sessions (off unless explicitly enabled).
    pub allow_guest: bool,
    /// Largest READ/WRITE payload offered in NEGOTIATE (large MTU).
    pub max_io_size: u32,
    pub max_transact_size: u32,
    /// Credits a connection may hold outstanding.
    pub max_credits: u16,
    /// Connections with no traffic for this long are closed.
    pub idle_timeout: Duration,
    /// A connection that has not finished NEGOTIATE+SESSION_SETUP in this time is closed.
    pub handshake_timeout: Duration,
    /// Delay before answering a failed logon, against password guessing.
    pub logon_failure_delay: Duration,
    pub netbios_name: String,
    /// Model string of the AAPL reply: macOS picks the server's Finder
    /// icon by it.
    pub macos_model: String,
    pub domain: String,
    /// Require SMB3 encryption for every session.
    pub encrypt: bool,
    /// Cipher preference, most preferred first (MS-SMB2 3.3.5.4).
    pub ciphers: Vec<braid_smb_proto::crypto::Cipher>,
    /// Offer SMB3 multichannel (CAP_MULTI_CHANNEL, session binding).
    pub multichannel: bool,
    /// Grant leases to SMB 2.1+ clients (CAP_LEASING, MS-SMB2 3.3.5.9.8).
    pub leases: bool,
    /// Collect the per-operation metrics and per-session workload the
    /// dashboard and the advisor read (`op_metrics.rs`, `workload.rs`).
    pub operation_metrics: bool,
    /// Channels a session may have (MS-SMB2 3.3.5.5.2; default 32); a bind
    /// beyond it gets STATUS_INSUFFICIENT_RESOURCES.
    pub max_channels: usize,
    /// Interfaces FSCTL_QUERY_NETWORK_INTERFACE_INFO reports; empty means
    /// auto-detect (see `interfaces.rs`).
    pub interfaces: Vec<InterfaceConfig>,
    /// Admin HTTP API (sessions, shares, Prometheus metrics); None: off.
    pub admin_listen: Option<SocketAddr>,
    /// The admin address is the built-in default rather than configured:
    /// if it cannot be bound the server runs without the admin API.
    pub admin_listen_is_default: bool,
    /// The admin API requires this bearer token (`admin_token_file`).
    pub admin_token: Option<std::sync::Arc<crate::admin_auth::AdminToken>>,
    /// Opens one session may hold at once (Samba's `max open files`); the
    /// next CREATE gets STATUS_TOO_MANY_OPENED_FILES. Braid is one process,
    /// so this keeps one client from taking every file descriptor.
    pub max_open_files: usize,
    /// Opens one client address may hold at once across all its sessions
    /// and connections, durable opens left behind included
    /// (`per_client.rs`); the next CREATE gets
    /// STATUS_TOO_MANY_OPENED_FILES.
    pub max_open_files_per_client: usize,
    /// Names every share's metadata cache holds together at most.
    pub metadata_cache_max_entries: u64,
    /// Memory every share's metadata cache holds together at most, bytes.
    pub metadata_cache_max_bytes: u64,
    /// Bounds of each share's kept fds (braid-fs `meta/fd_cache.rs`).
    pub metadata_cache_fds: braid_fs::meta::FdLimits,
    /// TCP connections served at once; a connection beyond it is closed
    /// as soon as it is accepted.
    pub max_connections: usize,
    /// TCP connections one client address may have at once; one beyond
    /// is closed as soon as it is accepted (`per_client.rs`).
    pub max_connections_per_client: usize,
    /// Requests of one connection that may wait answered STATUS_PENDING
    /// at once (change notifications, blocking locks, opens waiting on a
    /// break): an interim response gives the request's credit back, so
    /// credits do not bound them. One beyond gets
    /// STATUS_INSUFFICIENT_RESOURCES (MS-SMB2 3.3.4.2), as with Windows'
    /// AsynchronousCredits, whose default this is.
    pub max_async_requests: usize,
    /// Client addresses served at all (`hosts_allow`, `hosts_deny`); a
    /// connection from any other is closed as it is accepted.
    pub hosts: crate::host_access::HostRules,
    /// The lowest dialect NEGOTIATE accepts (Samba's `server min
    /// protocol`); default 2.0.2, every dialect.
    pub min_dialect: u16,
    /// Failed logons a client address may have in a minute before its
    /// logons are refused for the rest of it (`logon_throttle.rs`); 0: no
    /// limit.
    pub logon_failures_per_minute: u32,
    /// Addresses the NFSv4.1 server listens on; empty: NFS off.
    pub nfs_listen: Vec<SocketAddr>,
    /// The NFSv4 lease (RFC 8881 8.1, FATTR4_LEASE_TIME): a client that
    /// does not renew for this long loses its state. Default 90 s, as
    /// Linux's nfsd (nfs-ganesha's is 60 s).
    pub nfs_lease_time: Duration,
    /// The grace period after a restart (RFC 8881 8.4.2.1) in which
    /// clients reclaim their state; at least the lease (default: equal).
    pub nfs_grace_time: Duration,
    /// Where state that must outlive the process is kept (the NFS file
    /// handle key, NFS client records); None: nothing is kept, and NFS
    /// file handles go stale when the server restarts.
    pub state_dir: Option<PathBuf>,
    /// Where what must outlive the process (and the node) is kept:
    /// braid-fs's state store (`ServerState::store`).
    pub state_store: StateStoreConfig,
}

/// `state_store`: which implementation of braid-fs's `StateStore` the
/// server keeps its records in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StateStoreConfig {
    /// Files under `state_dir` (braid-fs `LocalStore`), or memory when
    /// there is none.
    #[default]
    Local,
    /// etcd (braid-etcd `EtcdStore`), which the nodes of a cluster share:
    /// keys `<prefix>/<space>/<key>`.
    Etcd {
        endpoints: Vec<String>,
        prefix: String,
    },
}

/// `nfs_lease_time`'s default (RFC 8881 8.1; Linux nfsd's 90 s).
pub const DEFAULT_NFS_LEASE_TIME: Duration = Duration::from_secs(90);

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: vec!["127.0.0.1:4445".parse().expect("static address")],
            shares: Vec::new(),
            homes: None,
            signing_required: true,
            allow_guest: false,
            max_io_size: 8 * 1024 * 1024,
            max_transact_size: 8 * 1024 * 1024,
            max_credits: 8192,
            idle_timeout: Duration::from_secs(15 * 60),
            handshake_timeout: Duration::from_secs(60),
            logon_failure_delay: Duration::from_millis(200),
            netbios_name: "BRAID".into(),
            // Samba's `fruit:model` default: a model macOS knows, so
            // Finder shows a generic server icon.
            macos_model: "MacSamba".into(),
            domain: "WORKGROUP".into(),
            encrypt: false,
            ciphers: vec![
                braid_smb_proto::crypto::Cipher::Aes128Gcm,
                braid_smb_proto::crypto::Cipher::Aes256Gcm,
                braid_smb_proto::crypto::Cipher::Aes128Ccm,
                braid_smb_proto::crypto::Cipher::Aes256Ccm,
            ],
            multichannel: true,
            leases: true,
            operation_metrics: true,
            max_channels: 32,
            interfaces: Vec::new(),
            admin_listen: Some(DEFAULT_ADMIN_LISTEN.parse().expect("static address")),
            admin_listen_is_default: true,
            admin_token: None,
            max_open_files: 16384,
            max_open_files_per_client: 65536,
            metadata_cache_max_entries: 2_000_000,
            metadata_cache_max_bytes: 256 << 20,
            metadata_cache_fds: Default::default(),
            max_connections: 16384,
            max_connections_per_client: 4096,
            max_async_requests: 512,
            logon_failures_per_minute: 30,
            min_dialect: braid_smb_proto::messages::negotiate::dialect::SMB202,
            hosts: Default::default(),
            nfs_listen: Vec::new(),
            nfs_lease_time: DEFAULT_NFS_LEASE_TIME,
            nfs_grace_time: DEFAULT_NFS_LEASE_TIME,
            state_dir: None,
            state_store: StateStoreConfig::Local,
        }
    }
}

impl ServerConfig {
    /// Frames larger than this are refused before anything is allocated:
    /// the largest WRITE plus headers, transform header and compound slack.
    pub fn max_frame_len(&self) -> usize {
        self.max_io_size as usize + 64 * 1024
    }
}
