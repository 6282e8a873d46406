//! Client errors. Nothing a server sends can panic the client: malformed
//! input becomes [`Error::Decode`] or [`Error::Protocol`].

use braid_smb_proto::auth::AuthError;
use braid_smb_proto::crypto::CryptoError;
use braid_smb_proto::{Command, DecodeError, NtStatus};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed message from server: {0}")]
    Decode(#[from] DecodeError),
    #[error("crypto: {0}")]
    Crypto(#[from] CryptoError),
    #[error("authentication: {0}")]
    Auth(#[from] AuthError),
    /// The server answered `command` with an error status.
    #[error("{command:?} failed: {} ({:#010x})", .status.name(), .status.0)]
    Status { command: Command, status: NtStatus },
    /// The connection carrying the request is gone (closed, reset, killed,
    /// or a protocol violation made us drop it).
    #[error("connection lost: {0}")]
    ConnectionLost(String),
    #[error("protocol violation by server: {0}")]
    Protocol(String),
    /// A signing session got a response that is unsigned (`false`) or
    /// whose signature does not verify (`true`).
    #[error("{} response to {0:?}", if *.1 { "wrongly signed" } else { "unsigned" })]
    BadSignature(Command, bool),
    #[error("request timed out")]
    Timeout,
    #[error("no live channel left in the session")]
    NoChannel,
    #[error("invalid argument: {0}")]
    Invalid(String),
}

impl Error {
    /// The NTSTATUS of a failed request, if that is what this is.
    pub fn status(&self) -> Option<NtStatus> {
        match self {
            Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the request may be sent again on another channel: the channel
    /// died underneath it.
    pub fn is_channel_failure(&self) -> bool {
        matches!(
            self,
            Error::ConnectionLost(_) | Error::Io(_) | Error::Timeout
        )
    }
}

pub type Result<T> = std::result::Result<T, Error>;
