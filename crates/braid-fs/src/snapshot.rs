//! Previous versions: a share's snapshots, served read-only.
//!
//! A snapshot is a directory holding the whole share tree as it was at one
//! time: a btrfs or ZFS snapshot, an LVM snapshot mounted there, or a copy
//! made by rsync or `cp -al`. The snapshots of a share sit side by side in
//! one directory, each named after the time it was taken (UTC) in a
//! configurable strftime-like format, by default Samba's `vfs_shadow_copy2`
//! one, `@GMT-%Y.%m.%d-%H.%M.%S`.
//!
//! Clients list them with FSCTL_SRV_ENUMERATE_SNAPSHOTS (MS-SMB2 3.3.5.15.1)
//! and open a file as of one with a timewarp token (MS-SMB2 3.3.5.9.4). An
//! open in a snapshot is an open in a *view*: a share whose root is the
//! snapshot directory and which refuses every change with
//! [`FsError::WriteProtected`] (STATUS_MEDIA_WRITE_PROTECTED, as Samba
//! answers), whatever the directory's own permissions allow.
//!
//! A snapshot directory inside the share (a relative `dir` of one
//! component, such as `.snapshots`) is neither listed nor opened through
//! the live share, so clients cannot change a snapshot behind its back.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::error::{last_errno, FsError, FsResult};
use crate::share::{Share, ShareRef};
use crate::{path, sys};

/// Samba's `vfs_shadow_copy2` default, and the form of the `@GMT` tokens
/// SMB uses on the wire (MS-SMB2 2.2.32.2).
pub const DEFAULT_FORMAT: &str = "@GMT-%Y.%m.%d-%H.%M.%S";

/// Seconds between 1601-01-01 (FILETIME's epoch) and 1970-01-01.
const EPOCH_DIFF_SECS: i64 = 11_644_473_600;

/// Where a share's snapshots are and how their directories are named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotConfig {
    /// The directory holding one directory per snapshot: absolute, or
    /// relative to the share root.
    pub dir: PathBuf,
    /// The snapshot directories' names: `%Y`, `%m`, `%d`, `%H`, `%M`,
    /// `%S` (UTC) and `%%`; any other character stands for itself.
    pub format: String,
}

