//! Provisioned performance in the request path (docs/ARCHITECTURE.md,
//! "QoS"): one gate per share that requests pass before the file
//! operation. Over the share's limits a request waits — in the share's
//! fair queue (braid-qos) — and then goes: no client ever gets an error
//! or a timeout from QoS. While a client is being held back, SMB grants it
//! fewer credits and NFS asks for fewer slots, so that it keeps fewer
//! requests waiting here (`smb/frame.rs`, `nfs/ops/sequence.rs`).
//!
//! The arithmetic is braid-qos's, on this module's clock (time since the
//! registry was made); this module only waits and counts.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use braid_qos::{ClientId, Cost, Limits, ShareQos, View};
use tokio::sync::{oneshot, Notify};

/// How long a client counts as held back after its last wait (for the
/// credits and slots it is granted).
const THROTTLED_FOR: Duration = Duration::from_secs(1);
/// Credits an SMB connection may hold and use at once while its session is
/// held back: enough for two 1 MiB requests in flight.
pub const THROTTLED_CREDITS: u64 = 32;
/// Slots an NFS session is asked to use while held back.
pub const THROTTLED_SLOTS: u32 = 16;

/// What kind of request, for the counts by result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Read,
    Write,
    Metadata,
}

impl Class {
    pub const ALL: [Class; 3] = [Class::Read, Class::Write, Class::Metadata];
    pub fn name(self) -> &'static str {
        match self {
            Class::Read => "read",
            Class::Write => "write",
            Class::Metadata => "metadata",
        }
    }
}

/// Upper bounds (seconds) of the histogram of time spent waiting.
pub const WAIT_BUCKETS: [f64; 11] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// Counters of one share's gated requests (`/metrics`).
#[derive(Default)]
pub struct Counters {
    /// [class][0: success, 1: success after throttling, 2: error]
    results: [[AtomicU64; 3]; 3],
    /// Waits by [`WAIT_BUCKETS`] (plus +Inf), their count and sum (ns).
    wait_buckets: [AtomicU64; 12],
    wait_count: AtomicU64,
    wait_sum_ns: AtomicU64,
}

pub struct CountersSnapshot {
    pub results: [[u64; 3]; 3],
    /// Cumulative, as Prometheus wants them.
    pub wait_buckets: [u64; 12],
    pub wait_count: u64,
    pub wait_sum_s: f64,
}

impl Counters {
    fn record(&self, class: Class, waited: Duration, ok: bool) {
        let result = match (ok, waited.is_zero()) {
            (false, _) => 2,
            (true, true) => 0,
            (true, false) => 1,
        };
        self.results[class as usize][result].fetch_add(1, Relaxed);
        let s = waited.as_secs_f64();
        let i = WAIT_BUCKETS
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(WAIT_BUCKETS.len());
        self.wait_buckets[i].fetch_add(1, Relaxed);
        self.wait_count.fetch_add(1, Relaxed);
        self.wait_sum_ns
            .fetch_add(waited.as_nanos() as u64, Relaxed);
    }

    pub fn snapshot(&self) -> CountersSnapshot {
        let mut results = [[0; 3]; 3];
        for (c, row) in results.iter_mut().enumerate() {
            for (r, v) in row.iter_mut().enumerate() {
                *v = self.results[c][r].load(Relaxed);
            }
        }
        let mut wait_buckets = [0; 12];
        let mut acc = 0;
        for (i, b) in wait_buckets.iter_mut().enumerate() {
            acc += self.wait_buckets[i].load(Relaxed);
            *b = acc;
        }
        CountersSnapshot {
            results,
            wait_buckets,
            wait_count: self.wait_count.load(Relaxed),
            wait_sum_s: self.wait_sum_ns.load(Relaxed) as f64 / 1e9,
        }
    }
}

/// One share's gate.
pub struct ShareGate {
    pub name: String,
    core: Mutex<ShareQos<oneshot::Sender<()>>>,
    enabled: AtomicBool,
    /// The limits in force, readable without the core's lock.
    limits: RwLock<Limits>,
    /// Wakes the pump: a request was queued, or the limits changed.
    wake: Arc<Notify>,
    pump_running: AtomicBool,
    epoch: Instant,
    pub counters: Counters,
}

/// A request queued at the gate.
pub struct Waiting {
    rx: oneshot::Receiver<()>,
    started: Instant,
    class: Class,
}

