//! State that must outlive the process: SMB durable and persistent open
//! records, NFS client records, kept through one small interface so that a
//! cluster store (etcd) can implement it beside the local one.
//!
//! The store holds opaque records in named spaces ("smb-opens",
//! "nfs-clients"); what a record means is its protocol's business. Only
//! what a reconnect or a reclaim must check is written: the hot path never
//! waits on the store except where a grant must be durable before it is
//! answered (a persistent handle).

use std::fs::File;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::state_journal::Journal;

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state store {0}: {1}")]
    Io(String, std::io::Error),
    #[error("state store: bad key {0:?} (letters, digits, '-' and '_' only, at most 200)")]
    BadKey(String),
    #[error("state store unavailable: {0}")]
    Unavailable(String),
    /// The record is not what this process last wrote or read: another
    /// writer changed it (a cluster store's revision check).
    #[error("state store conflict: {0}")]
    Conflict(String),
}

/// A record that could not be read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptRecord {
    /// Where it is (a file path, an etcd key).
    pub location: String,
    pub reason: String,
}

/// What a space held: the records that read back whole, and those that did
/// not (reported by the caller, never granted to anyone).
#[derive(Debug, Default)]
pub struct Loaded {
    pub records: Vec<(String, Vec<u8>)>,
    pub corrupt: Vec<CorruptRecord>,
}

pub trait StateStore: Send + Sync {
    /// Write `value` under `space`/`key`, replacing what was there; durable
    /// when this returns. A store shared by several writers (etcd) replaces
    /// only the record this process last wrote or loaded, else
    /// [`StoreError::Conflict`].
    fn put(&self, space: &str, key: &str, value: &[u8]) -> Result<(), StoreError>;
    /// Forget `space`/`key` (no error when it is not there).
    fn delete(&self, space: &str, key: &str) -> Result<(), StoreError>;
    /// Every record of `space`.
    fn load(&self, space: &str) -> Result<Loaded, StoreError>;
    /// Write `value` under `space`/`key` without waiting for it to be
    /// durable: it outlives the process at once and the machine after the
    /// next [`StateStore::flush`] (for records changed on hot paths, such
    /// as what each NFS client holds). A space is written either this way
    /// or with `put`, not both.
    fn put_soon(&self, space: &str, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.put(space, key, value)
    }
    /// `delete`, as `put_soon` writes.
    fn delete_soon(&self, space: &str, key: &str) -> Result<(), StoreError> {
        self.delete(space, key)
    }
    /// Make every `put_soon` and `delete_soon` so far durable.
    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// One line for logs and the admin view ("local /var/lib/braid").
    fn describe(&self) -> String;
}

/// Keys become file names (and etcd key segments): a closed alphabet.
pub fn check_key(key: &str) -> Result<(), StoreError> {
    let ok = !key.is_empty()
        && key.len() <= 200
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(StoreError::BadKey(key.to_string()))
    }
}

/// A record on disk: magic, version, payload length, SHA-256 of the payload
/// (first 16 bytes), payload. A torn or altered file fails the length or the
/// digest and is reported instead of read.
const MAGIC: &[u8; 4] = b"BRS1";
pub(crate) const HEADER_LEN: usize = 4 + 4 + 16;

fn digest16(payload: &[u8]) -> [u8; 16] {
    let d = Sha256::digest(payload);
    d[..16].try_into().unwrap()
}

pub fn seal(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&digest16(payload));
    out.extend_from_slice(payload);
    out
}

pub fn unseal(bytes: &[u8]) -> Result<&[u8], String> {
    if bytes.len() < HEADER_LEN || &bytes[..4] != MAGIC {
        return Err("not a Braid state record (bad header)".into());
    }
    let len = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
    let payload = &bytes[HEADER_LEN..];
    if payload.len() != len {
        return Err(format!(
            "torn record: {} bytes of {len}",
            payload.len().min(len)
        ));
    }
    if digest16(payload) != bytes[8..24] {
        return Err("checksum mismatch".into());
    }
    Ok(payload)
}

