//! Which operations of a COMPOUND run on the reactor: the tokio worker
//! that read the request, before the compound moves to a blocking-pool
//! thread (`compound::run`). The reactor never waits on the file system
//! or on another task, so an operation runs here only if it cannot:
//!
//! - GETFH, SAVEFH, RESTOREFH, PUTROOTFH, PUTPUBFH: the compound's own
//!   filehandles and the export table, in memory.
//! - PUTFH of an object braid-fs keeps open: the handle's seal is checked
//!   and its link count read from the held fd with `AT_STATX_DONT_SYNC`
//!   (`PosixShare::resolve_cached`): the inode is pinned in memory by the
//!   fd, so a local file system reads no disk, and a network or FUSE one
//!   answers from its cached attributes. A handle not kept open needs
//!   `open_by_handle_at` (a directory lookup that may read the disk): the
//!   pool.
//! - READ of data in the page cache (preadv2 with RWF_NOWAIT, EAGAIN
//!   otherwise), with a real stateid whose open serves the read, on a
//!   share without QoS limits (the gate may hold an operation back: only
//!   the pool may wait for it).
//!
//! - GETATTR of an object of an export no client holds a delegation of
//!   (a holder may be asked with CB_GETATTR), without the file-system
//!   counters (statfs): `statx(AT_STATX_DONT_SYNC)` on the object's held
//!   fd, as PUTFH's (`attrs::encode_cached`); on a share without QoS
//!   limits, as READ.
//!
//! SEQUENCE (the slot table, in memory) is run by the compound loop
//! itself. Everything else goes to the pool: OPEN waits for lease breaks,
//! CLOSE closes fds (a close may flush dirty data), and the namespace
//! operations read directories.

use braid_nfs_proto::nfs4::*;

use super::compound::Compound;
use super::dispatch;
use super::fh::Fh;
use super::ops;

/// Run `op` here if it cannot wait; None (nothing done) if it must go to
/// the pool.
pub fn run_inline(c: &mut Compound, op: &nfs_argop4) -> Option<nfs_resop4> {
    match op {
        nfs_argop4::OP_GETFH
        | nfs_argop4::OP_SAVEFH
        | nfs_argop4::OP_RESTOREFH
        | nfs_argop4::OP_PUTROOTFH
        | nfs_argop4::OP_PUTPUBFH => Some(dispatch::dispatch(c, op)),
        nfs_argop4::OP_PUTFH(a) => ops::putfh::run_cached(c, a).map(nfs_resop4::OP_PUTFH),
        nfs_argop4::OP_READ(_) | nfs_argop4::OP_GETATTR(_) if c.current.is_none() => {
            // NFS4ERR_NOFILEHANDLE, from the table.
            Some(dispatch::dispatch(c, op))
        }
        // Both are charged by a share's QoS gate, which may hold them.
        nfs_argop4::OP_READ(_) | nfs_argop4::OP_GETATTR(_) if qos_may_hold(c) => None,
        nfs_argop4::OP_READ(a) => ops::read::run_cached(c, a).map(nfs_resop4::OP_READ),
        nfs_argop4::OP_GETATTR(a) => ops::getattr::run_cached(c, a).map(nfs_resop4::OP_GETATTR),
        _ => None,
    }
}

/// Whether the share of the current filehandle has a QoS gate, which may
/// hold a READ back (`qos::pass`).
fn qos_may_hold(c: &Compound) -> bool {
    let Some(registry) = c.state.qos.get() else {
        return false;
    };
    match &c.current {
        Some(Fh::Object { export, .. }) => registry.gate(&export.name).is_some(),
        _ => false,
    }
}
