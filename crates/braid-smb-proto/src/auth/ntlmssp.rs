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

// ---- session security (MS-NLMP 3.4) --------------------------------------

/// NTLM session security with extended session security: per-direction
/// signing keys, sealing RC4 handles and sequence numbers
/// (connection-oriented mode, MS-NLMP 3.4.1 / 3.4.4.2).
pub struct NtlmSecurity {
    flags: u32,
    send_sign: [u8; 16],
    recv_sign: [u8; 16],
    send_seal_key: [u8; 16],
    recv_seal_key: [u8; 16],
    send_seal: Rc4<U16>,
    recv_seal: Rc4<U16>,
    send_seq: u32,
    recv_seq: u32,
}

impl std::fmt::Debug for NtlmSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NtlmSecurity")
            .field("flags", &format_args!("{:#010x}", self.flags))
            .field("send_seq", &self.send_seq)
            .field("recv_seq", &self.recv_seq)
            .finish_non_exhaustive()
    }
}

impl NtlmSecurity {
    /// Derives the keys of MS-NLMP 3.4.5.2/3.4.5.3 for one side. Requires
    /// extended session security (without it there are no signing keys).
    pub fn new(
        neg_flags: u32,
        exported_session_key: &[u8; 16],
        is_client: bool,
    ) -> Result<Self, AuthError> {
        if neg_flags & NEGOTIATE_EXTENDED_SESSIONSECURITY == 0 {
            return Err(AuthError::Unsupported(
                "NTLM signing without extended session security",
            ));
        }
        let cs = sign_key(exported_session_key, true);
        let ss = sign_key(exported_session_key, false);
        let cx = seal_key(neg_flags, exported_session_key, true);
        let sx = seal_key(neg_flags, exported_session_key, false);
        let (send_sign, recv_sign, send_seal_key, recv_seal_key) = if is_client {
            (cs, ss, cx, sx)
        } else {
            (ss, cs, sx, cx)
        };
        Ok(NtlmSecurity {
            flags: neg_flags,
            send_sign,
            recv_sign,
            send_seal_key,
            recv_seal_key,
            send_seal: Rc4::<U16>::new(&send_seal_key.into()),
            recv_seal: Rc4::<U16>::new(&recv_seal_key.into()),
            send_seq: 0,
            recv_seq: 0,
        })
    }

    // MS-NLMP 3.4.4.2: with extended session security,
    //   Checksum = HMAC_MD5(SigningKey, ConcatenationOf(SeqNum, Message))[0..7]
    //   if KEY_EXCH: Checksum = RC4(Handle, Checksum)
    //   Signature = Version(1) || Checksum || SeqNum
    fn mac(key: &[u8; 16], handle: &mut Rc4<U16>, flags: u32, seq: u32, msg: &[u8]) -> [u8; 16] {
        let full = hmac_md5(key, &[&seq.to_le_bytes(), msg]);
        let mut checksum = [0u8; 8];
        checksum.copy_from_slice(&full[..8]);
        if flags & NEGOTIATE_KEY_EXCH != 0 {
            handle.apply_keystream(&mut checksum);
        }
        let mut sig = [0u8; 16];
        sig[..4].copy_from_slice(&1u32.to_le_bytes());
        sig[4..12].copy_from_slice(&checksum);
        sig[12..].copy_from_slice(&seq.to_le_bytes());
        sig
    }

    /// GSS_GetMIC (MS-NLMP 3.4.4 / 3.4.6): signs an outgoing message.
    pub fn sign(&mut self, msg: &[u8]) -> [u8; 16] {
        let sig = Self::mac(
            &self.send_sign,
            &mut self.send_seal,
            self.flags,
            self.send_seq,
            msg,
        );
        self.send_seq = self.send_seq.wrapping_add(1);
        sig
    }

    /// GSS_VerifyMIC: checks an incoming message's signature.
    pub fn verify(&mut self, msg: &[u8], signature: &[u8]) -> Result<(), AuthError> {
        let expected = Self::mac(
            &self.recv_sign,
            &mut self.recv_seal,
            self.flags,
            self.recv_seq,
            msg,
        );
        self.recv_seq = self.recv_seq.wrapping_add(1);
        if ct_eq(&expected, signature) {
            Ok(())
        } else {
            Err(AuthError::MechListMic)
        }
    }

    /// Resets sequence numbers and RC4 state, as Windows and Samba do after
    /// the SPNEGO mechListMIC exchange.
    pub fn reset(&mut self) {
        self.send_seal = Rc4::<U16>::new(&self.send_seal_key.into());
        self.recv_seal = Rc4::<U16>::new(&self.recv_seal_key.into());
        self.send_seq = 0;
        self.recv_seq = 0;
    }
}

// ---- server ---------------------------------------------------------------

