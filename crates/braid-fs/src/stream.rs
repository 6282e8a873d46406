//! Named streams (NTFS alternate data streams, `file.txt:name:$DATA`):
//! name parsing and on-disk storage.
//!
//! Storage follows Samba's `vfs_streams_xattr`, so that a share can move
//! between Samba and Braid: stream NAME of a file or directory is the
//! extended attribute `user.DosStream.NAME:$DATA` of that file, whose value
//! is the stream's data followed by one NUL byte (an empty stream is a
//! single NUL: some file systems refuse empty xattr values). The xattrs
//! move with the inode, so renaming the file keeps its streams, and
//! directory listings never show them.
//!
//! Limits: a stream is at most [`MAX_STREAM_SIZE`] bytes (the Linux xattr
//! value limit, 64 KiB, less the NUL), and the file system may allow less
//! (ext4 keeps all of a file's xattrs in one block, about 4 KiB, unless it
//! was made with `ea_inode`; tmpfs and XFS take 64 KiB). A write, or a new
//! size, beyond what the file system takes fails with
//! [`FsError::DiskFull`] and leaves the stream as it was. Stream names are
//! at most 255 UTF-16 units (NTFS) and, so that the xattr name fits the
//! kernel's 255-byte limit, at most [`MAX_STREAM_NAME_BYTES`] UTF-8 bytes.
//!
//! Safety: a client stream name becomes part of an xattr name. It is
//! validated ([`validate_name`]: no NUL, `\`, `/` or `:`, bounded length)
//! and always gets the `user.DosStream.` prefix and `:$DATA` suffix, so no
//! client name can reach another xattr (`user.braid.dos`, EAs) or another
//! namespace (`trusted.`, `security.`).

use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::ffi::CString;
use std::hash::BuildHasher;
use std::os::fd::RawFd;
use std::sync::OnceLock;

use crate::error::{FsError, FsResult};
use crate::netatalk_meta;
use crate::sys;

/// Prefix of a stream's xattr name (Samba `SAMBA_XATTR_DOSSTREAM_PREFIX`).
pub const XATTR_PREFIX: &str = "user.DosStream.";
/// Suffix of a stream's xattr name: the stream type.
pub const XATTR_SUFFIX: &str = ":$DATA";
/// Largest stream: the kernel's xattr value limit (XATTR_SIZE_MAX) less
/// the trailing NUL.
pub const MAX_STREAM_SIZE: u64 = 65_535;
/// Longest stream name in UTF-8 bytes: the kernel's 255-byte xattr name
/// limit less the prefix and suffix.
pub const MAX_STREAM_NAME_BYTES: usize = 255 - XATTR_PREFIX.len() - XATTR_SUFFIX.len();

/// The stream part of a client path (MS-FSCC 2.1.5 pathname).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamSpec {
    /// No `:` in the path: the file (or directory) itself.
    None,
    /// `file::$DATA`: the file's unnamed (default) data stream.
    Default,
    /// `file:name` or `file:name:$DATA`: a named data stream, as spelled.
    Named(String),
}

/// Split a client path into its file part and stream part (MS-FSCC
/// 2.1.5.1 / MS-FSA 2.1.5.1: `name[:stream[:type]]` on the last component).
/// The stream part must not contain a path separator; an empty name needs
/// the `$DATA` type (`file::$DATA`); a type other than `$DATA` (any case),
/// an empty type (`file:name:`) or a third `:` is
/// [`FsError::InvalidName`] (OBJECT_NAME_INVALID, as Windows answers).
pub fn split(path: &str) -> FsResult<(&str, StreamSpec)> {
    let Some(i) = path.find(':') else {
        return Ok((path, StreamSpec::None));
    };
    let (base, rest) = (&path[..i], &path[i + 1..]);
    if rest.contains(['\\', '/']) {
        return Err(FsError::InvalidName);
    }
    Ok((base, parse_stream_part(rest)?))
}

/// Parse `name[:type]` (the part after the file name's `:`).
pub fn parse_stream_part(rest: &str) -> FsResult<StreamSpec> {
    let (name, stype) = match rest.split_once(':') {
        Some((n, t)) => (n, Some(t)),
        None => (rest, None),
    };
    if let Some(t) = stype {
        // MS-FSCC 2.1.5.4: the only data stream type is $DATA.
        if !t.eq_ignore_ascii_case("$DATA") {
            return Err(FsError::InvalidName);
        }
    }
    if name.is_empty() {
        return match stype {
            Some(_) => Ok(StreamSpec::Default),
            None => Err(FsError::InvalidName),
        };
    }
    validate_name(name)?;
    Ok(StreamSpec::Named(name.to_string()))
}

