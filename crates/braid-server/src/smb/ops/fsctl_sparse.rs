//! Sparse files over SMB2 IOCTL: FSCTL_SET_SPARSE (MS-FSCC 2.3.64),
//! FSCTL_SET_ZERO_DATA (2.3.67), FSCTL_QUERY_ALLOCATED_RANGES (2.3.51)
//! and FSCTL_FILE_LEVEL_TRIM (2.3.13); the object store side is braid-fs
//! `sparse.rs` and `trim.rs`.

use braid_fs::LockOwner;
use braid_smb_proto::messages::fsctl_data::{
    FileLevelTrim, FileRange, FILE_LEVEL_TRIM_OUTPUT_SIZE,
};
use braid_smb_proto::messages::IoctlRequest;
use braid_smb_proto::NtStatus;

use crate::smb::{blocking, Request};

/// MS-FSCC 2.3.64: FILE_SET_SPARSE_BUFFER is one BOOLEAN; no buffer at all
/// means TRUE, and bytes after the first are ignored.
pub async fn set_sparse(req: &Request<'_>, r: &IoctlRequest) -> Result<Vec<u8>, NtStatus> {
    let open = req.open(r.file_id)?;
    let sparse = r.input.first().is_none_or(|b| *b != 0);
    let handle = open.handle.clone();
    blocking(move || handle.set_sparse(sparse)).await?;
    Ok(Vec::new())
}

/// MS-FSCC 2.3.67 / MS-FSA 2.1.5.9.34: zeroing is a write, so byte-range
/// locks of other opens and level II oplocks apply.
pub async fn set_zero_data(req: &Request<'_>, r: &IoctlRequest) -> Result<Vec<u8>, NtStatus> {
    let open = req.open(r.file_id)?;
    let range = FileRange::decode(&r.input).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let (offset, beyond) = (range.offset, range.second);
    if beyond < offset {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if let Some(o) = &open.oplock {
        o.file.break_level2_except(o.key);
    }
    let handle = open.handle.clone();
    blocking(move || {
        if beyond > offset {
            handle.check_io_lock(offset, beyond - offset, true, LockOwner(0))?;
        }
        handle.zero_range(offset, beyond)
    })
    .await?;
    Ok(Vec::new())
}

/// MS-FSCC 2.3.13 / MS-FSA 2.1.5.10.6. Trimming changes what the ranges
/// read back (zeros), so it is a write for byte-range locks and level II
/// oplocks, as zeroing is.
pub async fn file_level_trim(req: &Request<'_>, r: &IoctlRequest) -> Result<Vec<u8>, NtStatus> {
    let open = req.open(r.file_id)?;
    let tree = req.tree()?;
    if !tree.share.as_ref().is_some_and(|s| s.fs.can_trim()) {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let trim = FileLevelTrim::decode(&r.input).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if (r.max_output_response as usize) < FILE_LEVEL_TRIM_OUTPUT_SIZE {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let mut ranges = Vec::with_capacity(trim.ranges.len());
    for range in &trim.ranges {
        if range.offset.checked_add(range.second).is_none() {
            return Err(NtStatus::INTEGER_OVERFLOW);
        }
        ranges.push((range.offset, range.second));
    }
    if let Some(o) = &open.oplock {
        o.file.break_level2_except(o.key);
    }
    let handle = open.handle.clone();
    let processed = blocking(move || handle.trim(&ranges, trim.key)).await?;
    Ok(processed.to_le_bytes().to_vec())
}

/// MS-FSCC 2.3.51 / MS-FSA 2.1.5.9.22: the ranges as
/// FILE_ALLOCATED_RANGE_BUFFERs. The dispatcher answers BUFFER_TOO_SMALL
/// when they do not fit MaxOutputResponse (no partial list).
pub async fn query_allocated_ranges(
    req: &Request<'_>,
    r: &IoctlRequest,
) -> Result<Vec<u8>, NtStatus> {
    let open = req.open(r.file_id)?;
    let range = FileRange::decode(&r.input).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    let handle = open.handle.clone();
    let ranges = blocking(move || handle.allocated_ranges(range.offset, range.second)).await?;
    let mut out = Vec::with_capacity(ranges.len() * FileRange::SIZE);
    for (offset, length) in ranges {
        FileRange {
            offset,
            second: length,
        }
        .encode(&mut out);
    }
    Ok(out)
}

/// MS-FSCC 2.3.18 / 2.3.69 on a file system without compression (Braid
/// does not advertise FILE_FILE_COMPRESSION): the state is always
/// COMPRESSION_FORMAT_NONE, and only NONE can be set.
pub fn get_compression(req: &Request<'_>, r: &IoctlRequest) -> Result<Vec<u8>, NtStatus> {
    req.open(r.file_id)?;
    Ok(COMPRESSION_FORMAT_NONE.to_le_bytes().to_vec())
}

pub fn set_compression(req: &Request<'_>, r: &IoctlRequest) -> Result<Vec<u8>, NtStatus> {
    let open = req.open(r.file_id)?;
    let format = r
        .input
        .get(..2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .ok_or(NtStatus::INVALID_PARAMETER)?;
    use braid_smb_proto::messages::create::access_mask;
    let can_write = access_mask::FILE_WRITE_DATA
        | access_mask::FILE_APPEND_DATA
        | access_mask::FILE_WRITE_ATTRIBUTES;
    if open.granted_access & can_write == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    match format {
        COMPRESSION_FORMAT_NONE => Ok(Vec::new()),
        _ => Err(NtStatus::NOT_SUPPORTED),
    }
}

const COMPRESSION_FORMAT_NONE: u16 = 0;
