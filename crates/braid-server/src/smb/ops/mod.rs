//! One file per SMB2 command (MS-SMB2 3.3.5.x), routed by `dispatch`.

pub mod change_notify;
pub mod close;
pub mod convert;
pub mod create;
pub mod create_aapl;
pub mod create_durable;
pub mod echo;
pub mod flush;
pub mod fsctl_copy;
pub mod fsctl_dup_extents;
pub mod fsctl_snapshots;
pub mod fsctl_sparse;
pub mod ioctl;
pub mod lock;
pub mod logoff;
pub mod negotiate;
pub mod oplock_break;
pub mod pipe;
pub mod query_directory;
pub mod query_info;
pub mod read;
pub mod session_setup;
pub mod set_info;
pub mod tree_connect;
pub mod tree_disconnect;
pub mod write;
