//! NTFS's quota index, `$Extend\$Quota:$Q:$INDEX_ALLOCATION`: what an
//! open of "a Quota Stream" (MS-FSA 2.1.5.21, 2.1.5.22) is opened by.
//! Windows clients open it at the root of a share to read and set
//! per-user disk quotas; smbtorture `smb2.create.quota-fake-file` opens
//! it and checks what it looks like.
//!
//! Braid keeps no per-user quotas, so the index is a fixed object that
//! nothing on disk backs, as Samba's smbd serves it on a share without
//! quota support (its "fake file", source3/smbd/fake_file.c): the open
//! creates and touches nothing, and the object has no times, no sizes and
//! the attributes Windows Server 2016 shows, HIDDEN | SYSTEM | DIRECTORY |
//! ARCHIVE. Only the exact name at the share root is the index; the file
//! service itself never resolves it (`$INDEX_ALLOCATION` is no data
//! stream type), so it shadows no file.

use std::time::{Duration, SystemTime};

use crate::error::{FsError, FsResult};
use crate::types::{access as acc, attr, map_generic, share as sh};
use crate::types::{Disposition, FileInfo, OpenParams};

/// The index's file, as its path is spelled (`\`-separated).
pub const QUOTA_FILE: &str = "$Extend\\$Quota";
/// The index's stream: name and type.
pub const QUOTA_STREAM: &str = "$Q:$INDEX_ALLOCATION";

/// Whether a client path (share-relative, `\` or `/` separated) names the
/// quota index: `$Extend\$Quota:$Q:$INDEX_ALLOCATION`, in any case (NTFS
/// names are case-insensitive; Samba compares case-sensitively).
pub fn is_quota_index(path: &str) -> bool {
    let mut parts = path.split(['\\', '/']);
    parts
        .next()
        .is_some_and(|p| p.eq_ignore_ascii_case("$Extend"))
        && parts
            .next()
            .is_some_and(|p| p.eq_ignore_ascii_case("$Quota:$Q:$INDEX_ALLOCATION"))
        && parts.next().is_none()
}

/// An open of the quota index: the rights it was granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaIndexOpen {
    granted: u32,
    maximal: u32,
}

/// MS-FSA 2.1.5.1 for the quota index: it exists, so CREATE collides; it
/// is an index (a directory's kind of stream), so it is neither
/// overwritten nor superseded, and nobody deletes it. `allowed` is the
/// most the requester may be granted (the tree's share permissions);
/// MAXIMUM_ALLOWED gets that. FILE_DIRECTORY_FILE and
/// FILE_NON_DIRECTORY_FILE are not checked, as Samba does not check them:
/// a client gets the index with either.
pub fn open(p: &OpenParams, allowed: u32) -> FsResult<QuotaIndexOpen> {
    if p.share_access & !sh::ALL != 0 {
        return Err(FsError::InvalidParameter);
    }
    match p.disposition {
        Disposition::Open | Disposition::OpenIf => {}
        Disposition::Create => return Err(FsError::NameCollision),
        Disposition::Supersede | Disposition::Overwrite | Disposition::OverwriteIf => {
            return Err(FsError::InvalidParameter)
        }
    }
    if p.delete_on_close {
        return Err(FsError::CannotDelete);
    }
    let mut access = map_generic(p.access);
    if access & acc::ACCESS_SYSTEM_SECURITY != 0 {
        return Err(FsError::PrivilegeNotHeld);
    }
    let maximal = allowed & acc::FILE_ALL_ACCESS;
    if access & acc::MAXIMUM_ALLOWED != 0 {
        access = (access & !acc::MAXIMUM_ALLOWED) | maximal;
    }
    if access & !maximal != 0 {
        return Err(FsError::AccessDenied);
    }
    Ok(QuotaIndexOpen {
        granted: access,
        maximal,
    })
}

impl QuotaIndexOpen {
    /// The rights this open holds.
    pub fn granted_access(&self) -> u32 {
        self.granted
    }

    /// The most the requester could have been granted (MxAc).
    pub fn maximal_access(&self) -> u32 {
        self.maximal
    }

    /// What the index looks like: no times (the FILETIME epoch, 0 on the
    /// wire), no size, one link, file id 0, and the attributes Samba and
    /// Windows Server 2016 show.
    pub fn info(&self) -> FileInfo {
        let none = SystemTime::UNIX_EPOCH - Duration::from_secs(FILETIME_EPOCH_BEFORE_UNIX);
        FileInfo {
            creation_time: none,
            last_access_time: none,
            last_write_time: none,
            change_time: none,
            allocation_size: 0,
            end_of_file: 0,
            attributes: attr::HIDDEN | attr::SYSTEM | attr::DIRECTORY | attr::ARCHIVE,
            number_of_links: 1,
            delete_pending: false,
            is_directory: true,
            file_id: 0,
            ea_size: 0,
        }
    }
}

