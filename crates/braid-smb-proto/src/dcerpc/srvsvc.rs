//! The three srvsvc calls share browsing needs (MS-SRVS 3.1.4): stub in,
//! stub out, share data from a [`SrvsvcBackend`].

use super::ndr::{NdrError, NdrReader, NdrResult, NdrWriter};
use super::pdu::fault_status;

/// One share as srvsvc reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareEntry {
    pub name: String,
    pub share_type: u32,
    pub comment: String,
}

/// MS-SRVS 2.2.2.4: share types (the low bits) and modifier bits.
pub mod share_type {
    pub const DISK: u32 = 0;
    pub const PRINTQ: u32 = 1;
    pub const DEVICE: u32 = 2;
    pub const IPC: u32 = 3;
    pub const TEMPORARY: u32 = 0x4000_0000;
    pub const SPECIAL: u32 = 0x8000_0000;
}

/// What NetrServerGetInfo reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    /// NetBIOS-ish server name, e.g. "BRAID".
    pub name: String,
    pub comment: String,
    pub version_major: u32,
    pub version_minor: u32,
    /// MS-SRVS 2.2.2.7 SV_TYPE_* bits.
    pub server_type: u32,
}

/// What the srvsvc calls need from the server (sans-IO: plain data).
pub trait SrvsvcBackend {
    fn shares(&self) -> Vec<ShareEntry>;
    fn server_info(&self) -> ServerInfo;
}

/// MS-SRVS 3.1.4: the operation numbers answered here.
pub mod opnum {
    pub const NETR_SHARE_ENUM: u16 = 15;
    pub const NETR_SHARE_ENUM_STICKY: u16 = 36;
    pub const NETR_SHARE_GET_INFO: u16 = 16;
    pub const NETR_SERVER_GET_INFO: u16 = 21;
}

/// NET_API_STATUS values (MS-ERREF 2.2) the calls return.
pub mod werror {
    pub const SUCCESS: u32 = 0;
    pub const INVALID_PARAMETER: u32 = 87;
    pub const INVALID_LEVEL: u32 = 124;
    pub const NERR_NET_NAME_NOT_FOUND: u32 = 2310;
}

/// MS-SRVS 2.2.2.6 PLATFORM_ID_NT.
pub const PLATFORM_ID_NT: u32 = 500;

/// MS-SRVS 2.2.3.5: the SHARE_ENUM_UNION arms answered (502 and 503 carry
/// security descriptors this server does not expose).
const ENUM_LEVELS: [u32; 4] = [0, 1, 2, 501];

/// The answer stub of call `opnum`, or the fault status to send instead:
/// nca_op_rng_error for calls not served, RPC_X_BAD_STUB_DATA (MS-ERREF
/// 2.2) for stubs that do not decode.
pub fn handle_call(opnum: u16, stub: &[u8], backend: &dyn SrvsvcBackend) -> Result<Vec<u8>, u32> {
    let answer = match opnum {
        opnum::NETR_SHARE_ENUM => share_enum(stub, backend, true),
        opnum::NETR_SHARE_ENUM_STICKY => share_enum(stub, backend, false),
        opnum::NETR_SHARE_GET_INFO => share_get_info(stub, backend),
        opnum::NETR_SERVER_GET_INFO => server_get_info(stub, backend),
        _ => return Err(fault_status::NCA_OP_RNG_ERROR),
    };
    answer.map_err(|_: NdrError| fault_status::NDR)
}

/// One member of an MS-SRVS info structure: a `[string] wchar_t*` or a DWORD.
#[derive(Debug, Clone, Copy)]
enum Field<'a> {
    Str(Option<&'a str>),
    Dword(u32),
}

use Field::{Dword, Str};

