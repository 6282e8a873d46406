//! Braid's user database: user names and NT hashes (MS-NLMP 3.3.1 NTOWFv1),
//! never passwords.
//!
//! File format, one user per line:
//!
//! ```text
//! # comment
//! alice:a4f49c406510bdcab6824ee7c30fd852
//! bob:8846f7eaee8fb117ad06bdd830b7586c:1001:1001
//! ```
//!
//! The optional last two fields are the Unix uid and gid the user's new
//! files and directories get, so that NFS clients, which see numeric
//! owners, and SMB agree on who owns a file. Without them a file created
//! over SMB belongs to the server process.
//!
//! The file must not be accessible by group or others (`chmod 600`): an NT
//! hash is as good as the password for NTLM. User names match
//! case-insensitively, as Windows account names do.

use braid_fs::FileOwner;
use braid_smb_proto::auth::nt_hash;
use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum UserDbError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error(
        "{}: user database is accessible by group or others (mode {mode:03o}); \
         it holds password hashes: run `chmod 600 {}`",
        path.display(),
        path.display()
    )]
    InsecurePermissions { path: PathBuf, mode: u32 },
    #[error("{}:{line}: {reason}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        reason: &'static str,
    },
    #[error("invalid user name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("invalid --user value: expected NAME:PASSWORD")]
    InvalidUserArg,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> UserDbError + '_ {
    move |source| UserDbError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Checks a user name: non-empty, at most 256 characters, no `:` (the
/// field separator), no control characters, no surrounding whitespace, and
/// not starting with `#`.
pub fn validate_name(name: &str) -> Result<(), UserDbError> {
    let bad = |reason| {
        Err(UserDbError::InvalidName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.chars().count() > 256 {
        return bad("longer than 256 characters");
    }
    if name.contains(':') {
        return bad("contains ':'");
    }
    if name.chars().any(char::is_control) {
        return bad("contains a control character");
    }
    if name.trim() != name {
        return bad("leading or trailing whitespace");
    }
    if name.starts_with('#') {
        return bad("starts with '#'");
    }
    Ok(())
}

fn key(name: &str) -> String {
    name.to_lowercase()
}

fn parse_hash(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

fn hex(h: &[u8; 16]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// One parsed line: `None` for blank lines and comments.
fn parse_line(line: &str) -> Result<Option<Entry<'_>>, &'static str> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(None);
    }
    // Names never hold ':' (validate_name), so the fields split cleanly.
    let fields: Vec<&str> = t.split(':').map(str::trim).collect();
    let (name, hash, owner) = match fields[..] {
        [name, hash] => (name, hash, None),
        [name, hash, uid, gid] => {
            let id = |s: &str| s.parse::<u32>().ok().filter(|&v| v != u32::MAX);
            let (Some(uid), Some(gid)) = (id(uid), id(gid)) else {
                return Err("uid and gid must be numbers below 4294967295");
            };
            (name, hash, Some(FileOwner { uid, gid }))
        }
        _ => return Err("expected NAME:NT-HASH or NAME:NT-HASH:UID:GID"),
    };
    validate_name(name).map_err(|_| "invalid user name")?;
    let hash = parse_hash(hash).ok_or("NT hash must be 32 hex digits")?;
    Ok(Some(Entry { name, hash, owner }))
}

struct Entry<'a> {
    name: &'a str,
    hash: [u8; 16],
    owner: Option<FileOwner>,
}

fn format_entry(name: &str, hash: &[u8; 16], owner: Option<FileOwner>) -> String {
    match owner {
        Some(o) => format!("{name}:{}:{}:{}", hex(hash), o.uid, o.gid),
        None => format!("{name}:{}", hex(hash)),
    }
}

/// In-memory user table.
#[derive(Clone, Default)]
pub struct UserDb {
    /// Lower-cased name -> (name as written, NT hash, Unix owner).
    users: HashMap<String, (String, [u8; 16], Option<FileOwner>)>,
}

impl fmt::Debug for UserDb {
    // Never prints hashes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserDb")
            .field("users", &self.list())
            .finish()
    }
}

impl UserDb {
    pub fn new() -> Self {
        Self::default()
    }

    /// Loads a user file, refusing one that group or others can access.
    pub fn load(path: impl AsRef<Path>) -> Result<UserDb, UserDbError> {
        let path = path.as_ref();
        let meta = fs::metadata(path).map_err(io_err(path))?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(UserDbError::InsecurePermissions {
                path: path.to_path_buf(),
                mode,
            });
        }
        let text = fs::read_to_string(path).map_err(io_err(path))?;
        Self::parse(path, &text)
    }

    fn parse(path: &Path, text: &str) -> Result<UserDb, UserDbError> {
        let mut db = UserDb::new();
        for (i, line) in text.lines().enumerate() {
            let perr = |reason| UserDbError::Parse {
                path: path.to_path_buf(),
                line: i + 1,
                reason,
            };
            if let Some(e) = parse_line(line).map_err(perr)? {
                if db
                    .users
                    .insert(key(e.name), (e.name.to_string(), e.hash, e.owner))
                    .is_some()
                {
                    return Err(perr("duplicate user (names are case-insensitive)"));
                }
            }
        }
        Ok(db)
    }

    /// An in-memory database from `(name, password)` pairs, e.g. from
    /// `--user alice:PASSWORD`. Only the NT hashes are kept.
    pub fn from_pairs<N: AsRef<str>, P: AsRef<str>>(
        pairs: &[(N, P)],
    ) -> Result<UserDb, UserDbError> {
        let mut db = UserDb::new();
        for (n, p) in pairs {
            db.insert_password(n.as_ref(), p.as_ref())?;
        }
        Ok(db)
    }

    /// Splits a `NAME:PASSWORD` command-line value at the first `:` (the
    /// password may contain more).
    pub fn parse_user_arg(arg: &str) -> Result<(String, String), UserDbError> {
        let (n, p) = arg.split_once(':').ok_or(UserDbError::InvalidUserArg)?;
        validate_name(n)?;
        Ok((n.to_string(), p.to_string()))
    }

    /// Adds or replaces a user.
    pub fn insert_password(&mut self, name: &str, password: &str) -> Result<(), UserDbError> {
        self.insert_hash(name, nt_hash(password))
    }

    pub fn insert_hash(&mut self, name: &str, hash: [u8; 16]) -> Result<(), UserDbError> {
        validate_name(name)?;
        self.users.insert(key(name), (name.to_string(), hash, None));
        Ok(())
    }

    /// Adds the users of `other`, replacing same-named ones.
    pub fn merge(&mut self, other: UserDb) {
        self.users.extend(other.users);
    }

    /// The NT hash for `user`, matched case-insensitively.
    pub fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.users.get(&key(user)).map(|(_, h, _)| *h)
    }

    /// The Unix owner `user`'s new files get, if the users file maps it.
    pub fn owner(&self, user: &str) -> Option<FileOwner> {
        self.users.get(&key(user)).and_then(|(_, _, o)| *o)
    }

    pub fn contains(&self, user: &str) -> bool {
        self.users.contains_key(&key(user))
    }

    /// User names as written, sorted.
    pub fn list(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.users.values().map(|(n, _, _)| n.as_str()).collect();
        v.sort_unstable_by_key(|n| n.to_lowercase());
        v
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Creates or updates `name` in the file at `path`, storing only the NT
    /// hash of `password`. Comments and other lines are kept. The file is
    /// replaced atomically (temporary file with mode 0600, then rename).
    pub fn add_user(path: impl AsRef<Path>, name: &str, password: &str) -> Result<(), UserDbError> {
        Self::add_user_hash(path, name, nt_hash(password), None)
    }

    /// Creates or updates `name` with `hash`; `owner` sets its Unix owner,
    /// `None` keeps the one the file has for it (if any).
    pub fn add_user_hash(
        path: impl AsRef<Path>,
        name: &str,
        hash: [u8; 16],
        owner: Option<FileOwner>,
    ) -> Result<(), UserDbError> {
        validate_name(name)?;
        let path = path.as_ref();
        let text = read_existing(path)?;
        // Validate the whole existing file first: never rewrite one we
        // cannot parse.
        let existing = Self::parse(path, &text)?;
        let owner = owner.or_else(|| existing.owner(name));
        let entry = format_entry(name, &hash, owner);
        let mut out = String::new();
        let mut replaced = false;
        for line in text.lines() {
            match parse_line(line) {
                Ok(Some(e)) if key(e.name) == key(name) => {
                    if !replaced {
                        out.push_str(&entry);
                        out.push('\n');
                        replaced = true;
                    }
                }
                _ => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        if !replaced {
            if text.is_empty() {
                out.push_str(
                    "# Braid users: NAME:NT-HASH[:UID:GID] (NT-HASH: MD4 of the UTF-16LE password; UID:GID: the owner of the user's new files). Keep mode 0600.\n",
                );
            }
            out.push_str(&entry);
            out.push('\n');
        }
        write_atomic(path, &out)
    }

    /// Removes `name` from the file; returns whether it was there.
    pub fn remove_user(path: impl AsRef<Path>, name: &str) -> Result<bool, UserDbError> {
        let path = path.as_ref();
        let text = read_existing(path)?;
        Self::parse(path, &text)?;
        let mut out = String::new();
        let mut removed = false;
        for line in text.lines() {
            match parse_line(line) {
                Ok(Some(e)) if key(e.name) == key(name) => removed = true,
                _ => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        if removed {
            write_atomic(path, &out)?;
        }
        Ok(removed)
    }
}

fn read_existing(path: &Path) -> Result<String, UserDbError> {
    match fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// Writes `contents` to a fresh 0600 temporary file beside `path`, syncs
/// it, renames it over `path` and syncs the directory.
fn write_atomic(path: &Path, contents: &str) -> Result<(), UserDbError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path.file_name().ok_or_else(|| UserDbError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "not a file path"),
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}.{}",
        file_name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        // The umask cannot widen 0600, but be explicit in case of odd ACLs.
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        if let Ok(d) = fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            static N: AtomicU64 = AtomicU64::new(0);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let p = std::env::temp_dir().join(format!(
                "braid-userdb-{}-{}-{}",
                std::process::id(),
                nanos,
                N.fetch_add(1, Ordering::Relaxed)
            ));
            fs::create_dir(&p).unwrap();
            TempDir(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    const PASSWORD_HASH: &str = "a4f49c406510bdcab6824ee7c30fd852"; // NTOWFv1("Password"), MS-NLMP 4.2.2.1.2

    #[test]
    fn add_load_lookup_remove() {
        let d = TempDir::new();
        let path = d.0.join("users");
        UserDb::add_user(&path, "Alice", "Password").unwrap();
        UserDb::add_user(&path, "bob", "hunter2").unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains(&format!("Alice:{PASSWORD_HASH}")));
        assert!(!text.contains("Password\n") && !text.contains("hunter2"));

        let db = UserDb::load(&path).unwrap();
        assert_eq!(db.list(), vec!["Alice", "bob"]);
        assert_eq!(
            db.nt_hash("alice").map(|h| hex(&h)).as_deref(),
            Some(PASSWORD_HASH)
        );
        assert_eq!(db.nt_hash("ALICE"), db.nt_hash("Alice"));
        assert_eq!(db.nt_hash("carol"), None);

        // Update keeps one entry per user (case-insensitively) and comments.
        let mut t = fs::read_to_string(&path).unwrap();
        t.push_str("# keep me\n");
        fs::write(&path, t).unwrap();
        UserDb::add_user(&path, "ALICE", "new").unwrap();
        let db = UserDb::load(&path).unwrap();
        assert_eq!(db.list(), vec!["ALICE", "bob"]);
        assert_eq!(db.nt_hash("alice"), Some(nt_hash("new")));
        assert!(fs::read_to_string(&path).unwrap().contains("# keep me"));

        assert!(UserDb::remove_user(&path, "Bob").unwrap());
        assert!(!UserDb::remove_user(&path, "bob").unwrap());
        assert_eq!(UserDb::load(&path).unwrap().list(), vec!["ALICE"]);

        // No temporary files left behind.
        let names: Vec<_> = fs::read_dir(&d.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn unix_owner_is_read_kept_and_replaced() {
        let d = TempDir::new();
        let path = d.0.join("users");
        let owner = FileOwner {
            uid: 1001,
            gid: 2002,
        };
        UserDb::add_user_hash(&path, "carol", nt_hash("pw"), Some(owner)).unwrap();
        UserDb::add_user(&path, "dave", "pw").unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains(&format!("carol:{}:1001:2002\n", hex(&nt_hash("pw")))));
        let db = UserDb::load(&path).unwrap();
        assert_eq!(db.owner("CAROL"), Some(owner));
        assert_eq!(db.owner("dave"), None);
        assert_eq!(db.nt_hash("carol"), Some(nt_hash("pw")));

        // A new password without an owner keeps the mapping; a new owner
        // replaces it.
        UserDb::add_user(&path, "carol", "pw2").unwrap();
        let db = UserDb::load(&path).unwrap();
        assert_eq!(db.owner("carol"), Some(owner));
        assert_eq!(db.nt_hash("carol"), Some(nt_hash("pw2")));
        let other = FileOwner { uid: 7, gid: 8 };
        UserDb::add_user_hash(&path, "Carol", nt_hash("pw2"), Some(other)).unwrap();
        assert_eq!(UserDb::load(&path).unwrap().owner("carol"), Some(other));
        assert_eq!(UserDb::load(&path).unwrap().list(), vec!["Carol", "dave"]);
    }

    #[test]
    fn refuses_group_or_world_readable() {
        let d = TempDir::new();
        let path = d.0.join("users");
        UserDb::add_user(&path, "alice", "pw").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let err = UserDb::load(&path).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, UserDbError::InsecurePermissions { mode: 0o644, .. }),
            "{msg}"
        );
        assert!(
            msg.contains("chmod 600") && msg.contains(&path.display().to_string()),
            "{msg}"
        );
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        assert!(UserDb::load(&path).is_err());
        // Rewriting fixes the mode.
        UserDb::add_user(&path, "bob", "pw").unwrap();
        assert_eq!(UserDb::load(&path).unwrap().len(), 2);
    }

    #[test]
    fn parse_errors() {
        let d = TempDir::new();
        let path = d.0.join("users");
        for (bad, line) in [
            ("alice\n", 1),
            ("# c\nalice:zz\n", 2),
            ("alice:a4f49c406510bdcab6824ee7c30fd8\n", 1),
            (
                &*format!("alice:{PASSWORD_HASH}\nALICE:{PASSWORD_HASH}\n"),
                2,
            ),
            (&*format!(":{PASSWORD_HASH}\n"), 1),
            (&*format!("alice:{PASSWORD_HASH}:1000\n"), 1),
            (&*format!("alice:{PASSWORD_HASH}:1000:x\n"), 1),
            (&*format!("alice:{PASSWORD_HASH}:-1:1000\n"), 1),
            (&*format!("alice:{PASSWORD_HASH}:4294967295:1000\n"), 1),
            (&*format!("alice:{PASSWORD_HASH}:1:2:3\n"), 1),
        ] {
            fs::write(&path, bad).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
            match UserDb::load(&path) {
                Err(UserDbError::Parse { line: l, .. }) => assert_eq!(l, line, "{bad:?}"),
                other => panic!("{bad:?}: {other:?}"),
            }
            // Never rewrite a file that does not parse.
            assert!(UserDb::add_user(&path, "x", "y").is_err());
            assert_eq!(fs::read_to_string(&path).unwrap(), bad);
        }
        fs::write(
            &path,
            format!(
                "  # comment\n\n  alice : {}  \r\n",
                PASSWORD_HASH.to_uppercase()
            ),
        )
        .unwrap();
        assert_eq!(
            UserDb::load(&path)
                .unwrap()
                .nt_hash("alice")
                .map(|h| hex(&h))
                .as_deref(),
            Some(PASSWORD_HASH)
        );
        assert!(matches!(
            UserDb::load(d.0.join("missing")),
            Err(UserDbError::Io { .. })
        ));
    }

    #[test]
    fn in_memory_and_cli() {
        let db = UserDb::from_pairs(&[("alice", "Password"), ("Bob", "x:y")]).unwrap();
        assert_eq!(
            db.nt_hash("ALICE").map(|h| hex(&h)).as_deref(),
            Some(PASSWORD_HASH)
        );
        assert_eq!(db.nt_hash("bob"), Some(nt_hash("x:y")));
        assert_eq!(
            UserDb::parse_user_arg("bob:x:y").unwrap(),
            ("bob".to_string(), "x:y".to_string())
        );
        assert!(UserDb::parse_user_arg("bob").is_err());
        assert!(UserDb::parse_user_arg(":pw").is_err());
        assert!(UserDb::from_pairs(&[("a:b", "pw")]).is_err());
        assert!(UserDb::from_pairs(&[(" a", "pw")]).is_err());
        let dbg = format!("{db:?}");
        assert!(dbg.contains("alice") && !dbg.contains(PASSWORD_HASH) && !dbg.contains("Password"));
    }
}