/// Result of a successful AUTHENTICATE.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthOutcome {
    pub user: String,
    pub domain: String,
    pub workstation: String,
    /// ExportedSessionKey (MS-NLMP 3.1.1.1): the SMB2 session key.
    pub session_key: [u8; 16],
    /// Empty user name and empty NT response (MS-NLMP 3.2.5.1.2).
    pub anonymous: bool,
}

impl std::fmt::Debug for AuthOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthOutcome")
            .field("user", &self.user)
            .field("domain", &self.domain)
            .field("workstation", &self.workstation)
            .field("anonymous", &self.anonymous)
            .finish_non_exhaustive()
    }
}

/// What the server learnt besides the outcome, for session security.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifiedAuth {
    pub neg_flags: u32,
    pub mic_present: bool,
    pub anonymous: bool,
}

/// Verifies an AUTHENTICATE message against the NEGOTIATE and CHALLENGE
/// messages of the same exchange (MS-NLMP 3.2.5.1.2, 3.3.2).
///
/// `lookup(user, domain)` returns the user's NT hash (NTOWFv1). The domain is
/// tried as sent, then empty (MS-NLMP 3.2.5.1.2: "NTLM servers SHOULD
/// support NTLM clients which incorrectly use NIL for the UserDom").
pub fn verify_authenticate(
    negotiate_msg: &[u8],
    challenge_msg: &[u8],
    auth_msg: &[u8],
    lookup: &dyn Fn(&str, &str) -> Option<[u8; 16]>,
) -> Result<(AuthOutcome, VerifiedAuth), AuthError> {
    let chal = ChallengeMessage::decode(challenge_msg)?;
    let auth = AuthenticateMessage::decode(auth_msg)?;
    // MS-NLMP 3.2.5.1.2: NegFlg is what both sides agreed on.
    let neg_flags = if auth.flags != 0 {
        chal.flags & auth.flags
    } else {
        chal.flags
    };

    let anonymous = auth.user.is_empty()
        && auth.nt_response.is_empty()
        && (auth.lm_response.is_empty() || auth.lm_response == [0]);

    let (session_base_key, mic_present) = if anonymous {
        // MS-NLMP 3.3.2: anonymous -> SessionBaseKey = Z(16), no MIC.
        ([0u8; 16], false)
    } else {
        if auth.nt_response.len() <= 24 {
            // 24 bytes is an NTLMv1 response; empty is LM-only.
            return Err(AuthError::LogonFailure);
        }
        if auth.nt_response.len() < 16 + 28 {
            return Err(AuthError::Malformed("NTLMv2 response too short"));
        }
        let (proof, temp) = auth.nt_response.split_at(16);
        // NTLMv2_CLIENT_CHALLENGE (2.2.2.7): AV pairs start at offset 28. A
        // response that does not parse is malformed whatever its proof
        // (INVALID_PARAMETER, as Windows and Samba answer: smbtorture
        // smb2.session.ntlmssp_bug14932), and says nothing about the password.
        let pairs = parse_av_pairs(&temp[28..])?;
        let nt_hash = lookup(&auth.user, &auth.domain).ok_or(AuthError::LogonFailure)?;
        let mut domains = vec![auth.domain.as_str()];
        if !auth.domain.is_empty() {
            domains.push("");
        }
        let key = domains
            .iter()
            .map(|d| ntowfv2_from_hash(&nt_hash, &auth.user, d))
            .find(|k| ct_eq(&nt_proof_str(k, &chal.server_challenge, temp), proof))
            .ok_or(AuthError::LogonFailure)?;
        let proof: [u8; 16] = proof.try_into().expect("16 bytes");
        (
            session_base_key(&key, &proof),
            av_flags(&pairs) & av::FLAG_MIC_PRESENT != 0,
        )
    };

    // MS-NLMP 3.4.5.1 KXKEY: for NTLMv2, KeyExchangeKey = SessionBaseKey.
    let kxkey = session_base_key;
    // MS-NLMP 3.2.5.1.2: with KEY_EXCH the client sent
    // RC4K(KeyExchangeKey, ExportedSessionKey).
    let exported =
        if neg_flags & NEGOTIATE_KEY_EXCH != 0 && auth.encrypted_random_session_key.len() == 16 {
            let k = rc4k(&kxkey, &auth.encrypted_random_session_key);
            <[u8; 16]>::try_from(&k[..]).expect("16 bytes")
        } else if neg_flags & NEGOTIATE_KEY_EXCH != 0
            && neg_flags & (NEGOTIATE_SIGN | NEGOTIATE_SEAL) != 0
            && !anonymous
        {
            return Err(AuthError::Malformed(
                "KEY_EXCH negotiated without an encrypted session key",
            ));
        } else {
            kxkey
        };

    // MS-NLMP 3.2.5.1.2: MIC = HMAC_MD5(ExportedSessionKey,
    //   ConcatenationOf(NEGOTIATE_MESSAGE, CHALLENGE_MESSAGE, AUTHENTICATE_MESSAGE))
    // with the MIC field zeroed.
    if mic_present {
        let mic = auth.mic.ok_or(AuthError::Malformed(
            "MsvAvFlags says MIC but there is no room",
        ))?;
        let mut zeroed = auth_msg.to_vec();
        zeroed[MIC_OFFSET..MIC_OFFSET + 16].fill(0);
        let expected = hmac_md5(&exported, &[negotiate_msg, challenge_msg, &zeroed]);
        if !ct_eq(&expected, &mic) {
            return Err(AuthError::MicMismatch);
        }
    }

    Ok((
        AuthOutcome {
            user: auth.user,
            domain: auth.domain,
            workstation: auth.workstation,
            session_key: exported,
            anonymous,
        },
        VerifiedAuth {
            neg_flags,
            mic_present,
            anonymous,
        },
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerState {
    AwaitNegotiate,
    AwaitAuthenticate,
    Done,
    Failed,
}

/// Server side of NTLMSSP: NEGOTIATE in, CHALLENGE out, AUTHENTICATE in.
pub struct NtlmServer {
    server_challenge: [u8; 8],
    timestamp: u64,
    netbios_name: String,
    dns_name: String,
    domain: String,
    state: ServerState,
    negotiate_msg: Vec<u8>,
    challenge_msg: Vec<u8>,
    verified: Option<(VerifiedAuth, [u8; 16])>,
}

impl std::fmt::Debug for NtlmServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NtlmServer")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl NtlmServer {
    /// `timestamp` is the current time as a FILETIME (100 ns since 1601);
    /// `server_challenge` must be fresh random bytes for every exchange.
    pub fn new(
        server_challenge: [u8; 8],
        timestamp: u64,
        netbios_name: &str,
        dns_name: &str,
        domain: &str,
    ) -> Self {
        NtlmServer {
            server_challenge,
            timestamp,
            netbios_name: netbios_name.to_string(),
            dns_name: dns_name.to_string(),
            domain: domain.to_string(),
            state: ServerState::AwaitNegotiate,
            negotiate_msg: Vec::new(),
            challenge_msg: Vec::new(),
            verified: None,
        }
    }

    // MS-NLMP 3.2.5.1.1: the server answers a NEGOTIATE_MESSAGE with a
    // CHALLENGE_MESSAGE.
    pub fn challenge(&mut self, negotiate: &[u8]) -> Result<Vec<u8>, AuthError> {
        if self.state != ServerState::AwaitNegotiate {
            return Err(AuthError::State("NTLM NEGOTIATE after the first message"));
        }
        self.state = ServerState::Failed;
        let neg = NegotiateMessage::decode(negotiate)?;
        let c = neg.flags;
        let mut f = NEGOTIATE_NTLM
            | REQUEST_TARGET
            | TARGET_TYPE_SERVER
            | NEGOTIATE_TARGET_INFO
            | NEGOTIATE_VERSION
            | NEGOTIATE_ALWAYS_SIGN;
        f |= if c & NEGOTIATE_UNICODE != 0 {
            NEGOTIATE_UNICODE
        } else {
            NEGOTIATE_OEM
        };
        f |= c
            & (NEGOTIATE_SIGN
                | NEGOTIATE_SEAL
                | NEGOTIATE_EXTENDED_SESSIONSECURITY
                | NEGOTIATE_128
                | NEGOTIATE_56
                | NEGOTIATE_KEY_EXCH
                | NEGOTIATE_IDENTIFY);
        let unicode = f & NEGOTIATE_UNICODE != 0;
        let dns_domain = match self.dns_name.split_once('.') {
            Some((_, d)) if !d.is_empty() => d.to_string(),
            _ => self.dns_name.clone(),
        };
        // MS-NLMP 3.2.5.1.1: TargetInfo carries the names and MsvAvTimestamp.
        let target_info = encode_av_pairs(&[
            AvPair::string(av::NB_DOMAIN_NAME, &self.domain),
            AvPair::string(av::NB_COMPUTER_NAME, &self.netbios_name),
            AvPair::string(av::DNS_DOMAIN_NAME, &dns_domain),
            AvPair::string(av::DNS_COMPUTER_NAME, &self.dns_name),
            AvPair::timestamp(self.timestamp),
        ]);
        let msg = ChallengeMessage {
            flags: f,
            target_name: encode_string(&self.netbios_name, unicode),
            server_challenge: self.server_challenge,
            target_info,
            version: Some(VERSION),
        }
        .encode();
        self.negotiate_msg = negotiate.to_vec();
        self.challenge_msg = msg.clone();
        self.state = ServerState::AwaitAuthenticate;
        Ok(msg)
    }

    pub fn authenticate(
        &mut self,
        auth: &[u8],
        lookup_nt_hash: &dyn Fn(&str, &str) -> Option<[u8; 16]>,
    ) -> Result<AuthOutcome, AuthError> {
        if self.state != ServerState::AwaitAuthenticate {
            return Err(AuthError::State("NTLM AUTHENTICATE out of order"));
        }
        self.state = ServerState::Failed;
        let (outcome, v) = verify_authenticate(
            &self.negotiate_msg,
            &self.challenge_msg,
            auth,
            lookup_nt_hash,
        )?;
        self.verified = Some((v, outcome.session_key));
        self.state = ServerState::Done;
        Ok(outcome)
    }

    /// Negotiated flags, once AUTHENTICATE was verified.
    pub fn negotiated_flags(&self) -> Option<u32> {
        self.verified.map(|(v, _)| v.neg_flags)
    }

    /// Whether the client put a MIC in AUTHENTICATE (Samba's "new SPNEGO":
    /// the client will send, and expect, a mechListMIC).
    pub fn mic_present(&self) -> bool {
        self.verified.is_some_and(|(v, _)| v.mic_present)
    }

    /// Signing is available: NEGOTIATE_SIGN and extended session security
    /// were negotiated for a non-anonymous session (MS-NLMP 3.4).
    pub fn can_sign(&self) -> bool {
        self.verified.is_some_and(|(v, key)| {
            v.neg_flags & NEGOTIATE_SIGN != 0
                && v.neg_flags & NEGOTIATE_EXTENDED_SESSIONSECURITY != 0
                && !v.anonymous
                && key != [0; 16]
        })
    }

    /// Session security (server role) after a successful AUTHENTICATE.
    pub fn session_security(&self) -> Result<NtlmSecurity, AuthError> {
        let (v, key) = self
            .verified
            .ok_or(AuthError::State("NTLM not authenticated"))?;
        NtlmSecurity::new(v.neg_flags, &key, false)
    }
}

// ---- client ---------------------------------------------------------------

/// Caller-supplied randomness and time for one client exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientEntropy {
    pub client_challenge: [u8; 8],
    /// ExportedSessionKey when key exchange is negotiated.
    pub random_session_key: [u8; 16],
    /// FILETIME used when the server sends no MsvAvTimestamp.
    pub timestamp: u64,
}

impl ClientEntropy {
    /// Fresh random values from the operating system's RNG, with `timestamp`
    /// as given.
    pub fn random(timestamp: u64) -> Self {
        use rand::RngCore;
        let mut e = ClientEntropy {
            client_challenge: [0; 8],
            random_session_key: [0; 16],
            timestamp,
        };
        rand::rngs::OsRng.fill_bytes(&mut e.client_challenge);
        rand::rngs::OsRng.fill_bytes(&mut e.random_session_key);
        e
    }
}

/// Flags Braid's client asks for (as Windows 10 does, minus OEM/LM).
pub const CLIENT_FLAGS: u32 = NEGOTIATE_UNICODE
    | REQUEST_TARGET
    | NEGOTIATE_SIGN
    | NEGOTIATE_SEAL
    | NEGOTIATE_NTLM
    | NEGOTIATE_ALWAYS_SIGN
    | NEGOTIATE_EXTENDED_SESSIONSECURITY
    | NEGOTIATE_TARGET_INFO
    | NEGOTIATE_VERSION
    | NEGOTIATE_128
    | NEGOTIATE_KEY_EXCH
    | NEGOTIATE_56;

/// Client side of NTLMSSP (NTLMv2 only).
pub struct NtlmClient {
    user: String,
    domain: String,
    workstation: String,
    nt_hash: Option<[u8; 16]>,
    negotiate_msg: Vec<u8>,
    result: Option<(u32, [u8; 16])>,
}

impl std::fmt::Debug for NtlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NtlmClient")
            .field("user", &self.user)
            .field("domain", &self.domain)
            .finish_non_exhaustive()
    }
}

