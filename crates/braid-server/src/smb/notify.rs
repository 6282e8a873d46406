//! Change notification (MS-SMB2 3.3.5.19, MS-FSA 2.1.5.10 / 2.1.4.17):
//! directory opens that asked for CHANGE_NOTIFY are watches; the SMB
//! handlers report the changes they make (create, rename, delete, writes,
//! attribute changes), and each watch buffers the ones its filter selects
//! until a CHANGE_NOTIFY request takes them.
//!
//! Changes made on the host by other processes reach the watches through
//! `host_watch.rs`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// FILE_ACTION_* (MS-FSCC 2.4.42).
pub mod action {
    pub const ADDED: u32 = 1;
    pub const REMOVED: u32 = 2;
    pub const MODIFIED: u32 = 3;
    pub const RENAMED_OLD_NAME: u32 = 4;
    pub const RENAMED_NEW_NAME: u32 = 5;
}

/// FILE_NOTIFY_CHANGE_* completion filter bits (MS-SMB2 2.2.35).
pub mod filter {
    pub const FILE_NAME: u32 = 0x001;
    pub const DIR_NAME: u32 = 0x002;
    pub const ATTRIBUTES: u32 = 0x004;
    pub const SIZE: u32 = 0x008;
    pub const LAST_WRITE: u32 = 0x010;
    pub const LAST_ACCESS: u32 = 0x020;
    pub const EA: u32 = 0x080;
    pub const SECURITY: u32 = 0x100;
}

/// The name filter a change to a file or a directory matches.
pub fn name_filter(is_directory: bool) -> u32 {
    if is_directory {
        filter::DIR_NAME
    } else {
        filter::FILE_NAME
    }
}

/// Buffered changes beyond this are dropped and reported as an overflow
/// (STATUS_NOTIFY_ENUM_DIR: the client re-reads the directory).
const MAX_BUFFERED: usize = 1024;

/// One watched directory (one directory open that issued CHANGE_NOTIFY).
pub struct Watch {
    share: String,
    /// Share-relative path, lower case, `\` separated, "" for the root.
    dir: String,
    recursive: bool,
    filter: u32,
    /// Bytes of changes kept between requests: the first request's
    /// OutputBufferLength (MS-CIFS 3.3.5.59.4 sizes the buffer from the
    /// first request, as Windows does). Changes beyond it overflow, and
    /// every request until the next change ends STATUS_NOTIFY_ENUM_DIR.
    capacity: usize,
    events: Mutex<Buffered>,
    pub wake: Notify,
    closed: AtomicBool,
    /// The watched directory is delete pending: every request on it ends
    /// STATUS_DELETE_PENDING.
    delete_pending: AtomicBool,
}

#[derive(Default)]
struct Buffered {
    events: Vec<(u32, String)>,
    /// Encoded size of `events` (FILE_NOTIFY_INFORMATION, aligned).
    bytes: usize,
    overflow: bool,
}

/// What a CHANGE_NOTIFY request takes from its watch.
pub enum Changes {
    Events(Vec<(u32, String)>),
    /// Too many changes were buffered: the client must rescan.
    Overflow,
    /// The directory itself is being deleted.
    DeletePending,
}

impl Watch {
    /// Take what is buffered, if anything.
    pub fn take(&self) -> Option<Changes> {
        if self.delete_pending.load(Ordering::Acquire) {
            return Some(Changes::DeletePending);
        }
        let mut b = self.events.lock().unwrap();
        if b.overflow {
            *b = Buffered::default();
            return Some(Changes::Overflow);
        }
        if b.events.is_empty() {
            return None;
        }
        b.bytes = 0;
        Some(Changes::Events(std::mem::take(&mut b.events)))
    }

    /// The directory open went away: stop collecting.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }
}

/// All watches of the server.
#[derive(Default)]
pub struct NotifyHub {
    watches: Mutex<Vec<Arc<Watch>>>,
    /// Fast path: reporting a change costs one load when nobody watches.
    count: AtomicUsize,
}

impl NotifyHub {
    pub fn watch(
        &self,
        share: &str,
        dir: &str,
        recursive: bool,
        completion_filter: u32,
        capacity: u32,
    ) -> Arc<Watch> {
        let w = Arc::new(Watch {
            share: share.to_lowercase(),
            dir: dir.trim_matches('\\').to_lowercase(),
            recursive,
            filter: completion_filter,
            capacity: capacity as usize,
            events: Mutex::new(Buffered::default()),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            delete_pending: AtomicBool::new(false),
        });
        let mut all = self.watches.lock().unwrap();
        all.retain(|w| !w.closed.load(Ordering::Acquire));
        all.push(w.clone());
        self.count.store(all.len(), Ordering::Release);
        w
    }

    /// The directory at `path` became delete pending while other opens of
    /// it remain: their pending and later CHANGE_NOTIFY requests complete
    /// with STATUS_DELETE_PENDING (as Windows and Samba do; smbtorture
    /// smb2.notify.rmdir1-4).
    pub fn delete_pending(&self, share: &str, path: &str) {
        self.each_watch_of(share, path, |w| {
            w.delete_pending.store(true, Ordering::Release);
        });
    }

    /// Changes in the directory at `path` were lost (the host change
    /// feed overflowed): its watches ask their clients to re-read it.
    pub fn overflow(&self, share: &str, path: &str) {
        self.each_watch_of(share, path, |w| {
            let mut b = w.events.lock().unwrap();
            b.overflow = true;
            b.events.clear();
            b.bytes = 0;
        });
    }

