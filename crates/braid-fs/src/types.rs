//! Neutral request/response types of the file service.

use std::time::SystemTime;

/// Windows ACCESS_MASK bits (MS-DTYP 2.4.3, MS-SMB2 2.2.13.1).
pub mod access {
    pub const FILE_READ_DATA: u32 = 0x0000_0001;
    /// For directories: FILE_LIST_DIRECTORY.
    pub const FILE_LIST_DIRECTORY: u32 = 0x0000_0001;
    pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
    /// For directories: FILE_ADD_FILE.
    pub const FILE_ADD_FILE: u32 = 0x0000_0002;
    pub const FILE_APPEND_DATA: u32 = 0x0000_0004;
    /// For directories: FILE_ADD_SUBDIRECTORY.
    pub const FILE_ADD_SUBDIRECTORY: u32 = 0x0000_0004;
    pub const FILE_READ_EA: u32 = 0x0000_0008;
    pub const FILE_WRITE_EA: u32 = 0x0000_0010;
    pub const FILE_EXECUTE: u32 = 0x0000_0020;
    /// For directories: FILE_TRAVERSE.
    pub const FILE_TRAVERSE: u32 = 0x0000_0020;
    pub const FILE_DELETE_CHILD: u32 = 0x0000_0040;
    pub const FILE_READ_ATTRIBUTES: u32 = 0x0000_0080;
    pub const FILE_WRITE_ATTRIBUTES: u32 = 0x0000_0100;
    pub const DELETE: u32 = 0x0001_0000;
    pub const READ_CONTROL: u32 = 0x0002_0000;
    pub const WRITE_DAC: u32 = 0x0004_0000;
    pub const WRITE_OWNER: u32 = 0x0008_0000;
    pub const SYNCHRONIZE: u32 = 0x0010_0000;
    pub const ACCESS_SYSTEM_SECURITY: u32 = 0x0100_0000;
    pub const MAXIMUM_ALLOWED: u32 = 0x0200_0000;
    pub const GENERIC_ALL: u32 = 0x1000_0000;
    pub const GENERIC_EXECUTE: u32 = 0x2000_0000;
    pub const GENERIC_WRITE: u32 = 0x4000_0000;
    pub const GENERIC_READ: u32 = 0x8000_0000;

    /// All specific + standard rights of a file (0x1F01FF).
    pub const FILE_ALL_ACCESS: u32 = 0x001F_01FF;
    pub const FILE_GENERIC_READ: u32 =
        READ_CONTROL | FILE_READ_DATA | FILE_READ_ATTRIBUTES | FILE_READ_EA | SYNCHRONIZE;
    pub const FILE_GENERIC_WRITE: u32 = READ_CONTROL
        | FILE_WRITE_DATA
        | FILE_WRITE_ATTRIBUTES
        | FILE_WRITE_EA
        | FILE_APPEND_DATA
        | SYNCHRONIZE;
    pub const FILE_GENERIC_EXECUTE: u32 =
        READ_CONTROL | FILE_READ_ATTRIBUTES | FILE_EXECUTE | SYNCHRONIZE;

    /// The bits that take part in share-mode checks (MS-FSA 2.1.5.1.2.1).
    pub const DATA_ACCESS: u32 =
        FILE_READ_DATA | FILE_WRITE_DATA | FILE_APPEND_DATA | FILE_EXECUTE | DELETE;
}

/// FILE_SHARE_* bits.
pub mod share {
    pub const READ: u32 = 1;
    pub const WRITE: u32 = 2;
    pub const DELETE: u32 = 4;
    pub const ALL: u32 = READ | WRITE | DELETE;
}

