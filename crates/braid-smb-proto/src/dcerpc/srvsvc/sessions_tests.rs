//! NetrSessionEnum, NetrConnectionEnum and NetrFileEnum: levels, filters,
//! refusals, read by the hand decoder.

use std::time::Duration;

use super::*;
use crate::dcerpc::ndr::FIRST_REFERENT_ID;
use crate::dcerpc::test_support::*;

fn busy_server() -> FixedBackend {
    let session = |client: &str, user: &str, opens| SessionEntry {
        client: client.into(),
        user: user.into(),
        opens,
        active: Duration::from_secs(120),
        idle: Duration::from_secs(7),
        guest: false,
        client_type: "SMB 3.1.1".into(),
        transport: "TCP".into(),
    };
    let tree = |id, share: &str, share_type, client: &str| TreeConnectEntry {
        id,
        share: share.into(),
        share_type,
        opens: id,
        active: Duration::from_secs(60),
        user: "alice".into(),
        client: client.into(),
    };
    FixedBackend {
        sessions: vec![
            session("\\\\192.0.2.7", "alice", 2),
            session("\\\\192.0.2.8", "alice", 0),
        ],
        trees: vec![
            tree(1, "data", share_type::DISK, "\\\\192.0.2.7"),
            tree(2, "IPC$", share_type::IPC, "\\\\192.0.2.7"),
            tree(3, "data", share_type::DISK, "\\\\192.0.2.8"),
        ],
        files: vec![
            OpenFileEntry {
                id: 11,
                permissions: file_permission::READ | file_permission::WRITE,
                locks: 2,
                path: "data\\docs\\a.txt".into(),
                user: "alice".into(),
            },
            OpenFileEntry {
                id: 12,
                permissions: file_permission::READ,
                locks: 0,
                path: "data\\b.txt".into(),
                user: "alice".into(),
            },
        ],
        ..three_shares()
    }
}

fn call(opnum: u16, stub: &[u8], backend: &FixedBackend) -> Vec<u8> {
    handle_call(opnum, stub, backend).unwrap()
}

fn status_of(out: &[u8]) -> u32 {
    u32::from_le_bytes(out[out.len() - 4..].try_into().unwrap())
}

#[test]
fn session_enum_level_502() {
    let stub = enum_stub(&[Some("\\\\BRAID"), None, None], 502, Some(0));
    let out = call(opnum::NETR_SESSION_ENUM, &stub, &busy_server());
    let mut c = StubCursor::new(&out);
    assert_eq!(
        (c.u32(), c.u32(), c.pointer(), c.u32()),
        (502, 502, true, 2)
    );
    assert!(c.pointer());
    assert_eq!(c.u32(), 2);
    let mut scalars = Vec::new();
    for _ in 0..2 {
        assert!(c.pointer() && c.pointer());
        scalars.push((c.u32(), c.u32(), c.u32(), c.u32()));
        assert!(c.pointer() && c.pointer());
    }
    assert_eq!(scalars, [(2, 120, 7, 0), (0, 120, 7, 0)]);
    let strings: Vec<String> = (0..8).map(|_| c.string()).collect();
    assert_eq!(
        strings,
        [
            "\\\\192.0.2.7",
            "alice",
            "SMB 3.1.1",
            "TCP",
            "\\\\192.0.2.8",
            "alice",
            "SMB 3.1.1",
            "TCP"
        ]
    );
    assert_eq!(c.u32(), 2);
    assert!(c.pointer());
    assert_eq!(c.rest_u32(), [0, werror::SUCCESS]);
}

#[test]
fn session_enum_filters() {
    let backend = busy_server();
    // A client name with or without its leading backslashes.
    for client in ["\\\\192.0.2.8", "192.0.2.8"] {
        let stub = enum_stub(&[None, Some(client), None], 10, None);
        let out = call(opnum::NETR_SESSION_ENUM, &stub, &backend);
        let mut c = StubCursor::new(&out);
        assert_eq!((c.u32(), c.u32(), c.pointer(), c.u32()), (10, 10, true, 1));
        assert!(c.pointer());
        assert_eq!(c.u32(), 1);
        assert!(c.pointer() && c.pointer());
        assert_eq!((c.u32(), c.u32()), (120, 7));
        assert_eq!(c.string(), "\\\\192.0.2.8");
    }
    let stub = enum_stub(&[None, Some("\\\\192.0.2.99"), None], 10, None);
    let out = call(opnum::NETR_SESSION_ENUM, &stub, &backend);
    assert_eq!(status_of(&out), werror::NERR_CLIENT_NAME_NOT_FOUND);
    let stub = enum_stub(&[None, None, Some("ALICE")], 0, None);
    assert_eq!(
        status_of(&call(opnum::NETR_SESSION_ENUM, &stub, &backend)),
        werror::SUCCESS
    );
    let stub = enum_stub(&[None, None, Some("bob")], 0, None);
    assert_eq!(
        status_of(&call(opnum::NETR_SESSION_ENUM, &stub, &backend)),
        2221
    );
}

