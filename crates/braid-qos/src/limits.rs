//! What a share is provisioned with, and what one request costs.

/// One hour: the burst credit bucket holds an hour at full burst by
/// default, as the cloud's provisioned SSD model sizes it.
pub const BUCKET_SECONDS: f64 = 3600.0;

/// The default unit I/O is charged in (see [`Cost::io`] and docs/CONFIG.md).
pub const DEFAULT_IO_UNIT: u64 = 64 * 1024;

const MIB: f64 = 1024.0 * 1024.0;

/// A share's provisioned performance. `None` is "no limit".
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Baseline IOPS (each in units of `io_unit` bytes, [`Cost::io`]).
    pub iops: Option<u64>,
    /// IOPS while burst credits last; at least `iops`.
    pub burst_iops: Option<u64>,
    /// Size of the burst credit bucket; default `(burst_iops - iops) x 3600`.
    pub burst_credits: Option<u64>,
    /// Bytes per second clients may write (MiB/s on the config side).
    pub ingress_mibps: Option<f64>,
    /// Bytes per second clients may read.
    pub egress_mibps: Option<f64>,
    /// Metadata operations per second (opens, closes, lookups,
    /// attributes, listings, renames, deletes), a budget of its own.
    pub metadata_iops: Option<u64>,
    /// Per file: I/O per second, and MiB per second in both directions.
    pub file_iops: Option<u64>,
    pub file_mibps: Option<f64>,
    /// The I/O size one operation is charged for.
    pub io_unit: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            iops: None,
            burst_iops: None,
            burst_credits: None,
            ingress_mibps: None,
            egress_mibps: None,
            metadata_iops: None,
            file_iops: None,
            file_mibps: None,
            io_unit: DEFAULT_IO_UNIT,
        }
    }
}

impl Limits {
    /// The cloud's provisioned SSD model (provisioned v1, as published):
    /// baseline IOPS = min(3000 + 1 x GiB, 102400); burst IOPS =
    /// min(max(3 x GiB, 10000), 102400); burst credits = (burst -
    /// baseline) x 3600; throughput = 100 + ceil(0.04 x GiB) +
    /// ceil(0.06 x GiB) MiB/s, at most 10340, for ingress and egress
    /// together — split here as the two terms suggest: 40 + ceil(0.04 x
    /// GiB) in, 60 + ceil(0.06 x GiB) out, scaled down together at the cap.
    pub fn provisioned(gib: u64) -> Limits {
        let iops = (3000 + gib).min(102_400);
        let burst = (3 * gib).clamp(10_000, 102_400).max(iops);
        let g = gib as f64;
        let ingress = 40.0 + (0.04 * g).ceil();
        let egress = 60.0 + (0.06 * g).ceil();
        let total = ingress + egress;
        let scale = if total > 10_340.0 {
            10_340.0 / total
        } else {
            1.0
        };
        Limits {
            iops: Some(iops),
            burst_iops: Some(burst),
            burst_credits: None,
            ingress_mibps: Some(ingress * scale),
            egress_mibps: Some(egress * scale),
            ..Limits::default()
        }
    }

    /// Whether anything is limited at all (else requests skip QoS).
    pub fn enabled(&self) -> bool {
        self.iops.is_some()
            || self.ingress_mibps.is_some()
            || self.egress_mibps.is_some()
            || self.metadata_iops.is_some()
            || self.file_iops.is_some()
            || self.file_mibps.is_some()
    }

    /// The burst rate: `burst_iops`, or the baseline when none is set.
    pub fn effective_burst(&self) -> Option<u64> {
        self.iops.map(|b| self.burst_iops.unwrap_or(b).max(b))
    }

    /// Size of the credit bucket: `burst_credits`, else an hour of the
    /// burst above baseline; 0 without burst.
    pub fn credit_capacity(&self) -> f64 {
        match (self.iops, self.effective_burst()) {
            (Some(base), Some(burst)) if burst > base => self
                .burst_credits
                .map_or((burst - base) as f64 * BUCKET_SECONDS, |c| c as f64),
            _ => 0.0,
        }
    }

