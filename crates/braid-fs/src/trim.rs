//! MS-FSA 2.1.5.10.6 FSCTL_FILE_LEVEL_TRIM: a client (a virtual machine's
//! disk image on the share, say) tells the server that ranges of a file no
//! longer hold data it needs, so the storage under them can be given back.
//! On a POSIX file system that is a hole punched in the file: the blocks
//! return to the file system, which passes the discard on to thin or
//! flash storage, and the range reads back as zeros.

use std::os::fd::AsRawFd;

use crate::error::{FsError, FsResult};
use crate::handle::OpenHandle;
use crate::share::Share;
use crate::sys;
use crate::types::access as acc;
use crate::LockOwner;

/// Trim ranges are cut to whole pages, as Windows cuts them (the
/// FILE_LEVEL_TRIM_RANGE remarks: the offset rounds up to a page boundary
/// and the length down to whole pages).
pub const TRIM_ALIGNMENT: u64 = 4096;

/// `statfs` magic numbers of the Linux file systems that punch holes
/// (`fallocate(FALLOC_FL_PUNCH_HOLE)`): ext4 (also ext2/3 as ext4),
/// XFS, Btrfs, tmpfs, F2FS and OpenZFS; and overlayfs (containers), which
/// passes the call to the file system under it (one that cannot punch
/// then answers, and the trim fails with NOT_SUPPORTED).
const PUNCHING_FILE_SYSTEMS: [u64; 7] = [
    0xEF53,
    0x5846_5342,
    0x9123_683E,
    0x0102_1994,
    0xF2F5_2010,
    0x2FC1_2FC1,
    0x794C_7630,
];

impl Share {
    /// Whether FSCTL_FILE_LEVEL_TRIM does anything here; also what
    /// FileFsSectorSizeInformation says (SSINFO_FLAGS_TRIM_ENABLED).
    /// A snapshot never changes.
    pub(crate) fn can_trim(&self) -> bool {
        if self.read_only() {
            return false;
        }
        *self.trims.get_or_init(|| {
            sys::fstatfs(self.root.as_raw_fd())
                .is_ok_and(|s| PUNCHING_FILE_SYSTEMS.contains(&(s.f_type as u64)))
        })
    }
}

impl crate::ShareRef {
    /// See [`Share::can_trim`].
    pub fn can_trim(&self) -> bool {
        self.0.can_trim()
    }
}

impl OpenHandle {
    /// Trim `ranges` (offset, length) of the file: each is cut to whole
    /// pages and to the end of file, and the storage under what is left is
    /// released. A range overlapping another open's byte-range lock stops
    /// the trim there (`LockConflict`) with the ranges before it done.
    /// Returns how many ranges were processed (NumRangesProcessed).
    ///
    /// The caller has checked that no `offset + length` overflows.
    pub fn trim(&self, ranges: &[(u64, u64)], lock_key: u32) -> FsResult<u32> {
        self.need(acc::FILE_WRITE_DATA)?;
        if self.is_directory() {
            return Err(FsError::InvalidParameter);
        }
        if !self.0.share.0.can_trim() {
            return Err(FsError::NotSupported);
        }
        let mut processed = 0u32;
        for &(offset, length) in ranges {
            let start = offset.div_ceil(TRIM_ALIGNMENT) * TRIM_ALIGNMENT;
            let end = (offset + length) / TRIM_ALIGNMENT * TRIM_ALIGNMENT;
            if start < end {
                self.check_io_lock(start, end - start, true, LockOwner(lock_key as u64))?;
                self.trim_range(start, end)?;
            }
            processed += 1;
        }
        Ok(processed)
    }

    fn trim_range(&self, start: u64, end: u64) -> FsResult<()> {
        if let Some(x) = self.stream_xattr() {
            // A stream is stored in one extended attribute: nothing under
            // a part of it can be released, but it reads back as zeros as
            // a trimmed range of the file does.
            return self.stream_zero_range(&x, start, end);
        }
        let _serial = self.serialize_writes();
        let size = sys::fstat(self.fd())?.st_size as u64;
        // The page the end of file falls in is trimmed to the end of file.
        let end = if end >= size.div_ceil(TRIM_ALIGNMENT) * TRIM_ALIGNMENT {
            size
        } else {
            end
        };
        if start >= end {
            return Ok(());
        }
        self.note_write();
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        // SAFETY: plain syscall on our descriptor.
        let r = unsafe { libc::fallocate(self.fd(), mode, start as i64, (end - start) as i64) };
        if r < 0 {
            return Err(FsError::last_os());
        }
        Ok(())
    }
}
