//! OP_CLONE (RFC 7862 15.13): make a range of the current filehandle's
//! file share the saved filehandle's blocks (ioctl FICLONERANGE, a
//! reflink: no data is read or written, on the file systems that share
//! extents: btrfs, XFS with reflink, OCFS2). Elsewhere it is
//! NFS4ERR_NOTSUPP and the client copies instead (Linux falls back to
//! COPY, or to reading and writing).

use braid_nfs_proto::nfs4::*;

use super::data_range::{notify_write, source_and_destination};
use crate::nfs::compound::Compound;
use crate::nfs::errors::io_status;
use crate::nfs::state::stateids::io_file;

pub fn run(c: &mut Compound, a: &CLONE4args) -> CLONE4res {
    CLONE4res {
        cl_status: match clone(c, a) {
            Ok(()) => NFS4_OK,
            Err(e) => e,
        },
    }
}

fn clone(c: &mut Compound, a: &CLONE4args) -> Result<(), nfsstat4> {
    // RFC 7862 15.13.3: both files on one file system; an export is one.
    let ((src_export, src), (dst_export, dst)) = source_and_destination(c)?;
    let end = |off: u64| {
        off.checked_add(a.cl_count)
            .filter(|e| *e <= i64::MAX as u64)
    };
    if end(a.cl_src_offset).is_none() || end(a.cl_dst_offset).is_none() {
        return Err(NFS4ERR_INVAL);
    }
    let from = io_file(c, &src_export, &src, &a.cl_src_stateid, false)?;
    let to = io_file(c, &dst_export, &dst, &a.cl_dst_stateid, true)?;
    let size = from.metadata().map_err(|e| io_status(&e))?.len();
    // RFC 7862 15.13.3: the source range lies inside the source file (a
    // count of 0 means to its end).
    if a.cl_src_offset > size || a.cl_src_offset + a.cl_count > size {
        return Err(NFS4ERR_INVAL);
    }
    if src.key() == dst.key() {
        // Overlapping ranges of one file (RFC 7862 15.13.3; the ioctl
        // refuses them too).
        let len = if a.cl_count == 0 {
            size - a.cl_src_offset
        } else {
            a.cl_count
        };
        let (s, d) = (a.cl_src_offset, a.cl_dst_offset);
        if s < d.saturating_add(len) && d < s.saturating_add(len) {
            return Err(NFS4ERR_INVAL);
        }
    }
    // 0: to the end of the source, as cl_count 0 means.
    let cloned =
        braid_fs::posix::clone_range(&from, a.cl_src_offset, a.cl_count, &to, a.cl_dst_offset);
    if let Err(e) = cloned {
        return Err(match e.raw_os_error() {
            // The file system shares no extents (ext4, tmpfs).
            Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY) => NFS4ERR_NOTSUPP,
            Some(libc::EXDEV) => NFS4ERR_XDEV,
            // Offsets or a length not aligned to the file system's block.
            Some(libc::EINVAL) => NFS4ERR_INVAL,
            _ => io_status(&e),
        });
    }
    notify_write(c, &dst_export, &dst);
    Ok(())
}