    /// Apply `change` to the live watches of the directory at `path`,
    /// then wake them.
    fn each_watch_of(&self, share: &str, path: &str, change: impl Fn(&Watch)) {
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        let share = share.to_lowercase();
        let dir = path.trim_matches('\\').to_lowercase();
        for w in self.watches.lock().unwrap().iter() {
            if !w.closed.load(Ordering::Acquire) && w.share == share && w.dir == dir {
                change(w);
                w.wake.notify_one();
            }
        }
    }

    /// Report a change to `path` (share-relative, `\` separated).
    pub fn report(&self, share: &str, path: &str, action: u32, filter_bits: u32) {
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        tracing::trace!(share, path, action, filter_bits, "change reported");
        let share = share.to_lowercase();
        let path = path.trim_matches('\\');
        let lower = path.to_lowercase();
        let (parent, _) = lower.rsplit_once('\\').unwrap_or(("", &lower));
        let all = self.watches.lock().unwrap();
        for w in all.iter() {
            if w.closed.load(Ordering::Acquire) || w.share != share || w.filter & filter_bits == 0 {
                continue;
            }
            let relative = if parent == w.dir {
                path.rsplit_once('\\').map_or(path, |(_, name)| name)
            } else if w.recursive
                && (w.dir.is_empty() || lower.starts_with(&format!("{}\\", w.dir)))
            {
                if w.dir.is_empty() {
                    path
                } else {
                    &path[w.dir.len() + 1..]
                }
            } else {
                continue;
            };
            let mut b = w.events.lock().unwrap();
            let size = entry_size(relative);
            if b.overflow {
                // Already lost: the client re-reads the directory anyway.
            } else if b.events.len() >= MAX_BUFFERED || b.bytes + size > w.capacity {
                b.overflow = true;
                b.events.clear();
                b.bytes = 0;
            } else {
                b.events.push((action, relative.to_string()));
                b.bytes += size;
            }
            drop(b);
            w.wake.notify_one();
        }
    }
}

/// Bytes one change takes in a response: the 12-byte entry header and the
/// UTF-16 name, padded to 4 bytes.
fn entry_size(name: &str) -> usize {
    (12 + 2 * name.encode_utf16().count()).next_multiple_of(4)
}

/// MS-FSCC 2.4.42 FILE_NOTIFY_INFORMATION entries, 4-byte aligned and
/// chained; None when they do not fit in `max_len`.
pub fn encode(events: &[(u32, String)], max_len: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::new();
    let mut last: Option<usize> = None;
    for (action, name) in events {
        let name16: Vec<u8> = name.encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
        let start = out.len();
        if let Some(prev) = last {
            let next = (start - prev) as u32;
            out[prev..prev + 4].copy_from_slice(&next.to_le_bytes());
        }
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&action.to_le_bytes());
        out.extend_from_slice(&(name16.len() as u32).to_le_bytes());
        out.extend_from_slice(&name16);
        last = Some(start);
    }
    (out.len() <= max_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_reach_the_watch_of_the_parent_only() {
        let hub = NotifyHub::default();
        let root = hub.watch("data", "", false, filter::FILE_NAME, 4096);
        let sub = hub.watch(
            "DATA",
            "Dir",
            false,
            filter::FILE_NAME | filter::DIR_NAME,
            4096,
        );
        hub.report("data", "dir\\a.txt", action::ADDED, filter::FILE_NAME);
        hub.report("data", "b.txt", action::ADDED, filter::FILE_NAME);
        hub.report("data", "dir\\c", action::ADDED, filter::ATTRIBUTES);
        match sub.take() {
            Some(Changes::Events(e)) => assert_eq!(e, vec![(action::ADDED, "a.txt".to_string())]),
            _ => panic!("sub watch saw nothing"),
        }
        match root.take() {
            Some(Changes::Events(e)) => assert_eq!(e, vec![(action::ADDED, "b.txt".to_string())]),
            _ => panic!("root watch saw nothing"),
        }
        assert!(root.take().is_none());
    }

    #[test]
    fn recursive_watch_reports_relative_paths() {
        let hub = NotifyHub::default();
        let w = hub.watch("s", "top", true, filter::FILE_NAME, 4096);
        hub.report("s", "top\\a\\b.txt", action::REMOVED, filter::FILE_NAME);
        match w.take() {
            Some(Changes::Events(e)) => {
                assert_eq!(e, vec![(action::REMOVED, "a\\b.txt".to_string())])
            }
            _ => panic!("nothing"),
        }
    }

    #[test]
    fn encoding_is_chained_and_bounded() {
        let e = vec![
            (action::ADDED, "ab".to_string()),
            (action::REMOVED, "c".to_string()),
        ];
        let b = encode(&e, 1000).unwrap();
        // first entry: 12 + 4 bytes of name, next at 16
        assert_eq!(u32::from_le_bytes(b[0..4].try_into().unwrap()), 16);
        assert_eq!(u32::from_le_bytes(b[16..20].try_into().unwrap()), 0);
        assert_eq!(b.len(), 16 + 12 + 2);
        assert!(encode(&e, 20).is_none());
    }

    #[test]
    fn overflow_asks_for_a_rescan() {
        let hub = NotifyHub::default();
        let w = hub.watch("s", "", false, filter::FILE_NAME, 4096);
        for i in 0..(MAX_BUFFERED + 1) {
            hub.report("s", &format!("f{i}"), action::ADDED, filter::FILE_NAME);
        }
        assert!(matches!(w.take(), Some(Changes::Overflow)));
    }
}
