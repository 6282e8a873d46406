//! Shares: an exported directory, held as an `O_PATH` fd, plus a registry of
//! the share's opens (used by rename to find and update affected opens).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::clock::Clock;
use crate::error::{FsError, FsResult};
use crate::handle::HandleInner;
use crate::meta::{
    AttrCache, AttrStats, CacheBudget, CacheStats, FdCache, MetadataCache, PosixStore, ShareStore,
    PLAIN_POSIX,
};
use crate::resource_fork_file::AppleDoubleOptions;
use crate::snapshot::{SnapshotConfig, Snapshots};
use crate::sparse::FreeSpaceHint;
use crate::tunnel::Tunnel;

const SHARDS: usize = 16;

pub(crate) struct Share {
    pub(crate) name: String,
    pub(crate) root_path: PathBuf,
    pub(crate) root: OwnedFd,
    opens: Vec<Mutex<HashMap<u64, Weak<HandleInner>>>>,
    /// Large aligned writes bypass the page cache (`direct.rs`).
    direct_writes: AtomicBool,
    /// Byte-range locks are mirrored as kernel locks (`posix_lock.rs`).
    posix_locking: AtomicBool,
    /// Named streams (`file:name:$DATA`) can be opened.
    named_streams: AtomicBool,
    /// The macOS streams AFP_AfpInfo and AFP_Resource follow Samba's
    /// vfs_fruit rules (`mac_streams.rs`).
    macos: AtomicBool,
    /// AFP_AfpInfo is served from Netatalk's metadata xattr
    /// (`netatalk_meta.rs`) rather than a named stream.
    netatalk_metadata: AtomicBool,
    /// Opens test and take Netatalk's open and deny-mode locks
    /// (`netatalk_lock.rs`).
    netatalk_locking: AtomicBool,
    /// Where resource forks are kept and how macOS's own AppleDouble
    /// sidecars are treated (`resource_fork_file.rs`); unset: in streams.
    apple_double: OnceLock<AppleDoubleOptions>,
    /// A directory holding only vetoed names can be deleted
    /// (`veto_delete.rs`).
    delete_veto_files: AtomicBool,
    /// Names shown as hidden; unset: none.
    hidden: OnceLock<HiddenNames>,
    /// Names neither listed nor opened (Samba's `veto files`); unset: none.
    veto: OnceLock<Vec<String>>,
    /// Unix modes of new files and directories; unset: 0666 / 0777 less
    /// the process umask.
    create_modes: OnceLock<CreateModes>,
    /// Previous versions of the share (`snapshot.rs`); unset: none.
    snapshots: OnceLock<Snapshots>,
    /// A snapshot's view: its time (Unix seconds). Such a share refuses
    /// every change ([`FsError::WriteProtected`]).
    snapshot_time: Option<i64>,
    /// Long names of files deleted lately, by short name (`tunnel.rs`).
    pub(crate) tunnel: Tunnel,
    /// What the file system had free lately (`sparse.rs`).
    pub(crate) free_space: FreeSpaceHint,
    /// Its file system punches holes (`trim.rs`); unset: not asked yet.
    pub(crate) trims: OnceLock<bool>,
    /// What names are resolved through (`meta/`); unset: the POSIX
    /// backend with no layer.
    names: OnceLock<Box<ShareStore>>,
    /// Braid's xattr metadata and birth times per file (`meta/attr_cache.rs`);
    /// set with the metadata cache.
    attrs: OnceLock<AttrCache>,
    /// The fds of closed files kept for the opens that follow
    /// (`meta/fd_cache.rs`); set with the metadata cache.
    fds: OnceLock<Arc<FdCache>>,
}

/// Unix permission bits for what clients create (Samba's `create mask`
/// and `directory mask`): a new file gets 0666 & `file_mask`, a new
/// directory 0777 & `directory_mask`, exactly, the umask aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateModes {
    pub file_mask: u32,
    pub directory_mask: u32,
}

