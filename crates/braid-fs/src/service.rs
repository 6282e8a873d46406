//! The file service: shares, open (MS-FSA 2.1.5.1), statistics.

use std::path::Path;
use std::sync::Arc;

use crate::clock::Clock;
use crate::error::FsResult;
use crate::share::ShareRef;
use crate::types::{FsStats, OpenParams, Opened, RequestCtx};

/// The protocol-neutral file service. `Send + Sync`; share one `Arc` between
/// all connections.
pub struct FileService {
    pub(crate) clock: Arc<dyn Clock>,
}

impl FileService {
    pub fn new(clock: Arc<dyn Clock>) -> Arc<FileService> {
        Arc::new(FileService { clock })
    }

    /// The injected clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Export `root` as share `name`. The root is opened once; a missing or
    /// non-directory path is an error.
    pub fn add_share(&self, _name: &str, _root: impl AsRef<Path>) -> FsResult<ShareRef> {
        todo!()
    }

    /// Open or create a file (MS-FSA 2.1.5.1).
    pub fn open(
        &self,
        _ctx: &RequestCtx,
        _share: &ShareRef,
        _params: OpenParams,
    ) -> FsResult<Opened> {
        todo!()
    }

    /// statvfs of the share's file system.
    pub fn fs_stats(&self, _share: &ShareRef) -> FsResult<FsStats> {
        todo!()
    }
}
