//! Breaks nobody waits for (MS-FSA 2.1.4.12): a write through another
//! open, a change to a leased directory's entries, a change made on the
//! host. The holders are told and, where the break needs an
//! acknowledgment, answer in their own time; nothing is held back.

use std::sync::Arc;

use braid_smb_proto::messages::create::oplock_level;
use braid_smb_proto::messages::LeaseBreakNotification;

use super::{
    send_break, send_lease_notification, take_disconnected_to_break, FileOplocks, Holder, NewOpen,
};
use crate::smb::lease::{Lease, LeaseId, H, R, W};

impl FileOplocks {
    /// A write, truncation or byte-range lock through one open breaks the
    /// read caching of the holders to none (MS-FSA 2.1.4.12): level II
    /// oplocks and Read leases, without waiting for acknowledgments. The
    /// open's own lease stays; its own level II oplock breaks too, as
    /// Windows and Samba do (smbtorture smb2.oplock.batch1, brl1, brl3).
    pub fn break_level2_except(&self, key: u64) {
        let mut holders = self.holders.lock().unwrap();
        let own_lease = holders
            .iter()
            .find(|h| h.open_key == key)
            .and_then(|h| h.lease.as_ref().map(|l| l.id));
        let mut seen: Vec<LeaseId> = Vec::new();
        let mut lease_breaks = Vec::new();
        for h in holders
            .iter_mut()
            .filter(|h| h.open_key != key || h.lease.is_none())
        {
            match &h.lease {
                Some(lease) if Some(lease.id) == own_lease => {}
                Some(lease) => break_to_none(h, lease, R, &mut seen, &mut lease_breaks),
                None if h.level == oplock_level::LEVEL_II => {
                    send_break(h, oplock_level::NONE);
                    h.level = oplock_level::NONE;
                }
                None => {}
            }
        }
        drop(holders);
        for (h, n) in lease_breaks {
            send_lease_notification(&h, &n);
        }
    }

    /// An entry of this directory changed (`dir_lease.rs`): break every
    /// lease on it to none but `except`, without waiting for
    /// acknowledgments. A lease already breaking goes to none next.
    pub fn break_dir_leases(&self, except: Option<LeaseId>) {
        let holders = self.holders.lock().unwrap();
        let mut seen: Vec<LeaseId> = Vec::new();
        let mut lease_breaks = Vec::new();
        for h in holders.iter() {
            match &h.lease {
                Some(lease) if Some(lease.id) != except => {
                    break_to_none(h, lease, R | H | W, &mut seen, &mut lease_breaks)
                }
                _ => {}
            }
        }
        drop(holders);
        for (h, n) in lease_breaks {
            send_lease_notification(&h, &n);
        }
    }

    /// A process on the host changed the file (`host_writes.rs`): break
    /// the caching it made stale, `R | W` for a write and everything for
    /// a file whose last name is gone, to none, without waiting: the host
    /// process cannot be held back, as an open on Windows would be.
    /// Oplocks break as for a write (MS-FSA 2.1.4.12): level II at once,
    /// exclusive and batch with an acknowledgment. A disconnected durable
    /// open that caches any of it is closed instead (MS-SMB2 3.3.4.6).
    pub fn break_for_host_change(&self, caching: u32) {
        let mut holders = self.holders.lock().unwrap();
        let gone = NewOpen {
            overwrites: true,
            ..NewOpen::default()
        };
        let purges = take_disconnected_to_break(&mut holders, &gone, caching);
        let mut seen: Vec<LeaseId> = Vec::new();
        let mut lease_breaks = Vec::new();
        for h in holders.iter_mut() {
            match &h.lease {
                Some(lease) => break_to_none(h, lease, caching, &mut seen, &mut lease_breaks),
                None if h.level == oplock_level::LEVEL_II => {
                    send_break(h, oplock_level::NONE);
                    h.level = oplock_level::NONE;
                }
                None if h.level >= oplock_level::EXCLUSIVE && h.breaking_to.is_none() => {
                    h.breaking_to = Some(oplock_level::NONE);
                    send_break(h, oplock_level::NONE);
                }
                None => {}
            }
        }
        drop(holders);
        for p in purges {
            p();
        }
        for (h, n) in lease_breaks {
            send_lease_notification(&h, &n);
        }
        self.changed.notify_waiters();
    }
}

/// Break `lease` (held by `h`) to none without waiting, once per lease
/// (`seen`), if it caches any of `caching`; a lease already breaking is
/// broken to none after its acknowledgment. The notification is queued
/// in `out`, to be sent once the holders' lock is released.
fn break_to_none(
    h: &Holder,
    lease: &Arc<Lease>,
    caching: u32,
    seen: &mut Vec<LeaseId>,
    out: &mut Vec<(Holder, LeaseBreakNotification)>,
) {
    if seen.contains(&lease.id) {
        return;
    }
    seen.push(lease.id);
    let mut st = lease.st.lock().unwrap();
    match st.breaking_to {
        Some(_) => st.required = 0,
        None if st.state & caching != 0 => {
            let n = lease.begin_break(&mut st, 0);
            out.push((h.clone(), n));
        }
        None => {}
    }
}
