//! Open dispositions, share modes and delete semantics.
mod common;
use braid_fs::access::*;
use braid_fs::*;
use common::*;

#[test]
fn dispositions() {
    let e = env();
    let o = e.open("f", RW, ALL, Disposition::Create).unwrap();
    assert_eq!(o.action, CreateAction::Created);
    assert!(!o.info.is_directory);
    assert_eq!(o.info.attributes, attr::ARCHIVE);
    o.handle.write(0, b"12345").unwrap();
    o.handle.close().unwrap();
    assert!(matches!(
        e.open("f", RW, ALL, Disposition::Create),
        Err(FsError::NameCollision)
    ));
    let o = e.open("f", RW, ALL, Disposition::Open).unwrap();
    assert_eq!((o.action, o.info.end_of_file), (CreateAction::Opened, 5));
    drop(o);
    let o = e.open("f", RW, ALL, Disposition::OpenIf).unwrap();
    assert_eq!(o.action, CreateAction::Opened);
    drop(o);
    let o = e.open("f", RW, ALL, Disposition::Overwrite).unwrap();
    assert_eq!(
        (o.action, o.info.end_of_file),
        (CreateAction::Overwritten, 0)
    );
    o.handle.write(0, b"abc").unwrap();
    drop(o);
    let o = e.open("f", RW, ALL, Disposition::OverwriteIf).unwrap();
    assert_eq!(
        (o.action, o.info.end_of_file),
        (CreateAction::Overwritten, 0)
    );
    drop(o);
    let o = e.open("f", RW, ALL, Disposition::Supersede).unwrap();
    assert_eq!(o.action, CreateAction::Superseded);
    drop(o);
    assert!(matches!(
        e.open("g", RW, ALL, Disposition::Open),
        Err(FsError::NotFound)
    ));
    assert!(matches!(
        e.open("g", RW, ALL, Disposition::Overwrite),
        Err(FsError::NotFound)
    ));
    for (n, d) in [
        ("g1", Disposition::OpenIf),
        ("g2", Disposition::OverwriteIf),
        ("g3", Disposition::Supersede),
    ] {
        assert_eq!(e.open(n, RW, ALL, d).unwrap().action, CreateAction::Created);
    }
}

#[test]
fn directories() {
    let e = env();
    let mut p = OpenParams::new("d", FILE_READ_DATA, Disposition::Create);
    p.directory = DirectoryRequirement::MustBeDirectory;
    let o = e.open_p(p.clone()).unwrap();
    assert!(o.info.is_directory && o.handle.is_directory());
    assert_eq!(o.info.attributes, attr::DIRECTORY);
    drop(o);
    assert!(matches!(e.open_p(p.clone()), Err(FsError::NameCollision)));
    p.disposition = Disposition::Overwrite;
    assert!(matches!(
        e.open_p(p.clone()),
        Err(FsError::InvalidParameter)
    ));
    let mut q = OpenParams::new("d", FILE_READ_DATA, Disposition::Open);
    q.directory = DirectoryRequirement::MustNotBeDirectory;
    assert!(matches!(e.open_p(q), Err(FsError::IsADirectory)));
    e.create_file("f", b"");
    let mut q = OpenParams::new("f", FILE_READ_DATA, Disposition::Open);
    q.directory = DirectoryRequirement::MustBeDirectory;
    assert!(matches!(e.open_p(q), Err(FsError::NotADirectory)));
    // Root.
    let r = e.open("", FILE_READ_DATA, ALL, Disposition::Open).unwrap();
    assert!(r.info.is_directory);
    assert_eq!(r.handle.path(), "");
    let names = listed_names(&r);
    for n in [".", "..", "d", "f"] {
        assert!(names.contains(&n.to_string()), "{names:?}");
    }
    assert_eq!(names.len(), 4);
    // Writing data to a directory is refused.
    let o = e
        .open(
            "d",
            FILE_READ_DATA | FILE_WRITE_DATA,
            ALL,
            Disposition::Open,
        )
        .unwrap();
    assert!(matches!(
        o.handle.write(0, b"x"),
        Err(FsError::IsADirectory)
    ));
}

