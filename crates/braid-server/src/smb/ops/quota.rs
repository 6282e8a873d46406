//! The NTFS quota index, `$Extend\$Quota:$Q:$INDEX_ALLOCATION`, at the
//! root of every disk share (braid-fs `quota.rs`): what Windows clients
//! open to read and set per-user quotas. Braid keeps no per-user quotas,
//! so, as Samba's smbd without quota support does (source3/smbd/
//! fake_file.c, smb2_getinfo.c, smb2_setinfo.c), an open of it succeeds
//! and finds an empty list.
//!
//! Like a named pipe on IPC$ (`pipe.rs`) such an open is no file service
//! open: it lives in the session's own table and this file answers the
//! commands that serve it, CREATE, CLOSE, QUERY_INFO and SET_INFO. Any
//! other command naming it gets [`refusal`] from `Request::open`.
//! Nothing is created or read on disk.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use braid_fs::quota::{QuotaIndexOpen, QUOTA_FILE, QUOTA_STREAM};
use braid_fs::OpenParams;
use braid_smb_proto::codec::{FileId, WriteLe};
use braid_smb_proto::fscc::file_info::{self, FileQueryInput};
use braid_smb_proto::fscc::quota::{decode_quota_list, QueryQuotaInfo};
use braid_smb_proto::fscc::{
    SMB2_0_INFO_FILE, SMB2_0_INFO_FILESYSTEM, SMB2_0_INFO_QUOTA, SMB2_0_INFO_SECURITY,
};
use braid_smb_proto::header::Command;
use braid_smb_proto::messages::create::{context_name, create_action};
use braid_smb_proto::messages::{
    CloseRequest, CreateContext, QueryInfoRequest, QueryInfoResponse, SetInfoRequest,
};
use braid_smb_proto::NtStatus;

use super::convert::view_of;
use crate::smb::status_map::fs_status;
use crate::smb::{OpResult, Reply, Request};

/// Quota index opens one session may hold (a client opens one at a time).
const MAX_PER_SESSION: usize = 64;

/// One open of the quota index.
pub struct QuotaOpen {
    pub persistent_id: u64,
    pub volatile_id: u64,
    pub tree_id: u32,
    index: QuotaIndexOpen,
    /// Open.Mode (MS-FSA 2.1.1.5) from the create options, for
    /// FileModeInformation.
    mode: u32,
    closed: AtomicBool,
}

/// Whether a CREATE names the quota index.
pub fn names_quota_index(name: &str) -> bool {
    braid_fs::quota::is_quota_index(name)
}