    /// Check the combination; the error names the key (as written in a
    /// `[share.qos]` table) and the fix.
    pub fn validate(&self) -> Result<(), String> {
        let positive = |key: &str, v: Option<u64>| match v {
            Some(0) => Err(format!(
                "qos.{key} = 0 would stop every request; give a positive number or leave {key} out"
            )),
            _ => Ok(()),
        };
        positive("iops", self.iops)?;
        positive("burst_iops", self.burst_iops)?;
        positive("metadata_iops", self.metadata_iops)?;
        positive("file_iops", self.file_iops)?;
        for (key, v) in [
            ("ingress_mibps", self.ingress_mibps),
            ("egress_mibps", self.egress_mibps),
            ("file_mibps", self.file_mibps),
        ] {
            if let Some(x) = v {
                if !(x.is_finite() && x > 0.0) {
                    return Err(format!(
                        "qos.{key} = {x}: give a positive number of MiB/s or leave {key} out"
                    ));
                }
            }
        }
        if self.io_unit < 4096 || !self.io_unit.is_power_of_two() {
            return Err(format!(
                "qos.io_unit_kib = {}: give a power of two of at least 4 (KiB), e.g. 64",
                self.io_unit / 1024
            ));
        }
        match (self.iops, self.burst_iops) {
            (None, Some(_)) => {
                return Err("qos.burst_iops needs qos.iops (the baseline); set iops too".into())
            }
            (Some(base), Some(burst)) if burst < base => {
                return Err(format!(
                    "qos.burst_iops = {burst} is below qos.iops = {base}; set burst_iops >= iops or leave it out"
                ))
            }
            _ => {}
        }
        if self.burst_credits.is_some() && self.credit_capacity() == 0.0 {
            return Err(
                "qos.burst_credits needs a burst: set qos.burst_iops above qos.iops".into(),
            );
        }
        Ok(())
    }
}

/// What one request costs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// I/O operations charged against the share's IOPS (0 for requests
    /// that are neither I/O nor metadata).
    pub ops: u64,
    /// Bytes written (ingress) and read (egress).
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Charged against the metadata budget too.
    pub metadata: bool,
    /// The file, for the per-file limits (any stable id of the file).
    pub file: Option<u64>,
}

impl Cost {
    /// A READ (`write` false) or WRITE of `len` bytes: one operation per
    /// started `unit` bytes (at least one), so a large I/O cannot dodge the
    /// IOPS limit — the rule the cloud's block and file services bill by
    /// (AWS EBS counts in 256 KiB units; Braid defaults to 64 KiB units,
    /// the I/O size at which the cloud's throughput-per-IOPS figures meet,
    /// docs/CONFIG.md).
    pub fn io(len: u64, write: bool, unit: u64, file: Option<u64>) -> Cost {
        let unit = unit.max(1);
        Cost {
            ops: len.div_ceil(unit).max(1),
            bytes_in: if write { len } else { 0 },
            bytes_out: if write { 0 } else { len },
            metadata: false,
            file,
        }
    }

    /// A server-side copy of `len` bytes: the READ and the WRITE it saves
    /// the client, so egress and ingress both, and one operation per
    /// started `unit` for each.
    pub fn copy(len: u64, unit: u64, file: Option<u64>) -> Cost {
        let ops = len.div_ceil(unit.max(1)).max(1);
        Cost {
            ops: 2 * ops,
            bytes_in: len,
            bytes_out: len,
            metadata: false,
            file,
        }
    }

    /// A metadata operation: one operation, on the metadata budget too.
    pub fn metadata() -> Cost {
        Cost {
            ops: 1,
            metadata: true,
            ..Cost::default()
        }
    }

    /// Whether anything is charged at all.
    pub fn is_free(&self) -> bool {
        self.ops == 0 && self.bytes_in == 0 && self.bytes_out == 0 && !self.metadata
    }
}

