//! Durable opens (MS-SMB2 3.3.1.10 Open.IsDurable, 3.3.5.9.6 / 3.3.5.9.10
//! grants, 3.3.5.9.7 / 3.3.5.9.12 reconnects, 3.3.7.1 connection loss).
//!
//! A durable open outlives its connection: when the last channel of its
//! session is lost it leaves the session and waits here, file handle,
//! byte-range locks, oplock or lease and all, until the client reconnects
//! it with a DHnC/DH2C create context or its timeout runs out. While it
//! waits it cannot be told of a break, so a new open that would break it
//! closes it instead (oplock::FileOplocks). LOGOFF, TREE_DISCONNECT and
//! CLOSE end durable opens like any other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tracing::debug;

use crate::sharded::ShardedMap;
use crate::smb::session::{Open, Session, SessionPhase};
use crate::state::ServerState;

/// How long a version 1 durable open waits for its client (implementation
/// specific, MS-SMB2 3.3.7.1). Samba's 60 s rather than Windows' 16 min:
/// an abandoned handle keeps its share modes and locks that long.
pub const V1_TIMEOUT: Duration = Duration::from_secs(60);
/// MS-SMB2 3.3.5.9.10: the timeout used when a DH2Q asks for 0.
pub const V2_DEFAULT_TIMEOUT_MS: u32 = 60_000;
/// The longest timeout granted to a DH2Q (Windows caps it at 300 s).
pub const V2_MAX_TIMEOUT_MS: u32 = 300_000;

/// What a durable open is reconnected against.
#[derive(Clone, Debug)]
pub struct Durability {
    /// 1 (DHnQ) or 2 (DH2Q).
    pub version: u8,
    /// MS-SMB2 3.3.1.10 Open.IsPersistent (`persistent.rs`).
    pub persistent: bool,
    /// MS-SMB2 3.3.1.10 Open.CreateGuid (version 2).
    pub create_guid: [u8; 16],
    /// Open.DurableOpenTimeout.
    pub timeout: Duration,
    /// Open.DurableOwner: the user who opened it.
    pub owner: String,
    /// Open.ClientGuid.
    pub client_guid: [u8; 16],
    /// Open.AppInstanceId (MS-SMB2 3.3.5.9.13).
    pub app_instance: Option<[u8; 16]>,
    /// Open.ApplicationInstanceVersionHigh and Low.
    pub app_version: Option<(u64, u64)>,
    /// The share it was opened on (lower-cased).
    pub share: String,
    /// The CreateAction the create that made it answered (MS-SMB2 2.2.14):
    /// a replay of that create answers it again, also after a restart
    /// (`persistent.rs`).
    pub create_action: u32,
}

/// The timeout granted for a DH2Q asking for `requested` milliseconds.
pub fn v2_timeout_ms(requested: u32) -> u32 {
    match requested {
        0 => V2_DEFAULT_TIMEOUT_MS,
        t => t.min(V2_MAX_TIMEOUT_MS),
    }
}

/// Disconnected durable opens, by persistent file id.
#[derive(Default)]
pub struct PreservedOpens {
    opens: ShardedMap<u64, Arc<Open>>,
    reconnects: AtomicU64,
    expired: AtomicU64,
    restored: AtomicU64,
}

/// What `/metrics` shows of durable and persistent opens.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DurableCounts {
    pub waiting: u64,
    pub reconnects: u64,
    pub expired: u64,
    pub restored: u64,
}

