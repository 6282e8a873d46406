//! MS-FSCC 2.4 directory-enumeration classes carried by SMB2
//! QUERY_DIRECTORY (MS-SMB2 2.2.33 / 3.3.5.18), and a builder that packs
//! entries into the client's OutputBufferLength.
//!
//! Every entry starts with NextEntryOffset (4) and FileIndex (4); entries
//! are 8-byte aligned, the pad bytes are zero, the last entry has
//! NextEntryOffset 0 and is not followed by padding (MS-FSCC 2.4.x: "No
//! padding is required following the last data element").
//!
//! Fixed part (offset of FileName) per class:
//!
//! | class | number | fixed |
//! |---|---|---|
//! | FileDirectoryInformation | 1 | 64 |
//! | FileFullDirectoryInformation | 2 | 68 |
//! | FileBothDirectoryInformation | 3 | 94 |
//! | FileNamesInformation | 12 | 12 |
//! | FileIdBothDirectoryInformation | 37 | 104 |
//! | FileIdFullDirectoryInformation | 38 | 80 |
//! | FileIdExtdDirectoryInformation | 60 | 88 |
//! | FileId64ExtdDirectoryInformation | 78 | 80 |
//! | FileIdAllExtdDirectoryInformation | 80 | 96 |

use super::file_info::{
    FILE_BOTH_DIRECTORY_INFORMATION, FILE_DIRECTORY_INFORMATION, FILE_FULL_DIRECTORY_INFORMATION,
    FILE_ID_64_EXTD_DIRECTORY_INFORMATION, FILE_ID_ALL_EXTD_DIRECTORY_INFORMATION,
    FILE_ID_BOTH_DIRECTORY_INFORMATION, FILE_ID_EXTD_DIRECTORY_INFORMATION,
    FILE_ID_FULL_DIRECTORY_INFORMATION, FILE_NAMES_INFORMATION,
};
use super::{put_times, FileAttributesView, FsccError};
use crate::codec::{string_to_utf16le, WriteLe};

/// What macOS clients that negotiated AAPL READ_DIR_ATTR
/// (`messages::aapl`) get in a FileIdBothDirectoryInformation entry in
/// place of the EA size, the short name and Reserved2 (as Apple's server
/// and Samba's vfs_fruit fill them): the entry's maximal access, its
/// resource fork size and packed Finder info, and its UNIX mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AaplDirEntry {
    pub max_access: u32,
    pub resource_fork_size: u64,
    /// Type, creator, Finder flags, extended flags, date added (BE).
    pub finder_info: [u8; 16],
    /// `st_mode`, file type bits included, cut to 16 bits.
    pub unix_mode: u16,
}

/// Bytes before FileName in one entry of `class`; `None` for a class
/// QUERY_DIRECTORY does not support (→ STATUS_INVALID_INFO_CLASS).
pub fn entry_header_size(class: u8) -> Option<usize> {
    Some(match class {
        FILE_DIRECTORY_INFORMATION => 64,
        FILE_FULL_DIRECTORY_INFORMATION => 68,
        FILE_BOTH_DIRECTORY_INFORMATION => 94,
        FILE_NAMES_INFORMATION => 12,
        FILE_ID_BOTH_DIRECTORY_INFORMATION => 104,
        FILE_ID_FULL_DIRECTORY_INFORMATION => 80,
        FILE_ID_EXTD_DIRECTORY_INFORMATION => 88,
        FILE_ID_64_EXTD_DIRECTORY_INFORMATION => 80,
        FILE_ID_ALL_EXTD_DIRECTORY_INFORMATION => 96,
        _ => return None,
    })
}

