//! The lsarpc interface (12345778-1234-abcd-ef00-0123456789ab v0.0, NDR
//! 2.0) as a standalone file server answers it: the policy handle calls of
//! MS-LSAD 3.1.4.4 and 3.1.4.9.4, and the name/SID translations of MS-LSAT
//! 3.1.4 that `smbcacls`, `rpcclient lookupsids|lookupnames`, Windows
//! Explorer's Security tab and smbtorture's `rpc.lsa.lookupsids` and
//! `rpc.lsa.lookupnames` make. Stub in, stub out: the caller owns the pipe
//! and one [`LsaState`] per pipe open.
//!
//! Well-known SIDs and BUILTIN are resolved here (`names.rs`); accounts of
//! the server's own domain come from the [`LsaBackend`]. Handles
//! (`policy.rs`), lookups (`lookup.rs`), and their NDR shapes (`wire.rs`).
//!
//! A policy handle this pipe did not open (or has closed) is refused with
//! the fault nca_s_fault_context_mismatch, as the RPC runtimes of Windows
//! and Samba refuse an unknown context handle before the call runs; the
//! LSA-level STATUS_INVALID_HANDLE is never reached.

mod lookup;
mod names;
mod policy;
mod wire;

use super::ndr::{NdrError, Stub};
use super::pdu::fault_status;
use crate::fscc::security::Sid;
use wire::PolicyHandle;

/// MS-LSAT 2.2.13 SID_NAME_USE: what a translated SID or name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SidNameUse {
    User = 1,
    Group = 2,
    Domain = 3,
    Alias = 4,
    WellKnownGroup = 5,
    Deleted = 6,
    Invalid = 7,
    Unknown = 8,
    Computer = 9,
    Label = 10,
}

/// What the server itself knows; the module resolves well-known SIDs and
/// names (NT AUTHORITY, BUILTIN, Everyone, CREATOR OWNER/GROUP, ...) itself.
pub trait LsaBackend {
    /// The server's account domain: its NetBIOS name (e.g. "BRAIDHOST") and SID (S-1-5-21-a-b-c).
    fn account_domain(&self) -> (String, Sid);
    /// An account of the account domain by its SID: its name and kind (User, Group/Alias).
    /// Only asked for SIDs one RID below the account domain's SID.
    fn account_by_sid(&self, sid: &Sid) -> Option<(String, SidNameUse)>;
    /// An account of the account domain by name, case-insensitively.
    /// A SID outside the account domain is treated as not found.
    fn account_by_name(&self, name: &str) -> Option<(Sid, SidNameUse)>;
    /// The caller's user name and domain name (LsarGetUserName).
    fn caller(&self) -> (String, String);
}

/// How many policy handles one pipe open may hold at once; past it
/// LsarOpenPolicy/2 answer STATUS_INSUFFICIENT_RESOURCES.
pub const MAX_POLICY_HANDLES: usize = 64;

/// The policy handles one pipe open holds (bounded by
/// [`MAX_POLICY_HANDLES`]).
#[derive(Debug, Default)]
pub struct LsaState {
    handles: Vec<PolicyHandle>,
    /// Handles opened so far, numbering the next one.
    opened: u32,
}

impl LsaState {
    /// How many policy handles are open.
    pub fn open_handles(&self) -> usize {
        self.handles.len()
    }

    /// A new handle, or None at the limit. C706 context handles are a u32
    /// of attributes (0) and a UUID; here a counter and random octets, so a
    /// handle from another pipe (or a guess) matches nothing.
    fn open(&mut self) -> Option<PolicyHandle> {
        if self.handles.len() >= MAX_POLICY_HANDLES {
            return None;
        }
        self.opened = self.opened.wrapping_add(1);
        let mut handle = wire::NULL_HANDLE;
        handle[4..8].copy_from_slice(&self.opened.to_le_bytes());
        handle[8..].copy_from_slice(&rand::random::<[u8; 12]>());
        self.handles.push(handle);
        Some(handle)
    }

    /// Refuses a handle this pipe does not hold (see the module docs).
    fn check(&self, handle: &PolicyHandle) -> Result<(), CallError> {
        if self.handles.contains(handle) {
            Ok(())
        } else {
            Err(CallError::Fault(FAULT_CONTEXT_MISMATCH))
        }
    }

    fn close(&mut self, handle: &PolicyHandle) -> Result<(), CallError> {
        self.check(handle)?;
        self.handles.retain(|h| h != handle);
        Ok(())
    }
}

/// C706 appendix E nca_s_fault_context_mismatch: the fault for a context
/// handle the server does not hold (Samba's client reports it as
/// NT_STATUS_RPC_SS_CONTEXT_MISMATCH, which smbtorture's lsa Close test
/// expects for a second Close).
pub const FAULT_CONTEXT_MISMATCH: u32 = 0x1C00_001A;

