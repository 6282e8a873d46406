//! A minimal DER (ITU-T X.690) reader and writer: just enough ASN.1 for
//! SPNEGO (RFC 4178, MS-SPNG) and the GSS-API initial-token framing
//! (RFC 2743 section 3.1).
//!
//! The reader never recurses and never indexes without a bounds check; any
//! malformed, truncated or unsupported encoding is a [`DerError`], never a
//! panic. Only single-byte (low-number) tags and definite lengths of up to
//! four length octets are accepted — nothing in SPNEGO needs more.

use std::fmt;
use thiserror::Error;

/// Universal tags (X.690 8.1.2, X.680 8.4).
pub const TAG_BOOLEAN: u8 = 0x01;
pub const TAG_INTEGER: u8 = 0x02;
pub const TAG_BIT_STRING: u8 = 0x03;
pub const TAG_OCTET_STRING: u8 = 0x04;
pub const TAG_OID: u8 = 0x06;
pub const TAG_ENUMERATED: u8 = 0x0a;
pub const TAG_GENERAL_STRING: u8 = 0x1b;
/// SEQUENCE / SEQUENCE OF, constructed.
pub const TAG_SEQUENCE: u8 = 0x30;
/// `[APPLICATION 0]` constructed — the GSS-API InitialContextToken
/// (RFC 2743 section 3.1).
pub const TAG_APPLICATION_0: u8 = 0x60;

/// Bit 6 of the identifier octet: constructed encoding (X.690 8.1.2.5).
pub const CONSTRUCTED: u8 = 0x20;

/// Largest value accepted; SMB security buffers are at most 64 KiB anyway
/// and Samba caps SPNEGO tokens at 0xFFFF.
pub const MAX_LEN: usize = 1 << 24;

/// A constructed context-specific tag `[n]` (X.690 8.1.2.2, class bits 10).
pub const fn context(n: u8) -> u8 {
    0xa0 | (n & 0x1f)
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DerError {
    #[error("DER: truncated at offset {0}")]
    Truncated(usize),
    #[error("DER: invalid length encoding at offset {0}")]
    BadLength(usize),
    #[error("DER: expected tag {expected:#04x}, found {found:#04x}")]
    UnexpectedTag { expected: u8, found: u8 },
    #[error("DER: unsupported encoding: {0}")]
    Unsupported(&'static str),
    #[error("DER: {0} trailing bytes")]
    TrailingData(usize),
    #[error("DER: invalid {0}")]
    Invalid(&'static str),
}

pub type DerResult<T> = Result<T, DerError>;

/// One tag-length-value element borrowed from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tlv<'a> {
    pub tag: u8,
    /// The contents octets.
    pub value: &'a [u8],
    /// The whole element: identifier, length and contents octets.
    pub raw: &'a [u8],
}

impl<'a> Tlv<'a> {
    pub fn is_constructed(&self) -> bool {
        self.tag & CONSTRUCTED != 0
    }
    /// A reader over this element's contents (for constructed types).
    pub fn reader(&self) -> DerReader<'a> {
        DerReader::new(self.value)
    }
}

/// Cursor over a sequence of DER elements.
#[derive(Debug, Clone, Copy)]
pub struct DerReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> DerReader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        DerReader { buf, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The tag of the next element, if any.
    pub fn peek_tag(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    /// Reads one element (X.690 8.1.1: identifier, length, contents).
    pub fn read(&mut self) -> DerResult<Tlv<'a>> {
        let start = self.pos;
        let tag = *self.buf.get(start).ok_or(DerError::Truncated(start))?;
        // X.690 8.1.2.4: tag numbers >= 31 use subsequent octets; SPNEGO
        // never does.
        if tag & 0x1f == 0x1f {
            return Err(DerError::Unsupported("high tag number form"));
        }
        let (len, len_octets) = read_length(self.buf, start + 1)?;
        let value_start = start + 1 + len_octets;
        let end = value_start
            .checked_add(len)
            .ok_or(DerError::BadLength(start + 1))?;
        if end > self.buf.len() {
            return Err(DerError::Truncated(value_start));
        }
        self.pos = end;
        Ok(Tlv {
            tag,
            value: &self.buf[value_start..end],
            raw: &self.buf[start..end],
        })
    }

    /// Reads one element and checks its tag.
    pub fn expect(&mut self, tag: u8) -> DerResult<Tlv<'a>> {
        let found = self.peek_tag().ok_or(DerError::Truncated(self.pos))?;
        if found != tag {
            return Err(DerError::UnexpectedTag {
                expected: tag,
                found,
            });
        }
        self.read()
    }

    /// Reads the next element only if it carries `tag`.
    pub fn optional(&mut self, tag: u8) -> DerResult<Option<Tlv<'a>>> {
        if self.peek_tag() == Some(tag) {
            self.read().map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn read_oid(&mut self) -> DerResult<Oid> {
        Oid::from_der_content(self.expect(TAG_OID)?.value)
    }

    pub fn read_octet_string(&mut self) -> DerResult<&'a [u8]> {
        Ok(self.expect(TAG_OCTET_STRING)?.value)
    }

    /// ENUMERATED restricted to one contents octet, non-negative
    /// (X.690 8.4 / 8.3).
    pub fn read_small_enumerated(&mut self) -> DerResult<u8> {
        let v = self.expect(TAG_ENUMERATED)?.value;
        match v {
            [b] if *b < 0x80 => Ok(*b),
            _ => Err(DerError::Invalid("ENUMERATED value")),
        }
    }

    /// Errors if anything is left.
    pub fn finish(&self) -> DerResult<()> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DerError::TrailingData(n)),
        }
    }
}

