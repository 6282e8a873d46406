//! Regression tests for what the fuzzer found: races between a CREATE that
//! waits on a break and what else happens to the file or the session
//! meanwhile.

use std::sync::Arc;
use std::time::Duration;

use braid_client::{ClientConfig, NtStatus, Tree};
use braid_smb_proto::Command;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::common;
use crate::common::ops::session_with;
use crate::requests::{Fuzzer, HDR};

/// A CREATE of `name` (MS-SMB2 2.2.13) asking for `oplock`: read and write
/// data, the given sharing, OPEN, a plain file, no create contexts.
fn open_request(name: &str, oplock: u8, share_access: u32) -> Vec<u8> {
    let mut fz = Fuzzer {
        rng: StdRng::seed_from_u64(0),
        open: Vec::new(),
        closed: Vec::new(),
        force_id: None,
    };
    let name: Vec<u16> = name.encode_utf16().collect();
    let mut b = fz.create_named(&name, true);
    b[3] = oplock;
    b[24..28].copy_from_slice(&0x0012_019Fu32.to_le_bytes());
    b[32..36].copy_from_slice(&share_access.to_le_bytes());
    b[36..40].copy_from_slice(&1u32.to_le_bytes());
    b[40..44].copy_from_slice(&0x40u32.to_le_bytes());
    b[48..56].copy_from_slice(&[0; 8]);
    b.truncate(56 + name.len() * 2);
    b
}

/// MS-SMB2 2.2.24.1: an oplock break acknowledgment.
fn oplock_ack(level: u8, file_id: [u8; 16]) -> Vec<u8> {
    let mut ack = 24u16.to_le_bytes().to_vec();
    ack.push(level);
    ack.extend([0u8; 5]);
    ack.extend(file_id);
    ack
}

/// Open `name` with a batch oplock; its FileId.
async fn open_batch(t: &Arc<Tree>, name: &str) -> [u8; 16] {
    let r = t
        .raw(Command::Create, &open_request(name, 9, 7), 4096)
        .await
        .expect("open");
    assert_eq!((r.header.status, r.msg[HDR + 2]), (0, 9), "a batch oplock");
    r.msg[HDR + 64..HDR + 80].try_into().unwrap()
}

fn patient() -> ClientConfig {
    ClientConfig {
        timeout: Duration::from_secs(15),
        ..Default::default()
    }
}

/// Two clients, and a file `name` the first holds with a batch oplock
/// while it listens for its breaks.
struct Scene {
    srv: common::Server,
    t1: Arc<Tree>,
    s2: Arc<braid_client::Session>,
    t2: Arc<Tree>,
    breaks: tokio::sync::mpsc::UnboundedReceiver<braid_client::Response>,
    file_id: [u8; 16],
}

/// The scene, or None when Braid is not built. With `stat_open`, the first
/// client also holds an open for attributes only, which keeps the file's
/// oplock state alive throughout without counting against a batch oplock.
async fn scene(name: &str, stat_open: bool) -> Option<Scene> {
    let srv = common::start_braid()?;
    let (s1, t1) = session_with(&srv, patient()).await;
    let (s2, t2) = session_with(&srv, patient()).await;
    t1.create_file(name)
        .await
        .expect("create")
        .close()
        .await
        .unwrap();
    let breaks = s1.primary().unwrap().breaks();
    if stat_open {
        let mut stat = open_request(name, 0, 7);
        stat[24..28].copy_from_slice(&0x0010_0080u32.to_le_bytes());
        let r = t1
            .raw(Command::Create, &stat, 4096)
            .await
            .expect("stat open");
        assert_eq!(r.status(), NtStatus::SUCCESS);
    }
    let file_id = open_batch(&t1, name).await;
    Some(Scene {
        srv,
        t1,
        s2,
        t2,
        breaks,
        file_id,
    })
}

impl Scene {
    /// The next break the first client gets (its OplockLevel).
    async fn next_break(&mut self) -> u8 {
        let note = tokio::time::timeout(Duration::from_secs(10), self.breaks.recv())
            .await
            .expect("a break within 10 s")
            .expect("break");
        note.msg[HDR + 2]
    }

    /// The second client's CREATE of `name`, running.
    fn second_opens(
        &self,
        name: &str,
        oplock: u8,
    ) -> tokio::task::JoinHandle<braid_client::Result<braid_client::Response>> {
        let (t2, req) = (self.t2.clone(), open_request(name, oplock, 7));
        tokio::spawn(async move { t2.raw(Command::Create, &req, 4096).await })
    }

    /// A third client's open of `name` sharing `share_access`: its status.
    async fn third_opens(&self, name: &str, share_access: u32) -> NtStatus {
        let (_s3, t3) = session_with(&self.srv, patient()).await;
        t3.raw(Command::Create, &open_request(name, 0, share_access), 4096)
            .await
            .expect("an open answered within 15 s")
            .status()
    }
}

/// MS-SMB2 3.3.5.22.1: an acknowledgment with a level the break did not
/// offer is refused, and ends the break at none all the same: the open
/// that waits on it goes on at once, not when the server's 35 s
/// acknowledgment timer runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_acknowledgment_still_ends_the_break() {
    let Some(mut sc) = scene("ack.txt", false).await else {
        return;
    };
    let second = sc.second_opens("ack.txt", 0);
    assert_eq!(sc.next_break().await, 1, "the break is to level II");
    // EXCLUSIVE is not a level a break to level II allows.
    let ack = oplock_ack(8, sc.file_id);
    let r = sc.t1.raw(Command::OplockBreak, &ack, 0).await.expect("ack");
    assert_eq!(r.status(), NtStatus::INVALID_OPLOCK_PROTOCOL);
    let r = second
        .await
        .unwrap()
        .expect("the second open is answered in 15 s");
    assert_eq!(r.status(), NtStatus::SUCCESS, "the second open succeeds");
    // The break is over: another acknowledgment finds none in progress.
    let ack = oplock_ack(0, sc.file_id);
    let r = sc.t1.raw(Command::OplockBreak, &ack, 0).await.expect("ack");
    assert_eq!(r.status(), NtStatus::INVALID_OPLOCK_PROTOCOL);
}

