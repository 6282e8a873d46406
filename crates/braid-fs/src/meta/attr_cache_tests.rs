//! The attribute layer with an injected clock: what it keeps, when a
//! change of the file's change time drops it, and its bounds.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::clock::ManualClock;
use crate::meta::attr_cache::{AttrCache, FileStamp, KeptXattr};
use crate::meta::stats::CacheBudget;

const SEC: i128 = 1_000_000_000;

fn at(secs: u64) -> Arc<ManualClock> {
    Arc::new(ManualClock::new(UNIX_EPOCH + Duration::from_secs(secs)))
}

fn stamp(ino: u64, ctime_ns: i128) -> FileStamp {
    FileStamp {
        dev: 7,
        ino,
        ctime_ns,
    }
}

/// A "file system" whose reads are counted.
struct Disk {
    value: Option<Vec<u8>>,
    reads: Cell<u32>,
}

impl Disk {
    fn new(v: &[u8]) -> Disk {
        Disk {
            value: Some(v.to_vec()),
            reads: Cell::new(0),
        }
    }

    fn read(&self) -> Result<Option<Vec<u8>>, i32> {
        self.reads.set(self.reads.get() + 1);
        Ok(self.value.clone())
    }
}

fn dos(c: &AttrCache, s: &FileStamp, d: &Disk) -> Option<Vec<u8>> {
    c.xattr(s, KeptXattr::Dos, || d.read())
        .unwrap()
        .map(|v| v.to_vec())
}

#[test]
fn a_settled_file_is_read_once_while_its_change_time_stands() {
    let clock = at(1000);
    let c = AttrCache::new(clock.clone(), Arc::new(CacheBudget::default()));
    let s = stamp(1, 900 * SEC + 123);
    let d = Disk::new(b"rec");
    assert_eq!(dos(&c, &s, &d).as_deref(), Some(&b"rec"[..]));
    assert_eq!(dos(&c, &s, &d).as_deref(), Some(&b"rec"[..]));
    assert_eq!(d.reads.get(), 1);
    let st = c.stats();
    assert_eq!((st.hits, st.misses, st.files), (1, 1, 1));
}

#[test]
fn a_moved_change_time_drops_the_entry() {
    let clock = at(1000);
    let c = AttrCache::new(clock.clone(), Arc::new(CacheBudget::default()));
    let d = Disk::new(b"old");
    dos(&c, &stamp(1, 900 * SEC + 5), &d);
    // Someone set the xattr (Braid or a host process): the change time moved.
    let d2 = Disk::new(b"new");
    assert_eq!(
        dos(&c, &stamp(1, 1000 * SEC + 5), &d2).as_deref(),
        Some(&b"new"[..])
    );
    assert_eq!(d2.reads.get(), 1);
    assert_eq!(c.stats().invalidations, 1);
}

#[test]
fn absence_is_kept() {
    let clock = at(1000);
    let c = AttrCache::new(clock.clone(), Arc::new(CacheBudget::default()));
    let none = Disk {
        value: None,
        reads: Cell::new(0),
    };
    let s = stamp(2, 10 * SEC + 1);
    assert_eq!(dos(&c, &s, &none), None);
    assert_eq!(dos(&c, &s, &none), None);
    assert_eq!(none.reads.get(), 1);
}

#[test]
fn a_racy_change_time_is_not_kept() {
    let clock = at(1000);
    let c = AttrCache::new(clock.clone(), Arc::new(CacheBudget::default()));
    // Changed 10 ms before the read: a change in the same tick could
    // leave the change time as it is.
    let s = stamp(3, 1000 * SEC - 10_000_000);
    let d = Disk::new(b"x");
    dos(&c, &s, &d);
    dos(&c, &s, &d);
    assert_eq!(d.reads.get(), 2);
    assert_eq!(c.stats().files, 0);
    // Once the clock is past the margin, the same stamp is kept.
    clock.advance(Duration::from_millis(100));
    dos(&c, &s, &d);
    dos(&c, &s, &d);
    assert_eq!(d.reads.get(), 3);
}

