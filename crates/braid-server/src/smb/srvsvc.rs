//! The server's own state as srvsvc reports it (`braid_smb_proto::dcerpc`):
//! shares, sessions, tree connects, open files and listening addresses.
//!
//! Braid has no administrators (docs/SECURITY.md): a caller sees the
//! sessions, tree connects and opens of its own account only. The whole
//! picture is the operator's, through the admin API.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use braid_smb_proto::dcerpc::{
    file_permission, share_type, OpenFileEntry, ServerInfo, SessionEntry, ShareEntry,
    SrvsvcBackend, TransportEntry, TreeConnectEntry,
};

use crate::smb::session::{Open, Session, SessionPhase};
use crate::state::ServerState;

/// FILE_READ_DATA | FILE_EXECUTE, and FILE_WRITE_DATA | FILE_APPEND_DATA
/// (MS-SMB2 2.2.13.1.1).
const READ_RIGHTS: u32 = 0x0001 | 0x0020;
const WRITE_RIGHTS: u32 = 0x0002 | 0x0004;

/// srvsvc as seen by one caller: the session the pipe was opened on.
pub struct SrvsvcView<'a> {
    pub state: &'a Arc<ServerState>,
    pub caller: &'a Session,
}

impl SrvsvcView<'_> {
    /// The caller's account; None for an anonymous or guest caller, who
    /// sees no one's sessions or opens.
    fn caller_account(&self) -> Option<String> {
        self.caller
            .identity
            .lock()
            .unwrap()
            .as_ref()
            .filter(|i| !i.anonymous && !i.guest)
            .map(|i| i.user.clone())
    }

    /// Authenticated sessions of the caller's account.
    fn visible_sessions(&self) -> Vec<Arc<Session>> {
        let Some(me) = self.caller_account() else {
            return Vec::new();
        };
        let mut sessions: Vec<Arc<Session>> = self
            .state
            .smb
            .sessions
            .values()
            .into_iter()
            .filter(|s| s.phase() == SessionPhase::Valid)
            .filter(|s| {
                s.identity
                    .lock()
                    .unwrap()
                    .as_ref()
                    .is_some_and(|i| !i.anonymous && i.user.eq_ignore_ascii_case(&me))
            })
            .collect();
        sessions.sort_by_key(|s| s.id);
        sessions
    }

    /// Durable opens of the caller's account whose connection was lost,
    /// waiting for a reconnect.
    fn waiting_opens(&self) -> Vec<Arc<Open>> {
        let Some(me) = self.caller_account() else {
            return Vec::new();
        };
        let mut opens: Vec<Arc<Open>> = self
            .state
            .smb
            .preserved
            .all()
            .into_iter()
            .filter(|o| durable_owner(o).is_some_and(|u| u.eq_ignore_ascii_case(&me)))
            .collect();
        opens.sort_by_key(|o| o.persistent_id);
        opens
    }

    /// The client's address, `\\192.0.2.7`, from the session's first live
    /// channel; how long it has been established; how long since any of
    /// its channels carried a request.
    fn client_of(&self, s: &Session) -> (String, Duration, Duration) {
        let channels = s.channels.lock().unwrap().clone();
        let now = SystemTime::now();
        let mut client = None;
        let mut since = None;
        let mut idle = None::<Duration>;
        for ch in &channels {
            let Some(conn) = ch.conn.upgrade() else {
                continue;
            };
            client.get_or_insert(conn.peer);
            since = Some(since.map_or(ch.bound_at, |t: SystemTime| t.min(ch.bound_at)));
            let quiet = conn.idle_for();
            idle = Some(idle.map_or(quiet, |i| i.min(quiet)));
        }
        let client = client.map(|a: SocketAddr| format!("\\\\{}", a.ip()));
        let active = since
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default();
        (client.unwrap_or_default(), active, idle.unwrap_or_default())
    }
}

