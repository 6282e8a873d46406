//! Golden bytes written by hand from `lsa.idl`, and stubs that are cut
//! short, lie about their counts, or are noise: each gets a fault, never
//! a panic.

use super::test_client::*;
use super::*;
use proptest::prelude::*;

/// A handle planted in the state, so requests written byte by byte can
/// name it: handle_type 0, then a UUID.
const GOLDEN_HANDLE: [u8; 20] = [
    0x00, 0x00, 0x00, 0x00, 0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0x44, 0x44, 0x55, 0x55,
    0x55, 0x55, 0x55, 0x55,
];

fn state_with_golden_handle() -> LsaState {
    let mut state = LsaState::default();
    state.handles.push(GOLDEN_HANDLE);
    state
}

/// lsa_LookupSids (opnum 15) of S-1-1-0 at level 1, as Samba marshals it.
#[rustfmt::skip]
const LOOKUP_SIDS_EVERYONE: &[u8] = &[
    // [in] policy_handle *handle: handle_type, uuid
    0x00, 0x00, 0x00, 0x00, 0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33,
    0x44, 0x44, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55,
    // [in,ref] lsa_SidArray *sids: num_sids 1, sids = referent 0x00020000
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00,
    // the lsa_SidPtr array: max_count 1, sids[0].sid = referent 0x00020004
    0x01, 0x00, 0x00, 0x00, 0x04, 0x00, 0x02, 0x00,
    // dom_sid2: conformance num_auths 1; sid_rev_num 1, num_auths 1,
    // id_auth {0,0,0,0,0,1}, sub_auths[0] 0
    0x01, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00,
    // [in,out,ref] lsa_TransNameArray *names: count 0, names NULL
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    // [in] uint16 level 1, padding to the next u32
    0x01, 0x00, 0x00, 0x00,
    // [in,out,ref] uint32 *count 0
    0x00, 0x00, 0x00, 0x00,
];

/// Its answer.
#[rustfmt::skip]
const LOOKUP_SIDS_EVERYONE_REPLY: &[u8] = &[
    // [out,ref] lsa_RefDomainList **domains: referent 0x00020000
    0x00, 0x00, 0x02, 0x00,
    // lsa_RefDomainList: count 1, domains = referent 0x00020004, max_size 32
    0x01, 0x00, 0x00, 0x00, 0x04, 0x00, 0x02, 0x00, 0x20, 0x00, 0x00, 0x00,
    // lsa_DomainInfo array: max_count 1
    0x01, 0x00, 0x00, 0x00,
    // domains[0].name lsa_StringLarge "": length 0, size 2,
    // string = referent 0x00020008; domains[0].sid = referent 0x0002000c
    0x00, 0x00, 0x02, 0x00, 0x08, 0x00, 0x02, 0x00, 0x0c, 0x00, 0x02, 0x00,
    // name.string: max_count size/2 = 1, offset 0, actual_count length/2 = 0
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    // sid S-1-1: conformance 0; revision 1, num_auths 0, id_auth ..1
    0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    // [in,out,ref] lsa_TransNameArray *names: count 1,
    // names = referent 0x00020010
    0x01, 0x00, 0x00, 0x00, 0x10, 0x00, 0x02, 0x00,
    // lsa_TranslatedName array: max_count 1
    0x01, 0x00, 0x00, 0x00,
    // names[0]: sid_type SID_NAME_WKN_GRP (uint16) and padding;
    // name lsa_String {length 16, size 16, string = referent 0x00020014};
    // sid_index 0
    0x05, 0x00, 0x00, 0x00, 0x10, 0x00, 0x10, 0x00, 0x14, 0x00, 0x02, 0x00,
    0x00, 0x00, 0x00, 0x00,
    // name.string: max_count 8, offset 0, actual_count 8, "Everyone"
    0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00,
    0x45, 0x00, 0x76, 0x00, 0x65, 0x00, 0x72, 0x00, 0x79, 0x00, 0x6f, 0x00,
    0x6e, 0x00, 0x65, 0x00,
    // [in,out,ref] uint32 *count 1
    0x01, 0x00, 0x00, 0x00,
    // NTSTATUS result STATUS_SUCCESS
    0x00, 0x00, 0x00, 0x00,
];

