//! The rules. Each looks at one aspect of a [`Workload`] and, when the
//! numbers are clear enough, says what to do and why. Thresholds are
//! deliberately wide: advice is for workloads that plainly have the
//! shape, not for borderline ones. The figures quoted come from the
//! mission brief (sections 1, 2, 3 and 5).

use serde::{Deserialize, Serialize};

use crate::workload::size_label;
use crate::{OpClass, Workload};

/// Below this many operations in the window a workload's shape says
/// nothing (its share's throttling still does).
pub const MIN_OPERATIONS: u64 = 100;

/// One line of advice and the measurements behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Advice {
    /// Stable identifier ("single_request_small_io", …) for scripts and tests.
    pub id: String,
    pub headline: String,
    pub evidence: Vec<String>,
}

/// All the advice for one workload, most important first.
pub fn advise(w: &Workload) -> Vec<Advice> {
    // Throttling is the share's state, seen by any session that used it: a
    // session held back makes few operations by design, so it needs no
    // minimum. The workload's own shape does.
    let mut out = if w.total() > 0 {
        throttled(w)
    } else {
        Vec::new()
    };
    if w.total() < MIN_OPERATIONS {
        return out;
    }
    let rules: [fn(&Workload) -> Option<Advice>; 4] = [
        single_request_small_io,
        one_channel_for_parallel_io,
        metadata_heavy,
        nfs_sequential_small_reads,
    ];
    out.extend(rules.iter().filter_map(|rule| rule(w)));
    out
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn io_distribution(w: &Workload) -> String {
    let total: u64 = w.io_sizes.iter().sum();
    let parts: Vec<String> = w
        .io_sizes
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| format!("≤{} {:.0}%", size_label(i), pct(*n, total)))
        .collect();
    format!(
        "I/O sizes ({} reads and writes): {}",
        total,
        parts.join(", ").replace("≤> ", "> ")
    )
}

/// Mission 1: single-threaded, small I/O at low queue depth gains nothing
/// from more channels and loses ~10% with them (the NFS guidance says the
/// same of nconnect for latency-bound work).
fn single_request_small_io(w: &Workload) -> Option<Advice> {
    let data = w.data_ops();
    if data < MIN_OPERATIONS || data * 2 < w.total() || w.mean_in_flight >= 1.5 {
        return None;
    }
    let median = w.median_io_bucket()?;
    if median > 2 {
        return None; // the median I/O is above 16 KiB
    }
    let more = if w.protocol == "nfs" {
        "connections (nconnect)"
    } else {
        "channels (multichannel)"
    };
    Some(Advice {
        id: "single_request_small_io".into(),
        headline: format!(
            "This workload keeps one {} request in flight: more {more} will not speed it up and can cost ~10%; \
             run more requests at once (threads, queue depth) or use larger I/O",
            size_label(median)
        ),
        evidence: vec![
            format!(
                "{:.2} requests in flight on average (at most {})",
                w.mean_in_flight, w.max_in_flight
            ),
            io_distribution(w),
            format!(
                "{:.0}% of {} operations are reads and writes",
                pct(data, w.total()),
                w.total()
            ),
            format!("{} channel(s) or connection(s) in use", w.channels.max(1)),
        ],
    })
}

