//! Server-wide state: shares, users, the file service, sessions.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use braid_fs::{FileService, ShareRef};

use crate::config::ServerConfig;
use crate::users_live::LiveUsers;

#[derive(Clone)]
pub struct Share {
    pub name: String,
    pub fs: ShareRef,
    pub encrypt: bool,
    /// Access-based directory enumeration (`smb/ops/query_directory.rs`).
    pub access_based_enumeration: bool,
    /// `access::canonicalize_dacl_flags` on descriptors clients supply.
    pub canonicalize_acl_flags: bool,
    /// Who may connect, and who may write (`share_access.rs`).
    pub access: crate::smb::share_access::ShareAccess,
    /// Shown in share lists (srvsvc).
    pub comment: String,
    /// Listed by srvsvc's enumerations (Samba's `browseable`).
    pub browseable: bool,
    /// What macOS clients see (`smb/ops/create_aapl.rs`).
    pub mac: crate::config::MacShareOptions,
    /// CHANGE_NOTIFY is served (`smb/ops/change_notify.rs`).
    pub change_notify: bool,
    /// MS-SMB2 Share.IsCA (`smb/persistent.rs`).
    pub continuous_availability: bool,
    /// Changes made on the host are reported and break directory leases
    /// and cached files' caching (`host_watch.rs`).
    pub notify_host_changes: bool,
    /// The protocols it is served over: SMB finds it only with `smb`
    /// (`ServerState::smb_share_for`, srvsvc's share lists).
    pub protocols: crate::config::Protocols,
    /// Set when a reload ended this share (`reload.rs`); shared with the
    /// copies that only list it differently.
    retired: Arc<std::sync::atomic::AtomicBool>,
}

/// Set in the environment, a share's metadata cache skips invalidation:
/// for the tests that prove the coherence suite fails on a stale cache.
const BROKEN_METADATA_CACHE_ENV: &str = "BRAID_TEST_BROKEN_METADATA_CACHE";
const BROKEN_FD_CACHE_ENV: &str = "BRAID_TEST_BROKEN_FD_CACHE";

impl Share {
    /// Serve the share `s` describes: its directory added to the file
    /// service with its options.
    pub fn serve(files: &FileService, s: &crate::config::ShareConfig) -> Result<Share, String> {
        let fs = files
            .add_share(&s.name, &s.path)
            .map_err(|e| format!("share '{}': cannot serve {}: {e}", s.name, s.path.display()))?;
        fs.set_direct_writes(s.direct_writes);
        fs.set_posix_locking(s.posix_locking);
        fs.set_netatalk_locking(s.netatalk_locking);
        fs.set_named_streams(s.named_streams);
        // The AfpInfo and resource fork rules (braid-fs `mac_streams.rs`).
        fs.set_macos(s.mac.enabled);
        fs.set_apple_double(s.mac.apple_double);
        fs.set_netatalk_metadata(s.mac.netatalk_metadata);
        fs.set_hidden_names(braid_fs::HiddenNames {
            dot_files: s.hide_dot_files,
            patterns: s.hide_files.clone(),
        });
        let mut veto = s.veto_files.clone();
        if s.mac.apple_double.resource_fork_in_sidecar && s.mac.veto_appledouble {
            // The sidecars are Braid's to manage (`resource_fork_file.rs`).
            veto.push("._*".into());
        }
        fs.set_veto_names(veto);
        fs.set_delete_veto_files(s.delete_veto_files);
        if s.metadata_cache {
            if std::env::var_os(BROKEN_METADATA_CACHE_ENV).is_some() {
                // Only the coherence tests set it, to show they catch a
                // cache that misses changes (tests/e2e/test_metadata_cache.py).
                fs.set_broken_metadata_cache(files.metadata_cache_budget(), files.clock().clone());
            } else {
                files.enable_metadata_cache(&fs);
            }
            if std::env::var_os(BROKEN_FD_CACHE_ENV).is_some() {
                // Only the e2e test of a host `rm` sets it, to show it
                // catches kept fds of unlinked files (test_fd_cache.py).
                if let Some(fds) = fs.fd_cache() {
                    fds.skip_unlink_drops();
                }
            }
        }
        if let Some(snapshots) = &s.snapshots {
            fs.set_snapshots(snapshots.clone())
                .map_err(|e| format!("share '{}': snapshot_format: {e}", s.name))?;
        }
        if let Some(m) = s.create_modes {
            fs.set_create_modes(m);
        }
        Ok(Share {
            name: s.name.clone(),
            fs,
            encrypt: s.encrypt,
            access_based_enumeration: s.access_based_enumeration,
            canonicalize_acl_flags: s.canonicalize_acl_flags,
            access: s.access.clone(),
            comment: s.comment.clone(),
            browseable: s.browseable,
            mac: s.mac.clone(),
            change_notify: s.change_notify,
            continuous_availability: s.continuous_availability,
            notify_host_changes: s.notify_host_changes,
            protocols: s.protocols,
            retired: Default::default(),
        })
    }

