//! OP_RECLAIM_COMPLETE (RFC 8881 18.51): the client reclaimed what it
//! held before the restart; the grace period may end sooner.

use std::sync::atomic::Ordering;

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;

pub fn run(c: &mut Compound, a: &RECLAIM_COMPLETE4args) -> RECLAIM_COMPLETE4res {
    let Some(session) = c.session.clone() else {
        return RECLAIM_COMPLETE4res {
            rcr_status: NFS4ERR_OP_NOT_IN_SESSION,
        };
    };
    // rca_one_fs: reclaim finished for one file system; Braid's grace is
    // per client, so only the global form ends it.
    if a.rca_one_fs {
        if c.current.is_none() {
            return RECLAIM_COMPLETE4res {
                rcr_status: NFS4ERR_NOFILEHANDLE,
            };
        }
        return RECLAIM_COMPLETE4res { rcr_status: NFS4_OK };
    }
    let client = &session.client;
    if client.reclaim_complete.swap(true, Ordering::AcqRel) {
        return RECLAIM_COMPLETE4res {
            rcr_status: NFS4ERR_COMPLETE_ALREADY,
        };
    }
    c.state.grace.done(&client.owner);
    RECLAIM_COMPLETE4res { rcr_status: NFS4_OK }
}
