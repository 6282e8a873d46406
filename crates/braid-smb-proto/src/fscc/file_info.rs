//! MS-FSCC 2.4 file information classes for SMB2 QUERY_INFO and SET_INFO
//! with `InfoType = SMB2_0_INFO_FILE`.
//!
//! QUERY: [`encode_query_file_info`] builds the full answer for one class;
//! [`query_file_info`] also applies the OutputBufferLength rules through
//! [`min_size`] and [`super::fit_query_output`].
//!
//! Fixed-size classes (answer length == [`min_size`], never truncated):
//! Basic 40, Standard 24, Internal 8, Ea 4, Access 4, Position 8, Mode 4,
//! Alignment 4, Compression 16, NetworkOpen 56, AttributeTag 8, Id 24.
//!
//! Variable-length classes ([`is_variable_length`]; answer may exceed
//! [`min_size`] and is then truncated with STATUS_BUFFER_OVERFLOW):
//! Name (min 8), All (min 104; answer 100 + name), AlternateName (min 8),
//! Stream (min 32; one 8-aligned entry per stream, empty for a directory
//! without named streams), NormalizedName (min 8).
//!
//! The minimum sizes are MS-FSA's `sizeof()` / `BlockAlign(FieldOffset(..))`
//! values and match the table in smbtorture `smb2.getinfo.qfile_buffercheck`.
//!
//! SET: [`decode_set_file_info`] parses the input buffer of the classes a
//! server accepts into [`SetFileInfo`]; [`SetFileInfo::encode`] is the
//! inverse (for clients and tests).

use super::{put_times, FileAttributesView, FsccError, QueryOutput};
use crate::codec::{put_utf16le, string_to_utf16le, utf16le_to_string, Reader, WriteLe};

// MS-FSCC 2.4: information class numbers (FileInformationClass).
pub const FILE_DIRECTORY_INFORMATION: u8 = 1;
pub const FILE_FULL_DIRECTORY_INFORMATION: u8 = 2;
pub const FILE_BOTH_DIRECTORY_INFORMATION: u8 = 3;
pub const FILE_BASIC_INFORMATION: u8 = 4;
pub const FILE_STANDARD_INFORMATION: u8 = 5;
pub const FILE_INTERNAL_INFORMATION: u8 = 6;
pub const FILE_EA_INFORMATION: u8 = 7;
pub const FILE_ACCESS_INFORMATION: u8 = 8;
pub const FILE_NAME_INFORMATION: u8 = 9;
pub const FILE_RENAME_INFORMATION: u8 = 10;
pub const FILE_LINK_INFORMATION: u8 = 11;
pub const FILE_NAMES_INFORMATION: u8 = 12;
pub const FILE_DISPOSITION_INFORMATION: u8 = 13;
pub const FILE_POSITION_INFORMATION: u8 = 14;
pub const FILE_FULL_EA_INFORMATION: u8 = 15;
pub const FILE_MODE_INFORMATION: u8 = 16;
pub const FILE_ALIGNMENT_INFORMATION: u8 = 17;
pub const FILE_ALL_INFORMATION: u8 = 18;
pub const FILE_ALLOCATION_INFORMATION: u8 = 19;
pub const FILE_END_OF_FILE_INFORMATION: u8 = 20;
pub const FILE_ALTERNATE_NAME_INFORMATION: u8 = 21;
pub const FILE_STREAM_INFORMATION: u8 = 22;
pub const FILE_PIPE_INFORMATION: u8 = 23;
pub const FILE_PIPE_LOCAL_INFORMATION: u8 = 24;
pub const FILE_PIPE_REMOTE_INFORMATION: u8 = 25;
pub const FILE_COMPRESSION_INFORMATION: u8 = 28;
pub const FILE_QUOTA_INFORMATION: u8 = 32;
pub const FILE_NETWORK_OPEN_INFORMATION: u8 = 34;
pub const FILE_ATTRIBUTE_TAG_INFORMATION: u8 = 35;
pub const FILE_ID_BOTH_DIRECTORY_INFORMATION: u8 = 37;
pub const FILE_ID_FULL_DIRECTORY_INFORMATION: u8 = 38;
pub const FILE_VALID_DATA_LENGTH_INFORMATION: u8 = 39;
pub const FILE_SHORT_NAME_INFORMATION: u8 = 40;
pub const FILE_NORMALIZED_NAME_INFORMATION: u8 = 48;
pub const FILE_ID_INFORMATION: u8 = 59;
pub const FILE_ID_EXTD_DIRECTORY_INFORMATION: u8 = 60;
pub const FILE_DISPOSITION_INFORMATION_EX: u8 = 64;
pub const FILE_RENAME_INFORMATION_EX: u8 = 65;
pub const FILE_ID_64_EXTD_DIRECTORY_INFORMATION: u8 = 78;
pub const FILE_ID_ALL_EXTD_DIRECTORY_INFORMATION: u8 = 80;

// MS-FSCC 2.4.13 FileDispositionInformationEx flags.
pub const FILE_DISPOSITION_DO_NOT_DELETE: u32 = 0x0000_0000;
pub const FILE_DISPOSITION_DELETE: u32 = 0x0000_0001;
pub const FILE_DISPOSITION_POSIX_SEMANTICS: u32 = 0x0000_0002;
pub const FILE_DISPOSITION_FORCE_IMAGE_SECTION_CHECK: u32 = 0x0000_0004;
pub const FILE_DISPOSITION_ON_CLOSE: u32 = 0x0000_0008;
pub const FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE: u32 = 0x0000_0010;

