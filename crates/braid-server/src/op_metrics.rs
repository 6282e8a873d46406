//! Per-operation metrics, protocol-neutral (issues 44 "Visible" and 46):
//! every finished SMB command and NFS operation is counted once under its
//! [`OpClass`], per share and protocol, with its result, its data bytes,
//! its latency and the part of it spent throttled by QoS.
//!
//! Cardinality is bounded: shares come from the configuration (a name not
//! known at start gets an entry up to [`MAX_EXTRA_SHARES`], then counts
//! under [`OVERFLOW_SHARE`]), protocols are two, classes eleven, results
//! three. Nothing here is per file or per client (`workload.rs` keeps
//! those, capped, for the admin API only).
//!
//! The hot path is a lookup in a map fixed at start and relaxed atomic adds.
//! `operation_metrics = false` (config) turns this and `workload.rs` off:
//! both front-ends then skip them after one relaxed load
//! ([`OpMetrics::enabled`]), so their cost can be measured on and off
//! (docs/BENCHMARKS.md section 9).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use braid_advisor::{OpClass, OP_CLASSES};
use serde::Serialize;

/// Upper bounds of the latency buckets in microseconds (10 µs … 10 s);
/// `+Inf` is implicit. Finer at the bottom than the SMB command histogram:
/// metadata operations on a local disk take tens of microseconds.
pub const LATENCY_BOUNDS_US: [u64; 19] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000,
];
const NBUCKETS: usize = LATENCY_BOUNDS_US.len() + 1;

/// Shares not known at start that get their own entry.
pub const MAX_EXTRA_SHARES: usize = 64;
/// Where the others are counted.
pub const OVERFLOW_SHARE: &str = "(other)";
/// Up to this many entries fixed at start, a request's share is found by
/// comparing names rather than hashing its name.
const LINEAR_LOOKUP: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Smb,
    Nfs,
}

impl Protocol {
    pub const ALL: [Protocol; 2] = [Protocol::Smb, Protocol::Nfs];
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Smb => "smb",
            Protocol::Nfs => "nfs",
        }
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Error,
}

/// How long an operation took, and the part of it spent waiting for QoS.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpTiming {
    pub latency: Duration,
    pub throttled: Duration,
}

/// One finished operation, as a front-end reports it.
#[derive(Debug, Clone, Copy)]
pub struct OpRecord<'a> {
    pub protocol: Protocol,
    /// None: a request of no share (SMB NEGOTIATE, NFS pseudo-root).
    pub share: Option<&'a str>,
    pub class: OpClass,
    pub result: Outcome,
    /// From the request's arrival to its answer, throttled time included.
    pub latency: Duration,
    /// The part of `latency` the request waited for QoS (zero without it).
    pub throttled: Duration,
    /// File data read or written (0 for metadata operations).
    pub data_bytes: u64,
}

fn bucket_of(d: Duration) -> usize {
    let ns = d.as_nanos().min(u64::MAX as u128) as u64;
    let us = ns.div_ceil(1_000);
    LATENCY_BOUNDS_US.partition_point(|&b| b < us)
}

/// Counters of one class on one share and protocol.
#[derive(Default)]
struct ClassStats {
    success: AtomicU64,
    success_after_throttling: AtomicU64,
    errors: AtomicU64,
    data_bytes: AtomicU64,
    latency_sum_ns: AtomicU64,
    latency: [AtomicU64; NBUCKETS],
    throttled_ops: AtomicU64,
    throttled_sum_ns: AtomicU64,
    /// Throttled time of the operations that were throttled.
    throttled: [AtomicU64; NBUCKETS],
}

impl ClassStats {
    fn record(&self, r: &OpRecord) {
        let throttled = !r.throttled.is_zero();
        match (r.result, throttled) {
            (Outcome::Error, _) => &self.errors,
            (Outcome::Success, false) => &self.success,
            (Outcome::Success, true) => &self.success_after_throttling,
        }
        .fetch_add(1, Relaxed);
        if r.data_bytes > 0 {
            self.data_bytes.fetch_add(r.data_bytes, Relaxed);
        }
        let ns = r.latency.as_nanos().min(u64::MAX as u128) as u64;
        self.latency_sum_ns.fetch_add(ns, Relaxed);
        self.latency[bucket_of(r.latency)].fetch_add(1, Relaxed);
        if throttled {
            self.throttled_ops.fetch_add(1, Relaxed);
            let tns = r.throttled.as_nanos().min(u64::MAX as u128) as u64;
            self.throttled_sum_ns.fetch_add(tns, Relaxed);
            self.throttled[bucket_of(r.throttled)].fetch_add(1, Relaxed);
        }
    }

