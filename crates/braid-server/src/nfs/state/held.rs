//! What each client holds — its opens (access and deny), byte-range locks
//! and delegations — kept in the state store as it changes, so that after
//! a restart every reclaim is checked against what the client really held
//! (RFC 8881 8.4.2.1: the server must not let a reclaim take state that
//! may conflict with what another client held). A reclaim of something
//! the client did not hold is NFS4ERR_RECLAIM_BAD; without this, one
//! client could reclaim, in the grace period, a lock another client held
//! and is about to reclaim.
//!
//! One record per stateid in the space `nfs-held`, written with
//! `put_soon` (one append to a journal for the local store: no fsync on
//! OPEN or LOCK; synced by the reaper every few seconds and at a graceful
//! stop). A record names the client (its owner's store key), the export
//! and the file id, which are the same after a restart, whatever file
//! handles the client kept. The records of the last run are read at start
//! and forgotten when the grace period ends; stateids carry the run's epoch,
//! so this run's records never overwrite them meanwhile (a second restart
//! in the grace period still finds them).
//!
//! The marker record `recording` says the last run kept these records: a
//! store written by an earlier Braid has client records without it, and
//! its clients' reclaims are not checked (one line at start says so).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use braid_fs::state_store::StateStore as Store;
use serde::{Deserialize, Serialize};

use super::clients::Client;
use super::stateids::{Inner, Kind, Other};

/// The store's space for what clients hold.
pub const SPACE: &str = "nfs-held";
const MARKER: &str = "recording";

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Held {
    /// OPEN4_SHARE_ACCESS_* and OPEN4_SHARE_DENY_* bits.
    Open {
        access: u32,
        deny: u32,
    },
    /// [start, end] inclusive, and whether a write lock.
    Lock {
        ranges: Vec<(u64, u64, bool)>,
    },
    Deleg {
        write: bool,
    },
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HeldRecord {
    /// The client owner's key (`store::record_key`).
    pub client: String,
    pub export: String,
    pub fileid: u64,
    pub held: Held,
}

/// What `/metrics` counts of restarts (RFC 8881 8.4.2): reclaims granted
/// by kind, refused (NFS4ERR_RECLAIM_BAD), and clients whose lease ran out.
#[derive(Default)]
pub struct ReclaimCounts {
    pub opens: std::sync::atomic::AtomicU64,
    pub locks: std::sync::atomic::AtomicU64,
    pub delegations: std::sync::atomic::AtomicU64,
    pub refused: std::sync::atomic::AtomicU64,
    pub clients_expired: std::sync::atomic::AtomicU64,
}

/// A snapshot of the counts and the grace period, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NfsGauges {
    pub grace_active: u64,
    pub clients_to_reclaim: u64,
    pub reclaimed_opens: u64,
    pub reclaimed_locks: u64,
    pub reclaimed_delegations: u64,
    pub reclaims_refused: u64,
    pub clients_expired: u64,
}

