//! The admin HTTP API (docs/ADMIN.md): the live view of sessions, channels
//! and shares, and Prometheus metrics. Read-only but for a share's QoS
//! limits (`PUT /api/v1/shares/{name}/qos`, `qos_admin.rs`); it listens on loopback
//! unless configured otherwise (`admin_listen`), and asks for a bearer
//! token when one is configured (`admin_token_file`, `admin_auth.rs`).
//!
//! - `GET /api/v1/sessions`: sessions and their channels;
//! - `GET /api/v1/shares`: shares with open counts, traffic so far and QoS;
//! - `PUT /api/v1/shares/{name}/qos`: new QoS limits for a share;
//! - `GET /api/v1/opens`: every open file and directory, and who holds it;
//! - `GET /api/v1/clients`, `GET /api/v1/advice`: workloads and advice
//!   (`admin_workload.rs`);
//! - `GET /`: the dashboard (`admin_page.rs`);
//! - `GET /metrics`: Prometheus text format 0.0.4.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use braid_smb_proto::crypto::{Cipher, SigningAlgorithm};
use serde::Serialize;
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::metrics::Gauges;
use crate::smb::session::{Open, Session, SessionPhase};
use crate::state::ServerState;

/// Bind the admin listener; errors are one line naming `admin_listen`.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => format!(
            "admin_listen {addr}: address already in use; set admin_listen to another address (e.g. admin_listen = \"127.0.0.1:9446\") or \"off\""
        ),
        std::io::ErrorKind::PermissionDenied => format!(
            "admin_listen {addr}: permission denied; use a port above 1024 or set admin_listen = \"off\""
        ),
        _ => format!("admin_listen {addr}: {e}"),
    })
}

pub fn router(state: Arc<ServerState>) -> Router {
    let token = state.config().admin_token.clone();
    // The dashboard's files hold no data (admin_page.rs): a browser loads
    // them without the token, and their script sends it to the API.
    let page = Router::new()
        .route("/", get(crate::admin_page::get_page))
        .route("/dashboard.js", get(crate::admin_page::get_script))
        .route("/dashboard.css", get(crate::admin_page::get_style));
    let router = Router::new()
        .route("/api/v1/clients", get(get_clients))
        .route("/api/v1/advice", get(get_advice))
        .route("/api/v1/sessions", get(get_sessions))
        .route("/api/v1/shares", get(get_shares))
        .route(
            "/api/v1/shares/{name}/qos",
            axum::routing::put(crate::qos_admin::put_qos),
        )
        .route("/api/v1/opens", get(get_opens))
        .route("/metrics", get(get_metrics))
        .with_state(state);
    let api = match token {
        Some(token) => router.layer(axum::middleware::from_fn_with_state(
            token,
            crate::admin_auth::require_token,
        )),
        None => router,
    };
    page.merge(api)
}

/// Serve the admin API on an already bound listener until the task ends.
pub async fn serve(state: Arc<ServerState>, listener: TcpListener) {
    let addr = listener.local_addr().ok();
    if let Some(a) = addr {
        if !a.ip().is_loopback() && state.config().admin_token.is_none() {
            warn!(
                "admin API on {a} is reachable from the network and has no authentication; \
                 set admin_token_file"
            );
        }
        info!("admin API on http://{a}/ (dashboard at /; api/v1/sessions, shares, opens, clients, advice; metrics)");
    }
    // The advisor's window: a snapshot of every session's counters every
    // few seconds (workload.rs), taken here rather than on the request path.
    let workloads = state.metrics.workloads.clone();
    let _sampler = AbortOnDrop(tokio::spawn(async move {
        let mut tick = tokio::time::interval(crate::workload::SAMPLE_EVERY);
        loop {
            tick.tick().await;
            workloads.sample(std::time::Instant::now());
        }
    }));
    if let Err(e) = axum::serve(listener, router(state)).await {
        warn!("admin API stopped: {e}");
    }
}

/// Ends the task when the admin API's own task ends (or is aborted).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn get_sessions(State(state): State<Arc<ServerState>>) -> Json<SessionsView> {
    Json(sessions_view(&state))
}

async fn get_shares(State(state): State<Arc<ServerState>>) -> Json<SharesView> {
    Json(shares_view(&state))
}

async fn get_clients(
    State(state): State<Arc<ServerState>>,
) -> Json<crate::admin_workload::ClientsView> {
    Json(crate::admin_workload::clients_view(&state))
}

