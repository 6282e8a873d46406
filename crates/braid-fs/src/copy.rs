//! Server-side copy of a byte range from one open file to another (the
//! object store side of MS-SMB2 3.3.5.15.6 FSCTL_SRV_COPYCHUNK): the data
//! never leaves the server, and with `copy_file_range(2)` it need not even
//! pass through user space (file systems that share extents, such as XFS
//! and btrfs, clone them).

use std::sync::Arc;

use crate::error::{FsError, FsResult};
use crate::handle::OpenHandle;
use crate::netatalk_meta;
use crate::resource_fork_file::ResourceFork;
use crate::sys;
use crate::types::access as acc;

impl OpenHandle {
    /// Copy up to `len` bytes at `src_offset` of this open into `dest` at
    /// `dest_offset`; returns the bytes copied (short only at this file's
    /// end). This open needs FILE_READ_DATA or FILE_EXECUTE, `dest`
    /// FILE_WRITE_DATA. Does
    /// not check byte-range locks: call `check_io_lock` on both first.
    /// Ranges of one file may overlap: the source is read in full before
    /// any of it is written, as a client's READ then WRITE would.
    pub fn copy_range_to(
        &self,
        src_offset: u64,
        dest: &OpenHandle,
        dest_offset: u64,
        len: usize,
    ) -> FsResult<usize> {
        self.need(acc::FILE_READ_DATA | acc::FILE_EXECUTE)?;
        dest.need(acc::FILE_WRITE_DATA)?;
        if self.is_directory() || dest.is_directory() {
            return Err(FsError::IsADirectory);
        }
        let end = dest_offset
            .checked_add(len as u64)
            .ok_or(FsError::InvalidParameter)?;
        if end > i64::MAX as u64 || src_offset > i64::MAX as u64 {
            return Err(FsError::InvalidParameter);
        }
        if self.0.stream.is_some() || dest.0.stream.is_some() {
            // Streams live in xattrs: through a buffer (bounded by the
            // stream size limit on either side).
            let data = self.read(src_offset, len)?;
            return dest.write(dest_offset, &data);
        }
        let _serial = dest.serialize_writes();
        // A copy is a write of the destination (its LastWriteTime moves as
        // for WRITE, MS-FSA 2.1.4.17).
        dest.note_write();
        let same_file = std::sync::Arc::ptr_eq(&self.0.node, &dest.0.node);
        let overlap =
            same_file && src_offset < end && dest_offset < src_offset.saturating_add(len as u64);
        if !overlap {
            if let Some(n) =
                copy_file_range_all(self.fd(), src_offset, dest.fd(), dest_offset, len)?
            {
                return Ok(n);
            }
        }
        // Overlapping ranges, or a file system without copy_file_range:
        // through a buffer (chunks are at most a few MiB).
        let mut buf = Vec::new();
        sys::pread_into_vec(self.fd(), &mut buf, len, src_offset)?;
        sys::pwrite(dest.fd(), &buf, dest_offset)?;
        Ok(buf.len())
    }
}

/// `copy_file_range` until `len` bytes are copied or the source ends.
/// Ok(None): not supported for these descriptors (nothing was copied), copy
/// another way.
pub(crate) fn copy_file_range_all(
    src: i32,
    src_offset: u64,
    dest: i32,
    dest_offset: u64,
    len: usize,
) -> FsResult<Option<usize>> {
    let mut off_in = src_offset as i64;
    let mut off_out = dest_offset as i64;
    let mut done = 0usize;
    while done < len {
        // SAFETY: plain syscall; the offsets are ours, the kernel updates them.
        let r =
            unsafe { libc::copy_file_range(src, &mut off_in, dest, &mut off_out, len - done, 0) };
        if r < 0 {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return match e {
                libc::EINTR => continue,
                libc::EXDEV | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP if done == 0 => {
                    Ok(None)
                }
                libc::EBADF => Err(FsError::AccessDenied),
                e => Err(FsError::from_errno(e)),
            };
        }
        if r == 0 {
            break; // end of the source
        }
        done += r as usize;
    }
    Ok(Some(done))
}

impl OpenHandle {
    /// Give `dest` every named stream of this file, as copies (Apple's
    /// whole-file server-side copy carries the Finder info and resource
    /// fork with the data). Streams `dest` already has of the same name
    /// are replaced; others it has stay. Both opens must be of the files
    /// themselves, this one readable and `dest` writable.
    pub fn copy_streams_to(&self, dest: &OpenHandle) -> FsResult<()> {
        self.need(acc::FILE_READ_DATA)?;
        dest.need(acc::FILE_WRITE_DATA)?;
        if self.0.stream.is_some() || dest.0.stream.is_some() {
            return Err(FsError::InvalidParameter);
        }
        for (_, xattr) in crate::stream::list(self.fd())? {
            let name = std::ffi::CString::new(xattr).map_err(|_| FsError::InvalidName)?;
            let value = sys::xattr_get(self.fd(), &name).map_err(FsError::from_errno)?;
            sys::xattr_put(dest.fd(), &name, Some(&value)).map_err(FsError::from_errno)?;
        }
        if self.0.share.netatalk_metadata() && dest.0.share.netatalk_metadata() {
            // The Finder info in Netatalk's metadata, with the rest of it.
            match sys::xattr_get(self.fd(), netatalk_meta::XATTR) {
                Ok(v) => sys::xattr_put(dest.fd(), netatalk_meta::XATTR, Some(&v))
                    .map_err(FsError::from_errno)?,
                Err(libc::ENODATA) | Err(libc::ENOTSUP) => {}
                Err(e) => return Err(FsError::from_errno(e)),
            }
        }
        self.copy_sidecar_fork_to(dest)
    }

    /// The resource fork, where the share keeps it in a sidecar
    /// (`resource_fork_file.rs`).
    fn copy_sidecar_fork_to(&self, dest: &OpenHandle) -> FsResult<()> {
        let (src_share, dst_share) = (&self.0.share, &dest.0.share);
        if !src_share.resource_fork_in_sidecar() || !dst_share.resource_fork_in_sidecar() {
            return Ok(());
        }
        let (src_rel, dst_rel) = (self.0.rel(), dest.0.rel());
        if Arc::ptr_eq(&src_share.0, &dst_share.0) && src_rel == dst_rel {
            return Ok(());
        }
        let Some(src) = ResourceFork::open(src_share, self.fd(), &src_rel)? else {
            return Ok(());
        };
        let mut dst = ResourceFork::open_or_create(dst_share, dest.fd(), &dst_rel)?;
        dst.set_len(0)?;
        let mut buf = Vec::new();
        let mut at = 0;
        while at < src.len() {
            buf.clear();
            let n = src.read_at(at, 1 << 20, &mut buf)?;
            if n == 0 {
                break;
            }
            dst.write_at(at, &buf)?;
            at += n as u64;
        }
        Ok(())
    }
}
