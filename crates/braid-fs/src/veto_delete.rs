//! Samba's `delete veto files`: a directory that holds nothing but vetoed
//! names (`veto_files`) is empty to clients, and with this option it can be
//! deleted as an empty one, taking the vetoed names with it. macOS clients
//! leave `.DS_Store` and `._*` files that a share vetoes; without this a
//! folder a user emptied could not be removed.

use std::ffi::CString;
use std::os::fd::{AsRawFd, RawFd};

use crate::error::{FsError, FsResult};
use crate::share::Share;
use crate::sys;

/// Vetoed directories are removed to this depth at most.
const MAX_DEPTH: usize = 32;

/// Whether the directory `dirfd` is empty as a client may delete it: no
/// entries, or (with `delete_veto_files`) only vetoed ones.
pub(crate) fn empty_for_delete(share: &Share, dirfd: RawFd) -> FsResult<bool> {
    let names = sys::list_dir(dirfd)?;
    Ok(names.is_empty()
        || (share.delete_veto_files() && names.iter().all(|n| share.vetoes_entry(n))))
}

/// Before the directory `dirfd` is removed: remove its entries if every one
/// is vetoed and the share deletes vetoed files. Anything else is left for
/// the removal to fail on (DIRECTORY_NOT_EMPTY).
pub(crate) fn clear_vetoed(share: &Share, dirfd: RawFd) -> FsResult<()> {
    if !share.delete_veto_files() {
        return Ok(());
    }
    let names = sys::list_dir(dirfd)?;
    if names.is_empty() || !names.iter().all(|n| share.vetoes_entry(n)) {
        return Ok(());
    }
    for n in names {
        remove_tree_at(dirfd, &n, 0)?;
    }
    Ok(())
}

/// Remove `name` in `dirfd`, and if it is a directory (never followed
/// through a symlink) what it holds.
fn remove_tree_at(dirfd: RawFd, name: &[u8], depth: usize) -> FsResult<()> {
    let c = CString::new(name).map_err(|_| FsError::InvalidName)?;
    let st = sys::lstat_at(dirfd, &c).map_err(FsError::from_errno)?;
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        if depth >= MAX_DEPTH {
            return Err(FsError::DirectoryNotEmpty);
        }
        let sub = sys::openat(
            dirfd,
            &c,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )
        .map_err(FsError::from_errno)?;
        for n in sys::list_dir(sub.as_raw_fd())? {
            remove_tree_at(sub.as_raw_fd(), &n, depth + 1)?;
        }
        // SAFETY: plain syscall on one component.
        sys::check(unsafe { libc::unlinkat(dirfd, c.as_ptr(), libc::AT_REMOVEDIR) })
    } else {
        // SAFETY: plain syscall on one component.
        sys::check(unsafe { libc::unlinkat(dirfd, c.as_ptr(), 0) })
    }
}
