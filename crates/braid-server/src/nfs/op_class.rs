//! NFSv4.1 operations as protocol-neutral operation classes
//! (`op_metrics.rs`, the advisor), and the hook the COMPOUND loop calls
//! after each operation. The mapping (RFC 8881 18):
//!
//! | operation | class |
//! |---|---|
//! | OPEN with OPEN4_CREATE | `create` (the file may have existed: NFS does not say) |
//! | OPEN otherwise, OPEN_DOWNGRADE | `open` |
//! | CREATE, LINK | `create` |
//! | CLOSE | `close` |
//! | REMOVE | `delete` |
//! | RENAME | `rename` |
//! | GETATTR, SETATTR, ACCESS, LOOKUP, LOOKUPP, VERIFY, NVERIFY, READLINK, SECINFO, SECINFO_NO_NAME | `stat` |
//! | READDIR | `list` |
//! | READ, READ_PLUS | `read` |
//! | WRITE | `write` |
//! | LOCK, LOCKT, LOCKU | `lock` |
//! | SEQUENCE, PUTFH, PUTROOTFH, PUTPUBFH, GETFH, SAVEFH, RESTOREFH | not counted (they carry the compound, not work) |
//! | everything else (session and client management, COMMIT, DELEGRETURN, …) | `other` |

use std::sync::Arc;

use braid_advisor::OpClass;
use braid_nfs_proto::nfs4::*;

use super::fh::Fh;
use crate::op_metrics::{OpMetrics, OpRecord, Outcome, Protocol};
use crate::workload::{FileRef, InFlight, WorkloadTable};

/// The server's metrics registries, given to the NFS state at start.
pub struct NfsMetrics {
    pub ops: Arc<OpMetrics>,
    pub workloads: Arc<WorkloadTable>,
}

/// The class of an operation; None for those not counted.
pub fn class_of(op: &nfs_argop4) -> Option<OpClass> {
    Some(match op {
        nfs_argop4::OP_SEQUENCE(_)
        | nfs_argop4::OP_PUTFH(_)
        | nfs_argop4::OP_PUTROOTFH
        | nfs_argop4::OP_PUTPUBFH
        | nfs_argop4::OP_GETFH
        | nfs_argop4::OP_SAVEFH
        | nfs_argop4::OP_RESTOREFH => return None,
        nfs_argop4::OP_OPEN(a) => match a.openhow {
            openflag4::OPEN4_CREATE(_) => OpClass::Create,
            _ => OpClass::Open,
        },
        nfs_argop4::OP_OPEN_DOWNGRADE(_) => OpClass::Open,
        nfs_argop4::OP_CREATE(_) | nfs_argop4::OP_LINK(_) => OpClass::Create,
        nfs_argop4::OP_CLOSE(_) => OpClass::Close,
        nfs_argop4::OP_REMOVE(_) => OpClass::Delete,
        nfs_argop4::OP_RENAME(_) => OpClass::Rename,
        nfs_argop4::OP_GETATTR(_)
        | nfs_argop4::OP_SETATTR(_)
        | nfs_argop4::OP_ACCESS(_)
        | nfs_argop4::OP_LOOKUP(_)
        | nfs_argop4::OP_LOOKUPP
        | nfs_argop4::OP_VERIFY(_)
        | nfs_argop4::OP_NVERIFY(_)
        | nfs_argop4::OP_READLINK
        | nfs_argop4::OP_SECINFO(_)
        | nfs_argop4::OP_SECINFO_NO_NAME(_) => OpClass::Stat,
        nfs_argop4::OP_READDIR(_) => OpClass::List,
        nfs_argop4::OP_READ(_) | nfs_argop4::OP_READ_PLUS(_) => OpClass::Read,
        nfs_argop4::OP_WRITE(_) => OpClass::Write,
        nfs_argop4::OP_LOCK(_) | nfs_argop4::OP_LOCKT(_) | nfs_argop4::OP_LOCKU(_) => OpClass::Lock,
        _ => OpClass::Other,
    })
}

/// The file's (device, inode), folded into one number (no hashing of the
/// handle's bytes on every operation).
fn file_key(fh: &Fh) -> Option<u64> {
    match fh {
        Fh::Pseudo => None,
        Fh::Object { obj, .. } => {
            let (dev, ino) = obj.key();
            Some(dev.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ino)
        }
    }
}