#[test]
fn whole_second_change_times_are_not_kept() {
    let clock = at(1000);
    let c = AttrCache::new(clock, Arc::new(CacheBudget::default()));
    let s = stamp(4, 500 * SEC);
    let d = Disk::new(b"x");
    dos(&c, &s, &d);
    dos(&c, &s, &d);
    assert_eq!(d.reads.get(), 2);
}

#[test]
fn errors_are_never_kept() {
    let clock = at(1000);
    let c = AttrCache::new(clock, Arc::new(CacheBudget::default()));
    let s = stamp(5, 10 * SEC + 1);
    let failed: Result<_, i32> = c.xattr(&s, KeptXattr::Dos, || Err(libc::EBADF));
    assert_eq!(failed, Err(libc::EBADF));
    let d = Disk::new(b"y");
    assert_eq!(dos(&c, &s, &d).as_deref(), Some(&b"y"[..]));
    assert_eq!(d.reads.get(), 1);
}

#[test]
fn each_kept_xattr_and_the_birth_time_are_separate() {
    let clock = at(1000);
    let c = AttrCache::new(clock, Arc::new(CacheBudget::default()));
    let s = stamp(6, 10 * SEC + 1);
    dos(&c, &s, &Disk::new(b"dos"));
    let sd = Disk::new(b"sd");
    let got = c
        .xattr(&s, KeptXattr::Descriptor, || sd.read())
        .unwrap()
        .map(|v| v.to_vec());
    assert_eq!(got.as_deref(), Some(&b"sd"[..]));
    let born = UNIX_EPOCH + Duration::from_secs(5);
    let reads = Cell::new(0);
    let read = || {
        reads.set(reads.get() + 1);
        Some(born)
    };
    assert_eq!(c.btime(&s, read), Some(born));
    assert_eq!(c.btime(&s, read), Some(born));
    assert_eq!(reads.get(), 1);
    // A birth time the file system has not is not kept.
    let s2 = stamp(60, 10 * SEC + 1);
    let none_reads = Cell::new(0);
    let none = || -> Option<SystemTime> {
        none_reads.set(none_reads.get() + 1);
        None
    };
    assert_eq!(c.btime(&s2, none), None);
    assert_eq!(c.btime(&s2, none), None);
    assert_eq!(none_reads.get(), 2);
}

#[test]
fn the_budget_bounds_it_and_the_least_recently_used_go_first() {
    let clock = at(1000);
    // A quarter of 4000 entries: 1000 files at most.
    let budget = Arc::new(CacheBudget::new(4000, 1 << 30));
    let c = AttrCache::new(clock, budget.clone());
    let d = Disk::new(b"v");
    for ino in 0..1000 {
        dos(&c, &stamp(ino, 10 * SEC + 1), &d);
    }
    assert_eq!(c.stats().files, 1000);
    // File 0 is used again: it is the newest now.
    dos(&c, &stamp(0, 10 * SEC + 1), &d);
    dos(&c, &stamp(5000, 10 * SEC + 1), &d);
    let st = c.stats();
    assert!(st.files <= 1000 && st.files >= 400, "{st:?}");
    let before = d.reads.get();
    dos(&c, &stamp(0, 10 * SEC + 1), &d);
    dos(&c, &stamp(5000, 10 * SEC + 1), &d);
    assert_eq!(d.reads.get(), before, "recently used files stayed");
    dos(&c, &stamp(1, 10 * SEC + 1), &d);
    assert_eq!(d.reads.get(), before + 1, "the oldest went");
    assert_eq!(budget.used().0, c.stats().files);
    c.clear();
    assert_eq!(budget.used(), (0, 0));
}

#[test]
fn the_broken_layer_serves_a_stale_value() {
    let clock = at(1000);
    let c = AttrCache::new(clock, Arc::new(CacheBudget::default())).skipping_validation();
    dos(&c, &stamp(9, 900 * SEC + 5), &Disk::new(b"old"));
    let d2 = Disk::new(b"new");
    assert_eq!(
        dos(&c, &stamp(9, 1000 * SEC + 5), &d2).as_deref(),
        Some(&b"old"[..])
    );
}
