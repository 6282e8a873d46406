//! OP_LINK (RFC 8881 18.9): a new name, in the current directory, for the
//! object of the saved filehandle.

use braid_nfs_proto::nfs4::*;

use crate::nfs::attrs;
use crate::nfs::compound::Compound;
use crate::nfs::errors::nfs_status;
use crate::nfs::fh::{check_component, require_dir, Fh};

pub fn run(c: &mut Compound, a: &LINK4args) -> LINK4res {
    match link(c, a) {
        Ok(cinfo) => LINK4res::NFS4_OK(LINK4resok { cinfo }),
        Err(e) => LINK4res::Default(e),
    }
}

fn link(c: &mut Compound, a: &LINK4args) -> Result<change_info4, nfsstat4> {
    let saved = c.saved_fh()?.clone();
    let current = c.current_fh()?.clone();
    let (export, obj, dir) = match (&saved, &current) {
        (
            Fh::Object { export: se, obj },
            Fh::Object {
                export: de,
                obj: dir,
            },
        ) => {
            require_dir(dir)?;
            // RFC 8881 18.9.3: a directory cannot get another name.
            if obj.kind() == braid_fs::posix::ObjectKind::Directory {
                return Err(NFS4ERR_ISDIR);
            }
            if se.id != de.id {
                return Err(NFS4ERR_XDEV);
            }
            (de.clone(), obj.clone(), dir.clone())
        }
        (Fh::Pseudo, Fh::Pseudo) => return Err(NFS4ERR_ISDIR),
        (_, Fh::Pseudo) => return Err(NFS4ERR_XDEV),
        (Fh::Pseudo, _) => return Err(NFS4ERR_ISDIR),
    };
    check_component(&a.newname)?;
    c.require_write(&export)?;
    // Its link count changes.
    c.recall_delegations(obj.key())?;
    let cred = c.credentials(&export);
    let change = export
        .share
        .link(&cred, &obj, &dir, &a.newname)
        .map_err(|e| nfs_status(&e))?;
    Ok(attrs::cinfo(change))
}
