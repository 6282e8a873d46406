//! OPLOCK_BREAK acknowledgments: MS-SMB2 3.3.5.22.1 (oplocks). Leases are
//! not granted yet, so a lease acknowledgment has nothing to acknowledge.

use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::oplock_break::OplockBreakRequest;
use braid_smb_proto::messages::oplock_break::OplockBreakResponse;
use braid_smb_proto::NtStatus;

use crate::smb::{OpResult, Reply, Request};

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = OplockBreakRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let ack = match r {
        OplockBreakRequest::Oplock(a) => a,
        // 3.3.5.22.2: no lease with that key.
        OplockBreakRequest::Lease(_) => return Err(NtStatus::OBJECT_NAME_NOT_FOUND),
    };
    let open = req.open(ack.file_id)?;
    let Some(o) = &open.oplock else {
        return Err(NtStatus::INVALID_OPLOCK_PROTOCOL);
    };
    match o.file.acknowledge(o.key, ack.oplock_level) {
        Some(level) => Ok(Reply::of(&OplockBreakResponse {
            oplock_level: level,
            file_id: ack.file_id,
        })),
        None => Err(NtStatus::INVALID_OPLOCK_PROTOCOL),
    }
}