/// Append one entry of `class` (NextEntryOffset 0) to `out`.
/// `short_name` is used by the *Both* classes only and is cut to 12 UTF-16
/// units (MS-FSCC 2.4.8: ShortName is 24 bytes).
fn put_entry(
    out: &mut Vec<u8>,
    class: u8,
    name: &[u8],
    short_name: &str,
    v: &FileAttributesView,
    file_index: u32,
    aapl: Option<&AaplDirEntry>,
) {
    let aapl = aapl.filter(|_| class == FILE_ID_BOTH_DIRECTORY_INFORMATION);
    out.put_u32(0); // NextEntryOffset, patched when another entry follows
    out.put_u32(file_index);
    if class == FILE_NAMES_INFORMATION {
        // MS-FSCC 2.4.33 FILE_NAMES_INFORMATION
        out.put_u32(name.len() as u32);
        out.extend_from_slice(name);
        return;
    }
    // Common head of MS-FSCC 2.4.10 FILE_DIRECTORY_INFORMATION and the rest.
    put_times(out, v);
    out.put_u64(v.end_of_file);
    out.put_u64(v.allocation_size);
    out.put_u32(v.wire_attributes());
    out.put_u32(name.len() as u32);
    if class == FILE_DIRECTORY_INFORMATION {
        out.extend_from_slice(name);
        return;
    }
    // EaSize (MS-FSCC: holds the reparse tag when FILE_ATTRIBUTE_REPARSE_POINT
    // is set; Braid reports no reparse points).
    out.put_u32(aapl.map_or(v.ea_size, |a| a.max_access));
    match class {
        // MS-FSCC 2.4.17 FILE_FULL_DIR_INFORMATION
        FILE_FULL_DIRECTORY_INFORMATION => {}
        // MS-FSCC 2.4.8 FILE_BOTH_DIR_INFORMATION, 2.4.21 FILE_ID_BOTH_DIR_INFORMATION
        FILE_ID_BOTH_DIRECTORY_INFORMATION if aapl.is_some() => {
            let a = aapl.expect("checked by the guard");
            // ShortNameLength 24 (what Apple's clients expect), then the
            // fork size and Finder info in the ShortName bytes.
            out.put_u8(24);
            out.put_u8(0);
            out.put_u64(a.resource_fork_size);
            out.extend_from_slice(&a.finder_info);
            out.put_u16(a.unix_mode); // Reserved2
            out.put_u64(v.file_id);
        }
        FILE_BOTH_DIRECTORY_INFORMATION | FILE_ID_BOTH_DIRECTORY_INFORMATION => {
            let mut short = string_to_utf16le(short_name);
            short.truncate(24);
            out.put_u8(short.len() as u8);
            out.put_u8(0); // Reserved
            let at = out.len();
            out.extend_from_slice(&short);
            out.resize(at + 24, 0);
            if class == FILE_ID_BOTH_DIRECTORY_INFORMATION {
                out.put_u16(0); // Reserved2
                out.put_u64(v.file_id);
            }
        }
        // MS-FSCC 2.4.24 FILE_ID_FULL_DIR_INFORMATION
        FILE_ID_FULL_DIRECTORY_INFORMATION => {
            out.put_u32(0); // Reserved
            out.put_u64(v.file_id);
        }
        // MS-FSCC 2.4.22 FILE_ID_EXTD_DIR_INFORMATION
        FILE_ID_EXTD_DIRECTORY_INFORMATION => {
            out.put_u32(0); // ReparsePointTag
            out.put_u64(v.file_id); // FileId (128-bit, zero-extended)
            out.put_u64(0);
        }
        // MS-FSCC 2.4.18 FILE_ID_64_EXTD_DIR_INFORMATION
        FILE_ID_64_EXTD_DIRECTORY_INFORMATION => {
            out.put_u32(0); // ReparsePointTag
            out.put_u64(v.file_id);
        }
        // MS-FSCC 2.4.20 FILE_ID_ALL_EXTD_DIR_INFORMATION
        FILE_ID_ALL_EXTD_DIRECTORY_INFORMATION => {
            out.put_u32(0); // ReparsePointTag
            out.put_u64(v.file_id); // FileId
            out.put_u64(v.file_id); // FileId128
            out.put_u64(0);
        }
        _ => unreachable!("class checked by DirListingEncoder::new"),
    }
    out.extend_from_slice(name);
}

