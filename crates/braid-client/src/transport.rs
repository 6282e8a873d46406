//! One TCP connection: a writer task doing vectored writes, a reader task
//! that frames, decrypts and splits responses and hands each to the request
//! waiting for its MessageId (MS-SMB2 3.2.5.1), and the request path that
//! charges credits, signs or encrypts, and verifies what comes back.

use crate::credits::{Credits, MAX_CHARGE};
use crate::error::{Error, Result};
use crate::pool::BufPool;
use braid_smb_proto::crypto::{
    encrypt_frame_in_place, encrypt_frame_split, sign_in_place, sign_split, verify, Cipher,
    NonceGenerator, PreauthHash, SigningAlgorithm, SPLIT_SCRATCH_LEN, TRANSFORM_HEADER_LEN,
};
use braid_smb_proto::header::flags;
use braid_smb_proto::{Command, Header, Message, NtStatus, HEADER_LEN};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

mod reader;
mod writer;

use reader::reader;
use writer::writer;

/// Largest frame accepted from a server (8 MiB I/O plus headroom). Checked
/// before anything is allocated.
pub const MAX_FRAME: usize = 8 * 1024 * 1024 + 64 * 1024;
/// MessageId of unsolicited server messages (oplock/lease breaks).
const UNSOLICITED_MID: u64 = u64::MAX;

/// Encryption state of one session (shared by all its channels: MS-SMB2
/// 3.2.5.3.1, Session.EncryptionKey is per session).
pub struct Encryptor {
    pub cipher: Cipher,
    pub key: Vec<u8>,
    pub nonces: NonceGenerator,
}

/// Decryption key of one session, looked up by the reader by the
/// TRANSFORM_HEADER's SessionId (MS-SMB2 3.2.5.1.1.1).
pub struct Decryptor {
    pub cipher: Cipher,
    pub key: Vec<u8>,
}

/// How requests of one session are protected on one channel.
#[derive(Clone)]
pub struct Security {
    pub session_id: u64,
    /// Algorithm and Channel.SigningKey; `None` when not signing.
    pub sign: Option<(SigningAlgorithm, [u8; 16])>,
    /// Encrypt every request of the session (Session.EncryptData).
    pub encrypt: Option<Arc<Encryptor>>,
}

/// One response as received (decrypted if it came encrypted).
#[derive(Debug, Clone)]
pub struct Response {
    pub header: Header,
    /// The whole SMB2 message, header included (wire offsets resolve in it).
    pub msg: Bytes,
    pub encrypted: bool,
    /// Outcome of the signature check the reader already made with the
    /// key of the request (`None`: not checked there).
    pub signature_ok: Option<bool>,
}

impl Response {
    pub fn status(&self) -> NtStatus {
        NtStatus(self.header.status)
    }
    pub fn decode<M: Message>(&self) -> Result<M> {
        Ok(M::decode(&self.msg)?)
    }
    /// Error unless the status is SUCCESS (or one of `ok`).
    pub fn check(self, ok: &[NtStatus]) -> Result<Response> {
        let s = self.status();
        if s == NtStatus::SUCCESS || ok.contains(&s) {
            Ok(self)
        } else {
            Err(Error::Status {
                command: Command::from_u16(self.header.command).unwrap_or(Command::Echo),
                status: s,
            })
        }
    }
}

/// A request ready to go, short of MessageId, credits and signature.
pub struct Request<'a> {
    pub command: Command,
    pub session_id: u64,
    pub tree_id: u32,
    /// Extra header flags (e.g. REPLAY_OPERATION).
    pub flags: u32,
    /// 64 header bytes (filled in by `send`) followed by the body.
    pub body: Vec<u8>,
    /// Bytes sent right after `body` without copying them when the message
    /// is neither signed nor encrypted (WRITE data).
    pub payload: Bytes,
    /// Expected size of the response payload, for CreditCharge.
    pub response_size: usize,
    pub security: Option<&'a Security>,
    /// Verify the response signature with `security.sign` (SESSION_SETUP
    /// does its own checking).
    pub verify: bool,
    /// SMB 3.1.1 preauth hash to update with the request bytes as sent.
    pub preauth: Option<&'a mut PreauthHash>,
}