#[test]
fn lookup_sids_request_and_reply_match_the_idl_byte_for_byte() {
    let mut state = state_with_golden_handle();
    let out = call(opnum::LSAR_LOOKUP_SIDS, LOOKUP_SIDS_EVERYONE, &mut state).unwrap();
    assert_eq!(out, LOOKUP_SIDS_EVERYONE_REPLY);
    // The test client marshals the same request.
    assert_eq!(
        lookup_sids_stub(&GOLDEN_HANDLE, &[sid("S-1-1-0")], 1, false),
        LOOKUP_SIDS_EVERYONE
    );
}

/// lsa_OpenPolicy2 (opnum 44) as smbtorture sends it.
#[rustfmt::skip]
const OPEN_POLICY2: &[u8] = &[
    // [in,unique] system_name: referent 0x00020000, then the [string]
    // "\": max_count 2, offset 0, actual_count 2, '\\', NUL
    0x00, 0x00, 0x02, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x5c, 0x00, 0x00, 0x00,
    // [in] lsa_ObjectAttribute *attr (top-level [ref], inline): len 0,
    // root_dir NULL, object_name NULL, attributes 0, sec_desc NULL,
    // sec_qos = referent 0x00020004
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x02, 0x00,
    // lsa_QosInfo: len 0, impersonation_level 2 (uint16), context_mode 1,
    // effective_only 0
    0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01, 0x00,
    // [in] access_mask SEC_FLAG_MAXIMUM_ALLOWED
    0x00, 0x00, 0x00, 0x02,
];

#[test]
fn open_policy2_request_decodes_and_answers_a_registered_handle() {
    assert_eq!(open_policy2_stub(0x0200_0000), OPEN_POLICY2);
    let mut state = LsaState::default();
    let out = call(opnum::LSAR_OPEN_POLICY2, OPEN_POLICY2, &mut state).unwrap();
    // policy_handle (20 octets), then NTSTATUS.
    assert_eq!(out.len(), 24);
    assert_eq!(out[20..], [0, 0, 0, 0]);
    assert_eq!(&out[..4], &[0, 0, 0, 0], "handle_type");
    let handle: [u8; 20] = out[..20].try_into().unwrap();
    assert_eq!(state.handles, [handle]);
}

/// A field of a stub written by hand, for turning it big-endian.
#[derive(Clone, Copy)]
enum F {
    U16,
    U32,
    Raw(usize),
}

/// A context handle: attributes, then a UUID (u32, u16, u16, 8 octets).
const HANDLE: [F; 5] = [F::U32, F::U32, F::U16, F::U16, F::Raw(8)];

/// `le` as a big-endian client (Samba's `bigendian` binding option)
/// marshals the same values: each integer byte-swapped, octets as they are.
fn big_endian(le: &[u8], layout: &[F]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    for f in layout {
        let n = match f {
            F::U16 => 2,
            F::U32 => 4,
            F::Raw(n) => *n,
        };
        let mut field = le[at..at + n].to_vec();
        if !matches!(f, F::Raw(_)) {
            field.reverse();
        }
        out.extend_from_slice(&field);
        at += n;
    }
    assert_eq!(at, le.len(), "layout covers the stub");
    out
}

fn call_big_endian(op: u16, stub: &[u8], state: &mut LsaState) -> Result<Vec<u8>, u32> {
    use super::super::ndr::{Endian, Stub};
    handle_stub(op, Stub::new(stub, Endian::Big), &TestBackend, state)
}

#[test]
fn big_endian_requests_get_the_same_answers() {
    use F::*;
    let open = [
        &[U32, U32, U32, U32, U16, U16][..],
        &[U32, U32, U32, U32, U32, U32],
        &[U32, U16, Raw(1), Raw(1), U32],
    ]
    .concat();
    let mut state = LsaState::default();
    let out = call_big_endian(
        opnum::LSAR_OPEN_POLICY2,
        &big_endian(OPEN_POLICY2, &open),
        &mut state,
    )
    .unwrap();
    assert_eq!(out[20..], [0, 0, 0, 0]);
    // The handle comes back in the client's byte order; it is the one
    // this server handed out, and closes.
    let handle: [u8; 20] = out[..20].try_into().unwrap();
    let close = big_endian(&handle_only_stub(&handle), &HANDLE);
    assert_ne!(close, handle);
    call_big_endian(opnum::LSAR_CLOSE, &close, &mut state).unwrap();
    assert!(state.handles.is_empty());

    let sids = [
        &HANDLE[..],
        &[U32, U32, U32, U32, U32, Raw(1), Raw(1), Raw(6), U32],
        &[U32, U32, U16, Raw(2), U32],
    ]
    .concat();
    let mut state = state_with_golden_handle();
    let out = call_big_endian(
        opnum::LSAR_LOOKUP_SIDS,
        &big_endian(LOOKUP_SIDS_EVERYONE, &sids),
        &mut state,
    )
    .unwrap();
    assert_eq!(out, LOOKUP_SIDS_EVERYONE_REPLY);
}

