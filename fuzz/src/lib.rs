//! Fuzz targets for `braid-smb-proto` and `braid-nfs-proto`, shared by the cargo-fuzz binaries in
//! `fuzz_targets/` (one per decoder family) and by the stable-toolchain
//! `replay` binary that CI uses to run the committed corpora.
//!
//! Every target takes arbitrary bytes. The properties checked are: no
//! panic, and for decoders that also encode, decode → encode → decode gives
//! back what the first decode gave.

pub mod dcerpc;
pub mod nfs;
pub mod seeds;
pub mod targets;

/// Every target, by name, for the replay runner and the seed writer.
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("framing", targets::framing),
    ("smb2_header", targets::smb2_header),
    ("smb2_requests", targets::smb2_requests),
    ("smb2_responses", targets::smb2_responses),
    ("negotiate_contexts", targets::negotiate_contexts),
    ("create_contexts", targets::create_contexts),
    ("fscc_set_info", targets::fscc_set_info),
    ("security_descriptor", targets::security_descriptor),
    ("ntlmssp", targets::ntlmssp),
    ("spnego", targets::spnego),
    ("der", targets::der),
    ("transform", targets::transform),
    ("dcerpc", dcerpc::dcerpc),
    ("lsarpc", dcerpc::lsarpc),
    ("nfs_record", nfs::nfs_record),
    ("rpc_call", nfs::rpc_call),
    ("nfs_compound", nfs::nfs_compound),
    ("nfs_attrs", nfs::nfs_attrs),
];

pub fn target_by_name(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every seed runs through its target without a panic (and so without a
    /// failed round-trip assertion).
    #[test]
    fn seeds_pass_their_targets() {
        for (target, name, bytes) in seeds::all() {
            let f = target_by_name(target).unwrap_or_else(|| panic!("no target {target}"));
            eprintln!("{target}/{name}");
            f(&bytes);
        }
    }
}