// MS-FSCC 2.4.26 FileModeInformation mode bits.
pub const FILE_WRITE_THROUGH: u32 = 0x0000_0002;
pub const FILE_SEQUENTIAL_ONLY: u32 = 0x0000_0004;
pub const FILE_NO_INTERMEDIATE_BUFFERING: u32 = 0x0000_0008;
pub const FILE_SYNCHRONOUS_IO_ALERT: u32 = 0x0000_0010;
pub const FILE_SYNCHRONOUS_IO_NONALERT: u32 = 0x0000_0020;
pub const FILE_DELETE_ON_CLOSE: u32 = 0x0000_1000;
/// Every bit FileModeInformation may carry.
pub const FILE_MODE_VALID_MASK: u32 = FILE_WRITE_THROUGH
    | FILE_SEQUENTIAL_ONLY
    | FILE_NO_INTERMEDIATE_BUFFERING
    | FILE_SYNCHRONOUS_IO_ALERT
    | FILE_SYNCHRONOUS_IO_NONALERT
    | FILE_DELETE_ON_CLOSE;

/// The name of a file's default data stream (MS-FSCC 2.4.47).
pub const DEFAULT_STREAM_NAME: &str = "::$DATA";

/// One stream of a file for FileStreamInformation (MS-FSCC 2.4.47).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// `::$DATA` or `:NAME:$DATA`.
    pub name: String,
    pub size: u64,
    pub allocation_size: u64,
}

/// Size of the fixed part of FILE_ALL_INFORMATION before NameInformation's
/// FileName (MS-FSCC 2.4.2): 40+24+8+4+4+8+4+4 + FileNameLength(4).
pub const FILE_ALL_INFORMATION_HEADER: usize = 100;

/// The smallest OutputBufferLength a QUERY_INFO(FILE) request for `class`
/// may carry; a smaller one is answered with STATUS_INFO_LENGTH_MISMATCH.
/// `None` for a class this module does not encode (the server answers
/// STATUS_INVALID_INFO_CLASS or NOT_SUPPORTED).
pub fn min_size(class: u8) -> Option<usize> {
    Some(match class {
        FILE_BASIC_INFORMATION => 40,
        FILE_STANDARD_INFORMATION => 24,
        FILE_INTERNAL_INFORMATION => 8,
        FILE_EA_INFORMATION => 4,
        FILE_ACCESS_INFORMATION => 4,
        // MS-FSA 2.1.5.12.x: BlockAlign(FieldOffset(FileName) + 2, 4).
        FILE_NAME_INFORMATION => 8,
        FILE_POSITION_INFORMATION => 8,
        FILE_MODE_INFORMATION => 4,
        FILE_ALIGNMENT_INFORMATION => 4,
        // sizeof(FILE_ALL_INFORMATION) with its one-WCHAR name, 8-aligned.
        FILE_ALL_INFORMATION => 104,
        FILE_ALTERNATE_NAME_INFORMATION => 8,
        // sizeof(FILE_STREAM_INFORMATION), 8-aligned.
        FILE_STREAM_INFORMATION => 32,
        FILE_COMPRESSION_INFORMATION => 16,
        FILE_NETWORK_OPEN_INFORMATION => 56,
        FILE_ATTRIBUTE_TAG_INFORMATION => 8,
        FILE_NORMALIZED_NAME_INFORMATION => 8,
        FILE_ID_INFORMATION => 24,
        _ => return None,
    })
}

/// True for the name-carrying classes whose answer can be longer than
/// [`min_size`]; those get a truncated buffer plus STATUS_BUFFER_OVERFLOW
/// when OutputBufferLength is between the two.
pub fn is_variable_length(class: u8) -> bool {
    matches!(
        class,
        FILE_NAME_INFORMATION
            | FILE_ALL_INFORMATION
            | FILE_ALTERNATE_NAME_INFORMATION
            | FILE_STREAM_INFORMATION
            | FILE_NORMALIZED_NAME_INFORMATION
    )
}

/// Everything a QUERY_INFO(FILE) answer needs about one open.
#[derive(Debug, Clone, Copy)]
pub struct FileQueryInput<'a> {
    pub view: &'a FileAttributesView,
    /// Share-relative path with `\` separators and no leading `\`; `""` is
    /// the share root. FileNameInformation / FileAllInformation report it
    /// as `\` + path (MS-SMB2 3.3.5.20.1); FileNormalizedNameInformation as
    /// is (MS-FSCC 2.4.32, Samba `smbd_do_qfilepathinfo`).
    pub path: &'a str,
    /// 8.3 name for FileAlternateNameInformation; empty = none (answered
    /// with STATUS_OBJECT_NAME_NOT_FOUND, as NTFS does without a short name).
    pub short_name: &'a str,
    /// The open's granted access (FileAccessInformation, FileAllInformation).
    pub access_mask: u32,
    /// The open's current byte offset (FilePositionInformation).
    pub position: u64,
    /// The open's mode bits (FileModeInformation): FILE_WRITE_THROUGH etc.
    pub mode: u32,
    /// Volume serial number for FileIdInformation.
    pub volume_serial: u64,
    /// The file's streams for FileStreamInformation, default stream first
    /// (none for a directory without named streams).
    pub streams: &'a [StreamInfo],
}

fn put_basic(out: &mut Vec<u8>, v: &FileAttributesView) {
    // MS-FSCC 2.4.7 FILE_BASIC_INFORMATION (40 bytes)
    put_times(out, v);
    out.put_u32(v.wire_attributes());
    out.put_u32(0); // Reserved
}

fn put_standard(out: &mut Vec<u8>, v: &FileAttributesView) {
    // MS-FSCC 2.4.45 FILE_STANDARD_INFORMATION (24 bytes)
    out.put_u64(v.allocation_size);
    out.put_u64(v.end_of_file);
    out.put_u32(v.number_of_links);
    out.put_u8(v.delete_pending as u8);
    out.put_u8(v.directory as u8);
    out.put_u16(0); // Reserved
}

fn put_name_info(out: &mut Vec<u8>, name: &str) {
    // MS-FSCC 2.1.7 FILE_NAME_INFORMATION: FileNameLength + FileName
    let at = out.len();
    out.put_u32(0);
    put_utf16le(out, name);
    let len = (out.len() - at - 4) as u32;
    out.patch_u32(at, len);
}

