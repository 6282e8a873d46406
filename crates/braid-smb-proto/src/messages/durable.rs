//! Durable handle create contexts: MS-SMB2 2.2.13.2.3 / 2.2.13.2.4 (DHnQ,
//! DHnC), 2.2.13.2.11 / 2.2.13.2.12 (DH2Q, DH2C) and their responses
//! 2.2.14.2.3 / 2.2.14.2.12.

use crate::codec::{DecodeError, DecodeResult, FileId, Reader, WriteLe};

/// MS-SMB2 2.2.13.2.11: SMB2_DHANDLE_FLAG_PERSISTENT.
pub const FLAG_PERSISTENT: u32 = 0x0000_0002;

/// DHnQ request data: 16 reserved bytes.
pub const V1_REQUEST_LEN: usize = 16;
/// DHnQ response data: 8 reserved bytes.
pub const V1_RESPONSE_LEN: usize = 8;

/// MS-SMB2 2.2.13.2.4: the open being reestablished (DHnC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableReconnect {
    pub file_id: FileId,
}

impl DurableReconnect {
    pub fn decode(data: &[u8]) -> DecodeResult<Self> {
        if data.len() != 16 {
            return Err(DecodeError::Invalid("DHnC DataLength"));
        }
        Ok(DurableReconnect {
            file_id: FileId::read(&mut Reader::new(data))?,
        })
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16);
        self.file_id.write(&mut out);
        out
    }
}

/// MS-SMB2 2.2.13.2.11: DH2Q request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DurableRequestV2 {
    /// Milliseconds; 0 lets the server choose.
    pub timeout: u32,
    pub flags: u32,
    pub create_guid: [u8; 16],
}

impl DurableRequestV2 {
    pub const LEN: usize = 32;

    pub fn decode(data: &[u8]) -> DecodeResult<Self> {
        if data.len() != Self::LEN {
            return Err(DecodeError::Invalid("DH2Q DataLength"));
        }
        let mut r = Reader::new(data);
        let timeout = r.u32()?;
        let flags = r.u32()?;
        r.skip(8)?;
        Ok(DurableRequestV2 {
            timeout,
            flags,
            create_guid: r.array::<16>()?,
        })
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::LEN);
        out.put_u32(self.timeout);
        out.put_u32(self.flags);
        out.put_zeros(8);
        out.extend_from_slice(&self.create_guid);
        out
    }
}

/// MS-SMB2 2.2.13.2.12: DH2C request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableReconnectV2 {
    pub file_id: FileId,
    pub create_guid: [u8; 16],
    pub flags: u32,
}

impl DurableReconnectV2 {
    pub const LEN: usize = 36;

    pub fn decode(data: &[u8]) -> DecodeResult<Self> {
        if data.len() != Self::LEN {
            return Err(DecodeError::Invalid("DH2C DataLength"));
        }
        let mut r = Reader::new(data);
        Ok(DurableReconnectV2 {
            file_id: FileId::read(&mut r)?,
            create_guid: r.array::<16>()?,
            flags: r.u32()?,
        })
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::LEN);
        self.file_id.write(&mut out);
        out.extend_from_slice(&self.create_guid);
        out.put_u32(self.flags);
        out
    }
}

/// MS-SMB2 2.2.14.2.12: DH2Q response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DurableResponseV2 {
    pub timeout: u32,
    pub flags: u32,
}

impl DurableResponseV2 {
    pub const LEN: usize = 8;

    pub fn decode(data: &[u8]) -> DecodeResult<Self> {
        if data.len() != Self::LEN {
            return Err(DecodeError::Invalid("DH2Q response DataLength"));
        }
        let mut r = Reader::new(data);
        Ok(DurableResponseV2 {
            timeout: r.u32()?,
            flags: r.u32()?,
        })
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::LEN);
        out.put_u32(self.timeout);
        out.put_u32(self.flags);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_request_round_trips() {
        let q = DurableRequestV2 {
            timeout: 60_000,
            flags: FLAG_PERSISTENT,
            create_guid: [7; 16],
        };
        let data = q.encode();
        assert_eq!(data.len(), DurableRequestV2::LEN);
        assert_eq!(DurableRequestV2::decode(&data).unwrap(), q);
        assert!(DurableRequestV2::decode(&data[..31]).is_err());
    }

    #[test]
    fn reconnects_round_trip() {
        let id = FileId {
            persistent: 1,
            volatile: 2,
        };
        let c = DurableReconnect { file_id: id };
        assert_eq!(DurableReconnect::decode(&c.encode()).unwrap(), c);
        let c2 = DurableReconnectV2 {
            file_id: id,
            create_guid: [3; 16],
            flags: 0,
        };
        assert_eq!(DurableReconnectV2::decode(&c2.encode()).unwrap(), c2);
        assert!(DurableReconnectV2::decode(&[0; 35]).is_err());
    }

    #[test]
    fn v2_response_round_trips() {
        let r = DurableResponseV2 {
            timeout: 1,
            flags: 0,
        };
        assert_eq!(DurableResponseV2::decode(&r.encode()).unwrap(), r);
    }
}
