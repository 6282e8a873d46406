//! The macOS streams: Finder metadata (`AFP_AfpInfo`) and the resource
//! fork (`AFP_Resource`), with the rules Samba's vfs_fruit gives them in
//! its `fruit:metadata = stream` and `fruit:resource = stream`
//! configuration. Both are stored as any named stream is (`stream.rs`,
//! Samba's `vfs_streams_xattr` format), so a share moves between
//! Samba+fruit and Braid; only what clients see of them differs. On by
//! default, per share ([`crate::ShareRef::set_macos`]).
//!
//! The rules, as macOS servers behave and smbtorture's vfs.fruit checks
//! them (source4/torture/vfs/fruit.c):
//!
//! - AFP_AfpInfo is a fixed 60-byte AfpInfo (Samba MacExtensions.h:
//!   "AFP\0", version 0x00000100 big-endian, 4 reserved bytes, backup date,
//!   32 bytes of FinderInfo, 6 of ProDOS info, 6 reserved). A stored value
//!   of any other size does not exist: it is neither listed nor opened.
//! - Creating it stores nothing yet (vfs_fruit's "fake fd"): the open
//!   holds an empty value, which reads as the default AfpInfo, is not
//!   listed, is not found by a plain open, and is removed when its last
//!   open closes unless a write filled it.
//! - Reads answer from offset 0 whatever offset was asked (up to 60; past
//!   60 nothing), at most 60 bytes: macOS does, off by one.
//! - A write must be a valid AfpInfo: at least 3 bytes starting "AFP", 60
//!   or more unless at offset 0, with the right signature and version
//!   (else INVALID_PARAMETER). It always replaces the whole 60 bytes from
//!   offset 0; up to 16 bytes change nothing. A FinderInfo of all zeros
//!   deletes the stream (as on macOS).
//! - Its size is always 60: a new end of file past 60 is
//!   ALLOTTED_SPACE_EXCEEDED, any other is accepted and ignored.
//! - An empty AFP_Resource does not exist: it is not listed, and a plain
//!   open of it is not found. Truncating it to 0 leaves it so.
//! - Delete-on-close of a non-empty AFP_Resource is accepted (other opens
//!   see DELETE_PENDING) but the fork survives the close: macOS ignores
//!   resource fork deletes.
//! - For a requester that takes empty streams for absent ones (a macOS
//!   client that negotiated Apple's extensions,
//!   [`crate::RequestCtx::hide_empty_streams`]) every empty named stream
//!   is so.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, RawFd};

use crate::error::{FsError, FsResult};
use crate::handle::{HandleInner, OpenHandle};
use crate::mac_listing::{AFP_INFO_STREAM, RESOURCE_FORK_STREAM};
use crate::netatalk_meta;
use crate::resource_fork_file::{self, ResourceFork};
use crate::share::ShareRef;
use crate::stream;
use crate::stream_handle::{StreamEntry, StreamOpen};
use crate::types::Disposition;

/// Size of an AfpInfo (Samba MacExtensions.h AFP_INFO_SIZE).
pub const AFP_INFO_SIZE: usize = 60;

/// "AFP\0" and version 0x00000100, big-endian (MacExtensions.h
/// AFP_Signature, AFP_Version; smbtorture reads back "AFP\0\0\0\x01\0").
const AFP_SIGNATURE: [u8; 4] = *b"AFP\0";
const AFP_VERSION: [u8; 4] = [0, 0, 1, 0];
/// The backup date of an AfpInfo never backed up: 0x80000000, the
/// earliest AppleDouble date (Samba AD_DATE_START).
const AFP_BACKUP_NEVER: [u8; 4] = [0x80, 0, 0, 0];
/// Where the 32 bytes of FinderInfo are.
const FINDER_INFO: std::ops::Range<usize> = 16..48;

/// Which macOS stream a stream name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MacStream {
    AfpInfo,
    Resource,
}

impl MacStream {
    /// The macOS stream `name` is (any case, as stream names compare), on a
    /// share with the macOS rules on.
    pub(crate) fn of(share: &ShareRef, name: &str) -> Option<MacStream> {
        if !share.macos() {
            return None;
        }
        if name.eq_ignore_ascii_case(AFP_INFO_STREAM) {
            Some(MacStream::AfpInfo)
        } else if name.eq_ignore_ascii_case(RESOURCE_FORK_STREAM) {
            Some(MacStream::Resource)
        } else {
            None
        }
    }

