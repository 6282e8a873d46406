//! Authenticated associations end to end, against the client of
//! `auth_test_client.rs`: the legs, signed and sealed calls and answers
//! (fragmented too), a big-endian client, and what a mistaken or hostile
//! client gets.

use super::test_client::*;
use super::*;
use crate::auth::NtlmClient;
use crate::dcerpc::pdu::{bind_nak_reason, pfc, split_fragment, SyntaxId};
use crate::dcerpc::test_support::{
    bound_endpoint, call, many_shares, read_pdus, server_get_info_stub, share_enum_stub,
    three_shares,
};
use crate::dcerpc::vt::{self, VerificationTrailer};
use crate::dcerpc::{PipeEndpoint, PipeError};
use proptest::prelude::*;

// ---- codecs -----------------------------------------------------------------

#[test]
fn sec_trailer_layout_and_byte_order() {
    let t = SecTrailer {
        auth_type: auth_type::NTLMSSP,
        auth_level: auth_level::PKT_PRIVACY,
        auth_pad_length: 12,
        auth_reserved: 0,
        auth_context_id: 0x0102_0304,
    };
    let mut out = Vec::new();
    t.encode(&mut out);
    assert_eq!(out, [10, 6, 12, 0, 4, 3, 2, 1]);
    assert_eq!(SecTrailer::decode(&out, Endian::Little).unwrap(), t);
    let be = [10, 6, 12, 0, 1, 2, 3, 4];
    assert_eq!(SecTrailer::decode(&be, Endian::Big).unwrap(), t);
    assert_eq!(
        SecTrailer::decode(&out[..7], Endian::Little),
        Err(PduError::Truncated("sec_trailer"))
    );
}

#[test]
fn auth3_body_and_pdu() {
    let a = Auth3 { pad: [1, 2, 3, 4] };
    let mut body = Vec::new();
    a.encode(&mut body);
    assert_eq!(Auth3::decode(&body).unwrap(), a);
    assert_eq!(Auth3::decode(&body[..3]), Err(PduError::Truncated("auth3")));
    let out = OutAuth {
        trailer: trailer(auth_type::NTLMSSP, auth_level::PKT_INTEGRITY, 0),
        token: vec![0xAB; 5],
    };
    let pdu = encode_pdu_with_auth(ptype::AUTH3, 3, 9, &body, Some(&out));
    let frag = split_fragment(&pdu).unwrap();
    assert_eq!(frag.header.frag_length as usize, pdu.len());
    assert_eq!(frag.header.auth_length, 5);
    assert_eq!(frag.body, body);
    let parts = AuthParts::of(&frag).unwrap().unwrap();
    assert_eq!(parts.trailer, out.trailer);
    assert_eq!(parts.token, out.token);
}

proptest! {
    #[test]
    fn sec_trailer_round_trips(t in any::<u8>(), l in any::<u8>(), p in any::<u8>(), id in any::<u32>()) {
        let trailer = SecTrailer {
            auth_type: t,
            auth_level: l,
            auth_pad_length: p,
            auth_reserved: 0,
            auth_context_id: id,
        };
        let mut out = Vec::new();
        trailer.encode(&mut out);
        prop_assert_eq!(SecTrailer::decode(&out, Endian::Little).unwrap(), trailer);
    }

    #[test]
    fn pdus_with_auth_split_back(body_len in 0usize..40, token_len in 0usize..40) {
        let out = OutAuth {
            trailer: trailer(auth_type::SPNEGO, auth_level::CONNECT, 3),
            token: vec![0x77; token_len],
        };
        let body = vec![0x11; body_len];
        let pdu = encode_pdu_with_auth(ptype::BIND_ACK, 3, 1, &body, Some(&out));
        let frag = split_fragment(&pdu).unwrap();
        prop_assert_eq!(frag.body, &body[..]);
        if token_len > 0 {
            let parts = AuthParts::of(&frag).unwrap().unwrap();
            prop_assert_eq!(parts.token, &out.token[..]);
        }
    }
}

