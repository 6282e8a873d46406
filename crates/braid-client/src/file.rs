//! Open files: CREATE, CLOSE, READ, WRITE, FLUSH, QUERY_DIRECTORY,
//! QUERY_INFO and SET_INFO (MS-SMB2 3.2.4.3 – 3.2.4.13).

use crate::error::{Error, Result};
use crate::info::{BasicInfo, DirEntry, StandardInfo};
use crate::transport::{flags_with, Request};
use crate::tree::{smb_path, Tree};
use braid_smb_proto::codec::WriteLe;
use braid_smb_proto::fscc::file_info::{
    FILE_BASIC_INFORMATION, FILE_DIRECTORY_INFORMATION, FILE_STANDARD_INFORMATION,
};
use braid_smb_proto::fscc::{SetFileInfo, SetLinkInfo, SMB2_0_INFO_FILE};
use braid_smb_proto::messages::create::{
    access_mask, create_disposition, create_options, impersonation_level, oplock_level,
    share_access,
};
use braid_smb_proto::messages::query_directory::flags as qd_flags;
use braid_smb_proto::messages::{
    CloseRequest, CreateRequest, CreateResponse, FlushRequest, QueryDirectoryRequest,
    QueryDirectoryResponse, QueryInfoRequest, QueryInfoResponse, SetInfoRequest, WriteResponse,
};
use braid_smb_proto::{Command, FileId, NtStatus, Reader, HEADER_LEN};
use bytes::Bytes;
use std::sync::Arc;

/// CREATE parameters (MS-SMB2 2.2.13).
#[derive(Debug, Clone)]
pub struct OpenOptions {
    pub desired_access: u32,
    pub share_access: u32,
    pub disposition: u32,
    pub options: u32,
    pub file_attributes: u32,
}

impl OpenOptions {
    /// Open an existing file for reading.
    pub fn read() -> Self {
        OpenOptions {
            desired_access: access_mask::FILE_READ_DATA
                | access_mask::FILE_READ_ATTRIBUTES
                | access_mask::SYNCHRONIZE,
            share_access: share_access::READ | share_access::WRITE | share_access::DELETE,
            disposition: create_disposition::OPEN,
            options: create_options::NON_DIRECTORY_FILE,
            file_attributes: 0,
        }
    }
    /// Create or truncate, read and write.
    pub fn overwrite() -> Self {
        OpenOptions {
            desired_access: access_mask::GENERIC_READ
                | access_mask::GENERIC_WRITE
                | access_mask::DELETE,
            disposition: create_disposition::OVERWRITE_IF,
            ..Self::read()
        }
    }
    /// Open existing or create, read and write, no truncation.
    pub fn read_write() -> Self {
        OpenOptions {
            disposition: create_disposition::OPEN_IF,
            ..Self::overwrite()
        }
    }
}

struct Inner {
    tree: Arc<Tree>,
    id: FileId,
    created: CreateResponse,
}

/// An open file or directory. Cheap to clone; every clone refers to the
/// same open, usable from many tasks at once. Close it explicitly.
#[derive(Clone)]
pub struct File {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File").field("id", &self.inner.id).finish()
    }
}

/// Offset of Buffer in a READ response: header + 16 fixed bytes.
const READ_DATA_MIN_OFFSET: usize = HEADER_LEN + 16;
/// WRITE request data follows the 48 fixed bytes (MS-SMB2 2.2.21).
const WRITE_DATA_OFFSET: u16 = (HEADER_LEN + 48) as u16;

impl File {
    pub(crate) async fn create(tree: Arc<Tree>, name: &str, o: &OpenOptions) -> Result<File> {
        let req = CreateRequest {
            security_flags: 0,
            requested_oplock_level: oplock_level::NONE,
            impersonation_level: impersonation_level::IMPERSONATION,
            smb_create_flags: 0,
            desired_access: o.desired_access,
            file_attributes: o.file_attributes,
            share_access: o.share_access,
            create_disposition: o.disposition,
            create_options: o.options,
            name: smb_path(name),
            contexts: Vec::new(),
        };
        let resp = tree
            .call(|_| Request::new(Command::Create, &req), false)
            .await?
            .check(&[])?;
        let created: CreateResponse = resp.decode()?;
        Ok(File {
            inner: Arc::new(Inner {
                tree,
                id: created.file_id,
                created,
            }),
        })
    }

