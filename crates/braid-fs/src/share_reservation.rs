//! Share reservations taken outside the SMB open path (the POSIX face's
//! users: an NFS server's OPEN with share_access/share_deny), entered in
//! the same per-file share-mode table as SMB opens (`open_table.rs`), so
//! that the two protocols' opens of one file hold each other off (issue
//! 42): an SMB open that does not share writing keeps a writer out, and
//! a reservation that denies writing makes an SMB open for writing fail
//! with a sharing violation.
//!
//! A reservation is plain read/write access plus what it denies; it
//! shares DELETE (a POSIX client's open never keeps a name from being
//! removed). The table's own rules (MS-FSA 2.1.5.1.2) decide conflicts
//! with SMB opens; reservations are not checked against each other here
//! (their server keeps its own table, with rules of its own, such as
//! expired clients losing theirs). They are kept apart from SMB's opens
//! (`NodeState::reservations`) so an SMB delete-on-close still deletes at
//! the last SMB close.

use std::sync::Arc;

use crate::error::FsResult;
use crate::open_table::{check_share_access, FileKey, Node, NodeTable, OpenEntry};
use crate::service::FileService;
use crate::types::{access as acc, share as sh};

/// What a reservation asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    pub read: bool,
    pub write: bool,
    pub deny_read: bool,
    pub deny_write: bool,
}

impl Reservation {
    fn access(self) -> u32 {
        (if self.read { acc::FILE_READ_DATA } else { 0 })
            | (if self.write {
                acc::FILE_WRITE_DATA | acc::FILE_APPEND_DATA
            } else {
                0
            })
    }

    fn share_access(self) -> u32 {
        sh::DELETE
            | (if self.deny_read { 0 } else { sh::READ })
            | (if self.deny_write { 0 } else { sh::WRITE })
    }

    fn entry(self, id: u64) -> OpenEntry {
        OpenEntry {
            id,
            access: self.access(),
            share_access: self.share_access(),
            delete_on_close: false,
            write_time: Default::default(),
            user_set_change_time: false,
        }
    }
}

/// A share reservation in force; dropping it gives it back.
pub struct ShareReservation {
    nodes: Arc<NodeTable>,
    node: Arc<Node>,
    id: u64,
}

impl FileService {
    /// Take a share reservation on the file (dev, ino):
    /// Err(SharingViolation) when an SMB open of the file conflicts.
    pub fn reserve(&self, dev: u64, ino: u64, r: Reservation) -> FsResult<ShareReservation> {
        let key = FileKey {
            dev,
            ino,
            stream: 0,
        };
        loop {
            let node = self.nodes.get_or_insert(key);
            let mut s = node.lock();
            if s.dead {
                continue;
            }
            check_share_access(&s.opens, r.access(), r.share_access())?;
            let id = self.next_open_id();
            s.reservations.push(r.entry(id));
            drop(s);
            return Ok(ShareReservation {
                nodes: self.nodes.clone(),
                node,
                id,
            });
        }
    }
}

impl FileService {
    /// Whether a POSIX-face client may remove a name of the file or
    /// directory (dev, ino) (an NFS REMOVE, or a RENAME moving or replacing
    /// it): as an SMB open for DELETE sharing everything would, it fails
    /// with SharingViolation while an SMB open does not share delete
    /// (MS-FSA 2.1.5.1.2). A check, not a hold: an SMB open that comes
    /// between it and the unlink is not kept out.
    pub fn check_delete(&self, dev: u64, ino: u64) -> FsResult<()> {
        let key = FileKey {
            dev,
            ino,
            stream: 0,
        };
        let Some(node) = self.nodes.get(&key) else {
            return Ok(());
        };
        let s = node.lock();
        check_share_access(&s.opens, acc::DELETE, sh::READ | sh::WRITE | sh::DELETE)
    }
}

impl FileService {
    /// Issue 42: give a POSIX-face client caching of the file (dev, ino)
    /// (an NFS delegation; `write`: a write delegation) only if no SMB open
    /// is in the way (for `write`, any SMB open, as `has_opens`; else one
    /// that may write, as `has_writers`), and record it (`grant`, which
    /// returns None if it refuses) under the file's lock in the open
    /// table, the lock an SMB open registers under. So an SMB open either
    /// registered before the check, which sees it and grants nothing, or
    /// registers after the grant was recorded, and then finds it when it
    /// asks the caching registry (`caching.rs`), which SMB does after
    /// registering. None: an SMB open was in the way, or `grant` refused.
    pub fn grant_unless_smb_open<T>(
        &self,
        dev: u64,
        ino: u64,
        write: bool,
        grant: impl FnOnce() -> Option<T>,
    ) -> Option<T> {
        let key = FileKey {
            dev,
            ino,
            stream: 0,
        };
        loop {
            let node = self.nodes.get_or_insert(key);
            let s = node.lock();
            if s.dead {
                continue;
            }
            let in_the_way = if write {
                !s.opens.is_empty()
            } else {
                s.opens
                    .iter()
                    .any(|o| o.access & (acc::FILE_WRITE_DATA | acc::FILE_APPEND_DATA) != 0)
            };
            let granted = if in_the_way { None } else { grant() };
            let mut s = s;
            if s.idle() && s.reservations.is_empty() && s.locks.is_empty() {
                // Made for this call (the grant's client holds no
                // reservation here): not kept.
                s.dead = true;
                self.nodes.remove(&node);
            }
            return granted;
        }
    }
}

