//! Live NFS connections, and how many each client address holds.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};

use super::super::conn::Connection;

#[derive(Default)]
pub struct ConnectionTable {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    live: HashMap<u64, Weak<Connection>>,
    per_address: HashMap<IpAddr, usize>,
}

/// Held while a connection is served; gives its address's place back.
pub struct AddressSlot {
    inner: Arc<Mutex<Inner>>,
    addr: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = inner.per_address.get_mut(&self.addr) {
            *n -= 1;
            if *n == 0 {
                inner.per_address.remove(&self.addr);
            }
        }
    }
}

impl ConnectionTable {
    /// A place for one more connection from `addr`, or None at `max`.
    pub fn admit(&self, addr: IpAddr, max: usize) -> Option<AddressSlot> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let n = inner.per_address.entry(addr).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(AddressSlot {
            inner: self.inner.clone(),
            addr,
        })
    }

    pub fn insert(&self, conn: &Arc<Connection>) {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .live
            .insert(conn.id, Arc::downgrade(conn));
    }

    pub fn remove(&self, id: u64) {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .live
            .remove(&id);
    }

    pub fn get(&self, id: u64) -> Option<Arc<Connection>> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .live
            .get(&id)?
            .upgrade()
    }

    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .live
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
