//! The macOS streams AFP_AfpInfo and AFP_Resource with the share's macOS
//! rules on (braid-fs `mac_streams.rs`, Samba's vfs_fruit with
//! `fruit:metadata = stream`, `fruit:resource = stream`), and as plain
//! streams with them off.

mod common;

use braid_fs::mac_streams::default_afpinfo;
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

const INFO: &str = "f:AFP_AfpInfo";
const RSRC: &str = "f:AFP_Resource";

/// An AfpInfo whose FinderInfo starts with `finder`.
fn afpinfo(finder: &[u8]) -> Vec<u8> {
    let mut v = default_afpinfo().to_vec();
    v[16..16 + finder.len()].copy_from_slice(finder);
    v
}

/// The named streams `f` lists, with their sizes.
fn listed(e: &Env) -> Vec<(String, u64)> {
    let f = e
        .open("f", access::FILE_READ_ATTRIBUTES, ALL, Disposition::Open)
        .unwrap();
    let mut v: Vec<_> = f
        .handle
        .streams()
        .unwrap()
        .into_iter()
        .filter(|s| s.name != "::$DATA")
        .map(|s| (s.name, s.size))
        .collect();
    f.handle.close().unwrap();
    v.sort();
    v
}

/// The stored value of stream `name` of `f`, straight from its xattr.
fn stored(e: &Env, name: &str) -> Option<Vec<u8>> {
    let x = format!("user.DosStream.{name}:$DATA");
    xattr_get(&e.host("f"), &x)
}

fn xattr_get(path: &std::path::Path, name: &str) -> Option<Vec<u8>> {
    let p = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    let mut buf = vec![0u8; 65536];
    // SAFETY: valid C strings and buffer.
    let r = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (r >= 0).then(|| {
        buf.truncate(r as usize);
        buf
    })
}

fn write_info(e: &Env, finder: &[u8]) {
    let s = e
        .open(INFO, access::FILE_WRITE_DATA, ALL, Disposition::OverwriteIf)
        .unwrap();
    assert_eq!(s.handle.write(0, &afpinfo(finder)).unwrap(), 60);
    s.handle.close().unwrap();
}

fn is_not_found<T>(r: Result<T, FsError>) -> bool {
    matches!(r, Err(FsError::NotFound))
}

/// A plain open of f's AfpInfo finds nothing.
fn afpinfo_is_absent(e: &Env) -> bool {
    is_not_found(e.open(INFO, access::FILE_READ_DATA, ALL, Disposition::Open))
}

#[test]
fn afpinfo_reads_from_offset_zero_and_is_stored_as_a_stream() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"data");
    write_info(&e, b"SMB,OLE!");
    // Stored as Samba's streams_xattr stores it: the 60 bytes and a NUL.
    let mut want = afpinfo(b"SMB,OLE!");
    want.push(0);
    assert_eq!(stored(&e, "AFP_AfpInfo"), Some(want));
    let s = e
        .open(INFO, access::FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(s.handle.read(0, 61).unwrap(), afpinfo(b"SMB,OLE!"));
    assert_eq!(&s.handle.read(16, 8).unwrap()[..], b"AFP\0\0\0\x01\0");
    assert_eq!(s.handle.read(59, 2).unwrap(), b"AF");
    assert_eq!(s.handle.read(60, 1).unwrap(), b"A");
    assert_eq!(s.handle.read(61, 1).unwrap(), b"");
    assert_eq!(s.handle.info().unwrap().end_of_file, 60);
    s.handle.close().unwrap();
    assert_eq!(listed(&e), vec![(":AFP_AfpInfo:$DATA".to_string(), 60)]);
}

#[test]
fn afpinfo_writes_must_be_valid() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"");
    let s = e
        .open(INFO, access::FILE_WRITE_DATA, ALL, Disposition::OpenIf)
        .unwrap();
    let good = afpinfo(b"FOO BAR ");
    // Not an AfpInfo, too short, or short and not at 0.
    for (off, data) in [
        (0u64, &[0u8; 60][..]),
        (0, &good[..2]),
        (1, &good[..59]),
        (60, &good[..16]),
    ] {
        assert!(
            matches!(s.handle.write(off, data), Err(FsError::InvalidParameter)),
            "write of {} at {off}",
            data.len()
        );
    }
    let mut bad_version = good.clone();
    bad_version[4] = 9;
    assert!(matches!(
        s.handle.write(0, &bad_version),
        Err(FsError::InvalidParameter)
    ));
    // Up to 16 bytes: accepted, nothing stored, nothing listed.
    assert_eq!(s.handle.write(0, &good[..16]).unwrap(), 16);
    assert_eq!(listed(&e), vec![]);
    // 60 bytes or more anywhere: the whole AfpInfo from offset 0.
    let mut long = good.clone();
    long.resize(1024, 0);
    assert_eq!(s.handle.write(10_000, &long).unwrap(), 1024);
    s.handle.close().unwrap();
    assert_eq!(listed(&e), vec![(":AFP_AfpInfo:$DATA".to_string(), 60)]);
    let r = e
        .open(INFO, access::FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(r.handle.read(0, 60).unwrap(), good);
    r.handle.close().unwrap();
}

