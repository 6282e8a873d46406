//! Client path validation and safe resolution beneath a share root.
//!
//! Client names are untrusted. They are split on `\` (and `/`), each
//! component is validated (MS-FSCC 2.1.5.2 "Filename" rules plus our own
//! `.`/`..` ban), and the host path is only ever resolved relative to the
//! share's root fd with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`,
//! so `..`, absolute paths and symlinks leaving the share are refused by the
//! kernel even if validation missed something.
//!
//! Names are matched case-insensitively (Windows semantics): the exact name
//! is tried first; on ENOENT the parent directory is scanned for a name that
//! is equal under Unicode lower-casing. Internally a resolved path is kept as
//! on-disk component names joined with `/` ("" is the root).

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::error::{FsError, FsResult};
use crate::meta::ShareStore;
use crate::sys;

/// Longest component, in bytes (NTFS allows 255 UTF-16 units; we bound bytes).
pub const MAX_COMPONENT_BYTES: usize = 255;

/// Validate one component of a client path.
pub fn validate_component(c: &str) -> FsResult<()> {
    if c.is_empty() || c == "." || c == ".." {
        return Err(FsError::InvalidName);
    }
    if c.len() > MAX_COMPONENT_BYTES {
        return Err(FsError::NameTooLong);
    }
    // MS-FSCC 2.1.5.2: control characters and " * / : < > ? \ | are invalid.
    if c.chars().any(|ch| {
        (ch as u32) < 0x20 || matches!(ch, '"' | '*' | '/' | ':' | '<' | '>' | '?' | '\\' | '|')
    }) {
        return Err(FsError::InvalidName);
    }
    // Names ending in a space or a dot are valid: only Windows' Win32
    // layer strips those; NTFS keeps them when they come over SMB, as
    // Samba does, and macOS and Linux clients make such names.
    Ok(())
}

/// Split and validate a client path. `""`, `"\"` and `"/"` are the root.
/// One leading and one trailing separator are tolerated.
pub fn parse(path: &str) -> FsResult<Vec<String>> {
    let p = path.strip_prefix(['\\', '/']).unwrap_or(path);
    let p = p.strip_suffix(['\\', '/']).unwrap_or(p);
    if p.is_empty() {
        return Ok(Vec::new());
    }
    let mut out: Vec<String> = Vec::new();
    for c in p.split(['\\', '/']) {
        if c == ".." {
            // A `..` removes the component before it, as Samba's
            // check_path_syntax does; one that would climb above the share
            // root is OBJECT_PATH_SYNTAX_BAD (smbtorture smb2.mkdir).
            if out.pop().is_none() {
                return Err(FsError::PathSyntaxBad);
            }
            continue;
        }
        validate_component(c)?;
        out.push(c.to_string());
    }
    Ok(out)
}

/// Join on-disk components into an internal relative path.
pub(crate) fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

/// Split an internal relative path into (parent, last name).
pub(crate) fn split_last(rel: &str) -> (&str, &str) {
    match rel.rfind('/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => ("", rel),
    }
}

/// Client-facing form of an internal path.
pub(crate) fn to_client(rel: &str) -> String {
    rel.replace('/', "\\")
}

/// Open `rel` beneath `root` (never escapes). `rel == ""` opens the root.
pub(crate) fn open_beneath(root: RawFd, rel: &str, flags: i32, mode: u32) -> Result<OwnedFd, i32> {
    let c = CString::new(if rel.is_empty() { "." } else { rel }).map_err(|_| libc::EINVAL)?;
    sys::openat2_beneath(root, &c, flags, mode)
}

/// The parent directory of a path, resolved.
pub(crate) struct Resolved {
    /// `O_PATH` fd of the parent directory.
    pub parent_fd: OwnedFd,
    /// Internal path of the parent (on-disk case).
    pub parent_rel: String,
    /// On-disk name of the last component if it exists, else the client's name.
    pub name: String,
    /// Whether the last component exists (as any file type, including a symlink).
    pub exists: bool,
}

impl Resolved {
    pub fn rel(&self) -> String {
        join(&self.parent_rel, &self.name)
    }
}

/// Find a case-insensitive match for `name` in directory `dirfd`, or else
/// the entry whose 8.3 short name it is: Windows opens a file by either
/// name (MS-FSCC 2.1.5.2.1), and old applications use the short one.
pub(crate) fn find_case_insensitive(dirfd: RawFd, name: &str) -> FsResult<Option<String>> {
    let want = name.to_lowercase();
    // Only a generated short name has a '~' in an 8.3 name (`P#####~H.EXT`).
    let maybe_short = name.contains('~') && crate::shortname::is_8_3(name);
    let mut by_short_name = None;
    for n in sys::list_dir(dirfd)? {
        if let Ok(s) = std::str::from_utf8(&n) {
            if s.to_lowercase() == want {
                return Ok(Some(s.to_string()));
            }
            if maybe_short
                && by_short_name.is_none()
                && crate::shortname::short_name(s).eq_ignore_ascii_case(name)
            {
                by_short_name = Some(s.to_string());
            }
        }
    }
    Ok(by_short_name)
}