/// Records in one journal per space, `state_dir/<space>.journal`
/// (`state_journal.rs`): `put` and `delete` append a sealed frame and sync
/// the file's data, one synced write each; `put_soon` and `delete_soon`
/// append without the sync. After a crash a record is the old one or the
/// new one, whole. Records kept by earlier versions as a file each
/// (`state_dir/<space>/<key>`) are still read, and go when written again.
pub struct LocalStore {
    root: PathBuf,
    /// Spaces written with `put_soon`: one append-only file each
    /// (`state_journal.rs`), opened on first use.
    journals: std::sync::Mutex<std::collections::HashMap<String, Journal>>,
}

/// Temporary files start with this; a crash may leave one behind, which
/// the next load removes.
const TMP_PREFIX: &str = ".tmp-";

impl LocalStore {
    pub fn new(state_dir: &Path) -> LocalStore {
        LocalStore {
            root: state_dir.to_path_buf(),
            journals: Default::default(),
        }
    }

    /// Run `f` on `space`'s journal, opening it first (a torn tail found
    /// then is reported once, in one line).
    fn with_journal<R>(
        &self,
        space: &str,
        f: impl FnOnce(&mut Journal) -> std::io::Result<R>,
    ) -> Result<R, StoreError> {
        check_key(space)?;
        let path = self.root.join(format!("{space}.journal"));
        let io = |e| StoreError::Io(path.display().to_string(), e);
        let mut journals = self.journals.lock().unwrap_or_else(|e| e.into_inner());
        if !journals.contains_key(space) {
            let (journal, corrupt) = Journal::open(&path).map_err(io)?;
            if let Some(c) = corrupt {
                tracing::warn!("state store: journal {}: {}", c.location, c.reason);
            }
            journals.insert(space.to_string(), journal);
        }
        f(journals.get_mut(space).expect("just opened")).map_err(io)
    }
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::Io(dir.display().to_string(), e))
}

impl LocalStore {
    /// A record's file as Braid wrote records before the journals (each
    /// in `state_dir/<space>/<key>`): still read; gone once the key is
    /// written or deleted again.
    fn remove_legacy(&self, space: &str, key: &str) -> Result<(), StoreError> {
        let dir = self.root.join(space);
        let path = dir.join(key);
        match std::fs::remove_file(&path) {
            Ok(()) => sync_dir(&dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::Io(path.display().to_string(), e)),
        }
    }

    /// One change to `space`'s journal, durable when this returns: one
    /// synced write (the journal's data), made outside the journals' lock
    /// so that other changes go on meanwhile.
    fn change_synced(
        &self,
        space: &str,
        key: &str,
        value: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        check_key(key)?;
        let unsynced = self.with_journal(space, |j| {
            j.append(key, value)?;
            j.take_unsynced()
        })?;
        if let Some(f) = unsynced {
            f.sync_data().map_err(|e| {
                StoreError::Io(
                    self.root
                        .join(format!("{space}.journal"))
                        .display()
                        .to_string(),
                    e,
                )
            })?;
        }
        self.remove_legacy(space, key)
    }

    /// Records of `space` in files of their own (written before the
    /// journals), and those that do not read back.
    fn load_legacy(&self, space: &str, out: &mut Loaded) -> Result<(), StoreError> {
        let dir = self.root.join(space);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::Io(dir.display().to_string(), e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::Io(dir.display().to_string(), e))?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(TMP_PREFIX) {
                // A write that never reached its rename: the old record (or
                // none) stands.
                let _ = std::fs::remove_file(&path);
                continue;
            }
            let corrupt = |reason: String| CorruptRecord {
                location: path.display().to_string(),
                reason,
            };
            if check_key(&name).is_err() {
                out.corrupt.push(corrupt("not a record name".into()));
                continue;
            }
            match std::fs::read(&path) {
                Ok(bytes) => match unseal(&bytes) {
                    Ok(payload) => out.records.push((name, payload.to_vec())),
                    Err(reason) => out.corrupt.push(corrupt(reason)),
                },
                Err(e) => out.corrupt.push(corrupt(e.to_string())),
            }
        }
        Ok(())
    }
}

impl StateStore for LocalStore {
    fn put(&self, space: &str, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.change_synced(space, key, Some(value))
    }

