//! Counts per client address: the opens (`max_open_files_per_client`) and
//! the connections (`max_connections_per_client`) each client holds.
//!
//! Braid serves every client from one process, so open files and
//! connections are file descriptors every client draws from.
//! `max_open_files` bounds one session, but a client may set up many
//! sessions (up to 1024 per connection), and a durable open it leaves
//! behind keeps its descriptor after its session is gone; and
//! `max_connections` bounds the server, not a client. These bounds are per
//! client address, across its sessions and connections. An open's slot is
//! held until the open is closed (a durable open's until it is reclaimed
//! and closed, or expires), wherever it was reconnected from; a
//! connection's until it ends.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How many of one thing (opens, connections) each client address holds.
#[derive(Debug)]
pub struct PerClient {
    /// The config key that sets `limit`, for the log.
    key: &'static str,
    /// A reload may change it (`reload.rs`); slots already held stay.
    limit: AtomicUsize,
    held: Mutex<HashMap<IpAddr, usize>>,
    refusals: Mutex<Refusals>,
}

/// Refusals since the last warning, logged at most every 10 s so that a
/// client hammering at its limit does not flood the log.
#[derive(Debug, Default)]
struct Refusals {
    since_warning: u64,
    warned_at: Option<Instant>,
}

/// One open's (or connection's) place in its client's count, given back
/// when dropped.
#[derive(Debug)]
pub struct PerClientSlot {
    owner: Arc<PerClient>,
    client: IpAddr,
}

impl PerClient {
    pub fn new(key: &'static str, limit: usize) -> Arc<Self> {
        Arc::new(Self {
            key,
            limit: AtomicUsize::new(limit),
            held: Mutex::new(HashMap::new()),
            refusals: Mutex::default(),
        })
    }

    /// Refuse beyond `limit` from now on (a reload).
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// A slot for one more of `client`'s, or None when it already holds
    /// the limit. An IPv4 client reached over an IPv6 socket counts as
    /// the same client as over IPv4.
    pub fn take(self: &Arc<Self>, client: IpAddr) -> Option<PerClientSlot> {
        let client = client.to_canonical();
        let mut held = self.held.lock().unwrap();
        let n = held.entry(client).or_insert(0);
        if *n >= self.limit.load(Ordering::Relaxed) {
            drop(held);
            self.refused(client);
            return None;
        }
        *n += 1;
        Some(PerClientSlot {
            owner: self.clone(),
            client,
        })
    }

    fn refused(&self, client: IpAddr) {
        let mut r = self.refusals.lock().unwrap();
        r.since_warning += 1;
        if r.warned_at
            .is_some_and(|t| t.elapsed() < Duration::from_secs(10))
        {
            return;
        }
        tracing::warn!(
            %client,
            limit = self.limit.load(Ordering::Relaxed),
            refused = r.since_warning,
            "client at its {} limit: refused", self.key
        );
        r.since_warning = 0;
        r.warned_at = Some(Instant::now());
    }

    /// How many `client` holds now.
    pub fn held_by(&self, client: IpAddr) -> usize {
        let held = self.held.lock().unwrap();
        held.get(&client.to_canonical()).copied().unwrap_or(0)
    }
}

impl Drop for PerClientSlot {
    fn drop(&mut self) {
        let mut held = self.owner.held.lock().unwrap();
        if let Some(n) = held.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_is_held_to_the_limit_and_gets_slots_back() {
        let opens = PerClient::new("test", 2);
        let a: IpAddr = "198.18.0.1".parse().unwrap();
        let b: IpAddr = "198.18.0.2".parse().unwrap();
        let first = opens.take(a).unwrap();
        let _second = opens.take(a).unwrap();
        assert!(opens.take(a).is_none());
        // The same client over an IPv6 socket.
        assert!(opens.take("::ffff:198.18.0.1".parse().unwrap()).is_none());
        assert!(opens.take(b).is_some());
        drop(first);
        assert_eq!(opens.held_by(a), 1);
        let _third = opens.take(a).unwrap();
        assert_eq!(opens.held_by(a), 2);
    }

    #[test]
    fn a_client_with_nothing_open_leaves_no_entry() {
        let opens = PerClient::new("test", 4);
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        drop(opens.take(a).unwrap());
        assert!(opens.held.lock().unwrap().is_empty());
    }
}
