//! Fuzz targets for `braid-nfs-proto`: record marking, the ONC RPC call
//! header, COMPOUND arguments and attribute lists.

use std::fmt::Debug;

use braid_nfs_proto::nfs4::attr::{decode_attrs, encode_attrs, Bitmap, FileAttrs};
use braid_nfs_proto::nfs4::compound::{decode_compound_args, StopKind};
use braid_nfs_proto::nfs4::*;
use braid_nfs_proto::record::{record_mark, RecordDecoder};
use braid_nfs_proto::rpc::{decode_call, encode_call, AuthSysParms, CallHeader, OpaqueAuth};
use braid_nfs_proto::xdr::{from_bytes, to_bytes, Xdr, XdrReader, XdrWriter};
use bytes::{Bytes, BytesMut};

/// decode(encode(x)) == x for a value that came from a decode.
fn rt<T: Xdr + PartialEq + Debug>(x: &T) {
    let b = to_bytes(x);
    assert_eq!(b.len() % 4, 0);
    let y: T = from_bytes(&b).unwrap_or_else(|e| {
        panic!(
            "re-decode of {} failed: {e}\n{x:?}",
            std::any::type_name::<T>()
        )
    });
    assert_eq!(&y, x);
}

/// `nfs_record`: byte 0 = piece size - 1 (bits 0-4) and the record limit
/// selector (bits 5-7); the rest is the stream, fed in pieces. No panic;
/// every record returned is at most the limit; feeding the same stream in
/// one piece gives the same records.
pub fn nfs_record(data: &[u8]) {
    let Some((&ctl, stream)) = data.split_first() else {
        return;
    };
    let piece = (ctl & 0x1f) as usize + 1;
    let max = [0usize, 4, 16, 64, 256, 1024, 4096, 1 << 20][(ctl >> 5) as usize];
    let run = |piece: usize| {
        let mut d = RecordDecoder::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for c in stream.chunks(piece) {
            buf.extend_from_slice(c);
            let _ = d.wanted(&buf);
            loop {
                match d.decode(&mut buf) {
                    Ok(Some(r)) => {
                        assert!(r.len() <= max);
                        out.push(r);
                    }
                    Ok(None) => break,
                    Err(_) => return (out, true),
                }
            }
        }
        (out, false)
    };
    let (a, a_err) = run(piece);
    let (b, b_err) = run(stream.len().max(1));
    assert_eq!(a_err, b_err);
    assert_eq!(a, b);
}

/// `rpc_call`: an RPC call header (+ anything after it). If it decodes,
/// encode → decode gives the same header; an AUTH_SYS body that decodes
/// round-trips too.
pub fn rpc_call(data: &[u8]) {
    let mut r = XdrReader::new(Bytes::copy_from_slice(data));
    let Ok(h) = decode_call(&mut r) else { return };
    let mut w = XdrWriter::new();
    encode_call(&mut w, &h);
    let mut r2 = XdrReader::new(Bytes::from(w.into_vec()));
    assert_eq!(decode_call(&mut r2).unwrap(), h);
    assert_eq!(r2.remaining(), 0);
    if let Ok(p) = h.cred.auth_sys() {
        assert_eq!(OpaqueAuth::sys(&p).auth_sys().unwrap(), p);
    }
}

fn check_attrs(f: &fattr4) {
    if let Ok(a) = decode_attrs(f) {
        let g = encode_attrs(&a, &a.present());
        assert_eq!(decode_attrs(&g).unwrap(), a);
    }
}