async fn get_advice(
    State(state): State<Arc<ServerState>>,
) -> Json<crate::admin_workload::AdviceView> {
    Json(crate::admin_workload::advice_view(&state))
}

async fn get_opens(State(state): State<Arc<ServerState>>) -> Json<OpensView> {
    Json(opens_view(&state))
}

async fn get_metrics(State(state): State<Arc<ServerState>>) -> impl IntoResponse {
    let mut text = state.metrics.render_prometheus(gauges(&state));
    text.push_str(&crate::metadata_cache_view::render_prometheus(&state));
    text.push_str(&crate::qos_admin::render_prometheus(&state));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
}

#[derive(Debug, Serialize)]
pub struct SessionsView {
    /// SMB sessions, then NFS sessions (`protocol`).
    pub sessions: Vec<SessionEntry>,
    /// NFS client records, when NFS is served (admin_nfs.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nfs_clients: Option<Vec<crate::admin_nfs::NfsClientView>>,
    /// The NFS grace period after a restart, when NFS is served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nfs_grace: Option<GraceView>,
}

/// RFC 8881 8.4.2.1: the grace period (`nfs/state/grace.rs`).
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct GraceView {
    /// Only reclaims are served now.
    pub active: bool,
    /// Clients of the last run that may still reclaim.
    pub clients_to_reclaim: usize,
    /// How long it lasts at most, unless clients are still reclaiming then.
    pub ends_in_ms: Option<u64>,
}

/// An SMB or an NFS session, in one list and one shape.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum SessionEntry {
    Smb(SessionView),
    Nfs(crate::admin_nfs::NfsSessionView),
}

#[derive(Debug, Serialize)]
pub struct SessionView {
    /// "smb" ("nfs" for NFS sessions, admin_nfs.rs).
    pub protocol: &'static str,
    pub id: u64,
    /// The same id as Windows and Wireshark print it.
    pub id_hex: String,
    /// "valid", "in_progress" (authenticating) or "expired".
    pub state: &'static str,
    pub user: String,
    pub domain: String,
    pub anonymous: bool,
    /// IP address of the client's first live channel.
    pub client_address: Option<String>,
    /// The name the client gave (NTLM workstation), if any.
    pub client_name: Option<String>,
    pub dialect: String,
    pub signing: Option<&'static str>,
    /// The cipher protecting this session's traffic: set once the session
    /// must encrypt (server or share policy) or has sent encrypted requests.
    pub encryption: Option<&'static str>,
    /// The cipher negotiated for the session (whether used or not).
    pub cipher: Option<&'static str>,
    /// Every request of the session must be encrypted.
    pub encrypt_data: bool,
    /// A macOS client that negotiated Apple's extensions (AAPL).
    pub apple_extensions: bool,
    pub max_channels: usize,
    pub current_channels: usize,
    pub trees: usize,
    pub opens: usize,
    pub channels: Vec<ChannelView>,
}

