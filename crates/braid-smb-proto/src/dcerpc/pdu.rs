//! Connection-oriented DCE/RPC PDUs (C706 chapter 12.6, MS-RPCE 2.2.2).
//! Bodies are the bytes after the 16-byte common header and before any
//! authentication trailer. What a client sends is read in the integer
//! representation its drep names; what this end sends is little-endian.

use super::ndr::Endian;
use crate::codec::{Reader, WriteLe};
use thiserror::Error;

pub const COMMON_HEADER_LEN: usize = 16;
/// Common header + alloc_hint + p_cont_id + opnum (or cancel_count/reserved).
pub const REQUEST_HEADER_LEN: usize = 24;
pub const RESPONSE_HEADER_LEN: usize = 24;
/// The sec_trailer before an authentication token (MS-RPCE 2.2.2.11).
pub const SEC_TRAILER_LEN: usize = 8;
pub const RPC_VERS: u8 = 5;
/// Integer representation little-endian, characters ASCII, floats IEEE.
pub const DREP_LITTLE_ENDIAN: [u8; 4] = [0x10, 0, 0, 0];
/// The same with big-endian integers.
pub const DREP_BIG_ENDIAN: [u8; 4] = [0x00, 0, 0, 0];

/// C706 12.6.4: PDU types (connection-oriented).
pub mod ptype {
    pub const REQUEST: u8 = 0;
    pub const RESPONSE: u8 = 2;
    pub const FAULT: u8 = 3;
    pub const BIND: u8 = 11;
    pub const BIND_ACK: u8 = 12;
    pub const BIND_NAK: u8 = 13;
    pub const ALTER_CONTEXT: u8 = 14;
    pub const ALTER_CONTEXT_RESP: u8 = 15;
    /// MS-RPCE 2.2.2.10.
    pub const AUTH3: u8 = 16;
    pub const SHUTDOWN: u8 = 17;
    pub const CO_CANCEL: u8 = 18;
    pub const ORPHANED: u8 = 19;
}

/// C706 12.6.3.1 pfc_flags; MS-RPCE 2.2.2.3 for 0x04.
pub mod pfc {
    pub const FIRST_FRAG: u8 = 0x01;
    pub const LAST_FRAG: u8 = 0x02;
    pub const PENDING_CANCEL: u8 = 0x04;
    pub const CONC_MPX: u8 = 0x10;
    pub const DID_NOT_EXECUTE: u8 = 0x20;
    pub const MAYBE: u8 = 0x40;
    pub const OBJECT_UUID: u8 = 0x80;
}

/// C706 12.6.3.1 p_cont_def_result_t; MS-RPCE 2.2.2.4 adds negotiate_ack.
pub mod context_result {
    pub const ACCEPTANCE: u16 = 0;
    pub const USER_REJECTION: u16 = 1;
    pub const PROVIDER_REJECTION: u16 = 2;
    pub const NEGOTIATE_ACK: u16 = 3;
}

/// C706 12.6.3.1 p_provider_reason_t.
pub mod provider_reason {
    pub const NOT_SPECIFIED: u16 = 0;
    pub const ABSTRACT_SYNTAX_NOT_SUPPORTED: u16 = 1;
    pub const TRANSFER_SYNTAXES_NOT_SUPPORTED: u16 = 2;
    pub const LOCAL_LIMIT_EXCEEDED: u16 = 3;
}

/// C706 12.6.3.1 p_reject_reason_t; MS-RPCE 2.2.2.5.
pub mod bind_nak_reason {
    pub const NOT_SPECIFIED: u16 = 0;
    pub const PROTOCOL_VERSION_NOT_SUPPORTED: u16 = 4;
    pub const AUTHENTICATION_TYPE_NOT_RECOGNIZED: u16 = 8;
}