    fn delete(&self, space: &str, key: &str) -> Result<(), StoreError> {
        self.change_synced(space, key, None)
    }

    fn load(&self, space: &str) -> Result<Loaded, StoreError> {
        check_key(space)?;
        let mut out = Loaded::default();
        self.load_legacy(space, &mut out)?;
        let journaled = self.with_journal(space, |j| Ok(j.live().clone()))?;
        out.records.retain(|(k, _)| !journaled.contains_key(k));
        out.records.extend(journaled);
        out.records.sort();
        Ok(out)
    }

    fn put_soon(&self, space: &str, key: &str, value: &[u8]) -> Result<(), StoreError> {
        check_key(key)?;
        self.with_journal(space, |j| j.append(key, Some(value)))
    }

    fn delete_soon(&self, space: &str, key: &str) -> Result<(), StoreError> {
        check_key(key)?;
        self.with_journal(space, |j| j.append(key, None))
    }

    fn flush(&self) -> Result<(), StoreError> {
        let io = |space: &str, e| {
            StoreError::Io(
                self.root
                    .join(format!("{space}.journal"))
                    .display()
                    .to_string(),
                e,
            )
        };
        let mut to_sync = Vec::new();
        {
            let mut journals = self.journals.lock().unwrap_or_else(|e| e.into_inner());
            for (space, j) in journals.iter_mut() {
                if let Some(f) = j.take_unsynced().map_err(|e| io(space, e))? {
                    to_sync.push((space.clone(), f));
                }
            }
        }
        // Synced without the journals' lock: appends go on meanwhile.
        for (space, f) in to_sync {
            f.sync_data().map_err(|e| io(&space, e))?;
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!("local {}", self.root.display())
    }
}

/// Records in memory: for tests and for a server run without `state_dir`
/// (durable handles then outlive connections but not the process).
#[derive(Default)]
pub struct MemoryStore {
    spaces: std::sync::Mutex<std::collections::BTreeMap<(String, String), Vec<u8>>>,
}

impl StateStore for MemoryStore {
    fn put(&self, space: &str, key: &str, value: &[u8]) -> Result<(), StoreError> {
        check_key(key)?;
        self.spaces
            .lock()
            .unwrap()
            .insert((space.to_string(), key.to_string()), value.to_vec());
        Ok(())
    }

    fn delete(&self, space: &str, key: &str) -> Result<(), StoreError> {
        self.spaces
            .lock()
            .unwrap()
            .remove(&(space.to_string(), key.to_string()));
        Ok(())
    }

    fn load(&self, space: &str) -> Result<Loaded, StoreError> {
        let records = self
            .spaces
            .lock()
            .unwrap()
            .iter()
            .filter(|((s, _), _)| s == space)
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        Ok(Loaded {
            records,
            corrupt: Vec::new(),
        })
    }

