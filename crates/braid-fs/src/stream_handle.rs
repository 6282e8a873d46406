//! Opens of named streams: I/O, sizes, metadata, rename, delete-on-close,
//! and the stream list of a file (MS-FSA 2.1.5.12.x FileStreamInformation).
//!
//! A stream's data is one xattr of its file (`stream.rs`), so reads and
//! writes are read-modify-write of the whole value, as Samba's
//! `vfs_streams_xattr` does; streams are small (at most 64 KiB, often 4
//! KiB, see `stream.rs`). Writes of one stream run one at a time.
//! Byte-range locks, share modes and delete-on-close are the stream's own
//! (its own node in the open table). Times, attributes and EAs are the
//! file's: FileBasicInformation set through a stream open changes the
//! file, as on NTFS.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{FsError, FsResult};
use crate::handle::{HandleInner, OpenHandle};
use crate::mac_streams::{self, MacStream, AFP_INFO_SIZE};
use crate::netatalk_meta;
use crate::open_table::{Node, NodeTable};
use crate::path;
use crate::resource_fork_file::ResourceFork;
use crate::stream::{self, StreamSpec, MAX_STREAM_SIZE};
use crate::sys;
use crate::types::{access as acc, attr, FileInfo};

/// One entry of FileStreamInformation (MS-FSCC 2.4.47).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEntry {
    /// `::$DATA` for the default stream, `:NAME:$DATA` for a named one.
    pub name: String,
    pub size: u64,
    pub allocation_size: u64,
}

/// What an open of a named stream has beyond an open of its file.
pub(crate) struct StreamOpen {
    /// The xattr holding the stream; `None` once the stream was renamed
    /// onto the file's default stream (the open then reads and writes the
    /// file's data).
    pub xattr: Mutex<Option<CString>>,
    /// The open-table node of the file the stream belongs to.
    pub base: Arc<Node>,
    pub base_is_dir: bool,
    /// This open's id in the file's `stream_opens`.
    pub base_id: u64,
}

impl StreamOpen {
    fn xattr(&self) -> MutexGuard<'_, Option<CString>> {
        self.xattr.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Delete-on-close of the stream (MS-FSA 2.1.5.4): remove it only.
    pub(crate) fn remove_stream(&self, fd: RawFd) -> FsResult<()> {
        match self.xattr().as_ref() {
            Some(x) => stream::remove(fd, x),
            None => Ok(()),
        }
    }

    /// Leave the file's list of stream opens; if that was the file's last
    /// open of any kind, finish it as the close of its last open would
    /// (delete a delete-pending file, MS-FSA 2.1.5.4). `h` is the closing
    /// open (None: the open never came to be).
    pub(crate) fn leave_file_node(&self, nodes: &NodeTable, h: Option<&HandleInner>) {
        let n = &self.base;
        let mut s = n.lock();
        s.stream_opens.retain(|o| o.id != self.base_id);
        if s.idle() && !s.dead {
            if s.delete_pending {
                if let Some(h) = h {
                    if let Err(e) = h.unlink_now(&n.key, self.base_is_dir) {
                        tracing::debug!(path = %h.rel(), error = %e, "delete on close failed");
                    }
                }
            }
            if s.reservations.is_empty() {
                s.dead = true;
                nodes.remove(n);
            }
        }
        drop(s);
        n.notify.notify_waiters();
    }

    pub(crate) fn leave_file(&self, h: &HandleInner) {
        self.leave_file_node(&h.nodes, Some(h));
    }
}

impl OpenHandle {
    /// The xattr of the named stream this open reads and writes, if it is
    /// an open of one.
    pub(crate) fn stream_xattr(&self) -> Option<CString> {
        self.0.stream.as_ref().and_then(|s| s.xattr().clone())
    }

    /// The stream's name as stored, for an open of a named stream.
    pub fn stream_name(&self) -> Option<String> {
        let x = self.stream_xattr()?;
        stream::name_of_xattr(x.to_bytes()).map(|n| stream::client_name(n).into_owned())
    }

    /// 0 for an open of a file or directory; for an open of a named
    /// stream, a key that, with the file id, names the stream: a stream is
    /// its own file for oplocks and leases (MS-SMB2 3.3.5.9).
    pub fn stream_key(&self) -> u64 {
        self.0.node.key.stream
    }