    fn snapshot(&self) -> ClassSnapshot {
        let load = |a: &[AtomicU64; NBUCKETS]| a.iter().map(|b| b.load(Relaxed)).collect();
        ClassSnapshot {
            success: self.success.load(Relaxed),
            success_after_throttling: self.success_after_throttling.load(Relaxed),
            errors: self.errors.load(Relaxed),
            data_bytes: self.data_bytes.load(Relaxed),
            latency_sum_ns: self.latency_sum_ns.load(Relaxed),
            latency: load(&self.latency),
            throttled_ops: self.throttled_ops.load(Relaxed),
            throttled_sum_ns: self.throttled_sum_ns.load(Relaxed),
            throttled: load(&self.throttled),
        }
    }
}

/// A copy of one class's counters; adds up over protocols.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassSnapshot {
    pub success: u64,
    pub success_after_throttling: u64,
    pub errors: u64,
    pub data_bytes: u64,
    pub latency_sum_ns: u64,
    /// Per-bucket (not cumulative) counts, `+Inf` last.
    pub latency: Vec<u64>,
    pub throttled_ops: u64,
    pub throttled_sum_ns: u64,
    pub throttled: Vec<u64>,
}

impl ClassSnapshot {
    pub fn count(&self) -> u64 {
        self.success + self.success_after_throttling + self.errors
    }

    fn add(&mut self, o: &ClassSnapshot) {
        self.success += o.success;
        self.success_after_throttling += o.success_after_throttling;
        self.errors += o.errors;
        self.data_bytes += o.data_bytes;
        self.latency_sum_ns += o.latency_sum_ns;
        self.throttled_ops += o.throttled_ops;
        self.throttled_sum_ns += o.throttled_sum_ns;
        for (v, w) in [
            (&mut self.latency, &o.latency),
            (&mut self.throttled, &o.throttled),
        ] {
            v.resize(NBUCKETS, 0);
            for (a, b) in v.iter_mut().zip(w) {
                *a += b;
            }
        }
    }

    /// The JSON of `/api/v1/shares` (`operations_by_type`).
    pub fn view(&self) -> ClassView {
        // The counters are read one by one while requests finish: saturate.
        let unthrottled = self.count().saturating_sub(self.throttled_ops);
        ClassView {
            count: self.count(),
            success: self.success,
            success_after_throttling: self.success_after_throttling,
            errors: self.errors,
            data_bytes: self.data_bytes,
            latency_p50_us: percentile_us(&self.latency, 0, 0.50),
            latency_p99_us: percentile_us(&self.latency, 0, 0.99),
            throttled_p50_us: percentile_us(&self.throttled, unthrottled, 0.50),
            throttled_p99_us: percentile_us(&self.throttled, unthrottled, 0.99),
            throttled_seconds: self.throttled_sum_ns as f64 / 1e9,
            latency_buckets: self.latency.clone(),
            throttled_buckets: self.throttled.clone(),
        }
    }
}

/// The `q` quantile of a bucketed distribution in microseconds, linear
/// within its bucket; `zeros` observations of exactly 0 come first (the
/// operations that were not throttled at all). 0 when empty.
pub fn percentile_us(buckets: &[u64], zeros: u64, q: f64) -> f64 {
    let total = zeros + buckets.iter().sum::<u64>();
    if total == 0 {
        return 0.0;
    }
    let rank = (q * total as f64).ceil().max(1.0) as u64;
    if rank <= zeros {
        return 0.0;
    }
    let mut seen = zeros;
    for (i, &n) in buckets.iter().enumerate() {
        if n > 0 && seen + n >= rank {
            let lo = if i == 0 { 0 } else { LATENCY_BOUNDS_US[i - 1] } as f64;
            let Some(&hi) = LATENCY_BOUNDS_US.get(i) else {
                return lo; // +Inf: the last finite bound is all we know
            };
            let within = (rank - seen) as f64 / n as f64;
            return lo + (hi as f64 - lo) * within;
        }
        seen += n;
    }
    0.0
}