    fn describe(&self) -> String {
        "memory (nothing outlives the process)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("braid-state-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn records_survive_a_new_store_and_replace_and_delete() {
        let dir = temp_dir("survive");
        let s = LocalStore::new(&dir);
        s.put("smb-opens", "a1", b"first").unwrap();
        s.put("smb-opens", "a1", b"second").unwrap();
        s.put("smb-opens", "b2", b"other").unwrap();
        s.put("nfs-clients", "c", b"client").unwrap();
        let again = LocalStore::new(&dir);
        let loaded = again.load("smb-opens").unwrap();
        assert!(loaded.corrupt.is_empty());
        assert_eq!(
            loaded.records,
            vec![
                ("a1".to_string(), b"second".to_vec()),
                ("b2".to_string(), b"other".to_vec())
            ]
        );
        again.delete("smb-opens", "a1").unwrap();
        again.delete("smb-opens", "a1").unwrap();
        assert_eq!(again.load("smb-opens").unwrap().records.len(), 1);
        assert_eq!(again.load("nfs-clients").unwrap().records.len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn records_of_their_own_files_are_read_and_replaced_and_bad_ones_reported() {
        // Records as Braid kept them before the journals: a file each.
        let dir = temp_dir("legacy");
        let space = dir.join("smb-opens");
        std::fs::create_dir_all(&space).unwrap();
        std::fs::write(space.join("whole"), seal(b"whole record")).unwrap();
        let sealed = seal(b"a record cut short");
        std::fs::write(space.join("torn"), &sealed[..sealed.len() - 3]).unwrap();
        let mut flipped = seal(b"a record altered");
        *flipped.last_mut().unwrap() ^= 1;
        std::fs::write(space.join("flipped"), &flipped).unwrap();
        std::fs::write(space.join("garbage"), b"xx").unwrap();
        // A write that crashed before its rename.
        std::fs::write(space.join(".tmp-whole"), b"partial").unwrap();
        let s = LocalStore::new(&dir);
        let loaded = s.load("smb-opens").unwrap();
        assert_eq!(
            loaded.records,
            vec![("whole".to_string(), b"whole record".to_vec())]
        );
        let mut bad: Vec<_> = loaded
            .corrupt
            .iter()
            .map(|c| c.location.rsplit('/').next().unwrap().to_string())
            .collect();
        bad.sort();
        assert_eq!(bad, vec!["flipped", "garbage", "torn"]);
        assert!(!space.join(".tmp-whole").exists());
        // Written again, a record moves to the journal; deleted, it is gone.
        s.put("smb-opens", "whole", b"new").unwrap();
        s.delete("smb-opens", "torn").unwrap();
        assert!(!space.join("whole").exists() && !space.join("torn").exists());
        let again = LocalStore::new(&dir).load("smb-opens").unwrap();
        assert_eq!(again.records, vec![("whole".to_string(), b"new".to_vec())]);
        assert_eq!(again.corrupt.len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_damaged_record_in_the_journal_is_skipped_and_the_others_kept() {
        let dir = temp_dir("damaged");
        let s = LocalStore::new(&dir);
        s.put("smb-opens", "first", b"first record").unwrap();
        s.put("smb-opens", "second", b"second record").unwrap();
        s.put("smb-opens", "third", b"third record").unwrap();
        drop(s);
        let path = dir.join("smb-opens.journal");
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes
            .windows(13)
            .position(|w| w == b"second record")
            .unwrap();
        bytes[at] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let loaded = LocalStore::new(&dir).load("smb-opens").unwrap();
        let keys: Vec<_> = loaded.records.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, vec!["first", "third"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn records_put_soon_survive_a_new_store() {
        let dir = temp_dir("soon");
        let s = LocalStore::new(&dir);
        s.put_soon("nfs-held", "a", b"open").unwrap();
        s.put_soon("nfs-held", "b", b"lock").unwrap();
        s.delete_soon("nfs-held", "a").unwrap();
        s.flush().unwrap();
        // Not synced, not dropped: a process killed now leaves them too.
        s.put_soon("nfs-held", "c", b"deleg").unwrap();
        let again = LocalStore::new(&dir);
        let loaded = again.load("nfs-held").unwrap();
        assert_eq!(
            loaded.records,
            vec![
                ("b".to_string(), b"lock".to_vec()),
                ("c".to_string(), b"deleg".to_vec())
            ]
        );
        assert!(again.put_soon("nfs-held", "../x", b"v").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn keys_outside_the_alphabet_are_refused() {
        let dir = temp_dir("keys");
        let s = LocalStore::new(&dir);
        for key in ["", "../x", "a/b", ".hidden", &"k".repeat(201)] {
            assert!(matches!(
                s.put("smb-opens", key, b"v"),
                Err(StoreError::BadKey(_))
            ));
        }
        assert!(s.put("../escape", "k", b"v").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("mode");
        let s = LocalStore::new(&dir);
        s.put("smb-opens", "k", b"secret-ish").unwrap();
        let mode = std::fs::metadata(dir.join("smb-opens.journal"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    proptest::proptest! {
        #[test]
        fn seal_round_trips(payload in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let sealed = seal(&payload);
            proptest::prop_assert_eq!(unseal(&sealed).unwrap(), &payload[..]);
            proptest::prop_assert!(unseal(&sealed[..sealed.len() - 1]).is_err());
        }
    }
}
