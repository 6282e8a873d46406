//! Creation of a new file or directory (MS-FSA 2.1.5.1.1): the access
//! check in the parent, the object on disk with its attributes, allocation
//! and descriptor, and its removal when the open that made it fails.

use std::os::fd::{AsRawFd, OwnedFd};

use crate::error::{last_errno, FsError, FsResult};
use crate::info::{self, DosMeta};
use crate::meta::FdMode;
use crate::open_access::check_create;
use crate::open_table::FileKey;
use crate::path;
use crate::security::{self, AccessPolicy};
use crate::service::{FileService, RO_DENIED};
use crate::share::ShareRef;
use crate::sys;
use crate::types::{access as acc, attr, CreateAction, DirectoryRequirement, OpenParams, Opened};

impl FileService {
    /// MS-FSA 2.1.5.1.1: creation of a new file or directory.
    pub(crate) fn create(
        &self,
        share: &ShareRef,
        r: path::Resolved,
        p: &OpenParams,
        access: u32,
        max: bool,
        pol: Option<&dyn AccessPolicy>,
    ) -> FsResult<Option<Opened>> {
        if p.delete_on_close && p.attributes & attr::READONLY != 0 {
            return Err(FsError::CannotDelete);
        }
        refuse_encrypted(p)?;
        let is_dir = p.directory == DirectoryRequirement::MustBeDirectory;
        let descriptor = match pol {
            Some(pol) => check_create(pol, &r, is_dir)?,
            None => None,
        };
        let Some(created) = self.create_on_disk(share, &r, p, is_dir, descriptor.as_deref())?
        else {
            return Ok(None);
        };
        let maximal_access = match pol {
            Some(pol) => pol.maximal_access(&security::ObjectSecurity {
                descriptor,
                is_directory: is_dir,
            }),
            None => acc::FILE_ALL_ACCESS,
        };
        let attrs = created.attributes;
        let (fd, st) = (created.fd, created.st);
        let mut access = access;
        if max && attrs & attr::READONLY != 0 && !is_dir {
            access &= !RO_DENIED;
        }
        let (node, id) = match self.register(FileKey::of(&st), access, p) {
            Ok(x) => x,
            Err(e) => {
                created.cleanup.run();
                return Err(e);
            }
        };
        let handle = self.make_handle(
            share,
            id,
            node,
            fd,
            is_dir,
            (access, p.share_access),
            r.rel(),
            None,
        );
        if !is_dir {
            handle.keep_fd_at_close(&st, Some(FdMode::ReadWrite), p.write_through);
        }
        if let Err(e) = handle.netatalk_check() {
            drop(handle);
            created.cleanup.run();
            return Err(e);
        }
        let info = handle.info()?;
        Ok(Some(Opened {
            handle,
            action: CreateAction::Created,
            info,
            maximal_access,
        }))
    }

    /// Create the file or directory `r` names with the attributes and
    /// allocation `p` asks for, and the security descriptor `sd` if it is
    /// to store one. `Ok(None)`: it exists after all (a race).
    pub(crate) fn create_on_disk(
        &self,
        share: &ShareRef,
        r: &path::Resolved,
        p: &OpenParams,
        is_dir: bool,
        sd: Option<&[u8]>,
    ) -> FsResult<Option<Created>> {
        let parent = r.parent_fd.as_raw_fd();
        // Nothing may be created in a directory that is being deleted.
        let pst = sys::fstat(parent)?;
        if let Some(n) = self.nodes.get(&FileKey::of(&pst)) {
            if n.lock().delete_pending {
                return Err(FsError::DeletePending);
            }
        }
        let cname = sys::cstr(&r.name)?;
        let fd = if is_dir {
            // SAFETY: plain syscall; single validated component.
            if unsafe { libc::mkdirat(parent, cname.as_ptr(), 0o777) } < 0 {
                return match last_errno() {
                    libc::EEXIST => Ok(None),
                    e => Err(FsError::from_errno(e)),
                };
            }
            sys::openat(
                parent,
                &cname,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            )
            .map_err(FsError::from_errno)?
        } else {
            let mut f =
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_NOFOLLOW | libc::O_NOCTTY;
            if p.write_through {
                f |= libc::O_DSYNC;
            }
            match sys::openat(parent, &cname, f, 0o666) {
                Ok(fd) => fd,
                Err(libc::EEXIST) => return Ok(None),
                Err(e) => return Err(FsError::from_errno(e)),
            }
        };
        let cleanup = Cleanup {
            parent,
            name: cname.clone(),
            is_dir,
        };
        let st = match sys::fstat(fd.as_raw_fd()) {
            Ok(st) => st,
            Err(e) => {
                cleanup.run();
                return Err(e);
            }
        };
        let mut attrs = p.attributes & attr::SETTABLE;
        if !is_dir {
            attrs |= attr::ARCHIVE;
        }
        let default = if is_dir { 0 } else { attr::ARCHIVE };
        let setup = (|| {
            // The share's `create_mask` / `directory_mask`: the mode is
            // exactly that, whatever the server's umask (as Samba, which
            // runs with umask 0).
            if let Some(mode) = share.0.create_mode(is_dir) {
                // SAFETY: plain syscall on a descriptor we own.
                if unsafe { libc::fchmod(fd.as_raw_fd(), mode) } < 0 {
                    return Err(FsError::last_os());
                }
            }
            if let Some(sd) = sd {
                security::put_descriptor(fd.as_raw_fd(), sd)?;
            }
            let mut m = DosMeta {
                attributes: attrs,
                ..DosMeta::default()
            };
            if attrs != default {
                info::write_dos(fd.as_raw_fd(), &m, &st)?;
            }
            // Did the descriptor (or the record beside it) take an xattr
            // block? Asked before the allocation, whose blocks are data.
            // The record is known, so this is an fstat and, on ext4, one
            // more write of it (info::note_xattr_blocks without the read).
            if sd.is_some() && !is_dir {
                let after = sys::fstat(fd.as_raw_fd())?;
                if info::xattr_block_change(&st, &after) == Some(true) {
                    m.xattr_block = true;
                    info::write_dos(fd.as_raw_fd(), &m, &after)?;
                }
            }
            if let (Some(a), false) = (p.allocation_size, is_dir) {
                preallocate(fd.as_raw_fd(), a)?;
            }
            Ok::<_, FsError>(())
        })();
        if let Err(e) = setup {
            cleanup.run();
            return Err(e);
        }
        Ok(Some(Created {
            fd,
            st,
            attributes: attrs,
            cleanup,
        }))
    }
}

