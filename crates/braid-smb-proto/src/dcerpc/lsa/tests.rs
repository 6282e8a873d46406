//! The calls as a client makes them, answers read by the hand decoder of
//! `test_client.rs`: open, look names and SIDs up, query, close. The
//! expectations are smbtorture's (rpc.lsa.lookupnames, rpc.lsa.lookupsids)
//! and Windows' where the two agree.

use super::test_client::*;
use super::*;

const USE_DOMAIN: u16 = SidNameUse::Domain as u16;
const USE_WKN_GRP: u16 = SidNameUse::WellKnownGroup as u16;
const USE_ALIAS: u16 = SidNameUse::Alias as u16;
const USE_USER: u16 = SidNameUse::User as u16;
const USE_UNKNOWN: u16 = SidNameUse::Unknown as u16;

fn lookup_names(
    state: &mut LsaState,
    h: &[u8; 20],
    names: &[Option<&str>],
    c: NamesCall,
) -> NamesReply {
    let out = call(c.opnum(), &lookup_names_stub(h, names, 1, c), state).unwrap();
    decode_names_reply(&out, c)
}

fn lookup_sids(state: &mut LsaState, h: &[u8; 20], sids: &[Sid], extended: bool) -> SidsReply {
    let op = if extended {
        opnum::LSAR_LOOKUP_SIDS2
    } else {
        opnum::LSAR_LOOKUP_SIDS
    };
    let out = call(op, &lookup_sids_stub(h, sids, 1, extended), state).unwrap();
    decode_sids_reply(&out, extended)
}

/// smbtorture's testcase_LookupNames and test_LookupNames_wellknown: each
/// name alone, with the type (and for domains the RID -1) it checks.
#[test]
fn well_known_names_translate_as_smbtorture_expects() {
    let mut state = LsaState::default();
    let h = open(&mut state);
    let cases: &[(&str, u16, &str)] = &[
        ("BUILTIN", USE_DOMAIN, "S-1-5-32"),
        ("BUILTIN\\", USE_DOMAIN, "S-1-5-32"),
        ("NT AUTHORITY\\SYSTEM", USE_WKN_GRP, "S-1-5-18"),
        ("NT AUTHORITY\\ANONYMOUS LOGON", USE_WKN_GRP, "S-1-5-7"),
        ("NT AUTHORITY\\Authenticated Users", USE_WKN_GRP, "S-1-5-11"),
        ("BUILTIN\\Administrators", USE_ALIAS, "S-1-5-32-544"),
        ("SYSTEM", USE_WKN_GRP, "S-1-5-18"),
        ("Everyone", USE_WKN_GRP, "S-1-1-0"),
        ("creator owner", USE_WKN_GRP, "S-1-3-0"),
        ("Users", USE_ALIAS, "S-1-5-32-545"),
    ];
    for &(name, kind, expected) in cases {
        for c in [NamesCall::Names, NamesCall::Names2, NamesCall::Names3] {
            let reply = lookup_names(&mut state, &h, &[Some(name)], c);
            assert_eq!(reply.status, status::SUCCESS, "{name} {c:?}");
            assert_eq!(reply.mapped, 1);
            let (got_kind, rid, full, index) = reply.sids[0].clone();
            assert_eq!(got_kind, kind, "{name}");
            assert_eq!(index, 0);
            let domains = reply.domains.unwrap();
            assert_eq!(domains.len(), 1);
            let expected = sid(expected);
            match c {
                NamesCall::Names3 => assert_eq!(full, Some(expected)),
                _ if kind == USE_DOMAIN => {
                    assert_eq!(rid, Some(u32::MAX));
                    assert_eq!(domains[0].1, expected);
                }
                _ => {
                    let mut joined = domains[0].1.clone();
                    joined.sub_authorities.push(rid.unwrap());
                    assert_eq!(joined, expected, "{name}");
                }
            }
        }
    }
}

