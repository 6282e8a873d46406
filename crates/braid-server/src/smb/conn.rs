//! One TCP connection: framing (MS-SMB2 2.1 direct TCP), the reader that
//! checks message ids and spawns a task per frame, and the writer that
//! sends responses in completion order with vectored writes.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use braid_smb_proto::crypto::{
    Cipher, DecryptStream, GmacVerifier, PreauthHash, SigningAlgorithm, TRANSFORM_HEADER_LEN,
};
use braid_smb_proto::header::HEADER_LEN;

use crate::smb::credits::CreditWindow;
use crate::smb::frame;
pub use crate::smb::order::{FileRequestOrder, NotifyOrder};
use crate::smb::tcp_ack::{AckCheck, AckTracker};
use crate::state::ServerState;

/// What NEGOTIATE settled (MS-SMB2 3.3.1.7 Connection.*).
#[derive(Debug, Clone)]
pub struct Negotiated {
    pub dialect: u16,
    pub client_guid: [u8; 16],
    pub client_security_mode: u16,
    pub client_capabilities: u32,
    pub client_dialects: Vec<u16>,
    pub server_capabilities: u32,
    pub server_security_mode: u16,
    pub signing_algorithm: SigningAlgorithm,
    pub cipher: Option<Cipher>,
}

/// A request that may complete later (blocking lock, change notify).
pub struct PendingRequest {
    pub async_id: Option<u64>,
    pub session_id: u64,
    pub cancel: CancellationToken,
}

/// Requests that may be cancelled, and CANCELs that came too early.
#[derive(Default)]
pub struct PendingTable {
    by_message_id: HashMap<u64, PendingRequest>,
    /// Message ids a CANCEL named before their request registered (the
    /// request is still being set up on another task): the request is
    /// cancelled as soon as it registers. Bounded: a CANCEL for a request
    /// that already finished leaves an id that never matches again.
    early_cancels: std::collections::VecDeque<u64>,
}

/// A connection's place for one async request (`Connection::take_async_slot`).
pub struct AsyncSlot<'a>(&'a AtomicUsize);

impl Drop for AsyncSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A request counted in `Connection::running` until dropped.
struct RunningRequest<'a>(&'a AtomicUsize);

impl Drop for RunningRequest<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Early CANCELs remembered per connection.
const EARLY_CANCELS: usize = 64;

/// One frame to send: parts written with one vectored write.
pub type OutFrame = Vec<Bytes>;

/// A frame for the writer, and who waits for the peer to acknowledge it.
struct Outgoing {
    parts: OutFrame,
    acked: Option<oneshot::Sender<bool>>,
    /// The request this frame answers stays in flight (`workload.rs`)
    /// until the frame is written.
    held: Option<crate::workload::InFlight>,
    /// The last frame of a graceful stop (no parts): the writer closes its
    /// half of the connection behind what it wrote, then says so here.
    last: Option<oneshot::Sender<()>>,
}

pub struct Connection {
    pub id: u64,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub server: Arc<ServerState>,
    /// The settings this connection was accepted with: a reload
    /// (`reload.rs`) changes what later connections negotiate, not this one.
    pub config: Arc<crate::config::ServerConfig>,
    out: mpsc::UnboundedSender<Outgoing>,
    pub negotiated: OnceLock<Negotiated>,
    /// MS-SMB2 3.3.1.7 Connection.PreauthIntegrityHashValue (3.1.1 only).
    pub preauth: Mutex<Option<PreauthHash>>,
    /// Set once the first NEGOTIATE was seen (even an SMB1 one).
    pub negotiate_started: Mutex<bool>,
    pub credits: Mutex<CreditWindow>,
    pub pending: Mutex<PendingTable>,
    pub notify_order: NotifyOrder,
    pub file_order: FileRequestOrder,
    next_async_id: AtomicU64,
    /// Requests answered STATUS_PENDING and not yet finished (bounded by
    /// `max_async_requests`).
    async_requests: AtomicUsize,
    /// Requests read and not yet finished (a graceful stop waits for them).
    running: AtomicUsize,
    pub sessions: Mutex<HashSet<u64>>,
    /// Sessions this connection is in the middle of binding to.
    pub binding: Mutex<HashSet<u64>>,
    pub closing: CancellationToken,
    pub connected_at: Instant,
    /// Wall-clock connect time, for the admin view.
    pub connected_since: std::time::SystemTime,
    /// Requests and bytes received and sent on this connection.
    pub requests_in: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Milliseconds after `connected_at` that the last request arrived.
    pub last_request_ms: AtomicU64,
}

