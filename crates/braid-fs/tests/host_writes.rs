//! The host write feed (fanotify inode marks): what other processes do to
//! a marked file is reported, what this process does is not.
mod common;
use std::io;
use std::time::Duration;

use braid_fs::host_writes::{HostFileChange, HostWriteFeed};
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

#[test]
fn reports_other_processes_writes_and_removals_and_not_its_own() {
    let feed = match HostWriteFeed::new() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("skipped: fanotify is not available here ({e})");
            return;
        }
    };
    let e = env();
    e.create_file("a.txt", b"first");
    e.create_file("b.txt", b"other");
    let a = e.open("a.txt", RW, ALL, Disposition::Open).unwrap();
    let a2 = e.open("a.txt", RW, ALL, Disposition::Open).unwrap();
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

    feed.unwatch(w);
    assert_eq!(feed.marked(), 1, "still watched once");
    feed.unwatch(w2);
    assert_eq!(feed.marked(), 0);
    sh(&format!("echo late >> {b_path}"));
    assert!(nothing_reported(&feed));
}

#[test]
fn a_removed_file_is_reported_once_its_last_name_goes() {
    let Ok(feed) = HostWriteFeed::new() else {
        return;
    };
    let e = env();
    e.create_file("c.txt", b"data");
    let c = e.open("c.txt", RW, ALL, Disposition::Open).unwrap();
    let w = feed.watch(&c.handle).unwrap();
    let id = w.id;
    let (c_path, link) = (e.host("c.txt"), e.host("link.txt"));
    let (c_path, link) = (c_path.display(), link.display());
    // A second name, then the first removed: a name is left.
    sh(&format!("ln {c_path} {link} && rm {c_path}"));
    assert!(nothing_reported(&feed));
    sh(&format!("rm {link}"));
    assert_eq!(poll(&feed), vec![HostFileChange::Unlinked(id)]);
    feed.unwatch(w);
}