/// Fault status codes (C706 appendix E; MS-ERREF 2.2 for the Win32 ones).
pub mod fault_status {
    pub const NCA_OP_RNG_ERROR: u32 = 0x1C01_0002;
    pub const NCA_UNK_IF: u32 = 0x1C01_0003;
    pub const NCA_PROTO_ERROR: u32 = 0x1C01_000B;
    pub const ACCESS_DENIED: u32 = 0x0000_0005;
    /// RPC_S_SEC_PKG_ERROR (MS-RPCE 3.3.1.5.2.2: a request whose verifier
    /// does not verify).
    pub const SEC_PKG_ERROR: u32 = 0x0000_0721;
    /// RPC_X_BAD_STUB_DATA.
    pub const NDR: u32 = 0x0000_06F7;
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PduError {
    #[error("PDU truncated in {0}")]
    Truncated(&'static str),
    #[error("unsupported RPC version {0}.{1}")]
    Version(u8, u8),
    #[error("unsupported data representation {0:02x?}")]
    DataRepresentation([u8; 4]),
    #[error("frag_length {0} does not fit the PDU")]
    FragLength(u16),
    #[error("auth_length {0} does not fit the fragment")]
    AuthLength(u16),
}

/// The crate's bounds-checked reader over a PDU body, with errors that
/// name the PDU part being read.
struct Cursor<'a> {
    reader: Reader<'a>,
    what: &'static str,
    endian: Endian,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8], what: &'static str, endian: Endian) -> Self {
        Cursor {
            reader: Reader::new(buf),
            what,
            endian,
        }
    }
    fn truncated(&self) -> PduError {
        PduError::Truncated(self.what)
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], PduError> {
        self.reader.bytes(n).map_err(|_| self.truncated())
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], PduError> {
        self.reader.array().map_err(|_| self.truncated())
    }
    fn u8(&mut self) -> Result<u8, PduError> {
        self.reader.u8().map_err(|_| self.truncated())
    }
    fn u16(&mut self) -> Result<u16, PduError> {
        match self.endian {
            Endian::Little => self.reader.u16(),
            Endian::Big => self.reader.u16_be(),
        }
        .map_err(|_| self.truncated())
    }
    fn u32(&mut self) -> Result<u32, PduError> {
        match self.endian {
            Endian::Little => self.reader.u32(),
            Endian::Big => self.reader.u32_be(),
        }
        .map_err(|_| self.truncated())
    }
    /// A UUID (C706 appendix A: u32, u16, u16, eight octets), returned in
    /// little-endian wire order whatever order it came in.
    fn uuid(&mut self) -> Result<[u8; 16], PduError> {
        let mut out = [0u8; 16];
        out[..4].copy_from_slice(&self.u32()?.to_le_bytes());
        out[4..6].copy_from_slice(&self.u16()?.to_le_bytes());
        out[6..8].copy_from_slice(&self.u16()?.to_le_bytes());
        out[8..].copy_from_slice(&self.array::<8>()?);
        Ok(out)
    }
    fn rest(&mut self) -> &'a [u8] {
        let n = self.reader.remaining();
        self.reader.bytes(n).unwrap_or_default()
    }
}

/// C706 12.6.3.1 p_syntax_id_t: an interface or transfer syntax. The UUID
/// is kept in wire order; `version` is major in the low half, minor high.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SyntaxId {
    pub uuid: [u8; 16],
    pub version: u32,
}

/// A UUID written as its text form (`0x8a885d04_1ceb_11c9_9fe8_08002b104860`)
/// in NDR wire order: the first three fields little-endian, the rest as is.
pub const fn uuid(text_form: u128) -> [u8; 16] {
    let a = ((text_form >> 96) as u32).to_le_bytes();
    let b = ((text_form >> 80) as u16).to_le_bytes();
    let c = ((text_form >> 64) as u16).to_le_bytes();
    let d = (text_form as u64).to_be_bytes();
    [
        a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d[0], d[1], d[2], d[3], d[4], d[5], d[6],
        d[7],
    ]
}

/// MS-RPCE 3.3.1.5.3: the transfer syntax UUID prefix 6CB71C2C-9812-4540
/// marks the bind time feature negotiation context.
pub const BIND_TIME_FEATURE_PREFIX: [u8; 8] = [0x2C, 0x1C, 0xB7, 0x6C, 0x12, 0x98, 0x40, 0x45];

