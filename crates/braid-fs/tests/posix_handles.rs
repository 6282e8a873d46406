//! RFC 8881 4.2 / 4.2.3: handles are opaque, at most 128 bytes, persistent
//! across restarts, bound to their export and unforgeable.

mod posix_util;

use braid_fs::posix::*;
use posix_util::*;

#[test]
fn posix_handle_survives_restart() {
    let e = env();
    let r = e.share.root();
    let (d, _) = e
        .share
        .create(
            &root(),
            &r,
            b"d",
            CreateKind::Directory,
            0o755,
            &SetAttrs::default(),
        )
        .unwrap();
    let f = mkfile(&e, &d, "f");
    let (fh, dh, rh) = (
        f.handle().to_vec(),
        d.handle().to_vec(),
        r.handle().to_vec(),
    );
    let ino = f.fileid();
    drop((f, d, r));

    // A new share with the same key and export id: nothing is cached.
    let again = PosixShare::new(&e.dir, EXPORT, KEY).unwrap();
    assert_eq!(
        again.root().handle(),
        &rh[..],
        "the root's handle is stable"
    );
    let f = again.resolve(&fh).unwrap();
    assert_eq!(f.fileid(), ino);
    assert_eq!(f.kind(), ObjectKind::File);
    assert_eq!(f.handle(), &fh[..]);
    let d = again.resolve(&dh).unwrap();
    assert_eq!(d.kind(), ObjectKind::Directory);
    assert!(!d.is_root());
    assert!(again.resolve(&rh).unwrap().is_root());
    // Usable: parent and lookup work from a resolved handle.
    assert!(again.parent(&root(), &d).unwrap().unwrap().is_root());
    assert_eq!(again.lookup(&root(), &d, b"f").unwrap(), f);
    assert_eq!(PosixShare::export_id_of(&fh), Some(EXPORT));
}

#[test]
fn posix_tampered_handles_are_bad() {
    let e = env();
    let f = mkfile(&e, &e.share.root(), "f");
    let h = f.handle().to_vec();
    assert!(h.len() <= 128);
    for i in 0..h.len() {
        for bit in [0x01u8, 0x80] {
            let mut bad = h.clone();
            bad[i] ^= bit;
            assert_eq!(
                e.share.resolve(&bad).unwrap_err(),
                PosixError::BadHandle,
                "byte {i} bit {bit:#x}"
            );
        }
    }
    for bad in [&h[..h.len() - 1], &[][..], &h[..1]] {
        assert_eq!(e.share.resolve(bad).unwrap_err(), PosixError::BadHandle);
    }
    let mut long = h.clone();
    long.push(0);
    assert_eq!(e.share.resolve(&long).unwrap_err(), PosixError::BadHandle);
    assert_eq!(PosixShare::export_id_of(&[1, 2, 3]), None);
    assert_eq!(e.share.resolve(&h).unwrap(), f);
}

#[test]
fn posix_handles_are_bound_to_export_and_key() {
    let e = env();
    let f = mkfile(&e, &e.share.root(), "f");
    let h = f.handle().to_vec();
    // Same directory, another export id: the handle names export 7.
    let other_export = PosixShare::new(&e.dir, EXPORT + 1, KEY).unwrap();
    assert_eq!(other_export.resolve(&h).unwrap_err(), PosixError::BadHandle);
    assert_ne!(other_export.root().handle(), e.share.root().handle());
    // Same export id, another key (another server).
    let other_key = PosixShare::new(&e.dir, EXPORT, [0x11; 32]).unwrap();
    assert_eq!(other_key.resolve(&h).unwrap_err(), PosixError::BadHandle);
    assert_eq!(
        other_key.resolve(e.share.root().handle()).unwrap_err(),
        PosixError::BadHandle
    );
    // A second share of another directory gives its own handles.
    let e2 = env();
    let g = mkfile(&e2, &e2.share.root(), "g");
    let b = PosixShare::new(&e2.dir, EXPORT + 2, KEY).unwrap();
    assert_eq!(b.resolve(&h).unwrap_err(), PosixError::BadHandle);
    assert_eq!(
        e.share.resolve(g.handle()).unwrap(),
        g,
        "same export id and key: same server"
    );
}