impl ReclaimCounts {
    pub fn bump(counter: &std::sync::atomic::AtomicU64) {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn snapshot(&self, (active, waiting): (bool, usize)) -> NfsGauges {
        let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        NfsGauges {
            grace_active: active as u64,
            clients_to_reclaim: waiting as u64,
            reclaimed_opens: get(&self.opens),
            reclaimed_locks: get(&self.locks),
            reclaimed_delegations: get(&self.delegations),
            reclaims_refused: get(&self.refused),
            clients_expired: get(&self.clients_expired),
        }
    }
}

/// Whether reclaims are checked, and against what.
enum Previous {
    /// No store: nothing was kept, nobody can reclaim anyway.
    Nothing,
    /// The last run did not record holdings (an earlier Braid):
    /// reclaims by its recorded clients are taken on trust.
    Unchecked,
    /// What each client of the last run held, by client key.
    Checked(HashMap<String, Vec<HeldRecord>>),
}

pub struct HeldLog {
    store: Option<Arc<dyn Store>>,
    previous: Previous,
    /// The last run's record keys, forgotten once the grace period ends.
    previous_keys: Mutex<Vec<String>>,
}

impl Default for HeldLog {
    fn default() -> HeldLog {
        HeldLog {
            store: None,
            previous: Previous::Nothing,
            previous_keys: Mutex::new(Vec::new()),
        }
    }
}

fn record_name(other: &Other) -> String {
    hex::encode(other)
}

impl HeldLog {
    /// Read what the last run's clients held, and mark this run as one
    /// that records it.
    pub fn start(store: Option<Arc<dyn Store>>) -> HeldLog {
        let Some(store) = store else {
            return HeldLog::default();
        };
        let loaded = match store.load(SPACE) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(
                    "{e}; NFS reclaims after this restart are refused (NFS4ERR_RECLAIM_BAD)"
                );
                Default::default()
            }
        };
        for c in &loaded.corrupt {
            tracing::warn!(
                "state store: corrupt record {} skipped ({}); the state it names cannot be reclaimed",
                c.location,
                c.reason
            );
        }
        let recorded = loaded.records.iter().any(|(k, _)| k == MARKER);
        let mut by_client: HashMap<String, Vec<HeldRecord>> = HashMap::new();
        let mut keys = Vec::new();
        for (key, bytes) in loaded.records {
            if key == MARKER {
                continue;
            }
            match serde_json::from_slice::<HeldRecord>(&bytes) {
                Ok(r) => by_client.entry(r.client.clone()).or_default().push(r),
                Err(e) => {
                    tracing::warn!("state store: record {SPACE}/{key} unreadable ({e}); skipped")
                }
            }
            keys.push(key);
        }
        if let Err(e) = store.put_soon(SPACE, MARKER, b"1") {
            tracing::warn!("{e}; NFS reclaims after a restart will not be checked");
        }
        let previous = if recorded {
            Previous::Checked(by_client)
        } else {
            Previous::Unchecked
        };
        HeldLog {
            store: Some(store),
            previous,
            previous_keys: Mutex::new(keys),
        }
    }

    /// Whether the last run's clients' reclaims are taken on trust (for
    /// the start's log line).
    pub fn unchecked(&self) -> bool {
        matches!(self.previous, Previous::Unchecked)
    }

    /// The state `other` now stands as `inner` has it (granted, upgraded,
    /// downgraded, a lock taken or released); a lock stateid with no lock
    /// left, or a revoked delegation, is nothing to reclaim.
    pub fn note(&self, inner: &Inner, client: &Client, other: &Other) {
        let Some(store) = &self.store else {
            return;
        };
        let Some(st) = inner.states.get(other) else {
            return self.released(other);
        };
        let held = match &st.kind {
            Kind::Open(o) => Held::Open {
                access: o.access,
                deny: o.deny,
            },
            Kind::Lock(_) => {
                let ranges: Vec<_> = inner
                    .files
                    .get(&st.key)
                    .map(|f| {
                        f.locks
                            .iter()
                            .filter(|r| &r.stateid == other)
                            .map(|r| (r.start, r.end, r.write))
                            .collect()
                    })
                    .unwrap_or_default();
                if ranges.is_empty() {
                    return self.released(other);
                }
                Held::Lock { ranges }
            }
            Kind::Deleg(d) if d.revoked => return self.released(other),
            Kind::Deleg(d) => Held::Deleg { write: d.write },
        };
        let record = HeldRecord {
            client: super::store::record_key(&client.owner),
            export: st.export.name.clone(),
            fileid: st.obj.fileid(),
            held,
        };
        let bytes = serde_json::to_vec(&record).expect("a held record serializes");
        if let Err(e) = store.put_soon(SPACE, &record_name(other), &bytes) {
            tracing::warn!("{e}; this NFS state could not be reclaimed after a restart");
        }
    }

    /// The state `other` is gone (closed, unlocked, returned, expired).
    pub fn released(&self, other: &Other) {
        if let Some(store) = &self.store {
            let _ = store.delete_soon(SPACE, &record_name(other));
        }
    }

    fn previous_of<'a>(&'a self, owner: &[u8], export: &str, fileid: u64) -> Option<Vec<&'a Held>> {
        match &self.previous {
            Previous::Checked(by_client) => Some(
                by_client
                    .get(&super::store::record_key(owner))
                    .into_iter()
                    .flatten()
                    .filter(|r| r.export == export && r.fileid == fileid)
                    .map(|r| &r.held)
                    .collect(),
            ),
            _ => None,
        }
    }

    /// RFC 8881 18.16.3 (CLAIM_PREVIOUS): whether the client held an open
    /// of the file with at least this access and deny, or (`deleg`: the
    /// delegation it reclaims, true for a write one) a delegation of the
    /// file of that kind, under which it may have opened locally.
    pub fn may_reopen(
        &self,
        owner: &[u8],
        (export, fileid): (&str, u64),
        access: u32,
        deny: u32,
        deleg: Option<bool>,
    ) -> bool {
        let Some(held) = self.previous_of(owner, export, fileid) else {
            return true;
        };
        let open = held.iter().any(|h| {
            matches!(h, Held::Open { access: a, deny: d } if access & !a == 0 && deny & !d == 0)
        });
        match deleg {
            None => open,
            Some(write) => held
                .iter()
                .any(|h| matches!(h, Held::Deleg { write: w } if *w || !write)),
        }
    }

    /// RFC 8881 18.10.3 (LOCK with reclaim): whether the client's locks on
    /// the file covered [start, end], write locks for a write lock.
    pub fn may_relock(
        &self,
        owner: &[u8],
        (export, fileid): (&str, u64),
        (start, end): (u64, u64),
        write: bool,
    ) -> bool {
        let Some(held) = self.previous_of(owner, export, fileid) else {
            return true;
        };
        let mut ranges: Vec<(u64, u64)> = held
            .iter()
            .filter_map(|h| match h {
                Held::Lock { ranges } => Some(ranges),
                _ => None,
            })
            .flatten()
            .filter(|(_, _, w)| *w || !write)
            .map(|(s, e, _)| (*s, *e))
            .collect();
        ranges.sort_unstable();
        covered(&ranges, start, end)
    }

    /// The grace period is over: the last run's records can go.
    pub fn forget_previous(&self) {
        let keys =
            std::mem::take(&mut *self.previous_keys.lock().unwrap_or_else(|e| e.into_inner()));
        if let Some(store) = &self.store {
            for key in keys {
                let _ = store.delete_soon(SPACE, &key);
            }
        }
    }

    /// Make the records written so far survive the machine.
    pub fn flush(&self) {
        if let Some(store) = &self.store {
            if let Err(e) = store.flush() {
                tracing::warn!("{e}; what NFS clients hold may not survive a crash of the machine");
            }
        }
    }
}

