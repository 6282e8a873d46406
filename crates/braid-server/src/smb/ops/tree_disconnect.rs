//! TREE_DISCONNECT: MS-SMB2 3.3.5.8.

use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::{TreeDisconnectRequest, TreeDisconnectResponse};
use braid_smb_proto::NtStatus;

use crate::smb::{OpResult, Reply, Request};

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    TreeDisconnectRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let session = req.session()?.clone();
    let tree = req.tree()?.clone();
    session.remove_tree(tree.id);
    session
        .pipes
        .lock()
        .unwrap()
        .retain(|_, p| p.tree_id != tree.id);
    session
        .quota_opens
        .lock()
        .unwrap()
        .retain(|_, q| q.tree_id != tree.id);
    // Pending requests on the tree (blocking locks) end with the opens.
    let opens = session.take_opens_of_tree(Some(tree.id));
    super::close::close_opens(opens).await;
    Ok(Reply::of(&TreeDisconnectResponse))
}
