//! LOGOFF: MS-SMB2 3.3.5.6.

use std::sync::Arc;

use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::{LogoffRequest, LogoffResponse};
use braid_smb_proto::NtStatus;

use crate::session::{Session, SessionPhase};
use crate::smb::{OpResult, Reply, Request};
use crate::state::ServerState;

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    LogoffRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let session = req.session()?.clone();
    let conn = req.conn;
    conn.server.sessions.remove(&session.id);
    conn.sessions.lock().unwrap().remove(&session.id);
    // Close first: requests waiting on the session's opens then end as
    // their opens go (RANGE_NOT_LOCKED for locks); the rest are cancelled.
    close_session(&conn.server, &session).await;
    conn.cancel_session_requests(session.id);
    // The response is still signed with the session's key.
    Ok(Reply::of(&LogoffResponse))
}

/// Close every open of a session that is going away.
pub async fn close_session(_server: &Arc<ServerState>, session: &Arc<Session>) {
    session.set_phase(SessionPhase::Expired);
    let opens = session.take_opens_of_tree(None);
    session.trees.lock().unwrap().clear();
    super::close::close_opens(opens).await;
}