#[test]
fn referenced_domains_are_listed_once_in_order_of_use() {
    let mut state = LsaState::default();
    let h = open(&mut state);
    let names = [
        Some("Everyone"),
        Some("BUILTIN\\Users"),
        Some("alice"),
        Some("BUILTIN\\Guests"),
        Some("NT AUTHORITY\\NETWORK"),
        Some("bob"),
    ];
    let reply = lookup_names(&mut state, &h, &names, NamesCall::Names);
    let domains = reply.domains.unwrap();
    let listed: Vec<(&str, String)> = domains
        .iter()
        .map(|(n, s)| (n.as_str(), s.to_string()))
        .collect();
    assert_eq!(
        listed,
        [
            ("", "S-1-1".to_string()),
            ("BUILTIN", "S-1-5-32".into()),
            ("BRAIDHOST", DOMAIN_SID.into()),
            ("NT AUTHORITY", "S-1-5".into()),
        ]
    );
    let indexes: Vec<u32> = reply.sids.iter().map(|s| s.3).collect();
    assert_eq!(indexes, [0, 1, 2, 1, 3, 2]);
    let rids: Vec<u32> = reply.sids.iter().map(|s| s.1.unwrap()).collect();
    assert_eq!(rids, [0, 545, 1000, 546, 2, 1001]);
}

#[test]
fn account_names_come_from_the_backend_in_every_form() {
    let mut state = LsaState::default();
    let h = open(&mut state);
    for name in [
        "alice",
        "ALICE",
        "BRAIDHOST\\alice",
        "braidhost\\Alice",
        "alice@BRAIDHOST",
    ] {
        let reply = lookup_names(&mut state, &h, &[Some(name)], NamesCall::Names3);
        assert_eq!(reply.status, status::SUCCESS, "{name}");
        assert_eq!(reply.sids[0].0, USE_USER);
        assert_eq!(reply.sids[0].2, Some(sid("S-1-5-21-1-2-3-1000")));
        assert_eq!(reply.domains.unwrap()[0].0, "BRAIDHOST");
    }
    // The account domain's own name, alone or with a backslash.
    for name in ["BRAIDHOST", "braidhost\\"] {
        let reply = lookup_names(&mut state, &h, &[Some(name)], NamesCall::Names);
        assert_eq!(reply.sids[0].0, USE_DOMAIN, "{name}");
        assert_eq!(reply.sids[0].1, Some(u32::MAX));
        assert_eq!(reply.domains.unwrap()[0].1, sid(DOMAIN_SID));
    }
    // A name in another domain than the one it is looked for in.
    let reply = lookup_names(&mut state, &h, &[Some("BUILTIN\\alice")], NamesCall::Names);
    assert_eq!(reply.status, status::NONE_MAPPED);
}

#[test]
fn bogus_names_are_none_mapped_and_a_mix_some_not_mapped() {
    let mut state = LsaState::default();
    let h = open(&mut state);
    let reply = lookup_names(
        &mut state,
        &h,
        &[Some("NT AUTHORITY\\BOGUS")],
        NamesCall::Names,
    );
    assert_eq!(reply.status, status::NONE_MAPPED);
    assert_eq!(reply.mapped, 0);
    assert_eq!(reply.domains, Some(Vec::new()));
    assert_eq!(reply.sids, [(USE_UNKNOWN, Some(0), None, u32::MAX)]);

    let names = [Some("nobody"), Some("bob"), Some("NOWHERE\\bob")];
    let reply = lookup_names(&mut state, &h, &names, NamesCall::Names3);
    assert_eq!(reply.status, status::SOME_NOT_MAPPED);
    assert_eq!(reply.mapped, 1);
    assert_eq!(reply.sids[0], (USE_UNKNOWN, None, None, u32::MAX));
    assert_eq!(reply.sids[1].2, Some(sid("S-1-5-21-1-2-3-1001")));
    assert_eq!(reply.sids[2], (USE_UNKNOWN, None, None, u32::MAX));
}

