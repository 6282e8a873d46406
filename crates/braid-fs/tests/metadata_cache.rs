//! The metadata cache under the file service's SMB face over a real
//! directory: every change made beside it (by this process through
//! `std::fs`, as another process or the NFS face would make it, and by the
//! service itself) is seen by the next case-insensitive lookup; negative
//! lookups in an indexed directory read nothing; and the deliberately
//! broken layer is caught by the same checks.

mod common;

use std::sync::Arc;

use braid_fs::meta::{MetadataStore, PosixStore};
use braid_fs::*;
use common::*;

fn cached() -> Env {
    let e = env();
    e.fs.enable_metadata_cache(&e.share);
    e
}

fn stats(e: &Env) -> braid_fs::meta::CacheStats {
    e.share
        .metadata_cache_stats()
        .expect("the share has a cache")
}

/// Opens `path` (any case) and returns the name the service found.
fn found(e: &Env, path: &str) -> Result<String, FsError> {
    let o = e.open(path, access::FILE_READ_ATTRIBUTES, ALL, Disposition::Open)?;
    let name = o.handle.path();
    o.handle.close().unwrap();
    Ok(name)
}

#[test]
fn the_feed_is_there_where_tests_run() {
    if !PosixStore::watching().has_feed() && may_skip() {
        skip_without("fanotify");
        return;
    }
    assert!(PosixStore::watching().has_feed());
}

#[test]
fn host_changes_are_seen_at_once() {
    let e = cached();
    e.mkdir("Dir");
    // Index the directory with a negative lookup.
    assert!(matches!(
        found(&e, "dir\\report.txt"),
        Err(FsError::NotFound)
    ));
    std::fs::write(e.host("Dir/Report.TXT"), b"x").unwrap();
    assert_eq!(found(&e, "dir\\report.txt").unwrap(), "Dir\\Report.TXT");
    // A case-only rename.
    std::fs::rename(e.host("Dir/Report.TXT"), e.host("Dir/REPORT.txt")).unwrap();
    assert_eq!(found(&e, "dir\\report.TXT").unwrap(), "Dir\\REPORT.txt");
    let again = e.open("DIR\\report.txt", RW, ALL, Disposition::Create);
    assert!(matches!(again, Err(FsError::NameCollision)));
    // Deleted: creating it under another case makes a new file.
    std::fs::remove_file(e.host("Dir/REPORT.txt")).unwrap();
    assert!(matches!(
        found(&e, "dir\\report.txt"),
        Err(FsError::NotFound)
    ));
    e.create_file("dir\\Report.txt", b"new");
    assert!(e.exists("Dir/Report.txt"));
    assert!(stats(&e).invalidations >= 3, "{:?}", stats(&e));
}

#[test]
fn a_directory_moved_under_a_cached_path() {
    let e = cached();
    e.mkdir("A");
    e.mkdir("A\\Sub");
    e.mkdir("B");
    e.create_file("A\\Sub\\File.txt", b"1");
    assert_eq!(found(&e, "a\\sub\\file.TXT").unwrap(), "A\\Sub\\File.txt");
    assert!(matches!(found(&e, "b\\sub"), Err(FsError::NotFound)));
    std::fs::rename(e.host("A/Sub"), e.host("B/Moved")).unwrap();
    assert!(matches!(
        found(&e, "a\\sub\\file.txt"),
        Err(FsError::PathNotFound | FsError::NotFound)
    ));
    assert_eq!(
        found(&e, "b\\moved\\FILE.txt").unwrap(),
        "B\\Moved\\File.txt"
    );
}

#[test]
fn the_service_s_own_changes_are_seen() {
    let e = cached();
    e.create_file("Old.txt", b"1");
    assert_eq!(found(&e, "old.TXT").unwrap(), "Old.txt");
    let o = e
        .open("OLD.txt", access::DELETE, ALL, Disposition::Open)
        .unwrap();
    o.handle.rename("New.TXT", false).unwrap();
    o.handle.close().unwrap();
    assert!(matches!(found(&e, "old.txt"), Err(FsError::NotFound)));
    assert_eq!(found(&e, "new.txt").unwrap(), "New.TXT");
    let o = e
        .open("new.txt", access::DELETE, ALL, Disposition::Open)
        .unwrap();
    o.handle.set_delete_on_close(true).unwrap();
    o.handle.close().unwrap();
    assert!(matches!(found(&e, "NEW.txt"), Err(FsError::NotFound)));
}

