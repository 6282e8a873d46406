//! I/O, metadata, rename, byte-range locks.
mod common;
use std::time::{Duration, UNIX_EPOCH};

use braid_fs::access::*;
use braid_fs::*;
use common::*;

#[test]
fn read_write_eof() {
    let e = env();
    let o = e.open("f", RW, ALL, Disposition::Create).unwrap();
    let h = &o.handle;
    assert_eq!(h.write(0, b"hello world").unwrap(), 11);
    assert_eq!(h.read(6, 100).unwrap(), b"world");
    assert_eq!(h.read(100, 10).unwrap(), b"");
    let mut buf = [0u8; 4];
    assert_eq!(h.read_into(1, &mut buf).unwrap(), 4);
    assert_eq!(&buf, b"ello");
    // Sparse write past EOF.
    h.write(20, b"!").unwrap();
    assert_eq!(h.info().unwrap().end_of_file, 21);
    h.set_end_of_file(5).unwrap();
    assert_eq!(h.read(0, 100).unwrap(), b"hello");
    h.set_end_of_file(8).unwrap();
    assert_eq!(h.read(0, 100).unwrap(), b"hello\0\0\0");
    // Allocation: >= EOF keeps data, < EOF truncates.
    h.set_allocation(1 << 20).unwrap();
    let i = h.info().unwrap();
    assert_eq!(i.end_of_file, 8);
    assert!(i.allocation_size >= 8);
    h.set_allocation(3).unwrap();
    assert_eq!(h.read(0, 100).unwrap(), b"hel");
    h.flush().unwrap();
    let i = h.close().unwrap();
    assert_eq!(i.end_of_file, 3);
    assert!(matches!(h.read(0, 1), Err(FsError::FileClosed)));
    assert!(matches!(h.close(), Err(FsError::FileClosed)));
    // Write-through open.
    let mut p = OpenParams::new("wt", RW, Disposition::Create);
    p.write_through = true;
    p.allocation_size = Some(4096);
    let o = e.open_p(p).unwrap();
    assert!(o.info.allocation_size >= 4096 || o.info.allocation_size == 0);
    assert_eq!(o.info.end_of_file, 0);
    o.handle.write(0, b"durable").unwrap();
    assert_eq!(std::fs::read(e.host("wt")).unwrap(), b"durable");
}

#[test]
fn set_change_time_shows_until_the_file_changes() {
    let e = env();
    let o = e
        .open("f", RW | FILE_WRITE_ATTRIBUTES, ALL, Disposition::Create)
        .unwrap();
    let h = &o.handle;
    let set = UNIX_EPOCH + Duration::new(2_000_000_000, 700);
    let wt = UNIX_EPOCH + Duration::new(1_500_000_000, 0);
    h.set_basic([None, None, Some(wt), Some(set)], None)
        .unwrap();
    assert_eq!(h.info().unwrap().change_time, set);
    assert_eq!(h.info().unwrap().last_write_time, wt);
    // The parent's listing shows it too.
    let d = e
        .open("", FILE_LIST_DIRECTORY, ALL, Disposition::Open)
        .unwrap();
    let listed = d.handle.read_dir().unwrap();
    let f = listed.iter().find(|x| x.name == "f").unwrap();
    assert_eq!(f.info.change_time, set);
    // A write changes the file: the real ctime is shown again.
    std::thread::sleep(Duration::from_millis(20));
    h.write(0, b"x").unwrap();
    let after = h.info().unwrap().change_time;
    assert_ne!(after, set);
    assert!(after > wt);
}

