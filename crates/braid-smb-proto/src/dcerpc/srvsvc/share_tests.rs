//! srvsvc stubs in and out, answers read by the hand decoder.

use super::*;
use crate::dcerpc::test_support::*;

fn run(opnum: u16, stub: &[u8]) -> Vec<u8> {
    handle_call(opnum, stub, &three_shares()).unwrap()
}

#[test]
fn share_enum_level_0_lists_names() {
    let out = run(opnum::NETR_SHARE_ENUM, &share_enum_stub(0, Some(0)));
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.u32()), (0, 0));
    assert!(c.pointer());
    assert_eq!(c.u32(), 3);
    assert!(c.pointer());
    assert_eq!(c.u32(), 3);
    for _ in 0..3 {
        assert!(c.pointer());
    }
    let names: Vec<String> = (0..3).map(|_| c.string()).collect();
    assert_eq!(names, ["data", "Home", "IPC$"]);
    assert_eq!(c.u32(), 3);
    assert!(c.pointer());
    assert_eq!(c.u32(), 0);
    assert_eq!(c.u32(), werror::SUCCESS);
    assert!(c.at_end());
}

#[test]
fn share_enum_sticky_leaves_out_special_shares() {
    let out = run(opnum::NETR_SHARE_ENUM_STICKY, &share_enum_stub(0, Some(0)));
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.u32()), (0, 0));
    assert!(c.pointer());
    assert_eq!(c.u32(), 2);
    assert!(c.pointer());
    assert_eq!(c.u32(), 2);
    for _ in 0..2 {
        assert!(c.pointer());
    }
    let names: Vec<String> = (0..2).map(|_| c.string()).collect();
    assert_eq!(names, ["data", "Home"]);
    assert_eq!(c.u32(), 2);
    assert!(c.pointer());
    assert_eq!(c.u32(), 0);
    assert_eq!(c.u32(), werror::SUCCESS);
    assert!(c.at_end());
}

#[test]
fn share_enum_level_2_and_null_resume_handle() {
    let out = run(opnum::NETR_SHARE_ENUM, &share_enum_stub(2, None));
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.u32()), (2, 2));
    assert!(c.pointer());
    assert_eq!(c.u32(), 3);
    assert!(c.pointer());
    assert_eq!(c.u32(), 3);
    let mut fixed = Vec::new();
    for _ in 0..3 {
        let name = c.pointer();
        let kind = c.u32();
        let remark = c.pointer();
        let (perms, max_uses, current) = (c.u32(), c.u32(), c.u32());
        let path = c.pointer();
        let passwd = c.pointer();
        assert!(name && remark && path && !passwd);
        assert_eq!((perms, max_uses, current), (0, u32::MAX, 0));
        fixed.push(kind);
    }
    assert_eq!(fixed, [0, 0, 0x8000_0003]);
    let mut strings = Vec::new();
    for _ in 0..3 {
        strings.push((c.string(), c.string(), c.string()));
    }
    assert_eq!(
        strings[0],
        ("data".into(), "Data share".into(), "C:\\".into())
    );
    assert_eq!(strings[2].2, "");
    assert_eq!(c.u32(), 3);
    assert!(!c.pointer(), "resume handle stays NULL");
    assert_eq!(c.u32(), werror::SUCCESS);
    assert!(c.at_end());
}

#[test]
fn share_enum_unanswered_level_is_invalid_level() {
    let out = run(opnum::NETR_SHARE_ENUM, &share_enum_stub(1004, Some(0)));
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.u32()), (1004, 1004));
    assert!(!c.pointer(), "a NULL container");
    assert_eq!(c.u32(), 0);
    assert!(c.pointer());
    assert_eq!(c.u32(), 0);
    assert_eq!(c.u32(), werror::INVALID_LEVEL);
    assert!(c.at_end());
}

