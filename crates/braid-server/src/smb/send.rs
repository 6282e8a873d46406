//! Sending what the server originates outside a handler's reply: frames
//! sealed for encrypting sessions (MS-SMB2 3.3.4.1.4), interim responses
//! (3.3.4.2), and the error body every failed reply carries.

use std::sync::Arc;

use braid_smb_proto::crypto::{encrypt_frame_in_place, TRANSFORM_HEADER_LEN};
use braid_smb_proto::header::{flags, Header, HEADER_LEN};
use braid_smb_proto::messages::ErrorResponse;
use braid_smb_proto::NtStatus;
use bytes::Bytes;

use crate::smb::conn::Connection;
use crate::smb::session::Session;
use crate::smb::Reply;

/// Queue a frame, encrypted with `session`'s key when the request came
/// encrypted (MS-SMB2 3.3.4.1.4): the responses are laid out behind a
/// 52-byte gap and sealed in place.
pub fn send_frame(
    conn: &Connection,
    session: Option<&Session>,
    parts: Vec<Bytes>,
) -> Result<(), String> {
    send_frame_holding(conn, session, parts, None)
}

/// [`send_frame`], keeping `held` in flight until the frame is written.
pub fn send_frame_holding(
    conn: &Connection,
    session: Option<&Session>,
    parts: Vec<Bytes>,
    held: Option<crate::workload::InFlight>,
) -> Result<(), String> {
    conn.send_holding(seal_frame(session, parts)?, held);
    Ok(())
}

/// The frame as it goes to the socket: `parts` as they are, or encrypted
/// under a fresh nonce of `session` when it encrypts.
pub fn seal_frame(session: Option<&Session>, parts: Vec<Bytes>) -> Result<Vec<Bytes>, String> {
    let Some(enc) = session.and_then(|s| s.encryption().map(|e| (s.id, e))) else {
        return Ok(parts);
    };
    let (sid, enc) = enc;
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut frame = Vec::with_capacity(TRANSFORM_HEADER_LEN + total);
    frame.resize(TRANSFORM_HEADER_LEN, 0);
    for p in &parts {
        frame.extend_from_slice(p);
    }
    let nonce = enc.nonces.next_nonce();
    encrypt_frame_in_place(enc.cipher, &enc.encrypt_key, &nonce, sid, &mut frame)
        .map_err(|e| format!("encrypt failed: {e}"))?;
    Ok(vec![Bytes::from(frame)])
}

pub fn error_reply(status: NtStatus) -> Reply {
    Reply::with_status(
        status,
        &ErrorResponse {
            error_context_count: 0,
            error_data: Vec::new(),
        },
    )
}

/// MS-SMB2 3.3.4.2: the interim response; returns the credits it granted.
pub fn send_interim(
    conn: &Arc<Connection>,
    hdr: &Header,
    async_id: u64,
    encrypted_by: Option<&Session>,
) -> u16 {
    let charge = hdr.credit_charge.max(1);
    let credits = conn.credits.lock().unwrap().grant(hdr.credits, charge);
    let rh = Header {
        credit_charge: hdr.credit_charge,
        status: NtStatus::PENDING.0,
        command: hdr.command,
        credits,
        flags: flags::SERVER_TO_REDIR | flags::ASYNC_COMMAND,
        next_command: 0,
        message_id: hdr.message_id,
        process_id: 0,
        tree_id: 0,
        async_id,
        session_id: hdr.session_id,
        signature: [0; 16],
    };
    let mut resp = Vec::with_capacity(HEADER_LEN + 9);
    rh.encode(&mut resp);
    braid_smb_proto::codec::Message::encode(
        &ErrorResponse {
            error_context_count: 0,
            error_data: Vec::new(),
        },
        &mut resp,
    );
    if send_frame(conn, encrypted_by, vec![Bytes::from(resp)]).is_err() {
        conn.closing.cancel();
    }
    credits
}