impl SyntaxId {
    pub const NULL: SyntaxId = SyntaxId {
        uuid: [0; 16],
        version: 0,
    };
    /// MS-SRVS 1.9: srvsvc 4b324fc8-1670-01d3-1278-5a47bf6ee188 v3.0.
    pub const SRVSVC: SyntaxId = SyntaxId {
        uuid: uuid(0x4b324fc8_1670_01d3_1278_5a47bf6ee188),
        version: 3,
    };
    /// MS-LSAT 1.9: lsarpc 12345778-1234-abcd-ef00-0123456789ab v0.0.
    pub const LSARPC: SyntaxId = SyntaxId {
        uuid: uuid(0x12345778_1234_abcd_ef00_0123456789ab),
        version: 0,
    };
    /// MS-DSSP 1.9: dssetup 3919286a-b10c-11d0-9ba8-00c04fd92ef5 v0.0.
    pub const DSSETUP: SyntaxId = SyntaxId {
        uuid: uuid(0x3919286a_b10c_11d0_9ba8_00c04fd92ef5),
        version: 0,
    };
    /// C706 appendix Q: mgmt afa8bd80-7d8a-11c9-bef4-08002b102989 v1.0.
    pub const MGMT: SyntaxId = SyntaxId {
        uuid: uuid(0xafa8bd80_7d8a_11c9_bef4_08002b102989),
        version: 1,
    };
    /// MS-RPCE 2.2.4.12: NDR 2.0.
    pub const NDR20: SyntaxId = SyntaxId {
        uuid: uuid(0x8a885d04_1ceb_11c9_9fe8_08002b104860),
        version: 2,
    };
    /// MS-RPCE 2.2.5.1: NDR64 (offered by Windows, never accepted here).
    pub const NDR64: SyntaxId = SyntaxId {
        uuid: uuid(0x71710533_beba_4937_8319_b5dbef9ccc36),
        version: 1,
    };

    /// MS-RPCE 3.3.1.5.3 / 2.2.2.14: the BindTimeFeatureNegotiationBitmask
    /// this syntax carries, if it is the feature negotiation syntax (v1.0).
    pub fn bind_time_features(&self) -> Option<u8> {
        (self.uuid[..8] == BIND_TIME_FEATURE_PREFIX && self.version == 1).then_some(self.uuid[8])
    }

    fn decode(c: &mut Cursor<'_>) -> Result<Self, PduError> {
        Ok(SyntaxId {
            uuid: c.uuid()?,
            version: c.u32()?,
        })
    }

    /// The 20 octets of a p_syntax_id_t in `endian` order (the verification
    /// trailer's pcontext carries them in the request's representation).
    pub fn decode_in(buf: &[u8], endian: Endian) -> Result<Self, PduError> {
        Self::decode(&mut Cursor::new(buf, "syntax id", endian))
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.uuid);
        out.put_u32(self.version);
    }
}

/// C706 12.6.3.1: the 16 bytes every connection-oriented PDU starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommonHeader {
    pub rpc_vers_minor: u8,
    pub ptype: u8,
    pub pfc_flags: u8,
    /// drep's integer representation: that of every integer after it,
    /// in the headers and in the stub.
    pub endian: Endian,
    pub frag_length: u16,
    pub auth_length: u16,
    pub call_id: u32,
}

impl CommonHeader {
    /// Refuses what this server cannot even frame: another major version,
    /// or a data representation other than ASCII with either byte order.
    pub fn decode(buf: &[u8]) -> Result<Self, PduError> {
        let mut c = Cursor::new(buf, "common header", Endian::Little);
        let vers = c.u8()?;
        let minor = c.u8()?;
        let ptype = c.u8()?;
        let pfc_flags = c.u8()?;
        let drep: [u8; 4] = c.array()?;
        if vers != RPC_VERS || minor > 1 {
            return Err(PduError::Version(vers, minor));
        }
        // C706 14.1: integer representation in the high nibble (0 big-,
        // 1 little-endian), character set in the low one (0 = ASCII);
        // floats are never used.
        c.endian = match drep[0] {
            0x10 => Endian::Little,
            0x00 => Endian::Big,
            _ => return Err(PduError::DataRepresentation(drep)),
        };
        Ok(CommonHeader {
            rpc_vers_minor: minor,
            ptype,
            pfc_flags,
            endian: c.endian,
            frag_length: c.u16()?,
            auth_length: c.u16()?,
            call_id: c.u32()?,
        })
    }

