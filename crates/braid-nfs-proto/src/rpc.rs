//! ONC RPC version 2 message headers (RFC 5531 9, 8) and AUTH_SYS
//! credentials (RFC 5531 appendix A).

use crate::xdr::{Xdr, XdrError, XdrReader, XdrWriter};

/// RFC 5531 9: the RPC protocol version this crate speaks.
pub const RPC_VERSION: u32 = 2;
/// RFC 5531 8.2: opaque_auth bodies are at most 400 bytes.
pub const MAX_AUTH_BYTES: u32 = 400;

pub const AUTH_NONE: u32 = 0;
pub const AUTH_SYS: u32 = 1;
pub const RPCSEC_GSS: u32 = 6;

pub const NFS4_PROGRAM: u32 = 100003;
pub const NFS_V4: u32 = 4;
pub const NFSPROC4_NULL: u32 = 0;
pub const NFSPROC4_COMPOUND: u32 = 1;
/// The callback program's version (RFC 8881 18.36: the program number itself
/// is chosen by the client in CREATE_SESSION).
pub const NFS_CB: u32 = 1;
pub const CB_NULL: u32 = 0;
pub const CB_COMPOUND: u32 = 1;

// RFC 5531 9: msg_type.
pub const CALL: u32 = 0;
pub const REPLY: u32 = 1;
// reply_stat
const MSG_ACCEPTED: u32 = 0;
const MSG_DENIED: u32 = 1;
// reject_stat
const RPC_MISMATCH: u32 = 0;
const AUTH_ERROR: u32 = 1;

/// RFC 5531 8.2: `opaque_auth { auth_flavor flavor; opaque body<400>; }`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct OpaqueAuth {
    pub flavor: u32,
    #[cfg_attr(
        test,
        proptest(strategy = "proptest::collection::vec(proptest::prelude::any::<u8>(), 0..=40)")
    )]
    pub body: Vec<u8>,
}

impl OpaqueAuth {
    /// AUTH_NONE with an empty body.
    pub fn none() -> Self {
        Self::default()
    }

    /// An AUTH_SYS credential carrying `p`.
    pub fn sys(p: &AuthSysParms) -> Self {
        OpaqueAuth {
            flavor: AUTH_SYS,
            body: crate::xdr::to_bytes(p),
        }
    }

    /// The AUTH_SYS parameters in the body (which must be exactly them).
    pub fn auth_sys(&self) -> Result<AuthSysParms, XdrError> {
        crate::xdr::from_bytes(&self.body)
    }
}

impl Xdr for OpaqueAuth {
    fn encode(&self, w: &mut XdrWriter) {
        w.put_u32(self.flavor);
        w.put_opaque(&self.body);
    }
    fn decode(r: &mut XdrReader) -> Result<Self, XdrError> {
        Ok(OpaqueAuth {
            flavor: r.get_u32()?,
            body: r.get_opaque(MAX_AUTH_BYTES, "opaque_auth.body")?,
        })
    }
}

/// RFC 5531 A.1: the AUTH_SYS credential body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct AuthSysParms {
    pub stamp: u32,
    /// At most 255 bytes.
    #[cfg_attr(
        test,
        proptest(strategy = "proptest::collection::vec(proptest::prelude::any::<u8>(), 0..=20)")
    )]
    pub machinename: Vec<u8>,
    pub uid: u32,
    pub gid: u32,
    /// At most 16 supplementary groups.
    #[cfg_attr(
        test,
        proptest(strategy = "proptest::collection::vec(proptest::prelude::any::<u32>(), 0..=16)")
    )]
    pub gids: Vec<u32>,
}

