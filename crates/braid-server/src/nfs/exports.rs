//! The NFS exports: the shares served over NFS, each with its POSIX view
//! (`braid_fs::posix::PosixShare`) and its export options, found by name
//! (LOOKUP from the pseudo-root) or by the export id inside a filehandle.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use braid_fs::posix::PosixShare;

use super::export::NfsExportOptions;
use crate::config::ServerConfig;

pub struct Export {
    pub name: String,
    pub id: u32,
    pub path: PathBuf,
    pub share: PosixShare,
    pub options: NfsExportOptions,
    /// The share's `direct_writes`: large aligned WRITEs bypass the page
    /// cache (braid-fs `direct.rs`), as SMB's do.
    pub direct_writes: bool,
    /// The share's `notify_host_changes`: a file delegated to a client is
    /// watched for changes made on the host, which recall it
    /// (`crate::host_watch`).
    pub notify_host_changes: bool,
}

#[derive(Default)]
struct Table {
    by_id: HashMap<u32, Arc<Export>>,
    by_name: BTreeMap<String, Arc<Export>>,
}

pub struct Exports {
    table: RwLock<Table>,
    key: [u8; 32],
}

/// A share's export id: a hash of its name, so it is the same after a
/// restart (filehandles carry it) and no table must be kept.
pub fn export_id(name: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.as_bytes() {
        h ^= *b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h.max(1)
}

/// The store's space and record for the filehandle key.
const KEY_SPACE: &str = "nfs-keys";
const KEY_RECORD: &str = "handle";

/// The key that seals filehandles (braid-fs `posix/handle.rs`), kept in the
/// server's state store (`store`: record `nfs-keys/handle`), so that
/// handles survive a restart and, with etcd, are the same on every node of
/// a cluster. The first start makes it; a key an earlier Braid kept in
/// `state_dir/nfs-handle-key` is taken into the store. Two nodes making it
/// at once: the store's revision check lets one win, and the other takes
/// its key. Without a lasting store, `state_dir`'s file (or, without a
/// state directory, a new key each run: handles go stale at restart).
pub fn handle_key_in(
    store: Option<&dyn braid_fs::state_store::StateStore>,
    state_dir: Option<&Path>,
) -> Result<[u8; 32], String> {
    let Some(store) = store else {
        return handle_key(state_dir);
    };
    let unavailable =
        |e| format!("NFS filehandle key: {e}; NFS cannot serve without it (check the state store)");
    let stored =
        |store: &dyn braid_fs::state_store::StateStore| -> Result<Option<[u8; 32]>, String> {
            let loaded = store.load(KEY_SPACE).map_err(unavailable)?;
            match loaded.records.iter().find(|(k, _)| k == KEY_RECORD) {
            Some((_, v)) => <[u8; 32]>::try_from(v.as_slice()).map(Some).map_err(|_| {
                format!(
                    "NFS filehandle key in {} is not 32 bytes; restore it (removing it makes every client's filehandles stale)",
                    store.describe()
                )
            }),
            None if loaded.corrupt.is_empty() => Ok(None),
            None => Err(format!(
                "NFS filehandle key in {} is corrupt ({}); restore it (removing it makes every client's filehandles stale)",
                store.describe(),
                loaded.corrupt[0].location
            )),
        }
        };
    if let Some(key) = stored(store)? {
        return Ok(key);
    }
    let legacy = state_dir.map(|d| d.join("nfs-handle-key"));
    let key = match legacy.filter(|p| p.exists()) {
        Some(_) => handle_key(state_dir)?,
        None => PosixShare::generate_key(),
    };
    match store.put(KEY_SPACE, KEY_RECORD, &key) {
        Ok(()) => Ok(key),
        // Another node made it first.
        Err(braid_fs::state_store::StoreError::Conflict(_)) => stored(store)?.ok_or_else(|| {
            unavailable(braid_fs::state_store::StoreError::Unavailable(
                "the key another node wrote is gone".into(),
            ))
        }),
        Err(e) => Err(unavailable(e)),
    }
}

/// The key kept in `state_dir/nfs-handle-key` (0600): the state store's
/// before there was one, and the key of a run without a lasting store.
pub fn handle_key(state_dir: Option<&Path>) -> Result<[u8; 32], String> {
    let Some(dir) = state_dir else {
        return Ok(PosixShare::generate_key());
    };
    let path = dir.join("nfs-handle-key");
    if let Ok(bytes) = std::fs::read(&path) {
        if let Ok(key) = <[u8; 32]>::try_from(bytes.as_slice()) {
            return Ok(key);
        }
        return Err(format!(
            "state_dir: {} is not a 32-byte key; remove it (clients' filehandles go stale) or restore it",
            path.display()
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "state_dir {}: {e}; create it or choose another state_dir",
            dir.display()
        )
    })?;
    let key = PosixShare::generate_key();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("state_dir: cannot write {}: {e}", path.display()))?;
    f.write_all(&key)
        .map_err(|e| format!("state_dir: cannot write {}: {e}", path.display()))?;
    Ok(key)
}

