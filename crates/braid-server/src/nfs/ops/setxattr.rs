//! OP_SETXATTR (RFC 8276 8.4.2): create or replace one user extended
//! attribute of the current object.

use braid_fs::posix::XattrSet;
use braid_nfs_proto::nfs4::*;

use super::xattr_common::change_xattrs;
use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &SETXATTR4args) -> SETXATTR4res {
    match setxattr(c, a) {
        Ok(ci) => SETXATTR4res::NFS4_OK(ci),
        Err(e) => SETXATTR4res::Default(e),
    }
}

fn setxattr(c: &mut Compound, a: &SETXATTR4args) -> Result<change_info4, nfsstat4> {
    let how = match a.sxa_option {
        SETXATTR4_EITHER => XattrSet::Either,
        SETXATTR4_CREATE => XattrSet::Create,
        SETXATTR4_REPLACE => XattrSet::Replace,
        _ => return Err(NFS4ERR_INVAL),
    };
    change_xattrs(c, |export, cred, obj| {
        export
            .share
            .set_user_xattr(cred, obj, &a.sxa_key, &a.sxa_value, how)
    })
}
