//! Windows byte-range locks (pure logic, no I/O).
//!
//! MS-FSA 2.1.4.10 (conflict detection), 2.1.5.8 (lock), 2.1.5.9 (unlock).
//! Conflict rules between an open's own locks follow Windows behaviour as
//! smbtorture observes it (and as Samba's brlock.c encodes it):
//! * shared vs shared never conflict;
//! * an exclusive *lock request* conflicts with every overlapping lock,
//!   even one held by the same (open, owner);
//! * a shared lock request may stack on the same holder's exclusive lock;
//! * a read conflicts with other holders' exclusive locks;
//! * a write conflicts with other holders' locks and with the writer's own
//!   shared locks (smbtorture LOCKTEST7).

use crate::error::{FsError, FsResult};
use crate::types::LockOwner;

/// Who holds a lock: the open plus the owner within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Holder {
    pub open_id: u64,
    pub owner: LockOwner,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRangeLock {
    pub offset: u64,
    pub length: u64,
    pub exclusive: bool,
    pub holder: Holder,
}

/// MS-FSA 2.1.5.8 / 2.1.5.9 validation: the last byte must not pass 2^64-1.
pub fn validate_range(offset: u64, length: u64) -> FsResult<()> {
    if length != 0 && offset.checked_add(length - 1).is_none() {
        return Err(FsError::InvalidLockRange);
    }
    Ok(())
}

/// MS-FSA 2.1.4.10 overlap test, including the zero-length rules: the {0,0}
/// range overlaps nothing; a zero-length range at X>0 overlaps a range that
/// contains both X-1 and X.
fn overlaps(o1: u64, l1: u64, o2: u64, l2: u64) -> bool {
    if (o1 == 0 && l1 == 0) || (o2 == 0 && l2 == 0) {
        return false;
    }
    // Wrapping: a zero-length range at X>0 has last byte X-1; validated ranges
    // never wrap otherwise.
    let last1 = o1.wrapping_add(l1).wrapping_sub(1);
    let last2 = o2.wrapping_add(l2).wrapping_sub(1);
    o1 <= last2 && last1 >= o2
}

/// Byte-range locks one file may have. Each lock, and each read or write
/// of a file that has any, checks them one by one: without a cap one
/// client could make every I/O on a shared file slow, and the server's
/// memory run out. Beyond it a lock is INSUFFICIENT_RESOURCES, as Windows
/// answers when it cannot allocate one.
pub const MAX_LOCKS_PER_FILE: usize = 65_536;

/// All byte-range locks of one file.
#[derive(Debug, Default, Clone)]
pub struct LockTable {
    locks: Vec<ByteRangeLock>,
}

/// Kind of access tested by [`LockTable::check_io`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    Read,
    Write,
}

impl LockTable {
    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    pub fn locks(&self) -> &[ByteRangeLock] {
        &self.locks
    }

    /// MS-FSA 2.1.5.8: grant or refuse (LockNotGranted) a lock, without waiting.
    pub fn lock(
        &mut self,
        offset: u64,
        length: u64,
        exclusive: bool,
        holder: Holder,
    ) -> FsResult<()> {
        validate_range(offset, length)?;
        for l in &self.locks {
            if !overlaps(offset, length, l.offset, l.length) {
                continue;
            }
            let conflict = if exclusive {
                true
            } else {
                l.exclusive && l.holder != holder
            };
            if conflict {
                return Err(FsError::LockNotGranted);
            }
        }
        if self.locks.len() >= MAX_LOCKS_PER_FILE {
            return Err(FsError::InsufficientResources);
        }
        self.locks.push(ByteRangeLock {
            offset,
            length,
            exclusive,
            holder,
        });
        Ok(())
    }

    /// MS-FSA 2.1.5.9: remove one lock of exactly this range and holder,
    /// preferring an exclusive one.
    pub fn unlock(&mut self, offset: u64, length: u64, holder: Holder) -> FsResult<()> {
        validate_range(offset, length)?;
        let mut found: Option<usize> = None;
        for (i, l) in self.locks.iter().enumerate() {
            if l.offset == offset && l.length == length && l.holder == holder {
                found = Some(i);
                if l.exclusive {
                    break;
                }
            }
        }
        match found {
            Some(i) => {
                self.locks.remove(i);
                Ok(())
            }
            None => Err(FsError::RangeNotLocked),
        }
    }