/// smbtorture's test_LookupNames_NULL: Windows 2003 and later answer a
/// null name with STATUS_SUCCESS, the BUILTIN domain and RID -1.
#[test]
fn null_name_is_the_builtin_domain() {
    let mut state = LsaState::default();
    let h = open(&mut state);
    let reply = lookup_names(&mut state, &h, &[None], NamesCall::Names);
    assert_eq!(reply.status, status::SUCCESS);
    assert_eq!(reply.sids, [(USE_DOMAIN, Some(u32::MAX), None, 0)]);
    assert_eq!(
        reply.domains.unwrap(),
        [("BUILTIN".to_string(), sid("S-1-5-32"))]
    );
}

#[test]
fn user_sid_round_trips_through_lookup_sids_and_lookup_names() {
    let mut state = LsaState::default();
    let h = open(&mut state);
    let alice = sid("S-1-5-21-1-2-3-1000");
    for extended in [false, true] {
        let reply = lookup_sids(&mut state, &h, std::slice::from_ref(&alice), extended);
        assert_eq!(reply.status, status::SUCCESS);
        assert_eq!(reply.mapped, 1);
        assert_eq!(reply.names, [(USE_USER, "alice".to_string(), 0)]);
        let domains = reply.domains.unwrap();
        assert_eq!(domains, [("BRAIDHOST".to_string(), sid(DOMAIN_SID))]);
        let full = format!("{}\\{}", domains[0].0, reply.names[0].1);
        let back = lookup_names(&mut state, &h, &[Some(&full)], NamesCall::Names3);
        assert_eq!(back.sids[0].2.as_ref(), Some(&alice));
    }
}

#[test]
fn well_known_and_domain_sids_translate() {
    let mut state = LsaState::default();
    let h = open(&mut state);
    let sids: Vec<Sid> = [
        "S-1-1-0",
        "S-1-5-4",
        "S-1-5-32",
        "S-1-5-32-545",
        DOMAIN_SID,
        "S-1-5-18",
    ]
    .iter()
    .map(|s| sid(s))
    .collect();
    let reply = lookup_sids(&mut state, &h, &sids, true);
    assert_eq!(reply.status, status::SUCCESS);
    let names: Vec<(u16, &str, u32)> = reply
        .names
        .iter()
        .map(|(k, n, i)| (*k, n.as_str(), *i))
        .collect();
    // The types smbtorture's rpc.lsa.lookup expects at level 1.
    assert_eq!(
        names,
        [
            (USE_WKN_GRP, "Everyone", 0),
            (USE_WKN_GRP, "INTERACTIVE", 1),
            (USE_DOMAIN, "BUILTIN", 2),
            (USE_ALIAS, "Users", 2),
            (USE_DOMAIN, "BRAIDHOST", 3),
            (USE_WKN_GRP, "SYSTEM", 1),
        ]
    );
    let domains: Vec<String> = reply.domains.unwrap().iter().map(|d| d.0.clone()).collect();
    assert_eq!(domains, ["", "NT AUTHORITY", "BUILTIN", "BRAIDHOST"]);
}

/// smbtorture's test_LookupSidsReply.
#[test]
fn unknown_sid_is_named_by_its_string_form() {
    let mut state = LsaState::default();
    let h = open(&mut state);
    let unknown = "S-1-5-21-1111111111-2222222222-3333333333-512";
    let reply = lookup_sids(&mut state, &h, &[sid(unknown)], false);
    assert_eq!(reply.status, status::NONE_MAPPED);
    assert_eq!(reply.mapped, 0);
    assert_eq!(reply.names, [(USE_UNKNOWN, unknown.to_string(), u32::MAX)]);
    assert_eq!(reply.domains, Some(Vec::new()));

    // An unknown RID of the account domain, next to a known SID.
    let sids = [sid("S-1-5-21-1-2-3-4242"), sid("S-1-1-0")];
    let reply = lookup_sids(&mut state, &h, &sids, true);
    assert_eq!(reply.status, status::SOME_NOT_MAPPED);
    assert_eq!(reply.mapped, 1);
    assert_eq!(
        reply.names[0],
        (USE_UNKNOWN, "S-1-5-21-1-2-3-4242".into(), u32::MAX)
    );
    assert_eq!(reply.names[1], (USE_WKN_GRP, "Everyone".into(), 0));
}

