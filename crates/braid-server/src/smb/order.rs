//! The order in which a connection's requests take effect.
//!
//! The reader spawns a task per frame, and tasks start in any order on the
//! runtime's threads; where MS-SMB2 or MS-FSA make the order of arrival
//! visible to the client, these queues restore it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use braid_smb_proto::codec::FileId;
use braid_smb_proto::header::{Command, HEADER_LEN};
use tokio::sync::Notify;

/// CHANGE_NOTIFY requests of a connection, in the order they arrived.
/// Their handlers run on separate tasks, which may start in any order; a
/// handler waits for its turn before it takes buffered changes or queues on
/// its watch, so that two requests on one directory get the changes in the
/// order they were sent (smbtorture smb2.notify.double).
#[derive(Default)]
pub struct NotifyOrder {
    queue: Mutex<std::collections::VecDeque<u64>>,
    turn: tokio::sync::Notify,
}

impl NotifyOrder {
    /// The reader saw a CHANGE_NOTIFY with this message id.
    pub fn arrived(&self, message_id: u64) {
        self.queue.lock().unwrap().push_back(message_id);
    }

    /// Wait until every CHANGE_NOTIFY that arrived before this one is done
    /// with [`NotifyOrder::done`].
    pub async fn wait_turn(&self, message_id: u64) {
        loop {
            let turn = self.turn.notified();
            tokio::pin!(turn);
            turn.as_mut().enable();
            {
                let q = self.queue.lock().unwrap();
                if q.front().is_none_or(|m| *m == message_id) || !q.contains(&message_id) {
                    return;
                }
            }
            turn.await;
        }
    }

    /// This request has queued on its watch, failed, or finished (called
    /// again after the handler returns; the second call finds nothing).
    pub fn done(&self, message_id: u64) {
        let mut q = self.queue.lock().unwrap();
        if let Some(i) = q.iter().position(|m| *m == message_id) {
            q.remove(i);
            drop(q);
            self.turn.notify_waiters();
        }
    }
}

/// Requests that name an open (READ, WRITE, QUERY_DIRECTORY, CHANGE_NOTIFY,
/// ...), in the order they arrived, until each finishes or goes async.
///
/// A CLOSE waits for the requests on the same handle that arrived before
/// it: a QUERY_DIRECTORY sent just before a CLOSE completes normally, and a
/// CHANGE_NOTIFY sent just before it is pending when the CLOSE cancels it
/// with STATUS_NOTIFY_CLEANUP (MS-SMB2 3.3.5.10, 3.3.5.19), where tasks
/// starting out of order would have let the CLOSE run first and failed the
/// earlier request with FILE_CLOSED (smbtorture
/// smb2.compound_find.compound_find_close, smb2.notify.dir). Requests that
/// go async (blocking locks, change notifications) stop holding a CLOSE
/// back then: the CLOSE cancels them.
///
/// A CREATE likewise waits for the SET_INFO requests that arrived before
/// it: a rename or delete sent ahead of an open takes effect, or starts the
/// lease breaks it waits for, before the open looks at the name (smbtorture
/// smb2.lease.rename_wait reads the break the rename caused from the
/// response to the open it sent behind it, as Samba and Windows handle a
/// connection's requests in order).
///
/// A TREE_DISCONNECT or LOGOFF waits for the requests of its session that
/// arrived before it: a READ of an empty pipe sent just before a LOGOFF is
/// pending when the LOGOFF ends the pipe, and ends STATUS_PIPE_BROKEN
/// (smbtorture rpc.samba3.smb2-pipe-read-logoff), where a LOGOFF run first
/// would have failed it with USER_SESSION_DELETED.
#[derive(Default)]
pub struct FileRequestOrder {
    /// Requests not yet done, oldest first.
    queue: Mutex<VecDeque<Queued>>,
    next_ticket: AtomicU64,
    /// CLOSEs waiting: only then does finishing a request wake anyone.
    waiting: AtomicUsize,
    changed: Notify,
}

#[derive(Clone, Copy)]
struct Queued {
    ticket: u64,
    volatile: u64,
    session_id: u64,
    set_info: bool,
}