#[derive(Debug, Serialize)]
pub struct ChannelView {
    pub connection_id: u64,
    pub local_address: String,
    pub remote_address: String,
    /// RFC 3339, UTC.
    pub connected_since: String,
    /// When the channel joined the session (RFC 3339, UTC).
    pub bound_since: String,
    /// Counters of the connection (every session on it, framing included).
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Requests waiting after an interim response (change notifications,
    /// blocking locks, opens waiting on a break); at most
    /// `max_async_requests`.
    pub async_requests: usize,
}

#[derive(Debug, Serialize)]
pub struct SharesView {
    pub shares: Vec<ShareView>,
    /// Upper bounds of `operations_by_type`'s latency buckets.
    pub latency_bounds_us: &'static [u64],
}

#[derive(Debug, Serialize)]
pub struct ShareView {
    pub name: String,
    pub path: String,
    /// A user's home share, served from the `[homes]` template.
    pub home: bool,
    pub encrypt: bool,
    /// `read_only`: only the `write_list` may change it.
    pub read_only: bool,
    /// `valid_users`: who may connect (empty: every user).
    pub valid_users: Vec<String>,
    pub opens: usize,
    pub operations: u64,
    pub errors: u64,
    pub read_ops: u64,
    pub write_ops: u64,
    /// Bytes of READ responses (SMB2 header, body and data).
    pub bytes_read: u64,
    /// Bytes of WRITE requests (SMB2 header, body and data).
    pub bytes_written: u64,
    /// Every SMB2 message of the share, both directions.
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub operations_by_command: serde_json::Map<String, serde_json::Value>,
    /// Its metadata cache (`metadata_cache_view.rs`).
    pub metadata_cache: crate::metadata_cache_view::MetadataCacheView,
    /// Provisioned performance now (`qos_admin.rs`).
    pub qos: serde_json::Value,
    /// SMB and NFS operations by class (`op_metrics.rs`): counts by
    /// result, data bytes, latency and throttled-time percentiles and
    /// buckets.
    pub operations_by_type: serde_json::Map<String, serde_json::Value>,
}

pub fn sessions_view(state: &ServerState) -> SessionsView {
    // A bind comes on a new connection, which takes the settings now.
    let max_channels = state.config().max_channels;
    let mut sessions: Vec<SessionView> = state
        .smb
        .sessions
        .values()
        .iter()
        .map(|s| session_view(state, s, max_channels))
        .collect();
    sessions.sort_by_key(|s| s.id);
    let mut sessions: Vec<SessionEntry> = sessions.into_iter().map(SessionEntry::Smb).collect();
    let nfs = state.nfs.get();
    if let Some(nfs) = nfs {
        sessions.extend(
            crate::admin_nfs::sessions(nfs)
                .into_iter()
                .map(SessionEntry::Nfs),
        );
    }
    SessionsView {
        sessions,
        nfs_clients: nfs.map(|n| crate::admin_nfs::clients(n)),
        nfs_grace: nfs.map(|n| {
            let (active, clients_to_reclaim, left) = n.grace.view();
            GraceView {
                active,
                clients_to_reclaim,
                ends_in_ms: left.map(|d| d.as_millis() as u64),
            }
        }),
    }
}

fn session_view(state: &ServerState, s: &Session, max_channels: usize) -> SessionView {
    let identity = s.identity.lock().unwrap().clone();
    let channel_list = s.channels.lock().unwrap().clone();
    let mut channels = Vec::new();
    for ch in &channel_list {
        let Some(conn) = ch.conn.upgrade() else {
            continue;
        };
        channels.push(ChannelView {
            connection_id: conn.id,
            local_address: conn.local.to_string(),
            remote_address: conn.peer.to_string(),
            connected_since: rfc3339(conn.connected_since),
            bound_since: rfc3339(ch.bound_at),
            requests: conn.requests_in.load(Relaxed),
            bytes_in: conn.bytes_in.load(Relaxed),
            bytes_out: conn.bytes_out.load(Relaxed),
            async_requests: conn.async_requests(),
        });
    }
    let client_address = client_address(state, s);
    let state_name = match s.phase() {
        SessionPhase::Valid => "valid",
        SessionPhase::InProgress => "in_progress",
        SessionPhase::Expired => "expired",
    };
    let cipher = s.encryption().map(|e| cipher_name(e.cipher));
    let encrypt_data = s.encrypt_data.load(Relaxed);
    let encrypted_seen = s.encrypted_seen.load(Relaxed);
    SessionView {
        protocol: "smb",
        id: s.id,
        id_hex: format!("0x{:016x}", s.id),
        state: state_name,
        user: identity
            .as_ref()
            .map(|i| i.user.clone())
            .unwrap_or_default(),
        domain: identity
            .as_ref()
            .map(|i| i.domain.clone())
            .unwrap_or_default(),
        anonymous: identity.as_ref().is_some_and(|i| i.anonymous),
        client_address,
        client_name: identity
            .as_ref()
            .map(|i| i.workstation.clone())
            .filter(|w| !w.is_empty()),
        dialect: dialect_name(s.dialect),
        signing: s.signing().map(|k| signing_name(k.algorithm)),
        encryption: cipher.filter(|_| encrypt_data || encrypted_seen),
        cipher,
        encrypt_data,
        apple_extensions: s.aapl_caps.load(Relaxed) != 0,
        max_channels,
        current_channels: channels.len(),
        trees: s.trees.lock().unwrap().len(),
        opens: s.opens.len(),
        channels,
    }
}

/// The client's address: its session's first live channel, or the
/// connection that set the session up (sessions without a channel:
/// anonymous, in progress).
fn client_address(state: &ServerState, s: &Session) -> Option<String> {
    s.channels
        .lock()
        .unwrap()
        .iter()
        .find_map(|ch| ch.conn.upgrade())
        .map(|c| c.peer)
        .or_else(|| {
            state
                .smb
                .connections
                .get(&s.connection_id)
                .and_then(|w| w.upgrade())
                .map(|c| c.peer)
        })
        .map(|a: SocketAddr| a.ip().to_string())
}

#[derive(Debug, Serialize)]
pub struct OpensView {
    pub opens: Vec<OpenView>,
}

/// One open, as Samba's `smbstatus` lists locked files.
#[derive(Debug, Serialize)]
pub struct OpenView {
    /// None for an open whose connection was lost, kept for a durable
    /// reconnect (`disconnected`).
    pub session_id: Option<u64>,
    pub session_id_hex: Option<String>,
    pub user: String,
    pub client_address: Option<String>,
    pub share: String,
    /// Share-relative, `\`-separated ("" is the share's root).
    pub path: String,
    pub directory: bool,
    /// The granted access mask (MS-SMB2 2.2.13.1), e.g. "0x0012019f".
    pub access: String,
    /// FILE_SHARE_* of the open, as R, W and D (what others may do).
    pub share_access: String,
    /// What the client caches: "lease RWH", "oplock batch", or "none".
    pub caching: String,
    pub durable: bool,
    /// A persistent open (a continuously available share): kept in the
    /// state store, it survives a restart of Braid.
    pub persistent: bool,
    /// Its connection was lost; it waits for the client to reconnect it.
    pub disconnected: bool,
    /// Byte-range locks the open holds.
    pub locks: usize,
}

impl OpenView {
    fn of(o: &Open, share: String) -> OpenView {
        let share_access = o.handle.share_access();
        // Read once: a guard held across the struct literal below would
        // deadlock a second lock of it.
        let durability = o.durable.lock().unwrap().as_ref().map(|d| d.persistent);
        OpenView {
            session_id: None,
            session_id_hex: None,
            user: String::new(),
            client_address: None,
            share,
            path: o.handle.path(),
            directory: o.is_directory,
            access: format!("0x{:08x}", o.granted_access),
            share_access: [(1, 'R'), (2, 'W'), (4, 'D')]
                .iter()
                .filter(|(bit, _)| share_access & bit != 0)
                .map(|(_, c)| *c)
                .collect(),
            caching: caching_of(o.oplock.as_ref()),
            durable: durability.is_some(),
            persistent: durability.is_some_and(|persistent| persistent),
            disconnected: false,
            locks: o.handle.lock_count(),
        }
    }
}

/// Every open of every session, by session then open; then the opens of
/// lost connections that wait for a durable reconnect.
pub fn opens_view(state: &ServerState) -> OpensView {
    let mut sessions = state.smb.sessions.values();
    sessions.sort_by_key(|s| s.id);
    let mut opens = Vec::new();
    for s in sessions {
        let user = s.user_name();
        let client = client_address(state, &s);
        let shares: HashMap<u32, String> = s
            .trees
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(id, t)| t.share.as_ref().map(|sh| (*id, sh.name.clone())))
            .collect();
        let mut mine = s.opens.values();
        mine.sort_by_key(|o| o.volatile_id);
        for o in mine {
            let share = shares.get(&o.tree_id()).cloned().unwrap_or_default();
            opens.push(OpenView {
                session_id: Some(s.id),
                session_id_hex: Some(format!("0x{:016x}", s.id)),
                user: user.clone(),
                client_address: client.clone(),
                ..OpenView::of(&o, share)
            });
        }
    }
    let mut waiting = state.smb.preserved.all();
    waiting.sort_by_key(|o| o.persistent_id);
    for o in waiting {
        let owner = o.durable.lock().unwrap().as_ref().map(|d| d.owner.clone());
        opens.push(OpenView {
            user: owner.unwrap_or_default(),
            disconnected: true,
            ..OpenView::of(&o, o.handle.share().name().to_string())
        });
    }
    OpensView { opens }
}