    /// Whether a reload ended this share: its tree connects are being
    /// disconnected, and a tree connect must look the name up again.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
    }

    /// Whether `other` serves this share's definition (the same export;
    /// it may be listed differently).
    pub fn same_export(&self, other: &Share) -> bool {
        self.fs.is(&other.fs)
    }

    /// The same share listed with another comment and `browseable` (a
    /// reload that changed nothing else, `reload.rs`).
    pub fn relisted(&self, comment: &str, browseable: bool) -> Share {
        Share {
            comment: comment.to_string(),
            browseable,
            ..self.clone()
        }
    }

    /// This share as of one of its snapshots (MS-SMB2 3.3.5.9.4), `view`
    /// being the snapshot's read-only file-service share. Its name, which
    /// keys oplocks, leases and change notification, is the share's name
    /// and the snapshot's `@GMT` token: no share name holds a `\\`, so a
    /// snapshot's file is never taken for the live file.
    pub fn as_of_snapshot(&self, view: ShareRef, token: &str) -> Share {
        Share {
            name: format!("{}\\{token}", self.name),
            fs: view,
            encrypt: self.encrypt,
            access_based_enumeration: self.access_based_enumeration,
            canonicalize_acl_flags: self.canonicalize_acl_flags,
            access: self.access.clone(),
            comment: self.comment.clone(),
            browseable: self.browseable,
            mac: self.mac.clone(),
            change_notify: self.change_notify,
            // A snapshot is read-only: nothing to keep available.
            continuous_availability: false,
            // A snapshot does not change.
            notify_host_changes: false,
            protocols: self.protocols,
            retired: self.retired.clone(),
        }
    }
}

/// What the config decides and a reload replaces (`reload.rs`): the
/// settings, the shares they serve and the home share template. Each
/// connection keeps the settings it was accepted with; tree connects find
/// the shares served now.
pub struct Served {
    pub config: Arc<ServerConfig>,
    /// Keyed by lower-cased share name: share names are case-insensitive.
    pub shares: HashMap<String, Arc<Share>>,
    /// Each user's own share (`homes.rs`), when configured.
    pub homes: Option<Arc<crate::smb::homes::HomeShares>>,
}

impl Served {
    pub fn new(config: ServerConfig, files: &FileService) -> Result<Served, String> {
        files.set_metadata_cache_limits(
            config.metadata_cache_max_entries,
            config.metadata_cache_max_bytes,
        );
        files.set_fd_cache_limits(config.metadata_cache_fds);
        let mut shares = HashMap::new();
        for s in &config.shares {
            shares.insert(s.name.to_lowercase(), Arc::new(Share::serve(files, s)?));
        }
        let homes = match &config.homes {
            Some(template) => Some(Arc::new(crate::smb::homes::HomeShares::new(
                template.clone(),
            )?)),
            None => None,
        };
        Ok(Served {
            config: Arc::new(config),
            shares,
            homes,
        })
    }

    /// The shares SMB share lists show (srvsvc): those served over SMB.
    pub fn smb_listed(&self) -> impl Iterator<Item = &Arc<Share>> {
        self.shares.values().filter(|s| s.protocols.smb)
    }

    /// Whether the home shares are served, and so listed, over SMB.
    pub fn homes_listed_over_smb(&self) -> bool {
        self.config.homes.as_ref().is_some_and(|h| h.protocols.smb)
    }

    /// Whether any share asks for changes made on the host.
    pub fn wants_host_changes(&self) -> bool {
        self.config.shares.iter().any(|s| s.notify_host_changes)
            || self
                .config
                .homes
                .as_ref()
                .is_some_and(|h| h.notify_host_changes)
    }
}