/// X.690 8.1.3: definite length, short or long form. Returns the length and
/// how many octets encoded it.
fn read_length(buf: &[u8], at: usize) -> DerResult<(usize, usize)> {
    let first = *buf.get(at).ok_or(DerError::Truncated(at))?;
    if first < 0x80 {
        return Ok((first as usize, 1));
    }
    let n = (first & 0x7f) as usize;
    if n == 0 {
        // X.690 8.1.3.6: indefinite form is BER only.
        return Err(DerError::Unsupported("indefinite length"));
    }
    if n > 4 {
        return Err(DerError::BadLength(at));
    }
    let bytes = buf
        .get(at + 1..at + 1 + n)
        .ok_or(DerError::Truncated(at + 1))?;
    let mut len: usize = 0;
    for &b in bytes {
        len = (len << 8) | b as usize;
    }
    if len > MAX_LEN {
        return Err(DerError::BadLength(at));
    }
    Ok((len, 1 + n))
}

/// An OBJECT IDENTIFIER held as its DER contents octets (X.690 8.19).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Oid(Vec<u8>);

impl Oid {
    /// Validates contents octets: non-empty, last subidentifier complete,
    /// no subidentifier starting with a 0x80 padding octet (X.690 8.19.2).
    pub fn from_der_content(content: &[u8]) -> DerResult<Oid> {
        if content.is_empty() || content[content.len() - 1] & 0x80 != 0 {
            return Err(DerError::Invalid("OID"));
        }
        let mut at_start = true;
        for &b in content {
            if at_start && b == 0x80 {
                return Err(DerError::Invalid("OID"));
            }
            at_start = b & 0x80 == 0;
        }
        Ok(Oid(content.to_vec()))
    }

