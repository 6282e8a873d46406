//! The NFSv4.1 server (RFC 8881): listener, connections, sessions and the
//! COMPOUND operations, over the protocol-neutral file service. Nothing here
//! imports the SMB modules, and the SMB modules import nothing from here.

pub mod export;