impl Xdr for AuthSysParms {
    fn encode(&self, w: &mut XdrWriter) {
        w.put_u32(self.stamp);
        w.put_opaque(&self.machinename);
        w.put_u32(self.uid);
        w.put_u32(self.gid);
        w.put_u32(self.gids.len() as u32);
        for g in &self.gids {
            w.put_u32(*g);
        }
    }
    fn decode(r: &mut XdrReader) -> Result<Self, XdrError> {
        let stamp = r.get_u32()?;
        let machinename = r.get_opaque(255, "authsys_parms.machinename")?;
        let uid = r.get_u32()?;
        let gid = r.get_u32()?;
        let n = r.get_count(16, 4, "authsys_parms.gids")?;
        let mut gids = Vec::with_capacity(n);
        for _ in 0..n {
            gids.push(r.get_u32()?);
        }
        Ok(AuthSysParms {
            stamp,
            machinename,
            uid,
            gid,
            gids,
        })
    }
}

/// RFC 5531 9: `call_body` with the xid and message type in front.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct CallHeader {
    pub xid: u32,
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    pub cred: OpaqueAuth,
    pub verf: OpaqueAuth,
}

/// Why a call header could not be taken.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum RpcError {
    /// msg_type was not CALL: drop the message.
    #[error("xid {xid:#x}: not a call (msg_type {msg_type})")]
    NotCall { xid: u32, msg_type: u32 },
    /// rpcvers != 2: answer MSG_DENIED / RPC_MISMATCH (2, 2).
    #[error("xid {xid:#x}: RPC version {vers} not supported")]
    RpcMismatch { xid: u32, vers: u32 },
    /// The header did not decode. With the xid the server can answer
    /// GARBAGE_ARGS; without it, drop.
    #[error("rpc header{}: {err}", .xid.map(|x| format!(" (xid {x:#x})")).unwrap_or_default())]
    Xdr { xid: Option<u32>, err: XdrError },
}

impl RpcError {
    /// The xid, when it was read.
    pub fn xid(&self) -> Option<u32> {
        match self {
            RpcError::NotCall { xid, .. } | RpcError::RpcMismatch { xid, .. } => Some(*xid),
            RpcError::Xdr { xid, .. } => *xid,
        }
    }
}

impl From<XdrError> for RpcError {
    fn from(err: XdrError) -> Self {
        RpcError::Xdr { xid: None, err }
    }
}

// RFC 5531 9: xid, CALL, rpcvers, prog, vers, proc, cred, verf. The
// procedure's arguments follow in `r`.
pub fn decode_call(r: &mut XdrReader) -> Result<CallHeader, RpcError> {
    let xid = r.get_u32()?;
    let with_xid = |err| RpcError::Xdr {
        xid: Some(xid),
        err,
    };
    let msg_type = r.get_u32().map_err(with_xid)?;
    if msg_type != CALL {
        return Err(RpcError::NotCall { xid, msg_type });
    }
    let vers = r.get_u32().map_err(with_xid)?;
    if vers != RPC_VERSION {
        return Err(RpcError::RpcMismatch { xid, vers });
    }
    let prog = r.get_u32().map_err(with_xid)?;
    let vers = r.get_u32().map_err(with_xid)?;
    let proc_ = r.get_u32().map_err(with_xid)?;
    let cred = OpaqueAuth::decode(r).map_err(with_xid)?;
    let verf = OpaqueAuth::decode(r).map_err(with_xid)?;
    Ok(CallHeader {
        xid,
        prog,
        vers,
        proc_,
        cred,
        verf,
    })
}

/// Encodes a call header; the caller appends the procedure's arguments.
pub fn encode_call(w: &mut XdrWriter, h: &CallHeader) {
    w.put_u32(h.xid);
    w.put_u32(CALL);
    w.put_u32(RPC_VERSION);
    w.put_u32(h.prog);
    w.put_u32(h.vers);
    w.put_u32(h.proc_);
    h.cred.encode(w);
    h.verf.encode(w);
}

/// RFC 5531 9: accept_stat (with PROG_MISMATCH's mismatch_info).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum AcceptStat {
    Success,
    ProgUnavail,
    ProgMismatch { low: u32, high: u32 },
    ProcUnavail,
    GarbageArgs,
    SystemErr,
}

/// RFC 5531 9 auth_stat, and RFC 2203 5.3.3.3's RPCSEC_GSS values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct AuthStat(pub u32);

