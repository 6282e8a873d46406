//! The file service: shares, open/create (MS-FSA 2.1.5.1), statistics.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::clock::Clock;
use crate::error::{last_errno, FsError, FsResult};
use crate::handle::{HandleInner, OpenHandle};
use crate::info::{self, DosMeta};
use crate::meta::{CacheBudget, FdCache, FdKey, FdLimits, FdMode};
use crate::open_access::check_existing;
use crate::open_table::{
    check_share_access, check_stream_opens, FileKey, Node, NodeTable, OpenEntry,
};
use crate::path;
use crate::security::{self, AccessPolicy};
use crate::service_create::{preallocate, refuse_encrypted};
use crate::share::{Share, ShareRef};
use crate::stream::{self, StreamSpec};
use crate::sys;
use crate::types::{
    access as acc, attr, map_generic, share as sh, CreateAction, DirectoryRequirement, Disposition,
    FsStats, OpenParams, Opened, RequestCtx,
};
use crate::uring::RingSlot;

/// The protocol-neutral file service. `Send + Sync`; share one `Arc`
/// between all connections and call it from blocking worker threads.
pub struct FileService {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) nodes: Arc<NodeTable>,
    next_id: AtomicU64,
    /// io_uring for direct writes (`uring.rs`), started on first use.
    pub(crate) ring: Arc<RingSlot>,
    /// Bounds every share's metadata cache shares (`meta/stats.rs`).
    metadata_budget: std::sync::Mutex<Arc<CacheBudget>>,
    /// Bounds of each share's kept fds (`meta/fd_cache.rs`).
    fd_limits: std::sync::Mutex<FdLimits>,
}

/// Rights a read-only file never grants for writing (MS-FSA 2.1.5.1.2.1).
pub(crate) const RO_DENIED: u32 = acc::FILE_WRITE_DATA
    | acc::FILE_APPEND_DATA
    | acc::FILE_ADD_SUBDIRECTORY
    | acc::FILE_DELETE_CHILD;

impl FileService {
    pub fn new(clock: Arc<dyn Clock>) -> Arc<FileService> {
        Arc::new(FileService {
            clock,
            nodes: Arc::new(NodeTable::default()),
            next_id: AtomicU64::new(1),
            ring: Arc::default(),
            metadata_budget: Default::default(),
            fd_limits: Default::default(),
        })
    }

    /// Bound the metadata caches of the shares given one from now on:
    /// `max_entries` names and `max_bytes` of memory together.
    pub fn set_metadata_cache_limits(&self, max_entries: u64, max_bytes: u64) {
        *self
            .metadata_budget
            .lock()
            .unwrap_or_else(|p| p.into_inner()) =
            Arc::new(CacheBudget::new(max_entries, max_bytes));
    }

