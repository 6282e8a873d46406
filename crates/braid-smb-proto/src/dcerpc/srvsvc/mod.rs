//! The srvsvc interface (MS-SRVS 3.1.4): stub in, stub out, the server's
//! data from a [`SrvsvcBackend`]. Shares (`share.rs`), the server itself
//! (`server.rs`), and its sessions, tree connects and opens (`sessions.rs`).
//!
//! Access (MS-SRVS 3.1.4 names the levels that need an administrator):
//! Braid has no administrators, so an authenticated user may ask for every
//! level and an anonymous (null or guest) session is refused the levels
//! Windows keeps from non-administrators. Which sessions and opens a caller
//! sees is the backend's decision.

mod server;
mod sessions;
mod share;

use std::time::{Duration, SystemTime};

use super::ndr::{NdrError, NdrReader, NdrResult, NdrWriter, Stub};
use super::pdu::fault_status;

/// One share as srvsvc reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareEntry {
    pub name: String,
    pub share_type: u32,
    pub comment: String,
    /// Tree connects to it now (shi2_current_uses).
    pub connections: u32,
    /// Listed by the enumerations; a share that is not (Samba's
    /// `browseable = no`) still answers NetShareGetInfo and connects.
    pub browseable: bool,
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

/// One authenticated session (MS-SRVS 2.2.4.15 SESSION_INFO_502).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionEntry {
    /// The client's address, as Windows gives it: `\\192.0.2.7`.
    pub client: String,
    pub user: String,
    pub opens: u32,
    pub active: Duration,
    pub idle: Duration,
    pub guest: bool,
    /// The dialect in use, e.g. "SMB 3.1.1".
    pub client_type: String,
    pub transport: String,
}

/// One tree connect (MS-SRVS 2.2.4.2 CONNECTION_INFO_1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeConnectEntry {
    pub id: u32,
    pub share: String,
    pub share_type: u32,
    pub opens: u32,
    pub active: Duration,
    pub user: String,
    /// The client's address, as in [`SessionEntry::client`].
    pub client: String,
}

/// One open file, directory or pipe (MS-SRVS 2.2.4.7 FILE_INFO_3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenFileEntry {
    pub id: u32,
    /// MS-SRVS 2.2.2.9 PERM_FILE_* bits.
    pub permissions: u32,
    pub locks: u32,
    /// `share\dir\file`.
    pub path: String,
    pub user: String,
}

/// MS-SRVS 2.2.2.9: what an open may do.
pub mod file_permission {
    pub const READ: u32 = 0x01;
    pub const WRITE: u32 = 0x02;
    pub const CREATE: u32 = 0x04;
}

/// One address the server listens on (MS-SRVS 2.2.4.96 SERVER_TRANSPORT_INFO_1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportEntry {
    /// Connections accepted on it and still open.
    pub connections: u32,
    pub name: String,
    /// The transport address: the server's name, space-padded to 16 bytes
    /// as NetBIOS-era clients expect.
    pub address: Vec<u8>,
    /// The listening socket address, e.g. `127.0.0.1:445`.
    pub network_address: String,
    pub domain: String,
}

/// What the srvsvc calls need from the server (sans-IO: plain data).
pub trait SrvsvcBackend {
    fn shares(&self) -> Vec<ShareEntry>;
    fn server_info(&self) -> ServerInfo;
    /// Whether the caller is an anonymous or guest session.
    fn caller_is_anonymous(&self) -> bool;
    /// The sessions, tree connects and opens the caller may see.
    fn sessions(&self) -> Vec<SessionEntry>;
    fn tree_connects(&self) -> Vec<TreeConnectEntry>;
    fn open_files(&self) -> Vec<OpenFileEntry>;
    /// Close the open `id` of [`SrvsvcBackend::open_files`] (the server
    /// end only: its client learns on its next request); false if the
    /// caller sees no such open.
    fn close_file(&self, id: u32) -> bool;
    /// End the sessions the caller sees from `client` (`\\name`) and of
    /// `user` (None: any), except the caller's own; how many ended.
    fn end_sessions(&self, client: Option<&str>, user: Option<&str>) -> usize;
    fn transports(&self) -> Vec<TransportEntry>;
    fn now(&self) -> SystemTime;
    /// How long the server has been running.
    fn uptime(&self) -> Duration;
}

