//! Request metrics: a lock-light registry that the request path feeds once
//! per SMB2 message (architecture principle 6: metrics are a layer, fed
//! from one hook in `smb::frame`, read by the admin API).
//!
//! Shares are known at start: their entries live in an immutable map built
//! with the registry, so the hot path is one hash lookup plus a few relaxed
//! atomic adds on an array indexed by command. Only a share name that was not
//! known at start (none today) goes through a read-mostly lock.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use braid_smb_proto::header::Command;
use braid_smb_proto::NtStatus;

/// Upper bounds of the latency histogram buckets, in microseconds
/// (50 µs … 10 s, a 1-2.5-5 log scale); `+Inf` is implicit.
pub const BUCKET_BOUNDS_US: [u64; 17] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];
const NBUCKETS: usize = BUCKET_BOUNDS_US.len() + 1;

/// The share label of requests that belong to no tree (NEGOTIATE,
/// SESSION_SETUP, TREE_CONNECT, ECHO, LOGOFF, …).
pub const NO_SHARE: &str = "";

/// Counters of one SMB2 command on one share.
#[derive(Default)]
pub struct OpStats {
    pub count: AtomicU64,
    pub errors: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Sum of latencies in nanoseconds.
    pub latency_sum_ns: AtomicU64,
    /// Per-bucket (not cumulative) counts; the last is `+Inf`.
    buckets: [AtomicU64; NBUCKETS],
}

/// A point-in-time copy of [`OpStats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpSnapshot {
    pub count: u64,
    pub errors: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub latency_sum_ns: u64,
    /// Per-bucket counts, `+Inf` last.
    pub buckets: Vec<u64>,
}

impl OpStats {
    fn record(&self, error: bool, latency: Duration, bytes_in: u64, bytes_out: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if error {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.bytes_in.fetch_add(bytes_in, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes_out, Ordering::Relaxed);
        let ns = latency.as_nanos().min(u64::MAX as u128) as u64;
        self.latency_sum_ns.fetch_add(ns, Ordering::Relaxed);
        let us = ns / 1_000 + u64::from(!ns.is_multiple_of(1_000));
        let i = BUCKET_BOUNDS_US.partition_point(|&b| b < us);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> OpSnapshot {
        OpSnapshot {
            count: self.count.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            latency_sum_ns: self.latency_sum_ns.load(Ordering::Relaxed),
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
        }
    }
}

/// Every command's counters for one share.
pub struct ShareMetrics {
    pub name: String,
    ops: [OpStats; Command::COUNT],
}

impl ShareMetrics {
    fn new(name: &str) -> Self {
        ShareMetrics {
            name: name.to_string(),
            ops: std::array::from_fn(|_| OpStats::default()),
        }
    }

    pub fn op(&self, command: Command) -> &OpStats {
        &self.ops[command as usize]
    }

    /// Totals over every command.
    pub fn totals(&self) -> ShareTotals {
        let mut t = ShareTotals::default();
        for (i, op) in self.ops.iter().enumerate() {
            let s = op.snapshot();
            t.operations += s.count;
            t.errors += s.errors;
            t.bytes_in += s.bytes_in;
            t.bytes_out += s.bytes_out;
            if i == Command::Read as usize {
                t.read_ops = s.count;
                t.bytes_read = s.bytes_out;
            } else if i == Command::Write as usize {
                t.write_ops = s.count;
                t.bytes_written = s.bytes_in;
            }
            if s.count > 0 {
                t.by_command.push((command_name(i), s.count));
            }
        }
        t
    }
}

/// What `/api/v1/shares` reports of one share's traffic.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ShareTotals {
    pub operations: u64,
    pub errors: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub read_ops: u64,
    pub write_ops: u64,
    /// Bytes of READ responses (header, body and data).
    pub bytes_read: u64,
    /// Bytes of WRITE requests (header, body and data).
    pub bytes_written: u64,
    /// Commands seen at least once, in command order.
    pub by_command: Vec<(&'static str, u64)>,
}

fn command_name(i: usize) -> &'static str {
    Command::from_u16(i as u16)
        .map(|c| crate::smb::dispatch::info(c).name)
        .unwrap_or("unknown")
}

/// Gauges that are read from the server state when rendering, rather than
/// kept up to date by hooks in every place that adds or drops them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Gauges {
    pub sessions: u64,
    pub channels: u64,
    /// The SMB durable and persistent opens' counts (`smb/durable.rs`).
    pub durable: crate::smb::durable::DurableCounts,
    /// NFS reclaims, grace and lease expiries (None: NFS is not served).
    pub nfs: Option<crate::nfs::state::held::NfsGauges>,
}

