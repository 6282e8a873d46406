//! Oplocks (MS-SMB2 3.3.1.10 Open.OplockLevel/OplockState, 3.3.4.6 break
//! notifications, 3.3.5.9 grants, 3.3.5.22.1 acknowledgments).
//!
//! One `FileOplocks` per file (share + stable file id) lists every SMB open
//! of that file with its level. A new open breaks exclusive/batch holders
//! and waits (asynchronously) for their acknowledgment, their close, or the
//! acknowledgment timeout; a write breaks level II holders without waiting.
//!
//! Kept in the SMB server rather than the file service for now: the file
//! service has no notion of a break channel yet. When NFS delegations land,
//! this state moves into braid-fs so that both protocols break each other.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use braid_smb_proto::codec::{FileId, Message};
use braid_smb_proto::header::{flags, Command, Header, HEADER_LEN};
use braid_smb_proto::messages::create::oplock_level;
use braid_smb_proto::messages::oplock_break::OplockBreakNotification;
use bytes::Bytes;
use tokio::sync::Notify;
use tracing::debug;

use crate::conn::Connection;
use crate::session::Session;
use crate::sharded::ShardedMap;

/// MS-SMB2 3.3.2.1 Oplock Break Acknowledgment Timer (Windows: 35 s).
pub const BREAK_ACK_TIMEOUT: Duration = Duration::from_secs(35);

#[derive(Clone)]
struct Holder {
    open_key: u64,
    file_id: FileId,
    level: u8,
    breaking_to: Option<u8>,
    conn: Weak<Connection>,
    session: Weak<Session>,
}

/// The oplock state of one file.
#[derive(Default)]
pub struct FileOplocks {
    holders: Mutex<Vec<Holder>>,
    changed: Notify,
}

/// Server-wide table: (share name, file id) → state.
#[derive(Default)]
pub struct OplockTable {
    /// Weak: the opens own their file's state; dead entries are pruned.
    files: ShardedMap<(String, u64), Weak<FileOplocks>>,
    next_key: std::sync::atomic::AtomicU64,
}

/// What an open holds: its file's state and its own key in it.
pub struct OplockRef {
    pub file: Arc<FileOplocks>,
    pub key: u64,
}

/// How a new open affects existing holders (MS-FSA 2.1.5.17.2).
#[derive(Clone, Copy)]
pub struct NewOpen {
    /// The new open replaces the data (overwrite/supersede): break to none.
    pub overwrites: bool,
}

impl OplockTable {
    pub fn file(&self, share: &str, file_id: u64) -> Arc<FileOplocks> {
        let key = (share.to_lowercase(), file_id);
        if let Some(f) = self.files.get(&key).and_then(|w| w.upgrade()) {
            return f;
        }
        let f = Arc::new(FileOplocks::default());
        self.files.insert(key, Arc::downgrade(&f));
        let n = self.next_key.load(std::sync::atomic::Ordering::Relaxed);
        if n.is_multiple_of(1024) {
            self.files.drain_where(|w| w.strong_count() == 0);
        }
        f
    }

    pub fn new_key(&self) -> u64 {
        self.next_key
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1
    }
}

impl OplockRef {
    /// Close: drop the open's entry and wake anyone waiting for it.
    pub fn release(&self) {
        self.file
            .holders
            .lock()
            .unwrap()
            .retain(|h| h.open_key != self.key);
        self.file.changed.notify_waiters();
    }
}

