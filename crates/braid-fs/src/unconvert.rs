//! Named streams back into AppleDouble `._NAME` files (Samba's `net vfs
//! stream2adouble`, `ad_unconvert` in source3/lib/adouble.c), for moving a
//! share to a server or file system that keeps macOS metadata in
//! sidecars. Each file's Finder info (from AFP_AfpInfo), its other named
//! streams (as attributes packed after the Finder info, named back with
//! `:` and the other characters macOS clients map) and its resource fork
//! (from the AFP_Resource stream, or the sidecar the share keeps it in)
//! go into `._NAME`, laid out as Samba writes it
//! ([`crate::apple_double::pack_header`]); the converted streams are then
//! removed, a resource fork stream only when it was one.
//!
//! An administrator's tool, run on the share's directory: it takes no
//! client path, skips symbolic links, and writes each sidecar under a
//! temporary name first, so a failure leaves the file as it was. A share
//! served with Apple's extensions converts such a sidecar back into
//! streams the next time its resource fork is opened, as Samba's
//! `vfs_fruit` does.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::apple_double::{self, PackedXattr, FINDER_INFO_LEN};
use crate::error::{FsError, FsResult};
use crate::mac_listing::{AFP_INFO_STREAM, RESOURCE_FORK_STREAM};
use crate::mac_streams::{self, AFP_INFO_SIZE};
use crate::resource_fork_file::{sidecar_rel, ResourceFork};
use crate::share::ShareRef;
use crate::{netatalk_meta, path, stream, sys};

/// Where the Finder info lies in an AfpInfo (MacExtensions.h).
const AFP_FINDER_INFO: std::ops::Range<usize> = 16..16 + FINDER_INFO_LEN;

/// What a run did.
#[derive(Debug, Default)]
pub struct Unconverted {
    /// Regular files looked at.
    pub files: usize,
    /// Share-relative paths of the files given a sidecar.
    pub converted: Vec<String>,
    /// Files left as they were, with why.
    pub failed: Vec<(String, FsError)>,
}

