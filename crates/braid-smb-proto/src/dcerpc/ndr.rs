//! NDR 2.0 (C706 chapter 14), as far as srvsvc and lsarpc need it:
//! primitives with natural alignment, unique pointers, fixed octet arrays,
//! and conformant varying UTF-16 strings. Offsets and alignment count from
//! the start of the stub (C706 chapter 14: alignment is relative to the
//! octet stream). Answers are written little-endian; requests are read in
//! the integer representation their PDU's drep names (C706 14.2.5), since
//! a client may send big-endian NDR (Samba's `bigendian` binding option).

use thiserror::Error;

use crate::codec::{Reader, WriteLe};

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum NdrError {
    #[error("NDR stub truncated at offset {0}")]
    Truncated(usize),
    #[error("invalid NDR data: {0}")]
    Invalid(&'static str),
}

pub type NdrResult<T> = Result<T, NdrError>;

/// C706 14.2.5: the integer representation a PDU's drep names (high
/// nibble of drep[0]: 0 big-endian, 1 little-endian). It applies to every
/// multi-octet integer of the PDU's headers and stub, UTF-16 code units
/// included; octet arrays are what they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Endian {
    #[default]
    Little,
    Big,
}

/// A request's stub and the representation it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stub<'a> {
    pub bytes: &'a [u8],
    pub endian: Endian,
}

impl<'a> Stub<'a> {
    pub fn new(bytes: &'a [u8], endian: Endian) -> Self {
        Stub { bytes, endian }
    }

    pub fn little_endian(bytes: &'a [u8]) -> Self {
        Stub::new(bytes, Endian::Little)
    }

    pub fn reader(self) -> NdrReader<'a> {
        NdrReader::with_endian(self.bytes, self.endian)
    }
}

/// The first referent id Windows gives an embedded pointer; each further
/// pointer takes the next multiple of 4.
pub const FIRST_REFERENT_ID: u32 = 0x0002_0000;

/// Builds one stub. Every primitive aligns itself to its size (C706
/// chapter 14), so callers never pad by hand.
#[derive(Debug)]
pub struct NdrWriter {
    buf: Vec<u8>,
    next_referent: u32,
}

impl Default for NdrWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl NdrWriter {
    pub fn new() -> Self {
        NdrWriter {
            buf: Vec::new(),
            next_referent: FIRST_REFERENT_ID,
        }
    }

