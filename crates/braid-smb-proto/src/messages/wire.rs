//! Small helpers shared by the message codecs: checked variable-part
//! regions and the "Buffer is at least one byte" rule.

use crate::codec::{DecodeError, DecodeResult, Reader, WriteLe};
use crate::header::HEADER_LEN;

/// Offset of the first byte after the fixed part of a body whose
/// StructureSize is `structure_size` (odd sizes count one Buffer byte).
pub(crate) const fn fixed_end(structure_size: u16) -> usize {
    HEADER_LEN + (structure_size as usize & !1)
}

/// A variable-length field given by an (offset, length) pair relative to the
/// header start. Checked against the buffer, and (when non-empty) required
/// not to overlap the header or the fixed part of the body.
pub(crate) fn var_region<'a>(
    msg: &'a [u8],
    offset: usize,
    len: usize,
    structure_size: u16,
    what: &'static str,
) -> DecodeResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if offset < fixed_end(structure_size) {
        return Err(DecodeError::OutOfBounds(what));
    }
    Reader::new(msg).region(offset, len, what)
}

/// MS-SMB2 2.2: a body with an odd StructureSize has a Buffer of at least
/// one byte even when nothing is carried in it.
pub(crate) fn min_buffer(out: &mut Vec<u8>, structure_size: u16) {
    let end = fixed_end(structure_size);
    if out.len() <= end {
        out.put_zeros(end + 1 - out.len());
    }
}

/// Length of a variable part, converted to the wire width; encoders are
/// given owned data, so an over-long field is a caller bug.
pub(crate) fn len16(n: usize, what: &'static str) -> u16 {
    u16::try_from(n).unwrap_or_else(|_| panic!("{what} longer than 65535 bytes"))
}

pub(crate) fn len32(n: usize, what: &'static str) -> u32 {
    u32::try_from(n).unwrap_or_else(|_| panic!("{what} longer than u32::MAX bytes"))
}

/// Read `count` little-endian u16 values out of `b` (already bounds-checked).
pub(crate) fn u16_list(b: &[u8]) -> Vec<u16> {
    b.chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// A checked sub-slice `b[off..off+len]` of an already-extracted region.
pub(crate) fn sub<'a>(
    b: &'a [u8],
    off: usize,
    len: usize,
    what: &'static str,
) -> DecodeResult<&'a [u8]> {
    Reader::new(b).region(off, len, what)
}

/// Length checked multiplication for counts times element sizes.
pub(crate) fn mul(count: usize, size: usize, what: &'static str) -> DecodeResult<usize> {
    count
        .checked_mul(size)
        .ok_or(DecodeError::OutOfBounds(what))
}

/// A body with nothing but StructureSize and `reserved` zero bytes
/// (LOGOFF, TREE_DISCONNECT, ECHO, CANCEL, FLUSH response, ...).
macro_rules! empty_message {
    ($(#[$m:meta])* $name:ident, $size:expr, $reserved:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name;

        impl $name {
            pub const STRUCTURE_SIZE: u16 = $size;
        }

        impl $crate::codec::Message for $name {
            fn decode(msg: &[u8]) -> $crate::codec::DecodeResult<Self> {
                let mut r = $crate::codec::body_reader(msg, Self::STRUCTURE_SIZE)?;
                r.skip($reserved)?;
                Ok($name)
            }
            fn encode(&self, out: &mut Vec<u8>) {
                use $crate::codec::WriteLe;
                out.put_u16(Self::STRUCTURE_SIZE);
                out.put_zeros($reserved);
            }
        }
    };
}
pub(crate) use empty_message;

/// MS-SMB2 2.2.34 / 2.2.36 / 2.2.38: the StructureSize-9 "output buffer"
/// response shared by QUERY_DIRECTORY, CHANGE_NOTIFY and QUERY_INFO.
pub(crate) fn decode_output_response(msg: &[u8]) -> DecodeResult<Vec<u8>> {
    let mut r = crate::codec::body_reader(msg, 9)?;
    let off = r.u16()? as usize;
    let len = r.u32()? as usize;
    Ok(var_region(msg, off, len, 9, "OutputBuffer")?.to_vec())
}

pub(crate) fn encode_output_response(out: &mut Vec<u8>, output: &[u8]) {
    out.put_u16(9);
    let off = len16(out.len() + 6, "OutputBufferOffset");
    out.put_u16(off);
    out.put_u32(len32(output.len(), "OutputBuffer"));
    out.extend_from_slice(output);
    min_buffer(out, 9);
}

#[cfg(test)]
pub(crate) mod test_util {
    use crate::codec::Message;
    use crate::header::{Header, HEADER_LEN};
    use std::fmt::Debug;

    /// A message buffer holding a default header, ready for `encode`.
    pub fn header_buf() -> Vec<u8> {
        let mut v = Vec::new();
        Header::default().encode(&mut v);
        assert_eq!(v.len(), HEADER_LEN);
        v
    }

    pub fn encode<M: Message>(m: &M) -> Vec<u8> {
        let mut v = header_buf();
        m.encode(&mut v);
        v
    }

    /// encode → decode → equal; returns the encoded bytes for further checks.
    pub fn round_trip<M: Message + PartialEq + Debug>(m: &M) -> Vec<u8> {
        let v = encode(m);
        let d = M::decode(&v).unwrap_or_else(|e| panic!("decode of {m:?} failed: {e}"));
        assert_eq!(&d, m);
        v
    }

    /// A header followed by `body`.
    pub fn with_body(body: &[u8]) -> Vec<u8> {
        let mut v = header_buf();
        v.extend_from_slice(body);
        v
    }
}
