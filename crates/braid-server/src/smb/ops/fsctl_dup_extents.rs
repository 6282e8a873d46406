//! Block cloning over SMB2 IOCTL: FSCTL_DUPLICATE_EXTENTS_TO_FILE (MS-SMB2
//! 3.3.5.15.17; MS-FSCC 2.3.7.2 SMB2_DUPLICATE_EXTENTS_DATA, 2.3.8 for the
//! statuses). Sent on the target open; the source is another open of the
//! same session, named by its SMB2_FILEID. The object store side (MS-FSA
//! 2.1.5.9.4) is braid-fs `clone.rs`: the host file system's clone where it
//! has one, a copy in the kernel where not. Advertised by
//! FILE_SUPPORTS_BLOCK_REFCOUNTING (MS-FSCC 2.5.1).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use braid_smb_proto::codec::FileId;
use braid_smb_proto::messages::fsctl_data::DuplicateExtentsData;
use braid_smb_proto::messages::IoctlRequest;
use braid_smb_proto::NtStatus;

use crate::smb::session::Open;
use crate::smb::{blocking, Request};

/// Where the file system cannot clone, the range is copied, which for a
/// large one takes a while: a request still running after this long gets
/// an interim response (MS-SMB2 3.3.4.2) so that the client keeps waiting,
/// as Samba's smbd does for an IOCTL after one second (smb2_ioctl.c).
const INTERIM_AFTER: Duration = Duration::from_secs(1);

// MS-SMB2 3.3.5.15.17
pub async fn duplicate_extents(
    req: &mut Request<'_>,
    r: &IoctlRequest,
) -> Result<Vec<u8>, NtStatus> {
    let dest = req.open(r.file_id)?;
    // InputCount less than the size of SMB2_DUPLICATE_EXTENTS_DATA.
    let d = DuplicateExtentsData::decode(&r.input).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    // No open with that id in Session.OpenTable (smbtorture
    // dup_extents_bad_handle: a closed source is INVALID_HANDLE; a closed
    // target, like any IOCTL on one, FILE_CLOSED above).
    let src = source_open(req, d.source_file_id).ok_or(NtStatus::INVALID_HANDLE)?;
    // Then a pass-through to the object store (3.3.5.15.8). A clone is a
    // write of the target: level II oplocks on it break, as for WRITE and
    // copy-chunk (and as ReFS breaks them for a block clone).
    if let Some(o) = &dest.oplock {
        o.file.break_level2_except(o.key);
    }
    let (src, dest) = (src.handle.clone(), dest.handle.clone());
    let work = blocking(move || {
        src.duplicate_extents_to(d.source_offset, &dest, d.target_offset, d.byte_count)
    });
    tokio::pin!(work);
    match tokio::time::timeout(INTERIM_AFTER, &mut work).await {
        Ok(done) => done?,
        Err(_) => {
            // The copy is under way: with no async place left it finishes
            // without an interim response, holding its credit.
            let _ = req.go_async();
            work.await?
        }
    };
    Ok(Vec::new())
}

/// The open of this session that `id` names, if it is still open. Its tree
/// may be another of the session's: the file service refuses a source on
/// another share (another volume, MS-FSCC 2.3.8).
fn source_open(req: &Request<'_>, id: FileId) -> Option<Arc<Open>> {
    let sess = req.session().ok()?;
    sess.opens
        .get(&id.volatile)
        .filter(|o| o.persistent_id == id.persistent && !o.closed.load(Ordering::Acquire))
}
