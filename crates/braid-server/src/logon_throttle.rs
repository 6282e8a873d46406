//! Failed logons counted per client address: once an address has failed
//! `limit` times within a minute, its SESSION_SETUPs are refused with
//! STATUS_LOGON_FAILURE, without a password being looked at, until that
//! minute is over.
//!
//! The per-attempt delay (`logon_failure_delay`) alone does not stop a
//! guesser who opens many connections at once; this does. It counts by
//! address rather than by account so that nobody can lock a user out by
//! guessing their password from elsewhere. The price: clients behind one
//! NAT address share the allowance. Times are passed in (the injected
//! clock of docs/ARCHITECTURE.md), so the rule is tested without waiting.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long failures are counted from the first one.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Addresses kept at most; past it, windows that are over are dropped, so
/// that a sweep of spoofed-looking addresses cannot grow the table forever.
const MAX_TRACKED: usize = 65_536;

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

/// What a failure did to its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Counted,
    /// This failure reached the limit: the address is refused from now
    /// until the window ends (log it once).
    NowBlocked,
}

pub struct LogonThrottle {
    /// Failures per address within the window; 0 turns counting off.
    limit: u32,
    windows: Mutex<HashMap<IpAddr, Window>>,
}

impl LogonThrottle {
    pub fn new(limit: u32) -> LogonThrottle {
        LogonThrottle {
            limit,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Whether logons from `addr` are refused at `now`.
    pub fn blocked(&self, addr: IpAddr, now: Instant) -> bool {
        if self.limit == 0 {
            return false;
        }
        let windows = self.windows.lock().unwrap();
        windows
            .get(&addr)
            .is_some_and(|w| now.duration_since(w.started) < WINDOW && w.failures >= self.limit)
    }

    /// Count a failed logon from `addr` at `now`.
    pub fn failed(&self, addr: IpAddr, now: Instant) -> Failure {
        if self.limit == 0 {
            return Failure::Counted;
        }
        let mut windows = self.windows.lock().unwrap();
        if windows.len() >= MAX_TRACKED {
            windows.retain(|_, w| now.duration_since(w.started) < WINDOW);
        }
        let w = windows.entry(addr).or_insert(Window {
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
        if w.failures == self.limit {
            Failure::NowBlocked
        } else {
            Failure::Counted
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 0, 7));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 0, 8));

    #[test]
    fn an_address_is_refused_after_its_limit_until_the_minute_ends() {
        let t = LogonThrottle::new(3);
        let start = Instant::now();
        assert_eq!(t.failed(A, start), Failure::Counted);
        assert_eq!(
            t.failed(A, start + Duration::from_secs(1)),
            Failure::Counted
        );
        assert!(!t.blocked(A, start + Duration::from_secs(2)));
        assert_eq!(
            t.failed(A, start + Duration::from_secs(2)),
            Failure::NowBlocked
        );
        assert!(t.blocked(A, start + Duration::from_secs(3)));
        assert!(
            !t.blocked(B, start + Duration::from_secs(3)),
            "other addresses go on"
        );
        assert!(t.blocked(A, start + WINDOW - Duration::from_millis(1)));
        assert!(!t.blocked(A, start + WINDOW), "the minute is over");
        assert_eq!(
            t.failed(A, start + WINDOW),
            Failure::Counted,
            "a new window starts"
        );
        assert!(!t.blocked(A, start + WINDOW));
    }

    #[test]
    fn a_limit_of_zero_counts_nothing() {
        let t = LogonThrottle::new(0);
        let now = Instant::now();
        for _ in 0..100 {
            assert_eq!(t.failed(A, now), Failure::Counted);
        }
        assert!(!t.blocked(A, now));
    }

    #[test]
    fn the_table_drops_finished_windows_when_full() {
        let t = LogonThrottle::new(5);
        let start = Instant::now();
        for i in 0..MAX_TRACKED as u32 {
            t.failed(IpAddr::V4(i.into()), start);
        }
        t.failed(A, start + WINDOW);
        assert_eq!(t.windows.lock().unwrap().len(), 1);
    }
}
