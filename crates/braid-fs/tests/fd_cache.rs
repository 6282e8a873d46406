//! Kept fds (`meta/fd_cache.rs`) under the file service's SMB face over a
//! real directory: an open after a close takes the closed open's fd, with
//! the same access only; a delete-on-close leaves none; a byte-range lock
//! does not outlive its open in a kept fd.

mod common;

use std::os::fd::AsRawFd;

use braid_fs::meta::FdStats;
use braid_fs::*;
use common::*;

fn kept() -> Env {
    let e = env();
    e.fs.set_fd_cache_limits(braid_fs::meta::FdLimits::KEEPING);
    e.fs.enable_metadata_cache(&e.share);
    e.share.set_posix_locking(true);
    e
}

fn stats(e: &Env) -> FdStats {
    e.share.fd_cache().expect("the share keeps fds").stats()
}

/// Is some other description's kernel (OFD) lock on [offset, offset+len)?
fn kernel_locked(e: &Env, rel: &str, offset: i64, len: i64) -> bool {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(e.host(rel))
        .unwrap();
    // SAFETY: zeroed flock is valid; plain fcntl.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as _;
    fl.l_whence = libc::SEEK_SET as _;
    fl.l_start = offset;
    fl.l_len = len;
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
    assert_eq!(r, 0);
    fl.l_type != libc::F_UNLCK as _
}

#[test]
fn an_open_after_a_close_takes_its_fd_with_the_same_access_only() {
    let e = kept();
    e.create_file("a.txt", b"hello");
    let s0 = stats(&e);
    for _ in 0..3 {
        let o = e.open("a.txt", RW, ALL, Disposition::Open).unwrap();
        assert_eq!(o.handle.read(0, 100).unwrap(), b"hello");
        o.handle.close().unwrap();
        drop(o);
    }
    let s = stats(&e);
    // create_file's handle parked first; each open took the last one.
    assert_eq!(s.reused - s0.reused, 3, "{s:?}");
    assert_eq!(s.open, 1);
    // Read-only access is another key: a fresh fd.
    let o = e
        .open("a.txt", access::FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(o.handle.read(0, 100).unwrap(), b"hello");
    drop(o);
    let s2 = stats(&e);
    assert_eq!(s2.reused, s.reused);
    assert_eq!(s2.open, 2, "one read-write, one read-only");
}

#[test]
fn a_new_file_at_the_name_never_gets_the_old_files_fd() {
    let e = kept();
    e.create_file("a.txt", b"old");
    let o = e.open("a.txt", RW, ALL, Disposition::Open).unwrap();
    drop(o);
    assert_eq!(stats(&e).open, 1);
    // Replaced on the host: a new inode at the same name.
    std::fs::write(e.host("tmp"), b"new").unwrap();
    std::fs::rename(e.host("tmp"), e.host("a.txt")).unwrap();
    let o = e.open("a.txt", RW, ALL, Disposition::Open).unwrap();
    assert_eq!(o.handle.read(0, 100).unwrap(), b"new");
}

#[test]
fn a_delete_on_close_leaves_no_kept_fd() {
    let e = kept();
    e.create_file("gone.txt", b"x");
    assert_eq!(stats(&e).open, 1);
    let mut p = OpenParams::new(
        "gone.txt",
        access::DELETE | access::FILE_READ_DATA | access::FILE_WRITE_DATA,
        Disposition::Open,
    );
    p.share_access = ALL;
    p.delete_on_close = true;
    let o = e.fs.open(&e.ctx, &e.share, p).unwrap();
    o.handle.close().unwrap();
    drop(o);
    assert!(!e.exists("gone.txt"));
    let s = stats(&e);
    assert_eq!(s.open, 0, "{s:?}");
}

#[test]
fn a_lock_does_not_outlive_its_open_in_a_kept_fd() {
    let e = kept();
    e.create_file("l.txt", b"0123456789");
    let o = e.open("l.txt", RW, ALL, Disposition::Open).unwrap();
    o.handle.lock(2, 4, true, LockOwner(1)).unwrap();
    assert!(
        kernel_locked(&e, "l.txt", 2, 4),
        "the lock is not mirrored to the kernel: nothing to check"
    );
    o.handle.close().unwrap();
    drop(o);
    let before = stats(&e);
    assert_eq!(before.open, 1);
    let again = e.open("l.txt", RW, ALL, Disposition::Open).unwrap();
    assert_eq!(stats(&e).reused, before.reused + 1, "the fd was not reused");
    assert!(!kernel_locked(&e, "l.txt", 2, 4), "the lock survived");
    let other = e.open("l.txt", RW, ALL, Disposition::Open).unwrap();
    other.handle.lock(2, 4, true, LockOwner(2)).unwrap();
    drop(again);
}
