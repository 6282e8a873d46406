//! TREE_DISCONNECT: MS-SMB2 3.3.5.8.

use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::{TreeDisconnectRequest, TreeDisconnectResponse};
use braid_smb_proto::NtStatus;

use crate::smb::{OpResult, Reply, Request};

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    TreeDisconnectRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let session = req.session()?.clone();
    if let Some(ticket) = req.ticket {
        // Requests of the session sent before this one take effect first
        // (crate::smb::order::FileRequestOrder).
        let order = &req.conn.file_order;
        order.wait_for_session_before(ticket, session.id).await;
    }
    let tree = req.tree()?.clone();
    session.remove_tree(tree.id);
    super::pipe::close_pipes(&session, |p| p.tree_id == tree.id);
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
