//! Byte-range locks of an open (MS-FSA 2.1.5.8, 2.1.5.9, 2.1.4.10): the
//! share's lock table, mirrored to the kernel's POSIX locks where the share
//! asks for it, and the Netatalk locks of shares AFP servers also use.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::error::{FsError, FsResult};
use crate::handle::OpenHandle;
use crate::locks::{Holder, IoKind};
use crate::types::LockOwner;

impl OpenHandle {
    /// Who holds a lock this open takes for `owner`.
    fn holder(&self, owner: LockOwner) -> Holder {
        Holder {
            open_id: self.0.id,
            owner,
        }
    }

    /// The byte-range locks this open holds for `owner`, as (offset,
    /// length, exclusive), in the order they were taken: what a persistent
    /// open's record keeps so that a restarted server takes them again.
    pub fn held_locks(&self, owner: LockOwner) -> Vec<(u64, u64, bool)> {
        let h = self.holder(owner);
        let s = self.0.node.lock();
        s.locks
            .locks()
            .iter()
            .filter(|l| l.holder == h)
            .map(|l| (l.offset, l.length, l.exclusive))
            .collect()
    }

    /// Byte-range lock (MS-FSA 2.1.5.8), failing immediately with
    /// LockNotGranted on conflict. To wait, retry after
    /// [`OpenHandle::lock_changed`] fires.
    pub fn lock(&self, offset: u64, len: u64, exclusive: bool, owner: LockOwner) -> FsResult<()> {
        self.live()?;
        if self.0.is_dir {
            return Err(FsError::InvalidParameter);
        }
        let h = self.holder(owner);
        let mut s = self.0.node.lock();
        s.locks.lock(offset, len, exclusive, h)?;
        if let Err(e) = self.sync_posix_lock(&s.locks, offset, len) {
            // Held outside Braid (or the kernel refused): take it back.
            let _ = s.locks.unlock(offset, len, h);
            let _ = self.sync_posix_lock(&s.locks, offset, len);
            return Err(match e {
                libc::EAGAIN | libc::EACCES => FsError::LockNotGranted,
                e => FsError::from_errno(e),
            });
        }
        Ok(())
    }

    /// Make the kernel lock of this open over a range match its entries in
    /// the lock table (`posix_lock.rs`); a named stream has no bytes of its
    /// own in the file, so it has none.
    fn sync_posix_lock(
        &self,
        table: &crate::locks::LockTable,
        offset: u64,
        len: u64,
    ) -> Result<(), i32> {
        if self.0.stream.is_some() || !self.0.share.0.posix_locking() {
            return Ok(());
        }
        let own: Vec<_> = table
            .locks()
            .iter()
            .filter(|l| l.holder.open_id == self.0.id)
            .copied()
            .collect();
        crate::posix_lock::sync(self.fd(), &own, &self.0.netatalk_marks(), offset, len)
    }

    /// On a share with Netatalk locking, refuse this new open when an AFP
    /// open conflicts with it, else take its Netatalk locks
    /// (`netatalk_lock.rs`). Called once, before the open is handed out.
    pub(crate) fn netatalk_check(&self) -> FsResult<()> {
        if self.0.is_dir || self.0.stream.is_some() || !self.0.share.netatalk_locking() {
            return Ok(());
        }
        crate::netatalk_lock::check_and_mark(self.fd(), self.0.access, self.0.share_access)
    }

    /// Byte-range unlock (MS-FSA 2.1.5.9): the exact range, same open and owner.
    pub fn unlock(&self, offset: u64, len: u64, owner: LockOwner) -> FsResult<()> {
        self.live()?;
        if self.0.is_dir {
            return Err(FsError::InvalidParameter);
        }
        let h = self.holder(owner);
        {
            let mut s = self.0.node.lock();
            s.locks.unlock(offset, len, h)?;
            // Only releases or downgrades: cannot meet a conflict.
            let _ = self.sync_posix_lock(&s.locks, offset, len);
        }
        self.0.node.notify.notify_waiters();
        Ok(())
    }

    /// MS-FSA 2.1.4.10 for I/O: would reading/writing this range conflict
    /// with a byte-range lock? Err(LockConflict) if so.
    pub fn check_io_lock(
        &self,
        offset: u64,
        len: u64,
        is_write: bool,
        owner: LockOwner,
    ) -> FsResult<()> {
        self.live()?;
        let s = self.0.node.lock();
        if s.locks.is_empty() {
            return Ok(());
        }
        let kind = if is_write {
            IoKind::Write
        } else {
            IoKind::Read
        };
        s.locks.check_io(offset, len, kind, self.holder(owner))
    }

    /// Notified (`notify_waiters`) whenever locks of this file are released
    /// (unlock or close) or an open of it closes. Create the `notified()`
    /// future *before* retrying the lock to avoid missing a wake-up.
    pub fn lock_changed(&self) -> Arc<Notify> {
        self.0.node.notify.clone()
    }
}
