//! NetrServerGetInfo access, the character-device calls, NetrRemoteTOD,
//! NetrServerDiskEnum and NetrServerTransportEnum, read by the hand decoder.

use super::*;
use crate::dcerpc::ndr::{NdrWriter, FIRST_REFERENT_ID};
use crate::dcerpc::test_support::*;

fn server_name_only() -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.referent();
    w.wstring("\\\\BRAID");
    w.into_bytes()
}

#[test]
fn char_devices_are_not_supported() {
    let backend = three_shares();
    let out = handle_call(
        opnum::NETR_CHAR_DEV_ENUM,
        &enum_stub(&[Some("\\\\BRAID")], 1, None),
        &backend,
    )
    .unwrap();
    assert_eq!(
        StubCursor::new(&out).rest_u32(),
        [1, 1, 0, 0, 0, werror::NOT_SUPPORTED]
    );
    // NetrCharDevQEnum has a UserName before the container.
    let out = handle_call(
        opnum::NETR_CHAR_DEV_Q_ENUM,
        &enum_stub(&[Some("\\\\BRAID"), Some("Administrator")], 0, Some(0)),
        &backend,
    )
    .unwrap();
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.u32(), c.pointer(), c.u32()), (0, 0, false, 0));
    assert!(c.pointer(), "the resume handle sent comes back");
    assert_eq!(c.rest_u32(), [0, werror::NOT_SUPPORTED]);
}

#[test]
fn remote_tod_spells_out_utc() {
    let backend = FixedBackend {
        // 2026-11-25 12:34:56 UTC, a Wednesday.
        now_unix: 1_795_610_096,
        uptime: std::time::Duration::from_millis(90_061_000),
        ..FixedBackend::default()
    };
    let out = handle_call(opnum::NETR_REMOTE_TOD, &server_name_only(), &backend).unwrap();
    let mut c = StubCursor::new(&out);
    assert!(c.pointer());
    assert_eq!(
        c.rest_u32(),
        [
            1_795_610_096,
            90_061_000,
            12,
            34,
            56,
            0,
            0,
            310,
            25,
            11,
            2026,
            3,
            werror::SUCCESS
        ]
    );
}

#[test]
fn disk_enum_reports_drive_c_to_authenticated_callers() {
    let stub = |level: u32| {
        let mut w = NdrWriter::new();
        w.null_pointer();
        w.u32(level);
        w.u32(0);
        w.null_pointer();
        w.u32(u32::MAX);
        w.referent();
        w.u32(0);
        w.into_bytes()
    };
    let out = handle_call(opnum::NETR_SERVER_DISK_ENUM, &stub(0), &three_shares()).unwrap();
    let mut c = StubCursor::new(&out);
    assert_eq!(c.u32(), 1, "EntriesRead");
    assert!(c.pointer());
    assert_eq!(
        (c.u32(), c.u32(), c.u32()),
        (1, 0, 1),
        "max, offset, actual"
    );
    assert_eq!((c.u32(), c.u32()), (0, 3), "offset, length of \"C:\\0\"");
    let units: Vec<u16> = out[c.pos..c.pos + 6]
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    assert_eq!(String::from_utf16(&units).unwrap(), "C:\0");
    c.pos += 6;
    assert_eq!(c.u32(), 1, "TotalEntries");
    assert!(c.pointer());
    assert_eq!(c.rest_u32(), [0, werror::SUCCESS]);

    let out = handle_call(opnum::NETR_SERVER_DISK_ENUM, &stub(1), &three_shares()).unwrap();
    assert_eq!(out[out.len() - 4..], werror::INVALID_LEVEL.to_le_bytes());
    let anonymous = FixedBackend {
        anonymous: true,
        ..three_shares()
    };
    let out = handle_call(opnum::NETR_SERVER_DISK_ENUM, &stub(0), &anonymous).unwrap();
    assert_eq!(
        StubCursor::new(&out).rest_u32(),
        [0, 0, 0, FIRST_REFERENT_ID, 0, werror::ACCESS_DENIED]
    );
}

#[test]
fn transport_enum_level_1() {
    let backend = FixedBackend {
        transports: vec![TransportEntry {
            connections: 2,
            name: "\\Device\\Braid_TCP_127.0.0.1:445".into(),
            address: b"BRAID           ".to_vec(),
            network_address: "127.0.0.1:445".into(),
            domain: "WORKGROUP".into(),
        }],
        ..FixedBackend::default()
    };
    let stub = enum_stub(&[Some("\\\\BRAID")], 1, None);
    let out = handle_call(opnum::NETR_SERVER_TRANSPORT_ENUM, &stub, &backend).unwrap();
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.u32(), c.pointer(), c.u32()), (1, 1, true, 1));
    assert!(c.pointer());
    assert_eq!(c.u32(), 1);
    assert_eq!(c.u32(), 2, "connections");
    assert!(c.pointer() && c.pointer());
    assert_eq!(c.u32(), 16, "addr_len");
    assert!(c.pointer() && c.pointer());
    assert_eq!(c.string(), "\\Device\\Braid_TCP_127.0.0.1:445");
    assert_eq!(c.byte_array(), b"BRAID           ");
    assert_eq!(c.string(), "127.0.0.1:445");
    assert_eq!(c.string(), "WORKGROUP");
    assert_eq!(c.rest_u32(), [1, 0, werror::SUCCESS]);

    let anonymous = FixedBackend {
        anonymous: true,
        ..backend
    };
    let out = handle_call(opnum::NETR_SERVER_TRANSPORT_ENUM, &stub, &anonymous).unwrap();
    assert_eq!(
        StubCursor::new(&out).rest_u32(),
        [1, 1, 0, 0, 0, werror::ACCESS_DENIED]
    );
}

#[test]
fn anonymous_callers_get_no_level_102() {
    let anonymous = FixedBackend {
        anonymous: true,
        ..three_shares()
    };
    let out = handle_call(
        opnum::NETR_SERVER_GET_INFO,
        &server_get_info_stub(102),
        &anonymous,
    )
    .unwrap();
    assert_eq!(
        StubCursor::new(&out).rest_u32(),
        [102, 0, werror::ACCESS_DENIED]
    );
    let out = handle_call(
        opnum::NETR_SERVER_GET_INFO,
        &server_get_info_stub(101),
        &anonymous,
    )
    .unwrap();
    assert_eq!(out[out.len() - 4..], werror::SUCCESS.to_le_bytes());
}