/// lsa_QueryInfoPolicy level 5 for BRAIDHOST, S-1-5-21-1-2-3.
#[rustfmt::skip]
const ACCOUNT_DOMAIN_REPLY: &[u8] = &[
    // [out,ref] lsa_PolicyInformation **info: referent 0x00020000
    0x00, 0x00, 0x02, 0x00,
    // union switch_type(uint16): level 5, padding to the arm's alignment
    0x05, 0x00, 0x00, 0x00,
    // lsa_DomainInfo: name lsa_StringLarge {length 18, size 20,
    // string = referent 0x00020004}, sid = referent 0x00020008
    0x12, 0x00, 0x14, 0x00, 0x04, 0x00, 0x02, 0x00, 0x08, 0x00, 0x02, 0x00,
    // name.string: max_count 10, offset 0, actual_count 9, "BRAIDHOST",
    // padding
    0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00,
    0x42, 0x00, 0x52, 0x00, 0x41, 0x00, 0x49, 0x00, 0x44, 0x00, 0x48, 0x00,
    0x4f, 0x00, 0x53, 0x00, 0x54, 0x00, 0x00, 0x00,
    // dom_sid2 S-1-5-21-1-2-3: conformance 4; revision 1, num_auths 4,
    // id_auth ..5; 21, 1, 2, 3
    0x04, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05,
    0x15, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00,
    // NTSTATUS result
    0x00, 0x00, 0x00, 0x00,
];

#[test]
fn account_domain_information_matches_the_idl_byte_for_byte() {
    let mut state = state_with_golden_handle();
    // [in] handle, [in] lsa_PolicyInfo level (uint16) 5.
    let mut stub = GOLDEN_HANDLE.to_vec();
    stub.extend_from_slice(&[0x05, 0x00]);
    let out = call(opnum::LSAR_QUERY_INFORMATION_POLICY2, &stub, &mut state).unwrap();
    assert_eq!(out, ACCOUNT_DOMAIN_REPLY);
}

/// Every request the tests send, whole.
fn valid_requests() -> Vec<(u16, Vec<u8>)> {
    let h = GOLDEN_HANDLE;
    let names = [Some("BUILTIN\\Administrators"), None, Some("alice")];
    let sids = [sid("S-1-5-21-1-2-3-1000"), sid("S-1-5-32")];
    vec![
        (opnum::LSAR_OPEN_POLICY, open_policy_stub()),
        (opnum::LSAR_OPEN_POLICY2, open_policy2_stub(1)),
        (opnum::LSAR_CLOSE, handle_only_stub(&h)),
        (opnum::LSAR_QUERY_INFORMATION_POLICY, query_info_stub(&h, 5)),
        (
            opnum::LSAR_LOOKUP_NAMES,
            lookup_names_stub(&h, &names, 1, NamesCall::Names),
        ),
        (
            opnum::LSAR_LOOKUP_NAMES2,
            lookup_names_stub(&h, &names, 1, NamesCall::Names2),
        ),
        (
            opnum::LSAR_LOOKUP_NAMES3,
            lookup_names_stub(&h, &names, 1, NamesCall::Names3),
        ),
        (
            opnum::LSAR_LOOKUP_SIDS,
            lookup_sids_stub(&h, &sids, 1, false),
        ),
        (
            opnum::LSAR_LOOKUP_SIDS2,
            lookup_sids_stub(&h, &sids, 1, true),
        ),
        (opnum::LSAR_GET_USER_NAME, {
            let mut e = Enc::default();
            e.ptr(true).wstring("\\").ptr(false).ptr(true).ptr(false);
            e.done()
        }),
    ]
}

#[test]
fn every_truncated_request_is_a_stub_fault() {
    for (op, stub) in valid_requests() {
        assert!(
            call(op, &stub, &mut state_with_golden_handle()).is_ok(),
            "opnum {op} whole"
        );
        for len in 0..stub.len() {
            assert_eq!(
                call(op, &stub[..len], &mut state_with_golden_handle()),
                Err(fault_status::NDR),
                "opnum {op} cut at {len}"
            );
        }
    }
}

