//! The remote management interface (C706 appendix Q, `mgmt`
//! afa8bd80-7d8a-11c9-bef4-08002b102989 v1.0) that every RPC endpoint
//! answers besides its own interfaces: which interfaces the endpoint
//! serves, its call and packet counts, whether it listens, and the
//! principal names of its authentication services. Windows and Samba
//! offer it on every pipe; tools (`rpcclient`'s `mgmt` calls, smbtorture
//! `rpc.mgmt`) bind it to learn what a pipe carries.

use super::ndr::{NdrError, NdrResult, NdrWriter, Stub};
use super::pdu::{fault_status, SyntaxId};

/// C706 Q.2 operation numbers.
mod opnum {
    pub const INQ_IF_IDS: u16 = 0;
    pub const INQ_STATS: u16 = 1;
    pub const IS_SERVER_LISTENING: u16 = 2;
    pub const STOP_SERVER_LISTENING: u16 = 3;
    pub const INQ_PRINC_NAME: u16 = 4;
}

/// C706 Q.2.2 rpc_mgmt_inq_stats: the four counters, in this order.
pub const STATS_COUNT: u32 = 4;

/// MS-ERREF 2.2 Win32 codes these calls answer.
mod werr {
    pub const OK: u32 = 0;
    pub const ACCESS_DENIED: u32 = 5;
    pub const NOT_SUPPORTED: u32 = 50;
    /// RPC_S_UNKNOWN_AUTHN_SERVICE.
    pub const UNKNOWN_AUTHN_SERVICE: u32 = 1747;
}

/// What this endpoint has counted, for rpc_mgmt_inq_stats.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub calls_in: u32,
    pub calls_out: u32,
    pub pkts_in: u32,
    pub pkts_out: u32,
}

/// One mgmt call; `interfaces` are the ones this endpoint serves (mgmt
/// among them).
pub fn handle_call(
    opnum: u16,
    stub: Stub<'_>,
    interfaces: &[SyntaxId],
    stats: Stats,
) -> Result<Vec<u8>, u32> {
    let answer = match opnum {
        opnum::INQ_IF_IDS => Ok(inq_if_ids(interfaces)),
        opnum::INQ_STATS => inq_stats(stub, stats),
        opnum::IS_SERVER_LISTENING => Ok(is_server_listening()),
        opnum::STOP_SERVER_LISTENING => Ok(werror_only(werr::ACCESS_DENIED)),
        opnum::INQ_PRINC_NAME => inq_princ_name(stub),
        _ => return Err(fault_status::NCA_OP_RNG_ERROR),
    };
    answer.map_err(|_: NdrError| fault_status::NDR)
}

/// C706 Q.2.1 rpc_mgmt_inq_if_ids: `[out] rpc_if_id_vector_t **` — a
/// unique pointer to a count and a conformant array of unique pointers to
/// syntax ids.
fn inq_if_ids(interfaces: &[SyntaxId]) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.referent();
    let count = interfaces.len() as u32;
    w.u32(count);
    w.u32(count);
    for _ in interfaces {
        w.referent();
    }
    for syntax in interfaces {
        // ndr_syntax_id: a GUID (4-aligned, kept in wire order) and the
        // version.
        w.align(4);
        w.bytes(&syntax.uuid);
        w.u32(syntax.version);
    }
    w.u32(werr::OK);
    w.into_bytes()
}

/// C706 Q.2.2 rpc_mgmt_inq_stats: `[in] max_count`, then a struct of a
/// count and a conformant array of that many counters. Like Samba, only
/// the full vector of four is answered.
fn inq_stats(stub: Stub<'_>, stats: Stats) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    let max_count = r.u32()?;
    let _reserved = r.u32()?;
    let mut w = NdrWriter::new();
    if max_count != STATS_COUNT {
        w.u32(0);
        w.u32(0);
        w.u32(werr::NOT_SUPPORTED);
        return Ok(w.into_bytes());
    }
    w.u32(STATS_COUNT);
    w.u32(STATS_COUNT);
    for counter in [
        stats.calls_in,
        stats.calls_out,
        stats.pkts_in,
        stats.pkts_out,
    ] {
        w.u32(counter);
    }
    w.u32(werr::OK);
    Ok(w.into_bytes())
}

/// C706 Q.2.3 rpc_mgmt_is_server_listening: `[out] status`, and a
/// boolean32 result that is true: a pipe that answers is listening.
fn is_server_listening() -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.u32(0);
    w.u32(1);
    w.into_bytes()
}

/// C706 Q.2.5 rpc_mgmt_inq_server_princ_name: `[in] authn_proto,
/// princ_name_size`, `[out, string, size_is(princ_name_size)] char[]`.
/// The binds served authenticate with NTLMSSP, alone or under SPNEGO,
/// which name no server principal (a Kerberos notion), so every protocol
/// is unknown and the name comes back empty, as Samba answers without a
/// keytab; a size of 0 leaves no room for the string and is bad stub data.
fn inq_princ_name(stub: Stub<'_>) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    let _authn_proto = r.u32()?;
    let size = r.u32()?;
    if size == 0 {
        return Err(NdrError::Invalid("princ_name_size 0"));
    }
    let mut w = NdrWriter::new();
    w.u32(size);
    w.u32(0);
    w.u32(1);
    w.bytes(&[0]);
    w.u32(werr::UNKNOWN_AUTHN_SERVICE);
    Ok(w.into_bytes())
}

fn werror_only(code: u32) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.u32(code);
    w.into_bytes()
}
