//! `braid-client`: an async SMB 3.x client on tokio, built on
//! `braid-smb-proto`. It is the engine of `braid bench` and a test tool.
//!
//! * [`Connection`]: one TCP connection, NEGOTIATE (3.1.1 / 3.0.2 / 3.0,
//!   optionally 2.x; preauth integrity, cipher and signing negotiation), a
//!   reader task matching responses to requests by MessageId, a writer
//!   task doing vectored writes, and a credit window so that many tasks can
//!   have many requests in flight at once.
//! * [`Session`]: NTLMv2 over SPNEGO, key derivation, signing (HMAC-SHA256,
//!   AES-CMAC, AES-GMAC), encryption (AES-128/256-GCM/CCM), and
//!   multichannel: [`Session::bind_channel`] binds more connections, and
//!   requests are spread over the live channels ([`ChannelSet`]).
//! * [`Tree`] and [`File`]: share and file operations.
//!
//! ```no_run
//! # async fn demo() -> braid_client::Result<()> {
//! use braid_client::{Connection, Session};
//! let conn = Connection::connect("127.0.0.1:445".parse().unwrap()).await?;
//! let session = Session::setup(conn, "alice", "", "secret").await?;
//! let tree = session.tree_connect("\\\\127.0.0.1\\data").await?;
//! let f = tree.create_file("hello.txt").await?;
//! f.write(0, bytes::Bytes::from_static(b"hi")).await?;
//! f.close().await?;
//! # Ok(()) }
//! ```

mod channel;
mod conn;
mod credits;
mod error;
mod file;
mod info;
mod pool;
mod session;
mod transport;
mod tree;

pub use channel::{Channel, ChannelSet, Policy};
pub use conn::{ClientConfig, Connection, Negotiated};
pub use error::{Error, Result};
pub use file::{File, OpenOptions};
pub use info::{BasicInfo, DirEntry, StandardInfo};
pub use session::Session;
pub use transport::Response;
pub use tree::Tree;

pub use braid_smb_proto::crypto::{Cipher, SigningAlgorithm};
pub use braid_smb_proto::messages::negotiate::dialect;
pub use braid_smb_proto::messages::tree_connect::share_flags::ENCRYPT_DATA as SHARE_FLAG_ENCRYPT_DATA;
pub use braid_smb_proto::messages::NetworkInterfaceInfo;
pub use braid_smb_proto::NtStatus;