    /// Whether stream `x` of this open is a resource fork kept in an
    /// AppleDouble sidecar (`resource_fork_file.rs`).
    pub(crate) fn in_sidecar(&self, x: &CStr) -> bool {
        self.mac_stream(x) == Some(MacStream::Resource) && self.0.share.resource_fork_in_sidecar()
    }

    /// The sidecar of this open's file, if it has one.
    fn sidecar(&self) -> FsResult<Option<ResourceFork>> {
        ResourceFork::open(&self.0.share, self.fd(), &self.0.rel())
    }

    fn sidecar_or_create(&self) -> FsResult<ResourceFork> {
        ResourceFork::open_or_create(&self.0.share, self.fd(), &self.0.rel())
    }

    /// The size of stream `x` of this open's file.
    pub(crate) fn stream_len(&self, x: &CStr) -> FsResult<u64> {
        if self.in_sidecar(x) {
            return Ok(self.sidecar()?.map_or(0, |rf| rf.len()));
        }
        stream::size(self.fd(), x)
    }

    pub(crate) fn stream_read_append(
        &self,
        x: &CStr,
        offset: u64,
        len: usize,
        buf: &mut Vec<u8>,
    ) -> FsResult<usize> {
        if self.mac_stream(x) == Some(MacStream::AfpInfo) {
            return self.afpinfo_read(x, offset, len, buf);
        }
        if self.in_sidecar(x) {
            return match self.sidecar()? {
                Some(rf) => rf.read_at(offset, len, buf),
                None => Ok(0),
            };
        }
        let data = stream::read(self.fd(), x)?;
        let start = offset.min(data.len() as u64) as usize;
        let end = start.saturating_add(len).min(data.len());
        buf.extend_from_slice(&data[start..end]);
        Ok(end - start)
    }