    /// MS-FSA 2.1.4.10 with LockIntent = FALSE: does I/O conflict with a lock?
    pub fn check_io(&self, offset: u64, length: u64, kind: IoKind, holder: Holder) -> FsResult<()> {
        if length == 0 {
            return Ok(());
        }
        // I/O ranges past 2^64 are clamped.
        let length = length.min(u64::MAX - offset).max(1);
        for l in &self.locks {
            if !overlaps(offset, length, l.offset, l.length) {
                continue;
            }
            let conflict = match kind {
                IoKind::Read => l.exclusive && l.holder != holder,
                IoKind::Write => l.holder != holder || !l.exclusive,
            };
            if conflict {
                return Err(FsError::LockConflict);
            }
        }
        Ok(())
    }

    /// Drop every lock of an open (on close). Returns whether any were removed.
    pub fn remove_open(&mut self, open_id: u64) -> bool {
        let before = self.locks.len();
        self.locks.retain(|l| l.holder.open_id != open_id);
        before != self.locks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn h(open_id: u64) -> Holder {
        Holder {
            open_id,
            owner: LockOwner(0),
        }
    }

    #[test]
    fn range_validation() {
        assert!(validate_range(u64::MAX, 1).is_ok());
        assert!(validate_range(u64::MAX, 0).is_ok());
        assert!(matches!(
            validate_range(u64::MAX, 2),
            Err(FsError::InvalidLockRange)
        ));
        assert!(matches!(
            validate_range(2, u64::MAX),
            Err(FsError::InvalidLockRange)
        ));
        assert!(validate_range(1, u64::MAX).is_ok());
    }

    #[test]
    fn a_file_holds_at_most_max_locks() {
        let mut t = LockTable::default();
        for i in 0..MAX_LOCKS_PER_FILE as u64 {
            t.lock(i * 2, 1, false, h(1)).unwrap();
        }
        assert!(matches!(
            t.lock(u64::MAX - 1, 1, false, h(2)),
            Err(FsError::InsufficientResources)
        ));
        // A conflict is still a conflict, and a freed place may be taken.
        assert!(matches!(
            t.lock(0, 1, true, h(2)),
            Err(FsError::LockNotGranted)
        ));
        t.unlock(0, 1, h(1)).unwrap();
        t.lock(0, 1, true, h(2)).unwrap();
    }

    #[test]
    fn exclusive_and_shared() {
        let mut t = LockTable::default();
        t.lock(0, 10, true, h(1)).unwrap();
        // Exclusive never stacks, not even for the same holder.
        assert!(matches!(
            t.lock(5, 1, true, h(1)),
            Err(FsError::LockNotGranted)
        ));
        assert!(matches!(
            t.lock(5, 1, false, h(2)),
            Err(FsError::LockNotGranted)
        ));
        // Shared may stack on own exclusive.
        t.lock(5, 1, false, h(1)).unwrap();
        // Adjacent is fine.
        t.lock(10, 5, true, h(2)).unwrap();
        let mut s = LockTable::default();
        s.lock(0, 10, false, h(1)).unwrap();
        s.lock(0, 10, false, h(2)).unwrap();
        s.lock(0, 10, false, h(1)).unwrap();
        assert!(matches!(
            s.lock(3, 1, true, h(1)),
            Err(FsError::LockNotGranted)
        ));
    }

    #[test]
    fn unlock_exact_match() {
        let mut t = LockTable::default();
        t.lock(0, 10, false, h(1)).unwrap();
        t.lock(0, 10, false, h(1)).unwrap();
        assert!(matches!(t.unlock(0, 5, h(1)), Err(FsError::RangeNotLocked)));
        assert!(matches!(
            t.unlock(0, 10, h(2)),
            Err(FsError::RangeNotLocked)
        ));
        t.unlock(0, 10, h(1)).unwrap();
        t.unlock(0, 10, h(1)).unwrap();
        assert!(matches!(
            t.unlock(0, 10, h(1)),
            Err(FsError::RangeNotLocked)
        ));
        assert!(matches!(
            t.unlock(u64::MAX, 2, h(1)),
            Err(FsError::InvalidLockRange)
        ));
    }

    #[test]
    fn zero_length_rules() {
        let mut t = LockTable::default();
        t.lock(0, 0, true, h(1)).unwrap();
        t.lock(0, 0, true, h(2)).unwrap(); // {0,0} never conflicts
        t.lock(10, 10, true, h(1)).unwrap();
        // Zero-length at the start of a locked range does not overlap it...
        t.lock(10, 0, true, h(2)).unwrap();
        // ...but strictly inside it does.
        assert!(matches!(
            t.lock(15, 0, true, h(2)),
            Err(FsError::LockNotGranted)
        ));
        // Zero-length one past the last byte does not.
        t.lock(20, 0, true, h(2)).unwrap();
        // A range covering a zero-length lock's point conflicts with it.
        assert!(matches!(
            t.lock(19, 2, true, h(1)),
            Err(FsError::LockNotGranted)
        ));
    }

    #[test]
    fn io_checks() {
        let mut t = LockTable::default();
        t.lock(0, 10, true, h(1)).unwrap();
        t.lock(20, 10, false, h(1)).unwrap();
        t.check_io(0, 10, IoKind::Read, h(1)).unwrap();
        t.check_io(0, 10, IoKind::Write, h(1)).unwrap();
        assert!(matches!(
            t.check_io(5, 1, IoKind::Read, h(2)),
            Err(FsError::LockConflict)
        ));
        assert!(matches!(
            t.check_io(5, 1, IoKind::Write, h(2)),
            Err(FsError::LockConflict)
        ));
        t.check_io(20, 10, IoKind::Read, h(2)).unwrap();
        assert!(matches!(
            t.check_io(25, 1, IoKind::Write, h(2)),
            Err(FsError::LockConflict)
        ));
        // Own shared lock blocks own write (LOCKTEST7).
        assert!(matches!(
            t.check_io(25, 1, IoKind::Write, h(1)),
            Err(FsError::LockConflict)
        ));
        t.check_io(10, 10, IoKind::Write, h(2)).unwrap();
        t.check_io(5, 0, IoKind::Write, h(2)).unwrap();
        assert!(t.remove_open(1));
        t.check_io(0, 100, IoKind::Write, h(2)).unwrap();
    }

    /// Byte-level model: each lock covers a set of bytes; zero-length locks
    /// are modelled by the MS-FSA rule directly.
    #[derive(Default)]
    struct Model {
        locks: Vec<(u64, u64, bool, u64)>,
    }

    fn model_overlap(o1: u64, l1: u64, o2: u64, l2: u64) -> bool {
        if (o1 == 0 && l1 == 0) || (o2 == 0 && l2 == 0) {
            return false;
        }
        // A zero-length range at X is the point between bytes X-1 and X.
        match (l1, l2) {
            (0, 0) => false,
            (0, _) => o2 < o1 && o1 < o2 + l2,
            (_, 0) => o1 < o2 && o2 < o1 + l1,
            _ => o1 < o2 + l2 && o2 < o1 + l1,
        }
    }

    impl Model {
        fn lock(&mut self, o: u64, l: u64, ex: bool, who: u64) -> bool {
            for &(lo, ll, lex, lwho) in &self.locks {
                if model_overlap(o, l, lo, ll) && (ex || (lex && lwho != who)) {
                    return false;
                }
            }
            self.locks.push((o, l, ex, who));
            true
        }
        fn unlock(&mut self, o: u64, l: u64, who: u64) -> bool {
            let mut idx = None;
            for (i, &(lo, ll, lex, lwho)) in self.locks.iter().enumerate() {
                if lo == o && ll == l && lwho == who {
                    idx = Some(i);
                    if lex {
                        break;
                    }
                }
            }
            idx.map(|i| self.locks.remove(i)).is_some()
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Lock(u64, u64, bool, u64),
        Unlock(u64, u64, u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..20, 0u64..8, any::<bool>(), 1u64..4)
                .prop_map(|(o, l, e, w)| Op::Lock(o, l, e, w)),
            (0u64..20, 0u64..8, 1u64..4).prop_map(|(o, l, w)| Op::Unlock(o, l, w)),
        ]
    }

    proptest! {
        #[test]
        fn matches_model(ops in proptest::collection::vec(op(), 1..60)) {
            let mut t = LockTable::default();
            let mut m = Model::default();
            for op in ops {
                match op {
                    Op::Lock(o, l, e, w) => {
                        prop_assert_eq!(t.lock(o, l, e, h(w)).is_ok(), m.lock(o, l, e, w));
                    }
                    Op::Unlock(o, l, w) => {
                        prop_assert_eq!(t.unlock(o, l, h(w)).is_ok(), m.unlock(o, l, w));
                    }
                }
            }
        }
    }
}