    /// The drep octets of this header's representation.
    pub fn drep(&self) -> [u8; 4] {
        match self.endian {
            Endian::Little => DREP_LITTLE_ENDIAN,
            Endian::Big => DREP_BIG_ENDIAN,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[RPC_VERS, self.rpc_vers_minor, self.ptype, self.pfc_flags]);
        out.extend_from_slice(&self.drep());
        let (frag, auth, call) = match self.endian {
            Endian::Little => (
                self.frag_length.to_le_bytes(),
                self.auth_length.to_le_bytes(),
                self.call_id.to_le_bytes(),
            ),
            Endian::Big => (
                self.frag_length.to_be_bytes(),
                self.auth_length.to_be_bytes(),
                self.call_id.to_be_bytes(),
            ),
        };
        out.extend_from_slice(&frag);
        out.extend_from_slice(&auth);
        out.extend_from_slice(&call);
    }
}

/// One whole fragment split into its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fragment<'a> {
    pub header: CommonHeader,
    pub body: &'a [u8],
    /// The sec_trailer and authentication token, empty without auth.
    pub auth: &'a [u8],
}

/// MS-RPCE 2.2.2.11: the sec_trailer starts at frag_length - auth_length - 8
/// and is preceded by auth_pad_length padding octets that belong to no body.
pub fn split_fragment(pdu: &[u8]) -> Result<Fragment<'_>, PduError> {
    let header = CommonHeader::decode(pdu)?;
    let frag_len = header.frag_length as usize;
    if frag_len < COMMON_HEADER_LEN || frag_len > pdu.len() {
        return Err(PduError::FragLength(header.frag_length));
    }
    let pdu = &pdu[..frag_len];
    if header.auth_length == 0 {
        return Ok(Fragment {
            header,
            body: &pdu[COMMON_HEADER_LEN..],
            auth: &[],
        });
    }
    let trailer_at = frag_len
        .checked_sub(header.auth_length as usize + SEC_TRAILER_LEN)
        .filter(|&at| at >= COMMON_HEADER_LEN)
        .ok_or(PduError::AuthLength(header.auth_length))?;
    let auth_pad = pdu[trailer_at + 2] as usize;
    let body_end = trailer_at
        .checked_sub(auth_pad)
        .filter(|&end| end >= COMMON_HEADER_LEN)
        .ok_or(PduError::AuthLength(header.auth_length))?;
    Ok(Fragment {
        header,
        body: &pdu[COMMON_HEADER_LEN..body_end],
        auth: &pdu[trailer_at..],
    })
}

/// A whole PDU: the common header (frag_length filled in) and `body`.
pub fn encode_pdu(ptype: u8, pfc_flags: u8, call_id: u32, body: &[u8]) -> Vec<u8> {
    let total = COMMON_HEADER_LEN + body.len();
    debug_assert!(total <= u16::MAX as usize);
    let mut out = Vec::with_capacity(total);
    CommonHeader {
        rpc_vers_minor: 0,
        ptype,
        pfc_flags,
        endian: Endian::Little,
        frag_length: total.min(u16::MAX as usize) as u16,
        auth_length: 0,
        call_id,
    }
    .encode(&mut out);
    out.extend_from_slice(body);
    out
}

/// C706 12.6.3.1 p_cont_elem_t: one presentation context offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextElement {
    pub context_id: u16,
    pub abstract_syntax: SyntaxId,
    pub transfer_syntaxes: Vec<SyntaxId>,
}

/// C706 12.6.4.3 bind / 12.6.4.1 alter_context (same body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub max_xmit_frag: u16,
    pub max_recv_frag: u16,
    pub assoc_group_id: u32,
    pub contexts: Vec<ContextElement>,
}

impl Bind {
    /// A little-endian body.
    pub fn decode(body: &[u8]) -> Result<Self, PduError> {
        Self::decode_in(body, Endian::Little)
    }