impl SnapshotConfig {
    /// Check the format, so a bad one is a configuration error rather
    /// than a share with no snapshots: it must name at least the year,
    /// and know every directive it uses.
    pub fn validate(&self) -> Result<(), String> {
        let items = parse_format(&self.format)?;
        if !items.contains(&Item::Field(Field::Year)) {
            return Err("needs %Y (the year)".into());
        }
        if self.dir.as_os_str().is_empty() {
            return Err("the snapshot directory is empty".into());
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Literal(char),
    Field(Field),
}

fn parse_format(format: &str) -> Result<Vec<Item>, String> {
    let mut items = Vec::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            items.push(Item::Literal(c));
            continue;
        }
        items.push(match chars.next() {
            Some('Y') => Item::Field(Field::Year),
            Some('m') => Item::Field(Field::Month),
            Some('d') => Item::Field(Field::Day),
            Some('H') => Item::Field(Field::Hour),
            Some('M') => Item::Field(Field::Minute),
            Some('S') => Item::Field(Field::Second),
            Some('%') => Item::Literal('%'),
            Some(o) => {
                return Err(format!(
                    "unknown directive %{o} (known: %Y %m %d %H %M %S %%)"
                ))
            }
            None => return Err("ends with a lone %".into()),
        });
    }
    Ok(items)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (`civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// The name of the snapshot taken at `t` (Unix seconds, UTC).
fn format_time(items: &[Item], t: i64) -> String {
    let (y, mo, d) = civil_from_days(t.div_euclid(86_400));
    let secs = t.rem_euclid(86_400);
    let (h, mi, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    for item in items {
        match item {
            Item::Literal(c) => out.push(*c),
            Item::Field(Field::Year) => out.push_str(&format!("{y:04}")),
            Item::Field(Field::Month) => out.push_str(&format!("{mo:02}")),
            Item::Field(Field::Day) => out.push_str(&format!("{d:02}")),
            Item::Field(Field::Hour) => out.push_str(&format!("{h:02}")),
            Item::Field(Field::Minute) => out.push_str(&format!("{mi:02}")),
            Item::Field(Field::Second) => out.push_str(&format!("{s:02}")),
        }
    }
    out
}

/// The time a snapshot directory's name stands for, if it has the form.
/// Fields are fixed-width (`%Y` four digits, the others two); fields the
/// format leaves out are the start of their period.
fn parse_time(items: &[Item], name: &str) -> Option<i64> {
    let b = name.as_bytes();
    let mut pos = 0;
    let (mut y, mut mo, mut d, mut h, mut mi, mut s) = (None, 1u32, 1u32, 0i64, 0i64, 0i64);
    for item in items {
        match item {
            Item::Literal(c) => {
                let mut buf = [0u8; 4];
                let lit = c.encode_utf8(&mut buf).as_bytes();
                if b.get(pos..pos + lit.len())? != lit {
                    return None;
                }
                pos += lit.len();
            }
            Item::Field(f) => {
                let width = if *f == Field::Year { 4 } else { 2 };
                let digits = b.get(pos..pos + width)?;
                if !digits.iter().all(u8::is_ascii_digit) {
                    return None;
                }
                let v: u32 = std::str::from_utf8(digits).ok()?.parse().ok()?;
                pos += width;
                match f {
                    Field::Year => y = Some(v as i64),
                    Field::Month => mo = v,
                    Field::Day => d = v,
                    Field::Hour => h = v as i64,
                    Field::Minute => mi = v as i64,
                    Field::Second => s = v as i64,
                }
            }
        }
    }
    if pos != b.len()
        || !(1..=12).contains(&mo)
        || !(1..=31).contains(&d)
        || h > 23
        || mi > 59
        || s > 59
    {
        return None;
    }
    let t = days_from_civil(y?, mo, d) * 86_400 + h * 3600 + mi * 60 + s;
    // 31 February and its kind do not round-trip: not a snapshot name.
    (format_time(items, t) == name).then_some(t)
}

/// The `@GMT-YYYY.MM.DD-HH.MM.SS` token of a snapshot time (MS-SMB2
/// 2.2.32.2), as FSCTL_SRV_ENUMERATE_SNAPSHOTS lists it.
pub fn gmt_token(t: i64) -> String {
    format_time(&parse_format(DEFAULT_FORMAT).expect("valid"), t)
}

/// A timewarp token (MS-SMB2 2.2.13.2.7: a FILETIME) as Unix seconds.
/// Snapshots are named to the second, so the rest is dropped.
pub fn filetime_to_unix(filetime: u64) -> i64 {
    (filetime / 10_000_000) as i64 - EPOCH_DIFF_SECS
}

/// The snapshots configured for a share, and the views of them in use.
pub(crate) struct Snapshots {
    config: SnapshotConfig,
    items: Vec<Item>,
    /// Views with opens, by time; a view no open holds is dropped, so that
    /// a rotated-out snapshot is not kept busy.
    views: Mutex<HashMap<i64, Weak<Share>>>,
}

impl Snapshots {
    pub(crate) fn new(config: SnapshotConfig) -> Result<Snapshots, String> {
        config.validate()?;
        let items = parse_format(&config.format)?;
        Ok(Snapshots {
            config,
            items,
            views: Mutex::new(HashMap::new()),
        })
    }

    /// The first component of a relative snapshot directory: the live
    /// share hides it.
    pub(crate) fn hidden_root_entry(&self) -> Option<String> {
        if self.config.dir.is_absolute() {
            return None;
        }
        let first = self.config.dir.components().next()?;
        match first {
            std::path::Component::Normal(n) => n.to_str().map(str::to_string),
            _ => None,
        }
    }

    /// The directory holding the snapshots, opened `O_PATH`.
    fn open_dir(&self, share: &Share) -> FsResult<OwnedFd> {
        let dir = &self.config.dir;
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
        if dir.is_absolute() {
            let c =
                CString::new(dir.as_os_str().as_bytes()).map_err(|_| FsError::InvalidParameter)?;
            // SAFETY: plain syscall with a valid C string.
            let fd = unsafe { libc::open(c.as_ptr(), flags) };
            if fd < 0 {
                return Err(FsError::from_errno(last_errno()));
            }
            // SAFETY: fresh fd.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let rel = dir.to_str().ok_or(FsError::InvalidParameter)?;
        path::open_beneath(share.root_fd(), rel, flags, 0).map_err(FsError::from_errno)
    }

    /// Snapshot times, newest first. No snapshot directory: none.
    pub(crate) fn list(&self, share: &Share) -> FsResult<Vec<i64>> {
        let dir = match self.open_dir(share) {
            Ok(fd) => fd,
            Err(FsError::NotFound | FsError::PathNotFound) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut times: Vec<i64> = sys::list_dir(dir.as_raw_fd())?
            .iter()
            .filter_map(|n| std::str::from_utf8(n).ok())
            .filter_map(|n| parse_time(&self.items, n))
            .collect();
        times.sort_unstable_by(|a, b| b.cmp(a));
        times.dedup();
        Ok(times)
    }

    /// The read-only view of the snapshot taken at `t`; NotFound if there
    /// is none.
    pub(crate) fn view(&self, share: &Share, t: i64) -> FsResult<ShareRef> {
        let mut views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = views.get(&t).and_then(Weak::upgrade) {
            return Ok(ShareRef(v));
        }
        let dir = self.open_dir(share).map_err(|e| match e {
            FsError::PathNotFound => FsError::NotFound,
            e => e,
        })?;
        let name = format_time(&self.items, t);
        let c = CString::new(name.as_bytes()).map_err(|_| FsError::InvalidParameter)?;
        let root = sys::openat(
            dir.as_raw_fd(),
            &c,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0,
        )
        .map_err(|e| match e {
            libc::ENOTDIR | libc::ELOOP => FsError::NotFound,
            e => FsError::from_errno(e),
        })?;
        let root_path = snapshot_path(share, &self.config.dir, &name);
        let view = Arc::new(share.view_of_snapshot(root_path, root, t));
        views.retain(|_, w| w.strong_count() > 0);
        views.insert(t, Arc::downgrade(&view));
        Ok(ShareRef(view))
    }
}

fn snapshot_path(share: &Share, dir: &Path, name: &str) -> PathBuf {
    let base = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        share.root_path.join(dir)
    };
    base.join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(f: &str) -> Vec<Item> {
        parse_format(f).unwrap()
    }

    #[test]
    fn default_names_round_trip() {
        let i = items(DEFAULT_FORMAT);
        // 2015-10-31 19:40:30 UTC, the time smbtorture's twrp tests use.
        let t = 1_446_320_430;
        assert_eq!(format_time(&i, t), "@GMT-2015.10.31-19.40.30");
        assert_eq!(parse_time(&i, "@GMT-2015.10.31-19.40.30"), Some(t));
        assert_eq!(gmt_token(0), "@GMT-1970.01.01-00.00.00");
        // Leap day, and the day after.
        let leap = parse_time(&i, "@GMT-2024.02.29-23.59.59").unwrap();
        assert_eq!(format_time(&i, leap + 1), "@GMT-2024.03.01-00.00.00");
    }

    #[test]
    fn names_not_of_the_form_are_not_snapshots() {
        let i = items(DEFAULT_FORMAT);
        for n in [
            "@GMT-2015.10.31-19.40.3",
            "@GMT-2015.10.31-19.40.300",
            "@GMT-2015.02.31-19.40.30",
            "@GMT-2015.13.01-00.00.00",
            "@GMT-2015.10.31-24.00.00",
            "@gmt-2015.10.31-19.40.30",
            "@GMT-2015.1a.31-19.40.30",
            "lost+found",
            "",
        ] {
            assert_eq!(parse_time(&i, n), None, "{n}");
        }
    }

    #[test]
    fn other_formats() {
        // zfs-auto-snapshot's names, to the minute.
        let i = items("zfs-auto-snap_hourly-%Y-%m-%d-%H%M");
        let t = parse_time(&i, "zfs-auto-snap_hourly-2026-11-25-1017").unwrap();
        assert_eq!(gmt_token(t), "@GMT-2026.11.25-10.17.00");
        assert_eq!(format_time(&i, t), "zfs-auto-snap_hourly-2026-11-25-1017");
        let pct = items("100%%-%Y");
        assert_eq!(
            parse_time(&pct, "100%-2026"),
            Some(days_from_civil(2026, 1, 1) * 86_400)
        );
    }

    #[test]
    fn bad_formats_are_refused() {
        let cfg = |f: &str| SnapshotConfig {
            dir: ".snapshots".into(),
            format: f.into(),
        };
        assert!(cfg(DEFAULT_FORMAT).validate().is_ok());
        assert!(cfg("%m-%d").validate().unwrap_err().contains("%Y"));
        assert!(cfg("%Y-%j").validate().unwrap_err().contains("%j"));
        assert!(cfg("%Y%").validate().is_err());
    }

    #[test]
    fn filetime_tokens() {
        // 2015-10-31 19:40:30 UTC as a FILETIME, plus a fraction.
        let ft = (1_446_320_430 + EPOCH_DIFF_SECS) as u64 * 10_000_000 + 1234;
        assert_eq!(filetime_to_unix(ft), 1_446_320_430);
    }
}
