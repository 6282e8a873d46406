//! MS-FSCC information classes carried by SMB2 QUERY_INFO, SET_INFO and
//! QUERY_DIRECTORY, plus the MS-DTYP security descriptor they use.
//!
//! Everything here is protocol-neutral input in, wire bytes out (or wire
//! bytes in, typed values out). The server fills a [`FileAttributesView`]
//! (and for file systems an [`fs_info::FsStats`] / [`fs_info::VolumeInfo`])
//! from its file service and picks the encoder by info class number.
//!
//! * [`file_info`] — QUERY_INFO / SET_INFO with `InfoType = SMB2_0_INFO_FILE`
//!   (MS-FSCC 2.4), the buffer-size rules ([`file_info::min_size`],
//!   [`fit_query_output`]).
//! * [`fs_info`] — QUERY_INFO with `InfoType = SMB2_0_INFO_FILESYSTEM`
//!   (MS-FSCC 2.5).
//! * [`dir_info`] — QUERY_DIRECTORY entry encodings and the
//!   [`dir_info::DirListingEncoder`] builder.
//! * [`security`] — self-relative SECURITY_DESCRIPTOR, SID, ACL, ACE
//!   (MS-DTYP 2.4.2, 2.4.4, 2.4.5, 2.4.6) for `SMB2_0_INFO_SECURITY`.
//! * [`quota`] — `SMB2_0_INFO_QUOTA`: SMB2_QUERY_QUOTA_INFO (MS-SMB2
//!   2.2.37.1) and FILE_QUOTA_INFORMATION lists (MS-FSCC 2.4.36).
//!
//! Errors are [`FsccError`]; [`FsccError::status`] gives the NTSTATUS the
//! server answers with.

pub mod access;
pub mod dir_info;
pub mod file_info;
pub mod fs_info;
pub mod quota;
pub mod security;

use crate::status::NtStatus;
use thiserror::Error;

pub use dir_info::DirListingEncoder;
pub use file_info::{
    decode_set_file_info, encode_query_file_info, query_file_info, FileQueryInput, FullEa,
    SetBasicInfo, SetFileInfo, SetLinkInfo,
};
pub use fs_info::{encode_fs_info, query_fs_info, FsStats, VolumeInfo};
pub use security::{
    build_file_security_descriptor, query_security_output, Ace, Acl, SecurityDescriptor, Sid,
};

// MS-SMB2 2.2.37: the InfoType field of QUERY_INFO / SET_INFO.
/// `InfoType`: file information (MS-FSCC 2.4 classes).
pub const SMB2_0_INFO_FILE: u8 = 0x01;
/// `InfoType`: file system information (MS-FSCC 2.5 classes).
pub const SMB2_0_INFO_FILESYSTEM: u8 = 0x02;
/// `InfoType`: security descriptor (MS-DTYP 2.4.6).
pub const SMB2_0_INFO_SECURITY: u8 = 0x03;
/// `InfoType`: quota information (MS-FSCC 2.4.36).
pub const SMB2_0_INFO_QUOTA: u8 = 0x04;

// MS-FSCC 2.6: file attributes.
pub const FILE_ATTRIBUTE_READONLY: u32 = 0x0000_0001;
pub const FILE_ATTRIBUTE_HIDDEN: u32 = 0x0000_0002;
pub const FILE_ATTRIBUTE_SYSTEM: u32 = 0x0000_0004;
pub const FILE_ATTRIBUTE_DIRECTORY: u32 = 0x0000_0010;
pub const FILE_ATTRIBUTE_ARCHIVE: u32 = 0x0000_0020;
pub const FILE_ATTRIBUTE_NORMAL: u32 = 0x0000_0080;
pub const FILE_ATTRIBUTE_TEMPORARY: u32 = 0x0000_0100;
pub const FILE_ATTRIBUTE_SPARSE_FILE: u32 = 0x0000_0200;
pub const FILE_ATTRIBUTE_REPARSE_POINT: u32 = 0x0000_0400;
pub const FILE_ATTRIBUTE_COMPRESSED: u32 = 0x0000_0800;
pub const FILE_ATTRIBUTE_OFFLINE: u32 = 0x0000_1000;
pub const FILE_ATTRIBUTE_NOT_CONTENT_INDEXED: u32 = 0x0000_2000;
pub const FILE_ATTRIBUTE_ENCRYPTED: u32 = 0x0000_4000;

