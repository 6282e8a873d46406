//! Reading the config again while the server runs (on SIGHUP, e.g.
//! `systemctl reload braid`), as `smbcontrol smbd reload-config` makes
//! Samba do: shares are added, removed and changed, and settings changed,
//! without a restart that would drop every client.
//!
//! - The new config is read and checked in full first. If any of it is
//!   wrong, nothing changes, and the error names the key.
//! - A share whose definition is unchanged keeps its clients and their
//!   opens. A new share can be connected to at once.
//! - A share that was removed, or changed in anything but its `comment`
//!   and `browseable`, is ended for the clients connected to it, as
//!   Windows ends a share that is deleted. Its tree connects are
//!   disconnected and their opens closed, durable ones too. A client's
//!   next request on one gets STATUS_NETWORK_NAME_DELETED (MS-SMB2
//!   3.3.5.2.11); clients then connect the tree again and get the share as
//!   it is now. A share whose `encrypt` or `valid_users` just changed so
//!   holds no client that the new definition would turn away.
//! - Server settings (`multichannel`, `encrypt`, `signing`,
//!   `max_channels`, `ciphers`, `max_io_size`, ...) apply to connections
//!   accepted after the reload. A connection keeps what it negotiated, as
//!   MS-SMB2 fixes a connection's state at NEGOTIATE; this is what the
//!   brief means by "connections made before enabling must reconnect to
//!   benefit". The per-client limits, `max_connections`,
//!   `logon_failures_per_minute`, `operation_metrics` and the reported
//!   interfaces apply at once.
//! - `listen`, `admin_listen` and `admin_token_file` are bound at start: a
//!   change to them is reported as needing a restart, and is not applied.

use std::collections::HashMap;
use std::sync::Arc;

use tracing::{info, warn};

use crate::config::{ServerConfig, ShareConfig};
use crate::state::{Served, ServerState, Share};

/// Reads and checks the config again: the same files and flags the server
/// was started with. Errors are one line naming the key and the fix.
pub type ConfigSource = Arc<dyn Fn() -> Result<ServerConfig, String> + Send + Sync>;

/// Shares by lower-cased name, as `Served` keeps them.
type SharesByName = HashMap<String, Arc<Share>>;

/// What a reload changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    pub shares_added: Vec<String>,
    pub shares_removed: Vec<String>,
    pub shares_changed: Vec<String>,
    /// Config keys whose new values now apply (see the module docs for
    /// which apply to new connections only).
    pub settings_changed: Vec<&'static str>,
    /// Config keys that changed but are read only at start.
    pub restart_needed: Vec<&'static str>,
    /// Tree connects ended because their share was removed or changed.
    pub tree_connects_ended: usize,
}

/// Read the config from where the server was started from and apply it.
pub async fn reload(state: &Arc<ServerState>) -> Result<ReloadReport, String> {
    let Some(source) = state.config_source.get().cloned() else {
        return Err("this server was not started from a config it can read again".into());
    };
    // The config source reads files (the config, the users file).
    let config = tokio::task::spawn_blocking(move || source())
        .await
        .map_err(|e| format!("reading the config: {e}"))??;
    apply(state, config).await
}

/// Serve `new` from now on (see the module docs). On `Err` nothing changed.
pub async fn apply(state: &Arc<ServerState>, new: ServerConfig) -> Result<ReloadReport, String> {
    let _one_at_a_time = state.reloading.lock().await;
    let old = state.served();
    let mut report = ReloadReport {
        settings_changed: settings_changed(&old.config, &new),
        restart_needed: restart_needed(&old.config, &new),
        ..ReloadReport::default()
    };
    let (shares, mut ended) = next_shares(state, &old, &new, &mut report)?;
    let homes = next_homes(&old, &new, &mut report, &mut ended)?;

    state
        .smb
        .logon_throttle
        .set_limit(new.logon_failures_per_minute);
    state
        .smb
        .client_opens
        .set_limit(new.max_open_files_per_client);
    state.metrics.ops.set_enabled(new.operation_metrics);
    state
        .smb
        .client_connections
        .set_limit(new.max_connections_per_client);
    let served = Served {
        config: Arc::new(new),
        shares,
        homes,
    };
    if served.wants_host_changes() {
        crate::host_watch::start(state);
    }
    state.qos.reconfigure(Some(&old.config), &served.config);
    state.replace_served(served);
    report.tree_connects_ended = end_shares(state, &ended).await;

    for key in &report.restart_needed {
        warn!("{key} changed in the config: it takes effect when braid is restarted");
    }
    info!(
        added = ?report.shares_added,
        removed = ?report.shares_removed,
        changed = ?report.shares_changed,
        settings = ?report.settings_changed,
        tree_connects_ended = report.tree_connects_ended,
        "config reloaded"
    );
    Ok(report)
}

