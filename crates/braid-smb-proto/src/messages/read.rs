//! MS-SMB2 2.2.19 / 2.2.20: SMB2 READ request and response.

use super::wire::{len16, len32, min_buffer, var_region};
use crate::codec::{body_reader, DecodeResult, FileId, Message, WriteLe};
use crate::header::HEADER_LEN;

/// MS-SMB2 2.2.19: request Flags.
pub mod flags {
    pub const READ_UNBUFFERED: u8 = 0x01;
    pub const REQUEST_COMPRESSED: u8 = 0x02;
}

/// MS-SMB2 2.2.19 / 2.2.21: Channel values (READ and WRITE).
pub mod channel {
    pub const NONE: u32 = 0x0000_0000;
    pub const RDMA_V1: u32 = 0x0000_0001;
    pub const RDMA_V1_INVALIDATE: u32 = 0x0000_0002;
    pub const RDMA_TRANSFORM: u32 = 0x0000_0003;
}

/// MS-SMB2 2.2.19
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReadRequest {
    pub padding: u8,
    pub flags: u8,
    pub length: u32,
    pub offset: u64,
    pub file_id: FileId,
    pub minimum_count: u32,
    pub channel: u32,
    pub remaining_bytes: u32,
    pub read_channel_info: Vec<u8>,
}

impl ReadRequest {
    pub const STRUCTURE_SIZE: u16 = 49;
}

impl Message for ReadRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let padding = r.u8()?;
        let flags = r.u8()?;
        let length = r.u32()?;
        let offset = r.u64()?;
        let file_id = FileId::read(&mut r)?;
        let minimum_count = r.u32()?;
        let channel = r.u32()?;
        let remaining_bytes = r.u32()?;
        let ci_off = r.u16()? as usize;
        let ci_len = r.u16()? as usize;
        let read_channel_info =
            var_region(msg, ci_off, ci_len, Self::STRUCTURE_SIZE, "ReadChannelInfo")?.to_vec();
        Ok(ReadRequest {
            padding,
            flags,
            length,
            offset,
            file_id,
            minimum_count,
            channel,
            remaining_bytes,
            read_channel_info,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.padding);
        out.put_u8(self.flags);
        out.put_u32(self.length);
        out.put_u64(self.offset);
        self.file_id.write(out);
        out.put_u32(self.minimum_count);
        out.put_u32(self.channel);
        out.put_u32(self.remaining_bytes);
        let ci_at = out.len();
        out.put_u16(0);
        out.put_u16(0);
        if !self.read_channel_info.is_empty() {
            let off = len16(out.len(), "ReadChannelInfoOffset");
            out.patch_u16(ci_at, off);
            out.patch_u16(
                ci_at + 2,
                len16(self.read_channel_info.len(), "ReadChannelInfo"),
            );
            out.extend_from_slice(&self.read_channel_info);
        }
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

/// DataOffset of a READ response whose data directly follows the 16-byte
/// fixed part: 64 + 16 = 0x50, what Windows sends and clients expect.
pub const READ_RESPONSE_DATA_OFFSET: u8 = 0x50;

/// MS-SMB2 2.2.20. On encode `data` is placed at `data_offset` when that
/// is at least 0x50 (zero padding before it), else at 0x50; the default
/// is 0x50.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResponse {
    pub data_offset: u8,
    pub data_remaining: u32,
    pub data: Vec<u8>,
}

impl Default for ReadResponse {
    fn default() -> Self {
        ReadResponse {
            data_offset: READ_RESPONSE_DATA_OFFSET,
            data_remaining: 0,
            data: Vec::new(),
        }
    }
}

impl ReadResponse {
    pub const STRUCTURE_SIZE: u16 = 17;
}

