//! A session's fore-channel slot table and reply cache (RFC 8881 2.10.6).
//!
//! Sans-IO: the compound runner asks [`SlotTable::begin`] what to do with a
//! SEQUENCE, runs the request when told to, and hands the encoded reply to
//! [`SlotTable::finish`]. A retransmission (same slot, same sequence id) is
//! answered from the cache and never executed twice.

use bytes::Bytes;

/// What the server remembers of a slot's last request.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Cached {
    /// The slot has never been used (its sequence id is 0).
    Nothing,
    /// The request is still running: a retransmission now is NFS4ERR_DELAY.
    InProgress,
    /// The whole encoded COMPOUND reply (RPC header excluded).
    Reply(Bytes),
    /// The client did not ask for the reply to be cached (sa_cachethis false):
    /// a retransmission gets NFS4ERR_RETRY_UNCACHED_REP (RFC 8881 2.10.6.1.3).
    Uncached,
}

#[derive(Clone, Debug)]
struct Slot {
    seqid: u32,
    /// Who sent the slot's last request and how many operations it had
    /// (RFC 8881 2.10.6.1.3.1: a "retry" that differs is a false retry).
    fingerprint: u64,
    cached: Cached,
    /// What `cached` and `fingerprint` held before the request now
    /// running, restored if that request is abandoned.
    previous: Cached,
    previous_fingerprint: u64,
}

/// The answer to a SEQUENCE's slot and sequence id (RFC 8881 18.46.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotVerdict {
    /// A new request: run it, then call `finish`.
    Execute,
    /// A retransmission of the last request, whose reply is cached.
    Replay(Bytes),
    /// A retransmission whose reply was not cached.
    RetryUncached,
    /// A retransmission of a request still running.
    Delay,
    /// Same slot and sequence id as the last request but not the same
    /// request (another principal, another number of operations):
    /// NFS4ERR_SEQ_FALSE_RETRY.
    FalseRetry,
    /// The slot id is beyond the table (NFS4ERR_BADSLOT).
    BadSlot,
    /// Neither the last sequence id nor the next (NFS4ERR_SEQ_MISORDERED).
    Misordered,
}

#[derive(Debug)]
pub struct SlotTable {
    slots: Vec<Slot>,
    /// The highest slot id the server wants the client to use
    /// (sr_target_highest_slotid); lowered to throttle a client.
    target_highest: u32,
    /// The highest slot id the client said it uses, on its last SEQUENCE.
    client_highest: u32,
}

impl SlotTable {
    /// `count` slots (ca_maxrequests as negotiated, at least 1).
    pub fn new(count: u32) -> SlotTable {
        let count = count.max(1);
        SlotTable {
            slots: vec![
                Slot {
                    seqid: 0,
                    fingerprint: 0,
                    cached: Cached::Nothing,
                    previous: Cached::Nothing,
                    previous_fingerprint: 0,
                };
                count as usize
            ],
            target_highest: count - 1,
            client_highest: 0,
        }
    }

    pub fn len(&self) -> u32 {
        self.slots.len() as u32
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The highest slot id of the table (sr_highest_slotid).
    pub fn highest_slotid(&self) -> u32 {
        self.len() - 1
    }

    pub fn target_highest_slotid(&self) -> u32 {
        self.target_highest
    }

    /// Lower or raise the slots the client is asked to use (QoS, memory):
    /// never above the table, never below slot 0.
    pub fn set_target_highest_slotid(&mut self, target: u32) {
        self.target_highest = target.min(self.highest_slotid());
    }

    pub fn client_highest_slotid(&self) -> u32 {
        self.client_highest
    }

    /// Slots holding a request still running.
    pub fn in_progress(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.cached == Cached::InProgress)
            .count()
    }

    // RFC 8881 2.10.6.1 and 18.46.3: the sequence id of a slot is one more
    // than the last one for a new request, equal for a retransmission; the
    // first request on a slot carries 1. `fingerprint` names the request
    // (its principal and operation count); a retransmission must match it
    // (2.10.6.1.3.1), so nobody reads another principal's cached reply.
    pub fn begin(
        &mut self,
        slotid: u32,
        seqid: u32,
        highest_slotid: u32,
        fingerprint: u64,
    ) -> SlotVerdict {
        let Some(slot) = self.slots.get_mut(slotid as usize) else {
            return SlotVerdict::BadSlot;
        };
        if seqid == slot.seqid {
            let verdict = match &slot.cached {
                // A slot never used has sequence id 0, and 0 is no retry.
                Cached::Nothing => None,
                _ if slot.fingerprint != fingerprint => Some(SlotVerdict::FalseRetry),
                Cached::InProgress => Some(SlotVerdict::Delay),
                Cached::Reply(r) => Some(SlotVerdict::Replay(r.clone())),
                Cached::Uncached => Some(SlotVerdict::RetryUncached),
            };
            if let Some(v) = verdict {
                return v;
            }
        }
        if seqid != slot.seqid.wrapping_add(1) {
            return SlotVerdict::Misordered;
        }
        if slot.cached == Cached::InProgress {
            // The previous request on this slot has not finished: the
            // client may not reuse a slot before its reply (2.10.6.1).
            return SlotVerdict::Delay;
        }
        slot.seqid = seqid;
        slot.previous_fingerprint = std::mem::replace(&mut slot.fingerprint, fingerprint);
        slot.previous = std::mem::replace(&mut slot.cached, Cached::InProgress);
        self.client_highest = highest_slotid;
        SlotVerdict::Execute
    }