    fn of_xattr(share: &ShareRef, x: &CStr) -> Option<MacStream> {
        MacStream::of(share, stream::name_of_xattr(x.to_bytes())?)
    }
}

/// The xattr that holds stream `name` on `share`: Netatalk's metadata for
/// AFP_AfpInfo on a share that keeps it there (`netatalk_meta.rs`), else
/// the stream's own.
pub(crate) fn xattr_for(share: &ShareRef, name: &str) -> FsResult<CString> {
    if share.netatalk_metadata() && MacStream::of(share, name) == Some(MacStream::AfpInfo) {
        return Ok(netatalk_meta::XATTR.to_owned());
    }
    stream::xattr_name(name)
}

/// The stored stream `name` of the file behind `fd`, if any
/// ([`stream::find`], with AFP_AfpInfo from Netatalk's metadata where the
/// share keeps it there: stored while its Finder info is set).
pub(crate) fn find(share: &ShareRef, fd: RawFd, name: &str) -> FsResult<Option<CString>> {
    if share.netatalk_metadata() && MacStream::of(share, name) == Some(MacStream::AfpInfo) {
        return Ok(netatalk_meta::exists(fd)?.then(|| netatalk_meta::XATTR.to_owned()));
    }
    stream::find(fd, name)
}

/// The AfpInfo of a file whose Finder metadata was never set: what a
/// just-created AFP_AfpInfo reads as (Samba `afpinfo_new`).
pub fn default_afpinfo() -> [u8; AFP_INFO_SIZE] {
    let mut ai = [0u8; AFP_INFO_SIZE];
    ai[0..4].copy_from_slice(&AFP_SIGNATURE);
    ai[4..8].copy_from_slice(&AFP_VERSION);
    ai[12..16].copy_from_slice(&AFP_BACKUP_NEVER);
    ai
}

/// What a write to AFP_AfpInfo does.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AfpWrite {
    /// Accepted, nothing stored (the write ended before the FinderInfo).
    Nothing,
    /// Store this AfpInfo.
    Store([u8; AFP_INFO_SIZE]),
    /// The FinderInfo is all zeros: the stream goes.
    Delete,
}

/// Check a write of `data` at `offset` to AFP_AfpInfo (vfs_fruit
/// `fruit_pwrite_meta`; the sizes and offsets smbtorture's
/// vfs.fruit.writing_afpinfo tries): the write is taken as the whole
/// AfpInfo from offset 0.
pub(crate) fn afpinfo_write(offset: u64, data: &[u8]) -> FsResult<AfpWrite> {
    if data.len() < 3 || (offset != 0 && data.len() < AFP_INFO_SIZE) {
        return Err(FsError::InvalidParameter);
    }
    if &data[..3] != b"AFP" {
        return Err(FsError::InvalidParameter);
    }
    if data.len() <= FINDER_INFO.start {
        return Ok(AfpWrite::Nothing);
    }
    let mut ai = [0u8; AFP_INFO_SIZE];
    let n = data.len().min(AFP_INFO_SIZE);
    ai[..n].copy_from_slice(&data[..n]);
    if ai[0..4] != AFP_SIGNATURE || ai[4..8] != AFP_VERSION {
        return Err(FsError::InvalidParameter);
    }
    if ai[FINDER_INFO].iter().all(|b| *b == 0) {
        return Ok(AfpWrite::Delete);
    }
    Ok(AfpWrite::Store(ai))
}

/// Whether a stored stream of `size` bytes exists for a requester:
/// an AfpInfo only at its 60 bytes, a resource fork only when not empty,
/// any stream only when not empty for a requester that hides empty ones.
fn exists(kind: Option<MacStream>, size: u64, hide_empty: bool) -> bool {
    match kind {
        Some(MacStream::AfpInfo) => size == AFP_INFO_SIZE as u64,
        Some(MacStream::Resource) => size > 0,
        None => !hide_empty || size > 0,
    }
}

