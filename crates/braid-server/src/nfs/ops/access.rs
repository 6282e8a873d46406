//! OP_ACCESS (RFC 8881 18.1): which of the asked-for accesses the caller
//! has, by the mode bits (`PosixShare::access`).

use braid_fs::posix::ObjectKind;
use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::errors::nfs_status;
use crate::nfs::export::ExportAccess;
use crate::nfs::fh::Fh;

const ALL: u32 = ACCESS4_READ
    | ACCESS4_LOOKUP
    | ACCESS4_MODIFY
    | ACCESS4_EXTEND
    | ACCESS4_DELETE
    | ACCESS4_EXECUTE;
const WRITES: u32 = ACCESS4_MODIFY | ACCESS4_EXTEND | ACCESS4_DELETE;

pub fn run(c: &mut Compound, a: &ACCESS4args) -> ACCESS4res {
    match access(c, a.access) {
        Ok(ok) => ACCESS4res::NFS4_OK(ok),
        Err(e) => ACCESS4res::Default(e),
    }
}

fn access(c: &mut Compound, requested: u32) -> Result<ACCESS4resok, nfsstat4> {
    // RFC 8881 18.1.3: bits the server does not know (RFC 8276's xattr
    // bits, say) are left out of `supported` rather than refused.
    let asked = requested & ALL;
    match c.current_fh()?.clone() {
        // The pseudo-root may be read and searched, never changed.
        Fh::Pseudo => Ok(ACCESS4resok {
            supported: asked,
            access: asked & (ACCESS4_READ | ACCESS4_LOOKUP | ACCESS4_EXECUTE),
        }),
        Fh::Object { export, obj } => {
            // RFC 8881 18.1.3: `supported` holds what applies to the type
            // (LOOKUP and DELETE only to directories, EXECUTE only to the rest).
            let applies = if obj.kind() == ObjectKind::Directory {
                ALL & !ACCESS4_EXECUTE
            } else {
                ALL & !(ACCESS4_LOOKUP | ACCESS4_DELETE)
            };
            let cred = c.credentials(&export);
            let mut granted = export
                .share
                .access(&cred, &obj, asked & applies)
                .map_err(|e| nfs_status(&e))?;
            if c.export_access(&export) != ExportAccess::ReadWrite {
                granted &= !WRITES;
            }
            Ok(ACCESS4resok {
                supported: asked & applies,
                access: granted,
            })
        }
    }
}
