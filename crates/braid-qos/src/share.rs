//! One share's QoS, whole: its [`Throttle`], the [`FairQueue`] of the
//! requests waiting, and the [`Window`] of what happened — what the
//! server's gate drives and the admin API shows. Still sans-IO: the gate
//! supplies `now` and does the waiting.

use std::time::Duration;

use crate::fair::{ClientId, FairQueue};
use crate::limits::{Cost, Limits};
use crate::throttle::{Reason, Throttle, Verdict};
use crate::window::{Window, CURRENT};

const MIB: f64 = 1024.0 * 1024.0;

/// What the admin API shows of a share's QoS (docs/ADMIN.md).
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    pub enabled: bool,
    pub iops: Option<u64>,
    pub burst_iops: Option<u64>,
    pub credits: f64,
    pub credit_capacity: f64,
    /// At the current rate, when the credits run out (None: not spending).
    pub seconds_to_empty: Option<f64>,
    /// At the current rate, when the bucket is full (None: full, or not
    /// earning).
    pub seconds_to_full: Option<f64>,
    pub ingress_mibps: Option<f64>,
    pub egress_mibps: Option<f64>,
    pub metadata_iops: Option<u64>,
    pub file_iops: Option<u64>,
    pub file_mibps: Option<f64>,
    pub current_iops: f64,
    pub current_read_mibps: f64,
    pub current_write_mibps: f64,
    /// Held back within the last 5 s.
    pub throttled: bool,
    /// Of the last minute, per [`Reason::ALL`].
    pub throttled_fraction: [f64; 5],
    /// Requests waiting now.
    pub queued: usize,
}

pub struct ShareQos<T> {
    throttle: Throttle,
    queue: FairQueue<(Cost, T)>,
    window: Window,
    /// What holds the queued requests back, since when.
    holding: Vec<Reason>,
    holding_since: Duration,
}

impl<T> ShareQos<T> {
    pub fn new(limits: Limits, now: Duration) -> ShareQos<T> {
        ShareQos {
            throttle: Throttle::new(limits, now),
            queue: FairQueue::default(),
            window: Window::new(now),
            holding: Vec::new(),
            holding_since: now,
        }
    }

    pub fn limits(&self) -> &Limits {
        self.throttle.limits()
    }

    /// New limits from `now` on; queued requests are reconsidered at the
    /// next poll (the caller polls at once).
    pub fn set_limits(&mut self, limits: Limits, now: Duration) {
        self.throttle.set_limits(limits, now);
    }

    /// A request arrives. `Some(item)`: it may go now (paid for). `None`:
    /// it is queued behind others or over the limit; it comes out of a
    /// later [`ShareQos::poll`].
    pub fn submit(&mut self, client: ClientId, cost: Cost, item: T, now: Duration) -> Option<T> {
        if self.try_admit(&cost, now) {
            return Some(item);
        }
        self.enqueue(client, cost, item);
        None
    }

    /// The fast path of [`ShareQos::submit`]: true if a request of `cost`
    /// may go now (it is paid for); false if it must queue, which the
    /// caller then does with [`ShareQos::enqueue`] (under the same lock,
    /// so nothing gets ahead of it). Lets a caller build what waits in the
    /// queue only when something waits.
    pub fn try_admit(&mut self, cost: &Cost, now: Duration) -> bool {
        if self.queue.is_empty() && self.throttle.admit(cost, now) == Verdict::Go {
            self.window
                .admitted(now, cost.ops, cost.bytes_out, cost.bytes_in);
            return true;
        }
        false
    }

    /// Queue a request [`ShareQos::try_admit`] did not let go.
    pub fn enqueue(&mut self, client: ClientId, cost: Cost, item: T) {
        self.queue.push(client, cost, (cost, item));
    }

