//! `braid.toml`: the full configuration, validated into a ServerConfig.
//! Every error is one line naming the key and the fix.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Addresses to listen on, e.g. ["0.0.0.0:445"].
    pub listen: Option<Vec<String>>,
    /// Users database managed by `braid user add`.
    pub users_file: Option<PathBuf>,
    /// "required" (default) or "enabled".
    pub signing: Option<String>,
    /// Allow anonymous sessions (default false).
    pub allow_guest: Option<bool>,
    /// Largest READ/WRITE in bytes (64 KiB .. 8 MiB; default 8 MiB).
    pub max_io_size: Option<u32>,
    /// Credits a connection may hold (default 8192).
    pub max_credits: Option<u16>,
    /// Seconds of silence before a connection is closed (default 900).
    pub idle_timeout_secs: Option<u64>,
    /// NetBIOS name reported to clients (default BRAID).
    pub server_name: Option<String>,
    /// Require SMB3 encryption on every session (default false).
    pub encrypt: Option<bool>,
    /// Cipher preference, e.g. ["aes-128-gcm", "aes-256-gcm", "aes-128-ccm", "aes-256-ccm"].
    pub ciphers: Option<Vec<String>>,
    /// Admin HTTP API address (default "127.0.0.1:9445"); "off" or "" disables it.
    pub admin_listen: Option<String>,
    /// A 0600 file holding the bearer token the admin API then requires.
    pub admin_token_file: Option<PathBuf>,
    /// Offer SMB3 multichannel (default true).
    pub multichannel: Option<bool>,
    /// Grant SMB 2.1+ leases (default true).
    pub leases: Option<bool>,
    /// Collect per-operation metrics and per-session workload for the
    /// dashboard and the advisor (default true).
    pub operation_metrics: Option<bool>,
    /// Channels per session (default 32).
    pub max_channels: Option<u32>,
    /// Opens one session may hold (default 16384).
    pub max_open_files: Option<u32>,
    /// Opens one client address may hold across its sessions (default
    /// half the open-file limit).
    pub max_open_files_per_client: Option<u32>,
    /// TCP connections served at once (default 16384).
    pub max_connections: Option<u32>,
    /// TCP connections one client address may have (default a quarter of
    /// max_connections).
    pub max_connections_per_client: Option<u32>,
    /// Requests of one connection that may wait after an interim response
    /// (default 512).
    pub max_async_requests: Option<u32>,
    /// Names all shares' metadata caches hold together (default 2000000).
    pub metadata_cache_max_entries: Option<u64>,
    /// MiB all shares' metadata caches hold together (default 256).
    pub metadata_cache_max_mib: Option<u64>,
    /// Fds of closed files each share with a metadata cache keeps for
    /// the opens that follow (default 256; 0: none).
    pub metadata_cache_max_fds: Option<u64>,
    /// Milliseconds a kept fd waits unused before it is closed (default
    /// 1500).
    pub metadata_cache_fd_idle_ms: Option<u64>,
    /// Client addresses or networks served (default all), e.g.
    /// ["198.18.0.0/15", "127.0.0.1"].
    #[serde(default)]
    pub hosts_allow: Vec<String>,
    /// Client addresses or networks refused (default none).
    #[serde(default)]
    pub hosts_deny: Vec<String>,
    /// The lowest SMB dialect accepted: "2.0.2" (default), "2.1", "3.0",
    /// "3.0.2" or "3.1.1" (Samba's names, e.g. "SMB3_00", also).
    pub min_protocol: Option<String>,
    /// Failed logons of one user name from one client address per minute
    /// before that name's logons from there are refused for the rest of it
    /// (an address failing ten times as many over any names is refused
    /// altogether); default 30, 0: no limit.
    pub logon_failures_per_minute: Option<u32>,
    /// Model string shown to macOS clients, which pick the server's Finder
    /// icon by it (default "MacSamba").
    pub macos_model: Option<String>,
    /// Addresses the NFSv4.1 server listens on, e.g. ["0.0.0.0:2049"];
    /// none or []: no NFS (docs/CONFIG.md, "NFS exports").
    pub nfs_listen: Option<Vec<String>>,
    /// NFSv4 lease in seconds (default 90; 10 to 3600).
    pub nfs_lease_time_secs: Option<u64>,
    /// NFSv4 grace period after a restart, in seconds (default: the
    /// lease; at least the lease, at most 3600).
    pub nfs_grace_time_secs: Option<u64>,
    /// Directory for state that must outlive the process (the NFS file
    /// handle key, NFS client records); created (0700) if missing.
    pub state_dir: Option<PathBuf>,
    /// Where SMB durable and persistent opens (and what else must outlive
    /// the process) are kept: "local" (default: files under state_dir, or
    /// memory without one) or "etcd" (shared by a cluster's nodes).
    pub state_store: Option<String>,
    /// etcd's client URLs for state_store = "etcd", e.g.
    /// ["http://127.0.0.1:2379"].
    pub etcd_endpoints: Option<Vec<String>>,
    /// The prefix of Braid's etcd keys (default "/braid"): nodes of one
    /// cluster share it, other clusters on the same etcd use their own.
    pub etcd_prefix: Option<String>,
    /// Interfaces reported to multichannel clients; none: auto-detect.
    #[serde(default, rename = "interface")]
    pub interfaces: Vec<InterfaceEntry>,
    #[serde(default, rename = "share")]
    pub shares: Vec<ShareEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareEntry {
    pub name: String,
    pub path: PathBuf,
    /// Refuse unencrypted access to this share (default false).
    #[serde(default)]
    pub encrypt: bool,
    /// Large aligned writes bypass the page cache (default true).
    pub direct_writes: Option<bool>,
    /// Byte-range locks are kernel locks too (default true, as Samba).
    pub posix_locking: Option<bool>,
    /// Opens respect and take Netatalk's open and deny-mode locks
    /// (default false).
    #[serde(default)]
    pub netatalk_locking: bool,
    /// Named streams can be opened (default true).
    pub named_streams: Option<bool>,
    /// Listings leave out what the user may not read (default false).
    #[serde(default)]
    pub access_based_enumeration: bool,
    /// Report Unix dot files as hidden (default true, as Samba).
    pub hide_dot_files: Option<bool>,
    /// Name patterns reported as hidden (default none).
    #[serde(default)]
    pub hide_files: Vec<String>,
    /// Name patterns neither listed nor opened (default none).
    #[serde(default)]
    pub veto_files: Vec<String>,
    /// A directory holding only vetoed names can be deleted (default false).
    #[serde(default)]
    pub delete_veto_files: bool,
    /// Resolve names through the metadata cache (default true).
    pub metadata_cache: Option<bool>,
    /// Shown in share lists (default none).
    #[serde(default)]
    pub comment: String,
    /// Listed in share lists (default true).
    pub browseable: Option<bool>,
    /// Unix permission mask of new files, e.g. 0o644 (default: the umask).
    pub create_mask: Option<u32>,
    /// Unix permission mask of new directories, e.g. 0o755.
    pub directory_mask: Option<u32>,
    /// Canonicalise DACL inheritance bits as Windows does (default true).
    pub canonicalize_acl_flags: Option<bool>,
    /// Nobody may change anything in the share but `write_list` (default false).
    #[serde(default)]
    pub read_only: bool,
    /// Only these users may connect (default: every user).
    #[serde(default)]
    pub valid_users: Vec<String>,
    /// These users may only read, even where the share is writable.
    #[serde(default)]
    pub read_list: Vec<String>,
    /// These users may write, even where the share is read-only.
    #[serde(default)]
    pub write_list: Vec<String>,
    /// Client addresses or networks that may use the share (default all).
    #[serde(default)]
    pub hosts_allow: Vec<String>,
    /// Client addresses or networks that may not (default none).
    #[serde(default)]
    pub hosts_deny: Vec<String>,
    /// Guest and anonymous sessions may connect (default false).
    #[serde(default)]
    pub guest_ok: bool,
    /// The directory of the share's snapshots, served as previous
    /// versions: relative to the share's path, or absolute (default none).
    pub snapshot_dir: Option<PathBuf>,
    /// How snapshot directories are named (default "@GMT-%Y.%m.%d-%H.%M.%S").
    pub snapshot_format: Option<String>,
    /// Answer CHANGE_NOTIFY (default true); false: NOT_IMPLEMENTED.
    pub change_notify: Option<bool>,
    /// SMB continuous availability (default false): persistent handles,
    /// kept in the state store, and write-through writes.
    #[serde(default)]
    pub continuous_availability: bool,
    /// Report changes made on the host by other processes to change
    /// notifications and directory leases (default true).
    pub notify_host_changes: Option<bool>,
    /// Apple's SMB2 extensions and macOS metadata streams (default true).
    pub macos: Option<bool>,
    /// A Time Machine destination for macOS clients (default false).
    #[serde(default)]
    pub time_machine: bool,
    /// Size reported to macOS clients of a Time Machine share, in bytes or
    /// with a K/M/G/T suffix, e.g. "2T" (default: the file system's).
    pub time_machine_max_size: Option<SizeValue>,
    /// File ids read as 0 by clients that negotiated Apple's extensions
    /// (default false).
    #[serde(default)]
    pub macos_zero_file_id: bool,
    /// Where Finder metadata (AFP_AfpInfo) is kept: "stream" (default) or
    /// "netatalk" (the xattr `user.org.netatalk.Metadata`, Samba's
    /// `fruit:metadata = netatalk`).
    pub macos_metadata: Option<String>,
    /// Where resource forks are kept: "stream" (default) or "file" (an
    /// AppleDouble `._NAME` sidecar, Samba's `fruit:resource = file`).
    pub macos_resource: Option<String>,
    /// With sidecars, hide and refuse `._*` names (default true).
    pub macos_veto_appledouble: Option<bool>,
    /// With sidecars, drop macOS's blank resource forks when converting
    /// its sidecars (default false).
    #[serde(default)]
    pub macos_wipe_blank_resource_fork: bool,
    /// With sidecars, delete the sidecars conversion left empty (default
    /// false).
    #[serde(default)]
    pub macos_delete_empty_appledouble: bool,
    /// The protocols the share is served over: "smb", "nfs" (default
    /// both; `homes` only "smb").
    pub protocols: Option<Vec<String>>,
    /// NFS clients that may mount the share, each a network or address
    /// optionally followed by "ro" or "rw", e.g. ["10.0.0.0/8", "192.168.1.5 ro"]
    /// (default: every client the server admits, read-write).
    pub nfs_clients: Option<Vec<String>>,
    /// The NFS export is read-only (default: the share's `read_only`).
    pub nfs_read_only: Option<bool>,
    /// NFS callers' uid 0 and gid 0 are the anonymous ids (default true).
    pub root_squash: Option<bool>,
    /// Every NFS caller is the anonymous user (default false).
    pub all_squash: Option<bool>,
    /// The anonymous uid of NFS squashing and AUTH_NONE (default 65534).
    pub anon_uid: Option<i64>,
    /// The anonymous gid (default 65534).
    pub anon_gid: Option<i64>,
    /// NFS clients must use a source port below 1024 (default false).
    pub nfs_secure_port: Option<bool>,
    /// NFS security flavours accepted: "sys", "none" (default ["sys"]).
    pub nfs_sec: Option<Vec<String>>,
    /// Provisioned performance, a `[share.qos]` table (docs/CONFIG.md,
    /// "QoS"); default: no limits.
    pub qos: Option<braid_server::qos_admin::QosSettings>,
}