/// MS-SMB2 2.2.1.2: SessionId's offset in the SMB2 header.
const SESSION_ID_OFFSET: usize = 40;

impl FileRequestOrder {
    /// The reader saw request `msg` (header and body); returns its ticket
    /// if it names an open, or is a CREATE (which only waits: its ticket
    /// marks its place and holds nothing back).
    pub fn arrived(&self, command: u16, msg: &[u8]) -> Option<u64> {
        let waits_only = [Command::Create, Command::TreeDisconnect, Command::Logoff];
        if waits_only.iter().any(|c| *c as u16 == command) {
            return Some(self.next_ticket.fetch_add(1, Ordering::Relaxed));
        }
        let at = file_id_offset(command)?;
        // FileId.Volatile follows the 8-byte FileId.Persistent.
        let from = HEADER_LEN + at + 8;
        let volatile = u64::from_le_bytes(msg.get(from..from + 8)?.try_into().ok()?);
        let session_id = msg
            .get(SESSION_ID_OFFSET..SESSION_ID_OFFSET + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed);
        self.queue.lock().unwrap().push_back(Queued {
            ticket,
            volatile,
            session_id,
            set_info: command == Command::SetInfo as u16,
        });
        Some(ticket)
    }

    /// The request finished or went async (a second call finds nothing).
    pub fn release(&self, ticket: u64) {
        let mut q = self.queue.lock().unwrap();
        let Some(i) = q.iter().position(|r| r.ticket == ticket) else {
            return;
        };
        q.remove(i);
        drop(q);
        if self.waiting.load(Ordering::Acquire) > 0 {
            self.changed.notify_waiters();
        }
    }

    /// Wait until every request that arrived before `ticket` and names
    /// `volatile` (or the related open of a compound) is done.
    pub async fn wait_before(&self, ticket: u64, volatile: u64) {
        self.wait_for_earlier(ticket, |r| {
            r.volatile == volatile || r.volatile == FileId::RELATED.volatile
        })
        .await
    }

    /// Wait until every SET_INFO that arrived before `ticket` is done or
    /// waits asynchronously.
    pub async fn wait_for_set_info_before(&self, ticket: u64) {
        self.wait_for_earlier(ticket, |r| r.set_info).await
    }

    /// Wait until every request of `session_id` that arrived before
    /// `ticket` is done or waits asynchronously.
    pub async fn wait_for_session_before(&self, ticket: u64, session_id: u64) {
        self.wait_for_earlier(ticket, |r| r.session_id == session_id)
            .await
    }