pub struct ServerState {
    /// Replaced by a reload (`reload.rs`).
    served: std::sync::RwLock<Arc<Served>>,
    /// Read again when the users file changes (`users_live.rs`).
    pub users: LiveUsers,
    pub files: Arc<FileService>,
    /// SMB's own server-wide state (`smb/state.rs`).
    pub smb: crate::smb::state::SmbState,
    /// Changes made on the host to watched and leased directories.
    pub host_watch: Arc<crate::host_watch::HostWatch>,
    /// Request metrics and counters for the admin API (`admin`, `metrics`).
    pub metrics: crate::metrics::Metrics,
    /// Each share's provisioned performance (`qos.rs`).
    pub qos: Arc<crate::qos::QosRegistry>,
    pub start_time: SystemTime,
    /// Where a reload reads the config from (`reload.rs`), when the
    /// binary gave one; one reload runs at a time.
    pub(crate) config_source: std::sync::OnceLock<crate::reload::ConfigSource>,
    pub(crate) reloading: tokio::sync::Mutex<()>,
    /// The NFS server's state, when NFS is served (admin API, reload).
    pub nfs: std::sync::OnceLock<Arc<crate::nfs::NfsState>>,
    /// Caching grants across protocols (braid-fs's registry, issue 42):
    /// SMB's oplock table and NFS's delegations are registered in it
    /// (`server.rs`), and each protocol's opens and writes break the
    /// other's grants through it.
    pub caching: Arc<braid_fs::caching::CachingGrants>,
    /// What must outlive the process (braid-fs `state_store.rs`): etcd
    /// (`state_store = "etcd"`), else files under `state_dir`, or memory
    /// when there is none.
    pub store: Arc<dyn braid_fs::state_store::StateStore>,
    /// A graceful stop in progress (`stop.rs`): listeners and connections
    /// watch it.
    pub stop: Arc<crate::stop::Stop>,
}

impl ServerState {
    /// The NTLM acceptor of one authentication (SESSION_SETUP, or an
    /// authenticated RPC bind): a fresh server challenge, this server's
    /// names, and the time its CHALLENGE carries.
    pub fn ntlm_server(&self) -> braid_smb_proto::auth::NtlmServer {
        let config = self.config();
        braid_smb_proto::auth::NtlmServer::new(
            rand::random(),
            filetime(SystemTime::now()),
            &config.netbios_name,
            &config.netbios_name.to_lowercase(),
            &config.domain,
        )
    }

    pub fn new(
        config: ServerConfig,
        users: LiveUsers,
        files: Arc<FileService>,
    ) -> Result<Self, String> {
        use crate::config::StateStoreConfig;
        let store: Arc<dyn braid_fs::state_store::StateStore> =
            match (&config.state_store, &config.state_dir) {
                // Nothing is sent yet: an unreachable etcd does not stop
                // the start (restore_all says so in one line).
                // Records written on hot paths (`put_soon`) go to etcd from
                // a thread of their own, in order.
                (StateStoreConfig::Etcd { endpoints, prefix }, _) => {
                    Arc::new(braid_fs::state_deferred::Deferred::new(Arc::new(
                        braid_etcd::EtcdStore::new(endpoints, prefix)?,
                    )))
                }
                (StateStoreConfig::Local, Some(dir)) => {
                    Arc::new(braid_fs::state_store::LocalStore::new(dir))
                }
                (StateStoreConfig::Local, None) => {
                    Arc::new(braid_fs::state_store::MemoryStore::default())
                }
            };
        let metrics = crate::metrics::Metrics::new(config.shares.iter().map(|s| s.name.as_str()));
        metrics.ops.set_enabled(config.operation_metrics);
        let smb = crate::smb::state::SmbState::new(&config);
        let served = Served::new(config, &files)?;
        let qos = Arc::new(crate::qos::QosRegistry::default());
        qos.reconfigure(None, &served.config);
        let host_watch = Arc::new(crate::host_watch::HostWatch::new(
            served.wants_host_changes(),
        ));
        Ok(ServerState {
            host_watch,
            served: std::sync::RwLock::new(Arc::new(served)),
            config_source: std::sync::OnceLock::new(),
            reloading: tokio::sync::Mutex::new(()),
            users,
            files,
            smb,
            metrics,
            qos,
            start_time: SystemTime::now(),
            nfs: std::sync::OnceLock::new(),
            // SMB's acknowledgement timer bounds the longest break.
            store,
            stop: Default::default(),
            caching: Arc::new(braid_fs::caching::CachingGrants::new(
                crate::smb::oplock::BREAK_ACK_TIMEOUT,
            )),
        })
    }

    /// What is served now (`Served`).
    pub fn served(&self) -> Arc<Served> {
        self.served
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The settings now. A connection keeps those it was accepted with
    /// (`Connection::config`): use those for anything it negotiates.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.served().config.clone()
    }

    pub(crate) fn replace_served(&self, served: Served) {
        *self.served.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(served);
    }

    /// The kept fds of the NFS export `name` (braid-fs
    /// `meta/fd_cache.rs`), when it is exported and keeps any.
    pub fn nfs_fd_cache(&self, name: &str) -> Option<Arc<braid_fs::meta::FdCache>> {
        self.nfs.get()?.exports.by_name(name)?.share.fd_cache()
    }

    pub fn share(&self, name: &str) -> Option<Arc<Share>> {
        self.served().shares.get(&name.to_lowercase()).cloned()
    }

