//! Finder metadata kept as Netatalk keeps it: the xattr
//! `user.org.netatalk.Metadata`, an AppleDouble v2 record of 402 bytes
//! (Samba adouble.c, its `fruit:metadata = netatalk`, the default of
//! vfs_fruit). A share with `macos_metadata = "netatalk"` serves
//! AFP_AfpInfo from it, so Finder tags, colours and type/creator codes that
//! Samba or Netatalk stored show through Braid and the reverse.
//!
//! The stream layer treats the xattr name [`XATTR`] as the AFP_AfpInfo
//! stream's own (`stream.rs` routes its reads and writes here): the stream
//! exists while the record's Finder info is not all zeros, and reads as
//! the 60-byte AfpInfo carrying it. Creating the stream stores nothing (as
//! vfs_fruit's "fake fd"); a write puts the Finder info into the record,
//! keeping its other entries (dates, AFP file info, Netatalk's private
//! ones), or makes a new record as Samba's `ad_init` does; emptying or
//! deleting the stream removes the record, as vfs_fruit does. A record
//! that does not parse is left alone on disk (Samba removes it) and reads
//! as absent.

use std::ffi::CStr;
use std::os::fd::RawFd;

use crate::error::{FsError, FsResult};
use crate::mac_streams::{self, AFP_INFO_SIZE};
use crate::sys;

/// The xattr (Linux `user.` namespace; Samba AFPINFO_EA_NETATALK).
pub(crate) const XATTR: &CStr = c"user.org.netatalk.Metadata";

/// Size of the record (Samba AD_DATASZ_XATTR).
const RECORD_LEN: usize = 402;
const MAGIC: u32 = 0x0005_1607;
const VERSION: u32 = 0x0002_0000;
const HEADER_LEN: usize = 26;
const ENTRY_LEN: usize = 12;
const ENTRY_FINDER_INFO: u32 = 9;
const ENTRY_DATES: u32 = 8;
const FINDER_INFO_LEN: usize = 32;
/// Where an AfpInfo holds its Finder info.
const AFP_FINDER_INFO: std::ops::Range<usize> = 16..48;

/// The entries of a new record, in the order Samba writes them (by entry
/// id): id, offset, length (adouble.c `entry_order_meta_xattr`).
const NEW_ENTRIES: [(u32, u32, u32); 8] = [
    (4, 154, 0),            // comment
    (ENTRY_DATES, 354, 16), // create, modify, backup, access dates
    (ENTRY_FINDER_INFO, 122, FINDER_INFO_LEN as u32),
    (14, 370, 4),          // AFP file info
    (0x8044_4556, 374, 0), // Netatalk's private dev, ino, syn, id
    (0x8049_4E4F, 382, 0),
    (0x8053_594E, 390, 0),
    (0x8053_567E, 398, 0),
];

/// AppleDouble dates count seconds from 2000-01-01; 0x80000000 is "never".
const AD_DATE_DELTA: i64 = 946_684_800;
const AD_DATE_NEVER: u32 = 0x8000_0000;

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Where the Finder info of a record is, if it is one: the right size,
/// magic and version, and a Finder info entry of at least 32 bytes inside
/// it. Every offset is checked before use.
fn finder_info_at(record: &[u8]) -> Option<usize> {
    if record.len() != RECORD_LEN || be32(record, 0)? != MAGIC || be32(record, 4)? != VERSION {
        return None;
    }
    let count = u16::from_be_bytes([record[24], record[25]]) as usize;
    if HEADER_LEN + count * ENTRY_LEN > RECORD_LEN {
        return None;
    }
    (0..count).find_map(|i| {
        let e = HEADER_LEN + i * ENTRY_LEN;
        if be32(record, e)? != ENTRY_FINDER_INFO {
            return None;
        }
        let off = be32(record, e + 4)? as usize;
        let len = be32(record, e + 8)? as usize;
        (len >= FINDER_INFO_LEN && off.checked_add(FINDER_INFO_LEN)? <= RECORD_LEN).then_some(off)
    })
}

