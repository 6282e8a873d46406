//! One NFS connection: a reader that frames records (RFC 5531 11) and runs
//! each call in its own task, and a writer that sends replies in the order
//! they finish, several at a time with vectored writes.
//!
//! The same connection also carries the backchannel when the client bound
//! it for callbacks (RFC 8881 2.10.3.1): replies to our CB_COMPOUND calls
//! arrive here and are routed to the waiting caller by xid.

use std::collections::HashMap;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use braid_nfs_proto::record::{record_mark, RecordDecoder};
use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tracing::{debug, info};

use super::NfsState;

/// Replies waiting for the writer, per connection.
const WRITE_QUEUE: usize = 1024;

pub struct Connection {
    pub id: u64,
    pub peer: SocketAddr,
    /// The server's end, and when the connection was accepted (admin view).
    pub local: Option<SocketAddr>,
    pub connected_since: SystemTime,
    /// Calls received, and bytes received and sent (record marks included).
    pub requests: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    tx: mpsc::Sender<Vec<Bytes>>,
    /// Our callback calls on this connection, by xid, waiting for replies.
    callbacks: Mutex<HashMap<u32, oneshot::Sender<Bytes>>>,
    next_xid: AtomicU32,
    closed: AtomicBool,
}

impl Connection {
    /// Queue one record (its segments, without the record mark) for the
    /// writer. False when the connection is gone.
    pub async fn send_record(&self, mut segments: Vec<Bytes>) -> bool {
        let len: usize = segments.iter().map(|s| s.len()).sum();
        self.bytes_out.fetch_add(len as u64 + 4, Ordering::Relaxed);
        segments.insert(0, Bytes::copy_from_slice(&record_mark(len, true)));
        self.tx.send(segments).await.is_ok()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed) || self.tx.is_closed()
    }

    /// Send a call on the backchannel and wait for its reply (the reply
    /// body after the xid, undecoded). None when the connection is lost or
    /// the client does not answer in `timeout`.
    pub async fn call(
        &self,
        build: impl FnOnce(u32) -> Vec<Bytes>,
        timeout: Duration,
    ) -> Option<Bytes> {
        let xid = self.next_xid.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.callbacks.lock().unwrap().insert(xid, tx);
        if !self.send_record(build(xid)).await {
            self.callbacks.lock().unwrap().remove(&xid);
            return None;
        }
        let reply = tokio::time::timeout(timeout, rx).await;
        self.callbacks.lock().unwrap().remove(&xid);
        reply.ok()?.ok()
    }

    /// A connection with no socket behind it (unit tests): what is sent
    /// on it goes nowhere.
    #[cfg(test)]
    pub fn detached(id: u64, peer: SocketAddr) -> Arc<Connection> {
        let (tx, _rx) = mpsc::channel(1);
        Arc::new(Connection {
            id,
            peer,
            local: None,
            connected_since: SystemTime::now(),
            requests: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            tx,
            callbacks: Mutex::new(HashMap::new()),
            next_xid: AtomicU32::new(1),
            closed: AtomicBool::new(false),
        })
    }

    fn deliver_reply(&self, xid: u32, record: Bytes) {
        if let Some(tx) = self.callbacks.lock().unwrap().remove(&xid) {
            let _ = tx.send(record);
        }
    }
}

/// Serve one accepted connection until it closes.
pub async fn serve(state: Arc<NfsState>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().ok();
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Vec<Bytes>>(WRITE_QUEUE);
    let conn = Arc::new(Connection {
        id: state.next_connection_id(),
        peer,
        local,
        connected_since: SystemTime::now(),
        requests: AtomicU64::new(0),
        bytes_in: AtomicU64::new(0),
        bytes_out: AtomicU64::new(0),
        tx,
        callbacks: Mutex::new(HashMap::new()),
        next_xid: AtomicU32::new(rand::random::<u32>() | 1),
        closed: AtomicBool::new(false),
    });
    state.connections.insert(&conn);
    debug!(%peer, id = conn.id, "NFS connection");
    let writer = tokio::spawn(write_replies(wr, rx));

    let limits = state.limits.clone();
    let in_flight = Arc::new(Semaphore::new(limits.max_in_flight_per_connection));
    let mut decoder = RecordDecoder::new(limits.max_request() as usize);
    let mut buf = BytesMut::with_capacity(256 * 1024);
    let why = loop {
        // A record that has begun must arrive whole in record_timeout; an
        // idle connection may stay as long as the client's lease is kept.
        let read = if buf.is_empty() {
            tokio::time::timeout(state.lease_time * 4, rd.read_buf(&mut buf)).await
        } else {
            tokio::time::timeout(limits.record_timeout, rd.read_buf(&mut buf)).await
        };
        match read {
            Err(_) => break "timed out",
            Ok(Err(_)) => break "read error",
            Ok(Ok(0)) => break "closed by the client",
            Ok(Ok(n)) => {
                conn.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        let mut failed = None;
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(record)) => {
                    if record.len() >= 8 && (&record[4..8]).get_u32() == 1 {
                        // msg_type REPLY: an answer to one of our callbacks.
                        conn.deliver_reply((&record[..4]).get_u32(), record);
                        continue;
                    }
                    conn.requests.fetch_add(1, Ordering::Relaxed);
                    let Ok(permit) = in_flight.clone().acquire_owned().await else {
                        break;
                    };
                    let state = state.clone();
                    let conn = conn.clone();
                    tokio::spawn(async move {
                        if let Some(reply) = super::rpc::handle_call(&state, &conn, record).await {
                            conn.send_record(reply).await;
                        }
                        drop(permit);
                    });
                }
                Ok(None) => break,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            info!(%peer, "NFS connection closed: {e}");
            break "bad record";
        }
        if buf.capacity() - buf.len() < 64 * 1024 {
            buf.reserve(decoder.wanted(&buf).max(256 * 1024));
        }
    };
    debug!(%peer, id = conn.id, "NFS connection ends: {why}");
    conn.closed.store(true, Ordering::Relaxed);
    state.connections.remove(conn.id);
    state.sessions.connection_lost(conn.id);
    drop(conn);
    // The writer ends when the last sender (tasks still running) is gone.
    let _ = writer.await;
}

/// Up to this many replies go out in one vectored write.
const BATCH: usize = 64;

async fn write_replies(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::Receiver<Vec<Bytes>>,
) {
    let mut pending: Vec<Bytes> = Vec::new();
    while let Some(first) = rx.recv().await {
        pending.extend(first);
        let mut n = 1;
        while n < BATCH {
            match rx.try_recv() {
                Ok(more) => {
                    pending.extend(more);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        if write_all_vectored(&mut wr, &mut pending).await.is_err() {
            break;
        }
    }
    let _ = wr.shutdown().await;
}

async fn write_all_vectored(
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
    segments: &mut Vec<Bytes>,
) -> std::io::Result<()> {
    let mut start = 0;
    while start < segments.len() {
        let slices: Vec<IoSlice<'_>> = segments[start..]
            .iter()
            .take(512)
            .map(|s| IoSlice::new(s))
            .collect();
        let mut written = wr.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let seg = &mut segments[start];
            if written >= seg.len() {
                written -= seg.len();
                start += 1;
            } else {
                seg.advance(written);
                written = 0;
            }
        }
    }
    segments.clear();
    Ok(())
}
