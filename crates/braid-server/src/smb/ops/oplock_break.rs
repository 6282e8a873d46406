//! OPLOCK_BREAK acknowledgments: MS-SMB2 3.3.5.22.1 (oplocks) and
//! 3.3.5.22.2 (leases).

use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::oplock_break::OplockBreakRequest;
use braid_smb_proto::messages::oplock_break::OplockBreakResponse;
use braid_smb_proto::messages::{LeaseBreakAck, LeaseBreakResponse};
use braid_smb_proto::NtStatus;

use crate::smb::{OpResult, Reply, Request};

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = OplockBreakRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let ack = match r {
        OplockBreakRequest::Oplock(a) => a,
        OplockBreakRequest::Lease(a) => return lease_ack(req, a),
    };
    let open = req.open(ack.file_id)?;
    let Some(o) = &open.oplock else {
        return Err(NtStatus::INVALID_OPLOCK_PROTOCOL);
    };
    let level = o.file.acknowledge(o.key, ack.oplock_level)?;
    crate::smb::persistent::resave_if_persistent(&req.conn.server, &open).await;
    Ok(Reply::of(&OplockBreakResponse {
        oplock_level: level,
        file_id: ack.file_id,
    }))
}

/// MS-SMB2 3.3.5.22.2: the lease is found by the connection's ClientGuid
/// and the key; the acknowledged state must be within what the break asked.
fn lease_ack(req: &mut Request<'_>, ack: LeaseBreakAck) -> OpResult {
    req.session()?;
    let id = (req.conn_client_guid(), ack.lease_key);
    let lease = req
        .conn
        .server
        .smb
        .oplocks
        .leases
        .get(&id)
        .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    let file = lease
        .file
        .upgrade()
        .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    let state = file.acknowledge_lease(&lease, ack.lease_state)?;
    let session = req.session()?;
    for open in session.opens.values() {
        let holds = open
            .oplock
            .as_ref()
            .and_then(|o| o.file.lease_of(o.key))
            .is_some_and(|l| l.id == id);
        if holds {
            let server = req.conn.server.clone();
            tokio::spawn(async move {
                crate::smb::persistent::resave_if_persistent(&server, &open).await
            });
        }
    }
    Ok(Reply::of(&LeaseBreakResponse {
        flags: 0,
        lease_key: ack.lease_key,
        lease_state: state,
        lease_duration: 0,
    }))
}
