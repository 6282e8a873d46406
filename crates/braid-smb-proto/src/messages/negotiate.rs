//! MS-SMB2 2.2.3 / 2.2.4: SMB2 NEGOTIATE request and response, negotiate
//! contexts (2.2.3.1, 2.2.4.1), and the SMB1 multi-protocol NEGOTIATE that
//! older clients open with (MS-SMB2 3.3.5.3.1).

use super::wire::{fixed_end, len16, min_buffer, mul, sub, u16_list, var_region};
use crate::codec::{
    body_reader, put_utf16le, utf16le_to_string, DecodeError, DecodeResult, Guid, Message, Reader,
    WriteLe,
};

/// MS-SMB2 2.2.3: DialectRevision values.
pub mod dialect {
    pub const SMB202: u16 = 0x0202;
    pub const SMB210: u16 = 0x0210;
    pub const SMB300: u16 = 0x0300;
    pub const SMB302: u16 = 0x0302;
    pub const SMB311: u16 = 0x0311;
    /// SMB2 "wildcard" revision, answered to an SMB1 multi-protocol negotiate.
    pub const WILDCARD: u16 = 0x02FF;
}

/// MS-SMB2 2.2.3: SMB2_GLOBAL_CAP_* bits.
pub mod capabilities {
    pub const DFS: u32 = 0x0000_0001;
    pub const LEASING: u32 = 0x0000_0002;
    pub const LARGE_MTU: u32 = 0x0000_0004;
    pub const MULTI_CHANNEL: u32 = 0x0000_0008;
    pub const PERSISTENT_HANDLES: u32 = 0x0000_0010;
    pub const DIRECTORY_LEASING: u32 = 0x0000_0020;
    pub const ENCRYPTION: u32 = 0x0000_0040;
    pub const NOTIFICATIONS: u32 = 0x0000_0080;
}

/// MS-SMB2 2.2.3: SecurityMode bits.
pub mod security_mode {
    pub const SIGNING_ENABLED: u16 = 0x0001;
    pub const SIGNING_REQUIRED: u16 = 0x0002;
}

/// MS-SMB2 2.2.3.1: negotiate context ContextType values.
pub mod context_type {
    pub const PREAUTH_INTEGRITY_CAPABILITIES: u16 = 0x0001;
    pub const ENCRYPTION_CAPABILITIES: u16 = 0x0002;
    pub const COMPRESSION_CAPABILITIES: u16 = 0x0003;
    pub const NETNAME_NEGOTIATE_CONTEXT_ID: u16 = 0x0005;
    pub const TRANSPORT_CAPABILITIES: u16 = 0x0006;
    pub const RDMA_TRANSFORM_CAPABILITIES: u16 = 0x0007;
    pub const SIGNING_CAPABILITIES: u16 = 0x0008;
}

/// MS-SMB2 2.2.3.1.1: HashAlgorithms.
pub mod hash_algorithm {
    pub const SHA512: u16 = 0x0001;
}

/// MS-SMB2 2.2.3.1.2: Ciphers.
pub mod cipher {
    pub const AES_128_CCM: u16 = 0x0001;
    pub const AES_128_GCM: u16 = 0x0002;
    pub const AES_256_CCM: u16 = 0x0003;
    pub const AES_256_GCM: u16 = 0x0004;
}

/// MS-SMB2 2.2.3.1.3: compression algorithms and flags.
pub mod compression {
    pub const NONE: u16 = 0x0000;
    pub const LZNT1: u16 = 0x0001;
    pub const LZ77: u16 = 0x0002;
    pub const LZ77_HUFFMAN: u16 = 0x0003;
    pub const PATTERN_V1: u16 = 0x0004;
    pub const LZ4: u16 = 0x0005;
    pub const FLAG_NONE: u32 = 0x0000_0000;
    pub const FLAG_CHAINED: u32 = 0x0000_0001;
}

/// MS-SMB2 2.2.3.1.7: SigningAlgorithms.
pub mod signing_algorithm {
    pub const HMAC_SHA256: u16 = 0x0000;
    pub const AES_CMAC: u16 = 0x0001;
    pub const AES_GMAC: u16 = 0x0002;
}

/// MS-SMB2 2.2.3.1.5: TRANSPORT_CAPABILITIES flags.
pub mod transport_capabilities {
    pub const ACCEPT_TRANSPORT_LEVEL_SECURITY: u32 = 0x0000_0001;
}

