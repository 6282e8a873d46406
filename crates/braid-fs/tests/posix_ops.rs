//! Name operations, attributes and I/O through the POSIX face.

mod posix_util;

use std::collections::BTreeSet;
use std::os::unix::fs::FileExt;

use braid_fs::posix::*;
use posix_util::*;

#[test]
fn posix_create_lookup_getattr_readdir_round_trip() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    assert!(r.is_root());
    assert_eq!(s.getattr(&r).unwrap().kind, ObjectKind::Directory);

    let f = mkfile(&e, &r, "file");
    let (d, dc) = s
        .create(
            &root(),
            &r,
            b"dir",
            CreateKind::Directory,
            0o750,
            &SetAttrs::default(),
        )
        .unwrap();
    assert!(dc.after > dc.before, "{dc:?}");
    assert!(!dc.atomic);
    let (l, _) = s
        .create(
            &root(),
            &r,
            b"link",
            CreateKind::Symlink(b"file"),
            0o777,
            &SetAttrs::default(),
        )
        .unwrap();
    let (p, _) = s
        .create(
            &root(),
            &r,
            b"fifo",
            CreateKind::Fifo,
            0o600,
            &SetAttrs::default(),
        )
        .unwrap();
    let (sock, _) = s
        .create(
            &root(),
            &r,
            b"sock",
            CreateKind::Socket,
            0o600,
            &SetAttrs::default(),
        )
        .unwrap();
    let (cdev, _) = s
        .create(
            &root(),
            &r,
            b"null",
            CreateKind::CharDevice { major: 1, minor: 3 },
            0o666,
            &SetAttrs::default(),
        )
        .unwrap();
    let (bdev, _) = s
        .create(
            &root(),
            &r,
            b"blk",
            CreateKind::BlockDevice { major: 7, minor: 0 },
            0o660,
            &SetAttrs::default(),
        )
        .unwrap();

    let kinds = [
        (&f, "file", ObjectKind::File),
        (&d, "dir", ObjectKind::Directory),
        (&l, "link", ObjectKind::Symlink),
        (&p, "fifo", ObjectKind::Fifo),
        (&sock, "sock", ObjectKind::Socket),
        (&cdev, "null", ObjectKind::CharDevice),
        (&bdev, "blk", ObjectKind::BlockDevice),
    ];
    for (obj, name, kind) in kinds {
        let found = s.lookup(&root(), &r, name.as_bytes()).unwrap();
        assert_eq!(found.kind(), kind, "{name}");
        assert_eq!(found.handle(), obj.handle(), "{name}");
        assert_eq!(found.fileid(), obj.fileid());
        assert!(found.handle().len() <= MAX_HANDLE);
        let a = s.getattr(&found).unwrap();
        assert_eq!(a.kind, kind);
        assert_eq!(a.fileid, found.fileid());
        assert_eq!((a.dev, a.fileid), found.key());
    }
    // Modes are exact, whatever the process umask.
    assert_eq!(s.getattr(&d).unwrap().mode, 0o750);
    assert_eq!(s.getattr(&f).unwrap().mode, 0o644);
    let ca = s.getattr(&cdev).unwrap();
    assert_eq!((ca.rdev_major, ca.rdev_minor, ca.mode), (1, 3, 0o666));
    // The same key as stat's st_dev/st_ino, which the open table uses.
    let st = std::fs::symlink_metadata(e.dir.join("file")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(f.key(), (st.dev(), st.ino()));

    let listed: BTreeSet<Vec<u8>> = s
        .readdir(&root(), &r, 0, 100)
        .unwrap()
        .entries
        .into_iter()
        .map(|en| {
            assert!(en.cookie > 2);
            en.object.unwrap();
            en.name
        })
        .collect();
    let want: BTreeSet<Vec<u8>> = ["file", "dir", "link", "fifo", "sock", "null", "blk"]
        .iter()
        .map(|n| n.as_bytes().to_vec())
        .collect();
    assert_eq!(listed, want);

    assert_eq!(s.parent(&root(), &d).unwrap().unwrap(), r);
    assert!(s.parent(&root(), &r).unwrap().is_none());
    assert_eq!(errno(s.lookup(&root(), &f, b"x")), libc::ENOTDIR);
    assert_eq!(errno(s.lookup(&root(), &r, b"missing")), libc::ENOENT);
    assert_eq!(
        errno(s.create(
            &root(),
            &r,
            b"dir",
            CreateKind::Directory,
            0o755,
            &SetAttrs::default()
        )),
        libc::EEXIST
    );
}

