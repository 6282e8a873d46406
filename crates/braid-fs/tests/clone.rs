//! Block cloning (`OpenHandle::duplicate_extents_to`, the object store side
//! of FSCTL_DUPLICATE_EXTENTS_TO_FILE): the target range reads as the source
//! range afterwards, sizes never change, and the MS-FSA / MS-FSCC 2.3.8
//! refusals. The test file system may or may not clone (ext4 does not): the
//! bytes must be the same either way.

mod common;

use braid_fs::access::*;
use braid_fs::*;
use common::*;

/// Bytes that differ at every offset of a few clusters (and from zeros).
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(seed as u32 + 1) as u8 | 1)
        .collect()
}

fn cluster(e: &Env) -> u64 {
    e.fs.fs_stats(&e.share).unwrap().block_size
}

fn file(e: &Env, name: &str, data: &[u8]) -> OpenHandle {
    e.create_file(name, data);
    e.open(name, RW, ALL, Disposition::Open).unwrap().handle
}

fn read_all(h: &OpenHandle) -> Vec<u8> {
    h.read(0, 1 << 24).unwrap()
}

#[test]
fn target_range_reads_as_source_range_and_sizes_stay() {
    let e = env();
    let c = cluster(&e) as usize;
    let src_data = pattern(8 * c, 1);
    let dest_data = pattern(8 * c, 2);
    let src = file(&e, "src", &src_data);
    let dest = file(&e, "dest", &dest_data);
    // The whole file.
    assert_eq!(
        src.duplicate_extents_to(0, &dest, 0, 8 * c as u64).unwrap(),
        8 * c as u64
    );
    assert_eq!(read_all(&dest), src_data);
    assert_eq!(read_all(&src), src_data);
    // A range of it to another place; the rest of the target is untouched.
    let dest2 = file(&e, "dest2", &dest_data);
    let n = src
        .duplicate_extents_to(c as u64, &dest2, 4 * c as u64, 2 * c as u64)
        .unwrap();
    assert_eq!(n, 2 * c as u64);
    let mut want = dest_data.clone();
    want[4 * c..6 * c].copy_from_slice(&src_data[c..3 * c]);
    assert_eq!(read_all(&dest2), want);
    assert_eq!(dest2.info().unwrap().end_of_file, 8 * c as u64);
    // Through the service's own read path after reopening, as a client would.
    dest2.close().unwrap();
    assert_eq!(std::fs::read(e.host("dest2")).unwrap(), want);
    // Writes to the target afterwards do not show in the source.
    dest.write(0, b"changed").unwrap();
    assert_eq!(read_all(&src), src_data);
}

#[test]
fn target_is_cut_at_its_end_and_never_grows() {
    let e = env();
    let c = cluster(&e);
    let src_data = pattern(4 * c as usize, 3);
    let src = file(&e, "src", &src_data);
    // An empty target: nothing to do, still empty (smbtorture
    // dup_extents_len_beyond_dest: Windows succeeds and changes nothing).
    let empty = file(&e, "empty", b"");
    assert_eq!(src.duplicate_extents_to(0, &empty, 0, 4 * c).unwrap(), 0);
    assert_eq!(empty.info().unwrap().end_of_file, 0);
    // A target ending inside the range: only its bytes change.
    let short = 2 * c + 100;
    let dest = file(&e, "dest", &vec![0xAA; short as usize]);
    assert_eq!(
        src.duplicate_extents_to(0, &dest, c, 4 * c).unwrap(),
        c + 100
    );
    let got = read_all(&dest);
    assert_eq!(got.len() as u64, short);
    assert_eq!(&got[..c as usize], &vec![0xAA; c as usize][..]);
    assert_eq!(&got[c as usize..], &src_data[..(c + 100) as usize]);
    // A target offset past its end of file.
    assert!(matches!(
        src.duplicate_extents_to(0, &dest, short + 1, c),
        Err(FsError::InvalidParameter)
    ));
    // Zero bytes: success, nothing changes.
    assert_eq!(src.duplicate_extents_to(0, &dest, 0, 0).unwrap(), 0);
    assert_eq!(read_all(&dest).len() as u64, short);
}

