//! `braid bench`: a multichannel SMB3 load generator on `braid-client`.
//!
//! * [`engine::run`]: one run of a [`Spec`] (I/O or metadata loops) giving a
//!   [`Report`] (IOPS, MiB/s, latency percentiles per operation type,
//!   per-channel traffic).
//! * [`profiles`]: the brief's test matrix as named profiles.
//! * [`compare`]: the same profiles over several targets/settings,
//!   interleaved, into JSON and a self-contained HTML report.
//! * [`lab`]: network namespaces with rate-limited veth NICs to show what
//!   several NICs do on one machine.

pub mod compare;
pub mod engine;
pub mod lab;
pub mod profiles;
pub mod report;
pub mod spec;

pub use report::Report;
pub use spec::{Mode, Security, Spec};