/// MS-SMB2 2.2.3.1 / 2.2.4.1: one negotiate context. Data layouts are
/// the same in request and response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NegotiateContext {
    /// 2.2.3.1.1
    PreauthIntegrity {
        hash_algorithms: Vec<u16>,
        salt: Vec<u8>,
    },
    /// 2.2.3.1.2
    Encryption { ciphers: Vec<u16> },
    /// 2.2.3.1.3
    Compression {
        flags: u32,
        compression_algorithms: Vec<u16>,
    },
    /// 2.2.3.1.4 (UTF-16LE, no terminator)
    NetnameNegotiate { netname: String },
    /// 2.2.3.1.5
    TransportCapabilities { flags: u32 },
    /// 2.2.3.1.6
    RdmaTransformCapabilities { rdma_transform_ids: Vec<u16> },
    /// 2.2.3.1.7
    SigningCapabilities { algorithms: Vec<u16> },
    /// Any other ContextType, kept verbatim (servers MUST ignore unknown ones).
    Unknown { context_type: u16, data: Vec<u8> },
}

impl NegotiateContext {
    pub fn context_type(&self) -> u16 {
        use context_type::*;
        match self {
            NegotiateContext::PreauthIntegrity { .. } => PREAUTH_INTEGRITY_CAPABILITIES,
            NegotiateContext::Encryption { .. } => ENCRYPTION_CAPABILITIES,
            NegotiateContext::Compression { .. } => COMPRESSION_CAPABILITIES,
            NegotiateContext::NetnameNegotiate { .. } => NETNAME_NEGOTIATE_CONTEXT_ID,
            NegotiateContext::TransportCapabilities { .. } => TRANSPORT_CAPABILITIES,
            NegotiateContext::RdmaTransformCapabilities { .. } => RDMA_TRANSFORM_CAPABILITIES,
            NegotiateContext::SigningCapabilities { .. } => SIGNING_CAPABILITIES,
            NegotiateContext::Unknown { context_type, .. } => *context_type,
        }
    }

    fn decode_data(ty: u16, d: &[u8]) -> DecodeResult<Self> {
        use context_type::*;
        let mut r = Reader::new(d);
        Ok(match ty {
            PREAUTH_INTEGRITY_CAPABILITIES => {
                let n = r.u16()? as usize;
                let salt_len = r.u16()? as usize;
                let algs = r.bytes(n * 2)?;
                let salt = r.bytes(salt_len)?;
                NegotiateContext::PreauthIntegrity {
                    hash_algorithms: u16_list(algs),
                    salt: salt.to_vec(),
                }
            }
            ENCRYPTION_CAPABILITIES => {
                let n = r.u16()? as usize;
                NegotiateContext::Encryption {
                    ciphers: u16_list(r.bytes(n * 2)?),
                }
            }
            COMPRESSION_CAPABILITIES => {
                let n = r.u16()? as usize;
                r.skip(2)?; // Padding
                let flags = r.u32()?;
                NegotiateContext::Compression {
                    flags,
                    compression_algorithms: u16_list(r.bytes(n * 2)?),
                }
            }
            NETNAME_NEGOTIATE_CONTEXT_ID => NegotiateContext::NetnameNegotiate {
                netname: utf16le_to_string(d)?,
            },
            TRANSPORT_CAPABILITIES => NegotiateContext::TransportCapabilities { flags: r.u32()? },
            RDMA_TRANSFORM_CAPABILITIES => {
                let n = r.u16()? as usize;
                r.skip(6)?; // Reserved1, Reserved2
                NegotiateContext::RdmaTransformCapabilities {
                    rdma_transform_ids: u16_list(r.bytes(n * 2)?),
                }
            }
            SIGNING_CAPABILITIES => {
                let n = r.u16()? as usize;
                NegotiateContext::SigningCapabilities {
                    algorithms: u16_list(r.bytes(n * 2)?),
                }
            }
            _ => NegotiateContext::Unknown {
                context_type: ty,
                data: d.to_vec(),
            },
        })
    }