/// C706 chapter 14 (deferral of embedded pointers' referents): in a
/// structure, or an array of them, the referents come after the scalars: first every member of every element,
/// a pointer being its referent id, then the pointees in the same order.
fn write_structs(w: &mut NdrWriter, rows: &[Vec<Field<'_>>]) {
    for row in rows {
        for field in row {
            match field {
                Str(Some(_)) => w.referent(),
                Str(None) => w.null_pointer(),
                Dword(v) => w.u32(*v),
            }
        }
    }
    for row in rows {
        for field in row {
            if let Str(Some(s)) = field {
                w.wstring(s);
            }
        }
    }
}

/// MS-SRVS 2.2.4.22 - 2.2.4.25, 2.2.4.29: SHARE_INFO_0, 1, 2, 501, 1005.
fn share_info(level: u32, share: &ShareEntry) -> Option<Vec<Field<'_>>> {
    let name = Str(Some(share.name.as_str()));
    let kind = Dword(share.share_type);
    let remark = Str(Some(share.comment.as_str()));
    Some(match level {
        0 => vec![name],
        1 => vec![name, kind, remark],
        2 => {
            // A local path means nothing to a remote client; Windows-style
            // tools expect a drive path for disk shares and none for IPC$.
            let path = if share.share_type & 0xFF == share_type::DISK {
                "C:\\"
            } else {
                ""
            };
            // permissions 0 (user-level security), max_uses unlimited,
            // current_uses 0, no share password.
            vec![
                name,
                kind,
                remark,
                Dword(0),
                Dword(u32::MAX),
                Dword(0),
                Str(Some(path)),
                Str(None),
            ]
        }
        // Flags 0: manual client-side caching, nothing else set.
        501 => vec![name, kind, remark, Dword(0)],
        1005 => vec![Dword(0)],
        _ => return None,
    })
}

/// MS-SRVS 2.2.4.40 - 2.2.4.42: SERVER_INFO_100, 101, 102.
fn server_info_fields(level: u32, info: &ServerInfo) -> Option<Vec<Field<'_>>> {
    let mut fields = vec![Dword(PLATFORM_ID_NT), Str(Some(info.name.as_str()))];
    if level == 100 {
        return Some(fields);
    }
    if level != 101 && level != 102 {
        return None;
    }
    fields.extend([
        Dword(info.version_major),
        Dword(info.version_minor),
        Dword(info.server_type),
        Str(Some(info.comment.as_str())),
    ]);
    if level == 102 {
        // users: no limit; disc: Windows' 15-minute autodisconnect; hidden:
        // SV_VISIBLE; announce/anndelta: Windows' 240 s and 3000 ms;
        // licenses: unused since NT 4.
        fields.extend([
            Dword(u32::MAX),
            Dword(15),
            Dword(0),
            Dword(240),
            Dword(3000),
            Dword(0),
            Str(Some("C:\\")),
        ]);
    }
    Some(fields)
}

/// MS-SRVS 2.2.1.1: `[in, string, unique] SRVSVC_HANDLE ServerName`,
/// read and ignored (one server answers under every name).
fn skip_server_name(r: &mut NdrReader<'_>) -> NdrResult<()> {
    if r.unique_pointer()? {
        r.wstring()?;
    }
    Ok(())
}

/// Skips the SHARE_INFO_x array a client may send in NetrShareEnum's
/// [in] container (clients send none, but it is legal).
fn skip_share_array(r: &mut NdrReader<'_>, level: u32) -> NdrResult<()> {
    let probe = ShareEntry {
        name: String::new(),
        share_type: 0,
        comment: String::new(),
    };
    let layout = share_info(level, &probe).ok_or(NdrError::Invalid("share info level"))?;
    let count = r.u32()? as usize;
    // Each member is at least 4 bytes: a count the stub cannot hold is
    // refused before anything is allocated from it.
    if count.saturating_mul(layout.len() * 4) > r.remaining() {
        return Err(NdrError::Truncated(r.pos()));
    }
    let mut pointees = Vec::new();
    for _ in 0..count {
        for field in &layout {
            match field {
                Str(_) => pointees.push(r.unique_pointer()?),
                Dword(_) => {
                    r.u32()?;
                }
            }
        }
    }
    for present in pointees {
        if present {
            r.wstring()?;
        }
    }
    Ok(())
}

