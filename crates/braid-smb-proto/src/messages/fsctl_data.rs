//! Input and output buffers of the FSCTLs a file server implements itself:
//! server-side copy (MS-SMB2 2.2.31.1, 2.2.32.1, 2.2.32.3), block cloning
//! (MS-FSCC 2.3.7.2 SMB2_DUPLICATE_EXTENTS_DATA) and sparse files
//! (MS-FSCC 2.3.64 FSCTL_SET_SPARSE, 2.3.67 FSCTL_SET_ZERO_DATA, 2.3.51
//! FSCTL_QUERY_ALLOCATED_RANGES), and trimming (MS-FSCC 2.3.13
//! FSCTL_FILE_LEVEL_TRIM).

use crate::codec::{DecodeError, DecodeResult, FileId, Reader, WriteLe};

/// MS-SMB2 2.2.32.3: SRV_REQUEST_RESUME_KEY Response (ResumeKey,
/// ContextLength 0, then 4 bytes of Context as Windows sends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumeKeyResponse {
    pub resume_key: [u8; 24],
}

impl ResumeKeyResponse {
    pub const SIZE: usize = 32;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.resume_key);
        out.put_u32(0); // ContextLength
        out.put_u32(0); // Context (unused)
    }

    pub fn decode(b: &[u8]) -> DecodeResult<Self> {
        let mut r = Reader::new(b);
        let resume_key = r.array::<24>()?;
        Ok(ResumeKeyResponse { resume_key })
    }
}

/// MS-SMB2 2.2.31.1.1: SRV_COPYCHUNK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CopyChunk {
    pub source_offset: u64,
    pub target_offset: u64,
    pub length: u32,
}

impl CopyChunk {
    pub const SIZE: usize = 24;
}

/// MS-SMB2 2.2.31.1: SRV_COPYCHUNK_COPY.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CopyChunkCopy {
    pub source_key: [u8; 24],
    pub chunks: Vec<CopyChunk>,
}

impl CopyChunkCopy {
    /// SourceKey, ChunkCount and Reserved.
    pub const FIXED: usize = 32;

    /// Decodes the key and the chunk count; the chunks themselves only when
    /// the buffer holds all of them and there are at most `max_chunks` (a
    /// request over the server's limits is answered with the limits, 3.3.5.15.6,
    /// so its count matters but its chunks are never read).
    pub fn decode(b: &[u8], max_chunks: u32) -> DecodeResult<(Self, u32)> {
        let mut r = Reader::new(b);
        let source_key = r.array::<24>()?;
        let count = r.u32()?;
        r.skip(4)?; // Reserved
        let mut chunks = Vec::new();
        if count <= max_chunks && r.remaining() >= count as usize * CopyChunk::SIZE {
            chunks.reserve(count as usize);
            for _ in 0..count {
                let source_offset = r.u64()?;
                let target_offset = r.u64()?;
                let length = r.u32()?;
                r.skip(4)?; // Reserved
                chunks.push(CopyChunk {
                    source_offset,
                    target_offset,
                    length,
                });
            }
        }
        Ok((CopyChunkCopy { source_key, chunks }, count))
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.source_key);
        out.put_u32(self.chunks.len() as u32);
        out.put_u32(0);
        for c in &self.chunks {
            out.put_u64(c.source_offset);
            out.put_u64(c.target_offset);
            out.put_u32(c.length);
            out.put_u32(0);
        }
    }
}

/// MS-SMB2 2.2.32.1: SRV_COPYCHUNK_RESPONSE. After STATUS_INVALID_PARAMETER
/// the three fields are the server's limits instead (3.3.5.15.6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CopyChunkResponse {
    pub chunks_written: u32,
    pub chunk_bytes_written: u32,
    pub total_bytes_written: u32,
}

impl CopyChunkResponse {
    pub const SIZE: usize = 12;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.chunks_written);
        out.put_u32(self.chunk_bytes_written);
        out.put_u32(self.total_bytes_written);
    }

    pub fn decode(b: &[u8]) -> DecodeResult<Self> {
        let mut r = Reader::new(b);
        Ok(CopyChunkResponse {
            chunks_written: r.u32()?,
            chunk_bytes_written: r.u32()?,
            total_bytes_written: r.u32()?,
        })
    }
}

/// MS-FSCC 2.3.7.2: SMB2_DUPLICATE_EXTENTS_DATA, the input of
/// FSCTL_DUPLICATE_EXTENTS_TO_FILE over SMB2: the open of the source file
/// (an SMB2_FILEID of the same session), then three 64-bit signed integers.
/// They are kept as sent, unsigned: a value with the top bit set is a
/// negative one, which the file service refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DuplicateExtentsData {
    pub source_file_id: FileId,
    pub source_offset: u64,
    pub target_offset: u64,
    pub byte_count: u64,
}