// ---- the legs and the calls -------------------------------------------------

#[test]
fn ntlmssp_and_spnego_sign_and_seal_calls_and_answers() {
    let expected = plain_server_info();
    for auth in [auth_type::NTLMSSP, auth_type::SPNEGO] {
        for level in [auth_level::PKT_INTEGRITY, auth_level::PKT_PRIVACY] {
            let backend = alice_backend();
            let mut client = Client::new(auth, level, PASSWORD);
            let mut ep = establish(&mut client, &backend);
            let stub = server_get_info_stub(100);
            let (first, seq1) = client.call(&mut ep, &backend, NET_SERVER_GET_INFO, &stub);
            let (second, seq2) = client.call(&mut ep, &backend, NET_SERVER_GET_INFO, &stub);
            assert_eq!(first, expected, "auth {auth} level {level}");
            assert_eq!(second, expected);
            // MS-NLMP 3.4.4: one sequence number per message. After
            // SPNEGO's mechListMIC exchange each side has used one.
            let base = u32::from(auth == auth_type::SPNEGO);
            assert_eq!((seq1, seq2), (vec![base], vec![base + 1]));
        }
    }
}

#[test]
fn sealed_answers_do_not_carry_the_stub_in_clear() {
    let backend = alice_backend();
    let mut client = Client::new(auth_type::NTLMSSP, auth_level::PKT_PRIVACY, PASSWORD);
    let mut ep = establish(&mut client, &backend);
    let pdu = client.request(NET_SERVER_GET_INFO, &server_get_info_stub(100));
    ep.write(&pdu, &backend).unwrap();
    let answer = read_pdus(&mut ep);
    let name: Vec<u8> = "BRAID".encode_utf16().flat_map(u16::to_le_bytes).collect();
    assert!(!answer[0].windows(name.len()).any(|w| w == name));
    let (stub, _) = client.answer(&answer);
    assert!(stub.windows(name.len()).any(|w| w == name));
}

#[test]
fn connect_level_calls_go_unsigned() {
    let backend = alice_backend();
    let mut client = Client::new(auth_type::NTLMSSP, auth_level::CONNECT, PASSWORD);
    let mut ep = establish(&mut client, &backend);
    let (stub, _) = client.call(
        &mut ep,
        &backend,
        NET_SERVER_GET_INFO,
        &server_get_info_stub(100),
    );
    assert_eq!(stub, plain_server_info());
}

#[test]
fn big_endian_client_binds_and_calls() {
    // NetSrvGetInfo(ServerName "BRAID", level 100) in big-endian NDR.
    let mut stub = Vec::new();
    for v in [0x0002_0000u32, 6, 0, 6] {
        stub.extend_from_slice(&v.to_be_bytes());
    }
    for u in "BRAID\0".encode_utf16() {
        stub.extend_from_slice(&u.to_be_bytes());
    }
    stub.extend_from_slice(&100u32.to_be_bytes());
    for auth in [auth_type::NTLMSSP, auth_type::SPNEGO] {
        let backend = alice_backend();
        let mut client = Client::new(auth, auth_level::PKT_PRIVACY, PASSWORD).big_endian();
        let mut ep = establish(&mut client, &backend);
        // Answers come little-endian (their header says so), signed alike.
        let (answer, _) = client.call(&mut ep, &backend, NET_SERVER_GET_INFO, &stub);
        assert_eq!(answer, plain_server_info());
    }
}