    /// Record the reply of the request `begin` let run. `reply` is the
    /// encoded COMPOUND4res when the client asked for it to be cached.
    pub fn finish(&mut self, slotid: u32, reply: Option<Bytes>) {
        if let Some(slot) = self.slots.get_mut(slotid as usize) {
            slot.cached = match reply {
                Some(r) => Cached::Reply(r),
                None => Cached::Uncached,
            };
        }
    }

    /// Forget a request that failed before it changed anything (a SEQUENCE
    /// that is itself in error does not advance the slot, RFC 8881 18.46.3).
    pub fn abandon(&mut self, slotid: u32) {
        if let Some(slot) = self.slots.get_mut(slotid as usize) {
            if slot.cached == Cached::InProgress {
                slot.seqid = slot.seqid.wrapping_sub(1);
                slot.fingerprint = slot.previous_fingerprint;
                slot.cached = std::mem::replace(&mut slot.previous, Cached::Nothing);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_request_on_a_slot_is_seqid_one() {
        let mut t = SlotTable::new(4);
        assert_eq!(t.begin(0, 0, 0, 0), SlotVerdict::Misordered);
        assert_eq!(t.begin(0, 2, 0, 0), SlotVerdict::Misordered);
        assert_eq!(t.begin(0, 1, 0, 0), SlotVerdict::Execute);
    }

    #[test]
    fn retransmission_gets_the_cached_reply_and_is_not_run_again() {
        let mut t = SlotTable::new(2);
        assert_eq!(t.begin(1, 1, 1, 0), SlotVerdict::Execute);
        assert_eq!(t.begin(1, 1, 1, 0), SlotVerdict::Delay);
        t.finish(1, Some(Bytes::from_static(b"reply")));
        assert_eq!(
            t.begin(1, 1, 1, 0),
            SlotVerdict::Replay(Bytes::from_static(b"reply"))
        );
        assert_eq!(t.begin(1, 2, 1, 0), SlotVerdict::Execute);
        t.finish(1, None);
        assert_eq!(t.begin(1, 2, 1, 0), SlotVerdict::RetryUncached);
        assert_eq!(t.begin(1, 1, 1, 0), SlotVerdict::Misordered);
        assert_eq!(t.begin(1, 4, 1, 0), SlotVerdict::Misordered);
    }

    #[test]
    fn a_retry_by_another_principal_is_a_false_retry() {
        let mut t = SlotTable::new(1);
        assert_eq!(t.begin(0, 1, 0, 7), SlotVerdict::Execute);
        t.finish(0, Some(Bytes::from_static(b"secret")));
        assert_eq!(t.begin(0, 1, 0, 8), SlotVerdict::FalseRetry);
        assert_eq!(
            t.begin(0, 1, 0, 7),
            SlotVerdict::Replay(Bytes::from_static(b"secret"))
        );
        // A new request may come from anyone.
        assert_eq!(t.begin(0, 2, 0, 8), SlotVerdict::Execute);
    }

    #[test]
    fn slot_beyond_the_table_is_badslot() {
        let mut t = SlotTable::new(2);
        assert_eq!(t.begin(2, 1, 2, 0), SlotVerdict::BadSlot);
        assert_eq!(t.begin(u32::MAX, 1, 0, 0), SlotVerdict::BadSlot);
    }

    #[test]
    fn abandoned_request_leaves_the_slot_where_it_was() {
        let mut t = SlotTable::new(1);
        assert_eq!(t.begin(0, 1, 0, 0), SlotVerdict::Execute);
        t.abandon(0);
        assert_eq!(t.begin(0, 1, 0, 0), SlotVerdict::Execute);
        t.finish(0, Some(Bytes::from_static(b"a")));
        assert_eq!(t.begin(0, 2, 0, 0), SlotVerdict::Execute);
        t.abandon(0);
        assert_eq!(
            t.begin(0, 1, 0, 0),
            SlotVerdict::Replay(Bytes::from_static(b"a"))
        );
    }

    #[test]
    fn sequence_ids_wrap() {
        let mut t = SlotTable::new(1);
        t.slots[0].seqid = u32::MAX;
        t.slots[0].cached = Cached::Uncached;
        assert_eq!(t.begin(0, 0, 0, 0), SlotVerdict::Execute);
    }

    #[test]
    fn target_highest_slotid_stays_inside_the_table() {
        let mut t = SlotTable::new(8);
        assert_eq!(t.target_highest_slotid(), 7);
        t.set_target_highest_slotid(2);
        assert_eq!(t.target_highest_slotid(), 2);
        t.set_target_highest_slotid(100);
        assert_eq!(t.target_highest_slotid(), 7);
    }
}
