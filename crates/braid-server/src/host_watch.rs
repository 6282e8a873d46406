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
//!
//! A file open that caches reads (a lease with Read, any oplock) is
//! watched too (braid-fs `host_writes.rs`), from its first READ until it
//! is closed; the file's mark is kept idle a while longer, for its next
//! open, and removed with others in a batch. A host write breaks the
//! file's leases and oplocks as a write through another open would
//! (MS-FSA 2.1.4.12), and removing or
//! replacing the file breaks handle caching as well, so a client does not
//! go on reading what it cached, or reopening a cached handle of a file
//! that is gone. Windows does this for local opens; Samba only with
//! `kernel oplocks`, off by default.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use braid_fs::host_changes::{HostChange, HostChangeFeed, MarkId};
use braid_fs::host_writes::{
    FileMarkId, FileWatch, HostFileChange, HostWriteFeed, IDLE_FOR, IDLE_MAX,
};
use tokio::io::unix::AsyncFd;

use crate::smb::lease::{H, R, W};
use crate::smb::notify::{self, action, filter};
use crate::smb::oplock::FileOplocks;
use crate::smb::session::Open;
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

/// The server's host change feeds and what each mark is watched for.
pub struct HostWatch {
    /// Made at start, or by the reload that first adds a share wanting it.
    feed: std::sync::OnceLock<HostChangeFeed>,
    /// Made with `feed`.
    file_feed: std::sync::OnceLock<HostWriteFeed>,
    /// One entry per live interest (an open may be watched through two
    /// shares, and several opens watch one directory).
    dirs: Mutex<HashMap<MarkId, Vec<WatchedDir>>>,
    files: Mutex<HashMap<FileMarkId, Vec<CachedOpen>>>,
    /// A file's mark was left idle: the sweeper has one to remove later.
    idle_marks: tokio::sync::Notify,
}

/// A cached open of a marked file: its oplock key and its file's caching
/// state.
type CachedOpen = (u64, Weak<FileOplocks>);

/// An open's interest in host changes; dropping it ends it.
pub enum HostInterest {
    Dir(DirInterest),
    File(FileInterest),
}

/// A directory open's interest in changes to its entries.
pub struct DirInterest {
    watch: Arc<HostWatch>,
    id: MarkId,
    dir: WatchedDir,
}

/// A cached file open's interest in writes to its file.
pub struct FileInterest {
    watch: Arc<HostWatch>,
    file: Option<FileWatch>,
    open_key: u64,
}

impl Drop for FileInterest {
    fn drop(&mut self) {
        let Some(file) = self.file.take() else {
            return;
        };
        let mut files = self.watch.files.lock().unwrap();
        if let Some(list) = files.get_mut(&file.id) {
            list.retain(|(k, _)| *k != self.open_key);
            if list.is_empty() {
                files.remove(&file.id);
            }
        }
        drop(files);
        if let Some(feed) = self.watch.file_feed.get() {
            if feed.unwatch(file, std::time::Instant::now()) {
                self.watch.idle_marks.notify_one();
            }
        }
    }
}