/// Mission 1 and 2: parallel work on one channel while the server offers
/// more gains 2-4x from multichannel or nconnect.
fn one_channel_for_parallel_io(w: &Workload) -> Option<Advice> {
    let data = w.data_ops();
    // A server sees a request from its arrival until its answer is queued:
    // requests waiting behind large answers on one connection are not in
    // its mean, so the peak counts too.
    let parallel = w.mean_in_flight >= 4.0 || w.max_in_flight >= 8;
    if data < MIN_OPERATIONS || data * 2 < w.total() || !parallel || w.channels > 1 {
        return None;
    }
    let median = w.median_io_bucket()?;
    // Small I/O on one file gains little; large I/O or many files gain.
    if median < 3 && w.files_touched < 2 {
        return None;
    }
    let mut evidence = vec![
        format!(
            "{:.1} requests in flight on average, up to {} at once, over {} file(s)",
            w.mean_in_flight, w.max_in_flight, w.files_touched
        ),
        io_distribution(w),
    ];
    let headline = if w.protocol == "nfs" {
        evidence.push("1 TCP connection carries the session".into());
        "This client keeps many requests in flight over one connection: mount with nconnect=4 \
         (reads gain 2-4x, writes ~3x at 64 KiB and up)"
            .to_string()
    } else {
        // channel_limit 0: not known (a client cannot see the server's cap).
        if !w.multichannel_offered || w.channel_limit == 1 {
            evidence.push("the server does not offer multichannel now".into());
            return Some(Advice {
                id: "one_channel_parallel_io".into(),
                headline: "This session runs parallel I/O over one channel and the server offers no multichannel: \
                           set multichannel = true (parallel multi-file I/O gains 2-4x)"
                    .into(),
                evidence,
            });
        }
        evidence.push(if w.channel_limit > 1 {
            format!(
                "1 channel in use; the server offers {} interface(s) and up to {} channels per session",
                w.interfaces_offered, w.channel_limit
            )
        } else {
            format!(
                "1 channel in use; the server offers multichannel on {} interface(s)",
                w.interfaces_offered
            )
        });
        format!(
            "This client uses one channel while the server offers {} interface(s): its multichannel is off, \
             or it connected before multichannel was enabled (reconnect); parallel I/O gains 2-4x with more channels",
            w.interfaces_offered.max(1)
        )
    };
    Some(Advice {
        id: "one_channel_parallel_io".into(),
        headline,
        evidence,
    })
}

/// Mission 3: a metadata-heavy workload is what the metadata cache is for.
fn metadata_heavy(w: &Workload) -> Option<Advice> {
    let md = w.metadata_ops();
    let total = w.total();
    if md * 100 < total * 60 {
        return None;
    }
    let mut top: Vec<(OpClass, u64)> = w
        .ops
        .iter()
        .filter(|(c, n)| c.is_metadata() && **n > 0)
        .map(|(c, n)| (*c, *n))
        .collect();
    top.sort_by_key(|b| std::cmp::Reverse(b.1));
    let names: Vec<&str> = top.iter().take(4).map(|(c, _)| c.name()).collect();
    let mut evidence = vec![format!(
        "{} of {} operations: {}",
        md,
        total,
        top.iter()
            .map(|(c, n)| format!("{} {:.0}%", c.name(), pct(*n, total)))
            .collect::<Vec<_>>()
            .join(", ")
    )];
    let cache_line = match &w.cache {
        Some(c) if c.enabled => {
            let lookups = c.hits + c.negative_hits + c.misses;
            format!(
                "the metadata cache served {:.0}% of {} lookups ({} hits, {} negative hits, {} misses)",
                pct(c.hits + c.negative_hits, lookups),
                lookups,
                c.hits,
                c.negative_hits,
                c.misses
            )
        }
        Some(_) => "the metadata cache is off for this share (it is on by default): remove \
                    metadata_cache = false from its [[share]] and --no-metadata-cache from the \
                    command line (create/open/close latency -30% or better)"
            .into(),
        None => "no metadata cache statistics for this share".into(),
    };
    evidence.push(cache_line);
    Some(Advice {
        id: "metadata_heavy".into(),
        headline: format!(
            "{:.0}% of operations are {}: this workload is metadata-heavy",
            pct(md, total),
            names.join("/")
        ),
        evidence,
    })
}

