//! MS-SMB2 2.2.13.2.8 / 2.2.13.2.10 (SMB2_CREATE_REQUEST_LEASE and _V2) and
//! 2.2.14.2.10 / 2.2.14.2.11 (the responses): the Data of an "RqLs" create
//! context. Version 1 is 32 bytes, version 2 is 52; request and response
//! share each layout.

use crate::codec::{DecodeError, DecodeResult, Reader, WriteLe};

/// MS-SMB2 2.2.14.2.10: LeaseFlags.
pub mod lease_flags {
    pub const BREAK_IN_PROGRESS: u32 = 0x02;
    pub const PARENT_LEASE_KEY_SET: u32 = 0x04;
}

pub const V1_LEN: usize = 32;
pub const V2_LEN: usize = 52;

/// One lease context. `parent_key` and `epoch` exist only in version 2.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaseContext {
    pub version: u8,
    pub key: [u8; 16],
    pub state: u32,
    pub flags: u32,
    pub duration: u64,
    pub parent_key: [u8; 16],
    pub epoch: u16,
}

impl LeaseContext {
    /// Decode by length: exactly 32 bytes is version 1; 52 or more is
    /// version 2 (MS-SMB2 3.3.5.9.8 / 3.3.5.9.11 tell them apart by
    /// DataLength); anything else is invalid.
    pub fn decode(data: &[u8]) -> DecodeResult<Self> {
        let version = match data.len() {
            V1_LEN => 1,
            n if n >= V2_LEN => 2,
            _ => return Err(DecodeError::Invalid("lease context DataLength")),
        };
        let mut r = Reader::new(data);
        let key = r.array::<16>()?;
        let state = r.u32()?;
        let flags = r.u32()?;
        let duration = r.u64()?;
        let (parent_key, epoch) = if version == 2 {
            let parent = r.array::<16>()?;
            let epoch = r.u16()?;
            (parent, epoch)
        } else {
            ([0; 16], 0)
        };
        Ok(LeaseContext {
            version,
            key,
            state,
            flags,
            duration,
            parent_key,
            epoch,
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(V2_LEN);
        out.extend_from_slice(&self.key);
        out.put_u32(self.state);
        out.put_u32(self.flags);
        out.put_u64(self.duration);
        if self.version >= 2 {
            out.extend_from_slice(&self.parent_key);
            out.put_u16(self.epoch);
            out.put_u16(0);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lease_contexts_round_trip(v2 in any::<bool>(), key in any::<[u8; 16]>(),
                                     parent in any::<[u8; 16]>(), state in any::<u32>(),
                                     flags in any::<u32>(), duration in any::<u64>(),
                                     epoch in any::<u16>()) {
            let c = LeaseContext {
                version: if v2 { 2 } else { 1 },
                key,
                state,
                flags,
                duration,
                parent_key: if v2 { parent } else { [0; 16] },
                epoch: if v2 { epoch } else { 0 },
            };
            let bytes = c.encode();
            prop_assert_eq!(bytes.len(), if v2 { V2_LEN } else { V1_LEN });
            prop_assert_eq!(LeaseContext::decode(&bytes).unwrap(), c);
        }

        #[test]
        fn odd_lengths_are_refused_without_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            let r = LeaseContext::decode(&data);
            prop_assert_eq!(r.is_ok(), data.len() == V1_LEN || data.len() >= V2_LEN);
        }
    }

    #[test]
    fn version_2_layout_matches_the_spec() {
        // MS-SMB2 2.2.13.2.10: key, state, flags, duration, parent key, epoch.
        let c = LeaseContext {
            version: 2,
            key: [1; 16],
            state: 7,
            flags: lease_flags::PARENT_LEASE_KEY_SET,
            duration: 0,
            parent_key: [2; 16],
            epoch: 0x0304,
        };
        let b = c.encode();
        assert_eq!(&b[16..20], &7u32.to_le_bytes());
        assert_eq!(&b[20..24], &4u32.to_le_bytes());
        assert_eq!(&b[32..48], &[2; 16]);
        assert_eq!(&b[48..50], &[4, 3]);
    }
}