    /// Builds an OID from its arcs (X.690 8.19.4: the first two arcs are
    /// combined as 40*X+Y).
    pub fn from_arcs(arcs: &[u64]) -> DerResult<Oid> {
        if arcs.len() < 2 || arcs[0] > 2 || (arcs[0] < 2 && arcs[1] >= 40) {
            return Err(DerError::Invalid("OID arcs"));
        }
        let first = arcs[0]
            .checked_mul(40)
            .and_then(|v| v.checked_add(arcs[1]))
            .ok_or(DerError::Invalid("OID arcs"))?;
        let mut out = Vec::new();
        for &arc in std::iter::once(&first).chain(&arcs[2..]) {
            let mut tmp = [0u8; 10];
            let mut i = tmp.len();
            let mut v = arc;
            loop {
                i -= 1;
                tmp[i] = (v & 0x7f) as u8 | if i == tmp.len() - 1 { 0 } else { 0x80 };
                v >>= 7;
                if v == 0 {
                    break;
                }
            }
            out.extend_from_slice(&tmp[i..]);
        }
        Ok(Oid(out))
    }

    /// The arcs; errors on a subidentifier that does not fit in 64 bits.
    pub fn arcs(&self) -> DerResult<Vec<u64>> {
        let mut subids = Vec::new();
        let mut v: u64 = 0;
        for &b in &self.0 {
            if v > (u64::MAX >> 7) {
                return Err(DerError::Invalid("OID subidentifier too large"));
            }
            v = (v << 7) | (b & 0x7f) as u64;
            if b & 0x80 == 0 {
                subids.push(v);
                v = 0;
            }
        }
        let mut arcs = Vec::with_capacity(subids.len() + 1);
        let first = *subids.first().ok_or(DerError::Invalid("OID"))?;
        let (a, b) = match first {
            0..=39 => (0, first),
            40..=79 => (1, first - 40),
            _ => (2, first - 80),
        };
        arcs.push(a);
        arcs.push(b);
        arcs.extend_from_slice(&subids[1..]);
        Ok(arcs)
    }

    pub fn content(&self) -> &[u8] {
        &self.0
    }

    /// The full TLV encoding.
    pub fn to_der(&self) -> Vec<u8> {
        tlv(TAG_OID, &self.0)
    }
}

impl fmt::Display for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.arcs() {
            Ok(arcs) => {
                let s: Vec<String> = arcs.iter().map(|a| a.to_string()).collect();
                f.write_str(&s.join("."))
            }
            Err(_) => write!(f, "<bad OID {:02x?}>", self.0),
        }
    }
}

impl fmt::Debug for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Oid({self})")
    }
}

// ---- writer -------------------------------------------------------------

/// X.690 8.1.3 / 10.1: minimal definite length.
pub fn write_length(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = (len as u64).to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
}

pub fn write_tlv(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    out.push(tag);
    write_length(out, value.len());
    out.extend_from_slice(value);
}

pub fn tlv(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 6);
    write_tlv(&mut out, tag, value);
    out
}

/// A constructed element whose contents are the concatenation of `parts`.
pub fn constructed(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
    tlv(tag, &parts.concat())
}

pub fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    constructed(TAG_SEQUENCE, parts)
}

pub fn octet_string(value: &[u8]) -> Vec<u8> {
    tlv(TAG_OCTET_STRING, value)
}

pub fn enumerated(value: u8) -> Vec<u8> {
    debug_assert!(value < 0x80);
    tlv(TAG_ENUMERATED, &[value])
}

