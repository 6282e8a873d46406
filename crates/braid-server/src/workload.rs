//! Per-session workload statistics for the dashboard and the advisor
//! (issue 46): requests in flight, I/O sizes, the read/write mix, the share
//! of metadata operations, files touched, sequential reads sent one at a
//! time, time throttled; and the top clients and files. Fed by both
//! front-ends next to `op_metrics` (SMB: `smb/frame.rs`, NFS:
//! `nfs/compound.rs`), read by the admin API.
//!
//! Everything is bounded: [`MAX_SESSIONS`] sessions (the least recently
//! active goes first), [`MAX_FILES_PER_SESSION`] files tracked per
//! session, [`TOP_FILES`] files counted (space-saving: a new file takes
//! the place of the least counted one and inherits its count, so the
//! counts are upper bounds and the heavy hitters are never lost).
//!
//! A session's entry outlives the session, so that the advice for a
//! workload that just ended (a `braid bench` run) can still be read.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use braid_advisor::{io_size_bucket, OpClass, Workload, IO_SIZE_BOUNDS, OP_CLASSES};

use crate::op_metrics::{OpRecord, Outcome, Protocol};

pub const MAX_SESSIONS: usize = 256;
pub const MAX_FILES_PER_SESSION: usize = 4096;
pub const TOP_FILES: usize = 256;
/// Operations on an open file counted in its session before they are
/// added to the top files (one global lock per this many, not per
/// operation); the rest is added when the file is closed.
pub const TOP_FILES_BATCH: u64 = 64;
/// The advisor's window.
pub const WINDOW: Duration = Duration::from_secs(60);
/// How often the window takes a snapshot.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
const SHARDS: usize = 16;
const NSIZES: usize = IO_SIZE_BOUNDS.len() + 1;

pub type SessionKey = (Protocol, u64);

/// The plain counters of one session (a point in time).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub arrivals: u64,
    pub in_flight_sum: u64,
    pub ops: [u64; OpClass::COUNT],
    pub errors: u64,
    pub io_sizes: [u64; NSIZES],
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub throttled_ops: u64,
    pub throttled_ns: u64,
    pub sequential_reads: u64,
    pub lone_reads: u64,
}

impl Counters {
    /// What happened between `base` and `self`.
    pub fn since(&self, base: &Counters) -> Counters {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        Counters {
            arrivals: d(self.arrivals, base.arrivals),
            in_flight_sum: d(self.in_flight_sum, base.in_flight_sum),
            ops: std::array::from_fn(|i| d(self.ops[i], base.ops[i])),
            errors: d(self.errors, base.errors),
            io_sizes: std::array::from_fn(|i| d(self.io_sizes[i], base.io_sizes[i])),
            bytes_read: d(self.bytes_read, base.bytes_read),
            bytes_written: d(self.bytes_written, base.bytes_written),
            throttled_ops: d(self.throttled_ops, base.throttled_ops),
            throttled_ns: d(self.throttled_ns, base.throttled_ns),
            sequential_reads: d(self.sequential_reads, base.sequential_reads),
            lone_reads: d(self.lone_reads, base.lone_reads),
        }
    }

    pub fn total_ops(&self) -> u64 {
        self.ops.iter().sum()
    }
}

#[derive(Default)]
struct FileTrack {
    /// Where the next sequential read of each file would begin.
    next_read: HashMap<u64, u64>,
    /// Display names of the files opened ("share\path"), and their
    /// operations not yet added to the top files.
    names: HashMap<u64, (Arc<str>, u64)>,
    touched: HashSet<u64>,
}

