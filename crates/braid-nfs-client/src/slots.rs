//! The fore channel's slot table (RFC 8881 2.10.6): one request per slot
//! at a time, each slot with its own sequence id, and the number of slots
//! used following the server's `sr_target_highest_slotid`.
//!
//! Sans-IO: [`SlotTable`] hands out [`Ticket`]s and takes back the
//! outcome of each request; a caller that finds no free slot queues a
//! oneshot receiver and is handed the next slot freed (FIFO).
//!
//! Sequence ids:
//! - SEQUENCE succeeded (whatever the later ops did, NFS4ERR_DELAY
//!   included): the server executed the slot's request, so the slot's next
//!   seqid is one more. A retry after an op's NFS4ERR_DELAY is a new
//!   request, on a new seqid, after waiting.
//! - SEQUENCE itself failed (NFS4ERR_DELAY, NFS4ERR_SEQ_MISORDERED,
//!   NFS4ERR_BADSLOT, ...): the request was not executed and the slot's
//!   seqid does not move (RFC 8881 2.10.6.1: the replier increments only
//!   on a request it processes).
//! - No reply (connection lost): the server may or may not have executed
//!   it, so the slot is retired (never used again) rather than guessed.

use std::collections::VecDeque;
use tokio::sync::oneshot;

/// The right to send one request on `slot` with `seqid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    pub slot: u32,
    pub seqid: u32,
    /// sa_highest_slotid: the highest slot in use when the ticket was issued.
    pub highest: u32,
}

/// What became of a request sent on a ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// SEQUENCE succeeded: its sr_highest_slotid and sr_target_highest_slotid.
    Done {
        highest_slotid: u32,
        target_highest_slotid: u32,
    },
    /// SEQUENCE failed: the request was not executed.
    NotExecuted,
    /// No reply: the slot's state is unknown, retire it.
    Lost,
}

/// Most slots a table grows to, whatever a server says.
pub const MAX_SLOTS: u32 = 1024;

#[derive(Debug)]
struct Slot {
    /// The seqid of the next request on this slot.
    next: u32,
    busy: bool,
    retired: bool,
}

#[derive(Debug)]
pub struct SlotTable {
    slots: Vec<Slot>,
    /// Highest slot id that may be handed out (min of the server's target
    /// and highest; at first ca_maxrequests - 1).
    limit: u32,
    waiters: VecDeque<oneshot::Sender<Ticket>>,
    in_use: u32,
}

impl SlotTable {
    /// A table of `n` slots (the session's ca_maxrequests), all at seqid 1.
    pub fn new(n: u32) -> Self {
        let n = n.clamp(1, MAX_SLOTS);
        SlotTable {
            slots: (0..n).map(|_| Self::fresh()).collect(),
            limit: n - 1,
            waiters: VecDeque::new(),
            in_use: 0,
        }
    }

    fn fresh() -> Slot {
        Slot {
            next: 1,
            busy: false,
            retired: false,
        }
    }

    /// Highest slot id that may be used now.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Slots with a request outstanding.
    pub fn in_use(&self) -> u32 {
        self.in_use
    }

