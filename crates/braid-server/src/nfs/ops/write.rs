//! OP_WRITE (RFC 8881 18.32): a positioned write on the open's fd, made
//! stable before the reply when the client asks (DATA_SYNC4: fdatasync,
//! FILE_SYNC4: fsync), with the server's write verifier (it changes at
//! restart, so clients resend what they had not committed).

use std::os::unix::fs::FileExt;

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::errors::{io_status, nfs_status};
use crate::nfs::state::stateids::{check_io_stateid, IoTarget};

pub fn run(c: &mut Compound, a: &WRITE4args) -> WRITE4res {
    match write(c, a) {
        Ok(r) => WRITE4res::NFS4_OK(r),
        Err(e) => WRITE4res::Default(e),
    }
}

fn write(c: &mut Compound, a: &WRITE4args) -> Result<WRITE4resok, nfsstat4> {
    let (export, obj) = c.current_object(NFS4ERR_ISDIR)?;
    match obj.kind() {
        braid_fs::posix::ObjectKind::File => {}
        braid_fs::posix::ObjectKind::Directory => return Err(NFS4ERR_ISDIR),
        braid_fs::posix::ObjectKind::Symlink => return Err(NFS4ERR_SYMLINK),
        _ => return Err(NFS4ERR_INVAL),
    }
    // RFC 8881 18.32.3: a range past 2^64 - 1 is NFS4ERR_INVAL; past what
    // the file system allows, NFS4ERR_FBIG.
    let end = a
        .offset
        .checked_add(a.data.len() as u64)
        .ok_or(NFS4ERR_INVAL)?;
    if end > i64::MAX as u64 {
        return Err(NFS4ERR_FBIG);
    }
    if a.stable != UNSTABLE4 && a.stable != DATA_SYNC4 && a.stable != FILE_SYNC4 {
        return Err(NFS4ERR_INVAL);
    }
    c.require_write(&export)?;
    let file = match check_io_stateid(c, &obj, &a.stateid, true)? {
        IoTarget::File(f) => f,
        IoTarget::OpenAsCaller => {
            let cred = c.credentials(&export);
            export
                .share
                .open_file(&cred, &obj, false, true, false)
                .map_err(|e| nfs_status(&e))?
        }
    };
    file.write_all_at(&a.data, a.offset)
        .map_err(|e| io_status(&e))?;
    // Issue 42: SMB clients caching the file must read it again.
    if let Some(grants) = c.state.grants.get() {
        let file = braid_fs::caching::CachedFile {
            share: &export.name,
            file_id: obj.fileid(),
        };
        // The breaks start now; a write does not wait for them.
        drop(grants.break_for("nfs", file, braid_fs::caching::Change::Write));
    }
    match a.stable {
        DATA_SYNC4 => file.sync_data().map_err(|e| io_status(&e))?,
        FILE_SYNC4 => file.sync_all().map_err(|e| io_status(&e))?,
        _ => {}
    }
    Ok(WRITE4resok {
        count: a.data.len() as u32,
        committed: a.stable,
        writeverf: c.state.boot_verifier,
    })
}