#[test]
fn source_range_ends_within_its_last_cluster() {
    let e = env();
    let c = cluster(&e);
    // Source of 1.5 clusters: its allocation is 2 clusters.
    let src_data = pattern((c + c / 2) as usize, 4);
    let src = file(&e, "src", &src_data);
    let dest = file(&e, "dest", &vec![0xFF; 3 * c as usize]);
    // Past the allocation: refused, nothing changes (dup_extents_len_beyond_src).
    assert!(matches!(
        src.duplicate_extents_to(0, &dest, 0, 3 * c),
        Err(FsError::NotSupported)
    ));
    assert!(matches!(
        src.duplicate_extents_to(2 * c, &dest, 0, 1),
        Err(FsError::NotSupported)
    ));
    assert_eq!(read_all(&dest), vec![0xFF; 3 * c as usize]);
    assert_eq!(src.info().unwrap().end_of_file, c + c / 2);
    // Up to the allocation: the bytes past the source's end read as zeros.
    assert_eq!(src.duplicate_extents_to(0, &dest, 0, 2 * c).unwrap(), 2 * c);
    let got = read_all(&dest);
    assert_eq!(&got[..src_data.len()], &src_data[..]);
    assert!(got[src_data.len()..2 * c as usize].iter().all(|b| *b == 0));
    assert!(got[2 * c as usize..].iter().all(|b| *b == 0xFF));
    assert_eq!(src.info().unwrap().end_of_file, c + c / 2);
    // A length ending at the source's (unaligned) end, as a Linux client
    // cloning a whole file sends it.
    let dest2 = file(&e, "dest2", &vec![0u8; src_data.len()]);
    let n = src
        .duplicate_extents_to(0, &dest2, 0, src_data.len() as u64)
        .unwrap();
    assert_eq!(n, src_data.len() as u64);
    assert_eq!(read_all(&dest2), src_data);
}

#[test]
fn same_file_ranges_must_not_overlap() {
    let e = env();
    let c = cluster(&e);
    let data = pattern(8 * c as usize, 5);
    let f = file(&e, "f", &data);
    let other = e.open("f", RW, ALL, Disposition::Open).unwrap().handle;
    // Overlapping, through one open or two: refused, nothing changes.
    for dest in [&f, &other] {
        assert!(matches!(
            f.duplicate_extents_to(0, dest, 2 * c, 4 * c),
            Err(FsError::NotSupported)
        ));
    }
    assert_eq!(read_all(&f), data);
    // Disjoint: the second half reads as the first.
    assert_eq!(f.duplicate_extents_to(0, &f, 4 * c, 4 * c).unwrap(), 4 * c);
    let got = read_all(&f);
    assert_eq!(&got[..4 * c as usize], &data[..4 * c as usize]);
    assert_eq!(&got[4 * c as usize..], &data[..4 * c as usize]);
}

#[test]
fn sparse_source_needs_sparse_target() {
    let e = env();
    if !xattrs_work(&e) {
        skip_without("user xattrs on the test file system");
        return;
    }
    let c = cluster(&e);
    let data = pattern(2 * c as usize, 6);
    let src = file(&e, "src", &data);
    let dest = file(&e, "dest", &vec![0u8; 2 * c as usize]);
    src.set_sparse(true).unwrap();
    assert!(matches!(
        src.duplicate_extents_to(0, &dest, 0, 2 * c),
        Err(FsError::NotSupported)
    ));
    assert_eq!(read_all(&dest), vec![0u8; 2 * c as usize]);
    dest.set_sparse(true).unwrap();
    src.duplicate_extents_to(0, &dest, 0, 2 * c).unwrap();
    assert_eq!(read_all(&dest), data);
    // A sparse target of a source that is not: allowed (as Windows does,
    // smbtorture dup_extents_sparse_dest).
    src.set_sparse(false).unwrap();
    let dest2 = file(&e, "dest2", &vec![0u8; 2 * c as usize]);
    dest2.set_sparse(true).unwrap();
    src.duplicate_extents_to(0, &dest2, 0, 2 * c).unwrap();
    assert_eq!(read_all(&dest2), data);
}