    /// MS-FSA 2.1.5.4 on a stream: read-modify-write of its xattr. A write
    /// ending past [`MAX_STREAM_SIZE`], or past what the file system takes,
    /// is DiskFull and changes nothing.
    pub(crate) fn stream_write(&self, x: &CStr, offset: u64, data: &[u8]) -> FsResult<usize> {
        if self.mac_stream(x) == Some(MacStream::AfpInfo) {
            return self.afpinfo_write_at(x, offset, data);
        }
        if data.is_empty() {
            return Ok(0);
        }
        if self.in_sidecar(x) {
            let _serial = self.serialize_writes();
            return self.sidecar_or_create()?.write_at(offset, data);
        }
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|e| *e <= MAX_STREAM_SIZE)
            .ok_or(FsError::DiskFull)? as usize;
        let _serial = self.serialize_writes();
        let mut v = stream::read(self.fd(), x)?;
        if v.len() < end {
            v.resize(end, 0);
        }
        v[offset as usize..end].copy_from_slice(data);
        stream::write(self.fd(), x, &v)?;
        Ok(data.len())
    }

    /// FileEndOfFileInformation (`eof`) or FileAllocationInformation (a
    /// size below the end truncates, a larger one changes nothing).
    pub(crate) fn stream_set_size(&self, x: &CStr, size: u64, eof: bool) -> FsResult<()> {
        if self.mac_stream(x) == Some(MacStream::AfpInfo) {
            return self.afpinfo_set_size(size);
        }
        let _serial = self.serialize_writes();
        if self.in_sidecar(x) {
            let mut rf = match self.sidecar()? {
                Some(rf) => rf,
                None if size == 0 || !eof => return Ok(()),
                None => self.sidecar_or_create()?,
            };
            if size == rf.len() || (!eof && size > rf.len()) {
                return Ok(());
            }
            return rf.set_len(size);
        }
        let mut v = stream::read(self.fd(), x)?;
        if size == v.len() as u64 || (!eof && size > v.len() as u64) {
            return Ok(());
        }
        if size > MAX_STREAM_SIZE {
            return Err(FsError::DiskFull);
        }
        v.resize(size as usize, 0);
        stream::write(self.fd(), x, &v)
    }

    /// FSCTL_SET_ZERO_DATA on a stream: zero the range within its size.
    pub(crate) fn stream_zero_range(&self, x: &CStr, offset: u64, beyond: u64) -> FsResult<()> {
        let _serial = self.serialize_writes();
        if self.in_sidecar(x) {
            return match self.sidecar()? {
                Some(mut rf) => rf.zero_range(offset, beyond),
                None => Ok(()),
            };
        }
        let mut v = stream::read(self.fd(), x)?;
        let end = beyond.min(v.len() as u64) as usize;
        if offset as usize >= end {
            return Ok(());
        }
        v[offset as usize..end].fill(0);
        stream::write(self.fd(), x, &v)
    }

    /// Metadata of a stream open: the file's, with the stream's size; a
    /// stream is never a directory.
    pub(crate) fn stream_adjust_info(&self, info: &mut FileInfo) -> FsResult<()> {
        let Some(x) = self.stream_xattr() else {
            return Ok(());
        };
        let size = match self.stream_len(&x) {
            // An AfpInfo is 60 bytes, written or not (`mac_streams.rs`).
            _ if self.mac_stream(&x) == Some(MacStream::AfpInfo) => AFP_INFO_SIZE as u64,
            Ok(n) => n,
            // Deleted on close just now.
            Err(FsError::NotFound) => 0,
            Err(e) => return Err(e),
        };
        info.end_of_file = size;
        info.allocation_size = stream::allocation(size);
        info.is_directory = false;
        info.attributes &= !attr::DIRECTORY;
        if info.attributes == 0 {
            info.attributes = attr::NORMAL;
        }
        Ok(())
    }

    /// FileStreamInformation (MS-FSA 2.1.5.12.x, MS-FSCC 2.4.47) of the
    /// file this open belongs to (an open of one of its streams answers for
    /// the whole file): the default stream `::$DATA` of a file first, then
    /// each named stream. A directory has no default stream. On a share
    /// with the macOS rules, an AFP_AfpInfo or AFP_Resource that does not
    /// exist by them is left out (`mac_streams.rs`).
    pub fn streams(&self) -> FsResult<Vec<StreamEntry>> {
        self.streams_with(false)
    }

    /// [`OpenHandle::streams`] for a requester that takes empty named
    /// streams for absent ones when `hide_empty`
    /// ([`crate::RequestCtx::hide_empty_streams`]): they are left out too.
    pub fn streams_with(&self, hide_empty: bool) -> FsResult<Vec<StreamEntry>> {
        self.live()?;
        let fd = self.fd();
        let st = sys::fstat(fd)?;
        let mut out = Vec::new();
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            out.push(StreamEntry {
                name: "::$DATA".into(),
                size: st.st_size as u64,
                allocation_size: st.st_blocks as u64 * 512,
            });
        }
        let sidecar = self.0.share.resource_fork_in_sidecar();
        let netatalk = self.0.share.netatalk_metadata();
        for (name, x) in stream::list(fd)? {
            let Ok(cx) = CString::new(x) else { continue };
            match self.mac_stream(&cx) {
                // The sidecar's resource fork is the one, and Netatalk's
                // metadata the AfpInfo.
                Some(MacStream::Resource) if sidecar => continue,
                Some(MacStream::AfpInfo) if netatalk => continue,
                _ => {}
            }
            let size = match stream::size(fd, &cx) {
                Ok(n) => n,
                Err(FsError::NotFound) => continue, // removed meanwhile
                Err(e) => return Err(e),
            };
            out.push(StreamEntry {
                name: format!(":{name}:$DATA"),
                size,
                allocation_size: stream::allocation(size),
            });
        }
        if sidecar && st.st_mode & libc::S_IFMT == libc::S_IFREG {
            if let Some(rf) = self.sidecar()? {
                out.push(StreamEntry {
                    name: format!(":{}:$DATA", crate::mac_listing::RESOURCE_FORK_STREAM),
                    size: rf.len(),
                    allocation_size: rf.len().next_multiple_of(4096),
                });
            }
        }
        if netatalk && netatalk_meta::exists(fd)? {
            out.push(StreamEntry {
                name: format!(":{}:$DATA", crate::mac_listing::AFP_INFO_STREAM),
                size: AFP_INFO_SIZE as u64,
                allocation_size: stream::allocation(AFP_INFO_SIZE as u64),
            });
        }
        mac_streams::filter_listing(&self.0.share, &mut out, hide_empty);
        Ok(out)
    }

    /// FileRenameInformation on a stream open (MS-FSA 2.1.5.14.11.1, the
    /// stream rename): `:NEW[:$DATA]` renames it among the file's streams;
    /// `::$DATA` makes it the file's default stream. A target that exists
    /// needs `replace_if_exists` (else NameCollision), must not be open
    /// (AccessDenied) and must be empty (InvalidParameter, as NTFS
    /// answers). A full path as the target is refused: with a stream part
    /// it is SharingViolation (what Windows answers, smbtorture
    /// smb2.streams.rename2), without one InvalidParameter.
    ///
    /// Other opens of the renamed stream keep the share-mode entry of its
    /// old name until they close.
    pub(crate) fn rename_stream(&self, new_path: &str, replace: bool) -> FsResult<()> {
        let Some(so) = self.0.stream.as_ref() else {
            return Err(FsError::InvalidParameter);
        };
        let Some(rest) = new_path.strip_prefix(':') else {
            return Err(if new_path.contains(':') {
                FsError::SharingViolation
            } else {
                FsError::InvalidParameter
            });
        };
        let spec = stream::parse_stream_part(rest).map_err(|_| FsError::InvalidParameter)?;
        let fd = self.fd();
        let _serial = self.serialize_writes();
        let mut cur = so.xattr();
        let Some(cur_x) = cur.clone() else {
            return Err(FsError::InvalidParameter);
        };
        let cur_name =
            stream::client_name(stream::name_of_xattr(cur_x.to_bytes()).unwrap_or_default())
                .into_owned();
        if self.in_sidecar(&cur_x) || cur_x.as_c_str() == netatalk_meta::XATTR {
            // A resource fork in a sidecar, or Finder info in Netatalk's
            // metadata, is not a stream to move.
            return Err(FsError::InvalidParameter);
        }
        match spec {
            StreamSpec::None => Err(FsError::InvalidParameter),
            StreamSpec::Default => {
                if so.base_is_dir {
                    return Err(FsError::InvalidParameter);
                }
                if sys::fstat(fd)?.st_size != 0 {
                    return Err(if replace {
                        FsError::InvalidParameter
                    } else {
                        FsError::NameCollision
                    });
                }
                let data = stream::read(fd, &cur_x)?;
                self.write_default_stream(&data)?;
                stream::remove(fd, &cur_x)?;
                *cur = None;
                Ok(())
            }
            StreamSpec::Named(new) => {
                let new_x = mac_streams::xattr_for(&self.0.share, &new)
                    .map_err(|_| FsError::InvalidParameter)?;
                if new_x.as_c_str() == netatalk_meta::XATTR {
                    return Err(FsError::InvalidParameter);
                }
                if new_x == cur_x {
                    return Ok(());
                }
                if stream::fold(&new) != stream::fold(&cur_name) {
                    if let Some(tx) = stream::find(fd, &new)? {
                        if !replace {
                            return Err(FsError::NameCollision);
                        }
                        let tkey = self.0.node.key.with_stream(stream::stream_key(&new));
                        if self
                            .0
                            .nodes
                            .get(&tkey)
                            .is_some_and(|n| !n.lock().opens.is_empty())
                        {
                            return Err(FsError::AccessDenied);
                        }
                        if stream::size(fd, &tx)? != 0 {
                            return Err(FsError::InvalidParameter);
                        }
                        stream::remove(fd, &tx)?;
                    }
                }
                let data = stream::read(fd, &cur_x)?;
                stream::write(fd, &new_x, &data)?;
                if let Err(e) = stream::remove(fd, &cur_x) {
                    let _ = stream::remove(fd, &new_x);
                    return Err(e);
                }
                *cur = Some(new_x);
                Ok(())
            }
        }
    }

    /// Write `data` as the whole default stream of this open's (empty)
    /// file, through a writable descriptor of the same inode.
    fn write_default_stream(&self, data: &[u8]) -> FsResult<()> {
        self.need(acc::DELETE)?;
        let root = self.0.share.0.root_fd();
        let wfd = path::open_beneath(
            root,
            &self.0.rel(),
            libc::O_WRONLY | libc::O_NOCTTY | libc::O_NONBLOCK,
            0,
        )
        .map_err(FsError::from_errno)?;
        let (a, b) = (sys::fstat(wfd.as_raw_fd())?, sys::fstat(self.fd())?);
        if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
            return Err(FsError::NotFound);
        }
        sys::pwrite(wfd.as_raw_fd(), data, 0)?;
        Ok(())
    }
}
