//! CHANGE_NOTIFY: MS-SMB2 3.3.5.19. The request goes async and completes
//! when cancelled (STATUS_CANCELLED) or when its directory handle is
//! closed (STATUS_NOTIFY_CLEANUP). Change events are not delivered yet:
//! a client waiting for one keeps waiting, as on a quiet directory.

use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::create::access_mask;
use braid_smb_proto::messages::{ChangeNotifyRequest, ChangeNotifyResponse};
use braid_smb_proto::NtStatus;

use crate::smb::{OpResult, Reply, Request};

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = ChangeNotifyRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let open = req.open(r.file_id)?;
    if !open.is_directory {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if open.granted_access & access_mask::FILE_LIST_DIRECTORY == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if r.output_buffer_length > req.conn.server.config.max_transact_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let cancel = req.cancellable();
    req.go_async();
    tokio::select! {
        _ = cancel.cancelled() => Err(NtStatus::CANCELLED),
        _ = open.close_signal.cancelled() => {
            Ok(Reply::with_status(NtStatus::NOTIFY_CLEANUP, &ChangeNotifyResponse { output: Vec::new() }))
        }
    }
}
