//! What an SMB request costs a share's QoS budget (`crate::qos`), and its
//! pass through the share's gate before the handler runs.

use std::sync::Arc;

use braid_qos::Cost;
use braid_smb_proto::codec::{FileId, Message};
use braid_smb_proto::header::Command;
use braid_smb_proto::messages::read::ReadRequest;
use braid_smb_proto::messages::write::decode_write_request_ref;

use super::Request;
use crate::qos::{file_key, smb_client, Class, Passed, ShareGate};

/// How long a request waits at the gate before it goes async: past this
/// the client gets an interim STATUS_PENDING (MS-SMB2 3.3.4.2), which
/// stops its request timer and gives its credit back, so a long wait under
/// a low limit is never a client timeout.
const INTERIM_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

/// Wait at the share's gate, if its limits are on; what passed, to report
/// the outcome with. Requests QoS does not count (negotiation, ECHO,
/// LOCK, IOCTL, CHANGE_NOTIFY...) and malformed ones (their handlers
/// refuse them) go by.
pub async fn pass(req: &mut Request<'_>, command: Command) -> Option<(Arc<ShareGate>, Passed)> {
    let share = req.tree.as_ref()?.share.as_ref()?;
    let gate = req.conn.server.qos.gate(&share.name)?;
    let (class, cost) = cost_of(req, command, &gate)?;
    let session = req.session.as_ref().map_or(0, |s| s.id);
    let waiting_gate = gate.clone();
    let waiting = waiting_gate.pass(smb_client(session), cost, class);
    tokio::pin!(waiting);
    let passed = tokio::select! {
        passed = &mut waiting => passed,
        _ = tokio::time::sleep(INTERIM_AFTER) => {
            // Without an async slot left the request keeps waiting
            // synchronously, as before (go_async's own rule).
            let _ = req.go_async();
            waiting.await
        }
    };
    if !passed.waited.is_zero() {
        req.conn.server.qos.note_throttled(smb_client(session));
    }
    Some((gate, passed))
}

fn cost_of(req: &Request<'_>, command: Command, gate: &ShareGate) -> Option<(Class, Cost)> {
    let limits = gate.limits();
    let file = |id: FileId| -> Option<u64> {
        if limits.file_iops.is_none() && limits.file_mibps.is_none() {
            return None;
        }
        let id = if id == FileId::RELATED {
            req.related_file_id?
        } else {
            id
        };
        let open = req.session.as_ref()?.opens.get(&id.volatile)?;
        Some(file_key((&gate.name, open.handle.path())))
    };
    match command {
        // MS-SMB2 2.2.19: Length bytes are read.
        Command::Read => {
            let r = ReadRequest::decode(req.msg).ok()?;
            let f = file(r.file_id);
            Some((
                Class::Read,
                Cost::io(r.length as u64, false, limits.io_unit, f),
            ))
        }
        // MS-SMB2 2.2.21: Length bytes are written.
        Command::Write => {
            let (w, _) = decode_write_request_ref(req.msg).ok()?;
            let f = file(w.file_id);
            Some((
                Class::Write,
                Cost::io(w.length as u64, true, limits.io_unit, f),
            ))
        }
        Command::Create
        | Command::Close
        | Command::QueryInfo
        | Command::SetInfo
        | Command::QueryDirectory => Some((Class::Metadata, Cost::metadata())),
        _ => None,
    }
}