impl NtlmClient {
    pub fn new(user: &str, domain: &str, password: &str) -> Self {
        Self::from_nt_hash(user, domain, nt_hash(password))
    }

    pub fn from_nt_hash(user: &str, domain: &str, nt_hash: [u8; 16]) -> Self {
        NtlmClient {
            user: user.to_string(),
            domain: domain.to_string(),
            workstation: String::new(),
            nt_hash: Some(nt_hash),
            negotiate_msg: Vec::new(),
            result: None,
        }
    }

    /// Anonymous logon: empty user, empty NT response (MS-NLMP 3.3.2).
    pub fn anonymous() -> Self {
        NtlmClient {
            user: String::new(),
            domain: String::new(),
            workstation: String::new(),
            nt_hash: None,
            negotiate_msg: Vec::new(),
            result: None,
        }
    }

    pub fn with_workstation(mut self, workstation: &str) -> Self {
        self.workstation = workstation.to_string();
        self
    }

    // MS-NLMP 3.1.5.1.1: the client sends a NEGOTIATE_MESSAGE.
    pub fn negotiate(&mut self) -> Vec<u8> {
        let msg = NegotiateMessage {
            flags: CLIENT_FLAGS,
            domain: vec![],
            workstation: vec![],
            version: Some(VERSION),
        }
        .encode();
        self.negotiate_msg = msg.clone();
        msg
    }

