//! What an NFS operation costs its share's QoS budget (`crate::qos`), and
//! its pass through the share's gate, per operation in the COMPOUND loop.
//! A charged operation runs on a blocking thread (`reactor.rs` leaves a
//! READ on a share with a gate to the pool): the wait is done there, on
//! the runtime, holding the session's slot (the client's slots, which SEQUENCE
//! lowers while it is held back, bound how much of it waits).

use std::sync::Arc;

use braid_nfs_proto::nfs4::*;
use braid_qos::Cost;

use super::compound::Compound;
use super::dispatch;
use super::fh::Fh;
use crate::qos::{file_key, nfs_client, Class, Passed, ShareGate};

/// Wait at the gate of the share the current filehandle is in, if its
/// limits are on. READ and WRITE are I/O; the operations the table calls
/// metadata (`dispatch::info`: the namespace and attribute operations,
/// and the state operations on a file: OPEN, OPEN_DOWNGRADE, CLOSE, LOCK,
/// LOCKT, LOCKU) are metadata, charged as they arrive (a LOCK then
/// denied waits for no budget); the others (PUTFH, GETFH, SAVEFH,
/// session and client operations, COMMIT, DELEGRETURN) go by.
pub fn pass(c: &Compound, op: &nfs_argop4) -> Option<(Arc<ShareGate>, Passed)> {
    let registry = c.state.qos.get()?;
    let Some(Fh::Object { export, obj }) = &c.current else {
        return None;
    };
    let info = dispatch::info(op.discriminant());
    let io = |len: u64, write: bool, gate: &ShareGate| {
        let limits = gate.limits();
        let file = (limits.file_iops.is_some() || limits.file_mibps.is_some())
            .then(|| file_key((&export.name, obj.key())));
        Cost::io(len, write, limits.io_unit, file)
    };
    let (class, len, write) = match op {
        // RFC 8881 18.22: count bytes are read (at most).
        nfs_argop4::OP_READ(a) => (Class::Read, a.count as u64, false),
        // RFC 7862 15.10: as READ (holes are charged as the bytes they
        // stand for: the budget is of what the client reads).
        nfs_argop4::OP_READ_PLUS(a) => (Class::Read, a.rpa_count as u64, false),
        // RFC 8881 18.32: the data is written.
        nfs_argop4::OP_WRITE(a) => (Class::Write, a.data.len() as u64, true),
        // Charged by the operation itself once it knows how many bytes
        // it copies (`pass_copy`).
        nfs_argop4::OP_COPY(_) => return None,
        _ if info.metadata => (Class::Metadata, 0, false),
        _ => return None,
    };
    let gate = registry.gate(&export.name)?;
    let cost = match class {
        Class::Metadata => Cost::metadata(),
        _ => io(len, write, &gate),
    };
    let client = c.session.as_ref().map_or(0, |s| s.client.clientid);
    let passed = c
        .runtime
        .block_on(gate.pass(nfs_client(client), cost, class));
    if !passed.waited.is_zero() {
        registry.note_throttled(nfs_client(client));
    }
    Some((gate, passed))
}

/// Wait at the share's gate for a server-side COPY (RFC 7862 15.2) of
/// `len` bytes, known only once the operation has read the source's size
/// (a count of 0 copies to its end): charged as the READ and the WRITE it
/// saves the client, egress and ingress, one operation per started unit
/// of each, as SMB's server-side copy is. The caller reports the outcome
/// with [`ShareGate::done`].
pub fn pass_copy(
    c: &Compound,
    export: &str,
    file: (u64, u64),
    len: u64,
) -> Option<(Arc<ShareGate>, Passed)> {
    let registry = c.state.qos.get()?;
    let gate = registry.gate(export)?;
    let limits = gate.limits();
    let file = (limits.file_iops.is_some() || limits.file_mibps.is_some())
        .then(|| file_key((export, file)));
    let cost = Cost::copy(len, limits.io_unit, file);
    let client = c.session.as_ref().map_or(0, |s| s.client.clientid);
    let passed = c
        .runtime
        .block_on(gate.pass(nfs_client(client), cost, Class::Write));
    if !passed.waited.is_zero() {
        registry.note_throttled(nfs_client(client));
    }
    Some((gate, passed))
}

/// SEQUENCE's sr_target_highest_slotid for a session whose client QoS
/// holds back: fewer slots, so it keeps fewer requests waiting.
pub fn target_slots(c: &Compound, clientid: u64, target: u32) -> u32 {
    match c.state.qos.get() {
        Some(q) if q.client_throttled(nfs_client(clientid)) => {
            target.min(crate::qos::THROTTLED_SLOTS - 1)
        }
        _ => target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_operations_on_a_file_are_charged_as_metadata() {
        for op in [
            OP_OPEN,
            OP_OPEN_DOWNGRADE,
            OP_CLOSE,
            OP_LOCK,
            OP_LOCKT,
            OP_LOCKU,
            OP_GETATTR,
            OP_LOOKUP,
        ] {
            assert!(dispatch::info(op).metadata, "{}", op.name());
        }
        // Carried by every compound, or not work on a file's metadata.
        for op in [OP_PUTFH, OP_SEQUENCE, OP_GETFH, OP_COMMIT, OP_DELEGRETURN] {
            assert!(!dispatch::info(op).metadata, "{}", op.name());
        }
    }
}
