//! Directory leases (MS-SMB2 3.3.5.9.11 with SMB2_GLOBAL_CAP_DIRECTORY_LEASING,
//! 3.3.4.7; MS-FSA 2.1.4.13 breaking the parent directory's oplock).
//!
//! A 3.x client may hold a Read (and Handle) lease on a directory: it then
//! caches the directory's listing and its entries' metadata. Whatever
//! changes an entry through Braid — a create, an overwrite, a delete, a
//! rename in or out, new attributes, times or size (reported when the
//! writer closes, as Windows does) — breaks every lease on the directory
//! to none, except the one whose key the changing open named as its
//! ParentLeaseKey: that client made the change and keeps its cache. The
//! break does not wait for the acknowledgment.
//!
//! The leased directory opens are found by their current paths (braid-fs
//! keeps an open's path current across renames of it or of a directory
//! above it), so the change sites, which already report each change by
//! path to CHANGE_NOTIFY, need no extra system call; with no directory
//! lease granted on a share they cost one uncontended lock.
//!
//! Changes made on the host outside Braid are not seen, as they are not
//! seen by file leases either (docs/ARCHITECTURE.md).

use std::sync::{Arc, Mutex, Weak};

use crate::lease::LeaseId;
use crate::session::Open;

/// The directory opens that hold a directory lease, by share.
#[derive(Default)]
pub struct DirLeases {
    opens: Mutex<Vec<(String, Weak<Open>)>>,
}

impl DirLeases {
    /// A directory open of `share` was granted a lease.
    pub fn register(&self, share: &str, open: &Arc<Open>) {
        let mut opens = self.opens.lock().unwrap();
        opens.retain(|(_, o)| o.strong_count() > 0);
        opens.push((share.to_lowercase(), Arc::downgrade(open)));
    }

    /// The entry `child_path` (share-relative, `\`-separated) of `share`
    /// changed: break the leases on its parent directory, except
    /// `except` (the changing open's parent lease).
    pub fn break_parent(&self, share: &str, child_path: &str, except: Option<LeaseId>) {
        let parent = match child_path.trim_end_matches('\\').rsplit_once('\\') {
            Some((p, _)) => p,
            None => "",
        };
        let targets: Vec<Arc<Open>> = {
            let mut opens = self.opens.lock().unwrap();
            if opens.is_empty() {
                return;
            }
            opens.retain(|(_, o)| o.strong_count() > 0);
            let share = share.to_lowercase();
            let parent = parent.to_lowercase();
            opens
                .iter()
                .filter(|(s, _)| *s == share)
                .filter_map(|(_, o)| o.upgrade())
                .filter(|o| {
                    !o.closed.load(std::sync::atomic::Ordering::Relaxed)
                        && o.handle.path().to_lowercase() == parent
                })
                .collect()
        };
        for open in targets {
            if let Some(oplock) = &open.oplock {
                oplock.file.break_dir_leases(except);
            }
        }
    }
}

/// The lease a change made through `open` spares on the parent directory:
/// its lease's ParentLeaseKey, under its client.
pub fn spared_by(open: &Open) -> Option<LeaseId> {
    let oplock = open.oplock.as_ref()?;
    let lease = oplock.file.lease_of(oplock.key)?;
    lease.parent_key.map(|k| (lease.id.0, k))
}
