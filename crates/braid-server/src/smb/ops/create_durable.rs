//! CREATE with durable handle contexts: requests (MS-SMB2 3.3.5.9.6,
//! 3.3.5.9.10), reconnects (3.3.5.9.7, 3.3.5.9.12) and replays of a
//! durable create (3.3.5.9.10, SMB2_FLAGS_REPLAY_OPERATION).

use std::sync::Arc;
use std::time::Duration;

use braid_smb_proto::codec::FileId;
use braid_smb_proto::header::flags;
use braid_smb_proto::messages::create::{context_name, create_action, oplock_level};
use braid_smb_proto::messages::durable::{
    DurableReconnect, DurableReconnectV2, DurableRequestV2, DurableResponseV2, FLAG_PERSISTENT,
    V1_RESPONSE_LEN,
};
use braid_smb_proto::messages::lease::LeaseContext;
use braid_smb_proto::messages::negotiate::dialect;
use braid_smb_proto::messages::CreateContext;
use braid_smb_proto::NtStatus;

use crate::smb::durable::{v2_timeout_ms, Durability, V1_TIMEOUT};
use crate::smb::lease::H;
use crate::smb::session::{Open, Session, Tree};
use crate::smb::{blocking, OpResult, Reply, Request};
use crate::state::ServerState;

/// What the create asks for, durability-wise.
#[derive(Default)]
pub struct DurableContexts {
    /// DHnQ (and no reconnect).
    pub v1: bool,
    /// DH2Q.
    pub v2: Option<DurableRequestV2>,
    /// DHnC or DH2C.
    pub reconnect: Option<Reconnect>,
    /// SMB2_CREATE_APP_INSTANCE_ID.
    pub app_instance: Option<[u8; 16]>,
    /// SMB2_CREATE_APP_INSTANCE_VERSION (3.1.1 only): (high, low).
    pub app_version: Option<(u64, u64)>,
}

pub enum Reconnect {
    V1(DurableReconnect),
    V2(DurableReconnectV2),
}

impl Reconnect {
    fn file_id(&self) -> FileId {
        match self {
            Reconnect::V1(r) => r.file_id,
            Reconnect::V2(r) => r.file_id,
        }
    }
}

