//! Oplocks and the caching state of leases, decided and broken together
//! (MS-SMB2 3.3.1.10 Open.OplockLevel/OplockState, 3.3.4.6 and 3.3.4.7
//! break notifications, 3.3.5.9 grants, 3.3.5.22 acknowledgments; the
//! break rules of MS-FSA 2.1.4.12).
//!
//! One `FileOplocks` per file (share + stable file id) lists every SMB open
//! of that file with its oplock level or its lease. A new open breaks what
//! conflicts with it and waits (asynchronously) for the acknowledgments it
//! needs, the holders' close, or the acknowledgment timeout; a write breaks
//! read caching without waiting.
//!
//! Kept in the SMB server rather than the file service for now: the file
//! service has no notion of a break channel yet. When NFS delegations land,
//! this state moves into braid-fs so that both protocols break each other.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use braid_smb_proto::codec::{FileId, Message};
use braid_smb_proto::messages::create::oplock_level;
use braid_smb_proto::messages::lease::LeaseContext;
use braid_smb_proto::messages::oplock_break::OplockBreakNotification;
use braid_smb_proto::messages::LeaseBreakNotification;
use braid_smb_proto::NtStatus;
use tokio::sync::Notify;
use tracing::debug;

use crate::sharded::ShardedMap;
use crate::smb::break_delivery::{break_header, deliver_break};
use crate::smb::conn::Connection;
use crate::smb::lease::{Lease, LeaseId, LeaseState, LeaseTable, H, R, W};
use crate::smb::session::Session;

mod parked;
mod unwaited;

pub use parked::RestoredLease;

/// MS-SMB2 3.3.2.1 Oplock Break Acknowledgment Timer (Windows: 35 s).
pub const BREAK_ACK_TIMEOUT: Duration = Duration::from_secs(35);

#[derive(Clone)]
struct Holder {
    open_key: u64,
    file_id: FileId,
    /// The oplock level of an oplock open (NONE for lease opens).
    level: u8,
    breaking_to: Option<u8>,
    /// Shared by every open of this file made with the same lease key.
    lease: Option<Arc<Lease>>,
    conn: Weak<Connection>,
    session: Weak<Session>,
    /// Opened for attributes only (it may still hold an oplock or lease).
    stat_open: bool,
    /// Set while the open is a disconnected durable open: a break it
    /// would need closes it instead (it cannot be told; MS-SMB2 3.3.4.6).
    purge: Option<Purge>,
    /// Set while the open is a disconnected persistent open (MS-SMB2
    /// 3.3.4.6 / 3.3.4.7: never closed for a break): it is sent no break,
    /// and a new open that would need one is refused (`parked_conflict`).
    parked: bool,
}

/// Closes a disconnected durable open (called without the holders lock).
pub type Purge = Arc<dyn Fn() + Send + Sync>;

impl Holder {
    fn has_lease(&self, id: Option<&LeaseId>) -> bool {
        match (&self.lease, id) {
            (Some(l), Some(id)) => l.id == *id,
            _ => false,
        }
    }
}

/// The oplock and lease state of one file.
#[derive(Default)]
pub struct FileOplocks {
    holders: Mutex<Vec<Holder>>,
    changed: Notify,
}

/// Server-wide table: (share name, file id) → state, plus the lease table.
#[derive(Default)]
pub struct OplockTable {
    /// Weak: the opens own their file's state; dead entries are pruned.
    files: ShardedMap<(String, u64, u64), Weak<FileOplocks>>,
    next_key: std::sync::atomic::AtomicU64,
    pub leases: LeaseTable,
}

/// What an open holds: its file's state and its own key in it.
pub struct OplockRef {
    pub file: Arc<FileOplocks>,
    pub key: u64,
}