    fn encode_data(&self, out: &mut Vec<u8>) {
        fn list(out: &mut Vec<u8>, l: &[u16]) {
            for v in l {
                out.put_u16(*v);
            }
        }
        match self {
            NegotiateContext::PreauthIntegrity {
                hash_algorithms,
                salt,
            } => {
                out.put_u16(len16(hash_algorithms.len(), "HashAlgorithms"));
                out.put_u16(len16(salt.len(), "Salt"));
                list(out, hash_algorithms);
                out.extend_from_slice(salt);
            }
            NegotiateContext::Encryption { ciphers } => {
                out.put_u16(len16(ciphers.len(), "Ciphers"));
                list(out, ciphers);
            }
            NegotiateContext::Compression {
                flags,
                compression_algorithms,
            } => {
                out.put_u16(len16(compression_algorithms.len(), "CompressionAlgorithms"));
                out.put_u16(0);
                out.put_u32(*flags);
                list(out, compression_algorithms);
            }
            NegotiateContext::NetnameNegotiate { netname } => put_utf16le(out, netname),
            NegotiateContext::TransportCapabilities { flags } => out.put_u32(*flags),
            NegotiateContext::RdmaTransformCapabilities { rdma_transform_ids } => {
                out.put_u16(len16(rdma_transform_ids.len(), "RDMATransformIds"));
                out.put_u16(0);
                out.put_u32(0);
                list(out, rdma_transform_ids);
            }
            NegotiateContext::SigningCapabilities { algorithms } => {
                out.put_u16(len16(algorithms.len(), "SigningAlgorithms"));
                list(out, algorithms);
            }
            NegotiateContext::Unknown { data, .. } => out.extend_from_slice(data),
        }
    }
}

/// Decode `count` contexts starting at `offset` (header-relative); each
/// context after the first starts on an 8-byte boundary (MS-SMB2 2.2.3.1).
fn decode_contexts(
    msg: &[u8],
    offset: usize,
    count: usize,
    structure_size: u16,
) -> DecodeResult<Vec<NegotiateContext>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if offset < fixed_end(structure_size) {
        return Err(DecodeError::OutOfBounds("NegotiateContextOffset"));
    }
    // Each context is at least 8 bytes: reject absurd counts before allocating.
    var_region(
        msg,
        offset,
        mul(count, 8, "NegotiateContextCount")?,
        structure_size,
        "NegotiateContextList",
    )?;
    let mut out = Vec::with_capacity(count);
    let mut pos = offset;
    for i in 0..count {
        if i > 0 {
            pos = pos
                .checked_add(7)
                .ok_or(DecodeError::OutOfBounds("NegotiateContext"))?
                & !7;
        }
        let mut r = Reader::at(msg, pos);
        let ty = r.u16()?;
        let len = r.u16()? as usize;
        r.skip(4)?; // Reserved
        let data = r.bytes(len)?;
        out.push(NegotiateContext::decode_data(ty, data)?);
        pos = r.pos();
    }
    Ok(out)
}

/// Append contexts at the current (already 8-byte aligned) position.
fn encode_contexts(out: &mut Vec<u8>, contexts: &[NegotiateContext]) {
    for (i, c) in contexts.iter().enumerate() {
        if i > 0 {
            out.align_to(8);
        }
        out.put_u16(c.context_type());
        let len_at = out.len();
        out.put_u16(0);
        out.put_u32(0);
        let start = out.len();
        c.encode_data(out);
        let len = len16(out.len() - start, "negotiate context Data");
        out.patch_u16(len_at, len);
    }
}

/// MS-SMB2 2.2.3: SMB2 NEGOTIATE request. When `dialects` does not contain
/// 3.1.1 the context fields are ClientStartTime on the wire: they are
/// ignored on decode, written as zero on encode, and `contexts` is empty.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NegotiateRequest {
    pub security_mode: u16,
    pub capabilities: u32,
    pub client_guid: Guid,
    pub dialects: Vec<u16>,
    pub contexts: Vec<NegotiateContext>,
}

impl NegotiateRequest {
    pub const STRUCTURE_SIZE: u16 = 36;
}

