//! Tokio SMB server: listeners, connections, sessions and channels, one file
//! per SMB2 command under `smb/ops/`, and a dispatch table.

pub mod admin;
pub mod admin_auth;
pub mod admin_nfs;
pub mod admin_page;
pub mod admin_workload;
pub mod config;
pub mod host_access;
pub mod host_watch;
pub mod metadata_cache_view;
pub mod metrics;
pub mod nfs;
pub mod op_metrics;
pub mod qos;
pub mod qos_admin;
pub mod reload;
pub mod server;
pub mod sharded;
pub mod smb;
pub mod state;
pub mod stop;
pub mod userdb;
pub mod users_live;
pub mod workload;

pub use config::{InterfaceConfig, ServerConfig, ShareConfig};
pub use server::Server;