#[test]
fn session_enum_refusals() {
    let stub = enum_stub(&[None, None, None], 1, None);
    let anonymous = FixedBackend {
        anonymous: true,
        ..busy_server()
    };
    let out = call(opnum::NETR_SESSION_ENUM, &stub, &anonymous);
    assert_eq!(
        StubCursor::new(&out).rest_u32(),
        [1, 1, 0, 0, 0, werror::ACCESS_DENIED]
    );
    let stub = enum_stub(&[None, None, None], 101, None);
    let out = call(opnum::NETR_SESSION_ENUM, &stub, &busy_server());
    assert_eq!(status_of(&out), werror::INVALID_LEVEL);
}

#[test]
fn connection_enum_by_share_names_the_clients() {
    let stub = enum_stub(&[None, Some("DATA")], 1, None);
    let out = call(opnum::NETR_CONNECTION_ENUM, &stub, &busy_server());
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.u32(), c.pointer(), c.u32()), (1, 1, true, 2));
    assert!(c.pointer());
    assert_eq!(c.u32(), 2);
    let mut rows = Vec::new();
    for _ in 0..2 {
        rows.push((c.u32(), c.u32(), c.u32(), c.u32(), c.u32()));
        assert!(c.pointer() && c.pointer());
    }
    assert_eq!(rows, [(1, 0, 1, 1, 60), (3, 0, 3, 1, 60)]);
    let strings: Vec<String> = (0..4).map(|_| c.string()).collect();
    assert_eq!(
        strings,
        ["alice", "\\\\192.0.2.7", "alice", "\\\\192.0.2.8"]
    );
    assert_eq!(c.u32(), 2);
}

#[test]
fn connection_enum_by_client_names_the_shares() {
    let stub = enum_stub(&[None, Some("\\\\192.0.2.7")], 1, None);
    let out = call(opnum::NETR_CONNECTION_ENUM, &stub, &busy_server());
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.u32(), c.pointer(), c.u32()), (1, 1, true, 2));
    assert!(c.pointer());
    c.u32();
    for _ in 0..2 {
        for _ in 0..5 {
            c.u32();
        }
        assert!(c.pointer() && c.pointer());
    }
    let strings: Vec<String> = (0..4).map(|_| c.string()).collect();
    assert_eq!(strings, ["alice", "data", "alice", "IPC$"]);

    let stub = enum_stub(&[None, Some("\\\\192.0.2.7")], 0, None);
    let out = call(opnum::NETR_CONNECTION_ENUM, &stub, &busy_server());
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.u32(), c.pointer(), c.u32()), (0, 0, true, 2));
    assert!(c.pointer());
    assert_eq!((c.u32(), c.u32(), c.u32()), (2, 1, 2), "the tree ids");
}

#[test]
fn connection_enum_refusals() {
    let backend = busy_server();
    for (qualifier, want) in [
        (None, werror::INVALID_PARAMETER),
        (Some(""), werror::INVALID_PARAMETER),
        (Some("nosuch"), werror::NERR_NET_NAME_NOT_FOUND),
        (Some("\\\\192.0.2.99"), werror::NERR_CLIENT_NAME_NOT_FOUND),
    ] {
        let stub = enum_stub(&[None, qualifier], 1, None);
        let out = call(opnum::NETR_CONNECTION_ENUM, &stub, &backend);
        assert_eq!(
            StubCursor::new(&out).rest_u32(),
            [1, 1, 0, 0, 0, want],
            "{qualifier:?}"
        );
    }
}

#[test]
fn file_enum_level_3_and_filters() {
    let backend = busy_server();
    let stub = enum_stub(&[None, None, None], 3, None);
    let out = call(opnum::NETR_FILE_ENUM, &stub, &backend);
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.u32(), c.pointer(), c.u32()), (3, 3, true, 2));
    assert!(c.pointer());
    assert_eq!(c.u32(), 2);
    let mut rows = Vec::new();
    for _ in 0..2 {
        rows.push((c.u32(), c.u32(), c.u32()));
        assert!(c.pointer() && c.pointer());
    }
    assert_eq!(rows, [(11, 3, 2), (12, 1, 0)]);
    let strings: Vec<String> = (0..4).map(|_| c.string()).collect();
    assert_eq!(
        strings,
        ["data\\docs\\a.txt", "alice", "data\\b.txt", "alice"]
    );
    assert_eq!(c.u32(), 2);

    // A base path keeps the opens under it, case-insensitively.
    let stub = enum_stub(&[None, Some("DATA\\docs"), None], 2, None);
    let out = call(opnum::NETR_FILE_ENUM, &stub, &backend);
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.u32(), c.pointer(), c.u32()), (2, 2, true, 1));
    assert!(c.pointer());
    assert_eq!((c.u32(), c.u32()), (1, 11));

    let stub = enum_stub(&[None, None, Some("bob")], 2, None);
    let out = call(opnum::NETR_FILE_ENUM, &stub, &backend);
    assert_eq!(
        StubCursor::new(&out).rest_u32(),
        [2, 2, FIRST_REFERENT_ID, 0, 0, 0, 0, werror::SUCCESS]
    );
    let stub = enum_stub(&[None, None, None], 1, None);
    let out = call(opnum::NETR_FILE_ENUM, &stub, &backend);
    assert_eq!(
        StubCursor::new(&out).rest_u32(),
        [1, 1, 0, 0, werror::INVALID_LEVEL],
        "level 1 is outside the IDL: no container"
    );
}