    pub fn id(&self) -> FileId {
        self.inner.id
    }
    pub fn tree(&self) -> &Arc<Tree> {
        &self.inner.tree
    }
    /// EndOfFile as reported by CREATE.
    pub fn size_at_open(&self) -> u64 {
        self.inner.created.end_of_file
    }
    pub fn create_action(&self) -> u32 {
        self.inner.created.create_action
    }

    /// CLOSE (MS-SMB2 2.2.15).
    pub async fn close(&self) -> Result<()> {
        let req = CloseRequest {
            flags: 0,
            file_id: self.inner.id,
        };
        self.inner
            .tree
            .call(|_| Request::new(Command::Close, &req), false)
            .await?
            .check(&[])
            .map(|_| ())
    }

    /// READ up to `len` bytes at `offset` (one request; `len` at most the
    /// negotiated MaxReadSize). Returns fewer bytes at end of file, none
    /// past it. The data is a slice of the received frame (no copy).
    pub async fn read(&self, offset: u64, len: u32) -> Result<Bytes> {
        if len > self.inner.tree.max_read() {
            return Err(Error::Invalid(format!(
                "read of {len} bytes exceeds MaxReadSize"
            )));
        }
        let id = self.inner.id;
        let resp = self
            .inner
            .tree
            .call(
                |_| {
                    // MS-SMB2 2.2.19, built by hand to keep the body exact.
                    let mut body = vec![0u8; HEADER_LEN];
                    body.put_u16(49);
                    body.put_u8(0); // Padding
                    body.put_u8(0); // Flags
                    body.put_u32(len);
                    body.put_u64(offset);
                    id.write(&mut body);
                    body.put_u32(1); // MinimumCount
                    body.put_u32(0); // Channel
                    body.put_u32(0); // RemainingBytes
                    body.put_u16(0); // ReadChannelInfoOffset
                    body.put_u16(0); // ReadChannelInfoLength
                    body.put_u8(0); // Buffer
                    let mut r = empty_request(Command::Read, body);
                    r.response_size = len as usize;
                    r
                },
                true,
            )
            .await?;
        if resp.status() == NtStatus::END_OF_FILE {
            return Ok(Bytes::new());
        }
        let resp = resp.check(&[])?;
        // MS-SMB2 2.2.20: DataOffset (1 byte), DataLength (4 bytes).
        let mut r = Reader::at(&resp.msg, HEADER_LEN);
        if r.u16()? != 17 {
            return Err(Error::Protocol("READ response StructureSize".into()));
        }
        let off = r.u8()? as usize;
        r.skip(1)?;
        let dlen = r.u32()? as usize;
        if dlen == 0 {
            return Ok(Bytes::new());
        }
        if dlen > len as usize || off < READ_DATA_MIN_OFFSET || off + dlen > resp.msg.len() {
            return Err(Error::Protocol("READ response data out of bounds".into()));
        }
        Ok(resp.msg.slice(off..off + dlen))
    }

    /// WRITE `data` at `offset` (one request, at most MaxWriteSize). The
    /// data is sent without copying unless signing or encryption needs it.
    pub async fn write(&self, offset: u64, data: Bytes) -> Result<u32> {
        let len =
            u32::try_from(data.len()).map_err(|_| Error::Invalid("write too large".into()))?;
        if len > self.inner.tree.max_write() {
            return Err(Error::Invalid(format!(
                "write of {len} bytes exceeds MaxWriteSize"
            )));
        }
        let id = self.inner.id;
        let retry = self.inner.tree.session.primary()?.config().retry_writes;
        let resp = self
            .inner
            .tree
            .call(
                |replay| {
                    let mut body = Vec::with_capacity(HEADER_LEN + 48);
                    body.resize(HEADER_LEN, 0);
                    body.put_u16(49);
                    body.put_u16(WRITE_DATA_OFFSET);
                    body.put_u32(len);
                    body.put_u64(offset);
                    id.write(&mut body);
                    body.put_u32(0); // Channel
                    body.put_u32(0); // RemainingBytes
                    body.put_u16(0); // WriteChannelInfoOffset
                    body.put_u16(0); // WriteChannelInfoLength
                    body.put_u32(0); // Flags
                    let mut r = empty_request(Command::Write, body);
                    r.payload = data.clone();
                    // MS-SMB2 3.2.4.1.2 / 3.2.5.1.? : a resend after a
                    // channel failure is marked as a replay.
                    r.flags = flags_with(0, replay);
                    r
                },
                retry,
            )
            .await?
            .check(&[])?;
        let w: WriteResponse = resp.decode()?;
        Ok(w.count)
    }

