//! Round trips of every PDU body this module encodes or decodes.

use super::*;
use crate::dcerpc::ndr::Endian;
use proptest::prelude::*;

fn syntax(seed: u8) -> SyntaxId {
    SyntaxId {
        uuid: [seed; 16],
        version: u32::from(seed) << 16 | 1,
    }
}

#[test]
fn well_known_uuids_in_wire_order() {
    assert_eq!(
        SyntaxId::NDR20.uuid,
        [
            0x04, 0x5D, 0x88, 0x8A, 0xEB, 0x1C, 0xC9, 0x11, 0x9F, 0xE8, 0x08, 0x00, 0x2B, 0x10,
            0x48, 0x60
        ]
    );
    assert_eq!(
        SyntaxId::SRVSVC.uuid,
        [
            0xC8, 0x4F, 0x32, 0x4B, 0x70, 0x16, 0xD3, 0x01, 0x12, 0x78, 0x5A, 0x47, 0xBF, 0x6E,
            0xE1, 0x88
        ]
    );
}

#[test]
fn bind_time_feature_syntax_is_recognised() {
    let mut btfn = SyntaxId {
        uuid: [0; 16],
        version: 1,
    };
    btfn.uuid[..8].copy_from_slice(&BIND_TIME_FEATURE_PREFIX);
    btfn.uuid[8] = 3;
    assert_eq!(btfn.bind_time_features(), Some(3));
    assert_eq!(SyntaxId::NDR20.bind_time_features(), None);
    btfn.version = 2;
    assert_eq!(btfn.bind_time_features(), None);
}

#[test]
fn bind_round_trip() {
    let bind = Bind {
        max_xmit_frag: 4280,
        max_recv_frag: 1024,
        assoc_group_id: 0x1234,
        contexts: vec![
            ContextElement {
                context_id: 0,
                abstract_syntax: SyntaxId::SRVSVC,
                transfer_syntaxes: vec![SyntaxId::NDR20, SyntaxId::NDR64],
            },
            ContextElement {
                context_id: 7,
                abstract_syntax: syntax(9),
                transfer_syntaxes: vec![],
            },
        ],
    };
    let mut body = Vec::new();
    bind.encode(&mut body);
    assert_eq!(body.len(), 12 + 24 + 40 + 24);
    assert_eq!(Bind::decode(&body).unwrap(), bind);
    assert!(Bind::decode(&body[..body.len() - 1]).is_err());
}

#[test]
fn bind_ack_round_trip_with_and_without_address() {
    for addr in [&b"\\PIPE\\srvsvc"[..], &b""[..]] {
        let ack = BindAck {
            max_xmit_frag: 4280,
            max_recv_frag: 4280,
            assoc_group_id: 0x5342,
            secondary_address: addr.to_vec(),
            results: vec![
                ContextResult {
                    result: context_result::ACCEPTANCE,
                    reason: 0,
                    transfer_syntax: SyntaxId::NDR20,
                },
                ContextResult {
                    result: context_result::NEGOTIATE_ACK,
                    reason: 0,
                    transfer_syntax: SyntaxId::NULL,
                },
            ],
        };
        let mut body = Vec::new();
        ack.encode(&mut body);
        let results_at = if addr.is_empty() { 12 } else { 24 };
        assert_eq!(body[results_at], 2, "n_results at body offset {results_at}");
        assert_eq!(body.len(), results_at + 4 + 48);
        assert_eq!(BindAck::decode(&body).unwrap(), ack);
    }
}

#[test]
fn bind_nak_round_trip() {
    let nak = BindNak {
        reject_reason: bind_nak_reason::AUTHENTICATION_TYPE_NOT_RECOGNIZED,
        versions: vec![(5, 0)],
    };
    let mut body = Vec::new();
    nak.encode(&mut body);
    assert_eq!(body, [8, 0, 1, 5, 0, 0, 0, 0]);
    assert_eq!(BindNak::decode(&body).unwrap(), nak);
}

#[test]
fn request_round_trip_with_and_without_object() {
    for object in [None, Some([0x11; 16])] {
        let req = Request {
            alloc_hint: 40,
            context_id: 1,
            opnum: 15,
            object,
            stub: vec![1, 2, 3, 4, 5],
        };
        let flags = if object.is_some() {
            pfc::OBJECT_UUID
        } else {
            0
        };
        let mut body = Vec::new();
        req.encode(&mut body);
        assert_eq!(Request::decode(&body, flags).unwrap(), req);
    }
    assert!(Request::decode(&[0; 7], 0).is_err());
    assert!(Request::decode(&[0; 20], pfc::OBJECT_UUID).is_err());
}

#[test]
fn response_and_fault_round_trip() {
    let resp = Response {
        alloc_hint: 3,
        context_id: 2,
        cancel_count: 0,
        stub: vec![9, 8, 7],
    };
    let mut body = Vec::new();
    resp.encode(&mut body);
    assert_eq!(Response::decode(&body).unwrap(), resp);

    let fault = Fault {
        alloc_hint: 32,
        context_id: 2,
        cancel_count: 0,
        flags: 0,
        status: fault_status::NCA_OP_RNG_ERROR,
    };
    let mut body = Vec::new();
    fault.encode(&mut body);
    assert_eq!(body.len(), Fault::BODY_LEN);
    assert_eq!(Fault::decode(&body).unwrap(), fault);
}