/// MS-FSCC 2.1.5.3 stream names: any character but NUL, `\`, `/` and `:`,
/// at most 255 UTF-16 units; and at most [`MAX_STREAM_NAME_BYTES`] bytes
/// so that the xattr name fits.
pub fn validate_name(name: &str) -> FsResult<()> {
    if name.is_empty()
        || name.contains(['\0', '\\', '/', ':'])
        || name.encode_utf16().count() > 255
        || name.len() > MAX_STREAM_NAME_BYTES
    {
        return Err(FsError::InvalidName);
    }
    Ok(())
}

/// The xattr holding stream `name` (validated; the prefix always applied).
pub(crate) fn xattr_name(name: &str) -> FsResult<CString> {
    validate_name(name)?;
    CString::new(format!("{XATTR_PREFIX}{name}{XATTR_SUFFIX}")).map_err(|_| FsError::InvalidName)
}

/// The stream name an xattr holds, if it is a stream's (Netatalk's Finder
/// metadata holds AFP_AfpInfo, on shares that keep it so).
pub(crate) fn name_of_xattr(x: &[u8]) -> Option<&str> {
    if x == netatalk_meta::XATTR.to_bytes() {
        return Some(crate::mac_listing::AFP_INFO_STREAM);
    }
    let s = std::str::from_utf8(x).ok()?;
    let n = s.strip_prefix(XATTR_PREFIX)?.strip_suffix(XATTR_SUFFIX)?;
    (!n.is_empty()).then_some(n)
}

/// A stored stream name as clients see it: `:` and `\`, which no client
/// can have put in a stream name but something else can have stored (a
/// local `setfattr`, Netatalk), as the private-use code points macOS
/// clients use for them (Samba's `macos_string_replace_map`, what its
/// vfs_catia maps): `bar:baz` is listed and opened as `bar\u{f022}baz`.
pub(crate) fn client_name(stored: &str) -> Cow<'_, str> {
    if !stored.contains([':', '\\']) {
        return Cow::Borrowed(stored);
    }
    Cow::Owned(stored.replace(':', "\u{f022}").replace('\\', "\u{f026}"))
}

/// Case-insensitive key of a stream name (stream names compare without
/// regard to case, as file names do).
pub(crate) fn fold(name: &str) -> String {
    name.to_lowercase()
}

/// A 64-bit identity for stream `name` of a file, never 0 (0 is the file
/// itself): keys the stream's share-mode table and its oplocks and leases.
/// Keyed with a per-process random key, so clients cannot make two names
/// collide.
pub(crate) fn stream_key(name: &str) -> u64 {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::new).hash_one(fold(name)) | 1
}

fn map_err(e: i32) -> FsError {
    match e {
        // Too big for the file system (ext4: one block) or the kernel.
        libc::ENOSPC | libc::E2BIG => FsError::DiskFull,
        libc::ERANGE => FsError::InvalidName,
        libc::ENODATA => FsError::NotFound,
        libc::ENOTSUP => FsError::NotSupported,
        e => FsError::from_errno(e),
    }
}

/// The streams of the file behind `fd`: (name as clients see it
/// ([`client_name`]), xattr name).
pub(crate) fn list(fd: RawFd) -> FsResult<Vec<(String, Vec<u8>)>> {
    let names = match sys::xattr_list(fd) {
        Ok(n) => n,
        Err(libc::ENOTSUP) => return Ok(Vec::new()),
        Err(e) => return Err(map_err(e)),
    };
    Ok(names
        .into_iter()
        .filter(|x| x.as_slice() != netatalk_meta::XATTR.to_bytes())
        .filter_map(|x| name_of_xattr(&x).map(|n| (client_name(n).into_owned(), x.clone())))
        .collect())
}

/// The xattr of the stream named `name` without regard to case, if any.
pub(crate) fn find(fd: RawFd, name: &str) -> FsResult<Option<CString>> {
    let want = fold(name);
    for (n, x) in list(fd)? {
        if n == name || fold(&n) == want {
            return CString::new(x).map(Some).map_err(|_| FsError::InvalidName);
        }
    }
    Ok(None)
}

/// The data of a stream.
pub(crate) fn read(fd: RawFd, x: &std::ffi::CStr) -> FsResult<Vec<u8>> {
    if x == netatalk_meta::XATTR {
        return netatalk_meta::read(fd);
    }
    let mut v = sys::xattr_get(fd, x).map_err(map_err)?;
    // Samba's format ends in one NUL; tolerate values written without it.
    if v.last() == Some(&0) {
        v.pop();
    }
    Ok(v)
}

