//! A share's limits as buckets, and the decision for one request: go now
//! (and pay), or wait until a given time, for a given reason.
//!
//! The IOPS model (the cloud's burst credits): the baseline bucket fills
//! at `iops`; what overflows it — baseline not used — is earned as burst
//! credits, up to the credit bucket's size. An operation is paid from the
//! baseline bucket first and from credits for what the baseline cannot
//! cover, so credits are spent one per operation above the baseline; and
//! every operation passes the burst-rate bucket, so the share never goes
//! above `burst_iops`. Every bucket starts full.

use std::collections::HashMap;
use std::time::Duration;

use crate::bucket::{wait_secs, Bucket, EPSILON};
use crate::limits::{mib, Cost, Limits};

/// How long a bucket's capacity lasts at its rate: how far above its rate
/// a share may go within a moment (a tenth of a second's worth). Smaller
/// makes the rate smoother and requests wait more often.
pub const SMOOTHING: f64 = 0.1;

/// Per-file buckets not used for this long are dropped (they are full
/// again by then, so dropping them changes nothing).
const FILE_IDLE: Duration = Duration::from_secs(10);

/// Why a request waits, in the order [`Reason::ALL`] lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The share's IOPS (baseline, burst credits, burst rate).
    Iops,
    Ingress,
    Egress,
    Metadata,
    /// A per-file limit.
    File,
}