/// FILE_ATTRIBUTE_* bits (MS-FSCC 2.6).
pub mod attr {
    pub const READONLY: u32 = 0x0000_0001;
    pub const HIDDEN: u32 = 0x0000_0002;
    pub const SYSTEM: u32 = 0x0000_0004;
    pub const DIRECTORY: u32 = 0x0000_0010;
    pub const ARCHIVE: u32 = 0x0000_0020;
    pub const NORMAL: u32 = 0x0000_0080;
    pub const TEMPORARY: u32 = 0x0000_0100;
    pub const SPARSE_FILE: u32 = 0x0000_0200;
    pub const REPARSE_POINT: u32 = 0x0000_0400;
    pub const COMPRESSED: u32 = 0x0000_0800;
    pub const OFFLINE: u32 = 0x0000_1000;
    pub const NOT_CONTENT_INDEXED: u32 = 0x0000_2000;
    pub const ENCRYPTED: u32 = 0x0000_4000;
    /// Attributes a client may set and that we persist.
    pub const SETTABLE: u32 =
        READONLY | HIDDEN | SYSTEM | ARCHIVE | TEMPORARY | OFFLINE | NOT_CONTENT_INDEXED;
    /// Attributes we persist: the settable ones, and SPARSE_FILE, which
    /// only FSCTL_SET_SPARSE changes (CREATE and SetBasic ignore it).
    pub const STORED: u32 = SETTABLE | SPARSE_FILE;
}

/// Per-request context (architecture principle 5): passed explicitly.
#[derive(Clone, Default)]
pub struct RequestCtx {
    /// Authenticated identity (e.g. `DOMAIN\user`), for logging.
    pub identity: String,
    /// The requester's access rules over stored security descriptors
    /// (`security.rs`); `None`: only the host's permissions apply.
    pub access: Option<std::sync::Arc<dyn crate::security::AccessPolicy>>,
    /// The requester takes an empty named stream for an absent one, as
    /// macOS clients do once they negotiated Apple's SMB extensions
    /// (Samba's vfs_fruit with AAPL): opening one without creating it is
    /// [`crate::FsError::NotFound`] (`mac_streams.rs`). Off by default.
    pub hide_empty_streams: bool,
    /// The Unix owner the requester's new files and directories get (an
    /// SMB user's uid and gid from the users file, so that NFS clients see
    /// the same owner); `None`: the server process's.
    pub owner: Option<FileOwner>,
}

/// A Unix owner and group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileOwner {
    pub uid: u32,
    pub gid: u32,
}

impl std::fmt::Debug for RequestCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestCtx")
            .field("identity", &self.identity)
            .field("access", &self.access.is_some())
            .field("hide_empty_streams", &self.hide_empty_streams)
            .field("owner", &self.owner)
            .finish()
    }
}

impl RequestCtx {
    pub fn new(identity: impl Into<String>) -> Self {
        RequestCtx {
            identity: identity.into(),
            access: None,
            hide_empty_streams: false,
            owner: None,
        }
    }
}

/// CreateDisposition (MS-FSA 2.1.5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Replace if exists, create otherwise.
    Supersede,
    /// Open if exists, fail otherwise.
    Open,
    /// Create; fail if exists.
    Create,
    /// Open if exists, create otherwise.
    OpenIf,
    /// Truncate if exists, fail otherwise.
    Overwrite,
    /// Truncate if exists, create otherwise.
    OverwriteIf,
}

/// FILE_DIRECTORY_FILE / FILE_NON_DIRECTORY_FILE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DirectoryRequirement {
    #[default]
    Any,
    MustBeDirectory,
    MustNotBeDirectory,
}

/// Parameters of [`crate::FileService::open`].
#[derive(Debug, Clone)]
pub struct OpenParams {
    /// Relative to the share root; components separated by `\` (or `/`);
    /// `""` is the root. A single leading separator is tolerated.
    pub path: String,
    /// Desired ACCESS_MASK (GENERIC_* and MAXIMUM_ALLOWED are resolved).
    pub access: u32,
    /// FILE_SHARE_* bits.
    pub share_access: u32,
    pub disposition: Disposition,
    pub directory: DirectoryRequirement,
    /// FILE_DELETE_ON_CLOSE.
    pub delete_on_close: bool,
    /// FILE_WRITE_THROUGH: writes are durable before they return.
    pub write_through: bool,
    /// FILE_ATTRIBUTE_* for a created/overwritten file.
    pub attributes: u32,
    /// Initial allocation for a created/overwritten file.
    pub allocation_size: Option<u64>,
}

