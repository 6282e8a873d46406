//! Name tunneling: a file deleted under a long name and created again soon
//! after under its 8.3 short name gets its long name back. NTFS does this
//! for 15 seconds ("file system tunneling"), and Samba's mangling cache
//! does it too: an old application that saves `LONGNA~1.DOC` by deleting
//! and recreating it keeps the file's long name, `Long name.doc`.
//! (NTFS also tunnels the creation time; Braid, as Samba, does not.)

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::shortname::short_name;

/// How long a deleted name is remembered, as NTFS's default.
const REMEMBERED_FOR: Duration = Duration::from_secs(15);
/// Names remembered per share at most; older ones go first.
const CAPACITY: usize = 4096;

#[derive(Default)]
pub(crate) struct Tunnel {
    /// (parent directory's share path, upper-cased short name) ->
    /// (long name, when it went).
    names: Mutex<HashMap<(String, String), (String, SystemTime)>>,
}

impl Tunnel {
    /// The file `long` in directory `parent` (share-relative, on-disk
    /// case) went away at `now`.
    pub(crate) fn remember(&self, parent: &str, long: &str, now: SystemTime) {
        let short = short_name(long);
        if short.eq_ignore_ascii_case(long) {
            return;
        }
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        if names.len() >= CAPACITY {
            names.retain(|_, (_, at)| fresh(*at, now));
            if names.len() >= CAPACITY {
                let oldest = names
                    .iter()
                    .min_by_key(|(_, (_, at))| *at)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    names.remove(&k);
                }
            }
        }
        names.insert(
            (parent.to_string(), short.to_ascii_uppercase()),
            (long.to_string(), now),
        );
    }

    /// The long name to create instead of `name` in `parent`, if `name` is
    /// the short name of a file that went from there within 15 seconds.
    pub(crate) fn take(&self, parent: &str, name: &str, now: SystemTime) -> Option<String> {
        if !name.contains('~') || !crate::shortname::is_8_3(name) {
            return None;
        }
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let (long, at) = names.remove(&(parent.to_string(), name.to_ascii_uppercase()))?;
        fresh(at, now).then_some(long)
    }
}

fn fresh(at: SystemTime, now: SystemTime) -> bool {
    now.duration_since(at).map_or(true, |d| d <= REMEMBERED_FOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_name_brings_the_long_name_back_for_15_seconds() {
        let t = Tunnel::default();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let long = "Quarterly report.docx";
        let short = short_name(long);
        t.remember("docs", long, now);
        // Another directory, or a name that is not the short name: nothing.
        assert_eq!(t.take("", &short, now), None);
        assert_eq!(t.take("docs", "OTHER~1.DOC", now), None);
        assert_eq!(
            t.take("docs", &short.to_lowercase(), now).as_deref(),
            Some(long)
        );
        // Taken once.
        assert_eq!(t.take("docs", &short, now), None);

        t.remember("docs", long, now);
        assert_eq!(t.take("docs", &short, now + Duration::from_secs(16)), None);
    }

    #[test]
    fn names_that_are_their_own_short_name_are_not_remembered() {
        let t = Tunnel::default();
        let now = SystemTime::UNIX_EPOCH;
        t.remember("", "README.TXT", now);
        assert!(t.names.lock().unwrap().is_empty());
    }

    #[test]
    fn the_memory_is_bounded() {
        let t = Tunnel::default();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        for i in 0..CAPACITY + 10 {
            t.remember("", &format!("a long file name {i}.text"), now);
        }
        assert!(t.names.lock().unwrap().len() <= CAPACITY);
    }
}
