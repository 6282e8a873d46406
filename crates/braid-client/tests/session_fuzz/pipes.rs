//! The pipe client: named pipes on IPC$ inside a signed session (now and
//! then a sealed one, with a second channel half of the time). It opens
//! srvsvc and lsarpc (and names no pipe has), up to past the server's 64
//! opens per session; writes the PDUs of rpc.rs, whole, damaged, cut in
//! fragments or left half sent, with WRITE or FSCTL_PIPE_TRANSCEIVE (small
//! and huge MaxOutputResponse) or in compounds with READs; and leaves
//! READs waiting on empty pipes (MS-SMB2 3.3.5.12 goes async) to end them
//! by CANCEL (by AsyncId or MessageId), by an answer, or by the pipe's
//! CLOSE, the tree's disconnect, the session's LOGOFF or the connection's
//! loss. Every READ must end, and end the way its ending says.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use braid_client::{ClientConfig, NtStatus, Response, Session, Tree};
use braid_smb_proto::Command;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common;
use crate::common::ops::session_with;
use crate::requests::HDR;
use crate::rpc;

mod positive;
mod waits;

pub use positive::still_served;

/// MS-FSCC 2.3.49 FSCTL_PIPE_TRANSCEIVE.
const TRANSCEIVE: u32 = 0x0011_C017;

/// One pipe open the server granted.
struct Pipe {
    id: [u8; 16],
    /// Which of the session's IPC$ trees it was opened on.
    tree: usize,
    lsa: bool,
    /// A bind_ack was read.
    bound: bool,
    call_id: u32,
    /// Policy handles LsarOpenPolicy2 gave.
    handles: Vec<[u8; 20]>,
    /// An authenticated bind's client half, waiting for the server's leg
    /// (or, with SPNEGO, for its last token).
    auth: Option<rpc::PendingAuth>,
    /// The per-message security of a context the client believes
    /// established: requests are signed or sealed with it.
    sec: Option<rpc::Secured>,
}

/// What the pipe client saw.
#[derive(Default)]
pub struct PipeOutcome {
    pub statuses: BTreeMap<u32, usize>,
    /// How the waiting READs ended, by the way they were ended.
    pub endings: BTreeMap<String, usize>,
    pub bind_acks: usize,
    pub responses: usize,
    /// Signed or sealed requests written, and answers that verified with
    /// the client's session security.
    pub secured_requests: usize,
    pub verified: usize,
    /// READs seen to go async.
    pub went_async: usize,
    /// Other PDUs read back, by type (faults, bind_naks).
    pub other_pdus: BTreeMap<u8, usize>,
    /// Requests that lost a connection the client did not drop, or were
    /// not answered in time, or READs that ended the wrong way.
    pub findings: Vec<String>,
}

struct PipeClient<'a> {
    srv: &'a common::Server,
    rng: StdRng,
    s: Arc<Session>,
    /// The session's IPC$ trees (two at times: a pipe used through the
    /// other one is FILE_CLOSED).
    ipc: Vec<Arc<Tree>>,
    pipes: Vec<Pipe>,
    closed: Vec<[u8; 16]>,
    out: PipeOutcome,
}

pub fn ipc_unc() -> String {
    "\\\\127.0.0.1\\IPC$".to_string()
}

/// A CREATE of pipe `name` (MS-SMB2 2.2.13): read and write, share read
/// and write, OPEN, no contexts.
pub fn create_pipe(name: &str) -> Vec<u8> {
    let name: Vec<u8> = name.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let mut b = 57u16.to_le_bytes().to_vec();
    b.extend([0, 0]);
    b.extend(2u32.to_le_bytes());
    b.extend([0u8; 16]);
    b.extend(0x0012_019Fu32.to_le_bytes());
    b.extend(0u32.to_le_bytes());
    b.extend(3u32.to_le_bytes());
    b.extend(1u32.to_le_bytes());
    b.extend(0u32.to_le_bytes());
    b.extend(((HDR + 56) as u16).to_le_bytes());
    b.extend((name.len() as u16).to_le_bytes());
    b.extend([0u8; 8]);
    b.extend(&name);
    if name.is_empty() {
        b.push(0);
    }
    b
}