pub struct SessionWorkload {
    pub protocol: Protocol,
    pub id: u64,
    /// The client's IP address.
    pub client: String,
    pub first_seen: Instant,
    share: Mutex<Option<Arc<str>>>,
    /// Address of the share name last stored in `share`: an operation in
    /// the same share (a name borrowed from the same tree or export)
    /// takes no lock to learn it is.
    share_seen: AtomicUsize,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    arrivals: AtomicU64,
    in_flight_sum: AtomicU64,
    ops: [AtomicU64; OpClass::COUNT],
    errors: AtomicU64,
    io_sizes: [AtomicU64; NSIZES],
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    throttled_ops: AtomicU64,
    throttled_ns: AtomicU64,
    sequential_reads: AtomicU64,
    lone_reads: AtomicU64,
    /// Milliseconds since the table's epoch.
    last_active_ms: AtomicU64,
    files: Mutex<FileTrack>,
}

impl SessionWorkload {
    fn new(protocol: Protocol, id: u64, client: String, now: Instant) -> Self {
        SessionWorkload {
            protocol,
            id,
            client,
            first_seen: now,
            share: Mutex::new(None),
            share_seen: AtomicUsize::new(0),
            in_flight: AtomicU64::new(0),
            max_in_flight: AtomicU64::new(0),
            arrivals: AtomicU64::new(0),
            in_flight_sum: AtomicU64::new(0),
            ops: std::array::from_fn(|_| AtomicU64::new(0)),
            errors: AtomicU64::new(0),
            io_sizes: std::array::from_fn(|_| AtomicU64::new(0)),
            bytes_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            throttled_ops: AtomicU64::new(0),
            throttled_ns: AtomicU64::new(0),
            sequential_reads: AtomicU64::new(0),
            lone_reads: AtomicU64::new(0),
            last_active_ms: AtomicU64::new(0),
            files: Mutex::new(FileTrack::default()),
        }
    }

    pub fn counters(&self) -> Counters {
        Counters {
            arrivals: self.arrivals.load(Relaxed),
            in_flight_sum: self.in_flight_sum.load(Relaxed),
            ops: std::array::from_fn(|i| self.ops[i].load(Relaxed)),
            errors: self.errors.load(Relaxed),
            io_sizes: std::array::from_fn(|i| self.io_sizes[i].load(Relaxed)),
            bytes_read: self.bytes_read.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
            throttled_ops: self.throttled_ops.load(Relaxed),
            throttled_ns: self.throttled_ns.load(Relaxed),
            sequential_reads: self.sequential_reads.load(Relaxed),
            lone_reads: self.lone_reads.load(Relaxed),
        }
    }

    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Relaxed)
    }

    pub fn max_in_flight(&self) -> u64 {
        self.max_in_flight.load(Relaxed)
    }

    pub fn files_touched(&self) -> u64 {
        self.files.lock().unwrap().touched.len() as u64
    }

    /// The last share the session used.
    pub fn share(&self) -> Option<Arc<str>> {
        self.share.lock().unwrap().clone()
    }
}

/// A file an operation worked on.
#[derive(Debug, Clone, Copy)]
pub struct FileRef {
    /// Unique per open file within the session (SMB persistent file id,
    /// hash of the NFS file handle).
    pub key: u64,
    /// A read's offset and length (sequential-read detection).
    pub read: Option<(u64, u64)>,
}

/// One request in flight; dropping it ends it.
pub struct InFlight {
    table: Arc<WorkloadTable>,
    session: Arc<SessionWorkload>,
    /// Requests of the session in flight when this one arrived, itself
    /// included.
    at_arrival: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.session.in_flight.fetch_sub(1, Relaxed);
    }
}

