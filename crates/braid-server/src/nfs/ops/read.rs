//! OP_READ (RFC 8881 18.22): a positioned read on the open's fd (kept
//! since OPEN), into one buffer that becomes the reply's payload as is.

use std::sync::Arc;

use braid_fs::posix::{Object, ObjectKind, OpenFile};
use braid_nfs_proto::nfs4::*;
use bytes::Bytes;

use crate::nfs::compound::Compound;
use crate::nfs::errors::{io_status, nfs_status};
use crate::nfs::exports::Export;
use crate::nfs::state::stateids::{check_io_stateid, resolve, IoTarget, Stateid};

pub fn run(c: &mut Compound, a: &READ4args) -> READ4res {
    match read(c, a, Wait::Allowed) {
        Ok(Some(r)) => READ4res::NFS4_OK(r),
        // Not reached: with waiting allowed the read is always done.
        Ok(None) => READ4res::Default(NFS4ERR_SERVERFAULT),
        Err(e) => READ4res::Default(e),
    }
}

/// READ on the reactor, as SMB's cached READ (`smb/ops/read.rs`): data in
/// the page cache is read here; None (nothing done) when the read would
/// wait: data not cached, a special stateid (it may recall a delegation)
/// or a stateid whose open cannot serve it (a file opened for this read).
pub fn run_cached(c: &mut Compound, a: &READ4args) -> Option<READ4res> {
    match read(c, a, Wait::Never) {
        Ok(Some(r)) => Some(READ4res::NFS4_OK(r)),
        Ok(None) => None,
        Err(e) => Some(READ4res::Default(e)),
    }
}

/// RFC 8881 18.22.3 (READ_PLUS: RFC 7862 15.10.3, the same): the object
/// read is a regular file.
pub(super) fn readable(obj: &Object) -> Result<(), nfsstat4> {
    match obj.kind() {
        ObjectKind::File => Ok(()),
        ObjectKind::Directory => Err(NFS4ERR_ISDIR),
        ObjectKind::Symlink => Err(NFS4ERR_SYMLINK),
        _ => Err(NFS4ERR_INVAL),
    }
}

/// The open file a read goes through: the stateid's open, or for a
/// special stateid the file opened as the caller — unless `may_open` is
/// false, then None.
pub(super) fn file_to_read(
    c: &mut Compound,
    export: &Export,
    obj: &Object,
    stateid: &stateid4,
    may_open: bool,
) -> Result<Option<Arc<OpenFile>>, nfsstat4> {
    match check_io_stateid(c, obj, stateid, false)? {
        IoTarget::File(io) => Ok(Some(io.file)),
        IoTarget::OpenAsCaller if !may_open => Ok(None),
        IoTarget::OpenAsCaller => {
            let cred = c.credentials(export);
            let file = export
                .share
                .open_file(&cred, obj, true, false, false)
                .map_err(|e| nfs_status(&e))?;
            Ok(Some(file))
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    Allowed,
    Never,
}

fn read(c: &mut Compound, a: &READ4args, wait: Wait) -> Result<Option<READ4resok>, nfsstat4> {
    let (export, obj) = c.current_object(NFS4ERR_ISDIR)?;
    readable(&obj)?;
    if wait == Wait::Never && matches!(resolve(c, &a.stateid)?, Stateid::Special(_)) {
        return Ok(None);
    }
    let Some(file) = file_to_read(c, &export, &obj, &a.stateid, wait == Wait::Allowed)? else {
        return Ok(None);
    };
    // The reply must fit the session's response size; never more than the
    // server's I/O size.
    let count = a.count.min(c.state.limits.max_io) as usize;
    if count == 0 {
        return Ok(Some(READ4resok {
            eof: false,
            data: Bytes::new(),
        }));
    }
    // Offsets beyond what a file can have read nothing (pread with an
    // offset over i64::MAX is EINVAL on Linux).
    if a.offset > i64::MAX as u64 {
        return Ok(Some(READ4resok {
            eof: true,
            data: Bytes::new(),
        }));
    }
    // Read into spare capacity: zero-filling 1 MiB first cost as much as
    // a third of the read.
    let mut buf = Vec::with_capacity(count);
    let got = match wait {
        Wait::Allowed => braid_fs::posix::read_into_vec(&file, &mut buf, count, a.offset),
        Wait::Never => {
            match braid_fs::posix::read_into_vec_nowait(&file, &mut buf, count, a.offset) {
                Ok(Some(n)) => Ok(n),
                Ok(None) => return Ok(None),
                Err(e) => Err(e),
            }
        }
    }
    .map_err(|e| io_status(&e))?;
    // RFC 8881 18.22.4: eof when the read reached the end of the file.
    let eof = if got < count {
        true
    } else {
        let size = match wait {
            Wait::Allowed => file.metadata().map(|m| m.len()).ok(),
            // The size the kernel holds for the open file: no disk.
            Wait::Never => braid_fs::posix::cached_size(&file),
        };
        a.offset.saturating_add(got as u64) >= size.unwrap_or(u64::MAX)
    };
    Ok(Some(READ4resok {
        eof,
        data: Bytes::from(buf),
    }))
}
