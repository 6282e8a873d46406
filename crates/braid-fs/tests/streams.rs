//! Named streams through the file service: `file:stream[:$DATA]` opens,
//! per-stream share modes, delete-on-close, the file's delete and rename
//! with open streams, overwrite, stream renames and the stream list.

mod common;

use braid_fs::*;
use common::*;

macro_rules! need_xattrs {
    ($e:expr) => {
        if !xattrs_work(&$e) {
            skip_without("user xattrs on the test file system");
            return;
        }
    };
}

fn names(h: &OpenHandle) -> Vec<(String, u64)> {
    let mut v: Vec<_> = h
        .streams()
        .unwrap()
        .into_iter()
        .map(|s| (s.name, s.size))
        .collect();
    v.sort();
    v
}

#[test]
fn stream_io_and_list() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f.txt", b"main");
    let s = e.open("f.txt:s1", RW, ALL, Disposition::Create).unwrap();
    assert_eq!(s.action, CreateAction::Created);
    assert_eq!(s.handle.write(0, b"test data").unwrap(), 9);
    assert_eq!(s.handle.write(5, b"MORE DATA ").unwrap(), 10);
    assert_eq!(s.handle.read(0, 100).unwrap(), b"test MORE DATA ");
    assert_eq!(s.handle.read(5, 4).unwrap(), b"MORE");
    assert_eq!(s.handle.read(100, 4).unwrap(), b"");
    assert_eq!(s.handle.info().unwrap().end_of_file, 15);
    assert_eq!(s.handle.stream_name().as_deref(), Some("s1"));
    assert_ne!(s.handle.stream_key(), 0);
    s.handle.close().unwrap();
    // The file's data is untouched; the name is found without regard to case.
    let f = e.open("f.txt", RW, ALL, Disposition::Open).unwrap();
    assert_eq!(f.handle.read(0, 100).unwrap(), b"main");
    assert_eq!(f.handle.stream_key(), 0);
    assert_eq!(
        names(&f.handle),
        vec![("::$DATA".into(), 4), (":s1:$DATA".into(), 15)]
    );
    f.handle.close().unwrap();
    let s = e
        .open("f.txt:S1:$data", RW, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(s.handle.read(0, 4).unwrap(), b"test");
    // End of file and allocation of a stream.
    s.handle.set_end_of_file(4).unwrap();
    assert_eq!(s.handle.read(0, 100).unwrap(), b"test");
    s.handle.set_end_of_file(6).unwrap();
    assert_eq!(s.handle.read(0, 100).unwrap(), b"test\0\0");
    s.handle.set_allocation(2).unwrap();
    assert_eq!(s.handle.read(0, 100).unwrap(), b"te");
    s.handle.close().unwrap();
    // Listings show files only.
    let d = e
        .open("", access::FILE_LIST_DIRECTORY, ALL, Disposition::Open)
        .unwrap();
    let listed: Vec<String> = d
        .handle
        .read_dir()
        .unwrap()
        .into_iter()
        .map(|x| x.name)
        .collect();
    assert_eq!(listed, vec![".", "..", "f.txt"]);
}

#[test]
fn stream_of_missing_file_creates_it_and_open_does_not() {
    let e = env();
    need_xattrs!(e);
    assert!(matches!(
        e.open("nofile:s", RW, ALL, Disposition::Open),
        Err(FsError::NotFound)
    ));
    assert!(!e.exists("nofile"));
    let s = e.open("new:s", RW, ALL, Disposition::OpenIf).unwrap();
    assert_eq!(s.action, CreateAction::Created);
    assert!(e.exists("new"));
    s.handle.close().unwrap();
    // The default data stream is the file itself.
    let d = e.open("new::$DATA", RW, ALL, Disposition::Open).unwrap();
    assert_eq!(d.handle.stream_key(), 0);
    d.handle.close().unwrap();
}

#[test]
fn invalid_stream_names() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"");
    for bad in [
        "f:",
        "f:s:",
        "f:s:$FOO",
        "f:a:b:$DATA",
        "f:a/b",
        "f:a\\b",
        "d:s\\f",
    ] {
        assert!(
            matches!(
                e.open(bad, RW, ALL, Disposition::OpenIf),
                Err(FsError::InvalidName)
            ),
            "{bad:?}"
        );
    }
    let long = format!("f:{}", "x".repeat(300));
    assert!(e.open(&long, RW, ALL, Disposition::OpenIf).is_err());
    let f = e.open("f", RW, ALL, Disposition::Open).unwrap();
    assert_eq!(names(&f.handle), vec![("::$DATA".into(), 0)]);
}

