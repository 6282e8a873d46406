//! The workload part of the admin API (docs/ADMIN.md), read by the
//! dashboard and `braid status --advice`:
//!
//! - `GET /api/v1/clients`: each client session's workload over the last
//!   minute (rates, requests in flight, I/O sizes, mix, files, channels),
//!   its advice, and the top clients and files;
//! - `GET /api/v1/advice`: the advice alone, one line per finding with its
//!   evidence.
//!
//! The advice comes from `braid-advisor` (sans-IO) fed with what
//! `workload.rs` measured, the session's channels, what the server offers,
//! and the share's QoS and metadata cache objects of `/api/v1/shares` when
//! the server has them (read by name from the share's JSON, so this file
//! does not depend on those layers' types).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use braid_advisor::{advise, size_label, Advice, CacheStats, OpClass, Throttling, Workload};
use serde::Serialize;
use serde_json::Value;

use crate::op_metrics::Protocol;
use crate::smb::session::SessionPhase;
use crate::state::ServerState;
use crate::workload::{workload_of, Counters, SessionWorkload, WINDOW};

/// Top clients and files listed.
const TOP: usize = 10;

#[derive(Debug, Serialize)]
pub struct ClientsView {
    pub window_seconds: u64,
    pub sessions: Vec<WorkloadView>,
    pub top_clients: Vec<TopClient>,
    pub top_files: Vec<TopFile>,
}

#[derive(Debug, Serialize)]
pub struct WorkloadView {
    pub protocol: &'static str,
    /// As `/api/v1/sessions` shows it.
    pub session_id: u64,
    /// "smb:" or "nfs:" and the id in 16 hex digits (the end of the
    /// session's `id_hex`): exact where a JSON number is not (JavaScript).
    pub session_key: String,
    pub client_address: String,
    /// The last share the session used.
    pub share: Option<String>,
    /// The session still exists (an ended one is kept for its advice).
    pub active: bool,
    pub idle_seconds: f64,
    /// The window measured: the last minute, or since the session began.
    pub window_seconds: f64,
    pub operations: u64,
    pub operations_per_second: f64,
    pub read_mibps: f64,
    pub write_mibps: f64,
    pub operations_by_type: BTreeMap<OpClass, u64>,
    /// Create, open, close, delete, rename, stat and list over all.
    pub metadata_fraction: f64,
    pub in_flight: u64,
    pub mean_in_flight: f64,
    pub max_in_flight: u64,
    /// Reads and writes by size: `[{"up_to": "4 KiB", "count": n}, …]`.
    pub io_sizes: Vec<SizeCount>,
    pub files_touched: u64,
    pub sequential_reads: u64,
    pub lone_reads: u64,
    pub throttled_operations: u64,
    pub throttled_seconds: f64,
    /// Channels (SMB) or fore-channel connections (NFS) now, and the most.
    pub channels: u64,
    pub channels_max: u64,
    /// Since the session began.
    pub operations_total: u64,
    pub advice: Vec<Advice>,
}

#[derive(Debug, Serialize)]
pub struct SizeCount {
    pub up_to: String,
    pub count: u64,
}

#[derive(Debug, Serialize)]
pub struct TopClient {
    pub client_address: String,
    pub protocol: &'static str,
    pub sessions: usize,
    pub operations: u64,
    pub operations_per_second: f64,
    pub mibps: f64,
}

#[derive(Debug, Serialize)]
pub struct TopFile {
    /// "share\path" (SMB) or "export/name" (NFS).
    pub file: String,
    /// Operations counted (an upper bound once more files than the table
    /// holds were seen).
    pub operations: u64,
}

#[derive(Debug, Serialize)]
pub struct AdviceView {
    pub window_seconds: u64,
    pub advice: Vec<AdviceLine>,
}

#[derive(Debug, Serialize)]
pub struct AdviceLine {
    pub protocol: &'static str,
    pub session_id: u64,
    pub session_key: String,
    pub client_address: String,
    pub share: Option<String>,
    pub active: bool,
    #[serde(flatten)]
    pub advice: Advice,
}

/// What the server knows of a session beyond its workload.
struct SessionFacts {
    channels: u64,
    channels_max: u64,
}

fn session_facts(state: &ServerState) -> HashMap<(Protocol, u64), SessionFacts> {
    let mut out = HashMap::new();
    for s in state.smb.sessions.values() {
        if s.phase() == SessionPhase::Expired {
            continue;
        }
        let n = s
            .channels
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.conn.strong_count() > 0)
            .count() as u64;
        out.insert(
            (Protocol::Smb, s.id),
            SessionFacts {
                channels: n,
                channels_max: n,
            },
        );
    }
    if let Some(nfs) = state.nfs.get() {
        for s in nfs.sessions.all() {
            let mut tail = [0u8; 8];
            tail.copy_from_slice(&s.id[8..]);
            let (current, max) = s.fore_connections();
            out.insert(
                (Protocol::Nfs, u64::from_be_bytes(tail)),
                SessionFacts {
                    channels: current as u64,
                    channels_max: max as u64,
                },
            );
        }
    }
    out
}