impl Waiting {
    /// Until the pump lets it go.
    pub async fn wait(self) -> Passed {
        // The pump sends when the request may go; it never drops a
        // sender it has not sent on while the gate lives.
        let _ = self.rx.await;
        Passed {
            waited: self.started.elapsed(),
            class: self.class,
        }
    }
}

/// A request let through: how long it waited. Report its outcome with
/// [`ShareGate::done`].
#[derive(Clone, Copy, Debug)]
pub struct Passed {
    pub waited: Duration,
    pub class: Class,
}

impl ShareGate {
    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Relaxed)
    }

    /// Wait until the share's limits let this request go. Never fails: a
    /// request dropped while waiting (its connection went) just leaves
    /// the queue.
    pub async fn pass(self: &Arc<Self>, client: ClientId, cost: Cost, class: Class) -> Passed {
        match self.try_pass(client, cost, class) {
            Ok(passed) => passed,
            Err(waiting) => waiting.wait().await,
        }
    }

    /// The request goes now (Ok: no channel, no timer, no task), or it is
    /// queued (Err: await [`Waiting::wait`]). Under its limits a request
    /// costs one lock and the bucket arithmetic.
    pub fn try_pass(
        self: &Arc<Self>,
        client: ClientId,
        cost: Cost,
        class: Class,
    ) -> Result<Passed, Waiting> {
        let (rx, started) = {
            let mut core = self.core.lock().unwrap_or_else(|p| p.into_inner());
            let now = self.now();
            if core.try_admit(&cost, now) {
                return Ok(Passed {
                    waited: Duration::ZERO,
                    class,
                });
            }
            let (tx, rx) = oneshot::channel();
            core.enqueue(client, cost, tx);
            (rx, Instant::now())
        };
        self.ensure_pump();
        self.wake.notify_one();
        Err(Waiting { rx, started, class })
    }

    /// Count a request's outcome.
    pub fn done(&self, passed: Passed, ok: bool) {
        self.counters.record(passed.class, passed.waited, ok);
    }

    fn set_limits(&self, limits: Limits) {
        self.enabled.store(limits.enabled(), Relaxed);
        *self.limits.write().unwrap_or_else(|p| p.into_inner()) = limits;
        let now = self.now();
        self.core
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set_limits(limits, now);
        self.wake.notify_one();
    }

    pub fn limits(&self) -> Limits {
        *self.limits.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn view(&self) -> View {
        let now = self.now();
        self.core
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .view(now)
    }

    /// Let go what may go; when to come back.
    fn pump_once(&self) -> Option<Instant> {
        let now = self.now();
        let (go, wake_at) = {
            let mut core = self.core.lock().unwrap_or_else(|p| p.into_inner());
            // Requests whose callers went away are not paid for.
            core.retain(|tx| !tx.is_closed());
            core.poll(now)
        };
        for tx in go {
            let _ = tx.send(());
        }
        wake_at.map(|t| self.epoch + t)
    }

    /// One task per share lets queued requests go as the budget allows.
    fn ensure_pump(self: &Arc<Self>) {
        if self.pump_running.swap(true, Relaxed) {
            return;
        }
        let gate: Weak<ShareGate> = Arc::downgrade(self);
        let wake = self.wake.clone();
        tokio::spawn(async move {
            loop {
                let Some(g) = gate.upgrade() else { return };
                let next = g.pump_once();
                drop(g);
                match next {
                    Some(at) => {
                        tokio::select! {
                            _ = tokio::time::sleep_until(at.into()) => {}
                            _ = wake.notified() => {}
                        }
                    }
                    // Idle: wake on the next queued request; look again
                    // now and then in case the share went away.
                    None => {
                        let _ = tokio::time::timeout(Duration::from_secs(5), wake.notified()).await;
                    }
                }
            }
        });
    }
}

/// Every share's gate, by lower-cased share name; they outlive reloads
/// (the credits a share has earned are kept when its limits change).
pub struct QosRegistry {
    gates: RwLock<HashMap<String, Arc<ShareGate>>>,
    epoch: Instant,
    /// Clients held back lately, and when last (ms since `epoch`).
    throttled: Mutex<HashMap<ClientId, u64>>,
    last_throttle_ms: AtomicU64,
    /// Some share's limits are on.
    any_enabled: AtomicBool,
    /// The home shares served (`homes.rs`), by lower-cased name: each
    /// user's share has a gate of its own with the template's limits.
    homes: Mutex<HashSet<String>>,
}

