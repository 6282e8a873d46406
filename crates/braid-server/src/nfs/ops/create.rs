//! OP_CREATE (RFC 8881 18.4): a directory, symbolic link, fifo, socket or
//! device node (regular files come from OPEN). The new object becomes the
//! current filehandle.

use braid_fs::posix::CreateKind;
use braid_nfs_proto::nfs4::*;

use crate::nfs::attrs;
use crate::nfs::compound::Compound;
use crate::nfs::errors::nfs_status;
use crate::nfs::fh::{check_component, require_dir, Fh};

pub fn run(c: &mut Compound, a: &CREATE4args) -> CREATE4res {
    match create(c, a) {
        Ok(ok) => CREATE4res::NFS4_OK(ok),
        Err(e) => CREATE4res::Default(e),
    }
}

fn create(c: &mut Compound, a: &CREATE4args) -> Result<CREATE4resok, nfsstat4> {
    // The pseudo file system is read-only.
    let (export, dir) = c.current_object(NFS4ERR_ROFS)?;
    require_dir(&dir)?;
    // RFC 8881 18.4.3: CREATE makes everything but regular files (OPEN's
    // job) and named attributes: anything else is NFS4ERR_BADTYPE.
    let kind = match &a.objtype {
        createtype4::NF4DIR => CreateKind::Directory,
        createtype4::NF4LNK(target) => {
            // An empty target names nothing (knfsd: NFS4ERR_INVAL too).
            if target.is_empty() {
                return Err(NFS4ERR_INVAL);
            }
            CreateKind::Symlink(target)
        }
        createtype4::NF4FIFO => CreateKind::Fifo,
        createtype4::NF4SOCK => CreateKind::Socket,
        createtype4::NF4BLK(d) => CreateKind::BlockDevice {
            major: d.specdata1,
            minor: d.specdata2,
        },
        createtype4::NF4CHR(d) => CreateKind::CharDevice {
            major: d.specdata1,
            minor: d.specdata2,
        },
        createtype4::Default(_) => return Err(NFS4ERR_BADTYPE),
    };
    check_component(&a.objname)?;
    c.require_write(&export)?;
    let mut want = attrs::decode_settable(&a.createattrs)?;
    // RFC 8881 18.4.3: a size is meaningless for these types.
    if want.set.size.is_some() {
        return Err(NFS4ERR_INVAL);
    }
    // The client applies its umask to the mode it sends; without one,
    // what mkdir(1)/mknod(1) would give with umask 022.
    let mode = want.set.mode.take().unwrap_or(match kind {
        CreateKind::Directory => 0o755,
        _ => 0o644,
    });
    let cred = c.credentials(&export);
    let (obj, change) = export
        .share
        .create(&cred, &dir, &a.objname, kind, mode, &want.set)
        .map_err(|e| nfs_status(&e))?;
    c.set_current(Fh::Object { export, obj })?;
    Ok(CREATE4resok {
        cinfo: attrs::cinfo(change),
        attrset: want.mask.into(),
    })
}
