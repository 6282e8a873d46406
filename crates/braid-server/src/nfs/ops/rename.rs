//! OP_RENAME (RFC 8881 18.26): the saved filehandle is the source
//! directory, the current one the target directory; POSIX rename(2) rules
//! decide what may replace what.

use braid_nfs_proto::nfs4::*;

use crate::nfs::attrs;
use crate::nfs::compound::Compound;
use crate::nfs::errors::Status;
use crate::nfs::fh::{check_component, require_dir, Fh};

pub fn run(c: &mut Compound, a: &RENAME4args) -> RENAME4res {
    match rename(c, a) {
        Ok(ok) => RENAME4res::NFS4_OK(ok),
        Err(e) => RENAME4res::Default(e),
    }
}

fn rename(c: &mut Compound, a: &RENAME4args) -> Result<RENAME4resok, nfsstat4> {
    let saved = c.saved_fh()?.clone();
    let current = c.current_fh()?.clone();
    let (export, from_dir, to_dir) = match (&saved, &current) {
        (Fh::Pseudo, Fh::Pseudo) => return Err(NFS4ERR_ROFS),
        (
            Fh::Object {
                export: from_export,
                obj: from,
            },
            Fh::Object {
                export: to_export,
                obj: to,
            },
        ) => {
            require_dir(from)?;
            require_dir(to)?;
            // RFC 8881 18.26.3: both directories in one file system.
            if from_export.id != to_export.id {
                return Err(NFS4ERR_XDEV);
            }
            (to_export.clone(), from.clone(), to.clone())
        }
        // The pseudo file system is a file system of its own.
        _ => return Err(NFS4ERR_XDEV),
    };
    check_component(&a.oldname)?;
    check_component(&a.newname)?;
    c.require_write(&export)?;
    let cred = c.credentials(&export);
    // The object renamed and the one it replaces: SMB share modes and
    // other clients' delegations are checked on them first.
    let (source, target) = export
        .share
        .rename_checked(&cred, &from_dir, &a.oldname, &to_dir, &a.newname, |key| {
            c.before_unlink(key)
        })
        .map_err(|Status(s)| s)?;
    Ok(RENAME4resok {
        source_cinfo: attrs::cinfo(source),
        target_cinfo: attrs::cinfo(target),
    })
}