/// MS-SRVS 3.1.4.8 NetrShareEnum (opnum 15), the NetShareEnumAll of
/// `smbclient -L` and Windows' `net view`; and 3.1.4.9 NetrShareEnumSticky
/// (opnum 36, `rpcclient netshareenum`), the same call over the shares
/// that persist, which leaves out the special ones (IPC$) as Samba does.
fn share_enum(stub: &[u8], backend: &dyn SrvsvcBackend, special: bool) -> NdrResult<Vec<u8>> {
    let mut r = NdrReader::new(stub);
    skip_server_name(&mut r)?;
    // MS-SRVS 2.2.4.38 SHARE_ENUM_STRUCT: Level, then the union's own
    // discriminant, which must agree with it.
    let level = r.u32()?;
    if r.u32()? != level {
        return Err(NdrError::Invalid("union discriminant differs from level"));
    }
    if r.unique_pointer()? {
        r.u32()?;
        if r.unique_pointer()? {
            skip_share_array(&mut r, level)?;
        }
    }
    r.u32()?; // PreferedMaximumLength: every share goes in one answer.
    let resume_handle = r.unique_pointer()?;
    if resume_handle {
        r.u32()?;
    }

    let mut w = NdrWriter::new();
    w.u32(level);
    w.u32(level);
    let (total, status) = if ENUM_LEVELS.contains(&level) {
        let shares = backend.shares();
        let rows: Vec<_> = shares
            .iter()
            .filter(|s| special || s.share_type & share_type::SPECIAL == 0)
            .filter_map(|s| share_info(level, s))
            .collect();
        // MS-SRVS 2.2.4.33 SHARE_INFO_x_CONTAINER: EntriesRead, then the
        // conformant array behind a unique pointer.
        w.referent();
        w.u32(rows.len() as u32);
        if rows.is_empty() {
            w.null_pointer();
        } else {
            w.referent();
            w.u32(rows.len() as u32);
            write_structs(&mut w, &rows);
        }
        (rows.len() as u32, werror::SUCCESS)
    } else {
        w.null_pointer();
        (0, werror::INVALID_LEVEL)
    };
    w.u32(total);
    if resume_handle {
        w.referent();
        w.u32(0);
    } else {
        w.null_pointer();
    }
    w.u32(status);
    Ok(w.into_bytes())
}

/// `[out, switch_is(Level)]` union of pointers (MS-SRVS 2.2.3.6, 2.2.3.7):
/// the discriminant, then the arm's pointer and its structure, then the
/// NET_API_STATUS.
fn info_answer(level: u32, fields: Option<Vec<Field<'_>>>, status: u32) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.u32(level);
    match fields {
        Some(fields) => {
            w.referent();
            write_structs(&mut w, &[fields]);
        }
        None => w.null_pointer(),
    }
    w.u32(status);
    w.into_bytes()
}

/// MS-SRVS 3.1.4.10 NetrShareGetInfo (opnum 16).
fn share_get_info(stub: &[u8], backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = NdrReader::new(stub);
    skip_server_name(&mut r)?;
    let net_name = r.wstring()?;
    let level = r.u32()?;

    if net_name.is_empty() {
        return Ok(info_answer(level, None, werror::INVALID_PARAMETER));
    }
    if !matches!(level, 0 | 1 | 2 | 501 | 1005) {
        return Ok(info_answer(level, None, werror::INVALID_LEVEL));
    }
    let shares = backend.shares();
    // Share names compare case-insensitively, as SMB2 TREE_CONNECT does.
    let found = shares
        .iter()
        .find(|s| s.name.to_lowercase() == net_name.to_lowercase());
    Ok(match found {
        Some(share) => info_answer(level, share_info(level, share), werror::SUCCESS),
        None => info_answer(level, None, werror::NERR_NET_NAME_NOT_FOUND),
    })
}

/// MS-SRVS 3.1.4.17 NetrServerGetInfo (opnum 21).
fn server_get_info(stub: &[u8], backend: &dyn SrvsvcBackend) -> NdrResult<Vec<u8>> {
    let mut r = NdrReader::new(stub);
    skip_server_name(&mut r)?;
    let level = r.u32()?;
    let info = backend.server_info();
    Ok(match server_info_fields(level, &info) {
        Some(fields) => info_answer(level, Some(fields), werror::SUCCESS),
        None => info_answer(level, None, werror::INVALID_LEVEL),
    })
}

#[cfg(test)]
#[path = "srvsvc_tests.rs"]
mod tests;
