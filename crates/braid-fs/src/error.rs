//! Protocol-neutral errors. The SMB server maps them to NTSTATUS, the NFS
//! server to nfsstat4.

use std::io;

/// Errors of the file service. Names follow the NTSTATUS they usually map to.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The last path component does not exist (OBJECT_NAME_NOT_FOUND).
    #[error("file not found")]
    NotFound,
    /// An intermediate directory does not exist (OBJECT_PATH_NOT_FOUND).
    #[error("path not found")]
    PathNotFound,
    /// The name already exists (OBJECT_NAME_COLLISION).
    #[error("name collision")]
    NameCollision,
    /// Share-mode conflict with another open (SHARING_VIOLATION).
    #[error("sharing violation")]
    SharingViolation,
    #[error("access denied")]
    AccessDenied,
    /// e.g. ACCESS_SYSTEM_SECURITY requested (PRIVILEGE_NOT_HELD).
    #[error("privilege not held")]
    PrivilegeNotHeld,
    /// The file is marked for deletion (DELETE_PENDING).
    #[error("delete pending")]
    DeletePending,
    #[error("directory not empty")]
    DirectoryNotEmpty,
    /// A directory was required (NOT_A_DIRECTORY).
    #[error("not a directory")]
    NotADirectory,
    /// A non-directory was required (FILE_IS_A_DIRECTORY).
    #[error("is a directory")]
    IsADirectory,
    /// Read-only file cannot be deleted (CANNOT_DELETE).
    #[error("cannot delete")]
    CannotDelete,
    /// No space left (DISK_FULL).
    #[error("disk full")]
    DiskFull,
    /// More than an object of fixed size may hold, such as a macOS
    /// AFP_AfpInfo stream set past its 60 bytes (ALLOTTED_SPACE_EXCEEDED).
    #[error("allotted space exceeded")]
    AllottedSpaceExceeded,
    /// Quota exceeded (QUOTA_EXCEEDED).
    #[error("quota exceeded")]
    QuotaExceeded,
    /// Invalid or unsafe name (OBJECT_NAME_INVALID).
    #[error("invalid name")]
    InvalidName,
    #[error("invalid parameter")]
    InvalidParameter,
    /// I/O conflicts with a byte-range lock (FILE_LOCK_CONFLICT).
    #[error("file lock conflict")]
    LockConflict,
    /// A lock request conflicts with an existing lock (LOCK_NOT_GRANTED).
    #[error("lock not granted")]
    LockNotGranted,
    /// Unlock of a range that is not locked (RANGE_NOT_LOCKED).
    #[error("range not locked")]
    RangeNotLocked,
    /// Offset + length overflows (INVALID_LOCK_RANGE).
    #[error("invalid lock range")]
    InvalidLockRange,
    /// The handle was closed (FILE_CLOSED).
    #[error("file closed")]
    FileClosed,
    /// A `..` climbs above the share root (OBJECT_PATH_SYNTAX_BAD).
    #[error("path syntax bad")]
    PathSyntaxBad,
    /// Name too long (NAME_TOO_LONG / OBJECT_NAME_INVALID).
    #[error("name too long")]
    NameTooLong,
    /// Operation not supported by this backend (NOT_SUPPORTED).
    #[error("not supported")]
    NotSupported,
    /// File too large for the file system (FILE_TOO_LARGE / DISK_FULL).
    #[error("file too large")]
    FileTooLarge,
    /// The process or the system is out of file descriptors
    /// (TOO_MANY_OPENED_FILES).
    #[error("too many open files")]
    TooManyOpenFiles,
    /// A per-object limit is reached (INSUFFICIENT_RESOURCES): the
    /// byte-range locks of one file.
    #[error("insufficient resources")]
    InsufficientResources,
    /// The share is a snapshot, or on a read-only file system
    /// (MEDIA_WRITE_PROTECTED).
    #[error("write protected")]
    WriteProtected,
    /// Any other host error.
    #[error("I/O error: {0}")]
    Io(io::Error),
}

/// Result alias for the file service.
pub type FsResult<T> = Result<T, FsError>;

impl FsError {
    /// Map a host errno to a neutral error. ENOENT maps to [`FsError::NotFound`];
    /// path resolution distinguishes PathNotFound itself.
    pub fn from_errno(errno: i32) -> FsError {
        match errno {
            libc::ENOENT => FsError::NotFound,
            libc::ENOTDIR => FsError::PathNotFound,
            libc::EEXIST => FsError::NameCollision,
            libc::EACCES | libc::EPERM => FsError::AccessDenied,
            libc::EROFS => FsError::WriteProtected,
            // RESOLVE_BENEATH / RESOLVE_NO_MAGICLINKS refusals.
            libc::EXDEV | libc::ELOOP => FsError::AccessDenied,
            libc::ENOTEMPTY => FsError::DirectoryNotEmpty,
            libc::EISDIR => FsError::IsADirectory,
            libc::ENOSPC => FsError::DiskFull,
            libc::EDQUOT => FsError::QuotaExceeded,
            libc::ENAMETOOLONG => FsError::NameTooLong,
            libc::EINVAL => FsError::InvalidParameter,
            libc::EFBIG => FsError::FileTooLarge,
            libc::EOPNOTSUPP => FsError::NotSupported,
            libc::EBADF => FsError::FileClosed,
            libc::EMFILE | libc::ENFILE => FsError::TooManyOpenFiles,
            e => FsError::Io(io::Error::from_raw_os_error(e)),
        }
    }

    /// The current `errno` as an error.
    pub(crate) fn last_os() -> FsError {
        FsError::from_errno(last_errno())
    }
}

pub(crate) fn last_errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

impl From<io::Error> for FsError {
    fn from(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(n) => FsError::from_errno(n),
            None => FsError::Io(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping() {
        assert!(matches!(
            FsError::from_errno(libc::ENOSPC),
            FsError::DiskFull
        ));
        assert!(matches!(
            FsError::from(io::Error::from_raw_os_error(libc::ENOSPC)),
            FsError::DiskFull
        ));
        assert!(matches!(
            FsError::from_errno(libc::EDQUOT),
            FsError::QuotaExceeded
        ));
        assert!(matches!(
            FsError::from_errno(libc::ENOENT),
            FsError::NotFound
        ));
        assert!(matches!(
            FsError::from_errno(libc::EXDEV),
            FsError::AccessDenied
        ));
        assert!(matches!(
            FsError::from_errno(libc::ENOTEMPTY),
            FsError::DirectoryNotEmpty
        ));
        for e in [libc::EMFILE, libc::ENFILE] {
            assert!(matches!(FsError::from_errno(e), FsError::TooManyOpenFiles));
        }
        assert!(matches!(FsError::from_errno(libc::EIO), FsError::Io(_)));
    }
}
