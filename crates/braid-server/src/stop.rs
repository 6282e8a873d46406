//! A graceful stop (SIGTERM, SIGINT; `Server::stop`): new work stops
//! first, then what must outlive the process is saved.
//!
//! 1. The SMB and NFS listeners close: a new connection is refused.
//! 2. Each SMB connection stops reading requests. Those it is running
//!    finish and their responses go out (a large WRITE still arriving is
//!    read to its end and run); then it closes as a lost connection does
//!    (MS-SMB2 3.3.7.1), so that its durable opens wait, disconnected, for
//!    a reconnect after the restart. Requests the client sent after that
//!    get no answer: the client sends them again once it has reconnected.
//!    Each NFS connection stops reading and ends once its running
//!    compounds are answered (NFS client records are in the store already).
//! 3. Once every connection has ended, or DRAIN after the signal whatever
//!    is still running (a request stuck in the file system must not hold
//!    the stop for ever), the durable opens are written to the state store.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long connections have to finish their running requests.
pub const DRAIN: Duration = Duration::from_secs(5);

/// Whether a stop was asked for, and the connections still being served.
pub struct Stop {
    requested: CancellationToken,
    deadline: OnceLock<Instant>,
    serving: watch::Sender<usize>,
}

impl Default for Stop {
    fn default() -> Self {
        Stop {
            requested: CancellationToken::new(),
            deadline: OnceLock::new(),
            serving: watch::channel(0).0,
        }
    }
}

impl Stop {
    /// Ask for the stop: listeners close, connections wind down.
    pub fn request(&self) {
        self.deadline.get_or_init(|| Instant::now() + DRAIN);
        self.requested.cancel();
    }

    pub fn is_requested(&self) -> bool {
        self.requested.is_cancelled()
    }

    /// Completes once the stop is asked for.
    pub async fn requested(&self) {
        self.requested.cancelled().await
    }

    /// When connections must be gone (DRAIN after the request).
    pub fn deadline(&self) -> Instant {
        *self.deadline.get_or_init(|| Instant::now() + DRAIN)
    }

    /// A token cancelled when the stop is asked for, for one connection:
    /// waiting on it takes no lock that other connections wait on too (a
    /// connection waits on it for each request it reads).
    pub fn watch(&self) -> CancellationToken {
        self.requested.child_token()
    }

    /// Completes at the deadline of a stop seen through `watched` (from
    /// `watch`); never without one.
    pub async fn deadline_passed(&self, watched: &CancellationToken) {
        watched.cancelled().await;
        tokio::time::sleep_until(self.deadline()).await
    }

    /// A connection being served, until the returned guard is dropped.
    pub fn serving(self: &Arc<Self>) -> Serving {
        self.serving.send_modify(|n| *n += 1);
        Serving(self.clone())
    }

    /// Completes when no connection is served any more.
    pub async fn drained(&self) {
        let _ = self.serving.subscribe().wait_for(|n| *n == 0).await;
    }
}

/// One connection being served (`Stop::serving`).
pub struct Serving(Arc<Stop>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.serving.send_modify(|n| *n -= 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn drained_waits_for_every_connection() {
        let stop = Arc::new(Stop::default());
        let watched = stop.watch();
        let a = stop.serving();
        let b = stop.serving();
        stop.request();
        assert!(watched.is_cancelled());
        drop(a);
        let waiting = tokio::time::timeout(Duration::from_millis(20), stop.drained()).await;
        assert!(waiting.is_err(), "one connection is still served");
        drop(b);
        stop.drained().await;
    }

    #[tokio::test]
    async fn the_deadline_is_fixed_by_the_request() {
        let stop = Stop::default();
        assert!(!stop.is_requested());
        let asked = Instant::now();
        stop.request();
        let deadline = stop.deadline();
        assert!(deadline >= asked + DRAIN && deadline < Instant::now() + DRAIN);
        stop.request();
        assert_eq!(
            stop.deadline(),
            deadline,
            "a second signal does not move it"
        );
        stop.requested().await;
    }
}
