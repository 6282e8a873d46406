//! OP_SECINFO (RFC 8881 18.29): the security flavours for a name in the
//! current directory: those of the export the name is in.

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::errors::nfs_status;
use crate::nfs::export::{ExportAccess, SecFlavor};
use crate::nfs::exports::Export;
use crate::nfs::fh::{check_component, require_dir, Fh};

pub fn run(c: &mut Compound, a: &SECINFO4args) -> SECINFO4res {
    let res = match secinfo(c, &a.name) {
        Ok(flavors) => SECINFO4res::NFS4_OK(flavors),
        Err(e) => SECINFO4res::Default(e),
    };
    // RFC 8881 2.6.3.1.1.8, 18.29.3: SECINFO consumes the current
    // filehandle, so a following operation that needs one fails with
    // NFS4ERR_NOFILEHANDLE (a client must PUTFH again).
    if matches!(res, SECINFO4res::NFS4_OK(_)) {
        c.current = None;
        c.current_stateid = None;
    }
    res
}

fn secinfo(c: &mut Compound, name: &[u8]) -> Result<SECINFO4resok, nfsstat4> {
    match c.current_fh()?.clone() {
        Fh::Pseudo => {
            check_component(name)?;
            let export = std::str::from_utf8(name)
                .ok()
                .and_then(|n| c.state.exports.by_name(n))
                .filter(|e| c.export_access(e) != ExportAccess::Denied)
                .ok_or(NFS4ERR_NOENT)?;
            Ok(flavors_of(&export))
        }
        Fh::Object { export, obj } => {
            require_dir(&obj)?;
            check_component(name)?;
            let cred = c.credentials(&export);
            export
                .share
                .lookup(&cred, &obj, name)
                .map_err(|e| nfs_status(&e))?;
            Ok(flavors_of(&export))
        }
    }
}

/// RFC 8881 18.29.4: an export's flavours, most preferred first (the
/// order of its `nfs_sec`).
pub fn flavors_of(export: &Export) -> SECINFO4resok {
    export
        .options
        .sec
        .iter()
        .map(|f| {
            secinfo4::Default(match f {
                SecFlavor::None => AUTH_NONE,
                SecFlavor::Sys => AUTH_SYS,
            })
        })
        .collect()
}

/// The pseudo-root takes AUTH_SYS (and AUTH_NONE when an export does):
/// it must be reachable with any flavour an export below it accepts.
pub fn pseudo_flavors(c: &Compound) -> SECINFO4resok {
    let mut v = vec![secinfo4::Default(AUTH_SYS)];
    let none = c
        .state
        .exports
        .all()
        .iter()
        .any(|e| e.options.allows_flavor(SecFlavor::None));
    if none {
        v.push(secinfo4::Default(AUTH_NONE));
    }
    v
}
