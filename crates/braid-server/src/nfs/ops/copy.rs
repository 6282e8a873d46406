//! OP_COPY (RFC 7862 15.2): copy a range of the saved filehandle's file
//! into the current filehandle's, inside the server (copy_file_range(2):
//! no data crosses the network; on file systems that share extents it
//! shares them). Braid copies synchronously: no copy outlives its
//! request, so OFFLOAD_STATUS and OFFLOAD_CANCEL have nothing to act on,
//! and a copy from another server (ca_source_server) is not offered.

use std::os::fd::AsRawFd;
use std::sync::Arc;

use braid_nfs_proto::nfs4::*;

use super::data_range::{notify_write, source_and_destination};
use crate::nfs::compound::Compound;
use crate::nfs::errors::io_status;
use crate::nfs::state::stateids::io_file;

/// Most bytes one synchronous COPY moves: it holds a compound thread and
/// the client's slot while it runs, so a long copy is answered short and
/// the client asks for the rest (copy_file_range(2) loops the same way;
/// knfsd stops at 4 MiB).
const MAX_SYNC_COPY: u64 = 64 << 20;

pub fn run(c: &mut Compound, a: &COPY4args) -> COPY4res {
    match copy(c, a) {
        Ok(r) => COPY4res::NFS4_OK(r),
        Err(e) => COPY4res::Default(e),
    }
}

fn copy(c: &mut Compound, a: &COPY4args) -> Result<COPY4resok, nfsstat4> {
    // RFC 7862 15.2.3: an inter-server copy names its source; Braid does
    // intra-server copies only.
    if !a.ca_source_server.is_empty() {
        return Err(NFS4ERR_NOTSUPP);
    }
    let ((src_export, src), (dst_export, dst)) = source_and_destination(c)?;
    if a.ca_src_offset > i64::MAX as u64 || a.ca_dst_offset > i64::MAX as u64 {
        return Err(NFS4ERR_INVAL);
    }
    let from = io_file(c, &src_export, &src, &a.ca_src_stateid, false)?;
    let to = io_file(c, &dst_export, &dst, &a.ca_dst_stateid, true)?;
    let size = from.metadata().map_err(|e| io_status(&e))?.len();
    // RFC 7862 15.2.3: a source offset past the end of the file is
    // NFS4ERR_INVAL; a count of 0 copies to the end of the file; a range
    // running past the end copies what there is (as knfsd does, so that
    // copy_file_range(2) of "the rest" works).
    if a.ca_src_offset > size {
        return Err(NFS4ERR_INVAL);
    }
    let available = size - a.ca_src_offset;
    let wanted = if a.ca_count == 0 {
        available
    } else {
        a.ca_count.min(available)
    };
    if src.key() == dst.key() {
        // Overlapping ranges of one file (copy_file_range refuses them).
        let (s, d) = (a.ca_src_offset, a.ca_dst_offset);
        if s < d.saturating_add(wanted) && d < s.saturating_add(wanted) {
            return Err(NFS4ERR_INVAL);
        }
    }
    let len = wanted.min(MAX_SYNC_COPY);
    // Over the share's limits the copy waits here, once its length is
    // known, then runs (the compound loop passed it by: see nfs::qos).
    let passed = crate::nfs::qos::pass_copy(c, &dst_export.name, dst.key(), len);
    let copied = copy_range(&from, a.ca_src_offset, &to, a.ca_dst_offset, len);
    if let Some((gate, p)) = passed {
        gate.done(p, copied.is_ok());
    }
    let copied = copied?;
    if copied > 0 {
        notify_write(c, &dst_export, &dst);
    }
    Ok(COPY4resok {
        cr_response: write_response4 {
            wr_callback_id: Vec::new(),
            wr_count: copied,
            // Left in the page cache: the client COMMITs as after WRITE.
            wr_committed: UNSTABLE4,
            wr_writeverf: c.state.boot_verifier,
        },
        cr_requirements: copy_requirements4 {
            cr_consecutive: true,
            cr_synchronous: true,
        },
    })
}

/// copy_file_range(2) until `len` bytes moved or the source ends.
fn copy_range(
    from: &Arc<braid_fs::posix::OpenFile>,
    from_off: u64,
    to: &Arc<braid_fs::posix::OpenFile>,
    to_off: u64,
    len: u64,
) -> Result<u64, nfsstat4> {
    let mut done = 0u64;
    let mut off_in = from_off as libc::loff_t;
    let mut off_out = to_off as libc::loff_t;
    while done < len {
        let chunk = (len - done).min(1 << 30) as usize;
        // SAFETY: both fds are owned by the `File`s; the offsets are
        // passed by pointer so neither fd's own position moves.
        let n = unsafe {
            libc::copy_file_range(
                from.as_raw_fd(),
                &mut off_in,
                to.as_raw_fd(),
                &mut off_out,
                chunk,
                0,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if done > 0 {
                // What was copied stands; the client asks for the rest.
                break;
            }
            return Err(io_status(&e));
        }
        if n == 0 {
            break;
        }
        done += n as u64;
    }
    Ok(done)
}
