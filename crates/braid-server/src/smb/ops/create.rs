//! CREATE: MS-SMB2 3.3.5.9.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use braid_fs::{CreateAction, DirectoryRequirement, Disposition, OpenParams, RequestCtx};
use braid_smb_proto::codec::{FileId, Message, WriteLe};
use braid_smb_proto::messages::create::{
    access_mask, context_name, create_action, create_disposition, create_options,
    impersonation_level, oplock_level,
};
use braid_smb_proto::messages::lease::LeaseContext;
use braid_smb_proto::messages::negotiate::dialect;
use braid_smb_proto::messages::{CreateContext, CreateRequest, CreateResponse};
use braid_smb_proto::NtStatus;

use crate::smb::notify;
use crate::smb::session::{DirCursor, Open};
use crate::smb::{blocking, OpResult, Reply, Request};
use crate::state::filetime;

/// Access bits a client may never ask for (MS-SMB2 3.3.5.9: reserved bits).
const INVALID_ACCESS_BITS: u32 = 0x0CE0_FE00;
/// Access that only reads or writes attributes: such opens break no
/// oplock or lease (MS-FSA 2.1.5.1.2).
const STAT_OPEN_ACCESS: u32 = access_mask::SYNCHRONIZE
    | access_mask::FILE_READ_ATTRIBUTES
    | access_mask::FILE_WRITE_ATTRIBUTES;
/// CreateOptions a server refuses rather than ignores.
const NOT_SUPPORTED_OPTIONS: u32 = create_options::CREATE_TREE_CONNECTION
    | create_options::OPEN_BY_FILE_ID
    | create_options::RESERVE_OPFILTER;
