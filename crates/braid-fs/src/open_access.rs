//! The access checks of an open (MS-FSA 2.1.5.1.1, 2.1.5.1.2.1; MS-DTYP
//! 2.5.3.2): what an open of an existing file is granted, and whether the
//! parent lets a new one be created.

use std::os::fd::{AsRawFd, RawFd};

use crate::error::{FsError, FsResult};
use crate::path;
use crate::security::{self, AccessPolicy};
use crate::types::{access as acc, map_generic, OpenParams};

/// MS-FSA 2.1.5.1.2.1 (MS-DTYP 2.5.3.2): the access an open of an existing
/// file gets from `pol`, and the maximal access. Every right asked for
/// (an overwrite also needs FILE_WRITE_DATA) must be granted; with
/// MAXIMUM_ALLOWED the open gets all granted rights, and at least one.
pub(crate) fn check_existing(
    pol: &dyn AccessPolicy,
    object: &security::ObjectSecurity,
    parent: Option<RawFd>,
    p: &OpenParams,
    overwrite: bool,
) -> FsResult<(u32, u32)> {
    let mapped = map_generic(p.access);
    let max = mapped & acc::MAXIMUM_ALLOWED != 0;
    let requested = mapped & !acc::MAXIMUM_ALLOWED;
    let mut need = requested;
    if overwrite {
        need |= acc::FILE_WRITE_DATA;
    }
    let mut allowed = pol.maximal_access(object);
    // MS-FSA 2.1.5.1.2.1: FILE_DELETE_CHILD on the parent grants DELETE,
    // FILE_LIST_DIRECTORY there FILE_READ_ATTRIBUTES (as NTFS does).
    let from_parent = [
        (acc::DELETE, acc::FILE_DELETE_CHILD),
        (acc::FILE_READ_ATTRIBUTES, acc::FILE_LIST_DIRECTORY),
    ];
    let wanted = |bit: u32| allowed & bit == 0 && (max || need & bit != 0);
    if from_parent.iter().any(|(bit, _)| wanted(*bit)) {
        if let Some(pfd) = parent {
            let parent = security::parent(pfd)?;
            let pmax = pol.maximal_access(&parent);
            for (bit, parent_bit) in from_parent {
                if pmax & parent_bit != 0 {
                    allowed |= bit;
                }
            }
        }
    }
    if need & !allowed != 0 || (max && allowed == 0) {
        return Err(FsError::AccessDenied);
    }
    let granted = if max { requested | allowed } else { requested };
    Ok((granted, allowed))
}

/// MS-FSA 2.1.5.1.1: creating in the directory `r` names needs
/// FILE_ADD_FILE (or FILE_ADD_SUBDIRECTORY) there; returns the descriptor
/// to store on the new object, if any. Reads the parent's descriptor: the
/// one system call a create adds.
pub(crate) fn check_create(
    pol: &dyn AccessPolicy,
    r: &path::Resolved,
    is_dir: bool,
) -> FsResult<Option<Vec<u8>>> {
    let parent = security::parent(r.parent_fd.as_raw_fd())?;
    let need = if is_dir {
        acc::FILE_ADD_SUBDIRECTORY
    } else {
        acc::FILE_ADD_FILE
    };
    if pol.maximal_access(&parent) & need == 0 {
        return Err(FsError::AccessDenied);
    }
    pol.new_descriptor(&parent, is_dir)
}
