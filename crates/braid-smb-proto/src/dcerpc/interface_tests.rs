//! The interfaces a pipe carries besides its own: mgmt on every pipe,
//! dssetup on lsarpc, added by bind or alter_context.

use super::pdu::{
    context_result, fault_status, pfc, provider_reason, ptype, split_fragment, BindAck,
    ContextElement, Fault, Response, SyntaxId,
};
use super::test_support::{bind_pdu, read_pdus, request_pdu, three_shares, StubCursor};
use super::{PipeEndpoint, PipeError};

fn context(context_id: u16, abstract_syntax: SyntaxId) -> ContextElement {
    ContextElement {
        context_id,
        abstract_syntax,
        transfer_syntaxes: vec![SyntaxId::NDR20],
    }
}

fn alter_pdu(call_id: u32, contexts: Vec<ContextElement>) -> Vec<u8> {
    let mut pdu = bind_pdu(call_id, 4280, contexts);
    pdu[2] = ptype::ALTER_CONTEXT;
    pdu
}

/// The one answer PDU to what was just written: its type and body.
fn answer(ep: &mut PipeEndpoint) -> (u8, Vec<u8>) {
    let mut pdus = read_pdus(ep);
    assert_eq!(pdus.len(), 1);
    let pdu = pdus.remove(0);
    let frag = split_fragment(&pdu).unwrap();
    (frag.header.ptype, frag.body.to_vec())
}

fn results(body: &[u8]) -> Vec<(u16, u16)> {
    let ack = BindAck::decode(body).unwrap();
    ack.results.iter().map(|r| (r.result, r.reason)).collect()
}

/// A pipe bound with `contexts`, every one accepted.
fn bound(pipe: &str, contexts: Vec<ContextElement>) -> PipeEndpoint {
    let n = contexts.len();
    let mut ep = PipeEndpoint::open(pipe).unwrap();
    ep.write(&bind_pdu(1, 4280, contexts), &three_shares())
        .unwrap();
    let (kind, body) = answer(&mut ep);
    assert_eq!(kind, ptype::BIND_ACK);
    assert_eq!(results(&body), vec![(context_result::ACCEPTANCE, 0); n]);
    ep
}

/// The response stub of one call on `context_id`.
fn call_on(ep: &mut PipeEndpoint, context_id: u16, opnum: u16, stub: &[u8]) -> Vec<u8> {
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
    ep.write(
        &request_pdu(9, flags, context_id, opnum, stub),
        &three_shares(),
    )
    .unwrap();
    let (kind, body) = answer(ep);
    assert_eq!(kind, ptype::RESPONSE, "{body:02x?}");
    Response::decode(&body).unwrap().stub
}

fn fault_of(ep: &mut PipeEndpoint) -> u32 {
    let (kind, body) = answer(ep);
    assert_eq!(kind, ptype::FAULT);
    Fault::decode(&body).unwrap().status
}

#[test]
fn mgmt_lists_the_interfaces_of_each_pipe() {
    for (pipe, expected) in [
        ("srvsvc", vec![SyntaxId::SRVSVC, SyntaxId::MGMT]),
        (
            "lsarpc",
            vec![SyntaxId::LSARPC, SyntaxId::DSSETUP, SyntaxId::MGMT],
        ),
    ] {
        let mut ep = bound(pipe, vec![context(0, SyntaxId::MGMT)]);
        let stub = call_on(&mut ep, 0, 0, &[]);
        let mut c = StubCursor::new(&stub);
        assert!(c.pointer());
        let n = expected.len() as u32;
        assert_eq!((c.u32(), c.u32()), (n, n), "{pipe}");
        for _ in 0..n {
            assert!(c.pointer());
        }
        for syntax in &expected {
            c.u32();
            c.pos -= 4;
            assert_eq!(c.bytes(16), syntax.uuid, "{pipe}");
            assert_eq!(c.u32(), syntax.version);
        }
        assert_eq!(c.u32(), 0, "WERR_OK");
        assert!(c.at_end());
    }
}

