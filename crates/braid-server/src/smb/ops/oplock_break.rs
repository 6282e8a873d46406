//! OPLOCK_BREAK acknowledgments: MS-SMB2 3.3.5.22. Braid grants no oplocks
//! or leases yet, so there is never a break to acknowledge.

use braid_smb_proto::NtStatus;

use crate::smb::{OpResult, Request};

pub async fn handle(_req: &mut Request<'_>) -> OpResult {
    // 3.3.5.22.1: no break in progress.
    Err(NtStatus::INVALID_OPLOCK_PROTOCOL)
}
