//! State that outlives the process: the NFS client records a restarted
//! server needs to let clients reclaim (RFC 8881 8.4.2.1), kept in the
//! server's one state store (braid-fs `state_store.rs`, space
//! `nfs-clients`, one record per client named by the hex of its owner).

use std::path::Path;
use std::sync::Arc;

use braid_fs::state_store::{self, StateStore as Store};

/// The store's space for NFS client records.
pub const SPACE: &str = "nfs-clients";

/// What a restarted server must know of a client that held state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRecord {
    /// co_ownerid, the client's long-lived name.
    pub owner: Vec<u8>,
}

pub trait StateStore: Send + Sync {
    /// Clients that held state when the last run ended.
    fn load(&self) -> Vec<ClientRecord>;
    /// A client now holds state (its first CREATE_SESSION confirmed it).
    fn add(&self, record: &ClientRecord);
    /// A client holds none any more (DESTROY_CLIENTID, lease expired).
    fn remove(&self, owner: &[u8]);
}

/// Client records in the state store under `state_dir`; without a state
/// directory nothing is kept (and a restart has no grace period).
pub struct LocalStore {
    store: Option<Arc<dyn Store>>,
}

impl LocalStore {
    pub fn open(state_dir: Option<&Path>) -> Result<LocalStore, String> {
        let Some(state_dir) = state_dir else {
            return Ok(LocalStore { store: None });
        };
        let dir = state_dir.join(SPACE);
        std::fs::create_dir_all(&dir).map_err(|e| {
            format!(
                "state_dir {}: cannot create {}: {e}; make the directory writable or choose another state_dir",
                state_dir.display(),
                dir.display()
            )
        })?;
        Ok(LocalStore {
            store: Some(Arc::new(state_store::LocalStore::new(state_dir))),
        })
    }

    /// Client records in the server's state store (`ServerState::store`:
    /// local files or etcd).
    pub fn over(store: Arc<dyn Store>) -> LocalStore {
        LocalStore { store: Some(store) }
    }

    /// The store underneath (None without a state directory).
    pub fn inner(&self) -> Option<Arc<dyn Store>> {
        self.store.clone()
    }
}

/// A record's name: the hex of the owner, cut and hashed past 200
/// characters (owners are at most 1024 bytes; file names at most 255).
pub fn record_key(owner: &[u8]) -> String {
    let name = hex::encode(owner);
    if name.len() > 200 {
        format!("{}-{:016x}", &name[..160], fnv1a64(owner))
    } else {
        name
    }
}

fn fnv1a64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl StateStore for LocalStore {
    fn load(&self) -> Vec<ClientRecord> {
        let Some(store) = &self.store else {
            return Vec::new();
        };
        let loaded = match store.load(SPACE) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!("{e}; NFS clients of the last run cannot reclaim");
                return Vec::new();
            }
        };
        let mut out: Vec<ClientRecord> = loaded
            .records
            .into_iter()
            .filter(|(key, owner)| *key == record_key(owner))
            .map(|(_, owner)| ClientRecord { owner })
            .collect();
        for c in loaded.corrupt {
            // Before the state store, a record was the bare owner, in a
            // file named by its hex: taken once and written anew.
            let legacy = std::fs::read(&c.location).ok().filter(|owner| {
                Path::new(&c.location)
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy() == record_key(owner))
            });
            match legacy {
                Some(owner) => {
                    let record = ClientRecord { owner };
                    self.add(&record);
                    out.push(record);
                }
                None => tracing::warn!(
                    "state store: corrupt record {} skipped ({}); that NFS client cannot reclaim",
                    c.location,
                    c.reason
                ),
            }
        }
        out
    }

    fn add(&self, record: &ClientRecord) {
        if let Some(store) = &self.store {
            if let Err(e) = store.put(SPACE, &record_key(&record.owner), &record.owner) {
                tracing::warn!("{e}; this NFS client could not reclaim after a restart");
            }
        }
    }

    fn remove(&self, owner: &[u8]) {
        if let Some(store) = &self.store {
            let _ = store.delete(SPACE, &record_key(owner));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_a_new_store_on_the_same_directory() {
        let dir = std::env::temp_dir().join(format!("braid-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let s = LocalStore::open(Some(&dir)).unwrap();
        s.add(&ClientRecord {
            owner: b"linux-client-1".to_vec(),
        });
        s.add(&ClientRecord {
            owner: vec![7u8; 1024],
        });
        // A record from before the state store: the bare owner.
        std::fs::write(dir.join("nfs-clients").join(record_key(b"old")), b"old").unwrap();
        let again = LocalStore::open(Some(&dir)).unwrap();
        let mut owners: Vec<_> = again.load().into_iter().map(|r| r.owner).collect();
        owners.sort();
        assert_eq!(
            owners,
            vec![vec![7u8; 1024], b"linux-client-1".to_vec(), b"old".to_vec()]
        );
        again.remove(b"linux-client-1");
        assert_eq!(LocalStore::open(Some(&dir)).unwrap().load().len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
