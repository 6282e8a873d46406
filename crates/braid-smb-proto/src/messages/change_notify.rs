//! MS-SMB2 2.2.35 / 2.2.36: SMB2 CHANGE_NOTIFY request and response.

use super::wire::{decode_output_response, encode_output_response};
use crate::codec::{body_reader, DecodeResult, FileId, Message, WriteLe};

/// MS-SMB2 2.2.35: Flags.
pub mod flags {
    pub const WATCH_TREE: u16 = 0x0001;
}

/// MS-SMB2 2.2.35: CompletionFilter.
pub mod completion_filter {
    pub const FILE_NAME: u32 = 0x0000_0001;
    pub const DIR_NAME: u32 = 0x0000_0002;
    pub const ATTRIBUTES: u32 = 0x0000_0004;
    pub const SIZE: u32 = 0x0000_0008;
    pub const LAST_WRITE: u32 = 0x0000_0010;
    pub const LAST_ACCESS: u32 = 0x0000_0020;
    pub const CREATION: u32 = 0x0000_0040;
    pub const EA: u32 = 0x0000_0080;
    pub const SECURITY: u32 = 0x0000_0100;
    pub const STREAM_NAME: u32 = 0x0000_0200;
    pub const STREAM_SIZE: u32 = 0x0000_0400;
    pub const STREAM_WRITE: u32 = 0x0000_0800;
}

/// MS-SMB2 2.2.35
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChangeNotifyRequest {
    pub flags: u16,
    pub output_buffer_length: u32,
    pub file_id: FileId,
    pub completion_filter: u32,
}

impl ChangeNotifyRequest {
    pub const STRUCTURE_SIZE: u16 = 32;
}

impl Message for ChangeNotifyRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let flags = r.u16()?;
        let output_buffer_length = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let completion_filter = r.u32()?;
        r.skip(4)?; // Reserved
        Ok(ChangeNotifyRequest {
            flags,
            output_buffer_length,
            file_id,
            completion_filter,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(self.flags);
        out.put_u32(self.output_buffer_length);
        self.file_id.write(out);
        out.put_u32(self.completion_filter);
        out.put_u32(0);
    }
}

/// MS-SMB2 2.2.36. `output` is a chain of FILE_NOTIFY_INFORMATION
/// (MS-FSCC 2.7.1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChangeNotifyResponse {
    pub output: Vec<u8>,
}

impl ChangeNotifyResponse {
    pub const STRUCTURE_SIZE: u16 = 9;
}

impl Message for ChangeNotifyResponse {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        Ok(ChangeNotifyResponse {
            output: decode_output_response(msg)?,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        encode_output_response(out, &self.output)
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn request_round_trips(f in any::<u16>(), l in any::<u32>(), p in any::<u64>(), v in any::<u64>(), c in any::<u32>()) {
            let b = round_trip(&ChangeNotifyRequest { flags: f, output_buffer_length: l,
                file_id: FileId { persistent: p, volatile: v }, completion_filter: c });
            prop_assert_eq!(b.len(), 64 + 32);
        }

        #[test]
        fn response_round_trips(o in proptest::collection::vec(any::<u8>(), 0..200)) {
            let b = round_trip(&ChangeNotifyResponse { output: o.clone() });
            prop_assert_eq!(&b[66..68], &0x48u16.to_le_bytes());
            prop_assert_eq!(b.len(), 72 + o.len().max(1));
        }
    }
}