/// A level the IDL does not know has an empty union arm: nothing follows
/// the discriminant, in the request or in the answer.
#[test]
fn share_enum_level_outside_the_idl_has_no_container() {
    let mut w = NdrWriter::new();
    w.null_pointer();
    w.u32(7);
    w.u32(7);
    w.u32(u32::MAX);
    w.null_pointer();
    let out = run(opnum::NETR_SHARE_ENUM, &w.into_bytes());
    let words: Vec<u32> = out
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(words, [7, 7, 0, 0, werror::INVALID_LEVEL]);
}

#[test]
fn share_enum_sticky_knows_no_level_501() {
    let out = run(opnum::NETR_SHARE_ENUM_STICKY, &share_enum_stub(501, None));
    assert_eq!(out[out.len() - 4..], werror::INVALID_LEVEL.to_le_bytes());
    let out = run(opnum::NETR_SHARE_ENUM_STICKY, &share_enum_stub(502, None));
    assert_eq!(out[out.len() - 4..], werror::SUCCESS.to_le_bytes());
}

#[test]
fn share_enum_with_no_shares_has_a_null_array() {
    let out = handle_call(
        opnum::NETR_SHARE_ENUM,
        &share_enum_stub(1, None),
        &FixedBackend::default(),
    )
    .unwrap();
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.u32()), (1, 1));
    assert!(c.pointer());
    assert_eq!(c.u32(), 0);
    assert!(!c.pointer());
    assert_eq!((c.u32(), c.u32(), c.u32()), (0, 0, werror::SUCCESS));
}

#[test]
fn share_enum_accepts_a_filled_input_container() {
    let mut w = NdrWriter::new();
    w.null_pointer();
    w.u32(1);
    w.u32(1);
    w.referent();
    w.u32(1);
    w.referent();
    w.u32(1);
    w.referent();
    w.u32(0);
    w.null_pointer();
    w.wstring("x");
    w.u32(u32::MAX);
    w.null_pointer();
    let out = run(opnum::NETR_SHARE_ENUM, &w.into_bytes());
    assert_eq!(out[out.len() - 4..], werror::SUCCESS.to_le_bytes());
}

#[test]
fn share_enum_refuses_a_disagreeing_union_discriminant() {
    let mut stub = share_enum_stub(1, None);
    // The server name takes 40 bytes; level at 40, the discriminant at 44.
    stub[44] = 2;
    let err = handle_call(opnum::NETR_SHARE_ENUM, &stub, &three_shares());
    assert_eq!(err, Err(fault_status::NDR));
}

fn share_get_info(name: &str, level: u32) -> (u32, Vec<u8>) {
    let out = run(
        opnum::NETR_SHARE_GET_INFO,
        &share_get_info_stub(name, level),
    );
    let status = u32::from_le_bytes(out[out.len() - 4..].try_into().unwrap());
    (status, out)
}

#[test]
fn share_get_info_level_1_is_case_insensitive() {
    let (status, out) = share_get_info("DATA", 1);
    assert_eq!(status, werror::SUCCESS);
    let mut c = StubCursor::new(&out);
    assert_eq!(c.u32(), 1);
    assert!(c.pointer());
    assert!(c.pointer());
    assert_eq!(c.u32(), share_type::DISK);
    assert!(c.pointer());
    assert_eq!(c.string(), "data");
    assert_eq!(c.string(), "Data share");
    assert_eq!(c.u32(), werror::SUCCESS);
    assert!(c.at_end());
}

#[test]
fn share_get_info_levels_0_2_501_1005() {
    for (level, len) in [(0, 4 + 4 + 4 + 22 + 2 + 4), (1005, 4 + 4 + 4 + 4)] {
        let (status, out) = share_get_info("data", level);
        assert_eq!(status, werror::SUCCESS, "level {level}");
        assert_eq!(out.len(), len, "level {level}");
    }
    for level in [2, 501] {
        let (status, out) = share_get_info("ipc$", level);
        assert_eq!(status, werror::SUCCESS);
        let mut c = StubCursor::new(&out);
        assert_eq!(c.u32(), level);
        assert!(c.pointer() && c.pointer());
        assert_eq!(c.u32(), 0x8000_0003);
    }
}

