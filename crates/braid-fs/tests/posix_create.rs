//! RFC 8881 18.16.3: UNCHECKED4, GUARDED4 and EXCLUSIVE4_1 creates.

mod posix_util;

use braid_fs::posix::*;
use posix_util::*;

#[test]
fn posix_exclusive_create_is_idempotent_per_verifier() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let u = user(1234);
    let v1 = CreateMode::Exclusive {
        verifier: *b"verifier",
    };
    let v2 = CreateMode::Exclusive {
        verifier: *b"VERIFIER",
    };
    let attrs = SetAttrs {
        mtime: Some(SetTime::Client(Timespec { sec: 77, nsec: 0 })),
        ..Default::default()
    };
    let (f, created, dc) = s.create_file(&u, &r, b"x", 0o444, v1, &attrs).unwrap();
    assert!(created);
    assert!(dc.after > dc.before);
    let a = s.getattr(&f).unwrap();
    assert_eq!((a.mode, a.uid, a.mtime.sec), (0o444, 1234, 77));
    // Attributes go in before the mode takes effect.
    let sized = SetAttrs {
        size: Some(3),
        ..Default::default()
    };
    let (ro, _, _) = s
        .create_file(&u, &r, b"ro", 0o444, CreateMode::Guarded, &sized)
        .unwrap();
    let a = s.getattr(&ro).unwrap();
    assert_eq!((a.mode, a.size), (0o444, 3));
    // The retry (a lost reply) finds the same file.
    let (again, created, _) = s
        .create_file(&u, &r, b"x", 0o444, v1, &SetAttrs::default())
        .unwrap();
    assert!(!created);
    assert_eq!(again, f);
    // Another verifier: someone else's file.
    assert_eq!(
        errno(s.create_file(&u, &r, b"x", 0o444, v2, &SetAttrs::default())),
        libc::EEXIST
    );
    // An existing file that was never created exclusively.
    mkfile(&e, &r, "plain");
    assert_eq!(
        errno(s.create_file(&u, &r, b"plain", 0o644, v1, &SetAttrs::default())),
        libc::EEXIST
    );
    // The verifier survives a restart (it lives with the file).
    let again = PosixShare::new(&e.dir, EXPORT, KEY).unwrap();
    let (g, created, _) = again
        .create_file(&u, &again.root(), b"x", 0o444, v1, &SetAttrs::default())
        .unwrap();
    assert!(!created);
    assert_eq!(g.fileid(), f.fileid());
}

#[test]
fn posix_guarded_and_unchecked() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let c = root();
    let (f, created, _) = s
        .create_file(
            &c,
            &r,
            b"g",
            0o600,
            CreateMode::Guarded,
            &SetAttrs::default(),
        )
        .unwrap();
    assert!(created);
    assert_eq!(
        errno(s.create_file(
            &c,
            &r,
            b"g",
            0o600,
            CreateMode::Guarded,
            &SetAttrs::default()
        )),
        libc::EEXIST
    );

    // UNCHECKED4 on an existing file: found, truncated if asked, nothing else.
    let w = s.open_file(&c, &f, false, true, false).unwrap();
    use std::os::unix::fs::FileExt;
    w.write_all_at(b"content", 0).unwrap();
    let (same, created, _) = s
        .create_file(
            &c,
            &r,
            b"g",
            0o777,
            CreateMode::Unchecked,
            &SetAttrs::default(),
        )
        .unwrap();
    assert!(!created);
    assert_eq!(same, f);
    let a = s.getattr(&f).unwrap();
    assert_eq!((a.size, a.mode), (7, 0o600));
    let zero = SetAttrs {
        size: Some(0),
        mode: Some(0o777),
        ..Default::default()
    };
    let (_, created, _) = s
        .create_file(&c, &r, b"g", 0o777, CreateMode::Unchecked, &zero)
        .unwrap();
    assert!(!created);
    let a = s.getattr(&f).unwrap();
    assert_eq!((a.size, a.mode), (0, 0o600));
    // UNCHECKED4 of a new name creates, with the attributes.
    let attrs = SetAttrs {
        mode: Some(0o640),
        size: Some(3),
        ..Default::default()
    };
    let (n, created, _) = s
        .create_file(&c, &r, b"new", 0o600, CreateMode::Unchecked, &attrs)
        .unwrap();
    assert!(created);
    let a = s.getattr(&n).unwrap();
    assert_eq!((a.size, a.mode), (3, 0o640));

    // Not a regular file.
    s.create(
        &c,
        &r,
        b"d",
        CreateKind::Directory,
        0o755,
        &SetAttrs::default(),
    )
    .unwrap();
    s.create(
        &c,
        &r,
        b"l",
        CreateKind::Symlink(b"g"),
        0o777,
        &SetAttrs::default(),
    )
    .unwrap();
    s.create(&c, &r, b"p", CreateKind::Fifo, 0o644, &SetAttrs::default())
        .unwrap();
    let unchecked = |name: &[u8]| {
        s.create_file(
            &c,
            &r,
            name,
            0o644,
            CreateMode::Unchecked,
            &SetAttrs::default(),
        )
    };
    assert_eq!(errno(unchecked(b"d")), libc::EISDIR);
    assert_eq!(errno(unchecked(b"l")), libc::ELOOP);
    assert_eq!(errno(unchecked(b"p")), libc::EINVAL);
    assert_eq!(s.readlink(&s.lookup(&c, &r, b"l").unwrap()).unwrap(), b"g");
}

#[test]
fn posix_failed_attributes_undo_the_create() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let u = user(1234);
    // A client may not give its new file away: the create is undone.
    let give_away = SetAttrs {
        uid: Some(1),
        ..Default::default()
    };
    assert_eq!(
        errno(s.create_file(&u, &r, b"f", 0o644, CreateMode::Guarded, &give_away)),
        libc::EPERM
    );
    assert_eq!(errno(s.lookup(&u, &r, b"f")), libc::ENOENT);
    assert_eq!(
        errno(s.create(&u, &r, b"d", CreateKind::Directory, 0o755, &give_away)),
        libc::EPERM
    );
    assert_eq!(errno(s.lookup(&u, &r, b"d")), libc::ENOENT);
    assert_eq!(current_fsuid(), 0);
}
