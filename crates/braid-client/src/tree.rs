//! TREE_CONNECT and path-level operations on a share (MS-SMB2 3.2.4.2.4).

use crate::error::Result;
use crate::file::{File, OpenOptions};
use crate::info::{BasicInfo, DirEntry, StandardInfo};
use crate::session::Session;
use crate::transport::{Request, Response};
use braid_smb_proto::messages::create::{access_mask, create_disposition, create_options};
use braid_smb_proto::messages::ioctl::{
    decode_network_interface_info, flags as ioctl_flags, fsctl,
};
use braid_smb_proto::messages::tree_connect::share_flags;
use braid_smb_proto::messages::{
    IoctlRequest, IoctlResponse, NetworkInterfaceInfo, TreeConnectRequest, TreeConnectResponse,
    TreeDisconnectRequest,
};
use braid_smb_proto::{Command, FileId};
use std::sync::Arc;

/// A connected share.
pub struct Tree {
    pub(crate) session: Arc<Session>,
    id: u32,
    path: String,
    share_flags: u32,
    share_type: u8,
    encrypt: bool,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("path", &self.path)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// SMB paths: backslashes, relative to the share root.
pub(crate) fn smb_path(p: &str) -> String {
    p.trim_start_matches(['/', '\\']).replace('/', "\\")
}

impl Tree {
    /// TREE_CONNECT to `\\host\share` (MS-SMB2 2.2.9).
    pub async fn connect(session: &Arc<Session>, unc: &str) -> Result<Arc<Tree>> {
        let req = TreeConnectRequest {
            flags: 0,
            path: unc.to_string(),
        };
        let resp = session
            .call(|_| Request::new(Command::TreeConnect, &req), true, false)
            .await?
            .check(&[])?;
        let tc: TreeConnectResponse = resp.decode()?;
        Ok(Arc::new(Tree {
            session: session.clone(),
            id: resp.header.tree_id,
            path: unc.to_string(),
            share_flags: tc.share_flags,
            share_type: tc.share_type,
            // MS-SMB2 3.2.5.5: TreeConnect.EncryptData.
            encrypt: tc.share_flags & share_flags::ENCRYPT_DATA != 0,
        }))
    }

    pub fn id(&self) -> u32 {
        self.id
    }
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }
    pub fn share_flags(&self) -> u32 {
        self.share_flags
    }
    pub fn share_type(&self) -> u8 {
        self.share_type
    }
    /// Largest READ / WRITE this tree's connections accept.
    pub fn max_read(&self) -> u32 {
        self.session
            .primary()
            .map(|c| c.negotiated().max_read)
            .unwrap_or(65536)
    }
    pub fn max_write(&self) -> u32 {
        self.session
            .primary()
            .map(|c| c.negotiated().max_write)
            .unwrap_or(65536)
    }

    /// Send a tree request on a channel of the session.
    pub(crate) async fn call<'a, F>(&self, mk: F, retry: bool) -> Result<Response>
    where
        F: Fn(bool) -> Request<'a>,
    {
        let id = self.id;
        self.session
            .call(
                |replay| {
                    let mut r = mk(replay);
                    r.tree_id = id;
                    r
                },
                retry,
                self.encrypt,
            )
            .await
    }

    /// Send a `command` request whose structure (all that follows the
    /// 64-byte header) the caller built byte by byte, signed or sealed as
    /// the session is, and return the response whatever its status.
    /// `response_size` sets the CreditCharge. For conformance and
    /// robustness tools, which must send what the typed calls never do.
    pub async fn raw(
        &self,
        command: Command,
        structure: &[u8],
        response_size: usize,
    ) -> Result<Response> {
        self.call(
            |_| {
                let mut r = Request::new(command, &braid_smb_proto::messages::EchoRequest);
                r.body.truncate(braid_smb_proto::header::HEADER_LEN);
                r.body.extend_from_slice(structure);
                r.response_size = response_size;
                r
            },
            false,
        )
        .await
    }

    /// Send hand-built requests (command, structure) as one compounded
    /// chain on the session's first channel, the second and later marked
    /// related when `related` (MS-SMB2 3.2.4.1.4), and return each
    /// response or error in order. Like [`Tree::raw`], for tools.
    pub async fn raw_compound(
        &self,
        msgs: &[(Command, Vec<u8>)],
        related: bool,
    ) -> Result<Vec<Result<Response>>> {
        let ch = self.session.channels.pick()?;
        let reqs = msgs
            .iter()
            .map(|(command, structure)| {
                let mut r = Request::new(*command, &braid_smb_proto::messages::EchoRequest);
                r.body.truncate(braid_smb_proto::header::HEADER_LEN);
                r.body.extend_from_slice(structure);
                r.tree_id = self.id;
                r
            })
            .collect();
        ch.conn.send_compound_secured(reqs, &ch.sec, related).await
    }

    /// CREATE (MS-SMB2 2.2.13) with explicit options.
    pub async fn create(self: &Arc<Self>, path: &str, o: &OpenOptions) -> Result<File> {
        File::create(self.clone(), &smb_path(path), o).await
    }