/// Whether sorted inclusive ranges cover [start, end] without a gap.
fn covered(sorted: &[(u64, u64)], start: u64, end: u64) -> bool {
    let mut next = start;
    for &(s, e) in sorted {
        if s > next {
            break;
        }
        if e >= end {
            return true;
        }
        next = next.max(e.saturating_add(1));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_with(records: Vec<HeldRecord>) -> HeldLog {
        let store: Arc<dyn Store> = Arc::new(braid_fs::state_store::MemoryStore::default());
        store.put(SPACE, MARKER, b"1").unwrap();
        for (i, r) in records.iter().enumerate() {
            store
                .put(SPACE, &format!("r{i}"), &serde_json::to_vec(r).unwrap())
                .unwrap();
        }
        HeldLog::start(Some(store))
    }

    fn rec(client: &[u8], fileid: u64, held: Held) -> HeldRecord {
        HeldRecord {
            client: super::super::store::record_key(client),
            export: "share".into(),
            fileid,
            held,
        }
    }

    #[test]
    fn opens_are_reclaimed_only_within_what_was_held() {
        let log = log_with(vec![
            rec(b"a", 7, Held::Open { access: 3, deny: 0 }),
            rec(b"a", 8, Held::Deleg { write: false }),
        ]);
        assert!(log.may_reopen(b"a", ("share", 7), 1, 0, None));
        assert!(log.may_reopen(b"a", ("share", 7), 3, 0, None));
        assert!(
            !log.may_reopen(b"a", ("share", 7), 1, 2, None),
            "deny not held"
        );
        assert!(
            !log.may_reopen(b"b", ("share", 7), 1, 0, None),
            "another client"
        );
        assert!(
            !log.may_reopen(b"a", ("other", 7), 1, 0, None),
            "another export"
        );
        assert!(
            !log.may_reopen(b"a", ("share", 9), 1, 0, None),
            "another file"
        );
        assert!(log.may_reopen(b"a", ("share", 8), 1, 0, Some(false)));
        assert!(
            !log.may_reopen(b"a", ("share", 8), 3, 0, Some(true)),
            "a read delegation"
        );
        assert!(
            !log.may_reopen(b"a", ("share", 7), 1, 0, Some(false)),
            "no delegation"
        );
    }

    #[test]
    fn locks_are_reclaimed_only_within_the_ranges_held() {
        let log = log_with(vec![
            rec(
                b"a",
                7,
                Held::Lock {
                    ranges: vec![(0, 99, true), (100, 199, false)],
                },
            ),
            rec(
                b"a",
                7,
                Held::Lock {
                    ranges: vec![(300, u64::MAX, true)],
                },
            ),
        ]);
        let may = |s, e, w| log.may_relock(b"a", ("share", 7), (s, e), w);
        assert!(may(0, 99, true));
        assert!(may(10, 150, false));
        assert!(!may(10, 150, true), "part of it was a read lock");
        assert!(!may(150, 250, false), "a gap");
        assert!(may(300, u64::MAX, true));
        assert!(!log.may_relock(b"b", ("share", 7), (0, 9), false));
    }

    #[test]
    fn a_store_without_the_marker_is_taken_on_trust_and_nothing_without_a_store() {
        let store: Arc<dyn Store> = Arc::new(braid_fs::state_store::MemoryStore::default());
        let log = HeldLog::start(Some(store.clone()));
        assert!(log.unchecked());
        assert!(log.may_reopen(b"a", ("share", 7), 3, 3, Some(true)));
        // This run marked the store: the next one checks.
        let next = HeldLog::start(Some(store));
        assert!(!next.unchecked());
        assert!(!next.may_reopen(b"a", ("share", 7), 1, 0, None));
        assert!(!HeldLog::start(None).unchecked());
    }

    #[test]
    fn the_last_runs_records_go_when_grace_ends() {
        let store: Arc<dyn Store> = Arc::new(braid_fs::state_store::MemoryStore::default());
        store.put(SPACE, MARKER, b"1").unwrap();
        let r = rec(b"a", 7, Held::Deleg { write: true });
        store
            .put(SPACE, "old", &serde_json::to_vec(&r).unwrap())
            .unwrap();
        let log = HeldLog::start(Some(store.clone()));
        log.forget_previous();
        let keys: Vec<_> = store
            .load(SPACE)
            .unwrap()
            .records
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, vec![MARKER.to_string()]);
    }

    #[test]
    fn coverage() {
        assert!(covered(&[(0, 9), (10, 19)], 0, 19));
        assert!(covered(&[(0, 9), (5, 30)], 3, 25));
        assert!(!covered(&[(0, 9), (11, 19)], 0, 19));
        assert!(!covered(&[(5, 9)], 0, 9));
        assert!(covered(&[(0, u64::MAX)], 0, u64::MAX));
    }
}