impl DuplicateExtentsData {
    pub const SIZE: usize = 40;

    /// The structure at the start of `b`; bytes after it are ignored. A
    /// shorter buffer is an error (MS-SMB2 3.3.5.15.17: INVALID_PARAMETER).
    pub fn decode(b: &[u8]) -> DecodeResult<Self> {
        if b.len() < Self::SIZE {
            return Err(DecodeError::Invalid("duplicate extents data too short"));
        }
        let mut r = Reader::new(b);
        Ok(DuplicateExtentsData {
            source_file_id: FileId::read(&mut r)?,
            source_offset: r.u64()?,
            target_offset: r.u64()?,
            byte_count: r.u64()?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        self.source_file_id.write(out);
        out.put_u64(self.source_offset);
        out.put_u64(self.target_offset);
        out.put_u64(self.byte_count);
    }
}

/// MS-FSCC 2.3.66 FILE_ZERO_DATA_INFORMATION, and 2.3.52
/// FILE_ALLOCATED_RANGE_BUFFER: both are an offset and a 64-bit bound
/// (BeyondFinalZero for the former, Length for the latter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileRange {
    pub offset: u64,
    pub second: u64,
}

impl FileRange {
    pub const SIZE: usize = 16;

    /// The first range in `b`; extra bytes are ignored, as Windows does.
    pub fn decode(b: &[u8]) -> DecodeResult<Self> {
        if b.len() < Self::SIZE {
            return Err(DecodeError::Invalid("range buffer too short"));
        }
        let mut r = Reader::new(b);
        let offset = r.u64()?;
        let second = r.u64()?;
        Ok(FileRange { offset, second })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.offset);
        out.put_u64(self.second);
    }
}

/// MS-FSCC 2.3.13 FILE_LEVEL_TRIM: a lock key and ranges, each a
/// FILE_LEVEL_TRIM_RANGE (2.3.13.1: Offset, Length).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileLevelTrim {
    pub key: u32,
    pub ranges: Vec<FileRange>,
}

impl FileLevelTrim {
    /// Key and NumRanges.
    pub const FIXED: usize = 8;

    /// MS-FSA 2.1.5.10.6: a buffer shorter than the fixed part, no ranges,
    /// or fewer ranges than NumRanges says are all invalid. Bytes after
    /// the ranges are ignored.
    pub fn decode(b: &[u8]) -> DecodeResult<Self> {
        let mut r = Reader::new(b);
        let key = r.u32()?;
        let count = r.u32()? as usize;
        if count == 0 {
            return Err(DecodeError::Invalid("no trim ranges"));
        }
        let needed = count
            .checked_mul(FileRange::SIZE)
            .and_then(|n| n.checked_add(Self::FIXED))
            .ok_or(DecodeError::Invalid("trim range count overflows"))?;
        if b.len() < needed {
            return Err(DecodeError::Invalid("trim ranges missing"));
        }
        let ranges = b[Self::FIXED..needed]
            .chunks_exact(FileRange::SIZE)
            .map(FileRange::decode)
            .collect::<DecodeResult<Vec<_>>>()?;
        Ok(FileLevelTrim { key, ranges })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.key);
        out.put_u32(self.ranges.len() as u32);
        for range in &self.ranges {
            range.encode(out);
        }
    }
}

