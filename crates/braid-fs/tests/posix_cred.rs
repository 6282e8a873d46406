//! Operations run as the client: the kernel checks permissions and new
//! objects get the client's owner; the thread's identity is restored.

mod posix_util;

use braid_fs::posix::*;
use posix_util::*;

fn assert_thread_is_root() {
    assert_eq!(current_fsuid(), 0);
    assert_eq!(current_fsgid(), 0);
}

#[test]
fn posix_new_objects_belong_to_the_client() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let u = user(1234);
    let (f, created, _) = s
        .create_file(
            &u,
            &r,
            b"f",
            0o640,
            CreateMode::Guarded,
            &SetAttrs::default(),
        )
        .unwrap();
    assert!(created);
    assert_thread_is_root();
    let a = s.getattr(&f).unwrap();
    assert_eq!((a.uid, a.gid, a.mode), (1234, 1234, 0o640));
    let (d, _) = s
        .create(
            &u,
            &r,
            b"d",
            CreateKind::Directory,
            0o700,
            &SetAttrs::default(),
        )
        .unwrap();
    let a = s.getattr(&d).unwrap();
    assert_eq!((a.uid, a.gid, a.mode), (1234, 1234, 0o700));
    let (l, _) = s
        .create(
            &u,
            &d,
            b"l",
            CreateKind::Symlink(b"x"),
            0o777,
            &SetAttrs::default(),
        )
        .unwrap();
    assert_eq!(s.getattr(&l).unwrap().uid, 1234);
    assert_thread_is_root();
    // Devices need CAP_MKNOD, which a client's identity does not carry.
    assert_eq!(
        errno(s.create(
            &u,
            &r,
            b"dev",
            CreateKind::CharDevice { major: 1, minor: 3 },
            0o666,
            &SetAttrs::default()
        )),
        libc::EPERM
    );
    assert_thread_is_root();
}

#[test]
fn posix_permissions_are_the_clients() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let u = user(1234);
    let secret = mkfile(&e, &r, "secret");
    s.setattr(
        &root(),
        &secret,
        &SetAttrs {
            mode: Some(0o600),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        errno(s.open_file(&u, &secret, true, false, false)),
        libc::EACCES
    );
    assert_thread_is_root();
    assert_eq!(
        errno(s.open_file(&u, &secret, false, true, false)),
        libc::EACCES
    );
    // creator_override is for the owner only.
    assert_eq!(
        errno(s.open_file(&u, &secret, true, false, true)),
        libc::EACCES
    );
    assert!(s.open_file(&root(), &secret, true, true, false).is_ok());
    assert_thread_is_root();

    // A private directory: no lookup, no create, no remove, no listing.
    let (d, _) = s
        .create(
            &root(),
            &r,
            b"private",
            CreateKind::Directory,
            0o700,
            &SetAttrs::default(),
        )
        .unwrap();
    mkfile(&e, &d, "inside");
    assert_eq!(errno(s.lookup(&u, &d, b"inside")), libc::EACCES);
    assert_eq!(
        errno(s.create_file(
            &u,
            &d,
            b"new",
            0o644,
            CreateMode::Unchecked,
            &SetAttrs::default()
        )),
        libc::EACCES
    );
    assert_eq!(errno(s.remove(&u, &d, b"inside")), libc::EACCES);
    assert_eq!(errno(s.readdir(&u, &d, 0, 10)), libc::EACCES);
    assert_eq!(
        errno(s.rename(&u, &d, b"inside", &r, b"stolen")),
        libc::EACCES
    );
    assert_eq!(errno(s.link(&u, &secret, &d, b"l")), libc::EACCES);
    assert_eq!(errno(s.parent(&u, &d)), libc::EACCES);
    assert_thread_is_root();

    // Group membership counts, through the supplementary groups too.
    s.setattr(
        &root(),
        &secret,
        &SetAttrs {
            mode: Some(0o640),
            gid: Some(777),
            ..Default::default()
        },
    )
    .unwrap();
    let member = Credentials {
        uid: 1234,
        gid: 1234,
        groups: vec![1234, 777],
    };
    assert!(s.open_file(&member, &secret, true, false, false).is_ok());
    assert_eq!(
        errno(s.open_file(&member, &secret, false, true, false)),
        libc::EACCES
    );
    assert_thread_is_root();
}

#[test]
fn posix_creator_may_open_its_read_only_file() {
    let e = env();
    let s = &e.share;
    let u = user(1234);
    let (f, created, _) = s
        .create_file(
            &u,
            &s.root(),
            b"ro",
            0o444,
            CreateMode::Guarded,
            &SetAttrs::default(),
        )
        .unwrap();
    assert!(created);
    assert_eq!(errno(s.open_file(&u, &f, false, true, false)), libc::EACCES);
    let w = s.open_file(&u, &f, true, true, true).unwrap();
    use std::os::unix::fs::FileExt;
    w.write_all_at(b"x", 0).unwrap();
    assert_eq!(s.getattr(&f).unwrap().size, 1);
    assert_thread_is_root();
}