#[derive(Debug, Clone, Serialize)]
pub struct ClassView {
    pub count: u64,
    pub success: u64,
    pub success_after_throttling: u64,
    pub errors: u64,
    pub data_bytes: u64,
    /// Since start; the dashboard takes percentiles of the bucket
    /// differences between two polls for the last seconds.
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    /// The part spent waiting for QoS (over every operation: 0 when fewer
    /// than half were throttled).
    pub throttled_p50_us: f64,
    pub throttled_p99_us: f64,
    pub throttled_seconds: f64,
    /// Per-bucket counts ([`LATENCY_BOUNDS_US`], `+Inf` last).
    pub latency_buckets: Vec<u64>,
    pub throttled_buckets: Vec<u64>,
}

/// Every class of one share and protocol.
struct ShareProtocol {
    classes: [ClassStats; OpClass::COUNT],
}

impl ShareProtocol {
    fn new() -> Self {
        ShareProtocol {
            classes: std::array::from_fn(|_| ClassStats::default()),
        }
    }
}

/// One share, both protocols.
pub struct ShareOps {
    pub name: String,
    by_protocol: [ShareProtocol; 2],
}

impl ShareOps {
    fn new(name: &str) -> Self {
        ShareOps {
            name: name.to_string(),
            by_protocol: [ShareProtocol::new(), ShareProtocol::new()],
        }
    }

    fn record(&self, r: &OpRecord) {
        self.by_protocol[r.protocol as usize].classes[r.class as usize].record(r);
    }

    pub fn snapshot(&self, protocol: Protocol, class: OpClass) -> ClassSnapshot {
        self.by_protocol[protocol as usize].classes[class as usize].snapshot()
    }

    /// Per class, both protocols added.
    pub fn by_class(&self) -> Vec<(OpClass, ClassSnapshot)> {
        OP_CLASSES
            .iter()
            .map(|&c| {
                let mut s = ClassSnapshot::default();
                for p in Protocol::ALL {
                    s.add(&self.snapshot(p, c));
                }
                (c, s)
            })
            .collect()
    }
}

pub struct OpMetrics {
    fixed: HashMap<String, Arc<ShareOps>>,
    order: Vec<Arc<ShareOps>>,
    extra: RwLock<HashMap<String, Arc<ShareOps>>>,
    overflow: Arc<ShareOps>,
    /// `operation_metrics`: read by the front-ends before they record.
    enabled: AtomicBool,
}

