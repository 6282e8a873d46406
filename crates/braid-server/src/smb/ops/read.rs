//! READ: MS-SMB2 3.3.5.12. The payload goes to the socket as its own
//! buffer, after a header built separately (no copy when unsigned).

use braid_fs::LockOwner;
use braid_smb_proto::codec::Message;
use braid_smb_proto::crypto::TRANSFORM_HEADER_LEN;
use braid_smb_proto::header::HEADER_LEN;
use braid_smb_proto::messages::create::access_mask;
use braid_smb_proto::messages::read::encode_read_response_header;
use braid_smb_proto::messages::ReadRequest;
use braid_smb_proto::NtStatus;

use crate::smb::{blocking, OpResult, Reply, Request};

/// MS-SMB2 3.3.5.2.5: a multi-credit request must carry enough CreditCharge.
pub fn check_credit_charge(req: &Request<'_>, payload: u32) -> Result<(), NtStatus> {
    if req.conn.dialect() == braid_smb_proto::messages::negotiate::dialect::SMB202 {
        return Ok(());
    }
    let needed = (payload.max(1) as u64 - 1) / 65536 + 1;
    if (req.header.credit_charge.max(1) as u64) < needed {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(())
}

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = ReadRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let open = req.open(r.file_id)?;
    if open.is_directory {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let max = req.conn.server.config.max_io_size;
    if r.length > max {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    check_credit_charge(req, r.length)?;
    if open.granted_access & (access_mask::FILE_READ_DATA | access_mask::FILE_EXECUTE) == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if r.offset > i64::MAX as u64 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let handle = open.handle.clone();
    let (offset, length) = (r.offset, r.length);
    // The response is built in one buffer: room for a transform header,
    // then header and READ body, then the file data read straight behind
    // them. Signing and encryption then run in place on the buffer that goes
    // to the socket, and the plain case is one write: the data is never
    // copied again.
    const ROOM: usize = TRANSFORM_HEADER_LEN;
    const PREFIX: usize = ROOM + HEADER_LEN + 16;
    let (msg, n) = blocking(move || {
        if length > 0 {
            handle.check_io_lock(offset, length as u64, false, LockOwner(0))?;
        }
        let mut msg = Vec::with_capacity(PREFIX + length as usize);
        msg.resize(PREFIX, 0);
        let n = handle.read_append(offset, length as usize, &mut msg)?;
        // Open.CurrentByteOffset follows the last read, as Samba keeps it
        // for FilePositionInformation (smbtorture smb2.read.position).
        handle.set_position(offset + n as u64);
        Ok((msg, n))
    })
    .await?;
    if (n as u64) < r.minimum_count as u64 || (n == 0 && r.length > 0) {
        return Err(NtStatus::END_OF_FILE);
    }
    let mut msg = msg;
    let mut prefix = Vec::with_capacity(HEADER_LEN + 16);
    prefix.resize(HEADER_LEN, 0);
    encode_read_response_header(&mut prefix, n as u32);
    msg[ROOM + HEADER_LEN..PREFIX].copy_from_slice(&prefix[HEADER_LEN..]);
    if n == 0 {
        // MS-SMB2 2.2.20: the variable part is at least one byte.
        msg.push(0);
    }
    let mut reply = Reply::raw(NtStatus::SUCCESS, msg);
    reply.headroom = ROOM;
    Ok(reply)
}