fn full_name(path: &str) -> String {
    let mut s = String::with_capacity(path.len() + 1);
    s.push('\\');
    s.push_str(path.trim_start_matches('\\'));
    s
}

/// The full (untruncated) answer for a QUERY_INFO(FILE) `class`.
pub fn encode_query_file_info(class: u8, q: &FileQueryInput<'_>) -> Result<Vec<u8>, FsccError> {
    let v = q.view;
    let mut out = Vec::with_capacity(128);
    match class {
        FILE_BASIC_INFORMATION => put_basic(&mut out, v),
        FILE_STANDARD_INFORMATION => put_standard(&mut out, v),
        // MS-FSCC 2.4.22 FILE_INTERNAL_INFORMATION
        FILE_INTERNAL_INFORMATION => out.put_u64(v.file_id),
        // MS-FSCC 2.4.13 FILE_EA_INFORMATION
        FILE_EA_INFORMATION => out.put_u32(v.ea_size),
        // MS-FSCC 2.4.1 FILE_ACCESS_INFORMATION
        FILE_ACCESS_INFORMATION => out.put_u32(q.access_mask),
        // MS-FSCC 2.4.28 FileNameInformation
        FILE_NAME_INFORMATION => put_name_info(&mut out, &full_name(q.path)),
        // MS-FSCC 2.4.35 FILE_POSITION_INFORMATION
        FILE_POSITION_INFORMATION => out.put_u64(q.position),
        // MS-FSCC 2.4.26 FILE_MODE_INFORMATION
        FILE_MODE_INFORMATION => out.put_u32(q.mode & FILE_MODE_VALID_MASK),
        // MS-FSCC 2.4.3 FILE_ALIGNMENT_INFORMATION: FILE_BYTE_ALIGNMENT
        FILE_ALIGNMENT_INFORMATION => out.put_u32(0),
        FILE_ALL_INFORMATION => {
            // MS-FSCC 2.4.2 FILE_ALL_INFORMATION
            put_basic(&mut out, v);
            put_standard(&mut out, v);
            out.put_u64(v.file_id);
            out.put_u32(v.ea_size);
            out.put_u32(q.access_mask);
            out.put_u64(q.position);
            out.put_u32(q.mode & FILE_MODE_VALID_MASK);
            out.put_u32(0); // AlignmentRequirement
            put_name_info(&mut out, &full_name(q.path));
        }
        FILE_ALTERNATE_NAME_INFORMATION => {
            // MS-FSCC 2.4.5: a FILE_NAME_INFORMATION with the 8.3 name
            if q.short_name.is_empty() {
                return Err(FsccError::NoShortName);
            }
            put_name_info(&mut out, q.short_name);
        }
        FILE_STREAM_INFORMATION => {
            // MS-FSCC 2.4.47 FILE_STREAM_INFORMATION: one entry per
            // stream, each 8-byte aligned; NextEntryOffset 0 on the last.
            let mut prev: Option<usize> = None;
            for st in q.streams {
                while out.len() % 8 != 0 {
                    out.put_u8(0);
                }
                let at = out.len();
                if let Some(p) = prev {
                    out.patch_u32(p, (at - p) as u32);
                }
                out.put_u32(0); // NextEntryOffset, patched by the next entry
                out.put_u32(0); // StreamNameLength, patched below
                out.put_u64(st.size);
                out.put_u64(st.allocation_size);
                put_utf16le(&mut out, &st.name);
                let name_len = (out.len() - at - 24) as u32;
                out.patch_u32(at + 4, name_len);
                prev = Some(at);
            }
        }
        FILE_COMPRESSION_INFORMATION => {
            // MS-FSCC 2.4.9 FILE_COMPRESSION_INFORMATION (16 bytes)
            out.put_u64(v.end_of_file); // CompressedFileSize
            out.put_u16(0); // CompressionFormat: COMPRESSION_FORMAT_NONE
            out.put_u8(0); // CompressionUnitShift
            out.put_u8(0); // ChunkShift
            out.put_u8(0); // ClusterShift
            out.put_zeros(3); // Reserved
        }
        FILE_NETWORK_OPEN_INFORMATION => {
            // MS-FSCC 2.4.34 FILE_NETWORK_OPEN_INFORMATION (56 bytes)
            put_times(&mut out, v);
            out.put_u64(v.allocation_size);
            out.put_u64(v.end_of_file);
            out.put_u32(v.wire_attributes());
            out.put_u32(0); // Reserved
        }
        FILE_ATTRIBUTE_TAG_INFORMATION => {
            // MS-FSCC 2.4.6 FILE_ATTRIBUTE_TAG_INFORMATION
            out.put_u32(v.wire_attributes());
            out.put_u32(0); // ReparseTag: not a reparse point
        }
        FILE_NORMALIZED_NAME_INFORMATION => {
            // MS-FSCC 2.4.32: share-relative name without the leading '\'
            put_name_info(&mut out, q.path.trim_start_matches('\\'));
        }
        FILE_ID_INFORMATION => {
            // MS-FSCC 2.4.23 FILE_ID_INFORMATION: VolumeSerialNumber (8),
            // FileId (16, FILE_ID_128: the 64-bit id zero-extended)
            out.put_u64(q.volume_serial);
            out.put_u64(v.file_id);
            out.put_u64(0);
        }
        _ => return Err(FsccError::InvalidInfoClass(class)),
    }
    Ok(out)
}

/// Encode `class` and fit it into the client's OutputBufferLength: the
/// whole of MS-SMB2 3.3.5.20.1 for the classes this module knows.
pub fn query_file_info(
    class: u8,
    q: &FileQueryInput<'_>,
    output_buffer_length: u32,
) -> Result<QueryOutput, FsccError> {
    let min = min_size(class).ok_or(FsccError::InvalidInfoClass(class))?;
    // Check the size first so a too-small buffer is a length error even
    // when the encoding itself would fail (Samba checks after encoding,
    // but both orders give the same answer for well-formed opens).
    if (output_buffer_length as usize) < min {
        return Err(FsccError::InfoLengthMismatch {
            need: min,
            have: output_buffer_length as usize,
        });
    }
    let data = encode_query_file_info(class, q)?;
    super::fit_query_output(min, data, output_buffer_length)
}

