//! The NFS part of the admin API (docs/ADMIN.md): NFSv4.1 sessions listed
//! in `/api/v1/sessions` beside SMB's, in the same shape (`protocol`
//! tells them apart), and the NFS client records (`nfs_clients`), which
//! exist before and without sessions.
//!
//! A Linux client mounted with `nconnect=4` shows as one session with
//! `current_channels` 4: its extra connections joined the session's fore
//! channel with their first SEQUENCE (RFC 8881 2.10.3.1).

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use serde::Serialize;

use crate::admin::rfc3339;
use crate::nfs::rpc::Caller;
use crate::nfs::state::clients::Client;
use crate::nfs::state::sessions::Session;
use crate::nfs::NfsState;

/// One NFSv4.1 session, in the fields of an SMB session where they mean
/// the same (docs/ADMIN.md), and NFS's own.
#[derive(Debug, Serialize)]
pub struct NfsSessionView {
    pub protocol: &'static str,
    /// The last 8 bytes of the sessionid4 (a counter and random bits):
    /// unique among the server's sessions.
    pub id: u64,
    /// The whole sessionid4 (16 bytes), as Wireshark prints it.
    pub id_hex: String,
    /// "valid", "courtesy" (the lease ran out, the state is kept until
    /// somebody conflicts with it) or "expired".
    pub state: &'static str,
    /// AUTH_SYS: "uid N"; AUTH_NONE: "".
    pub user: String,
    pub domain: String,
    pub anonymous: bool,
    pub client_address: Option<String>,
    /// The client's co_ownerid (Linux: "Linux NFSv4.1 <hostname>").
    pub client_name: Option<String>,
    /// "4.1".
    pub dialect: &'static str,
    pub minor_version: u32,
    pub signing: Option<&'static str>,
    pub encryption: Option<&'static str>,
    pub cipher: Option<&'static str>,
    pub encrypt_data: bool,
    pub apple_extensions: bool,
    /// The cap on connections from one address (a session's connections
    /// come from its client).
    pub max_channels: usize,
    /// Connections of the fore channel now (nconnect=4: 4).
    pub current_channels: usize,
    /// The most the fore channel had at once.
    pub fore_connections_max: usize,
    /// A connection is bound to the backchannel now.
    pub backchannel: bool,
    /// The backchannel was lost (SEQ4_STATUS_CB_PATH_DOWN_SESSION).
    pub backchannel_lost: bool,
    pub client_id: String,
    /// Fore channel slots (ca_maxrequests as granted) and those running a
    /// request now.
    pub slots: u32,
    pub slots_in_use: usize,
    /// Opens of the session's client (NFS state belongs to the client, not
    /// to a session).
    pub opens: usize,
    pub channels: Vec<NfsChannelView>,
}

#[derive(Debug, Serialize)]
pub struct NfsChannelView {
    pub connection_id: u64,
    pub local_address: String,
    pub remote_address: String,
    pub connected_since: String,
    pub bound_since: String,
    /// RPC calls, and bytes received and sent, on the connection.
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub async_requests: usize,
    /// Bound to the fore channel (requests) and/or the backchannel
    /// (callbacks).
    pub fore: bool,
    pub back: bool,
}

/// One client record (RFC 8881 2.4: EXCHANGE_ID made it, CREATE_SESSION
/// confirmed it).
#[derive(Debug, Serialize)]
pub struct NfsClientView {
    pub client_id: String,
    /// co_ownerid as text (bytes that are not UTF-8 replaced).
    pub owner: String,
    /// Where its EXCHANGE_ID came from.
    pub address: String,
    pub minor_version: u32,
    /// The RPC principal: "uid N" (AUTH_SYS) or "none" (AUTH_NONE).
    pub principal: String,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub machine_name: Option<String>,
    /// "unconfirmed", "confirmed", "courtesy" or "expired".
    pub state: &'static str,
    /// Seconds since the lease was last renewed, and the lease.
    pub lease_renewed_secs_ago: u64,
    pub lease_secs: u64,
    pub reclaim_complete: bool,
    pub session_ids: Vec<String>,
    pub opens: usize,
    pub locks: usize,
    pub delegations: usize,
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 + 2 * b.len());
    s.push_str("0x");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