/// Packs QUERY_DIRECTORY entries of one class into at most `max_len`
/// bytes (the request's OutputBufferLength, already clamped by the server
/// to its MaxTransactSize).
///
/// ```
/// # use braid_smb_proto::fscc::{DirListingEncoder, FileAttributesView};
/// let mut enc = DirListingEncoder::new(37, 65536).unwrap();
/// let v = FileAttributesView::default();
/// assert!(enc.push(".", "", &v, 0));
/// assert!(enc.push("a.txt", "A.TXT", &v, 0));
/// let bytes = enc.finish();
/// assert_eq!(u32::from_le_bytes(bytes[0..4].try_into().unwrap()), 112);
/// ```
///
/// When the very first entry does not fit (`push` false while
/// [`DirListingEncoder::is_empty`]), MS-SMB2 3.3.5.18 / MS-FSA 2.1.5.6.3
/// answer STATUS_BUFFER_OVERFLOW; when the enumeration is exhausted with
/// nothing pushed, STATUS_NO_MORE_FILES (or NO_SUCH_FILE on the first
/// query). Those decisions are the server's.
#[derive(Debug, Clone)]
pub struct DirListingEncoder {
    class: u8,
    max_len: usize,
    buf: Vec<u8>,
    last_entry: Option<usize>,
    count: usize,
}

impl DirListingEncoder {
    /// `Err(InvalidInfoClass)` for a class QUERY_DIRECTORY does not carry.
    /// A `max_len` smaller than one entry's fixed part is not an error
    /// here: every `push` then returns false.
    pub fn new(class: u8, max_len: usize) -> Result<Self, FsccError> {
        entry_header_size(class).ok_or(FsccError::InvalidInfoClass(class))?;
        Ok(DirListingEncoder {
            class,
            max_len,
            buf: Vec::with_capacity(max_len.min(64 * 1024)),
            last_entry: None,
            count: 0,
        })
    }

    pub fn class(&self) -> u8 {
        self.class
    }

    /// Append one entry. Returns false, leaving the buffer untouched, when
    /// it (with the alignment padding before it) would exceed `max_len`;
    /// the caller keeps that entry for the next response.
    pub fn push(
        &mut self,
        name: &str,
        short_name: &str,
        view: &FileAttributesView,
        file_index: u32,
    ) -> bool {
        self.push_entry(name, short_name, view, file_index, None)
    }

    /// [`Self::push`] with Apple's data in place of the short name, for a
    /// FileIdBothDirectoryInformation listing (other classes ignore it).
    pub fn push_aapl(
        &mut self,
        name: &str,
        view: &FileAttributesView,
        file_index: u32,
        aapl: &AaplDirEntry,
    ) -> bool {
        self.push_entry(name, "", view, file_index, Some(aapl))
    }

    fn push_entry(
        &mut self,
        name: &str,
        short_name: &str,
        view: &FileAttributesView,
        file_index: u32,
        aapl: Option<&AaplDirEntry>,
    ) -> bool {
        let name16 = string_to_utf16le(name);
        let header = entry_header_size(self.class).expect("class checked in new");
        let start = if self.last_entry.is_some() {
            align8(self.buf.len())
        } else {
            0
        };
        let end = match start
            .checked_add(header)
            .and_then(|e| e.checked_add(name16.len()))
        {
            Some(e) => e,
            None => return false,
        };
        if end > self.max_len || name16.len() > u32::MAX as usize {
            return false;
        }
        if let Some(prev) = self.last_entry {
            self.buf.align_to(8);
            let off = (start - prev) as u32;
            self.buf.patch_u32(prev, off);
        }
        debug_assert_eq!(self.buf.len(), start);
        put_entry(
            &mut self.buf,
            self.class,
            &name16,
            short_name,
            view,
            file_index,
            aapl,
        );
        debug_assert_eq!(self.buf.len(), end);
        self.last_entry = Some(start);
        self.count += 1;
        true
    }

    /// Number of entries pushed.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes used so far (no trailing padding).
    pub fn bytes_used(&self) -> usize {
        self.buf.len()
    }

