//! Tokio SMB server: listeners, connections, sessions and channels, one file
//! per SMB2 command under `smb/ops/`, and a dispatch table.

pub mod admin;
pub mod admin_auth;
pub mod admin_nfs;
pub mod admin_page;
pub mod admin_workload;
pub mod break_delivery;
pub mod config;
pub mod conn;
pub mod credits;
pub mod dir_lease;
pub mod durable;
pub mod homes;
pub mod host_access;
pub mod host_watch;
pub mod interfaces;
pub mod lease;
pub mod logon_throttle;
pub mod lsa;
pub mod metadata_cache_view;
pub mod metrics;
pub mod nfs;
pub mod nfs_smb;
pub mod notify;
pub mod op_metrics;
pub mod oplock;
pub mod order;
pub mod per_client;
pub mod qos;
pub mod qos_admin;
pub mod reload;
pub mod server;
pub mod session;
pub mod sharded;
pub mod share_access;
pub mod smb;
pub mod srvsvc;
pub mod state;
pub mod tcp_ack;
pub mod userdb;
pub mod users_live;
pub mod workload;

pub use config::{InterfaceConfig, ServerConfig, ShareConfig};
pub use server::Server;
