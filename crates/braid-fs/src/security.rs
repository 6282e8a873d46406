//! Security descriptors of files and directories. The file service keeps
//! them as opaque bytes in the xattr `user.braid.sd` (the protocol layer
//! gives them their meaning: for SMB a self-relative NT security
//! descriptor, MS-DTYP 2.4.6) and asks an [`AccessPolicy`] from the
//! request context what an open may do (MS-FSA 2.1.5.1.1 / 2.1.5.1.2.1).
//!
//! Most files store none. A descriptor is written only when a requester
//! supplies one (a create with a descriptor of its own, a set) or when the
//! directory a file is created in has one stored (inheritance from an ACL
//! someone set). A file without one is governed by the policy's default,
//! which must be what a file created under a directory with the default
//! would inherit, so that storing nothing and storing the inherited
//! descriptor cannot be told apart. A descriptor does not fit an ext4
//! inode beside the DOS record (about 140 bytes against some 90 of room),
//! so each stored one costs the file an xattr block.
//!
//! Costs on the request path, for files without a descriptor: an open of
//! an existing file reads the file's xattr (one `fgetxattr`, ENODATA), a
//! create reads the parent's (one `getxattrat` on its `O_PATH` fd); READ,
//! WRITE and info queries read nothing more. The xattr block a stored
//! descriptor takes is left out of AllocationSize through a flag in the
//! DOS record ([`crate::info::DosMeta::xattr_block`]), found (from
//! `st_blocks` on either side) when the descriptor is written, not when
//! the allocation is read.

use std::os::fd::RawFd;

use crate::error::{FsError, FsResult};
use crate::handle::OpenHandle;
use crate::info;
use crate::meta::{AttrCache, FileStamp, KeptXattr};
use crate::sys;

/// The xattr holding a file's descriptor.
const SD_XATTR: &std::ffi::CStr = c"user.braid.sd";
/// ext4 keeps an xattr value within one block: refuse larger descriptors
/// cleanly rather than half-store them.
pub const MAX_DESCRIPTOR_LEN: usize = 4000;

/// What an access decision about one file or directory looks at.
#[derive(Debug, Clone)]
pub struct ObjectSecurity {
    /// The stored descriptor; `None` when the file has none, and the
    /// policy's default governs it.
    pub descriptor: Option<Vec<u8>>,
    pub is_directory: bool,
}

/// The access rules of one requester, supplied by the protocol layer in
/// [`crate::RequestCtx`]. With none, only the host's permissions apply.
pub trait AccessPolicy: Send + Sync {
    /// The rights the requester has on `object` (a maximal-access check:
    /// specific and standard rights, generic bits already mapped).
    fn maximal_access(&self, object: &ObjectSecurity) -> u32;
    /// The descriptor to store on a file or directory the requester
    /// creates in `parent` (inheritance, the creator's own descriptor),
    /// encoded; `None` to store none, which the policy may answer only
    /// when the default it gives a file without a descriptor is what the
    /// new object would get.
    fn new_descriptor(
        &self,
        parent: &ObjectSecurity,
        is_directory: bool,
    ) -> FsResult<Option<Vec<u8>>>;
}

/// The descriptor stored on `fd`'s file, if any: one `fgetxattr` when it
/// has none.
pub(crate) fn read_descriptor(fd: RawFd) -> FsResult<Option<Vec<u8>>> {
    descriptor_of(sys::xattr_read(fd, SD_XATTR))
}

fn descriptor_of(r: Result<Vec<u8>, i32>) -> FsResult<Option<Vec<u8>>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(libc::ENODATA | libc::ENOTSUP) => Ok(None),
        Err(e) => Err(FsError::from_errno(e)),
    }
}

/// Write `sd` as the descriptor of `fd`'s file. The caller notes what
/// that did to the file's blocks ([`info::note_xattr_blocks`]).
pub(crate) fn put_descriptor(fd: RawFd, sd: &[u8]) -> FsResult<()> {
    if sd.len() > MAX_DESCRIPTOR_LEN {
        return Err(FsError::InvalidParameter);
    }
    match sys::xattr_put(fd, SD_XATTR, Some(sd)) {
        Ok(()) => Ok(()),
        Err(libc::ENOTSUP) => Err(FsError::NotSupported),
        Err(e) => Err(FsError::from_errno(e)),
    }
}

/// The security of the object `fd` is open on.
pub(crate) fn object(fd: RawFd, is_directory: bool) -> FsResult<ObjectSecurity> {
    Ok(ObjectSecurity {
        descriptor: read_descriptor(fd)?,
        is_directory,
    })
}

/// [`object`] of the file whose `stat` is `st`, through the share's
/// attribute layer when it has one (`meta/attr_cache.rs`).
pub(crate) fn object_cached(
    attrs: Option<&AttrCache>,
    fd: RawFd,
    st: &libc::stat,
    is_directory: bool,
) -> FsResult<ObjectSecurity> {
    let Some(attrs) = attrs else {
        return object(fd, is_directory);
    };
    let value = attrs.xattr(
        &FileStamp::of(st),
        KeptXattr::Descriptor,
        || match sys::xattr_read(fd, SD_XATTR) {
            Ok(v) => Ok(Some(v)),
            Err(libc::ENODATA | libc::ENOTSUP) => Ok(None),
            Err(e) => Err(FsError::from_errno(e)),
        },
    )?;
    Ok(ObjectSecurity {
        descriptor: value.map(|v| v.to_vec()),
        is_directory,
    })
}

/// The security of the directory whose `O_PATH` fd path resolution gave
/// (a parent): one `getxattrat` when it has no descriptor.
pub(crate) fn parent(pfd: RawFd) -> FsResult<ObjectSecurity> {
    Ok(ObjectSecurity {
        descriptor: descriptor_of(sys::xattr_read_dir(pfd, SD_XATTR))?,
        is_directory: true,
    })
}

impl OpenHandle {
    /// The file's stored descriptor, `None` if it has none. The protocol
    /// layer checks the open's rights (READ_CONTROL) itself. A stream's
    /// handle answers for its file.
    pub fn security_descriptor(&self) -> FsResult<Option<Vec<u8>>> {
        self.live()?;
        read_descriptor(self.fd())
    }

    /// The stored descriptors of entries of this directory, by name, in
    /// order (`None`: none stored, or the entry is gone): what
    /// access-based enumeration looks at. One `getxattrat` per name.
    pub fn child_descriptors(&self, names: &[&str]) -> FsResult<Vec<Option<Vec<u8>>>> {
        self.live()?;
        let dfd = self.fd();
        names
            .iter()
            .map(|n| {
                let Ok(c) = std::ffi::CString::new(*n) else {
                    return Ok(None);
                };
                match sys::xattr_read_child(dfd, &c, SD_XATTR) {
                    Err(libc::ENOENT | libc::ELOOP) => Ok(None),
                    r => descriptor_of(r),
                }
            })
            .collect()
    }

    /// Replace the file's stored descriptor (the protocol layer checked
    /// WRITE_DAC / WRITE_OWNER and merged the parts). At most
    /// [`MAX_DESCRIPTOR_LEN`] bytes, else `InvalidParameter`.
    pub fn set_security_descriptor(&self, sd: &[u8]) -> FsResult<()> {
        self.0.share.0.check_writable()?;
        self.live()?;
        let before = sys::fstat(self.fd())?;
        put_descriptor(self.fd(), sd)?;
        info::note_xattr_blocks(self.fd(), &before)
    }
}