/// An open's oplock level or lease state, as `smbstatus` shows it.
fn caching_of(oplock: Option<&crate::smb::oplock::OplockRef>) -> String {
    use braid_smb_proto::messages::create::oplock_level;
    let Some(r) = oplock else {
        return "none".into();
    };
    if let Some(lease) = r.file.lease_of(r.key) {
        let state = lease.st.lock().unwrap().state;
        let letters: String = [
            (crate::smb::lease::R, 'R'),
            (crate::smb::lease::W, 'W'),
            (crate::smb::lease::H, 'H'),
        ]
        .iter()
        .filter(|(bit, _)| state & bit != 0)
        .map(|(_, c)| *c)
        .collect();
        return if letters.is_empty() {
            "lease none".into()
        } else {
            format!("lease {letters}")
        };
    }
    match r.file.level_of(r.key) {
        oplock_level::BATCH => "oplock batch",
        oplock_level::EXCLUSIVE => "oplock exclusive",
        oplock_level::LEVEL_II => "oplock level2",
        _ => "none",
    }
    .into()
}

pub fn shares_view(state: &ServerState) -> SharesView {
    // Opens per share (lower-cased name), through each open's tree.
    let mut opens: HashMap<String, usize> = HashMap::new();
    for s in state.smb.sessions.values() {
        let tree_share: HashMap<u32, String> = s
            .trees
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(id, t)| t.share.as_ref().map(|sh| (*id, sh.name.to_lowercase())))
            .collect();
        for o in s.opens.values() {
            if let Some(name) = tree_share.get(&o.tree_id()) {
                *opens.entry(name.clone()).or_default() += 1;
            }
        }
    }
    let view = |name: &str,
                path: String,
                encrypt: bool,
                access: &crate::smb::share_access::ShareAccess,
                home: bool| {
        let t = state.metrics.share(Some(name)).totals();
        ShareView {
            name: name.to_string(),
            path,
            home,
            encrypt,
            read_only: access.read_only,
            valid_users: access.valid_users.clone(),
            opens: opens.get(&name.to_lowercase()).copied().unwrap_or(0),
            operations: t.operations,
            errors: t.errors,
            read_ops: t.read_ops,
            write_ops: t.write_ops,
            bytes_read: t.bytes_read,
            bytes_written: t.bytes_written,
            bytes_in: t.bytes_in,
            bytes_out: t.bytes_out,
            operations_by_command: t
                .by_command
                .iter()
                .map(|(n, c)| (n.to_string(), (*c).into()))
                .collect(),
            metadata_cache: crate::metadata_cache_view::view(state, name),
            qos: crate::qos_admin::share_qos(state, name),
            operations_by_type: state.metrics.ops.share_view(name),
        }
    };
    let config = state.config();
    let mut shares: Vec<ShareView> = config
        .shares
        .iter()
        .map(|c| {
            view(
                &c.name,
                c.path.display().to_string(),
                c.encrypt,
                &c.access,
                false,
            )
        })
        .collect();
    // Each user's home share served so far ([homes]), after the
    // configured ones, by name.
    let mut homes = state.served_home_shares();
    homes.sort_by(|a, b| a.name.cmp(&b.name));
    shares.extend(homes.iter().map(|h| {
        let path = h.fs.root_path().display().to_string();
        view(&h.name, path, h.encrypt, &h.access, true)
    }));
    SharesView {
        shares,
        latency_bounds_us: &crate::op_metrics::LATENCY_BOUNDS_US,
    }
}