/// Sort out the durable contexts of a create: which apply on this dialect,
/// and the combinations MS-SMB2 3.3.5.9.7 / 3.3.5.9.10 / 3.3.5.9.12 refuse.
pub fn parse(contexts: &[CreateContext], conn_dialect: u16) -> Result<DurableContexts, NtStatus> {
    let find = |name: &[u8]| contexts.iter().find(|c| c.name.as_slice() == name);
    let v3 = conn_dialect >= dialect::SMB300;
    let dhnq = find(context_name::DURABLE_HANDLE_REQUEST);
    let dhnc = find(context_name::DURABLE_HANDLE_RECONNECT);
    let (dh2q, dh2c) = if v3 {
        (
            find(context_name::DURABLE_HANDLE_REQUEST_V2),
            find(context_name::DURABLE_HANDLE_RECONNECT_V2),
        )
    } else {
        (None, None)
    };
    let bad = |_| NtStatus::INVALID_PARAMETER;
    let mut out = DurableContexts::default();
    if let Some(c) = find(&context_name::APP_INSTANCE_ID) {
        // MS-SMB2 2.2.13.2.13: StructureSize (20), Reserved, AppInstanceId.
        if c.data.len() != 20 || u16::from_le_bytes([c.data[0], c.data[1]]) != 20 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        out.app_instance = Some(c.data[4..20].try_into().unwrap());
    }
    // MS-SMB2 2.2.13.2.15: StructureSize (24), Reserved, Padding, then the
    // version's high and low halves; only valid on 3.1.1.
    match find(&context_name::APP_INSTANCE_VERSION) {
        Some(c) if conn_dialect == dialect::SMB311 => {
            if c.data.len() != 24 || u16::from_le_bytes([c.data[0], c.data[1]]) != 24 {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            let half = |at: usize| u64::from_le_bytes(c.data[at..at + 8].try_into().unwrap());
            out.app_version = Some((half(8), half(16)));
        }
        _ => {}
    }
    if let Some(c) = dhnc {
        if dh2q.is_some() || dh2c.is_some() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        out.reconnect = Some(Reconnect::V1(
            DurableReconnect::decode(&c.data).map_err(bad)?,
        ));
        return Ok(out);
    }
    if let Some(c) = dh2c {
        if dhnq.is_some() || dh2q.is_some() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        out.reconnect = Some(Reconnect::V2(
            DurableReconnectV2::decode(&c.data).map_err(bad)?,
        ));
        return Ok(out);
    }
    if let Some(c) = dh2q {
        if dhnq.is_some() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        out.v2 = Some(DurableRequestV2::decode(&c.data).map_err(bad)?);
        return Ok(out);
    }
    if let Some(c) = dhnq {
        if c.data.len() < 16 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        out.v1 = true;
    }
    Ok(out)
}

/// "Successful Open Initialization" of 3.3.5.9.6 / 3.3.5.9.10: a file (not
/// a directory) opened with a batch oplock or a lease that caches handles
/// is durable; one asking for persistence on a continuously available
/// share is persistent (and durable) whatever it caches. Returns the
/// durability and the response context. `create_action`: what the create
/// answers (MS-SMB2 2.2.14 CreateAction).
#[allow(clippy::too_many_arguments)]
pub fn grant(
    req: &Request<'_>,
    ask: &DurableContexts,
    is_directory: bool,
    oplock: u8,
    lease_state: Option<u32>,
    session: &Session,
    share: &str,
    continuously_available: bool,
    create_action: u32,
) -> Option<(Durability, CreateContext)> {
    if is_directory || !(ask.v1 || ask.v2.is_some()) {
        return None;
    }
    // MS-SMB2 3.3.5.9.10: Open.IsPersistent when the flag is set, the share
    // is CA and the connection negotiated persistent handles.
    let persistent = continuously_available
        && ask.v2.is_some_and(|q| q.flags & FLAG_PERSISTENT != 0)
        && req.conn.negotiated.get().is_some_and(|n| {
            n.server_capabilities
                & braid_smb_proto::messages::negotiate::capabilities::PERSISTENT_HANDLES
                != 0
        });
    let caches_handle = match lease_state {
        Some(state) => state & H != 0,
        None => oplock == oplock_level::BATCH,
    };
    if !caches_handle && !persistent {
        return None;
    }
    let owner = session.user_name();
    let mut d = Durability {
        version: 1,
        persistent: false,
        create_guid: [0; 16],
        timeout: V1_TIMEOUT,
        owner,
        client_guid: req.conn_client_guid(),
        app_instance: ask.app_instance,
        app_version: ask.app_version,
        share: share.to_lowercase(),
        create_action,
    };
    let context = match &ask.v2 {
        Some(q) => {
            let ms = v2_timeout_ms(q.timeout);
            d.version = 2;
            d.persistent = persistent;
            d.create_guid = q.create_guid;
            d.timeout = std::time::Duration::from_millis(ms as u64);
            CreateContext {
                name: context_name::DURABLE_HANDLE_REQUEST_V2.to_vec(),
                data: DurableResponseV2 {
                    timeout: ms,
                    flags: if persistent { FLAG_PERSISTENT } else { 0 },
                }
                .encode(),
            }
        }
        None => CreateContext {
            name: context_name::DURABLE_HANDLE_REQUEST.to_vec(),
            data: vec![0; V1_RESPONSE_LEN],
        },
    };
    Some((d, context))
}

/// MS-SMB2 3.3.5.9.10: a DH2Q whose CreateGuid names a replay-eligible
/// open this client already has. Returns that open, if any.
pub fn open_with_create_guid(
    session: &Session,
    client_guid: [u8; 16],
    guid: [u8; 16],
) -> Option<Arc<Open>> {
    session.opens.values().into_iter().find(|o| {
        !o.closed.load(std::sync::atomic::Ordering::Acquire)
            && o.replay_eligible.load(std::sync::atomic::Ordering::Relaxed)
            && o.create_guid == Some((guid, client_guid))
    })
}

/// MS-SMB2 3.3.5.9.10: a replay-eligible open with this CreateGuid and
/// ClientGuid whose connection was lost (smbtorture smb2.replay.replay5:
/// a client replays its persistent CREATE on a new session after the
/// connection that made it failed).
pub fn preserved_with_create_guid(
    server: &ServerState,
    client_guid: [u8; 16],
    guid: [u8; 16],
) -> Option<Arc<Open>> {
    server.smb.preserved.all().into_iter().find(|o| {
        !o.closed.load(std::sync::atomic::Ordering::Acquire)
            && o.replay_eligible.load(std::sync::atomic::Ordering::Relaxed)
            && o.create_guid == Some((guid, client_guid))
    })
}

/// The replay of a CREATE whose open waits for its client (3.3.5.9.10):
/// without the replay flag STATUS_DUPLICATE_OBJECTID; by another user
/// ACCESS_DENIED; on another share OBJECT_NAME_NOT_FOUND (as a DH2C there
/// is); otherwise the open joins this session and tree connect and the
/// first execution's response is sent again.
pub fn replay_preserved(
    req: &Request<'_>,
    session: &Arc<Session>,
    tree: &Arc<Tree>,
    open: Arc<Open>,
    requested_oplock: u8,
    lease: Option<&LeaseContext>,
) -> OpResult {
    if req.header.flags & flags::REPLAY_OPERATION == 0 {
        return Err(NtStatus::DUPLICATE_OBJECTID);
    }
    let Some((owner, share)) = open
        .durable
        .lock()
        .unwrap()
        .as_ref()
        .map(|d| (d.owner.clone(), d.share.clone()))
    else {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    };
    if owner != session.user_name() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let on_share = tree
        .share
        .as_ref()
        .is_some_and(|s| s.name.to_lowercase() == share);
    if !on_share {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    let reply = replay(req, open.clone(), requested_oplock, lease)?;
    rejoin(req, session, tree, open.persistent_id)?;
    Ok(reply)
}

/// Take the waiting open `persistent_id` back into `session` on `tree`,
/// its breaks going to this connection from now on.
fn rejoin(
    req: &Request<'_>,
    session: &Arc<Session>,
    tree: &Arc<Tree>,
    persistent_id: u64,
) -> Result<Arc<Open>, NtStatus> {
    let preserved = &req.conn.server.smb.preserved;
    let open = preserved
        .take(persistent_id)
        .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    open.tree_id
        .store(tree.id, std::sync::atomic::Ordering::Relaxed);
    if let Some(o) = &open.oplock {
        o.file.reconnect(o.key, req.conn, session);
    }
    if let Err(gone) = session.admit_open(&open) {
        // The session or tree ended meanwhile: the open waits for the
        // next reconnect, as before this one.
        preserved.preserve(open);
        return Err(gone);
    }
    Ok(open)
}

/// A durable v2 CREATE in progress, registered by its CreateGuid until it
/// completes (dropped).
pub struct PendingCreate {
    session: Arc<Session>,
    key: Option<([u8; 16], [u8; 16])>,
}

impl PendingCreate {
    /// Register a CREATE with this (CreateGuid, ClientGuid). A replay
    /// (SMB2_FLAGS_REPLAY_OPERATION) of a CREATE still in progress — its
    /// first execution waiting for an oplock or lease break, on this
    /// channel or a lost one — fails with STATUS_FILE_NOT_AVAILABLE at once,
    /// as Samba answers; the client replays again later and then gets the
    /// open the first execution made (smbtorture smb2.replay.dhv2-pending*).
    /// Windows answers ACCESS_DENIED, or leaves the replay waiting.
    pub fn start(
        req: &Request<'_>,
        session: &Arc<Session>,
        key: ([u8; 16], [u8; 16]),
    ) -> Result<PendingCreate, NtStatus> {
        let mut pending = session.pending_creates.lock().unwrap();
        if pending.contains(&key) {
            if req.header.flags & flags::REPLAY_OPERATION != 0 {
                return Err(NtStatus::FILE_NOT_AVAILABLE);
            }
            // Not a replay: the first execution keeps the registration.
            return Ok(PendingCreate {
                session: session.clone(),
                key: None,
            });
        }
        pending.insert(key);
        Ok(PendingCreate {
            session: session.clone(),
            key: Some(key),
        })
    }
}

impl Drop for PendingCreate {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.session.pending_creates.lock().unwrap().remove(&key);
        }
    }
}

