//! The seam between the file service and what keeps its names: a
//! protocol-neutral metadata interface that layers (the metadata cache)
//! implement over a backend (the local POSIX directory, an in-memory tree),
//! as nfs-ganesha's FSAL_MDCACHE stacks over an FSAL and nfs4j's `VfsCache`
//! over a `VirtualFileSystem`.
//!
//! Each store names directories its own way (`Dir`: an fd for POSIX, an
//! inode number in memory) and identifies them by [`DirId`]. A layer that
//! remembers what it read keeps directories open (`Held`) and learns of
//! later changes to their entries from the store's change feed; where a
//! store cannot report changes it revalidates by the directory's
//! [`DirStamp`].

use crate::error::FsResult;
use crate::meta::stats::CacheStats;

/// A directory's identity in its store: (device, inode) for POSIX.
pub type DirId = (u64, u64);

/// What a directory is and when its entries last changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirStamp {
    pub id: DirId,
    /// The later of its modification and change times, in nanoseconds
    /// since the Unix epoch: any create, delete or rename of an entry moves
    /// it, at the store's clock granularity.
    pub changed_ns: i128,
}

/// A change a store reports to the entries of a watched directory, made by
/// anyone (the server itself included: a layer re-reads what changed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreChange {
    /// `name` in `dir` was created, removed or renamed (to or from).
    Entry { dir: DirId, name: String },
    /// Changes were lost: whatever was learnt may be stale.
    Overflow,
}

/// Name lookups, listings and directory handles beneath the file service.
/// Both faces (SMB's path-based one and NFS's handle-based one) resolve
/// names through it.
pub trait MetadataStore: Send + Sync {
    /// How a caller names an open directory.
    type Dir: Copy;
    /// A directory kept open by a layer, to re-read and watch it later.
    type Held: Send;

    /// The identity and change stamp of `dir`.
    fn dir_stamp(&self, dir: Self::Dir) -> FsResult<DirStamp>;

    /// Whether `name` is an entry of `dir` with exactly that spelling.
    fn exists(&self, dir: Self::Dir, name: &str) -> FsResult<bool>;

    /// The stored name of the entry of `dir` equal to `name` under Unicode
    /// lower-casing, or else the entry whose 8.3 short name `name` is
    /// (MS-FSCC 2.1.5.2.1): Windows opens a file by either.
    fn lookup_folded(&self, dir: Self::Dir, name: &str) -> FsResult<Option<String>>;

    /// `name` as stored: exact first, then case-insensitively.
    fn lookup(&self, dir: Self::Dir, name: &str) -> FsResult<Option<String>> {
        if self.exists(dir, name)? {
            return Ok(Some(name.to_string()));
        }
        self.lookup_folded(dir, name)
    }

    /// Every entry name of `dir` (UTF-8 only: other names are not served).
    fn list_names(&self, dir: Self::Dir, each: &mut dyn FnMut(&str)) -> FsResult<()>;

    /// Keep `dir` open.
    fn hold(&self, dir: Self::Dir) -> FsResult<Self::Held>;

    /// The directory a held one is.
    fn held_dir(&self, held: &Self::Held) -> Self::Dir;

    /// Report later changes to the entries of `held` through
    /// [`MetadataStore::drain_changes`]. `false` when the store cannot.
    fn watch(&self, _held: &Self::Held, _id: DirId) -> bool {
        false
    }

    /// Stop reporting changes to `held`'s entries.
    fn unwatch(&self, _held: &Self::Held) {}

    /// Hand every change reported since the last call to `each`. Changes
    /// made before a call returned are in it: a store queues them as they
    /// happen.
    fn drain_changes(&self, _each: &mut dyn FnMut(StoreChange)) {}

    /// Counters of a caching layer; `None` for a backend.
    fn cache_stats(&self) -> Option<CacheStats> {
        None
    }
}
