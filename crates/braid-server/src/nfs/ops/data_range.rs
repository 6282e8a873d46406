//! What the NFSv4.2 data operations (ALLOCATE, DEALLOCATE, SEEK, COPY)
//! share: the regular file of the current filehandle with the fd its
//! stateid allows, byte ranges checked as RFC 7862 asks, and the news of a
//! change for SMB clients caching the file.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use braid_fs::posix::{Object, ObjectKind};
use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::errors::last_os_status;
use crate::nfs::exports::Export;
use crate::nfs::fh::Fh;
use crate::nfs::state::stateids::io_file;

/// RFC 7862 15.1.3, 15.4.3, 15.11.3: the operations work on regular files;
/// a directory is NFS4ERR_ISDIR, anything else NFS4ERR_WRONG_TYPE.
pub fn require_file(obj: &Object) -> Result<(), nfsstat4> {
    match obj.kind() {
        ObjectKind::File => Ok(()),
        ObjectKind::Directory => Err(NFS4ERR_ISDIR),
        _ => Err(NFS4ERR_WRONG_TYPE),
    }
}

/// The current file and the fd its stateid allows (writing when `write`).
pub fn file_in_range(
    c: &mut Compound,
    stateid: &stateid4,
    write: bool,
) -> Result<(Arc<Export>, Object, Arc<braid_fs::posix::OpenFile>), nfsstat4> {
    let (export, obj) = c.current_object(NFS4ERR_ISDIR)?;
    require_file(&obj)?;
    if write {
        c.require_write(&export)?;
    }
    let file = io_file(c, &export, &obj, stateid, write)?;
    Ok((export, obj, file))
}

/// A file of an export.
pub type ExportFile = (Arc<Export>, Object);

/// The files of COPY and CLONE (RFC 7862 15.2.3, 15.13.3): the saved
/// filehandle's (the source) and the current one's (the destination),
/// both regular files of one export (else NFS4ERR_XDEV), the
/// destination's export writable by the caller.
pub fn source_and_destination(c: &mut Compound) -> Result<(ExportFile, ExportFile), nfsstat4> {
    let (src_export, src) = match c.saved_fh()? {
        Fh::Object { export, obj } => (export.clone(), obj.clone()),
        Fh::Pseudo => return Err(NFS4ERR_ISDIR),
    };
    let (dst_export, dst) = c.current_object(NFS4ERR_ISDIR)?;
    require_file(&src)?;
    require_file(&dst)?;
    if src_export.id != dst_export.id {
        return Err(NFS4ERR_XDEV);
    }
    c.require_write(&dst_export)?;
    Ok(((src_export, src), (dst_export, dst)))
}

/// A byte range of a file: offset + length within what a file can be
/// (Linux's off_t), else NFS4ERR_INVAL (RFC 7862 15.1.3) or NFS4ERR_FBIG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub offset: u64,
    pub length: u64,
}

impl Range {
    pub fn new(offset: u64, length: u64) -> Result<Range, nfsstat4> {
        let end = offset.checked_add(length).ok_or(NFS4ERR_INVAL)?;
        if length == 0 {
            return Err(NFS4ERR_INVAL);
        }
        if end > i64::MAX as u64 {
            return Err(NFS4ERR_FBIG);
        }
        Ok(Range { offset, length })
    }

    pub fn fallocate(&self, file: &File, mode: i32) -> Result<(), nfsstat4> {
        // SAFETY: a plain syscall on an fd `file` owns; the range was
        // checked to fit off_t.
        let r = unsafe {
            libc::fallocate(
                file.as_raw_fd(),
                mode,
                self.offset as libc::off_t,
                self.length as libc::off_t,
            )
        };
        if r < 0 {
            return Err(last_os_status());
        }
        Ok(())
    }
}

/// Issue 42: SMB clients caching the file must read it again (through
/// braid-fs's caching registry, as WRITE does; the breaks start now and a
/// write does not wait for them).
pub fn notify_write(c: &Compound, export: &Export, obj: &Object) {
    if let Some(grants) = c.state.grants.get() {
        let file = braid_fs::caching::CachedFile {
            share: &export.name,
            file_id: obj.fileid(),
        };
        drop(grants.break_for("nfs", file, braid_fs::caching::Change::Write));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked_as_rfc_7862_asks() {
        assert_eq!(Range::new(0, 0), Err(NFS4ERR_INVAL));
        assert_eq!(Range::new(u64::MAX, 2), Err(NFS4ERR_INVAL));
        assert_eq!(Range::new(i64::MAX as u64, 1), Err(NFS4ERR_FBIG));
        assert_eq!(
            Range::new(4096, 8192),
            Ok(Range {
                offset: 4096,
                length: 8192
            })
        );
    }
}