/// A replayed durable create (3.3.5.9.10): the open the first execution
/// made, answered as it was then (its lease state as it is now, its oplock
/// no more than the replay asks for); without the replay flag, or asking
/// for a different kind of caching, it is refused.
pub fn replay(
    req: &Request<'_>,
    open: Arc<Open>,
    requested_oplock: u8,
    lease: Option<&LeaseContext>,
) -> OpResult {
    if req.header.flags & flags::REPLAY_OPERATION == 0 {
        return Err(NtStatus::DUPLICATE_OBJECTID);
    }
    let mut resp = open
        .create_reply
        .lock()
        .unwrap()
        .clone()
        .ok_or(NtStatus::DUPLICATE_OBJECTID)?;
    let held = open.oplock.as_ref().and_then(|o| o.file.lease_of(o.key));
    match (&held, lease) {
        (Some(_), None) | (None, Some(_)) => return Err(NtStatus::ACCESS_DENIED),
        (Some(l), Some(c)) if l.id.1 != c.key => return Err(NtStatus::ACCESS_DENIED),
        (Some(l), Some(_)) => {
            for c in resp.contexts.iter_mut() {
                if c.name.as_slice() == context_name::REQUEST_LEASE {
                    c.data = l.response_context().encode();
                }
            }
        }
        (None, None) => {
            resp.oplock_level = resp.oplock_level.min(requested_oplock);
            if resp.oplock_level != oplock_level::BATCH {
                // Durability needs a batch oplock: not granted to this ask.
                resp.contexts
                    .retain(|c| c.name.as_slice() != context_name::DURABLE_HANDLE_REQUEST_V2);
            }
        }
    }
    let mut reply = Reply::of(&resp);
    reply.created_file_id = Some(resp.file_id);
    Ok(reply)
}

