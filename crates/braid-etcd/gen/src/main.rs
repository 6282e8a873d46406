//! Writes `src/proto/{authpb,etcdserverpb,mvccpb}.rs` of
//! braid-etcd from the etcd protos in `proto/`, with the protoc that the
//! `protoc-bin-vendored` crate ships, then formats them with rustfmt.
//! Braid's build compiles the committed output and needs no protoc.

use std::path::Path;
use std::process::Command;

fn main() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("gen/ is inside crates/braid-etcd");
    let proto = crate_dir.join("proto");
    let out = crate_dir.join("src/proto");
    let protoc = protoc_bin_vendored::protoc_bin_path().expect("vendored protoc");
    let well_known = protoc_bin_vendored::include_path().expect("vendored protoc includes");
    // prost-build finds protoc through PROTOC; set before any thread exists.
    std::env::set_var("PROTOC", &protoc);
    tonic_prost_build::configure()
        // A client only: Braid talks to etcd, it does not serve its API.
        .build_server(false)
        .build_transport(true)
        .out_dir(&out)
        .compile_protos(
            &[proto.join("etcd/api/etcdserverpb/rpc.proto")],
            &[proto.clone(), well_known],
        )
        .expect("compile the etcd protos");
    // Only etcd's own packages are used; the HTTP gateway annotations'
    // packages (google.api, grpc.gateway...) are not.
    // (versionpb declares only options: prost writes no file for it.)
    let keep = ["authpb.rs", "etcdserverpb.rs", "mvccpb.rs"];
    for entry in std::fs::read_dir(&out).expect("read src/proto") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".rs") && name != "mod.rs" && !keep.contains(&name.as_str()) {
            std::fs::remove_file(&path).expect("remove an unused package");
        }
    }
    let status = Command::new("rustfmt")
        .args(["--edition", "2021"])
        .args(keep.iter().map(|k| out.join(k)))
        .status()
        .expect("run rustfmt");
    assert!(status.success(), "rustfmt failed");
    println!("wrote {}", out.display());
}