/// MS-SMB2 3.3.5.9 for the quota index: the open, as Samba answers it
/// (OPENED, no oplock, the index's attributes and no times or sizes).
/// Create contexts other than MxAc and QFid are ignored: the index is not
/// leased, not made durable and has no extended attributes.
pub fn create(
    req: &mut Request<'_>,
    params: &OpenParams,
    mode: u32,
    want_mxac: bool,
    want_qfid: bool,
) -> OpResult {
    let session = req.session()?.clone();
    let tree = req.tree()?.clone();
    let index = braid_fs::quota::open(params, tree.maximal_access).map_err(|e| fs_status(&e))?;
    let volatile = req.conn.server.smb.new_file_id();
    let file_id = FileId {
        persistent: volatile,
        volatile,
    };
    {
        let mut opens = session.quota_opens.lock().unwrap();
        if opens.len() >= MAX_PER_SESSION {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        opens.insert(
            volatile,
            Arc::new(QuotaOpen {
                persistent_id: volatile,
                volatile_id: volatile,
                tree_id: tree.id,
                index,
                mode,
                closed: AtomicBool::new(false),
            }),
        );
    }
    let mut contexts = Vec::new();
    if want_mxac {
        // MS-SMB2 2.2.14.2.5: QueryStatus then MaximalAccess.
        let mut data = Vec::with_capacity(8);
        data.put_u32(0);
        data.put_u32(index.maximal_access());
        contexts.push(CreateContext {
            name: context_name::QUERY_MAXIMAL_ACCESS_REQUEST.to_vec(),
            data,
        });
    }
    if want_qfid {
        // MS-SMB2 2.2.14.2.9: the index has no on-disk id (Samba: zeros).
        contexts.push(CreateContext {
            name: context_name::QUERY_ON_DISK_ID.to_vec(),
            data: vec![0; 32],
        });
    }
    let response =
        super::create::create_response(&index.info(), 0, create_action::OPENED, file_id, contexts);
    let mut reply = Reply::of(&response);
    reply.created_file_id = Some(file_id);
    Ok(reply)
}

/// The quota index open `id` names on this request's tree (the related
/// compound id included), if it names one.
pub fn find(req: &Request<'_>, id: FileId) -> Option<Arc<QuotaOpen>> {
    let id = if id == FileId::RELATED {
        req.related_file_id?
    } else {
        id
    };
    let open = req
        .session
        .as_ref()?
        .quota_opens
        .lock()
        .unwrap()
        .get(&id.volatile)
        .cloned()?;
    if open.persistent_id != id.persistent || Some(open.tree_id) != req.tree.as_ref().map(|t| t.id)
    {
        return None;
    }
    *req.used_file_id.lock().unwrap() = Some(id);
    Some(open)
}

/// What a command other than CLOSE, QUERY_INFO and SET_INFO answers on a
/// quota index open. READ, WRITE and FLUSH are ACCESS_DENIED and
/// QUERY_DIRECTORY NOT_SUPPORTED, as on Samba; CHANGE_NOTIFY is
/// INVALID_PARAMETER, as on Samba and for any open that is no directory;
/// LOCK is INVALID_PARAMETER, as MS-FSA 2.1.5.8 answers for a directory
/// stream (Samba answers NO_MEMORY); IOCTLs on it are
/// INVALID_DEVICE_REQUEST (the index has no data, object id or
/// allocation to control); an OPLOCK_BREAK acknowledges no oplock.
pub fn refusal(command: u16) -> NtStatus {
    match Command::from_u16(command) {
        Some(Command::Read | Command::Write | Command::Flush) => NtStatus::ACCESS_DENIED,
        Some(Command::QueryDirectory) => NtStatus::NOT_SUPPORTED,
        Some(Command::ChangeNotify | Command::Lock) => NtStatus::INVALID_PARAMETER,
        Some(Command::Ioctl) => NtStatus::INVALID_DEVICE_REQUEST,
        Some(Command::OplockBreak) => NtStatus::INVALID_OPLOCK_PROTOCOL,
        _ => NtStatus::INVALID_DEVICE_REQUEST,
    }
}

/// MS-SMB2 3.3.5.10: CLOSE of a quota index open; with
/// POSTQUERY_ATTRIB, the index's attributes (and no times or sizes).
pub fn close(req: &Request<'_>, r: &CloseRequest, open: &QuotaOpen) -> OpResult {
    let removed = req
        .session()?
        .quota_opens
        .lock()
        .unwrap()
        .remove(&open.volatile_id);
    if removed.is_none() || open.closed.swap(true, Ordering::AcqRel) {
        return Err(NtStatus::FILE_CLOSED);
    }
    Ok(Reply::of(&super::close::close_response(
        r.flags,
        &open.index.info(),
    )))
}

/// MS-SMB2 3.3.5.20 on a quota index open.
pub async fn query_info(req: &Request<'_>, r: &QueryInfoRequest, open: &QuotaOpen) -> OpResult {
    if r.output_buffer_length > req.conn.config.max_transact_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let out = match r.info_type {
        SMB2_0_INFO_FILE => {
            let granted = open.index.granted_access();
            super::query_info::check_file_class(req, granted, r.file_info_class)?;
            match r.file_info_class {
                // The index has no extended attributes, and no data
                // streams to list (Samba: INVALID_PARAMETER).
                file_info::FILE_FULL_EA_INFORMATION => return Err(NtStatus::NO_EAS_ON_FILE),
                file_info::FILE_STREAM_INFORMATION => return Err(NtStatus::INVALID_PARAMETER),
                _ => {}
            }
            let view = view_of(&open.index.info());
            let path = format!("{QUOTA_FILE}:{QUOTA_STREAM}");
            let last = QUOTA_FILE.rsplit('\\').next().unwrap_or(QUOTA_FILE);
            let short = braid_fs::shortname::short_name(last);
            let q = FileQueryInput {
                view: &view,
                path: &path,
                short_name: &short,
                access_mask: granted,
                position: 0,
                mode: open.mode,
                volume_serial: 0,
                streams: &[],
            };
            file_info::query_file_info(r.file_info_class, &q, r.output_buffer_length)
                .map_err(|e| e.status())?
        }
        // The volume the index is on is the share's.
        SMB2_0_INFO_FILESYSTEM => super::query_info::query_fs(req, r).await?,
        // The index's descriptor is not shown (Samba: ACCESS_DENIED).
        SMB2_0_INFO_SECURITY => return Err(NtStatus::ACCESS_DENIED),
        SMB2_0_INFO_QUOTA => {
            // MS-SMB2 3.3.5.20.4: the input must be an SMB2_QUERY_QUOTA_INFO
            // (its SID list a FILE_GET_QUOTA_INFORMATION list).
            QueryQuotaInfo::decode(&r.input).map_err(|e| e.status())?;
            // Braid keeps no quota entries (the host's quotas, per uid, are
            // not shown as SIDs'), so every enumeration, of all entries,
            // from a SID or of a list of SIDs, is empty from its start:
            // STATUS_NO_MORE_ENTRIES, as Samba answers on a file system
            // without quotas (fill_quota_buffer, source3/libsmb/cliquota.c).
            return Err(NtStatus::NO_MORE_ENTRIES);
        }
        _ => return Err(NtStatus::INVALID_PARAMETER),
    };
    Ok(Reply::with_status(
        out.status,
        &QueryInfoResponse { output: out.data },
    ))
}

/// MS-SMB2 3.3.5.21 on a quota index open: the index cannot be renamed,
/// resized, deleted, re-timed or given another descriptor (Samba's smbd
/// stops on an assertion for these; NTFS keeps its metadata files from
/// them). A quota set, once its FILE_QUOTA_INFORMATION list is valid, is
/// refused as MS-SMB2 3.3.5.21.4 refuses a user without the right to
/// manage quotas: Braid has none to manage. Samba answers ACCESS_DENIED
/// when the file system refuses the set. File system sets are refused as
/// on any open (`set_info.rs`).
pub fn set_info(r: &SetInfoRequest) -> OpResult {
    match r.info_type {
        SMB2_0_INFO_FILE => {
            file_info::decode_set_file_info(r.file_info_class, &r.buffer)
                .map_err(|e| e.status())?;
            Err(NtStatus::ACCESS_DENIED)
        }
        SMB2_0_INFO_SECURITY | SMB2_0_INFO_FILESYSTEM => Err(NtStatus::ACCESS_DENIED),
        SMB2_0_INFO_QUOTA => {
            // MS-FSA 2.1.5.22: an empty buffer is INVALID_PARAMETER.
            decode_quota_list(&r.buffer).map_err(|e| e.status())?;
            Err(NtStatus::ACCESS_DENIED)
        }
        _ => Err(NtStatus::INVALID_PARAMETER),
    }
}
