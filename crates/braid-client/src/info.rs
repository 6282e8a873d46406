//! Client-side decoders for the MS-FSCC structures the client reads back:
//! FileStandardInformation (2.4.41), FileBasicInformation (2.4.7) and
//! FileDirectoryInformation (2.4.10) entries. All bounds-checked.

use braid_smb_proto::codec::utf16le_to_string;
use braid_smb_proto::{DecodeError, DecodeResult, Reader};

/// MS-FSCC 2.4.41 FileStandardInformation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandardInfo {
    pub allocation_size: u64,
    pub end_of_file: u64,
    pub number_of_links: u32,
    pub delete_pending: bool,
    pub directory: bool,
}

impl StandardInfo {
    pub fn decode(b: &[u8]) -> DecodeResult<Self> {
        let mut r = Reader::new(b);
        Ok(StandardInfo {
            allocation_size: r.u64()?,
            end_of_file: r.u64()?,
            number_of_links: r.u32()?,
            delete_pending: r.u8()? != 0,
            directory: r.u8()? != 0,
        })
    }
}

/// MS-FSCC 2.4.7 FileBasicInformation (times are FILETIME).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicInfo {
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub file_attributes: u32,
}

impl BasicInfo {
    pub fn decode(b: &[u8]) -> DecodeResult<Self> {
        let mut r = Reader::new(b);
        Ok(BasicInfo {
            creation_time: r.u64()?,
            last_access_time: r.u64()?,
            last_write_time: r.u64()?,
            change_time: r.u64()?,
            file_attributes: r.u32()?,
        })
    }
}

/// One entry of a FileDirectoryInformation listing (MS-FSCC 2.4.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub end_of_file: u64,
    pub allocation_size: u64,
    pub file_attributes: u32,
    pub last_write_time: u64,
}

impl DirEntry {
    pub fn is_dir(&self) -> bool {
        self.file_attributes & braid_smb_proto::fscc::FILE_ATTRIBUTE_DIRECTORY != 0
    }

    /// Decode a chain of entries linked by NextEntryOffset.
    pub fn decode_list(b: &[u8]) -> DecodeResult<Vec<DirEntry>> {
        let mut out = Vec::new();
        let mut pos = 0usize;
        while pos < b.len() {
            let mut r = Reader::at(b, pos);
            let next = r.u32()? as usize;
            r.skip(4)?; // FileIndex
            r.skip(8)?; // CreationTime
            r.skip(8)?; // LastAccessTime
            let last_write_time = r.u64()?;
            r.skip(8)?; // ChangeTime
            let end_of_file = r.u64()?;
            let allocation_size = r.u64()?;
            let file_attributes = r.u32()?;
            let name_len = r.u32()? as usize;
            let name = utf16le_to_string(r.bytes(name_len)?)?;
            out.push(DirEntry {
                name,
                end_of_file,
                allocation_size,
                file_attributes,
                last_write_time,
            });
            if next == 0 {
                break;
            }
            if next < 64 {
                return Err(DecodeError::Invalid("NextEntryOffset"));
            }
            pos = pos
                .checked_add(next)
                .ok_or(DecodeError::Invalid("NextEntryOffset"))?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_listings_do_not_panic() {
        for n in 0..200usize {
            let b: Vec<u8> = (0..n).map(|i| (i * 37 % 251) as u8).collect();
            let _ = DirEntry::decode_list(&b);
            let _ = StandardInfo::decode(&b);
            let _ = BasicInfo::decode(&b);
        }
        // A self-loop (NextEntryOffset too small) is rejected, not spun on.
        let mut e = vec![0u8; 64];
        e[0] = 8;
        assert!(DirEntry::decode_list(&e).is_err());
    }
}