#[test]
fn lookup_levels_outside_the_enum_are_invalid_and_others_map_nothing() {
    let mut state = LsaState::default();
    let h = open(&mut state);
    let everyone = [sid("S-1-1-0")];
    for level in [0u16, 7, 10] {
        let out = call(
            opnum::LSAR_LOOKUP_SIDS,
            &lookup_sids_stub(&h, &everyone, level, false),
            &mut state,
        )
        .unwrap();
        let reply = decode_sids_reply(&out, false);
        assert_eq!(reply.status, status::INVALID_PARAMETER, "level {level}");
        assert_eq!(reply.domains, None);
        assert!(reply.names.is_empty());
    }
    let out = call(
        opnum::LSAR_LOOKUP_SIDS,
        &lookup_sids_stub(&h, &everyone, 2, false),
        &mut state,
    )
    .unwrap();
    assert_eq!(decode_sids_reply(&out, false).status, status::NONE_MAPPED);

    let stub = lookup_names_stub(&h, &[Some("Everyone")], 0, NamesCall::Names2);
    let out = call(opnum::LSAR_LOOKUP_NAMES2, &stub, &mut state).unwrap();
    assert_eq!(
        decode_names_reply(&out, NamesCall::Names2).status,
        status::INVALID_PARAMETER
    );
}

#[test]
fn empty_lookups_succeed_with_nothing() {
    let mut state = LsaState::default();
    let h = open(&mut state);
    let reply = lookup_names(&mut state, &h, &[], NamesCall::Names);
    assert_eq!((reply.status, reply.mapped), (status::SUCCESS, 0));
    assert!(reply.sids.is_empty());
    let reply = lookup_sids(&mut state, &h, &[], false);
    assert_eq!((reply.status, reply.mapped), (status::SUCCESS, 0));
}

#[test]
fn null_sid_pointer_is_an_invalid_parameter() {
    let mut state = LsaState::default();
    let h = open(&mut state);
    let mut e = Enc::default();
    e.handle(&h).u32(2).ptr(true).u32(2).ptr(true).ptr(false);
    e.sid(&sid("S-1-1-0"));
    e.u32(0).ptr(false).u16(1).u32(0);
    let out = call(opnum::LSAR_LOOKUP_SIDS, &e.done(), &mut state).unwrap();
    let reply = decode_sids_reply(&out, false);
    assert_eq!(reply.status, status::INVALID_PARAMETER);
}

/// smbtorture's test_lsa_Close: the second Close of a handle faults with
/// nca_s_fault_context_mismatch (NT_STATUS_RPC_SS_CONTEXT_MISMATCH).
#[test]
fn closed_and_unknown_handles_fault_with_context_mismatch() {
    let mut state = LsaState::default();
    let h = open(&mut state);
    let out = call(opnum::LSAR_CLOSE, &handle_only_stub(&h), &mut state).unwrap();
    let mut d = Dec::new(&out);
    assert_eq!(d.handle(), [0; 20], "Close hands back a zeroed handle");
    assert_eq!(d.u32(), status::SUCCESS);
    d.end();
    assert_eq!(state.open_handles(), 0);

    assert_eq!(
        call(opnum::LSAR_CLOSE, &handle_only_stub(&h), &mut state),
        Err(FAULT_CONTEXT_MISMATCH)
    );
    let stub = lookup_names_stub(&h, &[Some("Everyone")], 1, NamesCall::Names);
    assert_eq!(
        call(opnum::LSAR_LOOKUP_NAMES, &stub, &mut state),
        Err(FAULT_CONTEXT_MISMATCH)
    );
    let stub = lookup_sids_stub(&h, &[sid("S-1-1-0")], 1, true);
    assert_eq!(
        call(opnum::LSAR_LOOKUP_SIDS2, &stub, &mut state),
        Err(FAULT_CONTEXT_MISMATCH)
    );
    assert_eq!(
        call(
            opnum::LSAR_QUERY_INFORMATION_POLICY,
            &query_info_stub(&h, 5),
            &mut state
        ),
        Err(FAULT_CONTEXT_MISMATCH)
    );
    // A handle of another pipe's state is unknown here.
    let mut other = LsaState::default();
    let foreign = open(&mut other);
    let _ = open(&mut state);
    assert_eq!(
        call(opnum::LSAR_CLOSE, &handle_only_stub(&foreign), &mut state),
        Err(FAULT_CONTEXT_MISMATCH)
    );
}

