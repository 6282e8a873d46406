//! What a metadata cache reports, and the bounds all of them share.

use std::sync::atomic::{AtomicU64, Ordering};

/// One cache's counters, as the admin API and `/metrics` show them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache with a name found.
    pub hits: u64,
    /// Lookups answered from the cache with no such name (no scan).
    pub negative_hits: u64,
    /// Lookups the cache could not answer: the backend was asked.
    pub misses: u64,
    /// Names held now.
    pub entries: u64,
    /// Estimated memory held now, in bytes.
    pub bytes: u64,
    /// Cached directories dropped or names re-read because something
    /// changed (or could have) behind the cache's back.
    pub invalidations: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) hits: AtomicU64,
    pub(crate) negative_hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) invalidations: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Limits on what every share's metadata cache holds together; the least
/// recently used directory goes first when they are reached.
#[derive(Debug)]
pub struct CacheBudget {
    max_entries: u64,
    max_bytes: u64,
    entries: AtomicU64,
    bytes: AtomicU64,
}

impl CacheBudget {
    pub fn new(max_entries: u64, max_bytes: u64) -> CacheBudget {
        CacheBudget {
            max_entries,
            max_bytes,
            entries: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    pub fn max_entries(&self) -> u64 {
        self.max_entries
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Whether holding `entries` and `bytes` more would pass a limit.
    pub(crate) fn would_exceed(&self, entries: u64, bytes: u64) -> bool {
        self.entries.load(Ordering::Relaxed) + entries > self.max_entries
            || self.bytes.load(Ordering::Relaxed) + bytes > self.max_bytes
    }

    pub(crate) fn add(&self, entries: u64, bytes: u64) {
        self.entries.fetch_add(entries, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn sub(&self, entries: u64, bytes: u64) {
        self.entries.fetch_sub(entries, Ordering::Relaxed);
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Entries and bytes held now by all caches.
    pub fn used(&self) -> (u64, u64) {
        (
            self.entries.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

impl Default for CacheBudget {
    /// 2,000,000 names and 256 MiB.
    fn default() -> Self {
        CacheBudget::new(2_000_000, 256 << 20)
    }
}