/// `bind` as a big-endian client (Samba's `bigendian` option) sends it.
fn bind_body_big_endian(bind: &Bind) -> Vec<u8> {
    let syntax = |out: &mut Vec<u8>, s: &SyntaxId| {
        let u = s.uuid;
        out.extend_from_slice(&[u[3], u[2], u[1], u[0], u[5], u[4], u[7], u[6]]);
        out.extend_from_slice(&u[8..]);
        out.extend_from_slice(&s.version.to_be_bytes());
    };
    let mut out = Vec::new();
    out.extend_from_slice(&bind.max_xmit_frag.to_be_bytes());
    out.extend_from_slice(&bind.max_recv_frag.to_be_bytes());
    out.extend_from_slice(&bind.assoc_group_id.to_be_bytes());
    out.extend_from_slice(&[bind.contexts.len() as u8, 0, 0, 0]);
    for ctx in &bind.contexts {
        out.extend_from_slice(&ctx.context_id.to_be_bytes());
        out.extend_from_slice(&[ctx.transfer_syntaxes.len() as u8, 0]);
        syntax(&mut out, &ctx.abstract_syntax);
        for ts in &ctx.transfer_syntaxes {
            syntax(&mut out, ts);
        }
    }
    out
}

#[test]
fn big_endian_bind_and_request_read_as_little_endian_ones() {
    let bind = Bind {
        max_xmit_frag: 4280,
        max_recv_frag: 2048,
        assoc_group_id: 0x1234_5678,
        contexts: vec![ContextElement {
            context_id: 0x0102,
            abstract_syntax: SyntaxId::LSARPC,
            transfer_syntaxes: vec![SyntaxId::NDR20, SyntaxId::NDR64],
        }],
    };
    let be = bind_body_big_endian(&bind);
    assert_eq!(Bind::decode_in(&be, Endian::Big).unwrap(), bind);
    assert_ne!(Bind::decode(&be).unwrap(), bind);

    let mut body = Vec::new();
    body.extend_from_slice(&0x0000_0040u32.to_be_bytes());
    body.extend_from_slice(&7u16.to_be_bytes());
    body.extend_from_slice(&44u16.to_be_bytes());
    body.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    body.extend_from_slice(&[0xEE; 5]);
    let req = Request::decode_in(&body, pfc::OBJECT_UUID, Endian::Big).unwrap();
    assert_eq!((req.alloc_hint, req.context_id, req.opnum), (0x40, 7, 44));
    // The object UUID comes back in little-endian wire order.
    assert_eq!(
        req.object,
        Some([4, 3, 2, 1, 6, 5, 8, 7, 9, 10, 11, 12, 13, 14, 15, 16])
    );
    assert_eq!(req.stub, [0xEE; 5]);
}

#[test]
fn split_fragment_strips_auth_trailer_and_padding() {
    let mut pdu = encode_pdu(ptype::REQUEST, 3, 1, &[0xAA; 12]);
    // 4 pad octets, then sec_trailer (auth_pad_length 4), then a 6-byte token.
    pdu.extend_from_slice(&[0; 4]);
    pdu.extend_from_slice(&[10, 2, 4, 0, 0, 0, 0, 0]);
    pdu.extend_from_slice(&[0xCC; 6]);
    let len = pdu.len() as u16;
    pdu[8..10].copy_from_slice(&len.to_le_bytes());
    pdu[10..12].copy_from_slice(&6u16.to_le_bytes());
    let frag = split_fragment(&pdu).unwrap();
    assert_eq!(frag.body, &[0xAA; 12]);
    assert_eq!(frag.auth.len(), 14);

    pdu[10..12].copy_from_slice(&60u16.to_le_bytes());
    assert_eq!(split_fragment(&pdu), Err(PduError::AuthLength(60)));
}

#[test]
fn header_refuses_other_versions_and_representations() {
    let mut pdu = encode_pdu(ptype::BIND, 3, 1, &[]);
    pdu[0] = 4;
    assert_eq!(CommonHeader::decode(&pdu), Err(PduError::Version(4, 0)));
    pdu[0] = 5;
    // EBCDIC characters, and an integer representation C706 does not name.
    for drep0 in [0x11, 0x01, 0x20] {
        pdu[4] = drep0;
        assert!(matches!(
            CommonHeader::decode(&pdu),
            Err(PduError::DataRepresentation(_))
        ));
    }
    let pdu = encode_pdu(ptype::BIND, 3, 1, &[]);
    assert_eq!(
        CommonHeader::decode(&pdu[..15]),
        Err(PduError::Truncated("common header"))
    );
}

proptest! {
    #[test]
    fn common_header_round_trips(
        minor in 0u8..2,
        ptype in any::<u8>(),
        flags in any::<u8>(),
        frag_length in any::<u16>(),
        auth_length in any::<u16>(),
        call_id in any::<u32>(),
        big in any::<bool>(),
    ) {
        let header = CommonHeader {
            rpc_vers_minor: minor,
            ptype,
            pfc_flags: flags,
            endian: if big { Endian::Big } else { Endian::Little },
            frag_length,
            auth_length,
            call_id,
        };
        let mut out = Vec::new();
        header.encode(&mut out);
        prop_assert_eq!(out.len(), COMMON_HEADER_LEN);
        prop_assert_eq!(CommonHeader::decode(&out).unwrap(), header);
    }

    #[test]
    fn body_decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), flags in any::<u8>()) {
        let _ = Bind::decode(&bytes);
        let _ = Bind::decode_in(&bytes, Endian::Big);
        let _ = Request::decode_in(&bytes, flags, Endian::Big);
        let _ = BindAck::decode(&bytes);
        let _ = BindNak::decode(&bytes);
        let _ = Request::decode(&bytes, flags);
        let _ = Response::decode(&bytes);
        let _ = Fault::decode(&bytes);
        let _ = split_fragment(&bytes);
    }
}
