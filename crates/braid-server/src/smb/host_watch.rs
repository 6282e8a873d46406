//! SMB's side of host changes (`crate::host_watch` holds the marks and
//! feeds, protocol-neutral): which opens are watched, and what a change
//! on the host to a watched directory's entries is reported as.
//!
//! A directory open is watched from its first CHANGE_NOTIFY or its
//! directory lease until it is closed; a change to its entries is
//! reported to its watches and breaks its directory leases, as Braid's own
//! changes are (MS-FSA 2.1.4.17, MS-SMB2 3.3.4.7), so an Explorer window
//! refreshes and a leased listing is read again when a local job drops a
//! file into a share.
//!
//! A file open that caches reads (a lease with Read, any oplock) is
//! watched from its first READ until it is closed; a host write reaches
//! its lease or oplock through braid-fs's caching registry
//! (`smb/caching.rs`), as another protocol's write does.

use std::sync::{Arc, Weak};

use braid_fs::host_changes::HostChange;

use crate::host_watch::{DirChangeListener, FileToWatch, HostInterest, WatchedDir};
use crate::smb::lease::R;
use crate::smb::notify::{self, action, filter};
use crate::smb::session::Open;
use crate::state::{ServerState, Share};

/// Start watching `open` (a directory open of `share`, whose file id the
/// caller may know already) for host changes, once: it is watched until
/// it is closed.
pub fn watch_open(state: &ServerState, share: &Share, open: &Open, dir_id: Option<u64>) {
    if !open.is_directory {
        return;
    }
    let mut slot = open.host_interest.lock().unwrap();
    if slot.is_none() && !open.closed.load(std::sync::atomic::Ordering::Acquire) {
        *slot = state
            .host_watch
            .watch_dir(share, &open.handle, dir_id)
            .map(HostInterest::Dir);
    }
}

/// An open's first READ: if the open caches what it reads (a lease with
/// Read, any oplock), watch its file for host writes until it is closed.
/// Not at the open: an open that never reads data (for attributes, a
/// listing, a rename) has nothing cached to go stale, and a file's first
/// mark costs system calls to take and, later, to remove.
pub fn watch_read_cache(state: &ServerState, share: &Share, open: &Open) {
    use std::sync::atomic::Ordering;
    // A load first: every READ passes here, and only the first may write.
    if open.host_watch_tried.load(Ordering::Relaxed)
        || open.host_watch_tried.swap(true, Ordering::Relaxed)
        || !caches_reads(open)
        || !share.notify_host_changes
        || open.is_directory
        || open.handle.stream_key() != 0
        || !state.host_watch.watches_files()
    {
        return;
    }
    let Ok(info) = open.handle.info() else {
        return;
    };
    let mut slot = open.host_interest.lock().unwrap();
    if slot.is_none() && !open.closed.load(Ordering::Acquire) {
        *slot = state
            .host_watch
            .watch_file(&share.name, info.file_id, FileToWatch::Handle(&open.handle))
            .map(HostInterest::File);
    }
}

/// Whether the client may read the file from its cache now.
fn caches_reads(open: &Open) -> bool {
    use braid_smb_proto::messages::create::oplock_level;
    let Some(o) = &open.oplock else {
        return false;
    };
    match o.file.lease_of(o.key) {
        Some(lease) => lease.st.lock().unwrap().state & R != 0,
        None => matches!(
            o.file.level_of(o.key),
            oplock_level::LEVEL_II | oplock_level::EXCLUSIVE | oplock_level::BATCH
        ),
    }
}

/// SMB's listener for changes to watched directories, held weakly: the
/// host watch must not keep the server state alive.
pub struct SmbDirChanges(Weak<ServerState>);

/// For `server.rs`: SMB's listener, to give the host watch.
pub fn dir_listener(state: &Arc<ServerState>) -> Arc<dyn DirChangeListener> {
    Arc::new(SmbDirChanges(Arc::downgrade(state)))
}

impl DirChangeListener for SmbDirChanges {
    fn changed(&self, dirs: &[WatchedDir], change: &HostChange) {
        let Some(state) = self.0.upgrade() else {
            return;
        };
        for d in dirs {
            if *change == HostChange::Overflow {
                state.smb.notify.overflow(&d.share, &d.path);
            }
            // A name no listing shows (vetoed) changes nothing a client sees.
            let seen: Vec<_> = reports(change)
                .into_iter()
                .filter(|(_, name, _)| d.fs.lists_name(&d.path, name))
                .collect();
            if seen.is_empty() && *change != HostChange::Overflow {
                continue;
            }
            for (act, name, bits) in seen {
                state
                    .smb
                    .notify
                    .report(&d.share, &child(&d.path, name), act, bits);
            }
            state.smb.dir_leases.break_dir(&d.share, d.dir_id, None);
        }
    }
}

fn child(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}\\{name}")
    }
}

/// What a host change is reported as (MS-FSCC 2.4.42 actions, MS-SMB2
/// 2.2.35 filters; as Samba's inotify mapping, but a write is a size and
/// last-write change).
fn reports(change: &HostChange) -> Vec<(u32, &str, u32)> {
    const ANY_METADATA: u32 = filter::ATTRIBUTES
        | filter::LAST_WRITE
        | filter::LAST_ACCESS
        | filter::EA
        | filter::SECURITY;
    match change {
        HostChange::Created { name, is_dir, .. } => {
            vec![(action::ADDED, name, notify::name_filter(*is_dir))]
        }
        HostChange::Removed { name, is_dir, .. } => {
            vec![(action::REMOVED, name, notify::name_filter(*is_dir))]
        }
        HostChange::Renamed {
            old, new, is_dir, ..
        } => {
            let f = notify::name_filter(*is_dir);
            vec![
                (action::RENAMED_OLD_NAME, old, f),
                (action::RENAMED_NEW_NAME, new, f),
            ]
        }
        HostChange::Written { name, .. } => {
            vec![(action::MODIFIED, name, filter::SIZE | filter::LAST_WRITE)]
        }
        HostChange::AttributesChanged { name, .. } => {
            vec![(action::MODIFIED, name, ANY_METADATA)]
        }
        HostChange::Overflow => Vec::new(),
    }
}
