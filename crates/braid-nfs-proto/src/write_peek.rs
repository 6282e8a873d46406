//! Where a WRITE's data begins in an RPC call record, read from the
//! record's first bytes before the rest has arrived.
//!
//! A server that knows this can receive the rest of a large record into a
//! buffer placed so that the data lands on a page boundary, and write it to
//! the disk with direct I/O instead of copying it into the page cache. The
//! answer is only a placement hint: the record is decoded in full as usual
//! afterwards, so a wrong guess costs alignment, never correctness.
//!
//! Only the compound clients send for a write is recognised: SEQUENCE,
//! PUTFH, WRITE (RFC 8881 18.46, 18.19, 18.32; Linux and `braid-nfs-client`
//! both send it, Linux with a GETATTR after the WRITE). Anything else is
//! `None`.

use crate::nfs4::{OP_PUTFH, OP_SEQUENCE, OP_WRITE};
use crate::rpc::{NFS4_PROGRAM, NFS_V4};

/// RFC 5531 9: a call, RPC version 2; RFC 8881 16.2: COMPOUND.
const CALL: u32 = 0;
const RPC_VERSION: u32 = 2;
const COMPOUND: u32 = 1;
/// RFC 5531 8.2: opaque_auth bodies are at most 400 bytes.
const MAX_AUTH: usize = 400;
/// The longest tag worth looking past (clients send short or empty ones).
const MAX_TAG: usize = 1024;
/// RFC 8881 18.46.1: sessionid, sequenceid, slotid, highest slotid, cachethis.
const SEQUENCE_ARGS: usize = 16 + 4 + 4 + 4 + 4;
/// RFC 8881 2.3.1: NFS4_FHSIZE.
const MAX_FH: usize = 128;
/// RFC 8881 18.32.1: stateid (seqid and 12 bytes), offset, stable.
const WRITE_ARGS_BEFORE_DATA: usize = 16 + 8 + 4;

/// Reads big-endian words and opaques off the front of a slice; every
/// length is checked against what is there.
struct Peek<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Peek<'_> {
    fn u32(&mut self) -> Option<u32> {
        let b = self.buf.get(self.pos..self.pos.checked_add(4)?)?;
        self.pos += 4;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        let end = self.pos.checked_add(n)?;
        if end > self.buf.len() {
            return None;
        }
        self.pos = end;
        Some(())
    }

    /// A variable-length opaque of at most `max` bytes, padded to 4.
    fn skip_opaque(&mut self, max: usize) -> Option<()> {
        let len = self.u32()? as usize;
        if len > max {
            return None;
        }
        self.skip(len.div_ceil(4) * 4)
    }
}

