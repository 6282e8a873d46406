//! OP_REMOVEXATTR (RFC 8276 8.4.4): remove one user extended attribute of
//! the current object.

use braid_nfs_proto::nfs4::*;

use super::xattr_common::{change_of, xattr_status};
use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &REMOVEXATTR4args) -> REMOVEXATTR4res {
    match removexattr(c, a) {
        Ok(ci) => REMOVEXATTR4res::NFS4_OK(ci),
        Err(e) => REMOVEXATTR4res::Default(e),
    }
}

fn removexattr(c: &mut Compound, a: &REMOVEXATTR4args) -> Result<change_info4, nfsstat4> {
    let (export, obj) = c.current_object(NFS4ERR_ROFS)?;
    c.require_write(&export)?;
    c.recall_delegations(obj.key())?;
    let cred = c.credentials(&export);
    let before = change_of(&export, &obj);
    export
        .share
        .remove_user_xattr(&cred, &obj, &a.rxa_name)
        .map_err(|e| xattr_status(&e))?;
    Ok(change_info4 {
        atomic: false,
        before,
        after: change_of(&export, &obj),
    })
}
