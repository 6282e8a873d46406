//! MS-FSCC 2.5 file system information classes for SMB2 QUERY_INFO with
//! `InfoType = SMB2_0_INFO_FILESYSTEM`.
//!
//! Minimum OutputBufferLength per class ([`min_size`]; MS-FSA 2.1.5.13,
//! smbtorture `smb2.getinfo.qfs_buffercheck`): Volume 24, Size 24,
//! Device 8, Attribute 16, Control 48, FullSize 32, ObjectId 64,
//! SectorSize 28. Volume (label) and Attribute (file system name) are
//! variable length and are truncated with STATUS_BUFFER_OVERFLOW by
//! [`super::fit_query_output`].

use super::{FsccError, QueryOutput};
use crate::codec::{put_utf16le, WriteLe};

// MS-FSCC 2.5: FsInformationClass numbers.
pub const FILE_FS_VOLUME_INFORMATION: u8 = 1;
pub const FILE_FS_LABEL_INFORMATION: u8 = 2;
pub const FILE_FS_SIZE_INFORMATION: u8 = 3;
pub const FILE_FS_DEVICE_INFORMATION: u8 = 4;
pub const FILE_FS_ATTRIBUTE_INFORMATION: u8 = 5;
pub const FILE_FS_CONTROL_INFORMATION: u8 = 6;
pub const FILE_FS_FULL_SIZE_INFORMATION: u8 = 7;
pub const FILE_FS_OBJECT_ID_INFORMATION: u8 = 8;
pub const FILE_FS_DRIVER_PATH_INFORMATION: u8 = 9;
pub const FILE_FS_VOLUME_FLAGS_INFORMATION: u8 = 10;
pub const FILE_FS_SECTOR_SIZE_INFORMATION: u8 = 11;

// MS-FSCC 2.5.10 FileFsDeviceInformation.
pub const FILE_DEVICE_DISK: u32 = 0x0000_0007;
pub const FILE_REMOTE_DEVICE: u32 = 0x0000_0010;
pub const FILE_DEVICE_IS_MOUNTED: u32 = 0x0000_0020;

// MS-FSCC 2.5.1 FileFsAttributeInformation FileSystemAttributes.
pub const FILE_CASE_SENSITIVE_SEARCH: u32 = 0x0000_0001;
pub const FILE_CASE_PRESERVED_NAMES: u32 = 0x0000_0002;
pub const FILE_UNICODE_ON_DISK: u32 = 0x0000_0004;
pub const FILE_PERSISTENT_ACLS: u32 = 0x0000_0008;
pub const FILE_FILE_COMPRESSION: u32 = 0x0000_0010;
pub const FILE_VOLUME_QUOTAS: u32 = 0x0000_0020;
pub const FILE_SUPPORTS_SPARSE_FILES: u32 = 0x0000_0040;
pub const FILE_SUPPORTS_REPARSE_POINTS: u32 = 0x0000_0080;
pub const FILE_SUPPORTS_REMOTE_STORAGE: u32 = 0x0000_0100;
pub const FILE_SUPPORTS_POSIX_UNLINK_RENAME: u32 = 0x0000_0400;
pub const FILE_VOLUME_IS_COMPRESSED: u32 = 0x0000_8000;
pub const FILE_SUPPORTS_OBJECT_IDS: u32 = 0x0001_0000;
pub const FILE_SUPPORTS_ENCRYPTION: u32 = 0x0002_0000;
pub const FILE_NAMED_STREAMS: u32 = 0x0004_0000;
pub const FILE_READ_ONLY_VOLUME: u32 = 0x0008_0000;
/// FSCTL_DUPLICATE_EXTENTS_TO_FILE is served (block cloning).
pub const FILE_SUPPORTS_BLOCK_REFCOUNTING: u32 = 0x0800_0000;

/// What Braid advertises by default: names are case-sensitive on the
/// backend and preserved, Unicode, security descriptors are answered,
/// files can be sparse (FSCTL_SET_SPARSE and friends), have named
/// streams (`file:stream:$DATA`) and take block clones
/// (FSCTL_DUPLICATE_EXTENTS_TO_FILE: the host file system's clone where it
/// has one, a copy in the kernel where not, the same bytes either way).
pub const DEFAULT_FS_ATTRIBUTES: u32 = FILE_CASE_SENSITIVE_SEARCH
    | FILE_CASE_PRESERVED_NAMES
    | FILE_UNICODE_ON_DISK
    | FILE_PERSISTENT_ACLS
    | FILE_SUPPORTS_SPARSE_FILES
    | FILE_NAMED_STREAMS
    | FILE_SUPPORTS_BLOCK_REFCOUNTING;

