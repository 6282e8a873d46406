//! MS-SMB2 2.2.9 / 2.2.10: SMB2 TREE_CONNECT request and response.

use super::wire::{len16, min_buffer, var_region};
use crate::codec::{body_reader, put_utf16le, utf16le_to_string, DecodeResult, Message, WriteLe};

/// MS-SMB2 2.2.9: request Flags (3.1.1).
pub mod flags {
    pub const CLUSTER_RECONNECT: u16 = 0x0001;
    pub const REDIRECT_TO_OWNER: u16 = 0x0002;
    pub const EXTENSION_PRESENT: u16 = 0x0004;
}

/// MS-SMB2 2.2.10: ShareType.
pub mod share_type {
    pub const DISK: u8 = 0x01;
    pub const PIPE: u8 = 0x02;
    pub const PRINT: u8 = 0x03;
}

/// MS-SMB2 2.2.10: ShareFlags.
pub mod share_flags {
    pub const MANUAL_CACHING: u32 = 0x0000_0000;
    pub const AUTO_CACHING: u32 = 0x0000_0010;
    pub const VDO_CACHING: u32 = 0x0000_0020;
    pub const NO_CACHING: u32 = 0x0000_0030;
    pub const DFS: u32 = 0x0000_0001;
    pub const DFS_ROOT: u32 = 0x0000_0002;
    pub const RESTRICT_EXCLUSIVE_OPENS: u32 = 0x0000_0100;
    pub const FORCE_SHARED_DELETE: u32 = 0x0000_0200;
    pub const ALLOW_NAMESPACE_CACHING: u32 = 0x0000_0400;
    pub const ACCESS_BASED_DIRECTORY_ENUM: u32 = 0x0000_0800;
    pub const FORCE_LEVELII_OPLOCK: u32 = 0x0000_1000;
    pub const ENABLE_HASH_V1: u32 = 0x0000_2000;
    pub const ENABLE_HASH_V2: u32 = 0x0000_4000;
    pub const ENCRYPT_DATA: u32 = 0x0000_8000;
    pub const IDENTITY_REMOTING: u32 = 0x0004_0000;
    pub const COMPRESS_DATA: u32 = 0x0010_0000;
    pub const ISOLATED_TRANSPORT: u32 = 0x0020_0000;
}

/// MS-SMB2 2.2.10: share Capabilities.
pub mod share_capabilities {
    pub const DFS: u32 = 0x0000_0008;
    pub const CONTINUOUS_AVAILABILITY: u32 = 0x0000_0010;
    pub const SCALEOUT: u32 = 0x0000_0020;
    pub const CLUSTER: u32 = 0x0000_0040;
    pub const ASYMMETRIC: u32 = 0x0000_0080;
    pub const REDIRECT_TO_OWNER: u32 = 0x0000_0100;
}

/// MS-SMB2 2.2.9. `path` is "\\server\share". With EXTENSION_PRESENT
/// (2.2.9.1) PathOffset/PathLength still locate the PathName, which is all
/// that is read; tree connect contexts are not decoded, and the encoder
/// never writes the extension.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TreeConnectRequest {
    pub flags: u16,
    pub path: String,
}

impl TreeConnectRequest {
    pub const STRUCTURE_SIZE: u16 = 9;
}

impl Message for TreeConnectRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let flags = r.u16()?;
        let off = r.u16()? as usize;
        let len = r.u16()? as usize;
        let path = utf16le_to_string(var_region(msg, off, len, Self::STRUCTURE_SIZE, "Path")?)?;
        Ok(TreeConnectRequest { flags, path })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(self.flags & !flags::EXTENSION_PRESENT);
        let off_at = out.len();
        out.put_u16(0);
        out.put_u16(0);
        let start = out.len();
        put_utf16le(out, &self.path);
        let len = len16(out.len() - start, "Path");
        out.patch_u16(off_at, len16(start, "PathOffset"));
        out.patch_u16(off_at + 2, len);
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

/// MS-SMB2 2.2.10
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TreeConnectResponse {
    pub share_type: u8,
    pub share_flags: u32,
    pub capabilities: u32,
    pub maximal_access: u32,
}

impl TreeConnectResponse {
    pub const STRUCTURE_SIZE: u16 = 16;
}

impl Message for TreeConnectResponse {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let share_type = r.u8()?;
        r.skip(1)?;
        Ok(TreeConnectResponse {
            share_type,
            share_flags: r.u32()?,
            capabilities: r.u32()?,
            maximal_access: r.u32()?,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u8(self.share_type);
        out.put_u8(0);
        out.put_u32(self.share_flags);
        out.put_u32(self.capabilities);
        out.put_u32(self.maximal_access);
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn request_round_trips(f in any::<u16>(), path in "\\PC{0,60}") {
            let m = TreeConnectRequest { flags: f & !flags::EXTENSION_PRESENT, path };
            let v = round_trip(&m);
            prop_assert_eq!(&v[68..70], &0x48u16.to_le_bytes());
        }

        #[test]
        fn response_round_trips(t in any::<u8>(), f in any::<u32>(), c in any::<u32>(), a in any::<u32>()) {
            let v = round_trip(&TreeConnectResponse { share_type: t, share_flags: f, capabilities: c, maximal_access: a });
            prop_assert_eq!(v.len(), 64 + 16);
        }
    }

    #[test]
    fn extension_present_still_reads_path() {
        // 2.2.9.1: extension at the start of Buffer, PathName after it.
        let path: Vec<u8> = "\\\\srv\\share"
            .encode_utf16()
            .flat_map(|u| u.to_le_bytes())
            .collect();
        let mut body = vec![9, 0, 4, 0];
        body.extend_from_slice(&(72u16 + 16).to_le_bytes());
        body.extend_from_slice(&(path.len() as u16).to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes()); // TreeConnectContextOffset
        body.extend_from_slice(&[0; 12]); // count + reserved
        body.extend_from_slice(&path);
        let m = TreeConnectRequest::decode(&with_body(&body)).unwrap();
        assert_eq!(m.path, "\\\\srv\\share");
        assert_eq!(m.flags, flags::EXTENSION_PRESENT);
    }

    #[test]
    fn rejects_odd_utf16() {
        let mut v = encode(&TreeConnectRequest {
            flags: 0,
            path: "ab".into(),
        });
        v[70] = 3;
        assert!(TreeConnectRequest::decode(&v).is_err());
    }
}
