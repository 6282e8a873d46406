//! OP_SETATTR (RFC 8881 18.30): mode, owner, group, size and times.

use braid_nfs_proto::nfs4::*;

use crate::nfs::attrs;
use crate::nfs::compound::Compound;
use crate::nfs::errors::nfs_status;

pub fn run(c: &mut Compound, a: &SETATTR4args) -> SETATTR4res {
    match setattr(c, a) {
        Ok(mask) => SETATTR4res {
            status: NFS4_OK,
            attrsset: mask,
        },
        // RFC 8881 18.30.3: on failure no attribute is reported set.
        Err(status) => SETATTR4res {
            status,
            attrsset: Vec::new(),
        },
    }
}

fn setattr(c: &mut Compound, a: &SETATTR4args) -> Result<bitmap4, nfsstat4> {
    let want = attrs::decode_settable(&a.obj_attributes)?;
    let (export, obj) = c.current_object(NFS4ERR_ROFS)?;
    c.require_write(&export)?;
    if want.set.size.is_some() {
        // RFC 8881 18.30.3: a size change is I/O and needs a stateid that
        // allows writing (or a special one).
        // TODO: crate::nfs::state::stateids::check_io_stateid (engineer T)
        // once it exists; until then every stateid is taken as the
        // anonymous one, and the mode bits decide.
        let _ = &a.stateid;
        match obj.kind() {
            braid_fs::posix::ObjectKind::File => {}
            braid_fs::posix::ObjectKind::Directory => return Err(NFS4ERR_ISDIR),
            _ => return Err(NFS4ERR_INVAL),
        }
    }
    let cred = c.credentials(&export);
    export
        .share
        .setattr(&cred, &obj, &want.set)
        .map_err(|e| nfs_status(&e))?;
    Ok(want.mask.into())
}