/// `nfs_compound`: an RPC call header, then COMPOUND4args as the server
/// reads them (at most 64 ops). Every decoded op re-encodes and decodes
/// equal; attribute lists in SETATTR/CREATE/OPEN/VERIFY/NVERIFY go through
/// decode_attrs (and round trip when they decode).
pub fn nfs_compound(data: &[u8]) {
    let mut r = XdrReader::new(Bytes::copy_from_slice(data));
    if decode_call(&mut r).is_err() {
        return;
    }
    let Ok((c, count)) = decode_compound_args(&mut r, 64) else {
        return;
    };
    assert!(c.ops.len() <= 64 && c.ops.len() <= count as usize);
    if let Some(s) = &c.stopped {
        if let StopKind::Illegal = s.kind {
            assert_eq!(nfs_opnum4(s.opnum as i32).name(), "UNKNOWN");
        }
    }
    for op in &c.ops {
        rt(op);
        match op {
            nfs_argop4::OP_SETATTR(a) => check_attrs(&a.obj_attributes),
            nfs_argop4::OP_CREATE(a) => check_attrs(&a.createattrs),
            nfs_argop4::OP_VERIFY(a) => check_attrs(&a.obj_attributes),
            nfs_argop4::OP_NVERIFY(a) => check_attrs(&a.obj_attributes),
            nfs_argop4::OP_OPEN(a) => {
                if let openflag4::OPEN4_CREATE(how) = &a.openhow {
                    match how {
                        createhow4::UNCHECKED4(f) | createhow4::GUARDED4(f) => check_attrs(f),
                        createhow4::EXCLUSIVE4_1(e) => check_attrs(&e.cva_attrs),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    rt(&c.to_generated());
}

/// `nfs_attrs`: an XDR fattr4 (bitmap4, then attrlist4 as an opaque).
/// decode_attrs never panics; what it accepts re-encodes to the same
/// attributes.
pub fn nfs_attrs(data: &[u8]) {
    let mut r = XdrReader::new(Bytes::copy_from_slice(data));
    let Ok(f) = fattr4::decode(&mut r) else {
        return;
    };
    check_attrs(&f);
    rt(&f);
}

// ---- seeds -----------------------------------------------------------------

fn call(proc_: u32) -> Vec<u8> {
    let mut w = XdrWriter::new();
    let cred = OpaqueAuth::sys(&AuthSysParms {
        stamp: 1,
        machinename: b"client".to_vec(),
        uid: 1000,
        gid: 1000,
        gids: vec![1000, 4],
    });
    encode_call(
        &mut w,
        &CallHeader {
            xid: 0x1234,
            prog: 100003,
            vers: 4,
            proc_,
            cred,
            verf: OpaqueAuth::none(),
        },
    );
    w.into_vec()
}

fn sample_attrs() -> FileAttrs {
    FileAttrs {
        size: Some(4096),
        mode: Some(0o640),
        owner: Some(b"1000".to_vec()),
        owner_group: Some(b"1000".to_vec()),
        time_modify_set: Some(settime4::Default(SET_TO_SERVER_TIME4)),
        time_access_set: Some(settime4::SET_TO_CLIENT_TIME4(nfstime4 {
            seconds: 5,
            nseconds: 6,
        })),
        ..Default::default()
    }
}

fn compound(ops: Vec<nfs_argop4>) -> Vec<u8> {
    let mut v = call(1);
    v.extend(to_bytes(&COMPOUND4args {
        tag: b"seed".to_vec(),
        minorversion: 1,
        argarray: ops,
    }));
    v
}

pub fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut s = Vec::new();
    let seq = nfs_argop4::OP_SEQUENCE(SEQUENCE4args {
        sa_sessionid: [1; 16],
        sa_sequenceid: 1,
        sa_slotid: 0,
        sa_highest_slotid: 0,
        sa_cachethis: false,
    });
    let fattr = encode_attrs(
        &sample_attrs(),
        &Bitmap::from_bits(&(0..80).collect::<Vec<_>>()),
    );
    let st = stateid4 {
        seqid: 1,
        other: [2; 12],
    };
    s.push((
        "nfs_compound",
        "putrootfh-getattr".into(),
        compound(vec![
            seq.clone(),
            nfs_argop4::OP_PUTROOTFH,
            nfs_argop4::OP_GETATTR(GETATTR4args {
                attr_request: vec![0x0010_011a, 0x00b0_a23a],
            }),
        ]),
    ));
    s.push((
        "nfs_compound",
        "setattr".into(),
        compound(vec![
            seq.clone(),
            nfs_argop4::OP_PUTFH(PUTFH4args {
                object: vec![9; 16],
            }),
            nfs_argop4::OP_SETATTR(SETATTR4args {
                stateid: st.clone(),
                obj_attributes: fattr.clone(),
            }),
        ]),
    ));
    s.push((
        "nfs_compound",
        "open-create-write".into(),
        compound(vec![
            seq.clone(),
            nfs_argop4::OP_OPEN(OPEN4args {
                seqid: 0,
                share_access: OPEN4_SHARE_ACCESS_BOTH,
                share_deny: OPEN4_SHARE_DENY_NONE,
                owner: open_owner4 {
                    clientid: 7,
                    owner: b"o".to_vec(),
                },
                openhow: openflag4::OPEN4_CREATE(createhow4::GUARDED4(fattr.clone())),
                claim: open_claim4::CLAIM_NULL(b"file".to_vec()),
            }),
            nfs_argop4::OP_WRITE(WRITE4args {
                stateid: st.clone(),
                offset: 0,
                stable: FILE_SYNC4,
                data: Bytes::from_static(b"hello"),
            }),
            nfs_argop4::OP_CREATE(CREATE4args {
                objtype: createtype4::NF4DIR,
                objname: b"d".to_vec(),
                createattrs: fattr.clone(),
            }),
        ]),
    ));
    s.push((
        "nfs_compound",
        "exchange-id".into(),
        compound(vec![nfs_argop4::OP_EXCHANGE_ID(EXCHANGE_ID4args {
            eia_clientowner: client_owner4 {
                co_verifier: [3; 8],
                co_ownerid: b"linux".to_vec(),
            },
            eia_flags: 0x0001_0000,
            eia_state_protect: state_protect4_a::SP4_NONE,
            eia_client_impl_id: vec![],
        })]),
    ));
    s.push(("rpc_call", "compound".into(), compound(vec![seq])));
    s.push(("rpc_call", "null".into(), call(0)));
    s.push(("nfs_attrs", "setattr-set".into(), to_bytes(&fattr)));
    let all = FileAttrs {
        supported_attrs: Some(Bitmap::from_bits(&[0, 1, 4, 33, 75])),
        r#type: Some(NF4REG),
        fsid: Some(fsid4 { major: 1, minor: 2 }),
        filehandle: Some(vec![1; 24]),
        time_modify: Some(nfstime4 {
            seconds: 1,
            nseconds: 2,
        }),
        rawdev: Some(specdata4 {
            specdata1: 1,
            specdata2: 2,
        }),
        rdattr_error: Some(NFS4_OK),
        fileid: Some(99),
        ..sample_attrs()
    };
    let f = encode_attrs(&all, &Bitmap::from_bits(&(0..80).collect::<Vec<_>>()));
    s.push(("nfs_attrs", "getattr-reply".into(), to_bytes(&f)));
    let rec = compound(vec![nfs_argop4::OP_PUTROOTFH]);
    let mut v = vec![0x63u8]; // piece 4, limit 1024
    v.extend_from_slice(&record_mark(rec.len(), true));
    v.extend_from_slice(&rec);
    v.extend_from_slice(&record_mark(8, false));
    v.extend_from_slice(&rec[..8]);
    v.extend_from_slice(&record_mark(rec.len() - 8, true));
    v.extend_from_slice(&rec[8..]);
    s.push(("nfs_record", "two-records".into(), v));
    s
}
