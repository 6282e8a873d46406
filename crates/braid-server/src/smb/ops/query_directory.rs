//! QUERY_DIRECTORY: MS-SMB2 3.3.5.18.

use braid_smb_proto::codec::Message;
use braid_smb_proto::fscc::DirListingEncoder;
use braid_smb_proto::messages::create::access_mask;
use braid_smb_proto::messages::{QueryDirectoryRequest, QueryDirectoryResponse};
use braid_smb_proto::NtStatus;

use super::convert::{view_of, wildcard_match};
use crate::smb::{blocking, OpResult, Reply, Request};

const RESTART_SCANS: u8 = 0x01;
const RETURN_SINGLE_ENTRY: u8 = 0x02;
const REOPEN: u8 = 0x10;

pub async fn handle(req: &mut Request<'_>) -> OpResult {
    let r = QueryDirectoryRequest::decode(req.msg).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let open = req.open(r.file_id)?;
    if !open.is_directory {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if open.granted_access & access_mask::FILE_LIST_DIRECTORY == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let max = req.conn.server.config.max_transact_size;
    if r.output_buffer_length > max {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let mut enc = DirListingEncoder::new(r.file_information_class, r.output_buffer_length as usize)
        .map_err(|e| e.status())?;

    let restart = r.flags & (RESTART_SCANS | REOPEN) != 0;
    let needs_listing = {
        let mut cur = open.dir.lock().unwrap();
        if restart {
            cur.entries = None;
            cur.position = 0;
        }
        if cur.entries.is_none() && !r.file_name.is_empty() {
            cur.pattern = Some(r.file_name.clone());
        } else if cur.pattern.is_none() {
            cur.pattern = Some(if r.file_name.is_empty() { "*".into() } else { r.file_name.clone() });
        }
        cur.entries.is_none()
    };
    let first_query = needs_listing;
    if needs_listing {
        let handle = open.handle.clone();
        let mut entries = blocking(move || handle.read_dir()).await?;
        let mut cur = open.dir.lock().unwrap();
        let pattern = cur.pattern.clone().unwrap_or_else(|| "*".into());
        entries.retain(|e| wildcard_match(&pattern, &e.name));
        cur.entries = Some(entries);
        cur.position = 0;
    }

    let mut cur = open.dir.lock().unwrap();
    let position = cur.position;
    let entries = cur.entries.as_ref().expect("listing loaded above");
    let mut taken = 0;
    for (i, e) in entries[position..].iter().enumerate() {
        if !enc.push(&e.name, "", &view_of(&e.info), (position + i) as u32) {
            break;
        }
        taken += 1;
        if r.flags & RETURN_SINGLE_ENTRY != 0 {
            break;
        }
    }
    let remaining = entries.len() - position;
    cur.position += taken;
    drop(cur);
    if taken == 0 {
        if remaining > 0 {
            // Not even one entry fits the client's buffer.
            return Err(NtStatus::INFO_LENGTH_MISMATCH);
        }
        return Err(if first_query { NtStatus::NO_SUCH_FILE } else { NtStatus::NO_MORE_FILES });
    }
    Ok(Reply::of(&QueryDirectoryResponse { output: enc.finish() }))
}