/// MS-LSAT 3.1.4 and MS-LSAD 3.1.4: the operation numbers answered here.
pub mod opnum {
    pub const LSAR_CLOSE: u16 = 0;
    pub const LSAR_OPEN_POLICY: u16 = 6;
    pub const LSAR_QUERY_INFORMATION_POLICY: u16 = 7;
    pub const LSAR_LOOKUP_NAMES: u16 = 14;
    pub const LSAR_LOOKUP_SIDS: u16 = 15;
    pub const LSAR_OPEN_POLICY2: u16 = 44;
    pub const LSAR_GET_USER_NAME: u16 = 45;
    pub const LSAR_QUERY_INFORMATION_POLICY2: u16 = 46;
    pub const LSAR_LOOKUP_SIDS2: u16 = 57;
    pub const LSAR_LOOKUP_NAMES2: u16 = 58;
    pub const LSAR_LOOKUP_NAMES3: u16 = 68;
    pub const LSAR_LOOKUP_SIDS3: u16 = 76;
    pub const LSAR_LOOKUP_NAMES4: u16 = 77;
}

/// The NTSTATUS values (MS-ERREF 2.3.1) the calls return.
pub mod status {
    pub const SUCCESS: u32 = 0x0000_0000;
    pub const SOME_NOT_MAPPED: u32 = 0x0000_0107;
    pub const INVALID_PARAMETER: u32 = 0xC000_000D;
    pub const ACCESS_DENIED: u32 = 0xC000_0022;
    pub const NONE_MAPPED: u32 = 0xC000_0073;
    pub const INSUFFICIENT_RESOURCES: u32 = 0xC000_009A;
}

/// Why a call gets a fault instead of an answer.
#[derive(Debug)]
enum CallError {
    /// The stub does not decode: RPC_X_BAD_STUB_DATA.
    Ndr,
    /// Any other fault status, sent as is.
    Fault(u32),
}

impl From<NdrError> for CallError {
    fn from(_: NdrError) -> Self {
        CallError::Ndr
    }
}

type CallResult = Result<Vec<u8>, CallError>;

/// Answer one call: the response stub, or a fault status:
/// nca_op_rng_error for calls not served, RPC_X_BAD_STUB_DATA for stubs
/// that do not decode, [`FAULT_CONTEXT_MISMATCH`] for a policy handle
/// the pipe does not hold, ERROR_ACCESS_DENIED for the calls that need a
/// Netlogon secure channel. A little-endian stub.
pub fn handle_call(
    opnum: u16,
    stub: &[u8],
    backend: &dyn LsaBackend,
    state: &mut LsaState,
) -> Result<Vec<u8>, u32> {
    handle_stub(opnum, Stub::little_endian(stub), backend, state)
}

/// [`handle_call`] for a stub in the request's own representation.
pub fn handle_stub(
    opnum: u16,
    stub: Stub<'_>,
    backend: &dyn LsaBackend,
    state: &mut LsaState,
) -> Result<Vec<u8>, u32> {
    use lookup::{NamesForm, SidsForm};
    let answer = match opnum {
        opnum::LSAR_CLOSE => policy::close(stub, state),
        opnum::LSAR_OPEN_POLICY => policy::open_policy(stub, state, false),
        opnum::LSAR_OPEN_POLICY2 => policy::open_policy(stub, state, true),
        opnum::LSAR_QUERY_INFORMATION_POLICY | opnum::LSAR_QUERY_INFORMATION_POLICY2 => {
            policy::query_information(stub, backend, state)
        }
        opnum::LSAR_GET_USER_NAME => policy::get_user_name(stub, backend),
        opnum::LSAR_LOOKUP_NAMES => lookup::lookup_names(stub, backend, state, SidsForm::Rids),
        opnum::LSAR_LOOKUP_NAMES2 => lookup::lookup_names(stub, backend, state, SidsForm::RidsEx),
        opnum::LSAR_LOOKUP_NAMES3 => lookup::lookup_names(stub, backend, state, SidsForm::Sids),
        opnum::LSAR_LOOKUP_SIDS => lookup::lookup_sids(stub, backend, state, NamesForm::Plain),
        opnum::LSAR_LOOKUP_SIDS2 => lookup::lookup_sids(stub, backend, state, NamesForm::Ex),
        // MS-LSAT 3.1.4.5, 3.1.4.9: only over a Netlogon secure channel,
        // which a pipe on IPC$ never is; Windows faults the call.
        opnum::LSAR_LOOKUP_SIDS3 | opnum::LSAR_LOOKUP_NAMES4 => {
            Err(CallError::Fault(fault_status::ACCESS_DENIED))
        }
        _ => Err(CallError::Fault(fault_status::NCA_OP_RNG_ERROR)),
    };
    answer.map_err(|e| match e {
        CallError::Ndr => fault_status::NDR,
        CallError::Fault(status) => status,
    })
}

#[cfg(test)]
mod test_client;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod wire_tests;