impl InFlight {
    /// One operation of the request finished (NFS: one per operation of
    /// the COMPOUND).
    pub fn finish(&self, r: &OpRecord, file: Option<FileRef>) {
        let s = &self.session;
        s.ops[r.class as usize].fetch_add(1, Relaxed);
        if r.result == Outcome::Error {
            s.errors.fetch_add(1, Relaxed);
        }
        if !r.throttled.is_zero() {
            s.throttled_ops.fetch_add(1, Relaxed);
            s.throttled_ns
                .fetch_add(r.throttled.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
        }
        if let Some(name) = r.share {
            let at = name.as_ptr() as usize;
            if s.share_seen.load(Relaxed) != at {
                let mut share = s.share.lock().unwrap();
                if share.as_deref() != Some(name) {
                    *share = Some(name.into());
                }
                s.share_seen.store(at, Relaxed);
            }
        }
        let data = r.class.is_data() && r.result == Outcome::Success;
        if data {
            let size = match file.and_then(|f| f.read) {
                Some((_, len)) => len,
                None => r.data_bytes,
            };
            s.io_sizes[io_size_bucket(size.max(1))].fetch_add(1, Relaxed);
            if r.class == OpClass::Read {
                s.bytes_read.fetch_add(r.data_bytes, Relaxed);
                if self.at_arrival <= 1 {
                    s.lone_reads.fetch_add(1, Relaxed);
                }
            } else {
                s.bytes_written.fetch_add(r.data_bytes, Relaxed);
            }
        }
        s.last_active_ms.store(self.table.now_ms(), Relaxed);
        let Some(file) = file else {
            return;
        };
        let batch = {
            let mut f = s.files.lock().unwrap();
            if data && f.touched.len() < MAX_FILES_PER_SESSION {
                f.touched.insert(file.key);
            }
            if let Some((offset, len)) = file.read.filter(|_| data) {
                if f.next_read.get(&file.key) == Some(&offset) {
                    s.sequential_reads.fetch_add(1, Relaxed);
                }
                if f.next_read.len() >= MAX_FILES_PER_SESSION {
                    f.next_read.clear();
                }
                f.next_read.insert(file.key, offset.saturating_add(len));
            }
            match f.names.get_mut(&file.key) {
                Some((name, pending)) => {
                    *pending += 1;
                    (*pending >= TOP_FILES_BATCH).then(|| (name.clone(), std::mem::take(pending)))
                }
                None => None,
            }
        };
        if let Some((name, n)) = batch {
            self.table.top_files.bump_by(&name, n);
        }
    }

    /// The display name of a file just opened (counted once in the top
    /// files, and again by every later operation on it).
    pub fn name_file(&self, key: u64, name: impl FnOnce() -> String) {
        let (name, dropped) = {
            let mut f = self.session.files.lock().unwrap();
            let mut dropped = Vec::new();
            if f.names.len() >= MAX_FILES_PER_SESSION && !f.names.contains_key(&key) {
                dropped = f.names.drain().map(|(_, v)| v).collect();
            }
            let name = f
                .names
                .entry(key)
                .or_insert_with(|| (name().into(), 0))
                .0
                .clone();
            (name, dropped)
        };
        for (n, pending) in dropped {
            self.table.top_files.bump_by(&n, pending);
        }
        self.table.top_files.bump_by(&name, 1);
    }

    /// The file's open ended: what it has not yet added to the top files
    /// goes there now.
    pub fn forget_file(&self, key: u64) {
        let named = {
            let mut f = self.session.files.lock().unwrap();
            f.next_read.remove(&key);
            f.names.remove(&key)
        };
        if let Some((name, pending)) = named {
            self.table.top_files.bump_by(&name, pending);
        }
    }
}

/// The most operated-on files, bounded (space-saving).
#[derive(Default)]
pub struct TopFiles {
    counts: Mutex<HashMap<Arc<str>, u64>>,
}

impl TopFiles {
    pub fn bump(&self, name: &Arc<str>) {
        self.bump_by(name, 1);
    }

    /// `by` operations on `name` (nothing for 0).
    pub fn bump_by(&self, name: &Arc<str>, by: u64) {
        if by == 0 {
            return;
        }
        let mut m = self.counts.lock().unwrap();
        if let Some(n) = m.get_mut(name) {
            *n += by;
            return;
        }
        let mut start = by;
        if m.len() >= TOP_FILES {
            if let Some((k, n)) = m
                .iter()
                .min_by_key(|(_, n)| **n)
                .map(|(k, n)| (k.clone(), *n))
            {
                m.remove(&k);
                start = n + by;
            }
        }
        m.insert(name.clone(), start);
    }

