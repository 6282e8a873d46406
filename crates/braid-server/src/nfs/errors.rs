//! braid-fs's POSIX errors as NFSv4 status codes (RFC 8881 15.1).

use braid_fs::posix::PosixError;
use braid_nfs_proto::nfs4::*;

pub fn nfs_status(e: &PosixError) -> nfsstat4 {
    match e {
        PosixError::BadHandle => NFS4ERR_BADHANDLE,
        PosixError::Stale => NFS4ERR_STALE,
        PosixError::BadName => NFS4ERR_BADNAME,
        PosixError::NameTooLong => NFS4ERR_NAMETOOLONG,
        PosixError::Errno(errno) => errno_status(*errno),
    }
}

pub fn errno_status(errno: i32) -> nfsstat4 {
    match errno {
        libc::EPERM => NFS4ERR_PERM,
        libc::ENOENT => NFS4ERR_NOENT,
        libc::EIO => NFS4ERR_IO,
        libc::ENXIO | libc::ENODEV => NFS4ERR_NXIO,
        libc::EACCES => NFS4ERR_ACCESS,
        libc::EEXIST => NFS4ERR_EXIST,
        libc::EXDEV => NFS4ERR_XDEV,
        libc::ENOTDIR => NFS4ERR_NOTDIR,
        libc::EISDIR => NFS4ERR_ISDIR,
        libc::EINVAL | libc::EOVERFLOW => NFS4ERR_INVAL,
        libc::EFBIG => NFS4ERR_FBIG,
        libc::ENOSPC => NFS4ERR_NOSPC,
        libc::EROFS => NFS4ERR_ROFS,
        libc::EMLINK => NFS4ERR_MLINK,
        libc::ENAMETOOLONG => NFS4ERR_NAMETOOLONG,
        libc::ENOTEMPTY => NFS4ERR_NOTEMPTY,
        libc::EDQUOT => NFS4ERR_DQUOT,
        libc::ESTALE => NFS4ERR_STALE,
        libc::ELOOP => NFS4ERR_SYMLINK,
        libc::EOPNOTSUPP => NFS4ERR_NOTSUPP,
        libc::EAGAIN | libc::EMFILE | libc::ENFILE | libc::ENOMEM => NFS4ERR_DELAY,
        libc::EBADF => NFS4ERR_BADHANDLE,
        _ => NFS4ERR_IO,
    }
}

/// An I/O error of a syscall made on an fd (pread, fallocate, ...).
pub fn io_status(e: &std::io::Error) -> nfsstat4 {
    errno_status(e.raw_os_error().unwrap_or(libc::EIO))
}

/// The status of the syscall that just failed (errno).
pub fn last_os_status() -> nfsstat4 {
    io_status(&std::io::Error::last_os_error())
}

/// The error of a braid-fs call made with a check of the server's own
/// (`remove_checked`, `rename_checked`): an NFS status either way.
pub struct Status(pub nfsstat4);

impl From<PosixError> for Status {
    fn from(e: PosixError) -> Status {
        Status(nfs_status(&e))
    }
}
