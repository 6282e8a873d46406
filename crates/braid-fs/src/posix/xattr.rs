//! User extended attributes of a file or directory (the NFSv4.2 xattr
//! operations, RFC 8276), kept as the host's `user.` xattrs so a local
//! `getfattr -n user.NAME` sees what a client set as NAME.
//!
//! Braid keeps its own metadata in `user.` xattrs too (DOS attributes,
//! security descriptors, SMB streams and EAs, netatalk's metadata): those
//! names are not a client's to see or change through this face, so they
//! are left out of listings and refused by name.

use std::ffi::CString;

use super::cred::{MAY_READ, MAY_WRITE};
use super::sys;
use super::types::*;
use super::{Object, PosixShare};

/// The host namespace a client's names live in.
const USER_PREFIX: &[u8] = b"user.";

/// Names (after `user.`) Braid itself keeps metadata under.
const RESERVED: &[&[u8]] = &[b"braid.", b"DosStream.", b"org.netatalk."];

/// Linux's limits (XATTR_NAME_MAX less "user.", XATTR_SIZE_MAX).
pub const XATTR_NAME_MAX: usize = 255 - USER_PREFIX.len();
pub const XATTR_SIZE_MAX: usize = 65536;

/// How a set treats an existing attribute (RFC 8276 8.4.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XattrSet {
    Either,
    /// Fails with EEXIST when the attribute exists.
    Create,
    /// Fails with ENODATA when the attribute is missing.
    Replace,
}

fn reserved(name: &[u8]) -> bool {
    RESERVED.iter().any(|r| name.starts_with(r))
}

/// The host name of a client's `name`: ENODATA for Braid's own names (they
/// do not exist as far as the client can tell), EINVAL for an empty name
/// or one with a NUL, ERANGE for one too long.
fn host_name(name: &[u8]) -> PosixResult<CString> {
    if name.is_empty() || name.contains(&0) {
        return Err(PosixError::Errno(libc::EINVAL));
    }
    if name.len() > XATTR_NAME_MAX {
        return Err(PosixError::Errno(libc::ERANGE));
    }
    if reserved(name) {
        return Err(PosixError::Errno(libc::ENODATA));
    }
    let mut full = USER_PREFIX.to_vec();
    full.extend_from_slice(name);
    CString::new(full).map_err(|_| PosixError::Errno(libc::EINVAL))
}

/// Linux allows user xattrs on regular files and directories only.
fn require_file_or_dir(obj: &Object) -> PosixResult<()> {
    match obj.kind() {
        ObjectKind::File | ObjectKind::Directory => Ok(()),
        _ => Err(PosixError::Errno(libc::EPERM)),
    }
}

impl PosixShare {
    /// The value of the client's attribute `name` (ENODATA when missing),
    /// read as `cred` (read permission on the object).
    pub fn get_user_xattr(
        &self,
        cred: &Credentials,
        obj: &Object,
        name: &[u8],
    ) -> PosixResult<Vec<u8>> {
        require_file_or_dir(obj)?;
        let host = host_name(name)?;
        self.check_own(cred, obj, MAY_READ)?;
        let _as = self.as_cred(cred)?;
        sys::get_xattr_any(obj.fd(), &host)
    }

    /// Sets the client's attribute `name` as `cred` (write permission).
    pub fn set_user_xattr(
        &self,
        cred: &Credentials,
        obj: &Object,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
    ) -> PosixResult<()> {
        require_file_or_dir(obj)?;
        let host = match host_name(name) {
            // Braid's own names cannot be made by a client either.
            Err(PosixError::Errno(libc::ENODATA)) => return Err(PosixError::Errno(libc::EPERM)),
            r => r?,
        };
        if value.len() > XATTR_SIZE_MAX {
            return Err(PosixError::Errno(libc::E2BIG));
        }
        self.check_own(cred, obj, MAY_WRITE)?;
        let flags = match how {
            XattrSet::Either => 0,
            XattrSet::Create => libc::XATTR_CREATE,
            XattrSet::Replace => libc::XATTR_REPLACE,
        };
        let _as = self.as_cred(cred)?;
        sys::set_xattr_flags(obj.fd(), &host, value, flags)
    }

    /// Removes the client's attribute `name` as `cred` (ENODATA when
    /// missing).
    pub fn remove_user_xattr(
        &self,
        cred: &Credentials,
        obj: &Object,
        name: &[u8],
    ) -> PosixResult<()> {
        require_file_or_dir(obj)?;
        let host = host_name(name)?;
        self.check_own(cred, obj, MAY_WRITE)?;
        let _as = self.as_cred(cred)?;
        sys::remove_xattr(obj.fd(), &host)
    }

    /// The names of the client's attributes (without `user.`), sorted, as
    /// `cred` (read permission).
    pub fn list_user_xattrs(&self, cred: &Credentials, obj: &Object) -> PosixResult<Vec<Vec<u8>>> {
        require_file_or_dir(obj)?;
        self.check_own(cred, obj, MAY_READ)?;
        let _as = self.as_cred(cred)?;
        let all = sys::list_xattrs(obj.fd())?;
        let mut names: Vec<Vec<u8>> = all
            .split(|b| *b == 0)
            .filter_map(|n| n.strip_prefix(USER_PREFIX))
            .filter(|n| !n.is_empty() && !reserved(n))
            .map(<[u8]>::to_vec)
            .collect();
        names.sort();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_into_the_user_namespace_and_braids_own_are_hidden() {
        assert_eq!(host_name(b"color").unwrap().as_bytes(), b"user.color");
        assert_eq!(host_name(b"user.x").unwrap().as_bytes(), b"user.user.x");
        for own in [
            &b"braid.dos"[..],
            b"braid.sd",
            b"DosStream.s:$DATA",
            b"org.netatalk.Metadata",
        ] {
            assert_eq!(
                host_name(own).unwrap_err(),
                PosixError::Errno(libc::ENODATA)
            );
        }
        assert_eq!(host_name(b"").unwrap_err(), PosixError::Errno(libc::EINVAL));
        assert_eq!(
            host_name(b"a\0b").unwrap_err(),
            PosixError::Errno(libc::EINVAL)
        );
        let long = vec![b'x'; XATTR_NAME_MAX + 1];
        assert_eq!(
            host_name(&long).unwrap_err(),
            PosixError::Errno(libc::ERANGE)
        );
        assert!(host_name(&long[..XATTR_NAME_MAX]).is_ok());
    }
}