/// A CREATE waiting on a break whose session ends meanwhile (its client
/// went away) must not leave its open behind once the break is over. An
/// open added to a session table already emptied was never closed: its
/// batch oplock stayed, every later open of the file sent it a break no
/// connection could carry, and waited out the 35 s acknowledgment timer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_finished_after_its_session_ended_is_closed() {
    // The stat open stands for the fuzzer's other opens of the file, which
    // kept its oplock state alive.
    let Some(mut sc) = scene("late.txt", true).await else {
        return;
    };
    // The second client asks for a batch oplock too, and waits on the
    // first one's break.
    let waiting = sc.second_opens("late.txt", 9);
    sc.next_break().await;
    // The second client goes while its open waits.
    sc.s2.primary().unwrap().kill();
    assert!(waiting.await.unwrap().is_err(), "its connection is gone");
    // Give the server a moment to see the connection end (if it has not
    // yet, the open lands in the table before the session's opens are
    // closed, and the test cannot tell either way).
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The first client closes on the break: the waiting open goes on,
    // alone on the file, with its batch oplock.
    let close = close_request(sc.file_id);
    let r = sc.t1.raw(Command::Close, &close, 0).await.expect("close");
    assert_eq!(r.status(), NtStatus::SUCCESS);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Nothing of the second client's is left: a new open is not held up
    // by an oplock no one can be told to break.
    assert_eq!(sc.third_opens("late.txt", 7).await, NtStatus::SUCCESS);
}

/// The same for a tree disconnected while a CREATE on it waits on a
/// break: the open must not outlive its tree (the client can no longer
/// name it, and it would hold its share mode until the session ends).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_finished_after_its_tree_was_disconnected_is_closed() {
    let Some(mut sc) = scene("tree.txt", false).await else {
        return;
    };
    let waiting = sc.second_opens("tree.txt", 0);
    sc.next_break().await;
    sc.t2.disconnect().await.expect("tree disconnect");
    let close = close_request(sc.file_id);
    let r = sc.t1.raw(Command::Close, &close, 0).await.expect("close");
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let r = waiting
        .await
        .unwrap()
        .expect("the waiting open is answered");
    assert_eq!(r.status(), NtStatus::NETWORK_NAME_DELETED);
    // Nothing is left open on the file: an open that shares nothing gets
    // in at once.
    assert_eq!(
        sc.third_opens("tree.txt", 0).await,
        NtStatus::SUCCESS,
        "no open was left behind"
    );
}

/// MS-SMB2 2.2.15: a CLOSE.
fn close_request(file_id: [u8; 16]) -> Vec<u8> {
    let mut b = 24u16.to_le_bytes().to_vec();
    b.extend([0u8; 6]);
    b.extend(file_id);
    b
}

/// A pipe whose association a protocol error ended (MS-RPCE 3.3.1.5.1)
/// will never answer again: READs waiting on it when it ends, beyond the
/// ones that take its last answers, and READs after, end
/// STATUS_PIPE_DISCONNECTED instead of waiting until the client cancels
/// them (the pipe fuzzer's READs waited; seed 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_of_a_disconnected_pipe_does_not_wait() {
    use crate::pipes::{create_pipe, ipc_unc, read_req, write_req};
    let Some(srv) = common::start_braid() else {
        return;
    };
    let (s, _) = session_with(&srv, patient()).await;
    let t = s.tree_connect(&ipc_unc()).await.expect("IPC$");
    let r = t
        .raw(Command::Create, &create_pipe("srvsvc"), 4096)
        .await
        .expect("open srvsvc");
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let id: [u8; 16] = r.msg[HDR + 64..HDR + 80].try_into().unwrap();
    // Three READs wait on the empty pipe.
    let reads: Vec<_> = (0..3)
        .map(|_| {
            let t = t.clone();
            tokio::spawn(async move { t.raw(Command::Read, &read_req(id, 4280), 4280).await })
        })
        .collect();
    let chan = s.channels().list()[0].clone();
    for _ in 0..200 {
        if chan.in_flight().iter().filter(|f| f.1.is_some()).count() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A bind, and an alter_context that redefines its context 0: a
    // bind_ack, a fault, and the association is over.
    let mut pdus = crate::rpc::plain_bind(false);
    pdus.extend(crate::rpc::redefining_alter());
    let r = t
        .raw(Command::Write, &write_req(id, &pdus), 0)
        .await
        .expect("write");
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let mut statuses = Vec::new();
    for read in reads {
        let r = tokio::time::timeout(Duration::from_secs(5), read)
            .await
            .expect("every READ ends")
            .unwrap()
            .expect("READ answered");
        statuses.push(r.status());
    }
    statuses.sort_by_key(|s| s.0);
    assert_eq!(
        statuses,
        [
            NtStatus::SUCCESS,
            NtStatus::SUCCESS,
            NtStatus::PIPE_DISCONNECTED
        ]
    );
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        t.raw(Command::Read, &read_req(id, 4280), 4280),
    )
    .await
    .expect("a later READ does not wait")
    .expect("READ answered");
    assert_eq!(r.status(), NtStatus::PIPE_DISCONNECTED);
}
