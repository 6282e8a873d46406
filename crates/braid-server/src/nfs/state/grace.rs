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
        let mut inner = self.inner.lock().unwrap();
        match inner.ends {
            Some(t) if Instant::now() < t && !inner.waiting.is_empty() => true,
            Some(_) => {
                inner.ends = None;
                inner.waiting.clear();
                false
            }
            None => false,
        }
    }

    /// Whether `owner` held state in the last run and may still reclaim.
    pub fn may_reclaim(&self, owner: &[u8]) -> bool {
        self.active() && self.inner.lock().unwrap().waiting.contains(owner)
    }

    /// RECLAIM_COMPLETE from `owner` (or its lease ending).
    pub fn done(&self, owner: &[u8]) {
        let mut inner = self.inner.lock().unwrap();
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
                ClientRecord { owner: b"a".to_vec() },
                ClientRecord { owner: b"b".to_vec() },
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
    }
}
