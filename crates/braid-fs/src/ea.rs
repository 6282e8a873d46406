//! Extended attributes (MS-FSA FileFullEaInformation, MS-FSCC 2.4.15): EA
//! NAME of a file is its xattr `user.braid.ea.NAME` (upper case), and the
//! EaSize that opens and listings report is kept in the DOS record.

use crate::error::{FsError, FsResult};
use crate::handle::OpenHandle;
use crate::info;
use crate::sys;
use crate::types::{access as acc, ExtendedAttribute};

/// Extended attribute NAME is kept in the xattr `user.braid.ea.NAME`.
const EA_XATTR_PREFIX: &str = "user.braid.ea.";

impl OpenHandle {
    /// The file's extended attributes (MS-FSA 2.1.5.12.x
    /// FileFullEaInformation), in name order. Needs FILE_READ_EA. They live
    /// in `user.braid.ea.<NAME>` xattrs.
    pub fn get_eas(&self) -> FsResult<Vec<ExtendedAttribute>> {
        self.need(acc::FILE_READ_EA)?;
        self.read_eas()
    }

    fn read_eas(&self) -> FsResult<Vec<ExtendedAttribute>> {
        let names = match sys::xattr_list(self.fd()) {
            Ok(n) => n,
            Err(libc::ENOTSUP) => return Ok(Vec::new()),
            Err(e) => return Err(FsError::from_errno(e)),
        };
        let mut out = Vec::new();
        for n in names {
            let Some(ea) = n.strip_prefix(EA_XATTR_PREFIX.as_bytes()) else {
                continue;
            };
            let Ok(name) = std::str::from_utf8(ea) else {
                continue;
            };
            let Ok(cn) = std::ffi::CString::new(n.clone()) else {
                continue;
            };
            match sys::xattr_get(self.fd(), &cn) {
                Ok(value) => out.push(ExtendedAttribute {
                    name: name.to_string(),
                    value,
                    flags: 0,
                }),
                Err(libc::ENODATA) => {}
                Err(e) => return Err(FsError::from_errno(e)),
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Set extended attributes (MS-FSA 2.1.5.14.x FileFullEaInformation):
    /// each one is replaced, an empty value removes it. Names are ASCII
    /// without control characters or `"*/:<>?\|+,;=[]`, at most 255 bytes
    /// (else [`FsError::InvalidParameter`]). Needs FILE_WRITE_EA. Updates
    /// the EaSize that [`OpenHandle::info`] and listings report.
    pub fn set_eas(&self, eas: &[ExtendedAttribute]) -> FsResult<()> {
        self.need(acc::FILE_WRITE_EA)?;
        self.init_eas(eas)
    }

    /// The EaBuffer of a create (MS-FSA 2.1.5.1.1, 2.1.5.1.2.1): extended
    /// attributes given with a create, overwrite or supersede are applied
    /// whatever access the open was granted.
    pub fn init_eas(&self, eas: &[ExtendedAttribute]) -> FsResult<()> {
        self.live()?;
        for ea in eas {
            let bad =
                |c: char| !c.is_ascii() || c.is_ascii_control() || "\"*/:<>?\\|+,;=[]".contains(c);
            if ea.name.is_empty() || ea.name.len() > 255 || ea.name.chars().any(bad) {
                return Err(FsError::InvalidParameter);
            }
        }
        let fd = self.fd();
        let before = sys::fstat(fd)?;
        for ea in eas {
            let key = sys::cstr(&format!(
                "{EA_XATTR_PREFIX}{}",
                ea.name.to_ascii_uppercase()
            ))?;
            let r = if ea.value.is_empty() {
                sys::xattr_put(fd, &key, None)
            } else {
                sys::xattr_put(fd, &key, Some(&ea.value))
            };
            match r {
                Ok(()) | Err(libc::ENODATA) => {}
                Err(libc::ENOTSUP) => return Err(FsError::NotSupported),
                Err(e) => return Err(FsError::from_errno(e)),
            }
        }
        // MS-FSCC 2.4.12: EaSize is the size of the FILE_FULL_EA_INFORMATION
        // chain: 8-byte headers, NUL-terminated names, entries 4-aligned.
        let all = self.read_eas()?;
        let mut size = 0usize;
        for (i, ea) in all.iter().enumerate() {
            if i > 0 {
                size = size.next_multiple_of(4);
            }
            size += 8 + ea.name.len() + 1 + ea.value.len();
        }
        let st = sys::fstat(fd)?;
        let old = info::read_dos(fd);
        let mut m = info::dos_meta_or_default(old, &st);
        m.ea_size = size.min(u32::MAX as usize) as u32;
        if Some(m) != old {
            info::write_dos(fd, &m, &st)?;
        }
        // EAs (or the record beside them) that no longer fit the inode
        // took an xattr block, which AllocationSize leaves out (smbtorture
        // smb2.setinfo).
        info::note_xattr_blocks(fd, &before)
    }
}