impl Connection {
    /// How long since the last request arrived (or the connect).
    pub fn idle_for(&self) -> std::time::Duration {
        let last = std::time::Duration::from_millis(self.last_request_ms.load(Ordering::Relaxed));
        self.connected_at.elapsed().saturating_sub(last)
    }

    pub fn send(&self, frame: OutFrame) {
        self.queue(frame, None, None);
    }

    /// Send `frame`; `held` (the request it answers) is in flight until
    /// the frame is written.
    pub fn send_holding(&self, frame: OutFrame, held: Option<crate::workload::InFlight>) {
        self.queue(frame, None, held);
    }

    /// Send `frame` and learn whether the peer's TCP acknowledged it in
    /// time (false: the channel is gone, and has been closed).
    pub fn send_tracked(&self, frame: OutFrame) -> oneshot::Receiver<bool> {
        let (tx, rx) = oneshot::channel();
        self.queue(frame, Some(tx), None);
        rx
    }

    fn queue(
        &self,
        parts: OutFrame,
        acked: Option<oneshot::Sender<bool>>,
        held: Option<crate::workload::InFlight>,
    ) {
        let n: usize = parts.iter().map(|b| b.len()).sum();
        self.bytes_out.fetch_add(n as u64 + 4, Ordering::Relaxed);
        // A closed writer means the connection is going away; a tracked
        // frame's waiter then learns it (the sender is dropped).
        let _ = self.out.send(Outgoing {
            parts,
            acked,
            held,
            last: None,
        });
    }

    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.get()
    }

    pub fn dialect(&self) -> u16 {
        self.negotiated.get().map(|n| n.dialect).unwrap_or(0)
    }

    pub fn new_async_id(&self) -> u64 {
        self.next_async_id.fetch_add(1, Ordering::Relaxed)
    }

    /// MS-SMB2 3.3.4.2: take one of the connection's `max_async_requests`
    /// places for a request about to go async; None when all are taken.
    /// The place is given back when the slot is dropped.
    pub fn take_async_slot(&self) -> Option<AsyncSlot<'_>> {
        let max = self.config.max_async_requests;
        self.async_requests
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| AsyncSlot(&self.async_requests))
    }

    /// Requests of this connection waiting after an interim response.
    pub fn async_requests(&self) -> usize {
        self.async_requests.load(Ordering::Acquire)
    }

    pub fn register_pending(&self, message_id: u64, session_id: u64) -> CancellationToken {
        let cancel = self.closing.child_token();
        let mut pending = self.pending.lock().unwrap();
        if let Some(i) = pending.early_cancels.iter().position(|m| *m == message_id) {
            pending.early_cancels.remove(i);
            cancel.cancel();
        }
        pending.by_message_id.insert(
            message_id,
            PendingRequest {
                async_id: None,
                session_id,
                cancel: cancel.clone(),
            },
        );
        cancel
    }

    pub fn set_pending_async(&self, message_id: u64, async_id: u64) {
        if let Some(p) = self
            .pending
            .lock()
            .unwrap()
            .by_message_id
            .get_mut(&message_id)
        {
            p.async_id = Some(async_id);
        }
    }

    pub fn finish_pending(&self, message_id: u64) {
        self.pending
            .lock()
            .unwrap()
            .by_message_id
            .remove(&message_id);
    }

    /// MS-SMB2 3.3.5.16: cancel by async id, or by message id (clients
    /// also cancel requests that already went async by their message id).
    /// A client may send CANCEL right behind its request (smbtorture's
    /// notify tests do), before the request's task has registered it: such
    /// a message id is remembered and the request cancelled when it does.
    pub fn cancel(&self, message_id: u64, async_id: Option<u64>) {
        let mut pending = self.pending.lock().unwrap();
        let found = match async_id {
            Some(a) => pending
                .by_message_id
                .values()
                .find(|p| p.async_id == Some(a)),
            None => pending.by_message_id.get(&message_id),
        };
        match found {
            Some(p) => p.cancel.cancel(),
            None if async_id.is_none() => {
                if pending.early_cancels.len() == EARLY_CANCELS {
                    pending.early_cancels.pop_front();
                }
                pending.early_cancels.push_back(message_id);
            }
            None => {}
        }
    }

    /// Cancel pending requests of a session (logoff) — MS-SMB2 3.3.5.6.
    pub fn cancel_session_requests(&self, session_id: u64) {
        for p in self.pending.lock().unwrap().by_message_id.values() {
            if p.session_id == session_id {
                p.cancel.cancel();
            }
        }
    }
}

