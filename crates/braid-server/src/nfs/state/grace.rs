//! The grace period after a restart (RFC 8881 8.4.2.1): clients that held
//! state may reclaim it, nobody else may take new state, until every such
//! client sent RECLAIM_COMPLETE or the period ends. With no client to wait
//! for there is no grace period at all. While clients are still reclaiming
//! when the period ends, it goes on a second at a time, up to one more
//! lease (as Linux's nfsd does, `clients_still_reclaiming`): a client
//! that started late is not cut off in the middle of its reclaims.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::store::StateStore;

pub struct Grace {
    inner: Mutex<Inner>,
}

/// How long the grace period goes on past its end, each time someone
/// reclaimed since the last look.
const EXTENSION: Duration = Duration::from_secs(1);

struct Inner {
    ends: Option<Instant>,
    /// The latest the period may be extended to.
    latest: Option<Instant>,
    /// A reclaim was allowed since the period was last extended.
    somebody_reclaimed: bool,
    /// Owners of the last run's clients that have not finished reclaiming.
    waiting: HashSet<Vec<u8>>,
}

impl Grace {
    /// The grace period of a start: `period`, extended while clients
    /// reclaim by at most `lease` more.
    pub fn start(store: &dyn StateStore, period: Duration, lease: Duration) -> Grace {
        let waiting: HashSet<Vec<u8>> = store.load().into_iter().map(|r| r.owner).collect();
        let now = Instant::now();
        let ends = (!waiting.is_empty()).then(|| now + period);
        Grace {
            inner: Mutex::new(Inner {
                ends,
                latest: ends.map(|e| e + lease),
                somebody_reclaimed: false,
                waiting,
            }),
        }
    }

    /// Whether the server is in its grace period now.
    pub fn active(&self) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.active_now(Instant::now())
    }

    /// Once the period is over: the owners that never finished reclaiming
    /// (their records can go: RFC 8881 8.4.3, they may not reclaim after
    /// the grace period). Empty before, and after the first call.
    pub fn take_unreclaimed(&self) -> Vec<Vec<u8>> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if inner.active_now(now) {
            return Vec::new();
        }
        match inner.ends {
            Some(t) if now >= t => {
                inner.ends = None;
                inner.waiting.drain().collect()
            }
            _ => Vec::new(),
        }
    }

    /// Whether `owner` held state in the last run and may still reclaim
    /// (and if so, a reclaim is under way: the period may be extended).
    pub fn may_reclaim(&self, owner: &[u8]) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let may = inner.active_now(Instant::now()) && inner.waiting.contains(owner);
        if may {
            inner.somebody_reclaimed = true;
        }
        may
    }

    /// For the admin view: whether the period is on, how many clients of
    /// the last run may still reclaim, and how long it lasts at most (not
    /// counting extensions while clients reclaim).
    pub fn view(&self) -> (bool, usize, Option<Duration>) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let active = inner.active_now(now);
        let left = inner
            .ends
            .filter(|_| active)
            .map(|t| t.saturating_duration_since(now));
        (active, if active { inner.waiting.len() } else { 0 }, left)
    }

    /// Tests: the period as if `by` had passed.
    #[cfg(test)]
    fn shift(&self, by: Duration) {
        let mut inner = self.inner.lock().unwrap();
        inner.ends = inner.ends.map(|t| t - by);
        inner.latest = inner.latest.map(|t| t - by);
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

impl Inner {
    /// RFC 8881 8.4.2.1: in grace while clients may still reclaim; at the
    /// end, one more second if somebody reclaimed since the last look,
    /// never past `latest`.
    fn active_now(&mut self, now: Instant) -> bool {
        let Some(ends) = self.ends else {
            return false;
        };
        if self.waiting.is_empty() {
            return false;
        }
        if now < ends {
            return true;
        }
        if self.somebody_reclaimed && self.latest.is_some_and(|l| now < l) {
            self.somebody_reclaimed = false;
            self.ends = Some((now + EXTENSION).min(self.latest.unwrap_or(now)));
            return true;
        }
        false
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
        let g = Grace::start(
            &Fixed(vec![]),
            Duration::from_secs(90),
            Duration::from_secs(90),
        );
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
            Duration::from_secs(90),
        );
        assert!(g.active());
        assert!(g.may_reclaim(b"a"));
        assert!(!g.may_reclaim(b"c"));
        g.done(b"a");
        assert!(g.active());
        assert!(!g.may_reclaim(b"a"));
        assert_eq!(g.view().1, 1);
        g.done(b"b");
        assert!(!g.active());
        assert_eq!(g.view(), (false, 0, None));
        assert!(g.take_unreclaimed().is_empty());
    }

    #[test]
    fn owners_that_did_not_reclaim_are_named_when_grace_ends() {
        let g = Grace::start(
            &Fixed(vec![ClientRecord {
                owner: b"a".to_vec(),
            }]),
            Duration::from_millis(1),
            Duration::from_millis(1),
        );
        std::thread::sleep(Duration::from_millis(5));
        assert!(!g.active());
        assert_eq!(g.take_unreclaimed(), vec![b"a".to_vec()]);
        assert!(g.take_unreclaimed().is_empty());
    }

    #[test]
    fn reclaims_under_way_extend_the_period_by_at_most_a_lease() {
        let g = Grace::start(
            &Fixed(vec![
                ClientRecord {
                    owner: b"late".to_vec(),
                },
                ClientRecord {
                    owner: b"never".to_vec(),
                },
            ]),
            Duration::from_secs(10),
            Duration::from_secs(10),
        );
        assert!(g.may_reclaim(b"late"));
        // The period is over, but "late" reclaimed since: one more second.
        g.shift(Duration::from_secs(10));
        assert!(g.active());
        assert!(g.take_unreclaimed().is_empty());
        // Nobody reclaimed in that second: over.
        g.shift(Duration::from_secs(2));
        assert!(!g.active());
        // And never beyond one lease past the period.
        let g = Grace::start(
            &Fixed(vec![ClientRecord {
                owner: b"a".to_vec(),
            }]),
            Duration::from_secs(10),
            Duration::from_secs(10),
        );
        g.shift(Duration::from_secs(20));
        assert!(!g.may_reclaim(b"a"));
        assert_eq!(g.take_unreclaimed(), vec![b"a".to_vec()]);
    }
}
