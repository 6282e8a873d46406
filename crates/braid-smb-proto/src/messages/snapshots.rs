//! MS-SMB2 2.2.32.2: SRV_SNAPSHOT_ARRAY, the output of
//! FSCTL_SRV_ENUMERATE_SNAPSHOTS (previous versions of a share).

use crate::codec::{put_utf16le, utf16le_to_string, DecodeError, DecodeResult, Reader, WriteLe};

/// The smallest MaxOutputResponse the request may give (MS-SMB2
/// 3.3.5.15.1), and the least the response carries: Samba's client takes
/// fewer bytes for a malformed answer.
pub const MIN_OUTPUT: usize = 16;

/// SRV_SNAPSHOT_ARRAY: `count` snapshots, of which `tokens` lists the
/// `@GMT-YYYY.MM.DD-HH.MM.SS` tokens when they all fit the client's buffer
/// and none otherwise (then `array_size` says how many bytes they need).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotArray {
    pub count: u32,
    pub array_size: u32,
    pub tokens: Vec<String>,
}

impl SnapshotArray {
    /// The array for `tokens`, as much of it as `max_output` bytes hold
    /// (MS-SMB2 3.3.5.15.1: all the tokens, or only the counts).
    pub fn for_buffer(tokens: Vec<String>, max_output: usize) -> SnapshotArray {
        let array_size = multi_sz_len(&tokens);
        let count = tokens.len() as u32;
        let fits = 12 + array_size <= max_output;
        SnapshotArray {
            count,
            array_size: array_size as u32,
            tokens: if fits { tokens } else { Vec::new() },
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u32(self.count);
        out.put_u32(self.tokens.len() as u32); // NumberOfSnapShotsReturned
        out.put_u32(self.array_size);
        if !self.tokens.is_empty() {
            // A MULTI_SZ: each token NUL-terminated, then one more NUL.
            for t in &self.tokens {
                put_utf16le(out, t);
                out.put_u16(0);
            }
            out.put_u16(0);
        }
        while out.len() - start < MIN_OUTPUT {
            out.push(0);
        }
    }

    pub fn decode(b: &[u8]) -> DecodeResult<SnapshotArray> {
        let mut r = Reader::new(b);
        let count = r.u32()?;
        let returned = r.u32()?;
        let array_size = r.u32()?;
        let mut tokens = Vec::new();
        if returned > 0 {
            let multi = r.bytes(array_size as usize)?;
            let units: Vec<&[u8]> = multi.chunks(2).collect();
            let mut current = Vec::new();
            for u in units {
                if u == [0, 0] {
                    if current.is_empty() {
                        break;
                    }
                    tokens.push(utf16le_to_string(&current)?);
                    current.clear();
                } else {
                    current.extend_from_slice(u);
                }
            }
            if tokens.len() != returned as usize {
                return Err(DecodeError::Invalid("NumberOfSnapShotsReturned"));
            }
            if multi_sz_len(&tokens) != array_size as usize {
                return Err(DecodeError::Invalid("SnapShotArraySize"));
            }
        }
        Ok(SnapshotArray {
            count,
            array_size,
            tokens,
        })
    }
}

/// Bytes of `tokens` as a MULTI_SZ (each NUL-terminated UTF-16, then a
/// final NUL); none: no bytes to fetch.
fn multi_sz_len(tokens: &[String]) -> usize {
    if tokens.is_empty() {
        return 0;
    }
    tokens
        .iter()
        .map(|t| (t.encode_utf16().count() + 1) * 2)
        .sum::<usize>()
        + 2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Vec<String> {
        vec![
            "@GMT-2026.11.25-10.00.00".into(),
            "@GMT-2015.10.31-19.40.30".into(),
        ]
    }

    #[test]
    fn the_whole_array_round_trips() {
        let a = SnapshotArray::for_buffer(tokens(), 65536);
        // 24 characters and a NUL each, then the final NUL.
        assert_eq!(a.array_size, 2 * 25 * 2 + 2);
        let mut out = Vec::new();
        a.encode(&mut out);
        assert_eq!(out.len(), 12 + 102);
        assert_eq!(&out[..8], &[2, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(SnapshotArray::decode(&out).unwrap(), a);
    }

    #[test]
    fn a_small_buffer_gets_the_counts_only() {
        // What Samba's client and the Linux client ask first: 16 bytes.
        let a = SnapshotArray::for_buffer(tokens(), 16);
        assert!(a.tokens.is_empty());
        let mut out = Vec::new();
        a.encode(&mut out);
        assert_eq!(out.len(), MIN_OUTPUT);
        assert_eq!(&out[..12], &[2, 0, 0, 0, 0, 0, 0, 0, 102, 0, 0, 0]);
        assert_eq!(SnapshotArray::decode(&out).unwrap(), a);
        // One byte short of the whole array is still too small.
        assert!(SnapshotArray::for_buffer(tokens(), 12 + 101)
            .tokens
            .is_empty());
        assert_eq!(
            SnapshotArray::for_buffer(tokens(), 12 + 102).tokens.len(),
            2
        );
    }

    #[test]
    fn no_snapshots() {
        let a = SnapshotArray::for_buffer(Vec::new(), 16);
        let mut out = Vec::new();
        a.encode(&mut out);
        assert_eq!(out.len(), MIN_OUTPUT);
        assert_eq!(&out[..12], &[0; 12]);
        assert_eq!(SnapshotArray::decode(&out).unwrap(), a);
    }

    #[test]
    fn a_short_or_lying_answer_is_refused() {
        let mut out = Vec::new();
        SnapshotArray::for_buffer(tokens(), 65536).encode(&mut out);
        assert!(SnapshotArray::decode(&out[..40]).is_err());
        out[4] = 3; // claims three returned
        assert!(SnapshotArray::decode(&out).is_err());
        out[4] = 2;
        out[8] += 2; // an array size the strings do not fill
        out.extend_from_slice(&[0, 0]);
        assert!(SnapshotArray::decode(&out).is_err());
    }
}
