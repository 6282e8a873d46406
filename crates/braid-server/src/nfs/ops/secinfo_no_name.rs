//! OP_SECINFO_NO_NAME (RFC 8881 18.45): the security flavours of the
//! current filehandle's object, or of its parent.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::fh::Fh;
use crate::nfs::ops::secinfo::{flavors_of, pseudo_flavors};

pub fn run(c: &mut Compound, a: &SECINFO_NO_NAME4args) -> SECINFO_NO_NAME4res {
    let res = match secinfo_no_name(c, *a) {
        Ok(flavors) => SECINFO4res::NFS4_OK(flavors),
        Err(e) => SECINFO4res::Default(e),
    };
    // RFC 8881 2.6.3.1.1.8, 18.45.3: it consumes the current filehandle.
    if matches!(res, SECINFO4res::NFS4_OK(_)) {
        c.current = None;
        c.current_stateid = None;
    }
    res
}

fn secinfo_no_name(c: &mut Compound, style: secinfo_style4) -> Result<SECINFO4resok, nfsstat4> {
    let fh = c.current_fh()?.clone();
    match (style, fh) {
        (SECINFO_STYLE4_CURRENT_FH, Fh::Pseudo) => Ok(pseudo_flavors(c)),
        (SECINFO_STYLE4_CURRENT_FH, Fh::Object { export, .. }) => Ok(flavors_of(&export)),
        // RFC 8881 18.45.3: the pseudo-root has no parent.
        (SECINFO_STYLE4_PARENT, Fh::Pseudo) => Err(NFS4ERR_NOENT),
        (SECINFO_STYLE4_PARENT, Fh::Object { export, obj }) => {
            // An export's root: its parent is the pseudo-root.
            if obj.is_root() {
                Ok(pseudo_flavors(c))
            } else {
                // A non-directory's parent is not known from its handle;
                // it is in the same export, so the same flavours.
                Ok(flavors_of(&export))
            }
        }
        _ => Err(NFS4ERR_INVAL),
    }
}
