//! Checked little-endian reading and writing shared by every SMB2 codec.
//!
//! Every read is bounds-checked; handlers never index raw buffers
//! (architecture brief, principle 2).

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    #[error("message truncated: needed {needed} bytes at offset {at}, have {have}")]
    Truncated {
        at: usize,
        needed: usize,
        have: usize,
    },
    #[error("invalid field {0}")]
    Invalid(&'static str),
    #[error("offset/length of {0} points outside the message")]
    OutOfBounds(&'static str),
}

pub type DecodeResult<T> = Result<T, DecodeError>;

/// Cursor over one SMB2 message; positions are relative to the start of its
/// SMB2 header, as MS-SMB2 offsets are.
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    pub fn at(buf: &'a [u8], pos: usize) -> Self {
        Reader { buf, pos }
    }
    pub fn pos(&self) -> usize {
        self.pos
    }
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }
    pub fn buffer(&self) -> &'a [u8] {
        self.buf
    }
    pub fn skip(&mut self, n: usize) -> DecodeResult<()> {
        self.bytes(n).map(|_| ())
    }
    pub fn bytes(&mut self, n: usize) -> DecodeResult<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated {
            at: self.pos,
            needed: n,
            have: self.remaining(),
        })?;
        if end > self.buf.len() {
            return Err(DecodeError::Truncated {
                at: self.pos,
                needed: n,
                have: self.remaining(),
            });
        }
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub fn array<const N: usize>(&mut self) -> DecodeResult<[u8; N]> {
        let b = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }
    pub fn u8(&mut self) -> DecodeResult<u8> {
        Ok(self.bytes(1)?[0])
    }
    pub fn u16(&mut self) -> DecodeResult<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> DecodeResult<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> DecodeResult<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub fn u16_be(&mut self) -> DecodeResult<u16> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    pub fn u32_be(&mut self) -> DecodeResult<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    /// A region given by an (offset, length) pair from the wire, checked
    /// against the whole buffer. A zero length yields an empty slice
    /// whatever the offset (clients send offset 0 with length 0).
    pub fn region(&self, offset: usize, len: usize, what: &'static str) -> DecodeResult<&'a [u8]> {
        if len == 0 {
            return Ok(&[]);
        }
        let end = offset
            .checked_add(len)
            .ok_or(DecodeError::OutOfBounds(what))?;
        if end > self.buf.len() {
            return Err(DecodeError::OutOfBounds(what));
        }
        Ok(&self.buf[offset..end])
    }
}

/// Append-only little-endian writer helpers on `Vec<u8>`.
pub trait WriteLe {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    fn put_zeros(&mut self, n: usize);
    /// Pad with zeros until the length is a multiple of `align`.
    fn align_to(&mut self, align: usize);
    /// Overwrite a u16/u32 written earlier (used to back-patch offsets).
    fn patch_u16(&mut self, at: usize, v: u16);
    fn patch_u32(&mut self, at: usize, v: u32);
}

impl WriteLe for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v)
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_le_bytes())
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes())
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes())
    }
    fn put_zeros(&mut self, n: usize) {
        self.resize(self.len() + n, 0)
    }
    fn align_to(&mut self, align: usize) {
        let rem = self.len() % align;
        if rem != 0 {
            self.put_zeros(align - rem);
        }
    }
    fn patch_u16(&mut self, at: usize, v: u16) {
        self[at..at + 2].copy_from_slice(&v.to_le_bytes())
    }
    fn patch_u32(&mut self, at: usize, v: u32) {
        self[at..at + 4].copy_from_slice(&v.to_le_bytes())
    }
}

/// UTF-16LE bytes to a Rust string; unpaired surrogates are invalid names.
pub fn utf16le_to_string(b: &[u8]) -> DecodeResult<String> {
    if !b.len().is_multiple_of(2) {
        return Err(DecodeError::Invalid("odd-length UTF-16 string"));
    }
    let units = b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
    char::decode_utf16(units)
        .collect::<Result<String, _>>()
        .map_err(|_| DecodeError::Invalid("unpaired UTF-16 surrogate"))
}

pub fn string_to_utf16le(s: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len() * 2);
    for u in s.encode_utf16() {
        v.extend_from_slice(&u.to_le_bytes());
    }
    v
}

pub fn put_utf16le(out: &mut Vec<u8>, s: &str) {
    for u in s.encode_utf16() {
        out.extend_from_slice(&u.to_le_bytes());
    }
}

/// A 16-byte GUID as carried on the wire.
pub type Guid = [u8; 16];

/// SMB2 file id (persistent, volatile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FileId {
    pub persistent: u64,
    pub volatile: u64,
}

impl FileId {
    /// MS-SMB2 3.3.5.2.7.2: the id that means "the file opened by the
    /// previous request of this related compound".
    pub const RELATED: FileId = FileId {
        persistent: u64::MAX,
        volatile: u64::MAX,
    };

    pub fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        Ok(FileId {
            persistent: r.u64()?,
            volatile: r.u64()?,
        })
    }
    pub fn write(&self, out: &mut Vec<u8>) {
        out.put_u64(self.persistent);
        out.put_u64(self.volatile);
    }
}

/// Every SMB2 request/response body. `msg` starts at the message's SMB2
/// header so that wire offsets can be resolved; the body starts at
/// [`crate::header::HEADER_LEN`].
pub trait Message: Sized {
    fn decode(msg: &[u8]) -> DecodeResult<Self>;
    /// Append the body to `out`, whose first 64 bytes are this message's header.
    fn encode(&self, out: &mut Vec<u8>);
}

/// Reader positioned at the body of a message, with the StructureSize checked.
/// MS-SMB2 2.2: servers check StructureSize; the low bit means "variable part follows".
pub fn body_reader(msg: &[u8], structure_size: u16) -> DecodeResult<Reader<'_>> {
    let mut r = Reader::at(msg, crate::header::HEADER_LEN);
    let size = r.u16()?;
    if size != structure_size {
        return Err(DecodeError::Invalid("StructureSize"));
    }
    Ok(r)
}