// MS-FSCC 2.5.7 FileFsSectorSizeInformation flags.
pub const SSINFO_FLAGS_ALIGNED_DEVICE: u32 = 0x0000_0001;
pub const SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE: u32 = 0x0000_0002;
pub const SSINFO_FLAGS_NO_SEEK_PENALTY: u32 = 0x0000_0004;
pub const SSINFO_FLAGS_TRIM_ENABLED: u32 = 0x0000_0008;

/// Protocol-neutral space figures for the share's file system (a
/// `statvfs`): counts are in units of `block_size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStats {
    pub total_blocks: u64,
    /// Free blocks, including ones reserved for the superuser.
    pub free_blocks: u64,
    /// Free blocks available to the caller.
    pub avail_blocks: u64,
    /// Allocation unit in bytes (f_frsize).
    pub block_size: u32,
    /// Sector size in bytes; 512 when unknown. SectorsPerAllocationUnit is
    /// `block_size / bytes_per_sector` (at least 1).
    pub bytes_per_sector: u32,
}

impl Default for FsStats {
    fn default() -> Self {
        FsStats {
            total_blocks: 0,
            free_blocks: 0,
            avail_blocks: 0,
            block_size: 4096,
            bytes_per_sector: 512,
        }
    }
}

/// Per-share volume identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeInfo {
    /// Volume label (FileFsVolumeInformation); usually the share name.
    pub label: String,
    pub serial_number: u32,
    /// FILETIME of volume creation.
    pub creation_time: u64,
    /// FileSystemName; "NTFS" keeps Windows clients on their full feature path.
    pub fs_name: String,
    /// FileSystemAttributes ([`DEFAULT_FS_ATTRIBUTES`] unless configured).
    pub fs_attributes: u32,
    /// MaximumComponentNameLength, in characters.
    pub max_component_length: u32,
    /// FileFsObjectIdInformation ObjectId (a GUID per volume).
    pub object_id: [u8; 16],
    /// FSCTL_FILE_LEVEL_TRIM releases storage (SSINFO_FLAGS_TRIM_ENABLED).
    pub trim_enabled: bool,
}

impl Default for VolumeInfo {
    fn default() -> Self {
        VolumeInfo {
            label: String::new(),
            serial_number: 0,
            creation_time: 0,
            fs_name: "NTFS".to_string(),
            fs_attributes: DEFAULT_FS_ATTRIBUTES,
            max_component_length: 255,
            object_id: [0; 16],
            trim_enabled: false,
        }
    }
}

/// Smallest OutputBufferLength for `class`; `None` for classes this module
/// does not answer.
pub fn min_size(class: u8) -> Option<usize> {
    Some(match class {
        // BlockAlign(FieldOffset(VolumeLabel) = 18, 8)
        FILE_FS_VOLUME_INFORMATION => 24,
        FILE_FS_SIZE_INFORMATION => 24,
        FILE_FS_DEVICE_INFORMATION => 8,
        // BlockAlign(FieldOffset(FileSystemName) = 12, 4) + one WCHAR, 4-aligned
        FILE_FS_ATTRIBUTE_INFORMATION => 16,
        FILE_FS_CONTROL_INFORMATION => 48,
        FILE_FS_FULL_SIZE_INFORMATION => 32,
        FILE_FS_OBJECT_ID_INFORMATION => 64,
        FILE_FS_SECTOR_SIZE_INFORMATION => 28,
        _ => return None,
    })
}

/// True for the classes with a trailing name (truncatable).
pub fn is_variable_length(class: u8) -> bool {
    matches!(
        class,
        FILE_FS_VOLUME_INFORMATION | FILE_FS_ATTRIBUTE_INFORMATION
    )
}

fn sectors_per_unit(s: &FsStats) -> u32 {
    let bps = s.bytes_per_sector.max(1);
    (s.block_size / bps).max(1)
}

