//! Persistent opens whose client is away (MS-SMB2 3.3.4.6, 3.3.4.7,
//! 3.3.5.9, 3.3.7.1): a disconnected persistent open keeps its oplock or
//! lease, is never closed for a break, and is restored from the state
//! store after a restart (`smb/persistent.rs`).

use std::sync::{Arc, Mutex, Weak};

use braid_smb_proto::codec::FileId;
use braid_smb_proto::messages::create::oplock_level;

use super::{needs_break, oplock_caching, FileOplocks, Holder, NewOpen};
use crate::smb::lease::{Lease, LeaseId, LeaseState, LeaseTable, H, W};

/// A lease as a persistent open's record kept it.
pub struct RestoredLease {
    pub id: LeaseId,
    pub version: u8,
    pub parent_key: Option<[u8; 16]>,
    pub state: u32,
    pub epoch: u16,
}

impl FileOplocks {
    /// A persistent open's connection was lost (or the server restarted):
    /// it keeps its caching, is sent no break, and blocks the opens that
    /// would need one until it is reconnected or expires.
    pub fn park(&self, key: u64) {
        self.with_holder(key, |h| h.parked = true);
        self.changed.notify_waiters();
    }

    /// MS-SMB2 3.3.5.9: whether a new open needs a break of a disconnected
    /// persistent open's caching; such an open fails (STATUS_FILE_NOT_AVAILABLE
    /// where share modes allow it, as Windows answers a persistent open
    /// without handle caching; Windows defers the open of one with handle
    /// caching until the owner reconnects, which Braid does not).
    pub fn parked_conflict(&self, new: &NewOpen) -> bool {
        if new.stat_open {
            return false;
        }
        let must_go = if new.sharing_violation { H } else { W };
        let broken = |current: u32| needs_break(current, must_go, new.overwrites);
        self.holders.lock().unwrap().iter().any(|h| {
            h.parked
                && match &h.lease {
                    Some(l) => {
                        new.lease.as_ref() != Some(&l.id)
                            && !new.lease_stat_open
                            && broken(l.st.lock().unwrap().state)
                    }
                    None => broken(oplock_caching(h.level)),
                }
        })
    }

    /// A persistent open restored from the state store after a restart:
    /// registered parked, with no connection, holding its oplock `level` or
    /// its lease (added to the lease table as it was).
    pub fn restore(
        self: &Arc<Self>,
        table: &LeaseTable,
        key: u64,
        file_id: FileId,
        level: u8,
        lease: Option<RestoredLease>,
    ) -> Option<Arc<Lease>> {
        let mut holders = self.holders.lock().unwrap();
        let lease = lease.map(|r| {
            // Opens made with one lease key share its lease (MS-SMB2
            // 3.3.5.9.8): a second restored open of the key joins it.
            let shared = holders
                .iter()
                .find_map(|h| h.lease.as_ref().filter(|l| l.id == r.id).cloned());
            if let Some(lease) = shared {
                return lease;
            }
            let lease = Arc::new(Lease {
                id: r.id,
                version: r.version,
                parent_key: r.parent_key,
                file: Arc::downgrade(self),
                st: Mutex::new(LeaseState {
                    state: r.state,
                    breaking_to: None,
                    required: r.state,
                    epoch: r.epoch,
                }),
            });
            table.insert(&lease);
            lease
        });
        holders.push(Holder {
            open_key: key,
            file_id,
            level: if lease.is_some() {
                oplock_level::NONE
            } else {
                level
            },
            breaking_to: None,
            lease: lease.clone(),
            conn: Weak::new(),
            session: Weak::new(),
            stat_open: false,
            purge: None,
            parked: true,
        });
        lease
    }
}
