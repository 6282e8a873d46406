//! QoS as operators see and change it (docs/ADMIN.md, docs/CONFIG.md):
//! the `[share.qos]` keys, each share's `"qos"` object in
//! `/api/v1/shares`, `PUT /api/v1/shares/{name}/qos`, and the `braid_qos_*`
//! lines of `/metrics`.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use braid_qos::{Limits, Reason, View};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::qos::{Class, ShareGate, WAIT_BUCKETS};
use crate::state::ServerState;

/// The keys of a `[share.qos]` table and of the admin API's PUT body.
/// Every key left out is "no limit" (or, with `provisioned_gib`, what the
/// provisioned model derives).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QosSettings {
    /// Derive iops, burst_iops, the credit bucket and ingress/egress from
    /// a provisioned size, as the cloud's provisioned SSD model does.
    pub provisioned_gib: Option<u64>,
    pub iops: Option<u64>,
    pub burst_iops: Option<u64>,
    pub burst_credits: Option<u64>,
    pub ingress_mibps: Option<f64>,
    pub egress_mibps: Option<f64>,
    pub metadata_iops: Option<u64>,
    pub file_iops: Option<u64>,
    pub file_mibps: Option<f64>,
    /// The I/O size charged as one operation, in KiB (default 64).
    pub io_unit_kib: Option<u64>,
}

impl QosSettings {
    /// The limits these settings give; the error names the key and the
    /// fix (the caller adds which share).
    pub fn limits(&self) -> Result<Limits, String> {
        let mut l = match self.provisioned_gib {
            Some(0) => {
                return Err(
                    "qos.provisioned_gib = 0: give the provisioned size in GiB (at least 1)".into(),
                )
            }
            Some(gib) => Limits::provisioned(gib),
            None => Limits::default(),
        };
        macro_rules! over {
            ($($k:ident),*) => { $( if self.$k.is_some() { l.$k = self.$k; } )* };
        }
        over!(
            iops,
            burst_iops,
            burst_credits,
            ingress_mibps,
            egress_mibps,
            metadata_iops,
            file_iops,
            file_mibps
        );
        if let Some(kib) = self.io_unit_kib {
            l.io_unit = kib.saturating_mul(1024);
        }
        l.validate()?;
        Ok(l)
    }
}

fn opt_f(v: Option<f64>) -> Value {
    v.map_or(Value::Null, |x| json!(x))
}

/// A share's `"qos"` object (the dashboard reads this exact shape).
pub fn view_json(v: &View) -> Value {
    let f = |r: Reason| v.throttled_fraction[r.index()];
    json!({
        "enabled": v.enabled,
        "iops": v.iops,
        "burst_iops": v.burst_iops,
        "credits": v.credits,
        "credit_capacity": v.credit_capacity,
        "seconds_to_empty": opt_f(v.seconds_to_empty),
        "seconds_to_full": opt_f(v.seconds_to_full),
        "ingress_mibps": opt_f(v.ingress_mibps),
        "egress_mibps": opt_f(v.egress_mibps),
        "metadata_iops": v.metadata_iops,
        "file_iops": v.file_iops,
        "file_mibps": opt_f(v.file_mibps),
        "current_iops": v.current_iops,
        "current_read_mibps": v.current_read_mibps,
        "current_write_mibps": v.current_write_mibps,
        "throttled": v.throttled,
        "throttled_fraction": {
            "iops": f(Reason::Iops),
            "ingress": f(Reason::Ingress),
            "egress": f(Reason::Egress),
            "metadata": f(Reason::Metadata),
            "file": f(Reason::File),
        },
        "queued": v.queued,
    })
}

/// The `"qos"` object of the share `name` (disabled when it has no gate).
pub fn share_qos(state: &ServerState, name: &str) -> Value {
    match state.qos.gate_any(name) {
        Some(g) => view_json(&g.view()),
        None => view_json(
            &braid_qos::ShareQos::<()>::new(Limits::default(), Default::default())
                .view(Default::default()),
        ),
    }
}

/// `PUT /api/v1/shares/{name}/qos`: new limits now, kept until the next
/// reload changes the share's `[share.qos]` table.
pub async fn put_qos(
    State(state): State<Arc<ServerState>>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> (StatusCode, Json<Value>) {
    let bad = |code: StatusCode, e: String| (code, Json(json!({ "error": e })));
    let settings: QosSettings = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("qos: {e}")),
    };
    let limits = match settings.limits() {
        Ok(l) => l,
        Err(e) => return bad(StatusCode::BAD_REQUEST, e),
    };
    if state.qos.gate_any(&name).is_none() {
        return bad(StatusCode::NOT_FOUND, format!("no share named '{name}'"));
    }
    if let Err(e) = state.qos.set(&name, limits) {
        return bad(StatusCode::BAD_REQUEST, e);
    }
    tracing::info!(share = %name, ?limits, "QoS limits changed through the admin API");
    (StatusCode::OK, Json(share_qos(&state, &name)))
}

fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The `braid_qos_*` families of `/metrics`, for every share with a gate.
pub fn render_prometheus(state: &ServerState) -> String {
    let config = state.config();
    let mut homes: Vec<String> = state
        .served_home_shares()
        .iter()
        .map(|h| h.name.clone())
        .collect();
    homes.sort();
    let gates: Vec<Arc<ShareGate>> = config
        .shares
        .iter()
        .map(|s| s.name.clone())
        .chain(homes)
        .filter_map(|name| state.qos.gate_any(&name))
        .collect();
    let mut out = String::new();
    let views: Vec<(String, View, crate::qos::CountersSnapshot)> = gates
        .iter()
        .map(|g| (label(&g.name), g.view(), g.counters.snapshot()))
        .collect();
    let mut family = |name: &str, kind: &str, help: &str, rows: &mut dyn FnMut(&mut String)| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        rows(&mut out);
    };
    let gauge = |out: &mut String, name: &str, f: &dyn Fn(&View) -> Option<f64>| {
        for (share, v, _) in &views {
            if let Some(x) = f(v) {
                let _ = writeln!(out, "{name}{{share=\"{share}\"}} {x}");
            }
        }
    };
    family(
        "braid_qos_enabled",
        "gauge",
        "1 when the share has provisioned limits.",
        &mut |o| {
            gauge(o, "braid_qos_enabled", &|v| {
                Some(if v.enabled { 1.0 } else { 0.0 })
            })
        },
    );
    family(
        "braid_qos_iops_limit",
        "gauge",
        "Provisioned baseline IOPS.",
        &mut |o| gauge(o, "braid_qos_iops_limit", &|v| v.iops.map(|x| x as f64)),
    );
    family(
        "braid_qos_burst_iops_limit",
        "gauge",
        "IOPS while burst credits last.",
        &mut |o| {
            gauge(o, "braid_qos_burst_iops_limit", &|v| {
                v.burst_iops.map(|x| x as f64)
            })
        },
    );
    family(
        "braid_qos_ingress_mibps_limit",
        "gauge",
        "Provisioned write throughput, MiB/s.",
        &mut |o| gauge(o, "braid_qos_ingress_mibps_limit", &|v| v.ingress_mibps),
    );
    family(
        "braid_qos_egress_mibps_limit",
        "gauge",
        "Provisioned read throughput, MiB/s.",
        &mut |o| gauge(o, "braid_qos_egress_mibps_limit", &|v| v.egress_mibps),
    );
    family(
        "braid_qos_credits",
        "gauge",
        "Burst credits in the bucket.",
        &mut |o| gauge(o, "braid_qos_credits", &|v| Some(v.credits)),
    );
    family(
        "braid_qos_credit_capacity",
        "gauge",
        "Size of the burst credit bucket.",
        &mut |o| gauge(o, "braid_qos_credit_capacity", &|v| Some(v.credit_capacity)),
    );
    family(
        "braid_qos_seconds_to_empty",
        "gauge",
        "At the current rate, seconds until the burst credits run out (absent: not spending).",
        &mut |o| gauge(o, "braid_qos_seconds_to_empty", &|v| v.seconds_to_empty),
    );
    family("braid_qos_seconds_to_full", "gauge", "At the current rate, seconds until the credit bucket is full (absent: full or not earning).", &mut |o| {
        gauge(o, "braid_qos_seconds_to_full", &|v| v.seconds_to_full)
    });
    family(
        "braid_qos_current_iops",
        "gauge",
        "Operations charged per second, over the last 5 s.",
        &mut |o| gauge(o, "braid_qos_current_iops", &|v| Some(v.current_iops)),
    );
    family(
        "braid_qos_current_read_mibps",
        "gauge",
        "MiB/s read, over the last 5 s.",
        &mut |o| {
            gauge(o, "braid_qos_current_read_mibps", &|v| {
                Some(v.current_read_mibps)
            })
        },
    );
    family(
        "braid_qos_current_write_mibps",
        "gauge",
        "MiB/s written, over the last 5 s.",
        &mut |o| {
            gauge(o, "braid_qos_current_write_mibps", &|v| {
                Some(v.current_write_mibps)
            })
        },
    );
    family(
        "braid_qos_throttled",
        "gauge",
        "1 when requests were held back within the last 5 s.",
        &mut |o| {
            gauge(o, "braid_qos_throttled", &|v| {
                Some(if v.throttled { 1.0 } else { 0.0 })
            })
        },
    );
    family(
        "braid_qos_throttled_fraction",
        "gauge",
        "Share of the last 60 s requests were held back, by reason.",
        &mut |o| {
            for (share, v, _) in &views {
                for r in Reason::ALL {
                    let _ = writeln!(
                        o,
                        "braid_qos_throttled_fraction{{share=\"{share}\",reason=\"{}\"}} {}",
                        r.name(),
                        v.throttled_fraction[r.index()]
                    );
                }
            }
        },
    );
    family("braid_qos_operations_total", "counter", "Requests through the share's QoS gate, by class and result: success, success_after_throttling (it waited first), error (the operation failed, not QoS).", &mut |o| {
        for (share, _, c) in &views {
            for class in Class::ALL {
                for (i, result) in ["success", "success_after_throttling", "error"].iter().enumerate() {
                    let _ = writeln!(
                        o,
                        "braid_qos_operations_total{{share=\"{share}\",class=\"{}\",result=\"{result}\"}} {}",
                        class.name(),
                        c.results[class as usize][i]
                    );
                }
            }
        }
    });
    family(
        "braid_qos_throttle_wait_seconds",
        "histogram",
        "Time requests spent held back by QoS before running (a latency component of its own).",
        &mut |o| {
            for (share, _, c) in &views {
                for (i, n) in c.wait_buckets.iter().enumerate() {
                    let le = WAIT_BUCKETS
                        .get(i)
                        .map_or("+Inf".to_string(), |b| b.to_string());
                    let _ = writeln!(o, "braid_qos_throttle_wait_seconds_bucket{{share=\"{share}\",le=\"{le}\"}} {n}");
                }
                let _ = writeln!(
                    o,
                    "braid_qos_throttle_wait_seconds_sum{{share=\"{share}\"}} {}",
                    c.wait_sum_s
                );
                let _ = writeln!(
                    o,
                    "braid_qos_throttle_wait_seconds_count{{share=\"{share}\"}} {}",
                    c.wait_count
                );
            }
        },
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_give_limits_and_name_bad_keys() {
        let s: QosSettings = toml_like(
            r#"{"iops": 500, "burst_iops": 1500, "burst_credits": 3000, "egress_mibps": 20}"#,
        );
        let l = s.limits().unwrap();
        assert_eq!(
            (l.iops, l.burst_iops, l.credit_capacity()),
            (Some(500), Some(1500), 3000.0)
        );
        assert_eq!(l.egress_mibps, Some(20.0));
        let p: QosSettings = toml_like(r#"{"provisioned_gib": 100, "burst_credits": 1000}"#);
        let l = p.limits().unwrap();
        assert_eq!(
            (l.iops, l.burst_iops, l.credit_capacity()),
            (Some(3100), Some(10000), 1000.0)
        );
        let bad: QosSettings = toml_like(r#"{"iops": 500, "burst_iops": 100}"#);
        assert!(bad
            .limits()
            .unwrap_err()
            .contains("qos.burst_iops = 100 is below qos.iops = 500"));
        assert!(serde_json::from_str::<QosSettings>(r#"{"iopz": 1}"#).is_err());
    }

    fn toml_like(s: &str) -> QosSettings {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn the_view_has_the_shape_the_dashboard_reads() {
        let mut q: braid_qos::ShareQos<()> = braid_qos::ShareQos::new(
            Limits {
                iops: Some(500),
                burst_iops: Some(1000),
                burst_credits: Some(100),
                egress_mibps: Some(20.0),
                ..Limits::default()
            },
            Default::default(),
        );
        let v = view_json(&q.view(Default::default()));
        for k in [
            "enabled",
            "iops",
            "burst_iops",
            "credits",
            "credit_capacity",
            "seconds_to_empty",
            "seconds_to_full",
            "ingress_mibps",
            "egress_mibps",
            "current_iops",
            "current_read_mibps",
            "current_write_mibps",
            "throttled",
        ] {
            assert!(v.get(k).is_some(), "{k}: {v}");
        }
        assert_eq!(v["enabled"], true);
        assert_eq!(v["iops"], 500);
        assert_eq!(v["credits"], 100.0);
        assert_eq!(v["ingress_mibps"], Value::Null);
        assert_eq!(v["egress_mibps"], 20.0);
        for r in ["iops", "ingress", "egress", "metadata", "file"] {
            assert_eq!(v["throttled_fraction"][r], 0.0, "{r}");
        }
    }
}
