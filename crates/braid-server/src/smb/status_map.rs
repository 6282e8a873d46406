//! File-service errors as NTSTATUS (MS-ERREF), for SMB responses.

use braid_fs::FsError;
use braid_smb_proto::NtStatus;

pub fn fs_status(e: &FsError) -> NtStatus {
    match e {
        FsError::NotFound => NtStatus::OBJECT_NAME_NOT_FOUND,
        FsError::PathNotFound => NtStatus::OBJECT_PATH_NOT_FOUND,
        FsError::NameCollision => NtStatus::OBJECT_NAME_COLLISION,
        FsError::SharingViolation => NtStatus::SHARING_VIOLATION,
        FsError::AccessDenied => NtStatus::ACCESS_DENIED,
        FsError::DeletePending => NtStatus::DELETE_PENDING,
        FsError::DirectoryNotEmpty => NtStatus::DIRECTORY_NOT_EMPTY,
        FsError::NotADirectory => NtStatus::NOT_A_DIRECTORY,
        FsError::IsADirectory => NtStatus::FILE_IS_A_DIRECTORY,
        FsError::CannotDelete => NtStatus::CANNOT_DELETE,
        FsError::DiskFull => NtStatus::DISK_FULL,
        FsError::AllottedSpaceExceeded => NtStatus::ALLOTTED_SPACE_EXCEEDED,
        FsError::InvalidName => NtStatus::OBJECT_NAME_INVALID,
        FsError::PathSyntaxBad => NtStatus::OBJECT_PATH_SYNTAX_BAD,
        FsError::InvalidParameter => NtStatus::INVALID_PARAMETER,
        FsError::LockConflict => NtStatus::FILE_LOCK_CONFLICT,
        FsError::LockNotGranted => NtStatus::LOCK_NOT_GRANTED,
        FsError::RangeNotLocked => NtStatus::RANGE_NOT_LOCKED,
        FsError::InvalidLockRange => NtStatus::INVALID_LOCK_RANGE,
        FsError::FileClosed => NtStatus::FILE_CLOSED,
        FsError::PrivilegeNotHeld => NtStatus::PRIVILEGE_NOT_HELD,
        FsError::QuotaExceeded => NtStatus::DISK_FULL,
        FsError::NameTooLong => NtStatus::OBJECT_NAME_INVALID,
        FsError::NotSupported => NtStatus::NOT_SUPPORTED,
        FsError::FileTooLarge => NtStatus::DISK_FULL,
        // As Samba answers when it runs out of file descriptors.
        FsError::TooManyOpenFiles => NtStatus::TOO_MANY_OPENED_FILES,
        FsError::InsufficientResources => NtStatus::INSUFFICIENT_RESOURCES,
        // A snapshot, or a read-only file system (Samba maps EROFS so).
        FsError::WriteProtected => NtStatus::MEDIA_WRITE_PROTECTED,
        _ => NtStatus::UNSUCCESSFUL,
    }
}

pub fn fs_err(e: FsError) -> NtStatus {
    fs_status(&e)
}
