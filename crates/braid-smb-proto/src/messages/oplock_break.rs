//! MS-SMB2 2.2.23 / 2.2.24 / 2.2.25: oplock and lease break notification,
//! acknowledgment and response. All share command OPLOCK_BREAK and are
//! told apart by StructureSize (24 oplock, 36 lease ack/response, 44 lease
//! notification).

use crate::codec::{body_reader, DecodeError, DecodeResult, FileId, Message, Reader, WriteLe};
use crate::header::HEADER_LEN;

pub use super::create::oplock_level;

/// MS-SMB2 2.2.13.2.8: lease states.
pub mod lease_state {
    pub const NONE: u32 = 0x00;
    pub const READ_CACHING: u32 = 0x01;
    pub const HANDLE_CACHING: u32 = 0x02;
    pub const WRITE_CACHING: u32 = 0x04;
}

/// MS-SMB2 2.2.23.2: lease break notification Flags.
pub mod lease_break_flags {
    pub const ACK_REQUIRED: u32 = 0x01;
}

/// MS-SMB2 2.2.23.1 / 2.2.24.1 / 2.2.25.1: oplock break notification,
/// acknowledgment and response all have this layout.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OplockBreak {
    pub oplock_level: u8,
    pub file_id: FileId,
}

pub type OplockBreakNotification = OplockBreak;
pub type OplockBreakAck = OplockBreak;
pub type OplockBreakResponse = OplockBreak;

impl OplockBreak {
    pub const STRUCTURE_SIZE: u16 = 24;
}

impl Message for OplockBreak {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let oplock_level = r.u8()?;
        r.skip(5)?; // Reserved, Reserved2
        Ok(OplockBreak {
            oplock_level,
            file_id: FileId::read(&mut r)?,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.oplock_level);
        out.put_u8(0);
        out.put_u32(0);
        self.file_id.write(out);
    }
}

/// MS-SMB2 2.2.23.2
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaseBreakNotification {
    pub new_epoch: u16,
    pub flags: u32,
    pub lease_key: [u8; 16],
    pub current_lease_state: u32,
    pub new_lease_state: u32,
    pub break_reason: u32,
    pub access_mask_hint: u32,
    pub share_mask_hint: u32,
}

impl LeaseBreakNotification {
    pub const STRUCTURE_SIZE: u16 = 44;
}

impl Message for LeaseBreakNotification {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        Ok(LeaseBreakNotification {
            new_epoch: r.u16()?,
            flags: r.u32()?,
            lease_key: r.array::<16>()?,
            current_lease_state: r.u32()?,
            new_lease_state: r.u32()?,
            break_reason: r.u32()?,
            access_mask_hint: r.u32()?,
            share_mask_hint: r.u32()?,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(self.new_epoch);
        out.put_u32(self.flags);
        out.extend_from_slice(&self.lease_key);
        out.put_u32(self.current_lease_state);
        out.put_u32(self.new_lease_state);
        out.put_u32(self.break_reason);
        out.put_u32(self.access_mask_hint);
        out.put_u32(self.share_mask_hint);
    }
}

/// MS-SMB2 2.2.24.2 (acknowledgment) and 2.2.25.2 (response): same layout.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaseBreakAck {
    pub flags: u32,
    pub lease_key: [u8; 16],
    pub lease_state: u32,
    pub lease_duration: u64,
}

pub type LeaseBreakResponse = LeaseBreakAck;

impl LeaseBreakAck {
    pub const STRUCTURE_SIZE: u16 = 36;
}

impl Message for LeaseBreakAck {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        r.skip(2)?; // Reserved
        Ok(LeaseBreakAck {
            flags: r.u32()?,
            lease_key: r.array::<16>()?,
            lease_state: r.u32()?,
            lease_duration: r.u64()?,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(0);
        out.put_u32(self.flags);
        out.extend_from_slice(&self.lease_key);
        out.put_u32(self.lease_state);
        out.put_u64(self.lease_duration);
    }
}

fn peek_structure_size(msg: &[u8]) -> DecodeResult<u16> {
    Reader::at(msg, HEADER_LEN).u16()
}

/// What a client sends with command OPLOCK_BREAK (server-side decode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OplockBreakRequest {
    Oplock(OplockBreakAck),
    Lease(LeaseBreakAck),
}

impl Message for OplockBreakRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        match peek_structure_size(msg)? {
            OplockBreak::STRUCTURE_SIZE => {
                Ok(OplockBreakRequest::Oplock(OplockBreak::decode(msg)?))
            }
            LeaseBreakAck::STRUCTURE_SIZE => {
                Ok(OplockBreakRequest::Lease(LeaseBreakAck::decode(msg)?))
            }
            _ => Err(DecodeError::Invalid("StructureSize")),
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            OplockBreakRequest::Oplock(m) => m.encode(out),
            OplockBreakRequest::Lease(m) => m.encode(out),
        }
    }
}

/// What a server sends with command OPLOCK_BREAK (client-side decode).
/// An oplock notification and an oplock response share a layout; the
/// header (MessageId 0xFFFFFFFFFFFFFFFF for notifications) tells them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OplockBreakServerMessage {
    Oplock(OplockBreak),
    LeaseNotification(LeaseBreakNotification),
    LeaseResponse(LeaseBreakResponse),
}

impl Message for OplockBreakServerMessage {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        match peek_structure_size(msg)? {
            OplockBreak::STRUCTURE_SIZE => {
                Ok(OplockBreakServerMessage::Oplock(OplockBreak::decode(msg)?))
            }
            LeaseBreakNotification::STRUCTURE_SIZE => Ok(
                OplockBreakServerMessage::LeaseNotification(LeaseBreakNotification::decode(msg)?),
            ),
            LeaseBreakAck::STRUCTURE_SIZE => Ok(OplockBreakServerMessage::LeaseResponse(
                LeaseBreakAck::decode(msg)?,
            )),
            _ => Err(DecodeError::Invalid("StructureSize")),
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            OplockBreakServerMessage::Oplock(m) => m.encode(out),
            OplockBreakServerMessage::LeaseNotification(m) => m.encode(out),
            OplockBreakServerMessage::LeaseResponse(m) => m.encode(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn oplock_round_trips(l in any::<u8>(), p in any::<u64>(), v in any::<u64>()) {
            let m = OplockBreak { oplock_level: l, file_id: FileId { persistent: p, volatile: v } };
            prop_assert_eq!(round_trip(&m).len(), 64 + 24);
            round_trip(&OplockBreakRequest::Oplock(m.clone()));
            round_trip(&OplockBreakServerMessage::Oplock(m));
        }

        #[test]
        fn lease_round_trips(e in any::<u16>(), f in any::<u32>(), k in any::<[u8; 16]>(), s in any::<[u32; 5]>(), d in any::<u64>()) {
            let n = LeaseBreakNotification { new_epoch: e, flags: f, lease_key: k, current_lease_state: s[0],
                new_lease_state: s[1], break_reason: s[2], access_mask_hint: s[3], share_mask_hint: s[4] };
            prop_assert_eq!(round_trip(&n).len(), 64 + 44);
            round_trip(&OplockBreakServerMessage::LeaseNotification(n));
            let a = LeaseBreakAck { flags: f, lease_key: k, lease_state: s[0], lease_duration: d };
            prop_assert_eq!(round_trip(&a).len(), 64 + 36);
            round_trip(&OplockBreakRequest::Lease(a.clone()));
            round_trip(&OplockBreakServerMessage::LeaseResponse(a));
        }
    }
}