// ---------------------------------------------------------------------------
// SET_INFO decoders
// ---------------------------------------------------------------------------

/// FileBasicInformation as set by a client (MS-FSCC 2.4.7). A time of 0
/// means "leave unchanged", -1 "leave unchanged and stop updating it for
/// this handle", -2 "resume updating it"; `file_attributes` 0 means "leave
/// unchanged".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetBasicInfo {
    pub creation_time: i64,
    pub last_access_time: i64,
    pub last_write_time: i64,
    pub change_time: i64,
    pub file_attributes: u32,
}

/// FileRenameInformation / FileLinkInformation, SMB2 form (MS-FSCC
/// 2.4.42.2 FILE_RENAME_INFORMATION_TYPE_2, 2.4.27.2 FILE_LINK_INFORMATION_TYPE_2).
/// `file_name` is the target as sent (share-relative, `\`-separated).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SetLinkInfo {
    pub replace_if_exists: bool,
    /// MUST be zero for network operations; the server rejects non-zero
    /// with STATUS_INVALID_PARAMETER.
    pub root_directory: u64,
    pub file_name: String,
}

/// One FILE_FULL_EA_INFORMATION entry (MS-FSCC 2.4.15).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FullEa {
    /// 0 or FILE_NEED_EA (0x80).
    pub flags: u8,
    /// 8-bit name, without the terminating NUL.
    pub name: Vec<u8>,
    /// Empty value = delete the EA.
    pub value: Vec<u8>,
}

/// A decoded SET_INFO(FILE) input buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetFileInfo {
    Basic(SetBasicInfo),
    Rename(SetLinkInfo),
    Link(SetLinkInfo),
    /// FileDispositionInformation: DeletePending.
    Disposition {
        delete_pending: bool,
    },
    /// FilePositionInformation: CurrentByteOffset.
    Position {
        current_byte_offset: u64,
    },
    /// FileModeInformation: Mode (only FILE_MODE_VALID_MASK bits).
    Mode {
        mode: u32,
    },
    /// FileAllocationInformation: AllocationSize.
    Allocation {
        allocation_size: u64,
    },
    /// FileEndOfFileInformation: EndOfFile (at most i64::MAX).
    EndOfFile {
        end_of_file: u64,
    },
    /// FileDispositionInformationEx: FILE_DISPOSITION_* flags.
    DispositionEx {
        flags: u32,
    },
    /// FileFullEaInformation: the EA list to set.
    FullEa(Vec<FullEa>),
}

/// The smallest SET_INFO(FILE) input buffer for `class` (MS-FSA 2.1.5.15:
/// InputBufferSize < sizeof(...) → STATUS_INFO_LENGTH_MISMATCH); `None`
/// for classes [`decode_set_file_info`] does not accept.
pub fn min_set_size(class: u8) -> Option<usize> {
    Some(match class {
        FILE_BASIC_INFORMATION => 40,
        FILE_RENAME_INFORMATION | FILE_LINK_INFORMATION => 20,
        FILE_DISPOSITION_INFORMATION => 1,
        FILE_POSITION_INFORMATION => 8,
        FILE_MODE_INFORMATION => 4,
        FILE_ALLOCATION_INFORMATION => 8,
        FILE_END_OF_FILE_INFORMATION => 8,
        FILE_DISPOSITION_INFORMATION_EX => 4,
        FILE_FULL_EA_INFORMATION => 8,
        _ => return None,
    })
}

/// Decode a SET_INFO(FILE) input buffer. Bytes past the structure are
/// ignored (MS-FSA only rejects buffers that are too short). Errors:
/// unknown class → `InvalidInfoClass`; shorter than [`min_set_size`] →
/// `InfoLengthMismatch`; inconsistent inner lengths → `InvalidParameter`
/// (EA lists: `EaListInconsistent`).
pub fn decode_set_file_info(class: u8, buf: &[u8]) -> Result<SetFileInfo, FsccError> {
    let min = min_set_size(class).ok_or(FsccError::InvalidInfoClass(class))?;
    if buf.len() < min {
        return Err(FsccError::InfoLengthMismatch {
            need: min,
            have: buf.len(),
        });
    }
    let mut r = Reader::new(buf);
    // The length check above makes the fixed reads infallible; map anyway.
    let short = |_| FsccError::InfoLengthMismatch {
        need: min,
        have: buf.len(),
    };
    Ok(match class {
        FILE_BASIC_INFORMATION => SetFileInfo::Basic(SetBasicInfo {
            creation_time: r.u64().map_err(short)? as i64,
            last_access_time: r.u64().map_err(short)? as i64,
            last_write_time: r.u64().map_err(short)? as i64,
            change_time: r.u64().map_err(short)? as i64,
            file_attributes: r.u32().map_err(short)?,
        }),
        FILE_RENAME_INFORMATION => SetFileInfo::Rename(decode_link(buf)?),
        FILE_LINK_INFORMATION => SetFileInfo::Link(decode_link(buf)?),
        FILE_DISPOSITION_INFORMATION => SetFileInfo::Disposition {
            delete_pending: r.u8().map_err(short)? != 0,
        },
        FILE_POSITION_INFORMATION => {
            let off = r.u64().map_err(short)?;
            if off > i64::MAX as u64 {
                return Err(FsccError::InvalidParameter("negative CurrentByteOffset"));
            }
            SetFileInfo::Position {
                current_byte_offset: off,
            }
        }
        FILE_MODE_INFORMATION => {
            let mode = r.u32().map_err(short)?;
            // MS-FSA 2.1.5.15.x FileModeInformation: unknown bits, or both
            // synchronous flags at once, are STATUS_INVALID_PARAMETER.
            if mode & !FILE_MODE_VALID_MASK != 0
                || mode & (FILE_SYNCHRONOUS_IO_ALERT | FILE_SYNCHRONOUS_IO_NONALERT)
                    == (FILE_SYNCHRONOUS_IO_ALERT | FILE_SYNCHRONOUS_IO_NONALERT)
            {
                return Err(FsccError::InvalidParameter("Mode"));
            }
            SetFileInfo::Mode { mode }
        }
        FILE_ALLOCATION_INFORMATION => {
            let size = r.u64().map_err(short)?;
            if size > i64::MAX as u64 {
                return Err(FsccError::InvalidParameter("negative AllocationSize"));
            }
            SetFileInfo::Allocation {
                allocation_size: size,
            }
        }
        FILE_END_OF_FILE_INFORMATION => {
            let eof = r.u64().map_err(short)?;
            if eof > i64::MAX as u64 {
                return Err(FsccError::InvalidParameter("negative EndOfFile"));
            }
            SetFileInfo::EndOfFile { end_of_file: eof }
        }
        FILE_DISPOSITION_INFORMATION_EX => SetFileInfo::DispositionEx {
            flags: r.u32().map_err(short)?,
        },
        FILE_FULL_EA_INFORMATION => SetFileInfo::FullEa(decode_full_ea_list(buf)?),
        _ => return Err(FsccError::InvalidInfoClass(class)),
    })
}

