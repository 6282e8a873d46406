//! Authentication for SESSION_SETUP: SPNEGO (RFC 4178, MS-SPNG) carrying
//! NTLMSSP (MS-NLMP) with NTLMv2, over a minimal DER codec.
//!
//! Sans-IO: server challenges, timestamps and client randomness are passed
//! in; user lookup is a callback returning the NT hash.
//!
//! Server use:
//! 1. NEGOTIATE response security buffer: [`SpnegoServer::initial_token`].
//! 2. Each SESSION_SETUP request: [`SpnegoServer::step`]; `Continue(token)`
//!    goes back with STATUS_MORE_PROCESSING_REQUIRED, `Done { token, outcome }`
//!    with STATUS_SUCCESS; an error maps to [`AuthError::nt_status`].

pub mod der;
pub mod ntlmssp;
pub mod spnego;

pub use ntlmssp::{nt_hash, AuthOutcome, ClientEntropy, NtlmClient, NtlmSecurity, NtlmServer};
pub use spnego::{ClientStep, SpnegoClient, SpnegoServer, SpnegoStep};

use crate::status::NtStatus;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AuthError {
    #[error("malformed authentication token: {0}")]
    Malformed(&'static str),
    #[error(transparent)]
    Der(#[from] der::DerError),
    #[error("no mechanism we support was offered (need NTLMSSP)")]
    NoSupportedMech,
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
    /// Unknown user, wrong password, or an NTLMv1/LM-only response. The
    /// cases are deliberately not distinguished.
    #[error("logon failure")]
    LogonFailure,
    #[error("NTLM AUTHENTICATE MIC does not match")]
    MicMismatch,
    #[error("SPNEGO mechListMIC missing or invalid")]
    MechListMic,
    #[error("authentication message out of sequence: {0}")]
    State(&'static str),
    #[error("peer rejected authentication")]
    Rejected,
}

impl AuthError {
    /// The NTSTATUS a SESSION_SETUP response carries for this error.
    pub fn nt_status(&self) -> NtStatus {
        match self {
            AuthError::LogonFailure
            | AuthError::MicMismatch
            | AuthError::MechListMic
            | AuthError::Rejected => NtStatus::LOGON_FAILURE,
            _ => NtStatus::INVALID_PARAMETER,
        }
    }
}