#[test]
fn afpinfo_size_is_fixed() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"");
    write_info(&e, b"SMB,OLE!");
    let s = e.open(INFO, RW, ALL, Disposition::Open).unwrap();
    assert!(matches!(
        s.handle.set_end_of_file(61),
        Err(FsError::AllottedSpaceExceeded)
    ));
    // Smaller sizes, 0 included, succeed and change nothing.
    s.handle.set_end_of_file(1).unwrap();
    s.handle.set_end_of_file(0).unwrap();
    s.handle.set_allocation(0).unwrap();
    assert_eq!(s.handle.read(0, 60).unwrap(), afpinfo(b"SMB,OLE!"));
    s.handle.close().unwrap();
    assert_eq!(listed(&e), vec![(":AFP_AfpInfo:$DATA".to_string(), 60)]);
}

#[test]
fn afpinfo_created_but_not_written_does_not_exist() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"");
    assert!(is_not_found(e.open(
        INFO,
        access::FILE_READ_ATTRIBUTES,
        ALL,
        Disposition::Open
    )));
    let s = e.open(INFO, RW, ALL, Disposition::OpenIf).unwrap();
    // It reads as an empty AfpInfo, of 60 bytes...
    assert_eq!(s.handle.read(0, 60).unwrap(), default_afpinfo());
    assert_eq!(s.handle.info().unwrap().end_of_file, 60);
    let other = e
        .open(INFO, access::FILE_READ_DATA, ALL, Disposition::OpenIf)
        .unwrap();
    assert_eq!(other.handle.read(0, 60).unwrap(), default_afpinfo());
    other.handle.close().unwrap();
    // ...but is neither found by a plain open nor listed.
    assert!(afpinfo_is_absent(&e));
    assert_eq!(listed(&e), vec![]);
    s.handle.close().unwrap();
    // Nothing is left behind.
    assert_eq!(stored(&e, "AFP_AfpInfo"), None);
    // Written, it exists.
    let s = e.open(INFO, RW, ALL, Disposition::OpenIf).unwrap();
    s.handle.write(0, &afpinfo(b"SMB,OLE!")).unwrap();
    s.handle.close().unwrap();
    let r = e
        .open(INFO, access::FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(&r.handle.read(0, 60).unwrap()[16..24], b"SMB,OLE!");
    r.handle.close().unwrap();
}

#[test]
fn afpinfo_of_zeros_deletes_it() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"");
    write_info(&e, b"SMB,OLE!");
    let s = e
        .open(
            INFO,
            RW | access::FILE_WRITE_ATTRIBUTES,
            ALL,
            Disposition::OverwriteIf,
        )
        .unwrap();
    assert_eq!(s.handle.write(0, &default_afpinfo()).unwrap(), 60);
    // Gone from the listing at once; the open still works on the file.
    assert_eq!(listed(&e), vec![]);
    s.handle
        .set_basic(BasicTimes::default(), Some(attr::ARCHIVE))
        .unwrap();
    s.handle.close().unwrap();
    assert_eq!(listed(&e), vec![]);
    assert_eq!(stored(&e, "AFP_AfpInfo"), None);
    assert!(afpinfo_is_absent(&e));
}

#[test]
fn afpinfo_of_another_size_does_not_exist() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"");
    // Written where the rules are off (a share without them, or a tool).
    e.share.set_macos(false);
    let s = e.open(INFO, RW, ALL, Disposition::Create).unwrap();
    s.handle.write(0, b"foo").unwrap();
    s.handle.close().unwrap();
    assert_eq!(listed(&e), vec![(":AFP_AfpInfo:$DATA".to_string(), 3)]);
    e.share.set_macos(true);
    assert_eq!(listed(&e), vec![]);
    assert!(afpinfo_is_absent(&e));
}

#[test]
fn afpinfo_delete_on_close() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"");
    write_info(&e, b"SMB,OLE!");
    let s = e
        .open(
            INFO,
            access::FILE_READ_ATTRIBUTES | access::DELETE,
            ALL,
            Disposition::Open,
        )
        .unwrap();
    s.handle.set_delete_on_close(true).unwrap();
    assert_eq!(listed(&e).len(), 1);
    assert!(matches!(
        e.open(INFO, access::FILE_READ_DATA, ALL, Disposition::Open),
        Err(FsError::DeletePending)
    ));
    s.handle.close().unwrap();
    assert_eq!(listed(&e), vec![]);
    assert!(afpinfo_is_absent(&e));
}

