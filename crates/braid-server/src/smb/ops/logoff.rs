//! LOGOFF: MS-SMB2 3.3.5.6.

use std::sync::Arc;

use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::{LogoffRequest, LogoffResponse};
use braid_smb_proto::NtStatus;

use crate::smb::session::Session;
use crate::smb::{OpResult, Reply, Request};
use crate::state::ServerState;

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    LogoffRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let session = req.session()?.clone();
    if let Some(ticket) = req.ticket {
        // Requests of the session sent before this one take effect first
        // (crate::smb::order::FileRequestOrder).
        let order = &req.conn.file_order;
        order.wait_for_session_before(ticket, session.id).await;
    }
    end_session(&req.conn.server, &session).await;
    // The response is still signed with the channel's key.
    Ok(Reply::of(&LogoffResponse))
}

/// The session ends on every channel (logoff, failed re-authentication):
/// it leaves the server's table and each channel's connection, its opens
/// are closed, and requests still pending on any channel are cancelled.
pub async fn end_session(server: &Arc<ServerState>, session: &Arc<Session>) {
    server.smb.sessions.remove(&session.id);
    let conns = session.channel_connections();
    for c in &conns {
        c.sessions.lock().unwrap().remove(&session.id);
    }
    if let Some(c) = server
        .smb
        .connections
        .get(&session.connection_id)
        .and_then(|w| w.upgrade())
    {
        // A session still being set up has no channel yet.
        c.sessions.lock().unwrap().remove(&session.id);
    }
    // Close first: requests waiting on the session's opens then end as
    // their opens go (RANGE_NOT_LOCKED for locks); the rest are cancelled.
    // Durable opens outlive the session, as Windows and Samba keep them:
    // the client may reconnect them from a new session.
    crate::smb::durable::disconnect_session(server, session).await;
    super::pipe::close_pipes(session, |_| true);
    for c in &conns {
        c.cancel_session_requests(session.id);
    }
}
