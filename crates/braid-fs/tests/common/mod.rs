#![allow(dead_code)]
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use braid_fs::*;

static N: AtomicU32 = AtomicU32::new(0);

pub struct Env {
    pub dir: PathBuf,
    pub share_dir: PathBuf,
    pub fs: Arc<FileService>,
    pub share: ShareRef,
    pub ctx: RequestCtx,
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn env() -> Env {
    env_with_clock(Arc::new(SystemClock))
}

/// A share whose file service reads `clock` (tests move a `ManualClock`).
pub fn env_with_clock(clock: Arc<dyn Clock>) -> Env {
    let dir = std::env::temp_dir().join(format!(
        "braid-fs-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let share_dir = dir.join("share");
    std::fs::create_dir_all(&share_dir).unwrap();
    let fs = FileService::new(clock);
    let share = fs.add_share("test", &share_dir).unwrap();
    Env {
        dir,
        share_dir,
        fs,
        share,
        ctx: RequestCtx::new("tester"),
    }
}

pub const RW: u32 = access::FILE_READ_DATA | access::FILE_WRITE_DATA;
pub const ALL: u32 = share_access::ALL;

impl Env {
    pub fn open(
        &self,
        path: &str,
        acc: u32,
        share: u32,
        disp: Disposition,
    ) -> Result<Opened, FsError> {
        let mut p = OpenParams::new(path, acc, disp);
        p.share_access = share;
        self.fs.open(&self.ctx, &self.share, p)
    }

    pub fn open_p(&self, p: OpenParams) -> Result<Opened, FsError> {
        self.fs.open(&self.ctx, &self.share, p)
    }

    pub fn create_file(&self, path: &str, data: &[u8]) {
        let o = self
            .open(path, RW, ALL, Disposition::Create)
            .unwrap_or_else(|e| panic!("create {path}: {e}"));
        o.handle.write(0, data).unwrap();
        o.handle.close().unwrap();
    }

    pub fn mkdir(&self, path: &str) {
        let mut p = OpenParams::new(path, access::FILE_READ_DATA, Disposition::Create);
        p.directory = DirectoryRequirement::MustBeDirectory;
        self.open_p(p).unwrap().handle.close().unwrap();
    }

    pub fn host(&self, rel: &str) -> PathBuf {
        self.share_dir.join(rel)
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.host(rel).symlink_metadata().is_ok()
    }
}

/// Whether a test may skip for want of a capability it probes for. As root
/// on Linux, where CI runs the tests, fanotify, user xattrs, fallocate and
/// hole punching all exist (on ext4, xfs, btrfs, tmpfs and overlayfs, where
/// a test directory lives), so a failed probe there is a failure, as
/// tests/e2e/test_fsctl.py makes it for the server; so it is whenever `CI`
/// is set. Elsewhere (an unprivileged run) the test may skip, saying so.
pub fn may_skip() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    !(cfg!(target_os = "linux") && root) && std::env::var_os("CI").is_none()
}

/// A probe for `what` failed: a failure where it must not (see
/// [`may_skip`]), else a SKIP line on stderr; the caller returns.
pub fn skip_without(what: &str) {
    assert!(
        may_skip(),
        "{what}: the probe failed, but as root on Linux (or with CI set) it must work"
    );
    eprintln!("SKIP: {what} is not available here");
}

/// Whether the test directory's file system takes user xattrs.
pub fn xattrs_work(e: &Env) -> bool {
    let p = e.host("probe");
    std::fs::write(&p, b"").unwrap();
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: valid C strings and buffer.
    let r = unsafe {
        libc::setxattr(
            c.as_ptr(),
            c"user.probe".as_ptr(),
            b"1".as_ptr().cast(),
            1,
            0,
        )
    };
    std::fs::remove_file(&p).unwrap();
    r == 0
}

/// The names a directory open lists, sorted ("." and ".." included).
pub fn listed_names(o: &Opened) -> Vec<String> {
    let mut v: Vec<String> = o
        .handle
        .read_dir()
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    v.sort();
    v
}

/// Run `script` with sh, as a process other than the test: it must succeed.
#[allow(dead_code)]
pub fn sh(script: &str) {
    let ok = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .status()
        .unwrap()
        .success();
    assert!(ok, "{script}");
}

/// What a host change feed's `read` returns, gathered until the changes
/// of a finished command have arrived (or 5 s passed with none).
#[allow(dead_code)]
pub fn poll_feed<T>(mut read: impl FnMut() -> std::io::Result<Vec<T>>) -> Vec<T> {
    use std::time::{Duration, Instant};
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        match read() {
            Ok(v) => out.extend(v),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if !out.is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("read: {e}"),
        }
    }
    out
}