/// How a new open affects existing holders (MS-FSA 2.1.5.1.2, 2.1.4.12).
#[derive(Clone, Copy, Default)]
pub struct NewOpen {
    /// The new open replaces the data (overwrite/supersede).
    pub overwrites: bool,
    /// The open failed the share-mode check: handle caching is broken so
    /// that holders can close their cached handles, then it is retried.
    pub sharing_violation: bool,
    /// Asks only for attributes (and SYNCHRONIZE): breaks nothing.
    pub stat_open: bool,
    /// The open asks only for attributes or the security descriptor:
    /// breaks no lease.
    pub lease_stat_open: bool,
    /// The lease the open comes with; its own lease is never broken.
    pub lease: Option<LeaseId>,
    /// An existing open causing the breaks (a rename through it): its own
    /// oplock is not broken.
    pub own_key: Option<u64>,
}

/// What a new open asks for and who it is.
pub struct GrantRequest<'a> {
    pub key: u64,
    pub requested_oplock: u8,
    /// The lease context, when the open asks for a lease.
    pub lease: Option<&'a LeaseContext>,
    pub client_guid: [u8; 16],
    pub is_directory: bool,
    pub file_id: FileId,
    pub conn: &'a Arc<Connection>,
    pub session: &'a Arc<Session>,
    /// The open asks for attribute access only (see [`NewOpen::stat_open`]).
    pub stat_open: bool,
}

/// What an open was granted: its oplock level, and its lease if any.
pub struct Granted {
    pub oplock_level: u8,
    pub lease: Option<Arc<Lease>>,
}

/// Whether caching `current` must be broken for a new open that needs
/// `must_go` gone (and, when it overwrites, Read and Handle caching too).
fn needs_break(current: u32, must_go: u32, overwrites: bool) -> bool {
    let mut to = current & !must_go;
    if overwrites {
        to &= !(H | R);
    }
    current & !to != 0
}

/// Oplock levels seen as lease states, so that one rule breaks both.
fn oplock_caching(level: u8) -> u32 {
    match level {
        oplock_level::BATCH => R | W | H,
        oplock_level::EXCLUSIVE => R | W,
        oplock_level::LEVEL_II => R,
        _ => 0,
    }
}

impl OplockTable {
    /// The caching state of file `file_id` of `share`, or of its named
    /// stream `stream` (0: the file itself; see `OpenHandle::stream_key`).
    pub fn file(&self, share: &str, file_id: u64, stream: u64) -> Arc<FileOplocks> {
        let key = (share.to_lowercase(), file_id, stream);
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

    /// The caching state of a file (not of a stream) if an open of it
    /// has one; no entry is made (other protocols ask on every write,
    /// `smb/caching.rs`).
    pub fn existing(&self, share: &str, file_id: u64) -> Option<Arc<FileOplocks>> {
        self.files
            .get(&(share.to_lowercase(), file_id, 0))
            .and_then(|w| w.upgrade())
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
    /// MS-SMB2 3.3.5.9 / MS-FSA 2.1.4.12: break what conflicts with a new
    /// open and wait until the breaks that must be acknowledged were, the
    /// holders closed, or the acknowledgment timer ran out. `went_async`
    /// is called once if the caller has to wait. Returns whether it waited.
    pub async fn break_for_new_open(&self, new: &NewOpen, mut went_async: impl FnMut()) -> bool {
        let deadline = tokio::time::Instant::now() + BREAK_ACK_TIMEOUT;
        let mut first_attempt = true;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (wait, purged) = self.send_open_breaks(new, first_attempt);
            if purged {
                // Disconnected durable opens were closed: look again, and
                // have the caller retry an open they blocked.
                first_attempt = false;
                continue;
            }
            if !wait {
                return !first_attempt;
            }
            first_attempt = false;
            went_async();
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                // 3.3.2.1 / 3.3.2.5: no acknowledgment in time; the breaks
                // complete as if acknowledged.
                self.complete_breaks();
                return true;
            }
        }
    }