    async fn wait_for_earlier(&self, ticket: u64, matches: impl Fn(&Queued) -> bool) {
        let blocks =
            |q: &VecDeque<Queued>| q.iter().take_while(|r| r.ticket < ticket).any(&matches);
        if !blocks(&self.queue.lock().unwrap()) {
            return;
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !blocks(&self.queue.lock().unwrap()) {
                break;
            }
            changed.await;
        }
        self.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where a request body carries its FileId (MS-SMB2 2.2.14 - 2.2.39), for
/// the commands that name an open; OPLOCK_BREAK acknowledgments are left
/// out (a CLOSE answering a break must not wait for its acknowledgment).
fn file_id_offset(command: u16) -> Option<usize> {
    match Command::from_u16(command)? {
        Command::Close
        | Command::Flush
        | Command::Lock
        | Command::Ioctl
        | Command::QueryDirectory
        | Command::ChangeNotify => Some(8),
        Command::Read | Command::Write | Command::SetInfo => Some(16),
        Command::QueryInfo => Some(24),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    /// A request message of `command` naming volatile id `v`.
    fn msg(command: Command, v: u64) -> Vec<u8> {
        let mut m = vec![0u8; HEADER_LEN + 48];
        let at = HEADER_LEN + file_id_offset(command as u16).unwrap() + 8;
        m[at..at + 8].copy_from_slice(&v.to_le_bytes());
        m
    }

    /// The reader saw `command` naming volatile id `v`: its ticket.
    fn arrive(order: &FileRequestOrder, command: Command, v: u64) -> u64 {
        order.arrived(command as u16, &msg(command, v)).unwrap()
    }

    #[test]
    fn only_requests_on_opens_and_creates_get_tickets() {
        let order = FileRequestOrder::default();
        assert!(order
            .arrived(Command::Echo as u16, &[0; HEADER_LEN + 4])
            .is_none());
        assert!(order
            .arrived(Command::OplockBreak as u16, &[0; HEADER_LEN + 24])
            .is_none());
        // Too short to hold a FileId: no ticket, no panic.
        assert!(order
            .arrived(Command::Read as u16, &[0; HEADER_LEN + 20])
            .is_none());
        assert_eq!(
            order.arrived(Command::Read as u16, &msg(Command::Read, 7)),
            Some(0)
        );
        assert_eq!(
            order.arrived(Command::QueryInfo as u16, &msg(Command::QueryInfo, 7)),
            Some(1)
        );
        assert_eq!(
            order.arrived(Command::Create as u16, &[0; HEADER_LEN + 64]),
            Some(2)
        );
    }

    #[tokio::test]
    async fn create_waits_for_earlier_set_info_only() {
        let order = Arc::new(FileRequestOrder::default());
        let read = arrive(&order, Command::Read, 4);
        let rename = arrive(&order, Command::SetInfo, 4);
        let create = order
            .arrived(Command::Create as u16, &[0; HEADER_LEN + 64])
            .unwrap();
        let later = arrive(&order, Command::SetInfo, 8);
        let waiter = {
            let order = order.clone();
            tokio::spawn(async move { order.wait_for_set_info_before(create).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiter.is_finished(),
            "CREATE ran before the earlier SET_INFO"
        );
        // Neither the READ nor a later SET_INFO holds it back.
        order.release(rename);
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("the SET_INFO went async or finished")
            .unwrap();
        // A CREATE holds nothing back itself.
        order.release(create);
        let _ = (read, later);
    }

    #[tokio::test]
    async fn logoff_waits_for_earlier_requests_of_its_session_only() {
        let order = Arc::new(FileRequestOrder::default());
        let in_session = |command: Command, v: u64, session: u64| {
            let mut m = msg(command, v);
            m[SESSION_ID_OFFSET..SESSION_ID_OFFSET + 8].copy_from_slice(&session.to_le_bytes());
            order.arrived(command as u16, &m).unwrap()
        };
        let pipe_read = in_session(Command::Read, 4, 0x11);
        let other_session = in_session(Command::Read, 5, 0x22);
        let logoff = order
            .arrived(Command::Logoff as u16, &[0; HEADER_LEN + 4])
            .unwrap();
        let waiter = {
            let order = order.clone();
            tokio::spawn(async move { order.wait_for_session_before(logoff, 0x11).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "LOGOFF ran before the earlier READ");
        // The READ goes async (or finishes); the other session's READ does
        // not hold the LOGOFF back.
        order.release(pipe_read);
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("the READ went async")
            .unwrap();
        let _ = other_session;
    }

    #[tokio::test]
    async fn close_waits_for_earlier_requests_on_its_open_only() {
        let order = Arc::new(FileRequestOrder::default());
        let find = arrive(&order, Command::QueryDirectory, 5);
        let other = arrive(&order, Command::Read, 6);
        let close = arrive(&order, Command::Close, 5);
        // A request on another open does not hold the CLOSE back.
        order.release(find);
        tokio::time::timeout(Duration::from_secs(1), order.wait_before(close, 5))
            .await
            .expect("nothing earlier on open 5");
        let _ = other;

        let write = arrive(&order, Command::Write, 9);
        let close = arrive(&order, Command::Close, 9);
        let waiter = {
            let order = order.clone();
            tokio::spawn(async move { order.wait_before(close, 9).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "CLOSE ran before the earlier WRITE");
        order.release(write);
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("released WRITE lets the CLOSE go")
            .unwrap();
    }

    #[tokio::test]
    async fn related_requests_hold_back_any_close() {
        let order = FileRequestOrder::default();
        let related = arrive(&order, Command::Read, u64::MAX);
        let close = arrive(&order, Command::Close, 3);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), order.wait_before(close, 3))
                .await
                .is_err()
        );
        order.release(related);
        order.release(related); // idempotent
        order.wait_before(close, 3).await;
    }
}