impl FileOplocks {
    /// MS-SMB2 3.3.5.9 step "oplock": break conflicting holders and wait
    /// until they acknowledged, closed, or timed out. `went_async` is called
    /// once if the caller has to wait.
    pub async fn break_for_new_open(&self, new: NewOpen, mut went_async: impl FnMut()) {
        let deadline = tokio::time::Instant::now() + BREAK_ACK_TIMEOUT;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let waiting = {
                let mut holders = self.holders.lock().unwrap();
                let mut waiting = false;
                for h in holders.iter_mut() {
                    let target = if new.overwrites {
                        oplock_level::NONE
                    } else {
                        oplock_level::LEVEL_II
                    };
                    if h.level >= oplock_level::EXCLUSIVE {
                        if h.breaking_to.is_none() {
                            h.breaking_to = Some(target);
                            send_break(h, target);
                        }
                        waiting = true;
                    } else if h.level == oplock_level::LEVEL_II && new.overwrites {
                        // Level II breaks need no acknowledgment (3.3.4.6).
                        send_break(h, oplock_level::NONE);
                        h.level = oplock_level::NONE;
                    }
                }
                waiting
            };
            if !waiting {
                return;
            }
            went_async();
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                // 3.3.2.1: no acknowledgment in time; the break completes.
                let mut holders = self.holders.lock().unwrap();
                for h in holders.iter_mut() {
                    if let Some(t) = h.breaking_to.take() {
                        h.level = t;
                    }
                }
                return;
            }
        }
    }

    /// Register a new open and decide its level (MS-SMB2 3.3.5.9).
    pub fn grant(
        &self,
        key: u64,
        requested: u8,
        is_directory: bool,
        file_id: FileId,
        conn: &Arc<Connection>,
        session: &Arc<Session>,
    ) -> u8 {
        let mut holders = self.holders.lock().unwrap();
        let others = holders.iter().any(|h| h.open_key != key);
        let level = if is_directory || requested == oplock_level::LEASE {
            // Leases are not offered yet; directories take no oplocks.
            oplock_level::NONE
        } else if !others {
            requested
        } else if requested >= oplock_level::LEVEL_II
            && holders
                .iter()
                .all(|h| h.level <= oplock_level::LEVEL_II && h.breaking_to.is_none())
        {
            oplock_level::LEVEL_II
        } else {
            oplock_level::NONE
        };
        holders.push(Holder {
            open_key: key,
            file_id,
            level,
            breaking_to: None,
            conn: Arc::downgrade(conn),
            session: Arc::downgrade(session),
        });
        level
    }

    /// A write or truncation through one open breaks the level II oplocks
    /// of the others to none (MS-FSA 2.1.4.12); no acknowledgment is due.
    pub fn break_level2_except(&self, key: u64) {
        let mut holders = self.holders.lock().unwrap();
        for h in holders
            .iter_mut()
            .filter(|h| h.open_key != key && h.level == oplock_level::LEVEL_II)
        {
            send_break(h, oplock_level::NONE);
            h.level = oplock_level::NONE;
        }
    }

    /// MS-SMB2 3.3.5.22.1: an acknowledgment. Returns the new level, or
    /// None when no break was in progress or the level is not allowed.
    pub fn acknowledge(&self, key: u64, level: u8) -> Option<u8> {
        let mut holders = self.holders.lock().unwrap();
        let h = holders.iter_mut().find(|h| h.open_key == key)?;
        let target = h.breaking_to?;
        if level > target {
            return None;
        }
        h.level = level;
        h.breaking_to = None;
        drop(holders);
        self.changed.notify_waiters();
        Some(level)
    }

    pub fn level_of(&self, key: u64) -> u8 {
        self.holders
            .lock()
            .unwrap()
            .iter()
            .find(|h| h.open_key == key)
            .map(|h| h.level)
            .unwrap_or(0)
    }
}

/// MS-SMB2 3.3.4.6: an oplock break notification (MessageId all ones,
/// no session, unsigned; encrypted when the holder's session encrypts).
fn send_break(h: &Holder, level: u8) {
    // MS-SMB2 3.3.4.6: on the connection of the open, or, once that is
    // gone, on any live channel of the holder's session.
    let conn = h
        .conn
        .upgrade()
        .filter(|c| !c.closing.is_cancelled())
        .or_else(|| {
            let s = h.session.upgrade()?;
            let preferred = h.conn.upgrade().map(|c| c.id).unwrap_or(0);
            s.live_connection(preferred)
        });
    let Some(conn) = conn else { return };
    let hdr = Header {
        command: Command::OplockBreak as u16,
        flags: flags::SERVER_TO_REDIR,
        message_id: u64::MAX,
        ..Default::default()
    };
    let mut msg = Vec::with_capacity(HEADER_LEN + 24);
    hdr.encode(&mut msg);
    OplockBreakNotification {
        oplock_level: level,
        file_id: h.file_id,
    }
    .encode(&mut msg);
    debug!(conn = conn.id, level, "oplock break");
    let session = h.session.upgrade();
    let encrypt = session
        .as_ref()
        .filter(|s| s.encrypt_data.load(std::sync::atomic::Ordering::Relaxed));
    if crate::smb::frame::send_frame(&conn, encrypt.map(|s| s.as_ref()), vec![Bytes::from(msg)])
        .is_err()
    {
        conn.closing.cancel();
    }
}
