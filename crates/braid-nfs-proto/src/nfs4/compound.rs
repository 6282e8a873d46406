//! COMPOUND and CB_COMPOUND argument decoding, one operation at a time
//! (RFC 8881 16.2.3, 15.2, 20.1): decoding stops at the first operation
//! that cannot be decoded, so the server can answer every operation before
//! it and then NFS4ERR_OP_ILLEGAL or NFS4ERR_BADXDR for that one.

use super::generated::*;
use crate::xdr::{Xdr, XdrError, XdrReader};

/// The arguments of a COMPOUND as far as they decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompoundArgs {
    pub tag: utf8str_cs,
    pub minorversion: u32,
    pub ops: Vec<nfs_argop4>,
    /// Set when decoding stopped: the op number that could not be decoded and why.
    pub stopped: Option<StoppedOp>,
}

/// The arguments of a CB_COMPOUND as far as they decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CbCompoundArgs {
    pub tag: utf8str_cs,
    pub minorversion: u32,
    pub callback_ident: u32,
    pub ops: Vec<nfs_cb_argop4>,
    pub stopped: Option<StoppedOp>,
}

/// The operation at which decoding stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoppedOp {
    /// The op number read, or `OP_ILLEGAL` (10044) when the input ended
    /// before the op number.
    pub opnum: u32,
    pub kind: StopKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopKind {
    /// The opnum is not an operation of any minor version (NFS4ERR_OP_ILLEGAL).
    Illegal,
    /// The arguments did not decode (NFS4ERR_BADXDR).
    BadXdr(XdrError),
}

/// Shared by both programs: decode up to `limit` of `count` operations.
fn decode_ops<T: Xdr>(
    r: &mut XdrReader,
    count: u32,
    limit: usize,
    union_name: &'static str,
) -> (Vec<T>, Option<StoppedOp>) {
    let n = (count as usize).min(limit);
    // Every op takes at least its 4-byte op number: bound the reservation by the input.
    let mut ops = Vec::with_capacity(n.min(r.remaining() / 4));
    for _ in 0..n {
        let opnum = match r.clone().get_u32() {
            Ok(v) => v,
            Err(e) => {
                let opnum = OP_ILLEGAL.0 as u32;
                return (
                    ops,
                    Some(StoppedOp {
                        opnum,
                        kind: StopKind::BadXdr(e),
                    }),
                );
            }
        };
        match T::decode(r) {
            Ok(op) => ops.push(op),
            Err(XdrError::BadDiscriminant { what, .. }) if what == union_name => {
                return (
                    ops,
                    Some(StoppedOp {
                        opnum,
                        kind: StopKind::Illegal,
                    }),
                );
            }
            Err(e) => {
                return (
                    ops,
                    Some(StoppedOp {
                        opnum,
                        kind: StopKind::BadXdr(e),
                    }),
                )
            }
        }
    }
    (ops, None)
}

// RFC 8881 16.2.3: tag, minorversion, argarray<>. A tag over
// NFS4_OPAQUE_LIMIT, or input too short for the three, is an error for the
// whole request; an op that does not decode only stops decoding.
/// Decodes COMPOUND4args: tag, minorversion and the declared op count
/// (returned, not checked against a limit here), then at most
/// `max_ops_to_decode` ops one by one, stopping at the first undecodable
/// one. Bytes after the last declared op are left in `r`.
pub fn decode_compound_args(
    r: &mut XdrReader,
    max_ops_to_decode: usize,
) -> Result<(CompoundArgs, u32), XdrError> {
    let tag = r.get_opaque(NFS4_OPAQUE_LIMIT, "COMPOUND4args.tag")?;
    let minorversion = r.get_u32()?;
    let count = r.get_u32()?;
    let (ops, stopped) = decode_ops(r, count, max_ops_to_decode, "nfs_argop4");
    Ok((
        CompoundArgs {
            tag,
            minorversion,
            ops,
            stopped,
        },
        count,
    ))
}

// RFC 8881 20.1 (CB_COMPOUND): tag, minorversion, callback_ident, argarray<>.
/// The callback side of [`decode_compound_args`] (used by the client).
pub fn decode_cb_compound_args(
    r: &mut XdrReader,
    max_ops_to_decode: usize,
) -> Result<(CbCompoundArgs, u32), XdrError> {
    let tag = r.get_opaque(NFS4_OPAQUE_LIMIT, "CB_COMPOUND4args.tag")?;
    let minorversion = r.get_u32()?;
    let callback_ident = r.get_u32()?;
    let count = r.get_u32()?;
    let (ops, stopped) = decode_ops(r, count, max_ops_to_decode, "nfs_cb_argop4");
    Ok((
        CbCompoundArgs {
            tag,
            minorversion,
            callback_ident,
            ops,
            stopped,
        },
        count,
    ))
}

/// COMPOUND4res (client side): the generated codec.
pub fn decode_compound_res(r: &mut XdrReader) -> Result<COMPOUND4res, XdrError> {
    COMPOUND4res::decode(r)
}

/// CB_COMPOUND4res (server side, reading the client's callback replies).
pub fn decode_cb_compound_res(r: &mut XdrReader) -> Result<CB_COMPOUND4res, XdrError> {
    CB_COMPOUND4res::decode(r)
}

impl CompoundArgs {
    /// The same arguments as the generated type (for re-encoding).
    pub fn to_generated(&self) -> COMPOUND4args {
        COMPOUND4args {
            tag: self.tag.clone(),
            minorversion: self.minorversion,
            argarray: self.ops.clone(),
        }
    }
}

