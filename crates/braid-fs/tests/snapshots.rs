//! Previous versions: a share's snapshot directories, listed and opened
//! read-only (`snapshot.rs`).

mod common;

use braid_fs::snapshot::{gmt_token, DEFAULT_FORMAT};
use braid_fs::*;
use common::*;

/// 2015-10-31 19:40:30 and 2026-11-25 10:00:00 UTC.
const OLD: i64 = 1_446_320_430;
const NEW: i64 = 1_795_600_800;

fn with_snapshots(e: &Env) {
    e.create_file("doc.txt", b"live");
    let snaps = e.share_dir.join(".snapshots");
    for (t, text) in [(OLD, &b"old"[..]), (NEW, b"newer")] {
        let d = snaps.join(gmt_token(t));
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("doc.txt"), text).unwrap();
    }
    std::fs::create_dir(snaps.join("not-a-snapshot")).unwrap();
    e.share
        .set_snapshots(SnapshotConfig {
            dir: ".snapshots".into(),
            format: DEFAULT_FORMAT.into(),
        })
        .unwrap();
}

#[test]
fn snapshots_are_listed_newest_first_and_read_as_they_were() {
    let e = env();
    with_snapshots(&e);
    assert_eq!(e.share.snapshots().unwrap(), [NEW, OLD]);

    let old = e.share.snapshot_view(OLD).unwrap();
    assert_eq!(old.snapshot_time(), Some(OLD));
    let p = OpenParams::new("doc.txt", access::FILE_READ_DATA, Disposition::Open);
    let o = e.fs.open(&e.ctx, &old, p).unwrap();
    assert_eq!(o.handle.read(0, 100).unwrap(), b"old");
    o.handle.close().unwrap();

    // The live file is untouched, and a time with no snapshot is not found.
    let live = e.open("doc.txt", RW, ALL, Disposition::Open).unwrap();
    assert_eq!(live.handle.read(0, 100).unwrap(), b"live");
    live.handle.close().unwrap();
    assert!(matches!(
        e.share.snapshot_view(OLD + 1),
        Err(FsError::NotFound)
    ));
}

#[test]
fn a_snapshot_refuses_every_change() {
    let e = env();
    with_snapshots(&e);
    let snap = e.share.snapshot_view(NEW).unwrap();
    let open = |path: &str, acc: u32, disp: Disposition| {
        let mut p = OpenParams::new(path, acc, disp);
        p.share_access = ALL;
        e.fs.open(&e.ctx, &snap, p)
    };
    let protected = |r: FsResult<()>| matches!(r, Err(FsError::WriteProtected));

    // Write access is granted (as Samba grants it) but nothing is written.
    let f = open(
        "doc.txt",
        RW | access::DELETE | access::FILE_WRITE_ATTRIBUTES,
        Disposition::Open,
    )
    .unwrap();
    assert!(matches!(
        f.handle.write(0, b"x"),
        Err(FsError::WriteProtected)
    ));
    assert!(protected(f.handle.set_end_of_file(0)));
    assert!(protected(f.handle.set_delete_on_close(true)));
    assert!(protected(f.handle.rename("moved.txt", false)));
    assert!(protected(f.handle.set_basic([None; 4], Some(attr::HIDDEN))));
    assert!(protected(f.handle.set_security_descriptor(&[
        1, 0, 4, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
    ])));
    f.handle.close().unwrap();

    for disp in [
        Disposition::Create,
        Disposition::Supersede,
        Disposition::Overwrite,
        Disposition::OverwriteIf,
    ] {
        assert!(
            matches!(open("doc.txt", RW, disp), Err(FsError::WriteProtected)),
            "{disp:?}"
        );
    }
    assert!(matches!(
        open("new.txt", RW, Disposition::OpenIf),
        Err(FsError::NotFound)
    ));
    let mut p = OpenParams::new("doc.txt", access::DELETE, Disposition::Open);
    p.delete_on_close = true;
    assert!(matches!(
        e.fs.open(&e.ctx, &snap, p),
        Err(FsError::WriteProtected)
    ));

    let snapshot_dir = e.share_dir.join(".snapshots").join(gmt_token(NEW));
    assert_eq!(
        std::fs::read(snapshot_dir.join("doc.txt")).unwrap(),
        b"newer"
    );
    assert!(!snapshot_dir.join("new.txt").exists());
    assert!(!snapshot_dir.join("moved.txt").exists());
}

#[test]
fn the_live_share_hides_its_snapshot_directory() {
    let e = env();
    with_snapshots(&e);
    let root = e
        .open("", access::FILE_LIST_DIRECTORY, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(listed_names(&root), [".", "..", "doc.txt"]);
    let short = braid_fs::shortname::short_name(".snapshots");
    for path in [".snapshots", ".SNAPSHOTS", ".snapshots\\x", short.as_str()] {
        assert!(
            matches!(
                e.open(path, access::FILE_READ_ATTRIBUTES, ALL, Disposition::Open),
                Err(FsError::NotFound | FsError::PathNotFound)
            ),
            "{path}"
        );
    }
    // Nor can a client make one there.
    assert!(e.open(".snapshots", RW, ALL, Disposition::OpenIf).is_err());
    let t = gmt_token(OLD);
    assert!(matches!(
        e.open(
            &format!(".snapshots\\{t}\\doc.txt"),
            RW,
            ALL,
            Disposition::Open
        ),
        Err(FsError::PathNotFound)
    ));
    // The root of a snapshot lists what the share held then.
    let snap = e.share.snapshot_view(OLD).unwrap();
    let mut p = OpenParams::new("", access::FILE_LIST_DIRECTORY, Disposition::Open);
    p.share_access = ALL;
    let r = e.fs.open(&e.ctx, &snap, p).unwrap();
    assert_eq!(listed_names(&r), [".", "..", "doc.txt", "sub"]);
}

#[test]
fn no_snapshot_directory_means_no_snapshots() {
    let e = env();
    e.share
        .set_snapshots(SnapshotConfig {
            dir: "missing".into(),
            format: DEFAULT_FORMAT.into(),
        })
        .unwrap();
    assert_eq!(e.share.snapshots().unwrap(), Vec::<i64>::new());
    assert!(matches!(e.share.snapshot_view(OLD), Err(FsError::NotFound)));
}
