//! One TCP connection carrying ONC RPC records (RFC 5531 11): a writer
//! task sending queued records with vectored writes, a reader task
//! reassembling replies and handing each to the caller waiting on its xid.

use crate::Error;
use braid_nfs_proto::record::{record_mark, RecordDecoder};
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

type Waiter = oneshot::Sender<Result<Bytes, Error>>;

/// Traffic counters of a connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct Traffic {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub requests: u64,
}

/// A connection to one server address. Dropping it closes the socket.
pub struct Conn {
    tx: mpsc::UnboundedSender<Vec<Bytes>>,
    sh: Arc<Shared>,
    reader: tokio::task::AbortHandle,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
        self.sh.fail_all(&Error::Closed);
    }
}

/// What the reader and writer tasks share with the handle.
pub struct Shared {
    pending: Mutex<HashMap<u32, Waiter>>,
    outstanding: AtomicUsize,
    alive: AtomicBool,
    local: SocketAddr,
    remote: SocketAddr,
    sent: AtomicU64,
    received: AtomicU64,
    requests: AtomicU64,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Conn({} -> {})", self.sh.local, self.sh.remote)
    }
}

impl std::ops::Deref for Conn {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.sh
    }
}

/// Removes the xid's waiter and the outstanding count when a call ends,
/// answered or cancelled.
struct CallGuard<'a> {
    conn: &'a Shared,
    xid: u32,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.conn.outstanding.fetch_sub(1, Ordering::Relaxed);
        if let Ok(mut p) = self.conn.pending.lock() {
            p.remove(&self.xid);
        }
    }
}

impl Conn {
    /// Connects and starts the reader and writer tasks. `max_record`
    /// bounds a reply's size.
    pub async fn connect(addr: SocketAddr, max_record: usize) -> Result<Arc<Conn>, Error> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| Error::Io(format!("connecting to {addr}: {e}")))?;
        let _ = stream.set_nodelay(true);
        let local = stream.local_addr().map_err(|e| Error::Io(e.to_string()))?;
        let (rd, wr) = stream.into_split();
        let (tx, rx) = mpsc::unbounded_channel();
        let sh = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            outstanding: AtomicUsize::new(0),
            alive: AtomicBool::new(true),
            local,
            remote: addr,
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            requests: AtomicU64::new(0),
        });
        tokio::spawn(writer(sh.clone(), wr, rx));
        let reader = tokio::spawn(reader(sh.clone(), rd, max_record)).abort_handle();
        Ok(Arc::new(Conn { tx, sh, reader }))
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn remote_addr(&self) -> SocketAddr {
        self.remote
    }

    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    /// Calls sent and not yet answered.
    pub fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Relaxed)
    }

    pub fn traffic(&self) -> Traffic {
        Traffic {
            bytes_sent: self.sent.load(Ordering::Relaxed),
            bytes_received: self.received.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
        }
    }

    /// Sends one call (its XDR segments, without record mark) and waits
    /// for the reply record with the same xid.
    pub async fn call(&self, xid: u32, mut segs: Vec<Bytes>) -> Result<Bytes, Error> {
        let len: usize = segs.iter().map(|s| s.len()).sum();
        segs.insert(0, Bytes::copy_from_slice(&record_mark(len, true)));
        let (wtx, wrx) = oneshot::channel();
        self.outstanding.fetch_add(1, Ordering::Relaxed);
        let _guard = CallGuard {
            conn: &self.sh,
            xid,
        };
        self.pending
            .lock()
            .map_err(|_| Error::Closed)?
            .insert(xid, wtx);
        // Checked after registering: the reader fails every waiter it
        // finds when the connection dies.
        if !self.is_alive() {
            return Err(Error::Closed);
        }
        self.tx.send(segs).map_err(|_| Error::Closed)?;
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.sent.fetch_add(len as u64 + 4, Ordering::Relaxed);
        wrx.await.map_err(|_| Error::Closed)?
    }
}

impl Shared {
    fn fail_all(&self, e: &Error) {
        self.alive.store(false, Ordering::Relaxed);
        let drained: Vec<Waiter> = match self.pending.lock() {
            Ok(mut p) => p.drain().map(|(_, w)| w).collect(),
            Err(_) => Vec::new(),
        };
        for w in drained {
            let _ = w.send(Err(e.clone()));
        }
    }
}

/// Most records gathered into one vectored write.
const BATCH: usize = 64;

async fn writer(
    conn: Arc<Shared>,
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Vec<Bytes>>,
) {
    let mut segs: Vec<Bytes> = Vec::with_capacity(BATCH * 4);
    while let Some(first) = rx.recv().await {
        segs.clear();
        segs.extend(first);
        let mut n = 1;
        while n < BATCH {
            match rx.try_recv() {
                Ok(more) => {
                    segs.extend(more);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        if let Err(e) = write_all_vectored(&mut wr, &segs).await {
            conn.fail_all(&Error::Io(format!("writing to {}: {e}", conn.remote)));
            return;
        }
    }
    let _ = wr.shutdown().await;
}

async fn write_all_vectored(
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
    segs: &[Bytes],
) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = segs.iter().map(|s| IoSlice::new(s)).collect();
    let mut bufs: &mut [IoSlice<'_>] = &mut slices;
    while !bufs.is_empty() {
        let n = wr.write_vectored(bufs).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut bufs, n);
    }
    Ok(())
}

async fn reader(conn: Arc<Shared>, mut rd: tokio::net::tcp::OwnedReadHalf, max_record: usize) {
    let mut dec = RecordDecoder::new(max_record);
    let mut buf = BytesMut::with_capacity(1 << 20);
    let err = loop {
        match dec.decode(&mut buf) {
            Ok(Some(rec)) => {
                conn.received
                    .fetch_add(rec.len() as u64 + 4, Ordering::Relaxed);
                if rec.len() < 4 {
                    continue;
                }
                let xid = u32::from_be_bytes([rec[0], rec[1], rec[2], rec[3]]);
                let w = conn.pending.lock().ok().and_then(|mut p| p.remove(&xid));
                if let Some(w) = w {
                    let _ = w.send(Ok(rec));
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => break Error::Protocol(format!("from {}: {e}", conn.remote)),
        }
        let want = dec.wanted(&buf).max(64 << 10);
        if buf.capacity() - buf.len() < want {
            buf.reserve(want.max(256 << 10));
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) => break Error::Closed,
            Ok(_) => {}
            Err(e) => break Error::Io(format!("reading from {}: {e}", conn.remote)),
        }
    };
    conn.fail_all(&err);
}
