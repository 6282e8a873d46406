//! Server-side copy: FSCTL_SRV_REQUEST_RESUME_KEY (MS-SMB2 3.3.5.15.5) and
//! FSCTL_SRV_COPYCHUNK / FSCTL_SRV_COPYCHUNK_WRITE (3.3.5.15.6). The client
//! names a source open by an opaque key and asks for ranges of it to be
//! written into the destination open; the data never crosses the network.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use braid_fs::LockOwner;
use braid_smb_proto::messages::aapl::caps;
use braid_smb_proto::messages::create::access_mask;
use braid_smb_proto::messages::fsctl_data::{CopyChunkCopy, CopyChunkResponse, ResumeKeyResponse};
use braid_smb_proto::messages::ioctl::fsctl;
use braid_smb_proto::messages::IoctlRequest;
use braid_smb_proto::NtStatus;

use crate::smb::session::Open;
use crate::smb::{blocking, status_map, OpResult, Request};

/// MS-SMB2 3.3.3 ServerSideCopyMaxNumberofChunks, ServerSideCopyMaxChunkSize
/// and ServerSideCopyMaxDataSize, as Windows Server and Samba set them.
pub const MAX_CHUNKS: u32 = 256;
pub const MAX_CHUNK_SIZE: u32 = 1024 * 1024;
pub const MAX_DATA_SIZE: u32 = 16 * 1024 * 1024;

/// MS-SMB2 3.3.5.15.5: Open.ResumeKey. The open's ids, then a tag only this
/// server can compute, so that a key cannot be guessed from file ids.
pub fn resume_key(req: &Request<'_>, open: &Open) -> [u8; 24] {
    let mut key = [0u8; 24];
    key[..8].copy_from_slice(&open.volatile_id.to_le_bytes());
    key[8..16].copy_from_slice(&open.persistent_id.to_le_bytes());
    key[16..].copy_from_slice(&key_tag(req, open.volatile_id, open.persistent_id).to_le_bytes());
    key
}

fn key_tag(req: &Request<'_>, volatile: u64, persistent: u64) -> u64 {
    // A keyed SipHash (random keys per server start) is a PRF: the tag
    // of one open says nothing about another's.
    let mut h = req.conn.server.smb.resume_key_secret.build_hasher();
    h.write_u64(volatile);
    h.write_u64(persistent);
    h.finish()
}

pub fn request_resume_key(req: &Request<'_>, r: &IoctlRequest) -> Result<Vec<u8>, NtStatus> {
    let open = req.open(r.file_id)?;
    let mut out = Vec::with_capacity(ResumeKeyResponse::SIZE);
    ResumeKeyResponse {
        resume_key: resume_key(req, &open),
    }
    .encode(&mut out);
    Ok(out)
}

/// The open a resume key names: one of this session's, or of another
/// session of the same user (a copy between two trees or connections).
fn source_open(req: &Request<'_>, key: &[u8; 24]) -> Option<Arc<Open>> {
    let volatile = u64::from_le_bytes(key[..8].try_into().expect("8"));
    let persistent = u64::from_le_bytes(key[8..16].try_into().expect("8"));
    let tag = u64::from_le_bytes(key[16..].try_into().expect("8"));
    if key_tag(req, volatile, persistent) != tag {
        return None;
    }
    let sess = req.session().ok()?;
    let named = |o: &Arc<Open>| {
        o.persistent_id == persistent && !o.closed.load(std::sync::atomic::Ordering::Acquire)
    };
    if let Some(o) = sess.opens.get(&volatile).filter(named) {
        return Some(o);
    }
    let user = account(sess.as_ref());
    req.conn
        .server
        .smb
        .sessions
        .values()
        .into_iter()
        .filter(|s| s.id != sess.id && user.is_some() && account(s) == user)
        .find_map(|s| s.opens.get(&volatile).filter(named))
}

/// The user and domain a session authenticated as (None: anonymous or
/// guest, whose opens no other session may name).
fn account(sess: &crate::smb::session::Session) -> Option<(String, String)> {
    let id = sess.identity.lock().unwrap_or_else(|p| p.into_inner());
    id.as_ref()
        .filter(|i| !i.anonymous && !i.guest)
        .map(|i| (i.user.to_lowercase(), i.domain.to_lowercase()))
}

fn respond(r: &IoctlRequest, status: NtStatus, body: CopyChunkResponse) -> OpResult {
    let mut output = Vec::with_capacity(CopyChunkResponse::SIZE);
    body.encode(&mut output);
    Ok(super::ioctl::answer(r, status, output))
}

