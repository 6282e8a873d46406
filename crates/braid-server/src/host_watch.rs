//! Changes made on the host, by processes other than Braid, to what
//! clients of either protocol cache: the marks, the fanotify feeds and
//! their dispatch, with no SMB or NFS type (issue 42: what both protocols
//! use lives above them). Samba does the like with inotify (`kernel change
//! notify`) and, for files, `kernel oplocks`.
//!
//! Directories (braid-fs `host_changes.rs`): a protocol marks a directory
//! whose entries a client watches or caches, and hears of the changes to
//! them through its [`DirChangeListener`] (SMB's reports them to
//! CHANGE_NOTIFY and breaks directory leases: `smb/host_watch.rs`). Marks
//! are not recursive.
//!
//! Files (braid-fs `host_writes.rs`): a protocol marks a file a client
//! caches the data of (an SMB open with read caching, from its first
//! READ; an NFS delegation, from its grant) and drops its interest when
//! that ends; the file's mark is kept idle a while longer, for its next
//! interest, and removed with others in a batch. A host write, truncation,
//! removal or replacement of a marked file is a change from origin
//! [`HOST`] in braid-fs's caching registry (`caching.rs`), so every
//! protocol's holders break by their own rules: SMB leases and oplocks
//! (MS-FSA 2.1.4.12), NFS delegations recalled (RFC 8881 10.4.1). Nothing
//! waits: the host process cannot be held back.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use braid_fs::caching::{CachedFile, Change};
use braid_fs::host_changes::{HostChange, HostChangeFeed, MarkId};
use braid_fs::host_writes::{
    FileMarkId, FileWatch, HostFileChange, HostWriteFeed, IDLE_FOR, IDLE_MAX,
};
use braid_fs::OpenHandle;
use tokio::io::unix::AsyncFd;

use crate::state::{ServerState, Share};

/// The origin of host changes in the caching registry: no protocol is
/// named so, so every protocol's holders are asked.
pub const HOST: &str = "host";

/// One watched directory of one share.
#[derive(Clone)]
pub struct WatchedDir {
    pub share: String,
    /// What its listings leave out.
    pub fs: braid_fs::ShareRef,
    /// Share-relative, `\`-separated, as `OpenHandle::path` gives it.
    pub path: String,
    /// Its file id, which keys its directory leases.
    pub dir_id: u64,
}

impl PartialEq for WatchedDir {
    fn eq(&self, other: &Self) -> bool {
        (&self.share, &self.path, self.dir_id) == (&other.share, &other.path, other.dir_id)
    }
}

/// What a protocol does when the host changes an entry of a directory
/// it watches: `dirs` are the watched directories the change is in (all
/// of them for an overflow), once each.
pub trait DirChangeListener: Send + Sync {
    fn changed(&self, dirs: &[WatchedDir], change: &HostChange);
}

/// A marked file as the caching registry names it.
struct WatchedFile {
    /// Which interest: one file may be watched by several.
    interest: u64,
    share: String,
    file_id: u64,
}

/// The server's host change feeds and what each mark is watched for.
pub struct HostWatch {
    /// Made at start, or by the reload that first adds a share wanting it.
    feed: OnceLock<HostChangeFeed>,
    /// Made with `feed`.
    file_feed: OnceLock<HostWriteFeed>,
    /// One entry per live interest (an open may be watched through two
    /// shares, and several opens watch one directory).
    dirs: Mutex<HashMap<MarkId, Vec<WatchedDir>>>,
    files: Mutex<HashMap<FileMarkId, Vec<WatchedFile>>>,
    next_interest: AtomicU64,
    /// A file's mark was left idle: the sweeper has one to remove later.
    idle_marks: tokio::sync::Notify,
    /// Who hears of directory changes (set at start).
    dir_listener: OnceLock<Arc<dyn DirChangeListener>>,
}

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

/// An interest in writes to a cached file; dropping it ends it.
pub struct FileInterest {
    watch: Arc<HostWatch>,
    file: Option<FileWatch>,
    interest: u64,
}

