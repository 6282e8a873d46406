//! Block cloning: the object store side of FSCTL_DUPLICATE_EXTENTS_TO_FILE
//! (MS-FSA 2.1.5.9.4, 2.1.5.10.4 in later editions; MS-FSCC 2.3.7/2.3.8).
//! A range of one file is made to read as a range of another (or of the
//! same) file. Where the host file system shares extents (btrfs, XFS,
//! bcachefs) `FICLONERANGE` does exactly that; elsewhere (ext4, tmpfs, a
//! range the kernel will not clone) the same bytes are copied in the kernel
//! with `copy_file_range`, so the client sees the same result either way.

use std::sync::Arc;

use crate::copy::copy_file_range_all;
use crate::error::{FsError, FsResult};
use crate::handle::OpenHandle;
use crate::sys;
use crate::types::access as acc;

/// Buffer size of the last-resort copy through user space.
const CHUNK: usize = 1 << 20;

impl OpenHandle {
    /// Make `len` bytes at `dest_offset` of `dest` read as the bytes at
    /// `src_offset` of this open (FSCTL_DUPLICATE_EXTENTS_TO_FILE, sent on
    /// `dest`). Returns the bytes duplicated. The rules, as Windows (ReFS)
    /// and Samba apply them (smbtorture `smb2.ioctl.dup_extents_*`):
    ///
    /// * This open needs FILE_READ_DATA or FILE_EXECUTE, `dest`
    ///   FILE_WRITE_DATA (AccessDenied); both are data files of one share,
    ///   i.e. one volume (InvalidParameter).
    /// * Offsets and length are 64-bit signed on the wire: each, and each
    ///   range end, must be in `0..=i64::MAX` (InvalidParameter).
    /// * The source range may not go past the source's allocation, its end
    ///   of file rounded up to a cluster (NotSupported, MS-FSCC 2.3.8);
    ///   bytes past the end of file within that cluster read as zeros.
    /// * Neither file changes size: a target range past the target's end of
    ///   file is cut at it (what Windows does, and Samba after it), and a
    ///   target offset past the end of file is InvalidParameter.
    /// * Nothing to duplicate succeeds at once.
    /// * One file's source and target ranges may not overlap, and a sparse
    ///   source needs a sparse target (NotSupported, MS-FSCC 2.3.8).
    ///
    /// Byte-range locks do not apply: unlike a copy-chunk, a clone is not
    /// held off by locks of other opens on either file, as on ReFS.
    pub fn duplicate_extents_to(
        &self,
        src_offset: u64,
        dest: &OpenHandle,
        dest_offset: u64,
        len: u64,
    ) -> FsResult<u64> {
        self.need(acc::FILE_READ_DATA | acc::FILE_EXECUTE)?;
        dest.need(acc::FILE_WRITE_DATA)?;
        if self.is_directory() || dest.is_directory() {
            return Err(FsError::InvalidParameter);
        }
        if !Arc::ptr_eq(&self.0.share.0, &dest.0.share.0) {
            return Err(FsError::InvalidParameter);
        }
        let signed = |v: u64| v <= i64::MAX as u64;
        let in_range = |off: u64| off.checked_add(len).is_some_and(signed);
        if !signed(len) || !in_range(src_offset) || !in_range(dest_offset) {
            return Err(FsError::InvalidParameter);
        }
        if self.0.stream.is_some() || dest.0.stream.is_some() {
            // Streams live in xattrs: nothing to clone, and their size
            // bounds every buffer below (the source range cannot go past
            // its last cluster, nor the target range past its end).
            let plan = self.plan(src_offset, dest, dest_offset, len)?;
            return self.duplicate_through_buffer(&plan, dest);
        }
        // Sizes are read, and the data moved, under the target's write
        // lock, as WRITE and copy-chunk take it: none of them comes in
        // between. (A size change does not take it; as with WRITE, a
        // target truncated meanwhile may end up at the end of this range.)
        let _serial = dest.serialize_writes();
        let plan = self.plan(src_offset, dest, dest_offset, len)?;
        if plan.count == 0 {
            return Ok(0);
        }
        dest.note_write();
        let copied = clone_or_copy(self.fd(), &plan, dest.fd())?;
        if copied < plan.count {
            dest.fill_zeros(plan.dest_offset + copied, plan.dest_offset + plan.count)?;
        }
        Ok(plan.count)
    }

