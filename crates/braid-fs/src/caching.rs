//! Caching grants across protocols (issue 42, architecture principle 4): an
//! SMB oplock or lease and an NFS delegation on the same file break each
//! other through this one mechanism.
//!
//! Each protocol keeps its own grant table and its own rules (SMB lease
//! keys and break-to levels, MS-SMB2 3.3.4.7; NFS recall and revoke, RFC
//! 8881 10.4) and registers it here as a [`GrantHolder`]. A change made
//! through one protocol (a new open, a write) asks the registry, which
//! finds the other protocols holding caching that the change conflicts
//! with, has each start its breaks at once, and lets the caller wait for
//! their acknowledgement up to a bound. A change made outside the server
//! (a host process's write, seen through fanotify) comes with an origin no
//! protocol is registered as, so every protocol's conflicting holders are
//! asked. Nothing here knows an SMB or NFS
//! type: protocols are names, files are (share, file id), caching is three
//! bits.
//!
//! The bound is measured on tokio's clock, which tests pause and advance
//! (`tokio::time::pause`), so the wait is tested without sleeping.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Caching a client may hold on a file. Both protocols' grants map onto
/// these bits: SMB lease states (MS-SMB2 2.2.13.2.8) and oplock levels
/// seen as lease states, NFS read delegations (READ) and write delegations
/// (READ | WRITE).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caching(u8);

impl Caching {
    pub const NONE: Caching = Caching(0);
    /// Reads may be served from the client's cache.
    pub const READ: Caching = Caching(1);
    /// Writes may be kept in the client's cache.
    pub const WRITE: Caching = Caching(2);
    /// Closes may be deferred (the client keeps its handle open).
    pub const HANDLE: Caching = Caching(4);

    pub fn intersects(self, other: Caching) -> bool {
        self.0 & other.0 != 0
    }

    pub fn is_none(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for Caching {
    type Output = Caching;
    fn bitor(self, other: Caching) -> Caching {
        Caching(self.0 | other.0)
    }
}

/// A file as both protocols name it: the share's name and the file's id
/// (its inode number) within the share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedFile<'a> {
    pub share: &'a str,
    pub file_id: u64,
}

/// What one protocol does to a file that another's caching may conflict
/// with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// A new open of the file; `writes`: with access that can change its
    /// data or its name (write, append; over SMB also delete, which a
    /// rename or removal opens with).
    Open { writes: bool },
    /// The file's data or size changed.
    Write,
    /// The file lost its last name (removed, or replaced by a rename): its
    /// data is stale and a cached handle of it must not be reopened.
    Removed,
}

impl Change {
    /// The caching a holder must have for this change to concern it. The
    /// holder's own rules then decide what to break and to which level
    /// (an SMB read lease, say, is not broken by an open for writing, only
    /// by the write: MS-FSA 2.1.5.1.2 and 2.1.4.12).
    pub fn may_conflict_with(self) -> Caching {
        match self {
            // RFC 8881 10.4.1: any open conflicts with a write delegation;
            // MS-FSA 2.1.5.1.2: a new open breaks write caching.
            Change::Open { writes: false } => Caching::WRITE,
            // RFC 8881 10.4.1: an open for writing also conflicts with
            // read delegations.
            Change::Open { writes: true } => Caching::READ | Caching::WRITE,
            // MS-FSA 2.1.4.12: a write breaks read caching; RFC 8881
            // 10.4: delegations cache data the write made stale.
            Change::Write => Caching::READ | Caching::WRITE,
            // MS-FSA 2.1.5.1.2: handle caching goes too, so no client
            // reopens a handle of a file that is gone.
            Change::Removed => Caching::READ | Caching::WRITE | Caching::HANDLE,
        }
    }
}

