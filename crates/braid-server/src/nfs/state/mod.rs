//! NFSv4.1 state: client records (EXCHANGE_ID), sessions and their slot
//! tables, connections, stateids, the grace period after a restart, and the
//! store that keeps client records (and what they hold) across restarts.

pub mod caching;
pub mod clients;
pub mod connections;
pub mod delegations;
pub mod grace;
pub mod held;
pub mod kernel_locks;
pub mod locks;
pub mod opens;
pub mod reaper;
pub mod sessions;
pub mod slots;
pub mod stateids;
pub mod store;