/// FILE_ATTRIBUTE_* bits that may be set on create.
const VALID_CREATE_ATTRIBUTES: u32 = 0x0000_7FB7;

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    if let Some(ticket) = req.ticket {
        // A rename or delete sent before this open takes effect first.
        req.conn.file_order.wait_for_set_info_before(ticket).await;
    }
    let r = CreateRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let session = req.session()?.clone();
    let tree = req.tree()?.clone();
    let mut durable_ask = super::create_durable::parse(&r.contexts, req.conn.dialect())?;
    if let Some(rc) = &durable_ask.reconnect {
        // 3.3.5.9.7 / 3.3.5.9.12: no name or access validation, no open.
        // The lease context counts whatever RequestedOplockLevel says.
        let lease_data = r
            .contexts
            .iter()
            .find(|c| c.name.as_slice() == context_name::REQUEST_LEASE)
            .map(|c| &c.data);
        let lease = lease_request(req, oplock_level::LEASE, lease_data)?;
        return super::create_durable::reconnect(req, &session, &tree, rc, lease.as_ref(), &r.name)
            .await;
    }

    // 3.3.5.9: request validation, in the order Windows applies it.
    if r.impersonation_level > impersonation_level::DELEGATE {
        return Err(NtStatus::BAD_IMPERSONATION_LEVEL);
    }
    if r.create_disposition > create_disposition::OVERWRITE_IF {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let opts = r.create_options;
    if opts & create_options::DIRECTORY_FILE != 0 && opts & create_options::NON_DIRECTORY_FILE != 0
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if opts & 0xFF00_0000 != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // MS-SMB2 2.2.13: the server MUST fail these with STATUS_NOT_SUPPORTED
    // (Windows also refuses FILE_CREATE_TREE_CONNECTION so).
    if opts & NOT_SUPPORTED_OPTIONS != 0 {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if r.desired_access & INVALID_ACCESS_BITS != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if r.desired_access == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if r.file_attributes & !VALID_CREATE_ATTRIBUTES != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if r.desired_access & access_mask::ACCESS_SYSTEM_SECURITY != 0 {
        return Err(NtStatus::PRIVILEGE_NOT_HELD);
    }
    if opts & create_options::DELETE_ON_CLOSE != 0
        && braid_fs::map_generic(r.desired_access)
            & (access_mask::DELETE | access_mask::MAXIMUM_ALLOWED)
            == 0
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let Some(share) = tree.share.clone() else {
        return super::pipe::create(req, &r);
    };
    if r.name.starts_with('\\') {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // Braid is one process: one session holding every file descriptor
    // would fail every other client's opens. Creates in flight at once
    // may pass this together, so the cap can be passed by at most the
    // session's outstanding CREATEs.
    if session.opens.len() >= req.conn.config.max_open_files {
        return Err(NtStatus::TOO_MANY_OPENED_FILES);
    }
    // Nor may one client's sessions together (durable opens it left
    // behind included) take them all.
    let client_slot = req
        .conn
        .server
        .smb
        .client_opens
        .take(req.conn.peer.ip())
        .ok_or(NtStatus::TOO_MANY_OPENED_FILES)?;
    // `file:stream[:$DATA]` names a stream of the file; the file service
    // parses and validates it (MS-FSA 2.1.5.1).
    let name = r.name.clone();

    // Every create context name (tag) is at least 4 bytes (MS-SMB2
    // 2.2.13.2); Windows and Samba refuse shorter ones.
    if r.contexts.iter().any(|c| c.name.len() < 4) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let mut allocation_size = None;
    let mut create_eas = Vec::new();
    let mut want_mxac = false;
    let mut creator_sd = None;
    let mut want_qfid = false;
    let mut lease_data = None;
    let mut timewarp = None;
    let mut aapl = None;
    for c in &r.contexts {
        match c.name.as_slice() {
            n if n == context_name::ALLOCATION_SIZE => {
                if c.data.len() < 8 {
                    return Err(NtStatus::INVALID_PARAMETER);
                }
                allocation_size = Some(u64::from_le_bytes(c.data[..8].try_into().unwrap()));
            }
            // MS-SMB2 2.2.13.2.1: extended attributes for the new file.
            n if n == context_name::EA_BUFFER => {
                let list = braid_smb_proto::fscc::file_info::decode_full_ea_list(&c.data)
                    .map_err(|e| e.status())?;
                create_eas = super::convert::eas_of(list)?;
            }
            // MS-SMB2 2.2.13.2.7: the time of the snapshot to open the
            // file in, a FILETIME (Samba refuses any other length).
            n if n == context_name::TIMEWARP_TOKEN => {
                let token: [u8; 8] = c
                    .data
                    .as_slice()
                    .try_into()
                    .map_err(|_| NtStatus::INVALID_PARAMETER)?;
                timewarp = Some(u64::from_le_bytes(token));
            }
            // MS-SMB2 2.2.13.2.2: the security descriptor of a new file.
            n if n == context_name::SD_BUFFER => {
                let mut sd = braid_smb_proto::fscc::security::SecurityDescriptor::decode(&c.data)
                    .map_err(|e| e.status())?;
                let canonical = req.share().is_ok_and(|s| s.canonicalize_acl_flags);
                braid_smb_proto::fscc::access::canonicalize_dacl_flags(&mut sd, canonical);
                creator_sd = Some(sd);
            }
            n if n == context_name::QUERY_MAXIMAL_ACCESS_REQUEST => want_mxac = true,
            n if n == context_name::QUERY_ON_DISK_ID => want_qfid = true,
            n if n == context_name::REQUEST_LEASE => lease_data = Some(&c.data),
            // Only where the share serves Apple's extensions; elsewhere
            // the context is ignored like any unknown one.
            n if n == context_name::AAPL && share.mac.enabled => {
                aapl = Some(super::create_aapl::parse(&c.data)?)
            }
            // 3.3.5.9: other contexts are ignored.
            _ => {}
        }
    }

    // NTFS's quota index is no file of the share (ops/quota.rs).
    if super::quota::names_quota_index(&name) {
        let params = open_params(&r, name, allocation_size);
        return super::quota::create(req, &params, open_mode(opts), want_mxac, want_qfid);
    }

    // MS-SMB2 3.3.5.9.4: the open is of the file as of that snapshot,
    // read-only (braid-fs `snapshot.rs`). Such an open is not made
    // durable: a reconnect would find it by its share's name.
    let share = match timewarp {
        Some(filetime) => {
            durable_ask = Default::default();
            snapshot_share(&share, filetime).await?
        }
        None => share,
    };
    let lease_request = lease_request(req, r.requested_oplock_level, lease_data)?;
    let mut _pending = None;
    if let Some(q) = &durable_ask.v2 {
        let client = req.conn_client_guid();
        if let Some(open) =
            super::create_durable::open_with_create_guid(&session, client, q.create_guid)
        {
            return super::create_durable::replay(
                req,
                open,
                r.requested_oplock_level,
                lease_request.as_ref(),
            );
        }
        if let Some(open) = super::create_durable::preserved_with_create_guid(
            &req.conn.server,
            client,
            q.create_guid,
        ) {
            return super::create_durable::replay_preserved(
                req,
                &session,
                &tree,
                open,
                r.requested_oplock_level,
                lease_request.as_ref(),
            );
        }
        _pending = Some(super::create_durable::PendingCreate::start(
            req,
            &session,
            (q.create_guid, client),
        )?);
        let app = (durable_ask.app_instance, durable_ask.app_version);
        super::create_durable::close_app_instance(req, &share.name, &name, app).await?;
    }

    let params = open_params(&r, name, allocation_size);
    let (user, owner, access) = {
        let identity = session.identity.lock().unwrap();
        (
            identity
                .as_ref()
                .map(|i| i.user.clone())
                .unwrap_or_default(),
            identity.as_ref().and_then(|i| i.owner),
            crate::smb::acl::SmbAccess::new(identity.as_ref(), creator_sd)
                .within(req.tree()?.maximal_access),
        )
    };
    let ctx = RequestCtx {
        access: Some(Arc::new(access)),
        hide_empty_streams: super::create_aapl::hides_empty_streams(&session, &share),
        owner,
        ..RequestCtx::new(user)
    };
    let oplocks = &req.conn.server.smb.oplocks;
    let overwrite_disposition = matches!(
        r.create_disposition,
        create_disposition::SUPERSEDE
            | create_disposition::OVERWRITE
            | create_disposition::OVERWRITE_IF
    );
    let mapped_access = braid_fs::map_generic(r.desired_access);
    let mut new_open = crate::smb::oplock::NewOpen {
        overwrites: overwrite_disposition,
        sharing_violation: false,
        // An overwrite writes data whatever access it asked for.
        stat_open: !overwrite_disposition && mapped_access & !STAT_OPEN_ACCESS == 0,
        lease_stat_open: !overwrite_disposition
            && mapped_access & !(STAT_OPEN_ACCESS | access_mask::READ_CONTROL) == 0,
        lease: lease_request
            .as_ref()
            .map(|l| (req.conn_client_guid(), l.key)),
        own_key: None,
    };
    let mut opened = open_file(req, &share, params.clone(), &ctx, &create_eas).await;
    if opened.as_ref().err() == Some(&NtStatus::SHARING_VIOLATION) {
        // MS-FSA 2.1.5.1.2: a sharing violation first breaks the handle
        // caching of the file's holders, who may be keeping a closed
        // handle open; the open is tried again once they answered.
        let files = req.conn.server.files.clone();
        let fs_share = share.fs.clone();
        let path = params.path.clone();
        if let Ok((id, stream)) = blocking(move || files.file_id_of(&fs_share, &path)).await {
            let state = oplocks.file(&share.name, id, stream);
            new_open.sharing_violation = true;
            if state
                .break_for_new_open(&new_open, || wait_on_break(req))
                .await
            {
                opened = open_file(req, &share, params, &ctx, &create_eas).await;
            }
            new_open.sharing_violation = false;
        }
    }
    let opened = opened?;

    let volatile = req.conn.server.smb.new_file_id();
    let info = opened.info.clone();
    let granted = opened.handle.granted_access();
    let maximal_access = opened.maximal_access;
    let file_id = FileId {
        persistent: volatile,
        volatile,
    };

    // MS-SMB2 3.3.5.9: break conflicting oplocks and leases (waiting
    // asynchronously for their acknowledgment), then grant this open its
    // oplock level or lease.
    // A named stream is its own file for oplocks and leases.
    let oplock_file = oplocks.file(&share.name, info.file_id, opened.handle.stream_key());
    if let Some(id) = &new_open.lease {
        // MS-SMB2 3.3.5.9.8: a lease key names one file.
        let elsewhere = oplocks
            .leases
            .get(id)
            .is_some_and(|l| !std::ptr::eq(l.file.as_ptr(), Arc::as_ptr(&oplock_file)));
        if elsewhere {
            let handle = opened.handle;
            let _ = blocking(move || handle.close()).await;
            return Err(NtStatus::INVALID_PARAMETER);
        }
    }
    new_open.overwrites = overwrite_disposition && opened.action != CreateAction::Created;
    // MS-FSA 2.1.4.12: an open that will delete the file on close takes
    // the other opens' Handle caching away as a rename does: a cached
    // handle would keep the file delete pending (smbtorture
    // smb2.lease.unlink).
    new_open.sharing_violation =
        opts & create_options::DELETE_ON_CLOSE != 0 && opened.action != CreateAction::Created;
    if oplock_file.parked_conflict(&new_open) {
        // MS-SMB2 3.3.5.9: the caching this open needs broken belongs to a
        // persistent open whose client is away.
        let handle = opened.handle;
        let _ = blocking(move || handle.close()).await;
        return Err(NtStatus::FILE_NOT_AVAILABLE);
    }
    oplock_file
        .break_for_new_open(&new_open, || wait_on_break(req))
        .await;
    // Issue 42: other protocols' caching of the file that this open
    // conflicts with (NFS delegations) is broken, and returned before it
    // goes on, through braid-fs's cross-protocol registry. Asked after
    // the open is registered in braid-fs's open table: a delegation
    // granted meanwhile was recorded under that table's file lock
    // (`FileService::grant_unless_smb_open`), so it is found here.
    if !info.is_directory && opened.handle.stream_key() == 0 {
        // RFC 8881 10.4.1: a REMOVE or RENAME of the file conflicts with
        // read delegations as a write does; over SMB both need an open
        // with DELETE access first, so that open recalls them.
        let writes = braid_fs::types::access::FILE_WRITE_DATA
            | braid_fs::types::access::FILE_APPEND_DATA
            | braid_fs::types::access::DELETE;
        let file = braid_fs::caching::CachedFile {
            share: &share.name,
            file_id: info.file_id,
        };
        let change = braid_fs::caching::Change::Open {
            writes: granted & writes != 0,
        };
        req.conn.server.caching.break_for("smb", file, change).await;
    }
    let oplock_key = oplocks.new_key();
    let granted_caching = oplock_file.grant(
        &oplocks.leases,
        crate::smb::oplock::GrantRequest {
            key: oplock_key,
            requested_oplock: r.requested_oplock_level,
            lease: lease_request.as_ref(),
            client_guid: req.conn_client_guid(),
            is_directory: info.is_directory,
            file_id,
            conn: req.conn,
            session: &session,
            stat_open: new_open.stat_open,
        },
    );
    let oplock_level = granted_caching.oplock_level;
    let action = match opened.action {
        CreateAction::Superseded => create_action::SUPERSEDED,
        CreateAction::Opened => create_action::OPENED,
        CreateAction::Created => create_action::CREATED,
        CreateAction::Overwritten => create_action::OVERWRITTEN,
    };
    let durable = super::create_durable::grant(
        req,
        &durable_ask,
        info.is_directory,
        oplock_level,
        granted_caching
            .lease
            .as_ref()
            .map(|l| l.st.lock().unwrap().state),
        &session,
        &share.name,
        share.continuous_availability,
        action,
    );
    let open = Arc::new(Open {
        oplock: Some(crate::smb::oplock::OplockRef {
            file: oplock_file,
            key: oplock_key,
        }),
        persistent_id: volatile,
        volatile_id: volatile,
        tree_id: tree.id.into(),
        is_directory: info.is_directory,
        granted_access: granted,
        handle: opened.handle,
        dir: Mutex::new(DirCursor::default()),
        closed: AtomicBool::new(false),
        close_signal: Default::default(),
        notify_watch: Mutex::new(None),
        host_interest: Mutex::new(None),
        host_watch_tried: AtomicBool::new(false),
        durable: Mutex::new(durable.as_ref().map(|(d, _)| d.clone())),
        create_guid: durable_ask
            .v2
            .map(|q| (q.create_guid, req.conn_client_guid())),
        replay_eligible: AtomicBool::new(durable_ask.v2.is_some()),
        create_reply: Mutex::new(None),
        disconnects: Default::default(),
        renamed: Default::default(),
        lock_sequences: std::sync::Mutex::new(crate::smb::session::NO_LOCK_SEQUENCES),
        mode: open_mode(opts).into(),
        client_slot: Mutex::new(Some(client_slot)),
        persisted: Mutex::new(None),
    });
    // MS-FSA 2.1.4.17: tell watchers of the parent directory (of changes
    // to the file; streams are not reported).
    let is_stream = open.handle.stream_key() != 0;
    if info.is_directory && granted_caching.lease.is_some() {
        req.conn
            .server
            .smb
            .dir_leases
            .register(&share.name, info.file_id, &open);
        crate::smb::host_watch::watch_open(&req.conn.server, &share, &open, Some(info.file_id));
    }
    if !is_stream && opened.action != CreateAction::Opened {
        req.conn.server.smb.dir_leases.break_parent(
            &share,
            &open.handle.path(),
            crate::smb::dir_lease::spared_by(&open),
        );
    }
    match opened.action {
        _ if is_stream => {}
        CreateAction::Created => {
            let f = notify::name_filter(info.is_directory);
            req.conn.server.smb.notify.report(
                &share.name,
                &open.handle.path(),
                notify::action::ADDED,
                f,
            );
        }
        CreateAction::Overwritten | CreateAction::Superseded => {
            let f = notify::filter::SIZE | notify::filter::LAST_WRITE;
            req.conn.server.smb.notify.report(
                &share.name,
                &open.handle.path(),
                notify::action::MODIFIED,
                f,
            );
        }
        CreateAction::Opened => {}
    }
    if let Err(gone) = session.admit_open(&open) {
        super::close::close_opens(vec![open]).await;
        return Err(gone);
    }
    if durable.as_ref().is_some_and(|(d, _)| d.persistent) {
        // MS-SMB2 3.3.5.9.10: a persistent open is in the state store
        // before the client is told it has one.
        let store = req.conn.server.store.clone();
        let saving = open.clone();
        let saved = tokio::task::spawn_blocking(move || {
            crate::smb::persistent::save(&store, &saving)
                .inspect_err(|e| tracing::warn!("state store: persistent open not granted: {e}"))
        })
        .await;
        if !matches!(saved, Ok(Ok(()))) {
            let e = NtStatus::INSUFFICIENT_RESOURCES;
            session.opens.remove(&open.volatile_id);
            super::close::close_opens(vec![open]).await;
            return Err(e);
        }
    }

    let mut contexts = Vec::new();
    if let Some(lease) = &granted_caching.lease {
        contexts.push(CreateContext {
            name: context_name::REQUEST_LEASE.to_vec(),
            data: lease.response_context().encode(),
        });
    }
    if let Some((_, context)) = durable {
        contexts.push(context);
    }
    if want_mxac {
        // MS-SMB2 2.2.14.2.5: QueryStatus then MaximalAccess.
        let mut data = Vec::with_capacity(8);
        data.put_u32(0);
        data.put_u32(maximal_access);
        contexts.push(CreateContext {
            name: context_name::QUERY_MAXIMAL_ACCESS_REQUEST.to_vec(),
            data,
        });
    }
    if let Some(q) = &aapl {
        contexts.push(super::create_aapl::negotiate(
            q,
            &session,
            &share,
            &req.conn.config.macos_model,
        ));
    }
    if want_qfid {
        // MS-SMB2 2.2.14.2.9: DiskFileId (32 bytes), VolumeId.
        let mut data = Vec::with_capacity(32);
        data.put_u64(super::create_aapl::file_id_for(
            &session,
            &share,
            info.file_id,
        ));
        data.put_u64(0);
        data.put_u64(0);
        data.put_u64(0);
        contexts.push(CreateContext {
            name: context_name::QUERY_ON_DISK_ID.to_vec(),
            data,
        });
    }

    let response = create_response(&info, oplock_level, action, file_id, contexts);
    if open
        .replay_eligible
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        *open.create_reply.lock().unwrap() = Some(response.clone());
    }
    let mut reply = Reply::of(&response);
    reply.created_file_id = Some(file_id);
    Ok(reply)
}

/// The file service's parameters for the open a CREATE asks for.
/// An open (or a rename, set_info.rs) waits on the breaks it sent: go
/// async if the connection has room (`Request::go_async`). Without it the
/// request waits synchronously, holding its credit, for at most the 35 s a
/// break may take: failing it would leave the breaks sent for nothing.
pub(crate) fn wait_on_break(req: &mut Request<'_>) {
    let _ = req.go_async();
}

fn open_params(r: &CreateRequest, path: String, allocation_size: Option<u64>) -> OpenParams {
    let opts = r.create_options;
    let disposition = match r.create_disposition {
        create_disposition::SUPERSEDE => Disposition::Supersede,
        create_disposition::OPEN => Disposition::Open,
        create_disposition::CREATE => Disposition::Create,
        create_disposition::OPEN_IF => Disposition::OpenIf,
        create_disposition::OVERWRITE => Disposition::Overwrite,
        _ => Disposition::OverwriteIf,
    };
    let directory = if opts & create_options::DIRECTORY_FILE != 0 {
        DirectoryRequirement::MustBeDirectory
    } else if opts & create_options::NON_DIRECTORY_FILE != 0 {
        DirectoryRequirement::MustNotBeDirectory
    } else {
        DirectoryRequirement::Any
    };
    OpenParams {
        path,
        access: r.desired_access,
        share_access: r.share_access,
        disposition,
        directory,
        delete_on_close: opts & create_options::DELETE_ON_CLOSE != 0,
        write_through: opts & create_options::WRITE_THROUGH != 0,
        attributes: r.file_attributes,
        allocation_size,
    }
}

/// MS-FSA 2.1.5.1: Open.Mode takes these bits of the CreateOptions.
fn open_mode(opts: u32) -> u32 {
    opts & (create_options::WRITE_THROUGH
        | create_options::SEQUENTIAL_ONLY
        | create_options::NO_INTERMEDIATE_BUFFERING
        | create_options::DELETE_ON_CLOSE)
}

/// MS-SMB2 2.2.14: the response for an open with `info`.
pub fn create_response(
    info: &braid_fs::FileInfo,
    oplock_level: u8,
    create_action: u32,
    file_id: FileId,
    contexts: Vec<CreateContext>,
) -> CreateResponse {
    CreateResponse {
        oplock_level,
        flags: 0,
        create_action,
        creation_time: filetime(info.creation_time),
        last_access_time: filetime(info.last_access_time),
        last_write_time: filetime(info.last_write_time),
        change_time: filetime(info.change_time),
        allocation_size: info.allocation_size,
        end_of_file: info.end_of_file,
        file_attributes: info.attributes,
        file_id,
        contexts,
    }
}

/// MS-SMB2 3.3.5.9.8 / 3.3.5.9.11: the lease the open asks for, if it asks
/// with RequestedOplockLevel LEASE and a lease context on 2.1 or 3.x while
/// leases are offered. A version 2 context on 2.1 is taken as version 1.
fn lease_request(
    req: &Request<'_>,
    requested_oplock: u8,
    data: Option<&Vec<u8>>,
) -> Result<Option<LeaseContext>, NtStatus> {
    let dialect = req.conn.negotiated.get().map_or(0, |n| n.dialect);
    if requested_oplock != oplock_level::LEASE
        || dialect < dialect::SMB210
        || !req.conn.config.leases
    {
        return Ok(None);
    }
    let Some(data) = data else {
        return Ok(None);
    };
    let mut ctx = LeaseContext::decode(data).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if ctx.version >= 2 && dialect < dialect::SMB300 {
        ctx.version = 1;
        ctx.parent_key = [0; 16];
        ctx.epoch = 0;
    }
    Ok(Some(ctx))
}

/// `share` as of the snapshot taken at `filetime`; OBJECT_NAME_NOT_FOUND
/// when the share has none then.
async fn snapshot_share(
    share: &Arc<crate::state::Share>,
    filetime: u64,
) -> Result<Arc<crate::state::Share>, NtStatus> {
    let time = braid_fs::snapshot::filetime_to_unix(filetime);
    let fs = share.fs.clone();
    let view = blocking(move || fs.snapshot_view(time)).await?;
    let token = braid_fs::snapshot::gmt_token(time);
    Ok(Arc::new(share.as_of_snapshot(view, &token)))
}

/// Open through the file service, applying the EaBuffer to a file that was
/// created, overwritten or superseded (MS-FSA 2.1.5.1.1 / 2.1.5.1.2.1).
async fn open_file(
    req: &Request<'_>,
    share: &crate::state::Share,
    params: OpenParams,
    ctx: &RequestCtx,
    create_eas: &[braid_fs::ExtendedAttribute],
) -> Result<braid_fs::Opened, NtStatus> {
    let files = req.conn.server.files.clone();
    let fs_share = share.fs.clone();
    let ctx = ctx.clone();
    let create_eas = create_eas.to_vec();
    blocking(move || {
        let o = files.open(&ctx, &fs_share, params)?;
        // MS-FSA 2.1.5.1.1 / 2.1.5.1.2.1: the EaBuffer applies to a file
        // that was created, overwritten or superseded.
        if !create_eas.is_empty() && o.action != CreateAction::Opened {
            if let Err(e) = o.handle.init_eas(&create_eas) {
                let _ = o.handle.close();
                return Err(e);
            }
            return Ok(braid_fs::Opened {
                info: o.handle.info()?,
                ..o
            });
        }
        Ok(o)
    })
    .await
}
