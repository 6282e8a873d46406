//! Typed SMB2 request and response bodies, one file per command
//! (MS-SMB2 2.2). Every type implements [`crate::codec::Message`]: decoders
//! check StructureSize and every offset/length against the message (and
//! that a non-empty variable part does not overlap the header or the fixed
//! part), and never panic; encoders append to a buffer whose first 64 bytes
//! are the header, so the offsets they write are header-relative.
//!
//! Decoders do not reject bytes after the message: a compounded request is
//! padded to 8 bytes before the next one, and that padding is the caller's
//! to slice off (or not) using NextCommand.

mod wire;

pub mod aapl;
pub mod cancel;
pub mod change_notify;
pub mod close;
pub mod create;
pub mod durable;
pub mod echo;
pub mod error;
pub mod flush;
pub mod fsctl_data;
pub mod ioctl;
pub mod lease;
pub mod lock;
pub mod logoff;
pub mod negotiate;
pub mod oplock_break;
pub mod query_directory;
pub mod query_info;
pub mod read;
pub mod session_setup;
pub mod set_info;
pub mod snapshots;
pub mod tree_connect;
pub mod tree_disconnect;
pub mod write;

pub use cancel::CancelRequest;
pub use change_notify::{ChangeNotifyRequest, ChangeNotifyResponse};
pub use close::{CloseRequest, CloseResponse};
pub use create::{CreateContext, CreateRequest, CreateResponse};
pub use echo::{EchoRequest, EchoResponse};
pub use error::ErrorResponse;
pub use flush::{FlushRequest, FlushResponse};
pub use ioctl::{
    IoctlRequest, IoctlResponse, NetworkInterfaceInfo, ValidateNegotiateInfoRequest,
    ValidateNegotiateInfoResponse,
};
pub use lock::{LockElement, LockRequest, LockResponse};
pub use logoff::{LogoffRequest, LogoffResponse};
pub use negotiate::{
    parse_smb1_negotiate_dialects, NegotiateContext, NegotiateRequest, NegotiateResponse,
};
pub use oplock_break::{
    LeaseBreakAck, LeaseBreakNotification, LeaseBreakResponse, OplockBreak, OplockBreakRequest,
    OplockBreakServerMessage,
};
pub use query_directory::{QueryDirectoryRequest, QueryDirectoryResponse};
pub use query_info::{QueryInfoRequest, QueryInfoResponse};
pub use read::{encode_read_response_header, ReadRequest, ReadResponse};
pub use session_setup::{SessionSetupRequest, SessionSetupResponse};
pub use set_info::{SetInfoRequest, SetInfoResponse};
pub use tree_connect::{TreeConnectRequest, TreeConnectResponse};
pub use tree_disconnect::{TreeDisconnectRequest, TreeDisconnectResponse};
pub use write::{decode_write_request_ref, WriteRequest, WriteRequestFixed, WriteResponse};

#[cfg(test)]
mod tests {
    use super::wire::test_util::header_buf;
    use super::*;
    use crate::codec::{DecodeResult, Message};
    use proptest::prelude::*;

    type Decoder = fn(&[u8]) -> DecodeResult<()>;

    fn d<M: Message>(msg: &[u8]) -> DecodeResult<()> {
        M::decode(msg).map(|_| ())
    }

    /// Every request and response decoder with the StructureSize it expects.
    fn decoders() -> Vec<(Decoder, u16)> {
        vec![
            (d::<NegotiateRequest>, 36),
            (d::<NegotiateResponse>, 65),
            (d::<SessionSetupRequest>, 25),
            (d::<SessionSetupResponse>, 9),
            (d::<LogoffRequest>, 4),
            (d::<LogoffResponse>, 4),
            (d::<TreeConnectRequest>, 9),
            (d::<TreeConnectResponse>, 16),
            (d::<TreeDisconnectRequest>, 4),
            (d::<TreeDisconnectResponse>, 4),
            (d::<CreateRequest>, 57),
            (d::<CreateResponse>, 89),
            (d::<CloseRequest>, 24),
            (d::<CloseResponse>, 60),
            (d::<FlushRequest>, 24),
            (d::<FlushResponse>, 4),
            (d::<ReadRequest>, 49),
            (d::<ReadResponse>, 17),
            (d::<WriteRequest>, 49),
            (|m| decode_write_request_ref(m).map(|_| ()), 49),
            (d::<WriteResponse>, 17),
            (d::<LockRequest>, 48),
            (d::<LockResponse>, 4),
            (d::<IoctlRequest>, 57),
            (d::<IoctlResponse>, 49),
            (d::<CancelRequest>, 4),
            (d::<EchoRequest>, 4),
            (d::<EchoResponse>, 4),
            (d::<QueryDirectoryRequest>, 33),
            (d::<QueryDirectoryResponse>, 9),
            (d::<ChangeNotifyRequest>, 32),
            (d::<ChangeNotifyResponse>, 9),
            (d::<QueryInfoRequest>, 41),
            (d::<QueryInfoResponse>, 9),
            (d::<SetInfoRequest>, 33),
            (d::<SetInfoResponse>, 2),
            (d::<OplockBreak>, 24),
            (d::<LeaseBreakNotification>, 44),
            (d::<LeaseBreakAck>, 36),
            (d::<OplockBreakRequest>, 24),
            (d::<OplockBreakRequest>, 36),
            (d::<OplockBreakServerMessage>, 44),
            (d::<ErrorResponse>, 9),
        ]
    }

    /// Offsets in the generated body are biased towards plausible values
    /// (just past the fixed part) so that the variable-part checks, not
    /// only the StructureSize check, are exercised.
    fn plausible_body() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            prop_oneof![
                4 => any::<u8>(),
                2 => Just(0u8),
                1 => 0x40u8..0xA0,
                1 => 1u8..16,
                1 => Just(0xFFu8),
            ],
            0..400,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn decoders_never_panic(body in plausible_body()) {
            for (decode, size) in decoders() {
                // Raw bytes after the header ...
                let mut m = header_buf();
                m.extend_from_slice(&body);
                let _ = decode(&m);
                // ... and the same bytes behind a valid StructureSize.
                let mut m = header_buf();
                m.extend_from_slice(&size.to_le_bytes());
                m.extend_from_slice(&body);
                let _ = decode(&m);
                // Truncations of it.
                for cut in [0, 1, 2, 7, 64, 65, 66, 80] {
                    let _ = decode(&m[..cut.min(m.len())]);
                }
            }
        }
    }

    #[test]
    fn every_decoder_rejects_wrong_structure_size() {
        for (decode, size) in decoders() {
            let mut m = header_buf();
            m.extend_from_slice(&size.wrapping_add(2).to_le_bytes());
            m.extend_from_slice(&[0u8; 200]);
            assert!(decode(&m).is_err(), "StructureSize {size} + 2 accepted");
        }
    }
}