#[test]
fn posix_bad_names_are_refused() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    for name in [&b".."[..], b".", b"a/b", b"", b"/", b"a\0b"] {
        assert_eq!(
            s.lookup(&root(), &r, name).unwrap_err(),
            PosixError::BadName,
            "{name:?}"
        );
        assert_eq!(
            s.create_file(
                &root(),
                &r,
                name,
                0o644,
                CreateMode::Unchecked,
                &SetAttrs::default()
            )
            .unwrap_err(),
            PosixError::BadName
        );
        assert_eq!(
            s.remove(&root(), &r, name).unwrap_err(),
            PosixError::BadName
        );
    }
    let long = vec![b'a'; 256];
    assert_eq!(
        s.lookup(&root(), &r, &long).unwrap_err(),
        PosixError::NameTooLong
    );
    mkfile(&e, &r, &"b".repeat(255));
}

#[test]
fn posix_symlinks_are_never_followed() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    for (name, target) in [("abs", &b"/"[..]), ("up", b"../../.."), ("etc", b"/etc")] {
        let (l, _) = s
            .create(
                &root(),
                &r,
                name.as_bytes(),
                CreateKind::Symlink(target),
                0o777,
                &SetAttrs::default(),
            )
            .unwrap();
        let found = s.lookup(&root(), &r, name.as_bytes()).unwrap();
        assert_eq!(found.kind(), ObjectKind::Symlink);
        assert_eq!(found, l);
        assert_eq!(s.readlink(&found).unwrap(), target);
        // Nothing resolves through it either.
        assert_eq!(errno(s.lookup(&root(), &found, b"passwd")), libc::ENOTDIR);
        assert_eq!(errno(s.readdir(&root(), &found, 0, 10)), libc::ENOTDIR);
        assert_eq!(
            errno(s.open_file(&root(), &found, true, false, false)),
            libc::ELOOP
        );
    }
    assert_eq!(errno(s.readlink(&r)), libc::EINVAL);
}

#[test]
fn posix_rename_link_remove() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let c = root();
    let f = mkfile(&e, &r, "a");
    let (d, _) = s
        .create(
            &c,
            &r,
            b"d",
            CreateKind::Directory,
            0o755,
            &SetAttrs::default(),
        )
        .unwrap();

    // Rename keeps the handle: it names the inode, not the path.
    let (from, to) = s.rename(&c, &r, b"a", &d, b"b").unwrap();
    assert!(from.after > from.before && to.after > to.before);
    assert_eq!(errno(s.lookup(&c, &r, b"a")), libc::ENOENT);
    assert_eq!(s.lookup(&c, &d, b"b").unwrap(), f);
    assert_eq!(s.resolve(f.handle()).unwrap(), f);

    // Hard link.
    let dc = s.link(&c, &f, &r, b"hard").unwrap();
    assert!(dc.after > dc.before);
    assert_eq!(s.getattr(&f).unwrap().nlink, 2);
    assert_eq!(s.lookup(&c, &r, b"hard").unwrap(), f);
    assert_eq!(errno(s.link(&c, &d, &r, b"dirlink")), libc::EISDIR);
    assert_eq!(errno(s.link(&c, &f, &r, b"hard")), libc::EEXIST);

    // Renaming onto another name of the same object changes nothing.
    s.rename(&c, &r, b"hard", &d, b"b").unwrap();
    assert!(s.lookup(&c, &r, b"hard").is_ok());
    assert_eq!(s.getattr(&f).unwrap().nlink, 2);

    // POSIX rename rules.
    let (d2, _) = s
        .create(
            &c,
            &r,
            b"d2",
            CreateKind::Directory,
            0o755,
            &SetAttrs::default(),
        )
        .unwrap();
    mkfile(&e, &d2, "inside");
    let n = errno(s.rename(&c, &r, b"d", &r, b"d2"));
    assert!(n == libc::ENOTEMPTY || n == libc::EEXIST, "{n}");
    assert_eq!(errno(s.rename(&c, &r, b"hard", &r, b"d2")), libc::EISDIR);
    assert_eq!(errno(s.rename(&c, &r, b"d2", &r, b"hard")), libc::ENOTDIR);
    assert_eq!(errno(s.rename(&c, &r, b"d", &d, b"sub")), libc::EINVAL);

    // Remove a file (one of two links), a non-empty dir, an empty dir.
    s.remove(&c, &r, b"hard").unwrap();
    assert_eq!(s.getattr(&f).unwrap().nlink, 1);
    assert_eq!(errno(s.remove(&c, &r, b"d2")), libc::ENOTEMPTY);
    s.remove(&c, &d2, b"inside").unwrap();
    let dc = s.remove(&c, &r, b"d2").unwrap();
    assert!(dc.after > dc.before);
    assert_eq!(errno(s.lookup(&c, &r, b"d2")), libc::ENOENT);
    // Held here, it still resolves; once let go, its handle is stale.
    let d2h = d2.handle().to_vec();
    drop(d2);
    assert_eq!(s.resolve(&d2h).unwrap_err(), PosixError::Stale);
    assert_eq!(errno(s.remove(&c, &r, b"nothing")), libc::ENOENT);

    // Symlinks and special files are removed as names.
    s.create(
        &c,
        &r,
        b"sl",
        CreateKind::Symlink(b"d"),
        0o777,
        &SetAttrs::default(),
    )
    .unwrap();
    s.remove(&c, &r, b"sl").unwrap();
    assert!(s.lookup(&c, &r, b"d").is_ok(), "the target stays");
}