/// The share (export) an operation worked in: that of the current
/// filehandle after it ran (before, for those that drop it).
pub fn share_of(fh: Option<&Fh>) -> Option<&str> {
    match fh {
        Some(Fh::Object { export, .. }) => Some(export.name.as_str()),
        _ => None,
    }
}

/// Record one finished operation. `current` is the current filehandle
/// after the operation ran.
pub fn record(
    metrics: &NfsMetrics,
    flight: Option<&InFlight>,
    op: &nfs_argop4,
    res: &nfs_resop4,
    status: nfsstat4,
    current: Option<&Fh>,
    timing: crate::op_metrics::OpTiming,
) {
    let Some(class) = class_of(op) else {
        return;
    };
    let ok = status == NFS4_OK;
    let mut read = None;
    let data_bytes = match (op, res) {
        (nfs_argop4::OP_READ(a), nfs_resop4::OP_READ(r)) => {
            read = Some((a.offset, u64::from(a.count)));
            match r {
                READ4res::NFS4_OK(ok) => ok.data.len() as u64,
                _ => 0,
            }
        }
        (nfs_argop4::OP_READ_PLUS(a), nfs_resop4::OP_READ_PLUS(r)) => {
            read = Some((a.rpa_offset, u64::from(a.rpa_count)));
            match r {
                READ_PLUS4res::NFS4_OK(ok) => ok
                    .rpr_contents
                    .iter()
                    .map(|c| match c {
                        read_plus_content::NFS4_CONTENT_DATA(d) => d.d_data.len() as u64,
                        read_plus_content::NFS4_CONTENT_HOLE(h) => h.di_length,
                        read_plus_content::Default(_) => 0,
                    })
                    .sum(),
                _ => 0,
            }
        }
        (nfs_argop4::OP_WRITE(a), _) if ok => a.data.len() as u64,
        _ => 0,
    };
    let share = share_of(current);
    let record = OpRecord {
        protocol: Protocol::Nfs,
        share,
        class,
        result: if ok { Outcome::Success } else { Outcome::Error },
        latency: timing.latency,
        throttled: timing.throttled,
        data_bytes,
    };
    metrics.ops.record(&record);
    let Some(flight) = flight else {
        return;
    };
    let key = current.and_then(file_key);
    if let (true, Some(key), nfs_argop4::OP_OPEN(a)) = (ok, key, op) {
        if let open_claim4::CLAIM_NULL(name) = &a.claim {
            flight.name_file(key, || {
                format!(
                    "{}/{}",
                    share.unwrap_or_default(),
                    String::from_utf8_lossy(name)
                )
            });
        }
    }
    // Only operations on a file count toward its top-files entry: a
    // LOOKUP or GETATTR of a directory is not the directory's workload.
    let on_file = matches!(
        class,
        OpClass::Read
            | OpClass::Write
            | OpClass::Lock
            | OpClass::Close
            | OpClass::Open
            | OpClass::Create
    );
    flight.finish(
        &record,
        key.filter(|_| on_file).map(|key| FileRef { key, read }),
    );
    if class == OpClass::Close {
        if let Some(key) = key {
            flight.forget_file(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_of_operations() {
        assert_eq!(class_of(&nfs_argop4::OP_PUTROOTFH), None);
        assert_eq!(class_of(&nfs_argop4::OP_GETFH), None);
        assert_eq!(class_of(&nfs_argop4::OP_LOOKUPP), Some(OpClass::Stat));
        assert_eq!(class_of(&nfs_argop4::OP_READLINK), Some(OpClass::Stat));
        assert_eq!(class_of(&nfs_argop4::OP_RESTOREFH), None);
        assert_eq!(
            class_of(&nfs_argop4::OP_REMOVE(REMOVE4args {
                target: b"x".to_vec()
            })),
            Some(OpClass::Delete)
        );
        assert_eq!(
            class_of(&nfs_argop4::OP_READ(READ4args {
                stateid: stateid4 {
                    seqid: 0,
                    other: [0; 12]
                },
                offset: 0,
                count: 4096
            })),
            Some(OpClass::Read)
        );
        assert_eq!(class_of(&nfs_argop4::OP_ILLEGAL), Some(OpClass::Other));
    }
}
