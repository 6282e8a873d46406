//! Stable-toolchain runner (no libFuzzer, no nightly): runs every target over
//! its committed corpus (`corpus/<target>/`) and the regression inputs in
//! `artifacts-found/<target>/`, then, with `--mutate SECS`, over random
//! mutations of those inputs for SECS seconds per target.
//!
//!     cargo run --release --bin replay -- [--mutate SECS] [TARGET...]
//!
//! Prints `N passed, 0 failed`; a panic in a target aborts with its message.
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn inputs(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| (e.path(), std::fs::read(e.path()).unwrap()))
        .collect();
    v.sort();
    v
}

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, base: &[u8], pool: &[(PathBuf, Vec<u8>)]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..1 + rng.below(8) {
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            2 if !v.is_empty() => {
                let i = rng.below(v.len());
                let vals = [0u8, 1, 0x7f, 0x80, 0xff, 0x40, 0x08];
                v[i] = vals[rng.below(vals.len())];
            }
            3 if !v.is_empty() => v.truncate(rng.below(v.len())),
            4 => {
                let i = rng.below(v.len() + 1);
                let n = rng.below(16);
                for _ in 0..n {
                    v.insert(i, rng.next() as u8);
                }
            }
            5 if v.len() >= 2 => {
                // Interesting 16/32-bit little-endian values (lengths, offsets).
                let i = rng.below(v.len() - 1);
                let vals: [u32; 6] = [0, 1, 0xffff, 0xffff_ffff, 64, 0x78];
                let x = vals[rng.below(vals.len())].to_le_bytes();
                let n = if v.len() - i >= 4 && rng.below(2) == 0 { 4 } else { 2 };
                v[i..i + n].copy_from_slice(&x[..n]);
            }
            6 if !pool.is_empty() => {
                // Splice in part of another input.
                let other = &pool[rng.below(pool.len())].1;
                if !other.is_empty() {
                    let a = rng.below(other.len());
                    let b = a + rng.below(other.len() - a);
                    let i = rng.below(v.len() + 1);
                    v.splice(i..i, other[a..b].iter().copied());
                }
            }
            _ => {}
        }
    }
    v
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut secs = 0u64;
    if let Some(i) = args.iter().position(|a| a == "--mutate") {
        secs = args.get(i + 1).and_then(|s| s.parse().ok()).expect("--mutate SECS");
        args.drain(i..i + 2);
    }
    let (mut passed, mut execs) = (0usize, 0u64);
    for (name, f) in braid_fuzz::TARGETS {
        if !args.is_empty() && !args.iter().any(|a| a == name) {
            continue;
        }
        let mut pool = inputs(&root.join("corpus").join(name));
        pool.extend(inputs(&root.join("artifacts-found").join(name)));
        for (path, bytes) in &pool {
            eprintln!("{name}: {}", path.display());
            f(bytes);
            passed += 1;
        }
        if secs > 0 {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ name.len() as u64);
            let end = Instant::now() + Duration::from_secs(secs);
            let mut n = 0u64;
            while Instant::now() < end {
                for _ in 0..256 {
                    let base: &[u8] = if pool.is_empty() || rng.below(16) == 0 { &[] } else { &pool[rng.below(pool.len())].1 };
                    let input = mutate(&mut rng, base, &pool);
                    // Printed before running so a panic names its input.
                    std::panic::set_hook(Box::new({
                        let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
                        let name = name.to_string();
                        move |info| eprintln!("{name}: panic on input {hex}\n{info}")
                    }));
                    f(&input);
                    n += 1;
                }
            }
            let _ = std::panic::take_hook();
            eprintln!("{name}: {n} mutated inputs in {secs} s");
            execs += n;
        }
    }
    if secs > 0 {
        println!("{execs} mutated inputs run");
    }
    println!("{passed} passed, 0 failed");
}