/// The shares `new` serves, made before anything is replaced so that a
/// share that cannot be served leaves the running ones as they are; and
/// the running shares to end.
fn next_shares(
    state: &ServerState,
    old: &Served,
    new: &ServerConfig,
    report: &mut ReloadReport,
) -> Result<(SharesByName, Vec<Arc<Share>>), String> {
    let mut shares = HashMap::new();
    let mut ended = Vec::new();
    for s in &new.shares {
        let key = s.name.to_lowercase();
        let before = old
            .config
            .shares
            .iter()
            .find(|o| o.name.to_lowercase() == key);
        let running = old.shares.get(&key);
        let next = match (before, running) {
            (Some(b), Some(r)) if b == s => r.clone(),
            (Some(b), Some(r)) if differs_in_listing_only(b, s) => {
                report.shares_changed.push(s.name.clone());
                Arc::new(r.relisted(&s.comment, s.browseable))
            }
            (Some(_), Some(r)) => {
                report.shares_changed.push(s.name.clone());
                ended.push(r.clone());
                Arc::new(Share::serve(&state.files, s)?)
            }
            _ => {
                report.shares_added.push(s.name.clone());
                Arc::new(Share::serve(&state.files, s)?)
            }
        };
        shares.insert(key, next);
    }
    for (key, running) in &old.shares {
        if !shares.contains_key(key) {
            report.shares_removed.push(running.name.clone());
            ended.push(running.clone());
        }
    }
    report.shares_removed.sort();
    Ok((shares, ended))
}

/// The home share template `new` serves; the running one is kept if its
/// table did not change, else the home shares it served are to end.
fn next_homes(
    old: &Served,
    new: &ServerConfig,
    report: &mut ReloadReport,
    ended: &mut Vec<Arc<Share>>,
) -> Result<Option<Arc<crate::smb::homes::HomeShares>>, String> {
    match (&old.homes, &old.config.homes, &new.homes) {
        (Some(running), Some(before), Some(now)) if before == now => {
            return Ok(Some(running.clone()))
        }
        (None, _, None) => return Ok(None),
        _ => {}
    }
    let next = match &new.homes {
        Some(now) => Some(Arc::new(crate::smb::homes::HomeShares::new(now.clone())?)),
        None => None,
    };
    let list = match (&old.homes, &next) {
        (None, _) => &mut report.shares_added,
        (Some(_), Some(_)) => &mut report.shares_changed,
        (Some(_), None) => &mut report.shares_removed,
    };
    list.push("homes".into());
    if let Some(running) = &old.homes {
        ended.extend(running.served_shares());
    }
    Ok(next)
}

/// Only what share lists show changed, or the NFS export options (which
/// SMB clients do not see): the SMB clients connected keep on.
fn differs_in_listing_only(before: &ShareConfig, now: &ShareConfig) -> bool {
    let listed_as_now = ShareConfig {
        comment: now.comment.clone(),
        browseable: now.browseable,
        nfs: now.nfs.clone(),
        qos: now.qos,
        ..before.clone()
    };
    listed_as_now == *now
}