    pub fn align(&mut self, n: usize) {
        self.buf.align_to(n);
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn u16(&mut self, v: u16) {
        self.align(2);
        self.buf.put_u16(v);
    }

    pub fn u32(&mut self, v: u32) {
        self.align(4);
        self.buf.put_u32(v);
    }

    /// C706 chapter 14 (pointers): a non-null unique pointer is a referent
    /// id; its pointee follows later (embedded) or right after (top level).
    pub fn referent(&mut self) {
        let id = self.next_referent;
        self.next_referent = self.next_referent.wrapping_add(4);
        self.u32(id);
    }

    pub fn null_pointer(&mut self) {
        self.u32(0);
    }

    /// C706 chapter 14 (strings): a `[string] wchar_t*` pointee is a
    /// conformant varying array whose counts include the terminating NUL.
    pub fn wstring(&mut self, s: &str) {
        let units: Vec<u16> = s.encode_utf16().chain(std::iter::once(0)).collect();
        let count = units.len() as u32;
        self.u32(count);
        self.u32(0);
        self.u32(count);
        for u in units {
            self.buf.extend_from_slice(&u.to_le_bytes());
        }
    }

    /// C706 chapter 14 (arrays): a `[size_is(n)] byte*` pointee is a
    /// conformant array: its count, then the bytes.
    pub fn byte_array(&mut self, bytes: &[u8]) {
        self.u32(bytes.len() as u32);
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes as they are, unaligned: a fixed array of octets (a context
    /// handle, a SID's IdentifierAuthority).
    pub fn bytes(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// UTF-16 code units of a varying array, after its counts.
    pub fn u16_units(&mut self, units: &[u16]) {
        self.align(2);
        for u in units {
            self.buf.extend_from_slice(&u.to_le_bytes());
        }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads one stub; every read is bounds-checked and nothing is allocated
/// from a count before the bytes behind it are known to be there.
#[derive(Clone)]
pub struct NdrReader<'a> {
    reader: Reader<'a>,
    endian: Endian,
}

impl<'a> NdrReader<'a> {
    /// A little-endian stub.
    pub fn new(buf: &'a [u8]) -> Self {
        Self::with_endian(buf, Endian::Little)
    }

    pub fn with_endian(buf: &'a [u8], endian: Endian) -> Self {
        NdrReader {
            reader: Reader::new(buf),
            endian,
        }
    }

    pub fn endian(&self) -> Endian {
        self.endian
    }

    fn unit(&self, c: &[u8]) -> u16 {
        match self.endian {
            Endian::Little => u16::from_le_bytes([c[0], c[1]]),
            Endian::Big => u16::from_be_bytes([c[0], c[1]]),
        }
    }

    pub fn pos(&self) -> usize {
        self.reader.pos()
    }

    pub fn remaining(&self) -> usize {
        self.reader.remaining()
    }

    fn bytes(&mut self, n: usize) -> NdrResult<&'a [u8]> {
        let at = self.pos();
        self.reader.bytes(n).map_err(|_| NdrError::Truncated(at))
    }

    pub fn align(&mut self, n: usize) -> NdrResult<()> {
        let rem = self.pos() % n;
        if rem != 0 {
            self.bytes(n - rem)?;
        }
        Ok(())
    }

    pub fn u8(&mut self) -> NdrResult<u8> {
        Ok(self.bytes(1)?[0])
    }

    /// A fixed array of `N` octets (no alignment: octets have none).
    pub fn fixed<const N: usize>(&mut self) -> NdrResult<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    /// `count` UTF-16 code units, the body of a varying array. The bytes
    /// are checked to be there before anything is allocated.
    pub fn u16_units(&mut self, count: usize) -> NdrResult<Vec<u16>> {
        self.align(2)?;
        let len = count
            .checked_mul(2)
            .ok_or(NdrError::Truncated(self.pos()))?;
        let raw = self.bytes(len)?;
        Ok(raw.chunks_exact(2).map(|c| self.unit(c)).collect())
    }

    pub fn u16(&mut self) -> NdrResult<u16> {
        self.align(2)?;
        let b = self.bytes(2)?;
        Ok(self.unit(b))
    }

    pub fn u32(&mut self) -> NdrResult<u32> {
        self.align(4)?;
        let b: [u8; 4] = self.bytes(4)?.try_into().expect("4 bytes");
        Ok(match self.endian {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        })
    }

    /// A unique pointer's referent id: whether a pointee follows.
    pub fn unique_pointer(&mut self) -> NdrResult<bool> {
        Ok(self.u32()? != 0)
    }

    /// A conformant byte array: its count, then the bytes.
    pub fn byte_array(&mut self) -> NdrResult<&'a [u8]> {
        let count = self.u32()? as usize;
        self.bytes(count)
    }

    /// A conformant varying UTF-16 string. The value ends at the first NUL,
    /// as the C string it is; a missing terminator is tolerated.
    pub fn wstring(&mut self) -> NdrResult<String> {
        let max_count = self.u32()?;
        let offset = self.u32()?;
        let actual_count = self.u32()?;
        if offset != 0 {
            return Err(NdrError::Invalid("string offset is not zero"));
        }
        if actual_count > max_count {
            return Err(NdrError::Invalid("string actual_count exceeds max_count"));
        }
        let len = (actual_count as usize)
            .checked_mul(2)
            .ok_or(NdrError::Truncated(self.pos()))?;
        let raw = self.bytes(len)?;
        let units = raw
            .chunks_exact(2)
            .map(|c| self.unit(c))
            .take_while(|&u| u != 0);
        char::decode_utf16(units)
            .collect::<Result<String, _>>()
            .map_err(|_| NdrError::Invalid("unpaired UTF-16 surrogate"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wstring_layout_counts_the_terminator() {
        let mut w = NdrWriter::new();
        w.wstring("AB");
        assert_eq!(
            w.into_bytes(),
            [3, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, b'A', 0, b'B', 0, 0, 0]
        );
    }

    #[test]
    fn primitives_align_themselves() {
        let mut w = NdrWriter::new();
        w.u16(1);
        w.u32(2);
        w.referent();
        w.referent();
        let b = w.into_bytes();
        assert_eq!(b.len(), 16);
        assert_eq!(&b[4..8], &2u32.to_le_bytes());
        assert_eq!(&b[8..12], &FIRST_REFERENT_ID.to_le_bytes());
        assert_eq!(&b[12..16], &(FIRST_REFERENT_ID + 4).to_le_bytes());
    }

    fn raw_wstring(max: u32, offset: u32, actual: u32, units: &[u16]) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [max, offset, actual] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for u in units {
            b.extend_from_slice(&u.to_le_bytes());
        }
        b
    }

    #[test]
    fn wstring_without_or_with_extra_terminators() {
        let s = raw_wstring(2, 0, 2, &[u16::from(b'h'), u16::from(b'i')]);
        assert_eq!(NdrReader::new(&s).wstring().unwrap(), "hi");
        let s = raw_wstring(4, 0, 4, &[u16::from(b'h'), 0, 0, u16::from(b'x')]);
        assert_eq!(NdrReader::new(&s).wstring().unwrap(), "h");
        let s = raw_wstring(0, 0, 0, &[]);
        assert_eq!(NdrReader::new(&s).wstring().unwrap(), "");
    }

    #[test]
    fn wstring_rejects_bad_counts() {
        let s = raw_wstring(1, 0, 2, &[65, 0]);
        assert!(NdrReader::new(&s).wstring().is_err());
        let s = raw_wstring(2, 1, 2, &[65, 0]);
        assert!(NdrReader::new(&s).wstring().is_err());
        let s = raw_wstring(u32::MAX, 0, u32::MAX, &[65, 0]);
        assert_eq!(NdrReader::new(&s).wstring(), Err(NdrError::Truncated(12)));
        let s = raw_wstring(1, 0, 1, &[0xD800]);
        assert!(NdrReader::new(&s).wstring().is_err());
    }

    #[test]
    fn big_endian_integers_and_strings() {
        let mut b = Vec::new();
        b.extend_from_slice(&0x0102u16.to_be_bytes());
        b.extend_from_slice(&[0xAA, 0xAA]);
        b.extend_from_slice(&0x0304_0506u32.to_be_bytes());
        for v in [3u32, 0, 3] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        for u in "hi\0".encode_utf16() {
            b.extend_from_slice(&u.to_be_bytes());
        }
        let mut r = Stub::new(&b, Endian::Big).reader();
        assert_eq!(r.endian(), Endian::Big);
        assert_eq!(r.u16().unwrap(), 0x0102);
        assert_eq!(r.u32().unwrap(), 0x0304_0506);
        assert_eq!(r.wstring().unwrap(), "hi");
        assert_eq!(r.remaining(), 0);
        // The same octets read little-endian are other values.
        let mut r = NdrReader::new(&b);
        assert_eq!(r.u16().unwrap(), 0x0201);
    }

    proptest! {
        #[test]
        fn wstring_round_trips(s in "[^\u{0}]{0,40}", lead in 0usize..4) {
            let mut w = NdrWriter::new();
            for _ in 0..lead {
                w.buf.push(0xAA);
            }
            w.wstring(&s);
            w.u32(0xDEAD_BEEF);
            let bytes = w.into_bytes();
            let mut r = NdrReader::new(&bytes);
            r.bytes(lead).unwrap();
            prop_assert_eq!(r.wstring().unwrap(), s);
            prop_assert_eq!(r.u32().unwrap(), 0xDEAD_BEEF);
            prop_assert_eq!(r.remaining(), 0);
        }

        #[test]
        fn wstring_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = NdrReader::new(&bytes).wstring();
        }
    }
}