#[test]
fn empty_resource_fork_does_not_exist() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"");
    assert!(is_not_found(e.open(RSRC, RW, ALL, Disposition::Open)));
    let s = e.open(RSRC, RW, ALL, Disposition::OpenIf).unwrap();
    assert_eq!(s.handle.info().unwrap().end_of_file, 0);
    // Created, but empty: neither found nor listed.
    assert!(is_not_found(e.open(RSRC, RW, ALL, Disposition::Open)));
    assert_eq!(listed(&e), vec![]);
    s.handle.write(10, b"1234567890").unwrap();
    assert_eq!(listed(&e), vec![(":AFP_Resource:$DATA".to_string(), 20)]);
    // Truncated to 0 it is gone again for a plain open, yet another open
    // that creates finds it and writes to it.
    s.handle.set_end_of_file(0).unwrap();
    assert!(is_not_found(e.open(RSRC, RW, ALL, Disposition::Open)));
    assert_eq!(listed(&e), vec![]);
    let t = e.open(RSRC, RW, ALL, Disposition::OpenIf).unwrap();
    t.handle.write(0, b"foo").unwrap();
    t.handle.close().unwrap();
    s.handle.close().unwrap();
    let r = e.open(RSRC, RW, ALL, Disposition::Open).unwrap();
    assert_eq!(r.handle.read(0, 100).unwrap(), b"foo");
    r.handle.close().unwrap();
}

#[test]
fn resource_fork_survives_delete_on_close() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"");
    let s = e.open(RSRC, RW, ALL, Disposition::OpenIf).unwrap();
    s.handle.write(0, b"1234567890").unwrap();
    s.handle.close().unwrap();
    // Delete-on-close at create time.
    let mut p = OpenParams::new(
        RSRC,
        access::FILE_READ_ATTRIBUTES | access::DELETE,
        Disposition::Open,
    );
    p.delete_on_close = true;
    e.open_p(p).unwrap().handle.close().unwrap();
    assert_eq!(listed(&e), vec![(":AFP_Resource:$DATA".to_string(), 10)]);
    // Set on an open: pending while open, ignored at the close.
    let s = e
        .open(
            RSRC,
            access::FILE_READ_DATA | access::DELETE,
            ALL,
            Disposition::Open,
        )
        .unwrap();
    s.handle.set_delete_on_close(true).unwrap();
    assert!(matches!(
        e.open(RSRC, access::FILE_READ_DATA, ALL, Disposition::Open),
        Err(FsError::DeletePending)
    ));
    s.handle.close().unwrap();
    let r = e
        .open(RSRC, access::FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(r.handle.read(0, 100).unwrap(), b"1234567890");
    r.handle.close().unwrap();
    // An empty one goes.
    let s = e
        .open(RSRC, RW | access::DELETE, ALL, Disposition::OverwriteIf)
        .unwrap();
    s.handle.set_delete_on_close(true).unwrap();
    s.handle.close().unwrap();
    assert_eq!(stored(&e, "AFP_Resource"), None);
}

#[test]
fn empty_streams_hidden_from_requesters_that_want_it() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"");
    let s = e.open("f:foo", RW, ALL, Disposition::Create).unwrap();
    // Others see an empty stream as any other.
    assert!(e.open("f:foo", RW, ALL, Disposition::Open).is_ok_and(|o| {
        o.handle.close().unwrap();
        true
    }));
    assert_eq!(listed(&e), vec![(":foo:$DATA".to_string(), 0)]);
    let mac = RequestCtx {
        hide_empty_streams: true,
        ..RequestCtx::new("mac")
    };
    let mut p = OpenParams::new("f:foo", RW, Disposition::Open);
    p.share_access = ALL;
    assert!(is_not_found(e.fs.open(&mac, &e.share, p.clone())));
    p.disposition = Disposition::OpenIf;
    let m = e.fs.open(&mac, &e.share, p.clone()).unwrap();
    assert_eq!(m.action, CreateAction::Opened);
    let f = e
        .open("f", access::FILE_READ_ATTRIBUTES, ALL, Disposition::Open)
        .unwrap();
    let names: Vec<String> = f
        .handle
        .streams_with(true)
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, vec!["::$DATA".to_string()]);
    // With data it is there for everyone.
    m.handle.write(0, b"foo").unwrap();
    assert_eq!(f.handle.streams_with(true).unwrap().len(), 2);
    p.disposition = Disposition::Open;
    e.fs.open(&mac, &e.share, p)
        .unwrap()
        .handle
        .close()
        .unwrap();
    for h in [m.handle, s.handle, f.handle] {
        h.close().unwrap();
    }
}

