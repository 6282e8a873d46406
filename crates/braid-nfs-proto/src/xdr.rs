//! XDR runtime (RFC 4506): a bounds-checked reader over [`bytes::Bytes`] and a
//! writer that can carry large payloads as separate segments (zero copy).
//!
//! Every length read from the wire is checked against its declared limit and
//! against the bytes that remain *before* anything is allocated.

use bytes::Bytes;

/// A decoding failure. Encoding never fails.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum XdrError {
    #[error("short buffer")]
    Short,
    #[error("{what}: length {len} over its limit {max}")]
    TooLong {
        what: &'static str,
        len: u64,
        max: u64,
    },
    #[error("bad bool {0}")]
    BadBool(u32),
    #[error("{what}: unknown discriminant {value}")]
    BadDiscriminant { what: &'static str, value: i64 },
    #[error("non-zero padding")]
    BadPadding,
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

/// Payloads at least this long are carried by [`XdrWriter::put_bytes`] as
/// their own segment instead of being copied.
pub const ZERO_COPY_MIN: usize = 4096;

// RFC 4506 3: every item is a multiple of four bytes long.
#[inline]
fn pad_len(n: usize) -> usize {
    (4 - (n & 3)) & 3
}

/// Reads XDR items off a [`Bytes`] buffer.
#[derive(Debug, Clone)]
pub struct XdrReader {
    buf: Bytes,
    pos: usize,
}

impl XdrReader {
    pub fn new(buf: Bytes) -> Self {
        XdrReader { buf, pos: 0 }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&[u8], XdrError> {
        if self.remaining() < n {
            return Err(XdrError::Short);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    // RFC 4506 4.10 / 4.9: padding bytes are zero.
    #[inline]
    fn skip_pad(&mut self, n: usize) -> Result<(), XdrError> {
        let p = pad_len(n);
        if p > 0 && self.take(p)?.iter().any(|&b| b != 0) {
            return Err(XdrError::BadPadding);
        }
        Ok(())
    }

    // RFC 4506 4.2
    pub fn get_u32(&mut self) -> Result<u32, XdrError> {
        let s = self.take(4)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }

    // RFC 4506 4.1
    pub fn get_i32(&mut self) -> Result<i32, XdrError> {
        Ok(self.get_u32()? as i32)
    }

    // RFC 4506 4.5
    pub fn get_u64(&mut self) -> Result<u64, XdrError> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_be_bytes(a))
    }

    pub fn get_i64(&mut self) -> Result<i64, XdrError> {
        Ok(self.get_u64()? as i64)
    }

    // RFC 4506 4.4: a bool is an enum of FALSE = 0, TRUE = 1; anything else is garbage.
    pub fn get_bool(&mut self) -> Result<bool, XdrError> {
        match self.get_u32()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(XdrError::BadBool(v)),
        }
    }

    // RFC 4506 4.9: fixed-length opaque, padded.
    pub fn get_fixed<const N: usize>(&mut self) -> Result<[u8; N], XdrError> {
        if self.remaining() < N + pad_len(N) {
            return Err(XdrError::Short);
        }
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        self.skip_pad(N)?;
        Ok(a)
    }

    /// The length word of a variable-length opaque/string, checked against
    /// `max` and against the bytes left (data and padding).
    fn get_len(&mut self, max: u32, what: &'static str) -> Result<usize, XdrError> {
        let len = self.get_u32()?;
        if len > max {
            return Err(XdrError::TooLong {
                what,
                len: len as u64,
                max: max as u64,
            });
        }
        let len = len as usize;
        if self.remaining() < len + pad_len(len) {
            return Err(XdrError::Short);
        }
        Ok(len)
    }

    // RFC 4506 4.10 / 4.11: variable-length opaque or string, copied.
    pub fn get_opaque(&mut self, max: u32, what: &'static str) -> Result<Vec<u8>, XdrError> {
        let len = self.get_len(max, what)?;
        let v = self.take(len)?.to_vec();
        self.skip_pad(len)?;
        Ok(v)
    }

    /// Like [`get_opaque`](Self::get_opaque) but a zero-copy slice of the buffer.
    pub fn get_bytes(&mut self, max: u32, what: &'static str) -> Result<Bytes, XdrError> {
        let len = self.get_len(max, what)?;
        let b = self.buf.slice(self.pos..self.pos + len);
        self.pos += len;
        self.skip_pad(len)?;
        Ok(b)
    }

    /// RFC 4506 4.13: the count of a variable-length array, checked against
    /// `max` and against what the remaining bytes could hold when every
    /// element takes at least `min_elem` bytes — before any allocation.
    pub fn get_count(
        &mut self,
        max: u32,
        min_elem: usize,
        what: &'static str,
    ) -> Result<usize, XdrError> {
        let n = self.get_u32()?;
        if n > max {
            return Err(XdrError::TooLong {
                what,
                len: n as u64,
                max: max as u64,
            });
        }
        let n = n as usize;
        if n.saturating_mul(min_elem.max(1)) > self.remaining() {
            return Err(XdrError::Short);
        }
        Ok(n)
    }

    /// Ok only when every byte was consumed.
    pub fn finish(self) -> Result<(), XdrError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(XdrError::Trailing(n)),
        }
    }

    /// Everything not yet consumed (zero copy); the reader is then empty.
    pub fn rest(&mut self) -> Bytes {
        let b = self.buf.slice(self.pos..);
        self.pos = self.buf.len();
        b
    }
}