impl Message for NegotiateRequest {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let dialect_count = r.u16()? as usize;
        let security_mode = r.u16()?;
        r.skip(2)?; // Reserved
        let capabilities = r.u32()?;
        let client_guid = r.array::<16>()?;
        let ctx_offset = r.u32()? as usize;
        let ctx_count = r.u16()? as usize;
        r.skip(2)?; // Reserved2
        let dialects = u16_list(r.bytes(dialect_count * 2)?);
        let contexts = if dialects.contains(&dialect::SMB311) {
            decode_contexts(msg, ctx_offset, ctx_count, Self::STRUCTURE_SIZE)?
        } else {
            Vec::new()
        };
        Ok(NegotiateRequest {
            security_mode,
            capabilities,
            client_guid,
            dialects,
            contexts,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let has_311 = self.dialects.contains(&dialect::SMB311);
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(len16(self.dialects.len(), "Dialects"));
        out.put_u16(self.security_mode);
        out.put_u16(0);
        out.put_u32(self.capabilities);
        out.extend_from_slice(&self.client_guid);
        let ctx_offset_at = out.len();
        out.put_u32(0);
        let ctx_count = if has_311 { self.contexts.len() } else { 0 };
        out.put_u16(len16(ctx_count, "NegotiateContextList"));
        out.put_u16(0);
        for d in &self.dialects {
            out.put_u16(*d);
        }
        if ctx_count > 0 {
            out.align_to(8);
            let off = out.len() as u32;
            out.patch_u32(ctx_offset_at, off);
            encode_contexts(out, &self.contexts);
        }
    }
}

/// MS-SMB2 2.2.4: SMB2 NEGOTIATE response. Contexts are carried only when
/// `dialect_revision` is 3.1.1.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NegotiateResponse {
    pub security_mode: u16,
    pub dialect_revision: u16,
    pub server_guid: Guid,
    pub capabilities: u32,
    pub max_transact_size: u32,
    pub max_read_size: u32,
    pub max_write_size: u32,
    pub system_time: u64,
    pub server_start_time: u64,
    pub security_buffer: Vec<u8>,
    pub contexts: Vec<NegotiateContext>,
}

impl NegotiateResponse {
    pub const STRUCTURE_SIZE: u16 = 65;
}

impl Message for NegotiateResponse {
    fn decode(msg: &[u8]) -> DecodeResult<Self> {
        let mut r = body_reader(msg, Self::STRUCTURE_SIZE)?;
        let security_mode = r.u16()?;
        let dialect_revision = r.u16()?;
        let ctx_count = r.u16()? as usize;
        let server_guid = r.array::<16>()?;
        let capabilities = r.u32()?;
        let max_transact_size = r.u32()?;
        let max_read_size = r.u32()?;
        let max_write_size = r.u32()?;
        let system_time = r.u64()?;
        let server_start_time = r.u64()?;
        let sb_off = r.u16()? as usize;
        let sb_len = r.u16()? as usize;
        let ctx_offset = r.u32()? as usize;
        let security_buffer =
            var_region(msg, sb_off, sb_len, Self::STRUCTURE_SIZE, "SecurityBuffer")?.to_vec();
        let contexts = if dialect_revision == dialect::SMB311 {
            decode_contexts(msg, ctx_offset, ctx_count, Self::STRUCTURE_SIZE)?
        } else {
            Vec::new()
        };
        Ok(NegotiateResponse {
            security_mode,
            dialect_revision,
            server_guid,
            capabilities,
            max_transact_size,
            max_read_size,
            max_write_size,
            system_time,
            server_start_time,
            security_buffer,
            contexts,
        })
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let ctx_count = if self.dialect_revision == dialect::SMB311 {
            self.contexts.len()
        } else {
            0
        };
        out.put_u16(Self::STRUCTURE_SIZE);
        out.put_u16(self.security_mode);
        out.put_u16(self.dialect_revision);
        out.put_u16(len16(ctx_count, "NegotiateContextList"));
        out.extend_from_slice(&self.server_guid);
        out.put_u32(self.capabilities);
        out.put_u32(self.max_transact_size);
        out.put_u32(self.max_read_size);
        out.put_u32(self.max_write_size);
        out.put_u64(self.system_time);
        out.put_u64(self.server_start_time);
        let sb_at = out.len();
        out.put_u16(0);
        out.put_u16(len16(self.security_buffer.len(), "SecurityBuffer"));
        let ctx_at = out.len();
        out.put_u32(0);
        let sb_off = len16(out.len(), "SecurityBufferOffset");
        out.patch_u16(sb_at, sb_off);
        out.extend_from_slice(&self.security_buffer);
        if ctx_count > 0 {
            out.align_to(8);
            let off = out.len() as u32;
            out.patch_u32(ctx_at, off);
            encode_contexts(out, &self.contexts);
        }
        min_buffer(out, Self::STRUCTURE_SIZE);
    }
}

/// SMB1 command code of SMB_COM_NEGOTIATE.
pub const SMB1_COM_NEGOTIATE: u8 = 0x72;
/// Length of the SMB1 header (MS-CIFS 2.2.3.1).
pub const SMB1_HEADER_LEN: usize = 32;