impl CbCompoundArgs {
    pub fn to_generated(&self) -> CB_COMPOUND4args {
        CB_COMPOUND4args {
            tag: self.tag.clone(),
            minorversion: self.minorversion,
            callback_ident: self.callback_ident,
            argarray: self.ops.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdr::{to_bytes, XdrWriter};
    use bytes::Bytes;

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_be_bytes()).collect()
    }

    fn reader(v: Vec<u8>) -> XdrReader {
        XdrReader::new(Bytes::from(v))
    }

    fn sequence() -> SEQUENCE4args {
        SEQUENCE4args {
            sa_sessionid: [0x11; 16],
            sa_sequenceid: 7,
            sa_slotid: 1,
            sa_highest_slotid: 9,
            sa_cachethis: true,
        }
    }

    // RFC 8881 18.46.1: SEQUENCE4args field order, encoded by hand.
    #[test]
    fn golden_sequence() {
        let op = nfs_argop4::OP_SEQUENCE(sequence());
        let mut want = words(&[53]);
        want.extend_from_slice(&[0x11; 16]);
        want.extend_from_slice(&words(&[7, 1, 9, 1]));
        assert_eq!(to_bytes(&op), want);
        assert_eq!(crate::xdr::from_bytes::<nfs_argop4>(&want).unwrap(), op);
    }

    // RFC 8881 18.35.1: EXCHANGE_ID4args, encoded by hand.
    #[test]
    fn golden_exchange_id() {
        let a = EXCHANGE_ID4args {
            eia_clientowner: client_owner4 {
                co_verifier: *b"verifier",
                co_ownerid: b"braid".to_vec(),
            },
            eia_flags: EXCHGID4_FLAG_USE_NON_PNFS,
            eia_state_protect: state_protect4_a::SP4_NONE,
            eia_client_impl_id: vec![nfs_impl_id4 {
                nii_domain: b"x.org".to_vec(),
                nii_name: b"c".to_vec(),
                nii_date: nfstime4 {
                    seconds: 5,
                    nseconds: 6,
                },
            }],
        };
        let mut want = b"verifier".to_vec();
        want.extend_from_slice(&words(&[5]));
        want.extend_from_slice(b"braid\0\0\0");
        want.extend_from_slice(&words(&[0x0001_0000, 0, 1, 5]));
        want.extend_from_slice(b"x.org\0\0\0");
        want.extend_from_slice(&words(&[1]));
        want.extend_from_slice(b"c\0\0\0");
        want.extend_from_slice(&words(&[0, 5, 6]));
        assert_eq!(to_bytes(&a), want);
        assert_eq!(
            crate::xdr::from_bytes::<EXCHANGE_ID4args>(&want).unwrap(),
            a
        );
    }

    #[test]
    fn compound_stops_at_illegal_and_bad_ops() {
        let mut w = XdrWriter::new();
        w.put_opaque(b"t");
        w.put_u32(1);
        w.put_u32(4);
        nfs_argop4::OP_SEQUENCE(sequence()).encode(&mut w);
        nfs_argop4::OP_PUTROOTFH.encode(&mut w);
        w.put_u32(2); // not an operation
        w.put_u32(0);
        let b = w.into_vec();
        let (c, n) = decode_compound_args(&mut reader(b.clone()), 100).unwrap();
        assert_eq!(n, 4);
        assert_eq!(c.tag, b"t");
        assert_eq!(c.ops.len(), 2);
        assert_eq!(
            c.stopped,
            Some(StoppedOp {
                opnum: 2,
                kind: StopKind::Illegal
            })
        );
        // A limit below the count decodes only that many, without a stop.
        let (c, n) = decode_compound_args(&mut reader(b), 1).unwrap();
        assert_eq!((c.ops.len(), n, c.stopped), (1, 4, None));
        // Truncated arguments: BADXDR at that op.
        let mut v = words(&[0, 1, 2, 24]); // PUTROOTFH
        v.extend_from_slice(&words(&[22, 200])); // PUTFH with a 200-byte handle, no bytes
        let (c, _) = decode_compound_args(&mut reader(v), 100).unwrap();
        assert_eq!(c.ops, vec![nfs_argop4::OP_PUTROOTFH]);
        assert!(matches!(
            c.stopped,
            Some(StoppedOp {
                opnum: 22,
                kind: StopKind::BadXdr(_)
            })
        ));
        // Missing op number.
        let (c, _) = decode_compound_args(&mut reader(words(&[0, 1, 1])), 100).unwrap();
        assert_eq!(c.stopped.unwrap().kind, StopKind::BadXdr(XdrError::Short));
        // Tag over the limit is an error for the whole request.
        let mut v = words(&[2000]);
        v.extend_from_slice(&[0; 2000]);
        assert!(decode_compound_args(&mut reader(v), 100).is_err());
    }

    #[test]
    fn cb_compound() {
        let args = CB_COMPOUND4args {
            tag: vec![],
            minorversion: 1,
            callback_ident: 3,
            argarray: vec![nfs_cb_argop4::OP_CB_RECALL(CB_RECALL4args {
                stateid: stateid4 {
                    seqid: 1,
                    other: [2; 12],
                },
                truncate: false,
                fh: vec![1, 2, 3],
            })],
        };
        let (c, n) = decode_cb_compound_args(&mut reader(to_bytes(&args)), 16).unwrap();
        assert_eq!(n, 1);
        assert_eq!(c.to_generated(), args);
        assert_eq!(c.stopped, None);
    }
}
