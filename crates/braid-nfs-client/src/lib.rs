//! `braid_nfs_client`: an async NFSv4.1 client on `braid-nfs-proto`.
//!
//! - [`transport::Conn`]: one TCP connection, record marking, many calls
//!   in flight matched by xid, vectored writes;
//! - [`slots::SlotTable`]: the session's fore-channel slots, following the
//!   server's `sr_target_highest_slotid`;
//! - [`Client`]: EXCHANGE_ID (SP4_NONE), CREATE_SESSION, RECLAIM_COMPLETE,
//!   SEQUENCE on every COMPOUND; `nconnect` (N connections to one address,
//!   one session, round-robin skipping a connection with a longer queue
//!   than the average, as Linux does) and multi-address session trunking
//!   (RFC 8881 2.10.5) when every address shows the same server owner and
//!   scope; AUTH_SYS;
//! - file operations in [`ops`]: LOOKUP walks, GETATTR, OPEN (create
//!   UNCHECKED/GUARDED, or existing), READ, WRITE, COMMIT, CLOSE, SETATTR
//!   (size), REMOVE, CREATE (directory), READDIR.

pub mod client;
pub mod ops;
pub mod slots;
pub mod transport;

pub use client::{Client, ClientOptions, ServerIdentity};
pub use ops::{Access, Attrs, Create, Fh, OpenFile, Stable};

use braid_nfs_proto::nfs4::nfsstat4;

/// A failure of the client.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Io(String),
    #[error("connection closed")]
    Closed,
    #[error("protocol: {0}")]
    Protocol(String),
    #[error("RPC: {0}")]
    Rpc(String),
    /// An operation failed: its name and status.
    #[error("{op}: {}", .status.name())]
    Nfs { op: &'static str, status: nfsstat4 },
    #[error("SEQUENCE: NFS4ERR_SEQ_MISORDERED on slot {slot} seqid {seqid}")]
    SeqMisordered { slot: u32, seqid: u32 },
    #[error("SEQUENCE: NFS4ERR_BADSLOT on slot {slot}")]
    BadSlot { slot: u32 },
    #[error("trunking: {0}")]
    Trunking(String),
    #[error("no usable connection")]
    NoConnection,
}

impl Error {
    /// The NFS status, when the server answered one.
    pub fn status(&self) -> Option<nfsstat4> {
        match self {
            Error::Nfs { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The session cannot go on (transport gone).
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Error::Io(_) | Error::Closed | Error::NoConnection | Error::Protocol(_)
        )
    }
}

pub type Result<T> = std::result::Result<T, Error>;
