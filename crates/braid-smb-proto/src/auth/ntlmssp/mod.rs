//! NTLMSSP (MS-NLMP): NEGOTIATE / CHALLENGE / AUTHENTICATE messages, NTLMv2
//! response computation and verification, key exchange, the AUTHENTICATE
//! MIC, and session security (signing/sealing keys, GSS_GetMIC) as needed
//! for the SPNEGO mechListMIC.
//!
//! Sans-IO: the server challenge, timestamps, client challenge and random
//! session key are all supplied by the caller. Only NTLMv2 is accepted;
//! NTLMv1/LM responses are refused.

use super::AuthError;
use hmac::{Hmac, Mac};
use md4::{Digest as _, Md4};
use md5::Md5;
use rc4::{consts::U16, KeyInit, Rc4, StreamCipher};

/// `"NTLMSSP\0"` (MS-NLMP 2.2.1.1).
pub const SIGNATURE: &[u8; 8] = b"NTLMSSP\0";

pub const MSG_NEGOTIATE: u32 = 1;
pub const MSG_CHALLENGE: u32 = 2;
pub const MSG_AUTHENTICATE: u32 = 3;

/// MS-NLMP 2.2.2.5 NEGOTIATE flags.
pub mod flags {
    pub const NEGOTIATE_UNICODE: u32 = 0x0000_0001;
    pub const NEGOTIATE_OEM: u32 = 0x0000_0002;
    pub const REQUEST_TARGET: u32 = 0x0000_0004;
    pub const NEGOTIATE_SIGN: u32 = 0x0000_0010;
    pub const NEGOTIATE_SEAL: u32 = 0x0000_0020;
    pub const NEGOTIATE_DATAGRAM: u32 = 0x0000_0040;
    pub const NEGOTIATE_LM_KEY: u32 = 0x0000_0080;
    pub const NEGOTIATE_NTLM: u32 = 0x0000_0200;
    pub const NEGOTIATE_ANONYMOUS: u32 = 0x0000_0800;
    pub const NEGOTIATE_OEM_DOMAIN_SUPPLIED: u32 = 0x0000_1000;
    pub const NEGOTIATE_OEM_WORKSTATION_SUPPLIED: u32 = 0x0000_2000;
    pub const NEGOTIATE_ALWAYS_SIGN: u32 = 0x0000_8000;
    pub const TARGET_TYPE_DOMAIN: u32 = 0x0001_0000;
    pub const TARGET_TYPE_SERVER: u32 = 0x0002_0000;
    pub const NEGOTIATE_EXTENDED_SESSIONSECURITY: u32 = 0x0008_0000;
    pub const NEGOTIATE_IDENTIFY: u32 = 0x0010_0000;
    pub const REQUEST_NON_NT_SESSION_KEY: u32 = 0x0040_0000;
    pub const NEGOTIATE_TARGET_INFO: u32 = 0x0080_0000;
    pub const NEGOTIATE_VERSION: u32 = 0x0200_0000;
    pub const NEGOTIATE_128: u32 = 0x2000_0000;
    pub const NEGOTIATE_KEY_EXCH: u32 = 0x4000_0000;
    pub const NEGOTIATE_56: u32 = 0x8000_0000;
}
use flags::*;

/// MS-NLMP 2.2.2.1 AV_PAIR AvId values.
pub mod av {
    pub const EOL: u16 = 0;
    pub const NB_COMPUTER_NAME: u16 = 1;
    pub const NB_DOMAIN_NAME: u16 = 2;
    pub const DNS_COMPUTER_NAME: u16 = 3;
    pub const DNS_DOMAIN_NAME: u16 = 4;
    pub const DNS_TREE_NAME: u16 = 5;
    pub const FLAGS: u16 = 6;
    pub const TIMESTAMP: u16 = 7;
    pub const SINGLE_HOST: u16 = 8;
    pub const TARGET_NAME: u16 = 9;
    pub const CHANNEL_BINDINGS: u16 = 10;
    /// MsvAvFlags bit: the AUTHENTICATE message carries a MIC.
    pub const FLAG_MIC_PRESENT: u32 = 0x0000_0002;
}

/// Our VERSION field (MS-NLMP 2.2.2.10): 10.0 build 20348, NTLM revision 15.
pub const VERSION: [u8; 8] = [10, 0, 0x7c, 0x4f, 0, 0, 0, 0x0f];

// ---- primitives (MS-NLMP 6) ---------------------------------------------

type HmacMd5 = Hmac<Md5>;