pub fn general_string(s: &str) -> Vec<u8> {
    tlv(TAG_GENERAL_STRING, s.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Walks every element, descending into constructed ones with an explicit
    /// stack (bounded by input length since every element has >= 2 bytes).
    fn walk(buf: &[u8]) -> DerResult<usize> {
        let mut stack = vec![DerReader::new(buf)];
        let mut count = 0;
        while let Some(mut r) = stack.pop() {
            if r.is_empty() {
                continue;
            }
            let t = r.read()?;
            count += 1;
            if t.tag == TAG_OID {
                let oid = Oid::from_der_content(t.value)?;
                let _ = oid.arcs();
                let _ = oid.to_string();
            }
            stack.push(r);
            if t.is_constructed() {
                stack.push(t.reader());
            }
        }
        Ok(count)
    }

    #[test]
    fn oid_round_trip() {
        let ntlm = Oid::from_arcs(&[1, 3, 6, 1, 4, 1, 311, 2, 2, 10]).unwrap();
        assert_eq!(ntlm.content(), &[0x2b, 6, 1, 4, 1, 0x82, 0x37, 2, 2, 10]);
        assert_eq!(ntlm.to_string(), "1.3.6.1.4.1.311.2.2.10");
        let spnego = Oid::from_arcs(&[1, 3, 6, 1, 5, 5, 2]).unwrap();
        assert_eq!(spnego.to_der(), [6, 6, 0x2b, 6, 1, 5, 5, 2]);
        let big = Oid::from_arcs(&[2, 999, 1 << 40]).unwrap();
        assert_eq!(big.arcs().unwrap(), vec![2, 999, 1 << 40]);
        assert!(Oid::from_der_content(&[0x2b, 0x80, 1]).is_err());
        assert!(Oid::from_der_content(&[0x2b, 0x81]).is_err());
        assert!(Oid::from_der_content(&[]).is_err());
        let huge =
            Oid::from_der_content(&[0xff; 20].iter().copied().chain([1]).collect::<Vec<_>>())
                .unwrap();
        assert!(huge.arcs().is_err());
    }

    #[test]
    fn lengths() {
        for len in [0usize, 1, 127, 128, 255, 256, 65535, 65536, 1 << 20] {
            let v = vec![0xabu8; len];
            let enc = tlv(TAG_OCTET_STRING, &v);
            let mut r = DerReader::new(&enc);
            let t = r.read().unwrap();
            assert_eq!(t.value.len(), len);
            assert_eq!(t.raw, &enc[..]);
            r.finish().unwrap();
        }
        // Indefinite, too many length octets, truncated contents.
        assert!(DerReader::new(&[0x30, 0x80, 0, 0]).read().is_err());
        assert!(DerReader::new(&[0x04, 0x85, 1, 0, 0, 0, 0]).read().is_err());
        assert!(DerReader::new(&[0x04, 0x84, 0xff, 0xff, 0xff, 0xff])
            .read()
            .is_err());
        assert!(DerReader::new(&[0x04, 0x03, 1, 2]).read().is_err());
        assert!(DerReader::new(&[0x04, 0x82, 1]).read().is_err());
        assert!(DerReader::new(&[0x1f, 0x01, 0]).read().is_err());
        assert_eq!(
            DerReader::new(&[0x04, 0]).expect(TAG_SEQUENCE),
            Err(DerError::UnexpectedTag {
                expected: TAG_SEQUENCE,
                found: 0x04
            })
        );
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = walk(&bytes);
        }

        #[test]
        fn nested_round_trip(tag in prop::sample::select(vec![TAG_OCTET_STRING, TAG_SEQUENCE, context(0), context(3)]),
                             content in proptest::collection::vec(any::<u8>(), 0..1000)) {
            let inner = octet_string(&content);
            let outer = tlv(tag, &inner);
            let mut r = DerReader::new(&outer);
            let t = r.read().unwrap();
            prop_assert_eq!(t.tag, tag);
            prop_assert_eq!(t.value, &inner[..]);
            prop_assert_eq!(t.reader().read_octet_string().unwrap(), &content[..]);
            prop_assert!(r.finish().is_ok());
        }

        #[test]
        fn oid_arcs_round_trip(a in 0u64..3, b in 0u64..40, rest in proptest::collection::vec(any::<u64>(), 0..6)) {
            let mut arcs = vec![a, b];
            arcs.extend(rest);
            let oid = Oid::from_arcs(&arcs).unwrap();
            prop_assert_eq!(Oid::from_der_content(oid.content()).unwrap(), oid.clone());
            prop_assert_eq!(oid.arcs().unwrap(), arcs);
        }
    }
}
