//! OP_EXCHANGE_ID (RFC 8881 18.35): a client introduces itself; the
//! server answers with a client id and who it is (server owner and scope,
//! the same on every address, so clients may trunk connections).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::state::clients::Who;
use crate::nfs::state::reaper::destroy_client;

/// eia_flags a client may send (RFC 8881 18.35.3); SUPP_FENCE_OPS is of
/// NFSv4.2.
const CLIENT_FLAGS: u32 = EXCHGID4_FLAG_SUPP_MOVED_REFER
    | EXCHGID4_FLAG_SUPP_MOVED_MIGR
    | EXCHGID4_FLAG_BIND_PRINC_STATEID
    | EXCHGID4_FLAG_MASK_PNFS
    | EXCHGID4_FLAG_UPD_CONFIRMED_REC_A;

pub fn run(c: &mut Compound, a: &EXCHANGE_ID4args) -> EXCHANGE_ID4res {
    // RFC 8881 18.35.3: undefined bits, or the server's own CONFIRMED_R.
    if a.eia_flags & !CLIENT_FLAGS != 0 {
        return EXCHANGE_ID4res::Default(NFS4ERR_INVAL);
    }
    // Only SP4_NONE: state protection needs RPCSEC_GSS, which is not
    // served yet.
    if !matches!(a.eia_state_protect, state_protect4_a::SP4_NONE) {
        return EXCHANGE_ID4res::Default(NFS4ERR_NOTSUPP);
    }
    if c.state.clients.len() >= c.state.limits.max_clients {
        crate::nfs::state::reaper::expire(&c.state);
        if c.state.clients.len() >= c.state.limits.max_clients {
            // Full (issue 42's limits): come back later, as Linux nfsd
            // answers when it cannot allocate a client.
            return EXCHANGE_ID4res::Default(NFS4ERR_DELAY);
        }
    }
    let update = a.eia_flags & EXCHGID4_FLAG_UPD_CONFIRMED_REC_A != 0;
    let who = Who {
        caller: c.caller.clone(),
        addr: c.conn.peer,
    };
    let (exchanged, dropped) = match c.state.clients.exchange_id(
        &a.eia_clientowner.co_ownerid,
        a.eia_clientowner.co_verifier,
        &who,
        update,
        c.state.lease_time,
    ) {
        Ok(r) => r,
        Err(e) => return EXCHANGE_ID4res::Default(e),
    };
    for old in dropped {
        destroy_client(&c.state, &old);
    }
    let client = exchanged.client;
    let mut flags = EXCHGID4_FLAG_USE_NON_PNFS;
    if exchanged.confirmed {
        flags |= EXCHGID4_FLAG_CONFIRMED_R;
    }
    // RFC 8881 18.35.4: the sequence id the next CREATE_SESSION carries.
    let seqid = client
        .create_session
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .seqid
        .wrapping_add(1);
    EXCHANGE_ID4res::NFS4_OK(EXCHANGE_ID4resok {
        eir_clientid: client.clientid,
        eir_sequenceid: seqid,
        eir_flags: flags,
        eir_state_protect: state_protect4_r::SP4_NONE,
        eir_server_owner: server_owner4 {
            so_minor_id: 0,
            so_major_id: c.state.server_owner_major.clone(),
        },
        eir_server_scope: c.state.server_scope.clone(),
        eir_server_impl_id: vec![nfs_impl_id4 {
            nii_domain: b"braid.dev".to_vec(),
            nii_name: format!("Braid {}", env!("CARGO_PKG_VERSION")).into_bytes(),
            nii_date: nfstime4 {
                seconds: 0,
                nseconds: 0,
            },
        }],
    })
}
