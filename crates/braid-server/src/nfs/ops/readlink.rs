//! OP_READLINK (RFC 8881 18.24): a symbolic link's target, as stored.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::errors::nfs_status;

pub fn run(c: &mut Compound) -> READLINK4res {
    match readlink(c) {
        Ok(link) => READLINK4res::NFS4_OK(READLINK4resok { link }),
        Err(e) => READLINK4res::Default(e),
    }
}

fn readlink(c: &mut Compound) -> Result<Vec<u8>, nfsstat4> {
    // RFC 8881 18.24.3: anything but a symbolic link is NFS4ERR_INVAL
    // (the pseudo-root is a directory).
    let (export, obj) = c.current_object(NFS4ERR_INVAL)?;
    if obj.kind() != braid_fs::posix::ObjectKind::Symlink {
        return Err(NFS4ERR_INVAL);
    }
    export.share.readlink(&obj).map_err(|e| nfs_status(&e))
}
