//! OP_REMOVEXATTR (RFC 8276 8.4.4): remove one user extended attribute of
//! the current object.

use braid_nfs_proto::nfs4::*;

use super::xattr_common::change_xattrs;
use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &REMOVEXATTR4args) -> REMOVEXATTR4res {
    match removexattr(c, a) {
        Ok(ci) => REMOVEXATTR4res::NFS4_OK(ci),
        Err(e) => REMOVEXATTR4res::Default(e),
    }
}

fn removexattr(c: &mut Compound, a: &REMOVEXATTR4args) -> Result<change_info4, nfsstat4> {
    change_xattrs(c, |export, cred, obj| {
        export.share.remove_user_xattr(cred, obj, &a.rxa_name)
    })
}