/// Does `name` exist in `dirfd` (exact, then case-insensitively)? Returns the
/// on-disk name. Asked of the share's metadata store, so a cache layer can
/// answer the case-insensitive part without scanning (`meta/cache.rs`).
pub(crate) fn lookup(names: &ShareStore, dirfd: RawFd, name: &str) -> FsResult<Option<String>> {
    names.lookup(dirfd, name)
}

const DIR_FLAGS: i32 = libc::O_PATH | libc::O_DIRECTORY;

/// Resolve the parent directories of `comps` (non-empty) beneath `root`,
/// correcting case, then look up the last component.
pub(crate) fn resolve(names: &ShareStore, root: RawFd, comps: &[String]) -> FsResult<Resolved> {
    let (last, dirs) = comps.split_last().ok_or(FsError::InvalidName)?;
    // Fast path: the parent exists with exactly the client's case.
    let direct = dirs.join("/");
    let (parent_fd, parent_rel) = match open_beneath(root, &direct, DIR_FLAGS, 0) {
        Ok(fd) => (fd, direct),
        Err(libc::ENOENT) => walk(names, root, dirs)?,
        Err(libc::ENOTDIR) => return Err(FsError::PathNotFound),
        Err(e) => return Err(FsError::from_errno(e)),
    };
    let (name, exists) = match lookup(names, parent_fd.as_raw_fd(), last)? {
        Some(n) => (n, true),
        None => (last.clone(), false),
    };
    Ok(Resolved {
        parent_fd,
        parent_rel,
        name,
        exists,
    })
}

/// Component-by-component walk with case-insensitive fallback.
fn walk(names: &ShareStore, root: RawFd, dirs: &[String]) -> FsResult<(OwnedFd, String)> {
    let mut rel = String::new();
    let mut fd = open_beneath(root, "", DIR_FLAGS, 0).map_err(FsError::from_errno)?;
    for c in dirs {
        let actual = match lookup(names, fd.as_raw_fd(), c)? {
            Some(a) => a,
            None => return Err(FsError::PathNotFound),
        };
        let next = join(&rel, &actual);
        fd = match open_beneath(root, &next, DIR_FLAGS, 0) {
            Ok(fd) => fd,
            Err(libc::ENOENT) | Err(libc::ENOTDIR) => return Err(FsError::PathNotFound),
            Err(e) => return Err(FsError::from_errno(e)),
        };
        rel = next;
    }
    Ok((fd, rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_valid() {
        assert_eq!(parse("").unwrap(), Vec::<String>::new());
        assert_eq!(parse("\\").unwrap(), Vec::<String>::new());
        assert_eq!(parse("a\\b/c").unwrap(), vec!["a", "b", "c"]);
        assert_eq!(parse("\\a\\").unwrap(), vec!["a"]);
        assert_eq!(parse("ünïcødé name.txt").unwrap(), vec!["ünïcødé name.txt"]);
        assert_eq!(parse("a\\..\\b").unwrap(), vec!["b"]);
        assert!(matches!(parse("..\\..\\.."), Err(FsError::PathSyntaxBad)));
    }

    #[test]
    fn parse_invalid() {
        for bad in [
            "..\\..\\etc\\passwd",
            "a\\..\\..\\b",
            ".",
            "a\\.\\b",
            "a\\\\b",
            "a*",
            "a?b",
            "a<b",
            "a>b",
            "a|b",
            "a\"b",
            "a:stream",
            "a\u{1}b",
            "\\\\double",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be invalid");
        }
        assert!(matches!(parse(&"x".repeat(256)), Err(FsError::NameTooLong)));
        for good in ["trailing.", "trailing ", "...", "a.\\b "] {
            assert!(parse(good).is_ok(), "{good:?} should be valid");
        }
        assert!(parse(&"x".repeat(255)).is_ok());
    }

    #[test]
    fn split_and_join() {
        assert_eq!(split_last("a/b/c"), ("a/b", "c"));
        assert_eq!(split_last("c"), ("", "c"));
        assert_eq!(join("", "x"), "x");
        assert_eq!(join("a", "x"), "a/x");
        assert_eq!(to_client("a/b"), "a\\b");
    }
}
