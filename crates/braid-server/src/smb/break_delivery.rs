//! How a server-initiated message reaches the client: oplock and lease
//! breaks (MS-SMB2 3.3.4.6, 3.3.4.7), sealed when the session encrypts,
//! and sent again on the session's next channel when the first one's TCP
//! does not acknowledge them.

use std::sync::Arc;

use braid_smb_proto::header::{flags, Command, Header, HEADER_LEN};
use bytes::Bytes;
use tracing::debug;

use crate::smb::conn::Connection;
use crate::smb::session::Session;

/// Queue a server-initiated message on `conn`, encrypted when `session`
/// encrypts; a connection that cannot take it is closed.
pub fn send_unsolicited(conn: &Connection, session: Option<&Arc<Session>>, msg: Vec<u8>) {
    if let Some(frame) = seal_unsolicited(conn, session.map(|s| s.as_ref()), Bytes::from(msg)) {
        conn.send(frame);
    }
}

/// `msg` as it goes to the socket: encrypted when `session` encrypts.
/// None when it cannot be sealed; `conn` is then closed.
fn seal_unsolicited(
    conn: &Connection,
    session: Option<&Session>,
    msg: Bytes,
) -> Option<Vec<Bytes>> {
    let encrypt = session.filter(|s| s.encrypt_data.load(std::sync::atomic::Ordering::Relaxed));
    match crate::smb::send::seal_frame(encrypt, vec![msg]) {
        Ok(frame) => Some(frame),
        Err(_) => {
            conn.closing.cancel();
            None
        }
    }
}

/// MS-SMB2 3.3.4.6 and 3.3.4.7: a break goes on `first`. A channel whose
/// TCP does not acknowledge the break within a few retransmission timeouts
/// is taken for dead and closed, and the break sent again on the session's
/// next live channel, until one takes it or none is left. With no channel
/// left, the session's opens go (or wait for their durable reconnect) at
/// once, and whoever waits on the break goes on instead of waiting out
/// the break timeout (smbtorture smb2.oplock.batch22b, as Samba does).
pub fn deliver_break(first: Arc<Connection>, session: Option<Arc<Session>>, msg: Vec<u8>) {
    let runtime = tokio::runtime::Handle::try_current();
    let (Some(session), Ok(runtime)) = (session.clone(), runtime) else {
        send_unsolicited(&first, session.as_ref(), msg);
        return;
    };
    // The first attempt is queued now, in order with what this task sends
    // next (a CREATE's response after the break it caused).
    let msg = Bytes::from(msg);
    let mut tried = vec![first.id];
    let Some(mut acked) = send_tracked_break(&first, &session, &msg) else {
        return;
    };
    let mut conn = first;
    runtime.spawn(async move {
        loop {
            if acked.await == Ok(true) {
                return;
            }
            conn.closing.cancel();
            let Some(next) = session.next_live_connection(&tried) else {
                return;
            };
            debug!(
                from = conn.id,
                to = next.id,
                "break not acknowledged; sent again"
            );
            tried.push(next.id);
            acked = match send_tracked_break(&next, &session, &msg) {
                Some(rx) => rx,
                None => return,
            };
            conn = next;
        }
    });
}

/// Queue a break on `conn` (encrypted when `session` encrypts) and learn
/// whether its TCP acknowledged it; None when it could not be sealed (the
/// connection is then closed).
fn send_tracked_break(
    conn: &Connection,
    session: &Session,
    msg: &Bytes,
) -> Option<tokio::sync::oneshot::Receiver<bool>> {
    seal_unsolicited(conn, Some(session), msg.clone()).map(|frame| conn.send_tracked(frame))
}

/// The header of a server-initiated OPLOCK_BREAK message (MS-SMB2 3.3.4.6,
/// 3.3.4.7: MessageId all ones, no session), with room for `body` bytes.
pub fn break_header(body: usize) -> Vec<u8> {
    let hdr = Header {
        command: Command::OplockBreak as u16,
        flags: flags::SERVER_TO_REDIR,
        message_id: u64::MAX,
        ..Default::default()
    };
    let mut msg = Vec::with_capacity(HEADER_LEN + body);
    hdr.encode(&mut msg);
    msg
}