    /// Send the breaks a new open causes: (must wait for them, closed
    /// disconnected durable opens instead). Write caching is broken for
    /// any open, handle caching too when the open hit a sharing violation,
    /// read and handle caching when it overwrites; the open waits for what
    /// it needs gone.
    fn send_open_breaks(&self, new: &NewOpen, first_attempt: bool) -> (bool, bool) {
        if new.stat_open {
            return (false, false);
        }
        let must_go = if new.sharing_violation { H } else { W };
        let mut holders = self.holders.lock().unwrap();
        let purges = take_disconnected_to_break(&mut holders, new, must_go);
        if !purges.is_empty() {
            drop(holders);
            for p in purges {
                p();
            }
            self.changed.notify_waiters();
            return (false, true);
        }
        let mut wait = false;
        let mut seen: Vec<LeaseId> = Vec::new();
        let mut lease_breaks = Vec::new();
        for h in holders.iter_mut() {
            // A parked persistent open cannot be told; `parked_conflict`
            // refused the opens that needed it broken.
            if Some(h.open_key) == new.own_key || h.parked {
                continue;
            }
            if let Some(lease) = &h.lease {
                if new.lease.as_ref() == Some(&lease.id) || new.lease_stat_open {
                    continue;
                }
                if seen.contains(&lease.id) {
                    continue;
                }
                seen.push(lease.id);
                let mut st = lease.st.lock().unwrap();
                let current = st.state;
                let breaking = st.breaking_to.is_some();
                let mut to = current & !must_go;
                if new.overwrites {
                    to &= !(H | R);
                }
                if current & !to == 0 {
                    wait |= breaking;
                    continue;
                }
                if new.overwrites {
                    to &= !(R | W);
                }
                match st.breaking_to {
                    // Already notified: after the acknowledgment the lease
                    // is broken further, to what this open needs.
                    Some(_) => st.required &= to,
                    None => {
                        let n = lease.begin_break(&mut st, to);
                        lease_breaks.push((h.clone(), n));
                    }
                }
                if current & must_go != 0 && st.breaking_to.is_some() {
                    wait = true;
                }
                wait |= breaking && !first_attempt;
            } else {
                let current = oplock_caching(h.level);
                let mut to = current & !must_go;
                if new.overwrites {
                    to &= !(H | R);
                }
                if current & !to == 0 {
                    wait |= h.breaking_to.is_some();
                    continue;
                }
                // Oplocks break to level II or to none.
                let target = if to & R != 0 && !new.overwrites {
                    oplock_level::LEVEL_II
                } else {
                    oplock_level::NONE
                };
                if h.level >= oplock_level::EXCLUSIVE {
                    if h.breaking_to.is_none() {
                        h.breaking_to = Some(target);
                        send_break(h, target);
                    }
                    wait |= current & must_go != 0;
                } else if h.level == oplock_level::LEVEL_II {
                    // Level II breaks need no acknowledgment (3.3.4.6).
                    send_break(h, oplock_level::NONE);
                    h.level = oplock_level::NONE;
                }
            }
        }
        drop(holders);
        for (h, n) in lease_breaks {
            send_lease_notification(&h, &n);
        }
        (wait, false)
    }

    /// The acknowledgment timer ran out: every break in progress completes.
    fn complete_breaks(&self) {
        let mut holders = self.holders.lock().unwrap();
        for h in holders.iter_mut() {
            if let Some(t) = h.breaking_to.take() {
                h.level = t;
            }
            // A lease whose holder did not answer loses all caching
            // (as Windows and Samba do); a late acknowledgment is refused.
            if let Some(l) = &h.lease {
                let mut st = l.st.lock().unwrap();
                if st.breaking_to.take().is_some() {
                    st.state = 0;
                }
            }
        }
    }

