//! Sparse files (MS-FSA 2.1.5.9.33 FSCTL_SET_SPARSE, 2.1.5.9.34
//! FSCTL_SET_ZERO_DATA, 2.1.5.9.22 FSCTL_QUERY_ALLOCATED_RANGES) over a
//! POSIX file system: the sparse flag is a stored DOS attribute, zeroing
//! punches holes (`fallocate`), and allocated ranges are what
//! `SEEK_DATA`/`SEEK_HOLE` find.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{FsError, FsResult};
use crate::handle::OpenHandle;
use crate::info;
use crate::sys;
use crate::types::{access as acc, attr};

/// How long what a share's file system had free stands for what it has.
const FREE_SPACE_HINT_LIFETIME: Duration = Duration::from_secs(1);

/// What a share's file system had free a moment ago, so that a write
/// ending below it needs no `statvfs` to know it grows the file by no more
/// than the free space ([`OpenHandle::check_room_to_grow`]).
#[derive(Debug, Default)]
pub(crate) struct FreeSpaceHint {
    bytes: AtomicU64,
    /// Until when (nanoseconds since the epoch) `bytes` holds; 0: never.
    until_nanos: AtomicU64,
}

impl FreeSpaceHint {
    fn covers(&self, end: u64, now: SystemTime) -> bool {
        end <= self.bytes.load(Ordering::Relaxed)
            && nanos(now) < self.until_nanos.load(Ordering::Relaxed)
    }

    fn remember(&self, bytes: u64, now: SystemTime) {
        // Racing updates store one reading or another, each as fresh.
        self.bytes.store(bytes, Ordering::Relaxed);
        let until = nanos(now).saturating_add(FREE_SPACE_HINT_LIFETIME.as_nanos() as u64);
        self.until_nanos.store(until, Ordering::Relaxed);
    }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64)
}

impl OpenHandle {
    /// FILE_ATTRIBUTE_SPARSE_FILE on or off. Needs FILE_WRITE_DATA,
    /// FILE_APPEND_DATA or FILE_WRITE_ATTRIBUTES; a directory cannot be
    /// sparse (InvalidParameter).
    pub fn set_sparse(&self, sparse: bool) -> FsResult<()> {
        self.need(acc::FILE_WRITE_DATA | acc::FILE_APPEND_DATA | acc::FILE_WRITE_ATTRIBUTES)?;
        if self.is_directory() {
            return Err(FsError::InvalidParameter);
        }
        let fd = self.fd();
        let st = sys::fstat(fd)?;
        let old = info::read_dos(fd);
        let mut m = info::dos_meta_or_default(old, &st);
        if sparse {
            m.attributes |= attr::SPARSE_FILE;
        } else {
            m.attributes &= !attr::SPARSE_FILE;
        }
        if Some(m) != old {
            info::write_dos(fd, &m, &st)?;
        }
        Ok(())
    }

    pub(crate) fn is_sparse(&self) -> bool {
        info::read_dos(self.fd()).is_some_and(|m| m.attributes & attr::SPARSE_FILE != 0)
    }

    /// NTFS allocates a file that is not sparse up to its end of file, so
    /// growing one (a write past its end, or a larger end of file) fails
    /// with DISK_FULL when the volume has less free than the growth
    /// (MS-FSA 2.1.5.4: "the object store MUST ... allocate"; smbtorture
    /// smb2.rw.invalid). A POSIX file system would leave a hole and fail
    /// later, part-way through filling it; this answers at once. `end` is
    /// the end of file the request would make. A sparse file grows into a
    /// hole, as on NTFS.
    pub(crate) fn check_room_to_grow(&self, end: u64) -> FsResult<()> {
        let now = self.0.clock.now();
        let hint = &self.0.share.0.free_space;
        if hint.covers(end, now) {
            return Ok(());
        }
        // The growth is at most `end`: within what is free, nothing more
        // to look at (one statvfs a second per share on the write path).
        let s = sys::fstatvfs(self.fd())?;
        let free = s.f_bavail.saturating_mul(sys::fragment_size(&s));
        hint.remember(free, now);
        if end <= free {
            return Ok(());
        }
        let size = sys::fstat(self.fd())?.st_size as u64;
        if end <= size || end - size <= free || self.is_sparse() {
            return Ok(());
        }
        Err(FsError::DiskFull)
    }