impl Exports {
    pub fn new(config: &ServerConfig, key: [u8; 32]) -> Result<Exports, String> {
        let exports = Exports {
            table: RwLock::new(Table::default()),
            key,
        };
        exports.apply(config)?;
        Ok(exports)
    }

    /// Serve exactly the NFS shares of `config` (at start and on reload);
    /// an export whose path and options did not change is kept as it is.
    pub fn apply(&self, config: &ServerConfig) -> Result<(), String> {
        let mut next = Table::default();
        let old = self.table.read().unwrap();
        for share in config.shares.iter().filter(|s| s.protocols.nfs) {
            let id = export_id(&share.name);
            if let Some(other) = next.by_id.get(&id) {
                return Err(format!(
                    "share {}: its NFS export id collides with share {}'s; rename one of them",
                    share.name, other.name
                ));
            }
            let export = match old.by_name.get(&share.name) {
                Some(e)
                    if e.path == share.path
                        && e.options == share.nfs
                        && e.direct_writes == share.direct_writes
                        && e.notify_host_changes == share.notify_host_changes
                        && e.share.fd_cache().is_some() == keeps_fds(config, share) =>
                {
                    e.clone()
                }
                _ => {
                    let posix = PosixShare::new(&share.path, id, self.key).map_err(|e| {
                        format!(
                            "share {}: cannot serve {} over NFS: {e}; check the path",
                            share.name,
                            share.path.display()
                        )
                    })?;
                    if keeps_fds(config, share) {
                        // Kept fds (braid-fs `meta/fd_cache.rs`), the
                        // NFS face's own: its opens are as the client.
                        let cache = braid_fs::meta::FdCache::new(
                            Arc::new(braid_fs::SystemClock),
                            config.metadata_cache_fds,
                        );
                        let cache = Arc::new(cache);
                        braid_fs::meta::FdCache::start_sweeper(&cache);
                        if std::env::var_os("BRAID_TEST_BROKEN_FD_CACHE").is_some() {
                            cache.skip_unlink_drops();
                        }
                        posix.set_fd_cache(cache);
                    }
                    Arc::new(Export {
                        name: share.name.clone(),
                        id,
                        path: share.path.clone(),
                        share: posix,
                        options: share.nfs.clone(),
                        direct_writes: share.direct_writes,
                        notify_host_changes: share.notify_host_changes,
                    })
                }
            };
            next.by_id.insert(id, export.clone());
            next.by_name.insert(share.name.clone(), export);
        }
        drop(old);
        *self.table.write().unwrap() = next;
        Ok(())
    }

    pub fn by_id(&self, id: u32) -> Option<Arc<Export>> {
        self.table.read().unwrap().by_id.get(&id).cloned()
    }

    pub fn by_name(&self, name: &str) -> Option<Arc<Export>> {
        self.table.read().unwrap().by_name.get(name).cloned()
    }

    /// Exports in name order (the pseudo-root's READDIR).
    pub fn all(&self) -> Vec<Arc<Export>> {
        self.table
            .read()
            .unwrap()
            .by_name
            .values()
            .cloned()
            .collect()
    }
}

/// Whether `share`'s NFS face keeps fds after a close: with its metadata
/// cache, when the server keeps any (`metadata_cache_max_fds`, none by
/// default: braid-fs `FdLimits::default` says why).
fn keeps_fds(config: &ServerConfig, share: &crate::config::ShareConfig) -> bool {
    share.metadata_cache && config.metadata_cache_fds.max_fds > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_fs::state_store::{LocalStore, StateStore};

    #[test]
    fn the_handle_key_is_made_once_and_kept_in_the_store() {
        let dir = std::env::temp_dir().join(format!("braid-handle-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // An earlier Braid's key file is taken into the store.
        let old = handle_key(Some(&dir)).unwrap();
        let store = LocalStore::new(&dir);
        assert_eq!(handle_key_in(Some(&store), Some(&dir)).unwrap(), old);
        std::fs::remove_file(dir.join("nfs-handle-key")).unwrap();
        let again = LocalStore::new(&dir);
        assert_eq!(handle_key_in(Some(&again), Some(&dir)).unwrap(), old);
        // A store of its own (another node's view of etcd): the same key.
        let fresh = braid_fs::state_store::MemoryStore::default();
        let made = handle_key_in(Some(&fresh), None).unwrap();
        assert_eq!(handle_key_in(Some(&fresh), None).unwrap(), made);
        fresh.put(KEY_SPACE, KEY_RECORD, b"short").unwrap();
        let err = handle_key_in(Some(&fresh), None).unwrap_err();
        assert!(err.contains("not 32 bytes"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