#[test]
fn posix_open_write_read_truncate_times() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let c = root();
    let f = mkfile(&e, &r, "data");
    let w = s.open_file(&c, &f, false, true, false).unwrap();
    w.write_all_at(b"hello, braid", 0).unwrap();
    drop(w);
    let rd = s.open_file(&c, &f, true, false, false).unwrap();
    let mut buf = [0u8; 12];
    rd.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"hello, braid");
    assert_eq!(s.getattr(&f).unwrap().size, 12);
    assert_eq!(errno(s.open_file(&c, &r, true, false, false)), libc::EISDIR);
    assert_eq!(
        errno(s.open_file(&c, &f, false, false, false)),
        libc::EINVAL
    );

    // Truncate.
    let a = s
        .setattr(
            &c,
            &f,
            &SetAttrs {
                size: Some(5),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(a.size, 5);
    let mut buf = Vec::new();
    use std::io::Read;
    (&**s.open_file(&c, &f, true, false, false).unwrap())
        .read_to_end(&mut buf)
        .unwrap();
    assert_eq!(buf, b"hello");
    let d = s.lookup(&c, &r, b"data").unwrap();
    assert_eq!(a.change, s.getattr(&d).unwrap().change);

    // Times: explicit, then "now"; change moves with every change.
    let t = Timespec {
        sec: 1_000_000_000,
        nsec: 123_456_789,
    };
    let before = s.getattr(&f).unwrap().change;
    let a = s
        .setattr(
            &c,
            &f,
            &SetAttrs {
                atime: Some(SetTime::Client(t)),
                mtime: Some(SetTime::Client(Timespec {
                    sec: 1_100_000_000,
                    nsec: 0,
                })),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(a.atime, t);
    assert_eq!(
        a.mtime,
        Timespec {
            sec: 1_100_000_000,
            nsec: 0
        }
    );
    assert!(a.change > before);
    let a2 = s
        .setattr(
            &c,
            &f,
            &SetAttrs {
                mtime: Some(SetTime::ServerNow),
                atime: Some(SetTime::DontChange),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(a2.atime, t);
    assert!(a2.mtime.sec > 1_600_000_000);
    assert!(a2.change > a.change);

    // Mode and owner.
    let a = s
        .setattr(
            &c,
            &f,
            &SetAttrs {
                mode: Some(0o4711),
                uid: Some(55),
                gid: Some(66),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!((a.mode, a.uid, a.gid), (0o4711, 55, 66));
    assert_eq!(
        errno(s.setattr(
            &c,
            &r,
            &SetAttrs {
                size: Some(0),
                ..Default::default()
            }
        )),
        libc::EISDIR
    );

    let fs = s.statfs(&r).unwrap();
    assert!(fs.bytes_total > 0 && fs.bytes_avail <= fs.bytes_total);
    assert_eq!(fs.max_name, 255);
}

#[test]
fn posix_access_bits_follow_mode() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let f = mkfile(&e, &r, "f");
    let all = ACCESS_READ
        | ACCESS_LOOKUP
        | ACCESS_MODIFY
        | ACCESS_EXTEND
        | ACCESS_DELETE
        | ACCESS_EXECUTE;
    s.setattr(
        &root(),
        &f,
        &SetAttrs {
            mode: Some(0o640),
            uid: Some(1000),
            gid: Some(2000),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        s.access(&user(1000), &f, all).unwrap(),
        ACCESS_READ | ACCESS_MODIFY | ACCESS_EXTEND
    );
    let member = Credentials {
        uid: 3000,
        gid: 3000,
        groups: vec![2000],
    };
    assert_eq!(s.access(&member, &f, all).unwrap(), ACCESS_READ);
    assert_eq!(s.access(&user(4000), &f, all).unwrap(), 0);
    // Root: read and write always, execute only with some x bit.
    assert_eq!(
        s.access(&root(), &f, all).unwrap(),
        ACCESS_READ | ACCESS_MODIFY | ACCESS_EXTEND
    );
    s.setattr(
        &root(),
        &f,
        &SetAttrs {
            mode: Some(0o001),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        s.access(&root(), &f, ACCESS_EXECUTE).unwrap(),
        ACCESS_EXECUTE
    );
    assert_eq!(
        s.access(&user(4000), &f, ACCESS_EXECUTE | ACCESS_READ)
            .unwrap(),
        ACCESS_EXECUTE
    );
    // Directories: LOOKUP is x, MODIFY/EXTEND/DELETE need w and x.
    let (d, _) = s
        .create(
            &root(),
            &r,
            b"d",
            CreateKind::Directory,
            0o751,
            &SetAttrs::default(),
        )
        .unwrap();
    assert_eq!(s.access(&root(), &d, all).unwrap(), all & !ACCESS_EXECUTE);
    assert_eq!(s.access(&user(9), &d, all).unwrap(), ACCESS_LOOKUP);
    assert_eq!(s.access(&user(9), &d, ACCESS_READ).unwrap(), 0);
}

/// remove_checked and rename_checked show the server what a name holds
/// before it goes, and a refusal leaves everything as it was.
#[test]
fn posix_checked_remove_and_rename() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let c = root();
    let f = mkfile(&e, &r, "f");
    let g = mkfile(&e, &r, "g");
    let refuse = |_| Err(PosixError::Errno(libc::EBUSY));
    assert_eq!(
        s.remove_checked(&c, &r, b"f", refuse).unwrap_err(),
        PosixError::Errno(libc::EBUSY)
    );
    assert_eq!(s.lookup(&c, &r, b"f").unwrap(), f);
    // Both the object moved and the one it replaces are shown.
    let mut seen = Vec::new();
    let err = s.rename_checked(&c, &r, b"f", &r, b"g", |k| {
        seen.push(k);
        if seen.len() == 2 {
            Err(PosixError::Errno(libc::EBUSY))
        } else {
            Ok(())
        }
    });
    assert_eq!(err.unwrap_err(), PosixError::Errno(libc::EBUSY));
    assert_eq!(seen, vec![f.key(), g.key()]);
    assert_eq!(s.lookup(&c, &r, b"g").unwrap(), g);
    let mut seen = Vec::new();
    s.rename_checked(&c, &r, b"f", &r, b"h", |k| {
        seen.push(k);
        Ok::<(), PosixError>(())
    })
    .unwrap();
    assert_eq!(seen, vec![f.key()]);
    let mut seen = None;
    s.remove_checked(&c, &r, b"h", |k| {
        seen = Some(k);
        Ok::<(), PosixError>(())
    })
    .unwrap();
    assert_eq!(seen, Some(f.key()));
    assert_eq!(errno(s.lookup(&c, &r, b"h")), libc::ENOENT);
}