/// A new record holding `finder` (Samba `ad_init` for ADOUBLE_META): its
/// create, modify and access dates are the file's modification time.
fn new_record(finder: &[u8], mtime: i64) -> Vec<u8> {
    let mut r = vec![0u8; RECORD_LEN];
    r[0..4].copy_from_slice(&MAGIC.to_be_bytes());
    r[4..8].copy_from_slice(&VERSION.to_be_bytes());
    r[24..26].copy_from_slice(&(NEW_ENTRIES.len() as u16).to_be_bytes());
    for (i, (id, off, len)) in NEW_ENTRIES.iter().enumerate() {
        let e = HEADER_LEN + i * ENTRY_LEN;
        r[e..e + 4].copy_from_slice(&id.to_be_bytes());
        r[e + 4..e + 8].copy_from_slice(&off.to_be_bytes());
        r[e + 8..e + 12].copy_from_slice(&len.to_be_bytes());
    }
    let date = (mtime - AD_DATE_DELTA).clamp(i32::MIN as i64, i32::MAX as i64) as i32;
    let dates = 354;
    for at in [0, 4, 12] {
        r[dates + at..dates + at + 4].copy_from_slice(&date.to_be_bytes());
    }
    r[dates + 8..dates + 12].copy_from_slice(&AD_DATE_NEVER.to_be_bytes());
    r[122..122 + FINDER_INFO_LEN].copy_from_slice(finder);
    r
}

/// `record` with its Finder info replaced, or a new record if it is none.
fn with_finder_info(record: Option<&[u8]>, finder: &[u8], mtime: i64) -> Vec<u8> {
    match record.and_then(|r| Some((r, finder_info_at(r)?))) {
        Some((r, at)) => {
            let mut r = r.to_vec();
            r[at..at + FINDER_INFO_LEN].copy_from_slice(finder);
            r
        }
        None => new_record(finder, mtime),
    }
}

/// The AfpInfo the record of `record` stands for: 60 bytes, or none
/// (empty) while its Finder info is all zeros.
fn afpinfo_of(record: &[u8]) -> Option<Vec<u8>> {
    let at = finder_info_at(record)?;
    let finder = &record[at..at + FINDER_INFO_LEN];
    if finder.iter().all(|b| *b == 0) {
        return Some(Vec::new());
    }
    let mut ai = mac_streams::default_afpinfo().to_vec();
    ai[AFP_FINDER_INFO].copy_from_slice(finder);
    Some(ai)
}

fn record(fd: RawFd) -> FsResult<Option<Vec<u8>>> {
    match sys::xattr_get(fd, XATTR) {
        Ok(v) => Ok(Some(v)),
        Err(libc::ENODATA) | Err(libc::ENOTSUP) => Ok(None),
        Err(e) => Err(FsError::from_errno(e)),
    }
}

/// The AFP_AfpInfo stream's data: 60 bytes, or empty while the Finder info
/// is all zeros; NotFound without a record that parses.
pub(crate) fn read(fd: RawFd) -> FsResult<Vec<u8>> {
    record(fd)?
        .as_deref()
        .and_then(afpinfo_of)
        .ok_or(FsError::NotFound)
}

/// Whether the stream exists: a record whose Finder info is not all zeros.
pub(crate) fn exists(fd: RawFd) -> FsResult<bool> {
    Ok(read(fd).is_ok_and(|ai| ai.len() == AFP_INFO_SIZE))
}

/// Store the stream's data: an AfpInfo's Finder info goes into the record;
/// nothing (an emptied stream) removes it.
pub(crate) fn write(fd: RawFd, data: &[u8]) -> FsResult<()> {
    if data.is_empty() {
        return remove(fd);
    }
    let finder = data.get(AFP_FINDER_INFO).ok_or(FsError::InvalidParameter)?;
    let old = record(fd)?;
    let mtime = sys::fstat(fd)?.st_mtime;
    let new = with_finder_info(old.as_deref(), finder, mtime);
    sys::xattr_put(fd, XATTR, Some(&new)).map_err(FsError::from_errno)
}

