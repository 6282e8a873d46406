#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    braid_fuzz::nfs::nfs_compound(data);
});