/// Disconnect every tree connect of the shares `gone` and close their
/// opens, as a TREE_DISCONNECT would (smb/ops/tree_disconnect.rs), and
/// close the durable opens of theirs that wait for a reconnect. Returns
/// how many tree connects were ended.
async fn end_shares(state: &Arc<ServerState>, gone: &[Arc<Share>]) -> usize {
    if gone.is_empty() {
        return 0;
    }
    // Before the trees are looked at: a tree connect that finds one of
    // these shares either adds its tree before the scan below, or sees
    // the mark after adding it (`smb/ops/tree_connect.rs`).
    for share in gone {
        share.retire();
    }
    let is_gone = |s: &Arc<Share>| gone.iter().any(|g| g.same_export(s));
    let mut ended = 0;
    for session in state.smb.sessions.values() {
        let trees: Vec<u32> = session
            .trees
            .lock()
            .unwrap()
            .values()
            .filter(|t| t.share.as_ref().is_some_and(is_gone))
            .map(|t| t.id)
            .collect();
        for id in trees {
            if session.remove_tree(id).is_none() {
                continue;
            }
            ended += 1;
            session
                .quota_opens
                .lock()
                .unwrap()
                .retain(|_, q| q.tree_id != id);
            // Pending requests on the tree (notifications, blocking locks)
            // end with its opens.
            let opens = session.take_opens_of_tree(Some(id));
            crate::smb::ops::close::close_opens(opens).await;
        }
    }
    // A durable open waiting for its client names its share; the share
    // that now has the name is not the one it was opened on.
    let names: Vec<String> = gone.iter().map(|s| s.name.to_lowercase()).collect();
    let served_now: Vec<braid_fs::ShareRef> = state
        .served()
        .shares
        .values()
        .map(|s| s.fs.clone())
        .collect();
    let waiting = state.smb.preserved.take_where(|o| {
        o.durable
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|d| names.contains(&d.share))
            && !served_now.iter().any(|f| o.handle.share().is(f))
    });
    if !waiting.is_empty() {
        let _ = tokio::task::spawn_blocking(move || {
            waiting.iter().for_each(crate::smb::durable::close_now)
        })
        .await;
    }
    ended
}

/// Config keys whose values differ, by the names the config file uses.
fn settings_changed(old: &ServerConfig, new: &ServerConfig) -> Vec<&'static str> {
    let mut keys = Vec::new();
    let mut check = |key: &'static str, differs: bool| {
        if differs {
            keys.push(key);
        }
    };
    check("signing", old.signing_required != new.signing_required);
    check("allow_guest", old.allow_guest != new.allow_guest);
    check("max_io_size", old.max_io_size != new.max_io_size);
    check("max_credits", old.max_credits != new.max_credits);
    check("idle_timeout_secs", old.idle_timeout != new.idle_timeout);
    check("server_name", old.netbios_name != new.netbios_name);
    check("macos_model", old.macos_model != new.macos_model);
    check("encrypt", old.encrypt != new.encrypt);
    check("ciphers", old.ciphers != new.ciphers);
    check("multichannel", old.multichannel != new.multichannel);
    check("leases", old.leases != new.leases);
    check(
        "operation_metrics",
        old.operation_metrics != new.operation_metrics,
    );
    check("max_channels", old.max_channels != new.max_channels);
    check("interface", old.interfaces != new.interfaces);
    check("max_open_files", old.max_open_files != new.max_open_files);
    check(
        "max_open_files_per_client",
        old.max_open_files_per_client != new.max_open_files_per_client,
    );
    check(
        "max_connections",
        old.max_connections != new.max_connections,
    );
    check(
        "max_connections_per_client",
        old.max_connections_per_client != new.max_connections_per_client,
    );
    check(
        "max_async_requests",
        old.max_async_requests != new.max_async_requests,
    );
    check("hosts_allow, hosts_deny", old.hosts != new.hosts);
    check("min_protocol", old.min_dialect != new.min_dialect);
    check(
        "logon_failures_per_minute",
        old.logon_failures_per_minute != new.logon_failures_per_minute,
    );
    keys
}