    /// A body in the representation its header names.
    pub fn decode_in(body: &[u8], endian: Endian) -> Result<Self, PduError> {
        let mut c = Cursor::new(body, "bind", endian);
        let max_xmit_frag = c.u16()?;
        let max_recv_frag = c.u16()?;
        let assoc_group_id = c.u32()?;
        let n_contexts = c.u8()?;
        c.bytes(3)?;
        let mut contexts = Vec::with_capacity(n_contexts as usize);
        for _ in 0..n_contexts {
            let context_id = c.u16()?;
            let n_transfer = c.u8()?;
            c.u8()?;
            let abstract_syntax = SyntaxId::decode(&mut c)?;
            let transfer_syntaxes = (0..n_transfer)
                .map(|_| SyntaxId::decode(&mut c))
                .collect::<Result<_, _>>()?;
            contexts.push(ContextElement {
                context_id,
                abstract_syntax,
                transfer_syntaxes,
            });
        }
        Ok(Bind {
            max_xmit_frag,
            max_recv_frag,
            assoc_group_id,
            contexts,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(self.max_xmit_frag);
        out.put_u16(self.max_recv_frag);
        out.put_u32(self.assoc_group_id);
        out.extend_from_slice(&[self.contexts.len() as u8, 0, 0, 0]);
        for ctx in &self.contexts {
            out.put_u16(ctx.context_id);
            out.extend_from_slice(&[ctx.transfer_syntaxes.len() as u8, 0]);
            ctx.abstract_syntax.encode(out);
            for ts in &ctx.transfer_syntaxes {
                ts.encode(out);
            }
        }
    }
}

/// C706 12.6.3.1 p_result_t: the answer to one offered context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextResult {
    pub result: u16,
    pub reason: u16,
    pub transfer_syntax: SyntaxId,
}

/// C706 12.6.4.4 bind_ack / 12.6.4.2 alter_context_resp (same body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindAck {
    pub max_xmit_frag: u16,
    pub max_recv_frag: u16,
    pub assoc_group_id: u32,
    /// port_spec without its NUL; empty in alter_context_resp.
    pub secondary_address: Vec<u8>,
    pub results: Vec<ContextResult>,
}

impl BindAck {
    pub fn decode(body: &[u8]) -> Result<Self, PduError> {
        let mut c = Cursor::new(body, "bind_ack", Endian::Little);
        let max_xmit_frag = c.u16()?;
        let max_recv_frag = c.u16()?;
        let assoc_group_id = c.u32()?;
        let addr_len = c.u16()? as usize;
        let mut secondary_address = c.bytes(addr_len)?.to_vec();
        if secondary_address.last() == Some(&0) {
            secondary_address.pop();
        }
        // The body starts 4-aligned in the PDU, so aligning here suffices.
        c.bytes((4 - c.reader.pos() % 4) % 4)?;
        let n_results = c.u8()?;
        c.bytes(3)?;
        let results = (0..n_results)
            .map(|_| {
                Ok(ContextResult {
                    result: c.u16()?,
                    reason: c.u16()?,
                    transfer_syntax: SyntaxId::decode(&mut c)?,
                })
            })
            .collect::<Result<_, PduError>>()?;
        Ok(BindAck {
            max_xmit_frag,
            max_recv_frag,
            assoc_group_id,
            secondary_address,
            results,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(self.max_xmit_frag);
        out.put_u16(self.max_recv_frag);
        out.put_u32(self.assoc_group_id);
        if self.secondary_address.is_empty() {
            out.put_u16(0);
        } else {
            out.put_u16(self.secondary_address.len() as u16 + 1);
            out.extend_from_slice(&self.secondary_address);
            out.push(0);
        }
        while !(out.len() - start).is_multiple_of(4) {
            out.push(0);
        }
        out.extend_from_slice(&[self.results.len() as u8, 0, 0, 0]);
        for r in &self.results {
            out.put_u16(r.result);
            out.put_u16(r.reason);
            r.transfer_syntax.encode(out);
        }
    }
}

/// C706 12.6.4.5 bind_nak, without MS-RPCE 2.2.2.9's optional signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindNak {
    pub reject_reason: u16,
    /// (major, minor) protocol versions supported.
    pub versions: Vec<(u8, u8)>,
}

impl BindNak {
    pub fn decode(body: &[u8]) -> Result<Self, PduError> {
        let mut c = Cursor::new(body, "bind_nak", Endian::Little);
        let reject_reason = c.u16()?;
        let n = c.u8()?;
        let versions = (0..n)
            .map(|_| Ok((c.u8()?, c.u8()?)))
            .collect::<Result<_, PduError>>()?;
        Ok(BindNak {
            reject_reason,
            versions,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u16(self.reject_reason);
        out.push(self.versions.len() as u8);
        for &(major, minor) in &self.versions {
            out.extend_from_slice(&[major, minor]);
        }
        while !(out.len() - start).is_multiple_of(4) {
            out.push(0);
        }
    }
}

/// C706 12.6.4.9 request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub alloc_hint: u32,
    pub context_id: u16,
    pub opnum: u16,
    /// Present when pfc_flags has OBJECT_UUID.
    pub object: Option<[u8; 16]>,
    pub stub: Vec<u8>,
}

impl Request {
    /// A little-endian body.
    pub fn decode(body: &[u8], pfc_flags: u8) -> Result<Self, PduError> {
        Self::decode_in(body, pfc_flags, Endian::Little)
    }