#[test]
fn rules_off_makes_them_plain_streams() {
    let e = env();
    need_xattrs!(e);
    e.share.set_macos(false);
    assert!(!e.share.macos());
    e.create_file("f", b"");
    let s = e.open(INFO, RW, ALL, Disposition::Create).unwrap();
    // Any bytes, at any offset, of any size.
    s.handle.write(2, b"xyz").unwrap();
    assert_eq!(s.handle.read(0, 100).unwrap(), b"\0\0xyz");
    s.handle.set_end_of_file(100).unwrap();
    assert_eq!(s.handle.info().unwrap().end_of_file, 100);
    s.handle.close().unwrap();
    let r = e.open(RSRC, RW, ALL, Disposition::Create).unwrap();
    r.handle.close().unwrap();
    assert!(e.open(RSRC, RW, ALL, Disposition::Open).is_ok());
    assert_eq!(
        listed(&e),
        vec![
            (":AFP_AfpInfo:$DATA".to_string(), 100),
            (":AFP_Resource:$DATA".to_string(), 0)
        ]
    );
}

fn write_stream(e: &Env, path: &str, data: &[u8]) {
    let s = e
        .open(path, access::FILE_WRITE_DATA, ALL, Disposition::OverwriteIf)
        .unwrap();
    assert_eq!(s.handle.write(0, data).unwrap(), data.len());
    s.handle.close().unwrap();
}

/// `braid vfs stream2adouble` (Samba `net vfs stream2adouble`): the
/// AfpInfo's Finder info, the other streams and the resource fork stream
/// go into `._f`, as Samba lays it out, and the streams are gone.
#[test]
fn streams_go_back_into_an_appledouble_file() {
    let e = env();
    need_xattrs!(e);
    e.create_file("f", b"data");
    write_info(&e, b"FOO BAR ");
    write_stream(&e, "f:org.samba\u{f022}woohoo", b"bar\0");
    write_stream(&e, RSRC, b"bar\0");
    let done = e.share.streams_to_appledouble("f", false).unwrap();
    assert_eq!(
        (done.files, done.converted.clone()),
        (1, vec!["f".to_string()])
    );
    assert!(done.failed.is_empty());
    let side = std::fs::read(e.host("._f")).unwrap();
    // Samba's bytes for the same file (see apple_double.rs).
    assert_eq!(side.len(), 156);
    assert_eq!(&side[8..24], b"Mac OS X        ");
    assert_eq!(&side[50..58], b"FOO BAR ");
    assert_eq!(&side[0x83..0x94], b"org.samba:woohoo\0");
    assert_eq!(&side[0x98..], b"bar\0");
    assert!(listed(&e).is_empty(), "the streams were removed");
    assert_eq!(std::fs::read(e.host("f")).unwrap(), b"data");
    // Nothing left to convert: a second run changes nothing.
    let again = e.share.streams_to_appledouble("f", false).unwrap();
    assert!(again.converted.is_empty());
    assert_eq!(std::fs::read(e.host("._f")).unwrap(), side);
}

/// With resource forks kept in sidecars, the fork already there is kept
/// (moved behind the packed attributes), and the walk goes down a tree
/// without following symbolic links or touching other sidecars.
#[test]
fn recursive_conversion_keeps_sidecar_resource_forks() {
    let e = env();
    need_xattrs!(e);
    e.share.set_apple_double(AppleDoubleOptions {
        resource_fork_in_sidecar: true,
        ..Default::default()
    });
    e.mkdir("d");
    e.mkdir("d/sub");
    e.create_file("d/sub/f", b"x");
    e.create_file("d/plain", b"y");
    write_stream(&e, "d/sub/f:AFP_Resource", b"fork bytes");
    write_stream(&e, "d/sub/f:note", b"hello");
    std::os::unix::fs::symlink("/etc", e.host("d/link")).unwrap();
    let done = e.share.streams_to_appledouble("d", true).unwrap();
    assert_eq!(done.converted, vec!["d/sub/f".to_string()]);
    assert_eq!(done.files, 2, "two regular files, no link, no sidecar");
    let side = std::fs::read(e.host("d/sub/._f")).unwrap();
    assert!(side.ends_with(b"fork bytes"));
    assert!(side.windows(5).any(|w| w == b"note\0"));
    assert!(!e.exists("d/._plain"));
    assert!(matches!(
        e.share.streams_to_appledouble("d", false),
        Err(FsError::IsADirectory)
    ));
}
