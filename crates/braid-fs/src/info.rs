//! File metadata in Windows terms: DOS attributes and creation time that
//! POSIX cannot hold live in the `user.braid.dos` xattr; where xattrs are
//! unsupported we fall back to what the mode bits and statx can say.

use std::ffi::{CStr, OsStr};
use std::os::fd::RawFd;
use std::time::SystemTime;

use crate::error::{FsError, FsResult};
use crate::meta::{AttrCache, FileStamp, KeptXattr};
use crate::sys;
use crate::types::{attr, FileInfo};

pub(crate) const DOS_XATTR: &CStr = c"user.braid.dos";
const VERSION: u8 = 1;
/// Braid's own flag in the top bit of the record's attribute word (no
/// FILE_ATTRIBUTE_* uses it; readers mask the word with [`attr::STORED`],
/// so older ones ignore it): see [`DosMeta::xattr_block`].
const XATTR_BLOCK: u32 = 0x8000_0000;

/// What we persist beyond POSIX metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DosMeta {
    /// FILE_ATTRIBUTE_* restricted to [`attr::STORED`].
    pub attributes: u32,
    /// Creation time set by a client (overrides statx btime).
    pub creation: Option<SystemTime>,
    /// EaSize of the file's extended attributes, kept here so that listings
    /// need no extra system call per entry (0: none).
    pub ea_size: u32,
    /// A ChangeTime a client set (see [`ChangeTime`]).
    pub change: Option<ChangeTime>,
    /// Storing the file's security descriptor (`security.rs`) or its EAs
    /// (`ea.rs`) pushed its xattrs out of the inode into a block of their
    /// own (ext4 keeps what does not fit the inode in one file-system
    /// block): `st_blocks` counts that block, which holds no data, so
    /// AllocationSize leaves out one `st_blksize`. Recorded when the
    /// xattrs are written ([`note_xattr_blocks`]), so that reading the
    /// allocation needs no system call beyond the `fstat` and this record,
    /// which every info query reads anyway. A block that named streams
    /// brought stays counted, as it always was.
    pub xattr_block: bool,
}

/// A ChangeTime set through FileBasicInformation (MS-FSA 2.1.5.14.2 sets
/// File.LastChangeTime to InputBuffer.ChangeTime). POSIX cannot set a
/// ctime, so the value is kept in the DOS record together with the host
/// mtime the file had right after the set: it is reported while the mtime
/// is still that one, i.e. until the data is written or the write time
/// set again, and until Braid rewrites the record for another metadata
/// change (which drops it, unless made through the open that set the
/// ChangeTime: MS-FSA Open.UserSetChangeTime). Afterwards the host ctime is
/// reported again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChangeTime {
    pub value: SystemTime,
    /// The host mtime right after the set.
    pub mtime: SystemTime,
}

fn put_time(v: &mut Vec<u8>, t: SystemTime) {
    let ts = sys::to_timespec(t);
    v.extend_from_slice(&{ ts.tv_sec }.to_le_bytes());
    v.extend_from_slice(&(ts.tv_nsec as u32).to_le_bytes());
}

/// A time as [`put_time`] wrote it (12 bytes), if well formed.
fn get_time(b: &[u8]) -> Option<SystemTime> {
    let sec = i64::from_le_bytes(b.get(..8)?.try_into().ok()?);
    let nsec = u32::from_le_bytes(b.get(8..12)?.try_into().ok()?);
    (nsec < 1_000_000_000).then(|| sys::ts(sec, nsec as i64))
}

impl DosMeta {
    /// Layout (little-endian): version 1, attributes (4; the top bit is
    /// [`DosMeta::xattr_block`]), creation flag
    /// (1) and creation time (12: seconds i64, nanoseconds u32) when the
    /// flag is 1, then the optional tail: EaSize (4), present when nonzero
    /// or when a ChangeTime follows, and the ChangeTime (12) with the mtime
    /// it belongs to (12). Older records simply end earlier, and older
    /// readers ignore the ChangeTime after the EaSize.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(46);
        v.push(VERSION);
        let flags = if self.xattr_block { XATTR_BLOCK } else { 0 };
        v.extend_from_slice(&(self.attributes | flags).to_le_bytes());
        match self.creation {
            Some(t) => {
                v.push(1);
                put_time(&mut v, t);
            }
            None => v.push(0),
        }
        if self.ea_size != 0 || self.change.is_some() {
            v.extend_from_slice(&self.ea_size.to_le_bytes());
        }
        if let Some(c) = self.change {
            put_time(&mut v, c.value);
            put_time(&mut v, c.mtime);
        }
        v
    }

    pub fn decode(b: &[u8]) -> Option<DosMeta> {
        if b.len() < 6 || b[0] != VERSION {
            return None;
        }
        let word = u32::from_le_bytes(b[1..5].try_into().ok()?);
        let attributes = word & attr::STORED;
        let (creation, rest) = if b[5] == 1 && b.len() >= 18 {
            (Some(get_time(&b[6..18])?), &b[18..])
        } else {
            (None, &b[6..])
        };
        // Optional trailing EaSize and ChangeTime (absent in older records).
        let ea_size = rest
            .get(..4)
            .map_or(0, |x| u32::from_le_bytes(x.try_into().unwrap_or_default()));
        let change = match (
            rest.get(4..16).and_then(get_time),
            rest.get(16..28).and_then(get_time),
        ) {
            (Some(value), Some(mtime)) => Some(ChangeTime { value, mtime }),
            _ => None,
        };
        Some(DosMeta {
            attributes,
            creation,
            ea_size,
            change,
            xattr_block: word & XATTR_BLOCK != 0,
        })
    }
}