/// Builds an XDR encoding as a list of segments: a `Vec<u8>` under
/// construction plus large payloads held by reference.
#[derive(Debug, Default, Clone)]
pub struct XdrWriter {
    cur: Vec<u8>,
    done: Vec<Bytes>,
    done_len: usize,
}

const ZEROS: [u8; 4] = [0; 4];

impl XdrWriter {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        XdrWriter {
            cur: Vec::with_capacity(n),
            done: Vec::new(),
            done_len: 0,
        }
    }

    pub fn put_u32(&mut self, v: u32) {
        self.cur.extend_from_slice(&v.to_be_bytes());
    }

    pub fn put_i32(&mut self, v: i32) {
        self.put_u32(v as u32);
    }

    pub fn put_u64(&mut self, v: u64) {
        self.cur.extend_from_slice(&v.to_be_bytes());
    }

    pub fn put_i64(&mut self, v: i64) {
        self.put_u64(v as u64);
    }

    pub fn put_bool(&mut self, v: bool) {
        self.put_u32(v as u32);
    }

    /// RFC 4506 4.9: fixed-length opaque with zero padding.
    pub fn put_fixed(&mut self, b: &[u8]) {
        self.cur.extend_from_slice(b);
        self.cur.extend_from_slice(&ZEROS[..pad_len(b.len())]);
    }

    /// RFC 4506 4.10: length, data, padding.
    pub fn put_opaque(&mut self, b: &[u8]) {
        self.put_u32(b.len() as u32);
        self.put_fixed(b);
    }

    /// Like [`put_opaque`](Self::put_opaque); a payload of at least
    /// [`ZERO_COPY_MIN`] bytes becomes its own segment (no copy).
    pub fn put_bytes(&mut self, b: &Bytes) {
        if b.len() < ZERO_COPY_MIN {
            self.put_opaque(b);
            return;
        }
        self.put_u32(b.len() as u32);
        let cur = std::mem::take(&mut self.cur);
        if !cur.is_empty() {
            self.done_len += cur.len();
            self.done.push(Bytes::from(cur));
        }
        self.done_len += b.len();
        self.done.push(b.clone());
        self.cur.extend_from_slice(&ZEROS[..pad_len(b.len())]);
    }

    /// Total bytes encoded so far.
    pub fn len(&self) -> usize {
        self.done_len + self.cur.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoding as segments, for a vectored write.
    pub fn into_segments(mut self) -> Vec<Bytes> {
        if !self.cur.is_empty() {
            self.done.push(Bytes::from(self.cur));
        }
        self.done
    }

    /// The encoding as one contiguous buffer (copies large segments).
    pub fn into_vec(self) -> Vec<u8> {
        if self.done.is_empty() {
            return self.cur;
        }
        let mut v = Vec::with_capacity(self.len());
        for s in &self.done {
            v.extend_from_slice(s);
        }
        v.extend_from_slice(&self.cur);
        v
    }
}

/// A type with an XDR encoding.
pub trait Xdr: Sized {
    fn encode(&self, w: &mut XdrWriter);
    fn decode(r: &mut XdrReader) -> Result<Self, XdrError>;
}

/// Encodes `v` into one buffer.
pub fn to_bytes<T: Xdr>(v: &T) -> Vec<u8> {
    let mut w = XdrWriter::new();
    v.encode(&mut w);
    w.into_vec()
}