/// A size in the config: a number of bytes, or a string with a binary
/// suffix ("32K", "500G", "2T").
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SizeValue {
    Bytes(u64),
    Text(String),
}

impl SizeValue {
    /// Bytes, or None for text that is not a number with an optional
    /// K, M, G, T or P suffix (powers of 1024, as Samba reads sizes).
    pub fn bytes(&self) -> Option<u64> {
        match self {
            SizeValue::Bytes(n) => Some(*n),
            SizeValue::Text(t) => {
                let t = t.trim();
                let (digits, shift) = match t.chars().last()?.to_ascii_uppercase() {
                    'K' => (&t[..t.len() - 1], 10),
                    'M' => (&t[..t.len() - 1], 20),
                    'G' => (&t[..t.len() - 1], 30),
                    'T' => (&t[..t.len() - 1], 40),
                    'P' => (&t[..t.len() - 1], 50),
                    _ => (t, 0),
                };
                digits
                    .trim()
                    .parse::<u64>()
                    .ok()?
                    .checked_mul(1u64 << shift)
            }
        }
    }
}

impl ShareEntry {
    /// A share with every option at its default.
    pub fn new(name: &str, path: PathBuf) -> ShareEntry {
        ShareEntry {
            name: name.to_string(),
            path,
            encrypt: false,
            direct_writes: None,
            posix_locking: None,
            netatalk_locking: false,
            named_streams: None,
            access_based_enumeration: false,
            hide_dot_files: None,
            hide_files: Vec::new(),
            veto_files: Vec::new(),
            delete_veto_files: false,
            metadata_cache: None,
            comment: String::new(),
            browseable: None,
            create_mask: None,
            directory_mask: None,
            canonicalize_acl_flags: None,
            read_only: false,
            valid_users: Vec::new(),
            read_list: Vec::new(),
            write_list: Vec::new(),
            hosts_allow: Vec::new(),
            hosts_deny: Vec::new(),
            guest_ok: false,
            snapshot_dir: None,
            snapshot_format: None,
            change_notify: None,
            continuous_availability: false,
            notify_host_changes: None,
            macos: None,
            time_machine: false,
            time_machine_max_size: None,
            macos_zero_file_id: false,
            macos_resource: None,
            macos_veto_appledouble: None,
            macos_wipe_blank_resource_fork: false,
            macos_metadata: None,
            macos_delete_empty_appledouble: false,
            protocols: None,
            nfs_clients: None,
            nfs_read_only: None,
            root_squash: None,
            all_squash: None,
            anon_uid: None,
            anon_gid: None,
            nfs_secure_port: None,
            nfs_sec: None,
            qos: None,
        }
    }
}