impl Default for QosRegistry {
    fn default() -> Self {
        QosRegistry {
            gates: RwLock::new(HashMap::new()),
            epoch: Instant::now(),
            throttled: Mutex::new(HashMap::new()),
            last_throttle_ms: AtomicU64::new(0),
            any_enabled: AtomicBool::new(false),
            homes: Mutex::new(HashSet::new()),
        }
    }
}

impl QosRegistry {
    /// The shares served now and their limits (at start and on reload):
    /// gates are made, changed and dropped to match.
    pub fn configure<'a>(&self, shares: impl IntoIterator<Item = (&'a str, &'a Limits)>) {
        let mut gates = self.gates.write().unwrap_or_else(|p| p.into_inner());
        let mut keep = Vec::new();
        for (name, limits) in shares {
            let key = name.to_lowercase();
            keep.push(key.clone());
            match gates.get(&key) {
                Some(g) => {
                    if g.limits() != *limits {
                        g.set_limits(*limits);
                    }
                }
                None => {
                    gates.insert(key, Arc::new(self.new_gate(name, limits)));
                }
            }
        }
        gates.retain(|k, _| keep.contains(k));
        self.note_enabled(&gates);
    }

    fn new_gate(&self, name: &str, limits: &Limits) -> ShareGate {
        ShareGate {
            name: name.to_string(),
            core: Mutex::new(ShareQos::new(*limits, self.epoch.elapsed())),
            enabled: AtomicBool::new(limits.enabled()),
            limits: RwLock::new(*limits),
            wake: Arc::new(Notify::new()),
            pump_running: AtomicBool::new(false),
            epoch: self.epoch,
            counters: Counters::default(),
        }
    }

    fn note_enabled(&self, gates: &HashMap<String, Arc<ShareGate>>) {
        self.any_enabled
            .store(gates.values().any(|g| g.enabled()), Relaxed);
    }

    /// The shares of `new` get its limits: all of them at start (`old`
    /// None); on a reload, those whose `[share.qos]` changed — a share
    /// whose table did not change keeps what the admin API set. Shares
    /// no longer served lose their gates.
    pub fn reconfigure(
        &self,
        old: Option<&crate::config::ServerConfig>,
        new: &crate::config::ServerConfig,
    ) {
        let unchanged = |s: &crate::config::ShareConfig| {
            old.is_some_and(|o| {
                o.shares
                    .iter()
                    .any(|b| b.name.eq_ignore_ascii_case(&s.name) && b.qos == s.qos)
            })
        };
        let mut live: Vec<(String, Limits)> = new
            .shares
            .iter()
            .map(|s| {
                let limits = match self.gate_any(&s.name) {
                    Some(g) if unchanged(s) => g.limits(),
                    _ => s.qos,
                };
                (s.name.clone(), limits)
            })
            .collect();
        // Home shares keep their gates while the template's limits stay
        // (or what the admin API set); a new template's limits apply to
        // every one, and without a template they go.
        let template = new.homes.as_ref().map(|h| h.qos);
        let template_changed = old.map(|o| o.homes.as_ref().map(|h| h.qos)) != Some(template);
        let mut homes = self.homes.lock().unwrap_or_else(|p| p.into_inner());
        match template {
            None => homes.clear(),
            Some(limits) => {
                homes.retain(|h| !live.iter().any(|(n, _)| n.eq_ignore_ascii_case(h)));
                for h in homes.iter() {
                    let limits = match self.gate_any(h) {
                        Some(g) if !template_changed => g.limits(),
                        _ => limits,
                    };
                    live.push((h.clone(), limits));
                }
            }
        }
        self.configure(live.iter().map(|(n, l)| (n.as_str(), l)));
    }

    /// A user's home share is served (`homes.rs`): its own gate, with the
    /// template's `limits`, unless it has one already.
    pub fn serve_home(&self, name: &str, limits: &Limits) {
        let key = name.to_lowercase();
        {
            let mut homes = self.homes.lock().unwrap_or_else(|p| p.into_inner());
            if !homes.insert(key.clone()) && self.gate_any(&key).is_some() {
                return;
            }
        }
        let mut gates = self.gates.write().unwrap_or_else(|p| p.into_inner());
        if let std::collections::hash_map::Entry::Vacant(e) = gates.entry(key) {
            let gate = self.new_gate(e.key(), limits);
            e.insert(Arc::new(gate));
            self.note_enabled(&gates);
        }
    }

    /// Change one share's limits now (the admin API); the error names what
    /// is wrong.
    pub fn set(&self, share: &str, limits: Limits) -> Result<(), String> {
        limits.validate()?;
        // The write lock: changes of `any_enabled` come one at a time.
        let gates = self.gates.write().unwrap_or_else(|p| p.into_inner());
        let g = gates
            .get(&share.to_lowercase())
            .ok_or_else(|| format!("no share named '{share}'"))?;
        g.set_limits(limits);
        self.note_enabled(&gates);
        Ok(())
    }

    /// The gate of a share whose limits are on; None lets requests by.
    pub fn gate(&self, share: &str) -> Option<Arc<ShareGate>> {
        // A server with no limits anywhere pays this one load per request.
        if !self.any_enabled.load(Relaxed) {
            return None;
        }
        let gates = self.gates.read().unwrap_or_else(|p| p.into_inner());
        // Keys are lower-cased; most names already are, and need no copy.
        let g = if share.bytes().any(|b| b.is_ascii_uppercase()) || !share.is_ascii() {
            gates.get(&share.to_lowercase())
        } else {
            gates.get(share)
        };
        g.filter(|g| g.enabled()).cloned()
    }

    /// The gate of a share, on or off (the admin view).
    pub fn gate_any(&self, share: &str) -> Option<Arc<ShareGate>> {
        self.gates
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&share.to_lowercase())
            .cloned()
    }

    fn ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// A request of `client` waited.
    pub fn note_throttled(&self, client: ClientId) {
        let now = self.ms().max(1);
        self.last_throttle_ms.store(now, Relaxed);
        let mut t = self.throttled.lock().unwrap_or_else(|p| p.into_inner());
        t.insert(client, now);
        if t.len() > 4096 {
            let horizon = now.saturating_sub(THROTTLED_FOR.as_millis() as u64);
            t.retain(|_, at| *at >= horizon);
        }
    }

    /// Whether a request of `client` waited within the last second.
    pub fn client_throttled(&self, client: ClientId) -> bool {
        let last = self.last_throttle_ms.load(Relaxed);
        if last == 0 {
            return false;
        }
        let horizon = self.ms().saturating_sub(THROTTLED_FOR.as_millis() as u64);
        if last < horizon {
            return false;
        }
        self.throttled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&client)
            .is_some_and(|at| *at >= horizon)
    }
}

