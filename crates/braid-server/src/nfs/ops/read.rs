//! OP_READ (RFC 8881 18.22): a positioned read on the open's fd (kept
//! since OPEN), into one buffer that becomes the reply's payload as is.

use braid_nfs_proto::nfs4::*;
use bytes::Bytes;

use crate::nfs::compound::Compound;
use crate::nfs::errors::{io_status, nfs_status};
use crate::nfs::state::stateids::{check_io_stateid, IoTarget};

pub fn run(c: &mut Compound, a: &READ4args) -> READ4res {
    match read(c, a) {
        Ok(r) => READ4res::NFS4_OK(r),
        Err(e) => READ4res::Default(e),
    }
}

fn read(c: &mut Compound, a: &READ4args) -> Result<READ4resok, nfsstat4> {
    let (export, obj) = c.current_object(NFS4ERR_ISDIR)?;
    // RFC 8881 18.22.3: READ is of regular files.
    match obj.kind() {
        braid_fs::posix::ObjectKind::File => {}
        braid_fs::posix::ObjectKind::Directory => return Err(NFS4ERR_ISDIR),
        braid_fs::posix::ObjectKind::Symlink => return Err(NFS4ERR_SYMLINK),
        _ => return Err(NFS4ERR_INVAL),
    }
    let file = match check_io_stateid(c, &obj, &a.stateid, false)? {
        IoTarget::File(io) => io.file,
        IoTarget::OpenAsCaller => {
            let cred = c.credentials(&export);
            export
                .share
                .open_file(&cred, &obj, true, false, false)
                .map_err(|e| nfs_status(&e))?
        }
    };
    // The reply must fit the session's response size; never more than the
    // server's I/O size.
    let count = a.count.min(c.state.limits.max_io) as usize;
    if count == 0 {
        return Ok(READ4resok {
            eof: false,
            data: Bytes::new(),
        });
    }
    // Offsets beyond what a file can have read nothing (pread with an
    // offset over i64::MAX is EINVAL on Linux).
    if a.offset > i64::MAX as u64 {
        return Ok(READ4resok {
            eof: true,
            data: Bytes::new(),
        });
    }
    // Read into spare capacity: zero-filling 1 MiB first cost as much as
    // a third of the read.
    let mut buf = Vec::with_capacity(count);
    let got = braid_fs::posix::read_into_vec(&file, &mut buf, count, a.offset)
        .map_err(|e| io_status(&e))?;
    // RFC 8881 18.22.4: eof when the read reached the end of the file.
    let eof = if got < count {
        true
    } else {
        let size = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
        a.offset.saturating_add(got as u64) >= size
    };
    Ok(READ4resok {
        eof,
        data: Bytes::from(buf),
    })
}