impl SrvsvcBackend for SrvsvcView<'_> {
    /// Every share, then IPC$ (every authenticated user may connect to
    /// every share, docs/SECURITY.md).
    fn shares(&self) -> Vec<ShareEntry> {
        let mut connections = std::collections::HashMap::<String, u32>::new();
        for s in self.state.smb.sessions.values() {
            for tree in s.trees.lock().unwrap().values() {
                let name = tree
                    .share
                    .as_ref()
                    .map_or("ipc$".to_string(), |sh| sh.name.to_lowercase());
                *connections.entry(name).or_default() += 1;
            }
        }
        let count = |name: &str| connections.get(&name.to_lowercase()).copied().unwrap_or(0);
        let served = self.state.served();
        // Shares not served over SMB (`protocols`) are not listed.
        let mut shares: Vec<ShareEntry> = served
            .smb_listed()
            .map(|s| ShareEntry {
                name: s.name.clone(),
                share_type: share_type::DISK,
                comment: s.comment.clone(),
                connections: count(&s.name),
                browseable: s.browseable,
            })
            .collect();
        // The caller's own home share (`homes.rs`), as Samba lists it.
        if let (Some(homes), Some(me)) = (&served.homes, self.caller_account()) {
            if self.state.share(&me).is_none() && served.homes_listed_over_smb() {
                shares.push(ShareEntry {
                    name: me.clone(),
                    share_type: share_type::DISK,
                    comment: homes.comment(&me),
                    connections: count(&me),
                    browseable: homes.browseable(),
                });
            }
        }
        shares.sort_by_key(|s| s.name.to_lowercase());
        shares.push(ShareEntry {
            name: "IPC$".into(),
            share_type: share_type::IPC | share_type::SPECIAL,
            comment: "IPC Service (Braid)".into(),
            connections: count("IPC$"),
            browseable: true,
        });
        shares
    }

    fn server_info(&self) -> ServerInfo {
        ServerInfo {
            name: self.state.config().netbios_name.to_uppercase(),
            comment: "Braid".into(),
            version_major: 10,
            version_minor: 0,
            // SV_TYPE_WORKSTATION | SV_TYPE_SERVER | SV_TYPE_SERVER_NT.
            server_type: 0x0000_0001 | 0x0000_0002 | 0x0000_8000,
        }
    }

    fn caller_is_anonymous(&self) -> bool {
        self.caller.is_anonymous_or_guest()
    }

    fn sessions(&self) -> Vec<SessionEntry> {
        self.visible_sessions()
            .iter()
            .map(|s| {
                let (client, active, idle) = self.client_of(s);
                let identity = s.identity.lock().unwrap().clone().unwrap_or_default();
                SessionEntry {
                    client,
                    user: identity.user,
                    opens: s.opens.len() as u32,
                    active,
                    idle,
                    guest: identity.guest,
                    client_type: format!("SMB {}", crate::admin::dialect_name(s.dialect)),
                    transport: "TCP".into(),
                }
            })
            .collect()
    }

    fn tree_connects(&self) -> Vec<TreeConnectEntry> {
        let now = SystemTime::now();
        let mut trees = Vec::new();
        for s in self.visible_sessions() {
            let (client, _, _) = self.client_of(&s);
            let user = s.user_name();
            let opens = s.opens.values();
            let pipes = s
                .pipes
                .lock()
                .unwrap()
                .values()
                .cloned()
                .collect::<Vec<_>>();
            let mut mine: Vec<_> = s.trees.lock().unwrap().values().cloned().collect();
            mine.sort_by_key(|t| t.id);
            for tree in mine {
                let (share, share_type) = match &tree.share {
                    Some(sh) => (sh.name.clone(), share_type::DISK),
                    None => ("IPC$".to_string(), share_type::IPC),
                };
                let quota_count = s
                    .quota_opens
                    .lock()
                    .unwrap()
                    .values()
                    .filter(|q| q.tree_id == tree.id)
                    .count();
                let open_count = opens.iter().filter(|o| o.tree_id() == tree.id).count()
                    + pipes.iter().filter(|p| p.tree_id == tree.id).count()
                    + quota_count;
                trees.push(TreeConnectEntry {
                    id: tree.id,
                    share,
                    share_type,
                    opens: open_count as u32,
                    active: now.duration_since(tree.connected_at).unwrap_or_default(),
                    user: user.clone(),
                    client: client.clone(),
                });
            }
        }
        trees
    }

    fn open_files(&self) -> Vec<OpenFileEntry> {
        let mut files = Vec::new();
        for s in self.visible_sessions() {
            let user = s.user_name();
            let mut opens = s.opens.values();
            opens.sort_by_key(|o| o.volatile_id);
            files.extend(opens.iter().map(|o| file_entry(o, &user)));
        }
        // Opens of lost connections that wait for a durable reconnect are
        // still open files: listed, so that their owner can close them
        // early (the file stays locked for others until then).
        for o in self.waiting_opens() {
            let owner = durable_owner(&o).unwrap_or_default();
            files.push(file_entry(&o, &owner));
        }
        files
    }

    fn close_file(&self, id: u32) -> bool {
        for s in self.visible_sessions() {
            let found = s
                .opens
                .values()
                .into_iter()
                .find(|o| o.volatile_id as u32 == id);
            let Some(open) = found else {
                continue;
            };
            if s.opens.remove(&open.volatile_id).is_none() {
                return false;
            }
            // As a TREE_DISCONNECT closes its opens: the file is let go
            // of now; the client that held it gets FILE_CLOSED next time.
            tokio::spawn(crate::smb::ops::close::close_opens(vec![open]));
            return true;
        }
        let waiting = self
            .waiting_opens()
            .into_iter()
            .find(|o| o.volatile_id as u32 == id);
        if let Some(open) = waiting {
            // As its durable timeout would: a reconnect after this finds
            // no open (OBJECT_NAME_NOT_FOUND).
            let Some(open) = self.state.smb.preserved.take(open.persistent_id) else {
                return false;
            };
            tokio::task::spawn_blocking(move || crate::smb::durable::close_now(&open));
            return true;
        }
        false
    }

    fn end_sessions(&self, client: Option<&str>, user: Option<&str>) -> usize {
        let mut ended = 0;
        for s in self.visible_sessions() {
            // The caller's own session carries this very call.
            if s.id == self.caller.id {
                continue;
            }
            if user.is_some_and(|u| !s.user_name().eq_ignore_ascii_case(u)) {
                continue;
            }
            let (from, _, _) = self.client_of(&s);
            if client.is_some_and(|c| !from.eq_ignore_ascii_case(c)) {
                continue;
            }
            // As a LOGOFF ends it: its opens close (durable ones wait for
            // a reconnect), and its client learns on its next request.
            let state = self.state.clone();
            tokio::spawn(async move {
                crate::smb::ops::logoff::end_session(&state, &s).await;
            });
            ended += 1;
        }
        ended
    }

    fn transports(&self) -> Vec<TransportEntry> {
        let connections: Vec<SocketAddr> = self
            .state
            .smb
            .connections
            .values()
            .iter()
            .filter_map(|w| w.upgrade())
            .map(|c| c.local)
            .collect();
        let mut address = self.state.config().netbios_name.to_uppercase().into_bytes();
        address.resize(16, b' ');
        self.state
            .config()
            .listen
            .iter()
            .map(|listen| TransportEntry {
                connections: connections
                    .iter()
                    .filter(|local| {
                        local.port() == listen.port()
                            && (listen.ip().is_unspecified() || local.ip() == listen.ip())
                    })
                    .count() as u32,
                name: format!("\\Device\\Braid_TCP_{listen}"),
                address: address.clone(),
                network_address: listen.to_string(),
                domain: "WORKGROUP".into(),
            })
            .collect()
    }

    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn uptime(&self) -> Duration {
        SystemTime::now()
            .duration_since(self.state.start_time)
            .unwrap_or_default()
    }
}

fn durable_owner(open: &Open) -> Option<String> {
    open.durable
        .lock()
        .unwrap()
        .as_ref()
        .map(|d| d.owner.clone())
}

/// FILE_INFO_3 of one open (MS-SRVS 2.2.4.9).
fn file_entry(open: &Open, user: &str) -> OpenFileEntry {
    let access = open.granted_access;
    let mut permissions = 0;
    if access & READ_RIGHTS != 0 {
        permissions |= file_permission::READ;
    }
    if access & WRITE_RIGHTS != 0 {
        permissions |= file_permission::WRITE;
    }
    let share = open.handle.share().name().to_string();
    let path = open.handle.path();
    OpenFileEntry {
        // FILE_INFO_3's fi3_id is a DWORD; volatile ids are handed out in
        // sequence, so the low half is unique among the opens alive at once.
        id: open.volatile_id as u32,
        permissions,
        locks: open.handle.lock_count() as u32,
        path: if path.is_empty() {
            share
        } else {
            format!("{share}\\{path}")
        },
        user: user.to_string(),
    }
}
