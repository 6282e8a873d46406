//! OP_REMOVE (RFC 8881 18.25): removes a name from the current directory,
//! a directory only when it is empty.

use braid_nfs_proto::nfs4::*;

use crate::nfs::attrs;
use crate::nfs::compound::Compound;
use crate::nfs::errors::Status;
use crate::nfs::fh::{check_component, require_dir};

pub fn run(c: &mut Compound, a: &REMOVE4args) -> REMOVE4res {
    match remove(c, a) {
        Ok(cinfo) => REMOVE4res::NFS4_OK(REMOVE4resok { cinfo }),
        Err(e) => REMOVE4res::Default(e),
    }
}

fn remove(c: &mut Compound, a: &REMOVE4args) -> Result<change_info4, nfsstat4> {
    let (export, dir) = c.current_object(NFS4ERR_ROFS)?;
    require_dir(&dir)?;
    check_component(&a.target)?;
    c.require_write(&export)?;
    let cred = c.credentials(&export);
    // What the name holds loses a link (or goes): SMB share modes and
    // other clients' delegations are checked on it first.
    let change = export
        .share
        .remove_checked(&cred, &dir, &a.target, |key| c.before_unlink(key))
        .map_err(|Status(s)| s)?;
    Ok(attrs::cinfo(change))
}