    /// The `n` most counted, most first.
    pub fn top(&self, n: usize) -> Vec<(String, u64)> {
        let m = self.counts.lock().unwrap();
        let mut v: Vec<(String, u64)> = m.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }
}

type Snapshot = (Instant, HashMap<SessionKey, Counters>);

pub struct WorkloadTable {
    shards: [Mutex<HashMap<SessionKey, Arc<SessionWorkload>>>; SHARDS],
    epoch: Instant,
    pub top_files: TopFiles,
    snapshots: Mutex<VecDeque<Snapshot>>,
}

impl Default for WorkloadTable {
    fn default() -> Self {
        WorkloadTable {
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            epoch: Instant::now(),
            top_files: TopFiles::default(),
            snapshots: Mutex::new(VecDeque::new()),
        }
    }
}

impl WorkloadTable {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn shard(&self, key: &SessionKey) -> &Mutex<HashMap<SessionKey, Arc<SessionWorkload>>> {
        // Fibonacci hashing of the id (the server's own session ids, or
        // bytes of an NFS sessionid): a multiply instead of SipHash on
        // every request; the top bits pick the shard.
        let mixed = (key.1 ^ key.0 as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &self.shards[(mixed >> 60) as usize % SHARDS]
    }

    /// A request of session `id` arrived; `client` names its address the
    /// first time the session is seen.
    pub fn begin(
        self: &Arc<Self>,
        protocol: Protocol,
        id: u64,
        client: impl FnOnce() -> String,
    ) -> InFlight {
        let key = (protocol, id);
        let session = {
            let mut shard = self.shard(&key).lock().unwrap();
            match shard.get(&key) {
                Some(s) => s.clone(),
                None => {
                    if shard.len() >= MAX_SESSIONS / SHARDS {
                        // The least recently active session of the shard goes.
                        if let Some(k) = shard
                            .iter()
                            .min_by_key(|(_, s)| s.last_active_ms.load(Relaxed))
                            .map(|(k, _)| *k)
                        {
                            shard.remove(&k);
                        }
                    }
                    let s = Arc::new(SessionWorkload::new(protocol, id, client(), Instant::now()));
                    s.last_active_ms.store(self.now_ms(), Relaxed);
                    shard.insert(key, s.clone());
                    s
                }
            }
        };
        let at_arrival = session.in_flight.fetch_add(1, Relaxed) + 1;
        session.max_in_flight.fetch_max(at_arrival, Relaxed);
        session.arrivals.fetch_add(1, Relaxed);
        session.in_flight_sum.fetch_add(at_arrival, Relaxed);
        InFlight {
            table: self.clone(),
            session,
            at_arrival,
        }
    }

    pub fn sessions(&self) -> Vec<Arc<SessionWorkload>> {
        let mut v: Vec<_> = self
            .shards
            .iter()
            .flat_map(|s| s.lock().unwrap().values().cloned().collect::<Vec<_>>())
            .collect();
        v.sort_by_key(|s| (s.protocol as u8, s.id));
        v
    }

    /// Seconds since the session's last operation.
    pub fn idle_seconds(&self, s: &SessionWorkload) -> f64 {
        self.now_ms().saturating_sub(s.last_active_ms.load(Relaxed)) as f64 / 1000.0
    }

    /// Take a snapshot for the window if the last is [`SAMPLE_EVERY`] old,
    /// and drop those older than the window.
    pub fn sample(&self, now: Instant) {
        let mut snaps = self.snapshots.lock().unwrap();
        if snaps
            .back()
            .is_some_and(|(t, _)| now.saturating_duration_since(*t) < SAMPLE_EVERY)
        {
            return;
        }
        let counters = self
            .sessions()
            .iter()
            .map(|s| ((s.protocol, s.id), s.counters()))
            .collect();
        snaps.push_back((now, counters));
        while snaps
            .front()
            .is_some_and(|(t, _)| now.saturating_duration_since(*t) > WINDOW + SAMPLE_EVERY)
        {
            snaps.pop_front();
        }
    }