    /// Register a new open and decide its oplock level or lease state
    /// (MS-SMB2 3.3.5.9, 3.3.5.9.8, 3.3.5.9.11). Only one lease or oplock
    /// may cache writes; handle caching is not shared with oplock holders;
    /// directories get neither (no directory leasing is offered).
    pub fn grant(self: &Arc<Self>, table: &LeaseTable, g: GrantRequest<'_>) -> Granted {
        let mut holders = self.holders.lock().unwrap();
        let lease_id = g.lease.map(|c| (g.client_guid, c.key));
        // An attribute-only open that caches nothing is not counted against
        // a new oplock or lease (smbtorture smb2.lease.statopen3); one that
        // holds an oplock or lease is (smb2.lease.statopen, oplock.batch9).
        let others = |h: &&Holder| {
            let idle_stat_open = h.stat_open && h.lease.is_none() && h.level == oplock_level::NONE;
            h.open_key != g.key && !idle_stat_open && !h.has_lease(lease_id.as_ref())
        };
        let have_other = holders.iter().any(|h| others(&h));
        let got_oplock = holders.iter().filter(others).any(|h| h.lease.is_none());
        let got_handle_lease = holders.iter().filter(others).any(|h| {
            h.lease
                .as_ref()
                .is_some_and(|l| l.st.lock().unwrap().state & H != 0)
        });
        let mut holder = Holder {
            open_key: g.key,
            file_id: g.file_id,
            level: oplock_level::NONE,
            breaking_to: None,
            lease: None,
            conn: Arc::downgrade(g.conn),
            session: Arc::downgrade(g.session),
            stat_open: g.stat_open,
            purge: None,
            parked: false,
        };
        let granted = match g.lease {
            // MS-SMB2 3.3.5.9.11: a directory gets Read and Handle caching,
            // never Write, and only through a version 2 lease context
            // (SMB 3.x, which advertises CAP_DIRECTORY_LEASING).
            Some(ctx) if g.is_directory && ctx.version >= 2 => {
                let requested = ctx.state & (R | H);
                let state = if requested & R == 0 { 0 } else { requested };
                let lease = self.lease_for(table, &holders, g.client_guid, ctx, state, requested);
                holder.lease = Some(lease.clone());
                Granted {
                    oplock_level: oplock_level::LEASE,
                    lease: Some(lease),
                }
            }
            Some(_) if g.is_directory => Granted {
                oplock_level: oplock_level::NONE,
                lease: None,
            },
            Some(ctx) => {
                let requested = ctx.state & (R | H | W);
                let mut state = requested;
                if state & (R | W) == 0 || state == W || state == W | H {
                    state = 0;
                }
                if have_other {
                    state &= !W;
                }
                if got_oplock {
                    state &= !H;
                }
                let lease = self.lease_for(table, &holders, g.client_guid, ctx, state, requested);
                holder.lease = Some(lease.clone());
                Granted {
                    oplock_level: oplock_level::LEASE,
                    lease: Some(lease),
                }
            }
            None => {
                let requested = g.requested_oplock;
                let level =
                    if g.is_directory || requested == oplock_level::LEASE || got_handle_lease {
                        oplock_level::NONE
                    } else if !have_other {
                        requested
                    } else if requested >= oplock_level::LEVEL_II
                        && holders.iter().filter(others).all(|h| {
                            let caching = match &h.lease {
                                Some(l) => {
                                    let st = l.st.lock().unwrap();
                                    st.state | st.breaking_to.unwrap_or(0)
                                }
                                None => oplock_caching(h.level),
                            };
                            caching & W == 0 && h.breaking_to.is_none()
                        })
                    {
                        oplock_level::LEVEL_II
                    } else {
                        oplock_level::NONE
                    };
                holder.level = level;
                Granted {
                    oplock_level: level,
                    lease: None,
                }
            }
        };
        holders.push(holder);
        granted
    }

    /// The open's lease: the one it shares with earlier opens of the same
    /// key, upgraded when the request is a strict superset that can be
    /// granted in full and no break is in progress; or a new one.
    fn lease_for(
        self: &Arc<Self>,
        table: &LeaseTable,
        holders: &[Holder],
        client_guid: [u8; 16],
        ctx: &LeaseContext,
        granted: u32,
        requested: u32,
    ) -> Arc<Lease> {
        let id = (client_guid, ctx.key);
        let existing = holders
            .iter()
            .find_map(|h| h.lease.as_ref().filter(|l| l.id == id).cloned());
        if let Some(lease) = existing {
            let mut st = lease.st.lock().unwrap();
            let upgrade = requested & st.state == st.state
                && granted != st.state
                && granted == requested
                && st.breaking_to.is_none();
            if upgrade {
                st.state = granted;
                st.epoch = st.epoch.wrapping_add(1);
            }
            drop(st);
            return lease;
        }
        let lease = Arc::new(Lease {
            id,
            version: ctx.version,
            parent_key: (ctx.version >= 2
                && ctx.flags & braid_smb_proto::messages::lease::lease_flags::PARENT_LEASE_KEY_SET
                    != 0)
                .then_some(ctx.parent_key),
            file: Arc::downgrade(self),
            st: Mutex::new(LeaseState {
                state: granted,
                breaking_to: None,
                required: granted,
                epoch: if ctx.version >= 2 {
                    ctx.epoch.wrapping_add(1)
                } else {
                    0
                },
            }),
        });
        table.insert(&lease);
        lease
    }

