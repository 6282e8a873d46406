//! The local state store's records (`state_store.rs`): one append-only
//! file per space, `state_dir/<space>.journal`, instead of a file per
//! record with its fsync, rename and directory fsync.
//!
//! The file is mapped shared, and a change (put or delete of a key) is a
//! sealed frame copied into the mapping: no system call, yet in the page
//! cache at once, so it survives the process (`kill -9`); it survives the
//! machine once [`Journal::take_unsynced`]'s descriptor was synced (the
//! store does it before `put` returns; for `put_soon`, on the caller's
//! timer). The file is longer than its frames (zeros past them, grown by
//! doubling). Reading applies the frames in order up to the zeros; a
//! stretch that does not unseal (a tail torn by a crash of the machine,
//! damage) is reported and skipped to the next whole frame. The file is
//! rewritten with the live records when it is opened, and again whenever
//! its frames have grown past twice their size, so it never holds much
//! more than what is live.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::state_store::{seal, CorruptRecord, HEADER_LEN};

const PUT: u8 = 1;
const DELETE: u8 = 2;

/// Rewritten when the frames take this much more than the live records
/// (and at least `COMPACT_MIN` bytes).
const COMPACT_RATIO: u64 = 2;
const COMPACT_MIN: u64 = 1 << 20;
/// The smallest mapping: grown by doubling.
const MIN_CAPACITY: u64 = 1 << 20;

pub struct Journal {
    path: PathBuf,
    file: File,
    map: MmapMut,
    live: BTreeMap<String, Vec<u8>>,
    /// Bytes of frames in the file, and what a rewrite of the live records
    /// would take.
    file_bytes: u64,
    live_bytes: u64,
    /// Written since the last sync.
    unsynced: bool,
}

fn frame(op: u8, key: &str, value: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(2 + key.len() + value.len());
    payload.push(op);
    // Keys are at most 200 bytes (`check_key`).
    payload.push(key.len() as u8);
    payload.extend_from_slice(key.as_bytes());
    payload.extend_from_slice(value);
    seal(&payload)
}

fn frame_len(key: &str, value: &[u8]) -> u64 {
    (HEADER_LEN + 2 + key.len() + value.len()) as u64
}

/// Stretches of a journal that did not read back: offset, length, why.
type Skipped = Vec<(usize, usize, String)>;

/// One change: op, key, value.
type Change = (u8, String, Vec<u8>);

/// The frame at the start of `rest`: its length and change, or why it is
/// not one.
fn read_frame(rest: &[u8]) -> Result<(usize, Change), String> {
    let n = rest
        .get(4..8)
        .map(|l| HEADER_LEN + u32::from_le_bytes(l.try_into().unwrap()) as usize)
        .filter(|n| *n <= rest.len())
        .ok_or("torn frame")?;
    let payload = crate::state_store::unseal(&rest[..n])?;
    let parsed = payload.split_first().and_then(|(op, p)| {
        let (len, p) = p.split_first()?;
        let key = std::str::from_utf8(p.get(..*len as usize)?).ok()?;
        Some((*op, key.to_string(), p[*len as usize..].to_vec()))
    });
    match parsed {
        Some(f @ (PUT | DELETE, _, _)) => Ok((n, f)),
        _ => Err("unknown frame".into()),
    }
}

/// The frames of `bytes` applied in order (zeros to the end are the clean
/// end of a mapped file). A stretch that does not read back is skipped to
/// the next whole frame, and named: a tear or damage loses the records
/// written there, not those after it.
fn replay(bytes: &[u8]) -> (BTreeMap<String, Vec<u8>>, Skipped) {
    let mut live = BTreeMap::new();
    let mut skipped = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.iter().all(|b| *b == 0) {
            break;
        }
        match read_frame(rest) {
            Ok((n, (op, key, value))) => {
                if op == PUT {
                    live.insert(key, value);
                } else {
                    live.remove(&key);
                }
                at += n;
            }
            Err(reason) => {
                let next = (1..rest.len())
                    .filter(|i| rest[*i..].starts_with(b"BRS1"))
                    .find(|i| read_frame(&rest[*i..]).is_ok())
                    .unwrap_or(rest.len());
                skipped.push((at, next, reason));
                at += next;
            }
        }
    }
    (live, skipped)
}

