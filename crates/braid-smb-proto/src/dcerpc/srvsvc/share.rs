//! Share calls (MS-SRVS 3.1.4.8 - 3.1.4.10, 3.1.4.15): NetrShareEnum,
//! NetrShareEnumSticky, NetrShareGetInfo and NetrShareCheck.

use super::*;

/// The SHARE_ENUM_UNION / SHARE_INFO arms the IDL knows (MS-SRVS 2.2.3.5,
/// 2.2.3.6), with the shape of the ones this server answers.
const SHARE_LEVELS: Levels = &[
    (0, Some(&[Kind::Str])),
    (1, Some(&[Kind::Str, Kind::Dword, Kind::Str])),
    (2, Some(SHARE_INFO_502.split_at(8).0)),
    (501, Some(&[Kind::Str, Kind::Dword, Kind::Str, Kind::Dword])),
    (502, Some(&SHARE_INFO_502)),
    (1004, Some(&[Kind::Str])),
    (1005, Some(&[Kind::Dword])),
    (1006, Some(&[Kind::Dword])),
    (1007, Some(&[Kind::Dword, Kind::Str])),
    (1501, Some(&[Kind::Dword, Kind::Bytes])),
];

/// SHARE_INFO_502; level 2 is its first 8 members.
const SHARE_INFO_502: [Kind; 10] = [
    Kind::Str,
    Kind::Dword,
    Kind::Str,
    Kind::Dword,
    Kind::Dword,
    Kind::Dword,
    Kind::Str,
    Kind::Str,
    Kind::Dword,
    Kind::Bytes,
];

fn share_arms() -> Vec<u32> {
    SHARE_LEVELS.iter().map(|(l, _)| *l).collect()
}

/// Levels that show a share's path: Windows keeps them from
/// non-administrators (MS-SRVS 3.1.4.8), Braid from anonymous callers.
fn needs_authenticated_caller(level: u32) -> bool {
    matches!(level, 2 | 502)
}

/// The path level 2 reports. A local path means nothing to a remote
/// client; Windows-style tools expect a drive path for disk shares and
/// none for IPC$.
fn reported_path(share: &ShareEntry) -> &'static str {
    if share.share_type & 0xFF == share_type::DISK {
        "C:\\"
    } else {
        ""
    }
}

/// MS-SRVS 2.2.4.22 - 2.2.4.26, 2.2.4.29: SHARE_INFO_0, 1, 2, 501, 502, 1005.
/// MS-SRVS 2.2.4.22 - 2.2.4.26, 2.2.4.29: SHARE_INFO_0, 1, 2, 501, 502, 1005.
fn share_info(level: u32, share: &ShareEntry) -> Option<Vec<Field<'_>>> {
    let name = Str(Some(share.name.as_str()));
    let kind = Dword(share.share_type);
    let remark = Str(Some(share.comment.as_str()));
    // permissions 0 (user-level security), max_uses unlimited, the tree
    // connects in use, the path, no share password.
    let level_2 = || {
        vec![
            name,
            kind,
            remark,
            Dword(0),
            Dword(u32::MAX),
            Dword(share.connections),
            Str(Some(reported_path(share))),
            Str(None),
        ]
    };
    Some(match level {
        0 => vec![name],
        1 => vec![name, kind, remark],
        2 => level_2(),
        // Flags 0: manual client-side caching, nothing else set.
        501 => vec![name, kind, remark, Dword(0)],
        // No share-level security descriptor: access is decided by the
        // users file and the files' own ACLs (shi502_reserved 0, NULL).
        502 => {
            let mut fields = level_2();
            fields.extend([Dword(0), Bytes(None)]);
            fields
        }
        1005 => vec![Dword(0)],
        _ => return None,
    })
}

/// MS-SRVS 3.1.4.8 NetrShareEnum (opnum 15), the NetShareEnumAll of
/// `smbclient -L` and Windows' `net view`; and 3.1.4.9 NetrShareEnumSticky
/// (opnum 36, `rpcclient netshareenum`), the same call over the shares
/// that persist, which leaves out the special ones (IPC$) as Samba does,
/// and knows no level 501.
pub(super) fn share_enum(
    stub: Stub<'_>,
    backend: &dyn SrvsvcBackend,
    all: bool,
) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let req = read_enum_tail(&mut r, SHARE_LEVELS)?;
    let answered: &[u32] = if all {
        &[0, 1, 2, 501, 502]
    } else {
        &[0, 1, 2, 502]
    };
    let shares = backend.shares();
    let rows = if !answered.contains(&req.level) {
        Err(werror::INVALID_LEVEL)
    } else if backend.caller_is_anonymous()
        && (needs_authenticated_caller(req.level) || req.level == 501)
    {
        Err(werror::ACCESS_DENIED)
    } else {
        Ok(shares
            .iter()
            .filter(|s| s.browseable)
            .filter(|s| all || s.share_type & share_type::SPECIAL == 0)
            .filter_map(|s| share_info(req.level, s))
            .collect())
    };
    Ok(enum_answer(&req, SHARE_LEVELS, rows))
}

/// MS-SRVS 3.1.4.10 NetrShareGetInfo (opnum 16).
pub(super) fn share_get_info(stub: Stub<'_>, backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let net_name = r.wstring()?;
    let level = r.u32()?;
    let arms = share_arms();
    let answer = |fields, status| Ok(info_answer(level, &arms, fields, status));

    if net_name.is_empty() {
        return answer(None, werror::INVALID_PARAMETER);
    }
    if !matches!(level, 0 | 1 | 2 | 501 | 502 | 1005) {
        return answer(None, werror::INVALID_LEVEL);
    }
    let shares = backend.shares();
    // Share names compare case-insensitively, as SMB2 TREE_CONNECT does.
    let Some(share) = shares
        .iter()
        .find(|s| s.name.to_lowercase() == net_name.to_lowercase())
    else {
        return answer(None, werror::NERR_NET_NAME_NOT_FOUND);
    };
    if backend.caller_is_anonymous() && needs_authenticated_caller(level) {
        return answer(None, werror::ACCESS_DENIED);
    }
    answer(share_info(level, share), werror::SUCCESS)
}

/// MS-SRVS 3.1.4.15 NetrShareCheck (opnum 20): whether a device (a path
/// as level 2 reports it) is shared, and as what.
pub(super) fn share_check(stub: Stub<'_>, backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let device = r.wstring()?;
    let shares = backend.shares();
    let found = shares
        .iter()
        .find(|s| reported_path(s).eq_ignore_ascii_case(&device));
    let mut w = NdrWriter::new();
    match found {
        Some(share) => {
            w.u32(share.share_type & !(share_type::SPECIAL | share_type::TEMPORARY));
            w.u32(werror::SUCCESS);
        }
        None => {
            w.u32(0);
            w.u32(werror::NERR_DEVICE_NOT_SHARED);
        }
    }
    Ok(w.into_bytes())
}