impl AuthStat {
    pub const AUTH_OK: AuthStat = AuthStat(0);
    pub const AUTH_BADCRED: AuthStat = AuthStat(1);
    pub const AUTH_REJECTEDCRED: AuthStat = AuthStat(2);
    pub const AUTH_BADVERF: AuthStat = AuthStat(3);
    pub const AUTH_REJECTEDVERF: AuthStat = AuthStat(4);
    pub const AUTH_TOOWEAK: AuthStat = AuthStat(5);
    pub const RPCSEC_GSS_CREDPROBLEM: AuthStat = AuthStat(13);
    pub const RPCSEC_GSS_CTXPROBLEM: AuthStat = AuthStat(14);
}

/// The body of a reply (RFC 5531 9, reply_body).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum ReplyStat {
    Accepted { verf: OpaqueAuth, stat: AcceptStat },
    DeniedRpcMismatch { low: u32, high: u32 },
    DeniedAuth(AuthStat),
}

impl ReplyStat {
    /// MSG_ACCEPTED with an AUTH_NONE verifier.
    pub fn accepted(stat: AcceptStat) -> Self {
        ReplyStat::Accepted {
            verf: OpaqueAuth::none(),
            stat,
        }
    }
}

/// RFC 5531 9: xid, REPLY, reply_body. For `Success` the caller then
/// appends the procedure's results.
pub fn encode_reply(w: &mut XdrWriter, xid: u32, r: &ReplyStat) {
    w.put_u32(xid);
    w.put_u32(REPLY);
    match r {
        ReplyStat::Accepted { verf, stat } => {
            w.put_u32(MSG_ACCEPTED);
            verf.encode(w);
            match *stat {
                AcceptStat::Success => w.put_u32(0),
                AcceptStat::ProgUnavail => w.put_u32(1),
                AcceptStat::ProgMismatch { low, high } => {
                    w.put_u32(2);
                    w.put_u32(low);
                    w.put_u32(high);
                }
                AcceptStat::ProcUnavail => w.put_u32(3),
                AcceptStat::GarbageArgs => w.put_u32(4),
                AcceptStat::SystemErr => w.put_u32(5),
            }
        }
        ReplyStat::DeniedRpcMismatch { low, high } => {
            w.put_u32(MSG_DENIED);
            w.put_u32(RPC_MISMATCH);
            w.put_u32(*low);
            w.put_u32(*high);
        }
        ReplyStat::DeniedAuth(s) => {
            w.put_u32(MSG_DENIED);
            w.put_u32(AUTH_ERROR);
            w.put_u32(s.0);
        }
    }
}