impl ShareReservation {
    /// Change what the reservation holds (an upgrade or a downgrade),
    /// checked against every other open of the file.
    pub fn update(&self, r: Reservation) -> FsResult<()> {
        let mut s = self.node.lock();
        check_share_access(&s.opens, r.access(), r.share_access())?;
        if let Some(e) = s.reservations.iter_mut().find(|o| o.id == self.id) {
            *e = r.entry(self.id);
        }
        drop(s);
        // A downgrade may let a waiting opener in.
        self.node.notify.notify_waiters();
        Ok(())
    }
}

impl Drop for ShareReservation {
    fn drop(&mut self) {
        let mut s = self.node.lock();
        s.reservations.retain(|o| o.id != self.id);
        if s.idle() && s.reservations.is_empty() && s.locks.is_empty() {
            s.dead = true;
            self.nodes.remove(&self.node);
        }
        drop(s);
        self.node.notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RW: Reservation = Reservation {
        read: true,
        write: true,
        deny_read: false,
        deny_write: false,
    };

    #[test]
    fn reservations_meet_smb_opens() {
        let fs = FileService::new(Arc::new(crate::SystemClock));
        let key = FileKey {
            dev: 1,
            ino: 2,
            stream: 0,
        };
        let deny_write = Reservation {
            read: true,
            write: false,
            deny_read: false,
            deny_write: true,
        };
        let a = fs.reserve(1, 2, deny_write).unwrap();
        // An SMB open for writing is refused while a denies writing ...
        let node = fs.nodes.get(&key).unwrap();
        {
            let s = node.lock();
            assert!(check_share_access(&s.reservations, acc::FILE_WRITE_DATA, sh::ALL).is_err());
            assert!(check_share_access(&s.reservations, acc::FILE_READ_DATA, sh::ALL).is_ok());
        }
        // ... and an SMB open that shares nothing keeps a reservation out.
        node.lock().opens.push(OpenEntry {
            id: 99,
            access: acc::FILE_READ_DATA,
            share_access: 0,
            delete_on_close: false,
            write_time: Default::default(),
            user_set_change_time: false,
        });
        assert!(fs.reserve(1, 2, RW).is_err());
        assert!(a.update(RW).is_err());
        node.lock().opens.clear();
        a.update(RW).unwrap();
        drop(a);
        assert!(fs.nodes.get(&key).is_none());
    }

    #[test]
    fn delete_meets_smb_share_delete() {
        let fs = FileService::new(Arc::new(crate::SystemClock));
        fs.check_delete(1, 2).unwrap();
        let key = FileKey {
            dev: 1,
            ino: 2,
            stream: 0,
        };
        let node = fs.nodes.get_or_insert(key);
        let open = |share_access| OpenEntry {
            id: 7,
            access: acc::FILE_READ_DATA,
            share_access,
            delete_on_close: false,
            write_time: Default::default(),
            user_set_change_time: false,
        };
        node.lock().opens.push(open(sh::READ | sh::WRITE));
        assert!(fs.check_delete(1, 2).is_err());
        node.lock().opens[0] = open(sh::ALL);
        fs.check_delete(1, 2).unwrap();
        // A reservation (an NFS open) always shares delete.
        node.lock().opens.clear();
        let _r = fs.reserve(1, 2, RW).unwrap();
        fs.check_delete(1, 2).unwrap();
    }

    /// The race of issue 42: an SMB open that registers between a
    /// POSIX-face client's check for SMB opens and the record of its
    /// caching grant would be seen by neither. The grant runs under the
    /// lock the SMB open registers under, so the open comes either before
    /// the check (no grant) or after the grant (and then sees it).
    #[test]
    fn a_caching_grant_and_an_smb_open_registration_do_not_interleave() {
        let fs = FileService::new(Arc::new(crate::SystemClock));
        let key = FileKey {
            dev: 1,
            ino: 2,
            stream: 0,
        };
        let r = fs.reserve(1, 2, RW).unwrap();
        let node = fs.nodes.get(&key).unwrap();
        let smb_open = |access| OpenEntry {
            id: 9,
            access,
            share_access: sh::ALL,
            delete_on_close: false,
            write_time: Default::default(),
            user_set_change_time: false,
        };
        // The grant is recorded while the file's lock is held (the
        // client's own reservation, an NFS open, is no SMB open): an SMB open
        // cannot register in between (it would block on this lock), and
        // registers only once the grant is there for it to see.
        let mut recorded = false;
        let granted = fs.grant_unless_smb_open(1, 2, true, || {
            assert!(
                node.is_locked(),
                "the grant ran outside the lock SMB opens register under"
            );
            recorded = true;
            Some("write delegation")
        });
        assert_eq!(granted, Some("write delegation"));
        assert!(recorded);
        // An SMB open registered before the check: no grant is recorded.
        node.lock().opens.push(smb_open(acc::FILE_READ_DATA));
        let refused = fs.grant_unless_smb_open(1, 2, true, || -> Option<()> {
            panic!("granted write caching beside an SMB open")
        });
        assert!(refused.is_none());
        // A reader leaves read caching possible, a writer does not.
        assert_eq!(fs.grant_unless_smb_open(1, 2, false, || Some(1)), Some(1));
        node.lock().opens[0] = smb_open(acc::FILE_WRITE_DATA);
        assert_eq!(fs.grant_unless_smb_open(1, 2, false, || Some(1)), None);
        node.lock().opens[0] = smb_open(acc::FILE_APPEND_DATA);
        assert_eq!(fs.grant_unless_smb_open(1, 2, false, || Some(1)), None);
        node.lock().opens.clear();
        drop(r);
        // A file nobody has open: the node made for the check goes.
        assert_eq!(fs.grant_unless_smb_open(1, 2, true, || Some(2)), Some(2));
        assert!(fs.nodes.get(&key).is_none());
    }
}
