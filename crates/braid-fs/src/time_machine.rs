//! Space used by Time Machine backups on a share. macOS writes a backup
//! as a sparse bundle: a directory `NAME.sparsebundle` at the share's top
//! holding `Info.plist` (which gives the band size) and `bands/`, one file
//! per band. Time Machine prunes old backups when the volume looks full,
//! so a share with a size cap reports the cap less what the bundles take
//! (the way Samba's `fruit:time machine max size` counts it: bands times
//! band size, whatever the band files hold).

use std::ffi::CString;
use std::os::fd::{AsRawFd, RawFd};

use crate::error::FsResult;
use crate::{sys, FileService, ShareRef};

/// Time Machine's band size when `Info.plist` does not say (8 MiB).
const DEFAULT_BAND_SIZE: u64 = 8 << 20;
/// The most of `Info.plist` read: it is a few hundred bytes.
const MAX_PLIST: usize = 64 << 10;

impl FileService {
    /// Bytes the sparse bundles at the top of `share` account for.
    pub fn sparse_bundle_usage(&self, share: &ShareRef) -> FsResult<u64> {
        let root = share.0.root_fd();
        let mut used = 0u64;
        for name in sys::list_dir(root)? {
            if !name.ends_with(b".sparsebundle") {
                continue;
            }
            let Ok(c) = CString::new(name) else { continue };
            let Ok(bundle) = sys::openat(
                root,
                &c,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            ) else {
                continue;
            };
            used = used.saturating_add(bundle_usage(bundle.as_raw_fd()));
        }
        Ok(used)
    }
}

fn bundle_usage(bundle: RawFd) -> u64 {
    let band_size = read_small(bundle, c"Info.plist")
        .and_then(|p| band_size(&p))
        .unwrap_or(DEFAULT_BAND_SIZE);
    let bands = sys::openat(
        bundle,
        c"bands",
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
    .ok()
    .and_then(|d| sys::list_dir(d.as_raw_fd()).ok())
    .map_or(0, |names| names.len() as u64);
    bands.saturating_mul(band_size)
}

fn read_small(dir: RawFd, name: &std::ffi::CStr) -> Option<Vec<u8>> {
    let fd = sys::openat(dir, name, libc::O_RDONLY | libc::O_NOFOLLOW, 0).ok()?;
    let mut buf = vec![0u8; MAX_PLIST];
    let n = sys::pread(fd.as_raw_fd(), &mut buf, 0).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// The `<integer>` after `<key>band-size</key>` in a property list.
fn band_size(plist: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(plist).ok()?;
    let after_key = &text[text.find("<key>band-size</key>")? + "<key>band-size</key>".len()..];
    let start = after_key.find("<integer>")? + "<integer>".len();
    let end = after_key[start..].find("</integer>")? + start;
    after_key[start..end].trim().parse().ok().filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use super::band_size;

    #[test]
    fn reads_the_band_size_key() {
        let plist = b"<dict>\n  <key>bundle-backingstore-version</key>\n  <integer>1</integer>\n  \
                      <key>band-size</key>\n  <integer>8388608</integer>\n</dict>\n";
        assert_eq!(band_size(plist), Some(8_388_608));
        assert_eq!(
            band_size(b"<dict><key>band-size</key><string>x</string></dict>"),
            None
        );
        assert_eq!(
            band_size(b"<dict><key>size</key><integer>5</integer></dict>"),
            None
        );
        assert_eq!(band_size(b"<key>band-size</key><integer>0</integer>"), None);
    }
}
