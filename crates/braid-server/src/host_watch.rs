//! Changes made on the host, by processes other than Braid, to the entries
//! of directories a client watches (CHANGE_NOTIFY) or caches (a directory
//! lease): reported and broken as Braid's own changes are (MS-FSA 2.1.4.17,
//! MS-SMB2 3.3.4.7), so an Explorer window refreshes and a leased listing
//! is read again when a local job drops a file into a share. Samba does
//! the same with inotify (`kernel change notify`, on by default).
//!
//! A directory open is marked (braid-fs `host_changes.rs`) from its first
//! CHANGE_NOTIFY or its directory lease until it is closed. Marks are not
//! recursive: a watch of a tree sees host changes in the directory it was
//! made on, and in subdirectories only while they are watched too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use braid_fs::host_changes::{HostChange, HostChangeFeed, MarkId};
use tokio::io::unix::AsyncFd;

use crate::notify::{self, action, filter};
use crate::session::Open;
use crate::state::{ServerState, Share};

/// One watched directory of one share.
#[derive(Clone)]
struct WatchedDir {
    share: String,
    /// What its listings leave out.
    fs: braid_fs::ShareRef,
    /// Share-relative, `\`-separated, as `OpenHandle::path` gives it.
    path: String,
    /// Its file id, which keys its directory leases.
    dir_id: u64,
}

impl PartialEq for WatchedDir {
    fn eq(&self, other: &Self) -> bool {
        (&self.share, &self.path, self.dir_id) == (&other.share, &other.path, other.dir_id)
    }
}

/// The server's host change feed and what each mark is watched for.
pub struct HostWatch {
    /// Made at start, or by the reload that first adds a share wanting it.
    feed: std::sync::OnceLock<HostChangeFeed>,
    /// One entry per live interest (an open may be watched through two
    /// shares, and several opens watch one directory).
    dirs: Mutex<HashMap<MarkId, Vec<WatchedDir>>>,
}

/// A directory open's interest in host changes; dropping it ends it.
pub struct HostInterest {
    watch: Arc<HostWatch>,
    id: MarkId,
    dir: WatchedDir,
}

impl Drop for HostInterest {
    fn drop(&mut self) {
        let mut dirs = self.watch.dirs.lock().unwrap();
        if let Some(list) = dirs.get_mut(&self.id) {
            if let Some(i) = list.iter().position(|d| *d == self.dir) {
                list.swap_remove(i);
            }
            if list.is_empty() {
                dirs.remove(&self.id);
            }
        }
        drop(dirs);
        if let Some(feed) = self.watch.feed.get() {
            feed.unwatch(self.id);
        }
    }
}

impl HostWatch {
    /// With `wanted` false (no share asks for host changes) no feed is made.
    pub fn new(wanted: bool) -> HostWatch {
        let watch = HostWatch {
            feed: std::sync::OnceLock::new(),
            dirs: Mutex::new(HashMap::new()),
        };
        if wanted {
            watch.make_feed();
        }
        watch
    }

    /// Make the feed if there is none yet; true if this call made it (and
    /// the caller is to `run` it).
    fn make_feed(&self) -> bool {
        if self.feed.get().is_some() {
            return false;
        }
        match HostChangeFeed::new() {
            Ok(f) => self.feed.set(f).is_ok(),
            Err(e) => {
                tracing::warn!(
                    "changes made on the host will not be reported to clients: fanotify: {e} \
                     (needs Linux 5.13; set notify_host_changes = false to silence this)"
                );
                false
            }
        }
    }

    /// Watch the directory `open` is an open of on `share`, if the share
    /// wants host changes and the directory can be marked.
    fn interest(
        self: &Arc<Self>,
        share: &Share,
        open: &Open,
        dir_id: Option<u64>,
    ) -> Option<HostInterest> {
        let feed = self.feed.get()?;
        if !share.notify_host_changes || !open.is_directory {
            return None;
        }
        let dir_id = match dir_id {
            Some(id) => id,
            None => open.handle.info().ok()?.file_id,
        };
        let id = match feed.watch(&open.handle) {
            Ok(id) => id,
            Err(e) => {
                // A file system without file handles, or the mark limit.
                tracing::debug!(share = %share.name, "host changes not watched: {e}");
                return None;
            }
        };
        let dir = WatchedDir {
            share: share.name.clone(),
            fs: share.fs.clone(),
            path: open.handle.path(),
            dir_id,
        };
        self.dirs
            .lock()
            .unwrap()
            .entry(id)
            .or_default()
            .push(dir.clone());
        Some(HostInterest {
            watch: self.clone(),
            id,
            dir,
        })
    }
}

/// Start watching `open` (a directory open of `share`, whose file id the
/// caller may know already) for host changes, once: it is watched until
/// it is closed.
pub fn watch_open(state: &ServerState, share: &Share, open: &Open, dir_id: Option<u64>) {
    let mut slot = open.host_interest.lock().unwrap();
    if slot.is_none() && !open.closed.load(std::sync::atomic::Ordering::Acquire) {
        *slot = state.host_watch.interest(share, open, dir_id);
    }
}

/// A reload added the first share that wants host changes: make the feed
/// and read it, unless that was done already.
pub fn start(state: &Arc<ServerState>) {
    if state.host_watch.make_feed() {
        tokio::spawn(run(state.clone()));
    }
}

/// Read the feed for as long as the server runs.
pub async fn run(state: Arc<ServerState>) {
    let Some(feed) = state.host_watch.feed.get() else {
        return;
    };
    // SAFETY: the feed's fd stays open while the server state (which owns
    // the feed) lives, and this task holds the state.
    let registered = unsafe {
        AsyncFd::register_with_interest(
            std::os::fd::AsRawFd::as_raw_fd(feed),
            tokio::io::Interest::READABLE,
        )
    };
    let fd = match registered {
        Ok(fd) => fd,
        Err(e) => {
            tracing::warn!("changes made on the host will not be reported: {e}");
            return;
        }
    };
    loop {
        let Ok(mut ready) = fd.readable().await else {
            return;
        };
        loop {
            match feed.read() {
                Ok(changes) => dispatch(&state, changes),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    ready.clear_ready();
                    break;
                }
                Err(e) => {
                    tracing::warn!("host change feed failed, no longer read: {e}");
                    return;
                }
            }
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

fn dispatch(state: &ServerState, changes: Vec<HostChange>) {
    for change in changes {
        let dirs: Vec<WatchedDir> = {
            let all = state.host_watch.dirs.lock().unwrap();
            let mut dirs: Vec<WatchedDir> = match change.dir() {
                None => all.values().flatten().cloned().collect(),
                Some(dir) => all.get(&dir).cloned().unwrap_or_default(),
            };
            // Several opens of one directory share its mark: report once.
            dirs.sort_by(|a, b| (&a.share, &a.path).cmp(&(&b.share, &b.path)));
            dirs.dedup();
            dirs
        };
        tracing::trace!(?change, watchers = dirs.len(), "host change");
        for d in &dirs {
            if change == HostChange::Overflow {
                state.notify.overflow(&d.share, &d.path);
            }
            // A name no listing shows (vetoed) changes nothing a client sees.
            let seen: Vec<_> = reports(&change)
                .into_iter()
                .filter(|(_, name, _)| d.fs.lists_name(&d.path, name))
                .collect();
            if seen.is_empty() && change != HostChange::Overflow {
                continue;
            }
            for (act, name, bits) in seen {
                state
                    .notify
                    .report(&d.share, &child(&d.path, name), act, bits);
            }
            state.dir_leases.break_dir(&d.share, d.dir_id, None);
        }
    }
}