/// The response a replay of the create that made a restored open gets
/// (3.3.5.9.10, `persistent.rs`): the first one was sent by the process
/// that stopped, so it is made again from the open as restored: its file
/// as it was reopened, its oplock or lease, the durable context granted
/// then (the open is a version 2 one: only those are replayed) and the
/// create's CreateAction.
pub fn restored_create_reply(
    info: &braid_fs::FileInfo,
    d: &Durability,
    file_id: FileId,
    lease: Option<&crate::smb::lease::Lease>,
    oplock: u8,
) -> braid_smb_proto::messages::CreateResponse {
    let mut contexts = Vec::new();
    let oplock = match lease {
        Some(l) => {
            contexts.push(CreateContext {
                name: context_name::REQUEST_LEASE.to_vec(),
                data: l.response_context().encode(),
            });
            oplock_level::LEASE
        }
        None => oplock,
    };
    contexts.push(CreateContext {
        name: context_name::DURABLE_HANDLE_REQUEST_V2.to_vec(),
        data: DurableResponseV2 {
            timeout: d.timeout.as_millis() as u32,
            flags: if d.persistent { FLAG_PERSISTENT } else { 0 },
        }
        .encode(),
    });
    super::create::create_response(info, oplock, d.create_action, file_id, contexts)
}

/// How long a reconnect waits for an open its client has left but whose
/// old connection still looks alive here (its reader has not yet seen the
/// end of the stream), and for one between its session and the table.
const LOSS_NOT_SEEN_WAIT: Duration = Duration::from_millis(250);
const IN_TRANSIT_WAIT: Duration = Duration::from_millis(50);