    // MS-NLMP 3.1.5.1.2: the client answers a CHALLENGE_MESSAGE with an
    // AUTHENTICATE_MESSAGE.
    pub fn authenticate(
        &mut self,
        challenge: &[u8],
        entropy: &ClientEntropy,
    ) -> Result<Vec<u8>, AuthError> {
        if self.negotiate_msg.is_empty() {
            return Err(AuthError::State("NTLM client: negotiate() first"));
        }
        let chal = ChallengeMessage::decode(challenge)?;
        let neg_flags = chal.flags & (CLIENT_FLAGS | TARGET_TYPE_SERVER | TARGET_TYPE_DOMAIN);
        if neg_flags & NEGOTIATE_UNICODE == 0 {
            return Err(AuthError::Unsupported("server did not agree to Unicode"));
        }
        let server_pairs = parse_av_pairs(&chal.target_info)?;
        let server_time = av_get(&server_pairs, av::TIMESTAMP)
            .and_then(|v| <[u8; 8]>::try_from(v).ok())
            .map(u64::from_le_bytes);

        let (lm, nt, base_key, with_mic) = match self.nt_hash {
            None => (vec![0u8], Vec::new(), [0u8; 16], false),
            Some(hash) => {
                let key = ntowfv2_from_hash(&hash, &self.user, &self.domain);
                // MS-NLMP 3.1.5.1.2: with MsvAvTimestamp the client uses the
                // server's time, sends Z(24) as LM response, sets MsvAvFlags
                // bit 0x2 and fills in the MIC.
                let mut pairs: Vec<AvPair> = server_pairs
                    .iter()
                    .filter(|p| p.id != av::FLAGS)
                    .cloned()
                    .collect();
                let with_mic = server_time.is_some();
                let mut avf = av_flags(&server_pairs);
                if with_mic {
                    avf |= av::FLAG_MIC_PRESENT;
                }
                if avf != 0 {
                    pairs.push(AvPair::flags(avf));
                }
                pairs.push(AvPair {
                    id: av::CHANNEL_BINDINGS,
                    value: vec![0; 16],
                });
                let time = server_time.unwrap_or(entropy.timestamp);
                let temp = ntlmv2_temp(time, &entropy.client_challenge, &encode_av_pairs(&pairs));
                let proof = nt_proof_str(&key, &chal.server_challenge, &temp);
                let mut nt = proof.to_vec();
                nt.extend_from_slice(&temp);
                let lm = if with_mic {
                    vec![0u8; 24]
                } else {
                    let mut lm =
                        hmac_md5(&key, &[&chal.server_challenge, &entropy.client_challenge])
                            .to_vec();
                    lm.extend_from_slice(&entropy.client_challenge);
                    lm
                };
                (lm, nt, session_base_key(&key, &proof), with_mic)
            }
        };
        let (exported, enc_key) = if neg_flags & NEGOTIATE_KEY_EXCH != 0 {
            (
                entropy.random_session_key,
                rc4k(&base_key, &entropy.random_session_key),
            )
        } else {
            (base_key, Vec::new())
        };
        let mut auth = AuthenticateMessage {
            lm_response: lm,
            nt_response: nt,
            domain: self.domain.clone(),
            user: self.user.clone(),
            workstation: self.workstation.clone(),
            encrypted_random_session_key: enc_key,
            flags: neg_flags,
            version: Some(VERSION),
            mic: None,
        };
        let mut msg = auth.encode();
        if with_mic {
            let mic = hmac_md5(&exported, &[&self.negotiate_msg, challenge, &msg]);
            auth.mic = Some(mic);
            msg[MIC_OFFSET..MIC_OFFSET + 16].copy_from_slice(&mic);
        }
        self.result = Some((neg_flags, exported));
        Ok(msg)
    }

