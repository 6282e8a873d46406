//! Per-file shared state: the opens of a file (for share modes), its delete
//! disposition and its byte-range locks. Files are keyed by (dev, inode) in a
//! sharded map, so there is no global lock; each file has its own mutex.
//!
//! Lock order: a file's `state` mutex may be held while taking a shard
//! mutex, never the other way round.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use tokio::sync::Notify;

use crate::error::{FsError, FsResult};
use crate::locks::LockTable;
use crate::types::{access, share};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FileKey {
    pub dev: u64,
    pub ino: u64,
    /// 0 for the file itself; a named stream's key ([`crate::stream`])
    /// otherwise: each stream has its own opens, share modes and locks.
    pub stream: u64,
}

impl FileKey {
    pub fn of(st: &libc::stat) -> FileKey {
        FileKey {
            dev: st.st_dev,
            ino: st.st_ino,
            stream: 0,
        }
    }

    /// The key of stream `stream_key` of this file.
    pub fn with_stream(self, stream_key: u64) -> FileKey {
        FileKey {
            stream: stream_key,
            ..self
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
    /// How writes through this open move the file's LastWriteTime.
    pub write_time: OpenWriteTime,
    /// Open.UserSetChangeTime (MS-FSA 2.1.5.14.2): the client set the
    /// ChangeTime through this open, and later FileBasicInformation sets
    /// through it leave it as set.
    pub user_set_change_time: bool,
}

/// The delayed LastWriteTime update of one open.
///
/// MS-FSA 2.1.4.17 (noting that a file has been modified) lets the object
/// store choose when a write moves File.LastModificationTime. Braid does
/// what Windows before Server 2019 does, and Samba's smbd (which smbtorture's
/// smb2.timestamps.delayed-* tests check): the first write through an open
/// moves the LastWriteTime 2 seconds later, later writes only at the close
/// of the open, and a SetInfo of FileEndOfFileInformation,
/// FileAllocationInformation or FileBasicInformation, or a FLUSH, through
/// an open that has written moves it at once (the product team's account
/// on cifs-protocol, "delayed write-time handling", Dec 2019). Until then
/// the file shows the LastWriteTime it had before the write
/// ([`NodeState::write_time`]), whatever the host mtime says.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OpenWriteTime {
    /// This open has written.
    pub modified: bool,
    /// The first write's delayed update was scheduled (it may since have
    /// happened); later writes only set `on_close`.
    pub triggered: bool,
    /// A write since the last update: closing the open moves the
    /// LastWriteTime to the time of the close.
    pub on_close: bool,
    /// The client set the LastWriteTime through this open: its writes no
    /// longer move it, nor does its close (MS-FSA Open.UserSetModificationTime).
    pub sticky: bool,
    /// When the scheduled update falls due.
    pub due: Option<SystemTime>,
}

#[derive(Debug, Default)]
pub(crate) struct NodeState {
    pub opens: Vec<OpenEntry>,
    /// File.DeletePending.
    pub delete_pending: bool,
    pub locks: LockTable,
    /// Removed from the table; a new opener must retry.
    pub dead: bool,
    /// The LastWriteTime shown while the file has opens, in place of the
    /// host mtime, from the first write through any of them (the mtime
    /// before that write) or the first explicit update. Written to the
    /// host when the last open closes. See [`OpenWriteTime`].
    pub write_time: Option<SystemTime>,
    /// Opens of the file's named streams (the node of the file itself
    /// only). They keep the file from being renamed, its deletion waits
    /// for them, and an open of the file for DELETE needs them all to share
    /// delete (MS-FSA 2.1.5.1.2).
    pub stream_opens: Vec<OpenEntry>,
    /// Share reservations of the POSIX face's users (an NFS server's
    /// opens, `share_reservation.rs`): SMB opens are checked against them;
    /// they do not keep a delete-pending file from going, but keep the
    /// entry (and so their reservation) while they last.
    pub reservations: Vec<OpenEntry>,
}

impl NodeState {
    /// Carry out the delayed LastWriteTime updates that fell due by `now`,
    /// each at the time it fell due, in that order.
    pub fn settle_write_times(&mut self, now: SystemTime) {
        loop {
            let next = self
                .opens
                .iter()
                .enumerate()
                .filter_map(|(i, o)| o.write_time.due.map(|d| (d, i)))
                .filter(|&(d, _)| d <= now)
                .min();
            match next {
                Some((due, i)) => self.update_write_time(i, due),
                None => return,
            }
        }
    }

    /// Move the LastWriteTime to `t` for the open at `i` now, consuming
    /// its pending update (Samba's trigger_write_time_update_immediate).
    /// Nothing happens once the client set the time through this open.
    pub fn update_write_time(&mut self, i: usize, t: SystemTime) {
        let w = &mut self.opens[i].write_time;
        if w.sticky {
            return;
        }
        w.due = None;
        w.triggered = true;
        w.on_close = false;
        self.write_time = Some(t);
    }

    /// The LastWriteTime to report for a file whose host mtime is `mtime`.
    pub fn last_write_time(&self, mtime: SystemTime) -> SystemTime {
        self.write_time.unwrap_or(mtime)
    }

