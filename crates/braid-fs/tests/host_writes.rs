//! The host write feed (fanotify inode marks): what other processes do to
//! a marked file is reported, what this process does is not.
mod common;
use std::io;
use std::time::{Duration, Instant};

use braid_fs::host_writes::{HostFileChange, HostWriteFeed, IDLE_FOR};
use braid_fs::*;
use common::*;

/// Everything queued once the changes of a finished command have arrived.
fn poll(feed: &HostWriteFeed) -> Vec<HostFileChange> {
    poll_feed(|| feed.read())
}

/// No change is reported (events this process caused may be queued and
/// dropped).
fn nothing_reported(feed: &HostWriteFeed) -> bool {
    std::thread::sleep(Duration::from_millis(200));
    loop {
        match feed.read() {
            Ok(v) if v.is_empty() => continue,
            Ok(_) => return false,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// Open `name` for reading and writing, sharing everything.
fn open_rw(e: &Env, name: &str) -> Opened {
    e.open(name, RW, ALL, Disposition::Open).unwrap()
}

/// The feed, or the test's skip (and `None`) where fanotify is missing.
fn feed_or_skip() -> Option<HostWriteFeed> {
    match HostWriteFeed::new() {
        Ok(f) => Some(f),
        Err(e) => {
            skip_without(&format!("fanotify ({e})"));
            None
        }
    }
}

/// Create `name` and open it as [`open_rw`] does.
fn create_and_open(e: &Env, name: &str) -> Opened {
    e.create_file(name, b"data");
    open_rw(e, name)
}

#[test]
fn reports_other_processes_writes_and_removals_and_not_its_own() {
    let Some(feed) = feed_or_skip() else {
        return;
    };
    let e = env();
    e.create_file("a.txt", b"first");
    e.create_file("b.txt", b"other");
    let a = open_rw(&e, "a.txt");
    let a2 = open_rw(&e, "a.txt");
    let w = feed.watch(&a.handle).unwrap();
    let id = w.id;
    let w2 = feed.watch(&a2.handle).unwrap();
    assert_eq!(w2.id, id, "one mark per file");
    assert_eq!(feed.marked(), 1);

    // This process's own writes, and changes to files not marked, are not
    // reported; nor is a change of mode.
    a.handle.write(0, b"own").unwrap();
    std::fs::write(e.host("a.txt"), b"own again").unwrap();
    let (a_path, b_path) = (e.host("a.txt"), e.host("b.txt"));
    let (a_path, b_path) = (a_path.display(), b_path.display());
    sh(&format!("echo x >> {b_path} && chmod 600 {a_path}"));
    assert!(nothing_reported(&feed));

    // Reported at the write, before the writer closes the file.
    let mut writer = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("exec 3>>{a_path}; echo more >&3; sleep 5"))
        .spawn()
        .unwrap();
    assert_eq!(poll(&feed), vec![HostFileChange::Written(id)]);
    writer.kill().unwrap();
    writer.wait().unwrap();
    sh(&format!(": > {a_path}"));
    assert_eq!(poll(&feed), vec![HostFileChange::Written(id)], "truncation");

    // Replaced by a rename: its last name is gone.
    sh(&format!(
        "echo new > {a_path}.tmp && mv {a_path}.tmp {a_path}"
    ));
    assert_eq!(poll(&feed), vec![HostFileChange::Unlinked(id)]);

    feed.unwatch(w, Instant::now());
    assert_eq!(feed.marked(), 1, "still watched once");
    // The last watch of a file with no name left takes its mark along.
    assert!(!feed.unwatch(w2, Instant::now()));
    assert_eq!(feed.marked(), 0);
    sh(&format!("echo late >> {b_path}"));
    assert!(nothing_reported(&feed));
}

#[test]
fn a_removed_file_is_reported_once_its_last_name_goes() {
    let Some(feed) = feed_or_skip() else {
        return;
    };
    let e = env();
    let c = create_and_open(&e, "c.txt");
    let w = feed.watch(&c.handle).unwrap();
    let id = w.id;
    let (c_path, link) = (e.host("c.txt"), e.host("link.txt"));
    let (c_path, link) = (c_path.display(), link.display());
    // A second name, then the first removed: a name is left.
    sh(&format!("ln {c_path} {link} && rm {c_path}"));
    assert!(nothing_reported(&feed));
    sh(&format!("rm {link}"));
    assert_eq!(poll(&feed), vec![HostFileChange::Unlinked(id)]);
    feed.unwatch(w, Instant::now());
}

#[test]
fn a_mark_is_kept_idle_for_the_next_watch_then_swept() {
    let Some(feed) = feed_or_skip() else {
        return;
    };
    let e = env();
    e.create_file("d.txt", b"data");
    let d_path = e.host("d.txt");
    let d_path = d_path.display();
    let d = open_rw(&e, "d.txt");
    let w = feed.watch(&d.handle).unwrap();
    let id = w.id;
    let t0 = Instant::now();
    assert!(feed.unwatch(w, t0), "left idle");
    drop(d);
    assert_eq!((feed.marked(), feed.idle()), (1, 1));
    // Nobody caches the file: a write is not reported.
    sh(&format!("echo idle >> {d_path}"));
    assert!(nothing_reported(&feed));

    // The next open's watch takes the kept mark.
    let d = open_rw(&e, "d.txt");
    let w = feed.watch(&d.handle).unwrap();
    assert_eq!(w.id, id, "the kept mark");
    assert_eq!((feed.marked(), feed.idle()), (1, 0));
    sh(&format!("echo watched >> {d_path}"));
    assert_eq!(poll(&feed), vec![HostFileChange::Written(id)]);
    let t1 = t0 + Duration::from_secs(5);
    assert!(feed.unwatch(w, t1));

    // Swept once idle for IDLE_FOR since the last watch ended.
    let due = feed.sweep(t1 + IDLE_FOR - Duration::from_millis(1));
    assert_eq!(due, Some(t1 + IDLE_FOR));
    assert_eq!(feed.marked(), 1);
    assert_eq!(feed.sweep(t1 + IDLE_FOR), None);
    assert_eq!((feed.marked(), feed.idle()), (0, 0));
    sh(&format!("echo gone >> {d_path}"));
    assert!(nothing_reported(&feed));

    // A new watch marks the file again.
    let w = feed.watch(&d.handle).unwrap();
    assert_ne!(w.id, id);
    sh(&format!("echo again >> {d_path}"));
    assert_eq!(poll(&feed), vec![HostFileChange::Written(w.id)]);
    feed.unwatch(w, t1);
}

#[test]
fn an_idle_mark_goes_when_its_file_is_removed() {
    let Some(feed) = feed_or_skip() else {
        return;
    };
    let e = env();
    for name in ["by_host.txt", "by_self.txt"] {
        let f = create_and_open(&e, name);
        let w = feed.watch(&f.handle).unwrap();
        assert!(feed.unwatch(w, Instant::now()));
    }
    assert_eq!(feed.idle(), 2);
    // Kept, a mark would keep the removed file's inode and blocks.
    let by_host = e.host("by_host.txt");
    sh(&format!("rm {}", by_host.display()));
    assert!(nothing_reported(&feed));
    assert_eq!((feed.marked(), feed.idle()), (1, 1));
    std::fs::remove_file(e.host("by_self.txt")).unwrap();
    assert!(nothing_reported(&feed));
    assert_eq!((feed.marked(), feed.idle()), (0, 0));
}

#[test]
fn idle_marks_beyond_the_limit_go_in_a_batch() {
    let feed = match HostWriteFeed::with_idle_limits(IDLE_FOR, 32) {
        Ok(f) => f,
        Err(e) => {
            skip_without(&format!("fanotify ({e})"));
            return;
        }
    };
    let e = env();
    let now = Instant::now();
    for i in 0..33 {
        let name = format!("f{i}.txt");
        let f = create_and_open(&e, &name);
        let w = feed.watch(&f.handle).unwrap();
        assert!(feed.unwatch(w, now + Duration::from_millis(i)));
        assert_eq!(feed.idle(), if i < 32 { i as usize + 1 } else { 30 });
    }
    assert_eq!(feed.marked(), 30);
    // The longest idle went: f0..f2 are marked again, under new ids; f3 is
    // still kept.
    let f3 = open_rw(&e, "f3.txt");
    let w3 = feed.watch(&f3.handle).unwrap();
    assert_eq!(feed.marked(), 30);
    let f0 = open_rw(&e, "f0.txt");
    let w0 = feed.watch(&f0.handle).unwrap();
    assert_eq!(feed.marked(), 31);
    feed.unwatch(w3, now);
    feed.unwatch(w0, now);
}

/// A POSIX-face object (an NFS file, held by an `O_PATH` descriptor) is
/// watched as an open file is, through the same one mark per file.
#[test]
fn an_object_of_the_posix_face_is_watched_as_an_open_file_is() {
    let Some(feed) = feed_or_skip() else {
        return;
    };
    let e = env();
    e.create_file("d.txt", b"data");
    let posix = braid_fs::posix::PosixShare::new(&e.share_dir, 1, [7; 32]).unwrap();
    let cred = braid_fs::posix::Credentials::root();
    let obj = posix.lookup(&cred, &posix.root(), b"d.txt").unwrap();
    let w = feed.watch_object(&obj).unwrap();
    let id = w.id;
    let d = open_rw(&e, "d.txt");
    let w2 = feed.watch(&d.handle).unwrap();
    assert_eq!(w2.id, id, "one mark per file, however it is held");
    let d_path = e.host("d.txt");
    sh(&format!("echo more >> {}", d_path.display()));
    assert_eq!(poll(&feed), vec![HostFileChange::Written(id)]);
    sh(&format!("rm {}", d_path.display()));
    assert_eq!(poll(&feed), vec![HostFileChange::Unlinked(id)]);
    feed.unwatch(w2, Instant::now());
    feed.unwatch(w, Instant::now());
    assert_eq!(
        feed.marked(),
        0,
        "a removed file's mark goes with its last watch"
    );
}
