//! State that outlives the process: the NFS client records a restarted
//! server needs to let clients reclaim (RFC 8881 8.4.2.1). A small
//! interface with a local implementation (one file per client under
//! `state_dir/nfs-clients/`), so that a cluster store can implement it.

use std::path::{Path, PathBuf};

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

/// Records as files named by the hex of the owner; without a state
/// directory nothing is kept (and a restart has no grace period).
pub struct LocalStore {
    dir: Option<PathBuf>,
}

impl LocalStore {
    pub fn open(state_dir: Option<&Path>) -> Result<LocalStore, String> {
        let Some(state_dir) = state_dir else {
            return Ok(LocalStore { dir: None });
        };
        let dir = state_dir.join("nfs-clients");
        std::fs::create_dir_all(&dir).map_err(|e| {
            format!(
                "state_dir {}: cannot create {}: {e}; make the directory writable or choose another state_dir",
                state_dir.display(),
                dir.display()
            )
        })?;
        Ok(LocalStore { dir: Some(dir) })
    }

    fn path(&self, owner: &[u8]) -> Option<PathBuf> {
        let name: String = owner.iter().map(|b| format!("{b:02x}")).collect();
        // Owners are at most 1024 bytes; file names at most 255.
        let name = if name.len() > 200 {
            format!("{}-{:016x}", &name[..160], fnv1a64(owner))
        } else {
            name
        };
        Some(self.dir.as_ref()?.join(name))
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
        let Some(dir) = &self.dir else {
            return Vec::new();
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| std::fs::read(e.ok()?.path()).ok())
            .map(|owner| ClientRecord { owner })
            .collect()
    }

    fn add(&self, record: &ClientRecord) {
        if let Some(p) = self.path(&record.owner) {
            let _ = std::fs::write(p, &record.owner);
        }
    }

    fn remove(&self, owner: &[u8]) {
        if let Some(p) = self.path(owner) {
            let _ = std::fs::remove_file(p);
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
        let again = LocalStore::open(Some(&dir)).unwrap();
        let mut owners: Vec<_> = again.load().into_iter().map(|r| r.owner).collect();
        owners.sort();
        assert_eq!(owners, vec![vec![7u8; 1024], b"linux-client-1".to_vec()]);
        again.remove(b"linux-client-1");
        assert_eq!(LocalStore::open(Some(&dir)).unwrap().load().len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