#[test]
fn posix_setattr_follows_posix_rules() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let owner = Credentials {
        uid: 1234,
        gid: 1234,
        groups: vec![1234, 555],
    };
    let other = user(4321);
    let (f, _, _) = s
        .create_file(
            &owner,
            &r,
            b"f",
            0o644,
            CreateMode::Guarded,
            &SetAttrs::default(),
        )
        .unwrap();
    // chown is root's alone.
    assert_eq!(
        errno(s.setattr(
            &owner,
            &f,
            &SetAttrs {
                uid: Some(4321),
                ..Default::default()
            }
        )),
        libc::EPERM
    );
    assert_eq!(
        errno(s.setattr(
            &other,
            &f,
            &SetAttrs {
                uid: Some(4321),
                ..Default::default()
            }
        )),
        libc::EPERM
    );
    assert_thread_is_root();
    // The owner may chgrp to a group it is in, not to another.
    assert_eq!(
        s.setattr(
            &owner,
            &f,
            &SetAttrs {
                gid: Some(555),
                ..Default::default()
            }
        )
        .unwrap()
        .gid,
        555
    );
    assert_eq!(
        errno(s.setattr(
            &owner,
            &f,
            &SetAttrs {
                gid: Some(556),
                ..Default::default()
            }
        )),
        libc::EPERM
    );
    // The owner may chmod, nobody else.
    assert_eq!(
        s.setattr(
            &owner,
            &f,
            &SetAttrs {
                mode: Some(0o600),
                ..Default::default()
            }
        )
        .unwrap()
        .mode,
        0o600
    );
    assert_eq!(
        errno(s.setattr(
            &other,
            &f,
            &SetAttrs {
                mode: Some(0o777),
                ..Default::default()
            }
        )),
        libc::EPERM
    );
    // Size needs write permission.
    assert_eq!(
        errno(s.setattr(
            &other,
            &f,
            &SetAttrs {
                size: Some(0),
                ..Default::default()
            }
        )),
        libc::EACCES
    );
    // Times: explicit ones need ownership; "now" needs ownership or write.
    let t = SetTime::Client(Timespec { sec: 5, nsec: 0 });
    assert_eq!(
        errno(s.setattr(
            &other,
            &f,
            &SetAttrs {
                mtime: Some(t),
                ..Default::default()
            }
        )),
        libc::EPERM
    );
    assert_eq!(
        errno(s.setattr(
            &other,
            &f,
            &SetAttrs {
                mtime: Some(SetTime::ServerNow),
                ..Default::default()
            }
        )),
        libc::EACCES
    );
    s.setattr(
        &root(),
        &f,
        &SetAttrs {
            mode: Some(0o666),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(s
        .setattr(
            &other,
            &f,
            &SetAttrs {
                mtime: Some(SetTime::ServerNow),
                ..Default::default()
            }
        )
        .is_ok());
    let both = SetAttrs {
        atime: Some(SetTime::ServerNow),
        mtime: Some(SetTime::ServerNow),
        ..Default::default()
    };
    assert!(s.setattr(&other, &f, &both).is_ok());
    assert_eq!(
        errno(s.setattr(
            &other,
            &f,
            &SetAttrs {
                mtime: Some(t),
                ..Default::default()
            }
        )),
        libc::EPERM
    );
    assert_eq!(
        s.setattr(
            &owner,
            &f,
            &SetAttrs {
                mtime: Some(t),
                ..Default::default()
            }
        )
        .unwrap()
        .mtime
        .sec,
        5
    );
    assert_thread_is_root();
}

#[test]
fn posix_credentials_are_per_thread() {
    let e = env();
    let s = &e.share;
    // Many threads creating as different users at once: each file gets its
    // own thread's owner, and no thread is left with another's identity.
    std::thread::scope(|scope| {
        for t in 0..8u32 {
            scope.spawn(move || {
                let u = user(2000 + t);
                for i in 0..50 {
                    let name = format!("t{t}-{i}");
                    let (f, _, _) = s
                        .create_file(
                            &u,
                            &s.root(),
                            name.as_bytes(),
                            0o600,
                            CreateMode::Guarded,
                            &SetAttrs::default(),
                        )
                        .unwrap();
                    assert_eq!(s.getattr(&f).unwrap().uid, 2000 + t);
                    assert_eq!(current_fsuid(), 0);
                }
            });
        }
    });
}