/// Keys bound at start (sockets, the admin API's token).
fn restart_needed(old: &ServerConfig, new: &ServerConfig) -> Vec<&'static str> {
    let mut keys = Vec::new();
    if old.listen != new.listen {
        keys.push("listen");
    }
    if old.admin_listen != new.admin_listen {
        keys.push("admin_listen");
    }
    if old.admin_token.as_deref() != new.admin_token.as_deref() {
        keys.push("admin_token_file");
    }
    // The NFS listeners, lease and grace period, and where NFS keeps its
    // handle key and client records, are taken at start.
    if old.nfs_listen != new.nfs_listen {
        keys.push("nfs_listen");
    }
    if old.nfs_lease_time != new.nfs_lease_time {
        keys.push("nfs_lease_time_secs");
    }
    if old.nfs_grace_time != new.nfs_grace_time {
        keys.push("nfs_grace_time_secs");
    }
    if old.state_dir != new.state_dir {
        keys.push("state_dir");
    }
    // The state store is opened at start, and what it holds read then.
    use crate::config::StateStoreConfig::{Etcd, Local};
    match (&old.state_store, &new.state_store) {
        (Local, Local) => {}
        (
            Etcd {
                endpoints: e1,
                prefix: p1,
            },
            Etcd {
                endpoints: e2,
                prefix: p2,
            },
        ) => {
            if e1 != e2 {
                keys.push("etcd_endpoints");
            }
            if p1 != p2 {
                keys.push("etcd_prefix");
            }
        }
        _ => keys.push("state_store"),
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(name: &str, path: &std::path::Path) -> ShareConfig {
        ShareConfig {
            notify_host_changes: false,
            ..ShareConfig::with_defaults(name, path)
        }
    }

    #[test]
    fn a_new_comment_keeps_the_clients_and_a_new_rule_ends_them() {
        let dir = std::env::temp_dir();
        let before = share("Data", &dir);
        let mut relisted = before.clone();
        relisted.comment = "team files".into();
        relisted.browseable = false;
        assert!(differs_in_listing_only(&before, &relisted));
        let mut encrypted = relisted.clone();
        encrypted.encrypt = true;
        assert!(!differs_in_listing_only(&before, &encrypted));
        let mut elsewhere = before.clone();
        elsewhere.path = dir.join("elsewhere");
        assert!(!differs_in_listing_only(&before, &elsewhere));
        let mut squashed = before.clone();
        squashed.nfs.squash = crate::nfs::export::Squash::All;
        assert!(differs_in_listing_only(&before, &squashed));
        let mut nfs_only = before.clone();
        nfs_only.protocols.smb = false;
        assert!(!differs_in_listing_only(&before, &nfs_only));
    }

    fn state_serving(config: ServerConfig) -> Arc<ServerState> {
        let files = braid_fs::FileService::new(Arc::new(braid_fs::SystemClock));
        Arc::new(ServerState::new(config, crate::userdb::UserDb::default().into(), files).unwrap())
    }

    fn temp_dirs(tag: &str, names: &[&str]) -> std::path::PathBuf {
        let base = std::env::temp_dir().join(format!("braid-reload-{tag}-{}", std::process::id()));
        for n in names {
            std::fs::create_dir_all(base.join(n)).unwrap();
        }
        base
    }

    #[tokio::test]
    async fn shares_are_added_removed_changed_and_relisted() {
        let base = temp_dirs("shares", &["a", "b", "c", "d"]);
        let config = ServerConfig {
            shares: vec![
                share("A", &base.join("a")),
                share("B", &base.join("b")),
                share("C", &base.join("c")),
            ],
            ..ServerConfig::default()
        };
        let state = state_serving(config.clone());
        let a = state.share("a").unwrap();
        let b = state.share("b").unwrap();
        let c = state.share("c").unwrap();

        let mut next = config.clone();
        next.shares[1].comment = "listed anew".into();
        next.shares[2].encrypt = true;
        next.shares.push(share("D", &base.join("d")));
        next.shares.retain(|s| s.name != "A");
        next.multichannel = false;
        let report = apply(&state, next).await.unwrap();
        assert_eq!(report.shares_added, ["D"]);
        assert_eq!(report.shares_removed, ["A"]);
        assert_eq!(report.shares_changed, ["B", "C"]);
        assert_eq!(report.settings_changed, ["multichannel"]);

        assert!(state.share("a").is_none() && a.is_retired());
        let b2 = state.share("b").unwrap();
        assert!(b2.same_export(&b) && !b.is_retired());
        assert_eq!(b2.comment, "listed anew");
        let c2 = state.share("c").unwrap();
        assert!(c.is_retired() && !c2.is_retired() && !c2.same_export(&c) && c2.encrypt);
        assert!(state.share("d").is_some());
        assert!(!state.config().multichannel);
    }

    #[tokio::test]
    async fn a_share_that_cannot_be_served_changes_nothing() {
        let base = temp_dirs("bad", &["a"]);
        let config = ServerConfig {
            shares: vec![share("A", &base.join("a"))],
            ..ServerConfig::default()
        };
        let state = state_serving(config.clone());
        let a = state.share("a").unwrap();
        let mut next = config.clone();
        next.shares
            .push(share("Gone", &base.join("no-such-directory")));
        next.multichannel = false;
        next.shares[0].encrypt = true;
        let e = apply(&state, next).await.unwrap_err();
        assert!(e.contains("share 'Gone'"), "{e}");
        assert!(Arc::ptr_eq(&state.share("a").unwrap(), &a) && !a.is_retired());
        assert!(state.share("gone").is_none());
        assert!(state.config().multichannel);
    }

    #[tokio::test]
    async fn a_changed_home_template_ends_the_home_shares_served() {
        let base = temp_dirs("homes", &["a", "homes", "homes2"]);
        let mut template = share("homes", &base.join("homes").join("%U"));
        template.notify_host_changes = false;
        let config = ServerConfig {
            shares: vec![share("A", &base.join("a"))],
            homes: Some(template.clone()),
            ..ServerConfig::default()
        };
        let state = state_serving(config.clone());
        let alices = state.share_for("alice", Some("alice")).unwrap();

        // Unchanged: the same home share.
        let report = apply(&state, config.clone()).await.unwrap();
        assert_eq!(report, ReloadReport::default());
        assert!(Arc::ptr_eq(
            &state.share_for("alice", Some("alice")).unwrap(),
            &alices
        ));

        let mut next = config.clone();
        next.homes = Some(share("homes", &base.join("homes2").join("%U")));
        let report = apply(&state, next.clone()).await.unwrap();
        assert_eq!(report.shares_changed, ["homes"]);
        assert!(alices.is_retired());
        let now = state.share_for("alice", Some("alice")).unwrap();
        assert!(!now.is_retired() && now.fs.root_path().ends_with("homes2/alice"));

        next.homes = None;
        let report = apply(&state, next).await.unwrap();
        assert_eq!(report.shares_removed, ["homes"]);
        assert!(now.is_retired() && state.share_for("alice", Some("alice")).is_none());
    }

    #[test]
    fn settings_are_named_by_their_config_keys() {
        let old = ServerConfig::default();
        let mut new = old.clone();
        new.multichannel = false;
        new.max_channels = 4;
        new.signing_required = false;
        new.listen = vec!["127.0.0.1:5445".parse().unwrap()];
        assert_eq!(
            settings_changed(&old, &new),
            ["signing", "multichannel", "max_channels"]
        );
        assert_eq!(restart_needed(&old, &new), ["listen"]);
        assert!(settings_changed(&old, &old).is_empty());
        assert!(restart_needed(&old, &old).is_empty());
    }

    #[test]
    fn nfs_listeners_and_state_dir_need_a_restart() {
        let old = ServerConfig::default();
        let mut new = old.clone();
        new.nfs_listen = vec!["127.0.0.1:20490".parse().unwrap()];
        new.nfs_lease_time = std::time::Duration::from_secs(60);
        new.state_dir = Some("/var/lib/braid".into());
        new.state_store = crate::config::StateStoreConfig::Etcd {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            prefix: "/braid".into(),
        };
        assert_eq!(
            restart_needed(&old, &new),
            [
                "nfs_listen",
                "nfs_lease_time_secs",
                "state_dir",
                "state_store"
            ]
        );
        assert!(settings_changed(&old, &new).is_empty());
        let mut moved = new.clone();
        moved.state_store = crate::config::StateStoreConfig::Etcd {
            endpoints: vec!["http://127.0.0.2:2379".into()],
            prefix: "/braid".into(),
        };
        assert_eq!(restart_needed(&new, &moved), ["etcd_endpoints"]);
    }
}
