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
//! The leased directory opens are kept by share and by the directory's
//! file id, which a rename does not change. A change looks up its
//! parent's id (one `openat2` and `fstat`) only on a share where some
//! directory lease is held; elsewhere it costs one uncontended lock.
//!
//! Changes made on the host by other processes break them too
//! (`host_watch.rs`), as host writes break file leases there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use crate::smb::lease::LeaseId;
use crate::smb::session::Open;
use crate::state::Share;

/// Leased directory opens: by lower-cased share name, then by the
/// directory's file id.
type ByDirectory = HashMap<u64, Vec<Weak<Open>>>;

/// The directory opens that hold a directory lease.
#[derive(Default)]
pub struct DirLeases {
    shares: Mutex<HashMap<String, ByDirectory>>,
}

fn live(open: &Weak<Open>) -> Option<Arc<Open>> {
    open.upgrade()
        .filter(|o| !o.closed.load(std::sync::atomic::Ordering::Relaxed))
}

impl DirLeases {
    /// A directory open of `share` (the directory's file id `dir_id`) was
    /// granted a lease.
    pub fn register(&self, share: &str, dir_id: u64, open: &Arc<Open>) {
        let mut shares = self.shares.lock().unwrap();
        let dirs = shares.entry(share.to_lowercase()).or_default();
        dirs.retain(|_, opens| {
            opens.retain(|o| live(o).is_some());
            !opens.is_empty()
        });
        dirs.entry(dir_id).or_default().push(Arc::downgrade(open));
    }

    /// The entry `child_path` (share-relative, `\`-separated, as
    /// `OpenHandle::path` gives it) of `share` changed: break the leases
    /// on its parent directory, except `except` (the changing open's
    /// parent lease).
    pub fn break_parent(&self, share: &Share, child_path: &str, except: Option<LeaseId>) {
        let key = share.name.to_lowercase();
        if self
            .shares
            .lock()
            .unwrap()
            .get(&key)
            .is_none_or(|dirs| dirs.is_empty())
        {
            return;
        }
        let parent = match child_path.trim_end_matches('\\').rsplit_once('\\') {
            Some((p, _)) => p,
            None => "",
        };
        let Some(dir_id) = share.fs.dir_id(parent) else {
            return;
        };
        self.break_dir(&share.name, dir_id, except);
    }

    /// An entry of the directory `dir_id` of `share` changed: break its
    /// leases, except `except`.
    pub fn break_dir(&self, share: &str, dir_id: u64, except: Option<LeaseId>) {
        let key = share.to_lowercase();
        let targets: Vec<Arc<Open>> = {
            let mut shares = self.shares.lock().unwrap();
            let Some(dirs) = shares.get_mut(&key) else {
                return;
            };
            let Some(opens) = dirs.get_mut(&dir_id) else {
                return;
            };
            let targets: Vec<Arc<Open>> = opens.iter().filter_map(live).collect();
            opens.retain(|o| live(o).is_some());
            if opens.is_empty() {
                dirs.remove(&dir_id);
            }
            targets
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
