//! ECHO: MS-SMB2 3.3.5.18.

use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::{EchoRequest, EchoResponse};
use braid_smb_proto::NtStatus;

use crate::smb::{OpResult, Reply, Request};

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    EchoRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    Ok(Reply::of(&EchoResponse))
}