// MS-SMB2 3.3.5.15.6
pub async fn copychunk(req: &mut Request<'_>, r: &IoctlRequest) -> OpResult {
    let dest = req.open(r.file_id)?;
    if r.input.len() < CopyChunkCopy::FIXED {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let (copy, count) =
        CopyChunkCopy::decode(&r.input, MAX_CHUNKS).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let src = source_open(req, &copy.source_key).ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    if (r.max_output_response as usize) < CopyChunkResponse::SIZE {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // 3.3.5.15.6.2: a request over the limits learns them.
    let total: u64 = copy.chunks.iter().map(|c| c.length as u64).sum();
    let over_limits = count > MAX_CHUNKS
        || copy.chunks.len() != count as usize
        || copy
            .chunks
            .iter()
            .any(|c| c.length == 0 || c.length > MAX_CHUNK_SIZE)
        || total > MAX_DATA_SIZE as u64;
    if over_limits {
        let limits = CopyChunkResponse {
            chunks_written: MAX_CHUNKS,
            chunk_bytes_written: MAX_CHUNK_SIZE,
            total_bytes_written: MAX_DATA_SIZE,
        };
        return respond(r, NtStatus::INVALID_PARAMETER, limits);
    }
    // The destination is written; plain COPYCHUNK also needs it readable
    // (FILE_READ_DATA itself). The source may be read with FILE_EXECUTE,
    // as for READ (smbtorture copy_chunk_bad_access, as Windows and Samba).
    let src_readable =
        src.granted_access & (access_mask::FILE_READ_DATA | access_mask::FILE_EXECUTE) != 0;
    if dest.granted_access & access_mask::FILE_WRITE_DATA == 0
        || (r.ctl_code == fsctl::SRV_COPYCHUNK
            && dest.granted_access & access_mask::FILE_READ_DATA == 0)
        || !src_readable
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if dest.is_directory || src.is_directory {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    if let Some(o) = &dest.oplock {
        o.file.break_level2_except(o.key);
    }
    let (src_handle, dest_handle) = (src.handle.clone(), dest.handle.clone());
    if count == 0 && super::create_aapl::negotiated(req.session()?, caps::SUPPORTS_OSX_COPYFILE) {
        return copyfile(r, src_handle, dest_handle).await;
    }
    let chunks = copy.chunks;
    let (done, status) = blocking(move || {
        let mut done = CopyChunkResponse::default();
        for c in &chunks {
            let len = c.length as u64;
            let step = src_handle
                .check_io_lock(c.source_offset, len, false, LockOwner(0))
                .and_then(|()| dest_handle.check_io_lock(c.target_offset, len, true, LockOwner(0)))
                .map_err(|e| status_map::fs_status(&e))
                .and_then(|()| {
                    // Windows and Samba refuse a chunk that reads past the
                    // source's end rather than copy part of it.
                    let size = src_handle.info().map_err(|e| status_map::fs_status(&e))?;
                    match c.source_offset.checked_add(len) {
                        Some(end) if end <= size.end_of_file => Ok(()),
                        _ => Err(NtStatus::INVALID_VIEW_SIZE),
                    }
                })
                .and_then(|()| {
                    src_handle
                        .copy_range_to(
                            c.source_offset,
                            &dest_handle,
                            c.target_offset,
                            c.length as usize,
                        )
                        .map_err(|e| status_map::fs_status(&e))
                });
            match step {
                Ok(n) if n == c.length as usize => {
                    done.chunks_written += 1;
                    done.total_bytes_written += c.length;
                }
                Ok(n) => {
                    // The source shrank under the copy.
                    done.chunk_bytes_written = n as u32;
                    done.total_bytes_written += n as u32;
                    return Ok((done, NtStatus::INVALID_VIEW_SIZE));
                }
                Err(status) => return Ok((done, status)),
            }
        }
        Ok::<_, braid_fs::FsError>((done, NtStatus::SUCCESS))
    })
    .await?;
    respond(r, status, done)
}

/// Apple's copyfile (AAPL SUPPORTS_OSX_COPYFILE, as Samba's vfs_fruit
/// serves it): a copy request with no chunks copies the whole source, its
/// named streams (Finder info, resource fork) included, so that a Finder
/// copy is one request. The answer counts no chunks and every byte.
async fn copyfile(
    r: &IoctlRequest,
    src: braid_fs::OpenHandle,
    dest: braid_fs::OpenHandle,
) -> OpResult {
    let (copied, status) = blocking(move || {
        let size = src.info()?.end_of_file;
        let step = MAX_DATA_SIZE as u64;
        let mut copied = 0u64;
        while copied < size {
            let len = (size - copied).min(step);
            src.check_io_lock(copied, len, false, LockOwner(0))?;
            dest.check_io_lock(copied, len, true, LockOwner(0))?;
            let n = src.copy_range_to(copied, &dest, copied, len as usize)? as u64;
            copied += n;
            if n < len {
                // The source shrank under the copy.
                return Ok((copied, NtStatus::INVALID_VIEW_SIZE));
            }
        }
        src.copy_streams_to(&dest)?;
        Ok::<_, braid_fs::FsError>((copied, NtStatus::SUCCESS))
    })
    .await?;
    let done = CopyChunkResponse {
        chunks_written: 0,
        chunk_bytes_written: 0,
        total_bytes_written: copied.min(u32::MAX as u64) as u32,
    };
    respond(r, status, done)
}