/// Decodes a reply header; for `Accepted { stat: Success, .. }` the
/// procedure's results follow in `r`.
pub fn decode_reply(r: &mut XdrReader) -> Result<(u32, ReplyStat), XdrError> {
    let xid = r.get_u32()?;
    let bad = |what, value: u32| XdrError::BadDiscriminant {
        what,
        value: value as i64,
    };
    let mt = r.get_u32()?;
    if mt != REPLY {
        return Err(bad("msg_type", mt));
    }
    let st = match r.get_u32()? {
        MSG_ACCEPTED => {
            let verf = OpaqueAuth::decode(r)?;
            let stat = match r.get_u32()? {
                0 => AcceptStat::Success,
                1 => AcceptStat::ProgUnavail,
                2 => AcceptStat::ProgMismatch {
                    low: r.get_u32()?,
                    high: r.get_u32()?,
                },
                3 => AcceptStat::ProcUnavail,
                4 => AcceptStat::GarbageArgs,
                5 => AcceptStat::SystemErr,
                v => return Err(bad("accept_stat", v)),
            };
            ReplyStat::Accepted { verf, stat }
        }
        MSG_DENIED => match r.get_u32()? {
            RPC_MISMATCH => ReplyStat::DeniedRpcMismatch {
                low: r.get_u32()?,
                high: r.get_u32()?,
            },
            AUTH_ERROR => ReplyStat::DeniedAuth(AuthStat(r.get_u32()?)),
            v => return Err(bad("reject_stat", v)),
        },
        v => return Err(bad("reply_stat", v)),
    };
    Ok((xid, st))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use proptest::prelude::*;

    fn reader(v: Vec<u8>) -> XdrReader {
        XdrReader::new(Bytes::from(v))
    }

    #[test]
    fn golden_call() {
        let h = CallHeader {
            xid: 0x01020304,
            prog: NFS4_PROGRAM,
            vers: NFS_V4,
            proc_: NFSPROC4_COMPOUND,
            cred: OpaqueAuth::sys(&AuthSysParms {
                stamp: 9,
                machinename: b"ab".to_vec(),
                uid: 1000,
                gid: 100,
                gids: vec![5],
            }),
            verf: OpaqueAuth::none(),
        };
        let mut w = XdrWriter::new();
        encode_call(&mut w, &h);
        let b = w.into_vec();
        #[rustfmt::skip]
        let want: Vec<u8> = [
            1u32 << 24 | 2 << 16 | 3 << 8 | 4, 0, 2, 100003, 4, 1,
            1, 28, 9, 2, 0x6162_0000, 1000, 100, 1, 5,
            0, 0,
        ].iter().flat_map(|x| x.to_be_bytes()).collect();
        assert_eq!(b, want);
        let mut r = reader(b);
        let got = decode_call(&mut r).unwrap();
        r.finish().unwrap();
        assert_eq!(got, h);
        assert_eq!(got.cred.auth_sys().unwrap().uid, 1000);
    }

    #[test]
    fn call_errors() {
        let words = |w: &[u32]| -> Vec<u8> { w.iter().flat_map(|x| x.to_be_bytes()).collect() };
        assert_eq!(
            decode_call(&mut reader(words(&[7, 1]))),
            Err(RpcError::NotCall {
                xid: 7,
                msg_type: 1
            })
        );
        assert_eq!(
            decode_call(&mut reader(words(&[7, 0, 3]))),
            Err(RpcError::RpcMismatch { xid: 7, vers: 3 })
        );
        let e = decode_call(&mut reader(words(&[7, 0, 2, 100003, 4, 1, 1, 401]))).unwrap_err();
        assert_eq!(e.xid(), Some(7));
        assert!(matches!(
            e,
            RpcError::Xdr {
                err: XdrError::TooLong { .. },
                ..
            }
        ));
        assert_eq!(
            decode_call(&mut reader(vec![0, 0])).unwrap_err().xid(),
            None
        );
    }

    #[test]
    fn golden_reply() {
        let mut w = XdrWriter::new();
        encode_reply(&mut w, 5, &ReplyStat::DeniedRpcMismatch { low: 2, high: 2 });
        let b = w.into_vec();
        assert_eq!(
            b,
            [0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2]
        );
        let mut w = XdrWriter::new();
        encode_reply(&mut w, 5, &ReplyStat::accepted(AcceptStat::Success));
        assert_eq!(
            w.into_vec(),
            [0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    proptest! {
        #[test]
        fn call_round_trip(h in any::<CallHeader>()) {
            let mut w = XdrWriter::new();
            encode_call(&mut w, &h);
            let mut r = reader(w.into_vec());
            prop_assert_eq!(decode_call(&mut r).unwrap(), h);
            prop_assert_eq!(r.remaining(), 0);
        }

        #[test]
        fn reply_round_trip(xid in any::<u32>(), s in any::<ReplyStat>()) {
            let mut w = XdrWriter::new();
            encode_reply(&mut w, xid, &s);
            let mut r = reader(w.into_vec());
            prop_assert_eq!(decode_reply(&mut r).unwrap(), (xid, s));
            prop_assert_eq!(r.remaining(), 0);
        }

        #[test]
        fn auth_sys_round_trip(p in any::<AuthSysParms>()) {
            prop_assert_eq!(OpaqueAuth::sys(&p).auth_sys().unwrap(), p);
        }
    }
}