    /// The OutputBuffer: entries chained by NextEntryOffset, the last
    /// one's NextEntryOffset 0, no padding after it.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

fn align8(n: usize) -> usize {
    (n + 7) & !7
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{utf16le_to_string, Reader};
    use crate::status::NtStatus;
    use proptest::prelude::*;

    const CLASSES: [u8; 9] = [1, 2, 3, 12, 37, 38, 60, 78, 80];

    fn view(id: u64) -> FileAttributesView {
        FileAttributesView {
            creation_time: 1,
            last_access_time: 2,
            last_write_time: 3,
            change_time: 4,
            allocation_size: 4096,
            end_of_file: 100,
            file_attributes: 0,
            number_of_links: 1,
            delete_pending: false,
            directory: false,
            file_id: id,
            ea_size: 0,
        }
    }

    /// Walk the chain; return (entry offset, name) pairs.
    fn walk(class: u8, buf: &[u8]) -> Vec<(usize, String)> {
        let header = entry_header_size(class).unwrap();
        let name_len_at = if class == FILE_NAMES_INFORMATION {
            8
        } else {
            60
        };
        let mut out = Vec::new();
        let mut pos = 0;
        loop {
            assert_eq!(pos % 8, 0, "entry not 8-aligned");
            let mut r = Reader::at(buf, pos);
            let next = r.u32().unwrap() as usize;
            let mut r = Reader::at(buf, pos + name_len_at);
            let nl = r.u32().unwrap() as usize;
            let name = utf16le_to_string(&buf[pos + header..pos + header + nl]).unwrap();
            out.push((pos, name));
            if next == 0 {
                assert_eq!(
                    pos + header + nl,
                    buf.len(),
                    "trailing bytes after last entry"
                );
                return out;
            }
            assert!(next >= header + nl);
            assert!(
                next - (header + nl) < 8,
                "more padding than alignment needs"
            );
            for &b in &buf[pos + header + nl..pos + next] {
                assert_eq!(b, 0, "padding not zero");
            }
            pos += next;
        }
    }

    #[test]
    fn aapl_entry_replaces_ea_size_short_name_and_reserved2() {
        let a = AaplDirEntry {
            max_access: 0x001F_01FF,
            resource_fork_size: 3,
            finder_info: *b"SMB,OLE!\x01\x02\x03\x04\x80\x00\x00\x00",
            unix_mode: 0o100644,
        };
        let mut enc = DirListingEncoder::new(FILE_ID_BOTH_DIRECTORY_INFORMATION, 4096).unwrap();
        assert!(enc.push_aapl("test_aapl", &view(77), 0, &a));
        let b = enc.finish();
        assert_eq!(
            walk(FILE_ID_BOTH_DIRECTORY_INFORMATION, &b)[0].1,
            "test_aapl"
        );
        assert_eq!(
            u32::from_le_bytes(b[64..68].try_into().unwrap()),
            a.max_access
        );
        assert_eq!(b[68], 24); // ShortNameLength
        assert_eq!(u64::from_le_bytes(b[70..78].try_into().unwrap()), 3);
        assert_eq!(&b[78..94], &a.finder_info);
        assert_eq!(u16::from_le_bytes(b[94..96].try_into().unwrap()), 0o100644);
        assert_eq!(u64::from_le_bytes(b[96..104].try_into().unwrap()), 77);
        // Other classes carry no Apple data.
        let mut full = DirListingEncoder::new(FILE_FULL_DIRECTORY_INFORMATION, 4096).unwrap();
        assert!(full.push_aapl("x", &view(1), 0, &a));
        assert_eq!(
            u32::from_le_bytes(full.finish()[64..68].try_into().unwrap()),
            0
        );
    }

    #[test]
    fn fscc_dir_entry_sizes() {
        for class in CLASSES {
            let mut e = DirListingEncoder::new(class, 4096).unwrap();
            assert!(e.push("ab", "AB", &view(9), 7));
            let b = e.finish();
            assert_eq!(
                b.len(),
                entry_header_size(class).unwrap() + 4,
                "class {class}"
            );
            assert_eq!(&b[0..4], &[0, 0, 0, 0]);
            assert_eq!(&b[4..8], &7u32.to_le_bytes());
        }
    }

    #[test]
    fn fscc_dir_id_both_golden_layout() {
        let mut e = DirListingEncoder::new(FILE_ID_BOTH_DIRECTORY_INFORMATION, 4096).unwrap();
        assert!(e.push("longname.txt", "LONGNA~1.TXT", &view(0x55), 0));
        let b = e.finish();
        assert_eq!(&b[8..16], &1u64.to_le_bytes());
        assert_eq!(&b[40..48], &100u64.to_le_bytes()); // EndOfFile
        assert_eq!(&b[48..56], &4096u64.to_le_bytes()); // AllocationSize
        assert_eq!(&b[56..60], &0x80u32.to_le_bytes()); // NORMAL
        assert_eq!(&b[60..64], &24u32.to_le_bytes());
        assert_eq!(&b[64..68], &0u32.to_le_bytes()); // EaSize
        assert_eq!(b[68], 24); // ShortNameLength
        assert_eq!(b[69], 0);
        assert_eq!(&b[70..94], &string_to_utf16le("LONGNA~1.TXT")[..]);
        assert_eq!(&b[94..96], &[0, 0]);
        assert_eq!(&b[96..104], &0x55u64.to_le_bytes());
        assert_eq!(&b[104..], &string_to_utf16le("longname.txt")[..]);
    }

    #[test]
    fn fscc_dir_extd_layouts() {
        for (class, id_at, name_at) in [(60u8, 72usize, 88usize), (78, 72, 80), (80, 72, 96)] {
            let mut e = DirListingEncoder::new(class, 4096).unwrap();
            assert!(e.push("x", "", &view(0x1122), 0));
            let b = e.finish();
            assert_eq!(&b[68..72], &[0, 0, 0, 0], "ReparsePointTag");
            assert_eq!(&b[id_at..id_at + 8], &0x1122u64.to_le_bytes());
            assert_eq!(b.len(), name_at + 2);
        }
    }

    #[test]
    fn fscc_dir_chaining_and_alignment() {
        for class in CLASSES {
            let mut e = DirListingEncoder::new(class, 65536).unwrap();
            let names = [
                ".",
                "..",
                "a",
                "bb",
                "ccc",
                "dddd",
                "ééééé",
                "long name with spaces.txt",
            ];
            for (i, n) in names.iter().enumerate() {
                assert!(e.push(n, "", &view(i as u64), i as u32));
            }
            assert_eq!(e.len(), names.len());
            let b = e.finish();
            let got: Vec<String> = walk(class, &b).into_iter().map(|(_, n)| n).collect();
            assert_eq!(got, names);
        }
    }

    #[test]
    fn fscc_dir_truncation() {
        let class = FILE_DIRECTORY_INFORMATION;
        // entry "a" = 66 bytes; second starts at 72 → needs 138.
        let mut e = DirListingEncoder::new(class, 137).unwrap();
        assert!(e.push("a", "", &view(1), 0));
        assert!(!e.push("b", "", &view(2), 0));
        assert_eq!(e.bytes_used(), 66);
        assert!(!e.push("b", "", &view(2), 0), "refusal is stable");
        let b = e.finish();
        assert_eq!(walk(class, &b).len(), 1);

        let mut e = DirListingEncoder::new(class, 138).unwrap();
        assert!(e.push("a", "", &view(1), 0));
        assert!(e.push("b", "", &view(2), 0));
        assert_eq!(e.finish().len(), 138);

        let mut e = DirListingEncoder::new(class, 10).unwrap();
        assert!(!e.push("a", "", &view(1), 0));
        assert!(e.is_empty());
        assert!(e.finish().is_empty());
    }

    #[test]
    fn fscc_dir_unknown_class() {
        assert_eq!(
            DirListingEncoder::new(4, 100).unwrap_err().status(),
            NtStatus::INVALID_INFO_CLASS
        );
    }

    proptest! {
        #[test]
        fn fscc_dir_never_exceeds_max(class_i in 0usize..9, max in 0usize..2048,
                                      names in proptest::collection::vec("[a-zA-Z0-9 ._é]{1,30}", 1..40)) {
            let class = CLASSES[class_i];
            let mut e = DirListingEncoder::new(class, max).unwrap();
            let mut pushed = Vec::new();
            for n in &names {
                if !e.push(n, "SHORT.TXT", &view(1), 0) { break; }
                pushed.push(n.clone());
            }
            let b = e.finish();
            prop_assert!(b.len() <= max);
            if pushed.is_empty() {
                prop_assert!(b.is_empty());
            } else {
                let got: Vec<String> = walk(class, &b).into_iter().map(|(_, n)| n).collect();
                prop_assert_eq!(got, pushed);
            }
        }
    }
}
