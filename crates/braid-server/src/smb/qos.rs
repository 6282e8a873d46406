//! What an SMB request costs a share's QoS budget (`crate::qos`), and its
//! pass through the share's gate before the handler runs.

use std::sync::Arc;

use braid_qos::Cost;
use braid_smb_proto::codec::{FileId, Message};
use braid_smb_proto::header::Command;
use braid_smb_proto::messages::fsctl_data::CopyChunkCopy;
use braid_smb_proto::messages::ioctl::{fsctl, IoctlRequest};
use braid_smb_proto::messages::read::ReadRequest;
use braid_smb_proto::messages::write::decode_write_request_ref;

use super::ops::fsctl_copy::{MAX_CHUNKS, MAX_CHUNK_SIZE, MAX_DATA_SIZE};
use super::Request;
use crate::qos::{file_key, smb_client, Class, Passed, ShareGate};

/// How long a request waits at the gate before it goes async: past this
/// the client gets an interim STATUS_PENDING (MS-SMB2 3.3.4.2), which
/// stops its request timer and gives its credit back, so a long wait under
/// a low limit is never a client timeout.
const INTERIM_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

/// Wait at the share's gate, if its limits are on; what passed, to report
/// the outcome with. Requests QoS does not count (negotiation, ECHO,
/// IOCTLs but server-side copy...) and malformed ones (their handlers
/// refuse them) go by.
pub async fn pass(req: &mut Request<'_>, command: Command) -> Option<(Arc<ShareGate>, Passed)> {
    let share = req.tree.as_ref()?.share.as_ref()?;
    let gate = req.conn.server.qos.gate(&share.name)?;
    let (class, cost) = cost_of(req, command, &gate)?;
    let session = req.session.as_ref().map_or(0, |s| s.id);
    // Under the limits the request goes at once, with no timer armed.
    let waiting = match gate.try_pass(smb_client(session), cost, class) {
        Ok(passed) => return Some((gate, passed)),
        Err(waiting) => waiting.wait(),
    };
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
        // MS-SMB2 3.3.5.15.6: a server-side copy reads and writes every
        // chunk on the server; charged as the READs and WRITEs it saves
        // the client.
        Command::Ioctl => {
            let r = IoctlRequest::decode(req.msg).ok()?;
            if r.ctl_code != fsctl::SRV_COPYCHUNK && r.ctl_code != fsctl::SRV_COPYCHUNK_WRITE {
                return None;
            }
            let (copy, count) = CopyChunkCopy::decode(&r.input, MAX_CHUNKS).ok()?;
            let cost = copy_cost(&copy, count, limits.io_unit, file(r.file_id))?;
            Some((Class::Write, cost))
        }
        // LOCK and CHANGE_NOTIFY are charged as the request arrives: a
        // lock that then waits for another's unlock, or a notification
        // that waits for a change, waits on its own, not on the budget.
        Command::Create
        | Command::Close
        | Command::QueryInfo
        | Command::SetInfo
        | Command::QueryDirectory
        | Command::Lock
        | Command::ChangeNotify => Some((Class::Metadata, Cost::metadata())),
        _ => None,
    }
}

/// What a SRV_COPYCHUNK_COPY costs: each chunk read (egress) and written
/// (ingress), one operation per started `unit` of it for the read and
/// again for the write. None for a request the handler will refuse
/// without copying (over the server's limits, MS-SMB2 3.3.5.15.6: it is
/// answered with the limits), or one that copies nothing.
pub fn copy_cost(copy: &CopyChunkCopy, count: u32, unit: u64, file: Option<u64>) -> Option<Cost> {
    if count == 0 || count > MAX_CHUNKS || copy.chunks.len() != count as usize {
        return None;
    }
    let mut bytes = 0u64;
    let mut ops = 0u64;
    for c in &copy.chunks {
        if c.length == 0 || c.length > MAX_CHUNK_SIZE {
            return None;
        }
        bytes += u64::from(c.length);
        ops += u64::from(c.length).div_ceil(unit.max(1));
    }
    if bytes > u64::from(MAX_DATA_SIZE) {
        return None;
    }
    Some(Cost {
        ops: 2 * ops,
        bytes_in: bytes,
        bytes_out: bytes,
        metadata: false,
        file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_smb_proto::messages::fsctl_data::CopyChunk;

    fn copy(lengths: &[u32]) -> CopyChunkCopy {
        CopyChunkCopy {
            source_key: [0; 24],
            chunks: lengths
                .iter()
                .map(|&length| CopyChunk {
                    length,
                    ..CopyChunk::default()
                })
                .collect(),
        }
    }

    #[test]
    fn a_server_side_copy_costs_its_reads_and_writes() {
        // 16 chunks of 1 MiB (smbprotocol's copyfile batch): 16 MiB each
        // way, 16 x 16 units of 64 KiB read and as many written.
        let c = copy(&[1 << 20; 16]);
        let cost = copy_cost(&c, 16, 64 << 10, Some(7)).unwrap();
        assert_eq!((cost.bytes_in, cost.bytes_out), (16 << 20, 16 << 20));
        assert_eq!(cost.ops, 2 * 16 * 16);
        assert_eq!(cost.file, Some(7));
        assert!(!cost.metadata);
        // A small chunk is one unit each way.
        assert_eq!(copy_cost(&copy(&[100]), 1, 64 << 10, None).unwrap().ops, 2);
    }

    #[test]
    fn a_copy_the_handler_refuses_costs_nothing() {
        assert!(copy_cost(&copy(&[]), 0, 65536, None).is_none());
        assert!(copy_cost(&copy(&[0]), 1, 65536, None).is_none());
        assert!(copy_cost(&copy(&[MAX_CHUNK_SIZE + 1]), 1, 65536, None).is_none());
        // 17 MiB in all: over MAX_DATA_SIZE.
        assert!(copy_cost(&copy(&[1 << 20; 17]), 17, 65536, None).is_none());
        // More chunks announced than sent.
        assert!(copy_cost(&copy(&[4096]), 2, 65536, None).is_none());
        assert!(copy_cost(&copy(&[4096]), MAX_CHUNKS + 1, 65536, None).is_none());
    }
}
