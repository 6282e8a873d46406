//! Large aligned writes that bypass the page cache (`O_DIRECT`).
//!
//! A buffered write copies every byte into the page cache and leaves the
//! kernel's writeback to copy it out again later; for a 1 MiB SMB WRITE
//! that copy is the largest single cost on the server (see
//! docs/BENCHMARKS.md). When the payload already sits in memory aligned as
//! the file system asks (STATX_DIOALIGN) — the receive path places WRITE
//! payloads on a page boundary for this — it can go to the device directly.
//! Anything that does not fit (small, unaligned, a file system without
//! O_DIRECT, an error) takes the ordinary buffered path, so the result seen
//! by clients is the same either way; Linux keeps the two coherent by
//! flushing and invalidating cached pages over the range a direct write
//! covers.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

use crate::error::FsResult;
use crate::handle::OpenHandle;
use crate::sys;
use crate::types::access;
use crate::uring::WriteBuf;

/// Writes smaller than this stay buffered: they are cheap to copy, and a
/// small direct write would wait for the device.
pub const DIRECT_WRITE_MIN: usize = 128 * 1024;

/// A second descriptor of an open file, opened with `O_DIRECT`, and the
/// alignment the file system requires of it.
struct DirectFd {
    fd: OwnedFd,
    mem_align: usize,
    offset_align: u64,
}

/// Per open: the direct descriptor, opened on the first large write that
/// could use it (most opens never write that much). SMB opens keep one in
/// their [`OpenHandle`]; the NFS server keeps one beside each open's fd.
#[derive(Default)]
pub struct DirectWriter {
    direct: OnceLock<Option<DirectFd>>,
}

impl DirectWriter {
    /// The direct descriptor for writing `data` at `offset`, if the write
    /// qualifies: large enough, and buffer, offset and length aligned as
    /// the file system requires.
    fn fd_for(&self, buffered_fd: RawFd, offset: u64, data: &[u8]) -> Option<RawFd> {
        if data.len() < DIRECT_WRITE_MIN {
            return None;
        }
        let d = self
            .direct
            .get_or_init(|| open_direct(buffered_fd))
            .as_ref()?;
        let aligned = (data.as_ptr() as usize).is_multiple_of(d.mem_align)
            && offset.is_multiple_of(d.offset_align)
            && (data.len() as u64).is_multiple_of(d.offset_align);
        aligned.then(|| d.fd.as_raw_fd())
    }

    /// Write `data` at `offset` through the direct descriptor when it
    /// qualifies; `None` means the caller writes it buffered (on
    /// `buffered_fd`, the open's own descriptor, whose access mode and
    /// sync flags the direct one copies).
    pub fn try_write(
        &self,
        buffered_fd: RawFd,
        offset: u64,
        data: &[u8],
    ) -> Option<FsResult<usize>> {
        let fd = self.fd_for(buffered_fd, offset, data)?;
        match sys::pwrite(fd, data, offset) {
            Ok(n) => Some(Ok(n)),
            // A direct write can fail where a buffered one would not (some
            // file systems refuse O_DIRECT only at write time); rewriting the
            // same bytes buffered is harmless and reports the real error.
            Err(_) => None,
        }
    }
}

impl OpenHandle {
    /// Start a large aligned write that goes to the device without a
    /// blocking thread (io_uring, `uring.rs`). `None`: it does not qualify
    /// (share setting, size, alignment, no O_DIRECT or io_uring) — use
    /// [`OpenHandle::write`]. The future resolves to the bytes written, or
    /// `None` if the direct write failed and must be redone with
    /// [`OpenHandle::write`] (which reports the real error, if any).
    /// Byte-range locks are not checked here either.
    pub fn write_queued(
        &self,
        offset: u64,
        data: WriteBuf,
    ) -> Option<impl std::future::Future<Output = Option<usize>> + Send + 'static> {
        let inner = &self.0;
        if !inner.share.0.direct_writes()
            || inner.is_dir
            || inner.stream.is_some()
            || self.need(access::FILE_WRITE_DATA).is_err()
            // OpenHandle::write gives the DISK_FULL.
            || self
                .check_room_to_grow(offset.saturating_add((*data).as_ref().len() as u64))
                .is_err()
        {
            return None;
        }
        let fd = inner.direct.fd_for(self.fd(), offset, (*data).as_ref())?;
        let ring = inner.ring.get()?.clone();
        // MS-FSA 2.1.4.17, as for every write (a redo through
        // `OpenHandle::write` notes nothing new).
        self.note_write();
        // Holding the open keeps the direct descriptor open until the
        // write completes.
        let keep_open = self.clone();
        Some(async move {
            let r = ring.write(fd, offset, data).await;
            drop(keep_open);
            r.ok()
        })
    }
}

