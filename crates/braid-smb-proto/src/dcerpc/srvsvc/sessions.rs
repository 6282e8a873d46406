//! What the server has open (MS-SRVS 3.1.4.1, 3.1.4.5, 3.1.4.16):
//! NetrConnectionEnum, NetrSessionEnum and NetrFileEnum, the calls behind
//! Windows' "Shared Folders" view and `net session` / `net file`.

use super::*;

/// NERR_UserNotFound (MS-ERREF 2.2).
const NERR_USER_NOT_FOUND: u32 = 2221;

const SESSION_LEVELS: Levels = &[
    (0, Some(&[Kind::Str])),
    (1, Some(SESSION_INFO_502.split_at(6).0)),
    (2, Some(SESSION_INFO_502.split_at(7).0)),
    (10, Some(&[Kind::Str, Kind::Str, Kind::Dword, Kind::Dword])),
    (502, Some(&SESSION_INFO_502)),
];
/// SESSION_INFO_502; levels 1 and 2 are its first 6 and 7 members.
const SESSION_INFO_502: [Kind; 8] = [
    Kind::Str,
    Kind::Str,
    Kind::Dword,
    Kind::Dword,
    Kind::Dword,
    Kind::Dword,
    Kind::Str,
    Kind::Str,
];

/// MS-SRVS 2.2.2.10: sesi*_user_flags.
const SESS_GUEST: u32 = 0x1;

/// MS-SRVS 2.2.4.10 - 2.2.4.15: SESSION_INFO_0, 1, 2, 10, 502.
fn session_info(level: u32, s: &SessionEntry) -> Option<Vec<Field<'_>>> {
    let client = Str(Some(s.client.as_str()));
    let user = Str(Some(s.user.as_str()));
    let flags = if s.guest { SESS_GUEST } else { 0 };
    let level_1 = [
        client,
        user,
        Dword(s.opens),
        Dword(seconds(s.active)),
        Dword(seconds(s.idle)),
        Dword(flags),
    ];
    Some(match level {
        0 => vec![client],
        1 => level_1.to_vec(),
        2 => [&level_1[..], &[Str(Some(s.client_type.as_str()))]].concat(),
        10 => vec![
            client,
            user,
            Dword(seconds(s.active)),
            Dword(seconds(s.idle)),
        ],
        502 => [
            &level_1[..],
            &[
                Str(Some(s.client_type.as_str())),
                Str(Some(s.transport.as_str())),
            ],
        ]
        .concat(),
        _ => return None,
    })
}

/// A client name as srvsvc spells it: `\\name`.
fn unc_client(name: &str) -> String {
    format!("\\\\{}", name.trim_start_matches('\\'))
}

/// MS-SRVS 3.1.4.5 NetrSessionEnum (opnum 12), optionally for one client
/// computer and one user.
pub(super) fn session_enum(stub: Stub<'_>, backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let client = optional_string(&mut r)?.filter(|c| !c.is_empty());
    let user = optional_string(&mut r)?.filter(|u| !u.is_empty());
    let req = read_enum_tail(&mut r, SESSION_LEVELS)?;
    if let Some(status) = refusal(req.level, &[0, 1, 2, 10, 502], backend) {
        return Ok(enum_answer(&req, SESSION_LEVELS, Err(status)));
    }
    let mut sessions = backend.sessions();
    if let Some(client) = &client {
        let client = unc_client(client);
        sessions.retain(|s| s.client.eq_ignore_ascii_case(&client));
        if sessions.is_empty() {
            let status = werror::NERR_CLIENT_NAME_NOT_FOUND;
            return Ok(enum_answer(&req, SESSION_LEVELS, Err(status)));
        }
    }
    if let Some(user) = &user {
        sessions.retain(|s| s.user.eq_ignore_ascii_case(user));
        if sessions.is_empty() {
            return Ok(enum_answer(&req, SESSION_LEVELS, Err(NERR_USER_NOT_FOUND)));
        }
    }
    let rows = sessions
        .iter()
        .filter_map(|s| session_info(req.level, s))
        .collect();
    Ok(enum_answer(&req, SESSION_LEVELS, Ok(rows)))
}

/// MS-SRVS 3.1.4.6 NetrSessionDel (opnum 13): end the sessions from one
/// client computer, of one user, or both (Windows' "Close session").
pub(super) fn session_del(stub: Stub<'_>, backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let client = optional_string(&mut r)?.filter(|c| !c.is_empty());
    let user = optional_string(&mut r)?.filter(|u| !u.is_empty());
    let status = if client.is_none() && user.is_none() {
        werror::INVALID_PARAMETER
    } else if client.as_ref().is_some_and(|c| !c.starts_with("\\\\")) {
        // MS-SRVS 3.1.4.6: a client name MUST begin with `\\`.
        werror::INVALID_PARAMETER
    } else if backend.caller_is_anonymous() {
        werror::ACCESS_DENIED
    } else if backend.end_sessions(client.as_deref(), user.as_deref()) == 0 {
        werror::NERR_CLIENT_NAME_NOT_FOUND
    } else {
        werror::SUCCESS
    };
    Ok(status_answer(status))
}

const CONNECTION_LEVELS: Levels = &[(0, Some(&[Kind::Dword])), (1, Some(&CONNECTION_INFO_1))];
const CONNECTION_INFO_1: [Kind; 7] = [
    Kind::Dword,
    Kind::Dword,
    Kind::Dword,
    Kind::Dword,
    Kind::Dword,
    Kind::Str,
    Kind::Str,
];