impl OpMetrics {
    /// Entries for `shares` and requests of no share ("").
    pub fn new<'a>(shares: impl IntoIterator<Item = &'a str>) -> OpMetrics {
        let mut fixed = HashMap::new();
        let mut order = Vec::new();
        for name in shares.into_iter().chain(["IPC$", ""]) {
            if fixed.contains_key(name) {
                continue;
            }
            let s = Arc::new(ShareOps::new(name));
            fixed.insert(name.to_string(), s.clone());
            order.push(s);
        }
        OpMetrics {
            fixed,
            order,
            extra: RwLock::new(HashMap::new()),
            overflow: Arc::new(ShareOps::new(OVERFLOW_SHARE)),
            enabled: AtomicBool::new(true),
        }
    }

    /// Whether operations are recorded here and in the workload table
    /// (`operation_metrics`; on SIGHUP too).
    pub fn enabled(&self) -> bool {
        self.enabled.load(Relaxed)
    }

    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Relaxed);
    }

    pub fn share(&self, name: &str) -> Arc<ShareOps> {
        if let Some(s) = self.fixed.get(name) {
            return s.clone();
        }
        if let Some(s) = self.extra.read().unwrap().get(name) {
            return s.clone();
        }
        let mut extra = self.extra.write().unwrap();
        if extra.len() >= MAX_EXTRA_SHARES && !extra.contains_key(name) {
            return self.overflow.clone();
        }
        extra
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(ShareOps::new(name)))
            .clone()
    }

    pub fn record(&self, r: &OpRecord) {
        let name = r.share.unwrap_or("");
        // A few shares: comparing names is cheaper than hashing one.
        let fixed = if self.order.len() <= LINEAR_LOOKUP {
            self.order.iter().find(|s| s.name == name)
        } else {
            self.fixed.get(name)
        };
        match fixed {
            Some(s) => s.record(r),
            None => self.share(name).record(r),
        }
    }

    /// Every entry: configured order, then the others by name.
    pub fn shares(&self) -> Vec<Arc<ShareOps>> {
        let mut v = self.order.clone();
        let mut extra: Vec<_> = self.extra.read().unwrap().values().cloned().collect();
        extra.sort_by(|a, b| a.name.cmp(&b.name));
        v.extend(extra);
        v.push(self.overflow.clone());
        v
    }

    /// The `operations_by_type` object of one share in `/api/v1/shares`.
    pub fn share_view(&self, name: &str) -> serde_json::Map<String, serde_json::Value> {
        let share = self.share(name);
        share
            .by_class()
            .into_iter()
            .map(|(c, s)| {
                (
                    c.name().to_string(),
                    serde_json::to_value(s.view()).unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The Prometheus families (one scheme for SMB and NFS): operation,
    /// share, protocol and result labels. Series with no operations are
    /// left out; every family is always declared.
    pub fn render_prometheus(&self, out: &mut String) {
        let mut rows = Vec::new();
        for s in self.shares() {
            let share = crate::metrics::escape_label(&s.name);
            for p in Protocol::ALL {
                for c in OP_CLASSES {
                    let snap = s.snapshot(p, c);
                    if snap.count() > 0 {
                        rows.push((share.clone(), p.name(), c.name(), snap));
                    }
                }
            }
        }
        let labels = |share: &str, p: &str, c: &str| {
            format!("protocol=\"{p}\",share=\"{share}\",operation=\"{c}\"")
        };
        crate::metrics::header(
            out,
            "braid_operations_total",
            "counter",
            "File operations (SMB commands and NFS operations by class), by protocol, share, operation and result (success, success_after_throttling, error).",
        );
        for (share, p, c, s) in &rows {
            let l = labels(share, p, c);
            for (result, n) in [
                ("success", s.success),
                ("success_after_throttling", s.success_after_throttling),
                ("error", s.errors),
            ] {
                let _ = writeln!(out, "braid_operations_total{{{l},result=\"{result}\"}} {n}");
            }
        }
        crate::metrics::header(
            out,
            "braid_operation_duration_seconds",
            "histogram",
            "Time from a file operation's arrival to its answer, throttled time included.",
        );
        for (share, p, c, s) in &rows {
            write_histogram(
                out,
                "braid_operation_duration_seconds",
                &labels(share, p, c),
                &s.latency,
                s.latency_sum_ns,
                s.count(),
            );
        }
        crate::metrics::header(
            out,
            "braid_operation_throttled_seconds",
            "histogram",
            "Time file operations waited for QoS, over the operations that waited.",
        );
        for (share, p, c, s) in &rows {
            if s.throttled_ops > 0 {
                write_histogram(
                    out,
                    "braid_operation_throttled_seconds",
                    &labels(share, p, c),
                    &s.throttled,
                    s.throttled_sum_ns,
                    s.throttled_ops,
                );
            }
        }
        crate::metrics::header(
            out,
            "braid_operation_data_bytes_total",
            "counter",
            "File data read and written, by protocol, share and operation.",
        );
        for (share, p, c, s) in &rows {
            if s.data_bytes > 0 {
                let _ = writeln!(
                    out,
                    "braid_operation_data_bytes_total{{{}}} {}",
                    labels(share, p, c),
                    s.data_bytes
                );
            }
        }
    }
}

fn write_histogram(
    out: &mut String,
    name: &str,
    labels: &str,
    buckets: &[u64],
    sum_ns: u64,
    count: u64,
) {
    let mut cum = 0;
    for (i, n) in buckets.iter().enumerate() {
        cum += n;
        let le = match LATENCY_BOUNDS_US.get(i) {
            Some(us) => crate::metrics::format_seconds(*us),
            None => "+Inf".to_string(),
        };
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cum}");
    }
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", sum_ns as f64 / 1e9);
    let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(
        share: &str,
        protocol: Protocol,
        class: OpClass,
        us: u64,
        throttled_us: u64,
    ) -> OpRecord<'_> {
        OpRecord {
            protocol,
            share: Some(share),
            class,
            result: Outcome::Success,
            latency: Duration::from_micros(us),
            throttled: Duration::from_micros(throttled_us),
            data_bytes: if class.is_data() { 4096 } else { 0 },
        }
    }

    #[test]
    fn results_split_by_throttling_and_protocols_add_up() {
        let m = OpMetrics::new(["data"]);
        m.record(&rec("data", Protocol::Smb, OpClass::Read, 40, 0));
        m.record(&rec("data", Protocol::Nfs, OpClass::Read, 400, 300));
        m.record(&OpRecord {
            result: Outcome::Error,
            ..rec("data", Protocol::Nfs, OpClass::Open, 20, 0)
        });
        let s = m.share("data");
        let read = s.by_class()[OpClass::Read as usize].1.clone();
        assert_eq!(
            (read.count(), read.success, read.success_after_throttling),
            (2, 1, 1)
        );
        assert_eq!(read.data_bytes, 8192);
        assert_eq!(read.throttled_ops, 1);
        let v = m.share_view("data");
        assert_eq!(v["open"]["errors"], 1);
        assert_eq!(v["read"]["count"], 2);
        assert_eq!(v["stat"]["count"], 0);
    }

    #[test]
    fn percentiles_from_buckets() {
        // 99 operations at 40 µs (bucket 25-50), 1 at 3 ms (2.5-5 ms).
        let mut b = vec![0; NBUCKETS];
        b[2] = 99;
        b[8] = 1;
        let p50 = percentile_us(&b, 0, 0.5);
        assert!((25.0..=50.0).contains(&p50), "{p50}");
        assert!(percentile_us(&b, 0, 0.99) <= 50.0);
        assert!(percentile_us(&b, 0, 1.0) > 2_500.0);
        assert_eq!(percentile_us(&[], 0, 0.5), 0.0);
        // The throttled part: 90 of 100 not throttled at all.
        let mut t = vec![0; NBUCKETS];
        t[6] = 10;
        assert_eq!(percentile_us(&t, 90, 0.5), 0.0);
        assert!(percentile_us(&t, 90, 0.99) > 500.0);
    }

    #[test]
    fn unknown_shares_are_capped() {
        let m = OpMetrics::new(["data"]);
        for i in 0..MAX_EXTRA_SHARES + 10 {
            m.record(&rec(&format!("s{i}"), Protocol::Smb, OpClass::Stat, 10, 0));
        }
        let shares = m.shares();
        assert_eq!(shares.len(), 3 + MAX_EXTRA_SHARES + 1);
        let overflow = shares.last().unwrap();
        assert_eq!(overflow.name, OVERFLOW_SHARE);
        assert_eq!(overflow.snapshot(Protocol::Smb, OpClass::Stat).count(), 10);
    }

    #[test]
    fn prometheus_one_scheme_for_both_protocols() {
        let m = OpMetrics::new(["data"]);
        m.record(&rec("data", Protocol::Smb, OpClass::Write, 300, 0));
        m.record(&rec("data", Protocol::Nfs, OpClass::Write, 300, 100));
        let mut text = String::new();
        m.render_prometheus(&mut text);
        let has = |line: &str| {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            )
        };
        has("# TYPE braid_operations_total counter");
        has("braid_operations_total{protocol=\"smb\",share=\"data\",operation=\"write\",result=\"success\"} 1");
        has("braid_operations_total{protocol=\"nfs\",share=\"data\",operation=\"write\",result=\"success_after_throttling\"} 1");
        has("braid_operation_duration_seconds_bucket{protocol=\"nfs\",share=\"data\",operation=\"write\",le=\"0.00025\"} 0");
        has("braid_operation_duration_seconds_bucket{protocol=\"nfs\",share=\"data\",operation=\"write\",le=\"0.0005\"} 1");
        has("braid_operation_throttled_seconds_count{protocol=\"nfs\",share=\"data\",operation=\"write\"} 1");
        has("braid_operation_data_bytes_total{protocol=\"smb\",share=\"data\",operation=\"write\"} 4096");
        assert!(!text.contains("braid_operation_throttled_seconds_count{protocol=\"smb\""));
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = l.rsplit_once(' ').expect(l);
            assert!(v.parse::<f64>().is_ok(), "{l}");
        }
    }
}
