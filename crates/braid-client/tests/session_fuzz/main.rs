//! A hostile client inside a signed session. Thousands of requests of every
//! command that works on files, each built from a valid structure and then,
//! often, damaged: boundary values in every count, length and offset,
//! unknown information classes and control codes, file ids that were
//! closed or never given, names that try to climb out of the share, create
//! contexts cut short, tree connects to paths that name no share and with
//! the 3.1.1 extension pointing anywhere. The breaks the server sends are mostly answered as
//! MS-SMB2 asks, sometimes with a close, a wrong level or lease state, or
//! not at all. Half of the sessions have a second channel bound, and now
//! and then lose one of their two channels between requests and bind
//! another; now and then the tree is disconnected under the client's
//! opens and a new one connected, and half of the sessions end with a
//! LOGOFF. Beside the two file clients, a third works the named pipes on
//! IPC$ (pipes.rs): srvsvc and lsarpc opened (past the 64 a session may
//! hold), DCE/RPC PDUs from rpc.rs (binds, alter_contexts, authenticated
//! binds carried to AUTH3, requests of real opnums, often damaged or cut
//! in fragments) by WRITE, FSCTL_PIPE_TRANSCEIVE and compounds, and READs
//! left waiting on empty pipes, ended by CANCEL, an answer, CLOSE,
//! TREE_DISCONNECT, LOGOFF or a lost connection: every one must end, as
//! its ending says. Now and then it calls what an operator would:
//! NetrFileClose of ids near the newest, and NetrSessionDel of the fuzzing
//! user's sessions, so that the file clients' opens and sessions end under
//! them mid-run (a client told USER_SESSION_DELETED starts a new session). Whatever Braid answers, it must not panic, must not
//! write outside the share, and must still serve a fresh session that
//! reads back what it wrote, and whose srvsvc pipe lists the share.
//!
//! `BRAID_SESSION_FUZZ_ITERS` (default 3000) and `BRAID_SESSION_FUZZ_SEED`
//! choose the run; a failure prints the seed to replay it.

mod breaks;
#[path = "../common/mod.rs"]
mod common;
mod pipes;
mod races;
mod requests;
mod rpc;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use braid_client::{ClientConfig, Error, Session, Tree};
use braid_smb_proto::{Command, NtStatus};
use bytes::Bytes;
use common::ops::{random_bytes, session_with};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use requests::{Fuzzer, HDR};

async fn fixture(t: &Arc<Tree>) {
    t.mkdir("d0").await.expect("mkdir d0");
    for name in ["f0", "f1", "f2", "d0\\g0", "d0\\g1", "f0:s1"] {
        let f = t.create_file(name).await.expect(name);
        // Small enough for a stream in one ext4 xattr block.
        f.write(0, random_bytes(1000)).await.expect("write");
        f.close().await.expect("close");
    }
}

fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A short wait per request: what waits longer waits on a break left
/// unanswered, or on a lock.
fn fuzz_config(encrypt: bool) -> ClientConfig {
    ClientConfig {
        timeout: Duration::from_secs(2),
        encrypt,
        ..Default::default()
    }
}

/// One fuzzing client's session, its current tree, and the slot through
/// which its break answers find that tree.
struct Client {
    s: Arc<Session>,
    t: Arc<Tree>,
    slot: breaks::TreeSlot,
}

/// Drop the session's connection, and with it its opens and their
/// oplocks (a break left unanswered would hold up the next open, and a
/// request that timed out keeps its credits), and start a new session.
/// Half of the time the session logs off first, with whatever opens,
/// locks and breaks it has (MS-SMB2 3.3.5.6).
async fn reconnect(
    c: &Client,
    srv: &common::Server,
    fz: &mut Fuzzer,
    encrypt: bool,
    acks: &breaks::Tally,
) -> Client {
    if fz.rng.gen_bool(0.5) {
        let _ = c.s.logoff().await;
    }
    for ch in c.s.channels().list() {
        ch.conn.kill();
    }
    fz.open.clear();
    fz.closed.clear();
    connect(srv, fz, encrypt, acks).await
}

