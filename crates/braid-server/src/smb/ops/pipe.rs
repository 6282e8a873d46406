//! Named pipes on IPC$ (MS-SMB2 3.3.5.9, 3.3.5.12, 3.3.5.13, 3.3.5.15.1):
//! `srvsvc`, so that `smbclient -L` and Windows can list the shares, and
//! `lsarpc` (or `lsass`), so that ACL tools show names for SIDs. The
//! DCE/RPC itself is sans-IO (`braid_smb_proto::dcerpc`); this file only
//! carries bytes between SMB2 requests and the pipe's endpoint.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use braid_smb_proto::auth::{AuthOutcome, NtlmServer};
use braid_smb_proto::codec::FileId;
use braid_smb_proto::dcerpc::auth::RpcAuthBackend;
use braid_smb_proto::dcerpc::lsa::LsaBackend;
use braid_smb_proto::dcerpc::{PipeBackend, PipeEndpoint, PipeError, SrvsvcBackend};
use braid_smb_proto::messages::create::create_action;
use braid_smb_proto::messages::{
    CloseResponse, CreateRequest, CreateResponse, IoctlRequest, ReadResponse, WriteResponse,
};
use braid_smb_proto::NtStatus;

use crate::smb::conn::Connection;
use crate::smb::lsa::LsaView;
use crate::smb::session::Session;
use crate::smb::srvsvc::SrvsvcView;
use crate::smb::{OpResult, Reply, Request};
use crate::state::ServerState;

/// FILE_ATTRIBUTE_NORMAL: what Windows reports for a pipe open.
const ATTRIBUTE_NORMAL: u32 = 0x80;
/// The most a pipe keeps unread or half-received per open is bounded by
/// the endpoint itself; this bounds one READ's answer.
const MAX_PIPE_READ: u32 = 64 * 1024;
/// Pipe opens one session may hold: each may buffer about a MiB, and a
/// client lists shares over one or two.
const MAX_PIPES_PER_SESSION: usize = 64;

/// One open of a named pipe.
pub struct PipeOpen {
    pub persistent_id: u64,
    pub volatile_id: u64,
    pub tree_id: u32,
    endpoint: Mutex<PipeEndpoint>,
    /// Woken when an answer is queued, for READs waiting on an empty pipe.
    output_ready: Notify,
    /// Cancelled when the open ends (CLOSE, TREE_DISCONNECT, LOGOFF): a
    /// READ still waiting then ends STATUS_PIPE_BROKEN.
    closed: CancellationToken,
}

impl PipeOpen {
    /// The open ends: waiting READs are answered STATUS_PIPE_BROKEN.
    pub fn close(&self) {
        self.closed.cancel();
    }
}

/// Remove a session's pipe opens that `which` selects and end each of them.
pub fn close_pipes(session: &Session, which: impl Fn(&PipeOpen) -> bool) {
    let mut closed = Vec::new();
    session.pipes.lock().unwrap().retain(|_, p| {
        let keep = !which(p);
        if !keep {
            closed.push(p.clone());
        }
        keep
    });
    for pipe in closed {
        pipe.close();
    }
}

/// The pipe name as opened. Over SMB2 a pipe is named alone (`srvsvc`):
/// like Windows, `\srvsvc` and `PIPE\srvsvc` name no pipe (the SMB1
/// spelling `\PIPE\srvsvc` never reaches an SMB2 server).
fn pipe_name(name: &str) -> String {
    name.to_lowercase()
}

/// MS-SMB2 3.3.5.9: a CREATE on IPC$ opens a named pipe, or finds none.
pub fn create(req: &mut Request<'_>, r: &CreateRequest) -> OpResult {
    let session = req.session()?.clone();
    let tree = req.tree()?.clone();
    let name = pipe_name(&r.name);
    let endpoint = PipeEndpoint::open(&name).ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    // Name lookups tell which accounts exist: for authenticated users only.
    if matches!(name.as_str(), "lsarpc" | "lsass") && session.is_anonymous_or_guest() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let volatile = req.conn.server.smb.new_file_id();
    let file_id = FileId {
        persistent: volatile,
        volatile,
    };
    let mut pipes = session.pipes.lock().unwrap();
    if pipes.len() >= MAX_PIPES_PER_SESSION {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    pipes.insert(
        volatile,
        Arc::new(PipeOpen {
            persistent_id: volatile,
            volatile_id: volatile,
            tree_id: tree.id,
            endpoint: Mutex::new(endpoint),
            output_ready: Notify::new(),
            closed: CancellationToken::new(),
        }),
    );
    drop(pipes);
    let mut reply = Reply::of(&CreateResponse {
        oplock_level: 0,
        flags: 0,
        create_action: create_action::OPENED,
        creation_time: 0,
        last_access_time: 0,
        last_write_time: 0,
        change_time: 0,
        allocation_size: 4096,
        end_of_file: 0,
        file_attributes: ATTRIBUTE_NORMAL,
        file_id,
        contexts: Vec::new(),
    });
    reply.created_file_id = Some(file_id);
    Ok(reply)
}

/// The pipe open `id` names on this tree (the related-compound id included).
fn find(req: &Request<'_>, id: FileId) -> Result<Arc<PipeOpen>, NtStatus> {
    let id = if id == FileId::RELATED {
        req.related_file_id.ok_or(NtStatus::FILE_CLOSED)?
    } else {
        id
    };
    let pipe = req
        .session()?
        .pipes
        .lock()
        .unwrap()
        .get(&id.volatile)
        .cloned()
        .ok_or(NtStatus::FILE_CLOSED)?;
    if pipe.persistent_id != id.persistent || pipe.tree_id != req.tree()?.id {
        return Err(NtStatus::FILE_CLOSED);
    }
    *req.used_file_id.lock().unwrap() = Some(id);
    Ok(pipe)
}

/// The server's state as the pipes' calls see it for one caller.
struct CallerView<'a> {
    srvsvc: SrvsvcView<'a>,
    lsa: LsaView<'a>,
    bind: BindAuth<'a>,
}

