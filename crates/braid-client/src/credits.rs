//! Credit accounting for one connection (MS-SMB2 3.2.4.1.5, 3.2.5.1.4).
//!
//! Granted credits are permits of a FIFO-fair semaphore: a request with
//! CreditCharge `n` takes `n` permits and `n` consecutive MessageIds, so the
//! client never exceeds what the server granted, and a large (multi-credit)
//! request is not starved by a stream of small ones. Every response, interim
//! STATUS_PENDING ones included, adds its CreditResponse back.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use tokio::sync::Semaphore;

/// Largest number of credits one request may charge (8 MiB payloads).
pub const MAX_CHARGE: u16 = 128;

#[derive(Debug)]
pub struct Credits {
    sem: Semaphore,
    next_mid: AtomicU64,
    /// Credits consumed by requests whose final response has not come back.
    in_flight: AtomicUsize,
    /// How many credits we try to hold (granted plus in flight).
    target: usize,
}

impl Credits {
    /// A fresh connection holds one credit (MS-SMB2 3.2.4.1.5: the client
    /// starts with one credit for NEGOTIATE), MessageId 0 first.
    pub fn new(target: u16) -> Self {
        Credits {
            sem: Semaphore::new(1),
            next_mid: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            target: target.max(1) as usize,
        }
    }

    /// Wait for `charge` credits and return the first MessageId of the
    /// `charge` consecutive ones this request uses (MS-SMB2 3.2.4.1.3).
    pub async fn acquire(&self, charge: u16) -> Result<u64> {
        let charge = charge.max(1);
        let permit = self
            .sem
            .acquire_many(u32::from(charge))
            .await
            .map_err(|_| Error::ConnectionLost("connection closed".into()))?;
        permit.forget();
        self.in_flight.fetch_add(charge as usize, Ordering::Relaxed);
        Ok(self
            .next_mid
            .fetch_add(u64::from(charge), Ordering::Relaxed))
    }

    /// CreditRequest for a request charging `charge`: enough to climb back
    /// to the target window.
    pub fn request_for(&self, charge: u16) -> u16 {
        let have = self.sem.available_permits() + self.in_flight.load(Ordering::Relaxed);
        let deficit = self.target.saturating_sub(have);
        (charge as usize + deficit).min(u16::MAX as usize) as u16
    }

    /// A response (interim or final) granted `n` credits.
    pub fn grant(&self, n: u16) {
        if n > 0 && !self.sem.is_closed() {
            self.sem.add_permits(n as usize);
        }
    }

    /// The final response to a request that charged `charge` arrived.
    pub fn complete(&self, charge: u16) {
        let c = charge.max(1) as usize;
        let _ = self
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(c))
            });
    }

    /// Credits available right now.
    pub fn available(&self) -> usize {
        self.sem.available_permits()
    }

    /// Wake every waiter with an error: the connection is gone.
    pub fn close(&self) {
        self.sem.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn message_ids_follow_charges() {
        let c = Credits::new(64);
        assert_eq!(c.acquire(1).await.unwrap(), 0);
        c.grant(10);
        assert_eq!(c.acquire(4).await.unwrap(), 1);
        assert_eq!(c.acquire(1).await.unwrap(), 5);
        assert_eq!(c.available(), 5);
        assert_eq!(c.request_for(1), 1 + 64 - 5 - 6);
    }

    #[tokio::test]
    async fn closed_window_fails_waiters() {
        let c = std::sync::Arc::new(Credits::new(8));
        c.acquire(1).await.unwrap();
        let c2 = c.clone();
        let t = tokio::spawn(async move { c2.acquire(1).await });
        tokio::task::yield_now().await;
        c.close();
        assert!(t.await.unwrap().is_err());
    }
}
