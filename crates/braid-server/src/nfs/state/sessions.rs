//! Sessions (RFC 8881 2.10): the fore channel's slot table, the
//! connections bound to each channel, and the backchannel's parameters.
//!
//! Linux's `nconnect=N` adds connections to a session by sending SEQUENCE
//! on them (RFC 8881 2.10.3.1: such a connection is bound to the fore
//! channel); the backchannel is bound only when the client asks for it
//! (CREATE_SESSION's CONN_BACK_CHAN flag, BIND_CONN_TO_SESSION,
//! BACKCHANNEL_CTL), never implicitly.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Instant, SystemTime};

use braid_nfs_proto::nfs4::{
    callback_sec_parms4, channel_attrs4, sessionid4, SEQ4_STATUS_CB_PATH_DOWN,
    SEQ4_STATUS_CB_PATH_DOWN_SESSION,
};
use bytes::Bytes;

use super::clients::Client;
use super::slots::{SlotTable, SlotVerdict};

pub struct Session {
    pub id: sessionid4,
    pub client: Arc<Client>,
    pub fore: channel_attrs4,
    pub back: channel_attrs4,
    /// csr_flags as granted.
    pub flags: u32,
    slots: Mutex<SlotTable>,
    channels: Mutex<Channels>,
    pub callback: Mutex<Callback>,
    pub created: Instant,
}

/// Connections bound to the session, by connection id.
#[derive(Default, Debug)]
struct Channels {
    fore: Vec<u64>,
    back: Vec<u64>,
    /// The most connections the fore channel had at once.
    fore_max: usize,
    /// When each connection was bound (admin view).
    bound_at: HashMap<u64, SystemTime>,
}

/// One connection of a session, for the admin view.
pub struct ChannelInfo {
    pub conn: u64,
    pub fore: bool,
    pub back: bool,
    pub bound_at: SystemTime,
}

/// What the server needs to call the client back (RFC 8881 18.36, 18.33).
#[derive(Debug)]
pub struct Callback {
    pub program: u32,
    pub sec_parms: Vec<callback_sec_parms4>,
    /// The backchannel's one slot's sequence id (CB_SEQUENCE).
    pub seqid: u32,
    /// A backchannel existed and every connection of it was lost.
    pub path_down: bool,
    /// The minor version of the CREATE_SESSION that made the session: its
    /// CB_COMPOUNDs carry the same (RFC 8881 20.2; a 4.2 client's callback
    /// service refuses 4.1's).
    pub minorversion: u32,
}

impl Session {
    pub fn new(
        id: sessionid4,
        client: Arc<Client>,
        fore: channel_attrs4,
        back: channel_attrs4,
        flags: u32,
        callback: Callback,
    ) -> Session {
        let slots = SlotTable::new(fore.ca_maxrequests);
        Session {
            id,
            client,
            fore,
            back,
            flags,
            slots: Mutex::new(slots),
            channels: Mutex::new(Channels::default()),
            callback: Mutex::new(callback),
            created: Instant::now(),
        }
    }

