//! `braid bench`: a load generator speaking SMB3 (multichannel, on
//! `braid-client`) and NFSv4.1 (nconnect and trunking, on
//! `braid-nfs-client`), the same profiles for both.
//!
//! * [`fs`]: the seam, a share that opens/reads/writes/closes/creates/
//!   removes files ([`fs::BenchFs`]), implemented for SMB ([`fs::SmbFs`])
//!   and NFS ([`nfs::NfsFs`]).
//! * [`engine::run`]: one run of a [`Spec`] (I/O or metadata loops) giving a
//!   [`Report`] (IOPS, MiB/s, latency percentiles per operation type,
//!   per-channel traffic).
//! * [`profiles`]: the brief's test matrix as named profiles.
//! * [`compare`]: the same profiles over several targets/settings,
//!   interleaved, into JSON and a self-contained HTML report.
//! * [`server_cpu`]: the server's CPU over the measured window, from
//!   `/proc` (`--server-pid`), for CPU per GiB and per operation.
//! * [`lab`]: network namespaces with rate-limited veth NICs to show what
//!   several NICs do on one machine.

pub mod compare;
pub mod engine;
pub mod fs;
pub mod lab;
pub mod nfs;
pub mod profiles;
pub mod report;
pub mod server_cpu;
pub mod spec;

pub use report::Report;
pub use spec::{Mode, Protocol, Security, Spec};