/// The disconnected durable open `persistent`. A client that drops a
/// connection and reconnects at once (smbtorture's durable tests do, in a
/// few milliseconds) can send its DHnC/DH2C before this server has torn
/// the old connection down: the open is still in its session then, and a
/// moment later in the preserved table. Wait that moment out rather than
/// answer OBJECT_NAME_NOT_FOUND for an open about to be reconnectable; an
/// open still held by a live connection is refused after the wait, as
/// MS-SMB2 3.3.5.9.7 requires.
async fn preserved_or_lost(server: &ServerState, persistent: u64) -> Option<Arc<Open>> {
    let start = tokio::time::Instant::now();
    loop {
        if let Some(open) = server.smb.preserved.get(persistent) {
            return Some(open);
        }
        let held = server
            .smb
            .sessions
            .values()
            .into_iter()
            .any(|s| s.opens.contains(&persistent));
        let limit = if held {
            LOSS_NOT_SEEN_WAIT
        } else {
            IN_TRANSIT_WAIT
        };
        if start.elapsed() >= limit {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// MS-SMB2 3.3.5.9.7 / 3.3.5.9.12: reestablish a disconnected durable open
/// on this session and tree connect.
pub async fn reconnect(
    req: &Request<'_>,
    session: &Arc<Session>,
    tree: &Arc<Tree>,
    rc: &Reconnect,
    lease_ctx: Option<&LeaseContext>,
    name: &str,
) -> OpResult {
    let not_found = NtStatus::OBJECT_NAME_NOT_FOUND;
    let server = &req.conn.server;
    let id = rc.file_id();
    let open = preserved_or_lost(server, id.persistent)
        .await
        .ok_or(not_found)?;
    let d = open.durable.lock().unwrap().clone().ok_or(not_found)?;
    let lease = open.oplock.as_ref().and_then(|o| o.file.lease_of(o.key));
    match (&lease, lease_ctx) {
        (Some(_), None) | (None, Some(_)) => return Err(not_found),
        (Some(l), Some(c)) if l.id.0 != req.conn_client_guid() || l.id.1 != c.key => {
            return Err(not_found)
        }
        (Some(_), Some(_)) if !same_name(&open.handle.path(), name) => {
            return Err(NtStatus::INVALID_PARAMETER)
        }
        _ => {}
    }
    // A DH2C names the create it reconnects; a DHnC may reconnect either
    // version (a version 1 open's CreateGuid is zero).
    if let Reconnect::V2(r) = rc {
        if r.create_guid != d.create_guid {
            return Err(not_found);
        }
        // MS-SMB2 3.3.5.9.12: a persistent open is reconnected only by a
        // DH2C that says so.
        if d.persistent && r.flags & FLAG_PERSISTENT == 0 {
            return Err(not_found);
        }
    }
    let user = session.user_name();
    if user != d.owner {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let on_share = tree
        .share
        .as_ref()
        .is_some_and(|s| s.name.to_lowercase() == d.share);
    if !on_share {
        return Err(not_found);
    }
    let open = rejoin(req, session, tree, id.persistent)?;
    tracing::debug!(
        session = session.id,
        file = id.persistent,
        "durable open reconnected"
    );
    // The response carries no durable context: the open stays durable.
    reply_for(&open).await
}

/// MS-SMB2 3.3.5.9.13: an open of the same path on the same share with the
/// same AppInstanceId, made by another client (a failed-over application
/// instance), is closed before this create runs; unless both say their
/// version (3.1.1) and the open's is not older than the create's, when the
/// create fails with STATUS_FILE_FORCED_CLOSED and the open stays.
pub async fn close_app_instance(
    req: &Request<'_>,
    share: &str,
    name: &str,
    (app, version): (Option<[u8; 16]>, Option<(u64, u64)>),
) -> Result<(), NtStatus> {
    let Some(app) = app else {
        return Ok(());
    };
    let server = &req.conn.server;
    let client = req.conn_client_guid();
    let share = share.to_lowercase();
    let matches = |o: &Arc<Open>| {
        o.durable.lock().unwrap().as_ref().is_some_and(|d| {
            d.app_instance == Some(app) && d.client_guid != client && d.share == share
        }) && same_name(&o.handle.path(), name)
    };
    // (high, low) compared as one 128-bit number.
    let not_older = |o: &Arc<Open>| {
        let open_version = o
            .durable
            .lock()
            .unwrap()
            .as_ref()
            .and_then(|d| d.app_version);
        matches!((open_version, version), (Some(had), Some(asked)) if had >= asked)
    };
    let newer_held = server.smb.preserved.any(|o| matches(o) && not_older(o))
        || server
            .smb
            .sessions
            .values()
            .iter()
            .any(|s| s.opens.any(|o| matches(o) && not_older(o)));
    if newer_held {
        return Err(NtStatus::FILE_FORCED_CLOSED);
    }
    let mut doomed = server.smb.preserved.take_where(matches);
    for s in server.smb.sessions.values() {
        for o in s.opens.drain_where(matches) {
            doomed.push(o);
        }
    }
    if !doomed.is_empty() {
        tracing::debug!(
            count = doomed.len(),
            "opens of a previous application instance closed"
        );
        let _ = blocking(move || {
            doomed.iter().for_each(crate::smb::durable::close_now);
            Ok(())
        })
        .await;
    }
    Ok(())
}

/// Request names and open paths compare without regard to case or the
/// separator's direction.
fn same_name(path: &str, name: &str) -> bool {
    let norm = |s: &str| {
        s.trim_matches(['\\', '/'])
            .replace('/', "\\")
            .to_lowercase()
    };
    norm(path) == norm(name)
}

/// The CREATE response for a reconnected open: as it is now, without a
/// durable context (the open stays durable).
async fn reply_for(open: &Arc<Open>) -> OpResult {
    let handle = open.handle.clone();
    let info = blocking(move || handle.info()).await?;
    let mut contexts = Vec::new();
    let mut oplock = oplock_level::NONE;
    if let Some(o) = &open.oplock {
        match o.file.lease_of(o.key) {
            Some(lease) => {
                oplock = oplock_level::LEASE;
                contexts.push(CreateContext {
                    name: context_name::REQUEST_LEASE.to_vec(),
                    data: lease.response_context().encode(),
                });
            }
            None => oplock = o.file.level_of(o.key),
        }
    }
    let file_id = FileId {
        persistent: open.persistent_id,
        volatile: open.volatile_id,
    };
    let response =
        super::create::create_response(&info, oplock, create_action::OPENED, file_id, contexts);
    let mut reply = Reply::of(&response);
    reply.created_file_id = Some(file_id);
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(name: &[u8], data: Vec<u8>) -> CreateContext {
        CreateContext {
            name: name.to_vec(),
            data,
        }
    }

    #[test]
    fn v1_and_v2_requests_together_are_refused() {
        let both = [
            ctx(context_name::DURABLE_HANDLE_REQUEST, vec![0; 16]),
            ctx(
                context_name::DURABLE_HANDLE_REQUEST_V2,
                DurableRequestV2::default().encode(),
            ),
        ];
        assert_eq!(
            parse(&both, dialect::SMB311).err(),
            Some(NtStatus::INVALID_PARAMETER)
        );
        // Before 3.0 the version 2 context is not looked at.
        assert!(parse(&both, dialect::SMB210).unwrap().v1);
    }

    #[test]
    fn a_reconnect_wins_over_a_v1_request() {
        let id = FileId {
            persistent: 9,
            volatile: 9,
        };
        let list = [
            ctx(context_name::DURABLE_HANDLE_REQUEST, vec![0; 16]),
            ctx(
                context_name::DURABLE_HANDLE_RECONNECT,
                DurableReconnect { file_id: id }.encode(),
            ),
        ];
        let p = parse(&list, dialect::SMB300).unwrap();
        assert!(matches!(p.reconnect, Some(Reconnect::V1(r)) if r.file_id == id));
        assert!(!p.v1);
    }

    #[test]
    fn names_compare_loosely() {
        assert!(same_name("dir/File.txt", "DIR\\file.TXT"));
        assert!(!same_name("dir/a", "dir\\b"));
    }
}
