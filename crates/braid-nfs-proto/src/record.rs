//! ONC RPC record marking over a byte stream (RFC 5531 11).
//!
//! A record is one or more fragments; each fragment starts with a 4-byte
//! big-endian mark: the top bit says "last fragment", the low 31 bits are
//! the fragment's length.

use bytes::{Buf, Bytes, BytesMut};

const LAST: u32 = 0x8000_0000;
const MARK_LEN: usize = 4;

/// A record larger than the decoder's limit.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("record of at least {len} bytes over the limit {max}")]
    TooLarge { len: usize, max: usize },
}

// RFC 5531 11: the record mark of one fragment.
pub fn record_mark(len: usize, last: bool) -> [u8; 4] {
    debug_assert!(len < LAST as usize, "fragment too long for a record mark");
    ((len as u32 & !LAST) | if last { LAST } else { 0 }).to_be_bytes()
}

/// Reassembles records from a stream, fragment by fragment.
#[derive(Debug)]
pub struct RecordDecoder {
    max_record: usize,
    /// Fragments of the current record taken so far (not the last one).
    partial: BytesMut,
    /// Whether `partial` holds (possibly empty) earlier fragments.
    in_record: bool,
}

impl RecordDecoder {
    pub fn new(max_record: usize) -> Self {
        RecordDecoder {
            max_record,
            partial: BytesMut::new(),
            in_record: false,
        }
    }

    fn header(buf: &BytesMut) -> Option<(usize, bool)> {
        if buf.len() < MARK_LEN {
            return None;
        }
        let m = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        Some(((m & !LAST) as usize, m & LAST != 0))
    }

    /// Takes whole fragments off the front of `buf`; returns a complete
    /// record when its last fragment is in. Empty and small fragments are
    /// fine. The running total of the record across fragments is checked
    /// against `max_record` as soon as each fragment header is seen, before
    /// anything is reserved or copied. After an error the stream is not
    /// usable (the connection should be closed).
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, RecordError> {
        loop {
            let Some((len, last)) = Self::header(buf) else {
                return Ok(None);
            };
            // RFC 5531 11: check the record's running size before taking anything.
            let total = self.partial.len().saturating_add(len);
            if total > self.max_record {
                return Err(RecordError::TooLarge {
                    len: total,
                    max: self.max_record,
                });
            }
            if buf.len() - MARK_LEN < len {
                return Ok(None);
            }
            buf.advance(MARK_LEN);
            if last && !self.in_record {
                // The hot path: a single-fragment record, zero copy.
                return Ok(Some(buf.split_to(len).freeze()));
            }
            self.partial.extend_from_slice(&buf[..len]);
            buf.advance(len);
            if last {
                self.in_record = false;
                return Ok(Some(std::mem::take(&mut self.partial).freeze()));
            }
            self.in_record = true;
        }
    }

    /// Whether earlier fragments of a record were taken and its last one
    /// has not come yet (the record has begun even when the caller's buffer
    /// is empty).
    pub fn in_record(&self) -> bool {
        self.in_record
    }

    /// How many more bytes are needed at least to make progress (a read
    /// size hint): the rest of the mark, or the rest of the fragment.
    pub fn wanted(&self, buf: &BytesMut) -> usize {
        match Self::header(buf) {
            None => MARK_LEN - buf.len(),
            Some((len, _)) => (MARK_LEN + len).saturating_sub(buf.len()).max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(rec: &[u8], frag: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let chunks: Vec<&[u8]> = if rec.is_empty() {
            vec![&[][..]]
        } else {
            rec.chunks(frag.max(1)).collect()
        };
        for (i, c) in chunks.iter().enumerate() {
            out.extend_from_slice(&record_mark(c.len(), i + 1 == chunks.len()));
            out.extend_from_slice(c);
        }
        out
    }

    #[test]
    fn single_fragment_zero_copy() {
        let mut buf = BytesMut::from(&frame(b"hello world!", 100)[..]);
        let base = buf.as_ptr() as usize;
        let mut d = RecordDecoder::new(1024);
        let rec = d.decode(&mut buf).unwrap().unwrap();
        assert_eq!(&rec[..], b"hello world!");
        assert_eq!(rec.as_ptr() as usize, base + 4);
        assert!(buf.is_empty());
        assert_eq!(d.decode(&mut buf).unwrap(), None);
        assert_eq!(d.wanted(&buf), 4);
    }

    #[test]
    fn fragments_and_limits() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&record_mark(0, false));
        buf.extend_from_slice(&frame(b"abcdefgh", 3));
        let mut d = RecordDecoder::new(8);
        assert_eq!(&d.decode(&mut buf).unwrap().unwrap()[..], b"abcdefgh");
        // Over the limit across fragments: refused at the second header.
        let mut buf = BytesMut::from(&frame(b"abcdefghi", 5)[..]);
        let mut d = RecordDecoder::new(8);
        assert_eq!(
            d.decode(&mut buf),
            Err(RecordError::TooLarge { len: 9, max: 8 })
        );
        // A huge mark is refused before its body arrives.
        let mut buf = BytesMut::from(&record_mark(0x7fff_ffff, true)[..]);
        assert!(RecordDecoder::new(1 << 20).decode(&mut buf).is_err());
        let mut buf = BytesMut::from(&record_mark(10, true)[..]);
        assert_eq!(RecordDecoder::new(100).wanted(&buf), 10);
        buf.extend_from_slice(b"abc");
        assert_eq!(RecordDecoder::new(100).wanted(&buf), 7);
    }

    proptest! {
        #[test]
        fn reassembles(recs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..5),
                       frag in 1usize..10, piece in 1usize..13) {
            let mut stream = Vec::new();
            for r in &recs { stream.extend_from_slice(&frame(r, frag)); }
            let mut d = RecordDecoder::new(64);
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            for c in stream.chunks(piece) {
                buf.extend_from_slice(c);
                while let Some(r) = d.decode(&mut buf).unwrap() { got.push(r.to_vec()); }
            }
            prop_assert_eq!(got, recs);
            prop_assert!(buf.is_empty());
        }
    }
}
