//! `braid_nfs_proto`: the NFSv4.1 wire, sans-IO — no tokio, no I/O, no clock.
//!
//! - [`xdr`]: the XDR runtime (RFC 4506);
//! - [`record`]: ONC RPC record marking over TCP (RFC 5531 11);
//! - [`rpc`]: ONC RPC v2 call and reply headers, AUTH_SYS (RFC 5531);
//! - [`write_peek`]: where a WRITE's data begins, from a record's first bytes;
//! - [`nfs4`]: NFSv4.1 types generated from the .x (RFC 7863/8881),
//!   COMPOUND decoding and attributes.
//!
//! See README.md for the conventions of the generated code.

pub mod nfs4;
pub mod record;
pub mod rpc;
pub mod write_peek;
pub mod xdr;
