//! What the xattr operations (RFC 8276) share: their errors, and the
//! change_info4 of the object whose attributes changed.

use braid_fs::posix::{Credentials, Object, PosixError, PosixResult};
use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::errors::nfs_status;
use crate::nfs::exports::Export;

/// RFC 8276 8.4: a missing attribute is NFS4ERR_NOXATTR, one too large
/// NFS4ERR_XATTR2BIG, a name too long NFS4ERR_NAMETOOLONG; a file system
/// without user xattrs answers NFS4ERR_NOTSUPP.
pub fn xattr_status(e: &PosixError) -> nfsstat4 {
    match e {
        PosixError::Errno(libc::ENODATA) => NFS4ERR_NOXATTR,
        PosixError::Errno(libc::E2BIG | libc::ENOSPC) => NFS4ERR_XATTR2BIG,
        PosixError::Errno(libc::ERANGE) => NFS4ERR_NAMETOOLONG,
        PosixError::Errno(libc::ENOTSUP) => NFS4ERR_NOTSUPP,
        e => nfs_status(e),
    }
}

/// The object's change attribute, for change_info4's before and after.
fn change_of(export: &Export, obj: &Object) -> u64 {
    export.share.getattr(obj).map(|a| a.change).unwrap_or(0)
}

/// SETXATTR and REMOVEXATTR: `change` made to the current object as the
/// caller, on a writable export, after recalling delegations (a holder
/// caches the object's change attribute), with the object's change_info4.
pub fn change_xattrs(
    c: &mut Compound,
    change: impl FnOnce(&Export, &Credentials, &Object) -> PosixResult<()>,
) -> Result<change_info4, nfsstat4> {
    let (export, obj) = c.current_object(NFS4ERR_ROFS)?;
    c.require_write(&export)?;
    c.recall_delegations(obj.key())?;
    let cred = c.credentials(&export);
    let before = change_of(&export, &obj);
    change(&export, &cred, &obj).map_err(|e| xattr_status(&e))?;
    Ok(change_info4 {
        atomic: false,
        before,
        after: change_of(&export, &obj),
    })
}
