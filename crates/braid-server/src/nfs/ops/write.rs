//! OP_WRITE (RFC 8881 18.32): a positioned write on the open's fd, made
//! stable before the reply when the client asks (DATA_SYNC4: fdatasync,
//! FILE_SYNC4: fsync), with the server's write verifier (it changes at
//! restart, so clients resend what they had not committed).
//!
//! A large WRITE whose payload, offset and length are aligned as the file
//! system asks (the connection's reader places large WRITE payloads on a
//! page, `conn.rs`) goes through the open's `O_DIRECT` descriptor, as SMB's
//! do (braid-fs `direct.rs`): no copy into the page cache. Nothing a client
//! sees changes: the kernel writes back and drops cached pages over the
//! range first, so reads (NFS or SMB) see the data, and the data is still
//! UNSTABLE4 until COMMIT's fsync makes the file's metadata (the blocks the
//! write allocated) stable with it.

use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::errors::{io_status, nfs_status};
use crate::nfs::state::stateids::{check_io_stateid, IoFile, IoTarget};

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
    let (io, keeps_direct) = match check_io_stateid(c, &obj, &a.stateid, true)? {
        IoTarget::File(io) => (io, true),
        IoTarget::OpenAsCaller => {
            let cred = c.credentials(&export);
            let file = export
                .share
                .open_file(&cred, &obj, false, true, false)
                .map_err(|e| nfs_status(&e))?;
            (IoFile::new(file, false, true), false)
        }
    };
    let file = &io.file;
    // A descriptor opened for this one request would be opened again
    // O_DIRECT for one write: not worth it.
    let direct = match export.direct_writes && keeps_direct {
        true => io.direct.try_write(file.as_raw_fd(), a.offset, &a.data),
        false => None,
    };
    // Whatever the direct write did not take (none of it, or the rest of a
    // short write) is written through the page cache, which also reports
    // the real error, if any.
    let done = match direct {
        Some(Ok(n)) => n.min(a.data.len()),
        _ => 0,
    };
    if done < a.data.len() {
        file.write_all_at(&a.data[done..], a.offset + done as u64)
            .map_err(|e| io_status(&e))?;
    }
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