/// Bytes read from the socket at a time for a large frame: small enough for
/// a piece to stay in L2 until it is decrypted.
const RECV_PIECE: usize = 256 * 1024;
/// Frames from this size on are decrypted (AES-GCM transforms) or have
/// their signature checked (AES-GMAC-signed WRITEs) as they arrive; smaller
/// ones in one pass afterwards.
const STREAM_MIN: usize = 64 * 1024;

/// Serve one accepted TCP connection until it closes: its writer task,
/// then its reader loop (one frame at a time, each run in a task of its
/// own), then its teardown.
pub async fn serve_connection(server: Arc<ServerState>, stream: TcpStream) {
    let (conn, mut rd, wr, rx) = accept(&server, stream);
    let writer = tokio::spawn(write_loop(conn.id, conn.closing.clone(), wr, rx));
    let max_frame = conn.config.max_frame_len();
    let idle = conn.config.idle_timeout;
    // Until a session on this connection has authenticated, the whole
    // handshake must finish within `handshake_timeout` of the accept: a
    // peer that trickles bytes or opens endless unfinished sessions is cut
    // off.
    let mut authenticated = false;
    let stop = server.stop.watch();
    let mut stopping = false;
    loop {
        authenticated = authenticated || has_valid_session(&conn);
        let Some(timeout) = read_timeout(&conn, authenticated) else {
            debug!(conn = conn.id, "handshake deadline passed");
            break;
        };
        let mut len_buf = [0u8; 4];
        let read = tokio::select! {
            biased;
            _ = conn.closing.cancelled() => break,
            // A graceful stop (`stop.rs`): no new request is read.
            _ = stop.cancelled() => {
                stopping = true;
                break;
            }
            r = tokio::time::timeout(timeout, rd.read_exact(&mut len_buf)) => r,
        };
        match read {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => break,
            Err(_) => {
                debug!(conn = conn.id, "idle timeout");
                break;
            }
        }
        // MS-SMB2 2.1: a zero byte then a 24-bit big-endian length.
        if len_buf[0] != 0 {
            warn!(conn = conn.id, "not a session message; closing");
            break;
        }
        let len = u32::from_be_bytes(len_buf) as usize;
        if len > max_frame || len < 4 {
            warn!(conn = conn.id, len, "frame length out of bounds; closing");
            break;
        }
        conn.bytes_in.fetch_add(len as u64 + 4, Ordering::Relaxed);
        conn.requests_in.fetch_add(1, Ordering::Relaxed);
        let since_connect = conn.connected_at.elapsed().as_millis() as u64;
        conn.last_request_ms.store(since_connect, Ordering::Relaxed);
        // A frame begun before a graceful stop is read to its end and
        // run (a large WRITE), unless that takes beyond the stop's deadline.
        let read = tokio::select! {
            r = tokio::time::timeout(idle, read_body(&conn, &mut rd, len)) => r,
            _ = server.stop.deadline_passed(&stop) => break,
        };
        let Ok(Ok(body)) = read else {
            break;
        };
        if !run_frame(&conn, body) {
            break;
        }
    }
    if stopping {
        wind_down(&conn, &mut rd, server.stop.deadline()).await;
    }
    conn.closing.cancel();
    drop(rd);
    server.smb.connections.remove(&conn.id);
    server.metrics.connection_closed();
    teardown(&conn).await;
    writer.abort();
    debug!(conn = conn.id, "connection closed");
}

/// What the writer task takes frames from.
type OutQueue = mpsc::UnboundedReceiver<Outgoing>;

