//! Per-file shared state: the opens of a file (for share modes), its delete
//! disposition and its byte-range locks. Files are keyed by (dev, inode) in a
//! sharded map, so there is no global lock; each file has its own mutex.
//!
//! Lock order: a file's `state` mutex may be held while taking a shard
//! mutex, never the other way round.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::error::{FsError, FsResult};
use crate::locks::LockTable;
use crate::types::{access, share};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FileKey {
    pub dev: u64,
    pub ino: u64,
}

impl FileKey {
    pub fn of(st: &libc::stat) -> FileKey {
        FileKey {
            dev: st.st_dev,
            ino: st.st_ino,
        }
    }
}

/// One open as the share-mode check sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenEntry {
    pub id: u64,
    pub access: u32,
    pub share_access: u32,
    /// Open.DeleteOnClose (FILE_DELETE_ON_CLOSE at create).
    pub delete_on_close: bool,
}

#[derive(Debug, Default)]
pub(crate) struct NodeState {
    pub opens: Vec<OpenEntry>,
    /// File.DeletePending.
    pub delete_pending: bool,
    pub locks: LockTable,
    /// Removed from the table; a new opener must retry.
    pub dead: bool,
    /// A ChangeTime a client set (MS-FSA 2.1.5.14.2), which POSIX cannot
    /// store: shown instead of the file's ctime for as long as that ctime
    /// is still the one recorded right after the set, i.e. until the file
    /// changes again, and while the file has opens.
    pub change_time: Option<ChangeTimeSet>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct ChangeTimeSet {
    pub value: std::time::SystemTime,
    pub ctime_after: std::time::SystemTime,
}

impl NodeState {
    /// The change time to report for a file whose ctime is `ctime`.
    pub fn change_time(&self, ctime: std::time::SystemTime) -> std::time::SystemTime {
        match self.change_time {
            Some(c) if c.ctime_after == ctime => c.value,
            _ => ctime,
        }
    }
}

pub(crate) struct Node {
    pub key: FileKey,
    state: Mutex<NodeState>,
    pub notify: Arc<Notify>,
    /// Serialises writes to this file. Concurrent pwrite()s of one file
    /// contend on the inode's rwsem in the kernel, whose optimistic spinning
    /// burned 3-4x the CPU of the copy itself under a deep write queue.
    pub write_lock: Mutex<()>,
}

impl Node {
    pub fn lock(&self) -> MutexGuard<'_, NodeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

const SHARDS: usize = 64;

pub(crate) struct NodeTable {
    shards: Vec<Mutex<HashMap<FileKey, Arc<Node>>>>,
}

impl Default for NodeTable {
    fn default() -> Self {
        NodeTable {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }
}

impl NodeTable {
    fn shard(&self, key: &FileKey) -> MutexGuard<'_, HashMap<FileKey, Arc<Node>>> {
        let h = (key.ino ^ key.dev.rotate_left(17)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.shards[(h >> 58) as usize % SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Get or create the node of a file.
    pub fn get_or_insert(&self, key: FileKey) -> Arc<Node> {
        let mut m = self.shard(&key);
        m.entry(key)
            .or_insert_with(|| {
                Arc::new(Node {
                    key,
                    state: Mutex::new(NodeState::default()),
                    notify: Arc::new(Notify::new()),
                    write_lock: Mutex::new(()),
                })
            })
            .clone()
    }

    /// The node of a file if it has opens.
    pub fn get(&self, key: &FileKey) -> Option<Arc<Node>> {
        self.shard(key).get(key).cloned()
    }

    /// Remove a node whose last open went; call with its state locked and
    /// `dead` set.
    pub fn remove(&self, node: &Arc<Node>) {
        let mut m = self.shard(&node.key);
        if m.get(&node.key).is_some_and(|n| Arc::ptr_eq(n, node)) {
            m.remove(&node.key);
        }
    }
}

/// MS-FSA 2.1.5.1.2 (Open of an Existing File), sharing check: the new open
/// conflicts if it wants an access an existing open does not share, or does
/// not share an access an existing open holds. Only the data-access bits
/// (READ_DATA, WRITE_DATA, APPEND_DATA, EXECUTE, DELETE) take part; opens
/// without them neither conflict nor are conflicted with.
pub(crate) fn check_share_access(
    existing: &[OpenEntry],
    access: u32,
    share_access: u32,
) -> FsResult<()> {
    if access & access::DATA_ACCESS == 0 {
        return Ok(());
    }
    let reads = |a: u32| a & (access::FILE_READ_DATA | access::FILE_EXECUTE) != 0;
    let writes = |a: u32| a & (access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) != 0;
    let deletes = |a: u32| a & access::DELETE != 0;
    for o in existing {
        if o.access & access::DATA_ACCESS == 0 {
            continue;
        }
        let conflict = (reads(o.access) && share_access & share::READ == 0)
            || (writes(o.access) && share_access & share::WRITE == 0)
            || (deletes(o.access) && share_access & share::DELETE == 0)
            || (reads(access) && o.share_access & share::READ == 0)
            || (writes(access) && o.share_access & share::WRITE == 0)
            || (deletes(access) && o.share_access & share::DELETE == 0);
        if conflict {
            return Err(FsError::SharingViolation);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::access::*;

    fn e(access: u32, share_access: u32) -> OpenEntry {
        OpenEntry {
            id: 1,
            access,
            share_access,
            delete_on_close: false,
        }
    }

    #[test]
    fn share_matrix_samples() {
        use crate::types::share::{DELETE as SD, READ as SR, WRITE as SW};
        // Reader sharing read only: a second reader is fine, a writer is not.
        let ex = [e(FILE_READ_DATA, SR)];
        assert!(check_share_access(&ex, FILE_READ_DATA, SR | SW).is_ok());
        assert!(check_share_access(&ex, FILE_WRITE_DATA, SR | SW).is_err());
        assert!(check_share_access(&ex, FILE_APPEND_DATA, SR | SW).is_err());
        // New reader not sharing write while a writer exists.
        let ex = [e(FILE_WRITE_DATA, SR | SW)];
        assert!(check_share_access(&ex, FILE_READ_DATA, SR).is_err());
        assert!(check_share_access(&ex, FILE_READ_DATA, SR | SW).is_ok());
        // Attribute-only opens never conflict, either way round.
        let ex = [e(FILE_READ_ATTRIBUTES, 0)];
        assert!(check_share_access(&ex, FILE_READ_DATA | DELETE, 0).is_ok());
        let ex = [e(FILE_READ_DATA, 0)];
        assert!(check_share_access(&ex, FILE_READ_ATTRIBUTES | SYNCHRONIZE, 0).is_ok());
        // DELETE needs FILE_SHARE_DELETE from everyone else.
        let ex = [e(FILE_READ_DATA, SR | SW)];
        assert!(check_share_access(&ex, DELETE, SR | SW | SD).is_err());
        let ex = [e(FILE_READ_DATA, SR | SW | SD)];
        assert!(check_share_access(&ex, DELETE, SR | SW | SD).is_ok());
        // Execute counts as read.
        let ex = [e(FILE_EXECUTE, SW)];
        assert!(check_share_access(&ex, FILE_READ_DATA, SR | SW).is_err());
        // Share-none exclusive opener blocks everyone with data access.
        let ex = [e(FILE_READ_DATA | FILE_WRITE_DATA, 0)];
        for a in [
            FILE_READ_DATA,
            FILE_WRITE_DATA,
            FILE_APPEND_DATA,
            FILE_EXECUTE,
            DELETE,
        ] {
            assert!(check_share_access(&ex, a, SR | SW | SD).is_err());
        }
    }
}