impl<'a> Request<'a> {
    pub fn new<M: Message>(command: Command, m: &M) -> Self {
        let mut body = vec![0u8; HEADER_LEN];
        m.encode(&mut body);
        Request {
            command,
            session_id: 0,
            tree_id: 0,
            flags: 0,
            body,
            payload: Bytes::new(),
            response_size: 0,
            security: None,
            verify: true,
            preauth: None,
        }
    }
}

struct Pending {
    tx: oneshot::Sender<Result<Response>>,
    charge: u16,
    /// Key the response's signature will be checked with: the reader
    /// checks it in place, while the frame is still mutable.
    sign: Option<(SigningAlgorithm, [u8; 16])>,
    /// The AsyncId of the interim response, once one came.
    async_id: Option<u64>,
}

#[derive(Default)]
struct Table {
    pending: HashMap<u64, Pending>,
    dead: Option<String>,
}

pub struct Transport {
    tx: mpsc::UnboundedSender<Vec<Bytes>>,
    table: Mutex<Table>,
    pub credits: Credits,
    decryptors: RwLock<HashMap<u64, Arc<Decryptor>>>,
    /// CreditCharge is meaningful (dialect > 2.0.2 with LARGE_MTU).
    pub large_mtu: AtomicBool,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    timeout: Duration,
    pub bytes_sent: AtomicU64,
    pub bytes_received: AtomicU64,
    pub requests: AtomicU64,
    /// Our end of the TCP connection.
    pub local_addr: Option<std::net::SocketAddr>,
    /// Buffers of large frames, received and sent.
    pool: Arc<BufPool>,
    /// Where unsolicited server messages (oplock and lease breaks) go once
    /// someone listens; dropped otherwise.
    unsolicited: Mutex<Option<mpsc::UnboundedSender<Response>>>,
}