impl Journal {
    /// Read the journal at `path` (none yet: empty) and rewrite it with its
    /// live records; a torn or altered tail is reported and dropped.
    pub fn open(path: &Path) -> std::io::Result<(Journal, Option<CorruptRecord>)> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let (live, skipped) = replay(&bytes);
        let corrupt = (!skipped.is_empty()).then(|| CorruptRecord {
            location: path.display().to_string(),
            reason: skipped
                .iter()
                .map(|(at, len, why)| format!("{why}: {len} bytes at {at} skipped"))
                .collect::<Vec<_>>()
                .join("; "),
        });
        let live_bytes = live.iter().map(|(k, v)| frame_len(k, v)).sum();
        let (file, map) = rewrite(path, &live, live_bytes)?;
        Ok((
            Journal {
                path: path.to_path_buf(),
                file,
                map,
                live,
                live_bytes,
                file_bytes: live_bytes,
                unsynced: false,
            },
            corrupt,
        ))
    }

    pub fn live(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.live
    }

    /// Put `key` (Some) or delete it (None): copied into the mapping.
    pub fn append(&mut self, key: &str, value: Option<&[u8]>) -> std::io::Result<()> {
        if value.is_none() && !self.live.contains_key(key) {
            return Ok(());
        }
        let bytes = match value {
            Some(v) => frame(PUT, key, v),
            None => frame(DELETE, key, &[]),
        };
        if let Some(old) = self.live.remove(key) {
            self.live_bytes -= frame_len(key, &old);
        }
        if let Some(v) = value {
            self.live_bytes += frame_len(key, v);
            self.live.insert(key.to_string(), v.to_vec());
        }
        let end = self.file_bytes + bytes.len() as u64;
        if end > COMPACT_MIN.max(COMPACT_RATIO * self.live_bytes) {
            // The frame is in `live`, so the rewrite holds it.
            (self.file, self.map) = rewrite(&self.path, &self.live, self.live_bytes)?;
            self.file_bytes = self.live_bytes;
            self.unsynced = false;
            return Ok(());
        }
        if end > self.map.len() as u64 {
            let capacity = (self.map.len() as u64 * 2).max(end);
            self.file.set_len(capacity)?;
            // SAFETY: the file is Braid's own (state_dir, mode 0600) and is
            // only ever grown while mapped.
            self.map = unsafe { MmapMut::map_mut(&self.file)? };
        }
        let at = self.file_bytes as usize;
        self.map[at..at + bytes.len()].copy_from_slice(&bytes);
        self.file_bytes = end;
        self.unsynced = true;
        Ok(())
    }

    /// What to sync to make what was appended survive the machine (None:
    /// nothing new): a second descriptor of the file, synced by the caller
    /// without holding the journal, so appends go on meanwhile (a sync of
    /// the file writes its pages dirtied through the mapping too).
    pub fn take_unsynced(&mut self) -> std::io::Result<Option<File>> {
        if !self.unsynced {
            return Ok(None);
        }
        let dup = self.file.try_clone()?;
        self.unsynced = false;
        Ok(Some(dup))
    }
}

/// The live records to a temporary file with room to grow, synced,
/// renamed over `path`, the directory synced; the new file and its
/// mapping.
fn rewrite(
    path: &Path,
    live: &BTreeMap<String, Vec<u8>>,
    live_bytes: u64,
) -> std::io::Result<(File, MmapMut)> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".tmp-{name}"));
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    let mut all = Vec::with_capacity(live_bytes as usize);
    for (k, v) in live {
        all.extend_from_slice(&frame(PUT, k, v));
    }
    f.write_all(&all)?;
    f.set_len((live_bytes * 2).next_power_of_two().max(MIN_CAPACITY))?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    // SAFETY: as in `append`: Braid's own file, never shrunk while mapped.
    let map = unsafe { MmapMut::map_mut(&f)? };
    Ok((f, map))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("braid-journal-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn puts_and_deletes_survive_reopening() {
        let dir = temp("reopen");
        let path = dir.join("space.journal");
        let (mut j, corrupt) = Journal::open(&path).unwrap();
        assert!(corrupt.is_none());
        j.append("a", Some(b"1")).unwrap();
        j.append("b", Some(b"2")).unwrap();
        j.append("a", Some(b"3")).unwrap();
        j.append("b", None).unwrap();
        j.append("never", None).unwrap();
        j.take_unsynced().unwrap().unwrap().sync_data().unwrap();
        assert!(j.take_unsynced().unwrap().is_none());
        drop(j);
        let (j, corrupt) = Journal::open(&path).unwrap();
        assert!(corrupt.is_none());
        assert_eq!(j.live().len(), 1);
        assert_eq!(j.live()["a"], b"3");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_torn_tail_is_reported_and_dropped_and_the_rest_kept() {
        let dir = temp("torn");
        let path = dir.join("space.journal");
        let (mut j, _) = Journal::open(&path).unwrap();
        j.append("whole", Some(b"kept")).unwrap();
        j.append("torn", Some(b"lost in the crash")).unwrap();
        drop(j);
        // A crash of the machine that wrote back part of the last frame:
        // its last bytes are still zeros.
        let mut bytes = std::fs::read(&path).unwrap();
        let end = bytes.iter().rposition(|b| *b != 0).unwrap() + 1;
        bytes[end - 4..end].fill(0);
        std::fs::write(&path, &bytes).unwrap();
        let (mut j, corrupt) = Journal::open(&path).unwrap();
        let corrupt = corrupt.expect("the torn frame is reported");
        assert!(corrupt.location.ends_with("space.journal"));
        assert_eq!(j.live().keys().collect::<Vec<_>>(), vec!["whole"]);
        // Appends after the rewrite read back: the tail is gone.
        j.append("next", Some(b"after")).unwrap();
        drop(j);
        let (j, corrupt) = Journal::open(&path).unwrap();
        assert!(corrupt.is_none());
        assert_eq!(j.live().len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_file_is_rewritten_when_it_grows_past_its_live_records() {
        let dir = temp("compact");
        let path = dir.join("space.journal");
        let (mut j, _) = Journal::open(&path).unwrap();
        let value = vec![7u8; 1000];
        for i in 0..5000 {
            j.append(&format!("k{}", i % 10), Some(&value)).unwrap();
        }
        assert!(j.file_bytes <= COMPACT_MIN + 2000, "{}", j.file_bytes);
        assert!(std::fs::metadata(&path).unwrap().len() <= 2 * MIN_CAPACITY);
        drop(j);
        let (j, _) = Journal::open(&path).unwrap();
        assert_eq!(j.live().len(), 10);
        let _ = std::fs::remove_dir_all(&dir);
    }

    proptest::proptest! {
        #[test]
        fn replay_of_any_bytes_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = replay(&bytes);
        }
    }
}
