//! MS-SMB2 2.2.21 / 2.2.22: SMB2 WRITE request and response.

use super::wire::{fixed_end, len16, len32, min_buffer, var_region};
use crate::codec::{body_reader, DecodeError, DecodeResult, FileId, Message, WriteLe};
use std::ops::Range;

pub use super::read::channel;

/// MS-SMB2 2.2.21: Flags.
pub mod flags {
    pub const WRITE_THROUGH: u32 = 0x0000_0001;
    pub const WRITE_UNBUFFERED: u32 = 0x0000_0002;
}

/// DataOffset of a WRITE request whose data directly follows the 48-byte
/// fixed part (64 + 48 = 0x70).
pub const WRITE_REQUEST_DATA_OFFSET: u16 = 0x70;

/// The fixed fields of a WRITE request, as returned by
/// [`decode_write_request_ref`]; `write_channel_info` is the checked range
/// of WriteChannelInfo within the message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteRequestFixed {
    pub data_offset: u16,
    pub length: u32,
    pub offset: u64,
    pub file_id: FileId,
    pub channel: u32,
    pub remaining_bytes: u32,
    pub write_channel_info: Range<usize>,
    pub flags: u32,
}

fn checked_range(
    msg: &[u8],
    off: usize,
    len: usize,
    what: &'static str,
) -> DecodeResult<Range<usize>> {
    if len == 0 {
        return Ok(0..0);
    }
    var_region(msg, off, len, WriteRequest::STRUCTURE_SIZE, what)?;
    Ok(off..off + len)
}

/// Zero-copy decode of a WRITE request: the fixed fields and the range of
/// the data within `msg` (checked against `msg`; empty range when Length
/// is 0), so a large payload is never copied.
pub fn decode_write_request_ref(msg: &[u8]) -> DecodeResult<(WriteRequestFixed, Range<usize>)> {
    let mut r = body_reader(msg, WriteRequest::STRUCTURE_SIZE)?;
    let data_offset = r.u16()?;
    let length = r.u32()?;
    let offset = r.u64()?;
    let file_id = FileId::read(&mut r)?;
    let channel = r.u32()?;
    let remaining_bytes = r.u32()?;
    let ci_off = r.u16()? as usize;
    let ci_len = r.u16()? as usize;
    let flags = r.u32()?;
    let data = checked_range(msg, data_offset as usize, length as usize, "Data")?;
    let write_channel_info = checked_range(msg, ci_off, ci_len, "WriteChannelInfo")?;
    if data.start != 0 && data.start < fixed_end(WriteRequest::STRUCTURE_SIZE) {
        return Err(DecodeError::OutOfBounds("Data"));
    }
    Ok((
        WriteRequestFixed {
            data_offset,
            length,
            offset,
            file_id,
            channel,
            remaining_bytes,
            write_channel_info,
            flags,
        },
        data,
    ))
}

/// MS-SMB2 2.2.21. On encode, WriteChannelInfo (if any) comes first after
/// the fixed part, then `data` at `data_offset` or the first byte after the
/// channel info, whichever is later; the written DataOffset is where the
/// data actually went. The default `data_offset` is 0x70.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRequest {
    pub data_offset: u16,
    pub offset: u64,
    pub file_id: FileId,
    pub channel: u32,
    pub remaining_bytes: u32,
    pub write_channel_info: Vec<u8>,
    pub flags: u32,
    pub data: Vec<u8>,
}

impl Default for WriteRequest {
    fn default() -> Self {
        WriteRequest {
            data_offset: WRITE_REQUEST_DATA_OFFSET,
            offset: 0,
            file_id: FileId::default(),
            channel: 0,
            remaining_bytes: 0,
            write_channel_info: Vec::new(),
            flags: 0,
            data: Vec::new(),
        }
    }
}

impl WriteRequest {
    pub const STRUCTURE_SIZE: u16 = 49;
}