/// Names a share shows with FILE_ATTRIBUTE_HIDDEN whatever their stored
/// attributes, as Samba's `hide dot files` and `hide files` do: Unix
/// dot files, and names matching a pattern. Only what is reported
/// changes; the stored attributes (which decide, for one, whether an
/// overwrite must name HIDDEN, MS-FSA 2.1.5.1.2) stay as they are.
#[derive(Debug, Clone, Default)]
pub struct HiddenNames {
    pub dot_files: bool,
    /// `*` and `?` wildcards, matched case-insensitively against the last
    /// component of a name.
    pub patterns: Vec<String>,
}

impl HiddenNames {
    /// Whether `name` (a file name, or a share-relative path whose last
    /// component is taken, with any `:stream` suffix left off) is hidden.
    pub fn hides(&self, name: &str) -> bool {
        let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
        let last = last.split(':').next().unwrap_or(last);
        if last.is_empty() || last == "." || last == ".." {
            return false;
        }
        (self.dot_files && last.starts_with('.'))
            || self.patterns.iter().any(|p| glob_match(p, last))
    }
}

/// `*` (any run) and `?` (one character) wildcards, case-insensitive.
fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().flat_map(char::to_lowercase).collect();
    let n: Vec<char> = name.chars().flat_map(char::to_lowercase).collect();
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was, and the name position it now covers up to.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

impl Share {
    pub(crate) fn new(name: String, root_path: PathBuf, root: OwnedFd) -> Share {
        Share {
            name,
            root_path,
            root,
            opens: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            direct_writes: AtomicBool::new(false),
            posix_locking: AtomicBool::new(true),
            named_streams: AtomicBool::new(true),
            macos: AtomicBool::new(true),
            netatalk_metadata: AtomicBool::new(false),
            netatalk_locking: AtomicBool::new(false),
            apple_double: OnceLock::new(),
            delete_veto_files: AtomicBool::new(false),
            hidden: OnceLock::new(),
            veto: OnceLock::new(),
            create_modes: OnceLock::new(),
            snapshots: OnceLock::new(),
            snapshot_time: None,
            tunnel: Tunnel::default(),
            free_space: FreeSpaceHint::default(),
            trims: OnceLock::new(),
            names: OnceLock::new(),
            attrs: OnceLock::new(),
            fds: OnceLock::new(),
        }
    }