    /// A body in the representation its header names; the object UUID is
    /// returned in little-endian wire order.
    pub fn decode_in(body: &[u8], pfc_flags: u8, endian: Endian) -> Result<Self, PduError> {
        let mut c = Cursor::new(body, "request", endian);
        let alloc_hint = c.u32()?;
        let context_id = c.u16()?;
        let opnum = c.u16()?;
        let object = if pfc_flags & pfc::OBJECT_UUID != 0 {
            Some(c.uuid()?)
        } else {
            None
        };
        Ok(Request {
            alloc_hint,
            context_id,
            opnum,
            object,
            stub: c.rest().to_vec(),
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.alloc_hint);
        out.put_u16(self.context_id);
        out.put_u16(self.opnum);
        if let Some(object) = &self.object {
            out.extend_from_slice(object);
        }
        out.extend_from_slice(&self.stub);
    }
}

/// C706 12.6.4.10 response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// MS-RPCE 2.2.2.6: stub bytes in this and every later fragment.
    pub alloc_hint: u32,
    pub context_id: u16,
    pub cancel_count: u8,
    pub stub: Vec<u8>,
}

impl Response {
    pub fn decode(body: &[u8]) -> Result<Self, PduError> {
        let mut c = Cursor::new(body, "response", Endian::Little);
        let alloc_hint = c.u32()?;
        let context_id = c.u16()?;
        let cancel_count = c.u8()?;
        c.u8()?;
        Ok(Response {
            alloc_hint,
            context_id,
            cancel_count,
            stub: c.rest().to_vec(),
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.alloc_hint);
        out.put_u16(self.context_id);
        out.extend_from_slice(&[self.cancel_count, 0]);
        out.extend_from_slice(&self.stub);
    }
}

/// C706 12.6.4.7 fault; MS-RPCE 2.2.2.8: never any stub data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub alloc_hint: u32,
    pub context_id: u16,
    pub cancel_count: u8,
    /// MS-RPCE 2.2.2.8: bit 0 = extended error information follows.
    pub flags: u8,
    pub status: u32,
}

impl Fault {
    pub const BODY_LEN: usize = 16;

    pub fn decode(body: &[u8]) -> Result<Self, PduError> {
        let mut c = Cursor::new(body, "fault", Endian::Little);
        let fault = Fault {
            alloc_hint: c.u32()?,
            context_id: c.u16()?,
            cancel_count: c.u8()?,
            flags: c.u8()?,
            status: c.u32()?,
        };
        c.u32()?;
        Ok(fault)
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.alloc_hint);
        out.put_u16(self.context_id);
        out.extend_from_slice(&[self.cancel_count, self.flags]);
        out.put_u32(self.status);
        out.put_u32(0);
    }
}

#[cfg(test)]
#[path = "pdu_tests.rs"]
mod tests;
