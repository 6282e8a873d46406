//! The credit arithmetic on a manual clock: no sleeping, exact times.

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: f64) -> Duration {
    Duration::from_secs_f64(n)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

fn burst_limits() -> Limits {
    // Baseline 100, burst 300, a 1000-credit bucket.
    Limits {
        iops: Some(100),
        burst_iops: Some(300),
        burst_credits: Some(1000),
        ..Limits::default()
    }
}

fn ops(n: u64) -> Cost {
    Cost {
        ops: n,
        ..Cost::default()
    }
}

/// A client that always has another request: admitted requests counted
/// until `to` (one that would go exactly at `to` is not counted), waiting
/// exactly as long as each verdict says.
fn greedy(t: &mut Throttle, cost: Cost, from: Duration, to: Duration) -> (u64, Duration) {
    let mut now = from;
    let mut n = 0;
    while now < to {
        match t.admit(&cost, now) {
            Verdict::Go => n += 1,
            Verdict::Wait { until, .. } => now = until.expect("limits refill"),
        }
    }
    (n, now)
}

#[test]
fn the_credit_bucket_is_full_at_start() {
    let mut t = Throttle::new(burst_limits(), ms(0));
    assert_eq!(t.credits(ms(0)), 1000.0);
    assert_eq!(t.credit_capacity(), 1000.0);
    // The default size: an hour of the burst above baseline.
    let d = Throttle::new(
        Limits {
            burst_credits: None,
            ..burst_limits()
        },
        ms(0),
    );
    assert_eq!(d.credit_capacity(), 200.0 * 3600.0);
}

#[test]
fn baseline_is_spent_before_credits() {
    let mut t = Throttle::new(burst_limits(), ms(0));
    // The baseline bucket holds a tenth of a second: 10 operations.
    assert_eq!(t.admit(&ops(10), ms(0)), Verdict::Go);
    assert_eq!(t.credits(ms(0)), 1000.0);
    assert_eq!(t.admit(&ops(10), ms(0)), Verdict::Go);
    assert_eq!(t.credits(ms(0)), 990.0);
}

#[test]
fn credits_are_spent_one_per_operation_above_baseline() {
    let mut t = Throttle::new(burst_limits(), ms(0));
    // 2 s at the burst rate: 600 operations (plus the burst-rate bucket's
    // 30 at the start, less the one due at 2 s), of which the baseline
    // paid 200 (plus its 10).
    let (n, end) = greedy(&mut t, ops(1), ms(0), secs(2.0));
    assert_eq!(n, 629);
    let credits = t.credits(end);
    assert!(
        (credits - (1000.0 - (630.0 - 210.0))).abs() < 1.0,
        "{credits}"
    );
}

#[test]
fn the_burst_lasts_while_credits_do_then_baseline() {
    let mut t = Throttle::new(burst_limits(), ms(0));
    // Credits 1000 drain at 300 - 100 = 200/s: empty after about 5 s.
    let (burst, _) = greedy(&mut t, ops(1), ms(0), secs(4.0));
    assert!((1225..=1235).contains(&burst), "{burst}");
    greedy(&mut t, ops(1), secs(4.0), secs(6.0));
    let (later, _) = greedy(&mut t, ops(1), secs(6.0), secs(16.0));
    // Credits gone: the baseline, 100/s.
    assert!((999..=1001).contains(&later), "{later}");
    assert!(t.credits(secs(16.0)) < 1.0);
}

#[test]
fn credits_accrue_at_baseline_minus_use() {
    let mut t = Throttle::new(burst_limits(), ms(0));
    greedy(&mut t, ops(1), ms(0), secs(6.0));
    let low = t.credits(secs(6.0));
    assert!(low < 1.0, "{low}");
    // Idle for 2 s: the baseline bucket fills first (10), then 190 earned.
    let c = t.credits(secs(8.0));
    // (less what the baseline bucket still lacked at 6 s, under one).
    assert!((c - (low + 190.0)).abs() <= 1.0, "{c} {low}");
    // Using 40/s for 1 s earns 60.
    let before = t.credits(secs(8.0));
    let mut now = secs(8.0);
    for _ in 0..40 {
        now += ms(25);
        assert_eq!(t.admit(&ops(1), now), Verdict::Go);
    }
    let after = t.credits(now);
    // (to within the baseline bucket's last token, not yet overflowed)
    assert!((after - before - 60.0).abs() <= 1.0, "{}", after - before);
    // Never above the bucket.
    assert_eq!(t.credits(secs(1000.0)), 1000.0);
}

#[test]
fn never_above_burst_nor_above_baseline_without_a_burst() {
    let mut t = Throttle::new(
        Limits {
            iops: Some(500),
            ..Limits::default()
        },
        ms(0),
    );
    let (n, _) = greedy(&mut t, ops(1), ms(0), secs(10.0));
    // 500/s and the bucket's 50 at the start.
    assert_eq!(n, 5049);
    assert_eq!(t.credit_capacity(), 0.0);
}

#[test]
fn large_io_counts_as_several_operations() {
    let mut t = Throttle::new(
        Limits {
            iops: Some(160),
            ..Limits::default()
        },
        ms(0),
    );
    // 1 MiB = 16 units of 64 KiB: 10 per second.
    let mib = Cost::io(1 << 20, false, crate::limits::DEFAULT_IO_UNIT, None);
    let (n, _) = greedy(&mut t, mib, ms(0), secs(10.0));
    assert_eq!(n, 100);
}

#[test]
fn a_request_larger_than_every_bucket_still_goes() {
    let mut t = Throttle::new(
        Limits {
            iops: Some(10),
            ..Limits::default()
        },
        ms(0),
    );
    assert_eq!(t.admit(&ops(50), ms(0)), Verdict::Go);
    // 49 owed: the next operation waits until the debt is paid and one more
    // operation has accrued.
    assert_eq!(
        t.admit(&ops(1), ms(0)),
        Verdict::Wait {
            until: Some(secs(5.0)),
            reason: Reason::Iops
        }
    );
}

#[test]
fn throughput_is_capped_each_way_without_burst() {
    let mib = 1024 * 1024;
    let mut t = Throttle::new(
        Limits {
            ingress_mibps: Some(20.0),
            egress_mibps: Some(10.0),
            ..Limits::default()
        },
        ms(0),
    );
    let w = Cost::io(64 * 1024, true, 65536, None);
    let r = Cost::io(64 * 1024, false, 65536, None);
    let (writes, _) = greedy(&mut t, w, ms(0), secs(10.0));
    // 20 MiB/s of 64 KiB: 320/s, and 2 MiB at the start.
    assert_eq!(writes, 3231);
    let (reads, _) = greedy(&mut t, r, secs(10.0), secs(20.0));
    // Reads were not slowed by the writes: 160/s and 1 MiB at the start.
    assert_eq!(reads, 1615);
    // The one due exactly then goes; the next waits.
    assert_eq!(t.admit(&r, secs(20.0)), Verdict::Go);
    match t.admit(&r, secs(20.0)) {
        Verdict::Wait { reason, .. } => assert_eq!(reason, Reason::Egress),
        v => panic!("{v:?}"),
    }
    let _ = mib;
}

#[test]
fn metadata_has_its_own_budget() {
    let mut t = Throttle::new(
        Limits {
            metadata_iops: Some(100),
            ..Limits::default()
        },
        ms(0),
    );
    let (md, _) = greedy(&mut t, Cost::metadata(), ms(0), secs(1.0));
    assert_eq!(md, 109);
    // I/O is not held by the metadata budget.
    assert_eq!(t.admit(&ops(1), secs(1.0)), Verdict::Go);
    // The one due exactly then goes; the next waits.
    assert_eq!(t.admit(&Cost::metadata(), secs(1.0)), Verdict::Go);
    match t.admit(&Cost::metadata(), secs(1.0)) {
        Verdict::Wait { reason, .. } => assert_eq!(reason, Reason::Metadata),
        v => panic!("{v:?}"),
    }
}

#[test]
fn per_file_limits_hold_one_file_not_the_others() {
    let mut t = Throttle::new(
        Limits {
            file_iops: Some(50),
            ..Limits::default()
        },
        ms(0),
    );
    let f = |id| Cost {
        file: Some(id),
        ..ops(1)
    };
    let (a, _) = greedy(&mut t, f(1), ms(0), secs(2.0));
    assert_eq!(a, 104);
    // The one due exactly then goes; the next waits.
    assert_eq!(t.admit(&f(1), secs(2.0)), Verdict::Go);
    match t.admit(&f(1), secs(2.0)) {
        Verdict::Wait { reason, .. } => assert_eq!(reason, Reason::File),
        v => panic!("{v:?}"),
    }
    assert_eq!(t.admit(&f(2), secs(2.0)), Verdict::Go);
}

#[test]
fn limits_change_mid_burst() {
    let mut t = Throttle::new(burst_limits(), ms(0));
    greedy(&mut t, ops(1), ms(0), secs(2.0));
    let mid = t.credits(secs(2.0));
    // A bigger bucket keeps the credits (they are not topped up); the
    // new burst applies from now on.
    let bigger = Limits {
        burst_iops: Some(600),
        burst_credits: Some(5000),
        ..burst_limits()
    };
    t.set_limits(bigger, secs(2.0));
    assert!(close(t.credits(secs(2.0)), mid));
    assert_eq!(t.credit_capacity(), 5000.0);
    let (n, end) = greedy(&mut t, ops(1), secs(2.0), secs(2.5));
    // 0.5 s at 600/s (the new burst-rate bucket continues, not refilled).
    assert!((299..=301).contains(&n), "{n}");
    // 300 spent, 50 of them from the baseline.
    assert!(
        (t.credits(end) - (mid - 250.0)).abs() < 1.0,
        "{} {}",
        t.credits(end),
        mid
    );
    // A smaller bucket drops the credits above it.
    t.set_limits(
        Limits {
            burst_credits: Some(100),
            ..burst_limits()
        },
        end,
    );
    assert_eq!(t.credits(end), 100.0);
    // No burst at all: no credits.
    t.set_limits(
        Limits {
            iops: Some(100),
            ..Limits::default()
        },
        end,
    );
    assert_eq!(t.credits(end), 0.0);
    let (n, _) = greedy(&mut t, ops(1), end + secs(1.0), end + secs(3.0));
    assert!((209..=211).contains(&n), "{n}");
}

#[test]
fn no_limits_admit_everything() {
    let mut t = Throttle::new(Limits::default(), ms(0));
    for _ in 0..10_000 {
        assert_eq!(t.admit(&ops(16), ms(0)), Verdict::Go);
    }
}
