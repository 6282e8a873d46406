//! TREE_CONNECT: MS-SMB2 3.3.5.7.

use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::tree_connect::share_type;
use braid_smb_proto::messages::{TreeConnectRequest, TreeConnectResponse};
use braid_smb_proto::NtStatus;

use tracing::debug;

use crate::smb::{OpResult, Reply, Request};

/// MS-SMB2 2.2.10 SMB2_SHAREFLAG_ENCRYPT_DATA.
const SHI1005_FLAGS_ENCRYPT_DATA: u32 = 0x0000_8000;
/// MS-SMB2 2.2.10 SMB2_SHAREFLAG_ACCESS_BASED_DIRECTORY_ENUM.
const SHI1005_FLAGS_ACCESS_BASED_DIRECTORY_ENUM: u32 = 0x0000_0800;

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = TreeConnectRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let session = req.session()?;
    // "\\server\share": the share is the last component.
    let path = r.path.trim_end_matches('\\');
    let name = match path.strip_prefix("\\\\") {
        Some(rest) => match rest.split_once('\\') {
            Some((_, share)) if !share.is_empty() && !share.contains('\\') => share,
            _ => return Err(NtStatus::BAD_NETWORK_NAME),
        },
        None => return Err(NtStatus::BAD_NETWORK_NAME),
    };
    let (share, kind) = if name.eq_ignore_ascii_case("IPC$") {
        (None, share_type::PIPE)
    } else {
        // A configured share, or the user's own (`homes.rs`); one not
        // served over SMB (`protocols`) is as unknown.
        let user = session
            .identity
            .lock()
            .unwrap()
            .as_ref()
            .filter(|i| !i.anonymous && !i.guest)
            .map(|i| i.user.clone());
        let server = req.conn.server.clone();
        let name_owned = name.to_string();
        let found = crate::smb::blocking(move || {
            Ok::<_, braid_fs::FsError>(server.smb_share_for(&name_owned, user.as_deref()))
        })
        .await?;
        match found {
            Some(s) => (Some(s), share_type::DISK),
            None => return Err(NtStatus::BAD_NETWORK_NAME),
        }
    };
    // MS-SMB2 3.3.5.7: a share that requires encryption refuses sessions
    // that cannot encrypt.
    let encrypt = share.as_ref().is_some_and(|s| s.encrypt) || req.conn.config.encrypt;
    if encrypt && session.encryption().is_none() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // Share-level access (`share_access.rs`): who may connect, and the
    // most any open on this tree may be granted. IPC$ is everyone's.
    let maximal_access = match &share {
        Some(s) if !s.access.hosts.admits(req.conn.peer.ip()) => {
            debug!(peer = %req.conn.peer, share = %s.name, "tree connect refused: hosts_allow/hosts_deny");
            return Err(NtStatus::ACCESS_DENIED);
        }
        Some(s) => {
            let identity = session.identity.lock().unwrap().clone();
            match s.access.maximal_access(identity.as_ref()) {
                Some(access) => access,
                None => return Err(NtStatus::ACCESS_DENIED),
            }
        }
        None => crate::smb::share_access::FULL_ACCESS,
    };
    let mut share_flags = 0;
    if encrypt {
        share_flags |= SHI1005_FLAGS_ENCRYPT_DATA;
    }
    if share.as_ref().is_some_and(|s| s.access_based_enumeration) {
        share_flags |= SHI1005_FLAGS_ACCESS_BASED_DIRECTORY_ENUM;
    }
    // MS-SMB2 3.3.5.7: a tree connect the server cannot allocate.
    let tree = session
        .add_tree(share, maximal_access, encrypt)
        .ok_or(NtStatus::INSUFFICIENT_RESOURCES)?;
    if tree.share.as_ref().is_some_and(|s| s.is_retired()) {
        // A reload ended the share while this ran (`reload.rs`), after
        // putting what now has the name in its place: look it up again.
        session.remove_tree(tree.id);
        return Box::pin(handle(req)).await;
    }
    // MS-SMB2 3.3.5.7: SMB2_SHARE_CAP_CONTINUOUS_AVAILABILITY for a share
    // with Share.IsCA, on 3.x.
    let dialect = req.conn.negotiated.get().map_or(0, |n| n.dialect);
    let capabilities = if dialect >= braid_smb_proto::messages::negotiate::dialect::SMB300
        && tree
            .share
            .as_ref()
            .is_some_and(|s| s.continuous_availability)
    {
        braid_smb_proto::messages::tree_connect::share_capabilities::CONTINUOUS_AVAILABILITY
    } else {
        0
    };
    let mut reply = Reply::of(&TreeConnectResponse {
        share_type: kind,
        share_flags,
        capabilities,
        maximal_access: tree.maximal_access,
    });
    reply.tree_id = Some(tree.id);
    Ok(reply)
}
