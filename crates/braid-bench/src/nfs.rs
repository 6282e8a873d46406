//! The NFSv4.1 side of the engine: `nfs://HOST[:PORT]/EXPORT` targets on
//! `braid-nfs-client`, with `nconnect` connections per address (and more
//! addresses with `--connect-to`: session trunking).

use crate::fs::{BenchFile, BenchFs, ConnSnapshot, FsError, FsResult};
use crate::report::ServerInfo;
use crate::spec::{parse_nfs_target, Spec};
use braid_nfs_client::{Access, Client, ClientOptions, Create, OpenFile, Stable};
use braid_nfs_proto::nfs4::NFS4ERR_EXIST;
use bytes::Bytes;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A session on an NFSv4.1 server and the export it works in.
pub struct NfsFs {
    pub client: Arc<Client>,
    /// The export's path in the server's pseudo file system ("/share").
    pub export: String,
}

/// An open file: its handle and open stateid.
#[derive(Clone)]
pub struct NfsFile {
    client: Arc<Client>,
    file: Arc<OpenFile>,
    dirty: Arc<AtomicBool>,
}

fn nfs_err(e: braid_nfs_client::Error) -> FsError {
    FsError {
        fatal: e.is_fatal(),
        exists: e.status() == Some(NFS4ERR_EXIST),
        msg: e.to_string(),
    }
}

impl NfsFs {
    fn path(&self, p: &str) -> String {
        format!("{}/{}", self.export.trim_end_matches('/'), p)
    }

    async fn open_with(&self, p: &str, access: Access, create: Create) -> FsResult<NfsFile> {
        let f = self
            .client
            .open(&self.path(p), access, create)
            .await
            .map_err(nfs_err)?;
        Ok(NfsFile {
            client: self.client.clone(),
            file: Arc::new(f),
            dirty: Arc::new(AtomicBool::new(false)),
        })
    }
}

impl BenchFile for NfsFile {
    fn size_at_open(&self) -> u64 {
        self.file.attrs.size
    }
    async fn read(&self, offset: u64, len: u32) -> FsResult<Bytes> {
        self.client
            .read(&self.file, offset, len)
            .await
            .map(|(b, _)| b)
            .map_err(nfs_err)
    }
    async fn write(&self, offset: u64, data: Bytes) -> FsResult<u32> {
        if !self.dirty.load(Ordering::Relaxed) {
            self.dirty.store(true, Ordering::Relaxed);
        }
        self.client
            .write(&self.file, offset, data, Stable::Unstable)
            .await
            .map(|(n, _)| n)
            .map_err(nfs_err)
    }
    async fn set_size(&self, size: u64) -> FsResult<()> {
        self.client
            .set_size(&self.file, size)
            .await
            .map_err(nfs_err)
    }
    async fn stat(&self) -> FsResult<u64> {
        self.client
            .getattr(&self.file.fh)
            .await
            .map(|a| a.size)
            .map_err(nfs_err)
    }
    async fn close(&self) -> FsResult<()> {
        if self.dirty.swap(false, Ordering::Relaxed) {
            self.client.commit(&self.file.fh).await.map_err(nfs_err)?;
        }
        self.client.close(&self.file).await.map_err(nfs_err)
    }
}

impl BenchFs for NfsFs {
    type File = NfsFile;
    async fn mkdir(&self, p: &str) -> FsResult<()> {
        self.client.mkdir(&self.path(p)).await.map_err(nfs_err)
    }
    async fn rmdir(&self, p: &str) -> FsResult<()> {
        self.client.remove(&self.path(p)).await.map_err(nfs_err)
    }
    async fn unlink(&self, p: &str) -> FsResult<()> {
        self.client.remove(&self.path(p)).await.map_err(nfs_err)
    }
    async fn open_rw(&self, p: &str) -> FsResult<NfsFile> {
        self.open_with(p, Access::Both, Create::Unchecked).await
    }
    async fn create(&self, p: &str) -> FsResult<NfsFile> {
        self.open_with(p, Access::Both, Create::Unchecked).await
    }
    async fn open(&self, p: &str) -> FsResult<NfsFile> {
        self.open_with(p, Access::Read, Create::No).await
    }
    fn max_write(&self) -> u32 {
        self.client.max_write()
    }
    fn connections(&self) -> Vec<ConnSnapshot> {
        self.client
            .traffic()
            .into_iter()
            .map(|(l, r, alive, t)| ConnSnapshot {
                local: l.to_string(),
                remote: r.to_string(),
                alive,
                bytes_sent: t.bytes_sent,
                bytes_received: t.bytes_received,
                requests: t.requests,
            })
            .collect()
    }
}

/// Connect to the spec's NFS target: the session, what the server said,
/// and warnings.
pub async fn connect(spec: &Spec) -> Result<(NfsFs, ServerInfo, Vec<String>), String> {
    let (host, port, export) = parse_nfs_target(&spec.target)?;
    let addr = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("resolving {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}: no address"))?;
    let mut addrs = vec![addr];
    for a in &spec.connect_to {
        let sa = a
            .parse::<SocketAddr>()
            .or_else(|_| a.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, port)))
            .map_err(|_| format!("--connect-to '{a}': not an address"))?;
        if !addrs.contains(&sa) {
            addrs.push(sa);
        }
    }
    let want = (spec.threads * spec.queue_depth + 8).clamp(64, 1024);
    let opts = ClientOptions {
        addrs: addrs.clone(),
        nconnect: spec.nconnect,
        uid: spec.uid,
        gid: spec.gid,
        slots: want,
        max_io: spec.io_size.max(1 << 20),
        ..Default::default()
    };
    let client = tokio::time::timeout(Duration::from_secs(20), Client::connect(opts))
        .await
        .map_err(|_| format!("connecting to {addr}: timed out"))?
        .map_err(|e| format!("NFSv4.1 session with {addr}: {e}"))?;
    let mut warnings = Vec::new();
    let granted = client.fore_channel().ca_maxrequests;
    if granted < spec.threads * spec.queue_depth {
        warnings.push(format!(
            "server granted {granted} slots for {} requests in flight: the rest queue",
            spec.threads * spec.queue_depth
        ));
    }
    if spec.io_size > client.max_write().min(client.max_read()) {
        warnings.push(format!(
            "I/O size {} above the session's limit {}: requests are cut",
            spec.io_size,
            client.max_write().min(client.max_read())
        ));
    }
    let interfaces = client
        .servers()
        .iter()
        .map(|s| {
            format!(
                "{} server_owner={} minor={} scope={} impl={}",
                s.addr,
                String::from_utf8_lossy(&s.major_id),
                s.minor_id,
                String::from_utf8_lossy(&s.scope),
                s.implementation
            )
        })
        .collect();
    let server = ServerInfo {
        dialect: "NFSv4.1".into(),
        signing: false,
        signing_algorithm: "AUTH_SYS".into(),
        encryption: false,
        cipher: None,
        multichannel_offered: addrs.len() > 1,
        interfaces,
    };
    Ok((NfsFs { client, export }, server, warnings))
}
