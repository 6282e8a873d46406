//! The seam between the load engine and a protocol: a share (or export)
//! that can create, open, read, write, close and remove files. The
//! engine's profiles, loops, verification and reports are written once
//! against [`BenchFs`]; SMB ([`SmbFs`], on `braid-client`) and NFSv4.1
//! ([`crate::nfs::NfsFs`], on `braid-nfs-client`) implement it.
//!
//! Paths are relative to the share or export root, '/'-separated.

use bytes::Bytes;
use std::future::Future;
use std::sync::Arc;

/// A failed file operation.
#[derive(Debug, Clone)]
pub struct FsError {
    pub msg: String,
    /// The session is gone: stop the run.
    pub fatal: bool,
    /// The name exists (mkdir of an existing directory).
    pub exists: bool,
}

impl FsError {
    pub fn new(msg: impl Into<String>) -> Self {
        FsError {
            msg: msg.into(),
            fatal: false,
            exists: false,
        }
    }
}

impl std::fmt::Display for FsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

pub type FsResult<T> = Result<T, FsError>;

/// Traffic of one connection (channel) of the session.
#[derive(Debug, Clone, Default)]
pub struct ConnSnapshot {
    pub local: String,
    pub remote: String,
    pub alive: bool,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub requests: u64,
}

/// An open file.
pub trait BenchFile: Clone + Send + Sync + 'static {
    fn size_at_open(&self) -> u64;
    fn read(&self, offset: u64, len: u32) -> impl Future<Output = FsResult<Bytes>> + Send;
    fn write(&self, offset: u64, data: Bytes) -> impl Future<Output = FsResult<u32>> + Send;
    /// Truncate or extend.
    fn set_size(&self, size: u64) -> impl Future<Output = FsResult<()>> + Send;
    /// The file's size from the server (the metadata loop's stat).
    fn stat(&self) -> impl Future<Output = FsResult<u64>> + Send;
    /// Make written data stable (NFS COMMIT) and close.
    fn close(&self) -> impl Future<Output = FsResult<()>> + Send;
}

/// A connected share or export.
pub trait BenchFs: Send + Sync + 'static {
    type File: BenchFile;
    /// Create a directory; an existing one is an error with `exists`.
    fn mkdir(&self, path: &str) -> impl Future<Output = FsResult<()>> + Send;
    fn rmdir(&self, path: &str) -> impl Future<Output = FsResult<()>> + Send;
    fn unlink(&self, path: &str) -> impl Future<Output = FsResult<()>> + Send;
    /// Open for reading and writing, creating it if missing (data files).
    fn open_rw(&self, path: &str) -> impl Future<Output = FsResult<Self::File>> + Send;
    /// Create (or open) a file for writing (metadata loop).
    fn create(&self, path: &str) -> impl Future<Output = FsResult<Self::File>> + Send;
    /// Open an existing file for reading (metadata loop).
    fn open(&self, path: &str) -> impl Future<Output = FsResult<Self::File>> + Send;
    /// Largest write the session takes.
    fn max_write(&self) -> u32;
    /// The session's connections and their traffic so far.
    fn connections(&self) -> Vec<ConnSnapshot>;
}

/// `mkdir -p` relative to the root.
pub async fn mkdir_p<B: BenchFs>(fs: &B, path: &str) -> FsResult<()> {
    let mut cur = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if !cur.is_empty() {
            cur.push('/');
        }
        cur.push_str(part);
        match fs.mkdir(&cur).await {
            Ok(()) => {}
            Err(e) if e.exists => {}
            Err(e) => {
                return Err(FsError {
                    msg: format!("mkdir {cur}: {e}"),
                    ..e
                })
            }
        }
    }
    Ok(())
}

// ---- SMB ----

use braid_client::{Connection, File, OpenOptions, Session, Tree};

/// An SMB tree connect and its session.
pub struct SmbFs {
    pub session: Arc<Session>,
    pub tree: Arc<Tree>,
}

fn smb_err(e: braid_client::Error) -> FsError {
    FsError {
        fatal: matches!(e, braid_client::Error::NoChannel),
        exists: matches!(&e, braid_client::Error::Status { status, .. } if *status == braid_client::NtStatus::OBJECT_NAME_COLLISION),
        msg: e.to_string(),
    }
}

impl BenchFile for File {
    fn size_at_open(&self) -> u64 {
        File::size_at_open(self)
    }
    async fn read(&self, offset: u64, len: u32) -> FsResult<Bytes> {
        File::read(self, offset, len).await.map_err(smb_err)
    }
    async fn write(&self, offset: u64, data: Bytes) -> FsResult<u32> {
        File::write(self, offset, data).await.map_err(smb_err)
    }
    async fn set_size(&self, size: u64) -> FsResult<()> {
        self.set_end_of_file(size).await.map_err(smb_err)
    }
    async fn stat(&self) -> FsResult<u64> {
        self.query_standard()
            .await
            .map(|s| s.end_of_file)
            .map_err(smb_err)
    }
    async fn close(&self) -> FsResult<()> {
        File::close(self).await.map_err(smb_err)
    }
}

impl BenchFs for SmbFs {
    type File = File;
    async fn mkdir(&self, path: &str) -> FsResult<()> {
        self.tree.mkdir(path).await.map_err(smb_err)
    }
    async fn rmdir(&self, path: &str) -> FsResult<()> {
        self.tree.rmdir(path).await.map_err(smb_err)
    }
    async fn unlink(&self, path: &str) -> FsResult<()> {
        self.tree.unlink(path).await.map_err(smb_err)
    }
    async fn open_rw(&self, path: &str) -> FsResult<File> {
        self.tree
            .create(path, &OpenOptions::read_write())
            .await
            .map_err(smb_err)
    }
    async fn create(&self, path: &str) -> FsResult<File> {
        self.tree.create_file(path).await.map_err(smb_err)
    }
    async fn open(&self, path: &str) -> FsResult<File> {
        self.tree.open(path).await.map_err(smb_err)
    }
    fn max_write(&self) -> u32 {
        self.tree.max_write()
    }
    fn connections(&self) -> Vec<ConnSnapshot> {
        let conns: Vec<Arc<Connection>> = self
            .session
            .channels()
            .list()
            .iter()
            .map(|c| c.conn.clone())
            .collect();
        conns
            .iter()
            .map(|c| {
                let (sent, recv, reqs) = c.traffic();
                ConnSnapshot {
                    local: c.local_addr().map(|a| a.to_string()).unwrap_or_default(),
                    remote: c.addr().to_string(),
                    alive: c.is_alive(),
                    bytes_sent: sent,
                    bytes_received: recv,
                    requests: reqs,
                }
            })
            .collect()
    }
}