/// smbtorture's test_OpenPolicy: opnum 6 with a one-wchar system name.
#[test]
fn open_policy_takes_a_single_wchar_system_name() {
    let mut state = LsaState::default();
    let out = call(opnum::LSAR_OPEN_POLICY, &open_policy_stub(), &mut state).unwrap();
    let mut d = Dec::new(&out);
    let h = d.handle();
    assert_eq!(d.u32(), status::SUCCESS);
    d.end();
    assert_ne!(h, [0; 20]);
    let reply = lookup_names(&mut state, &h, &[Some("SYSTEM")], NamesCall::Names);
    assert_eq!(reply.status, status::SUCCESS);
}

#[test]
fn open_policy_refuses_a_root_directory_or_no_access() {
    let mut state = LsaState::default();
    let mut e = Enc::default();
    e.ptr(false)
        .u32(0)
        .ptr(true)
        .ptr(false)
        .u32(0)
        .ptr(false)
        .ptr(false);
    e.u8(0).u32(0x0200_0000);
    let out = call(opnum::LSAR_OPEN_POLICY2, &e.done(), &mut state).unwrap();
    assert_eq!(&out[..20], &[0; 20]);
    assert_eq!(out[20..], status::INVALID_PARAMETER.to_le_bytes());
    let out = call(opnum::LSAR_OPEN_POLICY2, &open_policy2_stub(0), &mut state).unwrap();
    assert_eq!(out[20..], status::INVALID_PARAMETER.to_le_bytes());
    assert_eq!(state.open_handles(), 0);
}

#[test]
fn policy_handles_per_pipe_are_bounded() {
    let mut state = LsaState::default();
    let handles: Vec<[u8; 20]> = (0..MAX_POLICY_HANDLES).map(|_| open(&mut state)).collect();
    let distinct: std::collections::HashSet<_> = handles.iter().collect();
    assert_eq!(distinct.len(), MAX_POLICY_HANDLES);
    let out = call(opnum::LSAR_OPEN_POLICY2, &open_policy2_stub(1), &mut state).unwrap();
    assert_eq!(&out[..20], &[0; 20]);
    assert_eq!(out[20..], status::INSUFFICIENT_RESOURCES.to_le_bytes());
    call(
        opnum::LSAR_CLOSE,
        &handle_only_stub(&handles[3]),
        &mut state,
    )
    .unwrap();
    open(&mut state);
    assert_eq!(state.open_handles(), MAX_POLICY_HANDLES);
}

fn get_user_name_stub(want_domain: bool) -> Vec<u8> {
    let mut e = Enc::default();
    e.ptr(true).wstring("\\");
    e.ptr(false); // *account_name = NULL
    e.ptr(want_domain);
    if want_domain {
        e.ptr(false); // *authority_name = NULL
    }
    e.done()
}