/// Dialect strings of an SMB1 SMB_COM_NEGOTIATE request (MS-CIFS 2.2.4.52.1),
/// e.g. "NT LM 0.12", "SMB 2.002", "SMB 2.???". `msg` starts at the
/// 0xFF 'SMB' protocol id. MS-SMB2 3.3.5.3.1 answers it with an SMB2
/// NEGOTIATE response.
pub fn parse_smb1_negotiate_dialects(msg: &[u8]) -> DecodeResult<Vec<String>> {
    let mut r = Reader::new(msg);
    if r.array::<4>()? != crate::header::SMB1_PROTOCOL_ID {
        return Err(DecodeError::Invalid("SMB1 Protocol"));
    }
    if r.u8()? != SMB1_COM_NEGOTIATE {
        return Err(DecodeError::Invalid("SMB1 Command"));
    }
    r.skip(SMB1_HEADER_LEN - 5)?;
    let word_count = r.u8()? as usize;
    r.skip(word_count * 2)?;
    let byte_count = r.u16()? as usize;
    let bytes = r.bytes(byte_count)?;
    let mut dialects = Vec::new();
    let mut rest = bytes;
    while let Some((&format, tail)) = rest.split_first() {
        if format != 0x02 {
            return Err(DecodeError::Invalid("SMB1 dialect BufferFormat"));
        }
        let nul = tail
            .iter()
            .position(|&b| b == 0)
            .ok_or(DecodeError::Invalid("SMB1 dialect string"))?;
        let s = sub(tail, 0, nul, "SMB1 dialect string")?;
        // OEM strings; every real dialect name is ASCII. Map bytes 1:1 to chars.
        dialects.push(s.iter().map(|&b| b as char).collect());
        rest = &tail[nul + 1..];
    }
    Ok(dialects)
}

#[cfg(test)]
mod tests {
    use super::super::wire::test_util::*;
    use super::*;
    use proptest::prelude::*;

    fn ctx_strategy() -> impl Strategy<Value = NegotiateContext> {
        prop_oneof![
            (
                proptest::collection::vec(any::<u16>(), 0..4),
                proptest::collection::vec(any::<u8>(), 0..40)
            )
                .prop_map(|(hash_algorithms, salt)| {
                    NegotiateContext::PreauthIntegrity {
                        hash_algorithms,
                        salt,
                    }
                }),
            proptest::collection::vec(any::<u16>(), 0..5)
                .prop_map(|ciphers| NegotiateContext::Encryption { ciphers }),
            (any::<u32>(), proptest::collection::vec(any::<u16>(), 0..5)).prop_map(
                |(flags, compression_algorithms)| {
                    NegotiateContext::Compression {
                        flags,
                        compression_algorithms,
                    }
                }
            ),
            "[a-zA-Z0-9.\\-]{0,20}"
                .prop_map(|netname| NegotiateContext::NetnameNegotiate { netname }),
            any::<u32>().prop_map(|flags| NegotiateContext::TransportCapabilities { flags }),
            proptest::collection::vec(any::<u16>(), 0..4).prop_map(|rdma_transform_ids| {
                NegotiateContext::RdmaTransformCapabilities { rdma_transform_ids }
            }),
            proptest::collection::vec(any::<u16>(), 0..4)
                .prop_map(|algorithms| NegotiateContext::SigningCapabilities { algorithms }),
            (9u16..0x100, proptest::collection::vec(any::<u8>(), 0..30))
                .prop_map(|(context_type, data)| NegotiateContext::Unknown { context_type, data }),
        ]
    }

