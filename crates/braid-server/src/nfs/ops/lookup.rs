//! OP_LOOKUP (RFC 8881 18.13): one name in the current directory; from the
//! pseudo-root, an export's name enters that export (RFC 8881 7.3).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::errors::nfs_status;
use crate::nfs::export::ExportAccess;
use crate::nfs::fh::{check_component, require_dir, Fh};

pub fn run(c: &mut Compound, a: &LOOKUP4args) -> LOOKUP4res {
    let status = match lookup(c, &a.objname) {
        Ok(()) => NFS4_OK,
        Err(e) => e,
    };
    LOOKUP4res { status }
}

fn lookup(c: &mut Compound, name: &[u8]) -> Result<(), nfsstat4> {
    let fh = match c.current_fh()?.clone() {
        Fh::Pseudo => {
            check_component(name)?;
            // An export this client may not use is not there for it.
            let export = std::str::from_utf8(name)
                .ok()
                .and_then(|n| c.state.exports.by_name(n))
                .filter(|e| c.export_access(e) != ExportAccess::Denied)
                .ok_or(NFS4ERR_NOENT)?;
            let obj = export.share.root();
            Fh::Object { export, obj }
        }
        Fh::Object { export, obj } => {
            // RFC 8881 18.13.3: the type of the current filehandle is
            // checked before the name.
            require_dir(&obj)?;
            check_component(name)?;
            let cred = c.credentials(&export);
            let found = export
                .share
                .lookup(&cred, &obj, name)
                .map_err(|e| nfs_status(&e))?;
            Fh::Object { export, obj: found }
        }
    };
    // RFC 8881 2.6.3.1.1.3: LOOKUP judges the flavour for what it reaches.
    if !c.flavor_ok(&fh) {
        return Err(NFS4ERR_WRONGSEC);
    }
    c.set_current(fh)
}