/// MS-SMB2 2.2.19 READ of `len` bytes.
pub fn read_req(id: [u8; 16], len: u32) -> Vec<u8> {
    let mut b = 49u16.to_le_bytes().to_vec();
    b.extend([0x50, 0]);
    b.extend(len.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(id);
    b.extend([0u8; 17]);
    b
}

/// MS-SMB2 2.2.21 WRITE of `data`.
pub fn write_req(id: [u8; 16], data: &[u8]) -> Vec<u8> {
    let mut b = 49u16.to_le_bytes().to_vec();
    b.extend(((HDR + 48) as u16).to_le_bytes());
    b.extend((data.len() as u32).to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(id);
    b.extend([0u8; 16]);
    b.extend(data);
    if data.is_empty() {
        b.push(0);
    }
    b
}

/// MS-SMB2 2.2.31 IOCTL FSCTL_PIPE_TRANSCEIVE of `input`.
pub fn transceive_req(id: [u8; 16], input: &[u8], max_out: u32) -> Vec<u8> {
    let mut b = 57u16.to_le_bytes().to_vec();
    b.extend([0, 0]);
    b.extend(TRANSCEIVE.to_le_bytes());
    b.extend(id);
    let off = if input.is_empty() { 0 } else { HDR as u32 + 56 };
    b.extend(off.to_le_bytes());
    b.extend((input.len() as u32).to_le_bytes());
    b.extend([0u8; 12]);
    b.extend(max_out.to_le_bytes());
    b.extend(1u32.to_le_bytes());
    b.extend([0u8; 4]);
    b.extend(input);
    b
}

fn close_req(id: [u8; 16]) -> Vec<u8> {
    let mut b = 24u16.to_le_bytes().to_vec();
    b.extend([0u8; 6]);
    b.extend(id);
    b
}

/// The data of a READ response (MS-SMB2 2.2.20) or the output of an IOCTL
/// response (2.2.32).
pub fn payload(cmd: Command, r: &Response) -> &[u8] {
    let m = &r.msg[..];
    let (off, len) = match cmd {
        Command::Read if m.len() >= HDR + 8 => (
            m[HDR + 2] as usize,
            u32::from_le_bytes(m[HDR + 4..HDR + 8].try_into().unwrap()) as usize,
        ),
        Command::Ioctl if m.len() >= HDR + 40 => (
            u32::from_le_bytes(m[HDR + 32..HDR + 36].try_into().unwrap()) as usize,
            u32::from_le_bytes(m[HDR + 36..HDR + 40].try_into().unwrap()) as usize,
        ),
        _ => return &[],
    };
    m.get(off..off.saturating_add(len)).unwrap_or(&[])
}

fn config(encrypt: bool) -> ClientConfig {
    ClientConfig {
        timeout: Duration::from_secs(10),
        encrypt,
        ..Default::default()
    }
}

impl<'a> PipeClient<'a> {
    async fn new(srv: &'a common::Server, seed: u64) -> PipeClient<'a> {
        let rng = StdRng::seed_from_u64(seed);
        let (s, _) = session_with(srv, config(false)).await;
        let mut c = PipeClient {
            srv,
            rng,
            s,
            ipc: Vec::new(),
            pipes: Vec::new(),
            closed: Vec::new(),
            out: PipeOutcome::default(),
        };
        c.setup().await;
        c
    }

    /// A second channel half of the time, and one IPC$ tree (two now and
    /// then).
    async fn setup(&mut self) {
        if self.rng.gen_bool(0.5) {
            let _ = self.s.bind_channel(self.srv.addr()).await;
        }
        self.ipc.clear();
        for _ in 0..if self.rng.gen_bool(0.2) { 2 } else { 1 } {
            let t = self.s.tree_connect(&ipc_unc()).await.expect("IPC$");
            self.ipc.push(t);
        }
    }

    /// A new session (a quarter of them sealed), the old one's pipes gone.
    async fn reconnect(&mut self, logoff: bool) {
        if logoff {
            let _ = self.s.logoff().await;
        }
        for ch in self.s.channels().list() {
            ch.conn.kill();
        }
        self.forget_all();
        let encrypt = self.rng.gen_bool(0.25);
        self.s = session_with(self.srv, config(encrypt)).await.0;
        self.setup().await;
    }

    fn forget_all(&mut self) {
        let ids: Vec<[u8; 16]> = self.pipes.drain(..).map(|p| p.id).collect();
        self.closed.extend(ids);
        let excess = self.closed.len().saturating_sub(16);
        self.closed.drain(..excess);
    }

    fn finding(&mut self, what: String) {
        eprintln!("pipes: {what}");
        let tail = self.srv.log_tail();
        let lines: Vec<&str> = tail.lines().collect();
        eprintln!(
            "  server: {}",
            lines[lines.len().saturating_sub(3)..].join("\n  server: ")
        );
        self.out.findings.push(what);
    }

    /// One request on tree `tree`; None when it failed (a finding).
    async fn send(
        &mut self,
        tree: usize,
        cmd: Command,
        body: &[u8],
        size: usize,
    ) -> Option<Response> {
        let t = self.ipc[tree.min(self.ipc.len() - 1)].clone();
        match t.raw(cmd, body, size).await {
            Ok(r) => {
                *self.out.statuses.entry(r.header.status).or_default() += 1;
                Some(r)
            }
            Err(e) => {
                self.finding(format!(
                    "{cmd:?} {}: {e}",
                    hex::encode(&body[..body.len().min(96)])
                ));
                None
            }
        }
    }

    /// Open a pipe (or fail to: a name no pipe has, or past the cap).
    async fn open(&mut self, good: bool) -> Option<usize> {
        const BAD: &[&str] = &[
            "SRVSVC",
            "LSARPC",
            "lsass",
            "\\srvsvc",
            "PIPE\\srvsvc",
            "samr",
            "winreg",
            "",
            "srvsvc\\x",
            "srvsvc:$DATA",
            "..\\srvsvc",
            "nosuch",
        ];
        let lsa = self.rng.gen_bool(0.5);
        let name = if good || self.rng.gen_bool(0.7) {
            if lsa {
                "lsarpc"
            } else {
                "srvsvc"
            }
        } else {
            BAD[self.rng.gen_range(0..BAD.len())]
        };
        let tree = self.rng.gen_range(0..self.ipc.len());
        let r = self
            .send(tree, Command::Create, &create_pipe(name), 4096)
            .await?;
        if r.header.status != 0 || r.msg.len() < HDR + 80 {
            return None;
        }
        self.pipes.push(Pipe {
            id: r.msg[HDR + 64..HDR + 80].try_into().unwrap(),
            tree,
            lsa: name.to_lowercase().starts_with("ls"),
            bound: false,
            call_id: 1,
            handles: Vec::new(),
            auth: None,
            sec: None,
        });
        Some(self.pipes.len() - 1)
    }

    /// A pipe to use: one of the open ones, or a new one.
    async fn pick(&mut self) -> Option<usize> {
        if self.pipes.is_empty() || self.rng.gen_bool(0.1) {
            return self.open(true).await;
        }
        // Pipes with signing or sealing are few: they get a share of their own.
        let secured: Vec<usize> = (0..self.pipes.len())
            .filter(|&i| self.pipes[i].sec.is_some())
            .collect();
        if !secured.is_empty() && self.rng.gen_bool(0.4) {
            return Some(secured[self.rng.gen_range(0..secured.len())]);
        }
        Some(self.rng.gen_range(0..self.pipes.len()))
    }

    /// A FileId for a request on pipe `i`: mostly its own, sometimes one
    /// closed, random, or all ones (no related chain to stand for).
    fn file_id(&mut self, i: usize) -> [u8; 16] {
        match self.rng.gen_range(0..30) {
            0 if !self.closed.is_empty() => self.closed[self.rng.gen_range(0..self.closed.len())],
            1 => self.rng.gen(),
            2 => [0xFF; 16],
            _ => self.pipes[i].id,
        }
    }

    /// The next PDUs to write to pipe `i`.
    fn pdus(&mut self, i: usize) -> Vec<Vec<u8>> {
        let (user, password) = (common::USER, self.srv.password.clone());
        // File ids come from one server-wide counter: the newest pipe's
        // is close to the file clients' newest opens.
        let last_file_id = self
            .pipes
            .iter()
            .map(|p| u32::from_le_bytes(p.id[8..12].try_into().unwrap()))
            .max()
            .unwrap_or(0);
        let rng = &mut self.rng;
        let p = &mut self.pipes[i];
        p.call_id = if rng.gen_bool(0.9) {
            p.call_id.wrapping_add(1)
        } else {
            rng.gen()
        };
        let roll = rng.gen_range(0..100);
        let mut pdus = if !p.bound && roll < 60 || roll < 8 {
            if rng.gen_bool(0.35) {
                let (pdu, auth) = rpc::auth_bind(rng, p.lsa, p.bound, p.call_id, user, &password);
                p.auth = auth;
                vec![pdu]
            } else {
                let alter = p.bound && rng.gen_bool(0.8);
                vec![rpc::bind(rng, p.lsa, alter, p.call_id)]
            }
        } else if roll < 14 {
            vec![rpc::bind(rng, p.lsa, true, p.call_id)]
        } else if roll < 17 {
            // SHUTDOWN, CO_CANCEL, ORPHANED, a response, a type unknown.
            let kind = [17u8, 18, 19, 2, 3, 12, 99][rng.gen_range(0..7)];
            let flags = braid_smb_proto::dcerpc::pdu::pfc::FIRST_FRAG
                | braid_smb_proto::dcerpc::pdu::pfc::LAST_FRAG;
            vec![braid_smb_proto::dcerpc::pdu::encode_pdu(
                kind, flags, p.call_id, &[0; 8],
            )]
        } else {
            let handle = (!p.handles.is_empty() && rng.gen_bool(0.8))
                .then(|| p.handles[rng.gen_range(0..p.handles.len())]);
            let (ctx, opnum, stub) = rpc::call(rng, p.lsa, handle, last_file_id);
            match p.sec.as_mut() {
                Some(sec) if rng.gen_bool(0.9) => {
                    self.out.secured_requests += 1;
                    rpc::secured_request(rng, sec, ctx, opnum, &stub, p.call_id)
                }
                _ => rpc::request(rng, ctx, opnum, &stub, p.call_id),
            }
        };
        for pdu in pdus.iter_mut() {
            if rng.gen_bool(0.3) {
                rpc::damage(rng, pdu);
            }
        }
        pdus
    }

    /// Take note of what pipe `i` answered: a bind_ack binds it (and may
    /// carry an authentication leg to answer), an LsarOpenPolicy2 answer
    /// gives a handle.
    fn note_answer(&mut self, i: usize, data: &[u8]) -> Option<Vec<u8>> {
        let mut next = None;
        for (kind, pdu) in rpc::split(data) {
            let p = &mut self.pipes[i];
            match kind {
                12 | 15 => {
                    self.out.bind_acks += 1;
                    p.bound = true;
                    let token = rpc::answer_token(pdu);
                    match (token, p.auth.take()) {
                        (Some(token), Some(auth)) if auth.awaits_final() => {
                            p.sec = rpc::finish(auth, token)
                        }
                        (Some(token), Some(auth)) => {
                            let call_id = p.call_id;
                            let (leg, after) =
                                rpc::next_leg(&mut self.rng, auth, token, p.lsa, call_id);
                            match after {
                                rpc::AfterLeg::Nothing => {}
                                rpc::AfterLeg::Secured(sec) => p.sec = Some(*sec),
                                rpc::AfterLeg::Final(auth) => p.auth = Some(auth),
                            }
                            next = Some(leg);
                        }
                        _ => {}
                    }
                }
                2 => {
                    self.out.responses += 1;
                    let stub = match p.sec.as_mut() {
                        Some(sec) => match rpc::open_response(sec, pdu) {
                            Some(stub) => {
                                self.out.verified += 1;
                                stub
                            }
                            None => continue,
                        },
                        None => pdu.get(24..).unwrap_or_default().to_vec(),
                    };
                    // A policy handle is 20 bytes, then the NTSTATUS 0.
                    if p.lsa && stub.len() == 24 && stub[20..24] == [0; 4] && p.handles.len() < 8 {
                        p.handles.push(stub[..20].try_into().unwrap());
                    }
                }
                kind => *self.out.other_pdus.entry(kind).or_default() += 1,
            }
        }
        next
    }

    /// Write PDUs to a pipe and, mostly, read the answer: by WRITE and
    /// READ, by FSCTL_PIPE_TRANSCEIVE, or all in one compound.
    async fn exchange(&mut self) {
        let Some(i) = self.pick().await else { return };
        let mut pdus = self.pdus(i);
        if self.rng.gen_bool(0.3) && pdus.len() > 1 {
            // Several PDUs in one write.
            pdus = vec![pdus.concat()];
        }
        let tree = if self.rng.gen_bool(0.05) {
            self.rng.gen_range(0..2)
        } else {
            self.pipes[i].tree
        };
        let how = self.rng.gen_range(0..10);
        let mut answer = Vec::new();
        let mut more = how >= 4 && self.rng.gen_bool(0.8);
        for pdu in &pdus {
            let id = self.file_id(i);
            if how < 4 {
                let maxes = [0u32, 16, 24, 100, 1024, 4280, 65536, 1 << 20, u32::MAX];
                let max = maxes[self.rng.gen_range(0..maxes.len())];
                let body = transceive_req(id, pdu, max);
                let size = max.min(1 << 20) as usize;
                let Some(r) = self.send(tree, Command::Ioctl, &body, size).await else {
                    return;
                };
                answer.extend_from_slice(payload(Command::Ioctl, &r));
                more |= r.status() == NtStatus::BUFFER_OVERFLOW;
            } else {
                let body = write_req(id, pdu);
                if self.send(tree, Command::Write, &body, 0).await.is_none() {
                    return;
                }
            }
        }
        if more {
            // Read what is left of the answers: in a compound, where a
            // READ of an empty pipe does not wait (STATUS_PIPE_EMPTY).
            let id = self.pipes[i].id;
            let t = self.ipc[self.pipes[i].tree].clone();
            for _ in 0..8 {
                let len = [16u32, 100, 1024, 4280, 4280, 65536, 1 << 20][self.rng.gen_range(0..7)];
                let echo = vec![4u8, 0, 0, 0];
                let msgs = vec![(Command::Read, read_req(id, len)), (Command::Echo, echo)];
                let r = match t.raw_compound(&msgs, false).await {
                    Ok(mut v) => v.remove(0),
                    Err(e) => Err(e),
                };
                match r {
                    Ok(r) => {
                        *self.out.statuses.entry(r.header.status).or_default() += 1;
                        answer.extend_from_slice(payload(Command::Read, &r));
                        if ![NtStatus::SUCCESS, NtStatus::BUFFER_OVERFLOW].contains(&r.status()) {
                            break;
                        }
                    }
                    Err(e) => {
                        self.finding(format!("compound READ of a pipe: {e}"));
                        return;
                    }
                }
            }
        }
        if let Some(leg) = self.note_answer(i, &answer) {
            let id = self.pipes[i].id;
            let t = self.pipes[i].tree;
            let body = transceive_req(id, &leg, 4280);
            if let Some(r) = self.send(t, Command::Ioctl, &body, 4280).await {
                let data = payload(Command::Ioctl, &r).to_vec();
                self.note_answer(i, &data);
            }
        }
    }

    /// A related compound: CREATE of a pipe, WRITE of a bind, READ, and
    /// often CLOSE (MS-SMB2 3.3.5.2.7.2); or WRITE and READ of an open pipe,
    /// unrelated, or a transceive with a READ behind it.
    async fn compound(&mut self) {
        let all = [0xFFu8; 16];
        let lsa = self.rng.gen_bool(0.5);
        let mut bind = rpc::plain_bind(lsa);
        if self.rng.gen_bool(0.3) {
            rpc::damage(&mut self.rng, &mut bind);
        }
        let (msgs, related) = match self.rng.gen_range(0..3) {
            0 if !self.pipes.is_empty() => {
                let i = self.rng.gen_range(0..self.pipes.len());
                let id = self.pipes[i].id;
                let pdus = self.pdus(i);
                let mut msgs = vec![
                    (Command::Write, write_req(id, &pdus[0])),
                    (Command::Read, read_req(id, 4280)),
                ];
                if self.rng.gen_bool(0.5) {
                    msgs.push((Command::Ioctl, transceive_req(id, &bind, 4280)));
                    msgs.push((Command::Read, read_req(id, 16)));
                }
                (msgs, false)
            }
            _ => {
                let name = if lsa { "lsarpc" } else { "srvsvc" };
                let mut msgs = vec![(Command::Create, create_pipe(name))];
                if self.rng.gen_bool(0.5) {
                    msgs.push((Command::Write, write_req(all, &bind)));
                    msgs.push((Command::Read, read_req(all, 4280)));
                } else {
                    msgs.push((Command::Ioctl, transceive_req(all, &bind, 4280)));
                    msgs.push((Command::Read, read_req(all, 100)));
                }
                // Without the CLOSE the open stays, unknown to this client
                // (counted against the session's 64).
                if self.rng.gen_bool(0.8) {
                    msgs.push((Command::Close, close_req(all)));
                }
                (msgs, true)
            }
        };
        let t = self.ipc[0].clone();
        match t.raw_compound(&msgs, related).await {
            Ok(answers) => {
                for (a, (cmd, _)) in answers.into_iter().zip(&msgs) {
                    match a {
                        Ok(r) => *self.out.statuses.entry(r.header.status).or_default() += 1,
                        Err(e) => {
                            self.finding(format!("compound {cmd:?} of a pipe: {e}"));
                            return;
                        }
                    }
                }
            }
            Err(e) => self.finding(format!("compound of a pipe: {e}")),
        }
    }

    /// Open pipes until the server refuses (its cap is 64 per session),
    /// then close most of them again.
    async fn many(&mut self) {
        let mut refused = false;
        for _ in 0..72 {
            if self.open(true).await.is_none() {
                refused = true;
                break;
            }
        }
        if !refused {
            self.finding(format!(
                "{} pipe opens and no refusal (64 is the cap)",
                self.pipes.len()
            ));
        }
        while self.pipes.len() > 4 {
            let p = self
                .pipes
                .swap_remove(self.rng.gen_range(0..self.pipes.len()));
            self.send(p.tree, Command::Close, &close_req(p.id), 0).await;
            self.closed.push(p.id);
        }
    }
}

/// The pipe client's run: `iters` steps from `seed`.
pub async fn run(srv: &common::Server, seed: u64, iters: usize) -> PipeOutcome {
    let mut c = PipeClient::new(srv, seed).await;
    for _ in 0..iters {
        match c.rng.gen_range(0..100) {
            0..=54 => c.exchange().await,
            55..=69 => c.waits().await,
            70..=79 => c.compound().await,
            80..=89 => c.close_one().await,
            90 => c.many().await,
            91..=92 => {
                let _ = c.open(false).await;
            }
            93 => c.read_disconnected().await,
            94 => {
                // A second IPC$ tree, or one fewer.
                if c.ipc.len() < 2 {
                    let t = c.s.tree_connect(&ipc_unc()).await.expect("IPC$");
                    c.ipc.push(t);
                }
            }
            95..=96 => {
                let logoff = c.rng.gen_bool(0.5);
                c.reconnect(logoff).await;
            }
            _ => {
                // Lose one of two channels, bind another.
                let chans = c.s.channels().list();
                if chans.len() >= 2 {
                    chans[c.rng.gen_range(0..2)].conn.kill();
                    let _ = c.s.bind_channel(srv.addr()).await;
                }
            }
        }
    }
    let logoff = c.rng.gen_bool(0.5);
    if logoff {
        let _ = c.s.logoff().await;
    }
    c.out
}