/// Seconds from 1601-01-01 (where FILETIME counts from) to 1970-01-01.
const FILETIME_EPOCH_BEFORE_UNIX: u64 = 11_644_473_600;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::DirectoryRequirement;

    fn params(access: u32, disposition: Disposition) -> OpenParams {
        OpenParams::new(
            QUOTA_FILE.to_string() + ":" + QUOTA_STREAM,
            access,
            disposition,
        )
    }

    #[test]
    fn only_the_exact_name_at_the_root_is_the_index() {
        for p in [
            "$Extend\\$Quota:$Q:$INDEX_ALLOCATION",
            "$Extend/$Quota:$Q:$INDEX_ALLOCATION",
            "$extend\\$quota:$q:$index_allocation",
            "$EXTEND\\$QUOTA:$Q:$INDEX_ALLOCATION",
        ] {
            assert!(is_quota_index(p), "{p}");
        }
        for p in [
            "",
            "$Extend",
            "$Extend\\$Quota",
            "$Extend\\$Quota:$Q",
            "$Extend\\$Quota::$DATA",
            "$Extend\\$Quota:$Q:$INDEX_ALLOCATIONx",
            "$Extend\\$Quota:$Q:$INDEX_ALLOCATION\\",
            "$Extend\\\\$Quota:$Q:$INDEX_ALLOCATION",
            "\\$Extend\\$Quota:$Q:$INDEX_ALLOCATION",
            "dir\\$Extend\\$Quota:$Q:$INDEX_ALLOCATION",
            "..\\$Extend\\$Quota:$Q:$INDEX_ALLOCATION",
            "$Extend\\..\\$Extend\\$Quota:$Q:$INDEX_ALLOCATION",
            "$Extend\\$Quota:$O:$INDEX_ALLOCATION",
        ] {
            assert!(!is_quota_index(p), "{p}");
        }
    }

    #[test]
    fn it_opens_and_looks_like_samba_shows_it() {
        let o = open(
            &params(0x0012_0089, Disposition::Open),
            acc::FILE_ALL_ACCESS,
        )
        .unwrap();
        assert_eq!(o.granted_access(), 0x0012_0089);
        assert_eq!(o.maximal_access(), acc::FILE_ALL_ACCESS);
        let info = o.info();
        assert_eq!(info.attributes, 0x36);
        assert!(info.is_directory);
        let filetime_zero = SystemTime::UNIX_EPOCH - Duration::from_secs(11_644_473_600);
        for t in [
            info.creation_time,
            info.last_access_time,
            info.last_write_time,
            info.change_time,
        ] {
            assert_eq!(t, filetime_zero);
        }
        assert_eq!(
            (info.allocation_size, info.end_of_file, info.file_id),
            (0, 0, 0)
        );
        // Either directory option and OPEN_IF open it too.
        for d in [
            DirectoryRequirement::MustBeDirectory,
            DirectoryRequirement::MustNotBeDirectory,
        ] {
            let mut p = params(acc::FILE_READ_ATTRIBUTES, Disposition::OpenIf);
            p.directory = d;
            assert!(open(&p, acc::FILE_ALL_ACCESS).is_ok());
        }
    }

    #[test]
    fn it_is_never_created_replaced_or_deleted() {
        let all = acc::FILE_ALL_ACCESS;
        assert!(matches!(
            open(&params(acc::FILE_READ_DATA, Disposition::Create), all),
            Err(FsError::NameCollision)
        ));
        for d in [
            Disposition::Supersede,
            Disposition::Overwrite,
            Disposition::OverwriteIf,
        ] {
            assert!(matches!(
                open(&params(acc::FILE_WRITE_DATA, d), all),
                Err(FsError::InvalidParameter)
            ));
        }
        let mut p = params(acc::DELETE, Disposition::Open);
        p.delete_on_close = true;
        assert!(matches!(open(&p, all), Err(FsError::CannotDelete)));
        let mut p = params(acc::FILE_READ_DATA, Disposition::Open);
        p.share_access = 8;
        assert!(matches!(open(&p, all), Err(FsError::InvalidParameter)));
    }

    #[test]
    fn access_stays_within_what_the_tree_allows() {
        let read_only = acc::FILE_GENERIC_READ | acc::FILE_GENERIC_EXECUTE;
        let p = params(acc::GENERIC_READ, Disposition::Open);
        assert_eq!(
            open(&p, read_only).unwrap().granted_access(),
            acc::FILE_GENERIC_READ
        );
        let p = params(acc::FILE_WRITE_DATA, Disposition::Open);
        assert!(matches!(open(&p, read_only), Err(FsError::AccessDenied)));
        let p = params(acc::MAXIMUM_ALLOWED, Disposition::Open);
        assert_eq!(open(&p, read_only).unwrap().granted_access(), read_only);
        let p = params(acc::ACCESS_SYSTEM_SECURITY, Disposition::Open);
        assert!(matches!(
            open(&p, acc::FILE_ALL_ACCESS),
            Err(FsError::PrivilegeNotHeld)
        ));
    }
}