#[test]
fn info_and_set_basic() {
    let e = env();
    let o = e
        .open("f", RW | FILE_WRITE_ATTRIBUTES, ALL, Disposition::Create)
        .unwrap();
    let h = &o.handle;
    let i = h.info().unwrap();
    assert_eq!(i.number_of_links, 1);
    assert!(!i.delete_pending);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(i.file_id, std::fs::metadata(e.host("f")).unwrap().ino());
    let ct = UNIX_EPOCH + Duration::new(1_000_000_000, 100);
    let at = UNIX_EPOCH + Duration::new(1_100_000_000, 0);
    let wt = UNIX_EPOCH + Duration::new(1_200_000_000, 500);
    h.set_basic(
        [Some(ct), Some(at), Some(wt), None],
        Some(attr::HIDDEN | attr::SYSTEM),
    )
    .unwrap();
    let i = h.info().unwrap();
    assert_eq!(i.creation_time, ct);
    assert_eq!(i.last_access_time, at);
    assert_eq!(i.last_write_time, wt);
    assert_eq!(i.attributes, attr::HIDDEN | attr::SYSTEM);
    // NORMAL clears everything.
    h.set_basic([None; 4], Some(attr::NORMAL)).unwrap();
    assert_eq!(h.info().unwrap().attributes, attr::NORMAL);
    assert!(matches!(
        h.set_basic([None; 4], Some(attr::DIRECTORY)),
        Err(FsError::InvalidParameter)
    ));
    // Persisted: a new open sees it, and listings too.
    h.set_basic([None; 4], Some(attr::ARCHIVE | attr::HIDDEN))
        .unwrap();
    h.close().unwrap();
    let o = e
        .open("f", FILE_READ_ATTRIBUTES, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(o.info.attributes, attr::ARCHIVE | attr::HIDDEN);
    assert_eq!(o.info.creation_time, ct);
    let d = e.open("", FILE_READ_DATA, ALL, Disposition::Open).unwrap();
    let l = d.handle.read_dir().unwrap();
    let f = l.iter().find(|x| x.name == "f").unwrap();
    assert_eq!(f.info.attributes, attr::ARCHIVE | attr::HIDDEN);
    assert_eq!(f.info.creation_time, ct);
    // Needs FILE_WRITE_ATTRIBUTES.
    assert!(matches!(
        o.handle.set_basic([None; 4], Some(attr::NORMAL)),
        Err(FsError::AccessDenied)
    ));
}

#[test]
fn rename_semantics() {
    let e = env();
    e.create_file("a", b"A");
    e.create_file("b", b"B");
    let o = e
        .open("a", DELETE | FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap();
    let other = e
        .open("a", FILE_READ_ATTRIBUTES, ALL, Disposition::Open)
        .unwrap();
    assert!(matches!(
        o.handle.rename("b", false),
        Err(FsError::NameCollision)
    ));
    assert!(matches!(
        o.handle.rename("B", false),
        Err(FsError::NameCollision)
    ));
    // Target open → AccessDenied even with replace.
    let ob = e.open("b", FILE_READ_DATA, ALL, Disposition::Open).unwrap();
    assert!(matches!(
        o.handle.rename("b", true),
        Err(FsError::AccessDenied)
    ));
    ob.handle.close().unwrap();
    o.handle.rename("b", true).unwrap();
    assert!(!e.exists("a"));
    assert_eq!(std::fs::read(e.host("b")).unwrap(), b"A");
    assert_eq!(o.handle.path(), "b");
    assert_eq!(other.handle.path(), "b");
    // Case-only rename.
    o.handle.rename("B", false).unwrap();
    assert!(
        e.exists("B")
            && !std::fs::read_dir(&e.share_dir)
                .unwrap()
                .any(|d| d.unwrap().file_name() == "b")
    );
    assert_eq!(o.handle.path(), "B");
    // Move into a directory; missing target dir.
    e.mkdir("dir");
    assert!(matches!(
        o.handle.rename("nodir\\x", false),
        Err(FsError::PathNotFound)
    ));
    o.handle.rename("DIR\\moved", false).unwrap();
    assert_eq!(o.handle.path(), "dir\\moved");
    assert_eq!(o.handle.read(0, 10).unwrap(), b"A");
    // Replacing a directory is refused.
    e.mkdir("d2");
    assert!(matches!(
        o.handle.rename("d2", true),
        Err(FsError::AccessDenied)
    ));
    assert!(matches!(
        o.handle.rename("bad*", true),
        Err(FsError::InvalidName)
    ));
    o.handle.close().unwrap();
    other.handle.close().unwrap();
    // Renaming a directory with an open beneath it → AccessDenied.
    let d = e
        .open("dir", DELETE | FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap();
    let child = e
        .open("dir\\moved", FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap();
    assert!(matches!(
        d.handle.rename("dir3", false),
        Err(FsError::AccessDenied)
    ));
    child.handle.close().unwrap();
    d.handle.rename("dir3", false).unwrap();
    assert!(e.exists("dir3/moved"));
    let c = e
        .open("dir3\\moved", FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(c.handle.path(), "dir3\\moved");
    // Delete-on-close after rename deletes the new name.
    let x = e
        .open("dir3\\moved", DELETE, ALL, Disposition::Open)
        .unwrap();
    x.handle.rename("gone", false).unwrap();
    x.handle.set_delete_on_close(true).unwrap();
    x.handle.close().unwrap();
    assert!(e.exists("gone"), "still open by c (same file)");
    drop(c);
    assert!(!e.exists("gone"));
}

#[test]
fn locks_between_handles() {
    let e = env();
    e.create_file("f", &[0u8; 100]);
    let a = e.open("f", RW, ALL, Disposition::Open).unwrap().handle;
    let b = e.open("f", RW, ALL, Disposition::Open).unwrap().handle;
    let o = LockOwner(0);
    a.lock(10, 10, true, o).unwrap();
    assert!(matches!(
        b.lock(15, 1, false, o),
        Err(FsError::LockNotGranted)
    ));
    assert!(matches!(
        b.check_io_lock(0, 11, false, o),
        Err(FsError::LockConflict)
    ));
    assert!(matches!(
        b.check_io_lock(19, 1, true, o),
        Err(FsError::LockConflict)
    ));
    b.check_io_lock(0, 10, true, o).unwrap();
    a.check_io_lock(10, 10, true, o).unwrap();
    // A different owner on the same open is a different holder.
    assert!(matches!(
        a.check_io_lock(10, 1, false, LockOwner(7)),
        Err(FsError::LockConflict)
    ));
    assert!(matches!(b.unlock(10, 10, o), Err(FsError::RangeNotLocked)));
    assert!(matches!(a.unlock(10, 5, o), Err(FsError::RangeNotLocked)));
    assert!(matches!(
        a.lock(u64::MAX, 2, true, o),
        Err(FsError::InvalidLockRange)
    ));
    a.lock(u64::MAX, 1, true, o).unwrap();
    // Waiters are told when locks go.
    let n = b.lock_changed();
    let notified = n.notified();
    let mut notified = Box::pin(notified);
    notified.as_mut().enable();
    a.unlock(10, 10, o).unwrap();
    let rt = tokio_rt();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(1), notified)
            .await
            .unwrap()
    });
    b.lock(15, 1, false, o).unwrap();
    // Close releases locks.
    b.close().unwrap();
    a.lock(0, 100, true, o).unwrap();
    let d = e
        .open("", FILE_READ_DATA, ALL, Disposition::Open)
        .unwrap()
        .handle;
    assert!(matches!(
        d.lock(0, 1, true, o),
        Err(FsError::InvalidParameter)
    ));
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn fs_stats_and_manual_clock() {
    let e = env();
    let s = e.fs.fs_stats(&e.share).unwrap();
    assert!(s.block_size > 0 && s.total_blocks > 0 && s.available_blocks <= s.total_blocks);
    let c = std::sync::Arc::new(ManualClock::new(UNIX_EPOCH));
    let fs = FileService::new(c.clone());
    c.advance(Duration::from_secs(3));
    assert_eq!(fs.clock().now(), UNIX_EPOCH + Duration::from_secs(3));
}

#[test]
fn concurrent_opens_are_consistent() {
    let e = env();
    e.create_file("f", b"");
    let fs = e.fs.clone();
    let share = e.share.clone();
    let wins = std::sync::atomic::AtomicU32::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..200 {
                    let mut p = OpenParams::new("f", RW, Disposition::Open);
                    p.share_access = 0;
                    if let Ok(o) = fs.open(&RequestCtx::default(), &share, p) {
                        wins.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        // Exclusive: nobody else can be in here.
                        let mut q = OpenParams::new("f", FILE_READ_DATA, Disposition::Open);
                        q.share_access = ALL;
                        assert!(matches!(
                            fs.open(&RequestCtx::default(), &share, q),
                            Err(FsError::SharingViolation)
                        ));
                        o.handle.close().unwrap();
                    }
                }
            });
        }
    });
    assert!(wins.load(std::sync::atomic::Ordering::Relaxed) > 0);
}

