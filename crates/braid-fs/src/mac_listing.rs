//! What a macOS client's directory listing shows of each entry when it
//! negotiated Apple's READ_DIR_ATTR extension: the resource fork's size,
//! the Finder info kept in the AfpInfo stream, the UNIX mode, the birth
//! time. Finder then draws a folder without opening every file in it.
//! The streams are read where `stream.rs` keeps them (Samba's
//! `fruit:metadata = stream`, `fruit:resource = stream` layout).

use std::os::fd::AsRawFd;
use std::time::{Duration, SystemTime};

use crate::error::FsResult;
use crate::resource_fork_file::ResourceFork;
use crate::share::ShareRef;
use crate::{stream, sys, OpenHandle};

/// The stream holding a file's resource fork.
pub const RESOURCE_FORK_STREAM: &str = "AFP_Resource";
/// The stream holding a file's AfpInfo (Finder info and more, 60 bytes).
pub const AFP_INFO_STREAM: &str = "AFP_AfpInfo";
/// Where the 32 bytes of Finder info start in an AfpInfo.
const FINDER_INFO_OFFSET: usize = 16;
const FINDER_INFO_LEN: usize = 32;
/// AppleDouble dates count seconds from 2000-01-01 UTC.
const APPLE_EPOCH: Duration = Duration::from_secs(946_684_800);
/// The AppleDouble "no date" value, what a file without Finder info shows
/// as its date added.
const APPLE_NO_DATE: u32 = 0x8000_0000;

/// Mac metadata of one directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MacEntryInfo {
    pub resource_fork_size: u64,
    /// Type, creator (files only), Finder flags, extended flags and the
    /// date added (big-endian), as the AAPL listing packs them.
    pub packed_finder_info: [u8; 16],
    /// `st_mode`, file type bits included.
    pub unix_mode: u32,
}

impl OpenHandle {
    /// [`MacEntryInfo`] of entries of this directory, by name, in order;
    /// an entry gone since it was listed gets the default. `.` and `..`
    /// are this directory and its parent.
    pub fn child_mac_info(&self, names: &[&str]) -> FsResult<Vec<MacEntryInfo>> {
        self.live()?;
        let dfd = self.fd();
        let share = &self.0.share;
        let dir_rel = self.0.rel();
        Ok(names
            .iter()
            .map(|name| {
                let Ok(c) = std::ffi::CString::new(*name) else {
                    return MacEntryInfo::default();
                };
                let Ok(fd) = sys::openat(dfd, &c, libc::O_PATH | libc::O_NOFOLLOW, 0) else {
                    return MacEntryInfo::default();
                };
                let fd = fd.as_raw_fd();
                // Looking at a sidecar converts one macOS wrote, as the
                // Finder's listing does on Samba.
                let sidecar_fork = || {
                    if *name == "." || *name == ".." || !share.resource_fork_in_sidecar() {
                        return None;
                    }
                    let rel = crate::path::join(&dir_rel, name);
                    ResourceFork::open(share, fd, &rel)
                        .ok()
                        .map(|rf| rf.map_or(0, |rf| rf.len()))
                };
                mac_info_of(fd, share, sidecar_fork)
            })
            .collect())
    }
}

/// Missing streams and unreadable attributes leave their fields at their
/// defaults: a listing never fails over one file's metadata.
/// `sidecar_fork` gives the resource fork's size where the share keeps it
/// in a sidecar (`None`: in a stream).
fn mac_info_of(
    fd: std::os::fd::RawFd,
    share: &ShareRef,
    sidecar_fork: impl FnOnce() -> Option<u64>,
) -> MacEntryInfo {
    let st = sys::fstat(fd).ok();
    let is_file = st.is_some_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFREG);
    let stream_data = |name: &str| {
        crate::mac_streams::find(share, fd, name)
            .ok()
            .flatten()
            .and_then(|x| stream::read(fd, &x).ok())
    };
    let resource_fork_size = if is_file {
        sidecar_fork()
            .unwrap_or_else(|| stream_data(RESOURCE_FORK_STREAM).map_or(0, |d| d.len() as u64))
    } else {
        0
    };
    let mut packed = [0u8; 16];
    packed[12..16].copy_from_slice(&APPLE_NO_DATE.to_be_bytes());
    // An AfpInfo of any other size does not exist (`mac_streams.rs`).
    let finder = stream_data(AFP_INFO_STREAM)
        .filter(|d| d.len() == crate::mac_streams::AFP_INFO_SIZE)
        .map(|d| d[FINDER_INFO_OFFSET..FINDER_INFO_OFFSET + FINDER_INFO_LEN].to_vec());
    if let Some(fi) = finder {
        if is_file {
            packed[0..8].copy_from_slice(&fi[0..8]); // type, creator
        }
        packed[8..10].copy_from_slice(&fi[8..10]); // Finder flags
        packed[10..12].copy_from_slice(&fi[24..26]); // extended flags
        let born = sys::btime(fd).unwrap_or(SystemTime::UNIX_EPOCH);
        let added = born
            .duration_since(SystemTime::UNIX_EPOCH + APPLE_EPOCH)
            .map_or(0, |d| d.as_secs().min(u32::MAX as u64) as u32);
        packed[12..16].copy_from_slice(&added.to_be_bytes());
    }
    MacEntryInfo {
        resource_fork_size,
        packed_finder_info: packed,
        unix_mode: st.map_or(0, |s| s.st_mode),
    }
}