    /// Zero `[offset, beyond_final_zero)`, never past the end of file (the
    /// size does not change). A sparse file gets a hole; any other keeps
    /// its blocks. Needs FILE_WRITE_DATA. Does not check byte-range locks.
    pub fn zero_range(&self, offset: u64, beyond_final_zero: u64) -> FsResult<()> {
        self.need(acc::FILE_WRITE_DATA)?;
        if self.is_directory() || beyond_final_zero < offset {
            return Err(FsError::InvalidParameter);
        }
        if let Some(x) = self.stream_xattr() {
            return self.stream_zero_range(&x, offset, beyond_final_zero);
        }
        let _serial = self.serialize_writes();
        let size = sys::fstat(self.fd())?.st_size as u64;
        let end = beyond_final_zero.min(size);
        if offset >= end {
            return Ok(());
        }
        self.note_write();
        self.fill_zeros(offset, end)
    }

    /// Zero `[offset, end)` of the file (not a stream), which the caller
    /// has checked lies within its end of file; the caller holds the
    /// write lock (`serialize_writes`) and has noted the write. A sparse
    /// file gets a hole; any other keeps its blocks.
    pub(crate) fn fill_zeros(&self, offset: u64, end: u64) -> FsResult<()> {
        if offset >= end {
            return Ok(());
        }
        let keep = libc::FALLOC_FL_KEEP_SIZE;
        let modes = if self.is_sparse() {
            [
                keep | libc::FALLOC_FL_PUNCH_HOLE,
                keep | libc::FALLOC_FL_ZERO_RANGE,
            ]
        } else {
            [
                keep | libc::FALLOC_FL_ZERO_RANGE,
                keep | libc::FALLOC_FL_PUNCH_HOLE,
            ]
        };
        let len = (end - offset) as i64;
        for mode in modes {
            // SAFETY: plain syscall on our descriptor.
            let r = unsafe { libc::fallocate(self.fd(), mode, offset as i64, len) };
            if r == 0 {
                return Ok(());
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EOPNOTSUPP) => continue,
                Some(e) => return Err(FsError::from_errno(e)),
                None => return Err(FsError::last_os()),
            }
        }
        // A file system that can neither punch nor zero a range: write zeros.
        let zeros = vec![0u8; (end - offset).min(1 << 20) as usize];
        let mut at = offset;
        while at < end {
            let n = (end - at).min(zeros.len() as u64) as usize;
            sys::pwrite(self.fd(), &zeros[..n], at)?;
            at += n as u64;
        }
        Ok(())
    }

    /// The allocated ranges (offset, length) of `[offset, offset + len)`,
    /// clipped to the end of file. A file not marked sparse is reported as
    /// allocated throughout, as NTFS does. Needs FILE_READ_DATA.
    pub fn allocated_ranges(&self, offset: u64, len: u64) -> FsResult<Vec<(u64, u64)>> {
        self.need(acc::FILE_READ_DATA)?;
        let stream = self.stream_xattr();
        let size = match &stream {
            // A stream is never sparse: allocated throughout.
            Some(x) => self.stream_len(x)?,
            None => sys::fstat(self.fd())?.st_size as u64,
        };
        if len == 0 || size == 0 || offset >= size {
            return Ok(Vec::new());
        }
        let end = offset
            .checked_add(len)
            .filter(|e| *e <= i64::MAX as u64)
            .ok_or(FsError::InvalidParameter)?
            .min(size);
        if stream.is_some() || !self.is_sparse() {
            return Ok(vec![(offset, end - offset)]);
        }
        let mut ranges = Vec::new();
        let mut at = offset;
        while at < end {
            let Some(data) = seek(self.fd(), at, libc::SEEK_DATA)? else {
                break; // only a hole up to the end
            };
            if data >= end {
                break;
            }
            let hole = seek(self.fd(), data, libc::SEEK_HOLE)?.unwrap_or(end);
            let stop = hole.min(end);
            ranges.push((data, stop - data));
            at = stop;
        }
        Ok(ranges)
    }
}

/// `lseek` with SEEK_DATA / SEEK_HOLE; None when there is no more data
/// (ENXIO). Only the descriptor's position moves, which no I/O path uses
/// (all reads and writes are positioned).
fn seek(fd: i32, at: u64, whence: i32) -> FsResult<Option<u64>> {
    // SAFETY: plain syscall.
    let r = unsafe { libc::lseek(fd, at as i64, whence) };
    if r >= 0 {
        return Ok(Some(r as u64));
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENXIO) => Ok(None),
        Some(e) => Err(FsError::from_errno(e)),
        None => Err(FsError::last_os()),
    }
}
