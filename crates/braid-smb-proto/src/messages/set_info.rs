//! MS-SMB2 2.2.39 / 2.2.40: SMB2 SET_INFO request and response.

use super::wire::{empty_message, len16, len32, min_buffer, var_region};
use crate::codec::{body_reader, DecodeResult, FileId, Message, WriteLe};

pub use super::query_info::{info_type, security_information};

/// MS-SMB2 2.2.39
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SetInfoRequest {
    pub info_type: u8,
    pub file_info_class: u8,
    pub buffer: Vec<u8>,
    pub additional_information: u32,
    pub file_id: FileId,
}

impl SetInfoRequest {
    pub const STRUCTURE_SIZE: u16 = 33;
}

impl Message for SetInfoRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let info_type = r.u8()?;
        let file_info_class = r.u8()?;
        let len = r.u32()? as usize;
        let off = r.u16()? as usize;
        r.skip(2)?; // Reserved
        let additional_information = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let buffer = var_region(msg, off, len, Self::STRUCTURE_SIZE, "Buffer")?.to_vec();
        Ok(SetInfoRequest {
            info_type,
            file_info_class,
            buffer,
            additional_information,
            file_id,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.info_type);
        out.put_u8(self.file_info_class);
        out.put_u32(len32(self.buffer.len(), "Buffer"));
        let off_at = out.len();
        out.put_u16(0);
        out.put_u16(0);
        out.put_u32(self.additional_information);
        self.file_id.write(out);
        let off = len16(out.len(), "BufferOffset");
        out.patch_u16(off_at, off);
        out.extend_from_slice(&self.buffer);
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

empty_message!(
    /// MS-SMB2 2.2.40
    SetInfoResponse, 2, 0
);

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn request_round_trips(t in any::<u8>(), c in any::<u8>(), buf in proptest::collection::vec(any::<u8>(), 0..100),
                               a in any::<u32>(), p in any::<u64>(), v in any::<u64>()) {
            let b = round_trip(&SetInfoRequest { info_type: t, file_info_class: c, buffer: buf,
                additional_information: a, file_id: FileId { persistent: p, volatile: v } });
            prop_assert_eq!(&b[64 + 8..64 + 10], &0x60u16.to_le_bytes());
        }
    }

    #[test]
    fn response_round_trips() {
        assert_eq!(round_trip(&SetInfoResponse).len(), 66);
    }
}