/// Remove the record; one already gone is not an error.
pub(crate) fn remove(fd: RawFd) -> FsResult<()> {
    match sys::xattr_put(fd, XATTR, None) {
        Ok(()) | Err(libc::ENODATA) => Ok(()),
        Err(e) => Err(FsError::from_errno(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// smbtorture's `metadata_xattr` (source4/torture/vfs/fruit.c), as
    /// Netatalk writes it: Finder info "BARRFOOO" and flags 0x4000, its
    /// private entries 8, 8, 8 and 4 bytes long.
    fn netatalk_record() -> Vec<u8> {
        let mut r = vec![0u8; RECORD_LEN];
        let entries: [(u32, u32, u32); 8] = [
            (4, 0x9a, 0),
            (8, 0x162, 0x10),
            (9, 0x7a, 0x20),
            (0x0e, 0x172, 4),
            (0x8044_4556, 0x176, 8),
            (0x8049_4e4f, 0x17e, 8),
            (0x8053_594e, 0x186, 8),
            (0x8053_567e, 0x18e, 4),
        ];
        r[0..8].copy_from_slice(&[0, 5, 0x16, 7, 0, 2, 0, 0]);
        r[24..26].copy_from_slice(&8u16.to_be_bytes());
        for (i, (id, off, len)) in entries.iter().enumerate() {
            let e = HEADER_LEN + i * ENTRY_LEN;
            r[e..e + 4].copy_from_slice(&id.to_be_bytes());
            r[e + 4..e + 8].copy_from_slice(&off.to_be_bytes());
            r[e + 8..e + 12].copy_from_slice(&len.to_be_bytes());
        }
        r[0x7a..0x7a + 9].copy_from_slice(b"BARRFOOO@");
        r[0x162..0x172].copy_from_slice(&[
            0x1b, 0x44, 0x21, 0x69, 0x1b, 0x44, 0x21, 0x69, 0x80, 0, 0, 0, 0x1b, 0x44, 0x21, 0x69,
        ]);
        r[0x176..0x17e].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0]);
        r
    }

    #[test]
    fn netatalk_record_reads_as_its_finder_info() {
        let ai = afpinfo_of(&netatalk_record()).unwrap();
        assert_eq!(ai.len(), AFP_INFO_SIZE);
        assert_eq!(&ai[..8], b"AFP\0\0\0\x01\0");
        assert_eq!(&ai[16..25], b"BARRFOOO@");
        assert!(ai[25..].iter().all(|b| *b == 0));
    }

    #[test]
    fn writing_keeps_the_other_entries() {
        let old = netatalk_record();
        let mut finder = [0u8; 32];
        finder[..8].copy_from_slice(b"TEXTttxt");
        let new = with_finder_info(Some(&old), &finder, 0);
        assert_eq!(new.len(), RECORD_LEN);
        assert_eq!(&new[0x7a..0x7a + 32], &finder);
        assert_eq!(&new[..0x7a], &old[..0x7a]);
        assert_eq!(&new[0x7a + 32..], &old[0x7a + 32..]);
    }

    #[test]
    fn a_new_record_is_samba_s() {
        let mut finder = [0u8; 32];
        finder[..8].copy_from_slice(b"SMB,OLE!");
        // 2020-01-01T00:00:00Z: 20 years of AppleDouble dates.
        let r = with_finder_info(None, &finder, 1_577_836_800);
        assert_eq!(finder_info_at(&r), Some(122));
        assert_eq!(&afpinfo_of(&r).unwrap()[16..24], b"SMB,OLE!");
        assert_eq!(be32(&r, 354), Some(631_152_000));
        assert_eq!(be32(&r, 362), Some(AD_DATE_NEVER));
        assert_eq!(u16::from_be_bytes([r[24], r[25]]), 8);
        // A record that does not parse is replaced, not patched.
        let r2 = with_finder_info(Some(&[1, 2, 3]), &finder, 1_577_836_800);
        assert_eq!(r2, r);
    }

    #[test]
    fn zero_finder_info_is_no_stream() {
        let r = with_finder_info(None, &[0u8; 32], 0);
        assert_eq!(afpinfo_of(&r), Some(Vec::new()));
    }

    #[test]
    fn damaged_records_are_none() {
        let good = netatalk_record();
        let mut short = good.clone();
        short.pop();
        let mut bad_magic = good.clone();
        bad_magic[3] = 8;
        let mut finder_past_end = good.clone();
        finder_past_end[HEADER_LEN + 2 * ENTRY_LEN + 4..HEADER_LEN + 2 * ENTRY_LEN + 8]
            .copy_from_slice(&390u32.to_be_bytes());
        let mut too_many = good.clone();
        too_many[24..26].copy_from_slice(&u16::MAX.to_be_bytes());
        for r in [short, bad_magic, finder_past_end, too_many] {
            assert_eq!(afpinfo_of(&r), None);
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_parse_without_panic(v in proptest::collection::vec(proptest::num::u8::ANY, 0..500)) {
            let _ = afpinfo_of(&v);
            let mut r = netatalk_record();
            let n = v.len().min(RECORD_LEN);
            r[..n].copy_from_slice(&v[..n]);
            let _ = afpinfo_of(&r);
        }
    }
}
