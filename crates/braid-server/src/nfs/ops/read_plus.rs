//! OP_READ_PLUS (RFC 7862 15.10): READ that answers a sparse file's holes
//! as holes (an offset and a length) instead of their zeros, found with
//! lseek(2) SEEK_DATA / SEEK_HOLE as SEEK finds them. A Linux client
//! mounted with vers=4.2 reads with it whenever the server has it.

use std::os::fd::AsRawFd;

use braid_nfs_proto::nfs4::*;
use bytes::Bytes;

use super::read::{file_to_read, readable};
use crate::nfs::compound::Compound;
use crate::nfs::errors::io_status;

/// Most segments in one reply. A file of many small holes would otherwise
/// cost 20-odd bytes of framing per block; the client asks again from
/// where the reply stops (a short READ_PLUS is allowed, 15.10.3).
const MAX_SEGMENTS: usize = 32;

pub fn run(c: &mut Compound, a: &READ_PLUS4args) -> READ_PLUS4res {
    match read_plus(c, a) {
        Ok(r) => READ_PLUS4res::NFS4_OK(r),
        Err(e) => READ_PLUS4res::Default(e),
    }
}

fn read_plus(c: &mut Compound, a: &READ_PLUS4args) -> Result<read_plus_res4, nfsstat4> {
    let (export, obj) = c.current_object(NFS4ERR_ISDIR)?;
    readable(&obj)?;
    let file = file_to_read(c, &export, &obj, &a.rpa_stateid, true)?.ok_or(NFS4ERR_SERVERFAULT)?;
    // The reply must fit the session's response size with its segments'
    // framing (at most 20 bytes each beside the data, and the result's
    // own); never more than the server's I/O size.
    let framing = 16 + MAX_SEGMENTS * 20;
    let mut count = u64::from(a.rpa_count.min(c.state.limits.max_io));
    if c.reply_room > framing + 4096 {
        count = count.min((c.reply_room - framing) as u64);
    }
    let size = file.metadata().map_err(|e| io_status(&e))?.len();
    let start = a.rpa_offset;
    if start >= size || start > i64::MAX as u64 {
        return Ok(read_plus_res4 {
            rpr_eof: true,
            rpr_contents: Vec::new(),
        });
    }
    if count == 0 {
        return Ok(read_plus_res4 {
            rpr_eof: false,
            rpr_contents: Vec::new(),
        });
    }
    let end = start.saturating_add(count).min(size);
    let fd = file.as_raw_fd();
    let mut contents = Vec::new();
    let mut pos = start;
    let mut eof = false;
    while pos < end && contents.len() < MAX_SEGMENTS {
        let data_at = match seek(fd, pos, libc::SEEK_DATA) {
            Ok(p) => p.min(end),
            // ENXIO: no data from here to the end of the file.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => end,
            // A file system without SEEK_DATA says the whole file is data
            // (lseek's fallback); any other failure reads it as data too.
            Err(_) => pos,
        };
        if data_at > pos {
            contents.push(read_plus_content::NFS4_CONTENT_HOLE(data_info4 {
                di_offset: pos,
                di_length: data_at - pos,
            }));
            pos = data_at;
            continue;
        }
        let hole_at = seek(fd, pos, libc::SEEK_HOLE).unwrap_or(end).min(end);
        let want = (hole_at.max(pos + 1) - pos) as usize;
        let mut buf = Vec::with_capacity(want);
        let got = braid_fs::posix::read_into_vec(&file, &mut buf, want, pos)
            .map_err(|e| io_status(&e))?;
        if got == 0 {
            // The file was cut short since its size was read.
            eof = true;
            break;
        }
        contents.push(read_plus_content::NFS4_CONTENT_DATA(data4 {
            d_offset: pos,
            d_data: Bytes::from(buf),
        }));
        pos += got as u64;
        if got < want {
            eof = true;
            break;
        }
    }
    // RFC 7862 15.10.4: eof when the reply reaches the end of the file.
    Ok(read_plus_res4 {
        rpr_eof: eof || pos >= size,
        rpr_contents: contents,
    })
}

/// lseek(2) on a descriptor other requests may share: only the returned
/// position is used, never the descriptor's own.
fn seek(fd: i32, offset: u64, whence: i32) -> std::io::Result<u64> {
    // SAFETY: a plain syscall on a descriptor the caller's file owns; the
    // offset was checked to fit off_t.
    let pos = unsafe { libc::lseek(fd, offset as libc::off_t, whence) };
    if pos < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(pos as u64)
    }
}