/// Read the stored DOS metadata of an open fd (None: absent/unsupported).
pub(crate) fn read_dos(fd: RawFd) -> Option<DosMeta> {
    sys::fgetxattr(fd, DOS_XATTR).and_then(|b| DosMeta::decode(&b))
}

/// [`read_dos`] of the file whose `stat` is `st`, through the share's
/// attribute layer when it has one (`meta/attr_cache.rs`).
pub(crate) fn read_dos_cached(
    attrs: Option<&AttrCache>,
    fd: RawFd,
    st: &libc::stat,
) -> Option<DosMeta> {
    let Some(attrs) = attrs else {
        return read_dos(fd);
    };
    let value = attrs.xattr(
        &FileStamp::of(st),
        KeptXattr::Dos,
        || match sys::fgetxattr_small(fd, DOS_XATTR) {
            Ok(v) => Ok(Some(v)),
            Err(libc::ENODATA) => Ok(None),
            Err(e) => Err(e),
        },
    );
    value.ok().flatten().and_then(|b| DosMeta::decode(&b))
}

/// [`read_dos_at`] of the entry whose `lstat` is `st`, through the share's
/// attribute layer when it has one. The value is read by name after the
/// `lstat`: had the name been moved to another inode meanwhile, the inode
/// `st` describes was renamed or unlinked, which moved its change time, so
/// what is kept under the old one is never served.
pub(crate) fn read_dos_at_cached(
    attrs: Option<&AttrCache>,
    dirfd: RawFd,
    name: &OsStr,
    st: &libc::stat,
) -> Option<DosMeta> {
    let Some(attrs) = attrs else {
        return read_dos_at(dirfd, name);
    };
    let value = attrs.xattr(
        &FileStamp::of(st),
        KeptXattr::Dos,
        || match sys::getxattr_at_small(dirfd, name, DOS_XATTR) {
            Ok(v) => Ok(Some(v)),
            Err(libc::ENODATA) => Ok(None),
            Err(e) => Err(e),
        },
    );
    value.ok().flatten().and_then(|b| DosMeta::decode(&b))
}

pub(crate) fn read_dos_at(dirfd: RawFd, name: &OsStr) -> Option<DosMeta> {
    sys::getxattr_at(dirfd, name, DOS_XATTR).and_then(|b| DosMeta::decode(&b))
}

/// Persist DOS metadata. Where xattrs are unsupported, READONLY falls back
/// to clearing/setting the owner write bit; other bits and the creation
/// time are then not kept.
pub(crate) fn write_dos(fd: RawFd, meta: &DosMeta, st: &libc::stat) -> FsResult<()> {
    match sys::fsetxattr(fd, DOS_XATTR, &meta.encode()) {
        Ok(()) => Ok(()),
        Err(libc::ENOTSUP) | Err(libc::EPERM) | Err(libc::EBADF) => {
            let ro = meta.attributes & attr::READONLY != 0;
            let mode = st.st_mode & 0o7777;
            let new = if ro { mode & !0o222 } else { mode | 0o200 };
            if new != mode {
                // SAFETY: plain syscall.
                sys::check(unsafe { libc::fchmod(fd, new) })?;
            }
            Ok(())
        }
        Err(e) => Err(FsError::from_errno(e)),
    }
}

/// How a change of a file's xattrs moved its blocks, from its stat on
/// either side of the change: `Some(true)` when they went from the inode
/// into a block of their own (ext4 keeps what does not fit the inode in
/// one file-system block), `Some(false)` when that block was freed, `None`
/// when nothing moved or more than one block did (data written meanwhile
/// by another open): a block there before stays what it was. ext4's
/// FIEMAP_FLAG_XATTR cannot tell instead: for a file with xattrs both in
/// the inode and in a block it reports only the inode's.
pub(crate) fn xattr_block_change(before: &libc::stat, after: &libc::stat) -> Option<bool> {
    let block = before.st_blksize as u64;
    let moved = (after.st_blocks - before.st_blocks) * 512;
    match moved {
        m if m > 0 && m.unsigned_abs() == block => Some(true),
        m if m < 0 && m.unsigned_abs() == block => Some(false),
        _ => None,
    }
}