/// `[[interface]]`: one address reported by FSCTL_QUERY_NETWORK_INTERFACE_INFO.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterfaceEntry {
    pub address: String,
    pub if_index: u32,
    /// Link speed in Mbit/s (default 10000).
    pub speed_mbps: Option<u64>,
    /// RSS-capable (default true).
    pub rss: Option<bool>,
}

/// Validate an `[[interface]]` table into the server's form.
pub fn parse_interface(e: &InterfaceEntry) -> Result<braid_server::InterfaceConfig, String> {
    let address = e.address.parse::<std::net::IpAddr>().map_err(|_| {
        format!(
            "interface address = '{}': not an IP address such as 127.0.0.2 or fd00::1",
            e.address
        )
    })?;
    if e.if_index == 0 {
        return Err(format!(
            "interface {}: if_index = 0; use a non-zero interface index",
            e.address
        ));
    }
    let speed_mbps = e.speed_mbps.unwrap_or(10_000);
    if speed_mbps == 0 {
        return Err(format!(
            "interface {}: speed_mbps = 0; clients ignore interfaces without a speed",
            e.address
        ));
    }
    Ok(braid_server::InterfaceConfig {
        address,
        if_index: e.if_index,
        speed_mbps,
        rss: e.rss.unwrap_or(true),
    })
}

pub fn load(path: &Path) -> Result<FileConfig, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("config {}: cannot read: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("config {}: {e}", path.display()))
}

pub fn parse(text: &str) -> Result<FileConfig, String> {
    toml::from_str::<FileConfig>(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        let msg = e.message().replace('\n', " ");
        match line {
            Some(l) => format!("line {l}: {msg}"),
            None => msg,
        }
    })
}

pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.parse::<SocketAddr>().map_err(|_| {
        format!("listen: '{s}' is not an address:port such as 127.0.0.1:4445 or [::1]:445")
    })
}

/// One `nfs_listen` entry or `--nfs-listen` flag.
pub fn parse_nfs_listen(s: &str) -> Result<SocketAddr, String> {
    s.trim().parse::<SocketAddr>().map_err(|_| {
        format!(
            "nfs_listen: '{s}' is not an address:port such as 127.0.0.1:20490 or [::]:2049 \
             (--nfs-listen off turns NFS off)"
        )
    })
}

/// `nfs_lease_time_secs` and `nfs_grace_time_secs`: the lease (default
/// 90 s) and the grace period (default the lease, and never shorter: a
/// client must be able to renew once within it to reclaim its state, RFC
/// 8881 8.4.2.1).
pub fn nfs_times(
    lease: Option<u64>,
    grace: Option<u64>,
) -> Result<(std::time::Duration, std::time::Duration), String> {
    let lease = lease.unwrap_or(braid_server::config::DEFAULT_NFS_LEASE_TIME.as_secs());
    if !(10..=3600).contains(&lease) {
        return Err(format!(
            "nfs_lease_time_secs = {lease}: use a value from 10 to 3600 (default 90)"
        ));
    }
    let grace = grace.unwrap_or(lease);
    if !(lease..=3600).contains(&grace) {
        return Err(format!(
            "nfs_grace_time_secs = {grace}: use a value from the lease time ({lease}) to 3600, \
             so that clients have a lease's time to reclaim their state"
        ));
    }
    Ok((
        std::time::Duration::from_secs(lease),
        std::time::Duration::from_secs(grace),
    ))
}

/// `state_dir`: made (mode 0700) if missing; its parent must exist.
pub fn prepare_state_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!(
            "state_dir = {}: not a directory; give a directory for Braid's state, e.g. /var/lib/braid",
            dir.display()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(|e| {
                format!(
                    "state_dir = {}: cannot create it: {e}; create it (mode 0700) or fix the path",
                    dir.display()
                )
            }),
        Err(e) => Err(format!("state_dir = {}: {e}", dir.display())),
    }
}