    /// The read-only view of this share's snapshot at `root` (taken at
    /// `time`): the same name and options, its own root and opens.
    pub(crate) fn view_of_snapshot(&self, root_path: PathBuf, root: OwnedFd, time: i64) -> Share {
        let view = Share {
            snapshot_time: Some(time),
            ..Share::new(self.name.clone(), root_path, root)
        };
        view.posix_locking
            .store(self.posix_locking(), Ordering::Relaxed);
        view.named_streams.store(
            self.named_streams.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        view.macos.store(self.macos(), Ordering::Relaxed);
        view.netatalk_metadata.store(
            self.netatalk_metadata.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        view.netatalk_locking.store(
            self.netatalk_locking.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        if let Some(a) = self.apple_double.get() {
            let _ = view.apple_double.set(*a);
        }
        if let Some(h) = self.hidden.get() {
            let _ = view.hidden.set(h.clone());
        }
        if let Some(v) = self.veto.get() {
            let _ = view.veto.set(v.clone());
        }
        view
    }

    /// Whether changes are refused: the share is a snapshot's view.
    pub(crate) fn read_only(&self) -> bool {
        self.snapshot_time.is_some()
    }

    /// Refuse a change in a snapshot's view.
    pub(crate) fn check_writable(&self) -> FsResult<()> {
        if self.read_only() {
            return Err(FsError::WriteProtected);
        }
        Ok(())
    }

    /// Whether `name`, an entry of the share's root directory, is the
    /// directory holding the share's snapshots, which the live share
    /// neither lists nor opens.
    pub(crate) fn hides_snapshot_dir(&self, name: &[u8]) -> bool {
        self.snapshots
            .get()
            .and_then(Snapshots::hidden_root_entry)
            .is_some_and(|d| d.as_bytes() == name)
    }

    /// The mode a new file (or directory) gets, if the share sets one.
    pub(crate) fn create_mode(&self, is_dir: bool) -> Option<libc::mode_t> {
        self.create_modes.get().map(|m| {
            if is_dir {
                0o777 & m.directory_mask
            } else {
                0o666 & m.file_mask
            }
        })
    }

    /// Whether the on-disk name `name` is vetoed: a listing asks this of
    /// every entry, so a share without `veto_files` answers before
    /// decoding anything.
    pub(crate) fn vetoes_entry(&self, name: &[u8]) -> bool {
        self.veto.get().is_some() && std::str::from_utf8(name).is_ok_and(|n| self.vetoes(n))
    }

    /// Whether `name`, one path component, is vetoed.
    pub(crate) fn vetoes(&self, name: &str) -> bool {
        let Some(patterns) = self.veto.get() else {
            return false;
        };
        let name = name.split(':').next().unwrap_or(name);
        !name.is_empty()
            && name != "."
            && name != ".."
            && patterns.iter().any(|p| glob_match(p, name))
    }

    /// A path that names a vetoed file or passes through a vetoed
    /// directory does not exist, as far as clients can tell: as Samba
    /// answers, OBJECT_NAME_NOT_FOUND for the last component and
    /// OBJECT_PATH_NOT_FOUND for one on the way.
    pub(crate) fn check_veto(&self, comps: &[String]) -> FsResult<()> {
        for (i, c) in comps.iter().enumerate() {
            let snapshot_dir =
                i == 0 && self.snapshots.get().is_some() && self.names_snapshot_dir(c);
            if snapshot_dir || self.vetoes(c) {
                return Err(if i + 1 == comps.len() {
                    FsError::NotFound
                } else {
                    FsError::PathNotFound
                });
            }
        }
        Ok(())
    }

    /// Whether a client's name for a root entry (any case, or its 8.3
    /// short name) names the snapshot directory.
    fn names_snapshot_dir(&self, name: &str) -> bool {
        let Some(dir) = self.snapshots.get().and_then(Snapshots::hidden_root_entry) else {
            return false;
        };
        let name = name.split(':').next().unwrap_or(name);
        name.eq_ignore_ascii_case(&dir)
            || name.eq_ignore_ascii_case(&crate::shortname::short_name(&dir))
    }

    /// Whether the share shows `name` as hidden ([`HiddenNames::hides`]).
    pub(crate) fn hides(&self, name: &str) -> bool {
        self.hidden.get().is_some_and(|h| h.hides(name))
    }

    pub(crate) fn direct_writes(&self) -> bool {
        self.direct_writes.load(Ordering::Relaxed)
    }

    pub(crate) fn delete_veto_files(&self) -> bool {
        self.delete_veto_files.load(Ordering::Relaxed)
    }

    pub(crate) fn posix_locking(&self) -> bool {
        self.posix_locking.load(Ordering::Relaxed)
    }

    pub(crate) fn macos(&self) -> bool {
        self.macos.load(Ordering::Relaxed)
    }

    /// Whether a path may name a stream: with streams off, any `:` in a
    /// name is an invalid name, as on Samba without a streams module.
    pub(crate) fn check_stream_syntax(&self, path: &str) -> FsResult<()> {
        if !self.named_streams.load(Ordering::Relaxed) && path.contains(':') {
            return Err(FsError::InvalidName);
        }
        Ok(())
    }

    /// The metadata store names are resolved through.
    pub(crate) fn names(&self) -> &ShareStore {
        match self.names.get() {
            Some(store) => store.as_ref(),
            None => &PLAIN_POSIX,
        }
    }

    /// The attribute layer, when the share caches metadata.
    pub(crate) fn attrs(&self) -> Option<&AttrCache> {
        self.attrs.get()
    }

    /// The share's kept fds, when it has a metadata cache.
    pub(crate) fn fds(&self) -> Option<&Arc<FdCache>> {
        self.fds.get()
    }

    pub(crate) fn root_fd(&self) -> RawFd {
        self.root.as_raw_fd()
    }

    fn shard(&self, id: u64) -> std::sync::MutexGuard<'_, HashMap<u64, Weak<HandleInner>>> {
        self.opens[(id as usize) % SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn register(&self, id: u64, h: Weak<HandleInner>) {
        self.shard(id).insert(id, h);
    }

    pub(crate) fn unregister(&self, id: u64) {
        self.shard(id).remove(&id);
    }

    /// Snapshot of all live opens of the share.
    pub(crate) fn all_opens(&self) -> Vec<Arc<HandleInner>> {
        let mut v = Vec::new();
        for s in &self.opens {
            let m = s.lock().unwrap_or_else(|p| p.into_inner());
            v.extend(m.values().filter_map(Weak::upgrade));
        }
        v
    }
}

/// A reference to an exported share. Cheap to clone.
#[derive(Clone)]
pub struct ShareRef(pub(crate) Arc<Share>);

impl ShareRef {
    /// Whether both refer to one export (not merely the same name or path).
    pub fn is(&self, other: &ShareRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Resolve names through a metadata cache (`meta/cache.rs`) bounded,
    /// with every other share's, by `budget`. Set once, before the share
    /// is served; unset, names go straight to the POSIX backend.
    pub fn set_metadata_cache(&self, budget: Arc<CacheBudget>, clock: Arc<dyn Clock>) {
        let cache = MetadataCache::new(PosixStore::watching(), clock.clone(), budget.clone());
        let _ = self.0.names.set(Box::new(cache));
        let _ = self.0.attrs.set(AttrCache::new(clock, budget));
    }

    /// A metadata cache that skips invalidation: only for the tests that
    /// prove the coherence suite catches a stale cache.
    #[doc(hidden)]
    pub fn set_broken_metadata_cache(&self, budget: Arc<CacheBudget>, clock: Arc<dyn Clock>) {
        let cache = MetadataCache::new(PosixStore::watching(), clock.clone(), budget.clone());
        let _ = self.0.names.set(Box::new(cache.skipping_invalidation()));
        let attrs = AttrCache::new(clock, budget).skipping_validation();
        let _ = self.0.attrs.set(attrs);
    }

    /// Keep the fds of closed files for the opens that follow
    /// (`meta/fd_cache.rs`). Set once, before the share is served.
    pub fn set_fd_cache(&self, cache: Arc<FdCache>) {
        let _ = self.0.fds.set(cache);
    }

    /// The share's kept fds (`None` without a metadata cache): for the
    /// NFS face to share, and for the code that takes host leases to
    /// drop before it asks ([`FdCache::forget_inode`]).
    pub fn fd_cache(&self) -> Option<Arc<FdCache>> {
        self.0.fds.get().cloned()
    }

    /// The metadata cache's counters; `None` when the share has none.
    pub fn metadata_cache_stats(&self) -> Option<CacheStats> {
        self.0.names().cache_stats()
    }

    /// The attribute layer's counters; `None` when the share has none.
    pub fn attr_cache_stats(&self) -> Option<AttrStats> {
        self.0.attrs().map(AttrCache::stats)
    }
    /// Let large aligned writes bypass the page cache (off by default).
    pub fn set_direct_writes(&self, on: bool) {
        self.0.direct_writes.store(on, Ordering::Relaxed);
    }
    /// Mirror byte-range locks as kernel (POSIX) locks, so that local
    /// processes see them and theirs hold SMB clients off (on by default).
    pub fn set_posix_locking(&self, on: bool) {
        self.0.posix_locking.store(on, Ordering::Relaxed);
    }
    /// Serve named streams (on by default). Off: a name with a `:` is
    /// invalid, so no data goes into xattrs that a backup could drop.
    pub fn set_named_streams(&self, on: bool) {
        self.0.named_streams.store(on, Ordering::Relaxed);
    }
    /// Whether named streams are served ([`ShareRef::set_named_streams`]).
    pub fn named_streams(&self) -> bool {
        self.0.named_streams.load(Ordering::Relaxed)
    }
    /// Give the macOS streams AFP_AfpInfo (Finder metadata) and
    /// AFP_Resource (the resource fork) the rules Samba's vfs_fruit gives
    /// them with `fruit:metadata = stream` and `fruit:resource = stream`
    /// (`mac_streams.rs`; on by default). Either way they are stored as
    /// any named stream is, so a share moves between Samba and Braid.
    pub fn set_macos(&self, on: bool) {
        self.0.macos.store(on, Ordering::Relaxed);
    }
    /// Whether the macOS stream rules apply ([`ShareRef::set_macos`]).
    pub fn macos(&self) -> bool {
        self.0.macos()
    }
    /// Serve AFP_AfpInfo from the Finder info of Netatalk's metadata xattr
    /// `user.org.netatalk.Metadata` (`netatalk_meta.rs`), as Samba's
    /// vfs_fruit does with `fruit:metadata = netatalk`, its default; off:
    /// from the named stream, as with `fruit:metadata = stream`.
    pub fn set_netatalk_metadata(&self, on: bool) {
        self.0.netatalk_metadata.store(on, Ordering::Relaxed);
    }
    /// Whether AFP_AfpInfo opens of this share read and write Netatalk's
    /// metadata xattr ([`ShareRef::set_netatalk_metadata`]).
    pub fn netatalk_metadata(&self) -> bool {
        self.0.macos() && self.0.netatalk_metadata.load(Ordering::Relaxed)
    }
    /// Opens of files test Netatalk's open and deny-mode locks and take
    /// their own (`netatalk_lock.rs`), as Samba's vfs_fruit does with
    /// `fruit:locking = netatalk`: AFP clients of a Netatalk serving the
    /// same directory and SMB clients then respect each other's share
    /// modes.
    pub fn set_netatalk_locking(&self, on: bool) {
        self.0.netatalk_locking.store(on, Ordering::Relaxed);
    }
    pub(crate) fn netatalk_locking(&self) -> bool {
        self.0.netatalk_locking.load(Ordering::Relaxed)
    }
    /// Keep resource forks in AppleDouble `._NAME` sidecars and convert
    /// the sidecars macOS writes (`resource_fork_file.rs`), as Samba's
    /// vfs_fruit does with `fruit:resource = file`. Set once, before the
    /// share is served; a second call is ignored.
    pub fn set_apple_double(&self, options: AppleDoubleOptions) {
        let _ = self.0.apple_double.set(options);
    }
    /// [`ShareRef::set_apple_double`]; the default keeps resource forks in
    /// a named stream.
    pub fn apple_double(&self) -> AppleDoubleOptions {
        self.0.apple_double.get().copied().unwrap_or_default()
    }
    /// Whether AFP_Resource opens of this share read and write a sidecar.
    pub(crate) fn resource_fork_in_sidecar(&self) -> bool {
        self.0.macos() && self.apple_double().resource_fork_in_sidecar
    }
    /// Names to show as hidden. Set once, before the share is served; a
    /// second call is ignored.
    pub fn set_hidden_names(&self, hidden: HiddenNames) {
        let _ = self.0.hidden.set(hidden);
    }
    /// Name patterns (`*`, `?`, case-insensitive, against each path
    /// component) that are neither listed nor opened, created or renamed
    /// to. Set once, before the share is served.
    pub fn set_create_modes(&self, modes: CreateModes) {
        let _ = self.0.create_modes.set(modes);
    }
    /// Let a directory that holds only vetoed names be deleted, with
    /// them (Samba's `delete veto files`; off by default).
    pub fn set_delete_veto_files(&self, on: bool) {
        self.0.delete_veto_files.store(on, Ordering::Relaxed);
    }
    pub fn set_veto_names(&self, patterns: Vec<String>) {
        if !patterns.is_empty() {
            let _ = self.0.veto.set(patterns);
        }
    }
    /// Serve the snapshots described by `config` as previous versions
    /// (`snapshot.rs`). Set once, before the share is served; an invalid
    /// format is an error naming what is wrong.
    pub fn set_snapshots(&self, config: SnapshotConfig) -> Result<(), String> {
        let s = Snapshots::new(config)?;
        let _ = self.0.snapshots.set(s);
        Ok(())
    }
    /// Times (Unix seconds, UTC) of the share's snapshots, newest first.
    pub fn snapshots(&self) -> FsResult<Vec<i64>> {
        match self.0.snapshots.get() {
            Some(s) => s.list(&self.0),
            None => Ok(Vec::new()),
        }
    }
    /// The read-only view of the snapshot taken at `time` (Unix seconds):
    /// NotFound if the share has none then.
    pub fn snapshot_view(&self, time: i64) -> FsResult<ShareRef> {
        match self.0.snapshots.get() {
            Some(s) => s.view(&self.0, time),
            None => Err(FsError::NotFound),
        }
    }
    /// The time of the snapshot this share is a view of, if it is one.
    pub fn snapshot_time(&self) -> Option<i64> {
        self.0.snapshot_time
    }
    /// The file id (as `FileInfo::file_id`) of the directory at `path`, a
    /// share-relative path in the form `OpenHandle::path` gives (`\\`
    /// separators, on-disk case); `None` if it is not a directory beneath
    /// the share now. One `openat2` and one `fstat`.
    pub fn dir_id(&self, path: &str) -> Option<u64> {
        let rel = path.replace('\\', "/");
        let fd =
            crate::path::open_beneath(self.0.root_fd(), &rel, libc::O_PATH | libc::O_DIRECTORY, 0)
                .ok()?;
        crate::sys::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd))
            .ok()
            .map(|st| st.st_ino)
    }
    /// Whether a listing of the directory `dir` (share-relative, "" for
    /// the root) shows the entry `name`: vetoed names and the root's
    /// snapshot directory are left out, as `read_dir` leaves them out.
    pub fn lists_name(&self, dir: &str, name: &str) -> bool {
        let dir = dir.trim_matches('\\');
        !(self.0.vetoes_entry(name.as_bytes())
            || (dir.is_empty() && self.0.hides_snapshot_dir(name.as_bytes())))
    }
    /// The host directory (for display and logging only; never used to build paths).
    pub fn root_path(&self) -> &Path {
        &self.0.root_path
    }
}

impl std::fmt::Debug for ShareRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareRef")
            .field("name", &self.0.name)
            .field("root", &self.0.root_path)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_names_match_dot_files_and_patterns() {
        let h = HiddenNames {
            dot_files: true,
            patterns: vec!["hidefile".into(), "*.TMP".into(), "a?c".into()],
        };
        for name in [
            ".bashrc",
            "dir/.git",
            "x/HideFile",
            "t.tmp",
            "sub/b.Tmp",
            "abc",
            ".x:s",
        ] {
            assert!(h.hides(name), "{name}");
        }
        for name in [
            "",
            ".",
            "..",
            "file",
            "hidefile2",
            "tmp",
            "ac",
            "abbc",
            "dir.x/file",
        ] {
            assert!(!h.hides(name), "{name}");
        }
        assert!(!HiddenNames::default().hides(".bashrc"));
        assert!(glob_match("*a*b*", "xxaYYbzz"));
        assert!(!glob_match("*a*b", "xxaYYbzz"));
        assert!(glob_match("**", ""));
    }
}