/// The size of a stream without copying its data out.
pub(crate) fn size(fd: RawFd, x: &std::ffi::CStr) -> FsResult<u64> {
    Ok(read(fd, x)?.len() as u64)
}

/// Replace the data of a stream (creating it if need be).
pub(crate) fn write(fd: RawFd, x: &std::ffi::CStr, data: &[u8]) -> FsResult<()> {
    if x == netatalk_meta::XATTR {
        return netatalk_meta::write(fd, data);
    }
    if data.len() as u64 > MAX_STREAM_SIZE {
        return Err(FsError::DiskFull);
    }
    let mut v = Vec::with_capacity(data.len() + 1);
    v.extend_from_slice(data);
    v.push(0);
    sys::xattr_put(fd, x, Some(&v)).map_err(map_err)
}

/// Create an empty stream; `Ok(false)` if it already exists.
pub(crate) fn create(fd: RawFd, x: &std::ffi::CStr) -> FsResult<bool> {
    if x == netatalk_meta::XATTR {
        return Ok(true); // stored at the first write
    }
    match sys::xattr_create(fd, x, &[0]) {
        Ok(()) => Ok(true),
        Err(libc::EEXIST) => Ok(false),
        Err(e) => Err(map_err(e)),
    }
}

/// Remove a stream; a stream already gone is not an error.
pub(crate) fn remove(fd: RawFd, x: &std::ffi::CStr) -> FsResult<()> {
    if x == netatalk_meta::XATTR {
        return netatalk_meta::remove(fd);
    }
    match sys::xattr_put(fd, x, None) {
        Ok(()) | Err(libc::ENODATA) => Ok(()),
        Err(e) => Err(map_err(e)),
    }
}

/// Remove every named stream of a file (an overwrite or supersede of the
/// file replaces all its data, MS-FSA 2.1.5.1.2.1).
pub(crate) fn remove_all(fd: RawFd) -> FsResult<()> {
    for (_, x) in list(fd)? {
        let x = CString::new(x).map_err(|_| FsError::InvalidName)?;
        remove(fd, &x)?;
    }
    Ok(())
}

