//! The kept-fd layer with an injected clock over real files in a temporary
//! directory: what it hands back, to whom, and when it lets go.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use super::{caller_may_use, FdCache, FdKey, FdLimits, FdMode};
use crate::clock::ManualClock;

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("braid-fdcache-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }

    fn file(&self, name: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, b"data").unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(p: &PathBuf) -> (OwnedFd, FdKey) {
    let f = File::open(p).unwrap();
    let m = f.metadata().unwrap();
    let key = FdKey {
        dev: m.dev(),
        ino: m.ino(),
        mode: FdMode::Read,
        sync: false,
    };
    (OwnedFd::from(f), key)
}

fn cache(max_fds: usize) -> (Arc<ManualClock>, FdCache) {
    let clock = Arc::new(ManualClock::new(UNIX_EPOCH + Duration::from_secs(1000)));
    let limits = FdLimits {
        max_fds,
        idle: Duration::from_millis(1500),
    };
    (clock.clone(), FdCache::new(clock, limits))
}

fn ino_of(fd: &OwnedFd) -> u64 {
    crate::sys::fstat(fd.as_raw_fd()).unwrap().st_ino
}

#[test]
fn a_parked_fd_answers_the_next_open_of_its_inode_and_mode_only() {
    let d = Dir::new("reuse");
    let (fd, key) = open(&d.file("a"));
    let (c, cache) = cache(8);
    cache.park(key, fd);
    let rw = FdKey {
        mode: FdMode::ReadWrite,
        ..key
    };
    let sync = FdKey { sync: true, ..key };
    let other = FdKey {
        ino: key.ino + 1,
        ..key
    };
    assert!(cache.take(&rw).is_none(), "another access mode");
    assert!(cache.take(&sync).is_none(), "O_DSYNC is a different fd");
    assert!(cache.take(&other).is_none(), "another inode");
    c.advance(Duration::from_millis(1400));
    let back = cache.take(&key).expect("kept within the idle time");
    assert_eq!(ino_of(&back), key.ino);
    assert!(cache.take(&key).is_none(), "taken once");
    let s = cache.stats();
    assert_eq!((s.kept, s.reused, s.missed, s.open), (1, 1, 4, 0));
}

#[test]
fn an_idle_fd_is_not_handed_out_and_the_sweep_closes_it() {
    let d = Dir::new("idle");
    let (c, cache) = cache(8);
    let (fd, key) = open(&d.file("a"));
    cache.park(key, fd);
    c.advance(Duration::from_millis(1500));
    assert!(cache.take(&key).is_none());
    assert_eq!(cache.stats().dropped_idle, 1);

    let (fd, key) = open(&d.file("b"));
    cache.park(key, fd);
    cache.sweep();
    assert_eq!(cache.stats().open, 1, "young: kept");
    c.advance(Duration::from_secs(2));
    cache.sweep();
    let s = cache.stats();
    assert_eq!((s.open, s.dropped_idle), (0, 2));
}

#[test]
fn a_clock_stepped_back_ages_kept_fds_instead_of_keeping_them_forever() {
    let d = Dir::new("stepback");
    let (c, cache) = cache(8);
    let (fd, key) = open(&d.file("a"));
    cache.park(key, fd);
    c.set(UNIX_EPOCH + Duration::from_secs(10));
    assert!(cache.take(&key).is_none());
}

#[test]
fn the_least_recently_parked_goes_when_the_bound_is_reached() {
    let d = Dir::new("bound");
    let (_c, cache) = cache(2);
    let (fa, ka) = open(&d.file("a"));
    let (fb, kb) = open(&d.file("b"));
    let (fc, kc) = open(&d.file("c"));
    cache.park(ka, fa);
    cache.park(kb, fb);
    cache.park(kc, fc);
    let s = cache.stats();
    assert_eq!((s.open, s.dropped_capacity), (2, 1));
    assert!(cache.take(&ka).is_none(), "the oldest went");
    assert!(cache.take(&kb).is_some());
    assert!(cache.take(&kc).is_some());
}

#[test]
fn a_bound_of_zero_keeps_nothing() {
    let d = Dir::new("zero");
    let (_c, cache) = cache(0);
    let (fd, key) = open(&d.file("a"));
    cache.park(key, fd);
    assert_eq!(cache.stats().open, 0);
    assert!(cache.take(&key).is_none());
}

#[test]
fn the_sweep_closes_the_fd_of_a_file_unlinked_behind_its_back() {
    let d = Dir::new("unlinked");
    let (_c, cache) = cache(8);
    let p = d.file("a");
    let (fd, key) = open(&p);
    cache.park(key, fd);
    let (fd2, key2) = open(&d.file("b"));
    cache.park(key2, fd2);
    std::fs::remove_file(&p).unwrap();
    cache.sweep();
    let s = cache.stats();
    assert_eq!((s.open, s.dropped_unlinked), (1, 1));
    assert!(cache.take(&key).is_none());
    assert!(cache.take(&key2).is_some(), "b still has its name");
}

#[test]
fn the_broken_variant_keeps_an_unlinked_file_open() {
    let d = Dir::new("broken");
    let (_c, cache) = cache(8);
    cache.skip_unlink_drops();
    let p = d.file("a");
    let (fd, key) = open(&p);
    cache.park(key, fd);
    std::fs::remove_file(&p).unwrap();
    cache.sweep();
    cache.forget_inode(key.dev, key.ino, super::DropReason::Unlinked);
    assert_eq!(cache.stats().open, 1);
}

#[test]
fn forgetting_an_inode_drops_its_fds_of_every_mode() {
    let d = Dir::new("forget");
    let (_c, cache) = cache(8);
    let p = d.file("a");
    let (fd, key) = open(&p);
    let (fd2, _) = open(&p);
    let (fd3, other) = open(&d.file("b"));
    cache.park(key, fd);
    let rw = FdKey {
        mode: FdMode::ReadWrite,
        ..key
    };
    cache.park(rw, fd2);
    cache.park(other, fd3);
    cache.forget_inode(key.dev, key.ino, super::DropReason::Invalidated);
    let s = cache.stats();
    assert_eq!((s.open, s.dropped_invalidated), (1, 2));
    cache.clear();
    assert_eq!(cache.stats().open, 0);
}

#[test]
fn a_refused_reuse_counts_as_a_miss() {
    let d = Dir::new("refuse");
    let (_c, cache) = cache(8);
    let (fd, key) = open(&d.file("a"));
    cache.park(key, fd);
    let fd = cache.take(&key).unwrap();
    cache.refuse(fd);
    let s = cache.stats();
    assert_eq!((s.reused, s.missed, s.dropped_refused), (0, 1, 1));
}

/// The re-check answers for the calling thread's credentials: an
/// unprivileged fsuid (root's test switches one thread to nobody) may not
/// reuse an fd of a file mode 0600 that another uid opened.
#[test]
fn the_permission_recheck_uses_the_callers_credentials() {
    let d = Dir::new("perm");
    let p = d.file("secret");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (fd, _) = open(&p);
    assert!(caller_may_use(fd.as_raw_fd(), FdMode::Read));
    assert!(caller_may_use(fd.as_raw_fd(), FdMode::ReadWrite));
    let raw = fd.as_raw_fd();
    // SAFETY: plain syscall.
    let root = unsafe { libc::geteuid() } == 0;
    let refused = std::thread::spawn(move || {
        if root {
            // Only this thread's fs ids change (setfsuid is per thread).
            // SAFETY: plain syscalls.
            unsafe {
                libc::syscall(libc::SYS_setfsgid, 65534);
                libc::syscall(libc::SYS_setfsuid, 65534);
            }
        } else {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
        }
        (
            caller_may_use(raw, FdMode::Read),
            caller_may_use(raw, FdMode::Write),
        )
    })
    .join()
    .unwrap();
    assert_eq!(refused, (false, false));
    drop(fd);
}