/// HMAC_MD5(K, M) over the concatenation of `parts`.
pub fn hmac_md5(key: &[u8], parts: &[&[u8]]) -> [u8; 16] {
    let mut mac = <HmacMd5 as Mac>::new_from_slice(key).expect("HMAC accepts any key length");
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

fn md5(parts: &[&[u8]]) -> [u8; 16] {
    let mut h = Md5::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// RC4K(K, D) with a fresh 128-bit key state.
pub fn rc4k(key: &[u8; 16], data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    Rc4::<U16>::new(key.into()).apply_keystream(&mut out);
    out
}

/// Comparison whose time does not depend on where the inputs differ.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// UTF-16LE encoding (RPC_UNICODE_STRING contents).
pub fn utf16le(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
}

fn from_utf16le(b: &[u8]) -> Result<String, AuthError> {
    if !b.len().is_multiple_of(2) {
        return Err(AuthError::Malformed("odd-length UTF-16 string"));
    }
    let units: Vec<u16> = b
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16(&units).map_err(|_| AuthError::Malformed("invalid UTF-16 string"))
}

/// Uppercase as Windows does: one character to one character, leaving
/// characters whose uppercase form is several characters (e.g. ß) alone.
fn upcase(s: &str) -> String {
    s.chars()
        .map(|c| {
            let mut up = c.to_uppercase();
            match (up.next(), up.next()) {
                (Some(u), None) => u,
                _ => c,
            }
        })
        .collect()
}

// MS-NLMP 3.3.1: NTOWFv1(Passwd) = MD4(UNICODE(Passwd)).
/// The NT hash of a password (NTOWFv1).
pub fn nt_hash(password: &str) -> [u8; 16] {
    let mut h = Md4::new();
    h.update(utf16le(password));
    h.finalize().into()
}

// MS-NLMP 3.3.2: NTOWFv2(Passwd, User, UserDom) =
//   HMAC_MD5(MD4(UNICODE(Passwd)), UNICODE(ConcatenationOf(Uppercase(User), UserDom)))
/// NTOWFv2 from an already computed NT hash.
pub fn ntowfv2_from_hash(nt_hash: &[u8; 16], user: &str, domain: &str) -> [u8; 16] {
    let ud = utf16le(&format!("{}{}", upcase(user), domain));
    hmac_md5(nt_hash, &[&ud])
}

pub fn ntowfv2(password: &str, user: &str, domain: &str) -> [u8; 16] {
    ntowfv2_from_hash(&nt_hash(password), user, domain)
}

// MS-NLMP 3.3.2: NTProofStr = HMAC_MD5(ResponseKeyNT,
//   ConcatenationOf(CHALLENGE_MESSAGE.ServerChallenge, temp))
pub fn nt_proof_str(
    response_key_nt: &[u8; 16],
    server_challenge: &[u8; 8],
    temp: &[u8],
) -> [u8; 16] {
    hmac_md5(response_key_nt, &[server_challenge, temp])
}

// MS-NLMP 3.3.2: SessionBaseKey = HMAC_MD5(ResponseKeyNT, NTProofStr)
pub fn session_base_key(response_key_nt: &[u8; 16], nt_proof: &[u8; 16]) -> [u8; 16] {
    hmac_md5(response_key_nt, &[nt_proof])
}

// MS-NLMP 3.3.2: temp = ConcatenationOf(Responserversion, HiResponserversion,
//   Z(6), Time, ClientChallenge, Z(4), ServerName, Z(4))
/// The NTLMv2_CLIENT_CHALLENGE ("temp") blob (MS-NLMP 2.2.2.7).
pub fn ntlmv2_temp(timestamp: u64, client_challenge: &[u8; 8], av_pairs: &[u8]) -> Vec<u8> {
    let mut t = Vec::with_capacity(32 + av_pairs.len());
    t.extend_from_slice(&[1, 1, 0, 0, 0, 0, 0, 0]);
    t.extend_from_slice(&timestamp.to_le_bytes());
    t.extend_from_slice(client_challenge);
    t.extend_from_slice(&[0; 4]);
    t.extend_from_slice(av_pairs);
    t.extend_from_slice(&[0; 4]);
    t
}

// MS-NLMP 3.4.5.2 SIGNKEY (extended session security).
pub fn sign_key(exported_session_key: &[u8; 16], client: bool) -> [u8; 16] {
    let magic: &[u8] = if client {
        b"session key to client-to-server signing key magic constant\0"
    } else {
        b"session key to server-to-client signing key magic constant\0"
    };
    md5(&[exported_session_key, magic])
}

// MS-NLMP 3.4.5.3 SEALKEY (extended session security).
pub fn seal_key(neg_flags: u32, exported_session_key: &[u8; 16], client: bool) -> [u8; 16] {
    let key: &[u8] = if neg_flags & NEGOTIATE_128 != 0 {
        &exported_session_key[..]
    } else if neg_flags & NEGOTIATE_56 != 0 {
        &exported_session_key[..7]
    } else {
        &exported_session_key[..5]
    };
    let magic: &[u8] = if client {
        b"session key to client-to-server sealing key magic constant\0"
    } else {
        b"session key to server-to-client sealing key magic constant\0"
    };
    md5(&[key, magic])
}

// ---- AV pairs (MS-NLMP 2.2.2.1) -----------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AvPair {
    pub id: u16,
    pub value: Vec<u8>,
}

impl AvPair {
    pub fn string(id: u16, s: &str) -> AvPair {
        AvPair {
            id,
            value: utf16le(s),
        }
    }
    pub fn timestamp(t: u64) -> AvPair {
        AvPair {
            id: av::TIMESTAMP,
            value: t.to_le_bytes().to_vec(),
        }
    }
    pub fn flags(f: u32) -> AvPair {
        AvPair {
            id: av::FLAGS,
            value: f.to_le_bytes().to_vec(),
        }
    }
}

/// Parses AV pairs up to MsvAvEOL; bytes after the EOL are ignored (the
/// NTLMv2 temp blob is followed by Z(4)).
pub fn parse_av_pairs(buf: &[u8]) -> Result<Vec<AvPair>, AuthError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        let hdr = buf
            .get(pos..pos + 4)
            .ok_or(AuthError::Malformed("AV pair list not terminated"))?;
        let id = u16::from_le_bytes([hdr[0], hdr[1]]);
        let len = u16::from_le_bytes([hdr[2], hdr[3]]) as usize;
        pos += 4;
        let value = buf
            .get(pos..pos + len)
            .ok_or(AuthError::Malformed("AV pair overruns buffer"))?;
        pos += len;
        if id == av::EOL {
            return Ok(out);
        }
        out.push(AvPair {
            id,
            value: value.to_vec(),
        });
    }
}

