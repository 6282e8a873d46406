//! The token bucket every limit is made of: tokens accrue at `rate` per
//! second up to `capacity`; a request takes its cost. A request larger
//! than the whole bucket may still go once the bucket is full, leaving it
//! in debt, so that no request size is ever refused — it just waits for
//! the time its size is worth, and the long-run rate stays exact.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub struct Bucket {
    /// Tokens per second.
    rate: f64,
    capacity: f64,
    /// Below zero: debt left by a request larger than the bucket.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    last: Duration,
}

impl Bucket {
    /// A full bucket at `now` (the cloud's shares start with full buckets).
    pub fn full(rate: f64, capacity: f64, now: Duration) -> Bucket {
        Bucket {
            rate,
            capacity,
            tokens: capacity,
            last: now,
        }
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    pub fn capacity(&self) -> f64 {
        self.capacity
    }

    pub fn tokens(&self) -> f64 {
        self.tokens
    }

    /// Accrue up to `now`; returns the tokens that did not fit (what the
    /// baseline bucket turns into burst credits). A `now` before the last
    /// update changes nothing: time never runs backwards here.
    pub fn refill(&mut self, now: Duration) -> f64 {
        let Some(dt) = now.checked_sub(self.last) else {
            return 0.0;
        };
        self.last = now;
        let added = self.rate * dt.as_secs_f64();
        let filled = self.tokens + added;
        if filled > self.capacity {
            // Only what accrued past the brim overflows, never a debt paid.
            let overflow = filled - self.capacity.max(self.tokens);
            self.tokens = self.capacity.max(self.tokens.min(self.capacity));
            overflow.max(0.0)
        } else {
            self.tokens = filled;
            0.0
        }
    }

    /// What a request of `cost` needs in the bucket before it may go: its
    /// cost, or a full bucket for one larger than the bucket.
    pub fn needed(&self, cost: f64) -> f64 {
        cost.min(self.capacity)
    }

    /// Whether `cost` may be taken now (after [`Bucket::refill`]).
    pub fn allows(&self, cost: f64) -> bool {
        self.tokens >= self.needed(cost) - EPSILON
    }

    /// Take `cost` (possibly into debt).
    pub fn take(&mut self, cost: f64) {
        self.tokens -= cost;
    }

    /// Time from the last update until `cost` is allowed; None when the
    /// bucket never refills (a zero rate).
    pub fn wait_for(&self, cost: f64) -> Option<Duration> {
        let missing = self.needed(cost) - self.tokens;
        if missing <= EPSILON {
            return Some(Duration::ZERO);
        }
        if self.rate <= 0.0 {
            return None;
        }
        Some(wait_secs(missing / self.rate))
    }

    /// New rate and capacity from `now` on: what accrued until now accrued
    /// at the old rate; tokens above the new capacity are dropped.
    pub fn reconfigure(&mut self, now: Duration, rate: f64, capacity: f64) {
        self.refill(now);
        self.rate = rate;
        self.capacity = capacity;
        self.tokens = self.tokens.min(capacity);
    }
}

/// A wait of `s` seconds, rounded up to whole nanoseconds and never zero:
/// a wait that rounds to nothing would have the caller ask again at the
/// same instant, for ever.
pub fn wait_secs(s: f64) -> Duration {
    Duration::from_nanos((s * 1e9).ceil().max(1.0) as u64)
}

/// Float slack for comparisons: token amounts are sums of products of
/// rates and durations, exact only to rounding.
pub const EPSILON: f64 = 1e-9;

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn starts_full_and_accrues_at_its_rate() {
        let mut b = Bucket::full(100.0, 10.0, ms(0));
        assert_eq!(b.tokens(), 10.0);
        b.take(10.0);
        assert_eq!(b.refill(ms(50)), 0.0);
        assert!((b.tokens() - 5.0).abs() < EPSILON);
        // 100 ms more would add 10: 5 fill it, 5 overflow.
        assert!((b.refill(ms(150)) - 5.0).abs() < 1e-9);
        assert_eq!(b.tokens(), 10.0);
    }

    #[test]
    fn a_request_larger_than_the_bucket_goes_when_full_and_leaves_debt() {
        let mut b = Bucket::full(10.0, 2.0, ms(0));
        assert!(b.allows(16.0));
        b.take(16.0);
        assert_eq!(b.tokens(), -14.0);
        assert!(!b.allows(1.0));
        // 1.5 s pays 15: one token, enough for one more.
        assert_eq!(b.wait_for(1.0), Some(Duration::from_secs_f64(1.5)));
        b.refill(ms(1500));
        assert!(b.allows(1.0));
        // Paying a debt never overflows.
        let mut d = Bucket::full(10.0, 2.0, ms(0));
        d.take(12.0);
        assert_eq!(d.refill(ms(1000)), 0.0);
        assert!((d.tokens() - 0.0).abs() < 1e-9);
    }

    #[test]
    fn time_never_runs_backwards() {
        let mut b = Bucket::full(10.0, 10.0, ms(100));
        b.take(5.0);
        assert_eq!(b.refill(ms(50)), 0.0);
        assert_eq!(b.tokens(), 5.0);
    }

    #[test]
    fn reconfigure_accrues_at_the_old_rate_first() {
        let mut b = Bucket::full(10.0, 100.0, ms(0));
        b.take(100.0);
        b.reconfigure(ms(1000), 1000.0, 50.0);
        assert!((b.tokens() - 10.0).abs() < 1e-9);
        b.refill(ms(1010));
        assert!((b.tokens() - 20.0).abs() < 1e-9);
        // A smaller capacity drops what no longer fits.
        b.reconfigure(ms(1010), 1000.0, 5.0);
        assert_eq!(b.tokens(), 5.0);
    }

    #[test]
    fn a_zero_rate_never_refills() {
        let mut b = Bucket::full(0.0, 1.0, ms(0));
        b.take(1.0);
        assert_eq!(b.wait_for(1.0), None);
    }
}