/// handle, then what follows it in LookupNames up to the names' headers.
fn names_prefix(num_names: u32, max_count: u32) -> Enc {
    let mut e = Enc::default();
    e.handle(&GOLDEN_HANDLE).u32(num_names).u32(max_count);
    e
}

#[test]
fn name_counts_are_checked_before_use() {
    let lookup = |stub: Vec<u8>| {
        call(
            opnum::LSAR_LOOKUP_NAMES,
            &stub,
            &mut state_with_golden_handle(),
        )
    };
    // Counts past the buffer, past range(0,1000), and the largest u32.
    assert_eq!(
        lookup(names_prefix(1000, 1000).done()),
        Err(fault_status::NDR)
    );
    assert_eq!(
        lookup(names_prefix(1001, 1001).done()),
        Err(fault_status::NDR)
    );
    assert_eq!(
        lookup(names_prefix(u32::MAX, u32::MAX).done()),
        Err(fault_status::NDR)
    );
    // The array's conformance must equal num_names.
    let mut e = names_prefix(1, 2);
    e.string_header(Some("x")).string_body(Some("x"));
    e.u32(0).ptr(false).u16(1).u32(0);
    assert_eq!(lookup(e.done()), Err(fault_status::NDR));
    // A buffer whose counts disagree with Length/MaximumLength, or whose
    // offset is not 0, or whose actual_count passes its max_count.
    for (len, size, max, offset, actual) in [
        (2u16, 2u16, 1u32, 0u32, 2u32),
        (2, 2, 1, 1, 1),
        (4, 2, 1, 0, 2),
        (2, 2, 5, 0, 1),
    ] {
        let mut e = names_prefix(1, 1);
        e.u16(len)
            .u16(size)
            .ptr(true)
            .u32(max)
            .u32(offset)
            .u32(actual);
        for _ in 0..actual {
            e.u16(u16::from(b'x'));
        }
        e.u32(0).ptr(false).u16(1).u32(0);
        assert_eq!(
            lookup(e.done()),
            Err(fault_status::NDR),
            "{len} {size} {max} {offset} {actual}"
        );
    }
}

fn sids_prefix(num_sids: u32, max_count: u32) -> Enc {
    let mut e = Enc::default();
    e.handle(&GOLDEN_HANDLE)
        .u32(num_sids)
        .ptr(true)
        .u32(max_count);
    e
}

#[test]
fn sid_counts_and_sub_authority_counts_are_checked_before_use() {
    let lookup = |stub: Vec<u8>| {
        call(
            opnum::LSAR_LOOKUP_SIDS,
            &stub,
            &mut state_with_golden_handle(),
        )
    };
    assert_eq!(
        lookup(sids_prefix(20480, 20480).done()),
        Err(fault_status::NDR)
    );
    assert_eq!(
        lookup(sids_prefix(20481, 20481).done()),
        Err(fault_status::NDR)
    );
    assert_eq!(
        lookup(sids_prefix(u32::MAX, u32::MAX).done()),
        Err(fault_status::NDR)
    );
    assert_eq!(lookup(sids_prefix(1, 3).done()), Err(fault_status::NDR));
    // A SID of 16 sub-authorities (MS-DTYP 2.4.2.3 allows 15), and one
    // whose conformance differs from its SubAuthorityCount.
    for (conformance, count) in [(16u32, 16u8), (2, 1), (255, 255)] {
        let mut e = sids_prefix(1, 1);
        e.ptr(true).u32(conformance).u8(1).u8(count);
        e.buf.extend_from_slice(&[0, 0, 0, 0, 0, 5]);
        for _ in 0..count {
            e.u32(7);
        }
        e.u32(0).ptr(false).u16(1).u32(0);
        assert_eq!(
            lookup(e.done()),
            Err(fault_status::NDR),
            "{conformance} {count}"
        );
    }
    // Entries in the ignored [in] names array that the stub cannot hold.
    let mut e = sids_prefix(1, 1);
    e.ptr(true).sid(&sid("S-1-1-0"));
    e.u32(u32::MAX).ptr(true).u32(u32::MAX).u16(1).u32(0);
    assert_eq!(lookup(e.done()), Err(fault_status::NDR));
}

#[test]
fn a_sid_that_is_not_revision_1_is_an_invalid_parameter() {
    let mut bad = sid("S-1-5-18");
    bad.revision = 2;
    let stub = lookup_sids_stub(&GOLDEN_HANDLE, &[bad], 1, false);
    let out = call(
        opnum::LSAR_LOOKUP_SIDS,
        &stub,
        &mut state_with_golden_handle(),
    )
    .unwrap();
    assert_eq!(
        decode_sids_reply(&out, false).status,
        status::INVALID_PARAMETER
    );
}