/// The stream an open of stream `name` finds, given the one stored
/// (`existing`, its xattr): a stream that does not exist by the rules
/// above is not there for an open that does not create (vfs_fruit
/// `fruit_create_file` for an empty stream; `fruit_open_meta_stream` for
/// an AfpInfo never written), so it is OBJECT_NAME_NOT_FOUND.
pub(crate) fn open_finds(
    share: &ShareRef,
    fd: RawFd,
    name: &str,
    existing: Option<CString>,
    disposition: Disposition,
    hide_empty: bool,
) -> FsResult<Option<CString>> {
    let kind = MacStream::of(share, name);
    let plain_open = match kind {
        Some(MacStream::AfpInfo) => {
            matches!(disposition, Disposition::Open | Disposition::Overwrite)
        }
        _ => disposition == Disposition::Open,
    };
    let Some(x) = existing else {
        return Ok(None);
    };
    if !plain_open || (kind.is_none() && !hide_empty) {
        return Ok(Some(x));
    }
    let size = match stream::size(fd, &x) {
        Ok(n) => n,
        Err(FsError::NotFound) => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(exists(kind, size, hide_empty).then_some(x))
}

/// Leave out of a FileStreamInformation listing the streams that do not
/// exist by the rules above (vfs_fruit `fruit_streaminfo`).
pub(crate) fn filter_listing(share: &ShareRef, entries: &mut Vec<StreamEntry>, hide_empty: bool) {
    if !share.macos() && !hide_empty {
        return;
    }
    entries.retain(|e| {
        let Some(name) = e
            .name
            .strip_prefix(':')
            .and_then(|n| n.strip_suffix(":$DATA"))
            .filter(|n| !n.is_empty())
        else {
            return true; // the default stream
        };
        exists(MacStream::of(share, name), e.size, hide_empty)
    });
}

impl OpenHandle {
    /// The macOS stream this open's stream xattr `x` is, if any.
    pub(crate) fn mac_stream(&self, x: &CStr) -> Option<MacStream> {
        MacStream::of_xattr(&self.0.share, x)
    }

    /// A read of AFP_AfpInfo (vfs_fruit `fruit_pread_meta`): from offset
    /// 0 whatever `offset` (macOS ignores it, and reads nothing past 60,
    /// off by one), at most the 60 bytes; a value not yet written reads as
    /// [`default_afpinfo`].
    pub(crate) fn afpinfo_read(
        &self,
        x: &CStr,
        offset: u64,
        len: usize,
        buf: &mut Vec<u8>,
    ) -> FsResult<usize> {
        if offset > AFP_INFO_SIZE as u64 {
            return Ok(0);
        }
        let ai = match stream::read(self.fd(), x) {
            Ok(v) if v.len() == AFP_INFO_SIZE => v,
            Ok(_) | Err(FsError::NotFound) => default_afpinfo().to_vec(),
            Err(e) => return Err(e),
        };
        let n = len.min(AFP_INFO_SIZE);
        buf.extend_from_slice(&ai[..n]);
        Ok(n)
    }

    /// A write to AFP_AfpInfo ([`afpinfo_write`]): returns the bytes asked
    /// to be written, as macOS does whatever it stored. A FinderInfo of
    /// zeros empties the stream, which then does not exist and goes at
    /// its last close.
    pub(crate) fn afpinfo_write_at(&self, x: &CStr, offset: u64, data: &[u8]) -> FsResult<usize> {
        let _serial = self.serialize_writes();
        match afpinfo_write(offset, data)? {
            AfpWrite::Nothing => {}
            AfpWrite::Store(ai) => stream::write(self.fd(), x, &ai)?,
            AfpWrite::Delete => stream::write(self.fd(), x, &[])?,
        }
        Ok(data.len())
    }

    /// FileEndOfFileInformation or FileAllocationInformation on
    /// AFP_AfpInfo (vfs_fruit `fruit_ftruncate_meta`): past 60 bytes is
    /// ALLOTTED_SPACE_EXCEEDED, anything else succeeds and changes nothing.
    pub(crate) fn afpinfo_set_size(&self, size: u64) -> FsResult<()> {
        if size > AFP_INFO_SIZE as u64 {
            return Err(FsError::AllottedSpaceExceeded);
        }
        Ok(())
    }
}

/// Delete-on-close of a stream open, at the close of the stream's last
/// open (MS-FSA 2.1.5.4): a resource fork with data stays (vfs_fruit
/// `fruit_unlink_rsrc_stream`: "OS X ignores resource fork stream delete
/// requests"); any other stream goes.
pub(crate) fn delete_on_close(h: &HandleInner, st: &StreamOpen) -> FsResult<()> {
    let fd = h.fd.as_raw_fd();
    let x = st.xattr.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(x) = x {
        if MacStream::of_xattr(&h.share, &x) == Some(MacStream::Resource) {
            if h.share.resource_fork_in_sidecar() {
                // A resource fork in a sidecar: the sidecar goes when the
                // fork is empty.
                return match ResourceFork::open(&h.share, fd, &h.rel())? {
                    Some(rf) if rf.len() > 0 => Ok(()),
                    Some(rf) => {
                        drop(rf);
                        resource_fork_file::remove(&h.share, &h.rel())
                    }
                    None => Ok(()),
                };
            }
            if stream::size(fd, &x).is_ok_and(|n| n > 0) {
                return Ok(());
            }
        }
    }
    st.remove_stream(fd)
}

/// The last open of a stream closed (without delete-on-close): an
/// AFP_AfpInfo never written, or emptied by a FinderInfo of zeros, is
/// removed, so that only AfpInfo values of 60 bytes are ever left
/// behind (vfs_fruit creates the xattr only on the first write).
pub(crate) fn last_close(h: &HandleInner) {
    let Some(st) = &h.stream else { return };
    let x = st.xattr.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let Some(x) = x else { return };
    // Netatalk's metadata is stored only by a write, and goes with it.
    if MacStream::of_xattr(&h.share, &x) != Some(MacStream::AfpInfo)
        || x.as_c_str() == netatalk_meta::XATTR
    {
        return;
    }
    let fd = h.fd.as_raw_fd();
    if stream::size(fd, &x).is_ok_and(|n| n == 0) {
        if let Err(e) = stream::remove(fd, &x) {
            tracing::debug!(path = %h.rel(), error = %e, "removing an empty AFP_AfpInfo");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info_with(finder: &[u8]) -> Vec<u8> {
        let mut v = default_afpinfo().to_vec();
        v[16..16 + finder.len()].copy_from_slice(finder);
        v
    }

    #[test]
    fn default_is_an_empty_afpinfo() {
        let ai = default_afpinfo();
        assert_eq!(&ai[..8], b"AFP\0\0\0\x01\0");
        assert_eq!(&ai[12..16], &[0x80, 0, 0, 0]);
        assert!(ai[16..].iter().all(|b| *b == 0));
    }

    #[test]
    fn writes_must_be_afpinfo() {
        let ai = info_with(b"SMB,OLE!");
        let mut want = [0u8; 60];
        want.copy_from_slice(&ai);
        assert_eq!(afpinfo_write(0, &ai).unwrap(), AfpWrite::Store(want));
        // Longer writes store their first 60 bytes, wherever they aim.
        let mut long = ai.clone();
        long.resize(1024, 0);
        assert_eq!(afpinfo_write(10_000, &long).unwrap(), AfpWrite::Store(want));
        // Up to the FinderInfo: accepted, nothing to store.
        assert_eq!(afpinfo_write(0, &ai[..16]).unwrap(), AfpWrite::Nothing);
        assert_eq!(afpinfo_write(0, &ai[..3]).unwrap(), AfpWrite::Nothing);
        for (off, data) in [
            (0, &ai[..2]),
            (1, &ai[..59]),
            (60, &ai[..16]),
            (0, &[0u8; 60][..]),
        ] {
            assert!(
                matches!(afpinfo_write(off, data), Err(FsError::InvalidParameter)),
                "{off} {}",
                data.len()
            );
        }
        // A wrong version.
        let mut bad = ai.clone();
        bad[5] = 2;
        assert!(matches!(
            afpinfo_write(0, &bad),
            Err(FsError::InvalidParameter)
        ));
        // FinderInfo of zeros: the stream goes.
        assert_eq!(
            afpinfo_write(0, &default_afpinfo()).unwrap(),
            AfpWrite::Delete
        );
    }

    #[test]
    fn what_exists() {
        let info = Some(MacStream::AfpInfo);
        let rsrc = Some(MacStream::Resource);
        assert!(exists(info, 60, false));
        assert!(!exists(info, 0, false));
        assert!(!exists(info, 3, false));
        assert!(exists(rsrc, 1, false));
        assert!(!exists(rsrc, 0, false));
        assert!(exists(None, 0, false));
        assert!(!exists(None, 0, true));
        assert!(exists(None, 1, true));
    }
}
