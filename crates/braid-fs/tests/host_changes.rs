//! The host change feed (fanotify): what other processes change in a
//! watched directory is reported, what this process changes is not.
mod common;
use std::io;
use std::time::Duration;

use braid_fs::host_changes::{HostChange, HostChangeFeed};
use braid_fs::*;
use common::*;

/// Everything queued once the changes of a finished command have arrived.
fn poll(feed: &HostChangeFeed) -> Vec<HostChange> {
    poll_feed(|| feed.read())
}

/// A fresh share with a directory "d", opened.
fn directory() -> (Env, Opened) {
    let e = env();
    e.mkdir("d");
    let mut p = OpenParams::new("d", access::FILE_READ_DATA, Disposition::Open);
    p.directory = DirectoryRequirement::MustBeDirectory;
    let dir = e.open_p(p).unwrap();
    (e, dir)
}

/// The tests of this file run one at a time. A process another test forks
/// holds a copy of every descriptor open at that moment until it execs;
/// if this process's own write to a file was open then, the last close,
/// and with it the close-after-write event, is the child's, and is
/// reported as another process's change.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn reports_other_processes_changes_and_not_its_own() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let feed = match HostChangeFeed::new() {
        Ok(f) => f,
        Err(e) => {
            skip_without(&format!("fanotify ({e})"));
            return;
        }
    };
    let (e, dir) = directory();
    let id = feed.watch(&dir.handle).unwrap();
    assert_eq!(
        feed.watch(&dir.handle).unwrap(),
        id,
        "one mark per directory"
    );
    let d = e.host("d");

    // This process's own changes are not reported.
    std::fs::write(d.join("own.txt"), b"x").unwrap();
    std::fs::rename(d.join("own.txt"), d.join("own2.txt")).unwrap();
    std::fs::remove_file(d.join("own2.txt")).unwrap();

    let d = d.display();
    sh(&format!("echo hi > {d}/a.txt && mkdir {d}/sub"));
    let name = |s: &str| s.to_string();
    assert_eq!(
        poll(&feed),
        vec![
            HostChange::Created {
                dir: id,
                name: name("a.txt"),
                is_dir: false
            },
            HostChange::Written {
                dir: id,
                name: name("a.txt")
            },
            HostChange::Created {
                dir: id,
                name: name("sub"),
                is_dir: true
            },
        ]
    );
    sh(&format!("mv {d}/a.txt {d}/b.txt && chmod 600 {d}/b.txt"));
    assert_eq!(
        poll(&feed),
        vec![
            HostChange::Renamed {
                dir: id,
                old: name("a.txt"),
                new: name("b.txt"),
                is_dir: false
            },
            HostChange::AttributesChanged {
                dir: id,
                name: name("b.txt"),
                is_dir: false
            },
        ]
    );
    // A move out of the directory is a removal, also when nothing follows it.
    sh(&format!("rmdir {d}/sub && mv {d}/b.txt {d}/../out.txt"));
    assert_eq!(
        poll(&feed),
        vec![
            HostChange::Removed {
                dir: id,
                name: name("sub"),
                is_dir: true
            },
            HostChange::Removed {
                dir: id,
                name: name("b.txt"),
                is_dir: false
            },
        ]
    );

    feed.unwatch(id);
    assert_eq!(feed.marked(), 1, "still watched once");
    feed.unwatch(id);
    assert_eq!(feed.marked(), 0);
    sh(&format!("touch {d}/late.txt"));
    std::thread::sleep(Duration::from_millis(200));
    assert!(matches!(feed.read(), Err(e) if e.kind() == io::ErrorKind::WouldBlock));
}

#[test]
fn a_full_queue_reports_an_overflow() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let feed = match HostChangeFeed::new() {
        Ok(f) => f,
        Err(e) => {
            skip_without(&format!("fanotify ({e})"));
            return;
        }
    };
    let (e, dir) = directory();
    feed.watch(&dir.handle).unwrap();
    // More new names than the kernel queues (16384 events by default),
    // made while nothing reads.
    let max: usize = std::fs::read_to_string("/proc/sys/fs/fanotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384);
    if max > 100_000 {
        eprintln!("skipped: the queue holds {max} events");
        return;
    }
    let d = e.host("d");
    sh(&format!(
        "cd {} && seq {} | xargs touch",
        d.display(),
        max + 100
    ));
    let mut seen = Vec::new();
    loop {
        match feed.read() {
            Ok(v) => seen.extend(v),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("read: {e}"),
        }
    }
    assert!(
        seen.contains(&HostChange::Overflow),
        "{} changes, no overflow",
        seen.len()
    );
}
