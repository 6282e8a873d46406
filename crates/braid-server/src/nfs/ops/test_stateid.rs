//! OP_TEST_STATEID (RFC 8881 18.48): the validity of each stateid, for
//! this client, without a current filehandle; special stateids are
//! NFS4ERR_BAD_STATEID (they name no state).

use braid_nfs_proto::nfs4::*;

use crate::nfs::compound::Compound;
use crate::nfs::state::locks;
use crate::nfs::state::stateids::session_client;

pub fn run(c: &mut Compound, a: &TEST_STATEID4args) -> TEST_STATEID4res {
    let client = match session_client(c) {
        Ok(cl) => cl,
        Err(e) => return TEST_STATEID4res::Default(e),
    };
    let tsr_status_codes = a
        .ts_stateids
        .iter()
        .map(|sid| {
            if sid.other == [0; 12] || sid.other == [0xff; 12] {
                NFS4ERR_BAD_STATEID
            } else {
                locks::test_stateid(&c.state.stateids, client.clientid, sid)
            }
        })
        .collect();
    TEST_STATEID4res::NFS4_OK(TEST_STATEID4resok { tsr_status_codes })
}
