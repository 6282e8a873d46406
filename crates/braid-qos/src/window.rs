//! Per-second history of one share: what was admitted, and how long
//! requests were held back for each [`Reason`], for "current IOPS" and
//! "share of the last minute spent throttled".

use std::time::Duration;

use crate::throttle::Reason;

/// Seconds kept (a minute, and a few for the second being filled).
const SLOTS: usize = 64;
/// The window of the "current" rates.
pub const CURRENT: u64 = 5;
/// The window of the throttled fractions.
pub const MINUTE: u64 = 60;

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// Which second this slot holds (slots are reused round the ring).
    second: u64,
    ops: u64,
    bytes_read: u64,
    bytes_written: u64,
    /// Nanoseconds held back, per reason.
    throttled: [u64; 5],
}

#[derive(Clone, Debug)]
pub struct Window {
    slots: Vec<Slot>,
    start: Duration,
}

fn second(t: Duration) -> u64 {
    t.as_secs()
}

impl Window {
    pub fn new(now: Duration) -> Window {
        Window {
            slots: vec![Slot::default(); SLOTS],
            start: now,
        }
    }

    fn slot(&mut self, sec: u64) -> &mut Slot {
        let s = &mut self.slots[(sec % SLOTS as u64) as usize];
        if s.second != sec {
            *s = Slot {
                second: sec,
                ..Slot::default()
            };
        }
        s
    }

    fn get(&self, sec: u64) -> Option<&Slot> {
        let s = &self.slots[(sec % SLOTS as u64) as usize];
        (s.second == sec).then_some(s)
    }

    /// A request admitted at `now`.
    pub fn admitted(&mut self, now: Duration, ops: u64, bytes_read: u64, bytes_written: u64) {
        let s = self.slot(second(now));
        s.ops += ops;
        s.bytes_read += bytes_read;
        s.bytes_written += bytes_written;
    }

    /// The share was held back by `reason` from `from` to `to`.
    pub fn throttled(&mut self, reason: Reason, from: Duration, to: Duration) {
        let mut t = from;
        while t < to {
            let next = Duration::from_secs(second(t) + 1).min(to);
            let s = self.slot(second(t));
            s.throttled[reason.index()] += (next - t).as_nanos() as u64;
            t = next;
        }
    }

    /// The last `n` whole seconds before `now`'s (fewer just after start),
    /// and their length in seconds.
    fn last(&self, now: Duration, n: u64) -> (impl Iterator<Item = &Slot>, f64) {
        let cur = second(now);
        let first = cur.saturating_sub(n).max(second(self.start));
        let len = (cur - first) as f64;
        ((first..cur).filter_map(|s| self.get(s)), len)
    }

    /// Operations, bytes read and bytes written per second over the last
    /// [`CURRENT`] whole seconds.
    pub fn current(&self, now: Duration) -> (f64, f64, f64) {
        let (slots, len) = self.last(now, CURRENT);
        if len == 0.0 {
            return (0.0, 0.0, 0.0);
        }
        let (mut o, mut r, mut w) = (0u64, 0u64, 0u64);
        for s in slots {
            o += s.ops;
            r += s.bytes_read;
            w += s.bytes_written;
        }
        (o as f64 / len, r as f64 / len, w as f64 / len)
    }

    /// The fraction of the last [`MINUTE`] whole seconds (fewer just after
    /// start) the share spent held back by each reason.
    pub fn throttled_fraction(&self, now: Duration) -> [f64; 5] {
        let (slots, len) = self.last(now, MINUTE);
        let mut sum = [0u64; 5];
        for s in slots {
            for (a, b) in sum.iter_mut().zip(s.throttled) {
                *a += b;
            }
        }
        if len == 0.0 {
            return [0.0; 5];
        }
        sum.map(|ns| (ns as f64 / 1e9 / len).min(1.0))
    }

    /// Whether anything was held back within `span` before `now` (the
    /// second being filled included).
    pub fn throttled_within(&self, now: Duration, span: u64) -> bool {
        let cur = second(now);
        (cur.saturating_sub(span)..=cur)
            .filter_map(|s| self.get(s))
            .any(|s| s.throttled.iter().any(|&ns| ns > 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: f64) -> Duration {
        Duration::from_secs_f64(x)
    }

    #[test]
    fn current_rates_are_over_the_last_whole_seconds() {
        let mut w = Window::new(s(0.0));
        for i in 0..10 {
            w.admitted(s(i as f64 + 0.5), 100, 4096 * 100, 0);
        }
        let (ops, r, wr) = w.current(s(10.2));
        assert_eq!((ops, r, wr), (100.0, 409_600.0, 0.0));
        // Just after start: the seconds there are.
        let mut young = Window::new(s(0.0));
        young.admitted(s(0.5), 30, 0, 0);
        assert_eq!(young.current(s(1.1)).0, 30.0);
        assert_eq!(young.current(s(0.9)).0, 0.0);
    }

    #[test]
    fn throttled_time_is_split_across_seconds_and_reasons() {
        let mut w = Window::new(s(0.0));
        w.throttled(Reason::Iops, s(0.5), s(2.5));
        w.throttled(Reason::File, s(3.0), s(3.25));
        let f = w.throttled_fraction(s(4.0));
        assert!((f[0] - 0.5).abs() < 1e-9, "{f:?}");
        assert!((f[4] - 0.0625).abs() < 1e-9, "{f:?}");
        assert!(w.throttled_within(s(4.0), 5));
        assert!(!w.throttled_within(s(9.0), 5));
        // A minute later it has left the window.
        assert_eq!(w.throttled_fraction(s(70.0)), [0.0; 5]);
    }
}