    /// Each session's counters over the window: since the oldest snapshot
    /// not older than [`WINDOW`] (since the session began when it is
    /// younger than that snapshot), with the window's length. The admin
    /// listener takes a snapshot every [`SAMPLE_EVERY`].
    pub fn windowed(&self, now: Instant) -> Vec<(Arc<SessionWorkload>, Counters, f64)> {
        self.sample(now);
        let snaps = self.snapshots.lock().unwrap();
        // The oldest snapshot of the window, not the one just taken (with
        // no earlier one, the window is each session's whole life).
        let base = snaps
            .iter()
            .find(|(t, _)| *t < now && now.saturating_duration_since(*t) <= WINDOW);
        self.sessions()
            .into_iter()
            .map(|s| {
                let current = s.counters();
                let (delta, since) =
                    match base.and_then(|(t, m)| m.get(&(s.protocol, s.id)).map(|c| (t, c))) {
                        Some((t, c)) => (current.since(c), *t),
                        None => (current, s.first_seen),
                    };
                let secs = now.saturating_duration_since(since).as_secs_f64();
                (s, delta, secs)
            })
            .collect()
    }
}

/// The advisor's view of one session's window (channels, offers, share
/// throttling and cache are filled in by the caller, who knows them).
pub fn workload_of(s: &SessionWorkload, c: &Counters, seconds: f64) -> Workload {
    let mut w = Workload {
        protocol: s.protocol.name().into(),
        share: s.share().map(|n| n.to_string()),
        seconds,
        mean_in_flight: if c.arrivals == 0 {
            0.0
        } else {
            c.in_flight_sum as f64 / c.arrivals as f64
        },
        max_in_flight: s.max_in_flight(),
        bytes_read: c.bytes_read,
        bytes_written: c.bytes_written,
        files_touched: s.files_touched(),
        sequential_reads: c.sequential_reads,
        lone_reads: c.lone_reads,
        throttled_ops: c.throttled_ops,
        throttled_seconds: c.throttled_ns as f64 / 1e9,
        io_sizes: c.io_sizes.to_vec(),
        ..Workload::default()
    };
    for class in OP_CLASSES {
        let n = c.ops[class as usize];
        if n > 0 {
            w.ops.insert(class, n);
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(class: OpClass, bytes: u64) -> OpRecord<'static> {
        OpRecord {
            protocol: Protocol::Nfs,
            share: Some("data"),
            class,
            result: Outcome::Success,
            latency: Duration::from_micros(50),
            throttled: Duration::ZERO,
            data_bytes: bytes,
        }
    }

    #[test]
    fn one_at_a_time_sequential_reads() {
        let t = Arc::new(WorkloadTable::default());
        for i in 0..10u64 {
            let f = t.begin(Protocol::Nfs, 7, || "10.0.0.1".into());
            f.finish(
                &rec(OpClass::Read, 4096),
                Some(FileRef {
                    key: 1,
                    read: Some((i * 4096, 4096)),
                }),
            );
        }
        let s = &t.sessions()[0];
        let c = s.counters();
        assert_eq!(c.ops[OpClass::Read as usize], 10);
        assert_eq!(c.sequential_reads, 9, "the first read follows nothing");
        assert_eq!(c.lone_reads, 10);
        assert_eq!(c.in_flight_sum, 10);
        assert_eq!(c.io_sizes[0], 10);
        assert_eq!(s.files_touched(), 1);
        assert_eq!(s.in_flight(), 0);
        assert_eq!(s.share().as_deref(), Some("data"));
        let w = workload_of(s, &c, 1.0);
        assert_eq!(w.mean_in_flight, 1.0);
        assert_eq!(w.count(OpClass::Read), 10);
    }

    #[test]
    fn in_flight_counts_overlapping_requests() {
        let t = Arc::new(WorkloadTable::default());
        let a = t.begin(Protocol::Smb, 1, || "a".into());
        let b = t.begin(Protocol::Smb, 1, || "a".into());
        b.finish(
            &rec(OpClass::Read, 65536),
            Some(FileRef {
                key: 2,
                read: Some((0, 65536)),
            }),
        );
        drop(b);
        drop(a);
        let s = &t.sessions()[0];
        assert_eq!(s.max_in_flight(), 2);
        assert_eq!(s.counters().lone_reads, 0);
        assert_eq!(s.counters().in_flight_sum, 3);
    }

    #[test]
    fn sessions_and_top_files_are_bounded() {
        let t = Arc::new(WorkloadTable::default());
        for id in 0..(MAX_SESSIONS as u64 * 3) {
            let f = t.begin(Protocol::Smb, id, || "x".into());
            f.name_file(id, || format!("data\\f{id}"));
        }
        assert!(t.sessions().len() <= MAX_SESSIONS);
        let f = t.begin(Protocol::Smb, 1, || "x".into());
        f.name_file(99_999, || "data\\hot".into());
        // Two batches reach the top files while the file is open; the
        // last ten when it is closed.
        for _ in 0..(2 * TOP_FILES_BATCH + 10) {
            f.finish(
                &rec(OpClass::Stat, 0),
                Some(FileRef {
                    key: 99_999,
                    read: None,
                }),
            );
        }
        assert_eq!(t.top_files.counts.lock().unwrap().len(), TOP_FILES);
        let top = t.top_files.top(3);
        assert_eq!(top[0].0, "data\\hot");
        assert!(top[0].1 > 2 * TOP_FILES_BATCH);
        f.forget_file(99_999);
        let closed = t.top_files.top(1)[0].1;
        assert_eq!(closed, top[0].1 + 10, "the rest is counted at close");
        f.finish(
            &rec(OpClass::Stat, 0),
            Some(FileRef {
                key: 99_999,
                read: None,
            }),
        );
        assert_eq!(
            t.top_files.top(1)[0].1,
            closed,
            "a closed file is no longer counted"
        );
    }

    #[test]
    fn the_window_subtracts_the_oldest_snapshot() {
        let t = Arc::new(WorkloadTable::default());
        let t0 = Instant::now();
        t.begin(Protocol::Smb, 1, || "x".into())
            .finish(&rec(OpClass::Open, 0), None);
        t.sample(t0);
        for _ in 0..3 {
            t.begin(Protocol::Smb, 1, || "x".into())
                .finish(&rec(OpClass::Close, 0), None);
        }
        let w = t.windowed(t0 + Duration::from_secs(10));
        assert_eq!(w.len(), 1);
        let (_, c, secs) = &w[0];
        assert_eq!(c.total_ops(), 3);
        assert_eq!(c.ops[OpClass::Close as usize], 3);
        assert!((secs - 10.0).abs() < 0.01);
        // Asked for the first time, with no earlier snapshot: the whole life.
        let fresh = Arc::new(WorkloadTable::default());
        fresh
            .begin(Protocol::Smb, 2, || "x".into())
            .finish(&rec(OpClass::Open, 0), None);
        assert_eq!(fresh.windowed(Instant::now())[0].1.total_ops(), 1);
        // Later: since the snapshot that call took.
        let later = Instant::now() + SAMPLE_EVERY;
        fresh
            .begin(Protocol::Smb, 2, || "x".into())
            .finish(&rec(OpClass::Close, 0), None);
        assert_eq!(fresh.windowed(later)[0].1.total_ops(), 1);
        // After the window, the old snapshot is gone: since the newest kept.
        let w = t.windowed(t0 + Duration::from_secs(200));
        assert_eq!(w[0].1.total_ops(), 4);
    }
}