/// Encodes AV pairs followed by MsvAvEOL.
pub fn encode_av_pairs(pairs: &[AvPair]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in pairs.iter().filter(|p| p.id != av::EOL) {
        let len = p.value.len().min(u16::MAX as usize);
        out.extend_from_slice(&p.id.to_le_bytes());
        out.extend_from_slice(&(len as u16).to_le_bytes());
        out.extend_from_slice(&p.value[..len]);
    }
    out.extend_from_slice(&[0, 0, 0, 0]);
    out
}

fn av_get(pairs: &[AvPair], id: u16) -> Option<&[u8]> {
    pairs.iter().find(|p| p.id == id).map(|p| &p.value[..])
}

fn av_flags(pairs: &[AvPair]) -> u32 {
    match av_get(pairs, av::FLAGS) {
        Some([a, b, c, d]) => u32::from_le_bytes([*a, *b, *c, *d]),
        _ => 0,
    }
}

// ---- message framing ----------------------------------------------------

/// Reads a `*Fields` triple (Len, MaxLen, BufferOffset; MS-NLMP 2.2.1.1) at
/// `at` and returns the referenced payload, checked against the message.
fn field(msg: &[u8], at: usize) -> Result<(&[u8], usize), AuthError> {
    let f = msg
        .get(at..at + 8)
        .ok_or(AuthError::Malformed("NTLMSSP message truncated"))?;
    let len = u16::from_le_bytes([f[0], f[1]]) as usize;
    let off = u32::from_le_bytes([f[4], f[5], f[6], f[7]]) as usize;
    if len == 0 {
        return Ok((&[], usize::MAX));
    }
    let data = off
        .checked_add(len)
        .and_then(|end| msg.get(off..end))
        .ok_or(AuthError::Malformed(
            "NTLMSSP field points outside the message",
        ))?;
    Ok((data, off))
}