    /// Requests waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.waiters.len()
    }

    /// The next seqid of `slot` (tests and diagnostics).
    pub fn seqid(&self, slot: u32) -> Option<u32> {
        self.slots.get(slot as usize).map(|s| s.next)
    }

    fn highest_busy(&self) -> u32 {
        self.slots.iter().rposition(|s| s.busy).unwrap_or(0) as u32
    }

    fn take_free(&mut self) -> Option<Ticket> {
        let lim = (self.limit as usize).min(self.slots.len() - 1);
        let i = self.slots[..=lim]
            .iter()
            .position(|s| !s.busy && !s.retired)?;
        self.slots[i].busy = true;
        self.in_use += 1;
        Some(Ticket {
            slot: i as u32,
            seqid: self.slots[i].next,
            highest: self.highest_busy(),
        })
    }

    /// A free slot now, if any (lowest first).
    pub fn try_acquire(&mut self) -> Option<Ticket> {
        if !self.waiters.is_empty() {
            return None; // first come, first served
        }
        self.take_free()
    }

    /// A free slot now, or a receiver that will get one.
    pub fn acquire(&mut self) -> Result<Ticket, oneshot::Receiver<Ticket>> {
        if let Some(t) = self.try_acquire() {
            return Ok(t);
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.push_back(tx);
        Err(rx)
    }

    /// The request on `t` finished with `outcome`: free (or retire) the
    /// slot, follow the server's target, and hand slots to waiters.
    pub fn complete(&mut self, t: &Ticket, outcome: Outcome) {
        let Some(s) = self.slots.get_mut(t.slot as usize) else {
            return;
        };
        if !s.busy {
            return;
        }
        s.busy = false;
        self.in_use -= 1;
        match outcome {
            Outcome::Done {
                highest_slotid,
                target_highest_slotid,
            } => {
                s.next = t.seqid.wrapping_add(1);
                let lim = target_highest_slotid.min(highest_slotid).min(MAX_SLOTS - 1);
                // Growing: new slots start at seqid 1. Shrinking: slots
                // above the limit are not handed out again (their seqids
                // are kept in case the server raises the target later).
                while self.slots.len() <= lim as usize {
                    self.slots.push(Self::fresh());
                }
                self.limit = lim;
            }
            Outcome::NotExecuted => {}
            Outcome::Lost => s.retired = true,
        }
        self.dispatch();
    }

    fn dispatch(&mut self) {
        while !self.waiters.is_empty() {
            let Some(t) = self.take_free() else { return };
            let tx = self.waiters.pop_front().expect("waiter");
            if let Err(t) = tx.send(t) {
                // The waiter went away: give the slot back.
                self.slots[t.slot as usize].busy = false;
                self.in_use -= 1;
            }
        }
    }

    /// Fail every waiter (the session is gone): their receivers see an error.
    pub fn close(&mut self) {
        self.waiters.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(h: u32, t: u32) -> Outcome {
        Outcome::Done {
            highest_slotid: h,
            target_highest_slotid: t,
        }
    }

    #[test]
    fn seqids_advance_per_slot() {
        let mut st = SlotTable::new(4);
        let a = st.try_acquire().unwrap();
        let b = st.try_acquire().unwrap();
        assert_eq!((a.slot, a.seqid, b.slot, b.seqid), (0, 1, 1, 1));
        assert_eq!(b.highest, 1);
        st.complete(&a, done(3, 3));
        let c = st.try_acquire().unwrap();
        assert_eq!((c.slot, c.seqid), (0, 2));
        st.complete(&b, done(3, 3));
        st.complete(&c, done(3, 3));
        assert_eq!(st.seqid(0), Some(3));
        assert_eq!(st.seqid(1), Some(2));
        assert_eq!(st.in_use(), 0);
    }

    #[test]
    fn target_shrinks_and_grows() {
        let mut st = SlotTable::new(8);
        let ts: Vec<Ticket> = (0..8).map(|_| st.try_acquire().unwrap()).collect();
        assert!(st.try_acquire().is_none());
        // The server lowers its target to 1 (slots 0 and 1).
        st.complete(&ts[7], done(7, 1));
        assert_eq!(st.limit(), 1);
        // Slot 7 is free but above the target: not handed out.
        assert!(st.try_acquire().is_none());
        for t in &ts[2..7] {
            st.complete(t, done(7, 1));
        }
        assert!(st.try_acquire().is_none());
        st.complete(&ts[0], done(7, 1));
        let t = st.try_acquire().unwrap();
        assert_eq!((t.slot, t.seqid), (0, 2));
        assert!(st.try_acquire().is_none());
        // The server raises its target beyond the table: it grows.
        st.complete(&ts[1], done(15, 11));
        assert_eq!(st.limit(), 11);
        let got: Vec<u32> = std::iter::from_fn(|| st.try_acquire().map(|t| t.slot)).collect();
        assert_eq!(got, (1..=11).collect::<Vec<u32>>());
        assert_eq!(st.seqid(10), Some(1));
        assert_eq!(st.seqid(7), Some(2), "slot 7 kept its seqid while shrunk");
        // The target never exceeds the server's highest slot.
        st.complete(&t, done(3, 11));
        assert_eq!(st.limit(), 3);
    }

    #[test]
    fn waiters_get_freed_slots_in_order() {
        let mut st = SlotTable::new(1);
        let a = st.acquire().unwrap();
        let mut w1 = st.acquire().unwrap_err();
        let mut w2 = st.acquire().unwrap_err();
        assert_eq!(st.waiting(), 2);
        st.complete(&a, done(0, 0));
        let b = w1.try_recv().unwrap();
        assert_eq!((b.slot, b.seqid), (0, 2));
        assert!(w2.try_recv().is_err());
        // A waiter that gave up does not swallow the slot.
        drop(w2);
        st.complete(&b, done(0, 0));
        let c = st.try_acquire().unwrap();
        assert_eq!((c.slot, c.seqid), (0, 3));
    }

    #[test]
    fn retried_slot_keeps_its_seqid() {
        let mut st = SlotTable::new(2);
        let a = st.try_acquire().unwrap();
        // SEQUENCE answered NFS4ERR_DELAY: not executed, same seqid again.
        st.complete(&a, Outcome::NotExecuted);
        let r = st.try_acquire().unwrap();
        assert_eq!((r.slot, r.seqid), (0, 1));
        // SEQUENCE succeeded but a later op said NFS4ERR_DELAY: executed,
        // so the retry is a new request on the next seqid.
        st.complete(&r, done(1, 1));
        let r2 = st.try_acquire().unwrap();
        assert_eq!((r2.slot, r2.seqid), (0, 2));
    }

    #[test]
    fn misordered_and_lost_answers() {
        let mut st = SlotTable::new(2);
        let a = st.try_acquire().unwrap();
        st.complete(&a, done(1, 1));
        let b = st.try_acquire().unwrap();
        assert_eq!(b.seqid, 2);
        // NFS4ERR_SEQ_MISORDERED: the server did not execute it; the slot
        // keeps seqid 2 (the caller reports the error).
        st.complete(&b, Outcome::NotExecuted);
        assert_eq!(st.seqid(0), Some(2));
        // Completing a ticket twice (a duplicate answer) changes nothing.
        st.complete(&b, done(1, 1));
        assert_eq!(st.seqid(0), Some(2));
        // A lost request retires its slot.
        let c = st.try_acquire().unwrap();
        st.complete(&c, Outcome::Lost);
        let d = st.try_acquire().unwrap();
        assert_eq!(d.slot, 1);
        assert!(st.try_acquire().is_none());
    }
}
