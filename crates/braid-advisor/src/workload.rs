//! What was measured over one window, for one client session (server side)
//! or one bench run (client side).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::OpClass;

/// Upper bounds of the I/O size buckets in bytes; the last bucket is
/// "larger than 1 MiB".
pub const IO_SIZE_BOUNDS: [u64; 7] = [
    4 << 10,
    8 << 10,
    16 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    1 << 20,
];

/// The bucket of an I/O of `bytes` (0 ..= IO_SIZE_BOUNDS.len()).
pub fn io_size_bucket(bytes: u64) -> usize {
    IO_SIZE_BOUNDS.partition_point(|&b| b < bytes)
}

/// "4 KiB", "1 MiB", "> 1 MiB" for a bucket index.
pub fn size_label(bucket: usize) -> String {
    match IO_SIZE_BOUNDS.get(bucket) {
        Some(&b) if b >= 1 << 20 => format!("{} MiB", b >> 20),
        Some(&b) => format!("{} KiB", b >> 10),
        None => "> 1 MiB".into(),
    }
}

/// The share's throttling over the window: the fraction of the window
/// each limit held requests back (QoS, issue 45), and the limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Throttling {
    pub iops: f64,
    pub ingress: f64,
    pub egress: f64,
    pub metadata: f64,
    pub file: f64,
    pub iops_limit: Option<f64>,
    pub ingress_mibps: Option<f64>,
    pub egress_mibps: Option<f64>,
}

/// The share's metadata cache (issue 44).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheStats {
    pub enabled: bool,
    pub hits: u64,
    pub misses: u64,
    pub negative_hits: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// "smb" or "nfs".
    pub protocol: String,
    /// Who: "session 0x… (alice from 10.0.0.5)" or "bench".
    pub subject: String,
    pub share: Option<String>,
    /// Length of the window measured.
    pub seconds: f64,
    /// Operations by class.
    pub ops: BTreeMap<OpClass, u64>,
    /// Reads and writes by size bucket ([`IO_SIZE_BOUNDS`]).
    pub io_sizes: Vec<u64>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Requests in flight, as each request arriving saw it (itself
    /// included): 1.0 is one request at a time.
    pub mean_in_flight: f64,
    pub max_in_flight: u64,
    /// Distinct files read or written (at most `files_touched_cap`).
    pub files_touched: u64,
    /// Reads that began where the previous read of the same file ended.
    pub sequential_reads: u64,
    /// Reads that arrived when no other request of the session was in flight.
    pub lone_reads: u64,
    /// Channels (SMB) or connections (NFS) of the session now.
    pub channels: u64,
    /// The most channels the session had at once.
    pub channels_max: u64,
    /// SMB: interfaces the server advertises; 0 when unknown.
    pub interfaces_offered: u64,
    /// SMB: the server offers multichannel.
    pub multichannel_offered: bool,
    /// The most channels a session may bind.
    pub channel_limit: u64,
    /// Operations that waited for QoS, and the time they waited.
    pub throttled_ops: u64,
    pub throttled_seconds: f64,
    pub throttling: Option<Throttling>,
    pub cache: Option<CacheStats>,
}

impl Workload {
    pub fn count(&self, class: OpClass) -> u64 {
        self.ops.get(&class).copied().unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        self.ops.values().sum()
    }

    pub fn data_ops(&self) -> u64 {
        self.count(OpClass::Read) + self.count(OpClass::Write)
    }

    pub fn metadata_ops(&self) -> u64 {
        self.ops
            .iter()
            .filter(|(c, _)| c.is_metadata())
            .map(|(_, n)| n)
            .sum()
    }

    /// The size bucket holding the median read or write, if any.
    pub fn median_io_bucket(&self) -> Option<usize> {
        let total: u64 = self.io_sizes.iter().sum();
        if total == 0 {
            return None;
        }
        let mut seen = 0;
        for (i, n) in self.io_sizes.iter().enumerate() {
            seen += n;
            if seen * 2 >= total {
                return Some(i);
            }
        }
        None
    }

    /// Count one read or write of `bytes`.
    pub fn add_io(&mut self, bytes: u64, n: u64) {
        let b = io_size_bucket(bytes);
        if self.io_sizes.len() <= IO_SIZE_BOUNDS.len() {
            self.io_sizes.resize(IO_SIZE_BOUNDS.len() + 1, 0);
        }
        self.io_sizes[b] += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_upper_inclusive() {
        assert_eq!(io_size_bucket(1), 0);
        assert_eq!(io_size_bucket(4096), 0);
        assert_eq!(io_size_bucket(4097), 1);
        assert_eq!(io_size_bucket(1 << 20), 6);
        assert_eq!(io_size_bucket((1 << 20) + 1), 7);
        assert_eq!(size_label(0), "4 KiB");
        assert_eq!(size_label(6), "1 MiB");
        assert_eq!(size_label(7), "> 1 MiB");
    }

    #[test]
    fn median_bucket() {
        let mut w = Workload::default();
        assert_eq!(w.median_io_bucket(), None);
        w.add_io(4096, 3);
        w.add_io(1 << 20, 2);
        assert_eq!(w.median_io_bucket(), Some(0));
        w.add_io(1 << 20, 2);
        assert_eq!(w.median_io_bucket(), Some(6));
    }

    #[test]
    fn json_uses_class_names() {
        let mut w = Workload::default();
        w.ops.insert(OpClass::Create, 2);
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["ops"]["create"], 2);
    }
}