/// MS-SRVS 3.1.4: the operation numbers answered here.
pub mod opnum {
    pub const NETR_CHAR_DEV_ENUM: u16 = 0;
    pub const NETR_CHAR_DEV_Q_ENUM: u16 = 3;
    pub const NETR_CONNECTION_ENUM: u16 = 8;
    pub const NETR_FILE_ENUM: u16 = 9;
    pub const NETR_FILE_GET_INFO: u16 = 10;
    pub const NETR_FILE_CLOSE: u16 = 11;
    pub const NETR_SESSION_ENUM: u16 = 12;
    pub const NETR_SESSION_DEL: u16 = 13;
    pub const NETR_SHARE_ENUM: u16 = 15;
    pub const NETR_SHARE_GET_INFO: u16 = 16;
    pub const NETR_SHARE_CHECK: u16 = 20;
    pub const NETR_SERVER_GET_INFO: u16 = 21;
    pub const NETR_SERVER_DISK_ENUM: u16 = 23;
    pub const NETR_SERVER_TRANSPORT_ENUM: u16 = 26;
    pub const NETR_REMOTE_TOD: u16 = 28;
    pub const NETR_SHARE_ENUM_STICKY: u16 = 36;
}

/// NET_API_STATUS values (MS-ERREF 2.2, MS-SRVS 2.2.2.12) the calls return.
pub mod werror {
    pub const SUCCESS: u32 = 0;
    pub const ACCESS_DENIED: u32 = 5;
    pub const NOT_SUPPORTED: u32 = 50;
    pub const INVALID_PARAMETER: u32 = 87;
    pub const INVALID_LEVEL: u32 = 124;
    pub const NERR_NET_NAME_NOT_FOUND: u32 = 2310;
    pub const NERR_DEVICE_NOT_SHARED: u32 = 2311;
    pub const NERR_CLIENT_NAME_NOT_FOUND: u32 = 2312;
    pub const NERR_FILE_ID_NOT_FOUND: u32 = 2314;
}

/// MS-SRVS 2.2.2.6 PLATFORM_ID_NT.
pub const PLATFORM_ID_NT: u32 = 500;

/// The answer stub of call `opnum`, or the fault status to send instead:
/// nca_op_rng_error for calls not served, RPC_X_BAD_STUB_DATA (MS-ERREF
/// 2.2) for stubs that do not decode. A little-endian stub.
pub fn handle_call(opnum: u16, stub: &[u8], backend: &dyn SrvsvcBackend) -> Result<Vec<u8>, u32> {
    handle_stub(opnum, Stub::little_endian(stub), backend)
}

/// [`handle_call`] for a stub in the request's own representation.
pub fn handle_stub(
    opnum: u16,
    stub: Stub<'_>,
    backend: &dyn SrvsvcBackend,
) -> Result<Vec<u8>, u32> {
    let answer = match opnum {
        opnum::NETR_CHAR_DEV_ENUM => server::char_dev_enum(stub, 0),
        opnum::NETR_CHAR_DEV_Q_ENUM => server::char_dev_enum(stub, 1),
        opnum::NETR_CONNECTION_ENUM => sessions::connection_enum(stub, backend),
        opnum::NETR_FILE_ENUM => sessions::file_enum(stub, backend),
        opnum::NETR_FILE_GET_INFO => sessions::file_get_info(stub, backend),
        opnum::NETR_FILE_CLOSE => sessions::file_close(stub, backend),
        opnum::NETR_SESSION_ENUM => sessions::session_enum(stub, backend),
        opnum::NETR_SESSION_DEL => sessions::session_del(stub, backend),
        opnum::NETR_SHARE_ENUM => share::share_enum(stub, backend, true),
        opnum::NETR_SHARE_GET_INFO => share::share_get_info(stub, backend),
        opnum::NETR_SHARE_CHECK => share::share_check(stub, backend),
        opnum::NETR_SERVER_GET_INFO => server::server_get_info(stub, backend),
        opnum::NETR_SERVER_DISK_ENUM => server::disk_enum(stub, backend),
        opnum::NETR_SERVER_TRANSPORT_ENUM => server::transport_enum(stub, backend),
        opnum::NETR_REMOTE_TOD => server::remote_tod(stub, backend),
        opnum::NETR_SHARE_ENUM_STICKY => share::share_enum(stub, backend, false),
        _ => return Err(fault_status::NCA_OP_RNG_ERROR),
    };
    answer.map_err(|_: NdrError| fault_status::NDR)
}

