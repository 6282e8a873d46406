//! MS-SMB2 2.2.26 / 2.2.27: SMB2 LOCK request and response.

use super::wire::{empty_message, len16, mul};
use crate::codec::{body_reader, DecodeError, DecodeResult, FileId, Message, Reader, WriteLe};

/// MS-SMB2 2.2.26.1: LockElement Flags.
pub mod flags {
    pub const SHARED_LOCK: u32 = 0x0000_0001;
    pub const EXCLUSIVE_LOCK: u32 = 0x0000_0002;
    pub const UNLOCK: u32 = 0x0000_0004;
    pub const FAIL_IMMEDIATELY: u32 = 0x0000_0010;
}

/// MS-SMB2 2.2.26.1
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LockElement {
    pub offset: u64,
    pub length: u64,
    pub flags: u32,
}

impl LockElement {
    pub const SIZE: usize = 24;
}

/// MS-SMB2 2.2.26. LockSequence is packed on the wire as
/// `lock_sequence_index << 4 | lock_sequence_number` (number: low 4 bits,
/// index: high 28 bits); the encoder masks both to their widths.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LockRequest {
    pub lock_sequence_number: u8,
    pub lock_sequence_index: u32,
    pub file_id: FileId,
    pub locks: Vec<LockElement>,
}

impl LockRequest {
    pub const STRUCTURE_SIZE: u16 = 48;
}

impl Message for LockRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let count = r.u16()? as usize;
        let seq = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        // MS-SMB2 3.3.5.14: LockCount 0 is STATUS_INVALID_PARAMETER.
        if count == 0 {
            return Err(DecodeError::Invalid("LockCount"));
        }
        let bytes = r.bytes(mul(count, LockElement::SIZE, "Locks")?)?;
        let mut lr = Reader::new(bytes);
        let mut locks = Vec::with_capacity(count);
        for _ in 0..count {
            let offset = lr.u64()?;
            let length = lr.u64()?;
            let flags = lr.u32()?;
            lr.skip(4)?; // Reserved
            locks.push(LockElement {
                offset,
                length,
                flags,
            });
        }
        Ok(LockRequest {
            lock_sequence_number: (seq & 0xF) as u8,
            lock_sequence_index: seq >> 4,
            file_id,
            locks,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(len16(self.locks.len(), "Locks"));
        out.put_u32((self.lock_sequence_index << 4) | (self.lock_sequence_number as u32 & 0xF));
        self.file_id.write(out);
        for l in &self.locks {
            out.put_u64(l.offset);
            out.put_u64(l.length);
            out.put_u32(l.flags);
            out.put_u32(0);
        }
        if self.locks.is_empty() {
            out.put_zeros(LockElement::SIZE);
        }
    }
}

empty_message!(
    /// MS-SMB2 2.2.27
    LockResponse, 4, 2
);

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn request_round_trips(n in 0u8..16, i in 0u32..(1 << 28), p in any::<u64>(), v in any::<u64>(),
                               locks in proptest::collection::vec(any::<(u64, u64, u32)>(), 1..8)) {
            let m = LockRequest { lock_sequence_number: n, lock_sequence_index: i,
                file_id: FileId { persistent: p, volatile: v },
                locks: locks.into_iter().map(|(offset, length, flags)| LockElement { offset, length, flags }).collect() };
            let b = round_trip(&m);
            prop_assert_eq!(b.len(), 64 + 24 + 24 * m.locks.len());
        }
    }

    #[test]
    fn sequence_packing() {
        let m = LockRequest {
            lock_sequence_number: 0x3,
            lock_sequence_index: 0x40,
            locks: vec![LockElement {
                offset: 0,
                length: 1,
                flags: flags::EXCLUSIVE_LOCK,
            }],
            ..Default::default()
        };
        let b = encode(&m);
        assert_eq!(&b[68..72], &0x403u32.to_le_bytes());
        assert_eq!(round_trip(&LockResponse).len(), 68);
    }

    #[test]
    fn rejects_zero_and_overlong_counts() {
        let m = LockRequest {
            locks: vec![LockElement::default()],
            ..Default::default()
        };
        let mut b = encode(&m);
        b[66..68].copy_from_slice(&0u16.to_le_bytes());
        assert!(LockRequest::decode(&b).is_err());
        b[66..68].copy_from_slice(&2u16.to_le_bytes());
        assert!(LockRequest::decode(&b).is_err());
    }
}
