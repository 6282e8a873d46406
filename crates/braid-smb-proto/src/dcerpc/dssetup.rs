//! The directory services setup interface (MS-DSSP, `dssetup`
//! 3919286a-b10c-11d0-9ba8-00c04fd92ef5 v0.0), served on the lsarpc pipe
//! as Windows serves it. Its one call, DsRolerGetPrimaryDomainInformation,
//! tells a client what role the server plays: Windows' Security tab and
//! object picker, and `net` / `rpcclient dsroledominfo`, ask it before
//! they decide where to look up accounts. Braid is a standalone server
//! whose accounts live in its own domain.

use super::lsa::LsaBackend;
use super::ndr::{NdrError, NdrResult, NdrWriter, Stub};
use super::pdu::fault_status;

/// MS-DSSP 3.2.5: opnum 0 is the only call; 1–10 are not used on the wire.
const GET_PRIMARY_DOMAIN_INFORMATION: u16 = 0;

/// MS-DSSP 2.2.4 DSROLE_PRIMARY_DOMAIN_INFO_LEVEL.
mod level {
    pub const BASIC: u16 = 1;
    pub const UPGRADE_STATUS: u16 = 2;
    pub const OPERATION_STATE: u16 = 3;
}

/// MS-DSSP 2.2.3 DSROLE_MACHINE_ROLE: DsRole_RoleStandaloneServer.
const ROLE_STANDALONE_SERVER: u16 = 2;
/// MS-ERREF 2.2: ERROR_INVALID_PARAMETER (MS-DSSP 3.2.5.1 for a level
/// out of range).
const ERROR_INVALID_PARAMETER: u32 = 87;

pub fn handle_call(opnum: u16, stub: Stub<'_>, backend: &dyn LsaBackend) -> Result<Vec<u8>, u32> {
    match opnum {
        GET_PRIMARY_DOMAIN_INFORMATION => {
            get_primary_domain_information(stub, backend).map_err(|_: NdrError| fault_status::NDR)
        }
        _ => Err(fault_status::NCA_OP_RNG_ERROR),
    }
}

/// MS-DSSP 3.2.5.1: `[in] InfoLevel` (an enum: 16 bits),
/// `[out, switch_is(InfoLevel)] PDSROLER_PRIMARY_DOMAIN_INFORMATION *`: a
/// unique pointer to a union whose 16-bit discriminant is followed by the
/// arm at the union's alignment (4).
fn get_primary_domain_information(stub: Stub<'_>, backend: &dyn LsaBackend) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    let info_level = r.u16()?;
    let mut w = NdrWriter::new();
    if !matches!(
        info_level,
        level::BASIC | level::UPGRADE_STATUS | level::OPERATION_STATE
    ) {
        w.null_pointer();
        w.u32(ERROR_INVALID_PARAMETER);
        return Ok(w.into_bytes());
    }
    w.referent();
    w.u16(info_level);
    w.align(4);
    match info_level {
        // MS-DSSP 2.2.1 DSROLER_PRIMARY_DOMAIN_INFO_BASIC: no directory
        // service runs and no domain GUID is known (Flags 0, GUID zero);
        // the flat name is the server's own account domain, and a
        // standalone server has no DNS domain or forest.
        level::BASIC => {
            let (domain, _) = backend.account_domain();
            w.u16(ROLE_STANDALONE_SERVER);
            w.u32(0);
            w.referent();
            w.null_pointer();
            w.null_pointer();
            w.bytes(&[0; 16]);
            w.wstring(&domain);
        }
        // MS-DSSP 2.2.6 DSROLE_UPGRADE_STATUS_INFO: not upgrading
        // (a 32-bit value), previous role unknown (an enum: 16 bits).
        level::UPGRADE_STATUS => {
            w.u32(0);
            w.u16(0);
        }
        // MS-DSSP 2.2.5 DSROLE_OPERATION_STATE_INFO: idle.
        _ => w.u16(0),
    }
    w.u32(0);
    Ok(w.into_bytes())
}