#[test]
fn rights_kinds_and_wire_values_are_checked() {
    let e = env();
    let c = cluster(&e);
    let data = pattern(2 * c as usize, 7);
    let src = file(&e, "src", &data);
    let dest = file(&e, "dest", &vec![0u8; 2 * c as usize]);
    let write_only = e
        .open("src", FILE_WRITE_DATA, ALL, Disposition::Open)
        .unwrap()
        .handle;
    let read_only = e
        .open("dest", FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap()
        .handle;
    assert!(matches!(
        write_only.duplicate_extents_to(0, &dest, 0, c),
        Err(FsError::AccessDenied)
    ));
    assert!(matches!(
        src.duplicate_extents_to(0, &read_only, 0, c),
        Err(FsError::AccessDenied)
    ));
    // Offsets and length are signed 64-bit on the wire; no range may wrap.
    for (s, d, n) in [
        (1u64 << 63, 0, 0),
        (0, 1u64 << 63, 0),
        (0, 0, 1u64 << 63),
        (u64::MAX - c + 1, 0, c),
        (0, i64::MAX as u64, 2),
    ] {
        assert!(
            matches!(
                src.duplicate_extents_to(s, &dest, d, n),
                Err(FsError::InvalidParameter)
            ),
            "{s} {d} {n}"
        );
    }
    // A directory is not a data stream.
    e.mkdir("d");
    let dir = e
        .open(
            "d",
            FILE_READ_DATA | FILE_WRITE_DATA,
            ALL,
            Disposition::Open,
        )
        .unwrap()
        .handle;
    assert!(matches!(
        src.duplicate_extents_to(0, &dir, 0, c),
        Err(FsError::InvalidParameter)
    ));
    // Another share is another volume.
    let other_dir = e.dir.join("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    let other = e.fs.add_share("other", &other_dir).unwrap();
    let mut p = OpenParams::new("f", RW, Disposition::Create);
    p.share_access = ALL;
    let there = e.fs.open(&e.ctx, &other, p).unwrap().handle;
    there.write(0, &vec![0u8; c as usize]).unwrap();
    assert!(matches!(
        src.duplicate_extents_to(0, &there, 0, c),
        Err(FsError::InvalidParameter)
    ));
    // A closed source.
    let closed = e.open("src", RW, ALL, Disposition::Open).unwrap().handle;
    closed.close().unwrap();
    assert!(matches!(
        closed.duplicate_extents_to(0, &dest, 0, c),
        Err(FsError::FileClosed)
    ));
    assert_eq!(read_all(&dest), vec![0u8; 2 * c as usize]);
}

#[test]
fn byte_range_locks_of_other_opens_do_not_hold_a_clone_off() {
    let e = env();
    let c = cluster(&e);
    let data = pattern(2 * c as usize, 8);
    let src = file(&e, "src", &data);
    let dest = file(&e, "dest", &vec![0u8; 2 * c as usize]);
    let src2 = e.open("src", RW, ALL, Disposition::Open).unwrap().handle;
    let dest2 = e.open("dest", RW, ALL, Disposition::Open).unwrap().handle;
    src2.lock(0, 2 * c, true, LockOwner(0)).unwrap();
    dest2.lock(0, 2 * c, true, LockOwner(0)).unwrap();
    src.duplicate_extents_to(0, &dest, 0, 2 * c).unwrap();
    assert_eq!(read_all(&dest), data);
}

#[test]
fn named_streams_on_either_side() {
    let e = env();
    if !xattrs_work(&e) {
        skip_without("user xattrs on the test file system");
        return;
    }
    let c = cluster(&e);
    let data = pattern(c as usize + 10, 9);
    let src = file(&e, "src", &data);
    // File to stream: cut at the stream's end.
    let s = file(&e, "f:s", &[0u8; 100]);
    assert_eq!(src.duplicate_extents_to(0, &s, 0, c).unwrap(), 100);
    assert_eq!(read_all(&s), data[..100]);
    // Stream to file: up to the stream's last cluster, zeros past its end.
    let dest = file(&e, "dest", &vec![0xEE; 2 * c as usize]);
    assert_eq!(s.duplicate_extents_to(0, &dest, c, c).unwrap(), c);
    let got = read_all(&dest);
    assert!(got[..c as usize].iter().all(|b| *b == 0xEE));
    assert_eq!(&got[c as usize..c as usize + 100], &data[..100]);
    assert!(got[c as usize + 100..].iter().all(|b| *b == 0));
    assert!(matches!(
        s.duplicate_extents_to(0, &dest, 0, c + 1),
        Err(FsError::NotSupported)
    ));
}

/// Whether the file system of the test directory clones (FICLONE).
const BTRFS_SUPER_MAGIC: i64 = 0x9123_683E;
const XFS_SUPER_MAGIC: i64 = 0x5846_5342;

/// statfs's f_type of the test directory's file system.
fn fs_magic(e: &Env) -> i64 {
    let c = std::ffi::CString::new(e.dir.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string and a statfs to fill.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statfs(c.as_ptr(), &mut st) }, 0);
    #[allow(clippy::unnecessary_cast)]
    let t = st.f_type as i64;
    t
}

fn clones(e: &Env) -> bool {
    use std::os::fd::AsRawFd;
    std::fs::write(e.dir.join("probe-a"), [1u8; 4096]).unwrap();
    let a = std::fs::File::open(e.dir.join("probe-a")).unwrap();
    let b = std::fs::File::create(e.dir.join("probe-b")).unwrap();
    // SAFETY: plain ioctl on two open descriptors.
    unsafe { libc::ioctl(b.as_raw_fd(), libc::FICLONE, a.as_raw_fd()) == 0 }
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct FiemapExtent {
    logical: u64,
    physical: u64,
    length: u64,
    reserved64: [u64; 2],
    flags: u32,
    reserved: [u32; 3],
}

#[repr(C)]
#[derive(Default)]
struct Fiemap {
    start: u64,
    length: u64,
    flags: u32,
    mapped_extents: u32,
    extent_count: u32,
    reserved: u32,
    extents: [FiemapExtent; 16],
}

/// Whether every extent of the host file at `path` is shared with another
/// file (FIEMAP, FIEMAP_EXTENT_SHARED), and there is at least one.
fn all_extents_shared(path: &std::path::Path) -> bool {
    use std::os::fd::AsRawFd;
    const FS_IOC_FIEMAP: libc::Ioctl = 0xC020_660B;
    const FIEMAP_FLAG_SYNC: u32 = 0x1;
    const FIEMAP_EXTENT_SHARED: u32 = 0x2000;
    let f = std::fs::File::open(path).unwrap();
    let mut m = Fiemap {
        length: u64::MAX,
        flags: FIEMAP_FLAG_SYNC,
        extent_count: 16,
        ..Default::default()
    };
    // SAFETY: `m` is a fiemap header followed by room for 16 extents.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FIEMAP, &mut m) };
    assert_eq!(r, 0, "FIEMAP: {}", std::io::Error::last_os_error());
    let n = m.mapped_extents as usize;
    n > 0
        && m.extents[..n.min(16)]
            .iter()
            .all(|x| x.flags & FIEMAP_EXTENT_SHARED != 0)
}

#[test]
fn a_file_system_that_clones_shares_the_extents() {
    let e = env();
    if !clones(&e) {
        // A legitimate skip only where the file system cannot clone (ext4,
        // tmpfs); btrfs and xfs (reflink, mkfs.xfs's default) must.
        let fs = fs_magic(&e);
        assert!(
            ![BTRFS_SUPER_MAGIC, XFS_SUPER_MAGIC].contains(&fs),
            "FICLONE failed on btrfs or xfs (f_type {fs:#x}), which clone"
        );
        eprintln!("SKIP: the test file system (f_type {fs:#x}) does not clone (FICLONE)");
        return;
    }
    let c = cluster(&e);
    let data = pattern(4 * c as usize, 10);
    let src = file(&e, "src", &data);
    let dest = file(&e, "dest", &vec![0u8; 4 * c as usize]);
    src.sync().unwrap();
    dest.sync().unwrap();
    assert!(!all_extents_shared(&e.host("dest")));
    assert_eq!(src.duplicate_extents_to(0, &dest, 0, 4 * c).unwrap(), 4 * c);
    assert!(all_extents_shared(&e.host("dest")));
    assert_eq!(read_all(&dest), data);
    // Copy on write: the two stay separate files.
    dest.write(0, &[0u8; 16]).unwrap();
    assert_eq!(read_all(&src), data);
}