    /// No open of the file nor of any of its streams.
    pub fn idle(&self) -> bool {
        self.opens.is_empty() && self.stream_opens.is_empty()
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
    /// Whether someone holds the file's lock now (tests).
    #[cfg(test)]
    pub fn is_locked(&self) -> bool {
        self.state.try_lock().is_err()
    }

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
        let h = (key.ino ^ key.dev.rotate_left(17) ^ key.stream.rotate_left(31))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
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

/// The sharing check a rename meets at the directory it renames into.
/// The rename opens that directory for FILE_ADD_FILE (FILE_ADD_SUBDIRECTORY
/// for a directory) sharing read and write (MS-FSA 2.1.5.14.11; the I/O
/// manager's open of the target directory), and that open conflicts with
/// an existing open of the directory that
/// * holds DELETE: the rename's open does not share delete (smbtorture
///   smb2.rename.share_delete_and_delete_access and
///   no_share_delete_but_delete_access; Samba refuses a rename on exactly
///   this, an open of the destination directory with DELETE access);
/// * adds entries itself (FILE_ADD_FILE or FILE_ADD_SUBDIRECTORY, the
///   write bits) and does not share write: two adders, one excluding the
///   other (smb2.rename.no_share_delete_no_delete_access).
///
/// An open that only lists or reads the directory holds no rename back,
/// whatever it shares: [`check_share_access`]'s other direction (the
/// rename's ADD access against every open's FILE_SHARE_WRITE) would make
/// one client's handle to a share's root, opened to list it without
/// sharing write (as smbtorture's smb2.getinfo.fsinfo leaves one), refuse
/// every other client's renames into the root, which Samba's smbd allows
/// (issue 47).
pub(crate) fn check_rename_target_dir(existing: &[OpenEntry]) -> FsResult<()> {
    let writes = access::FILE_WRITE_DATA | access::FILE_APPEND_DATA;
    let conflict = existing.iter().any(|o| {
        o.access & access::DELETE != 0
            || (o.access & writes != 0 && o.share_access & share::WRITE == 0)
    });
    if conflict {
        return Err(FsError::SharingViolation);
    }
    Ok(())
}

/// MS-FSA 2.1.5.1.2: an open of a file that asks for DELETE fails with a
/// sharing violation while one of the file's named streams is open
/// without FILE_SHARE_DELETE (an open of a stream is not held back by the
/// opens of the file, though).
pub(crate) fn check_stream_opens(stream_opens: &[OpenEntry], access: u32) -> FsResult<()> {
    if access & access::DELETE != 0
        && stream_opens
            .iter()
            .any(|o| o.share_access & share::DELETE == 0)
    {
        return Err(FsError::SharingViolation);
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
            write_time: OpenWriteTime::default(),
            user_set_change_time: false,
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

    #[test]
    fn rename_target_dir() {
        use crate::types::share::{DELETE as SD, READ as SR, WRITE as SW};
        let dir_rw = FILE_READ_DATA | FILE_WRITE_DATA | FILE_APPEND_DATA | FILE_EXECUTE;
        // smb2.rename.share_delete_and_delete_access and
        // no_share_delete_but_delete_access: an open with DELETE refuses,
        // whatever it shares.
        assert!(check_rename_target_dir(&[e(dir_rw | DELETE, SR | SW | SD)]).is_err());
        assert!(check_rename_target_dir(&[e(dir_rw | DELETE, 0)]).is_err());
        assert!(check_rename_target_dir(&[e(DELETE, SR | SW | SD)]).is_err());
        // share_delete_no_delete_access: a writer sharing write does not.
        assert!(check_rename_target_dir(&[e(dir_rw, SR | SW | SD)]).is_ok());
        // no_share_delete_no_delete_access: a writer not sharing write does.
        assert!(check_rename_target_dir(&[e(dir_rw, 0)]).is_err());
        assert!(check_rename_target_dir(&[e(FILE_APPEND_DATA, SR | SD)]).is_err());
        // Issue 47: a listing open of the share root (smb2.getinfo.fsinfo's
        // SYNCHRONIZE | READ_ATTRIBUTES | LIST_DIRECTORY, sharing read and
        // delete) holds no rename back, nor does a reader sharing nothing.
        let list = SYNCHRONIZE | FILE_READ_ATTRIBUTES | FILE_READ_DATA;
        assert!(check_rename_target_dir(&[e(list, SR | SD)]).is_ok());
        assert!(check_rename_target_dir(&[e(list, 0)]).is_ok());
        // smb2.rename.msword: an attribute-only open sharing nothing.
        assert!(check_rename_target_dir(&[e(SYNCHRONIZE | FILE_READ_ATTRIBUTES, 0)]).is_ok());
        assert!(check_rename_target_dir(&[]).is_ok());
        // The full two-way check refuses the listing open (what issue 47 was).
        assert!(check_share_access(&[e(list, SR | SD)], FILE_ADD_SUBDIRECTORY, SR | SW).is_err());
    }
}
