//! The users a logon is checked against, kept current with the users file:
//! `braid user add` and `braid user remove` take effect at the next logon,
//! without a restart, as `smbpasswd -a` does for Samba.
//!
//! Each logon looks at the file's metadata (one `stat`); when it changed
//! (`braid user` replaces the file, so its inode changes), the file is read
//! again. A file that no longer loads (bad permissions, a broken line,
//! gone) leaves the last good users in force, with one warning per change.
//! Sessions already set up stay: removing a user stops new logons only.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use tracing::{info, warn};

use crate::userdb::UserDb;

/// What identifies one version of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    mode: u32,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
            mode: meta.mode(),
        }
    }
}

pub struct LiveUsers {
    file: Option<PathBuf>,
    /// `--user` flags: always there, and they win over the file.
    fixed: UserDb,
    current: RwLock<Arc<UserDb>>,
    /// The file's version last looked at (loaded, or refused); None when
    /// it could not even be looked at.
    seen: Mutex<Option<Stamp>>,
}

impl From<UserDb> for LiveUsers {
    /// Users that never change (no file).
    fn from(fixed: UserDb) -> LiveUsers {
        LiveUsers {
            file: None,
            current: RwLock::new(Arc::new(fixed.clone())),
            fixed,
            seen: Mutex::new(None),
        }
    }
}

impl LiveUsers {
    /// Users from `file` (already loaded as `from_file`, so that a bad
    /// file stops the start) and the fixed `--user` ones.
    pub fn with_file(file: PathBuf, from_file: UserDb, fixed: UserDb) -> LiveUsers {
        let seen = std::fs::metadata(&file).ok().map(|m| Stamp::of(&m));
        let mut all = from_file;
        all.merge(fixed.clone());
        LiveUsers {
            file: Some(file),
            fixed,
            current: RwLock::new(Arc::new(all)),
            seen: Mutex::new(seen),
        }
    }

    /// The users now, the file read again if it changed.
    pub fn current(&self) -> Arc<UserDb> {
        if let Some(file) = &self.file {
            self.refresh(file);
        }
        self.current.read().unwrap().clone()
    }

    fn refresh(&self, file: &std::path::Path) {
        let now = std::fs::metadata(file).ok().map(|m| Stamp::of(&m));
        let mut seen = self.seen.lock().unwrap();
        if now == *seen {
            return;
        }
        *seen = now;
        match UserDb::load(file) {
            Ok(mut db) => {
                db.merge(self.fixed.clone());
                info!(file = %file.display(), users = db.len(), "users file read again");
                *self.current.write().unwrap() = Arc::new(db);
            }
            Err(e) => warn!("{e}; the users read before stay in force"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("braid-live-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("users")
    }

    #[test]
    fn a_user_added_or_removed_counts_at_the_next_lookup() {
        let file = temp_file("add");
        UserDb::add_user(&file, "alice", "a-password").unwrap();
        let fixed = UserDb::from_pairs(&[("flag", "f")]).unwrap();
        let live = LiveUsers::with_file(file.clone(), UserDb::load(&file).unwrap(), fixed);
        assert!(live.current().contains("alice") && live.current().contains("flag"));
        assert!(!live.current().contains("bob"));

        UserDb::add_user(&file, "bob", "b-password").unwrap();
        assert!(live.current().contains("bob"));
        assert_eq!(
            live.current().nt_hash("bob"),
            UserDb::from_pairs(&[("bob", "b-password")])
                .unwrap()
                .nt_hash("bob")
        );

        assert!(UserDb::remove_user(&file, "alice").unwrap());
        let now = live.current();
        assert!(!now.contains("alice") && now.contains("bob") && now.contains("flag"));
        std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_file_that_no_longer_loads_leaves_the_last_users() {
        use std::os::unix::fs::PermissionsExt;
        let file = temp_file("bad");
        UserDb::add_user(&file, "alice", "a-password").unwrap();
        let live = LiveUsers::with_file(file.clone(), UserDb::load(&file).unwrap(), UserDb::new());
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(
            live.current().contains("alice"),
            "a readable-by-all file is refused"
        );
        std::fs::remove_file(&file).unwrap();
        assert!(
            live.current().contains("alice"),
            "a removed file is not an empty one"
        );
        UserDb::add_user(&file, "carol", "c-password").unwrap();
        let now = live.current();
        assert!(now.contains("carol") && !now.contains("alice"));
        std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
    }
}
