//! OP_DEALLOCATE (RFC 7862 15.4): punch a hole in a range of a file; reads
//! of it then return zeros and the size does not change (fallocate(2)
//! with FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, as knfsd does).

use braid_nfs_proto::nfs4::*;

use super::data_range::{file_in_range, notify_write, Range};
use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &DEALLOCATE4args) -> DEALLOCATE4res {
    let status = match deallocate(c, a) {
        Ok(()) => NFS4_OK,
        Err(e) => e,
    };
    DEALLOCATE4res { dr_status: status }
}

fn deallocate(c: &mut Compound, a: &DEALLOCATE4args) -> Result<(), nfsstat4> {
    let range = Range::new(a.da_offset, a.da_length)?;
    let (export, obj, file) = file_in_range(c, &a.da_stateid, true)?;
    range.fallocate(
        &file,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
    )?;
    notify_write(c, &export, &obj);
    Ok(())
}
