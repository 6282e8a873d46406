//! MS-SMB2 3.3.1.1 / 3.3.5.2.3: the message-id window a connection's
//! credits open, and how many credits to grant.

use std::collections::BTreeSet;

#[derive(Debug)]
pub struct CreditWindow {
    /// Lowest message id not yet received.
    low: u64,
    /// One past the highest message id the client may use.
    end: u64,
    /// Ids above `low` already received (the client may skip ahead).
    used: BTreeSet<u64>,
    max_outstanding: u64,
    /// Credits of requests received and not yet answered (each request's
    /// charge, given back by the grant on its response).
    in_flight: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub enum CreditError {
    /// Id outside the window or already used: the connection is dropped.
    InvalidMessageId,
}

impl CreditWindow {
    pub fn new(max_outstanding: u16) -> Self {
        // MS-SMB2 3.3.1.1: the window starts as {0}.
        CreditWindow {
            low: 0,
            end: 1,
            used: BTreeSet::new(),
            max_outstanding: max_outstanding.max(1) as u64,
            in_flight: 0,
        }
    }

    /// Consume `charge` ids starting at `message_id`.
    pub fn consume(&mut self, message_id: u64, charge: u16) -> Result<(), CreditError> {
        let charge = charge.max(1) as u64;
        let last = message_id
            .checked_add(charge - 1)
            .ok_or(CreditError::InvalidMessageId)?;
        if message_id < self.low || last >= self.end {
            return Err(CreditError::InvalidMessageId);
        }
        if self.used.range(message_id..=last).next().is_some() {
            return Err(CreditError::InvalidMessageId);
        }
        for id in message_id..=last {
            self.used.insert(id);
        }
        while self.used.remove(&self.low) {
            self.low += 1;
        }
        self.in_flight += charge;
        Ok(())
    }

    /// Credits currently granted and not yet used.
    pub fn outstanding(&self) -> u64 {
        self.end - self.low - self.used.len() as u64
    }

    /// Grant up to `requested` (at least one while the client holds none,
    /// so that it can never be starved), bounded by the configured maximum.
    pub fn grant(&mut self, requested: u16, charge: u16) -> u16 {
        self.in_flight = self.in_flight.saturating_sub(charge.max(1) as u64);
        let requested = (requested as u64).max(1);
        let room = self.max_outstanding.saturating_sub(self.outstanding());
        let mut g = requested.min(room);
        if g == 0 && self.outstanding() == 0 {
            g = 1;
        }
        // MS-SMB2 3.3.1.2: grant enough to keep a multi-credit client going.
        let _ = charge;
        self.end += g;
        g as u16
    }
}

impl CreditWindow {
    /// [`CreditWindow::grant`] for a session QoS is holding back
    /// (`qos.rs`): the credits the client holds and has in flight are
    /// brought down to `cap` by granting less than the request used, so
    /// that it keeps fewer requests waiting in the share's queue. Never
    /// below one credit when nothing else is held or in flight (MS-SMB2
    /// 3.3.1.2: the client must not be left without credits).
    pub fn grant_throttled(&mut self, requested: u16, charge: u16, cap: u64) -> u16 {
        let charge = charge.max(1) as u64;
        let in_flight_after = self.in_flight.saturating_sub(charge);
        let held = self.outstanding() + in_flight_after;
        let room = cap.saturating_sub(held);
        let wanted = (requested as u64).max(1).min(charge).min(room);
        if wanted == 0 && self.outstanding() == 0 && in_flight_after == 0 {
            return self.grant(1, charge as u16);
        }
        self.in_flight = in_flight_after;
        let room = self.max_outstanding.saturating_sub(self.outstanding());
        let g = wanted.min(room);
        self.end += g;
        g as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_starts_at_zero_and_grows_with_grants() {
        let mut w = CreditWindow::new(100);
        assert!(w.consume(0, 1).is_ok());
        assert_eq!(w.consume(0, 1), Err(CreditError::InvalidMessageId));
        assert_eq!(w.consume(1, 1), Err(CreditError::InvalidMessageId));
        assert_eq!(w.grant(10, 1), 10);
        assert!(w.consume(5, 1).is_ok()); // skipped ids stay usable
        assert!(w.consume(1, 4).is_ok());
        assert!(w.consume(6, 5).is_ok());
        assert_eq!(w.consume(11, 1), Err(CreditError::InvalidMessageId));
    }

    #[test]
    fn a_throttled_client_is_brought_down_to_the_cap() {
        let mut w = CreditWindow::new(512);
        w.consume(0, 1).unwrap();
        assert_eq!(w.grant(64, 1), 64);
        // 64 requests in flight; answered while throttled with a cap of 16.
        for id in 1..=64 {
            w.consume(id, 1).unwrap();
        }
        let mut granted = 0;
        for _ in 0..48 {
            granted += w.grant_throttled(1, 1, 16) as u64;
        }
        // The first 48 answers grant nothing: 16 still in flight.
        assert_eq!(granted, 0);
        // From there on, one for one.
        assert_eq!(w.grant_throttled(1, 1, 16), 1);
        // Never more than the request used, however much is asked.
        assert_eq!(w.grant_throttled(100, 1, 16), 1);
        // The last answer with nothing else left grants one.
        let mut last = CreditWindow::new(8);
        last.consume(0, 1).unwrap();
        assert_eq!(last.grant_throttled(1, 1, 0), 1);
    }

    #[test]
    fn grants_are_bounded() {
        let mut w = CreditWindow::new(8);
        w.consume(0, 1).unwrap();
        assert_eq!(w.grant(100, 1), 8);
        assert_eq!(w.grant(100, 1), 0);
        assert_eq!(w.outstanding(), 8);
    }
}