/// Page-aligned copy of `data`, as the SMB receive path lays out WRITEs.
fn page_aligned(data: &[u8]) -> (Vec<u8>, usize) {
    let mut v = vec![0u8; data.len() + 4096];
    let pad = (4096 - (v.as_ptr() as usize) % 4096) % 4096;
    v[pad..pad + data.len()].copy_from_slice(data);
    (v, pad)
}

#[test]
fn direct_and_buffered_writes_mix_and_read_back() {
    let e = env();
    e.share.set_direct_writes(true);
    let o = e.open("d", RW, ALL, Disposition::Create).unwrap();
    let h = &o.handle;
    let mut expect = vec![0u8; 768 * 1024];
    let first: Vec<u8> = (0..512 * 1024).map(|i| (i % 253) as u8).collect();
    let (buf, pad) = page_aligned(&first);
    assert_eq!(
        h.write(0, &buf[pad..pad + first.len()]).unwrap(),
        first.len()
    );
    expect[..first.len()].copy_from_slice(&first);
    // A small buffered write inside the directly written range.
    h.write(1000, b"buffered").unwrap();
    expect[1000..1008].copy_from_slice(b"buffered");
    assert_eq!(h.read(0, expect.len()).unwrap(), &expect[..512 * 1024]);
    // A direct write over a range the page cache now holds, past EOF too.
    let second: Vec<u8> = (0..512 * 1024).map(|i| (i % 7) as u8 + 1).collect();
    let (buf, pad) = page_aligned(&second);
    h.write(256 * 1024, &buf[pad..pad + second.len()]).unwrap();
    expect[256 * 1024..].copy_from_slice(&second);
    // An unaligned large write takes the buffered path.
    h.write(3, &buf[pad + 1..pad + 1 + 200 * 1024]).unwrap();
    expect[3..3 + 200 * 1024].copy_from_slice(&second[1..1 + 200 * 1024]);
    assert_eq!(h.read(0, expect.len() + 10).unwrap(), expect);
    assert_eq!(h.info().unwrap().end_of_file, expect.len() as u64);
    h.close().unwrap();
    assert_eq!(std::fs::read(e.host("d")).unwrap(), expect);
    // Write-through opens stay durable on the direct path (O_DSYNC kept).
    let mut p = OpenParams::new("wt", RW, Disposition::Create);
    p.write_through = true;
    let o = e.open_p(p).unwrap();
    let (buf, pad) = page_aligned(&first);
    o.handle.write(0, &buf[pad..pad + first.len()]).unwrap();
    assert_eq!(std::fs::read(e.host("wt")).unwrap(), first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_direct_writes_complete_and_read_back() {
    let e = env();
    let o = e.open("q", RW, ALL, Disposition::Create).unwrap();
    let h = o.handle.clone();
    let chunk = 256 * 1024;
    let data: Vec<u8> = (0..8 * chunk).map(|i| (i * 31 % 251) as u8).collect();
    let (buf, pad) = page_aligned(&data);
    let whole = std::sync::Arc::new(buf);
    // Off by default: nothing is queued.
    let piece = |i: usize| -> braid_fs::WriteBuf {
        let b = whole.clone();
        Box::new(Slice(b, pad + i * chunk, chunk))
    };
    assert!(h.write_queued(0, piece(0)).is_none());
    e.share.set_direct_writes(true);
    // Eight writes in flight at once, in reverse order.
    let mut pending = Vec::new();
    for i in (0..8).rev() {
        match h.write_queued((i * chunk) as u64, piece(i)) {
            Some(w) => pending.push((i, tokio::spawn(w))),
            // No io_uring or O_DIRECT here: write it the ordinary way.
            None => {
                h.write((i * chunk) as u64, &data[i * chunk..(i + 1) * chunk])
                    .unwrap();
            }
        }
    }
    for (i, w) in pending {
        assert_eq!(w.await.unwrap(), Some(chunk), "piece {i}");
    }
    assert_eq!(h.read(0, data.len()).unwrap(), data);
    // Unaligned or small writes are never queued.
    let odd: braid_fs::WriteBuf = Box::new(Slice(whole.clone(), pad + 1, chunk));
    assert!(h.write_queued(0, odd).is_none());
    let small: braid_fs::WriteBuf = Box::new(Slice(whole.clone(), pad, 4096));
    assert!(h.write_queued(0, small).is_none());
    h.close().unwrap();
    assert_eq!(std::fs::read(e.host("q")).unwrap(), data);
}

/// `len` bytes at `start` of a shared buffer.
struct Slice(std::sync::Arc<Vec<u8>>, usize, usize);

impl AsRef<[u8]> for Slice {
    fn as_ref(&self) -> &[u8] {
        &self.0[self.1..self.1 + self.2]
    }
}

#[test]
fn allocation_below_the_reserved_space_releases_it() {
    let e = env();
    let o = e.open("prealloc", RW, ALL, Disposition::Create).unwrap();
    let h = &o.handle;
    h.write(0, b"abc").unwrap();
    h.set_allocation(1 << 20).unwrap();
    let reserved = h.info().unwrap().allocation_size;
    if reserved < 1 << 20 {
        skip_without("fallocate (the test file system reserved no space)");
        return;
    }
    // MS-FSA 2.1.5.14.1: an AllocationSize above EOF but below what is
    // allocated shrinks the allocation and keeps the data.
    h.set_allocation(8192).unwrap();
    let i = h.info().unwrap();
    assert_eq!(i.end_of_file, 3);
    assert!(i.allocation_size < 1 << 20, "{}", i.allocation_size);
    assert!(i.allocation_size >= 8192, "{}", i.allocation_size);
    h.set_allocation(3).unwrap();
    assert!(h.info().unwrap().allocation_size <= 8192);
    assert_eq!(h.read(0, 10).unwrap(), b"abc");
}

#[test]
fn growing_a_file_that_is_not_sparse_past_the_free_space_is_disk_full() {
    let e = env();
    let o = e
        .open("f", RW | FILE_WRITE_ATTRIBUTES, ALL, Disposition::Create)
        .unwrap();
    let h = &o.handle;
    h.write(0, b"head").unwrap();
    let s = e.fs.fs_stats(&e.share).unwrap();
    let beyond = s.available_blocks * s.block_size + (1 << 30);
    // NTFS would have to allocate the gap: refused, and nothing changes.
    assert!(matches!(h.write(beyond, b"x"), Err(FsError::DiskFull)));
    assert!(matches!(h.set_end_of_file(beyond), Err(FsError::DiskFull)));
    assert_eq!(h.write(beyond, b"").unwrap(), 0);
    assert_eq!(h.info().unwrap().end_of_file, 4);
    // A gap the volume can hold is written as before.
    h.write(1 << 20, b"tail").unwrap();
    assert_eq!(h.info().unwrap().end_of_file, (1 << 20) + 4);
    // A sparse file grows into a hole, as on NTFS (where the file system
    // takes a file that large: ext4 stops at 16 TiB).
    h.set_sparse(true).unwrap();
    if beyond < 1 << 43 {
        h.write(beyond, b"x").unwrap();
        assert_eq!(h.info().unwrap().end_of_file, beyond + 1);
    }
}

#[test]
fn trim_releases_whole_pages_and_keeps_the_rest() {
    let e = env();
    if !e.share.can_trim() {
        skip_without("hole punching on the test directory's file system");
        return;
    }
    let o = e.open("f", RW, ALL, Disposition::Create).unwrap();
    let h = &o.handle;
    let size = 3 * 4096 + 100;
    h.write(0, &vec![b'x'; size]).unwrap();
    h.flush().unwrap();
    let blocks = || {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(e.host("f")).unwrap().blocks()
    };
    let before = blocks();
    // One range from inside page 0 to inside page 2: only page 1 is whole.
    assert_eq!(h.trim(&[(100, 8192 + 50)], 0).unwrap(), 1);
    // Its storage went back to the file system (st_blocks counts 512 bytes).
    assert_eq!(blocks(), before - 8);
    let data = h.read(0, size).unwrap();
    assert!(data[..4096].iter().all(|b| *b == b'x'));
    assert!(data[4096..8192].iter().all(|b| *b == 0));
    assert!(data[8192..].iter().all(|b| *b == b'x'));
    // A range past the end of file trims to it; the size stays.
    assert_eq!(h.trim(&[(12288, 1 << 20), (0, 10)], 0).unwrap(), 2);
    let data = h.read(0, size).unwrap();
    assert_eq!(data.len(), size);
    assert!(data[12288..].iter().all(|b| *b == 0));
    assert!(data[..4096].iter().all(|b| *b == b'x'));
    // Another open's lock over a trimmed page refuses the trim.
    let b = e.open("f", RW, ALL, Disposition::Open).unwrap().handle;
    b.lock(10, 10, true, LockOwner(0)).unwrap();
    assert!(matches!(
        h.trim(&[(0, 4096)], 0),
        Err(FsError::LockConflict)
    ));
    assert!(h.read(0, 4096).unwrap().iter().all(|b| *b == b'x'));
    // Reading is not enough, nor is a directory a file to trim.
    let r = e.open("f", FILE_READ_DATA, ALL, Disposition::Open).unwrap();
    assert!(matches!(
        r.handle.trim(&[(0, 4096)], 0),
        Err(FsError::AccessDenied)
    ));
    let d = e
        .open("", FILE_READ_DATA | FILE_WRITE_DATA, ALL, Disposition::Open)
        .unwrap();
    assert!(matches!(
        d.handle.trim(&[(0, 4096)], 0),
        Err(FsError::InvalidParameter)
    ));
}