/// MS-FSCC 2.4.42.2 / 2.4.27.2: ReplaceIfExists (1), Reserved (7),
/// RootDirectory (8), FileNameLength (4), FileName.
fn decode_link(buf: &[u8]) -> Result<SetLinkInfo, FsccError> {
    let mut r = Reader::new(buf);
    let bad = |_| FsccError::InfoLengthMismatch {
        need: 20,
        have: buf.len(),
    };
    let replace_if_exists = r.u8().map_err(bad)? != 0;
    r.skip(7).map_err(bad)?;
    let root_directory = r.u64().map_err(bad)?;
    let name_len = r.u32().map_err(bad)? as usize;
    if name_len == 0 || !name_len.is_multiple_of(2) {
        return Err(FsccError::InvalidParameter("FileNameLength"));
    }
    let name = r
        .bytes(name_len)
        .map_err(|_| FsccError::InvalidParameter("FileNameLength"))?;
    let file_name = utf16le_to_string(name).map_err(|_| FsccError::InvalidParameter("FileName"))?;
    Ok(SetLinkInfo {
        replace_if_exists,
        root_directory,
        file_name,
    })
}

/// Parse a FILE_FULL_EA_INFORMATION chain (MS-FSCC 2.4.15): NextEntryOffset
/// (4), Flags (1), EaNameLength (1), EaValueLength (2), EaName + NUL,
/// EaValue; entries 4-byte aligned, the last has NextEntryOffset 0.
pub fn decode_full_ea_list(buf: &[u8]) -> Result<Vec<FullEa>, FsccError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    loop {
        let entry = buf
            .get(pos..)
            .ok_or(FsccError::EaListInconsistent("offset"))?;
        let mut r = Reader::new(entry);
        let hdr = |_| FsccError::EaListInconsistent("entry truncated");
        let next = r.u32().map_err(hdr)? as usize;
        let flags = r.u8().map_err(hdr)?;
        let name_len = r.u8().map_err(hdr)? as usize;
        let value_len = r.u16().map_err(hdr)? as usize;
        let name = r.bytes(name_len).map_err(hdr)?;
        if r.u8().map_err(hdr)? != 0 {
            return Err(FsccError::EaListInconsistent("EaName not NUL-terminated"));
        }
        if name.is_empty() || name.contains(&0) {
            return Err(FsccError::EaListInconsistent("EaName"));
        }
        let value = r.bytes(value_len).map_err(hdr)?;
        out.push(FullEa {
            flags,
            name: name.to_vec(),
            value: value.to_vec(),
        });
        if next == 0 {
            return Ok(out);
        }
        if next < r.pos() || !next.is_multiple_of(4) {
            return Err(FsccError::EaListInconsistent("NextEntryOffset"));
        }
        pos = pos
            .checked_add(next)
            .ok_or(FsccError::EaListInconsistent("NextEntryOffset"))?;
        if pos >= buf.len() {
            return Err(FsccError::EaListInconsistent("NextEntryOffset"));
        }
    }
}

/// Encode a FILE_FULL_EA_INFORMATION chain (inverse of [`decode_full_ea_list`]).
/// Names longer than 255 bytes or values longer than 65535 bytes are cut.
pub fn encode_full_ea_list(eas: &[FullEa]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev: Option<usize> = None;
    for ea in eas {
        if let Some(p) = prev {
            out.align_to(4);
            let off = (out.len() - p) as u32;
            out.patch_u32(p, off);
        }
        let start = out.len();
        let name = &ea.name[..ea.name.len().min(255)];
        let value = &ea.value[..ea.value.len().min(65535)];
        out.put_u32(0);
        out.put_u8(ea.flags);
        out.put_u8(name.len() as u8);
        out.put_u16(value.len() as u16);
        out.extend_from_slice(name);
        out.put_u8(0);
        out.extend_from_slice(value);
        prev = Some(start);
    }
    out
}

impl SetFileInfo {
    /// The class number this value is sent with.
    pub fn class(&self) -> u8 {
        match self {
            SetFileInfo::Basic(_) => FILE_BASIC_INFORMATION,
            SetFileInfo::Rename(_) => FILE_RENAME_INFORMATION,
            SetFileInfo::Link(_) => FILE_LINK_INFORMATION,
            SetFileInfo::Disposition { .. } => FILE_DISPOSITION_INFORMATION,
            SetFileInfo::Position { .. } => FILE_POSITION_INFORMATION,
            SetFileInfo::Mode { .. } => FILE_MODE_INFORMATION,
            SetFileInfo::Allocation { .. } => FILE_ALLOCATION_INFORMATION,
            SetFileInfo::EndOfFile { .. } => FILE_END_OF_FILE_INFORMATION,
            SetFileInfo::DispositionEx { .. } => FILE_DISPOSITION_INFORMATION_EX,
            SetFileInfo::FullEa(_) => FILE_FULL_EA_INFORMATION,
        }
    }