    /// ExportedSessionKey, after `authenticate`.
    pub fn session_key(&self) -> Option<[u8; 16]> {
        self.result.map(|(_, k)| k)
    }

    pub fn negotiated_flags(&self) -> Option<u32> {
        self.result.map(|(f, _)| f)
    }

    pub fn can_sign(&self) -> bool {
        self.nt_hash.is_some()
            && self.result.is_some_and(|(f, _)| {
                f & NEGOTIATE_SIGN != 0 && f & NEGOTIATE_EXTENDED_SESSIONSECURITY != 0
            })
    }

    pub fn session_security(&self) -> Result<NtlmSecurity, AuthError> {
        let (f, key) = self
            .result
            .ok_or(AuthError::State("NTLM not authenticated"))?;
        NtlmSecurity::new(f, &key, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    // MS-NLMP 4.2.4: user "User", domain "Domain", password "Password",
    // server challenge 0123456789abcdef, client challenge aa*8, time 0,
    // random session key 55*16.
    const CHALLENGE_4_2_4: &str = "4e544c4d53535000020000000c000c003800000033828ae20123456789abcdef00000000000000002400240044000000060070170000000f53006500720076006500720002000c0044006f006d00610069006e0001000c0053006500720076006500720000000000";
    const AUTHENTICATE_4_2_4: &str = "4e544c4d5353500003000000180018006c00000054005400840000000c000c00480000000800080054000000100010005c00000010001000d8000000358288e20501280a0000000f44006f006d00610069006e00550073006500720043004f004d005000550054004500520086c35097ac9cec102554764a57cccc19aaaaaaaaaaaaaaaa68cd0ab851e51c96aabc927bebef6a1c01010000000000000000000000000000aaaaaaaaaaaaaaaa0000000002000c0044006f006d00610069006e0001000c005300650072007600650072000000000000000000c5dad2544fc9799094ce1ce90bc9d03e";

    #[test]
    fn ms_nlmp_4_2_2_ntowfv1() {
        // MS-NLMP 4.2.2.1.2
        assert_eq!(
            nt_hash("Password").to_vec(),
            h("a4f49c406510bdcab6824ee7c30fd852")
        );
    }

    #[test]
    fn ms_nlmp_4_2_4_vectors() {
        // 4.2.4.1.1 NTOWFv2
        let key = ntowfv2("Password", "User", "Domain");
        assert_eq!(key.to_vec(), h("0c868a403bfd7a93a3001ef22ef02e3f"));
        assert_eq!(ntowfv2("Password", "user", "Domain"), key);
        assert_ne!(ntowfv2("Password", "User", "domain"), key);
        // 4.2.4.2.2 NTLMv2 response: temp over the CHALLENGE's target info.
        let chal = ChallengeMessage::decode(&h(CHALLENGE_4_2_4)).unwrap();
        assert_eq!(chal.server_challenge.to_vec(), h("0123456789abcdef"));
        assert_eq!(chal.flags, 0xe28a8233);
        let pairs = parse_av_pairs(&chal.target_info).unwrap();
        assert_eq!(pairs.len(), 2);
        let temp = ntlmv2_temp(0, &[0xaa; 8], &chal.target_info);
        let proof = nt_proof_str(&key, &chal.server_challenge, &temp);
        assert_eq!(proof.to_vec(), h("68cd0ab851e51c96aabc927bebef6a1c"));
        // 4.2.4.1.2 Session base key
        let sbk = session_base_key(&key, &proof);
        assert_eq!(sbk.to_vec(), h("8de40ccadbc14a82f15cb0ad0de95ca3"));
        // 4.2.4.2.3 Encrypted session key
        assert_eq!(
            rc4k(&sbk, &[0x55; 16]),
            h("c5dad2544fc9799094ce1ce90bc9d03e")
        );
        // 4.2.4.4 keys
        assert_eq!(
            sign_key(&[0x55; 16], true).to_vec(),
            h("4788dc861b4782f35d43fd98fe1a2d39")
        );
        assert_eq!(
            seal_key(chal.flags, &[0x55; 16], true).to_vec(),
            h("59f600973cc4960a25480a7c196e4c58")
        );
        // 4.2.4.2.1 LMv2 response
        let lm = hmac_md5(&key, &[&chal.server_challenge, &[0xaa; 8]]);
        assert_eq!(lm.to_vec(), h("86c35097ac9cec102554764a57cccc19"));
    }

    #[test]
    fn ms_nlmp_4_2_4_signature() {
        // 4.2.4.4: signature of "Plaintext" (UTF-16) with seq 0. The spec's
        // example seals first, advancing the RC4 handle by 18 bytes; do the
        // same here.
        let flags = 0xe28a8233;
        let mut sec = NtlmSecurity::new(flags, &[0x55; 16], true).unwrap();
        let msg = utf16le("Plaintext");
        let mut sealed = msg.clone();
        sec.send_seal.apply_keystream(&mut sealed);
        assert_eq!(sealed, h("54e50165bf1936dc996020c1811b0f06fb5f"));
        let sig = sec.sign(&msg);
        assert_eq!(sig.to_vec(), h("010000007fb38ec5c55d497600000000"));
    }

    #[test]
    fn ms_nlmp_4_2_4_authenticate_verifies() {
        let auth = h(AUTHENTICATE_4_2_4);
        let msg = AuthenticateMessage::decode(&auth).unwrap();
        assert_eq!(msg.user, "User");
        assert_eq!(msg.domain, "Domain");
        assert_eq!(msg.workstation, "COMPUTER");
        assert_eq!(msg.mic, None);
        let lookup = |u: &str, _d: &str| (u == "User").then(|| nt_hash("Password"));
        let (out, v) = verify_authenticate(b"", &h(CHALLENGE_4_2_4), &auth, &lookup).unwrap();
        assert_eq!(out.session_key, [0x55; 16]);
        assert!(!out.anonymous);
        assert!(!v.mic_present);
        let wrong = |_: &str, _: &str| Some(nt_hash("password"));
        assert_eq!(
            verify_authenticate(b"", &h(CHALLENGE_4_2_4), &auth, &wrong).unwrap_err(),
            AuthError::LogonFailure
        );
        let unknown = |_: &str, _: &str| None;
        assert_eq!(
            verify_authenticate(b"", &h(CHALLENGE_4_2_4), &auth, &unknown).unwrap_err(),
            AuthError::LogonFailure
        );
    }

    fn pair(user: &str, domain: &str, password: &str) -> (NtlmServer, NtlmClient) {
        let server = NtlmServer::new(
            [1, 2, 3, 4, 5, 6, 7, 8],
            133_000_000_000_000_000,
            "BRAID",
            "braid.example.com",
            "WORKGROUP",
        );
        (
            server,
            NtlmClient::new(user, domain, password).with_workstation("CLIENT"),
        )
    }

    const ENTROPY: ClientEntropy = ClientEntropy {
        client_challenge: [9; 8],
        random_session_key: [0x42; 16],
        timestamp: 0,
    };

    fn users(u: &str, _d: &str) -> Option<[u8; 16]> {
        (u.eq_ignore_ascii_case("alice")).then(|| nt_hash("s3cret!"))
    }

    #[test]
    fn round_trip_same_session_key() {
        for domain in ["WORKGROUP", "", "other"] {
            let (mut s, mut c) = pair("alice", domain, "s3cret!");
            let chal = s.challenge(&c.negotiate()).unwrap();
            let auth = c.authenticate(&chal, &ENTROPY).unwrap();
            let out = s.authenticate(&auth, &users).unwrap();
            assert_eq!(out.user, "alice");
            assert_eq!(out.domain, domain);
            assert_eq!(out.workstation, "CLIENT");
            assert_eq!(out.session_key, [0x42; 16]);
            assert_eq!(c.session_key(), Some([0x42; 16]));
            assert!(s.mic_present());
            assert!(s.can_sign() && c.can_sign());
            // Signing keys agree in both directions.
            let mut cs = c.session_security().unwrap();
            let mut ss = s.session_security().unwrap();
            let sig = cs.sign(b"hello");
            ss.verify(b"hello", &sig).unwrap();
            let sig = ss.sign(b"back");
            cs.verify(b"back", &sig).unwrap();
            assert!(cs.verify(b"back", &sig).is_err());
        }
    }

    #[test]
    fn client_nil_domain_accepted() {
        // A client that sends a domain but computed NTOWFv2 with NIL.
        let (mut s, mut c) = pair("alice", "", "s3cret!");
        let chal = s.challenge(&c.negotiate()).unwrap();
        let auth = c.authenticate(&chal, &ENTROPY).unwrap();
        let mut m = AuthenticateMessage::decode(&auth).unwrap();
        m.domain = "SOMEDOMAIN".into();
        m.mic = None;
        // Re-encoding invalidates the MIC, so recompute it.
        let mut enc = m.encode();
        let mic = hmac_md5(&[0x42; 16], &[&c.negotiate_msg, &chal, &enc]);
        enc[MIC_OFFSET..MIC_OFFSET + 16].copy_from_slice(&mic);
        let out = s.authenticate(&enc, &users).unwrap();
        assert_eq!(out.domain, "SOMEDOMAIN");
    }

    #[test]
    fn wrong_password_and_tampering() {
        let (mut s, mut c) = pair("alice", "WORKGROUP", "wrong");
        let chal = s.challenge(&c.negotiate()).unwrap();
        let auth = c.authenticate(&chal, &ENTROPY).unwrap();
        assert_eq!(
            s.authenticate(&auth, &users).unwrap_err(),
            AuthError::LogonFailure
        );
        // Second attempt on the same state is refused.
        assert!(s.authenticate(&auth, &users).is_err());

        // Flip a bit of the MIC.
        let (mut s, mut c) = pair("alice", "WORKGROUP", "s3cret!");
        let chal = s.challenge(&c.negotiate()).unwrap();
        let mut auth = c.authenticate(&chal, &ENTROPY).unwrap();
        auth[MIC_OFFSET] ^= 1;
        assert_eq!(
            s.authenticate(&auth, &users).unwrap_err(),
            AuthError::MicMismatch
        );

        // Tamper with the encrypted session key: MIC no longer matches.
        let (mut s, mut c) = pair("alice", "WORKGROUP", "s3cret!");
        let chal = s.challenge(&c.negotiate()).unwrap();
        let mut auth = c.authenticate(&chal, &ENTROPY).unwrap();
        let n = auth.len();
        auth[n - 1] ^= 1;
        assert_eq!(
            s.authenticate(&auth, &users).unwrap_err(),
            AuthError::MicMismatch
        );
    }

    #[test]
    fn anonymous() {
        let mut s = NtlmServer::new([7; 8], 1, "BRAID", "braid", "WORKGROUP");
        let mut c = NtlmClient::anonymous();
        let chal = s.challenge(&c.negotiate()).unwrap();
        let auth = c.authenticate(&chal, &ENTROPY).unwrap();
        let out = s.authenticate(&auth, &|_: &str, _: &str| None).unwrap();
        assert!(out.anonymous);
        assert!(!s.can_sign());
    }

    #[test]
    fn ntlmv1_refused() {
        let (mut s, mut c) = pair("alice", "", "s3cret!");
        let chal = s.challenge(&c.negotiate()).unwrap();
        let auth = c.authenticate(&chal, &ENTROPY).unwrap();
        let mut m = AuthenticateMessage::decode(&auth).unwrap();
        m.nt_response.truncate(24);
        assert_eq!(
            s.authenticate(&m.encode(), &users).unwrap_err(),
            AuthError::LogonFailure
        );
    }

    #[test]
    fn truncated_ntlmv2_blob_is_malformed_not_a_logon_failure() {
        // smbtorture smb2.session.ntlmssp_bug14932: a bogus NTProofStr over
        // a blob whose AV pairs run past its end (95 bytes in all).
        let (mut s, mut c) = pair("alice", "", "s3cret!");
        let chal = s.challenge(&c.negotiate()).unwrap();
        let auth = c.authenticate(&chal, &ENTROPY).unwrap();
        let mut m = AuthenticateMessage::decode(&auth).unwrap();
        m.nt_response.truncate(95);
        m.nt_response[..16].fill(0xab);
        let err = s.authenticate(&m.encode(), &users).unwrap_err();
        assert!(matches!(err, AuthError::Malformed(_)), "{err:?}");
        assert_eq!(err.nt_status(), crate::NtStatus::INVALID_PARAMETER);
    }

    #[test]
    fn message_round_trips() {
        let n = NegotiateMessage {
            flags: CLIENT_FLAGS,
            domain: vec![],
            workstation: vec![],
            version: Some(VERSION),
        };
        assert_eq!(NegotiateMessage::decode(&n.encode()).unwrap(), n);
        let c = ChallengeMessage::decode(&h(CHALLENGE_4_2_4)).unwrap();
        assert_eq!(ChallengeMessage::decode(&c.encode()).unwrap(), c);
        let a = AuthenticateMessage::decode(&h(AUTHENTICATE_4_2_4)).unwrap();
        let mut a2 = AuthenticateMessage::decode(&a.encode()).unwrap();
        assert_eq!(a2.mic, Some([0; 16]));
        a2.mic = None;
        assert_eq!(a2, a);
    }

    proptest! {
        #[test]
        fn decoders_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..300), ty in 1u32..4) {
            if bytes.len() >= 12 {
                bytes[..8].copy_from_slice(SIGNATURE);
                bytes[8..12].copy_from_slice(&ty.to_le_bytes());
            }
            let _ = NegotiateMessage::decode(&bytes);
            let _ = ChallengeMessage::decode(&bytes);
            let _ = AuthenticateMessage::decode(&bytes);
            let _ = parse_av_pairs(&bytes);
            let lookup = |_: &str, _: &str| Some([0u8; 16]);
            let _ = verify_authenticate(b"", &h(CHALLENGE_4_2_4), &bytes, &lookup);
            let mut s = NtlmServer::new([0; 8], 0, "A", "a", "B");
            let _ = s.challenge(&bytes);
            let mut c = NtlmClient::new("u", "d", "p");
            c.negotiate();
            let _ = c.authenticate(&bytes, &ENTROPY);
        }

        #[test]
        fn mutated_authenticate_never_panics(idx in 0usize..400, val in any::<u8>()) {
            let mut auth = h(AUTHENTICATE_4_2_4);
            let i = idx % auth.len();
            auth[i] = val;
            let lookup = |_: &str, _: &str| Some(nt_hash("Password"));
            let _ = verify_authenticate(b"", &h(CHALLENGE_4_2_4), &auth, &lookup);
        }

        #[test]
        fn authenticate_round_trip(user in "[a-zA-Z0-9]{0,12}", domain in "[A-Z]{0,8}", ws in "[A-Z]{0,8}",
                                   lm in proptest::collection::vec(any::<u8>(), 0..30),
                                   nt in proptest::collection::vec(any::<u8>(), 0..80),
                                   key in proptest::collection::vec(any::<u8>(), 0..17)) {
            let a = AuthenticateMessage { lm_response: lm, nt_response: nt, domain, user, workstation: ws,
                encrypted_random_session_key: key, flags: CLIENT_FLAGS, version: Some(VERSION), mic: Some([3; 16]) };
            prop_assert_eq!(AuthenticateMessage::decode(&a.encode()).unwrap(), a);
        }
    }
}