    /// Open an existing file for reading.
    pub async fn open(self: &Arc<Self>, path: &str) -> Result<File> {
        self.create(path, &OpenOptions::read()).await
    }

    /// Create or truncate a file for reading and writing.
    pub async fn create_file(self: &Arc<Self>, path: &str) -> Result<File> {
        self.create(path, &OpenOptions::overwrite()).await
    }

    /// Create a directory.
    pub async fn mkdir(self: &Arc<Self>, path: &str) -> Result<()> {
        let o = OpenOptions {
            desired_access: access_mask::FILE_READ_ATTRIBUTES | access_mask::SYNCHRONIZE,
            disposition: create_disposition::CREATE,
            options: create_options::DIRECTORY_FILE,
            ..OpenOptions::read()
        };
        self.create(path, &o).await?.close().await
    }

    /// Delete a file (open with DELETE_ON_CLOSE, then close).
    pub async fn unlink(self: &Arc<Self>, path: &str) -> Result<()> {
        let o = OpenOptions {
            desired_access: access_mask::DELETE | access_mask::FILE_READ_ATTRIBUTES,
            disposition: create_disposition::OPEN,
            options: create_options::NON_DIRECTORY_FILE | create_options::DELETE_ON_CLOSE,
            ..OpenOptions::read()
        };
        self.create(path, &o).await?.close().await
    }

    /// Remove an empty directory.
    pub async fn rmdir(self: &Arc<Self>, path: &str) -> Result<()> {
        let o = OpenOptions {
            desired_access: access_mask::DELETE | access_mask::FILE_READ_ATTRIBUTES,
            disposition: create_disposition::OPEN,
            options: create_options::DIRECTORY_FILE | create_options::DELETE_ON_CLOSE,
            ..OpenOptions::read()
        };
        self.create(path, &o).await?.close().await
    }

    /// Rename `from` to `to` (both share-relative).
    pub async fn rename(self: &Arc<Self>, from: &str, to: &str, replace: bool) -> Result<()> {
        let o = OpenOptions {
            desired_access: access_mask::DELETE | access_mask::FILE_READ_ATTRIBUTES,
            disposition: create_disposition::OPEN,
            options: 0,
            ..OpenOptions::read()
        };
        let f = self.create(from, &o).await?;
        let r = f.rename(to, replace).await;
        let c = f.close().await;
        r.and(c)
    }

    /// FileStandardInformation and FileBasicInformation of a path.
    pub async fn stat(self: &Arc<Self>, path: &str) -> Result<(StandardInfo, BasicInfo)> {
        let o = OpenOptions {
            desired_access: access_mask::FILE_READ_ATTRIBUTES,
            disposition: create_disposition::OPEN,
            options: 0,
            ..OpenOptions::read()
        };
        let f = self.create(path, &o).await?;
        let r = async { Ok((f.query_standard().await?, f.query_basic().await?)) }.await;
        let c = f.close().await;
        r.and_then(|v| c.map(|_| v))
    }

    /// Every entry of a directory (without "." and "..").
    pub async fn list(self: &Arc<Self>, path: &str) -> Result<Vec<DirEntry>> {
        let o = OpenOptions {
            desired_access: access_mask::FILE_LIST_DIRECTORY | access_mask::FILE_READ_ATTRIBUTES,
            disposition: create_disposition::OPEN,
            options: create_options::DIRECTORY_FILE,
            ..OpenOptions::read()
        };
        let f = self.create(path, &o).await?;
        let r = f.query_directory("*").await;
        let c = f.close().await;
        let v = r?;
        c?;
        Ok(v.into_iter()
            .filter(|e| e.name != "." && e.name != "..")
            .collect())
    }

    /// FSCTL_QUERY_NETWORK_INTERFACE_INFO (MS-SMB2 2.2.31.4, 3.2.4.20.x):
    /// the server's interfaces, for multichannel.
    pub async fn query_network_interfaces(&self) -> Result<Vec<NetworkInterfaceInfo>> {
        let req = IoctlRequest {
            ctl_code: fsctl::QUERY_NETWORK_INTERFACE_INFO,
            file_id: FileId {
                persistent: u64::MAX,
                volatile: u64::MAX,
            },
            input: Vec::new(),
            output: Vec::new(),
            max_input_response: 0,
            max_output_response: 64 * 1024,
            flags: ioctl_flags::IS_FSCTL,
        };
        let resp = self
            .call(
                |_| {
                    let mut r = Request::new(Command::Ioctl, &req);
                    r.response_size = 64 * 1024;
                    r
                },
                true,
            )
            .await?
            .check(&[])?;
        let ir: IoctlResponse = resp.decode()?;
        Ok(decode_network_interface_info(&ir.output)?)
    }

    /// TREE_DISCONNECT.
    pub async fn disconnect(&self) -> Result<()> {
        self.call(
            |_| Request::new(Command::TreeDisconnect, &TreeDisconnectRequest),
            false,
        )
        .await?
        .check(&[])
        .map(|_| ())
    }
}

impl Session {
    /// TREE_CONNECT to `\\host\share`.
    pub async fn tree_connect(self: &Arc<Self>, unc: &str) -> Result<Arc<Tree>> {
        Tree::connect(self, unc).await
    }
}