    /// MS-SMB2 3.3.5.22.1: an acknowledgment; the new level. An open with
    /// no break in progress is INVALID_OPLOCK_PROTOCOL, as Windows and
    /// Samba answer (smbtorture smb2.oplock.levelii500), not the
    /// INVALID_DEVICE_STATE the section names. A level the break does not
    /// allow still ends the break, at none: the opens waiting on it go on
    /// at once rather than when the acknowledgment timer runs out.
    pub fn acknowledge(&self, key: u64, level: u8) -> Result<u8, NtStatus> {
        let mut holders = self.holders.lock().unwrap();
        let h = holders
            .iter_mut()
            .find(|h| h.open_key == key)
            .ok_or(NtStatus::INVALID_OPLOCK_PROTOCOL)?;
        let target = h.breaking_to.ok_or(NtStatus::INVALID_OPLOCK_PROTOCOL)?;
        let allowed =
            matches!(level, oplock_level::NONE | oplock_level::LEVEL_II) && level <= target;
        h.level = if allowed { level } else { oplock_level::NONE };
        h.breaking_to = None;
        drop(holders);
        self.changed.notify_waiters();
        match level {
            _ if allowed => Ok(level),
            oplock_level::LEASE => Err(NtStatus::INVALID_PARAMETER),
            _ => Err(NtStatus::INVALID_OPLOCK_PROTOCOL),
        }
    }

    /// MS-SMB2 3.3.5.22.2: a lease acknowledgment. The state must be within
    /// what the break asked for; if conflicts since then need less, the
    /// next break goes out at once.
    pub fn acknowledge_lease(&self, lease: &Lease, state: u32) -> Result<u32, NtStatus> {
        let holders = self.holders.lock().unwrap();
        let mut st = lease.st.lock().unwrap();
        let Some(target) = st.breaking_to else {
            return Err(NtStatus::UNSUCCESSFUL);
        };
        if state & !target != 0 {
            return Err(NtStatus::REQUEST_NOT_ACCEPTED);
        }
        st.state = state;
        st.breaking_to = None;
        let further = crate::smb::lease::next_break(state, st.required).map(|to| {
            let required = st.required;
            let n = lease.continue_break(&mut st, to);
            if st.breaking_to.is_some() {
                st.required = required;
            }
            n
        });
        drop(st);
        let holder = holders
            .iter()
            .find(|h| h.lease.as_ref().is_some_and(|l| l.id == lease.id))
            .cloned();
        drop(holders);
        if let (Some(n), Some(h)) = (further, holder) {
            send_lease_notification(&h, &n);
        }
        self.changed.notify_waiters();
        Ok(state)
    }

    /// The open's connection was lost and it is kept as a durable open:
    /// a break it would need runs `purge` instead.
    pub fn disconnect(&self, key: u64, purge: Purge) {
        self.with_holder(key, |h| {
            h.purge = Some(purge);
            h.parked = false;
        });
        // A new open may be waiting for a break this open can no longer
        // acknowledge: have it look again, and close this open instead.
        self.changed.notify_waiters();
    }

    fn with_holder(&self, key: u64, f: impl FnOnce(&mut Holder)) {
        if let Some(h) = self
            .holders
            .lock()
            .unwrap()
            .iter_mut()
            .find(|h| h.open_key == key)
        {
            f(h);
        }
    }

