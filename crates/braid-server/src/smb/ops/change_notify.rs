//! CHANGE_NOTIFY: MS-SMB2 3.3.5.19. The first request on a directory open
//! starts a watch (crate::smb::notify) that buffers the changes Braid makes
//! beneath it, and those made on the host (crate::host_watch); a request returns what is buffered, or goes async until a
//! change arrives, it is cancelled (STATUS_CANCELLED) or its open is closed
//! (STATUS_NOTIFY_CLEANUP).

use std::sync::Arc;

use braid_smb_proto::codec::Message;
use braid_smb_proto::messages::create::access_mask;
use braid_smb_proto::messages::{ChangeNotifyRequest, ChangeNotifyResponse};
use braid_smb_proto::NtStatus;

use crate::smb::notify::{self, Changes, Watch};
use crate::smb::{OpResult, Reply, Request};

/// SMB2_WATCH_TREE (MS-SMB2 2.2.35).
const WATCH_TREE: u16 = 0x0001;

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let mid = req.header.message_id;
    req.conn.notify_order.wait_turn(mid).await;
    let r = ChangeNotifyRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let open = req.open(r.file_id)?;
    // A share serving no notifications says so (as Samba with `change
    // notify = no`): clients fall back to polling.
    if !req.share()?.change_notify {
        return Err(NtStatus::NOT_IMPLEMENTED);
    }
    if !open.is_directory {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if open.granted_access & access_mask::FILE_LIST_DIRECTORY == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if r.output_buffer_length > req.conn.config.max_transact_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let share = req.share()?.name.clone();
    crate::smb::host_watch::watch_open(&req.conn.server, req.share()?, &open, None);
    let watch: Arc<Watch> = {
        let mut slot = open.notify_watch.lock().unwrap();
        slot.get_or_insert_with(|| {
            req.conn.server.smb.notify.watch(
                &share,
                &open.handle.path(),
                r.flags & WATCH_TREE != 0,
                r.completion_filter,
                r.output_buffer_length,
            )
        })
        .clone()
    };
    let changes = match watch.take() {
        Some(c) => c,
        None if req.in_compound => {
            // MS-SMB2 3.3.4.2 <159>: a request inside a compound that would
            // go async (only the last one may) fails as Windows fails it,
            // and the compound goes on (smbtorture smb2.compound.interim2).
            return Err(NtStatus::INTERNAL_ERROR);
        }
        None => {
            let cancel = req.cancellable();
            req.go_async()?;
            let mut queued = false;
            loop {
                let woken = watch.wake.notified();
                tokio::pin!(woken);
                woken.as_mut().enable();
                if let Some(c) = watch.take() {
                    break c;
                }
                if !queued {
                    // In line on the watch (its wake-ups go first come,
                    // first served): a later request may now start.
                    req.conn.notify_order.done(mid);
                    queued = true;
                }
                // A close (tree disconnect, logoff) wins over the cancel
                // that follows it: the request ends NOTIFY_CLEANUP.
                tokio::select! {
                    biased;
                    _ = open.close_signal.cancelled() => {
                        return Ok(Reply::with_status(
                            NtStatus::NOTIFY_CLEANUP,
                            &ChangeNotifyResponse { output: Vec::new() },
                        ));
                    }
                    _ = cancel.cancelled() => return Err(NtStatus::CANCELLED),
                    _ = &mut woken => {}
                }
            }
        }
    };
    let events = match changes {
        Changes::Events(e) => e,
        Changes::Overflow => Vec::new(),
        Changes::DeletePending => return Err(NtStatus::DELETE_PENDING),
    };
    match notify::encode(&events, r.output_buffer_length as usize) {
        Some(output) if !events.is_empty() => Ok(Reply::of(&ChangeNotifyResponse { output })),
        // 3.3.5.19: too much to return: the client re-enumerates.
        _ => Ok(Reply::with_status(
            NtStatus::NOTIFY_ENUM_DIR,
            &ChangeNotifyResponse { output: Vec::new() },
        )),
    }
}
