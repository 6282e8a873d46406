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
use std::time::{Duration, Instant, SystemTime};

use braid_nfs_proto::record::{record_mark, RecordDecoder};
use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tracing::{debug, info};

use super::NfsState;

/// Replies waiting for the writer, per connection.
const WRITE_QUEUE: usize = 1024;

/// KiB of requests a connection may have running at once (besides the
/// count, NfsLimits::max_in_flight_per_connection), and of replies waiting
/// to be written: what one connection can make the server hold (issue 42:
/// a hostile client harms no other).
const REQUEST_BUDGET_KIB: u32 = 32 * 1024;
const REPLY_BUDGET_KIB: u32 = 32 * 1024;

/// A record and what it holds until it is written: its part of the reply
/// budget, and (a COMPOUND's reply) its place among its session's
/// requests in flight.
type Outgoing = (Vec<Bytes>, Held);

#[derive(Default)]
struct Held {
    _budget: Option<OwnedSemaphorePermit>,
    _in_flight: Option<crate::workload::InFlight>,
}

/// `len` bytes in whole KiB, at least 1 and at most the whole budget (a
/// reply larger than the budget still goes, alone).
fn kib(len: usize, budget: u32) -> u32 {
    ((len / 1024 + 1).min(budget as usize)) as u32
}

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
    tx: mpsc::Sender<Outgoing>,
    /// KiB of replies built and not yet written: a client that does not
    /// read its replies stops its own requests, and holds no more than this
    /// (REPLY_BUDGET_KIB).
    reply_budget: Arc<Semaphore>,
    /// Our callback calls on this connection, by xid, waiting for replies.
    callbacks: Mutex<HashMap<u32, oneshot::Sender<Bytes>>>,
    next_xid: AtomicU32,
    closed: AtomicBool,
}

impl Connection {
    /// Queue one record (its segments, without the record mark) for the
    /// writer. False when the connection is gone.
    pub async fn send_record(&self, segments: Vec<Bytes>) -> bool {
        self.queue(segments, Held::default()).await
    }

    /// Queue a reply once the connection's reply budget has room for it:
    /// the writer gives the room back when the reply is on the wire.
    async fn send_reply(&self, reply: super::rpc::Reply) -> bool {
        let segments = reply.segments;
        let len: usize = segments.iter().map(|s| s.len()).sum();
        let Ok(permit) = self
            .reply_budget
            .clone()
            .acquire_many_owned(kib(len, REPLY_BUDGET_KIB))
            .await
        else {
            return false;
        };
        let held = Held {
            _budget: Some(permit),
            _in_flight: reply.in_flight,
        };
        self.queue(segments, held).await
    }

    async fn queue(&self, mut segments: Vec<Bytes>, held: Held) -> bool {
        let len: usize = segments.iter().map(|s| s.len()).sum();
        self.bytes_out.fetch_add(len as u64 + 4, Ordering::Relaxed);
        segments.insert(0, Bytes::copy_from_slice(&record_mark(len, true)));
        self.tx.send((segments, held)).await.is_ok()
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
        self.callbacks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(xid, tx);
        if !self.send_record(build(xid)).await {
            self.callbacks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&xid);
            return None;
        }
        let reply = tokio::time::timeout(timeout, rx).await;
        self.callbacks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&xid);
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
            reply_budget: Arc::new(Semaphore::new(REPLY_BUDGET_KIB as usize)),
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
        if let Some(tx) = self
            .callbacks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&xid)
        {
            let _ = tx.send(record);
        }
    }
}

