//! Shared set-up for the posix_* tests. They run as root (the test
//! machines and CI do) and fail, rather than skip, when they are not.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use braid_fs::posix::*;

static N: AtomicU32 = AtomicU32::new(0);

pub const KEY: [u8; 32] = [0x5a; 32];
pub const EXPORT: u32 = 7;

pub struct Env {
    pub dir: PathBuf,
    pub share: PosixShare,
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn env() -> Env {
    // SAFETY: geteuid cannot fail.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the posix tests need root (CAP_DAC_READ_SEARCH, setfsuid)"
    );
    let dir = std::env::temp_dir().join(format!(
        "braid-posix-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Other uids must be able to work in the share.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let share = PosixShare::new(&dir, EXPORT, KEY).unwrap();
    Env { dir, share }
}

pub fn root() -> Credentials {
    Credentials::root()
}

pub fn user(id: u32) -> Credentials {
    Credentials {
        uid: id,
        gid: id,
        groups: vec![id],
    }
}

pub fn mkfile(e: &Env, dir: &Object, name: &str) -> Object {
    let (o, created, _) = e
        .share
        .create_file(
            &root(),
            dir,
            name.as_bytes(),
            0o644,
            CreateMode::Guarded,
            &SetAttrs::default(),
        )
        .unwrap();
    assert!(created);
    o
}

pub fn errno<T: std::fmt::Debug>(r: PosixResult<T>) -> i32 {
    match r {
        Err(PosixError::Errno(e)) => e,
        other => panic!("expected an errno, got {other:?}"),
    }
}