/// Allocation reported for a stream of `size` bytes: rounded up to 8, as
/// NTFS reports small (resident) streams.
pub(crate) fn allocation(size: u64) -> u64 {
    size.div_ceil(8) * 8
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn split_paths() {
        assert_eq!(split("a\\b.txt").unwrap(), ("a\\b.txt", StreamSpec::None));
        assert_eq!(split("f::$DATA").unwrap(), ("f", StreamSpec::Default));
        assert_eq!(split("f::$data").unwrap(), ("f", StreamSpec::Default));
        assert_eq!(
            split("d\\f:s1").unwrap(),
            ("d\\f", StreamSpec::Named("s1".into()))
        );
        assert_eq!(
            split("f:Second Stream:$DaTa").unwrap(),
            ("f", StreamSpec::Named("Second Stream".into()))
        );
        // Control characters and wildcards are valid in stream names.
        assert_eq!(
            split("f:\u{5}Stream\n One").unwrap().1,
            StreamSpec::Named("\u{5}Stream\n One".into())
        );
        assert_eq!(
            split("f:?Stream*").unwrap().1,
            StreamSpec::Named("?Stream*".into())
        );
        assert_eq!(split(":s").unwrap(), ("", StreamSpec::Named("s".into())));
    }

    #[test]
    fn split_rejects() {
        for bad in [
            "f:",
            "f::",
            "f:s:",
            "f:s:$FOO",
            "f:s:?D*a",
            "f::$INDEX_ALLOCATION",
            "f:a:b:$DATA",
            "f:s\\x",
            "f:s/x",
            "f:../../etc",
            "f:s\0x",
            "d:s\\f",
        ] {
            assert!(
                matches!(split(bad), Err(FsError::InvalidName)),
                "{bad:?} should be invalid"
            );
        }
    }

    #[test]
    fn name_length_limits() {
        let ok = "x".repeat(MAX_STREAM_NAME_BYTES);
        assert!(validate_name(&ok).is_ok());
        assert!(validate_name(&"x".repeat(MAX_STREAM_NAME_BYTES + 1)).is_err());
        // 255 UTF-16 units is the NTFS limit, whatever the byte length.
        assert!(validate_name(&"é".repeat(117)).is_ok());
        assert!(validate_name(&"é".repeat(118)).is_err());
        assert!(validate_name(&"x".repeat(256)).is_err());
    }

    #[test]
    fn xattr_names_stay_in_their_namespace() {
        assert_eq!(
            xattr_name("s1").unwrap().to_bytes(),
            b"user.DosStream.s1:$DATA"
        );
        // Whatever the name, the prefix and suffix are applied; names that
        // could reach other xattrs are refused before that.
        for bad in ["", "a\0b", "x/y", "a:b", "..\\dos"] {
            assert!(xattr_name(bad).is_err(), "{bad:?}");
        }
        let x = xattr_name("braid.dos").unwrap();
        assert_eq!(x.to_bytes(), b"user.DosStream.braid.dos:$DATA");
        assert_eq!(name_of_xattr(b"user.DosStream.s1:$DATA"), Some("s1"));
        assert_eq!(name_of_xattr(b"user.braid.dos"), None);
        assert_eq!(name_of_xattr(b"user.DosStream.:$DATA"), None);
        assert_eq!(name_of_xattr(b"user.braid.ea.X"), None);
        assert_eq!(
            name_of_xattr(b"user.org.netatalk.Metadata"),
            Some("AFP_AfpInfo")
        );
        assert_eq!(client_name("bar:baz"), "bar\u{f022}baz");
        assert_eq!(client_name("a\\b"), "a\u{f026}b");
        // What a client may name a stream is shown as it is.
        assert_eq!(client_name("?Stream*|<>"), "?Stream*|<>");
        assert!(matches!(client_name("plain"), Cow::Borrowed("plain")));
    }

    #[test]
    fn stream_keys_fold_case() {
        assert_eq!(stream_key("Stream"), stream_key("sTREAM"));
        assert_ne!(stream_key("a"), stream_key("b"));
        assert_ne!(stream_key("a"), 0);
    }

    fn temp_file() -> Option<(tempfile_dir::Dir, std::fs::File)> {
        let d = tempfile_dir::Dir::new()?;
        let f = std::fs::File::create(d.0.join("f")).ok()?;
        // Skip where the file system takes no user xattrs.
        let x = CString::new("user.braid.probe").ok()?;
        sys::xattr_put(f.as_raw_fd(), &x, Some(b"1")).ok()?;
        Some((d, f))
    }

    #[test]
    fn storage_round_trip_and_case() {
        let Some((_d, f)) = temp_file() else {
            eprintln!("no user xattrs here: skipped");
            return;
        };
        let fd = f.as_raw_fd();
        let x = xattr_name("Stream One").unwrap();
        assert!(create(fd, &x).unwrap());
        assert!(!create(fd, &x).unwrap());
        assert_eq!(read(fd, &x).unwrap(), b"");
        // Samba's format: the data and one NUL.
        assert_eq!(sys::xattr_get(fd, &x).unwrap(), b"\0");
        write(fd, &x, b"test data").unwrap();
        assert_eq!(sys::xattr_get(fd, &x).unwrap(), b"test data\0");
        assert_eq!(read(fd, &x).unwrap(), b"test data");
        assert_eq!(size(fd, &x).unwrap(), 9);
        // Found without regard to case, with the stored spelling.
        assert_eq!(find(fd, "STREAM ONE").unwrap(), Some(x.clone()));
        assert_eq!(find(fd, "other").unwrap(), None);
        let names: Vec<String> = list(fd).unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, vec!["Stream One".to_string()]);
        remove(fd, &x).unwrap();
        remove(fd, &x).unwrap();
        assert_eq!(find(fd, "Stream One").unwrap(), None);
    }

    #[test]
    fn storage_size_limit_is_disk_full() {
        let Some((_d, f)) = temp_file() else {
            eprintln!("no user xattrs here: skipped");
            return;
        };
        let fd = f.as_raw_fd();
        let x = xattr_name("big").unwrap();
        write(fd, &x, b"small").unwrap();
        let too_big = vec![7u8; MAX_STREAM_SIZE as usize + 1];
        assert!(matches!(write(fd, &x, &too_big), Err(FsError::DiskFull)));
        // Whatever the file system takes, a refusal is DiskFull and the
        // stream keeps its data.
        match write(fd, &x, &vec![1u8; 60_000]) {
            Ok(()) => assert_eq!(size(fd, &x).unwrap(), 60_000),
            Err(e) => {
                assert!(matches!(e, FsError::DiskFull), "{e:?}");
                assert_eq!(read(fd, &x).unwrap(), b"small");
            }
        }
        assert!(matches!(map_err(libc::E2BIG), FsError::DiskFull));
        assert!(matches!(map_err(libc::ENOSPC), FsError::DiskFull));
    }

    /// A temporary directory removed on drop (no extra dependency).
    mod tempfile_dir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Option<Dir> {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "braid-stream-test-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&p).ok()?;
                Some(Dir(p))
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}