/// Reopen the file behind `fd` with the same access mode and sync flags
/// plus `O_DIRECT`. Reopening through /proc names the open inode itself,
/// so a rename since the open cannot redirect it.
fn open_direct(fd: RawFd) -> Option<DirectFd> {
    // SAFETY: plain syscall on a descriptor we own.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || flags & libc::O_APPEND != 0 {
        return None;
    }
    let keep = flags & (libc::O_ACCMODE | libc::O_DSYNC | libc::O_SYNC);
    if keep & libc::O_ACCMODE == libc::O_RDONLY {
        return None;
    }
    let path = CString::new(format!("/proc/self/fd/{fd}")).ok()?;
    // SAFETY: plain syscall with a valid C string.
    let raw = unsafe { libc::open(path.as_ptr(), keep | libc::O_DIRECT | libc::O_CLOEXEC) };
    if raw < 0 {
        return None;
    }
    // SAFETY: fresh descriptor.
    let direct = unsafe { OwnedFd::from_raw_fd(raw) };
    let (mem_align, offset_align) = dio_alignment(direct.as_raw_fd())?;
    Some(DirectFd {
        fd: direct,
        mem_align,
        offset_align,
    })
}

/// STATX_DIOALIGN (Linux 6.1): the buffer and offset alignment direct I/O
/// needs on this file; `None` when the file system does not support it.
fn dio_alignment(fd: RawFd) -> Option<(usize, u64)> {
    // SAFETY: statx fills the zeroed struct; an empty path with
    // AT_EMPTY_PATH names `fd` itself.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::statx(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if r != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 {
        return None;
    }
    let (mem, off) = (stx.stx_dio_mem_align, stx.stx_dio_offset_align);
    // Zero means "direct I/O not supported"; insist on powers of two.
    if mem == 0 || off == 0 || !mem.is_power_of_two() || !off.is_power_of_two() {
        return None;
    }
    Some((mem as usize, off as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A page-aligned buffer of `len` bytes with a recognisable pattern.
    fn aligned(len: usize) -> (Vec<u8>, usize) {
        let mut v = vec![0u8; len + 4096];
        let pad = (4096 - (v.as_ptr() as usize) % 4096) % 4096;
        for (i, b) in v[pad..pad + len].iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        (v, pad)
    }

    /// A scratch directory on the disk-backed /var/tmp (tmpfs /tmp may lack
    /// O_DIRECT), removed when dropped.
    struct Scratch(std::path::PathBuf);
    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let p = std::path::PathBuf::from(format!(
                "/var/tmp/braid-direct-{tag}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Scratch(p)
        }
        fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn temp_file(dir: &std::path::Path, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.join(name))
            .unwrap()
    }

    #[test]
    fn aligned_large_write_reads_back_and_small_or_unaligned_is_declined() {
        let dir = Scratch::new("rw");
        let f = temp_file(dir.path(), "a");
        let w = DirectWriter::default();
        let (buf, pad) = aligned(DIRECT_WRITE_MIN * 2);
        let data = &buf[pad..pad + DIRECT_WRITE_MIN * 2];
        // Small and misaligned writes are left to the buffered path.
        assert!(w.try_write(f.as_raw_fd(), 0, &data[..4096]).is_none());
        assert!(w
            .try_write(f.as_raw_fd(), 0, &buf[pad + 1..pad + 1 + DIRECT_WRITE_MIN])
            .is_none());
        match w.try_write(f.as_raw_fd(), 8192, data) {
            Some(r) => assert_eq!(r.unwrap(), data.len()),
            // The file system of /var/tmp has no O_DIRECT: nothing to check.
            None => return,
        }
        let mut back = Vec::new();
        std::fs::File::open(dir.path().join("a"))
            .unwrap()
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back.len(), 8192 + data.len());
        assert!(back[..8192].iter().all(|&b| b == 0));
        assert_eq!(&back[8192..], data);
    }

    #[test]
    fn read_only_and_append_opens_are_never_direct() {
        let dir = Scratch::new("ro");
        drop(temp_file(dir.path(), "r"));
        let (buf, pad) = aligned(DIRECT_WRITE_MIN);
        let data = &buf[pad..pad + DIRECT_WRITE_MIN];
        let ro = std::fs::File::open(dir.path().join("r")).unwrap();
        assert!(DirectWriter::default()
            .try_write(ro.as_raw_fd(), 0, data)
            .is_none());
        let ap = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("r"))
            .unwrap();
        assert!(DirectWriter::default()
            .try_write(ap.as_raw_fd(), 0, data)
            .is_none());
    }
}
