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
// RFC 8276 8.3 (not in RFC 7863's XDR the codec is generated from).
const ACCESS4_XAREAD: u32 = 0x0000_0040;
const ACCESS4_XAWRITE: u32 = 0x0000_0080;
const ACCESS4_XALIST: u32 = 0x0000_0100;
const WRITES: u32 = ACCESS4_MODIFY | ACCESS4_EXTEND | ACCESS4_DELETE | ACCESS4_XAWRITE;
/// RFC 8276 8.3: NFSv4.2's bits for user xattrs, answered in 4.2 compounds
/// (the Linux client reads or writes xattrs only when they are granted).
const XATTR_BITS: u32 = ACCESS4_XAREAD | ACCESS4_XAWRITE | ACCESS4_XALIST;

pub fn run(c: &mut Compound, a: &ACCESS4args) -> ACCESS4res {
    match access(c, a.access) {
        Ok(ok) => ACCESS4res::NFS4_OK(ok),
        Err(e) => ACCESS4res::Default(e),
    }
}

fn access(c: &mut Compound, requested: u32) -> Result<ACCESS4resok, nfsstat4> {
    // RFC 8881 18.1.3: bits the server does not know (RFC 8276's xattr
    // bits in 4.1) are left out of `supported` rather than refused.
    let known = if c.minorversion >= 2 {
        ALL | XATTR_BITS
    } else {
        ALL
    };
    let asked = requested & known;
    match c.current_fh()?.clone() {
        // The pseudo-root may be read and searched, never changed.
        Fh::Pseudo => Ok(ACCESS4resok {
            supported: asked,
            access: asked & (ACCESS4_READ | ACCESS4_LOOKUP | ACCESS4_EXECUTE | ACCESS4_XALIST),
        }),
        Fh::Object { export, obj } => {
            // RFC 8881 18.1.3: `supported` holds what applies to the type
            // (LOOKUP and DELETE only to directories, EXECUTE only to the rest).
            let applies = if obj.kind() == ObjectKind::Directory {
                (ALL | XATTR_BITS) & !ACCESS4_EXECUTE
            } else {
                (ALL | XATTR_BITS) & !(ACCESS4_LOOKUP | ACCESS4_DELETE)
            };
            let cred = c.credentials(&export);
            // The xattr bits follow the mode bits as Linux's user xattrs
            // do: reading and listing need read permission, writing needs
            // write permission.
            let mut posix_asked = asked & applies & ALL;
            if asked & (ACCESS4_XAREAD | ACCESS4_XALIST) != 0 {
                posix_asked |= ACCESS4_READ;
            }
            if asked & ACCESS4_XAWRITE != 0 {
                posix_asked |= ACCESS4_MODIFY;
            }
            let posix = export
                .share
                .access(&cred, &obj, posix_asked)
                .map_err(|e| nfs_status(&e))?;
            let mut granted = posix & asked;
            if posix & ACCESS4_READ != 0 {
                granted |= asked & (ACCESS4_XAREAD | ACCESS4_XALIST);
            }
            if posix & ACCESS4_MODIFY != 0 {
                granted |= asked & ACCESS4_XAWRITE;
            }
            granted &= applies;
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
