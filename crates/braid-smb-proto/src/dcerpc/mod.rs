//! DCE/RPC for the named pipes served on IPC$: connection-oriented PDUs
//! (C706 chapter 12, MS-RPCE 2.2.2), NDR 2.0, the srvsvc calls that let
//! `smbclient -L` and Windows list shares (MS-SRVS), and the lsarpc calls
//! that turn SIDs into names and back (MS-LSAT), for `smbcacls` and
//! Windows' Security tab. Sans-IO: bytes in through
//! [`PipeEndpoint::write`], answers out through [`PipeEndpoint::read`].

pub mod auth;
mod dssetup;
mod endpoint;
pub mod lsa;
mod mgmt;
pub mod ndr;
pub mod pdu;
pub mod srvsvc;
pub mod vt;

pub use endpoint::{PipeBackend, PipeEndpoint, PipeError};
pub use srvsvc::{
    file_permission, share_type, OpenFileEntry, ServerInfo, SessionEntry, ShareEntry,
    SrvsvcBackend, TransportEntry, TreeConnectEntry,
};

#[cfg(test)]
mod interface_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