/// Decodes a `T` that must fill `b` exactly.
pub fn from_bytes<T: Xdr>(b: &[u8]) -> Result<T, XdrError> {
    let mut r = XdrReader::new(Bytes::copy_from_slice(b));
    let v = T::decode(&mut r)?;
    r.finish()?;
    Ok(v)
}

macro_rules! prim {
    ($t:ty, $put:ident, $get:ident) => {
        impl Xdr for $t {
            fn encode(&self, w: &mut XdrWriter) {
                w.$put(*self)
            }
            fn decode(r: &mut XdrReader) -> Result<Self, XdrError> {
                r.$get()
            }
        }
    };
}
prim!(u32, put_u32, get_u32);
prim!(i32, put_i32, get_i32);
prim!(u64, put_u64, get_u64);
prim!(i64, put_i64, get_i64);
prim!(bool, put_bool, get_bool);

impl<const N: usize> Xdr for [u8; N] {
    fn encode(&self, w: &mut XdrWriter) {
        w.put_fixed(self)
    }
    fn decode(r: &mut XdrReader) -> Result<Self, XdrError> {
        r.get_fixed::<N>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_round_trip() {
        let mut w = XdrWriter::new();
        w.put_u32(7);
        w.put_i32(-2);
        w.put_u64(u64::MAX - 1);
        w.put_i64(-5);
        w.put_bool(true);
        w.put_fixed(&[1, 2, 3]);
        w.put_opaque(b"hello");
        let v = w.into_vec();
        assert_eq!(v.len() % 4, 0);
        let mut r = XdrReader::new(Bytes::from(v));
        assert_eq!(r.get_u32().unwrap(), 7);
        assert_eq!(r.get_i32().unwrap(), -2);
        assert_eq!(r.get_u64().unwrap(), u64::MAX - 1);
        assert_eq!(r.get_i64().unwrap(), -5);
        assert!(r.get_bool().unwrap());
        assert_eq!(r.get_fixed::<3>().unwrap(), [1, 2, 3]);
        assert_eq!(r.get_opaque(5, "x").unwrap(), b"hello");
        r.finish().unwrap();
    }

    #[test]
    fn limits_and_garbage() {
        assert_eq!(from_bytes::<bool>(&[0, 0, 0, 2]), Err(XdrError::BadBool(2)));
        assert_eq!(
            from_bytes::<u32>(&[0, 0, 0, 2, 0]),
            Err(XdrError::Trailing(1))
        );
        let mut r = XdrReader::new(Bytes::from_static(&[0, 0, 0, 9, 1, 2, 3, 4]));
        assert_eq!(
            r.get_opaque(8, "f"),
            Err(XdrError::TooLong {
                what: "f",
                len: 9,
                max: 8
            })
        );
        let mut r = XdrReader::new(Bytes::from_static(&[0, 0, 0, 5, 1, 2, 3, 4]));
        assert_eq!(r.get_opaque(u32::MAX, "f"), Err(XdrError::Short));
        let mut r = XdrReader::new(Bytes::from_static(&[0, 0, 0, 1, 1, 2, 0, 0]));
        assert_eq!(r.get_opaque(u32::MAX, "f"), Err(XdrError::BadPadding));
        // A huge count with few bytes behind it is refused before allocation.
        let mut r = XdrReader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]));
        assert_eq!(r.get_count(u32::MAX, 4, "a"), Err(XdrError::Short));
        let mut r = XdrReader::new(Bytes::from_static(&[0, 0, 0, 3, 0, 0, 0, 0]));
        assert!(matches!(
            r.get_count(2, 4, "a"),
            Err(XdrError::TooLong { .. })
        ));
    }

    #[test]
    fn put_bytes_zero_copy() {
        let big = Bytes::from(vec![7u8; ZERO_COPY_MIN + 1]);
        let mut w = XdrWriter::new();
        w.put_u32(1);
        w.put_bytes(&big);
        w.put_u32(2);
        assert_eq!(w.len(), 4 + 4 + big.len() + 3 + 4);
        let segs = w.clone().into_segments();
        assert_eq!(segs.len(), 3);
        assert_eq!(segs[1].as_ptr(), big.as_ptr());
        let v = w.into_vec();
        let mut r = XdrReader::new(Bytes::from(v));
        assert_eq!(r.get_u32().unwrap(), 1);
        assert_eq!(r.get_bytes(u32::MAX, "d").unwrap(), big);
        assert_eq!(r.get_u32().unwrap(), 2);
        r.finish().unwrap();
    }
}