impl Drop for DirInterest {
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
            file_feed: std::sync::OnceLock::new(),
            dirs: Mutex::new(HashMap::new()),
            files: Mutex::new(HashMap::new()),
            idle_marks: tokio::sync::Notify::new(),
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
            Ok(f) => {
                match HostWriteFeed::with_idle_limits(IDLE_FOR, idle_mark_limit()) {
                    Ok(files) => {
                        let _ = self.file_feed.set(files);
                    }
                    Err(e) => tracing::warn!(
                        "writes made on the host will not break clients' caching of files: \
                         fanotify: {e}"
                    ),
                }
                self.feed.set(f).is_ok()
            }
            Err(e) => {
                tracing::warn!(
                    "changes made on the host will not be reported to clients: fanotify: {e} \
                     (needs Linux 5.13; set notify_host_changes = false to silence this)"
                );
                false
            }
        }
    }

    /// Watch the file `open` is an open of for host writes.
    fn file_interest(self: &Arc<Self>, share: &Share, open: &Open) -> Option<FileInterest> {
        let feed = self.file_feed.get()?;
        let oplock = open.oplock.as_ref()?;
        if !share.notify_host_changes || open.is_directory || open.handle.stream_key() != 0 {
            return None;
        }
        let file = match feed.watch(&open.handle) {
            Ok(w) => w,
            Err(e) => {
                tracing::debug!(share = %share.name, "host writes not watched: {e}");
                return None;
            }
        };
        self.files
            .lock()
            .unwrap()
            .entry(file.id)
            .or_default()
            .push((oplock.key, Arc::downgrade(&oplock.file)));
        Some(FileInterest {
            watch: self.clone(),
            file: Some(file),
            open_key: oplock.key,
        })
    }

    /// Watch the directory `open` is an open of on `share`, if the share
    /// wants host changes and the directory can be marked.
    fn interest(
        self: &Arc<Self>,
        share: &Share,
        open: &Open,
        dir_id: Option<u64>,
    ) -> Option<DirInterest> {
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
        Some(DirInterest {
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
        *slot = state
            .host_watch
            .interest(share, open, dir_id)
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
    {
        return;
    }
    let mut slot = open.host_interest.lock().unwrap();
    if slot.is_none() && !open.closed.load(Ordering::Acquire) {
        *slot = state
            .host_watch
            .file_interest(share, open)
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

/// A reload added the first share that wants host changes: make the feed
/// and read it, unless that was done already.
pub fn start(state: &Arc<ServerState>) {
    if state.host_watch.make_feed() {
        tokio::spawn(run(state.clone()));
    }
}

/// Read the feeds for as long as the server runs.
pub async fn run(state: Arc<ServerState>) {
    tokio::spawn(sweep_idle_marks(state.clone()));
    let files = state.clone();
    tokio::spawn(async move {
        if let Some(feed) = files.host_watch.file_feed.get() {
            read_feed(feed, FILE_EVENTS_SETTLE, HostWriteFeed::read, |c| {
                dispatch_files(&files, c)
            })
            .await;
        }
    });
    if let Some(feed) = state.host_watch.feed.get() {
        read_feed(feed, Duration::ZERO, HostChangeFeed::read, |c| {
            dispatch(&state, c)
        })
        .await;
    }
}

/// Remove the file marks left idle for long enough, in batches: the
/// kernel hands each removal to a worker thread, and one wake-up of it
/// serves a whole batch.
async fn sweep_idle_marks(state: Arc<ServerState>) {
    let Some(feed) = state.host_watch.file_feed.get() else {
        return;
    };
    loop {
        match feed.sweep(std::time::Instant::now()) {
            Some(due) => {
                // Those idle a little later go in the same batch.
                tokio::time::sleep_until((due + IDLE_SWEEP_SLACK).into()).await;
            }
            None => state.host_watch.idle_marks.notified().await,
        }
    }
}

/// Each idle mark keeps a descriptor: at most an eighth of the process's
/// descriptor limit goes to them.
fn idle_mark_limit() -> usize {
    // SAFETY: getrlimit fills the struct it is given.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: plain syscall into the struct above.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    usize::try_from(lim.rlim_cur / 8).map_or(IDLE_MAX, |n| n.min(IDLE_MAX))
}

/// How much past its time an idle mark may wait for the next sweep.
const IDLE_SWEEP_SLACK: Duration = Duration::from_secs(1);

/// How long the file feed is left to fill once it is readable. Braid's own
/// writes to a marked file queue events too; while one is queued, the
/// kernel merges the next into it (same file, same process) without
/// waking the reader, so a write stream through Braid wakes the reader
/// at most once per this, rather than once per write. A host write's
/// break goes out this much later.
const FILE_EVENTS_SETTLE: Duration = Duration::from_millis(10);

/// Read `feed` whenever it is readable, `settle` after it became so,
/// handing what `read` returns to `on`, until it fails.
async fn read_feed<F: AsRawFd, T>(
    feed: &F,
    settle: Duration,
    read: impl Fn(&F) -> std::io::Result<Vec<T>>,
    mut on: impl FnMut(Vec<T>),
) {
    // SAFETY: the feed's fd stays open while the server state (which owns
    // the feed, and which the caller holds) lives.
    let registered =
        unsafe { AsyncFd::register_with_interest(feed.as_raw_fd(), tokio::io::Interest::READABLE) };
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
        if !settle.is_zero() {
            tokio::time::sleep(settle).await;
        }
        loop {
            match read(feed) {
                Ok(changes) => on(changes),
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

/// Break the caching of the files the host changed.
fn dispatch_files(state: &ServerState, changes: Vec<HostFileChange>) {
    for change in changes {
        let (caching, cached) = {
            let files = state.host_watch.files.lock().unwrap();
            let of = |id| files.get(&id).into_iter().flatten();
            match change {
                HostFileChange::Written(id) => (R | W, of(id).cloned().collect::<Vec<_>>()),
                HostFileChange::Unlinked(id) => (R | W | H, of(id).cloned().collect()),
                HostFileChange::Overflow => (R | W, files.values().flatten().cloned().collect()),
            }
        };
        let mut broken: Vec<Arc<FileOplocks>> = Vec::new();
        for file in cached.iter().filter_map(|(_, f)| f.upgrade()) {
            if !broken.iter().any(|b| Arc::ptr_eq(b, &file)) {
                broken.push(file);
            }
        }
        tracing::debug!(?change, files = broken.len(), "host change to cached files");
        for file in broken {
            file.break_for_host_change(caching);
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
                state.smb.notify.overflow(&d.share, &d.path);
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
                    .smb
                    .notify
                    .report(&d.share, &child(&d.path, name), act, bits);
            }
            state.smb.dir_leases.break_dir(&d.share, d.dir_id, None);
        }
    }
}