/// Protocol-neutral attributes of one file or directory, filled by the
/// server from its file service (a `stat` plus what the service tracks).
///
/// Times are Windows FILETIME values (100 ns ticks since 1601-01-01 UTC);
/// 0 means "unknown". `file_id` is the stable per-volume index number
/// (inode-like) reported as FileInternalInformation / FileId; `ea_size` is
/// the size MS-FSCC 2.4.13 defines for FileEaInformation (0 if no EAs).
/// `file_attributes` are MS-FSCC 2.6 bits; encoders normalise them with
/// [`FileAttributesView::wire_attributes`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileAttributesView {
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub allocation_size: u64,
    pub end_of_file: u64,
    pub file_attributes: u32,
    pub number_of_links: u32,
    pub delete_pending: bool,
    pub directory: bool,
    pub file_id: u64,
    pub ea_size: u32,
}

impl FileAttributesView {
    /// The attributes as sent on the wire. MS-FSA 2.1.5.6.3.x / 2.1.5.12.x:
    /// a directory always carries FILE_ATTRIBUTE_DIRECTORY, and a file with
    /// no attribute set reports FILE_ATTRIBUTE_NORMAL (which is only valid
    /// alone).
    pub fn wire_attributes(&self) -> u32 {
        let mut a = self.file_attributes;
        if self.directory {
            a |= FILE_ATTRIBUTE_DIRECTORY;
            a &= !FILE_ATTRIBUTE_NORMAL;
        } else {
            a &= !FILE_ATTRIBUTE_DIRECTORY;
        }
        if a & !FILE_ATTRIBUTE_NORMAL != 0 {
            a &= !FILE_ATTRIBUTE_NORMAL;
        }
        if a == 0 {
            a = FILE_ATTRIBUTE_NORMAL;
        }
        a
    }
}