#[test]
fn mgmt_statistics_listening_and_principal_names() {
    let mut ep = bound("srvsvc", vec![context(0, SyntaxId::MGMT)]);
    // rpc_mgmt_inq_stats counts what came before it: the bind and this
    // request in, the bind_ack out, one call in.
    let stats = call_on(&mut ep, 0, 1, &[4, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        StubCursor::new(&stats).rest_u32(),
        vec![4, 4, 1, 0, 2, 1, 0]
    );
    let short = call_on(&mut ep, 0, 1, &[3, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(StubCursor::new(&short).rest_u32(), vec![0, 0, 50]);
    // Listening (status 0, result true); refuses to stop (ACCESS_DENIED).
    assert_eq!(
        StubCursor::new(&call_on(&mut ep, 0, 2, &[])).rest_u32(),
        vec![0, 1]
    );
    assert_eq!(
        StubCursor::new(&call_on(&mut ep, 0, 3, &[])).rest_u32(),
        vec![5]
    );
    // No principal name for any protocol: an empty name, and
    // RPC_S_UNKNOWN_AUTHN_SERVICE; a zero-sized buffer is bad stub data.
    let name = call_on(&mut ep, 0, 4, &[10, 0, 0, 0, 100, 0, 0, 0]);
    let mut c = StubCursor::new(&name);
    assert_eq!((c.u32(), c.u32(), c.u32()), (100, 0, 1));
    assert_eq!(c.bytes(1), [0]);
    assert_eq!(c.u32(), 1747);
    assert!(c.at_end());
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
    ep.write(
        &request_pdu(10, flags, 0, 4, &[10, 0, 0, 0, 0, 0, 0, 0]),
        &three_shares(),
    )
    .unwrap();
    assert_eq!(fault_of(&mut ep), fault_status::NDR);
    ep.write(&request_pdu(11, flags, 0, 5, &[]), &three_shares())
        .unwrap();
    assert_eq!(fault_of(&mut ep), fault_status::NCA_OP_RNG_ERROR);
}

#[test]
fn dssetup_is_added_to_lsarpc_by_alter_context() {
    let mut ep = bound("lsarpc", vec![context(0, SyntaxId::LSARPC)]);
    let wrong_version = SyntaxId {
        version: 100,
        ..SyntaxId::DSSETUP
    };
    ep.write(
        &alter_pdu(
            2,
            vec![context(1, SyntaxId::DSSETUP), context(2, wrong_version)],
        ),
        &three_shares(),
    )
    .unwrap();
    let (kind, body) = answer(&mut ep);
    assert_eq!(kind, ptype::ALTER_CONTEXT_RESP);
    assert_eq!(
        results(&body),
        vec![
            (context_result::ACCEPTANCE, 0),
            (
                context_result::PROVIDER_REJECTION,
                provider_reason::ABSTRACT_SYNTAX_NOT_SUPPORTED
            )
        ]
    );

    // DS_ROLE_BASIC_INFORMATION: a standalone server in its own domain.
    let basic = call_on(&mut ep, 1, 0, &[1, 0]);
    let mut c = StubCursor::new(&basic);
    assert!(c.pointer());
    assert_eq!(c.u16(), 1, "level");
    c.u32();
    c.pos -= 4;
    assert_eq!(c.u16(), 2, "DsRole_RoleStandaloneServer");
    assert_eq!(c.u32(), 0, "flags");
    assert_eq!(
        (c.pointer(), c.pointer(), c.pointer()),
        (true, false, false)
    );
    assert_eq!(c.bytes(16), [0; 16], "domain GUID");
    assert_eq!(c.string(), "TESTHOST");
    assert_eq!(c.u32(), 0);
    assert!(c.at_end());

    // DS_ROLE_UPGRADE_STATUS and DS_ROLE_OP_STATUS: nothing under way.
    let upgrade = call_on(&mut ep, 1, 0, &[2, 0]);
    assert_eq!(
        upgrade,
        [0, 0, 2, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    let op = call_on(&mut ep, 1, 0, &[3, 0]);
    assert_eq!(op, [0, 0, 2, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    // Any other level: no information, ERROR_INVALID_PARAMETER.
    let bad = call_on(&mut ep, 1, 0, &[4, 0]);
    assert_eq!(StubCursor::new(&bad).rest_u32(), vec![0, 87]);
    // The lsarpc context still carries lsarpc.
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
    ep.write(&request_pdu(12, flags, 0, 0, &[1, 0]), &three_shares())
        .unwrap();
    assert_eq!(fault_of(&mut ep), fault_status::NDR);
}

#[test]
fn dssetup_is_not_on_the_srvsvc_pipe() {
    let mut ep = PipeEndpoint::open("srvsvc").unwrap();
    ep.write(
        &bind_pdu(1, 4280, vec![context(0, SyntaxId::DSSETUP)]),
        &three_shares(),
    )
    .unwrap();
    let (_, body) = answer(&mut ep);
    assert_eq!(
        results(&body),
        vec![(
            context_result::PROVIDER_REJECTION,
            provider_reason::ABSTRACT_SYNTAX_NOT_SUPPORTED
        )]
    );
}

#[test]
fn redefining_a_context_ends_the_association() {
    let mut ep = bound("lsarpc", vec![context(0, SyntaxId::LSARPC)]);
    // The same context id and syntax again is fine.
    ep.write(
        &alter_pdu(2, vec![context(0, SyntaxId::LSARPC)]),
        &three_shares(),
    )
    .unwrap();
    let (kind, body) = answer(&mut ep);
    assert_eq!(kind, ptype::ALTER_CONTEXT_RESP);
    assert_eq!(results(&body), vec![(context_result::ACCEPTANCE, 0)]);
    assert!(!ep.is_disconnected());
    // Context 0 as dssetup: a protocol error, and the pipe takes nothing more.
    ep.write(
        &alter_pdu(3, vec![context(0, SyntaxId::DSSETUP)]),
        &three_shares(),
    )
    .unwrap();
    assert_eq!(fault_of(&mut ep), fault_status::NCA_PROTO_ERROR);
    let flags = pfc::FIRST_FRAG | pfc::LAST_FRAG;
    assert_eq!(
        ep.write(&request_pdu(4, flags, 0, 0, &[]), &three_shares()),
        Err(PipeError::Disconnected)
    );
    assert!(!ep.has_output());
    // What tells the SMB server not to let a READ wait on the pipe.
    assert!(ep.is_disconnected());
}
