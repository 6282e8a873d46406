//! READs left waiting on pipes (MS-SMB2 3.3.5.12: a READ of an empty pipe
//! goes async), and the ways they are ended: CANCEL by AsyncId or by
//! MessageId (3.3.5.16), even before the READ arrives, or with an AsyncId
//! no request has; an answer written to the pipe; the pipe's CLOSE, the
//! tree's disconnect, the session's LOGOFF, the loss of one channel or of
//! all.

use std::sync::Arc;
use std::time::Duration;

use braid_client::{Error, NtStatus, Response};
use braid_smb_proto::Command;
use rand::Rng;
use tokio::task::JoinHandle;

use super::{close_req, ipc_unc, read_req, transceive_req, write_req, PipeClient};
use crate::rpc;

/// How long an ended READ may take to be answered.
const PATIENCE: Duration = Duration::from_secs(5);

/// Whether a status may end a READ that was ended by `how`: the answer
/// (which may have come first), or the ending's own status.
fn expected(how: &str, status: NtStatus) -> bool {
    // An answer, or (a pipe whose association is over) none ever.
    let at_once = [
        NtStatus::SUCCESS,
        NtStatus::BUFFER_OVERFLOW,
        NtStatus::PIPE_DISCONNECTED,
    ];
    if at_once.contains(&status) {
        return true;
    }
    let allowed: &[NtStatus] = match how {
        "cancel" | "cancel-early" | "kill-one" | "answer" | "wrong-async-id" => {
            &[NtStatus::CANCELLED]
        }
        "close" => &[NtStatus::PIPE_BROKEN],
        "tree-disconnect" => &[NtStatus::PIPE_BROKEN, NtStatus::NETWORK_NAME_DELETED],
        "logoff" => &[
            NtStatus::PIPE_BROKEN,
            NtStatus::CANCELLED,
            NtStatus::USER_SESSION_DELETED,
        ],
        _ => &[],
    };
    allowed.contains(&status)
}

/// A READ left waiting: the pipe it reads, and its task.
struct Waiting {
    pipe: [u8; 16],
    task: JoinHandle<braid_client::Result<Response>>,
}