impl Message for ReadResponse {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let data_offset = r.u8()?;
        r.skip(1)?; // Reserved
        let data_len = r.u32()? as usize;
        let data_remaining = r.u32()?;
        r.skip(4)?; // Reserved2 / Flags
        let data = var_region(
            msg,
            data_offset as usize,
            data_len,
            Self::STRUCTURE_SIZE,
            "Data",
        )?
        .to_vec();
        Ok(ReadResponse {
            data_offset,
            data_remaining,
            data,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        let off_at = out.len();
        out.put_u8(0);
        out.put_u8(0);
        out.put_u32(len32(self.data.len(), "Data"));
        out.put_u32(self.data_remaining);
        out.put_u32(0);
        let want = (self.data_offset as usize).max(READ_RESPONSE_DATA_OFFSET as usize);
        if out.len() < want {
            out.put_zeros(want - out.len());
        }
        let off = u8::try_from(out.len()).expect("READ DataOffset beyond 255");
        out[off_at] = off;
        out.extend_from_slice(&self.data);
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

/// Write the 16-byte READ response body prefix (MS-SMB2 2.2.20) for
/// `data_len` bytes of data that the caller sends as a separate buffer
/// right after it (vectored write, no copy). DataOffset is 0x50, so `out`
/// must hold exactly the 64-byte header. A zero `data_len` still needs
/// the one-byte Buffer: append a zero byte yourself, or use [`ReadResponse`].
pub fn encode_read_response_header(out: &mut Vec<u8>, data_len: u32) {
    debug_assert_eq!(
        out.len(),
        HEADER_LEN,
        "READ response prefix must follow the header directly"
    );
    encode_read_response_header_remaining(out, data_len, 0);
}

/// As [`encode_read_response_header`] with a DataRemaining value.
pub fn encode_read_response_header_remaining(
    out: &mut Vec<u8>,
    data_len: u32,
    data_remaining: u32,
) {
    out.put_u16(ReadResponse::STRUCTURE_SIZE);
    out.put_u8(READ_RESPONSE_DATA_OFFSET);
    out.put_u8(0);
    out.put_u32(data_len);
    out.put_u32(data_remaining);
    out.put_u32(0);
}

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn request_round_trips(pad in any::<u8>(), fl in any::<u8>(), len in any::<u32>(), off in any::<u64>(),
                               p in any::<u64>(), v in any::<u64>(), mc in any::<u32>(), ch in any::<u32>(),
                               rb in any::<u32>(), ci in proptest::collection::vec(any::<u8>(), 0..40)) {
            let m = ReadRequest { padding: pad, flags: fl, length: len, offset: off,
                file_id: FileId { persistent: p, volatile: v }, minimum_count: mc, channel: ch,
                remaining_bytes: rb, read_channel_info: ci.clone() };
            let b = round_trip(&m);
            prop_assert_eq!(b.len(), 64 + 48 + ci.len().max(1));
        }

        #[test]
        fn response_round_trips(extra in 0u8..0x20, rem in any::<u32>(), data in proptest::collection::vec(any::<u8>(), 0..300)) {
            round_trip(&ReadResponse { data_offset: 0x50 + extra, data_remaining: rem, data });
        }
    }

    #[test]
    fn zero_copy_header_matches_full_encoding() {
        let data = vec![7u8; 1000];
        let full = encode(&ReadResponse {
            data: data.clone(),
            data_remaining: 5,
            ..Default::default()
        });
        let mut h = header_buf();
        encode_read_response_header_remaining(&mut h, data.len() as u32, 5);
        assert_eq!(h.len(), 0x50);
        h.extend_from_slice(&data);
        assert_eq!(h, full);
        let mut h = header_buf();
        encode_read_response_header(&mut h, 3);
        assert_eq!(h[64 + 2], 0x50);
    }

    #[test]
    fn rejects_data_past_end_or_in_header() {
        let mut v = encode(&ReadResponse {
            data: vec![1; 10],
            ..Default::default()
        });
        v[64 + 4..64 + 8].copy_from_slice(&11u32.to_le_bytes());
        assert!(ReadResponse::decode(&v).is_err());
        v[64 + 4..64 + 8].copy_from_slice(&10u32.to_le_bytes());
        v[64 + 2] = 0x10;
        assert!(ReadResponse::decode(&v).is_err());
    }
}
