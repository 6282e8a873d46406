//! `put_soon` and `delete_soon` for a store whose every write is a round
//! trip (etcd): the caller does not wait; one thread applies the writes
//! in the order they were made, and `flush` waits for it to catch up.
//! Everything else goes straight to the store, after the queue drained, so
//! a `load` sees every write made before it.

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::state_store::{Loaded, StateStore, StoreError};

enum Write {
    Put(String, String, Vec<u8>),
    Delete(String, String),
}

/// Writes queued and not yet applied.
#[derive(Default)]
struct Pending {
    count: Mutex<u64>,
    drained: Condvar,
}

pub struct Deferred {
    inner: Arc<dyn StateStore>,
    queue: Mutex<mpsc::Sender<Write>>,
    pending: Arc<Pending>,
}

/// How long `flush` waits for queued writes (each has its store's own
/// deadline; this bounds a queue of them).
const FLUSH_WAIT: Duration = Duration::from_secs(10);

impl Deferred {
    pub fn new(inner: Arc<dyn StateStore>) -> Deferred {
        let (tx, rx) = mpsc::channel::<Write>();
        let pending = Arc::new(Pending::default());
        let (store, done) = (inner.clone(), pending.clone());
        std::thread::Builder::new()
            .name("braid-state-writer".into())
            .spawn(move || {
                for write in rx {
                    let result = match &write {
                        Write::Put(space, key, value) => store.put(space, key, value),
                        Write::Delete(space, key) => store.delete(space, key),
                    };
                    if let Err(e) = result {
                        tracing::warn!("{e}; a record of {} is not kept", store.describe());
                    }
                    let mut count = done.count.lock().unwrap_or_else(|e| e.into_inner());
                    *count -= 1;
                    if *count == 0 {
                        done.drained.notify_all();
                    }
                }
            })
            .expect("spawn the state writer thread");
        Deferred {
            inner,
            queue: Mutex::new(tx),
            pending,
        }
    }

    fn enqueue(&self, write: Write) -> Result<(), StoreError> {
        *self.pending.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        let sent = self
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(write);
        sent.map_err(|_| StoreError::Unavailable("the state writer thread is gone".into()))
    }

    fn drain(&self) -> Result<(), StoreError> {
        let count = self.pending.count.lock().unwrap_or_else(|e| e.into_inner());
        let (count, timeout) = self
            .pending
            .drained
            .wait_timeout_while(count, FLUSH_WAIT, |n| *n > 0)
            .unwrap_or_else(|e| e.into_inner());
        if timeout.timed_out() {
            return Err(StoreError::Unavailable(format!(
                "{} writes still queued for {} after {FLUSH_WAIT:?}",
                *count,
                self.inner.describe()
            )));
        }
        Ok(())
    }
}

impl StateStore for Deferred {
    fn put(&self, space: &str, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.inner.put(space, key, value)
    }

    fn delete(&self, space: &str, key: &str) -> Result<(), StoreError> {
        self.inner.delete(space, key)
    }

    fn load(&self, space: &str) -> Result<Loaded, StoreError> {
        self.drain()?;
        self.inner.load(space)
    }

    fn put_soon(&self, space: &str, key: &str, value: &[u8]) -> Result<(), StoreError> {
        crate::state_store::check_key(key)?;
        self.enqueue(Write::Put(space.into(), key.into(), value.to_vec()))
    }

    fn delete_soon(&self, space: &str, key: &str) -> Result<(), StoreError> {
        self.enqueue(Write::Delete(space.into(), key.into()))
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.drain()?;
        self.inner.flush()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state_store::MemoryStore;

    #[test]
    fn writes_are_applied_in_order_and_seen_by_load() {
        let d = Deferred::new(Arc::new(MemoryStore::default()));
        for i in 0..100u32 {
            d.put_soon("held", "k", &i.to_le_bytes()).unwrap();
        }
        d.put_soon("held", "gone", b"x").unwrap();
        d.delete_soon("held", "gone").unwrap();
        let loaded = d.load("held").unwrap();
        assert_eq!(
            loaded.records,
            vec![("k".to_string(), 99u32.to_le_bytes().to_vec())]
        );
        d.flush().unwrap();
    }
}
