//! CLOSE: MS-SMB2 3.3.5.10.

use std::sync::Arc;

use braid_smb_proto::codec::{FileId, Message};
use braid_smb_proto::messages::{CloseRequest, CloseResponse};
use braid_smb_proto::NtStatus;

use crate::smb::notify;
use crate::smb::session::Open;
use crate::smb::{blocking, OpResult, Reply, Request};
use crate::state::filetime;

/// SMB2_CLOSE_FLAG_POSTQUERY_ATTRIB.
const POSTQUERY_ATTRIB: u16 = 0x0001;

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = CloseRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let named = if r.file_id == FileId::RELATED {
        req.related_file_id
    } else {
        Some(r.file_id)
    };
    if let (Some(ticket), Some(id)) = (req.ticket, named) {
        // Requests on this open that arrived first take effect first.
        req.conn.file_order.wait_before(ticket, id.volatile).await;
    }
    if super::pipe::on_ipc(req) {
        return super::pipe::close(req, r.file_id).unwrap_or(Err(NtStatus::FILE_CLOSED));
    }
    if let Some(q) = super::quota::find(req, r.file_id) {
        return super::quota::close(req, &r, &q);
    }
    let open = req.open(r.file_id)?;
    let session = req.session()?;
    if session.opens.remove(&open.volatile_id).is_none() || !open.mark_closed() {
        return Err(NtStatus::FILE_CLOSED);
    }
    let path = open.handle.path();
    let wrote = !open.is_directory && open.handle.has_written();
    let spared = crate::smb::dir_lease::spared_by(&open);
    let closing = open.clone();
    let closed = blocking(move || closing.close_handle()).await;
    open.release_caching();
    let info = closed?;
    let renamed = open.renamed.load(std::sync::atomic::Ordering::Relaxed);
    if (wrote || renamed || info.number_of_links == 0) && open.handle.stream_key() == 0 {
        // The entry's size, times or attributes changed, or it is gone:
        // leases on its directory break (dir_lease.rs).
        if let Ok(share) = req.share() {
            req.conn
                .server
                .smb
                .dir_leases
                .break_parent(share, &path, spared);
        }
    }
    if wrote && info.number_of_links != 0 {
        // The data changed: watchers see it when the writer closes, as
        // the LastWriteTime settles then (Samba reports it the same way).
        if let Ok(share) = req.share() {
            let f = notify::filter::LAST_WRITE | notify::filter::SIZE;
            req.conn
                .server
                .smb
                .notify
                .report(&share.name, &path, notify::action::MODIFIED, f);
        }
    }
    if info.number_of_links != 0
        && !open.is_directory
        && open.renamed.load(std::sync::atomic::Ordering::Relaxed)
    {
        // A file renamed through this open is marked for archiving as the
        // open is cleaned up: watchers of attribute changes see it
        // modified under its new name then (smbtorture
        // smb2.notify.mask-change; smb2.notify.rec, whose renaming opens
        // stay open, sees no such change).
        if let Ok(share) = req.share() {
            let f = notify::filter::ATTRIBUTES;
            req.conn
                .server
                .smb
                .notify
                .report(&share.name, &path, notify::action::MODIFIED, f);
        }
    }
    if info.number_of_links == 0 {
        // The last close of a delete-pending file removed it.
        if let Ok(share) = req.share() {
            let f = notify::name_filter(open.is_directory);
            req.conn
                .server
                .smb
                .notify
                .report(&share.name, &path, notify::action::REMOVED, f);
        }
    } else if info.delete_pending && open.is_directory {
        if let Ok(share) = req.share() {
            req.conn
                .server
                .smb
                .notify
                .delete_pending(&share.name, &path);
        }
    }
    Ok(Reply::of(&close_response(r.flags, &info)))
}

/// MS-SMB2 3.3.5.10: the file's attributes as of the close when the
/// client asked for them (SMB2_CLOSE_FLAG_POSTQUERY_ATTRIB), else zeros.
pub(super) fn close_response(flags: u16, info: &braid_fs::FileInfo) -> CloseResponse {
    if flags & POSTQUERY_ATTRIB == 0 {
        return CloseResponse::default();
    }
    CloseResponse {
        flags: POSTQUERY_ATTRIB,
        creation_time: filetime(info.creation_time),
        last_access_time: filetime(info.last_access_time),
        last_write_time: filetime(info.last_write_time),
        change_time: filetime(info.change_time),
        allocation_size: info.allocation_size,
        end_of_file: info.end_of_file,
        file_attributes: info.attributes,
    }
}

/// Close opens removed from a session's table (logoff, tree disconnect,
/// connection loss).
pub async fn close_opens(opens: Vec<Arc<Open>>) {
    if opens.is_empty() {
        return;
    }
    let _ = blocking(move || {
        for o in opens {
            if o.mark_closed() {
                let _ = o.close_handle();
                o.release_caching();
            }
        }
        Ok(())
    })
    .await;
}