/// A new session whose breaks are answered (breaks.rs), half of the time
/// with a second channel bound to it.
async fn connect(
    srv: &common::Server,
    fz: &mut Fuzzer,
    encrypt: bool,
    acks: &breaks::Tally,
) -> Client {
    let (s, t) = session_and_tree(srv, encrypt).await;
    let slot = Arc::new(std::sync::Mutex::new(Arc::downgrade(&t)));
    breaks::answer(
        &s.primary().unwrap(),
        slot.clone(),
        fz.rng.gen(),
        acks.clone(),
    );
    let c = Client { s, t, slot };
    if fz.rng.gen_bool(0.5) {
        // A session ended meanwhile is found out by the next request.
        bind(srv, &c, fz, acks).await;
    }
    c
}

/// A session and its tree on a new connection. The pipe client's
/// NetrSessionDel may end the session before its tree is connected (or
/// while it is set up): then another.
async fn session_and_tree(srv: &common::Server, encrypt: bool) -> (Arc<Session>, Arc<Tree>) {
    for _ in 0..8 {
        let conn =
            braid_client::Connection::connect_with(srv.addr(), Arc::new(fuzz_config(encrypt)))
                .await
                .expect("connect");
        let s = match Session::setup(conn, common::USER, "", &srv.password).await {
            Ok(s) => s,
            Err(e) if session_ended(&e) => continue,
            Err(e) => panic!("session setup: {e}"),
        };
        match s.tree_connect(&srv.unc()).await {
            Ok(t) => return (s, t),
            Err(e) if session_ended(&e) => continue,
            Err(e) => panic!("tree connect: {e}"),
        }
    }
    panic!("eight sessions in a row were ended before their tree was connected")
}

/// Bind one more channel to the session (MS-SMB2 3.3.5.5.2), its breaks
/// answered too. False when the session was ended (NetrSessionDel).
async fn bind(srv: &common::Server, c: &Client, fz: &mut Fuzzer, acks: &breaks::Tally) -> bool {
    match c.s.bind_channel(srv.addr()).await {
        Ok(ch) => {
            breaks::answer(&ch, c.slot.clone(), fz.rng.gen(), acks.clone());
            true
        }
        Err(e) if session_ended(&e) => false,
        Err(e) => panic!("bind a channel: {e}"),
    }
}

fn session_ended(e: &Error) -> bool {
    matches!(e, Error::Status { status, .. } if *status == NtStatus::USER_SESSION_DELETED)
}

/// Lose one channel of a session that has two, between requests, and bind
/// a new one: the session, its opens and their locks live on through the
/// other channel (MS-SMB2 3.3.7.1), and breaks owed on the lost channel
/// go to the one left.
async fn churn_channel(
    srv: &common::Server,
    c: &Client,
    fz: &mut Fuzzer,
    acks: &breaks::Tally,
) -> bool {
    let chans = c.s.channels().list();
    let victim = &chans[fz.rng.gen_range(0..chans.len())];
    victim.conn.kill();
    bind(srv, c, fz, acks).await
}

/// Disconnect the tree, with its opens (MS-SMB2 3.3.5.8), and connect a
/// new one: the old FileIds are closed from now on. False when the
/// session was ended (NetrSessionDel).
async fn churn_tree(srv: &common::Server, c: &mut Client, fz: &mut Fuzzer) -> bool {
    let _ = c.t.disconnect().await;
    c.t = match c.s.tree_connect(&srv.unc()).await {
        Ok(t) => t,
        Err(e) if session_ended(&e) => return false,
        Err(e) => panic!("tree connect: {e}"),
    };
    *c.slot.lock().unwrap() = Arc::downgrade(&c.t);
    fz.closed.append(&mut fz.open);
    let excess = fz.closed.len().saturating_sub(32);
    fz.closed.drain(..excess);
    true
}

