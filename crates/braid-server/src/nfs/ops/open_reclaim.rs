//! OPEN with CLAIM_PREVIOUS after a restart (RFC 8881 8.4.2.1, 18.16.3):
//! the client reclaims an open it held, and with it the delegation it held
//! (`delegate_type`), each checked against what the last run recorded of
//! it (`state/held.rs`).

use braid_fs::posix::Object;
use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::exports::Export;
use crate::nfs::state::clients::Client;
use crate::nfs::state::held::ReclaimCounts;

/// Count a reclaim granted (`/metrics`).
pub fn granted(c: &Compound, reclaim: Reclaim, delegated: bool) {
    let counts = &c.state.reclaims;
    if reclaim != Reclaim::No {
        ReclaimCounts::bump(&counts.opens);
    }
    if matches!(reclaim, Reclaim::Delegation { .. }) && delegated {
        ReclaimCounts::bump(&counts.delegations);
    }
}

/// What an OPEN reclaims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reclaim {
    /// Nothing: a new open.
    No,
    /// An open, without a delegation.
    Open,
    /// An open and the delegation it held (true: a write delegation).
    Delegation { write: bool },
}

/// RFC 8881 18.16.3: what `claim` reclaims; a delegate_type that is no
/// delegation type is NFS4ERR_INVAL.
pub fn of_claim(claim: &open_claim4) -> Result<Reclaim, nfsstat4> {
    match claim {
        open_claim4::CLAIM_PREVIOUS(t) => match *t {
            OPEN_DELEGATE_NONE => Ok(Reclaim::Open),
            OPEN_DELEGATE_READ => Ok(Reclaim::Delegation { write: false }),
            OPEN_DELEGATE_WRITE => Ok(Reclaim::Delegation { write: true }),
            _ => Err(NFS4ERR_INVAL),
        },
        open_claim4::CLAIM_DELEG_PREV_FH | open_claim4::CLAIM_DELEGATE_PREV(_) => Ok(Reclaim::Open),
        _ => Ok(Reclaim::No),
    }
}

/// RFC 8881 8.4.2.1: a reclaim of an open or delegation the client did not
/// hold in the last run is NFS4ERR_RECLAIM_BAD: granting it could take
/// what another client held and is about to reclaim.
pub fn check(
    c: &Compound,
    client: &Client,
    reclaim: Reclaim,
    (export, obj): (&Export, &Object),
    (access, deny): (u32, u32),
) -> Result<(), nfsstat4> {
    let deleg = match reclaim {
        Reclaim::No => return Ok(()),
        Reclaim::Open => None,
        Reclaim::Delegation { write } => Some(write),
    };
    let file = (export.name.as_str(), obj.fileid());
    if c.state
        .held
        .may_reopen(&client.owner, file, access, deny, deleg)
    {
        Ok(())
    } else {
        ReclaimCounts::bump(&c.state.reclaims.refused);
        Err(NFS4ERR_RECLAIM_BAD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims() {
        assert_eq!(
            of_claim(&open_claim4::CLAIM_PREVIOUS(OPEN_DELEGATE_NONE)),
            Ok(Reclaim::Open)
        );
        assert_eq!(
            of_claim(&open_claim4::CLAIM_PREVIOUS(OPEN_DELEGATE_WRITE)),
            Ok(Reclaim::Delegation { write: true })
        );
        assert_eq!(
            of_claim(&open_claim4::CLAIM_PREVIOUS(open_delegation_type4(9))),
            Err(NFS4ERR_INVAL)
        );
        assert_eq!(of_claim(&open_claim4::CLAIM_FH), Ok(Reclaim::No));
    }
}
