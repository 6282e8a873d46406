//! Writes the seed corpora: `cargo run --bin seeds [-- DIR]` (default
//! `corpus/`, relative to the fuzz crate).
use std::path::PathBuf;

fn main() {
    let root = std::env::args().nth(1).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus"));
    let mut n = 0;
    for (target, name, bytes) in braid_fuzz::seeds::all() {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("create corpus dir");
        std::fs::write(dir.join(format!("seed-{name}")), &bytes).expect("write seed");
        n += 1;
    }
    println!("wrote {n} seeds under {}", root.display());
}