/// MS-SRVS 3.1.4.1 NetrConnectionEnum (opnum 8): the tree connects to one
/// share, or from one client computer (a Qualifier starting with `\\`).
/// CONNECTION_INFO_1's coni1_netname names the other side: the client for
/// a share, the share for a client.
pub(super) fn connection_enum(stub: Stub<'_>, backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let qualifier = optional_string(&mut r)?.unwrap_or_default();
    let req = read_enum_tail(&mut r, CONNECTION_LEVELS)?;
    let refuse = |status| Ok(enum_answer(&req, CONNECTION_LEVELS, Err(status)));
    if let Some(status) = refusal(req.level, &[0, 1], backend) {
        return refuse(status);
    }
    if qualifier.is_empty() {
        return refuse(werror::INVALID_PARAMETER);
    }
    let by_client = qualifier.starts_with("\\\\");
    let mut trees = backend.tree_connects();
    if by_client {
        trees.retain(|t| t.client.eq_ignore_ascii_case(&qualifier));
        if trees.is_empty() {
            return refuse(werror::NERR_CLIENT_NAME_NOT_FOUND);
        }
    } else {
        if !backend
            .shares()
            .iter()
            .any(|s| s.name.eq_ignore_ascii_case(&qualifier))
        {
            return refuse(werror::NERR_NET_NAME_NOT_FOUND);
        }
        trees.retain(|t| t.share.eq_ignore_ascii_case(&qualifier));
    }
    let rows = trees
        .iter()
        .map(|t| match req.level {
            0 => vec![Dword(t.id)],
            _ => {
                let other = if by_client { &t.share } else { &t.client };
                vec![
                    Dword(t.id),
                    Dword(t.share_type),
                    Dword(t.opens),
                    // One user per tree connect: SMB2 has no shared ones.
                    Dword(1),
                    Dword(seconds(t.active)),
                    Str(Some(t.user.as_str())),
                    Str(Some(other.as_str())),
                ]
            }
        })
        .collect();
    Ok(enum_answer(&req, CONNECTION_LEVELS, Ok(rows)))
}

const FILE_LEVELS: Levels = &[(2, Some(&[Kind::Dword])), (3, Some(&FILE_INFO_3))];
const FILE_INFO_3: [Kind; 5] = [Kind::Dword, Kind::Dword, Kind::Dword, Kind::Str, Kind::Str];

/// MS-SRVS 3.1.4.16 NetrFileEnum (opnum 9): open files, optionally under
/// one path and of one user.
pub(super) fn file_enum(stub: Stub<'_>, backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let base_path = optional_string(&mut r)?.filter(|p| !p.is_empty());
    let user = optional_string(&mut r)?.filter(|u| !u.is_empty());
    let req = read_enum_tail(&mut r, FILE_LEVELS)?;
    let refuse = |status| Ok(enum_answer(&req, FILE_LEVELS, Err(status)));
    if let Some(status) = refusal(req.level, &[2, 3], backend) {
        return refuse(status);
    }
    let mut files = backend.open_files();
    if let Some(base) = &base_path {
        let base = base.to_lowercase();
        files.retain(|f| f.path.to_lowercase().starts_with(&base));
    }
    if let Some(user) = &user {
        files.retain(|f| f.user.eq_ignore_ascii_case(user));
    }
    let rows = files.iter().map(|f| file_info(req.level, f)).collect();
    Ok(enum_answer(&req, FILE_LEVELS, Ok(rows)))
}

/// MS-SRVS 2.2.4.6, 2.2.4.7: FILE_INFO_2 and FILE_INFO_3 (levels 2, 3).
fn file_info(level: u32, f: &OpenFileEntry) -> Vec<Field<'_>> {
    match level {
        2 => vec![Dword(f.id)],
        _ => vec![
            Dword(f.id),
            Dword(f.permissions),
            Dword(f.locks),
            Str(Some(f.path.as_str())),
            Str(Some(f.user.as_str())),
        ],
    }
}

/// MS-SRVS 3.1.4.17 NetrFileGetInfo (opnum 10): one open file.
pub(super) fn file_get_info(stub: Stub<'_>, backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let id = r.u32()?;
    let level = r.u32()?;
    let arms = [2, 3];
    let answer = |fields, status| Ok(info_answer(level, &arms, fields, status));
    if !arms.contains(&level) {
        return answer(None, werror::INVALID_LEVEL);
    }
    if backend.caller_is_anonymous() {
        return answer(None, werror::ACCESS_DENIED);
    }
    let files = backend.open_files();
    match files.iter().find(|f| f.id == id) {
        Some(f) => answer(Some(file_info(level, f)), werror::SUCCESS),
        None => answer(None, werror::NERR_FILE_ID_NOT_FOUND),
    }
}

/// MS-SRVS 3.1.4.18 NetrFileClose (opnum 11): `net file ID /close`, the
/// way to let go of a handle a vanished client left open.
pub(super) fn file_close(stub: Stub<'_>, backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = stub.reader();
    skip_server_name(&mut r)?;
    let id = r.u32()?;
    let status = if backend.caller_is_anonymous() {
        werror::ACCESS_DENIED
    } else if backend.close_file(id) {
        werror::SUCCESS
    } else {
        werror::NERR_FILE_ID_NOT_FOUND
    };
    Ok(status_answer(status))
}