/// Resolves once the breaks a holder started are acknowledged (or its own
/// time for them ran out).
pub type BreakWait = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One protocol's grant table, as the registry sees it.
pub trait GrantHolder: Send + Sync {
    /// The caching this protocol's clients hold on `file` now, together.
    fn held(&self, file: CachedFile<'_>) -> Caching;
    /// Break (or recall) the grants on `file` that `change` conflicts
    /// with, by this protocol's rules. The breaks start before this
    /// returns; the future only waits for their acknowledgement.
    fn break_for(&self, file: CachedFile<'_>, change: Change) -> BreakWait;
}

/// The registry of the protocols that cache files of this server.
pub struct CachingGrants {
    holders: RwLock<Vec<(&'static str, Arc<dyn GrantHolder>)>>,
    /// The longest a change waits for other protocols' acknowledgements.
    ack_wait: Duration,
}

impl CachingGrants {
    pub fn new(ack_wait: Duration) -> CachingGrants {
        CachingGrants {
            holders: RwLock::new(Vec::new()),
            ack_wait,
        }
    }

    /// Register `protocol`'s grant table (replacing an earlier one of the
    /// same name).
    pub fn register(&self, protocol: &'static str, holder: Arc<dyn GrantHolder>) {
        let mut holders = self.holders.write().unwrap();
        holders.retain(|(name, _)| *name != protocol);
        holders.push((protocol, holder));
    }

    /// The protocols other than `origin` whose grants on `file` `change`
    /// may conflict with.
    pub fn conflicting(
        &self,
        origin: &str,
        file: CachedFile<'_>,
        change: Change,
    ) -> Vec<(&'static str, Arc<dyn GrantHolder>)> {
        let concern = change.may_conflict_with();
        self.holders
            .read()
            .unwrap()
            .iter()
            .filter(|(name, h)| *name != origin && h.held(file).intersects(concern))
            .cloned()
            .collect()
    }

    /// A change through `origin`: the other protocols' conflicting grants
    /// start breaking now. Await the result to wait for their
    /// acknowledgement, at most the registry's bound; drop it not to wait
    /// (a write, whose breaks need no answer before it goes on).
    pub fn break_for(&self, origin: &str, file: CachedFile<'_>, change: Change) -> BreakWait {
        let waits: Vec<BreakWait> = self
            .conflicting(origin, file, change)
            .into_iter()
            .map(|(_, h)| h.break_for(file, change))
            .collect();
        let bound = self.ack_wait;
        Box::pin(async move {
            if waits.is_empty() {
                return;
            }
            let all = async {
                // The breaks are under way already: awaiting them one after
                // the other takes as long as the slowest.
                for w in waits {
                    w.await;
                }
            };
            let _ = tokio::time::timeout(bound, all).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tokio::sync::Notify;

    /// A protocol's table reduced to what the registry sees: the caching
    /// held on one file, the breaks asked of it, and an acknowledgement
    /// the test sends (or never sends).
    struct Table {
        held: Mutex<Caching>,
        breaks: Mutex<Vec<(String, u64, Change)>>,
        ack: Arc<Notify>,
    }

    impl Table {
        fn holding(c: Caching) -> Arc<Table> {
            Arc::new(Table {
                held: Mutex::new(c),
                breaks: Mutex::new(Vec::new()),
                ack: Arc::new(Notify::new()),
            })
        }
        fn breaks(&self) -> Vec<(String, u64, Change)> {
            self.breaks.lock().unwrap().clone()
        }
    }

    impl GrantHolder for Table {
        fn held(&self, file: CachedFile<'_>) -> Caching {
            if file.file_id == 7 {
                *self.held.lock().unwrap()
            } else {
                Caching::NONE
            }
        }
        fn break_for(&self, file: CachedFile<'_>, change: Change) -> BreakWait {
            self.breaks
                .lock()
                .unwrap()
                .push((file.share.to_string(), file.file_id, change));
            let ack = self.ack.clone();
            Box::pin(async move { ack.notified().await })
        }
    }

    const FILE: CachedFile<'static> = CachedFile {
        share: "both",
        file_id: 7,
    };

    fn registry(smb: &Arc<Table>, nfs: &Arc<Table>) -> CachingGrants {
        let r = CachingGrants::new(Duration::from_secs(35));
        r.register("smb", smb.clone());
        r.register("nfs", nfs.clone());
        r
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_open_breaks_write_caching_of_the_other_protocol_only() {
        let smb = Table::holding(Caching::READ | Caching::WRITE | Caching::HANDLE);
        let nfs = Table::holding(Caching::READ);
        let r = registry(&smb, &nfs);
        // From NFS: SMB's write caching conflicts; NFS's own is not asked.
        drop(r.break_for("nfs", FILE, Change::Open { writes: false }));
        assert_eq!(
            smb.breaks(),
            vec![("both".into(), 7, Change::Open { writes: false })]
        );
        assert!(nfs.breaks().is_empty());
        // From SMB: NFS holds a read delegation, which a read open leaves.
        drop(r.break_for("smb", FILE, Change::Open { writes: false }));
        assert!(nfs.breaks().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_open_or_a_write_recalls_read_caching() {
        let smb = Table::holding(Caching::READ);
        let nfs = Table::holding(Caching::READ);
        let r = registry(&smb, &nfs);
        drop(r.break_for("smb", FILE, Change::Open { writes: true }));
        assert_eq!(nfs.breaks().len(), 1);
        drop(r.break_for("nfs", FILE, Change::Write));
        assert_eq!(smb.breaks(), vec![("both".into(), 7, Change::Write)]);
    }

    #[tokio::test(start_paused = true)]
    async fn another_file_or_no_caching_asks_nobody() {
        let smb = Table::holding(Caching::NONE);
        let nfs = Table::holding(Caching::HANDLE);
        let r = registry(&smb, &nfs);
        let other = CachedFile {
            share: "both",
            file_id: 8,
        };
        r.break_for("nfs", FILE, Change::Write).await;
        r.break_for("smb", FILE, Change::Open { writes: true })
            .await;
        r.break_for("smb", other, Change::Write).await;
        assert!(smb.breaks().is_empty() && nfs.breaks().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_ends_at_the_acknowledgement() {
        let smb = Table::holding(Caching::READ | Caching::WRITE);
        let nfs = Table::holding(Caching::NONE);
        let r = registry(&smb, &nfs);
        let start = tokio::time::Instant::now();
        let wait = r.break_for("nfs", FILE, Change::Open { writes: false });
        let ack = smb.ack.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            ack.notify_one();
        });
        wait.await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_is_bounded_when_no_acknowledgement_comes() {
        let smb = Table::holding(Caching::NONE);
        let nfs = Table::holding(Caching::READ | Caching::WRITE);
        let r = registry(&smb, &nfs);
        let start = tokio::time::Instant::now();
        r.break_for("smb", FILE, Change::Open { writes: false })
            .await;
        assert_eq!(start.elapsed(), Duration::from_secs(35));
        assert_eq!(nfs.breaks().len(), 1);
    }

    #[test]
    fn registering_again_replaces() {
        let first = Table::holding(Caching::WRITE);
        let second = Table::holding(Caching::WRITE);
        let r = CachingGrants::new(Duration::from_secs(1));
        r.register("smb", first.clone());
        r.register("smb", second.clone());
        let found = r.conflicting("nfs", FILE, Change::Write);
        assert_eq!(found.len(), 1);
        drop(r.break_for("nfs", FILE, Change::Write));
        assert!(first.breaks().is_empty());
        assert_eq!(second.breaks().len(), 1);
    }
}