/// A file or directory [`FileService::create_on_disk`] made.
pub(crate) struct Created {
    pub fd: OwnedFd,
    pub st: libc::stat,
    /// Its DOS attributes.
    pub attributes: u32,
    pub cleanup: Cleanup,
}

/// Removes a file or directory just created, when its open fails.
pub(crate) struct Cleanup {
    parent: i32,
    name: std::ffi::CString,
    is_dir: bool,
}

impl Cleanup {
    /// A second handle on the same cleanup (it owns no resource).
    pub fn clone_handle(&self) -> Cleanup {
        Cleanup {
            parent: self.parent,
            name: self.name.clone(),
            is_dir: self.is_dir,
        }
    }

    pub fn run(&self) {
        let flag = if self.is_dir { libc::AT_REMOVEDIR } else { 0 };
        // SAFETY: plain syscall on a single validated component.
        unsafe { libc::unlinkat(self.parent, self.name.as_ptr(), flag) };
    }
}

/// Reserve `size` bytes without changing the file size (best effort: file
/// systems without fallocate are fine, a full disk is not).
///
/// An allocation the file system has no room for is DiskFull before any
/// block is taken (MS-FSA 2.1.5.14.1; NTFS and Samba's
/// vfs_allocate_file_space check first too): ext4 and XFS keep what
/// `fallocate` allocated before it ran out of space, so one AllocationSize
/// of a terabyte would otherwise fill the disk and leave it full.
pub(crate) fn preallocate(fd: i32, size: u64) -> FsResult<()> {
    if size == 0 {
        return Ok(());
    }
    let allocated = (sys::fstat(fd)?.st_blocks as u64).saturating_mul(512);
    if size > allocated {
        let s = sys::fstatvfs(fd)?;
        let free = s.f_bavail.saturating_mul(sys::fragment_size(&s));
        if !allocation_fits(size - allocated, free) {
            return Err(FsError::DiskFull);
        }
    }
    // SAFETY: plain syscall.
    let r = unsafe {
        libc::fallocate(
            fd,
            libc::FALLOC_FL_KEEP_SIZE,
            0,
            size.min(i64::MAX as u64) as i64,
        )
    };
    if r < 0 {
        return match last_errno() {
            libc::ENOSPC => Err(FsError::DiskFull),
            libc::EDQUOT => Err(FsError::QuotaExceeded),
            libc::EFBIG => Err(FsError::DiskFull),
            _ => Ok(()),
        };
    }
    Ok(())
}

/// Whether `more` bytes of allocation fit in `free` bytes, keeping 1/1024
/// of what is free (at least 1 MiB) for the file system's own metadata:
/// the extent tree of a large allocation takes blocks too.
fn allocation_fits(more: u64, free: u64) -> bool {
    let margin = (free / 1024).max(1 << 20);
    more <= free.saturating_sub(margin)
}

/// MS-FSA 2.1.5.1.1: FILE_ATTRIBUTE_ENCRYPTED asks the object store to
/// encrypt the new data at rest (EFS). Braid stores files as the local file
/// system does and cannot keep that promise, so, as a Windows server without
/// the user's EFS keys, it refuses the create rather than record an
/// attribute that would claim encryption (smbtorture smb2.create.gentest
/// accepts either).
pub(crate) fn refuse_encrypted(p: &OpenParams) -> FsResult<()> {
    if p.attributes & attr::ENCRYPTED != 0 {
        return Err(FsError::AccessDenied);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::allocation_fits;

    #[test]
    fn an_allocation_must_leave_a_margin_free() {
        const MIB: u64 = 1 << 20;
        assert!(allocation_fits(0, 0));
        assert!(!allocation_fits(1, 0));
        assert!(!allocation_fits(MIB, MIB));
        assert!(allocation_fits(3 * MIB, 4 * MIB));
        assert!(!allocation_fits(4 * MIB, 4 * MIB));
        // A terabyte free keeps a gigabyte back.
        let tib = 1u64 << 40;
        assert!(allocation_fits(tib - 2 * (tib / 1024), tib));
        assert!(!allocation_fits(tib - tib / 2048, tib));
        assert!(!allocation_fits(u64::MAX, u64::MAX));
    }
}