#[test]
fn share_get_info_errors() {
    for (name, level, want) in [
        ("nope", 1, werror::NERR_NET_NAME_NOT_FOUND),
        ("data", 1004, werror::INVALID_LEVEL),
        ("", 1, werror::INVALID_PARAMETER),
    ] {
        let (status, out) = share_get_info(name, level);
        assert_eq!(status, want, "{name:?} level {level}");
        let mut c = StubCursor::new(&out);
        assert_eq!(c.u32(), level);
        assert!(!c.pointer());
        assert_eq!(c.u32(), want);
        assert!(c.at_end());
    }
    let (status, out) = share_get_info("data", 7);
    assert_eq!(status, werror::INVALID_LEVEL);
    assert_eq!(out.len(), 8, "no arm for a level outside the IDL");
}

#[test]
fn server_get_info_levels() {
    let out = run(opnum::NETR_SERVER_GET_INFO, &server_get_info_stub(101));
    let mut c = StubCursor::new(&out);
    assert_eq!(c.u32(), 101);
    assert!(c.pointer());
    assert_eq!(c.u32(), PLATFORM_ID_NT);
    assert!(c.pointer());
    assert_eq!((c.u32(), c.u32(), c.u32()), (10, 0, 0x8003));
    assert!(c.pointer());
    assert_eq!(c.string(), "BRAID");
    assert_eq!(c.string(), "Braid test");
    assert_eq!(c.u32(), werror::SUCCESS);
    assert!(c.at_end());

    let out = run(opnum::NETR_SERVER_GET_INFO, &server_get_info_stub(100));
    let mut c = StubCursor::new(&out);
    assert_eq!(
        (c.u32(), c.pointer(), c.u32(), c.pointer()),
        (100, true, 500, true)
    );
    assert_eq!(c.string(), "BRAID");

    let out = run(opnum::NETR_SERVER_GET_INFO, &server_get_info_stub(102));
    let mut c = StubCursor::new(&out);
    c.pos = out.len() - 4 - 20;
    assert_eq!(c.string(), "C:\\");

    let out = run(opnum::NETR_SERVER_GET_INFO, &server_get_info_stub(503));
    assert_eq!(
        out,
        [503u32, 0, werror::INVALID_LEVEL]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>()
    );
}

#[test]
fn unknown_opnums_and_bad_stubs_fault() {
    let backend = three_shares();
    assert_eq!(
        handle_call(1, &[], &backend),
        Err(fault_status::NCA_OP_RNG_ERROR)
    );
    assert_eq!(
        handle_call(33, &[], &backend),
        Err(fault_status::NCA_OP_RNG_ERROR)
    );
    for opnum in [0, 3, 8, 9, 12, 15, 16, 20, 21, 23, 26, 36] {
        assert_eq!(handle_call(opnum, &[], &backend), Err(fault_status::NDR));
        assert_eq!(
            handle_call(opnum, &[1, 0, 0, 0, 255, 255, 255, 255], &backend),
            Err(fault_status::NDR)
        );
    }
}

#[test]
fn a_share_that_is_not_browseable_is_not_listed_but_answers_get_info() {
    let mut backend = three_shares();
    backend.shares[1].browseable = false;
    let out = handle_call(
        opnum::NETR_SHARE_ENUM,
        &share_enum_stub(0, Some(0)),
        &backend,
    )
    .unwrap();
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.u32()), (0, 0));
    assert!(c.pointer());
    assert_eq!(c.u32(), 2);
    assert!(c.pointer());
    assert_eq!(c.u32(), 2);
    assert!(c.pointer() && c.pointer());
    let names: Vec<String> = (0..2).map(|_| c.string()).collect();
    assert_eq!(names, ["data", "IPC$"]);

    let out = handle_call(
        opnum::NETR_SHARE_GET_INFO,
        &share_get_info_stub("home", 0),
        &backend,
    )
    .unwrap();
    let status = u32::from_le_bytes(out[out.len() - 4..].try_into().unwrap());
    assert_eq!(status, werror::SUCCESS);
}