impl Transport {
    /// Open the TCP connection (TCP_NODELAY) and start its tasks.
    pub async fn connect(
        addr: std::net::SocketAddr,
        credit_target: u16,
        timeout: Duration,
    ) -> Result<Arc<Transport>> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let local_addr = stream.local_addr().ok();
        let (rd, wr) = stream.into_split();
        let (tx, rx) = mpsc::unbounded_channel();
        let t = Arc::new(Transport {
            tx,
            table: Mutex::new(Table::default()),
            credits: Credits::new(credit_target),
            decryptors: RwLock::new(HashMap::new()),
            large_mtu: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
            timeout,
            bytes_sent: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            local_addr,
            pool: BufPool::new(),
            unsolicited: Mutex::new(None),
        });
        let r = tokio::spawn(reader(t.clone(), rd));
        let w = tokio::spawn(writer(Arc::downgrade(&t), wr, rx));
        lock(&t.tasks).extend([r, w]);
        Ok(t)
    }

    pub fn is_dead(&self) -> bool {
        lock(&self.table).dead.is_some()
    }

    pub fn outstanding(&self) -> usize {
        lock(&self.table).pending.len()
    }

    /// Mark the connection dead, fail every request in flight, stop the
    /// tasks (dropping both socket halves closes the socket).
    pub fn fail(&self, why: &str) {
        let drained: Vec<Pending> = {
            let mut t = lock(&self.table);
            if t.dead.is_none() {
                t.dead = Some(why.to_string());
            }
            t.pending.drain().map(|(_, p)| p).collect()
        };
        for p in drained {
            let _ = p.tx.send(Err(Error::ConnectionLost(why.to_string())));
        }
        self.credits.close();
        for h in lock(&self.tasks).drain(..) {
            h.abort();
        }
    }

    /// Receive the server's unsolicited messages (MS-SMB2 3.2.5.19: oplock
    /// and lease break notifications) from now on, decrypted. A second
    /// call takes them away from the first listener.
    pub fn listen_unsolicited(&self) -> mpsc::UnboundedReceiver<Response> {
        let (tx, rx) = mpsc::unbounded_channel();
        *lock(&self.unsolicited) = Some(tx);
        rx
    }

    pub fn add_decryptor(&self, session_id: u64, d: Arc<Decryptor>) {
        write_lock(&self.decryptors).insert(session_id, d);
    }

    /// Send one request and wait for its final response (interim
    /// STATUS_PENDING responses are absorbed by the reader).
    pub async fn send(&self, mut req: Request<'_>) -> Result<Response> {
        let large_mtu = self.large_mtu.load(Ordering::Relaxed);
        // MS-SMB2 3.2.4.1.5: CreditCharge = (max(send, expected response) - 1) / 65536 + 1.
        let size = req
            .payload
            .len()
            .max(req.response_size)
            .max(req.body.len() - HEADER_LEN);
        let charge: u16 = if large_mtu {
            (size.saturating_sub(1) / 65536 + 1).min(MAX_CHARGE as usize) as u16
        } else {
            1
        };
        let mid = self.credits.acquire(charge).await?;
        let credit_request = self.credits.request_for(charge);
        let sec = req.security;
        let h = RequestHeader {
            command: req.command,
            charge: if large_mtu { charge } else { 0 },
            credits: credit_request,
            flags: req.flags,
            next_command: 0,
            message_id: mid,
            tree_id: req.tree_id,
            session_id: req.session_id,
        };
        h.write(&mut req.body);

        // Build the frame: 4-byte Direct TCP transport header (MS-SMB2 2.1),
        // then the message; header+body and payload stay separate buffers
        // (signed where they lie) unless encryption needs them contiguous.
        let enc = sec.and_then(|s| s.encrypt.clone());
        let sign = sec.and_then(|s| s.sign);
        // The signature sent, which a server echoes on errors it cannot
        // sign (check_signature).
        let mut sent_signature = None;
        let parts: Vec<Bytes> = if let Some(e) = enc {
            // MS-SMB2 3.2.4.1.8 / 3.1.4.3: encrypted messages are not signed.
            // Header and body are copied into a pooled frame buffer; the
            // payload is encrypted from where it lies into the same frame.
            let msg_len = req.body.len() + req.payload.len();
            let n = 4 + TRANSFORM_HEADER_LEN + msg_len;
            let mut frame = self.pool.take_sized(n + SPLIT_SCRATCH_LEN);
            frame[..4].copy_from_slice(&frame_len(TRANSFORM_HEADER_LEN + msg_len)?);
            let body_at = 4 + TRANSFORM_HEADER_LEN;
            frame[body_at..body_at + req.body.len()].copy_from_slice(&req.body);
            if let Some(p) = req.preauth.as_deref_mut() {
                p.update_parts(&[&req.body, &req.payload]);
            }
            let nonce = e.nonces.next_nonce();
            encrypt_frame_split(
                e.cipher,
                &e.key,
                &nonce,
                req.session_id,
                &mut frame[4..],
                &req.payload,
            )?;
            vec![self.pool.freeze(frame, 0..n)]
        } else {
            if let Some((algo, key)) = sign {
                // MS-SMB2 3.2.4.1.1: the signature covers header, body and
                // payload; the payload is hashed where it lies, not copied.
                sign_split(algo, &key, &mut req.body, &req.payload)?;
                sent_signature = Some(signature_of(&req.body));
            }
            if let Some(p) = req.preauth.as_deref_mut() {
                p.update_parts(&[&req.body, &req.payload]);
            }
            let pre = frame_len(req.body.len() + req.payload.len())?;
            let mut v = vec![Bytes::copy_from_slice(&pre), Bytes::from(req.body)];
            if !req.payload.is_empty() {
                v.push(req.payload);
            }
            v
        };

        let (tx, rx) = oneshot::channel();
        {
            let mut t = lock(&self.table);
            if let Some(why) = &t.dead {
                return Err(Error::ConnectionLost(why.clone()));
            }
            t.pending.insert(
                mid,
                Pending {
                    tx,
                    charge,
                    sign: if req.verify { sign } else { None },
                    async_id: None,
                },
            );
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        if self.tx.send(parts).is_err() {
            self.fail("writer stopped");
        }
        let resp = match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok(r)) => r?,
            Ok(Err(_)) => return Err(Error::ConnectionLost("reader stopped".into())),
            Err(_) => {
                lock(&self.table).pending.remove(&mid);
                return Err(Error::Timeout);
            }
        };
        if req.verify {
            check_signature(sign, sent_signature, &resp)?;
        }
        Ok(resp)
    }

    /// Send `reqs` as one compounded chain (MS-SMB2 3.2.4.1.4): each
    /// message starts 8-byte aligned, NextCommand points to the next, the
    /// second and later carry SMB2_FLAGS_RELATED_OPERATIONS when `related`.
    /// Each message is signed on its own, padding included, or the whole
    /// chain sealed in one transform, as `reqs[0].security` says. Every
    /// message is charged one credit. The responses (or errors) come back
    /// in the order of `reqs`.
    pub async fn send_compound(
        &self,
        reqs: Vec<Request<'_>>,
        related: bool,
    ) -> Result<Vec<Result<Response>>> {
        let Some(sec) = reqs.first().map(|r| r.security) else {
            return Ok(Vec::new());
        };
        let sign = sec.and_then(|s| s.sign);
        let enc = sec.and_then(|s| s.encrypt.clone());
        let mut chain: Vec<u8> = Vec::new();
        let mut waits = Vec::with_capacity(reqs.len());
        let n = reqs.len();
        for (i, mut req) in reqs.into_iter().enumerate() {
            let mid = self.credits.acquire(1).await?;
            let mut msg = std::mem::take(&mut req.body);
            msg.extend_from_slice(&req.payload);
            let last = i + 1 == n;
            let len = if last {
                msg.len()
            } else {
                msg.len().next_multiple_of(8)
            };
            let mut flags = req.flags;
            if related && i > 0 {
                flags |= flags::RELATED_OPERATIONS;
            }
            let h = RequestHeader {
                command: req.command,
                charge: 1,
                credits: self.credits.request_for(1),
                flags,
                next_command: if last { 0 } else { len as u32 },
                message_id: mid,
                tree_id: req.tree_id,
                session_id: req.session_id,
            };
            h.write(&mut msg);
            msg.resize(len, 0);
            let mut sent_signature = None;
            if let (Some((algo, key)), None) = (sign, &enc) {
                sign_in_place(algo, &key, &mut msg)?;
                sent_signature = Some(signature_of(&msg));
            }
            chain.extend_from_slice(&msg);
            let (tx, rx) = oneshot::channel();
            {
                let mut t = lock(&self.table);
                if let Some(why) = &t.dead {
                    return Err(Error::ConnectionLost(why.clone()));
                }
                let verify = if req.verify && enc.is_none() {
                    sign
                } else {
                    None
                };
                t.pending.insert(
                    mid,
                    Pending {
                        tx,
                        charge: 1,
                        sign: verify,
                        async_id: None,
                    },
                );
            }
            waits.push((
                rx,
                req.verify.then_some(sign).flatten(),
                sent_signature,
                mid,
            ));
        }
        let frame = match &enc {
            Some(e) => {
                let session_id = sec.map(|s| s.session_id).unwrap_or_default();
                let mut frame = frame_len(TRANSFORM_HEADER_LEN + chain.len())?.to_vec();
                frame.resize(4 + TRANSFORM_HEADER_LEN, 0);
                frame.extend_from_slice(&chain);
                let nonce = e.nonces.next_nonce();
                encrypt_frame_in_place(e.cipher, &e.key, &nonce, session_id, &mut frame[4..])?;
                frame
            }
            None => {
                let mut frame = frame_len(chain.len())?.to_vec();
                frame.extend_from_slice(&chain);
                frame
            }
        };
        self.requests.fetch_add(n as u64, Ordering::Relaxed);
        if self.tx.send(vec![Bytes::from(frame)]).is_err() {
            self.fail("writer stopped");
        }
        let mut out = Vec::with_capacity(n);
        for (rx, sign, sent, mid) in waits {
            out.push(match tokio::time::timeout(self.timeout, rx).await {
                Ok(Ok(Ok(r))) => check_signature(sign, sent, &r).map(|_| r),
                Ok(Ok(Err(e))) => Err(e),
                Ok(Err(_)) => Err(Error::ConnectionLost("reader stopped".into())),
                Err(_) => {
                    lock(&self.table).pending.remove(&mid);
                    Err(Error::Timeout)
                }
            });
        }
        Ok(out)
    }

    /// The requests awaiting their final response: MessageId, and the
    /// AsyncId once an interim response gave one.
    pub fn in_flight(&self) -> Vec<(u64, Option<u64>)> {
        lock(&self.table)
            .pending
            .iter()
            .map(|(mid, p)| (*mid, p.async_id))
            .collect()
    }

    /// Send an SMB2 CANCEL (MS-SMB2 2.2.30, 3.2.4.24) for the request sent
    /// with `message_id`: by its AsyncId (SMB2_FLAGS_ASYNC_COMMAND) when
    /// given, else by MessageId. It takes no credit and gets no response
    /// of its own; the cancelled request's final response ends it. Signed
    /// or sealed as `sec` says.
    pub fn cancel(&self, message_id: u64, async_id: Option<u64>, sec: &Security) -> Result<()> {
        let h = Header {
            credit_charge: 0,
            status: 0,
            command: Command::Cancel as u16,
            credits: 0,
            flags: if async_id.is_some() {
                flags::ASYNC_COMMAND
            } else {
                0
            },
            next_command: 0,
            message_id,
            process_id: 0xFEFF,
            tree_id: 0,
            async_id: async_id.unwrap_or(0),
            session_id: sec.session_id,
            signature: [0; 16],
        };
        let mut msg = Vec::with_capacity(HEADER_LEN + 4);
        h.encode(&mut msg);
        msg.extend_from_slice(&[4, 0, 0, 0]);
        let frame = if let Some(e) = &sec.encrypt {
            let mut frame = frame_len(TRANSFORM_HEADER_LEN + msg.len())?.to_vec();
            frame.resize(4 + TRANSFORM_HEADER_LEN, 0);
            frame.extend_from_slice(&msg);
            let nonce = e.nonces.next_nonce();
            encrypt_frame_in_place(e.cipher, &e.key, &nonce, sec.session_id, &mut frame[4..])?;
            frame
        } else {
            if let Some((algo, key)) = sec.sign {
                sign_in_place(algo, &key, &mut msg)?;
            }
            let mut frame = frame_len(msg.len())?.to_vec();
            frame.extend_from_slice(&msg);
            frame
        };
        if lock(&self.table).dead.is_some() || self.tx.send(vec![Bytes::from(frame)]).is_err() {
            return Err(Error::ConnectionLost("connection is gone".into()));
        }
        Ok(())
    }

    /// The key a pending request wants its response verified with.
    fn verify_key(&self, mid: u64) -> Option<(SigningAlgorithm, [u8; 16])> {
        lock(&self.table).pending.get(&mid).and_then(|p| p.sign)
    }

    fn deliver(&self, resp: Response) {
        let h = &resp.header;
        self.credits.grant(h.credits);
        if h.message_id == UNSOLICITED_MID {
            let listener = lock(&self.unsolicited).clone();
            match listener {
                Some(tx) if tx.send(resp).is_ok() => {}
                _ => tracing::debug!("ignoring an unsolicited server message"),
            }
            return;
        }
        // MS-SMB2 3.2.5.1.5: an interim response; the final one follows.
        // Its AsyncId is kept for a CANCEL (3.2.4.24).
        if h.is_async() && NtStatus(h.status) == NtStatus::PENDING {
            if let Some(p) = lock(&self.table).pending.get_mut(&h.message_id) {
                p.async_id = Some(h.async_id);
            }
            return;
        }
        let p = lock(&self.table).pending.remove(&h.message_id);
        match p {
            Some(p) => {
                self.credits.complete(p.charge);
                let _ = p.tx.send(Ok(resp));
            }
            None => tracing::debug!("response to unknown MessageId {}", h.message_id),
        }
    }
}

