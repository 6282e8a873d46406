//! OP_RECLAIM_COMPLETE (RFC 8881 18.51): the client reclaimed what it
//! held before the restart; the grace period may end sooner.
//!
//! RFC 8881 18.51.3: a client with a new client ID sends it (rca_one_fs
//! FALSE) before its first non-reclaim OPEN or LOCK, even with nothing to
//! reclaim; until then those answer NFS4ERR_GRACE, and reclaims after it
//! NFS4ERR_NO_GRACE (`Client::reclaim_complete`, read by OPEN and LOCK).

use std::sync::atomic::Ordering;

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &RECLAIM_COMPLETE4args) -> RECLAIM_COMPLETE4res {
    RECLAIM_COMPLETE4res {
        rcr_status: complete(c, a),
    }
}

fn complete(c: &mut Compound, a: &RECLAIM_COMPLETE4args) -> nfsstat4 {
    let Some(session) = c.session.clone() else {
        return NFS4ERR_OP_NOT_IN_SESSION;
    };
    // rca_one_fs: reclaim finished for the current filehandle's file
    // system (after a migration, RFC 8881 18.51.3); Braid's grace is per
    // client, so only the global form counts.
    if a.rca_one_fs {
        if c.current.is_none() {
            return NFS4ERR_NOFILEHANDLE;
        }
        return NFS4_OK;
    }
    let client = &session.client;
    // RFC 8881 18.51.4: a second global RECLAIM_COMPLETE (RECC4).
    if client.reclaim_complete.swap(true, Ordering::AcqRel) {
        return NFS4ERR_COMPLETE_ALREADY;
    }
    c.state.grace.done(&client.owner);
    // RFC 8881 8.4.2.1: from here on the client may take state, and after
    // a restart it may reclaim: it is recorded now, as Linux's nfsd records
    // a client at its RECLAIM_COMPLETE. A server that recorded only
    // clients holding state would end the next grace period while a
    // client holding none yet (pynfs REBT's "block") was still coming.
    c.state.clients.record(client);
    NFS4_OK
}
