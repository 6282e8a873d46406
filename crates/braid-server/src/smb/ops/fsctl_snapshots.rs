//! FSCTL_SRV_ENUMERATE_SNAPSHOTS: the previous versions of a share
//! (MS-SMB2 3.3.5.15.1), from braid-fs `snapshot.rs`.

use braid_smb_proto::messages::snapshots::{SnapshotArray, MIN_OUTPUT};
use braid_smb_proto::messages::IoctlRequest;
use braid_smb_proto::NtStatus;

use crate::smb::{blocking, Request};

// MS-SMB2 3.3.5.15.1
pub async fn enumerate(req: &Request<'_>, r: &IoctlRequest) -> Result<Vec<u8>, NtStatus> {
    if (r.max_output_response as usize) < MIN_OUTPUT {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    req.open(r.file_id)?;
    // The snapshots of the tree's share, also for an open in one of them.
    let share = req.share()?.fs.clone();
    let times = blocking(move || share.snapshots()).await?;
    let tokens = times
        .into_iter()
        .map(braid_fs::snapshot::gmt_token)
        .collect();
    let mut out = Vec::new();
    SnapshotArray::for_buffer(tokens, r.max_output_response as usize).encode(&mut out);
    Ok(out)
}