/// The Signature field of a signed SMB2 message (MS-SMB2 2.2.1).
fn signature_of(msg: &[u8]) -> [u8; 16] {
    msg[48..64].try_into().expect("a whole SMB2 header")
}

/// MS-SMB2 3.2.5.1.3: skip for encrypted responses and interim ones;
/// otherwise a signing session's responses must carry a valid signature.
/// `sent` is the signature of the request, if it was signed.
pub fn check_signature(
    sign: Option<(SigningAlgorithm, [u8; 16])>,
    sent: Option<[u8; 16]>,
    r: &Response,
) -> Result<()> {
    let Some((algo, key)) = sign else {
        return Ok(());
    };
    if r.encrypted {
        return Ok(());
    }
    let status = r.status();
    // A server fails some requests before it has a key to sign with: a
    // related request whose chain lost its session (INVALID_PARAMETER), a
    // tree or file gone. Samba and Braid echo the request's signature
    // then, or leave zeros; Samba's client (smbXcli_base.c) reports the
    // status for these three.
    if matches!(
        status,
        NtStatus::INVALID_PARAMETER | NtStatus::NETWORK_NAME_DELETED | NtStatus::FILE_CLOSED
    ) && (r.header.signature == [0; 16] || Some(r.header.signature) == sent)
    {
        return Ok(());
    }
    // The session is gone on the server, and its key with it: Samba (and
    // Braid) answer a signed request with SMB2_FLAGS_SIGNED and the
    // request's own signature echoed, Windows leaves it unsigned. Either
    // way there is nothing to verify (Samba's client skips the check too).
    if status == NtStatus::USER_SESSION_DELETED {
        return Ok(());
    }
    if !r.header.is_signed() {
        // Left unsigned by Samba and Windows.
        if status == NtStatus::NETWORK_SESSION_EXPIRED {
            return Ok(());
        }
        return Err(Error::BadSignature(
            Command::from_u16(r.header.command).unwrap_or(Command::Echo),
            false,
        ));
    }
    if r.signature_ok.unwrap_or_else(|| verify(algo, &key, &r.msg)) {
        Ok(())
    } else {
        Err(Error::BadSignature(
            Command::from_u16(r.header.command).unwrap_or(Command::Echo),
            true,
        ))
    }
}

