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

/// The key that seals filehandles (braid-fs `posix/handle.rs`): kept in
/// `state_dir/nfs-handle-key` (0600) so handles survive a restart; without
/// a state directory, a new key each run (handles go stale at restart).
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
