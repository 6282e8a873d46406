//! The workload advisor (issue 46): plain data in, a few lines of advice
//! out, each with the numbers that support it. Sans-IO: it reads a
//! [`Workload`] (what a server saw of one client session over a window, or
//! what `braid bench` just ran) and never a socket or a clock, so the
//! server's admin API, `braid status --advice` and bench reports give the
//! same advice for the same numbers.
//!
//! * [`OpClass`]: the protocol-neutral operation classes both front-ends
//!   map their commands and operations to (metrics and advice).
//! * [`Workload`]: the measured window.
//! * [`advise`]: the rules.

mod op_class;
mod rules;
mod workload;

pub use op_class::{OpClass, OP_CLASSES};
pub use rules::{advise, Advice, MIN_OPERATIONS};
pub use workload::{io_size_bucket, size_label, CacheStats, Throttling, Workload, IO_SIZE_BOUNDS};