/// The quota index (`braid_fs::quota`) is no stream the file service
/// opens: `$INDEX_ALLOCATION` is no data stream type, so even a real
/// `$Extend\$Quota` file in the share is not reached through its name,
/// and nothing is created.
#[test]
fn the_quota_index_name_is_no_stream_of_the_share() {
    let e = env();
    let name = "$Extend\\$Quota:$Q:$INDEX_ALLOCATION";
    assert!(braid_fs::quota::is_quota_index(name));
    assert!(matches!(
        e.open(name, RW, ALL, Disposition::OpenIf),
        Err(FsError::InvalidName)
    ));
    assert_eq!(std::fs::read_dir(&e.share_dir).unwrap().count(), 0);
    std::fs::create_dir(e.share_dir.join("$Extend")).unwrap();
    std::fs::write(e.share_dir.join("$Extend/$Quota"), b"").unwrap();
    for disposition in [
        Disposition::Open,
        Disposition::OpenIf,
        Disposition::OverwriteIf,
    ] {
        assert!(matches!(
            e.open(name, RW, ALL, disposition),
            Err(FsError::InvalidName)
        ));
    }
    assert_eq!(
        std::fs::read_dir(e.share_dir.join("$Extend"))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn directories_and_streams() {
    let e = env();
    need_xattrs!(e);
    e.mkdir("d");
    let mut p = OpenParams::new("d:s", RW, Disposition::Create);
    p.directory = DirectoryRequirement::MustBeDirectory;
    assert!(matches!(e.open_p(p), Err(FsError::NotADirectory)));
    assert!(matches!(
        e.open("d::$DATA", RW, ALL, Disposition::Open),
        Err(FsError::IsADirectory)
    ));
    // A directory may have named streams; it has no default stream.
    let s = e.open("d:s", RW, ALL, Disposition::Create).unwrap();
    s.handle.write(0, b"x").unwrap();
    assert!(!s.handle.info().unwrap().is_directory);
    assert_eq!(names(&s.handle), vec![(":s:$DATA".into(), 1)]);
}

#[test]
fn share_modes_are_per_stream() {
    let e = env();
    need_xattrs!(e);
    let a = e
        .open("f:one", access::FILE_WRITE_DATA, 0, Disposition::Create)
        .unwrap();
    let b = e
        .open("f:two", access::FILE_WRITE_DATA, 0, Disposition::Create)
        .unwrap();
    assert!(matches!(
        e.open("f:ONE", access::FILE_WRITE_DATA, 0, Disposition::Open),
        Err(FsError::SharingViolation)
    ));
    // Opens of the file do not conflict with opens of its streams...
    let f = e.open("f", RW, 0, Disposition::Open).unwrap();
    f.handle.close().unwrap();
    // ...except an open for DELETE, which needs them to share delete.
    assert!(matches!(
        e.open("f", access::DELETE, ALL, Disposition::Open),
        Err(FsError::SharingViolation)
    ));
    a.handle.close().unwrap();
    b.handle.close().unwrap();
    e.open("f", access::DELETE, ALL, Disposition::Open)
        .unwrap()
        .handle
        .close()
        .unwrap();
}

#[test]
fn delete_on_close_of_a_stream_removes_only_it() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"data");
    e.open("f:keep", RW, ALL, Disposition::Create).unwrap();
    let mut p = OpenParams::new("f:gone", RW | access::DELETE, Disposition::Create);
    p.delete_on_close = true;
    e.open_p(p).unwrap().handle.close().unwrap();
    let f = e.open("f", RW, ALL, Disposition::Open).unwrap();
    assert_eq!(
        names(&f.handle),
        vec![("::$DATA".into(), 4), (":keep:$DATA".into(), 0)]
    );
    assert_eq!(f.handle.read(0, 10).unwrap(), b"data");
}

#[test]
fn file_deletion_waits_for_open_streams() {
    let e = env();
    need_xattrs!(e);
    let s = e
        .open("f:s", RW, share_access::ALL, Disposition::Create)
        .unwrap();
    s.handle.write(0, b"abc").unwrap();
    let mut p = OpenParams::new("f", access::DELETE, Disposition::Open);
    p.delete_on_close = true;
    e.open_p(p).unwrap().handle.close().unwrap();
    // The stream open still reads; names of the file are delete pending.
    assert_eq!(s.handle.read(0, 3).unwrap(), b"abc");
    assert!(matches!(
        e.open("f", RW, ALL, Disposition::OpenIf),
        Err(FsError::DeletePending)
    ));
    assert!(matches!(
        e.open("f:s", RW, ALL, Disposition::OpenIf),
        Err(FsError::DeletePending)
    ));
    assert!(e.exists("f"));
    s.handle.close().unwrap();
    assert!(!e.exists("f"));
}