/// `state_store`, `etcd_endpoints` and `etcd_prefix`.
pub fn state_store(file: &FileConfig) -> Result<braid_server::config::StateStoreConfig, String> {
    use braid_server::config::StateStoreConfig;
    let kind = file.state_store.as_deref().unwrap_or("local");
    match kind {
        "local" => {
            if file.etcd_endpoints.is_some() || file.etcd_prefix.is_some() {
                let key = if file.etcd_endpoints.is_some() {
                    "etcd_endpoints"
                } else {
                    "etcd_prefix"
                };
                return Err(format!(
                    "{key} is set but state_store is \"local\": add state_store = \"etcd\" \
                     or remove {key}"
                ));
            }
            Ok(StateStoreConfig::Local)
        }
        "etcd" => {
            let endpoints = match &file.etcd_endpoints {
                Some(list) if !list.is_empty() => list
                    .iter()
                    .map(|e| {
                        braid_etcd::endpoint_url(e).map_err(|m| format!("etcd_endpoints: {m}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                _ => {
                    return Err("state_store = \"etcd\" needs etcd_endpoints, e.g. \
                                etcd_endpoints = [\"http://127.0.0.1:2379\"]"
                        .into())
                }
            };
            let prefix = file
                .etcd_prefix
                .clone()
                .unwrap_or_else(|| braid_etcd::DEFAULT_PREFIX.into());
            braid_etcd::check_prefix(&prefix).map_err(|m| format!("etcd_prefix = {m}"))?;
            Ok(StateStoreConfig::Etcd { endpoints, prefix })
        }
        other => Err(format!(
            "state_store = \"{other}\": use \"local\" (files under state_dir, the default) \
             or \"etcd\" (with etcd_endpoints)"
        )),
    }
}

/// The share's `protocols` (default both; `homes`, each user's own share,
/// only SMB: an NFS client mounts with no user to pick the home by).
pub fn share_protocols(
    s: &ShareEntry,
    is_homes: bool,
) -> Result<braid_server::config::Protocols, String> {
    let Some(list) = &s.protocols else {
        return Ok(braid_server::config::Protocols {
            smb: true,
            nfs: !is_homes,
        });
    };
    if list.is_empty() {
        return Err(format!(
            "share '{}': protocols = []: list at least one of \"smb\" and \"nfs\", \
             or remove the share",
            s.name
        ));
    }
    let mut p = braid_server::config::Protocols {
        smb: false,
        nfs: false,
    };
    for name in list {
        match name.trim().to_ascii_lowercase().as_str() {
            "smb" => p.smb = true,
            "nfs" => p.nfs = true,
            _ => {
                return Err(format!(
                    "share '{}': protocols: '{name}' is not a protocol; use \"smb\" and/or \"nfs\"",
                    s.name
                ))
            }
        }
    }
    if p.nfs && is_homes {
        return Err(format!(
            "share '{}': each user's own share (a path with %U) is served over SMB only; \
             remove \"nfs\" from protocols",
            s.name
        ));
    }
    Ok(p)
}

/// The export keys a share without NFS must not have.
fn nfs_keys_set(s: &ShareEntry) -> Vec<&'static str> {
    [
        ("nfs_clients", s.nfs_clients.is_some()),
        ("nfs_read_only", s.nfs_read_only.is_some()),
        ("root_squash", s.root_squash.is_some()),
        ("all_squash", s.all_squash.is_some()),
        ("anon_uid", s.anon_uid.is_some()),
        ("anon_gid", s.anon_gid.is_some()),
        ("nfs_secure_port", s.nfs_secure_port.is_some()),
        ("nfs_sec", s.nfs_sec.is_some()),
    ]
    .into_iter()
    .filter(|(_, set)| *set)
    .map(|(k, _)| k)
    .collect()
}

/// One `nfs_clients` entry: "NETWORK", "NETWORK ro" or "NETWORK rw".
pub fn parse_nfs_client(s: &str) -> Result<braid_server::nfs::export::ClientRule, String> {
    let mut words = s.split_whitespace();
    let Some(net) = words.next() else {
        return Err(format!(
            "'{s}' is empty; give a network or address, optionally followed by ro or rw, \
             e.g. \"10.0.0.0/8\" or \"192.168.1.5 ro\""
        ));
    };
    let net = braid_server::host_access::parse_net(net)?;
    let read_only = match (words.next(), words.next()) {
        (None, _) | (Some("rw"), None) => false,
        (Some("ro"), None) => true,
        _ => {
            return Err(format!(
                "'{s}': after the network only \"ro\" or \"rw\" may follow, \
                 e.g. \"192.168.1.5 ro\""
            ))
        }
    };
    Ok(braid_server::nfs::export::ClientRule { net, read_only })
}

/// `anon_uid` / `anon_gid`: an unprivileged id that fits 32 bits and is
/// not (uid_t)-1.
fn anon_id(share: &str, key: &str, v: Option<i64>) -> Result<u32, String> {
    let Some(v) = v else {
        return Ok(braid_server::nfs::export::ANON_ID);
    };
    match u32::try_from(v) {
        Ok(id) if id != 0 && id != u32::MAX => Ok(id),
        _ => Err(format!(
            "share '{share}': {key} = {v}: use an unprivileged id from 1 to 4294967294, \
             e.g. 65534 (nobody)"
        )),
    }
}

/// The share's NFS export options, checked. `protocols` is the share's
/// (`share_protocols`); a share not exported over NFS may have none.
pub fn nfs_export(
    s: &ShareEntry,
    protocols: braid_server::config::Protocols,
) -> Result<braid_server::nfs::export::NfsExportOptions, String> {
    use braid_server::nfs::export::{NfsExportOptions, SecFlavor, Squash};
    if !protocols.nfs {
        let set = nfs_keys_set(s);
        if !set.is_empty() {
            return Err(format!(
                "share '{}': {} apply to NFS exports, and the share is not one; \
                 add \"nfs\" to protocols or remove them",
                s.name,
                set.join(", ")
            ));
        }
        return Ok(NfsExportOptions::default());
    }
    let clients = s
        .nfs_clients
        .iter()
        .flatten()
        .map(|c| parse_nfs_client(c).map_err(|e| format!("share '{}': nfs_clients: {e}", s.name)))
        .collect::<Result<Vec<_>, _>>()?;
    let sec = match &s.nfs_sec {
        None => vec![SecFlavor::Sys],
        Some(list) if list.is_empty() => {
            return Err(format!(
                "share '{}': nfs_sec = []: list at least one flavour, e.g. [\"sys\"]",
                s.name
            ))
        }
        Some(list) => {
            let mut sec = Vec::new();
            for f in list {
                let flavor = match f.trim().to_ascii_lowercase().as_str() {
                    "sys" => SecFlavor::Sys,
                    "none" => SecFlavor::None,
                    "krb5" | "krb5i" | "krb5p" => {
                        return Err(format!(
                            "share '{}': nfs_sec: '{f}' is not supported yet; use \"sys\"",
                            s.name
                        ))
                    }
                    _ => {
                        return Err(format!(
                            "share '{}': nfs_sec: '{f}' is not a security flavour; \
                             use \"sys\" (AUTH_SYS) or \"none\" (AUTH_NONE)",
                            s.name
                        ))
                    }
                };
                if !sec.contains(&flavor) {
                    sec.push(flavor);
                }
            }
            sec
        }
    };
    // all_squash squashes root too, whatever root_squash says.
    let squash = if s.all_squash.unwrap_or(false) {
        Squash::All
    } else if s.root_squash.unwrap_or(true) {
        Squash::Root
    } else {
        Squash::None
    };
    Ok(NfsExportOptions {
        clients,
        read_only: s.nfs_read_only.unwrap_or(s.read_only),
        squash,
        anon_uid: anon_id(&s.name, "anon_uid", s.anon_uid)?,
        anon_gid: anon_id(&s.name, "anon_gid", s.anon_gid)?,
        secure_port: s.nfs_secure_port.unwrap_or(false),
        sec,
    })
}

/// `admin_listen`: an address, or "off"/"" for no admin API.
pub fn parse_admin_listen(s: &str) -> Result<Option<SocketAddr>, String> {
    let t = s.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    t.parse::<SocketAddr>().map(Some).map_err(|_| {
        format!("admin_listen: '{s}' is not an address:port such as 127.0.0.1:9445, or \"off\"")
    })
}

/// `NAME=PATH` from `--share`.
pub fn parse_share_flag(s: &str) -> Result<ShareEntry, String> {
    match s.split_once('=') {
        Some((n, p)) if !n.is_empty() && !p.is_empty() => Ok(ShareEntry::new(n, PathBuf::from(p))),
        _ => Err(format!(
            "--share '{s}': expected NAME=PATH, e.g. --share data=/srv/data"
        )),
    }
}

/// `NAME:PASSWORD` from `--user`.
pub fn parse_user_flag(s: &str) -> Result<(String, String), String> {
    match s.split_once(':') {
        Some((n, p)) if !n.is_empty() => Ok((n.to_string(), p.to_string())),
        _ => Err("--user: expected NAME:PASSWORD, e.g. --user alice:secret".to_string()),
    }
}

/// `hosts_allow` and `hosts_deny`; `prefix` names where they were given.
pub fn parse_hosts(
    prefix: &str,
    allow: &[String],
    deny: &[String],
) -> Result<braid_server::host_access::HostRules, String> {
    let parse = |key: &str, list: &[String]| {
        list.iter()
            .map(|s| {
                braid_server::host_access::parse_net(s).map_err(|e| format!("{prefix}{key}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(braid_server::host_access::HostRules {
        allow: parse("hosts_allow", allow)?,
        deny: parse("hosts_deny", deny)?,
    })
}

/// `min_protocol`: a dialect, as SMB writes it or as Samba names it.
pub fn parse_min_protocol(s: &str) -> Result<u16, String> {
    use braid_smb_proto::messages::negotiate::dialect;
    Ok(match s.trim().to_ascii_uppercase().as_str() {
        "2.0.2" | "2.02" | "SMB2" | "SMB2_02" => dialect::SMB202,
        "2.1" | "2.10" | "SMB2_10" => dialect::SMB210,
        "3.0" | "3.00" | "SMB3" | "SMB3_00" => dialect::SMB300,
        "3.0.2" | "3.02" | "SMB3_02" => dialect::SMB302,
        "3.1.1" | "3.11" | "SMB3_11" => dialect::SMB311,
        _ => {
            return Err(format!(
                "min_protocol = '{s}': use \"2.0.2\", \"2.1\", \"3.0\", \"3.0.2\" or \"3.1.1\""
            ))
        }
    })
}

pub fn parse_cipher(s: &str) -> Result<braid_smb_proto::crypto::Cipher, String> {
    use braid_smb_proto::crypto::Cipher;
    Ok(match s.to_ascii_lowercase().as_str() {
        "aes-128-gcm" => Cipher::Aes128Gcm,
        "aes-128-ccm" => Cipher::Aes128Ccm,
        "aes-256-gcm" => Cipher::Aes256Gcm,
        "aes-256-ccm" => Cipher::Aes256Ccm,
        _ => {
            return Err(format!(
                "ciphers: '{s}' is not a cipher; use aes-128-gcm, aes-256-gcm, aes-128-ccm or aes-256-ccm"
            ))
        }
    })
}

pub fn validate_share_name(name: &str) -> Result<(), String> {
    let bad = name.is_empty()
        || name.len() > 80
        || name.eq_ignore_ascii_case("IPC$")
        || name
            .chars()
            .any(|c| c.is_control() || "\\/:*?\"<>|[]+=;,".contains(c));
    if bad {
        return Err(format!(
            "share name '{name}' is invalid: use letters, digits, '-', '_', '.', '$' (at most 80 characters, not IPC$)"
        ));
    }
    Ok(())
}

/// The share's macOS options, checked.
pub fn mac_config(s: &ShareEntry) -> Result<braid_server::config::MacShareOptions, String> {
    let time_machine_max_size = match &s.time_machine_max_size {
        None => None,
        Some(v) => {
            let Some(bytes) = v.bytes().filter(|b| *b > 0) else {
                return Err(format!(
                    "share '{}': time_machine_max_size = {v:?}: give a size in bytes or with a \
                     K, M, G or T suffix, e.g. \"2T\"",
                    s.name
                ));
            };
            if !s.time_machine {
                return Err(format!(
                    "share '{}': time_machine_max_size is set but time_machine is not; \
                     add time_machine = true",
                    s.name
                ));
            }
            Some(bytes)
        }
    };
    let enabled = s.macos.unwrap_or(true);
    if !enabled
        && (s.time_machine
            || s.macos_zero_file_id
            || s.macos_resource.is_some()
            || s.macos_metadata.is_some())
    {
        return Err(format!(
            "share '{}': time_machine, macos_zero_file_id, macos_metadata and macos_resource \
             need macos; remove macos = false or those keys",
            s.name
        ));
    }
    let in_sidecar = match s.macos_resource.as_deref() {
        None | Some("stream") => false,
        Some("file") => true,
        Some(other) => {
            return Err(format!(
                "share '{}': macos_resource = {other:?}: use \"stream\" (a named stream, the \
                 default) or \"file\" (AppleDouble ._ files)",
                s.name
            ))
        }
    };
    let netatalk_metadata = match s.macos_metadata.as_deref() {
        None | Some("stream") => false,
        Some("netatalk") => true,
        Some(other) => {
            return Err(format!(
                "share '{}': macos_metadata = {other:?}: use \"stream\" (a named stream, the \
                 default) or \"netatalk\" (Netatalk's metadata xattr, as Samba keeps it)",
                s.name
            ))
        }
    };
    let sidecar_keys = s.macos_veto_appledouble.is_some()
        || s.macos_wipe_blank_resource_fork
        || s.macos_delete_empty_appledouble;
    if sidecar_keys && !in_sidecar {
        return Err(format!(
            "share '{}': macos_veto_appledouble, macos_wipe_blank_resource_fork and \
             macos_delete_empty_appledouble apply to AppleDouble files; add \
             macos_resource = \"file\" or remove them",
            s.name
        ));
    }
    Ok(braid_server::config::MacShareOptions {
        enabled,
        time_machine: s.time_machine,
        time_machine_max_size,
        zero_file_id: s.macos_zero_file_id,
        apple_double: braid_fs::AppleDoubleOptions {
            resource_fork_in_sidecar: in_sidecar,
            wipe_blank_resource_fork: s.macos_wipe_blank_resource_fork,
            delete_empty_sidecars: s.macos_delete_empty_appledouble,
        },
        veto_appledouble: s.macos_veto_appledouble.unwrap_or(true),
        netatalk_metadata,
    })
}

/// The share's previous versions (`snapshot_dir`, `snapshot_format`), or a
/// configuration error naming the key and the fix.
pub fn snapshot_config(s: &ShareEntry) -> Result<Option<braid_fs::SnapshotConfig>, String> {
    let Some(dir) = &s.snapshot_dir else {
        if s.snapshot_format.is_some() {
            return Err(format!(
                "share '{}': snapshot_format is set but snapshot_dir is not; \
                 give the directory holding the snapshots, e.g. snapshot_dir = \".snapshots\"",
                s.name
            ));
        }
        return Ok(None);
    };
    if dir
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!(
            "share '{}': snapshot_dir = {}: \"..\" is not allowed; give a path inside the share \
             (e.g. \".snapshots\") or an absolute path",
            s.name,
            dir.display()
        ));
    }
    let config = braid_fs::SnapshotConfig {
        dir: dir.clone(),
        format: s
            .snapshot_format
            .clone()
            .unwrap_or_else(|| braid_fs::snapshot::DEFAULT_FORMAT.to_string()),
    };
    config.validate().map_err(|why| {
        format!(
            "share '{}': snapshot_format = \"{}\": {why}; e.g. \"{}\"",
            s.name,
            config.format,
            braid_fs::snapshot::DEFAULT_FORMAT
        )
    })?;
    Ok(Some(config))
}

/// A share's `[share.qos]` table as limits; one line naming the share and
/// the key when it is wrong.
pub fn qos_limits(s: &ShareEntry) -> Result<braid_qos::Limits, String> {
    match &s.qos {
        Some(q) => q.limits().map_err(|e| format!("share '{}': {e}", s.name)),
        None => Ok(braid_qos::Limits::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes() {
        let t = |x: &str| SizeValue::Text(x.into()).bytes();
        assert_eq!(t("32K"), Some(32 << 10));
        assert_eq!(t("2t"), Some(2 << 40));
        assert_eq!(t(" 500 G "), Some(500 << 30));
        assert_eq!(t("4096"), Some(4096));
        assert_eq!(SizeValue::Bytes(7).bytes(), Some(7));
        assert_eq!(t("2X"), None);
        assert_eq!(t("K"), None);
        assert_eq!(t(""), None);
        assert_eq!(t("99999999999T"), None);
    }

    #[test]
    fn time_machine_size_needs_time_machine() {
        let mut s = ShareEntry::new("tm", PathBuf::from("/tmp"));
        s.time_machine_max_size = Some(SizeValue::Text("1T".into()));
        let err = mac_config(&s).unwrap_err();
        assert!(err.contains("time_machine = true"), "{err}");
        s.time_machine = true;
        assert_eq!(mac_config(&s).unwrap().time_machine_max_size, Some(1 << 40));
        s.time_machine_max_size = Some(SizeValue::Text("lots".into()));
        assert!(mac_config(&s)
            .unwrap_err()
            .contains("time_machine_max_size"));
    }

    #[test]
    fn macos_resource_file_and_its_options() {
        let mut s = ShareEntry::new("mac", PathBuf::from("/tmp"));
        s.macos_delete_empty_appledouble = true;
        let err = mac_config(&s).unwrap_err();
        assert!(err.contains("macos_resource = \"file\""), "{err}");
        s.macos_resource = Some("file".into());
        let m = mac_config(&s).unwrap();
        assert!(m.apple_double.resource_fork_in_sidecar);
        assert!(m.apple_double.delete_empty_sidecars);
        assert!(m.veto_appledouble);
        s.macos_resource = Some("xattr".into());
        let err = mac_config(&s).unwrap_err();
        assert!(err.contains("macos_resource = \"xattr\""), "{err}");
        s.macos_resource = Some("file".into());
        s.macos = Some(false);
        assert!(mac_config(&s).unwrap_err().contains("need macos"));
    }

    #[test]
    fn macos_metadata_stream_or_netatalk() {
        let mut s = ShareEntry::new("mac", PathBuf::from("/tmp"));
        assert!(!mac_config(&s).unwrap().netatalk_metadata);
        s.macos_metadata = Some("netatalk".into());
        assert!(mac_config(&s).unwrap().netatalk_metadata);
        s.macos_metadata = Some("xattr".into());
        let err = mac_config(&s).unwrap_err();
        assert!(err.contains("macos_metadata = \"xattr\""), "{err}");
        s.macos_metadata = Some("netatalk".into());
        s.macos = Some(false);
        assert!(mac_config(&s).unwrap_err().contains("need macos"));
    }

    #[test]
    fn min_protocol_names() {
        use braid_smb_proto::messages::negotiate::dialect;
        for (s, d) in [
            ("2.0.2", dialect::SMB202),
            ("SMB2_10", dialect::SMB210),
            ("smb3", dialect::SMB300),
            ("3.0.2", dialect::SMB302),
            ("3.1.1", dialect::SMB311),
        ] {
            assert_eq!(parse_min_protocol(s), Ok(d), "{s}");
        }
        let e = parse_min_protocol("NT1").unwrap_err();
        assert!(e.starts_with("min_protocol = 'NT1': use"), "{e}");
    }

    #[test]
    fn unknown_key_names_the_key_and_line() {
        let e = parse("listen = [\"127.0.0.1:4445\"]\nbogus = 1\n").unwrap_err();
        assert!(e.contains("bogus"), "{e}");
        assert!(e.starts_with("line 2"), "{e}");
    }

    #[test]
    fn snapshot_settings() {
        let share = |extra: &str| {
            let c = parse(&format!(
                "[[share]]\nname = \"d\"\npath = \"/srv\"\n{extra}"
            ))
            .unwrap();
            snapshot_config(&c.shares[0])
        };
        assert_eq!(share("").unwrap(), None);
        let c = share("snapshot_dir = \".snapshots\"\n").unwrap().unwrap();
        assert_eq!(c.format, braid_fs::snapshot::DEFAULT_FORMAT);
        let c =
            share("snapshot_dir = \"/tank/.zfs/snapshot\"\nsnapshot_format = \"auto-%Y-%m-%d\"\n");
        assert_eq!(c.unwrap().unwrap().format, "auto-%Y-%m-%d");
        for (bad, names) in [
            ("snapshot_format = \"%Y\"\n", "snapshot_dir"),
            ("snapshot_dir = \"../x\"\n", "\"..\""),
            ("snapshot_dir = \"s\"\nsnapshot_format = \"%d.%m\"\n", "%Y"),
        ] {
            let e = share(bad).unwrap_err();
            assert!(e.contains(names) && !e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn share_qos_tables() {
        let f = parse(
            "[[share]]\nname = \"a\"\npath = \"/a\"\n[share.qos]\niops = 500\nburst_iops = 900\negress_mibps = 20\n\
             [[share]]\nname = \"b\"\npath = \"/b\"\nqos = { provisioned_gib = 100 }\n\
             [[share]]\nname = \"c\"\npath = \"/c\"\n",
        )
        .unwrap();
        let a = qos_limits(&f.shares[0]).unwrap();
        assert_eq!(
            (a.iops, a.burst_iops, a.egress_mibps),
            (Some(500), Some(900), Some(20.0))
        );
        assert_eq!(a.credit_capacity(), 400.0 * 3600.0);
        assert_eq!(qos_limits(&f.shares[1]).unwrap().iops, Some(3100));
        assert!(!qos_limits(&f.shares[2]).unwrap().enabled());
        let bad = parse(
            "[[share]]\nname = \"x\"\npath = \"/x\"\n[share.qos]\niops = 5\nburst_iops = 1\n",
        )
        .unwrap();
        let e = qos_limits(&bad.shares[0]).unwrap_err();
        assert!(
            e.starts_with("share 'x': qos.burst_iops = 1 is below") && !e.contains('\n'),
            "{e}"
        );
        let e =
            parse("[[share]]\nname = \"x\"\npath = \"/x\"\n[share.qos]\niopz = 5\n").unwrap_err();
        assert!(e.contains("iopz"), "{e}");
    }

    #[test]
    fn shares_parse() {
        let c = parse("[[share]]\nname = \"data\"\npath = \"/srv\"\n").unwrap();
        assert_eq!(c.shares.len(), 1);
        assert_eq!(c.shares[0].name, "data");
        assert_eq!(c.shares[0].macos, None);
        let c = parse("[[share]]\nname = \"d\"\npath = \"/srv\"\nmacos = false\n").unwrap();
        assert_eq!(c.shares[0].macos, Some(false));
    }

    #[test]
    fn interfaces_parse() {
        let c = parse(
            "multichannel = true\nmax_channels = 4\n[[interface]]\naddress = \"127.0.0.2\"\nif_index = 2\nspeed_mbps = 1000\nrss = false\n",
        )
        .unwrap();
        assert_eq!(c.max_channels, Some(4));
        let i = parse_interface(&c.interfaces[0]).unwrap();
        assert_eq!(i.if_index, 2);
        assert_eq!(i.speed_mbps, 1000);
        assert!(!i.rss);
        assert!(parse("[[interface]]\naddress = \"x\"\nif_index = 1\n")
            .map(|c| parse_interface(&c.interfaces[0]).is_err())
            .unwrap());
    }

    /// The first `[[share]]` of `extra` (keys of a share at /srv named d)
    /// as served: its protocols and NFS export options.
    fn nfs_share(
        extra: &str,
    ) -> Result<
        (
            braid_server::config::Protocols,
            braid_server::nfs::export::NfsExportOptions,
        ),
        String,
    > {
        let c = parse(&format!(
            "[[share]]\nname = \"d\"\npath = \"/srv\"\n{extra}"
        ))?;
        let p = share_protocols(&c.shares[0], false)?;
        Ok((p, nfs_export(&c.shares[0], p)?))
    }

    #[test]
    fn nfs_export_keys_and_their_defaults() {
        use braid_server::nfs::export::{NfsExportOptions, SecFlavor, Squash};
        let (p, o) = nfs_share("").unwrap();
        assert!(p.smb && p.nfs);
        assert_eq!(o, NfsExportOptions::default());
        let (p, o) = nfs_share(
            "protocols = [\"NFS\"]\nnfs_clients = [\"10.0.0.0/8\", \" 192.168.1.5  ro \", \"fd00::/8 rw\"]\n\
             root_squash = false\nanon_uid = 1500\nanon_gid = 1501\nnfs_secure_port = true\n\
             nfs_sec = [\"sys\", \"none\", \"sys\"]\n",
        )
        .unwrap();
        assert!(!p.smb && p.nfs);
        let clients: Vec<(String, bool)> = o
            .clients
            .iter()
            .map(|c| (c.net.to_string(), c.read_only))
            .collect();
        assert_eq!(
            clients,
            [
                ("10.0.0.0/8".to_string(), false),
                ("192.168.1.5/32".to_string(), true),
                ("fd00::/8".to_string(), false)
            ]
        );
        assert_eq!(o.squash, Squash::None);
        assert_eq!((o.anon_uid, o.anon_gid), (1500, 1501));
        assert!(o.secure_port && !o.read_only);
        assert_eq!(o.sec, [SecFlavor::Sys, SecFlavor::None]);
        // all_squash squashes root too, whatever root_squash says.
        let (_, o) = nfs_share("all_squash = true\nroot_squash = false\n").unwrap();
        assert_eq!(o.squash, Squash::All);
        // A read-only share is read-only over NFS too, unless told otherwise.
        assert!(nfs_share("read_only = true\n").unwrap().1.read_only);
        let (_, o) = nfs_share("read_only = true\nnfs_read_only = false\n").unwrap();
        assert!(!o.read_only);
        assert!(nfs_share("nfs_read_only = true\n").unwrap().1.read_only);
        let (p, _) = nfs_share("protocols = [\"smb\"]\n").unwrap();
        assert!(p.smb && !p.nfs);
    }

    #[test]
    fn nonsense_nfs_keys_are_refused_in_one_line() {
        for (extra, says) in [
            ("protocols = []\n", "protocols = []: list at least one of"),
            (
                "protocols = [\"afp\"]\n",
                "protocols: 'afp' is not a protocol",
            ),
            ("nfs_sec = []\n", "nfs_sec = []: list at least one flavour"),
            (
                "nfs_sec = [\"krb5\"]\n",
                "nfs_sec: 'krb5' is not supported yet; use \"sys\"",
            ),
            ("nfs_sec = [\"krb5p\"]\n", "not supported yet"),
            (
                "nfs_sec = [\"unix\"]\n",
                "nfs_sec: 'unix' is not a security flavour",
            ),
            (
                "nfs_clients = [\"10.0.0.0/33\"]\n",
                "nfs_clients: '10.0.0.0/33' is not an address",
            ),
            (
                "nfs_clients = [\"*\"]\n",
                "nfs_clients: '*' is not an address",
            ),
            (
                "nfs_clients = [\"10.0.0.0/8 sync\"]\n",
                "only \"ro\" or \"rw\"",
            ),
            (
                "nfs_clients = [\"10.0.0.0/8 ro rw\"]\n",
                "only \"ro\" or \"rw\"",
            ),
            ("nfs_clients = [\"\"]\n", "nfs_clients: '' is empty"),
            ("anon_uid = -1\n", "anon_uid = -1: use an unprivileged id"),
            ("anon_uid = 4294967296\n", "anon_uid = 4294967296"),
            ("anon_uid = 4294967295\n", "anon_uid = 4294967295"),
            ("anon_gid = 0\n", "anon_gid = 0"),
            (
                "protocols = [\"smb\"]\nnfs_clients = [\"10.0.0.0/8\"]\nroot_squash = false\n",
                "nfs_clients, root_squash apply to NFS exports, and the share is not one; \
                 add \"nfs\" to protocols",
            ),
        ] {
            let e = nfs_share(extra).unwrap_err();
            assert!(e.contains(says) && !e.contains('\n'), "{extra}: {e}");
            assert!(e.starts_with("share 'd': "), "{e}");
        }
        // Not a key of a share, nor of the top level.
        assert!(nfs_share("nfs_squash = true\n")
            .unwrap_err()
            .contains("nfs_squash"));
    }

    #[test]
    fn home_shares_are_smb_only() {
        let mut s = ShareEntry::new("homes", PathBuf::from("/home/%U"));
        let p = share_protocols(&s, true).unwrap();
        assert!(p.smb && !p.nfs);
        s.protocols = Some(vec!["smb".into(), "nfs".into()]);
        let e = share_protocols(&s, true).unwrap_err();
        assert!(e.contains("remove \"nfs\" from protocols"), "{e}");
    }

    #[test]
    fn nfs_server_keys() {
        let c = parse(
            "nfs_listen = [\"127.0.0.1:20490\", \"[::1]:2049\"]\nnfs_lease_time_secs = 60\n\
             nfs_grace_time_secs = 120\nstate_dir = \"/var/lib/braid\"\n",
        )
        .unwrap();
        assert_eq!(c.nfs_listen.as_ref().unwrap().len(), 2);
        assert_eq!(
            parse_nfs_listen("[::1]:2049").unwrap(),
            "[::1]:2049".parse().unwrap()
        );
        let e = parse_nfs_listen("localhost:2049").unwrap_err();
        assert!(e.starts_with("nfs_listen: 'localhost:2049' is not"), "{e}");
        let secs = |l, g| {
            nfs_times(l, g).map(|(l, g): (std::time::Duration, std::time::Duration)| {
                (l.as_secs(), g.as_secs())
            })
        };
        assert_eq!(secs(None, None), Ok((90, 90)));
        assert_eq!(
            secs(c.nfs_lease_time_secs, c.nfs_grace_time_secs),
            Ok((60, 120))
        );
        assert_eq!(secs(Some(120), None), Ok((120, 120)));
        let e = secs(Some(5), None).unwrap_err();
        assert!(
            e.starts_with("nfs_lease_time_secs = 5: use a value from 10"),
            "{e}"
        );
        let e = secs(None, Some(30)).unwrap_err();
        assert!(
            e.starts_with("nfs_grace_time_secs = 30: use a value from the lease time (90)"),
            "{e}"
        );
        assert!(secs(None, Some(4000)).is_err());
    }

    #[test]
    fn state_store_keys() {
        use braid_server::config::StateStoreConfig;
        let store = |text: &str| state_store(&parse(text).unwrap());
        assert_eq!(store(""), Ok(StateStoreConfig::Local));
        assert_eq!(
            store("state_store = \"local\""),
            Ok(StateStoreConfig::Local)
        );
        assert_eq!(
            store("state_store = \"etcd\"\netcd_endpoints = [\"127.0.0.1:2379\", \"http://[::1]:2379\"]"),
            Ok(StateStoreConfig::Etcd {
                endpoints: vec!["http://127.0.0.1:2379".into(), "http://[::1]:2379".into()],
                prefix: "/braid".into(),
            })
        );
        assert_eq!(
            store("state_store = \"etcd\"\netcd_endpoints = [\"http://h:1\"]\netcd_prefix = \"/braid/a\""),
            Ok(StateStoreConfig::Etcd {
                endpoints: vec!["http://h:1".into()],
                prefix: "/braid/a".into(),
            })
        );
        for (text, says) in [
            (
                "state_store = \"zk\"",
                "state_store = \"zk\": use \"local\"",
            ),
            (
                "state_store = \"etcd\"",
                "state_store = \"etcd\" needs etcd_endpoints, e.g.",
            ),
            (
                "state_store = \"etcd\"\netcd_endpoints = []",
                "state_store = \"etcd\" needs etcd_endpoints",
            ),
            (
                "etcd_endpoints = [\"http://h:1\"]",
                "etcd_endpoints is set but state_store is \"local\": add state_store = \"etcd\"",
            ),
            ("etcd_prefix = \"/x\"", "etcd_prefix is set but state_store"),
            (
                "state_store = \"etcd\"\netcd_endpoints = [\"https://h:1\"]",
                "etcd_endpoints: 'https://h:1': TLS to etcd is not supported yet",
            ),
            (
                "state_store = \"etcd\"\netcd_endpoints = [\"h:1/x\"]",
                "etcd_endpoints: 'h:1/x' is not an etcd client URL such as http://127.0.0.1:2379",
            ),
            (
                "state_store = \"etcd\"\netcd_endpoints = [\"h:1\"]\netcd_prefix = \"braid\"",
                "etcd_prefix = 'braid' is not a key prefix such as /braid",
            ),
        ] {
            let e = store(text).unwrap_err();
            assert!(e.starts_with(says) && !e.contains('\n'), "{text}: {e}");
        }
        assert!(parse("etcd_endpoint = [\"h:1\"]")
            .unwrap_err()
            .contains("etcd_endpoint"));
    }

    #[test]
    fn state_dir_is_made_private_or_refused() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("braid-state-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let dir = base.join("state");
        prepare_state_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        prepare_state_dir(&dir).unwrap();
        let file = base.join("file");
        std::fs::write(&file, b"x").unwrap();
        let e = prepare_state_dir(&file).unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
        let e = prepare_state_dir(&base.join("no/such")).unwrap_err();
        assert!(e.contains("cannot create it"), "{e}");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn flags_parse() {
        assert!(parse_share_flag("data=/srv").is_ok());
        assert!(parse_share_flag("data").is_err());
        assert_eq!(
            parse_user_flag("a:b:c").unwrap(),
            ("a".into(), "b:c".into())
        );
        assert!(validate_share_name("data").is_ok());
        assert!(validate_share_name("a/b").is_err());
        assert!(parse_listen("127.0.0.1:4445").is_ok());
        assert!(parse_listen("localhost").is_err());
        assert_eq!(
            parse_admin_listen("127.0.0.1:9445").unwrap(),
            Some("127.0.0.1:9445".parse().unwrap())
        );
        assert_eq!(parse_admin_listen("off").unwrap(), None);
        assert_eq!(parse_admin_listen("").unwrap(), None);
        assert!(parse_admin_listen("9445")
            .unwrap_err()
            .contains("admin_listen"));
        let c = parse("admin_listen = \"off\"\n").unwrap();
        assert_eq!(c.admin_listen.as_deref(), Some("off"));
    }
}