/// The full answer for QUERY_INFO(FILESYSTEM) `class`.
pub fn encode_fs_info(class: u8, stats: &FsStats, vol: &VolumeInfo) -> Result<Vec<u8>, FsccError> {
    let mut out = Vec::with_capacity(64);
    let bps = if stats.bytes_per_sector == 0 {
        512
    } else {
        stats.bytes_per_sector
    };
    match class {
        FILE_FS_VOLUME_INFORMATION => {
            // MS-FSCC 2.5.9 FILE_FS_VOLUME_INFORMATION
            out.put_u64(vol.creation_time);
            out.put_u32(vol.serial_number);
            let at = out.len();
            out.put_u32(0); // VolumeLabelLength
            out.put_u8(0); // SupportsObjects: FALSE
            out.put_u8(0); // Reserved
            put_utf16le(&mut out, &vol.label);
            let len = (out.len() - 18) as u32;
            out.patch_u32(at, len);
        }
        FILE_FS_SIZE_INFORMATION => {
            // MS-FSCC 2.5.8 FILE_FS_SIZE_INFORMATION
            out.put_u64(stats.total_blocks);
            out.put_u64(stats.avail_blocks);
            out.put_u32(sectors_per_unit(stats));
            out.put_u32(bps);
        }
        FILE_FS_DEVICE_INFORMATION => {
            // MS-FSCC 2.5.10 FILE_FS_DEVICE_INFORMATION
            out.put_u32(FILE_DEVICE_DISK);
            out.put_u32(FILE_DEVICE_IS_MOUNTED);
        }
        FILE_FS_ATTRIBUTE_INFORMATION => {
            // MS-FSCC 2.5.1 FILE_FS_ATTRIBUTE_INFORMATION
            out.put_u32(vol.fs_attributes);
            out.put_u32(vol.max_component_length);
            let at = out.len();
            out.put_u32(0);
            put_utf16le(&mut out, &vol.fs_name);
            let len = (out.len() - 12) as u32;
            out.patch_u32(at, len);
        }
        FILE_FS_CONTROL_INFORMATION => {
            // MS-FSCC 2.5.2 FILE_FS_CONTROL_INFORMATION: no content
            // filtering, no default quota (-1 = no limit), quotas off.
            out.put_u64(0); // FreeSpaceStartFiltering
            out.put_u64(0); // FreeSpaceThreshold
            out.put_u64(0); // FreeSpaceStopFiltering
            out.put_u64(u64::MAX); // DefaultQuotaThreshold
            out.put_u64(u64::MAX); // DefaultQuotaLimit
            out.put_u32(0); // FileSystemControlFlags
            out.put_u32(0); // Padding
        }
        FILE_FS_FULL_SIZE_INFORMATION => {
            // MS-FSCC 2.5.4 FILE_FS_FULL_SIZE_INFORMATION
            out.put_u64(stats.total_blocks);
            out.put_u64(stats.avail_blocks); // CallerAvailableAllocationUnits
            out.put_u64(stats.free_blocks); // ActualAvailableAllocationUnits
            out.put_u32(sectors_per_unit(stats));
            out.put_u32(bps);
        }
        FILE_FS_OBJECT_ID_INFORMATION => {
            // MS-FSCC 2.5.6 FILE_FS_OBJECTID_INFORMATION
            out.extend_from_slice(&vol.object_id);
            out.put_zeros(48); // ExtendedInfo
        }
        FILE_FS_SECTOR_SIZE_INFORMATION => {
            // MS-FSCC 2.5.7 FILE_FS_SECTOR_SIZE_INFORMATION
            out.put_u32(bps); // LogicalBytesPerSector
            out.put_u32(bps); // PhysicalBytesPerSectorForAtomicity
            out.put_u32(bps); // PhysicalBytesPerSectorForPerformance
            out.put_u32(bps); // FileSystemEffectivePhysicalBytesPerSectorForAtomicity
            let mut flags = SSINFO_FLAGS_ALIGNED_DEVICE | SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE;
            if vol.trim_enabled {
                flags |= SSINFO_FLAGS_TRIM_ENABLED;
            }
            out.put_u32(flags);
            out.put_u32(0); // ByteOffsetForSectorAlignment
            out.put_u32(0); // ByteOffsetForPartitionAlignment
        }
        _ => return Err(FsccError::InvalidInfoClass(class)),
    }
    Ok(out)
}