#[test]
fn posix_removed_objects_are_stale_once_let_go() {
    let e = env();
    let s = &e.share;
    let r = s.root();
    let f = mkfile(&e, &r, "f");
    let (d, _) = s
        .create(
            &root(),
            &r,
            b"d",
            CreateKind::Directory,
            0o755,
            &SetAttrs::default(),
        )
        .unwrap();
    let (fh, dh) = (f.handle().to_vec(), d.handle().to_vec());
    s.remove(&root(), &r, b"f").unwrap();
    s.remove(&root(), &r, b"d").unwrap();
    // Still held by us, as an NFS open holds its file: the handles work
    // until we let go (knfsd's do too; pynfs RNM21 closes such a file).
    assert_eq!(s.resolve(&fh).unwrap(), f);
    assert_eq!(s.resolve(&dh).unwrap(), d);
    drop((f, d));
    assert_eq!(s.resolve(&fh).unwrap_err(), PosixError::Stale);
    assert_eq!(s.resolve(&dh).unwrap_err(), PosixError::Stale);
    // After a restart (open_by_handle_at path): Stale too.
    let again = PosixShare::new(&e.dir, EXPORT, KEY).unwrap();
    assert_eq!(again.resolve(&fh).unwrap_err(), PosixError::Stale);
    assert_eq!(again.resolve(&dh).unwrap_err(), PosixError::Stale);

    // A file replaced by rename is gone too.
    let a = mkfile(&e, &r, "a");
    mkfile(&e, &r, "b");
    let ah = a.handle().to_vec();
    s.rename(&root(), &r, b"b", &r, b"a").unwrap();
    assert_eq!(s.resolve(&ah).unwrap(), a);
    drop(a);
    assert_eq!(s.resolve(&ah).unwrap_err(), PosixError::Stale);
    // Not held (only cached) when its name goes: Stale at once.
    let h = mkfile(&e, &r, "h").handle().to_vec();
    s.remove(&root(), &r, b"h").unwrap();
    assert_eq!(s.resolve(&h).unwrap_err(), PosixError::Stale);
    // One link left is enough to stay valid.
    let c = mkfile(&e, &r, "c");
    s.link(&root(), &c, &r, b"c2").unwrap();
    s.remove(&root(), &r, b"c").unwrap();
    assert_eq!(s.resolve(c.handle()).unwrap(), c);
}

/// `resolve_cached` answers without waiting what `resolve` would, or says
/// it cannot: kept objects and the root yes; a handle nothing keeps open
/// (it needs open_by_handle_at) or an object with no links left, no.
#[test]
fn posix_resolve_cached_answers_only_from_kept_objects() {
    let e = env();
    let r = e.share.root();
    let f = mkfile(&e, &r, "f");
    let fh = f.handle().to_vec();
    let rh = r.handle().to_vec();
    assert!(e.share.resolve_cached(&rh).unwrap().unwrap().is_root());
    assert_eq!(e.share.resolve_cached(&fh).unwrap(), Some(f.clone()));
    let mut bad = fh.clone();
    bad[fh.len() - 1] ^= 1;
    assert_eq!(
        e.share.resolve_cached(&bad).unwrap_err(),
        PosixError::BadHandle
    );
    // A new share keeps nothing yet: only the root is answered.
    let again = PosixShare::new(&e.dir, EXPORT, KEY).unwrap();
    assert_eq!(again.resolve_cached(&fh).unwrap(), None);
    assert!(again.resolve_cached(&rh).unwrap().is_some());
    assert_eq!(again.resolve(&fh).unwrap().fileid(), f.fileid());
    assert!(again.resolve_cached(&fh).unwrap().is_some(), "kept now");
    // Unlinked: no links left, so the caller must look where it may wait
    // (resolve: the orphan while it is held, then Stale).
    e.share.remove(&root(), &r, b"f").unwrap();
    assert_eq!(e.share.resolve_cached(&fh).unwrap(), None);
    assert_eq!(e.share.resolve(&fh).unwrap(), f);
    drop(f);
    assert_eq!(e.share.resolve_cached(&fh).unwrap(), None);
    assert_eq!(e.share.resolve(&fh).unwrap_err(), PosixError::Stale);
}
