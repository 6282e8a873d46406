//! OP_LOOKUPP (RFC 8881 18.14): the parent directory. An export's root
//! goes up to the pseudo-root; the pseudo-root has no parent (NFS4ERR_NOENT).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::errors::nfs_status;
use crate::nfs::fh::{require_dir, Fh};

pub fn run(c: &mut Compound) -> LOOKUPP4res {
    let status = match lookupp(c) {
        Ok(()) => NFS4_OK,
        Err(e) => e,
    };
    LOOKUPP4res { status }
}

fn lookupp(c: &mut Compound) -> Result<(), nfsstat4> {
    let (export, obj) = c.current_object(NFS4ERR_NOENT)?;
    // RFC 8881 18.14.3: the current filehandle must be a directory (a
    // symbolic link: NFS4ERR_SYMLINK, as knfsd and pynfs LKPP1a have it).
    require_dir(&obj)?;
    let cred = c.credentials(&export);
    let parent = export
        .share
        .parent(&cred, &obj)
        .map_err(|e| nfs_status(&e))?;
    let fh = match parent {
        Some(p) => Fh::Object { export, obj: p },
        None => Fh::Pseudo,
    };
    // RFC 8881 2.6.3.1.1.4: LOOKUPP judges the flavour for the parent.
    if !c.flavor_ok(&fh) {
        return Err(NFS4ERR_WRONGSEC);
    }
    c.set_current(fh)
}
