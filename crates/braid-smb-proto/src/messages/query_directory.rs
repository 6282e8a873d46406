//! MS-SMB2 2.2.33 / 2.2.34: SMB2 QUERY_DIRECTORY request and response.

use super::wire::{decode_output_response, encode_output_response, len16, min_buffer, var_region};
use crate::codec::{
    body_reader, put_utf16le, utf16le_to_string, DecodeResult, FileId, Message, WriteLe,
};

/// MS-SMB2 2.2.33: Flags.
pub mod flags {
    pub const RESTART_SCANS: u8 = 0x01;
    pub const RETURN_SINGLE_ENTRY: u8 = 0x02;
    pub const INDEX_SPECIFIED: u8 = 0x04;
    pub const REOPEN: u8 = 0x10;
}

/// MS-SMB2 2.2.33: FileInformationClass values allowed here (MS-FSCC 2.4).
pub mod info_class {
    pub const FILE_DIRECTORY_INFORMATION: u8 = 0x01;
    pub const FILE_FULL_DIRECTORY_INFORMATION: u8 = 0x02;
    pub const FILE_BOTH_DIRECTORY_INFORMATION: u8 = 0x03;
    pub const FILE_NAMES_INFORMATION: u8 = 0x0C;
    pub const FILE_ID_BOTH_DIRECTORY_INFORMATION: u8 = 0x25;
    pub const FILE_ID_FULL_DIRECTORY_INFORMATION: u8 = 0x26;
    pub const FILE_ID_EXTD_DIRECTORY_INFORMATION: u8 = 0x3C;
    pub const FILE_ID_EXTD_BOTH_DIRECTORY_INFORMATION: u8 = 0x3F;
}

/// MS-SMB2 2.2.33. `file_name` is the search pattern ("*" for all).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryDirectoryRequest {
    pub file_information_class: u8,
    pub flags: u8,
    pub file_index: u32,
    pub file_id: FileId,
    pub file_name: String,
    pub output_buffer_length: u32,
}

impl QueryDirectoryRequest {
    pub const STRUCTURE_SIZE: u16 = 33;
}

impl Message for QueryDirectoryRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let file_information_class = r.u8()?;
        let flags = r.u8()?;
        let file_index = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let off = r.u16()? as usize;
        let len = r.u16()? as usize;
        let output_buffer_length = r.u32()?;
        let file_name =
            utf16le_to_string(var_region(msg, off, len, Self::STRUCTURE_SIZE, "FileName")?)?;
        Ok(QueryDirectoryRequest {
            file_information_class,
            flags,
            file_index,
            file_id,
            file_name,
            output_buffer_length,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.file_information_class);
        out.put_u8(self.flags);
        out.put_u32(self.file_index);
        self.file_id.write(out);
        let name_at = out.len();
        out.put_u16(0);
        out.put_u16(0);
        out.put_u32(self.output_buffer_length);
        let start = out.len();
        put_utf16le(out, &self.file_name);
        let len = len16(out.len() - start, "FileName");
        out.patch_u16(name_at, len16(start, "FileNameOffset"));
        out.patch_u16(name_at + 2, len);
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

/// MS-SMB2 2.2.34. `output` holds the directory entries in the requested
/// information class.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryDirectoryResponse {
    pub output: Vec<u8>,
}

impl QueryDirectoryResponse {
    pub const STRUCTURE_SIZE: u16 = 9;
}

impl Message for QueryDirectoryResponse {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        Ok(QueryDirectoryResponse {
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
        fn request_round_trips(c in any::<u8>(), f in any::<u8>(), i in any::<u32>(), p in any::<u64>(),
                               v in any::<u64>(), name in "\\PC{0,30}", l in any::<u32>()) {
            let b = round_trip(&QueryDirectoryRequest { file_information_class: c, flags: f, file_index: i,
                file_id: FileId { persistent: p, volatile: v }, file_name: name, output_buffer_length: l });
            prop_assert_eq!(&b[64 + 24..64 + 26], &0x60u16.to_le_bytes());
        }

        #[test]
        fn response_round_trips(o in proptest::collection::vec(any::<u8>(), 0..200)) {
            round_trip(&QueryDirectoryResponse { output: o });
        }
    }
}
