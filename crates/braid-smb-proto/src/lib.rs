//! Sans-IO SMB2/3 protocol: typed wire messages, header, NTSTATUS, signing,
//! encryption, key derivation, NTLMSSP/SPNEGO. No sockets, no file system,
//! no clock: time and randomness come from the caller.

pub mod codec;
pub mod header;
pub mod status;

pub use codec::{DecodeError, DecodeResult, FileId, Message, Reader, WriteLe};
pub use header::{Command, Header, HEADER_LEN};
pub use status::NtStatus;
pub mod auth;
pub mod calendar;
pub mod crypto;
pub mod dcerpc;
pub mod fscc;
pub mod messages;
