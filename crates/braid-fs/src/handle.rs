//! Open handles: positioned I/O, metadata, rename, delete-on-close, locks.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::error::FsResult;
use crate::types::{BasicTimes, DirEntry, FileInfo, LockOwner};

pub(crate) struct HandleInner {}

/// One open of a file or directory. Cheap to clone (an `Arc` inside); all
/// clones are the same open. `close()` ends the open; dropping the last
/// clone without `close()` closes it too.
#[derive(Clone)]
pub struct OpenHandle(pub(crate) Arc<HandleInner>);

impl std::fmt::Debug for OpenHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenHandle").finish_non_exhaustive()
    }
}

impl OpenHandle {
    /// Unique id of this open within the service.
    pub fn open_id(&self) -> u64 {
        todo!()
    }
    /// Share-relative path with `\` separators, in on-disk case ("" = root).
    pub fn path(&self) -> String {
        todo!()
    }
    pub fn is_directory(&self) -> bool {
        todo!()
    }
    /// The concrete access rights granted (GENERIC_*/MAXIMUM_ALLOWED resolved).
    pub fn granted_access(&self) -> u32 {
        todo!()
    }
    pub fn share_access(&self) -> u32 {
        todo!()
    }
    /// Positioned read; short at EOF.
    pub fn read(&self, _offset: u64, _len: usize) -> FsResult<Vec<u8>> {
        todo!()
    }
    pub fn read_into(&self, _offset: u64, _buf: &mut [u8]) -> FsResult<usize> {
        todo!()
    }
    pub fn write(&self, _offset: u64, _data: &[u8]) -> FsResult<usize> {
        todo!()
    }
    pub fn flush(&self) -> FsResult<()> {
        todo!()
    }
    pub fn info(&self) -> FsResult<FileInfo> {
        todo!()
    }
    pub fn set_basic(&self, _times: BasicTimes, _attributes: Option<u32>) -> FsResult<()> {
        todo!()
    }
    pub fn set_end_of_file(&self, _size: u64) -> FsResult<()> {
        todo!()
    }
    pub fn set_allocation(&self, _size: u64) -> FsResult<()> {
        todo!()
    }
    pub fn rename(&self, _new_path: &str, _replace_if_exists: bool) -> FsResult<()> {
        todo!()
    }
    pub fn set_delete_on_close(&self, _delete: bool) -> FsResult<()> {
        todo!()
    }
    pub fn read_dir(&self) -> FsResult<Vec<DirEntry>> {
        todo!()
    }
    pub fn lock(
        &self,
        _offset: u64,
        _len: u64,
        _exclusive: bool,
        _owner: LockOwner,
    ) -> FsResult<()> {
        todo!()
    }
    pub fn unlock(&self, _offset: u64, _len: u64, _owner: LockOwner) -> FsResult<()> {
        todo!()
    }
    pub fn check_io_lock(
        &self,
        _offset: u64,
        _len: u64,
        _is_write: bool,
        _owner: LockOwner,
    ) -> FsResult<()> {
        todo!()
    }
    pub fn lock_changed(&self) -> Arc<Notify> {
        todo!()
    }
    pub fn close(&self) -> FsResult<FileInfo> {
        todo!()
    }
}
