//! Security descriptors of files and directories. The file service keeps
//! them as opaque bytes in the xattr `user.braid.sd` (the protocol layer
//! gives them their meaning: for SMB a self-relative NT security
//! descriptor, MS-DTYP 2.4.6) and asks an [`AccessPolicy`] from the
//! request context what an open may do (MS-FSA 2.1.5.1.1 / 2.1.5.1.2.1).

use std::os::fd::RawFd;

use crate::error::{FsError, FsResult};
use crate::handle::OpenHandle;
use crate::sys;

/// The xattr holding a file's descriptor.
const SD_XATTR: &str = "user.braid.sd";
/// ext4 keeps an xattr value within one block: refuse larger descriptors
/// cleanly rather than half-store them.
pub const MAX_DESCRIPTOR_LEN: usize = 4000;

/// What an access decision about one file or directory looks at.
#[derive(Debug, Clone)]
pub struct ObjectSecurity {
    /// The stored descriptor; `None` when the file has none (the share
    /// root, files made before descriptors were kept, or by other means).
    pub descriptor: Option<Vec<u8>>,
    pub is_directory: bool,
    /// The share's root directory.
    pub is_root: bool,
}

/// The access rules of one requester, supplied by the protocol layer in
/// [`crate::RequestCtx`]. With none, only the host's permissions apply.
pub trait AccessPolicy: Send + Sync {
    /// The rights the requester has on `object` (a maximal-access check:
    /// specific and standard rights, generic bits already mapped).
    fn maximal_access(&self, object: &ObjectSecurity) -> u32;
    /// The descriptor of a file or directory the requester creates in
    /// `parent` (inheritance, the creator's own descriptor), encoded.
    fn new_descriptor(&self, parent: &ObjectSecurity, is_directory: bool) -> FsResult<Vec<u8>>;
}

/// The descriptor stored on `fd`'s file, if any.
pub(crate) fn read_descriptor(fd: RawFd) -> FsResult<Option<Vec<u8>>> {
    let name = sys::cstr(SD_XATTR)?;
    // One system call where the file has none, also on the O_PATH fd of
    // a parent directory (every create reads its parent's).
    match sys::xattr_read(fd, &name) {
        Ok(v) => Ok(Some(v)),
        Err(libc::ENODATA | libc::ENOTSUP) => Ok(None),
        Err(e) => Err(FsError::from_errno(e)),
    }
}

/// Store `sd` as `fd`'s file's descriptor.
pub(crate) fn write_descriptor(fd: RawFd, sd: &[u8]) -> FsResult<()> {
    if sd.len() > MAX_DESCRIPTOR_LEN {
        return Err(FsError::InvalidParameter);
    }
    let name = sys::cstr(SD_XATTR)?;
    match sys::xattr_put(fd, &name, Some(sd)) {
        Ok(()) => Ok(()),
        Err(libc::ENOTSUP) => Err(FsError::NotSupported),
        Err(e) => Err(FsError::from_errno(e)),
    }
}

/// The security of the object `fd` is open on.
pub(crate) fn object(fd: RawFd, is_directory: bool, is_root: bool) -> FsResult<ObjectSecurity> {
    Ok(ObjectSecurity {
        descriptor: read_descriptor(fd)?,
        is_directory,
        is_root,
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

    /// Replace the file's stored descriptor (the protocol layer checked
    /// WRITE_DAC / WRITE_OWNER and merged the parts). At most
    /// [`MAX_DESCRIPTOR_LEN`] bytes, else `InvalidParameter`.
    pub fn set_security_descriptor(&self, sd: &[u8]) -> FsResult<()> {
        self.live()?;
        write_descriptor(self.fd(), sd)
    }

    /// Whether this handle is on the share's root directory.
    pub fn is_share_root(&self) -> bool {
        self.path().is_empty() && self.0.stream.is_none()
    }
}