impl Drop for FileInterest {
    fn drop(&mut self) {
        let Some(file) = self.file.take() else {
            return;
        };
        let mut files = self.watch.files.lock().unwrap();
        if let Some(list) = files.get_mut(&file.id) {
            list.retain(|w| w.interest != self.interest);
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

/// A file to mark: an open handle (SMB) or an object of the POSIX face
/// (NFS).
pub enum FileToWatch<'a> {
    Handle(&'a OpenHandle),
    Object(&'a braid_fs::posix::Object),
}

impl HostWatch {
    /// With `wanted` false (no share asks for host changes) no feed is made.
    pub fn new(wanted: bool) -> HostWatch {
        let watch = HostWatch {
            feed: OnceLock::new(),
            file_feed: OnceLock::new(),
            dirs: Mutex::new(HashMap::new()),
            files: Mutex::new(HashMap::new()),
            next_interest: AtomicU64::new(1),
            idle_marks: tokio::sync::Notify::new(),
            dir_listener: OnceLock::new(),
        };
        if wanted {
            watch.make_feed();
        }
        watch
    }

    /// Who hears of changes to watched directories' entries (once).
    pub fn set_dir_listener(&self, listener: Arc<dyn DirChangeListener>) {
        let _ = self.dir_listener.set(listener);
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

    /// Whether files can be watched for host writes at all.
    pub fn watches_files(&self) -> bool {
        self.file_feed.get().is_some()
    }

    /// Watch file `file_id` of share `share` (open as `file`) for host
    /// writes until the interest is dropped. None: not watched (no feed,
    /// or the file cannot be marked).
    pub fn watch_file(
        self: &Arc<Self>,
        share: &str,
        file_id: u64,
        file: FileToWatch<'_>,
    ) -> Option<FileInterest> {
        let feed = self.file_feed.get()?;
        let watched = match file {
            FileToWatch::Handle(h) => feed.watch(h),
            FileToWatch::Object(o) => feed.watch_object(o),
        };
        let file = match watched {
            Ok(w) => w,
            Err(e) => {
                tracing::debug!(share, "host writes not watched: {e}");
                return None;
            }
        };
        let interest = self.next_interest.fetch_add(1, Ordering::Relaxed);
        self.files
            .lock()
            .unwrap()
            .entry(file.id)
            .or_default()
            .push(WatchedFile {
                interest,
                share: share.to_string(),
                file_id,
            });
        Some(FileInterest {
            watch: self.clone(),
            file: Some(file),
            interest,
        })
    }

    /// Watch directory `handle` of `share` (whose file id the caller may
    /// know already) for changes to its entries, if the share wants host
    /// changes and the directory can be marked.
    pub fn watch_dir(
        self: &Arc<Self>,
        share: &Share,
        handle: &OpenHandle,
        dir_id: Option<u64>,
    ) -> Option<DirInterest> {
        let feed = self.feed.get()?;
        if !share.notify_host_changes {
            return None;
        }
        let dir_id = match dir_id {
            Some(id) => id,
            None => handle.info().ok()?.file_id,
        };
        let id = match feed.watch(handle) {
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
            path: handle.path(),
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

/// The files the host changed are changes from [`HOST`] in the caching
/// registry: each protocol breaks its holders' caching by its own rules.
/// Nothing waits for the acknowledgements.
fn dispatch_files(state: &ServerState, changes: Vec<HostFileChange>) {
    for change in changes {
        let (kind, mut files): (Change, Vec<(String, u64)>) = {
            let files = state.host_watch.files.lock().unwrap();
            let of = |id: &FileMarkId| -> Vec<(String, u64)> {
                files
                    .get(id)
                    .into_iter()
                    .flatten()
                    .map(|w| (w.share.clone(), w.file_id))
                    .collect()
            };
            match change {
                HostFileChange::Written(id) => (Change::Write, of(&id)),
                HostFileChange::Unlinked(id) => (Change::Removed, of(&id)),
                HostFileChange::Overflow => (
                    Change::Write,
                    files
                        .values()
                        .flatten()
                        .map(|w| (w.share.clone(), w.file_id))
                        .collect(),
                ),
            }
        };
        // Several interests (an SMB open and an NFS delegation, two
        // opens) may watch one file: one change each.
        files.sort();
        files.dedup();
        tracing::debug!(?change, files = files.len(), "host change to cached files");
        for (share, file_id) in &files {
            let file = CachedFile {
                share,
                file_id: *file_id,
            };
            drop(state.caching.break_for(HOST, file, kind));
        }
    }
}

fn dispatch(state: &ServerState, changes: Vec<HostChange>) {
    let Some(listener) = state.host_watch.dir_listener.get() else {
        return;
    };
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
        listener.changed(&dirs, &change);
    }
}