    /// Whether any request waits.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty()
    }

    /// Let go what may go now; returns it, and when to poll next (None:
    /// nothing waits).
    pub fn poll(&mut self, now: Duration) -> (Vec<T>, Option<Duration>) {
        let p = self.queue.poll(&mut self.throttle, now);
        let mut out = Vec::with_capacity(p.admitted.len());
        for (cost, item) in p.admitted {
            self.window
                .admitted(now, cost.ops, cost.bytes_out, cost.bytes_in);
            out.push(item);
        }
        let mut holding = Vec::new();
        if !self.queue.is_empty() {
            holding.extend(p.share_blocked);
            if p.file_blocked {
                holding.push(Reason::File);
            }
        }
        self.account(now);
        self.holding = holding;
        (out, p.wake_at)
    }

    /// Drop queued requests whose callers went away.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) -> usize {
        self.queue.retain(|(_, t)| keep(t))
    }

    /// Time held back since the last event goes into the window.
    fn account(&mut self, now: Duration) {
        if now > self.holding_since {
            for r in &self.holding {
                self.window.throttled(*r, self.holding_since, now);
            }
            self.holding_since = now;
        }
    }

    pub fn view(&mut self, now: Duration) -> View {
        self.account(now);
        let l = *self.throttle.limits();
        let credits = self.throttle.credits(now);
        let capacity = self.throttle.credit_capacity();
        let (ops, read, written) = self.window.current(now);
        let (mut to_empty, mut to_full) = (None, None);
        if let Some(base) = l.iops {
            let base = base as f64;
            if capacity > 0.0 && ops > base && credits > 0.0 {
                to_empty = Some(credits / (ops - base));
            } else if capacity > 0.0 && ops < base && credits < capacity {
                to_full = Some((capacity - credits) / (base - ops));
            }
        }
        View {
            enabled: l.enabled(),
            iops: l.iops,
            burst_iops: l.effective_burst(),
            credits,
            credit_capacity: capacity,
            seconds_to_empty: to_empty,
            seconds_to_full: to_full,
            ingress_mibps: l.ingress_mibps,
            egress_mibps: l.egress_mibps,
            metadata_iops: l.metadata_iops,
            file_iops: l.file_iops,
            file_mibps: l.file_mibps,
            current_iops: ops,
            current_read_mibps: read / MIB,
            current_write_mibps: written / MIB,
            throttled: self.window.throttled_within(now, CURRENT),
            throttled_fraction: self.window.throttled_fraction(now),
            queued: self.queue.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn requests_queue_behind_others_and_time_held_is_seen() {
        let mut s: ShareQos<u32> = ShareQos::new(
            Limits {
                iops: Some(100),
                burst_iops: Some(200),
                burst_credits: Some(100),
                ..Limits::default()
            },
            ms(0),
        );
        let io = Cost {
            ops: 1,
            ..Cost::default()
        };
        // The burst-rate bucket holds 20: the 21st waits.
        for i in 0..20 {
            assert_eq!(s.submit(1, io, i, ms(0)), Some(i));
        }
        assert_eq!(s.submit(1, io, 20, ms(0)), None);
        // Queued: later arrivals queue behind it, even from others.
        assert_eq!(s.submit(2, io, 21, ms(1)), None);
        let (go, wake) = s.poll(ms(1));
        assert!(go.is_empty());
        assert_eq!(wake, Some(ms(5)));
        let (go, _) = s.poll(ms(5));
        assert_eq!(go, vec![20]);
        let (go, wake) = s.poll(ms(10));
        assert_eq!((go, wake), (vec![21], None));
        let v = s.view(ms(2000));
        assert!(v.throttled);
        // Held from 1 ms to 10 ms, of the 2 s the share has run.
        assert!((v.throttled_fraction[0] - 0.0045).abs() < 1e-9, "{v:?}");
        assert_eq!(v.current_iops, 11.0);
        // 22 spent, 10 from baseline and the rest from 100 credits,
        // then 2 s of earning at 100/s minus 2 operations, capped.
        assert_eq!(v.credits, 100.0);
        assert_eq!(v.seconds_to_empty, None);
    }

    #[test]
    fn time_to_empty_and_to_full_follow_the_current_rate() {
        let mut s: ShareQos<()> = ShareQos::new(
            Limits {
                iops: Some(100),
                burst_iops: Some(1000),
                burst_credits: Some(10_000),
                ..Limits::default()
            },
            ms(0),
        );
        let io = Cost {
            ops: 1,
            ..Cost::default()
        };
        // 300 operations a second for 5 s: 200/s from credits.
        for sec in 0..5u64 {
            for k in 0..300u64 {
                let t = ms(sec * 1000 + k * 3);
                assert!(s.submit(1, io, (), t).is_some());
            }
        }
        let v = s.view(ms(5000));
        assert_eq!(v.current_iops, 300.0);
        let expect = v.credits / 200.0;
        assert!((v.seconds_to_empty.unwrap() - expect).abs() < 1e-9);
        assert_eq!(v.seconds_to_full, None);
        // Idle: earning 100/s.
        let v = s.view(ms(11_000));
        assert_eq!(v.current_iops, 0.0);
        let full = (10_000.0 - v.credits) / 100.0;
        assert!((v.seconds_to_full.unwrap() - full).abs() < 1e-9);
    }
}