/// The client id of an SMB session.
pub fn smb_client(session_id: u64) -> ClientId {
    session_id & !(1 << 63)
}

/// The client id of an NFS client (a namespace apart from SMB's).
pub fn nfs_client(clientid: u64) -> ClientId {
    clientid | (1 << 63)
}

/// A stable id of a file for the per-file limits, from anything that
/// names it uniquely (a path, a device and inode).
pub fn file_key(what: impl Hash) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    what.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(iops: u64) -> Limits {
        Limits {
            iops: Some(iops),
            ..Limits::default()
        }
    }

    #[tokio::test]
    async fn requests_over_the_limit_wait_and_then_go() {
        let r = QosRegistry::default();
        r.configure([("Data", &limits(200))]);
        let g = r.gate("data").expect("enabled");
        let io = Cost {
            ops: 1,
            ..Cost::default()
        };
        let t0 = Instant::now();
        let mut waited = 0;
        // 20 in the bucket, then 200/s: 60 take about 0.2 s.
        for _ in 0..60 {
            let p = g.pass(1, io, Class::Read).await;
            if !p.waited.is_zero() {
                waited += 1;
            }
            g.done(p, true);
        }
        let dt = t0.elapsed().as_secs_f64();
        assert!((0.18..0.4).contains(&dt), "{dt}");
        // Beyond the bucket's 20, requests wait (one may find a token that
        // accrued while the one before it ran, and go at once).
        assert!(waited >= 30, "{waited}");
        let s = g.counters.snapshot();
        assert_eq!(s.results[0][0] + s.results[0][1], 60);
        assert_eq!(s.results[0][1], waited);
        // Off: no gate at all.
        r.set("DATA", Limits::default()).unwrap();
        assert!(r.gate("data").is_none());
        assert!(r.set("nope", limits(1)).unwrap_err().contains("no share"));
    }

    #[test]
    fn throttled_clients_are_remembered_for_a_second() {
        let r = QosRegistry::default();
        assert!(!r.client_throttled(5));
        r.note_throttled(5);
        assert!(r.client_throttled(5));
        assert!(!r.client_throttled(6));
        assert_ne!(smb_client(5), nfs_client(5));
    }
}