impl Reason {
    pub const ALL: [Reason; 5] = [
        Reason::Iops,
        Reason::Ingress,
        Reason::Egress,
        Reason::Metadata,
        Reason::File,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Reason::Iops => "iops",
            Reason::Ingress => "ingress",
            Reason::Egress => "egress",
            Reason::Metadata => "metadata",
            Reason::File => "file",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// The decision for one request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    /// Admitted and paid for.
    Go,
    /// Not before `until`, held back by `reason` (the limit that lets it
    /// go last); `until` is None when nothing will ever refill (never with
    /// validated limits).
    Wait {
        until: Option<Duration>,
        reason: Reason,
    },
}

#[derive(Debug)]
struct FileBuckets {
    iops: Option<Bucket>,
    bytes: Option<Bucket>,
    last_used: Duration,
}

#[derive(Debug)]
pub struct Throttle {
    limits: Limits,
    baseline: Option<Bucket>,
    /// Only when `burst_iops` is above the baseline.
    burst_rate: Option<Bucket>,
    credits: f64,
    credit_capacity: f64,
    ingress: Option<Bucket>,
    egress: Option<Bucket>,
    metadata: Option<Bucket>,
    files: HashMap<u64, FileBuckets>,
    last_sweep: Duration,
}

fn bucket_of(rate: Option<f64>, now: Duration) -> Option<Bucket> {
    rate.map(|r| Bucket::full(r, (r * SMOOTHING).max(1.0), now))
}

impl Throttle {
    /// Every bucket full at `now`, the credit bucket too.
    pub fn new(limits: Limits, now: Duration) -> Throttle {
        let mut t = Throttle {
            limits: Limits::default(),
            baseline: None,
            burst_rate: None,
            credits: 0.0,
            credit_capacity: 0.0,
            ingress: None,
            egress: None,
            metadata: None,
            files: HashMap::new(),
            last_sweep: now,
        };
        t.set_limits(limits, now);
        t.credits = t.credit_capacity;
        t
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Burst credits now (after bringing the buckets up to `now`).
    pub fn credits(&mut self, now: Duration) -> f64 {
        self.refill(now);
        self.credits
    }

    pub fn credit_capacity(&self) -> f64 {
        self.credit_capacity
    }

    /// New limits from `now` on, mid-burst or not: what accrued until now
    /// accrued under the old limits; credits are kept up to the new bucket
    /// size (a bucket that appears starts empty: credits are earned). Per
    /// file buckets start again full under the new per-file limits.
    pub fn set_limits(&mut self, limits: Limits, now: Duration) {
        self.refill(now);
        let rate = |v: Option<u64>| v.map(|x| x as f64);
        let reconf = |slot: &mut Option<Bucket>, r: Option<f64>| {
            *slot = match (slot.take(), r) {
                (Some(mut b), Some(r)) => {
                    b.reconfigure(now, r, (r * SMOOTHING).max(1.0));
                    Some(b)
                }
                (None, r) => bucket_of(r, now),
                (Some(_), None) => None,
            }
        };
        reconf(&mut self.baseline, rate(limits.iops));
        let burst = limits.effective_burst().filter(|b| Some(*b) > limits.iops);
        reconf(&mut self.burst_rate, rate(burst));
        reconf(&mut self.ingress, limits.ingress_mibps.map(mib));
        reconf(&mut self.egress, limits.egress_mibps.map(mib));
        reconf(&mut self.metadata, rate(limits.metadata_iops));
        self.credit_capacity = limits.credit_capacity();
        self.credits = self.credits.min(self.credit_capacity);
        self.files.clear();
        self.limits = limits;
    }

    fn refill(&mut self, now: Duration) {
        if let Some(b) = &mut self.baseline {
            let unused = b.refill(now);
            self.credits = (self.credits + unused).min(self.credit_capacity);
        }
        for b in [&mut self.burst_rate, &mut self.ingress, &mut self.egress]
            .into_iter()
            .chain([&mut self.metadata])
            .flatten()
        {
            b.refill(now);
        }
    }

    fn file_buckets(&mut self, file: u64, now: Duration) -> &mut FileBuckets {
        if now.saturating_sub(self.last_sweep) >= FILE_IDLE {
            self.last_sweep = now;
            self.files
                .retain(|_, f| now.saturating_sub(f.last_used) < FILE_IDLE);
        }
        let (iops, mibps) = (self.limits.file_iops, self.limits.file_mibps);
        let f = self.files.entry(file).or_insert_with(|| FileBuckets {
            iops: bucket_of(iops.map(|x| x as f64), now),
            bytes: bucket_of(mibps.map(mib), now),
            last_used: now,
        });
        f.last_used = now;
        for b in [&mut f.iops, &mut f.bytes].into_iter().flatten() {
            b.refill(now);
        }
        f
    }

    /// Whether a request costing `cost` may go at `now`. If it may, it is
    /// paid for; if not, nothing is taken.
    pub fn admit(&mut self, cost: &Cost, now: Duration) -> Verdict {
        if cost.is_free() {
            return Verdict::Go;
        }
        self.refill(now);
        // The latest time any limit lets it go, and which limit that is.
        let mut wait: Option<(Option<Duration>, Reason)> = None;
        let mut note = |w: Option<Duration>, reason: Reason| {
            let later = match (&wait, w) {
                (None, _) => true,
                (Some((None, _)), _) => false,
                (Some((Some(_), _)), None) => true,
                (Some((Some(a), _)), Some(b)) => b > *a,
            };
            if later {
                wait = Some((w, reason));
            }
        };
        let ops = cost.ops as f64;
        if cost.ops > 0 {
            if let Some(b) = &self.baseline {
                // Baseline tokens and credits together; a request larger
                // than both buckets goes once they are full (in debt).
                // A debt on the baseline is paid before anything else.
                let have = b.tokens() + self.credits;
                let need = ops.min(b.capacity() + self.credit_capacity);
                if have < need - EPSILON {
                    let missing = need - have;
                    note(Some(wait_secs(missing / b.rate())), Reason::Iops);
                }
            }
            if let Some(r) = &self.burst_rate {
                if !r.allows(ops) {
                    note(r.wait_for(ops), Reason::Iops);
                }
            }
        }
        for (slot, amount, reason) in [
            (&self.ingress, cost.bytes_in as f64, Reason::Ingress),
            (&self.egress, cost.bytes_out as f64, Reason::Egress),
            (
                &self.metadata,
                if cost.metadata { 1.0 } else { 0.0 },
                Reason::Metadata,
            ),
        ] {
            if let Some(b) = slot {
                if amount > 0.0 && !b.allows(amount) {
                    note(b.wait_for(amount), reason);
                }
            }
        }
        let file_limited = self.limits.file_iops.is_some() || self.limits.file_mibps.is_some();
        if let (Some(file), true) = (cost.file, file_limited) {
            let bytes = (cost.bytes_in + cost.bytes_out) as f64;
            let f = self.file_buckets(file, now);
            if let Some(b) = &f.iops {
                if cost.ops > 0 && !b.allows(ops) {
                    note(b.wait_for(ops), Reason::File);
                }
            }
            if let Some(b) = &f.bytes {
                if bytes > 0.0 && !b.allows(bytes) {
                    note(b.wait_for(bytes), Reason::File);
                }
            }
        }
        if let Some((after, reason)) = wait {
            return Verdict::Wait {
                until: after.map(|d| now + d),
                reason,
            };
        }
        self.pay(cost);
        Verdict::Go
    }

    fn pay(&mut self, cost: &Cost) {
        let ops = cost.ops as f64;
        if cost.ops > 0 {
            if let Some(b) = &mut self.baseline {
                let from_baseline = ops.min(b.tokens().max(0.0));
                let from_credits = (ops - from_baseline).min(self.credits);
                self.credits -= from_credits;
                // What neither covers is debt on the baseline.
                b.take(ops - from_credits);
            }
            if let Some(r) = &mut self.burst_rate {
                r.take(ops);
            }
        }
        if let Some(b) = &mut self.ingress {
            b.take(cost.bytes_in as f64);
        }
        if let Some(b) = &mut self.egress {
            b.take(cost.bytes_out as f64);
        }
        if let (Some(b), true) = (&mut self.metadata, cost.metadata) {
            b.take(1.0);
        }
        if let Some(file) = cost.file {
            if let Some(f) = self.files.get_mut(&file) {
                if let Some(b) = &mut f.iops {
                    b.take(ops);
                }
                if let Some(b) = &mut f.bytes {
                    b.take((cost.bytes_in + cost.bytes_out) as f64);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "throttle_tests.rs"]
mod tests;