#[test]
fn generic_and_maximum_allowed() {
    let e = env();
    let o = e
        .open("f", GENERIC_READ | GENERIC_WRITE, ALL, Disposition::Create)
        .unwrap();
    let g = o.handle.granted_access();
    assert_eq!(g & (GENERIC_READ | GENERIC_WRITE), 0);
    assert_eq!(g, FILE_GENERIC_READ | FILE_GENERIC_WRITE);
    drop(o);
    let o = e
        .open("f", MAXIMUM_ALLOWED, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(o.handle.granted_access(), FILE_ALL_ACCESS);
    drop(o);
    let o = e.open("f", GENERIC_ALL, ALL, Disposition::Open).unwrap();
    assert_eq!(o.handle.granted_access(), FILE_ALL_ACCESS);
    assert!(matches!(
        e.open("f", ACCESS_SYSTEM_SECURITY, ALL, Disposition::Open),
        Err(FsError::PrivilegeNotHeld)
    ));
    // Access checks on the handle.
    let r = e
        .open("f", FILE_READ_ATTRIBUTES, ALL, Disposition::Open)
        .unwrap();
    assert!(matches!(r.handle.read(0, 1), Err(FsError::AccessDenied)));
    assert!(matches!(
        r.handle.write(0, b"x"),
        Err(FsError::AccessDenied)
    ));
    assert!(matches!(
        r.handle.set_delete_on_close(true),
        Err(FsError::AccessDenied)
    ));
    assert!(matches!(
        r.handle.rename("g", false),
        Err(FsError::AccessDenied)
    ));
}

#[test]
fn share_mode_conflicts() {
    use share_access::{DELETE as SD, READ as SR, WRITE as SW};
    let e = env();
    e.create_file("f", b"x");
    let a = e.open("f", FILE_READ_DATA, SR, Disposition::Open).unwrap();
    // Another reader sharing read: ok.
    let b = e
        .open("f", FILE_READ_DATA, SR | SW, Disposition::Open)
        .unwrap();
    // A writer: refused, since `a` does not share write.
    assert!(matches!(
        e.open("f", FILE_WRITE_DATA, ALL, Disposition::Open),
        Err(FsError::SharingViolation)
    ));
    // DELETE needs everyone to share delete.
    assert!(matches!(
        e.open("f", DELETE, ALL, Disposition::Open),
        Err(FsError::SharingViolation)
    ));
    // Attribute-only opens ignore share modes.
    let c = e
        .open("f", FILE_READ_ATTRIBUTES, 0, Disposition::Open)
        .unwrap();
    // A new reader that does not share read conflicts with existing readers.
    assert!(matches!(
        e.open("f", FILE_READ_DATA, SW | SD, Disposition::Open),
        Err(FsError::SharingViolation)
    ));
    a.handle.close().unwrap();
    b.handle.close().unwrap();
    // After close the share mode is gone.
    let w = e.open("f", FILE_WRITE_DATA, 0, Disposition::Open).unwrap();
    assert!(matches!(
        e.open("f", FILE_READ_DATA, ALL, Disposition::Open),
        Err(FsError::SharingViolation)
    ));
    // Dropping the last clone releases too.
    drop(w);
    e.open("f", FILE_READ_DATA, ALL, Disposition::Open).unwrap();
    drop(c);
    // Overwrite is a sharing-checked write.
    let r = e.open("f", FILE_READ_DATA, SR, Disposition::Open).unwrap();
    assert!(matches!(
        e.open("f", FILE_WRITE_DATA, ALL, Disposition::Overwrite),
        Err(FsError::SharingViolation)
    ));
    assert_eq!(r.handle.read(0, 10).unwrap(), b"x");
}

#[test]
fn delete_on_close_at_open() {
    let e = env();
    e.create_file("f", b"x");
    let mut p = OpenParams::new("f", FILE_READ_DATA, Disposition::Open);
    p.delete_on_close = true;
    assert!(matches!(e.open_p(p.clone()), Err(FsError::AccessDenied)));
    p.access |= DELETE;
    let a = e.open_p(p).unwrap();
    // Not yet delete-pending: another open sharing delete still works.
    let b = e.open("f", FILE_READ_DATA, ALL, Disposition::Open).unwrap();
    a.handle.close().unwrap();
    // Now pending; new opens refused; name remains while `b` is open.
    assert!(b.handle.info().unwrap().delete_pending);
    assert!(matches!(
        e.open("f", FILE_READ_DATA, ALL, Disposition::Open),
        Err(FsError::DeletePending)
    ));
    assert!(e.exists("f"));
    b.handle.close().unwrap();
    assert!(!e.exists("f"));
    // Create with delete-on-close.
    let mut p = OpenParams::new("tmp", RW | DELETE, Disposition::Create);
    p.delete_on_close = true;
    let o = e.open_p(p.clone()).unwrap();
    assert!(e.exists("tmp"));
    o.handle.close().unwrap();
    assert!(!e.exists("tmp"));
    // Read-only + delete-on-close → CannotDelete.
    p.attributes = attr::READONLY;
    assert!(matches!(e.open_p(p), Err(FsError::CannotDelete)));
    assert!(!e.exists("tmp"));
}

#[test]
fn delete_via_disposition() {
    let e = env();
    e.create_file("f", b"x");
    let o = e.open("f", DELETE, ALL, Disposition::Open).unwrap();
    o.handle.set_delete_on_close(true).unwrap();
    assert!(matches!(
        e.open("f", FILE_READ_ATTRIBUTES, ALL, Disposition::Open),
        Err(FsError::DeletePending)
    ));
    // Undo.
    o.handle.set_delete_on_close(false).unwrap();
    e.open("f", FILE_READ_ATTRIBUTES, ALL, Disposition::Open)
        .unwrap();
    o.handle.set_delete_on_close(true).unwrap();
    o.handle.close().unwrap();
    assert!(!e.exists("f"));
    // Non-empty directory.
    e.mkdir("d");
    e.create_file("d\\x", b"");
    let d = e.open("d", DELETE, ALL, Disposition::Open).unwrap();
    assert!(matches!(
        d.handle.set_delete_on_close(true),
        Err(FsError::DirectoryNotEmpty)
    ));
    let x = e.open("d\\x", DELETE, ALL, Disposition::Open).unwrap();
    x.handle.set_delete_on_close(true).unwrap();
    x.handle.close().unwrap();
    d.handle.set_delete_on_close(true).unwrap();
    // No creation inside a delete-pending directory.
    assert!(matches!(
        e.open("d\\y", RW, ALL, Disposition::Create),
        Err(FsError::DeletePending)
    ));
    d.handle.close().unwrap();
    assert!(!e.exists("d"));
    // Read-only file.
    let o = e
        .open(
            "ro",
            RW | DELETE | FILE_WRITE_ATTRIBUTES,
            ALL,
            Disposition::Create,
        )
        .unwrap();
    o.handle.set_basic([None; 4], Some(attr::READONLY)).unwrap();
    assert!(matches!(
        o.handle.set_delete_on_close(true),
        Err(FsError::CannotDelete)
    ));
    // The root cannot be deleted.
    let r = e.open("", DELETE, ALL, Disposition::Open).unwrap();
    assert!(matches!(
        r.handle.set_delete_on_close(true),
        Err(FsError::CannotDelete)
    ));
}

#[test]
fn readonly_attribute_semantics() {
    let e = env();
    let mut p = OpenParams::new("ro", RW, Disposition::Create);
    p.attributes = attr::READONLY | attr::HIDDEN;
    let o = e.open_p(p).unwrap();
    assert_eq!(
        o.info.attributes,
        attr::READONLY | attr::HIDDEN | attr::ARCHIVE
    );
    o.handle.close().unwrap();
    assert!(matches!(
        e.open("ro", FILE_WRITE_DATA, ALL, Disposition::Open),
        Err(FsError::AccessDenied)
    ));
    assert!(matches!(
        e.open("ro", FILE_READ_DATA, ALL, Disposition::Overwrite),
        Err(FsError::AccessDenied)
    ));
    let m = e
        .open("ro", MAXIMUM_ALLOWED, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(
        m.handle.granted_access() & (FILE_WRITE_DATA | FILE_APPEND_DATA),
        0
    );
    drop(m);
    // Overwrite of a HIDDEN file must keep HIDDEN.
    let mut p = OpenParams::new("h", RW, Disposition::Create);
    p.attributes = attr::HIDDEN;
    e.open_p(p).unwrap();
    let mut p = OpenParams::new("h", RW, Disposition::Overwrite);
    assert!(matches!(e.open_p(p.clone()), Err(FsError::AccessDenied)));
    p.attributes = attr::HIDDEN;
    e.open_p(p).unwrap();
}

#[test]
fn special_files_refused() {
    let e = env();
    let c = std::ffi::CString::new(e.host("fifo").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc_mkfifo(c.as_ptr()) }, 0);
    assert!(matches!(
        e.open("fifo", FILE_READ_DATA, ALL, Disposition::Open),
        Err(FsError::AccessDenied)
    ));
}

extern "C" {
    #[link_name = "mkfifo"]
    fn libc_mkfifo_raw(path: *const std::ffi::c_char, mode: u32) -> i32;
}
unsafe fn libc_mkfifo(p: *const std::ffi::c_char) -> i32 {
    libc_mkfifo_raw(p, 0o644)
}