/// A new connection's state, registered with the server; its socket's two
/// halves and the queue its writer sends from.
fn accept(
    server: &Arc<ServerState>,
    stream: TcpStream,
) -> (Arc<Connection>, OwnedReadHalf, OwnedWriteHalf, OutQueue) {
    let peer = stream
        .peer_addr()
        .unwrap_or_else(|_| ([0, 0, 0, 0], 0).into());
    let local = stream
        .local_addr()
        .unwrap_or_else(|_| ([0, 0, 0, 0], 0).into());
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel::<Outgoing>();
    let config = server.config();
    let conn = Arc::new(Connection {
        id: server.smb.new_connection_id(),
        peer,
        local,
        server: server.clone(),
        config: config.clone(),
        out: tx,
        negotiated: OnceLock::new(),
        preauth: Mutex::new(None),
        negotiate_started: Mutex::new(false),
        credits: Mutex::new(CreditWindow::new(config.max_credits)),
        pending: Mutex::new(PendingTable::default()),
        notify_order: NotifyOrder::default(),
        file_order: FileRequestOrder::default(),
        next_async_id: AtomicU64::new(1),
        async_requests: AtomicUsize::new(0),
        running: AtomicUsize::new(0),
        sessions: Mutex::new(HashSet::new()),
        binding: Mutex::new(HashSet::new()),
        closing: CancellationToken::new(),
        connected_at: Instant::now(),
        connected_since: std::time::SystemTime::now(),
        requests_in: AtomicU64::new(0),
        bytes_in: AtomicU64::new(0),
        bytes_out: AtomicU64::new(0),
        last_request_ms: AtomicU64::new(0),
    });
    server
        .smb
        .connections
        .insert(conn.id, Arc::downgrade(&conn));
    server.metrics.connection_opened();
    debug!(conn = conn.id, %peer, "connection accepted");
    (conn, rd, wr, rx)
}

/// The writer task: frames from the queue to the socket, one vectored
/// write each, watching that the peer acknowledges them.
async fn write_loop(
    conn_id: u64,
    closing: CancellationToken,
    mut wr: OwnedWriteHalf,
    mut rx: OutQueue,
) {
    let mut acks = AckTracker::default();
    // When to look at the acknowledgments next; kept across frames, so
    // that a busy connection is checked too.
    let mut check_at: Option<tokio::time::Instant> = None;
    let last = loop {
        if check_at.is_none() {
            check_at = acks.next_check().map(|d| tokio::time::Instant::now() + d);
        }
        // Only a connection with a tracked frame waits on a timer.
        let next = match check_at {
            None => rx.recv().await,
            Some(at) => tokio::select! {
                m = rx.recv() => m,
                _ = tokio::time::sleep_until(at) => {
                    check_at = None;
                    if acks.check(wr.as_ref()) == AckCheck::TimedOut {
                        // No acknowledgment for several retransmission
                        // timeouts: the channel is dead (Samba drops it
                        // too). Closed with a reset, not a FIN: the FIN
                        // would wait behind the unacknowledged frame
                        // and never be sent, while a reset reaches a
                        // peer that still receives, which then fails
                        // what it has pending there and moves to its
                        // other channels (smbtorture
                        // smb2.multichannel.leases.test2 counts that
                        // failure), and the socket does not linger in
                        // FIN-WAIT-1 holding the unsent queue.
                        warn!(conn = conn_id, "peer stopped acknowledging; resetting the channel");
                        if let Err(e) = wr.as_ref().set_zero_linger() {
                            debug!(conn = conn_id, error = %e, "SO_LINGER");
                        }
                        break None;
                    }
                    continue;
                }
            },
        };
        let Some(Outgoing {
            parts,
            acked,
            held,
            last,
        }) = next
        else {
            break None;
        };
        if last.is_some() {
            break last;
        }
        let written = write_frame(&mut wr, &parts).await;
        drop(held); // the request it answers is no longer in flight
        match written {
            Ok(n) => acks.wrote(wr.as_ref(), n, acked),
            Err(_) => break None,
        }
    };
    acks.fail_all();
    closing.cancel();
    let _ = wr.shutdown().await;
    if let Some(last) = last {
        let _ = last.send(());
    }
}

/// Whether a session on `conn` has authenticated.
fn has_valid_session(conn: &Connection) -> bool {
    conn.sessions.lock().unwrap().iter().any(|id| {
        conn.server
            .smb
            .sessions
            .get(id)
            .is_some_and(|s| s.phase() == crate::smb::session::SessionPhase::Valid)
    })
}