#[test]
fn creating_in_a_large_directory_reads_it_once() {
    let e = cached();
    let n = 20_000;
    std::fs::create_dir(e.host("big")).unwrap();
    for i in 0..n {
        std::fs::write(e.host(&format!("big/Entry{i:06}.dat")), b"").unwrap();
    }
    let before = stats(&e);
    for i in 0..200 {
        e.create_file(&format!("BIG\\new{i}.dat"), b"");
    }
    let after = stats(&e);
    // Each create looks "BIG" up in the root and the new name in "big",
    // case-insensitively: the first reads both directories, every other
    // is answered by their indexes.
    assert_eq!(after.misses - before.misses, 2, "{after:?}");
    assert!(
        after.negative_hits - before.negative_hits >= 199,
        "{after:?}"
    );
    assert_eq!(
        found(&e, "big\\entry019999.DAT").unwrap(),
        "big\\Entry019999.dat"
    );
    // The last create's change is applied by the next lookup.
    assert_eq!(stats(&e).entries, n + 200 + 1, "{:?}", stats(&e));
    let names = std::fs::read_dir(e.host("big")).unwrap().count() as u64;
    assert_eq!(names, n + 200);
}

#[test]
fn the_broken_layer_is_caught() {
    let e = env();
    e.share
        .set_broken_metadata_cache(e.fs.metadata_cache_budget(), Arc::new(SystemClock));
    assert!(matches!(found(&e, "report.txt"), Err(FsError::NotFound)));
    std::fs::write(e.host("Report.TXT"), b"x").unwrap();
    // What host_changes_are_seen_at_once requires, failed by this layer.
    assert!(matches!(found(&e, "report.txt"), Err(FsError::NotFound)));
}

#[test]
fn without_a_cache_nothing_is_counted() {
    let e = env();
    assert!(e.share.metadata_cache_stats().is_none());
    e.create_file("a", b"");
    assert_eq!(found(&e, "A").unwrap(), "a");
    let plain = PosixStore::plain();
    assert!(plain.cache_stats().is_none());
}

#[test]
fn the_posix_feed_reports_every_change_to_a_watched_directory() {
    use braid_fs::meta::StoreChange;
    use std::os::fd::AsRawFd;
    let store = PosixStore::watching();
    if !store.has_feed() {
        if may_skip() {
            skip_without("fanotify");
            return;
        }
        panic!("no fanotify feed");
    }
    let e = env();
    std::fs::create_dir(e.host("w")).unwrap();
    let dir = std::fs::File::open(e.host("w")).unwrap();
    let stamp = store.dir_stamp(dir.as_raw_fd()).unwrap();
    let held = store.hold(dir.as_raw_fd()).unwrap();
    assert!(store.watch(&held, stamp.id));
    // Made by this very process: the server's own changes are reported too.
    std::fs::write(e.host("w/One"), b"").unwrap();
    std::fs::rename(e.host("w/One"), e.host("w/Two")).unwrap();
    std::fs::create_dir(e.host("w/Sub")).unwrap();
    std::fs::remove_file(e.host("w/Two")).unwrap();
    let mut seen = Vec::new();
    store.drain_changes(&mut |c| seen.push(c));
    for name in ["One", "Two", "Sub"] {
        let want = StoreChange::Entry {
            dir: stamp.id,
            name: name.into(),
        };
        assert!(seen.contains(&want), "{name} missing from {seen:?}");
    }
    // Drained: nothing more until the next change; none after unwatching.
    let mut more = Vec::new();
    store.drain_changes(&mut |c| more.push(c));
    assert!(more.is_empty(), "{more:?}");
    store.unwatch(&held);
    std::fs::write(e.host("w/Three"), b"").unwrap();
    store.drain_changes(&mut |c| more.push(c));
    assert!(more.is_empty(), "{more:?}");
}