impl PreservedOpens {
    /// Keep `open` after its connection was lost; it is closed if nobody
    /// reconnects it within its timeout or a new open must break it.
    pub fn preserve(self: &Arc<Self>, open: Arc<Open>) {
        let Some((timeout, persistent)) = open
            .durable
            .lock()
            .unwrap()
            .as_ref()
            .map(|d| (d.timeout, d.persistent))
        else {
            return;
        };
        let generation = open.disconnects.fetch_add(1, Ordering::AcqRel) + 1;
        let id = open.persistent_id;
        match &open.oplock {
            // MS-SMB2 3.3.4.6 / 3.3.4.7: a persistent open is never closed
            // for a break; the opens that need one are refused meanwhile.
            Some(o) if persistent => o.file.park(o.key),
            Some(o) => {
                let me = Arc::downgrade(self);
                let weak_open = Arc::downgrade(&open);
                o.file.disconnect(
                    o.key,
                    Arc::new(move || {
                        // The open may not be in the table yet (a new open can
                        // purge it as soon as it is marked disconnected), so it
                        // is closed through its own reference as well.
                        if let Some(t) = me.upgrade() {
                            t.opens.remove(&id);
                        }
                        if let Some(open) = weak_open.upgrade() {
                            debug!(
                                file = id,
                                "disconnected durable open closed by a conflicting open"
                            );
                            close_now(&open);
                        }
                    }),
                );
            }
            None => {}
        }
        self.opens.insert(id, open.clone());
        if open.closed.load(Ordering::Acquire) {
            // Purged between being marked and being kept.
            self.opens.remove(&id);
            return;
        }
        let me: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            let Some(table) = me.upgrade() else { return };
            let expired = table.opens.drain_where(|o| {
                o.persistent_id == id && o.disconnects.load(Ordering::Acquire) == generation
            });
            if !expired.is_empty() {
                debug!(file = id, "durable open timed out");
                table
                    .expired
                    .fetch_add(expired.len() as u64, Ordering::Relaxed);
                let _ =
                    tokio::task::spawn_blocking(move || expired.iter().for_each(close_now)).await;
            }
        });
    }

    pub fn get(&self, persistent_id: u64) -> Option<Arc<Open>> {
        self.opens.get(&persistent_id)
    }

    /// Take a disconnected open back for a reconnect.
    pub fn take(&self, persistent_id: u64) -> Option<Arc<Open>> {
        let open = self.opens.remove(&persistent_id);
        if open.is_some() {
            self.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        open
    }

    /// An open restored from the state store at start.
    pub fn count_restored(&self) {
        self.restored.fetch_add(1, Ordering::Relaxed);
    }

    pub fn counts(&self) -> DurableCounts {
        DurableCounts {
            waiting: self.opens.len() as u64,
            reconnects: self.reconnects.load(Ordering::Relaxed),
            expired: self.expired.load(Ordering::Relaxed),
            restored: self.restored.load(Ordering::Relaxed),
        }
    }

    pub fn len(&self) -> usize {
        self.opens.len()
    }

    /// Every disconnected open now (the admin view).
    pub fn all(&self) -> Vec<Arc<Open>> {
        self.opens.values()
    }

    pub fn is_empty(&self) -> bool {
        self.opens.is_empty()
    }

    /// Whether a disconnected open matches `pred` (app instance checks).
    pub fn any(&self, pred: impl FnMut(&Arc<Open>) -> bool) -> bool {
        self.opens.any(pred)
    }

    /// Disconnected opens that match `pred` (app instance checks).
    pub fn take_where(&self, pred: impl FnMut(&Arc<Open>) -> bool) -> Vec<Arc<Open>> {
        self.opens.drain_where(pred)
    }
}

/// Close an open that no session holds any more.
pub fn close_now(open: &Arc<Open>) {
    if open.mark_closed() {
        let _ = open.close_handle();
        open.release_caching();
    }
}

/// MS-SMB2 3.3.7.1: the last channel of `session` was lost. Durable opens
/// are kept for a reconnect; every other open is closed.
pub async fn disconnect_session(server: &Arc<ServerState>, session: &Arc<Session>) {
    session.set_phase(SessionPhase::Expired);
    let opens = session.take_opens_of_tree(None);
    session.trees.lock().unwrap().clear();
    let (kept, closed): (Vec<_>, Vec<_>) = opens
        .into_iter()
        .partition(|o| o.is_durable() && !o.closed.load(Ordering::Acquire));
    for o in kept {
        debug!(
            session = session.id,
            file = o.persistent_id,
            "durable open kept"
        );
        server.smb.preserved.preserve(o);
    }
    crate::smb::ops::close::close_opens(closed).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_timeouts_default_and_cap() {
        assert_eq!(v2_timeout_ms(0), V2_DEFAULT_TIMEOUT_MS);
        assert_eq!(v2_timeout_ms(1_000), 1_000);
        assert_eq!(v2_timeout_ms(u32::MAX), V2_MAX_TIMEOUT_MS);
    }
}
