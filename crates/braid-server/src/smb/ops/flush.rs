//! FLUSH: MS-SMB2 3.3.5.11 — data reaches stable storage before the response.

use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::create::access_mask;
use braid_smb_proto::messages::{FlushRequest, FlushResponse};
use braid_smb_proto::NtStatus;

use crate::smb::{blocking, OpResult, Reply, Request};

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = FlushRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let open = req.open(r.file_id)?;
    if open.granted_access & (access_mask::FILE_WRITE_DATA | access_mask::FILE_APPEND_DATA) == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let handle = open.handle.clone();
    blocking(move || handle.flush()).await?;
    Ok(Reply::of(&FlushResponse))
}