    /// The checks that need both files' sizes, and the range they leave.
    fn plan(
        &self,
        src_offset: u64,
        dest: &OpenHandle,
        dest_offset: u64,
        len: u64,
    ) -> FsResult<Plan> {
        let src_size = self.data_size()?;
        let dest_size = dest.data_size()?;
        let cluster = self.cluster_size();
        let allocated = src_size
            .div_ceil(cluster)
            .checked_mul(cluster)
            .ok_or(FsError::InvalidParameter)?;
        // In range: checked by the caller.
        if src_offset + len > allocated {
            return Err(FsError::NotSupported);
        }
        let room = dest_size
            .checked_sub(dest_offset)
            .ok_or(FsError::InvalidParameter)?;
        let count = len.min(room);
        let plan = Plan {
            src_offset,
            dest_offset,
            count,
            available: count.min(src_size.saturating_sub(src_offset)),
        };
        if count == 0 {
            return Ok(plan);
        }
        let same_file = Arc::ptr_eq(&self.0.node, &dest.0.node);
        if same_file && src_offset < dest_offset + count && dest_offset < src_offset + count {
            return Err(FsError::NotSupported);
        }
        // A stream is never sparse (`allocated_ranges`).
        let sparse = |h: &OpenHandle| h.0.stream.is_none() && h.is_sparse();
        if sparse(self) && !sparse(dest) {
            return Err(FsError::NotSupported);
        }
        Ok(plan)
    }

    /// End of file of the data this open reads and writes (the stream's,
    /// for an open of a named stream).
    fn data_size(&self) -> FsResult<u64> {
        match self.stream_xattr() {
            Some(x) => self.stream_len(&x),
            None => Ok(sys::fstat(self.fd())?.st_size as u64),
        }
    }

    /// The cluster size FileFsSizeInformation reports for the share (its
    /// file system's fragment size), at least 1.
    fn cluster_size(&self) -> u64 {
        match sys::fstatvfs(self.0.share.0.root_fd()) {
            Ok(s) => sys::fragment_size(&s).max(1),
            Err(_) => 4096,
        }
    }

    /// A stream on either side: read the source bytes, write them, and
    /// zeros for the part of the range past the source's end of file.
    fn duplicate_through_buffer(&self, plan: &Plan, dest: &OpenHandle) -> FsResult<u64> {
        if plan.count == 0 {
            return Ok(0);
        }
        let mut data = self.read(plan.src_offset, plan.available as usize)?;
        data.resize(plan.count as usize, 0);
        dest.write(plan.dest_offset, &data)?;
        Ok(plan.count)
    }
}

/// What a request duplicates, once checked against the files' sizes.
#[derive(Debug, Clone, Copy)]
struct Plan {
    src_offset: u64,
    dest_offset: u64,
    /// Bytes of the target that change (the request's length, cut at the
    /// target's end of file).
    count: u64,
    /// Of those, the ones the source has before its end of file; the rest
    /// read as zeros.
    available: u64,
}

/// Clone `plan.available` bytes from `src` into `dest`, or copy them where
/// the file system cannot clone; returns the bytes done (short only if the
/// source shrank meanwhile).
fn clone_or_copy(src: i32, plan: &Plan, dest: i32) -> FsResult<u64> {
    if plan.available == 0 {
        return Ok(0);
    }
    match sys::clone_range(src, plan.src_offset, plan.available, dest, plan.dest_offset) {
        Ok(()) => return Ok(plan.available),
        // The file system does not share extents (EOPNOTSUPP, ENOTTY), the
        // files are on different mounts (EXDEV), or this range does not
        // fall on block boundaries (EINVAL): copy instead.
        Err(libc::EOPNOTSUPP | libc::ENOTTY | libc::ENOSYS | libc::EXDEV | libc::EINVAL) => {}
        Err(libc::EBADF) => return Err(FsError::AccessDenied),
        Err(e) => return Err(FsError::from_errno(e)),
    }
    let len = usize::try_from(plan.available).map_err(|_| FsError::InvalidParameter)?;
    if let Some(n) = copy_file_range_all(src, plan.src_offset, dest, plan.dest_offset, len)? {
        return Ok(n as u64);
    }
    // Not even copy_file_range: through a buffer, a chunk at a time.
    let mut buf = Vec::with_capacity(CHUNK.min(len));
    let mut done = 0u64;
    while done < plan.available {
        let want = (plan.available - done).min(CHUNK as u64) as usize;
        buf.clear();
        let n = sys::pread_into_vec(src, &mut buf, want, plan.src_offset + done)?;
        if n == 0 {
            break;
        }
        sys::pwrite(dest, &buf, plan.dest_offset + done)?;
        done += n as u64;
    }
    Ok(done)
}
