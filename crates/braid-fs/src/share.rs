//! Shares: an exported directory, held as an `O_PATH` fd, plus a registry of
//! the share's opens (used by rename to find and update affected opens).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::handle::HandleInner;

const SHARDS: usize = 16;

pub(crate) struct Share {
    pub(crate) name: String,
    pub(crate) root_path: PathBuf,
    pub(crate) root: OwnedFd,
    opens: Vec<Mutex<HashMap<u64, Weak<HandleInner>>>>,
    /// Large aligned writes bypass the page cache (`direct.rs`).
    direct_writes: AtomicBool,
}

impl Share {
    pub(crate) fn new(name: String, root_path: PathBuf, root: OwnedFd) -> Share {
        Share {
            name,
            root_path,
            root,
            opens: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            direct_writes: AtomicBool::new(false),
        }
    }

    pub(crate) fn direct_writes(&self) -> bool {
        self.direct_writes.load(Ordering::Relaxed)
    }

    pub(crate) fn root_fd(&self) -> RawFd {
        self.root.as_raw_fd()
    }

    fn shard(&self, id: u64) -> std::sync::MutexGuard<'_, HashMap<u64, Weak<HandleInner>>> {
        self.opens[(id as usize) % SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn register(&self, id: u64, h: Weak<HandleInner>) {
        self.shard(id).insert(id, h);
    }

    pub(crate) fn unregister(&self, id: u64) {
        self.shard(id).remove(&id);
    }

    /// Snapshot of all live opens of the share.
    pub(crate) fn all_opens(&self) -> Vec<Arc<HandleInner>> {
        let mut v = Vec::new();
        for s in &self.opens {
            let m = s.lock().unwrap_or_else(|p| p.into_inner());
            v.extend(m.values().filter_map(Weak::upgrade));
        }
        v
    }
}

/// A reference to an exported share. Cheap to clone.
#[derive(Clone)]
pub struct ShareRef(pub(crate) Arc<Share>);

impl ShareRef {
    pub fn name(&self) -> &str {
        &self.0.name
    }
    /// Let large aligned writes bypass the page cache (off by default).
    pub fn set_direct_writes(&self, on: bool) {
        self.0.direct_writes.store(on, Ordering::Relaxed);
    }
    /// The host directory (for display and logging only; never used to build paths).
    pub fn root_path(&self) -> &Path {
        &self.0.root_path
    }
}

impl std::fmt::Debug for ShareRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareRef")
            .field("name", &self.0.name)
            .field("root", &self.0.root_path)
            .finish()
    }
}
