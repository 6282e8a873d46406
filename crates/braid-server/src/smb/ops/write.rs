//! WRITE: MS-SMB2 3.3.5.13. The payload is written from the received
//! frame without copying it.

use braid_fs::LockOwner;
use braid_smb_proto::messages::create::access_mask;
use braid_smb_proto::messages::write::decode_write_request_ref;
use braid_smb_proto::messages::WriteResponse;
use braid_smb_proto::NtStatus;

use super::read::check_credit_charge;
use crate::smb::{blocking, status_map, OpResult, Reply, Request};

/// SMB2_WRITEFLAG_WRITE_THROUGH.
const WRITE_THROUGH: u32 = 0x0000_0001;

/// MS-FSA 2.1.5.3 MAXFILESIZE: no byte may be written at or beyond it.
const MAX_FILE_SIZE: u64 = 0xFFF_FFFF_0000;

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let (w, data_range) =
        decode_write_request_ref(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if super::pipe::on_ipc(req) {
        return super::pipe::write(req, w.file_id, &req.msg[data_range]);
    }
    let open = req.open(w.file_id)?;
    if open.is_directory {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let len = data_range.len() as u32;
    if len > req.conn.config.max_io_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    check_credit_charge(req, len)?;
    if open.granted_access & (access_mask::FILE_WRITE_DATA | access_mask::FILE_APPEND_DATA) == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // 0xFFFFFFFF_FFFFFFFF means "append" only for opens that may append
    // but not write (MS-FSA 2.1.5.3 FILE_WRITE_TO_END_OF_FILE); other
    // offsets, and writes ending beyond the 63-bit range, are invalid, as
    // is a non-empty write ending beyond MS-FSA 2.1.5.3's MAXFILESIZE
    // (smbtorture smb2.rw.invalid; Samba's vfs_valid_pwrite_range).
    let append_only = open.granted_access & access_mask::FILE_WRITE_DATA == 0;
    let end = w.offset.checked_add(len as u64);
    let limit = if len == 0 {
        i64::MAX as u64
    } else {
        MAX_FILE_SIZE
    };
    if (w.offset == u64::MAX && !append_only)
        || (w.offset != u64::MAX && end.is_none_or(|e| e > limit))
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let handle = open.handle.clone();
    let payload = req.msg_bytes.slice(data_range);
    let offset = w.offset;
    // A continuously available share writes through: what a client was
    // told is written survives the server's process and machine
    // (`smb/persistent.rs`).
    let write_through =
        w.flags & WRITE_THROUGH != 0 || req.share().is_ok_and(|s| s.continuous_availability);
    if let Some(o) = &open.oplock {
        o.file.break_level2_except(o.key);
    }
    // A large aligned write goes to the device from here (io_uring), with
    // no blocking thread; anything else, or a direct write that failed,
    // is written on a blocking thread.
    if offset != u64::MAX && !write_through && !payload.is_empty() {
        handle
            .check_io_lock(offset, payload.len() as u64, true, LockOwner(0))
            .map_err(|e| status_map::fs_status(&e))?;
        if let Some(write) = handle.write_queued(offset, Box::new(payload.clone())) {
            if let Some(n) = write.await {
                return Ok(Reply::of(&WriteResponse {
                    count: n as u32,
                    remaining: 0,
                }));
            }
        }
    }
    let n = blocking(move || {
        let offset = if offset == u64::MAX {
            handle.info()?.end_of_file
        } else {
            offset
        };
        if !payload.is_empty() {
            handle.check_io_lock(offset, payload.len() as u64, true, LockOwner(0))?;
        }
        let n = handle.write(offset, &payload)?;
        if write_through {
            // Not a FLUSH: the write's LastWriteTime update stays delayed.
            handle.sync()?;
        }
        Ok(n)
    })
    .await?;
    Ok(Reply::of(&WriteResponse {
        count: n as u32,
        remaining: 0,
    }))
}
