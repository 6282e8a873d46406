//! MS-SMB2 2.2.37 / 2.2.38: SMB2 QUERY_INFO request and response.

use super::wire::{
    decode_output_response, encode_output_response, len16, len32, min_buffer, var_region,
};
use crate::codec::{body_reader, DecodeResult, FileId, Message, WriteLe};

/// MS-SMB2 2.2.37: InfoType (also used by SET_INFO).
pub mod info_type {
    pub const FILE: u8 = 0x01;
    pub const FILESYSTEM: u8 = 0x02;
    pub const SECURITY: u8 = 0x03;
    pub const QUOTA: u8 = 0x04;
}

/// MS-SMB2 2.2.37: AdditionalInformation for SECURITY queries and sets.
pub mod security_information {
    pub const OWNER: u32 = 0x0000_0001;
    pub const GROUP: u32 = 0x0000_0002;
    pub const DACL: u32 = 0x0000_0004;
    pub const SACL: u32 = 0x0000_0008;
    pub const LABEL: u32 = 0x0000_0010;
    pub const ATTRIBUTE: u32 = 0x0000_0020;
    pub const SCOPE: u32 = 0x0000_0040;
    pub const BACKUP: u32 = 0x0001_0000;
}

/// MS-SMB2 2.2.37: Flags.
pub mod flags {
    pub const RESTART_SCAN: u32 = 0x0000_0001;
    pub const RETURN_SINGLE_ENTRY: u32 = 0x0000_0002;
    pub const INDEX_SPECIFIED: u32 = 0x0000_0004;
}

/// MS-SMB2 2.2.37
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryInfoRequest {
    pub info_type: u8,
    pub file_info_class: u8,
    pub output_buffer_length: u32,
    pub input: Vec<u8>,
    pub additional_information: u32,
    pub flags: u32,
    pub file_id: FileId,
}

impl QueryInfoRequest {
    pub const STRUCTURE_SIZE: u16 = 41;
}

impl Message for QueryInfoRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let info_type = r.u8()?;
        let file_info_class = r.u8()?;
        let output_buffer_length = r.u32()?;
        let in_off = r.u16()? as usize;
        r.skip(2)?; // Reserved
        let in_len = r.u32()? as usize;
        let additional_information = r.u32()?;
        let flags = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let input = var_region(msg, in_off, in_len, Self::STRUCTURE_SIZE, "InputBuffer")?.to_vec();
        Ok(QueryInfoRequest {
            info_type,
            file_info_class,
            output_buffer_length,
            input,
            additional_information,
            flags,
            file_id,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.info_type);
        out.put_u8(self.file_info_class);
        out.put_u32(self.output_buffer_length);
        let in_at = out.len();
        out.put_u16(0);
        out.put_u16(0);
        out.put_u32(len32(self.input.len(), "InputBuffer"));
        out.put_u32(self.additional_information);
        out.put_u32(self.flags);
        self.file_id.write(out);
        if !self.input.is_empty() {
            let off = len16(out.len(), "InputBufferOffset");
            out.patch_u16(in_at, off);
            out.extend_from_slice(&self.input);
        }
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

/// MS-SMB2 2.2.38
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryInfoResponse {
    pub output: Vec<u8>,
}

impl QueryInfoResponse {
    pub const STRUCTURE_SIZE: u16 = 9;
}

impl Message for QueryInfoResponse {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        Ok(QueryInfoResponse {
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
        fn request_round_trips(t in any::<u8>(), c in any::<u8>(), l in any::<u32>(),
                               input in proptest::collection::vec(any::<u8>(), 0..100),
                               a in any::<u32>(), f in any::<u32>(), p in any::<u64>(), v in any::<u64>()) {
            let b = round_trip(&QueryInfoRequest { info_type: t, file_info_class: c, output_buffer_length: l,
                input: input.clone(), additional_information: a, flags: f, file_id: FileId { persistent: p, volatile: v } });
            prop_assert_eq!(b.len(), 64 + 40 + input.len().max(1));
        }

        #[test]
        fn response_round_trips(o in proptest::collection::vec(any::<u8>(), 0..200)) {
            round_trip(&QueryInfoResponse { output: o });
        }
    }
}