/// How long the next frame may take to start arriving: the idle timeout,
/// or what is left of the handshake's (None: it passed).
fn read_timeout(conn: &Connection, authenticated: bool) -> Option<Duration> {
    let idle = conn.config.idle_timeout;
    if authenticated {
        return Some(idle);
    }
    let left = conn
        .config
        .handshake_timeout
        .checked_sub(conn.connected_at.elapsed())?;
    Some(left.min(idle))
}

/// A frame as read, with the decryption or the signature check of a large
/// one done as it arrived.
struct FrameBody {
    buf: Vec<u8>,
    /// Where the frame starts in `buf` (so that a WRITE's payload is
    /// page-aligned).
    start: usize,
    decrypting: Option<(DecryptStream, Arc<crate::smb::session::Session>)>,
    verifying: Option<(GmacVerifier, Vec<u8>)>,
}

/// Read a frame of `len` bytes (its length already read). Into
/// uninitialised capacity: zero-filling an 8 MiB WRITE frame first costs as
/// much as the copy from the socket. A large AES-GCM frame is decrypted
/// piece by piece as it arrives (each piece still in the CPU cache, and
/// while the peer still sends). A large frame starts `start` bytes in, so
/// that a WRITE's payload is page-aligned (frame::payload_pad).
async fn read_body(
    conn: &Connection,
    rd: &mut OwnedReadHalf,
    len: usize,
) -> std::io::Result<FrameBody> {
    let pad_room = if len >= STREAM_MIN {
        frame::PAYLOAD_ALIGN
    } else {
        0
    };
    let mut body = FrameBody {
        buf: Vec::with_capacity(len + pad_room),
        start: 0,
        decrypting: None,
        verifying: None,
    };
    let buf = &mut body.buf;
    if len >= STREAM_MIN {
        let mut head = [0u8; HEADER_LEN];
        rd.read_exact(&mut head).await?;
        body.start = frame::payload_pad(buf.as_ptr() as usize, &head);
        buf.resize(body.start, 0);
        buf.extend_from_slice(&head);
    }
    let start = body.start;
    let end = start + len;
    let mut limited = rd.take((end - buf.len()) as u64);
    let mut done = 0;
    while buf.len() < end {
        let room = (end - buf.len()).min(RECV_PIECE);
        let mut piece = (&mut limited).take(room as u64);
        if piece.read_buf(buf).await? == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        // Large frames: decide once the first 64 bytes are in.
        if done == 0 && len >= STREAM_MIN && buf.len() - start >= HEADER_LEN {
            let head = &buf[start..];
            body.decrypting = frame::start_decrypt(conn, &head[..TRANSFORM_HEADER_LEN], len);
            done = start + TRANSFORM_HEADER_LEN;
            if body.decrypting.is_none() {
                body.verifying = frame::start_verify(conn, &head[..HEADER_LEN]);
                done = start + HEADER_LEN;
            }
        }
        let bad = || std::io::Error::from(std::io::ErrorKind::InvalidData);
        if let Some((stream, _)) = body.decrypting.as_mut() {
            stream.update(&mut buf[done..]).map_err(|_| bad())?;
            done = buf.len();
        } else if let Some((verifier, _)) = body.verifying.as_mut() {
            verifier.update(&buf[done..]).map_err(|_| bad())?;
            done = buf.len();
        }
    }
    Ok(body)
}

/// Finish decrypting or verifying `body` and run it in a task of its own;
/// false when the connection must close.
fn run_frame(conn: &Arc<Connection>, body: FrameBody) -> bool {
    let FrameBody {
        buf,
        start,
        decrypting,
        verifying,
    } = body;
    let decrypted_by = match decrypting {
        Some((stream, session)) => match stream.finish() {
            Ok(()) => Some(session),
            Err(e) => {
                // 3.3.5.2.1.1: a frame that fails to decrypt drops the
                // connection.
                warn!(conn = conn.id, "dropping connection: decrypt failed: {e}");
                return false;
            }
        },
        None => None,
    };
    let pre_verified = verifying.map(|(verifier, key)| frame::PreVerified {
        key,
        valid: verifier.finish(),
    });
    match frame::accept_frame(conn, buf, start, decrypted_by, pre_verified) {
        Ok(Some(work)) => {
            let conn = conn.clone();
            conn.running.fetch_add(1, Ordering::AcqRel);
            tokio::spawn(async move {
                // Counted off when done, even by a panic.
                let _running = RunningRequest(&conn.running);
                if let Err(e) = frame::process(&conn, work).await {
                    debug!(conn = conn.id, "dropping connection: {e}");
                    conn.closing.cancel();
                }
            });
            true
        }
        Ok(None) => true,
        Err(e) => {
            warn!(conn = conn.id, "dropping connection: {e}");
            false
        }
    }
}

