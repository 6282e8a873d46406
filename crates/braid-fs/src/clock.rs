//! Injected time source (architecture principle 7). Nothing else in this crate
//! calls `SystemTime::now()`.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// A source of wall-clock time.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> SystemTime;
}

/// The real system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that only moves when told to; for deterministic tests.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<SystemTime>,
}

impl ManualClock {
    pub fn new(start: SystemTime) -> Self {
        ManualClock {
            now: Mutex::new(start),
        }
    }

    pub fn set(&self, t: SystemTime) {
        *self.now.lock().unwrap() = t;
    }

    pub fn advance(&self, d: Duration) {
        let mut g = self.now.lock().unwrap();
        *g += d;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.now.lock().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(SystemTime::UNIX_EPOCH);
        assert_eq!(c.now(), SystemTime::UNIX_EPOCH);
        c.advance(Duration::from_secs(5));
        assert_eq!(c.now(), SystemTime::UNIX_EPOCH + Duration::from_secs(5));
    }
}