/// Why an info-class encoding or decoding failed; map with [`FsccError::status`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FsccError {
    /// The class number is not one this type/direction supports.
    #[error("invalid information class {0}")]
    InvalidInfoClass(u8),
    /// The buffer is smaller than the class's fixed part (QUERY: the
    /// client's OutputBufferLength; SET: the input buffer).
    #[error("buffer of {have} bytes is shorter than the {need} bytes the class needs")]
    InfoLengthMismatch { need: usize, have: usize },
    /// A length or value inside the buffer is inconsistent.
    #[error("invalid parameter: {0}")]
    InvalidParameter(&'static str),
    /// FILE_FULL_EA_INFORMATION chain is malformed (MS-FSCC 2.4.15).
    #[error("inconsistent EA list: {0}")]
    EaListInconsistent(&'static str),
    /// A self-relative security descriptor failed validation.
    #[error("invalid security descriptor: {0}")]
    InvalidSecurityDescriptor(&'static str),
    /// FileAlternateNameInformation was asked for a file without a short name.
    #[error("file has no short (8.3) name")]
    NoShortName,
}

impl FsccError {
    /// The NTSTATUS the server answers with.
    pub fn status(&self) -> NtStatus {
        match self {
            FsccError::InvalidInfoClass(_) => NtStatus::INVALID_INFO_CLASS,
            FsccError::InfoLengthMismatch { .. } => NtStatus::INFO_LENGTH_MISMATCH,
            FsccError::InvalidParameter(_) => NtStatus::INVALID_PARAMETER,
            // MS-ERREF 2.3.1: STATUS_EA_LIST_INCONSISTENT
            FsccError::EaListInconsistent(_) => NtStatus(0x8000_0014),
            // MS-ERREF 2.3.1: STATUS_INVALID_SECURITY_DESCR
            FsccError::InvalidSecurityDescriptor(_) => NtStatus(0xC000_0079),
            FsccError::NoShortName => NtStatus::OBJECT_NAME_NOT_FOUND,
        }
    }
}

/// A QUERY_INFO answer: the status to put in the SMB2 header and the
/// OutputBuffer bytes (possibly truncated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryOutput {
    pub status: NtStatus,
    pub data: Vec<u8>,
}

/// Fit a fully encoded QUERY_INFO (file or file system) answer into the
/// client's `output_buffer_length`, as Windows and Samba's smbd do
/// (`smbd_smb2_getinfo_send` in source3/smbd/smb2_getinfo.c; checked by
/// smbtorture `smb2.getinfo.qfile_buffercheck` / `qfs_buffercheck`):
///
/// * `output_buffer_length < min_size` → `Err(InfoLengthMismatch)`
///   (STATUS_INFO_LENGTH_MISMATCH, no data) — this also applies when the
///   full answer would be shorter than `min_size` (for example a
///   directory's empty FileStreamInformation).
/// * the full answer is longer than `output_buffer_length` (only possible
///   for the variable-length, name-carrying classes) → the answer cut to
///   `output_buffer_length` rounded down to a whole UTF-16 unit, with
///   STATUS_BUFFER_OVERFLOW. Length fields keep the full length, as
///   MS-FSA 2.1.5.12.x specifies (FileNameLength "set to the length of
///   the name", BytesToCopy truncated). The server sends this as a
///   success-shaped QUERY_INFO response, not an error response.
/// * otherwise the whole answer with STATUS_SUCCESS.
///
/// `min_size` comes from [`file_info::min_size`] or [`fs_info::min_size`].
pub fn fit_query_output(
    min_size: usize,
    mut data: Vec<u8>,
    output_buffer_length: u32,
) -> Result<QueryOutput, FsccError> {
    let out = output_buffer_length as usize;
    if out < min_size {
        return Err(FsccError::InfoLengthMismatch {
            need: min_size,
            have: out,
        });
    }
    if data.len() > out {
        // Every variable part starts at an even offset, so an even cut
        // never splits a UTF-16 unit. min_size is even, so the cut stays >= it.
        data.truncate(out & !1);
        return Ok(QueryOutput {
            status: NtStatus::BUFFER_OVERFLOW,
            data,
        });
    }
    Ok(QueryOutput {
        status: NtStatus::SUCCESS,
        data,
    })
}

/// Append a u64 FILETIME/size; shared by the encoders.
pub(crate) fn put_times(out: &mut Vec<u8>, v: &FileAttributesView) {
    use crate::codec::WriteLe;
    out.put_u64(v.creation_time);
    out.put_u64(v.last_access_time);
    out.put_u64(v.last_write_time);
    out.put_u64(v.change_time);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fscc_wire_attributes_normalised() {
        let mut v = FileAttributesView::default();
        assert_eq!(v.wire_attributes(), FILE_ATTRIBUTE_NORMAL);
        v.file_attributes = FILE_ATTRIBUTE_NORMAL | FILE_ATTRIBUTE_ARCHIVE;
        assert_eq!(v.wire_attributes(), FILE_ATTRIBUTE_ARCHIVE);
        v.directory = true;
        v.file_attributes = FILE_ATTRIBUTE_NORMAL;
        assert_eq!(v.wire_attributes(), FILE_ATTRIBUTE_DIRECTORY);
    }

    #[test]
    fn fscc_fit_query_output_rules() {
        let data = vec![1u8; 40];
        assert_eq!(
            fit_query_output(40, data.clone(), 39).unwrap_err().status(),
            NtStatus::INFO_LENGTH_MISMATCH
        );
        let ok = fit_query_output(40, data.clone(), 40).unwrap();
        assert_eq!(ok.status, NtStatus::SUCCESS);
        assert_eq!(ok.data.len(), 40);
        let ok = fit_query_output(40, data, 65535).unwrap();
        assert_eq!(ok.status, NtStatus::SUCCESS);

        let var = vec![7u8; 110];
        for len in 104..110u32 {
            let o = fit_query_output(104, var.clone(), len).unwrap();
            assert_eq!(o.status, NtStatus::BUFFER_OVERFLOW);
            assert_eq!(o.data.len(), (len as usize) & !1);
            assert!(o.data.len() >= 104);
        }
        assert_eq!(
            fit_query_output(104, var, 110).unwrap().status,
            NtStatus::SUCCESS
        );
    }
}
