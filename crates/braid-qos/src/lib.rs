//! Provisioned performance (QoS) for one share, sans-IO: no tokio, no
//! clock of its own — every call takes `now`, the time since an epoch the
//! caller chose, so that tests drive it with a manual clock and prove the
//! arithmetic exactly (architecture principles 1 and 7).
//!
//! - [`limits`]: what a share is provisioned with (IOPS, burst, credits,
//!   ingress and egress, metadata, per file), or derived from
//!   `provisioned_gib` with the cloud's published formulas;
//! - [`bucket`]: the token bucket everything is built from;
//! - [`throttle`]: the share's buckets together, deciding whether one
//!   request may go now and, if not, until when it must wait and why;
//! - [`fair`]: deficit round robin over per-client queues, so that one
//!   greedy client cannot starve the others of a share's budget;
//! - [`window`]: per-second history for "current IOPS" and "share of the
//!   last minute spent throttled".

pub mod bucket;
pub mod fair;
pub mod limits;
pub mod share;
pub mod throttle;
pub mod window;

pub use fair::{ClientId, FairQueue, Poll, TicketId};
pub use limits::{Cost, Limits};
pub use share::{ShareQos, View};
pub use throttle::{Reason, Throttle};
pub use window::Window;