    /// A durable open was reconnected (MS-SMB2 3.3.5.9.7): its breaks go to
    /// its new connection and session.
    pub fn reconnect(&self, key: u64, conn: &Arc<Connection>, session: &Arc<Session>) {
        self.with_holder(key, |h| {
            h.purge = None;
            h.parked = false;
            h.conn = Arc::downgrade(conn);
            h.session = Arc::downgrade(session);
        });
    }

    /// The lease an open holds, if it holds one.
    pub fn lease_of(&self, key: u64) -> Option<Arc<Lease>> {
        self.holders
            .lock()
            .unwrap()
            .iter()
            .find(|h| h.open_key == key)
            .and_then(|h| h.lease.clone())
    }

    /// What the file's holders cache together, as lease states (for the
    /// cross-protocol registry, `smb/caching.rs`).
    pub fn caching_held(&self) -> u32 {
        let held: Vec<(u8, Option<Arc<Lease>>)> = self
            .holders
            .lock()
            .unwrap()
            .iter()
            .map(|h| (h.level, h.lease.clone()))
            .collect();
        held.iter().fold(0, |acc, (level, lease)| {
            acc | match lease {
                Some(l) => l.st.lock().unwrap().state,
                None => oplock_caching(*level),
            }
        })
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

/// Remove the disconnected durable opens a new open would have to break
/// (a lease only when every open of it is disconnected); returns how to
/// close them.
fn take_disconnected_to_break(
    holders: &mut Vec<Holder>,
    new: &NewOpen,
    must_go: u32,
) -> Vec<Purge> {
    let broken = |current: u32| needs_break(current, must_go, new.overwrites);
    let mut doomed: Vec<u64> = Vec::new();
    for h in holders.iter().filter(|h| h.purge.is_some()) {
        let hit = match &h.lease {
            Some(lease) => {
                let own = new.lease.as_ref() == Some(&lease.id) || new.lease_stat_open;
                let all_gone = holders
                    .iter()
                    .filter(|o| o.has_lease(Some(&lease.id)))
                    .all(|o| o.purge.is_some());
                !own && all_gone && broken(lease.st.lock().unwrap().state)
            }
            None => broken(oplock_caching(h.level)),
        };
        if hit {
            doomed.push(h.open_key);
        }
    }
    let mut purges = Vec::new();
    holders.retain(|h| {
        if doomed.contains(&h.open_key) {
            purges.extend(h.purge.clone());
            false
        } else {
            true
        }
    });
    purges
}

/// The connection a break for holder `h` goes on (MS-SMB2 3.3.4.6/3.3.4.7):
/// the open's own, or, once that is gone, any live channel of its session.
fn break_connection(h: &Holder) -> Option<Arc<Connection>> {
    h.conn
        .upgrade()
        .filter(|c| !c.closing.is_cancelled())
        .or_else(|| {
            let s = h.session.upgrade()?;
            let preferred = h.conn.upgrade().map(|c| c.id).unwrap_or(0);
            s.live_connection(preferred)
        })
}

fn send_lease_notification(h: &Holder, n: &LeaseBreakNotification) {
    let Some(lease) = &h.lease else { return };
    let session = h.session.upgrade();
    let encrypted = session
        .as_ref()
        .is_some_and(|s| s.encrypt_data.load(std::sync::atomic::Ordering::Relaxed));
    // An encrypted session's break must go on one of its own channels.
    let conn = if encrypted {
        break_connection(h)
    } else {
        crate::smb::lease::lease_connection(&lease.id.0, h.conn.upgrade(), break_connection(h))
    };
    if let Some(conn) = conn {
        crate::smb::lease::send_lease_break(&conn, session.as_ref(), n);
    }
}

/// MS-SMB2 3.3.4.6: an oplock break notification (MessageId all ones,
/// no session, unsigned; encrypted when the holder's session encrypts).
fn send_break(h: &Holder, level: u8) {
    let Some(conn) = break_connection(h) else {
        return;
    };
    let mut msg = break_header(24);
    OplockBreakNotification {
        oplock_level: level,
        file_id: h.file_id,
    }
    .encode(&mut msg);
    debug!(conn = conn.id, level, "oplock break");
    deliver_break(conn, h.session.upgrade(), msg);
}
