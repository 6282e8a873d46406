//! MS-SMB2 2.2.5 / 2.2.6: SMB2 SESSION_SETUP request and response.

use super::wire::{len16, min_buffer, var_region};
use crate::codec::{body_reader, DecodeResult, Message, WriteLe};

/// MS-SMB2 2.2.5: request Flags.
pub mod flags {
    pub const BINDING: u8 = 0x01;
}

/// MS-SMB2 2.2.6: SessionFlags.
pub mod session_flags {
    pub const IS_GUEST: u16 = 0x0001;
    pub const IS_NULL: u16 = 0x0002;
    pub const ENCRYPT_DATA: u16 = 0x0004;
}

/// MS-SMB2 2.2.5
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionSetupRequest {
    pub flags: u8,
    pub security_mode: u8,
    pub capabilities: u32,
    pub channel: u32,
    pub previous_session_id: u64,
    pub security_buffer: Vec<u8>,
}

impl SessionSetupRequest {
    pub const STRUCTURE_SIZE: u16 = 25;
}

impl Message for SessionSetupRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let flags = r.u8()?;
        let security_mode = r.u8()?;
        let capabilities = r.u32()?;
        let channel = r.u32()?;
        let off = r.u16()? as usize;
        let len = r.u16()? as usize;
        let previous_session_id = r.u64()?;
        let security_buffer =
            var_region(msg, off, len, Self::STRUCTURE_SIZE, "SecurityBuffer")?.to_vec();
        Ok(SessionSetupRequest {
            flags,
            security_mode,
            capabilities,
            channel,
            previous_session_id,
            security_buffer,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.flags);
        out.put_u8(self.security_mode);
        out.put_u32(self.capabilities);
        out.put_u32(self.channel);
        let off_at = out.len();
        out.put_u16(0);
        out.put_u16(len16(self.security_buffer.len(), "SecurityBuffer"));
        out.put_u64(self.previous_session_id);
        let off = len16(out.len(), "SecurityBufferOffset");
        out.patch_u16(off_at, off);
        out.extend_from_slice(&self.security_buffer);
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

/// MS-SMB2 2.2.6
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionSetupResponse {
    pub session_flags: u16,
    pub security_buffer: Vec<u8>,
}

impl SessionSetupResponse {
    pub const STRUCTURE_SIZE: u16 = 9;
}

impl Message for SessionSetupResponse {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let session_flags = r.u16()?;
        let off = r.u16()? as usize;
        let len = r.u16()? as usize;
        let security_buffer =
            var_region(msg, off, len, Self::STRUCTURE_SIZE, "SecurityBuffer")?.to_vec();
        Ok(SessionSetupResponse {
            session_flags,
            security_buffer,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(self.session_flags);
        let off_at = out.len();
        out.put_u16(0);
        out.put_u16(len16(self.security_buffer.len(), "SecurityBuffer"));
        let off = len16(out.len(), "SecurityBufferOffset");
        out.patch_u16(off_at, off);
        out.extend_from_slice(&self.security_buffer);
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
        fn request_round_trips(flags in any::<u8>(), sm in any::<u8>(), caps in any::<u32>(), ch in any::<u32>(),
                               prev in any::<u64>(), sb in proptest::collection::vec(any::<u8>(), 0..300)) {
            let m = SessionSetupRequest { flags, security_mode: sm, capabilities: caps, channel: ch,
                previous_session_id: prev, security_buffer: sb.clone() };
            let v = round_trip(&m);
            prop_assert_eq!(v.len(), 88 + sb.len().max(1));
        }

        #[test]
        fn response_round_trips(f in any::<u16>(), sb in proptest::collection::vec(any::<u8>(), 0..300)) {
            let v = round_trip(&SessionSetupResponse { session_flags: f, security_buffer: sb });
            // SecurityBufferOffset = 0x48
            prop_assert_eq!(&v[68..70], &0x48u16.to_le_bytes());
        }
    }

    #[test]
    fn rejects_buffer_past_end() {
        let mut v = encode(&SessionSetupRequest {
            security_buffer: vec![1, 2, 3],
            ..Default::default()
        });
        v[64 + 14..64 + 16].copy_from_slice(&4u16.to_le_bytes());
        assert!(SessionSetupRequest::decode(&v).is_err());
    }
}