#[test]
fn fragmented_answers_are_signed_fragment_by_fragment() {
    let plain = {
        let backend = many_shares(60);
        let mut ep = bound_endpoint(1024);
        call(
            &mut ep,
            &backend,
            NET_SHARE_ENUM_ALL,
            &share_enum_stub(1, None),
        )
    };
    for level in [auth_level::PKT_INTEGRITY, auth_level::PKT_PRIVACY] {
        let backend = backend_with(many_shares(60));
        let mut client = Client::new(auth_type::NTLMSSP, level, PASSWORD);
        client.max_frag = 1024;
        let mut ep = establish(&mut client, &backend);
        let pdu = client.request(NET_SHARE_ENUM_ALL, &share_enum_stub(1, None));
        ep.write(&pdu, &backend).unwrap();
        let pdus = read_pdus(&mut ep);
        assert!(pdus.len() > 2);
        for (i, p) in pdus.iter().enumerate() {
            let flags = p[3];
            assert_eq!(flags & pfc::FIRST_FRAG != 0, i == 0);
            assert_eq!(flags & pfc::LAST_FRAG != 0, i == pdus.len() - 1);
        }
        let (stub, seqs) = client.answer(&pdus);
        assert_eq!(stub, plain);
        assert_eq!(seqs, (0..pdus.len() as u32).collect::<Vec<_>>());
    }
}

#[test]
fn fragmented_requests_are_verified_fragment_by_fragment() {
    for level in [auth_level::PKT_INTEGRITY, auth_level::PKT_PRIVACY] {
        let backend = alice_backend();
        let mut client = Client::new(auth_type::NTLMSSP, level, PASSWORD);
        let mut ep = establish(&mut client, &backend);
        let stub = server_get_info_stub(100);
        let (a, b) = stub.split_at(16);
        let total = stub.len() as u32;
        let first = client.fragment(5, pfc::FIRST_FRAG, total, NET_SERVER_GET_INFO, a);
        ep.write(&first, &backend).unwrap();
        assert!(!ep.has_output());
        let last = client.fragment(5, pfc::LAST_FRAG, b.len() as u32, NET_SERVER_GET_INFO, b);
        ep.write(&last, &backend).unwrap();
        let (answer, _) = client.answer(&read_pdus(&mut ep));
        assert_eq!(answer, plain_server_info());
    }
}

#[test]
fn verification_trailer_must_name_the_call() {
    let backend = alice_backend();
    let mut client = Client::new(auth_type::NTLMSSP, auth_level::PKT_INTEGRITY, PASSWORD);
    let mut ep = establish(&mut client, &backend);
    let with_trailer = |abstract_syntax: SyntaxId| {
        let mut stub = server_get_info_stub(100);
        VerificationTrailer {
            commands: vec![
                (vt::command::BITMASK_1, vt::Command::Bitmask1(1)),
                (
                    vt::command::PCONTEXT | vt::command::END,
                    vt::Command::Pcontext {
                        abstract_syntax,
                        transfer_syntax: SyntaxId::NDR20,
                    },
                ),
            ],
        }
        .encode(&mut stub);
        stub
    };
    let (answer, _) = client.call(
        &mut ep,
        &backend,
        NET_SERVER_GET_INFO,
        &with_trailer(SyntaxId::SRVSVC),
    );
    assert_eq!(answer, plain_server_info());
    let pdu = client.request(NET_SERVER_GET_INFO, &with_trailer(SyntaxId::LSARPC));
    ep.write(&pdu, &backend).unwrap();
    assert_eq!(
        fault_status_of(&one_pdu(&mut ep)),
        fault_status::ACCESS_DENIED
    );
}

// ---- refusals ----------------------------------------------------------------