impl OpenParams {
    /// Convenience: open an existing file or directory with `access`, sharing all.
    pub fn new(path: impl Into<String>, access: u32, disposition: Disposition) -> Self {
        OpenParams {
            path: path.into(),
            access,
            share_access: share::ALL,
            disposition,
            directory: DirectoryRequirement::Any,
            delete_on_close: false,
            write_through: false,
            attributes: 0,
            allocation_size: None,
        }
    }
}

/// What `open` did (CreateAction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateAction {
    Opened,
    Created,
    Overwritten,
    Superseded,
}

/// Metadata of a file, in Windows terms.
///
/// Times are `SystemTime` (nanosecond precision where the host has it);
/// the SMB layer converts to FILETIME.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    pub creation_time: SystemTime,
    pub last_access_time: SystemTime,
    pub last_write_time: SystemTime,
    pub change_time: SystemTime,
    /// Bytes allocated on disk (0 for directories).
    pub allocation_size: u64,
    /// File size (0 for directories).
    pub end_of_file: u64,
    /// FILE_ATTRIBUTE_*; NORMAL when nothing else is set.
    pub attributes: u32,
    pub number_of_links: u32,
    pub delete_pending: bool,
    pub is_directory: bool,
    /// Stable file id: the inode number.
    pub file_id: u64,
    /// Size of the file's extended attributes as a FILE_FULL_EA_INFORMATION
    /// chain (MS-FSCC 2.4.12 EaSize); 0 when it has none.
    pub ea_size: u32,
}

/// One extended attribute (MS-FSCC 2.4.15): an ASCII name, compared
/// without regard to case and kept in upper case, and a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedAttribute {
    pub name: String,
    /// Empty in a set request: remove the attribute.
    pub value: Vec<u8>,
    /// FILE_NEED_EA (0x80) or 0.
    pub flags: u8,
}

/// One entry of a directory listing.
#[derive(Debug, Clone)]
pub struct DirEntry {
    pub name: String,
    pub info: FileInfo,
}

/// Result of a successful open.
#[derive(Debug, Clone)]
pub struct Opened {
    pub handle: crate::OpenHandle,
    pub action: CreateAction,
    pub info: FileInfo,
    /// The rights the requester's access policy grants on the file
    /// (MS-SMB2 2.2.14.2.5 MaximalAccess); FILE_ALL_ACCESS without a policy.
    pub maximal_access: u32,
}

/// File-system statistics of a share (statvfs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStats {
    /// Preferred I/O / allocation unit in bytes (f_frsize).
    pub block_size: u64,
    pub total_blocks: u64,
    pub free_blocks: u64,
    /// Blocks available to unprivileged users.
    pub available_blocks: u64,
    pub total_files: u64,
    pub free_files: u64,
    pub max_name_len: u64,
}

/// Identifies the owner of a byte-range lock *within* an open. Locks are
/// held by (open, owner); SMB2 can pass `LockOwner(0)` (locks belong to the
/// open), NFSv4 passes its lock-owner id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct LockOwner(pub u64);

/// Times that `set_basic` can change, in order: creation, last access,
/// last write, change. `None` leaves the time as it is.
pub type BasicTimes = [Option<SystemTime>; 4];

/// Resolve GENERIC_* bits to specific rights (MS-SMB2 3.3.5.9 / MS-DTYP
/// generic mapping for files). MAXIMUM_ALLOWED is kept for the caller.
pub fn map_generic(mut a: u32) -> u32 {
    use access::*;
    if a & GENERIC_READ != 0 {
        a |= FILE_GENERIC_READ;
    }
    if a & GENERIC_WRITE != 0 {
        a |= FILE_GENERIC_WRITE;
    }
    if a & GENERIC_EXECUTE != 0 {
        a |= FILE_GENERIC_EXECUTE;
    }
    if a & GENERIC_ALL != 0 {
        a |= FILE_ALL_ACCESS;
    }
    a & !(GENERIC_READ | GENERIC_WRITE | GENERIC_EXECUTE | GENERIC_ALL)
}