fn u32_at(msg: &[u8], at: usize) -> Result<u32, AuthError> {
    let b = msg
        .get(at..at + 4)
        .ok_or(AuthError::Malformed("NTLMSSP message truncated"))?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn check_header(msg: &[u8], ty: u32) -> Result<(), AuthError> {
    if msg.len() < 12 || &msg[..8] != SIGNATURE {
        return Err(AuthError::Malformed("not an NTLMSSP message"));
    }
    if u32_at(msg, 8)? != ty {
        return Err(AuthError::Malformed("unexpected NTLMSSP message type"));
    }
    Ok(())
}

/// Builds a message: fixed header (with `*Fields` placeholders at the given
/// offsets) followed by the payloads, in order.
struct Builder {
    buf: Vec<u8>,
}

impl Builder {
    fn new(ty: u32, header_len: usize) -> Builder {
        let mut buf = vec![0u8; header_len];
        buf[..8].copy_from_slice(SIGNATURE);
        buf[8..12].copy_from_slice(&ty.to_le_bytes());
        Builder { buf }
    }
    fn put_u32(&mut self, at: usize, v: u32) {
        self.buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn put(&mut self, at: usize, b: &[u8]) {
        self.buf[at..at + b.len()].copy_from_slice(b);
    }
    fn payload(&mut self, fields_at: usize, data: &[u8]) {
        let off = self.buf.len() as u32;
        let len = data.len().min(u16::MAX as usize) as u16;
        self.buf[fields_at..fields_at + 2].copy_from_slice(&len.to_le_bytes());
        self.buf[fields_at + 2..fields_at + 4].copy_from_slice(&len.to_le_bytes());
        self.buf[fields_at + 4..fields_at + 8].copy_from_slice(&off.to_le_bytes());
        self.buf.extend_from_slice(&data[..len as usize]);
    }
}

fn decode_string(b: &[u8], unicode: bool) -> Result<String, AuthError> {
    if unicode {
        from_utf16le(b)
    } else {
        // OEM code page: treat as Latin-1, which is lossless for ASCII.
        Ok(b.iter().map(|&c| c as char).collect())
    }
}

fn encode_string(s: &str, unicode: bool) -> Vec<u8> {
    if unicode {
        utf16le(s)
    } else {
        s.chars()
            .map(|c| if (c as u32) < 256 { c as u8 } else { b'?' })
            .collect()
    }
}

// MS-NLMP 2.2.1.1 NEGOTIATE_MESSAGE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegotiateMessage {
    pub flags: u32,
    /// OEM domain name, if supplied.
    pub domain: Vec<u8>,
    /// OEM workstation name, if supplied.
    pub workstation: Vec<u8>,
    pub version: Option<[u8; 8]>,
}

impl NegotiateMessage {
    pub fn decode(msg: &[u8]) -> Result<Self, AuthError> {
        check_header(msg, MSG_NEGOTIATE)?;
        let flags = u32_at(msg, 12)?;
        // Very old clients send only the first 16 bytes.
        let (domain, workstation) = if msg.len() >= 32 {
            let d = if flags & NEGOTIATE_OEM_DOMAIN_SUPPLIED != 0 {
                field(msg, 16)?.0
            } else {
                &[]
            };
            let w = if flags & NEGOTIATE_OEM_WORKSTATION_SUPPLIED != 0 {
                field(msg, 24)?.0
            } else {
                &[]
            };
            (d.to_vec(), w.to_vec())
        } else {
            (Vec::new(), Vec::new())
        };
        let version = if flags & NEGOTIATE_VERSION != 0 && msg.len() >= 40 {
            msg.get(32..40).map(|v| v.try_into().expect("8 bytes"))
        } else {
            None
        };
        Ok(NegotiateMessage {
            flags,
            domain,
            workstation,
            version,
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Builder::new(MSG_NEGOTIATE, 40);
        b.put_u32(12, self.flags);
        if let Some(v) = self.version {
            b.put(32, &v);
        }
        b.payload(16, &self.domain);
        b.payload(24, &self.workstation);
        b.buf
    }
}

// MS-NLMP 2.2.1.2 CHALLENGE_MESSAGE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChallengeMessage {
    pub flags: u32,
    /// TargetName, encoded per the UNICODE/OEM flag.
    pub target_name: Vec<u8>,
    pub server_challenge: [u8; 8],
    /// Raw AV pair list.
    pub target_info: Vec<u8>,
    pub version: Option<[u8; 8]>,
}

impl ChallengeMessage {
    pub fn decode(msg: &[u8]) -> Result<Self, AuthError> {
        check_header(msg, MSG_CHALLENGE)?;
        let target_name = field(msg, 12)?.0.to_vec();
        let flags = u32_at(msg, 20)?;
        let server_challenge: [u8; 8] = msg
            .get(24..32)
            .ok_or(AuthError::Malformed("CHALLENGE truncated"))?
            .try_into()
            .expect("8 bytes");
        let (target_info, ti_off) = if msg.len() >= 48 {
            field(msg, 40)?
        } else {
            (&[][..], usize::MAX)
        };
        let tn_off = field(msg, 12)?.1;
        let version = if flags & NEGOTIATE_VERSION != 0 && tn_off.min(ti_off) >= 56 {
            msg.get(48..56).map(|v| v.try_into().expect("8 bytes"))
        } else {
            None
        };
        Ok(ChallengeMessage {
            flags,
            target_name,
            server_challenge,
            target_info: target_info.to_vec(),
            version,
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Builder::new(MSG_CHALLENGE, 56);
        b.put_u32(20, self.flags);
        b.put(24, &self.server_challenge);
        if let Some(v) = self.version {
            b.put(48, &v);
        }
        b.payload(12, &self.target_name);
        b.payload(40, &self.target_info);
        b.buf
    }
}

/// Offset of the MIC field in an AUTHENTICATE message (MS-NLMP 2.2.1.3).
pub const MIC_OFFSET: usize = 72;

// MS-NLMP 2.2.1.3 AUTHENTICATE_MESSAGE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticateMessage {
    pub lm_response: Vec<u8>,
    pub nt_response: Vec<u8>,
    pub domain: String,
    pub user: String,
    pub workstation: String,
    pub encrypted_random_session_key: Vec<u8>,
    pub flags: u32,
    pub version: Option<[u8; 8]>,
    /// The MIC field, when the message layout has room for one (payload
    /// starts at or after offset 88). Whether it is meaningful is said by
    /// MsvAvFlags in the NTLMv2 response.
    pub mic: Option<[u8; 16]>,
}

impl AuthenticateMessage {
    pub fn decode(msg: &[u8]) -> Result<Self, AuthError> {
        check_header(msg, MSG_AUTHENTICATE)?;
        let flags = u32_at(msg, 60)?;
        let unicode = flags & NEGOTIATE_UNICODE != 0;
        let mut payload_start = msg.len();
        let mut get = |at: usize| -> Result<&[u8], AuthError> {
            let (data, off) = field(msg, at)?;
            if !data.is_empty() {
                payload_start = payload_start.min(off);
            }
            Ok(data)
        };
        let lm_response = get(12)?.to_vec();
        let nt_response = get(20)?.to_vec();
        let domain = get(28)?;
        let user = get(36)?;
        let workstation = get(44)?;
        let encrypted_random_session_key = get(52)?.to_vec();
        let (domain, user, workstation) = (
            decode_string(domain, unicode)?,
            decode_string(user, unicode)?,
            decode_string(workstation, unicode)?,
        );
        if payload_start < 64 {
            return Err(AuthError::Malformed(
                "AUTHENTICATE payload overlaps its header",
            ));
        }
        let version = if payload_start >= 72 {
            msg.get(64..72).map(|v| v.try_into().expect("8 bytes"))
        } else {
            None
        };
        let mic = if payload_start >= MIC_OFFSET + 16 {
            msg.get(MIC_OFFSET..MIC_OFFSET + 16)
                .map(|v| v.try_into().expect("16 bytes"))
        } else {
            None
        };
        Ok(AuthenticateMessage {
            lm_response,
            nt_response,
            domain,
            user,
            workstation,
            encrypted_random_session_key,
            flags,
            version,
            mic,
        })
    }

    /// Encodes with the full 88-byte header (Version and MIC fields always
    /// present; MIC as given, or zero).
    pub fn encode(&self) -> Vec<u8> {
        let unicode = self.flags & NEGOTIATE_UNICODE != 0;
        let mut b = Builder::new(MSG_AUTHENTICATE, 88);
        b.put_u32(60, self.flags);
        b.put(64, &self.version.unwrap_or([0; 8]));
        b.put(MIC_OFFSET, &self.mic.unwrap_or([0; 16]));
        b.payload(28, &encode_string(&self.domain, unicode));
        b.payload(36, &encode_string(&self.user, unicode));
        b.payload(44, &encode_string(&self.workstation, unicode));
        b.payload(12, &self.lm_response);
        b.payload(20, &self.nt_response);
        b.payload(52, &self.encrypted_random_session_key);
        b.buf
    }
}

mod client;
mod security;
mod server;

pub use client::*;
pub use security::*;
pub use server::*;

#[cfg(test)]
mod tests;