fn f(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// The QoS and metadata cache objects of each share, when present
/// (issues 45 and 44).
fn share_layers(state: &ServerState) -> HashMap<String, (Option<Throttling>, Option<CacheStats>)> {
    let shares = serde_json::to_value(crate::admin::shares_view(state)).unwrap_or_default();
    let mut out = HashMap::new();
    for sh in shares["shares"].as_array().into_iter().flatten() {
        let Some(name) = sh["name"].as_str() else {
            continue;
        };
        let throttling = sh.get("qos").filter(|q| q["enabled"] == true).map(|q| {
            let t = &q["throttled_fraction"];
            Throttling {
                iops: f(t, "iops"),
                ingress: f(t, "ingress"),
                egress: f(t, "egress"),
                metadata: f(t, "metadata"),
                file: f(t, "file"),
                iops_limit: q["iops"].as_f64(),
                ingress_mibps: q["ingress_mibps"].as_f64(),
                egress_mibps: q["egress_mibps"].as_f64(),
            }
        });
        let cache = sh.get("metadata_cache").map(|c| CacheStats {
            enabled: c["enabled"] == true,
            hits: c["hits"].as_u64().unwrap_or(0),
            misses: c["misses"].as_u64().unwrap_or(0),
            negative_hits: c["negative_hits"].as_u64().unwrap_or(0),
        });
        out.insert(name.to_string(), (throttling, cache));
    }
    out
}

/// Every tracked session's window, with the facts the advisor needs.
fn windows(state: &ServerState) -> Vec<(Arc<SessionWorkload>, Counters, Workload, bool)> {
    let config = state.config();
    let facts = session_facts(state);
    let layers = share_layers(state);
    let interfaces = crate::smb::interfaces::list(&config).len() as u64;
    state
        .metrics
        .workloads
        .windowed(Instant::now())
        .into_iter()
        .map(|(s, c, secs)| {
            let mut w = workload_of(&s, &c, secs);
            let fact = facts.get(&(s.protocol, s.id));
            w.subject = format!(
                "{} session {:#x} from {}",
                s.protocol.name(),
                s.id,
                s.client
            );
            w.channels = fact.map_or(0, |f| f.channels);
            w.channels_max = fact.map_or(0, |f| f.channels_max);
            if s.protocol == Protocol::Smb {
                w.interfaces_offered = interfaces;
                w.multichannel_offered = config.multichannel;
                w.channel_limit = config.max_channels as u64;
            }
            if let Some((t, cache)) = w.share.as_ref().and_then(|n| layers.get(n)) {
                w.throttling = t.clone();
                w.cache = cache.clone();
            }
            (s, c, w, fact.is_some())
        })
        .collect()
}

fn session_key(s: &SessionWorkload) -> String {
    format!("{}:{:016x}", s.protocol.name(), s.id)
}

pub fn clients_view(state: &ServerState) -> ClientsView {
    let table = &state.metrics.workloads;
    let mut sessions = Vec::new();
    let mut clients: HashMap<(String, Protocol), TopClient> = HashMap::new();
    for (s, c, w, active) in windows(state) {
        let secs = w.seconds.max(1e-3);
        let ops = c.total_ops();
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64 / secs;
        let top = clients
            .entry((s.client.clone(), s.protocol))
            .or_insert_with(|| TopClient {
                client_address: s.client.clone(),
                protocol: s.protocol.name(),
                sessions: 0,
                operations: 0,
                operations_per_second: 0.0,
                mibps: 0.0,
            });
        top.sessions += 1;
        top.operations += ops;
        top.operations_per_second += ops as f64 / secs;
        top.mibps += mib(c.bytes_read + c.bytes_written);
        sessions.push(WorkloadView {
            protocol: s.protocol.name(),
            session_id: s.id,
            session_key: session_key(&s),
            client_address: s.client.clone(),
            share: w.share.clone(),
            active,
            idle_seconds: table.idle_seconds(&s),
            window_seconds: w.seconds,
            operations: ops,
            operations_per_second: ops as f64 / secs,
            read_mibps: mib(c.bytes_read),
            write_mibps: mib(c.bytes_written),
            operations_by_type: w.ops.clone(),
            metadata_fraction: if ops == 0 {
                0.0
            } else {
                w.metadata_ops() as f64 / ops as f64
            },
            in_flight: s.in_flight(),
            mean_in_flight: w.mean_in_flight,
            max_in_flight: w.max_in_flight,
            io_sizes: c
                .io_sizes
                .iter()
                .enumerate()
                .map(|(i, n)| SizeCount {
                    up_to: size_label(i),
                    count: *n,
                })
                .collect(),
            files_touched: w.files_touched,
            sequential_reads: w.sequential_reads,
            lone_reads: w.lone_reads,
            throttled_operations: w.throttled_ops,
            throttled_seconds: w.throttled_seconds,
            channels: w.channels,
            channels_max: w.channels_max,
            operations_total: s.counters().total_ops(),
            advice: advise(&w),
        });
    }
    // Busiest first.
    sessions.sort_by(|a, b| {
        b.operations
            .cmp(&a.operations)
            .then(a.session_id.cmp(&b.session_id))
    });
    let mut top_clients: Vec<TopClient> = clients.into_values().collect();
    top_clients.sort_by(|a, b| {
        b.operations
            .cmp(&a.operations)
            .then_with(|| a.client_address.cmp(&b.client_address))
    });
    top_clients.truncate(TOP);
    ClientsView {
        window_seconds: WINDOW.as_secs(),
        sessions,
        top_clients,
        top_files: table
            .top_files
            .top(TOP)
            .into_iter()
            .map(|(file, operations)| TopFile { file, operations })
            .collect(),
    }
}

pub fn advice_view(state: &ServerState) -> AdviceView {
    let mut advice = Vec::new();
    for (s, _, w, active) in windows(state) {
        for a in advise(&w) {
            advice.push(AdviceLine {
                protocol: s.protocol.name(),
                session_id: s.id,
                session_key: session_key(&s),
                client_address: s.client.clone(),
                share: w.share.clone(),
                active,
                advice: a,
            });
        }
    }
    AdviceView {
        window_seconds: WINDOW.as_secs(),
        advice,
    }
}
