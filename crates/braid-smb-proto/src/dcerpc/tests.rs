//! The pipe endpoint end to end: binds, calls, fragmentation, partial and
//! hostile input.

use super::pdu::{
    context_result, fault_status, pfc, provider_reason, ptype, split_fragment, BindAck, BindNak,
    ContextElement, Fault, PduError, Response, SyntaxId,
};
use super::srvsvc::{opnum, werror};
use super::test_support::*;
use super::{share_type, PipeEndpoint, PipeError};
use proptest::prelude::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A BIND as Samba's smbclient sends it for srvsvc (C706 12.6.4.3):
/// context 0 srvsvc v3.0 over NDR 2.0; context 1 the bind time feature
/// negotiation syntax 6cb71c2c-9812-4540-0300-000000000000 v1.0 offering
/// bitmask 3 (security context multiplexing, keep connection on orphan).
fn smbclient_bind() -> Vec<u8> {
    hex("05 00 0b 03 10 00 00 00 74 00 00 00 01 00 00 00
         b8 10 b8 10 00 00 00 00 02 00 00 00
         00 00 01 00 c8 4f 32 4b 70 16 d3 01 12 78 5a 47 bf 6e e1 88 03 00 00 00
                     04 5d 88 8a eb 1c c9 11 9f e8 08 00 2b 10 48 60 02 00 00 00
         01 00 01 00 c8 4f 32 4b 70 16 d3 01 12 78 5a 47 bf 6e e1 88 03 00 00 00
                     2c 1c b7 6c 12 98 40 45 03 00 00 00 00 00 00 00 01 00 00 00")
}

#[test]
fn smbclient_bind_gets_the_golden_bind_ack() {
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    ep.write(&smbclient_bind(), &three_shares()).unwrap();
    let pdus = read_pdus(&mut ep);
    assert_eq!(pdus.len(), 1);
    let mut ack = pdus[0].clone();
    assert_ne!(ack[20..24], [0; 4], "assoc_group_id must be nonzero");
    ack[20..24].fill(0);
    let golden = hex("05 00 0c 03 10 00 00 00 5c 00 00 00 01 00 00 00
         b8 10 b8 10 00 00 00 00
         0d 00 5c 50 49 50 45 5c 73 72 76 73 76 63 00 00
         02 00 00 00
         00 00 00 00 04 5d 88 8a eb 1c c9 11 9f e8 08 00 2b 10 48 60 02 00 00 00
         03 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");
    assert_eq!(ack, golden);
}

#[test]
fn windows_style_bind_rejects_ndr64_and_unknown_interfaces() {
    let mut btfn = SyntaxId {
        uuid: [0; 16],
        version: 1,
    };
    btfn.uuid[..8].copy_from_slice(&super::pdu::BIND_TIME_FEATURE_PREFIX);
    btfn.uuid[8] = 3;
    let ctx = |id, abstract_syntax, ts: SyntaxId| ContextElement {
        context_id: id,
        abstract_syntax,
        transfer_syntaxes: vec![ts],
    };
    let contexts = vec![
        ctx(0, SyntaxId::SRVSVC, SyntaxId::NDR64),
        ctx(1, SyntaxId::NDR20, SyntaxId::NDR20),
        ctx(2, SyntaxId::SRVSVC, btfn),
    ];
    let mut ep = PipeEndpoint::open("SRVSVC").unwrap();
    ep.write(&bind_pdu(3, 4280, contexts), &three_shares())
        .unwrap();
    let pdu = &read_pdus(&mut ep)[0];
    let frag = split_fragment(pdu).unwrap();
    assert_eq!(
        frag.header.ptype,
        ptype::BIND_ACK,
        "all rejected still acks"
    );
    let ack = BindAck::decode(frag.body).unwrap();
    let results: Vec<_> = ack.results.iter().map(|r| (r.result, r.reason)).collect();
    assert_eq!(
        results,
        [
            (
                context_result::PROVIDER_REJECTION,
                provider_reason::TRANSFER_SYNTAXES_NOT_SUPPORTED
            ),
            (
                context_result::PROVIDER_REJECTION,
                provider_reason::ABSTRACT_SYNTAX_NOT_SUPPORTED
            ),
            (context_result::NEGOTIATE_ACK, 0),
        ]
    );
    // No context was accepted: a call on context 0 is an unknown interface.
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
    let stub = share_enum_stub(1, None);
    ep.write(&request_pdu(4, flags, 0, 15, &stub), &three_shares())
        .unwrap();
    assert_fault(&mut ep, fault_status::NCA_UNK_IF, true);
}

#[test]
fn share_enum_level_1_with_three_shares() {
    let backend = three_shares();
    let mut ep = bound_endpoint(4280);
    let out = call(
        &mut ep,
        &backend,
        opnum::NETR_SHARE_ENUM,
        &share_enum_stub(1, Some(0)),
    );
    let mut c = StubCursor::new(&out);
    assert_eq!(c.u32(), 1, "level");
    assert_eq!(c.u32(), 1, "union discriminant");
    assert!(c.pointer(), "container");
    assert_eq!(c.u32(), 3, "EntriesRead");
    assert!(c.pointer(), "array");
    assert_eq!(c.u32(), 3, "max_count");
    let mut types = Vec::new();
    for _ in 0..3 {
        assert!(c.pointer(), "netname");
        types.push(c.u32());
        assert!(c.pointer(), "remark");
    }
    let mut entries = Vec::new();
    for kind in types {
        entries.push((c.string(), kind, c.string()));
    }
    let want: Vec<_> = backend
        .shares
        .iter()
        .map(|s| (s.name.clone(), s.share_type, s.comment.clone()))
        .collect();
    assert_eq!(entries, want);
    assert_eq!(entries[2].1, share_type::IPC | share_type::SPECIAL);
    assert_eq!(c.u32(), 3, "TotalEntries");
    assert!(c.pointer(), "resume handle");
    assert_eq!(c.u32(), 0, "resume handle value");
    assert_eq!(c.u32(), werror::SUCCESS);
    assert!(c.at_end());
}

#[test]
fn large_answer_is_fragmented_to_max_xmit_frag() {
    let backend = many_shares(200);
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    ep.write(&bind_pdu(1, 1024, vec![srvsvc_context(0)]), &backend)
        .unwrap();
    let ack = read_pdus(&mut ep).remove(0);
    let ack = BindAck::decode(split_fragment(&ack).unwrap().body).unwrap();
    assert_eq!((ack.max_xmit_frag, ack.max_recv_frag), (1024, 1024));

    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
    let request = request_pdu(9, flags, 0, 15, &share_enum_stub(1, Some(0)));
    ep.write(&request, &backend).unwrap();
    // Read in 100-byte pieces: a piece never spans two fragments.
    let mut fragments = Vec::new();
    let mut current = Vec::new();
    while ep.has_output() {
        let (piece, more) = ep.read(100);
        current.extend_from_slice(&piece);
        let frag_len = u16::from_le_bytes([current[8], current[9]]) as usize;
        if more {
            assert!(current.len() < frag_len);
        } else {
            assert_eq!(current.len(), frag_len);
            fragments.push(std::mem::take(&mut current));
        }
    }
    assert!(fragments.len() > 5, "{} fragments", fragments.len());
    let mut stub = Vec::new();
    let last = fragments.len() - 1;
    for (i, pdu) in fragments.iter().enumerate() {
        assert!(pdu.len() <= 1024);
        let frag = split_fragment(pdu).unwrap();
        let flags = frag.header.pfc_flags;
        assert_eq!(flags & pfc::FIRST_FRAG != 0, i == 0);
        assert_eq!(flags & pfc::LAST_FRAG != 0, i == last);
        let resp = Response::decode(frag.body).unwrap();
        stub.extend_from_slice(&resp.stub);
    }
    let whole = super::srvsvc::handle_call(15, &share_enum_stub(1, Some(0)), &backend).unwrap();
    assert_eq!(stub, whole);
    let first = Response::decode(split_fragment(&fragments[0]).unwrap().body).unwrap();
    assert_eq!(first.alloc_hint as usize, whole.len());
    let mut c = StubCursor::new(&stub);
    c.pos = 12;
    assert_eq!(c.u32(), 200);
}

#[test]
fn bind_written_one_byte_at_a_time() {
    let bind = smbclient_bind();
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    for (i, byte) in bind.iter().enumerate() {
        ep.write(std::slice::from_ref(byte), &three_shares())
            .unwrap();
        assert_eq!(ep.has_output(), i == bind.len() - 1);
    }
    assert_eq!(read_pdus(&mut ep)[0][2], ptype::BIND_ACK);
}

#[test]
fn bind_and_request_in_one_write() {
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
    let mut bytes = smbclient_bind();
    bytes.extend(request_pdu(2, flags, 0, 21, &server_get_info_stub(100)));
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    ep.write(&bytes, &three_shares()).unwrap();
    let kinds: Vec<u8> = read_pdus(&mut ep).iter().map(|p| p[2]).collect();
    assert_eq!(kinds, [ptype::BIND_ACK, ptype::RESPONSE]);
}

#[test]
fn fragmented_request_is_reassembled() {
    let backend = three_shares();
    let mut ep = bound_endpoint(4280);
    let stub = share_enum_stub(1, Some(0));
    let (a, rest) = stub.split_at(8);
    let (b, c) = rest.split_at(16);
    ep.write(&request_pdu(5, pfc::FIRST_FRAG, 0, 15, a), &backend)
        .unwrap();
    ep.write(&request_pdu(5, 0, 0, 15, b), &backend).unwrap();
    assert!(!ep.has_output());
    ep.write(&request_pdu(5, pfc::LAST_FRAG, 0, 15, c), &backend)
        .unwrap();
    let pdus = read_pdus(&mut ep);
    let resp = Response::decode(split_fragment(&pdus[0]).unwrap().body).unwrap();
    let whole = super::srvsvc::handle_call(15, &stub, &backend).unwrap();
    assert_eq!(resp.stub, whole);

    // A middle fragment without a first one, or of another call.
    assert_eq!(
        ep.write(&request_pdu(6, 0, 0, 15, b), &backend),
        Err(PipeError::FragmentSequence(6))
    );
    ep.write(&request_pdu(7, pfc::FIRST_FRAG, 0, 15, a), &backend)
        .unwrap();
    assert_eq!(
        ep.write(&request_pdu(8, pfc::FIRST_FRAG, 0, 15, a), &backend),
        Err(PipeError::FragmentSequence(8))
    );
}

fn assert_fault(ep: &mut PipeEndpoint, status: u32, did_not_execute: bool) {
    let pdus = read_pdus(ep);
    assert_eq!(pdus.len(), 1);
    let frag = split_fragment(&pdus[0]).unwrap();
    assert_eq!(frag.header.ptype, ptype::FAULT);
    assert_eq!(pdus[0].len(), 32);
    let flags = frag.header.pfc_flags;
    assert_eq!(flags & pfc::DID_NOT_EXECUTE != 0, did_not_execute);
    assert_eq!(Fault::decode(frag.body).unwrap().status, status);
}

#[test]
fn calls_that_cannot_run_fault() {
    let backend = three_shares();
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
    let stub = share_enum_stub(1, None);

    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    ep.write(&request_pdu(1, flags, 0, 15, &stub), &backend)
        .unwrap();
    assert_fault(&mut ep, fault_status::NCA_UNK_IF, true);

    let mut ep = bound_endpoint(4280);
    ep.write(&request_pdu(2, flags, 1, 15, &stub), &backend)
        .unwrap();
    assert_fault(&mut ep, fault_status::NCA_UNK_IF, true);
    ep.write(&request_pdu(3, flags, 0, 99, &stub), &backend)
        .unwrap();
    assert_fault(&mut ep, fault_status::NCA_OP_RNG_ERROR, true);
    ep.write(&request_pdu(4, flags, 0, 15, &stub[..10]), &backend)
        .unwrap();
    assert_fault(&mut ep, fault_status::NDR, false);
    // An unknown context's fragments are swallowed; one fault at the end.
    ep.write(&request_pdu(5, pfc::FIRST_FRAG, 1, 15, &stub), &backend)
        .unwrap();
    assert!(!ep.has_output());
    ep.write(&request_pdu(5, pfc::LAST_FRAG, 1, 15, &stub), &backend)
        .unwrap();
    assert_fault(&mut ep, fault_status::NCA_UNK_IF, true);
}

#[test]
fn authenticated_and_second_binds_are_refused() {
    let mut bind = smbclient_bind();
    // A sec_trailer (NTLMSSP, connect level) and a 4-byte token.
    bind.extend_from_slice(&[10, 2, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]);
    bind[8] = bind.len() as u8;
    bind[10] = 4;
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    ep.write(&bind, &three_shares()).unwrap();
    let nak = read_pdus(&mut ep).remove(0);
    let frag = split_fragment(&nak).unwrap();
    assert_eq!(frag.header.ptype, ptype::BIND_NAK);
    assert_eq!(BindNak::decode(frag.body).unwrap().reject_reason, 8);

    let mut ep = bound_endpoint(4280);
    ep.write(&smbclient_bind(), &three_shares()).unwrap();
    assert_eq!(read_pdus(&mut ep)[0][2], ptype::BIND_NAK);
}

#[test]
fn alter_context_adds_a_context() {
    let backend = three_shares();
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    let mut alter = bind_pdu(2, 4280, vec![srvsvc_context(1)]);
    alter[2] = ptype::ALTER_CONTEXT;
    ep.write(&alter, &backend).unwrap();
    assert_fault(&mut ep, fault_status::NCA_PROTO_ERROR, true);

    let mut ep = bound_endpoint(2048);
    ep.write(&alter, &backend).unwrap();
    let resp = read_pdus(&mut ep).remove(0);
    let frag = split_fragment(&resp).unwrap();
    assert_eq!(frag.header.ptype, ptype::ALTER_CONTEXT_RESP);
    let ack = BindAck::decode(frag.body).unwrap();
    assert!(ack.secondary_address.is_empty());
    assert_eq!(ack.max_xmit_frag, 2048);
    assert_eq!(ack.results[0].result, context_result::ACCEPTANCE);
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
    let stub = server_get_info_stub(101);
    ep.write(&request_pdu(3, flags, 1, 21, &stub), &backend)
        .unwrap();
    assert_eq!(read_pdus(&mut ep)[0][2], ptype::RESPONSE);
}

#[test]
fn framing_errors() {
    let backend = three_shares();
    let mut ep = bound_endpoint(4280);
    let mut short = request_pdu(1, 3, 0, 15, &[]);
    short[8] = 15;
    assert_eq!(
        ep.write(&short, &backend),
        Err(PipeError::Pdu(PduError::FragLength(15)))
    );
    let big = request_pdu(1, 3, 0, 15, &[0; 4280]);
    assert_eq!(
        ep.write(&big[..100], &backend),
        Err(PipeError::FragmentTooLarge {
            frag_length: 4304,
            max: 4280
        })
    );
    // Held to the transport's 4280, not to a smaller negotiated size.
    let mut small = bound_endpoint(1024);
    let stub = [0u8; 2000];
    small
        .write(&request_pdu(1, 3, 0, 21, &stub), &backend)
        .unwrap();
    assert_eq!(read_pdus(&mut small)[0][2], ptype::RESPONSE);
    // Integers neither big- nor little-endian (C706 14.1 names no 0x2).
    let mut unknown_drep = smbclient_bind();
    unknown_drep[4] = 0x20;
    assert!(matches!(
        ep.write(&unknown_drep, &backend),
        Err(PipeError::Pdu(PduError::DataRepresentation(_)))
    ));
    let mut response = request_pdu(1, 3, 0, 15, &[]);
    response[2] = ptype::RESPONSE;
    assert_eq!(
        ep.write(&response, &backend),
        Err(PipeError::UnexpectedPdu(ptype::RESPONSE))
    );
    // After an error the stream restarts at the next PDU.
    let stub = server_get_info_stub(100);
    ep.write(&request_pdu(2, 3, 0, 21, &stub), &backend)
        .unwrap();
    assert_eq!(read_pdus(&mut ep)[0][2], ptype::RESPONSE);
}

#[test]
fn request_reassembly_is_bounded() {
    let backend = three_shares();
    let mut ep = bound_endpoint(4280);
    let chunk = vec![0; 4000];
    ep.write(&request_pdu(1, pfc::FIRST_FRAG, 0, 15, &chunk), &backend)
        .unwrap();
    let mut result = Ok(());
    for _ in 0..20 {
        result = ep.write(&request_pdu(1, 0, 0, 15, &chunk), &backend);
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(PipeError::RequestTooLarge));
}

#[test]
fn unread_answers_are_bounded() {
    let backend = many_shares(200);
    let mut ep = bound_endpoint(4280);
    let request = request_pdu(1, 3, 0, 15, &share_enum_stub(2, None));
    let mut result = Ok(());
    for _ in 0..200 {
        result = ep.write(&request, &backend);
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(PipeError::OutputBacklog));
    read_pdus(&mut ep);
    assert!(ep.write(&request, &backend).is_ok());
}

#[test]
fn read_edge_cases() {
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    assert_eq!(ep.read(100), (Vec::new(), false));
    ep.write(&smbclient_bind(), &three_shares()).unwrap();
    assert_eq!(ep.read(0), (Vec::new(), true));
    assert!(PipeEndpoint::open("winreg").is_none());
}

#[test]
fn each_pipe_binds_only_its_own_interface() {
    let lsarpc = ContextElement {
        context_id: 1,
        abstract_syntax: SyntaxId::LSARPC,
        transfer_syntaxes: vec![SyntaxId::NDR20],
    };
    for (name, accepted, address) in [
        ("lsarpc", 1, &b"\\PIPE\\lsass"[..]),
        ("LSASS", 1, &b"\\PIPE\\lsass"[..]),
        ("srvsvc", 0, &b"\\PIPE\\srvsvc"[..]),
    ] {
        let mut ep = PipeEndpoint::open(name).unwrap();
        ep.write(
            &bind_pdu(1, 4280, vec![srvsvc_context(0), lsarpc.clone()]),
            &three_shares(),
        )
        .unwrap();
        let ack = read_pdus(&mut ep).remove(0);
        let ack = BindAck::decode(split_fragment(&ack).unwrap().body).unwrap();
        assert_eq!(ack.secondary_address, address, "{name}");
        for (i, r) in ack.results.iter().enumerate() {
            if i == accepted {
                assert_eq!(r.result, context_result::ACCEPTANCE, "{name}");
            } else {
                assert_eq!(r.result, context_result::PROVIDER_REJECTION, "{name}");
                assert_eq!(r.reason, provider_reason::ABSTRACT_SYNTAX_NOT_SUPPORTED);
            }
        }
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        chunk in 1usize..64,
        bound in any::<bool>(),
    ) {
        let backend = three_shares();
        let mut ep = if bound { bound_endpoint(1024) } else { PipeEndpoint::open("srvsvc").unwrap() };
        for piece in bytes.chunks(chunk) {
            let _ = ep.write(piece, &backend);
        }
        while ep.has_output() {
            let (pdu, _) = ep.read(usize::MAX);
            prop_assert!(split_fragment(&pdu).is_ok());
        }
    }

    #[test]
    fn mutated_requests_never_panic(
        flips in proptest::collection::vec((0usize..80, any::<u8>()), 1..6),
        opnum in prop::sample::select(vec![15u16, 16, 21]),
    ) {
        let backend = three_shares();
        let mut ep = bound_endpoint(4280);
        let stub = match opnum {
            15 => share_enum_stub(1, Some(0)),
            16 => share_get_info_stub("data", 2),
            _ => server_get_info_stub(102),
        };
        let mut pdu = request_pdu(3, 3, 0, opnum, &stub);
        for (at, byte) in flips {
            let at = 24 + at % (pdu.len() - 24);
            pdu[at] = byte;
        }
        prop_assert!(ep.write(&pdu, &backend).is_ok());
        prop_assert!(ep.has_output());
    }
}
