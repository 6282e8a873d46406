//! TREE_CONNECT: MS-SMB2 3.3.5.7.

use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::tree_connect::share_type;
use braid_smb_proto::messages::{TreeConnectRequest, TreeConnectResponse};
use braid_smb_proto::NtStatus;

use crate::smb::{OpResult, Reply, Request};

/// FILE_ALL_ACCESS: what a share grants an authenticated user.
const FILE_ALL_ACCESS: u32 = 0x001F_01FF;

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = TreeConnectRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let session = req.session()?;
    // "\\server\share": the share is the last component.
    let path = r.path.trim_end_matches('\\');
    let name = match path.strip_prefix("\\\\") {
        Some(rest) => match rest.split_once('\\') {
            Some((_, share)) if !share.is_empty() && !share.contains('\\') => share,
            _ => return Err(NtStatus::BAD_NETWORK_NAME),
        },
        None => return Err(NtStatus::BAD_NETWORK_NAME),
    };
    let (share, kind) = if name.eq_ignore_ascii_case("IPC$") {
        (None, share_type::PIPE)
    } else {
        match req.conn.server.share(name) {
            Some(s) => (Some(s), share_type::DISK),
            None => return Err(NtStatus::BAD_NETWORK_NAME),
        }
    };
    let tree = session.add_tree(share, FILE_ALL_ACCESS);
    let mut reply = Reply::of(&TreeConnectResponse {
        share_type: kind,
        share_flags: 0,
        capabilities: 0,
        maximal_access: tree.maximal_access,
    });
    reply.tree_id = Some(tree.id);
    Ok(reply)
}
