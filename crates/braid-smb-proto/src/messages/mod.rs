//! Typed SMB2 request and response bodies, one file per command
//! (MS-SMB2 2.2). Every type implements [`crate::codec::Message`]: decoders
//! check StructureSize and every offset/length against the message, and
//! never panic; encoders append to a buffer whose first 64 bytes are the
//! header, so offsets they write are header-relative.

mod wire;

pub mod close;
pub mod create;
pub mod echo;
pub mod error;
pub mod flush;
pub mod logoff;
pub mod negotiate;
pub mod read;
pub mod session_setup;
pub mod tree_connect;
pub mod tree_disconnect;
pub mod write;

pub use close::{CloseRequest, CloseResponse};
pub use create::{CreateContext, CreateRequest, CreateResponse};
pub use echo::{EchoRequest, EchoResponse};
pub use error::ErrorResponse;
pub use flush::{FlushRequest, FlushResponse};
pub use logoff::{LogoffRequest, LogoffResponse};
pub use negotiate::{
    parse_smb1_negotiate_dialects, NegotiateContext, NegotiateRequest, NegotiateResponse,
};
pub use read::{encode_read_response_header, ReadRequest, ReadResponse};
pub use session_setup::{SessionSetupRequest, SessionSetupResponse};
pub use tree_connect::{TreeConnectRequest, TreeConnectResponse};
pub use tree_disconnect::{TreeDisconnectRequest, TreeDisconnectResponse};
pub use write::{decode_write_request_ref, WriteRequest, WriteRequestFixed, WriteResponse};