/// smbtorture's test_GetUserName: the domain only when asked for.
#[test]
fn get_user_name_answers_the_caller() {
    let mut state = LsaState::default();
    for want_domain in [false, true] {
        let out = call(
            opnum::LSAR_GET_USER_NAME,
            &get_user_name_stub(want_domain),
            &mut state,
        )
        .unwrap();
        let mut d = Dec::new(&out);
        assert!(d.ptr());
        let h = d.string_header();
        assert_eq!(d.string_body(h).as_deref(), Some("alice"));
        assert_eq!(d.ptr(), want_domain);
        if want_domain {
            assert!(d.ptr());
            let h = d.string_header();
            assert_eq!(d.string_body(h).as_deref(), Some("BRAIDHOST"));
        }
        assert_eq!(d.u32(), status::SUCCESS);
        d.end();
    }
}

/// lsa_PolicyInformation level 3 or 5: (level, name, SID).
fn query_domain_info(
    state: &mut LsaState,
    h: &[u8; 20],
    op: u16,
    level: u16,
) -> (String, Option<Sid>) {
    let out = call(op, &query_info_stub(h, level), state).unwrap();
    let mut d = Dec::new(&out);
    assert!(d.ptr());
    assert_eq!(d.u16(), level);
    let name = d.string_header();
    let has_sid = d.ptr();
    let name = d.string_body(name).unwrap();
    let sid = has_sid.then(|| d.sid());
    assert_eq!(d.u32(), status::SUCCESS);
    d.end();
    (name, sid)
}

#[test]
fn query_information_policy_reports_the_account_domain() {
    let mut state = LsaState::default();
    let h = open(&mut state);
    for op in [
        opnum::LSAR_QUERY_INFORMATION_POLICY,
        opnum::LSAR_QUERY_INFORMATION_POLICY2,
    ] {
        assert_eq!(
            query_domain_info(&mut state, &h, op, 3),
            ("BRAIDHOST".into(), None)
        );
        assert_eq!(
            query_domain_info(&mut state, &h, op, 5),
            ("BRAIDHOST".into(), Some(sid(DOMAIN_SID)))
        );
    }
    // Level 12: the NetBIOS name, no DNS names, zero GUID, no SID.
    let out = call(
        opnum::LSAR_QUERY_INFORMATION_POLICY2,
        &query_info_stub(&h, 12),
        &mut state,
    )
    .unwrap();
    let mut d = Dec::new(&out);
    assert!(d.ptr());
    assert_eq!(d.u16(), 12);
    let name = d.string_header();
    assert_eq!(d.string_header(), (0, 0, false));
    assert_eq!(d.string_header(), (0, 0, false));
    assert_eq!((0..4).map(|_| d.u32()).collect::<Vec<_>>(), [0; 4]);
    assert!(!d.ptr());
    assert_eq!(d.string_body(name).as_deref(), Some("BRAIDHOST"));
    assert_eq!(d.u32(), status::SUCCESS);
    d.end();
    // Classes without processing, kept from callers, or unknown.
    for (level, expected) in [
        (9, status::INVALID_PARAMETER),
        (11, status::INVALID_PARAMETER),
        (99, status::INVALID_PARAMETER),
        (1, status::ACCESS_DENIED),
    ] {
        let out = call(
            opnum::LSAR_QUERY_INFORMATION_POLICY,
            &query_info_stub(&h, level),
            &mut state,
        )
        .unwrap();
        let mut d = Dec::new(&out);
        assert!(!d.ptr(), "level {level}");
        assert_eq!(d.u32(), expected, "level {level}");
        d.end();
    }
}

#[test]
fn secure_channel_calls_and_unknown_opnums_fault() {
    let mut state = LsaState::default();
    assert_eq!(
        call(opnum::LSAR_LOOKUP_SIDS3, &[], &mut state),
        Err(fault_status::ACCESS_DENIED)
    );
    assert_eq!(
        call(opnum::LSAR_LOOKUP_NAMES4, &[], &mut state),
        Err(fault_status::ACCESS_DENIED)
    );
    for op in [1, 2, 13, 47, 100, u16::MAX] {
        assert_eq!(
            call(op, &[], &mut state),
            Err(fault_status::NCA_OP_RNG_ERROR),
            "opnum {op}"
        );
    }
}
