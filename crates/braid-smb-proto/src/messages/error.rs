//! MS-SMB2 2.2.2: SMB2 ERROR response.

use super::wire::{len32, min_buffer};
use crate::codec::{body_reader, DecodeResult, Message, WriteLe};

/// MS-SMB2 2.2.2. `error_data` is the raw ErrorData (error contexts for
/// 3.1.1 when `error_context_count` > 0, or e.g. a symlink error response).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ErrorResponse {
    pub error_context_count: u8,
    pub error_data: Vec<u8>,
}

impl ErrorResponse {
    pub const STRUCTURE_SIZE: u16 = 9;
}

impl Message for ErrorResponse {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let error_context_count = r.u8()?;
        r.skip(1)?;
        let byte_count = r.u32()? as usize;
        // ErrorData follows the fixed part directly; with ByteCount 0 the
        // single padding byte may or may not be present.
        let error_data = r.bytes(byte_count)?.to_vec();
        Ok(ErrorResponse {
            error_context_count,
            error_data,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.error_context_count);
        out.put_u8(0);
        out.put_u32(len32(self.error_data.len(), "ErrorData"));
        out.extend_from_slice(&self.error_data);
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_is_nine_bytes() {
        let v = round_trip(&ErrorResponse::default());
        assert_eq!(&v[64..], &[9, 0, 0, 0, 0, 0, 0, 0, 0]);
        // A peer that omits the padding byte is still understood.
        assert_eq!(
            ErrorResponse::decode(&v[..72]).unwrap(),
            ErrorResponse::default()
        );
    }

    proptest! {
        #[test]
        fn round_trips(c in any::<u8>(), d in proptest::collection::vec(any::<u8>(), 0..100)) {
            round_trip(&ErrorResponse { error_context_count: c, error_data: d });
        }
    }
}