fn client_state(c: &Client, lease: Duration) -> &'static str {
    if c.is_expired() {
        "expired"
    } else if c.is_courtesy(lease) {
        "courtesy"
    } else if c.is_confirmed() {
        "confirmed"
    } else {
        "unconfirmed"
    }
}

/// (opens, locks, delegations) of a client.
fn counts(c: &Client) -> (usize, usize, usize) {
    let st = c.state.lock().unwrap_or_else(|e| e.into_inner());
    (st.opens.len(), st.locks.len(), st.delegs.len())
}

pub fn sessions(nfs: &NfsState) -> Vec<NfsSessionView> {
    let mut out: Vec<NfsSessionView> = nfs
        .sessions
        .all()
        .iter()
        .map(|s| session_view(nfs, s))
        .collect();
    out.sort_by(|a, b| a.id_hex.cmp(&b.id_hex));
    out
}

fn session_view(nfs: &NfsState, s: &Session) -> NfsSessionView {
    let client = &s.client;
    let mut channels = Vec::new();
    for ch in s.channel_list() {
        let Some(conn) = nfs.connections.get(ch.conn) else {
            continue;
        };
        channels.push(NfsChannelView {
            connection_id: conn.id,
            local_address: conn.local.map(|a| a.to_string()).unwrap_or_default(),
            remote_address: conn.peer.to_string(),
            connected_since: rfc3339(conn.connected_since),
            bound_since: rfc3339(ch.bound_at),
            requests: conn.requests.load(Relaxed),
            bytes_in: conn.bytes_in.load(Relaxed),
            bytes_out: conn.bytes_out.load(Relaxed),
            async_requests: 0,
            fore: ch.fore,
            back: ch.back,
        });
    }
    let (current, max) = s.fore_connections();
    let (slots, slots_in_use) = s.slot_usage();
    let mut tail = [0u8; 8];
    tail.copy_from_slice(&s.id[8..]);
    let (user, anonymous) = match &client.caller {
        Caller::Sys { uid, .. } => (format!("uid {uid}"), false),
        Caller::Anonymous => (String::new(), true),
    };
    let client_address = channels
        .iter()
        .find(|c| c.fore)
        .and_then(|c| c.remote_address.parse::<std::net::SocketAddr>().ok())
        .unwrap_or(client.addr)
        .ip()
        .to_string();
    NfsSessionView {
        protocol: "nfs",
        id: u64::from_be_bytes(tail),
        id_hex: hex(&s.id),
        state: match client_state(client, nfs.lease_time) {
            "expired" => "expired",
            "courtesy" => "courtesy",
            _ => "valid",
        },
        user,
        domain: String::new(),
        anonymous,
        client_address: Some(client_address),
        client_name: Some(String::from_utf8_lossy(&client.owner).into_owned()),
        dialect: "4.1",
        minor_version: 1,
        signing: None,
        encryption: None,
        cipher: None,
        encrypt_data: false,
        apple_extensions: false,
        max_channels: nfs.limits.max_connections_per_address,
        current_channels: current,
        fore_connections_max: max,
        backchannel: s.has_back_channel(),
        backchannel_lost: s.back_channel_lost(),
        client_id: format!("0x{:016x}", client.clientid),
        slots,
        slots_in_use,
        opens: counts(client).0,
        channels,
    }
}