pub(crate) fn mib(x: f64) -> f64 {
    x * MIB
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provisioned_formulas() {
        // 100 GiB: baseline 3100, burst 10000, credits 6900 x 3600,
        // throughput 100 + 4 + 6 = 110 MiB/s.
        let l = Limits::provisioned(100);
        assert_eq!(l.iops, Some(3100));
        assert_eq!(l.burst_iops, Some(10_000));
        assert_eq!(l.credit_capacity(), 6900.0 * 3600.0);
        assert_eq!(l.ingress_mibps, Some(44.0));
        assert_eq!(l.egress_mibps, Some(66.0));
        // 10 TiB: baseline 13240, burst 30720.
        let l = Limits::provisioned(10_240);
        assert_eq!(l.iops, Some(13_240));
        assert_eq!(l.burst_iops, Some(30_720));
        // 100 TiB: both capped at 102400, no burst; throughput capped.
        let l = Limits::provisioned(102_400);
        assert_eq!(l.iops, Some(102_400));
        assert_eq!(l.burst_iops, Some(102_400));
        assert_eq!(l.credit_capacity(), 0.0);
        let total = l.ingress_mibps.unwrap() + l.egress_mibps.unwrap();
        assert!((total - 10_340.0).abs() < 1e-6, "{total}");
        l.validate().unwrap();
    }

    #[test]
    fn a_copy_is_charged_as_its_read_and_its_write() {
        let c = Cost::copy(16 << 20, 64 * 1024, Some(7));
        assert_eq!((c.ops, c.bytes_in, c.bytes_out), (512, 16 << 20, 16 << 20));
        assert_eq!(c.file, Some(7));
        assert!(!c.metadata);
        let small = Cost::copy(1, 64 * 1024, None);
        assert_eq!((small.ops, small.bytes_in, small.bytes_out), (2, 1, 1));
    }

    #[test]
    fn io_is_charged_per_started_unit() {
        let u = DEFAULT_IO_UNIT;
        assert_eq!(Cost::io(4096, false, u, None).ops, 1);
        assert_eq!(Cost::io(65536, true, u, None).ops, 1);
        assert_eq!(Cost::io(65537, true, u, None).ops, 2);
        assert_eq!(Cost::io(1 << 20, false, u, None).ops, 16);
        assert_eq!(Cost::io(0, false, u, None).ops, 1);
        let w = Cost::io(1 << 20, true, u, Some(7));
        assert_eq!((w.bytes_in, w.bytes_out, w.file), (1 << 20, 0, Some(7)));
    }

    #[test]
    fn default_bucket_is_an_hour_of_burst() {
        let l = Limits {
            iops: Some(500),
            burst_iops: Some(1500),
            ..Limits::default()
        };
        assert_eq!(l.credit_capacity(), 1000.0 * 3600.0);
        let small = Limits {
            burst_credits: Some(2000),
            ..l
        };
        assert_eq!(small.credit_capacity(), 2000.0);
    }

    #[test]
    fn bad_combinations_name_the_key() {
        let l = |f: fn(&mut Limits)| {
            let mut l = Limits {
                iops: Some(500),
                ..Limits::default()
            };
            f(&mut l);
            l.validate().unwrap_err()
        };
        assert!(l(|l| l.burst_iops = Some(100)).contains("qos.burst_iops = 100 is below"));
        assert!(l(|l| l.iops = Some(0)).contains("qos.iops = 0"));
        assert!(l(|l| l.egress_mibps = Some(-1.0)).contains("qos.egress_mibps"));
        assert!(l(|l| l.io_unit = 5000).contains("qos.io_unit_kib"));
        assert!(l(|l| l.burst_credits = Some(10)).contains("qos.burst_credits needs a burst"));
        assert!(l(|l| {
            l.iops = None;
            l.burst_iops = Some(10)
        })
        .contains("needs qos.iops"));
    }
}