    pub fn begin(&self, slotid: u32, seqid: u32, highest: u32, fingerprint: u64) -> SlotVerdict {
        self.slots().begin(slotid, seqid, highest, fingerprint)
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, SlotTable> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn channels(&self) -> std::sync::MutexGuard<'_, Channels> {
        self.channels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Slots in the table, and how many hold a request running now.
    pub fn slot_usage(&self) -> (u32, usize) {
        let t = self.slots();
        (t.len(), t.in_progress())
    }

    /// Whether the session ever had a backchannel connection and has none
    /// now (the connections bound to it were lost).
    pub fn back_channel_lost(&self) -> bool {
        self.callback
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .path_down
    }

    /// Whether a connection is bound to the backchannel now.
    pub fn has_back_channel(&self) -> bool {
        !self.channels().back.is_empty()
    }

    /// Every connection bound to the session now, in the order bound.
    pub fn channel_list(&self) -> Vec<ChannelInfo> {
        let ch = self.channels();
        let mut out: Vec<ChannelInfo> = ch
            .bound_at
            .iter()
            .map(|(&conn, &bound_at)| ChannelInfo {
                conn,
                fore: ch.fore.contains(&conn),
                back: ch.back.contains(&conn),
                bound_at,
            })
            .collect();
        out.sort_by_key(|c| (c.bound_at, c.conn));
        out
    }

    /// The connections of the fore channel now.
    pub fn fore_connection_ids(&self) -> Vec<u64> {
        self.channels().fore.clone()
    }

    pub fn finish(&self, slotid: u32, reply: Option<Bytes>) {
        self.slots().finish(slotid, reply)
    }

    pub fn abandon(&self, slotid: u32) {
        self.slots().abandon(slotid)
    }

    /// (sr_highest_slotid, sr_target_highest_slotid).
    pub fn slot_limits(&self) -> (u32, u32) {
        let t = self.slots();
        (t.highest_slotid(), t.target_highest_slotid())
    }

    pub fn set_target_highest_slotid(&self, target: u32) {
        self.slots().set_target_highest_slotid(target)
    }

    pub fn requests_in_progress(&self) -> usize {
        self.slots().in_progress()
    }

    /// Bind a connection to the fore and/or back channel. Returns whether
    /// it was new to the fore channel.
    pub fn bind(&self, conn: u64, fore: bool, back: bool) -> bool {
        let mut ch = self.channels();
        let mut new = false;
        ch.bound_at.entry(conn).or_insert_with(SystemTime::now);
        if fore && !ch.fore.contains(&conn) {
            ch.fore.push(conn);
            ch.fore_max = ch.fore_max.max(ch.fore.len());
            new = true;
        }
        if back && !ch.back.contains(&conn) {
            ch.back.push(conn);
            self.callback
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .path_down = false;
        }
        new
    }

    pub fn is_bound(&self, conn: u64) -> bool {
        let ch = self.channels();
        ch.fore.contains(&conn) || ch.back.contains(&conn)
    }

    pub fn is_fore_bound(&self, conn: u64) -> bool {
        self.channels().fore.contains(&conn)
    }

    /// A connection closed: it leaves both channels. The session and its
    /// state stay (RFC 8881 2.10.3.1: losing a connection loses nothing).
    pub fn unbind(&self, conn: u64) {
        let mut ch = self.channels();
        ch.fore.retain(|&c| c != conn);
        let had_back = !ch.back.is_empty();
        ch.back.retain(|&c| c != conn);
        ch.bound_at.remove(&conn);
        if had_back && ch.back.is_empty() {
            self.callback
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .path_down = true;
        }
    }

    /// Connections of the fore channel now, and the most it had.
    pub fn fore_connections(&self) -> (usize, usize) {
        let ch = self.channels();
        (ch.fore.len(), ch.fore_max)
    }

    /// The connections of the backchannel, most recently bound last.
    pub fn back_connections(&self) -> Vec<u64> {
        self.channels().back.clone()
    }
}

/// Sessions by id. Looked up on every SEQUENCE: a read lock.
#[derive(Default)]
pub struct SessionTable {
    map: RwLock<HashMap<sessionid4, Arc<Session>>>,
    next: AtomicU32,
}

impl SessionTable {
    pub fn get(&self, id: &sessionid4) -> Option<Arc<Session>> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    pub fn insert(&self, session: Arc<Session>) {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session.id, session);
    }

    pub fn remove(&self, id: &sessionid4) -> Option<Arc<Session>> {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
    }

    /// A new session id: the client id, a counter and randomness, so ids
    /// are never reused within a run nor guessable across clients.
    pub fn new_id(&self, clientid: u64) -> sessionid4 {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let r: u32 = rand::random();
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&clientid.to_be_bytes());
        id[8..12].copy_from_slice(&n.to_be_bytes());
        id[12..].copy_from_slice(&r.to_be_bytes());
        id
    }

    pub fn all(&self) -> Vec<Arc<Session>> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// RFC 8881 18.46.3: the sr_status_flags of a SEQUENCE on `session`.
    /// SEQ4_STATUS_CB_PATH_DOWN_SESSION when this session's backchannel
    /// was lost, SEQ4_STATUS_CB_PATH_DOWN when moreover no session of the
    /// client has one (the client then binds a connection anew with
    /// BIND_CONN_TO_SESSION or CREATE_SESSION), and whatever the state code
    /// raised on the client (revoked state).
    pub fn status_flags(&self, session: &Session) -> u32 {
        let mut flags = session
            .client
            .status_flags
            .load(std::sync::atomic::Ordering::Acquire);
        if session.back_channel_lost() {
            flags |= SEQ4_STATUS_CB_PATH_DOWN_SESSION;
            let ids = session
                .client
                .sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let any_back = ids
                .iter()
                .filter_map(|id| self.get(id))
                .any(|s| s.has_back_channel());
            if !any_back {
                flags |= SEQ4_STATUS_CB_PATH_DOWN;
            }
        }
        flags
    }

    /// Whether a connection is bound to some session's backchannel.
    pub fn is_back_bound(&self, conn: u64) -> bool {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .any(|s| s.back_connections().contains(&conn))
    }

    pub fn connection_lost(&self, conn: u64) {
        for s in self.map.read().unwrap_or_else(|e| e.into_inner()).values() {
            s.unbind(conn);
        }
    }
}