pub fn clients(nfs: &NfsState) -> Vec<NfsClientView> {
    let mut out: Vec<NfsClientView> = nfs
        .clients
        .all()
        .iter()
        .map(|c| {
            let (opens, locks, delegations) = counts(c);
            let (uid, gid, machine_name) = match &c.caller {
                Caller::Sys {
                    uid,
                    gid,
                    machinename,
                    ..
                } => (
                    Some(*uid),
                    Some(*gid),
                    Some(String::from_utf8_lossy(machinename).into_owned()),
                ),
                Caller::Anonymous => (None, None, None),
            };
            NfsClientView {
                client_id: format!("0x{:016x}", c.clientid),
                owner: String::from_utf8_lossy(&c.owner).into_owned(),
                address: c.addr.ip().to_string(),
                minor_version: 1,
                principal: match uid {
                    Some(u) => format!("uid {u}"),
                    None => "none".into(),
                },
                uid,
                gid,
                machine_name,
                state: client_state(c, nfs.lease_time),
                lease_renewed_secs_ago: c.since_renewed().as_secs(),
                lease_secs: nfs.lease_time.as_secs(),
                reclaim_complete: c.reclaim_complete.load(Relaxed),
                session_ids: c
                    .sessions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .map(|id| hex(id))
                    .collect(),
                opens,
                locks,
                delegations,
            }
        })
        .collect();
    out.sort_by(|a, b| a.client_id.cmp(&b.client_id));
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use braid_nfs_proto::nfs4::{callback_sec_parms4, channel_attrs4};

    use super::*;
    use crate::config::ServerConfig;
    use crate::nfs::conn::Connection;
    use crate::nfs::state::clients::Who;
    use crate::nfs::state::sessions::Callback;

    fn attrs() -> channel_attrs4 {
        channel_attrs4 {
            ca_headerpadsize: 0,
            ca_maxrequestsize: 8192,
            ca_maxresponsesize: 8192,
            ca_maxresponsesize_cached: 8192,
            ca_maxoperations: 16,
            ca_maxrequests: 64,
            ca_rdma_ird: vec![],
        }
    }

    #[tokio::test]
    async fn an_nconnect_4_client_shows_one_session_with_4_connections() {
        let nfs = NfsState::new(&ServerConfig::default()).unwrap();
        let addr: std::net::SocketAddr = "198.18.0.2:700".parse().unwrap();
        let who = Who {
            caller: Caller::Sys {
                uid: 0,
                gid: 0,
                gids: vec![],
                machinename: b"vm".to_vec(),
            },
            addr,
        };
        let (ex, _) = nfs
            .clients
            .exchange_id(b"Linux NFSv4.1 vm", [1; 8], &who, false, nfs.lease_time)
            .unwrap();
        let client = ex.client;
        nfs.clients.confirm(&client);
        let id = nfs.sessions.new_id(client.clientid);
        let session = Arc::new(Session::new(
            id,
            client.clone(),
            attrs(),
            attrs(),
            0,
            Callback {
                program: 0x4000_0000,
                sec_parms: vec![callback_sec_parms4::AUTH_NONE],
                seqid: 0,
                path_down: false,
                minorversion: 1,
            },
        ));
        let mut conns = Vec::new();
        for i in 0..4 {
            let conn = Connection::detached(nfs.next_connection_id(), addr);
            nfs.connections.insert(&conn);
            // The first carries CREATE_SESSION's backchannel; the others
            // joined with a SEQUENCE.
            session.bind(conn.id, true, i == 0);
            conns.push(conn);
        }
        nfs.sessions.insert(session);
        client.sessions.lock().unwrap().push(id);

        let v = serde_json::to_value(sessions(&nfs)).unwrap();
        let s = &v[0];
        assert_eq!(s["protocol"], "nfs");
        assert_eq!(s["state"], "valid");
        assert_eq!(s["user"], "uid 0");
        assert_eq!(s["dialect"], "4.1");
        assert_eq!(s["client_address"], "198.18.0.2");
        assert_eq!(s["client_name"], "Linux NFSv4.1 vm");
        assert_eq!(s["current_channels"], 4);
        assert_eq!(s["fore_connections_max"], 4);
        assert_eq!(s["backchannel"], true);
        assert_eq!(s["slots"], 64);
        assert_eq!(s["channels"].as_array().unwrap().len(), 4);
        assert_eq!(s["channels"][0]["back"], true);
        assert_eq!(s["channels"][1]["back"], false);
        assert_eq!(s["id_hex"].as_str().unwrap().len(), 2 + 32);

        let c = serde_json::to_value(clients(&nfs)).unwrap();
        assert_eq!(c[0]["state"], "confirmed");
        assert_eq!(c[0]["principal"], "uid 0");
        assert_eq!(c[0]["minor_version"], 1);
        assert_eq!(c[0]["session_ids"][0], s["id_hex"]);

        // Losing a connection loses nothing else.
        nfs.sessions.connection_lost(conns[3].id);
        let v = serde_json::to_value(sessions(&nfs)).unwrap();
        assert_eq!(v[0]["current_channels"], 3);
        assert_eq!(v[0]["fore_connections_max"], 4);
    }
}