    /// The SET_INFO input buffer (what a client sends).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            SetFileInfo::Basic(b) => {
                out.put_u64(b.creation_time as u64);
                out.put_u64(b.last_access_time as u64);
                out.put_u64(b.last_write_time as u64);
                out.put_u64(b.change_time as u64);
                out.put_u32(b.file_attributes);
                out.put_u32(0);
            }
            SetFileInfo::Rename(l) | SetFileInfo::Link(l) => {
                out.put_u8(l.replace_if_exists as u8);
                out.put_zeros(7);
                out.put_u64(l.root_directory);
                let name = string_to_utf16le(&l.file_name);
                out.put_u32(name.len() as u32);
                out.extend_from_slice(&name);
            }
            SetFileInfo::Disposition { delete_pending } => out.put_u8(*delete_pending as u8),
            SetFileInfo::Position {
                current_byte_offset: v,
            }
            | SetFileInfo::Allocation { allocation_size: v }
            | SetFileInfo::EndOfFile { end_of_file: v } => out.put_u64(*v),
            SetFileInfo::Mode { mode: v } | SetFileInfo::DispositionEx { flags: v } => {
                out.put_u32(*v)
            }
            SetFileInfo::FullEa(eas) => out = encode_full_ea_list(eas),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::NtStatus;
    use proptest::prelude::*;

    fn view() -> FileAttributesView {
        FileAttributesView {
            creation_time: 0x0102_0304_0506_0708,
            last_access_time: 0x1112_1314_1516_1718,
            last_write_time: 0x2122_2324_2526_2728,
            change_time: 0x3132_3334_3536_3738,
            allocation_size: 4096,
            end_of_file: 1234,
            file_attributes: super::super::FILE_ATTRIBUTE_ARCHIVE,
            number_of_links: 1,
            delete_pending: false,
            directory: false,
            file_id: 0xAABB_CCDD_0011_2233,
            ea_size: 0,
        }
    }

    fn input(v: &FileAttributesView) -> FileQueryInput<'_> {
        FileQueryInput {
            view: v,
            path: "dir\\file.txt",
            short_name: "FILE~1.TXT",
            access_mask: 0x001F_01FF,
            position: 0,
            mode: 0,
            volume_serial: 0x1234_5678,
            // A file has its default stream; a directory none.
            streams: if v.directory {
                &[]
            } else {
                Box::leak(Box::new([StreamInfo {
                    name: DEFAULT_STREAM_NAME.into(),
                    size: v.end_of_file,
                    allocation_size: v.allocation_size,
                }]))
            },
        }
    }

    const ALL_QUERY: [u8; 17] = [4, 5, 6, 7, 8, 9, 14, 16, 17, 18, 21, 22, 28, 34, 35, 48, 59];

    #[test]
    fn fscc_query_fixed_sizes_match_ms_fscc() {
        let v = view();
        let q = input(&v);
        for (class, size) in [
            (FILE_BASIC_INFORMATION, 40),
            (FILE_STANDARD_INFORMATION, 24),
            (FILE_INTERNAL_INFORMATION, 8),
            (FILE_EA_INFORMATION, 4),
            (FILE_ACCESS_INFORMATION, 4),
            (FILE_POSITION_INFORMATION, 8),
            (FILE_MODE_INFORMATION, 4),
            (FILE_ALIGNMENT_INFORMATION, 4),
            (FILE_COMPRESSION_INFORMATION, 16),
            (FILE_NETWORK_OPEN_INFORMATION, 56),
            (FILE_ATTRIBUTE_TAG_INFORMATION, 8),
            (FILE_ID_INFORMATION, 24),
        ] {
            let b = encode_query_file_info(class, &q).unwrap();
            assert_eq!(b.len(), size, "class {class}");
            assert_eq!(min_size(class), Some(size), "class {class}");
            assert!(!is_variable_length(class));
        }
    }

    #[test]
    fn fscc_smbtorture_qfile_buffercheck_table() {
        // source4/torture/smb2/getinfo.c torture_smb2_qfile_buffercheck
        for (class, fixed) in [
            (4u8, 40usize),
            (5, 24),
            (6, 8),
            (7, 4),
            (8, 4),
            (16, 4),
            (17, 4),
            (18, 104),
            (21, 8),
            (22, 32),
            (28, 16),
            (34, 56),
            (35, 8),
        ] {
            assert_eq!(min_size(class), Some(fixed), "class {class}");
        }
    }

    #[test]
    fn fscc_basic_golden() {
        let v = view();
        let b = encode_query_file_info(FILE_BASIC_INFORMATION, &input(&v)).unwrap();
        assert_eq!(
            hex::encode(&b),
            concat!(
                "0807060504030201",
                "1817161514131211",
                "2827262524232221",
                "3837363534333231",
                "20000000",
                "00000000"
            )
        );
    }

    #[test]
    fn fscc_standard_and_network_open_golden() {
        let mut v = view();
        v.delete_pending = true;
        let b = encode_query_file_info(FILE_STANDARD_INFORMATION, &input(&v)).unwrap();
        assert_eq!(
            hex::encode(&b),
            "0010000000000000d2040000000000000100000001000000"
        );
        let b = encode_query_file_info(FILE_NETWORK_OPEN_INFORMATION, &input(&v)).unwrap();
        assert_eq!(&b[32..40], &4096u64.to_le_bytes());
        assert_eq!(&b[40..48], &1234u64.to_le_bytes());
        assert_eq!(&b[48..52], &0x20u32.to_le_bytes());
        assert_eq!(&b[52..56], &[0, 0, 0, 0]);
    }

    #[test]
    fn fscc_all_information_layout() {
        let v = view();
        let mut q = input(&v);
        q.position = 77;
        q.mode = FILE_SYNCHRONOUS_IO_NONALERT;
        let b = encode_query_file_info(FILE_ALL_INFORMATION, &q).unwrap();
        let name = string_to_utf16le("\\dir\\file.txt");
        assert_eq!(b.len(), FILE_ALL_INFORMATION_HEADER + name.len());
        let basic = encode_query_file_info(FILE_BASIC_INFORMATION, &q).unwrap();
        let std = encode_query_file_info(FILE_STANDARD_INFORMATION, &q).unwrap();
        assert_eq!(&b[0..40], &basic[..]);
        assert_eq!(&b[40..64], &std[..]);
        assert_eq!(&b[64..72], &v.file_id.to_le_bytes());
        assert_eq!(&b[72..76], &0u32.to_le_bytes()); // EaSize
        assert_eq!(&b[76..80], &0x001F_01FFu32.to_le_bytes());
        assert_eq!(&b[80..88], &77u64.to_le_bytes());
        assert_eq!(&b[88..92], &0x20u32.to_le_bytes());
        assert_eq!(&b[92..96], &0u32.to_le_bytes());
        assert_eq!(&b[96..100], &(name.len() as u32).to_le_bytes());
        assert_eq!(&b[100..], &name[..]);
    }

    #[test]
    fn fscc_names_and_streams() {
        let v = view();
        let q = input(&v);
        let b = encode_query_file_info(FILE_NAME_INFORMATION, &q).unwrap();
        assert_eq!(&b[4..], &string_to_utf16le("\\dir\\file.txt")[..]);
        let b = encode_query_file_info(FILE_NORMALIZED_NAME_INFORMATION, &q).unwrap();
        assert_eq!(&b[4..], &string_to_utf16le("dir\\file.txt")[..]);
        let b = encode_query_file_info(FILE_ALTERNATE_NAME_INFORMATION, &q).unwrap();
        assert_eq!(u32::from_le_bytes(b[0..4].try_into().unwrap()), 20);
        let mut q2 = q;
        q2.short_name = "";
        assert_eq!(
            encode_query_file_info(FILE_ALTERNATE_NAME_INFORMATION, &q2)
                .unwrap_err()
                .status(),
            NtStatus::OBJECT_NAME_NOT_FOUND
        );
        let root = FileQueryInput { path: "", ..q };
        let b = encode_query_file_info(FILE_NAME_INFORMATION, &root).unwrap();
        assert_eq!(hex::encode(&b), "020000005c00");

        let b = encode_query_file_info(FILE_STREAM_INFORMATION, &q).unwrap();
        assert_eq!(b.len(), 24 + 14);
        assert_eq!(&b[0..4], &[0, 0, 0, 0]);
        assert_eq!(&b[4..8], &14u32.to_le_bytes());
        assert_eq!(&b[8..16], &1234u64.to_le_bytes());
        assert_eq!(&b[16..24], &4096u64.to_le_bytes());
        assert_eq!(&b[24..], &string_to_utf16le("::$DATA")[..]);
        let mut d = view();
        d.directory = true;
        let b = encode_query_file_info(FILE_STREAM_INFORMATION, &input(&d)).unwrap();
        assert!(b.is_empty());
    }

    #[test]
    fn stream_information_entries_are_aligned_and_chained() {
        let v = view();
        let streams = [
            StreamInfo {
                name: "::$DATA".into(),
                size: 10,
                allocation_size: 16,
            },
            StreamInfo {
                name: ":ab:$DATA".into(),
                size: 3,
                allocation_size: 8,
            },
            StreamInfo {
                name: ":Second Stream:$DATA".into(),
                size: 0,
                allocation_size: 0,
            },
        ];
        let q = FileQueryInput {
            streams: &streams,
            ..input(&v)
        };
        let b = encode_query_file_info(FILE_STREAM_INFORMATION, &q).unwrap();
        let mut at = 0usize;
        let mut seen = Vec::new();
        loop {
            assert_eq!(at % 8, 0);
            let next = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
            let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
            let size = u64::from_le_bytes(b[at + 8..at + 16].try_into().unwrap());
            let name = utf16le_to_string(&b[at + 24..at + 24 + len]).unwrap();
            seen.push((name, size));
            if next == 0 {
                // The last entry ends the buffer (no padding after it).
                assert_eq!(at + 24 + len, b.len());
                break;
            }
            assert!(next >= 24 + len);
            at += next;
        }
        assert_eq!(
            seen,
            vec![
                ("::$DATA".to_string(), 10),
                (":ab:$DATA".to_string(), 3),
                (":Second Stream:$DATA".to_string(), 0)
            ]
        );
        // A directory with a named stream lists just that.
        let mut d = view();
        d.directory = true;
        let q = FileQueryInput {
            streams: &streams[1..2],
            ..input(&d)
        };
        let b = encode_query_file_info(FILE_STREAM_INFORMATION, &q).unwrap();
        assert_eq!(b.len(), 24 + 18);
    }

    #[test]
    fn fscc_query_buffercheck_behaviour() {
        // smbtorture torture_smb2_buffercheck_err: i < fixed → mismatch,
        // fixed <= i < full → BUFFER_OVERFLOW, i == full → SUCCESS.
        let v = view();
        let q = input(&v);
        for class in ALL_QUERY {
            let full = encode_query_file_info(class, &q).unwrap();
            let fixed = min_size(class).unwrap();
            for i in 0..=full.len().max(fixed) as u32 + 2 {
                let r = query_file_info(class, &q, i);
                if (i as usize) < fixed {
                    assert_eq!(r.unwrap_err().status(), NtStatus::INFO_LENGTH_MISMATCH);
                } else if (i as usize) < full.len() {
                    assert!(is_variable_length(class), "class {class}");
                    let o = r.unwrap();
                    assert_eq!(o.status, NtStatus::BUFFER_OVERFLOW, "class {class} len {i}");
                    assert!(o.data.len() <= i as usize && o.data.len() + 1 >= i as usize);
                    assert_eq!(&o.data[..], &full[..o.data.len()]);
                } else {
                    let o = r.unwrap();
                    assert_eq!(o.status, NtStatus::SUCCESS);
                    assert_eq!(o.data, full);
                }
            }
        }
        assert_eq!(
            query_file_info(200, &q, 1000).unwrap_err().status(),
            NtStatus::INVALID_INFO_CLASS
        );
    }

    #[test]
    fn fscc_set_decoders() {
        let basic = SetFileInfo::Basic(SetBasicInfo {
            creation_time: -1,
            last_access_time: 0,
            last_write_time: 5,
            change_time: -2,
            file_attributes: 0x20,
        });
        let enc = basic.encode();
        assert_eq!(enc.len(), 40);
        assert_eq!(decode_set_file_info(4, &enc).unwrap(), basic);
        assert_eq!(
            decode_set_file_info(4, &enc[..36]).unwrap_err().status(),
            NtStatus::INFO_LENGTH_MISMATCH
        );

        let ren = SetFileInfo::Rename(SetLinkInfo {
            replace_if_exists: true,
            root_directory: 0,
            file_name: "a\\b.txt".into(),
        });
        let mut enc = ren.encode();
        assert_eq!(enc.len(), 20 + 14);
        assert_eq!(decode_set_file_info(10, &enc).unwrap(), ren);
        enc.extend_from_slice(&[0, 0]); // padding is fine
        assert_eq!(decode_set_file_info(10, &enc).unwrap(), ren);
        let mut bad = ren.encode();
        bad[16..20].copy_from_slice(&100u32.to_le_bytes());
        assert_eq!(
            decode_set_file_info(10, &bad).unwrap_err().status(),
            NtStatus::INVALID_PARAMETER
        );
        assert_eq!(
            decode_set_file_info(11, &bad[..19]).unwrap_err().status(),
            NtStatus::INFO_LENGTH_MISMATCH
        );

        assert_eq!(
            decode_set_file_info(13, &[1]).unwrap(),
            SetFileInfo::Disposition {
                delete_pending: true
            }
        );
        assert_eq!(
            decode_set_file_info(13, &[]).unwrap_err().status(),
            NtStatus::INFO_LENGTH_MISMATCH
        );
        assert_eq!(
            decode_set_file_info(64, &3u32.to_le_bytes()).unwrap(),
            SetFileInfo::DispositionEx { flags: 3 }
        );
        assert_eq!(
            decode_set_file_info(20, &u64::MAX.to_le_bytes())
                .unwrap_err()
                .status(),
            NtStatus::INVALID_PARAMETER
        );
        assert_eq!(
            decode_set_file_info(16, &0x40u32.to_le_bytes())
                .unwrap_err()
                .status(),
            NtStatus::INVALID_PARAMETER
        );
        assert_eq!(
            decode_set_file_info(16, &2u32.to_le_bytes()).unwrap(),
            SetFileInfo::Mode { mode: 2 }
        );
        assert_eq!(
            decode_set_file_info(99, &[0; 64]).unwrap_err().status(),
            NtStatus::INVALID_INFO_CLASS
        );
    }

    #[test]
    fn fscc_full_ea_roundtrip_and_errors() {
        let eas = vec![
            FullEa {
                flags: 0,
                name: b"EAONE".to_vec(),
                value: b"VALUE1".to_vec(),
            },
            FullEa {
                flags: 0x80,
                name: b"SECONDEA".to_vec(),
                value: b"ValueTwo".to_vec(),
            },
            FullEa {
                flags: 0,
                name: b"X".to_vec(),
                value: vec![],
            },
        ];
        let enc = encode_full_ea_list(&eas);
        // first entry: 8 + 5 + 1 + 6 = 20, already aligned
        assert_eq!(u32::from_le_bytes(enc[0..4].try_into().unwrap()), 20);
        assert_eq!(
            decode_set_file_info(15, &enc).unwrap(),
            SetFileInfo::FullEa(eas)
        );
        let mut bad = enc.clone();
        bad[0..4].copy_from_slice(&2u32.to_le_bytes());
        assert_eq!(
            decode_full_ea_list(&bad).unwrap_err().status(),
            NtStatus(0x8000_0014)
        );
        let mut bad = enc;
        bad[13] = 1; // NUL terminator of the first name
        assert!(decode_full_ea_list(&bad).is_err());
    }

    proptest! {
        #[test]
        fn fscc_set_decoders_never_panic(class in 0u8..=255, buf in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = decode_set_file_info(class, &buf);
            let _ = decode_full_ea_list(&buf);
        }

        #[test]
        fn fscc_set_roundtrip(name in "[a-zA-Z0-9_\\\\ .é€]{1,40}", replace: bool, eof in 0u64..=i64::MAX as u64) {
            let l = SetFileInfo::Link(SetLinkInfo { replace_if_exists: replace, root_directory: 0, file_name: name });
            prop_assert_eq!(decode_set_file_info(l.class(), &l.encode()).unwrap(), l);
            let e = SetFileInfo::EndOfFile { end_of_file: eof };
            prop_assert_eq!(decode_set_file_info(e.class(), &e.encode()).unwrap(), e);
        }

        #[test]
        fn fscc_ea_roundtrip(eas in proptest::collection::vec(
            (any::<u8>(), proptest::collection::vec(1u8..=255, 1..20), proptest::collection::vec(any::<u8>(), 0..40)), 1..5)) {
            let eas: Vec<FullEa> = eas.into_iter().map(|(flags, name, value)| FullEa { flags, name, value }).collect();
            prop_assert_eq!(decode_full_ea_list(&encode_full_ea_list(&eas)).unwrap(), eas);
        }
    }
}
