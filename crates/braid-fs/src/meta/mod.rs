//! The metadata seam and its layers (see `docs/ARCHITECTURE.md`, "The
//! file service stack"): [`store::MetadataStore`] is what the file
//! service resolves names through; [`posix_store::PosixStore`] and
//! [`memory::MemoryStore`] are backends; [`cache::MetadataCache`] is a
//! layer over either, and [`attr_cache::AttrCache`] keeps Braid's xattr
//! metadata per file beside it; [`fd_cache::FdCache`] keeps the fds of
//! closed files briefly for the opens that follow.

pub mod attr_cache;
pub mod cache;
pub mod fd_cache;
pub mod memory;
pub mod posix_store;
pub mod stats;
pub mod store;

#[cfg(test)]
mod attr_cache_tests;
#[cfg(test)]
mod cache_tests;

use std::os::fd::{OwnedFd, RawFd};

pub use attr_cache::{AttrCache, AttrStats, FileStamp, KeptXattr};
pub use cache::MetadataCache;
pub use fd_cache::{FdCache, FdKey, FdLimits, FdMode, FdStats};
pub use memory::MemoryStore;
pub use posix_store::PosixStore;
pub use stats::{CacheBudget, CacheStats};
pub use store::{DirId, DirStamp, MetadataStore, StoreChange};

/// The store a share's files are resolved through: the POSIX backend,
/// alone or under layers.
pub type ShareStore = dyn MetadataStore<Dir = RawFd, Held = OwnedFd>;

/// The backend of a share without layers.
pub(crate) static PLAIN_POSIX: PosixStore = PosixStore::plain();