#[test]
fn a_request_that_does_not_verify_ends_the_association() {
    for level in [auth_level::PKT_INTEGRITY, auth_level::PKT_PRIVACY] {
        let backend = alice_backend();
        let mut client = Client::new(auth_type::NTLMSSP, level, PASSWORD);
        let mut ep = establish(&mut client, &backend);
        let mut pdu = client.request(NET_SERVER_GET_INFO, &server_get_info_stub(100));
        pdu[30] ^= 1;
        ep.write(&pdu, &backend).unwrap();
        assert_eq!(
            fault_status_of(&one_pdu(&mut ep)),
            fault_status::SEC_PKG_ERROR
        );
        let next = client.request(NET_SERVER_GET_INFO, &server_get_info_stub(100));
        assert_eq!(ep.write(&next, &backend), Err(PipeError::Disconnected));
    }
    // Another sec_trailer than the bind's, or none at all.
    let backend = alice_backend();
    for tamper in [0usize, 1] {
        let mut client = Client::new(auth_type::NTLMSSP, auth_level::PKT_INTEGRITY, PASSWORD);
        let mut ep = establish(&mut client, &backend);
        let pdu = if tamper == 0 {
            client.context_id += 1;
            client.request(NET_SERVER_GET_INFO, &server_get_info_stub(100))
        } else {
            client.level = auth_level::CONNECT;
            client.request(NET_SERVER_GET_INFO, &server_get_info_stub(100))
        };
        ep.write(&pdu, &backend).unwrap();
        let expected = [fault_status::ACCESS_DENIED, fault_status::NCA_PROTO_ERROR][tamper];
        assert_eq!(fault_status_of(&one_pdu(&mut ep)), expected);
    }
}

#[test]
fn a_wrong_password_or_another_account_gets_no_calls() {
    // NTLMSSP: the AUTH3 gets no answer either way; the calls get faults.
    let backend = alice_backend();
    let mut client = Client::new(auth_type::NTLMSSP, auth_level::PKT_INTEGRITY, "wrong");
    let mut ep = establish(&mut client, &backend);
    let pdu = client.request(NET_SERVER_GET_INFO, &server_get_info_stub(100));
    ep.write(&pdu, &backend).unwrap();
    assert_eq!(
        fault_status_of(&one_pdu(&mut ep)),
        fault_status::ACCESS_DENIED
    );
    assert_eq!(*backend.failed.borrow(), [USER]);

    let mut other = alice_backend();
    other.session_user = "bob";
    let mut client = Client::new(auth_type::NTLMSSP, auth_level::PKT_INTEGRITY, PASSWORD);
    let mut ep = establish(&mut client, &other);
    let pdu = client.request(NET_SERVER_GET_INFO, &server_get_info_stub(100));
    ep.write(&pdu, &other).unwrap();
    assert_eq!(
        fault_status_of(&one_pdu(&mut ep)),
        fault_status::ACCESS_DENIED
    );
    assert!(other.failed.borrow().is_empty());

    // SPNEGO: the alter_context that carries AUTHENTICATE is refused.
    let backend = alice_backend();
    let mut client = Client::new(auth_type::SPNEGO, auth_level::PKT_INTEGRITY, "wrong");
    let (mut ep, fault) = try_establish(&mut client, &backend);
    assert_eq!(
        fault_status_of(&fault.unwrap()),
        fault_status::SEC_PKG_ERROR
    );
    let pdu = encode_pdu_with_auth(ptype::REQUEST, 3, 9, &[0; 8], None);
    assert_eq!(ep.write(&pdu, &backend), Err(PipeError::Disconnected));
}