impl Message for WriteRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let (f, data) = decode_write_request_ref(msg)?;
        Ok(WriteRequest {
            data_offset: f.data_offset,
            offset: f.offset,
            file_id: f.file_id,
            channel: f.channel,
            remaining_bytes: f.remaining_bytes,
            write_channel_info: msg[f.write_channel_info].to_vec(),
            flags: f.flags,
            data: msg[data].to_vec(),
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        let data_off_at = out.len();
        out.put_u16(0);
        out.put_u32(len32(self.data.len(), "Data"));
        out.put_u64(self.offset);
        self.file_id.write(out);
        out.put_u32(self.channel);
        out.put_u32(self.remaining_bytes);
        let ci_at = out.len();
        out.put_u16(0);
        out.put_u16(0);
        out.put_u32(self.flags);
        if !self.write_channel_info.is_empty() {
            let off = len16(out.len(), "WriteChannelInfoOffset");
            out.patch_u16(ci_at, off);
            out.patch_u16(
                ci_at + 2,
                len16(self.write_channel_info.len(), "WriteChannelInfo"),
            );
            out.extend_from_slice(&self.write_channel_info);
        }
        let want = self.data_offset as usize;
        if out.len() < want {
            out.put_zeros(want - out.len());
        }
        let off = len16(out.len(), "DataOffset");
        out.patch_u16(data_off_at, off);
        out.extend_from_slice(&self.data);
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

/// MS-SMB2 2.2.22 (WriteChannelInfo is reserved in responses).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteResponse {
    pub count: u32,
    pub remaining: u32,
}

impl WriteResponse {
    pub const STRUCTURE_SIZE: u16 = 17;
}

impl Message for WriteResponse {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        r.skip(2)?; // Reserved
        let count = r.u32()?;
        let remaining = r.u32()?;
        r.skip(4)?; // WriteChannelInfoOffset/Length
        Ok(WriteResponse { count, remaining })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(0);
        out.put_u32(self.count);
        out.put_u32(self.remaining);
        out.put_u32(0);
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn request_round_trips(off in any::<u64>(), p in any::<u64>(), v in any::<u64>(), ch in any::<u32>(),
                               rb in any::<u32>(), fl in any::<u32>(), extra in 0u16..16,
                               ci in proptest::collection::vec(any::<u8>(), 0..30),
                               data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let m = WriteRequest { data_offset: 0x70 + ci.len() as u16 + extra, offset: off,
                file_id: FileId { persistent: p, volatile: v }, channel: ch, remaining_bytes: rb,
                write_channel_info: ci, flags: fl, data };
            let b = round_trip(&m);
            let (f, range) = decode_write_request_ref(&b).unwrap();
            prop_assert_eq!(&b[range], &m.data[..]);
            prop_assert_eq!(f.length as usize, m.data.len());
        }

        #[test]
        fn response_round_trips(c in any::<u32>(), r in any::<u32>()) {
            let b = round_trip(&WriteResponse { count: c, remaining: r });
            prop_assert_eq!(b.len(), 64 + 17);
        }
    }

    #[test]
    fn default_layout() {
        let b = round_trip(&WriteRequest {
            data: vec![1, 2, 3],
            ..Default::default()
        });
        assert_eq!(&b[66..68], &0x70u16.to_le_bytes());
        assert_eq!(&b[0x70..], &[1, 2, 3]);
        // A WriteResponse without the padding byte is accepted.
        assert_eq!(
            WriteResponse::decode(&encode(&WriteResponse::default())[..80]).unwrap(),
            WriteResponse::default()
        );
    }

    #[test]
    fn rejects_data_overlapping_fixed_part_or_past_end() {
        let mut b = encode(&WriteRequest {
            data: vec![1, 2, 3],
            ..Default::default()
        });
        b[66..68].copy_from_slice(&0x40u16.to_le_bytes());
        assert!(decode_write_request_ref(&b).is_err());
        b[66..68].copy_from_slice(&0x70u16.to_le_bytes());
        b[68..72].copy_from_slice(&4u32.to_le_bytes());
        assert!(decode_write_request_ref(&b).is_err());
    }
}