    /// The home shares ([homes]) served so far, one per user who
    /// connected to theirs.
    pub fn served_home_shares(&self) -> Vec<Arc<Share>> {
        self.served()
            .homes
            .as_ref()
            .map(|h| h.served_shares())
            .unwrap_or_default()
    }

    /// The share `name` as `user` (an authenticated user's name; `None`
    /// for guests) finds it: a configured share, else the user's home
    /// share, by the user's name or as `homes` (`homes.rs`).
    pub fn share_for(&self, name: &str, user: Option<&str>) -> Option<Arc<Share>> {
        if let Some(s) = self.share(name) {
            return Some(s);
        }
        let served = self.served();
        let (homes, user) = (served.homes.as_ref()?, user?);
        if !(name.eq_ignore_ascii_case(user) || name.eq_ignore_ascii_case("homes")) {
            return None;
        }
        match homes.share_of(&self.files, user) {
            Ok(s) => {
                // Each user's share gets the QoS the template declares.
                if let Some(template) = &served.config.homes {
                    self.qos.serve_home(&s.name, &template.qos);
                }
                Some(s)
            }
            Err(e) => {
                tracing::warn!(user, "home share: {e}");
                None
            }
        }
    }

    /// The share `name` as an SMB TREE_CONNECT finds it (`share_for`): a
    /// share not served over SMB (`protocols` without "smb") is as unknown.
    pub fn smb_share_for(&self, name: &str, user: Option<&str>) -> Option<Arc<Share>> {
        self.share_for(name, user).filter(|s| s.protocols.smb)
    }
}

/// MS-DTYP 2.3.3: 100-ns intervals since 1601-01-01.
pub fn filetime(t: SystemTime) -> u64 {
    const EPOCH_DIFF_SECS: u64 = 11_644_473_600;
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => (d.as_secs() + EPOCH_DIFF_SECS) * 10_000_000 + d.subsec_nanos() as u64 / 100,
        Err(e) => {
            let d = e.duration();
            (EPOCH_DIFF_SECS * 10_000_000)
                .saturating_sub(d.as_secs() * 10_000_000 + d.subsec_nanos() as u64 / 100)
        }
    }
}

pub fn from_filetime(ft: u64) -> SystemTime {
    const EPOCH_DIFF_100NS: u64 = 11_644_473_600 * 10_000_000;
    if ft >= EPOCH_DIFF_100NS {
        let v = ft - EPOCH_DIFF_100NS;
        SystemTime::UNIX_EPOCH
            + std::time::Duration::new(v / 10_000_000, (v % 10_000_000) as u32 * 100)
    } else {
        let v = EPOCH_DIFF_100NS - ft;
        SystemTime::UNIX_EPOCH
            - std::time::Duration::new(v / 10_000_000, (v % 10_000_000) as u32 * 100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_share_without_smb_is_unknown_to_smb() {
        let base = std::env::temp_dir().join(format!("braid-state-proto-{}", std::process::id()));
        for d in ["both", "nfsonly", "homes/alice"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        let nfs_only = crate::config::Protocols {
            smb: false,
            nfs: true,
        };
        let config = ServerConfig {
            shares: vec![
                crate::config::ShareConfig::with_defaults("Both", &base.join("both")),
                crate::config::ShareConfig {
                    protocols: nfs_only,
                    ..crate::config::ShareConfig::with_defaults("NfsOnly", &base.join("nfsonly"))
                },
            ],
            homes: Some(crate::config::ShareConfig {
                protocols: nfs_only,
                notify_host_changes: false,
                ..crate::config::ShareConfig::with_defaults("homes", &base.join("homes/%U"))
            }),
            ..ServerConfig::default()
        };
        let files = FileService::new(Arc::new(braid_fs::SystemClock));
        let state =
            ServerState::new(config, crate::userdb::UserDb::default().into(), files).unwrap();
        assert!(state.smb_share_for("both", None).is_some());
        assert!(state.smb_share_for("NFSONLY", Some("alice")).is_none());
        assert!(state.share("nfsonly").is_some(), "still served, over NFS");
        assert!(state.smb_share_for("alice", Some("alice")).is_none());
        assert!(state.share_for("alice", Some("alice")).is_some());
        let listed: Vec<String> = state
            .served()
            .smb_listed()
            .map(|s| s.name.clone())
            .collect();
        assert_eq!(listed, ["Both"]);
        assert!(!state.served().homes_listed_over_smb());
    }

    #[test]
    fn filetime_round_trips() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 123_456_700);
        assert_eq!(from_filetime(filetime(t)), t);
        assert_eq!(filetime(SystemTime::UNIX_EPOCH), 116_444_736_000_000_000);
    }
}
