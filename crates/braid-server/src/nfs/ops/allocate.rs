//! OP_ALLOCATE (RFC 7862 15.1): reserve space for a range of a file, as
//! fallocate(2) with no flags does (the size grows to cover the range).

use braid_nfs_proto::nfs4::*;

use super::data_range::{file_in_range, notify_write, Range};
use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &ALLOCATE4args) -> ALLOCATE4res {
    let status = match allocate(c, a) {
        Ok(()) => NFS4_OK,
        Err(e) => e,
    };
    ALLOCATE4res { ar_status: status }
}

fn allocate(c: &mut Compound, a: &ALLOCATE4args) -> Result<(), nfsstat4> {
    let range = Range::new(a.aa_offset, a.aa_length)?;
    let (export, obj, file) = file_in_range(c, &a.aa_stateid, true)?;
    range.fallocate(&file, 0)?;
    notify_write(c, &export, &obj);
    Ok(())
}
