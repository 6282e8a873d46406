//! Failed logons counted per client address and user name: once a user
//! has failed `limit` times from one address within a minute, that user's
//! logons from that address are refused with STATUS_LOGON_FAILURE,
//! without the password being looked at, until the minute is over. An
//! address as a whole may fail ten times as often (password spraying
//! over many names) before all its logons are refused.
//!
//! The per-attempt delay (`logon_failure_delay`) alone does not stop a
//! guesser who opens many connections at once; this does. It counts by
//! address and name, not by account alone, so that nobody can lock a user
//! out by guessing from elsewhere, and a client stuck on a stale password
//! (or a test looping bad logons of an unknown name, smbtorture's
//! `smb2.secleak`) does not lock out the other users behind its address.
//! Times are passed in (the injected clock of docs/ARCHITECTURE.md), so
//! the rule is tested without waiting.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long failures are counted from the first one.
pub const WINDOW: Duration = Duration::from_secs(60);

/// How many times the per-name limit an address may fail in all.
pub const ADDRESS_FACTOR: u32 = 10;

/// Windows kept at most; past it, windows that are over are dropped, so
/// that a sweep of names or addresses cannot grow the table forever.
const MAX_TRACKED: usize = 65_536;

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

/// An address as a whole (`None`), or one lower-cased user name from it.
type Key = (IpAddr, Option<String>);

/// What a failure did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Counted,
    /// This failure reached a limit (the name's or the address's): log it
    /// once.
    NowBlocked,
}

pub struct LogonThrottle {
    /// Failures per name and address within the window; 0 turns counting
    /// off. A reload may change it (`reload.rs`).
    limit: AtomicU32,
    windows: Mutex<HashMap<Key, Window>>,
}

impl LogonThrottle {
    pub fn new(limit: u32) -> LogonThrottle {
        LogonThrottle {
            limit: AtomicU32::new(limit),
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Counts from now on against `limit` (a reload).
    pub fn set_limit(&self, limit: u32) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }

    fn limit_of(&self, key: &Key) -> u32 {
        match key.1 {
            None => self.limit().saturating_mul(ADDRESS_FACTOR),
            Some(_) => self.limit(),
        }
    }

    fn over(&self, windows: &HashMap<Key, Window>, key: &Key, now: Instant) -> bool {
        windows.get(key).is_some_and(|w| {
            now.duration_since(w.started) < WINDOW && w.failures >= self.limit_of(key)
        })
    }

    /// Whether logons from `addr` (as `user`, when known yet) are refused
    /// at `now`.
    pub fn blocked(&self, addr: IpAddr, user: Option<&str>, now: Instant) -> bool {
        if self.limit() == 0 {
            return false;
        }
        let windows = self.windows.lock().unwrap();
        self.over(&windows, &(addr, None), now)
            || user.is_some_and(|u| self.over(&windows, &(addr, Some(u.to_lowercase())), now))
    }

    /// Count a failed logon of `user` from `addr` at `now`.
    pub fn failed(&self, addr: IpAddr, user: &str, now: Instant) -> Failure {
        if self.limit() == 0 {
            return Failure::Counted;
        }
        let mut windows = self.windows.lock().unwrap();
        if windows.len() >= MAX_TRACKED {
            windows.retain(|_, w| now.duration_since(w.started) < WINDOW);
        }
        let mut outcome = Failure::Counted;
        for key in [(addr, None), (addr, Some(user.to_lowercase()))] {
            let limit = self.limit_of(&key);
            let w = windows.entry(key).or_insert(Window {
                started: now,
                failures: 0,
            });
            if now.duration_since(w.started) >= WINDOW {
                *w = Window {
                    started: now,
                    failures: 0,
                };
            }
            w.failures = w.failures.saturating_add(1);
            if w.failures == limit {
                outcome = Failure::NowBlocked;
            }
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 0, 7));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 0, 8));

    #[test]
    fn a_name_is_refused_from_an_address_after_its_limit_until_the_minute_ends() {
        let t = LogonThrottle::new(3);
        let start = Instant::now();
        let at = |s| start + Duration::from_secs(s);
        assert_eq!(t.failed(A, "alice", at(0)), Failure::Counted);
        assert_eq!(t.failed(A, "Alice", at(1)), Failure::Counted);
        assert!(!t.blocked(A, Some("alice"), at(2)));
        assert_eq!(t.failed(A, "ALICE", at(2)), Failure::NowBlocked);
        assert!(t.blocked(A, Some("alice"), at(3)));
        assert!(
            !t.blocked(A, Some("bob"), at(3)),
            "other names from the address go on"
        );
        assert!(
            !t.blocked(A, None, at(3)),
            "so does the address before a name is known"
        );
        assert!(
            !t.blocked(B, Some("alice"), at(3)),
            "alice from elsewhere goes on"
        );
        assert!(t.blocked(A, Some("alice"), start + WINDOW - Duration::from_millis(1)));
        assert!(
            !t.blocked(A, Some("alice"), start + WINDOW),
            "the minute is over"
        );
        assert_eq!(
            t.failed(A, "alice", start + WINDOW),
            Failure::Counted,
            "a new window"
        );
    }

    #[test]
    fn an_address_spraying_many_names_is_refused_at_ten_times_the_limit() {
        let t = LogonThrottle::new(3);
        let now = Instant::now();
        for i in 0..3 * ADDRESS_FACTOR - 1 {
            assert_eq!(t.failed(A, &format!("user{i}"), now), Failure::Counted);
        }
        assert!(!t.blocked(A, None, now));
        assert_eq!(t.failed(A, "one-more", now), Failure::NowBlocked);
        assert!(t.blocked(A, None, now) && t.blocked(A, Some("anyone"), now));
        assert!(!t.blocked(B, None, now));
    }

    #[test]
    fn a_limit_of_zero_counts_nothing() {
        let t = LogonThrottle::new(0);
        let now = Instant::now();
        for _ in 0..100 {
            assert_eq!(t.failed(A, "alice", now), Failure::Counted);
        }
        assert!(!t.blocked(A, Some("alice"), now));
    }

    #[test]
    fn the_table_drops_finished_windows_when_full() {
        let t = LogonThrottle::new(5);
        let start = Instant::now();
        for i in 0..MAX_TRACKED as u32 / 2 {
            t.failed(IpAddr::V4(i.into()), "x", start);
        }
        t.failed(A, "alice", start + WINDOW);
        assert_eq!(t.windows.lock().unwrap().len(), 2);
    }
}
