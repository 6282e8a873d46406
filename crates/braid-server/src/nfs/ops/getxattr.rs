//! OP_GETXATTR (RFC 8276 8.4.1): the value of one user extended attribute
//! of the current object.

use braid_nfs_proto::nfs4::*;

use super::xattr_common::xattr_status;
use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &GETXATTR4args) -> GETXATTR4res {
    match getxattr(c, a) {
        Ok(v) => GETXATTR4res::NFS4_OK(v),
        Err(e) => GETXATTR4res::Default(e),
    }
}

fn getxattr(c: &mut Compound, a: &GETXATTR4args) -> Result<Vec<u8>, nfsstat4> {
    let (export, obj) = c.current_object(NFS4ERR_NOXATTR)?;
    let cred = c.credentials(&export);
    let value = export
        .share
        .get_user_xattr(&cred, &obj, &a.gxa_name)
        .map_err(|e| xattr_status(&e))?;
    // RFC 8276 8.4.1.4: a value the reply cannot hold (status, length
    // and padding included) is NFS4ERR_XATTR2BIG.
    if value.len().saturating_add(12) > c.reply_room {
        return Err(NFS4ERR_XATTR2BIG);
    }
    Ok(value)
}