/// The fields of a request's SMB2 header (MS-SMB2 2.2.1.2) that the
/// client chooses; the rest are fixed.
struct RequestHeader {
    command: Command,
    charge: u16,
    credits: u16,
    flags: u32,
    next_command: u32,
    message_id: u64,
    tree_id: u32,
    session_id: u64,
}

impl RequestHeader {
    /// Write the header over the first 64 bytes of `msg`.
    fn write(&self, msg: &mut [u8]) {
        let h = Header {
            credit_charge: self.charge,
            status: 0,
            command: self.command as u16,
            credits: self.credits,
            flags: self.flags,
            next_command: self.next_command,
            message_id: self.message_id,
            process_id: 0xFEFF,
            tree_id: self.tree_id,
            async_id: 0,
            session_id: self.session_id,
            signature: [0; 16],
        };
        let mut hdr = Vec::with_capacity(HEADER_LEN);
        h.encode(&mut hdr);
        msg[..HEADER_LEN].copy_from_slice(&hdr);
    }
}

fn frame_len(n: usize) -> Result<[u8; 4]> {
    if n > 0x00FF_FFFF {
        return Err(Error::Invalid(format!("message of {n} bytes too large")));
    }
    Ok((n as u32).to_be_bytes())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn write_lock<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn flags_with(base: u32, replay: bool) -> u32 {
    if replay {
        base | flags::REPLAY_OPERATION
    } else {
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response of `status` that claims a signature it does not have.
    fn forged(status: NtStatus, signed: bool) -> Response {
        let header = Header {
            status: status.0,
            command: Command::Create as u16,
            flags: flags::SERVER_TO_REDIR | if signed { flags::SIGNED } else { 0 },
            signature: [0x5A; 16],
            ..Default::default()
        };
        let mut msg = Vec::new();
        header.encode(&mut msg);
        msg.extend([9, 0, 0, 0, 0, 0, 0, 0, 0]);
        Response {
            header,
            msg: Bytes::from(msg),
            encrypted: false,
            signature_ok: None,
        }
    }

    // MS-SMB2 3.3.5.2.4: a request naming a session the server no longer
    // has fails with USER_SESSION_DELETED, which no key can sign. Samba and
    // Braid echo the request's SIGNED flag and signature, Windows sends it
    // unsigned: both reach the caller as that status.
    #[test]
    fn a_deleted_session_is_reported_signed_or_not() {
        let key = Some((SigningAlgorithm::AesGmac, [7; 16]));
        for signed in [true, false] {
            let r = forged(NtStatus::USER_SESSION_DELETED, signed);
            assert!(check_signature(key, None, &r).is_ok(), "signed {signed}");
        }
        // Anything else with a bad or missing signature is refused.
        for status in [NtStatus::SUCCESS, NtStatus::ACCESS_DENIED] {
            for signed in [true, false] {
                let r = forged(status, signed);
                assert!(
                    matches!(check_signature(key, None, &r), Err(Error::BadSignature(_, s)) if s == signed),
                    "{status:?} signed {signed}"
                );
            }
        }
        // An expired session still has its key: only an unsigned answer
        // goes unchecked.
        assert!(
            check_signature(key, None, &forged(NtStatus::NETWORK_SESSION_EXPIRED, false)).is_ok()
        );
        assert!(
            check_signature(key, None, &forged(NtStatus::NETWORK_SESSION_EXPIRED, true)).is_err()
        );
    }

    // A related request after one that found its session deleted fails
    // with INVALID_PARAMETER (MS-SMB2 3.3.5.2.7.2), unsignable: the
    // request's own signature comes back, and is accepted for that status
    // (as for a tree or file gone), not for others.
    #[test]
    fn an_echoed_signature_passes_only_for_errors_no_key_can_sign() {
        let key = Some((SigningAlgorithm::AesGmac, [7; 16]));
        let sent = Some([0x5A; 16]);
        for status in [
            NtStatus::INVALID_PARAMETER,
            NtStatus::NETWORK_NAME_DELETED,
            NtStatus::FILE_CLOSED,
        ] {
            assert!(
                check_signature(key, sent, &forged(status, true)).is_ok(),
                "{status:?}"
            );
            // Another signature is checked, and fails.
            assert!(check_signature(key, Some([1; 16]), &forged(status, true)).is_err());
        }
        assert!(check_signature(key, sent, &forged(NtStatus::ACCESS_DENIED, true)).is_err());
        assert!(check_signature(key, sent, &forged(NtStatus::SUCCESS, true)).is_err());
    }
}