/// Encode `class` and fit it into OutputBufferLength (see
/// [`super::fit_query_output`]).
pub fn query_fs_info(
    class: u8,
    stats: &FsStats,
    vol: &VolumeInfo,
    output_buffer_length: u32,
) -> Result<QueryOutput, FsccError> {
    let min = min_size(class).ok_or(FsccError::InvalidInfoClass(class))?;
    let data = encode_fs_info(class, stats, vol)?;
    super::fit_query_output(min, data, output_buffer_length)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::string_to_utf16le;
    use crate::status::NtStatus;

    fn stats() -> FsStats {
        FsStats {
            total_blocks: 1000,
            free_blocks: 600,
            avail_blocks: 500,
            block_size: 4096,
            bytes_per_sector: 512,
        }
    }

    fn vol() -> VolumeInfo {
        VolumeInfo {
            label: "share".into(),
            serial_number: 0xDEADBEEF,
            creation_time: 42,
            object_id: [9; 16],
            ..Default::default()
        }
    }

    #[test]
    fn fscc_fs_sizes() {
        for (class, len) in [(3u8, 24usize), (4, 8), (6, 48), (7, 32), (8, 64), (11, 28)] {
            let b = encode_fs_info(class, &stats(), &vol()).unwrap();
            assert_eq!(b.len(), len, "class {class}");
            assert_eq!(min_size(class), Some(len));
        }
        let b = encode_fs_info(1, &stats(), &vol()).unwrap();
        assert_eq!(b.len(), 18 + 10);
        let b = encode_fs_info(5, &stats(), &vol()).unwrap();
        assert_eq!(b.len(), 12 + 8);
    }

    #[test]
    fn fscc_fs_golden() {
        let b = encode_fs_info(FILE_FS_SIZE_INFORMATION, &stats(), &vol()).unwrap();
        assert_eq!(
            hex::encode(&b),
            "e803000000000000f4010000000000000800000000020000"
        );
        let b = encode_fs_info(FILE_FS_FULL_SIZE_INFORMATION, &stats(), &vol()).unwrap();
        assert_eq!(&b[16..24], &600u64.to_le_bytes());
        let b = encode_fs_info(FILE_FS_DEVICE_INFORMATION, &stats(), &vol()).unwrap();
        assert_eq!(hex::encode(&b), "0700000020000000");
        let b = encode_fs_info(FILE_FS_ATTRIBUTE_INFORMATION, &stats(), &vol()).unwrap();
        assert_eq!(&b[0..4], &DEFAULT_FS_ATTRIBUTES.to_le_bytes());
        assert_eq!(&b[4..8], &255u32.to_le_bytes());
        assert_eq!(&b[8..12], &8u32.to_le_bytes());
        assert_eq!(&b[12..], &string_to_utf16le("NTFS")[..]);
        let b = encode_fs_info(FILE_FS_VOLUME_INFORMATION, &stats(), &vol()).unwrap();
        assert_eq!(&b[0..8], &42u64.to_le_bytes());
        assert_eq!(&b[8..12], &0xDEADBEEFu32.to_le_bytes());
        assert_eq!(&b[12..16], &10u32.to_le_bytes());
        assert_eq!(&b[16..18], &[0, 0]);
        assert_eq!(&b[18..], &string_to_utf16le("share")[..]);
    }

    #[test]
    fn fscc_fs_buffercheck() {
        // smbtorture torture_smb2_qfs_buffercheck levels and fixed sizes.
        for (class, fixed) in [
            (1u8, 24usize),
            (3, 24),
            (4, 8),
            (5, 16),
            (6, 48),
            (7, 32),
            (11, 28),
        ] {
            assert_eq!(min_size(class), Some(fixed));
            let full = encode_fs_info(class, &stats(), &vol()).unwrap();
            for i in 0..=full.len().max(fixed) as u32 {
                let r = query_fs_info(class, &stats(), &vol(), i);
                if (i as usize) < fixed {
                    assert_eq!(r.unwrap_err().status(), NtStatus::INFO_LENGTH_MISMATCH);
                } else if (i as usize) < full.len() {
                    assert!(is_variable_length(class));
                    assert_eq!(r.unwrap().status, NtStatus::BUFFER_OVERFLOW);
                } else {
                    let o = r.unwrap();
                    assert_eq!(o.status, NtStatus::SUCCESS);
                    assert_eq!(o.data, full);
                }
            }
        }
        // the smb2.getinfo buffercheck case: volume info with 1 byte
        assert_eq!(
            query_fs_info(1, &stats(), &vol(), 1).unwrap_err().status(),
            NtStatus::INFO_LENGTH_MISMATCH
        );
        assert_eq!(
            query_fs_info(2, &stats(), &vol(), 100)
                .unwrap_err()
                .status(),
            NtStatus::INVALID_INFO_CLASS
        );
    }
}
