//! OP_SEEK (RFC 7862 15.11): where the next data or hole begins at or
//! after an offset (lseek(2) SEEK_DATA / SEEK_HOLE on the server's file,
//! so a sparse file copied by a client stays sparse).

use std::os::fd::AsRawFd;

use braid_nfs_proto::nfs4::*;

use super::data_range::file_in_range;
use crate::nfs::compound::Compound;
use crate::nfs::errors::last_os_status;

pub fn run(c: &mut Compound, a: &SEEK4args) -> SEEK4res {
    match seek(c, a) {
        Ok(r) => SEEK4res::NFS4_OK(r),
        Err(e) => SEEK4res::Default(e),
    }
}

fn seek(c: &mut Compound, a: &SEEK4args) -> Result<seek_res4, nfsstat4> {
    let whence = match a.sa_what {
        NFS4_CONTENT_DATA => libc::SEEK_DATA,
        NFS4_CONTENT_HOLE => libc::SEEK_HOLE,
        _ => return Err(NFS4ERR_UNION_NOTSUPP),
    };
    let (_, _, file) = file_in_range(c, &a.sa_stateid, false)?;
    // RFC 7862 15.11.3: an offset at or past the end of the file is
    // NFS4ERR_NXIO (lseek's ENXIO), as is data asked for past the last.
    if a.sa_offset > i64::MAX as u64 {
        return Err(NFS4ERR_NXIO);
    }
    // SAFETY: a plain syscall on an fd `file` owns. The fd may be shared
    // with other requests of the open: only the returned position is
    // used, never the fd's own.
    let pos = unsafe { libc::lseek(file.as_raw_fd(), a.sa_offset as libc::off_t, whence) };
    if pos < 0 {
        return Err(last_os_status());
    }
    let size = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
    Ok(seek_res4 {
        // The position is the end of the file (the hole every file ends
        // with): nothing follows it.
        sr_eof: pos as u64 >= size,
        sr_offset: pos as u64,
    })
}