#[test]
fn file_with_open_stream_keeps_its_name_and_rename_keeps_streams() {
    let e = env();
    need_xattrs!(e);
    let s = e.open("f:s", RW, ALL, Disposition::Create).unwrap();
    s.handle.write(0, b"kept").unwrap();
    let f = e
        .open(
            "f",
            access::DELETE | access::FILE_READ_ATTRIBUTES,
            ALL,
            Disposition::Open,
        )
        .unwrap();
    assert!(matches!(
        f.handle.rename("g", false),
        Err(FsError::AccessDenied)
    ));
    s.handle.close().unwrap();
    f.handle.rename("g", false).unwrap();
    f.handle.close().unwrap();
    let s = e.open("g:s", RW, ALL, Disposition::Open).unwrap();
    assert_eq!(s.handle.read(0, 10).unwrap(), b"kept");
}

#[test]
fn overwrite_of_the_file_drops_its_streams_and_of_a_stream_truncates_it() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"data");
    let s = e.open("f:s", RW, ALL, Disposition::Create).unwrap();
    s.handle.write(0, b"stream").unwrap();
    s.handle.close().unwrap();
    let s = e.open("f:s", RW, ALL, Disposition::OverwriteIf).unwrap();
    assert_eq!(s.action, CreateAction::Overwritten);
    assert_eq!(s.handle.read(0, 10).unwrap(), b"");
    s.handle.write(0, b"again").unwrap();
    assert_eq!(
        names(&s.handle),
        vec![("::$DATA".into(), 4), (":s:$DATA".into(), 5)]
    );
    s.handle.close().unwrap();
    let f = e.open("f", RW, ALL, Disposition::Overwrite).unwrap();
    assert_eq!(names(&f.handle), vec![("::$DATA".into(), 0)]);
}

#[test]
fn stream_renames() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"");
    let full = RW | access::DELETE;
    let t = e.open("f:target", full, ALL, Disposition::Create).unwrap();
    t.handle.close().unwrap();
    let s = e.open("f:src", full, ALL, Disposition::Create).unwrap();
    s.handle.write(0, b"payload").unwrap();
    s.handle.rename(":renamed:$DATA", false).unwrap();
    assert_eq!(s.handle.stream_name().as_deref(), Some("renamed"));
    // An existing target needs replace_if_exists, and must be empty.
    assert!(matches!(
        s.handle.rename(":target", false),
        Err(FsError::NameCollision)
    ));
    s.handle.rename(":target", true).unwrap();
    assert_eq!(s.handle.read(0, 10).unwrap(), b"payload");
    let o = e.open("f:other", full, ALL, Disposition::Create).unwrap();
    o.handle.write(0, b"x").unwrap();
    assert!(matches!(
        s.handle.rename(":other", true),
        Err(FsError::AccessDenied)
    ));
    o.handle.close().unwrap();
    assert!(matches!(
        s.handle.rename(":other", true),
        Err(FsError::InvalidParameter)
    ));
    assert!(matches!(
        s.handle.rename(":bad/name", true),
        Err(FsError::InvalidParameter)
    ));
    // To the default stream of the (empty) file.
    s.handle.rename("::$DATA", true).unwrap();
    s.handle.close().unwrap();
    let f = e.open("f", RW, ALL, Disposition::Open).unwrap();
    assert_eq!(f.handle.read(0, 10).unwrap(), b"payload");
    assert_eq!(
        names(&f.handle),
        vec![("::$DATA".into(), 7), (":other:$DATA".into(), 1)]
    );
}

#[test]
fn stream_size_limit_is_disk_full() {
    let e = env();
    need_xattrs!(e);
    let s = e.open("f:big", RW, ALL, Disposition::Create).unwrap();
    s.handle.write(0, b"small").unwrap();
    // Past the kernel's xattr value limit: refused before any allocation.
    assert!(matches!(
        s.handle.write(1 << 40, b"x"),
        Err(FsError::DiskFull)
    ));
    assert!(matches!(
        s.handle.set_end_of_file(1 << 20),
        Err(FsError::DiskFull)
    ));
    assert!(matches!(
        s.handle.write(u64::MAX - 1, b"xy"),
        Err(FsError::DiskFull)
    ));
    assert_eq!(s.handle.read(0, 10).unwrap(), b"small");
}
