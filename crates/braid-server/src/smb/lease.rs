//! Leases (MS-SMB2 3.3.1.4 Lease and LeaseTable, 3.3.4.7 lease break
//! notifications, 3.3.5.9.8 / 3.3.5.9.11 lease contexts, 3.3.5.22.2 lease
//! acknowledgments).
//!
//! A lease belongs to a client (ClientGuid) and a key the client chose; all
//! opens of one file made with that key share it. Its caching state (Read,
//! Handle, Write) is decided and broken together with the file's oplocks in
//! [`crate::smb::oplock::FileOplocks`]; this module holds the lease objects, the
//! server-wide table that finds them by key, and the wire messages.

use std::sync::{Arc, Mutex, Weak};

use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::lease::{lease_flags, LeaseContext};
use braid_smb_proto::messages::oplock_break::{lease_break_flags, lease_state};
use braid_smb_proto::messages::LeaseBreakNotification;
use tracing::debug;

use crate::sharded::ShardedMap;
use crate::smb::conn::Connection;
use crate::smb::oplock::FileOplocks;
use crate::smb::session::Session;

pub const R: u32 = lease_state::READ_CACHING;
pub const H: u32 = lease_state::HANDLE_CACHING;
pub const W: u32 = lease_state::WRITE_CACHING;

/// (ClientGuid, LeaseKey): what names a lease (MS-SMB2 3.3.1.4).
pub type LeaseId = ([u8; 16], [u8; 16]);

/// The part of a lease that changes.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeaseState {
    pub state: u32,
    /// Set while a break waits for its acknowledgment: the state the
    /// notification asked for (MS-SMB2 3.3.1.4 Lease.BreakToLeaseState).
    pub breaking_to: Option<u32>,
    /// What later conflicts need while that break is in progress; after
    /// the acknowledgment the lease is broken further down to it.
    pub required: u32,
    pub epoch: u16,
}

pub struct Lease {
    pub id: LeaseId,
    pub version: u8,
    pub parent_key: Option<[u8; 16]>,
    /// The file the lease is on: a key names one file only.
    pub file: Weak<FileOplocks>,
    pub st: Mutex<LeaseState>,
}

impl Lease {
    /// The lease context for a CREATE response (MS-SMB2 2.2.14.2.10/.11),
    /// in the version the lease was created with.
    pub fn response_context(&self) -> LeaseContext {
        let st = *self.st.lock().unwrap();
        let mut flags = 0;
        if st.breaking_to.is_some() {
            flags |= lease_flags::BREAK_IN_PROGRESS;
        }
        if self.version >= 2 && self.parent_key.is_some() {
            flags |= lease_flags::PARENT_LEASE_KEY_SET;
        }
        LeaseContext {
            version: self.version,
            key: self.id.1,
            state: st.state,
            flags,
            duration: 0,
            parent_key: if self.version >= 2 {
                self.parent_key.unwrap_or_default()
            } else {
                [0; 16]
            },
            epoch: if self.version >= 2 { st.epoch } else { 0 },
        }
    }

    /// Start breaking `st` down to `to` and build the notification
    /// (MS-SMB2 3.3.4.7). A break from Read alone needs no acknowledgment
    /// and takes effect at once; otherwise the lease waits in `breaking_to`.
    pub fn begin_break(&self, st: &mut LeaseState, to: u32) -> LeaseBreakNotification {
        self.start_break(st, to, true)
    }

    /// The next break of a chain, sent as the previous one is acknowledged
    /// because the opens waiting need less still: it carries the epoch of
    /// the break that started the chain, as Windows and Samba send it
    /// (smbtorture smb2.lease.v2_breaking3).
    pub fn continue_break(&self, st: &mut LeaseState, to: u32) -> LeaseBreakNotification {
        self.start_break(st, to, false)
    }

    fn start_break(&self, st: &mut LeaseState, to: u32, new_epoch: bool) -> LeaseBreakNotification {
        let from = st.state;
        let ack = from & (W | H) != 0;
        if self.version >= 2 && new_epoch {
            st.epoch = st.epoch.wrapping_add(1);
        }
        if ack {
            st.breaking_to = Some(to);
            st.required = to;
        } else {
            st.state = to;
        }
        LeaseBreakNotification {
            new_epoch: if self.version >= 2 { st.epoch } else { 0 },
            flags: if ack {
                lease_break_flags::ACK_REQUIRED
            } else {
                0
            },
            lease_key: self.id.1,
            current_lease_state: from,
            new_lease_state: to,
            break_reason: 0,
            access_mask_hint: 0,
            share_mask_hint: 0,
        }
    }
}