#[test]
fn binds_this_end_cannot_serve_get_a_bind_nak() {
    let negotiate = NtlmClient::new(USER, "", PASSWORD).negotiate();
    // No user database behind the pipe, a provider not served (Kerberos),
    // levels that mean nothing over a connection.
    let cases: [(u8, u8, bool, u16); 4] = [
        (
            auth_type::NTLMSSP,
            5,
            false,
            bind_nak_reason::AUTHENTICATION_TYPE_NOT_RECOGNIZED,
        ),
        (
            16,
            5,
            true,
            bind_nak_reason::AUTHENTICATION_TYPE_NOT_RECOGNIZED,
        ),
        (
            auth_type::NTLMSSP,
            auth_level::CALL,
            true,
            bind_nak_reason::NOT_SPECIFIED,
        ),
        (auth_type::NTLMSSP, 7, true, bind_nak_reason::NOT_SPECIFIED),
    ];
    for (t, level, with_backend, reason) in cases {
        let mut client = Client::new(t, level, PASSWORD);
        client.auth_type = t;
        let pdu = client.leg(ptype::BIND, 1, &negotiate);
        let mut ep = PipeEndpoint::open("srvsvc").unwrap();
        if with_backend {
            ep.write(&pdu, &alice_backend()).unwrap();
        } else {
            ep.write(&pdu, &three_shares()).unwrap();
        }
        assert_eq!(
            nak_reason(&one_pdu(&mut ep)),
            reason,
            "type {t} level {level}"
        );
    }
    // A token that is no NTLMSSP message.
    let client = Client::new(auth_type::NTLMSSP, 5, PASSWORD);
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    ep.write(&client.leg(ptype::BIND, 1, b"garbage"), &alice_backend())
        .unwrap();
    assert_eq!(
        nak_reason(&one_pdu(&mut ep)),
        bind_nak_reason::NOT_SPECIFIED
    );
}

#[test]
fn legs_out_of_place_are_faulted() {
    // AUTH3 on an association bound without auth.
    let backend = alice_backend();
    let client = Client::new(auth_type::NTLMSSP, 5, PASSWORD);
    let mut ep = bound_endpoint(4280);
    ep.write(&client.leg(ptype::AUTH3, 2, b"x"), &backend)
        .unwrap();
    assert_eq!(
        fault_status_of(&one_pdu(&mut ep)),
        fault_status::NCA_PROTO_ERROR
    );
    assert_eq!(
        ep.write(&client.leg(ptype::AUTH3, 3, b"x"), &backend),
        Err(PipeError::Disconnected)
    );
    // Another leg once the context is established.
    let mut client = Client::new(auth_type::NTLMSSP, 5, PASSWORD);
    let mut ep = establish(&mut client, &backend);
    ep.write(&client.leg(ptype::ALTER_CONTEXT, 3, b"x"), &backend)
        .unwrap();
    assert_eq!(
        fault_status_of(&one_pdu(&mut ep)),
        fault_status::ACCESS_DENIED
    );
    // A request before the last leg.
    let mut client = Client::new(auth_type::NTLMSSP, 5, PASSWORD);
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    let Mech::Ntlm(c) = &mut client.mech else {
        unreachable!()
    };
    let negotiate = c.negotiate();
    ep.write(&client.leg(ptype::BIND, 1, &negotiate), &backend)
        .unwrap();
    one_pdu(&mut ep);
    let pdu = encode_pdu_with_auth(ptype::REQUEST, 3, 9, &[0; 8], None);
    ep.write(&pdu, &backend).unwrap();
    assert_eq!(
        fault_status_of(&one_pdu(&mut ep)),
        fault_status::NCA_PROTO_ERROR
    );
}

/// The PDUs of a whole sealed NTLMSSP exchange and one call: fixed
/// randomness makes them the same every time, so they can be replayed.
#[test]
fn recorded_exchange_replays() {
    let backend = alice_backend();
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    for pdu in recorded_exchange() {
        ep.write(&pdu, &backend).unwrap();
    }
    let pdus = read_pdus(&mut ep);
    assert_eq!(pdus.len(), 2);
    assert_eq!(pdus[1][2], ptype::RESPONSE);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn mutated_exchanges_never_panic(which in 0usize..3, at in 0usize..400, value in any::<u8>(), cut in 0usize..8) {
        let backend = alice_backend();
        let mut pdus = recorded_exchange();
        let pdu = &mut pdus[which];
        let at = at % pdu.len();
        pdu[at] = value;
        let keep = pdu.len().saturating_sub(cut);
        pdu.truncate(keep);
        let mut ep = PipeEndpoint::open("srvsvc").unwrap();
        for pdu in &pdus {
            let _ = ep.write(pdu, &backend);
        }
        let _ = read_pdus(&mut ep);
    }
}