impl ShareRef {
    /// Convert the streams of the file at `rel` (share-relative, `/` or
    /// `\` separated), or with `recursive` of every file below the
    /// directory at `rel`, into AppleDouble sidecars.
    pub fn streams_to_appledouble(&self, rel: &str, recursive: bool) -> FsResult<Unconverted> {
        self.0.check_writable()?;
        let rel = path::parse(rel)?.join("/");
        let mut out = Unconverted::default();
        let fd = open_nofollow(self, &rel)?;
        let st = sys::fstat(fd.as_raw_fd())?;
        if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            if !recursive {
                return Err(FsError::IsADirectory);
            }
            self.unconvert_dir(fd, &rel, &mut out)?;
        } else {
            self.unconvert_one(fd, &rel, &mut out);
        }
        Ok(out)
    }

    fn unconvert_dir(&self, dir: OwnedFd, rel: &str, out: &mut Unconverted) -> FsResult<()> {
        for raw in sys::list_dir(dir.as_raw_fd())? {
            let Ok(name) = String::from_utf8(raw) else {
                continue;
            };
            // The sidecars themselves are what is being written.
            if name.starts_with("._") {
                continue;
            }
            let child = path::join(rel, &name);
            let fd = match open_nofollow(self, &child) {
                Ok(fd) => fd,
                // A symbolic link (ELOOP), or gone meanwhile.
                Err(_) => continue,
            };
            let mode = sys::fstat(fd.as_raw_fd())?.st_mode & libc::S_IFMT;
            if mode == libc::S_IFDIR {
                self.unconvert_dir(fd, &child, out)?;
            } else if mode == libc::S_IFREG {
                self.unconvert_one(fd, &child, out);
            }
        }
        Ok(())
    }

    fn unconvert_one(&self, fd: OwnedFd, rel: &str, out: &mut Unconverted) {
        out.files += 1;
        match self.unconvert_file(fd.as_raw_fd(), rel) {
            Ok(true) => out.converted.push(rel.to_string()),
            Ok(false) => {}
            Err(e) => out.failed.push((rel.to_string(), e)),
        }
    }

    /// Samba `ad_unconvert` for one file; false when it has nothing to
    /// convert.
    fn unconvert_file(&self, fd: RawFd, rel: &str) -> FsResult<bool> {
        let mut finder_info = [0u8; FINDER_INFO_LEN];
        let mut afpinfo = None;
        if let Some(x) = mac_streams::find(self, fd, AFP_INFO_STREAM)? {
            let v = stream::read(fd, &x)?;
            if v.len() == AFP_INFO_SIZE {
                finder_info.copy_from_slice(&v[AFP_FINDER_INFO]);
                afpinfo = Some(x);
            }
        }
        let mut fork = Vec::new();
        let mut fork_stream = None;
        if self.resource_fork_in_sidecar() {
            if let Some(rf) = ResourceFork::open(self, fd, rel)? {
                let len = usize::try_from(rf.len()).map_err(|_| FsError::DiskFull)?;
                rf.read_at(0, len, &mut fork)?;
            }
        }
        let mut xattrs = Vec::new();
        let mut converted = Vec::new();
        for (name, x) in stream::list(fd)? {
            let x = CString::new(x).map_err(|_| FsError::InvalidName)?;
            if name.eq_ignore_ascii_case(AFP_INFO_STREAM) {
                continue;
            }
            let value = stream::read(fd, &x)?;
            if name.eq_ignore_ascii_case(RESOURCE_FORK_STREAM) {
                if !self.resource_fork_in_sidecar() {
                    fork = value;
                    fork_stream = Some(x);
                }
                continue;
            }
            xattrs.push(PackedXattr {
                name: apple_double::xattr_name_of_stream(&name),
                value,
            });
            converted.push(x);
        }
        if afpinfo.is_none() && xattrs.is_empty() && fork_stream.is_none() {
            // A resource fork already in its sidecar stays where it is.
            return Ok(false);
        }
        let header = apple_double::pack_header(&finder_info, &xattrs, fork.len() as u64)
            .ok_or(FsError::InvalidParameter)?;
        self.write_sidecar(fd, rel, &header, &fork)?;
        if let Some(x) = afpinfo {
            if x.as_c_str() == netatalk_meta::XATTR {
                netatalk_meta::remove(fd)?;
            } else {
                stream::remove(fd, &x)?;
            }
        }
        for x in converted.iter().chain(fork_stream.iter()) {
            stream::remove(fd, x)?;
        }
        Ok(true)
    }

    /// Write `._NAME` for the file at `rel` (descriptor `fd`): under a
    /// temporary name, owned as the file is where this process may, then
    /// renamed over any sidecar there.
    fn write_sidecar(&self, fd: RawFd, rel: &str, header: &[u8], fork: &[u8]) -> FsResult<()> {
        let side = sidecar_rel(rel).ok_or(FsError::InvalidParameter)?;
        let (parent, side_name) = path::split_last(&side);
        let dir = path::open_beneath(
            self.0.root_fd(),
            parent,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            0,
        )
        .map_err(FsError::from_errno)?;
        let tmp_name = format!("{side_name}.braid-unconvert");
        let tmp = sys::cstr(&tmp_name)?;
        let st = sys::fstat(fd)?;
        let file = sys::openat(
            dir.as_raw_fd(),
            &tmp,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            st.st_mode & 0o666,
        )
        .map_err(FsError::from_errno)?;
        let written = (|| {
            // As Samba's ad_unconvert_open_ad: the sidecar belongs to the
            // file's owner. Only root may give it away; others keep it.
            // SAFETY: plain syscall on an fd we own.
            let _ = unsafe { libc::fchown(file.as_raw_fd(), st.st_uid, st.st_gid) };
            sys::pwrite(file.as_raw_fd(), header, 0)?;
            sys::pwrite(file.as_raw_fd(), fork, header.len() as u64)?;
            // SAFETY: plain syscall on an fd we own.
            sys::check(unsafe { libc::fsync(file.as_raw_fd()) })?;
            let to = sys::cstr(side_name)?;
            // SAFETY: single components within one directory fd.
            sys::check(unsafe {
                libc::renameat(dir.as_raw_fd(), tmp.as_ptr(), dir.as_raw_fd(), to.as_ptr())
            })
        })();
        if written.is_err() {
            // SAFETY: a single component within the directory fd.
            unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
        }
        written
    }
}

/// Open `rel` for reading without following a symbolic link at its end.
fn open_nofollow(share: &ShareRef, rel: &str) -> FsResult<OwnedFd> {
    path::open_beneath(
        share.0.root_fd(),
        rel,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        0,
    )
    .map_err(FsError::from_errno)
}