/// The offset, from the start of the call record `head` begins (record
/// mark excluded), of the data of the WRITE in a SEQUENCE, PUTFH, WRITE
/// compound, and the data's declared length. `None` when `head` is not such
/// a call or is too short to tell.
pub fn write_data_offset(head: &[u8]) -> Option<(usize, usize)> {
    let mut p = Peek { buf: head, pos: 0 };
    let _xid = p.u32()?;
    if p.u32()? != CALL
        || p.u32()? != RPC_VERSION
        || p.u32()? != NFS4_PROGRAM
        || p.u32()? != NFS_V4
        || p.u32()? != COMPOUND
    {
        return None;
    }
    // Credential and verifier: flavour and body.
    for _ in 0..2 {
        let _flavor = p.u32()?;
        p.skip_opaque(MAX_AUTH)?;
    }
    p.skip_opaque(MAX_TAG)?;
    let _minorversion = p.u32()?;
    let ops = p.u32()?;
    if ops < 3 {
        return None;
    }
    if p.u32()? != OP_SEQUENCE.0 as u32 {
        return None;
    }
    p.skip(SEQUENCE_ARGS)?;
    if p.u32()? != OP_PUTFH.0 as u32 {
        return None;
    }
    p.skip_opaque(MAX_FH)?;
    if p.u32()? != OP_WRITE.0 as u32 {
        return None;
    }
    p.skip(WRITE_ARGS_BEFORE_DATA)?;
    let len = p.u32()? as usize;
    Some((p.pos, len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs4::*;
    use crate::rpc::{
        encode_call, CallHeader, OpaqueAuth, AUTH_NONE, AUTH_SYS, NFS4_PROGRAM, NFS_V4,
    };
    use crate::xdr::{Xdr, XdrWriter};
    use bytes::Bytes;

    /// An RPC call with an AUTH_SYS credential, as `braid-nfs-client`
    /// and Linux send it, carrying `args`.
    fn call(args: &COMPOUND4args) -> Vec<u8> {
        let mut body = Vec::new();
        // AUTH_SYS: stamp, machine name "host", uid, gid, 2 gids.
        for v in [0u32, 4] {
            body.extend_from_slice(&v.to_be_bytes());
        }
        body.extend_from_slice(b"host");
        for v in [1000u32, 1000, 2, 10, 20] {
            body.extend_from_slice(&v.to_be_bytes());
        }
        let mut w = XdrWriter::with_capacity(256);
        encode_call(
            &mut w,
            &CallHeader {
                xid: 7,
                prog: NFS4_PROGRAM,
                vers: NFS_V4,
                proc_: COMPOUND,
                cred: OpaqueAuth {
                    flavor: AUTH_SYS,
                    body,
                },
                verf: OpaqueAuth {
                    flavor: AUTH_NONE,
                    body: Vec::new(),
                },
            },
        );
        args.encode(&mut w);
        w.into_segments().iter().flat_map(|s| s.to_vec()).collect()
    }

    fn sequence() -> nfs_argop4 {
        nfs_argop4::OP_SEQUENCE(SEQUENCE4args {
            sa_sessionid: [9; 16],
            sa_sequenceid: 1,
            sa_slotid: 0,
            sa_highest_slotid: 0,
            sa_cachethis: false,
        })
    }

    fn write_args(tag: &[u8], fh_len: usize, data: &[u8], getattr: bool) -> COMPOUND4args {
        let mut argarray = vec![
            sequence(),
            nfs_argop4::OP_PUTFH(PUTFH4args {
                object: vec![5; fh_len],
            }),
            nfs_argop4::OP_WRITE(WRITE4args {
                stateid: stateid4 {
                    seqid: 1,
                    other: [3; 12],
                },
                offset: 1 << 20,
                stable: UNSTABLE4,
                data: Bytes::copy_from_slice(data),
            }),
        ];
        if getattr {
            argarray.push(nfs_argop4::OP_GETATTR(GETATTR4args {
                attr_request: vec![1 << 3],
            }));
        }
        COMPOUND4args {
            tag: tag.to_vec(),
            minorversion: 1,
            argarray,
        }
    }

    #[test]
    fn finds_the_data_of_writes_whatever_the_tag_and_handle_lengths() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        for (tag, fh_len, getattr) in [
            (&b""[..], 28, false),
            (&b"a"[..], 1, true),
            (&b"write tag"[..], 128, true),
        ] {
            let rec = call(&write_args(tag, fh_len, &data, getattr));
            let (at, len) = write_data_offset(&rec).expect("a write");
            assert_eq!(len, data.len());
            assert_eq!(&rec[at..at + len], &data[..]);
            // The head alone (up to the data) is enough to tell.
            assert_eq!(write_data_offset(&rec[..at]), Some((at, len)));
            // Any shorter, and it cannot tell.
            assert_eq!(write_data_offset(&rec[..at - 1]), None);
        }
    }

    #[test]
    fn other_calls_and_garbage_are_not_writes() {
        let read = COMPOUND4args {
            tag: Vec::new(),
            minorversion: 1,
            argarray: vec![
                sequence(),
                nfs_argop4::OP_PUTFH(PUTFH4args {
                    object: vec![5; 28],
                }),
                nfs_argop4::OP_READ(READ4args {
                    stateid: stateid4 {
                        seqid: 1,
                        other: [3; 12],
                    },
                    offset: 0,
                    count: 1 << 20,
                }),
            ],
        };
        assert_eq!(write_data_offset(&call(&read)), None);
        assert_eq!(write_data_offset(&[]), None);
        assert_eq!(write_data_offset(&[0xff; 600]), None);
        // A handle longer than NFS4_FHSIZE is no WRITE compound.
        let rec = call(&write_args(b"", 129, &[1; 64], false));
        assert_eq!(write_data_offset(&rec), None);
    }
}