/// After Braid changed xattrs of the file `fd` (a security descriptor,
/// EAs) whose stat was `before`, record in its DOS record whether its
/// xattrs now take a block ([`DosMeta::xattr_block`]). One `fstat`; the
/// record is rewritten only when a block came or went.
pub(crate) fn note_xattr_blocks(fd: RawFd, before: &libc::stat) -> FsResult<()> {
    if is_dir(before) {
        // A directory's allocation is reported as 0 whatever its blocks.
        return Ok(());
    }
    let after = sys::fstat(fd)?;
    let Some(block) = xattr_block_change(before, &after) else {
        return Ok(());
    };
    let old = read_dos(fd);
    if old.is_some_and(|m| m.xattr_block) == block {
        return Ok(());
    }
    let mut m = dos_meta_or_default(old, &after);
    m.xattr_block = block;
    write_dos(fd, &m, &after)
}

pub(crate) fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// Effective DOS attributes from stat + stored metadata.
pub(crate) fn attributes(st: &libc::stat, meta: Option<&DosMeta>) -> u32 {
    let dir = is_dir(st);
    let mut a = match meta {
        Some(m) => m.attributes & attr::STORED,
        None => {
            let mut a = if dir { 0 } else { attr::ARCHIVE };
            if !dir && st.st_mode & 0o200 == 0 {
                a |= attr::READONLY;
            }
            a
        }
    };
    if dir {
        a |= attr::DIRECTORY;
    }
    if a == 0 {
        a = attr::NORMAL;
    }
    a
}

/// Report `info` as hidden (a name the share hides, `share.rs`
/// HiddenNames); NORMAL is only ever reported alone.
pub(crate) fn show_hidden(info: &mut FileInfo) {
    info.attributes = (info.attributes & !attr::NORMAL) | attr::HIDDEN;
}

/// The stored metadata, or what a file without any has (its attributes as
/// derived from stat), ready to be changed and written back. A ChangeTime
/// set before is left out: rewriting the record is a metadata change of its
/// own, after which the host ctime tells the change time again.
pub(crate) fn dos_meta_or_default(stored: Option<DosMeta>, st: &libc::stat) -> DosMeta {
    match stored {
        Some(m) => DosMeta { change: None, ..m },
        None => DosMeta {
            attributes: attributes(st, None) & attr::SETTABLE,
            ..DosMeta::default()
        },
    }
}

/// Build a [`FileInfo`] from stat, optional birth time and stored metadata.
pub(crate) fn file_info(
    st: &libc::stat,
    btime: Option<SystemTime>,
    meta: Option<&DosMeta>,
    delete_pending: bool,
) -> FileInfo {
    let dir = is_dir(st);
    let atime = sys::ts(st.st_atime, st.st_atime_nsec);
    let mtime = sys::ts(st.st_mtime, st.st_mtime_nsec);
    let ctime = sys::ts(st.st_ctime, st.st_ctime_nsec);
    let creation = meta
        .and_then(|m| m.creation)
        .or(btime)
        .unwrap_or_else(|| mtime.min(ctime));
    let change = match meta.and_then(|m| m.change) {
        Some(c) if c.mtime == mtime => c.value,
        _ => ctime,
    };
    FileInfo {
        creation_time: creation,
        last_access_time: atime,
        last_write_time: mtime,
        change_time: change,
        allocation_size: if dir { 0 } else { allocation(st, meta) },
        end_of_file: if dir { 0 } else { st.st_size as u64 },
        attributes: attributes(st, meta),
        number_of_links: st.st_nlink as u32,
        delete_pending,
        is_directory: dir,
        file_id: st.st_ino,
        ea_size: meta.map_or(0, |m| m.ea_size),
    }
}

/// Info of an open fd.
pub(crate) fn fd_info(fd: RawFd, delete_pending: bool) -> FsResult<FileInfo> {
    fd_info_cached(None, fd, delete_pending)
}

/// [`fd_info`] through the share's attribute layer when it has one: the
/// DOS record and the birth time come from it while the file's change
/// time stands (the `fstat` is always made: POSIX attributes are not kept).
pub(crate) fn fd_info_cached(
    attrs: Option<&AttrCache>,
    fd: RawFd,
    delete_pending: bool,
) -> FsResult<FileInfo> {
    let st = sys::fstat(fd)?;
    let meta = read_dos_cached(attrs, fd, &st);
    let btime = match attrs {
        Some(a) => a.btime(&FileStamp::of(&st), || sys::btime(fd)),
        None => sys::btime(fd),
    };
    Ok(file_info(&st, btime, meta.as_ref(), delete_pending))
}