    /// The bounds the metadata caches of new shares share.
    pub fn metadata_cache_budget(&self) -> Arc<CacheBudget> {
        self.metadata_budget
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Bound each share's kept fds from now on (`meta/fd_cache.rs`).
    pub fn set_fd_cache_limits(&self, limits: FdLimits) {
        *self.fd_limits.lock().unwrap_or_else(|p| p.into_inner()) = limits;
    }

    /// The bounds of kept fds (none kept: `FdLimits::default`).
    pub fn fd_cache_limits(&self) -> FdLimits {
        *self.fd_limits.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new cache of kept fds under the service's bounds and clock, swept
    /// by a thread of its own (for a share, or an NFS export).
    pub fn new_fd_cache(&self) -> Arc<FdCache> {
        let limits = *self.fd_limits.lock().unwrap_or_else(|p| p.into_inner());
        let cache = Arc::new(FdCache::new(self.clock.clone(), limits));
        FdCache::start_sweeper(&cache);
        cache
    }

    /// Give `share` a metadata cache (`meta/cache.rs`), attribute layer
    /// and kept fds under the service's bounds and clock.
    pub fn enable_metadata_cache(&self, share: &ShareRef) {
        share.set_metadata_cache(self.metadata_cache_budget(), self.clock.clone());
        if self.fd_cache_limits().max_fds > 0 {
            share.set_fd_cache(self.new_fd_cache());
        }
    }

    /// A fresh open id (unique within the service).
    pub(crate) fn next_open_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The injected clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Export `root` as share `name`. The root is opened once (`O_PATH`);
    /// a missing path is `NotFound`, a non-directory `NotADirectory`.
    pub fn add_share(&self, name: &str, root: impl AsRef<Path>) -> FsResult<ShareRef> {
        let p = root.as_ref();
        let c = CString::new(p.as_os_str().as_bytes()).map_err(|_| FsError::InvalidParameter)?;
        // SAFETY: plain syscall with a valid C string.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(match last_errno() {
                libc::ENOTDIR => FsError::NotADirectory,
                e => FsError::from_errno(e),
            });
        }
        // SAFETY: fresh fd.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(ShareRef(Arc::new(Share::new(
            name.to_string(),
            p.to_path_buf(),
            fd,
        ))))
    }

    /// statvfs of the share's file system.
    pub fn fs_stats(&self, share: &ShareRef) -> FsResult<FsStats> {
        let s = sys::fstatvfs(share.0.root_fd())?;
        Ok(FsStats {
            block_size: sys::fragment_size(&s),
            total_blocks: s.f_blocks as u64,
            free_blocks: s.f_bfree as u64,
            available_blocks: s.f_bavail as u64,
            total_files: s.f_files as u64,
            free_files: s.f_ffree as u64,
            max_name_len: s.f_namemax as u64,
        })
    }

    /// Open or create a file or directory (MS-FSA 2.1.5.1).
    pub fn open(&self, ctx: &RequestCtx, share: &ShareRef, p: OpenParams) -> FsResult<Opened> {
        let pol = ctx.access.as_deref();
        // MS-FSA 2.1.5.1: `file:stream:$DATA` names a stream of the file.
        share.0.check_stream_syntax(&p.path)?;
        let (base_path, spec) = stream::split(&p.path)?;
        let comps = path::parse(base_path)?;
        share.0.check_veto(&comps)?;
        // MS-FSA 2.1.5.1 parameter validation.
        if p.directory == DirectoryRequirement::MustBeDirectory
            && matches!(
                p.disposition,
                Disposition::Supersede | Disposition::Overwrite | Disposition::OverwriteIf
            )
        {
            return Err(FsError::InvalidParameter);
        }
        if p.share_access & !sh::ALL != 0 {
            return Err(FsError::InvalidParameter);
        }
        let mut access = map_generic(p.access);
        if access & acc::ACCESS_SYSTEM_SECURITY != 0 {
            return Err(FsError::PrivilegeNotHeld);
        }
        let max = access & acc::MAXIMUM_ALLOWED != 0;
        access &= !acc::MAXIMUM_ALLOWED;
        if max {
            access |= acc::FILE_ALL_ACCESS;
        }
        if p.delete_on_close && access & acc::DELETE == 0 {
            return Err(FsError::AccessDenied);
        }
        let mut p = p;
        if share.0.read_only() {
            // A snapshot (`snapshot.rs`) has only what it has: nothing is
            // created, overwritten or deleted in it (Samba answers
            // MEDIA_WRITE_PROTECTED too).
            match p.disposition {
                _ if p.delete_on_close => return Err(FsError::WriteProtected),
                Disposition::Open => {}
                Disposition::OpenIf => p.disposition = Disposition::Open,
                _ => return Err(FsError::WriteProtected),
            }
        }
        match spec {
            StreamSpec::None => {}
            // MS-FSA 2.1.5.1: a data stream is never a directory; the
            // default data stream of a directory does not exist.
            StreamSpec::Default | StreamSpec::Named(_)
                if p.directory == DirectoryRequirement::MustBeDirectory =>
            {
                return Err(FsError::NotADirectory);
            }
            StreamSpec::Default => p.directory = DirectoryRequirement::MustNotBeDirectory,
            StreamSpec::Named(name) => {
                for _ in 0..4 {
                    if let Some(o) =
                        self.try_open_stream(share, &comps, &name, &p, (access, max), ctx)?
                    {
                        return Ok(o);
                    }
                }
                return Err(FsError::SharingViolation);
            }
        }
        // A create can race with another create or a delete; retry a little.
        for _ in 0..4 {
            if let Some(o) = self.try_open(share, &comps, &p, access, max, pol)? {
                if o.action == CreateAction::Created {
                    give_to_owner(ctx, &o.handle);
                }
                return Ok(o);
            }
        }
        Err(FsError::SharingViolation)
    }

    /// The file id of an existing path, without opening it. Protocol layers
    /// use it to find a file's caching state (oplocks, leases) when an open
    /// of it failed on a sharing violation and the holders must be broken
    /// before it is tried again.
    /// Returns the file id and the stream key ([`OpenHandle::stream_key`]).
    pub fn file_id_of(&self, share: &ShareRef, path: &str) -> FsResult<(u64, u64)> {
        let (base, spec) = stream::split(path)?;
        let skey = match &spec {
            StreamSpec::Named(n) => stream::stream_key(n),
            _ => 0,
        };
        let comps = path::parse(base)?;
        share.0.check_veto(&comps)?;
        if comps.is_empty() {
            return Ok((sys::fstat(share.0.root_fd())?.st_ino, skey));
        }
        let r = path::resolve(share.0.names(), share.0.root_fd(), &comps)?;
        if !r.exists {
            return Err(FsError::NotFound);
        }
        let name = sys::cstr(&r.name)?;
        sys::lstat_at(r.parent_fd.as_raw_fd(), &name)
            .map(|st| (st.st_ino, skey))
            .map_err(FsError::from_errno)
    }

    fn try_open(
        &self,
        share: &ShareRef,
        comps: &[String],
        p: &OpenParams,
        access: u32,
        max: bool,
        pol: Option<&dyn AccessPolicy>,
    ) -> FsResult<Option<Opened>> {
        let root = share.0.root_fd();
        if comps.is_empty() {
            if p.delete_on_close {
                return Err(FsError::CannotDelete);
            }
            return self
                .open_existing(share, String::new(), None, p, (access, max), pol)
                .map(Some);
        }
        let r = path::resolve(share.0.names(), root, comps)?;
        if r.exists {
            if p.disposition == Disposition::Create {
                return Err(FsError::NameCollision);
            }
            let parent = Some(r.parent_fd.as_raw_fd());
            match self.open_existing(share, r.rel(), parent, p, (access, max), pol) {
                // Vanished between lookup and open: start again.
                Err(FsError::NotFound) => Ok(None),
                other => other.map(Some),
            }
        } else {
            match p.disposition {
                Disposition::Open | Disposition::Overwrite => Err(FsError::NotFound),
                _ => {
                    let r = self.tunneled(share, r);
                    self.create(share, r, p, access, max, pol)
                }
            }
        }
    }

    /// A create of the short name of a file deleted from the same
    /// directory moments ago creates its long name (`tunnel.rs`), unless
    /// that name is taken again.
    fn tunneled(&self, share: &ShareRef, mut r: path::Resolved) -> path::Resolved {
        let now = self.clock.now();
        if let Some(long) = share.0.tunnel.take(&r.parent_rel, &r.name, now) {
            let free = sys::cstr(&long).is_ok_and(|c| {
                matches!(
                    sys::lstat_at(r.parent_fd.as_raw_fd(), &c),
                    Err(libc::ENOENT)
                )
            });
            if free {
                r.name = long;
            }
        }
        r
    }

    /// Open the fd of an existing file with the least host rights needed.
    fn open_fd(
        root: i32,
        rel: &str,
        p: &OpenParams,
        want_write: bool,
        max: bool,
        access: u32,
    ) -> FsResult<(OwnedFd, bool, Option<FdMode>)> {
        let mut base = libc::O_NONBLOCK | libc::O_NOCTTY;
        if p.directory == DirectoryRequirement::MustBeDirectory {
            base |= libc::O_DIRECTORY;
        }
        if p.write_through {
            base |= libc::O_DSYNC;
        }
        let map = |e: i32| match e {
            libc::ENOTDIR if p.directory == DirectoryRequirement::MustBeDirectory => {
                FsError::NotADirectory
            }
            libc::ENOTDIR => FsError::PathNotFound,
            e => FsError::from_errno(e),
        };
        if want_write || max {
            match open_waiting_for_lease(root, rel, base | libc::O_RDWR) {
                Ok(fd) => return Ok((fd, true, Some(FdMode::ReadWrite))),
                Err(libc::EISDIR) => {}
                Err(libc::EACCES | libc::EPERM | libc::EROFS | libc::ETXTBSY) if !want_write => {}
                Err(e) => return Err(map(e)),
            }
        }
        match open_waiting_for_lease(root, rel, base | libc::O_RDONLY) {
            Ok(fd) => Ok((fd, false, Some(FdMode::Read))),
            Err(libc::EACCES | libc::EPERM)
                if access & (acc::FILE_READ_DATA | acc::FILE_EXECUTE) == 0 || max =>
            {
                let f = libc::O_PATH | (base & libc::O_DIRECTORY);
                path::open_beneath(root, rel, f, 0)
                    .map(|fd| (fd, false, None))
                    .map_err(map)
            }
            Err(e) => Err(map(e)),
        }
    }

    /// A kept fd (`meta/fd_cache.rs`) of the plain file `rel` names now,
    /// opened as this open would open it, when its caller may use it.
    /// The name is resolved to its inode first (`lstat` in `parent`), so
    /// only an fd of the file the name names now can answer. The host
    /// lease wait of [`open_waiting_for_lease`] is not needed: a local
    /// process holds no lease that this open would break while Braid holds
    /// a kept fd (a read lease needs no writer, a write lease no other
    /// open; a read open breaks no read lease).
    fn take_kept_fd(
        &self,
        share: &ShareRef,
        rel: &str,
        parent: Option<RawFd>,
        p: &OpenParams,
        read_write: bool,
    ) -> Option<(OwnedFd, FdMode)> {
        let cache = share.0.fds()?;
        let parent = parent?;
        if p.directory == DirectoryRequirement::MustBeDirectory || share.0.read_only() {
            return None;
        }
        let (_, name) = path::split_last(rel);
        let st = sys::lstat_at(parent, &sys::cstr(name).ok()?).ok()?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return None;
        }
        let mode = if read_write {
            FdMode::ReadWrite
        } else {
            FdMode::Read
        };
        let key = FdKey {
            dev: st.st_dev,
            ino: st.st_ino,
            mode,
            sync: p.write_through,
        };
        let fd = cache.take(&key)?;
        if !crate::meta::fd_cache::caller_may_use(fd.as_raw_fd(), mode) {
            cache.refuse(fd);
            return None;
        }
        Some((fd, mode))
    }

    /// MS-FSA 2.1.5.1.2: open of an existing file. `parent`: the fd of its
    /// directory (`None` for the share root).
    fn open_existing(
        &self,
        share: &ShareRef,
        rel: String,
        parent: Option<RawFd>,
        p: &OpenParams,
        (mut access, max): (u32, bool),
        pol: Option<&dyn AccessPolicy>,
    ) -> FsResult<Opened> {
        let overwrite = matches!(
            p.disposition,
            Disposition::Supersede | Disposition::Overwrite | Disposition::OverwriteIf
        );
        let want_write =
            (!max && access & (acc::FILE_WRITE_DATA | acc::FILE_APPEND_DATA) != 0) || overwrite;
        // In a snapshot the file is only ever read, whatever was granted.
        let ro = share.0.read_only();
        let kept = self.take_kept_fd(share, &rel, parent, p, want_write || max);
        let (fd, writable, mode) = match kept {
            Some((fd, mode)) => (fd, mode == FdMode::ReadWrite, Some(mode)),
            None => Self::open_fd(
                share.0.root_fd(),
                &rel,
                p,
                want_write && !ro,
                max && !ro,
                access,
            )?,
        };
        let st = sys::fstat(fd.as_raw_fd())?;
        let fmt = st.st_mode & libc::S_IFMT;
        if fmt != libc::S_IFREG && fmt != libc::S_IFDIR {
            // FIFOs, sockets and devices are not served.
            return Err(FsError::AccessDenied);
        }
        let is_dir = fmt == libc::S_IFDIR;
        match p.directory {
            DirectoryRequirement::MustBeDirectory if !is_dir => return Err(FsError::NotADirectory),
            DirectoryRequirement::MustNotBeDirectory if is_dir => {
                return Err(FsError::IsADirectory)
            }
            _ => {}
        }
        if is_dir && overwrite {
            return Err(FsError::InvalidParameter);
        }
        let mut maximal_access = acc::FILE_ALL_ACCESS;
        if let Some(pol) = pol {
            let object = security::object_cached(share.0.attrs(), fd.as_raw_fd(), &st, is_dir)?;
            let (granted, maximal) = check_existing(pol, &object, parent, p, overwrite)?;
            access = granted;
            maximal_access = maximal;
        }
        let meta = info::read_dos_cached(share.0.attrs(), fd.as_raw_fd(), &st);
        let attrs = info::attributes(&st, meta.as_ref());
        let readonly = attrs & attr::READONLY != 0;
        // MS-FSA 2.1.5.1.2.1: read-only files refuse write access and deletion.
        if readonly && p.delete_on_close {
            return Err(FsError::CannotDelete);
        }
        if readonly && !is_dir {
            if overwrite || (!max && access & RO_DENIED != 0) {
                return Err(FsError::AccessDenied);
            }
            access &= !RO_DENIED;
        }
        if max && !writable && !is_dir {
            access &= !(acc::FILE_WRITE_DATA | acc::FILE_APPEND_DATA);
        }
        if overwrite {
            refuse_encrypted(p)?;
            // MS-FSA 2.1.5.1.2: overwriting a HIDDEN/SYSTEM file must keep the bits.
            let lost = attrs & (attr::HIDDEN | attr::SYSTEM) & !p.attributes;
            if lost != 0 {
                return Err(FsError::AccessDenied);
            }
        }
        let (node, id) = self.register(FileKey::of(&st), access, p)?;
        let handle = self.make_handle(
            share,
            id,
            node,
            fd,
            is_dir,
            (access, p.share_access),
            rel,
            None,
        );
        if !is_dir {
            handle.keep_fd_at_close(&st, mode, p.write_through);
            handle.netatalk_check()?;
        }
        let action = if overwrite {
            let r = (|| {
                let fdr = handle.fd();
                // The new data replaces all of the file's: its named
                // streams go too, unless one is open.
                if !handle.0.node.lock().stream_opens.is_empty() {
                    return Err(FsError::SharingViolation);
                }
                stream::remove_all(fdr)?;
                if share.resource_fork_in_sidecar() && !is_dir {
                    crate::resource_fork_file::remove(share, &handle.0.rel())?;
                }
                // SAFETY: plain syscall.
                sys::check(unsafe { libc::ftruncate(fdr, 0) })?;
                let m = DosMeta {
                    attributes: (p.attributes & attr::SETTABLE) | attr::ARCHIVE,
                    creation: meta.and_then(|m| m.creation),
                    ea_size: meta.map_or(0, |m| m.ea_size),
                    change: None,
                    // The descriptor, and its xattr block, stay.
                    xattr_block: meta.is_some_and(|m| m.xattr_block),
                };
                info::write_dos(fdr, &m, &st)?;
                if let Some(a) = p.allocation_size {
                    preallocate(fdr, a)?;
                }
                Ok::<_, FsError>(())
            })();
            if let Err(e) = r {
                let _ = handle.close();
                return Err(e);
            }
            if p.disposition == Disposition::Supersede {
                CreateAction::Superseded
            } else {
                CreateAction::Overwritten
            }
        } else {
            CreateAction::Opened
        };
        let info = handle.info()?;
        Ok(Opened {
            handle,
            action,
            info,
            maximal_access,
        })
    }

    /// Enter an open into the share-mode table of the file or stream `key`
    /// (MS-FSA 2.1.5.1.2).
    pub(crate) fn register(
        &self,
        key: FileKey,
        access: u32,
        p: &OpenParams,
    ) -> FsResult<(Arc<Node>, u64)> {
        loop {
            let node = self.nodes.get_or_insert(key);
            let mut s = node.lock();
            if s.dead {
                continue;
            }
            if s.delete_pending {
                return Err(FsError::DeletePending);
            }
            check_share_access(&s.opens, access, p.share_access)?;
            check_share_access(&s.reservations, access, p.share_access)?;
            check_stream_opens(&s.stream_opens, access)?;
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            s.opens.push(OpenEntry {
                id,
                access,
                share_access: p.share_access,
                delete_on_close: p.delete_on_close,
                write_time: Default::default(),
                user_set_change_time: false,
            });
            drop(s);
            return Ok((node, id));
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn make_handle(
        &self,
        share: &ShareRef,
        id: u64,
        node: Arc<Node>,
        fd: OwnedFd,
        is_dir: bool,
        (access, share_access): (u32, u32),
        rel: String,
        stream: Option<crate::stream_handle::StreamOpen>,
    ) -> OpenHandle {
        let inner = Arc::new(HandleInner {
            id,
            share: share.clone(),
            nodes: self.nodes.clone(),
            clock: self.clock.clone(),
            node,
            fd: std::mem::ManuallyDrop::new(fd),
            keep_as: Default::default(),
            keepable: AtomicBool::new(true),
            is_dir,
            access,
            share_access,
            path: Mutex::new(rel),
            closed: AtomicBool::new(false),
            position: AtomicU64::new(0),
            write_noted: AtomicBool::new(false),
            direct: Default::default(),
            ring: self.ring.clone(),
            stream,
        });
        share.0.register(id, Arc::downgrade(&inner));
        OpenHandle(inner)
    }
}

/// Open an existing file beneath the share root, waiting while a local
/// process's kernel lease (`fcntl(F_SETLEASE)`) on it is being broken.
///
/// The open is non-blocking (a FIFO must not hang the open), so a
/// conflicting lease answers `EWOULDBLOCK` at once; the kernel has by then
/// told the lease holder to let go, and revokes the lease itself after
/// `/proc/sys/fs/lease-break-time` seconds. Samba likewise retries such an
/// open; the caller is on the blocking pool, so the wait holds no reactor.
fn open_waiting_for_lease(root: i32, rel: &str, flags: i32) -> Result<OwnedFd, i32> {
    let mut pause = std::time::Duration::from_millis(5);
    let deadline = std::time::Instant::now() + lease_break_time();
    loop {
        match path::open_beneath(root, rel, flags, 0) {
            Err(libc::EWOULDBLOCK) if std::time::Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(200));
            }
            other => return other,
        }
    }
}

/// How long the kernel lets a lease holder take before it revokes the
/// lease, plus a second (default 45 s).
fn lease_break_time() -> std::time::Duration {
    let secs = std::fs::read_to_string("/proc/sys/fs/lease-break-time")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(45);
    std::time::Duration::from_secs(secs.min(300) + 1)
}

/// A new file or directory goes to the requester's Unix owner, when it has
/// one, so that both protocols agree on who owns it. A server that may not
/// chown (not root) keeps its own ownership and says so once: the file
/// exists and the create succeeded, which a client must not be told
/// otherwise.
fn give_to_owner(ctx: &RequestCtx, handle: &OpenHandle) {
    let Some(owner) = ctx.owner else { return };
    // SAFETY: plain syscall on a descriptor the handle owns.
    if unsafe { libc::fchown(handle.fd(), owner.uid, owner.gid) } < 0 {
        static WARNED: std::sync::Once = std::sync::Once::new();
        let err = std::io::Error::last_os_error();
        WARNED.call_once(|| {
            tracing::warn!(
                "cannot give new files to their users' uid/gid ({err}); they keep the server's owner"
            )
        });
    }
}