/// Serve one NFS connection until it closes, or until a graceful stop
/// (`stop.rs`): then reading stops, and it ends once the compounds it runs
/// are answered (within the stop's deadline).
pub async fn serve(
    state: Arc<NfsState>,
    stream: TcpStream,
    peer: SocketAddr,
    stop: &crate::stop::Stop,
) {
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().ok();
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Outgoing>(WRITE_QUEUE);
    let conn = Arc::new(Connection {
        id: state.next_connection_id(),
        peer,
        reply_budget: Arc::new(Semaphore::new(REPLY_BUDGET_KIB as usize)),
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
    let request_budget = Arc::new(Semaphore::new(REQUEST_BUDGET_KIB as usize));
    let mut decoder = RecordDecoder::new(limits.max_request() as usize);
    let mut buf = BytesMut::with_capacity(256 * 1024);
    // `buf` is a large WRITE's own buffer (`place_write`), and whether the
    // next read should take only a record's head.
    let mut placed = false;
    let mut peek_next = false;
    // When the record now arriving began: it must be whole within
    // record_timeout (a trickle of one byte a minute does not keep a
    // connection for ever).
    let mut record_began: Option<Instant> = None;
    let stopping = stop.watch();
    let why = loop {
        if conn.tx.is_closed() {
            break "the writer stopped";
        }
        let in_record = !buf.is_empty() || decoder.in_record();
        let wait = if in_record {
            let began = *record_began.get_or_insert_with(Instant::now);
            match limits.record_timeout.checked_sub(began.elapsed()) {
                Some(left) => left,
                None => break "a record took too long",
            }
        } else {
            record_began = None;
            // An idle connection may stay as long as a lease is kept.
            state.lease_time * 4
        };
        // A large record is read exactly to its end, and after one the
        // next read takes only a head: if that is a large WRITE too, its
        // rest is read straight into a buffer of its own (`place_write`)
        // without first passing through this one.
        let limit = match large_rest(&decoder, &buf) {
            Some(rest) => rest,
            None if peek_next => (RECORD_MARK + PEEK).saturating_sub(buf.len()).max(1),
            None => usize::MAX,
        };
        let mut limited = (&mut rd).take(limit as u64);
        let read = tokio::select! {
            biased;
            _ = stopping.cancelled() => break "the server is stopping",
            r = tokio::time::timeout(wait, limited.read_buf(&mut buf)) => r,
        };
        match read {
            // The connection a client keeps for callbacks may be idle for
            // as long as it likes.
            Err(_) if !in_record && state.sessions.is_back_bound(conn.id) => continue,
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
                    record_began = None;
                    placed = false;
                    peek_next = record.len() >= PLACE_MIN;
                    if record.len() >= 8 && (&record[4..8]).get_u32() == 1 {
                        // msg_type REPLY: an answer to one of our callbacks.
                        conn.deliver_reply((&record[..4]).get_u32(), record);
                        continue;
                    }
                    conn.requests.fetch_add(1, Ordering::Relaxed);
                    // Reading stops while the connection has its fill of
                    // requests running (by count and by size).
                    let Ok(permit) = in_flight.clone().acquire_owned().await else {
                        break;
                    };
                    let Ok(size) = request_budget
                        .clone()
                        .acquire_many_owned(kib(record.len(), REQUEST_BUDGET_KIB))
                        .await
                    else {
                        break;
                    };
                    let state = state.clone();
                    let conn = conn.clone();
                    tokio::spawn(async move {
                        let reply = super::rpc::handle_call(&state, &conn, record).await;
                        drop(size);
                        if let Some(reply) = reply {
                            conn.send_reply(reply).await;
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
        if !placed && !decoder.in_record() {
            match place_write(&buf, limits.max_request() as usize) {
                Placement::Placed(own) => {
                    buf = own;
                    placed = true;
                }
                Placement::NeedMore => {}
                Placement::No => peek_next = false,
            }
        }
        // A placed record's buffer has room for exactly the record: growing
        // it could move it off its alignment.
        let spare = buf.capacity() - buf.len();
        if !placed && spare < 64 * 1024 {
            buf.reserve(decoder.wanted(&buf).max(256 * 1024));
        }
    };
    debug!(%peer, id = conn.id, "NFS connection ends: {why}");
    conn.closed.store(true, Ordering::Relaxed);
    state.connections.remove(conn.id);
    state.sessions.connection_lost(conn.id);
    drop(conn);
    // The writer ends when the last sender (tasks still running) is gone;
    // a stop waits for that no longer than its deadline.
    let _ = tokio::select! {
        w = writer => w.ok(),
        _ = stop.deadline_passed(&stopping) => None,
    };
}

/// RFC 5531 11: the record mark before each fragment.
const RECORD_MARK: usize = 4;
/// Records at least this large are read to their end exactly, and WRITEs
/// among them get a buffer of their own with the data on a page: the size
/// from which braid-fs writes directly (`write.rs`).
const PLACE_MIN: usize = braid_fs::DIRECT_WRITE_MIN;
/// What is read of a record's head to find where its WRITE data begins: a
/// WRITE compound's head is a few hundred bytes (an AUTH_SYS credential is
/// at most 400, a file handle 128).
const PEEK: usize = 1024;
const PAGE: usize = 4096;

/// The bytes of the large single-fragment record `buf` begins with that
/// are still to come; None if it holds no such record, or all of it.
fn large_rest(decoder: &RecordDecoder, buf: &BytesMut) -> Option<usize> {
    if decoder.in_record() || buf.len() < RECORD_MARK {
        return None;
    }
    let (len, last) = mark(buf);
    let rest = (RECORD_MARK + len).checked_sub(buf.len())?;
    (last && len >= PLACE_MIN && rest > 0).then_some(rest)
}

fn mark(buf: &[u8]) -> (usize, bool) {
    let m = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    ((m & 0x7fff_ffff) as usize, m & 0x8000_0000 != 0)
}

enum Placement {
    /// The same bytes in a buffer with room for the whole record, placed so
    /// that the WRITE's data will begin on a page.
    Placed(BytesMut),
    /// Too little of the record's head is in to tell.
    NeedMore,
    /// Not the start of a large WRITE record (or already whole).
    No,
}

/// If `buf` holds the start of a large single-fragment record that is a
/// WRITE compound (braid-nfs-proto `write_peek`), a new buffer for the
/// whole record holding what arrived of it, placed so that the WRITE's data
/// lands on a page boundary: braid-fs can then write it with `O_DIRECT`
/// straight from where it was received (`ops/write.rs`). Costs one copy of
/// the bytes already in, which the reader keeps to a head (`PEEK`).
/// `max_record` bounds what is allocated (the decoder has refused a larger
/// record already; this does not rely on it).
fn place_write(buf: &BytesMut, max_record: usize) -> Placement {
    if buf.len() < RECORD_MARK {
        return Placement::NeedMore;
    }
    let (len, last) = mark(buf);
    if !last || len < PLACE_MIN || len > max_record || buf.len() >= RECORD_MARK + len {
        return Placement::No;
    }
    let head = &buf[RECORD_MARK..];
    let at = match braid_nfs_proto::write_peek::write_data_offset(head) {
        Some((at, data_len)) if at.saturating_add(data_len) <= len => at,
        Some(_) => return Placement::No,
        None if head.len() < PEEK => return Placement::NeedMore,
        None => return Placement::No,
    };
    let mut own = BytesMut::with_capacity(PAGE + RECORD_MARK + len);
    let data_at = own.as_ptr() as usize + RECORD_MARK + at;
    let pad = (PAGE - data_at % PAGE) % PAGE;
    own.resize(pad, 0);
    // The padding goes; the buffer keeps its place in the allocation.
    drop(own.split_to(pad));
    own.extend_from_slice(buf);
    Placement::Placed(own)
}

/// Up to this many replies go out in one vectored write.
const BATCH: usize = 64;

/// How long a write may make no progress before the connection is given up.
const WRITE_STALL: Duration = Duration::from_secs(60);

async fn write_replies(mut wr: tokio::net::tcp::OwnedWriteHalf, mut rx: mpsc::Receiver<Outgoing>) {
    let mut pending: Vec<Bytes> = Vec::new();
    // What the replies being written hold (reply budget, requests in
    // flight), let go once they are written.
    let mut held: Vec<Held> = Vec::new();
    while let Some((first, hold)) = rx.recv().await {
        pending.extend(first);
        held.push(hold);
        let mut n = 1;
        while n < BATCH {
            match rx.try_recv() {
                Ok((more, hold)) => {
                    pending.extend(more);
                    held.push(hold);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        if write_all_vectored(&mut wr, &mut pending).await.is_err() {
            break;
        }
        held.clear();
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
        // A client that stops reading its replies for this long loses its
        // connection (its budget would otherwise stay held for ever).
        let Ok(written) = tokio::time::timeout(WRITE_STALL, wr.write_vectored(&slices)).await
        else {
            return Err(std::io::ErrorKind::TimedOut.into());
        };
        let mut written = written?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use braid_nfs_proto::nfs4::*;
    use braid_nfs_proto::rpc::{encode_call, CallHeader, OpaqueAuth, AUTH_NONE};
    use braid_nfs_proto::xdr::{Xdr, XdrWriter};

    const MAX: usize = 4 << 20;

    /// A record (mark included) of a SEQUENCE, PUTFH, WRITE call carrying
    /// `data`, or a READ when `data` is None.
    fn record(data: Option<&[u8]>) -> Vec<u8> {
        let io = match data {
            Some(d) => nfs_argop4::OP_WRITE(WRITE4args {
                stateid: stateid4 {
                    seqid: 1,
                    other: [3; 12],
                },
                offset: 0,
                stable: UNSTABLE4,
                data: Bytes::copy_from_slice(d),
            }),
            None => nfs_argop4::OP_READ(READ4args {
                stateid: stateid4 {
                    seqid: 1,
                    other: [3; 12],
                },
                offset: 0,
                count: 1 << 20,
            }),
        };
        let mut w = XdrWriter::with_capacity(256);
        let none = OpaqueAuth {
            flavor: AUTH_NONE,
            body: Vec::new(),
        };
        encode_call(
            &mut w,
            &CallHeader {
                xid: 1,
                prog: braid_nfs_proto::rpc::NFS4_PROGRAM,
                vers: braid_nfs_proto::rpc::NFS_V4,
                proc_: 1,
                cred: none.clone(),
                verf: none,
            },
        );
        COMPOUND4args {
            tag: b"t".to_vec(),
            minorversion: 1,
            argarray: vec![
                nfs_argop4::OP_SEQUENCE(SEQUENCE4args {
                    sa_sessionid: [1; 16],
                    sa_sequenceid: 1,
                    sa_slotid: 0,
                    sa_highest_slotid: 0,
                    sa_cachethis: false,
                }),
                nfs_argop4::OP_PUTFH(PUTFH4args {
                    object: vec![2; 40],
                }),
                io,
            ],
        }
        .encode(&mut w);
        let body: Vec<u8> = w.into_segments().iter().flat_map(|s| s.to_vec()).collect();
        let mut rec = record_mark(body.len(), true).to_vec();
        rec.extend_from_slice(&body);
        rec
    }

    #[test]
    fn a_large_write_is_placed_with_its_data_on_a_page_and_decodes_whole() {
        let data: Vec<u8> = (0..PLACE_MIN * 2).map(|i| (i % 253) as u8).collect();
        let rec = record(Some(&data));
        let mut decoder = RecordDecoder::new(4 << 20);
        // Only the mark and part of the head: cannot tell yet.
        let mut buf = BytesMut::from(&rec[..40]);
        assert!(matches!(place_write(&buf, MAX), Placement::NeedMore));
        assert_eq!(large_rest(&decoder, &buf), Some(rec.len() - 40));
        // A head and a little of the data, as the reader's peek takes it.
        buf = BytesMut::from(&rec[..RECORD_MARK + PEEK]);
        let Placement::Placed(mut own) = place_write(&buf, MAX) else {
            panic!("a large WRITE is placed");
        };
        assert!(own.capacity() - own.len() >= rec.len() - own.len());
        own.extend_from_slice(&rec[RECORD_MARK + PEEK..]);
        let whole = decoder.decode(&mut own).unwrap().expect("the whole record");
        assert_eq!(whole.len(), rec.len() - RECORD_MARK);
        let (at, len) = braid_nfs_proto::write_peek::write_data_offset(&whole).unwrap();
        assert_eq!(&whole[at..at + len], &data[..]);
        assert_eq!(whole[at..].as_ptr() as usize % PAGE, 0);
    }

    #[test]
    fn small_whole_and_other_records_are_left_where_they_are() {
        // A small WRITE.
        let small = record(Some(&[7; 512]));
        assert!(matches!(
            place_write(&BytesMut::from(&small[..100]), MAX),
            Placement::No
        ));
        // A READ, with a (lying) large mark: not a write.
        let mut read = record(None);
        read[..4].copy_from_slice(&record_mark(PLACE_MIN * 4, true));
        read.resize(RECORD_MARK + PEEK, 0);
        assert!(matches!(
            place_write(&BytesMut::from(&read[..]), MAX),
            Placement::No
        ));
        // A record over the limit is never allocated for.
        let big = record(Some(&vec![1; PLACE_MIN]));
        let head = BytesMut::from(&big[..RECORD_MARK + PEEK]);
        assert!(matches!(place_write(&head, PLACE_MIN / 2), Placement::No));
        // A large WRITE already whole needs no placing.
        let whole = record(Some(&vec![1; PLACE_MIN]));
        let buf = BytesMut::from(&whole[..]);
        assert!(matches!(place_write(&buf, MAX), Placement::No));
        assert_eq!(large_rest(&RecordDecoder::new(4 << 20), &buf), None);
    }
}
