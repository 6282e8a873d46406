//! MS-SMB2 2.2.17 / 2.2.18: SMB2 FLUSH request and response.

use super::wire::empty_message;
use crate::codec::{body_reader, DecodeResult, FileId, Message, WriteLe};

/// MS-SMB2 2.2.17
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FlushRequest {
    pub file_id: FileId,
}

impl FlushRequest {
    pub const STRUCTURE_SIZE: u16 = 24;
}

impl Message for FlushRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        r.skip(6)?; // Reserved1, Reserved2
        Ok(FlushRequest {
            file_id: FileId::read(&mut r)?,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_zeros(6);
        self.file_id.write(out);
    }
}

empty_message!(
    /// MS-SMB2 2.2.18
    FlushResponse, 4, 2
);

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn request_round_trips(p in any::<u64>(), v in any::<u64>()) {
            let b = round_trip(&FlushRequest { file_id: FileId { persistent: p, volatile: v } });
            prop_assert_eq!(b.len(), 64 + 24);
        }
    }

    #[test]
    fn response_round_trips() {
        assert_eq!(round_trip(&FlushResponse).len(), 68);
    }
}
