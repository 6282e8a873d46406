//! LastWriteTime updates of writes (delayed, as Samba and Windows before
//! Server 2019 do them) and ChangeTimes set through FileBasicInformation.
mod common;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use braid_fs::access::*;
use braid_fs::*;
use common::*;

/// A manual clock a minute ahead of the host's, a share whose service
/// reads it, and a new file "f" opened read/write.
fn setup() -> (Arc<ManualClock>, Env, Opened) {
    let clock = Arc::new(ManualClock::new(SystemTime::now() + secs(60)));
    let e = env_with_clock(clock.clone());
    let o = e.open("f", RWA, ALL, Disposition::Create).unwrap();
    (clock, e, o)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn host_mtime(e: &Env, name: &str) -> SystemTime {
    let m = std::fs::metadata(e.host(name)).unwrap();
    UNIX_EPOCH + Duration::new(m.mtime() as u64, m.mtime_nsec() as u32)
}

fn listed(e: &Env, name: &str) -> FileInfo {
    let d = e
        .open("", FILE_LIST_DIRECTORY, ALL, Disposition::Open)
        .unwrap();
    let l = d.handle.read_dir().unwrap();
    l.into_iter().find(|x| x.name == name).unwrap().info
}

const RWA: u32 = RW | FILE_WRITE_ATTRIBUTES | FILE_READ_ATTRIBUTES;

#[test]
fn first_write_shows_two_seconds_later_later_writes_at_close() {
    let (clock, e, o) = setup();
    let start = clock.now();
    let h = &o.handle;
    let t0 = o.info.last_write_time;
    clock.advance(secs(1));
    h.write(0, b"a").unwrap();
    // The host mtime moved; the file still shows the time before the write.
    assert_eq!(h.info().unwrap().last_write_time, t0);
    assert_eq!(listed(&e, "f").last_write_time, t0);
    clock.advance(secs(1));
    assert_eq!(h.info().unwrap().last_write_time, t0);
    // Due 2 s after the write, shown as of then.
    clock.advance(Duration::from_millis(1500));
    let due = start + secs(3);
    assert_eq!(h.info().unwrap().last_write_time, due);
    assert_eq!(listed(&e, "f").last_write_time, due);
    // A second write is only noted for the close.
    h.write(1, b"b").unwrap();
    clock.advance(secs(3));
    assert_eq!(h.info().unwrap().last_write_time, due);
    let other = e
        .open("f", FILE_READ_ATTRIBUTES, ALL, Disposition::Open)
        .unwrap();
    assert_eq!(other.info.last_write_time, due);
    let closed_at = clock.now();
    assert_eq!(h.close().unwrap().last_write_time, closed_at);
    assert_eq!(other.handle.info().unwrap().last_write_time, closed_at);
    clock.advance(secs(1));
    // The last close hands the time to the host.
    assert_eq!(other.handle.close().unwrap().last_write_time, closed_at);
    assert_eq!(host_mtime(&e, "f"), closed_at);
}

#[test]
fn update_due_before_a_later_write_still_counts() {
    let (clock, _e, o) = setup();
    let start = clock.now();
    let h = &o.handle;
    h.write(0, b"a").unwrap();
    // Nobody looks until after the update fell due; then a write.
    clock.advance(secs(5));
    h.write(0, b"b").unwrap();
    assert_eq!(h.info().unwrap().last_write_time, start + secs(2));
    clock.advance(secs(1));
    // That write moves the time at the close.
    assert_eq!(h.close().unwrap().last_write_time, start + secs(6));
}

#[test]
fn one_write_shown_then_closed_keeps_its_time() {
    let (clock, e, o) = setup();
    let start = clock.now();
    o.handle.write(0, b"a").unwrap();
    clock.advance(secs(4));
    assert_eq!(o.handle.info().unwrap().last_write_time, start + secs(2));
    clock.advance(secs(1));
    assert_eq!(o.handle.close().unwrap().last_write_time, start + secs(2));
    assert_eq!(host_mtime(&e, "f"), start + secs(2));
}

#[test]
fn flush_eof_allocation_and_basic_update_at_once() {
    let (clock, e, o) = setup();
    let h = &o.handle;
    let t0 = o.info.last_write_time;
    // Nothing written through this open: flushing or setting the same
    // size changes nothing.
    clock.advance(secs(1));
    h.flush().unwrap();
    h.set_end_of_file(0).unwrap();
    assert_eq!(h.info().unwrap().last_write_time, t0);
    for (n, op) in ["flush", "eof", "basic"].into_iter().enumerate() {
        clock.advance(secs(1));
        h.write(0, b"x").unwrap();
        assert_ne!(h.info().unwrap().last_write_time, clock.now(), "{op}");
        clock.advance(Duration::from_millis(500));
        match op {
            "flush" => h.flush().unwrap(),
            "eof" => h.set_end_of_file(1).unwrap(),
            _ => h.set_basic([None; 4], None).unwrap(),
        }
        let now = clock.now();
        assert_eq!(h.info().unwrap().last_write_time, now, "{op} {n}");
        // Consumed: a later close does not move it again.
        clock.advance(secs(3));
        assert_eq!(h.info().unwrap().last_write_time, now, "{op} {n}");
    }
    // A new size moves it whether or not this open wrote.
    let g = e.open("f", RWA, ALL, Disposition::Open).unwrap();
    clock.advance(secs(1));
    g.handle.set_end_of_file(7).unwrap();
    assert_eq!(g.handle.info().unwrap().last_write_time, clock.now());
    clock.advance(secs(1));
    g.handle.set_allocation(1 << 16).unwrap();
    let at = clock.now();
    assert_eq!(h.info().unwrap().last_write_time, at);
    g.handle.close().unwrap();
    clock.advance(secs(1));
    assert_eq!(h.close().unwrap().last_write_time, at);
    assert_eq!(host_mtime(&e, "f"), at);
}

#[test]
fn a_set_write_time_sticks_for_its_open() {
    let (clock, e, o) = setup();
    let start = clock.now();
    let h = &o.handle;
    h.write(0, b"a").unwrap();
    let set = UNIX_EPOCH + secs(1_500_000_000);
    h.set_basic([None, None, Some(set), None], None).unwrap();
    clock.advance(secs(5));
    h.write(0, b"b").unwrap();
    h.flush().unwrap();
    clock.advance(secs(5));
    assert_eq!(h.info().unwrap().last_write_time, set);
    assert_eq!(h.close().unwrap().last_write_time, set);
    assert_eq!(host_mtime(&e, "f"), set);
    // Another open's write, set through a second open: the writer's own
    // close does not undo it once its update has been made.
    let w = e.open("f", RWA, ALL, Disposition::Open).unwrap();
    w.handle.write(0, b"c").unwrap();
    w.handle.set_end_of_file(1).unwrap();
    let a = e
        .open("f", FILE_WRITE_ATTRIBUTES, ALL, Disposition::Open)
        .unwrap();
    let later = start + secs(86_400);
    a.handle
        .set_basic([None, None, Some(later), None], None)
        .unwrap();
    a.handle.close().unwrap();
    clock.advance(secs(1));
    assert_eq!(w.handle.close().unwrap().last_write_time, later);
    assert_eq!(host_mtime(&e, "f"), later);
}

#[test]
fn a_set_change_time_is_kept_until_the_file_changes() {
    let e = env();
    let o = e.open("f", RWA, ALL, Disposition::Create).unwrap();
    let h = &o.handle;
    for t in [
        UNIX_EPOCH + secs(1),
        UNIX_EPOCH - secs(63_158_400),
        UNIX_EPOCH + Duration::new(10_000_000_000, 100),
    ] {
        h.set_basic([Some(t), None, Some(t), Some(t)], None)
            .unwrap();
        let i = h.info().unwrap();
        assert_eq!(
            (i.creation_time, i.last_write_time, i.change_time),
            (t, t, t)
        );
        assert_eq!(listed(&e, "f").change_time, t);
    }
    let ct = UNIX_EPOCH + secs(1_000_000_000);
    h.set_basic([None, None, None, Some(ct)], None).unwrap();
    // Kept across closes and shown in listings.
    h.close().unwrap();
    let o = e.open("f", RWA, ALL, Disposition::Open).unwrap();
    assert_eq!(o.info.change_time, ct);
    assert_eq!(listed(&e, "f").change_time, ct);
    // Setting the attributes is a change of its own.
    o.handle.set_basic([None; 4], Some(attr::HIDDEN)).unwrap();
    assert_ne!(o.handle.info().unwrap().change_time, ct);
    o.handle
        .set_basic([None, None, None, Some(ct)], Some(attr::ARCHIVE))
        .unwrap();
    assert_eq!(o.handle.info().unwrap().change_time, ct);
    // ... except through the open that set the ChangeTime.
    o.handle.set_basic([None; 4], Some(attr::READONLY)).unwrap();
    assert_eq!(o.handle.info().unwrap().change_time, ct);
    o.handle.set_basic([None; 4], Some(attr::ARCHIVE)).unwrap();
    assert_eq!(listed(&e, "f").change_time, ct);
    // So is a write, once its LastWriteTime has been made.
    o.handle.write(0, b"x").unwrap();
    o.handle.close().unwrap();
    let after = listed(&e, "f").change_time;
    assert_ne!(after, ct);
    assert!(after > UNIX_EPOCH + secs(1_600_000_000));
}
