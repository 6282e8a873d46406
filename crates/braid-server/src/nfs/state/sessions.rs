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
use std::time::Instant;

use braid_nfs_proto::nfs4::{callback_sec_parms4, channel_attrs4, sessionid4};
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

    pub fn begin(&self, slotid: u32, seqid: u32, highest: u32) -> SlotVerdict {
        self.slots.lock().unwrap().begin(slotid, seqid, highest)
    }

    pub fn finish(&self, slotid: u32, reply: Option<Bytes>) {
        self.slots.lock().unwrap().finish(slotid, reply)
    }

    pub fn abandon(&self, slotid: u32) {
        self.slots.lock().unwrap().abandon(slotid)
    }

    /// (sr_highest_slotid, sr_target_highest_slotid).
    pub fn slot_limits(&self) -> (u32, u32) {
        let t = self.slots.lock().unwrap();
        (t.highest_slotid(), t.target_highest_slotid())
    }

    pub fn set_target_highest_slotid(&self, target: u32) {
        self.slots.lock().unwrap().set_target_highest_slotid(target)
    }

    pub fn requests_in_progress(&self) -> usize {
        self.slots.lock().unwrap().in_progress()
    }

    /// Bind a connection to the fore and/or back channel. Returns whether
    /// it was new to the fore channel.
    pub fn bind(&self, conn: u64, fore: bool, back: bool) -> bool {
        let mut ch = self.channels.lock().unwrap();
        let mut new = false;
        if fore && !ch.fore.contains(&conn) {
            ch.fore.push(conn);
            ch.fore_max = ch.fore_max.max(ch.fore.len());
            new = true;
        }
        if back && !ch.back.contains(&conn) {
            ch.back.push(conn);
            self.callback.lock().unwrap().path_down = false;
        }
        new
    }

    pub fn is_bound(&self, conn: u64) -> bool {
        let ch = self.channels.lock().unwrap();
        ch.fore.contains(&conn) || ch.back.contains(&conn)
    }

    pub fn is_fore_bound(&self, conn: u64) -> bool {
        self.channels.lock().unwrap().fore.contains(&conn)
    }

    /// A connection closed: it leaves both channels. The session and its
    /// state stay (RFC 8881 2.10.3.1: losing a connection loses nothing).
    pub fn unbind(&self, conn: u64) {
        let mut ch = self.channels.lock().unwrap();
        ch.fore.retain(|&c| c != conn);
        let had_back = !ch.back.is_empty();
        ch.back.retain(|&c| c != conn);
        if had_back && ch.back.is_empty() {
            self.callback.lock().unwrap().path_down = true;
        }
    }

    /// Connections of the fore channel now, and the most it had.
    pub fn fore_connections(&self) -> (usize, usize) {
        let ch = self.channels.lock().unwrap();
        (ch.fore.len(), ch.fore_max)
    }

    /// The connections of the backchannel, most recently bound last.
    pub fn back_connections(&self) -> Vec<u64> {
        self.channels.lock().unwrap().back.clone()
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
        self.map.read().unwrap().get(id).cloned()
    }

    pub fn insert(&self, session: Arc<Session>) {
        self.map.write().unwrap().insert(session.id, session);
    }

    pub fn remove(&self, id: &sessionid4) -> Option<Arc<Session>> {
        self.map.write().unwrap().remove(id)
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
        self.map.read().unwrap().values().cloned().collect()
    }

    pub fn connection_lost(&self, conn: u64) {
        for s in self.map.read().unwrap().values() {
            s.unbind(conn);
        }
    }
}