/// Backends that hand over what the wire cannot carry: names past a
/// u16 byte count, SIDs of too many sub-authorities.
struct BrokenBackend {
    domain_sid_too_long: bool,
}

impl LsaBackend for BrokenBackend {
    fn account_domain(&self) -> (String, Sid) {
        let sid = if self.domain_sid_too_long {
            Sid::new(5, &[21; 20])
        } else {
            sid(DOMAIN_SID)
        };
        ("X".repeat(40_000), sid)
    }
    fn account_by_sid(&self, _: &Sid) -> Option<(String, SidNameUse)> {
        Some(("y".repeat(70_000), SidNameUse::User))
    }
    fn account_by_name(&self, _: &str) -> Option<(Sid, SidNameUse)> {
        Some((Sid::new(5, &[1; 40]), SidNameUse::User))
    }
    fn caller(&self) -> (String, String) {
        ("z".repeat(70_000), String::new())
    }
}

#[test]
fn a_broken_backend_cannot_break_the_answers() {
    for domain_sid_too_long in [false, true] {
        let backend = BrokenBackend {
            domain_sid_too_long,
        };
        for (op, stub) in valid_requests() {
            let mut state = state_with_golden_handle();
            assert!(
                handle_call(op, &stub, &backend, &mut state).is_ok(),
                "opnum {op}"
            );
        }
        let mut state = state_with_golden_handle();
        let stub = lookup_names_stub(&GOLDEN_HANDLE, &[Some("anyone")], 1, NamesCall::Names3);
        let out = handle_call(opnum::LSAR_LOOKUP_NAMES3, &stub, &backend, &mut state).unwrap();
        assert_eq!(
            decode_names_reply(&out, NamesCall::Names3).status,
            status::NONE_MAPPED
        );
        // Overlong names are cut to what Length can count, consistently.
        let stub = lookup_sids_stub(&GOLDEN_HANDLE, &[sid("S-1-5-21-1-2-3-1000")], 1, false);
        let out = handle_call(opnum::LSAR_LOOKUP_SIDS, &stub, &backend, &mut state).unwrap();
        let reply = decode_sids_reply(&out, false);
        if domain_sid_too_long {
            assert_eq!(reply.status, status::NONE_MAPPED);
        } else {
            assert_eq!(reply.status, status::SUCCESS);
            assert_eq!(reply.names[0].1.len(), 32_766);
            assert_eq!(reply.domains.unwrap()[0].0.len(), 32_766);
        }
    }
}

proptest! {
    #[test]
    fn random_stubs_never_panic(
        op in prop::sample::select(vec![0u16, 6, 7, 14, 15, 44, 45, 46, 57, 58, 68, 76, 77]),
        head in any::<bool>(),
        bytes in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        // Half the time behind a valid handle, so lookups get past it.
        let stub = if head { [GOLDEN_HANDLE.as_slice(), &bytes].concat() } else { bytes };
        let _ = call(op, &stub, &mut state_with_golden_handle());
    }

    #[test]
    fn mutated_requests_never_panic(
        which in 0usize..10,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let (op, mut stub) = valid_requests().swap_remove(which);
        for (at, byte) in edits {
            let i = at.index(stub.len());
            stub[i] = byte;
        }
        let len = cut.index(stub.len() + 1);
        let _ = call(op, &stub[..len], &mut state_with_golden_handle());
    }

    #[test]
    fn any_names_get_one_translation_each(names in proptest::collection::vec(
        proptest::option::of("[a-zA-Z\\\\@ ]{0,24}"), 0..8)
    ) {
        let refs: Vec<Option<&str>> = names.iter().map(|n| n.as_deref()).collect();
        let stub = lookup_names_stub(&GOLDEN_HANDLE, &refs, 1, NamesCall::Names2);
        let out = call(opnum::LSAR_LOOKUP_NAMES2, &stub, &mut state_with_golden_handle()).unwrap();
        let reply = decode_names_reply(&out, NamesCall::Names2);
        prop_assert_eq!(reply.sids.len(), names.len());
        let domains = reply.domains.unwrap().len() as u32;
        for (kind, _, _, index) in reply.sids {
            prop_assert!(kind == SidNameUse::Unknown as u16 || index < domains);
        }
    }
}
