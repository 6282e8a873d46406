//! MS-SMB2 2.2.15 / 2.2.16: SMB2 CLOSE request and response.

use crate::codec::{body_reader, DecodeResult, FileId, Message, WriteLe};

/// MS-SMB2 2.2.15: Flags.
pub mod flags {
    pub const POSTQUERY_ATTRIB: u16 = 0x0001;
}

/// MS-SMB2 2.2.15
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CloseRequest {
    pub flags: u16,
    pub file_id: FileId,
}

impl CloseRequest {
    pub const STRUCTURE_SIZE: u16 = 24;
}

impl Message for CloseRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let flags = r.u16()?;
        r.skip(4)?; // Reserved
        Ok(CloseRequest {
            flags,
            file_id: FileId::read(&mut r)?,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(self.flags);
        out.put_u32(0);
        self.file_id.write(out);
    }
}

/// MS-SMB2 2.2.16. The attribute fields are zero unless the request had
/// POSTQUERY_ATTRIB and `flags` echoes it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CloseResponse {
    pub flags: u16,
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub allocation_size: u64,
    pub end_of_file: u64,
    pub file_attributes: u32,
}

impl CloseResponse {
    pub const STRUCTURE_SIZE: u16 = 60;
}

impl Message for CloseResponse {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let flags = r.u16()?;
        r.skip(4)?; // Reserved
        Ok(CloseResponse {
            flags,
            creation_time: r.u64()?,
            last_access_time: r.u64()?,
            last_write_time: r.u64()?,
            change_time: r.u64()?,
            allocation_size: r.u64()?,
            end_of_file: r.u64()?,
            file_attributes: r.u32()?,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(self.flags);
        out.put_u32(0);
        out.put_u64(self.creation_time);
        out.put_u64(self.last_access_time);
        out.put_u64(self.last_write_time);
        out.put_u64(self.change_time);
        out.put_u64(self.allocation_size);
        out.put_u64(self.end_of_file);
        out.put_u32(self.file_attributes);
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn request_round_trips(f in any::<u16>(), p in any::<u64>(), v in any::<u64>()) {
            let b = round_trip(&CloseRequest { flags: f, file_id: FileId { persistent: p, volatile: v } });
            prop_assert_eq!(b.len(), 64 + 24);
        }

        #[test]
        fn response_round_trips(f in any::<u16>(), t in any::<[u64; 6]>(), a in any::<u32>()) {
            let m = CloseResponse { flags: f, creation_time: t[0], last_access_time: t[1], last_write_time: t[2],
                change_time: t[3], allocation_size: t[4], end_of_file: t[5], file_attributes: a };
            let b = round_trip(&m);
            prop_assert_eq!(b.len(), 64 + 60);
        }
    }
}
