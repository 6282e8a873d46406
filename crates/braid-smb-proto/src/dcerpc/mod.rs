//! DCE/RPC for the named pipes served on IPC$: connection-oriented PDUs
//! (C706 chapter 12, MS-RPCE 2.2.2), NDR 2.0, and the srvsvc calls that
//! let `smbclient -L` and Windows list shares (MS-SRVS). Sans-IO: bytes
//! in through [`PipeEndpoint::write`], answers out through
//! [`PipeEndpoint::read`].

mod endpoint;
pub mod ndr;
pub mod pdu;
pub mod srvsvc;

pub use endpoint::{PipeEndpoint, PipeError};
pub use srvsvc::{
    file_permission, share_type, OpenFileEntry, ServerInfo, SessionEntry, ShareEntry,
    SrvsvcBackend, TransportEntry, TreeConnectEntry,
};

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