/// Mission 5: a share held back by its provisioned limits.
fn throttled(w: &Workload) -> Vec<Advice> {
    let Some(t) = &w.throttling else {
        return Vec::new();
    };
    let limits = [
        ("egress", t.egress, "egress_mibps", t.egress_mibps),
        ("ingress", t.ingress, "ingress_mibps", t.ingress_mibps),
        ("iops", t.iops, "iops (or burst_iops)", t.iops_limit),
    ];
    let mut out = Vec::new();
    for (name, fraction, key, limit) in limits {
        if fraction < 0.10 {
            continue;
        }
        let mut evidence = vec![format!(
            "throttled on {name} {:.0}% of the last {:.0} s",
            fraction * 100.0,
            w.seconds
        )];
        if let Some(l) = limit {
            evidence.push(format!("{key} = {l}"));
        }
        if w.throttled_ops > 0 {
            evidence.push(format!(
                "{} operations of this session waited {:.1} s in all",
                w.throttled_ops, w.throttled_seconds
            ));
        }
        out.push(Advice {
            id: format!("throttled_{name}"),
            headline: format!(
                "This share spent {:.0}% of the window throttled on {name}: raise {key} or spread the load over shares",
                fraction * 100.0
            ),
            evidence,
        });
    }
    out
}

/// Mission 2: sequential reads issued one small request at a time are the
/// signature of a Linux NFS client's default 128 KiB read-ahead.
fn nfs_sequential_small_reads(w: &Workload) -> Option<Advice> {
    let reads = w.count(OpClass::Read);
    if w.protocol != "nfs" || reads < MIN_OPERATIONS {
        return None;
    }
    if w.sequential_reads * 10 < reads * 8 || w.lone_reads * 10 < reads * 8 {
        return None;
    }
    let median = w.median_io_bucket()?;
    if median > 4 {
        return None; // above 128 KiB
    }
    Some(Advice {
        id: "nfs_sequential_small_reads".into(),
        headline: format!(
            "Sequential {} reads one at a time from this NFS client: raise its read_ahead_kb \
             (e.g. 15360 in /sys/class/bdi/<device>/read_ahead_kb)",
            size_label(median)
        ),
        evidence: vec![
            format!(
                "{:.0}% of {} reads continue where the last one ended",
                pct(w.sequential_reads, reads),
                reads
            ),
            format!(
                "{:.0}% of reads arrived with nothing else in flight",
                pct(w.lone_reads, reads)
            ),
            io_distribution(w),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(w: &Workload) -> Vec<String> {
        advise(w).into_iter().map(|a| a.id).collect()
    }

    fn io(protocol: &str, class: OpClass, n: u64, size: u64, in_flight: f64) -> Workload {
        let mut w = Workload {
            protocol: protocol.into(),
            seconds: 60.0,
            mean_in_flight: in_flight,
            max_in_flight: in_flight.ceil() as u64,
            channels: 1,
            channels_max: 1,
            interfaces_offered: 2,
            multichannel_offered: true,
            channel_limit: 32,
            files_touched: 1,
            ..Workload::default()
        };
        w.ops.insert(class, n);
        w.ops.insert(OpClass::Open, 1);
        w.ops.insert(OpClass::Close, 1);
        w.add_io(size, n);
        w
    }

    #[test]
    fn too_few_operations_get_nothing() {
        assert!(ids(&io("smb", OpClass::Read, 50, 4096, 1.0)).is_empty());
    }

    #[test]
    fn qd1_small_io_says_channels_will_not_help() {
        let w = io("smb", OpClass::Read, 5000, 4096, 1.0);
        assert_eq!(ids(&w), ["single_request_small_io"]);
        let a = &advise(&w)[0];
        assert!(a.headline.contains("4 KiB"), "{}", a.headline);
        assert!(a.evidence[0].starts_with("1.00 requests in flight"));
        // Deep queues or large I/O do not get it.
        assert!(!ids(&io("smb", OpClass::Read, 5000, 4096, 8.0))
            .contains(&"single_request_small_io".into()));
        assert!(ids(&io("smb", OpClass::Read, 5000, 1 << 20, 1.0)).is_empty());
    }

    #[test]
    fn parallel_large_io_on_one_channel() {
        let mut w = io("smb", OpClass::Write, 3000, 1 << 20, 16.0);
        w.files_touched = 4;
        assert_eq!(ids(&w), ["one_channel_parallel_io"]);
        assert!(advise(&w)[0].headline.contains("offers 2 interface"));
        // A server that sees 16 at once but 1.5 on average (the rest wait
        // behind large answers on the one connection): still parallel.
        w.mean_in_flight = 1.5;
        assert_eq!(ids(&w), ["one_channel_parallel_io"]);
        w.max_in_flight = 2;
        assert!(ids(&w).is_empty());
        w.max_in_flight = 16;
        // With four channels it is already done.
        w.channels = 4;
        assert!(ids(&w).is_empty());
        // NFS: nconnect.
        let mut n = io("nfs", OpClass::Read, 3000, 1 << 20, 16.0);
        n.files_touched = 4;
        assert!(advise(&n)[0].headline.contains("nconnect=4"));
        // Multichannel off on the server: say so.
        w.channels = 1;
        w.multichannel_offered = false;
        assert!(advise(&w)[0].headline.contains("multichannel = true"));
    }

    #[test]
    fn metadata_heavy_names_the_cache() {
        let mut w = Workload {
            protocol: "smb".into(),
            mean_in_flight: 1.0,
            ..Workload::default()
        };
        for c in [
            OpClass::Create,
            OpClass::Open,
            OpClass::Close,
            OpClass::Stat,
            OpClass::Delete,
        ] {
            w.ops.insert(c, 200);
        }
        w.ops.insert(OpClass::Write, 100);
        assert_eq!(ids(&w), ["metadata_heavy"]);
        let a = &advise(&w)[0];
        assert!(
            a.headline.starts_with("91% of operations are"),
            "{}",
            a.headline
        );
        assert_eq!(a.evidence[1], "no metadata cache statistics for this share");
        w.cache = Some(crate::CacheStats {
            enabled: true,
            hits: 75,
            negative_hits: 5,
            misses: 20,
        });
        assert!(
            advise(&w)[0].evidence[1].starts_with("the metadata cache served 80% of 100 lookups")
        );
        w.cache = Some(crate::CacheStats::default());
        assert!(advise(&w)[0].evidence[1].contains("remove metadata_cache = false"));
        // Mostly data: not metadata-heavy.
        w.ops.insert(OpClass::Write, 5000);
        assert!(!ids(&w).contains(&"metadata_heavy".into()));
    }

    #[test]
    fn throttled_on_egress() {
        let mut w = io("smb", OpClass::Read, 3000, 1 << 20, 16.0);
        w.channels = 4;
        w.throttling = Some(crate::Throttling {
            egress: 0.4,
            iops: 0.05,
            egress_mibps: Some(50.0),
            ..Default::default()
        });
        assert_eq!(ids(&w), ["throttled_egress"]);
        let a = &advise(&w)[0];
        assert!(a.headline.contains("40% of the window throttled on egress"));
        assert!(a.headline.contains("raise egress_mibps"));
        assert_eq!(a.evidence[1], "egress_mibps = 50");
        // A session held back makes few operations: still advised.
        let mut few = io("smb", OpClass::Read, 20, 1 << 20, 1.0);
        few.throttling = w.throttling.clone();
        assert_eq!(ids(&few), ["throttled_egress"]);
    }

    #[test]
    fn nfs_sequential_reads_one_at_a_time() {
        let mut w = io("nfs", OpClass::Read, 2000, 128 << 10, 1.0);
        w.sequential_reads = 1990;
        w.lone_reads = 2000;
        assert_eq!(ids(&w), ["nfs_sequential_small_reads"]);
        assert!(advise(&w)[0].headline.contains("128 KiB"));
        // Random reads, or SMB, do not get it.
        w.sequential_reads = 100;
        assert!(ids(&w).is_empty());
        w.sequential_reads = 1990;
        w.protocol = "smb".into();
        assert!(ids(&w).is_empty());
    }
}