/// AllocationSize of a file: its blocks, less the xattr block its stored
/// security descriptor took ([`DosMeta::xattr_block`]).
fn allocation(st: &libc::stat, meta: Option<&DosMeta>) -> u64 {
    let blocks = st.st_blocks as u64 * 512;
    if meta.is_some_and(|m| m.xattr_block) {
        blocks.saturating_sub(st.st_blksize as u64)
    } else {
        blocks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn meta(creation: Option<SystemTime>, ea_size: u32, change: Option<ChangeTime>) -> DosMeta {
        DosMeta {
            attributes: attr::ARCHIVE,
            creation,
            ea_size,
            change,
            xattr_block: false,
        }
    }

    #[test]
    fn dos_meta_roundtrip() {
        let m = DosMeta {
            attributes: attr::HIDDEN | attr::READONLY,
            creation: Some(UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789)),
            ea_size: 44,
            change: None,
            xattr_block: true,
        };
        assert_eq!(DosMeta::decode(&m.encode()), Some(m));
        let m2 = meta(None, 0, None);
        assert_eq!(DosMeta::decode(&m2.encode()), Some(m2));
        let old = DosMeta {
            attributes: 0,
            creation: Some(UNIX_EPOCH - Duration::from_secs(86_400 * 365)),
            ea_size: 0,
            change: None,
            xattr_block: false,
        };
        assert_eq!(DosMeta::decode(&old.encode()), Some(old));
        let eas = meta(None, 20, None);
        assert_eq!(DosMeta::decode(&eas.encode()), Some(eas));
        assert_eq!(DosMeta::decode(&[9, 0, 0]), None);
        // The flag is no attribute: a reader that knows only attributes
        // (masking with STORED) sees the same ones.
        let b = m.encode();
        let word = u32::from_le_bytes(b[1..5].try_into().unwrap());
        assert_eq!(word & attr::STORED, attr::HIDDEN | attr::READONLY);
    }

    #[test]
    fn dos_meta_change_time_roundtrip() {
        let c = ChangeTime {
            value: UNIX_EPOCH + Duration::new(15_032_385_535, 999_999_999),
            mtime: UNIX_EPOCH - Duration::new(63_158_400, 0) + Duration::from_nanos(1),
        };
        let ct = Some(UNIX_EPOCH + Duration::new(1_600_000_000, 5));
        for m in [
            meta(None, 0, Some(c)),
            meta(ct, 0, Some(c)),
            meta(None, 72, Some(c)),
            meta(ct, 72, Some(c)),
        ] {
            let b = m.encode();
            assert_eq!(DosMeta::decode(&b), Some(m));
            // An older reader stops after the EaSize and keeps the rest.
            let head = if m.creation.is_some() { 18 } else { 6 };
            assert_eq!(b.len(), head + 4 + 24);
        }
        // A damaged ChangeTime is dropped, the rest of the record kept.
        let mut b = meta(ct, 72, Some(c)).encode();
        let n = b.len();
        b[n - 16..n - 12].copy_from_slice(&2_000_000_000u32.to_le_bytes());
        assert_eq!(DosMeta::decode(&b), Some(meta(ct, 72, None)));
    }

    #[test]
    fn dos_meta_decodes_old_records() {
        // Version 1 without EaSize, with and without a creation time.
        let mut b = vec![1];
        b.extend_from_slice(&(attr::HIDDEN | attr::ARCHIVE).to_le_bytes());
        b.push(0);
        let m = DosMeta::decode(&b).unwrap();
        assert_eq!(m.attributes, attr::HIDDEN | attr::ARCHIVE);
        assert_eq!((m.creation, m.ea_size, m.change), (None, 0, None));
        let mut b = vec![1];
        b.extend_from_slice(&attr::ARCHIVE.to_le_bytes());
        b.push(1);
        b.extend_from_slice(&1_000_000_000i64.to_le_bytes());
        b.extend_from_slice(&7u32.to_le_bytes());
        let m = DosMeta::decode(&b).unwrap();
        assert_eq!(
            m.creation,
            Some(UNIX_EPOCH + Duration::new(1_000_000_000, 7))
        );
        assert_eq!((m.ea_size, m.change), (0, None));
        // With an EaSize.
        b.extend_from_slice(&36u32.to_le_bytes());
        let m = DosMeta::decode(&b).unwrap();
        assert_eq!((m.ea_size, m.change), (36, None));
    }
}
