//! `braid_fs`: the protocol-neutral file service.
//!
//! It implements Windows/NTFS file semantics (MS-FSA) over a local POSIX
//! directory: opens with share modes, delete-on-close, byte-range locks,
//! case-insensitive names, DOS attributes and creation times. It knows no
//! wire format; the SMB (and later NFS) servers map its neutral types.
//!
//! The API is synchronous and thread-safe; async servers call it from
//! `spawn_blocking`. There is no global lock on the I/O path: per-file state
//! lives in a sharded table keyed by (device, inode), each entry with its own
//! mutex.
//!
//! Safety: every client path is validated ([`path`]) and resolved beneath the
//! share root with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.

mod apple_double;
pub mod caching;
pub mod clock;
mod clone;
mod copy;
mod direct;
mod ea;
pub mod error;
mod handle;
mod handle_dir;
mod handle_lock;
mod handle_rename;
pub mod host_changes;
pub mod host_writes;
mod info;
pub mod locks;
pub mod mac_listing;
pub mod mac_streams;
pub mod meta;
mod netatalk_lock;
mod netatalk_meta;
mod open_access;
mod open_table;
pub mod path;
pub mod posix;
mod posix_lock;
pub mod quota;
mod resource_fork_file;
pub mod security;
mod service;
mod service_create;
mod share;
pub mod share_reservation;
pub mod shortname;
pub mod snapshot;
mod sparse;
pub mod state_deferred;
mod state_journal;
pub mod state_store;
pub mod stream;
mod stream_handle;
mod stream_open;
mod sys;
mod time_machine;
mod trim;
mod tunnel;
pub mod types;
mod unconvert;
mod unix_mode;
mod uring;
mod veto_delete;

pub use clock::{Clock, ManualClock, SystemClock};
pub use direct::{DirectWriter, DIRECT_WRITE_MIN};
pub use error::{FsError, FsResult};
pub use handle::OpenHandle;
pub use mac_listing::MacEntryInfo;
pub use resource_fork_file::AppleDoubleOptions;
pub use security::{AccessPolicy, ObjectSecurity};
pub use service::FileService;
pub use share::{CreateModes, HiddenNames, ShareRef};
pub use snapshot::SnapshotConfig;
pub use stream_handle::StreamEntry;
pub use types::{
    access, attr, map_generic, share as share_access, BasicTimes, CreateAction, DirEntry,
    DirectoryRequirement, Disposition, ExtendedAttribute, FileInfo, FileOwner, FsStats, LockOwner,
    OpenParams, Opened, RequestCtx,
};
pub use unconvert::Unconverted;
pub use unix_mode::UnixIdentity;
pub use uring::WriteBuf;