pub struct Metrics {
    /// Shares known at start (plus IPC$ and the no-share entry): never
    /// changes after construction, so lookups take no lock.
    fixed: HashMap<String, Arc<ShareMetrics>>,
    /// Share names not known at start (added on first use).
    extra: RwLock<HashMap<String, Arc<ShareMetrics>>>,
    /// Label order for rendering: the fixed entries as configured.
    order: Vec<Arc<ShareMetrics>>,
    pub connections_accepted: AtomicU64,
    pub connections_current: AtomicU64,
    pub auth_failures: AtomicU64,
    /// Connections closed at accept for `max_connections`.
    pub connections_refused: AtomicU64,
    /// SESSION_SETUPs refused unread because their address failed too
    /// often (`logon_throttle.rs`).
    pub logons_throttled: AtomicU64,
    /// Per-operation metrics by class, share and protocol (`op_metrics.rs`).
    pub ops: Arc<crate::op_metrics::OpMetrics>,
    /// Per-session workload statistics and top files (`workload.rs`).
    pub workloads: Arc<crate::workload::WorkloadTable>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(std::iter::empty::<&str>())
    }
}

impl Metrics {
    /// A registry with entries for `shares`, IPC$ and requests of no share.
    pub fn new<'a>(shares: impl IntoIterator<Item = &'a str>) -> Metrics {
        let mut fixed = HashMap::new();
        let mut order = Vec::new();
        let shares: Vec<&str> = shares.into_iter().collect();
        let ops = Arc::new(crate::op_metrics::OpMetrics::new(shares.iter().copied()));
        let names = shares.into_iter().chain(["IPC$", NO_SHARE]);
        for name in names {
            if fixed.contains_key(name) {
                continue;
            }
            let m = Arc::new(ShareMetrics::new(name));
            fixed.insert(name.to_string(), m.clone());
            order.push(m);
        }
        Metrics {
            fixed,
            extra: RwLock::new(HashMap::new()),
            order,
            connections_accepted: AtomicU64::new(0),
            connections_current: AtomicU64::new(0),
            auth_failures: AtomicU64::new(0),
            connections_refused: AtomicU64::new(0),
            logons_throttled: AtomicU64::new(0),
            ops,
            workloads: Arc::default(),
        }
    }

    /// The entry of one share (`None`: requests outside any tree).
    pub fn share(&self, share: Option<&str>) -> Arc<ShareMetrics> {
        let name = share.unwrap_or(NO_SHARE);
        if let Some(m) = self.fixed.get(name) {
            return m.clone();
        }
        if let Some(m) = self.extra.read().unwrap().get(name) {
            return m.clone();
        }
        self.extra
            .write()
            .unwrap()
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(ShareMetrics::new(name)))
            .clone()
    }

    /// One finished request: called once per SMB2 message with the status
    /// of its (final) response.
    pub fn record(
        &self,
        share: Option<&str>,
        command: Command,
        status: NtStatus,
        latency: Duration,
        bytes_in: u64,
        bytes_out: u64,
    ) {
        let name = share.unwrap_or(NO_SHARE);
        let error = status.is_error() && status != NtStatus::MORE_PROCESSING_REQUIRED;
        if let Some(m) = self.fixed.get(name) {
            m.op(command).record(error, latency, bytes_in, bytes_out);
        } else {
            self.share(share)
                .op(command)
                .record(error, latency, bytes_in, bytes_out);
        }
        if command == Command::SessionSetup && status == NtStatus::LOGON_FAILURE {
            self.auth_failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn connection_opened(&self) {
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
        self.connections_current.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_closed(&self) {
        self.connections_current.fetch_sub(1, Ordering::Relaxed);
    }

    /// Every share entry: the fixed ones in configured order, then the others.
    pub fn shares(&self) -> Vec<Arc<ShareMetrics>> {
        let mut v = self.order.clone();
        let mut extra: Vec<_> = self.extra.read().unwrap().values().cloned().collect();
        extra.sort_by(|a, b| a.name.cmp(&b.name));
        v.extend(extra);
        v
    }

    /// Prometheus text exposition format 0.0.4. Series with no requests yet
    /// are left out (but every metric family is always declared).
    pub fn render_prometheus(&self, gauges: Gauges) -> String {
        let mut out = String::with_capacity(16 * 1024);
        let shares = self.shares();
        let snaps: Vec<(String, Vec<(&'static str, OpSnapshot)>)> = shares
            .iter()
            .map(|s| {
                let ops = (0..Command::COUNT)
                    .map(|i| (command_name(i), s.ops[i].snapshot()))
                    .filter(|(_, o)| o.count > 0)
                    .collect();
                (escape_label(&s.name), ops)
            })
            .collect();

        header(
            &mut out,
            "braid_smb_operations_total",
            "counter",
            "SMB2 requests answered, by share and command.",
        );
        for (share, ops) in &snaps {
            for (cmd, o) in ops {
                let _ = writeln!(
                    out,
                    "braid_smb_operations_total{{share=\"{share}\",command=\"{cmd}\"}} {}",
                    o.count
                );
            }
        }
        header(
            &mut out,
            "braid_smb_operation_errors_total",
            "counter",
            "SMB2 requests answered with an error status, by share and command.",
        );
        for (share, ops) in &snaps {
            for (cmd, o) in ops {
                let _ = writeln!(
                    out,
                    "braid_smb_operation_errors_total{{share=\"{share}\",command=\"{cmd}\"}} {}",
                    o.errors
                );
            }
        }
        header(
            &mut out,
            "braid_smb_operation_duration_seconds",
            "histogram",
            "Time from receiving an SMB2 request to its response being ready.",
        );
        for (share, ops) in &snaps {
            for (cmd, o) in ops {
                let mut cum = 0u64;
                for (i, n) in o.buckets.iter().enumerate() {
                    cum += n;
                    let le = match BUCKET_BOUNDS_US.get(i) {
                        Some(us) => format_seconds(*us),
                        None => "+Inf".to_string(),
                    };
                    let _ = writeln!(
                        out,
                        "braid_smb_operation_duration_seconds_bucket{{share=\"{share}\",command=\"{cmd}\",le=\"{le}\"}} {cum}"
                    );
                }
                let _ = writeln!(
                    out,
                    "braid_smb_operation_duration_seconds_sum{{share=\"{share}\",command=\"{cmd}\"}} {}",
                    o.latency_sum_ns as f64 / 1e9
                );
                let _ = writeln!(
                    out,
                    "braid_smb_operation_duration_seconds_count{{share=\"{share}\",command=\"{cmd}\"}} {}",
                    o.count
                );
            }
        }
        header(
            &mut out,
            "braid_smb_bytes_total",
            "counter",
            "SMB2 message bytes (header, body and data) received (in) and sent (out), by share.",
        );
        for (share, ops) in &snaps {
            if ops.is_empty() {
                continue;
            }
            let bin: u64 = ops.iter().map(|(_, o)| o.bytes_in).sum();
            let bout: u64 = ops.iter().map(|(_, o)| o.bytes_out).sum();
            let _ = writeln!(
                out,
                "braid_smb_bytes_total{{share=\"{share}\",direction=\"in\"}} {bin}"
            );
            let _ = writeln!(
                out,
                "braid_smb_bytes_total{{share=\"{share}\",direction=\"out\"}} {bout}"
            );
        }
        let simple: [(&str, &str, &str, u64); 11] = [
            (
                "braid_connections",
                "gauge",
                "Open TCP connections.",
                self.connections_current.load(Ordering::Relaxed),
            ),
            (
                "braid_connections_accepted_total",
                "counter",
                "TCP connections accepted since start.",
                self.connections_accepted.load(Ordering::Relaxed),
            ),
            (
                "braid_sessions",
                "gauge",
                "Authenticated SMB sessions.",
                gauges.sessions,
            ),
            (
                "braid_channels",
                "gauge",
                "Channels (connections bound to a session) over all sessions.",
                gauges.channels,
            ),
            (
                "braid_smb_durable_opens_waiting",
                "gauge",
                "SMB durable and persistent opens waiting for their client to reconnect.",
                gauges.durable.waiting,
            ),
            (
                "braid_smb_durable_reconnects_total",
                "counter",
                "SMB durable and persistent opens reconnected (DHnC/DH2C, or a replayed CREATE).",
                gauges.durable.reconnects,
            ),
            (
                "braid_smb_durable_expired_total",
                "counter",
                "SMB durable and persistent opens closed because their client did not come back in time.",
                gauges.durable.expired,
            ),
            (
                "braid_smb_opens_restored_total",
                "counter",
                "SMB opens restored from the state store at start.",
                gauges.durable.restored,
            ),
            (
                "braid_auth_failures_total",
                "counter",
                "SESSION_SETUP requests that ended in STATUS_LOGON_FAILURE.",
                self.auth_failures.load(Ordering::Relaxed),
            ),
            (
                "braid_logons_throttled_total",
                "counter",
                "SESSION_SETUP requests refused unread: their address had logon_failures_per_minute failures.",
                self.logons_throttled.load(Ordering::Relaxed),
            ),
            (
                "braid_connections_refused_total",
                "counter",
                "Connections closed as accepted: max_connections were open.",
                self.connections_refused.load(Ordering::Relaxed),
            ),
        ];
        for (name, kind, help, v) in simple {
            header(&mut out, name, kind, help);
            let _ = writeln!(out, "{name} {v}");
        }
        if let Some(nfs) = gauges.nfs {
            render_nfs(&mut out, nfs);
        }
        self.ops.render_prometheus(&mut out);
        out
    }
}

/// RFC 8881 8.4.2: the grace period after a restart and the reclaims in it.
fn render_nfs(out: &mut String, g: crate::nfs::state::held::NfsGauges) {
    let plain = [
        (
            "braid_nfs_grace_active",
            "gauge",
            "1 while the NFS grace period after a restart is on (only reclaims are served).",
            g.grace_active,
        ),
        (
            "braid_nfs_clients_to_reclaim",
            "gauge",
            "NFS clients of the last run that have not finished reclaiming.",
            g.clients_to_reclaim,
        ),
        (
            "braid_nfs_reclaims_refused_total",
            "counter",
            "NFS reclaims refused with NFS4ERR_RECLAIM_BAD: the client did not hold that state.",
            g.reclaims_refused,
        ),
        (
            "braid_nfs_clients_expired_total",
            "counter",
            "NFS clients whose lease ran out and whose state was released.",
            g.clients_expired,
        ),
    ];
    for (name, kind, help, v) in plain {
        header(out, name, kind, help);
        let _ = writeln!(out, "{name} {v}");
    }
    header(
        out,
        "braid_nfs_reclaims_total",
        "counter",
        "NFS state reclaimed after a restart, by kind.",
    );
    for (kind, v) in [
        ("open", g.reclaimed_opens),
        ("lock", g.reclaimed_locks),
        ("delegation", g.reclaimed_delegations),
    ] {
        let _ = writeln!(out, "braid_nfs_reclaims_total{{kind=\"{kind}\"}} {v}");
    }
}

pub(crate) fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A bucket bound in seconds, shortest exact form (0.00005, 0.1, 1, 2.5, 10).
pub(crate) fn format_seconds(us: u64) -> String {
    let whole = us / 1_000_000;
    let frac = us % 1_000_000;
    if frac == 0 {
        return whole.to_string();
    }
    let f = format!("{frac:06}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

/// Prometheus label values escape backslash, double quote and newline.
pub(crate) fn escape_label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn buckets_are_upper_inclusive() {
        let m = Metrics::new(["data"]);
        let s = Some("data");
        m.record(
            s,
            Command::Read,
            NtStatus::SUCCESS,
            Duration::from_micros(50),
            1,
            1,
        );
        m.record(
            s,
            Command::Read,
            NtStatus::SUCCESS,
            Duration::from_nanos(50_001),
            1,
            1,
        );
        m.record(
            s,
            Command::Read,
            NtStatus::SUCCESS,
            Duration::from_secs(60),
            1,
            1,
        );
        let snap = m.share(s).op(Command::Read).snapshot();
        assert_eq!(snap.buckets[0], 1, "50 µs is in le=0.00005");
        assert_eq!(snap.buckets[1], 1, "50.001 µs is in le=0.0001");
        assert_eq!(snap.buckets[NBUCKETS - 1], 1, "60 s is only in +Inf");
        assert_eq!(snap.count, 3);
    }

    #[test]
    fn seconds_format() {
        assert_eq!(format_seconds(50), "0.00005");
        assert_eq!(format_seconds(2_500), "0.0025");
        assert_eq!(format_seconds(1_000_000), "1");
        assert_eq!(format_seconds(2_500_000), "2.5");
        assert_eq!(format_seconds(10_000_000), "10");
    }

    #[test]
    fn errors_and_auth_failures() {
        let m = Metrics::new(["data"]);
        m.record(
            None,
            Command::SessionSetup,
            NtStatus::MORE_PROCESSING_REQUIRED,
            ms(1),
            100,
            200,
        );
        m.record(
            None,
            Command::SessionSetup,
            NtStatus::LOGON_FAILURE,
            ms(1),
            100,
            70,
        );
        m.record(
            Some("data"),
            Command::Create,
            NtStatus::OBJECT_NAME_NOT_FOUND,
            ms(1),
            1,
            1,
        );
        let ss = m.share(None).op(Command::SessionSetup).snapshot();
        assert_eq!((ss.count, ss.errors), (2, 1));
        assert_eq!(m.auth_failures.load(Ordering::Relaxed), 1);
        assert_eq!(
            m.share(Some("data")).op(Command::Create).snapshot().errors,
            1
        );
    }

    #[test]
    fn unknown_share_gets_its_own_entry() {
        let m = Metrics::new(["data"]);
        m.record(
            Some("later"),
            Command::Write,
            NtStatus::SUCCESS,
            ms(1),
            10,
            5,
        );
        assert_eq!(m.share(Some("later")).totals().bytes_written, 10);
        let names: Vec<String> = m.shares().iter().map(|s| s.name.clone()).collect();
        assert_eq!(names, ["data", "IPC$", "", "later"]);
    }

    #[test]
    fn totals() {
        let m = Metrics::new(["data"]);
        let s = Some("data");
        m.record(s, Command::Write, NtStatus::SUCCESS, ms(1), 1000, 80);
        m.record(s, Command::Write, NtStatus::SUCCESS, ms(1), 500, 80);
        m.record(s, Command::Read, NtStatus::SUCCESS, ms(1), 100, 700);
        m.record(s, Command::Read, NtStatus::END_OF_FILE, ms(1), 100, 70);
        let t = m.share(s).totals();
        assert_eq!(t.operations, 4);
        assert_eq!(t.errors, 1);
        assert_eq!((t.write_ops, t.bytes_written), (2, 1500));
        assert_eq!((t.read_ops, t.bytes_read), (2, 770));
        assert_eq!((t.bytes_in, t.bytes_out), (1700, 930));
        assert_eq!(t.by_command, vec![("read", 2), ("write", 2)]);
    }

    #[test]
    fn prometheus_text() {
        let m = Metrics::new(["data", "we\"ird"]);
        let s = Some("data");
        m.record(
            s,
            Command::Write,
            NtStatus::SUCCESS,
            Duration::from_micros(300),
            1000,
            80,
        );
        m.record(
            s,
            Command::Write,
            NtStatus::DISK_FULL,
            Duration::from_millis(3),
            1000,
            73,
        );
        m.record(
            Some("we\"ird"),
            Command::Read,
            NtStatus::SUCCESS,
            ms(1),
            1,
            2,
        );
        m.record(
            None,
            Command::SessionSetup,
            NtStatus::LOGON_FAILURE,
            ms(1),
            100,
            70,
        );
        m.connection_opened();
        m.connection_opened();
        m.connection_closed();
        m.logons_throttled.fetch_add(2, Ordering::Relaxed);
        m.connections_refused.fetch_add(3, Ordering::Relaxed);
        let text = m.render_prometheus(Gauges {
            sessions: 3,
            channels: 5,
            durable: crate::smb::durable::DurableCounts {
                waiting: 2,
                reconnects: 4,
                expired: 1,
                restored: 6,
            },
            nfs: Some(crate::nfs::state::held::NfsGauges {
                grace_active: 1,
                clients_to_reclaim: 2,
                reclaimed_opens: 3,
                reclaimed_locks: 4,
                reclaimed_delegations: 5,
                reclaims_refused: 6,
                clients_expired: 7,
            }),
        });
        let has = |line: &str| {
            assert!(
                text.lines().any(|l| l == line),
                "missing line {line:?} in:\n{text}"
            )
        };
        has("# TYPE braid_smb_operations_total counter");
        has("# TYPE braid_smb_operation_duration_seconds histogram");
        has("braid_smb_operations_total{share=\"data\",command=\"write\"} 2");
        has("braid_smb_operation_errors_total{share=\"data\",command=\"write\"} 1");
        has("braid_smb_operations_total{share=\"\",command=\"session_setup\"} 1");
        has("braid_smb_operations_total{share=\"we\\\"ird\",command=\"read\"} 1");
        has("braid_smb_operation_duration_seconds_bucket{share=\"data\",command=\"write\",le=\"0.00025\"} 0");
        has("braid_smb_operation_duration_seconds_bucket{share=\"data\",command=\"write\",le=\"0.0005\"} 1");
        has("braid_smb_operation_duration_seconds_bucket{share=\"data\",command=\"write\",le=\"0.0025\"} 1");
        has("braid_smb_operation_duration_seconds_bucket{share=\"data\",command=\"write\",le=\"0.005\"} 2");
        has("braid_smb_operation_duration_seconds_bucket{share=\"data\",command=\"write\",le=\"+Inf\"} 2");
        has("braid_smb_operation_duration_seconds_sum{share=\"data\",command=\"write\"} 0.0033");
        has("braid_smb_operation_duration_seconds_count{share=\"data\",command=\"write\"} 2");
        has("braid_smb_bytes_total{share=\"data\",direction=\"in\"} 2000");
        has("braid_smb_bytes_total{share=\"data\",direction=\"out\"} 153");
        has("braid_connections 1");
        has("braid_connections_accepted_total 2");
        has("braid_sessions 3");
        has("braid_channels 5");
        has("braid_auth_failures_total 1");
        has("braid_logons_throttled_total 2");
        has("braid_smb_durable_opens_waiting 2");
        has("braid_smb_durable_reconnects_total 4");
        has("braid_smb_durable_expired_total 1");
        has("braid_nfs_grace_active 1");
        has("braid_nfs_clients_to_reclaim 2");
        has("braid_nfs_reclaims_total{kind=\"lock\"} 4");
        has("braid_nfs_reclaims_refused_total 6");
        has("braid_nfs_clients_expired_total 7");
        has("braid_smb_opens_restored_total 6");
        has("braid_connections_refused_total 3");
        // Shares with no traffic have no series.
        assert!(!text.contains("share=\"IPC$\""));
        // Every line is a comment or `name{labels} value` with a numeric value.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = l.rsplit_once(' ').expect(l);
            assert!(v.parse::<f64>().is_ok(), "{l}");
        }
        // Buckets are cumulative and end at the count.
        let buckets: Vec<u64> = text
            .lines()
            .filter(|l| l.starts_with("braid_smb_operation_duration_seconds_bucket{share=\"data\""))
            .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
            .collect();
        assert_eq!(buckets.len(), BUCKET_BOUNDS_US.len() + 1);
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*buckets.last().unwrap(), 2);
    }
}