fn fid_stub(id: u32, level: Option<u32>) -> Vec<u8> {
    let mut w = crate::dcerpc::ndr::NdrWriter::new();
    w.null_pointer();
    w.u32(id);
    if let Some(level) = level {
        w.u32(level);
    }
    w.into_bytes()
}

#[test]
fn file_get_info_finds_one_open() {
    let backend = busy_server();
    let out = call(opnum::NETR_FILE_GET_INFO, &fid_stub(12, Some(3)), &backend);
    let mut c = StubCursor::new(&out);
    assert_eq!((c.u32(), c.pointer()), (3, true));
    assert_eq!((c.u32(), c.u32(), c.u32()), (12, file_permission::READ, 0));
    assert!(c.pointer() && c.pointer());
    assert_eq!(
        (c.string(), c.string()),
        ("data\\b.txt".into(), "alice".into())
    );
    assert_eq!(c.rest_u32(), [werror::SUCCESS]);

    let out = call(opnum::NETR_FILE_GET_INFO, &fid_stub(99, Some(3)), &backend);
    assert_eq!(
        StubCursor::new(&out).rest_u32(),
        [3, 0, werror::NERR_FILE_ID_NOT_FOUND]
    );
    let out = call(opnum::NETR_FILE_GET_INFO, &fid_stub(12, Some(1)), &backend);
    assert_eq!(StubCursor::new(&out).rest_u32(), [1, werror::INVALID_LEVEL]);
}

#[test]
fn file_close_closes_once() {
    let backend = busy_server();
    let close = |id| call(opnum::NETR_FILE_CLOSE, &fid_stub(id, None), &backend);
    assert_eq!(close(11), werror::SUCCESS.to_le_bytes());
    assert_eq!(close(11), werror::NERR_FILE_ID_NOT_FOUND.to_le_bytes());
    assert_eq!(close(99), werror::NERR_FILE_ID_NOT_FOUND.to_le_bytes());
    assert_eq!(*backend.closed.lock().unwrap(), [11]);
    let anonymous = FixedBackend {
        anonymous: true,
        ..busy_server()
    };
    assert_eq!(
        call(opnum::NETR_FILE_CLOSE, &fid_stub(12, None), &anonymous),
        werror::ACCESS_DENIED.to_le_bytes()
    );
    assert!(anonymous.closed.lock().unwrap().is_empty());
}

fn session_del_stub(client: Option<&str>, user: Option<&str>) -> Vec<u8> {
    let mut w = crate::dcerpc::ndr::NdrWriter::new();
    w.null_pointer();
    for s in [client, user] {
        match s {
            Some(s) => {
                w.referent();
                w.wstring(s);
            }
            None => w.null_pointer(),
        }
    }
    w.into_bytes()
}

#[test]
fn session_del_by_client_or_user() {
    let backend = busy_server();
    let del = |client, user| {
        let out = call(
            opnum::NETR_SESSION_DEL,
            &session_del_stub(client, user),
            &backend,
        );
        status_of(&out)
    };
    assert_eq!(del(Some("\\\\192.0.2.8"), None), werror::SUCCESS);
    assert_eq!(*backend.ended.lock().unwrap(), 1);
    assert_eq!(del(None, Some("alice")), werror::SUCCESS);
    assert_eq!(*backend.ended.lock().unwrap(), 3);
    assert_eq!(
        del(Some("\\\\192.0.2.99"), None),
        werror::NERR_CLIENT_NAME_NOT_FOUND
    );
    assert_eq!(del(None, None), werror::INVALID_PARAMETER);
    assert_eq!(del(Some(""), Some("")), werror::INVALID_PARAMETER);
    assert_eq!(
        del(Some("192.0.2.8"), None),
        werror::INVALID_PARAMETER,
        "a client name begins with two backslashes"
    );
    let anonymous = FixedBackend {
        anonymous: true,
        ..busy_server()
    };
    let out = call(
        opnum::NETR_SESSION_DEL,
        &session_del_stub(None, Some("alice")),
        &anonymous,
    );
    assert_eq!(status_of(&out), werror::ACCESS_DENIED);
    assert_eq!(*anonymous.ended.lock().unwrap(), 0);
}
