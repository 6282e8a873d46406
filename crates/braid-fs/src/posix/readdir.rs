//! READDIR with cookies taken from the file system itself.
//!
//! RFC 8881 18.23.3: a cookie is the server's bookmark for "after this
//! entry"; cookies 1 and 2 are reserved (they meant "." and ".." in NFSv3
//! clients' eyes), and 0 asks for the start. `getdents64` gives every entry
//! a `d_off`, the position to seek to for the entries after it. On ext4
//! (directory hash), xfs (directory data offsets) and tmpfs (stable offset
//! maps since Linux 6.6) that position stays valid while other names come
//! and go, which is what knfsd relies on too. We hand it out shifted by 2,
//! so no cookie is ever 0, 1 or 2 (an entry's `d_off` is at least 1), and
//! seek to `cookie - 2` to resume.

use super::cred::{self, MAY_EXEC, MAY_READ};
use super::types::*;
use super::{require_dir, sys, Object, PosixShare};

const COOKIE_SHIFT: u64 = 2;
const BUF: usize = 32 * 1024;

/// One parsed `linux_dirent64`.
struct Raw<'a> {
    off: i64,
    name: &'a [u8],
}

/// Parses the records `getdents64` filled in; stops at anything malformed.
fn records(buf: &[u8]) -> impl Iterator<Item = Raw<'_>> {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        // d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name NUL-terminated.
        let hdr = buf.get(pos..pos + 19)?;
        let off = i64::from_ne_bytes(hdr[8..16].try_into().ok()?);
        let reclen = u16::from_ne_bytes(hdr[16..18].try_into().ok()?) as usize;
        let rec = buf.get(pos..pos + reclen)?;
        if reclen < 20 {
            return None;
        }
        let raw_name = &rec[19..];
        let len = raw_name.iter().position(|&b| b == 0)?;
        pos += reclen;
        Some(Raw {
            off,
            name: &raw_name[..len],
        })
    })
}

impl PosixShare {
    /// RFC 8881 18.23: entries after `cookie` (0 = from the start), at most
    /// `max_entries`; "." and ".." never returned. Each entry comes with its
    /// object looked up (as `cred`, without following symlinks); a failed
    /// lookup (raced unlink, no search permission) is reported per entry.
    /// The cookie verifier is the server's business (it sends zeros, as
    /// knfsd does).
    pub fn readdir(
        &self,
        cred: &Credentials,
        dir: &Object,
        cookie: u64,
        max_entries: usize,
    ) -> PosixResult<ReadDirOut> {
        require_dir(dir)?;
        if cookie == 1 || cookie == 2 {
            // RFC 8881 18.23.3: reserved, never handed out.
            return Err(PosixError::Errno(libc::EINVAL));
        }
        self.check_own(cred, dir, MAY_READ)?;
        // The kernel checks search permission per lookup as the client; an
        // unprivileged server must check it here, once.
        let can_search =
            self.privileged || cred::mode_allows(cred, &sys::statx(dir.fd())?, MAY_EXEC);
        let _as = self.as_cred(cred)?;
        // Not openat(dir, "."): that would need search permission as well,
        // and listing names needs only read permission.
        let fd = self.retry_fds(|| sys::reopen(dir.fd(), libc::O_RDONLY | libc::O_DIRECTORY))?;
        if cookie != 0 {
            let off = i64::try_from(cookie - COOKIE_SHIFT)
                .map_err(|_| PosixError::Errno(libc::EINVAL))?;
            sys::lseek(&fd, off)?;
        }
        let mut entries = Vec::new();
        let mut buf = vec![0u8; BUF];
        loop {
            let n = sys::getdents64(&fd, &mut buf)?;
            if n == 0 {
                return Ok(ReadDirOut { entries, eof: true });
            }
            for r in records(&buf[..n]) {
                if r.name == b"." || r.name == b".." {
                    continue;
                }
                if entries.len() >= max_entries {
                    // One more real entry exists: not the end.
                    return Ok(ReadDirOut {
                        entries,
                        eof: false,
                    });
                }
                let object = if can_search {
                    self.entry_object(dir, r.name)
                } else {
                    Err(PosixError::Errno(libc::EACCES))
                };
                entries.push(DirEntryOut {
                    name: r.name.to_vec(),
                    cookie: (r.off as u64).wrapping_add(COOKIE_SHIFT),
                    object,
                });
            }
        }
    }

    fn entry_object(&self, dir: &Object, name: &[u8]) -> PosixResult<Object> {
        let c = validate_name(name)?;
        let fd = self.retry_fds(|| sys::open_path_nofollow(dir.fd(), &c))?;
        self.make_object(fd)
    }
}