impl PipeBackend for CallerView<'_> {
    fn srvsvc(&self) -> &dyn SrvsvcBackend {
        &self.srvsvc
    }
    fn lsa(&self) -> &dyn LsaBackend {
        &self.lsa
    }
    fn rpc_auth(&self) -> Option<&dyn RpcAuthBackend> {
        Some(&self.bind)
    }
}

/// What an authenticated bind (MS-RPCE 3.3.1.5.2) is checked against: the
/// users SESSION_SETUP authenticates, through the same logon throttle, and
/// only the account the SMB session is logged on as (the calls run as it).
struct BindAuth<'a> {
    state: &'a ServerState,
    conn: &'a Connection,
    caller: &'a Session,
    /// The last lookup was refused unchecked (the throttle held it, or it
    /// named an account other than the session's): no password was tried,
    /// so no failure is counted.
    unchecked: std::cell::Cell<bool>,
}

impl BindAuth<'_> {
    /// Whether `user` is the SMB session's own account (never an
    /// anonymous or guest session's): the only one a bind may name.
    fn is_session_user(&self, user: &str) -> bool {
        self.caller
            .identity
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|i| !i.anonymous && !i.guest && i.user.eq_ignore_ascii_case(user))
    }
}

impl RpcAuthBackend for BindAuth<'_> {
    fn ntlm_server(&self) -> NtlmServer {
        self.state.ntlm_server()
    }

    /// Another account's hash is never looked up: a bind that names one
    /// fails before any password is checked, so a pipe cannot be used to
    /// guess other users' passwords (and needs no `logon_failure_delay`:
    /// the session's own user has already proved theirs).
    fn nt_hash(&self, user: &str, _domain: &str) -> Option<[u8; 16]> {
        if !self.is_session_user(user) {
            self.unchecked.set(true);
            return None;
        }
        let now = std::time::Instant::now();
        let peer = self.conn.peer.ip();
        let blocked = self.state.smb.logon_throttle.blocked(peer, Some(user), now);
        self.unchecked.set(blocked);
        if blocked {
            return None;
        }
        self.state.users.current().nt_hash(user)
    }

    fn accepts(&self, outcome: &AuthOutcome) -> bool {
        self.is_session_user(&outcome.user)
    }

    fn logon_failed(&self, user: &str) {
        if self.unchecked.get() {
            return;
        }
        let now = std::time::Instant::now();
        tracing::info!(conn = self.conn.id, peer = %self.conn.peer, "RPC bind: logon failure");
        self.state
            .smb
            .logon_throttle
            .failed(self.conn.peer.ip(), user, now);
    }
}

/// Feed what the client wrote to the pipe's endpoint, then take up to
/// `answer_max` bytes of the answer at once (a transceive), so that no
/// READ waiting on the pipe takes it first. READs still waiting are woken
/// for what is left.
fn feed(
    req: &Request<'_>,
    pipe: &PipeOpen,
    data: &[u8],
    answer_max: Option<usize>,
) -> Result<Option<(NtStatus, Vec<u8>)>, NtStatus> {
    let session = req.session()?;
    let state = &req.conn.server;
    let backend = CallerView {
        srvsvc: SrvsvcView {
            state,
            caller: session,
        },
        lsa: LsaView {
            state,
            caller: session,
        },
        bind: BindAuth {
            state,
            conn: req.conn,
            caller: session,
            unchecked: Default::default(),
        },
    };
    let mut endpoint = pipe.endpoint.lock().unwrap();
    let written = endpoint.write(data, &backend);
    if written.is_err() && endpoint.is_disconnected() {
        pipe.output_ready.notify_waiters();
    }
    written.map_err(|e| match e {
        // The association ended (a protocol or security failure), as
        // Samba ends the pipe (dcesrv_fault_disconnect).
        PipeError::Disconnected => NtStatus::PIPE_DISCONNECTED,
        _ => NtStatus::INVALID_PARAMETER,
    })?;
    let answer = answer_max.map(|max| drain(&mut endpoint, max));
    // READs waiting wake for the answer, or to find the association
    // ended (they then end STATUS_PIPE_DISCONNECTED).
    if endpoint.has_output() || endpoint.is_disconnected() {
        pipe.output_ready.notify_waiters();
    }
    Ok(answer)
}