/// Sessions and channels right now, for `/metrics`.
pub fn gauges(state: &ServerState) -> Gauges {
    let mut g = Gauges {
        durable: state.smb.preserved.counts(),
        nfs: state.nfs.get().map(|n| {
            let (active, waiting, _) = n.grace.view();
            n.reclaims.snapshot((active, waiting))
        }),
        ..Gauges::default()
    };
    for s in state.smb.sessions.values() {
        if s.phase() != SessionPhase::Valid {
            continue;
        }
        g.sessions += 1;
        g.channels += s
            .channels
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.conn.strong_count() > 0)
            .count() as u64;
    }
    g
}

pub fn dialect_name(d: u16) -> String {
    match d {
        0x0202 => "2.0.2".into(),
        0x0210 => "2.1".into(),
        0x0300 => "3.0".into(),
        0x0302 => "3.0.2".into(),
        0x0311 => "3.1.1".into(),
        other => format!("0x{other:04x}"),
    }
}

pub fn signing_name(a: SigningAlgorithm) -> &'static str {
    match a {
        SigningAlgorithm::HmacSha256 => "HMAC-SHA256",
        SigningAlgorithm::AesCmac => "AES-128-CMAC",
        SigningAlgorithm::AesGmac => "AES-128-GMAC",
    }
}