/// One member of an MS-SRVS info structure: a `[string] wchar_t*`, a DWORD,
/// or a `[size_is(n)] unsigned char*` whose length is a later DWORD.
#[derive(Debug, Clone, Copy)]
enum Field<'a> {
    Str(Option<&'a str>),
    Dword(u32),
    Bytes(Option<&'a [u8]>),
}

use Field::{Bytes, Dword, Str};

/// The shape of an info structure, for reading one a client sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    Dword,
    Bytes,
}

/// C706 chapter 14 (deferral of embedded pointers' referents): in a
/// structure, or an array of them, the referents come after the scalars:
/// first every member of every element, a pointer being its referent id,
/// then the pointees in the same order.
fn write_structs(w: &mut NdrWriter, rows: &[Vec<Field<'_>>]) {
    for row in rows {
        for field in row {
            match field {
                Str(Some(_)) | Bytes(Some(_)) => w.referent(),
                Str(None) | Bytes(None) => w.null_pointer(),
                Dword(v) => w.u32(*v),
            }
        }
    }
    for row in rows {
        for field in row {
            match field {
                Str(Some(s)) => w.wstring(s),
                Bytes(Some(b)) => w.byte_array(b),
                _ => {}
            }
        }
    }
}

/// MS-SRVS 2.2.1.1: `[in, string, unique] SRVSVC_HANDLE ServerName`,
/// read and ignored (one server answers under every name).
fn skip_server_name(r: &mut NdrReader<'_>) -> NdrResult<()> {
    optional_string(r).map(|_| ())
}

/// An `[in, string, unique] wchar_t*` parameter.
fn optional_string(r: &mut NdrReader<'_>) -> NdrResult<Option<String>> {
    if r.unique_pointer()? {
        Ok(Some(r.wstring()?))
    } else {
        Ok(None)
    }
}

/// One info level of an enumeration: its number and its structure's shape
/// (None for a union arm the IDL has but this server does not answer).
type Levels = &'static [(u32, Option<&'static [Kind]>)];

/// The [in] part every Netr*Enum call shares (MS-SRVS 3.1.4.1 and on):
/// a level, an info container, PreferedMaximumLength and a resume handle.
struct EnumRequest {
    level: u32,
    resume_handle: bool,
}

/// Reads the info container (`*_ENUM_STRUCT`), PreferedMaximumLength and
/// ResumeHandle. The container's union has an empty default arm, so for a
/// level the IDL does not know nothing follows the discriminant.
fn read_enum_tail(r: &mut NdrReader<'_>, levels: Levels) -> NdrResult<EnumRequest> {
    let level = r.u32()?;
    if r.u32()? != level {
        return Err(NdrError::Invalid("union discriminant differs from level"));
    }
    if let Some((_, layout)) = levels.iter().find(|(l, _)| *l == level) {
        if r.unique_pointer()? {
            r.u32()?; // EntriesRead
            if r.unique_pointer()? {
                // A client may send entries, which are ignored; one whose
                // shape this server does not model cannot be skipped.
                let layout = layout.ok_or(NdrError::Invalid("entries of an unanswered level"))?;
                skip_struct_array(r, layout)?;
            }
        }
    }
    r.u32()?; // PreferedMaximumLength: every entry goes in one answer.
    let resume_handle = r.unique_pointer()?;
    if resume_handle {
        r.u32()?;
    }
    Ok(EnumRequest {
        level,
        resume_handle,
    })
}