/// Up to `max` bytes of the pipe's answer; STATUS_BUFFER_OVERFLOW when the
/// answer's message has more (message-mode pipes, MS-FSCC 2.3.49).
fn drain(endpoint: &mut PipeEndpoint, max: usize) -> (NtStatus, Vec<u8>) {
    let (data, more) = endpoint.read(max);
    let status = if more {
        NtStatus::BUFFER_OVERFLOW
    } else {
        NtStatus::SUCCESS
    };
    (status, data)
}

/// MS-SMB2 3.3.5.13: a WRITE to a pipe hands a request to its endpoint.
pub fn write(req: &Request<'_>, file_id: FileId, data: &[u8]) -> OpResult {
    let pipe = find(req, file_id)?;
    feed(req, &pipe, data, None)?;
    Ok(Reply::of(&WriteResponse {
        count: data.len() as u32,
        remaining: 0,
    }))
}

/// MS-SMB2 3.3.5.12: a READ of a pipe takes its pending answer. On an
/// empty pipe it waits, as a blocking-mode pipe's read does on Windows
/// (MS-FSCC 2.3.49): for an answer, for the pipe's end (CLOSE,
/// TREE_DISCONNECT or LOGOFF: STATUS_PIPE_BROKEN), for the association's
/// end (STATUS_PIPE_DISCONNECTED) or for a CANCEL. Inside
/// a compound, where only the last request may wait, it answers
/// STATUS_PIPE_EMPTY at once.
pub async fn read(req: &mut Request<'_>, file_id: FileId, length: u32) -> OpResult {
    let pipe = find(req, file_id)?;
    let max = length.min(MAX_PIPE_READ) as usize;
    let mut waiting = None;
    loop {
        let ready = pipe.output_ready.notified();
        tokio::pin!(ready);
        ready.as_mut().enable();
        {
            let mut endpoint = pipe.endpoint.lock().unwrap();
            if endpoint.has_output() {
                let (status, data) = drain(&mut endpoint, max);
                return Ok(Reply::with_status(
                    status,
                    &ReadResponse {
                        data,
                        ..Default::default()
                    },
                ));
            }
            // MS-RPCE 3.3.1.5.1: a protocol or security failure ended the
            // association and its fault has been read: nothing will ever
            // be answered, so a READ must not wait for it (it would until
            // the client cancels). STATUS_PIPE_DISCONNECTED, as a WRITE
            // to the pipe gets, and as a read of a pipe whose server end
            // disconnected ends on Windows.
            if endpoint.is_disconnected() {
                return Err(NtStatus::PIPE_DISCONNECTED);
            }
        }
        if waiting.is_none() {
            if req.in_compound {
                return Err(NtStatus::PIPE_EMPTY);
            }
            let cancel = req.cancellable();
            req.go_async()?;
            waiting = Some(cancel);
        }
        let cancel = waiting.as_ref().expect("set above");
        // The pipe's end wins over the cancel a logoff sends after it.
        tokio::select! {
            biased;
            _ = pipe.closed.cancelled() => return Err(NtStatus::PIPE_BROKEN),
            _ = cancel.cancelled() => return Err(NtStatus::CANCELLED),
            _ = &mut ready => {}
        }
    }
}

/// MS-SMB2 3.3.5.15.1 FSCTL_PIPE_TRANSCEIVE: write a request, read its
/// answer, in one round trip.
pub fn transceive(req: &Request<'_>, r: &IoctlRequest) -> OpResult {
    let pipe = find(req, r.file_id)?;
    let answer = feed(req, &pipe, &r.input, Some(r.max_output_response as usize))?;
    let (status, output) = answer.expect("asked for");
    Ok(super::ioctl::answer(r, status, output))
}

/// MS-SMB2 3.3.5.10: CLOSE of a pipe open. None when `file_id` names no
/// pipe (the caller then looks for a file open).
pub fn close(req: &Request<'_>, file_id: FileId) -> Option<OpResult> {
    let pipe = find(req, file_id).ok()?;
    req.session()
        .ok()?
        .pipes
        .lock()
        .unwrap()
        .remove(&pipe.volatile_id)?;
    pipe.close();
    Some(Ok(Reply::of(&CloseResponse::default())))
}

/// Whether this request's tree is IPC$.
pub fn on_ipc(req: &Request<'_>) -> bool {
    req.tree.as_ref().is_some_and(|t| t.share.is_none())
}