impl PipeClient<'_> {
    /// Requests in flight on the session's channels.
    fn in_flight(&self) -> Vec<(Arc<braid_client::Channel>, u64, Option<u64>)> {
        let mut v = Vec::new();
        for ch in self.s.channels().list() {
            for (mid, aid) in ch.in_flight() {
                v.push((ch.clone(), mid, aid));
            }
        }
        v
    }

    /// Wait until `n` requests in flight have had their interim response
    /// (or a second passed).
    async fn until_async(&self, n: usize) -> usize {
        let t0 = std::time::Instant::now();
        loop {
            let k = self.in_flight().iter().filter(|f| f.2.is_some()).count();
            if k >= n || t0.elapsed() > Duration::from_secs(1) {
                return k;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// CANCEL every request in flight, by AsyncId when known and `by_async`.
    fn cancel_all(&self, by_async: bool) {
        for (ch, mid, aid) in self.in_flight() {
            let _ = ch.cancel(mid, aid.filter(|_| by_async));
        }
    }

    /// READs left waiting on empty pipes (fresh ones, or ones in use,
    /// which may have an answer ready), then ended one way, and each must
    /// end that way within `PATIENCE`.
    pub(super) async fn waits(&mut self) {
        let n = [1usize, 1, 2, 3, 6, 12][self.rng.gen_range(0..6)];
        let fresh = self.rng.gen_bool(0.6);
        let mut reads = Vec::new();
        for _ in 0..n {
            let i = if fresh || self.pipes.is_empty() {
                match self.open(true).await {
                    Some(i) => i,
                    None => break,
                }
            } else {
                self.rng.gen_range(0..self.pipes.len())
            };
            let (id, t) = (self.pipes[i].id, self.ipc[self.pipes[i].tree].clone());
            let len = [0u32, 1, 16, 4280, 65536, 1 << 20][self.rng.gen_range(0..6)];
            let body = read_req(id, len);
            let task = tokio::spawn(async move { t.raw(Command::Read, &body, len as usize).await });
            reads.push(Waiting { pipe: id, task });
        }
        if reads.is_empty() {
            return;
        }
        let ways = [
            "cancel",
            "cancel",
            "cancel-early",
            "wrong-async-id",
            "answer",
            "close",
            "close",
            "tree-disconnect",
            "logoff",
            "kill-one",
            "kill-all",
        ];
        let mut how = ways[self.rng.gen_range(0..ways.len())];
        if how == "answer" && !(fresh && reads.len() == 1) {
            how = "cancel";
        }
        if how == "kill-one" && self.s.channels().len() < 2 {
            how = "kill-all";
        }
        if how == "cancel-early" {
            // Sent, not yet answered: the CANCEL may overtake the READ.
            let t0 = std::time::Instant::now();
            while self.in_flight().len() < reads.len() && t0.elapsed() < Duration::from_secs(1) {
                tokio::task::yield_now().await;
            }
        } else {
            self.out.went_async += self.until_async(reads.len()).await;
        }
        let tree_of = |c: &Self, id: [u8; 16]| c.pipes.iter().find(|p| p.id == id).map(|p| p.tree);
        match how {
            "cancel" | "cancel-early" => {
                let by_async = self.rng.gen_bool(0.5);
                self.cancel_all(by_async)
            }
            "wrong-async-id" => {
                // Cancels nothing (3.3.5.16: no such AsyncId); the READs
                // are cancelled properly after.
                for (ch, mid, aid) in self.in_flight() {
                    let _ = ch.cancel(mid ^ 0x8000, aid.map(|a| a ^ 0x8000_0000).or(Some(7)));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                self.cancel_all(true);
            }
            "answer" => {
                let id = reads[0].pipe;
                let lsa = self.pipes.iter().any(|p| p.id == id && p.lsa);
                let tree = tree_of(self, id).unwrap_or(0);
                let body = write_req(id, &rpc::plain_bind(lsa));
                match self.send(tree, Command::Write, &body, 0).await {
                    Some(r) if r.status() == NtStatus::SUCCESS => {}
                    _ => self.cancel_all(true),
                }
            }
            "close" => {
                let mut ids: Vec<[u8; 16]> = reads.iter().map(|w| w.pipe).collect();
                ids.dedup();
                for id in ids {
                    let Some(k) = self.pipes.iter().position(|p| p.id == id) else {
                        continue;
                    };
                    let p = self.pipes.swap_remove(k);
                    self.send(p.tree, Command::Close, &close_req(p.id), 0).await;
                    self.closed.push(p.id);
                }
            }
            "tree-disconnect" => {
                for t in std::mem::take(&mut self.ipc) {
                    let _ = t.disconnect().await;
                }
                self.forget_all();
                let t = self.s.tree_connect(&ipc_unc()).await.expect("IPC$");
                self.ipc.push(t);
            }
            "logoff" => {
                if let Err(e) = self.s.logoff().await {
                    self.finding(format!("LOGOFF with READs waiting: {e}"));
                }
            }
            "kill-one" => {
                let chans = self.s.channels().list();
                chans[self.rng.gen_range(0..chans.len())].conn.kill();
                self.cancel_all(true);
            }
            _ => {
                for ch in self.s.channels().list() {
                    ch.conn.kill();
                }
            }
        }
        for w in reads {
            let r = match tokio::time::timeout(PATIENCE, w.task).await {
                Ok(r) => r.expect("READ task"),
                Err(_) => {
                    self.finding(format!("a READ waiting on a pipe was not ended by {how}"));
                    continue;
                }
            };
            let ending = match r {
                Ok(r) => {
                    *self.out.statuses.entry(r.header.status).or_default() += 1;
                    if !expected(how, r.status()) {
                        self.finding(format!("a READ ended by {how} got {:?}", r.status()));
                    }
                    format!("{how}: {:?}", r.status())
                }
                Err(Error::ConnectionLost(_)) if how.starts_with("kill") => format!("{how}: lost"),
                Err(e) => {
                    self.finding(format!("a READ ended by {how}: {e}"));
                    format!("{how}: {e}")
                }
            };
            *self.out.endings.entry(ending).or_default() += 1;
        }
        match how {
            "logoff" | "kill-all" => self.reconnect(false).await,
            "kill-one" => {
                let _ = self.s.bind_channel(self.srv.addr()).await;
            }
            _ => {}
        }
    }

    /// A READ of a pipe whose association a protocol error ended, once
    /// the fault is read: nothing can ever be answered on it, so the READ
    /// must not wait (the WRITE that would feed it is refused
    /// STATUS_PIPE_DISCONNECTED).
    pub(super) async fn read_disconnected(&mut self) {
        let Some(i) = self.open(true).await else {
            return;
        };
        let (id, tree, lsa) = (self.pipes[i].id, self.pipes[i].tree, self.pipes[i].lsa);
        for pdu in [rpc::plain_bind(lsa), rpc::redefining_alter()] {
            let body = transceive_req(id, &pdu, 4280);
            let Some(r) = self.send(tree, Command::Ioctl, &body, 4280).await else {
                return;
            };
            if r.status() != NtStatus::SUCCESS {
                return;
            }
        }
        let t = self.ipc[tree].clone();
        let body = read_req(id, 4280);
        let task = tokio::spawn(async move { t.raw(Command::Read, &body, 4280).await });
        let ending = match tokio::time::timeout(PATIENCE, task).await {
            Ok(Ok(Ok(r))) => {
                if r.status() != NtStatus::PIPE_DISCONNECTED {
                    let what = format!("a READ of a disconnected pipe got {:?}", r.status());
                    self.finding(what);
                }
                format!("disconnected: {:?}", r.status())
            }
            Ok(Ok(Err(e))) => {
                self.finding(format!("a READ of a disconnected pipe: {e}"));
                format!("disconnected: {e}")
            }
            Ok(Err(e)) => panic!("READ task: {e}"),
            Err(_) => {
                self.finding("a READ of a disconnected pipe waited".to_string());
                self.cancel_all(true);
                "disconnected: waited".to_string()
            }
        };
        *self.out.endings.entry(ending).or_default() += 1;
    }

    /// Close a pipe; sometimes one already closed.
    pub(super) async fn close_one(&mut self) {
        if self.pipes.is_empty() {
            return;
        }
        let p = self
            .pipes
            .swap_remove(self.rng.gen_range(0..self.pipes.len()));
        let id = if self.rng.gen_bool(0.1) && !self.closed.is_empty() {
            self.closed[0]
        } else {
            p.id
        };
        self.send(p.tree, Command::Close, &close_req(id), 0).await;
        self.closed.push(p.id);
    }
}
