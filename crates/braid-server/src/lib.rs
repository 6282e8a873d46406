//! Tokio SMB server: listeners, connections, sessions and channels, one file
//! per SMB2 command under `smb/ops/`, and a dispatch table.

pub mod userdb;