/// How often a stopping connection looks whether its requests finished.
const WIND_DOWN_POLL: Duration = Duration::from_millis(10);
/// How long a stopping connection waits for more bytes from its client
/// before it closes.
const LINGER: Duration = Duration::from_millis(200);

/// A graceful stop (`stop.rs`) of this connection, whose reader stopped:
/// the requests it runs finish and their responses are written, then the
/// connection is closed (the caller tears it down as a lost one). Requests
/// that wait on a client (answered STATUS_PENDING: a blocking lock, a
/// change notify) do not hold the stop; they end with the connection, as
/// on any loss. Nothing waits beyond `deadline`.
async fn wind_down(conn: &Connection, rd: &mut OwnedReadHalf, deadline: tokio::time::Instant) {
    let running = || conn.running.load(Ordering::Acquire);
    while running() > conn.async_requests() && !conn.closing.is_cancelled() {
        if tokio::time::Instant::now() >= deadline {
            warn!(
                conn = conn.id,
                running = running(),
                "graceful stop: requests still running at the deadline"
            );
            return;
        }
        tokio::time::sleep(WIND_DOWN_POLL).await;
    }
    let (last, written) = oneshot::channel();
    let _ = conn.out.send(Outgoing {
        parts: Vec::new(),
        acked: None,
        held: None,
        last: Some(last),
    });
    if tokio::time::timeout_at(deadline, written).await.is_err() {
        return;
    }
    // Our half is closed behind the responses. Whatever the client still
    // sends is read and dropped until it closes too: a socket closed with
    // bytes unread is reset, and a reset can discard responses the client
    // has not received yet.
    let mut sink = vec![0u8; 64 * 1024];
    loop {
        let wait = LINGER.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        match tokio::time::timeout(wait, rd.read(&mut sink)).await {
            Ok(Ok(n)) if n > 0 => continue,
            _ => break,
        }
    }
}

/// Write one frame; returns the bytes written, length prefix included.
async fn write_frame(
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
    parts: &[Bytes],
) -> std::io::Result<usize> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let len = (total as u32).to_be_bytes();
    let mut hdr = [0u8; 4];
    hdr[1..].copy_from_slice(&len[1..]);
    let mut slices: Vec<&[u8]> = Vec::with_capacity(parts.len() + 1);
    slices.push(&hdr);
    for p in parts {
        slices.push(p);
    }
    let mut idx = 0;
    let mut off = 0;
    while idx < slices.len() {
        let iov: Vec<std::io::IoSlice<'_>> =
            std::iter::once(std::io::IoSlice::new(&slices[idx][off..]))
                .chain(slices[idx + 1..].iter().map(|s| std::io::IoSlice::new(s)))
                .collect();
        let mut n = wr.write_vectored(&iov).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while idx < slices.len() && n > 0 {
            let left = slices[idx].len() - off;
            if n >= left {
                n -= left;
                idx += 1;
                off = 0;
            } else {
                off += n;
                n = 0;
            }
        }
    }
    Ok(total + 4)
}

/// The connection is gone (MS-SMB2 3.3.7.1): each of its sessions loses
/// this channel; its opens, locks and oplocks stay while another channel
/// lives, and a session with no channel left is torn down with its opens.
async fn teardown(conn: &Arc<Connection>) {
    let binding: Vec<u64> = conn.binding.lock().unwrap().drain().collect();
    for id in binding {
        if let Some(sess) = conn.server.smb.sessions.get(&id) {
            sess.binds.lock().unwrap().remove(&conn.id);
        }
    }
    let ids: Vec<u64> = conn.sessions.lock().unwrap().drain().collect();
    for id in ids {
        let Some(sess) = conn.server.smb.sessions.get(&id) else {
            continue;
        };
        let left = sess.remove_channel(conn.id);
        if left == 0 {
            conn.server.smb.sessions.remove(&id);
            crate::smb::durable::disconnect_session(&conn.server, &sess).await;
        } else {
            debug!(
                conn = conn.id,
                session = id,
                channels = left,
                "channel lost"
            );
        }
    }
}
