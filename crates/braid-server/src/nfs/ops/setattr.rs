//! OP_SETATTR (RFC 8881 18.30): mode, owner, group, size and times.

use braid_fs::posix::ObjectKind;
use braid_nfs_proto::nfs4::*;

use crate::nfs::attrs;
use crate::nfs::compound::Compound;
use crate::nfs::errors::{io_status, nfs_status};
use crate::nfs::state::stateids::{check_io_stateid, IoTarget};

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
    let mut want = attrs::decode_settable(&a.obj_attributes)?;
    let (export, obj) = c.current_object(NFS4ERR_ROFS)?;
    c.require_write(&export)?;
    c.recall_delegations(obj.key())?;
    if let Some(size) = want.set.size {
        match obj.kind() {
            ObjectKind::File => {}
            ObjectKind::Directory => return Err(NFS4ERR_ISDIR),
            _ => return Err(NFS4ERR_INVAL),
        }
        // RFC 8881 18.30.3: a size change is a write, checked against the
        // stateid as WRITE's is (share reservations, delegations, open mode).
        if let IoTarget::File(file) = check_io_stateid(c, &obj, &a.stateid, true)? {
            // The open allows writing: truncate through it, as knfsd does,
            // so a file created read-only by its opener can still be sized.
            file.file.set_len(size).map_err(|e| io_status(&e))?;
            want.set.size = None;
        }
    }
    let cred = c.credentials(&export);
    export
        .share
        .setattr(&cred, &obj, &want.set)
        .map_err(|e| nfs_status(&e))?;
    // Issue 42: a new size is a change of data, as a WRITE is: SMB clients
    // caching the file must read it again.
    if want.mask.contains(FATTR4_SIZE) {
        if let Some(grants) = c.state.grants.get() {
            let file = braid_fs::caching::CachedFile {
                share: &export.name,
                file_id: obj.fileid(),
            };
            // The breaks start now; a write does not wait for them.
            drop(grants.break_for("nfs", file, braid_fs::caching::Change::Write));
        }
    }
    Ok(want.mask.into())
}
