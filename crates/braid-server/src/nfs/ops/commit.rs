//! OP_COMMIT (RFC 8881 18.3): what was written UNSTABLE4 goes to stable
//! storage (fsync of the file; the range is advisory), and the reply
//! carries the write verifier so a client sees whether the server
//! restarted since its writes.

use braid_fs::posix::ObjectKind;
use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::errors::{io_status, nfs_status};

pub fn run(c: &mut Compound, a: &COMMIT4args) -> COMMIT4res {
    match commit(c, a) {
        Ok(r) => COMMIT4res::NFS4_OK(r),
        Err(e) => COMMIT4res::Default(e),
    }
}

fn commit(c: &mut Compound, a: &COMMIT4args) -> Result<COMMIT4resok, nfsstat4> {
    let (export, obj) = c.current_object(NFS4ERR_ISDIR)?;
    match obj.kind() {
        ObjectKind::File => {}
        ObjectKind::Directory => return Err(NFS4ERR_ISDIR),
        ObjectKind::Symlink => return Err(NFS4ERR_SYMLINK),
        _ => return Err(NFS4ERR_INVAL),
    }
    // RFC 8881 18.3.3: offset + count past 2^64 - 1 is NFS4ERR_INVAL.
    if a.offset.checked_add(a.count as u64).is_none() {
        return Err(NFS4ERR_INVAL);
    }
    // Any open fd of the file syncs the inode; the client's, if it has
    // one, else one opened as the server (COMMIT needs no stateid and
    // makes no data visible that is not already there).
    let file = c
        .state
        .stateids
        .any_fd(obj.key())
        .map(Ok)
        .unwrap_or_else(|| {
            export
                .share
                .open_file(
                    &braid_fs::posix::Credentials::root(),
                    &obj,
                    true,
                    false,
                    false,
                )
                .map_err(|e| nfs_status(&e))
        })?;
    file.sync_all().map_err(|e| io_status(&e))?;
    Ok(COMMIT4resok {
        writeverf: c.state.boot_verifier,
    })
}
