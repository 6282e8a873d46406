//! Listing an open directory (MS-FSA 2.1.5.6.3).

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use crate::error::{FsError, FsResult};
use crate::handle::OpenHandle;
use crate::info;
use crate::meta::FileStamp;
use crate::open_table::FileKey;
use crate::path;
use crate::sys;
use crate::types::{access as acc, DirEntry};

impl OpenHandle {
    /// Snapshot of a directory, including "." and "..". Entries that are not
    /// regular files or directories, and symlinks leaving the share, are
    /// omitted. Needs FILE_LIST_DIRECTORY.
    pub fn read_dir(&self) -> FsResult<Vec<DirEntry>> {
        self.need(acc::FILE_LIST_DIRECTORY)?;
        if !self.0.is_dir {
            return Err(FsError::NotADirectory);
        }
        let root = self.0.share.0.root_fd();
        let rel = self.0.rel();
        let dfd = sys::openat(self.fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)
            .map_err(FsError::from_errno)?;
        let dfd = dfd.as_raw_fd();
        let me = self.info()?;
        let parent = if rel.is_empty() {
            me.clone()
        } else {
            let (p, _) = path::split_last(&rel);
            let pfd = path::open_beneath(root, p, libc::O_RDONLY | libc::O_DIRECTORY, 0)
                .map_err(FsError::from_errno)?;
            info::fd_info(pfd.as_raw_fd(), false)?
        };
        let mut out = vec![
            DirEntry {
                name: ".".into(),
                info: me,
            },
            DirEntry {
                name: "..".into(),
                info: parent,
            },
        ];
        for name in sys::list_dir(dfd)? {
            out.extend(self.entry_at(dfd, root, &rel, &name));
        }
        Ok(out)
    }

    /// Metadata of one name in this directory, as a listing shows it; `None`
    /// if it vanished, is neither a file nor a directory, or is a symlink
    /// leaving the share.
    fn entry_at(&self, dfd: RawFd, root: RawFd, rel: &str, name: &[u8]) -> Option<DirEntry> {
        let os = OsStr::from_bytes(name);
        if self.0.share.0.vetoes_entry(name)
            || (rel.is_empty() && self.0.share.0.hides_snapshot_dir(name))
        {
            return None;
        }
        let cname = std::ffi::CString::new(name).ok()?;
        let mut st = sys::lstat_at(dfd, &cname).ok()?;
        let mut meta = None;
        let btime;
        if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
            // Follow only if it stays inside the share.
            let s = std::str::from_utf8(name).ok()?;
            let fd = path::open_beneath(root, &path::join(rel, s), libc::O_PATH, 0).ok()?;
            st = sys::fstat(fd.as_raw_fd()).ok()?;
            btime = sys::btime(fd.as_raw_fd());
        } else {
            // Through the attribute layer (`meta/attr_cache.rs`) when the
            // share has one: a listing of settled files then costs one
            // `lstat` an entry instead of three calls.
            let attrs = self.0.share.0.attrs();
            meta = info::read_dos_at_cached(attrs, dfd, os, &st);
            btime = match attrs {
                Some(a) => a.btime(&FileStamp::of(&st), || sys::btime_at(dfd, &cname)),
                None => sys::btime_at(dfd, &cname),
            };
        }
        let fmt = st.st_mode & libc::S_IFMT;
        if fmt != libc::S_IFREG && fmt != libc::S_IFDIR {
            return None;
        }
        let mut info = info::file_info(&st, btime, meta.as_ref(), false);
        let name = String::from_utf8_lossy(name).into_owned();
        if self.0.share.0.hides(&name) {
            info::show_hidden(&mut info);
        }
        if let Some(n) = self.0.nodes.get(&FileKey::of(&st)) {
            let mut s = n.lock();
            s.settle_write_times(self.0.clock.now());
            info.delete_pending = s.delete_pending;
            info.last_write_time = s.last_write_time(info.last_write_time);
        }
        Some(DirEntry { name, info })
    }

    /// Fresh metadata for names of an earlier [`OpenHandle::read_dir`]
    /// listing, in order; `None` for a name that no longer exists. A
    /// directory enumeration resumed after other opens changed the
    /// directory must not return deleted entries (MS-FSA 2.1.5.6.3: the
    /// enumeration reflects the directory as it is read). `.` and `..` are
    /// returned as `None`: the caller keeps its own.
    pub fn refresh_dir_entries(&self, names: &[String]) -> FsResult<Vec<Option<DirEntry>>> {
        self.need(acc::FILE_LIST_DIRECTORY)?;
        if !self.0.is_dir {
            return Err(FsError::NotADirectory);
        }
        let root = self.0.share.0.root_fd();
        let rel = self.0.rel();
        let dfd = sys::openat(self.fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)
            .map_err(FsError::from_errno)?;
        Ok(names
            .iter()
            .map(|n| {
                if n == "." || n == ".." {
                    None
                } else {
                    self.entry_at(dfd.as_raw_fd(), root, &rel, n.as_bytes())
                }
            })
            .collect())
    }
}