/// MS-SMB2 3.3.1.5 GlobalLeaseTableList: leases by (ClientGuid, key). The
/// opens own their lease; an entry dies with the last open using it.
#[derive(Default)]
pub struct LeaseTable {
    leases: ShardedMap<LeaseId, Weak<Lease>>,
}

impl LeaseTable {
    pub fn get(&self, id: &LeaseId) -> Option<Arc<Lease>> {
        self.leases.get(id).and_then(|w| w.upgrade())
    }

    pub fn insert(&self, lease: &Arc<Lease>) {
        // Entries of closed leases are dropped as the table doubles.
        let n = self.leases.len();
        if n >= 1024 && n.is_power_of_two() {
            self.leases.drain_where(|w| w.strong_count() == 0);
        }
        self.leases.insert(lease.id, Arc::downgrade(lease));
    }
}

/// After an acknowledgment left `state` above what conflicts required: the
/// next break. Handle and write caching go first, read caching last, as
/// Windows does.
pub fn next_break(state: u32, required: u32) -> Option<u32> {
    if state & !required == 0 {
        return None;
    }
    let without_handle = state & !(H | W);
    if state & H != 0 && required & H == 0 && without_handle != state {
        return Some(without_handle | (required & R));
    }
    Some(required)
}

/// The connection lease breaks go on (MS-SMB2 3.3.4.7: a connection of
/// the lease's client): the client's oldest live connection, found from
/// `any` (some connection of the server), else `fallback`.
pub fn lease_connection(
    client_guid: &[u8; 16],
    any: Option<Arc<Connection>>,
    fallback: Option<Arc<Connection>>,
) -> Option<Arc<Connection>> {
    let server = any.as_ref().or(fallback.as_ref())?.server.clone();
    server
        .smb
        .connections
        .values()
        .into_iter()
        .filter_map(|w| w.upgrade())
        .filter(|c| !c.closing.is_cancelled())
        .filter(|c| {
            c.negotiated
                .get()
                .is_some_and(|n| n.client_guid == *client_guid)
        })
        .min_by_key(|c| c.id)
        .or(fallback)
}

/// Send a lease break notification on `conn` (MS-SMB2 3.3.4.7: MessageId
/// all ones, no session; encrypted when the session encrypts).
pub fn send_lease_break(
    conn: &Arc<Connection>,
    session: Option<&Arc<Session>>,
    n: &LeaseBreakNotification,
) {
    let mut msg = crate::smb::break_delivery::break_header(44);
    n.encode(&mut msg);
    debug!(
        conn = conn.id,
        from = n.current_lease_state,
        to = n.new_lease_state,
        "lease break"
    );
    crate::smb::break_delivery::deliver_break(conn.clone(), session.cloned(), msg);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_an_acknowledgment_handle_goes_before_read() {
        // Acked RH while an overwrite needs none: first to R, then to none.
        assert_eq!(next_break(R | H, 0), Some(R));
        assert_eq!(next_break(R, 0), Some(0));
        // Nothing more is needed.
        assert_eq!(next_break(R | H, R | H), None);
        assert_eq!(next_break(0, 0), None);
        // A sharing violation needs Handle gone but Read may stay.
        assert_eq!(next_break(R | H, R), Some(R));
    }

    #[test]
    fn a_break_from_read_alone_needs_no_acknowledgment() {
        let lease = Lease {
            id: ([1; 16], [2; 16]),
            version: 2,
            parent_key: None,
            file: Weak::new(),
            st: Mutex::new(LeaseState::default()),
        };
        let mut st = LeaseState {
            state: R,
            breaking_to: None,
            required: R,
            epoch: 5,
        };
        let n = lease.begin_break(&mut st, 0);
        assert_eq!(n.flags, 0);
        assert_eq!((st.state, st.breaking_to, n.new_epoch), (0, None, 6));
        let mut st = LeaseState {
            state: R | W | H,
            breaking_to: None,
            required: R | W | H,
            epoch: 1,
        };
        let n = lease.begin_break(&mut st, R | H);
        assert_eq!(n.flags, lease_break_flags::ACK_REQUIRED);
        assert_eq!(n.current_lease_state, R | W | H);
        assert_eq!((st.state, st.breaking_to), (R | W | H, Some(R | H)));
    }
}
