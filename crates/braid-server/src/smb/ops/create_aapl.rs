//! The AAPL create context: macOS clients ask, on their first CREATE, which
//! of Apple's SMB2 extensions the server offers (`messages::aapl`). The
//! answer holds for the whole session: directory listings with Mac
//! metadata (`query_directory.rs`), the UNIX mode as NFS ACEs
//! (`query_info.rs`, `set_info.rs`), whole-file server-side copies
//! (`fsctl_copy.rs`), and zero file ids where the share asks for them.
//! Samba's vfs_fruit answers the same way, so a Mac sees the same server.

use std::sync::atomic::Ordering;

use braid_smb_proto::messages::aapl::{
    caps, volume_caps, AaplRequest, AaplServerQueryReply, SERVER_QUERY,
};
use braid_smb_proto::messages::create::context_name;
use braid_smb_proto::messages::CreateContext;
use braid_smb_proto::NtStatus;

use crate::smb::session::Session;
use crate::state::Share;

/// The request's AAPL query, checked: INVALID_PARAMETER for a context that
/// is not 24 bytes or not a server query (as Samba answers).
pub fn parse(data: &[u8]) -> Result<AaplRequest, NtStatus> {
    let q = AaplRequest::decode(data).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if q.command != SERVER_QUERY {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(q)
}

/// Answer `q` for an open on `share`, and remember on the session what was
/// offered.
pub fn negotiate(q: &AaplRequest, session: &Session, share: &Share, model: &str) -> CreateContext {
    // Listing Mac metadata reads named streams: only where they are served.
    let mut server_caps = caps::UNIX_BASED | caps::SUPPORTS_OSX_COPYFILE | caps::SUPPORTS_NFS_ACE;
    if q.client_caps & caps::SUPPORTS_READ_DIR_ATTR != 0 && share.fs.named_streams() {
        server_caps |= caps::SUPPORTS_READ_DIR_ATTR;
    }
    session.aapl_caps.store(server_caps, Ordering::Relaxed);
    let wants = |bit| q.request_bitmap & bit != 0;
    use braid_smb_proto::messages::aapl::reply;
    let reply = AaplServerQueryReply {
        server_caps: wants(reply::SERVER_CAPS).then_some(server_caps),
        // Names match case-insensitively, so the volume is not reported
        // case sensitive.
        volume_caps: wants(reply::VOLUME_CAPS).then_some(if share.mac.time_machine {
            volume_caps::FULL_SYNC
        } else {
            0
        }),
        model: wants(reply::MODEL_INFO).then(|| model.to_string()),
    };
    let mut data = Vec::with_capacity(64);
    reply.encode(&mut data);
    CreateContext::new(context_name::AAPL, data)
}

/// Whether the session negotiated `cap` (a `messages::aapl::caps` bit).
pub fn negotiated(session: &Session, cap: u64) -> bool {
    session.aapl_caps.load(Ordering::Relaxed) & cap != 0
}

/// Whether `session` takes empty named streams of `share` for absent ones
/// (braid-fs `RequestCtx::hide_empty_streams`): once it negotiated AAPL,
/// on a share with the macOS rules, as Samba's vfs_fruit does
/// (`fruit_create_file`, `fruit_filter_empty_streams`).
pub fn hides_empty_streams(session: &Session, share: &Share) -> bool {
    share.mac.enabled && session.aapl_caps.load(Ordering::Relaxed) != 0
}

/// The file id `session` is shown for a file whose id is `id`: 0 on a
/// share with `macos_zero_file_id` once the session negotiated AAPL.
pub fn file_id_for(session: &Session, share: &Share, id: u64) -> u64 {
    if share.mac.zero_file_id && session.aapl_caps.load(Ordering::Relaxed) != 0 {
        0
    } else {
        id
    }
}
