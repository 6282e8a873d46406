//! The "AAPL" create context: Apple's SMB2 extensions, as macOS clients
//! negotiate them on their first CREATE of a connection (Apple's smb
//! client `smb_2.h`, and Samba's `libcli/smb/smb2_create_ctx.h`, which
//! names the same values). All integers little-endian.
//!
//! Request (24 bytes): CommandCode (u32), Reserved (u32), RequestBitmap
//! (u64: which of the reply's parts are wanted), ClientCapabilities (u64).
//! Reply to a server query: CommandCode (u32), Reserved (u32), ReplyBitmap
//! (u64), then for each bit of ReplyBitmap in order: ServerCapabilities
//! (u64), VolumeCapabilities (u64), ModelInfo (Reserved u32, length in
//! bytes u32, the UTF-16LE model string).

use crate::codec::{put_utf16le, utf16le_to_string, DecodeError, DecodeResult, Reader, WriteLe};

/// CommandCode of a server query, the only command the server answers.
pub const SERVER_QUERY: u32 = 1;
/// CommandCode of a resolve-id request (not served: it needs file ids that
/// stay valid across renames).
pub const RESOLVE_ID: u32 = 2;

/// RequestBitmap / ReplyBitmap bits.
pub mod reply {
    pub const SERVER_CAPS: u64 = 1;
    pub const VOLUME_CAPS: u64 = 2;
    pub const MODEL_INFO: u64 = 4;
}

/// ClientCapabilities / ServerCapabilities bits.
pub mod caps {
    /// QUERY_DIRECTORY entries carry the resource fork size, Finder info
    /// and the UNIX mode in place of the EA size and short name.
    pub const SUPPORTS_READ_DIR_ATTR: u64 = 1;
    /// A server-side copy with no chunks copies the whole file, streams
    /// and metadata included.
    pub const SUPPORTS_OSX_COPYFILE: u64 = 2;
    pub const UNIX_BASED: u64 = 4;
    /// Security descriptors carry the UNIX mode, owner and group as
    /// S-1-5-88-3-mode, S-1-5-88-1-uid and S-1-5-88-2-gid ACEs.
    pub const SUPPORTS_NFS_ACE: u64 = 8;
}

/// VolumeCapabilities bits.
pub mod volume_caps {
    pub const SUPPORT_RESOLVE_ID: u64 = 1;
    pub const CASE_SENSITIVE: u64 = 2;
    /// The volume honours F_FULLFSYNC (a flush reaches stable storage):
    /// Time Machine wants it.
    pub const FULL_SYNC: u64 = 4;
}

/// The AAPL request context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AaplRequest {
    pub command: u32,
    pub request_bitmap: u64,
    pub client_caps: u64,
}

impl AaplRequest {
    pub const SIZE: usize = 24;

    /// Exactly 24 bytes, as Apple's client sends and Samba requires.
    pub fn decode(b: &[u8]) -> DecodeResult<AaplRequest> {
        if b.len() != Self::SIZE {
            return Err(DecodeError::Invalid("AAPL context length"));
        }
        let mut r = Reader::new(b);
        let command = r.u32()?;
        let _reserved = r.u32()?;
        Ok(AaplRequest {
            command,
            request_bitmap: r.u64()?,
            client_caps: r.u64()?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.command);
        out.put_u32(0);
        out.put_u64(self.request_bitmap);
        out.put_u64(self.client_caps);
    }
}

/// The reply to a server query: each part present only when its bit was
/// asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AaplServerQueryReply {
    pub server_caps: Option<u64>,
    pub volume_caps: Option<u64>,
    pub model: Option<String>,
}

impl AaplServerQueryReply {
    fn bitmap(&self) -> u64 {
        let mut bits = 0;
        if self.server_caps.is_some() {
            bits |= reply::SERVER_CAPS;
        }
        if self.volume_caps.is_some() {
            bits |= reply::VOLUME_CAPS;
        }
        if self.model.is_some() {
            bits |= reply::MODEL_INFO;
        }
        bits
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(SERVER_QUERY);
        out.put_u32(0);
        out.put_u64(self.bitmap());
        if let Some(c) = self.server_caps {
            out.put_u64(c);
        }
        if let Some(c) = self.volume_caps {
            out.put_u64(c);
        }
        if let Some(m) = &self.model {
            let mut utf16 = Vec::with_capacity(m.len() * 2);
            put_utf16le(&mut utf16, m);
            out.put_u32(0);
            out.put_u32(utf16.len() as u32);
            out.extend_from_slice(&utf16);
        }
    }

    pub fn decode(b: &[u8]) -> DecodeResult<AaplServerQueryReply> {
        let mut r = Reader::new(b);
        if r.u32()? != SERVER_QUERY {
            return Err(DecodeError::Invalid("AAPL CommandCode"));
        }
        let _reserved = r.u32()?;
        let bitmap = r.u64()?;
        let server_caps = if bitmap & reply::SERVER_CAPS != 0 {
            Some(r.u64()?)
        } else {
            None
        };
        let volume_caps = if bitmap & reply::VOLUME_CAPS != 0 {
            Some(r.u64()?)
        } else {
            None
        };
        let model = if bitmap & reply::MODEL_INFO != 0 {
            let _reserved = r.u32()?;
            let len = r.u32()? as usize;
            if !len.is_multiple_of(2) {
                return Err(DecodeError::Invalid("AAPL model length"));
            }
            Some(utf16le_to_string(r.bytes(len)?)?)
        } else {
            None
        };
        Ok(AaplServerQueryReply {
            server_caps,
            volume_caps,
            model,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn request_is_exactly_24_bytes() {
        let req = AaplRequest {
            command: SERVER_QUERY,
            request_bitmap: 7,
            client_caps: 13,
        };
        let mut b = Vec::new();
        req.encode(&mut b);
        assert_eq!(b.len(), AaplRequest::SIZE);
        assert_eq!(AaplRequest::decode(&b).unwrap(), req);
        assert!(AaplRequest::decode(&b[..23]).is_err());
        b.push(0);
        assert!(AaplRequest::decode(&b).is_err());
    }

    #[test]
    fn full_reply_layout() {
        // What Samba's torture test checks: 40 bytes of fixed parts plus
        // the model in UTF-16, server caps at offset 16.
        let r = AaplServerQueryReply {
            server_caps: Some(caps::UNIX_BASED | caps::SUPPORTS_NFS_ACE),
            volume_caps: Some(0),
            model: Some("MacSamba".into()),
        };
        let mut b = Vec::new();
        r.encode(&mut b);
        assert_eq!(b.len(), 40 + 16);
        assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 7);
        assert_eq!(u64::from_le_bytes(b[16..24].try_into().unwrap()), 12);
        assert_eq!(u32::from_le_bytes(b[36..40].try_into().unwrap()), 16);
        assert_eq!(AaplServerQueryReply::decode(&b).unwrap(), r);
    }

    proptest! {
        #[test]
        fn reply_round_trips(s in proptest::option::of(any::<u64>()),
                             v in proptest::option::of(any::<u64>()),
                             m in proptest::option::of("[a-zA-Z0-9,]{0,24}")) {
            let r = AaplServerQueryReply { server_caps: s, volume_caps: v, model: m };
            let mut b = Vec::new();
            r.encode(&mut b);
            prop_assert_eq!(AaplServerQueryReply::decode(&b).unwrap(), r);
        }

        #[test]
        fn decoders_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = AaplRequest::decode(&b);
            let _ = AaplServerQueryReply::decode(&b);
        }
    }
}
