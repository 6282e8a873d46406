//! The plain data the POSIX face hands in and out. No syscalls here.

/// Result of every POSIX-face operation.
pub type PosixResult<T> = Result<T, PosixError>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PosixError {
    /// The kernel's answer, passed through so the protocol maps it (EACCES,
    /// ENOENT, ENOTEMPTY, ...).
    #[error("errno {0}")]
    Errno(i32),
    /// Malformed handle, or a MAC that does not match (forged / another server).
    #[error("bad handle")]
    BadHandle,
    /// Well-formed and ours, but the object is gone (unlinked, or not
    /// resolvable any more).
    #[error("stale handle")]
    Stale,
    /// A name that is not one valid component.
    #[error("bad name")]
    BadName,
    #[error("name too long")]
    NameTooLong,
}

impl From<std::io::Error> for PosixError {
    fn from(e: std::io::Error) -> Self {
        PosixError::Errno(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

impl PosixError {
    /// The errno, if this is one (tests and callers that branch on it).
    pub fn errno(&self) -> Option<i32> {
        match self {
            PosixError::Errno(e) => Some(*e),
            _ => None,
        }
    }
}

/// Who the request runs as, after the export's squashing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

impl Credentials {
    pub fn root() -> Credentials {
        Credentials {
            uid: 0,
            gid: 0,
            groups: Vec::new(),
        }
    }

    pub(crate) fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    File,
    Directory,
    Symlink,
    BlockDevice,
    CharDevice,
    Fifo,
    Socket,
}

impl ObjectKind {
    /// From the `S_IFMT` bits of a mode; `None` for a type Linux does not have.
    pub(crate) fn from_mode(mode: u32) -> Option<ObjectKind> {
        Some(match mode & libc::S_IFMT {
            libc::S_IFREG => ObjectKind::File,
            libc::S_IFDIR => ObjectKind::Directory,
            libc::S_IFLNK => ObjectKind::Symlink,
            libc::S_IFBLK => ObjectKind::BlockDevice,
            libc::S_IFCHR => ObjectKind::CharDevice,
            libc::S_IFIFO => ObjectKind::Fifo,
            libc::S_IFSOCK => ObjectKind::Socket,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timespec {
    pub sec: i64,
    pub nsec: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PosixAttr {
    pub kind: ObjectKind,
    /// Permission bits including suid/sgid/sticky, no type bits.
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub space_used: u64,
    pub rdev_major: u32,
    pub rdev_minor: u32,
    pub dev: u64,
    pub fileid: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    pub btime: Option<Timespec>,
    /// RFC 8881 5.8.1.4: changes whenever data or metadata changes. It is
    /// ctime in nanoseconds: Linux (6.13+ multigrain timestamps on
    /// ext4/xfs/btrfs/tmpfs) gives a change a fresh fine-grained ctime once
    /// the old one has been queried, and every change Braid makes queries it
    /// first, so it is strictly monotonic for Braid's own changes.
    pub change: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetTime {
    DontChange,
    ServerNow,
    Client(Timespec),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetAttrs {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    /// None = don't change.
    pub atime: Option<SetTime>,
    pub mtime: Option<SetTime>,
}

impl SetAttrs {
    pub(crate) fn is_empty(&self) -> bool {
        self.mode.is_none()
            && self.uid.is_none()
            && self.gid.is_none()
            && self.size.is_none()
            && matches!(self.atime, None | Some(SetTime::DontChange))
            && matches!(self.mtime, None | Some(SetTime::DontChange))
    }
}

/// Directory change info (RFC 8881 change_info4): the parent's
/// change attribute before and after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirChange {
    pub before: u64,
    pub after: u64,
    /// Always false: other processes may change the directory between the
    /// two samples and we cannot hold them off.
    pub atomic: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsStat {
    pub bytes_total: u64,
    pub bytes_free: u64,
    pub bytes_avail: u64,
    pub files_total: u64,
    pub files_free: u64,
    pub files_avail: u64,
    pub max_name: u32,
}

#[derive(Debug)]
pub struct DirEntryOut {
    pub name: Vec<u8>,
    pub cookie: u64,
    /// The lookup may fail (a raced unlink, no search permission).
    pub object: PosixResult<super::Object>,
}

#[derive(Debug)]
pub struct ReadDirOut {
    pub entries: Vec<DirEntryOut>,
    pub eof: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateKind<'a> {
    Directory,
    Symlink(&'a [u8]),
    Fifo,
    Socket,
    BlockDevice { major: u32, minor: u32 },
    CharDevice { major: u32, minor: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateMode {
    /// O_CREAT only: an existing regular file is opened (created = false).
    Unchecked,
    /// O_CREAT|O_EXCL.
    Guarded,
    /// RFC 8881 18.16.3 EXCLUSIVE4_1: O_EXCL, and the verifier kept with the
    /// file (xattr `trusted.braid.nfs.verf` when the server runs as root,
    /// `user.braid.nfs.verf` otherwise); a retry with the same verifier on
    /// the existing file succeeds (created = false) instead of EEXIST.
    Exclusive { verifier: [u8; 8] },
}

// RFC 8881 18.1.3: the ACCESS4 bits.
pub const ACCESS_READ: u32 = 0x01;
pub const ACCESS_LOOKUP: u32 = 0x02;
pub const ACCESS_MODIFY: u32 = 0x04;
pub const ACCESS_EXTEND: u32 = 0x08;
pub const ACCESS_DELETE: u32 = 0x10;
pub const ACCESS_EXECUTE: u32 = 0x20;

/// NAME_MAX on Linux; also what `statfs` reports on the file systems we run on.
pub const MAX_NAME: usize = 255;

/// Checks that `name` is exactly one component we may hand to an `*at` call.
pub(crate) fn validate_name(name: &[u8]) -> PosixResult<std::ffi::CString> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
        return Err(PosixError::BadName);
    }
    if name.len() > MAX_NAME {
        return Err(PosixError::NameTooLong);
    }
    std::ffi::CString::new(name).map_err(|_| PosixError::BadName)
}
