//! The grace period after a restart (RFC 8881 8.4.2.1): clients that held
//! state may reclaim it, nobody else may take new state, until every such
//! client sent RECLAIM_COMPLETE or the period ends. With no client to wait
//! for there is no grace period at all.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::store::StateStore;

pub struct Grace {
    inner: Mutex<Inner>,
}

struct Inner {
    ends: Option<Instant>,
    /// Owners of the last run's clients that have not finished reclaiming.
    waiting: HashSet<Vec<u8>>,
}

impl Grace {
    pub fn start(store: &dyn StateStore, period: Duration) -> Grace {
        let waiting: HashSet<Vec<u8>> = store.load().into_iter().map(|r| r.owner).collect();
        let ends = if waiting.is_empty() {
            None
        } else {
            Some(Instant::now() + period)
        };
        Grace {
            inner: Mutex::new(Inner { ends, waiting }),
        }
    }

    /// Whether the server is in its grace period now.
    pub fn active(&self) -> bool {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.ends.is_some_and(|t| Instant::now() < t) && !inner.waiting.is_empty()
    }

    /// Once the period is over: the owners that never finished reclaiming
    /// (their records can go: RFC 8881 8.4.3, they may not reclaim after
    /// the grace period). Empty before, and after the first call.
    pub fn take_unreclaimed(&self) -> Vec<Vec<u8>> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match inner.ends {
            Some(t) if Instant::now() >= t => {
                inner.ends = None;
                inner.waiting.drain().collect()
            }
            _ => Vec::new(),
        }
    }

    /// Whether `owner` held state in the last run and may still reclaim.
    pub fn may_reclaim(&self, owner: &[u8]) -> bool {
        self.active()
            && self
                .inner
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .waiting
                .contains(owner)
    }

    /// RECLAIM_COMPLETE from `owner` (or its lease ending).
    pub fn done(&self, owner: &[u8]) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.waiting.remove(owner);
        if inner.waiting.is_empty() {
            inner.ends = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::store::{ClientRecord, StateStore};
    use super::*;

    struct Fixed(Vec<ClientRecord>);
    impl StateStore for Fixed {
        fn load(&self) -> Vec<ClientRecord> {
            self.0.clone()
        }
        fn add(&self, _: &ClientRecord) {}
        fn remove(&self, _: &[u8]) {}
    }

    #[test]
    fn no_clients_no_grace() {
        let g = Grace::start(&Fixed(vec![]), Duration::from_secs(90));
        assert!(!g.active());
    }

    #[test]
    fn grace_ends_when_the_last_client_reclaimed() {
        let g = Grace::start(
            &Fixed(vec![
                ClientRecord {
                    owner: b"a".to_vec(),
                },
                ClientRecord {
                    owner: b"b".to_vec(),
                },
            ]),
            Duration::from_secs(90),
        );
        assert!(g.active());
        assert!(g.may_reclaim(b"a"));
        assert!(!g.may_reclaim(b"c"));
        g.done(b"a");
        assert!(g.active());
        assert!(!g.may_reclaim(b"a"));
        g.done(b"b");
        assert!(!g.active());
        assert!(g.take_unreclaimed().is_empty());
    }

    #[test]
    fn owners_that_did_not_reclaim_are_named_when_grace_ends() {
        let g = Grace::start(
            &Fixed(vec![ClientRecord {
                owner: b"a".to_vec(),
            }]),
            Duration::from_millis(1),
        );
        std::thread::sleep(Duration::from_millis(5));
        assert!(!g.active());
        assert_eq!(g.take_unreclaimed(), vec![b"a".to_vec()]);
        assert!(g.take_unreclaimed().is_empty());
    }
}