/// What one fuzzing client saw.
#[derive(Default)]
struct Outcome {
    statuses: BTreeMap<u32, usize>,
    /// Statuses of the break acknowledgments (and closes on a break).
    acks: breaks::Tally,
    timeouts: usize,
    drops: usize,
    /// Channels lost and bound again inside a session.
    churns: usize,
    /// Trees disconnected and connected again.
    tree_churns: usize,
    /// Sessions ended under the client (NetrSessionDel).
    sessions_ended: usize,
    spent: BTreeMap<String, Duration>,
}

/// One client's run: `iters` requests from `seed`, the first half in a
/// signed session and the second in an encrypted one.
async fn run(srv: &common::Server, who: &str, seed: u64, iters: usize) -> Outcome {
    let mut fz = Fuzzer {
        rng: StdRng::seed_from_u64(seed),
        open: Vec::new(),
        closed: Vec::new(),
        force_id: None,
    };
    let mut out = Outcome::default();
    let mut c = connect(srv, &mut fz, false, &out.acks).await;
    let Outcome {
        statuses,
        acks,
        timeouts,
        drops,
        churns,
        tree_churns,
        sessions_ended,
        spent,
    } = &mut out;
    let mut last = String::new();
    // The first half in a signed session, the second in an encrypted one
    // (every request sealed, the chains in one transform).
    let encrypted = |i: usize| i >= iters / 2;
    for i in 0..iters {
        if i == iters / 2 {
            c = reconnect(&c, srv, &mut fz, true, acks).await;
            assert!(c.s.is_encrypting());
        }
        if c.s.channels().len() >= 2 && fz.rng.gen_bool(0.01) {
            *churns += 1;
            if !churn_channel(srv, &c, &mut fz, acks).await {
                *sessions_ended += 1;
                c = reconnect(&c, srv, &mut fz, encrypted(i), acks).await;
            }
        }
        if fz.rng.gen_bool(0.005) {
            *tree_churns += 1;
            if !churn_tree(srv, &mut c, &mut fz).await {
                *sessions_ended += 1;
                c = reconnect(&c, srv, &mut fz, encrypted(i), acks).await;
            }
        }
        if fz.open.len() >= 4 && fz.rng.gen_bool(0.1) {
            let (msgs, related) = fz.compound();
            match c.t.raw_compound(&msgs, related).await {
                Ok(answers) => {
                    let mut lost = None;
                    for ((cmd, body), answer) in msgs.iter().zip(answers) {
                        match answer {
                            Ok(r) => {
                                *statuses.entry(r.header.status).or_default() += 1;
                                // The open a related chain made and closed
                                // again is not kept.
                                if *cmd == Command::Close && body.get(8..24) == Some(&[0xFF; 16]) {
                                    if r.header.status == 0 {
                                        fz.open.pop();
                                    }
                                } else {
                                    fz.note(*cmd, body, r.header.status, &r.msg);
                                }
                            }
                            Err(Error::Timeout) => lost = lost.or(Some(None)),
                            Err(e) => lost = Some(Some(e)),
                        }
                    }
                    match lost {
                        None => continue,
                        Some(None) => *timeouts += 1,
                        Some(Some(e)) => {
                            *drops += 1;
                            eprintln!("{who}: compound {i} (related {related}): {e}");
                            for (cmd, body) in &msgs {
                                eprintln!("  {cmd:?} {}", hex::encode(body));
                            }
                        }
                    }
                }
                Err(e) => {
                    *drops += 1;
                    eprintln!("{who}: compound {i}: {e}");
                }
            }
            c = reconnect(&c, srv, &mut fz, encrypted(i), acks).await;
            continue;
        }
        let (cmd, body, expect) = fz.next();
        let t0 = std::time::Instant::now();
        let res = c.t.raw(cmd, &body, expect).await;
        *spent.entry(format!("{cmd:?}")).or_default() += t0.elapsed();
        if t0.elapsed() > Duration::from_secs(1) {
            eprintln!("{who}: request {i} ({cmd:?}) took {:?}", t0.elapsed());
        }
        match res {
            Ok(r) => {
                *statuses.entry(r.header.status).or_default() += 1;
                fz.note(cmd, &body, r.header.status, &r.msg);
                last = format!("{cmd:?} {:#x} {}", r.header.status, hex::encode(&body));
                // The pipe client's NetrSessionDel ended this session.
                if r.header.status != NtStatus::USER_SESSION_DELETED.0 {
                    continue;
                }
                *sessions_ended += 1;
            }
            // A lock or open that waits (on a break, a conflicting lock)
            // past the client's patience is not a failure; its credits
            // stay with the server, so start over on a new connection.
            Err(Error::Timeout) => *timeouts += 1,
            // Every request here is a well-framed, signed message: the
            // server answers it with a status. Losing the connection is a
            // finding (counted and asserted on below).
            Err(e) => {
                *drops += 1;
                eprintln!(
                    "{who}: request {i} ({cmd:?}): {e}\n  {}",
                    hex::encode(&body)
                );
                eprintln!("  after {last}");
                let tail = srv.log_tail();
                let lines: Vec<&str> = tail.lines().collect();
                eprintln!(
                    "  server: {}",
                    lines[lines.len().saturating_sub(3)..].join("\n  server: ")
                );
            }
        }
        c = reconnect(&c, srv, &mut fz, encrypted(i), acks).await;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_in_a_signed_session() {
    let Some(srv) = common::start_braid() else {
        return;
    };
    let iters: usize = std::env::var("BRAID_SESSION_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let seed: u64 = std::env::var("BRAID_SESSION_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("session fuzz: {iters} requests, BRAID_SESSION_FUZZ_SEED={seed}");
    // Next to the share: nothing may appear here.
    let outside = srv.share_dir.parent().unwrap().to_path_buf();
    let outside_before = entries(&outside);

    let t = session_with(&srv, ClientConfig::default()).await.1;
    fixture(&t).await;
    // Two clients at once on the same files: opens, renames, locks and
    // deletes of one race those of the other; a third on IPC$'s pipes.
    let (a, b, p) = tokio::join!(
        run(&srv, "A", seed, iters / 2),
        run(
            &srv,
            "B",
            seed.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            iters - iters / 2
        ),
        pipes::run(&srv, seed ^ 0x5049_5045, iters / 10),
    );
    let mut statuses = a.statuses;
    for (k, v) in b.statuses {
        *statuses.entry(k).or_default() += v;
    }
    let (timeouts, drops) = (a.timeouts + b.timeouts, a.drops + b.drops);
    let mut acks = a.acks.lock().unwrap().clone();
    for (k, v) in b.acks.lock().unwrap().iter() {
        *acks.entry(*k).or_default() += v;
    }
    eprintln!("statuses {statuses:x?}; {timeouts} timeouts, {drops} connections lost");
    eprintln!(
        "answers to breaks {acks:x?}; {} channels lost and bound again, {} trees, {} sessions ended by NetrSessionDel",
        a.churns + b.churns,
        a.tree_churns + b.tree_churns,
        a.sessions_ended + b.sessions_ended
    );
    eprintln!("time by command (A) {:?}", a.spent);
    eprintln!(
        "pipes: statuses {:x?}; {} bind_acks, {} responses, {} READs went async, other PDUs {:?}; READs ended {:?}",
        p.statuses, p.bind_acks, p.responses, p.went_async, p.other_pdus, p.endings
    );
    eprintln!(
        "pipes: {} signed or sealed requests, {} answers verified",
        p.secured_requests, p.verified
    );

    let log = std::fs::read_to_string(srv.workdir.join("braid.log")).unwrap_or_default();
    assert!(
        !log.contains("panicked"),
        "seed {seed}: the server panicked:\n{}",
        srv.log_tail()
    );
    assert_eq!(drops, 0, "seed {seed}: requests lost their connection");
    assert!(
        p.findings.is_empty(),
        "seed {seed}: pipes: {:#?}",
        p.findings
    );
    // The pipe client did reach the endpoints.
    if iters >= 1000 {
        assert!(p.bind_acks > 0 && p.responses > 0 && p.went_async > 0);
    }
    assert_eq!(
        entries(&outside),
        outside_before,
        "seed {seed}: something was created beside the share"
    );
    // And a fresh session is served as before.
    let (_s2, t2) = session_with(&srv, ClientConfig::default()).await;
    let data = random_bytes(300_000);
    let f = t2.create_file("after.bin").await.expect("create after");
    let mut off = 0;
    for chunk in data.chunks(65536) {
        f.write(off, Bytes::copy_from_slice(chunk)).await.unwrap();
        off += chunk.len() as u64;
    }
    let back = f.read(0, data.len() as u32).await.expect("read after");
    assert_eq!(back, data, "seed {seed}: bytes read back differ");
    f.close().await.unwrap();
    pipes::still_served(&srv).await;
    // Once the clients are gone, nothing they left behind (a break owed
    // by a dropped connection, a lock, a durable open) holds up a look at
    // the fixture's files: each answers with a status at once.
    let quick = ClientConfig {
        timeout: Duration::from_secs(10),
        ..Default::default()
    };
    let (_s3, t3) = session_with(&srv, quick).await;
    for name in ["f0", "f1", "f2", "d0", "d0\\g0", "d0\\g1", "f0:s1"] {
        match t3.stat(name).await {
            Ok(_) | Err(Error::Status { .. }) => {}
            Err(e) => panic!("seed {seed}: {name}: {e}"),
        }
    }
}

/// The fuzzer's compounds are real ones: a related CREATE, WRITE, READ and
/// CLOSE chain (FileId all ones after the CREATE) is answered in full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_related_compound_is_answered_in_full() {
    let Some(srv) = common::start_braid() else {
        return;
    };
    let (_s, t) = session_with(&srv, ClientConfig::default()).await;
    let mut fz = Fuzzer {
        rng: StdRng::seed_from_u64(0),
        open: Vec::new(),
        closed: Vec::new(),
        force_id: None,
    };
    let name: Vec<u16> = "chain.txt".encode_utf16().collect();
    let mut create = fz.create_named(&name, true);
    // Read and write data, share all, OVERWRITE_IF, a plain file, no
    // oplock, no contexts.
    create[3] = 0;
    create[24..28].copy_from_slice(&0x0012_019Fu32.to_le_bytes());
    create[32..36].copy_from_slice(&7u32.to_le_bytes());
    create[36..40].copy_from_slice(&5u32.to_le_bytes());
    create[40..44].copy_from_slice(&0x40u32.to_le_bytes());
    create[48..56].copy_from_slice(&[0; 8]);
    create.truncate(56 + name.len() * 2);
    let all = [0xFFu8; 16];
    let mut write = 49u16.to_le_bytes().to_vec();
    write.extend(((HDR + 48) as u16).to_le_bytes());
    write.extend(5u32.to_le_bytes());
    write.extend(0u64.to_le_bytes());
    write.extend(all);
    write.extend([0u8; 16]);
    write.extend(b"hello");
    let mut read = 49u16.to_le_bytes().to_vec();
    read.extend([0x50, 0]);
    read.extend(5u32.to_le_bytes());
    read.extend(0u64.to_le_bytes());
    read.extend(all);
    read.extend([0u8; 17]);
    let mut close = 24u16.to_le_bytes().to_vec();
    close.extend([0u8; 6]);
    close.extend(all);
    let answers = t
        .raw_compound(
            &[
                (Command::Create, create),
                (Command::Write, write),
                (Command::Read, read),
                (Command::Close, close),
            ],
            true,
        )
        .await
        .expect("compound");
    let statuses: Vec<u32> = answers
        .iter()
        .map(|a| a.as_ref().expect("answer").header.status)
        .collect();
    assert_eq!(statuses, [0, 0, 0, 0]);
    // MS-SMB2 2.2.20: the data follows the 16-byte READ response.
    let r = answers[2].as_ref().unwrap();
    assert_eq!(&r.msg[HDR + 16..HDR + 21], b"hello");
    assert_eq!(
        std::fs::read(srv.share_dir.join("chain.txt")).unwrap(),
        b"hello"
    );
}