/// MS-FSCC 2.3.14 FILE_LEVEL_TRIM_OUTPUT: NumRangesProcessed.
pub const FILE_LEVEL_TRIM_OUTPUT_SIZE: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn copychunk_copy_roundtrip(
            key in any::<[u8; 24]>(),
            chunks in proptest::collection::vec((any::<u64>(), any::<u64>(), any::<u32>()), 0..20),
        ) {
            let c = CopyChunkCopy {
                source_key: key,
                chunks: chunks.iter().map(|&(s, t, l)| CopyChunk {
                    source_offset: s, target_offset: t, length: l,
                }).collect(),
            };
            let mut b = Vec::new();
            c.encode(&mut b);
            prop_assert_eq!(b.len(), CopyChunkCopy::FIXED + chunks.len() * CopyChunk::SIZE);
            let (d, n) = CopyChunkCopy::decode(&b, 256).unwrap();
            prop_assert_eq!(n as usize, chunks.len());
            prop_assert_eq!(d, c);
        }

        #[test]
        fn response_and_range_roundtrip(a in any::<u32>(), b in any::<u32>(), c in any::<u32>(),
                                        o in any::<u64>(), l in any::<u64>()) {
            let r = CopyChunkResponse { chunks_written: a, chunk_bytes_written: b, total_bytes_written: c };
            let mut buf = Vec::new();
            r.encode(&mut buf);
            prop_assert_eq!(buf.len(), CopyChunkResponse::SIZE);
            prop_assert_eq!(CopyChunkResponse::decode(&buf).unwrap(), r);
            let range = FileRange { offset: o, second: l };
            let mut buf = Vec::new();
            range.encode(&mut buf);
            prop_assert_eq!(FileRange::decode(&buf).unwrap(), range);
        }
    }

    proptest! {
        #[test]
        fn file_level_trim_roundtrip(key in any::<u32>(),
                                     ranges in proptest::collection::vec((any::<u64>(), any::<u64>()), 1..20),
                                     extra in proptest::collection::vec(any::<u8>(), 0..8)) {
            let t = FileLevelTrim {
                key,
                ranges: ranges.iter().map(|&(offset, second)| FileRange { offset, second }).collect(),
            };
            let mut b = Vec::new();
            t.encode(&mut b);
            prop_assert_eq!(b.len(), FileLevelTrim::FIXED + ranges.len() * FileRange::SIZE);
            b.extend_from_slice(&extra);
            prop_assert_eq!(FileLevelTrim::decode(&b).unwrap(), t);
        }
    }

    #[test]
    fn file_level_trim_refuses_short_or_empty_buffers() {
        assert!(FileLevelTrim::decode(&[0; 7]).is_err());
        // NumRanges 0.
        assert!(FileLevelTrim::decode(&[0; 8]).is_err());
        // NumRanges 2, one range present.
        let mut b = vec![0, 0, 0, 0, 2, 0, 0, 0];
        b.extend_from_slice(&[0; 16]);
        assert!(FileLevelTrim::decode(&b).is_err());
        // NumRanges so large that its byte count overflows on 32-bit hosts
        // and is far past the buffer on 64-bit ones.
        let b = [0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
        assert!(FileLevelTrim::decode(&b).is_err());
    }

    proptest! {
        #[test]
        fn duplicate_extents_roundtrip(p in any::<u64>(), v in any::<u64>(), s in any::<u64>(),
                                       t in any::<u64>(), n in any::<u64>(),
                                       extra in proptest::collection::vec(any::<u8>(), 0..8)) {
            let d = DuplicateExtentsData {
                source_file_id: FileId { persistent: p, volatile: v },
                source_offset: s,
                target_offset: t,
                byte_count: n,
            };
            let mut b = Vec::new();
            d.encode(&mut b);
            prop_assert_eq!(b.len(), DuplicateExtentsData::SIZE);
            b.extend_from_slice(&extra);
            prop_assert_eq!(DuplicateExtentsData::decode(&b).unwrap(), d);
        }
    }

    #[test]
    fn duplicate_extents_layout() {
        // MS-FSCC 2.3.7.2: SourceFileID (Persistent, Volatile), then
        // SourceFileOffset, TargetFileOffset and ByteCount, little-endian.
        let mut b = Vec::new();
        for v in [1u64, 2, 0x1000, 0x2000, 0x4000] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let d = DuplicateExtentsData::decode(&b).unwrap();
        assert_eq!(
            d.source_file_id,
            FileId {
                persistent: 1,
                volatile: 2
            }
        );
        assert_eq!(
            (d.source_offset, d.target_offset, d.byte_count),
            (0x1000, 0x2000, 0x4000)
        );
        // A negative offset arrives as a value with the top bit set.
        b[16..24].copy_from_slice(&(-4096i64).to_le_bytes());
        assert_eq!(
            DuplicateExtentsData::decode(&b).unwrap().source_offset,
            (-4096i64) as u64
        );
        for n in [0, 16, 39] {
            assert!(DuplicateExtentsData::decode(&b[..n]).is_err());
        }
    }

    #[test]
    fn short_or_oversized_copy_requests() {
        // A count over the limit, or chunks missing from the buffer: the
        // count is reported, no chunk is read.
        let mut b = vec![7u8; 24];
        b.extend_from_slice(&300u32.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        let (d, n) = CopyChunkCopy::decode(&b, 256).unwrap();
        assert_eq!((n, d.chunks.len()), (300, 0));
        let mut b = vec![7u8; 24];
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&[0; 4 + 24]);
        let (d, n) = CopyChunkCopy::decode(&b, 256).unwrap();
        assert_eq!((n, d.chunks.len()), (2, 0));
        assert!(CopyChunkCopy::decode(&[0; 31], 256).is_err());
        assert!(FileRange::decode(&[0; 15]).is_err());
        let key = ResumeKeyResponse {
            resume_key: [3; 24],
        };
        let mut b = Vec::new();
        key.encode(&mut b);
        assert_eq!(b.len(), ResumeKeyResponse::SIZE);
        assert_eq!(ResumeKeyResponse::decode(&b).unwrap(), key);
    }
}