    /// FLUSH (MS-SMB2 2.2.17).
    pub async fn flush(&self) -> Result<()> {
        let req = FlushRequest {
            file_id: self.inner.id,
        };
        self.inner
            .tree
            .call(|_| Request::new(Command::Flush, &req), true)
            .await?
            .check(&[])
            .map(|_| ())
    }

    async fn query_file(&self, class: u8, out_len: u32) -> Result<Vec<u8>> {
        let req = QueryInfoRequest {
            info_type: SMB2_0_INFO_FILE,
            file_info_class: class,
            output_buffer_length: out_len,
            input: Vec::new(),
            additional_information: 0,
            flags: 0,
            file_id: self.inner.id,
        };
        let resp = self
            .inner
            .tree
            .call(|_| Request::new(Command::QueryInfo, &req), true)
            .await?
            .check(&[])?;
        let q: QueryInfoResponse = resp.decode()?;
        Ok(q.output)
    }

    /// QUERY_INFO FileStandardInformation.
    pub async fn query_standard(&self) -> Result<StandardInfo> {
        let b = self.query_file(FILE_STANDARD_INFORMATION, 24).await?;
        Ok(StandardInfo::decode(&b)?)
    }

    /// QUERY_INFO FileBasicInformation.
    pub async fn query_basic(&self) -> Result<BasicInfo> {
        let b = self.query_file(FILE_BASIC_INFORMATION, 40).await?;
        Ok(BasicInfo::decode(&b)?)
    }

    async fn set_file(&self, info: SetFileInfo) -> Result<()> {
        let req = SetInfoRequest {
            info_type: SMB2_0_INFO_FILE,
            file_info_class: info.class(),
            buffer: info.encode(),
            additional_information: 0,
            file_id: self.inner.id,
        };
        self.inner
            .tree
            .call(|_| Request::new(Command::SetInfo, &req), false)
            .await?
            .check(&[])
            .map(|_| ())
    }

    /// SET_INFO FileEndOfFileInformation (truncate or extend).
    pub async fn set_end_of_file(&self, size: u64) -> Result<()> {
        self.set_file(SetFileInfo::EndOfFile { end_of_file: size })
            .await
    }

    /// SET_INFO FileRenameInformation; `to` is share-relative.
    pub async fn rename(&self, to: &str, replace: bool) -> Result<()> {
        self.set_file(SetFileInfo::Rename(SetLinkInfo {
            replace_if_exists: replace,
            root_directory: 0,
            file_name: smb_path(to),
        }))
        .await
    }

    /// SET_INFO FileDispositionInformation: delete when the last handle
    /// closes (needs DELETE access).
    pub async fn set_delete_on_close(&self, delete: bool) -> Result<()> {
        self.set_file(SetFileInfo::Disposition {
            delete_pending: delete,
        })
        .await
    }

    /// QUERY_DIRECTORY (FileDirectoryInformation) until STATUS_NO_MORE_FILES.
    pub async fn query_directory(&self, pattern: &str) -> Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        let mut first = true;
        loop {
            let req = QueryDirectoryRequest {
                file_information_class: FILE_DIRECTORY_INFORMATION,
                flags: if first { qd_flags::RESTART_SCANS } else { 0 },
                file_index: 0,
                file_id: self.inner.id,
                file_name: pattern.to_string(),
                output_buffer_length: 64 * 1024,
            };
            first = false;
            let resp = self
                .inner
                .tree
                .call(
                    |_| {
                        let mut r = Request::new(Command::QueryDirectory, &req);
                        r.response_size = 64 * 1024;
                        r
                    },
                    false,
                )
                .await?;
            if resp.status() == NtStatus::NO_MORE_FILES {
                return Ok(out);
            }
            let resp = resp.check(&[])?;
            let q: QueryDirectoryResponse = resp.decode()?;
            let entries = DirEntry::decode_list(&q.output)?;
            if entries.is_empty() {
                return Ok(out);
            }
            out.extend(entries);
        }
    }
}

fn empty_request<'a>(command: Command, body: Vec<u8>) -> Request<'a> {
    let mut r = Request::new(command, &braid_smb_proto::messages::EchoRequest);
    r.body = body;
    r
}