pub fn cipher_name(c: Cipher) -> &'static str {
    match c {
        Cipher::Aes128Ccm => "AES-128-CCM",
        Cipher::Aes128Gcm => "AES-128-GCM",
        Cipher::Aes256Ccm => "AES-256-CCM",
        Cipher::Aes256Gcm => "AES-256-GCM",
    }
}

/// RFC 3339 in UTC with milliseconds, e.g. `2026-11-21T21:49:48.123Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = braid_smb_proto::calendar::civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ServerConfig, ShareConfig};
    use crate::smb::session::{Identity, Session};
    use crate::userdb::UserDb;
    use braid_fs::{FileService, SystemClock};
    use braid_smb_proto::header::Command;
    use braid_smb_proto::NtStatus;
    use std::time::Duration;

    fn state(dir: &std::path::Path) -> ServerState {
        state_of(config(dir))
    }

    fn state_of(config: ServerConfig) -> ServerState {
        let files = FileService::new(Arc::new(SystemClock));
        ServerState::new(config, UserDb::default().into(), files).unwrap()
    }

    fn config(dir: &std::path::Path) -> ServerConfig {
        ServerConfig {
            shares: vec![ShareConfig {
                encrypt: true,
                direct_writes: false,
                // Off (it is on by default): the view of a share without
                // it is all zero (the e2e metadata cache tests read it on).
                metadata_cache: false,
                ..ShareConfig::with_defaults("Data", dir)
            }],
            ..ServerConfig::default()
        }
    }

    fn tempdir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("braid-admin-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20.123Z");
        // A leap day.
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(t), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn names() {
        assert_eq!(dialect_name(0x0311), "3.1.1");
        assert_eq!(dialect_name(0x0302), "3.0.2");
        assert_eq!(signing_name(SigningAlgorithm::AesGmac), "AES-128-GMAC");
        assert_eq!(cipher_name(Cipher::Aes256Gcm), "AES-256-GCM");
    }

    #[test]
    fn sessions_json_shape() {
        let dir = tempdir("sessions");
        let st = state(&dir);
        let s = Arc::new(Session::new(st.smb.new_session_id(), 0x0311, 7));
        *s.identity.lock().unwrap() = Some(Identity {
            user: "alice".into(),
            domain: "WORKGROUP".into(),
            anonymous: false,
            guest: false,
            workstation: "LAPTOP".into(),
            owner: None,
        });
        *s.signing.lock().unwrap() = Some(crate::smb::session::SigningState {
            algorithm: SigningAlgorithm::AesGmac,
            key: vec![0; 16],
        });
        s.set_phase(SessionPhase::Valid);
        st.smb.sessions.insert(s.id, s.clone());
        let v = serde_json::to_value(sessions_view(&st)).unwrap();
        let sess = &v["sessions"][0];
        assert_eq!(sess["id"], s.id);
        assert_eq!(sess["id_hex"], format!("0x{:016x}", s.id));
        assert_eq!(sess["state"], "valid");
        assert_eq!(sess["user"], "alice");
        assert_eq!(sess["domain"], "WORKGROUP");
        assert_eq!(sess["client_name"], "LAPTOP");
        assert_eq!(sess["client_address"], serde_json::Value::Null);
        assert_eq!(sess["dialect"], "3.1.1");
        assert_eq!(sess["signing"], "AES-128-GMAC");
        assert_eq!(sess["encryption"], serde_json::Value::Null);
        assert_eq!(sess["cipher"], serde_json::Value::Null);
        assert_eq!(sess["encrypt_data"], false);
        assert_eq!(sess["apple_extensions"], false);
        assert_eq!(sess["max_channels"], 32);
        assert_eq!(sess["current_channels"], 0);
        assert_eq!(sess["opens"], 0);
        assert!(sess["channels"].as_array().unwrap().is_empty());
        assert_eq!(
            gauges(&st),
            Gauges {
                sessions: 1,
                channels: 0,
                durable: Default::default(),
                nfs: None,
            }
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn shares_json_shape() {
        let dir = tempdir("shares");
        let st = state(&dir);
        st.metrics.record(
            Some("Data"),
            Command::Write,
            NtStatus::SUCCESS,
            Duration::from_millis(1),
            4096 + 112,
            80,
        );
        st.metrics.record(
            Some("Data"),
            Command::Create,
            NtStatus::SUCCESS,
            Duration::from_millis(1),
            200,
            150,
        );
        let v = serde_json::to_value(shares_view(&st)).unwrap();
        let sh = &v["shares"][0];
        assert_eq!(sh["name"], "Data");
        assert_eq!(sh["path"], dir.display().to_string());
        assert_eq!(sh["encrypt"], true);
        assert_eq!(sh["opens"], 0);
        assert_eq!(sh["operations"], 2);
        assert_eq!(sh["errors"], 0);
        assert_eq!(sh["write_ops"], 1);
        assert_eq!(sh["bytes_written"], 4096 + 112);
        assert_eq!(sh["bytes_read"], 0);
        assert_eq!(sh["bytes_in"], 4096 + 112 + 200);
        assert_eq!(sh["operations_by_command"]["write"], 1);
        assert_eq!(sh["operations_by_command"]["create"], 1);
        assert_eq!(v["shares"].as_array().unwrap().len(), 1);
        assert_eq!(
            sh["metadata_cache"],
            serde_json::json!({"enabled": false, "hits": 0, "misses": 0, "negative_hits": 0,
                "entries": 0, "bytes": 0, "invalidations": 0, "attr_hits": 0, "attr_misses": 0,
                "attr_invalidations": 0, "attr_files": 0, "attr_bytes": 0, "fd_kept": 0,
                "fd_reused": 0, "fd_missed": 0, "fd_dropped_idle": 0, "fd_dropped_capacity": 0,
                "fd_dropped_unlinked": 0, "fd_dropped_invalidated": 0, "fd_dropped_refused": 0,
                "fd_open": 0})
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The raw HTTP/1.1 response to a GET of `path` with `headers`.
    async fn raw_get(addr: SocketAddr, path: &str, headers: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn a_configured_token_is_required() {
        let dir = tempdir("token");
        let token = "f".repeat(40);
        let mut config = config(&dir);
        config.admin_token = Some(Arc::new(
            crate::admin_auth::AdminToken::new(&token).unwrap(),
        ));
        let st = state_of(config);
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(serve(Arc::new(st), listener));
        for path in [
            "/metrics",
            "/api/v1/sessions",
            "/api/v1/shares",
            "/api/v1/opens",
            "/api/v1/clients",
            "/api/v1/advice",
        ] {
            let r = raw_get(addr, path, "").await;
            assert!(r.starts_with("HTTP/1.1 401"), "{r}");
            assert!(r.to_lowercase().contains("www-authenticate: bearer"), "{r}");
            assert!(!r.contains("Data"), "{r}");
            let r = raw_get(addr, path, "Authorization: Bearer wrong\r\n").await;
            assert!(r.starts_with("HTTP/1.1 401"), "{r}");
            let r = raw_get(addr, path, &format!("Authorization: Bearer {token}\r\n")).await;
            assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        }
        // The dashboard's files carry no data and load without the token;
        // what they show comes from the API above.
        for path in ["/", "/dashboard.js", "/dashboard.css"] {
            let r = raw_get(addr, path, "").await;
            assert!(r.starts_with("HTTP/1.1 200"), "{r}");
            assert!(!r.contains("Data"), "{r}");
            assert!(
                r.contains("content-security-policy: default-src 'none'"),
                "{r}"
            );
        }
        task.abort();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn http_endpoints() {
        let dir = tempdir("http");
        let st = Arc::new(state(&dir));
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(serve(st.clone(), listener));
        let get = |path: &'static str| raw_get(addr, path, "");
        let r = get("/metrics").await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        assert!(r.contains("text/plain; version=0.0.4"), "{r}");
        assert!(r.contains("# TYPE braid_sessions gauge"), "{r}");
        let r = get("/api/v1/sessions").await;
        assert!(r.contains("application/json"), "{r}");
        assert!(r.ends_with("{\"sessions\":[]}"), "{r}");
        let r = get("/api/v1/shares").await;
        assert!(r.contains("\"name\":\"Data\""), "{r}");
        let r = get("/nope").await;
        assert!(r.starts_with("HTTP/1.1 404"), "{r}");
        task.abort();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn bind_failure_names_the_key() {
        let l = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = l.local_addr().unwrap();
        let e = bind(addr).await.unwrap_err();
        assert!(
            e.starts_with(&format!("admin_listen {addr}: address already in use")),
            "{e}"
        );
    }
}
