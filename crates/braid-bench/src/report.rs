//! Results of one run: per-operation IOPS, throughput and latency
//! percentiles, per-channel traffic; text and JSON.

use crate::spec::{size_name, Mode, Spec};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Latency summary in microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
}

impl Latency {
    /// From a histogram of nanoseconds.
    pub fn from_hist(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |v: u64| v as f64 / 1000.0;
        Latency {
            mean: h.mean() / 1000.0,
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p99_9: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OpStats {
    pub count: u64,
    pub errors: u64,
    pub bytes: u64,
    pub iops: f64,
    pub mib_s: f64,
    pub latency_us: Latency,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChannelStats {
    pub local: String,
    pub remote: String,
    pub alive: bool,
    pub requests: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// (sent + received) MiB/s over the measured window.
    pub mib_s: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerInfo {
    pub dialect: String,
    pub signing: bool,
    pub signing_algorithm: String,
    pub encryption: bool,
    pub cipher: Option<String>,
    pub multichannel_offered: bool,
    /// Interfaces the server advertised (FSCTL_QUERY_NETWORK_INTERFACE_INFO).
    pub interfaces: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub tool: String,
    /// "smb" or "nfs".
    #[serde(default = "smb")]
    pub protocol: String,
    pub spec: Spec,
    pub server: ServerInfo,
    /// Measured seconds (warm-up excluded).
    pub elapsed_s: f64,
    /// All operations together.
    pub total: OpStats,
    /// Per operation type: read, write; or create, open, close, query_info,
    /// delete, mkdir, rmdir in metadata mode.
    pub ops: BTreeMap<String, OpStats>,
    pub channels: Vec<ChannelStats>,
    pub verify_errors: u64,
    pub warnings: Vec<String>,
    /// The server's CPU over the measured window (`--server-pid`).
    #[serde(default)]
    pub server_cpu: Option<crate::server_cpu::ServerCpu>,
    /// Each second of the measured run, by when operations completed: what
    /// a chart of IOPS over time (a burst, its end at the credit line)
    /// is drawn from.
    #[serde(default)]
    pub per_second: Vec<SecondStats>,
    /// What the advisor says of the workload just run (`braid-advisor`,
    /// the same rules as the server's `/api/v1/advice`).
    #[serde(default)]
    pub advice: Vec<braid_advisor::Advice>,
}

/// One second of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SecondStats {
    /// Seconds since measuring began (the start of this second).
    pub t: u64,
    pub ops: u64,
    pub iops: f64,
    pub mib_s: f64,
    pub errors: u64,
}

fn smb() -> String {
    "smb".into()
}

impl Report {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".into())
    }

    /// Human-readable summary.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let s = &self.spec;
        let _ = writeln!(
            o,
            "target {}  profile {}  {}",
            s.target,
            s.profile.as_deref().unwrap_or("-"),
            s.describe()
        );
        let sv = &self.server;
        if self.protocol == "nfs" {
            let _ = writeln!(
                o,
                "{}  AUTH_SYS uid {} gid {}  nconnect {}  connections {}  measured {:.1} s (warm-up {:.0} s discarded)",
                sv.dialect,
                s.uid,
                s.gid,
                s.nconnect,
                self.channels.len(),
                self.elapsed_s,
                s.warmup
            );
        } else {
            let _ = writeln!(
            o,
            "dialect {}  signing {}  encryption {}  channels {}  measured {:.1} s (warm-up {:.0} s discarded)",
            sv.dialect,
            if sv.signing { sv.signing_algorithm.as_str() } else { "off" },
            sv.cipher.as_deref().filter(|_| sv.encryption).unwrap_or("off"),
            self.channels.len(),
            self.elapsed_s,
            s.warmup
        );
        }
        let _ = writeln!(
            o,
            "{:<11} {:>10} {:>11} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
            "op",
            "count",
            "IOPS",
            "MiB/s",
            "p50 us",
            "p90 us",
            "p99 us",
            "p99.9 us",
            "max us",
            "errors"
        );
        let mut rows: Vec<(&str, &OpStats)> =
            self.ops.iter().map(|(k, v)| (k.as_str(), v)).collect();
        if self.ops.len() > 1 {
            rows.push(("total", &self.total));
        }
        for (name, st) in rows {
            let l = &st.latency_us;
            let _ = writeln!(
                o,
                "{:<11} {:>10} {:>11.0} {:>10.1} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>7}",
                name, st.count, st.iops, st.mib_s, l.p50, l.p90, l.p99, l.p99_9, l.max, st.errors
            );
        }
        if let Some(c) = &self.server_cpu {
            let _ = writeln!(
                o,
                "server (pid {}) CPU {:.2} s  {:.3} CPU-s/GiB  {:.1} CPU-us/op",
                c.pid, c.seconds, c.seconds_per_gib, c.us_per_op
            );
        }
        for (i, c) in self.channels.iter().enumerate() {
            let _ = writeln!(
                o,
                "channel {i}: {} -> {}  {} requests  sent {:.1} MiB  received {:.1} MiB  {:.1} MiB/s{}",
                c.local,
                c.remote,
                c.requests,
                c.bytes_sent as f64 / 1048576.0,
                c.bytes_received as f64 / 1048576.0,
                c.mib_s,
                if c.alive { "" } else { "  (lost)" }
            );
        }
        if s.verify && s.mode == Mode::Io {
            let _ = writeln!(o, "verify: {} mismatches", self.verify_errors);
        }
        for w in &self.warnings {
            let _ = writeln!(o, "warning: {w}");
        }
        for a in &self.advice {
            let _ = writeln!(o, "advice [{}]: {}", a.id, a.headline);
            for e in &a.evidence {
                let _ = writeln!(o, "    - {e}");
            }
        }
        o
    }

    /// The run as the advisor sees a workload: what the load generator
    /// kept in flight, its I/O sizes and mix, files and channels, and what
    /// the server offered.
    pub fn workload(&self) -> braid_advisor::Workload {
        use braid_advisor::OpClass;
        let s = &self.spec;
        let in_flight = u64::from(s.threads.max(1)) * u64::from(s.queue_depth.max(1));
        let mut w = braid_advisor::Workload {
            protocol: self.protocol.clone(),
            subject: "this bench run".into(),
            seconds: self.elapsed_s,
            mean_in_flight: in_flight as f64,
            max_in_flight: in_flight,
            channels: self.channels.iter().filter(|c| c.alive).count() as u64,
            channels_max: self.channels.len() as u64,
            interfaces_offered: self.server.interfaces.len() as u64,
            multichannel_offered: self.server.multichannel_offered,
            ..Default::default()
        };
        for (name, st) in &self.ops {
            let class = match name.as_str() {
                "read" => OpClass::Read,
                "write" => OpClass::Write,
                "create" | "mkdir" => OpClass::Create,
                "open" => OpClass::Open,
                "close" => OpClass::Close,
                "delete" | "rmdir" | "remove" | "unlink" => OpClass::Delete,
                "rename" => OpClass::Rename,
                "query_info" | "stat" | "getattr" => OpClass::Stat,
                "list" | "readdir" | "query_directory" => OpClass::List,
                _ => OpClass::Other,
            };
            *w.ops.entry(class).or_default() += st.count;
            if class.is_data() {
                w.add_io(u64::from(s.io_size), st.count);
                if class == OpClass::Read {
                    w.bytes_read += st.bytes;
                    if !s.random {
                        w.sequential_reads += st.count;
                    }
                    if in_flight == 1 {
                        w.lone_reads += st.count;
                    }
                } else {
                    w.bytes_written += st.bytes;
                }
            }
        }
        w.files_touched = match s.mode {
            Mode::Io => u64::from(s.files),
            Mode::Metadata => in_flight * u64::from(s.md_files),
        };
        w
    }

    /// "64k randread" style label of the load.
    pub fn short(&self) -> String {
        format!(
            "{} {}",
            size_name(self.spec.io_size as u64),
            if self.spec.read_pct == 100 {
                "read"
            } else {
                "write"
            }
        )
    }
}