/// Skips a conformant array of structures of shape `layout`.
fn skip_struct_array(r: &mut NdrReader<'_>, layout: &[Kind]) -> NdrResult<()> {
    let count = r.u32()? as usize;
    // Each member is at least 4 bytes: a count the stub cannot hold is
    // refused before anything is allocated from it.
    if count.saturating_mul(layout.len() * 4) > r.remaining() {
        return Err(NdrError::Truncated(r.pos()));
    }
    let mut pointees = Vec::new();
    for _ in 0..count {
        for kind in layout {
            match kind {
                Kind::Dword => {
                    r.u32()?;
                }
                _ => pointees.push((*kind, r.unique_pointer()?)),
            }
        }
    }
    for (kind, present) in pointees {
        match (kind, present) {
            (Kind::Str, true) => {
                r.wstring()?;
            }
            (Kind::Bytes, true) => {
                r.byte_array()?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// What an enumeration found: its rows, or the NET_API_STATUS refusing it.
type Rows<'a> = Result<Vec<Vec<Field<'a>>>, u32>;

/// The [out] part of a Netr*Enum call: the container at `level` (a null
/// one on failure; nothing for a level the IDL does not know), the
/// TotalEntries, the resume handle if one was sent, the status.
fn enum_answer(req: &EnumRequest, levels: Levels, rows: Rows<'_>) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.u32(req.level);
    w.u32(req.level);
    let known = levels.iter().any(|(l, _)| *l == req.level);
    let (total, status) = match &rows {
        Ok(rows) if known => {
            // MS-SRVS 2.2.4.33 and the like: EntriesRead, then the
            // conformant array behind a unique pointer.
            w.referent();
            w.u32(rows.len() as u32);
            if rows.is_empty() {
                w.null_pointer();
            } else {
                w.referent();
                w.u32(rows.len() as u32);
                write_structs(&mut w, rows);
            }
            (rows.len() as u32, werror::SUCCESS)
        }
        Ok(_) => (0, werror::INVALID_LEVEL),
        Err(status) => {
            if known {
                w.null_pointer();
            }
            (0, *status)
        }
    };
    write_enum_tail(&mut w, total, req.resume_handle, status);
    w.into_bytes()
}

/// TotalEntries, the resume handle (0: all was returned) if the client
/// sent one, and the NET_API_STATUS that end every Netr*Enum answer.
fn write_enum_tail(w: &mut NdrWriter, total: u32, resume_handle: bool, status: u32) {
    w.u32(total);
    if resume_handle {
        w.referent();
        w.u32(0);
    } else {
        w.null_pointer();
    }
    w.u32(status);
}

/// `[out, switch_is(Level)]` union of pointers (MS-SRVS 2.2.3.6, 2.2.3.7):
/// the discriminant, then the arm's pointer and its structure (a null one
/// on failure; nothing for a level outside `arms`), then the NET_API_STATUS.
fn info_answer(level: u32, arms: &[u32], fields: Option<Vec<Field<'_>>>, status: u32) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.u32(level);
    match fields {
        Some(fields) => {
            w.referent();
            write_structs(&mut w, &[fields]);
        }
        None if arms.contains(&level) => w.null_pointer(),
        None => {}
    }
    w.u32(status);
    w.into_bytes()
}

/// The answer of a call whose only [out] part is its NET_API_STATUS.
fn status_answer(status: u32) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.u32(status);
    w.into_bytes()
}

/// Why an enumeration is refused before it runs: a level this server does
/// not answer (checked first, as Windows does), or an anonymous caller.
fn refusal(level: u32, answered: &[u32], backend: &dyn SrvsvcBackend) -> Option<u32> {
    if !answered.contains(&level) {
        Some(werror::INVALID_LEVEL)
    } else if backend.caller_is_anonymous() {
        Some(werror::ACCESS_DENIED)
    } else {
        None
    }
}

/// Seconds in a DWORD, saturating.
fn seconds(d: Duration) -> u32 {
    u32::try_from(d.as_secs()).unwrap_or(u32::MAX)
}

#[cfg(test)]
#[path = "share_tests.rs"]
mod share_tests;

#[cfg(test)]
#[path = "server_tests.rs"]
mod server_tests;

#[cfg(test)]
#[path = "sessions_tests.rs"]
mod sessions_tests;