    proptest! {
        #[test]
        fn request_round_trips(sm in any::<u16>(), caps in any::<u32>(), guid in any::<[u8;16]>(),
                               mut dialects in proptest::collection::vec(0x0200u16..0x0400, 0..6),
                               with_311 in any::<bool>(),
                               contexts in proptest::collection::vec(ctx_strategy(), 0..6)) {
            dialects.retain(|d| *d != dialect::SMB311);
            if with_311 { dialects.push(dialect::SMB311); }
            let contexts = if with_311 { contexts } else { Vec::new() };
            let m = NegotiateRequest { security_mode: sm, capabilities: caps, client_guid: guid, dialects, contexts };
            let v = round_trip(&m);
            // Contexts start 8-byte aligned (MS-SMB2 2.2.3).
            let off = u32::from_le_bytes(v[92..96].try_into().unwrap()) as usize;
            prop_assert_eq!(off % 8, 0);
        }

        #[test]
        fn response_round_trips(sm in any::<u16>(), d in prop_oneof![Just(0x0202u16), Just(0x0300), Just(0x0311)],
                                guid in any::<[u8;16]>(), caps in any::<u32>(), t in any::<u64>(),
                                sb in proptest::collection::vec(any::<u8>(), 0..100),
                                contexts in proptest::collection::vec(ctx_strategy(), 0..6)) {
            let contexts = if d == dialect::SMB311 { contexts } else { Vec::new() };
            let m = NegotiateResponse { security_mode: sm, dialect_revision: d, server_guid: guid, capabilities: caps,
                max_transact_size: 1 << 23, max_read_size: 1 << 23, max_write_size: 1 << 23, system_time: t,
                server_start_time: 0, security_buffer: sb, contexts };
            round_trip(&m);
        }
    }

    #[test]
    fn response_layout() {
        let m = NegotiateResponse {
            dialect_revision: dialect::SMB311,
            security_buffer: vec![0x60, 0x01, 0x02],
            contexts: vec![
                NegotiateContext::PreauthIntegrity {
                    hash_algorithms: vec![1],
                    salt: vec![7; 32],
                },
                NegotiateContext::Encryption {
                    ciphers: vec![cipher::AES_128_GCM],
                },
            ],
            ..Default::default()
        };
        let v = round_trip(&m);
        assert_eq!(&v[64..66], &65u16.to_le_bytes());
        // SecurityBufferOffset = 0x80 (header + 64 fixed bytes).
        assert_eq!(&v[64 + 56..64 + 58], &0x80u16.to_le_bytes());
        let ctx_off = u32::from_le_bytes(v[64 + 60..64 + 64].try_into().unwrap()) as usize;
        assert_eq!(ctx_off, 0x88);
        // Preauth: 8 header + 4 + 2 + 32 = 46 data bytes → next context at 0x88 + 8 + 38 = 0xB6 → aligned to 0xB8.
        assert_eq!(&v[0xB8..0xBA], &2u16.to_le_bytes());
        // Empty response still has the one-byte Buffer.
        let v = encode(&NegotiateResponse::default());
        assert_eq!(v.len(), 64 + 65);
    }

    #[test]
    fn request_without_311_ignores_client_start_time() {
        let m = NegotiateRequest {
            dialects: vec![0x0202, 0x0210],
            ..Default::default()
        };
        let mut v = encode(&m);
        v[64 + 28..64 + 36].copy_from_slice(&0x1234_5678_9abc_def0u64.to_le_bytes());
        assert_eq!(NegotiateRequest::decode(&v).unwrap(), m);
    }

    #[test]
    fn contexts_must_not_overlap_fixed_part() {
        let m = NegotiateRequest {
            dialects: vec![dialect::SMB311],
            contexts: vec![NegotiateContext::Encryption { ciphers: vec![1] }],
            ..Default::default()
        };
        let mut v = encode(&m);
        v[92..96].copy_from_slice(&64u32.to_le_bytes());
        assert!(NegotiateRequest::decode(&v).is_err());
        v[92..96].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(NegotiateRequest::decode(&v).is_err());
    }

    #[test]
    fn smb1_negotiate() {
        let mut m = vec![0xFF, b'S', b'M', b'B', 0x72];
        m.resize(32, 0);
        m.push(0); // WordCount
        let mut bytes = Vec::new();
        for d in ["NT LM 0.12", "SMB 2.002", "SMB 2.???"] {
            bytes.push(2);
            bytes.extend_from_slice(d.as_bytes());
            bytes.push(0);
        }
        m.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        m.extend_from_slice(&bytes);
        assert_eq!(
            parse_smb1_negotiate_dialects(&m).unwrap(),
            vec!["NT LM 0.12", "SMB 2.002", "SMB 2.???"]
        );
        let n = m.len();
        m[n - 1] = b'x';
        assert!(parse_smb1_negotiate_dialects(&m).is_err());
        assert!(parse_smb1_negotiate_dialects(&m[..20]).is_err());
    }

    proptest! {
        #[test]
        fn smb1_never_panics(tail in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut m = vec![0xFF, b'S', b'M', b'B', 0x72];
            m.extend_from_slice(&tail);
            let _ = parse_smb1_negotiate_dialects(&m);
        }
    }
}
